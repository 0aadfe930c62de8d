//! How long the arrival-bucket counts' script (core/src/fleet/tally.lua) takes on a real
//! `redis-server`, with the line's buckets a node touches per sync: the figure behind "Redis
//! work per interval depends on the nodes and the buckets, not on how many wait" (issue 32).
//!
//! `cargo run --release -p smart_limit_core --example tally_bench [-- OPTIONS]`
//! (`scripts/bench --tally` runs it). It starts `redis-server` on a free loopback port (no
//! persistence), and for each line length in `--buckets` (seconds of arrivals, one bucket
//! each):
//! - **steady**: `--nodes` nodes sync in turn, `--rounds` times; each report moves one waiter
//!   of every bucket from the last epoch to this one (a -1 and a +1 per bucket: what a node
//!   sends when round-robin clients of every arrival second poll it, the most a report holds)
//!   and takes places in the newest bucket;
//! - **expiry**: one call after the window has passed the five live epochs of every bucket:
//!   each epoch's hash is dropped whole.
//!
//! Times are Redis's own (`INFO commandstats`: the script's execution, without the network),
//! and the client's round trip, the median and the largest; the reply's size; what the steady
//! calls cost one Redis core when every node syncs once a second; and the memory the counts'
//! keys take (`MEMORY USAGE`) after the steady calls.
//!
//! Options: `--buckets 60,600,3600` `--nodes 10` `--rounds 30`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smart_limit_core::fleet::tally::{
    tally_reply, Caller, Clock, Delta, TallyReport, TALLY_KEYS, TALLY_SCRIPT, WINDOW_EPOCHS,
};
use smart_limit_core::redis::resp::{self, Value};
use smart_limit_core::redis::ReplyError;

/// What stops the bench, said on stderr.
#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("redis-server: {0}")]
    Io(#[from] std::io::Error),
    #[error("redis-server did not answer PING")]
    NoPing,
    #[error("redis-server did not start on port {0}")]
    NoStart(u16),
    #[error("redis closed the connection")]
    Closed,
    #[error("a reply that is not RESP")]
    Resp,
    #[error("the script's reply: {0}")]
    Reply(#[from] ReplyError),
    #[error("{0}: an unexpected reply")]
    Unexpected(&'static str),
    #[error("{flag}: '{value}' is not a number")]
    NotANumber { flag: String, value: String },
    #[error("{0} needs a value")]
    NoValue(String),
    #[error("unknown option {0}")]
    Unknown(String),
}

const T0: u64 = 1_800_000_000_000;
const PRESENCE: u64 = 20_000;

struct Redis {
    child: Child,
    conn: TcpStream,
    buf: Vec<u8>,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Redis {
    fn start() -> Result<Redis, BenchError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let t0 = Instant::now();
        loop {
            if let Ok(conn) = TcpStream::connect(("127.0.0.1", port)) {
                let mut r = Redis {
                    child,
                    conn,
                    buf: Vec::new(),
                };
                if matches!(r.cmd(&["PING"]), Ok(Value::Status(_))) {
                    return Ok(r);
                }
                return Err(BenchError::NoPing);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(BenchError::NoStart(port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn cmd<S: AsRef<str>>(&mut self, args: &[S]) -> Result<Value, BenchError> {
        let mut c = ::redis::cmd(args.first().map_or("PING", |a| a.as_ref()));
        for a in args.iter().skip(1) {
            c.arg(a.as_ref());
        }
        self.conn.write_all(&c.get_packed_command())?;
        loop {
            if let Some((v, used)) = resp::parse(&self.buf).map_err(|_| BenchError::Resp)? {
                self.buf.drain(..used);
                return Ok(v);
            }
            let mut chunk = [0u8; 65536];
            let n = self.conn.read(&mut chunk)?;
            if n == 0 {
                return Err(BenchError::Closed);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// One call of the script by `node` with `report` at `now`: the reply's size in bytes.
    fn tally(
        &mut self,
        sha: &str,
        node: u64,
        report: &TallyReport,
        now: u64,
    ) -> Result<usize, BenchError> {
        let clock = Clock::new(PRESENCE);
        let mut args: Vec<String> = vec!["EVALSHA".into(), sha.into()];
        args.push(TALLY_KEYS.len().to_string());
        for k in TALLY_KEYS {
            args.push(format!("smart_limit:{{bench}}:tally:{k}"));
        }
        let by = Caller {
            node,
            interval_ms: 1000,
            fleet_now: now,
        };
        args.extend(report.args(&clock, now, 600_000, &by));
        let v = self.cmd(&args)?;
        let size = match &v {
            Value::Bulk(b) => b.len(),
            _ => 0,
        };
        tally_reply(&v)?;
        Ok(size)
    }

    /// Redis's own time for the script calls since the last reset (`INFO commandstats`:
    /// calls and µs in all), and a reset.
    fn script_time(&mut self) -> Result<(u64, f64), BenchError> {
        let v = self.cmd(&["INFO", "commandstats"])?;
        self.cmd(&["CONFIG", "RESETSTAT"])?;
        let Value::Bulk(text) = v else {
            return Err(BenchError::Unexpected("INFO commandstats"));
        };
        let text = String::from_utf8_lossy(&text);
        let line = text
            .lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .ok_or(BenchError::Unexpected("INFO commandstats (no evalsha)"))?;
        let field = |name: &str| {
            line.split([':', ','])
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        let calls = field("calls")
            .and_then(|x| x.parse::<u64>().ok())
            .unwrap_or(0);
        let usec = field("usec")
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0);
        Ok((calls, usec))
    }
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A node's report moving one waiter of every bucket from the last epoch to `epoch`, and
/// `placed` places in the newest bucket (over its whole second).
fn moves(first: u64, buckets: u64, epoch: u64, placed: u64) -> TallyReport {
    let mut deltas = Vec::with_capacity(2 * buckets as usize);
    for b in first..first + buckets {
        deltas.push(Delta {
            epoch: epoch - 1,
            bucket: b,
            delta: -1,
        });
        deltas.push(Delta {
            epoch,
            bucket: b,
            delta: 1,
        });
    }
    let newest = first + buckets - 1;
    TallyReport {
        deltas,
        placed: vec![(newest, placed)],
        let_in: vec![(first, 1)],
        spans: vec![(newest, newest * 1000, newest * 1000 + 999)],
    }
}

fn run() -> Result<(), BenchError> {
    let mut list = vec![60u64, 600, 3600];
    let (mut nodes, mut rounds) = (10u64, 30u64);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| BenchError::NoValue(flag.clone()))?;
        let num = |s: &str| {
            s.parse::<u64>().map_err(|_| BenchError::NotANumber {
                flag: flag.clone(),
                value: s.to_string(),
            })
        };
        match flag.as_str() {
            "--buckets" => list = value.split(',').map(num).collect::<Result<_, _>>()?,
            "--nodes" => nodes = num(&value)?.max(1),
            "--rounds" => rounds = num(&value)?.max(1),
            _ => return Err(BenchError::Unknown(flag.clone())),
        }
    }
    let mut r = Redis::start()?;
    let sha = match r.cmd(&["SCRIPT", "LOAD", TALLY_SCRIPT])? {
        Value::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => return Err(BenchError::Unexpected("SCRIPT LOAD")),
    };
    let clock = Clock::new(PRESENCE);
    println!(
        "arrival-bucket counts (tally.lua) on redis-server, {nodes} nodes, {rounds} rounds; \
         Redis's own time per call from INFO commandstats, the client's round trip timed \
         per call\n"
    );
    println!(
        "| buckets | entries per report | steady call: Redis µs (mean) | round trip µs: median / \
         max | reply bytes | steady, every node once a second: share of one core | roll of \
         the window passed: Redis µs | the keys' memory (KiB) |"
    );
    println!("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |");
    for &buckets in &list {
        r.cmd(&["FLUSHALL"])?;
        let first = T0 / 1000 - buckets;
        // Every bucket counted in the last epoch first (one report), then the timed rounds.
        let mut now = T0;
        let e0 = clock.epoch(now);
        let mut fill = moves(first, buckets, e0, 0);
        fill.deltas.retain(|d| d.delta > 0);
        for d in &mut fill.deltas {
            d.epoch = e0 - 1;
            d.delta = nodes as i64;
        }
        r.tally(&sha, 0, &fill, now)?;
        r.script_time()?;
        let mut reply = 0;
        let mut trips = Vec::new();
        for i in 0..rounds * nodes {
            now = T0 + i * (1000 / nodes).max(1);
            let e = clock.epoch(now).max(e0);
            let report = moves(first, buckets, e, 20);
            let t = Instant::now();
            reply = r.tally(&sha, i % nodes, &report, now)?;
            trips.push(t.elapsed().as_micros() as u64);
        }
        let (calls, usec) = r.script_time()?;
        let mean = usec / calls.max(1) as f64;
        let entries = 2 * buckets + 3;
        let med = median(&mut trips);
        let max = trips.last().copied().unwrap_or(0);
        let share = mean * nodes as f64 / 1e6 * 100.0;
        let mut bytes = 0;
        for k in TALLY_KEYS {
            let key = format!("smart_limit:{{bench}}:tally:{k}");
            if let Value::Int(n) = r.cmd(&["MEMORY", "USAGE", &key])? {
                bytes += n;
            }
        }
        // The expiry: every bucket in each of the live epochs, then a call a window later.
        r.cmd(&["FLUSHALL"])?;
        let e = clock.epoch(T0);
        let mut report = TallyReport::default();
        for x in e - WINDOW_EPOCHS..=e {
            for b in first..first + buckets {
                report.deltas.push(Delta {
                    epoch: x,
                    bucket: b,
                    delta: 1,
                });
            }
        }
        r.tally(&sha, 0, &report, T0)?;
        r.script_time()?;
        let later = T0 + (WINDOW_EPOCHS + 2) * clock.epoch_ms;
        r.tally(&sha, 0, &TallyReport::default(), later)?;
        let (_, roll) = r.script_time()?;
        println!(
            "| {buckets} | {entries} | {mean:.0} | {med} / {max} | {reply} | {share:.2} % | \
             {roll:.0} | {} |",
            bytes / 1024
        );
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("tally_bench: {e}");
        std::process::exit(1);
    }
}
