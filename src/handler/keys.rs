//! A request's keys in the room: its user key's session (`one_place_per=`), its flood key,
//! and its lottery draw.

#[allow(clippy::wildcard_imports)]
use super::*;

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
