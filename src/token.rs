//! [S28] Tokens at the request: the admission token a request's admission yields, a bearer
//! admission token standing for an admitted ticket, and the enqueue token an invite-only
//! line asks for. The signatures and claims are `smart_limit_core::token`'s.

use ngx::http::Request;
use smart_limit_core::room::rules::{self, TicketState};
use smart_limit_core::ticket::{Floor, Ticket};
use smart_limit_core::token::{TokenCache, TokenError, DEFAULT_BEARER, MAX_TOKEN_LEN};

use crate::clock::now_ms;
use crate::ctx::RequestCtx;
use crate::request::RequestExt;
use crate::store::Zone;

/// The admission token of this request's admission (`$smart_limit_token`, the poll answer's
/// `"token"`): signed once per request and kept, so every reader sees the same token. None
/// when the request was not let in, or its room has no `smart_limit_token_key`.
pub fn of_request(r: &mut Request) -> Option<String> {
    let ctx = RequestCtx::find(r)?;
    if let Some(t) = &ctx.token {
        return Some(t.clone());
    }
    let d = ctx.decided?;
    let (ticket, tokens) = (d.admitted?, d.zone.tokens.as_ref()?);
    let now = now_ms();
    let basis = (
        ticket.sid,
        ticket.accepted_at,
        ticket.last_seen.max(ticket.accepted_at).min(now),
        rules::admission_ends(&ticket, d.zone.admission),
    );
    let room = &d.zone.params.name;
    let token = with_cache(d.zone, |c| c.issue(&tokens.issuer, room, basis))?.ok()?;
    ctx.token = Some(token.clone());
    Some(token)
}

/// A bearer admission token of `zone` on this request (`Authorization: Bearer`, or the
/// header `bearer=` names), as the admitted ticket it stands for: only a token that verifies
/// and whose admission the room's rules still hold. Anything else is no ticket at all.
pub fn bearer_ticket(r: &Request, zone: &Zone, now: u64) -> Option<Ticket> {
    let tokens = zone.tokens.as_ref()?;
    let token = bearer(r, &tokens.bearer)?;
    let room = &zone.params.name;
    let a = with_cache(zone, |c| c.verify(&tokens.issuer, room, token, now))?.ok()?;
    let t = Ticket {
        sid: a.sid,
        qnum: 0,
        issued_at: a.admitted_at,
        accepted_at: a.admitted_at,
        last_seen: a.issued_at,
        told: Floor::NONE,
    };
    (rules::ticket_state(&t, zone.admission, now) == TicketState::Admitted).then_some(t)
}

/// Slots of each side of a worker's [`TokenCache`], per zone: about 1,024 apps calling at once
/// keep their tokens verified.
const TOKEN_CACHE_SLOTS: usize = 1024;

fn with_cache<T>(zone: &Zone, f: impl FnOnce(&mut TokenCache) -> T) -> Option<T> {
    let mut cache = zone.token_cache.try_borrow_mut().ok()?;
    Some(f(
        cache.get_or_insert_with(|| TokenCache::new(TOKEN_CACHE_SLOTS))
    ))
}

/// Why an invite-only line gives no place.
pub enum NoInvite {
    /// No enqueue token on the request.
    Missing,
    /// One that does not verify.
    Refused(TokenError),
}

/// `invite=`: the session an enqueue token on this request keeps a place for (one per token
/// id, the same on every node), from `?invite=TOKEN` or the bearer header.
pub fn invite_sid(r: &Request, zone: &Zone, now: u64) -> Result<u64, NoInvite> {
    let Some(key) = zone.invite.as_ref() else {
        return Err(NoInvite::Missing);
    };
    let bearer_header = zone.tokens.as_ref().map_or(DEFAULT_BEARER, |t| &t.bearer);
    let token = query_arg(r, b"invite")
        .or_else(|| bearer(r, bearer_header))
        .ok_or(NoInvite::Missing)?;
    let invite = key
        .verify(&zone.params.name, token, now)
        .map_err(NoInvite::Refused)?;
    let keys = zone.keys.as_ref().ok_or(NoInvite::Missing)?;
    Ok(keys.invite_sid(&zone.params.name, invite.id.as_bytes()))
}

/// The token of `<header>: Bearer <token>` (scheme case-insensitive, RFC 7235), bounded.
fn bearer<'r>(r: &'r Request, header: &'r str) -> Option<&'r [u8]> {
    r.header_values(header).find_map(|v| {
        let (scheme, rest) = v.split_at_checked(7)?;
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return None;
        }
        let token = rest.trim_ascii();
        (!token.is_empty() && token.len() <= MAX_TOKEN_LEN).then_some(token)
    })
}

/// The raw value of the query argument `name` (a JWS needs no percent-decoding: its
/// characters are base64url and dots).
fn query_arg<'r>(r: &'r Request, name: &[u8]) -> Option<&'r [u8]> {
    let args = r.as_ref().args;
    if args.len == 0 || args.data.is_null() {
        return None;
    }
    // SAFETY: the request's arguments, live in its pool for as long as the request.
    let args = unsafe { core::slice::from_raw_parts(args.data, args.len) };
    args.split(|b| *b == b'&').find_map(|pair| {
        let value = pair.strip_prefix(name)?.strip_prefix(b"=")?;
        (!value.is_empty() && value.len() <= MAX_TOKEN_LEN).then_some(value)
    })
}
