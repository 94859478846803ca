//! The durable queue of events in the gateway's state (`.isthmus/notify`): append-only segment
//! files of checksummed frames, one cursor file per destination, bounded in bytes.
//!
//! Durability: `enqueue` writes the frame with `write(2)` before it returns, so an entry
//! survives the gateway being killed (`kill -9`: the page cache keeps it); a background flusher
//! `fdatasync`s the segment at most every 50 ms (at once with `strict_sync`), which bounds what
//! a power loss can take. At open, a tail a crash left half-written (a short frame, a bad
//! checksum, a length past 1 MiB) is cut off with a warning, never misread.
//!
//! Delivery is at least once: each destination's cursor (the next sequencer it has not
//! finished) is saved atomically now and then and at shutdown; after a crash a destination
//! resumes at its last saved cursor, so a record delivered but not yet acknowledged in the
//! cursor file is sent again. Records are released once every destination they go to is past
//! them; a segment is deleted once every record in it is released.
//!
//! Memory: an index of about 56 bytes per queued record, bounded by `max_bytes`. Delivery reads
//! the records back from their segment (the page cache has them), a run of them with one
//! `pread`: nothing a request's thread allocated is handed to a notification thread to free.
//! (An earlier version kept the newest frames in memory for delivery; freeing them on a
//! delivery thread took the allocator's lock of the request thread that made them, and a
//! delivery thread descheduled there, its CPU busy with the broker, kept that request thread
//! waiting for milliseconds: 123 to 157 times in 80 s of 4 KiB PUTs.)
//! Disk: at most `max_bytes` of queued records plus one segment (`max_bytes / 8`, between 4 KiB
//! and 64 MiB).

mod frame;
mod open;
mod segment;

use open::cursor_name;

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use isthmus_store::state_dir::{StateDir, StateError};
use serde::{Deserialize, Serialize};

use crate::event::Event;
pub use frame::Entry;
use segment::BadFrame;
pub use segment::MAX_FRAME;

/// How long a `Block` queue makes `enqueue` wait for room before it gives up (`Full`).
pub const BLOCK_LIMIT: Duration = Duration::from_secs(30);
/// The flusher's period: entries reach stable storage at most this long after `enqueue`.
pub const SYNC_INTERVAL: Duration = Duration::from_millis(50);
/// `has_room` keeps this much free, the size of a large record.
const ROOM_MARGIN: u64 = 4096;
/// The most destinations one queue serves (a bit each in the index).
pub const MAX_DESTINATIONS: usize = 64;
/// The most bytes delivery reads back with one `pread` (a run of records, back to back).
const READ_RUN: u64 = 256 << 10;

/// Why the queue cannot take or give an event.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The queue is at `max_bytes` (and refuses, or waited in vain): the S3 request that
    /// caused the event should be answered 503 SlowDown.
    #[error("the notification queue is full")]
    Full,
    #[error("an event record of {size} bytes is larger than the {limit} bytes the queue takes")]
    TooLarge { size: u64, limit: u64 },
    #[error("no destination {0} is configured")]
    UnknownDestination(String),
    #[error("at most {MAX_DESTINATIONS} notification destinations may be configured")]
    TooManyDestinations,
    #[error("another gateway process uses the notification queue in {0}")]
    Busy(PathBuf),
    #[error("the notification queue is shut down")]
    Closed,
    #[error("cannot {what} {}: {source}", path.display())]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot start a notification thread: {0}")]
    Thread(std::io::Error),
}

/// What to do when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// `enqueue` waits for room (at most `BLOCK_LIMIT`); callers wait first with `wait_for_room`.
    #[default]
    Block,
    /// The oldest records are dropped (and counted) to make room.
    DropOldest,
    /// `enqueue` fails with `Full`.
    Refuse,
}

/// The queue's bound and durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    pub max_bytes: u64,
    pub when_full: WhenFull,
    /// `fdatasync` each entry before `enqueue` returns, instead of within 50 ms.
    pub strict_sync: bool,
}

/// Where an event goes: the bucket rule that matched (its id, for the record's
/// `configurationId`) and the destination's ARN.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Target {
    pub configuration_id: String,
    pub arn: String,
}

/// One queued record in memory: where its frame is and whom it goes to.
struct Slot {
    seq: u64,
    segment: u64,
    offset: u64,
    len: u64,
    queued_ms: u64,
    /// A bit per destination index.
    targets: u64,
}

struct Segment {
    id: u64,
    file: Arc<File>,
    len: u64,
}

struct Cursor {
    /// The next sequencer this destination has not finished.
    next: u64,
    saved: u64,
    /// Records for it at or past `next`.
    pending: u64,
}

struct Inner {
    slots: VecDeque<Slot>,
    segments: VecDeque<Segment>,
    next_seq: u64,
    bytes: u64,
    cursors: Vec<Cursor>,
    closed: bool,
    /// Inside a burst of drops (one log line per burst).
    dropping: bool,
    queued: u64,
    dropped: u64,
    /// A bit per destination whose thread waits in `wait` (only those are woken: a wake is a
    /// syscall, even for a thread that is not waiting).
    waiting: u64,
    /// Writers waiting in `room` for the queue to have room (only then is it notified: a
    /// notify is a syscall, and `release` runs under the lock on a delivery thread).
    room_waiters: u32,
}

/// Where a queued record's frame is: in a segment file (at an offset, of a length), or gone
/// with its segment.
enum Found {
    At(Arc<File>, u64, u64),
    Missing,
}

/// The flusher's side: which file has writes not yet synced.
struct Flush {
    state: Mutex<(Option<Arc<File>>, bool)>,
    wake: Condvar,
}

/// What the queue counts, for the metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStats {
    pub queued: u64,
    pub dropped: u64,
    pub bytes: u64,
    /// Per destination, in the order given to `open`: records pending and the age of the
    /// oldest one (seconds, 0 when none).
    pub pending: Vec<(u64, f64)>,
}

/// The durable queue (see the module comment).
pub struct Queue {
    dir: StateDir,
    _lock: OwnedFd,
    arns: Vec<String>,
    limits: QueueLimits,
    segment_size: u64,
    inner: Mutex<Inner>,
    /// Per destination: records for it arrived, or the queue closed. One condition each, so
    /// an event wakes only the threads of the destinations it goes to (with one for all, every
    /// event woke every destination's thread: a context switch per destination per PUT).
    arrived: Vec<Condvar>,
    /// Records released.
    room: Condvar,
    /// `Inner::bytes` as last set under the lock, read without it by `has_room` (asked before
    /// every write to a bucket with rules: no lock shared with the delivery threads there).
    bytes_now: AtomicU64,
    flush: Arc<Flush>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits on `room` up to `timeout`, counted as a waiter meanwhile.
    fn wait_for_room_once<'a>(&self, mut inner: MutexGuard<'a, Inner>, timeout: Duration) -> MutexGuard<'a, Inner> {
        inner.room_waiters += 1;
        let mut inner = self.room.wait_timeout(inner, timeout).unwrap_or_else(|p| p.into_inner()).0;
        inner.room_waiters -= 1;
        inner
    }

    /// The destinations' ARNs, in index order.
    pub fn arns(&self) -> &[String] {
        &self.arns
    }

    /// The index of the destination `arn`.
    pub fn index_of(&self, arn: &str) -> Option<usize> {
        self.arns.iter().position(|a| a == arn)
    }

    /// Queues `event` for `targets` and returns its sequencer (`None`: no targets, nothing
    /// queued). The frame is written before this returns (see the module comment on
    /// durability); when the queue is full, `limits.when_full` decides. The write the event
    /// tells of has happened: an event that cannot be queued is logged here, with its key.
    pub fn enqueue(&self, event: Event, targets: Vec<Target>) -> Result<Option<u64>, NotifyError> {
        let queued_ms = millis(SystemTime::now());
        self.place(queued_ms, &event, &targets).inspect_err(|err| {
            tracing::error!(bucket = %event.bucket, key = %event.key, error = %err, "an event could not be queued");
        })
    }

    /// `enqueue`'s work.
    fn place(&self, queued_ms: u64, event: &Event, targets: &[Target]) -> Result<Option<u64>, NotifyError> {
        let mut mask = 0u64;
        for target in targets {
            let index =
                self.index_of(&target.arn).ok_or_else(|| NotifyError::UnknownDestination(target.arn.clone()))?;
            mask |= 1 << index;
        }
        if mask == 0 {
            return Ok(None);
        }
        let deadline = Instant::now() + BLOCK_LIMIT;
        // Encoded before the lock is taken: under it, only numbered.
        let mut body = segment::Body::new(queued_ms, event, targets)?;
        let mut inner = self.lock();
        let mut dropped_now = 0u64;
        let frame = loop {
            if inner.closed {
                return Err(NotifyError::Closed);
            }
            let size = body.len();
            if size > self.limits.max_bytes {
                return Err(NotifyError::TooLarge { size, limit: self.limits.max_bytes });
            }
            if inner.bytes + size <= self.limits.max_bytes {
                break body.number(inner.next_seq);
            }
            match self.limits.when_full {
                WhenFull::Refuse => return Err(NotifyError::Full),
                WhenFull::DropOldest => {
                    self.drop_oldest(&mut inner);
                    dropped_now += 1;
                }
                WhenFull::Block => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(NotifyError::Full);
                    }
                    inner = self.wait_for_room_once(inner, deadline - now);
                }
            }
        };
        if dropped_now > 0 && !inner.dropping {
            inner.dropping = true;
            tracing::warn!(
                dir = %self.dir.path().display(),
                max_bytes = self.limits.max_bytes,
                dropped_total = inner.dropped,
                "the notification queue is full: dropping its oldest records to make room (once per burst)"
            );
        } else if dropped_now == 0 {
            inner.dropping = false;
        }
        let seq = inner.next_seq;
        let file = self.append(&mut inner, frame)?;
        let len = frame.len() as u64;
        let active = inner.segments.back().expect("there is always an active segment");
        let slot = Slot { seq, segment: active.id, offset: active.len - len, len, queued_ms, targets: mask };
        inner.slots.push_back(slot);
        inner.bytes += len;
        self.bytes_now.store(inner.bytes, Ordering::Relaxed);
        inner.next_seq += 1;
        inner.queued += 1;
        for (index, cursor) in inner.cursors.iter_mut().enumerate() {
            if mask & (1 << index) != 0 {
                cursor.pending += 1;
            }
        }
        let wake = inner.waiting & mask;
        drop(inner);
        for (index, arrived) in self.arrived.iter().enumerate() {
            if wake & (1 << index) != 0 {
                arrived.notify_one();
            }
        }
        if self.limits.strict_sync {
            segment::sync(&file).map_err(|e| self.io("sync", e))?;
        } else {
            self.flush.mark(file);
        }
        Ok(Some(seq))
    }

    /// Writes `frame` at the end of the active segment (a new one when it is full); the file.
    fn append(&self, inner: &mut Inner, frame: &[u8]) -> Result<Arc<File>, NotifyError> {
        let active = inner.segments.back().expect("there is always an active segment");
        if active.len > 0 && active.len + frame.len() as u64 > self.segment_size {
            segment::sync(&active.file).map_err(|e| self.io("sync", e))?;
            let id = inner.next_seq;
            let file = segment::open(&self.dir, id, true)?;
            inner.segments.push_back(Segment { id, file, len: 0 });
        }
        let active = inner.segments.back_mut().expect("there is always an active segment");
        if let Err(err) = active.file.write_all_at(frame, active.len) {
            // A full disk: nothing half-written stays behind to be cut off at the next open.
            let _ = active.file.set_len(active.len);
            return Err(self.io("write", err));
        }
        active.len += frame.len() as u64;
        Ok(active.file.clone())
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> NotifyError {
        NotifyError::Io { what, path: self.dir.path().to_path_buf(), source }
    }

    /// Drops the oldest record: every cursor moves past it.
    fn drop_oldest(&self, inner: &mut Inner) {
        let Some(slot) = inner.slots.pop_front() else { return };
        inner.bytes -= slot.len;
        self.bytes_now.store(inner.bytes, Ordering::Relaxed);
        inner.dropped += 1;
        for (index, cursor) in inner.cursors.iter_mut().enumerate() {
            if cursor.next <= slot.seq {
                if slot.targets & (1 << index) != 0 {
                    cursor.pending = cursor.pending.saturating_sub(1);
                }
                cursor.next = slot.seq + 1;
            }
        }
        self.delete_passed_segments(inner);
    }

    /// Releases the records every destination they go to is past, and the segments emptied.
    fn release(&self, inner: &mut Inner) {
        let mut released = false;
        while let Some(slot) = inner.slots.front() {
            let done = inner.cursors.iter().enumerate().all(|(i, c)| slot.targets & (1 << i) == 0 || c.next > slot.seq);
            if !done {
                break;
            }
            inner.bytes -= slot.len;
            inner.slots.pop_front();
            released = true;
        }
        if released {
            self.bytes_now.store(inner.bytes, Ordering::Relaxed);
            self.delete_passed_segments(inner);
            if inner.room_waiters > 0 {
                self.room.notify_all();
            }
        }
    }

    fn delete_passed_segments(&self, inner: &mut Inner) {
        let first_live = inner.slots.front().map_or(inner.next_seq, |s| s.seq);
        while inner.segments.len() > 1 && inner.segments[1].id <= first_live {
            let segment = inner.segments.pop_front().expect("checked");
            let name = segment::segment_name(segment.id);
            let removed = isthmus_store::identity::as_gateway(|| {
                rustix::fs::unlinkat(self.dir.fd(), name.as_str(), rustix::fs::AtFlags::empty())
            });
            if let Err(err) = removed {
                tracing::warn!(segment = %self.dir.path().join(&name).display(), error = %err, "cannot delete a delivered notification segment");
            }
        }
    }

    /// Whether an `enqueue` would find room now without waiting or dropping.
    pub fn has_room(&self) -> bool {
        self.bytes_now.load(Ordering::Relaxed) + ROOM_MARGIN <= self.limits.max_bytes
    }

    /// Waits up to `timeout` for `has_room`; whether there is room.
    pub fn wait_for_room(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut inner = self.lock();
        loop {
            if inner.bytes + ROOM_MARGIN <= self.limits.max_bytes {
                return true;
            }
            let now = Instant::now();
            if now >= deadline || inner.closed {
                return false;
            }
            inner = self.wait_for_room_once(inner, deadline - now);
        }
    }

    /// The next record for destination `dest` at or past its cursor (moving the cursor past
    /// records for others), without waiting: its sequencer and entry.
    pub fn next(&self, dest: usize) -> Result<Option<(u64, Arc<Entry>)>, NotifyError> {
        loop {
            let mut inner = self.lock();
            let start = inner.cursors[dest].next;
            let first = inner.slots.partition_point(|s| s.seq < start);
            let found = inner.slots.range(first..).find(|s| s.targets & (1 << dest) != 0);
            let location = found.map(|s| (s.seq, s.segment, s.offset, s.len));
            let Some((seq, segment_id, offset, len)) = location else {
                inner.cursors[dest].next = inner.next_seq;
                self.release(&mut inner);
                return Ok(None);
            };
            inner.cursors[dest].next = seq;
            self.release(&mut inner);
            let file = inner.segments.iter().find(|s| s.id == segment_id).map(|s| s.file.clone());
            drop(inner);
            let read = file.ok_or(BadFrame::Short).and_then(|file| {
                let (mut entries, bad) = segment::read_run(&file, offset, &[len]);
                entries.pop().ok_or(bad.unwrap_or(BadFrame::Short))
            });
            match read {
                Ok(entry) if entry.seq == seq => return Ok(Some((seq, Arc::new(entry)))),
                // Dropped meanwhile (DropOldest): look again from the moved cursor.
                Err(BadFrame::Short) if self.lock().cursors[dest].next > seq => continue,
                other => {
                    let why = match other {
                        Err(BadFrame::Corrupt(why)) => why,
                        _ => "a frame that cannot be read back",
                    };
                    tracing::error!(dir = %self.dir.path().display(), seq, why, "a queued notification cannot be read back: skipped");
                    self.skip(dest, seq);
                }
            }
        }
    }

    /// Up to `max` records for `dest` from its cursor on, in order, without waiting (empty:
    /// caught up). The first is found as `next` finds it; the ones after it follow as long as
    /// they read back whole (anything odd is left to the next call's `next`).
    pub fn next_batch(&self, dest: usize, max: usize) -> Result<Vec<(u64, Arc<Entry>)>, NotifyError> {
        let Some(first) = self.next(dest)? else { return Ok(Vec::new()) };
        let after = first.0;
        let mut batch = vec![first];
        if max <= 1 {
            return Ok(batch);
        }
        // Where each record after the first is (the list made before
        // the lock is taken: under it, nothing is allocated).
        let mut found: Vec<(u64, Found)> = Vec::with_capacity(max - 1);
        {
            let inner = self.lock();
            let start = inner.slots.partition_point(|s| s.seq <= after);
            let records = inner.slots.range(start..).filter(|s| s.targets & (1 << dest) != 0).take(max - 1).map(|s| {
                let found = match inner.segments.iter().find(|segment| segment.id == s.segment) {
                    Some(segment) => Found::At(segment.file.clone(), s.offset, s.len),
                    None => Found::Missing,
                };
                (s.seq, found)
            });
            found.extend(records);
        }
        // Runs of records back to back in one segment, each run read with one pread.
        let mut rest = found.as_slice();
        while let Some((_, Found::At(file, offset, _))) = rest.first() {
            let (run, seqs) = run_of(rest, file, *offset);
            let (entries, _) = segment::read_run(file, *offset, &run);
            let whole = entries.len() == run.len();
            for (entry, seq) in entries.into_iter().zip(&seqs) {
                if entry.seq != *seq {
                    return Ok(batch);
                }
                batch.push((*seq, Arc::new(entry)));
            }
            if !whole {
                break;
            }
            rest = &rest[run.len()..];
        }
        Ok(batch)
    }

    /// Counts a record that cannot be read back as dropped, for `dest`.
    fn skip(&self, dest: usize, seq: u64) {
        let mut inner = self.lock();
        inner.dropped += 1;
        self.advance(&mut inner, dest, seq);
    }

    fn advance(&self, inner: &mut Inner, dest: usize, seq: u64) {
        move_cursor(inner, dest, seq);
        self.release(inner);
    }

    /// Destination `dest` has the record `seq`: its cursor moves past it (saved later).
    pub fn ack(&self, dest: usize, seq: u64) {
        self.ack_all(dest, [seq]);
    }

    /// Destination `dest` has the records `seqs` (in order): one lock for a whole batch.
    pub fn ack_all(&self, dest: usize, seqs: impl IntoIterator<Item = u64>) {
        let mut inner = self.lock();
        let mut moved = false;
        for seq in seqs {
            move_cursor(&mut inner, dest, seq);
            moved = true;
        }
        if moved {
            self.release(&mut inner);
        }
    }

    /// Waits up to `timeout` for a record past `dest`'s cursor (or the queue closing); whether
    /// there may be one.
    pub fn wait(&self, dest: usize, timeout: Duration) -> bool {
        let mut inner = self.lock();
        inner.waiting |= 1 << dest;
        let (mut inner, _) = self.arrived[dest]
            .wait_timeout_while(inner, timeout, |inner| !inner.closed && inner.cursors[dest].next >= inner.next_seq)
            .unwrap_or_else(|p| p.into_inner());
        inner.waiting &= !(1 << dest);
        !inner.closed && inner.cursors[dest].next < inner.next_seq
    }

    /// Saves `dest`'s cursor if it moved since it was last saved.
    pub fn save_cursor(&self, dest: usize) -> Result<(), NotifyError> {
        let next = {
            let inner = self.lock();
            let cursor = &inner.cursors[dest];
            if cursor.next == cursor.saved {
                return Ok(());
            }
            cursor.next
        };
        let name = cursor_name(&self.arns[dest])?;
        self.dir.replace(&name, format!("{next}\n").as_bytes(), 0o600)?;
        let mut inner = self.lock();
        inner.cursors[dest].saved = inner.cursors[dest].saved.max(next);
        Ok(())
    }

    /// Closes the queue: waiters wake, `enqueue` fails with `Closed`, the active segment is
    /// synced (cursors are saved by `save_cursors`, once their threads stopped).
    pub fn close(&self) -> Result<(), NotifyError> {
        let file = {
            let mut inner = self.lock();
            inner.closed = true;
            inner.segments.back().map(|s| s.file.clone())
        };
        self.arrived.iter().for_each(Condvar::notify_all);
        self.room.notify_all();
        match file {
            Some(file) => segment::sync(&file).map_err(|e| self.io("sync", e)),
            None => Ok(()),
        }
    }

    /// Saves every destination's cursor that moved.
    pub fn save_cursors(&self) -> Result<(), NotifyError> {
        (0..self.arns.len()).try_for_each(|dest| self.save_cursor(dest))
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The counts behind the metrics.
    pub fn stats(&self) -> QueueStats {
        let inner = self.lock();
        let now = millis(SystemTime::now());
        let pending = inner
            .cursors
            .iter()
            .enumerate()
            .map(|(index, cursor)| {
                let first = inner.slots.partition_point(|s| s.seq < cursor.next);
                let oldest = inner.slots.range(first..).find(|s| s.targets & (1 << index) != 0);
                let lag = oldest.map_or(0.0, |s| now.saturating_sub(s.queued_ms) as f64 / 1000.0);
                (cursor.pending, lag)
            })
            .collect();
        QueueStats { queued: inner.queued, dropped: inner.dropped, bytes: inner.bytes, pending }
    }
}

impl Drop for Queue {
    /// Stops the flusher (after a last sync). Cursors are not saved: dropping a queue without
    /// `close` is what a crash does to it.
    fn drop(&mut self) {
        self.flush.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.flush.wake.notify_all();
    }
}

impl Flush {
    fn mark(&self, file: Arc<File>) {
        // A segment the queue moved on from was synced then: only the newest one waits here.
        let before = self.state.lock().unwrap_or_else(|p| p.into_inner()).0.replace(file);
        // With a file already marked, the flusher has yet to take it and needs no wake (one
        // wake per sync, not per record).
        if before.is_none() {
            self.wake.notify_one();
        }
    }

    /// Syncs the file written last, at most every `SYNC_INTERVAL`, until stopped.
    fn run(&self) {
        loop {
            let file = {
                let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let mut state =
                    self.wake.wait_while(state, |s| s.0.is_none() && !s.1).unwrap_or_else(|p| p.into_inner());
                match state.0.take() {
                    Some(file) => file,
                    None => return,
                }
            };
            if let Err(err) = segment::sync(&file) {
                tracing::warn!(error = %err, "cannot sync the notification queue");
            }
            std::thread::sleep(SYNC_INTERVAL);
        }
    }
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The records at the start of `found` that lie back to back in `file` from `offset`, at most
/// `READ_RUN` bytes of them (at least one): their lengths and sequencers.
fn run_of(found: &[(u64, Found)], file: &Arc<File>, offset: u64) -> (Vec<u64>, Vec<u64>) {
    let (mut end, mut lens, mut seqs) = (offset, Vec::new(), Vec::new());
    for (seq, found) in found {
        match found {
            Found::At(f, at, len)
                if Arc::ptr_eq(f, file) && *at == end && (lens.is_empty() || end + len - offset <= READ_RUN) =>
            {
                end += len;
                lens.push(*len);
                seqs.push(*seq);
            }
            _ => break,
        }
    }
    (lens, seqs)
}

/// Moves `dest`'s cursor past `seq`, if it is not already.
fn move_cursor(inner: &mut Inner, dest: usize, seq: u64) {
    let cursor = &mut inner.cursors[dest];
    if cursor.next <= seq {
        cursor.next = seq + 1;
        cursor.pending = cursor.pending.saturating_sub(1);
    }
}

#[cfg(test)]
pub(crate) mod tests;
