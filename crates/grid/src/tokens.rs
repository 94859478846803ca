//! Bearer tokens: JWTs (RS256, ES256) from configured issuers, checked for signature, issuer,
//! audience, expiry and not-before (with a clock skew), their WLCG / SciTokens scopes read as
//! paths of the S3 namespace, and their subject or groups mapped to a configured user. Keys
//! come from a JWKS file, or a JWKS URL fetched at start and refreshed in the background (and
//! early when a token names a key not seen yet), never on a request's path.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use isthmus_store::{ScopeError, Scopes};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// The clock skew allowed on `exp`, `nbf` and `iat` unless an issuer sets its own.
pub const DEFAULT_CLOCK_SKEW_SECONDS: u64 = 60;
/// How often keys fetched from a JWKS URL are fetched again.
pub const DEFAULT_JWKS_REFRESH_SECONDS: u64 = 300;
/// The least time between two fetches of one JWKS URL (a token naming an unknown key asks for
/// one early).
const JWKS_MIN_REFETCH: Duration = Duration::from_secs(10);

/// One trusted issuer, as the configuration file names it (`[[token_issuers]]`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    /// The `iss` claim of its tokens.
    pub issuer: String,
    /// Its public keys: a JWKS document on disk...
    pub jwks_file: Option<PathBuf>,
    /// ...or at a URL (fetched at start, refreshed every `jwks_refresh_seconds`).
    pub jwks_url: Option<String>,
    pub jwks_refresh_seconds: Option<u64>,
    /// Audiences this gateway accepts: a token's `aud` must name one. WLCG's
    /// `https://wlcg.cern.ch/jwt/v1/any` is accepted only if listed. Required: an issuer
    /// without audiences is refused at start (a token minted for another service would be
    /// accepted here); `["any"]` says explicitly that any `aud`, or none, is accepted.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Where the token's scope paths start in the S3 namespace (`/` = all buckets; `/atlas`
    /// makes `storage.read:/run1` mean bucket `atlas`, prefix `run1/`).
    pub base_path: Option<String>,
    pub clock_skew_seconds: Option<u64>,
    /// The user (access key or display name) a token's subject maps to.
    #[serde(default)]
    pub subjects: BTreeMap<String, String>,
    /// The user a token's group (`wlcg.groups`, `groups`) maps to, when its subject is not
    /// listed; the first of the token's groups that is listed wins.
    #[serde(default)]
    pub groups: BTreeMap<String, String>,
    /// The user of this issuer's tokens whose subject and groups are not listed (none: such
    /// tokens are refused).
    pub default_user: Option<String>,
}

/// The `audiences` entry that accepts a token of any (or no) audience: an operator's explicit
/// choice, never the default.
pub const ANY_AUDIENCE: &str = "any";

/// Why a token is refused. Each says what is wrong so the holder can fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the bearer token is not a well-formed JWT: {0}")]
    Malformed(String),
    #[error("the token is signed with {0}; this gateway accepts RS256 and ES256")]
    UnsupportedAlgorithm(String),
    #[error("the token's issuer {0:?} is not one this gateway trusts")]
    UnknownIssuer(String),
    #[error("the token's signing key (kid {0:?}) is not among its issuer's keys")]
    UnknownKey(String),
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf in the future)")]
    NotYetValid,
    #[error("the token's audience is not this gateway (accepted: {0})")]
    WrongAudience(String),
    #[error("the token's scopes are refused: {0}")]
    BadScope(#[from] ScopeError),
    #[error("the token's subject {0:?} (and its groups) map to no user of this gateway")]
    NoUser(String),
}

impl TokenError {
    /// Whether the token was good once and has only expired (`ExpiredToken` rather than
    /// `InvalidToken` at the edge).
    pub fn is_expiry(&self) -> bool {
        matches!(self, Self::Expired)
    }
}

/// What a verified token grants: a user, limited to scopes, until a time.
#[derive(Debug, Clone)]
pub struct TokenGrant {
    pub issuer: String,
    pub subject: String,
    /// The access key of the user the token acts as.
    pub user: String,
    pub scopes: Arc<Scopes>,
    /// Unix seconds.
    pub expires_at: u64,
    /// The audience the token named (for STS answers).
    pub audience: String,
}

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    #[serde(default)]
    sub: String,
    exp: u64,
    #[serde(default)]
    aud: Audience,
    /// WLCG and SciTokens: space-separated.
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers send the scopes as a list.
    #[serde(default)]
    scp: Option<Vec<String>>,
    #[serde(default, rename = "wlcg.groups")]
    wlcg_groups: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Audience {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn first(&self) -> String {
        match self {
            Self::None => String::new(),
            Self::One(a) => a.clone(),
            Self::Many(list) => list.first().cloned().unwrap_or_default(),
        }
    }
}

/// The keys of one issuer, by key id.
#[derive(Default)]
struct KeySet {
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
}

impl KeySet {
    fn parse(json: &str) -> Result<Self, String> {
        let set: JwkSet = serde_json::from_str(json).map_err(|e| format!("not a JWKS document: {e}"))?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            let algorithm = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                // Symmetric and OKP keys: not for RS256/ES256 tokens.
                _ => continue,
            };
            let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("key {:?}: {e}", jwk.common.key_id))?;
            keys.push((jwk.common.key_id.clone(), algorithm, key));
        }
        if keys.is_empty() {
            return Err("the JWKS document holds no RSA or EC key".into());
        }
        Ok(Self { keys })
    }

    fn find(&self, kid: Option<&str>, algorithm: Algorithm) -> Vec<&DecodingKey> {
        self.keys
            .iter()
            .filter(|(id, alg, _)| *alg == algorithm && (kid.is_none() || id.as_deref() == kid))
            .map(|(_, _, key)| key)
            .collect()
    }
}

/// One issuer ready to verify: its configuration resolved, its keys loaded.
struct Issuer {
    config: IssuerConfig,
    base_path: String,
    skew: u64,
    keys: RwLock<KeySet>,
    last_fetch: Mutex<Option<Instant>>,
}

impl Issuer {
    fn load_keys(&self) -> Result<(), String> {
        let text = match (&self.config.jwks_file, &self.config.jwks_url) {
            (Some(path), None) => std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?,
            (None, Some(url)) => {
                *self.last_fetch.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                fetch(url)?
            }
            _ => return Err("set jwks_file or jwks_url (one of them)".into()),
        };
        let keys = KeySet::parse(&text)?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = keys;
        Ok(())
    }
}

fn fetch(url: &str) -> Result<String, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).build().into();
    let mut response = agent.get(url).call().map_err(|e| format!("cannot fetch {url}: {e}"))?;
    response.body_mut().with_config().limit(1 << 20).read_to_string().map_err(|e| format!("cannot read {url}: {e}"))
}

/// The trusted issuers and the users their tokens map to.
pub struct TokenVerifier {
    issuers: HashMap<String, Arc<Issuer>>,
    /// A token named a key its issuer's URL may now have: the refresher fetches early.
    refetch: Mutex<Vec<Arc<Issuer>>>,
}

impl TokenVerifier {
    /// Loads every issuer's keys (fetching JWKS URLs now). `user_of` names the access key of
    /// a user given by access key or display name, or None. Errors say which issuer and why.
    pub fn new(configs: &[IssuerConfig], user_of: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut issuers = HashMap::new();
        for config in configs {
            let mut config = config.clone();
            let name = config.issuer.clone();
            let resolve = |user: &mut String| match user_of(user) {
                Some(key) => {
                    *user = key;
                    Ok(())
                }
                None => Err(format!("token issuer {name:?}: user {user:?} is not configured")),
            };
            config.subjects.values_mut().try_for_each(resolve)?;
            config.groups.values_mut().try_for_each(resolve)?;
            config.default_user.iter_mut().try_for_each(resolve)?;
            if config.audiences.is_empty() {
                return Err(format!(
                    "token issuer {name:?}: set audiences = [\"...\"] to the `aud` values meant for this gateway (or audiences = [\"{ANY_AUDIENCE}\"] to accept a token meant for any service)"
                ));
            }
            let base_path = config.base_path.clone().unwrap_or_else(|| "/".into());
            Scopes::parse("storage.read:/", &base_path)
                .map_err(|_| format!("token issuer {name:?}: base_path {base_path:?} must be an absolute path"))?;
            let issuer = Issuer {
                skew: config.clock_skew_seconds.unwrap_or(DEFAULT_CLOCK_SKEW_SECONDS),
                base_path,
                config,
                keys: RwLock::default(),
                last_fetch: Mutex::default(),
            };
            issuer.load_keys().map_err(|e| format!("token issuer {name:?}: {e}"))?;
            issuers.insert(name, Arc::new(issuer));
        }
        Ok(Self { issuers, refetch: Mutex::default() })
    }

    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    /// Checks `token` and says what it grants. Cheap (one signature check): callers may run it
    /// on an async worker.
    pub fn verify(&self, token: &str) -> Result<TokenGrant, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(TokenError::UnsupportedAlgorithm(format!("{:?}", header.alg)));
        }
        let issuer_name = unverified_issuer(token)?;
        let issuer = self.issuers.get(&issuer_name).ok_or(TokenError::UnknownIssuer(issuer_name))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = issuer.skew;
        validation.validate_nbf = true;
        validation.set_issuer(&[&issuer.config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        if issuer.config.audiences.iter().any(|a| a == ANY_AUDIENCE) {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&issuer.config.audiences);
            validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        }
        let keys = issuer.keys.read().unwrap_or_else(|e| e.into_inner());
        let candidates = keys.find(header.kid.as_deref(), header.alg);
        if candidates.is_empty() {
            if issuer.config.jwks_url.is_some() {
                // Once per issuer however many such tokens arrive: the queue stays bounded.
                let mut queued = self.refetch.lock().unwrap_or_else(|e| e.into_inner());
                if !queued.iter().any(|q| Arc::ptr_eq(q, issuer)) {
                    queued.push(issuer.clone());
                }
            }
            return Err(TokenError::UnknownKey(header.kid.unwrap_or_default()));
        }
        let mut last = TokenError::BadSignature;
        for key in candidates {
            match jsonwebtoken::decode::<Claims>(token, key, &validation) {
                Ok(data) => return self.grant(issuer, data.claims),
                Err(err) => last = token_error(err, &issuer.config.audiences),
            }
        }
        Err(last)
    }

    fn grant(&self, issuer: &Issuer, claims: Claims) -> Result<TokenGrant, TokenError> {
        let claim = match (&claims.scope, &claims.scp) {
            (Some(scope), _) => scope.clone(),
            (None, Some(list)) => list.join(" "),
            (None, None) => String::new(),
        };
        let scopes = Scopes::parse(&claim, &issuer.base_path)?;
        let config = &issuer.config;
        let user = config
            .subjects
            .get(&claims.sub)
            .or_else(|| claims.wlcg_groups.iter().chain(&claims.groups).find_map(|g| config.groups.get(g)))
            .or(config.default_user.as_ref())
            .cloned()
            .ok_or_else(|| TokenError::NoUser(claims.sub.clone()))?;
        Ok(TokenGrant {
            issuer: claims.iss,
            subject: claims.sub,
            user,
            scopes: Arc::new(scopes),
            expires_at: claims.exp,
            audience: claims.aud.first(),
        })
    }

    /// Refreshes the keys of issuers with a JWKS URL: every `jwks_refresh_seconds`, and early
    /// (at most every 10 s) for an issuer a token named an unknown key of. Runs for ever on
    /// its own thread; failures keep the keys held and are logged.
    pub fn refresh_forever(self: Arc<Self>) {
        let remote: Vec<Arc<Issuer>> = self.issuers.values().filter(|i| i.config.jwks_url.is_some()).cloned().collect();
        if remote.is_empty() {
            return;
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let early: Vec<Arc<Issuer>> = std::mem::take(&mut *self.refetch.lock().unwrap_or_else(|e| e.into_inner()));
            for issuer in &remote {
                let last = *issuer.last_fetch.lock().unwrap_or_else(|e| e.into_inner());
                let period = Duration::from_secs(
                    issuer.config.jwks_refresh_seconds.unwrap_or(DEFAULT_JWKS_REFRESH_SECONDS).max(1),
                );
                let age = last.map_or(Duration::MAX, |t| t.elapsed());
                let asked = early.iter().any(|e| Arc::ptr_eq(e, issuer));
                if age >= period || (asked && age >= JWKS_MIN_REFETCH) {
                    match issuer.load_keys() {
                        Ok(()) => tracing::debug!(issuer = %issuer.config.issuer, "token keys refreshed"),
                        Err(err) => {
                            tracing::warn!(issuer = %issuer.config.issuer, error = %err, "cannot refresh token keys")
                        }
                    }
                }
            }
        }
    }
}

/// The `iss` claim before the signature is checked, to know whose keys check it.
fn unverified_issuer(token: &str) -> Result<String, TokenError> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).ok_or_else(|| TokenError::Malformed("no payload".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| TokenError::Malformed(e.to_string()))?;
    #[derive(Deserialize)]
    struct Iss {
        #[serde(default)]
        iss: String,
    }
    let claims: Iss = serde_json::from_slice(&bytes).map_err(|e| TokenError::Malformed(e.to_string()))?;
    Ok(claims.iss)
}

fn token_error(err: jsonwebtoken::errors::Error, audiences: &[String]) -> TokenError {
    use jsonwebtoken::errors::ErrorKind;
    match err.kind() {
        ErrorKind::ExpiredSignature => TokenError::Expired,
        ErrorKind::ImmatureSignature => TokenError::NotYetValid,
        ErrorKind::InvalidAudience => TokenError::WrongAudience(audiences.join(", ")),
        ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => TokenError::WrongAudience(audiences.join(", ")),
        ErrorKind::InvalidSignature | ErrorKind::InvalidEcdsaKey | ErrorKind::Crypto(_) => TokenError::BadSignature,
        ErrorKind::InvalidIssuer => TokenError::UnknownIssuer(String::new()),
        _ => TokenError::Malformed(err.to_string()),
    }
}
