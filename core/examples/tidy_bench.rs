//! The slowest decision of the shared-memory room while a mass of places (or admitted
//! sessions) expires at once: the figure behind "the shm room expires a bounded number of
//! entries per request" (issue 16).
//!
//! `cargo run --release -p smart_limit_core --example tidy_bench [-- OPTIONS]`
//! (`scripts/bench --tidy` runs it). For each scenario and round: a room over a heap block of
//! `--size-mb` MiB (the size of `smart_limit_zone ... size=100m`), one admitted session so that
//! everyone else queues, `N` clients who take a place in the same millisecond and never come
//! back, then `--present` clients behind them who keep polling. Time moves past `presence` for
//! the `N` (not for the others), and the next `--decisions` polls of the present clients are
//! timed one by one. Printed per scenario: the first decision after the expiry, the slowest,
//! the 99th percentile and the median, in µs of the thread's CPU time (so that a preemption by
//! another process on the machine does not count as a slow decision; each figure includes
//! the clock's own cost, about 0.3 µs), and the slowest in wall-clock time, each the median
//! over `--rounds` rounds; what the
//! first decision after the expiry told its client (the first present client behind the `N`:
//! position 1); and how many of the `N` had been removed after the timed decisions (and one
//! snapshot, which tidies too).
//!
//! The sessions scenario does the same with `N` admitted sessions (max_active = N) that stop
//! at once: the timed decisions are the waiting clients' polls after `active_window`, each of
//! which may admit.

use std::time::Instant;

/// The calling thread's CPU time in µs.
fn cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Room, Verdict, Visit};

const T0: u64 = 1_800_000_000_000;
const PRESENCE_MS: u64 = 20_000;
const WINDOW_MS: u64 = 60_000;

struct Opts {
    size_mb: usize,
    rounds: usize,
    decisions: usize,
    present: u64,
    counts: Vec<u64>,
    sessions: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: tidy_bench [--size-mb N] [--rounds N] [--decisions N] [--present N] \
         [--places N[,N...]] [--sessions N]\n\
         \x20 --size-mb    room memory in MiB (default 100, like size=100m)\n\
         \x20 --rounds     rounds per scenario, medians printed (default 5)\n\
         \x20 --decisions  decisions timed after the expiry (default 2000)\n\
         \x20 --present    clients who keep polling behind the expiring ones (default 1000)\n\
         \x20 --places     expiring places per scenario; 0 = as many as the room holds\n\
         \x20              (default 100000,0)\n\
         \x20 --sessions   expiring admitted sessions (default 100000; 0 = skip)"
    );
    std::process::exit(2)
}

fn parse() -> Opts {
    let mut o = Opts {
        size_mb: 100,
        rounds: 5,
        decisions: 2000,
        present: 1000,
        counts: vec![100_000, 0],
        sessions: 100_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        // `cargo bench`-style harness flags are ignored.
        if a == "--bench" {
            continue;
        }
        let v = args.next().unwrap_or_else(|| usage());
        let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--size-mb" => o.size_mb = num(&v) as usize,
            "--rounds" => o.rounds = num(&v).max(1) as usize,
            "--decisions" => o.decisions = num(&v).max(1) as usize,
            "--present" => o.present = num(&v).max(1),
            "--places" => o.counts = v.split(',').map(num).collect(),
            "--sessions" => o.sessions = num(&v),
            _ => usage(),
        }
    }
    o
}

fn limits(max_active: u64) -> Limits {
    Limits {
        max_active,
        new_per_minute: None,
        presence_ms: PRESENCE_MS,
        keep_ms: PRESENCE_MS,
        active_window_ms: WINDOW_MS,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    }
}

fn visit(room: &mut Room, sid: u64, qnum: u64, now: u64, l: &Limits) -> Verdict {
    room.visit(
        Visit {
            sid,
            qnum,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        },
        now,
        l,
    )
}

fn qnum_of(v: Verdict) -> u64 {
    match v {
        Verdict::Wait(p) => p.qnum,
        _ => 0,
    }
}

/// One round's figures, in µs, and what the first decision after the expiry told its client.
struct Round {
    first: f64,
    max: f64,
    p99: f64,
    p50: f64,
    max_wall: f64,
    told: String,
    removed: u64,
    expiring: u64,
}

fn time_decisions(
    room: &mut Room,
    clients: &[(u64, u64)],
    start: u64,
    n: usize,
    l: &Limits,
) -> (Vec<f64>, f64, Verdict, Verdict) {
    let mut times = Vec::with_capacity(n);
    let mut max_wall = 0f64;
    let closed = Verdict::Refuse(smart_limit_core::room::Refusal::Closed);
    let (mut first, mut back) = (closed, closed);
    for k in 0..n {
        let (sid, q) = clients[k % clients.len()];
        let now = start + (k as u64) / 8;
        let t = Instant::now();
        let c = cpu_us();
        let v = visit(room, sid, q, now, l);
        times.push(cpu_us() - c);
        max_wall = max_wall.max(t.elapsed().as_nanos() as f64 / 1000.0);
        if k == 0 {
            first = v;
        }
        if k + 1 == clients.len() {
            back = v;
        }
    }
    (times, max_wall, first, back)
}

/// A step near n / golden ratio that is coprime with n: `k * step % n` visits 0..n once each,
/// in a scrambled order.
fn coprime_step(n: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut step = (n as f64 * 0.618_033_988_7) as u64 | 1;
    while n > 1 && gcd(step, n) != 1 {
        step += 2;
    }
    step.max(1)
}

fn summarise(times: &[f64]) -> (f64, f64, f64, f64) {
    let first = times.first().copied().unwrap_or(0.0);
    let mut s = times.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    (first, at(1.0), at(0.99), at(0.5))
}

fn told(v: Verdict) -> String {
    match v {
        Verdict::Wait(p) => format!("position {} of {}", p.position, p.queue_len),
        Verdict::Admit { .. } => "admitted".to_string(),
        other => format!("{other:?}"),
    }
}

fn places_round(mem: &mut [u64], count: u64, mixed: bool, o: &Opts) -> Round {
    // SAFETY: a Vec<u64> is 8-aligned and its length in bytes is len * 8.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u8>(), mem.len() * 8) };
    let mut room = Room::format(bytes, 1).expect("room");
    let l = limits(1);
    let cap = room.capacity();
    let expiring = if count == 0 {
        cap.saturating_sub(o.present + 2)
    } else {
        count.min(cap.saturating_sub(o.present + 2))
    };
    visit(&mut room, 1, 0, T0, &l);
    let mut clients: Vec<(u64, u64)> = Vec::with_capacity(o.present as usize);
    if mixed {
        // One present client every `stride` places, the expiring ones around them.
        let stride = ((expiring + o.present) / o.present).max(1);
        let (mut gone, mut kept) = (0u64, 0u64);
        while gone < expiring || kept < o.present {
            let is_kept =
                kept < o.present && ((gone + kept) % stride == stride - 1 || gone == expiring);
            if is_kept {
                let sid = 10_000_000_000 + kept;
                clients.push((sid, qnum_of(visit(&mut room, sid, 0, T0, &l))));
                kept += 1;
            } else {
                visit(&mut room, 1_000 + gone, 0, T0, &l);
                gone += 1;
            }
        }
        // The expiring ones poll once more in a scrambled order (same millisecond): the order
        // they are last seen in is not the order they stand in.
        let step = coprime_step(expiring);
        for k in 0..expiring {
            let sid = 1_000 + (k * step) % expiring;
            visit(&mut room, sid, 0, T0, &l);
        }
    } else {
        for sid in 0..expiring {
            visit(&mut room, 1_000 + sid, 0, T0, &l);
        }
        for j in 0..o.present {
            let sid = 10_000_000_000 + j;
            clients.push((sid, qnum_of(visit(&mut room, sid, 0, T0 + 1, &l))));
        }
    }
    for &(sid, q) in &clients {
        visit(&mut room, sid, q, T0 + PRESENCE_MS / 2, &l);
    }
    let expired_before = room.snapshot(T0 + PRESENCE_MS / 2, &l).counters.expired;
    // The N were last seen at T0: from T0 + presence on, their places are gone.
    let (times, max_wall, front, back) =
        time_decisions(&mut room, &clients, T0 + PRESENCE_MS, o.decisions, &l);
    let removed = room.snapshot(T0 + PRESENCE_MS, &l).counters.expired - expired_before;
    let (first, max, p99, p50) = summarise(&times);
    Round {
        first,
        max,
        p99,
        p50,
        max_wall,
        told: format!("{}; last: {}", told(front), told(back)),
        removed,
        expiring,
    }
}

fn sessions_round(mem: &mut [u64], count: u64, o: &Opts) -> Round {
    // SAFETY: as in places_round.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u8>(), mem.len() * 8) };
    let mut room = Room::format(bytes, 1).expect("room");
    let cap = room.capacity();
    let expiring = count.min(cap.saturating_sub(o.present + 2));
    let l = limits(expiring);
    for sid in 0..expiring {
        visit(&mut room, 1_000 + sid, 0, T0, &l);
    }
    let clients: Vec<(u64, u64)> = (0..o.present)
        .map(|j| {
            let sid = 10_000_000_000 + j;
            (sid, qnum_of(visit(&mut room, sid, 0, T0 + 1, &l)))
        })
        .collect();
    // The waiting clients stay present until the sessions' window ends.
    for t in [WINDOW_MS / 4, WINDOW_MS / 2, WINDOW_MS * 3 / 4] {
        for &(sid, q) in &clients {
            visit(&mut room, sid, q, T0 + t, &l);
        }
    }
    let admitted_before = room.snapshot(T0 + WINDOW_MS / 2, &l).counters.admitted;
    let (times, max_wall, front, back) =
        time_decisions(&mut room, &clients, T0 + WINDOW_MS, o.decisions, &l);
    let (first, max, p99, p50) = summarise(&times);
    let s = room.snapshot(T0 + WINDOW_MS, &l);
    // active = the sessions not yet removed + the waiting clients admitted since (each of
    // them admitted again on every later poll, as its place is gone).
    let admitted = (s.counters.admitted - admitted_before).min(o.present);
    Round {
        first,
        max,
        p99,
        p50,
        max_wall,
        told: format!("{}; last: {}", told(front), told(back)),
        removed: expiring.saturating_sub(s.active.saturating_sub(admitted)),
        expiring,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(name: &str, rounds: Vec<Round>) {
    let last = rounds.last().expect("a round");
    println!(
        "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} | {} | {} |",
        last.expiring,
        median(rounds.iter().map(|r| r.first).collect()),
        median(rounds.iter().map(|r| r.max).collect()),
        median(rounds.iter().map(|r| r.p99).collect()),
        median(rounds.iter().map(|r| r.p50).collect()),
        median(rounds.iter().map(|r| r.max_wall).collect()),
        last.told,
        last.removed,
    );
}

fn main() {
    let o = parse();
    let mut mem = vec![0u64; o.size_mb * 1024 * 1024 / 8];
    println!(
        "room of {} MiB, {} present clients polling, {} decisions timed, median of {} rounds \
         (µs of CPU time, wall clock for the last figure)",
        o.size_mb, o.present, o.decisions, o.rounds
    );
    println!();
    println!("| what expires at once | count | first decision | slowest | p99 | median | slowest (wall) | first answers (first present client; last one) | removed by then |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |");
    for &count in &o.counts {
        for mixed in [false, true] {
            let rounds = (0..o.rounds)
                .map(|_| places_round(&mut mem, count, mixed, &o))
                .collect();
            let name = if mixed {
                "waiting places, present clients among them"
            } else {
                "waiting places, in front of the present clients"
            };
            report(name, rounds);
        }
    }
    if o.sessions > 0 {
        let rounds = (0..o.rounds)
            .map(|_| sessions_round(&mut mem, o.sessions, &o))
            .collect();
        report("admitted sessions", rounds);
    }
}
