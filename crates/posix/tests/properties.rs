//! Property tests (proptest): key mapping never lets a key out of its bucket, and listing,
//! page by page with any page size, prefix and delimiter, equals a sorted model of the keys.
//! `PROPTEST_CASES` sets how many cases run (CI keeps the default; longer runs use more).

use std::collections::BTreeSet;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::key::ObjectPath;
use isthmus_store::{ListRequest, PutRequest, Store, StoreError, StoreExt};
use proptest::prelude::*;

/// The process acting for itself, as the embedded doors do.
fn cx() -> isthmus_store::RequestContext {
    isthmus_store::RequestContext::process()
}

fn key_strategy() -> impl Strategy<Value = String> {
    // Segments from a small alphabet with the awkward bytes: '-' and '.' sort before '/',
    // '0' and letters after it, plus a multi-byte character.
    let segment = proptest::string::string_regex("[a.0-]{1,3}|é").unwrap();
    proptest::collection::vec(segment, 1..4).prop_map(|segments| segments.join("/"))
}

proptest! {
    #[test]
    fn parsed_keys_never_leave_the_bucket(key in "\\PC{0,40}") {
        match ObjectPath::parse(&key) {
            Ok(path) => {
                for segment in path.segments() {
                    prop_assert!(!segment.is_empty() && *segment != "." && *segment != "..");
                    prop_assert!(!segment.contains('/') && !segment.contains('\0'));
                }
                prop_assert!(!path.relative().starts_with('/'));
                prop_assert_ne!(path.segments()[0], ".isthmus");
            }
            Err(StoreError::InvalidKey(_) | StoreError::KeyTooLong(_)) => {}
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }

    #[test]
    fn traversal_shapes_are_always_refused(prefix in "[a-z]{0,3}", dots in prop_oneof![Just(".."), Just(".")], suffix in "[a-z]{0,3}") {
        let key = format!("{prefix}/{dots}/{suffix}");
        prop_assert!(ObjectPath::parse(&key).is_err());
        let leading = format!("{dots}/{suffix}");
        prop_assert!(ObjectPath::parse(&leading).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(24), ..ProptestConfig::default() })]

    #[test]
    fn listing_equals_a_sorted_model(
        keys in proptest::collection::btree_set(key_strategy(), 1..25),
        page in 1usize..6,
        prefix in prop_oneof![Just(String::new()), Just("a".to_string()), Just("a/".to_string()), Just("é".to_string())],
        delimiter in prop_oneof![Just(None), Just(Some("/".to_string())), Just(Some("-".to_string()))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = PosixStore::open(dir.path(), StoreOptions { durability: isthmus_store::Durability::Relaxed, ..Default::default() }).unwrap();
        store.create_bucket(&cx(), "prop", &Default::default()).unwrap();
        // A key that is also a directory of another key cannot be stored: the model holds
        // exactly what was accepted.
        let mut stored = BTreeSet::new();
        for key in &keys {
            if store.put_bytes(&cx(), "prop", key, b"x", PutRequest::default()).is_ok() {
                stored.insert(key.clone());
            }
        }
        let mut expected: Vec<String> = Vec::new();
        for key in stored.iter().filter(|k| k.starts_with(&prefix)) {
            let item = match delimiter.as_deref().and_then(|d| key[prefix.len()..].find(d).map(|i| (d, i))) {
                Some((d, i)) => key[..prefix.len() + i + d.len()].to_string(),
                None => key.clone(),
            };
            if expected.last() != Some(&item) {
                expected.push(item);
            }
        }
        let mut listed = Vec::new();
        let mut marker = None;
        loop {
            let request = ListRequest { prefix: prefix.clone(), delimiter: delimiter.clone(), start_after: marker.clone(), max_keys: page };
            let p = store.list_objects(&cx(), "prop", &request).unwrap();
            prop_assert!(p.objects.len() + p.common_prefixes.len() <= page);
            let mut items: Vec<String> = p.objects.iter().map(|o| o.key.clone()).chain(p.common_prefixes.iter().cloned()).collect();
            items.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            listed.extend(items);
            if !p.is_truncated {
                break;
            }
            marker = p.next_marker;
        }
        prop_assert_eq!(listed, expected);
    }
}
