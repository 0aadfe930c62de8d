//! Prometheus text exposition (format 0.0.4): family headers, label escaping, samples.

use std::fmt::Write as _;

/// Escapes a label value: backslash, double quote and line feed (exposition format 0.0.4).
pub(super) fn label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    // Help texts are constants without backslashes or line feeds.
    let _ = writeln!(out, "# HELP smart_limit_{name} {help}");
    let _ = writeln!(out, "# TYPE smart_limit_{name} {kind}");
}

pub(super) fn sample(
    out: &mut String,
    name: &str,
    room: &str,
    extra: Option<(&str, &str)>,
    value: u64,
) {
    out.push_str("smart_limit_");
    out.push_str(name);
    out.push_str("{room=\"");
    label(out, room);
    out.push('"');
    if let Some((k, v)) = extra {
        out.push(',');
        out.push_str(k);
        out.push_str("=\"");
        label(out, v);
        out.push('"');
    }
    let _ = writeln!(out, "}} {value}");
}

pub(super) fn value(out: &mut String, v: Value) {
    let _ = match v {
        Value::Int(n) => writeln!(out, "{n}"),
        Value::Milli(m) => writeln!(out, "{}.{:03}", m / 1000, m % 1000),
    };
}

/// A sample value: an integer, or a decimal given in thousandths (rates, probabilities).
#[derive(Debug, Clone, Copy)]
pub(super) enum Value {
    Int(u64),
    Milli(u64),
}

/// `smart_limit_build_info{version="...",nginx="..."} 1`: the module's version and the nginx
/// it was built for, as Prometheus exporters name their build (one sample, always 1).
pub fn render_build_info(version: &str, nginx: &str) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "build_info",
        "gauge",
        "The module's version and the nginx version it was built for, as labels; always 1.",
    );
    out.push_str("smart_limit_build_info{version=\"");
    label(&mut out, version);
    out.push_str("\",nginx=\"");
    label(&mut out, nginx);
    out.push_str("\"} 1\n");
    out
}
