//! Origin commands: a response header filter that reads `X-Smart-Limit` from the response.
//!
//! `X-Smart-Limit: revoke` (value case-insensitive) ends the session the request was decided
//! on, at once: its entry leaves the room's active count (the place frees for the next in
//! line), the ticket cookie is deleted (`Max-Age=0`, replacing any ticket the handler had just
//! issued), `$smart_limit_status` becomes `REVOKED`, and `smart_limit_revoked_total` counts it.
//! The header itself never reaches the client, whatever its value.
//!
//! The session is the one the handler recorded (admitted or passed on this request). A request
//! the module did not decide (e.g. under the `limit_req` rate, [S1]) is matched by its ticket
//! cookies instead: every room whose valid ticket it carries. Requests with neither are left
//! alone, header included: they are not ours (e.g. the origin `server` of a test, whose
//! response the front then sees).
//!
//! Note: tickets are stateless; a client that ignores the deleted cookie and replays its old
//! ticket passes again until the ticket's grant or session runs out.

use core::panic::AssertUnwindSafe;
use core::ptr::addr_of_mut;

use ngx::core::Status;
use ngx::ffi::{
    ngx_http_output_header_filter_pt, ngx_http_request_t, ngx_http_top_header_filter, ngx_int_t,
    ngx_table_elt_t, NGX_LOG_ALERT, NGX_LOG_INFO,
};
use ngx::http::HttpModuleMainConf;
use ngx::ngx_log_error;
use smart_limit_core::ticket;

use crate::answer;
use crate::conf::MainConf;
use crate::handler;
use crate::store::Zone;
use crate::vars::{self, Outcome};
use crate::Module;

/// The response header the origin sends commands in.
pub const HEADER: &str = "X-Smart-Limit";

static mut NEXT_HEADER_FILTER: ngx_http_output_header_filter_pt = None;

/// Puts the filter at the top of the header filter chain (postconfiguration).
pub unsafe fn register() {
    *addr_of_mut!(NEXT_HEADER_FILTER) = ngx_http_top_header_filter;
    ngx_http_top_header_filter = Some(header_filter);
}

unsafe extern "C" fn header_filter(r: *mut ngx_http_request_t) -> ngx_int_t {
    if std::panic::catch_unwind(AssertUnwindSafe(|| filter(r))).is_err() {
        ngx_log_error!(
            NGX_LOG_ALERT,
            (*(*r).connection).log,
            "smart_limit: internal error in the response header filter"
        );
    }
    match *addr_of_mut!(NEXT_HEADER_FILTER) {
        Some(next) => next(r),
        None => Status::NGX_ERROR.into(),
    }
}

unsafe fn bytes<'a>(s: &ngx::ffi::ngx_str_t) -> &'a [u8] {
    if s.data.is_null() || s.len == 0 {
        return &[];
    }
    core::slice::from_raw_parts(s.data, s.len)
}

unsafe fn filter(r: *mut ngx_http_request_t) {
    if (*r).main != r {
        return;
    }
    let Some(mcf) = Module::main_conf(&*r) else {
        return;
    };
    if mcf.zones.is_empty() {
        return;
    }
    // Cheap in the common case: one pass over the response headers.
    let mut commands: Vec<*mut ngx_table_elt_t> = Vec::new();
    for h in answer::header_list(&mut (*r).headers_out.headers) {
        if bytes(&h.key).eq_ignore_ascii_case(HEADER.as_bytes()) {
            commands.push(h);
        }
    }
    if commands.is_empty() {
        return;
    }
    let decided = vars::decided(r);
    let recorded = vars::recorded_session(r);
    let from_cookies = if recorded.is_none() {
        sessions_from_cookies(r, mcf)
    } else {
        Vec::new()
    };
    if !decided && from_cookies.is_empty() {
        return; // not ours: pass the header on untouched
    }
    let mut revoke = false;
    for h in commands {
        let value = bytes(&(*h).value).trim_ascii();
        revoke |= value.eq_ignore_ascii_case(b"revoke");
        (*h).hash = 0; // never passed to the client
    }
    if !revoke {
        return;
    }
    let mut sessions: Vec<(&'static Zone, u64)> = from_cookies;
    if let Some((room, sid)) = recorded {
        if let Some(z) = mcf
            .zones
            .iter()
            .find(|z| z.as_ref().params.name.as_bytes() == room)
        {
            sessions.push((z.as_ref(), sid));
        }
    }
    let secure = !(*(*r).connection).ssl.is_null();
    for (zone, sid) in sessions {
        zone.revoke(sid);
        ngx_log_error!(
            NGX_LOG_INFO,
            (*(*r).connection).log,
            "smart_limit zone \"{}\": session revoked by the origin",
            zone.params.name
        );
        // Drop a ticket the handler set on this very request, then delete the cookie.
        let prefix = format!("{}=", zone.cookie);
        for h in answer::header_list(&mut (*r).headers_out.headers) {
            if bytes(&h.key).eq_ignore_ascii_case(b"set-cookie")
                && bytes(&h.value).starts_with(prefix.as_bytes())
            {
                h.hash = 0;
            }
        }
        let gone = ticket::set_cookie_header(&zone.cookie, "", secure, Some(0));
        answer::add_header(r, "Set-Cookie", gone.as_bytes());
    }
    if decided {
        vars::set_outcome(r, Outcome::Revoked);
    }
}

/// Sessions of valid tickets the request carries, one per room (for requests the module did
/// not decide).
unsafe fn sessions_from_cookies(
    r: *mut ngx_http_request_t,
    mcf: &'static MainConf,
) -> Vec<(&'static Zone, u64)> {
    let mut out = Vec::new();
    for z in mcf.zones.iter() {
        let zone: &'static Zone = z.as_ref();
        let Some(keys) = zone.keys.as_ref() else {
            continue;
        };
        if let Some(t) = handler::read_ticket(r, keys, &zone.cookie, &zone.params.name) {
            out.push((zone, t.sid));
        }
    }
    out
}
