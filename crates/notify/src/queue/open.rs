//! Opening the queue: its lock (one gateway process per queue), its segments scanned into the
//! index with a torn tail cut off, and the destinations' saved cursors.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex};

use isthmus_store::state_dir::StateDir;

use super::segment::{self, BadFrame};
use super::{Cursor, Flush, Inner, MAX_DESTINATIONS, NotifyError, Queue, QueueLimits, Segment, Slot};
use crate::destination::parse_arn;

impl Queue {
    /// Opens the queue kept in `dir` for the destinations `arns` (their order gives the
    /// indices the other calls take), cutting off a torn tail, and starts its flusher.
    pub fn open(dir: StateDir, arns: Vec<String>, limits: QueueLimits) -> Result<Arc<Queue>, NotifyError> {
        if arns.len() > MAX_DESTINATIONS {
            return Err(NotifyError::TooManyDestinations);
        }
        for arn in &arns {
            cursor_name(arn)?;
        }
        let lock = lock(&dir)?;
        let segment_size = (limits.max_bytes / 8).clamp(4096, 64 << 20);
        let mut inner = Inner {
            slots: VecDeque::new(),
            segments: VecDeque::new(),
            next_seq: 1,
            bytes: 0,
            cursors: Vec::new(),
            closed: false,
            dropping: false,
            queued: 0,
            dropped: 0,
            waiting: 0,
            room_waiters: 0,
        };
        load_segments(&dir, &arns, &mut inner)?;
        for arn in &arns {
            let saved = read_cursor(&dir, arn)?;
            inner.cursors.push(Cursor { next: saved, saved, pending: 0 });
        }
        let highest_cursor = inner.cursors.iter().map(|c| c.next).max().unwrap_or(0);
        inner.next_seq = inner.next_seq.max(highest_cursor);
        if inner.segments.is_empty() {
            let file = segment::open(&dir, inner.next_seq, true)?;
            inner.segments.push_back(Segment { id: inner.next_seq, file, len: 0 });
        }
        for (index, cursor) in inner.cursors.iter_mut().enumerate() {
            cursor.pending =
                inner.slots.iter().filter(|s| s.seq >= cursor.next && s.targets & (1 << index) != 0).count() as u64;
        }
        let flush = Arc::new(Flush { state: Mutex::new((None, false)), wake: Condvar::new() });
        let flusher = flush.clone();
        isthmus_store::identity::spawn_gateway_thread("isthmus-notify-queue-flusher", move || {
            crate::background::yield_to_requests();
            flusher.run()
        })
        .map_err(NotifyError::Thread)?;
        let arrived = (0..arns.len()).map(|_| Condvar::new()).collect();
        let bytes_now = AtomicU64::new(inner.bytes);
        let queue = Queue {
            dir,
            _lock: lock,
            arns,
            limits,
            segment_size,
            inner: Mutex::new(inner),
            arrived,
            room: Condvar::new(),
            bytes_now,
            flush,
        };
        queue.release(&mut queue.lock());
        Ok(Arc::new(queue))
    }
}

/// The cursor file of the destination `arn`: `cursor.KIND.ID`.
pub(super) fn cursor_name(arn: &str) -> Result<String, NotifyError> {
    let (id, kind) = parse_arn(arn).ok_or_else(|| NotifyError::UnknownDestination(arn.to_string()))?;
    Ok(format!("cursor.{}.{id}", kind.as_str()))
}

fn read_cursor(dir: &StateDir, arn: &str) -> Result<u64, NotifyError> {
    let name = cursor_name(arn)?;
    let Some(bytes) = dir.read_private(&name, 64)? else { return Ok(0) };
    match std::str::from_utf8(&bytes).ok().and_then(|text| text.trim().parse().ok()) {
        Some(next) => Ok(next),
        None => {
            tracing::warn!(file = %dir.path().join(&name).display(), "an unreadable notification cursor: the destination starts at the oldest queued record");
            Ok(0)
        }
    }
}

/// Takes the queue's lock file without waiting: one gateway process per queue.
fn lock(dir: &StateDir) -> Result<OwnedFd, NotifyError> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let path = dir.path().join("lock");
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        isthmus_store::identity::as_gateway(|| rustix::fs::openat(dir.fd(), "lock", flags, Mode::from_raw_mode(0o600)))
            .map_err(|e| NotifyError::Io { what: "open", path: path.clone(), source: e.into() })?;
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(fd),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(NotifyError::Busy(dir.path().to_path_buf())),
        Err(e) => Err(NotifyError::Io { what: "lock", path, source: e.into() }),
    }
}

/// Reads every segment into `inner`'s index, cutting off what a crash left half-written.
fn load_segments(dir: &StateDir, arns: &[String], inner: &mut Inner) -> Result<(), NotifyError> {
    let mut unknown = 0u64;
    for id in segment::list(dir)? {
        let file = segment::open(dir, id, false)?;
        let path = dir.path().join(segment::segment_name(id));
        let io = |what, e| NotifyError::Io { what, path: path.clone(), source: e };
        let size = segment::size(&file).map_err(|e| io("inspect", e))?;
        inner.next_seq = inner.next_seq.max(id);
        let mut offset = 0;
        while offset < size {
            let bad = match segment::read_frame(&file, offset, size) {
                Ok((entry, _)) if entry.seq < inner.next_seq => BadFrame::Corrupt("a sequencer out of order"),
                Ok((entry, len)) => {
                    let mut mask = 0u64;
                    for target in &entry.targets {
                        match arns.iter().position(|a| *a == target.arn) {
                            Some(index) => mask |= 1 << index,
                            None => unknown += 1,
                        }
                    }
                    inner.slots.push_back(Slot {
                        seq: entry.seq,
                        segment: id,
                        offset,
                        len,
                        queued_ms: entry.queued_ms,
                        targets: mask,
                    });
                    inner.bytes += len;
                    inner.next_seq = entry.seq + 1;
                    offset += len;
                    continue;
                }
                Err(bad) => bad,
            };
            let why = match bad {
                BadFrame::Short => "a frame cut short",
                BadFrame::Corrupt(why) => why,
            };
            tracing::warn!(segment = %path.display(), offset, lost_bytes = size - offset, why, "the notification queue ends in what a crash left half-written: cut off");
            segment::truncate(&file, offset).map_err(|e| io("truncate", e))?;
            break;
        }
        let len = offset.min(size);
        inner.segments.push_back(Segment { id, file, len });
    }
    if unknown > 0 {
        tracing::warn!(
            records = unknown,
            "queued notifications for destinations no longer configured are not delivered"
        );
    }
    Ok(())
}
