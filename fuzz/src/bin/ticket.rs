//! Fuzz target: opening a session ticket (the smart_limit cookie value, attacker-controlled),
//! and checking the same bytes as a proof of work (`challenge=pow`).
//!
//! Input starting with `{`: the harness seals it as a ticket's plaintext (see
//! `seal_plaintext`), so the JSON reading and the room check behind authentication are
//! fuzzed. Any other input: a raw cookie value (length bound, base64url, nonce split, GCM
//! authentication). Both go through `Keyring::open` and `OpenCache::open`.
//!
//! Properties: the cache answers exactly what the keyring answers, a value that opened once
//! opens again to the same ticket (a cache hit), and a value the cache was told to remember
//! never makes a different value open.

use smart_limit_core::ticket::{Floor, Keyring, OpenCache, Ticket, MAX_TICKET_LEN};
use smart_limit_fuzz::{seal_plaintext, KEY_HEX, ROOM};

fn main() {
    let keys = Keyring::parse(KEY_HEX).expect("the fuzz key parses");
    let remembered = Ticket {
        sid: 42,
        qnum: 0,
        issued_at: 1,
        accepted_at: 1,
        last_seen: 1,
        told: Floor::NONE,
    };
    afl::fuzz!(|data: &[u8]| {
        let sealed;
        let value: &[u8] = if data.first() == Some(&b'{') {
            sealed = seal_plaintext(data, ROOM);
            sealed.as_bytes()
        } else {
            data
        };

        // The same bytes as a proof of work (`Smart-Limit-Proof`, attacker-controlled too):
        // refused or taken, never a panic; a proof an attacker made up without the key never
        // passes (its seed's MAC cannot match).
        if let Ok(bits) = smart_limit_core::challenge::verify(&keys, ROOM, (42, 1), data, 1) {
            assert!((1..=32).contains(&bits), "a proof verified at {bits} bits");
        }

        let direct = keys.open(value, ROOM).ok();
        // A fresh cache per input: state carried between inputs would make runs differ.
        let mut cache = OpenCache::new(4);
        let via_cache = cache.open(&keys, value, ROOM).ok();
        assert_eq!(
            direct, via_cache,
            "OpenCache::open differs from Keyring::open"
        );
        if direct.is_some() {
            assert_eq!(
                cache.open(&keys, value, ROOM).ok(),
                direct,
                "cache hit differs"
            );
        }

        // remember() answers exactly these bytes, nothing else.
        let mut cache = OpenCache::new(1);
        cache.remember(value, remembered);
        if value.len() <= MAX_TICKET_LEN {
            assert_eq!(cache.open(&keys, value, ROOM).ok(), Some(remembered));
        }
        if let Some((_, shorter)) = value.split_last() {
            let expect = keys.open(shorter, ROOM).ok();
            assert_eq!(
                cache.open(&keys, shorter, ROOM).ok(),
                expect,
                "cache answered other bytes"
            );
        }
    });
}
