//! `max_active=auto` ([S26]): the log phase measures what the origin did for each admitted
//! request that reached an upstream, and steers the room's `max_active` from it
//! ([`smart_limit_core::capacity`]). Requests the room answered itself (waiting pages, cookie
//! checks, refusals) and those served without an upstream (static files) are not measured.

use ngx::ffi::{ngx_http_request_t, ngx_http_upstream_state_t, ngx_int_t, ngx_msec_t};
use ngx::http::{HttpModuleMainConf, Request};
use smart_limit_core::capacity::control::Load;
use smart_limit_core::capacity::steering::Sample;

use crate::clock::now_ms;
use crate::ctx::{Outcome, RequestCtx};
use crate::request;
use crate::store::Zone;
use crate::Module;

/// Adds the measuring handler to the log phase (postconfiguration), if any room has
/// `max_active=auto`: other configurations pay nothing per request.
pub fn install(cf: &mut ngx::ffi::ngx_conf_t) -> Result<(), ()> {
    let steered =
        Module::main_conf(cf).is_some_and(|mcf| mcf.zones().any(|z| z.params.auto.is_some()));
    match steered {
        true => request::install_log(cf, log_handler),
        false => Ok(()),
    }
}

unsafe extern "C" fn log_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    // The log phase's return value is not looked at; a failure here loses one sample.
    request::entry(r, "while measuring the origin", 0, |r| {
        measure(r);
        0
    })
}

fn measure(r: &mut Request) {
    let Some(d) = RequestCtx::find(r).and_then(|c| c.decided.as_ref()) else {
        return;
    };
    if !matches!(d.outcome, Outcome::Admitted | Outcome::Passed) || d.zone.params.auto.is_none() {
        return;
    }
    let zone = d.zone;
    if let Some(sample) = upstream_sample(r) {
        steer(zone, sample, now_ms());
    }
}

/// What the upstream did for the request: the time of every try, and whether the last one
/// failed (a 5xx, which is also how nginx records a timeout or a refused connection). None:
/// no upstream was asked, or it gave no status (the client went away first).
fn upstream_sample(r: &Request) -> Option<Sample> {
    // SAFETY: null, or the array nginx keeps for the request's upstream tries; it lives in
    // the request's pool.
    let states = unsafe { r.as_ref().upstream_states.as_ref() }?;
    if states.elts.is_null() || states.nelts == 0 {
        return None;
    }
    // SAFETY: `nelts` states of the array's element type.
    let states = unsafe {
        core::slice::from_raw_parts(
            states.elts.cast::<ngx_http_upstream_state_t>(),
            states.nelts,
        )
    };
    let status = states.last()?.status;
    if status == 0 {
        return None;
    }
    // A try nginx did not finish timing holds -1.
    let ms = states
        .iter()
        .map(|s| s.response_time)
        .filter(|&t| t != ngx_msec_t::MAX)
        .fold(0u64, |acc, t| acc.saturating_add(t as u64));
    Some(Sample {
        ms,
        failed: status >= 500,
    })
}

/// Counts the sample. On the shared-memory store, the worker whose sample closes a window
/// steps the rule, with the sessions the room counts active and the people waiting, and logs a
/// change of direction at `notice`; on a fleet, the counts wait for this node's next call to
/// Redis, which steps the fleet's window (`store::steer`).
pub fn steer(zone: &Zone, sample: Sample, now: u64) {
    let (Some(auto), Some(st)) = (zone.params.auto, zone.shm.steering()) else {
        return;
    };
    if zone.on_fleet() {
        st.count(sample, &auto);
        return;
    }
    let Some(window) = st.observe(sample, now, &auto) else {
        return;
    };
    let limits = zone.limits_at(now);
    let Ok(load) = zone.shm.with_room(|room| {
        let s = room.snapshot(now, &limits);
        Load {
            active: s.active,
            waiting: s.queue_len,
        }
    }) else {
        return;
    };
    if let Some(moved) = st.step(window, load, &auto, now) {
        zone.log_auto_move(&moved, &window, &auto);
    }
}
