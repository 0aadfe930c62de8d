//! `smart_limit_control`: a small HTTP endpoint to watch the rooms and switch their mode at
//! run time, without a reload.
//!
//! - `GET` (or `HEAD`) `[?room=NAME]`: every room (or one) as JSON: mode in force, configured
//!   mode, limits, queue length, active sessions, counters.
//! - `POST ?room=NAME&mode=MODE`: switches the room to `fifo`, `random`, `passthrough`,
//!   `reject` or `queue_all`; `mode=default` goes back to the configured mode. Answers with the
//!   room as JSON. The mode is kept in the zone's shared memory: every worker sees it at once,
//!   and it survives reloads (not restarts).
//! - `POST ?room=NAME&event=NAME&start=T[&prequeue=T&end=T&max_active=N...]`: creates a
//!   scheduled event ([S18]) with the parameters of `smart_limit_event`, checked as `nginx -t`
//!   checks them against the room's other events; `DELETE ?room=NAME&event=NAME` cancels one
//!   (made here or configured). Kept in the zone's shared memory (reloads keep them) and, on a
//!   Redis store, in Redis for the whole fleet (see `store::event`). A refused change: 409
//!   (overlap, a name in use, a full table), 404 (no such event).
//! - `POST ?room=NAME&max_active=N` (no `event=`): pins a `max_active=auto` room's value to N
//!   ([S26]); `max_active=auto` gives it back to the controller. In shared memory: every worker
//!   at once, kept over reloads. A room without `auto`: 409.
//! - Anything else: 405; a bad query: 400; an unknown room: 404 (JSON `{"error": ...}`).
//!
//! The endpoint has no access control of its own: protect the location with `allow`/`deny`,
//! `auth_basic`, or a listener on a private address.

use core::future::Future;
use core::pin::Pin;

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_http_finalize_request, ngx_http_request_empty_handler, ngx_http_request_t,
    ngx_int_t, NGX_HTTP_BAD_REQUEST, NGX_HTTP_DELETE, NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_POST,
    NGX_LOG_ERR, NGX_LOG_NOTICE,
};
use ngx::http::{HttpModuleMainConf, Request};
use ngx::ngx_log_error;
use smart_limit_core::event::runtime::Change;
use smart_limit_core::event::{parse_event, EventError, EventSpec};
use smart_limit_core::metrics::{parse_control_query, render_control_json, render_error_json};
use smart_limit_core::room::rules::Mode;

use super::metrics::{all_figures, figures};
use crate::answer;
use crate::clock::now_ms;
use crate::conf::directive::{refuse, set_content_handler, setter, Refused};
use crate::conf::{Endpoint, LocConf};
use crate::ctx::{ControlAction, PendingControl, RequestCtx, Suspended};
use crate::inflight;
use crate::request::{self, RequestExt, INTERNAL_ERROR};
use crate::store::event::{read_page, EventsError, PageError};
use crate::store::{Answer, Zone};
use crate::Module;

const JSON: &str = "application/json";

setter!(set_control, LocConf, control);

/// `smart_limit_control`: this location shows the rooms (GET) and switches their mode (POST).
fn control(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.endpoint != Endpoint::None {
        return Err(refuse(
            cf,
            "is duplicate or combined with smart_limit_metrics",
        ));
    }
    set_content_handler(cf, content_handler)?;
    lcf.endpoint = Endpoint::Control;
    Ok(())
}

unsafe extern "C" fn content_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    request::entry(r, "in the control endpoint", INTERNAL_ERROR, serve)
}

fn error(r: &mut Request, status: u16, message: &str) -> ngx_int_t {
    answer::text(r, status, JSON, &render_error_json(message))
}

fn serve(r: &mut Request) -> ngx_int_t {
    let method = r.as_ref().method;
    let read_only = method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize != 0;
    let post = method & NGX_HTTP_POST as usize != 0;
    let delete = method & NGX_HTTP_DELETE as usize != 0;
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    if !read_only && !post && !delete {
        if !r.add_header("Allow", "GET, HEAD, POST, DELETE") {
            return INTERNAL_ERROR;
        }
        return error(
            r,
            405,
            "use GET to read, POST ?room=NAME&mode=MODE to switch, POST ?room=NAME&event=NAME&\
             start=T... to create an event, DELETE ?room=NAME&event=NAME to cancel one",
        );
    }
    let Some(mcf) = Module::main_conf(r) else {
        return INTERNAL_ERROR;
    };
    let args = r.as_ref().args.as_bytes().to_vec();
    let query = match parse_control_query(&args) {
        Ok(q) => q,
        Err(e) => return error(r, NGX_HTTP_BAD_REQUEST as u16, &e.to_string()),
    };
    let now = now_ms();
    let zone = match query.room {
        None => None,
        Some(name) => match mcf.zone(name) {
            Some(z) => Some(z),
            None => {
                let msg = format!("no room \"{}\" (smart_limit_zone)", name.escape_default());
                return error(r, 404, &msg);
            }
        },
    };
    if read_only {
        if query.mode.is_some() || query.event.is_some() || query.pin.is_some() {
            return error(
                r,
                405,
                "changing a room needs POST (or DELETE to cancel an event)",
            );
        }
        let rooms = match zone {
            Some(z) => vec![figures(z, now)],
            None => all_figures(mcf, now),
        };
        return answer::text(r, 200, JSON, &render_control_json(&rooms, now / 1000));
    }
    let (zone, action, answer) = match (zone, delete, query.mode, query.event) {
        (Some(zone), false, Some(mode), None) => {
            (zone, ControlAction::Mode(mode), zone.set_mode(mode).into())
        }
        (Some(zone), false, None, Some(name)) => {
            let spec = match event_spec(zone, name, &query.event_args) {
                Ok(spec) => spec,
                Err(e) => return error(r, NGX_HTTP_BAD_REQUEST as u16, &e.to_string()),
            };
            let answer = zone.change_events(Change::Create(spec), now);
            (zone, ControlAction::Create(name.to_string()), answer)
        }
        (Some(zone), false, None, None) if query.pin.is_some() => {
            let pin = query.pin.flatten();
            if zone.params.auto.and(zone.shm.steering()).is_none() {
                return error(r, 409, "the room's max_active is not auto: nothing to pin");
            }
            (
                zone,
                ControlAction::Pin(pin),
                zone.pin_max_active(pin).into(),
            )
        }
        (Some(zone), true, None, Some(name)) if query.event_args.is_empty() => {
            let answer = zone.change_events(Change::Cancel(name.to_string()), now);
            (zone, ControlAction::Cancel(name.to_string()), answer)
        }
        _ => {
            return error(
                r,
                NGX_HTTP_BAD_REQUEST as u16,
                "POST needs room=NAME and mode=MODE (fifo, random, passthrough, reject, \
                 queue_all, or default), or event=NAME and the event's start= (and any other \
                 parameter of smart_limit_event), or max_active=N|auto alone (max_active=auto \
                 rooms); DELETE needs room=NAME and event=NAME only",
            )
        }
    };
    match answer {
        Answer::Now(result) => changed(r, zone, &action, result),
        Answer::Later(future) => suspend(r, zone, action, future),
    }
}

/// Why an event a create asks for was refused (the `400` answer's message).
#[derive(Debug, thiserror::Error)]
enum SpecError {
    #[error(transparent)]
    Event(#[from] EventError),
    #[error("event \"{0}\": page= must be an absolute path without spaces")]
    PagePath(String),
    #[error("event \"{name}\": page= {source}")]
    Page { name: String, source: PageError },
}

/// The event a create asks for, checked as `smart_limit_event` is (its page must be an
/// absolute path: there is no configuration prefix at run time, and every worker reads it).
fn event_spec(zone: &Zone, name: &str, args: &[String]) -> Result<EventSpec, SpecError> {
    let room = format!("room={}", zone.params.name);
    let words: Vec<&str> = [name, room.as_str()]
        .into_iter()
        .chain(args.iter().map(String::as_str))
        .collect();
    let spec = parse_event(&words)?;
    if let Some(path) = &spec.page {
        if !path.starts_with('/') || path.contains(char::is_whitespace) {
            return Err(SpecError::PagePath(spec.name));
        }
        read_page(path).map_err(|source| SpecError::Page {
            name: spec.name.clone(),
            source,
        })?;
    }
    Ok(spec)
}

/// The answer once the store has made the change (or failed to, or refused it).
fn changed(
    r: &mut Request,
    zone: &'static Zone,
    action: &ControlAction,
    result: Result<(), EventsError>,
) -> ngx_int_t {
    // What was done, and what could not be.
    let (done, not_done) = match action {
        ControlAction::Mode(mode) => {
            let m = mode.map_or("default", Mode::name);
            (
                format!("mode switched to {m}"),
                format!("cannot switch the mode to {m}"),
            )
        }
        ControlAction::Create(name) => (
            format!("event \"{name}\" created"),
            format!("cannot create event \"{name}\""),
        ),
        ControlAction::Cancel(name) => (
            format!("event \"{name}\" cancelled"),
            format!("cannot cancel event \"{name}\""),
        ),
        ControlAction::Pin(pin) => (
            match pin {
                Some(n) => format!("max_active pinned to {n}"),
                None => "max_active back to auto".to_string(),
            },
            "cannot pin max_active".to_string(),
        ),
    };
    match result {
        Ok(()) => {}
        Err(EventsError::Refused(e)) => {
            let status = match e {
                EventError::NotFound(_) => 404,
                _ => 409,
            };
            return error(r, status, &e.to_string());
        }
        Err(EventsError::Store(e)) => {
            ngx_log_error!(
                NGX_LOG_ERR,
                r.log(),
                "smart_limit zone \"{}\": {}: {}",
                zone.params.name,
                not_done,
                e
            );
            return error(r, 503, &format!("the store could not make the change: {e}"));
        }
    }
    ngx_log_error!(
        NGX_LOG_NOTICE,
        r.log(),
        "smart_limit zone \"{}\": {} by the control endpoint",
        zone.params.name,
        done
    );
    let now = now_ms();
    answer::text(
        r,
        200,
        JSON,
        &render_control_json(&[figures(zone, now)], now / 1000),
    )
}

/// The store answers later: keep the request open (`count`) and finish in [`resume`] when
/// the answer is in (a content handler is not re-run by the phases, so it sets its own write
/// handler).
fn suspend(
    r: &mut Request,
    zone: &'static Zone,
    action: ControlAction,
    future: Pin<Box<dyn Future<Output = Result<(), EventsError>>>>,
) -> ngx_int_t {
    let call = inflight::start(r, future);
    let Some(ctx) = RequestCtx::get_or_insert(r) else {
        return INTERNAL_ERROR;
    };
    ctx.suspended = Some(Suspended::Control(PendingControl { zone, action, call }));
    let main = r.as_ref().main;
    // SAFETY: the main request of a live request; one more reference keeps it open until
    // `resume` finalizes it.
    unsafe { (*main).set_count((*main).count() + 1) };
    r.as_mut().write_event_handler = Some(resume);
    Status::NGX_DONE.0
}

unsafe extern "C" fn resume(r: *mut ngx_http_request_t) {
    let rc = request::entry(r, "in the control endpoint", INTERNAL_ERROR, |r| {
        let Some(ctx) = RequestCtx::find(r) else {
            return INTERNAL_ERROR;
        };
        let Some(Suspended::Control(pending)) = ctx.suspended.take() else {
            return INTERNAL_ERROR;
        };
        let Some(result) = pending.call.take() else {
            // Woken before the answer: keep waiting.
            ctx.suspended = Some(Suspended::Control(pending));
            return Status::NGX_AGAIN.0;
        };
        changed(r, pending.zone, &pending.action, result)
    });
    if rc == Status::NGX_AGAIN.0 {
        return;
    }
    // SAFETY: nginx called this write handler with the live request `suspend` kept open;
    // finalizing it here drops the reference `suspend` took.
    unsafe {
        (*r).write_event_handler = Some(ngx_http_request_empty_handler);
        ngx_http_finalize_request(r, rc);
    }
}
