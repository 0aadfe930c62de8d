//! `$smart_limit_status`, `$smart_limit_position`, `$smart_limit_room`,
//! `$smart_limit_event` (the room's scheduled event in its pre-queue or running, by name),
//! `$smart_limit_rate_status` (PASSED / LIMITED), for access logs, and `$smart_limit_token`
//! (the admission token of a request let in, [S28]: to pass to the origin in a header).
//!
//! Each reads the request's context ([`crate::ctx`]), which survives internal redirects
//! (`index`, `error_page`, named locations), so the log sees the decision wherever the request
//! ended up. Nothing is formatted unless a variable is read. A request the module did not
//! decide has empty values ("-" in logs).

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_http_add_variable, ngx_http_request_t, ngx_http_variable_value_t, ngx_int_t,
    ngx_str_t, NGX_HTTP_VAR_NOCACHEABLE,
};
use ngx::http::Request;

use crate::ctx::{Decided, RequestCtx};
use crate::request;

#[derive(Clone, Copy)]
enum Var {
    Status,
    Position,
    Room,
    RateStatus,
    Event,
    Token,
}

const VARS: [(&str, Var); 6] = [
    ("smart_limit_status", Var::Status),
    ("smart_limit_position", Var::Position),
    ("smart_limit_room", Var::Room),
    ("smart_limit_rate_status", Var::RateStatus),
    ("smart_limit_event", Var::Event),
    ("smart_limit_token", Var::Token),
];

/// Declares the variables (preconfiguration).
pub fn register(cf: &mut ngx_conf_t) -> Status {
    for (name, which) in VARS {
        let mut name = ngx_str_t {
            len: name.len(),
            data: name.as_ptr().cast_mut(),
        };
        // SAFETY: the configuration being parsed; nginx copies the name. Not cacheable: the
        // value can change after a first read (a request decided after a redirect).
        let var =
            unsafe { ngx_http_add_variable(cf, &mut name, NGX_HTTP_VAR_NOCACHEABLE as usize) };
        // SAFETY: null, or the variable nginx just made, in the configuration's pool.
        let Some(var) = (unsafe { var.as_mut() }) else {
            return Status::NGX_ERROR;
        };
        var.get_handler = Some(get);
        var.data = which as usize;
    }
    Status::NGX_OK
}

unsafe extern "C" fn get(
    r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    data: usize,
) -> ngx_int_t {
    // SAFETY: nginx passes the value slot to fill, live for this call.
    let Some(v) = (unsafe { v.as_mut() }) else {
        return Status::NGX_ERROR.0;
    };
    request::entry(r, "in a variable", Status::NGX_ERROR.0, |r| {
        let which = match data {
            0 => Var::Status,
            1 => Var::Position,
            2 => Var::Room,
            3 => Var::RateStatus,
            4 => Var::Event,
            _ => Var::Token,
        };
        if let Var::Token = which {
            match crate::token::of_request(r) {
                Some(token) => copy(r, v, token.as_bytes()),
                None => v.set_not_found(1),
            }
            return Status::NGX_OK.0;
        }
        if let Var::RateStatus = which {
            match RequestCtx::find(r).and_then(|c| c.rate) {
                Some(outcome) => {
                    let text = outcome.as_str();
                    set(v, text.as_ptr(), text.len());
                }
                None => v.set_not_found(1),
            }
            return Status::NGX_OK.0;
        }
        match RequestCtx::find(r).and_then(|c| c.decided) {
            Some(d) => fill(r, v, which, &d),
            None => v.set_not_found(1),
        }
        Status::NGX_OK.0
    })
}

fn fill(r: &Request, v: &mut ngx_http_variable_value_t, which: Var, d: &Decided) {
    let text: &[u8] = match which {
        Var::Status => d.outcome.as_str().as_bytes(),
        Var::Room => d.zone.params.name.as_bytes(),
        Var::RateStatus | Var::Token => return,
        Var::Event => {
            let Some((e, _)) = d.zone.event_now(crate::clock::now_ms()) else {
                v.set_not_found(1);
                return;
            };
            // (An event made at run time may leave the worker's list before the request ends:
            // the name is copied.)
            copy(r, v, e.spec.name.as_bytes());
            return;
        }
        Var::Position => {
            let Some(p) = d.position else {
                v.set_not_found(1);
                return;
            };
            let mut n = itoa::Buffer::new();
            copy(r, v, n.format(p).as_bytes());
            return;
        }
    };
    // Status names are static; the room name lives as long as the configuration.
    set(v, text.as_ptr(), text.len());
}

/// The value is a copy of `text` in the request's pool.
fn copy(r: &Request, v: &mut ngx_http_variable_value_t, text: &[u8]) {
    let mem = r.pool().alloc_unaligned(text.len()).cast::<u8>();
    if mem.is_null() {
        v.set_not_found(1);
        return;
    }
    // SAFETY: `mem` is a fresh pool block of `text.len()` bytes.
    unsafe { core::ptr::copy_nonoverlapping(text.as_ptr(), mem, text.len()) };
    set(v, mem, text.len());
}

fn set(v: &mut ngx_http_variable_value_t, data: *const u8, len: usize) {
    v.data = data.cast_mut();
    v.set_len(len as u32);
    v.set_valid(1);
    v.set_no_cacheable(0);
    v.set_not_found(0);
}
