//! Names of internal files that say which writer made them (`unique_suffix`), and the test
//! that tells a dead writer's leftovers from a live one's (`left_by_dead_writer`): shared by
//! every backend's staging, trash and cleaning.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use md5::{Digest, Md5};
use rustix::io::Errno;

/// A name part unique across processes and hosts sharing one file system.
/// It ends in `<writer tag>.<pid>.<random>.<counter>`, so a restarted gateway can tell which
/// leftovers belong to dead writers that share its pid namespace (see `left_by_dead_writer`).
pub fn unique_suffix() -> String {
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
    hex::encode(Md5::digest(format!("{hostname}\0{boot_id}\0{pid_namespace}").as_bytes()))[..8].to_string()
}

/// Whether an internal file or directory name made by `unique_suffix` belongs to a process of
/// this host and pid namespace that no longer runs: what a crash (kill -9) leaves behind.
/// Names of other hosts, other pid namespaces or an earlier boot are never judged here; they go
/// when they are older than the age limit.
pub fn left_by_dead_writer(name: &str) -> bool {
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
