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
    NGX_HTTP_TOO_MANY_REQUESTS, NGX_LOG_ERR, NGX_LOG_INFO, NGX_LOG_WARN,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, Request};
use ngx::ngx_log_error;
use smart_limit_core::page::{Fetch, Template, ViewStatus, WaitView};
use smart_limit_core::room::rules::{self, Mode, TicketState};
use smart_limit_core::room::{flood_hash, PassVerdict, Place, Refusal, Verdict, Visit};
use smart_limit_core::ticket::{self, Floor, Ticket};

use crate::answer;
use crate::challenge::{self, Challenge, Gate};
use crate::clock::now_ms;
use crate::conf::{DryRun, Endpoint, LocConf};
use crate::cookie;
use crate::ctx::{Decided, Outcome, PendingDecision, RequestCtx, Suspended};
use crate::endpoint::poll;
use crate::inflight;
use crate::request::{self, HeaderValue, RequestExt, DECLINED, INTERNAL_ERROR};
use crate::store::{Answer, Decision, Passed, SpentProof, StoreError, Zone};
use crate::token;
use crate::Module;

mod answers;
mod documents;
mod fate;
mod keys;
mod visit;

use answers::{admitted, arrived, challenged, limited, pass_admitted, refused, throttled, waiting};
use documents::{
    documents_decided_here, page_concluded, page_visit, sub_resource, Role, SubResource,
};
use fate::{deliver, Fate, Reply};
use keys::{draw, flood_key};
use visit::visit_of;

/// Puts the handler in the PREACCESS phase (postconfiguration).
pub fn install(cf: &mut ngx_conf_t) -> Result<(), ()> {
    request::install_preaccess(cf, preaccess_handler)
}

unsafe extern "C" fn preaccess_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    request::entry(r, "while deciding, request refused", INTERNAL_ERROR, handle)
}

/// The room's algorithm, as `limit_req`'s handler reads its own: the request's ticket, then
/// the room's decision (at once, or later from the store), then the answer.
fn handle(r: &mut Request) -> ngx_int_t {
    let Some((lcf, zone, role)) = room_of(r) else {
        return DECLINED;
    };
    if let Some(rc) = resume_or_skip(r, lcf, zone) {
        return rc;
    }
    if lcf.bypass().is_some_and(|cv| r.switch_on(cv, &[])) {
        zone.count_bypass();
        let fate = Fate::of(Outcome::Bypass, Reply::GoOn);
        return deliver(r, lcf, zone, now_ms(), fate);
    }
    if zone.keys.is_none() {
        return INTERNAL_ERROR;
    }
    let now = now_ms();
    // The ticket, and what the request is for.
    let fetch = r.fetch();
    let ticket = cookie::read_ticket(r, zone);
    let state = ticket.map(|t| rules::ticket_state(&t, zone.admission_at(now), now));
    // [S28] An admission token (`Authorization: Bearer`) stands for an admitted ticket.
    let (ticket, state) = match state {
        Some(TicketState::Admitted) => (ticket, state),
        _ => match token::bearer_ticket(r, zone, now) {
            Some(t) => (Some(t), Some(TicketState::Admitted)),
            None => (ticket, state),
        },
    };
    let holds_place = state == Some(TicketState::Waiting) && ticket.is_some_and(|t| t.qnum != 0);
    if role == Role::Documents && !documents_decided_here(r, zone, fetch, state, holds_place, now) {
        return DECLINED;
    }
    // An admitted ticket passes ([S5]), unless the room is closed; a page's sub-resource
    // never takes a place ([S29]).
    let mut closed_to_admitted = None;
    match (ticket, state) {
        (Some(t), Some(TicketState::Admitted)) => match admitted_ticket(r, lcf, zone, t, now) {
            Ok(rc) => return rc,
            Err(NotPassed::Closed) => closed_to_admitted = Some(t.sid),
            // A revoked admission replayed: a new user (the first contact below).
            Err(NotPassed::Revoked) => {}
        },
        _ => match sub_resource(r, lcf, zone, fetch, holds_place, now) {
            SubResource::Done(rc) => return rc,
            SubResource::Place(sid) => return page_visit(r, lcf, zone, sid, now),
            SubResource::NotOne => {}
        },
    }
    // Anyone else asks the room ([S3]-[S6]): its visit, then the room's decision.
    let mut turn = Turn::new(r, lcf, zone, now, false);
    let waiting = ticket.filter(|_| state == Some(TicketState::Waiting));
    let visit = match visit_of(r, &mut turn, waiting, closed_to_admitted) {
        Ok(visit) => visit,
        Err(rc) => return rc,
    };
    match zone.visit(visit, turn.spent, now) {
        Answer::Now(result) => conclude(r, &turn, result),
        Answer::Later(future) => suspend(r, turn, future),
    }
}

/// Why an admitted ticket does not pass.
enum NotPassed {
    /// A closed room turns it away: it goes to the room like any visitor (which refuses and
    /// counts it) and is left as it is.
    Closed,
    /// [S28] The origin revoked this admission on this node: the client is a new user.
    Revoked,
}

/// [S5]: a valid admitted ticket passes, counted as active (or is limited to its session's
/// request rate). A store that cannot count it still lets it pass, and says so.
fn admitted_ticket(
    r: &mut Request,
    lcf: &LocConf,
    zone: &'static Zone,
    t: Ticket,
    now: u64,
) -> Result<ngx_int_t, NotPassed> {
    let fate = match zone.pass(&t, now) {
        Ok(Passed { verdict, seen_at }) => match verdict {
            PassVerdict::Closed => return Err(NotPassed::Closed),
            PassVerdict::Revoked => return Err(NotPassed::Revoked),
            PassVerdict::Limited { retry_ms } => limited(t.sid, retry_ms),
            v => pass_admitted(r, zone, t, v == PassVerdict::Counted, (seen_at, now)),
        },
        Err(e) => {
            problem(r, zone, now, &e.to_string());
            pass_admitted(r, zone, t, true, (now, now))
        }
    };
    Ok(deliver(r, lcf, zone, now, fate))
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
        page: pending.page,
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
    /// [S29] A page's sub-resource on its page pass ([`page_visit`]): it goes on whatever
    /// the room says.
    page: bool,
}

impl<'a> Turn<'a> {
    /// A decision starting now: no waiting ticket nor spent proof known yet.
    fn new(r: &Request, lcf: &'a LocConf, zone: &'static Zone, now: u64, page: bool) -> Self {
        Turn {
            lcf,
            zone,
            now,
            dry: dry_run(r, lcf),
            held: None,
            spent: None,
            page,
        }
    }

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
            token: None,
            resumed: place.is_some_and(|p| self.zone.resumes(self.held, p, self.now)),
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
        page: turn.page,
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
    if turn.page {
        let fate = page_concluded(r, turn, result);
        return turn.deliver(r, fate);
    }
    let decision = match result {
        Ok(d) => d,
        Err(e) => {
            problem(r, turn.zone, turn.now, &e.to_string());
            let reply = if turn.dry { Reply::GoOn } else { Reply::Fail };
            return turn.deliver(r, Fate::of(Outcome::Error, reply));
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
    let fate = match decision.verdict {
        Verdict::Admit { sid } => admitted(turn, sid, shown(Outcome::Admitted)),
        Verdict::Wait(place) => {
            let o = shown(if turn.dry {
                Outcome::WaitingDryRun
            } else {
                Outcome::Waiting
            });
            waiting(r, turn, &place, o)
        }
        // challenge=pow: the central room found the proof spent on the fleet already.
        Verdict::Refuse(Refusal::ProofSpent { .. }) => {
            let c = turn
                .held
                .and_then(|t| Some((t, challenge::spent_elsewhere(turn.zone, &t, turn.now)?)));
            match c {
                Some((t, c)) => challenged(turn, &t, c),
                None => return INTERNAL_ERROR,
            }
        }
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
    };
    turn.deliver(r, fate)
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
