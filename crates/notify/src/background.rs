//! How the notifier's own threads (delivery, the broker clients' runtimes, the watchers, the
//! queue's flusher, and the gateway's thread that hashes and announces watched files) are scheduled beside the gateway's request threads.
//!
//! They run under `SCHED_BATCH`: the same share of the CPU as any thread of the same nice value,
//! but a wake-up of theirs (a linger that ended, a broker's acknowledgement, the watcher's
//! period) does not preempt a request thread that is running. On a busy gateway that keeps the
//! delivery of events off the PUT path's latency while still giving it its share, so a queue
//! that grows under a burst drains as soon as the requests leave CPU time.

/// Puts the calling thread under `SCHED_BATCH`. A refusal (a seccomp filter, a kernel without
/// it) only leaves the thread as it was: said at debug level, nothing else changes.
pub fn yield_to_requests() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` with pid 0 changes the policy of the calling thread only
    // (Linux schedules threads); `param` is initialized and outlives the call, which does not
    // keep it.
    let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if result != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "a notification thread stays under the default scheduling policy");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_notification_thread_runs_under_sched_batch_and_others_do_not() {
        let policy = std::thread::spawn(|| {
            super::yield_to_requests();
            // SAFETY: `sched_getscheduler(0)` only reads the calling thread's policy.
            unsafe { libc::sched_getscheduler(0) }
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_BATCH);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER, "the caller's own thread is unchanged");
    }
}
