//! The waiting answer's bodies (SPEC S7, §3): a self-refreshing HTML page for people and a
//! JSON document for programs, plus the small content-negotiation helpers that pick between
//! them (`Accept`) and between English and Japanese (`Accept-Language`).
//!
//! The default page has no external assets and no JavaScript (a waiting room must work when
//! the origin is the thing that is overloaded, and on any browser); it refreshes itself
//! with `<meta http-equiv="refresh">`. A branded page can replace it through a template with
//! `{{placeholder}}`s; every substituted value is HTML-escaped.
//!
//! Pages are prepared once ([`Template`]: the text cut at its placeholders) and a request
//! only writes into an [`Out`]: no allocation and no formatting machinery on the poll path.
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

/// Where the visitor stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewStatus {
    /// In the queue.
    Waiting,
    /// Let in (the page then just reloads into the site).
    Admitted,
    /// The room admits nobody right now (e.g. store down with `on_error=closed`).
    Closed,
    /// Flood control: the client's network takes places too fast; it gets one in a moment.
    Throttled,
}

impl ViewStatus {
    /// The wire name: "waiting", "admitted" or "closed".
    pub fn as_str(self) -> &'static str {
        match self {
            ViewStatus::Waiting => "waiting",
            ViewStatus::Admitted => "admitted",
            ViewStatus::Closed => "closed",
            ViewStatus::Throttled => "throttled",
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
// Output
// ---------------------------------------------------------------------------------------

/// Where an answer body is written: a `Vec<u8>` in tests, the request's pool in nginx.
/// Rendering never allocates on its own: it only appends to this.
pub trait Out {
    fn put(&mut self, bytes: &[u8]);

    fn put_u64(&mut self, n: u64) {
        let mut b = itoa::Buffer::new();
        self.put(b.format(n).as_bytes());
    }

    /// Two digits, zero-padded (times of day).
    fn put_2(&mut self, n: u64) {
        let n = n % 100;
        self.put(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]);
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A fixed-size buffer on the stack: writes beyond its size are cut and remembered.
pub struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    overflow: bool,
}

impl<const N: usize> Default for FixedBuf<N> {
    fn default() -> Self {
        FixedBuf {
            buf: [0; N],
            len: 0,
            overflow: false,
        }
    }
}

impl<const N: usize> FixedBuf<N> {
    /// What was written, or None when it did not fit.
    pub fn bytes(&self) -> Option<&[u8]> {
        if self.overflow {
            return None;
        }
        self.buf.get(..self.len)
    }

    /// The written bytes as mutable (to work on them in place).
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        if self.overflow {
            return None;
        }
        self.buf.get_mut(..self.len)
    }

    /// The unused rest, and how far it starts (for writers that fill it themselves).
    pub fn spare(&mut self) -> &mut [u8] {
        self.buf.get_mut(self.len..).unwrap_or_default()
    }

    /// Marks `n` more bytes of [`FixedBuf::spare`] as written.
    pub fn advance(&mut self, n: usize) {
        if n > N - self.len {
            self.overflow = true;
        } else {
            self.len += n;
        }
    }
}

impl<const N: usize> Out for FixedBuf<N> {
    fn put(&mut self, bytes: &[u8]) {
        let spare = self.buf.get_mut(self.len..).unwrap_or_default();
        match spare.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            None => self.overflow = true,
        }
    }
}

/// Escapes text for HTML element content and quoted attribute values.
fn put_escaped(out: &mut impl Out, s: &str) {
    let b = s.as_bytes();
    let mut start = 0;
    for (i, c) in b.iter().enumerate() {
        let rep: &[u8] = match c {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&#39;",
            _ => continue,
        };
        out.put(b.get(start..i).unwrap_or_default());
        out.put(rep);
        start = i + 1;
    }
    out.put(b.get(start..).unwrap_or_default());
}

// ---------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------

/// Writes a JSON string (quotes included) with the escapes JSON needs.
pub fn put_json_str(out: &mut impl Out, s: &str) {
    out.put(b"\"");
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            c if c < 0x20 => {
                out.put(b.get(start..i).unwrap_or_default());
                let hex = |n: u8| if n < 10 { b'0' + n } else { b'a' + n - 10 };
                out.put(b"\\u00");
                out.put(&[hex(c >> 4), hex(c & 15)]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.put(b.get(start..i).unwrap_or_default());
        out.put(esc);
        start = i + 1;
    }
    out.put(b.get(start..).unwrap_or_default());
    out.put(b"\"");
}

fn put_json_opt(out: &mut impl Out, n: Option<u64>) {
    match n {
        Some(n) => out.put_u64(n),
        None => out.put(b"null"),
    }
}

/// The JSON answer: `{"status":"waiting","room":..,"position":N|null,"eta_seconds":N|null,
/// "eta_known":bool,"refresh_seconds":N,"queue_length":N,"updated_at":N}`.
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
    out.put(b"}");
}

/// The most bytes [`write_json`] writes for `v`.
pub fn json_max_len(v: &WaitView) -> usize {
    256usize.saturating_add(v.room.len().saturating_mul(6))
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

/// The human estimate of the wait: "about 3 minutes" / 「約3分」, "calculating…" / 「計算中」
/// when unknown. Written without escaping (it holds no markup characters).
fn put_eta_text(out: &mut impl Out, eta_secs: Option<u64>, lang: Lang) {
    let Some(secs) = eta_secs else {
        return out.put(match lang {
            Lang::En => "calculating…".as_bytes(),
            Lang::Ja => "計算中".as_bytes(),
        });
    };
    let minutes = secs.saturating_add(30) / 60;
    let hours = minutes.saturating_add(30) / 60;
    let (before, n, after): (&str, Option<u64>, &str) = match lang {
        Lang::En => match secs {
            0 => ("any moment now", None, ""),
            1 => ("about 1 second", None, ""),
            2..=59 => ("about ", Some(secs), " seconds"),
            60..=89 => ("about 1 minute", None, ""),
            _ if minutes < 120 => ("about ", Some(minutes), " minutes"),
            _ => ("about ", Some(hours), " hours"),
        },
        Lang::Ja => match secs {
            0 => ("まもなく", None, ""),
            1..=59 => ("約", Some(secs), "秒"),
            _ if minutes < 120 => ("約", Some(minutes), "分"),
            _ => ("約", Some(hours), "時間"),
        },
    };
    out.put(before.as_bytes());
    if let Some(n) = n {
        out.put_u64(n);
    }
    out.put(after.as_bytes());
}

/// [`put_eta_text`] into a new string.
pub fn eta_text(eta_secs: Option<u64>, lang: Lang) -> String {
    let mut out = Vec::with_capacity(32);
    put_eta_text(&mut out, eta_secs, lang);
    String::from_utf8(out).unwrap_or_default()
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
    throttled_title: &'static str,
    throttled_lead: &'static str,
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
    throttled_title: "Many visitors from your network",
    throttled_lead: "Lots of people are arriving from the same network as you, so places in line \
                     are handed out a few at a time. This page takes yours by itself in a moment.",
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
    throttled_title: "同じネットワークからのアクセスが集中しています",
    throttled_lead: "同じネットワークから多くの方がアクセスしているため、順番待ちの受付を少しずつ行っています。\
                     このページが自動で順番を取得しますので、そのままお待ちください。",
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

// ---------------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------------

/// What a template fills in per request. The first eight are the documented `{{names}}` of
/// `smart_limit_page` templates; the others serve the built-in page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Position,
    EtaSeconds,
    EtaText,
    RefreshSeconds,
    Room,
    QueueLength,
    Status,
    UpdatedAt,
    /// `HH:MM:SS` (UTC) of `updated_at`.
    UpdatedTime,
    /// `YYYY-MM-DDTHH:MM:SSZ` of `updated_at`.
    UpdatedIso,
    /// `refresh_seconds`, at least 1 (the built-in page never reloads in a tight loop).
    RefreshAtLeast1,
}

/// Placeholder names a template may use, and what each becomes.
const PLACEHOLDERS: &[(&str, Slot)] = &[
    ("position", Slot::Position),
    ("eta_seconds", Slot::EtaSeconds),
    ("eta_text", Slot::EtaText),
    ("refresh_seconds", Slot::RefreshSeconds),
    ("room", Slot::Room),
    ("queue_length", Slot::QueueLength),
    ("status", Slot::Status),
    ("updated_at", Slot::UpdatedAt),
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Box<[u8]>),
    Slot(Slot),
}

/// A page prepared at configuration time: its text cut at the placeholders, so a request
/// only copies the text and writes the few values in between.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    /// Bytes of text plus the most every slot but `{{room}}` writes.
    fixed_max: usize,
    /// How many `{{room}}` slots (each writes the escaped room name).
    room_slots: usize,
}

impl Template {
    fn text(&mut self, s: &str) -> &mut Self {
        if s.is_empty() {
            return self;
        }
        self.fixed_max = self.fixed_max.saturating_add(s.len());
        // Adjacent text becomes one part.
        if let Some(Part::Text(t)) = self.parts.last_mut() {
            let mut joined = Vec::with_capacity(t.len() + s.len());
            joined.extend_from_slice(t);
            joined.extend_from_slice(s.as_bytes());
            *t = joined.into_boxed_slice();
        } else {
            self.parts.push(Part::Text(s.as_bytes().into()));
        }
        self
    }

    fn slot(&mut self, s: Slot) -> &mut Self {
        match s {
            Slot::Room => self.room_slots += 1,
            Slot::EtaText => self.fixed_max = self.fixed_max.saturating_add(48),
            _ => self.fixed_max = self.fixed_max.saturating_add(24),
        }
        self.parts.push(Part::Slot(s));
        self
    }

    /// Prepares a `smart_limit_page` template. `{{name}}` of a known placeholder becomes its
    /// value; anything else (other braces, unknown names) is text. Configuration refuses
    /// unknown names first, with [`check_template`].
    pub fn compile(text: &str) -> Template {
        let mut t = Template::default();
        let mut copied = 0;
        let mut at = 0;
        while let Some(p) = next_placeholder(text, at) {
            at = p.end;
            let Some(&(_, slot)) = PLACEHOLDERS.iter().find(|(n, _)| *n == p.name) else {
                continue;
            };
            t.text(text.get(copied..p.start).unwrap_or(""));
            t.slot(slot);
            copied = p.end;
        }
        t.text(text.get(copied..).unwrap_or(""));
        t
    }

    /// Bytes of fixed text (the body is this plus the values).
    pub fn text_len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.len(),
                Part::Slot(_) => 0,
            })
            .sum()
    }

    /// The most bytes [`Template::render`] writes for a view whose room name is `room_len`
    /// bytes long (to size a response buffer once).
    pub fn max_len(&self, room_len: usize) -> usize {
        room_len
            .saturating_mul(6)
            .saturating_mul(self.room_slots)
            .saturating_add(self.fixed_max)
    }

    /// Writes the page for `v` in `lang`. Values are HTML-escaped where they can hold text.
    pub fn render(&self, v: &WaitView, lang: Lang, out: &mut impl Out) {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.put(t),
                Part::Slot(s) => put_slot(out, *s, v, lang),
            }
        }
    }
}

fn put_slot(out: &mut impl Out, slot: Slot, v: &WaitView, lang: Lang) {
    match slot {
        Slot::Position => {
            if let Some(p) = v.position {
                out.put_u64(p);
            }
        }
        Slot::EtaSeconds => {
            if let Some(s) = v.eta_secs {
                out.put_u64(s);
            }
        }
        Slot::EtaText => put_eta_text(out, v.eta_secs, lang),
        Slot::RefreshSeconds => out.put_u64(v.refresh_secs),
        Slot::RefreshAtLeast1 => out.put_u64(v.refresh_secs.max(1)),
        Slot::Room => put_escaped(out, v.room),
        Slot::QueueLength => out.put_u64(v.queue_len),
        Slot::Status => out.put(v.status.as_str().as_bytes()),
        Slot::UpdatedAt => out.put_u64(v.updated_at),
        Slot::UpdatedTime => {
            let (_, _, _, h, mi, s) = utc_parts(v.updated_at);
            put_hms(out, h, mi, s);
        }
        Slot::UpdatedIso => {
            let (y, mo, d, h, mi, s) = utc_parts(v.updated_at);
            out.put_2(y / 100);
            out.put_2(y);
            out.put(b"-");
            out.put_2(mo);
            out.put(b"-");
            out.put_2(d);
            out.put(b"T");
            put_hms(out, h, mi, s);
            out.put(b"Z");
        }
    }
}

fn put_hms(out: &mut impl Out, h: u64, mi: u64, s: u64) {
    out.put_2(h);
    out.put(b":");
    out.put_2(mi);
    out.put(b":");
    out.put_2(s);
}

/// The refresh note of the built-in page, with the refresh interval as a slot.
fn refresh_note(t: &mut Template, lang: Lang, status: ViewStatus) {
    let (before, after) = match (lang, status) {
        (Lang::En, ViewStatus::Waiting) => (
            "This page refreshes by itself every ",
            " seconds. Keep this tab open; reloading it yourself will not lose your place.",
        ),
        (Lang::En, ViewStatus::Closed) => ("This page checks again by itself every ", " seconds."),
        (Lang::En, ViewStatus::Throttled) => ("This page tries again by itself in ", " seconds."),
        (Lang::En, ViewStatus::Admitted) => ("This page reloads by itself in ", " seconds."),
        (Lang::Ja, ViewStatus::Waiting) => (
            "このページは",
            "秒ごとに自動で更新されます。タブを閉じずに、このままお待ちください\
             （再読み込みしても順番は変わりません）。",
        ),
        (Lang::Ja, ViewStatus::Closed) => ("このページは", "秒ごとに自動で再確認します。"),
        (Lang::Ja, ViewStatus::Throttled) => ("このページは", "秒後に自動で再試行します。"),
        (Lang::Ja, ViewStatus::Admitted) => ("このページは", "秒後に自動で再読み込みされます。"),
    };
    t.text(before).slot(Slot::RefreshAtLeast1).text(after);
}

/// The built-in page for one language, status and whether the position is known: the same
/// document for every request, with the figures as slots.
fn builtin(lang: Lang, status: ViewStatus, position_known: bool) -> Template {
    let tx = texts(lang);
    let title = match status {
        ViewStatus::Waiting => tx.waiting_title,
        ViewStatus::Closed => tx.closed_title,
        ViewStatus::Throttled => tx.throttled_title,
        ViewStatus::Admitted => tx.admitted_title,
    };
    let mut t = Template::default();
    t.text("<!DOCTYPE html>\n<html lang=\"")
        .text(tx.lang)
        .text("\">\n<head>\n<meta charset=\"utf-8\">\n")
        .text("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        .text("<meta http-equiv=\"refresh\" content=\"")
        .slot(Slot::RefreshAtLeast1)
        .text("\">\n<meta name=\"robots\" content=\"noindex, nofollow\">\n")
        .text("<meta name=\"color-scheme\" content=\"light dark\">\n<title>")
        .text(title)
        .text("</title>\n<style>\n")
        .text(STYLE)
        .text("</style>\n</head>\n<body>\n<main>\n<h1>")
        .text(title)
        .text("</h1>\n");
    match status {
        ViewStatus::Waiting => {
            t.text("<p class=\"lead\">")
                .text(tx.waiting_lead)
                .text("</p>\n")
                .text("<div class=\"pos\" role=\"status\" aria-live=\"polite\" aria-atomic=\"true\">\n")
                .text("<div class=\"pos-label\">")
                .text(tx.position_label)
                .text("</div>\n");
            if position_known {
                t.text("<div class=\"pos-num\">").slot(Slot::Position);
                if !tx.position_suffix.is_empty() {
                    t.text("<span class=\"pos-unit\">")
                        .text(tx.position_suffix)
                        .text("</span>");
                }
                t.text("</div>\n");
            } else {
                t.text("<div class=\"pos-num unknown\">")
                    .text(tx.position_unknown)
                    .text("</div>\n");
            }
            t.text("</div>\n<dl>\n<div><dt>")
                .text(tx.eta_label)
                .text("</dt><dd>")
                .slot(Slot::EtaText)
                .text("</dd></div>\n<div><dt>")
                .text(tx.queue_label)
                .text("</dt><dd>")
                .slot(Slot::QueueLength)
                .text(tx.queue_suffix)
                .text("</dd></div>\n</dl>\n");
        }
        ViewStatus::Closed | ViewStatus::Admitted | ViewStatus::Throttled => {
            let lead = match status {
                ViewStatus::Closed => tx.closed_lead,
                ViewStatus::Throttled => tx.throttled_lead,
                _ => tx.admitted_lead,
            };
            t.text("<p class=\"lead\" role=\"status\" aria-live=\"polite\">")
                .text(lead)
                .text("</p>\n");
        }
    }
    t.text("<p class=\"note\"><span class=\"dot\" aria-hidden=\"true\"></span>");
    refresh_note(&mut t, lang, status);
    t.text("</p>\n<p class=\"note\">")
        .text(tx.updated)
        .text(" <time datetime=\"")
        .slot(Slot::UpdatedIso)
        .text("\">")
        .slot(Slot::UpdatedTime)
        .text(" UTC</time></p>\n</main>\n</body>\n</html>\n");
    t
}

/// The built-in pages, prepared once per process.
fn builtin_pages() -> &'static [Template; 16] {
    static PAGES: std::sync::OnceLock<[Template; 16]> = std::sync::OnceLock::new();
    PAGES.get_or_init(|| {
        core::array::from_fn(|i| {
            let lang = if i < 8 { Lang::En } else { Lang::Ja };
            let status = match (i / 2) % 4 {
                0 => ViewStatus::Waiting,
                1 => ViewStatus::Closed,
                2 => ViewStatus::Admitted,
                _ => ViewStatus::Throttled,
            };
            builtin(lang, status, i % 2 == 1)
        })
    })
}

fn builtin_index(lang: Lang, status: ViewStatus, position_known: bool) -> usize {
    let l = match lang {
        Lang::En => 0,
        Lang::Ja => 8,
    };
    let s = match status {
        ViewStatus::Waiting => 0,
        ViewStatus::Closed => 2,
        ViewStatus::Admitted => 4,
        ViewStatus::Throttled => 6,
    };
    l + s + usize::from(position_known)
}

/// Prepares the built-in pages now (at configuration time) rather than on the first request.
pub fn prepare_builtin() {
    let _ = builtin_pages();
}

/// The template an HTML answer uses: the configured one, or the built-in page in `lang`.
fn html_template<'t>(
    v: &WaitView,
    lang: Lang,
    template: Option<&'t Template>,
) -> Option<&'t Template> {
    match template {
        Some(t) => Some(t),
        None => builtin_pages().get(builtin_index(lang, v.status, v.position.is_some())),
    }
}

/// The most bytes [`write_html`] writes for these arguments.
pub fn html_max_len(v: &WaitView, lang: Lang, template: Option<&Template>) -> usize {
    html_template(v, lang, template).map_or(0, |t| t.max_len(v.room.len()))
}

/// The HTML answer: the configured template, or the built-in page in `lang`.
pub fn write_html(v: &WaitView, lang: Lang, template: Option<&Template>, out: &mut impl Out) {
    if let Some(t) = html_template(v, lang, template) {
        t.render(v, lang, out);
    }
}

/// [`write_html`] into a new string, compiling `template` first.
pub fn render_html(v: &WaitView, lang: Lang, template: Option<&str>) -> String {
    let compiled = template.map(Template::compile);
    let mut out = Vec::with_capacity(4096);
    write_html(v, lang, compiled.as_ref(), &mut out);
    String::from_utf8(out).unwrap_or_default()
}

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
        if !PLACEHOLDERS.iter().any(|(n, _)| *n == p.name) && !unknown.contains(&p.name) {
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
        let html = render_html(&view(ViewStatus::Throttled), Lang::En, None);
        assert!(html.contains("Many visitors from your network"));
        assert!(html.contains("tries again by itself in 20 seconds"));
        assert!(!html.contains("class=\"pos-num"));
        let html = render_html(&view(ViewStatus::Throttled), Lang::Ja, None);
        assert!(html.contains("同じネットワーク"));
        assert!(render_json(&view(ViewStatus::Throttled)).starts_with("{\"status\":\"throttled\""));
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
    fn max_len_bounds_every_answer() {
        let mut v = view(ViewStatus::Waiting);
        v.room = "<&\"'>";
        for lang in [Lang::En, Lang::Ja] {
            for status in [
                ViewStatus::Waiting,
                ViewStatus::Closed,
                ViewStatus::Admitted,
            ] {
                for (pos, eta) in [
                    (None, None),
                    (Some(u64::MAX), Some(u64::MAX)),
                    (Some(1), Some(59)),
                ] {
                    v.status = status;
                    v.position = pos;
                    v.eta_secs = eta;
                    v.queue_len = u64::MAX;
                    v.refresh_secs = u64::MAX;
                    v.updated_at = u64::MAX;
                    let mut out = Vec::new();
                    write_html(&v, lang, None, &mut out);
                    assert!(out.len() <= html_max_len(&v, lang, None));
                    let t =
                        Template::compile("{{room}}{{room}}{{eta_text}}{{position}}{{updated_at}}");
                    out.clear();
                    write_html(&v, lang, Some(&t), &mut out);
                    assert!(out.len() <= html_max_len(&v, lang, Some(&t)));
                    out.clear();
                    write_json(&v, &mut out);
                    assert!(out.len() <= json_max_len(&v));
                }
            }
        }
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
