//! `smart-limit-bench rehearse`'s command line.

use crate::args::{parse_url, Target};
use crate::history::{Mode, Order, Run};

pub const USAGE: &str = "\
usage: smart-limit-bench rehearse --node URL [--node URL ...] --out HISTORY.jsonl [options]

The client side of a launch rehearsal: clients arrive, take places, poll, are admitted,
browse and leave, across the nodes; every request is written to the history, with the faults
run at their times and the nodes' metrics each second.

Nodes and routing
  --node URL              a node's URL (path included: the room's location); repeat
  --join T URL            a node added at T seconds (routed to from then on); repeat
  --routing rr|sticky     round robin per request, or each client on one node (default rr)
  --metrics-path P        each node's metrics location (default /metrics; '' for none)
  --room NAME             the room (its cookie smart_limit_NAME, its metrics' room label)
Clients
  --clients N             people and programs (default 1000)
  --arrive-over S         arrivals spread over S seconds, most of them early (default 20)
  --seconds S             length of the run (default 60)
  --programs PCT          share asking for JSON (default 15)
  --slow PCT              share of people coming back 2.5 x later than the page asks (default 20)
  --abandon PCT           share giving up while waiting (default 10)
  --minters N             scripts taking a new ticket each second (default 2)
  --stay S1,S2            an admitted client browses between S1 and S2 seconds (default 3,10)
  --threads N             request threads (default 32)
  --seed N                random seed (default 1)
Faults
  --fault T:WHAT[:NODE]:COMMAND   at T seconds run COMMAND (sh -c) and record the fault WHAT
                          (join, restart, reload, upgrade, redis-kill, redis-slow, clock-step)
The room's settings (written to the history for the checker)
  --control URL           read them from a node's smart_limit_control endpoint (store,
                          max_active, admission, presence, active_window, timeout, sync);
                          the flags below given as well win
  --mode shm|redis|sync  --max-active N  --session S | --grant S  --active-window S
  --presence S  --timeout MS  --sync S  --refresh S  --order fifo|lottery  --start S
  --start-at UNIX_SECONDS  the event's start as the nodes have it (instead of --start)
";

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

fn secs(v: &str, what: &str) -> Result<u64, String> {
    let f: f64 = v
        .parse()
        .map_err(|_| format!("{what}: '{v}' is not a number of seconds"))?;
    if !(0.0..1e7).contains(&f) {
        return Err(format!("{what}: '{v}' is out of range"));
    }
    Ok((f * 1000.0) as u64)
}

fn num(v: &str, what: &str) -> Result<u64, String> {
    v.parse()
        .map_err(|_| format!("{what}: '{v}' is not a whole number"))
}

pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        nodes: Vec::new(),
        sticky: false,
        metrics_path: "/metrics".into(),
        room: "room".into(),
        out: String::new(),
        clients: 1000,
        arrive_over_ms: 20_000,
        programs_pct: 15,
        slow_pct: 20,
        abandon_pct: 10,
        minters: 2,
        stay_ms: (3000, 10_000),
        threads: 32,
        seed: 1,
        faults: Vec::new(),
        run: Run {
            mode: Mode::Shm,
            order: Order::Fifo,
            nodes: 0,
            max_active: 0,
            session_ms: None,
            grant_ms: None,
            active_window_ms: 60_000,
            presence_ms: 20_000,
            timeout_ms: 0,
            sync_ms: 0,
            refresh_ms: 10_000,
            start_ms: None,
            duration_ms: 60_000,
        },
    };
    let mut control = None;
    let mut it = argv.iter();
    while let Some(opt) = it.next() {
        let mut val = || {
            it.next()
                .map(String::as_str)
                .ok_or(format!("{opt} needs a value"))
        };
        match opt.as_str() {
            "--node" => a.nodes.push((parse_url(val()?)?, 0)),
            "--join" => {
                let t = secs(val()?, "--join")?;
                a.nodes.push((parse_url(val()?)?, t));
            }
            "--routing" => {
                a.sticky = match val()? {
                    "rr" => false,
                    "sticky" => true,
                    v => return Err(format!("--routing: '{v}' (rr or sticky)")),
                }
            }
            "--metrics-path" => a.metrics_path = val()?.into(),
            "--room" => a.room = val()?.into(),
            "--out" => a.out = val()?.into(),
            "--clients" => a.clients = num(val()?, "--clients")?,
            "--arrive-over" => a.arrive_over_ms = secs(val()?, "--arrive-over")?,
            "--seconds" => a.run.duration_ms = secs(val()?, "--seconds")?,
            "--programs" => a.programs_pct = num(val()?, "--programs")?.min(100),
            "--slow" => a.slow_pct = num(val()?, "--slow")?.min(100),
            "--abandon" => a.abandon_pct = num(val()?, "--abandon")?.min(100),
            "--minters" => a.minters = num(val()?, "--minters")?,
            "--stay" => {
                let v = val()?;
                let (lo, hi) = v.split_once(',').ok_or("--stay: S1,S2")?;
                a.stay_ms = (secs(lo, "--stay")?, secs(hi, "--stay")?.max(1));
            }
            "--threads" => a.threads = num(val()?, "--threads")?.clamp(1, 1024) as usize,
            "--seed" => a.seed = num(val()?, "--seed")?,
            "--fault" => a.faults.push(fault(val()?)?),
            "--mode" => {
                a.run.mode = match val()? {
                    "shm" => Mode::Shm,
                    "redis" => Mode::Redis,
                    "sync" => Mode::Sync,
                    v => return Err(format!("--mode: '{v}' (shm, redis or sync)")),
                }
            }
            "--order" => {
                a.run.order = match val()? {
                    "fifo" => Order::Fifo,
                    "lottery" => Order::Lottery,
                    v => return Err(format!("--order: '{v}' (fifo or lottery)")),
                }
            }
            "--max-active" => a.run.max_active = num(val()?, "--max-active")?,
            "--session" => a.run.session_ms = Some(secs(val()?, "--session")?),
            "--grant" => a.run.grant_ms = Some(secs(val()?, "--grant")?),
            "--active-window" => a.run.active_window_ms = secs(val()?, "--active-window")?,
            "--presence" => a.run.presence_ms = secs(val()?, "--presence")?,
            "--timeout" => a.run.timeout_ms = num(val()?, "--timeout")?,
            "--sync" => a.run.sync_ms = secs(val()?, "--sync")?,
            "--refresh" => a.run.refresh_ms = secs(val()?, "--refresh")?.max(100),
            "--start" => a.run.start_ms = Some(secs(val()?, "--start")?),
            "--start-at" => a.run.start_ms = Some(start_at(val()?)?),
            "--control" => control = Some(val()?.to_string()),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    let from_control = control.is_some();
    if let Some(url) = control {
        let s = super::control::fetch(&url, &a.room)?;
        super::control::apply(&mut a.run, &s, |flag| argv.iter().any(|o| o == flag));
    }
    if a.nodes.iter().all(|(_, t)| *t > 0) {
        return Err("at least one --node is required".into());
    }
    if a.out.is_empty() {
        return Err("--out is required".into());
    }
    if a.run.max_active == 0 {
        return Err("--max-active is required".into());
    }
    if a.run.session_ms.is_some() == a.run.grant_ms.is_some() {
        return Err("give one of --session and --grant".into());
    }
    // (The endpoint names the room's own active_window.)
    if a.run.session_ms.is_some() && !from_control && !argv.iter().any(|o| o == "--active-window") {
        a.run.active_window_ms = a.run.session_ms.unwrap_or(0);
    }
    a.run.nodes = a.nodes.iter().filter(|(_, t)| *t == 0).count() as u32;
    Ok(a)
}

/// `--start-at UNIX_SECONDS`: an event's start as the nodes were configured with it, in ms
/// since the run's start (now: the driver starts the run as soon as its arguments are read).
fn start_at(v: &str) -> Result<u64, String> {
    let at: u64 = num(v, "--start-at")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis() as u64;
    Ok(at.saturating_mul(1000).saturating_sub(now))
}

/// `T:WHAT[:NODE]:COMMAND` (the command may hold colons).
fn fault(v: &str) -> Result<FaultPlan, String> {
    let mut parts = v.splitn(3, ':');
    let at_ms = secs(parts.next().unwrap_or(""), "--fault")?;
    let what = parts.next().ok_or("--fault: T:WHAT[:NODE]:COMMAND")?;
    let rest = parts.next().ok_or("--fault: T:WHAT[:NODE]:COMMAND")?;
    let (node, command) = match rest.split_once(':') {
        Some((n, cmd)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(num(n, "--fault node")? as u32), cmd)
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
}
