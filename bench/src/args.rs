//! Command-line parsing (std only): `--name value` or `--name=value`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub const USAGE: &str = "\
smart-limit-bench: simulated browsers with cookie jars against one HTTP endpoint

usage: smart-limit-bench --url http://127.0.0.1:PORT [options]

  --url URL          target, http://HOST[:PORT][/base] (plain HTTP/1.1 only)
  --browsers N       concurrent simulated browsers, one thread each (default 50)
  --requests N       total request budget shared by all browsers (default 10000)
  --page PATH        the page a browser loads first (default /)
  --assets LIST      comma-separated assets loaded at once after the origin's page
                     (default /app.css,/app.js,/logo.svg; empty string for none)
  --page-marker S    a string only the origin's page contains: a 200 page without it
                     is not the origin's (default: none; then a 200 without
                     Retry-After is the origin's page)
  --wait-ms N        pause before loading the page again after a page load that was not
                     complete: a waiting page refreshing itself, a person reloading a
                     broken or error page (default 200)
  --think-ms N       pause after a complete page load before the next one (default 0)
  --source-ips       give browser i its own client address 127.0.0.(10+i) (spread over
                     127.x.y.z beyond that), so per-address limits apply per browser
  --timeout-ms N     connect/read/write timeout per request (default 10000)
  --label NAME       name printed with the results (default: the URL)
  --json             print one JSON object instead of the text report
  -h, --help         this text

A browser asks for the page with Chromium's navigation headers (Sec-Fetch-Mode: navigate,
Sec-Fetch-Dest: document, ...). When the answer is the origin's page (200, no Retry-After,
the --page-marker if given) it asks for every asset at once, one connection each (at most
6, as browsers do per host; kept alive across page loads), each with its kind's
Sec-Fetch-Dest and Accept and the cookies the jar held after the page. Redirects (the
room's 307 cookie check) are followed, storing Set-Cookie. A page load is then:
  complete  the origin's page and every asset 200
  broken    the origin's page and at least one asset not 200 after redirects
  waiting   the waiting room's answer (not the origin's page, with Retry-After)
  error     any other answer for the page (e.g. limit_req's 503) or none
Every request sent counts against the budget, parallel ones included; the run stops
when it is used up (a page load cut short then is unfinished).
";

#[derive(Debug, Clone)]
pub struct Target {
    /// Value of the Host header (host[:port] as given in the URL).
    pub host_header: String,
    /// Resolved address to connect to.
    pub addr: SocketAddr,
    /// Path prefix from the URL, without trailing slash ("" for none).
    pub base: String,
    /// The URL as given, for reports.
    pub url: String,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub target: Target,
    pub browsers: usize,
    pub requests: u64,
    pub page: String,
    pub assets: Vec<String>,
    pub page_marker: Option<String>,
    pub wait: Duration,
    pub think: Duration,
    pub source_ips: bool,
    pub timeout: Duration,
    pub label: String,
    pub json: bool,
}

pub enum Parsed {
    Run(Box<Config>),
    Help,
}

pub fn parse<I: Iterator<Item = String>>(mut argv: I) -> Result<Parsed, String> {
    let mut url: Option<String> = None;
    let mut browsers: usize = 50;
    let mut requests: u64 = 10_000;
    let mut page = "/".to_string();
    let mut assets = "/app.css,/app.js,/logo.svg".to_string();
    let mut page_marker: Option<String> = None;
    let mut wait_ms: u64 = 200;
    let mut think_ms: u64 = 0;
    let mut source_ips = false;
    let mut timeout_ms: u64 = 10_000;
    let mut label: Option<String> = None;
    let mut json = false;

    while let Some(arg) = argv.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        // Flags without a value.
        match name.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--source-ips" | "--json" => {
                if inline.is_some() {
                    return Err(format!("{name} takes no value"));
                }
                if name == "--json" {
                    json = true;
                } else {
                    source_ips = true;
                }
                continue;
            }
            _ => {}
        }
        let value = match inline {
            Some(v) => v,
            None => argv.next().ok_or_else(|| format!("{name} needs a value"))?,
        };
        match name.as_str() {
            "--url" => url = Some(value),
            "--browsers" => browsers = number(&name, &value)? as usize,
            "--requests" => requests = number(&name, &value)?,
            "--page" => page = value,
            "--assets" => assets = value,
            "--page-marker" if value.is_empty() => {
                return Err("--page-marker must not be empty".into())
            }
            "--page-marker" => page_marker = Some(value),
            "--wait-ms" => wait_ms = number(&name, &value)?,
            "--think-ms" => think_ms = number(&name, &value)?,
            "--timeout-ms" => timeout_ms = number(&name, &value)?,
            "--label" => label = Some(value),
            _ => return Err(format!("unknown option {name} (see --help)")),
        }
    }

    let url = url.ok_or("--url is required (see --help)")?;
    let target = parse_url(&url)?;
    if browsers == 0 {
        return Err("--browsers must be at least 1".into());
    }
    if source_ips && !target.addr.is_ipv4() {
        return Err("--source-ips needs an IPv4 target (127.0.0.0/8)".into());
    }
    if source_ips && browsers > (1 << 24) - 20 {
        return Err("--source-ips: too many browsers for 127.0.0.0/8".into());
    }
    if timeout_ms == 0 {
        return Err("--timeout-ms must be at least 1".into());
    }
    let page = with_base(&target.base, &page)?;
    let assets = assets
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| with_base(&target.base, a))
        .collect::<Result<Vec<_>, _>>()?;

    Ok(Parsed::Run(Box::new(Config {
        label: label.unwrap_or_else(|| url.clone()),
        target,
        browsers,
        requests,
        page,
        assets,
        page_marker,
        wait: Duration::from_millis(wait_ms),
        think: Duration::from_millis(think_ms),
        source_ips,
        timeout: Duration::from_millis(timeout_ms),
        json,
    })))
}

fn number(name: &str, value: &str) -> Result<u64, String> {
    value
        .replace('_', "")
        .parse::<u64>()
        .map_err(|_| format!("{name}: not a non-negative integer: {value:?}"))
}

fn with_base(base: &str, path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("path must start with '/': {path:?}"));
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "path must not contain spaces or control bytes: {path:?}"
        ));
    }
    Ok(format!("{base}{path}"))
}

pub fn parse_url(url: &str) -> Result<Target, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url must start with http:// (got {url:?})"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(format!("--url has no host: {url:?}"));
    }
    // host[:port], with [v6]:port accepted too.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("--url: unclosed '['")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| format!("--url: bad port {p:?}"))?,
            None if after.is_empty() => 80,
            None => return Err(format!("--url: bad authority {authority:?}")),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse::<u16>()
                    .map_err(|_| format!("--url: bad port {p:?}"))?,
            ),
            None => (authority.to_string(), 80),
        }
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("--url: cannot resolve {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("--url: {host:?} resolves to nothing"))?;
    Ok(Target {
        host_header: authority.to_string(),
        addr,
        base: path.trim_end_matches('/').to_string(),
        url: url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, String> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Parsed::Run(c) => Ok(*c),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults_and_url() {
        let c = run(&["--url", "http://127.0.0.1:8080"]).unwrap();
        assert_eq!(c.browsers, 50);
        assert_eq!(c.requests, 10_000);
        assert_eq!(c.page, "/");
        assert_eq!(c.assets, ["/app.css", "/app.js", "/logo.svg"]);
        assert_eq!(c.wait, Duration::from_millis(200));
        assert_eq!(c.target.host_header, "127.0.0.1:8080");
        assert_eq!(c.target.addr.port(), 8080);
        assert!(!c.source_ips && !c.json);
        assert_eq!(c.page_marker, None);
    }

    #[test]
    fn base_path_and_inline_values() {
        let c = run(&[
            "--url=http://127.0.0.1:81/shop/",
            "--assets=/a.css, /b.js",
            "--json",
            "--page-marker",
            "<meta name=\"origin\">",
        ])
        .unwrap();
        assert_eq!(c.page_marker.as_deref(), Some("<meta name=\"origin\">"));
        assert_eq!(c.page, "/shop/");
        assert_eq!(c.assets, ["/shop/a.css", "/shop/b.js"]);
        assert!(c.json);
    }

    #[test]
    fn rejects_bad_input() {
        assert!(run(&["--browsers", "3"]).is_err());
        assert!(run(&["--url", "https://127.0.0.1"]).is_err());
        assert!(run(&["--url", "http://127.0.0.1:x"]).is_err());
        assert!(run(&["--url", "http://127.0.0.1", "--browsers", "0"]).is_err());
        assert!(run(&["--url", "http://127.0.0.1", "--page", "x"]).is_err());
        assert!(run(&["--url", "http://127.0.0.1", "--bogus", "1"]).is_err());
        assert!(run(&["--url", "http://127.0.0.1", "--json=1"]).is_err());
        assert!(run(&["--url", "http://[::1]:80", "--source-ips"]).is_err());
        assert!(run(&["--url", "http://127.0.0.1", "--page-marker", ""]).is_err());
    }
}
