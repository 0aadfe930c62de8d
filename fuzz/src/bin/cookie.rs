//! Fuzz target: the Cookie header walker (`cookie_values`, `cookie_value`,
//! `CookieName::values`) on attacker-controlled `Cookie:` headers.
//!
//! Input `NAME \0 HEADER` (NAME at most 64 bytes) chooses the cookie name; anything else is
//! a header searched for `smart_limit_shop`, the name of a zone called "shop".
//!
//! Properties: every value is a sub-slice of the header (no copies, no out-of-range
//! slicing) without a `;`; the walk ends (at most one value per header byte);
//! `cookie_value` is the first of `cookie_values`; a prepared `CookieName` finds the very
//! same values.

use smart_limit_core::ticket::{cookie_value, cookie_values, CookieName};
use smart_limit_fuzz::{is_subslice, split_cookie_input};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let (name, header) = split_cookie_input(data);

        // Bounded collect: a walk that never ended would otherwise be a hang, not a crash
        // with a message. Each value starts at a distinct occurrence of the name.
        let limit = header.len() + 1;
        let values: Vec<&[u8]> = cookie_values(header, name).take(limit + 1).collect();
        assert!(values.len() <= limit, "cookie_values does not end");
        for v in &values {
            assert!(
                is_subslice(header, v),
                "value is not a sub-slice of the header"
            );
            assert!(!v.contains(&b';'), "value runs past a ';'");
        }
        assert_eq!(cookie_value(header, name), values.first().copied());

        if let Ok(name) = core::str::from_utf8(name) {
            let prepared = CookieName::new(name);
            let again: Vec<&[u8]> = prepared.values(header).take(limit + 1).collect();
            assert_eq!(again.len(), values.len(), "CookieName finds other values");
            for (a, b) in again.iter().zip(&values) {
                assert!(core::ptr::eq(*a, *b), "CookieName finds other values");
            }
        }
    });
}
