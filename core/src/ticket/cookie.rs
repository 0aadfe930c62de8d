//! The `Cookie` header walker (every value of one cookie name, in order, without allocating)
//! and the `Set-Cookie` header written for a ticket.

use crate::util::out::Out;

/// Finds cookie `name` in one `Cookie:` header value (`a=1; b=2`). Tolerant: spaces and
/// tabs around names and values, empty parts, parts without `=` and non-UTF-8 bytes are
/// skipped or trimmed. Names compare exactly (cookie names are case-sensitive). A value in
/// double quotes is returned without them. The first match wins; [`cookie_values`] gives
/// every one.
pub fn cookie_value<'a>(cookie_header: &'a [u8], name: &'a [u8]) -> Option<&'a [u8]> {
    cookie_values(cookie_header, name).next()
}

/// Every value of cookie `name` in one `Cookie:` header value, in order. A client may send
/// the same name twice (cookies set for different paths or domains, or a forged one placed
/// first): the caller tries each. (A [`CookieName`] made once does the same without
/// preparing the search each time.)
pub fn cookie_values<'a>(
    cookie_header: &'a [u8],
    name: &'a [u8],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let finder = memchr::memmem::Finder::new(name);
    values_found(cookie_header, name, finder)
}

/// A cookie name with its substring search prepared (e.g. once per zone).
pub struct CookieName {
    name: Vec<u8>,
    // Boxed: the searcher holds SIMD vectors (16- or 32-byte aligned), and a CookieName lives
    // in structures that nginx's pools align to 8 bytes only.
    finder: Box<memchr::memmem::Finder<'static>>,
}

impl CookieName {
    pub fn new(name: &str) -> CookieName {
        CookieName {
            name: name.as_bytes().to_vec(),
            finder: Box::new(memchr::memmem::Finder::new(name.as_bytes()).into_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.name).unwrap_or_default()
    }

    /// [`cookie_values`] of this name.
    pub fn values<'a>(&'a self, cookie_header: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        values_found(
            cookie_header,
            &self.name,
            memchr::memmem::Finder::as_ref(&self.finder),
        )
    }
}

/// Finds the name with a substring search (the header is mostly other cookies) and checks
/// that it starts a `;`-separated part.
fn values_found<'a>(
    cookie_header: &'a [u8],
    name: &'a [u8],
    finder: memchr::memmem::Finder<'a>,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut from = 0usize;
    core::iter::from_fn(move || {
        if name.is_empty() {
            return None;
        }
        loop {
            let rest = cookie_header.get(from..)?;
            let at = from + finder.find(rest)?;
            from = at + 1;
            // The name must start its part: only spaces or tabs since the last `;`.
            let before = cookie_header.get(..at).unwrap_or_default();
            let part_start = memchr::memrchr(b';', before).map_or(0, |i| i + 1);
            if !trim_start_ows(before.get(part_start..).unwrap_or_default()).is_empty() {
                continue;
            }
            let after = cookie_header.get(at + name.len()..).unwrap_or_default();
            let Some(v) = trim_start_ows(after).strip_prefix(b"=") else {
                continue;
            };
            let v = match memchr::memchr(b';', v) {
                Some(end) => v.get(..end).unwrap_or_default(),
                None => v,
            };
            return Some(match trim_ows(v) {
                [b'"', inner @ .., b'"'] => inner,
                other => other,
            });
        }
    })
}

fn trim_start_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    s
}

/// Trims spaces and tabs (HTTP optional whitespace) from both ends.
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The `Set-Cookie` header value for a ticket: `name=value; Path=/; HttpOnly; SameSite=Lax`,
/// plus `; Secure` when the site is served over HTTPS and `; Max-Age=N` when given (without
/// it the cookie lasts for the browser session). HttpOnly because no script needs the
/// ticket; SameSite=Lax so it still comes along on top-level navigations from other sites.
pub fn set_cookie_header(
    name: &str,
    value: &str,
    secure: bool,
    max_age_secs: Option<u64>,
) -> String {
    let mut out = Vec::with_capacity(name.len() + value.len() + 64);
    write_set_cookie(&mut out, name, value, secure, max_age_secs);
    String::from_utf8(out).unwrap_or_default()
}

/// [`set_cookie_header`] into an [`Out`] (no allocation).
pub fn write_set_cookie(
    out: &mut impl Out,
    name: &str,
    value: &str,
    secure: bool,
    max_age_secs: Option<u64>,
) {
    out.put(name.as_bytes());
    out.put(b"=");
    out.put(value.as_bytes());
    out.put(b"; Path=/; HttpOnly; SameSite=Lax");
    if secure {
        out.put(b"; Secure");
    }
    if let Some(n) = max_age_secs {
        out.put(b"; Max-Age=");
        out.put_u64(n);
    }
}
