//! The ticket cookie: read from the request's `Cookie` headers, written with `Set-Cookie`.

use ngx::http::Request;
use smart_limit_core::ticket::{self, Ticket, MAX_TICKET_LEN};
use smart_limit_core::util::out::FixedBuf;

use crate::request::{HeaderValue, RequestExt};
use crate::store::Zone;

/// Cookie values of a room's name tried per request: a client may carry a stale cookie for
/// another path beside the current one, but not dozens (each try is a decryption).
const MAX_TRIES: usize = 4;

/// Room for a `Set-Cookie` value: name (at most 12 + 64 bytes), ticket, attributes.
const SET_COOKIE_MAX: usize = MAX_TICKET_LEN + 256;

/// The first `smart_limit_<room>` cookie value that opens as a ticket of this room. Every
/// value of that name, in every `Cookie` header, is tried in order (at most [`MAX_TRIES`]),
/// so junk or a foreign value placed before the real ticket does not hide it.
pub fn read_ticket(r: &Request, zone: &Zone) -> Option<Ticket> {
    r.header_values("cookie")
        .flat_map(|h| zone.cookie.values(h))
        .take(MAX_TRIES)
        .find_map(|value| zone.open_ticket(value))
}

/// Gives the client a new ticket (`Set-Cookie`, `Secure` on TLS connections).
pub fn set_ticket(r: &mut Request, zone: &Zone, t: &Ticket) {
    if let Some(sealed) = zone.seal_ticket(t) {
        add_set_cookie(r, zone, sealed.as_str(), None);
    }
}

/// [S29] Gives the client its page's pass (`Max-Age` = `page_pass=`: the browser forgets it
/// when it ends).
pub fn set_page_pass(r: &mut Request, zone: &Zone, now: u64) {
    if let Some(sealed) = zone.seal_page_pass(now) {
        let secs = zone.params.page_pass_ms.div_ceil(1000);
        set_cookie(r, zone.page_cookie.as_str(), sealed.as_str(), Some(secs));
    }
}

/// [S29] The session of the request's valid page pass of the room, if it carries one (at
/// most [`MAX_TRIES`] values tried).
pub fn page_pass(r: &Request, zone: &Zone, now: u64) -> Option<u64> {
    r.header_values("cookie")
        .flat_map(|h| zone.page_cookie.values(h))
        .take(MAX_TRIES)
        .find_map(|value| zone.page_pass(value, now))
}

/// Deletes the ticket cookie (`Max-Age=0`).
pub fn delete_ticket(r: &mut Request, zone: &Zone) {
    add_set_cookie(r, zone, "", Some(0));
}

/// Deletes the room's proof-of-work cookie (`challenge=pow`: its proof is spent).
pub fn delete_proof(r: &mut Request, zone: &Zone) {
    set_cookie(r, zone.proof_cookie.as_str(), "", Some(0));
}

fn add_set_cookie(r: &mut Request, zone: &Zone, value: &str, max_age: Option<u64>) {
    set_cookie(r, zone.cookie.as_str(), value, max_age);
}

fn set_cookie(r: &mut Request, name: &str, value: &str, max_age: Option<u64>) {
    let mut header: FixedBuf<SET_COOKIE_MAX> = FixedBuf::default();
    let secure = r.is_tls();
    ticket::write_set_cookie(&mut header, name, value, secure, max_age);
    if let Some(text) = header.bytes().and_then(|b| core::str::from_utf8(b).ok()) {
        r.add_static_header("Set-Cookie", HeaderValue::Copied(text));
    }
}
