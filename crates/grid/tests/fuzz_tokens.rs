//! Fuzz targets for bearer tokens, which any client may send: arbitrary text where a JWT is
//! expected, well-signed tokens with hostile claims (scopes, audiences, times at the extremes of
//! their types, subjects), and scope claims alone. Property-based (proptest: cargo-fuzz needs a
//! nightly compiler). Each case ends in a grant or a typed refusal, never a panic; a grant is
//! only ever what the claims say (a token for another audience never verifies, and no scope
//! reaches beyond its path).
//!
//! `cargo test --release -p isthmus-grid --test fuzz_tokens` runs 256 cases per target (CI);
//! `scripts/fuzz` runs them longer.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use isthmus_grid::{IssuerConfig, TokenVerifier};
use isthmus_store::{ScopeAccess, Scopes};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use proptest::prelude::*;

/// A key made for these tests only (RSA 2048, PKCS#1 DER), and its public modulus.
const TEST_KEY_DER: &str = "MIIEpAIBAAKCAQEA2GYqrVxr5KZQM9HxZMFJw2WZqMYxrwjb6zDTfJbcoftHAEJx+dFL54c4iOCYvLCQPr6EmBqUoGH3Egv4Yg3eKVkn5ocxXLEnr2nKyyvUzgX90HZu83KRgiIAnt3zcZ4LMst1CAOuOXvK3O+4uAY+MMnA03MPigmkTnWtnChlNfGTzZNcp7XMlefI/JrnMbY5zjZfayaqSlRoJP1O/DCVPudZms1+0h/wHGoEzmYbGV2EfAOZw0rOTXj09rrmwltFi4AcRo3B28iWBAI72lCt9k7/j2E0V+30Lj70mO4fk+fiOiX9ZH+5c8MIM1zbvKPSWKDBkuRIT7jZIGjSsr2oxQIDAQABAoIBACHY6xx2HAclz14nnKEEjZ/TNLNeGrfUxCc3miC+7RAmAD9FZVPsnXl/oENik+lRmaJCxPUQlUY3xIAtYKKfpivj/tZzN3CW4gzxGG/qcWzvKXnRiH2qIiHPZTb0IueWz4wYoDvKbZYeq4aetU8NZO1XJUK9mMTfyLQf+nF2LQyAbNjlRljUSx2a18zNvgv3HZ5O8qpCOnFKtwqr2LgRa3WbIq1P5BiWfooHkiJggMndNxNwvDGcidl4JzuNVhjm+I3HlJHjD/1p5+yJIqEv1JUTo6zVpkn5ysUlYLUUcltPpMyRaQ6gGWu6UYEfoNwbHAH/d1Wb43baJYNAypujUykCgYEA70MaAPio+1vG55J0V2u8Pi0QinbMf5GPvLSB05DE1sjFUKuXoiuLIb/spMW186Z26svsqdgQnfCQQgHOntGC4hU7QAqDGtYwoaN8PlaPfRrKFFwbOorJc8kPg0DAyQfCBTXFIx32UEj29DI6B19dBcIyztZrZ/bYemoDFvr4Dh0CgYEA54mdm5bPO7r07Dy0GrDpzdeJ/WgohsZM0xzypbI0oeWlDxxJUALp0E1qUoF1N9QmCp8ks1x73VzD64xmVJWFS6yolZjVqtmEd3QR9T2EUrFrnTBn3k1Uu3W1QYVNBnAHBJn8GvNTkopidU3CMAsjeI3tMzXdObW4TyTS6N2wpMkCgYEA0584Ks/FNr3QShaBjKkf0KavUKkO625mAfRuOCB92bOuwlFjRu7YmrtUpdCxxJXh7H7+DqOq3udd0OQkStjouOsqgtRJbb0xOmaNh92sAG1ne2aUNs12rVCSxfbKDYUtGMqcWRkxOYWv2AFszgSNFIDVy5hfW487ndqSbQsByAkCgYEAttUlfqI03H7CPvWkZttClMfZ8B/auKpIKgDW3t78zscPcwIsJiFWzqUDC0ms7Tv6GjMXAQdLzD4fe5YvjCVRz7L0oMTCHJqNDuK594TvQ3lUeBisPI+mFC1bxvRjIW0/LXQG7qUsXjAmlWikqdlx1hWEtAaZvaNwehai8T116nkCgYB+lI4wjp/fgT/NpiaxtBthQEzRobKwdYfTS4/zMWGV+A9KTr5Ga9wHN5nVVUQLwYyJzY+VQ/JJBKPej422Rl71+mqVZJiqwQXRe8WbTZu7d5gQ/3E+iiFcQ3jg/PRTvvDKKRPB28Ij9iAPc8mu31o4A20p1YTIAz2xR8qoB+XUQw==";
const TEST_KEY_N: &str = "2GYqrVxr5KZQM9HxZMFJw2WZqMYxrwjb6zDTfJbcoftHAEJx-dFL54c4iOCYvLCQPr6EmBqUoGH3Egv4Yg3eKVkn5ocxXLEnr2nKyyvUzgX90HZu83KRgiIAnt3zcZ4LMst1CAOuOXvK3O-4uAY-MMnA03MPigmkTnWtnChlNfGTzZNcp7XMlefI_JrnMbY5zjZfayaqSlRoJP1O_DCVPudZms1-0h_wHGoEzmYbGV2EfAOZw0rOTXj09rrmwltFi4AcRo3B28iWBAI72lCt9k7_j2E0V-30Lj70mO4fk-fiOiX9ZH-5c8MIM1zbvKPSWKDBkuRIT7jZIGjSsr2oxQ";
const ISSUER: &str = "https://issuer.example";
const AUDIENCE: &str = "https://gateway.example";

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

fn verifier() -> &'static TokenVerifier {
    static VERIFIER: std::sync::OnceLock<(tempfile::TempDir, TokenVerifier)> = std::sync::OnceLock::new();
    &VERIFIER
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let jwks = dir.path().join("jwks.json");
            let key = serde_json::json!({"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": TEST_KEY_N, "e": "AQAB"});
            std::fs::write(&jwks, serde_json::json!({"keys": [key]}).to_string()).unwrap();
            let config = IssuerConfig {
                issuer: ISSUER.into(),
                jwks_file: Some(jwks),
                audiences: vec![AUDIENCE.into()],
                default_user: Some("someone".into()),
                ..IssuerConfig::default()
            };
            let verifier = TokenVerifier::new(&[config], |name| Some(name.to_string())).unwrap();
            (dir, verifier)
        })
        .1
}

fn sign(claims: &serde_json::Value) -> String {
    let key = EncodingKey::from_rsa_der(&STANDARD.decode(TEST_KEY_DER).unwrap());
    let header = Header { kid: Some("k1".into()), ..Header::new(Algorithm::RS256) };
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A time claim: near now, or at the edges of what JSON numbers hold.
fn time_claim() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        (-100_000i64..100_000).prop_map(|d| serde_json::json!(now() + d)),
        any::<i64>().prop_map(|t| serde_json::json!(t)),
        any::<u64>().prop_map(|t| serde_json::json!(t)),
        any::<f64>().prop_map(|t| serde_json::json!(t)),
        Just(serde_json::json!("tomorrow")),
        Just(serde_json::Value::Null),
    ]
}

/// A scope claim: well-formed items, hostile paths, junk.
fn scope_claim() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "storage.read",
        "storage.create",
        "storage.modify",
        "read",
        "write",
        "storage.stage",
        "x",
        "",
    ]);
    let path = prop_oneof![Just("/".to_string()), "(/[a-c.]{0,3}){0,4}/?", "[ -~]{0,12}"];
    let item = (name, prop::option::of(path)).prop_map(|(name, path)| match path {
        Some(path) => format!("{name}:{path}"),
        None => name.to_string(),
    });
    prop::collection::vec(item, 0..5).prop_map(|items| items.join(" "))
}

/// Whether some item of `claim` names `access` (or one implying it) on a path holding `target`.
fn claim_allows(claim: &str, access: ScopeAccess, target: &str) -> bool {
    claim.split_whitespace().any(|item| {
        let Some((name, path)) = item.split_once(':') else { return false };
        let grants = match (name, access) {
            ("storage.read" | "read", ScopeAccess::Read) => true,
            ("storage.modify" | "write", _) => access != ScopeAccess::Read,
            ("storage.create", ScopeAccess::Create) => true,
            _ => false,
        };
        let path = path.trim_end_matches('/');
        grants && (path.is_empty() || target == path || target.starts_with(&format!("{path}/")))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn fuzz_arbitrary_bearer_text_is_refused(text in "[A-Za-z0-9_.=-]{0,300}") {
        prop_assert!(verifier().verify(&text).is_err());
    }

    #[test]
    fn fuzz_forged_headers_and_payloads_are_refused(header in "[ -~]{0,80}", payload in "[ -~]{0,200}", signature in "[A-Za-z0-9_-]{0,64}") {
        let token = format!("{}.{}.{signature}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
        prop_assert!(verifier().verify(&token).is_err());
    }

    #[test]
    fn fuzz_signed_tokens_with_hostile_claims(
        exp in time_claim(), nbf in time_claim(), scope in scope_claim(),
        aud in prop::sample::select(vec![AUDIENCE, "https://other.example", ""]),
        sub in "[ -~]{0,20}",
    ) {
        let claims = serde_json::json!({"iss": ISSUER, "sub": sub, "aud": aud, "exp": exp, "nbf": nbf, "scope": scope});
        if let Ok(grant) = verifier().verify(&sign(&claims)) {
            prop_assert_eq!(aud, AUDIENCE, "a token for another audience verified");
            for access in [ScopeAccess::Read, ScopeAccess::Create, ScopeAccess::Modify] {
                prop_assert!(!grant.scopes.allows(access, "b", "k") || claim_allows(&scope, access, "/b/k"),
                    "{:?} on /b/k granted by {:?}", access, scope);
            }
        }
    }

    #[test]
    fn fuzz_scope_claims_grant_only_beneath_their_paths(scope in scope_claim(), bucket in "[a-c]{1,2}", key in "[a-c/]{0,6}") {
        if let Ok(scopes) = Scopes::parse(&scope, "/") {
            let target = if key.is_empty() { format!("/{bucket}") } else { format!("/{bucket}/{key}") };
            for access in [ScopeAccess::Read, ScopeAccess::Create, ScopeAccess::Modify] {
                if scopes.allows(access, &bucket, &key) {
                    prop_assert!(claim_allows(&scope, access, &target), "{:?} {} from {:?}", access, target, scope);
                }
            }
        }
    }
}

#[test]
fn a_well_formed_token_is_granted_what_it_says() {
    let claims = serde_json::json!({"iss": ISSUER, "sub": "alice", "aud": AUDIENCE, "exp": now() + 600, "scope": "storage.read:/b"});
    let grant = verifier().verify(&sign(&claims)).unwrap();
    assert!(grant.scopes.allows(ScopeAccess::Read, "b", "k"));
    assert!(!grant.scopes.allows(ScopeAccess::Create, "b", "k"));
    assert!(!grant.scopes.allows(ScopeAccess::Read, "c", "k"));
}
