//! (e) Answers fast: per node, the answered requests' durations (p50, p99, max); one slower than
//! the store's timeout plus slack is a violation ([S9], [S20]: a request waits for the store at
//! most `timeout=`). A request with no answer is expected within 2 s of a fault on its node or
//! of a Redis fault; anywhere else it is a violation too.

use std::collections::BTreeMap;

use crate::history::{Fault, Outcome, Req};

use super::load::History;
use super::violation::{Rule, Violation};

/// How long after a fault (its end, for one that lasts) an unanswered request is expected.
const AFTER_FAULT_MS: u64 = 2000;

/// One node's answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLatency {
    pub node: u32,
    pub answered: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    /// Answers slower than the limit.
    pub slow: u64,
    pub errors: u64,
    /// Errors within 2 s of a fault that explains them.
    pub errors_near_fault: u64,
}

/// What (e) found.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    pub violations: Vec<Violation>,
    pub limit_ms: u64,
    pub nodes: Vec<NodeLatency>,
}

/// Whether a request got no answer.
pub fn unanswered(r: &Req) -> bool {
    r.status == 0 || r.outcome == Outcome::Error
}

/// Nearest-rank percentile of sorted values (0 for none).
pub fn percentile(sorted: &[u64], pct: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() as u64 * pct).div_ceil(100).max(1);
    sorted
        .get(rank as usize - 1)
        .or(sorted.last())
        .copied()
        .unwrap_or(0)
}

/// Whether fault `f` explains an error on `node` in [sent, done]: it hit that node, or Redis
/// (no node), and the request was in flight between the fault and 2 s after it ended.
pub fn explains(f: &Fault, node: u32, r: &Req) -> bool {
    let end = f.until.unwrap_or(f.at).max(f.at);
    f.node.is_none_or(|n| n == node)
        && r.done >= f.at
        && r.sent <= end.saturating_add(AFTER_FAULT_MS)
}

/// (e) with answers allowed up to `limit_ms`.
pub fn check(h: &History, limit_ms: u64) -> Latency {
    let mut per_node: BTreeMap<u32, (Vec<u64>, NodeLatency)> = BTreeMap::new();
    let mut out = Latency {
        limit_ms,
        ..Latency::default()
    };
    for r in &h.reqs {
        let (durations, n) = per_node.entry(r.node).or_insert_with(|| {
            (
                Vec::new(),
                NodeLatency {
                    node: r.node,
                    ..NodeLatency::default()
                },
            )
        });
        if unanswered(r) {
            n.errors += 1;
            if h.faults.iter().any(|f| explains(f, r.node, r)) {
                n.errors_near_fault += 1;
            } else {
                out.violations.push(Violation::at(
                    Rule::Unanswered,
                    r,
                    format!(
                        "no answer from node {} (sent {} ms, given up at {} ms), no fault near",
                        r.node, r.sent, r.done
                    ),
                ));
            }
            continue;
        }
        let took = r.done.saturating_sub(r.sent);
        durations.push(took);
        if took > limit_ms {
            n.slow += 1;
            out.violations.push(Violation::at(
                Rule::Latency,
                r,
                format!(
                    "node {} answered {} ({:?}) after {took} ms (limit {limit_ms} ms)",
                    r.node, r.status, r.outcome
                ),
            ));
        }
    }
    for (_, (mut durations, mut n)) in per_node {
        durations.sort_unstable();
        n.answered = durations.len() as u64;
        n.p50 = percentile(&durations, 50);
        n.p99 = percentile(&durations, 99);
        n.max = durations.last().copied().unwrap_or(0);
        out.nodes.push(n);
    }
    out.violations.sort_by_key(|v| (v.at_ms, v.rule));
    out
}
