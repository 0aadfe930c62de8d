//! Events made at run time through the control endpoint ([S18]): created there, or a
//! configured event cancelled there. A room keeps them as a small table of lines, one per
//! entry, in its shared memory (and, on a fleet, in Redis, so every node has the same table);
//! each line is the directive's own arguments, so an entry is read back by [`parse_event`] and
//! meets the same checks `nginx -t` makes.
//!
//! ```text
//! drop room=shop prequeue=@1796119800 start=@1796121600 shuffle=on max_active=500
//! -sale                      (the configured event "sale", cancelled)
//! ```

use super::{check_events, parse_event, EventError, EventSpec};

/// Most entries of one room's table: an operator's handful of launches, with room to spare.
pub const MAX_ENTRIES: usize = 8;
/// Most bytes of one room's table (the room's shared memory keeps this much for it).
pub const MAX_TABLE_BYTES: usize = 4000;

/// One entry of a room's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// An event created at run time.
    Created(EventSpec),
    /// A configured event (`smart_limit_event`) cancelled at run time, by name.
    Cancelled(String),
}

/// What the control endpoint asks of a room's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Create(EventSpec),
    Cancel(String),
}

/// Where an event of a room comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Config,
    Control,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Config => "config",
            Source::Control => "control",
        }
    }
}

/// The directive's arguments that make `spec` again (instants as `@EPOCH`).
pub fn spec_line(spec: &EventSpec) -> String {
    let mut line = format!(
        "{} room={} prequeue=@{} start=@{}",
        spec.name, spec.room, spec.prequeue, spec.start
    );
    let mut add = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            line.push_str(&format!(" {k}={v}"));
        }
    };
    add("end", spec.end.map(|e| format!("@{e}")));
    add(
        "shuffle",
        Some(if spec.shuffle { "on" } else { "off" }.into()),
    );
    add("max_active", spec.max_active.map(|n| n.to_string()));
    add("new_per_minute", spec.new_per_minute.map(|n| n.to_string()));
    add("grant", spec.grant_ms.map(|ms| format!("{ms}ms")));
    add("page", spec.page.clone());
    line
}

impl Entry {
    pub fn name(&self) -> &str {
        match self {
            Entry::Created(s) => &s.name,
            Entry::Cancelled(n) => n,
        }
    }

    pub fn line(&self) -> String {
        match self {
            Entry::Created(s) => spec_line(s),
            Entry::Cancelled(n) => format!("-{n}"),
        }
    }

    /// Reads a line of a table (written by [`Entry::line`], perhaps by another node).
    pub fn parse(line: &str) -> Result<Entry, EventError> {
        if let Some(name) = line.strip_prefix('-') {
            // A name is checked as the directive checks it.
            let spec = parse_event(&[name, "room=x", "start=@1"])?;
            return Ok(Entry::Cancelled(spec.name));
        }
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        parse_event(&words).map(Entry::Created)
    }
}

/// Reads a room's table: its entries, and the lines that are not entries (each with why).
pub fn read_table(text: &str) -> (Vec<Entry>, Vec<EventError>) {
    let mut entries = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match Entry::parse(line) {
            Ok(e) => entries.push(e),
            Err(e) => bad.push(e),
        }
    }
    (entries, bad)
}

pub fn write_table(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(Entry::line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A room's events: the configured ones not cancelled, then those created at run time.
pub fn merge<'a>(
    configured: &'a [EventSpec],
    entries: &'a [Entry],
) -> Vec<(&'a EventSpec, Source)> {
    let cancelled = |name: &str| {
        entries
            .iter()
            .any(|e| matches!(e, Entry::Cancelled(n) if n == name))
    };
    let kept = configured
        .iter()
        .filter(|s| !cancelled(&s.name))
        .map(|s| (s, Source::Config));
    let created = entries.iter().filter_map(|e| match e {
        Entry::Created(s) => Some((s, Source::Control)),
        Entry::Cancelled(_) => None,
    });
    kept.chain(created).collect()
}

/// The table after `change`, checked as `nginx -t` checks a configuration: a name used once
/// among the room's events, no two of them overlapping, at most [`MAX_ENTRIES`] entries in
/// [`MAX_TABLE_BYTES`]. Events created earlier that are over by `now_secs` leave the table
/// (as do cancellations of events no longer configured).
pub fn apply(
    configured: &[EventSpec],
    entries: &[Entry],
    change: Change,
    now_secs: u64,
) -> Result<Vec<Entry>, EventError> {
    let mut next: Vec<Entry> = entries
        .iter()
        .filter(|e| match e {
            Entry::Created(s) => s.end.is_none_or(|end| end > now_secs),
            Entry::Cancelled(n) => configured.iter().any(|s| &s.name == n),
        })
        .cloned()
        .collect();
    match change {
        Change::Create(spec) => {
            let mut all: Vec<EventSpec> = merge(configured, &next)
                .into_iter()
                .map(|(s, _)| s.clone())
                .collect();
            let room = spec.room.clone();
            all.push(spec.clone());
            check_events(&all, |r| r == room)?;
            next.push(Entry::Created(spec));
        }
        Change::Cancel(name) => {
            if let Some(i) = next
                .iter()
                .position(|e| matches!(e, Entry::Created(s) if s.name == name))
            {
                next.remove(i);
            } else if merge(configured, &next)
                .iter()
                .any(|(s, src)| *src == Source::Config && s.name == name)
            {
                next.push(Entry::Cancelled(name));
            } else {
                return Err(EventError::NotFound(name));
            }
        }
    }
    if next.len() > MAX_ENTRIES || write_table(&next).len() > MAX_TABLE_BYTES {
        return Err(EventError::TableFull(MAX_ENTRIES));
    }
    Ok(next)
}
