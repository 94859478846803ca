//! The gateway's side of the local door: a Unix socket whose peers are authenticated by the
//! kernel (`SO_PEERCRED`: the uid of the connecting process), one thread per connection (the
//! engine is synchronous; a node-local door has tens of clients, bounded by `max_connections`),
//! every call run with the request's Unix identity like the HTTP door's.

use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use isthmus_store::identity::init_request_thread;
use isthmus_store::{BoxedWriter, BucketConfig, RequestContext, Store, StoreError, StoreResult};

use crate::in_place::{self, Held};
use crate::protocol::{
    CHUNK, Chunk, DESCRIPTOR_MIN, MAGIC, Reply, Request, VERSION_DESCRIPTORS, VERSION_MAX, VERSION_MIN,
    VERSION_UPDATE_REQUESTS, WireError, frame_bytes, read_chunk_header, read_frame, read_u16, write_abort,
    write_chunks, write_end, write_frame,
};
use crate::transport::{Inbox, send_with_descriptor, spin_from_env};

/// Who a peer's uid acts as.
pub trait Peers: Send + Sync {
    /// The request context of the S3 user mapped to `uid` (with the Unix identity to run as),
    /// or `None` for a uid that maps to no user (refused).
    fn resolve(&self, uid: u32) -> Option<RequestContext>;
    /// Changes whenever `resolve` may answer differently (identities resolved again): a
    /// connection asks again then, not on every request.
    fn generation(&self) -> u64 {
        0
    }
    /// Runs `serve`, the loop that serves one peer's requests on a thread of its own. The
    /// session floor's peers let the thread rest in the peer's identity between calls there.
    fn serve_connection(&self, serve: &mut dyn FnMut() -> io::Result<()>) -> io::Result<()> {
        serve()
    }
}

/// A fixed mapping.
impl<F: Fn(u32) -> Option<RequestContext> + Send + Sync> Peers for F {
    fn resolve(&self, uid: u32) -> Option<RequestContext> {
        self(uid)
    }
}

/// A bound local socket; the file is removed when this is dropped.
pub struct LocalSocket {
    listener: UnixListener,
    path: PathBuf,
    settings: Settings,
}

/// How connections are served.
#[derive(Clone, Copy)]
struct Settings {
    /// Large GETs may answer with a read-only descriptor.
    pass_descriptors: bool,
    /// How long a peer that holds an object's lock for a read-merge-write may stay silent.
    lock_idle: Duration,
}

/// The default of `LocalSocket::releasing_idle_locks`.
pub const LOCK_IDLE: Duration = Duration::from_secs(10);

impl LocalSocket {
    /// Binds `path`, mode 0666 (every local user may connect; the peer's uid decides who it
    /// is). A stale socket file (nobody listening) is replaced; a live one or another kind of
    /// file is an error that says so.
    pub fn bind(path: &Path) -> Result<Self, String> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(format!("{} exists and is not a socket: choose another --local-socket", path.display()));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "{} is in use by a running gateway: choose another --local-socket",
                    path.display()
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("cannot replace the stale socket {}: {e}", path.display()))?;
        }
        let listener = UnixListener::bind(path).map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| format!("cannot open {} to local users: {e}", path.display()))?;
        Ok(Self {
            listener,
            path: path.to_path_buf(),
            settings: Settings { pass_descriptors: true, lock_idle: LOCK_IDLE },
        })
    }

    /// Whether GETs of objects that are one file (from `DESCRIPTOR_MIN` bytes) answer peers
    /// that speak version 2 with a read-only descriptor of the file, which the peer reads
    /// itself at the file system's speed (default); otherwise every body is sent through the
    /// socket.
    pub fn passing_descriptors(mut self, pass: bool) -> Self {
        self.settings.pass_descriptors = pass;
        self
    }

    /// How long a peer that locked an object for an in-place read-merge-write may stay silent
    /// before its connection is closed and the lock let go (`LOCK_IDLE` by default; a lock is
    /// let go after six times this however busy the peer): other writers of the file wait
    /// for the lock meanwhile.
    pub fn releasing_idle_locks(mut self, after: Duration) -> Self {
        self.settings.lock_idle = after;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts connections on a thread of its own until the process ends, each served on its
    /// own thread; beyond `max_connections` at once, new peers are refused in the handshake.
    pub fn serve(self, store: Arc<dyn Store>, peers: Arc<dyn Peers>, max_connections: usize) -> Result<(), String> {
        let open = Arc::new(AtomicUsize::new(0));
        let listener = self.listener.try_clone().map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("isthmus-local-accept".into())
            .spawn(move || {
                let settings = self.settings;
                let _socket = self;
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let (store, peers, open) = (store.clone(), peers.clone(), open.clone());
                    let spawned = std::thread::Builder::new().name("isthmus-local".into()).spawn(move || {
                        let full = open.fetch_add(1, Ordering::SeqCst) >= max_connections;
                        if let Err(err) = serve_connection(stream, &*store, &*peers, full, settings) {
                            tracing::debug!(error = %err, "local connection ended");
                        }
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                    if let Err(err) = spawned {
                        tracing::warn!(error = %err, "cannot start a thread for a local connection");
                    }
                }
            })
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

impl Drop for LocalSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Refuses a peer in the handshake with `message`.
fn refuse(writer: &mut impl Write, code: &str, message: String) -> io::Result<()> {
    let error = WireError { code: code.to_string(), status: 403, message };
    write_frame(writer, &Err::<String, _>(error))?;
    writer.flush()
}

fn serve_connection(
    stream: UnixStream,
    store: &dyn Store,
    peers: &dyn Peers,
    full: bool,
    settings: Settings,
) -> io::Result<()> {
    let uid = rustix::net::sockopt::socket_peercred(&stream)?.uid.as_raw();
    // Room for a few chunks of a body in flight (best effort: the kernel caps it at
    // net.core.rmem_max).
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&stream, 4 * CHUNK);
    let mut reader = Inbox::refusing_descriptors(stream.try_clone()?, CHUNK + 64, spin_from_env());
    let mut writer = BufWriter::with_capacity(CHUNK + 64, stream);
    let mut magic = [0u8; 8];
    reader.read_exact(&mut magic)?;
    let (lowest, highest) = (read_u16(&mut reader)?, read_u16(&mut reader)?);
    if &magic != MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not an Isthmus client"));
    }
    let version = if lowest <= VERSION_MAX && highest >= VERSION_MIN { highest.min(VERSION_MAX) } else { 0 };
    let passes = settings.pass_descriptors && version >= VERSION_DESCRIPTORS;
    writer.write_all(MAGIC)?;
    writer.write_all(&version.to_le_bytes())?;
    if version == 0 {
        let message = format!("no common protocol version: this gateway speaks {VERSION_MIN} to {VERSION_MAX}");
        return refuse(&mut writer, "InvalidRequest", message);
    }
    if full {
        return refuse(&mut writer, "SlowDown", "too many local connections; retry later".into());
    }
    let mut generation = peers.generation();
    let Some(cx) = peers.resolve(uid) else {
        tracing::warn!(uid, "refused a local peer whose uid maps to no S3 user");
        return refuse(&mut writer, "AccessDenied", format!("uid {uid} maps to no S3 user of this gateway"));
    };
    // This thread's umask becomes the user's while its calls run.
    if let Err(err) = init_request_thread() {
        return refuse(&mut writer, "InternalError", format!("cannot serve this connection: {err}"));
    }
    write_frame(&mut writer, &Ok::<_, WireError>(cx.user_name().unwrap_or("").to_string()))?;
    let mut cx = Some(cx);
    writer.flush()?;
    // The thread serves this peer only: its calls (the store stack's identity wrapper switches
    // them) may rest in the peer's identity from one request to the next (`serve_connection`),
    // so a thread switches once per connection, not six credential changes per request, and
    // again only when the identity changed (resolved again whenever the identities were, so
    // SIGHUP and the periodic refresh apply).
    // A file the peer locked for a read-merge-write (in_place): let go whenever the peer's
    // identity is resolved again, so a remapped or disabled user keeps nothing.
    let mut held = Held::new(settings.lock_idle);
    let mut waiting = None;
    peers.serve_connection(&mut || -> io::Result<()> {
        loop {
            // While the peer holds a lock, a silent peer times out: the connection ends and the
            // lock goes with it.
            let limit = held.idle_limit();
            if limit != waiting {
                writer.get_ref().set_read_timeout(limit)?;
                waiting = limit;
            }
            let request: Request = match read_frame(&mut reader) {
                Ok(request) => request,
                Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(err) => return Err(err),
            };
            if peers.generation() != generation {
                generation = peers.generation();
                cx = peers.resolve(uid);
                held.release();
            }
            let cx = match &cx {
                Some(cx) => cx,
                None => {
                    tracing::warn!(uid, "refused a request: the peer's uid no longer maps to an S3 user");
                    refuse_request(&request, &StoreError::AccessDenied, &mut reader, &mut writer)?;
                    writer.flush()?;
                    continue;
                }
            };
            let connection = Negotiated { version, passes };
            handle(store, cx, request, &mut reader, &mut writer, connection, &mut held)?;
            writer.flush()?;
        }
    })
}

/// Answers `request` with `err` without running it (a body it brings is read and dropped).
fn refuse_request(
    request: &Request,
    err: &StoreError,
    reader: &mut impl Read,
    writer: &mut impl Write,
) -> io::Result<()> {
    if request.has_body() {
        drain_body(reader)?;
    }
    if request.has_decision() {
        refuse_body(err, reader, writer)
    } else {
        write_frame(writer, &Err::<Reply, _>(WireError::from(err)))
    }
}

/// What the handshake settled for a connection.
#[derive(Clone, Copy)]
struct Negotiated {
    version: u16,
    /// Large GETs may answer with a read-only descriptor.
    passes: bool,
}

/// Runs one request and writes its reply (store errors are replies; I/O errors on the socket
/// end the connection).
fn handle(
    store: &dyn Store,
    cx: &RequestContext,
    request: Request,
    reader: &mut (impl Read + Send),
    writer: &mut BufWriter<UnixStream>,
    Negotiated { version, passes }: Negotiated,
    held: &mut Held,
) -> io::Result<()> {
    let reply =
        |writer: &mut _, result: StoreResult<Reply>| write_frame(writer, &result.map_err(|e| WireError::from(&e)));
    match request {
        Request::ListBuckets => reply(writer, store.list_buckets(cx).map(Reply::Buckets)),
        Request::CreateBucket { bucket, request } => {
            reply(writer, store.create_bucket(cx, &bucket, &request).map(|()| Reply::Done))
        }
        Request::HeadBucket { bucket } => reply(writer, store.head_bucket(cx, &bucket).map(|()| Reply::Done)),
        Request::DeleteBucket { bucket } => reply(writer, store.delete_bucket(cx, &bucket).map(|()| Reply::Done)),
        Request::PutObject { bucket, key, request } => {
            receive_body(store.put_object(cx, &bucket, &key, request), reader, writer)
        }
        Request::UploadPart { bucket, key, upload_id, request } => {
            receive_body(store.upload_part(cx, &bucket, &key, &upload_id, &request), reader, writer)
        }
        Request::GetObject { bucket, key, request } => send_body(store, cx, (&bucket, &key), &request, writer, passes),
        Request::ObjectFileForUpdate { bucket, key } => {
            let offered = version >= VERSION_UPDATE_REQUESTS;
            reply(writer, update_file(store, cx, (&bucket, &key), offered))
        }
        Request::UpdateRead { .. }
        | Request::UpdateWrite { .. }
        | Request::UpdateLock { .. }
        | Request::UpdateUnlock
        | Request::UpdateSync { .. } => {
            if version < VERSION_UPDATE_REQUESTS {
                let err = StoreError::InvalidRequest(format!(
                    "in-place requests need protocol version {VERSION_UPDATE_REQUESTS}; this connection speaks {version}"
                ));
                return refuse_request(&request, &err, reader, writer);
            }
            in_place::serve(store, cx, held, request, reader, writer)
        }
        Request::HeadObject { bucket, key, request } => {
            reply(writer, store.head_object(cx, &bucket, &key, &request).map(Reply::Info))
        }
        Request::DeleteObject { bucket, key, request } => {
            reply(writer, store.delete_object(cx, &bucket, &key, &request).map(Reply::Deleted))
        }
        Request::CopyObject { source, target, request } => reply(
            writer,
            store.copy_object(cx, (&source.0, &source.1), (&target.0, &target.1), &request).map(Reply::Info),
        ),
        Request::ListObjects { bucket, request } => {
            reply(writer, store.list_objects(cx, &bucket, &request).map(Reply::Page))
        }
        Request::CreateMultipartUpload { bucket, key, request } => {
            reply(writer, store.create_multipart_upload(cx, &bucket, &key, request).map(Reply::UploadId))
        }
        Request::CompleteMultipartUpload { bucket, key, upload_id, parts, request } => reply(
            writer,
            store.complete_multipart_upload(cx, &bucket, &key, &upload_id, &parts, request).map(Reply::Info),
        ),
        Request::AbortMultipartUpload { bucket, key, upload_id } => {
            reply(writer, store.abort_multipart_upload(cx, &bucket, &key, &upload_id).map(|()| Reply::Done))
        }
        Request::ListParts { bucket, key, upload_id, request } => {
            reply(writer, store.list_parts(cx, &bucket, &key, &upload_id, &request).map(Reply::Parts))
        }
        Request::BucketFacts { bucket } => reply(writer, store.bucket_facts(cx, &bucket).map(Reply::Facts)),
        Request::BucketConfig { bucket } => reply(
            writer,
            store.bucket_config(cx, &bucket).map(|config| Reply::Config { version: config.version.clone(), config }),
        ),
        Request::SetBucketConfig { bucket, config, version } => {
            let config = BucketConfig { version, ..config };
            reply(writer, store.set_bucket_config(cx, &bucket, &config).map(|()| Reply::Done))
        }
        Request::ListObjectVersions { bucket, request } => {
            reply(writer, store.list_object_versions(cx, &bucket, &request).map(Reply::Versions))
        }
        Request::UpdateObject { bucket, key, change } => {
            reply(writer, store.update_object(cx, &bucket, &key, change).map(|()| Reply::Done))
        }
        Request::ListMultipartUploads { bucket, request } => {
            reply(writer, store.list_multipart_uploads(cx, &bucket, &request).map(Reply::Uploads))
        }
    }
}

/// Reads and discards a body the client is sending (a write that could not start).
fn drain_body(reader: &mut impl Read) -> io::Result<()> {
    let mut sink = vec![0u8; CHUNK];
    loop {
        match read_chunk_header(reader)? {
            Chunk::Data(n) => reader.read_exact(&mut sink[..n])?,
            Chunk::End | Chunk::Abort => return Ok(()),
        }
    }
}

/// A PUT or UploadPart: the body into the writer, its digests back to the client, then the
/// client's decision (commit or discard). A client that goes away midway leaves nothing: the
/// writer is dropped, which discards what it staged.
fn receive_body(
    opened: StoreResult<BoxedWriter>,
    reader: &mut (impl Read + Send),
    writer: &mut impl Write,
) -> io::Result<()> {
    let mut object = match opened {
        Ok(object) => object,
        Err(err) => {
            drain_body(reader)?;
            return refuse_body(&err, reader, writer);
        }
    };
    let mut failed: Option<StoreError> = None;
    let mut store = |bytes: &[u8]| {
        if failed.is_none()
            && let Err(err) = object.write_all(bytes)
        {
            failed = Some(err);
        }
    };
    // A body of one chunk is written here; a longer one is read from the socket by a second
    // thread while this one hashes and writes (as the HTTP door overlaps the two), with at
    // most two chunks waiting between them.
    let mut first = vec![0u8; CHUNK];
    let complete = match read_chunk_header(reader)? {
        Chunk::Data(n) => {
            reader.read_exact(&mut first[..n])?;
            first.truncate(n);
            match read_chunk_header(reader)? {
                Chunk::End => {
                    store(&first);
                    true
                }
                Chunk::Abort => false,
                Chunk::Data(next) => std::thread::scope(|scope| {
                    let (chunks, received) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
                    let socket_reader = &mut *reader;
                    let socket = scope.spawn(move || read_rest(socket_reader, next, &chunks));
                    store(&first);
                    for chunk in received {
                        store(&chunk);
                    }
                    socket.join().unwrap_or_else(|_| Err(io::Error::other("the body reader failed")))
                })?,
            }
        }
        Chunk::End => true,
        Chunk::Abort => false,
    };
    if !complete {
        // The client gave up: nothing is stored and nothing is answered.
        return Ok(());
    }
    if let Some(err) = failed {
        return refuse_body(&err, reader, writer);
    }
    write_frame(writer, &Ok::<_, WireError>(object.digests()))?;
    writer.flush()?;
    let result = match read_decision(reader)? {
        1 => object.commit().map(Reply::Info),
        _ => Ok(Reply::Done),
    };
    write_frame(writer, &result.map_err(|e| WireError::from(&e)))
}

/// Reads the rest of a body (its next chunk is `next` bytes) into `chunks`; whether it ended
/// (true) or the client broke it off (false).
fn read_rest(reader: &mut impl Read, next: usize, chunks: &std::sync::mpsc::SyncSender<Vec<u8>>) -> io::Result<bool> {
    let mut pending = Some(next);
    loop {
        let n = match pending.take() {
            Some(n) => n,
            None => match read_chunk_header(reader)? {
                Chunk::Data(n) => n,
                Chunk::End => return Ok(true),
                Chunk::Abort => return Ok(false),
            },
        };
        let mut chunk = vec![0u8; n];
        reader.read_exact(&mut chunk)?;
        // The writer stops taking chunks only when it is done; the body is read to its end
        // all the same, so the connection stays in step.
        let _ = chunks.send(chunk);
    }
}

/// The client's decision after a body: 1 commit, 0 discard. It is always sent, also when the
/// answer is an error (a client may send it before it reads the answer).
fn read_decision(reader: &mut impl Read) -> io::Result<u8> {
    let mut decision = [0u8; 1];
    reader.read_exact(&mut decision)?;
    Ok(decision[0])
}

/// Answers a body that cannot be stored with `err`, and takes the decision that follows.
fn refuse_body(err: &StoreError, reader: &mut impl Read, writer: &mut impl Write) -> io::Result<()> {
    write_frame(writer, &Err::<isthmus_store::Digests, _>(WireError::from(err)))?;
    writer.flush()?;
    read_decision(reader).map(drop)
}

/// Whether the object may be written in place, and its size: `Reply::UpdateFile`, with no
/// descriptor (the peer writes with `Update*` requests, each judged and bounded here:
/// `in_place`), to a peer of protocol 4; `Reply::Done` (write the object whole) where the
/// store cannot, and to a peer of protocol 3, which expects the file read-write with the reply.
/// That descriptor is never passed any more, to anyone: a passed descriptor cannot be bounded,
/// so it let its holder grow the object past its size and its bucket's quota, and write a file
/// its own Unix user could not reach by path, outside every check the gateway makes.
fn update_file(
    store: &dyn Store,
    cx: &RequestContext,
    (bucket, key): (&str, &str),
    offered: bool,
) -> StoreResult<Reply> {
    if !offered {
        return Ok(Reply::Done);
    }
    let Some(files) = store.files() else { return Ok(Reply::Done) };
    Ok(match files.object_file_for_update(cx, bucket, key)? {
        Some(file) => Reply::UpdateFile { size: file.size(), durability: file.durability() },
        None => Reply::Done,
    })
}

/// A GET: the description, then the bytes in chunks; a read error midway breaks the body off
/// and is reported after it. With `passes`, a large object that is one file is answered with
/// the file's descriptor instead: opened by the engine call, so with the request's identity
/// and read-only; the peer may read this object, and the descriptor reaches nothing else.
fn send_body(
    store: &dyn Store,
    cx: &RequestContext,
    (bucket, key): (&str, &str),
    request: &isthmus_store::GetRequest,
    writer: &mut BufWriter<UnixStream>,
    passes: bool,
) -> io::Result<()> {
    let response = match store.get_object(cx, bucket, key, request) {
        Ok(response) => response,
        Err(err) => return write_frame(writer, &Err::<Reply, _>(WireError::from(&err))),
    };
    let mut body = response.body;
    let length = body.remaining();
    if passes
        && length >= DESCRIPTOR_MIN
        && let Some((file, offset)) = body.file()
    {
        let reply = Reply::GetFile { info: response.info, range: response.range, offset, length };
        writer.flush()?;
        return send_with_descriptor(writer.get_ref(), &frame_bytes(&Ok::<_, WireError>(reply))?, file);
    }
    write_frame(writer, &Ok::<_, WireError>(Reply::Get { info: response.info, range: response.range, length }))?;
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(length).unwrap_or(CHUNK)).max(1)];
    let mut left = length;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match body.read(&mut buf[..want]) {
            Ok(0) => {
                let err = StoreError::Remote {
                    code: "InternalError",
                    status: 500,
                    message: "the object became shorter while it was read".into(),
                };
                write_abort(writer)?;
                return write_frame(writer, &WireError::from(&err));
            }
            Ok(n) => {
                write_chunks(writer, &buf[..n])?;
                left -= n as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                write_abort(writer)?;
                return write_frame(writer, &WireError::from(&StoreError::from(err)));
            }
        }
    }
    write_end(writer)
}
