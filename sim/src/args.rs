//! Command line: every flag, its default, and the parsing (hand-rolled, to keep the crate free
//! of dependencies besides the core it simulates).

use std::fmt;

/// How arrivals are spread over `--arrive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    /// A constant rate.
    Flat,
    /// A rate growing linearly from zero (the crowd builds up before a sale).
    Ramp,
    /// 70 % of the clients in the first 5 % of the period, the rest evenly after (a sale
    /// opening, a link posted).
    Spike,
}

/// How a client's requests pick a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// One node for the client's life, chosen by the node weights (a sticky load balancer).
    Sticky,
    /// Each request to the next node (a global round-robin load balancer).
    RoundRobin,
}

/// What a node does with the report of a sync that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutageReport {
    /// Puts it back in its batches (`give_back`), so it reaches the fleet when Redis returns:
    /// what the module does.
    Kept,
    /// Drops it.
    Lost,
}

/// What a node that stops (a restart, a removal) does with what it saw since its last sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReport {
    /// Lost with its zone: what the module does.
    Lost,
    /// Sent in one last sync first (Redis answering): a graceful stop the module could make.
    Synced,
}

/// The simulation's parameters; times in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    pub nodes: usize,
    pub clients: usize,
    pub arrive_ms: u64,
    pub curve: Curve,
    pub routing: Routing,
    /// Relative weights of node groups (sticky routing); empty: equal.
    pub weights: Vec<f64>,
    pub refresh_ms: u64,
    pub active_every_ms: u64,
    pub stay_ms: u64,
    pub abandon: f64,
    /// A waiting client's poll comes its period times 1 ± this, uniformly.
    pub jitter: f64,
    pub max_active: u64,
    pub interval_ms: u64,
    pub active_window_ms: u64,
    pub presence_ms: u64,
    /// (start, length) from the start of the run.
    pub outage: Option<(u64, u64)>,
    pub outage_report: OutageReport,
    pub seconds_ms: u64,
    pub seed: u64,
    /// Shared memory per node, in MiB (the zone's `size=`).
    pub zone_mb: usize,
    /// Period of the time series table; 0: no table.
    pub series_ms: u64,
    /// Nodes that join (ms from the start), in the order given.
    pub joins: Vec<u64>,
    /// Restarts: (node, from the start, down for), node numbered from 1 as in the Nodes table.
    pub restarts: Vec<(usize, u64, u64)>,
    /// Nodes gone for good: (node, from the start).
    pub removes: Vec<(usize, u64)>,
    pub stop_report: StopReport,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            nodes: 3,
            clients: 100_000,
            arrive_ms: 60_000,
            curve: Curve::Ramp,
            routing: Routing::Sticky,
            weights: Vec::new(),
            refresh_ms: 10_000,
            active_every_ms: 5_000,
            stay_ms: 60_000,
            abandon: 0.1,
            jitter: 0.2,
            max_active: 5000,
            interval_ms: 1000,
            active_window_ms: 20_000,
            presence_ms: 20_000,
            outage: None,
            outage_report: OutageReport::Kept,
            seconds_ms: 600_000,
            seed: 1,
            zone_mb: 10,
            series_ms: 30_000,
            joins: Vec::new(),
            restarts: Vec::new(),
            removes: Vec::new(),
            stop_report: StopReport::Lost,
        }
    }
}

pub const HELP: &str = "\
smart-limit-sim: the synced room (core::fleet_room + core::fleet_model) on a virtual clock

Runs the very decision code of the nginx module's nodes (FleetNode over a block of memory)
and of its Redis script (FleetModel, the script's rules in Rust) for N nodes and M clients,
without sleeping, nginx or Redis, and prints markdown tables.

USAGE:
    smart-limit-sim [FLAGS]

Times are in seconds unless the flag says _ms; decimals are accepted (e.g. 0.5).
Both --flag VALUE and --flag=VALUE work.

WORKLOAD
    --clients N           clients in all [default: 100000]
    --arrive SECONDS      clients arrive over this long from the start [default: 60]
    --curve C             flat | ramp | spike [default: ramp]
                            flat:  a constant arrival rate
                            ramp:  a rate growing linearly from zero
                            spike: 70% of the clients in the first 5% of --arrive,
                                   the rest evenly over the remainder
    --refresh SECONDS     a waiting client polls this often, +-20% jitter [default: 10]
    --active-every SECONDS
                          an admitted client requests this often, +-20% jitter [default: 5]
    --stay SECONDS        an admitted client stays this long, +-20% jitter, then stops
                          requesting [default: 60]
    --abandon P           probability that a client gives up waiting (stops polling), at a
                          time uniform between its arrival and the end of the run
                          [default: 0.1]
    --jitter F            a waiting client polls after its period times 1 +- F, uniformly
                          (0.03: each client keeps its phase against the syncs' ticks, as a
                          browser following its page's refresh does) [default: 0.2]

FLEET
    --nodes N             nodes [default: 3]
    --routing R           sticky | round-robin [default: sticky]
                            sticky:      one node for the client's life, by --weights
                            round-robin: each request to the next node (one global counter)
    --weights W1,W2,...   sticky only: relative weights of node groups. With as many weights
                          as nodes, one per node; otherwise the nodes are split into that
                          many consecutive groups as evenly as possible (the first groups
                          take the extra nodes) and a group's weight is shared equally by
                          its nodes: 10 nodes with 60,30,10 are 4+3+3 nodes of 15,10,3.3
                          [default: equal]
    --zone-mb MB          shared memory per node (the zone's size=; it sizes the report
                          batches) [default: 10]

ROOM
    --max-active N        admitted sessions at most [default: 5000]
    --interval-ms MS      sync interval; ticks on multiples of it [default: 1000]
    --active-window-ms MS an admitted session counts this long after its last request
                          [default: 20000]
    --presence-ms MS      a waiter unseen this long leaves the fleet's line [default: 20000]

RUN
    --seconds SECONDS     length of the run [default: 600]
    --outage START,SECONDS
                          Redis unreachable from START for SECONDS: syncs fail (nodes age
                          their picture) and draws are refused [default: none]
    --outage-report R     kept | lost: what a node does with the report of a failed sync
                            kept: gives it back to its batches (give_back), as the module
                                  does, so it reaches Redis when Redis returns
                            lost: drops it [default: kept]
    --join T[,T...]       a new node starts T seconds from the start, with an empty zone and
                          no picture; from T on it takes its share of the requests (round
                          robin: one turn in the round; sticky: new clients are spread over
                          the nodes up by weight, a joined node weighing the mean of the
                          first nodes' weights; clients already placed stay). Joined nodes
                          are numbered from --nodes + 1 in time order. Repeatable
                          [default: none]
    --restart NODE,T[,DOWN]
                          node NODE (numbered from 1, as in the Nodes table) loses its zone
                          at T (a restart, a binary upgrade): out of routing for DOWN seconds
                          [default: 1], then back with an empty zone, no picture and a new
                          node id. Its sticky clients go to other nodes meanwhile, and back
                          to it after. Repeatable [default: none]
    --remove NODE,T       node NODE stops for good at T (its sticky clients go to other
                          nodes). Repeatable [default: none]
    --stop-report R       lost | synced: what a node that stops (restart, removal) does with
                          what it saw since its last sync (admissions, sessions, waiters)
                            lost:   it goes with its zone, as in the module
                            synced: it is sent in one last sync first (Redis answering),
                                    a graceful stop the module does not make
                          [default: lost]
                          A node without a picture does not decide alone while Redis answers:
                          its first request triggers a sync at once and is decided by the
                          picture it brings. While Redis is away (--outage) it admits nobody
                          (it only queues) until its first picture. A change at a tick's
                          moment comes just after that tick's syncs.
    --seed N              random seed; a run is reproducible [default: 1]
    --series SECONDS      period of the time series table, 0 for none [default: 30]
    -h, --help            this text
";

/// A command line that cannot be run, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError(msg.into()))
}

/// Seconds (decimals allowed) to milliseconds.
pub fn secs_ms(flag: &str, v: &str) -> Result<u64, ArgError> {
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..1e12).contains(&s) => Ok((s * 1000.0).round() as u64),
        _ => err(format!("{flag}: expected seconds, got \"{v}\"")),
    }
}

fn int<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, ArgError> {
    v.trim()
        .parse()
        .or_else(|_| err(format!("{flag}: expected a whole number, got \"{v}\"")))
}

/// Parses the arguments (without the program name). `Ok(None)`: help was asked for.
pub fn parse<I, S>(argv: I) -> Result<Option<Args>, ArgError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut a = Args::default();
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let arg = arg.as_ref();
        if arg == "-h" || arg == "--help" {
            return Ok(None);
        }
        let Some(body) = arg.strip_prefix("--") else {
            return err(format!("unexpected argument \"{arg}\" (see --help)"));
        };
        // Both "--flag value" and "--flag=value".
        let (flag, value) = match body.split_once('=') {
            Some((f, v)) => (f.to_string(), v.to_string()),
            None => match it.next() {
                Some(v) => (body.to_string(), v.as_ref().to_string()),
                None => return err(format!("--{body}: missing value")),
            },
        };
        let f = format!("--{flag}");
        let v = value.as_str();
        match flag.as_str() {
            "nodes" => a.nodes = int(&f, v)?,
            "clients" => a.clients = int(&f, v)?,
            "arrive" => a.arrive_ms = secs_ms(&f, v)?,
            "curve" => {
                a.curve = match v {
                    "flat" => Curve::Flat,
                    "ramp" => Curve::Ramp,
                    "spike" => Curve::Spike,
                    _ => return err(format!("{f}: expected flat, ramp or spike, got \"{v}\"")),
                }
            }
            "routing" => {
                a.routing = match v {
                    "sticky" => Routing::Sticky,
                    "round-robin" | "rr" => Routing::RoundRobin,
                    _ => return err(format!("{f}: expected sticky or round-robin, got \"{v}\"")),
                }
            }
            "weights" => {
                a.weights = v
                    .split(',')
                    .map(|w| match w.trim().parse::<f64>() {
                        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                        _ => err(format!("{f}: expected weights like 60,30,10, got \"{v}\"")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "refresh" => a.refresh_ms = secs_ms(&f, v)?,
            "active-every" => a.active_every_ms = secs_ms(&f, v)?,
            "stay" => a.stay_ms = secs_ms(&f, v)?,
            "abandon" => {
                a.abandon = match v.trim().parse::<f64>() {
                    Ok(p) if (0.0..=1.0).contains(&p) => p,
                    _ => return err(format!("{f}: expected a probability in 0..1, got \"{v}\"")),
                }
            }
            "jitter" => {
                a.jitter = match v.trim().parse::<f64>() {
                    Ok(p) if (0.0..=0.9).contains(&p) => p,
                    _ => return err(format!("{f}: expected a fraction in 0..0.9, got \"{v}\"")),
                }
            }
            "max-active" => a.max_active = int(&f, v)?,
            "interval-ms" => a.interval_ms = int(&f, v)?,
            "active-window-ms" => a.active_window_ms = int(&f, v)?,
            "presence-ms" => a.presence_ms = int(&f, v)?,
            "outage" => {
                let Some((s, l)) = v.split_once(',') else {
                    return err(format!("{f}: expected START,SECONDS, got \"{v}\""));
                };
                a.outage = Some((secs_ms(&f, s)?, secs_ms(&f, l)?));
            }
            "outage-report" => {
                a.outage_report = match v {
                    "kept" => OutageReport::Kept,
                    "lost" => OutageReport::Lost,
                    _ => return err(format!("{f}: expected kept or lost, got \"{v}\"")),
                }
            }
            "seconds" => a.seconds_ms = secs_ms(&f, v)?,
            "seed" => a.seed = int(&f, v)?,
            "zone-mb" => a.zone_mb = int(&f, v)?,
            "series" => a.series_ms = secs_ms(&f, v)?,
            "join" => {
                for t in v.split(',') {
                    a.joins.push(secs_ms(&f, t)?);
                }
            }
            "restart" => {
                let parts: Vec<&str> = v.split(',').collect();
                let (node, at, down) = match parts[..] {
                    [n, t] => (n, t, "1"),
                    [n, t, d] => (n, t, d),
                    _ => return err(format!("{f}: expected NODE,T[,DOWN], got \"{v}\"")),
                };
                a.restarts
                    .push((int(&f, node)?, secs_ms(&f, at)?, secs_ms(&f, down)?));
            }
            "stop-report" => {
                a.stop_report = match v {
                    "lost" => StopReport::Lost,
                    "synced" => StopReport::Synced,
                    _ => return err(format!("{f}: expected lost or synced, got \"{v}\"")),
                }
            }
            "remove" => {
                let Some((node, at)) = v.split_once(',') else {
                    return err(format!("{f}: expected NODE,T, got \"{v}\""));
                };
                a.removes.push((int(&f, node)?, secs_ms(&f, at)?));
            }
            _ => return err(format!("unknown flag {f} (see --help)")),
        }
    }
    a.check()?;
    Ok(Some(a))
}

impl Args {
    /// Values the simulation cannot run with.
    fn check(&self) -> Result<(), ArgError> {
        if self.nodes == 0 || self.nodes > usize::from(u16::MAX) {
            return err("--nodes: expected 1 to 65535");
        }
        if self.clients == 0 || self.clients >= u32::MAX as usize {
            return err("--clients: expected 1 to 4294967294");
        }
        if self.interval_ms == 0 {
            return err("--interval-ms: must be positive");
        }
        if self.refresh_ms == 0 || self.active_every_ms == 0 {
            return err("--refresh and --active-every: must be positive");
        }
        if self.seconds_ms == 0 || self.seconds_ms > 7 * 86_400_000 {
            return err("--seconds: expected more than 0, up to a week");
        }
        if self.arrive_ms > self.seconds_ms {
            return err("--arrive: longer than --seconds");
        }
        if self.zone_mb == 0 || self.zone_mb > 4096 {
            return err("--zone-mb: expected 1 to 4096");
        }
        if !self.weights.is_empty() && self.weights.iter().sum::<f64>() <= 0.0 {
            return err("--weights: at least one must be positive");
        }
        if self.weights.len() > self.nodes {
            return err("--weights: more weights than nodes");
        }
        self.check_changes()
    }

    /// Joins, restarts and removals: within the run, of nodes that exist then, one at a time
    /// per node.
    fn check_changes(&self) -> Result<(), ArgError> {
        let slots = self.nodes + self.joins.len();
        if slots > usize::from(u16::MAX) {
            return err("--join: at most 65535 nodes in all");
        }
        if self.joins.iter().any(|&t| t > self.seconds_ms) {
            return err("--join: after the end of the run (--seconds)");
        }
        let mut joins = self.joins.clone();
        joins.sort_unstable();
        // Per node: (from, until) of each stop, in time order.
        let mut stops: Vec<Vec<(u64, u64)>> = vec![Vec::new(); slots];
        let changes = self.restarts.iter().map(|&(n, t, d)| (n, t, Some(d)));
        let changes = changes.chain(self.removes.iter().map(|&(n, t)| (n, t, None)));
        for (node, at, down) in changes {
            let flag = if down.is_some() {
                "--restart"
            } else {
                "--remove"
            };
            if node == 0 || node > slots {
                return err(format!(
                    "{flag}: no node {node} (nodes are numbered 1 to {slots}, joined ones \
                     from {} in time order)",
                    self.nodes + 1
                ));
            }
            if at > self.seconds_ms {
                return err(format!("{flag}: after the end of the run (--seconds)"));
            }
            if node > self.nodes && at <= joins[node - self.nodes - 1] {
                return err(format!(
                    "{flag}: node {node} has not joined yet at that time"
                ));
            }
            stops[node - 1].push((at, down.map_or(u64::MAX, |d| at + d)));
        }
        for (i, s) in stops.iter_mut().enumerate() {
            s.sort_unstable();
            if s.windows(2).any(|w| w[1].0 <= w[0].1) {
                return err(format!(
                    "--restart/--remove: node {} changes again while down or gone",
                    i + 1
                ));
            }
        }
        Ok(())
    }

    /// The full command that reproduces this run (every flag, defaults included).
    pub fn command(&self) -> String {
        let s = |ms: u64| format!("{}", ms as f64 / 1000.0);
        let mut c = format!(
            "cargo run --release -p smart-limit-sim -- --nodes {} --clients {} --arrive {} \
             --curve {} --routing {}",
            self.nodes,
            self.clients,
            s(self.arrive_ms),
            match self.curve {
                Curve::Flat => "flat",
                Curve::Ramp => "ramp",
                Curve::Spike => "spike",
            },
            match self.routing {
                Routing::Sticky => "sticky",
                Routing::RoundRobin => "round-robin",
            },
        );
        if !self.weights.is_empty() {
            let w: Vec<String> = self.weights.iter().map(|w| format!("{w}")).collect();
            c += &format!(" --weights {}", w.join(","));
        }
        // (Only when not the default: runs without it print what they printed before.)
        if self.jitter != Args::default().jitter {
            c += &format!(" --jitter {}", self.jitter);
        }
        c += &format!(
            " --refresh {} --active-every {} --stay {} --abandon {} --max-active {} \
             --interval-ms {} --active-window-ms {} --presence-ms {} --seconds {} --seed {} \
             --zone-mb {} --series {}",
            s(self.refresh_ms),
            s(self.active_every_ms),
            s(self.stay_ms),
            self.abandon,
            self.max_active,
            self.interval_ms,
            self.active_window_ms,
            self.presence_ms,
            s(self.seconds_ms),
            self.seed,
            self.zone_mb,
            s(self.series_ms),
        );
        if !self.joins.is_empty() {
            let j: Vec<String> = self.joins.iter().map(|&t| s(t)).collect();
            c += &format!(" --join {}", j.join(","));
        }
        for &(n, at, down) in &self.restarts {
            c += &format!(" --restart {n},{},{}", s(at), s(down));
        }
        for &(n, at) in &self.removes {
            c += &format!(" --remove {n},{}", s(at));
        }
        if self.stop_report == StopReport::Synced {
            c += " --stop-report synced";
        }
        if let Some((start, len)) = self.outage {
            c += &format!(
                " --outage {},{} --outage-report {}",
                s(start),
                s(len),
                match self.outage_report {
                    OutageReport::Kept => "kept",
                    OutageReport::Lost => "lost",
                }
            );
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Option<Args>, ArgError> {
        parse(args.iter().copied())
    }

    #[test]
    fn defaults_and_help() {
        assert_eq!(p(&[]).unwrap(), Some(Args::default()));
        assert_eq!(p(&["--nodes", "2", "--help"]).unwrap(), None);
        assert_eq!(p(&["-h"]).unwrap(), None);
    }

    #[test]
    fn every_flag_in_both_forms() {
        let a = p(&[
            "--nodes",
            "10",
            "--clients=1000000",
            "--arrive",
            "30.5",
            "--curve",
            "spike",
            "--routing=round-robin",
            "--weights",
            "60,30,10",
            "--refresh",
            "8",
            "--active-every",
            "2",
            "--stay",
            "90",
            "--abandon",
            "0.25",
            "--jitter",
            "0.05",
            "--max-active",
            "100",
            "--interval-ms",
            "500",
            "--active-window-ms",
            "30000",
            "--presence-ms",
            "15000",
            "--outage",
            "300,30",
            "--outage-report",
            "lost",
            "--seconds",
            "120",
            "--seed",
            "7",
            "--zone-mb",
            "4",
            "--series",
            "0",
            "--join",
            "20,30.5",
            "--join=40",
            "--restart",
            "3,50",
            "--restart=11,60,2.5",
            "--remove",
            "12,70",
            "--stop-report",
            "synced",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.nodes, 10);
        assert_eq!(a.clients, 1_000_000);
        assert_eq!(a.arrive_ms, 30_500);
        assert_eq!(a.curve, Curve::Spike);
        assert_eq!(a.routing, Routing::RoundRobin);
        assert_eq!(a.weights, vec![60.0, 30.0, 10.0]);
        assert_eq!(
            (a.refresh_ms, a.active_every_ms, a.stay_ms),
            (8000, 2000, 90_000)
        );
        assert_eq!(a.abandon, 0.25);
        assert_eq!(a.jitter, 0.05);
        assert_eq!(
            (
                a.max_active,
                a.interval_ms,
                a.active_window_ms,
                a.presence_ms
            ),
            (100, 500, 30_000, 15_000)
        );
        assert_eq!(a.outage, Some((300_000, 30_000)));
        assert_eq!(a.outage_report, OutageReport::Lost);
        assert_eq!(
            (a.seconds_ms, a.seed, a.zone_mb, a.series_ms),
            (120_000, 7, 4, 0)
        );
        assert_eq!(a.joins, vec![20_000, 30_500, 40_000]);
        assert_eq!(a.restarts, vec![(3, 50_000, 1000), (11, 60_000, 2500)]);
        assert_eq!(a.removes, vec![(12, 70_000)]);
        assert_eq!(a.stop_report, StopReport::Synced);
        // The printed command parses back to the same run.
        let cmd = a.command();
        let tail = cmd.split(" -- ").nth(1).unwrap();
        assert_eq!(p(&tail.split(' ').collect::<Vec<_>>()).unwrap(), Some(a));
    }

    #[test]
    fn refusals_name_the_flag() {
        for (args, word) in [
            (&["--nodes", "0"][..], "--nodes"),
            (&["--curve", "square"][..], "--curve"),
            (&["--abandon", "1.5"][..], "--abandon"),
            (&["--jitter", "0.95"][..], "--jitter"),
            (&["--outage", "300"][..], "--outage"),
            (&["--outage-report", "maybe"][..], "--outage-report"),
            (&["--arrive", "-1"][..], "--arrive"),
            (&["--bogus", "1"][..], "--bogus"),
            (&["--nodes"][..], "missing value"),
            (&["nodes"][..], "unexpected"),
            (&["--arrive", "700"][..], "--arrive"),
            (&["--nodes", "2", "--weights", "1,2,3"][..], "--weights"),
            (&["--weights", "0,0"][..], "--weights"),
            (&["--join", "20,x"][..], "--join"),
            (&["--join", "700"][..], "--join"),
            (&["--restart", "2"][..], "--restart"),
            (&["--restart", "4,10"][..], "no node 4"),
            (&["--restart", "0,10"][..], "no node 0"),
            (&["--join", "30", "--restart", "4,10"][..], "not joined"),
            (
                &["--restart", "2,10,5", "--restart", "2,14"][..],
                "while down",
            ),
            (&["--remove", "2,10", "--restart", "2,20"][..], "while down"),
            (&["--remove", "2"][..], "--remove"),
            (&["--stop-report", "kept"][..], "--stop-report"),
        ] {
            let e = p(args).unwrap_err();
            assert!(e.0.contains(word), "{args:?}: {e}");
        }
    }
}
