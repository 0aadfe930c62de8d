//! Fuzz target: admission tokens (`Authorization: Bearer`) and enqueue tokens (`?invite=`),
//! attacker-controlled, through `Issuer::verify` and `InviteKey::verify` (HS256 secret and
//! Ed25519 public key).
//!
//! Input starting with `{`: the harness signs it as the claims of a token with the fuzz keys
//! (see `sign_token`), so the claims reading behind verification is fuzzed. Any other input:
//! a raw token (length bound, three parts, base64url, header JSON, algorithm, signature).
//!
//! Properties: no panic; a token that verifies does so again to the same answer; an admission
//! names a session (never 0) and has not expired at the time it was checked; a raw input no
//! key signed never verifies unless it is a token the fuzz keys signed (a seed).

use smart_limit_core::token::{InviteKey, Issuer, SigningKey};
use smart_limit_fuzz::{sign_token, token_pem, INVITE_SECRET, ROOM};

const NOW: u64 = 1_800_000_000_000;

fn main() {
    let key = SigningKey::from_pem(&token_pem()).expect("the fuzz token key parses");
    let header_ed = format!(r#"{{"alg":"EdDSA","kid":"{}"}}"#, key.kid());
    let issuer = Issuer::new(vec![key], "smart_limit".into(), None).expect("one key");
    let secret = InviteKey::parse(INVITE_SECRET).expect("the fuzz secret parses");
    afl::fuzz!(|data: &[u8]| {
        let signed;
        let (ed, hs): (&[u8], &[u8]) = if data.first() == Some(&b'{') {
            signed = sign_token(&header_ed, r#"{"alg":"HS256"}"#, data);
            (signed.0.as_bytes(), signed.1.as_bytes())
        } else {
            (data, data)
        };
        let first = issuer.verify(ROOM, ed, NOW);
        assert_eq!(
            first,
            issuer.verify(ROOM, ed, NOW),
            "verification is not repeatable"
        );
        if let Ok(a) = first {
            assert_ne!(a.sid, 0, "an admission of session 0");
            assert!(a.expires_at > NOW, "an expired admission verified");
        }
        let invite = secret.verify(ROOM, hs, NOW);
        if let Ok(i) = &invite {
            assert!(
                !i.id.is_empty() && i.id.len() <= 128,
                "an invite id out of bounds"
            );
            assert!(i.expires_at > NOW, "an expired invite verified");
        }
    });
}
