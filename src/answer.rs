//! The waiting answer the module writes itself ([S7]): HTML for people, JSON for programs
//! that ask for it; never cached; `Retry-After` says when to come back. Waiting and closed
//! answers have the configured status (`smart_limit_status`, 503 by default); the admitted
//! answer of a `smart_limit_poll` location is a 200 without `Retry-After`.
//!
//! The page is a template prepared at configuration time, written straight into a buffer of
//! the request's pool sized for it: no allocation and no formatting machinery per request.

use ngx::core::Status;
use ngx::ffi::ngx_int_t;
use ngx::http::Request;
use smart_limit_core::page::{self, Template, ViewStatus, WaitView};
use smart_limit_core::util::out::Out;

use crate::conf::LocConf;
use crate::request::{HeaderValue, RequestExt, INTERNAL_ERROR};

/// Sends the waiting (or closed, or admitted) answer for `view`; the page is the scheduled
/// event's in force (`page=`), else the location's (`smart_limit_page`), else the built-in one.
pub fn waiting(
    r: &mut Request,
    lcf: &LocConf,
    event_page: Option<&Template>,
    view: &WaitView,
) -> ngx_int_t {
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    let admitted = view.status == ViewStatus::Admitted;
    let status = if admitted { 200 } else { lcf.status() };
    if !admitted {
        let mut n = itoa::Buffer::new();
        let retry = HeaderValue::Copied(n.format(view.refresh_secs));
        if !r.add_static_header("Retry-After", retry) {
            return INTERNAL_ERROR;
        }
    }
    if !r.add_static_header("Cache-Control", HeaderValue::Static("no-store")) {
        return INTERNAL_ERROR;
    }
    if page::wants_json(r.accept()) {
        let Some(mut body) = r.body(page::json_max_len(view)) else {
            return INTERNAL_ERROR;
        };
        page::write_json(view, &mut body);
        r.respond(status, "application/json", body)
    } else {
        let lang = page::pick_lang(r.accept_language());
        let template = event_page.or(lcf.page.as_deref());
        let Some(mut body) = r.body(page::html_max_len(view, lang, template)) else {
            return INTERNAL_ERROR;
        };
        page::write_html(view, lang, template, &mut body);
        r.respond(status, "text/html; charset=utf-8", body)
    }
}

/// [S28] The "invite only" answer of an invite-only line (`invite=`): `status`, never
/// cached, HTML or JSON as the client asks.
pub fn invite_only(r: &mut Request, room: &str, status: u16) -> ngx_int_t {
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    if !r.add_static_header("Cache-Control", HeaderValue::Static("no-store")) {
        return INTERNAL_ERROR;
    }
    let Some(mut body) = r.body(page::invite_max_len(room.len())) else {
        return INTERNAL_ERROR;
    };
    if page::wants_json(r.accept()) {
        page::write_invite_json(room, &mut body);
        r.respond(status, "application/json", body)
    } else {
        page::write_invite_html(page::pick_lang(r.accept_language()), &mut body);
        r.respond(status, "text/html; charset=utf-8", body)
    }
}

/// [S29] The answer to a page's sub-resource from a client not admitted: the waiting status
/// and `Retry-After`, never cached, and no body (a stylesheet, script or image request gets
/// no HTML page; the browser shows the resource as missing, as for any failed load).
pub fn asset_refused(r: &mut Request, lcf: &LocConf) -> ngx_int_t {
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    let mut n = itoa::Buffer::new();
    if !r.add_static_header(
        "Retry-After",
        HeaderValue::Copied(n.format(lcf.refresh_secs())),
    ) || !r.add_static_header("Cache-Control", HeaderValue::Static("no-store"))
    {
        return INTERNAL_ERROR;
    }
    let Some(body) = r.body(0) else {
        return INTERNAL_ERROR;
    };
    r.respond(lcf.status(), "text/plain", body)
}

/// Sends a whole response the module rendered as text (metrics, the control endpoint's
/// JSON), never cached.
pub fn text(r: &mut Request, status: u16, content_type: &'static str, text: &str) -> ngx_int_t {
    if !r.add_static_header("Cache-Control", HeaderValue::Static("no-store")) {
        return INTERNAL_ERROR;
    }
    let Some(mut body) = r.body(text.len()) else {
        return INTERNAL_ERROR;
    };
    body.put(text.as_bytes());
    r.respond(status, content_type, body)
}

/// The cookie check of a first contact: `307` to the same URL (path and arguments), never
/// cached; the ticket is already in `Set-Cookie`.
pub fn cookie_check(r: &mut Request) -> ngx_int_t {
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    let uri = r.unparsed_uri().as_bytes().to_vec();
    if !r.set_location(&uri)
        || !r.add_static_header("Cache-Control", HeaderValue::Static("no-store"))
    {
        return INTERNAL_ERROR;
    }
    let Some(body) = r.body(0) else {
        return INTERNAL_ERROR;
    };
    r.respond(307, "text/html", body)
}
