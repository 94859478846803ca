//! The local door end to end in one process: a real socket, a real `PosixStore` behind it, the
//! client as a `Store`. Peers are told apart by uid (this process's own).

use std::io::{Read, Write};
use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_local::{LocalSocket, LocalStore};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{
    CompletedPart, GetRequest, ListRequest, MultipartStore, PartRequest, PutRequest, RequestContext, Store, StoreError,
    StoreExt,
};

mod common;
use common::{cx, me, serve, serve_passing};

fn hex(bytes: [u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_door_call_works_through_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve(dir.path(), me());
    let local = LocalStore::connect(&path).unwrap();
    assert_eq!(local.user(), "local-user");
    local.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    local.head_bucket(&cx(), "bkt").unwrap();
    assert_eq!(local.list_buckets(&cx()).unwrap()[0].name, "bkt");
    // Small, empty and multi-chunk bodies.
    let big: Vec<u8> = (0..(3 << 20) + 5).map(|i| (i % 251) as u8).collect();
    for (key, body) in [("small", b"hello".to_vec()), ("empty", Vec::new()), ("dir/big", big.clone())] {
        let info = local.put_bytes(&cx(), "bkt", key, &body, PutRequest::default()).unwrap();
        assert_eq!(info.size, body.len() as u64);
        let mut got = Vec::new();
        let response = local.get_object(&cx(), "bkt", key, &GetRequest::default()).unwrap();
        assert_eq!(response.body.remaining(), body.len() as u64);
        let mut reader = response.body;
        reader.read_to_end(&mut got).unwrap();
        assert_eq!(got, body, "{key}");
        assert_eq!(std::fs::read(dir.path().join("data/bkt").join(key)).unwrap(), body);
    }
    // Writes refused before and after their body keep the connection in step.
    let refused = local.put_bytes(&cx(), "nosuchbucket", "k", b"x", PutRequest::default());
    assert!(matches!(refused, Err(StoreError::NoSuchBucket)), "{refused:?}");
    let bad_key = local.put_bytes(&cx(), "bkt", "a/.isthmus/x", &big, PutRequest::default());
    assert_eq!(bad_key.unwrap_err().s3_code(), "InvalidArgument");
    let mut writer = local.put_object(&cx(), "bkt", "checked", PutRequest::default()).unwrap();
    writer.write_all(b"abc").unwrap();
    assert_eq!(writer.digests().md5.map(hex), Some("900150983cd24fb0d6963f7d28e17f72".to_string()));
    assert_eq!(writer.commit().unwrap().etag, "900150983cd24fb0d6963f7d28e17f72");
    local.delete_object(&cx(), "bkt", "checked", &Default::default()).unwrap();
    // A range, a HEAD, a listing, a copy, errors with their codes.
    let request =
        GetRequest { range: Some(isthmus_store::ByteRange::FromTo { first: 1, last: Some(3) }), ..Default::default() };
    let ranged = local.get_object(&cx(), "bkt", "small", &request).unwrap();
    assert_eq!(ranged.range, Some((1, 3)));
    let mut part = String::new();
    { ranged.body }.read_to_string(&mut part).unwrap();
    assert_eq!(part, "ell");
    assert_eq!(local.head_object(&cx(), "bkt", "dir/big", &Default::default()).unwrap().size, big.len() as u64);
    let page = local.list_objects(&cx(), "bkt", &ListRequest { max_keys: 1000, ..Default::default() }).unwrap();
    let keys: Vec<_> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, ["dir/big", "empty", "small"]);
    local.copy_object(&cx(), ("bkt", "small"), ("bkt", "copy"), &Default::default()).unwrap();
    assert!(matches!(local.head_object(&cx(), "bkt", "missing", &Default::default()), Err(StoreError::NoSuchKey)));
    assert!(matches!(local.head_bucket(&cx(), "nope"), Err(StoreError::NoSuchBucket)));
    // Multipart.
    let id = local.create_multipart_upload(&cx(), "bkt", "mp", PutRequest::default()).unwrap();
    let mut parts = Vec::new();
    for (n, fill) in [(1u32, b'a'), (2, b'b')] {
        let mut writer =
            local.upload_part(&cx(), "bkt", "mp", &id, &PartRequest { part_number: n, ..Default::default() }).unwrap();
        let len = if n == 1 { 5 << 20 } else { 10 };
        writer.write_all(&vec![fill; len]).unwrap();
        let info = writer.commit().unwrap();
        parts.push(CompletedPart { part_number: n, etag: info.etag, checksum: None });
    }
    let listed = local
        .list_parts(&cx(), "bkt", "mp", &id, &isthmus_store::ListPartsRequest { after_part: 0, max_parts: 10 })
        .unwrap();
    assert_eq!(listed.parts.len(), 2);
    let done = local.complete_multipart_upload(&cx(), "bkt", "mp", &id, &parts, PutRequest::default()).unwrap();
    assert!(done.etag.ends_with("-2"));
    assert_eq!(std::fs::metadata(dir.path().join("data/bkt/mp")).unwrap().len(), (5 << 20) + 10);
    for key in ["dir/big", "empty", "small", "copy", "mp"] {
        local.delete_object(&cx(), "bkt", key, &Default::default()).unwrap();
    }
    local.delete_bucket(&cx(), "bkt").unwrap();
}

#[test]
fn a_write_dropped_or_cut_off_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = serve(dir.path(), me());
    let local = LocalStore::connect(&path).unwrap();
    local.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    // Dropped after the body ended (digests asked): discarded, the connection stays usable.
    let mut writer = local.put_object(&cx(), "bkt", "dropped", PutRequest::default()).unwrap();
    writer.write_all(b"never stored").unwrap();
    let _ = writer.digests();
    drop(writer);
    // Dropped while sending: the connection closes, the gateway drops the write.
    let mut writer = local.put_object(&cx(), "bkt", "cut", PutRequest::default()).unwrap();
    writer.write_all(&vec![1u8; 3 << 20]).unwrap();
    drop(writer);
    local.put_bytes(&cx(), "bkt", "after", b"ok", PutRequest::default()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let page = store.list_objects(&cx(), "bkt", &ListRequest { max_keys: 10, ..Default::default() }).unwrap();
    assert_eq!(page.objects.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(), ["after"]);
    let staged = std::fs::read_dir(dir.path().join("data/bkt/.isthmus/tmp")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(staged, 0, "a temporary file was left behind");
}

#[test]
fn a_peer_whose_uid_maps_to_no_user_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve(dir.path(), me().wrapping_add(1));
    let err = LocalStore::connect(&path).err().expect("refused");
    assert_eq!(err.s3_code(), "AccessDenied");
    assert!(err.to_string().contains(&format!("uid {}", me())), "{err}");
}

#[test]
fn a_client_of_another_protocol_version_is_told_so() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve(dir.path(), me());
    let mut stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
    stream.write_all(isthmus_local::protocol::MAGIC).unwrap();
    stream.write_all(&[9, 0, 9, 0]).unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    assert_eq!(&reply[..8], isthmus_local::protocol::MAGIC);
    assert_eq!(&reply[8..10], &[0, 0], "version 0: refused");
    let answer: Result<String, isthmus_local::protocol::WireError> =
        isthmus_local::protocol::read_frame(&mut &reply[10..]).unwrap();
    assert!(answer.unwrap_err().message.contains("protocol version"));
}

#[test]
fn a_live_socket_is_not_taken_over_and_a_stale_one_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve(dir.path(), me());
    assert!(LocalSocket::bind(&path).err().unwrap().contains("in use"));
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(LocalSocket::bind(&stale).is_ok());
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(LocalSocket::bind(&file).err().unwrap().contains("not a socket"));
}

/// Reads a GET's whole body and says whether it came as a passed descriptor.
fn read_get(local: &LocalStore, key: &str, request: &GetRequest) -> (Vec<u8>, bool) {
    let response = local.get_object(&cx(), "bkt", key, request).unwrap();
    let passed = response.body.file().is_some();
    let mut body = Vec::new();
    { response.body }.read_to_end(&mut body).unwrap();
    (body, passed)
}

#[test]
fn a_large_get_hands_over_a_read_only_descriptor_and_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve(dir.path(), me());
    let local = LocalStore::connect(&path).unwrap();
    local.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    let big: Vec<u8> = (0..(2 << 20) + 7).map(|i| (i % 249) as u8).collect();
    local.put_bytes(&cx(), "bkt", "big", &big, PutRequest::default()).unwrap();
    local.put_bytes(&cx(), "bkt", "small", b"small stays in the reply", PutRequest::default()).unwrap();

    let (whole, passed) = read_get(&local, "big", &GetRequest::default());
    assert!(passed, "a 2 MiB object that is one file is read through its descriptor");
    assert_eq!(whole, big);
    // A range: only its bytes, from the right offset.
    let range = isthmus_store::ByteRange::FromTo { first: 1 << 20, last: Some((3 << 19) - 1) };
    let (part, passed) = read_get(&local, "big", &GetRequest { range: Some(range), ..Default::default() });
    assert!(passed);
    assert_eq!(part, big[1 << 20..3 << 19]);
    let (small, passed) = read_get(&local, "small", &GetRequest::default());
    assert!(!passed, "small objects come in the reply");
    assert_eq!(small, b"small stays in the reply");

    // The descriptor reads and nothing more: writing through it is refused by the kernel.
    let response = local.get_object(&cx(), "bkt", "big", &GetRequest::default()).unwrap();
    let (file, _) = response.body.file().unwrap();
    assert_eq!(rustix::io::write(file, b"overwrite"), Err(rustix::io::Errno::BADF));
    drop(response);
    assert_eq!(std::fs::read(dir.path().join("data/bkt/big")).unwrap(), big);

    // A descriptor taken before the object is replaced still reads the object it was given.
    let response = local.get_object(&cx(), "bkt", "big", &GetRequest::default()).unwrap();
    local.put_bytes(&cx(), "bkt", "big", &vec![9u8; 3 << 20], PutRequest::default()).unwrap();
    let mut old = Vec::new();
    { response.body }.read_to_end(&mut old).unwrap();
    assert_eq!(old, big);
    // And the connection it came on serves the next calls.
    assert_eq!(local.head_object(&cx(), "bkt", "big", &Default::default()).unwrap().size, 3 << 20);
}

#[test]
fn without_descriptors_and_for_version_1_peers_bodies_come_through_the_socket() {
    use isthmus_local::protocol::{self, Chunk, MAGIC, Reply, Request, WireError};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve_passing(dir.path(), me(), false);
    let local = LocalStore::connect(&path).unwrap();
    local.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    let big: Vec<u8> = (0..(1 << 20) + 3).map(|i| (i % 253) as u8).collect();
    local.put_bytes(&cx(), "bkt", "big", &big, PutRequest::default()).unwrap();
    let (body, passed) = read_get(&local, "big", &GetRequest::default());
    assert!(!passed, "the gateway was told not to pass descriptors");
    assert_eq!(body, big);

    // A peer that speaks only version 1 gets chunks from a gateway that passes descriptors.
    let dir2 = tempfile::tempdir().unwrap();
    let (path2, store2) = serve(dir2.path(), me());
    store2.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    store2.put_bytes(&cx(), "bkt", "big", &big, PutRequest::default()).unwrap();
    let mut stream = std::os::unix::net::UnixStream::connect(&path2).unwrap();
    stream.write_all(MAGIC).unwrap();
    stream.write_all(&[1, 0, 1, 0]).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut magic = [0u8; 8];
    reader.read_exact(&mut magic).unwrap();
    assert_eq!(protocol::read_u16(&mut reader).unwrap(), 1);
    let _user: Result<String, WireError> = protocol::read_frame(&mut reader).unwrap();
    let get = Request::GetObject { bucket: "bkt".into(), key: "big".into(), request: GetRequest::default() };
    protocol::write_frame(&mut stream, &get).unwrap();
    let reply: Result<Reply, WireError> = protocol::read_frame(&mut reader).unwrap();
    assert!(matches!(reply, Ok(Reply::Get { length, .. }) if length == big.len() as u64), "{reply:?}");
    let mut got = Vec::new();
    while let Chunk::Data(n) = protocol::read_chunk_header(&mut reader).unwrap() {
        let start = got.len();
        got.resize(start + n, 0);
        reader.read_exact(&mut got[start..]).unwrap();
    }
    assert_eq!(got, big);
}

/// This process's open descriptors of `file`'s inode. Only those: the other tests of this
/// binary run beside it and open and close descriptors of their own (counting all of them
/// failed a CI run, 73 -> 90, with none of them the peer's).
fn descriptors_of(file: &std::fs::File) -> usize {
    use std::os::unix::fs::MetadataExt;
    let target = file.metadata().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::metadata(entry.ok()?.path()).ok())
        .filter(|meta| meta.dev() == target.dev() && meta.ino() == target.ino())
        .count()
}

#[test]
fn descriptors_a_peer_sends_the_gateway_are_closed_not_kept() {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    use std::mem::MaybeUninit;
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = serve(dir.path(), me());
    let local = LocalStore::connect(&path).unwrap();
    local.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    // A hostile peer: a valid handshake, then bytes that each carry descriptors.
    let stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
    (&stream).write_all(isthmus_local::protocol::MAGIC).unwrap();
    (&stream).write_all(&[1, 0, 2, 0]).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut greeting = [0u8; 10];
    reader.read_exact(&mut greeting).unwrap();
    let _user: Result<String, isthmus_local::protocol::WireError> =
        isthmus_local::protocol::read_frame(&mut reader).unwrap();
    let file = tempfile::tempfile().unwrap();
    let before = descriptors_of(&file);
    // A frame announced large, whose bytes then come one at a time, each with descriptors.
    (&stream).write_all(&(32u32 << 20).to_le_bytes()).unwrap();
    for _ in 0..500 {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = [file.as_fd(), file.as_fd(), file.as_fd(), file.as_fd()];
        assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(&stream, &[std::io::IoSlice::new(&[0])], &mut control, SendFlags::NOSIGNAL).unwrap();
    }
    // The other client's calls still work, and the gateway (this process) holds none of the
    // 2,000 descriptors sent (a few of the last receive may be open at the moment of counting).
    local.put_bytes(&cx(), "bkt", "after", b"still served", PutRequest::default()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let after = descriptors_of(&file);
    assert!(after < before + 16, "the gateway kept descriptors a peer sent: {before} -> {after}");
    drop(stream);
}

/// A socket whose peers are served as `user`, each with this process's own Unix identity when
/// `as_unix_user` (what `identity = "posix"` gives a peer).
fn serve_identity(dir: &std::path::Path, as_unix_user: bool) -> std::path::PathBuf {
    let store: Arc<dyn Store> =
        Arc::new(Authorized::without_grants(PosixStore::open(dir.join("data"), StoreOptions::default()).unwrap()));
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    store.put_bytes(&cx(), "bkt", "shard", &[0u8; 64], PutRequest::default()).unwrap();
    let path = dir.join("isthmus.sock");
    let socket = LocalSocket::bind(&path).unwrap();
    let identity = as_unix_user.then(|| {
        let name = if me() == 0 { "root".to_string() } else { std::env::var("USER").unwrap_or_default() };
        Arc::new(isthmus_store::identity::UnixIdentity::of_user(&name).unwrap())
    });
    let resolve = move |_uid: u32| Some(RequestContext::user("local-user", true).with_identity(identity.clone()));
    socket.serve(store, Arc::new(resolve), 8).unwrap();
    path
}

/// A hostile peer's raw connection at `version`: its writer and a reader that keeps any
/// descriptor the gateway passes.
fn raw_peer(path: &std::path::Path, version: u16) -> (std::os::unix::net::UnixStream, isthmus_local::transport::Inbox) {
    use isthmus_local::protocol::{self, WireError};
    let stream = std::os::unix::net::UnixStream::connect(path).unwrap();
    (&stream).write_all(protocol::MAGIC).unwrap();
    (&stream).write_all(&[1, 0]).unwrap();
    (&stream).write_all(&version.to_le_bytes()).unwrap();
    let mut inbox =
        isthmus_local::transport::Inbox::new(stream.try_clone().unwrap(), 1 << 16, std::time::Duration::ZERO);
    let mut magic = [0u8; 8];
    inbox.read_exact(&mut magic).unwrap();
    assert_eq!(protocol::read_u16(&mut inbox).unwrap(), version);
    let _user: Result<String, WireError> = protocol::read_frame(&mut inbox).unwrap();
    (stream, inbox)
}

/// Sends an `UpdateWrite` of `bytes` as one piece at `offset` for an object said to be `size`
/// bytes, and reads the answer.
fn raw_write(
    (stream, inbox): &mut (std::os::unix::net::UnixStream, isthmus_local::transport::Inbox),
    size: u64,
    offset: u64,
    bytes: &[u8],
) -> Result<isthmus_local::protocol::Reply, isthmus_local::protocol::WireError> {
    use isthmus_local::protocol::{self, InPlace, Pieces, Request};
    let file = InPlace::Object { bucket: "bkt".into(), key: "shard".into(), size };
    let pieces = Pieces(vec![(offset, bytes.len() as u64)]);
    protocol::write_frame(stream, &Request::UpdateWrite { file, pieces }).unwrap();
    protocol::write_chunks(stream, bytes).unwrap();
    protocol::write_end(stream).unwrap();
    protocol::read_frame(inbox).unwrap()
}

/// A peer writes an object in place through requests, never past its size, whatever it sends;
/// no descriptor of the file reaches it, at any protocol version.
fn in_place_through_requests(as_unix_user: bool) {
    use isthmus_local::protocol::{self, Reply, Request};
    let dir = tempfile::tempdir().unwrap();
    let path = serve_identity(dir.path(), as_unix_user);
    let on_disk = dir.path().join("data/bkt/shard");
    let local = LocalStore::connect(&path).unwrap();
    let file =
        local.files().unwrap().object_file_for_update(&cx(), "bkt", "shard").unwrap().expect("in-place writes offered");
    assert_eq!(file.size(), 64);
    file.write(&[(8, b"in place"), (32, b"second")]).unwrap();
    file.commit().unwrap();
    assert!(matches!(file.write(&[(60, b"too far")]), Err(StoreError::InvalidArgument(_))));
    let lock = file.lock().unwrap();
    let mut back = [0u8; 8];
    lock.read_at(8, &mut back).unwrap();
    lock.write_at(16, &back).unwrap();
    drop(lock);
    let mut read = [0u8; 8];
    file.read_at(16, &mut read).unwrap();
    assert_eq!(&read, b"in place");
    let bytes = std::fs::read(&on_disk).unwrap();
    assert_eq!((&bytes[8..24], &bytes[32..38], bytes.len()), (&b"in placein place"[..], &b"second"[..], 64));

    // A hostile peer skips the client's checks: the gateway's hold.
    let mut peer = raw_peer(&path, 4);
    let refused = raw_write(&mut peer, 64, 60, b"too far!").unwrap_err();
    assert_eq!(refused.code, "InvalidArgument", "{refused:?}");
    let refused = raw_write(&mut peer, 1 << 20, 4096, b"grown").unwrap_err();
    assert_eq!(refused.code, "PreconditionFailed", "a size the object does not have: {refused:?}");
    let refused = raw_write(&mut peer, 64, u64::MAX - 2, b"wrap").unwrap_err();
    assert_eq!(refused.code, "InvalidArgument", "{refused:?}");
    assert!(matches!(raw_write(&mut peer, 64, 0, b"ok"), Ok(Reply::Done)), "the connection stays in step");
    assert!(peer.1.take_descriptor().is_none());
    // A peer of protocol 3 asks for the file and is told to write the object whole.
    let mut old = raw_peer(&path, 3);
    let ask = Request::ObjectFileForUpdate { bucket: "bkt".into(), key: "shard".into() };
    protocol::write_frame(&mut old.0, &ask).unwrap();
    let reply: Result<Reply, protocol::WireError> = protocol::read_frame(&mut old.1).unwrap();
    assert!(matches!(reply, Ok(Reply::Done)), "{reply:?}");
    assert!(old.1.take_descriptor().is_none(), "no writable descriptor, at any version");
    let refused = raw_write(&mut old, 64, 0, b"v3").unwrap_err();
    assert_eq!(refused.code, "InvalidRequest", "in-place requests are protocol 4's: {refused:?}");
    assert_eq!(std::fs::metadata(&on_disk).unwrap().len(), 64, "the object never grew");

    // Replaced since it was opened: the handle writes nothing and says so.
    local.put_bytes(&cx(), "bkt", "shard", &[1u8; 32], PutRequest::default()).unwrap();
    assert!(matches!(file.write(&[(0, b"stale")]), Err(StoreError::PreconditionFailed)));
    assert_eq!(std::fs::read(&on_disk).unwrap(), vec![1u8; 32]);
    assert!(matches!(
        local.files().unwrap().object_file_for_update(&cx(), "bkt", "missing"),
        Err(StoreError::NoSuchKey)
    ));
}

#[test]
fn a_peer_served_as_its_own_unix_user_writes_in_place_through_requests() {
    if me() != 0 {
        eprintln!("skipped: a peer with a Unix identity needs a gateway that may switch to it (root)");
        return;
    }
    in_place_through_requests(true);
}

#[test]
fn a_peer_served_as_the_gateway_writes_in_place_through_requests() {
    // Each request is judged and bounded by the gateway: no gateway-owned descriptor leaves it.
    in_place_through_requests(false);
}

/// A socket on a store with the object `shard` of 64 bytes, whose peers are all served as
/// `peer` (with the gateway's identity), releasing idle locks after `lock_idle`.
fn serve_as(
    dir: &std::path::Path,
    peer: RequestContext,
    lock_idle: std::time::Duration,
) -> (std::path::PathBuf, Arc<dyn Store>) {
    let store: Arc<dyn Store> =
        Arc::new(Authorized::without_grants(PosixStore::open(dir.join("data"), StoreOptions::default()).unwrap()));
    store.create_bucket(&cx(), "bkt", &Default::default()).unwrap();
    store.put_bytes(&cx(), "bkt", "shard", &[7u8; 64], PutRequest::default()).unwrap();
    let path = dir.join("isthmus.sock");
    let socket = LocalSocket::bind(&path).unwrap().releasing_idle_locks(lock_idle);
    socket.serve(store.clone(), Arc::new(move |_uid: u32| Some(peer.clone())), 8).unwrap();
    (path, store)
}

#[test]
fn a_peer_that_may_write_an_object_but_not_read_it_reads_none_of_it_in_place() {
    use isthmus_local::protocol::{self, InPlace, Reply, Request};
    use isthmus_store::{Grant, GrantPermission};
    let dir = tempfile::tempdir().unwrap();
    let writer = RequestContext::user("writer", false);
    let (path, store) = serve_as(dir.path(), writer, std::time::Duration::from_secs(10));
    let mut config = store.bucket_config(&cx(), "bkt").unwrap();
    config.acl.grants.push(Grant { grantee: "writer".into(), permission: GrantPermission::Write });
    store.set_bucket_config(&cx(), "bkt", &config).unwrap();
    let mut peer = raw_peer(&path, 4);
    let ask = Request::ObjectFileForUpdate { bucket: "bkt".into(), key: "shard".into() };
    protocol::write_frame(&mut peer.0, &ask).unwrap();
    let reply: Result<Reply, protocol::WireError> = protocol::read_frame(&mut peer.1).unwrap();
    assert!(matches!(reply, Ok(Reply::UpdateFile { size: 64, .. })), "{reply:?}");
    // It may write in place, as it may PUT...
    assert!(matches!(raw_write(&mut peer, 64, 0, b"w"), Ok(Reply::Done)));
    // ...but reads nothing: not with a read, not under a lock.
    let shard = InPlace::Object { bucket: "bkt".into(), key: "shard".into(), size: 64 };
    protocol::write_frame(&mut peer.0, &Request::UpdateRead { file: shard, offset: 0, length: 64 }).unwrap();
    let reply: Result<Reply, protocol::WireError> = protocol::read_frame(&mut peer.1).unwrap();
    assert_eq!(reply.unwrap_err().code, "AccessDenied");
    let lock = Request::UpdateLock { bucket: "bkt".into(), key: "shard".into(), size: 64 };
    protocol::write_frame(&mut peer.0, &lock).unwrap();
    let reply: Result<Reply, protocol::WireError> = protocol::read_frame(&mut peer.1).unwrap();
    assert_eq!(reply.unwrap_err().code, "AccessDenied");
}

#[test]
fn a_peer_that_locks_an_object_and_goes_silent_loses_the_lock() {
    use isthmus_local::protocol::{self, Reply, Request};
    let dir = tempfile::tempdir().unwrap();
    let idle = std::time::Duration::from_millis(300);
    let (path, store) = serve_as(dir.path(), RequestContext::user("local-user", true), idle);
    let mut peer = raw_peer(&path, 4);
    let lock = Request::UpdateLock { bucket: "bkt".into(), key: "shard".into(), size: 64 };
    protocol::write_frame(&mut peer.0, &lock).unwrap();
    let reply: Result<Reply, protocol::WireError> = protocol::read_frame(&mut peer.1).unwrap();
    assert!(matches!(reply, Ok(Reply::Done)), "{reply:?}");
    // An in-process writer of the same file waits for the lock until the silent peer's
    // connection is closed.
    let started = std::time::Instant::now();
    let file = store.files().unwrap().object_file_for_update(&cx(), "bkt", "shard").unwrap().unwrap();
    file.write(&[(0, b"after")]).unwrap();
    let waited = started.elapsed();
    assert!(waited >= idle / 2 && waited < idle * 10, "waited {waited:?}");
    let mut rest = Vec::new();
    assert_eq!(peer.1.read_to_end(&mut rest).unwrap_or(0), 0, "the silent peer's connection was closed");
}

/// Reads through the socket ask the engine's one question (issue 42, finding 4): a peer whose
/// user is granted the bucket (`buckets = [...]`) gets neither the bytes, nor a descriptor, nor
/// a copy of a key the bucket policy explicitly denies, and still reads the keys it allows.
#[test]
fn a_key_the_bucket_policy_denies_is_not_read_through_the_socket() {
    use isthmus_store::BucketSettings;
    let dir = tempfile::tempdir().unwrap();
    let posix = PosixStore::open(dir.path().join("data"), StoreOptions::default()).unwrap();
    let authorized = Authorized::new(Arc::new(posix), isthmus_access::BucketGrants::new([("bob", ["shared"])]));
    let alice = RequestContext::user("alice", false);
    authorized.create_bucket(&alice, "shared", &Default::default()).unwrap();
    let big = vec![7u8; 1 << 20];
    for key in ["open.bin", "secret/plan.bin"] {
        authorized.put_bytes(&alice, "shared", key, &big, PutRequest::default()).unwrap();
    }
    let deny = r#"{"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::shared/secret/*"}]}"#;
    authorized.set_bucket_policy(&alice, "shared", Some(deny.to_string())).unwrap();
    authorized.create_bucket(&RequestContext::user("bob", false), "bobs", &Default::default()).unwrap();
    let path = dir.path().join("isthmus.sock");
    let socket = LocalSocket::bind(&path).unwrap();
    let resolve = move |_uid: u32| Some(RequestContext::user("bob", false));
    socket.serve(Arc::new(authorized), Arc::new(resolve), 8).unwrap();

    let local = LocalStore::connect(&path).unwrap();
    let refused = |result: Result<(), StoreError>| {
        assert!(matches!(&result, Err(err) if err.s3_code() == "AccessDenied"), "{result:?}");
    };
    refused(local.get_object(&cx(), "shared", "secret/plan.bin", &GetRequest::default()).map(drop));
    refused(local.head_object(&cx(), "shared", "secret/plan.bin", &Default::default()).map(drop));
    let copy = isthmus_store::CopyRequest::default();
    refused(local.copy_object(&cx(), ("shared", "secret/plan.bin"), ("bobs", "stolen"), &copy).map(drop));
    assert!(local.head_object(&cx(), "bobs", "stolen", &Default::default()).is_err(), "the copy happened");
    // The connection goes on; the allowed key comes whole (through its descriptor).
    let response = local.get_object(&cx(), "shared", "open.bin", &GetRequest::default()).unwrap();
    assert!(response.body.file().is_some());
    let mut got = Vec::new();
    { response.body }.read_to_end(&mut got).unwrap();
    assert_eq!(got, big);
    local.copy_object(&cx(), ("shared", "open.bin"), ("bobs", "copied"), &copy).unwrap();
}
