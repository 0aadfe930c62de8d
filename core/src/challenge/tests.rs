use super::*;
use crate::ticket::Keyring;

/// A ticket's issue time.
const T0: u64 = 1_700_000_000_000;

fn keys() -> Keyring {
    Keyring::from_key(&[7u8; 32]).unwrap()
}

fn proof(seed: &[u8; SEED_BYTES], nonce: u64) -> Vec<u8> {
    format!("{}.{nonce}", encode_seed(seed)).into_bytes()
}

#[test]
fn a_solved_seed_verifies_for_its_ticket_only() {
    let k = keys();
    let s = seed(&k, "shop", (42, T0), 8);
    assert_eq!(s[0], 8);
    assert_eq!(encode_seed(&s).len(), SEED_CHARS);
    let n = solve(&s, 8, 0, 1 << 20).unwrap();
    assert_eq!(verify(&k, "shop", (42, T0), &proof(&s, n), 8), Ok(8));
    // Another ticket, another room, another key: a foreign seed.
    assert_eq!(
        verify(&k, "shop", (43, T0), &proof(&s, n), 8),
        Err(ProofError::Foreign)
    );
    assert_eq!(
        verify(&k, "shoe", (42, T0), &proof(&s, n), 8),
        Err(ProofError::Foreign)
    );
    let other = Keyring::from_key(&[8u8; 32]).unwrap();
    assert_eq!(
        verify(&other, "shop", (42, T0), &proof(&s, n), 8),
        Err(ProofError::Foreign)
    );
    // Another ticket of the same session (a user's other device, `one_place_per=`).
    assert_eq!(
        verify(&k, "shop", (42, T0 + 1), &proof(&s, n), 8),
        Err(ProofError::Foreign)
    );
    // The difficulty went up beyond the grace: too easy now.
    assert_eq!(
        verify(&k, "shop", (42, T0), &proof(&s, n), 9),
        Err(ProofError::TooEasy)
    );
}

#[test]
fn a_nonce_that_does_not_solve_is_refused() {
    let k = keys();
    let s = seed(&k, "shop", (42, T0), 16);
    let n = solve(&s, 16, 0, 1 << 24).unwrap();
    // A nonce below the first solution does not solve (the solver stops at the first).
    if n > 0 {
        assert_eq!(
            verify(&k, "shop", (42, T0), &proof(&s, n - 1), 16),
            Err(ProofError::Unsolved)
        );
    }
    // A seed claiming an easier difficulty is another seed: its MAC does not match.
    let mut easy = s;
    easy[0] = 1;
    assert_eq!(
        verify(&k, "shop", (42, T0), &proof(&easy, 0), 1),
        Err(ProofError::Foreign)
    );
}

#[test]
fn malformed_proofs_are_refused_without_panic() {
    let k = keys();
    for bad in [
        &b""[..],
        b".",
        b"abc.1",
        b"AAAAAAAAAAAA.",
        b"AAAAAAAAAAAA.12a",
        b"AAAAAAAAAAAA.123456789012345678901",
        b"AAAAAAAAAAA*.1",
        b"\xff\xfe.1",
        b"AAAAAAAAAAAA",
    ] {
        assert_eq!(
            verify(&k, "shop", (1, T0), bad, 1),
            Err(ProofError::Malformed),
            "{bad:?}"
        );
    }
}

#[test]
fn the_hash_is_sha256_of_the_seed_bytes_then_the_nonce() {
    // SHA-256("abc"), the FIPS 180-2 example.
    let h = hash(b"ab", b"c");
    assert_eq!(h[..4], [0xba, 0x78, 0x16, 0xbf]);
    assert_eq!(zero_bits(&[0u8; 32]), 256);
    let mut h = [0u8; 32];
    h[1] = 0x10;
    assert_eq!(zero_bits(&h), 11);
}

#[test]
fn bits_parse() {
    assert_eq!(parse_bits("auto"), Ok(Bits::Auto));
    assert_eq!(parse_bits("20"), Ok(Bits::Fixed(20)));
    for bad in ["0", "33", "-1", "", "x"] {
        assert!(parse_bits(bad).is_err(), "{bad}");
    }
}

#[test]
fn auto_rises_under_a_flood_and_falls_after() {
    let mut p = Pressure::default();
    let (mut asked, mut admitted) = (0u64, 0u64);
    let mut t = 1_000_000;
    assert_eq!(p.bits(t, asked, admitted, 0), AUTO_MIN_BITS);
    // Calm: as many come as go.
    for _ in 0..5 {
        t += 1000;
        asked += 50;
        admitted += 50;
        assert_eq!(p.bits(t, asked, admitted, 10), AUTO_MIN_BITS);
    }
    // A flood: 5,000 ask per second, 50 let in.
    let mut top = 0;
    for _ in 0..10 {
        t += 1000;
        asked += 5000;
        admitted += 50;
        top = p.bits(t, asked, admitted, 1000);
    }
    assert_eq!(top, AUTO_MAX_BITS);
    // It passes: back down within a few seconds.
    let mut after = top;
    for _ in 0..10 {
        t += 1000;
        asked += 50;
        admitted += 50;
        after = p.bits(t, asked, admitted, 1000);
    }
    assert_eq!(after, AUTO_MIN_BITS);
    // Between looks the difficulty stays.
    assert_eq!(p.bits(t + 10, asked + 100_000, admitted, 1000), after);
}

#[test]
fn doublings_count_whole_doublings_by_halving() {
    let cases = [
        (0.5, 0),
        (1.0, 0),
        (1.99, 0),
        (2.0, 1),
        (3.99, 1),
        (4.0, 2),
        (1e12, 31),
    ];
    for (ratio, d) in cases {
        assert_eq!(doublings(ratio), d, "{ratio}");
    }
    assert_eq!(doublings(f64::NAN), 0);
}

/// A Redis room: the fleet's figure from the script's last reply decides while it is fresh,
/// whatever this worker's own counters say; once stale, the worker's own view again.
#[test]
fn the_fleets_pressure_decides_while_fresh() {
    let mut p = Pressure::default();
    let t = 1_000_000;
    assert_eq!(p.fleet_bits(t), None);
    p.note_fleet(t, 3);
    assert_eq!(p.fleet_bits(t), Some(AUTO_MIN_BITS + 3));
    assert_eq!(p.fleet_bits(t + FLEET_FRESH_MS), Some(AUTO_MIN_BITS + 3));
    assert_eq!(p.fleet_bits(t + FLEET_FRESH_MS + 1), None);
    // (A clock that went back: not fresh.)
    assert_eq!(p.fleet_bits(t - 1), None);
    p.note_fleet(t, 200);
    assert_eq!(p.fleet_bits(t), Some(AUTO_MAX_BITS));
}

#[test]
fn a_user_key_names_one_session_per_room() {
    let k = keys();
    let alice = k.user_sid("shop", b"alice");
    assert_ne!(alice, 0);
    assert_eq!(k.user_sid("shop", b"alice"), alice);
    assert_ne!(k.user_sid("shop", b"bob"), alice);
    assert_ne!(k.user_sid("shoe", b"alice"), alice);
    let other = Keyring::from_key(&[8u8; 32]).unwrap();
    assert_ne!(other.user_sid("shop", b"alice"), alice);
    // A user key never derives a challenge's seed (their inputs start apart).
    let seed = seed(&k, "shop", (alice, T0), 16);
    assert_ne!(seed[1..], k.user_sid("shop", &[16u8; 9]).to_le_bytes());
}

#[test]
fn a_client_solves_the_seed_it_is_given() {
    let k = keys();
    let text = encode_seed(&seed(&k, "shop", (7, T0), 10));
    let proof = solve_proof(&text, 10, 1 << 24).unwrap();
    assert_eq!(verify(&k, "shop", (7, T0), proof.as_bytes(), 10), Ok(10));
    assert_eq!(solve_proof("not base64!", 10, 10), None);
}

#[test]
fn a_spent_proof_is_remembered_while_it_could_be_taken() {
    // Taken while the difficulty in force is up to GRACE_BITS above its own, and until then
    // the ticket needs a proof: the record lasts as long as that no-script wait.
    assert_eq!(spent_until(T0, 16), T0 + no_script_wait_ms(16 + GRACE_BITS));
    assert!(spent_until(T0, 22) > T0 + no_script_wait_ms(22));
    assert_eq!(spent_until(u64::MAX - 1, 32), u64::MAX);
    // Keys: never 0 (a free entry), apart for two tickets of one session.
    assert_ne!(spent_key((0, 0)), 0);
    assert_ne!(spent_key((42, T0)), spent_key((42, T0 + 1)));
    assert_ne!(spent_key((42, T0)), spent_key((43, T0)));
}

/// The cookie check writes `last_seen == issued_at`: such a ticket was never challenged, and
/// its no-script wait starts at its first challenge, however long ago it was minted.
#[test]
fn the_no_script_wait_counts_from_the_first_challenge() {
    assert_eq!(first_challenge(T0, T0), None);
    assert_eq!(first_challenge(T0, T0 + 5_000), Some(T0 + 5_000));
    assert_eq!(
        spent_until(T0 + 5_000, 16),
        T0 + 5_000 + no_script_wait_ms(16 + GRACE_BITS)
    );
}
