//! smart-limit-sim: the synced room's decision code (the nodes' `core::fleet_room` and the
//! script's rules in `core::fleet_model`) run for many nodes and clients on a virtual clock,
//! to measure what a load test cannot show cheaply: how close the fleet keeps the true active
//! count to max_active, whether it admits in arrival order, how many Redis calls it makes,
//! how it rides out a Redis outage, and how right the positions it tells are.
//!
//! `--help` lists the flags; `engine` holds the simulation, `stats` the measures, `report` the
//! tables.

mod args;
mod counted;
mod engine;
mod floor;
mod members;
mod report;
mod stats;
mod workload;

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let a = match args::parse(&argv) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{}", args::HELP);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("smart-limit-sim: {e}");
            return ExitCode::from(2);
        }
    };
    if a.routing == args::Routing::RoundRobin && !a.weights.is_empty() {
        eprintln!("smart-limit-sim: note: --weights apply to sticky routing only; ignored");
    }
    let given = format!(
        "cargo run --release -p smart-limit-sim -- {}",
        argv.join(" ")
    );
    let started = Instant::now();
    let mut outcome = engine::run(&a);
    let wall = started.elapsed();
    print!("{}", report::render(&mut outcome, given.trim_end(), wall));
    ExitCode::SUCCESS
}
