//! The browsers' command line (clap), and what every subcommand's command line shares: the
//! target URL ([`parse_url`]) and whole numbers written with `_` ([`number`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

const AFTER_HELP: &str = "\
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

Other commands (each with its own --help): botnet, rehearse, check, mint.";

/// smart-limit-bench: simulated browsers with cookie jars against one HTTP endpoint
#[derive(Debug, Parser)]
#[command(
    name = "smart-limit-bench",
    override_usage = "smart-limit-bench --url http://127.0.0.1:PORT [options]",
    after_help = AFTER_HELP,
    args_override_self = true
)]
struct Cli {
    /// target, http://HOST[:PORT][/base] (plain HTTP/1.1 only)
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    url: String,
    /// concurrent simulated browsers, one thread each
    #[arg(long, value_name = "N", default_value = "50", value_parser = number)]
    browsers: u64,
    /// total request budget shared by all browsers
    #[arg(long, value_name = "N", default_value = "10000", value_parser = number)]
    requests: u64,
    /// the page a browser loads first
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/",
        allow_hyphen_values = true
    )]
    page: String,
    /// comma-separated assets loaded at once after the origin's page (empty string for none)
    #[arg(
        long,
        value_name = "LIST",
        default_value = "/app.css,/app.js,/logo.svg",
        allow_hyphen_values = true
    )]
    assets: String,
    /// a string only the origin's page contains: a 200 page without it is not the origin's
    /// (default: none; then a 200 without Retry-After is the origin's page)
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    page_marker: Option<String>,
    /// pause before loading the page again after a page load that was not complete: a
    /// waiting page refreshing itself, a person reloading a broken or error page
    #[arg(long, value_name = "N", default_value = "200", value_parser = number)]
    wait_ms: u64,
    /// pause after a complete page load before the next one
    #[arg(long, value_name = "N", default_value = "0", value_parser = number)]
    think_ms: u64,
    /// give browser i its own client address 127.0.0.(10+i) (spread over 127.x.y.z beyond
    /// that), so per-address limits apply per browser
    #[arg(long)]
    source_ips: bool,
    /// connect/read/write timeout per request
    #[arg(long, value_name = "N", default_value = "10000", value_parser = number)]
    timeout_ms: u64,
    /// name printed with the results (default: the URL)
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    label: Option<String>,
    /// print one JSON object instead of the text report
    #[arg(long)]
    json: bool,
}

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

/// A command line the browsers cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// What clap found (and `--help`, which it prints).
    #[error(transparent)]
    Clap(#[from] clap::Error),
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("--page-marker must not be empty")]
    EmptyMarker,
    #[error("--browsers must be at least 1")]
    NoBrowser,
    #[error("--source-ips needs an IPv4 target (127.0.0.0/8)")]
    SourceIpsV6,
    #[error("--source-ips: too many browsers for 127.0.0.0/8")]
    SourceIpsTooMany,
    #[error("--timeout-ms must be at least 1")]
    NoTimeout,
}

/// A `--url` that is not a plain `http://` URL of a host that resolves.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("--url must start with http:// (got {0:?})")]
    Scheme(String),
    #[error("--url has no host: {0:?}")]
    NoHost(String),
    #[error("--url: unclosed '['")]
    Unclosed,
    #[error("--url: bad port {0:?}")]
    Port(String),
    #[error("--url: bad authority {0:?}")]
    Authority(String),
    #[error("--url: cannot resolve {host:?}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error("--url: {0:?} resolves to nothing")]
    Nowhere(String),
}

/// A path that cannot go on a request line.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("path must start with '/': {0:?}")]
    Relative(String),
    #[error("path must not contain spaces or control bytes: {0:?}")]
    Bytes(String),
}

/// A value clap could not take (its message names the option).
#[derive(Debug, thiserror::Error)]
#[error("not a non-negative integer: {0:?}")]
pub struct NotANumber(pub String);

/// Prints what clap found (help to stdout, an error to stderr) and gives its exit status:
/// 0 for `--help`, 2 for a bad command line.
pub fn usage(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// A whole number, `_` allowed between digits (`10_000`).
pub fn number(value: &str) -> Result<u64, NotANumber> {
    value
        .replace('_', "")
        .parse::<u64>()
        .map_err(|_| NotANumber(value.to_string()))
}

/// The browsers' settings from their command line (`argv` without the program's name);
/// `--help` comes back as the [`ArgsError::Clap`] that prints it.
pub fn parse<I: Iterator<Item = String>>(argv: I) -> Result<Config, ArgsError> {
    let cli = Cli::try_parse_from(std::iter::once("smart-limit-bench".to_string()).chain(argv))?;
    if cli.page_marker.as_deref() == Some("") {
        return Err(ArgsError::EmptyMarker);
    }
    let target = parse_url(&cli.url)?;
    let browsers = cli.browsers as usize;
    if browsers == 0 {
        return Err(ArgsError::NoBrowser);
    }
    if cli.source_ips && !target.addr.is_ipv4() {
        return Err(ArgsError::SourceIpsV6);
    }
    if cli.source_ips && browsers > (1 << 24) - 20 {
        return Err(ArgsError::SourceIpsTooMany);
    }
    if cli.timeout_ms == 0 {
        return Err(ArgsError::NoTimeout);
    }
    let page = with_base(&target.base, &cli.page)?;
    let assets = cli
        .assets
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| with_base(&target.base, a))
        .collect::<Result<Vec<_>, _>>()?;

    Ok(Config {
        label: cli.label.unwrap_or_else(|| cli.url.clone()),
        target,
        browsers,
        requests: cli.requests,
        page,
        assets,
        page_marker: cli.page_marker,
        wait: Duration::from_millis(cli.wait_ms),
        think: Duration::from_millis(cli.think_ms),
        source_ips: cli.source_ips,
        timeout: Duration::from_millis(cli.timeout_ms),
        json: cli.json,
    })
}

fn with_base(base: &str, path: &str) -> Result<String, PathError> {
    if !path.starts_with('/') {
        return Err(PathError::Relative(path.to_string()));
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(PathError::Bytes(path.to_string()));
    }
    Ok(format!("{base}{path}"))
}

/// `http://HOST[:PORT][/base]`, resolved.
pub fn parse_url(url: &str) -> Result<Target, UrlError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| UrlError::Scheme(url.to_string()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(UrlError::NoHost(url.to_string()));
    }
    let port = |p: &str| p.parse::<u16>().map_err(|_| UrlError::Port(p.to_string()));
    // host[:port], with [v6]:port accepted too.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or(UrlError::Unclosed)?;
        let port = match after.strip_prefix(':') {
            Some(p) => port(p)?,
            None if after.is_empty() => 80,
            None => return Err(UrlError::Authority(authority.to_string())),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), port(p)?),
            None => (authority.to_string(), 80),
        }
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|source| UrlError::Resolve {
            host: host.clone(),
            source,
        })?
        .next()
        .ok_or_else(|| UrlError::Nowhere(host.clone()))?;
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

    fn run(args: &[&str]) -> Result<Config, ArgsError> {
        parse(args.iter().map(|s| s.to_string()))
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

    #[test]
    fn numbers_with_underscores_and_the_last_value_given() {
        let c = run(&[
            "--url",
            "http://127.0.0.1",
            "--requests",
            "10_000",
            "--browsers",
            "3",
            "--browsers=4",
            "--label",
            "-x",
            "--assets",
            "",
        ])
        .unwrap();
        assert_eq!((c.requests, c.browsers), (10_000, 4));
        assert_eq!(c.label, "-x");
        assert!(c.assets.is_empty());
    }

    #[test]
    fn help_is_asked_for() {
        let Err(ArgsError::Clap(e)) = run(&["--url", "http://127.0.0.1", "--help"]) else {
            panic!("help");
        };
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp);
        assert!(e.to_string().contains("--page-marker <S>"));
    }
}
