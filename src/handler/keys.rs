//! A request's keys in the room: the place its ticket holds, when to write the ticket again,
//! its user key's session (`one_place_per=`), its flood key, and its lottery draw.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The place a waiting ticket holds (its queue number) and when it took it. A synced room's
/// ticket carries the moment as its queue number and keeps it while it is seen (see
/// [`fleet::place_arrival`]); a place gone, or never taken (the ticket of the cookie check),
/// is taken now: number 0, arrival now. The other stores keep places themselves.
///
/// While an event's pre-queue is open (`shuffle=on`), a synced room's new place dates from a
/// moment drawn in the pre-queue ([`fleet::lottery_arrival`]): the start's lottery.
pub(super) fn place_of(zone: &Zone, t: &Ticket, now: u64) -> (u64, u64) {
    if zone.fleet.is_none() {
        return (t.qnum, now);
    }
    let ev = zone.event_now(now);
    let lottery = ev.as_ref().and_then(|(e, _)| e.lottery_ms());
    let presence = zone.limits.presence_ms;
    let ticket = (t.qnum, t.issued_at, t.last_seen);
    let skew = rules::MAX_CLOCK_SKEW_MS;
    if let Some(arrival) = fleet::place_arrival(ticket, now, presence, skew, lottery.clone()) {
        return (t.qnum, arrival);
    }
    match (ev, lottery) {
        (Some((_, e)), Some(moments)) if !e.started => {
            (0, fleet::lottery_arrival(moments).unwrap_or(now))
        }
        _ => (0, now),
    }
}

/// Whether a waiting ticket is written again: its place changed, or (a synced room) its
/// `last_seen` is a quarter of a presence old ([`fleet::ticket_renew_ms`]), so every node can
/// tell it is still present. (Its stamp is then of an earlier epoch of the line's counts,
/// which [`tally_waiting`] moves it from.)
pub(super) fn renew_waiting(zone: &Zone, held: Option<Ticket>, place: &Place, now: u64) -> bool {
    let Some(t) = held else { return true };
    if t.qnum != place.qnum || t.sid != place.sid {
        return true;
    }
    zone.fleet.is_some()
        && now.saturating_sub(t.last_seen) >= fleet::ticket_renew_ms(zone.limits.presence_ms)
}

/// A synced room's waiting ticket written again: counted in this epoch (and taken off the
/// epoch of its old stamp, when it keeps its place).
pub(super) fn tally_waiting(zone: &Zone, held: Option<Ticket>, place: &Place, now: u64) {
    if zone.fleet.is_none() {
        return;
    }
    let stamp = held
        .filter(|t| t.qnum != 0 && t.qnum == place.qnum && t.sid == place.sid)
        .map(|t| t.last_seen);
    zone.tally_seen(place.qnum, stamp, now);
}

/// `one_place_per=`: the session id of this request's user key (None: no such setting, or an
/// empty value).
pub(super) fn user_sid(r: &Request, zone: &Zone) -> Option<u64> {
    // SAFETY: null, or a complex value compiled into the configuration's pool.
    let cv = unsafe { zone.one_place_per.get().as_ref() }?;
    let value = r.get_complex_value(cv)?;
    let key = value.as_bytes();
    if key.is_empty() {
        return None;
    }
    Some(zone.keys.as_ref()?.user_sid(&zone.params.name, key))
}

/// Flood control's key for this request: `flood_key=` (a value with variables), else the
/// client's address (an IPv6 address by its /64: one subscriber's network), hashed.
pub(super) fn flood_key(r: &Request, zone: &Zone) -> u64 {
    // SAFETY: null, or a complex value compiled into the configuration's pool.
    let key = match unsafe { zone.flood_key.get().as_ref() } {
        Some(cv) => r
            .get_complex_value(cv)
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default(),
        None => r.client_address().to_vec(),
    };
    flood_hash(zone.flood_seed.get(), &key)
}

/// A lottery number for this poll (only the `random` mode uses it); no secrecy needed.
pub(super) fn draw(now: u64, sid: u64) -> u32 {
    let x = (now ^ sid.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 32) as u32
}
