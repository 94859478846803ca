//! The authorization layer every door shares: owners, grants, root and the process itself,
//! checked on a real PosixStore in a temporary directory.

use std::sync::Arc;

use isthmus_access::{Authorized, BucketGrants};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::BucketSettings;
use isthmus_store::{
    CopyRequest, GetRequest, ListRequest, MultipartStore, ObjectChange, PutRequest, RequestContext, Store, StoreError,
    StoreExt,
};

fn user(name: &str) -> RequestContext {
    RequestContext::user(name, false)
}

fn root() -> RequestContext {
    RequestContext::user("admin", true)
}

/// Alice owns "alices"; bob is granted "shared-*"; "posix-made" was made with mkdir.
fn store() -> (tempfile::TempDir, Authorized<PosixStore>) {
    let dir = tempfile::tempdir().unwrap();
    let posix = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
    let store = Authorized::new(Arc::new(posix), BucketGrants::new([("bob", ["shared-*"])]));
    store.create_bucket(&user("alice"), "alices", &Default::default()).unwrap();
    store.create_bucket(&user("alice"), "shared-results", &Default::default()).unwrap();
    std::fs::create_dir(dir.path().join("posix-made")).unwrap();
    store.put_bytes(&user("alice"), "alices", "k", b"secret", PutRequest::default()).unwrap();
    (dir, store)
}

fn names(store: &dyn Store, cx: &RequestContext) -> Vec<String> {
    store.list_buckets(cx).unwrap().into_iter().map(|b| b.name).collect()
}

/// Refused by a rule, which the error names (the S3 door answers it as plain AccessDenied).
fn denied<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(matches!(&result, Err(StoreError::Denied(why)) if !why.is_empty()), "{result:?}");
    assert_eq!(result.unwrap_err().s3_code(), "AccessDenied");
}

#[test]
fn other_users_are_denied_every_operation_on_a_bucket_they_do_not_own() {
    let (_dir, store) = store();
    let mallory = user("mallory");
    denied(store.head_bucket(&mallory, "alices"));
    denied(store.get_object(&mallory, "alices", "k", &GetRequest::default()).map(|r| r.info));
    denied(store.head_object(&mallory, "alices", "k", &Default::default()));
    denied(store.put_object(&mallory, "alices", "k", PutRequest::default()).map(|_| ()));
    denied(store.delete_object(&mallory, "alices", "k", &Default::default()));
    denied(store.list_objects(&mallory, "alices", &ListRequest { max_keys: 10, ..Default::default() }));
    denied(store.delete_bucket(&mallory, "alices"));
    denied(store.create_multipart_upload(&mallory, "alices", "k", PutRequest::default()));
    denied(store.update_object(&mallory, "alices", "k", ObjectChange::Tags(Default::default())));
    // A copy out of someone else's bucket into one's own is refused too.
    store.create_bucket(&mallory, "mallorys", &Default::default()).unwrap();
    denied(store.copy_object(&mallory, ("alices", "k"), ("mallorys", "k"), &CopyRequest::default()));
    // Nothing changed: the owner still reads the object.
    let body = store.get_object(&user("alice"), "alices", "k", &GetRequest::default()).unwrap();
    assert_eq!(body.info.size, 6);
    // Missing buckets are not hidden behind AccessDenied: the operation answers.
    assert!(matches!(store.head_bucket(&mallory, "nowhere"), Err(StoreError::NoSuchBucket)));
}

#[test]
fn each_principal_sees_the_buckets_it_may_use() {
    let (_dir, store) = store();
    assert_eq!(names(&store, &user("alice")), ["alices", "shared-results"]);
    assert_eq!(names(&store, &user("bob")), ["shared-results"]);
    assert!(names(&store, &user("mallory")).is_empty());
    let everything = ["alices", "posix-made", "shared-results"];
    assert_eq!(names(&store, &root()), everything);
    assert_eq!(names(&store, &RequestContext::process()), everything);
    // Grants give bob the shared bucket's objects, nothing else.
    store.put_bytes(&user("bob"), "shared-results", "from-bob", b"x", PutRequest::default()).unwrap();
    denied(store.head_bucket(&user("bob"), "alices"));
    // Buckets made with mkdir belong to root.
    denied(store.head_bucket(&user("alice"), "posix-made"));
    store.head_bucket(&root(), "posix-made").unwrap();
}

#[test]
fn creating_an_existing_bucket_tells_its_owner_apart() {
    let (_dir, store) = store();
    let again = |cx: &RequestContext, bucket: &str| store.create_bucket(cx, bucket, &Default::default());
    assert!(matches!(again(&user("alice"), "alices"), Err(StoreError::BucketAlreadyOwnedByYou)));
    assert!(matches!(again(&user("bob"), "alices"), Err(StoreError::BucketAlreadyExists)));
    assert!(matches!(again(&root(), "alices"), Err(StoreError::BucketAlreadyExists)));
    assert!(matches!(again(&root(), "posix-made"), Err(StoreError::BucketAlreadyOwnedByYou)));
    assert!(matches!(again(&user("alice"), "posix-made"), Err(StoreError::BucketAlreadyExists)));
    // The creator is recorded; only root or the process gives a bucket away.
    assert_eq!(store.bucket_owner(&user("alice"), "alices").unwrap().as_deref(), Some("alice"));
    denied(store.set_bucket_owner(&user("alice"), "alices", "mallory"));
    store.set_bucket_owner(&root(), "alices", "bob").unwrap();
    denied(store.head_bucket(&user("alice"), "alices"));
}

#[test]
fn an_expected_bucket_owner_must_be_the_owner() {
    let (_dir, store) = store();
    let store = store.with_root_owner("admin");
    let expecting = |owner: &str| user("alice").expecting_bucket_owner(Some(owner.to_string()));
    store.head_bucket(&expecting("alice"), "alices").unwrap();
    denied(store.head_bucket(&expecting("bob"), "alices"));
    denied(store.put_bytes(&expecting("bob"), "alices", "k2", b"x", PutRequest::default()));
    // Buckets made with mkdir belong to root's id.
    let root_expecting = |owner: &str| root().expecting_bucket_owner(Some(owner.to_string()));
    store.head_bucket(&root_expecting("admin"), "posix-made").unwrap();
    denied(store.head_bucket(&root_expecting("alice"), "posix-made"));
    // It names the destination's owner: a copy from a bucket owned by someone else passes.
    store.put_bytes(&root(), "posix-made", "src", b"from root", PutRequest::default()).unwrap();
    let copied =
        store.copy_object(&root_expecting("alice"), ("posix-made", "src"), ("alices", "copy"), &CopyRequest::default());
    assert!(copied.is_ok(), "{copied:?}");
    denied(store.copy_object(
        &root_expecting("admin"),
        ("posix-made", "src"),
        ("alices", "copy"),
        &CopyRequest::default(),
    ));
}

#[test]
fn canned_acls_share_reading_or_writing_never_the_bucket_itself() {
    let (_dir, store) = store();
    let anonymous = RequestContext::anonymous();
    let mallory = user("mallory");
    let read = |cx: &RequestContext| store.get_object(cx, "alices", "k", &GetRequest::default()).map(|r| r.info.size);
    let write = |cx: &RequestContext| store.put_bytes(cx, "alices", "new", b"x", PutRequest::default()).map(|_| ());
    // Private by default: nobody else reads, lists or writes.
    denied(read(&anonymous));
    denied(store.list_objects(&anonymous, "alices", &ListRequest { max_keys: 10, ..Default::default() }));
    denied(write(&mallory));
    store
        .set_bucket_acl(
            &user("alice"),
            "alices",
            isthmus_store::Acl::canned(isthmus_store::CannedAcl::AuthenticatedRead),
        )
        .unwrap();
    // As in S3, a bucket's ACL shares its listing; an object is shared by its own ACL.
    let list = |cx: &RequestContext| {
        store
            .list_objects(cx, "alices", &ListRequest { max_keys: 10, ..Default::default() })
            .map(|page| page.objects.len())
    };
    assert_eq!(list(&mallory).unwrap(), 1);
    denied(read(&mallory));
    let object_acl = |canned| {
        store.update_object(&user("alice"), "alices", "k", ObjectChange::Acl(isthmus_store::Acl::canned(canned)))
    };
    object_acl(isthmus_store::CannedAcl::AuthenticatedRead).unwrap();
    assert_eq!(read(&mallory).unwrap(), 6);
    denied(read(&anonymous));
    denied(list(&anonymous));
    denied(write(&mallory));
    store
        .set_bucket_acl(&user("alice"), "alices", isthmus_store::Acl::canned(isthmus_store::CannedAcl::PublicRead))
        .unwrap();
    denied(read(&anonymous));
    object_acl(isthmus_store::CannedAcl::PublicRead).unwrap();
    assert_eq!(read(&anonymous).unwrap(), 6);
    assert_eq!(
        store
            .list_objects(&anonymous, "alices", &ListRequest { max_keys: 10, ..Default::default() })
            .unwrap()
            .objects
            .len(),
        1
    );
    denied(write(&anonymous));
    denied(store.delete_object(&anonymous, "alices", "k", &Default::default()));
    store
        .set_bucket_acl(&user("alice"), "alices", isthmus_store::Acl::canned(isthmus_store::CannedAcl::PublicReadWrite))
        .unwrap();
    write(&anonymous).unwrap();
    store.delete_object(&anonymous, "alices", "new", &Default::default()).unwrap();
    // The bucket itself stays its owner's, whatever the ACL.
    denied(store.set_bucket_acl(&mallory, "alices", isthmus_store::Acl::canned(isthmus_store::CannedAcl::Private)));
    denied(store.delete_bucket(&anonymous, "alices"));
    denied(store.set_bucket_tags(&mallory, "alices", Default::default()));
    denied(store.update_object(&anonymous, "alices", "k", ObjectChange::Tags(Default::default())));
    // Anonymous requests never list or create buckets; shared buckets are not listed to others.
    denied(store.list_buckets(&anonymous));
    denied(store.create_bucket(&anonymous, "anon-bucket", &Default::default()));
    assert!(names(&store, &mallory).is_empty());
}

/// Who may list a bucket learns that a key is missing (NoSuchKey), as S3 tells; others get
/// AccessDenied whether the key exists or not.
#[test]
fn a_missing_key_is_told_only_to_those_who_may_list() {
    use isthmus_store::{Acl, CannedAcl};
    let (_dir, store) = store();
    let mallory = user("mallory");
    let get = |cx: &RequestContext, key: &str| {
        store.get_object(cx, "alices", key, &GetRequest::default()).map(|r| r.info.size)
    };
    denied(get(&mallory, "missing"));
    denied(get(&mallory, "k"));
    store.set_bucket_acl(&user("alice"), "alices", Acl::canned(CannedAcl::AuthenticatedRead)).unwrap();
    assert!(matches!(get(&mallory, "missing"), Err(StoreError::NoSuchKey)));
    denied(get(&mallory, "k"));
    denied(get(&RequestContext::anonymous(), "missing"));
}

/// `with_bucket_acl_sharing_objects` keeps the sharing of earlier releases: a bucket's canned
/// ACL opens its objects too.
#[test]
fn a_site_may_keep_bucket_acls_sharing_their_objects() {
    use isthmus_store::{Acl, CannedAcl};
    let (dir, _) = store();
    let posix = PosixStore::open(dir.path(), StoreOptions::default()).unwrap();
    let legacy = Authorized::new(Arc::new(posix), BucketGrants::default()).with_bucket_acl_sharing_objects(true);
    legacy.set_bucket_acl(&user("alice"), "alices", Acl::canned(CannedAcl::PublicRead)).unwrap();
    let read = legacy.get_object(&RequestContext::anonymous(), "alices", "k", &GetRequest::default());
    assert_eq!(read.map(|r| r.info.size).unwrap(), 6);
}

#[test]
fn an_object_acl_shares_that_object_only() {
    let (_dir, store) = store();
    let anonymous = RequestContext::anonymous();
    let alice = user("alice");
    store.put_bytes(&alice, "alices", "open", b"open", PutRequest::default()).unwrap();
    store
        .update_object(
            &alice,
            "alices",
            "open",
            ObjectChange::Acl(isthmus_store::Acl::canned(isthmus_store::CannedAcl::PublicRead)),
        )
        .unwrap();
    assert_eq!(store.head_object(&anonymous, "alices", "open", &Default::default()).unwrap().size, 4);
    denied(store.head_object(&anonymous, "alices", "k", &Default::default()));
    denied(store.head_object(&anonymous, "alices", "missing", &Default::default()));
    denied(store.put_bytes(&anonymous, "alices", "open", b"x", PutRequest::default()));
    denied(store.update_object(
        &user("mallory"),
        "alices",
        "open",
        ObjectChange::Acl(isthmus_store::Acl::canned(isthmus_store::CannedAcl::Private)),
    ));
    // Overwriting without an ACL makes the object private again, as in S3.
    store.put_bytes(&alice, "alices", "open", b"new", PutRequest::default()).unwrap();
    denied(store.head_object(&anonymous, "alices", "open", &Default::default()));
}

#[test]
fn grants_share_with_the_named_user_only() {
    use isthmus_store::{Acl, CannedAcl, Grant, GrantPermission};
    let (_dir, store) = store();
    let (alice, bob, carol) = (user("alice"), user("bob"), user("carol"));
    let grant = |grantee: &str, permission| Grant { grantee: grantee.into(), permission };
    // An object grant: bob reads that object; carol and other objects stay closed.
    store.put_bytes(&alice, "alices", "for-bob", b"hi bob", PutRequest::default()).unwrap();
    let read = Acl { canned: CannedAcl::Private, grants: vec![grant("bob", GrantPermission::Read)] };
    store.update_object(&alice, "alices", "for-bob", ObjectChange::Acl(read)).unwrap();
    assert_eq!(store.head_object(&bob, "alices", "for-bob", &Default::default()).unwrap().size, 6);
    denied(store.head_object(&carol, "alices", "for-bob", &Default::default()));
    denied(store.head_object(&bob, "alices", "k", &Default::default()));
    denied(store.list_objects(&bob, "alices", &ListRequest { max_keys: 10, ..Default::default() }));
    // Bucket grants: READ lists and reads, WRITE writes; the bucket stays alice's.
    let both = Acl {
        canned: CannedAcl::Private,
        grants: vec![grant("bob", GrantPermission::Read), grant("bob", GrantPermission::Write)],
    };
    store.set_bucket_acl(&alice, "alices", both.clone()).unwrap();
    assert_eq!(store.bucket_acl(&alice, "alices").unwrap(), both);
    assert!(store.list_objects(&bob, "alices", &ListRequest { max_keys: 10, ..Default::default() }).is_ok());
    store.put_bytes(&bob, "alices", "from-bob", b"b", PutRequest::default()).unwrap();
    denied(store.put_bytes(&carol, "alices", "from-carol", b"c", PutRequest::default()));
    denied(store.set_bucket_acl(&bob, "alices", Acl::default()));
    denied(store.delete_bucket(&bob, "alices"));
}

/// The settings a write replaces are the ones this layer checked: a user whose gateway still
/// holds the bucket's settings from before root gave the bucket away (another gateway on the
/// same file system changed them within the cache's second) cannot take it back, neither with
/// an unconditional write nor with a version computed for the settings now on disk.
#[test]
fn a_stale_view_of_the_settings_never_lets_a_user_take_a_bucket_back() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = |path: &std::path::Path| {
        Authorized::new(Arc::new(PosixStore::open(path, StoreOptions::default()).unwrap()), BucketGrants::default())
    };
    let (a, b) = (gateway(dir.path()), gateway(dir.path()));
    a.create_bucket(&user("alice"), "alices", &Default::default()).unwrap();
    let seen = a.bucket_config(&user("alice"), "alices").unwrap();
    assert_eq!(seen.owner.as_deref(), Some("alice"));
    b.set_bucket_owner(&root(), "alices", "bob").unwrap();
    let on_disk = isthmus_store::BucketConfig { owner: Some("bob".into()), version: None, ..seen.clone() };
    for version in [None, Some(on_disk.digest())] {
        let attempt = isthmus_store::BucketConfig { version, ..seen.clone() };
        let result = a.set_bucket_config(&user("alice"), "alices", &attempt);
        assert!(result.is_err(), "{result:?}");
    }
    assert_eq!(b.bucket_config(&root(), "alices").unwrap().owner.as_deref(), Some("bob"));
}

/// Every read of an object asks one question (issue 42, finding 4): a key the bucket policy
/// denies is refused to GET and HEAD, to a copy (CopyObject, UploadPartCopy) that takes it as
/// its source, to the file and derived records other doors (HDF5, arrays) read, and to a read
/// of a named version; to a user the object's ACL shares it with, to one its grants name
/// (`buckets = [...]`) and to its owner alike. Keys the policy does not deny stay readable.
#[test]
fn an_explicit_deny_refuses_every_read_of_the_key_by_anyone_but_root() {
    use isthmus_store::{Acl, CannedAcl, PartRequest};
    let (_dir, store) = store();
    let (alice, bob, carol) = (user("alice"), user("bob"), user("carol"));
    for key in ["open.txt", "secret/plan.txt"] {
        store.put_bytes(&alice, "shared-results", key, b"bytes", PutRequest::default()).unwrap();
    }
    store.set_bucket_acl(&alice, "shared-results", Acl::canned(CannedAcl::AuthenticatedRead)).unwrap();
    for key in ["open.txt", "secret/plan.txt"] {
        let shared = ObjectChange::Acl(Acl::canned(CannedAcl::AuthenticatedRead));
        store.update_object(&alice, "shared-results", key, shared).unwrap();
    }
    let deny = r#"{"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::shared-results/secret/*"}]}"#;
    store.set_bucket_policy(&alice, "shared-results", Some(deny.to_string())).unwrap();
    store.create_bucket(&carol, "carols", &Default::default()).unwrap();
    store.create_bucket(&bob, "bobs", &Default::default()).unwrap();
    // Carol reads by the objects' ACLs, bob by his grant ("shared-*"), alice owns the bucket.
    for (cx, own) in [(&carol, "carols"), (&bob, "bobs"), (&alice, "alices")] {
        let reads = |key: &str| -> Vec<Result<(), StoreError>> {
            let source = ("shared-results", key);
            let upload = store.create_multipart_upload(cx, own, "assembled", PutRequest::default()).unwrap();
            let part = PartRequest { part_number: 1, ..PartRequest::default() };
            let null_version = GetRequest { version_id: Some("null".into()), ..GetRequest::default() };
            vec![
                store.get_object(cx, source.0, key, &GetRequest::default()).map(drop),
                store.head_object(cx, source.0, key, &Default::default()).map(drop),
                store.get_object(cx, source.0, key, &null_version).map(drop),
                store.files().unwrap().object_file(cx, source.0, key).map(drop),
                store.files().unwrap().read_derived(cx, source.0, key, "hdf5_index").map(drop),
                store.copy_object(cx, source, (own, "copied"), &CopyRequest::default()).map(drop),
                store.upload_part_copy(cx, own, "assembled", &upload, &part, source, &GetRequest::default()).map(drop),
            ]
        };
        for (i, result) in reads("secret/plan.txt").into_iter().enumerate() {
            assert!(
                matches!(&result, Err(StoreError::Denied(why)) if why.contains("policy")),
                "{:?} read {i}: {result:?}",
                cx.user_name()
            );
        }
        assert!(store.head_object(cx, own, "copied", &Default::default()).is_err(), "the copy happened");
        for (i, result) in reads("open.txt").into_iter().enumerate() {
            assert!(result.is_ok(), "{:?} read {i} of an allowed key: {result:?}", cx.user_name());
        }
    }
    // Root (and the process) may change the policy, and are not locked out by it.
    store.get_object(&root(), "shared-results", "secret/plan.txt", &GetRequest::default()).unwrap();
    store.get_object(&RequestContext::process(), "shared-results", "secret/plan.txt", &GetRequest::default()).unwrap();
}
