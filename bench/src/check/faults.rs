//! (f) Across faults, nothing lost: for each fault, how its node's clients fared just after it.
//! The losses themselves are rules (c) and (f); this table puts them next to the faults.

use crate::history::Fault;

use super::latency::unanswered;
use super::load::History;
use super::violation::Violation;

/// Requests this long after a fault are its node's "requests after".
const AFTER_MS: u64 = 5000;
/// Losses this long after a fault are listed with it.
const LOSS_MS: u64 = 10_000;

/// One fault and what followed.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRow {
    pub fault: Fault,
    /// Requests to its node (every node for a Redis fault) sent within 5 s after it.
    pub requests: u64,
    pub errors: u64,
    /// (c)/(f) violations within 10 s after it.
    pub losses: u64,
}

/// The table, one row per fault in time order.
pub fn table<'v>(h: &History, violations: impl Iterator<Item = &'v Violation>) -> Vec<FaultRow> {
    // (sent, node, unanswered) by time, so each fault's 5 s is a range.
    let mut sent: Vec<(u64, u32, bool)> = h
        .reqs
        .iter()
        .map(|r| (r.sent, r.node, unanswered(r)))
        .collect();
    sent.sort_unstable();
    let mut losses: Vec<u64> = violations
        .filter(|v| v.rule.is_loss())
        .map(|v| v.at_ms)
        .collect();
    losses.sort_unstable();
    h.faults
        .iter()
        .map(|f| {
            let from = sent.partition_point(|s| s.0 < f.at);
            let to = sent.partition_point(|s| s.0 <= f.at.saturating_add(AFTER_MS));
            let window = sent.get(from..to).unwrap_or(&[]);
            let mine = window.iter().filter(|s| f.node.is_none_or(|n| n == s.1));
            let (requests, errors) = mine.fold((0, 0), |(n, e), s| (n + 1, e + u64::from(s.2)));
            let l_from = losses.partition_point(|&t| t < f.at);
            let l_to = losses.partition_point(|&t| t <= f.at.saturating_add(LOSS_MS));
            FaultRow {
                fault: f.clone(),
                requests,
                errors,
                losses: l_to.saturating_sub(l_from) as u64,
            }
        })
        .collect()
}
