//! `smart-limit-bench origin`: a model of the customer's application for tests and benchmarks
//! (issue 50): an HTTP/1.1 server on loopback that serves at most `--capacity` requests at a
//! time, each taking `--service-ms`, queues the next `--queue` in arrival order and answers
//! the rest 503 at once (see [`gate`]). Its capacity and service time change while it runs
//! (`GET /_origin/set?capacity=N&service_ms=MS`: a deploy that halves capacity), and
//! `GET /_origin/stats` tells its figures as JSON. It stands in for the origin, not for nginx
//! or Redis: what it models is the thing the room protects.
//!
//!     smart-limit-bench origin --listen 127.0.0.1:0 --capacity 20 --service-ms 50 --queue 40
//!
//! prints `listening PORT` once it accepts, and serves until killed (or `--seconds`).

pub mod gate;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;

use gate::{Entry, Gate};

#[derive(Debug, Parser)]
#[command(name = "smart-limit-bench origin", disable_version_flag = true)]
struct Cli {
    /// where to listen (a loopback address; port 0: any free one, printed)
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// requests in service at once
    #[arg(long, value_name = "N", default_value = "20")]
    capacity: u64,
    /// each request's service time (ms)
    #[arg(long, value_name = "MS", default_value = "50")]
    service_ms: u64,
    /// requests waiting for a slot before the next is refused with 503
    #[arg(long, value_name = "N", default_value = "40")]
    queue: u64,
    /// stop after this many seconds (0: run until killed)
    #[arg(long, value_name = "S", default_value = "0")]
    seconds: u64,
}

/// The origin: its gate and its service time (changeable while it runs).
pub struct Origin {
    pub gate: Gate,
    service_ms: AtomicU64,
}

/// The longest request head read (a request line and a few headers from nginx or a bench).
const MAX_HEAD: usize = 16 * 1024;

impl Origin {
    pub fn new(capacity: u64, service_ms: u64, queue: u64) -> Origin {
        Origin {
            gate: Gate::new(capacity.max(1), queue),
            service_ms: AtomicU64::new(service_ms),
        }
    }

    /// Serves one connection: requests one after another while the client keeps it open.
    fn serve(&self, stream: TcpStream) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let Ok(mut out) = stream.try_clone() else {
            return;
        };
        let mut input = BufReader::new(stream);
        loop {
            let Some((target, keep_alive)) = read_head(&mut input) else {
                return;
            };
            let (status, body) = self.answer(&target);
            let reason = if status == 200 {
                "OK"
            } else {
                "Service Unavailable"
            };
            let conn = if keep_alive { "keep-alive" } else { "close" };
            let head = format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Cache-Control: no-store\r\nConnection: {conn}\r\n\r\n",
                body.len()
            );
            if out.write_all(head.as_bytes()).is_err() || out.write_all(body.as_bytes()).is_err() {
                return;
            }
            if !keep_alive {
                return;
            }
        }
    }

    /// The answer to one request: the control paths, or a request of the application.
    pub fn answer(&self, target: &str) -> (u16, String) {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        match path {
            "/_origin/stats" => (200, self.stats()),
            "/_origin/set" => {
                for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
                    match (k, v.parse::<u64>()) {
                        ("capacity", Ok(n)) => self.gate.set_capacity(n),
                        ("service_ms", Ok(ms)) => self.service_ms.store(ms, Ordering::Relaxed),
                        _ => return (400, format!("unknown setting {k}={v}\n")),
                    }
                }
                (200, self.stats())
            }
            _ => match self.gate.enter() {
                Entry::Served => {
                    let ms = self.service_ms.load(Ordering::Relaxed);
                    thread::sleep(Duration::from_millis(ms));
                    self.gate.leave();
                    (200, "origin\n".to_string())
                }
                Entry::Refused => (503, "overloaded\n".to_string()),
            },
        }
    }

    fn stats(&self) -> String {
        let f = self.gate.figures();
        format!(
            "{{\"capacity\":{},\"service_ms\":{},\"queue\":{},\"in_service\":{},\"waiting\":{},\
             \"served\":{},\"refused\":{},\"most_in_service\":{}}}\n",
            f.capacity,
            self.service_ms.load(Ordering::Relaxed),
            f.queue,
            f.in_service,
            f.waiting,
            f.served,
            f.refused,
            f.most_in_service
        )
    }
}

/// Reads one request head: its target, and whether the connection stays open after it (HTTP/1.1
/// without `Connection: close`). None: the connection ended or sent something else.
fn read_head(input: &mut impl BufRead) -> Option<(String, bool)> {
    let mut line = String::new();
    let mut read = input.read_line(&mut line).ok()?;
    if read == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (_method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let (target, mut keep_alive) = (target.to_string(), version == "HTTP/1.1");
    loop {
        let mut h = String::new();
        let n = input.read_line(&mut h).ok()?;
        read += n;
        if n == 0 || read > MAX_HEAD {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            return Some((target, keep_alive));
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.eq_ignore_ascii_case("connection") {
                keep_alive = !value.trim().eq_ignore_ascii_case("close")
                    && (keep_alive || value.trim().eq_ignore_ascii_case("keep-alive"));
            }
        }
    }
}

/// Listens and serves, a thread per connection, until `stop` (if any) passes.
pub fn run(listener: TcpListener, origin: Arc<Origin>, stop: Option<Instant>) {
    if let Some(at) = stop {
        thread::spawn(move || {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            std::process::exit(0);
        });
    }
    for stream in listener.incoming().flatten() {
        let origin = origin.clone();
        thread::spawn(move || origin.serve(stream));
    }
}

pub fn main(argv: &[String]) -> ExitCode {
    let cli = match Cli::try_parse_from(
        std::iter::once("origin".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => return crate::args::usage(&e),
    };
    let listener = match TcpListener::bind(&cli.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "smart-limit-bench origin: cannot listen on {}: {e}",
                cli.listen
            );
            return ExitCode::from(2);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    println!("listening {port}");
    let _ = std::io::stdout().flush();
    let origin = Arc::new(Origin::new(cli.capacity, cli.service_ms, cli.queue));
    let stop = (cli.seconds > 0).then(|| Instant::now() + Duration::from_secs(cli.seconds));
    run(listener, origin, stop);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(port: u16, target: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET {target} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    }

    #[test]
    fn serves_counts_and_changes_capacity_while_it_runs() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let origin = Arc::new(Origin::new(4, 1, 2));
        let o = origin.clone();
        thread::spawn(move || run(listener, o, None));
        assert_eq!(get(port, "/page"), (200, "origin\n".to_string()));
        let (status, stats) = get(port, "/_origin/set?capacity=2&service_ms=5");
        assert_eq!(status, 200);
        assert!(
            stats.contains("\"capacity\":2,\"service_ms\":5,"),
            "{stats}"
        );
        assert!(stats.contains("\"served\":1,"), "{stats}");
        assert_eq!(get(port, "/_origin/set?capacity=x").0, 400);
        assert_eq!(origin.gate.figures().capacity, 2);
    }

    #[test]
    fn keeps_the_connection_for_http_1_1() {
        let mut c = BufReader::new("GET /a HTTP/1.1\r\nHost: x\r\n\r\n".as_bytes());
        assert_eq!(read_head(&mut c), Some(("/a".to_string(), true)));
        let mut c = BufReader::new("GET /a HTTP/1.1\r\nConnection: close\r\n\r\n".as_bytes());
        assert_eq!(read_head(&mut c), Some(("/a".to_string(), false)));
        let mut c = BufReader::new("GET /a HTTP/1.0\r\n\r\n".as_bytes());
        assert_eq!(read_head(&mut c), Some(("/a".to_string(), false)));
        let mut c = BufReader::new("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".as_bytes());
        assert_eq!(read_head(&mut c), Some(("/a".to_string(), true)));
        let mut c = BufReader::new("garbage".as_bytes());
        assert_eq!(read_head(&mut c), None);
    }
}
