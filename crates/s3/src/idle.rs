//! Idle connections: a connection on which nothing was read or written for the idle timeout is
//! closed. hyper's header timeout cuts off clients that start a request and stall; this covers
//! the ones that connect and never send anything, and the ones that stop reading a response.
//! Progress only notes the time: the timer is moved (a lock on tokio's timer wheel) only when it
//! fires early, at most once per timeout, not on every read and write.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

pub struct IdleTimeout<T> {
    inner: T,
    timeout: Duration,
    /// When something was last read or written.
    last_progress: Instant,
    /// Fires at or before `last_progress + timeout`.
    deadline: Pin<Box<Sleep>>,
}

impl<T> IdleTimeout<T> {
    pub fn new(inner: T, timeout: Duration) -> Self {
        Self { inner, timeout, last_progress: Instant::now(), deadline: Box::pin(tokio::time::sleep(timeout)) }
    }

    fn progressed(&mut self) {
        self.last_progress = Instant::now();
    }

    /// Called when the transfer is waiting: fails once the connection was idle too long.
    fn check_idle<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        while self.deadline.as_mut().poll(cx).is_ready() {
            let due = self.last_progress + self.timeout;
            if due <= Instant::now() {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")));
            }
            // Progress since the timer was set: it fires again when the idle time is up.
            self.deadline.as_mut().reset(due);
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.progressed();
                Poll::Ready(result)
            }
            Poll::Pending => this.check_idle(cx),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, bytes) {
            Poll::Ready(result) => {
                this.progressed();
                Poll::Ready(result)
            }
            Poll::Pending => this.check_idle(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => {
                this.progressed();
                Poll::Ready(result)
            }
            Poll::Pending => this.check_idle(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
