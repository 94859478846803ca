//! The queue's files: append-only segments of framed entries, opened and created only through
//! the state directory's descriptor (never by path, never through a link, mode 0600), and
//! scanned at open so that a tail a crash left half-written is cut off rather than misread.
//!
//! A frame is `[length: u32 LE][CRC32C of the payload: u32 LE][payload: an Entry, see `frame`]`.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use isthmus_store::state_dir::{StateDir, StateError};
use rustix::fs::{FileType, Mode, OFlags};

use super::frame::Entry;
use super::{NotifyError, Target};
use crate::event::Event;

/// The largest payload a frame may have: a length beyond it is corruption, never an allocation.
pub const MAX_FRAME: usize = 1 << 20;
pub const HEADER: usize = 8;

/// The file name of the segment whose first entry is (at least) `id`.
pub fn segment_name(id: u64) -> String {
    format!("seg-{id:016x}.log")
}

/// The id in a segment file name, if `name` is one.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("seg-")?.strip_suffix(".log")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok()).flatten()
}

/// An entry's frame before it is numbered: encoded before the queue's lock is taken, so that
/// the lock is held only to write its sequencer and checksum (`Body::number`).
pub struct Body(Vec<u8>);

impl Body {
    /// The frame of `event` for `targets`, or `TooLarge` past `MAX_FRAME`.
    pub fn new(queued_ms: u64, event: &Event, targets: &[Target]) -> Result<Body, NotifyError> {
        let frame = super::frame::encode(HEADER, queued_ms, event, targets);
        let len = frame.len() - HEADER;
        if len > MAX_FRAME {
            return Err(NotifyError::TooLarge { size: len as u64, limit: MAX_FRAME as u64 });
        }
        Ok(Body(frame))
    }

    /// The frame's length in bytes.
    pub fn len(&self) -> u64 {
        self.0.len() as u64
    }

    /// The frame numbered `seq` (numbered again, if a wait for room changed the number).
    pub fn number(&mut self, seq: u64) -> &[u8] {
        let len = self.0.len() - HEADER;
        super::frame::number(&mut self.0[HEADER..], seq);
        let checksum = crc(&self.0[HEADER..]);
        self.0[..4].copy_from_slice(&(len as u32).to_le_bytes());
        self.0[4..HEADER].copy_from_slice(&checksum.to_le_bytes());
        &self.0
    }
}

fn crc(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// Why the frame at an offset cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum BadFrame {
    /// The file ends inside it (a write a crash interrupted).
    Short,
    /// Its length is past `MAX_FRAME`, its checksum does not match or its payload does not parse.
    Corrupt(&'static str),
}

/// The frame at `offset` of `file` (whose size is `size`): the entry and the frame's length.
pub fn read_frame(file: &File, offset: u64, size: u64) -> Result<(Entry, u64), BadFrame> {
    if size.saturating_sub(offset) < HEADER as u64 {
        return Err(BadFrame::Short);
    }
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, offset).map_err(|_| BadFrame::Short)?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME {
        return Err(BadFrame::Corrupt("a frame length past the limit"));
    }
    if size - offset - (HEADER as u64) < len as u64 {
        return Err(BadFrame::Short);
    }
    let mut frame = vec![0u8; HEADER + len];
    file.read_exact_at(&mut frame, offset).map_err(|_| BadFrame::Short)?;
    Ok((check_frame(&frame)?, (HEADER + len) as u64))
}

/// The entries of the frames of `lens` bytes each that lie back to back in `file` from
/// `offset` (as the queue's index has them), read with one `pread` and each checked as
/// `read_frame` checks it; the entries up to the first that does not read back, and why not.
pub fn read_run(file: &File, offset: u64, lens: &[u64]) -> (Vec<Entry>, Option<BadFrame>) {
    let total = lens.iter().try_fold(0u64, |sum, len| sum.checked_add(*len));
    let Some(total) = total.filter(|total| *total <= (lens.len() * (HEADER + MAX_FRAME)) as u64) else {
        return (Vec::new(), Some(BadFrame::Corrupt("a run of frames longer than its frames may be")));
    };
    let mut bytes = vec![0u8; total as usize];
    if file.read_exact_at(&mut bytes, offset).is_err() {
        return (Vec::new(), Some(BadFrame::Short));
    }
    let (mut entries, mut rest) = (Vec::with_capacity(lens.len()), bytes.as_slice());
    for len in lens {
        let (frame, after) = rest.split_at(*len as usize);
        rest = after;
        match check_frame(frame) {
            Ok(entry) => entries.push(entry),
            Err(bad) => return (entries, Some(bad)),
        }
    }
    (entries, None)
}

/// The entry of `frame`, a whole frame (header and payload) of the length the index gave it:
/// its header must give that length and its payload's checksum.
fn check_frame(frame: &[u8]) -> Result<Entry, BadFrame> {
    let (header, payload) = frame.split_at_checked(HEADER).ok_or(BadFrame::Short)?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let expected = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    if len != payload.len() {
        return Err(BadFrame::Corrupt("a frame whose length is not the index's"));
    }
    if crc(payload) != expected {
        return Err(BadFrame::Corrupt("a checksum mismatch"));
    }
    super::frame::decode(payload).ok_or(BadFrame::Corrupt("an entry that does not parse"))
}

/// The segment ids present in `dir`, in order.
pub fn list(dir: &StateDir) -> Result<Vec<u64>, NotifyError> {
    let io = |e: rustix::io::Errno| NotifyError::Io { what: "list", path: dir.path().to_path_buf(), source: e.into() };
    let mut ids = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir.fd()).map_err(io)? {
        let entry = entry.map_err(io)?;
        if let Some(id) = entry.file_name().to_str().ok().and_then(parse_segment_name) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Opens the segment `id` (`create`: a new one, which must not exist yet), checked to be a
/// regular file that only the gateway's user (or root) owns and may write.
pub fn open(dir: &StateDir, id: u64, create: bool) -> Result<Arc<File>, NotifyError> {
    let name = segment_name(id);
    let path = dir.path().join(&name);
    let mut flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    if create {
        flags |= OFlags::CREATE | OFlags::EXCL;
    }
    let fd = isthmus_store::identity::as_gateway(|| {
        rustix::fs::openat(dir.fd(), name.as_str(), flags, Mode::from_raw_mode(0o600))
    })
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => NotifyError::State(StateError::Untrusted {
            path: path.clone(),
            why: "is a symbolic link".into(),
            fix: format!("rm {}", path.display()),
        }),
        e => NotifyError::Io { what: "open", path: path.clone(), source: e.into() },
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| NotifyError::Io {
        what: "inspect",
        path: path.clone(),
        source: e.into(),
    })?;
    let euid = rustix::process::geteuid().as_raw();
    let why = if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        Some("is not a regular file".to_string())
    } else if stat.st_uid != euid && stat.st_uid != 0 {
        Some(format!("is owned by uid {}, not by the gateway's user (uid {euid}) or root", stat.st_uid))
    } else if stat.st_mode & 0o022 != 0 {
        Some(format!("is writable by other users (mode {:o})", stat.st_mode & 0o7777))
    } else {
        None
    };
    if let Some(why) = why {
        return Err(NotifyError::State(StateError::Untrusted { fix: format!("rm {}", path.display()), path, why }));
    }
    if create {
        // The new name must survive a crash as well as the entries written into it.
        let _ = rustix::fs::fsync(dir.fd());
    }
    Ok(Arc::new(File::from(fd)))
}

/// The size of `file`.
pub fn size(file: &File) -> std::io::Result<u64> {
    Ok(rustix::fs::fstat(file.as_fd())?.st_size as u64)
}

/// Flushes `file`'s data to stable storage.
pub fn sync(file: &File) -> std::io::Result<()> {
    rustix::fs::fdatasync(file.as_fd()).map_err(Into::into)
}

/// Cuts `file` to `len` bytes, durably.
pub fn truncate(file: &File, len: u64) -> std::io::Result<()> {
    rustix::fs::ftruncate(file.as_fd(), len)?;
    sync(file)
}
