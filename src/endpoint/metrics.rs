//! `smart_limit_metrics`: Prometheus text exposition (format 0.0.4) of every room.
//!
//! The figures come from each zone's shared-memory room ([`Zone::snapshot`]), which every
//! worker of the node updates, so one scrape of any worker gives the node's totals. The
//! rendering itself is `smart_limit_core::metrics` (pure, unit-tested).

use ngx::core::Status;
use ngx::ffi::{
    ngx_conf_t, ngx_http_request_t, ngx_int_t, NGX_HTTP_GET, NGX_HTTP_HEAD, NGX_HTTP_NOT_ALLOWED,
};
use ngx::http::{HttpModuleMainConf, Request};
use smart_limit_core::metrics::{
    render_build_info, render_prometheus, render_rate_prometheus, EventFigures, RateFigures,
    RoomFigures, RoomTimes, PROMETHEUS_CONTENT_TYPE,
};
use smart_limit_core::room::rules::Mode;

use crate::answer;
use crate::clock::now_ms;
use crate::conf::directive::{refuse, set_content_handler, setter, Refused};
use crate::conf::{Endpoint, LocConf, MainConf};
use crate::request::{self, INTERNAL_ERROR};
use crate::store::Zone;
use crate::Module;

setter!(set_metrics, LocConf, metrics);

/// `smart_limit_metrics`: this location answers with Prometheus text.
fn metrics(cf: &mut ngx_conf_t, lcf: &mut LocConf) -> Result<(), Refused> {
    if lcf.endpoint != Endpoint::None {
        return Err(refuse(
            cf,
            "is duplicate or combined with smart_limit_control",
        ));
    }
    set_content_handler(cf, content_handler)?;
    lcf.endpoint = Endpoint::Metrics;
    Ok(())
}

/// The figures of one zone now (its snapshot is None when the room cannot be read).
pub fn figures(zone: &'static Zone, now: u64) -> RoomFigures<'static> {
    // (A Redis store's node copies the fleet's events when due, for the next look.)
    zone.keep_events_fresh(now);
    zone.refresh_events(now);
    let snapshot = zone.snapshot(now).ok();
    RoomFigures {
        origin: zone
            .params
            .auto
            .zip(zone.shm.steering())
            .map(|(a, st)| (a, st.view(&a))),
        room: &zone.params.name,
        store: zone.store_label(),
        configured_mode: zone.limits.mode,
        override_mode: snapshot.and_then(|s| Mode::from_code(s.mode_override)),
        max_active: zone.limits_in(None).max_active,
        new_per_minute: zone.limits.new_per_minute,
        admission: zone.admission,
        times: RoomTimes {
            presence_ms: zone.params.presence_ms,
            keep_ms: zone.limits.keep_ms,
            active_window_ms: zone.params.active_window_ms,
            timeout_ms: zone.params.timeout_ms,
            sync_ms: zone.params.sync_ms,
        },
        snapshot,
        fleet: zone.fleet_snapshot(now),
        events: zone
            .events()
            .iter()
            .map(|e| EventFigures {
                spec: e.spec.clone(),
                phase: e.spec.phase(now / 1000),
                source: e.source,
            })
            .collect(),
    }
}

/// Figures of every fleet rate zone, in declaration order.
pub fn rate_figures(mcf: &MainConf, now: u64) -> Vec<RateFigures<'static>> {
    mcf.rate_zones()
        .map(|z| RateFigures {
            zone: &z.params.name,
            fleet: z.cfg.fleet,
            rate_milli: z.params.rate_milli,
            snapshot: z.snapshot(now),
        })
        .collect()
}

/// Figures of every zone, in declaration order.
pub fn all_figures(mcf: &MainConf, now: u64) -> Vec<RoomFigures<'static>> {
    mcf.zones().map(|z| figures(z, now)).collect()
}

unsafe extern "C" fn content_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    request::entry(r, "while rendering metrics", INTERNAL_ERROR, serve)
}

fn serve(r: &mut Request) -> ngx_int_t {
    if r.as_ref().method & (NGX_HTTP_GET | NGX_HTTP_HEAD) as usize == 0 {
        return NGX_HTTP_NOT_ALLOWED as ngx_int_t;
    }
    if r.discard_request_body() != Status::NGX_OK {
        return INTERNAL_ERROR;
    }
    let Some(mcf) = Module::main_conf(r) else {
        return INTERNAL_ERROR;
    };
    let now = now_ms();
    let mut text = render_build_info(crate::version::MODULE, crate::version::nginx());
    text.push_str(&render_prometheus(&all_figures(mcf, now)));
    text.push_str(&render_rate_prometheus(&rate_figures(mcf, now)));
    answer::text(r, 200, PROMETHEUS_CONTENT_TYPE, &text)
}
