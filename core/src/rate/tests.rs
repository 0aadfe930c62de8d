//! Unit tests of the fleet rate: parameters, the math, the shared state, replies.

use super::*;
use core::sync::atomic::Ordering::Relaxed;

use crate::config::ConfError;
use crate::redis::resp::Value;
use crate::redis::Form;

fn parse(line: &str) -> Result<RateZoneParams, ConfError> {
    let words: Vec<&str> = line.split(' ').collect();
    RateZoneParams::parse(&words)
}

#[test]
fn parameters_and_defaults() {
    let z = parse("api rate=15000r/s redis=10.0.0.5:6379 interval=1s timeout=900ms").unwrap();
    assert_eq!(z.rate_milli, 15_000_000);
    assert_eq!((z.interval_ms, z.timeout_ms), (1000, 900));
    assert_eq!(z.fallback_ms, 10_000);
    assert_eq!(z.local_milli, None);
    let z = parse("api rate=600r/m").unwrap();
    assert_eq!(z.rate_milli, 10_000);
    assert_eq!((z.interval_ms, z.timeout_ms), (1000, 900));
    assert!(!z.redis.configured());
    let z = parse("api rate=10r/s interval=2s redis=r:1 local=3r/s fallback=1m").unwrap();
    assert_eq!(
        (z.timeout_ms, z.local_milli, z.fallback_ms),
        (1800, Some(3000), 60_000)
    );
}

#[test]
fn refusals_name_the_parameter() {
    let msg = |l: &str| parse(l).unwrap_err().to_string();
    assert!(msg("api").contains("rate="), "{}", msg("api"));
    assert!(msg("api rate=fast").contains("invalid rate \"fast\""));
    assert!(msg("api rate=10r/s interval=1s timeout=1s").contains("invalid timeout \"1s\""));
    assert!(msg("api rate=10r/s timeout=2s").contains("shorter than interval="));
    assert!(msg("api rate=10r/s interval=50ms").contains("invalid interval"));
    assert!(msg("api rate=10r/s local=5r/s").contains("requires redis="));
    assert!(msg("api rate=10r/s rate=5r/s").contains("duplicate"));
    assert!(msg("api rate=10r/s burst=5").contains("unknown parameter"));
    assert!(msg("api rate").contains("needs a value"));
    assert!(msg("a{b} rate=1r/s").contains("invalid zone name"));
}

#[test]
fn probability_is_the_share_that_fits() {
    assert_eq!(pass_ppm(1000, 500), PPM);
    assert_eq!(pass_ppm(1000, 1000), PPM);
    assert_eq!(pass_ppm(1000, 4000), 250_000);
    assert_eq!(pass_ppm(15_000_000, 20_000_000), 750_000);
    // Never 0 while something is allowed; 0 only for nothing.
    assert_eq!(pass_ppm(1, u64::MAX), 1);
    assert_eq!(pass_ppm(0, 5), 0);
}

#[test]
fn rates_from_cumulative_counters_are_never_negative() {
    let s = |count, at_ms| Sample { count, at_ms };
    assert_eq!(rate_milli(s(100, 1000), s(1100, 2000)), Some(1_000_000));
    assert_eq!(rate_milli(s(100, 1000), s(100, 2000)), Some(0));
    // A counter running backwards, or no time passing: no rate at all.
    assert_eq!(rate_milli(s(500, 1000), s(100, 2000)), None);
    assert_eq!(rate_milli(s(100, 2000), s(200, 2000)), None);
    assert_eq!(rate_milli(s(100, 2000), s(200, 1000)), None);
}

#[test]
fn an_old_picture_ages_into_the_local_cap() {
    let (fresh, fallback) = (2000, 10_000);
    assert_eq!(aged_ppm(800_000, 200_000, 0, fresh, fallback), 800_000);
    assert_eq!(aged_ppm(800_000, 200_000, 2000, fresh, fallback), 800_000);
    assert_eq!(aged_ppm(800_000, 200_000, 7000, fresh, fallback), 500_000);
    assert_eq!(aged_ppm(800_000, 200_000, 12_000, fresh, fallback), 200_000);
    assert_eq!(aged_ppm(200_000, 800_000, 7000, fresh, fallback), 500_000);
    assert_eq!(aged_ppm(5, 9, u64::MAX, fresh, 0), 9);
}

#[test]
fn draws_pass_in_proportion() {
    assert!(passes(PPM, u32::MAX));
    assert!(!passes(0, 0));
    let mut state = 7;
    let mut passed = 0;
    for _ in 0..1_000_000 {
        let draw = (crate::util::random::fast_next(&mut state) >> 32) as u32;
        if passes(250_000, draw) {
            passed += 1;
        }
    }
    assert!((248_000..252_000).contains(&passed), "{passed}");
}

fn cfg(fleet: bool) -> RateConfig {
    RateConfig {
        rate_milli: 1_000_000, // 1000 r/s
        local_milli: None,
        interval_ms: 1000,
        fallback_ms: 10_000,
        fleet,
        budget: RateConfig::budget_for(1_000_000, 1000),
    }
}

/// `n` requests spread evenly over the second before `at_ms`.
fn offer_at(s: &RateShared, n: u64, at_ms: u64, c: &RateConfig, seed: &mut u64) -> u64 {
    (0..n)
        .filter(|i| {
            let now = at_ms.saturating_sub(1000) + i * 1000 / n;
            s.record((crate::util::random::fast_next(seed) >> 32) as u32, now, c)
        })
        .count() as u64
}

fn offer(s: &RateShared, n: u64, seed: &mut u64) -> u64 {
    // Far from any tick's measurement: no surge check applies (their time is 0).
    (0..n)
        .filter(|_| {
            s.record(
                (crate::util::random::fast_next(seed) >> 32) as u32,
                0,
                &cfg(false),
            )
        })
        .count() as u64
}

#[test]
fn alone_the_node_caps_itself_from_its_own_rate() {
    let s = RateShared::new(9, 0);
    let c = cfg(false);
    let mut seed = 1;
    // 4000 requests a second for 10 s: after the first second, ~1000 a second pass.
    let mut passed_after_first = 0;
    let mut first = 0;
    for sec in 0..10u64 {
        let passed = offer_at(&s, 4000, (sec + 1) * 1000, &c, &mut seed);
        assert_eq!(s.tick((sec + 1) * 1000, &c), None);
        if sec > 0 {
            passed_after_first += passed;
        } else {
            first = passed;
        }
    }
    assert!(
        (8_700..9_300).contains(&passed_after_first),
        "{passed_after_first}"
    );
    // The first second comes from idle: the surge guard and the budget hold it near the
    // rate, not the 4000 offered.
    assert!(first <= RateConfig::budget_for(1_000_000, 1000), "{first}");
    assert_eq!(RateConfig::budget_for(1_000_000, 1000), 1296);
    let snap = s.snapshot(10_000);
    assert_eq!(snap.p_ppm, 250_000);
    assert_eq!(snap.offered, 40_000);
    assert_eq!(snap.sync_age_ms, Some(0));
}

#[test]
fn a_surge_lowers_p_before_the_next_tick() {
    let s = RateShared::new(9, 0);
    let c = cfg(true);
    // The fleet (4 nodes) offered 2000 r/s, this node 500 of them: p = 1/2.
    s.offered.store(500, Relaxed);
    s.tick(1000, &c);
    let picture = FleetPicture {
        offered_milli: 2_000_000,
        passed_milli: 1_000_000,
        nodes: 4,
        offered_total: 0,
        passed_total: 0,
        own_offered_milli: 0,
        window_ms: 1000,
        accepted: true,
    };
    s.apply(&picture, 1000, &c);
    assert_eq!(s.snapshot(1000).p_ppm, 500_000);
    // The node's own offer jumps to 10,500 r/s: p follows within the interval, to what
    // the fleet's rate with the new offer allows: 1000 / (1500 + 10,500).
    let mut seed = 5;
    for i in 0..2_100u64 {
        s.record(
            (crate::util::random::fast_next(&mut seed) >> 32) as u32,
            1000 + i / 10,
            &c,
        );
    }
    let p = s.snapshot(1200).p_ppm;
    assert!((80_000..90_000).contains(&p), "{p}");
    // The guard never raises p: a quieter offer leaves it for the next tick.
    s.offered.store(s.snapshot(0).offered + 254, Relaxed);
    for _ in 0..4 {
        s.record(0, 1900, &c);
    }
    assert_eq!(s.snapshot(1900).p_ppm, p);
}

#[test]
fn the_fleet_picture_sets_p_and_ages_without_syncs() {
    let s = RateShared::new(9, 0);
    let c = cfg(true);
    offer(&s, 500, &mut 3);
    // First tick: no picture yet; the local cap is the whole rate (no nodes seen): p = 1.
    let args = s.tick(1000, &c).unwrap();
    assert_eq!(
        (args.seq, args.offered, args.own_rate_milli),
        (1, 500, 500_000)
    );
    assert_eq!(s.snapshot(1000).p_ppm, PPM);
    // The fleet offers 4000 r/s over 4 nodes: p = 1/4 at once.
    let picture = FleetPicture {
        offered_milli: 4_000_000,
        passed_milli: 1_000_000,
        nodes: 4,
        offered_total: 10,
        passed_total: 5,
        own_offered_milli: 0,
        window_ms: 1000,
        accepted: true,
    };
    s.apply(&picture, 1010, &c);
    assert_eq!(s.snapshot(1010).p_ppm, 250_000);
    // No picture for a while: the fleet's p for two intervals, then toward the local cap
    // (1000/4 = 250 r/s against this node's own 500 r/s: p = 1/2), reached after fallback.
    offer(&s, 500, &mut 3);
    s.tick(2000, &c).unwrap();
    assert_eq!(s.snapshot(2000).p_ppm, 250_000);
    s.tick(3010, &c).unwrap();
    assert_eq!(s.snapshot(3010).p_ppm, 250_000);
    let offered = s.snapshot(3010).offered;
    s.offered.store(offered + 2_500, Relaxed); // 500 r/s over the next 5 s
    s.tick(8_010, &c).unwrap();
    // Half way through the fallback: half way from the fleet's p to the local one.
    assert_eq!(s.snapshot(8_010).p_ppm, 375_000);
    s.offered.store(offered + 5_500, Relaxed);
    s.tick(14_010, &c).unwrap();
    assert_eq!(s.snapshot(14_010).p_ppm, 500_000);
    // A picture again: back to the fleet's p.
    s.apply(&picture, 14_020, &c);
    assert_eq!(s.snapshot(14_020).p_ppm, 250_000);
    // Sequence numbers grow with every sync; a window is reported once.
    assert_eq!(s.tick(15_000, &c).unwrap().seq, 6);
    assert_eq!(s.tick(15_001, &c), None);
    let next = s.tick(15_999, &c).unwrap();
    assert_eq!((next.seq, next.window_ms, next.at_ms), (7, 16_000, 15_999));
}

#[test]
fn an_answer_to_a_superseded_sync_is_ignored() {
    let s = RateShared::new(9, 0);
    let c = cfg(true);
    let pic = |offered| FleetPicture {
        offered_milli: offered,
        passed_milli: 0,
        nodes: 2,
        offered_total: 0,
        passed_total: 0,
        own_offered_milli: 0,
        window_ms: 1000,
        accepted: true,
    };
    s.measure(1000, &c);
    let first = s.next_sync(1000, &c).unwrap();
    // A stalled worker's sync is still out when another sends the next window's.
    let second = s.next_sync(2000, &c).unwrap();
    assert!(s.apply_answer(&pic(4_000_000), second.seq, 2010, &c));
    assert_eq!(s.snapshot(2010).p_ppm, 250_000);
    // The first one's answer comes late: it does not undo the fresher picture.
    assert!(!s.apply_answer(&pic(1_000_000), first.seq, 2020, &c));
    assert_eq!(s.snapshot(2020).p_ppm, 250_000);
    assert_eq!((s.snapshot(2020).syncs, s.snapshot(2020).ignored), (1, 1));
    // Alone (no fleet), a tick measures and sends nothing.
    assert_eq!(s.next_sync(3000, &cfg(false)), None);
}

#[test]
fn a_fleet_that_shrinks_is_believed_after_the_reconnect_delays() {
    let s = RateShared::new(9, 0);
    let c = cfg(true);
    let pic = |offered, nodes| FleetPicture {
        offered_milli: offered,
        passed_milli: 0,
        nodes,
        offered_total: 0,
        passed_total: 0,
        own_offered_milli: 0,
        window_ms: 0,
        accepted: true,
    };
    s.apply(&pic(4_000_000, 3), 1000, &c);
    assert_eq!(s.snapshot(1000).p_ppm, 250_000);
    // Redis restarted empty: this node reports first and sees itself alone.
    s.apply(&pic(1_500_000, 1), 2000, &c);
    assert_eq!(s.snapshot(2000).p_ppm, 250_000);
    // A full picture again: applied.
    s.apply(&pic(5_000_000, 3), 3000, &c);
    assert_eq!(s.snapshot(3000).p_ppm, 200_000);
    // A node really left: pictures with fewer nodes for 3 s + 2 intervals, then applied.
    assert_eq!(RateShared::shrink_confirm_ms(&c), 5000);
    for t in [4000, 5000, 8000, 8999] {
        s.apply(&pic(2_000_000, 2), t, &c);
        assert_eq!(s.snapshot(t).p_ppm, 200_000);
    }
    s.apply(&pic(2_000_000, 2), 9000, &c);
    assert_eq!(s.snapshot(9000).p_ppm, 500_000);
    assert_eq!(s.snapshot(9000).syncs, 8);
}

#[test]
fn the_fleets_totals_never_go_backwards_here() {
    let s = RateShared::new(9, 0);
    let c = cfg(true);
    let pic = |offered_total| FleetPicture {
        offered_milli: 1,
        passed_milli: 0,
        nodes: 1,
        offered_total,
        passed_total: offered_total / 2,
        own_offered_milli: 0,
        window_ms: 0,
        accepted: true,
    };
    s.apply(&pic(1000), 1000, &c);
    s.apply(&pic(1500), 2000, &c);
    assert_eq!(s.snapshot(2000).fleet_offered_total, 1500);
    // Redis restarted: its totals start again from 0; here they go on.
    s.apply(&pic(200), 3000, &c);
    assert_eq!(s.snapshot(3000).fleet_offered_total, 1700);
    assert_eq!(s.snapshot(3000).fleet_passed_total, 850);
    s.apply(&pic(300), 4000, &c);
    assert_eq!(s.snapshot(4000).fleet_offered_total, 1800);
}

#[test]
fn sync_calls_and_replies() {
    let z = parse("api rate=100r/s redis=127.0.0.1:6379 prefix=eu").unwrap();
    let script = SyncScript::new(&z);
    assert_eq!(script.key, "eu:{api}:rate");
    assert_eq!(crate::redis::hash_tag(&script.key), Some("api"));
    let args = SyncArgs {
        node_id: 77,
        seq: 3,
        offered: 1000,
        passed: 400,
        own_rate_milli: 5,
        window_ms: 2000,
        at_ms: 2003,
    };
    let cmd = script.call(Form::Sha, &args);
    let (v, used) = crate::redis::resp::parse(&cmd).unwrap().unwrap();
    assert_eq!(used, cmd.len());
    let Value::Array(items) = v else { panic!() };
    assert_eq!(items.len(), 13);
    let arr = |x: &[i64]| Value::Array(x.iter().map(|&i| Value::Int(i)).collect());
    let p = sync_reply(&arr(&[4_000_000, 1_000_000, 3, 50, 20, 7000, 1, 900])).unwrap();
    assert_eq!((p.offered_milli, p.nodes, p.accepted), (4_000_000, 3, true));
    assert_eq!((p.window_ms, p.own_offered_milli), (7000, 900));
    for bad in [
        arr(&[1, 2, 3]),
        arr(&[-1, 0, 1, 0, 0, 0, 1, 0]),
        arr(&[1, 0, 0, 0, 0, 0, 1, 0]),
        arr(&[1, 0, 1, 0, 0, 0, 2, 0]),
        arr(&[1, 0, 1, 0, 0, 0, 1, -5]),
        Value::Error(b"NOSCRIPT x".to_vec()),
        Value::Nil,
    ] {
        assert!(sync_reply(&bad).is_err(), "{bad:?}");
    }
}
