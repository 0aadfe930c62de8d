//! A synced node's verdict as the room's: what a visit comes to (decided, or a wait for the
//! pool's answer), counted and told as the room counts and tells any.

use smart_limit_core::fleet::FleetVerdict;
use smart_limit_core::room::{Counted, Place, Refusal, Room, Verdict, Visit};

use super::{Draw, Step, Visited};

/// What a visit comes to: decided now, or, when it is the client's turn, the node's share is
/// used up and this visit sent the draw, a wait for the pool's answer.
pub(super) fn visited(
    room: &mut Room,
    v: &Visit,
    verdict: FleetVerdict,
    draw: Option<Draw>,
    now: u64,
) -> Visited {
    match (verdict, draw) {
        (
            FleetVerdict::Wait {
                eta_secs: Some(0), ..
            },
            Some(draw),
        ) => Visited::Drawing(draw),
        (verdict, draw) => Visited::Decided(step(room, v, verdict, now), draw),
    }
}

/// The node's verdict as the room's: counted, and remembered as the zone remembers any.
pub(super) fn step(room: &mut Room, v: &Visit, verdict: FleetVerdict, now: u64) -> Step {
    match verdict {
        FleetVerdict::Admit => Step::Done(admitted(room, v.sid, now)),
        FleetVerdict::Wait {
            position,
            queue_len,
            eta_secs,
            counted,
        } => Step::Done(waiting(room, v, position, queue_len, eta_secs, counted)),
        FleetVerdict::LineFull { queue_len } => {
            room.counters_mut().rejected += 1;
            Step::Done(Verdict::Refuse(Refusal::LineFull { queue_len }))
        }
        // (NextPicture never comes here: `visited` takes it.)
        FleetVerdict::Unknown | FleetVerdict::NextPicture => Step::Unknown,
    }
}

/// Admitted here: known to this node's room as an active session (for its request rate and
/// metrics) and counted.
fn admitted(room: &mut Room, sid: u64, now: u64) -> Verdict {
    room.touch(sid, now);
    room.counters_mut().admitted += 1;
    Verdict::Admit { sid }
}

/// Waiting in the fleet's line, which is ordered by arrival: the ticket's queue number is the
/// moment the client took its place (see [`smart_limit_core::fleet::place_arrival`]).
/// `counted`: what the position counts of the places taken ahead (`FleetNode::settled`; a
/// node alone tells its own line only, an estimate).
pub(super) fn waiting(
    room: &mut Room,
    v: &Visit,
    position: u64,
    queue_len: u64,
    eta_secs: Option<u64>,
    counted: Counted,
) -> Verdict {
    let c = room.counters_mut();
    c.waited += 1;
    if v.qnum == 0 {
        c.queued += 1;
    }
    Verdict::Wait(Place {
        sid: v.sid,
        qnum: v.arrival.max(1),
        position,
        queue_len,
        eta_secs,
        // (The ticket tells whether the place was resumed: `Zone::resumes`.)
        resumed: false,
        counted,
    })
}
