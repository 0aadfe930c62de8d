//! smart-limit-bench: many simulated browsers, each with its own cookie jar and keep-alive
//! connections, repeatedly loading a page and then all its assets at once, as browsers do,
//! until a shared request budget is spent; each page load is counted as what the person
//! saw (complete, broken, waiting, error: see [`page`]). Replays the ngx-smart-ratelimit
//! measurement (SPEC §1) for `scripts/bench`.

mod args;
mod auto;
mod botnet;
mod check;
mod cookies;
mod history;
mod http;
mod mint;
mod origin;
mod page;
mod rehearse;
mod stats;

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::thread;
use std::time::Instant;

use args::{ArgsError, Config};
use page::{Asset, Dest, Document, Navigation, PageLoad};
use stats::{BrowserLog, Report, NO_ANSWER};

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
    if argv.first().map(String::as_str) == Some("auto") {
        return auto::main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("origin") {
        return origin::main(&argv[1..]);
    }
    if argv.first().map(String::as_str) == Some("mint") {
        return match mint::main(&argv[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(mint::MintError::Usage(e)) => args::usage(&e),
            Err(e) => {
                eprintln!("smart-limit-bench mint: {e}");
                ExitCode::from(2)
            }
        };
    }
    let cfg = match args::parse(argv.into_iter()) {
        Ok(cfg) => cfg,
        Err(ArgsError::Clap(e)) => return args::usage(&e),
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
    let cfg = match botnet::parse(argv) {
        Ok(cfg) => cfg,
        Err(e) => return args::usage(&e),
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

/// Connections a browser opens to one host at most over HTTP/1.1 (Chromium's 6): the
/// assets beyond that many wait for a connection of the page load, as in a browser.
const MAX_CONNS_PER_HOST: usize = 6;

/// One simulated browser: ask for the page as a navigation; when the answer is the
/// origin's page, ask for every asset at once (one connection each, see [`load_assets`]);
/// count the page load as complete, broken, waiting or error ([`page::classify`]). After a
/// complete page it loads the page again after `--think-ms` (a person clicking on); after
/// anything else after `--wait-ms` (the waiting page refreshing itself, a person reloading
/// a broken or error page).
fn browse(i: usize, cfg: &Config, budget: &Budget, barrier: &Barrier) -> BrowserLog {
    let source = cfg.source_ips.then(|| source_ip(i));
    let mut client = http::Client::new(&cfg.target, source, cfg.timeout);
    let mut asset_clients: Vec<http::Client> = (0..cfg.assets.len().min(MAX_CONNS_PER_HOST))
        .map(|_| http::Client::new(&cfg.target, source, cfg.timeout))
        .collect();
    let jar = Mutex::new(cookies::Jar::default());
    let mut log = BrowserLog::new();
    let mut nav = Navigation::Typed;
    barrier.wait();

    while budget.take() {
        let headers = page::navigation_headers(nav);
        let request = Request {
            path: &cfg.page,
            accept: page::NAV_ACCEPT,
            headers: &headers,
            page: true,
        };
        let cookie = lock(&jar).header();
        let doc = match fetch(&mut client, &jar, &mut log, budget, &request, cookie) {
            Fetched::Cut => Document::Cut,
            Fetched::Answer {
                status,
                retry_after,
                body,
            } => page::document(status, retry_after, &body, cfg.page_marker.as_deref()),
        };
        let load = if doc == Document::Origin {
            let assets = load_assets(&mut asset_clients, cfg, &jar, &mut log, budget);
            for a in &assets {
                if let Asset::Failed(status) = a {
                    *log.failed_assets.entry(*status).or_insert(0) += 1;
                }
            }
            page::classify(doc, &assets)
        } else {
            page::classify(doc, &[])
        };
        log.count(load);
        let pause = match load {
            PageLoad::Complete => {
                nav = Navigation::Click;
                cfg.think
            }
            PageLoad::Waiting => {
                nav = Navigation::Refresh;
                cfg.wait
            }
            PageLoad::Broken | PageLoad::Error => {
                nav = Navigation::Click;
                cfg.wait
            }
            PageLoad::Unfinished => break, // the budget is spent
        };
        if !pause.is_zero() && !budget.exhausted() {
            thread::sleep(pause);
        }
    }
    log.connects = client.connects + asset_clients.iter().map(|c| c.connects).sum::<u64>();
    log
}

fn lock(jar: &Mutex<cookies::Jar>) -> MutexGuard<'_, cookies::Jar> {
    jar.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks for every asset of the page at once, right after the origin's page: one thread per
/// connection of `clients` (kept alive across page loads), the assets dealt out over them
/// in order. Every first request carries the cookies the jar held after the page (they
/// all leave before any of their answers arrives); a redirect is followed with the jar as
/// it is then, and every Set-Cookie goes into the browser's one jar. Returns each asset's
/// outcome (in no particular order); the requests go into `log`.
fn load_assets(
    clients: &mut [http::Client],
    cfg: &Config,
    jar: &Mutex<cookies::Jar>,
    log: &mut BrowserLog,
    budget: &Budget,
) -> Vec<Asset> {
    let cookie = lock(jar).header();
    let slots = clients.len();
    let done: Vec<(Vec<Asset>, BrowserLog)> = thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(k, client)| {
                let cookie = cookie.clone();
                thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || {
                        let mut mine = BrowserLog::new();
                        let mut out = Vec::new();
                        for (n, path) in cfg.assets.iter().skip(k).step_by(slots).enumerate() {
                            if !budget.take() {
                                out.push(Asset::Cut);
                                continue;
                            }
                            let dest = Dest::of(path);
                            let headers = dest.headers();
                            let request = Request {
                                path,
                                accept: dest.accept(),
                                headers: &headers,
                                page: false,
                            };
                            // Queued behind another asset: sent with the jar as it is then.
                            let sent = if n == 0 {
                                cookie.clone()
                            } else {
                                lock(jar).header()
                            };
                            out.push(
                                match fetch(client, jar, &mut mine, budget, &request, sent) {
                                    Fetched::Cut => Asset::Cut,
                                    Fetched::Answer { status: 200, .. } => Asset::Ok,
                                    Fetched::Answer { status, .. } => Asset::Failed(status),
                                },
                            );
                        }
                        (out, mine)
                    })
                    .expect("spawn an asset thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (vec![Asset::Failed(NO_ANSWER)], BrowserLog::new()))
            })
            .collect()
    });
    let mut assets = Vec::with_capacity(cfg.assets.len());
    for (out, mine) in done {
        assets.extend(out);
        log.absorb(mine);
    }
    assets
}

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

/// One request as a browser sends it (besides cookies).
struct Request<'a> {
    path: &'a str,
    accept: &'a str,
    headers: &'a [(&'a str, &'a str)],
    /// The page's document (for the report's page counts), not an asset.
    page: bool,
}

/// The final answer of a [`fetch`].
enum Fetched {
    /// Its status (`NO_ANSWER` for none), whether it carried `Retry-After`, and the first
    /// bytes of its body.
    Answer {
        status: u16,
        retry_after: bool,
        body: Vec<u8>,
    },
    /// The budget ran out before a redirect could be followed.
    Cut,
}

/// GETs `request.path` as a browser does: `cookie` on the first request (the caller took
/// its budget), Set-Cookie into the jar, and a redirect (the waiting room's cookie check
/// answers a first visit with `307` to the same URL) followed at once with the jar's
/// cookies, at most 3 times; each hop is a request of the budget.
fn fetch(
    client: &mut http::Client,
    jar: &Mutex<cookies::Jar>,
    log: &mut BrowserLog,
    budget: &Budget,
    request: &Request,
    mut cookie: Option<String>,
) -> Fetched {
    let mut path = request.path.to_string();
    for hop in 0..4 {
        let t0 = Instant::now();
        let got = client.get_meta(&path, request.accept, cookie.as_deref(), request.headers);
        let (status, location, retry_after, body) = match got {
            Ok((r, meta)) => {
                let mut jar = lock(jar);
                for c in &r.set_cookies {
                    jar.store(c);
                }
                log.body_bytes += r.body_bytes;
                (r.status, r.location, meta.retry_after.is_some(), r.body)
            }
            Err(e) => {
                if log.first_error.is_none() {
                    log.first_error = Some(format!("{path}: {e}"));
                }
                (NO_ANSWER, None, false, Vec::new())
            }
        };
        log.record(status, t0.elapsed(), request.page);
        let next = matches!(status, 301 | 302 | 303 | 307 | 308)
            .then(|| {
                location
                    .as_deref()
                    .and_then(redirect_path)
                    .map(str::to_string)
            })
            .flatten();
        match next {
            Some(p) if hop < 3 => {
                if !budget.take() {
                    return Fetched::Cut;
                }
                path = p;
                cookie = lock(jar).header();
            }
            _ => {
                return Fetched::Answer {
                    status,
                    retry_after,
                    body,
                }
            }
        }
    }
    unreachable!("the fourth hop returns")
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

    /// Reads one request's head (up to the empty line); "" at end of stream.
    fn read_head(r: &mut impl std::io::BufRead) -> String {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                return head;
            }
            head.push_str(&line);
        }
    }

    #[test]
    fn assets_are_asked_for_at_once_with_the_same_cookies() {
        use std::io::{BufReader, Write};
        use std::net::TcpListener;
        use std::time::Duration;

        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let seen = seen.clone();
            thread::spawn(move || {
                // Every connection's first request must arrive before any answer leaves:
                // a browser that loaded its assets one after another would stop at one.
                let deadline = Instant::now() + Duration::from_secs(5);
                let mut conns = Vec::new();
                while conns.len() < 3 && Instant::now() < deadline {
                    match l.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false).unwrap();
                            let mut r = BufReader::new(s.try_clone().unwrap());
                            let head = read_head(&mut r);
                            conns.push((r, s, head));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
                let at_once = conns.len();
                let handlers: Vec<_> = conns
                    .into_iter()
                    .map(|(mut r, mut w, mut head)| {
                        let seen = seen.clone();
                        thread::spawn(move || {
                            let mut redirected = false;
                            while !head.is_empty() {
                                let answer = if head.starts_with("GET /b.js ") && !redirected {
                                    redirected = true;
                                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: /b.js\r\n\
                                     Set-Cookie: t=2; Path=/\r\nContent-Length: 0\r\n\r\n"
                                } else if head.starts_with("GET /c.svg ") {
                                    "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"
                                } else {
                                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                                };
                                seen.lock().unwrap().push(head);
                                w.write_all(answer.as_bytes()).unwrap();
                                head = read_head(&mut r);
                            }
                        })
                    })
                    .collect();
                for h in handlers {
                    h.join().unwrap();
                }
                at_once
            })
        };

        let url = format!("http://{addr}");
        let cfg = match args::parse(
            [
                "--url",
                &url,
                "--assets",
                "/a.css,/b.js,/c.svg",
                "--requests",
                "10",
            ]
            .iter()
            .map(|a| a.to_string()),
        ) {
            Ok(cfg) => cfg,
            _ => panic!("config"),
        };
        let budget = Budget {
            taken: AtomicU64::new(0),
            total: cfg.requests,
        };
        let jar = Mutex::new(cookies::Jar::default());
        lock(&jar).store("s=1");
        let mut log = BrowserLog::new();
        let mut clients: Vec<http::Client> = (0..3)
            .map(|_| http::Client::new(&cfg.target, None, cfg.timeout))
            .collect();
        let mut assets = load_assets(&mut clients, &cfg, &jar, &mut log, &budget);
        drop(clients);
        assert_eq!(
            server.join().unwrap(),
            3,
            "the three assets were not asked at once"
        );

        assets.sort_by_key(|a| format!("{a:?}"));
        assert_eq!(assets, [Asset::Failed(503), Asset::Ok, Asset::Ok]);
        assert_eq!(page::classify(Document::Origin, &assets), PageLoad::Broken);
        assert_eq!(budget.taken.load(Ordering::Relaxed), 4);
        assert_eq!(log.samples.len(), 4);
        assert_eq!(lock(&jar).header().as_deref(), Some("s=1; t=2"));

        let seen = seen.lock().unwrap();
        let get = |start: &str| -> Vec<&String> {
            seen.iter().filter(|h| h.starts_with(start)).collect()
        };
        let css = get("GET /a.css ");
        assert!(css[0].contains("Cookie: s=1\r\n"));
        assert!(css[0].contains("Accept: text/css,*/*;q=0.1\r\n"));
        assert!(css[0].contains("Sec-Fetch-Dest: style\r\n"));
        assert!(css[0].contains("Sec-Fetch-Mode: no-cors\r\n"));
        assert!(css[0].contains("Sec-Fetch-Site: same-origin\r\n"));
        let js = get("GET /b.js ");
        assert_eq!(js.len(), 2);
        assert!(js[0].contains("Cookie: s=1\r\n") && js[0].contains("Sec-Fetch-Dest: script\r\n"));
        assert!(
            js[1].contains("Cookie: s=1; t=2\r\n"),
            "the redirect carries the new cookie"
        );
        let svg = get("GET /c.svg ");
        assert!(svg[0].contains("Cookie: s=1\r\n") && svg[0].contains("Sec-Fetch-Dest: image\r\n"));
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
