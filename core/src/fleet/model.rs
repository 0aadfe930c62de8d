//! The synced room's script (`core/src/fleet/script.lua`) as plain Rust: the same rules over
//! in-memory sets, for the simulator (`sim/`), which runs millions of clients on a virtual
//! clock, and held to the script's answers by `tests/fleet_script.rs` on a real `redis-server`.
//!
//! The fleet's line is a Fenwick tree over arrival times (milliseconds from `base_ms`, within a
//! horizon), so the cursor and the samples of the line are order statistics in O(log n), as
//! `ZRANGE` by rank is in Redis.

use std::collections::{BTreeSet, HashMap};

use super::flood_model::FloodModel;
#[cfg(test)]
use super::Sighting;
use super::{Ask, Drawn, Fence, FleetConfig, Report, SyncAnswer};
use crate::room::gcra::Rate;

mod held;
pub(super) mod line;
mod share;

use share::Shared;

// The constants the model shares with the script are the script's too: `FLEET_SCRIPT`
// (script.rs) sends them in its preamble, so they are written here only.

/// Most waiters one call drops from the line: EXPIRE_STEP less the waiters it reports, at least
/// EXPIRE_MIN (the active set is trimmed whole).
pub(super) const EXPIRE_STEP: usize = 200;
pub(super) const EXPIRE_MIN: usize = 50;
/// The head of the present waiters the script looks up in each sync, for places a node of an
/// earlier build dropped from `present` only (a rolling upgrade; the model never has them).
pub(super) const HERE_CHECK: usize = 32;
/// Lapsed spent proofs one sync removes at most.
pub(super) const SPENT_EXPIRE: usize = 256;
/// How long the fleet keeps a spent proof's entry at least.
pub(super) const SPENT_KEEP_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy, Default)]
struct Node {
    seen: u64,
    grant: u64,
    draws: u64,
    alloc: u64,
    polls: u64,
    /// The fraction of a place its shares left over, in millionths.
    remainder: u64,
    gen: u64,
    seq: u64,
    /// Of its grant, the places held for sessions that end by `held_end`: those `held_from`..
    /// `held_from + held` places from the last of them to end (the script's "h:NODE": "held
    /// held_end held_from"); they count as held only while `held_end` is the allocation's
    /// `interval_end`.
    held: u64,
    held_end: u64,
    held_from: u64,
}

/// This interval's allocation (the script's `allocation`, stored as "win", "hz", "free",
/// "polls", "given"): its window, the end of the interval it shares out (the first sync of
/// `window`'s now + interval: every node's held places in it are among the sessions that end
/// by then), the free places it shares, the polls it shares them by, what was given out.
#[derive(Debug, Clone, Copy, Default)]
struct Allocation {
    window: u64,
    interval_end: u64,
    free: u64,
    polls: u64,
    given: u64,
}

/// A member's place among equal scores: Redis orders them by the member's bytes (its decimal
/// digits), so "12" < "123" < "13". Each digit d becomes the nibble d + 1, left-aligned, so
/// the numbers compare as their digit strings do.
fn lex(sid: u64) -> u128 {
    let digits = sid.to_string();
    let mut key = 0u128;
    for (i, d) in digits.bytes().enumerate() {
        key |= u128::from(d - b'0' + 1) << (4 * (31 - i));
    }
    key
}

/// A sorted set by last sight: member -> score, and the order for expiry (by score, then as
/// Redis orders equal scores).
#[derive(Debug, Default)]
struct BySight {
    score: HashMap<u64, u64>,
    order: BTreeSet<(u64, u128, u64)>,
}

impl BySight {
    fn add(&mut self, sid: u64, at: u64) {
        if let Some(old) = self.score.insert(sid, at) {
            self.order.remove(&(old, lex(sid), sid));
        }
        self.order.insert((at, lex(sid), sid));
    }

    /// `ZADD GT`: adds, or moves to a later sight only. True when the member is new.
    fn add_later(&mut self, sid: u64, at: u64) -> bool {
        match self.score.get(&sid) {
            Some(&old) if old >= at => false,
            Some(_) => {
                self.add(sid, at);
                false
            }
            None => {
                self.add(sid, at);
                true
            }
        }
    }

    fn remove(&mut self, sid: u64) -> bool {
        match self.score.remove(&sid) {
            Some(old) => {
                self.order.remove(&(old, lex(sid), sid));
                true
            }
            None => false,
        }
    }

    /// Up to `n` members last seen at or before `older_than`, oldest first.
    fn oldest(&self, older_than: u64, n: usize) -> Vec<u64> {
        self.oldest_seen(older_than, n)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// The same, each with its last sight.
    fn oldest_seen(&self, older_than: u64, n: usize) -> Vec<(u64, u64)> {
        self.order
            .iter()
            .take_while(|(t, _, _)| *t <= older_than)
            .take(n)
            .map(|&(t, _, s)| (s, t))
            .collect()
    }

    fn len(&self) -> u64 {
        self.score.len() as u64
    }

    /// Members last seen in `from..to`.
    fn count(&self, from: u64, to: u64) -> u64 {
        if from >= to {
            return 0;
        }
        self.order.range((from, 0, 0)..(to, 0, 0)).count() as u64
    }

    /// The sights of `held` members last seen in `from..to`, from the `lo`-th on: every one
    /// while they are at most `n`, else `n` of them evenly by rank (the script's ends).
    fn sights_by_rank(&self, (from, to): (u64, u64), lo: usize, held: usize, n: usize) -> Vec<u64> {
        if from >= to {
            return Vec::new();
        }
        let all: Vec<u64> = self
            .order
            .range((from, 0, 0)..(to, 0, 0))
            .skip(lo)
            .take(held)
            .map(|(t, _, _)| *t)
            .collect();
        let k = held.min(n);
        (1..=k)
            .filter_map(|i| all.get(i * held / k - 1).copied())
            .collect()
    }
}

/// The fleet's state in "Redis".
pub struct FleetModel {
    cfg: FleetConfig,
    base_ms: u64,
    allocation: Allocation,
    /// The last call, and after a silence: when it began (`hold`; expiry is held at that
    /// time) until `hold_until`, or until the nodes of `hold_wait` have all synced (the
    /// script's "heard", "hold", "hold_until", "hold_wait").
    heard: u64,
    hold: u64,
    hold_until: u64,
    /// (node, the window its first sync built after the silence has at least)
    hold_wait: Vec<(u64, u64)>,
    nodes: HashMap<u64, Node>,
    active: BySight,
    /// Present waiters by last sight; the same members as `here`.
    present: BySight,
    /// Absent waiters whose places are kept ([S27]), by last sight.
    away: BySight,
    /// Waiters' arrival, and the line (present and kept) as counts per millisecond of arrival.
    arrival: HashMap<u64, u64>,
    line: Vec<u32>,
    queue_len: u64,
    /// The present waiters as counts per millisecond of arrival (the script's K_HERE).
    here: Vec<u32>,
    here_len: u64,
    /// Flood control's buckets and the keys over their budget.
    flood_model: FloodModel,
    pressure_sums: PressureSums,
    /// The spent proofs (the script's K_SPENT, in its order), the last number ("spent_seq")
    /// and each node's cursor in them ("s:NODE").
    spent: Vec<SpentEntry>,
    spent_seq: u64,
    spent_told: HashMap<u64, u64>,
    /// The starved mark and the window it was set in (the script's "starved",
    /// "starved_win").
    starved: u64,
    starved_win: u64,
    /// Script calls made (syncs and draws).
    pub calls: u64,
}

/// One entry of the script's K_SPENT: its number (the score) and what the member
/// "HEX:UNTIL:NODE:AT" says.
#[derive(Debug, Clone, Copy)]
struct SpentEntry {
    seq: u64,
    key: u64,
    until: u64,
    node: u64,
    at: u64,
}

impl SpentEntry {
    /// The same member string in the sorted set (the number aside).
    fn same_member(&self, o: &SpentEntry) -> bool {
        (self.key, self.until, self.node, self.at) == (o.key, o.until, o.node, o.at)
    }
}

/// The script's sums for the fleet's pressure (script.lua, "The fleet's pressure": "pr_win",
/// "pr_in", "pr_out", "pr_r", "pr_d"), in the same arithmetic.
#[derive(Debug, Clone, Copy)]
struct PressureSums {
    win: u64,
    asked: u64,
    challenged: u64,
    admitted: u64,
    ratio_ppm: u64,
    doublings: u8,
}

impl Default for PressureSums {
    fn default() -> Self {
        PressureSums {
            win: 0,
            asked: 0,
            challenged: 0,
            admitted: 0,
            ratio_ppm: crate::util::PPM as u64,
            doublings: 0,
        }
    }
}

impl PressureSums {
    /// A sync of `window` reporting `r`'s newcomers and challenges and `admitted` admissions:
    /// the first of an interval a look (a second, or the interval if longer) after the last
    /// looks at the sums. The doublings in the picture.
    fn sync(
        &mut self,
        (window, interval): (u64, u64),
        queue_len: u64,
        r: &Report,
        admitted: u64,
    ) -> u8 {
        let look = crate::challenge::LOOK_MS.max(interval);
        if self.win == 0 || window >= self.win.saturating_add(look) {
            if self.win != 0 {
                let asked = self.asked.max(self.challenged);
                let ppm = f64::from(crate::util::PPM);
                let ratio = (1.0 - crate::challenge::keep()) * (asked + 1) as f64
                    / (self.admitted + 1) as f64;
                self.ratio_ppm =
                    (crate::challenge::kept(self.ratio_ppm as f64) + ratio * ppm).floor() as u64;
                self.doublings = if queue_len > 0 {
                    crate::challenge::doublings(self.ratio_ppm as f64 / ppm)
                } else {
                    0
                };
            }
            self.win = window;
            self.asked = 0;
            self.challenged = 0;
            self.admitted = 0;
        }
        self.asked += r.asked;
        self.challenged += r.challenged;
        self.admitted += admitted;
        self.doublings
    }
}

impl FleetModel {
    /// `base_ms`: the earliest arrival; `horizon_ms`: how far after it arrivals may come.
    pub fn new(cfg: FleetConfig, base_ms: u64, horizon_ms: u64) -> FleetModel {
        FleetModel {
            cfg,
            base_ms,
            allocation: Allocation::default(),
            heard: 0,
            hold: 0,
            hold_until: 0,
            hold_wait: Vec::new(),
            pressure_sums: PressureSums::default(),
            spent: Vec::new(),
            spent_seq: 0,
            spent_told: HashMap::new(),
            starved: 0,
            starved_win: 0,
            nodes: HashMap::new(),
            active: BySight::default(),
            present: BySight::default(),
            away: BySight::default(),
            arrival: HashMap::new(),
            line: vec![0; horizon_ms as usize + 1],
            queue_len: 0,
            here: vec![0; horizon_ms as usize + 1],
            here_len: 0,
            flood_model: FloodModel::default(),
            calls: 0,
        }
    }

    /// With flood control (`FleetScript::with_flood`'s twin).
    pub fn with_flood(mut self, rate: Option<Rate>) -> FleetModel {
        self.flood_model.rate = rate;
        self
    }

    /// A call at `now`: after a silence longer than a node's staleness (Redis away), the
    /// sightings the nodes made meanwhile are still to come, so expiry is held where it stood
    /// when the silence began until the nodes heard before it have synced again, or a
    /// staleness has passed (the script's preamble).
    fn hear(&mut self, now: u64) {
        let stale = self.cfg.stale_ms();
        if self.heard > 0 && now.saturating_sub(self.heard) > stale {
            let heard = self.heard;
            let interval = self.cfg.interval_ms;
            let wait: Vec<(u64, u64)> = self
                .nodes
                .iter()
                .filter(|(_, n)| heard.saturating_sub(n.seen) <= stale)
                .map(|(&id, n)| (id, (n.alloc + now).saturating_sub(n.seen + interval)))
                .collect();
            if !wait.is_empty() {
                let mut from = heard;
                if now < self.hold_until {
                    from = from.min(self.hold);
                }
                self.hold = from;
                self.hold_until = now + stale;
                self.hold_wait = wait;
            }
        }
        self.heard = self.heard.max(now);
    }

    /// A sync of `node` taken (its report is in): if it was built after the silence (its
    /// window is that much later than the node's last before it), the hold waits for it no
    /// more.
    fn synced_since_silence(&mut self, f: Fence, now: u64) {
        if now >= self.hold_until || self.hold_wait.is_empty() {
            return;
        }
        self.hold_wait
            .retain(|&(n, need)| n != f.node_id || f.window < need);
        if self.hold_wait.is_empty() {
            self.hold_until = now;
        }
    }

    /// Members last seen before this had left at `t` (`window_ms`: the active window or
    /// `presence`): time stands still where a silence began until the hold ends.
    fn cut(&self, t: u64, window_ms: u64) -> u64 {
        let t = if t < self.hold_until {
            t.min(self.hold)
        } else {
            t
        };
        t.saturating_sub(window_ms)
    }

    fn trim_active(&mut self, now: u64) {
        // ZREMRANGEBYSCORE -inf cut: inclusive.
        let cut = self.cut(now, self.cfg.active_window_ms);
        for sid in self.active.oldest(cut, usize::MAX) {
            self.active.remove(sid);
        }
    }

    fn entry(&self, node_id: u64, now: u64) -> Node {
        self.nodes.get(&node_id).copied().unwrap_or(Node {
            seen: now,
            ..Node::default()
        })
    }

    /// The script's "draw": up to `ask.want` places.
    pub fn draw(&mut self, f: Fence, now: u64, ask: Ask) -> Drawn {
        let Ask { want, oldest } = ask;
        self.calls += 1;
        self.hear(now);
        self.trim_active(now);
        let active = self.active.len();
        let mut me = self.entry(f.node_id, now);
        if u64::from(f.generation) < me.gen || f.seq < me.seq {
            return Drawn {
                granted: 0,
                seq: me.seq,
            };
        }
        let fleet = self.census(f.node_id, f.window, now);
        let mut mark = self.starved;
        let stale = self.starved_win.saturating_add(self.cfg.interval_ms) < f.window;
        if mark != 0 && (stale || self.here_at_rank(0).is_none_or(|h| h > mark)) {
            mark = 0;
        }
        let ours = mark != 0 && oldest != 0 && oldest <= mark;
        let kept = u64::from(mark != 0 && !ours);
        // The grants' places still held for sessions that have not ended are not free yet,
        // but they are not taken either: the pool's are those before them.
        let held = self.still_held_now(now);
        let left = self.cfg.max_active as i128
            - active as i128
            - (fleet.reserved + me.grant + me.draws + kept) as i128
            + held as i128;
        let granted = (want as i128).min(left).max(0) as u64;
        me.draws += granted;
        self.nodes.insert(f.node_id, me);
        if ours && granted > 0 {
            mark = 0;
        } else if granted < want && oldest != 0 && (mark == 0 || oldest <= mark) {
            (mark, self.starved_win) = (oldest, f.window);
        }
        self.starved = mark;
        Drawn {
            granted,
            seq: me.seq,
        }
    }

    /// The script's "sync", step by step, each step a method of the same name as its Lua twin
    /// in script.lua (model/share.rs; script.lua's header has the same table):
    ///
    /// | step | what it computes                                      | Rust / Lua      |
    /// |------|-------------------------------------------------------|-----------------|
    /// | 1    | a stale sync changes nothing; the node's entry        | `fence`         |
    /// | 2    | admissions and active sessions reported               | `take_sightings`|
    /// | 3    | waiters reported join the line                        | `take_waiters`  |
    /// | 4    | waiters unseen for presence go away, those away for   | `expire`        |
    /// |      | keep and sessions ended leave                         |                 |
    /// | 5    | the other live nodes' places and polls (`fleet`)      | `census`        |
    /// | 6    | active, line, expiring, leaving (`counts`)            | `count_sessions`|
    /// | 7    | the interval's end, the free places (`free`)          | `free_places`   |
    /// | 8    | where the held places go, the room (`places`)         | `held_places`   |
    /// | 9    | the allocation and the node's share: its quota        | `share`         |
    /// | 10   | the quota's held places and their ends                | `held_ends`     |
    /// | 11   | the fleet's pressure                                  | `pressure`      |
    /// | 12   | the cursor                                            | `cursor`        |
    /// | 13   | flood control's keys over their budget                | `flood`         |
    /// | 14   | spent proofs from other nodes                         | `spent_proofs`  |
    /// | 15   | the node's entry saved; the picture                   | `reply`         |
    ///
    /// (`hear`, before step 1, is the script's preamble: after a silence, expiry is held.)
    pub fn sync(&mut self, f: Fence, now: u64, r: &Report) -> SyncAnswer {
        self.calls += 1;
        self.hear(now);
        let Some(mut me) = self.fence(f, now) else {
            return SyncAnswer::Stale;
        };
        self.take_sightings(r, now);
        let reported = self.take_waiters(r, now);
        self.expire(now, reported);
        let fleet = self.census(f.node_id, f.window, now);
        let counts = self.count_sessions(now);
        let free = self.free_places(f, now, &fleet, &counts);
        let places = self.held_places(&me, f, now, &fleet, &counts, &free);
        let quota = self.share(&mut me, f, r, &fleet, &free, &places);
        let (held, ends) = self.held_ends(&mut me, now, quota, &counts, &free, &places);
        let pressure = self.pressure(f.window, &counts, r);
        let (cursor, rightful) = self.cursor(&counts);
        let flood = self.flood(r, now);
        let spent = self.spent_proofs(f.node_id, now, &r.spent);
        self.nodes.insert(f.node_id, me);
        let shared = Shared {
            cursor,
            rightful,
            quota,
            nodes: fleet.nodes + 1,
            reported: fleet.reported + u64::from(now >= f.window),
            pressure,
            held,
            ends,
            flood,
            spent,
        };
        SyncAnswer::Picture(self.reply(f.window, &counts, shared))
    }

    /// The fleet's active sessions as the model counts them.
    pub fn active(&self) -> u64 {
        self.active.len()
    }

    pub fn queue_len(&self) -> u64 {
        self.queue_len
    }

    /// The places the live nodes hold (grants and draws not yet reported).
    pub fn reserved(&self) -> u64 {
        self.nodes.values().map(|n| n.grant + n.draws).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fence(node_id: u64, seq: u64, now: u64) -> Fence {
        Fence {
            node_id,
            generation: 1,
            window: now / 1000 * 1000,
            seq,
        }
    }

    /// Whatever the order of syncs and draws, the places held never exceed what is free.
    #[test]
    fn grants_and_draws_never_exceed_max_active() {
        let cfg = FleetConfig {
            interval_ms: 1000,
            max_active: 300,
            active_window_ms: 12_000,
            presence_ms: 20_000,
            keep_ms: 20_000,
            max_line: 0,
        };
        let base = 1_800_000_000_000;
        let mut m = FleetModel::new(cfg, base, 3_600_000);
        let mut x: u64 = 0x9e37_79b9;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut now = base + 100;
        let mut sid = 1;
        let mut seqs = [0u64; 4];
        // The places each node holds (its share and draws since its last sync), which is all
        // it may admit.
        let mut held = [0u64; 4];
        for _ in 0..20_000 {
            now += next(300);
            let node = 1 + next(3) as usize;
            if next(3) == 0 {
                let ask = Ask {
                    want: 1 + next(5),
                    oldest: 0,
                };
                let d = m.draw(fence(node as u64, seqs[node], now), now, ask);
                if d.seq == seqs[node] {
                    held[node] += d.granted;
                }
            } else {
                seqs[node] += 1;
                let mut r = Report {
                    polls: next(40),
                    ..Report::default()
                };
                for _ in 0..next(5).min(held[node]) {
                    sid += 1;
                    r.admitted.push(Sighting { sid, at: now });
                }
                held[node] = match m.sync(fence(node as u64, seqs[node], now), now, &r) {
                    SyncAnswer::Picture(p) => p.quota,
                    SyncAnswer::Stale => 0,
                };
            }
            // Places whose session's window ends within the interval are given out already.
            let staying = m
                .active
                .count(now + cfg.interval_ms - cfg.active_window_ms, u64::MAX);
            assert!(
                staying + m.reserved() <= cfg.max_active,
                "{staying} + {} at {now}",
                m.reserved()
            );
            // And now: the grants' places still held for a session's end are not in use.
            m.trim_active(now);
            let in_use = m.active.len() + m.reserved() - m.still_held_now(now);
            assert!(in_use <= cfg.max_active, "{in_use} in use at {now}");
        }
    }
}
