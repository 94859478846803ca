//! An object's body read from a stretch of one open file: what the posix backend serves, and
//! what the local door's client reads from a descriptor its gateway passed. It names its file
//! (`ObjectRead::file`), so a door may hand the descriptor on instead of copying the bytes.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};

use rustix::io::Errno;

use crate::ObjectRead;

/// `remaining` bytes of `file` from `offset`, read with `pread` (the file's own position is
/// not used, so a passed descriptor reads the same bytes on either side).
pub struct FileStretch {
    file: File,
    offset: u64,
    remaining: u64,
}

impl FileStretch {
    pub fn new(file: File, offset: u64, remaining: u64) -> Self {
        Self { file, offset, remaining }
    }
}

impl Read for FileStretch {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = loop {
            match rustix::io::pread(&self.file, &mut buf[..want], self.offset) {
                Err(Errno::INTR) => continue,
                other => break other?,
            }
        };
        if n == 0 {
            // The file shrank under us (a POSIX writer truncated it).
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "object was truncated while being read"));
        }
        self.offset += n as u64;
        self.remaining -= n as u64;
        Ok(n)
    }
}

impl ObjectRead for FileStretch {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn file(&self) -> Option<(BorrowedFd<'_>, u64)> {
        Some((self.file.as_fd(), self.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_its_stretch_and_says_where_it_stands() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let mut stretch = FileStretch::new(file, 2, 5);
        let mut first = [0u8; 3];
        stretch.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"234");
        assert_eq!(stretch.remaining(), 2);
        assert_eq!(stretch.file().map(|(_, offset)| offset), Some(5));
        let mut rest = Vec::new();
        stretch.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"56");
        // A file shorter than the stretch it was opened for is an error, not a short body.
        let mut short = FileStretch::new(tempfile::tempfile().unwrap(), 0, 4);
        assert_eq!(short.read(&mut [0u8; 4]).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
