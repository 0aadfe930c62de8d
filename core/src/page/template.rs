//! Page templates: a text cut once at its `{{placeholder}}`s, then written per request with
//! every substituted value HTML-escaped.

use super::solver::{SCRIPT_PARTS, SOLVER};
use super::text::put_eta_text;

use super::{Lang, WaitView};
use crate::config::ParseError;
use crate::util::out::{put_utc_iso, put_utc_time, Out};

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

/// What a template fills in per request: the documented `{{names}}` of `smart_limit_page`
/// templates (see [`PLACEHOLDERS`]), and a few forms the built-in page writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
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
    /// `starts_at` (unix seconds; empty when no event's pre-queue is open).
    StartsAt,
    /// `YYYY-MM-DDTHH:MM:SSZ` and `HH:MM:SS` (UTC) of `starts_at`.
    StartsIso,
    StartsTime,
    /// The challenge's seed (base64url) and difficulty (`challenge=pow`; empty without).
    ChallengeSeed,
    ChallengeBits,
    /// The challenge's solver: the seed, the bits and the proof cookie's name for the page's
    /// script, and the script itself (empty on any other answer). A page that has it hosts the
    /// challenge; see [`Template::hosts_challenge`].
    ChallengeScript,
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
    ("starts_at", Slot::StartsAt),
    ("challenge_seed", Slot::ChallengeSeed),
    ("challenge_bits", Slot::ChallengeBits),
    ("challenge_script", Slot::ChallengeScript),
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
    pub(super) fn text(&mut self, s: &str) -> &mut Self {
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

    pub(super) fn slot(&mut self, s: Slot) -> &mut Self {
        match s {
            Slot::Room => self.room_slots += 1,
            Slot::EtaText => self.fixed_max = self.fixed_max.saturating_add(48),
            Slot::ChallengeScript => {
                // The seed and the bits (24 each), the room's name, the fixed text.
                let text: usize = SCRIPT_PARTS.iter().map(|p| p.len()).sum();
                self.room_slots += 1;
                self.fixed_max = self.fixed_max.saturating_add(48 + text + SOLVER.len());
            }
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

    /// Whether the page can answer a challenge (`challenge=pow`): it has
    /// `{{challenge_script}}`. A page without it is not used for the challenge: the built-in
    /// page answers, since a challenge without its solver would hold a browser until its
    /// no-script wait is over.
    pub fn hosts_challenge(&self) -> bool {
        self.parts.contains(&Part::Slot(Slot::ChallengeScript))
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
        Slot::UpdatedTime => put_utc_time(out, v.updated_at),
        Slot::UpdatedIso => put_utc_iso(out, v.updated_at),
        Slot::StartsAt => {
            if let Some(t) = v.starts_at {
                out.put_u64(t);
            }
        }
        Slot::StartsIso => put_utc_iso(out, v.starts_at.unwrap_or(v.updated_at)),
        Slot::StartsTime => put_utc_time(out, v.starts_at.unwrap_or(v.updated_at)),
        Slot::ChallengeSeed => {
            if let Some((seed, _)) = &v.challenge {
                out.put(seed);
            }
        }
        Slot::ChallengeBits => {
            if let Some((_, bits)) = v.challenge {
                out.put_u64(u64::from(bits));
            }
        }
        Slot::ChallengeScript => {
            if let Some((seed, bits)) = &v.challenge {
                let [a, b, c, d] = SCRIPT_PARTS;
                out.put(a.as_bytes());
                out.put(seed);
                out.put(b.as_bytes());
                out.put_u64(u64::from(*bits));
                out.put(c.as_bytes());
                put_escaped(out, v.room);
                out.put(d.as_bytes());
                out.put(SOLVER.as_bytes());
            }
        }
    }
}

/// One `{{name}}` found in a template: byte range of the whole placeholder and the name.
struct Placeholder<'t> {
    start: usize,
    end: usize,
    pub(super) name: &'t str,
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
mod placeholder_list {
    use super::{check_template, PLACEHOLDERS};

    /// The refusal names every placeholder there is (its list is written out by hand).
    #[test]
    fn the_refusal_lists_every_placeholder() {
        let msg = check_template("{{colour}}").unwrap_err().to_string();
        for (name, _) in PLACEHOLDERS {
            assert!(
                msg.contains(&format!("{{{{{name}}}}}")),
                "{name} missing: {msg}"
            );
        }
    }
}
