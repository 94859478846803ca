//! What third-party copies may take of the gateway: how many run at once (in all and per user),
//! how long one waits for a remote answer and how long it runs in all, and the bytes their
//! staging will hold (checked against the staging file system's free space before any is
//! staged). A copy holds a `CopySlot` from its request to its end; dropping it gives all back.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Seconds a copy waits for a remote side's response headers (and for any read mid-body).
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one copy may run in all.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(4 * 3600);
/// Copies running at once on the gateway.
pub const DEFAULT_MAX_COPIES: usize = 64;
/// Copies one user runs at once.
pub const DEFAULT_MAX_COPIES_PER_USER: usize = 16;

/// The operator's limits (`tpc_response_timeout_seconds`, `tpc_deadline_seconds`,
/// `tpc_max_copies`, `tpc_max_copies_per_user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimits {
    pub response_timeout: Duration,
    pub deadline: Duration,
    pub max_copies: usize,
    pub max_copies_per_user: usize,
}

impl Default for CopyLimits {
    fn default() -> Self {
        Self {
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            deadline: DEFAULT_DEADLINE,
            max_copies: DEFAULT_MAX_COPIES,
            max_copies_per_user: DEFAULT_MAX_COPIES_PER_USER,
        }
    }
}

/// Why a copy may not start now (the client should retry later: S3's SlowDown).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotRefusal {
    #[error("the gateway runs {0} third-party copies already (tpc_max_copies); retry later")]
    Gateway(usize),
    #[error("you run {0} third-party copies already (tpc_max_copies_per_user); retry when one ends")]
    User(usize),
}

/// Why a pull's bytes may not be staged.
#[derive(Debug, thiserror::Error)]
pub enum StagingRefusal {
    #[error(
        "not enough free space to stage the copy: it needs {needed} bytes (the staged copy and the object beside it), {available} are free"
    )]
    NoSpace { needed: u64, available: u64 },
    #[error("staging I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Budget of one copy's remote calls: the answer's wait and the copy's deadline.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub response_timeout: Duration,
    /// When the copy must have ended.
    pub ends: Instant,
    /// The whole copy's allowance (for messages).
    pub allowed: Duration,
}

impl Budget {
    pub fn new(response_timeout: Duration, allowed: Duration) -> Self {
        Self { response_timeout, ends: Instant::now() + allowed, allowed }
    }

    /// What is left of the deadline; none once it has passed.
    pub fn remaining(&self) -> Option<Duration> {
        self.ends.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
    }
}

#[derive(Default)]
struct Taken {
    copies: usize,
    per_user: HashMap<String, usize>,
    /// Bytes the running copies will stage (and store beside), admitted against free space.
    staged: u64,
}

/// The copies running on this gateway, against its limits.
pub struct CopySlots {
    limits: CopyLimits,
    taken: Mutex<Taken>,
}

impl CopySlots {
    pub fn new(limits: CopyLimits) -> Arc<Self> {
        let limits = CopyLimits {
            max_copies: limits.max_copies.max(1),
            max_copies_per_user: limits.max_copies_per_user.max(1),
            ..limits
        };
        Arc::new(Self { limits, taken: Mutex::default() })
    }

    pub fn limits(&self) -> CopyLimits {
        self.limits
    }

    fn taken(&self) -> MutexGuard<'_, Taken> {
        self.taken.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a copy by `user`, if neither the gateway's cap nor the user's is reached.
    pub fn try_take(self: &Arc<Self>, user: &str) -> Result<CopySlot, SlotRefusal> {
        let mut taken = self.taken();
        if taken.copies >= self.limits.max_copies {
            return Err(SlotRefusal::Gateway(taken.copies));
        }
        let mine = taken.per_user.get(user).copied().unwrap_or(0);
        if mine >= self.limits.max_copies_per_user {
            return Err(SlotRefusal::User(mine));
        }
        taken.copies += 1;
        taken.per_user.insert(user.to_string(), mine + 1);
        Ok(CopySlot {
            slots: self.clone(),
            user: user.to_string(),
            staged: 0,
            budget: Budget::new(self.limits.response_timeout, self.limits.deadline),
        })
    }

    /// Copies running now (for tests and status).
    pub fn running(&self) -> usize {
        self.taken().copies
    }
}

/// One running copy's share: released when dropped.
pub struct CopySlot {
    slots: Arc<CopySlots>,
    user: String,
    staged: u64,
    budget: Budget,
}

impl CopySlot {
    /// The copy's timeouts, its deadline counted from when the slot was taken.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Admits a pull of `size` bytes staged in `dir`: the staged copy and the object written
    /// beside it need twice the size, besides what the running copies were admitted for, on the
    /// staging file system (`InsufficientStorage` otherwise). Checked before anything is staged.
    pub fn hold_staging(&mut self, size: u64, dir: &Path) -> Result<(), StagingRefusal> {
        let needed = size.checked_mul(2).ok_or(StagingRefusal::NoSpace { needed: u64::MAX, available: 0 })?;
        std::fs::create_dir_all(dir)?;
        let stat = rustix::fs::statvfs(dir).map_err(std::io::Error::from)?;
        let free = stat.f_bavail.saturating_mul(stat.f_frsize);
        let mut taken = self.slots.taken();
        let available = free.saturating_sub(taken.staged);
        if needed > available {
            return Err(StagingRefusal::NoSpace { needed, available });
        }
        taken.staged += needed;
        self.staged += needed;
        Ok(())
    }
}

impl Drop for CopySlot {
    fn drop(&mut self) {
        let mut taken = self.slots.taken();
        taken.copies = taken.copies.saturating_sub(1);
        taken.staged = taken.staged.saturating_sub(self.staged);
        if let Some(mine) = taken.per_user.get_mut(&self.user) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                taken.per_user.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(max_copies: usize, max_copies_per_user: usize) -> Arc<CopySlots> {
        CopySlots::new(CopyLimits { max_copies, max_copies_per_user, ..CopyLimits::default() })
    }

    #[test]
    fn each_user_and_the_gateway_have_a_cap_and_a_slot_returns_when_dropped() {
        let slots = slots(3, 2);
        let a1 = slots.try_take("alice").unwrap();
        let _a2 = slots.try_take("alice").unwrap();
        assert_eq!(slots.try_take("alice").err(), Some(SlotRefusal::User(2)));
        let _b1 = slots.try_take("bob").unwrap();
        assert_eq!(slots.try_take("bob").err(), Some(SlotRefusal::Gateway(3)));
        drop(a1);
        assert_eq!(slots.running(), 2);
        let _b2 = slots.try_take("bob").unwrap();
    }

    #[test]
    fn staging_is_admitted_against_free_space_and_what_others_hold() {
        let dir = tempfile::tempdir().unwrap();
        let slots = slots(4, 4);
        let mut first = slots.try_take("alice").unwrap();
        // More than any disk: refused, nothing held.
        let huge = first.hold_staging(8 << 40, dir.path()).unwrap_err();
        assert!(matches!(huge, StagingRefusal::NoSpace { needed, .. } if needed == 16 << 40), "{huge}");
        assert!(matches!(first.hold_staging(u64::MAX, dir.path()), Err(StagingRefusal::NoSpace { .. })));
        // A third of the free space (twice that with the object beside it) is admitted once;
        // a second copy of it no longer fits while the first holds its share.
        let stat = rustix::fs::statvfs(dir.path()).unwrap();
        let third = stat.f_bavail * stat.f_frsize / 3;
        first.hold_staging(third, dir.path()).unwrap();
        let mut second = slots.try_take("bob").unwrap();
        assert!(matches!(second.hold_staging(third, dir.path()), Err(StagingRefusal::NoSpace { .. })));
        drop(first);
        second.hold_staging(third, dir.path()).unwrap();
    }

    #[test]
    fn the_deadline_is_counted_from_the_slot() {
        let budget = Budget::new(Duration::from_secs(1), Duration::ZERO);
        assert_eq!(budget.remaining(), None);
        assert!(Budget::new(Duration::from_secs(1), Duration::from_secs(60)).remaining().is_some());
    }
}
