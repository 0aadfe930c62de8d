//! `smart_limit_metrics`: Prometheus text exposition (format 0.0.4) of every room.
//!
//! The figures come from each zone's shared-memory room ([`Zone::snapshot`]), which every
//! worker of the node updates, so one scrape of any worker gives the node's totals. The
//! rendering itself is `smart_limit_core::metrics` (pure, unit-tested).

use ngx::core::Status;
use ngx::ffi::{
    ngx_http_discard_request_body, ngx_http_request_t, ngx_int_t, NGX_HTTP_GET, NGX_HTTP_HEAD,
    NGX_HTTP_INTERNAL_SERVER_ERROR, NGX_HTTP_NOT_ALLOWED,
};
use ngx::http::HttpModuleMainConf;
use smart_limit_core::metrics::{render_prometheus, RoomFigures, PROMETHEUS_CONTENT_TYPE};
use smart_limit_core::parse::StoreKind;
use smart_limit_core::rules::Mode;

use crate::answer;
use crate::conf::MainConf;
use crate::store::{now_ms, Zone};
use crate::Module;

/// The figures of one zone now (its snapshot is None when the room cannot be read).
pub fn figures(zone: &Zone, now: u64) -> RoomFigures<'_> {
    let snapshot = zone.snapshot(now).ok();
    RoomFigures {
        room: &zone.params.name,
        store: match zone.params.store {
            StoreKind::Shm => "shm",
            StoreKind::Redis => "redis",
        },
        configured_mode: zone.limits.mode,
        override_mode: snapshot.and_then(|s| Mode::from_code(s.mode_override)),
        max_active: zone.limits.max_active,
        new_per_minute: zone.limits.new_per_minute,
        admission: zone.admission,
        snapshot,
    }
}

/// Figures of every zone, in declaration order.
pub fn all_figures(mcf: &MainConf, now: u64) -> Vec<RoomFigures<'_>> {
    mcf.zones
        .iter()
        // SAFETY: zones live in the cycle pool for as long as this configuration.
        .map(|z| figures(unsafe { z.as_ref() }, now))
        .collect()
}

pub unsafe extern "C" fn content_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    answer::guarded(r, "while rendering metrics", || serve(r))
}

unsafe fn serve(r: *mut ngx_http_request_t) -> ngx_int_t {
    if (*r).method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize == 0 {
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    if ngx_http_discard_request_body(r) != Status::NGX_OK.0 {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    let Some(mcf) = Module::main_conf(&*r) else {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    };
    let body = render_prometheus(&all_figures(mcf, now_ms()));
    if !answer::add_header(r, "Cache-Control", b"no-store") {
        return NGX_HTTP_INTERNAL_SERVER_ERROR as ngx_int_t;
    }
    answer::send(r, 200, PROMETHEUS_CONTENT_TYPE, body.as_bytes())
}
