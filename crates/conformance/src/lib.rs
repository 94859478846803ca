//! The behaviour every `Store` backend owes its doors, as checks generic over `dyn Store`:
//! keys, byte order and pagination of listings, atomic writes, conditions and ranges, copies,
//! multipart uploads, buckets and their errors. A backend runs all of them with
//! `store_conformance_tests!(|| Fixture::new(store, guard))`, one `#[test]` per check; present
//! backends do in `crates/conformance/tests/conformance.rs`, and a new backend adds a line there or
//! in its own tests. A test-support crate: backends take it as a dev-dependency.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use md5::Digest;

mod versions;
pub use versions::*;

use isthmus_store::BucketSettings;
use isthmus_store::{
    ByteRange, Conditions, CopyRequest, ETagMatch, GetRequest, HeadRequest, ListPartsRequest, ListRequest,
    ObjectChange, ObjectMeta, PartRequest, PutRequest, RequestContext, Store, StoreError, StoreExt,
};
use isthmus_store::{CompletedPart, ListUploadsRequest};

/// A store under test, and whatever must live as long as it (a temporary directory).
pub struct Fixture {
    pub store: Arc<dyn Store>,
    _guard: Box<dyn Any>,
}

impl Fixture {
    pub fn new(store: Arc<dyn Store>, guard: impl Any) -> Self {
        Self { store, _guard: Box::new(guard) }
    }
}

/// One `#[test]` per conformance check, each on a fresh store from `$make`; `unversioned:`
/// leaves out the versioning checks (for backends that refuse versioning).
#[macro_export]
macro_rules! store_conformance_tests {
    (unversioned: $make:expr) => {
        $crate::store_conformance_tests!(@each $make;
            keys_round_trip, invalid_keys_are_refused, missing_things_have_their_errors,
            metadata_and_tags_round_trip, object_acls_round_trip, listing_is_in_byte_order, listing_pages_and_delimiters,
            folder_objects_are_listed_under_their_own_prefix, writes_are_atomic, read_conditions_and_ranges, conditional_writes, copies,
            multipart_uploads, multipart_errors, bucket_lifecycle, bucket_tags, bucket_settings_are_written_whole);
    };
    ($make:expr) => {
        $crate::store_conformance_tests!(@each $make;
            keys_round_trip, invalid_keys_are_refused, missing_things_have_their_errors,
            metadata_and_tags_round_trip, object_acls_round_trip, listing_is_in_byte_order, listing_pages_and_delimiters,
            folder_objects_are_listed_under_their_own_prefix, writes_are_atomic, read_conditions_and_ranges, conditional_writes, copies,
            multipart_uploads, multipart_errors, bucket_lifecycle, bucket_tags, bucket_settings_are_written_whole,
            versions_are_kept_and_read_by_id, suspended_versioning_replaces_the_null_version,
            version_listing_pages_and_prefixes);
    };
    (@each $make:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                let fixture: $crate::Fixture = ($make)();
                $crate::$check(&*fixture.store);
            }
        )*
    };
}

fn cx() -> RequestContext {
    RequestContext::process()
}

fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(md5::Md5::digest(bytes))
}

/// A fresh bucket for one check.
fn bucket(store: &dyn Store, name: &str) -> String {
    store.create_bucket(&cx(), name, &Default::default()).unwrap();
    name.to_string()
}

fn put(store: &dyn Store, bucket: &str, key: &str, bytes: &[u8]) -> isthmus_store::ObjectInfo {
    store.put_bytes(&cx(), bucket, key, bytes, PutRequest::default()).unwrap()
}

fn read(store: &dyn Store, bucket: &str, key: &str, request: &GetRequest) -> Vec<u8> {
    let mut response = store.get_object(&cx(), bucket, key, request).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut response.body, &mut bytes).unwrap();
    bytes
}

fn expect_err<T: std::fmt::Debug>(result: Result<T, StoreError>, want: fn(&StoreError) -> bool, what: &str) {
    match result {
        Err(err) if want(&err) => {}
        other => panic!("{what}: unexpected {other:?}"),
    }
}

/// Every page of a listing, following the markers: (keys, common prefixes) in page order.
pub fn list_all(
    store: &dyn Store,
    bucket: &str,
    prefix: &str,
    delimiter: Option<&str>,
    page: usize,
) -> (Vec<String>, Vec<String>) {
    let (mut keys, mut prefixes) = (Vec::new(), Vec::new());
    let mut start_after = None;
    loop {
        let request = ListRequest {
            prefix: prefix.to_string(),
            delimiter: delimiter.map(str::to_string),
            start_after: start_after.clone(),
            max_keys: page,
        };
        let listed = store.list_objects(&cx(), bucket, &request).unwrap();
        assert!(listed.objects.len() + listed.common_prefixes.len() <= page, "a page holds at most max_keys");
        keys.extend(listed.objects.into_iter().map(|o| o.key));
        prefixes.extend(listed.common_prefixes);
        if !listed.is_truncated {
            return (keys, prefixes);
        }
        start_after = Some(listed.next_marker.expect("a truncated page names its marker"));
    }
}

/// Keys with spaces, signs, percent signs, non-ASCII and deep paths come back byte for byte;
/// a single-piece object's ETag is the MD5 of its bytes.
pub fn keys_round_trip(store: &dyn Store) {
    let b = bucket(store, "conf-keys");
    let keys = ["plain", "with space", "a+b=c&d", "100%25 sure", "ünïcødé/日本", "deep/er/and/deeper/leaf.bin", "~t"];
    for (i, key) in keys.iter().enumerate() {
        let bytes = format!("content of {key} #{i}").into_bytes();
        let info = put(store, &b, key, &bytes);
        assert_eq!(info.etag, md5_hex(&bytes), "{key}");
        assert_eq!(info.size, bytes.len() as u64);
        assert_eq!(read(store, &b, key, &GetRequest::default()), bytes, "{key}");
        let head = store.head_object(&cx(), &b, key, &HeadRequest::default()).unwrap();
        assert_eq!((head.key.as_str(), head.etag.as_str()), (*key, info.etag.as_str()));
    }
    // Empty objects exist, and overwriting replaces the whole object.
    assert_eq!(put(store, &b, "empty", b"").etag, md5_hex(b""));
    assert_eq!(read(store, &b, "empty", &GetRequest::default()), b"");
    put(store, &b, "plain", b"shorter");
    assert_eq!(read(store, &b, "plain", &GetRequest::default()), b"shorter");
}

/// An empty key and a key over 1,024 bytes are refused, and nothing appears.
pub fn invalid_keys_are_refused(store: &dyn Store) {
    let b = bucket(store, "conf-badkeys");
    assert!(store.put_bytes(&cx(), &b, "", b"x", PutRequest::default()).is_err(), "empty key");
    let long = "k".repeat(1025);
    expect_err(
        store.put_bytes(&cx(), &b, &long, b"x", PutRequest::default()),
        |e| matches!(e, StoreError::KeyTooLong(_)),
        "key of 1025 bytes",
    );
    assert_eq!(list_all(store, &b, "", None, 100), (vec![], vec![]));
}

/// NoSuchBucket, NoSuchKey, and a delete of a missing key that succeeds.
pub fn missing_things_have_their_errors(store: &dyn Store) {
    let nobucket = |e: &StoreError| matches!(e, StoreError::NoSuchBucket);
    let nokey = |e: &StoreError| matches!(e, StoreError::NoSuchKey);
    expect_err(store.head_bucket(&cx(), "conf-missing"), nobucket, "head_bucket");
    expect_err(store.bucket_facts(&cx(), "conf-missing"), nobucket, "bucket_facts");
    expect_err(store.get_object(&cx(), "conf-missing", "k", &GetRequest::default()).map(|r| r.info), nobucket, "get");
    expect_err(
        store.list_objects(&cx(), "conf-missing", &ListRequest { max_keys: 1, ..Default::default() }),
        nobucket,
        "list",
    );
    expect_err(store.put_bytes(&cx(), "conf-missing", "k", b"x", PutRequest::default()), nobucket, "put");
    let b = bucket(store, "conf-present");
    store.bucket_facts(&cx(), &b).unwrap();
    expect_err(store.update_object(&cx(), &b, "k", ObjectChange::Tags(BTreeMap::new())), nokey, "update_object");
    expect_err(store.get_object(&cx(), &b, "k", &GetRequest::default()).map(|r| r.info), nokey, "get");
    expect_err(store.head_object(&cx(), &b, "k", &HeadRequest::default()), nokey, "head");
    store.delete_object(&cx(), &b, "k", &Default::default()).unwrap();
    put(store, &b, "k", b"x");
    store.delete_object(&cx(), &b, "k", &Default::default()).unwrap();
    expect_err(store.head_object(&cx(), &b, "k", &HeadRequest::default()), nokey, "head after delete");
}

/// System and user metadata come back as written; tags are replaced and removed.
pub fn metadata_and_tags_round_trip(store: &dyn Store) {
    let b = bucket(store, "conf-meta");
    let meta = ObjectMeta {
        content_type: Some("application/x-netcdf".into()),
        cache_control: Some("no-cache".into()),
        user: BTreeMap::from([("experiment".into(), "run 42".into()), ("site".into(), "é".into())]),
        ..Default::default()
    };
    store.put_bytes(&cx(), &b, "k", b"data", PutRequest { meta: meta.clone(), ..Default::default() }).unwrap();
    let head = store.head_object(&cx(), &b, "k", &HeadRequest::default()).unwrap();
    assert_eq!(
        (head.meta.content_type, head.meta.cache_control, head.meta.user),
        (meta.content_type, meta.cache_control, meta.user)
    );
    let tags = BTreeMap::from([("project".to_string(), "climate".to_string())]);
    store.update_object(&cx(), &b, "k", ObjectChange::Tags(tags.clone())).unwrap();
    assert_eq!(store.head_object(&cx(), &b, "k", &HeadRequest::default()).unwrap().meta.tags, tags);
    let too_many: BTreeMap<String, String> = (0..11).map(|i| (format!("k{i}"), String::new())).collect();
    expect_err(
        store.update_object(&cx(), &b, "k", ObjectChange::Tags(too_many)),
        |e| matches!(e, StoreError::InvalidTag(_)),
        "11 tags",
    );
    assert_eq!(store.head_object(&cx(), &b, "k", &HeadRequest::default()).unwrap().meta.tags, tags);
    store.update_object(&cx(), &b, "k", ObjectChange::Tags(BTreeMap::new())).unwrap();
    assert!(store.head_object(&cx(), &b, "k", &HeadRequest::default()).unwrap().meta.tags.is_empty());
    assert_eq!(read(store, &b, "k", &GetRequest::default()), b"data", "tags leave the bytes alone");
}

/// An object's ACL is replaced in place (tags, metadata and bytes stay), on a plain object and a
/// folder object alike; a private ACL without grants removes it.
pub fn object_acls_round_trip(store: &dyn Store) {
    use isthmus_store::{Acl, CannedAcl, Grant, GrantPermission};
    let b = bucket(store, "conf-object-acl");
    let tags = BTreeMap::from([("project".to_string(), "climate".to_string())]);
    let meta = ObjectMeta { tags: tags.clone(), ..Default::default() };
    for key in ["k", "folder/"] {
        let body: &[u8] = if key.ends_with('/') { b"" } else { b"data" };
        let info = store.put_bytes(&cx(), &b, key, body, PutRequest { meta: meta.clone(), ..Default::default() });
        let etag = info.unwrap().etag;
        let acl = Acl {
            canned: CannedAcl::PublicRead,
            grants: vec![Grant { grantee: "alice".into(), permission: GrantPermission::Write }],
        };
        store.update_object(&cx(), &b, key, ObjectChange::Acl(acl.clone())).unwrap();
        let head = store.head_object(&cx(), &b, key, &HeadRequest::default()).unwrap();
        assert_eq!((head.meta.object_acl(), &head.meta.tags, head.etag.as_str()), (acl, &tags, etag.as_str()), "{key}");
        store.update_object(&cx(), &b, key, ObjectChange::Acl(Acl::canned(CannedAcl::Private))).unwrap();
        let head = store.head_object(&cx(), &b, key, &HeadRequest::default()).unwrap();
        assert_eq!((head.meta.acl, head.meta.grants.len()), (None, 0), "{key}: a private ACL is none");
        assert_eq!(read(store, &b, key, &GetRequest::default()), body, "{key}: the ACL leaves the bytes alone");
    }
}

/// Keys whose order differs between "directory first" and byte order: S3 lists in UTF-8 byte
/// order ('-' < '.' < '/' < '0', '~' < 'é'), whatever the backend stores them as.
const ORDER_KEYS: [&str; 14] =
    ["%41", "A", "a b", "a+b", "a-b", "a.b", "a/b/c", "a/b0", "a/c", "a0", "aa", "z/ü", "~x", "é"];

pub fn listing_is_in_byte_order(store: &dyn Store) {
    let b = bucket(store, "conf-order");
    for key in ORDER_KEYS.iter().rev() {
        put(store, &b, key, key.as_bytes());
    }
    let mut sorted = ORDER_KEYS.map(String::from).to_vec();
    sorted.sort();
    let (keys, prefixes) = list_all(store, &b, "", None, 1000);
    assert_eq!(keys, sorted);
    assert!(prefixes.is_empty());
    let listed = store.list_objects(&cx(), &b, &ListRequest { max_keys: 1000, ..Default::default() }).unwrap();
    let sizes: Vec<u64> = listed.objects.iter().map(|o| o.size).collect();
    assert_eq!(sizes, sorted.iter().map(|k| k.len() as u64).collect::<Vec<_>>(), "listings carry sizes");
    assert!(listed.objects.iter().all(|o| o.etag == md5_hex(o.key.as_bytes())), "and ETags");
}

pub fn listing_pages_and_delimiters(store: &dyn Store) {
    let b = bucket(store, "conf-pages");
    for key in ORDER_KEYS {
        put(store, &b, key, b"x");
    }
    let whole = list_all(store, &b, "", None, 1000);
    for page in [1, 2, 3, 7] {
        assert_eq!(list_all(store, &b, "", None, page), whole, "pages of {page}");
    }
    let top = list_all(store, &b, "", Some("/"), 1000);
    assert_eq!(top.1, ["a/", "z/"]);
    assert_eq!(top.0, ["%41", "A", "a b", "a+b", "a-b", "a.b", "a0", "aa", "~x", "é"]);
    for page in [1, 2, 5] {
        assert_eq!(list_all(store, &b, "", Some("/"), page), top, "delimited pages of {page}");
    }
    assert_eq!(list_all(store, &b, "a/", Some("/"), 1000), (vec!["a/b0".into(), "a/c".into()], vec!["a/b/".into()]));
    assert_eq!(list_all(store, &b, "a/b", None, 1000).0, ["a/b/c", "a/b0"]);
    assert_eq!(list_all(store, &b, "nothing", None, 1000), (vec![], vec![]));
    // Any delimiter rolls up on the whole key, across directories.
    let (plain, dashed) = list_all(store, &b, "", Some("-"), 2);
    assert_eq!(dashed, ["a-"]);
    assert!(!plain.iter().any(|k| k.contains('-')) && plain.len() == ORDER_KEYS.len() - 1);
    let after = ListRequest { start_after: Some("a0".into()), max_keys: 1000, ..Default::default() };
    let keys: Vec<String> = store.list_objects(&cx(), &b, &after).unwrap().objects.into_iter().map(|o| o.key).collect();
    assert_eq!(keys, ["aa", "z/ü", "~x", "é"]);
}

/// A key equal to the prefix is listed (S3 returns every key that begins with the prefix): the
/// folder objects consoles and pyarrow make, empty or with children.
pub fn folder_objects_are_listed_under_their_own_prefix(store: &dyn Store) {
    let b = bucket(store, "conf-folders");
    for key in ["empty/dir/", "full/", "full/child", "fullness"] {
        put(store, &b, key, b"");
    }
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(list_all(store, &b, "empty/dir/", Some("/"), 1000), (strings(&["empty/dir/"]), vec![]));
    assert_eq!(list_all(store, &b, "empty/dir/", None, 1000), (strings(&["empty/dir/"]), vec![]));
    assert_eq!(list_all(store, &b, "full/", Some("/"), 1000), (strings(&["full/", "full/child"]), vec![]));
    assert_eq!(list_all(store, &b, "full/", None, 1), (strings(&["full/", "full/child"]), vec![]));
    assert_eq!(list_all(store, &b, "full", Some("/"), 1000), (strings(&["fullness"]), strings(&["full/"])));
    let after =
        ListRequest { prefix: "full/".into(), start_after: Some("full/".into()), max_keys: 10, ..Default::default() };
    let keys: Vec<String> = store.list_objects(&cx(), &b, &after).unwrap().objects.into_iter().map(|o| o.key).collect();
    assert_eq!(keys, ["full/child"]);
}

/// Nothing of a write is visible before commit; a dropped writer leaves the old object whole
/// and nothing else behind.
pub fn writes_are_atomic(store: &dyn Store) {
    let b = bucket(store, "conf-atomic");
    put(store, &b, "k", b"old");
    let mut writer = store.put_object(&cx(), &b, "k", PutRequest::default()).unwrap();
    writer.write_all(b"the new content").unwrap();
    assert_eq!(read(store, &b, "k", &GetRequest::default()), b"old", "before commit");
    let mut fresh = store.put_object(&cx(), &b, "fresh", PutRequest::default()).unwrap();
    fresh.write_all(b"abandoned").unwrap();
    expect_err(
        store.head_object(&cx(), &b, "fresh", &HeadRequest::default()),
        |e| matches!(e, StoreError::NoSuchKey),
        "uncommitted",
    );
    drop(fresh);
    assert_eq!(list_all(store, &b, "", None, 100).0, ["k"], "a dropped writer leaves nothing");
    let info = writer.commit().unwrap();
    assert_eq!(info.etag, md5_hex(b"the new content"));
    assert_eq!(read(store, &b, "k", &GetRequest::default()), b"the new content");
}

pub fn read_conditions_and_ranges(store: &dyn Store) {
    let b = bucket(store, "conf-cond");
    let etag = put(store, &b, "r", b"0123456789").etag;
    let range = |range| GetRequest { range: Some(range), ..Default::default() };
    assert_eq!(read(store, &b, "r", &range(ByteRange::FromTo { first: 2, last: Some(4) })), b"234");
    assert_eq!(read(store, &b, "r", &range(ByteRange::FromTo { first: 8, last: Some(100) })), b"89");
    assert_eq!(read(store, &b, "r", &range(ByteRange::Suffix(3))), b"789");
    let served = store.get_object(&cx(), &b, "r", &range(ByteRange::FromTo { first: 8, last: None })).unwrap();
    assert_eq!((served.range, served.info.size), (Some((8, 9)), 10));
    expect_err(
        store.get_object(&cx(), &b, "r", &range(ByteRange::FromTo { first: 10, last: None })).map(|r| r.info),
        |e| matches!(e, StoreError::InvalidRange { size: 10 }),
        "range past the end",
    );
    let when =
        |conditions: Conditions| store.head_object(&cx(), &b, "r", &HeadRequest { conditions, ..Default::default() });
    let tags = |t: &str| Some(ETagMatch::Tags(vec![format!("\"{t}\"")]));
    when(Conditions { if_match: tags(&etag), ..Default::default() }).unwrap();
    expect_err(
        when(Conditions { if_match: tags("other"), ..Default::default() }),
        |e| matches!(e, StoreError::PreconditionFailed),
        "If-Match",
    );
    expect_err(
        when(Conditions { if_none_match: tags(&etag), ..Default::default() }),
        |e| matches!(e, StoreError::NotModified { .. }),
        "If-None-Match",
    );
    let get =
        GetRequest { conditions: Conditions { if_match: tags("other"), ..Default::default() }, ..Default::default() };
    expect_err(
        store.get_object(&cx(), &b, "r", &get).map(|r| r.info),
        |e| matches!(e, StoreError::PreconditionFailed),
        "GET If-Match",
    );
}

pub fn conditional_writes(store: &dyn Store) {
    let b = bucket(store, "conf-condput");
    let create_only = || PutRequest { if_none_match: Some(ETagMatch::Any), ..Default::default() };
    store.put_bytes(&cx(), &b, "once", b"first", create_only()).unwrap();
    expect_err(
        store.put_bytes(&cx(), &b, "once", b"second", create_only()),
        |e| matches!(e, StoreError::PreconditionFailed),
        "If-None-Match: *",
    );
    let if_match = |etag: &str| PutRequest { if_match: Some(ETagMatch::Tags(vec![etag.into()])), ..Default::default() };
    expect_err(
        store.put_bytes(&cx(), &b, "once", b"x", if_match("nope")),
        |e| matches!(e, StoreError::PreconditionFailed),
        "If-Match",
    );
    assert_eq!(read(store, &b, "once", &GetRequest::default()), b"first");
    expect_err(
        store.put_bytes(&cx(), &b, "never", b"x", if_match("nope")),
        |e| matches!(e, StoreError::NoSuchKey),
        "If-Match, no object",
    );
    let any = PutRequest { if_match: Some(ETagMatch::Any), ..Default::default() };
    expect_err(
        store.put_bytes(&cx(), &b, "never", b"x", any),
        |e| matches!(e, StoreError::NoSuchKey),
        "If-Match: *, no object",
    );
    store.put_bytes(&cx(), &b, "once", b"third", if_match(&md5_hex(b"first"))).unwrap();
    assert_eq!(read(store, &b, "once", &GetRequest::default()), b"third");
}

pub fn copies(store: &dyn Store) {
    let b = bucket(store, "conf-copy");
    let meta = ObjectMeta {
        content_type: Some("text/csv".into()),
        user: BTreeMap::from([("a".into(), "1".into())]),
        ..Default::default()
    };
    let source = store
        .put_bytes(&cx(), &b, "src", b"a,b\n1,2\n", PutRequest { meta: meta.clone(), ..Default::default() })
        .unwrap();
    let kept = store.copy_object(&cx(), (&b, "src"), (&b, "dir/kept"), &CopyRequest::default()).unwrap();
    assert_eq!(
        (kept.size, kept.meta.content_type.clone(), kept.meta.user.clone()),
        (source.size, meta.content_type, meta.user)
    );
    assert_eq!(read(store, &b, "dir/kept", &GetRequest::default()), b"a,b\n1,2\n");
    let replaced_meta = ObjectMeta { content_type: Some("text/plain".into()), ..Default::default() };
    let replace = CopyRequest { replace_meta: Some(replaced_meta), ..Default::default() };
    let replaced = store.copy_object(&cx(), (&b, "src"), (&b, "replaced"), &replace).unwrap();
    assert_eq!(replaced.meta.content_type.as_deref(), Some("text/plain"));
    assert!(replaced.meta.user.is_empty());
    // A copy onto itself with new metadata keeps the bytes.
    store.copy_object(&cx(), (&b, "src"), (&b, "src"), &replace).unwrap();
    assert_eq!(read(store, &b, "src", &GetRequest::default()), b"a,b\n1,2\n");
    expect_err(
        store.copy_object(&cx(), (&b, "none"), (&b, "x"), &CopyRequest::default()),
        |e| matches!(e, StoreError::NoSuchKey),
        "missing source",
    );
    let conditional = CopyRequest {
        source_conditions: Conditions { if_match: Some(ETagMatch::Tags(vec!["other".into()])), ..Default::default() },
        ..Default::default()
    };
    expect_err(
        store.copy_object(&cx(), (&b, "src"), (&b, "y"), &conditional),
        |e| matches!(e, StoreError::PreconditionFailed),
        "source If-Match",
    );
    assert_eq!(list_all(store, &b, "", None, 100).0, ["dir/kept", "replaced", "src"]);
}

fn upload_part(store: &dyn Store, b: &str, key: &str, id: &str, part_number: u32, bytes: &[u8]) -> CompletedPart {
    let mut writer = store.upload_part(&cx(), b, key, id, &PartRequest { part_number, ..Default::default() }).unwrap();
    writer.write_all(bytes).unwrap();
    CompletedPart { part_number, etag: format!("\"{}\"", writer.commit().unwrap().etag), checksum: None }
}

/// The S3 multipart ETag: MD5 of the parts' binary MD5s, then "-N".
fn multipart_etag(parts: &[&[u8]]) -> String {
    let mut all = md5::Md5::new();
    for part in parts {
        all.update(md5::Md5::digest(part));
    }
    format!("{}-{}", hex::encode(all.finalize()), parts.len())
}

pub fn multipart_uploads(store: &dyn Store) {
    let b = bucket(store, "conf-mpu");
    let meta = ObjectMeta { content_type: Some("application/x-hdf5".into()), ..Default::default() };
    let id = store.create_multipart_upload(&cx(), &b, "out/big.h5", PutRequest { meta, ..Default::default() }).unwrap();
    let uploads = store
        .list_multipart_uploads(&cx(), &b, &ListUploadsRequest { max_uploads: 100, ..Default::default() })
        .unwrap();
    assert_eq!(
        uploads.uploads.iter().map(|u| (u.key.as_str(), u.upload_id.as_str())).collect::<Vec<_>>(),
        [("out/big.h5", id.as_str())]
    );
    let first = vec![7u8; 5 << 20];
    let p1 = upload_part(store, &b, "out/big.h5", &id, 1, &first);
    upload_part(store, &b, "out/big.h5", &id, 2, b"first try, replaced");
    let p2 = upload_part(store, &b, "out/big.h5", &id, 2, b"tail");
    let parts =
        store.list_parts(&cx(), &b, "out/big.h5", &id, &ListPartsRequest { after_part: 0, max_parts: 1000 }).unwrap();
    assert_eq!(parts.parts.iter().map(|p| (p.part_number, p.size)).collect::<Vec<_>>(), [(1, 5 << 20), (2, 4)]);
    let page =
        store.list_parts(&cx(), &b, "out/big.h5", &id, &ListPartsRequest { after_part: 1, max_parts: 1 }).unwrap();
    assert_eq!(page.parts.iter().map(|p| p.part_number).collect::<Vec<_>>(), [2]);
    expect_err(
        store.head_object(&cx(), &b, "out/big.h5", &HeadRequest::default()),
        |e| matches!(e, StoreError::NoSuchKey),
        "before completion",
    );
    let completed = [p1, p2];
    let info =
        store.complete_multipart_upload(&cx(), &b, "out/big.h5", &id, &completed, PutRequest::default()).unwrap();
    // A Complete retried after a lost response gets the completed object, as S3 answers.
    let retried =
        store.complete_multipart_upload(&cx(), &b, "out/big.h5", &id, &completed, PutRequest::default()).unwrap();
    assert_eq!((retried.etag.as_str(), retried.size), (info.etag.as_str(), info.size));
    assert_eq!(info.etag, multipart_etag(&[&first, b"tail"]));
    assert_eq!(
        (info.size, info.part_count(), info.meta.content_type.as_deref()),
        ((5 << 20) + 4, 2, Some("application/x-hdf5"))
    );
    let tail = GetRequest { part_number: Some(2), ..Default::default() };
    assert_eq!(read(store, &b, "out/big.h5", &tail), b"tail");
    let whole = read(store, &b, "out/big.h5", &GetRequest::default());
    assert!(whole.len() == (5 << 20) + 4 && whole.ends_with(b"tail") && whole[..5 << 20] == first[..]);
    let uploads = store
        .list_multipart_uploads(&cx(), &b, &ListUploadsRequest { max_uploads: 100, ..Default::default() })
        .unwrap();
    assert!(uploads.uploads.is_empty(), "a completed upload is gone");
    expect_err(
        store.list_parts(&cx(), &b, "out/big.h5", &id, &ListPartsRequest { after_part: 0, max_parts: 10 }),
        |e| matches!(e, StoreError::NoSuchUpload),
        "completed",
    );
    assert_eq!(list_all(store, &b, "", None, 100).0, ["out/big.h5"], "parts are never listed as objects");
}

pub fn multipart_errors(store: &dyn Store) {
    let b = bucket(store, "conf-mpu-errors");
    let id = store.create_multipart_upload(&cx(), &b, "k", PutRequest::default()).unwrap();
    let small = upload_part(store, &b, "k", &id, 1, b"too small for a first part");
    let last = upload_part(store, &b, "k", &id, 2, b"last");
    let complete =
        |parts: &[CompletedPart]| store.complete_multipart_upload(&cx(), &b, "k", &id, parts, PutRequest::default());
    expect_err(complete(&[small.clone(), last.clone()]), |e| matches!(e, StoreError::EntityTooSmall), "5 MiB minimum");
    expect_err(complete(&[last.clone(), small.clone()]), |e| matches!(e, StoreError::InvalidPartOrder), "order");
    let wrong = CompletedPart { etag: format!("\"{}\"", md5_hex(b"something else")), ..small.clone() };
    expect_err(complete(&[wrong]), |e| matches!(e, StoreError::InvalidPart(1)), "wrong ETag");
    expect_err(
        complete(&[CompletedPart { part_number: 3, ..last }]),
        |e| matches!(e, StoreError::InvalidPart(3)),
        "missing part",
    );
    // A failed completion leaves the upload usable: one part alone is a valid object.
    let info = complete(&[small]).unwrap();
    assert_eq!(read(store, &b, "k", &GetRequest::default()), b"too small for a first part");
    assert!(info.etag.ends_with("-1"));
    let aborted = store.create_multipart_upload(&cx(), &b, "gone", PutRequest::default()).unwrap();
    upload_part(store, &b, "gone", &aborted, 1, b"x");
    store.abort_multipart_upload(&cx(), &b, "gone", &aborted).unwrap();
    let no_upload = |e: &StoreError| matches!(e, StoreError::NoSuchUpload);
    expect_err(
        store
            .upload_part(&cx(), &b, "gone", &aborted, &PartRequest { part_number: 1, ..Default::default() })
            .map(|_| ()),
        no_upload,
        "part of an aborted upload",
    );
    expect_err(
        store
            .upload_part(&cx(), &b, "k", "no-such-upload", &PartRequest { part_number: 1, ..Default::default() })
            .map(|_| ()),
        no_upload,
        "unknown id",
    );
    assert_eq!(list_all(store, &b, "", None, 100).0, ["k"]);
}

pub fn bucket_lifecycle(store: &dyn Store) {
    let name = bucket(store, "conf-life");
    assert!(store.list_buckets(&cx()).unwrap().iter().any(|b| b.name == name));
    expect_err(
        store.create_bucket(&cx(), &name, &Default::default()),
        |e| matches!(e, StoreError::BucketAlreadyExists | StoreError::BucketAlreadyOwnedByYou),
        "create twice",
    );
    for bad in ["ab", "Upper", "under_score", "-dash", "a..b", "192.168.1.1"] {
        expect_err(
            store.create_bucket(&cx(), bad, &Default::default()),
            |e| matches!(e, StoreError::InvalidBucketName(_)),
            bad,
        );
    }
    put(store, &name, "dir/k", b"x");
    expect_err(store.delete_bucket(&cx(), &name), |e| matches!(e, StoreError::BucketNotEmpty), "non-empty");
    let id = store.create_multipart_upload(&cx(), &name, "pending", PutRequest::default()).unwrap();
    store.delete_object(&cx(), &name, "dir/k", &Default::default()).unwrap();
    // Unfinished uploads do not keep a bucket alive (as in S3): they go with it.
    store.delete_bucket(&cx(), &name).unwrap();
    expect_err(store.head_bucket(&cx(), &name), |e| matches!(e, StoreError::NoSuchBucket), "deleted");
    assert!(!store.list_buckets(&cx()).unwrap().iter().any(|b| b.name == name));
    store.create_bucket(&cx(), &name, &Default::default()).unwrap();
    expect_err(
        store.list_parts(&cx(), &name, "pending", &id, &ListPartsRequest { after_part: 0, max_parts: 1 }),
        |e| matches!(e, StoreError::NoSuchUpload),
        "upload of the old bucket",
    );
    assert_eq!(list_all(store, &name, "", None, 10), (vec![], vec![]), "a recreated bucket is empty");
}

pub fn bucket_tags(store: &dyn Store) {
    let b = bucket(store, "conf-bucket-tags");
    assert!(store.bucket_tags(&cx(), &b).unwrap().is_empty());
    let tags = BTreeMap::from([("project".to_string(), "climate".to_string()), ("cost-centre".into(), "42".into())]);
    store.set_bucket_tags(&cx(), &b, tags.clone()).unwrap();
    assert_eq!(store.bucket_tags(&cx(), &b).unwrap(), tags);
    let too_many: BTreeMap<String, String> = (0..51).map(|i| (format!("k{i}"), String::new())).collect();
    expect_err(store.set_bucket_tags(&cx(), &b, too_many), |e| matches!(e, StoreError::InvalidTag(_)), "51 tags");
    assert_eq!(store.bucket_tags(&cx(), &b).unwrap(), tags, "a refused set changes nothing");
    store.set_bucket_tags(&cx(), &b, BTreeMap::new()).unwrap();
    assert!(store.bucket_tags(&cx(), &b).unwrap().is_empty());
    expect_err(store.bucket_tags(&cx(), "conf-no-bucket"), |e| matches!(e, StoreError::NoSuchBucket), "missing bucket");
    assert_eq!(list_all(store, &b, "", None, 10), (vec![], vec![]), "settings are never objects");
}

/// A bucket's settings are one value with a version: a write names the version it read and
/// fails (ConfigConflict, nothing changed) when another write landed since; concurrent changes
/// of different settings, each read-modify-write, all land.
pub fn bucket_settings_are_written_whole(store: &dyn Store) {
    let b = bucket(store, "conf-bucket-settings");
    let read = store.bucket_config(&cx(), &b).unwrap();
    assert!(read.version.is_some(), "settings are read with their version");
    let mut changed = read.clone();
    changed.tags.insert("project".into(), "climate".into());
    changed.acl = isthmus_store::Acl::canned(isthmus_store::CannedAcl::PublicRead);
    store.set_bucket_config(&cx(), &b, &changed).unwrap();
    let now = store.bucket_config(&cx(), &b).unwrap();
    assert_eq!(now.tags, changed.tags);
    assert_eq!(now.acl, changed.acl);
    assert_eq!(now.owner, read.owner, "what the write did not change stays");
    assert_ne!(now.version, read.version, "a change gives a new version");

    let mut stale = read.clone();
    stale.tags.insert("stale".into(), "write".into());
    expect_err(
        store.set_bucket_config(&cx(), &b, &stale),
        |e| matches!(e, StoreError::ConfigConflict),
        "a write of settings read before another write",
    );
    assert_eq!(store.bucket_config(&cx(), &b).unwrap(), now, "a refused write changes nothing");

    // Three administrators at once, each adding its own tags one change at a time, one of them
    // also changing the ACL and the public access block: nothing is lost.
    std::thread::scope(|scope| {
        for writer in 0..3 {
            let b = &b;
            scope.spawn(move || {
                for i in 0..5 {
                    store
                        .update_bucket_config(&cx(), b, &mut |c| {
                            c.tags.insert(format!("w{writer}-{i}"), i.to_string());
                            if writer == 0 {
                                c.public_access_block = Some(isthmus_store::PublicAccessBlock {
                                    block_public_policy: true,
                                    ..Default::default()
                                });
                                c.acl = isthmus_store::Acl::canned(isthmus_store::CannedAcl::AuthenticatedRead);
                            }
                            Ok(())
                        })
                        .unwrap();
                }
            });
        }
    });
    let end = store.bucket_config(&cx(), &b).unwrap();
    assert_eq!(end.tags.len(), 16, "every writer's tags and the first one: {:?}", end.tags);
    assert_eq!(end.acl.canned, isthmus_store::CannedAcl::AuthenticatedRead);
    assert!(end.public_access_block.is_some_and(|p| p.block_public_policy));
    expect_err(
        store.bucket_config(&cx(), "conf-no-bucket"),
        |e| matches!(e, StoreError::NoSuchBucket),
        "missing bucket",
    );
}
