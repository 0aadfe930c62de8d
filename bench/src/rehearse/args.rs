//! `smart-limit-bench rehearse`'s command line (clap).

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser};

use crate::args::{parse_url, Target, UrlError};
use crate::history::{Mode, Order, Run};

use super::control::ControlError;

const ABOUT: &str = "\
The client side of a launch rehearsal: clients arrive, take places, poll, are admitted,
browse and leave, across the nodes; every request is written to the history, with the faults
run at their times and the nodes' metrics each second.";

/// `smart-limit-bench rehearse`'s command line.
#[derive(Debug, Parser)]
#[command(
    name = "smart-limit-bench rehearse",
    about = ABOUT,
    override_usage = "smart-limit-bench rehearse --node URL [--node URL ...] --out HISTORY.jsonl [options]",
    args_override_self = true,
    hide_possible_values = true
)]
struct Cli {
    /// the history to write
    #[arg(long, value_name = "HISTORY.jsonl", allow_hyphen_values = true)]
    out: String,
    #[command(flatten)]
    nodes: Nodes,
    #[command(flatten)]
    clients: Clients,
    #[command(flatten)]
    room: Room,
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Nodes and routing")]
struct Nodes {
    /// a node's URL (path included: the room's location); repeat
    #[arg(long, value_name = "URL", value_parser = parse_url)]
    node: Vec<Target>,
    /// a node added at T seconds (routed to from then on); repeat
    #[arg(long, num_args = 2, value_names = ["T", "URL"])]
    join: Vec<String>,
    /// round robin per request, or each client on one node
    #[arg(long, value_name = "rr|sticky", value_parser = routing(), action = ArgAction::Set, default_value = "rr")]
    routing: bool,
    /// each node's metrics location ('' for none)
    #[arg(
        long,
        value_name = "P",
        default_value = "/metrics",
        allow_hyphen_values = true
    )]
    metrics_path: String,
    /// the room (its cookie smart_limit_NAME, its metrics' room label)
    #[arg(long, value_name = "NAME", default_value = "room")]
    room: String,
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Clients and faults")]
struct Clients {
    /// people and programs
    #[arg(long, value_name = "N", default_value = "1000")]
    clients: u64,
    /// arrivals spread over S seconds, most of them early
    #[arg(long, value_name = "S", default_value = "20", value_parser = secs)]
    arrive_over: u64,
    /// length of the run
    #[arg(long, value_name = "S", default_value = "60", value_parser = secs)]
    seconds: u64,
    /// share asking for JSON (percent)
    #[arg(long, value_name = "PCT", default_value = "15")]
    programs: u64,
    /// share of people coming back 2.5 x later than the page asks (percent)
    #[arg(long, value_name = "PCT", default_value = "20")]
    slow: u64,
    /// share giving up while waiting (percent)
    #[arg(long, value_name = "PCT", default_value = "10")]
    abandon: u64,
    /// share of people on phones: each steps away once while waiting, for 1.5 to 2.5 x
    /// presence, then polls again (percent)
    #[arg(long, value_name = "PCT", default_value = "10")]
    phones: u64,
    /// scripts taking a new ticket each second
    #[arg(long, value_name = "N", default_value = "2")]
    minters: u64,
    /// an admitted client browses between S1 and S2 seconds
    #[arg(long, value_name = "S1,S2", default_value = "3,10", value_parser = stay)]
    stay: (u64, u64),
    /// request threads
    #[arg(long, value_name = "N", default_value = "32")]
    threads: u64,
    /// random seed
    #[arg(long, value_name = "N", default_value = "1")]
    seed: u64,
    /// at T seconds run COMMAND (sh -c) and record the fault WHAT (join, restart, reload,
    /// upgrade, redis-kill, redis-slow, clock-step); repeat
    #[arg(long, value_name = "T:WHAT[:NODE]:COMMAND", value_parser = fault, allow_hyphen_values = true)]
    fault: Vec<FaultPlan>,
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = "The room's settings (written to the history for the checker)")]
struct Room {
    /// read them from a node's smart_limit_control endpoint (store, max_active, admission,
    /// presence, active_window, timeout, sync); the options below given as well win
    #[arg(long, value_name = "URL")]
    control: Option<String>,
    /// the store [default: shm]
    #[arg(long, value_name = "shm|redis|sync", value_parser = mode())]
    mode: Option<Mode>,
    /// max_active= (required, here or from --control)
    #[arg(long, value_name = "N")]
    max_active: Option<u64>,
    /// session= (seconds); give this or --grant
    #[arg(long, value_name = "S", value_parser = secs)]
    session: Option<u64>,
    /// grant= (seconds)
    #[arg(long, value_name = "S", value_parser = secs)]
    grant: Option<u64>,
    /// active_window= (seconds) [default: --session's, else 60]
    #[arg(long, value_name = "S", value_parser = secs)]
    active_window: Option<u64>,
    /// presence= (seconds) [default: 20]
    #[arg(long, value_name = "S", value_parser = secs)]
    presence: Option<u64>,
    /// keep= (seconds; 0: keep=off) [default: 300, or presence with --mode sync, which does
    /// not keep places yet]
    #[arg(long, value_name = "S", value_parser = secs)]
    keep: Option<u64>,
    /// the Redis stores' timeout= (milliseconds) [default: 0]
    #[arg(long, value_name = "MS")]
    timeout: Option<u64>,
    /// sync= (seconds) [default: 0]
    #[arg(long, value_name = "S", value_parser = secs)]
    sync: Option<u64>,
    /// the waiting page's refresh (seconds)
    #[arg(long, value_name = "S", default_value = "10", value_parser = secs)]
    refresh: u64,
    /// the order of admission
    #[arg(long, value_name = "fifo|lottery", value_parser = order(), default_value = "fifo")]
    order: Order,
    /// an event's start, seconds into the run
    #[arg(long, value_name = "S", value_parser = secs)]
    start: Option<u64>,
    /// the event's start as the nodes have it (instead of --start)
    #[arg(long, value_name = "UNIX_SECONDS")]
    start_at: Option<u64>,
}

/// A scheduled fault.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    pub at_ms: u64,
    pub what: String,
    pub node: Option<u32>,
    pub command: String,
}

#[derive(Debug, Clone)]
pub struct Args {
    /// Every node, those that join later included, with the time it joins (0: from the start).
    pub nodes: Vec<(Target, u64)>,
    pub sticky: bool,
    pub metrics_path: String,
    pub room: String,
    pub out: String,
    pub clients: u64,
    pub arrive_over_ms: u64,
    pub programs_pct: u64,
    pub slow_pct: u64,
    pub abandon_pct: u64,
    pub phones_pct: u64,
    pub minters: u64,
    pub stay_ms: (u64, u64),
    pub threads: usize,
    pub seed: u64,
    pub faults: Vec<FaultPlan>,
    pub run: Run,
}

/// A command line the rehearsal cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// What clap found (and `--help`, which it prints).
    #[error(transparent)]
    Clap(#[from] clap::Error),
    #[error("--join: {0}")]
    JoinTime(#[from] ValueError),
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("--start-at: the clock is before 1970")]
    Clock(#[from] std::time::SystemTimeError),
    #[error("at least one --node is required")]
    NoNode,
    #[error("--max-active is required")]
    NoMaxActive,
    #[error("give one of --session and --grant")]
    SessionOrGrant,
}

/// A value clap could not take (its message names the option).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("'{0}' is not a number of seconds")]
    NotSeconds(String),
    #[error("'{0}' is out of range")]
    OutOfRange(String),
    #[error("S1,S2")]
    Stay,
    #[error("T:WHAT[:NODE]:COMMAND")]
    Fault,
    #[error("node: '{0}' is not a whole number")]
    Node(String),
}

/// Seconds (fractions allowed) as milliseconds.
fn secs(v: &str) -> Result<u64, ValueError> {
    let f: f64 = v
        .parse()
        .map_err(|_| ValueError::NotSeconds(v.to_string()))?;
    if !(0.0..1e7).contains(&f) {
        return Err(ValueError::OutOfRange(v.to_string()));
    }
    Ok((f * 1000.0) as u64)
}

fn mode() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(["shm", "redis", "sync"]).map(|v| match v.as_str() {
        "redis" => Mode::Redis,
        "sync" => Mode::Sync,
        _ => Mode::Shm,
    })
}

fn order() -> impl TypedValueParser<Value = Order> {
    PossibleValuesParser::new(["fifo", "lottery"]).map(|v| match v.as_str() {
        "lottery" => Order::Lottery,
        _ => Order::Fifo,
    })
}

/// `sticky`: true; `rr`: false.
fn routing() -> impl TypedValueParser<Value = bool> {
    PossibleValuesParser::new(["rr", "sticky"]).map(|v| v == "sticky")
}

/// `S1,S2` in milliseconds, the second at least 1.
fn stay(v: &str) -> Result<(u64, u64), ValueError> {
    let (lo, hi) = v.split_once(',').ok_or(ValueError::Stay)?;
    Ok((secs(lo)?, secs(hi)?.max(1)))
}

/// `T:WHAT[:NODE]:COMMAND` (the command may hold colons).
fn fault(v: &str) -> Result<FaultPlan, ValueError> {
    let mut parts = v.splitn(3, ':');
    let at_ms = secs(parts.next().unwrap_or(""))?;
    let what = parts.next().ok_or(ValueError::Fault)?;
    let rest = parts.next().ok_or(ValueError::Fault)?;
    let (node, command) = match rest.split_once(':') {
        Some((n, cmd)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            let node: u64 = n.parse().map_err(|_| ValueError::Node(n.to_string()))?;
            (Some(node as u32), cmd)
        }
        _ => (None, rest),
    };
    Ok(FaultPlan {
        at_ms,
        what: what.to_string(),
        node,
        command: command.to_string(),
    })
}

/// The nodes in the order given, `--node` and `--join` alike (a fault names a node by its
/// place in this list).
fn nodes(n: &Nodes, m: &ArgMatches) -> Result<Vec<(Target, u64)>, ArgsError> {
    let mut at: Vec<(usize, Target, u64)> = Vec::new();
    let node_at = m.indices_of("node").into_iter().flatten();
    for (i, t) in node_at.zip(&n.node) {
        at.push((i, t.clone(), 0));
    }
    let join_at = m.indices_of("join").into_iter().flatten().step_by(2);
    for (i, pair) in join_at.zip(n.join.chunks(2)) {
        if let [t, url] = pair {
            at.push((i, parse_url(url)?, secs(t)?));
        }
    }
    at.sort_by_key(|n| n.0);
    Ok(at.into_iter().map(|(_, t, join)| (t, join)).collect())
}

/// The later given of two options, if any.
fn later<T: Copy>(m: &ArgMatches, a: (&str, Option<T>), b: (&str, Option<T>)) -> Option<T> {
    match (a.1, b.1) {
        (Some(x), Some(y)) => Some(if m.index_of(a.0) > m.index_of(b.0) {
            x
        } else {
            y
        }),
        (x, y) => x.or(y),
    }
}

/// The rehearsal's settings from its command line (`argv` after `rehearse`), those of
/// `--control` read from the node; `--help` comes back as the [`ArgsError::Clap`] that
/// prints it.
pub fn parse(argv: &[String]) -> Result<Args, ArgsError> {
    let program = std::iter::once("smart-limit-bench rehearse".to_string());
    let m = Cli::command().try_get_matches_from(program.chain(argv.iter().cloned()))?;
    let Cli {
        out,
        nodes: n,
        clients: c,
        room: r,
    } = Cli::from_arg_matches(&m)?;
    let start_at = r.start_at.map(start_at).transpose()?;
    let mut a = Args {
        nodes: nodes(&n, &m)?,
        sticky: n.routing,
        metrics_path: n.metrics_path,
        room: n.room,
        out,
        clients: c.clients,
        arrive_over_ms: c.arrive_over,
        programs_pct: c.programs.min(100),
        slow_pct: c.slow.min(100),
        abandon_pct: c.abandon.min(100),
        phones_pct: c.phones.min(100),
        minters: c.minters,
        stay_ms: c.stay,
        threads: c.threads.clamp(1, 1024) as usize,
        seed: c.seed,
        faults: c.fault,
        run: Run {
            mode: r.mode.unwrap_or(Mode::Shm),
            order: r.order,
            nodes: 0,
            max_active: r.max_active.unwrap_or(0),
            session_ms: r.session,
            grant_ms: r.grant,
            active_window_ms: r.active_window.unwrap_or(60_000),
            presence_ms: r.presence.unwrap_or(20_000),
            keep_ms: r.keep.unwrap_or(300_000),
            timeout_ms: r.timeout.unwrap_or(0),
            sync_ms: r.sync.unwrap_or(0),
            refresh_ms: r.refresh.max(100),
            start_ms: later(&m, ("start", r.start), ("start_at", start_at)),
            duration_ms: c.seconds,
        },
    };
    if let Some(url) = &r.control {
        let s = super::control::fetch(url, &a.room)?;
        super::control::apply(&mut a.run, &s, |flag| r.given(flag));
    }
    if a.nodes.iter().all(|(_, t)| *t > 0) {
        return Err(ArgsError::NoNode);
    }
    if a.run.max_active == 0 {
        return Err(ArgsError::NoMaxActive);
    }
    if a.run.session_ms.is_some() == a.run.grant_ms.is_some() {
        return Err(ArgsError::SessionOrGrant);
    }
    // (The endpoint names the room's own active_window.)
    if a.run.session_ms.is_some() && r.control.is_none() && r.active_window.is_none() {
        a.run.active_window_ms = a.run.session_ms.unwrap_or(0);
    }
    a.run.nodes = a.nodes.iter().filter(|(_, t)| *t == 0).count() as u32;
    Ok(a)
}

impl Room {
    /// Whether the room's setting `flag` was given on the command line (it wins over
    /// `--control`'s).
    fn given(&self, flag: &str) -> bool {
        match flag {
            "--mode" => self.mode.is_some(),
            "--max-active" => self.max_active.is_some(),
            "--session" => self.session.is_some(),
            "--grant" => self.grant.is_some(),
            "--active-window" => self.active_window.is_some(),
            "--presence" => self.presence.is_some(),
            "--keep" => self.keep.is_some(),
            "--timeout" => self.timeout.is_some(),
            "--sync" => self.sync.is_some(),
            _ => false,
        }
    }
}

/// `--start-at UNIX_SECONDS`: an event's start as the nodes were configured with it, in ms
/// since the run's start (now: the driver starts the run as soon as its arguments are read).
fn start_at(at: u64) -> Result<u64, std::time::SystemTimeError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    Ok(at.saturating_mul(1000).saturating_sub(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_whole_command_line() {
        let a = parse(&argv(
            "--node http://127.0.0.1:1/shop --join 20 http://127.0.0.1:2/shop --out h \
             --mode sync --max-active 50 --session 5 --sync 1 --refresh 2 --routing sticky \
             --fault 30:restart:1:kill:node --fault 40:redis-kill:redis-cli",
        ))
        .expect("parses");
        assert_eq!(a.nodes.len(), 2);
        assert_eq!((a.nodes[1].1, a.run.nodes), (20_000, 1));
        assert_eq!(a.run.active_window_ms, 5000);
        assert!(a.sticky);
        assert_eq!(a.faults[0].node, Some(1));
        assert_eq!(a.faults[0].command, "kill:node");
        assert_eq!(a.faults[1].node, None);
        assert_eq!(a.faults[1].command, "redis-cli");
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        assert!(parse(&argv("--out h --max-active 1 --session 1")).is_err());
        assert!(parse(&argv("--node http://127.0.0.1:1/ --out h --session 1")).is_err());
        assert!(parse(&argv("--node http://127.0.0.1:1/ --out h --max-active 1")).is_err());
        assert!(parse(&argv(
            "--node http://x:1/ --out h --max-active 1 --session 1 --mode x"
        ))
        .is_err());
    }

    #[test]
    fn nodes_keep_their_order_and_defaults_hold() {
        let a = parse(&argv(
            "--join 1.5 http://127.0.0.1:3/ --node http://127.0.0.1:1/ --node http://127.0.0.1:2/ \
             --join 2 http://127.0.0.1:4/ --out h --max-active 3 --grant 600 --metrics-path '' \
             --start 5 --start-at 1 --stay 0.5,0 --threads 5000 --programs 150",
        ))
        .expect("parses");
        let ports: Vec<(u16, u64)> = a.nodes.iter().map(|(t, j)| (t.addr.port(), *j)).collect();
        assert_eq!(ports, [(3, 1500), (1, 0), (2, 0), (4, 2000)]);
        assert_eq!(a.run.nodes, 2);
        assert_eq!((a.run.mode, a.run.order), (Mode::Shm, Order::Fifo));
        assert_eq!((a.run.session_ms, a.run.grant_ms), (None, Some(600_000)));
        assert_eq!(
            (a.run.active_window_ms, a.run.presence_ms),
            (60_000, 20_000)
        );
        assert_eq!((a.run.timeout_ms, a.run.sync_ms), (0, 0));
        assert_eq!((a.run.refresh_ms, a.run.duration_ms), (10_000, 60_000));
        // --start-at, given last, wins: an event long past starts at once.
        assert_eq!(a.run.start_ms, Some(0));
        assert_eq!(
            (a.stay_ms, a.threads, a.programs_pct),
            ((500, 1), 1024, 100)
        );
        assert_eq!((a.clients, a.minters, a.seed), (1000, 2, 1));
        assert_eq!((a.room.as_str(), a.metrics_path.as_str()), ("room", "''"));
        let a = parse(&[
            "--node".into(),
            "http://127.0.0.1:1/".into(),
            "--out".into(),
            "h".into(),
            "--max-active=3".into(),
            "--session=2".into(),
            "--metrics-path".into(),
            String::new(),
            "--fault".into(),
            "3:redis-slow:touch x; sleep 5".into(),
        ])
        .expect("parses");
        assert_eq!(a.metrics_path, "");
        assert_eq!(a.run.active_window_ms, 2000);
        assert_eq!(a.faults[0].command, "touch x; sleep 5");
        assert!(parse(&argv(
            "--node http://127.0.0.1:1/ --out h --max-active 1 --grant x"
        ))
        .is_err());
        assert!(parse(&argv(
            "--node http://127.0.0.1:1/ --out h --max-active 1 --grant 1 --fault 1:x"
        ))
        .is_err());
    }
}
