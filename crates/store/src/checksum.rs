//! Integrity checksums S3 clients send and expect back: CRC32, CRC32C, CRC64NVME (crc-fast),
//! SHA-1 and SHA-256, computed while the bytes are written, for whole objects and for
//! multipart uploads (composite "checksum of checksums" or full-object CRC combination).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha1::Digest as _;

/// A checksum algorithm of the S3 API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChecksumAlgorithm {
    Crc32,
    Crc32c,
    Crc64nvme,
    Sha1,
    Sha256,
}

impl ChecksumAlgorithm {
    pub const ALL: [Self; 5] = [Self::Crc32, Self::Crc32c, Self::Crc64nvme, Self::Sha1, Self::Sha256];

    /// The name S3 uses (`CRC32`, `CRC64NVME`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Crc32 => "CRC32",
            Self::Crc32c => "CRC32C",
            Self::Crc64nvme => "CRC64NVME",
            Self::Sha1 => "SHA1",
            Self::Sha256 => "SHA256",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(name))
    }

    fn crc(self) -> Option<crc_fast::CrcAlgorithm> {
        match self {
            Self::Crc32 => Some(crc_fast::CrcAlgorithm::Crc32IsoHdlc),
            Self::Crc32c => Some(crc_fast::CrcAlgorithm::Crc32Iscsi),
            Self::Crc64nvme => Some(crc_fast::CrcAlgorithm::Crc64Nvme),
            Self::Sha1 | Self::Sha256 => None,
        }
    }

    fn crc_width_bytes(self) -> usize {
        if self == Self::Crc64nvme { 8 } else { 4 }
    }

    /// How many bytes a digest of this algorithm has.
    pub fn digest_len(self) -> usize {
        match self {
            Self::Crc32 | Self::Crc32c => 4,
            Self::Crc64nvme => 8,
            Self::Sha1 => 20,
            Self::Sha256 => 32,
        }
    }

    /// Whether a multipart upload may derive its object's checksum this way, as in S3: the
    /// CRCs combine into a full-object CRC; any algorithm but CRC64NVME makes a composite one.
    pub fn supports(self, kind: ChecksumType) -> bool {
        match kind {
            ChecksumType::FullObject => self.crc().is_some(),
            ChecksumType::Composite => self != Self::Crc64nvme,
        }
    }

    /// The type of a multipart upload created with this algorithm and no type, as in S3:
    /// full-object for CRC64NVME, composite for the others.
    pub fn default_multipart_type(self) -> ChecksumType {
        if self == Self::Crc64nvme { ChecksumType::FullObject } else { ChecksumType::Composite }
    }

    /// Whether `value` is a well-formed base64 digest of this algorithm (canonical padding, the
    /// algorithm's length), as a client's x-amz-checksum-* must be.
    pub fn is_digest(self, value: &str) -> bool {
        BASE64.decode(value.trim()).is_ok_and(|raw| raw.len() == self.digest_len())
    }
}

/// Whether a multipart checksum covers the whole object or is a checksum of the parts' checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChecksumType {
    #[default]
    FullObject,
    Composite,
}

impl ChecksumType {
    /// The name S3 uses (`FULL_OBJECT`, `COMPOSITE`).
    pub fn name(self) -> &'static str {
        match self {
            Self::FullObject => "FULL_OBJECT",
            Self::Composite => "COMPOSITE",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Self::FullObject, Self::Composite].into_iter().find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

/// A stored checksum: the algorithm and the base64 value S3 headers carry (`...-N` for
/// composite multipart checksums).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksum {
    pub algorithm: ChecksumAlgorithm,
    pub value: String,
    #[serde(default)]
    pub kind: ChecksumType,
    /// For an object completed from a multipart upload: its parts' digests, concatenated in
    /// part order, base64, which GET and HEAD with `partNumber` and GetObjectAttributes report.
    /// Empty when there were more than `MAX_PART_DIGEST_BYTES` of them (the record of an
    /// object must stay small: a POSIX object's lives in an extended attribute).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub part_digests: String,
}

/// The most part digest bytes an object's checksum records: 4096 CRC32 or CRC32C parts, 2048
/// CRC64NVME, 819 SHA-1, 512 SHA-256 (as base64, a third more).
pub const MAX_PART_DIGEST_BYTES: usize = 16 << 10;

impl Checksum {
    /// A full-object checksum (of a single-piece object, or of one part).
    pub fn full_object(algorithm: ChecksumAlgorithm, value: String) -> Self {
        Self { algorithm, value, kind: ChecksumType::FullObject, part_digests: String::new() }
    }

    /// The raw digest bytes of a full (non-composite) value.
    pub fn raw(&self) -> Option<Vec<u8>> {
        BASE64.decode(&self.value).ok()
    }

    /// The checksum of part `number` (1-based) of a multipart object, when it was recorded:
    /// the part's value, reported with the object's type.
    pub fn part(&self, number: u32) -> Option<Checksum> {
        let len = self.algorithm.digest_len();
        let start = usize::try_from(number).ok()?.checked_sub(1)?.checked_mul(len)?;
        let digests = BASE64.decode(&self.part_digests).ok()?;
        let raw = digests.get(start..start.checked_add(len)?)?;
        Some(Self { kind: self.kind, ..Self::full_object(self.algorithm, BASE64.encode(raw)) })
    }

    /// Whether a client's x-amz-checksum-* value for the whole object is this checksum: for a
    /// composite checksum, with its "-N" part count or without it, as S3 accepts.
    pub fn matches_declared(&self, declared: &str) -> bool {
        let declared = declared.trim();
        declared == self.value
            || (self.kind == ChecksumType::Composite
                && self.value.rsplit_once('-').is_some_and(|(digest, _)| digest == declared))
    }
}

/// Computes one algorithm incrementally.
#[derive(Clone)]
pub enum Hasher {
    Crc(ChecksumAlgorithm, crc_fast::Digest),
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    pub fn new(algorithm: ChecksumAlgorithm) -> Self {
        match (algorithm, algorithm.crc()) {
            (_, Some(crc)) => Self::Crc(algorithm, crc_fast::Digest::new(crc)),
            (ChecksumAlgorithm::Sha1, None) => Self::Sha1(sha1::Sha1::new()),
            _ => Self::Sha256(sha2::Sha256::new()),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Crc(_, d) => d.update(bytes),
            Self::Sha1(h) => h.update(bytes),
            Self::Sha256(h) => h.update(bytes),
        }
    }

    /// The value so far, without consuming the state.
    pub fn checksum(&self) -> Checksum {
        let (algorithm, raw) = match self {
            Self::Crc(a, d) => (*a, crc_bytes(*a, d.finalize())),
            Self::Sha1(h) => (ChecksumAlgorithm::Sha1, h.clone().finalize().to_vec()),
            Self::Sha256(h) => (ChecksumAlgorithm::Sha256, h.clone().finalize().to_vec()),
        };
        Checksum::full_object(algorithm, BASE64.encode(raw))
    }
}

fn crc_bytes(algorithm: ChecksumAlgorithm, value: u64) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    bytes[8 - algorithm.crc_width_bytes()..].to_vec()
}

fn crc_value(raw: &[u8]) -> u64 {
    raw.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// The checksum of a multipart object from its parts' checksums and sizes; it records the
/// parts' checksums too.
pub fn multipart_checksum(algorithm: ChecksumAlgorithm, kind: ChecksumType, parts: &[(Vec<u8>, u64)]) -> Checksum {
    let digest_bytes: usize = parts.iter().map(|(raw, _)| raw.len()).sum();
    let part_digests = if digest_bytes <= MAX_PART_DIGEST_BYTES {
        BASE64.encode(parts.iter().flat_map(|(raw, _)| raw.iter().copied()).collect::<Vec<u8>>())
    } else {
        String::new()
    };
    let object = match (kind, algorithm.crc()) {
        (ChecksumType::FullObject, Some(crc)) => {
            let mut combined: Option<u64> = None;
            for (raw, len) in parts {
                let value = crc_value(raw);
                combined = Some(match combined {
                    None => value,
                    Some(acc) => crc_fast::checksum_combine(crc, acc, value, *len),
                });
            }
            Checksum::full_object(algorithm, BASE64.encode(crc_bytes(algorithm, combined.unwrap_or(0))))
        }
        _ => {
            let mut hasher = Hasher::new(algorithm);
            for (raw, _) in parts {
                hasher.update(raw);
            }
            let whole = hasher.checksum();
            Checksum { value: format!("{}-{}", whole.value, parts.len()), kind: ChecksumType::Composite, ..whole }
        }
    };
    Checksum { part_digests, ..object }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(algorithm: ChecksumAlgorithm, bytes: &[u8]) -> String {
        let mut h = Hasher::new(algorithm);
        h.update(bytes);
        h.checksum().value
    }

    #[test]
    fn known_values() {
        // Reference values for "hello world" (AWS documentation and the algorithms' test vectors).
        assert_eq!(of(ChecksumAlgorithm::Crc32, b"hello world"), "DUoRhQ==");
        assert_eq!(of(ChecksumAlgorithm::Crc32c, b"hello world"), "yZRlqg==");
        assert_eq!(of(ChecksumAlgorithm::Sha1, b"hello world"), "Kq5sNclPz7QV2+lfQIuc6R7oRu0=");
        assert_eq!(of(ChecksumAlgorithm::Sha256, b"hello world"), "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=");
        assert_eq!(
            of(ChecksumAlgorithm::Crc64nvme, b"123456789"),
            BASE64.encode(0xAE8B_1486_0A79_9888u64.to_be_bytes())
        );
    }

    #[test]
    fn full_object_crc_of_parts_equals_crc_of_whole() {
        let (a, b) = (vec![7u8; 1000], b"the rest".to_vec());
        let mut whole = a.clone();
        whole.extend(&b);
        for algorithm in [ChecksumAlgorithm::Crc32, ChecksumAlgorithm::Crc32c, ChecksumAlgorithm::Crc64nvme] {
            let part = |bytes: &[u8]| (BASE64.decode(of(algorithm, bytes)).unwrap(), bytes.len() as u64);
            let combined = multipart_checksum(algorithm, ChecksumType::FullObject, &[part(&a), part(&b)]);
            assert_eq!(combined.value, of(algorithm, &whole), "{algorithm:?}");
        }
        let composite = multipart_checksum(ChecksumAlgorithm::Sha256, ChecksumType::Composite, &[(vec![1, 2], 2)]);
        assert!(composite.value.ends_with("-1"));
        let sha = |n: u8| sha2::Sha256::digest([n]).to_vec();
        let composite =
            multipart_checksum(ChecksumAlgorithm::Sha256, ChecksumType::Composite, &[(sha(1), 9), (sha(2), 1)]);
        assert_eq!(composite.part(2).unwrap().value, BASE64.encode(sha(2)));
        assert_eq!(composite.part(1).unwrap().kind, ChecksumType::Composite);
        assert!(composite.part(0).is_none() && composite.part(3).is_none());
        // Too many to record: the object's checksum without its parts'.
        let many = vec![(sha(3), 1); MAX_PART_DIGEST_BYTES / 32 + 1];
        let unrecorded = multipart_checksum(ChecksumAlgorithm::Sha256, ChecksumType::Composite, &many);
        assert!(unrecorded.part(1).is_none() && unrecorded.value.ends_with("-513"));
    }

    #[test]
    fn the_types_each_algorithm_supports_as_in_s3() {
        use ChecksumAlgorithm::*;
        let full: Vec<_> =
            ChecksumAlgorithm::ALL.into_iter().filter(|a| a.supports(ChecksumType::FullObject)).collect();
        let composite: Vec<_> =
            ChecksumAlgorithm::ALL.into_iter().filter(|a| a.supports(ChecksumType::Composite)).collect();
        assert_eq!(full, [Crc32, Crc32c, Crc64nvme]);
        assert_eq!(composite, [Crc32, Crc32c, Sha1, Sha256]);
        for a in ChecksumAlgorithm::ALL {
            assert!(a.supports(a.default_multipart_type()));
        }
        assert_eq!(Crc64nvme.default_multipart_type(), ChecksumType::FullObject);
        assert_eq!(Crc32.default_multipart_type(), ChecksumType::Composite);
        assert!(Crc32.is_digest("DUoRhQ==") && !Crc32.is_digest("DUoRhQ") && !Crc32.is_digest("AAAAAAAAAAA="));
        // Not canonical base64 (trailing bits set): refused, as S3 refuses it.
        assert!(!Crc32.is_digest("y/Q5Jh=="));
    }

    #[test]
    fn a_declared_composite_value_may_leave_out_its_part_count() {
        let composite = multipart_checksum(ChecksumAlgorithm::Crc32, ChecksumType::Composite, &[(vec![1; 4], 9)]);
        let digest = composite.value.rsplit_once('-').unwrap().0.to_string();
        assert!(composite.matches_declared(&composite.value) && composite.matches_declared(&digest));
        assert!(!composite.matches_declared(&format!("{digest}-2")));
        let full = multipart_checksum(ChecksumAlgorithm::Crc32, ChecksumType::FullObject, &[(vec![1; 4], 9)]);
        assert!(full.matches_declared(&full.value) && !full.matches_declared(&format!("{}-1", full.value)));
    }
}
