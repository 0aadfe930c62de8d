//! The fleet script's flood step (`script.lua`, "Flood control") in Rust, for [`FleetModel`]
//! (`super::model`): the reported client keys' buckets charged with their places, and the keys
//! over their budget answered. `tests/fleet_flood_script.rs` holds the two to the same answers.
//!
//! [`FleetModel`]: super::FleetModel

use std::collections::{HashMap, HashSet};

use super::{FloodOver, FloodPlaces, FLOOD_ANSWER_CAP, FLOOD_REPORT_CAP};
use crate::room::gcra::Rate;

/// The flood keys of one room in "Redis".
#[derive(Debug, Default)]
pub(super) struct FloodModel {
    pub(super) rate: Option<Rate>,
    /// Each bucket's theoretical arrival time (us); a missing or past one is full.
    tat: HashMap<u64, u64>,
    /// Keys over their budget, until when (ms): the script's `flood_over` set.
    over: HashMap<u64, u64>,
}

impl FloodModel {
    /// A sync at `now` (ms) reporting `reported`: the answer's keys over their budget.
    pub(super) fn sync(&mut self, reported: &[FloodPlaces], now: u64) -> Vec<FloodOver> {
        let Some(rate) = self.rate else {
            return Vec::new();
        };
        let interval = rate.interval_us.max(1);
        let now_us = now.saturating_mul(1000);
        let mut answer = Vec::new();
        let mut charged = HashSet::new();
        for p in reported.iter().take(FLOOD_REPORT_CAP) {
            let tat = self.tat.get(&p.key).copied().unwrap_or(0).max(now_us);
            let tat = tat.saturating_add(p.places.saturating_mul(interval));
            self.tat.insert(p.key, tat);
            let wait_us =
                tat.saturating_sub(rate.burst.saturating_mul(interval).saturating_add(now_us));
            if wait_us > 0 {
                let retry_ms = wait_us.div_ceil(1000);
                self.over.insert(p.key, now + retry_ms);
                charged.insert(p.key);
                answer.push(FloodOver {
                    key: p.key,
                    retry_ms,
                });
            }
        }
        // Lapsed keys leave (the script removes at most a few a call; those left over are
        // never answered, so the answers are the same).
        self.over.retain(|_, until| *until > now);
        // The others, refused longest first (equal times: the key's hex digits, greater
        // first, as Redis orders the members of equal score backwards).
        let mut others: Vec<(u64, u64)> = self.over.iter().map(|(&k, &u)| (u, k)).collect();
        others.sort_unstable_by(|a, b| b.cmp(a));
        for (until, key) in others.into_iter().take(FLOOD_ANSWER_CAP) {
            if answer.len() >= FLOOD_ANSWER_CAP {
                break;
            }
            if !charged.contains(&key) {
                answer.push(FloodOver {
                    key,
                    retry_ms: until - now,
                });
            }
        }
        answer
    }
}
