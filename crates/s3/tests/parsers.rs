//! Property tests of everything that parses client input, through the real service in-process
//! (no network, no signature, so the parsers are reached directly): XML bodies, aws-chunked
//! framing, ranges, dates, query parameters, keys and bucket names. No input may crash the
//! server or produce an internal error; each gets a 2xx, 3xx or 4xx answer.

use std::sync::Arc;

use bytes::Bytes;
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_s3::{Gateway, IoPolicy, UserDirectory};
use isthmus_store::{PutRequest, Store, StoreExt};
use proptest::prelude::*;
use s3s::service::S3ServiceBuilder;

struct Harness {
    _dir: tempfile::TempDir,
    service: s3s::service::S3Service,
    runtime: tokio::runtime::Runtime,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(PosixStore::open(dir.path(), StoreOptions::default()).unwrap());
        store.create_bucket(&isthmus_store::RequestContext::process(), "fuzz", &Default::default()).unwrap();
        store
            .put_bytes(&isthmus_store::RequestContext::process(), "fuzz", "obj", b"0123456789", PutRequest::default())
            .unwrap();
        let gateway = Gateway::new(
            isthmus_s3::Runner::new(store, IoPolicy::POOL),
            isthmus_s3::Principals::of_users(UserDirectory::new("", [])),
        );
        let service = S3ServiceBuilder::new(gateway).build();
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        Self { _dir: dir, service, runtime }
    }

    /// Sends a request; returns the status, or 400 if it could not even be built.
    fn status(&self, method: &str, uri: &str, headers: &[(&str, String)], body: Vec<u8>) -> u16 {
        let mut builder = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            builder = builder.header(*k, v);
        }
        let Ok(req) = builder.body(s3s::Body::from(Bytes::from(body))) else { return 400 };
        let result = self.runtime.block_on(self.service.call(req));
        match result {
            Ok(resp) => resp.status().as_u16(),
            Err(_) => 400,
        }
    }
}

fn harness() -> &'static Harness {
    static H: std::sync::OnceLock<Harness> = std::sync::OnceLock::new();
    H.get_or_init(Harness::new)
}

fn not_internal(status: u16) -> bool {
    status < 500 || status == 501
}

fn xmlish() -> impl Strategy<Value = String> {
    let tag = prop_oneof![
        Just("Delete"),
        Just("Object"),
        Just("Key"),
        Just("Quiet"),
        Just("CompleteMultipartUpload"),
        Just("Part"),
        Just("PartNumber"),
        Just("ETag"),
        Just("Tagging"),
        Just("TagSet"),
        Just("Tag"),
        Just("Value")
    ];
    let atom = prop_oneof![
        tag.clone().prop_map(|t| format!("<{t}>")),
        tag.prop_map(|t| format!("</{t}>")),
        "[a-z0-9 .&;<>\"/-]{0,12}",
        Just("<?xml version=\"1.0\"?>".to_string())
    ];
    proptest::collection::vec(atom, 0..30).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64), ..ProptestConfig::default() })]

    #[test]
    fn xml_bodies(body in xmlish()) {
        let h = harness();
        let md5 = base64_md5(body.as_bytes());
        prop_assert!(not_internal(h.status("POST", "/fuzz?delete", &[("content-md5", md5)], body.clone().into_bytes())));
        prop_assert!(not_internal(h.status("POST", "/fuzz/obj?uploadId=00000000000000000000000000000000", &[], body.clone().into_bytes())));
        prop_assert!(not_internal(h.status("PUT", "/fuzz/obj?tagging", &[], body.into_bytes())));
    }

    #[test]
    fn aws_chunked_bodies(body in proptest::collection::vec(prop_oneof![Just(b"\r\n".to_vec()), Just(b";chunk-signature=".to_vec()), Just(b"0".to_vec()), "[0-9a-f]{1,4}".prop_map(String::into_bytes), proptest::collection::vec(any::<u8>(), 0..8), Just(b"x-amz-checksum-crc32:AAAAAA==".to_vec())], 0..20), declared in 0usize..200) {
        let body: Vec<u8> = body.concat();
        let headers = [
            ("content-encoding", "aws-chunked".to_string()),
            ("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER".to_string()),
            ("x-amz-decoded-content-length", declared.to_string()),
            ("x-amz-trailer", "x-amz-checksum-crc32".to_string()),
            ("content-length", body.len().to_string()),
        ];
        prop_assert!(not_internal(harness().status("PUT", "/fuzz/chunked", &headers, body)));
    }

    #[test]
    fn headers_and_queries(range in "[a-z=0-9,-]{0,20}", date in "[A-Za-z0-9 ,:]{0,30}", max_keys in "-?[0-9a-z]{0,6}", token in "[A-Za-z0-9_=*-]{0,16}", part in "-?[0-9]{0,6}") {
        let h = harness();
        prop_assert!(not_internal(h.status("GET", "/fuzz/obj", &[("range", range)], Vec::new())));
        prop_assert!(not_internal(h.status("GET", "/fuzz/obj", &[("if-modified-since", date.clone())], Vec::new())));
        prop_assert!(not_internal(h.status("HEAD", "/fuzz/obj", &[("if-unmodified-since", date)], Vec::new())));
        let list = format!("/fuzz?list-type=2&max-keys={max_keys}&continuation-token={token}");
        prop_assert!(not_internal(h.status("GET", &list, &[], Vec::new())));
        let part = format!("/fuzz/obj?partNumber={part}");
        prop_assert!(not_internal(h.status("GET", &part, &[], Vec::new())));
    }

    #[test]
    fn keys_and_bucket_names(key in "[a-zA-Z0-9%./_-]{0,40}", bucket in "[a-zA-Z0-9.-]{0,12}") {
        let h = harness();
        let object = format!("/fuzz/{key}");
        let bucket = format!("/{bucket}");
        prop_assert!(not_internal(h.status("PUT", &object, &[], b"data".to_vec())));
        prop_assert!(not_internal(h.status("GET", &object, &[], Vec::new())));
        prop_assert!(not_internal(h.status("PUT", &bucket, &[], Vec::new())));
        prop_assert!(not_internal(h.status("DELETE", &object, &[], Vec::new())));
    }
}

fn base64_md5(bytes: &[u8]) -> String {
    use base64::Engine;
    use md5::Digest;
    base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(bytes))
}

#[test]
fn the_harness_reaches_the_gateway() {
    let h = harness();
    assert_eq!(h.status("PUT", "/fuzz/sanity", &[("content-length", "4".into())], b"data".to_vec()), 200);
    assert_eq!(h.status("GET", "/fuzz/sanity", &[], Vec::new()), 200);
    assert_eq!(h.status("GET", "/fuzz/obj", &[("range", "bytes=2-3".into())], Vec::new()), 206);
    assert_eq!(h.status("GET", "/fuzz/obj", &[("range", "bytes=20-".into())], Vec::new()), 416);
    assert_eq!(
        h.status("POST", "/fuzz?delete", &[], b"<Delete><Object><Key>sanity</Key></Object></Delete>".to_vec()),
        200
    );
    assert_eq!(h.status("GET", "/fuzz/sanity", &[], Vec::new()), 404);
}
