//! Bucket policies: the subset data portals use. Statements `Allow` or `Deny` the actions
//! `s3:GetObject` and `s3:ListBucket` (or `s3:*`) to `Principal: "*"` or named users
//! (`{"AWS": ["alice", "arn:aws:iam::…:user/alice"]}`), on the bucket (`arn:aws:s3:::b`) and
//! object resources (`arn:aws:s3:::b/prefix/*`, `*` and `?` wildcards), with `s3:prefix`
//! conditions (`StringEquals` / `StringLike`) on ListBucket. Anything else is refused when the
//! policy is put (MalformedPolicy), never silently ignored. The authorization layer asks it for
//! every principal but the process and root: an explicit Deny refuses whoever it names (the
//! bucket's owner and the users its grants name too), an Allow opens reads to principals the
//! owner rules do not.

use serde_json::Value;

use isthmus_store::{StoreError, StoreResult};

/// What a request does, in policy terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyAction<'a> {
    /// Read an object (GET, HEAD).
    GetObject { key: &'a str },
    /// List the bucket under a prefix.
    ListBucket { prefix: &'a str },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Statement {
    allow: bool,
    /// `None` is everyone (`"*"`), signed or not.
    principals: Option<Vec<String>>,
    get_object: bool,
    list_bucket: bool,
    /// Object resources as patterns over "bucket/key"; bucket resources as the bucket name.
    object_patterns: Vec<String>,
    bucket_resource: bool,
    /// `s3:prefix` values (patterns with StringLike) a ListBucket must match.
    prefix_condition: Option<(Vec<String>, bool)>,
}

/// A parsed bucket policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketPolicy {
    statements: Vec<Statement>,
}

fn malformed(why: impl Into<String>) -> StoreError {
    StoreError::MalformedPolicy(why.into())
}

/// A JSON value that may be one string or a list of strings.
fn strings(value: &Value, what: &str) -> StoreResult<Vec<String>> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| malformed(format!("{what} must be strings"))))
            .collect(),
        _ => Err(malformed(format!("{what} must be a string or a list of strings"))),
    }
}

/// `*` and `?` wildcards, as IAM matches them.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A user principal's name: the access key itself or the last part of an IAM user ARN.
fn principal_name(principal: &str) -> &str {
    principal.rsplit_once(":user/").map_or(principal, |(_, name)| name)
}

impl BucketPolicy {
    /// Parses and checks a policy document for `bucket`.
    pub fn parse(bucket: &str, document: &str) -> StoreResult<Self> {
        let doc: Value = serde_json::from_str(document).map_err(|e| malformed(format!("not JSON: {e}")))?;
        let raw = match doc.get("Statement") {
            Some(Value::Array(items)) => items.clone(),
            Some(one @ Value::Object(_)) => vec![one.clone()],
            _ => return Err(malformed("Policy has no Statement")),
        };
        let statements = raw.iter().map(|s| Self::statement(bucket, s)).collect::<StoreResult<Vec<_>>>()?;
        if statements.is_empty() {
            return Err(malformed("Policy has no Statement"));
        }
        Ok(Self { statements })
    }

    fn statement(bucket: &str, s: &Value) -> StoreResult<Statement> {
        let Value::Object(fields) = s else { return Err(malformed("A Statement must be an object")) };
        for name in fields.keys() {
            if !matches!(name.as_str(), "Sid" | "Effect" | "Principal" | "Action" | "Resource" | "Condition") {
                return Err(malformed(format!("Statement element {name} is not supported")));
            }
        }
        let allow = match fields.get("Effect").and_then(Value::as_str) {
            Some("Allow") => true,
            Some("Deny") => false,
            _ => return Err(malformed("Effect must be Allow or Deny")),
        };
        let principals = match fields.get("Principal") {
            Some(Value::String(star)) if star == "*" => None,
            Some(Value::Object(p)) if p.len() == 1 && p.contains_key("AWS") => {
                let names = strings(&p["AWS"], "Principal AWS")?;
                if names.iter().any(|n| n == "*") {
                    None
                } else {
                    Some(names.iter().map(|n| principal_name(n).to_string()).collect())
                }
            }
            _ => return Err(malformed("Principal must be \"*\" or {\"AWS\": [users]}")),
        };
        let (mut get_object, mut list_bucket) = (false, false);
        for action in strings(fields.get("Action").ok_or_else(|| malformed("Statement has no Action"))?, "Action")? {
            match action.as_str() {
                "s3:GetObject" => get_object = true,
                "s3:ListBucket" => list_bucket = true,
                "s3:*" => (get_object, list_bucket) = (true, true),
                other => {
                    return Err(malformed(format!("Action {other} is not supported (s3:GetObject, s3:ListBucket)")));
                }
            }
        }
        let (mut object_patterns, mut bucket_resource) = (Vec::new(), false);
        let resources = fields.get("Resource").ok_or_else(|| malformed("Statement has no Resource"))?;
        for resource in strings(resources, "Resource")? {
            let Some(path) = resource.strip_prefix("arn:aws:s3:::") else {
                return Err(malformed(format!("Resource {resource} is not an S3 ARN")));
            };
            match path.split_once('/') {
                None if path == bucket => bucket_resource = true,
                Some((b, _)) if b == bucket => object_patterns.push(path.to_string()),
                _ => return Err(malformed(format!("Resource {resource} is not in bucket {bucket}"))),
            }
        }
        let prefix_condition = match fields.get("Condition") {
            None => None,
            Some(Value::Object(ops)) if ops.len() == 1 => {
                let (op, keys) = ops.iter().next().expect("one operator");
                let like = match op.as_str() {
                    "StringEquals" => false,
                    "StringLike" => true,
                    other => return Err(malformed(format!("Condition operator {other} is not supported"))),
                };
                let Value::Object(keys) = keys else { return Err(malformed("Condition must map keys to values")) };
                match keys.get("s3:prefix") {
                    Some(values) if keys.len() == 1 => Some((strings(values, "s3:prefix")?, like)),
                    _ => return Err(malformed("Only the s3:prefix condition key is supported")),
                }
            }
            Some(_) => return Err(malformed("Only one Condition operator (StringEquals or StringLike) is supported")),
        };
        Ok(Statement { allow, principals, get_object, list_bucket, object_patterns, bucket_resource, prefix_condition })
    }

    /// Whether a statement allows everyone (what PublicAccessBlock blocks or ignores).
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| s.allow && s.principals.is_none())
    }

    /// The policy's verdict for `user` (`None`: anonymous) doing `action` in `bucket`:
    /// `Some(false)` for an explicit Deny, `Some(true)` for an Allow, `None` when no statement
    /// applies. Without `public_allows`, statements that allow everyone are ignored.
    pub fn verdict(
        &self,
        bucket: &str,
        user: Option<&str>,
        action: PolicyAction<'_>,
        public_allows: bool,
    ) -> Option<bool> {
        let mut allowed = None;
        for s in &self.statements {
            if s.allow && s.principals.is_none() && !public_allows {
                continue;
            }
            let principal_matches =
                s.principals.as_ref().is_none_or(|names| user.is_some_and(|u| names.iter().any(|n| n == u)));
            let applies = principal_matches
                && match action {
                    PolicyAction::GetObject { key } => {
                        s.get_object && s.object_patterns.iter().any(|p| wildcard_match(p, &format!("{bucket}/{key}")))
                    }
                    PolicyAction::ListBucket { prefix } => {
                        s.list_bucket
                            && s.bucket_resource
                            && s.prefix_condition.as_ref().is_none_or(|(values, like)| {
                                values.iter().any(|v| if *like { wildcard_match(v, prefix) } else { v == prefix })
                            })
                    }
                };
            if applies {
                if !s.allow {
                    return Some(false);
                }
                allowed = Some(true);
            }
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORTAL: &str = r#"{
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "read", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
             "Resource": "arn:aws:s3:::portal/public/*"},
            {"Effect": "Allow", "Principal": "*", "Action": ["s3:ListBucket"],
             "Resource": "arn:aws:s3:::portal", "Condition": {"StringLike": {"s3:prefix": ["public/*", "public/"]}}},
            {"Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam::123456789012:user/alice"]},
             "Action": "s3:*", "Resource": ["arn:aws:s3:::portal", "arn:aws:s3:::portal/*"]},
            {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::portal/public/embargo/*"}
        ]}"#;

    #[test]
    fn portal_policy_verdicts() {
        let p = BucketPolicy::parse("portal", PORTAL).unwrap();
        let get = |user, key| p.verdict("portal", user, PolicyAction::GetObject { key }, true);
        let list = |user, prefix| p.verdict("portal", user, PolicyAction::ListBucket { prefix }, true);
        assert_eq!(get(None, "public/data.nc"), Some(true));
        assert_eq!(get(None, "private/data.nc"), None);
        assert_eq!(get(None, "public/embargo/x"), Some(false));
        assert_eq!(get(Some("alice"), "public/embargo/x"), Some(false));
        assert_eq!(get(Some("alice"), "private/data.nc"), Some(true));
        assert_eq!(get(Some("bob"), "private/data.nc"), None);
        assert_eq!(list(None, "public/"), Some(true));
        assert_eq!(list(None, "public/run1/"), Some(true));
        assert_eq!(list(None, ""), None);
        assert_eq!(list(Some("alice"), ""), Some(true));
        assert!(p.is_public());
        // Restricted: public allows are ignored, denies and named users stay.
        let restricted = |user, key| p.verdict("portal", user, PolicyAction::GetObject { key }, false);
        assert_eq!(restricted(None, "public/data.nc"), None);
        assert_eq!(restricted(None, "public/embargo/x"), Some(false));
        assert_eq!(restricted(Some("alice"), "private/data.nc"), Some(true));
    }

    #[test]
    fn unsupported_elements_are_refused() {
        for bad in [
            r#"{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*"}]}"#,
            r#"{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::other/*"}]}"#,
            r#"{"Statement": [{"Effect": "Allow", "NotPrincipal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}]}"#,
            r#"{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b", "Condition": {"IpAddress": {"aws:SourceIp": "1.2.3.4"}}}]}"#,
            r#"{"Statement": []}"#,
            "not json",
        ] {
            assert!(matches!(BucketPolicy::parse("b", bad), Err(StoreError::MalformedPolicy(_))), "{bad}");
        }
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("b/public/*", "b/public/x/y"));
        assert!(wildcard_match("b/run?/*", "b/run1/z"));
        assert!(!wildcard_match("b/public/*", "b/private/x"));
        assert!(wildcard_match("*", ""));
    }
}
