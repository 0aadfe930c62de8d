//! Beside the clients: the faults, run at their times, and each node's own counts, read from
//! its metrics location once a second.

use std::process::Command;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::history::{Fault, Metrics, Record};
use crate::http::Client as Http;

use super::Shared;

/// Starts the fault and metrics threads; they stop by `end`.
pub fn start(s: Arc<Shared>, end: u64) -> Vec<JoinHandle<()>> {
    let mut out = Vec::new();
    let f = s.clone();
    if let Ok(t) = thread::Builder::new()
        .name("faults".into())
        .spawn(move || faults(&f, end))
    {
        out.push(t);
    }
    if !s.a.metrics_path.is_empty() {
        if let Ok(t) = thread::Builder::new()
            .name("metrics".into())
            .spawn(move || metrics(&s, end))
        {
            out.push(t);
        }
    }
    out
}

fn sleep_until(s: &Shared, at: u64) {
    let now = s.h.now();
    if at > now {
        thread::sleep(Duration::from_millis(at - now));
    }
}

fn faults(s: &Shared, end: u64) {
    let mut plan = s.a.faults.clone();
    plan.sort_by_key(|f| f.at_ms);
    for f in plan {
        if f.at_ms >= end {
            break;
        }
        sleep_until(s, f.at_ms);
        let at = s.h.now();
        let status = Command::new("sh").arg("-c").arg(&f.command).status();
        let until = s.h.now();
        if !status.is_ok_and(|st| st.success()) {
            eprintln!(
                "rehearse: fault '{}' at {at} ms: command failed: {}",
                f.what, f.command
            );
        }
        s.h.write(&Record::Fault(Fault {
            what: f.what.clone(),
            node: f.node,
            at,
            until: Some(until),
        }));
    }
}

fn metrics(s: &Shared, end: u64) {
    let a = &s.a;
    let mut http: Vec<Http> = a
        .nodes
        .iter()
        .map(|(t, _)| Http::new(t, None, Duration::from_secs(2)))
        .collect();
    let room = format!("room=\"{}\"", a.room);
    let mut tick = 0;
    loop {
        tick += 1000;
        if tick >= end {
            break;
        }
        sleep_until(s, tick);
        for node in s.live(s.h.now()) {
            let Some(conn) = http.get_mut(node as usize) else {
                continue;
            };
            let Ok(res) = conn.get(&a.metrics_path, "text/plain", None) else {
                continue;
            };
            let text = String::from_utf8_lossy(&res.body);
            let value = |name: &str| {
                text.lines()
                    .filter(|l| l.starts_with(name) && l.contains(&room))
                    .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<f64>().ok())
                    .map(|v| v as u64)
                    .next()
            };
            if let (Some(active), Some(queue)) = (
                value("smart_limit_active_sessions"),
                value("smart_limit_queue_length"),
            ) {
                s.h.write(&Record::Metrics(Metrics {
                    node,
                    at: s.h.now(),
                    active,
                    queue,
                }));
            }
        }
    }
}
