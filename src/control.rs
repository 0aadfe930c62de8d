//! `smart_limit_control`: a small HTTP endpoint to watch the rooms and switch their mode at
//! run time, without a reload.
//!
//! - `GET` (or `HEAD`) `[?room=NAME]`: every room (or one) as JSON: mode in force, configured
//!   mode, limits, queue length, active sessions, counters.
//! - `POST ?room=NAME&mode=MODE`: switches the room to `fifo`, `random`, `passthrough`,
//!   `reject` or `queue_all`; `mode=default` goes back to the configured mode. Answers with the
//!   room as JSON. The mode is kept in the zone's shared memory: every worker sees it at once,
//!   and it survives reloads (not restarts).
//! - Anything else: 405; a bad query: 400; an unknown room: 404 (JSON `{"error": ...}`).
//!
//! The endpoint has no access control of its own: protect the location with `allow`/`deny`,
//! `auth_basic`, or a listener on a private address.

use core::panic::AssertUnwindSafe;

use ngx::core::Status;
use ngx::ffi::{
    ngx_http_discard_request_body, ngx_http_finalize_request, ngx_http_request_t, ngx_int_t,
    NGX_HTTP_BAD_REQUEST, NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_INTERNAL_SERVER_ERROR,
    NGX_HTTP_POST, NGX_LOG_ERR, NGX_LOG_NOTICE,
};
use ngx::http::HttpModuleMainConf;
use ngx::ngx_log_error;
use smart_limit_core::metrics::{parse_control_query, render_control_json, render_error_json};
use smart_limit_core::rules::Mode;

use crate::answer;
use crate::inflight::{self, InFlight};
use crate::metrics::{all_figures, figures};
use crate::store::{now_ms, Answer, StoreError, Zone};
use crate::Module;

const JSON: &str = "application/json";

pub unsafe extern "C" fn content_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    answer::guarded(r, "in the control endpoint", || serve(r))
}

unsafe fn error(r: *mut ngx_http_request_t, status: u16, message: &str) -> ngx_int_t {
    if !answer::add_header(r, "Cache-Control", b"no-store") {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    answer::send(r, status, JSON, render_error_json(message).as_bytes())
}

unsafe fn ok_json(r: *mut ngx_http_request_t, body: &str) -> ngx_int_t {
    if !answer::add_header(r, "Cache-Control", b"no-store") {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    answer::send(r, 200, JSON, body.as_bytes())
}

unsafe fn serve(r: *mut ngx_http_request_t) -> ngx_int_t {
    let method = (*r).method;
    let read_only = method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize != 0;
    let post = method & NGX_HTTP_POST as usize != 0;
    if ngx_http_discard_request_body(r) != Status::NGX_OK.0 {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    if !read_only && !post {
        if !answer::add_header(r, "Allow", b"GET, HEAD, POST") {
            return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
        }
        return error(
            r,
            405,
            "use GET to read, POST ?room=NAME&mode=MODE to switch",
        );
    }
    let Some(mcf) = Module::main_conf(&*r) else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    let args = if (*r).args.data.is_null() || (*r).args.len == 0 {
        &[][..]
    } else {
        core::slice::from_raw_parts((*r).args.data, (*r).args.len)
    };
    let query = match parse_control_query(args) {
        Ok(q) => q,
        Err(e) => return error(r, NGX_HTTP_BAD_REQUEST as u16, &e),
    };
    let now = now_ms();
    let zone: Option<&'static Zone> = match query.room {
        None => None,
        Some(name) => match mcf.zone(name) {
            // SAFETY: zones live in the cycle pool for as long as this configuration.
            Some(z) => Some(z.as_ref()),
            None => {
                return error(
                    r,
                    404,
                    &format!("no room \"{}\" (smart_limit_zone)", name.escape_default()),
                )
            }
        },
    };
    if read_only {
        if query.mode.is_some() {
            return error(r, 405, "switching a mode needs POST");
        }
        let rooms = match zone {
            Some(z) => vec![figures(z, now)],
            None => all_figures(mcf, now),
        };
        return ok_json(r, &render_control_json(&rooms, now / 1000));
    }
    let (Some(zone), Some(mode)) = (zone, query.mode) else {
        return error(
            r,
            NGX_HTTP_BAD_REQUEST as u16,
            "POST needs room=NAME and mode=MODE (fifo, random, passthrough, reject, queue_all, \
             or default)",
        );
    };
    match zone.set_mode(mode) {
        Answer::Now(result) => switched(r, zone, mode, result),
        Answer::Later(future) => suspend(r, zone, mode, future),
    }
}

/// The answer once the store has switched the mode (or failed to).
unsafe fn switched(
    r: *mut ngx_http_request_t,
    zone: &Zone,
    mode: Option<Mode>,
    result: Result<(), StoreError>,
) -> ngx_int_t {
    let name = mode.map_or("default", Mode::name);
    if let Err(e) = result {
        ngx_log_error!(
            NGX_LOG_ERR,
            (*(*r).connection).log,
            "smart_limit zone \"{}\": cannot switch the mode to {}: {}",
            zone.params.name,
            name,
            e
        );
        return error(r, 503, &format!("the store could not switch the mode: {e}"));
    }
    ngx_log_error!(
        NGX_LOG_NOTICE,
        (*(*r).connection).log,
        "smart_limit zone \"{}\": mode switched to {} by the control endpoint",
        zone.params.name,
        name
    );
    let now = now_ms();
    ok_json(r, &render_control_json(&[figures(zone, now)], now / 1000))
}

/// What a control request waiting on the store keeps (in the request's pool).
struct Pending {
    zone: &'static Zone,
    mode: Option<Mode>,
    call: InFlight<Result<(), StoreError>>,
}

/// The store answers later: keep the request open (`count`) and finish in [`resume`] when
/// the answer is in (a content handler is not re-run by the phases, so it sets its own write
/// handler).
unsafe fn suspend(
    r: *mut ngx_http_request_t,
    zone: &'static Zone,
    mode: Option<Mode>,
    future: core::pin::Pin<Box<dyn core::future::Future<Output = Result<(), StoreError>>>>,
) -> ngx_int_t {
    let call = inflight::start(r, future);
    if !inflight::keep(r, Pending { zone, mode, call }) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    let main = (*r).main;
    (*main).set_count((*main).count() + 1);
    (*r).write_event_handler = Some(resume);
    Status::NGX_DONE.into()
}

unsafe extern "C" fn resume(r: *mut ngx_http_request_t) {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let Some(pending) = inflight::kept::<Pending>(r) else {
            return Some(NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t);
        };
        let result = pending.call.take()?;
        Some(switched(r, pending.zone, pending.mode, result))
    }));
    match outcome {
        Ok(None) => {} // woken before the answer: keep waiting
        Ok(Some(rc)) => {
            (*r).write_event_handler = Some(ngx::ffi::ngx_http_request_empty_handler);
            ngx_http_finalize_request(r, rc);
        }
        Err(_) => {
            (*r).write_event_handler = Some(ngx::ffi::ngx_http_request_empty_handler);
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t);
        }
    }
}
