//! The run's tables, in markdown.

use std::fmt::Write as _;
use std::time::Duration;

use crate::args::Args;
use crate::engine::Outcome;
use crate::members::Event;
use crate::stats::{accuracy, counted, quantile, reconverge, Accuracy, Tick, BAND};
use crate::stats::{Positions, HEAD};

/// How long true active must stay in the band to count as settled after an outage.
const HOLD_MS: u64 = 30_000;
/// The window before an outage its "usual level" is taken from, and after it its aftermath.
const AROUND_MS: u64 = 60_000;
/// The moments of a join, restart or removal: from this long before it...
const CHANGE_BEFORE_MS: u64 = 5_000;
/// ...to this long after the node is back in routing (a removal: after it left).
const CHANGE_AFTER_MS: u64 = 30_000;

/// The moments around a change (ms from the start, both ends included).
pub fn change_window(e: &Event) -> (u64, u64) {
    let from = e.at.saturating_sub(CHANGE_BEFORE_MS);
    (from, e.back.unwrap_or(e.at) + CHANGE_AFTER_MS)
}

/// An active window after a stop: when the sessions whose last sighting the lost zone held
/// leave the fleet's count early (the fleet's last sighting of them is up to a request period
/// older than the truth's).
pub fn window_later(e: &Event, a: &Args) -> (u64, u64) {
    let w = a.active_window_ms;
    let early = a.active_every_ms * 6 / 5 + a.interval_ms;
    let from = (e.at + w).saturating_sub(early);
    (from, e.back.unwrap_or(e.at) + w + a.interval_ms)
}

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

fn opt_secs(x: Option<u64>) -> String {
    x.map_or_else(|| "never (within the run)".to_string(), secs)
}

/// Admissions per interval while people wait (how fast the line moves).
pub fn admissions_per_interval(ticks: &[Tick]) -> f64 {
    let (mut sum, mut n) = (0u64, 0u64);
    for w in ticks.windows(2) {
        if w[0].waiting > 0 {
            sum += w[1].admitted - w[0].admitted;
            n += 1;
        }
    }
    if n == 0 {
        0.0
    } else {
        sum as f64 / n as f64
    }
}

fn accuracy_rows(s: &mut String, label: &str, a: &Accuracy) {
    let _ = writeln!(
        s,
        "| {label} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {:.3} / {:.3} |",
        a.ticks,
        a.max_ratio,
        a.min_ratio,
        a.mean_ratio,
        a.busy_ticks,
        pct(a.above),
        pct(a.below),
        a.room_max_ratio,
        a.room_min_ratio,
    );
}

pub fn render(o: &mut Outcome, given: &str, wall: Duration) -> String {
    let a = &o.args;
    let mut s = String::new();
    let run_s = a.seconds_ms as f64 / 1000.0;
    let _ = writeln!(s, "## smart-limit-sim\n");
    let _ = writeln!(s, "command: `{given}`\n");
    let _ = writeln!(s, "all flags: `{}`\n", a.command());
    let _ = writeln!(
        s,
        "wall time: {:.2} s for {} s of virtual time ({} waiting polls, {} admitted requests)\n",
        wall.as_secs_f64(),
        run_s,
        o.visits,
        o.active_requests
    );

    // ---------------------------------------------------------------- accuracy
    let _ = writeln!(
        s,
        "### Fleet accuracy (true active / max_active, per interval)\n"
    );
    let _ = writeln!(
        s,
        "| ticks | n (people wait) | max | min | mean | n (>= max_active/10 wait) | > 1.02 | \
         < 0.98 | room's own count max / min |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    let all = accuracy(&o.ticks, a.max_active, |_| true);
    accuracy_rows(&mut s, "all", &all);
    // The first fill is the arrivals' pace, not the room's accuracy: also from the first
    // tick the room was (within the band) full.
    if let Some(full) = o
        .ticks
        .iter()
        .find(|t| t.true_active as f64 >= BAND.0 * a.max_active as f64)
    {
        let after = accuracy(&o.ticks, a.max_active, |t| t.t >= full.t);
        accuracy_rows(
            &mut s,
            &format!("from the first fill (t = {})", secs(full.t)),
            &after,
        );
    }
    if let Some((start, len)) = a.outage {
        let calm = accuracy(&o.ticks, a.max_active, |t| {
            t.t + AROUND_MS < start || t.t >= start + len + AROUND_MS
        });
        accuracy_rows(&mut s, "outside outage (+60 s after)", &calm);
    }
    let _ = writeln!(
        s,
        "\n(from the third interval on; \"room's own count\" is the fleet's active set in Redis \
         over max_active, the number the free places are computed from)\n"
    );

    // ---------------------------------------------------------------- order
    let _ = writeln!(
        s,
        "### Order (admitted after a client who arrived more than one interval later)\n"
    );
    let _ = writeln!(
        s,
        "| inversions | share of admissions | over three intervals | worst gap (at t) | during the outage |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} (t = {}) | {} |\n",
        o.inversions.count,
        pct(o.inversions.count as f64 / o.admitted.max(1) as f64),
        o.inversions.far,
        secs(o.inversions.worst_gap_ms),
        secs(o.worst_inversion.0),
        o.inversions_in_outage
    );

    // ---------------------------------------------------------------- Redis
    let _ = writeln!(s, "### Redis calls\n");
    let _ = writeln!(
        s,
        "| syncs/s | draws/s | places drawn: asked -> got | calls/s | calls per decision | failed syncs (outage) | sessions reported/s: waiting, active | biggest report |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        s,
        "| {:.1} | {:.2} | {} -> {} | {:.1} | {:.5} | {} | {:.0}, {:.0} | {} sessions |\n",
        o.syncs as f64 / run_s,
        o.draws as f64 / run_s,
        o.places_asked,
        o.places_granted,
        o.calls as f64 / run_s,
        o.calls as f64 / o.visits.max(1) as f64,
        o.failed_syncs,
        o.reported_waiters as f64 / run_s,
        o.reported_active as f64 / run_s,
        o.biggest_report,
    );
    let _ = writeln!(
        s,
        "A decision is a waiting poll (one `visit`); requests on admitted tickets make no call. \
         Waiting answers: {} \"your turn, come back in a moment\" (the node's share used up), \
         {} with a refresh shorter than the configured one, {} before the node's first picture.\n",
        o.come_back_soon, o.early_refreshes, o.unknown
    );
    if !o.events.is_empty() || o.waited_first_sync > 0 {
        let _ = writeln!(
            s,
            "Nodes without a picture: {} waiting polls waited for the sync they triggered \
             (Redis answering) and were decided by its picture; {} answered without a picture \
             (Redis away: queued); {} admissions by a node without a picture; {} requests found \
             no node up.\n",
            o.waited_first_sync, o.unknown, o.admitted_unsynced, o.unrouted
        );
    }

    // ---------------------------------------------------------------- outage
    if let Some((start, len)) = a.outage {
        let end = start + len;
        let m = a.max_active.max(1) as f64;
        let ratio = |t: &Tick| t.true_active as f64 / m;
        let during: Vec<f64> = o
            .ticks
            .iter()
            .filter(|t| t.outage && t.waiting > 0)
            .map(ratio)
            .collect();
        let after: Vec<f64> = o
            .ticks
            .iter()
            .filter(|t| t.t >= end && t.t < end + AROUND_MS && t.waiting > 0)
            .map(ratio)
            .collect();
        let before: Vec<f64> = o
            .ticks
            .iter()
            .filter(|t| t.t + AROUND_MS >= start && t.t < start && t.waiting > 0)
            .map(ratio)
            .collect();
        let range = |v: &[f64]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(0.0, f64::max);
                format!("{lo:.3} .. {hi:.3}")
            }
        };
        let usual = (!before.is_empty()).then(|| before.iter().sum::<f64>() / before.len() as f64);
        let (first, settled) = reconverge(&o.ticks, a.max_active, end, BAND, HOLD_MS);
        let back =
            usual.map(|u| reconverge(&o.ticks, a.max_active, end, (u - 0.02, u + 0.02), HOLD_MS));
        let _ = writeln!(
            s,
            "### Outage {}..{} (Redis unreachable)\n",
            secs(start),
            secs(end)
        );
        let _ = writeln!(
            s,
            "| true/max 60 s before | during | 60 s after | back in [0.98, 1.02] first / settled 30 s | back to the level before (±0.02) first / settled |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|");
        let _ = writeln!(
            s,
            "| {} (mean {}) | {} | {} | {} / {} | {} |\n",
            range(&before),
            usual.map_or("-".to_string(), |u| format!("{u:.3}")),
            range(&during),
            range(&after),
            opt_secs(first),
            opt_secs(settled),
            back.map_or("-".to_string(), |(f, st)| format!(
                "{} / {}",
                opt_secs(f),
                opt_secs(st)
            )),
        );
    }

    if !o.events.is_empty() {
        changes(&mut s, o);
    }

    // ---------------------------------------------------------------- waiting
    let n_waits = o.waits_ms.len();
    let mean_wait = o.waits_ms.iter().sum::<u64>() as f64 / n_waits.max(1) as f64;
    let p50 = quantile(&mut o.waits_ms, 0.5);
    let p99 = quantile(&mut o.waits_ms, 0.99);
    let max = o.waits_ms.last().copied().unwrap_or(0);
    let _ = writeln!(s, "### Waiting\n");
    let _ = writeln!(
        s,
        "| admitted | abandoned | still waiting at the end | in the room at the end | mean wait | p50 | p99 | max |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
        o.admitted,
        o.abandoned,
        o.waiting_at_end,
        o.admitted_at_end,
        secs(mean_wait as u64),
        secs(p50),
        secs(p99),
        secs(max),
    );

    // ---------------------------------------------------------------- positions
    let per_interval = admissions_per_interval(&o.ticks);
    let _ = writeln!(
        s,
        "### Positions (answered vs true, + 1: the present waiters who arrived earlier, or those holding a place by the module's rule, `presence` after their last poll)\n"
    );
    let _ = writeln!(
        s,
        "| answered from | against | samples | mean abs error | mean signed (answered - true) | p50 / p90 / p99 / max abs | relative (sum abs / sum true) | relative p50 / p99 / max (each sample's) | relative p99 past position {} | admissions per interval | mean abs error in intervals |",
        HEAD
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (from, truth, p) in [
        ("the module", "present", &o.positions),
        ("the line's samples alone", "present", &o.positions_sampled),
        ("the module", "holding a place", &o.positions_held),
        (
            "the line's samples alone",
            "holding a place",
            &o.positions_sampled_held,
        ),
        (
            "floor: the line exact at each tick",
            "holding a place",
            &o.floor.at_last_tick,
        ),
        (
            "floor: ... and the interval's let-gos known",
            "holding a place",
            &o.floor.knowing_the_interval,
        ),
    ] {
        let (mut abs, mut rel) = (p.abs(0..=u64::MAX), p.rel_ppm(0..=u64::MAX));
        let n = p.samples.max(1) as f64;
        let mean_abs = p.sum_abs / n;
        let _ = writeln!(
            s,
            "| {from} | {truth} | {} | {:.1} | {:+.1} | {} / {} / {} / {} | {} | {} / {} / {} | {} | {:.1} | {:.1} |",
            p.samples,
            mean_abs,
            p.sum_signed / n,
            quantile(&mut abs, 0.5),
            quantile(&mut abs, 0.9),
            quantile(&mut abs, 0.99),
            abs.iter().max().copied().unwrap_or(0),
            pct(p.sum_abs / p.sum_true.max(1.0)),
            pct(quantile(&mut rel, 0.5) as f64 / 1e6),
            pct(quantile(&mut rel, 0.99) as f64 / 1e6),
            pct(rel.iter().max().copied().unwrap_or(0) as f64 / 1e6),
            pct(quantile(&mut p.rel_ppm(HEAD + 1..=u64::MAX), 0.99) as f64 / 1e6),
            per_interval,
            if per_interval > 0.0 {
                mean_abs / per_interval
            } else {
                0.0
            },
        );
    }
    let _ = writeln!(s);
    bands(&mut s, &o.positions, &o.positions_held);

    // ---------------------------------------------------------------- series
    if a.series_ms > 0 {
        let _ = writeln!(s, "### Over time\n");
        let _ = writeln!(
            s,
            "| t | arrived | waiting | true active | room active | line (Redis) | line - waiting | admitted | abandoned | inversions | free / shared out | waiters at or before the cursor |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for t in o.ticks.iter().filter(|t| t.t % a.series_ms == 0) {
            let _ = writeln!(
                s,
                "| {}{} | {} | {} | {} | {} | {} | {:+} | {} | {} | {} | {} / {} | {} |",
                t.t / 1000,
                if t.outage { " (outage)" } else { "" },
                t.arrived,
                t.waiting,
                t.true_active,
                t.room_active,
                t.line,
                t.line as i64 - t.waiting as i64,
                t.admitted,
                t.abandoned,
                t.inversions,
                t.free,
                t.granted,
                t.eligible
            );
        }
        let _ = writeln!(s);
    }

    // ---------------------------------------------------------------- nodes
    let total_w: f64 = o.node_weights.iter().sum();
    let _ = writeln!(s, "### Nodes\n");
    let _ = writeln!(
        s,
        "| node | weight | admitted | draws (places got) | dropped reports |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for (i, n) in o.nodes.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} ({}) | {} |",
            i + 1,
            pct(o.node_weights.get(i).copied().unwrap_or(0.0) / total_w.max(1e-12)),
            n.admitted,
            n.draws,
            n.draws_granted,
            n.dropped
        );
    }
    s
}

/// The fleet around each join, restart and removal, and what the node's new life met.
fn changes(s: &mut String, o: &Outcome) {
    let a = &o.args;
    let _ = writeln!(s, "### Joins and restarts\n");
    let _ = writeln!(
        s,
        "The fleet from {} s before each change to {} s after the node is back in routing (a \
         removal: after it left); inversions and admissions over the intervals of the window. \
         What a lost zone held shows later too: a session whose last sighting it held leaves \
         the fleet's count up to a request period early, an active window after (the last \
         column below: from the stop + active window - 1.2 x --active-every - an interval to \
         the return + active window + an interval).\n",
        CHANGE_BEFORE_MS / 1000,
        CHANGE_AFTER_MS / 1000
    );
    let _ = writeln!(
        s,
        "| moments | ticks (people wait) | true active / max: max | min | mean | < 0.98 (>= max_active/10 wait) | room's own count max / min | inversions (share of admissions) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    let row = |s: &mut String, label: &str, keep: &dyn Fn(&Tick) -> bool| {
        let acc = accuracy(&o.ticks, a.max_active, keep);
        let (inv, adm) = counted(&o.ticks, keep);
        let _ = writeln!(
            s,
            "| {label} | {} | {:.3} | {:.3} | {:.3} | {} | {:.3} / {:.3} | {} ({}) |",
            acc.ticks,
            acc.max_ratio,
            acc.min_ratio,
            acc.mean_ratio,
            pct(acc.below),
            acc.room_max_ratio,
            acc.room_min_ratio,
            inv,
            pct(inv as f64 / adm.max(1) as f64),
        );
    };
    let windows: Vec<(u64, u64)> = o.events.iter().map(change_window).collect();
    for (e, &(from, to)) in o.events.iter().zip(&windows) {
        let label = format!(
            "{} node {} at {} ({}..{})",
            e.kind,
            e.node,
            secs(e.at),
            secs(from),
            secs(to)
        );
        row(s, &label, &|t: &Tick| (from..=to).contains(&t.t));
    }
    let near = |t: &Tick| windows.iter().any(|&(from, to)| (from..=to).contains(&t.t));
    row(s, "all these moments", &near);
    row(s, "the rest of the run", &|t: &Tick| !near(t));
    row(s, "whole run", &|_: &Tick| true);
    if let Some(full) = o
        .ticks
        .iter()
        .find(|t| t.true_active as f64 >= BAND.0 * a.max_active as f64)
    {
        let label = format!("whole run from the first fill (t = {})", secs(full.t));
        row(s, &label, &|t: &Tick| t.t >= full.t);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| change | node | back in routing | first picture | polls that waited for its first sync | answers without a picture (Redis away) | lost with the zone: admissions, admitted sightings, waiter sightings | true active / max an active window later: max (t) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for e in &o.events {
        let (from, to) = window_later(e, a);
        let later = o
            .ticks
            .iter()
            .filter(|t| (from..=to).contains(&t.t))
            .max_by_key(|t| (t.true_active, u64::MAX - t.t))
            .map_or("-".to_string(), |t| {
                format!(
                    "{:.3} ({})",
                    t.true_active as f64 / a.max_active.max(1) as f64,
                    secs(t.t)
                )
            });
        let _ = writeln!(
            s,
            "| {} at {} | {} | {} | {} | {} | {} | {}, {}, {} | {later} |",
            e.kind,
            secs(e.at),
            e.node,
            e.back.map_or("-".to_string(), secs),
            match (e.first_picture, e.back) {
                (Some(p), Some(b)) => format!("{} (+{} ms)", secs(p), p.saturating_sub(b)),
                _ => "-".to_string(),
            },
            e.waited_first_sync,
            e.unknown,
            e.lost_admissions,
            e.lost_active,
            e.lost_waiters
        );
    }
    let _ = writeln!(s);
}

/// Where the error of the module's answers lies: by the true position, against both truths
/// (near the head a position moves by a large part of itself between two pictures).
fn bands(s: &mut String, present: &Positions, held: &Positions) {
    let _ = writeln!(
        s,
        "### The module's positions by true position\n\n| true position | share of samples | relative p50 / p99 (present) | relative p50 / p99 (holding a place) | answered - true, p1 / mean / p99 (holding a place) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    let all = held.pairs.len().max(1) as f64;
    for (lo, hi) in BANDS {
        let (Some(p), Some(h)) = (band(present, lo, hi), band(held, lo, hi)) else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {lo}..{} | {} | {} / {} | {} / {} | {} / {:+.1} / {} |",
            if hi == u64::MAX {
                "".to_string()
            } else {
                hi.to_string()
            },
            pct(h.n as f64 / all),
            pct(p.rel_p50),
            pct(p.rel_p99),
            pct(h.rel_p50),
            pct(h.rel_p99),
            h.p1,
            h.mean,
            h.p99,
        );
    }
    let _ = writeln!(s);
}

const BANDS: [(u64, u64); 7] = [
    (1, 100),
    (101, 1_000),
    (1_001, 2_048),
    (2_049, 5_000),
    (5_001, 20_000),
    (20_001, 100_000),
    (100_001, u64::MAX),
];

/// The samples of one band of true positions.
struct Band {
    n: usize,
    rel_p50: f64,
    rel_p99: f64,
    p1: i64,
    mean: f64,
    p99: i64,
}

fn band(p: &Positions, lo: u64, hi: u64) -> Option<Band> {
    let mut rel = p.rel_ppm(lo..=hi);
    let mut signed: Vec<i64> = p
        .pairs
        .iter()
        .filter(|&&(t, _)| (lo..=hi).contains(&t))
        .map(|&(_, e)| e)
        .collect();
    let n = rel.len();
    if n == 0 {
        return None;
    }
    signed.sort_unstable();
    Some(Band {
        n,
        rel_p50: quantile(&mut rel, 0.5) as f64 / 1e6,
        rel_p99: quantile(&mut rel, 0.99) as f64 / 1e6,
        p1: signed[n / 100],
        mean: signed.iter().sum::<i64>() as f64 / n as f64,
        p99: signed[(n * 99 / 100).min(n - 1)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admissions_per_interval_counts_only_while_people_wait() {
        let t = |admitted, waiting| Tick {
            admitted,
            waiting,
            ..Tick::default()
        };
        let ticks = [t(0, 5), t(10, 5), t(30, 0), t(100, 0), t(101, 1)];
        // Intervals starting with people waiting: 0->10 and 10->30.
        assert_eq!(admissions_per_interval(&ticks), 15.0);
        assert_eq!(admissions_per_interval(&[]), 0.0);
    }
}
