//! The command line, and the tolerances each rule uses (given, or the mode's default).

use std::path::PathBuf;

use crate::history::{Mode, Run};

pub const USAGE: &str = "\
usage: smart-limit-bench check HISTORY.jsonl [--report OUT.html] [--summary OUT.txt]
           [--inversion-tolerance-ms N] [--position-tolerance N] [--latency-slack-ms N]
           [--exact-sync]

Reads a rehearsal's history (JSON Lines: a run record, then requests, faults, metric samples
and client plans) and checks the room's promises from what the clients saw:
  (a) never more admitted sessions at once than max_active (+2 %)
  (b) admission in arrival order (lottery: the pre-queue before everyone after the start)
  (c) a polling client's position never grows; nobody who kept polling is dropped
  (d) distinct positions at any moment (shm and redis; sync with --exact-sync)
  (e) answers within the store's timeout (+ slack), no unanswered request away from a fault
  (f) an admitted client keeps its session or grant
Prints a summary (also to --summary) with each violation, at most 20 per rule; --report
writes a self-contained HTML page with plots.

  --inversion-tolerance-ms N  (b) how much earlier an arrival must be, and how long after the
                              later one's admission it must still wait, to count (default:
                              0 for shm and redis, 2 x sync + 1000 for sync)
  --position-tolerance N      (c) growth allowed between two answers (default: 0 for shm and
                              redis, max(2, 1 % of the position) for sync)
  --latency-slack-ms N        (e) slack over the timeout (default 50; shm's timeout is 1000)
  --exact-sync                (d) also for sync, whose positions are estimates by design

Exit status: 0 no violation, 1 a violation, 2 a bad file or usage.
";

/// What the command line asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub history: PathBuf,
    pub report: Option<PathBuf>,
    pub summary: Option<PathBuf>,
    pub tolerances: Given,
}

/// Tolerances from the command line; `None` means the mode's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Given {
    pub inversion_ms: Option<u64>,
    pub position: Option<u64>,
    pub latency_slack_ms: u64,
    pub exact_sync: bool,
}

impl Default for Given {
    fn default() -> Self {
        Given {
            inversion_ms: None,
            position: None,
            latency_slack_ms: 50,
            exact_sync: false,
        }
    }
}

/// What `parse` found: options to run with, or a request for help.
#[derive(Debug)]
pub enum Parsed {
    Run(Options),
    Help,
}

pub fn parse(argv: &[String]) -> Result<Parsed, String> {
    let mut history = None;
    let (mut report, mut summary) = (None, None);
    let mut t = Given::default();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{a}: '{v}' is not a number"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--report" => report = Some(PathBuf::from(value()?)),
            "--summary" => summary = Some(PathBuf::from(value()?)),
            "--inversion-tolerance-ms" => t.inversion_ms = Some(number(value()?)?),
            "--position-tolerance" => t.position = Some(number(value()?)?),
            "--latency-slack-ms" => t.latency_slack_ms = number(value()?)?,
            "--exact-sync" => t.exact_sync = true,
            other if other.starts_with('-') && other != "-" => {
                return Err(format!("unknown option '{other}'"))
            }
            path if history.is_none() => history = Some(PathBuf::from(path)),
            extra => return Err(format!("one history only ('{extra}')")),
        }
    }
    Ok(Parsed::Run(Options {
        history: history.ok_or("a history file is required")?,
        report,
        summary,
        tolerances: t,
    }))
}

/// The tolerances in force for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tolerances {
    /// (b) an arrival this much earlier is certainly earlier; an admission this long before a
    /// waiting answer certainly preceded it.
    pub inversion_ms: u64,
    /// (c) a fixed growth allowed, or `None` for the mode's rule.
    pub position: Option<u64>,
    /// (e) the longest acceptable answer.
    pub latency_limit_ms: u64,
    /// (d) whether positions are held to be exact.
    pub distinct: bool,
}

impl Tolerances {
    pub fn resolve(run: &Run, given: &Given) -> Tolerances {
        let sync = run.mode == Mode::Sync;
        // A sync node learns of the fleet's admissions one or two intervals late, and a sync
        // call may take up to a second on a loaded fleet.
        let inversion_default = if sync {
            run.sync_ms.saturating_mul(2).saturating_add(1000)
        } else {
            0
        };
        // shm has no store timeout; a second is already far slower than a room should answer.
        let timeout = if run.mode == Mode::Shm || run.timeout_ms == 0 {
            1000
        } else {
            run.timeout_ms
        };
        Tolerances {
            inversion_ms: given.inversion_ms.unwrap_or(inversion_default),
            position: given.position.or((!sync).then_some(0)),
            latency_limit_ms: timeout.saturating_add(given.latency_slack_ms),
            distinct: !sync || given.exact_sync,
        }
    }

    /// (c) growth allowed from position `from`: the given one, or for sync (an estimate within
    /// 1 % [S22]) max(2, 1 % of it).
    pub fn position_growth(&self, from: u64) -> u64 {
        self.position.unwrap_or((from / 100).max(2))
    }
}
