//! The ticket cookie: read from the request's `Cookie` headers, written with `Set-Cookie`.

use ngx::http::Request;
use smart_limit_core::ticket::{self, Ticket};

use crate::request::RequestExt;
use crate::store::Zone;

/// Cookie values of a room's name tried per request: a client may carry a stale cookie for
/// another path beside the current one, but not dozens (each try is a decryption).
const MAX_TRIES: usize = 4;

/// The first `smart_limit_<room>` cookie value that opens as a ticket of this room. Every
/// value of that name, in every `Cookie` header, is tried in order (at most [`MAX_TRIES`]),
/// so junk or a foreign value placed before the real ticket does not hide it.
pub fn read_ticket(r: &Request, zone: &Zone) -> Option<Ticket> {
    r.header_values("cookie")
        .flat_map(|h| ticket::cookie_values(h, zone.cookie.as_bytes()))
        .take(MAX_TRIES)
        .find_map(|value| zone.open_ticket(value))
}

/// Gives the client a new ticket (`Set-Cookie`, `Secure` on TLS connections).
pub fn set_ticket(r: &mut Request, zone: &Zone, t: &Ticket) {
    let Some(sealed) = zone.seal_ticket(t) else {
        return;
    };
    let header = ticket::set_cookie_header(&zone.cookie, &sealed, r.is_tls(), None);
    r.add_header("Set-Cookie", &header);
}

/// Deletes the ticket cookie (`Max-Age=0`).
pub fn delete_ticket(r: &mut Request, zone: &Zone) {
    let header = ticket::set_cookie_header(&zone.cookie, "", r.is_tls(), Some(0));
    r.add_header("Set-Cookie", &header);
}
