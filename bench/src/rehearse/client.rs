//! One simulated client of a rehearsal: what it does next, given what it was answered. Pure
//! (no I/O), so that its rules are tested on their own.

use crate::history::{Kind, Outcome};

use super::answer::Read;

/// How often an admitted client asks for a page while it browses.
pub const BROWSE_MS: u64 = 1000;
/// How long a client waits after no answer, or a 429, before it asks again.
pub const RETRY_MS: u64 = 1000;

/// What a client means to do, drawn at the start.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: Kind,
    /// When it first asks (ms since the start).
    pub arrive_at: u64,
    /// How often it polls while waiting when the answer does not say (the room's configured
    /// refresh, times `pace_pct`).
    pub poll_ms: u64,
    /// How it follows the refresh an answer asks for, in percent: 100 comes back when asked (a
    /// browser following the page, a program), more comes back later (a slow person: a tab in
    /// the background, a phone asleep).
    pub pace_pct: u64,
    /// When it gives up waiting, if it does.
    pub abandon_at: Option<u64>,
    /// A phone ([S27]): from when it steps away while waiting (its screen locked, the app
    /// switched: no request at all) and for how long, if it does; then it polls again.
    pub away: Option<(u64, u64)>,
    /// How long it browses once admitted.
    pub stay_ms: u64,
    /// Its node when routing is sticky.
    pub home: u32,
}

/// Where a client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not yet answered anything but the cookie check.
    Arriving,
    Waiting,
    /// Admitted at `since`.
    Admitted {
        since: u64,
    },
    /// Admitted, browsed and left.
    Left,
    /// Gave up waiting at `at`.
    Abandoned {
        at: u64,
    },
}

/// A client's state between its requests.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: u64,
    pub plan: Plan,
    pub phase: Phase,
    /// The room's ticket (`name=value`), once given.
    pub ticket: Option<String>,
    /// The node it asks next.
    pub node: u32,
    /// It has been away already (a phone steps away once).
    pub was_away: bool,
}

impl Client {
    pub fn new(id: u64, plan: Plan) -> Client {
        let node = plan.home;
        Client {
            id,
            plan,
            phase: Phase::Arriving,
            ticket: None,
            node,
            was_away: false,
        }
    }

    /// The `Accept` header it sends.
    pub fn accept(&self) -> &'static str {
        match self.plan.kind {
            Kind::Program => "application/json",
            _ => "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        }
    }

    /// The ticket it sends (a minter never keeps one).
    pub fn cookie(&self) -> Option<&str> {
        match self.plan.kind {
            Kind::Minter => None,
            _ => self.ticket.as_deref(),
        }
    }

    /// Takes in an answer got at `now` (None: no answer) and says when it asks next, or None
    /// when it is done. `jitter` is a fraction in [0, 1) drawn by the caller.
    pub fn answered(&mut self, now: u64, read: Option<&Read>, jitter: f64) -> Option<u64> {
        let spread = |ms: u64| ms - ms / 10 + ((ms / 5) as f64 * jitter) as u64;
        let Some(read) = read else {
            return Some(now + RETRY_MS);
        };
        if let Some(t) = &read.ticket {
            self.ticket = Some(t.clone());
        }
        if self.plan.kind == Kind::Minter {
            return Some(now + spread(self.plan.poll_ms));
        }
        match read.outcome {
            // The cookie check: a browser comes back at once with its ticket.
            Outcome::New => Some(now),
            Outcome::Waiting => {
                if self.plan.abandon_at.is_some_and(|at| at <= now) {
                    self.phase = Phase::Abandoned { at: now };
                    return None;
                }
                self.phase = Phase::Waiting;
                if let Some((at, ms)) = self.plan.away.filter(|&(at, _)| at <= now) {
                    if !self.was_away {
                        self.was_away = true;
                        return Some(now.max(at) + ms);
                    }
                }
                let poll = match read.refresh_ms {
                    Some(ms) if ms > 0 => ms.saturating_mul(self.plan.pace_pct) / 100,
                    _ => self.plan.poll_ms,
                };
                Some(now + spread(poll))
            }
            Outcome::Admitted => {
                let since = match self.phase {
                    Phase::Admitted { since } => since,
                    _ => now,
                };
                self.phase = Phase::Admitted { since };
                if now.saturating_sub(since) >= self.plan.stay_ms {
                    self.phase = Phase::Left;
                    return None;
                }
                Some(now + spread(BROWSE_MS))
            }
            Outcome::Throttled | Outcome::Error => Some(now + RETRY_MS),
            Outcome::Other => Some(now + spread(self.plan.poll_ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(kind: Kind) -> Plan {
        Plan {
            kind,
            arrive_at: 0,
            poll_ms: 2000,
            pace_pct: 100,
            abandon_at: None,
            away: None,
            stay_ms: 3000,
            home: 0,
        }
    }

    fn answer(outcome: Outcome, ticket: Option<&str>) -> Read {
        Read {
            status: 0,
            outcome,
            pos: None,
            qlen: None,
            refresh_ms: None,
            ticket: ticket.map(str::to_string),
        }
    }

    #[test]
    fn a_person_follows_the_cookie_check_waits_browses_and_leaves() {
        let mut c = Client::new(1, plan(Kind::Person));
        let next = c.answered(100, Some(&answer(Outcome::New, Some("t=1"))), 0.5);
        assert_eq!((next, c.cookie()), (Some(100), Some("t=1")));
        let next = c.answered(110, Some(&answer(Outcome::Waiting, None)), 0.5);
        assert_eq!((next, c.phase), (Some(2110), Phase::Waiting));
        let next = c.answered(2110, Some(&answer(Outcome::Admitted, Some("t=2"))), 0.5);
        assert_eq!(c.phase, Phase::Admitted { since: 2110 });
        assert_eq!((next, c.cookie()), (Some(3110), Some("t=2")));
        assert_eq!(
            c.answered(4000, Some(&answer(Outcome::Admitted, None)), 0.5),
            Some(5000)
        );
        assert_eq!(
            c.answered(5200, Some(&answer(Outcome::Admitted, None)), 0.5),
            None
        );
        assert_eq!(c.phase, Phase::Left);
    }

    #[test]
    fn people_follow_the_page_s_refresh_at_their_pace() {
        let mut a = answer(Outcome::Waiting, None);
        a.refresh_ms = Some(1000);
        let mut c = Client::new(5, plan(Kind::Person));
        assert_eq!(c.answered(0, Some(&a), 0.5), Some(1000));
        let mut p = plan(Kind::Person);
        p.pace_pct = 250;
        let mut slow = Client::new(6, p);
        assert_eq!(slow.answered(0, Some(&a), 0.5), Some(2500));
        // A page that says nothing: the plan's own period.
        assert_eq!(
            slow.answered(0, Some(&answer(Outcome::Waiting, None)), 0.5),
            Some(2000)
        );
    }

    #[test]
    fn a_phone_steps_away_once_while_waiting() {
        let mut p = plan(Kind::Person);
        p.away = Some((3000, 15_000));
        let mut c = Client::new(7, p);
        let w = answer(Outcome::Waiting, None);
        assert_eq!(c.answered(1000, Some(&w), 0.5), Some(3000));
        // Due to step away: nothing for 15 s, then it polls as before.
        assert_eq!(c.answered(3000, Some(&w), 0.5), Some(18_000));
        assert_eq!(c.answered(18_000, Some(&w), 0.5), Some(20_000));
        assert_eq!(c.answered(20_000, Some(&w), 0.5), Some(22_000));
    }

    #[test]
    fn an_abandoner_stops_while_waiting() {
        let mut p = plan(Kind::Person);
        p.abandon_at = Some(5000);
        let mut c = Client::new(2, p);
        assert!(c
            .answered(4000, Some(&answer(Outcome::Waiting, None)), 0.0)
            .is_some());
        assert_eq!(
            c.answered(6000, Some(&answer(Outcome::Waiting, None)), 0.0),
            None
        );
    }

    #[test]
    fn a_program_polls_as_told_and_a_minter_keeps_no_ticket() {
        let mut c = Client::new(3, plan(Kind::Program));
        let mut a = answer(Outcome::Waiting, None);
        a.refresh_ms = Some(4000);
        assert_eq!(c.answered(0, Some(&a), 0.5), Some(4000));
        let mut m = Client::new(4, plan(Kind::Minter));
        m.answered(0, Some(&answer(Outcome::New, Some("t=9"))), 0.5);
        assert_eq!(m.cookie(), None);
        assert_eq!(m.answered(10, None, 0.5), Some(10 + RETRY_MS));
    }
}
