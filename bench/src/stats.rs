//! Per-browser records and the run's summary (text and JSON).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use crate::args::Config;
use crate::page::PageLoad;
pub use crate::page::NO_ANSWER;

#[derive(Clone, Copy)]
pub struct Sample {
    pub status: u16,
    pub micros: u32,
    pub page: bool,
}

/// What one browser saw.
pub struct BrowserLog {
    pub samples: Vec<Sample>,
    /// Page loads by kind (see [`PageLoad`]).
    pub complete: u64,
    pub broken: u64,
    pub waiting: u64,
    pub error_pages: u64,
    pub unfinished: u64,
    /// Final statuses of the assets that failed a page (`NO_ANSWER` for no answer).
    pub failed_assets: BTreeMap<u16, u64>,
    pub connects: u64,
    pub body_bytes: u64,
    pub last_done: Option<Instant>,
    pub first_error: Option<String>,
}

impl BrowserLog {
    pub fn new() -> Self {
        BrowserLog {
            samples: Vec::new(),
            complete: 0,
            broken: 0,
            waiting: 0,
            error_pages: 0,
            unfinished: 0,
            failed_assets: BTreeMap::new(),
            connects: 0,
            body_bytes: 0,
            last_done: None,
            first_error: None,
        }
    }

    pub fn record(&mut self, status: u16, took: Duration, page: bool) {
        let micros = took.as_micros().min(u32::MAX as u128) as u32;
        self.samples.push(Sample {
            status,
            micros,
            page,
        });
        self.last_done = Some(Instant::now());
    }

    /// Counts one page load.
    pub fn count(&mut self, load: PageLoad) {
        match load {
            PageLoad::Complete => self.complete += 1,
            PageLoad::Broken => self.broken += 1,
            PageLoad::Waiting => self.waiting += 1,
            PageLoad::Error => self.error_pages += 1,
            PageLoad::Unfinished => self.unfinished += 1,
        }
    }

    /// Takes in the requests another thread made for this browser (its parallel asset
    /// requests): samples, bytes, the first error, the last answer's time.
    pub fn absorb(&mut self, other: BrowserLog) {
        self.samples.extend(other.samples);
        self.body_bytes += other.body_bytes;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.last_done = self.last_done.max(other.last_done);
    }
}

/// The run's summary; its JSON form ([`Report::json`]) is what `scripts/bench` reads.
#[derive(Serialize)]
pub struct Report {
    pub label: String,
    pub url: String,
    pub browsers: usize,
    pub budget: u64,
    pub wait_ms: u64,
    pub source_ips: bool,
    pub requests: u64,
    pub ok: u64,
    pub other: u64,
    pub errors: u64,
    #[serde(serialize_with = "statuses_json")]
    pub statuses: BTreeMap<u16, u64>,
    pub pages: u64,
    pub pages_ok: u64,
    #[serde(rename = "complete_page_loads")]
    pub complete: u64,
    #[serde(rename = "broken_page_loads")]
    pub broken: u64,
    #[serde(rename = "waiting_pages")]
    pub waiting: u64,
    pub error_pages: u64,
    #[serde(rename = "unfinished_page_loads")]
    pub unfinished: u64,
    #[serde(serialize_with = "statuses_json")]
    pub failed_assets: BTreeMap<u16, u64>,
    pub browsers_served: u64,
    /// Browsers that got at least one broken page.
    pub browsers_broken: u64,
    #[serde(rename = "connections")]
    pub connects: u64,
    pub body_bytes: u64,
    #[serde(rename = "wall_seconds", serialize_with = "round3")]
    pub wall_secs: f64,
    #[serde(rename = "requests_per_second", serialize_with = "round2")]
    pub rps: f64,
    #[serde(serialize_with = "round3")]
    pub p50_ms: f64,
    #[serde(serialize_with = "round3")]
    pub p99_ms: f64,
    #[serde(serialize_with = "round3")]
    pub max_ms: f64,
    #[serde(serialize_with = "round3")]
    pub ok_p50_ms: f64,
    #[serde(serialize_with = "round3")]
    pub ok_p99_ms: f64,
    pub first_error: Option<String>,
}

/// Nearest-rank percentile of sorted microsecond values, in milliseconds (0 when empty).
fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

impl Report {
    pub fn build(cfg: &Config, logs: &[BrowserLog], start: Instant) -> Report {
        let mut statuses = BTreeMap::new();
        let mut all = Vec::new();
        let mut oks = Vec::new();
        let (mut pages, mut pages_ok, mut complete, mut served, mut connects, mut bytes) =
            (0, 0, 0, 0, 0, 0);
        let (mut broken, mut waiting, mut error_pages, mut unfinished, mut browsers_broken) =
            (0, 0, 0, 0, 0);
        let mut failed_assets = BTreeMap::new();
        let mut end = start;
        let mut first_error = None;
        for log in logs {
            for s in &log.samples {
                *statuses.entry(s.status).or_insert(0u64) += 1;
                all.push(s.micros);
                if s.status == 200 {
                    oks.push(s.micros);
                }
                if s.page {
                    pages += 1;
                    pages_ok += (s.status == 200) as u64;
                }
            }
            complete += log.complete;
            served += (log.complete > 0) as u64;
            broken += log.broken;
            browsers_broken += (log.broken > 0) as u64;
            waiting += log.waiting;
            error_pages += log.error_pages;
            unfinished += log.unfinished;
            for (status, n) in &log.failed_assets {
                *failed_assets.entry(*status).or_insert(0u64) += n;
            }
            connects += log.connects;
            bytes += log.body_bytes;
            if let Some(t) = log.last_done {
                end = end.max(t);
            }
            if first_error.is_none() {
                first_error = log.first_error.clone();
            }
        }
        all.sort_unstable();
        oks.sort_unstable();
        let requests = all.len() as u64;
        let ok = oks.len() as u64;
        let wall_secs = end.duration_since(start).as_secs_f64();
        Report {
            label: cfg.label.clone(),
            url: cfg.target.url.clone(),
            browsers: cfg.browsers,
            budget: cfg.requests,
            wait_ms: u64::try_from(cfg.wait.as_millis()).unwrap_or(u64::MAX),
            source_ips: cfg.source_ips,
            requests,
            ok,
            other: requests - ok,
            errors: statuses.get(&NO_ANSWER).copied().unwrap_or(0),
            statuses,
            pages,
            pages_ok,
            complete,
            broken,
            waiting,
            error_pages,
            unfinished,
            failed_assets,
            browsers_served: served,
            browsers_broken,
            connects,
            body_bytes: bytes,
            wall_secs,
            rps: if wall_secs > 0.0 {
                requests as f64 / wall_secs
            } else {
                0.0
            },
            p50_ms: percentile_ms(&all, 50.0),
            p99_ms: percentile_ms(&all, 99.0),
            max_ms: all.last().map(|&m| m as f64 / 1000.0).unwrap_or(0.0),
            ok_p50_ms: percentile_ms(&oks, 50.0),
            ok_p99_ms: percentile_ms(&oks, 99.0),
            first_error,
        }
    }
}

/// `200=5 503=2 error=1`.
fn statuses_text(statuses: &BTreeMap<u16, u64>) -> String {
    let parts: Vec<String> = statuses
        .iter()
        .map(|(s, n)| {
            if *s == NO_ANSWER {
                format!("error={n}")
            } else {
                format!("{s}={n}")
            }
        })
        .collect();
    parts.join(" ")
}

impl Report {
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "label:                 {}", self.label);
        let _ = writeln!(o, "url:                   {}", self.url);
        let _ = writeln!(
            o,
            "browsers:              {} (source ips: {}, wait {} ms)",
            self.browsers,
            if self.source_ips {
                "one per browser"
            } else {
                "shared"
            },
            self.wait_ms
        );
        let _ = writeln!(o, "requests:              {}", self.requests);
        let _ = writeln!(o, "status 200:            {}", self.ok);
        let _ = writeln!(o, "other:                 {}", self.other);
        let _ = writeln!(
            o,
            "statuses:              {}",
            statuses_text(&self.statuses)
        );
        let _ = writeln!(o, "pages (200/all):       {}/{}", self.pages_ok, self.pages);
        let _ = writeln!(o, "complete page loads:   {}", self.complete);
        let _ = writeln!(o, "broken page loads:     {}", self.broken);
        let _ = writeln!(o, "waiting pages:         {}", self.waiting);
        let _ = writeln!(o, "error pages:           {}", self.error_pages);
        let _ = writeln!(o, "unfinished page loads: {}", self.unfinished);
        let _ = writeln!(
            o,
            "failed assets:         {}",
            statuses_text(&self.failed_assets)
        );
        let _ = writeln!(
            o,
            "browsers served:       {} of {}",
            self.browsers_served, self.browsers
        );
        let _ = writeln!(
            o,
            "browsers shown a broken page: {} of {}",
            self.browsers_broken, self.browsers
        );
        let _ = writeln!(o, "connections opened:    {}", self.connects);
        let _ = writeln!(o, "body bytes received:   {}", self.body_bytes);
        let _ = writeln!(o, "wall seconds:          {:.2}", self.wall_secs);
        let _ = writeln!(o, "requests/s:            {:.1}", self.rps);
        let _ = writeln!(
            o,
            "latency ms (all):      p50 {:.2}  p99 {:.2}  max {:.2}",
            self.p50_ms, self.p99_ms, self.max_ms
        );
        let _ = writeln!(
            o,
            "latency ms (200 only): p50 {:.2}  p99 {:.2}",
            self.ok_p50_ms, self.ok_p99_ms
        );
        if let Some(e) = &self.first_error {
            let _ = writeln!(o, "first error:           {e}");
        }
        o
    }

    /// The report as one JSON object (the keys `scripts/bench` reads with jq).
    pub fn json(&self) -> String {
        // Serializing plain numbers, strings and maps with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

/// A status map's keys as JSON object keys: the status, or `error` for no answer.
fn statuses_json<S: Serializer>(statuses: &BTreeMap<u16, u64>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(statuses.iter().map(|(status, n)| {
        let key = if *status == NO_ANSWER {
            "error".to_string()
        } else {
            status.to_string()
        };
        (key, n)
    }))
}

/// A figure rounded to 3 decimals (milliseconds to the microsecond, seconds to the ms).
fn round3<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((x * 1000.0).round() / 1000.0)
}

/// A rate rounded to 2 decimals.
fn round2<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((x * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&v, 50.0), 50.0);
        assert_eq!(percentile_ms(&v, 99.0), 99.0);
        assert_eq!(percentile_ms(&[7000], 99.0), 7.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn json_keys_and_values() {
        let r = Report {
            label: "a\"b\\c\n\u{1}".into(),
            url: "http://127.0.0.1:1".into(),
            browsers: 2,
            budget: 10,
            wait_ms: 200,
            source_ips: true,
            requests: 10,
            ok: 7,
            other: 3,
            errors: 1,
            statuses: BTreeMap::from([(200, 7), (503, 2), (NO_ANSWER, 1)]),
            pages: 4,
            pages_ok: 3,
            complete: 2,
            broken: 1,
            waiting: 1,
            error_pages: 0,
            unfinished: 0,
            failed_assets: BTreeMap::from([(503, 1)]),
            browsers_served: 2,
            browsers_broken: 1,
            connects: 5,
            body_bytes: 1234,
            wall_secs: 1.23456,
            rps: 8.104,
            p50_ms: 0.5,
            p99_ms: 2.0004,
            max_ms: 3.0,
            ok_p50_ms: 0.25,
            ok_p99_ms: 1.0,
            first_error: None,
        };
        let text = r.json();
        assert!(
            text.starts_with("{\"label\":\"a\\\"b\\\\c\\n\\u0001\","),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let want = serde_json::json!({
            "label": "a\"b\\c\n\u{1}", "url": "http://127.0.0.1:1", "browsers": 2,
            "budget": 10, "wait_ms": 200, "source_ips": true, "requests": 10, "ok": 7,
            "other": 3, "errors": 1, "statuses": {"200": 7, "503": 2, "error": 1},
            "pages": 4, "pages_ok": 3, "complete_page_loads": 2, "broken_page_loads": 1,
            "waiting_pages": 1, "error_pages": 0, "unfinished_page_loads": 0,
            "failed_assets": {"503": 1}, "browsers_served": 2, "browsers_broken": 1,
            "connections": 5, "body_bytes": 1234, "wall_seconds": 1.235,
            "requests_per_second": 8.1, "p50_ms": 0.5, "p99_ms": 2.0, "max_ms": 3.0,
            "ok_p50_ms": 0.25, "ok_p99_ms": 1.0, "first_error": null
        });
        assert_eq!(v, want);
    }
}
