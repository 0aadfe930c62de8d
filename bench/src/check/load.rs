//! Reading a history: every line parsed on its own, a bad line skipped and counted (a driver
//! killed mid-line must not hide the rest of the run), the run's settings required.

use std::io::BufRead;

use crate::history::{ClientPlan, Fault, Metrics, Record, Req, Run};

/// How many malformed lines are quoted in the summary.
const MALFORMED_EXAMPLES: usize = 5;

/// A parsed history, sorted for the rules.
#[derive(Debug, Clone)]
pub struct History {
    pub run: Run,
    /// Sorted by client, then `sent`, then `done`: each client's requests are one slice.
    pub reqs: Vec<Req>,
    /// Sorted by `at`.
    pub faults: Vec<Fault>,
    /// Sorted by node, then `at`.
    pub metrics: Vec<Metrics>,
    /// Sorted by client.
    pub plans: Vec<ClientPlan>,
    /// Lines read (blank ones included).
    pub lines: u64,
    pub malformed: Malformed,
}

/// Lines skipped, with the first few reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Malformed {
    pub count: u64,
    /// (line number from 1, what was wrong)
    pub examples: Vec<(u64, String)>,
}

impl Malformed {
    fn note(&mut self, line: u64, why: String) {
        self.count += 1;
        if self.examples.len() < MALFORMED_EXAMPLES {
            self.examples.push((line, why));
        }
    }
}

/// Why a history cannot be checked at all (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the history: {0}")]
    Io(String),
    #[error("no run record: not a rehearsal's history")]
    NoRun,
    #[error("bad run record: {0}")]
    BadRun(String),
}

/// Records as they come, before the run is known to exist.
#[derive(Default)]
struct Builder {
    run: Option<Run>,
    reqs: Vec<Req>,
    faults: Vec<Fault>,
    metrics: Vec<Metrics>,
    plans: Vec<ClientPlan>,
    lines: u64,
    malformed: Malformed,
}

impl Builder {
    fn add(&mut self, line_no: u64, record: Record) {
        match record {
            Record::Run(run) if self.run.is_none() => self.run = Some(run),
            Record::Run(_) => self.malformed.note(line_no, "a second run record".into()),
            // The rules read `done - sent` and windows [sent, done]; a reversed one is garbage.
            Record::Req(r) if r.done < r.sent => self.malformed.note(
                line_no,
                format!("request done ({}) before sent ({})", r.done, r.sent),
            ),
            Record::Req(r) => self.reqs.push(r),
            Record::Fault(f) => self.faults.push(f),
            Record::Metrics(m) => self.metrics.push(m),
            Record::Client(c) => self.plans.push(c),
        }
    }

    fn line(&mut self, line_no: u64, bytes: &[u8]) {
        self.lines = line_no;
        let Ok(text) = std::str::from_utf8(bytes) else {
            self.malformed.note(line_no, "not UTF-8".into());
            return;
        };
        // A byte order mark (an editor's) or a CR (a Windows copy) is not malformed.
        let text = text.trim_start_matches('\u{feff}').trim();
        if text.is_empty() {
            return;
        }
        match Record::from_line(text) {
            Ok(record) => self.add(line_no, record),
            Err(e) => self.malformed.note(line_no, e.to_string()),
        }
    }

    fn finish(self) -> Result<History, LoadError> {
        let run = self.run.ok_or(LoadError::NoRun)?;
        if run.max_active == 0 {
            return Err(LoadError::BadRun("max_active is 0".into()));
        }
        let mut h = History {
            run,
            reqs: self.reqs,
            faults: self.faults,
            metrics: self.metrics,
            plans: self.plans,
            lines: self.lines,
            malformed: self.malformed,
        };
        // Stable, by client and time sent: a client's requests tie in milliseconds (the cookie
        // check's 307 and the return it asks for), and the driver writes each client's requests
        // in the order it made them, so the file's order breaks the ties.
        h.reqs.sort_by_key(|r| (r.client, r.sent));
        h.faults.sort_by_key(|f| f.at);
        h.metrics.sort_by_key(|m| (m.node, m.at));
        h.plans.sort_by_key(|p| p.client);
        Ok(h)
    }
}

impl History {
    /// Reads JSON Lines from `input`; only an I/O error or a missing run record is fatal.
    pub fn read(mut input: impl BufRead) -> Result<History, LoadError> {
        let mut b = Builder::default();
        let mut buf = Vec::new();
        let mut line_no = 0u64;
        loop {
            buf.clear();
            let n = input
                .read_until(b'\n', &mut buf)
                .map_err(|e| LoadError::Io(e.to_string()))?;
            if n == 0 {
                break;
            }
            line_no += 1;
            b.line(line_no, &buf);
        }
        b.finish()
    }

    /// [`History::read`] over a string (tests).
    #[cfg(test)]
    pub fn parse(text: &str) -> Result<History, LoadError> {
        History::read(text.as_bytes())
    }

    /// A history from records already in memory (tests build them in code).
    #[cfg(test)]
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> Result<History, LoadError> {
        let mut b = Builder::default();
        for (i, r) in records.into_iter().enumerate() {
            let line_no = i as u64 + 1;
            b.lines = line_no;
            b.add(line_no, r);
        }
        b.finish()
    }

    /// The client slices of `reqs`: (client id, its requests by `sent`).
    pub fn by_client(&self) -> impl Iterator<Item = (u64, &[Req])> {
        self.reqs
            .chunk_by(|a, b| a.client == b.client)
            .filter_map(|c| c.first().map(|r| (r.client, c)))
    }

    /// The plan a client's driver wrote, if any.
    pub fn plan(&self, client: u64) -> Option<&ClientPlan> {
        self.plans
            .binary_search_by_key(&client, |p| p.client)
            .ok()
            .and_then(|i| self.plans.get(i))
    }
}
