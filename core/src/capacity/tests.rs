use super::control::{next as rule, Load, Move, Window};
use super::steering::{Sample, Steering};
use super::{parse_auto, Auto, STEP_MS};
use crate::config::ParseError;

const AUTO: Auto = Auto {
    min: 20,
    max: 5000,
    target_ms: 400,
};

/// A window of `n` responses, `slow` over the target (as many over half of it), `errors`
/// failed.
fn w(n: u64, slow: u64, errors: u64) -> Window {
    Window {
        n,
        slow,
        warm: slow,
        errors,
    }
}

/// `n` responses, `slow` over the target, `warm` over half of it.
fn warm(n: u64, slow: u64, warm: u64) -> Window {
    Window {
        warm,
        ..w(n, slow, 0)
    }
}

/// `active` sessions, nobody waiting.
fn on(active: u64) -> Load {
    Load { active, waiting: 0 }
}

/// The rule after a first cut (the slow start over).
fn next(value: u64, w: Window, load: Load, auto: &Auto) -> Option<(u64, Move)> {
    rule(value, w, load, true, auto)
}

#[test]
fn auto_values_parse_with_bounds() {
    assert_eq!(parse_auto("100"), None);
    assert_eq!(
        parse_auto("auto:2..50"),
        Some(Ok(Auto {
            min: 2,
            max: 50,
            target_ms: 500
        }))
    );
    assert_eq!(
        parse_auto("auto").map(|a| a.map(|a| (a.min, a.max))),
        Some(Ok((20, 5000)))
    );
    for bad in [
        "auto:50..20",
        "auto:0..5",
        "auto:5",
        "auto:x..9",
        "autox",
        "auto:5..",
        "auto:-1..5",
    ] {
        assert!(matches!(parse_auto(bad), Some(Err(_))), "{bad}");
    }
    assert!(matches!(
        parse_auto("auto:50..20"),
        Some(Err(ParseError::Range(_)))
    ));
}

#[test]
fn a_healthy_origin_raises_the_value_while_the_limit_binds() {
    // Healthy, limit reached: up by a tenth, at least one.
    assert_eq!(
        next(100, warm(500, 10, 100), on(95), &AUTO),
        Some((110, Move::Up))
    );
    assert_eq!(
        next(20, warm(50, 0, 10), on(20), &AUTO),
        Some((22, Move::Up))
    );
    // Far under the target (at most 5 % over half of it): up by a quarter.
    assert_eq!(next(20, w(50, 0, 0), on(20), &AUTO), Some((25, Move::Up)));
    let small = Auto { min: 1, ..AUTO };
    assert_eq!(next(3, w(50, 0, 0), on(3), &small), Some((4, Move::Up)));
    // Nobody reaches the limit: it proves nothing, the value holds.
    assert_eq!(next(100, w(500, 0, 0), on(50), &AUTO), None);
    assert_eq!(next(100, w(500, 0, 0), on(85), &AUTO), None);
    // ...unless people wait: the line fills new places only as its head polls.
    let waiting = Load {
        waiting: 40,
        ..on(85)
    };
    assert_eq!(
        next(100, w(500, 0, 0), waiting, &AUTO),
        Some((125, Move::Up))
    );
    let behind = Load {
        waiting: 40,
        ..on(70)
    };
    assert_eq!(next(100, w(500, 0, 0), behind, &AUTO), None);
    // Before the first cut: up by half (the slow start), whatever the warmth.
    assert_eq!(
        rule(100, warm(500, 10, 100), on(100), false, &AUTO),
        Some((150, Move::Up))
    );
    // Never above the upper bound.
    assert_eq!(
        next(4900, w(500, 0, 0), on(4900), &AUTO),
        Some((5000, Move::Up))
    );
    assert_eq!(next(5000, w(500, 0, 0), on(5000), &AUTO), None);
    // Between the thresholds (6 % slow) it holds; too few samples say nothing.
    assert_eq!(next(100, w(100, 6, 0), on(100), &AUTO), None);
    assert_eq!(next(100, w(9, 9, 9), on(100), &AUTO), None);
}

#[test]
fn a_slow_or_failing_origin_cuts_the_value_once_per_departure_wave() {
    // p90 over the target: to 0.8 of the sessions active.
    assert_eq!(
        next(100, w(100, 11, 0), on(100), &AUTO),
        Some((80, Move::DownSlow))
    );
    // Errors over 1 %, whatever the latency.
    assert_eq!(
        next(100, w(100, 0, 2), on(90), &AUTO),
        Some((72, Move::DownErrors))
    );
    // The last cut has not acted (more active than the value): it holds.
    assert_eq!(next(80, w(100, 50, 0), on(100), &AUTO), None);
    // Never below the lower bound.
    assert_eq!(
        next(21, w(100, 50, 0), on(21), &AUTO),
        Some((20, Move::DownSlow))
    );
    assert_eq!(next(20, w(100, 50, 0), on(20), &AUTO), None);
}

#[test]
fn the_steering_counts_windows_and_steps_them_once() {
    let s = Steering::default();
    s.start(&AUTO);
    assert_eq!(s.value(&AUTO), 20);
    let t0 = 1_000_000;
    let fast = Sample {
        ms: 5,
        failed: false,
    };
    let warmish = Sample {
        ms: 300,
        failed: false,
    };
    // The first sample opens a window; samples within it close nothing.
    for i in 0..30 {
        assert_eq!(s.observe(fast, t0 + i, &AUTO), None);
    }
    assert_eq!(s.observe(warmish, t0 + 30, &AUTO), None);
    let closed = s
        .observe(fast, t0 + STEP_MS, &AUTO)
        .expect("the window closes");
    assert_eq!(closed, warm(31, 0, 1));
    assert_eq!(s.observe(fast, t0 + STEP_MS + 1, &AUTO), None);
    // Never cut yet: the slow start (up by half).
    let up = s.step(closed, on(20), &AUTO, t0 + STEP_MS).expect("up");
    assert_eq!((up.from, up.to, up.turned), (20, 30, true));
    assert_eq!(s.value(&AUTO), 30);
    // The same direction again is no turn; a cut is, and ends the slow start.
    assert!(!s.step(closed, on(30), &AUTO, t0).expect("up").turned);
    let down = s.step(w(30, 30, 0), on(30), &AUTO, t0).expect("down");
    assert_eq!((down.from, down.to, down.turned), (45, 24, true));
    assert_eq!(s.step(closed, on(24), &AUTO, t0).map(|m| m.to), Some(30));
    assert_eq!(
        s.step(w(30, 30, 0), on(24), &AUTO, t0).map(|m| m.to),
        Some(20)
    );
    // Pinned: the value is the pin's, the rule leaves it.
    s.pin(Some(7));
    assert_eq!(s.value(&AUTO), 7);
    assert_eq!(s.step(closed, on(7), &AUTO, t0), None);
    s.pin(None);
    assert_eq!(s.value(&AUTO), 20);
    // A reload with other bounds keeps the value inside them.
    let narrow = Auto { min: 30, ..AUTO };
    s.start(&narrow);
    assert_eq!(s.value(&narrow), 30);
    let v = s.view(&narrow);
    assert_eq!(
        (v.responses, v.slow, v.errors, v.last_move),
        (33, 0, 0, Some(Move::DownSlow))
    );
}

/// The places the next two rises may open: the steps the rule would take up (by half in the
/// slow start, a quarter after a cut), not past the upper bound, none while pinned.
#[test]
fn the_opening_is_the_next_two_rises() {
    let s = Steering::default();
    s.start(&AUTO);
    assert_eq!(s.opening(&AUTO), 10 + 15);
    let window = w(30, 0, 0);
    s.step(window, on(20), &AUTO, 1).expect("up");
    assert_eq!(s.opening(&AUTO), 15 + 22);
    s.step(w(30, 30, 0), on(30), &AUTO, 2).expect("down");
    assert_eq!(s.value(&AUTO), 24);
    assert_eq!(s.opening(&AUTO), 6 + 7);
    let near_max = Auto { max: 26, ..AUTO };
    assert_eq!(s.opening(&near_max), 2);
    s.pin(Some(7));
    assert_eq!(s.opening(&AUTO), 0);
}
