//! [S29] A page view is decided at its document: `smart_limit_documents` in the location
//! `limit_req` guards decides page views before `limit_req`, and in the room a page's
//! sub-resource never takes a place of its own (docs/design.md, "A page view is decided at its
//! document").

#[allow(clippy::wildcard_imports)]
use super::*;

/// What a location asks of its room.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// `smart_limit`: every request goes through the room.
    Room,
    /// `smart_limit_documents`: the room decides page views at their document, before the
    /// location's `limit_req` (see [`documents_decided_here`]).
    Documents,
}

/// [S29] `smart_limit_documents`: whether the room decides this request here, before the rate
/// limit, rather than letting it go on to `limit_req` (whose overflow reaches the room through
/// `error_page`). A dynamic module's PREACCESS handler runs before the built-in ones, so this
/// is the first look at the request.
///
/// - An admitted ticket goes on: under the limit to the origin, over it to the room, which
///   passes it.
/// - A ticket holding a place is decided by the room on every request but a sub-resource
///   (the waiting page's reloads and polls never reach the origin, whatever the rate limit
///   says; a custom waiting page's images still load).
/// - A newcomer's document is decided by the room while the room is engaged (a line, no free
///   place): the person meets the waiting page at its first document, and only admitted
///   clients ask for a page's assets. While the room is idle the document goes on untouched
///   (at most a look at the zone's shared memory, [S1]), and its response carries a page
///   pass (`crate::filter`) so that its assets, which may overflow the limit, pass too.
/// - Anything else goes on untouched.
pub(super) fn documents_decided_here(
    r: &mut Request,
    zone: &'static Zone,
    fetch: Fetch,
    state: Option<TicketState>,
    holds_place: bool,
    now: u64,
) -> bool {
    if state == Some(TicketState::Admitted) {
        return false;
    }
    if holds_place {
        return fetch != Fetch::Asset;
    }
    if fetch != Fetch::Document {
        return false;
    }
    if zone.engaged(now) {
        return true;
    }
    if let Some(ctx) = RequestCtx::get_or_insert(r) {
        ctx.page_pass = Some(zone);
    }
    false
}

/// What the room does with a page's sub-resource from a client that is not admitted.
pub(super) enum SubResource {
    /// Not a page's sub-resource (or one the room decides as any request: a waiting page's
    /// poll): the room's usual rules.
    NotOne,
    /// Answered, or let through on its page's pass.
    Done(ngx_int_t),
    /// On its page's pass while the room is idle: the pass's person takes a free place.
    Place(u64),
}

/// [S29] A page's sub-resource from a client that is not admitted never takes a place in
/// line nor a ticket of its own. On its page's pass (its document was served under the rate
/// limit moments ago, while the room was idle) it goes on; while the room is still idle the
/// person the pass names takes a free place first ([`page_visit`]: one place a page, the
/// way the room counts people), while it is engaged (it filled since) the page just finishes.
/// An asset without a pass gets a bare waiting status. A page script's call without a pass
/// is a program's request and follows the room's rules, as does any request of a client
/// holding a place (the waiting page's polls).
pub(super) fn sub_resource(
    r: &mut Request,
    lcf: &LocConf,
    zone: &'static Zone,
    fetch: Fetch,
    holds_place: bool,
    now: u64,
) -> SubResource {
    if !fetch.of_a_page() || (holds_place && fetch == Fetch::Call) {
        return SubResource::NotOne;
    }
    if let Some(sid) = cookie::page_pass(r, zone, now) {
        if !zone.engaged(now) {
            return SubResource::Place(sid);
        }
        let fate = Fate::of(Outcome::PagePass, Reply::GoOn);
        return SubResource::Done(deliver(r, lcf, zone, now, fate));
    }
    if fetch != Fetch::Asset {
        return SubResource::NotOne;
    }
    let reply = if dry_run(r, lcf) {
        Reply::GoOn
    } else {
        Reply::AssetRefused
    };
    let fate = Fate::of(Outcome::AssetRefused, reply);
    SubResource::Done(deliver(r, lcf, zone, now, fate))
}

/// [S29] The person a page pass names takes the idle room's free place, as a client back from
/// the cookie check does (its address's flood budget pays); the page's other sub-resources,
/// asking on the same pass, find that session admitted (in the zone's shared memory, where
/// every store notes its admissions) and take nothing more. The sub-resource goes on whatever
/// the room says ([`page_concluded`]).
pub(super) fn page_visit(
    r: &mut Request,
    lcf: &LocConf,
    zone: &'static Zone,
    sid: u64,
    now: u64,
) -> ngx_int_t {
    let turn = Turn::new(r, lcf, zone, now, true);
    if zone.is_admitted(sid, now) {
        return turn.deliver(r, admitted(&turn, sid, Outcome::Passed));
    }
    let visit = Visit {
        sid,
        qnum: 0,
        draw: draw(now, sid),
        flood_key: Some(flood_key(r, zone)),
        arrival: now,
        page: true,
    };
    match zone.visit(visit, None, now) {
        Answer::Now(result) => conclude(r, &turn, result),
        Answer::Later(future) => suspend(r, turn, future),
    }
}

/// The room's answer to a page's sub-resource on its pass ([`page_visit`]). Let in: the
/// admitted ticket, and the sub-resource goes on. A place in line (the room filled in the
/// meantime): that is the person's one place, written into its ticket for its next document,
/// and this sub-resource of a page already served goes on. Anything else (flood control, a
/// closed room, a store failure): it goes on, and nobody takes a place.
pub(super) fn page_concluded(
    r: &Request,
    turn: &Turn,
    result: Result<Decision, StoreError>,
) -> Fate {
    let mut ticket = None;
    match result {
        Ok(Decision {
            verdict: Verdict::Admit { sid },
            by_policy,
        }) => {
            let outcome = if by_policy {
                Outcome::Error
            } else {
                Outcome::Admitted
            };
            return admitted(turn, sid, outcome);
        }
        // (Two of the page's sub-resources asked at once, one let in: the other's place is
        // the same person's, unseen from now on, and gone after `presence`.)
        Ok(Decision {
            verdict: Verdict::Wait(place),
            ..
        }) if !turn.dry && !turn.zone.is_admitted(place.sid, turn.now) => {
            turn.zone.count_waiting(None, &place, turn.now);
            ticket = Some(Ticket {
                sid: place.sid,
                qnum: place.qnum,
                issued_at: turn.now,
                accepted_at: 0,
                last_seen: turn.now,
                told: Floor::NONE,
            });
        }
        Ok(_) => {}
        Err(e) => problem(r, turn.zone, turn.now, &e.to_string()),
    }
    Fate {
        ticket,
        ..Fate::of(Outcome::PagePass, Reply::GoOn)
    }
}
