//! [S27] A number that only goes down: the position a waiting answer tells is never more than
//! the lowest one told before for the same place, which the ticket carries.
//!
//! The stores' own positions do not grow on one node or a central room (they count the
//! present and kept waiters ahead), which keep no floor. A synced room's are estimates, within
//! a second's moves of the line: a client told its place from a picture just taken, then from
//! another node's picture near its interval's end, heard a place further back by the let-ins
//! that picture did not show yet. The ticket remembers the lowest position told, so the client
//! is told no more than that.
//!
//! The ticket is sealed again only when the position fell by more than [`slack`] below what it
//! carries: polling stays free of encryption between, and what a client is told rises by at
//! most that much (the rehearsal checker's tolerance, which reads it from here).
//!
//! Two kinds of position, two kinds of floor. A *settled* position ([`Counted::All`]) counts
//! every place taken ahead: too far back (by let-ins not shown yet), never too near the head.
//! A newcomer's position before any picture showed its place is an *estimate*
//! ([`Counted::Estimate`]): the places seen taken ahead, and a reckoning of those other nodes
//! took meanwhile, which may be too near the head either way. So:
//! - an estimate's floor holds later estimates: two nodes' estimates for one newcomer differ
//!   by what each reckons of the others (132, then 136 a second later, where 114 were ahead);
//! - but not one that *saw* more places taken ahead than the floor (past the slack): that
//!   floor was too near the head, and the client would hear so when its place settled. Held,
//!   it told a newcomer 47 for two seconds where 188 were ahead (`t/270` TEST 7: a node whose
//!   share lasted longest reckoned the fleet's line from its own few);
//! - a settled position is never held by an estimate's floor, and replaces it, higher or
//!   lower: a node that knew nobody ahead told its first newcomer 1, and that floor would have
//!   held the client at 1 while four were ahead (`t/272` TEST 1).
//!
//! So one rise is left: from an estimate too near the head to a position that shows it
//! (docs/fleet.md, "An estimate's floor"). Telling every estimate max(2, 1 %) further back
//! hid the smaller of those in the rehearsal, but told a newcomer 6 of 6 where it was 4 of 4.

use super::{Counted, Place};
use crate::ticket::{Floor, Ticket};

/// What a waiting answer tells, and what its ticket carries for its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    /// The position told (0: none, the room keeps no order).
    pub position: u64,
    /// What the ticket carries for this place ([`Floor::NONE`]: nothing).
    pub floor: Floor,
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
            floor: Floor::NONE,
            reseal: false,
        };
    }
    let (settled, seen) = match place.counted {
        Counted::All => (true, position),
        Counted::Estimate { seen } => (false, seen),
    };
    let fresh = Told {
        position,
        floor: Floor {
            position,
            estimate: !settled,
        },
        reseal: true,
    };
    // Only the same place's floor: a new place (at the tail, or after `keep`) starts afresh.
    let held = held
        .filter(|t| t.sid == place.sid && t.qnum == place.qnum)
        .map(|t| t.told)
        .filter(|f| f.position != 0);
    let Some(held) = held else {
        return fresh;
    };
    // A settled position replaces an estimate's floor, as does an answer that saw more taken
    // ahead (past the slack); an estimate lowers only an estimate's.
    if held.estimate && (settled || seen > held.position.saturating_add(slack(held.position))) {
        return fresh;
    }
    let shown = position.min(held.position);
    let reseal = (held.estimate || settled) && held.position - shown > slack(shown);
    Told {
        position: shown,
        floor: if reseal { fresh.floor } else { held },
        reseal,
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
            counted: Counted::All,
        }
    }

    fn ticket(told: u64) -> Ticket {
        Ticket {
            sid: 7,
            qnum: 1000,
            issued_at: 1,
            accepted_at: 0,
            last_seen: 1,
            told: Floor {
                position: told,
                estimate: false,
            },
        }
    }

    /// An estimate that saw nobody ahead: all it counts is reckoned.
    fn estimate(position: u64) -> Place {
        seeing(position, 0)
    }

    fn seeing(position: u64, seen: u64) -> Place {
        Place {
            counted: Counted::Estimate { seen },
            ..place(position)
        }
    }

    /// A client polling as asked, told each answer's position: what it hears.
    fn heard(estimates: &[u64]) -> Vec<u64> {
        heard_of(&estimates.iter().map(|&p| place(p)).collect::<Vec<_>>())
    }

    fn heard_of(places: &[Place]) -> Vec<u64> {
        let mut held = ticket(0);
        places
            .iter()
            .map(|p| {
                let t = told(Some(&held), p, true);
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
                floor: Floor {
                    position: 50,
                    estimate: false,
                },
                reseal: true
            }
        );
        // Within the slack: the same ticket.
        assert!(!told(Some(&ticket(50)), &place(48), true).reseal);
        // Past it: the lower floor.
        let t = told(Some(&ticket(50)), &place(47), true);
        assert_eq!((t.position, t.floor.position, t.reseal), (47, 47, true));
    }

    #[test]
    fn an_estimates_floor_holds_estimates_only() {
        // Two nodes' estimates for one newcomer: the second is held to the first, and a
        // lower one holds the next.
        assert_eq!(heard_of(&[estimate(132), estimate(136)]), [132, 132]);
        assert_eq!(
            heard_of(&[estimate(87), estimate(73), estimate(80), place(78)]),
            [87, 73, 73, 78]
        );
        // An estimate's floor holds no settled position: told 1 by a node that knew nobody
        // ahead, the client hears 5 when the picture shows five ahead, and is held to that
        // from then on.
        assert_eq!(
            heard_of(&[estimate(1), estimate(4), place(5), place(9), place(4)]),
            [1, 1, 5, 5, 4]
        );
        // Under a settled floor, an estimate is told no more than it, and lowers nothing.
        let t = told(Some(&ticket(30)), &estimate(40), true);
        assert_eq!((t.position, t.reseal), (30, false));
        let t = told(Some(&ticket(30)), &estimate(10), true);
        assert_eq!(
            (t.position, t.floor.position, t.floor.estimate, t.reseal),
            (10, 30, false, false)
        );
        // An estimate's floor is lowered by an estimate that fell past the slack, and says
        // it is an estimate's.
        let held = Ticket {
            told: Floor {
                position: 50,
                estimate: true,
            },
            ..ticket(0)
        };
        let t = told(Some(&held), &estimate(40), true);
        assert_eq!(
            (t.position, t.floor.position, t.floor.estimate, t.reseal),
            (40, 40, true, true)
        );
        // A settled position replaces it, higher or lower.
        let t = told(Some(&held), &place(51), true);
        assert_eq!(
            (t.position, t.floor.position, t.floor.estimate, t.reseal),
            (51, 51, false, true)
        );
    }

    #[test]
    fn an_estimates_floor_holds_no_estimate_that_saw_more_taken_ahead() {
        // Told 47 by a node that reckoned the fleet's line from its own few; another node
        // saw 150 taken ahead: 188 is told, and held from then on. One that saw only the
        // floor's slack more is held to it.
        assert_eq!(
            heard_of(&[estimate(47), seeing(188, 150), seeing(200, 180), place(186)]),
            [47, 188, 188, 186]
        );
        assert_eq!(heard_of(&[estimate(47), seeing(60, 49)]), [47, 47]);
        // Under a settled floor, what an estimate saw changes nothing: a settled position
        // is never too near the head.
        let t = told(Some(&ticket(30)), &seeing(60, 50), true);
        assert_eq!((t.position, t.reseal), (30, false));
    }

    #[test]
    fn only_a_newcomers_first_settled_answer_may_rise_past_the_slack() {
        let wild = [
            estimate(30),
            estimate(300),
            estimate(3),
            place(40),
            estimate(90),
            place(120),
            place(39),
            estimate(500),
            place(2),
        ];
        let h = heard_of(&wild);
        for (k, pair) in h.windows(2).enumerate() {
            let first_settled = k + 1 == 3;
            assert!(
                first_settled || pair[1] <= pair[0] + slack(pair[0]),
                "{h:?}"
            );
        }
        assert_eq!(h, [30, 30, 3, 40, 40, 40, 39, 40, 2]);
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
                floor: Floor {
                    position: 0,
                    estimate: false,
                },
                reseal: false
            }
        );
        assert_eq!(told(Some(&ticket(5)), &place(0), true).position, 0);
    }
}
