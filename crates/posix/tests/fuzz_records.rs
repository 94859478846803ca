//! Fuzz target for the metadata record an object's writer controls: the `user.isthmus`
//! attribute of a file (compact or JSON form, hand-written, truncated, with forged part sizes,
//! ETags, headers and ACLs). Property-based (proptest), as the project's other fuzz targets.
//! Whatever the attribute holds, HEAD and GET answer with the file's own size and bytes or a
//! typed error, never a panic; a part range always lies within the object; and no ACL the
//! gateway did not seal is reported.
//!
//! `cargo test --release -p isthmus-posix --test fuzz_records` runs 256 cases (CI);
//! `PROPTEST_CASES=100000 scripts/fuzz` runs it longer.

use std::io::Read;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{GetRequest, HeadRequest, PutRequest, RequestContext, Store, StoreExt};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

/// A JSON record, mostly well-formed, with hostile fields.
fn json_record(ino: u64, size: u64, mtime_ns: i128) -> impl Strategy<Value = Vec<u8>> {
    let etag = prop_oneof![
        Just("0123456789abcdef0123456789abcdef".to_string()),
        Just("x\"\r\nInjected: 1".to_string()),
        "[ -~]{0,40}",
        Just(String::new()),
    ];
    let part =
        (prop_oneof![0u64..16, Just(u64::MAX), any::<u64>()], prop_oneof![0u32..4, Just(u32::MAX), any::<u32>()]);
    let header = prop_oneof!["[ -~]{0,20}", Just("a\r\nb".to_string()), Just("\u{7f}".to_string())];
    let acl =
        prop_oneof![Just(None), Just(Some("public-read")), Just(Some("public-read-write")), Just(Some("nonsense"))];
    (etag, prop::collection::vec(part, 0..4), header.clone(), header, acl, any::<bool>()).prop_map(
        move |(etag, parts, content_type, user_value, acl, honest_identity)| {
            let mut meta = serde_json::json!({ "content_type": content_type, "user": { "k": user_value } });
            if let Some(acl) = acl {
                meta["acl"] = serde_json::json!(acl);
                meta["grants"] = serde_json::json!([{ "grantee": "mallory", "permission": "FULL_CONTROL" }]);
            }
            let identity = if honest_identity {
                serde_json::json!({ "ino": ino, "size": size, "mtime_ns": mtime_ns })
            } else {
                serde_json::json!({ "ino": ino ^ 1, "size": size, "mtime_ns": 0 })
            };
            serde_json::to_vec(&serde_json::json!({
                "etag": etag,
                "identity": identity,
                "parts": parts,
                "meta": meta,
                "acl_seal": "00112233445566778899aabbccddeeff",
            }))
            .unwrap()
        },
    )
}

fn attribute(ino: u64, size: u64, mtime_ns: i128) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json_record(ino, size, mtime_ns),
        prop::collection::vec(any::<u8>(), 0..200),
        // The compact form's marker followed by anything.
        prop::collection::vec(any::<u8>(), 0..80).prop_map(|mut b| {
            b.insert(0, 1);
            b
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_attribute_gives_the_files_bytes_or_a_typed_error(
        seed in any::<u64>(),
        part_number in prop_oneof![Just(None), (1u32..6).prop_map(Some), Just(Some(u32::MAX))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
        let cx = RequestContext::process();
        store.create_bucket(&cx, "fuzz", &Default::default()).unwrap();
        let body: Vec<u8> = (0..(seed % 4096) as usize).map(|i| (i as u64 ^ seed) as u8).collect();
        store.put_bytes(&cx, "fuzz", "k", &body, PutRequest::default()).unwrap();
        let path = dir.path().join("fuzz/k");
        let stat = std::fs::metadata(&path).unwrap();
        use std::os::unix::fs::MetadataExt;
        let mtime_ns = i128::from(stat.mtime()) * 1_000_000_000 + i128::from(stat.mtime_nsec());
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = attribute(stat.ino(), stat.size(), mtime_ns);
        for _ in 0..(seed % 3 + 1) {
            let bytes = strategy.new_tree(&mut runner).unwrap().current();
            rustix::fs::setxattr(&path, "user.isthmus", &bytes, rustix::fs::XattrFlags::empty()).unwrap();
            // Past the kept description of the object (a new record is read from the file).
            let head = store.head_object(&cx, "fuzz", "k", &HeadRequest::default());
            let info = match head {
                Ok(info) => info,
                Err(err) => { prop_assert!(!err.s3_code().is_empty()); continue; }
            };
            prop_assert_eq!(info.size, body.len() as u64);
            prop_assert!(info.meta.acl.is_none() && info.meta.grants.is_empty(), "an unsealed ACL was believed");
            prop_assert!(info.etag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
            for n in 1..=info.part_count().min(8) {
                if let Some((start, end)) = info.part_range(n) {
                    prop_assert!(start <= end && end < info.size);
                }
            }
            let request = GetRequest { part_number, ..Default::default() };
            match store.get_object(&cx, "fuzz", "k", &request) {
                Ok(mut response) => {
                    let mut read = Vec::new();
                    response.body.read_to_end(&mut read).unwrap();
                    let (start, end) = match response.range {
                        Some((start, end)) => (start as usize, end as usize + 1),
                        None => (0, body.len()),
                    };
                    prop_assert_eq!(&read[..], &body[start..end]);
                }
                Err(err) => prop_assert!(!err.s3_code().is_empty()),
            }
        }
    }
}
