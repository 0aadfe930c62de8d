//! The text summary: what was run, what the clients saw, each rule's measure, and the
//! violations (at most [`PER_RULE`] per rule).

use std::fmt::Write as _;

use crate::history::{Kind, Mode, Order, Outcome};

use super::load::History;
use super::violation::Rule;
use super::Findings;

/// Violations listed per rule; the rest are counted.
pub const PER_RULE: usize = 20;

fn mode(m: Mode) -> &'static str {
    match m {
        Mode::Shm => "shm",
        Mode::Redis => "redis",
        Mode::Sync => "sync",
    }
}

fn opt_ms(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v} ms"))
}

fn run_line(h: &History, out: &mut String) {
    let r = &h.run;
    let order = match r.order {
        Order::Fifo => "fifo".to_string(),
        Order::Lottery => format!("lottery (start {})", opt_ms(r.start_ms)),
    };
    let _ = writeln!(
        out,
        "run: mode {}, order {order}, {} node(s), max_active {}, session {}, grant {}, \
         active_window {} ms, presence {} ms, timeout {} ms, sync {} ms, refresh {} ms, \
         duration {} ms",
        mode(r.mode),
        r.nodes,
        r.max_active,
        opt_ms(r.session_ms),
        opt_ms(r.grant_ms),
        r.active_window_ms,
        r.presence_ms,
        r.timeout_ms,
        r.sync_ms,
        r.refresh_ms,
        r.duration_ms
    );
}

fn traffic(h: &History, f: &Findings, out: &mut String) {
    let kinds = [Kind::Person, Kind::Program, Kind::Minter];
    let by_kind: Vec<String> = kinds
        .iter()
        .map(|k| {
            let n = f.clients.iter().filter(|c| c.kind == *k).count();
            format!("{k:?} {n}").to_lowercase()
        })
        .collect();
    let slow = h
        .plans
        .iter()
        .filter(|p| p.poll_ms > h.run.refresh_ms)
        .count();
    let abandoned = f
        .clients
        .iter()
        .filter(|c| c.abandoned_at.is_some())
        .count();
    let _ = writeln!(
        out,
        "clients: {} ({}); {slow} poll slower than the refresh; {abandoned} abandoned",
        f.clients.len(),
        by_kind.join(", ")
    );
    let (phones, back, resumed) = phones(h);
    if phones > 0 {
        let _ = writeln!(
            out,
            "phones ([S27]): {phones} stepped away once while waiting (1.5 to 2.5 x presence), \
             {back} back before the end: {resumed} held their place (let in, or told a position \
             no further back than before), {} did not (keep {} ms)",
            back - resumed,
            h.run.kept_ms()
        );
    }
    let outcomes = [
        Outcome::New,
        Outcome::Waiting,
        Outcome::Admitted,
        Outcome::Throttled,
        Outcome::Other,
        Outcome::Error,
    ];
    let mut counts = [0u64; 6];
    for r in &h.reqs {
        if let Some(i) = outcomes.iter().position(|o| *o == r.outcome) {
            if let Some(c) = counts.get_mut(i) {
                *c += 1;
            }
        }
    }
    let answers: Vec<String> = outcomes
        .iter()
        .zip(counts)
        .map(|(o, n)| format!("{o:?} {n}").to_lowercase())
        .collect();
    let _ = writeln!(
        out,
        "requests: {}; answers: {}",
        h.reqs.len(),
        answers.join(", ")
    );
    let admitted = f
        .clients
        .iter()
        .filter(|c| !c.minter() && c.admitted.is_some())
        .count();
    let _ = writeln!(
        out,
        "admitted clients: {admitted}; faults: {}; metric samples: {}",
        h.faults.len(),
        h.metrics.len()
    );
}

fn measures(h: &History, f: &Findings, out: &mut String) {
    let a = &f.admission;
    let fill = a.peak as f64 / h.run.max_active as f64;
    let _ = write!(
        out,
        "(a) peak fill: {} / {} = {fill:.3} at {} ms (limit {}; {} sessions)",
        a.peak, h.run.max_active, a.peak_at, a.limit, a.sessions
    );
    match a.metrics_peak {
        Some(p) => {
            let _ = writeln!(out, "; nodes' own peak: {p} active");
        }
        None => out.push('\n'),
    }
    let end = h.run.duration_ms;
    if let Some((from, mean)) = super::admission::mean_fill(&a.series, h.run.max_active, end) {
        let _ = writeln!(
            out,
            "(a) mean fill from the first fill ({from} ms) to the end: {mean:.3} of max_active"
        );
    }
    let o = &f.order;
    let _ = writeln!(
        out,
        "(b) inversions: {} pair(s), {} client(s) passed over, of {} checked (tolerance {} ms); \
         {} pair(s) excused, the earlier client overdue or a kept place coming back ahead of it",
        o.pairs,
        o.violations.len(),
        o.checked,
        o.tolerance_ms,
        o.excused
    );
    let tol = match f.tolerances.position {
        Some(t) => format!("{t}"),
        None => "max(2, 1 %)".into(),
    };
    let _ = writeln!(
        out,
        "(c) positions: max growth {} over {} compared pairs (tolerance {tol}); {} grew past \
         it; dropped {}",
        f.positions.max_growth,
        f.positions.compared,
        f.positions.violations.len(),
        f.count(Rule::Dropped)
    );
    if let Some(a) = &f.accuracy {
        let _ = writeln!(
            out,
            "(c) positions against the clients holding a place (arrived earlier, not let in, \
             seen within keep): {} answers, told - true p1 {:+} median {:+} p99 {:+}; \
             furthest {:+} at {} ms (client {}) and {:+} at {} ms (client {})",
            a.answers,
            a.p1,
            a.median,
            a.p99,
            a.lowest.0,
            a.lowest.1,
            a.lowest.2,
            a.highest.0,
            a.highest.1,
            a.highest.2
        );
    }
    match &f.distinct {
        Some(d) => {
            let _ = writeln!(
                out,
                "(d) duplicate positions: {} among {} waiting answers",
                d.violations.len(),
                d.answers
            );
        }
        None => out.push_str("(d) duplicate positions: not checked (sync; --exact-sync)\n"),
    }
    let _ = writeln!(
        out,
        "(e) latency (limit {} ms):\n  node  answered    p50    p99    max   slow  errors  \
         near-fault",
        f.latency.limit_ms
    );
    for n in &f.latency.nodes {
        let _ = writeln!(
            out,
            "  {:>4}  {:>8}  {:>5}  {:>5}  {:>5}  {:>5}  {:>6}  {:>10}",
            n.node, n.answered, n.p50, n.p99, n.max, n.slow, n.errors, n.errors_near_fault
        );
    }
    let _ = writeln!(
        out,
        "(f) admitted sessions lost: {}",
        f.count(Rule::LostAdmission)
    );
    if !f.faults.is_empty() {
        out.push_str(
            "faults:\n     at_ms  what          node  until_ms  reqs_5s  errors  losses_10s\n",
        );
        for r in &f.faults {
            let node = r.fault.node.map_or_else(|| "-".into(), |n| n.to_string());
            let until = r.fault.until.map_or_else(|| "-".into(), |u| u.to_string());
            let _ = writeln!(
                out,
                "  {:>8}  {:<12}  {:>4}  {:>8}  {:>7}  {:>6}  {:>10}{}",
                r.fault.at,
                r.fault.what,
                node,
                until,
                r.requests,
                r.errors,
                r.losses,
                if r.losses > 0 { "  <- lost" } else { "" }
            );
        }
    }
}

fn violations(f: &Findings, out: &mut String) {
    let total = f.violations().count();
    let _ = writeln!(out, "violations: {total}");
    for rule in Rule::ALL {
        let mine: Vec<_> = f.violations().filter(|v| v.rule == rule).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{}: {}", rule.label(), mine.len());
        for v in mine.iter().take(PER_RULE) {
            let _ = writeln!(out, "  {v}");
        }
        if mine.len() > PER_RULE {
            let _ = writeln!(out, "  ... and {} more", mine.len() - PER_RULE);
        }
    }
}

/// The whole summary for `name` (the history's path).
pub fn text(h: &History, f: &Findings, name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "smart-limit-bench check {name}");
    run_line(h, &mut out);
    let _ = writeln!(
        out,
        "lines: {} read, {} malformed (skipped)",
        h.lines, h.malformed.count
    );
    for (line, why) in &h.malformed.examples {
        let _ = writeln!(out, "  line {line}: {why}");
    }
    traffic(h, f, &mut out);
    measures(h, f, &mut out);
    violations(f, &mut out);
    let _ = writeln!(out, "result: {}", if f.clean() { "PASS" } else { "FAIL" });
    out
}

/// Phones that stepped away ([S27]), how many came back before the run ended, and how many of
/// those still held their place: their first answer after the absence let them in, or told
/// them a position no further back than their last one before it.
fn phones(h: &History) -> (usize, usize, usize) {
    use std::collections::HashMap;
    let back: HashMap<u64, u64> = h
        .plans
        .iter()
        .filter_map(|p| p.away.map(|(at, ms)| (p.client, at.saturating_add(ms))))
        .collect();
    // Per phone: its last position told before coming back, and its first answer after.
    let mut before: HashMap<u64, u64> = HashMap::new();
    let mut first: HashMap<u64, bool> = HashMap::new();
    for r in &h.reqs {
        let Some(&at) = back.get(&r.client) else {
            continue;
        };
        if r.sent < at {
            if let (Outcome::Waiting, Some(p)) = (r.outcome, r.pos) {
                before.insert(r.client, p);
            }
            continue;
        }
        let held = match (r.outcome, r.pos) {
            (Outcome::Admitted, _) => true,
            (Outcome::Waiting, Some(p)) => before.get(&r.client).is_some_and(|&b| p <= b),
            (Outcome::Waiting | Outcome::New, _) => false,
            _ => continue,
        };
        first.entry(r.client).or_insert(held);
    }
    let resumed = first.values().filter(|held| **held).count();
    (back.len(), first.len(), resumed)
}
