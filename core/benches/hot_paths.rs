//! Micro-benchmark of the pure steps of the hot paths (no nginx): what opening a ticket,
//! sealing one, answering from the open cache, rendering the waiting page and its JSON, and
//! negotiating `Accept` cost, in nanoseconds per call.
//!
//! `cargo bench -p smart_limit_core --bench hot_paths [-- WORD]` (release build; a plain
//! `main`, no harness dependency; WORD keeps only the lines that contain it). Each figure is the median of 7 runs of N calls. They are machine
//! figures: compare them with each other, and with the request-level ratios of
//! `scripts/bench --cost`.

use std::hint::black_box;
use std::time::Instant;

use smart_limit_core::page::{self, Lang, Template, ViewStatus, WaitView};
use smart_limit_core::room::rules::{Limits, Mode};
use smart_limit_core::room::{Room, Visit};
use smart_limit_core::ticket::{self, Floor, Keyring, OpenCache, Ticket};
use smart_limit_core::token;

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
/// Token keys made for this benchmark (`openssl genpkey`).
const ED_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIGGhmN6fylv95lS/cTIKP+rTji3b8+xHn0RH0PoCkz8k
-----END PRIVATE KEY-----
";
const EC_PEM: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIJX3g/pbNUYS/NG9+T8wp1ucQ1OtUaP8LhTWLAA+1xhjoAoGCCqGSM49
AwEHoUQDQgAEQZoArqi6lZmF7Acceyccy6n7LgP2KMF8mhOw2FEk0s47g8QsMeFC
Ioa0trNxPlX7nFWrecRtJkN2L2xwwsu7gg==
-----END EC PRIVATE KEY-----
";

fn measure(name: &str, n: u32, mut f: impl FnMut(u32)) {
    // `cargo bench --bench hot_paths -- WORD`: only the measurements whose name has WORD.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty() && !filter.iter().any(|w| name.contains(w.as_str())) {
        return;
    }
    let mut runs: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for i in 0..n {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    println!("{name:<44} {:>9.1} ns", runs[3]);
}

fn main() {
    let keys = Keyring::parse(KEY).expect("key");
    let t = Ticket {
        sid: 0x1234_5678_9abc_def0,
        qnum: 1_795_332_865_123,
        issued_at: 1_795_332_865_123,
        accepted_at: 0,
        last_seen: 1_795_332_865_123,
        told: Floor::NONE,
    };
    let sealed = keys.seal("shop", &t).expect("seal");
    let cookie = format!("_ga=GA1.2.3; smart_limit_shop={sealed}; theme=dark");

    measure(
        "ticket: seal (JSON, AES-GCM, base64, nonce)",
        200_000,
        |_| {
            black_box(keys.seal("shop", black_box(&t)).ok());
        },
    );
    measure("ticket: open (base64, AES-GCM, JSON)", 200_000, |_| {
        black_box(keys.open(black_box(sealed.as_bytes()), "shop").ok());
    });
    // challenge=pow: checking a proof (one MAC, one SHA-256), and making a seed.
    let seed = smart_limit_core::challenge::seed(&keys, "shop", (t.sid, t.issued_at), 16);
    let nonce = smart_limit_core::challenge::solve(&seed, 16, 0, 1 << 26).expect("solved");
    let proof = format!(
        "{}.{nonce}",
        smart_limit_core::challenge::encode_seed(&seed)
    );
    measure("challenge: verify a proof (MAC, SHA-256)", 500_000, |_| {
        black_box(
            smart_limit_core::challenge::verify(
                &keys,
                "shop",
                (t.sid, t.issued_at),
                proof.as_bytes(),
                16,
            )
            .ok(),
        );
    });
    measure("challenge: one try of a solver (SHA-256)", 2_000_000, |i| {
        let mut n = itoa::Buffer::new();
        black_box(smart_limit_core::challenge::hash(
            &seed,
            n.format(i).as_bytes(),
        ));
    });
    measure("challenge: a ticket's seed (MAC)", 500_000, |i| {
        black_box(smart_limit_core::challenge::seed(
            &keys,
            "shop",
            (u64::from(i), t.issued_at),
            16,
        ));
    });
    let mut cache = OpenCache::new(1024);
    measure(
        "ticket: open, answered by the open cache",
        2_000_000,
        |_| {
            black_box(cache.open(&keys, black_box(sealed.as_bytes()), "shop").ok());
        },
    );
    measure(
        "ticket: find the cookie in a Cookie header",
        2_000_000,
        |_| {
            black_box(ticket::cookie_value(
                black_box(cookie.as_bytes()),
                b"smart_limit_shop",
            ));
        },
    );
    measure("ticket: random session id", 2_000_000, |_| {
        black_box(ticket::random_sid().ok());
    });

    let accept = b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    measure("page: Accept negotiation (browser)", 2_000_000, |_| {
        black_box(page::wants_json(Some(black_box(accept))));
    });
    measure("page: Accept-Language", 2_000_000, |_| {
        black_box(page::pick_lang(Some(black_box(b"en-US,en;q=0.9,ja;q=0.8"))));
    });
    let v = WaitView {
        room: "shop",
        status: ViewStatus::Waiting,
        position: Some(1234),
        queue_len: 56_789,
        eta_secs: Some(754),
        refresh_secs: 10,
        updated_at: 1_795_332_865,
        starts_at: None,
        challenge: None,
        token: None,
        resumed: false,
    };
    page::prepare_builtin();
    let mut out = Vec::with_capacity(8192);
    measure("page: built-in HTML page into a buffer", 1_000_000, |_| {
        out.clear();
        page::write_html(black_box(&v), Lang::En, None, &mut out);
        black_box(&out);
    });
    let custom = Template::compile("<p>{{position}} of {{queue_length}}, {{eta_text}}</p>");
    measure("page: small custom template", 2_000_000, |_| {
        out.clear();
        page::write_html(black_box(&v), Lang::En, Some(&custom), &mut out);
        black_box(&out);
    });
    measure("page: JSON answer into a buffer", 2_000_000, |_| {
        out.clear();
        page::write_json(black_box(&v), &mut out);
        black_box(&out);
    });

    // The shared-memory room, on a heap block: a waiting client polling its place.
    let mut mem = vec![0u64; (1 << 20) / 8];
    // SAFETY: a Vec<u64> is 8-aligned and its length in bytes is len * 8.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u8>(), mem.len() * 8) };
    let mut room = Room::format(bytes, 1).expect("room");
    let limits = Limits {
        max_active: 1,
        new_per_minute: None,
        presence_ms: 20_000,
        keep_ms: 20_000,
        active_window_ms: 3_600_000,
        mode: Mode::Fifo,
        flood: None,
        session_rate: None,
    };
    room.visit(
        Visit {
            sid: 1,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        },
        1000,
        &limits,
    );
    let verdict = room.visit(
        Visit {
            sid: 2,
            qnum: 0,
            draw: 0,
            flood_key: None,
            arrival: 0,
            page: false,
        },
        1000,
        &limits,
    );
    let qnum = match verdict {
        smart_limit_core::room::Verdict::Wait(p) => p.qnum,
        _ => 0,
    };
    // Ten thousand others in line, so the position is counted over a real line.
    for sid in 3..10_003 {
        room.visit(
            Visit {
                sid,
                qnum: 0,
                draw: 0,
                flood_key: None,
                arrival: 0,
                page: false,
            },
            1000,
            &limits,
        );
    }
    measure("room: a waiting client polls (shm rules)", 2_000_000, |i| {
        black_box(room.visit(
            Visit {
                sid: 2,
                qnum,
                draw: 0,
                flood_key: None,
                arrival: 0,
                page: false,
            },
            1000 + u64::from(i % 1000),
            &limits,
        ));
    });
    // [S27] keep=: the poller stands behind 1,000 places kept for clients who are away (unseen
    // past presence, within keep), so every decision looks past them for the head.
    let mut kept_mem = vec![0u64; (1 << 20) / 8];
    // SAFETY: as above.
    let kept_bytes = unsafe {
        std::slice::from_raw_parts_mut(kept_mem.as_mut_ptr().cast::<u8>(), kept_mem.len() * 8)
    };
    let mut kept = Room::format(kept_bytes, 1).expect("room");
    let keeping = Limits {
        keep_ms: 300_000,
        ..limits
    };
    let v = |sid| Visit {
        sid,
        qnum: 0,
        draw: 0,
        flood_key: None,
        arrival: 0,
        page: false,
    };
    kept.visit(v(1), 1000, &keeping);
    for sid in 3..1_003 {
        kept.visit(v(sid), 1000, &keeping);
    }
    let behind = match kept.visit(v(2), 1000, &keeping) {
        smart_limit_core::room::Verdict::Wait(p) => p.qnum,
        _ => 0,
    };
    measure(
        "room: a waiting client polls behind 1,000 away (keep=5m)",
        2_000_000,
        |i| {
            black_box(kept.visit(
                Visit {
                    qnum: behind,
                    ..v(2)
                },
                60_000 + u64::from(i % 1000),
                &keeping,
            ));
        },
    );
    // challenge=pow: a proof recorded spent (one set of the table scanned under the lock),
    // each a new ticket's, so the table turns over as under a flood of proofs.
    measure(
        "room: record a proof spent (spent-proof table)",
        2_000_000,
        |i| {
            let key = smart_limit_core::challenge::spent_key((u64::from(i), 1000));
            black_box(room.spend_proof(key, 100_000, 1000));
        },
    );
    // A thousand of them poll in turn as time goes on: every poll renews an older sight (the
    // line above polls one client within the same second, mostly at times it was seen at).
    let crowd: Vec<u64> = (3..1_003)
        .map(|sid| {
            match room.visit(
                Visit {
                    sid,
                    qnum: 0,
                    draw: 0,
                    flood_key: None,
                    arrival: 0,
                    page: false,
                },
                1000,
                &limits,
            ) {
                smart_limit_core::room::Verdict::Wait(p) => p.qnum,
                _ => 0,
            }
        })
        .collect();
    // Time runs on over the 7 runs (one tick per poll, 400 polls a millisecond), within
    // `presence` of the line's other places.
    let mut tick = 0u64;
    measure(
        "room: 1,000 waiting clients poll in turn",
        1_000_000,
        |_| {
            let k = (tick % crowd.len() as u64) as usize;
            tick += 1;
            black_box(room.visit(
                Visit {
                    sid: 3 + k as u64,
                    qnum: crowd[k],
                    draw: 0,
                    flood_key: None,
                    arrival: 0,
                    page: false,
                },
                2000 + tick / 400,
                &limits,
            ));
        },
    );

    // [S28] Admission tokens: signing one (a poll's admitted answer, `$smart_limit_token`) and
    // verifying a bearer token, with an Ed25519 and a P-256 key.
    for (alg, pem) in [("EdDSA", ED_PEM), ("ES256", EC_PEM)] {
        let key = token::SigningKey::from_pem(pem).expect("key");
        let issuer = token::Issuer::new(vec![key], "smart_limit".into(), None).expect("issuer");
        let now = 1_795_332_865_123;
        let t = issuer
            .issue("shop", 5, now, now, now + 600_000)
            .expect("token");
        measure(&format!("token: issue ({alg})"), 20_000, |i| {
            black_box(
                issuer
                    .issue("shop", u64::from(i) + 1, now, now, now + 600_000)
                    .ok(),
            );
        });
        measure(
            &format!("token: verify a bearer token ({alg})"),
            20_000,
            |_| {
                black_box(issuer.verify("shop", black_box(t.as_bytes()), now).ok());
            },
        );
        let mut cache = token::TokenCache::new(1024);
        measure(
            &format!("token: verify again, cached ({alg})"),
            200_000,
            |_| {
                black_box(
                    cache
                        .verify(&issuer, "shop", black_box(t.as_bytes()), now)
                        .ok(),
                );
            },
        );
    }
}
