//! The typed context of one request: what the module decided, and the store call it is
//! waiting for. The handler writes it; `$smart_limit_*` and the header filter only read it.
//!
//! nginx clears every module's context slot on an internal redirect (`error_page`, `index`,
//! a named location), yet the decision must survive it: the request is decided once (and
//! counted once), and the access log and the header filter of the redirected request must
//! see that decision. So the context is not allocated as a plain pool block but as the data
//! of a pool cleanup whose handler is [`drop_ctx`], as `ngx_http_realip_module` does: when
//! the slot is empty, the request pool's cleanup list still holds it, and the cleanup also
//! runs the Rust destructor (cancelling a store call in flight) when the request ends.

use core::ffi::c_void;
use core::mem::{align_of, size_of};
use core::panic::AssertUnwindSafe;
use core::ptr;

use ngx::ffi::{ngx_pool_cleanup_add, ngx_pool_cleanup_t};
use ngx::http::{HttpModule, Request};
use smart_limit_core::room::rules::Mode;
use smart_limit_core::ticket::Ticket;

use crate::inflight::InFlight;
use crate::store::event::EventsError;
use crate::store::{Decision, StoreError, Zone};
use crate::Module;

/// What happened to a request, as `$smart_limit_status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Let in from the line (or at once) on this request.
    Admitted,
    /// Passed on a valid admitted ticket.
    Passed,
    /// Given the waiting answer.
    Waiting,
    /// Let through by `smart_limit_bypass`.
    Bypass,
    /// Refused: the room is closed or has no place left.
    Rejected,
    /// The store failed and the failure policy decided.
    Error,
    /// `smart_limit_dry_run`: would have been given the waiting answer, passed instead.
    WaitingDryRun,
    /// `smart_limit_dry_run`: would have been refused (room closed or line full), passed.
    RejectedDryRun,
    /// The origin ended the session (`X-Smart-Limit: revoke`); set by the header filter.
    Revoked,
    /// A first contact: given a ticket and sent back for it (`307`).
    New,
    /// Flood control: no place this time (the client's address takes places too fast).
    Throttled,
    /// An admitted session over its request rate (`429`).
    Limited,
    /// `challenge=pow`: given a proof of work to solve before it takes a place.
    Challenged,
    /// [S29] A page's sub-resource let through on its page's pass (its document was served
    /// under the rate limit moments ago).
    PagePass,
    /// [S29] A page's sub-resource of a client not admitted, without a page pass: a bare
    /// waiting status, no ticket, no place (a sub-resource never takes a place).
    AssetRefused,
    /// [S28] An invite-only line (`invite=`) refused a client without a valid enqueue token.
    InviteOnly,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Admitted => "ADMITTED",
            Outcome::Passed => "PASSED",
            Outcome::Waiting => "WAITING",
            Outcome::Bypass => "BYPASS",
            Outcome::Rejected => "REJECTED",
            Outcome::Error => "ERROR",
            Outcome::WaitingDryRun => "WAITING_DRY_RUN",
            Outcome::RejectedDryRun => "REJECTED_DRY_RUN",
            Outcome::Revoked => "REVOKED",
            Outcome::New => "NEW",
            Outcome::Throttled => "THROTTLED",
            Outcome::Challenged => "CHALLENGED",
            Outcome::Limited => "LIMITED",
            Outcome::PagePass => "PAGE_PASS",
            Outcome::AssetRefused => "ASSET_REFUSED",
            Outcome::InviteOnly => "INVITE_ONLY",
        }
    }
}

/// The decision taken for a request.
#[derive(Clone, Copy)]
pub struct Decided {
    pub zone: &'static Zone,
    pub outcome: Outcome,
    /// Place in line shown to a waiting client.
    pub position: Option<u64>,
    /// The session the request was admitted or passed on (what a revoke ends).
    pub sid: Option<u64>,
    /// The admitted ticket the request was let in or passed on (what an admission token
    /// says, [S28]).
    pub admitted: Option<Ticket>,
}

/// What the fleet rate ([`crate::rate`]) drew for the request, as
/// `$smart_limit_rate_status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateOutcome {
    Passed,
    Limited,
}

impl RateOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RateOutcome::Passed => "PASSED",
            RateOutcome::Limited => "LIMITED",
        }
    }
}

/// A store call the request waits for.
pub enum Suspended {
    /// The handler asked the room ([`crate::handler`]).
    Decision(PendingDecision),
    /// The control endpoint changes a room ([`crate::endpoint::control`]).
    Control(PendingControl),
}

pub struct PendingDecision {
    /// The waiting ticket the client came with.
    pub held: Option<Ticket>,
    /// The proof of work the visit spent (`challenge=pow`).
    pub spent: Option<crate::store::SpentProof>,
    pub now: u64,
    pub dry: bool,
    /// [S29] A page's sub-resource on its page pass: it goes on whatever the room says.
    pub page: bool,
    pub call: InFlight<Result<Decision, StoreError>>,
}

/// What the control endpoint changes in a room.
#[derive(Debug, Clone)]
pub enum ControlAction {
    /// Switches the mode (None: back to the configured one).
    Mode(Option<Mode>),
    /// Creates the event of this name.
    Create(String),
    /// Cancels the event of this name.
    Cancel(String),
    /// Pins `max_active=auto` (None: back to auto).
    Pin(Option<u64>),
}

pub struct PendingControl {
    pub zone: &'static Zone,
    pub action: ControlAction,
    pub call: InFlight<Result<(), EventsError>>,
}

/// Everything the module keeps for one request.
pub struct RequestCtx {
    /// [`TAG`]: tells this context from anything else found in a pool cleanup.
    tag: u64,
    pub decided: Option<Decided>,
    pub suspended: Option<Suspended>,
    /// `smart_limit_rate`: drawn once per request (also across internal redirects).
    pub rate: Option<RateOutcome>,
    /// [S29] `smart_limit_documents` let this document go on to the rate limit while its
    /// room was idle: if the room does not decide it after all (an overflow), its response
    /// carries a page pass of this room (`crate::filter`).
    pub page_pass: Option<&'static Zone>,
    /// [S28] The admission token issued for this request (once, however often it is read).
    pub token: Option<String>,
}

/// "SLCTX\0\0\1".
const TAG: u64 = 0x534c_4354_5800_0001;

impl Default for RequestCtx {
    fn default() -> Self {
        RequestCtx {
            tag: TAG,
            decided: None,
            suspended: None,
            rate: None,
            page_pass: None,
            token: None,
        }
    }
}

// The context lives in pool memory, which nginx aligns to the word size.
const _: () = assert!(align_of::<RequestCtx>() <= align_of::<usize>());

/// Runs the context's destructor when the request pool is destroyed.
unsafe extern "C" fn drop_ctx(data: *mut c_void) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the RequestCtx `RequestCtx::get_or_insert` wrote into this
        // cleanup's memory; nginx runs each cleanup once, when the pool goes.
        unsafe { ptr::drop_in_place(data.cast::<RequestCtx>()) }
    }));
}

impl RequestCtx {
    /// The request's context, if the module made one (also after an internal redirect).
    ///
    /// The context is borrowed from the request (mutably): one at a time.
    pub fn find(r: &mut Request) -> Option<&mut RequestCtx> {
        let module = Module::module();
        let main = r.as_ref().main;
        // SAFETY: `main` is the request itself or its main request, live for as long as `r`;
        // its ctx array has a slot for every http module.
        let slot = unsafe { *(*main).ctx.add(module.ctx_index) }.cast::<RequestCtx>();
        if !slot.is_null() {
            // SAFETY: this module only ever stores a RequestCtx in its slot.
            return unsafe { slot.as_mut() };
        }
        // Cleared by an internal redirect: find it among the pool's cleanups.
        // SAFETY: the request pool and its cleanup list live as long as the request; the
        // list is only changed by nginx on this thread, not while we walk it.
        let mut c: *mut ngx_pool_cleanup_t = unsafe { (*r.as_ref().pool).cleanup };
        // SAFETY: see above; each node is a live ngx_pool_cleanup_t.
        while let Some(node) = unsafe { c.as_ref() } {
            let ours = node
                .handler
                .is_some_and(|h| ptr::fn_addr_eq(h, drop_ctx as unsafe extern "C" fn(_)));
            // A cleanup with our handler holds a RequestCtx; the tag guards against a different
            // function that the linker folded into the same address.
            let tagged = || {
                // SAFETY: the data of a cleanup with our handler (above).
                unsafe { (*node.data.cast::<RequestCtx>()).tag == TAG }
            };
            if ours && !node.data.is_null() && tagged() {
                let ctx = node.data.cast::<RequestCtx>();
                // SAFETY: `main` is live (above); put the context back in its slot.
                unsafe { *(*main).ctx.add(module.ctx_index) = ctx.cast() };
                // SAFETY: a cleanup with our handler holds a RequestCtx (see get_or_insert).
                return unsafe { ctx.as_mut() };
            }
            c = node.next;
        }
        None
    }

    /// The request's context, made now if it has none. None when the pool is out of memory.
    pub fn get_or_insert(r: &mut Request) -> Option<&mut RequestCtx> {
        if RequestCtx::find(r).is_some() {
            return RequestCtx::find(r);
        }
        // SAFETY: the request's pool is live; the cleanup's data is `size` bytes from the
        // pool, aligned to the word size (checked against RequestCtx's alignment above).
        let cln = unsafe { ngx_pool_cleanup_add(r.as_ref().pool, size_of::<RequestCtx>()) };
        // SAFETY: a fresh cleanup node from the pool, or null.
        let cln = unsafe { cln.as_mut() }?;
        let data = cln.data.cast::<RequestCtx>();
        if data.is_null() {
            return None;
        }
        // SAFETY: `data` is uninitialised memory of the right size and alignment.
        unsafe { ptr::write(data, RequestCtx::default()) };
        cln.handler = Some(drop_ctx);
        let main = r.as_ref().main;
        // SAFETY: `main` is live (see find); this module's slot now holds the context.
        unsafe { *(*main).ctx.add(Module::module().ctx_index) = data.cast() };
        // SAFETY: initialised just above; lives until the pool's cleanup runs.
        unsafe { data.as_mut() }
    }
}
