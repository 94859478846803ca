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
}

/// Whether a multipart checksum covers the whole object or is a checksum of the parts' checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChecksumType {
    #[default]
    FullObject,
    Composite,
}

/// A stored checksum: the algorithm and the base64 value S3 headers carry (`...-N` for
/// composite multipart checksums).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksum {
    pub algorithm: ChecksumAlgorithm,
    pub value: String,
    #[serde(default)]
    pub kind: ChecksumType,
}

impl Checksum {
    /// The raw digest bytes of a full (non-composite) value.
    pub fn raw(&self) -> Option<Vec<u8>> {
        BASE64.decode(&self.value).ok()
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
        Checksum { algorithm, value: BASE64.encode(raw), kind: ChecksumType::FullObject }
    }
}

fn crc_bytes(algorithm: ChecksumAlgorithm, value: u64) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    bytes[8 - algorithm.crc_width_bytes()..].to_vec()
}

fn crc_value(raw: &[u8]) -> u64 {
    raw.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// The checksum of a multipart object from its parts' checksums and sizes.
pub fn multipart_checksum(algorithm: ChecksumAlgorithm, kind: ChecksumType, parts: &[(Vec<u8>, u64)]) -> Checksum {
    match (kind, algorithm.crc()) {
        (ChecksumType::FullObject, Some(crc)) => {
            let mut combined: Option<u64> = None;
            for (raw, len) in parts {
                let value = crc_value(raw);
                combined = Some(match combined {
                    None => value,
                    Some(acc) => crc_fast::checksum_combine(crc, acc, value, *len),
                });
            }
            Checksum { algorithm, value: BASE64.encode(crc_bytes(algorithm, combined.unwrap_or(0))), kind }
        }
        _ => {
            let mut hasher = Hasher::new(algorithm);
            for (raw, _) in parts {
                hasher.update(raw);
            }
            let whole = hasher.checksum();
            Checksum { algorithm, value: format!("{}-{}", whole.value, parts.len()), kind: ChecksumType::Composite }
        }
    }
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
    }
}
