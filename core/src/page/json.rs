//! The JSON answer for programs: status, position, queue length, estimated wait, refresh.

use super::WaitView;
use crate::util::out::{put_json_str, Out};

fn put_json_opt(out: &mut impl Out, n: Option<u64>) {
    match n {
        Some(n) => out.put_u64(n),
        None => out.put(b"null"),
    }
}

/// The JSON answer: `{"status":"waiting","room":..,"position":N|null,"eta_seconds":N|null,
/// "eta_known":bool,"refresh_seconds":N,"queue_length":N,"updated_at":N}`, and
/// `"starts_at":N` (unix seconds) while an event's pre-queue is open, and
/// `"challenge":{"alg":"sha256","seed":"..","bits":N}` with `"status":"challenge"`, and
/// `"token":".."` (an admission token, [S28]) with `"status":"admitted"`, and `"resumed":true`
/// in the first answer to a client back at its kept place after an absence ([S27]).
pub fn write_json(v: &WaitView, out: &mut impl Out) {
    out.put(b"{\"status\":\"");
    out.put(v.status.as_str().as_bytes());
    out.put(b"\",\"room\":");
    put_json_str(out, v.room);
    out.put(b",\"position\":");
    put_json_opt(out, v.position);
    out.put(b",\"eta_seconds\":");
    put_json_opt(out, v.eta_secs);
    out.put(if v.eta_secs.is_some() {
        b",\"eta_known\":true,\"refresh_seconds\":"
    } else {
        b",\"eta_known\":false,\"refresh_seconds\":"
    });
    out.put_u64(v.refresh_secs);
    out.put(b",\"queue_length\":");
    out.put_u64(v.queue_len);
    out.put(b",\"updated_at\":");
    out.put_u64(v.updated_at);
    if let Some(t) = v.starts_at {
        out.put(b",\"starts_at\":");
        out.put_u64(t);
    }
    if let Some((seed, bits)) = &v.challenge {
        // (The seed is base64url: nothing in it needs escaping.)
        out.put(b",\"challenge\":{\"alg\":\"sha256\",\"seed\":\"");
        out.put(seed);
        out.put(b"\",\"bits\":");
        out.put_u64(u64::from(*bits));
        out.put(b"}");
    }
    if v.resumed {
        out.put(b",\"resumed\":true");
    }
    if let Some(token) = v.token {
        // (A compact JWS is base64url and dots: nothing in it needs escaping.)
        out.put(b",\"token\":\"");
        out.put(token.as_bytes());
        out.put(b"\"");
    }
    out.put(b"}");
}

/// The most bytes [`write_json`] writes for `v`.
pub fn json_max_len(v: &WaitView) -> usize {
    256usize
        .saturating_add(v.room.len().saturating_mul(6))
        .saturating_add(v.token.map_or(0, |t| t.len() + 12))
}

/// [`write_json`] into a new string.
pub fn render_json(v: &WaitView) -> String {
    let mut out = Vec::with_capacity(192);
    write_json(v, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------------------
