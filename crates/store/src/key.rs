//! Names: S3 bucket naming rules and the mapping of object keys to relative paths beneath a
//! bucket directory. Everything that could escape the bucket is refused here, before any syscall.

use crate::error::{StoreError, StoreResult};

/// Name of the hidden directory that holds internal state, at the data root and in each bucket.
pub const INTERNAL_DIR: &str = ".isthmus";

/// Whether a directory entry is the gateway's (never a key's segment, never listed):
/// `.isthmus` itself, and `.isthmus.*`, the names of writes in progress in a key's directory.
pub fn is_internal_name(name: &str) -> bool {
    name.strip_prefix(INTERNAL_DIR).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The longest object key S3 accepts, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// The longest single path component most file systems accept (NAME_MAX).
pub const MAX_SEGMENT_LEN: usize = 255;

/// Checks a bucket name against the S3 rules for new general purpose buckets.
pub fn validate_bucket_name(name: &str) -> StoreResult<()> {
    let fail = |why: &str| Err(StoreError::InvalidBucketName(format!("{name:?}: {why}")));
    if !(3..=63).contains(&name.len()) {
        return fail("must be 3 to 63 characters long");
    }
    let bytes = name.as_bytes();
    if !bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-') {
        return fail("only lowercase letters, digits, '.' and '-' are allowed");
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return fail("must begin and end with a letter or digit");
    }
    if name.contains("..") || name.contains(".-") || name.contains("-.") {
        return fail("no two adjacent periods and no period next to a hyphen");
    }
    if name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok()) {
        return fail("must not be formatted as an IP address");
    }
    if name.starts_with("xn--") || name.starts_with("sthree-") || name.ends_with("-s3alias") {
        return fail("reserved prefix or suffix");
    }
    Ok(())
}

/// An object key checked and split into path segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectPath<'k> {
    key: &'k str,
    /// Path segments; for a directory object (`a/b/`) the last segment is the directory itself.
    segments: Vec<&'k str>,
    is_dir: bool,
}

impl<'k> ObjectPath<'k> {
    /// Validates `key` and maps it to a relative path. `a/b` is the file `a/b`; `a/b/` is the
    /// directory object `a/b`.
    pub fn parse(key: &'k str) -> StoreResult<Self> {
        let invalid = |why: &str| Err(StoreError::InvalidKey(format!("{key:?}: {why}")));
        if key.is_empty() {
            return invalid("the key must not be empty");
        }
        if key.len() > MAX_KEY_LEN {
            return Err(StoreError::KeyTooLong(format!("{} bytes, the limit is {MAX_KEY_LEN}", key.len())));
        }
        if key.contains('\0') {
            return invalid("NUL characters are not allowed");
        }
        let (body, is_dir) = match key.strip_suffix('/') {
            Some(body) => (body, true),
            None => (key, false),
        };
        let mut segments = Vec::with_capacity(4);
        for segment in body.split('/') {
            match segment {
                "" => {
                    return invalid("empty path segments ('//' or a leading '/') are not allowed");
                }
                "." | ".." => return invalid("'.' and '..' segments are not allowed"),
                s if s.len() > MAX_SEGMENT_LEN => {
                    return Err(StoreError::KeyTooLong(format!(
                        "the segment {:?}... is {} bytes, the file system limit is {MAX_SEGMENT_LEN}",
                        &s[..s.floor_char_boundary(16)],
                        s.len()
                    )));
                }
                s => segments.push(s),
            }
        }
        if segments.iter().any(|s| is_internal_name(s)) {
            return invalid("path segments .isthmus and .isthmus.* are reserved for the gateway's internal state");
        }
        Ok(Self { key, segments, is_dir })
    }

    pub fn key(&self) -> &'k str {
        self.key
    }

    pub fn segments(&self) -> &[&'k str] {
        &self.segments
    }

    /// True for a key that ends in `/`, stored as a directory.
    pub fn is_dir(&self) -> bool {
        self.is_dir
    }

    /// The relative path of the object beneath its bucket directory.
    pub fn relative(&self) -> String {
        self.segments.join("/")
    }

    /// The last path segment: the file or directory name of the object.
    pub fn leaf(&self) -> &'k str {
        self.segments[self.segments.len() - 1]
    }

    /// The parent directory's relative path, or `None` at the bucket's top level.
    pub fn parent(&self) -> Option<String> {
        let n = self.segments.len();
        (n > 1).then(|| self.segments[..n - 1].join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_s3_rules() {
        for good in ["abc", "my-bucket", "my.bucket.1", "a1b", &"a".repeat(63)] {
            assert!(validate_bucket_name(good).is_ok(), "{good}");
        }
        for bad in [
            "ab",
            &"a".repeat(64),
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            "a.-b",
            "192.168.1.1",
            "xn--abc",
            ".isthmus",
            "a b",
        ] {
            assert!(matches!(validate_bucket_name(bad), Err(StoreError::InvalidBucketName(_))), "{bad}");
        }
    }

    #[test]
    fn keys_map_to_segments() {
        let p = ObjectPath::parse("a/b/c.txt").unwrap();
        assert_eq!(p.segments(), ["a", "b", "c.txt"]);
        assert!(!p.is_dir());
        assert_eq!(p.leaf(), "c.txt");
        assert_eq!(p.parent().as_deref(), Some("a/b"));
        assert_eq!(p.relative(), "a/b/c.txt");

        let d = ObjectPath::parse("a/b/").unwrap();
        assert_eq!(d.segments(), ["a", "b"]);
        assert!(d.is_dir());

        let top = ObjectPath::parse("x").unwrap();
        assert_eq!(top.parent(), None);
        // Backslashes and dots inside names are ordinary characters on POSIX.
        assert!(ObjectPath::parse("a\\..\\b").is_ok());
        assert!(ObjectPath::parse("a/..b/c..").is_ok());
    }

    #[test]
    fn traversal_and_bad_keys_are_refused() {
        for bad in [
            "",
            "..",
            "../x",
            "a/../../x",
            "a/./b",
            "/abs",
            "a//b",
            "a\0b",
            ".",
            "./",
            ".isthmus",
            ".isthmus/tmp/x",
            "a/.isthmus/v",
            "a/.isthmus.tmp.1",
        ] {
            assert!(matches!(ObjectPath::parse(bad), Err(StoreError::InvalidKey(_))), "{bad:?}");
        }
        let long_segment = format!("a/{}", "x".repeat(256));
        assert!(matches!(ObjectPath::parse(&long_segment), Err(StoreError::KeyTooLong(_))));
        let long_key = "ab/".repeat(400);
        assert!(matches!(ObjectPath::parse(&long_key), Err(StoreError::KeyTooLong(_))));
        // Names that only begin like the reserved one are keys.
        assert!(ObjectPath::parse(".isthmusrc").is_ok());
        assert!(ObjectPath::parse("a/.isthmus-notes").is_ok());
        // Exactly at the limits is fine.
        assert!(ObjectPath::parse(&"x".repeat(255)).is_ok());
    }
}
