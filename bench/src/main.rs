//! smart-limit-bench: many simulated browsers, each with its own cookie jar and keep-alive
//! connection, repeatedly loading a page and its assets until a shared request budget is
//! spent. Replays the ngx-smart-ratelimit measurement (SPEC §1) for `scripts/bench`.

mod args;
mod botnet;
mod check;
mod cookies;
mod history;
mod http;
mod mint;
mod rehearse;
mod stats;

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use args::{Config, Parsed};
use stats::{BrowserLog, Report, NO_ANSWER};

const PAGE_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
const ASSET_ACCEPT: &str = "*/*";

/// The request budget shared by all browsers: exactly `total` requests are sent.
struct Budget {
    taken: AtomicU64,
    total: u64,
}

impl Budget {
    fn take(&self) -> bool {
        self.taken.fetch_add(1, Ordering::Relaxed) < self.total
    }
    fn exhausted(&self) -> bool {
        self.taken.load(Ordering::Relaxed) >= self.total
    }
}

/// Client address of browser `i` with --source-ips: 127.0.0.(10+i), continuing into
/// 127.0.1.x, 127.0.2.x, ... for more than 245 browsers.
fn source_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x7f00_0000u32 | (10 + i as u32))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("botnet") {
        return botnet_main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("check") {
        return check::main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("rehearse") {
        return rehearse::main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("mint") {
        if argv.iter().any(|a| a == "-h" || a == "--help") {
            print!("{}", mint::USAGE);
            return ExitCode::SUCCESS;
        }
        return match mint::main(&argv[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("smart-limit-bench mint: {e}");
                ExitCode::from(2)
            }
        };
    }
    let cfg = match args::parse(argv.into_iter()) {
        Ok(Parsed::Run(cfg)) => cfg,
        Ok(Parsed::Help) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("smart-limit-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let json = cfg.json;
    let report = run(Arc::from(cfg));
    if json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    // A run where nothing answered at all is a failed run (wrong port, server down).
    if report.requests > 0 && report.errors == report.requests {
        eprintln!(
            "smart-limit-bench: no request got an answer: {}",
            report.first_error.as_deref().unwrap_or("?")
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// `smart-limit-bench botnet --url URL [options]` (see [`botnet`]): one line,
/// `admissions N people P bots B share S seconds T replays R`.
fn botnet_main(argv: &[String]) -> ExitCode {
    if argv.iter().any(|a| a == "-h" || a == "--help") {
        print!("{}", botnet::USAGE);
        return ExitCode::SUCCESS;
    }
    let url = argv
        .iter()
        .position(|a| a == "--url")
        .and_then(|i| argv.get(i + 1));
    let Some(url) = url else {
        eprintln!("smart-limit-bench botnet: --url is required");
        return ExitCode::from(2);
    };
    let rest: Vec<String> = argv
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            *a != "--url" && argv.get(i.wrapping_sub(1)).map(String::as_str) != Some("--url")
        })
        .map(|(_, a)| a.clone())
        .collect();
    let cfg = match args::parse_url(url).and_then(|t| botnet::parse(&rest, t)) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("smart-limit-bench botnet: {e}");
            return ExitCode::from(2);
        }
    };
    let out = botnet::run(Arc::new(cfg));
    let bots = out.admissions - out.people;
    let share = if out.admissions > 0 {
        out.people as f64 / out.admissions as f64
    } else {
        0.0
    };
    println!(
        "admissions {} people {} bots {} share {:.2} seconds {:.1} replays {}",
        out.admissions, out.people, bots, share, out.seconds, out.replays
    );
    ExitCode::SUCCESS
}

fn run(cfg: Arc<Config>) -> Report {
    let budget = Arc::new(Budget {
        taken: AtomicU64::new(0),
        total: cfg.requests,
    });
    let barrier = Arc::new(Barrier::new(cfg.browsers + 1));
    let mut handles = Vec::with_capacity(cfg.browsers);
    for i in 0..cfg.browsers {
        let (cfg, budget, barrier) = (cfg.clone(), budget.clone(), barrier.clone());
        let h = thread::Builder::new()
            .name(format!("browser-{i}"))
            .stack_size(256 * 1024)
            .spawn(move || browse(i, &cfg, &budget, &barrier))
            .expect("spawn browser thread");
        handles.push(h);
    }
    barrier.wait();
    let start = Instant::now();
    let logs: Vec<BrowserLog> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| BrowserLog::new()))
        .collect();
    Report::build(&cfg, &logs, start)
}

/// One simulated browser: load the page; when it is 200 load every asset in order on the
/// same connection; when it is not, wait `--wait-ms` (a waiting page refreshing) and reload.
fn browse(i: usize, cfg: &Config, budget: &Budget, barrier: &Barrier) -> BrowserLog {
    let source = cfg.source_ips.then(|| source_ip(i));
    let mut client = http::Client::new(&cfg.target, source, cfg.timeout);
    let mut jar = cookies::Jar::default();
    let mut log = BrowserLog::new();
    barrier.wait();

    'browsing: while budget.take() {
        let page_ok = fetch(
            &mut client,
            &mut jar,
            &mut log,
            budget,
            &cfg.page,
            PAGE_ACCEPT,
            true,
        );
        if page_ok {
            let mut all_ok = true;
            for asset in &cfg.assets {
                if !budget.take() {
                    break 'browsing; // budget spent mid-page: not a complete load
                }
                all_ok &= fetch(
                    &mut client,
                    &mut jar,
                    &mut log,
                    budget,
                    asset,
                    ASSET_ACCEPT,
                    false,
                );
            }
            if all_ok {
                log.complete += 1;
            }
            if !cfg.think.is_zero() && !budget.exhausted() {
                thread::sleep(cfg.think);
            }
        } else if !budget.exhausted() {
            thread::sleep(cfg.wait);
        }
    }
    log.connects = client.connects;
    log
}

/// One request; records status and latency, stores cookies. True when the answer was 200.
/// The path of a same-site redirect (`/x` or `http://host/x`), if it is one.
fn redirect_path(location: &str) -> Option<&str> {
    if location.starts_with('/') {
        return Some(location);
    }
    let rest = location
        .strip_prefix("http://")
        .or_else(|| location.strip_prefix("https://"))?;
    rest.find('/').and_then(|i| rest.get(i..))
}

/// GETs `path` as a browser does: cookies from the jar and back into it, and a redirect
/// (the waiting room's cookie check answers a first visit with `307` to the same URL)
/// followed at once, at most 3 times; each hop is a request of the budget.
#[allow(clippy::too_many_arguments)]
fn fetch(
    client: &mut http::Client,
    jar: &mut cookies::Jar,
    log: &mut BrowserLog,
    budget: &Budget,
    path: &str,
    accept: &str,
    page: bool,
) -> bool {
    let mut path = path.to_string();
    for hop in 0..4 {
        let cookie = jar.header();
        let t0 = Instant::now();
        let (status, location) = match client.get(&path, accept, cookie.as_deref()) {
            Ok(r) => {
                for c in &r.set_cookies {
                    jar.store(c);
                }
                log.body_bytes += r.body_bytes;
                (r.status, r.location)
            }
            Err(e) => {
                if log.first_error.is_none() {
                    log.first_error = Some(format!("{path}: {e}"));
                }
                (NO_ANSWER, None)
            }
        };
        log.record(status, t0.elapsed(), page);
        let next = matches!(status, 301 | 302 | 303 | 307 | 308)
            .then(|| {
                location
                    .as_deref()
                    .and_then(redirect_path)
                    .map(str::to_string)
            })
            .flatten();
        match next {
            Some(p) if hop < 3 && budget.take() => path = p,
            _ => return status == 200,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ips_spread_over_loopback() {
        assert_eq!(source_ip(0), Ipv4Addr::new(127, 0, 0, 10));
        assert_eq!(source_ip(49), Ipv4Addr::new(127, 0, 0, 59));
        assert_eq!(source_ip(246), Ipv4Addr::new(127, 0, 1, 0));
        assert!(source_ip(100_000).is_loopback());
    }

    #[test]
    fn redirects_stay_on_the_site() {
        assert_eq!(redirect_path("/a?b"), Some("/a?b"));
        assert_eq!(redirect_path("http://127.0.0.1:8080/x"), Some("/x"));
        assert_eq!(redirect_path("http://127.0.0.1:8080"), None);
        assert_eq!(redirect_path("elsewhere"), None);
    }

    #[test]
    fn budget_is_exact() {
        let b = Budget {
            taken: AtomicU64::new(0),
            total: 3,
        };
        assert!(b.take() && b.take() && b.take());
        assert!(!b.take());
        assert!(b.exhausted());
    }
}
