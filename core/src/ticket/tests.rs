//! Unit tests of tickets: sealing, opening, keys, the cookie walker.

use super::seal::*;
use super::*;
use aes_gcm::aead::{Aead, Payload};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

const KEY_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const KEY_B: &str = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

fn ticket() -> Ticket {
    Ticket {
        sid: 0xdead_beef_1234_5678,
        qnum: 42,
        issued_at: 1_694_432_700_000,
        accepted_at: 0,
        last_seen: 1_694_432_754_000,
        told: Floor::NONE,
    }
}

/// Small deterministic generator so the fuzz-style loops are reproducible.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

#[test]
fn open_cache_answers_only_exact_bytes() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let mut cache = OpenCache::new(4);
    let v = kr.seal("shop", &ticket()).unwrap();
    assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), ticket());
    assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), ticket());
    // Any change misses the cache and fails to open, as without it.
    let mut bad = v.clone().into_bytes();
    bad[10] = if bad[10] == b'A' { b'B' } else { b'A' };
    assert!(cache.open(&kr, &bad, "shop").is_err());
    let short = &v.as_bytes()[..v.len() - 1];
    assert!(cache.open(&kr, short, "shop").is_err());
    // Many tickets through a small cache: every one still opens to itself.
    let mut sealed = vec![];
    for i in 0..50u64 {
        let t = Ticket {
            sid: i + 1,
            ..ticket()
        };
        sealed.push((kr.seal("shop", &t).unwrap(), t));
    }
    for _ in 0..3 {
        for (v, t) in &sealed {
            assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), *t);
        }
    }
    let t = Ticket {
        sid: 999,
        ..ticket()
    };
    let v = kr.seal("shop", &t).unwrap();
    cache.remember(v.as_bytes(), t);
    assert_eq!(cache.open(&kr, v.as_bytes(), "shop").unwrap(), t);
}

#[test]
fn round_trip() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let t = ticket();
    let v = kr.seal("shop", &t).unwrap();
    assert!(v.len() <= MAX_TICKET_LEN);
    assert!(
        v.bytes().all(|b| B64URL.contains(&b)),
        "base64url, no padding: {v}"
    );
    assert_eq!(kr.open(v.as_bytes(), "shop").unwrap(), t);
    // Fresh nonce every time.
    assert_ne!(kr.seal("shop", &t).unwrap(), v);
}

#[test]
fn max_size_ticket_fits() {
    let kr = Keyring::generate().unwrap();
    let room = "r".repeat(64);
    let t = Ticket {
        sid: u64::MAX,
        qnum: u64::MAX,
        issued_at: u64::MAX,
        accepted_at: u64::MAX,
        last_seen: u64::MAX,
        told: Floor {
            position: u64::MAX,
            estimate: true,
        },
    };
    let v = kr.seal(&room, &t).unwrap();
    assert!(v.len() <= MAX_TICKET_LEN, "{}", v.len());
    assert_eq!(kr.open(v.as_bytes(), &room).unwrap(), t);
}

#[test]
fn rotation_keeps_old_tickets() {
    let old = Keyring::parse(KEY_A).unwrap();
    let v = old.seal("shop", &ticket()).unwrap();
    let rotated =
        Keyring::parse(&format!("# new key first\n{KEY_B}\n\n# old key\n{KEY_A}\n")).unwrap();
    assert_eq!(rotated.len(), 2);
    assert_eq!(rotated.open(v.as_bytes(), "shop").unwrap(), ticket());
    // New tickets are sealed with the new key: the old keyring alone cannot open them.
    let v2 = rotated.seal("shop", &ticket()).unwrap();
    assert!(matches!(
        old.open(v2.as_bytes(), "shop"),
        Err(TicketError::Auth)
    ));
    let new_only = Keyring::parse(KEY_B).unwrap();
    assert!(new_only.open(v2.as_bytes(), "shop").is_ok());
}

#[test]
fn tampering_any_byte_fails() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let v = kr.seal("shop", &ticket()).unwrap().into_bytes();
    for i in 0..v.len() {
        for &c in B64URL {
            if c == v[i] {
                continue;
            }
            let mut bad = v.clone();
            bad[i] = c;
            assert!(kr.open(&bad, "shop").is_err(), "byte {i} -> {}", c as char);
        }
    }
}

#[test]
fn tampering_decoded_bytes_fails() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let raw = URL_SAFE_NO_PAD
        .decode(kr.seal("shop", &ticket()).unwrap())
        .unwrap();
    for i in 0..raw.len() {
        for bit in 0..8 {
            let mut bad = raw.clone();
            bad[i] ^= 1 << bit;
            let enc = URL_SAFE_NO_PAD.encode(&bad);
            assert!(matches!(
                kr.open(enc.as_bytes(), "shop"),
                Err(TicketError::Auth)
            ));
        }
    }
}

#[test]
fn truncation_fails() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let v = kr.seal("shop", &ticket()).unwrap();
    for n in 0..v.len() {
        assert!(kr.open(&v.as_bytes()[..n], "shop").is_err(), "prefix {n}");
    }
    assert!(matches!(kr.open(b"", "shop"), Err(TicketError::TooShort)));
    let short = URL_SAFE_NO_PAD.encode([0u8; NONCE_LEN + TAG_LEN - 1]);
    assert!(matches!(
        kr.open(short.as_bytes(), "shop"),
        Err(TicketError::TooShort)
    ));
    // Appending data also breaks it.
    let longer = format!("{v}AAAA");
    assert!(kr.open(longer.as_bytes(), "shop").is_err());
}

#[test]
fn other_room_fails() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let v = kr.seal("shop", &ticket()).unwrap();
    assert!(matches!(
        kr.open(v.as_bytes(), "shop2"),
        Err(TicketError::Auth)
    ));
    assert!(matches!(kr.open(v.as_bytes(), ""), Err(TicketError::Auth)));
}

#[test]
fn other_key_fails() {
    let v = Keyring::parse(KEY_A)
        .unwrap()
        .seal("shop", &ticket())
        .unwrap();
    let other = Keyring::parse(KEY_B).unwrap();
    assert!(matches!(
        other.open(v.as_bytes(), "shop"),
        Err(TicketError::Auth)
    ));
    let random = Keyring::generate().unwrap();
    assert!(matches!(
        random.open(v.as_bytes(), "shop"),
        Err(TicketError::Auth)
    ));
}

#[test]
fn oversized_fails_before_decoding() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let big = vec![b'A'; MAX_TICKET_LEN + 1];
    assert!(matches!(
        kr.open(&big, "shop"),
        Err(TicketError::TooLong { len }) if len == MAX_TICKET_LEN + 1
    ));
    // Non-base64 but oversized is still reported as oversized: length is checked first.
    let junk = vec![0xffu8; 10_000];
    assert!(matches!(
        kr.open(&junk, "shop"),
        Err(TicketError::TooLong { .. })
    ));
}

#[test]
fn junk_never_panics() {
    let kr = Keyring::parse(KEY_A).unwrap();
    for junk in [
        &b""[..],
        b"=",
        b"====",
        b"not base64!",
        b"\xff\xfe\x00\x01",
        b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        b"+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/",
    ] {
        assert!(kr.open(junk, "shop").is_err());
    }
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = rng.below(MAX_TICKET_LEN + 64);
        let any: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        assert!(kr.open(&any, "shop").is_err());
        // Also valid base64url text, which reaches the decryption step.
        let text: Vec<u8> = (0..len).map(|_| B64URL[rng.below(64)]).collect();
        assert!(kr.open(&text, "shop").is_err());
    }
}

#[test]
fn authenticated_garbage_is_rejected_as_json() {
    // Something sealed with the right key and room but not a ticket document.
    let kr = Keyring::parse(KEY_A).unwrap();
    let c = &kr.ciphers[0];
    let nonce = [7u8; NONCE_LEN];
    let ct = c
        .encrypt(
            &nonce.into(),
            Payload {
                msg: b"{\"room\":1}",
                aad: b"shop",
            },
        )
        .unwrap();
    let mut raw = nonce.to_vec();
    raw.extend_from_slice(&ct);
    let v = URL_SAFE_NO_PAD.encode(raw);
    assert!(matches!(
        kr.open(v.as_bytes(), "shop"),
        Err(TicketError::Json(_))
    ));
}

#[test]
fn room_field_must_match() {
    // Sealed with AAD "shop" but claiming room "other": only the explicit check catches it.
    let kr = Keyring::parse(KEY_A).unwrap();
    let c = &kr.ciphers[0];
    let nonce = [9u8; NONCE_LEN];
    let json = serde_json::to_vec(&Wire::new("other", &ticket())).unwrap();
    let ct = c
        .encrypt(
            &nonce.into(),
            Payload {
                msg: &json,
                aad: b"shop",
            },
        )
        .unwrap();
    let mut raw = nonce.to_vec();
    raw.extend_from_slice(&ct);
    let v = URL_SAFE_NO_PAD.encode(raw);
    assert!(matches!(
        kr.open(v.as_bytes(), "shop"),
        Err(TicketError::WrongRoom)
    ));
}

#[test]
fn wire_writer_matches_serde() {
    for room in ["shop", "a\"b\\c", "r\n\u{1}x", "日本", ""] {
        for t in [
            ticket(),
            Ticket {
                sid: u64::MAX,
                qnum: 0,
                issued_at: 1,
                accepted_at: u64::MAX,
                last_seen: 0,
                told: Floor {
                    position: 7,
                    estimate: false,
                },
            },
            Ticket {
                told: Floor {
                    position: 9,
                    estimate: true,
                },
                ..ticket()
            },
        ] {
            let mut out = Vec::new();
            write_wire(room, &t, &mut out);
            assert_eq!(
                out,
                serde_json::to_vec(&Wire::new(room, &t)).unwrap(),
                "{room:?}"
            );
            let kr = Keyring::parse(KEY_A).unwrap();
            let v = kr.seal(room, &t).unwrap();
            assert_eq!(kr.open(v.as_bytes(), room).unwrap(), t);
        }
    }
    // A room name too long for a ticket is refused when sealing, not cut.
    let kr = Keyring::parse(KEY_A).unwrap();
    assert!(matches!(
        kr.seal(&"x".repeat(400), &ticket()),
        Err(TicketError::TooLong { .. })
    ));
}

#[test]
fn wire_format_uses_short_names() {
    let json = serde_json::to_string(&Wire::new("shop", &ticket())).unwrap();
    assert_eq!(
        json,
        r#"{"room":"shop","sid":16045690981402826360,"q":42,"iat":1694432700000,"acc":0,"seen":1694432754000}"#
    );
}

/// [S27] The lowest position told is written only when there is one, and a ticket sealed
/// before it existed opens with none.
#[test]
fn the_position_floor_is_optional_on_the_wire() {
    let old = r#"{"room":"shop","sid":1,"q":42,"iat":5,"acc":0,"seen":6}"#;
    let w: Wire = serde_json::from_str(old).unwrap();
    assert_eq!(w.ticket().told, Floor::NONE);
    let t = Ticket {
        told: Floor {
            position: 17,
            estimate: false,
        },
        ..ticket()
    };
    let json = serde_json::to_string(&Wire::new("shop", &t)).unwrap();
    let tail = r#","seen":1694432754000,"pos":17}"#;
    assert!(json.ends_with(tail), "{json}");
    let w: Wire = serde_json::from_str(&json).unwrap();
    assert_eq!(w.ticket(), t);
    // An estimate's floor says so; an older ticket's is settled.
    assert!(!w.ticket().told.estimate);
    let t = Ticket {
        told: Floor {
            estimate: true,
            ..t.told
        },
        ..t
    };
    let json = serde_json::to_string(&Wire::new("shop", &t)).unwrap();
    assert!(json.ends_with(r#","pos":17,"est":true}"#), "{json}");
    assert_eq!(serde_json::from_str::<Wire>(&json).unwrap().ticket(), t);
}

#[test]
fn key_formats() {
    let bytes: Vec<u8> = (0u8..32).collect();
    let std_padded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let std_nopad = std_padded.trim_end_matches('=').to_string();
    let url = base64::engine::general_purpose::URL_SAFE.encode([0xfbu8; 32]);
    let url_nopad = url.trim_end_matches('=').to_string();
    let upper = KEY_A.to_uppercase();
    for k in [KEY_A, &upper, &std_padded, &std_nopad, &url, &url_nopad] {
        let kr = Keyring::parse(k).unwrap_or_else(|e| panic!("{k}: {e}"));
        assert_eq!(kr.len(), 1);
    }
    // Hex and base64 of the same bytes are the same key.
    let a = Keyring::parse(KEY_A).unwrap();
    let b = Keyring::parse(&std_padded).unwrap();
    let v = a.seal("x", &ticket()).unwrap();
    assert!(b.open(v.as_bytes(), "x").is_ok());
    // CRLF, BOM, indentation, comments.
    let text = format!("\u{feff}# keys\r\n  {KEY_B}  \r\n\r\n\t# old\r\n{std_nopad}\r\n");
    assert_eq!(Keyring::parse(&text).unwrap().len(), 2);
}

#[test]
fn key_file_errors() {
    assert_eq!(Keyring::parse("").unwrap_err(), KeyError::Empty);
    assert_eq!(
        Keyring::parse("\n# only a comment\n   \n").unwrap_err(),
        KeyError::Empty
    );

    let bad_hex = format!("{}g", &KEY_A[..63]);
    let err = Keyring::parse(&format!("# c\n\n{bad_hex}\n")).unwrap_err();
    match &err {
        KeyError::BadLine { line, reason } => {
            assert_eq!(*line, 3);
            assert!(reason.to_string().contains("hex"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with("line 3: "), "{msg}");
    assert!(!msg.contains(&bad_hex[..20]), "key material leaked: {msg}");

    // Too short hex.
    let err = Keyring::parse(&format!("{KEY_A}\n{}\n", &KEY_A[..62])).unwrap_err();
    assert!(
        matches!(&err, KeyError::BadLine { line: 2, reason } if reason.to_string().contains("62 hex digits")),
        "{err}"
    );
    // Base64 of the wrong length.
    let b16 = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
    let err = Keyring::parse(&b16).unwrap_err();
    assert!(
        matches!(&err, KeyError::BadLine { line: 1, reason } if reason.to_string().contains("16 bytes")),
        "{err}"
    );
    // Garbage and two keys on one line.
    let err = Keyring::parse("%%%% not a key").unwrap_err();
    assert!(matches!(err, KeyError::BadLine { line: 1, .. }));
    let err = Keyring::parse(&format!("{KEY_A} {KEY_B}")).unwrap_err();
    assert!(
        matches!(&err, KeyError::BadLine { line: 1, reason } if reason.to_string().contains("spaces"))
    );
    assert!(!err.to_string().contains(KEY_A));
    // Debug output of a keyring shows no key material.
    let dbg = format!("{:?}", Keyring::parse(KEY_A).unwrap());
    assert_eq!(dbg, "Keyring { keys: 1 }");
}

#[test]
fn derived_values_follow_the_first_key_only() {
    let a = Keyring::parse(KEY_A).unwrap();
    // Another node with the same key file (and old keys after it) agrees.
    let a_again = Keyring::parse(&format!("# keys\n{KEY_A}\n{KEY_B}\n")).unwrap();
    let x = a.derive_u64("flood seed", "shop");
    assert_eq!(x, a_again.derive_u64("flood seed", "shop"));
    assert_eq!(x, a.derive_u64("flood seed", "shop"));
    // The same key as bytes (Keyring::from_key) derives the same.
    let mut raw = [0u8; 32];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = i as u8;
    }
    assert_eq!(
        Keyring::from_key(&raw)
            .unwrap()
            .derive_u64("flood seed", "shop"),
        x
    );
    // Another first key, room or purpose: another value; the split between purpose and room
    // is part of the input.
    let b = Keyring::parse(&format!("{KEY_B}\n{KEY_A}")).unwrap();
    assert_ne!(b.derive_u64("flood seed", "shop"), x);
    assert_ne!(a.derive_u64("flood seed", "shop2"), x);
    assert_ne!(a.derive_u64("flood see", "dshop"), x);
    assert_ne!(a.derive_u64("", ""), x);
    // Long inputs (several blocks) work and differ in their last byte.
    let long = "r".repeat(100);
    assert_ne!(
        a.derive_u64("flood seed", &long),
        a.derive_u64("flood seed", &format!("{}s", &long[..99]))
    );
}

#[test]
fn key_parse_never_panics() {
    let mut rng = XorShift(12345);
    for _ in 0..5_000 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let text = String::from_utf8_lossy(&bytes);
        let _ = Keyring::parse(&text);
    }
}

#[test]
fn sid_is_random_and_nonzero() {
    let a = random_sid().unwrap();
    let b = random_sid().unwrap();
    assert_ne!(a, 0);
    assert_ne!(a, b);
}

#[test]
fn cookie_lookup() {
    let h = b"a=1; smart_limit=abc_-; b=2";
    assert_eq!(cookie_value(h, b"smart_limit"), Some(&b"abc_-"[..]));
    assert_eq!(cookie_value(h, b"a"), Some(&b"1"[..]));
    assert_eq!(cookie_value(h, b"b"), Some(&b"2"[..]));
    assert_eq!(cookie_value(h, b"c"), None);
    assert_eq!(cookie_value(h, b""), None);
    // Prefix / suffix names do not match.
    assert_eq!(
        cookie_value(b"xsmart_limit=1; smart_limitx=2", b"smart_limit"),
        None
    );
    // Spaces, tabs, empty parts, junk, non-UTF-8.
    let h = b";; \xff\xfe junk ;=;  \t sl \t =  v1 \t; sl=v2";
    assert_eq!(cookie_value(h, b"sl"), Some(&b"v1"[..]));
    assert_eq!(cookie_value(b"sl=\"quoted\"", b"sl"), Some(&b"quoted"[..]));
    assert_eq!(cookie_value(b"sl=", b"sl"), Some(&b""[..]));
    assert_eq!(cookie_value(b"sl=a=b", b"sl"), Some(&b"a=b"[..]));
    assert_eq!(cookie_value(b"", b"sl"), None);
    assert_eq!(cookie_value(b"sl", b"sl"), None);
    assert_eq!(cookie_value(b"SL=1", b"sl"), None);
    assert_eq!(cookie_value(b"sl=\"", b"sl"), Some(&b"\""[..]));
    // Every value of a repeated name, in order.
    let all: Vec<&[u8]> = cookie_values(b"sl=junk; a=1; sl = good ;sl", b"sl").collect();
    assert_eq!(all, vec![&b"junk"[..], &b"good"[..]]);
    let name = CookieName::new("sl");
    let all: Vec<&[u8]> = name.values(b"sl=junk; a=1; sl = good ;sl").collect();
    assert_eq!(all, vec![&b"junk"[..], &b"good"[..]]);
    let mut rng = XorShift(777);
    for _ in 0..5_000 {
        let len = rng.below(100);
        let h: Vec<u8> = (0..len).map(|_| b"ab=; \t\"\xff"[rng.below(8)]).collect();
        let _ = cookie_value(&h, b"a");
    }
}

#[test]
fn set_cookie_forms() {
    assert_eq!(
        set_cookie_header("sl", "v", false, None),
        "sl=v; Path=/; HttpOnly; SameSite=Lax"
    );
    assert_eq!(
        set_cookie_header("sl", "v", true, None),
        "sl=v; Path=/; HttpOnly; SameSite=Lax; Secure"
    );
    assert_eq!(
        set_cookie_header("sl", "v", true, Some(600)),
        "sl=v; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=600"
    );
    assert_eq!(
        set_cookie_header("sl", "v", false, Some(0)),
        "sl=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"
    );
}

/// A ticket the previous build sealed (the key itself as the AES-GCM key, before the HKDF
/// subkeys): printed by that build's `smart-limit-bench mint --secret <KEY_A> --room shop`.
const PREVIOUS_BUILD_TICKET: &str = "K2HmT1gcn36hbjuUuGonceG1-YKCSfrLFg_DL-wJ7_HPsW8AQBeyyeV8kndzdKB98Z5t7eQNhueB7dpFr40KQXACM6qK3gt2rUoB1urs-wLgwX76n_xbE8mSi0FYZmeiCdThq7EnXzWEtpqS4iRLXa-xFNxhiMtK-CwYrQ";

#[test]
fn tickets_of_the_previous_build_still_open() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let t = kr.open(PREVIOUS_BUILD_TICKET.as_bytes(), "shop").unwrap();
    assert_eq!((t.qnum, t.accepted_at), (0, 0));
    assert_ne!(t.sid, 0);
    // Bound to its room as before.
    assert!(kr.open(PREVIOUS_BUILD_TICKET.as_bytes(), "shoe").is_err());
    // Also behind a newer key (a rotation after the upgrade).
    let rotated = Keyring::parse(&format!("{KEY_B}\n{KEY_A}")).unwrap();
    assert_eq!(
        rotated
            .open(PREVIOUS_BUILD_TICKET.as_bytes(), "shop")
            .unwrap(),
        t
    );
    // Without the key, nothing.
    assert!(Keyring::parse(KEY_B)
        .unwrap()
        .open(PREVIOUS_BUILD_TICKET.as_bytes(), "shop")
        .is_err());
}

#[test]
fn new_tickets_are_sealed_with_the_subkey_not_the_key() {
    let kr = Keyring::parse(KEY_A).unwrap();
    let sealed = kr.seal("shop", &ticket()).unwrap();
    // This build opens it ...
    assert_eq!(kr.open(sealed.as_bytes(), "shop").unwrap(), ticket());
    // ... the key itself as an AES-GCM key (what the previous build sealed with) does not.
    let raw = URL_SAFE_NO_PAD.decode(sealed.as_bytes()).unwrap();
    let (nonce, ct) = raw.split_at(NONCE_LEN);
    let nonce: [u8; NONCE_LEN] = nonce.try_into().unwrap();
    let previous = &kr.previous[0];
    assert!(previous
        .decrypt(
            &nonce.into(),
            Payload {
                msg: ct,
                aad: b"shop"
            }
        )
        .is_err());
}

#[test]
fn subkeys_are_hkdf_sha256_of_each_key() {
    // RFC 5869's HKDF-SHA256 from the `hkdf` crate; the subkeys differ by use and by key,
    // and none is the key itself.
    let mut key = [0u8; 32];
    for (i, b) in key.iter_mut().enumerate() {
        *b = i as u8;
    }
    let seal = super::seal::subkey(&key, super::seal::Use::Seal).unwrap();
    let derive = super::seal::subkey(&key, super::seal::Use::Derive).unwrap();
    assert_ne!(seal, derive);
    assert_ne!(seal, key);
    assert_ne!(derive, key);
    let mut other = key;
    other[0] ^= 1;
    assert_ne!(
        super::seal::subkey(&other, super::seal::Use::Seal).unwrap(),
        seal
    );
    // The same on every node: a pure function of the key.
    assert_eq!(
        super::seal::subkey(&key, super::seal::Use::Seal).unwrap(),
        seal
    );
}
