use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::*;

/// RFC 8037 appendix A.1's private key (its public key and thumbprint are in A.2 and A.3).
const RFC_D: &str = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
const NOW: u64 = 1_800_000_000_000;

/// An Ed25519 private key as `openssl genpkey` writes it (PKCS#8 v1 in PEM).
fn pem_of(seed: &[u8]) -> String {
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    der.extend_from_slice(seed);
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        STANDARD.encode(der)
    )
}

fn public_pem_of(key: &SigningKey) -> String {
    let mut der = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    der.extend_from_slice(&URL_SAFE_NO_PAD.decode(&key.x).unwrap());
    format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        STANDARD.encode(der)
    )
}

fn rfc_key() -> SigningKey {
    let d = URL_SAFE_NO_PAD.decode(RFC_D).unwrap();
    SigningKey::from_pem(&pem_of(&d)).unwrap()
}

fn other_key() -> SigningKey {
    SigningKey::from_pem(&pem_of(&[7u8; 32])).unwrap()
}

fn issuer(keys: Vec<SigningKey>) -> Issuer {
    Issuer::new(keys, "smart_limit".into(), None).unwrap()
}

/// A token with the given header and claims, signed by `key` (for forgeries).
fn forge(header: &str, claims: &str, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    let input = jws::signing_input(header.as_bytes(), claims.as_bytes());
    let sig = sign(input.as_bytes());
    jws::finish(input, &sig)
}

fn hs256(secret: &[u8]) -> impl Fn(&[u8]) -> Vec<u8> + '_ {
    move |input| {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(input);
        mac.finalize().into_bytes().to_vec()
    }
}

fn ed(key: &SigningKey) -> impl Fn(&[u8]) -> Vec<u8> + '_ {
    move |input| key.sign(input)
}

#[test]
fn kid_is_the_rfc_7638_thumbprint() {
    // RFC 8037 A.2 and A.3.
    let k = rfc_key();
    assert_eq!(k.x, "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
    assert_eq!(k.kid(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
}

#[test]
fn an_issued_token_verifies_and_says_its_session() {
    let iss = issuer(vec![rfc_key()]);
    let t = iss
        .issue("shop", 0xabc, NOW - 5000, NOW, NOW + 600_000)
        .unwrap();
    assert!(t.len() < 450, "{}", t.len());
    let a = iss.verify("shop", t.as_bytes(), NOW + 1000).unwrap();
    assert_eq!(a.sid, 0xabc);
    assert_eq!(a.admitted_at, (NOW - 5000) / 1000 * 1000);
    assert_eq!(a.issued_at, NOW);
    assert_eq!(a.expires_at, NOW + 600_000);
    // Two tokens for one session differ (their jti).
    let u = iss
        .issue("shop", 0xabc, NOW - 5000, NOW, NOW + 600_000)
        .unwrap();
    assert_ne!(t, u);
}

#[test]
fn rotation_every_key_verifies_the_first_signs() {
    let old = issuer(vec![other_key()]);
    let t = old.issue("shop", 9, NOW, NOW, NOW + 60_000).unwrap();
    let rotated = issuer(vec![rfc_key(), other_key()]);
    assert_eq!(rotated.verify("shop", t.as_bytes(), NOW).unwrap().sid, 9);
    let new = rotated.issue("shop", 9, NOW, NOW, NOW + 60_000).unwrap();
    assert_eq!(
        old.verify("shop", new.as_bytes(), NOW),
        Err(TokenError::UnknownKey)
    );
    let jwks: serde_json::Value = serde_json::from_str(rotated.jwks()).unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, [rfc_key().kid(), other_key().kid()]);
    assert_eq!(jwks["keys"][0]["kty"], "OKP");
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA");
}

#[test]
fn every_bad_token_is_refused() {
    let key = rfc_key();
    let iss = issuer(vec![key.clone()]);
    let good = iss.issue("shop", 5, NOW, NOW, NOW + 60_000).unwrap();
    let kid = key.kid();
    let claims = format!(
        r#"{{"iss":"smart_limit","sub":"0000000000000005","room":"shop","iat":{},"adm":{},"exp":{},"jti":"x"}}"#,
        NOW / 1000,
        NOW / 1000,
        NOW / 1000 + 60
    );
    let header = format!(r#"{{"alg":"EdDSA","kid":"{kid}"}}"#);
    // The forge itself makes a good token: the refusals below are the changes' doing.
    assert!(iss
        .verify("shop", forge(&header, &claims, ed(&key)).as_bytes(), NOW)
        .is_ok());

    let wrong_key = issuer(vec![other_key()])
        .issue("shop", 5, NOW, NOW, NOW + 60_000)
        .unwrap();
    assert_eq!(
        iss.verify("shop", wrong_key.as_bytes(), NOW),
        Err(TokenError::UnknownKey)
    );
    // Another key claiming our kid.
    let other = other_key();
    let claimed = forge(&header, &claims, ed(&other));
    assert_eq!(
        iss.verify("shop", claimed.as_bytes(), NOW),
        Err(TokenError::Signature)
    );
    // alg none: with our kid the key's algorithm refuses it, without one no key is chosen.
    let none = forge(
        &format!(r#"{{"alg":"none","kid":"{kid}"}}"#),
        &claims,
        |_| Vec::new(),
    );
    assert_eq!(
        iss.verify("shop", none.as_bytes(), NOW),
        Err(TokenError::Algorithm("EdDSA"))
    );
    let none = forge(r#"{"alg":"none"}"#, &claims, |_| Vec::new());
    assert_eq!(
        iss.verify("shop", none.as_bytes(), NOW),
        Err(TokenError::UnknownKey)
    );
    // Algorithm confusion: HS256 keyed with the public key (its PEM, or its raw bytes).
    let public = public_pem_of(&key);
    let raw = URL_SAFE_NO_PAD.decode(&key.x).unwrap();
    for secret in [public.as_bytes(), &raw[..]] {
        let confused = forge(
            &format!(r#"{{"alg":"HS256","kid":"{kid}"}}"#),
            &claims,
            hs256(secret),
        );
        assert_eq!(
            iss.verify("shop", confused.as_bytes(), NOW),
            Err(TokenError::Algorithm("EdDSA"))
        );
    }
    assert_eq!(
        iss.verify("shop", good.as_bytes(), NOW + 60_000),
        Err(TokenError::Expired)
    );
    assert_eq!(
        iss.verify("hall", good.as_bytes(), NOW),
        Err(TokenError::Foreign)
    );
    assert_eq!(
        issuer_named("other").verify("shop", good.as_bytes(), NOW),
        Err(TokenError::Foreign)
    );
    // A tampered claim (the session), signature kept.
    let mut parts: Vec<String> = good.split('.').map(String::from).collect();
    let payload = URL_SAFE_NO_PAD.decode(&parts[1]).unwrap();
    let tampered = String::from_utf8(payload)
        .unwrap()
        .replace("0000000000000005", "0000000000000006");
    parts[1] = URL_SAFE_NO_PAD.encode(tampered);
    assert_eq!(
        iss.verify("shop", parts.join(".").as_bytes(), NOW),
        Err(TokenError::Signature)
    );
    let long = format!("{good}{}", "A".repeat(MAX_TOKEN_LEN));
    assert_eq!(
        iss.verify("shop", long.as_bytes(), NOW),
        Err(TokenError::TooLong)
    );
    for garbage in [
        &b""[..],
        b"...",
        b"a.b",
        b"a.b.c.d",
        b"\xff\x00.x.y",
        b"e30.e30.",
        b"abc",
    ] {
        assert!(iss.verify("shop", garbage, NOW).is_err());
    }
    let crit = forge(
        &format!(r#"{{"alg":"EdDSA","kid":"{kid}","crit":["exp"]}}"#),
        &claims,
        ed(&key),
    );
    assert!(matches!(
        iss.verify("shop", crit.as_bytes(), NOW),
        Err(TokenError::Malformed(_))
    ));
}

fn issuer_named(name: &str) -> Issuer {
    Issuer::new(vec![rfc_key()], name.into(), None).unwrap()
}

#[test]
fn invite_tokens_hs256_and_eddsa() {
    let secret = b"0123456789abcdef0123456789abcdef";
    let key = InviteKey::parse(&[&secret[..], b"\n"].concat()).unwrap();
    assert_eq!(key.alg(), "HS256");
    let exp = NOW / 1000 + 3600;
    let claims = format!(r#"{{"jti":"member-42","exp":{exp}}}"#);
    let t = forge(r#"{"alg":"HS256","typ":"JWT"}"#, &claims, hs256(secret));
    let invite = key.verify("presale", t.as_bytes(), NOW).unwrap();
    assert_eq!(invite.id, "member-42");
    assert_eq!(invite.expires_at, exp * 1000);
    // Wrong secret, alg none, expired, other room, no id, no expiry.
    let wrong = forge(
        r#"{"alg":"HS256"}"#,
        &claims,
        hs256(b"another secret of 32 bytes......"),
    );
    assert_eq!(
        key.verify("presale", wrong.as_bytes(), NOW),
        Err(TokenError::Signature)
    );
    let none = forge(r#"{"alg":"none"}"#, &claims, |_| Vec::new());
    assert_eq!(
        key.verify("presale", none.as_bytes(), NOW),
        Err(TokenError::Algorithm("HS256"))
    );
    assert_eq!(
        key.verify("presale", t.as_bytes(), exp * 1000),
        Err(TokenError::Expired)
    );
    let roomed = format!(r#"{{"jti":"a","exp":{exp},"room":"shop"}}"#);
    let roomed = forge(r#"{"alg":"HS256"}"#, &roomed, hs256(secret));
    assert_eq!(
        key.verify("presale", roomed.as_bytes(), NOW),
        Err(TokenError::Foreign)
    );
    assert!(key.verify("shop", roomed.as_bytes(), NOW).is_ok());
    for claims in [format!(r#"{{"exp":{exp}}}"#), r#"{"jti":"a"}"#.to_string()] {
        let t = forge(r#"{"alg":"HS256"}"#, &claims, hs256(secret));
        assert_eq!(
            key.verify("presale", t.as_bytes(), NOW),
            Err(TokenError::Claims("shape"))
        );
    }

    // EdDSA: the backend's public key; an HS256 token keyed with that public key is refused.
    let backend = rfc_key();
    let pem = public_pem_of(&backend);
    let key = InviteKey::parse(pem.as_bytes()).unwrap();
    assert_eq!(key.alg(), "EdDSA");
    let t = forge(r#"{"alg":"EdDSA"}"#, &claims, ed(&backend));
    assert_eq!(
        key.verify("presale", t.as_bytes(), NOW).unwrap().id,
        "member-42"
    );
    let confused = forge(r#"{"alg":"HS256"}"#, &claims, hs256(pem.as_bytes()));
    assert_eq!(
        key.verify("presale", confused.as_bytes(), NOW),
        Err(TokenError::Algorithm("EdDSA"))
    );
}

#[test]
fn invite_files_are_checked() {
    assert_eq!(
        InviteKey::parse(b"short").err(),
        Some(TokenKeyError::NotInviteKey)
    );
    assert_eq!(
        InviteKey::parse(pem_of(&[1; 32]).as_bytes()).err(),
        Some(TokenKeyError::PrivateInviteKey)
    );
    assert_eq!(
        InviteKey::parse(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").err(),
        Some(TokenKeyError::NotInviteKey)
    );
    assert_eq!(
        SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
            .err(),
        Some(TokenKeyError::NotPrivateKey)
    );
}

/// A P-256 key as `openssl ecparam -genkey` writes it (SEC1), the same key in PKCS#8, and its
/// public half.
const EC_SEC1: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIJX3g/pbNUYS/NG9+T8wp1ucQ1OtUaP8LhTWLAA+1xhjoAoGCCqGSM49
AwEHoUQDQgAEQZoArqi6lZmF7Acceyccy6n7LgP2KMF8mhOw2FEk0s47g8QsMeFC
Ioa0trNxPlX7nFWrecRtJkN2L2xwwsu7gg==
-----END EC PRIVATE KEY-----
";
const EC_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQglfeD+ls1RhL80b35
PzCnW5xDU61Ro/wuFNYsAD7XGGOhRANCAARBmgCuqLqVmYXsBxx7JxzLqfsuA/Yo
wXyaE7DYUSTSzjuDxCwx4UIihrS2s3E+VfucVat5xG0mQ3YvbHDCy7uC
-----END PRIVATE KEY-----
";
const EC_PUB: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQZoArqi6lZmF7Acceyccy6n7LgP2
KMF8mhOw2FEk0s47g8QsMeFCIoa0trNxPlX7nFWrecRtJkN2L2xwwsu7gg==
-----END PUBLIC KEY-----
";

#[test]
fn es256_keys_sign_verify_and_publish() {
    let sec1 = SigningKey::from_pem(EC_SEC1).unwrap();
    let pkcs8 = SigningKey::from_pem(EC_PKCS8).unwrap();
    assert_eq!(
        sec1.kid(),
        pkcs8.kid(),
        "one key, one thumbprint, whatever its file form"
    );
    let iss = Issuer::new(
        vec![sec1.clone(), rfc_key()],
        "smart_limit".into(),
        Some("api".into()),
    )
    .unwrap();
    let t = iss.issue("shop", 7, NOW, NOW, NOW + 60_000).unwrap();
    let header = URL_SAFE_NO_PAD
        .decode(t.split('.').next().unwrap())
        .unwrap();
    assert!(String::from_utf8(header)
        .unwrap()
        .contains(r#""alg":"ES256""#));
    assert_eq!(t.split('.').nth(2).unwrap().len(), 86, "r || s: 64 bytes");
    assert_eq!(iss.verify("shop", t.as_bytes(), NOW).unwrap().sid, 7);
    // The audience is written and required.
    let no_aud = Issuer::new(vec![sec1.clone()], "smart_limit".into(), None).unwrap();
    assert_eq!(
        no_aud.verify("shop", t.as_bytes(), NOW),
        Err(TokenError::Foreign)
    );
    // An ES256 key's token relabelled EdDSA is refused before any signature work.
    let parts: Vec<&str> = t.split('.').collect();
    let relabelled = format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"EdDSA","kid":"{}"}}"#, sec1.kid())),
        parts[1],
        parts[2]
    );
    assert_eq!(
        iss.verify("shop", relabelled.as_bytes(), NOW),
        Err(TokenError::Algorithm("ES256"))
    );
    let jwks: serde_json::Value = serde_json::from_str(iss.jwks()).unwrap();
    let k = &jwks["keys"][0];
    assert_eq!(
        (k["kty"].as_str(), k["crv"].as_str(), k["alg"].as_str()),
        (Some("EC"), Some("P-256"), Some("ES256"))
    );
    assert_eq!(k["x"].as_str().unwrap().len(), 43);
    assert_eq!(k["y"].as_str().unwrap().len(), 43);
    assert!(jwks["keys"][1].get("y").is_none());

    // An ES256 invite key: the backend's public half.
    let invite = InviteKey::parse(EC_PUB.as_bytes()).unwrap();
    assert_eq!(invite.alg(), "ES256");
    let claims = format!(r#"{{"jti":"a","exp":{}}}"#, NOW / 1000 + 60);
    let t = forge(r#"{"alg":"ES256"}"#, &claims, |i| sec1.sign(i));
    assert_eq!(invite.verify("shop", t.as_bytes(), NOW).unwrap().id, "a");
    // Signed by another key (64 bytes, the right length): refused.
    let other = rfc_key();
    let t = forge(r#"{"alg":"ES256"}"#, &claims, |i| other.sign(i));
    assert_eq!(
        invite.verify("shop", t.as_bytes(), NOW),
        Err(TokenError::Signature)
    );
}

#[test]
fn the_cache_answers_only_what_verification_would() {
    let iss = issuer(vec![rfc_key()]);
    let mut cache = TokenCache::new(4);
    let basis = (5, NOW, NOW, NOW + 60_000);
    let t = cache.issue(&iss, "shop", basis).unwrap();
    assert_eq!(
        cache.issue(&iss, "shop", basis).unwrap(),
        t,
        "one token per admission"
    );
    let renewed = cache
        .issue(&iss, "shop", (5, NOW, NOW + 1000, NOW + 61_000))
        .unwrap();
    assert_ne!(renewed, t);
    assert_eq!(
        cache.verify(&iss, "shop", t.as_bytes(), NOW).unwrap().sid,
        5
    );
    // Answered again from the cache, with its expiry checked every time.
    assert!(cache
        .verify(&iss, "shop", t.as_bytes(), NOW + 59_999)
        .is_ok());
    assert_eq!(
        cache.verify(&iss, "shop", t.as_bytes(), NOW + 60_000),
        Err(TokenError::Expired)
    );
    // A token that differs in one byte is verified (and refused), not matched.
    let mut forged = t.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    assert!(cache.verify(&iss, "shop", &forged, NOW).is_err());
    assert!(cache.verify(&iss, "shop", t.as_bytes(), NOW).is_ok());
}
