//! A bucket's notification rules (S3's `NotificationConfiguration`), as a bucket setting: which
//! events (`s3:ObjectCreated:*`, `s3:ObjectRemoved:Delete`, ...) on which keys (a prefix and a
//! suffix) go to which destination, named by its ARN. What a destination is and how events
//! reach it is the notify crate's; here are the rules, their checks and their matching, so that
//! every backend keeps them with the bucket's other settings.

use crate::error::{StoreError, StoreResult};

/// At most this many rules per bucket (S3 documents no limit; a bound keeps matching cheap).
pub const MAX_RULES: usize = 100;

/// The event names S3 defines that Isthmus sends, as a rule may name them (with the `s3:`
/// prefix) and as records carry them (without it).
pub const EVENT_NAMES: &[&str] = &[
    "ObjectCreated:Put",
    "ObjectCreated:Post",
    "ObjectCreated:Copy",
    "ObjectCreated:CompleteMultipartUpload",
    "ObjectRemoved:Delete",
    "ObjectRemoved:DeleteMarkerCreated",
    "ObjectTagging:Put",
    "ObjectTagging:Delete",
];

/// Which list of S3's configuration a rule came in: answered back in the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RuleList {
    #[default]
    Queue,
    Topic,
    LambdaFunction,
}

/// One rule: events matching `events` on keys with `prefix` and `suffix` go to `arn`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NotificationRule {
    /// The rule's id (`configurationId` in the records); one is made up when none was given.
    pub id: String,
    pub list: RuleList,
    /// The destination's ARN (`arn:isthmus:sqs::ID:KIND`), checked by the door against the
    /// destinations the operator configured.
    pub arn: String,
    /// As put: `s3:ObjectCreated:*`, `s3:ObjectRemoved:Delete`, ...
    pub events: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub suffix: String,
}

/// A bucket's rules, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NotificationConfig {
    pub rules: Vec<NotificationRule>,
}

impl NotificationRule {
    /// Whether this rule sends `event` (a name of `EVENT_NAMES`) for `key`.
    pub fn matches(&self, event: &str, key: &str) -> bool {
        key.starts_with(&self.prefix)
            && key.ends_with(&self.suffix)
            && self.events.iter().any(|pattern| pattern_matches(pattern, event))
    }
}

/// `s3:ObjectCreated:*` matches every `ObjectCreated:` event; `s3:ObjectCreated:Put` only
/// itself.
fn pattern_matches(pattern: &str, event: &str) -> bool {
    let Some(pattern) = pattern.strip_prefix("s3:") else {
        return false;
    };
    match pattern.strip_suffix('*') {
        Some(family) => family.ends_with(':') && event.starts_with(family),
        None => pattern == event,
    }
}

/// Whether `pattern` names at least one event Isthmus sends.
fn known_pattern(pattern: &str) -> bool {
    EVENT_NAMES.iter().any(|event| pattern_matches(pattern, event))
}

impl NotificationConfig {
    /// The rules that send `event` for `key`.
    pub fn matching<'a>(&'a self, event: &'a str, key: &'a str) -> impl Iterator<Item = &'a NotificationRule> + 'a {
        self.rules.iter().filter(move |rule| rule.matches(event, key))
    }

    /// Checks the rules as S3 does on PutBucketNotificationConfiguration: known event names,
    /// unique ids, at most one prefix and one suffix, no two rules for the same destination
    /// whose events and keys overlap (S3's "Configurations overlap"). Destinations are the
    /// door's to check (it knows which the operator configured).
    pub fn validate(&self) -> StoreResult<()> {
        if self.rules.len() > MAX_RULES {
            return Err(StoreError::InvalidArgument(format!("a bucket has at most {MAX_RULES} notification rules")));
        }
        let mut ids = std::collections::BTreeSet::new();
        for rule in &self.rules {
            if rule.id.is_empty() || rule.id.len() > 255 || !ids.insert(rule.id.as_str()) {
                return Err(StoreError::InvalidArgument(format!(
                    "notification rule ids are 1 to 255 characters and unique: {:?}",
                    rule.id
                )));
            }
            if rule.events.is_empty() {
                return Err(StoreError::InvalidArgument(format!("rule {:?} names no event", rule.id)));
            }
            if let Some(unknown) = rule.events.iter().find(|pattern| !known_pattern(pattern)) {
                return Err(StoreError::InvalidArgument(format!(
                    "the event {unknown:?} is not one Isthmus sends (s3:ObjectCreated:*, s3:ObjectRemoved:*, s3:ObjectTagging:* and their kinds)"
                )));
            }
            if rule.prefix.len() > 1024 || rule.suffix.len() > 1024 {
                return Err(StoreError::InvalidArgument("a filter's prefix or suffix is at most 1024 bytes".into()));
            }
        }
        for (i, a) in self.rules.iter().enumerate() {
            for b in &self.rules[i + 1..] {
                if a.arn == b.arn && overlap(a, b) {
                    return Err(StoreError::InvalidArgument(format!(
                        "Configurations overlap. Configurations on the same bucket cannot share a common event type: rules {:?} and {:?}",
                        a.id, b.id
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Two rules overlap when one event on one key could match both (S3 refuses that for one
/// destination, which would receive the event twice).
fn overlap(a: &NotificationRule, b: &NotificationRule) -> bool {
    let prefixes = a.prefix.starts_with(&b.prefix) || b.prefix.starts_with(&a.prefix);
    let suffixes = a.suffix.ends_with(&b.suffix) || b.suffix.ends_with(&a.suffix);
    let events = EVENT_NAMES.iter().any(|event| {
        a.events.iter().any(|p| pattern_matches(p, event)) && b.events.iter().any(|p| pattern_matches(p, event))
    });
    prefixes && suffixes && events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, events: &[&str], prefix: &str, suffix: &str) -> NotificationRule {
        NotificationRule {
            id: id.into(),
            list: RuleList::Queue,
            arn: "arn:isthmus:sqs::hook:webhook".into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            prefix: prefix.into(),
            suffix: suffix.into(),
        }
    }

    #[test]
    fn patterns_match_their_family_or_themselves() {
        let r = rule("r", &["s3:ObjectCreated:*"], "runs/", ".h5");
        assert!(r.matches("ObjectCreated:Put", "runs/1/out.h5"));
        assert!(r.matches("ObjectCreated:CompleteMultipartUpload", "runs/out.h5"));
        assert!(!r.matches("ObjectRemoved:Delete", "runs/out.h5"));
        assert!(!r.matches("ObjectCreated:Put", "other/out.h5"));
        assert!(!r.matches("ObjectCreated:Put", "runs/out.h5.tmp"));
        let exact = rule("e", &["s3:ObjectRemoved:Delete"], "", "");
        assert!(exact.matches("ObjectRemoved:Delete", "k"));
        assert!(!exact.matches("ObjectRemoved:DeleteMarkerCreated", "k"));
        // Without "s3:", or a wildcard inside a name, nothing matches.
        assert!(!rule("x", &["ObjectCreated:*"], "", "").matches("ObjectCreated:Put", "k"));
        assert!(!rule("x", &["s3:ObjectCreated*"], "", "").matches("ObjectCreated:Put", "k"));
    }

    #[test]
    fn validation_refuses_what_s3_refuses() {
        let ok = NotificationConfig {
            rules: vec![rule("a", &["s3:ObjectCreated:*"], "a/", ""), rule("b", &["s3:ObjectCreated:*"], "b/", "")],
        };
        ok.validate().unwrap();
        for bad in [
            vec![rule("a", &["s3:ObjectCreated:Nope"], "", "")],
            vec![rule("a", &["s3:Replication:*"], "", "")],
            vec![rule("a", &[], "", "")],
            vec![rule("", &["s3:ObjectCreated:*"], "", "")],
            vec![rule("a", &["s3:ObjectCreated:*"], "", ""), rule("a", &["s3:ObjectRemoved:*"], "", "")],
            // Same destination, overlapping keys and events.
            vec![rule("a", &["s3:ObjectCreated:*"], "runs/", ""), rule("b", &["s3:ObjectCreated:Put"], "runs/x", "")],
        ] {
            let config = NotificationConfig { rules: bad };
            assert!(matches!(config.validate(), Err(StoreError::InvalidArgument(_))), "{config:?}");
        }
        // Same destination, disjoint events: allowed.
        let disjoint = NotificationConfig {
            rules: vec![rule("a", &["s3:ObjectCreated:*"], "", ""), rule("b", &["s3:ObjectRemoved:*"], "", "")],
        };
        disjoint.validate().unwrap();
    }
}
