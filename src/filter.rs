//! Origin commands: a response header filter that reads `X-Smart-Limit` from the response.
//!
//! `X-Smart-Limit: revoke` (value case-insensitive) ends the session the request was decided
//! on, at once: its entry leaves the room's active count (the place frees for the next in
//! line), the ticket cookie is deleted (`Max-Age=0`, replacing any ticket the handler had just
//! issued), `$smart_limit_status` becomes `REVOKED`, and `smart_limit_revoked_total` counts it.
//! The header itself never reaches the client, whatever its value.
//!
//! The session is the one the handler recorded in the request's context (admitted or passed
//! on this request). A request the module did not decide (e.g. under the `limit_req` rate,
//! [S1]) is matched by its ticket cookies instead: every room whose valid ticket it carries.
//! Requests with neither are left alone, header included: they are not ours (e.g. the origin
//! `server` of a test, whose response the front then sees).
//!
//! A client that ignores the deleted cookie and replays its old ticket (or admission token) is
//! refused on this node, as a new user, until the ticket would have run out anyway; on the
//! fleet's other nodes it passes until then (tickets and tokens are stateless).

use core::ptr::addr_of_mut;

use ngx::core::Status;
use ngx::ffi::{
    ngx_http_output_header_filter_pt, ngx_http_request_t, ngx_http_top_header_filter, ngx_int_t,
    ngx_list_part_t, ngx_list_t, ngx_table_elt_t, NGX_LOG_INFO,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, Request};
use ngx::ngx_log_error;

use crate::clock::now_ms;
use crate::conf::{MainConf, RoomRef};
use crate::cookie;
use crate::ctx::{Outcome, RequestCtx};
use crate::request;
use crate::store::Zone;
use crate::Module;

/// The response header the origin sends commands in.
pub const HEADER: &str = "X-Smart-Limit";

static mut NEXT_HEADER_FILTER: ngx_http_output_header_filter_pt = None;

/// Puts the filter at the top of the header filter chain (postconfiguration).
pub fn install() {
    // SAFETY: postconfiguration runs once per configuration in the master, alone; this is
    // how every nginx filter chains itself.
    unsafe {
        *addr_of_mut!(NEXT_HEADER_FILTER) = ngx_http_top_header_filter;
        ngx_http_top_header_filter = Some(header_filter);
    }
}

unsafe extern "C" fn header_filter(r: *mut ngx_http_request_t) -> ngx_int_t {
    // A failure here must not lose the response: the chain goes on whatever happens.
    request::entry(r, "in the response header filter", 0, |r| {
        filter(r);
        0
    });
    // SAFETY: set in install() before any request; read on the worker's only thread.
    match unsafe { *addr_of_mut!(NEXT_HEADER_FILTER) } {
        // SAFETY: the next filter of nginx's chain, with the request nginx passed us.
        Some(next) => unsafe { next(r) },
        None => Status::NGX_ERROR.0,
    }
}

/// The live entries of a header list (deleted ones, hash 0, are skipped), mutable: the
/// filter hides the command header from the client.
fn header_list(list: &mut ngx_list_t) -> impl Iterator<Item = &mut ngx_table_elt_t> {
    let mut part: *mut ngx_list_part_t = &mut list.part;
    let mut i = 0usize;
    core::iter::from_fn(move || loop {
        // SAFETY: the parts of a live nginx list, each holding `nelts` elements; every element
        // is yielded once, so no two live `&mut` alias.
        let p = unsafe { part.as_mut() }?;
        if i >= p.nelts {
            part = p.next;
            i = 0;
            continue;
        }
        // SAFETY: `i < nelts` elements of the part's array.
        let h = unsafe { &mut *p.elts.cast::<ngx_table_elt_t>().add(i) };
        i += 1;
        if h.hash != 0 {
            return Some(h);
        }
    })
}

fn filter(r: &mut Request) {
    if !r.is_main() {
        return;
    }
    let Some(mcf) = Module::main_conf(r) else {
        return;
    };
    if mcf.zones.is_empty() {
        return;
    }
    page_pass(r);
    // Cheap in the common case: one pass over the response headers.
    let mut revoke = false;
    let mut commands = 0;
    for h in header_list(&mut r.as_mut().headers_out.headers) {
        if h.key.as_bytes().eq_ignore_ascii_case(HEADER.as_bytes()) {
            commands += 1;
            revoke |= h
                .value
                .as_bytes()
                .trim_ascii()
                .eq_ignore_ascii_case(b"revoke");
        }
    }
    if commands == 0 {
        return;
    }
    let decided = RequestCtx::find(r)
        .and_then(|c| c.decided.as_ref())
        .map(|d| (d.zone, d.sid, d.admitted.map(|t| t.accepted_at)));
    let sessions = match decided {
        Some((zone, Some(sid), admitted_at)) => vec![(zone, sid, admitted_at)],
        _ => sessions_from_cookies(r, mcf),
    };
    if decided.is_none() && sessions.is_empty() {
        return; // not ours: pass the header on untouched
    }
    for h in header_list(&mut r.as_mut().headers_out.headers) {
        if h.key.as_bytes().eq_ignore_ascii_case(HEADER.as_bytes()) {
            h.hash = 0; // never passed to the client
        }
    }
    if revoke {
        revoke_sessions(r, &sessions);
    }
}

/// [S29] A document `smart_limit_documents` let go on while its room was idle, and that the
/// room did not decide after all (it was under the rate limit), carries its page's pass: the
/// page's sub-resources, asked for within milliseconds and possibly over the limit, then
/// pass the room instead of meeting it one by one. Server errors get none (no page to load).
fn page_pass(r: &mut Request) {
    let documents =
        Module::location_conf(r).is_some_and(|lcf| matches!(lcf.documents, RoomRef::Named(_)));
    if !documents || r.as_ref().headers_out.status >= 500 {
        return;
    }
    let Some(ctx) = RequestCtx::find(r) else {
        return;
    };
    let Some(zone) = ctx.page_pass.take() else {
        return;
    };
    if ctx.decided.is_none() {
        cookie::set_page_pass(r, zone, now_ms());
    }
}

/// Ends the sessions, and replaces any ticket this response sets by a deleted cookie.
fn revoke_sessions(r: &mut Request, sessions: &[Session]) {
    let now = now_ms();
    for &(zone, sid, admitted_at) in sessions {
        zone.revoke(sid, admitted_at, now);
        ngx_log_error!(
            NGX_LOG_INFO,
            r.log(),
            "smart_limit zone \"{}\": session revoked by the origin",
            zone.params.name
        );
        // Drop a ticket the handler set on this very request, then delete the cookie.
        let prefix = format!("{}=", zone.cookie.as_str());
        for h in header_list(&mut r.as_mut().headers_out.headers) {
            if h.key.as_bytes().eq_ignore_ascii_case(b"set-cookie")
                && h.value.as_bytes().starts_with(prefix.as_bytes())
            {
                h.hash = 0;
            }
        }
        cookie::delete_ticket(r, zone);
    }
    if let Some(d) = RequestCtx::find(r).and_then(|c| c.decided.as_mut()) {
        d.outcome = Outcome::Revoked;
    }
}

/// Sessions of valid tickets the request carries, one per room (for requests the module did
/// not decide).
fn sessions_from_cookies(r: &Request, mcf: &MainConf) -> Vec<Session> {
    mcf.zones()
        .filter_map(|zone| cookie::read_ticket(r, zone).map(|t| (zone, t.sid, Some(t.accepted_at))))
        .collect()
}

/// A session a revoke ends: its room, its id, and when the ticket or token the request came
/// with was admitted (none, or 0: not admitted).
type Session = (&'static Zone, u64, Option<u64>);
