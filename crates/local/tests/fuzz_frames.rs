//! Fuzz targets for the local door: what any process of the node can send to the socket.
//! Property-based (proptest; cargo-fuzz needs a nightly compiler, the project builds with
//! stable Rust): hostile handshakes, frames and body chunks go to a real socket served by a
//! real `PosixStore`, and after each case the server must still answer a well-formed client.
//! Frame decoding is also fuzzed alone, and a frame that announces more than it sends must not
//! make the reader allocate what it announced.
//!
//! `cargo test --release -p isthmus-local --test fuzz_frames` runs 256 cases per target (CI);
//! `scripts/fuzz` runs them longer.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use isthmus_access::Authorized;
use isthmus_local::protocol::{self, InPlace, MAGIC, Pieces, Request, VERSION_MAX, VERSION_MIN};
use isthmus_local::{LocalSocket, LocalStore};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{PutRequest, RequestContext, Store, StoreExt};
use proptest::prelude::*;

/// Counts the bytes this test process holds, to see what a hostile frame makes a reader take.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator with the caller's layout unchanged; the
// counter only observes sizes.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout (see `alloc`).
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

/// One served socket for all cases of this process.
fn socket() -> &'static std::path::Path {
    static SERVED: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> = std::sync::OnceLock::new();
    let (_, path) = SERVED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(Authorized::without_grants(
            PosixStore::open(dir.path().join("data"), StoreOptions::default()).unwrap(),
        ));
        store.create_bucket(&RequestContext::process(), "fuzz", &Default::default()).unwrap();
        store.put_bytes(&RequestContext::process(), "fuzz", "shard", &[0u8; SHARD], PutRequest::default()).unwrap();
        let path = dir.path().join("isthmus.sock");
        let socket = LocalSocket::bind(&path).unwrap();
        let peers = |_uid: u32| Some(RequestContext::user("local-user", true));
        socket.serve(store, Arc::new(peers), 64).unwrap();
        (dir, path)
    });
    path
}

/// A handshake as a client makes it.
fn handshake() -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend(VERSION_MIN.to_le_bytes());
    bytes.extend(VERSION_MAX.to_le_bytes());
    bytes
}

/// Sends `bytes` on a fresh connection, reads whatever comes back for a moment, and hangs up.
fn send(bytes: &[u8]) {
    let mut stream = UnixStream::connect(socket()).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

/// The server still serves a well-formed client, and no in-place request grew the object.
fn still_serving() {
    let local = LocalStore::connect(socket()).expect("the server accepts connections");
    let info = local.put_bytes(&RequestContext::process(), "fuzz", "alive", b"yes", PutRequest::default()).unwrap();
    assert_eq!(info.size, 3);
    let shard = local.head_object(&RequestContext::process(), "fuzz", "shard", &Default::default()).unwrap();
    assert_eq!(shard.size, SHARD as u64, "an in-place write grew the object");
}

/// The size of the object the in-place requests write.
const SHARD: usize = 64;

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_le_bytes().to_vec();
    bytes.extend(payload);
    bytes
}

/// A valid request's MessagePack bytes, to mutate.
fn valid_requests() -> Vec<Vec<u8>> {
    let put = Request::PutObject { bucket: "fuzz".into(), key: "k".into(), request: PutRequest::default() };
    let list = Request::ListObjects { bucket: "fuzz".into(), request: Default::default() };
    let head =
        Request::HeadObject { bucket: "fuzz".into(), key: "../../etc/passwd".into(), request: Default::default() };
    let shard = InPlace::Object { bucket: "fuzz".into(), key: "shard".into(), size: SHARD as u64 };
    let write = Request::UpdateWrite { file: shard.clone(), pieces: Pieces(vec![(60, 4), (0, 8)]) };
    let read = Request::UpdateRead { file: shard, offset: 8, length: 16 };
    let lock = Request::UpdateLock { bucket: "fuzz".into(), key: "shard".into(), size: SHARD as u64 };
    [put, list, head, write, read, lock]
        .iter()
        .map(|request| {
            let mut wire = Vec::new();
            protocol::write_frame(&mut wire, request).unwrap();
            wire[4..].to_vec()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn fuzz_arbitrary_bytes_after_the_handshake(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut wire = handshake();
        wire.extend(&bytes);
        send(&wire);
        still_serving();
    }

    #[test]
    fn fuzz_mutated_requests(which in 0usize..6, flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6), body in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut payload = valid_requests().swap_remove(which);
        for (at, byte) in flips {
            let at = at % payload.len();
            payload[at] = byte;
        }
        let mut wire = handshake();
        wire.extend(frame(&payload));
        wire.extend(frame(&body));
        send(&wire);
        still_serving();
    }

    #[test]
    fn fuzz_frame_decoding(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        let _ = protocol::read_frame::<Request>(&mut &bytes[..]);
        let _ = protocol::read_chunk_header(&mut &bytes[..]);
    }
}

#[test]
fn a_frame_that_announces_more_than_it_sends_costs_only_what_it_sent() {
    let mut wire = (protocol::MAX_FRAME as u32).to_le_bytes().to_vec();
    wire.extend([0x92u8; 100]);
    let before = HELD.load(Ordering::Relaxed);
    let mut peak = 0;
    let mut reader = Peek { inner: &wire[..], peak: &mut peak, base: before };
    assert!(protocol::read_frame::<Request>(&mut reader).is_err(), "a short frame is an error");
    // Before, the reader allocated the 64 MiB it was told of before reading a byte. (The
    // bound leaves room for what the other tests of this process hold meanwhile.)
    assert!(peak < 16 << 20, "held {peak} bytes for a frame of 104");
}

/// A reader that notes the most memory the process held while it was read from.
struct Peek<'a> {
    inner: &'a [u8],
    peak: &'a mut usize,
    base: usize,
}

impl Read for Peek<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        *self.peak = (*self.peak).max(HELD.load(Ordering::Relaxed).saturating_sub(self.base));
        self.inner.read(buf)
    }
}

#[test]
fn regressions_of_hostile_frames() {
    // A handshake that names no version this build speaks, a truncated magic, and a request
    // frame that claims the largest size and stops.
    let mut wrong_version = MAGIC.to_vec();
    wrong_version.extend([9u8, 0, 9, 0]);
    send(&wrong_version);
    send(&MAGIC[..3]);
    let mut huge = handshake();
    huge.extend((protocol::MAX_FRAME as u32).to_le_bytes());
    send(&huge);
    let mut too_large = handshake();
    too_large.extend(u32::MAX.to_le_bytes());
    send(&too_large);
    still_serving();
}
