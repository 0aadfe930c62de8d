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
use super::{Ask, Drawn, Fence, FleetConfig, Report, RoomPicture, SyncAnswer};
use super::{SpentProof, ENDS_CAP, EXACT_LINE, KEEP_PPM, SPENT_ANSWER_CAP, SPENT_REPORT_CAP};
use crate::room::gcra::Rate;

mod held;
pub(super) mod line;

// The constants the model shares with the script are the script's too: `FLEET_SCRIPT`
// (script.rs) sends them in its preamble, so they are written here only.

/// Most waiters one call drops from the line: EXPIRE_STEP less the waiters it reports, at least
/// EXPIRE_MIN (the active set is trimmed whole).
pub(super) const EXPIRE_STEP: usize = 200;
pub(super) const EXPIRE_MIN: usize = 50;
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
    carry: u64,
    gen: u64,
    seq: u64,
    /// Of its grant, the places held for sessions that end by `held_hz`: those `held_off`..
    /// `held_off + held` places from the last of them to end (the script's "h:NODE": "held
    /// hz off"); they count as held only while `held_hz` is the fleet's `hz`.
    held: u64,
    held_hz: u64,
    held_off: u64,
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
        self.order
            .iter()
            .take_while(|(t, _, _)| *t <= older_than)
            .take(n)
            .map(|(_, _, s)| *s)
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
    win: u64,
    /// The end of the interval `win` shares out (the first sync of `win`'s now + interval):
    /// every node's held places in it are among the sessions that end by then.
    hz: u64,
    free_w: u64,
    polls_w: u64,
    given_w: u64,
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
    present: BySight,
    /// Waiters' arrival, and the line as counts per millisecond of arrival.
    arrival: HashMap<u64, u64>,
    line: Vec<u32>,
    queue_len: u64,
    /// Flood control's buckets and the keys over their budget.
    flood: FloodModel,
    pressure: PressureSums,
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
            ratio_ppm: 1_000_000,
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
                let ratio = 0.75 * (asked + 1) as f64 / (self.admitted + 1) as f64;
                self.ratio_ppm = (0.25 * self.ratio_ppm as f64 + ratio * 1e6).floor() as u64;
                self.doublings = if queue_len > 0 {
                    crate::challenge::doublings(self.ratio_ppm as f64 / 1e6)
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
            win: 0,
            hz: 0,
            free_w: 0,
            polls_w: 0,
            given_w: 0,
            heard: 0,
            hold: 0,
            hold_until: 0,
            hold_wait: Vec::new(),
            pressure: PressureSums::default(),
            spent: Vec::new(),
            spent_seq: 0,
            spent_told: HashMap::new(),
            starved: 0,
            starved_win: 0,
            nodes: HashMap::new(),
            active: BySight::default(),
            present: BySight::default(),
            arrival: HashMap::new(),
            line: vec![0; horizon_ms as usize + 1],
            queue_len: 0,
            flood: FloodModel::default(),
            calls: 0,
        }
    }

    /// With flood control (`FleetScript::with_flood`'s twin).
    pub fn with_flood(mut self, rate: Option<Rate>) -> FleetModel {
        self.flood.rate = rate;
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

    /// The other live nodes' places (grants and draws), their number and polls; silent nodes
    /// are dropped.
    fn census(&mut self, me: u64, now: u64) -> (u64, u64, u64) {
        let stale = self.cfg.stale_ms();
        self.nodes
            .retain(|&id, n| id == me || now.saturating_sub(n.seen) <= stale);
        let nodes = &self.nodes;
        self.spent_told
            .retain(|id, _| *id == me || nodes.contains_key(id));
        let (mut reserved, mut nodes, mut polls) = (0, 0, 0);
        for (&id, n) in &self.nodes {
            if id != me {
                reserved += n.grant + n.draws;
                nodes += 1;
                polls += n.polls;
            }
        }
        (reserved, nodes, polls)
    }

    fn entry(&self, node_id: u64, now: u64) -> Node {
        self.nodes.get(&node_id).copied().unwrap_or(Node {
            seen: now,
            ..Node::default()
        })
    }

    /// The script's spent proofs: `reported` go in the log (from this node, numbered), lapsed
    /// entries leave it, and the entries after this node's cursor that other nodes reported
    /// are answered (at most [`SPENT_ANSWER_CAP`]).
    fn spent_sync(&mut self, node: u64, now: u64, reported: &[SpentProof]) -> Vec<SpentProof> {
        for p in reported.iter().take(SPENT_REPORT_CAP) {
            // (A lapsed one is not sent.)
            if p.ms <= now {
                continue;
            }
            self.spent_seq += 1;
            let e = SpentEntry {
                seq: self.spent_seq,
                key: p.key,
                until: p.ms,
                node,
                at: now,
            };
            // (ZADD of a member already there renumbers it.)
            self.spent.retain(|o| !o.same_member(&e));
            self.spent.push(e);
        }
        let keep_from = now.saturating_sub(self.cfg.stale_ms().max(SPENT_KEEP_MS));
        let lapsed = self
            .spent
            .iter()
            .take(SPENT_EXPIRE)
            .take_while(|e| e.at < keep_from)
            .count();
        self.spent.drain(..lapsed);
        let since = self.spent_told.get(&node).copied().unwrap_or(0);
        let heard = self.spent.iter().filter(|e| e.seq > since);
        let heard: Vec<&SpentEntry> = heard.take(SPENT_ANSWER_CAP).collect();
        self.spent_told
            .insert(node, heard.last().map_or(since, |e| e.seq));
        heard
            .into_iter()
            .filter(|e| e.node != node && e.until > now)
            .map(|e| SpentProof {
                key: e.key,
                ms: e.until - now,
            })
            .collect()
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
        let (reserved, _, _) = self.census(f.node_id, now);
        me.seen = now;
        let mut mark = self.starved;
        let stale = self.starved_win.saturating_add(self.cfg.interval_ms) < f.window;
        if mark != 0 && (stale || self.at_rank(0).is_none_or(|h| h > mark)) {
            mark = 0;
        }
        let ours = mark != 0 && oldest != 0 && oldest <= mark;
        let kept = u64::from(mark != 0 && !ours);
        // The grants' places still held for sessions that have not ended are not free yet,
        // but they are not taken either: the pool's are those before them.
        let held = self.still_held(now);
        let left = self.cfg.max_active as i128
            - active as i128
            - (reserved + me.grant + me.draws + kept) as i128
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

    /// The script's "sync".
    pub fn sync(&mut self, f: Fence, now: u64, r: &Report) -> SyncAnswer {
        self.calls += 1;
        self.hear(now);
        let cfg = self.cfg;
        let mut me = self.entry(f.node_id, now);
        let gen = u64::from(f.generation);
        if gen < me.gen || (gen == me.gen && f.seq <= me.seq) || f.window < me.alloc {
            return SyncAnswer::Stale;
        }
        me.gen = gen;
        me.seq = f.seq;
        self.synced_since_silence(f, now);
        // The script gets ages (node_now - at) and scores now - age: with one clock, `at`.
        let seen_at = |at: u64| at.min(now);
        for e in &r.admitted {
            self.active.add_later(e.sid, seen_at(e.at));
            self.leave_line(e.sid);
        }
        for e in &r.active {
            self.active.add_later(e.sid, seen_at(e.at));
        }
        // Waiters: an active session never joins the line again; arrivals only move later.
        let mut queue_len = self.queue_len;
        for w in &r.waiters {
            if self.active.score.contains_key(&w.sid) {
                continue;
            }
            let in_line = self.arrival.contains_key(&w.sid);
            if !in_line && cfg.max_line > 0 && queue_len >= cfg.max_line {
                continue;
            }
            if !in_line {
                queue_len += 1;
            }
            self.present.add_later(w.sid, seen_at(w.at));
            self.join_line(w.sid, w.arrival);
        }
        for sid in self.present.oldest(
            self.cut(now, cfg.presence_ms),
            EXPIRE_STEP.saturating_sub(r.waiters.len()).max(EXPIRE_MIN),
        ) {
            self.leave_line(sid);
        }
        self.trim_active(now);
        let (reserved, others, polls) = self.census(f.node_id, now);
        let nodes = others + 1;
        me.seen = now;
        me.polls = if me.alloc == f.window {
            me.polls + r.polls
        } else {
            r.polls
        };
        let polls = polls + me.polls;
        let active = self.active.len();
        let queue_len = self.queue_len;
        let full = cfg.max_line > 0 && queue_len >= cfg.max_line;
        let aw = cfg.active_window_ms;
        let since = self.cut(now, aw);
        let expiring = self
            .active
            .count(since, self.cut(now + cfg.interval_ms, aw));
        let leaving = self
            .active
            .count(since, self.cut(now + cfg.horizon_ms(), aw));
        let left = (me.grant + me.draws).saturating_sub(r.admitted.len() as u64);
        me.draws = 0;
        if self.win != f.window && self.hz <= now + cfg.interval_ms / 2 {
            self.hz = now + cfg.interval_ms;
        }
        let ending_range = (since, self.cut(self.hz, aw));
        let ending = self.active.count(ending_range.0, ending_range.1);
        let free_now = (cfg.max_active as i128 - active as i128 - reserved as i128 + ending as i128)
            .max(0) as u64;
        // Where the node's held places may go: before the other nodes' (of this hz), after
        // the sessions an earlier hz's grants may still wait for; and what else is free now.
        let me_id = Some(f.node_id);
        let pend = self.pending(now, me_id).min(ending);
        // (A second sync in the interval keeps where its grant held, or what is left of it.)
        let (off, held_room) = if me.held > 0 && me.held_hz == self.hz && self.hz != 0 {
            let off = me.held_off;
            (off, (off + me.held).min(ending - pend).saturating_sub(off))
        } else {
            let off = self.span_of(me_id);
            (off, (ending - pend).saturating_sub(off))
        };
        let others = self.still_of(ending, me_id);
        let free_room = (cfg.max_active as i128 - active as i128 - reserved as i128
            + others as i128)
            .max(0) as u64;
        let room = held_room + free_room;
        if self.win != f.window {
            self.win = f.window;
            self.free_w = free_now;
            self.polls_w = polls;
            self.given_w = 0;
        } else {
            self.free_w = self.free_w.max(free_now + self.given_w);
        }
        let quota = if me.alloc != f.window {
            let share = if self.polls_w > 0 {
                (me.polls as f64 / self.polls_w as f64).min(1.0)
            } else {
                1.0 / nodes as f64
            };
            let millionths =
                (self.free_w as f64 * share * KEEP_PPM as f64).floor() as u64 + me.carry;
            let quota = millionths / 1_000_000;
            me.carry = millionths - quota * 1_000_000;
            let quota = quota.min(room);
            self.given_w += quota;
            me.alloc = f.window;
            quota
        } else {
            left.min(room)
        };
        me.grant = quota;
        // The script's held places: the grants take the last places of the interval to free
        // (the ending sessions' by their ends), this node's past the other grants' (a node's
        // second sync in the interval as well: where it held before may be behind another's);
        // the pool keeps those free first.
        let held = quota.min(held_room);
        let lo = ending.saturating_sub(off + held);
        me.held = held;
        me.held_hz = self.hz;
        me.held_off = if held > 0 { off } else { 0 };
        let ends = self
            .active
            .sights_by_rank(ending_range, lo as usize, held as usize, ENDS_CAP)
            .into_iter()
            .map(|seen| (seen + aw).saturating_sub(now))
            .collect();
        let pressure = self.pressure.sync(
            (f.window, cfg.interval_ms),
            queue_len,
            r,
            r.admitted.len() as u64,
        );
        let places = cfg.max_active as i128 - active as i128 + expiring as i128;
        let cursor = if places <= 0 {
            0
        } else if places as u64 >= queue_len {
            u64::MAX
        } else {
            self.cursor(places as u64, queue_len)
        };
        self.nodes.insert(f.node_id, me);
        let flood = self.flood.sync(&r.flood, now);
        let spent = self.spent_sync(f.node_id, now, &r.spent);
        SyncAnswer::Picture(RoomPicture {
            fleet_active: active,
            queue_len,
            cursor,
            quota,
            nodes,
            window_ms: f.window,
            free: self.free_w,
            expiring,
            leaving,
            held,
            ends,
            full,
            pressure,
            samples: self.samples(queue_len),
            exact: queue_len > 0 && queue_len <= EXACT_LINE as u64,
            flood,
            spent,
        })
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
            let in_use = m.active.len() + m.reserved() - m.still_held(now);
            assert!(in_use <= cfg.max_active, "{in_use} in use at {now}");
        }
    }
}
