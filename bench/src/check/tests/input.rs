//! Bad input is counted, never fatal; the listing; the command's exit codes.

use super::*;

// Input ---------------------------------------------------------------------------------------

#[test]
fn malformed_lines_are_counted_not_fatal() {
    let mut text = Record::Run(run(Mode::Shm, 3)).to_line();
    text.push('\n');
    text.push_str("{\"type\":\"req\",\"client\":1\n"); // cut mid-line
    text.push_str("not json at all\n\n");
    let mut reversed = admit(1, 500);
    reversed.done = 400;
    text.push_str(&Record::Req(reversed).to_line());
    text.push('\n');
    text.push_str(&Record::Run(run(Mode::Redis, 9)).to_line());
    text.push('\n');
    text.push_str(&Record::Req(admit(2, 100)).to_line());
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"\n\xff\xfe\n");
    let h = History::read(&bytes[..]).expect("still a history");
    assert_eq!(h.malformed.count, 5);
    assert_eq!(h.malformed.examples.len(), 5);
    assert_eq!(h.reqs.len(), 1);
    assert_eq!(h.run.mode, Mode::Shm, "the first run record holds");
    let f = findings(&h);
    assert!(f.clean());
    assert!(crate::check::summary::text(&h, &f, "x").contains("5 malformed"));
}

#[test]
fn a_history_needs_its_run() {
    assert_eq!(History::parse("").err(), Some(LoadError::NoRun));
    let req = Record::Req(admit(1, 1)).to_line();
    assert_eq!(History::parse(&req).err(), Some(LoadError::NoRun));
    let zero = Record::Run(run(Mode::Shm, 0)).to_line();
    assert!(matches!(History::parse(&zero), Err(LoadError::BadRun(_))));
}

#[test]
fn a_byte_order_mark_and_crlf_are_not_malformed() {
    let text = format!(
        "\u{feff}{}\r\n{}\r\n",
        Record::Run(run(Mode::Shm, 3)).to_line(),
        Record::Req(admit(1, 100)).to_line()
    );
    let h = History::parse(&text).expect("a history");
    assert_eq!((h.malformed.count, h.reqs.len()), (0, 1));
}

#[test]
fn extreme_values_do_not_panic() {
    let mut r = run(Mode::Sync, u64::MAX);
    r.session_ms = Some(u64::MAX);
    r.presence_ms = u64::MAX;
    r.sync_ms = u64::MAX;
    r.order = Order::Lottery;
    r.start_ms = Some(u64::MAX);
    let mut a = wait(u64::MAX, u64::MAX - 2, u64::MAX);
    a.done = u64::MAX;
    let mut b = admit(0, u64::MAX - 1);
    b.done = u64::MAX;
    let f = findings(&history(
        r.clone(),
        vec![a.clone(), b.clone(), wait(0, 0, 0)],
    ));
    let _ = crate::check::report::html(&history(r, vec![a, b]), &f, "", "x");
}

#[test]
fn violations_are_listed_twenty_per_rule() {
    let reqs: Vec<Req> = (0..25)
        .map(|c| {
            let mut r = admit(c, 100);
            r.done = 100 + 5000;
            r
        })
        .collect();
    let mut r = run(Mode::Shm, 100);
    r.session_ms = Some(1);
    let h = history(r, reqs);
    let f = findings(&h);
    assert_eq!(f.count(Rule::Latency), 25);
    let text = crate::check::summary::text(&h, &f, "x");
    assert_eq!(text.matches("(e) latency at ").count(), 20);
    assert!(text.contains("... and 5 more"), "{text}");
}

#[test]
fn fenwick_counts_below() {
    let mut t = smart_limit_core::util::fenwick::Fenwick::new(5);
    for i in [0, 2, 2, 4] {
        t.add(i);
    }
    assert_eq!(
        (0..=6).map(|k| t.below(k)).collect::<Vec<_>>(),
        vec![0, 1, 1, 3, 3, 4, 4]
    );
}

#[test]
fn downsampling_keeps_the_peak() {
    let points: Vec<(f64, f64)> = (0..10_000)
        .map(|i| (i as f64, if i == 7777 { 99.0 } else { 1.0 }))
        .collect();
    let d = crate::check::svg::downsample(&points, 2000);
    assert!(d.len() <= 2000);
    assert!(d.iter().any(|p| p.1 == 99.0));
}

// The command ---------------------------------------------------------------------------------

fn write_temp(name: &str, records: &[Record]) -> String {
    let path = std::env::temp_dir().join(format!("sl-check-{}-{name}", std::process::id()));
    let text: Vec<String> = records.iter().map(Record::to_line).collect();
    std::fs::write(&path, text.join("\n")).expect("write a temp file");
    path.display().to_string()
}

#[test]
fn exit_codes() {
    let clean = write_temp("clean.jsonl", &super::clean::clean_fifo(20));
    let bad = write_temp(
        "bad.jsonl",
        &[
            Record::Run(run(Mode::Shm, 3)),
            Record::Req(wait(1, 100, 1)),
            Record::Req(wait(1, 1100, 2)),
        ],
    );
    let no_run = write_temp("norun.jsonl", &[Record::Req(wait(1, 100, 1))]);
    let report = format!("{clean}.html");
    let summary = format!("{clean}.txt");
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        main(&args(&[&clean, "--report", &report, "--summary", &summary])),
        ExitCode::SUCCESS
    );
    let written = std::fs::read_to_string(&summary).expect("summary written");
    assert!(written.contains("result: PASS"));
    assert!(std::fs::metadata(&report).is_ok_and(|m| m.len() > 1000));
    assert_eq!(main(&args(&[&bad])), ExitCode::from(1));
    assert_eq!(
        main(&args(&[&bad, "--position-tolerance", "1"])),
        ExitCode::SUCCESS
    );
    assert_eq!(main(&args(&[&no_run])), ExitCode::from(2));
    assert_eq!(
        main(&args(&["/nonexistent/history.jsonl"])),
        ExitCode::from(2)
    );
    assert_eq!(main(&args(&[])), ExitCode::from(2));
    assert_eq!(main(&args(&[&clean, "--bogus"])), ExitCode::from(2));
    assert_eq!(
        main(&args(&[&clean, "--latency-slack-ms", "x"])),
        ExitCode::from(2)
    );
    assert_eq!(main(&args(&["--help"])), ExitCode::SUCCESS);
    for p in [clean, bad, no_run, report, summary] {
        let _ = std::fs::remove_file(p);
    }
}
