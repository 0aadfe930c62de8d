//! A rate zone's families (`smart_limit_rate_*`).

use std::fmt::Write as _;

use super::text::{family, label, value, Value};
use crate::rate::RateSnapshot;

/// One fleet rate zone as the operator sees it (`smart_limit_rate_zone`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateFigures<'a> {
    pub zone: &'a str,
    /// A Redis is configured: the zone's fleet figures come from it.
    pub fleet: bool,
    /// The configured rate, in milli-requests a second.
    pub rate_milli: u64,
    /// The zone's state; None when its shared memory could not be read.
    pub snapshot: Option<RateSnapshot>,
}

type RateOf = fn(&RateFigures, &RateSnapshot) -> Option<Value>;

/// The fleet rate families: name (without `smart_limit_rate_`), type, help, value.
const RATE_FAMILIES: &[(&str, &str, &str, RateOf)] = &[
    (
        "offered_total",
        "counter",
        "Requests offered to the rate zone on this node (every request of its locations).",
        |_, s| Some(Value::Int(s.offered)),
    ),
    (
        "passed_total",
        "counter",
        "Requests of this node that passed the rate zone's draw.",
        |_, s| Some(Value::Int(s.passed)),
    ),
    (
        "fleet_offered_total",
        "counter",
        "Requests offered to the rate zone on every node, as the fleet's last sync reported.",
        |f, s| f.fleet.then_some(Value::Int(s.fleet_offered_total)),
    ),
    (
        "fleet_passed_total",
        "counter",
        "Requests passed on every node, as the fleet's last sync reported.",
        |f, s| f.fleet.then_some(Value::Int(s.fleet_passed_total)),
    ),
    (
        "syncs_total",
        "counter",
        "Syncs with the fleet answered (or local measurements, without Redis).",
        |f, s| f.fleet.then_some(Value::Int(s.syncs)),
    ),
    (
        "sync_errors_total",
        "counter",
        "Syncs with the fleet that got no usable reply within the timeout.",
        |f, s| f.fleet.then_some(Value::Int(s.sync_errors)),
    ),
    (
        "probability",
        "gauge",
        "The probability each request passes with now (min(rate / fleet rate, 1)).",
        |_, s| Some(Value::Milli(u64::from(s.p_ppm) / 1000)),
    ),
    (
        "fleet_qps",
        "gauge",
        "Requests a second offered to the whole fleet, from the last picture.",
        |_, s| Some(Value::Milli(s.fleet_offered_milli)),
    ),
    (
        "fleet_passed_qps",
        "gauge",
        "Requests a second passed by the whole fleet, from the last picture.",
        |f, s| f.fleet.then_some(Value::Milli(s.fleet_passed_milli)),
    ),
    (
        "node_qps",
        "gauge",
        "Requests a second offered to this node, measured once an interval.",
        |_, s| Some(Value::Milli(s.local_offered_milli)),
    ),
    (
        "nodes",
        "gauge",
        "Nodes in the fleet's last picture.",
        |_, s| Some(Value::Int(s.nodes)),
    ),
    (
        "limit_qps",
        "gauge",
        "The configured rate (rate=), requests a second for the whole fleet.",
        |f, _| Some(Value::Milli(f.rate_milli)),
    ),
    (
        "sync_age_seconds",
        "gauge",
        "Seconds since the last fleet picture (absent before the first one).",
        |_, s| s.sync_age_ms.map(Value::Milli),
    ),
];

/// Prometheus text exposition of the fleet rate zones (appended to the rooms').
pub fn render_rate_prometheus(zones: &[RateFigures]) -> String {
    let mut out = String::with_capacity(256 + zones.len() * 1024);
    if zones.is_empty() {
        return out;
    }
    family(
        &mut out,
        "rate_up",
        "gauge",
        "1 when the rate zone's state could be read for this scrape, 0 otherwise.",
    );
    for z in zones {
        let _ = write!(out, "smart_limit_rate_up{{zone=\"");
        label(&mut out, z.zone);
        let _ = writeln!(out, "\"}} {}", u64::from(z.snapshot.is_some()));
    }
    for (name, kind, help, get) in RATE_FAMILIES {
        let full = format!("rate_{name}");
        family(&mut out, &full, kind, help);
        for z in zones {
            let Some(v) = z.snapshot.as_ref().and_then(|s| get(z, s)) else {
                continue;
            };
            let _ = write!(out, "smart_limit_{full}{{zone=\"");
            label(&mut out, z.zone);
            out.push_str("\"} ");
            value(&mut out, v);
        }
    }
    out
}
