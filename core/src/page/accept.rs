//! Content negotiation on raw header bytes: JSON or HTML (`Accept`), English or Japanese
//! (`Accept-Language`), with q-values; nothing panics on any input.

use super::Lang;

/// True when the `Accept` header asks for JSON: it names `application/json` or an
/// `application/*+json` type with a non-zero q, and ranks it above (or, on a tie, before)
/// `text/html` / `application/xhtml+xml`. Browsers list HTML first and reach JSON only
/// through `*/*`, so they get the page; wildcards never select JSON.
pub fn wants_json(accept: Option<&[u8]>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    // Every JSON type names "json": a browser's Accept, which does not, needs no parsing.
    if !contains_ignore_case(accept, b"json") {
        return false;
    }
    // (q in thousandths, index of the range) of the best JSON and the best HTML range.
    let mut json: Option<(u16, usize)> = None;
    let mut html: Option<(u16, usize)> = None;
    for (idx, range) in accept.split(|&b| b == b',').enumerate() {
        let Some((media, q)) = item_and_q(range) else {
            continue;
        };
        if q == 0 {
            continue;
        }
        let slot = if is_json_type(media) {
            &mut json
        } else if media.eq_ignore_ascii_case(b"text/html")
            || media.eq_ignore_ascii_case(b"application/xhtml+xml")
        {
            &mut html
        } else {
            continue;
        };
        if slot.is_none_or(|(best, _)| q > best) {
            *slot = Some((q, idx));
        }
    }
    match (json, html) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((jq, ji)), Some((hq, hi))) => jq > hq || (jq == hq && ji < hi),
    }
}

/// Whether `haystack` contains `needle` (given in lower case), ignoring ASCII case.
fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), haystack).any(|i| {
        haystack
            .get(i + 1..i + 1 + rest.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(rest))
    })
}

fn is_json_type(media: &[u8]) -> bool {
    if media.eq_ignore_ascii_case(b"application/json") {
        return true;
    }
    // application/<something>+json, e.g. application/problem+json, application/vnd.x+json.
    let prefix = b"application/";
    let suffix = b"+json";
    media.len() > prefix.len() + suffix.len()
        && media
            .get(..prefix.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
        && media
            .get(media.len() - suffix.len()..)
            .is_some_and(|s| s.eq_ignore_ascii_case(suffix))
}

/// Picks the page language from `Accept-Language`: the highest-q language this page speaks
/// (ja / ja-JP / ... or en / en-US / ...), the first on a tie. Anything else, junk or no
/// header gives English.
pub fn pick_lang(accept_language: Option<&[u8]>) -> Lang {
    let Some(header) = accept_language else {
        return Lang::En;
    };
    // Only a "ja" tag can choose anything but English.
    if !contains_ignore_case(header, b"ja") {
        return Lang::En;
    }
    let mut best: Option<(u16, Lang)> = None;
    for item in header.split(|&b| b == b',') {
        let Some((tag, q)) = item_and_q(item) else {
            continue;
        };
        if q == 0 || tag.is_empty() || tag.len() > 35 {
            continue;
        }
        if !tag.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
            continue;
        }
        let primary = tag.split(|&b| b == b'-').next().unwrap_or(&[]);
        let lang = if primary.eq_ignore_ascii_case(b"ja") {
            Lang::Ja
        } else if primary.eq_ignore_ascii_case(b"en") {
            Lang::En
        } else {
            continue;
        };
        if best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, lang));
        }
    }
    best.map_or(Lang::En, |(_, l)| l)
}

/// Splits one list item (`value;param=x;q=0.8`) into its trimmed value and its q in
/// thousandths (1000 when absent). None when the q parameter is malformed: such an item is
/// ignored rather than guessed at.
fn item_and_q(item: &[u8]) -> Option<(&[u8], u16)> {
    let mut parts = item.split(|&b| b == b';');
    let value = parts.next().unwrap_or(&[]).trim_ascii();
    let mut q = 1000;
    for p in parts {
        let Some(eq) = p.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (k, v) = p.split_at_checked(eq)?;
        if k.trim_ascii().eq_ignore_ascii_case(b"q") {
            q = parse_q(v.get(1..)?.trim_ascii())?;
        }
    }
    Some((value, q))
}

/// Parses a quality value (`0`, `0.5`, `1.000`, at most three decimals) into thousandths.
pub(super) fn parse_q(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (v.get(..dot)?, v.get(dot + 1..)?),
        None => (v, &[][..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let whole = match int {
        [b'0'] => 0u16,
        [b'1'] => 1,
        _ => return None,
    };
    let mut thousandths = 0u16;
    for i in 0..3 {
        let d = frac.get(i).map_or(0, |b| u16::from(b - b'0'));
        thousandths = thousandths * 10 + d;
    }
    let q = whole * 1000 + thousandths;
    (q <= 1000).then_some(q)
}

// ---------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------
