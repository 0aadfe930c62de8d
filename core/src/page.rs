//! The waiting answer's bodies (SPEC S7, §3): a self-refreshing HTML page for people and a
//! JSON document for programs, plus the small content-negotiation helpers that pick between
//! them (`Accept`) and between English and Japanese (`Accept-Language`).
//!
//! The default page has no external assets and no JavaScript (a waiting room must work when
//! the origin is the thing that is overloaded, and on any browser); it refreshes itself
//! with `<meta http-equiv="refresh">`. A branded page can replace it through a template with
//! `{{placeholder}}`s; every substituted value is HTML-escaped.
//!
//! Header parsing works on raw bytes from the client: nothing here panics on any input.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use crate::parse::ParseError;
use serde::Serialize;

/// Where the visitor stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewStatus {
    /// In the queue.
    Waiting,
    /// Let in (the page then just reloads into the site).
    Admitted,
    /// The room admits nobody right now (e.g. store down with `on_error=closed`).
    Closed,
}

impl ViewStatus {
    /// The wire name: "waiting", "admitted" or "closed".
    pub fn as_str(self) -> &'static str {
        match self {
            ViewStatus::Waiting => "waiting",
            ViewStatus::Admitted => "admitted",
            ViewStatus::Closed => "closed",
        }
    }
}

/// Everything the waiting answer shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitView<'a> {
    /// Room name.
    pub room: &'a str,
    /// Status of this visitor.
    pub status: ViewStatus,
    /// 1-based position in the queue, None if unknown.
    pub position: Option<u64>,
    /// Number of sessions waiting in the room.
    pub queue_len: u64,
    /// Estimated wait in seconds, None if unknown.
    pub eta_secs: Option<u64>,
    /// Seconds until the page refreshes (and the `Retry-After` value).
    pub refresh_secs: u64,
    /// When this view was computed, unix seconds.
    pub updated_at: u64,
}

/// Language of the HTML page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// English (the default).
    En,
    /// Japanese.
    Ja,
}

// ---------------------------------------------------------------------------------------
// Content negotiation
// ---------------------------------------------------------------------------------------

/// True when the `Accept` header asks for JSON: it names `application/json` or an
/// `application/*+json` type with a non-zero q, and ranks it above (or, on a tie, before)
/// `text/html` / `application/xhtml+xml`. Browsers list HTML first and reach JSON only
/// through `*/*`, so they get the page; wildcards never select JSON.
pub fn wants_json(accept: Option<&[u8]>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
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
fn parse_q(v: &[u8]) -> Option<u16> {
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
// JSON
// ---------------------------------------------------------------------------------------

#[derive(Serialize)]
struct JsonView<'a> {
    status: ViewStatus,
    room: &'a str,
    position: Option<u64>,
    eta_seconds: Option<u64>,
    eta_known: bool,
    refresh_seconds: u64,
    queue_length: u64,
    updated_at: u64,
}

/// The JSON answer: `{"status":"waiting","room":..,"position":N|null,"eta_seconds":N|null,
/// "eta_known":bool,"refresh_seconds":N,"queue_length":N,"updated_at":N}`.
pub fn render_json(v: &WaitView) -> String {
    let j = JsonView {
        status: v.status,
        room: v.room,
        position: v.position,
        eta_seconds: v.eta_secs,
        eta_known: v.eta_secs.is_some(),
        refresh_seconds: v.refresh_secs,
        queue_length: v.queue_len,
        updated_at: v.updated_at,
    };
    // Serialising this struct cannot fail (no maps, no custom serializers); the fallback
    // only exists so that no code path can panic.
    serde_json::to_string(&j)
        .unwrap_or_else(|_| format!("{{\"status\":\"{}\"}}", v.status.as_str()))
}

// ---------------------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------------------

/// The human estimate of the wait: "about 3 minutes" / 「約3分」, "calculating…" / 「計算中」
/// when unknown.
pub fn eta_text(eta_secs: Option<u64>, lang: Lang) -> String {
    let Some(secs) = eta_secs else {
        return match lang {
            Lang::En => "calculating…".to_string(),
            Lang::Ja => "計算中".to_string(),
        };
    };
    let minutes = secs.saturating_add(30) / 60;
    let hours = minutes.saturating_add(30) / 60;
    match lang {
        Lang::En => match secs {
            0 => "any moment now".to_string(),
            1 => "about 1 second".to_string(),
            2..=59 => format!("about {secs} seconds"),
            60..=89 => "about 1 minute".to_string(),
            _ if minutes < 120 => format!("about {minutes} minutes"),
            _ => format!("about {hours} hours"),
        },
        Lang::Ja => match secs {
            0 => "まもなく".to_string(),
            1..=59 => format!("約{secs}秒"),
            _ if minutes < 120 => format!("約{minutes}分"),
            _ => format!("約{hours}時間"),
        },
    }
}

/// Escapes text for HTML element content and quoted attribute values.
fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

/// UTC calendar parts of a unix time, for the "updated" line. Clamped to year 9999 so the
/// arithmetic stays small whatever the input.
fn utc_parts(unix_secs: u64) -> (u64, u64, u64, u64, u64, u64) {
    let secs = unix_secs.min(253_402_300_799);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), shifted so the era
    // starts on 0000-03-01; all values stay non-negative.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Texts of the default page in one language.
struct Texts {
    lang: &'static str,
    waiting_title: &'static str,
    waiting_lead: &'static str,
    position_label: &'static str,
    position_unknown: &'static str,
    position_suffix: &'static str,
    eta_label: &'static str,
    queue_label: &'static str,
    queue_suffix: &'static str,
    closed_title: &'static str,
    closed_lead: &'static str,
    admitted_title: &'static str,
    admitted_lead: &'static str,
    updated: &'static str,
}

const EN: Texts = Texts {
    lang: "en",
    waiting_title: "The site is busy right now",
    waiting_lead: "To keep the site working for everyone, visitors are admitted in order of \
                   arrival. You will be taken to the site automatically when it is your turn.",
    position_label: "Your place in line",
    position_unknown: "Checking…",
    position_suffix: "",
    eta_label: "Estimated wait",
    queue_label: "People in line",
    queue_suffix: "",
    closed_title: "Temporarily closed",
    closed_lead:
        "The site is not letting visitors in right now. Please try again in a little while.",
    admitted_title: "It's your turn",
    admitted_lead: "Taking you to the site now. If nothing happens, reload this page.",
    updated: "Updated",
};

const JA: Texts = Texts {
    lang: "ja",
    waiting_title: "ただいま混雑しています",
    waiting_lead: "アクセスが集中しているため、到着順にご案内しています。\
                   順番が来ると自動的にサイトへ移動します。",
    position_label: "あなたの順番",
    position_unknown: "確認中",
    position_suffix: "番目",
    eta_label: "待ち時間の目安",
    queue_label: "お待ちの人数",
    queue_suffix: "人",
    closed_title: "ただいま受付を一時停止しています",
    closed_lead: "ご不便をおかけして申し訳ありません。しばらくしてから、もう一度アクセスしてください。",
    admitted_title: "お待たせしました",
    admitted_lead: "順番が来ました。まもなくサイトへ移動します。表示が変わらない場合は、ページを再読み込みしてください。",
    updated: "最終更新",
};

fn texts(lang: Lang) -> &'static Texts {
    match lang {
        Lang::En => &EN,
        Lang::Ja => &JA,
    }
}

fn refresh_note(lang: Lang, status: ViewStatus, n: u64) -> String {
    match (lang, status) {
        (Lang::En, ViewStatus::Waiting) => format!(
            "This page refreshes by itself every {n} seconds. Keep this tab open; \
             reloading it yourself will not lose your place."
        ),
        (Lang::En, ViewStatus::Closed) => {
            format!("This page checks again by itself every {n} seconds.")
        }
        (Lang::En, ViewStatus::Admitted) => {
            format!("This page reloads by itself in {n} seconds.")
        }
        (Lang::Ja, ViewStatus::Waiting) => format!(
            "このページは{n}秒ごとに自動で更新されます。タブを閉じずに、このままお待ちください\
             （再読み込みしても順番は変わりません）。"
        ),
        (Lang::Ja, ViewStatus::Closed) => {
            format!("このページは{n}秒ごとに自動で再確認します。")
        }
        (Lang::Ja, ViewStatus::Admitted) => {
            format!("このページは{n}秒後に自動で再読み込みされます。")
        }
    }
}

/// Inline style sheet of the default page: responsive card, large position, dark mode, and
/// a small pulse that stops for people who prefer reduced motion.
const STYLE: &str = "\
:root{color-scheme:light dark;--bg:#f4f6f9;--card:#fff;--fg:#1b2230;--muted:#586275;--accent:#1f56d6;--line:#dfe3ea}
@media (prefers-color-scheme:dark){:root{--bg:#10141a;--card:#1a2029;--fg:#e7eaf0;--muted:#a3adbd;--accent:#82a8ff;--line:#2d3542}}
*{box-sizing:border-box}
html,body{margin:0}
body{min-height:100vh;display:flex;align-items:center;justify-content:center;padding:1rem;background:var(--bg);color:var(--fg);font:16px/1.6 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Hiragino Sans\",\"Noto Sans JP\",Meiryo,sans-serif}
main{width:100%;max-width:34rem;padding:2rem 1.5rem;text-align:center;background:var(--card);border:1px solid var(--line);border-radius:16px;box-shadow:0 2px 8px rgba(0,0,0,.06)}
h1{margin:0 0 .75rem;font-size:1.45rem;line-height:1.3}
p{margin:.5rem 0}
.lead{color:var(--muted)}
.pos{margin:1.75rem 0 1.25rem}
.pos-label{font-size:.95rem;color:var(--muted)}
.pos-num{font-size:clamp(3rem,16vw,5.5rem);font-weight:700;line-height:1.1;color:var(--accent);font-variant-numeric:tabular-nums}
.pos-num.unknown{font-size:2rem;line-height:2}
.pos-unit{margin-left:.15em;font-size:1.25rem;font-weight:600;color:var(--fg)}
dl{display:grid;grid-template-columns:1fr 1fr;gap:.75rem;margin:1.25rem 0}
dl div{padding:.75rem;border:1px solid var(--line);border-radius:12px}
dt{font-size:.85rem;color:var(--muted)}
dd{margin:0;font-size:1.1rem;font-weight:600}
.note{font-size:.9rem;color:var(--muted)}
.dot{display:inline-block;width:.55em;height:.55em;margin-right:.45em;border-radius:50%;background:var(--accent);vertical-align:.05em;animation:pulse 1.6s ease-in-out infinite}
@keyframes pulse{50%{opacity:.2}}
@media (prefers-reduced-motion:reduce){.dot{animation:none}}
@media (max-width:26rem){dl{grid-template-columns:1fr}main{padding:1.5rem 1rem}}
";

/// The HTML answer. With a template, its placeholders are filled in (values HTML-escaped,
/// unknown placeholders left as they are - [`check_template`] refuses them at config time);
/// without one, the built-in page in `lang`.
pub fn render_html(v: &WaitView, lang: Lang, template: Option<&str>) -> String {
    match template {
        Some(t) => fill_template(t, v, lang),
        None => default_page(v, lang),
    }
}

fn default_page(v: &WaitView, lang: Lang) -> String {
    let t = texts(lang);
    // Never ask the browser to reload in a tight loop.
    let refresh = v.refresh_secs.max(1);
    let title = match v.status {
        ViewStatus::Waiting => t.waiting_title,
        ViewStatus::Closed => t.closed_title,
        ViewStatus::Admitted => t.admitted_title,
    };
    let (y, mo, d, h, mi, s) = utc_parts(v.updated_at);

    let mut out = String::with_capacity(4096);
    out.push_str("<!DOCTYPE html>\n<html lang=\"");
    out.push_str(t.lang);
    out.push_str("\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!(
        "<meta http-equiv=\"refresh\" content=\"{refresh}\">\n"
    ));
    out.push_str("<meta name=\"robots\" content=\"noindex, nofollow\">\n");
    out.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n<title>");
    out.push_str(title);
    out.push_str("</title>\n<style>\n");
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n<main>\n<h1>");
    out.push_str(title);
    out.push_str("</h1>\n");

    match v.status {
        ViewStatus::Waiting => {
            out.push_str("<p class=\"lead\">");
            out.push_str(t.waiting_lead);
            out.push_str("</p>\n");
            out.push_str(
                "<div class=\"pos\" role=\"status\" aria-live=\"polite\" aria-atomic=\"true\">\n",
            );
            out.push_str("<div class=\"pos-label\">");
            out.push_str(t.position_label);
            out.push_str("</div>\n");
            match v.position {
                Some(p) => {
                    out.push_str(&format!("<div class=\"pos-num\">{p}"));
                    if !t.position_suffix.is_empty() {
                        out.push_str("<span class=\"pos-unit\">");
                        out.push_str(t.position_suffix);
                        out.push_str("</span>");
                    }
                    out.push_str("</div>\n");
                }
                None => {
                    out.push_str("<div class=\"pos-num unknown\">");
                    out.push_str(t.position_unknown);
                    out.push_str("</div>\n");
                }
            }
            out.push_str("</div>\n<dl>\n<div><dt>");
            out.push_str(t.eta_label);
            out.push_str("</dt><dd>");
            out.push_str(&escape(&eta_text(v.eta_secs, lang)));
            out.push_str("</dd></div>\n<div><dt>");
            out.push_str(t.queue_label);
            out.push_str(&format!(
                "</dt><dd>{}{}</dd></div>\n</dl>\n",
                v.queue_len, t.queue_suffix
            ));
        }
        ViewStatus::Closed => {
            out.push_str("<p class=\"lead\" role=\"status\" aria-live=\"polite\">");
            out.push_str(t.closed_lead);
            out.push_str("</p>\n");
        }
        ViewStatus::Admitted => {
            out.push_str("<p class=\"lead\" role=\"status\" aria-live=\"polite\">");
            out.push_str(t.admitted_lead);
            out.push_str("</p>\n");
        }
    }

    out.push_str("<p class=\"note\"><span class=\"dot\" aria-hidden=\"true\"></span>");
    out.push_str(&escape(&refresh_note(lang, v.status, refresh)));
    out.push_str("</p>\n");
    out.push_str(&format!(
        "<p class=\"note\">{} <time datetime=\"{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z\">\
         {h:02}:{mi:02}:{s:02} UTC</time></p>\n",
        t.updated
    ));
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

// ---------------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------------

/// Placeholder names a template may use.
const PLACEHOLDERS: &[&str] = &[
    "position",
    "eta_seconds",
    "eta_text",
    "refresh_seconds",
    "room",
    "queue_length",
    "status",
    "updated_at",
];

/// One `{{name}}` found in a template: byte range of the whole placeholder and the name.
struct Placeholder<'t> {
    start: usize,
    end: usize,
    name: &'t str,
}

/// Finds the next placeholder at or after `from`: `{{`, optional spaces, a name made of
/// `A-Z a-z 0-9 _`, optional spaces, `}}`. Any other `{{` (e.g. in inline script or CSS) is
/// plain text. All indices are at ASCII bytes, so slicing at them is always valid.
fn next_placeholder(t: &str, from: usize) -> Option<Placeholder<'_>> {
    let b = t.as_bytes();
    let mut i = from;
    loop {
        let open = i + t.get(i..)?.find("{{")?;
        let mut j = open + 2;
        while b.get(j) == Some(&b' ') {
            j += 1;
        }
        let name_start = j;
        while b
            .get(j)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            j += 1;
        }
        let name_end = j;
        while b.get(j) == Some(&b' ') {
            j += 1;
        }
        if name_end > name_start && t.get(j..j + 2) == Some("}}") {
            return Some(Placeholder {
                start: open,
                end: j + 2,
                name: t.get(name_start..name_end)?,
            });
        }
        // Not a placeholder; look again from the next byte after this "{".
        i = open + 1;
    }
}

/// Checks a page template at configuration time: every `{{name}}` must be a known
/// placeholder. The error lists the unknown ones.
pub fn check_template(t: &str) -> Result<(), ParseError> {
    let mut unknown: Vec<&str> = Vec::new();
    let mut at = 0;
    while let Some(p) = next_placeholder(t, at) {
        if !PLACEHOLDERS.contains(&p.name) && !unknown.contains(&p.name) {
            unknown.push(p.name);
        }
        at = p.end;
    }
    if unknown.is_empty() {
        return Ok(());
    }
    let list = unknown
        .iter()
        .map(|n| format!("{{{{{n}}}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(ParseError::UnknownPlaceholder(list))
}

/// Value of one placeholder, unescaped. Unknown numbers are empty strings, so a template
/// can test for them; `{{eta_text}}` has the human wording.
fn placeholder_value(name: &str, v: &WaitView, lang: Lang) -> Option<String> {
    let num = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    Some(match name {
        "position" => num(v.position),
        "eta_seconds" => num(v.eta_secs),
        "eta_text" => eta_text(v.eta_secs, lang),
        "refresh_seconds" => v.refresh_secs.to_string(),
        "room" => v.room.to_string(),
        "queue_length" => v.queue_len.to_string(),
        "status" => v.status.as_str().to_string(),
        "updated_at" => v.updated_at.to_string(),
        _ => return None,
    })
}

fn fill_template(t: &str, v: &WaitView, lang: Lang) -> String {
    let mut out = String::with_capacity(t.len() + 64);
    let mut copied = 0;
    let mut at = 0;
    while let Some(p) = next_placeholder(t, at) {
        at = p.end;
        let Some(value) = placeholder_value(p.name, v, lang) else {
            continue; // unknown: left verbatim
        };
        out.push_str(t.get(copied..p.start).unwrap_or(""));
        escape_into(&mut out, &value);
        copied = p.end;
    }
    out.push_str(t.get(copied..).unwrap_or(""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(status: ViewStatus) -> WaitView<'static> {
        WaitView {
            room: "shop",
            status,
            position: Some(12),
            queue_len: 40,
            eta_secs: Some(180),
            refresh_secs: 20,
            updated_at: 1_694_432_754,
        }
    }

    #[test]
    fn json_fields_and_types() {
        let s = render_json(&view(ViewStatus::Waiting));
        assert_eq!(
            s,
            r#"{"status":"waiting","room":"shop","position":12,"eta_seconds":180,"eta_known":true,"refresh_seconds":20,"queue_length":40,"updated_at":1694432754}"#
        );
        let mut v = view(ViewStatus::Closed);
        v.position = None;
        v.eta_secs = None;
        v.room = "a\"b<";
        let j: serde_json::Value = serde_json::from_str(&render_json(&v)).unwrap();
        assert_eq!(j["status"], "closed");
        assert_eq!(j["room"], "a\"b<");
        assert!(j["position"].is_null());
        assert!(j["eta_seconds"].is_null());
        assert_eq!(j["eta_known"], false);
        assert_eq!(j["refresh_seconds"], 20);
        assert_eq!(j["queue_length"], 40);
        assert_eq!(j["updated_at"], 1_694_432_754u64);
        let j: serde_json::Value =
            serde_json::from_str(&render_json(&view(ViewStatus::Admitted))).unwrap();
        assert_eq!(j["status"], "admitted");
    }

    #[test]
    fn accept_negotiation() {
        let yes: &[&[u8]] = &[
            b"application/json",
            b"Application/JSON",
            b"application/json; charset=utf-8",
            b"application/json;q=0.5",
            b"application/problem+json",
            b"application/vnd.example.v1+json;q=0.9",
            b"text/plain, application/json",
            b"text/html;q=0.5, application/json",
            b"application/json, text/html",
            b"application/json;q=1.0, text/html;q=0.9, */*;q=0.1",
            b"  application/json  ;  q = 0.7 ",
        ];
        for a in yes {
            assert!(wants_json(Some(a)), "{}", String::from_utf8_lossy(a));
        }
        let no: &[&[u8]] = &[
            b"",
            b"*/*",
            b"application/*",
            b"text/html",
            b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            b"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
            b"text/html, application/json",
            b"application/json;q=0",
            b"application/json;q=0.000",
            b"application/json;q=2",
            b"application/json;q=abc",
            b"application/jsonx",
            b"application/+json",
            b"text/json+xml",
            b"\xff\xfe,;;;===,,",
            b"text/html;q=0.9, application/json;q=0.8",
        ];
        for a in no {
            assert!(!wants_json(Some(a)), "{}", String::from_utf8_lossy(a));
        }
        assert!(!wants_json(None));
    }

    #[test]
    fn q_values() {
        assert_eq!(parse_q(b"1"), Some(1000));
        assert_eq!(parse_q(b"1.000"), Some(1000));
        assert_eq!(parse_q(b"1."), Some(1000));
        assert_eq!(parse_q(b"0"), Some(0));
        assert_eq!(parse_q(b"0.5"), Some(500));
        assert_eq!(parse_q(b"0.123"), Some(123));
        assert_eq!(parse_q(b"0.05"), Some(50));
        for bad in [
            &b"1.001"[..],
            b"0.1234",
            b"2",
            b"",
            b".5",
            b"-0",
            b"0.x",
            b"00.5",
            b"1.5",
        ] {
            assert_eq!(parse_q(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn language() {
        let ja: &[&[u8]] = &[
            b"ja",
            b"ja-JP",
            b"JA-jp",
            b"ja-JP,ja;q=0.9,en-US;q=0.8,en;q=0.7",
            b"en;q=0.5, ja",
            b"fr, ja;q=0.9",
            b"ja;q=0.8, en;q=0.7",
            b"ja, en",
        ];
        for h in ja {
            assert_eq!(
                pick_lang(Some(h)),
                Lang::Ja,
                "{}",
                String::from_utf8_lossy(h)
            );
        }
        let en: &[&[u8]] = &[
            b"",
            b"en",
            b"en-US,en;q=0.9,ja;q=0.8",
            b"ja;q=0.5, en",
            b"en, ja",
            b"fr",
            b"*",
            b"jp",
            b"jax",
            b"ja;q=0",
            b"ja;q=bogus",
            b"\xff\xfe;;,,==",
            b"j a",
        ];
        for h in en {
            assert_eq!(
                pick_lang(Some(h)),
                Lang::En,
                "{}",
                String::from_utf8_lossy(h)
            );
        }
        assert_eq!(pick_lang(None), Lang::En);
    }

    #[test]
    fn eta_wording() {
        assert_eq!(eta_text(None, Lang::En), "calculating…");
        assert_eq!(eta_text(None, Lang::Ja), "計算中");
        assert_eq!(eta_text(Some(0), Lang::En), "any moment now");
        assert_eq!(eta_text(Some(1), Lang::En), "about 1 second");
        assert_eq!(eta_text(Some(45), Lang::En), "about 45 seconds");
        assert_eq!(eta_text(Some(60), Lang::En), "about 1 minute");
        assert_eq!(eta_text(Some(89), Lang::En), "about 1 minute");
        assert_eq!(eta_text(Some(90), Lang::En), "about 2 minutes");
        assert_eq!(eta_text(Some(180), Lang::En), "about 3 minutes");
        assert_eq!(eta_text(Some(7200), Lang::En), "about 2 hours");
        assert_eq!(
            eta_text(Some(u64::MAX), Lang::En),
            format!("about {} hours", (u64::MAX / 60 + 30) / 60)
        );
        assert_eq!(eta_text(Some(0), Lang::Ja), "まもなく");
        assert_eq!(eta_text(Some(45), Lang::Ja), "約45秒");
        assert_eq!(eta_text(Some(180), Lang::Ja), "約3分");
        assert_eq!(eta_text(Some(10_800), Lang::Ja), "約3時間");
    }

    #[test]
    fn utc_time() {
        assert_eq!(utc_parts(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc_parts(1_694_432_754), (2023, 9, 11, 11, 45, 54));
        assert_eq!(utc_parts(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(utc_parts(u64::MAX), (9999, 12, 31, 23, 59, 59));
    }

    #[test]
    fn default_page_en() {
        let html = render_html(&view(ViewStatus::Waiting), Lang::En, None);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<html lang=\"en\">"));
        assert!(html.contains("<meta name=\"viewport\""));
        assert!(html.contains("<meta http-equiv=\"refresh\" content=\"20\">"));
        assert!(html.contains("<h1>The site is busy right now</h1>"));
        assert!(html.contains("aria-live=\"polite\""));
        assert!(html.contains("<div class=\"pos-num\">12</div>"));
        assert!(html.contains("about 3 minutes"));
        assert!(html.contains("<dd>40</dd>"));
        assert!(html.contains("every 20 seconds"));
        assert!(html.contains("Keep this tab open"));
        assert!(html.contains("prefers-color-scheme:dark"));
        assert!(html.contains("datetime=\"2023-09-11T11:45:54Z\""));
        // No external assets, no script.
        for banned in [
            "<script", "src=", "href=", "http://", "https://", "@import", "url(",
        ] {
            assert!(!html.contains(banned), "{banned}");
        }
        let mut v = view(ViewStatus::Waiting);
        v.eta_secs = None;
        v.position = None;
        v.refresh_secs = 0;
        let html = render_html(&v, Lang::En, None);
        assert!(html.contains("calculating…"));
        assert!(html.contains("Checking…"));
        assert!(html.contains("content=\"1\""), "refresh clamped to 1s");
    }

    #[test]
    fn default_page_ja() {
        let html = render_html(&view(ViewStatus::Waiting), Lang::Ja, None);
        assert!(html.contains("<html lang=\"ja\">"));
        assert!(html.contains("ただいま混雑しています"));
        assert!(html.contains("あなたの順番"));
        assert!(html.contains("12<span class=\"pos-unit\">番目</span>"));
        assert!(html.contains("約3分"));
        assert!(html.contains("<dd>40人</dd>"));
        assert!(html.contains("20秒ごとに自動で更新"));
        assert!(html.contains("タブを閉じずに"));
    }

    #[test]
    fn closed_and_admitted_pages() {
        let html = render_html(&view(ViewStatus::Closed), Lang::En, None);
        assert!(html.contains("Temporarily closed"));
        assert!(!html.contains("class=\"pos-num"));
        assert!(html.contains("http-equiv=\"refresh\""));
        let html = render_html(&view(ViewStatus::Closed), Lang::Ja, None);
        assert!(html.contains("一時停止"));
        let html = render_html(&view(ViewStatus::Admitted), Lang::En, None);
        assert!(html.contains("It's your turn"));
        let html = render_html(&view(ViewStatus::Admitted), Lang::Ja, None);
        assert!(html.contains("順番が来ました"));
    }

    #[test]
    fn template_placeholders_replaced() {
        let t = "<p>{{position}}|{{ eta_seconds }}|{{eta_text}}|{{refresh_seconds}}|{{room}}|\
                 {{queue_length}}|{{status}}|{{updated_at}}</p>";
        assert_eq!(check_template(t), Ok(()));
        let out = render_html(&view(ViewStatus::Waiting), Lang::En, Some(t));
        assert_eq!(
            out,
            "<p>12|180|about 3 minutes|20|shop|40|waiting|1694432754</p>"
        );
        let out = render_html(&view(ViewStatus::Waiting), Lang::Ja, Some(t));
        assert!(out.contains("|約3分|"));
        let mut v = view(ViewStatus::Closed);
        v.position = None;
        v.eta_secs = None;
        let out = render_html(&v, Lang::En, Some(t));
        assert_eq!(out, "<p>||calculating…|20|shop|40|closed|1694432754</p>");
        // Repeated placeholders, none at all, adjacent ones, text around them.
        assert_eq!(
            render_html(
                &view(ViewStatus::Waiting),
                Lang::En,
                Some("{{position}}{{position}}")
            ),
            "1212"
        );
        assert_eq!(
            render_html(&view(ViewStatus::Waiting), Lang::En, Some("plain")),
            "plain"
        );
        assert_eq!(
            render_html(&view(ViewStatus::Waiting), Lang::En, Some("")),
            ""
        );
    }

    #[test]
    fn template_escapes_values() {
        let mut v = view(ViewStatus::Waiting);
        v.room = "<script>alert('x')</script>&\"";
        let out = render_html(&v, Lang::En, Some("<h1 title=\"{{room}}\">{{room}}</h1>"));
        assert_eq!(
            out,
            "<h1 title=\"&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\">\
             &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;</h1>"
        );
        assert!(!out.contains("<script>"));
    }

    #[test]
    fn template_non_placeholders_are_text() {
        let t = "<style>a{{color:red}}</style><script>if(a){{b}}</script>{{ }}{{x-y}}{{unclosed";
        // "{{b}}" looks like a placeholder and is unknown.
        assert_eq!(
            check_template(t),
            Err(ParseError::UnknownPlaceholder("{{b}}".to_string()))
        );
        let t = "<style>a{{color:red}}</style>{{ }}{{x-y}}{{{position}}}{{unclosed {{";
        assert_eq!(check_template(t), Ok(()));
        let out = render_html(&view(ViewStatus::Waiting), Lang::En, Some(t));
        assert_eq!(
            out,
            "<style>a{{color:red}}</style>{{ }}{{x-y}}{12}{{unclosed {{"
        );
    }

    #[test]
    fn template_unknown_names_reported() {
        let e = check_template("{{position}} {{colour}} {{ size }} {{colour}}").unwrap_err();
        assert_eq!(
            e,
            ParseError::UnknownPlaceholder("{{colour}}, {{size}}".to_string())
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with("unknown placeholder {{colour}}, {{size}} (known: {{position}}"),
            "{msg}"
        );
        // At render time unknown placeholders stay verbatim.
        let out = render_html(
            &view(ViewStatus::Waiting),
            Lang::En,
            Some("{{colour}}-{{position}}"),
        );
        assert_eq!(out, "{{colour}}-12");
    }

    #[test]
    fn templates_never_panic() {
        let mut x: u64 = 0x1234_5678;
        let pieces = [
            "{", "}", "{{", "}}", " ", "position", "room", "é", "日本", "x", "<", "&",
        ];
        let v = view(ViewStatus::Waiting);
        for _ in 0..5_000 {
            let mut t = String::new();
            for _ in 0..(x % 20) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t.push_str(pieces[(x % pieces.len() as u64) as usize]);
            }
            let _ = check_template(&t);
            let _ = render_html(&v, Lang::Ja, Some(&t));
            let _ = wants_json(Some(t.as_bytes()));
            let _ = pick_lang(Some(t.as_bytes()));
            x = x.wrapping_add(1);
        }
    }
}
