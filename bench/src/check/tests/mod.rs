//! Each rule against a small history built in code: it catches what it looks for
//! (`rules.rs`), and a clean history (a simulated FIFO room, `clean.rs`) passes them all;
//! bad input and the command (`input.rs`). Here: the histories' building blocks.

mod clean;
mod input;
mod rules;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::process::ExitCode;

use super::load::{History, LoadError};
use super::options::Given;
use super::violation::Rule;
use super::{check, main, Findings};
use crate::history::{ClientPlan, Fault, Kind, Metrics, Mode, Order, Outcome, Record, Req, Run};

fn run(mode: Mode, max_active: u64) -> Run {
    Run {
        mode,
        order: Order::Fifo,
        nodes: 1,
        max_active,
        session_ms: Some(10_000),
        grant_ms: None,
        active_window_ms: 10_000,
        presence_ms: 5000,
        keep_ms: 0,
        timeout_ms: if mode == Mode::Shm { 0 } else { 200 },
        sync_ms: if mode == Mode::Sync { 1000 } else { 0 },
        refresh_ms: 1000,
        start_ms: None,
        duration_ms: 100_000,
    }
}

/// A shared-memory room of `max_active` whose event starts at `start_ms` (a lottery).
fn lottery(max_active: u64, start_ms: u64) -> Run {
    Run {
        order: Order::Lottery,
        start_ms: Some(start_ms),
        ..run(Mode::Shm, max_active)
    }
}

fn status(o: Outcome) -> u16 {
    match o {
        Outcome::New => 307,
        Outcome::Waiting => 503,
        Outcome::Admitted => 200,
        Outcome::Throttled => 429,
        Outcome::Other => 500,
        Outcome::Error => 0,
    }
}

/// A request answered 2 ms after it was sent, with its ticket.
fn req(client: u64, sent: u64, outcome: Outcome, pos: Option<u64>) -> Req {
    Req {
        client,
        kind: Kind::Person,
        node: 0,
        sent,
        done: sent.saturating_add(2),
        status: status(outcome),
        outcome,
        pos,
        qlen: pos.map(|p| p.saturating_add(5)),
        refresh_ms: None,
        ticket: true,
        renewed: true,
    }
}

fn wait(client: u64, sent: u64, pos: u64) -> Req {
    req(client, sent, Outcome::Waiting, Some(pos))
}

fn admit(client: u64, sent: u64) -> Req {
    req(client, sent, Outcome::Admitted, None)
}

fn history(run: Run, reqs: Vec<Req>) -> History {
    let records = std::iter::once(Record::Run(run)).chain(reqs.into_iter().map(Record::Req));
    History::from_records(records).expect("a history with a run")
}

fn findings(h: &History) -> Findings {
    check(h, &Given::default())
}

fn rules(f: &Findings) -> Vec<Rule> {
    let mut r: Vec<Rule> = f.violations().map(|v| v.rule).collect();
    r.dedup();
    r.sort();
    r.dedup();
    r
}
