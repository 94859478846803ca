//! What happened to an object (`Event`, kept in the queue) and the AWS S3 event record a
//! destination receives for it (`Event::record`), in AWS's own layout so that consumers written
//! for AWS S3 or MinIO parse it unchanged.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// The event kinds the gateway announces, as AWS names them (without the `s3:` prefix a bucket
/// rule writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventName {
    ObjectCreatedPut,
    ObjectCreatedPost,
    ObjectCreatedCopy,
    ObjectCreatedCompleteMultipartUpload,
    ObjectRemovedDelete,
    ObjectRemovedDeleteMarkerCreated,
    ObjectTaggingPut,
    ObjectTaggingDelete,
}

impl EventName {
    pub const ALL: [EventName; 8] = [
        EventName::ObjectCreatedPut,
        EventName::ObjectCreatedPost,
        EventName::ObjectCreatedCopy,
        EventName::ObjectCreatedCompleteMultipartUpload,
        EventName::ObjectRemovedDelete,
        EventName::ObjectRemovedDeleteMarkerCreated,
        EventName::ObjectTaggingPut,
        EventName::ObjectTaggingDelete,
    ];

    /// The name in a record's `eventName` (`ObjectCreated:Put`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventName::ObjectCreatedPut => "ObjectCreated:Put",
            EventName::ObjectCreatedPost => "ObjectCreated:Post",
            EventName::ObjectCreatedCopy => "ObjectCreated:Copy",
            EventName::ObjectCreatedCompleteMultipartUpload => "ObjectCreated:CompleteMultipartUpload",
            EventName::ObjectRemovedDelete => "ObjectRemoved:Delete",
            EventName::ObjectRemovedDeleteMarkerCreated => "ObjectRemoved:DeleteMarkerCreated",
            EventName::ObjectTaggingPut => "ObjectTagging:Put",
            EventName::ObjectTaggingDelete => "ObjectTagging:Delete",
        }
    }

    /// The kind named `text` (`ObjectCreated:Put`, with or without the `s3:` prefix).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.strip_prefix("s3:").unwrap_or(text);
        Self::ALL.into_iter().find(|name| name.as_str() == text)
    }
}

/// One change to one object, as the queue keeps it until every destination has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub name: EventName,
    pub bucket: String,
    pub key: String,
    pub size: u64,
    /// The object's ETag, without quotes.
    pub etag: Option<String>,
    pub version_id: Option<String>,
    /// Who made the change (the S3 access key's user, or the Unix user of a file written
    /// through POSIX).
    pub principal: String,
    pub source_ip: String,
    pub time: SystemTime,
    pub region: String,
    pub bucket_owner: String,
}

impl Event {
    /// The record `{"Records":[...]}` for this event, as sent to a destination: `sequencer` is
    /// the queue's number for it (increasing: later changes to a key have larger ones), and
    /// `configuration_id` the id of the bucket rule that matched.
    pub fn record(&self, sequencer: u64, configuration_id: &str) -> Vec<u8> {
        let sequencer = format!("{sequencer:016X}");
        let bucket_arn = format!("arn:aws:s3:::{}", self.bucket);
        // As AWS writes removals: no size, no ETag (the object is gone).
        let (size, etag) = match &self.etag {
            Some(etag) => (Some(self.size), Some(etag.trim_matches('"'))),
            None => (None, None),
        };
        let record = Record {
            event_version: "2.1",
            // AWS's own value, not "isthmus:s3": consumers written for AWS S3 (Lambda-style
            // handlers, MinIO's examples) check it and must work unchanged.
            event_source: "aws:s3",
            aws_region: &self.region,
            event_time: iso8601_millis(self.time),
            event_name: self.name.as_str(),
            user_identity: Principal { principal_id: &self.principal },
            request_parameters: RequestParameters { source_ip_address: &self.source_ip },
            // No S3 request id reaches the queue (a file written through POSIX has none): the
            // sequencer identifies the event as uniquely.
            response_elements: ResponseElements { request_id: &sequencer, id_2: "isthmus" },
            s3: S3Entity {
                s3_schema_version: "1.0",
                configuration_id,
                bucket: BucketEntity {
                    name: &self.bucket,
                    owner_identity: Principal { principal_id: &self.bucket_owner },
                    arn: &bucket_arn,
                },
                object: ObjectEntity {
                    key: encode_key(&self.key),
                    size,
                    e_tag: etag,
                    version_id: self.version_id.as_deref(),
                    sequencer: &sequencer,
                },
            },
        };
        serde_json::to_vec(&Records { records: [record] }).expect("a record always serializes")
    }
}

// The record's layout, field for field as AWS writes it (serialized straight from borrowed
// fields: building a `serde_json::Value` first cost about 20 us per record).

#[derive(Serialize)]
struct Records<'a> {
    #[serde(rename = "Records")]
    records: [Record<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Record<'a> {
    event_version: &'static str,
    event_source: &'static str,
    aws_region: &'a str,
    event_time: String,
    event_name: &'static str,
    user_identity: Principal<'a>,
    request_parameters: RequestParameters<'a>,
    response_elements: ResponseElements<'a>,
    s3: S3Entity<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Principal<'a> {
    principal_id: &'a str,
}

#[derive(Serialize)]
struct RequestParameters<'a> {
    #[serde(rename = "sourceIPAddress")]
    source_ip_address: &'a str,
}

#[derive(Serialize)]
struct ResponseElements<'a> {
    #[serde(rename = "x-amz-request-id")]
    request_id: &'a str,
    #[serde(rename = "x-amz-id-2")]
    id_2: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct S3Entity<'a> {
    s3_schema_version: &'static str,
    configuration_id: &'a str,
    bucket: BucketEntity<'a>,
    object: ObjectEntity<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BucketEntity<'a> {
    name: &'a str,
    owner_identity: Principal<'a>,
    arn: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectEntity<'a> {
    key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    e_tag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version_id: Option<&'a str>,
    sequencer: &'a str,
}

/// `time` as ISO 8601 in UTC with milliseconds (`2026-11-27T07:28:00.123Z`), as AWS writes it.
fn iso8601_millis(time: SystemTime) -> String {
    let time = time::OffsetDateTime::from(time);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        time.year(),
        u8::from(time.month()),
        time.day(),
        time.hour(),
        time.minute(),
        time.second(),
        time.millisecond()
    )
}

/// A key as AWS puts it in a record: form-encoded (a space is `+`, every byte but letters,
/// digits, `-_.*/` is `%XX`), so `urllib.parse.unquote_plus` gives the key back.
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for &byte in key.as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' | b'/' => out.push(byte as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::time::Duration;

    fn event(key: &str) -> Event {
        Event {
            name: EventName::ObjectCreatedCompleteMultipartUpload,
            bucket: "results".into(),
            key: key.into(),
            size: 123_456,
            etag: Some("\"d41d8cd98f00b204e9800998ecf8427e-3\"".into()),
            version_id: None,
            principal: "alice".into(),
            source_ip: "10.1.2.3".into(),
            // 2026-11-27T07:28:00.042Z
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_764_480_042),
            region: "us-east-1".into(),
            bucket_owner: "bob".into(),
        }
    }

    fn parse(bytes: &[u8]) -> Value {
        let doc: Value = serde_json::from_slice(bytes).unwrap();
        let records = doc["Records"].as_array().unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(doc.as_object().unwrap().len(), 1, "only Records at the top");
        records[0].clone()
    }

    #[test]
    fn a_removal_names_the_key_and_version_without_size_or_etag() {
        let removed = Event {
            name: EventName::ObjectRemovedDelete,
            size: 0,
            etag: None,
            version_id: Some("v1".into()),
            ..event("gone.txt")
        };
        let object = parse(&removed.record(7, "r"))["s3"]["object"].as_object().unwrap().clone();
        let mut fields: Vec<&str> = object.keys().map(String::as_str).collect();
        fields.sort();
        assert_eq!(fields, ["key", "sequencer", "versionId"]);
    }

    #[test]
    fn the_record_has_every_field_of_aws_layout() {
        let r = parse(&event("run/out.h5").record(0x1f, "on-results"));
        assert_eq!(r["eventVersion"], "2.1");
        assert_eq!(r["eventSource"], "aws:s3");
        assert_eq!(r["awsRegion"], "us-east-1");
        assert_eq!(r["eventTime"], "2026-11-27T07:28:00.042Z");
        assert_eq!(r["eventName"], "ObjectCreated:CompleteMultipartUpload");
        assert_eq!(r["userIdentity"]["principalId"], "alice");
        assert_eq!(r["requestParameters"]["sourceIPAddress"], "10.1.2.3");
        assert_eq!(r["responseElements"]["x-amz-request-id"], "000000000000001F");
        assert!(r["responseElements"]["x-amz-id-2"].is_string());
        let s3 = &r["s3"];
        assert_eq!(s3["s3SchemaVersion"], "1.0");
        assert_eq!(s3["configurationId"], "on-results");
        assert_eq!(s3["bucket"]["name"], "results");
        assert_eq!(s3["bucket"]["ownerIdentity"]["principalId"], "bob");
        assert_eq!(s3["bucket"]["arn"], "arn:aws:s3:::results");
        let object = s3["object"].as_object().unwrap();
        assert_eq!(object["key"], "run/out.h5");
        assert_eq!(object["size"], 123_456, "a number, as AWS sends it");
        assert_eq!(object["eTag"], "d41d8cd98f00b204e9800998ecf8427e-3", "no quotes");
        assert_eq!(object["sequencer"], "000000000000001F");
        assert!(!object.contains_key("versionId"), "omitted when the object has no version");
    }

    #[test]
    fn a_version_id_is_present_when_there_is_one_and_sequencers_sort_as_text() {
        let mut e = event("k");
        e.version_id = Some("v1".into());
        e.name = EventName::ObjectRemovedDeleteMarkerCreated;
        let r = parse(&e.record(u64::MAX, "c"));
        assert_eq!(r["s3"]["object"]["versionId"], "v1");
        assert_eq!(r["eventName"], "ObjectRemoved:DeleteMarkerCreated");
        assert_eq!(r["s3"]["object"]["sequencer"], "FFFFFFFFFFFFFFFF");
        let seq = |n: u64| parse(&e.record(n, "c"))["s3"]["object"]["sequencer"].as_str().unwrap().to_string();
        assert!(seq(9) < seq(10) && seq(255) < seq(256) && seq(0xffff) < seq(0x1_0000));
    }

    #[test]
    fn keys_are_form_encoded_and_decode_back() {
        for key in ["a b/c d.txt", "données/été 2026 ✓.nc", "100%+plus&x=y?z#", "~tilde:colon", "ünï/𝄞"] {
            let r = parse(&event(key).record(1, "c"));
            let encoded = r["s3"]["object"]["key"].as_str().unwrap();
            assert!(!encoded.contains(' '), "{encoded}");
            let decoded = urlencoding::decode(&encoded.replace('+', " ")).unwrap().into_owned();
            assert_eq!(decoded, key, "{encoded}");
        }
        assert_eq!(encode_key("a b+c%d"), "a+b%2Bc%25d");
    }

    #[test]
    fn names_round_trip() {
        for name in EventName::ALL {
            assert_eq!(EventName::parse(name.as_str()), Some(name));
            assert_eq!(EventName::parse(&format!("s3:{}", name.as_str())), Some(name));
        }
        assert_eq!(EventName::parse("ObjectCreated:*"), None);
    }

    #[test]
    fn events_survive_the_queue_serialization() {
        let e = event("x y");
        let back: Event = serde_json::from_slice(&serde_json::to_vec(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
