//! [S27] A number that only goes down: the position a waiting answer tells is never more than
//! the lowest one told before for the same place, which the ticket carries.
//!
//! The stores' own positions do not grow on one node or a central room (they count the
//! present and kept waiters ahead), which keep no floor. A synced room's are estimates, within a second's moves of
//! the line: a client told its place from a picture just taken, then from another node's
//! picture near its interval's end, heard a place further back by the let-ins that picture
//! did not show yet. The ticket remembers the lowest position told, so the client is told no
//! more than that; an estimate that was too near the head holds the number until the line
//! comes down to it.
//!
//! The ticket is sealed again only when the position fell by more than [`slack`] below what it
//! carries: polling stays free of encryption between, and what a client is told rises by at
//! most that much (the rehearsal checker's tolerance, which reads it from here).
//!
//! Only a settled position is kept ([`Place::settled`]): one that counts every place taken
//! ahead, told too far back (by let-ins not shown yet) but not too near the head. A synced
//! room's estimate for a newcomer no picture shows yet is no floor: a node that knew nobody
//! ahead told its first newcomer 1, and a floor would have held it at 1 while others were
//! ahead (`t/272` TEST 1). Between such estimates, a position may still grow.

use super::Place;
use crate::ticket::Ticket;

/// What a waiting answer tells, and what its ticket carries for its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    /// The position told (0: none, the room keeps no order).
    pub position: u64,
    /// The lowest position the ticket carries for this place (0: none).
    pub floor: u64,
    /// Whether the ticket the client holds must be sealed again to carry `floor`.
    pub reseal: bool,
}

/// How far below what the ticket carries a position may fall before the ticket is sealed
/// again: max(2, 1 %), the bound [S22] gives a synced room's positions; what a client is told
/// may rise by as much.
pub fn slack(position: u64) -> u64 {
    (position / 100).max(2)
}

/// The position a waiting answer on `place` tells a client holding `held`. `floors`: the
/// room's positions are estimates, and final (no event whose draw orders the line later: a
/// lottery's positions before its draw are provisional, and may rightly grow); a room that
/// counts exactly keeps none, as its positions never rise.
pub fn told(held: Option<&Ticket>, place: &Place, floors: bool) -> Told {
    let position = place.position;
    if position == 0 || !floors {
        return Told {
            position,
            floor: 0,
            reseal: false,
        };
    }
    // Only the same place's floor: a new place (at the tail, or after `keep`) starts afresh.
    let floor = held
        .filter(|t| t.told != 0 && t.sid == place.sid && t.qnum == place.qnum)
        .map(|t| t.told);
    match floor {
        // An estimate is kept as no floor: a newcomer told 1 by a node that knew nobody ahead
        // yet would be told 1 until the line came down to it.
        None if !place.settled => Told {
            position,
            floor: 0,
            reseal: false,
        },
        None => Told {
            position,
            floor: position,
            reseal: true,
        },
        Some(floor) => {
            let shown = position.min(floor);
            let reseal = place.settled && floor - shown > slack(shown);
            Told {
                position: shown,
                floor: if reseal { shown } else { floor },
                reseal,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(position: u64) -> Place {
        Place {
            sid: 7,
            qnum: 1000,
            position,
            queue_len: 500,
            eta_secs: None,
            resumed: false,
            settled: true,
        }
    }

    fn ticket(told: u64) -> Ticket {
        Ticket {
            sid: 7,
            qnum: 1000,
            issued_at: 1,
            accepted_at: 0,
            last_seen: 1,
            told,
        }
    }

    /// A client polling as asked, told each answer's position: what it hears.
    fn heard(estimates: &[u64]) -> Vec<u64> {
        let mut held = ticket(0);
        estimates
            .iter()
            .map(|&p| {
                let t = told(Some(&held), &place(p), true);
                if t.reseal {
                    held.told = t.floor;
                }
                t.position
            })
            .collect()
    }

    #[test]
    fn a_position_told_never_rises_past_the_slack() {
        // An estimate that rose by a second's let-ins (44, then 57) is told as 44; one that
        // falls is told as it is.
        assert_eq!(heard(&[44, 57, 40, 38, 60, 30]), [44, 44, 40, 38, 40, 30]);
        // Whatever the estimates, what is heard rises by at most max(2, 1 %).
        let wild = [300, 120, 400, 119, 250, 118, 117, 500, 3, 90, 2, 1];
        let h = heard(&wild);
        for pair in h.windows(2) {
            assert!(pair[1] <= pair[0] + slack(pair[0]), "{h:?}");
        }
    }

    #[test]
    fn the_ticket_is_sealed_again_only_when_the_position_fell_past_the_slack() {
        // The first answer on a place writes its floor.
        assert_eq!(
            told(Some(&ticket(0)), &place(50), true),
            Told {
                position: 50,
                floor: 50,
                reseal: true
            }
        );
        // Within the slack: the same ticket.
        assert!(!told(Some(&ticket(50)), &place(48), true).reseal);
        // Past it: the lower floor.
        let t = told(Some(&ticket(50)), &place(47), true);
        assert_eq!((t.position, t.floor, t.reseal), (47, 47, true));
    }

    #[test]
    fn an_estimate_is_capped_by_a_floor_but_kept_as_none() {
        let mut estimate = place(1);
        estimate.settled = false;
        // Told 1 before any picture showed who is ahead: no floor, and 3 next is told 3.
        let t = told(Some(&ticket(0)), &estimate, true);
        assert_eq!((t.position, t.floor, t.reseal), (1, 0, false));
        assert_eq!(told(Some(&ticket(0)), &place(3), true).position, 3);
        // Under a settled floor, an estimate is told no more than it, and lowers nothing.
        estimate.position = 40;
        let t = told(Some(&ticket(30)), &estimate, true);
        assert_eq!((t.position, t.reseal), (30, false));
        estimate.position = 10;
        assert!(!told(Some(&ticket(30)), &estimate, true).reseal);
    }

    #[test]
    fn a_new_place_or_a_room_without_final_order_keeps_no_floor() {
        // Another place (sent to the tail): its own position, a floor of its own.
        let mut other = place(400);
        other.qnum = 9000;
        assert_eq!(told(Some(&ticket(5)), &other, true).position, 400);
        // A lottery's provisional positions, and a room that keeps no order.
        assert_eq!(
            told(Some(&ticket(5)), &place(400), false),
            Told {
                position: 400,
                floor: 0,
                reseal: false
            }
        );
        assert_eq!(told(Some(&ticket(5)), &place(0), true).position, 0);
    }
}
