//! Small inline SVG charts for the report: lines and dots over time, horizontal limits and
//! labelled vertical marks (the faults). No scripts, no fonts, no network: the page must open
//! from a CI artifact years later.

use std::fmt::Write as _;

const W: f64 = 960.0;
const H: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 30.0;

/// Colours that stay apart on white.
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#7f7f7f", "#d62728",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Line,
    Dots,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub style: Style,
    /// (x, y): x in seconds.
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Vertical marks: (x, label).
    pub marks: Vec<(f64, String)>,
    /// Horizontal lines: (y, label).
    pub hlines: Vec<(f64, String)>,
    pub legend: bool,
}

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` points keeping each bucket's lowest and highest (a peak survives).
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 2 {
        return points.to_vec();
    }
    let size = points.len().div_ceil(max / 2);
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(size) {
        let lo = chunk
            .iter()
            .enumerate()
            .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
        let hi = chunk
            .iter()
            .enumerate()
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1));
        if let (Some((i, &l)), Some((j, &h))) = (lo, hi) {
            if i <= j {
                out.extend([l, h]);
            } else {
                out.extend([h, l]);
            }
        }
    }
    out
}

/// At most `max` points taken evenly (for dots, where a bucket's extremes mean nothing).
pub fn thin<T: Clone>(points: &[T], max: usize) -> Vec<T> {
    if points.len() <= max || max == 0 {
        return points.to_vec();
    }
    (0..max)
        .filter_map(|i| points.get(i * points.len() / max).cloned())
        .collect()
}

/// A round step giving about `n` ticks over `span`.
fn step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let rough = span / n;
    let mag = 10f64.powf(rough.log10().floor());
    let m = rough / mag;
    let nice = if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn num(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The chart as one `<svg>` element.
pub fn render(c: &Chart) -> String {
    let xs = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(c.marks.iter().map(|m| m.0));
    let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !x0.is_finite() || !x1.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    x0 = x0.min(0.0);
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(c.hlines.iter().map(|h| h.0))
        .fold(0.0f64, f64::max);
    let y1 = if y1 > 0.0 && y1.is_finite() {
        y1 * 1.05
    } else {
        1.0
    };
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + ph - y / y1 * ph;

    let mut s = String::new();
    let _ = write!(
        s,
        "<svg viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" \
         font-family=\"sans-serif\" font-size=\"11\">\
         <title>{}</title><rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" \
         fill=\"#fff\" stroke=\"#ccc\"/>\
         <text x=\"{LEFT}\" y=\"14\" font-size=\"13\" font-weight=\"bold\">{}</text>",
        escape(&c.title),
        escape(&c.title)
    );
    // Axes: ticks and grid.
    let ys = step(y1, 5.0);
    // Bounded loops: a float step never runs away.
    for i in 0..=20 {
        let y = f64::from(i) * ys;
        if y > y1 {
            break;
        }
        let py = sy(y);
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 4.0,
            py + 4.0,
            num(y)
        );
    }
    let xs = step(x1 - x0, 10.0);
    let first = (x0 / xs).ceil() * xs;
    for i in 0..=40 {
        let x = first + f64::from(i) * xs;
        if x > x1 {
            break;
        }
        let px = sx(x);
        let _ = write!(
            s,
            "<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM + 14.0,
            num(x)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">s</text>\
         <text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\" \
         fill=\"#555\">{}</text>",
        W - RIGHT,
        H - 4.0,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(&c.y_label)
    );
    // Labels of close lines would overlap: each one further left.
    for (k, (v, label)) in c.hlines.iter().enumerate() {
        let py = sy(*v);
        let lx = LEFT + pw - 2.0 - 140.0 * k as f64;
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#d62728\" \
             stroke-dasharray=\"6 3\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" \
             fill=\"#d62728\">{}</text>",
            LEFT + pw,
            lx,
            py - 3.0,
            escape(label)
        );
    }
    for series in &c.series {
        let mut d = String::with_capacity(series.points.len() * 12);
        for (i, &(x, y)) in series.points.iter().enumerate() {
            let cmd = if i == 0 || series.style == Style::Dots {
                'M'
            } else {
                'L'
            };
            let _ = write!(d, "{cmd}{:.1} {:.1}", sx(x), sy(y));
            if series.style == Style::Dots {
                d.push_str("h0");
            }
        }
        let (width, cap) = match series.style {
            Style::Line => ("1.2", "butt"),
            Style::Dots => ("3", "round"),
        };
        let _ = write!(
            s,
            "<path fill=\"none\" stroke=\"{}\" stroke-width=\"{width}\" stroke-linecap=\"{cap}\" \
             d=\"{d}\"><title>{}</title></path>",
            series.color,
            escape(&series.name)
        );
    }
    for (x, label) in &c.marks {
        let px = sx(*x);
        let _ = write!(
            s,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{:.1}\" stroke=\"#555\" \
             stroke-dasharray=\"3 3\"/><text x=\"{:.1}\" y=\"{:.1}\" \
             transform=\"rotate(90 {:.1} {:.1})\" font-size=\"10\" fill=\"#333\">{}</text>",
            TOP + ph,
            px + 3.0,
            TOP + 4.0,
            px + 3.0,
            TOP + 4.0,
            escape(label)
        );
    }
    if c.legend {
        // One row under the title; what does not fit is left out (the path titles still
        // name every series on hover).
        let mut lx = LEFT;
        for series in &c.series {
            let width = 20.0 + series.name.chars().count() as f64 * 6.0;
            if lx + width > W - RIGHT {
                break;
            }
            let _ = write!(
                s,
                "<rect x=\"{lx:.1}\" y=\"22\" width=\"10\" height=\"10\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"31\">{}</text>",
                series.color,
                lx + 13.0,
                escape(&series.name)
            );
            lx += width;
        }
    }
    s.push_str("</svg>");
    s
}
