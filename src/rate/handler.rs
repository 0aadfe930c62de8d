//! The fleet rate's preaccess handler: each request of a `smart_limit_rate` location passes
//! with the zone's probability, or gets `smart_limit_rate_status` (default 503).
//!
//! Like `limit_req`, a request is decided once: after an internal redirect (`error_page`,
//! `index`) the handler lets it go on, so an overflow sent to a waiting room by
//! `error_page 512 = @room` is not drawn again there. The outcome is kept in the request's
//! context ([`crate::ctx`]) for `$smart_limit_rate_status`. No I/O, no lock: an atomic counter,
//! a load and a draw from the worker's generator.

use ngx::ffi::{ngx_conf_t, ngx_http_request_t, ngx_int_t};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf, Request};

use crate::ctx::{RateOutcome, RequestCtx};
use crate::request::{self, DECLINED, INTERNAL_ERROR};
use crate::Module;

/// Puts the handler in the PREACCESS phase. Installed after the room's handler, so it runs
/// before it (nginx runs a phase's handlers last-installed first): in a location with both,
/// the rate decides first.
pub fn install(cf: &mut ngx_conf_t) -> Result<(), ()> {
    request::install_preaccess(cf, rate_handler)
}

unsafe extern "C" fn rate_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    request::entry(
        r,
        "while drawing the rate, request refused",
        INTERNAL_ERROR,
        handle,
    )
}

fn handle(r: &mut Request) -> ngx_int_t {
    let Some(lcf) = Module::location_conf(r) else {
        return DECLINED;
    };
    let Some(zone) = Module::main_conf(r).and_then(|mcf| lcf.rate_zone(mcf)) else {
        return DECLINED;
    };
    if !r.is_main() {
        return DECLINED;
    }
    let Some(ctx) = RequestCtx::get_or_insert(r) else {
        return INTERNAL_ERROR;
    };
    if ctx.rate.is_some() {
        // Decided before an internal redirect.
        return DECLINED;
    }
    if zone.record() {
        ctx.rate = Some(RateOutcome::Passed);
        DECLINED
    } else {
        ctx.rate = Some(RateOutcome::Limited);
        lcf.rate_status() as ngx_int_t
    }
}
