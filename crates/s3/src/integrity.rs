//! Integrity: the Content-MD5 and x-amz-checksum-* a client declares (in headers, or in
//! aws-chunked trailers that arrive after the body), checked against what the engine computed
//! before the object becomes visible; and the stored checksum put back into responses.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use isthmus_store::{
    Checksum, ChecksumAlgorithm, ChecksumType, CompleteChecksum, Digests, ObjectInfo, StoreError, StoreResult,
};
use s3s::{S3Result, TrailingHeaders, s3_error};

/// What the client declared about a body.
#[derive(Default)]
pub struct Declared {
    content_md5: Option<[u8; 16]>,
    pub algorithm: Option<ChecksumAlgorithm>,
    value: Option<String>,
    trailers: Option<TrailingHeaders>,
}

/// The x-amz-checksum-* header values of an input, in `ChecksumAlgorithm::ALL` order.
pub type ChecksumHeaders = [Option<String>; 5];

impl Declared {
    /// `algorithm` is x-amz-sdk-checksum-algorithm; `trailer` the x-amz-trailer header.
    pub fn new(
        content_md5: Option<&str>,
        algorithm: Option<&str>,
        values: ChecksumHeaders,
        trailer: Option<&str>,
        trailers: Option<TrailingHeaders>,
    ) -> S3Result<Self> {
        let content_md5 = match content_md5 {
            None => None,
            Some(b64) => {
                let raw = BASE64.decode(b64.trim()).ok().and_then(|v| <[u8; 16]>::try_from(v).ok());
                Some(raw.ok_or_else(|| s3_error!(InvalidDigest, "The Content-MD5 you specified is not valid."))?)
            }
        };
        let from_value = declared_checksum(values)?;
        let named = match algorithm {
            None => None,
            Some(name) => Some(
                ChecksumAlgorithm::from_name(name)
                    .ok_or_else(|| s3_error!(InvalidRequest, "Checksum algorithm {name} is not supported"))?,
            ),
        };
        let trailed = trailer.and_then(|t| {
            t.trim().to_ascii_lowercase().strip_prefix("x-amz-checksum-").and_then(ChecksumAlgorithm::from_name)
        });
        if let (Some((a, _)), Some(n)) = (&from_value, named)
            && *a != n
        {
            return Err(s3_error!(InvalidRequest, "Value for x-amz-sdk-checksum-algorithm header is invalid."));
        }
        let algorithm = from_value.as_ref().map(|(a, _)| *a).or(named).or(trailed);
        Ok(Self { content_md5, algorithm, value: from_value.map(|(_, v)| v), trailers })
    }

    /// Whether the client declared a Content-MD5 (the writer must compute the MD5).
    pub fn declares_md5(&self) -> bool {
        self.content_md5.is_some()
    }

    /// Compares what the client declared with what was received. Runs after the whole body
    /// (and so its trailers) arrived, before commit.
    pub fn check(&self, digests: &Digests) -> StoreResult<()> {
        match (self.content_md5, digests.md5) {
            (Some(expected), Some(got)) if expected != got => {
                return Err(StoreError::BadDigest(
                    "The Content-MD5 you specified did not match what we received.".into(),
                ));
            }
            // The writer was asked for the MD5 (`md5_required`); a declared digest is never
            // let through unchecked.
            (Some(_), None) => {
                return Err(StoreError::Io(std::io::Error::other(
                    "the Content-MD5 could not be verified: no MD5 was computed",
                )));
            }
            _ => {}
        }
        let Some(algorithm) = self.algorithm else {
            return Ok(());
        };
        let header = format!("x-amz-checksum-{}", algorithm.name().to_ascii_lowercase());
        let expected = self.value.clone().or_else(|| {
            self.trailers
                .as_ref()?
                .read(|h| h.get(header.as_str()).and_then(|v| v.to_str().ok()).map(str::to_string))
                .flatten()
        });
        match (expected, &digests.checksum) {
            (Some(expected), Some(got)) if expected.trim() != got.value => Err(StoreError::BadDigest(format!(
                "The {} you specified did not match the calculated checksum.",
                algorithm.name()
            ))),
            _ => Ok(()),
        }
    }
}

/// The one x-amz-checksum-* header of a request, if any: more than one, or a value that is no
/// digest of its algorithm, is refused as S3 refuses it.
pub fn declared_checksum(values: ChecksumHeaders) -> S3Result<Option<(ChecksumAlgorithm, String)>> {
    match one_header(values)? {
        Some((algorithm, value)) if !algorithm.is_digest(&value) => Err(invalid_checksum_header(algorithm)),
        other => Ok(other),
    }
}

/// The checksum headers (or fields) given, with their algorithms.
fn present(values: ChecksumHeaders) -> Vec<(ChecksumAlgorithm, String)> {
    ChecksumAlgorithm::ALL.into_iter().zip(values).filter_map(|(a, v)| v.map(|v| (a, v.trim().to_string()))).collect()
}

/// The one x-amz-checksum-* header given, if any.
fn one_header(values: ChecksumHeaders) -> S3Result<Option<(ChecksumAlgorithm, String)>> {
    let mut declared = present(values);
    if declared.len() > 1 {
        return Err(s3_error!(
            InvalidRequest,
            "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
        ));
    }
    Ok(declared.pop())
}

fn invalid_checksum_header(algorithm: ChecksumAlgorithm) -> s3s::S3Error {
    s3_error!(InvalidRequest, "Value for x-amz-checksum-{} header is invalid.", algorithm.name().to_ascii_lowercase())
}

/// A CompleteMultipartUpload's x-amz-checksum-type and x-amz-checksum-* (the object's
/// checksum: a composite one may carry its "-N" part count), checked for form here and against
/// the upload by the engine.
pub fn complete_checksum(kind: Option<&str>, values: ChecksumHeaders) -> S3Result<CompleteChecksum> {
    let kind = kind.map(parse_checksum_type).transpose()?;
    let value = match one_header(values)? {
        None => None,
        Some((algorithm, value)) => {
            let (digest, count) = match value.rsplit_once('-') {
                Some((digest, count)) => (digest, Some(count)),
                None => (value.as_str(), None),
            };
            let count_ok = count.is_none_or(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()));
            if !count_ok || !algorithm.is_digest(digest) {
                return Err(invalid_checksum_header(algorithm));
            }
            Some((algorithm, value))
        }
    };
    Ok(CompleteChecksum { kind, value })
}

/// A part's checksum in a CompleteMultipartUpload body: one at most, a digest of its algorithm
/// (S3 answers InvalidArgument otherwise).
pub fn listed_part_checksum(values: ChecksumHeaders) -> S3Result<Option<String>> {
    match present(values).as_slice() {
        [] => Ok(None),
        [(algorithm, value)] if algorithm.is_digest(value) => Ok(Some(value.clone())),
        _ => Err(s3_error!(InvalidArgument, "Invalid Base64 or multiple checksums present in request")),
    }
}

/// A CreateMultipartUpload's checksum algorithm and type, as S3 takes them: a type needs an
/// algorithm; without one the algorithm's default type; a combination the algorithm does not
/// support is refused.
pub fn upload_checksum_choice(
    algorithm: Option<&str>,
    kind: Option<&str>,
) -> S3Result<(Option<ChecksumAlgorithm>, ChecksumType)> {
    let algorithm = algorithm
        .map(|name| {
            ChecksumAlgorithm::from_name(name).ok_or_else(|| {
                s3_error!(
                    InvalidRequest,
                    "Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]"
                )
            })
        })
        .transpose()?;
    let kind = kind.map(parse_checksum_type).transpose()?;
    match (algorithm, kind) {
        (None, None) => Ok((None, ChecksumType::FullObject)),
        (None, Some(_)) => Err(s3_error!(
            InvalidRequest,
            "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header."
        )),
        (Some(a), Some(k)) if !a.supports(k) => Err(s3_error!(
            InvalidRequest,
            "The {} checksum type cannot be used with the {} checksum algorithm.",
            k.name(),
            a.name().to_ascii_lowercase()
        )),
        (Some(a), k) => Ok((Some(a), k.unwrap_or_else(|| a.default_multipart_type()))),
    }
}

/// The checksum a GET or HEAD with checksum mode reports: the object's, for all of it (or a
/// range that covers all of it); part `n`'s for `partNumber=n` of a multipart object (when its
/// parts' checksums were recorded); none for a part of the bytes.
pub fn served_checksum(info: &ObjectInfo, part_number: Option<u32>, range: Option<(u64, u64)>) -> Option<Checksum> {
    let checksum = info.checksum.as_ref()?;
    match (part_number, range) {
        (Some(n), _) if !info.parts.is_empty() => checksum.part(n),
        (_, None) => Some(checksum.clone()),
        (_, Some((0, last))) if last.checked_add(1) == Some(info.size) => Some(checksum.clone()),
        (_, Some(_)) => None,
    }
}

/// A listed object's ChecksumAlgorithm: the algorithm of its stored checksum, if it has one.
pub fn listed_algorithm(c: &Option<Checksum>) -> Option<Vec<s3s::dto::ChecksumAlgorithm>> {
    c.as_ref().map(|c| vec![s3s::dto::ChecksumAlgorithm::from(c.algorithm.name().to_string())])
}

/// The s3s algorithm name of a checksum, for x-amz-checksum-type.
pub fn checksum_type(c: &Checksum) -> s3s::dto::ChecksumType {
    s3s_checksum_type(c.kind)
}

/// A checksum type as s3s names it.
pub fn s3s_checksum_type(kind: ChecksumType) -> s3s::dto::ChecksumType {
    s3s::dto::ChecksumType::from_static(match kind {
        ChecksumType::FullObject => s3s::dto::ChecksumType::FULL_OBJECT,
        ChecksumType::Composite => s3s::dto::ChecksumType::COMPOSITE,
    })
}

/// An upload's checksum algorithm and type as S3 reports them (nothing without an algorithm).
pub fn upload_checksum(
    algorithm: Option<isthmus_store::ChecksumAlgorithm>,
    kind: ChecksumType,
) -> (Option<s3s::dto::ChecksumAlgorithm>, Option<s3s::dto::ChecksumType>) {
    match algorithm {
        Some(a) => (Some(s3s::dto::ChecksumAlgorithm::from(a.name().to_string())), Some(s3s_checksum_type(kind))),
        None => (None, None),
    }
}

/// Parses x-amz-checksum-type.
fn parse_checksum_type(t: &str) -> S3Result<ChecksumType> {
    ChecksumType::from_name(t.trim())
        .ok_or_else(|| s3_error!(InvalidRequest, "Value for x-amz-checksum-type header is invalid."))
}

/// The x-amz-checksum-* fields of any input that has them.
#[macro_export]
macro_rules! checksum_headers {
    ($input:expr) => {
        [
            $input.checksum_crc32.clone(),
            $input.checksum_crc32c.clone(),
            $input.checksum_crc64nvme.clone(),
            $input.checksum_sha1.clone(),
            $input.checksum_sha256.clone(),
        ]
    };
}

/// Puts a stored checksum into the x-amz-checksum-* fields of any output that has them.
#[macro_export]
macro_rules! set_checksum {
    ($output:expr, $checksum:expr) => {
        if let Some(c) = $checksum {
            let value = Some(c.value.clone());
            match c.algorithm {
                isthmus_store::ChecksumAlgorithm::Crc32 => $output.checksum_crc32 = value,
                isthmus_store::ChecksumAlgorithm::Crc32c => $output.checksum_crc32c = value,
                isthmus_store::ChecksumAlgorithm::Crc64nvme => $output.checksum_crc64nvme = value,
                isthmus_store::ChecksumAlgorithm::Sha1 => $output.checksum_sha1 = value,
                isthmus_store::ChecksumAlgorithm::Sha256 => $output.checksum_sha256 = value,
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digests(md5: [u8; 16], checksum: Option<&str>) -> Digests {
        Digests {
            md5: Some(md5),
            checksum: checksum.map(|v| Checksum::full_object(ChecksumAlgorithm::Crc32, v.into())),
        }
    }

    #[test]
    fn content_md5_and_checksums_are_checked() {
        let md5 = [1u8; 16];
        let ok = Declared::new(
            Some(&BASE64.encode(md5)),
            None,
            [Some("DUoRhQ==".into()), None, None, None, None],
            None,
            None,
        )
        .unwrap();
        assert_eq!(ok.algorithm, Some(ChecksumAlgorithm::Crc32));
        assert!(ok.check(&digests(md5, Some("DUoRhQ=="))).is_ok());
        assert!(matches!(ok.check(&digests([2u8; 16], Some("DUoRhQ=="))), Err(StoreError::BadDigest(_))));
        assert!(matches!(ok.check(&digests(md5, Some("AAAAAA=="))), Err(StoreError::BadDigest(_))));
        assert!(Declared::new(Some("not base64!"), None, Default::default(), None, None).is_err());
        let two = [Some("a".into()), Some("b".into()), None, None, None];
        assert!(Declared::new(None, None, two, None, None).is_err());
        let trailed = Declared::new(None, None, Default::default(), Some("x-amz-checksum-crc64nvme"), None).unwrap();
        assert_eq!(trailed.algorithm, Some(ChecksumAlgorithm::Crc64nvme));
        assert!(Declared::new(None, Some("MD4"), Default::default(), None, None).is_err());
    }

    #[test]
    fn multipart_checksum_headers_are_taken_as_s3_takes_them() {
        use ChecksumAlgorithm::*;
        let choice = |a, t| upload_checksum_choice(a, t).map_err(|e| e.message().unwrap_or_default().to_string());
        assert_eq!(choice(Some("CRC64NVME"), None).unwrap(), (Some(Crc64nvme), ChecksumType::FullObject));
        assert_eq!(choice(Some("sha1"), None).unwrap(), (Some(Sha1), ChecksumType::Composite));
        assert_eq!(choice(Some("CRC32C"), Some("FULL_OBJECT")).unwrap(), (Some(Crc32c), ChecksumType::FullObject));
        assert!(choice(Some("CRC64NVME"), Some("COMPOSITE")).unwrap_err().contains("crc64nvme"));
        assert!(choice(Some("SHA256"), Some("FULL_OBJECT")).unwrap_err().starts_with("The FULL_OBJECT checksum type"));
        assert!(choice(None, Some("COMPOSITE")).unwrap_err().contains("can only be used with"));
        assert!(choice(Some("CRC32"), Some("PARTIAL")).is_err() && choice(Some("MD5"), None).is_err());
        let crc = |v: &str| [Some(v.to_string()), None, None, None, None];
        let declared = complete_checksum(Some("COMPOSITE"), crc("DUoRhQ==-2")).unwrap();
        assert_eq!(declared.kind, Some(ChecksumType::Composite));
        assert_eq!(declared.value, Some((Crc32, "DUoRhQ==-2".to_string())));
        for bad in ["DUoRhQ==-a", "DUoRhQ==-", "DUoRhQ", "AAAAAAAAAAA="] {
            assert!(complete_checksum(None, crc(bad)).is_err(), "{bad}");
        }
        assert_eq!(listed_part_checksum(crc(" DUoRhQ== ")).unwrap().as_deref(), Some("DUoRhQ=="));
        assert!(listed_part_checksum(crc("not base64")).is_err());
        assert!(listed_part_checksum([Some("DUoRhQ==".into()), Some("DUoRhQ==".into()), None, None, None]).is_err());
    }
}
