//! The session floor decides who asks and runs every call as them: what a door hands it
//! becomes one context (disabled users and unmapped identities refused for every door alike),
//! and the stack it assembles runs each call, and each writer's commit and discard, as the
//! request's Unix identity on whatever thread makes it.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_session::{Asking, Identities, IdentitySpec, Principals, Refusal, User, UserDirectory};
use isthmus_store::identity::UnixIdentity;
use isthmus_store::{PutRequest, RequestContext, Store, StoreError, StoreExt};

fn directory() -> UserDirectory {
    let mut alice = User::new("alice".into(), "alice-secret".into());
    alice.identity = IdentitySpec { uid: Some(4242), gid: Some(4242), ..IdentitySpec::default() };
    UserDirectory::new("root", [User::new("root".into(), "root-secret".into()), alice])
}

#[test]
fn a_doors_evidence_becomes_one_context_and_disabled_users_are_refused() {
    let users = directory();
    let principals = Principals::of_users(users.clone());
    let alice = principals.context(&Asking { access_key: Some("alice"), ..Asking::default() }).unwrap();
    assert_eq!(alice, RequestContext::user("alice", false));
    let root = principals.context(&Asking { access_key: Some("root"), ..Asking::default() }).unwrap();
    assert_eq!(root, RequestContext::user("root", true));
    assert_eq!(principals.context(&Asking::default()).unwrap(), RequestContext::anonymous());
    assert_eq!(principals.signing_secret("alice").unwrap(), "alice-secret");
    assert_eq!(principals.signing_secret("mallory"), Err(Refusal::UnknownKey));
    // Temporary credentials need a session key: without STS, no key is one.
    assert!(!principals.is_root_session("root", Some("token")));

    users.apply_managed(&[], &["alice".to_string()]);
    let refused = principals.context(&Asking { access_key: Some("alice"), ..Asking::default() });
    assert_eq!(refused, Err(Refusal::UserDisabled));
    assert_eq!(refused.unwrap_err().s3_code(), "AccessDenied");
    assert_eq!(principals.signing_secret("alice"), Err(Refusal::KeyDisabled));
}

#[test]
fn a_socket_peer_is_the_user_its_uid_maps_to() {
    let users = directory();
    let spec = IdentitySpec { uid: Some(4242), gid: Some(4242), ..IdentitySpec::default() };
    let identities = Identities::new(false, vec![("alice".into(), "alice".into(), spec)], false).unwrap();
    let principals = Principals::new(users.clone(), Arc::new(identities), Default::default());
    let peer = principals.peer(4242).expect("uid 4242 is alice");
    assert_eq!(peer.user_name(), Some("alice"));
    // identity = "gateway": the peer is known by its uid, its calls run as the gateway.
    assert!(peer.identity.is_none());
    assert!(principals.peer(4243).is_none(), "an unmapped uid is nobody");
    let before = principals.generation();
    users.apply_managed(&[], &["alice".to_string()]);
    assert_ne!(principals.generation(), before, "a connection asks again after a change");
    assert!(principals.peer(4242).is_none(), "a disabled user's uid is refused");
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A request of a user with its own Unix identity (uid and gid 4242).
fn as_user_4242() -> RequestContext {
    let identity = UnixIdentity { uid: 4242, gid: 4242, groups: vec![4242], umask: None };
    RequestContext::process().with_identity(Some(Arc::new(identity)))
}

#[test]
fn every_call_and_every_writer_runs_as_the_requests_identity_on_any_thread() {
    if !is_root() {
        eprintln!("skipped: switching identities needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let engine: Arc<dyn Store> = Arc::new(PosixStore::open(dir.path(), StoreOptions::default()).unwrap());
    engine.create_bucket(&RequestContext::process(), "shared", &Default::default()).unwrap();
    std::fs::set_permissions(dir.path().join("shared"), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let stack = isthmus_session::stack::in_process(engine);
    let cx = as_user_4242();
    // A call made from a thread nobody switched (an array pool's, a copy's own thread).
    let stack_for_thread = stack.clone();
    let cx_for_thread = cx.clone();
    std::thread::spawn(move || {
        stack_for_thread.put_bytes(&cx_for_thread, "shared", "by-call", b"one", PutRequest::default()).unwrap();
        // A writer made now, written and committed later: its commit runs as the user too.
        let mut writer =
            stack_for_thread.put_object(&cx_for_thread, "shared", "by-writer", PutRequest::default()).unwrap();
        writer.write_all(b"two").unwrap();
        writer.commit().unwrap();
        // The thread is the gateway again afterwards.
        assert!(!isthmus_store::identity::is_switched());
    })
    .join()
    .unwrap();
    for key in ["by-call", "by-writer"] {
        let stat = std::fs::metadata(dir.path().join("shared").join(key)).unwrap();
        assert_eq!((stat.uid(), stat.gid()), (4242, 4242), "{key} was written as the request's user");
    }
    // The process's own calls run as the gateway.
    stack.put_bytes(&RequestContext::process(), "shared", "by-gateway", b"three", PutRequest::default()).unwrap();
    assert_eq!(std::fs::metadata(dir.path().join("shared/by-gateway")).unwrap().uid(), 0);
}

#[test]
fn a_call_on_a_thread_switched_to_another_user_is_refused() {
    if !is_root() {
        eprintln!("skipped: switching identities needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let engine: Arc<dyn Store> = Arc::new(PosixStore::open(dir.path(), StoreOptions::default()).unwrap());
    engine.create_bucket(&RequestContext::process(), "bkt", &Default::default()).unwrap();
    let stack = isthmus_session::stack::in_process(engine);
    std::thread::spawn(move || {
        let other = UnixIdentity { uid: 4343, gid: 4343, groups: vec![4343], umask: None };
        let _switched = other.assume().unwrap();
        let refused = stack.head_bucket(&as_user_4242(), "bkt");
        assert!(matches!(refused, Err(StoreError::AccessDenied)), "{refused:?}");
    })
    .join()
    .unwrap();
}
