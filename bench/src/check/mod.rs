//! `smart-limit-bench check`: reads a rehearsal's history against the room's rules ([S23]),
//! as Jepsen checks a database from its clients' histories: nothing here asks the room, every
//! verdict comes from what the clients sent and were answered.
//!
//! Each rule is a function over the parsed history in its own file; all of them sort and sweep
//! (O(n log n)), as a history may hold millions of requests:
//! (a) [`admission`], (b) [`order`], (c) [`positions`] and [`kept`], (d) [`distinct`],
//! (e) [`latency`], (f) [`kept`] and [`faults`]; and, a figure rather than a rule, the
//! positions' [`accuracy`].

pub mod accuracy;
pub mod admission;
pub mod clients;
pub mod distinct;
pub mod faults;
pub mod kept;
pub mod latency;
pub mod load;
pub mod options;
pub mod order;
pub mod positions;
pub mod report;
pub mod summary;
pub mod svg;
pub mod violation;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

use clients::ClientFacts;
use load::History;
use options::{Given, Tolerances};
use violation::{Rule, Violation};

/// Everything the rules found.
#[derive(Debug, Clone)]
pub struct Findings {
    pub tolerances: Tolerances,
    pub clients: Vec<ClientFacts>,
    pub admission: admission::Admission,
    pub order: order::Order,
    pub positions: positions::Positions,
    /// How close the positions came (a figure, not a rule; FIFO only).
    pub accuracy: Option<accuracy::Accuracy>,
    /// (c) dropped and (f) admitted sessions lost.
    pub kept: Vec<Violation>,
    /// `None` when positions are estimates by design (sync without --exact-sync).
    pub distinct: Option<distinct::Distinct>,
    pub latency: latency::Latency,
    pub faults: Vec<faults::FaultRow>,
}

impl Findings {
    pub fn violations(&self) -> impl Iterator<Item = &Violation> {
        self.admission
            .violations
            .iter()
            .chain(&self.order.violations)
            .chain(&self.positions.violations)
            .chain(&self.kept)
            .chain(self.distinct.iter().flat_map(|d| &d.violations))
            .chain(&self.latency.violations)
    }

    pub fn count(&self, rule: Rule) -> usize {
        self.violations().filter(|v| v.rule == rule).count()
    }

    pub fn clean(&self) -> bool {
        self.violations().next().is_none()
    }
}

/// Runs every rule over `h`.
pub fn check(h: &History, given: &Given) -> Findings {
    let tolerances = Tolerances::resolve(&h.run, given);
    let clients = clients::facts(h);
    let admission = admission::check(h, &clients);
    let order = order::check(h, &clients, tolerances.inversion_ms);
    let positions = positions::check(h, &clients, &tolerances);
    let accuracy = accuracy::measure(h, &clients);
    let kept = kept::check(h, &clients);
    let distinct = tolerances.distinct.then(|| distinct::check(h, &clients));
    let latency = latency::check(h, tolerances.latency_limit_ms);
    let mut f = Findings {
        tolerances,
        clients,
        admission,
        order,
        positions,
        accuracy,
        kept,
        distinct,
        latency,
        faults: Vec::new(),
    };
    f.faults = faults::table(h, f.violations());
    f
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("smart-limit-bench check: {e}");
    ExitCode::from(2)
}

/// `smart-limit-bench check HISTORY.jsonl [...]`: 0 when every rule holds, 1 on a violation,
/// 2 on a bad file or usage.
pub fn main(argv: &[String]) -> ExitCode {
    let opts = match options::parse(argv) {
        Ok(o) => o,
        Err(e) => return crate::args::usage(&e),
    };
    let name = opts.history.display().to_string();
    let file = match File::open(&opts.history) {
        Ok(f) => f,
        Err(e) => return fail(format!("{name}: {e}")),
    };
    let h = match History::read(BufReader::with_capacity(1 << 20, file)) {
        Ok(h) => h,
        Err(e) => return fail(format!("{name}: {e}")),
    };
    if h.malformed.count > 0 {
        eprintln!(
            "smart-limit-bench check: {name}: {} malformed line(s) skipped",
            h.malformed.count
        );
    }
    let findings = check(&h, &opts.tolerances);
    let text = summary::text(&h, &findings, &name);
    print!("{text}");
    if let Some(path) = &opts.summary {
        if let Err(e) = std::fs::write(path, &text) {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    if let Some(path) = &opts.report {
        let html = report::html(&h, &findings, &text, &name);
        if let Err(e) = std::fs::write(path, html) {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    if findings.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
