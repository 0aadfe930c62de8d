//! The command line (clap), and the tolerances each rule uses (given, or the mode's default).

use std::path::PathBuf;

use clap::Parser;

use crate::history::{Mode, Run};

const ABOUT: &str = "\
Reads a rehearsal's history (JSON Lines: a run record, then requests, faults, metric samples
and client plans) and checks the room's promises from what the clients saw:
  (a) never more admitted sessions at once than max_active (+2 %)
  (b) admission in arrival order (lottery: the pre-queue before everyone after the start)
  (c) a polling client's position never grows; nobody who kept polling is dropped
  (d) distinct positions at any moment (shm and redis; sync with --exact-sync)
  (e) answers within the store's timeout (+ slack), no unanswered request away from a fault
  (f) an admitted client keeps its session or grant
Prints a summary (also to --summary) with each violation, at most 20 per rule; --report
writes a self-contained HTML page with plots.";

/// `smart-limit-bench check`'s command line.
#[derive(Debug, Parser)]
#[command(
    name = "smart-limit-bench check",
    override_usage = "smart-limit-bench check HISTORY.jsonl [--report OUT.html] [--summary OUT.txt]
           [--inversion-tolerance-ms N] [--position-tolerance N] [--latency-slack-ms N]
           [--exact-sync]",
    about = ABOUT,
    after_help = "Exit status: 0 no violation, 1 a violation, 2 a bad file or usage.",
    args_override_self = true
)]
struct Cli {
    /// the rehearsal's history
    #[arg(value_name = "HISTORY.jsonl")]
    history: PathBuf,
    /// write a self-contained HTML page with plots
    #[arg(long, value_name = "OUT.html")]
    report: Option<PathBuf>,
    /// write the summary there too
    #[arg(long, value_name = "OUT.txt")]
    summary: Option<PathBuf>,
    /// (b) how much earlier an arrival must be, and how long after the later one's admission
    /// it must still wait, to count [default: 0 for shm and redis, 2 x sync + 1000 for sync]
    #[arg(long, value_name = "N")]
    inversion_tolerance_ms: Option<u64>,
    /// (c) growth allowed between two answers [default: 0 for shm and redis, max(2, 1 % of
    /// the position) for sync]
    #[arg(long, value_name = "N")]
    position_tolerance: Option<u64>,
    /// (e) slack over the timeout (shm's timeout is 1000)
    #[arg(long, value_name = "N", default_value = "50")]
    latency_slack_ms: u64,
    /// (d) also for sync, whose positions are estimates by design
    #[arg(long)]
    exact_sync: bool,
}

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

/// The options from the command line (`argv` after `check`); `--help` comes back as the
/// error that prints it.
pub fn parse(argv: &[String]) -> Result<Options, clap::Error> {
    let program = std::iter::once("smart-limit-bench check".to_string());
    let cli = Cli::try_parse_from(program.chain(argv.iter().cloned()))?;
    Ok(Options {
        history: cli.history,
        report: cli.report,
        summary: cli.summary,
        tolerances: Given {
            inversion_ms: cli.inversion_tolerance_ms,
            position: cli.position_tolerance,
            latency_slack_ms: cli.latency_slack_ms,
            exact_sync: cli.exact_sync,
        },
    })
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

    /// (c) growth allowed from position `from`: the given one, or max(2, 1 % of it), the most
    /// the module lets a told position rise (`room::told::slack`, [S27]).
    pub fn position_growth(&self, from: u64) -> u64 {
        self.position
            .unwrap_or_else(|| smart_limit_core::room::told::slack(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn one_history_and_its_options() {
        let o = parse(&argv(
            "h.jsonl --report r.html --exact-sync --latency-slack-ms 70",
        ))
        .unwrap();
        assert_eq!(o.history, PathBuf::from("h.jsonl"));
        assert_eq!(o.report, Some(PathBuf::from("r.html")));
        assert_eq!(o.summary, None);
        assert_eq!(
            o.tolerances,
            Given {
                latency_slack_ms: 70,
                exact_sync: true,
                ..Given::default()
            }
        );
        let o = parse(&argv("--position-tolerance 3 - --inversion-tolerance-ms 9")).unwrap();
        assert_eq!(o.history, PathBuf::from("-"));
        assert_eq!(
            (o.tolerances.position, o.tolerances.inversion_ms),
            (Some(3), Some(9))
        );
        assert_eq!(parse(&argv("h")).unwrap().tolerances, Given::default());
        for bad in [
            "",
            "a b",
            "h --bogus",
            "h --position-tolerance x",
            "h --report",
        ] {
            assert!(parse(&argv(bad)).is_err(), "{bad}");
        }
        let help = parse(&argv("--help")).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
