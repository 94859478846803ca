//! Crash recovery: names that say which writer made an internal file, the test that tells a
//! dead writer's leftovers from a live one's, and the cleaning a gateway does at start.

use std::os::fd::AsFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use super::resolve::open_dir_beneath;
use super::{PosixStore, TMP_DIR, TRASH_DIR, modified};
use crate::RequestContext;
use crate::Store;
use crate::error::StoreResult;

/// A name part unique across processes and hosts sharing one file system.
/// It ends in `<writer tag>.<pid>.<random>.<counter>`, so a restarted gateway can tell which
/// leftovers belong to dead writers that share its pid namespace (see `left_by_dead_writer`).
pub(crate) fn unique_suffix() -> String {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the OS random source works");
        u64::from_le_bytes(bytes)
    });
    format!("{}.{:x}.{process:016x}.{:x}", writer_tag(), std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A short, dot-free tag of where this process's pids mean something: the host name, the
/// kernel's boot id and the pid namespace. Two containers with one host name but separate pid
/// namespaces get different tags, so neither takes the other's live writers for dead ones.
fn writer_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default().trim().to_string();
        let pid_namespace =
            std::fs::read_link("/proc/self/ns/pid").map(|p| p.display().to_string()).unwrap_or_default();
        tag_of(&read("/proc/sys/kernel/hostname"), &read("/proc/sys/kernel/random/boot_id"), &pid_namespace)
    })
}

fn tag_of(hostname: &str, boot_id: &str, pid_namespace: &str) -> String {
    crate::meta::key_hash(&format!("{hostname}\0{boot_id}\0{pid_namespace}"))[..8].to_string()
}

/// Whether an internal file or directory name made by `unique_suffix` belongs to a process of
/// this host and pid namespace that no longer runs: what a crash (kill -9) leaves behind.
/// Names of other hosts, other pid namespaces or an earlier boot are never judged here; they go
/// when they are older than the age limit.
pub(crate) fn left_by_dead_writer(name: &str) -> bool {
    left_by_dead_writer_with_tag(name, writer_tag())
}

fn left_by_dead_writer_with_tag(name: &str, tag: &str) -> bool {
    let fields: Vec<&str> = name.rsplitn(5, '.').collect();
    // rsplitn yields counter, random, pid, tag, rest.
    let (Some(pid), Some(name_tag)) = (fields.get(2), fields.get(3)) else { return false };
    let Some(name_tag) = name_tag.rsplit('.').next() else { return false };
    if name_tag != tag {
        return false;
    }
    let Some(pid) = u32::from_str_radix(pid, 16).ok().and_then(|p| rustix::process::Pid::from_raw(p as i32)) else {
        return false;
    };
    if pid.as_raw_nonzero().get() as u32 == std::process::id() {
        return false;
    }
    matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

impl PosixStore {
    /// Removes temporary files older than `max_age` left in buckets by crashed writers, and
    /// what deleted buckets left in the root's trash. Returns how many were removed. Other
    /// gateways on the same file system may have writes in flight, so only files older than any
    /// upload could take are touched; leftovers of writers of this host and pid namespace that
    /// no longer run go at once, whatever their age.
    pub fn clean_stale_temporaries(&self, max_age: Duration) -> StoreResult<usize> {
        let mut removed = self.empty_trash();
        let now = SystemTime::now();
        for bucket in self.list_buckets(&RequestContext::process())? {
            let Ok(bucket_fd) = self.bucket_fd(&bucket.name) else {
                continue;
            };
            removed += self.clean_claimed_uploads(bucket_fd.fd.as_fd(), now - max_age);
            let Ok(tmp) = open_dir_beneath(bucket_fd.fd.as_fd(), TMP_DIR) else {
                continue;
            };
            let names: Vec<_> = rustix::fs::Dir::read_from(&tmp)?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_owned())
                .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
                .collect();
            for name in names {
                let Ok(stat) = rustix::fs::statat(&tmp, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                    continue;
                };
                let age = now.duration_since(modified(&stat)).unwrap_or_default();
                let dead = name.to_str().is_ok_and(left_by_dead_writer);
                if (dead || age >= max_age) && rustix::fs::unlinkat(&tmp, name.as_c_str(), AtFlags::empty()).is_ok() {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Removes what deleted buckets left in the root's trash (a delete interrupted by a crash).
    fn empty_trash(&self) -> usize {
        let trash = self.root.join(TRASH_DIR);
        let Ok(entries) = std::fs::read_dir(&trash) else { return 0 };
        let mut removed = 0;
        for entry in entries.flatten() {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => removed += 1,
                Err(err) => tracing::warn!(path = %entry.path().display(), error = %err, "could not empty the trash"),
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_of_another_pid_namespace_are_never_judged_dead() {
        // A pid that surely does not run here.
        let dead_pid = 0x3fff_fff0u32;
        let name = |tag: &str| format!("tmp.{tag}.{dead_pid:x}.0123456789abcdef.1");
        let here = tag_of("node1", "boot-a", "pid:[4026531836]");
        let other_container = tag_of("node1", "boot-a", "pid:[4026532999]");
        let after_reboot = tag_of("node1", "boot-b", "pid:[4026531836]");
        assert_ne!(here, other_container);
        assert_ne!(here, after_reboot);
        assert!(left_by_dead_writer_with_tag(&name(&here), &here));
        assert!(!left_by_dead_writer_with_tag(&name(&other_container), &here));
        assert!(!left_by_dead_writer_with_tag(&name(&after_reboot), &here));
        // A live writer of this namespace (this process's parent) is not dead.
        let live = format!("tmp.{here}.{:x}.0123456789abcdef.1", std::os::unix::process::parent_id());
        assert!(!left_by_dead_writer_with_tag(&live, &here));
    }

    #[test]
    fn this_process_tag_names_its_pid_namespace() {
        let suffix = unique_suffix();
        assert!(suffix.starts_with(writer_tag()));
        assert!(!writer_tag().contains('.'));
    }
}
