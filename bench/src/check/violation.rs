//! A broken promise, as the checker reports it: which rule, when, who.

use std::fmt;

use crate::history::Req;

/// The rules of [S23], in the order the summary lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// (a) more sessions at once than `max_active` allows, from what clients were answered.
    OverAdmission,
    /// (a) a node's own `active` count above the limit (fleet modes only).
    OverAdmissionMetrics,
    /// (b) a later arrival admitted while an earlier one was still told to wait.
    Order,
    /// (c) a polling client's position grew.
    PositionGrew,
    /// (c) a client that kept polling got a cookie check: its place was forgotten.
    Dropped,
    /// (f) an admitted client told to wait (or re-checked) within its session or grant.
    LostAdmission,
    /// (d) two places told the same position at the same moment.
    DuplicatePosition,
    /// (e) an answer slower than the store's timeout allows.
    Latency,
    /// (e) no answer at all, away from any fault that explains it.
    Unanswered,
}

impl Rule {
    pub const ALL: [Rule; 9] = [
        Rule::OverAdmission,
        Rule::OverAdmissionMetrics,
        Rule::Order,
        Rule::PositionGrew,
        Rule::Dropped,
        Rule::LostAdmission,
        Rule::DuplicatePosition,
        Rule::Latency,
        Rule::Unanswered,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Rule::OverAdmission => "(a) over-admission",
            Rule::OverAdmissionMetrics => "(a) metrics",
            Rule::Order => "(b) order",
            Rule::PositionGrew => "(c) position grew",
            Rule::Dropped => "(c) dropped",
            Rule::LostAdmission => "(f) admitted session lost",
            Rule::DuplicatePosition => "(d) duplicate position",
            Rule::Latency => "(e) latency",
            Rule::Unanswered => "(e) unanswered",
        }
    }

    /// Whether a violation of this rule means a client lost something it held (the fault table
    /// asks this of the violations that follow a fault).
    pub fn is_loss(self) -> bool {
        matches!(
            self,
            Rule::PositionGrew | Rule::Dropped | Rule::LostAdmission
        )
    }
}

/// One violation: a rule, the moment it shows (ms since the run's start), the clients involved
/// (the most telling first) and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    pub at_ms: u64,
    pub clients: Vec<u64>,
    pub text: String,
}

impl Violation {
    /// A violation one request of one client shows: at the time it was sent.
    pub fn at(rule: Rule, r: &Req, text: String) -> Violation {
        Violation {
            rule,
            at_ms: r.sent,
            clients: vec![r.client],
            text,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {} ms", self.rule.label(), self.at_ms)?;
        if !self.clients.is_empty() {
            let ids: Vec<String> = self.clients.iter().map(u64::to_string).collect();
            write!(f, " clients {}", ids.join(","))?;
        }
        write!(f, ": {}", self.text)
    }
}
