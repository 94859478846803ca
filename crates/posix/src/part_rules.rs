//! S3's rules for the parts of a multipart upload, shared by every backend: part numbers; the
//! checksum a part is hashed with; what a CompleteMultipartUpload may list (order, sizes,
//! ETags, part checksums), and the object's "-N" ETag and checksum derived from its parts,
//! checked against the checksum type and value the Complete declared.

use md5::{Digest, Md5};

use isthmus_store::PartRequest;
use isthmus_store::checksum::{Checksum, ChecksumAlgorithm, ChecksumType, multipart_checksum};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::multipart::{CompleteChecksum, CompletedPart, MAX_PART_NUMBER, MIN_PART_SIZE, PartInfo};

pub fn check_part_number(part_number: u32) -> StoreResult<()> {
    if (1..=MAX_PART_NUMBER).contains(&part_number) {
        Ok(())
    } else {
        Err(StoreError::InvalidArgument(format!(
            "Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive"
        )))
    }
}

/// The parts a CompleteMultipartUpload names, checked against the stored ones, with the
/// object's "-N" ETag and checksum.
pub struct PartChoice {
    pub parts: Vec<PartInfo>,
    pub etag: String,
    pub checksum: Option<Checksum>,
}

/// An upload's checksum: the algorithm it was created with (if any) and how the object's
/// checksum derives from the parts'.
pub type UploadChecksum = (Option<ChecksumAlgorithm>, ChecksumType);

/// Checks the listed parts as S3 does (at least one, ascending numbers, each stored with the
/// listed ETag and checksum, all but the last at least 5 MiB; a composite upload's parts each
/// listed with their checksum) and derives the object's ETag (MD5 of the parts' MD5s, "-N")
/// and checksum from them, which must be what the Complete declared (`declared`). Shared by
/// every backend.
pub fn choose_parts<'a>(
    parts: &[CompletedPart],
    stored: impl Fn(u32) -> Option<&'a PartInfo>,
    (algorithm, checksum_type): UploadChecksum,
    declared: &CompleteChecksum,
) -> StoreResult<PartChoice> {
    if parts.is_empty() {
        return Err(StoreError::MalformedXml("You must specify at least one part".into()));
    }
    for (i, part) in parts.iter().enumerate() {
        check_part_number(part.part_number)?;
        if i > 0 && part.part_number <= parts[i - 1].part_number {
            return Err(StoreError::InvalidPartOrder);
        }
    }
    if let (Some(_), Some(kind)) = (algorithm, declared.kind)
        && kind != checksum_type
    {
        return Err(StoreError::InvalidRequest(format!(
            "The upload was created using the {} checksum mode. The complete request must use the same checksum mode.",
            checksum_type.name()
        )));
    }
    let mut chosen = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        if let (Some(algorithm), ChecksumType::Composite, None) = (algorithm, checksum_type, &part.checksum) {
            return Err(StoreError::InvalidRequest(format!(
                "The upload was created using a {} checksum. The complete request must include the checksum for each part. It was missing for part {} in the request.",
                algorithm.name().to_ascii_lowercase(),
                part.part_number
            )));
        }
        let etag = part.etag.trim_matches('"').to_ascii_lowercase();
        let checksum_matches = |info: &PartInfo| match (&part.checksum, &info.checksum) {
            (Some(claimed), Some(stored)) => claimed.trim() == stored.value,
            (Some(_), None) => false,
            (None, _) => true,
        };
        let Some(info) = stored(part.part_number).filter(|info| info.etag == etag && checksum_matches(info)) else {
            return Err(StoreError::InvalidPart(part.part_number));
        };
        if i + 1 < parts.len() && info.size < MIN_PART_SIZE {
            return Err(StoreError::EntityTooSmall);
        }
        chosen.push(info.clone());
    }
    let mut etag_hasher = Md5::new();
    for info in &chosen {
        etag_hasher.update(hex::decode(&info.etag).map_err(|_| StoreError::InvalidPart(info.part_number))?);
    }
    let etag = format!("{}-{}", hex::encode(etag_hasher.finalize()), chosen.len());
    let checksum = match algorithm {
        Some(algorithm) => {
            let mut raws = Vec::with_capacity(chosen.len());
            for info in &chosen {
                let raw = info
                    .checksum
                    .as_ref()
                    .filter(|c| c.algorithm == algorithm)
                    .and_then(Checksum::raw)
                    .ok_or(StoreError::InvalidPart(info.part_number))?;
                raws.push((raw, info.size));
            }
            let checksum = multipart_checksum(algorithm, checksum_type, &raws);
            check_declared(&checksum, declared)?;
            Some(checksum)
        }
        // As in S3, which gives such an upload a checksum of its own choosing, a value declared
        // for an upload created without an algorithm is not compared: there is none to compare.
        None => None,
    };
    Ok(PartChoice { parts: chosen, etag, checksum })
}

/// The object's checksum against the one a CompleteMultipartUpload declared.
fn check_declared(checksum: &Checksum, declared: &CompleteChecksum) -> StoreResult<()> {
    let Some((algorithm, value)) = &declared.value else {
        return Ok(());
    };
    if *algorithm != checksum.algorithm {
        return Err(mismatched_algorithm(checksum.algorithm, Some(*algorithm)));
    }
    if checksum.matches_declared(value) {
        Ok(())
    } else {
        Err(StoreError::BadDigest(format!(
            "The {} you specified did not match the calculated checksum.",
            algorithm.name().to_ascii_lowercase()
        )))
    }
}

/// S3's answer to a checksum of another algorithm than the upload's (`null`: none given).
fn mismatched_algorithm(expected: ChecksumAlgorithm, actual: Option<ChecksumAlgorithm>) -> StoreError {
    StoreError::InvalidRequest(format!(
        "Checksum Type mismatch occurred, expected checksum Type: {}, actual checksum Type: {}",
        expected.name().to_ascii_lowercase(),
        actual.map_or_else(|| "null".to_string(), |a| a.name().to_ascii_lowercase())
    ))
}

/// The checksum algorithm a part is hashed with: the upload's, or the part's own when the
/// upload has none. A part declaring another algorithm than the upload's is refused, and so is
/// one declaring none where the client's declaration is all there is (`checksum_declared`).
pub fn part_checksum_algorithm(
    upload: Option<ChecksumAlgorithm>,
    request: &PartRequest,
) -> StoreResult<Option<ChecksumAlgorithm>> {
    match (upload, request.checksum_algorithm) {
        (Some(upload), Some(part)) if upload != part => Err(mismatched_algorithm(upload, Some(part))),
        (Some(upload), None) if request.checksum_declared => Err(mismatched_algorithm(upload, None)),
        (upload, part) => Ok(upload.or(part)),
    }
}

/// Part sizes as (size, count) runs: uploads of equal parts with a shorter last one take two.
pub fn run_lengths(sizes: impl Iterator<Item = u64>) -> Vec<(u64, u32)> {
    let mut runs: Vec<(u64, u32)> = Vec::new();
    for size in sizes {
        match runs.last_mut() {
            Some((last, count)) if *last == size => *count += 1,
            _ => runs.push((size, 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_store::checksum::Hasher;

    fn part(n: u32, bytes: &[u8], algorithm: ChecksumAlgorithm) -> PartInfo {
        let mut hasher = Hasher::new(algorithm);
        hasher.update(bytes);
        PartInfo {
            part_number: n,
            etag: hex::encode(Md5::digest(bytes)),
            size: bytes.len() as u64,
            last_modified: std::time::SystemTime::UNIX_EPOCH,
            checksum: Some(hasher.checksum()),
        }
    }

    fn listed(info: &PartInfo, with_checksum: bool) -> CompletedPart {
        CompletedPart {
            part_number: info.part_number,
            etag: info.etag.clone(),
            checksum: with_checksum.then(|| info.checksum.clone().unwrap().value),
        }
    }

    #[test]
    fn a_complete_is_checked_against_the_uploads_checksum() {
        let stored = part(1, b"only part", ChecksumAlgorithm::Sha256);
        let find = |n: u32| (n == 1).then_some(&stored);
        let composite = (Some(ChecksumAlgorithm::Sha256), ChecksumType::Composite);
        let none = CompleteChecksum::default();
        let missing = choose_parts(&[listed(&stored, false)], find, composite, &none);
        assert!(matches!(missing, Err(StoreError::InvalidRequest(m)) if m.contains("missing for part 1")));
        let chosen = choose_parts(&[listed(&stored, true)], find, composite, &none).unwrap();
        let value = chosen.checksum.unwrap().value;
        let digest = value.strip_suffix("-1").unwrap().to_string();
        let declared =
            |kind, value: &str| CompleteChecksum { kind, value: Some((ChecksumAlgorithm::Sha256, value.to_string())) };
        for good in [value.as_str(), digest.as_str()] {
            assert!(choose_parts(&[listed(&stored, true)], find, composite, &declared(None, good)).is_ok());
        }
        let wrong = format!("{digest}-2");
        let bad = choose_parts(&[listed(&stored, true)], find, composite, &declared(None, &wrong));
        assert!(matches!(bad, Err(StoreError::BadDigest(_))));
        let mode =
            choose_parts(&[listed(&stored, true)], find, composite, &declared(Some(ChecksumType::FullObject), &value));
        assert!(matches!(mode, Err(StoreError::InvalidRequest(m)) if m.contains("COMPOSITE checksum mode")));
        // A full-object upload's parts need not be listed with their checksums; an upload
        // without an algorithm has no checksum to compare a declared one with.
        let crc = part(1, b"only part", ChecksumAlgorithm::Crc32);
        let find_crc = |n: u32| (n == 1).then_some(&crc);
        let full = (Some(ChecksumAlgorithm::Crc32), ChecksumType::FullObject);
        let whole = choose_parts(&[listed(&crc, false)], find_crc, full, &none).unwrap().checksum.unwrap();
        assert_eq!(whole.value, crc.checksum.clone().unwrap().value);
        let unchecked = CompleteChecksum { kind: None, value: Some((ChecksumAlgorithm::Crc32, "AAAAAA==".into())) };
        let plain = choose_parts(&[listed(&crc, true)], find_crc, (None, ChecksumType::FullObject), &unchecked);
        assert!(plain.unwrap().checksum.is_none());
    }

    #[test]
    fn a_part_declares_the_uploads_algorithm() {
        let request = |algorithm, declared| PartRequest {
            part_number: 1,
            checksum_algorithm: algorithm,
            checksum_declared: declared,
            ..PartRequest::default()
        };
        let crc32 = Some(ChecksumAlgorithm::Crc32);
        assert_eq!(part_checksum_algorithm(crc32, &request(crc32, true)).unwrap(), crc32);
        assert_eq!(part_checksum_algorithm(crc32, &request(None, false)).unwrap(), crc32);
        assert_eq!(part_checksum_algorithm(None, &request(crc32, true)).unwrap(), crc32);
        let none = part_checksum_algorithm(crc32, &request(None, true));
        assert!(matches!(none, Err(StoreError::InvalidRequest(m)) if m.ends_with("actual checksum Type: null")));
        let other = part_checksum_algorithm(crc32, &request(Some(ChecksumAlgorithm::Sha1), false));
        assert!(matches!(other, Err(StoreError::InvalidRequest(m)) if m.ends_with("actual checksum Type: sha1")));
    }
}
