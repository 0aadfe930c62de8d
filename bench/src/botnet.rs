//! `smart-limit-bench botnet`: scripts against people for a room's first admissions ([S19]).
//!
//! Bots: `--bots` identities, each from its own 127/8 address, on `--bot-threads` threads.
//! Each takes a ticket, comes back at once, solves any challenge natively (as fast as the
//! machine goes), polls every `--bot-poll-ms`, and once let in starts over with a new ticket,
//! as fast as it can. People: `--people` browsers, each from its own address, arriving within
//! `--spread-ms`; a challenge costs them 2^bits / `--browser-hps` seconds (the measured speed
//! of the page's solver; they sleep, they do not burn this machine's CPU), and they poll at
//! the answer's `refresh_seconds`, as the page does. Bots may share `--bot-accounts` accounts
//! (`X-Account`, for `one_place_per=$http_x_account`); every person has an account of its own.
//!
//! A fleet (`--also URL`: another node of the same room): a bot sends each request to the next
//! node in turn, a person keeps to one. A bot keeps the last few proofs it spent with the
//! tickets they were solved for, and `--replay-after-ms` later (their places gone) replays one
//! on the next node: a new place without solving where the fleet spends a proof per node
//! (counted as "replays": answered with a place). `--mint-ahead-ms N`: every bot takes its ticket N ms
//! before the race, and first asks for a place without a proof (a ticket old enough used to
//! join without one).
//!
//! Printed: who the first `--admissions` clients let in were, and the people's share.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::args::{Target, UrlError};
use crate::cookies::Jar;
use crate::http::Client;

/// smart-limit-bench botnet: bots and people race for a room's first admissions
#[derive(Debug, Parser)]
#[command(
    name = "smart-limit-bench botnet",
    override_usage = "smart-limit-bench botnet --url http://127.0.0.1:PORT/PATH [options]",
    args_override_self = true
)]
struct Cli {
    /// the room's location on the first node
    #[arg(long, value_name = "URL", value_parser = target)]
    url: Target,
    /// bot identities, each from its own address
    #[arg(long, value_name = "N", default_value = "1000")]
    bots: u64,
    /// browser-like people, each from its own address
    #[arg(long, value_name = "N", default_value = "100")]
    people: u64,
    /// stop after this many admissions
    #[arg(long, value_name = "N", default_value = "100")]
    admissions: u64,
    /// threads the bots run on
    #[arg(long, value_name = "N", default_value = "2")]
    bot_threads: u64,
    /// how often a bot polls while it waits
    #[arg(long, value_name = "N", default_value = "500")]
    bot_poll_ms: u64,
    /// accounts the bots share (X-Account; 0: none)
    #[arg(long, value_name = "N", default_value = "0")]
    bot_accounts: u64,
    /// a person's solver speed, hashes per second
    #[arg(long, value_name = "N", default_value = "1330000")]
    browser_hps: u64,
    /// people arrive within this long of the start
    #[arg(long, value_name = "N", default_value = "2000")]
    spread_ms: u64,
    /// give up after this long
    #[arg(long, value_name = "N", default_value = "120")]
    max_seconds: u64,
    /// another node of the same room (repeat): bots spread over the nodes and replay their
    /// spent proofs on the next one
    #[arg(long, value_name = "URL", value_parser = target)]
    also: Vec<Target>,
    /// bots take their tickets this long before the race
    #[arg(long, value_name = "N", default_value = "0")]
    mint_ahead_ms: u64,
    /// a bot replays a proof it spent this long ago (its place gone by then), on the next node
    #[arg(long, value_name = "N", default_value = "15000")]
    replay_after_ms: u64,
}

fn target(v: &str) -> Result<Target, UrlError> {
    crate::args::parse_url(v)
}

#[derive(Debug, Clone)]
pub struct Botnet {
    pub target: Target,
    pub bots: usize,
    pub people: usize,
    pub admissions: usize,
    pub bot_threads: usize,
    pub bot_poll: Duration,
    pub bot_accounts: usize,
    pub browser_hps: f64,
    pub spread: Duration,
    pub max: Duration,
    /// Other nodes of the same room (`--also`).
    pub also: Vec<Target>,
    pub mint_ahead: Duration,
    /// How long a bot waits before it replays a spent proof (its place gone by then).
    pub replay_after: Duration,
}

/// The race's settings from its command line (`argv` after `botnet`); `--help` comes back
/// as the error that prints it.
pub fn parse(argv: &[String]) -> Result<Botnet, clap::Error> {
    let program = std::iter::once("smart-limit-bench botnet".to_string());
    let c = Cli::try_parse_from(program.chain(argv.iter().cloned()))?;
    Ok(Botnet {
        target: c.url,
        bots: c.bots as usize,
        people: c.people as usize,
        admissions: c.admissions.max(1) as usize,
        bot_threads: c.bot_threads.max(1) as usize,
        bot_poll: Duration::from_millis(c.bot_poll_ms),
        bot_accounts: c.bot_accounts as usize,
        browser_hps: c.browser_hps.max(1) as f64,
        spread: Duration::from_millis(c.spread_ms),
        max: Duration::from_secs(c.max_seconds),
        also: c.also,
        mint_ahead: Duration::from_millis(c.mint_ahead_ms),
        replay_after: Duration::from_millis(c.replay_after_ms),
    })
}

/// What an answer said.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    In,
    Challenge { seed: String, bits: u8 },
    Wait { refresh: Duration },
    Failed,
}

/// Reads a JSON answer's status (a string match: the module writes it, one line).
pub fn said(status: u16, body: &[u8]) -> Said {
    if status == 200 {
        return Said::In;
    }
    let text = String::from_utf8_lossy(body);
    let field = |name: &str| -> Option<String> {
        let at = text.find(&format!("\"{name}\":"))? + name.len() + 3;
        let rest = text.get(at..)?.trim_start_matches('"');
        let end = rest.find(['"', ',', '}']).unwrap_or(rest.len());
        Some(rest[..end].to_string())
    };
    match field("status").as_deref() {
        Some("challenge") => match (field("seed"), field("bits").and_then(|b| b.parse().ok())) {
            (Some(seed), Some(bits)) => Said::Challenge { seed, bits },
            _ => Said::Failed,
        },
        Some(_) => {
            let secs = field("refresh_seconds")
                .and_then(|s| s.parse().ok())
                .unwrap_or(1);
            Said::Wait {
                refresh: Duration::from_secs(secs),
            }
        }
        None => Said::Failed,
    }
}

/// One client: its connections (from its own address, one per node), its cookies, its
/// account. A visit goes to the node after the last one's.
struct Visitor<'a> {
    clients: Vec<Client<'a>>,
    node: usize,
    jar: Jar,
    account: Option<String>,
    path: &'a str,
}

impl Visitor<'_> {
    /// One visit (after the cookie check, when it comes), with a proof if given.
    fn visit(&mut self, proof: Option<&str>) -> Said {
        self.node = (self.node + 1) % self.clients.len().max(1);
        for _ in 0..3 {
            let Some(r) = self.get(proof) else {
                return Said::Failed;
            };
            if r.status != 307 {
                return said(r.status, &r.body);
            }
        }
        Said::Failed
    }

    /// The cookie check only: a ticket, nothing asked of the room yet.
    fn mint(&mut self) {
        let _ = self.get(None);
    }

    /// One request to the current node; keeps the cookies it sets.
    fn get(&mut self, proof: Option<&str>) -> Option<crate::http::Response> {
        let cookie = self.jar.header();
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(a) = &self.account {
            headers.push(("X-Account", a));
        }
        if let Some(p) = proof {
            headers.push(("Smart-Limit-Proof", p));
        }
        let client = self.clients.get_mut(self.node)?;
        let r = client
            .get_with(self.path, "application/json", cookie.as_deref(), &headers)
            .ok()?;
        for c in &r.set_cookies {
            self.jar.store(c);
        }
        Some(r)
    }
}

/// The order the first admissions came in: true for a person.
struct Tally {
    order: Mutex<Vec<bool>>,
    goal: usize,
    done: AtomicBool,
    /// Bots let in again by a replayed proof on another node.
    replays: AtomicUsize,
}
impl Tally {
    fn admitted(&self, person: bool) {
        if let Ok(mut o) = self.order.lock() {
            if o.len() < self.goal {
                o.push(person);
            }
            if o.len() >= self.goal {
                self.done.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Client address `i` of a kind (bots from 127.1.0.0 on, people from 127.2.0.0 on).
fn address(kind: u32, i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x7f00_0000u32 | (kind << 16) | (1 + i as u32))
}

/// The result: people let in among the first admissions, of how many, how long it took, and
/// how many bots got in by replaying a proof on another node.
pub struct Outcome {
    pub people: usize,
    pub admissions: usize,
    pub seconds: f64,
    pub replays: usize,
}

pub fn run(cfg: Arc<Botnet>) -> Outcome {
    let tally = Arc::new(Tally {
        order: Mutex::new(Vec::new()),
        goal: cfg.admissions,
        done: AtomicBool::new(false),
        replays: AtomicUsize::new(0),
    });
    // The race starts once the bots have minted their tickets ahead (if they do).
    let start = Instant::now() + cfg.mint_ahead;
    let mut handles = Vec::new();
    for t in 0..cfg.bot_threads {
        let (cfg, tally) = (cfg.clone(), tally.clone());
        handles.push(thread::spawn(move || bots(&cfg, &tally, t, start)));
    }
    for i in 0..cfg.people {
        let (cfg, tally) = (cfg.clone(), tally.clone());
        handles.push(thread::spawn(move || person(&cfg, &tally, i, start)));
    }
    for h in handles {
        let _ = h.join();
    }
    let order = tally.order.lock().map(|o| o.clone()).unwrap_or_default();
    Outcome {
        people: order.iter().filter(|&&p| p).count(),
        admissions: order.len(),
        seconds: start.elapsed().as_secs_f64(),
        replays: tally.replays.load(Ordering::Relaxed),
    }
}

/// The nodes: `--url` first, then each `--also`.
fn targets(cfg: &Botnet) -> Vec<&Target> {
    std::iter::once(&cfg.target)
        .chain(cfg.also.iter())
        .collect()
}

fn over(cfg: &Botnet, tally: &Tally, start: Instant) -> bool {
    tally.done.load(Ordering::Relaxed) || start.elapsed() > cfg.max
}

/// A thread's share of the bots, each stepped in turn: take a ticket, solve, poll.
fn bots(cfg: &Botnet, tally: &Tally, thread_no: usize, start: Instant) {
    let path = format!("{}/", cfg.target.base);
    let timeout = Duration::from_secs(10);
    let mine: Vec<usize> = (thread_no..cfg.bots).step_by(cfg.bot_threads).collect();
    let nodes = targets(cfg);
    let mut visitors: Vec<(Visitor, Instant, VecDeque<Spent>)> = mine
        .iter()
        .map(|&i| {
            let v = Visitor {
                clients: nodes
                    .iter()
                    .map(|t| Client::new(t, Some(address(1, i)), timeout))
                    .collect(),
                node: i % nodes.len(),
                jar: Jar::default(),
                account: (cfg.bot_accounts > 0).then(|| format!("bot-{}", i % cfg.bot_accounts)),
                path: &path,
            };
            (v, start, VecDeque::new())
        })
        .collect();
    if !cfg.mint_ahead.is_zero() {
        for (v, _, _) in visitors.iter_mut() {
            v.mint();
        }
        thread::sleep(start.saturating_duration_since(Instant::now()));
    }
    while !over(cfg, tally, start) {
        let mut idle = true;
        for (v, next, spent) in visitors.iter_mut() {
            if over(cfg, tally, start) {
                return;
            }
            if Instant::now() < *next {
                continue;
            }
            idle = false;
            // A proof spent a while ago (its place since gone), with the ticket it was solved
            // for, on the next node: a new place without solving where a proof is spent per
            // node. The bot goes on with that ticket.
            let replay = spent
                .front()
                .is_some_and(|s| s.at.elapsed() >= cfg.replay_after && nodes.len() > 1);
            let (mut answer, replayed) = match spent.pop_front().filter(|_| replay) {
                Some(s) => {
                    v.jar = s.jar;
                    (v.visit(Some(&s.proof)), true)
                }
                None => (v.visit(None), false),
            };
            if replayed && matches!(answer, Said::In | Said::Wait { .. }) {
                tally.replays.fetch_add(1, Ordering::Relaxed);
            }
            if let Said::Challenge { seed, bits } = &answer {
                match smart_limit_core::challenge::solve_proof(seed, *bits, u64::MAX) {
                    Some(proof) => {
                        if spent.len() < KEEP_SPENT {
                            spent.push_back(Spent {
                                at: Instant::now(),
                                jar: v.jar.clone(),
                                proof: proof.clone(),
                            });
                        }
                        answer = v.visit(Some(&proof));
                    }
                    None => answer = Said::Failed,
                }
            }
            match answer {
                Said::In => {
                    tally.admitted(false);
                    // Again, as fast as it can: a new ticket.
                    v.jar = Jar::default();
                    *next = Instant::now();
                }
                Said::Wait { .. } | Said::Challenge { .. } => *next = Instant::now() + cfg.bot_poll,
                Said::Failed => *next = Instant::now() + cfg.bot_poll,
            }
        }
        if idle {
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A proof a bot spent, kept to replay: when, the ticket it was solved for, the proof.
struct Spent {
    at: Instant,
    jar: Jar,
    proof: String,
}

/// Spent proofs a bot keeps to replay.
const KEEP_SPENT: usize = 4;

/// One person: arrives within the spread, solves at a browser's speed (sleeping), polls at
/// the page's refresh, stops once let in.
fn person(cfg: &Botnet, tally: &Tally, i: usize, start: Instant) {
    let path = format!("{}/", cfg.target.base);
    let nodes = targets(cfg);
    let mine = nodes[i % nodes.len()];
    let mut v = Visitor {
        clients: vec![Client::new(
            mine,
            Some(address(2, i)),
            Duration::from_secs(10),
        )],
        node: 0,
        jar: Jar::default(),
        account: Some(format!("person-{i}")),
        path: &path,
    };
    let spread = cfg.spread.as_millis() as u64;
    let arrive = if cfg.people > 1 {
        spread * i as u64 / (cfg.people as u64 - 1)
    } else {
        0
    };
    thread::sleep(start.saturating_duration_since(Instant::now()) + Duration::from_millis(arrive));
    let mut proof: Option<String> = None;
    while !over(cfg, tally, start) {
        match v.visit(proof.as_deref()) {
            Said::In => {
                tally.admitted(true);
                return;
            }
            Said::Challenge { seed, bits } => {
                let secs = (1u64 << bits.min(40)) as f64 / cfg.browser_hps;
                thread::sleep(Duration::from_secs_f64(secs));
                proof = smart_limit_core::challenge::solve_proof(&seed, bits, u64::MAX);
            }
            Said::Wait { refresh } => {
                proof = None;
                sleep_until_over(cfg, tally, start, refresh.max(Duration::from_secs(1)));
            }
            Said::Failed => sleep_until_over(cfg, tally, start, Duration::from_secs(1)),
        }
    }
}

fn sleep_until_over(cfg: &Botnet, tally: &Tally, start: Instant, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until && !over(cfg, tally, start) {
        thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read() {
        assert_eq!(said(200, b"origin"), Said::In);
        let c = br#"{"status":"challenge","room":"shop","position":null,"refresh_seconds":31,"challenge":{"alg":"sha256","seed":"DD_Bz7gbAwok","bits":12}}"#;
        assert_eq!(
            said(503, c),
            Said::Challenge {
                seed: "DD_Bz7gbAwok".into(),
                bits: 12
            }
        );
        let w = br#"{"status":"waiting","room":"shop","position":3,"refresh_seconds":10}"#;
        assert_eq!(
            said(503, w),
            Said::Wait {
                refresh: Duration::from_secs(10)
            }
        );
        assert_eq!(said(503, b"<html>"), Said::Failed);
    }

    #[test]
    fn a_fleet_and_minting_ahead_are_options() {
        let args: Vec<String> = "--url http://127.0.0.1:8080/pow --also http://127.0.0.1:8081/pow \
             --mint-ahead-ms 31000 --replay-after-ms 5000"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let b = parse(&args).unwrap();
        assert_eq!(b.also.len(), 1);
        assert_eq!(b.also[0].base, "/pow");
        assert_eq!(b.mint_ahead, Duration::from_secs(31));
        assert_eq!(b.replay_after, Duration::from_secs(5));
        assert_eq!(targets(&b).len(), 2);
        let bad: Vec<String> = vec![
            "--url".into(),
            "http://127.0.0.1:8080/pow".into(),
            "--also".into(),
            "not a url".into(),
        ];
        assert!(parse(&bad).is_err());
    }

    #[test]
    fn defaults_and_floors() {
        let url = |rest: &str| -> Vec<String> {
            format!("--url http://127.0.0.1:8080/pow {rest}")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let b = parse(&url("--admissions 0 --bot-threads 0 --browser-hps 0")).unwrap();
        assert_eq!((b.bots, b.people, b.bot_accounts), (1000, 100, 0));
        assert_eq!((b.admissions, b.bot_threads, b.browser_hps), (1, 1, 1.0));
        assert_eq!(
            (b.bot_poll, b.spread),
            (Duration::from_millis(500), Duration::from_secs(2))
        );
        assert_eq!(
            (b.max, b.mint_ahead),
            (Duration::from_secs(120), Duration::ZERO)
        );
        assert!(b.also.is_empty());
        assert_eq!(b.target.base, "/pow");
        assert!(parse(&url("--bots x")).is_err());
        assert!(parse(&url("--bogus 1")).is_err());
        assert!(parse(&["--bots".to_string(), "3".to_string()]).is_err());
    }

    #[test]
    fn addresses_of_bots_and_people_are_apart() {
        assert_eq!(address(1, 0), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(address(2, 999), Ipv4Addr::new(127, 2, 3, 232));
    }
}
