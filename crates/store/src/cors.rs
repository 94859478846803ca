//! A bucket's CORS configuration (PutBucketCors): the rules that say which web origins may
//! read or write the bucket from a browser, checked as S3 checks them when they are put, and
//! matched against a preflight (`OPTIONS`) or an actual request's `Origin` as S3 matches them
//! (the first rule whose origin, method and requested headers all match).

use crate::error::{StoreError, StoreResult};

/// The rules S3 accepts in one configuration.
pub const MAX_RULES: usize = 100;
/// The methods a rule may allow.
pub const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];
/// The longest origin, header name or rule id accepted (the whole configuration is bounded by
/// the protocol layer's XML limit; this bounds each piece a match walks).
const MAX_TEXT: usize = 1024;

/// One CORS rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CorsRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Origins, each with at most one `*` (`*` alone: every origin).
    pub allowed_origins: Vec<String>,
    /// Methods among `METHODS`.
    pub allowed_methods: Vec<String>,
    /// Request headers a preflight may ask for, each with at most one `*` (case-insensitive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_headers: Vec<String>,
    /// Response headers a page's script may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long a browser may cache the preflight's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<i32>,
}

/// A bucket's CORS rules, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CorsConfig {
    pub rules: Vec<CorsRule>,
}

impl CorsConfig {
    /// Checks the rules as S3 does on PutBucketCors (MalformedXML for a rule without origins
    /// or methods; InvalidRequest for a method S3 does not know or an origin or header with
    /// more than one wildcard).
    pub fn validate(&self) -> StoreResult<()> {
        if self.rules.is_empty() || self.rules.len() > MAX_RULES {
            return Err(StoreError::MalformedXml(format!("a CORS configuration has 1 to {MAX_RULES} rules")));
        }
        for rule in &self.rules {
            if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
                return Err(StoreError::MalformedXml(
                    "each CORSRule needs an AllowedOrigin and an AllowedMethod".into(),
                ));
            }
            if let Some(method) = rule.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
                return Err(StoreError::InvalidRequest(format!(
                    "Found unsupported HTTP method in CORS config. Unsupported method is {method}"
                )));
            }
            for (what, pattern) in rule
                .allowed_origins
                .iter()
                .map(|o| ("AllowedOrigin", o))
                .chain(rule.allowed_headers.iter().map(|h| ("AllowedHeader", h)))
            {
                if pattern.matches('*').count() > 1 {
                    return Err(StoreError::InvalidRequest(format!(
                        "{what} \"{pattern}\" can not have more than one wildcard."
                    )));
                }
            }
            let texts = rule.allowed_origins.iter().chain(&rule.allowed_headers).chain(&rule.expose_headers);
            if texts.chain(&rule.id).any(|t| t.len() > MAX_TEXT || t.chars().any(char::is_control)) {
                return Err(StoreError::InvalidRequest(
                    "a CORS rule's values are at most 1024 printable characters".into(),
                ));
            }
            if rule.max_age_seconds.is_some_and(|age| age < 0) {
                return Err(StoreError::MalformedXml("MaxAgeSeconds is not negative".into()));
            }
        }
        Ok(())
    }

    /// The rule that allows a request from `origin` with `method` asking to send
    /// `request_headers` (a preflight's `Access-Control-Request-Headers`; none for an actual
    /// request): the first whose origin, method and every header match.
    pub fn matching(&self, origin: &str, method: &str, request_headers: &[&str]) -> Option<&CorsRule> {
        self.rules.iter().find(|rule| {
            rule.allowed_origins.iter().any(|pattern| wildcard_match(pattern, origin, false))
                && rule.allowed_methods.iter().any(|m| m == method)
                && request_headers
                    .iter()
                    .all(|header| rule.allowed_headers.iter().any(|pattern| wildcard_match(pattern, header, true)))
        })
    }
}

/// Whether `text` matches `pattern`, whose one `*` (if any) stands for any run of characters.
fn wildcard_match(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let eq = |a: &str, b: &str| if ignore_case { a.eq_ignore_ascii_case(b) } else { a == b };
    match pattern.split_once('*') {
        None => eq(pattern, text),
        Some((head, tail)) => {
            text.len() >= head.len() + tail.len()
                && text.is_char_boundary(head.len())
                && text.is_char_boundary(text.len() - tail.len())
                && eq(&text[..head.len()], head)
                && eq(&text[text.len() - tail.len()..], tail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CorsRule {
        CorsRule {
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            allowed_methods: methods.iter().map(|s| s.to_string()).collect(),
            allowed_headers: headers.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_rule_matching_origin_method_and_headers_wins() {
        let config = CorsConfig {
            rules: vec![
                rule(&["https://viewer.example.org"], &["GET", "HEAD"], &["range", "x-amz-*"]),
                rule(&["http://*.lab.example"], &["PUT"], &["*"]),
                rule(&["*"], &["GET"], &[]),
            ],
        };
        let viewer = config.matching("https://viewer.example.org", "GET", &["Range", "X-Amz-Date"]);
        assert_eq!(viewer, Some(&config.rules[0]));
        assert_eq!(config.matching("http://a.lab.example", "PUT", &["content-type"]), Some(&config.rules[1]));
        // Headers asked for that the first rule does not allow fall through to later rules.
        assert_eq!(config.matching("https://viewer.example.org", "GET", &["authorization"]), None);
        assert_eq!(config.matching("https://other.example", "GET", &[]), Some(&config.rules[2]));
        assert_eq!(config.matching("https://other.example", "DELETE", &[]), None);
        // Origins compare exactly (scheme and case), wildcards within their place.
        assert_eq!(config.matching("http://lab.example", "PUT", &[]), None);
        assert_eq!(config.matching("https://a.lab.example", "PUT", &[]), None);
    }

    #[test]
    fn wildcards_never_match_across_a_character_or_out_of_bounds() {
        assert!(wildcard_match("a*a", "aa", false));
        assert!(!wildcard_match("ab*ba", "aba", false));
        assert!(wildcard_match("*", "", false));
        assert!(!wildcard_match("é*", "e\u{301}x", false));
        assert!(wildcard_match("X-AMZ-*", "x-amz-meta-a", true));
    }

    #[test]
    fn rules_are_checked_as_s3_checks_them() {
        assert!(CorsConfig { rules: vec![rule(&["*"], &["GET"], &[])] }.validate().is_ok());
        for bad in [
            CorsConfig::default(),
            CorsConfig { rules: vec![rule(&[], &["GET"], &[])] },
            CorsConfig { rules: vec![rule(&["*"], &["PATCH"], &[])] },
            CorsConfig { rules: vec![rule(&["http://*.*.example"], &["GET"], &[])] },
            CorsConfig { rules: vec![rule(&["*"], &["GET"], &["x-*-*"])] },
            CorsConfig { rules: vec![rule(&["http://a\r\nb"], &["GET"], &[])] },
            CorsConfig { rules: vec![rule(&["*"], &["GET"], &[]); MAX_RULES + 1] },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
