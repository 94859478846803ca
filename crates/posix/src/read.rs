//! The read path of a `PosixStore`: HEAD and GET with conditions, ranges, part numbers and
//! versions, and the reader that streams an object's bytes.

use rustix::io::Errno;
use std::fs::File;
use std::io::{self, Read};

use super::PosixStore;
use super::versions::head_version;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::{GetRequest, GetResponse, HeadRequest, ObjectInfo, ObjectRead, RequestContext};

impl PosixStore {
    pub(super) fn read_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        let open = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let meta = self.meta_store(&open, cx);
        let (fd, info) = head_version(&meta, open.versioning, &path, request.version_id.as_deref())?;
        request.conditions.check(&info.etag, info.last_modified)?;
        let range = request.served_range(&info)?;
        let (offset, remaining) = match range {
            None => (0, info.size),
            Some((first, last)) => (first, last - first + 1),
        };
        let file = File::from(fd);
        Ok(GetResponse { info, body: Box::new(PosixReader { file, offset, remaining }), range })
    }

    pub(super) fn describe_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        let open = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let meta = self.meta_store(&open, cx);
        let (_, info) = head_version(&meta, open.versioning, &path, request.version_id.as_deref())?;
        request.conditions.check(&info.etag, info.last_modified)?;
        Ok(info)
    }
}

/// Reads an object's bytes from an offset, up to a limit.
pub struct PosixReader {
    file: File,
    offset: u64,
    remaining: u64,
}

impl Read for PosixReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = loop {
            match rustix::io::pread(&self.file, &mut buf[..want], self.offset) {
                Err(Errno::INTR) => continue,
                other => break other?,
            }
        };
        if n == 0 {
            // The file shrank under us (a POSIX writer truncated it).
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "object was truncated while being read"));
        }
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(n)
    }
}

impl ObjectRead for PosixReader {
    fn remaining(&self) -> u64 {
        self.remaining
    }
}
