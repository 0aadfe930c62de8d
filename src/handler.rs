//! The room's request handler: request -> ticket -> decision -> answer.
//!
//! 1. Locations without a room, subrequests, the module's own endpoints and requests already
//!    decided before an internal redirect pass untouched; a bypassed request passes, counted.
//! 2. The ticket cookie is opened; a broken, forged, foreign or stale one means a new user.
//! 3. A valid admitted ticket passes without waiting ([S5]); it is only counted as active.
//! 4. Anyone else asks the room ([S3]-[S6]): admitted now (a new ticket, the request goes on),
//!    told to wait (the waiting answer, [S7]), or refused (room closed, line full). A store
//!    that answers later suspends the request ([S9]) and this handler runs again to finish.
//!
//! It runs in the PREACCESS phase, beside `limit_req`, on purpose: admission is rate and
//! capacity control, not access control. In the ACCESS phase, `satisfy any` with a passing
//! `allow` (or any access module that says OK before it) would skip the room altogether;
//! in PREACCESS every request of the location is gated whatever `satisfy` says, and
//! `allow`/`deny`/`auth_*` still apply after it to admitted requests.
//!
//! Room modes: the room applies them (`Room::visit`); here only `reject` matters on the
//! admitted path: a closed room turns admitted tickets away too (maintenance), without
//! spoiling the ticket, which admits again once the room reopens (if still valid).
//! `smart_limit_dry_run`: everything is decided and counted as usual, but a request that
//! would wait or be refused is logged, recorded as `WAITING_DRY_RUN` / `REJECTED_DRY_RUN`,
//! and passes (it still gets its waiting ticket, so it keeps one place, as it would).

use core::future::Future;
use core::pin::Pin;
use std::rc::Rc;

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_http_finalize_request, ngx_http_request_t, ngx_int_t,
    NGX_HTTP_TOO_MANY_REQUESTS, NGX_LOG_ERR, NGX_LOG_WARN,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, Request};
use ngx::ngx_log_error;
use smart_limit_core::fleet;
use smart_limit_core::page::{Fetch, Template, ViewStatus, WaitView};
use smart_limit_core::redis::SpentProof;
use smart_limit_core::room::rules::{self, Mode, TicketState};
use smart_limit_core::room::{flood_hash, PassVerdict, Place, Refusal, Verdict, Visit};
use smart_limit_core::ticket::{self, Ticket};
use smart_limit_core::zone::StoreKind;

use crate::answer;
use crate::challenge::{self, Challenge, Gate};
use crate::clock::now_ms;
use crate::conf::{DryRun, Endpoint, LocConf};
use crate::cookie;
use crate::ctx::{Decided, Outcome, PendingDecision, RequestCtx, Suspended};
use crate::endpoint::poll;
use crate::inflight;
use crate::request::{self, HeaderValue, RequestExt, DECLINED, INTERNAL_ERROR};
use crate::store::{Answer, Decision, Passed, StoreError, Zone};
use crate::Module;

/// Puts the handler in the PREACCESS phase (postconfiguration).
pub fn install(cf: &mut ngx_conf_t) -> Result<(), ()> {
    request::install_preaccess(cf, preaccess_handler)
}

unsafe extern "C" fn preaccess_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    request::entry(r, "while deciding, request refused", INTERNAL_ERROR, handle)
}

fn handle(r: &mut Request) -> ngx_int_t {
    let Some((lcf, zone, role)) = room_of(r) else {
        return DECLINED;
    };
    if let Some(rc) = resume_or_skip(r, lcf, zone) {
        return rc;
    }
    if lcf.bypass().is_some_and(|cv| r.switch_on(cv, &[])) {
        zone.count_bypass();
        record(r, zone, Outcome::Bypass, None, None);
        return DECLINED;
    }
    if zone.keys.is_none() {
        return INTERNAL_ERROR;
    }
    let now = now_ms();
    let fetch = r.fetch();
    let ticket = cookie::read_ticket(r, zone);
    let state = ticket.map(|t| rules::ticket_state(&t, zone.admission_at(now), now));
    let holds_place = state == Some(TicketState::Waiting) && ticket.is_some_and(|t| t.qnum != 0);
    if role == Role::Documents && !documents_decided_here(r, zone, fetch, state, holds_place, now) {
        return DECLINED;
    }
    let mut closed_to_admitted = None;
    if let (Some(t), Some(TicketState::Admitted)) = (ticket, state) {
        match zone.pass(t.sid, now) {
            Ok(Passed { verdict, seen_at }) => match verdict {
                // A closed room turns everyone away: the admitted ticket goes to the room
                // like any visitor (which refuses and counts it) and is left as it is.
                PassVerdict::Closed => closed_to_admitted = Some(t.sid),
                PassVerdict::Limited { retry_ms } => return limited(r, zone, t.sid, retry_ms),
                v => {
                    let counted = v == PassVerdict::Counted;
                    return pass_admitted(r, lcf, zone, t, counted, seen_at, now);
                }
            },
            Err(e) => {
                problem(r, zone, now, &e.to_string());
                return pass_admitted(r, lcf, zone, t, true, now, now);
            }
        }
    } else if let Some(rc) = sub_resource(r, lcf, zone, fetch, holds_place, now) {
        return rc;
    }
    // `one_place_per=`: a client with a user key waits as that key's session, whichever
    // ticket it holds (a ticket of another key, or of none, takes the key's place).
    let user = user_sid(r, zone);
    let held = ticket
        .filter(|_| state == Some(TicketState::Waiting))
        .map(|t| match user {
            Some(sid) if sid != t.sid => Ticket { sid, qnum: 0, ..t },
            _ => t,
        });
    let mut turn = Turn {
        lcf,
        zone,
        now,
        dry: dry_run(r, lcf),
        held,
        spent: None,
    };
    let visit = match (held, closed_to_admitted) {
        // A waiting ticket: its place (or, for a ticket from the first contact, a place to
        // take, paid from its address's flood budget, and with `challenge=pow` a proof).
        (Some(t), _) => {
            if !turn.dry {
                match challenge::gate(r, zone, &t, now) {
                    Gate::Pass { spent: Some(proof) } => {
                        cookie::delete_proof(r, zone);
                        turn.spent = Some(proof);
                    }
                    Gate::Pass { spent: None } => {}
                    Gate::Challenge(c) => return challenged(r, &turn, &t, c),
                }
            }
            let (qnum, arrival) = place_of(zone, &t, now);
            Visit {
                sid: t.sid,
                qnum,
                draw: draw(now, t.sid),
                flood_key: (t.qnum == 0).then(|| flood_key(r, zone)),
                arrival,
            }
        }
        (None, Some(sid)) => Visit {
            sid,
            qnum: 0,
            draw: draw(now, 0),
            flood_key: None,
            arrival: now,
        },
        // First contact (no ticket, or a stale, forged or foreign one): the client gets a
        // ticket and comes back with it before the room gives it anything ([S15]), unless the
        // room is closed (refused) or lets everyone in.
        (None, None) => {
            let sid = match user.map_or_else(ticket::random_sid, Ok) {
                Ok(sid) => sid,
                Err(_) => return INTERNAL_ERROR,
            };
            match zone.arrival(now) {
                Mode::Reject | Mode::Passthrough => Visit {
                    sid,
                    qnum: 0,
                    draw: draw(now, 0),
                    flood_key: None,
                    arrival: now,
                },
                // A dry run shows no cookie check: the room decides at once, as it would when
                // the client came back with its ticket (and so counts the same).
                _ if turn.dry => Visit {
                    sid,
                    qnum: 0,
                    draw: draw(now, 0),
                    flood_key: Some(flood_key(r, zone)),
                    arrival: now,
                },
                _ => return arrived(r, &turn, sid),
            }
        }
    };
    match zone.visit(visit, turn.spent, now) {
        Answer::Now(result) => conclude(r, &turn, result),
        Answer::Later(future) => suspend(r, turn, future),
    }
}

/// The place a waiting ticket holds (its queue number) and when it took it. A synced room's
/// ticket carries the moment as its queue number and keeps it while it is seen (see
/// [`fleet::place_arrival`]); a place gone, or never taken (the ticket of the cookie check),
/// is taken now: number 0, arrival now. The other stores keep places themselves.
///
/// While an event's pre-queue is open (`shuffle=on`), a synced room's new place dates from a
/// moment drawn in the pre-queue ([`fleet::lottery_arrival`]): the start's lottery.
fn place_of(zone: &Zone, t: &Ticket, now: u64) -> (u64, u64) {
    if zone.fleet.is_none() {
        return (t.qnum, now);
    }
    let ev = zone.event_now(now);
    let lottery = ev.as_ref().and_then(|(e, _)| e.lottery_ms());
    let presence = zone.limits.presence_ms;
    let ticket = (t.qnum, t.issued_at, t.last_seen);
    let skew = rules::MAX_CLOCK_SKEW_MS;
    if let Some(arrival) = fleet::place_arrival(ticket, now, presence, skew, lottery.clone()) {
        return (t.qnum, arrival);
    }
    match (ev, lottery) {
        (Some((_, e)), Some(moments)) if !e.started => {
            (0, fleet::lottery_arrival(moments).unwrap_or(now))
        }
        _ => (0, now),
    }
}

/// Whether a waiting ticket is written again: its place changed, or (a synced room) its
/// `last_seen` is a quarter of a presence old ([`fleet::ticket_renew_ms`]), so every node can
/// tell it is still present. (Its stamp is then of an earlier epoch of the line's counts,
/// which [`tally_waiting`] moves it from.)
fn renew_waiting(zone: &Zone, held: Option<Ticket>, place: &Place, now: u64) -> bool {
    let Some(t) = held else { return true };
    if t.qnum != place.qnum || t.sid != place.sid {
        return true;
    }
    zone.fleet.is_some()
        && now.saturating_sub(t.last_seen) >= fleet::ticket_renew_ms(zone.limits.presence_ms)
}

/// A synced room's waiting ticket written again: counted in this epoch (and taken off the
/// epoch of its old stamp, when it keeps its place).
fn tally_waiting(zone: &Zone, held: Option<Ticket>, place: &Place, now: u64) {
    if zone.fleet.is_none() {
        return;
    }
    let stamp = held
        .filter(|t| t.qnum != 0 && t.qnum == place.qnum && t.sid == place.sid)
        .map(|t| t.last_seen);
    zone.tally_seen(place.qnum, stamp, now);
}

/// `one_place_per=`: the session id of this request's user key (None: no such setting, or an
/// empty value).
fn user_sid(r: &Request, zone: &Zone) -> Option<u64> {
    // SAFETY: null, or a complex value compiled into the configuration's pool.
    let cv = unsafe { zone.one_place_per.get().as_ref() }?;
    let value = r.get_complex_value(cv)?;
    let key = value.as_bytes();
    if key.is_empty() {
        return None;
    }
    Some(zone.keys.as_ref()?.user_sid(&zone.params.name, key))
}

/// Flood control's key for this request: `flood_key=` (a value with variables), else the
/// client's address (an IPv6 address by its /64: one subscriber's network), hashed.
fn flood_key(r: &Request, zone: &Zone) -> u64 {
    // SAFETY: null, or a complex value compiled into the configuration's pool.
    let key = match unsafe { zone.flood_key.get().as_ref() } {
        Some(cv) => r
            .get_complex_value(cv)
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default(),
        None => r.client_address().to_vec(),
    };
    flood_hash(zone.flood_seed.get(), &key)
}

/// A first contact: a ticket with no place yet, and `307` back to the same URL (a cookie
/// check: a browser returns at once with the ticket; a client that keeps no cookie never
/// gets anything from the room).
fn arrived(r: &mut Request, turn: &Turn, sid: u64) -> ngx_int_t {
    let t = Ticket {
        sid,
        qnum: 0,
        issued_at: turn.now,
        accepted_at: 0,
        last_seen: turn.now,
    };
    cookie::set_ticket(r, turn.zone, &t);
    record(r, turn.zone, Outcome::New, None, None);
    let rc = answer::cookie_check(r);
    finish(r, rc)
}

/// `challenge=pow`: the challenge answer (the seed to solve, no place); the page solves it
/// and comes back, or without script comes back after `wait_secs` and takes its place then.
fn challenged(r: &mut Request, turn: &Turn, t: &Ticket, c: Challenge) -> ngx_int_t {
    // The first challenge starts the ticket's no-script wait: written into it as its check-in.
    if c.first {
        let challenged = Ticket {
            last_seen: turn.now,
            ..*t
        };
        cookie::set_ticket(r, turn.zone, &challenged);
    }
    record(r, turn.zone, Outcome::Challenged, None, None);
    let mut view = turn.view(ViewStatus::Challenge, None);
    view.challenge = Some((c.seed, c.bits));
    view.queue_len = turn.zone.snapshot(turn.now).map_or(0, |s| s.queue_len);
    if let Some(secs) = c.no_script_secs {
        view.refresh_secs = secs.max(1);
    }
    let rc = answer::waiting(r, turn.lcf, None, &view);
    finish(r, rc)
}

/// An admitted session over its request rate: `429` with `Retry-After`, nothing else.
fn limited(r: &mut Request, zone: &'static Zone, sid: u64, retry_ms: u64) -> ngx_int_t {
    record(r, zone, Outcome::Limited, None, Some(sid));
    let mut n = itoa::Buffer::new();
    let secs = retry_ms.div_ceil(1000).max(1);
    r.add_static_header("Retry-After", HeaderValue::Copied(n.format(secs)));
    NGX_HTTP_TOO_MANY_REQUESTS as ngx_int_t
}

/// The room this request goes through, and how: its location gates every request
/// (`smart_limit`), or decides page views at their document (`smart_limit_documents`).
/// Only main requests to locations that are not one of the module's endpoints.
fn room_of(r: &Request) -> Option<(&'static LocConf, &'static Zone, Role)> {
    let lcf = Module::location_conf(r)?;
    if !r.is_main() || lcf.endpoint != Endpoint::None {
        return None;
    }
    let mcf = Module::main_conf(r)?;
    if let Some(zone) = lcf.zone(mcf) {
        return Some((lcf, zone, Role::Room));
    }
    lcf.documents_zone(mcf)
        .map(|zone| (lcf, zone, Role::Documents))
}

/// What a location asks of its room.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
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
fn documents_decided_here(
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

/// [S29] A page's sub-resource from a client that is not admitted never takes a place nor a
/// ticket: on its page's pass (its document was served under the rate limit moments ago) it
/// passes; an asset without one gets a bare waiting status. A page script's call without a
/// pass is a program's request and follows the room's rules, as does any request of a
/// client holding a place (the waiting page's polls).
fn sub_resource(
    r: &mut Request,
    lcf: &LocConf,
    zone: &'static Zone,
    fetch: Fetch,
    holds_place: bool,
    now: u64,
) -> Option<ngx_int_t> {
    if !fetch.of_a_page() || (holds_place && fetch == Fetch::Call) {
        return None;
    }
    if cookie::has_page_pass(r, zone, now) {
        record(r, zone, Outcome::PagePass, None, None);
        return Some(DECLINED);
    }
    if fetch != Fetch::Asset {
        return None;
    }
    record(r, zone, Outcome::AssetRefused, None, None);
    if dry_run(r, lcf) {
        return Some(DECLINED);
    }
    let rc = answer::asset_refused(r, lcf);
    Some(finish(r, rc))
}

/// A request seen before: waiting for the store (finish it when the answer is in), or
/// decided before an internal redirect (it goes on, decided and counted once).
fn resume_or_skip(r: &mut Request, lcf: &LocConf, zone: &'static Zone) -> Option<ngx_int_t> {
    let ctx = RequestCtx::find(r)?;
    let Some(Suspended::Decision(pending)) = ctx.suspended.take() else {
        return ctx.decided.is_some().then_some(DECLINED);
    };
    let Some(result) = pending.call.take() else {
        // Woken before the answer came: keep waiting.
        ctx.suspended = Some(Suspended::Decision(pending));
        return Some(Status::NGX_AGAIN.0);
    };
    let turn = Turn {
        lcf,
        zone,
        now: pending.now,
        dry: pending.dry,
        held: pending.held,
        spent: pending.spent,
    };
    Some(conclude(r, &turn, result))
}

/// `smart_limit_dry_run` for this request.
fn dry_run(r: &Request, lcf: &LocConf) -> bool {
    match lcf.dry_run {
        DryRun::On => true,
        DryRun::Off | DryRun::Unset => false,
        // SAFETY: a complex value compiled into the configuration's pool.
        DryRun::Var(cv) => unsafe { cv.as_ref() }.is_some_and(|cv| r.switch_on(cv, &[b"off"])),
    }
}

/// Records the decision in the request's context (for `$smart_limit_*` and the filter).
fn record(
    r: &mut Request,
    zone: &'static Zone,
    outcome: Outcome,
    position: Option<u64>,
    sid: Option<u64>,
) {
    if let Some(ctx) = RequestCtx::get_or_insert(r) {
        ctx.decided = Some(Decided {
            zone,
            outcome,
            position,
            sid,
        });
    }
}

/// [S5]: a valid admitted ticket passes; in session mode its ticket is renewed now and then,
/// up to `seen_at`, the store's last sight of the session.
fn pass_admitted(
    r: &mut Request,
    lcf: &LocConf,
    zone: &'static Zone,
    t: Ticket,
    counted: bool,
    seen_at: u64,
    now: u64,
) -> ngx_int_t {
    if !counted {
        problem(
            r,
            zone,
            now,
            "has no memory left to count admitted sessions; increase its size=",
        );
    }
    if rules::needs_renewal(&t, zone.admission_at(now), seen_at) {
        let renewed = Ticket {
            last_seen: seen_at,
            ..t
        };
        cookie::set_ticket(r, zone, &renewed);
    }
    record(r, zone, Outcome::Passed, None, Some(t.sid));
    if lcf.poll {
        let rc = poll::admitted_answer(r, lcf, zone, now);
        return finish(r, rc);
    }
    DECLINED
}

/// One decision in the making: where, when, and the waiting ticket the client came with.
struct Turn<'a> {
    lcf: &'a LocConf,
    zone: &'static Zone,
    now: u64,
    dry: bool,
    held: Option<Ticket>,
    /// `challenge=pow`: the key of the proof this visit spent (given back when the visit
    /// gives no place, so that the client's work is not lost).
    spent: Option<SpentProof>,
}

impl Turn<'_> {
    fn room(&self) -> &'static str {
        self.zone.params.name.as_str()
    }

    /// The page of the scheduled event in force (`page=`), if it has one.
    fn event_page(&self) -> Option<Rc<Template>> {
        self.zone.event_now(self.now)?.0.page.clone()
    }

    fn view(&self, status: ViewStatus, place: Option<&Place>) -> WaitView<'static> {
        WaitView {
            room: self.room(),
            status,
            position: place.and_then(|p| (p.position > 0).then_some(p.position)),
            queue_len: place.map_or(0, |p| p.queue_len),
            eta_secs: place.and_then(|p| p.eta_secs),
            refresh_secs: self.lcf.refresh_secs(),
            updated_at: self.now / 1000,
            starts_at: None,
            challenge: None,
        }
    }
}

/// [S9]: the store answers later; the request waits without blocking the worker. When the
/// answer arrives nginx runs the phases again, and [`resume_or_skip`] picks up the result.
fn suspend(
    r: &mut Request,
    turn: Turn,
    future: Pin<Box<dyn Future<Output = Result<Decision, StoreError>>>>,
) -> ngx_int_t {
    let call = inflight::start(r, future);
    let Some(ctx) = RequestCtx::get_or_insert(r) else {
        return INTERNAL_ERROR;
    };
    ctx.suspended = Some(Suspended::Decision(PendingDecision {
        held: turn.held,
        spent: turn.spent,
        now: turn.now,
        dry: turn.dry,
        call,
    }));
    Status::NGX_AGAIN.0
}

/// Turns the room's answer into the request's fate.
fn conclude(r: &mut Request, turn: &Turn, result: Result<Decision, StoreError>) -> ngx_int_t {
    // The proof stays spent when the visit gave a place, or when the fleet had it spent
    // already; otherwise the client keeps its work for its next visit.
    let stays_spent = matches!(
        result,
        Ok(Decision {
            verdict: Verdict::Admit { .. }
                | Verdict::Wait(_)
                | Verdict::Refuse(Refusal::ProofSpent { .. }),
            ..
        })
    );
    if let (Some(proof), false) = (turn.spent, stays_spent) {
        turn.zone.unspend_proof(proof.key);
    }
    let decision = match result {
        Ok(d) => d,
        Err(e) => {
            problem(r, turn.zone, turn.now, &e.to_string());
            record(r, turn.zone, Outcome::Error, None, None);
            return if turn.dry { DECLINED } else { INTERNAL_ERROR };
        }
    };
    // A decision the store's failure policy took shows as ERROR in `$smart_limit_status`.
    let shown = |o: Outcome| {
        if decision.by_policy {
            Outcome::Error
        } else {
            o
        }
    };
    match decision.verdict {
        Verdict::Admit { sid } => admitted(r, turn, sid, shown(Outcome::Admitted)),
        Verdict::Wait(place) => {
            let o = shown(if turn.dry {
                Outcome::WaitingDryRun
            } else {
                Outcome::Waiting
            });
            waiting(r, turn, &place, o)
        }
        // challenge=pow: the central room found the proof spent on the fleet already.
        Verdict::Refuse(Refusal::ProofSpent { .. }) => match turn.held {
            Some(t) => match challenge::spent_elsewhere(turn.zone, &t, turn.now) {
                Some(c) => challenged(r, turn, &t, c),
                None => INTERNAL_ERROR,
            },
            None => INTERNAL_ERROR,
        },
        Verdict::Refuse(why) => {
            let o = shown(if turn.dry {
                Outcome::RejectedDryRun
            } else {
                Outcome::Rejected
            });
            refused(r, turn, why, o)
        }
        Verdict::Throttled {
            retry_ms,
            queue_len,
        } => throttled(r, turn, retry_ms, queue_len),
    }
}

/// Flood control ([S15]): the client's address takes places too fast; the waiting answer
/// without a place (the client keeps its ticket and asks again after `Retry-After`).
fn throttled(r: &mut Request, turn: &Turn, retry_ms: u64, queue_len: u64) -> ngx_int_t {
    record(r, turn.zone, Outcome::Throttled, None, None);
    let now = turn.now;
    if let Some(repeats) = turn.zone.floods.admit(now) {
        ngx_log_error!(
            NGX_LOG_WARN,
            r.log(),
            "smart_limit zone \"{}\": flood control: a client address takes places faster \
             than flood= allows; it waits without a place ({} more since the last report)",
            turn.room(),
            repeats
        );
    }
    if turn.dry {
        return DECLINED;
    }
    let mut view = turn.view(ViewStatus::Throttled, None);
    view.queue_len = queue_len;
    view.refresh_secs = retry_ms
        .div_ceil(1000)
        .clamp(1, turn.lcf.refresh_secs().max(1));
    let rc = answer::waiting(r, turn.lcf, turn.event_page().as_deref(), &view);
    finish(r, rc)
}

/// Let in: an admitted ticket, and the request goes on (or, on a poll location, the
/// "admitted" answer).
fn admitted(r: &mut Request, turn: &Turn, sid: u64, outcome: Outcome) -> ngx_int_t {
    // A synced room's waiter leaves the line's counts.
    if let Some(held) = turn
        .held
        .filter(|t| t.qnum != 0 && turn.zone.fleet.is_some())
    {
        turn.zone.tally_left(held.qnum, held.last_seen, turn.now);
    }
    let t = Ticket {
        sid,
        qnum: 0,
        issued_at: turn.held.map_or(turn.now, |t| t.issued_at),
        accepted_at: turn.now,
        last_seen: turn.now,
    };
    cookie::set_ticket(r, turn.zone, &t);
    record(r, turn.zone, outcome, None, Some(sid));
    if turn.lcf.poll {
        let rc = poll::admitted_answer(r, turn.lcf, turn.zone, turn.now);
        return finish(r, rc);
    }
    DECLINED
}

/// Told to wait: the waiting answer (in a dry run: a log line, and the request goes on).
fn waiting(r: &mut Request, turn: &Turn, place: &Place, outcome: Outcome) -> ngx_int_t {
    // A new ticket only when the place changed (or a synced room's proof of presence is old):
    // polling costs no encryption.
    if renew_waiting(turn.zone, turn.held, place, turn.now) {
        if !turn.dry {
            tally_waiting(turn.zone, turn.held, place, turn.now);
        }
        let t = Ticket {
            sid: place.sid,
            qnum: place.qnum,
            issued_at: turn.held.map_or(turn.now, |t| t.issued_at),
            accepted_at: 0,
            last_seen: turn.now,
        };
        cookie::set_ticket(r, turn.zone, &t);
    }
    let mut view = turn.view(ViewStatus::Waiting, Some(place));
    if let Some((e, ev)) = turn.zone.event_now(turn.now) {
        if !ev.started {
            prequeue_view(&mut view, e.spec.start, place.sid, turn.now);
        }
    }
    if let Some(fs) = &turn.zone.fleet {
        view.refresh_secs =
            fleet::refresh_secs(view.refresh_secs, place.eta_secs, fs.cfg.interval_ms);
    }
    record(r, turn.zone, outcome, view.position, None);
    if turn.dry {
        ngx_log_error!(
            NGX_LOG_WARN,
            r.log(),
            "smart_limit zone \"{}\": dry run, would wait (position {}, {} in line)",
            turn.room(),
            view.position
                .map_or_else(|| "-".to_string(), |p| p.to_string()),
            place.queue_len
        );
        return DECLINED;
    }
    let rc = answer::waiting(r, turn.lcf, turn.event_page().as_deref(), &view);
    finish(r, rc)
}

/// An event's pre-queue: the place is held, the order is drawn at the start. The page comes
/// back at its usual refresh (a place unseen for `presence` is gone), and at the start, each
/// client a few seconds apart (by its session id), so the start is not one burst.
fn prequeue_view(view: &mut WaitView, start_secs: u64, sid: u64, now: u64) {
    view.status = ViewStatus::Prequeue;
    view.starts_at = Some(start_secs);
    view.position = None;
    view.eta_secs = None;
    let until = start_secs.saturating_sub(now / 1000);
    let spread = sid % (PREQUEUE_SPREAD_SECS + 1);
    view.refresh_secs = view.refresh_secs.min(until + spread).max(1);
}

/// The start's spread: clients of the pre-queue come back within this many seconds of it.
const PREQUEUE_SPREAD_SECS: u64 = 4;

/// Refused: the room is closed, or its line has no place left.
fn refused(r: &mut Request, turn: &Turn, why: Refusal, outcome: Outcome) -> ngx_int_t {
    record(r, turn.zone, outcome, None, None);
    if turn.dry {
        ngx_log_error!(
            NGX_LOG_ERR,
            r.log(),
            "smart_limit zone \"{}\": dry run, would refuse ({})",
            turn.room(),
            match why {
                Refusal::Closed => "room closed",
                Refusal::LineFull { .. } => "no place left in the line",
                Refusal::ProofSpent { .. } => "its proof of work was spent already",
            }
        );
        return DECLINED;
    }
    let mut view = turn.view(ViewStatus::Closed, None);
    if let Refusal::LineFull { queue_len } = why {
        // The shared-memory line is bounded by the zone's memory, a Redis line by max_line=.
        let what = if turn.zone.params.store == StoreKind::Redis {
            "is full: no place left in the line for a new client (max_line=)"
        } else {
            "is full: no place left in the line for a new client; increase its size="
        };
        problem(r, turn.zone, turn.now, what);
        view.status = ViewStatus::Waiting;
        view.queue_len = queue_len;
    }
    let rc = answer::waiting(r, turn.lcf, turn.event_page().as_deref(), &view);
    finish(r, rc)
}

/// The module answered the request itself: it ends here (the phases go no further).
fn finish(r: &mut Request, rc: ngx_int_t) -> ngx_int_t {
    // SAFETY: a live request that this handler answered; nginx's own finalization.
    unsafe { ngx_http_finalize_request(r.into(), rc) };
    Status::NGX_DONE.0
}

/// Logs a store problem once per burst (per worker), with how many repeats were not logged.
fn problem(r: &Request, zone: &Zone, now: u64, what: &str) {
    if let Some(repeats) = zone.problems.admit(now) {
        ngx_log_error!(
            NGX_LOG_ERR,
            r.log(),
            "smart_limit zone \"{}\" {} ({} more since the last report)",
            zone.params.name,
            what,
            repeats
        );
    }
}

/// A lottery number for this poll (only the `random` mode uses it); no secrecy needed.
fn draw(now: u64, sid: u64) -> u32 {
    let x = (now ^ sid.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 32) as u32
}
