//! The local door's wire protocol: a handshake that negotiates the version and names the user
//! the peer was authenticated as, then requests and replies as length-prefixed MessagePack
//! frames (the engine's own request and response structs, with field names, so the optional
//! fields the engine's records leave out when empty round-trip), and object bodies as a stream
//! of chunks.
//!
//! ```text
//! handshake  client: MAGIC, u16 lowest version, u16 highest version
//!            server: MAGIC, u16 chosen version (0: refused), frame Result<user name, WireError>
//! request    client: frame Request
//!   with a body (PutObject, UploadPart):
//!            client: chunks, end, then u8 1 commit / 0 discard (it may send the decision
//!                    before it has read the digests: a commit is one round trip)
//!            server: frame Result<Digests, WireError>, reads the decision,
//!                    then (digests Ok) frame Result<Reply, WireError>
//!   GetObject: server: frame Result<Reply::Get, WireError>, then chunks and end
//!              (a read error midway: abort, then frame WireError);
//!              from version 2, for an object that is a stretch of one file of at least
//!              DESCRIPTOR_MIN bytes: frame Reply::GetFile sent with the file's descriptor
//!              (SCM_RIGHTS, read-only), and no chunks: the client reads the file itself
//!   ObjectFileForUpdate (from version 3): server: frame Reply::Done (the peer writes the
//!              object whole). Version 3 passed the object's file read-write with
//!              Reply::UpdateFile; no gateway does any more (see "in place" below).
//!              From version 4: frame Reply::UpdateFile { size, durability }, no descriptor:
//!              the object may be written in place with the Update* requests, or Reply::Done
//!   UpdateRead (from version 4): server: frame Result<Reply::Bytes { length }, WireError>,
//!              then chunks and end as a GetObject's
//!   UpdateWrite (from version 4): client: chunks, end (the pieces' bytes in order, no
//!              decision); server: frame Result<Reply::Done, WireError>
//!   BucketFacts, BucketConfig, SetBucketConfig, ListObjectVersions, UpdateObject,
//!   ListMultipartUploads (from version 5, the rest of the engine's calls): as the others
//!   others:  server: frame Result<Reply, WireError>
//! frame      u32 length (little endian), MessagePack bytes
//! chunk      u32 length (1..=CHUNK), bytes; end = u32 0; abort = u32::MAX
//! ```
//!
//! In place (version 4). A peer writes into an object's existing file (an uncompressed Zarr
//! shard) with requests, never through a descriptor: a passed descriptor cannot be bounded
//! (a regular file has no seal that stops it growing, F_SEAL_* is for memfd), so its holder
//! writes outside every check the gateway makes: it grows the object past its size and its
//! bucket's quota, and keeps writing after its permission is gone, a file its own user may
//! not even reach by path. Each request names the object and the size the peer
//! was told; the gateway opens the object's file again for it, judged as the peer is for every
//! write (`ObjectFiles::object_file_for_update`: bucket, token scope, the kernel as the peer's Unix
//! user), refuses it if the size changed (PreconditionFailed: the object was replaced or
//! truncated, open it again), refuses any byte outside the object before writing one, and
//! writes under the file's `flock` as in-process writers do. A read-merge-write takes the
//! lock for several requests (UpdateLock, then UpdateRead/UpdateWrite of `InPlace::Locked`,
//! UpdateUnlock): the connection holds that file until it unlocks or ends.

use std::io::{self, Read, Write};

use isthmus_store::{
    BucketConfig, BucketFacts, BucketInfo, CompletedPart, CopyRequest, CreateBucketRequest, DeleteOutcome,
    DeleteRequest, Durability, GetRequest, HeadRequest, ListPage, ListPartsRequest, ListRequest, ListUploadsRequest,
    ListVersionsRequest, ObjectChange, ObjectInfo, PartRequest, PartsPage, PutRequest, StoreError, UploadsPage,
    VersionsPage,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Opens both sides of the handshake.
pub const MAGIC: &[u8; 8] = b"ISTHMUS\0";
/// The protocol versions this build speaks.
pub const VERSION_MIN: u16 = 1;
pub const VERSION_MAX: u16 = 5;
/// The first version whose GETs may answer with a descriptor (`Reply::GetFile`).
pub const VERSION_DESCRIPTORS: u16 = 2;
/// The first version with `Request::ObjectFileForUpdate` (answered `Reply::Done` at version 3).
pub const VERSION_UPDATE_FILES: u16 = 3;
/// The first version with in-place writes as requests (`Request::UpdateWrite` and the others).
pub const VERSION_UPDATE_REQUESTS: u16 = 4;
/// The first version that answers every `Store` call (`Request::BucketFacts` and the others
/// after it): a client asks an older gateway none of them.
pub const VERSION_EVERY_CALL: u16 = 5;
/// The most pieces one `UpdateWrite` names (a shard's inner chunks, at most).
pub const MAX_UPDATE_PIECES: usize = 1 << 16;
/// Objects smaller than this are sent in the reply even where descriptors may be passed: a
/// few kilobytes cost less to copy than the client's extra system calls to read a file.
pub const DESCRIPTOR_MIN: u64 = 256 << 10;
/// The largest body chunk.
pub const CHUNK: usize = 1 << 20;
/// The largest frame (a listing page of 1,000 keys with their metadata fits many times over).
pub const MAX_FRAME: usize = 64 << 20;
/// What a frame's buffer starts at before its bytes arrive.
const FRAME_PREALLOCATION: usize = 64 << 10;
const END: u32 = 0;
const ABORT: u32 = u32::MAX;

/// One engine call.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    ListBuckets,
    CreateBucket {
        bucket: String,
        request: CreateBucketRequest,
    },
    HeadBucket {
        bucket: String,
    },
    DeleteBucket {
        bucket: String,
    },
    /// Followed by the body.
    PutObject {
        bucket: String,
        key: String,
        request: PutRequest,
    },
    /// `ObjectFiles::object_file_for_update`: whether the object may be written in place, and its
    /// size.
    ObjectFileForUpdate {
        bucket: String,
        key: String,
    },
    /// Reads `length` bytes at `offset` of the file (from version 4).
    UpdateRead {
        file: InPlace,
        offset: u64,
        length: u64,
    },
    /// Followed by the body: the bytes of each piece `(offset, length)` in order, written into
    /// the file under its lock, then synced if the store is strictly durable (from version 4;
    /// `InPlace::Locked`: under the lock the connection holds, not synced: `UpdateSync`).
    UpdateWrite {
        file: InPlace,
        pieces: Pieces,
    },
    /// Opens the object's file for update, checks it still has `size` bytes and takes its
    /// lock; the connection holds both for `InPlace::Locked` (from version 4).
    UpdateLock {
        bucket: String,
        key: String,
        size: u64,
    },
    /// Gives up the file `UpdateLock` took (from version 4).
    UpdateUnlock,
    /// Makes the writes into the file durable if the store is strictly durable (from version 4).
    UpdateSync {
        file: InPlace,
    },
    GetObject {
        bucket: String,
        key: String,
        request: GetRequest,
    },
    HeadObject {
        bucket: String,
        key: String,
        request: HeadRequest,
    },
    DeleteObject {
        bucket: String,
        key: String,
        request: DeleteRequest,
    },
    CopyObject {
        source: (String, String),
        target: (String, String),
        request: CopyRequest,
    },
    ListObjects {
        bucket: String,
        request: ListRequest,
    },
    CreateMultipartUpload {
        bucket: String,
        key: String,
        request: PutRequest,
    },
    /// Followed by the body.
    UploadPart {
        bucket: String,
        key: String,
        upload_id: String,
        request: PartRequest,
    },
    CompleteMultipartUpload {
        bucket: String,
        key: String,
        upload_id: String,
        parts: Vec<CompletedPart>,
        request: PutRequest,
    },
    AbortMultipartUpload {
        bucket: String,
        key: String,
        upload_id: String,
    },
    ListParts {
        bucket: String,
        key: String,
        upload_id: String,
        request: ListPartsRequest,
    },
    /// From version 5.
    BucketFacts {
        bucket: String,
    },
    /// From version 5.
    BucketConfig {
        bucket: String,
    },
    /// The settings and, apart (it is no setting), the version they were read at (from
    /// version 5).
    SetBucketConfig {
        bucket: String,
        config: BucketConfig,
        version: Option<String>,
    },
    /// From version 5.
    ListObjectVersions {
        bucket: String,
        request: ListVersionsRequest,
    },
    /// From version 5.
    UpdateObject {
        bucket: String,
        key: String,
        change: ObjectChange,
    },
    /// From version 5.
    ListMultipartUploads {
        bucket: String,
        request: ListUploadsRequest,
    },
}

/// The file an in-place request reads or writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum InPlace {
    /// The object's file, opened and judged for this request alone, if it still has `size`
    /// bytes (the size `ObjectFileForUpdate` answered).
    Object { bucket: String, key: String, size: u64 },
    /// The file this connection holds locked (`UpdateLock`).
    Locked,
}

/// The `(offset, length)` pieces of an `UpdateWrite`: at most `MAX_UPDATE_PIECES`, refused
/// while they are decoded beyond that, so a frame cannot make the gateway allocate more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Pieces(pub Vec<(u64, u64)>);

impl<'de> Deserialize<'de> for Pieces {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Bounded;
        impl<'de> serde::de::Visitor<'de> for Bounded {
            type Value = Pieces;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "at most {MAX_UPDATE_PIECES} (offset, length) pairs")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Pieces, A::Error> {
                let mut pieces = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_UPDATE_PIECES));
                while let Some(piece) = seq.next_element()? {
                    if pieces.len() == MAX_UPDATE_PIECES {
                        return Err(serde::de::Error::invalid_length(pieces.len() + 1, &self));
                    }
                    pieces.push(piece);
                }
                Ok(Pieces(pieces))
            }
        }
        deserializer.deserialize_seq(Bounded)
    }
}

impl Request {
    /// Whether a body follows the request.
    pub fn has_body(&self) -> bool {
        matches!(self, Self::PutObject { .. } | Self::UploadPart { .. } | Self::UpdateWrite { .. })
    }

    /// Whether the client sends a decision (commit or discard) after the body.
    pub fn has_decision(&self) -> bool {
        matches!(self, Self::PutObject { .. } | Self::UploadPart { .. })
    }
}

/// What a call returned.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    Done,
    Buckets(Vec<BucketInfo>),
    Info(ObjectInfo),
    /// A GetObject: the object, the range served; the bytes follow as chunks.
    Get {
        info: ObjectInfo,
        range: Option<(u64, u64)>,
        length: u64,
    },
    /// A GetObject from version 2: the bytes are `length` bytes at `offset` of the read-only
    /// descriptor passed with this frame.
    GetFile {
        info: ObjectInfo,
        range: Option<(u64, u64)>,
        offset: u64,
        length: u64,
    },
    /// An object that may be written in place (`Request::UpdateWrite`): its size and the
    /// store's durability. No descriptor comes with it (version 3 passed one read-write).
    UpdateFile {
        size: u64,
        durability: Durability,
    },
    /// An `UpdateRead`: `length` bytes follow as chunks.
    Bytes {
        length: u64,
    },
    Deleted(DeleteOutcome),
    Page(ListPage),
    UploadId(String),
    Parts(PartsPage),
    Facts(BucketFacts),
    /// A bucket's settings and the version they were read at.
    Config {
        config: BucketConfig,
        version: Option<String>,
    },
    Versions(VersionsPage),
    Uploads(UploadsPage),
}

/// An engine error as it crosses the socket: its S3 code, HTTP status and message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WireError {
    pub code: String,
    pub status: u16,
    pub message: String,
}

impl From<&StoreError> for WireError {
    fn from(err: &StoreError) -> Self {
        Self { code: err.s3_code().to_string(), status: err.http_status(), message: err.to_string() }
    }
}

impl From<WireError> for StoreError {
    fn from(err: WireError) -> Self {
        StoreError::from_remote(&err.code, err.status, err.message)
    }
}

/// Writes `value` as one frame.
pub fn write_frame(w: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    w.write_all(&frame_bytes(value)?)
}

/// `value` as one frame's bytes, its length first.
pub fn frame_bytes(value: &impl Serialize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; 4];
    rmp_serde::encode::write_named(&mut bytes, value).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let length = u32::try_from(bytes.len() - 4).map_err(|_| too_large())?;
    bytes[..4].copy_from_slice(&length.to_le_bytes());
    Ok(bytes)
}

/// Reads one frame.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> io::Result<T> {
    let len = read_u32(r)? as usize;
    if len > MAX_FRAME {
        return Err(too_large());
    }
    // The buffer grows as bytes arrive: a peer that announces a large frame and sends little
    // holds no more memory than it sent.
    let mut bytes = Vec::with_capacity(len.min(FRAME_PREALLOCATION));
    r.take(len as u64).read_to_end(&mut bytes)?;
    if bytes.len() != len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the frame ended early"));
    }
    rmp_serde::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn too_large() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "frame too large")
}

pub fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

pub fn read_u16(r: &mut impl Read) -> io::Result<u16> {
    let mut b = [0u8; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_le_bytes(b))
}

/// Writes `bytes` as body chunks (none for an empty slice).
pub fn write_chunks(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    for chunk in bytes.chunks(CHUNK) {
        w.write_all(&(chunk.len() as u32).to_le_bytes())?;
        w.write_all(chunk)?;
    }
    Ok(())
}

/// Ends a body.
pub fn write_end(w: &mut impl Write) -> io::Result<()> {
    w.write_all(&END.to_le_bytes())
}

/// Breaks off a body (the sender failed; an error frame follows).
pub fn write_abort(w: &mut impl Write) -> io::Result<()> {
    w.write_all(&ABORT.to_le_bytes())
}

/// What a body chunk header announced.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk {
    /// This many bytes follow.
    Data(usize),
    End,
    Abort,
}

/// Reads a chunk header.
pub fn read_chunk_header(r: &mut impl Read) -> io::Result<Chunk> {
    match read_u32(r)? {
        END => Ok(Chunk::End),
        ABORT => Ok(Chunk::Abort),
        n if n as usize <= CHUNK => Ok(Chunk::Data(n as usize)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "body chunk too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_chunks_round_trip() {
        let mut wire = Vec::new();
        let request = Request::PutObject { bucket: "b".into(), key: "k/é".into(), request: PutRequest::default() };
        write_frame(&mut wire, &request).unwrap();
        write_chunks(&mut wire, &vec![7u8; CHUNK + 3]).unwrap();
        write_end(&mut wire).unwrap();
        let mut r = &wire[..];
        match read_frame::<Request>(&mut r).unwrap() {
            Request::PutObject { bucket, key, .. } => assert_eq!((bucket.as_str(), key.as_str()), ("b", "k/é")),
            other => panic!("{other:?}"),
        }
        assert_eq!(read_chunk_header(&mut r).unwrap(), Chunk::Data(CHUNK));
        r = &r[CHUNK..];
        assert_eq!(read_chunk_header(&mut r).unwrap(), Chunk::Data(3));
        r = &r[3..];
        assert_eq!(read_chunk_header(&mut r).unwrap(), Chunk::End);
        assert!(r.is_empty());
    }

    #[test]
    fn errors_keep_their_s3_code() {
        for err in [StoreError::NoSuchKey, StoreError::AccessDenied, StoreError::InvalidArgument("bad".into())] {
            let back: StoreError = WireError::from(&err).into();
            assert_eq!(back.s3_code(), err.s3_code());
            assert_eq!(back.http_status(), err.http_status());
            assert_eq!(back.to_string(), err.to_string());
        }
    }

    #[test]
    fn an_update_write_names_a_bounded_number_of_pieces() {
        let write = |n: usize| Request::UpdateWrite { file: InPlace::Locked, pieces: Pieces(vec![(0, 1); n]) };
        let bytes = frame_bytes(&write(MAX_UPDATE_PIECES)).unwrap();
        assert!(matches!(read_frame::<Request>(&mut &bytes[..]), Ok(Request::UpdateWrite { pieces, .. })
            if pieces.0.len() == MAX_UPDATE_PIECES));
        let bytes = frame_bytes(&write(MAX_UPDATE_PIECES + 1)).unwrap();
        let refused = read_frame::<Request>(&mut &bytes[..]).unwrap_err();
        assert!(refused.to_string().contains("at most"), "{refused}");
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut wire = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        wire.extend([0u8; 8]);
        assert!(read_frame::<Request>(&mut &wire[..]).is_err());
    }
}
