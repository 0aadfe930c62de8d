//! The access-phase handler: request -> ticket -> decision -> answer.
//!
//! 1. Locations without a room, subrequests, requests already decided before an internal
//!    redirect, and bypassed requests pass untouched.
//! 2. The ticket cookie is opened; a broken, forged, foreign or stale one means a new user.
//! 3. A valid admitted ticket passes without waiting ([S5]); it is only counted as active.
//! 4. Anyone else asks the room ([S3]-[S6]): admitted now (a new ticket, the request goes on),
//!    or told to wait (the waiting answer, [S7]).
//!
//! Room modes: the room applies them (`Room::visit`); here only `reject` matters on the
//! admitted path: a closed room turns admitted tickets away too (maintenance), without
//! spoiling the ticket, which admits again once the room reopens (if still valid).
//! `smart_limit_dry_run`: everything is decided and counted as usual, but a request that
//! would wait or be refused is logged, recorded as `WAITING_DRY_RUN` / `REJECTED_DRY_RUN`,
//! and passes (it still gets its waiting ticket, so it keeps one place, as it would).

use core::future::Future;
use core::pin::Pin;

use ngx::core::Status;
use ngx::ffi::{
    ngx_http_complex_value, ngx_http_discard_request_body, ngx_http_finalize_request,
    ngx_http_request_t, ngx_int_t, ngx_str_t, NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_LOG_ERR,
    NGX_LOG_WARN,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf};
use ngx::ngx_log_error;
use smart_limit_core::page::{ViewStatus, WaitView};
use smart_limit_core::room::{Refusal, Verdict, Visit};
use smart_limit_core::rules::{self, Mode, TicketState};
use smart_limit_core::ticket::{self, Keyring, Ticket};

use crate::answer;
use crate::conf::{DryRun, LocConf};
use crate::inflight::{self, InFlight};
use crate::store::{now_ms, Answer, Decision, StoreError, Zone};
use crate::vars::{self, Outcome};
use crate::Module;

pub unsafe extern "C" fn access_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    answer::guarded(r, "while deciding, request refused", || handle(r))
}

unsafe fn handle(r: *mut ngx_http_request_t) -> ngx_int_t {
    let declined = Status::NGX_DECLINED.into();
    let (Some(lcf), Some(mcf)) = (Module::location_conf(&*r), Module::main_conf(&*r)) else {
        return declined;
    };
    let Some(zone) = lcf.zone(mcf) else {
        return declined;
    };
    if (*r).main != r || lcf.metrics || lcf.control {
        return declined;
    }
    if let Some(pending) = inflight::kept::<Pending>(r) {
        return resume(r, lcf, zone, pending);
    }
    if vars::decided(r) {
        return declined;
    }
    let room = zone.params.name.as_str();
    if bypassed(r, lcf) {
        zone.count_bypass();
        vars::record(r, Outcome::Bypass, room, None);
        return declined;
    }
    let Some(keys) = zone.keys.as_ref() else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    let now = now_ms();
    let dry = dry_run(r, lcf);
    let ticket = read_ticket(r, keys, &zone.cookie, room);
    let mut state = ticket
        .as_ref()
        .map(|t| rules::ticket_state(t, zone.admission, now));
    // A closed room turns everyone away: the admitted ticket goes to the room like any
    // visitor (which refuses and counts it) and is left as it is.
    let closed_to_admitted =
        state == Some(TicketState::Admitted) && zone.mode_now() == Mode::Reject;
    if closed_to_admitted {
        state = None;
    }

    // [S5]: a valid admitted ticket passes; it only counts as active.
    if let (Some(t), Some(TicketState::Admitted)) = (&ticket, state) {
        match zone.pass(t.sid, now) {
            Ok(true) => {}
            Ok(false) => problem(
                r,
                zone,
                now,
                "has no memory left to count admitted sessions; increase its size=",
            ),
            Err(e) => problem(r, zone, now, &e.to_string()),
        }
        if rules::needs_renewal(t, zone.admission, now) {
            let renewed = Ticket {
                last_seen: now,
                ..t.clone()
            };
            set_ticket(r, keys, &zone.cookie, &renewed);
        }
        vars::record(r, Outcome::Passed, room, None);
        vars::record_sid(r, t.sid);
        if lcf.poll {
            return admitted_answer(r, lcf, zone, now);
        }
        return declined;
    }

    // The session id an admitted ticket keeps when a closed room turns it away.
    let admitted_sid = ticket
        .as_ref()
        .filter(|_| closed_to_admitted)
        .map(|t| t.sid);
    let held = match (ticket, state) {
        (Some(t), Some(TicketState::Waiting)) => Some(t),
        _ => None,
    };
    let visit = Visit {
        sid: match (&held, admitted_sid) {
            (Some(t), _) => t.sid,
            (None, Some(sid)) => sid,
            _ => match ticket::random_sid() {
                Ok(sid) => sid,
                Err(_) => return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t,
            },
        },
        qnum: held.as_ref().map_or(0, |t| t.qnum),
        draw: draw(now, held.as_ref().map_or(0, |t| t.sid)),
    };
    match zone.visit(visit, now) {
        Answer::Now(result) => finish(r, lcf, zone, keys, held.as_ref(), result, now, dry),
        Answer::Later(future) => suspend(r, held, future, now, dry),
    }
}

/// `smart_limit_dry_run` for this request.
unsafe fn dry_run(r: *mut ngx_http_request_t, lcf: &LocConf) -> bool {
    match lcf.dry_run {
        DryRun::On => true,
        DryRun::Off | DryRun::Unset => false,
        DryRun::Var(cv) => {
            let mut value = ngx_str_t::empty();
            if ngx_http_complex_value(r, cv, &mut value) != Status::NGX_OK.0 {
                return false;
            }
            let v = value.as_bytes();
            !v.is_empty() && v != b"0" && v != b"off"
        }
    }
}

/// What a request suspended on the store remembers until the answer comes back.
struct Pending {
    held: Option<Ticket>,
    now: u64,
    dry: bool,
    call: InFlight<Result<Decision, StoreError>>,
}

/// [S9]: the store answers later; the request waits without blocking the worker. When the
/// answer arrives nginx runs the phases again, and [`resume`] picks up the result.
unsafe fn suspend(
    r: *mut ngx_http_request_t,
    held: Option<Ticket>,
    future: Pin<Box<dyn Future<Output = Result<Decision, StoreError>>>>,
    now: u64,
    dry: bool,
) -> ngx_int_t {
    let call = inflight::start(r, future);
    if !inflight::keep(
        r,
        Pending {
            held,
            now,
            dry,
            call,
        },
    ) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    Status::NGX_AGAIN.into()
}

/// Second pass of a suspended request: use the store's answer if it has come.
unsafe fn resume(
    r: *mut ngx_http_request_t,
    lcf: &LocConf,
    zone: &Zone,
    pending: &mut Pending,
) -> ngx_int_t {
    let Some(result) = pending.call.take() else {
        return Status::NGX_AGAIN.into();
    };
    let Some(keys) = zone.keys.as_ref() else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    let held = pending.held.take();
    finish(
        r,
        lcf,
        zone,
        keys,
        held.as_ref(),
        result,
        pending.now,
        pending.dry,
    )
}

/// Turns the room's verdict into the answer: a new ticket and the request goes on, or the
/// waiting answer (in a dry run: a log line, and the request goes on).
#[allow(clippy::too_many_arguments)]
unsafe fn finish(
    r: *mut ngx_http_request_t,
    lcf: &LocConf,
    zone: &Zone,
    keys: &Keyring,
    held: Option<&Ticket>,
    result: Result<Decision, StoreError>,
    now: u64,
    dry: bool,
) -> ngx_int_t {
    let declined = Status::NGX_DECLINED.into();
    let room = zone.params.name.as_str();
    let (verdict, by_policy) = match result {
        Ok(d) => (d.verdict, d.by_policy),
        Err(e) => {
            problem(r, zone, now, &e.to_string());
            vars::record(r, Outcome::Error, room, None);
            if dry {
                return declined;
            }
            return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
        }
    };
    // A decision the store's failure policy took shows as ERROR in `$smart_limit_status`.
    let record = |o: Outcome, room: &str, position: Option<u64>| {
        let o = if by_policy { Outcome::Error } else { o };
        vars::record(r, o, room, position)
    };
    let issued_at = held.map_or(now, |t| t.issued_at);
    match verdict {
        Verdict::Admit { sid } => {
            let t = Ticket {
                room: room.to_string(),
                sid,
                qnum: 0,
                issued_at,
                accepted_at: now,
                last_seen: now,
            };
            set_ticket(r, keys, &zone.cookie, &t);
            record(Outcome::Admitted, room, None);
            vars::record_sid(r, sid);
            if lcf.poll {
                return admitted_answer(r, lcf, zone, now);
            }
            declined
        }
        Verdict::Wait(place) => {
            // A new ticket only when the place changed: polling costs no encryption.
            if held.is_none_or(|t| t.qnum != place.qnum || t.sid != place.sid) {
                let t = Ticket {
                    room: room.to_string(),
                    sid: place.sid,
                    qnum: place.qnum,
                    issued_at,
                    accepted_at: 0,
                    last_seen: now,
                };
                set_ticket(r, keys, &zone.cookie, &t);
            }
            let position = (place.position > 0).then_some(place.position);
            if dry {
                record(Outcome::WaitingDryRun, room, position);
                ngx_log_error!(
                    NGX_LOG_WARN,
                    (*(*r).connection).log,
                    "smart_limit zone \"{}\": dry run, would wait (position {}, {} in line)",
                    room,
                    position.map_or_else(|| "-".to_string(), |p| p.to_string()),
                    place.queue_len
                );
                return declined;
            }
            record(Outcome::Waiting, room, position);
            let view = WaitView {
                room,
                status: ViewStatus::Waiting,
                position,
                queue_len: place.queue_len,
                eta_secs: place.eta_secs,
                refresh_secs: lcf.refresh_secs(),
                updated_at: now / 1000,
            };
            respond(r, lcf, &view)
        }
        Verdict::Refuse(why) => {
            if dry {
                record(Outcome::RejectedDryRun, room, None);
                ngx_log_error!(
                    NGX_LOG_ERR,
                    (*(*r).connection).log,
                    "smart_limit zone \"{}\": dry run, would refuse ({})",
                    room,
                    match why {
                        Refusal::Closed => "room closed",
                        Refusal::LineFull { .. } => "no place left in the line",
                    }
                );
                return declined;
            }
            let (status, queue_len) = match why {
                Refusal::Closed => (ViewStatus::Closed, 0),
                Refusal::LineFull { queue_len } => {
                    problem(
                        r,
                        zone,
                        now,
                        "is full: no place left in the line for a new client; increase its size=",
                    );
                    (ViewStatus::Waiting, queue_len)
                }
            };
            record(Outcome::Rejected, room, None);
            let view = WaitView {
                room,
                status,
                position: None,
                queue_len,
                eta_secs: None,
                refresh_secs: lcf.refresh_secs(),
                updated_at: now / 1000,
            };
            respond(r, lcf, &view)
        }
    }
}

/// Sends the waiting answer and ends the request here (the access phase goes no further).
unsafe fn respond(r: *mut ngx_http_request_t, lcf: &LocConf, view: &WaitView) -> ngx_int_t {
    if ngx_http_discard_request_body(r) != Status::NGX_OK.0 {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    let rc = answer::waiting(r, lcf, view);
    ngx_http_finalize_request(r, rc);
    Status::NGX_DONE.into()
}

/// `smart_limit_poll`: the location is a status endpoint for programs (and people): an
/// admitted visitor gets the "admitted" answer (JSON `"status":"admitted"`, or the "it's your
/// turn" page that reloads), with its ticket, instead of the location's content.
unsafe fn admitted_answer(
    r: *mut ngx_http_request_t,
    lcf: &LocConf,
    zone: &Zone,
    now: u64,
) -> ngx_int_t {
    let queue_len = zone.snapshot(now).map_or(0, |s| s.queue_len);
    let view = WaitView {
        room: zone.params.name.as_str(),
        status: ViewStatus::Admitted,
        position: None,
        queue_len,
        eta_secs: None,
        refresh_secs: lcf.refresh_secs(),
        updated_at: now / 1000,
    };
    respond(r, lcf, &view)
}

/// `smart_limit_bypass`: any value but "" and "0" lets the request through.
unsafe fn bypassed(r: *mut ngx_http_request_t, lcf: &LocConf) -> bool {
    if lcf.bypass.is_null() {
        return false;
    }
    let mut value = ngx_str_t::empty();
    if ngx_http_complex_value(r, lcf.bypass, &mut value) != Status::NGX_OK.0 {
        return false;
    }
    let v = value.as_bytes();
    !v.is_empty() && v != b"0"
}

/// The first `smart_limit` cookie that opens as a ticket of this room, if any. Walks the
/// request's header list (rather than nginx's per-version cookie fields) so the module builds
/// against older nginx too.
pub(crate) unsafe fn read_ticket(
    r: *mut ngx_http_request_t,
    keys: &Keyring,
    cookie: &str,
    room: &str,
) -> Option<Ticket> {
    for h in answer::request_headers(r) {
        if !h.key.eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        if let Some(value) = ticket::cookie_value(h.value, cookie.as_bytes()) {
            if let Ok(t) = keys.open(value, room) {
                return Some(t);
            }
        }
    }
    None
}

unsafe fn set_ticket(r: *mut ngx_http_request_t, keys: &Keyring, cookie: &str, t: &Ticket) {
    let Ok(sealed) = keys.seal(t) else {
        return;
    };
    let secure = !(*(*r).connection).ssl.is_null();
    let header = ticket::set_cookie_header(cookie, &sealed, secure, None);
    answer::add_header(r, "Set-Cookie", header.as_bytes());
}

/// Logs a store problem once per burst (per worker), with how many repeats were not logged.
unsafe fn problem(r: *mut ngx_http_request_t, zone: &Zone, now: u64, what: &str) {
    if let Some(repeats) = zone.problems.admit(now) {
        ngx_log_error!(
            NGX_LOG_ERR,
            (*(*r).connection).log,
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
