//! `smart-limit-bench auto`: visitors in front of a room and an origin of limited capacity
//! (issue 50's `scripts/bench --auto`). Visitors arrive at a steady rate; each loads the page
//! as a navigation and, once the origin's page comes back, its assets at once (one connection
//! each, as browsers do), thinks, and loads the page again, until its stay (drawn between
//! `--stay-min-ms` and `--stay-max-ms` from its first admission) ends and it leaves. A visitor
//! told to wait comes back when the answer's `Retry-After` says. Once a second the room's
//! control endpoint is read (the `max_active` in force, the active sessions); `--halve-at S`
//! halves the model origin's capacity S seconds in (a deploy that halves it).
//!
//! Printed: one JSON line with goodput (pages fully loaded per second), the origin's answers
//! as the visitors timed them (p50, p99, 5xx: an answer not the room's), the time `max_active`
//! settled, and the series; `--series FILE` writes the per-second series as CSV.

mod visitor;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::args::{parse_url as parse_target, Target};
use crate::http;
use visitor::{Tally, Visitor};

#[derive(Debug, Parser)]
#[command(name = "smart-limit-bench auto", disable_version_flag = true)]
struct Cli {
    /// the front nginx (a loopback URL)
    #[arg(long)]
    target: String,
    /// the page visitors load
    #[arg(long, default_value = "/")]
    page: String,
    /// comma-separated assets loaded at once after the page
    #[arg(long, default_value = "/a.css,/b.js,/c.png")]
    assets: String,
    /// a string only the origin's page contains
    #[arg(long, default_value = "origin")]
    marker: String,
    /// visitors arriving per second
    #[arg(long, default_value = "10")]
    arrivals: f64,
    /// length of the run (s)
    #[arg(long, default_value = "60")]
    seconds: u64,
    /// a visitor's stay once admitted: between these (ms)
    #[arg(long, default_value = "10000")]
    stay_min_ms: u64,
    #[arg(long, default_value = "20000")]
    stay_max_ms: u64,
    /// pause between two page loads of an admitted visitor (ms)
    #[arg(long, default_value = "1000")]
    think_ms: u64,
    /// the control endpoint's path on the target, and the room
    #[arg(long, default_value = "/control")]
    control: String,
    #[arg(long, default_value = "shop")]
    room: String,
    /// the model origin (for --halve-at)
    #[arg(long)]
    origin: Option<String>,
    /// halve the origin's capacity this many seconds in
    #[arg(long)]
    halve_at: Option<u64>,
    /// a label for the report
    #[arg(long, default_value = "run")]
    label: String,
    /// the per-second series, as CSV
    #[arg(long)]
    series: Option<String>,
    /// a request's timeout (ms)
    #[arg(long, default_value = "10000")]
    timeout_ms: u64,
}

/// One second of the run.
#[derive(Debug, Clone, Copy, Default)]
struct Second {
    max_active: u64,
    active: u64,
    complete: u64,
}

pub fn main(argv: &[String]) -> ExitCode {
    let cli = match Cli::try_parse_from(
        std::iter::once("auto".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => return crate::args::usage(&e),
    };
    let target = match parse_target(&cli.target) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("smart-limit-bench auto: {e}");
            return ExitCode::from(2);
        }
    };
    let report = run(&cli, Arc::new(target));
    println!("{report}");
    ExitCode::SUCCESS
}

fn run(cli: &Cli, target: Arc<Target>) -> String {
    let start = Instant::now();
    let end = start + Duration::from_secs(cli.seconds);
    let tally = Arc::new(Mutex::new(Tally::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let assets: Vec<String> = cli
        .assets
        .split(',')
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    // The sampler: the room's max_active and active sessions, once a second.
    let sampler = {
        let (target, stop) = (target.clone(), stop.clone());
        let path = format!("{}?room={}", cli.control, cli.room);
        let timeout = Duration::from_millis(cli.timeout_ms);
        thread::spawn(move || {
            let mut out = Vec::new();
            let mut client = http::Client::new(&target, None, timeout);
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                out.push(read_room(&mut client, &path));
                next += Duration::from_secs(1);
                thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            out
        })
    };
    let halver = match (cli.halve_at, cli.origin.as_deref().map(parse_target)) {
        (Some(at), Some(Ok(origin))) => {
            let timeout = Duration::from_millis(cli.timeout_ms);
            Some(thread::spawn(move || {
                thread::sleep(Duration::from_secs(at));
                halve(&origin, timeout)
            }))
        }
        _ => None,
    };
    // Arrivals at a steady rate until the end; each visitor on its own thread.
    let gap = Duration::from_secs_f64(1.0 / cli.arrivals.max(0.01));
    let mut visitors = Vec::new();
    let mut next = start;
    let mut n: u64 = 0;
    while Instant::now() < end {
        let v = Visitor {
            id: n,
            target: target.clone(),
            page: cli.page.clone(),
            assets: assets.clone(),
            marker: cli.marker.clone(),
            stay: Duration::from_millis(spread(n, cli.stay_min_ms, cli.stay_max_ms)),
            think: Duration::from_millis(cli.think_ms),
            timeout: Duration::from_millis(cli.timeout_ms),
            start,
            end,
        };
        let tally = tally.clone();
        if let Ok(h) = thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || v.visit(&tally))
        {
            visitors.push(h);
        }
        n += 1;
        next += gap;
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    for h in visitors {
        let _ = h.join();
    }
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    let halved = halver.and_then(|h| h.join().ok()).flatten();
    let t = tally.lock().map(|t| t.clone()).unwrap_or_default();
    report(cli, n, &t, &samples, halved)
}

/// A stay between `lo` and `hi` for visitor `n` (spread evenly, the same every run).
fn spread(n: u64, lo: u64, hi: u64) -> u64 {
    let span = hi.saturating_sub(lo);
    lo + (n.wrapping_mul(2_654_435_761) % 1000) * span / 1000
}

/// The room's (max_active, active sessions) from the control endpoint; zeros when unreadable.
fn read_room(client: &mut http::Client, path: &str) -> (u64, u64) {
    let Ok(r) = client.get(path, "application/json", None) else {
        return (0, 0);
    };
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
    let room = &v["rooms"][0];
    (
        room["max_active"].as_u64().unwrap_or(0),
        room["active_sessions"].as_u64().unwrap_or(0),
    )
}

/// Halves the model origin's capacity; Some((from, to)).
fn halve(origin: &Target, timeout: Duration) -> Option<(u64, u64)> {
    let mut c = http::Client::new(origin, None, timeout);
    let stats = c.get("/_origin/stats", "application/json", None).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&stats.body).ok()?;
    let from = v["capacity"].as_u64()?;
    let to = (from / 2).max(1);
    c.get(
        &format!("/_origin/set?capacity={to}"),
        "application/json",
        None,
    )
    .ok()?;
    Some((from, to))
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

/// When max_active settled: the first second from which it stays within a quarter of the
/// median of the run's last 20 s.
fn settled(series: &[u64]) -> Option<usize> {
    let tail: Vec<u64> = series.iter().rev().take(20).copied().collect();
    let mut sorted = tail.clone();
    sorted.sort_unstable();
    let median = *sorted.get(sorted.len() / 2)?;
    let near = |v: u64| v * 4 >= median * 3 && v * 4 <= median * 5;
    let last_far = series.iter().rposition(|&v| !near(v));
    Some(last_far.map_or(0, |i| i + 1))
}

fn report(
    cli: &Cli,
    visitors: u64,
    t: &Tally,
    samples: &[(u64, u64)],
    halved: Option<(u64, u64)>,
) -> String {
    let secs = cli.seconds as usize;
    let mut per: Vec<Second> = vec![Second::default(); secs + 1];
    for (i, &(m, a)) in samples.iter().enumerate() {
        if let Some(s) = per.get_mut(i) {
            s.max_active = m;
            s.active = a;
        }
    }
    for &at in &t.complete_at {
        if let Some(s) = per.get_mut((at / 1000) as usize) {
            s.complete += 1;
        }
    }
    per.truncate(secs);
    if let Some(path) = &cli.series {
        if let Ok(mut f) = std::fs::File::create(path) {
            let _ = writeln!(f, "second,max_active,active,complete");
            for (i, s) in per.iter().enumerate() {
                let _ = writeln!(f, "{i},{},{},{}", s.max_active, s.active, s.complete);
            }
        }
    }
    let mut all: Vec<u64> = t.origin.iter().map(|o| o.ms).collect();
    all.sort_unstable();
    let errors = t.origin.iter().filter(|o| o.status >= 500).count();
    // After a halving: the answers from 30 s after it on.
    let after = cli.halve_at.map(|h| (h + 30) * 1000);
    let mut late: Vec<u64> = t
        .origin
        .iter()
        .filter(|o| after.is_some_and(|a| o.at >= a))
        .map(|o| o.ms)
        .collect();
    late.sort_unstable();
    let late_errors = t
        .origin
        .iter()
        .filter(|o| after.is_some_and(|a| o.at >= a) && o.status >= 500)
        .count();
    let complete = t.complete_at.len();
    let half = secs / 2;
    let second_half: u64 = per.iter().skip(half).map(|s| s.complete).sum();
    let m_series: Vec<u64> = per.iter().map(|s| s.max_active).collect();
    serde_json::json!({
        "label": cli.label,
        "visitors": visitors,
        "complete": complete,
        "broken": t.broken,
        "waiting_answers": t.waiting,
        "goodput": complete as f64 / cli.seconds as f64,
        "goodput_second_half": second_half as f64 / (secs - half).max(1) as f64,
        "origin_answers": all.len(),
        "origin_p50_ms": percentile(&all, 0.5),
        "origin_p99_ms": percentile(&all, 0.99),
        "origin_5xx": errors,
        "halved": halved,
        "after_halving_p99_ms": after.map(|_| percentile(&late, 0.99)),
        "after_halving_5xx": after.map(|_| late_errors),
        "settled_s": settled(&m_series),
        "max_active": m_series,
        "active": per.iter().map(|s| s.active).collect::<Vec<_>>(),
        "complete_per_s": per.iter().map(|s| s.complete).collect::<Vec<_>>(),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::{percentile, settled, spread};

    #[test]
    fn max_active_settles_when_it_stays_near_the_last_20_seconds() {
        // A climb, then a steady value: settled from the first second near it.
        let mut series: Vec<u64> = vec![10, 15, 22, 33, 49, 73, 90];
        series.extend([100; 25]);
        assert_eq!(settled(&series), Some(6));
        // Fixed from the start: settled at once; nothing read: none.
        assert_eq!(settled(&[80; 30]), Some(0));
        assert_eq!(settled(&[]), None);
    }

    #[test]
    fn percentiles_and_stays() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!((percentile(&v, 0.5), percentile(&v, 0.99)), (51, 99));
        assert_eq!(percentile(&[], 0.5), 0);
        for n in 0..1000 {
            let s = spread(n, 10_000, 20_000);
            assert!((10_000..20_000).contains(&s), "{s}");
        }
    }
}
