//! Filling a file system to a given level for `isthmus bench pools --fill-levels` (CERN's
//! Figure 6: write rate against how full the pool is). Filler files are allocated, not
//! written (fallocate; written with zeros where the file system cannot allocate), in one
//! directory that is removed afterwards. Only a file system of its own is filled: the
//! directory must be a mount point, so a bench never fills the disk a machine runs on.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The filler goes in files of this size (the last one smaller).
const FILLER_FILE: u64 = 256 << 20;

/// How full a file system is, in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Usage {
    pub total: u64,
    pub used: u64,
    /// What an unprivileged writer may still write.
    pub available: u64,
}

impl Usage {
    pub(crate) fn of(dir: &Path) -> Result<Self, String> {
        let stat = rustix::fs::statvfs(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let block = stat.f_frsize;
        let total = stat.f_blocks.saturating_mul(block);
        Ok(Self {
            total,
            used: total.saturating_sub(stat.f_bfree.saturating_mul(block)),
            available: stat.f_bavail.saturating_mul(block),
        })
    }

    pub(crate) fn percent(&self) -> f64 {
        100.0 * self.used as f64 / self.total.max(1) as f64
    }
}

/// Checks that `dir` is the root of a file system of its own (its parent is on another
/// device), the only kind of directory the bench fills.
pub(crate) fn check_own_file_system(dir: &Path) -> Result<(), String> {
    let device = |path: &Path| std::fs::metadata(path).map(|m| (m.dev(), m.ino())).ok();
    match (device(dir), device(&dir.join(".."))) {
        (Some((here, inode)), Some((parent, parent_inode))) if here != parent || inode == parent_inode => Ok(()),
        _ => Err(format!(
            "--fill-levels fills the file system of {}, which is not a mount point: give a --pool-dir that \
             is a file system of its own, such as a loop-mounted image (truncate -s 8G fs.img; mkfs.ext4 -q \
             fs.img; mount -o loop fs.img /mnt/fill)",
            dir.display()
        )),
    }
}

/// Filler files in `dir/fill`, removed when dropped.
pub(crate) struct Filler {
    dir: PathBuf,
    files: usize,
}

impl Filler {
    pub(crate) fn new(dir: &Path) -> Result<Self, String> {
        let dir = dir.join("fill");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Self { dir, files: 0 })
    }

    /// Checks before anything is written that the file system, filled to the highest of
    /// `levels`, still has `headroom` bytes for the streams.
    pub(crate) fn check_room(dir: &Path, levels: &[u32], headroom: u64) -> Result<(), String> {
        let Some(&highest) = levels.iter().max() else { return Ok(()) };
        let usage = Usage::of(dir)?;
        let target = (usage.total as f64 * f64::from(highest) / 100.0) as u64;
        let left = usage.available.saturating_sub(target.saturating_sub(usage.used));
        if left < headroom {
            return Err(room_error(highest, left, headroom));
        }
        Ok(())
    }

    /// Adds filler until the file system is `percent` full, leaving `headroom` bytes free for
    /// what the bench writes next; returns the level reached.
    pub(crate) fn fill_to(&mut self, percent: u32, headroom: u64) -> Result<Usage, String> {
        let usage = Usage::of(&self.dir)?;
        let target = (usage.total as f64 * f64::from(percent) / 100.0) as u64;
        if usage.used > target {
            return Err(format!(
                "--fill-levels {percent}: the file system is already {:.0} % full (give levels in increasing order, \
                 above what it holds)",
                usage.percent()
            ));
        }
        let mut missing = target - usage.used;
        if usage.available < missing.saturating_add(headroom) {
            return Err(room_error(percent, usage.available.saturating_sub(missing), headroom));
        }
        // A bar of the bytes filled on a terminal (nothing drawn elsewhere), one line at the end.
        let (began, files_before, total) = (std::time::Instant::now(), self.files, missing);
        let bar = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "filling to {msg} [{bar:40}] {binary_bytes}/{binary_total_bytes} {elapsed_precise} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(format!("{percent} %"));
        while missing > 0 {
            let len = missing.min(FILLER_FILE);
            let path = self.dir.join(format!("filler{}", self.files));
            allocate(&path, len)?;
            self.files += 1;
            missing -= len;
            bar.inc(len);
        }
        bar.finish_and_clear();
        let reached = Usage::of(&self.dir)?;
        eprintln!(
            "filled {} to {:.1} %: {} in {} files, {:.1} s",
            self.dir.display(),
            reached.percent(),
            indicatif::BinaryBytes(total),
            self.files - files_before,
            began.elapsed().as_secs_f64()
        );
        Ok(reached)
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn room_error(percent: u32, left: u64, headroom: u64) -> String {
    format!(
        "--fill-levels {percent}: at {percent} % full the file system has {} MiB left and the streams need {} MiB: \
         give fewer --streams, a smaller --size, lower levels or a larger file system",
        left >> 20,
        headroom >> 20
    )
}

/// A file of `len` bytes whose blocks are allocated.
fn allocate(path: &Path, len: u64) -> Result<(), String> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => {}
        Err(e) => return Err(format!("{}: {e}", path.display())),
    }
    let zeros = vec![0u8; 1 << 20];
    let mut file = std::io::BufWriter::new(file);
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n]).map_err(|e| format!("{}: {e}", path.display()))?;
        left -= n as u64;
    }
    file.flush().map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_of_the_root_file_system_is_not_filled() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_own_file_system(dir.path()).unwrap_err();
        assert!(err.contains("not a mount point") && err.contains("mount -o loop"), "{err}");
    }

    #[test]
    fn a_level_below_what_the_file_system_holds_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut filler = Filler::new(dir.path()).unwrap();
        let err = filler.fill_to(0, 0).unwrap_err();
        assert!(err.contains("already"), "{err}");
        let fill = dir.path().join("fill");
        drop(filler);
        assert!(!fill.exists(), "the filler directory is removed");
    }
}
