//! Fuzz target: configuration values. These are not remote input, but a typo or a
//! generated config must give an error message, never crash `nginx -t`. Non-UTF-8 input is
//! skipped (nginx hands the parsers UTF-8 checked strings).
//!
//! The input goes whole to `parse_size`, `parse_time_ms`, `parse_status`,
//! `parse_host_port`, `Keyring::parse` (a key file), `check_template` and
//! `Template::compile` (a page template); split on spaces or NULs into arguments, to
//! `ZoneParams::parse` (a `smart_limit_zone` line), `RateZoneParams::parse` (a
//! `smart_limit_rate_zone` line) and each argument again to the value parsers. Every error is formatted (messages quote user text).
//!
//! Properties: a parsed HOST:PORT has a port >= 1 and a non-empty host borrowed from the
//! input; a status is one of 200/202/429/503; a parsed zone keeps its first argument as a
//! valid name; a parsed rate zone has a rate and a sync timeout below its interval; a
//! compiled template never renders more than `max_len` promises (the module
//! sizes the response buffer with it), in either language, for the largest figures.

use std::hint::black_box;

use smart_limit_core::config::{
    check_zone_name, parse_host_port, parse_size, parse_status, parse_time_ms,
};
use smart_limit_core::page::{check_template, Lang, Template, ViewStatus, WaitView};
use smart_limit_core::rate::RateZoneParams;
use smart_limit_core::ticket::Keyring;
use smart_limit_core::zone::ZoneParams;
use smart_limit_fuzz::{is_subslice, words};

fn values(s: &str) {
    if let Err(e) = parse_size(s) {
        black_box(e.to_string());
    }
    if let Err(e) = parse_time_ms(s) {
        black_box(e.to_string());
    }
    match parse_status(s) {
        Ok(n) => assert!(matches!(n, 200 | 202 | 429 | 503), "status {n}"),
        Err(e) => drop(black_box(e.to_string())),
    }
    match parse_host_port(s) {
        Ok((host, port)) => {
            assert!(port >= 1 && !host.is_empty(), "host {host:?} port {port}");
            assert!(
                is_subslice(s.as_bytes(), host.as_bytes()),
                "host not from input"
            );
        }
        Err(e) => drop(black_box(e.to_string())),
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Ok(text) = core::str::from_utf8(data) else {
            return;
        };
        values(text);

        let args = words(text);
        for a in &args {
            values(a);
        }
        match ZoneParams::parse(&args) {
            Ok(z) => {
                assert_eq!(Some(&z.name.as_str()), args.first(), "zone name changed");
                assert!(
                    check_zone_name(&z.name).is_ok(),
                    "invalid zone name accepted"
                );
            }
            Err(e) => drop(black_box(e.to_string())),
        }

        match RateZoneParams::parse(&args) {
            Ok(z) => {
                assert_eq!(Some(&z.name.as_str()), args.first(), "zone name changed");
                assert!(z.rate_milli > 0, "a zone without a rate");
                assert!(
                    z.timeout_ms < z.interval_ms,
                    "a sync timeout not below the interval"
                );
            }
            Err(e) => drop(black_box(e.to_string())),
        }

        match Keyring::parse(text) {
            Ok(k) => assert!(!k.is_empty()),
            Err(e) => drop(black_box(e.to_string())),
        }

        if let Err(e) = check_template(text) {
            black_box(e.to_string());
        }
        let t = Template::compile(text);
        assert!(t.text_len() <= text.len(), "template text grew");
        let view = WaitView {
            room: "shop",
            status: ViewStatus::Waiting,
            position: Some(u64::MAX),
            queue_len: u64::MAX,
            eta_secs: Some(u64::MAX),
            refresh_secs: u64::MAX,
            updated_at: u64::MAX,
            starts_at: Some(u64::MAX),
            challenge: Some(([b'A'; 12], 32)),
            token: Some("eyJ.eyJ.sig"),
            resumed: true,
        };
        let mut out = Vec::new();
        for lang in [Lang::En, Lang::Ja] {
            out.clear();
            t.render(&view, lang, &mut out);
            let max = t.max_len(view.room.len());
            assert!(
                out.len() <= max,
                "rendered {} bytes, max_len {max}",
                out.len()
            );
        }
    });
}
