//! The client side of the local door: `LocalStore`, a `Store` whose calls go over the socket to
//! a gateway on the same node, so the in-process doors (C library, libs3 drop-in, Python) speak
//! it with the same calls as to the engine in-process. Connections are pooled; bodies stream
//! both ways in chunks, so memory stays bounded whatever the object's size.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use isthmus_store::{
    BoxedReader, BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CompletedPart, CopyRequest, CreateBucketRequest,
    DeleteOutcome, DeleteRequest, Digests, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest,
    ListRequest, ListUploadsRequest, ListVersionsRequest, MultipartStore, ObjectChange, ObjectFiles, ObjectInfo,
    ObjectRead, ObjectWrite, PartRequest, PartsPage, PutRequest, RequestContext, Store, StoreError, StoreResult,
    UpdateFile, UploadsPage, VersionsPage,
};

use crate::in_place::SocketUpdate;
use crate::pool::{Connection, Shared, lost};
use crate::protocol::{
    Chunk, Reply, Request, VERSION_EVERY_CALL, VERSION_UPDATE_REQUESTS, WireError, read_chunk_header, read_frame,
    write_chunks, write_end,
};
use isthmus_store::file_stretch::FileStretch;

/// The socket path of a `unix:` address (`unix:///run/isthmus.sock` or `unix:/run/isthmus.sock`).
pub fn socket_path(address: &str) -> Option<PathBuf> {
    let rest = address.strip_prefix("unix:")?;
    let path = rest.strip_prefix("//").unwrap_or(rest);
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// An engine reached through a gateway's local socket. The gateway knows the caller by its
/// uid; the request context passed to each call is not sent (the peer is who it is).
#[derive(Clone)]
pub struct LocalStore {
    shared: Arc<Shared>,
}

impl LocalStore {
    /// Connects to the gateway at `path`; fails (AccessDenied) if the gateway maps this
    /// process's uid to no user.
    pub fn connect(path: impl AsRef<Path>) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let (conn, user) = Connection::open(&path)?;
        Ok(Self { shared: Arc::new(Shared::new(path, user, conn)) })
    }

    /// The S3 user the gateway serves this process as.
    pub fn user(&self) -> &str {
        self.shared.user()
    }

    /// One call with a reply and nothing streamed.
    fn call(&self, request: &Request) -> StoreResult<Reply> {
        self.call_from(1, request)
    }

    /// `call`, of a request the gateway knows from protocol `version` on: NotImplemented, and
    /// nothing sent, where the gateway is older (it would take the request for garbage).
    fn call_from(&self, version: u16, request: &Request) -> StoreResult<Reply> {
        let mut conn = self.shared.take()?;
        if conn.version < version {
            let spoken = conn.version;
            self.shared.give_back(conn);
            return Err(StoreError::NotImplemented(format!(
                "this call needs local protocol version {version}; the gateway speaks {spoken}: upgrade the gateway"
            )));
        }
        conn.send(request).map_err(lost)?;
        let reply: Result<Reply, WireError> = conn.receive().map_err(lost)?;
        self.shared.give_back(conn);
        reply.map_err(StoreError::from)
    }

    fn writer(&self, request: &Request) -> StoreResult<BoxedWriter> {
        let mut conn = self.shared.take()?;
        conn.send(request).map_err(lost)?;
        Ok(Box::new(LocalWriter { shared: self.shared.clone(), state: RefCell::new(WriteState::Sending(conn)) }))
    }
}

pub(crate) fn unexpected(reply: Reply) -> StoreError {
    StoreError::Remote {
        code: "InternalError",
        status: 500,
        message: format!("unexpected reply from the gateway: {reply:?}"),
    }
}

macro_rules! expect {
    ($reply:expr, $variant:pat => $value:expr) => {
        match $reply? {
            $variant => Ok($value),
            other => Err(unexpected(other)),
        }
    };
}

/// A body being sent: chunks until `digests` or `commit` ends it.
enum WriteState {
    Sending(Connection),
    /// The body ended; the gateway answered its digests.
    Ended(Connection, Digests),
    Failed(StoreError),
    Done,
}

struct LocalWriter {
    shared: Arc<Shared>,
    state: RefCell<WriteState>,
}

impl LocalWriter {
    /// Ends the body (once) and learns its digests from the gateway; with `commit`, the
    /// decision goes with the end (one round trip) and the committed object is returned.
    fn end(&self, commit: bool) -> Option<StoreResult<ObjectInfo>> {
        let mut state = self.state.borrow_mut();
        if !matches!(&*state, WriteState::Sending(_)) {
            return None;
        }
        let WriteState::Sending(mut conn) = std::mem::replace(&mut *state, WriteState::Done) else { unreachable!() };
        let decision: &[u8] = if commit { &[1] } else { &[] };
        let answer = write_end(&mut conn.writer)
            .and_then(|()| conn.writer.write_all(decision))
            .and_then(|()| conn.writer.flush())
            .and_then(|()| conn.receive::<Digests>());
        let failed = match answer {
            Ok(Ok(digests)) if !commit => {
                *state = WriteState::Ended(conn, digests);
                return None;
            }
            Ok(Ok(_)) => {
                return Some(conn.receive().map_err(lost).and_then(|reply: Result<Reply, WireError>| {
                    self.shared.give_back(conn);
                    expect!(reply.map_err(StoreError::from), Reply::Info(info) => info)
                }));
            }
            Ok(Err(err)) => {
                // The gateway still takes a decision (a commit sent it already).
                if commit || conn.writer.write_all(&[0]).and_then(|()| conn.writer.flush()).is_ok() {
                    self.shared.give_back(conn);
                }
                StoreError::from(err)
            }
            Err(err) => lost(err),
        };
        if commit {
            return Some(Err(failed));
        }
        *state = WriteState::Failed(failed);
        None
    }
}

impl ObjectWrite for LocalWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        match self.state.get_mut() {
            WriteState::Sending(conn) => write_chunks(&mut conn.writer, bytes).map_err(lost),
            _ => Err(StoreError::InvalidRequest("the body was already ended".into())),
        }
    }

    fn digests(&self) -> Digests {
        self.end(false);
        match &*self.state.borrow() {
            WriteState::Ended(_, digests) => digests.clone(),
            _ => Digests::default(),
        }
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        if let Some(result) = self.end(true) {
            return result;
        }
        match self.state.replace(WriteState::Done) {
            WriteState::Ended(mut conn, _) => {
                conn.writer.write_all(&[1]).and_then(|()| conn.writer.flush()).map_err(lost)?;
                let reply: Result<Reply, WireError> = conn.receive().map_err(lost)?;
                self.shared.give_back(conn);
                expect!(reply.map_err(StoreError::from), Reply::Info(info) => info)
            }
            WriteState::Failed(err) => Err(err),
            WriteState::Sending(_) | WriteState::Done => {
                Err(StoreError::InvalidRequest("the body was not sent".into()))
            }
        }
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        // Not committed: tell the gateway to discard what it staged, keep the connection.
        if let WriteState::Ended(mut conn, _) = std::mem::replace(self.state.get_mut(), WriteState::Done)
            && conn.writer.write_all(&[0]).and_then(|()| conn.writer.flush()).is_ok()
            && matches!(conn.receive::<Reply>(), Ok(Ok(Reply::Done)))
        {
            self.shared.give_back(conn);
        }
        // A body still being sent: the connection is closed, and the gateway drops the write.
    }
}

/// A GET body arriving in chunks.
struct LocalReader {
    shared: Arc<Shared>,
    conn: Option<Connection>,
    remaining: u64,
    in_chunk: usize,
}

impl Read for LocalReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(conn) = self.conn.as_mut() else { return Ok(0) };
        if self.in_chunk == 0 {
            match read_chunk_header(&mut conn.reader)? {
                Chunk::Data(n) => self.in_chunk = n,
                Chunk::End => {
                    let conn = self.conn.take().expect("checked above");
                    self.shared.give_back(conn);
                    return Ok(0);
                }
                Chunk::Abort => {
                    let err: WireError = read_frame(&mut conn.reader)?;
                    self.conn = None;
                    return Err(io::Error::other(err.message));
                }
            }
        }
        let want = buf.len().min(self.in_chunk);
        let n = conn.reader.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the local gateway closed the connection"));
        }
        self.in_chunk -= n;
        self.remaining -= n as u64;
        if self.remaining == 0 && self.in_chunk == 0 {
            // Consume the end marker so the connection can serve the next call.
            if let Some(mut conn) = self.conn.take()
                && matches!(read_chunk_header(&mut conn.reader), Ok(Chunk::End))
            {
                self.shared.give_back(conn);
            }
        }
        Ok(n)
    }
}

impl ObjectRead for LocalReader {
    fn remaining(&self) -> u64 {
        self.remaining
    }
}

impl Store for LocalStore {
    fn list_buckets(&self, _cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        expect!(self.call(&Request::ListBuckets), Reply::Buckets(b) => b)
    }

    fn create_bucket(&self, _cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        let request = Request::CreateBucket { bucket: bucket.into(), request: request.clone() };
        expect!(self.call(&request), Reply::Done => ())
    }

    fn head_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        expect!(self.call(&Request::HeadBucket { bucket: bucket.into() }), Reply::Done => ())
    }

    fn bucket_facts(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        let request = Request::BucketFacts { bucket: bucket.into() };
        expect!(self.call_from(VERSION_EVERY_CALL, &request), Reply::Facts(facts) => facts)
    }

    fn delete_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        expect!(self.call(&Request::DeleteBucket { bucket: bucket.into() }), Reply::Done => ())
    }

    fn bucket_config(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        let request = Request::BucketConfig { bucket: bucket.into() };
        expect!(self.call_from(VERSION_EVERY_CALL, &request), Reply::Config { config, version } => {
            BucketConfig { version, ..config }
        })
    }

    fn set_bucket_config(&self, _cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        let (config, version) = (config.clone(), config.version.clone());
        let request = Request::SetBucketConfig { bucket: bucket.into(), config, version };
        expect!(self.call_from(VERSION_EVERY_CALL, &request), Reply::Done => ())
    }

    fn put_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        self.writer(&Request::PutObject { bucket: bucket.into(), key: key.into(), request })
    }

    fn get_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        let mut conn = self.shared.take()?;
        let request = Request::GetObject { bucket: bucket.into(), key: key.into(), request: request.clone() };
        conn.send(&request).map_err(lost)?;
        let reply: Result<Reply, WireError> = conn.receive().map_err(lost)?;
        match reply {
            Ok(Reply::Get { info, range, length }) => {
                let mut reader =
                    LocalReader { shared: self.shared.clone(), conn: Some(conn), remaining: length, in_chunk: 0 };
                if length == 0 {
                    // Only the end marker follows: read it, so the connection serves again.
                    reader.read(&mut [0u8; 1]).map_err(lost)?;
                }
                let body: BoxedReader = Box::new(reader);
                Ok(GetResponse { info, body, range })
            }
            Ok(Reply::GetFile { info, range, offset, length }) => {
                let file = conn.reader.take_descriptor();
                self.shared.give_back(conn);
                let file = file.ok_or_else(|| lost(io::Error::other("the gateway passed no descriptor")))?;
                let body: BoxedReader = Box::new(FileStretch::new(std::fs::File::from(file), offset, length));
                Ok(GetResponse { info, body, range })
            }
            Ok(other) => Err(unexpected(other)),
            Err(err) => {
                self.shared.give_back(conn);
                Err(err.into())
            }
        }
    }

    fn head_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        let request = Request::HeadObject { bucket: bucket.into(), key: key.into(), request: request.clone() };
        expect!(self.call(&request), Reply::Info(info) => info)
    }

    fn delete_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        let request = Request::DeleteObject { bucket: bucket.into(), key: key.into(), request: request.clone() };
        expect!(self.call(&request), Reply::Deleted(outcome) => outcome)
    }

    fn copy_object(
        &self,
        _cx: &RequestContext,
        source: (&str, &str),
        target: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        let request = Request::CopyObject {
            source: (source.0.into(), source.1.into()),
            target: (target.0.into(), target.1.into()),
            request: request.clone(),
        };
        expect!(self.call(&request), Reply::Info(info) => info)
    }

    fn list_objects(&self, _cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        let request = Request::ListObjects { bucket: bucket.into(), request: request.clone() };
        expect!(self.call(&request), Reply::Page(page) => page)
    }

    fn list_object_versions(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        let request = Request::ListObjectVersions { bucket: bucket.into(), request: request.clone() };
        expect!(self.call_from(VERSION_EVERY_CALL, &request), Reply::Versions(page) => page)
    }

    fn update_object(&self, _cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()> {
        let request = Request::UpdateObject { bucket: bucket.into(), key: key.into(), change };
        expect!(self.call_from(VERSION_EVERY_CALL, &request), Reply::Done => ())
    }

    /// In-place writes, when the gateway offers them.
    fn files(&self) -> Option<&dyn ObjectFiles> {
        Some(self)
    }
}

impl MultipartStore for LocalStore {
    fn create_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        let request = Request::CreateMultipartUpload { bucket: bucket.into(), key: key.into(), request };
        expect!(self.call(&request), Reply::UploadId(id) => id)
    }

    fn upload_part(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        self.writer(&Request::UploadPart {
            bucket: bucket.into(),
            key: key.into(),
            upload_id: upload_id.into(),
            request: *request,
        })
    }

    fn complete_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        let request = Request::CompleteMultipartUpload {
            bucket: bucket.into(),
            key: key.into(),
            upload_id: upload_id.into(),
            parts: parts.to_vec(),
            request,
        };
        expect!(self.call(&request), Reply::Info(info) => info)
    }

    fn abort_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> StoreResult<()> {
        let request =
            Request::AbortMultipartUpload { bucket: bucket.into(), key: key.into(), upload_id: upload_id.into() };
        expect!(self.call(&request), Reply::Done => ())
    }

    fn list_parts(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        let request = Request::ListParts {
            bucket: bucket.into(),
            key: key.into(),
            upload_id: upload_id.into(),
            request: *request,
        };
        expect!(self.call(&request), Reply::Parts(parts) => parts)
    }

    fn list_multipart_uploads(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        let request = Request::ListMultipartUploads { bucket: bucket.into(), request: request.clone() };
        expect!(self.call_from(VERSION_EVERY_CALL, &request), Reply::Uploads(page) => page)
    }
}

/// The gateway keeps its files: no descriptor of an object and no derived record crosses the
/// socket; an object's bytes are written in place with requests the gateway judges.
impl ObjectFiles for LocalStore {
    /// `None`: a peer reads an object with GetObject (which may answer with a read-only
    /// descriptor of a large object's file).
    fn object_file(&self, _cx: &RequestContext, _bucket: &str, _key: &str) -> StoreResult<Option<std::fs::File>> {
        Ok(None)
    }

    /// The object for in-place writes, when the gateway offers them (protocol 4): each read
    /// and write is then a request the gateway judges and bounds (`in_place`); `None`
    /// otherwise, and the object is written whole. A gateway of protocol 3 is not asked: it
    /// would answer with a writable descriptor, which this client never takes.
    fn object_file_for_update(&self, _cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>> {
        let mut conn = self.shared.take()?;
        if conn.version < VERSION_UPDATE_REQUESTS {
            self.shared.give_back(conn);
            return Ok(None);
        }
        conn.send(&Request::ObjectFileForUpdate { bucket: bucket.into(), key: key.into() }).map_err(lost)?;
        let reply: Result<Reply, WireError> = conn.receive().map_err(lost)?;
        self.shared.give_back(conn);
        match reply {
            Ok(Reply::UpdateFile { size, durability }) => {
                let requests = SocketUpdate::new(self.shared.clone(), bucket, key, size);
                Ok(Some(UpdateFile::remote(Box::new(requests), size, durability, key)))
            }
            Ok(Reply::Done) => Ok(None),
            Ok(other) => Err(unexpected(other)),
            Err(err) => Err(err.into()),
        }
    }

    /// Records derived from objects are the gateway's cache, neither read nor kept from here.
    fn read_derived(&self, _: &RequestContext, _: &str, _: &str, _: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(None)
    }

    fn write_derived(&self, _: &RequestContext, _: &str, _: &str, _: &str, _: &[u8]) -> StoreResult<()> {
        Ok(())
    }
}
