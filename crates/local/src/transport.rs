//! The socket under the local door's protocol. `Inbox` is a buffered reader that receives with
//! `recvmsg`, so a descriptor the gateway passes with a reply (SCM_RIGHTS) is taken with its
//! bytes instead of being dropped by the kernel, and that spins briefly before it blocks: a
//! peer that answers within microseconds is then not waited for through the scheduler (on a
//! virtual machine, waking a halted CPU costs several microseconds per message, more than a
//! HEAD's whole engine call). `send_with_descriptor` sends a frame with one descriptor.
//!
//! The spin is bounded four ways: at most `spin` (ISTHMUS_LOCAL_SPIN_US microseconds, 50 by
//! default, 0 turns it off) per wait; at most half the machine's CPUs spinning at once per
//! process (one on two cores), so spinning threads never take every CPU from the threads that
//! would answer them; every turn of the loop yields the CPU to any other thread ready on it;
//! and a connection whose spin found nothing skips the next waits' spins (1, 2, 4 ... up to 64
//! waits), so where answers are slow (a loaded machine, long calls) it stops burning CPU, and
//! starts again when answers come quickly.

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

/// Descriptors one receive takes at most (the gateway passes one per reply).
const DESCRIPTORS_PER_RECEIVE: usize = 4;

/// How long a read spins before it blocks: ISTHMUS_LOCAL_SPIN_US microseconds, default 50.
pub fn spin_from_env() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        let micros = std::env::var("ISTHMUS_LOCAL_SPIN_US").ok().and_then(|v| v.trim().parse::<u64>().ok());
        Duration::from_micros(micros.unwrap_or(50))
    })
}

/// Threads of this process spinning now, and how many may.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

fn spinners_allowed() -> usize {
    static ALLOWED: OnceLock<usize> = OnceLock::new();
    *ALLOWED.get_or_init(|| (std::thread::available_parallelism().map_or(1, usize::from) / 2).max(1))
}

/// A place among the spinning threads, given back when dropped.
struct SpinPermit;

impl SpinPermit {
    fn take() -> Option<Self> {
        if SPINNING.fetch_add(1, Ordering::AcqRel) < spinners_allowed() {
            Some(Self)
        } else {
            SPINNING.fetch_sub(1, Ordering::AcqRel);
            None
        }
    }
}

impl Drop for SpinPermit {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The reading side of a connection: buffered, descriptor-aware, spinning briefly.
pub struct Inbox {
    stream: UnixStream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    descriptors: VecDeque<OwnedFd>,
    /// Whether received descriptors are kept for `take_descriptor` (a client, from its
    /// gateway) or closed at once (the gateway: a peer must not fill its descriptor table).
    keeps_descriptors: bool,
    spin: Duration,
    /// Waits to skip spinning after the last fruitless spin, and how many the next one skips.
    skip: u32,
    backoff: u32,
}

/// The most waits a connection skips spinning after a fruitless spin.
const MAX_BACKOFF: u32 = 64;

impl Inbox {
    /// A client's inbox: descriptors its gateway passes are kept for `take_descriptor`.
    pub fn new(stream: UnixStream, capacity: usize, spin: Duration) -> Self {
        Self::with_descriptors(stream, capacity, spin, true)
    }

    /// The gateway's inbox: any descriptor a peer sends is closed as it arrives.
    pub fn refusing_descriptors(stream: UnixStream, capacity: usize, spin: Duration) -> Self {
        Self::with_descriptors(stream, capacity, spin, false)
    }

    fn with_descriptors(stream: UnixStream, capacity: usize, spin: Duration, keeps_descriptors: bool) -> Self {
        Self {
            stream,
            buf: vec![0u8; capacity.max(64)].into_boxed_slice(),
            start: 0,
            end: 0,
            descriptors: VecDeque::new(),
            keeps_descriptors,
            spin,
            skip: 0,
            backoff: 0,
        }
    }

    /// The oldest descriptor received and not yet taken.
    pub fn take_descriptor(&mut self) -> Option<OwnedFd> {
        self.descriptors.pop_front()
    }

    /// Whether bytes received are waiting in the buffer.
    pub fn has_buffered(&self) -> bool {
        self.start < self.end
    }

    /// Receives into `into`, spinning first if a place among the spinners is free.
    fn receive_waiting(&mut self, into: &mut [u8]) -> io::Result<usize> {
        if self.skip > 0 {
            self.skip -= 1;
        } else if !self.spin.is_zero()
            && let Some(_permit) = SpinPermit::take()
        {
            let deadline = Instant::now() + self.spin;
            loop {
                match self.receive(into, RecvFlags::DONTWAIT) {
                    Err(Errno::WOULDBLOCK | Errno::INTR) => {}
                    other => {
                        self.backoff = 0;
                        return other.map_err(io::Error::from);
                    }
                }
                if Instant::now() >= deadline {
                    break;
                }
                std::thread::yield_now();
            }
            self.backoff = (self.backoff * 2).clamp(1, MAX_BACKOFF);
            self.skip = self.backoff;
        }
        loop {
            match self.receive(into, RecvFlags::empty()) {
                Err(Errno::INTR) => {}
                other => return other.map_err(io::Error::from),
            }
        }
    }
}

impl Inbox {
    /// One `recvmsg` into `into`; descriptors that came with the bytes (close-on-exec) are
    /// kept or closed, as this inbox does.
    fn receive(&mut self, into: &mut [u8], flags: RecvFlags) -> Result<usize, Errno> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(DESCRIPTORS_PER_RECEIVE))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = rustix::net::recvmsg(
            &self.stream,
            &mut [IoSliceMut::new(into)],
            &mut control,
            flags | RecvFlags::CMSG_CLOEXEC,
        )?;
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(passed) = message {
                if self.keeps_descriptors {
                    self.descriptors.extend(passed);
                } else {
                    passed.for_each(drop);
                }
            }
        }
        Ok(received.bytes)
    }
}

impl Read for Inbox {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.start == self.end {
            // A read as large as the buffer goes straight to the caller's memory.
            if out.len() >= self.buf.len() {
                return self.receive_waiting(out);
            }
            let mut buf = std::mem::take(&mut self.buf);
            let received = self.receive_waiting(&mut buf);
            self.buf = buf;
            self.start = 0;
            self.end = received?;
        }
        let n = out.len().min(self.end - self.start);
        out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        Ok(n)
    }
}

/// Sends `bytes` with `descriptor` attached to them (SCM_RIGHTS): the peer's `Inbox` takes the
/// descriptor with the first of these bytes.
pub fn send_with_descriptor(stream: &UnixStream, bytes: &[u8], descriptor: BorrowedFd<'_>) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let passed = [descriptor];
    if !control.push(SendAncillaryMessage::ScmRights(&passed)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    let sent = loop {
        match rustix::net::sendmsg(stream, &[IoSlice::new(bytes)], &mut control, SendFlags::NOSIGNAL) {
            Err(Errno::INTR) => {}
            other => break other?,
        }
    };
    // The descriptor went with the first bytes; what the socket did not take follows plainly.
    (&*stream).write_all(&bytes[sent..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn bytes_and_a_passed_descriptor_arrive_together_and_in_order() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        (&file).write_all(b"in the file").unwrap();
        (&a).write_all(b"before|").unwrap();
        send_with_descriptor(&a, b"with|", file.as_fd()).unwrap();
        (&a).write_all(b"after").unwrap();
        drop(a);
        let mut inbox = Inbox::new(b, 4, Duration::from_micros(20));
        let mut text = String::new();
        inbox.read_to_string(&mut text).unwrap();
        assert_eq!(text, "before|with|after");
        let passed = std::fs::File::from(inbox.take_descriptor().expect("the descriptor arrived"));
        let mut content = String::new();
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 11];
        passed.read_exact_at(&mut buf, 0).unwrap();
        content.push_str(std::str::from_utf8(&buf).unwrap());
        assert_eq!(content, "in the file");
        assert!(inbox.take_descriptor().is_none());
    }

    #[test]
    fn a_read_without_spinning_blocks_until_bytes_come() {
        let (a, b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            (&a).write_all(b"late").unwrap();
        });
        let mut inbox = Inbox::new(b, 1024, Duration::ZERO);
        let mut got = [0u8; 4];
        inbox.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"late");
        writer.join().unwrap();
    }
}
