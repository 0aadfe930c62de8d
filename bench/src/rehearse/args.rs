//! `smart-limit-bench rehearse`'s command line (clap).

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};

use crate::args::{parse_url, Target, UrlError};
use crate::history::{Mode, Order, Run};

use super::control::ControlError;

const NODES: &str = "Nodes and routing";
const CLIENTS: &str = "Clients";
const FAULTS: &str = "Faults";
const ROOM: &str = "The room's settings (written to the history for the checker)";

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
    args_override_self = true
)]
struct Cli {
    /// a node's URL (path included: the room's location); repeat
    #[arg(long, value_name = "URL", value_parser = target, help_heading = NODES)]
    node: Vec<Target>,
    /// a node added at T seconds (routed to from then on); repeat
    #[arg(long, num_args = 2, value_names = ["T", "URL"], help_heading = NODES)]
    join: Vec<String>,
    /// round robin per request, or each client on one node
    #[arg(
        long,
        value_name = "rr|sticky",
        value_enum,
        default_value = "rr",
        hide_possible_values = true,
        help_heading = NODES
    )]
    routing: Routing,
    /// each node's metrics location ('' for none)
    #[arg(
        long,
        value_name = "P",
        default_value = "/metrics",
        allow_hyphen_values = true,
        help_heading = NODES
    )]
    metrics_path: String,
    /// the room (its cookie smart_limit_NAME, its metrics' room label)
    #[arg(long, value_name = "NAME", default_value = "room", help_heading = NODES)]
    room: String,
    /// the history to write
    #[arg(long, value_name = "HISTORY.jsonl", allow_hyphen_values = true)]
    out: String,

    /// people and programs
    #[arg(long, value_name = "N", default_value = "1000", help_heading = CLIENTS)]
    clients: u64,
    /// arrivals spread over S seconds, most of them early
    #[arg(long, value_name = "S", default_value = "20", value_parser = secs, help_heading = CLIENTS)]
    arrive_over: u64,
    /// length of the run
    #[arg(long, value_name = "S", default_value = "60", value_parser = secs, help_heading = CLIENTS)]
    seconds: u64,
    /// share asking for JSON (percent)
    #[arg(long, value_name = "PCT", default_value = "15", help_heading = CLIENTS)]
    programs: u64,
    /// share of people coming back 2.5 x later than the page asks (percent)
    #[arg(long, value_name = "PCT", default_value = "20", help_heading = CLIENTS)]
    slow: u64,
    /// share giving up while waiting (percent)
    #[arg(long, value_name = "PCT", default_value = "10", help_heading = CLIENTS)]
    abandon: u64,
    /// scripts taking a new ticket each second
    #[arg(long, value_name = "N", default_value = "2", help_heading = CLIENTS)]
    minters: u64,
    /// an admitted client browses between S1 and S2 seconds
    #[arg(long, value_name = "S1,S2", default_value = "3,10", value_parser = stay, help_heading = CLIENTS)]
    stay: (u64, u64),
    /// request threads
    #[arg(long, value_name = "N", default_value = "32", help_heading = CLIENTS)]
    threads: u64,
    /// random seed
    #[arg(long, value_name = "N", default_value = "1", help_heading = CLIENTS)]
    seed: u64,

    /// at T seconds run COMMAND (sh -c) and record the fault WHAT (join, restart, reload,
    /// upgrade, redis-kill, redis-slow, clock-step); repeat
    #[arg(
        long,
        value_name = "T:WHAT[:NODE]:COMMAND",
        value_parser = fault,
        allow_hyphen_values = true,
        help_heading = FAULTS
    )]
    fault: Vec<FaultPlan>,

    /// read them from a node's smart_limit_control endpoint (store, max_active, admission,
    /// presence, active_window, timeout, sync); the options below given as well win
    #[arg(long, value_name = "URL", help_heading = ROOM)]
    control: Option<String>,
    /// the store [default: shm]
    #[arg(
        long,
        value_name = "shm|redis|sync",
        value_parser = mode(),
        hide_possible_values = true,
        help_heading = ROOM
    )]
    mode: Option<Mode>,
    /// max_active= (required, here or from --control)
    #[arg(long, value_name = "N", help_heading = ROOM)]
    max_active: Option<u64>,
    /// session= (seconds); give this or --grant
    #[arg(long, value_name = "S", value_parser = secs, help_heading = ROOM)]
    session: Option<u64>,
    /// grant= (seconds)
    #[arg(long, value_name = "S", value_parser = secs, help_heading = ROOM)]
    grant: Option<u64>,
    /// active_window= (seconds) [default: --session's, else 60]
    #[arg(long, value_name = "S", value_parser = secs, help_heading = ROOM)]
    active_window: Option<u64>,
    /// presence= (seconds) [default: 20]
    #[arg(long, value_name = "S", value_parser = secs, help_heading = ROOM)]
    presence: Option<u64>,
    /// the Redis stores' timeout= (milliseconds) [default: 0]
    #[arg(long, value_name = "MS", help_heading = ROOM)]
    timeout: Option<u64>,
    /// sync= (seconds) [default: 0]
    #[arg(long, value_name = "S", value_parser = secs, help_heading = ROOM)]
    sync: Option<u64>,
    /// the waiting page's refresh (seconds)
    #[arg(long, value_name = "S", default_value = "10", value_parser = secs, help_heading = ROOM)]
    refresh: u64,
    /// the order of admission
    #[arg(
        long,
        value_name = "fifo|lottery",
        default_value = "fifo",
        value_parser = order(),
        hide_possible_values = true,
        help_heading = ROOM
    )]
    order: Order,
    /// an event's start, seconds into the run
    #[arg(long, value_name = "S", value_parser = secs, help_heading = ROOM)]
    start: Option<u64>,
    /// the event's start as the nodes have it (instead of --start)
    #[arg(long, value_name = "UNIX_SECONDS", help_heading = ROOM)]
    start_at: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Routing {
    Rr,
    Sticky,
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
    JoinTime(#[from] SecsError),
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

/// A number of seconds clap could not take (its message names the option).
#[derive(Debug, thiserror::Error)]
pub enum SecsError {
    #[error("'{0}' is not a number of seconds")]
    NotSeconds(String),
    #[error("'{0}' is out of range")]
    OutOfRange(String),
}

/// A `--stay` or `--fault` clap could not take.
#[derive(Debug, thiserror::Error)]
pub enum FormError {
    #[error("S1,S2")]
    Stay,
    #[error("T:WHAT[:NODE]:COMMAND")]
    Fault,
    #[error("node: '{0}' is not a whole number")]
    Node(String),
    #[error(transparent)]
    Secs(#[from] SecsError),
}

/// Seconds (fractions allowed) as milliseconds.
fn secs(v: &str) -> Result<u64, SecsError> {
    let f: f64 = v
        .parse()
        .map_err(|_| SecsError::NotSeconds(v.to_string()))?;
    if !(0.0..1e7).contains(&f) {
        return Err(SecsError::OutOfRange(v.to_string()));
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

fn target(v: &str) -> Result<Target, UrlError> {
    parse_url(v)
}

/// `S1,S2` in milliseconds, the second at least 1.
fn stay(v: &str) -> Result<(u64, u64), FormError> {
    let (lo, hi) = v.split_once(',').ok_or(FormError::Stay)?;
    Ok((secs(lo)?, secs(hi)?.max(1)))
}

/// `T:WHAT[:NODE]:COMMAND` (the command may hold colons).
fn fault(v: &str) -> Result<FaultPlan, FormError> {
    let mut parts = v.splitn(3, ':');
    let at_ms = secs(parts.next().unwrap_or(""))?;
    let what = parts.next().ok_or(FormError::Fault)?;
    let rest = parts.next().ok_or(FormError::Fault)?;
    let (node, command) = match rest.split_once(':') {
        Some((n, cmd)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            let node: u64 = n.parse().map_err(|_| FormError::Node(n.to_string()))?;
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
fn nodes(cli: &Cli, m: &ArgMatches) -> Result<Vec<(Target, u64)>, ArgsError> {
    let mut at: Vec<(usize, Target, u64)> = Vec::new();
    let node_at = m.indices_of("node").into_iter().flatten();
    for (i, t) in node_at.zip(&cli.node) {
        at.push((i, t.clone(), 0));
    }
    let join_at = m.indices_of("join").into_iter().flatten().step_by(2);
    for (i, pair) in join_at.zip(cli.join.chunks(2)) {
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
    let cli = Cli::from_arg_matches(&m)?;
    let start_at = cli.start_at.map(start_at).transpose()?;
    let mut a = Args {
        nodes: nodes(&cli, &m)?,
        sticky: cli.routing == Routing::Sticky,
        metrics_path: cli.metrics_path.clone(),
        room: cli.room.clone(),
        out: cli.out.clone(),
        clients: cli.clients,
        arrive_over_ms: cli.arrive_over,
        programs_pct: cli.programs.min(100),
        slow_pct: cli.slow.min(100),
        abandon_pct: cli.abandon.min(100),
        minters: cli.minters,
        stay_ms: cli.stay,
        threads: cli.threads.clamp(1, 1024) as usize,
        seed: cli.seed,
        faults: cli.fault.clone(),
        run: Run {
            mode: cli.mode.unwrap_or(Mode::Shm),
            order: cli.order,
            nodes: 0,
            max_active: cli.max_active.unwrap_or(0),
            session_ms: cli.session,
            grant_ms: cli.grant,
            active_window_ms: cli.active_window.unwrap_or(60_000),
            presence_ms: cli.presence.unwrap_or(20_000),
            timeout_ms: cli.timeout.unwrap_or(0),
            sync_ms: cli.sync.unwrap_or(0),
            refresh_ms: cli.refresh.max(100),
            start_ms: later(&m, ("start", cli.start), ("start_at", start_at)),
            duration_ms: cli.seconds,
        },
    };
    let from_control = cli.control.is_some();
    if let Some(url) = &cli.control {
        let s = super::control::fetch(url, &a.room)?;
        super::control::apply(&mut a.run, &s, |flag| given(&cli, flag));
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
    if a.run.session_ms.is_some() && !from_control && cli.active_window.is_none() {
        a.run.active_window_ms = a.run.session_ms.unwrap_or(0);
    }
    a.run.nodes = a.nodes.iter().filter(|(_, t)| *t == 0).count() as u32;
    Ok(a)
}

/// Whether the room's setting `flag` was given on the command line (it wins over
/// `--control`'s).
fn given(cli: &Cli, flag: &str) -> bool {
    match flag {
        "--mode" => cli.mode.is_some(),
        "--max-active" => cli.max_active.is_some(),
        "--session" => cli.session.is_some(),
        "--grant" => cli.grant.is_some(),
        "--active-window" => cli.active_window.is_some(),
        "--presence" => cli.presence.is_some(),
        "--timeout" => cli.timeout.is_some(),
        "--sync" => cli.sync.is_some(),
        _ => false,
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
