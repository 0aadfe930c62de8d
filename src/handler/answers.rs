//! The room's decision turned into the request's fate ([`Fate`], delivered by fate.rs): the
//! cookie check, the admitted ticket, the waiting, throttled, challenged and refused answers.

#[allow(clippy::wildcard_imports)]
use super::*;
use smart_limit_core::room::told::told;

/// A first contact: a ticket with no place yet, and `307` back to the same URL (a cookie
/// check: a browser returns at once with the ticket; a client that keeps no cookie never
/// gets anything from the room).
pub(super) fn arrived(turn: &Turn, sid: u64) -> Fate {
    Fate {
        ticket: Some(Ticket {
            sid,
            qnum: 0,
            issued_at: turn.now,
            accepted_at: 0,
            last_seen: turn.now,
            told: Floor::NONE,
        }),
        ..Fate::of(Outcome::New, Reply::CookieCheck)
    }
}

/// `challenge=pow`: the challenge answer (the seed to solve, no place); the page solves it
/// and comes back, or without script comes back after `wait_secs` and takes its place then.
pub(super) fn challenged(turn: &Turn, t: &Ticket, c: Challenge) -> Fate {
    let mut view = turn.view(ViewStatus::Challenge, None);
    view.challenge = Some((c.seed, c.bits));
    view.queue_len = turn.zone.snapshot(turn.now).map_or(0, |s| s.queue_len);
    if let Some(secs) = c.no_script_secs {
        view.refresh_secs = secs.max(1);
    }
    Fate {
        // The first challenge starts the ticket's no-script wait: written into it as its
        // check-in.
        ticket: c.first.then_some(Ticket {
            last_seen: turn.now,
            ..*t
        }),
        ..Fate::of(Outcome::Challenged, Reply::Waiting { view, page: None })
    }
}

/// An admitted session over its request rate: `429` with `Retry-After`, nothing else.
pub(super) fn limited(sid: u64, retry_ms: u64) -> Fate {
    let retry_secs = retry_ms.div_ceil(1000).max(1);
    Fate {
        sid: Some(sid),
        ..Fate::of(Outcome::Limited, Reply::TooMany { retry_secs })
    }
}

/// [S5]: a valid admitted ticket passes; in session mode its ticket is renewed now and then,
/// up to `seen_at`, the store's last sight of the session.
pub(super) fn pass_admitted(
    r: &Request,
    zone: &'static Zone,
    t: Ticket,
    counted: bool,
    (seen_at, now): (u64, u64),
) -> Fate {
    if !counted {
        problem(
            r,
            zone,
            now,
            "has no memory left to count admitted sessions; increase its size=",
        );
    }
    let renewed = rules::needs_renewal(&t, zone.admission_at(now), seen_at).then_some(Ticket {
        last_seen: seen_at,
        ..t
    });
    Fate {
        ticket: renewed,
        sid: Some(t.sid),
        admitted: Some(renewed.unwrap_or(t)),
        ..Fate::of(Outcome::Passed, Reply::LetIn)
    }
}

/// Flood control ([S15]): the client's address takes places too fast; the waiting answer
/// without a place (the client keeps its ticket and asks again after `Retry-After`).
pub(super) fn throttled(r: &Request, turn: &Turn, retry_ms: u64, queue_len: u64) -> Fate {
    if let Some(repeats) = turn.zone.floods.admit(turn.now) {
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
        return Fate::of(Outcome::Throttled, Reply::GoOn);
    }
    let mut view = turn.view(ViewStatus::Throttled, None);
    view.queue_len = queue_len;
    view.refresh_secs = retry_ms
        .div_ceil(1000)
        .clamp(1, turn.lcf.refresh_secs().max(1));
    let page = turn.event_page();
    Fate::of(Outcome::Throttled, Reply::Waiting { view, page })
}

/// Let in: an admitted ticket, and the request goes on (or, on a poll location, the
/// "admitted" answer).
pub(super) fn admitted(turn: &Turn, sid: u64, outcome: Outcome) -> Fate {
    turn.zone.count_let_in(turn.held, turn.now);
    let ticket = Ticket {
        sid,
        qnum: 0,
        issued_at: turn.held.map_or(turn.now, |t| t.issued_at),
        accepted_at: turn.now,
        last_seen: turn.now,
        told: Floor::NONE,
    };
    Fate {
        ticket: Some(ticket),
        sid: Some(sid),
        admitted: Some(ticket),
        ..Fate::of(outcome, Reply::LetIn)
    }
}

/// Told to wait: the waiting answer (in a dry run: a log line, and the request goes on).
pub(super) fn waiting(r: &Request, turn: &Turn, place: &Place, outcome: Outcome) -> Fate {
    // [S27] Never more than the lowest position told for this place, which the ticket carries
    // where positions are estimates (a synced room).
    let told = told(turn.held.as_ref(), place, turn.zone.keeps_position_floors());
    let place = &Place {
        position: told.position,
        ..*place
    };
    // A new ticket only when the place changed (or a synced room's proof of presence is old,
    // or the position fell past what the ticket carries): polling costs no encryption.
    let renewed = turn.zone.renews_waiting(turn.held, place, turn.now);
    if renewed && !turn.dry {
        turn.zone.count_waiting(turn.held, place, turn.now);
    }
    let ticket = match turn.held {
        _ if renewed => Some(Ticket {
            sid: place.sid,
            qnum: place.qnum,
            issued_at: turn.held.map_or(turn.now, |t| t.issued_at),
            accepted_at: 0,
            last_seen: turn.now,
            told: told.floor,
        }),
        // The same place and proof of presence, a lower floor: the line's counts keep it where
        // its stamp (`last_seen`) put it.
        Some(held) if told.reseal => Some(Ticket {
            told: told.floor,
            ..held
        }),
        _ => None,
    };
    let mut view = turn.view(ViewStatus::Waiting, Some(place));
    if let Some((e, ev)) = turn.zone.event_now(turn.now) {
        if !ev.started {
            prequeue_view(&mut view, e.spec.start, place.sid, turn.now);
        }
    }
    view.refresh_secs = turn.zone.refresh_secs(
        view.refresh_secs,
        view.position.unwrap_or(0),
        place.eta_secs,
    );
    let position = view.position;
    let reply = if turn.dry {
        ngx_log_error!(
            NGX_LOG_WARN,
            r.log(),
            "smart_limit zone \"{}\": dry run, would wait (position {}, {} in line)",
            turn.room(),
            position.map_or_else(|| "-".to_string(), |p| p.to_string()),
            place.queue_len
        );
        Reply::GoOn
    } else {
        let page = turn.event_page();
        Reply::Waiting { view, page }
    };
    Fate {
        ticket,
        position,
        ..Fate::of(outcome, reply)
    }
}

/// An event's pre-queue: the place is held, the order is drawn at the start. The page comes
/// back at its usual refresh (a place unseen for `presence` is gone), and at the start, each
/// client a few seconds apart (by its session id), so the start is not one burst.
pub(super) fn prequeue_view(view: &mut WaitView, start_secs: u64, sid: u64, now: u64) {
    view.status = ViewStatus::Prequeue;
    view.starts_at = Some(start_secs);
    view.position = None;
    view.eta_secs = None;
    let until = start_secs.saturating_sub(now / 1000);
    let spread = sid % (PREQUEUE_SPREAD_SECS + 1);
    view.refresh_secs = view.refresh_secs.min(until + spread).max(1);
}

/// The start's spread: clients of the pre-queue come back within this many seconds of it.
pub(super) const PREQUEUE_SPREAD_SECS: u64 = 4;

/// Refused: the room is closed, or its line has no place left.
pub(super) fn refused(r: &Request, turn: &Turn, why: Refusal, outcome: Outcome) -> Fate {
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
        return Fate::of(outcome, Reply::GoOn);
    }
    let mut view = turn.view(ViewStatus::Closed, None);
    if let Refusal::LineFull { queue_len } = why {
        problem(r, turn.zone, turn.now, turn.zone.line_full_reason());
        view.status = ViewStatus::Waiting;
        view.queue_len = queue_len;
    }
    let page = turn.event_page();
    Fate::of(outcome, Reply::Waiting { view, page })
}
