//! A drive's lane: the I/O threads that run one drive's shard and manifest reads and writes,
//! so the k + m drives of a block work at once and a slow drive holds up only its own jobs.

use std::sync::{Arc, Mutex, mpsc};

type Job = Box<dyn FnOnce() + Send>;

/// Threads that run one drive's I/O (its lane: shard reads and writes, manifest reads and
/// writes): the k + m drives of a block work at once and a slow drive holds up only its own
/// jobs.
pub(crate) struct IoPool {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
}

impl IoPool {
    /// `threads` threads named `name-N`.
    pub(crate) fn named(threads: usize, name: &str) -> Self {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..threads.max(1) {
            let receiver = receiver.clone();
            // Shard I/O is the gateway's: the drives are its own files.
            isthmus_store::identity::spawn_gateway_thread(&format!("{name}-{n}"), move || {
                loop {
                    let job = receiver.lock().expect("io queue lock").recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            })
            .expect("the I/O thread starts");
        }
        Self { sender: Mutex::new(Some(sender)) }
    }

    /// Runs `job` on an I/O thread.
    pub(crate) fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        let sender = self.sender.lock().expect("io pool lock");
        if let Some(sender) = sender.as_ref() {
            let _ = sender.send(Box::new(job));
        }
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        // Closing the queue ends the threads once they finish what they run.
        self.sender.lock().expect("io pool lock").take();
    }
}
