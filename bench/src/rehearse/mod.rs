//! `smart-limit-bench rehearse`: the client side of a launch rehearsal ([S23]). Clients are
//! drawn at the start (people, programs, a few minting scripts), arrive over a front-loaded
//! spread, and are driven by a small pool of threads from one timetable: a client is only
//! ever handled by one thread at a time, and a thousand clients cost no thousand threads.
//! Every request goes to the history (`crate::history`), which `check` reads.

mod answer;
mod args;
mod client;
mod control;
mod side;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::history::{ClientPlan, Kind, Outcome, Record, Req};
use crate::http::Client as Http;

use args::Args;
use client::{Client, Phase, Plan};

/// How long one request may take before it counts as unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

pub fn main(argv: &[String]) -> ExitCode {
    let a = match args::parse(argv) {
        Ok(a) => a,
        Err(args::ArgsError::Clap(e)) => return crate::args::usage(&e),
        Err(e) => {
            eprintln!("smart-limit-bench rehearse: {e}");
            return ExitCode::from(2);
        }
    };
    match run(Arc::new(a)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("smart-limit-bench rehearse: {e}");
            ExitCode::from(1)
        }
    }
}

/// Why a rehearsal stopped short.
#[derive(Debug, thiserror::Error)]
enum RunError {
    /// The history could not be created or written.
    #[error("{path}: {source}")]
    History {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot start a request thread: {0}")]
    Thread(std::io::Error),
    #[error("history lock")]
    Lock,
}

/// The history file, shared by every thread.
pub struct History {
    out: Mutex<BufWriter<File>>,
    start: Instant,
}

impl History {
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub fn write(&self, r: &Record) {
        if let Ok(mut out) = self.out.lock() {
            // A full disk shows as a short history, which the checker reports.
            let _ = writeln!(out, "{}", r.to_line());
        }
    }
}

/// A small random source (splitmix64): the run is the same for the same seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pct(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

/// Draws every client's plan.
fn plans(a: &Args) -> Vec<Plan> {
    let mut rng = Rng::new(a.seed);
    let refresh = a.run.refresh_ms;
    let joined_at_start = a.run.nodes.max(1);
    let mut out = Vec::new();
    for i in 0..a.clients + a.minters {
        let minter = i >= a.clients;
        // Most arrive early, as at a launch: the square of a uniform draw.
        let u = rng.unit();
        let arrive_at = if minter {
            0
        } else {
            (a.arrive_over_ms as f64 * u * u) as u64
        };
        let kind = if minter {
            Kind::Minter
        } else if rng.pct(a.programs_pct) {
            Kind::Program
        } else {
            Kind::Person
        };
        let pace_pct = match kind {
            Kind::Person if rng.pct(a.slow_pct) => 250,
            _ => 100,
        };
        let poll_ms = match kind {
            Kind::Minter => 1000,
            _ => refresh * pace_pct / 100,
        };
        let abandon_at = (kind != Kind::Minter && rng.pct(a.abandon_pct))
            .then(|| arrive_at + refresh + (rng.unit() * a.run.duration_ms as f64 / 2.0) as u64);
        // A phone ([S27]): a person who steps away once while waiting, for 1.5 to 2.5
        // presences (past presence: skipped at the head, within keep: its place kept).
        let presence = a.run.presence_ms;
        let away =
            (kind == Kind::Person && abandon_at.is_none() && rng.pct(a.phones_pct)).then(|| {
                let at =
                    arrive_at + 2 * refresh + (rng.unit() * a.run.duration_ms as f64 / 4.0) as u64;
                (
                    at,
                    presence + presence / 2 + (rng.unit() * presence as f64) as u64,
                )
            });
        let (lo, hi) = a.stay_ms;
        let stay_ms = lo + (rng.unit() * hi.saturating_sub(lo) as f64) as u64;
        out.push(Plan {
            kind,
            arrive_at,
            poll_ms,
            pace_pct,
            abandon_at,
            away,
            stay_ms,
            home: (rng.next() % u64::from(joined_at_start)) as u32,
        });
    }
    out
}

/// The timetable: (when, client), soonest first.
struct Timetable {
    due: Mutex<BinaryHeap<Reverse<(u64, u64)>>>,
    wake: Condvar,
}

impl Timetable {
    fn push(&self, at: u64, client: u64) {
        if let Ok(mut d) = self.due.lock() {
            d.push(Reverse((at, client)));
        }
        self.wake.notify_one();
    }

    /// The next client due, waiting for it; None once `end` has passed.
    fn next(&self, h: &History, end: u64) -> Option<u64> {
        let mut d = self.due.lock().ok()?;
        loop {
            let now = h.now();
            if now >= end {
                return None;
            }
            let wait = match d.peek() {
                Some(Reverse((at, _))) if *at <= now => {
                    let Reverse((_, c)) = d.pop()?;
                    return Some(c);
                }
                Some(Reverse((at, _))) => (*at - now).min(end - now),
                None => end - now,
            };
            d = self
                .wake
                .wait_timeout(d, Duration::from_millis(wait))
                .ok()?
                .0;
        }
    }
}

struct Shared {
    a: Arc<Args>,
    h: History,
    clients: Vec<Mutex<Client>>,
    table: Timetable,
    rr: AtomicU64,
    requests: AtomicU64,
}

impl Shared {
    /// The nodes a request may go to at `now` (joined ones).
    fn live(&self, now: u64) -> Vec<u32> {
        let a = &self.a;
        (0..a.nodes.len() as u32)
            .filter(|&i| a.nodes.get(i as usize).is_some_and(|(_, t)| *t <= now))
            .collect()
    }
}

fn run(a: Arc<Args>) -> Result<String, RunError> {
    let history = |source| RunError::History {
        path: a.out.clone(),
        source,
    };
    let file = File::create(&a.out).map_err(history)?;
    let h = History {
        out: Mutex::new(BufWriter::new(file)),
        start: Instant::now(),
    };
    h.write(&Record::Run(a.run.clone()));
    let plans = plans(&a);
    let table = Timetable {
        due: Mutex::new(BinaryHeap::new()),
        wake: Condvar::new(),
    };
    let mut clients = Vec::new();
    for (i, p) in plans.into_iter().enumerate() {
        table.push(p.arrive_at, i as u64);
        clients.push(Mutex::new(Client::new(i as u64, p)));
    }
    let shared = Arc::new(Shared {
        a: a.clone(),
        h,
        clients,
        table,
        rr: AtomicU64::new(0),
        requests: AtomicU64::new(0),
    });
    let end = a.run.duration_ms;
    let mut threads = Vec::new();
    for t in 0..a.threads {
        let s = shared.clone();
        let th = thread::Builder::new()
            .name(format!("rehearse-{t}"))
            .spawn(move || worker(&s, t as u64, end))
            .map_err(RunError::Thread)?;
        threads.push(th);
    }
    let sides = side::start(shared.clone(), end);
    for th in threads {
        let _ = th.join();
    }
    for th in sides {
        let _ = th.join();
    }
    // What each client meant to do, for the checker.
    for c in &shared.clients {
        if let Ok(c) = c.lock() {
            shared.h.write(&Record::Client(ClientPlan {
                client: c.id,
                kind: c.plan.kind,
                abandoned_at: match c.phase {
                    Phase::Abandoned { at } => Some(at),
                    _ => None,
                },
                poll_ms: c.plan.poll_ms,
                away: c.plan.away.filter(|_| c.was_away),
            }));
        }
    }
    let mut out = shared.h.out.lock().map_err(|_| RunError::Lock)?;
    out.flush().map_err(history)?;
    let waiting = shared
        .clients
        .iter()
        .filter(|c| c.lock().is_ok_and(|c| c.phase == Phase::Waiting))
        .count();
    Ok(format!(
        "requests {} clients {} still waiting {} seconds {:.1}",
        shared.requests.load(Ordering::Relaxed),
        shared.clients.len(),
        waiting,
        shared.h.now() as f64 / 1000.0
    ))
}

/// One request thread: takes the next client due, asks its node, records, reschedules.
fn worker(s: &Shared, seed: u64, end: u64) {
    let a = &s.a;
    let mut http: Vec<Http> = a
        .nodes
        .iter()
        .map(|(t, _)| Http::new(t, None, REQUEST_TIMEOUT))
        .collect();
    let mut rng = Rng::new(a.seed.wrapping_mul(1000).wrapping_add(seed));
    let prefix = format!("smart_limit_{}=", a.room);
    while let Some(id) = s.table.next(&s.h, end) {
        let Some(slot) = s.clients.get(id as usize) else {
            continue;
        };
        let Ok(mut c) = slot.lock() else { continue };
        let live = s.live(s.h.now());
        if live.is_empty() {
            continue;
        }
        let node = if a.sticky {
            if live.contains(&c.node) {
                c.node
            } else {
                live[c.id as usize % live.len()]
            }
        } else {
            live[(s.rr.fetch_add(1, Ordering::Relaxed) % live.len() as u64) as usize]
        };
        let Some(conn) = http.get_mut(node as usize) else {
            continue;
        };
        let path = a
            .nodes
            .get(node as usize)
            .map_or("/", |(t, _)| t.base.as_str());
        let path = if path.is_empty() { "/" } else { path };
        let xc = format!("c{}", c.id);
        let ticket = c.cookie().is_some();
        let sent = s.h.now();
        let res = conn.get_with(path, c.accept(), c.cookie(), &[("X-Client", &xc)]);
        let done = s.h.now();
        s.requests.fetch_add(1, Ordering::Relaxed);
        let read = res.ok().map(|r| answer::read(&r, &prefix));
        s.h.write(&Record::Req(Req {
            client: c.id,
            kind: c.plan.kind,
            node,
            sent,
            done,
            status: read.as_ref().map_or(0, |r| r.status),
            outcome: read.as_ref().map_or(Outcome::Error, |r| r.outcome),
            pos: read.as_ref().and_then(|r| r.pos),
            qlen: read.as_ref().and_then(|r| r.qlen),
            refresh_ms: read.as_ref().and_then(|r| r.refresh_ms),
            ticket,
            renewed: read.as_ref().is_some_and(|r| r.ticket.is_some()),
        }));
        if read.is_none() && a.sticky {
            // A balancer sends a client whose node does not answer to another one.
            c.node = live[(node as usize + 1) % live.len()];
        }
        if let Some(next) = c.answered(done, read.as_ref(), rng.unit()) {
            drop(c);
            s.table.push(next, id);
        }
    }
}
