//! Asynchronous region transfers between memory and arrays (on this engine or a remote S3
//! endpoint), the PDC-XF interface: `create` a transfer, `start` it, ask its `status`, `wait`
//! for it; `start_all` / `wait_all` take a batch, merge its pieces chunk by chunk (one read or
//! one read-merge-write per chunk however many transfers touch it) and issue them in chunk
//! order. Consistency per transfer: `Strong` finishes the I/O before `start` returns (a write is
//! visible to every reader then); `Session` copies a write's buffer and returns at once, the I/O
//! runs on the pool and is visible after `wait` (or `flush`, or when the `Transfers` is
//! dropped). Memory is bounded by the transfer buffer: a `start` that would pass it waits for
//! running transfers to finish (back-pressure). Transfers in flight that overlap where one of
//! them writes are refused, never reordered.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::array::ZarrArray;
use crate::chunk_reads::{self, Target};
use crate::chunks::{self, Extent, Source};
use crate::{ArrayError, Region};

/// When a transfer's update must be visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Visible when `start` returns.
    Strong,
    /// Visible after `wait`, `wait_all`, `flush` or the end of the session.
    Session,
}

impl std::str::FromStr for Consistency {
    type Err = ArrayError;
    fn from_str(text: &str) -> Result<Self, ArrayError> {
        match text {
            "strong" => Ok(Self::Strong),
            "session" => Ok(Self::Session),
            other => Err(ArrayError::Transfer(format!("unknown consistency {other:?}: use strong or session"))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Array to memory.
    Read,
    /// Memory to array.
    Write,
}

/// Where a transfer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Created,
    /// Started; its I/O is queued or running.
    Pending,
    /// The I/O finished (a read's data waits for `wait`).
    Done,
    Failed(String),
}

/// The session's bounds.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// The most bytes copied or read ahead and not yet released (session transfers).
    pub buffer_bytes: u64,
    /// Threads of the chunk I/O pool.
    pub threads: usize,
    /// The consistency of transfers created without one.
    pub consistency: Consistency,
}

impl Default for TransferOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        Self { buffer_bytes: 256 << 20, threads: (cores * 2).clamp(4, 32), consistency: Consistency::Session }
    }
}

#[derive(Default)]
struct State {
    status: Option<Status>,
    /// A finished read's bytes, until `wait` copies them out.
    data: Option<Vec<u8>>,
    /// Bytes of the transfer buffer this transfer holds.
    held: u64,
    /// Its entry among the transfers in flight, until `wait`.
    inflight: Option<u64>,
}

/// One region moving between memory and an array.
pub struct Transfer {
    array: Arc<ZarrArray>,
    region: Region,
    extent: Extent,
    direction: Direction,
    consistency: Consistency,
    bytes: u64,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Transfer {
    pub fn region(&self) -> &Region {
        &self.region
    }

    pub fn direction(&self) -> Direction {
        self.direction
    }

    pub fn consistency(&self) -> Consistency {
        self.consistency
    }

    /// The bytes the transfer's buffer has.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn array(&self) -> &Arc<ZarrArray> {
        &self.array
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A transfer registered as in flight.
struct InFlight {
    id: u64,
    /// The transfer's state: an entry whose transfer was dropped unwaited is forgotten.
    state: Arc<(Mutex<State>, Condvar)>,
    array: String,
    bounds: Vec<Range<u64>>,
    writes: bool,
}

#[derive(Default)]
struct Budget {
    used: u64,
    peak: u64,
    /// Of `used`, what transfers whose I/O has not finished hold (what will come back).
    running: u64,
}

struct Shared {
    pool: rayon::ThreadPool,
    options: TransferOptions,
    budget: Mutex<Budget>,
    budget_freed: Condvar,
    inflight: Mutex<Vec<InFlight>>,
    next_id: AtomicU64,
}

/// A transfer session: the pool, the buffer budget and what is in flight.
pub struct Transfers {
    shared: Arc<Shared>,
}

fn overlaps(a: &[Range<u64>], b: &[Range<u64>]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.start < y.end && y.start < x.end)
}

impl Transfers {
    pub fn new(options: TransferOptions) -> Result<Self, ArrayError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads.max(1))
            .thread_name(|i| format!("isthmus-transfer-{i}"))
            .start_handler(|_| crate::reset_thread_identity())
            .build()
            .map_err(|e| ArrayError::Transfer(format!("cannot start the transfer pool: {e}")))?;
        Ok(Self {
            shared: Arc::new(Shared {
                pool,
                options,
                budget: Mutex::default(),
                budget_freed: Condvar::new(),
                inflight: Mutex::default(),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    pub fn options(&self) -> &TransferOptions {
        &self.shared.options
    }

    /// A transfer of `region` of `array` in `direction`, with the session's consistency.
    pub fn create(&self, array: &Arc<ZarrArray>, region: Region, direction: Direction) -> Result<Transfer, ArrayError> {
        self.create_with(array, region, direction, self.shared.options.consistency)
    }

    /// A transfer with its own consistency.
    pub fn create_with(
        &self,
        array: &Arc<ZarrArray>,
        region: Region,
        direction: Direction,
        consistency: Consistency,
    ) -> Result<Transfer, ArrayError> {
        let bytes = array.region_bytes(&region)? as u64;
        let extent = array.checked(&region, bytes as usize)?;
        Ok(Transfer {
            array: array.clone(),
            region,
            extent,
            direction,
            consistency,
            bytes,
            state: Arc::new((Mutex::new(State { status: Some(Status::Created), ..State::default() }), Condvar::new())),
        })
    }

    pub fn status(&self, transfer: &Transfer) -> Status {
        transfer.lock().status.clone().unwrap_or(Status::Created)
    }

    /// Starts one transfer; `data` is a write's source (copied for a session write, so the
    /// caller may reuse it at once) and must be `None` for a read.
    pub fn start(&self, transfer: &Transfer, data: Option<&[u8]>) -> Result<(), ArrayError> {
        self.start_all(&[(transfer, data)])
    }

    /// Starts a batch: its transfers on one array in one direction are merged chunk by chunk
    /// and issued in chunk order. Strong transfers have finished when this returns.
    pub fn start_all(&self, batch: &[(&Transfer, Option<&[u8]>)]) -> Result<(), ArrayError> {
        for (transfer, data) in batch {
            match (transfer.direction, data) {
                (Direction::Write, Some(data)) if data.len() as u64 == transfer.bytes => {}
                (Direction::Write, Some(data)) => {
                    return Err(ArrayError::Transfer(format!(
                        "the write's buffer has {} bytes, its region needs {}",
                        data.len(),
                        transfer.bytes
                    )));
                }
                (Direction::Write, None) => return Err(ArrayError::Transfer("a write needs a buffer".into())),
                (Direction::Read, Some(_)) => {
                    return Err(ArrayError::Transfer("a read takes its buffer at wait, not at start".into()));
                }
                (Direction::Read, None) => {}
            }
            if self.status(transfer) == Status::Pending {
                return Err(ArrayError::Transfer("the transfer is already in flight: wait for it first".into()));
            }
        }
        let ids = self.register(batch.iter().map(|(t, _)| *t))?;
        for ((transfer, _), id) in batch.iter().zip(&ids) {
            let mut state = transfer.lock();
            state.status = Some(Status::Pending);
            state.data = None;
            state.inflight = Some(*id);
        }
        let jobs: Vec<Job<'_>> = batch
            .iter()
            .zip(ids)
            .map(|((transfer, data), id)| Job { transfer: transfer.shallow(), data: data.map(Cow::Borrowed), id })
            .collect();
        let (strong, session): (Vec<_>, Vec<_>) =
            jobs.into_iter().partition(|job| job.transfer.consistency == Consistency::Strong);
        // Strong: the I/O runs while the caller waits, straight from its buffer: on the pool,
        // or on the caller's thread for a write of a single chunk (nothing to run in parallel, and a
        // handoff to a pool thread and back costs more than a small chunk's write) when the
        // thread holds the process's own identity, as the pool threads do (chunk calls then
        // switch for their request exactly as on the pool).
        let mut first_error = None;
        for group in group_by_array(strong) {
            let inline = group[0].transfer.direction == Direction::Write
                && single_chunk(&group)
                && isthmus_store::identity::holds_gateway_identity();
            let outcome = if inline { run_group(&group) } else { self.shared.pool.install(|| run_group(&group)) };
            if let Err(err) = &outcome {
                first_error.get_or_insert_with(|| ArrayError::Transfer(err.clone()));
            }
            self.shared.finish(group, outcome, 0);
        }
        // Session: buffers copied under the budget, then the I/O runs in the background.
        for group in group_by_array(session) {
            let bytes: u64 = group.iter().map(|job| job.transfer.bytes).sum();
            if let Err(err) = self.acquire(bytes) {
                self.shared.finish(group, Err(err.to_string()), 0);
                return Err(err);
            }
            let owned: Vec<Job<'static>> = group.into_iter().map(Job::into_owned).collect();
            for job in &owned {
                job.transfer.lock().held = job.transfer.bytes;
            }
            let shared = self.shared.clone();
            self.shared.pool.spawn(move || {
                // A panic in a background job would abort the process (rayon's default): it
                // becomes the transfers' failure instead.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_group(&owned)))
                    .unwrap_or_else(|_| Err("internal error: the transfer's I/O panicked".to_string()));
                shared.finish(owned, outcome, bytes);
            });
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits for a transfer; a read's data is copied into `out` (its region's bytes).
    pub fn wait(&self, transfer: &Transfer, out: Option<&mut [u8]>) -> Result<(), ArrayError> {
        let mut state = transfer.lock();
        while state.status == Some(Status::Pending) {
            state = transfer.state.1.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let held = std::mem::take(&mut state.held);
        if let Some(id) = state.inflight.take() {
            self.shared.unregister(id);
        }
        let data = state.data.take();
        let status = state.status.clone();
        drop(state);
        self.shared.release(held, 0);
        match status {
            Some(Status::Failed(why)) => Err(ArrayError::Transfer(why)),
            Some(Status::Created) | None => Err(ArrayError::Transfer("the transfer was not started".into())),
            _ => match (transfer.direction, out, data) {
                (Direction::Read, Some(out), Some(data)) if out.len() == data.len() => {
                    out.copy_from_slice(&data);
                    Ok(())
                }
                (Direction::Read, Some(out), Some(data)) => Err(ArrayError::Transfer(format!(
                    "the read's buffer has {} bytes, its region has {}",
                    out.len(),
                    data.len()
                ))),
                (Direction::Read, Some(_), None) => {
                    Err(ArrayError::Transfer("the read's data was already taken by an earlier wait".into()))
                }
                _ => Ok(()),
            },
        }
    }

    /// Waits for every transfer of a batch; the first error is returned after all finished.
    pub fn wait_all(&self, batch: &mut [(&Transfer, Option<&mut [u8]>)]) -> Result<(), ArrayError> {
        let mut first_error = None;
        for (transfer, out) in batch.iter_mut() {
            if let Err(err) = self.wait(transfer, out.as_deref_mut()) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits until no session I/O is running: every session write is then visible, and every
    /// finished transfer is no longer in flight (as if waited for; a read's data stays for its
    /// `wait`).
    pub fn flush(&self) {
        let mut budget = self.shared.budget.lock().unwrap_or_else(|e| e.into_inner());
        while budget.running > 0 {
            budget = self.shared.budget_freed.wait(budget).unwrap_or_else(|e| e.into_inner());
        }
        drop(budget);
        let mut inflight = self.shared.inflight.lock().unwrap_or_else(|e| e.into_inner());
        inflight.retain(|t| t.state.0.lock().is_ok_and(|s| s.status == Some(Status::Pending)));
    }

    /// The most bytes of the transfer buffer held at once so far.
    pub fn buffer_peak(&self) -> u64 {
        self.shared.budget.lock().unwrap_or_else(|e| e.into_inner()).peak
    }

    /// The bytes of the transfer buffer held now (session writes copied and not yet written,
    /// reads finished and not yet waited for): what a report samples against `buffer_bytes`.
    pub fn buffer_in_use(&self) -> u64 {
        self.shared.budget.lock().unwrap_or_else(|e| e.into_inner()).used
    }

    /// Registers the batch as in flight, refusing overlaps where one side writes.
    fn register<'a>(&self, batch: impl Iterator<Item = &'a Transfer>) -> Result<Vec<u64>, ArrayError> {
        let mut inflight = self.shared.inflight.lock().unwrap_or_else(|e| e.into_inner());
        // Transfers dropped without a wait, whose I/O has finished, are no longer in flight.
        inflight.retain(|t| Arc::strong_count(&t.state) > 1);
        let mut added: Vec<InFlight> = Vec::new();
        for transfer in batch {
            let candidate = InFlight {
                id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
                state: transfer.state.clone(),
                array: transfer.array.identity(),
                bounds: transfer.extent.bounding_box(),
                writes: transfer.direction == Direction::Write,
            };
            let clash = inflight.iter().chain(&added).find(|other| {
                other.array == candidate.array
                    && (other.writes || candidate.writes)
                    && overlaps(&other.bounds, &candidate.bounds)
            });
            if let Some(other) = clash {
                return Err(ArrayError::Transfer(format!(
                    "region {:?} of {} overlaps a transfer in flight ({:?}) and one of them writes: wait for it first",
                    candidate.bounds, candidate.array, other.bounds
                )));
            }
            added.push(candidate);
        }
        let ids = added.iter().map(|a| a.id).collect();
        inflight.extend(added);
        Ok(ids)
    }

    /// Takes `bytes` of the transfer buffer, waiting while running transfers hold it.
    fn acquire(&self, bytes: u64) -> Result<(), ArrayError> {
        let capacity = self.shared.options.buffer_bytes;
        let mut budget = self.shared.budget.lock().unwrap_or_else(|e| e.into_inner());
        // A transfer larger than the whole buffer runs alone.
        while budget.used > 0 && budget.used + bytes > capacity {
            if budget.running == 0 {
                return Err(ArrayError::Transfer(format!(
                    "the transfer buffer ({capacity} bytes) is held by finished reads nobody waited for: \
                     wait for them, or raise the buffer size"
                )));
            }
            budget = self.shared.budget_freed.wait(budget).unwrap_or_else(|e| e.into_inner());
        }
        budget.used += bytes;
        budget.peak = budget.peak.max(budget.used);
        budget.running += bytes;
        Ok(())
    }
}

impl Drop for Transfers {
    /// The end of the session: session writes become visible before it ends.
    fn drop(&mut self) {
        self.flush();
    }
}

impl Shared {
    fn unregister(&self, id: u64) {
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        inflight.retain(|t| t.id != id);
    }

    /// Frees `released` bytes of the buffer and marks `finished` bytes as no longer running.
    fn release(&self, released: u64, finished: u64) {
        let mut budget = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        budget.used = budget.used.saturating_sub(released);
        budget.running = budget.running.saturating_sub(finished);
        self.budget_freed.notify_all();
    }
}

impl Transfer {
    /// A second handle on the same transfer (same state), for the background job.
    fn shallow(&self) -> Transfer {
        Transfer {
            array: self.array.clone(),
            region: self.region.clone(),
            extent: self.extent.clone(),
            direction: self.direction,
            consistency: self.consistency,
            bytes: self.bytes,
            state: self.state.clone(),
        }
    }
}

/// A started transfer with its write source (borrowed for strong, copied for session).
struct Job<'a> {
    transfer: Transfer,
    data: Option<Cow<'a, [u8]>>,
    id: u64,
}

impl Job<'_> {
    fn into_owned(self) -> Job<'static> {
        Job { transfer: self.transfer, data: self.data.map(|d| Cow::Owned(d.into_owned())), id: self.id }
    }
}

/// The jobs grouped by array and direction, each group in the batch's order.
fn group_by_array(jobs: Vec<Job<'_>>) -> Vec<Vec<Job<'_>>> {
    let mut groups: Vec<Vec<Job<'_>>> = Vec::new();
    for job in jobs {
        let same = |group: &&mut Vec<Job<'_>>| {
            let first = &group[0].transfer;
            first.direction == job.transfer.direction && Arc::ptr_eq(&first.array, &job.transfer.array)
        };
        match groups.iter_mut().find(same) {
            Some(group) => group.push(job),
            None => groups.push(vec![job]),
        }
    }
    groups
}

/// Whether a group's transfers all lie in one and the same chunk of their array.
fn single_chunk(group: &[Job<'_>]) -> bool {
    let array = group[0].transfer.array.inner();
    let mut chunk = None;
    group.iter().all(|job| {
        let Ok(Some(chunks)) = array
            .chunks_in_array_subset(&zarrs::array::ArraySubset::new_with_ranges(&job.transfer.extent.bounding_box()))
        else {
            return false;
        };
        chunks.num_elements() == 1 && chunk.get_or_insert_with(|| chunks.start().to_vec()) == chunks.start()
    })
}

/// Runs a group of transfers on one array in one direction as one merged chunk pass; a read
/// group answers each transfer's bytes.
fn run_group(group: &[Job<'_>]) -> Result<Vec<Option<Vec<u8>>>, String> {
    let array = group[0].transfer.array.clone();
    let run = || -> Result<Vec<Option<Vec<u8>>>, ArrayError> {
        let mut sources = Vec::new();
        let mut targets = Vec::new();
        for (index, job) in group.iter().enumerate() {
            let shape = &job.transfer.region.count;
            for piece in chunks::pieces(array.inner(), &job.transfer.extent)? {
                match &job.data {
                    Some(data) => sources.push(Source { piece, data, shape }),
                    None => targets.push(Target { piece, output: index, shape }),
                }
            }
        }
        if group[0].transfer.direction == Direction::Write {
            array.write_pieces(sources)?;
            return Ok(vec![None; group.len()]);
        }
        let mut outputs: Vec<Vec<u8>> = group.iter().map(|job| vec![0; job.transfer.bytes as usize]).collect();
        let mut views: Vec<&mut [u8]> = outputs.iter_mut().map(Vec::as_mut_slice).collect();
        chunk_reads::read_pieces(array.inner(), targets, &mut views)?;
        Ok(outputs.into_iter().map(Some).collect())
    };
    run().map_err(|err| err.to_string())
}

impl Shared {
    /// Marks a group's transfers finished, frees what they no longer hold (a write's copy; a
    /// read's data stays held until `wait`) and `running` bytes as no longer running.
    fn finish(&self, group: Vec<Job<'_>>, mut outcome: Result<Vec<Option<Vec<u8>>>, String>, running: u64) {
        let mut released = 0;
        for (index, job) in group.into_iter().enumerate() {
            let transfer = &job.transfer;
            let result = match &mut outcome {
                Ok(outputs) => Ok(outputs[index].take()),
                Err(why) => Err(why.clone()),
            };
            {
                let mut state = transfer.lock();
                if transfer.direction == Direction::Write || result.is_err() {
                    released += std::mem::take(&mut state.held);
                }
                match result {
                    Ok(data) => {
                        state.status = Some(Status::Done);
                        state.data = data;
                    }
                    Err(why) => state.status = Some(Status::Failed(why)),
                }
                if transfer.consistency == Consistency::Strong {
                    state.inflight = None;
                }
                transfer.state.1.notify_all();
            }
            if transfer.consistency == Consistency::Strong {
                self.unregister(job.id);
            }
        }
        self.release(released, running);
    }
}
