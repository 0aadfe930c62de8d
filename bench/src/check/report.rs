//! The HTML report: one self-contained page (inline SVG, no script, nothing fetched) with the
//! summary, five plots with the faults marked, and the violations.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::history::{Outcome, Req};

use super::clients::reqs_of;
use super::latency::{percentile, unanswered};
use super::load::History;
use super::svg::{self, escape, Chart, Series, Style, PALETTE};
use super::violation::Rule;
use super::Findings;

/// Points per series at most, so that the page stays small.
const MAX_POINTS: usize = 2000;
/// Clients whose positions are drawn.
const SAMPLED: usize = 30;
/// Violations listed per rule in the table.
const TABLE_PER_RULE: usize = 100;

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn color(i: usize) -> &'static str {
    PALETTE.get(i % PALETTE.len()).copied().unwrap_or("#000")
}

/// The faults, as labelled vertical marks.
fn marks(h: &History) -> Vec<(f64, String)> {
    h.faults
        .iter()
        .map(|f| {
            let node = f.node.map(|n| format!(" n{n}")).unwrap_or_default();
            (secs(f.at), format!("{}{node}", f.what))
        })
        .collect()
}

/// A step function (a value holding until the next change) as a line's points.
fn steps(points: &[(u64, u64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    let mut prev: Option<f64> = None;
    for &(t, v) in points {
        if let Some(p) = prev {
            out.push((secs(t), p));
        }
        out.push((secs(t), v as f64));
        prev = Some(v as f64);
    }
    out
}

/// One series per node from the metrics samples.
fn per_node_metrics(h: &History, what: fn(&crate::history::Metrics) -> u64) -> Vec<Series> {
    h.metrics
        .chunk_by(|a, b| a.node == b.node)
        .enumerate()
        .filter_map(|(i, samples)| {
            let node = samples.first()?.node;
            let points: Vec<(f64, f64)> = samples
                .iter()
                .map(|m| (secs(m.at), what(m) as f64))
                .collect();
            Some(Series {
                name: format!("node {node} metrics"),
                color: color(i + 1),
                style: Style::Line,
                points: svg::downsample(&points, MAX_POINTS),
            })
        })
        .collect()
}

fn active(h: &History, f: &Findings) -> Chart {
    let mut series = vec![Series {
        name: "sessions (clients)".into(),
        color: color(0),
        style: Style::Line,
        points: svg::downsample(&steps(&f.admission.series), MAX_POINTS),
    }];
    series.extend(per_node_metrics(h, |m| m.active));
    Chart {
        title: "(1) Active sessions: proven by the clients' answers, and each node's own count"
            .into(),
        y_label: "sessions".into(),
        series,
        marks: marks(h),
        hlines: vec![
            (
                h.run.max_active as f64,
                format!("max_active {}", h.run.max_active),
            ),
            (
                f.admission.limit as f64,
                format!("limit {}", f.admission.limit),
            ),
        ],
        legend: true,
    }
}

fn line_length(h: &History) -> Chart {
    let mut per_sec: BTreeMap<u64, u64> = BTreeMap::new();
    for r in h.reqs.iter().filter(|r| r.outcome == Outcome::Waiting) {
        if let Some(q) = r.qlen {
            let e = per_sec.entry(r.sent / 1000).or_insert(0);
            *e = (*e).max(q);
        }
    }
    let told: Vec<(f64, f64)> = per_sec
        .iter()
        .map(|(&s, &q)| (s as f64, q as f64))
        .collect();
    let mut series = vec![Series {
        name: "longest line told (per second)".into(),
        color: color(0),
        style: Style::Line,
        points: svg::downsample(&told, MAX_POINTS),
    }];
    series.extend(per_node_metrics(h, |m| m.queue));
    Chart {
        title: "(2) Line length: the longest told each second, and each node's queue".into(),
        y_label: "waiting".into(),
        series,
        marks: marks(h),
        hlines: Vec::new(),
        legend: true,
    }
}

fn positions(h: &History, f: &Findings) -> Chart {
    let mut waited: Vec<_> = f
        .clients
        .iter()
        .filter(|c| !c.minter())
        .filter(|c| reqs_of(h, c).iter().any(|r| r.pos.is_some()))
        .filter_map(|c| c.arrival.map(|a| (a.sent, c)))
        .collect();
    waited.sort_by_key(|(a, c)| (*a, c.id));
    let series = svg::thin(&waited, SAMPLED)
        .into_iter()
        .enumerate()
        .map(|(i, (_, c))| {
            let points: Vec<(f64, f64)> = reqs_of(h, c)
                .iter()
                .filter(|r| r.outcome == Outcome::Waiting)
                .filter_map(|r| r.pos.map(|p| (secs(r.sent), p as f64)))
                .collect();
            Series {
                name: format!("client {}", c.id),
                color: color(i),
                style: Style::Line,
                points: svg::downsample(&points, MAX_POINTS),
            }
        })
        .collect();
    Chart {
        title: format!(
            "(3) Positions told to {} of {} waiting clients, chosen evenly by arrival",
            waited.len().min(SAMPLED),
            waited.len()
        ),
        y_label: "position".into(),
        series,
        marks: marks(h),
        hlines: Vec::new(),
        legend: false,
    }
}

fn order(h: &History, f: &Findings) -> Chart {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for c in f.clients.iter().filter(|c| !c.minter()) {
        let (Some(a), Some(adm)) = (c.arrival, c.admitted) else {
            continue;
        };
        let p = (secs(a.sent), secs(adm.done));
        if f.order.involved.binary_search(&c.id).is_ok() {
            bad.push(p);
        } else {
            ok.push(p);
        }
    }
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    Chart {
        title: "(4) Admission against arrival (x: arrived, y: admitted; red: in an inversion)"
            .into(),
        y_label: "admitted at (s)".into(),
        series: vec![
            Series {
                name: "admitted".into(),
                color: color(0),
                style: Style::Dots,
                points: svg::thin(&ok, MAX_POINTS),
            },
            Series {
                name: "inversion".into(),
                color: "#d62728",
                style: Style::Dots,
                points: svg::thin(&bad, MAX_POINTS),
            },
        ],
        marks: marks(h),
        hlines: Vec::new(),
        legend: true,
    }
}

fn latency(h: &History, f: &Findings) -> Chart {
    let mut samples: Vec<(u32, u64, u64)> = h
        .reqs
        .iter()
        .filter(|r: &&Req| !unanswered(r))
        .map(|r| (r.node, r.sent / 1000, r.done.saturating_sub(r.sent)))
        .collect();
    samples.sort_unstable();
    let mut series = Vec::new();
    for (i, node) in samples.chunk_by(|a, b| a.0 == b.0).enumerate() {
        let Some(&(n, _, _)) = node.first() else {
            continue;
        };
        let (mut p50, mut p99) = (Vec::new(), Vec::new());
        for sec in node.chunk_by(|a, b| a.1 == b.1) {
            let durations: Vec<u64> = sec.iter().map(|s| s.2).collect();
            let at = sec.first().map_or(0.0, |s| s.1 as f64);
            p50.push((at, percentile(&durations, 50) as f64));
            p99.push((at, percentile(&durations, 99) as f64));
        }
        for (name, points) in [("p50", p50), ("p99", p99)] {
            series.push(Series {
                name: format!("node {n} {name}"),
                color: color(i),
                style: if name == "p50" {
                    Style::Line
                } else {
                    Style::Dots
                },
                points: svg::downsample(&points, MAX_POINTS),
            });
        }
    }
    Chart {
        title: "(5) Latency per second and node (line: p50, dots: p99)".into(),
        y_label: "ms".into(),
        series,
        marks: marks(h),
        hlines: vec![(
            f.latency.limit_ms as f64,
            format!("limit {} ms", f.latency.limit_ms),
        )],
        legend: true,
    }
}

fn violations_table(f: &Findings, out: &mut String) {
    out.push_str("<table><tr><th>rule</th><th>at (ms)</th><th>clients</th><th>what</th></tr>\n");
    for rule in Rule::ALL {
        let mine: Vec<_> = f.violations().filter(|v| v.rule == rule).collect();
        for v in mine.iter().take(TABLE_PER_RULE) {
            let ids: Vec<String> = v.clients.iter().map(u64::to_string).collect();
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(rule.label()),
                v.at_ms,
                escape(&ids.join(", ")),
                escape(&v.text)
            );
        }
        if mine.len() > TABLE_PER_RULE {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td colspan=\"3\">... and {} more</td></tr>",
                escape(rule.label()),
                mine.len() - TABLE_PER_RULE
            );
        }
    }
    out.push_str("</table>\n");
}

/// The page, for history `name` with summary `summary`.
pub fn html(h: &History, f: &Findings, summary: &str, name: &str) -> String {
    let verdict = if f.clean() { "PASS" } else { "FAIL" };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
         <title>smart_limit check: {}</title>\n<style>\
         body{{font-family:sans-serif;margin:1.5em;color:#222}}\
         pre{{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}}\
         table{{border-collapse:collapse;font-size:12px}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}}\
         figure{{margin:1em 0}}.PASS{{color:#2ca02c}}.FAIL{{color:#d62728}}\
         </style></head><body>\n<h1>smart_limit check: {}</h1>\n\
         <p class=\"{verdict}\"><b>{verdict}</b>: {} violation(s)</p>\n",
        escape(name),
        escape(name),
        f.violations().count()
    );
    out.push_str("<h2>Summary</h2>\n<pre>");
    out.push_str(&escape(summary));
    out.push_str("</pre>\n<h2>Plots</h2>\n");
    for chart in [
        active(h, f),
        line_length(h),
        positions(h, f),
        order(h, f),
        latency(h, f),
    ] {
        out.push_str("<figure>");
        out.push_str(&svg::render(&chart));
        out.push_str("</figure>\n");
    }
    out.push_str("<h2>Violations</h2>\n");
    violations_table(f, &mut out);
    out.push_str("</body></html>\n");
    out
}
