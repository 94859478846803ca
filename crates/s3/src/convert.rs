//! Conversions between s3s DTO fields and engine types: metadata headers, conditions, ranges,
//! timestamps and ETags.

use std::time::SystemTime;

use isthmus_store::{ByteRange, Conditions, ETagMatch, ObjectMeta};
use s3s::dto::{ETag, ETagCondition, Metadata, Range, Timestamp, TimestampFormat};

pub fn etag_match(condition: Option<ETagCondition>) -> Option<ETagMatch> {
    condition.map(|c| match c {
        ETagCondition::Any => ETagMatch::Any,
        ETagCondition::ETag(tag) => ETagMatch::Tags(vec![tag.into_value()]),
    })
}

pub fn system_time(ts: Option<Timestamp>) -> Option<SystemTime> {
    ts.map(|t| SystemTime::from(time::OffsetDateTime::from(t)))
}

pub fn conditions(
    if_match: Option<ETagCondition>,
    if_none_match: Option<ETagCondition>,
    if_modified_since: Option<Timestamp>,
    if_unmodified_since: Option<Timestamp>,
) -> Conditions {
    Conditions {
        if_match: etag_match(if_match),
        if_none_match: etag_match(if_none_match),
        if_modified_since: system_time(if_modified_since),
        if_unmodified_since: system_time(if_unmodified_since),
    }
}

pub fn byte_range(range: Option<Range>) -> Option<ByteRange> {
    range.map(|r| match r {
        Range::Int { first, last } => ByteRange::FromTo { first, last },
        Range::Suffix { length } => ByteRange::Suffix(length),
    })
}

pub fn etag(value: &str) -> ETag {
    ETag::Strong(value.to_string())
}

pub fn http_date(ts: &Timestamp) -> Option<String> {
    let mut out = Vec::new();
    ts.format(TimestampFormat::HttpDate, &mut out).ok()?;
    String::from_utf8(out).ok()
}

pub fn parse_http_date(s: &str) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, s).ok()
}

/// The object headers a PUT or a REPLACE copy stores.
pub struct MetaHeaders {
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    pub content_disposition: Option<String>,
    pub content_language: Option<String>,
    pub cache_control: Option<String>,
    pub expires: Option<Timestamp>,
    pub metadata: Option<Metadata>,
}

impl MetaHeaders {
    pub fn into_meta(self) -> ObjectMeta {
        ObjectMeta {
            content_type: self.content_type,
            content_encoding: self.content_encoding.as_deref().and_then(stored_content_encoding),
            content_disposition: self.content_disposition,
            content_language: self.content_language,
            cache_control: self.cache_control,
            expires: self.expires.as_ref().and_then(http_date),
            user: self.metadata.unwrap_or_default().into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect(),
            tags: Default::default(),
            acl: None,
            grants: Vec::new(),
        }
    }
}

/// The Content-Encoding stored with an object: `aws-chunked` describes how the body travelled,
/// not the object, and S3 drops it (`aws-chunked,gzip` is stored as `gzip`, `aws-chunked` alone
/// as nothing).
pub fn stored_content_encoding(header: &str) -> Option<String> {
    let kept: Vec<&str> =
        header.split(',').map(str::trim).filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("aws-chunked")).collect();
    (!kept.is_empty()).then(|| kept.join(","))
}

/// Builds a `MetaHeaders` from any s3s input that has the usual header fields.
#[macro_export]
macro_rules! meta_headers {
    ($input:expr) => {
        $crate::convert::MetaHeaders {
            content_type: $input.content_type,
            content_encoding: $input.content_encoding,
            content_disposition: $input.content_disposition,
            content_language: $input.content_language,
            cache_control: $input.cache_control,
            expires: $input.expires,
            metadata: $input.metadata,
        }
    };
}

/// The user metadata map for a response (None when empty, so no headers are sent).
pub fn user_metadata(meta: &ObjectMeta) -> Option<Metadata> {
    (!meta.user.is_empty()).then(|| meta.user.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_round_trip() {
        let ts = parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(http_date(&ts).unwrap(), "Wed, 21 Oct 2015 07:28:00 GMT");
    }

    #[test]
    fn user_metadata_keys_are_lower_case() {
        let mut m = Metadata::default();
        m.insert("Experiment".into(), "x".into());
        let meta = MetaHeaders {
            content_type: None,
            content_encoding: None,
            content_disposition: None,
            content_language: None,
            cache_control: None,
            expires: None,
            metadata: Some(m),
        }
        .into_meta();
        assert_eq!(meta.user.get("experiment").map(String::as_str), Some("x"));
    }
}
