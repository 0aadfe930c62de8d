//! The room's visit for a request that is not admitted: its waiting ticket's place, a place
//! to take, or the first contact's cookie check.

use super::keys::user_sid;
#[allow(clippy::wildcard_imports)]
use super::*;
use crate::token::{self, NoInvite};

/// The visit this request makes, or the answer it gets without one (a proof of work to
/// solve, the cookie check). Writes the waiting ticket it holds (as its user key's session
/// with `one_place_per=`) and a proof it spends into `turn`.
pub(super) fn visit_of(
    r: &mut Request,
    turn: &mut Turn,
    waiting: Option<Ticket>,
    closed_to_admitted: Option<u64>,
) -> Result<Visit, ngx_int_t> {
    let (zone, now) = (turn.zone, turn.now);
    // `one_place_per=`: a client with a user key waits as that key's session, whichever
    // ticket it holds (a ticket of another key, or of none, takes the key's place).
    let user = user_sid(r, zone);
    turn.held = waiting.map(|t| match user {
        Some(sid) if sid != t.sid => Ticket { sid, qnum: 0, ..t },
        _ => t,
    });
    match (turn.held, closed_to_admitted) {
        // A waiting ticket: its place (or, for a ticket from the first contact, a place to
        // take, paid from its address's flood budget, and with `challenge=pow` a proof).
        (Some(t), _) => {
            if !turn.dry {
                match challenge::gate(r, zone, &t, now) {
                    Gate::Pass { spent: Some(proof) } => {
                        cookie::delete_proof(r, zone);
                        turn.spent = Some(proof);
                    }
                    Gate::Pass { spent: None } => {}
                    Gate::Challenge(c) => return Err(turn.deliver(r, challenged(turn, &t, c))),
                }
            }
            let (qnum, arrival) = zone.place_of(&t, now);
            let flood = (t.qnum == 0).then(|| flood_key(r, zone));
            Ok(visit(t.sid, qnum, draw(now, t.sid), flood, arrival))
        }
        (None, Some(sid)) => Ok(visit(sid, 0, draw(now, 0), None, now)),
        // First contact (no ticket, or a stale, forged or foreign one): the client gets a
        // ticket and comes back with it before the room gives it anything ([S15]), unless the
        // room is closed (refused) or lets everyone in.
        // An invite-only line: the enqueue token's session, or the "invite only" answer.
        (None, None) => {
            let sid = match zone.invite {
                Some(_) => match token::invite_sid(r, zone, now) {
                    Ok(sid) => sid,
                    Err(why) => return Err(turn.deliver(r, invite_only(r, turn, why))),
                },
                None => match user.map_or_else(ticket::random_sid, Ok) {
                    Ok(sid) => sid,
                    Err(_) => return Err(INTERNAL_ERROR),
                },
            };
            match zone.arrival(now) {
                Mode::Reject | Mode::Passthrough => Ok(visit(sid, 0, draw(now, 0), None, now)),
                // A dry run shows no cookie check: the room decides at once, as it would when
                // the client came back with its ticket (and so counts the same).
                _ if turn.dry => {
                    let flood = Some(flood_key(r, zone));
                    Ok(visit(sid, 0, draw(now, 0), flood, now))
                }
                _ => Err(turn.deliver(r, arrived(turn, sid))),
            }
        }
    }
}

/// [S28] No valid enqueue token: no place, and the "invite only" answer (a broken or forged
/// token is logged at `info`, like a refused request of `limit_req`'s).
fn invite_only(r: &Request, turn: &Turn, why: NoInvite) -> Fate {
    if let NoInvite::Refused(e) = why {
        ngx_log_error!(
            NGX_LOG_INFO,
            r.log(),
            "smart_limit zone \"{}\": enqueue token refused: {}",
            turn.room(),
            e
        );
    }
    Fate::of(Outcome::InviteOnly, Reply::InviteOnly)
}

fn visit(sid: u64, qnum: u64, draw: u32, flood_key: Option<u64>, arrival: u64) -> Visit {
    Visit {
        sid,
        qnum,
        draw,
        flood_key,
        arrival,
        page: false,
    }
}
