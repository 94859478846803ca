//! In-place writes over the socket (protocol 4): the gateway's side, which serves each
//! `Update*` request against the object's file it opens and judges again for it, and the
//! client's, `SocketUpdate`, through which an `UpdateFile` from `LocalStore` reads and writes.
//!
//! Why requests and not a descriptor (protocol 3 passed the file read-write): a descriptor
//! cannot be bounded. A regular file has no seal (F_SEAL_GROW is for memfd), so whoever holds
//! a writable descriptor can grow the object past its size and its bucket's quota, and keeps
//! writing after a permission or policy change, whatever the gateway checked when it opened
//! the file, even a file its Unix user could never reach by path. A request is judged when it
//! comes: the engine call (bucket, token scope, the kernel as the peer's Unix user), the size
//! the peer was told against the file's size now, every byte inside the object before any is
//! written, the file's `flock` as in-process writers take it. Nothing a peer sends can make an
//! object larger, so a quota counted in bytes still holds.

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isthmus_store::{
    HeadRequest, LockedFile, RemoteUpdate, RequestContext, Store, StoreError, StoreResult, UpdateFile,
};

use crate::pool::{Connection, Shared, lost};
use crate::protocol::{
    CHUNK, Chunk, InPlace, MAX_UPDATE_PIECES, Pieces, Reply, Request, WireError, read_chunk_header, read_frame,
    write_abort, write_chunks, write_end, write_frame,
};

// ---- The gateway's side ----

/// What a connection holds for in-place requests: the file its peer locked (`UpdateLock`)
/// and since when.
pub(crate) struct Held {
    locked: Option<(LockedFile, Instant)>,
    /// How long the peer may leave the connection idle while it holds a lock.
    idle: Duration,
}

/// A lock is let go after it was held this many times `Held::idle`, however busy its peer.
const LOCK_MAX_IDLES: u32 = 6;

impl Held {
    pub(crate) fn new(idle: Duration) -> Self {
        Self { locked: None, idle }
    }

    /// Lets the locked file go (the peer unlocked, or its identity changed).
    pub(crate) fn release(&mut self) {
        self.locked = None;
    }

    /// How long the connection may wait for the peer's next request: the idle bound while it
    /// holds a lock (a peer silent longer loses the connection, and the lock with it), without
    /// limit otherwise. A lock held past `LOCK_MAX_IDLES` idle bounds is let go first. Other
    /// writers of the file wait for the lock (in-process writers in `flock`): a peer that takes
    /// it and stops does not stall them for longer.
    pub(crate) fn idle_limit(&mut self) -> Option<Duration> {
        if self.locked.as_ref().is_some_and(|(_, since)| since.elapsed() > self.idle * LOCK_MAX_IDLES) {
            self.release();
        }
        self.locked.as_ref().map(|_| self.idle)
    }
}

/// What a request does with the object's bytes: a write is judged as an in-place update; a
/// read (or a lock, taken to read, merge and write) also as a GET of the object, so a peer
/// that may write but not read the object reads none of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Write,
    ReadWrite,
}

/// The object's file for one request, if it still has the `size` the peer was told. A file
/// that changed, was deleted or may no longer be written in place (its bucket became versioned
/// or began to move) is `PreconditionFailed`: the peer opens the object again.
fn open(store: &dyn Store, cx: &RequestContext, object: (&str, &str, u64), access: Access) -> StoreResult<UpdateFile> {
    let (bucket, key, size) = object;
    let changed = |err| match err {
        StoreError::NoSuchKey => StoreError::PreconditionFailed,
        err => err,
    };
    if access == Access::ReadWrite {
        store.head_object(cx, bucket, key, &HeadRequest::default()).map_err(changed)?;
    }
    let Some(files) = store.files() else { return Err(StoreError::PreconditionFailed) };
    match files.object_file_for_update(cx, bucket, key).map_err(changed)? {
        Some(file) if file.size() == size => Ok(file),
        _ => Err(StoreError::PreconditionFailed),
    }
}

/// The file an in-place request reads or writes.
enum Target<'a> {
    /// Opened and judged for this request alone.
    Opened(UpdateFile),
    /// The file the connection holds locked.
    Locked(&'a LockedFile),
}

impl<'a> Target<'a> {
    fn of(store: &dyn Store, cx: &RequestContext, held: &'a Held, file: &InPlace, access: Access) -> StoreResult<Self> {
        match file {
            InPlace::Object { bucket, key, size } => open(store, cx, (bucket, key, *size), access).map(Target::Opened),
            InPlace::Locked => held.locked.as_ref().map(|(locked, _)| Target::Locked(locked)).ok_or_else(|| {
                StoreError::InvalidRequest("no object is locked on this connection: send UpdateLock first".into())
            }),
        }
    }

    fn file(&self) -> &UpdateFile {
        match self {
            Target::Opened(file) => file,
            Target::Locked(locked) => locked.file(),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        match self {
            Target::Opened(file) => file.read_at(offset, buf),
            Target::Locked(locked) => locked.read_at(offset, buf),
        }
    }
}

fn reply(writer: &mut impl Write, result: StoreResult<Reply>) -> io::Result<()> {
    write_frame(writer, &result.map_err(|e| WireError::from(&e)))
}

/// Serves one in-place request (the caller checked the protocol version).
pub(crate) fn serve(
    store: &dyn Store,
    cx: &RequestContext,
    held: &mut Held,
    request: Request,
    reader: &mut impl Read,
    writer: &mut impl Write,
) -> io::Result<()> {
    match request {
        Request::UpdateRead { file, offset, length } => match Target::of(store, cx, held, &file, Access::ReadWrite) {
            Ok(target) => send_bytes(&target, offset, length, writer),
            Err(err) => reply(writer, Err(err)),
        },
        Request::UpdateWrite { file, pieces } => {
            let mut body = Body { reader, in_chunk: 0, end: None };
            let written = match Target::of(store, cx, held, &file, Access::Write) {
                Ok(target) => write_pieces(&target, &pieces.0, &mut body)?,
                Err(err) => Err(err),
            };
            // The body is read to its end whatever happened, so the connection stays in step.
            let rest = body.finish()?;
            reply(writer, written.and(rest).map(|()| Reply::Done))
        }
        Request::UpdateLock { bucket, key, size } => {
            let result = if held.locked.is_some() {
                Err(StoreError::InvalidRequest("this connection holds a locked object already".into()))
            } else {
                open(store, cx, (&bucket, &key, size), Access::ReadWrite).and_then(UpdateFile::into_locked).map(
                    |locked| {
                        held.locked = Some((locked, Instant::now()));
                        Reply::Done
                    },
                )
            };
            reply(writer, result)
        }
        Request::UpdateUnlock => {
            held.release();
            reply(writer, Ok(Reply::Done))
        }
        Request::UpdateSync { file } => {
            let synced = Target::of(store, cx, held, &file, Access::Write).and_then(|target| target.file().commit());
            reply(writer, synced.map(|()| Reply::Done))
        }
        other => reply(writer, Err(StoreError::InvalidRequest(format!("{other:?} is not an in-place request")))),
    }
}

/// An `UpdateRead`: the reply, then the bytes in chunks (a read error midway breaks the body
/// off and is reported after it, as a GET's).
fn send_bytes(target: &Target<'_>, offset: u64, length: u64, writer: &mut impl Write) -> io::Result<()> {
    if let Err(err) = target.file().check_inside(offset, length) {
        return reply(writer, Err(err));
    }
    reply(writer, Ok(Reply::Bytes { length }))?;
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(length).unwrap_or(CHUNK))];
    let mut done = 0;
    while done < length {
        let n = buf.len().min(usize::try_from(length - done).unwrap_or(usize::MAX));
        if let Err(err) = target.read_at(offset + done, &mut buf[..n]) {
            write_abort(writer)?;
            return write_frame(writer, &WireError::from(&err));
        }
        write_chunks(writer, &buf[..n])?;
        done += n as u64;
    }
    write_end(writer)
}

/// An `UpdateWrite`'s pieces into the file: every piece checked inside the object before a
/// byte is written, then the body's bytes in order under the file's lock (taken for this
/// request, or the one the connection holds), synced after a request's own lock if the store
/// is strictly durable. `Err` only when the socket failed.
fn write_pieces(
    target: &Target<'_>,
    pieces: &[(u64, u64)],
    body: &mut Body<'_, impl Read>,
) -> io::Result<StoreResult<()>> {
    let file = target.file();
    if let Err(err) = pieces.iter().try_for_each(|&(offset, length)| file.check_inside(offset, length)) {
        return Ok(Err(err));
    }
    // Replaced or truncated since it was opened (by a program that takes no lock): a write
    // now could make a truncated object larger again.
    let current = |file: &UpdateFile| if file.still_current() { Ok(()) } else { Err(StoreError::PreconditionFailed) };
    match target {
        Target::Opened(file) => {
            let lock = match file.lock().and_then(|lock| current(file).map(|()| lock)) {
                Ok(lock) => lock,
                Err(err) => return Ok(Err(err)),
            };
            let written = copy_body(body, pieces, |at, bytes| lock.write_at(at, bytes))?;
            drop(lock);
            Ok(written.and_then(|()| file.commit()))
        }
        Target::Locked(locked) => match current(locked.file()) {
            Ok(()) => copy_body(body, pieces, |at, bytes| locked.write_at(at, bytes)),
            Err(err) => Ok(Err(err)),
        },
    }
}

/// The body's bytes into the pieces, a chunk's worth at a time; a body shorter than the
/// pieces stops the writes there (what was written stays: in-place writes are not atomic).
fn copy_body(
    body: &mut Body<'_, impl Read>,
    pieces: &[(u64, u64)],
    write_at: impl Fn(u64, &[u8]) -> StoreResult<()>,
) -> io::Result<StoreResult<()>> {
    let longest = pieces.iter().map(|&(_, length)| length).max().unwrap_or(0);
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(longest).unwrap_or(CHUNK))];
    for &(offset, length) in pieces {
        let mut done = 0u64;
        while done < length {
            let want = buf.len().min(usize::try_from(length - done).unwrap_or(usize::MAX));
            let got = body.fill(&mut buf[..want])?;
            if got < want {
                return Ok(Err(StoreError::InvalidRequest("the body ended before the pieces' bytes".into())));
            }
            if let Err(err) = write_at(offset + done, &buf[..got]) {
                return Ok(Err(err));
            }
            done += got as u64;
        }
    }
    Ok(Ok(()))
}

/// A request's body as it arrives in chunks.
struct Body<'a, R> {
    reader: &'a mut R,
    in_chunk: usize,
    /// Set once the end (true) or an abort (false) arrived.
    end: Option<bool>,
}

impl<R: Read> Body<'_, R> {
    /// Fills `buf` from the body; fewer bytes only where the body ended.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            if self.in_chunk == 0 {
                if self.end.is_some() {
                    break;
                }
                match read_chunk_header(self.reader)? {
                    Chunk::Data(n) => self.in_chunk = n,
                    Chunk::End => self.end = Some(true),
                    Chunk::Abort => self.end = Some(false),
                }
                continue;
            }
            let n = self.in_chunk.min(buf.len() - filled);
            self.reader.read_exact(&mut buf[filled..filled + n])?;
            self.in_chunk -= n;
            filled += n;
        }
        Ok(filled)
    }

    /// Reads what is left of the body; an error if bytes were left over or the client broke
    /// the body off.
    fn finish(mut self) -> io::Result<StoreResult<()>> {
        let mut extra = false;
        if self.end.is_none() || self.in_chunk > 0 {
            let mut sink = vec![0u8; 64 << 10];
            while self.fill(&mut sink)? > 0 {
                extra = true;
            }
        }
        Ok(match self.end {
            Some(false) => Err(StoreError::InvalidRequest("the client broke the body off".into())),
            _ if extra => Err(StoreError::InvalidRequest("the body is longer than its pieces".into())),
            _ => Ok(()),
        })
    }
}

// ---- The client's side ----

/// An object the gateway lets this process write in place: every call is a request on the
/// socket, for the object at the size the gateway answered. A lock (`lock` to `unlock`) holds
/// one connection, on which the gateway keeps the locked file; other calls take any.
pub(crate) struct SocketUpdate {
    shared: Arc<Shared>,
    bucket: String,
    key: String,
    size: u64,
    locked: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for SocketUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketUpdate")
            .field("bucket", &self.bucket)
            .field("key", &self.key)
            .field("size", &self.size)
            .finish()
    }
}

impl SocketUpdate {
    pub(crate) fn new(shared: Arc<Shared>, bucket: &str, key: &str, size: u64) -> Self {
        Self { shared, bucket: bucket.into(), key: key.into(), size, locked: Mutex::new(None) }
    }

    fn object(&self) -> InPlace {
        InPlace::Object { bucket: self.bucket.clone(), key: self.key.clone(), size: self.size }
    }

    /// One request on `conn` (with `pieces` as its body), its reply, and into `read` the
    /// bytes an `UpdateRead` answers. `Err`: the connection is out of step (lost, or a reply
    /// it could not take), and is not used again.
    fn exchange(
        conn: &mut Connection,
        request: &Request,
        pieces: &[(u64, &[u8])],
        read: &mut [u8],
    ) -> io::Result<StoreResult<()>> {
        write_frame(&mut conn.writer, request)?;
        if request.has_body() {
            for (_, bytes) in pieces {
                write_chunks(&mut conn.writer, bytes)?;
            }
            write_end(&mut conn.writer)?;
        }
        conn.writer.flush()?;
        let reply: Result<Reply, WireError> = read_frame(&mut conn.reader)?;
        match reply {
            Ok(Reply::Bytes { length }) if length == read.len() as u64 => receive_bytes(conn, read),
            Ok(Reply::Done) if read.is_empty() => Ok(Ok(())),
            Ok(other) => Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected reply {other:?}"))),
            Err(err) => Ok(Err(StoreError::from(err))),
        }
    }

    /// `exchange` on a connection of the pool.
    fn call(&self, request: &Request, pieces: &[(u64, &[u8])], read: &mut [u8]) -> StoreResult<()> {
        let mut conn = self.shared.take()?;
        let result = Self::exchange(&mut conn, request, pieces, read).map_err(lost)?;
        self.shared.give_back(conn);
        result
    }

    /// `exchange` on the connection that holds the lock.
    fn call_locked(&self, request: &Request, pieces: &[(u64, &[u8])], read: &mut [u8]) -> StoreResult<()> {
        let mut locked = self.locked.lock().unwrap_or_else(|e| e.into_inner());
        let conn = locked.as_mut().ok_or_else(|| StoreError::InvalidRequest("the object is not locked".into()))?;
        match Self::exchange(conn, request, pieces, read) {
            Ok(result) => result,
            Err(err) => {
                // The gateway lets the file go when the connection ends.
                *locked = None;
                Err(lost(err))
            }
        }
    }
}

/// The bytes of an `UpdateRead` into `buf`: chunks, then the end (or an abort and the error).
fn receive_bytes(conn: &mut Connection, buf: &mut [u8]) -> io::Result<StoreResult<()>> {
    let mut filled = 0;
    loop {
        match read_chunk_header(&mut conn.reader)? {
            Chunk::Data(n) if n <= buf.len() - filled => {
                conn.reader.read_exact(&mut buf[filled..filled + n])?;
                filled += n;
            }
            Chunk::Data(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "more bytes than asked for")),
            Chunk::End if filled == buf.len() => return Ok(Ok(())),
            Chunk::End => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "fewer bytes than asked for")),
            Chunk::Abort => {
                let err: WireError = read_frame(&mut conn.reader)?;
                return Ok(Err(err.into()));
            }
        }
    }
}

impl RemoteUpdate for SocketUpdate {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        let request = Request::UpdateRead { file: self.object(), offset, length: buf.len() as u64 };
        self.call(&request, &[], buf)
    }

    fn write(&self, pieces: &[(u64, &[u8])]) -> StoreResult<()> {
        for batch in pieces.chunks(MAX_UPDATE_PIECES) {
            let lengths = Pieces(batch.iter().map(|(offset, bytes)| (*offset, bytes.len() as u64)).collect());
            self.call(&Request::UpdateWrite { file: self.object(), pieces: lengths }, batch, &mut [])?;
        }
        Ok(())
    }

    fn lock(&self) -> StoreResult<()> {
        let mut conn = self.shared.take()?;
        let request = Request::UpdateLock { bucket: self.bucket.clone(), key: self.key.clone(), size: self.size };
        let locked = Self::exchange(&mut conn, &request, &[], &mut []).map_err(lost)?;
        if let Err(err) = locked {
            self.shared.give_back(conn);
            return Err(err);
        }
        *self.locked.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn);
        Ok(())
    }

    fn read_locked(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        let request = Request::UpdateRead { file: InPlace::Locked, offset, length: buf.len() as u64 };
        self.call_locked(&request, &[], buf)
    }

    fn write_locked(&self, offset: u64, bytes: &[u8]) -> StoreResult<()> {
        let request =
            Request::UpdateWrite { file: InPlace::Locked, pieces: Pieces(vec![(offset, bytes.len() as u64)]) };
        self.call_locked(&request, &[(offset, bytes)], &mut [])
    }

    fn unlock(&self) {
        let taken = self.locked.lock().unwrap_or_else(|e| e.into_inner()).take();
        // A connection that cannot unlock is dropped: the gateway lets the file go when it ends.
        if let Some(mut conn) = taken
            && matches!(Self::exchange(&mut conn, &Request::UpdateUnlock, &[], &mut []), Ok(Ok(())))
        {
            self.shared.give_back(conn);
        }
    }

    fn sync(&self) -> StoreResult<()> {
        self.call(&Request::UpdateSync { file: self.object() }, &[], &mut [])
    }
}
