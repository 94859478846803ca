//! The chunk I/O pool of direct (non-transfer) region reads and writes. It is this crate's own
//! rayon pool, not rayon's global one, and it is rebuilt in a child after `fork`: a forked
//! process has none of its parent's threads, and a pool that believes it has them deadlocks
//! (Python's multiprocessing forks by default).

use std::sync::{Arc, Mutex};

static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// Threads of the direct I/O pool: chunk I/O waits on storage more than it computes.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get() * 2).clamp(4, 32)
}

/// The pool of this process.
pub(crate) fn io_pool() -> Arc<rayon::ThreadPool> {
    let pid = std::process::id();
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    match pool.as_ref() {
        Some((owner, pool)) if *owner == pid => pool.clone(),
        _ => {
            let built = rayon::ThreadPoolBuilder::new()
                .num_threads(threads())
                .thread_name(|i| format!("isthmus-array-{i}"))
                .start_handler(|_| crate::reset_thread_identity())
                .build()
                .map(Arc::new)
                .unwrap_or_else(|_| panic!("cannot start the array I/O pool"));
            *pool = Some((pid, built.clone()));
            built
        }
    }
}
