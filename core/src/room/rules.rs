//! The room's rules as plain functions of configuration, state and time: when there is room
//! for one more, whether a ticket still admits, how a lottery draw is judged. Both stores (the
//! shared-memory room and the Redis script) follow these.

use crate::ticket::Ticket;

/// How the room picks who goes in. Switchable at run time; stored in shared memory as its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Arrival order (the default).
    Fifo,
    /// Lottery among the clients present: each poll has an equal chance.
    Random,
    /// Everyone is admitted (and still counted).
    Passthrough,
    /// Closed: nobody is admitted, a maintenance answer is given.
    Reject,
    /// Everyone waits, new arrivals included; nobody is let in.
    QueueAll,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Fifo,
        Mode::Random,
        Mode::Passthrough,
        Mode::Reject,
        Mode::QueueAll,
    ];

    /// The mode names, for messages: "fifo, random, passthrough, reject, queue_all".
    pub const NAMES: &'static str = "fifo, random, passthrough, reject, queue_all";

    /// The mode's number, as the room script knows it (its FIFO .. QUEUE_ALL come from here)
    /// and Redis stores an override.
    pub const fn code(self) -> u32 {
        match self {
            Mode::Fifo => 1,
            Mode::Random => 2,
            Mode::Passthrough => 3,
            Mode::Reject => 4,
            Mode::QueueAll => 5,
        }
    }

    /// 0 (no override) and unknown codes give None.
    pub fn from_code(code: u32) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Fifo => "fifo",
            Mode::Random => "random",
            Mode::Passthrough => "passthrough",
            Mode::Reject => "reject",
            Mode::QueueAll => "queue_all",
        }
    }

    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The limits a room enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Admitted sessions seen within `active_window_ms` stay below this ([S4]).
    pub max_active: u64,
    /// Admissions per calendar minute stay below this, when set (Cloudflare's inflow limit).
    pub new_per_minute: Option<u64>,
    /// A waiting client unseen for this long is absent: skipped at the head, not waited for
    /// ([S6], [S16]).
    pub presence_ms: u64,
    /// An absent waiting client's arrival is kept this long ([S27]); past it the place is
    /// gone. Read through [`Limits::kept_ms`] (never below `presence_ms`; equal: `keep=off`,
    /// a place goes with its presence).
    pub keep_ms: u64,
    /// An admitted session counts as active while seen within this window.
    pub active_window_ms: u64,
    pub mode: Mode,
    /// Flood control: how fast one client address may take places (None: off).
    pub flood: Option<crate::room::gcra::Rate>,
    /// The request rate of one admitted session (None: unlimited).
    pub session_rate: Option<crate::room::gcra::Rate>,
}

/// How long an absent waiter's place lasts ([S27]): `keep`, never less than `presence` (a
/// place does not go while its holder still counts as present; `keep=off` is `presence`).
/// The one rule: the zone's parameters, the room's limits and the fleet's settings read it.
pub fn kept_ms(keep_ms: u64, presence_ms: u64) -> u64 {
    keep_ms.max(presence_ms)
}

impl Limits {
    /// How long an absent waiting client's place lasts ([`kept_ms`]).
    pub fn kept_ms(&self) -> u64 {
        kept_ms(self.keep_ms, self.presence_ms)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// One more may go in.
    Room,
    /// Both limits must have room; one of them has none.
    Full,
}

/// Places free under both limits right now.
pub fn free_places(l: &Limits, active: u64, admitted_in_minute: u64) -> u64 {
    let by_active = l.max_active.saturating_sub(active);
    match l.new_per_minute {
        Some(n) => by_active.min(n.saturating_sub(admitted_in_minute)),
        None => by_active,
    }
}

/// Whether one more session may be admitted: both limits have room, and the store has memory
/// to count it (an uncounted admission could overshoot `max_active`).
pub fn capacity(l: &Limits, active: u64, admitted_in_minute: u64, can_count: bool) -> Capacity {
    if can_count && free_places(l, active, admitted_in_minute) > 0 {
        Capacity::Room
    } else {
        Capacity::Full
    }
}

/// A u32 draw's range: a draw wins when it falls in the first free/present of it.
pub const DRAW_SCALE: u64 = 1 << 32;
/// The calendar minute `new_per_minute` counts admissions in.
pub const MINUTE_MS: u64 = 60_000;

/// The lottery: with `free` places and `present` clients polling, each poll wins with chance
/// free/present. `draw` is uniform over u32.
pub fn lottery_wins(draw: u32, free: u64, present: u64) -> bool {
    if free == 0 || present == 0 {
        return false;
    }
    if free >= present {
        return true;
    }
    (draw as u64) * present < free.saturating_mul(DRAW_SCALE)
}

/// How long an admission lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Fixed period from admission (the source's 10 minutes).
    Grant { ms: u64 },
    /// Renewed by every request, ends `ms` after the last one (Cloudflare's session duration).
    Session { ms: u64 },
}

/// What a ticket that decrypted and belongs to this room still says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketState {
    /// Admitted and within its grant or session: passes without asking the store.
    Admitted,
    /// Waiting: the store decides whether its place still holds.
    Waiting,
    /// Admission ran out, or the ticket is too old or from the future: a new user.
    Stale,
}

/// Tickets claiming to be issued further in the future than this are refused (clock skew
/// between fleet nodes is allowed up to this much).
pub const MAX_CLOCK_SKEW_MS: u64 = 5 * 60 * 1000;
/// A waiting ticket older than this starts over (a place cannot be held for ever).
pub const MAX_WAIT_TICKET_AGE_MS: u64 = 24 * 60 * 60 * 1000;

pub fn ticket_state(t: &Ticket, admission: Admission, now: u64) -> TicketState {
    if t.issued_at > now.saturating_add(MAX_CLOCK_SKEW_MS)
        || t.accepted_at > now.saturating_add(MAX_CLOCK_SKEW_MS)
        || t.last_seen > now.saturating_add(MAX_CLOCK_SKEW_MS)
    {
        return TicketState::Stale;
    }
    if t.accepted_at == 0 {
        if now.saturating_sub(t.issued_at) > MAX_WAIT_TICKET_AGE_MS {
            return TicketState::Stale;
        }
        return TicketState::Waiting;
    }
    if now < admission_ends(t, admission) {
        TicketState::Admitted
    } else {
        TicketState::Stale
    }
}

/// When an admitted ticket's admission ends: its grant from admission, or its session from
/// the last renewal (an admission token's `exp` is this too).
pub fn admission_ends(t: &Ticket, admission: Admission) -> u64 {
    match admission {
        Admission::Grant { ms } => t.accepted_at.saturating_add(ms),
        Admission::Session { ms } => t.last_seen.max(t.accepted_at).saturating_add(ms),
    }
}

/// How far in the future a page pass's stamp may lie: another node of the fleet, whose
/// clock may run a little ahead, may have sealed it.
pub const PAGE_PASS_SKEW_MS: u64 = 2000;

/// [S29] Whether a page pass sealed at `issued_at` still lets its page's sub-resources
/// through at `now`: within `window_ms` (`page_pass=`) of the document it came with.
pub fn page_pass_valid(issued_at: u64, now: u64, window_ms: u64) -> bool {
    issued_at <= now.saturating_add(PAGE_PASS_SKEW_MS) && now.saturating_sub(issued_at) < window_ms
}

/// In session mode the ticket's last check-in must move forward as the user keeps going; the
/// cookie is re-sealed only when it moved by a tenth of the session (at least a second), not on
/// every request, so an admitted user costs one encryption now and then.
pub fn needs_renewal(t: &Ticket, admission: Admission, now: u64) -> bool {
    match admission {
        Admission::Grant { .. } => false,
        Admission::Session { ms } => now.saturating_sub(t.last_seen) >= (ms / 10).max(1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(max_active: u64, npm: Option<u64>) -> Limits {
        Limits {
            max_active,
            new_per_minute: npm,
            presence_ms: 20_000,
            keep_ms: 20_000,
            active_window_ms: 60_000,
            mode: Mode::Fifo,
            flood: None,
            session_rate: None,
        }
    }

    fn ticket(iat: u64, acc: u64, seen: u64) -> Ticket {
        Ticket {
            sid: 1,
            qnum: 1,
            issued_at: iat,
            accepted_at: acc,
            last_seen: seen,
            told: crate::ticket::Floor::NONE,
        }
    }

    #[test]
    fn capacity_edges() {
        let l = lim(5, None);
        assert_eq!(capacity(&l, 4, 1000, true), Capacity::Room);
        assert_eq!(capacity(&l, 5, 0, true), Capacity::Full);
        assert_eq!(capacity(&l, 0, 0, false), Capacity::Full);
        let l = lim(5, Some(3));
        assert_eq!(capacity(&l, 0, 2, true), Capacity::Room);
        assert_eq!(capacity(&l, 0, 3, true), Capacity::Full);
        assert_eq!(free_places(&l, 4, 0), 1);
        assert_eq!(free_places(&l, 0, 1), 2);
    }

    #[test]
    fn lottery_odds() {
        assert!(!lottery_wins(0, 0, 10));
        assert!(lottery_wins(u32::MAX, 10, 10));
        let wins = (0..10_000u32)
            .filter(|i| lottery_wins(i.wrapping_mul(429_497), 1, 4))
            .count();
        assert!((2000..3000).contains(&wins), "{wins}");
    }

    #[test]
    fn grant_and_session_expiry() {
        let g = Admission::Grant { ms: 600_000 };
        assert_eq!(
            ticket_state(&ticket(0, 10, 10), g, 600_009),
            TicketState::Admitted
        );
        assert_eq!(
            ticket_state(&ticket(0, 10, 10), g, 600_010),
            TicketState::Stale
        );
        let s = Admission::Session { ms: 60_000 };
        assert_eq!(
            ticket_state(&ticket(0, 10, 500_000), s, 559_999),
            TicketState::Admitted
        );
        assert_eq!(
            ticket_state(&ticket(0, 10, 500_000), s, 560_000),
            TicketState::Stale
        );
        assert_eq!(
            ticket_state(&ticket(0, 0, 0), g, 1000),
            TicketState::Waiting
        );
        assert_eq!(
            ticket_state(&ticket(0, 0, 0), g, MAX_WAIT_TICKET_AGE_MS + 1),
            TicketState::Stale
        );
        // From the future: refused.
        assert_eq!(
            ticket_state(&ticket(10 * MAX_CLOCK_SKEW_MS, 0, 0), g, 0),
            TicketState::Stale
        );
    }

    #[test]
    fn renewal_is_rare() {
        let s = Admission::Session { ms: 600_000 };
        assert!(!needs_renewal(&ticket(0, 0, 1000), s, 60_999));
        assert!(needs_renewal(&ticket(0, 0, 1000), s, 61_000));
        assert!(!needs_renewal(
            &ticket(0, 0, 0),
            Admission::Grant { ms: 1 },
            10_000_000
        ));
    }

    #[test]
    fn page_pass_lasts_its_window_only() {
        let t = 1_000_000;
        assert!(page_pass_valid(t, t, 10_000));
        assert!(page_pass_valid(t, t + 9_999, 10_000));
        assert!(!page_pass_valid(t, t + 10_000, 10_000));
        // Another node's clock a little ahead: taken; far ahead (or forged times): refused.
        assert!(page_pass_valid(t + PAGE_PASS_SKEW_MS, t, 10_000));
        assert!(!page_pass_valid(t + PAGE_PASS_SKEW_MS + 1, t, 10_000));
        assert!(!page_pass_valid(u64::MAX, t, 10_000));
        assert!(!page_pass_valid(0, t, 10_000));
    }

    #[test]
    fn mode_codes_round_trip() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_code(m.code()), Some(m));
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::from_code(0), None);
        let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.join(", "), Mode::NAMES);
    }
}
