//! `smart-limit-bench check`: reads a rehearsal's history against the room's rules.
use std::process::ExitCode;

pub fn main(_argv: &[String]) -> ExitCode {
    eprintln!("smart-limit-bench check: not built yet");
    ExitCode::from(2)
}
