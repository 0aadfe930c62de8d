//! How soon a waiting client is told to come back (`Retry-After`, `refresh_seconds`, the
//! page's own refresh): one rule for every store.
//!
//! A free place waits for the client whose turn it is to ask for it: with the configured
//! refresh (10 s by default) a place that frees just after the head's poll stays empty until
//! its next one. So those whose turn is near come back sooner, and no more of them than the
//! places about to free: the cost is a few more polls from the head of the line, not from the
//! line.

/// What the waiting answer knows of the client's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Turn {
    /// Its place in the line (1: next; 0: not told, as in a lottery).
    pub position: u64,
    /// When its turn is expected, if the room can tell (from the pace it lets people in).
    pub eta_secs: Option<u64>,
    /// Places the room may open at its next steps without anyone leaving (`max_active=auto`'s
    /// next two rises; 0 for a fixed `max_active`).
    pub opening: u64,
}

/// The refresh for `turn`, `configured` being the location's (`smart_limit_refresh`) and
/// `floor_secs` the soonest the store's answer can change (a synced room's interval; a
/// second elsewhere):
/// - a client within the places the next rises open comes back at the floor: a rise is a
///   step of the controller, which no pace predicts, and a cold start fills one rise at a
///   time (`scripts/bench --auto`: the new places stood empty for the head's 5 s refresh);
/// - a client whose turn is expected within three of its refreshes comes back at a third of
///   that time (a wave of departures moves the line faster than the pace says; the head must
///   be there when places free, or they stay empty), not sooner than the floor;
/// - everyone else at the configured refresh, which also caps the others.
pub fn refresh_secs(configured: u64, floor_secs: u64, turn: Turn) -> u64 {
    let floor = floor_secs.max(1);
    if turn.position != 0 && turn.position <= turn.opening {
        return floor.min(configured);
    }
    match turn.eta_secs {
        Some(eta) if eta < configured.saturating_mul(3) => (eta / 3).max(floor).min(configured),
        _ => configured,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eta(eta_secs: Option<u64>) -> Turn {
        Turn {
            position: 50,
            eta_secs,
            opening: 0,
        }
    }

    #[test]
    fn the_head_of_the_line_comes_back_sooner() {
        assert_eq!(refresh_secs(10, 1, eta(None)), 10);
        assert_eq!(refresh_secs(10, 1, eta(Some(40))), 10);
        // At a third of its expected wait, never sooner than the floor or a second.
        assert_eq!(refresh_secs(10, 1, eta(Some(12))), 4);
        assert_eq!(refresh_secs(10, 1, eta(Some(4))), 1);
        assert_eq!(refresh_secs(10, 1, eta(Some(0))), 1);
        assert_eq!(refresh_secs(10, 0, eta(Some(0))), 1);
        assert_eq!(refresh_secs(10, 3, eta(Some(0))), 3);
        // The configured refresh caps it all.
        assert_eq!(refresh_secs(2, 5, eta(Some(0))), 2);
    }

    #[test]
    fn those_the_next_rise_lets_in_come_back_at_the_floor() {
        let t = |position| Turn {
            position,
            eta_secs: None,
            opening: 5,
        };
        assert_eq!(refresh_secs(10, 1, t(1)), 1);
        assert_eq!(refresh_secs(10, 1, t(5)), 1);
        assert_eq!(refresh_secs(10, 2, t(5)), 2);
        assert_eq!(refresh_secs(10, 1, t(6)), 10);
        // Not told a position (a lottery): not by the rise.
        assert_eq!(refresh_secs(10, 1, t(0)), 10);
    }
}
