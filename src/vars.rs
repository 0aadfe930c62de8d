//! `$smart_limit_status`, `$smart_limit_position`, `$smart_limit_room`, for access logs.
//!
//! The handler writes the values straight into the request's indexed-variable slots. Unlike a
//! module context, those slots survive internal redirects (`index`, `error_page`, named
//! locations), so the log sees the decision, and a second access-phase pass after a redirect
//! knows the request was already decided and does not decide (or count) it twice.

use core::ptr::addr_of_mut;

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_http_add_variable, ngx_http_get_variable_index, ngx_http_request_t,
    ngx_http_variable_value_t, ngx_int_t, ngx_str_t, NGX_HTTP_VAR_NOHASH,
};
use ngx::ngx_string;

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
        }
    }
}

const STATUS: usize = 0;
const POSITION: usize = 1;
const ROOM: usize = 2;
/// Internal: the session id (16 hex digits) of the ticket the request was decided on, for the
/// revoke header filter. Not hashed, so `$smart_limit_sid_` cannot be looked up by name at
/// run time (it is not part of the documented interface).
const SID: usize = 3;

static mut NAMES: [ngx_str_t; 4] = [
    ngx_string!("smart_limit_status"),
    ngx_string!("smart_limit_position"),
    ngx_string!("smart_limit_room"),
    ngx_string!("smart_limit_sid_"),
];
static mut INDEX: [usize; 4] = [usize::MAX; 4];

/// Declares the variables (preconfiguration) and remembers their indexes.
pub unsafe fn register(cf: *mut ngx_conf_t) -> Status {
    for i in 0..4 {
        let name = &mut (*addr_of_mut!(NAMES))[i];
        let flags = if i == SID {
            NGX_HTTP_VAR_NOHASH as usize
        } else {
            0
        };
        let var = ngx_http_add_variable(cf, name, flags);
        if var.is_null() {
            return Status::NGX_ERROR;
        }
        (*var).get_handler = Some(unset_value);
        let index = ngx_http_get_variable_index(cf, name);
        if index < 0 {
            return Status::NGX_ERROR;
        }
        (*addr_of_mut!(INDEX))[i] = index as usize;
    }
    Status::NGX_OK
}

/// Called only when the handler set nothing: the variable is empty ("-" in logs).
unsafe extern "C" fn unset_value(
    _r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    _data: usize,
) -> ngx_int_t {
    (*v).set_not_found(1);
    Status::NGX_OK.into()
}

unsafe fn slot(
    r: *mut ngx_http_request_t,
    which: usize,
) -> Option<&'static mut ngx_http_variable_value_t> {
    let index = (*addr_of_mut!(INDEX))[which];
    if index == usize::MAX || (*r).variables.is_null() {
        return None;
    }
    Some(&mut *(*r).variables.add(index))
}

unsafe fn set(r: *mut ngx_http_request_t, which: usize, data: *const u8, len: usize) {
    if let Some(v) = slot(r, which) {
        v.data = data as *mut u8;
        v.set_len(len as u32);
        v.set_valid(1);
        v.set_no_cacheable(0);
        v.set_not_found(0);
    }
}

/// Whether this request was already decided (by an earlier pass before an internal redirect).
pub unsafe fn decided(r: *mut ngx_http_request_t) -> bool {
    slot(r, STATUS).is_some_and(|v| v.valid() != 0)
}

/// Records the decision. `room` must live as long as the configuration (the zone name).
pub unsafe fn record(
    r: *mut ngx_http_request_t,
    outcome: Outcome,
    room: &str,
    position: Option<u64>,
) {
    let s = outcome.as_str();
    set(r, STATUS, s.as_ptr(), s.len());
    set(r, ROOM, room.as_ptr(), room.len());
    if let Some(p) = position {
        let text = p.to_string();
        let pool = ngx::core::Pool::from_ngx_pool((*r).pool);
        let mem = pool.alloc_unaligned(text.len()) as *mut u8;
        if !mem.is_null() {
            core::ptr::copy_nonoverlapping(text.as_ptr(), mem, text.len());
            set(r, POSITION, mem, text.len());
        }
    }
}

/// Changes the recorded status (the header filter marks a revoked session).
pub unsafe fn set_outcome(r: *mut ngx_http_request_t, outcome: Outcome) {
    let s = outcome.as_str();
    set(r, STATUS, s.as_ptr(), s.len());
}

/// Remembers the session id the request was decided on (admitted or passed).
pub unsafe fn record_sid(r: *mut ngx_http_request_t, sid: u64) {
    let text = format!("{sid:016x}");
    let pool = ngx::core::Pool::from_ngx_pool((*r).pool);
    let mem = pool.alloc_unaligned(text.len()) as *mut u8;
    if !mem.is_null() {
        core::ptr::copy_nonoverlapping(text.as_ptr(), mem, text.len());
        set(r, SID, mem, text.len());
    }
}

unsafe fn value<'a>(r: *mut ngx_http_request_t, which: usize) -> Option<&'a [u8]> {
    let v = slot(r, which)?;
    if v.valid() == 0 || v.not_found() != 0 || v.data.is_null() || v.len() == 0 {
        return None;
    }
    Some(core::slice::from_raw_parts(v.data, v.len() as usize))
}

/// The room and session id recorded by the handler, when the request was admitted or passed.
pub unsafe fn recorded_session<'a>(r: *mut ngx_http_request_t) -> Option<(&'a [u8], u64)> {
    let room = value(r, ROOM)?;
    let sid = core::str::from_utf8(value(r, SID)?).ok()?;
    let sid = u64::from_str_radix(sid, 16).ok()?;
    Some((room, sid))
}
