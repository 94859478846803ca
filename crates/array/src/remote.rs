//! A Zarr store on any S3 endpoint (another Isthmus gateway, MinIO, AWS): the other side of a
//! transfer. Requests are signed with SigV4 (rusty-s3, presigned for a short time) and sent
//! with a blocking HTTP agent that keeps connections for the chunk pool's threads. Conditional
//! writes use `If-Match` / `If-None-Match`, which S3 and the gateway both honour.

use std::time::Duration;

use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, ListableStorageTraits, MaybeBytesIterator, OffsetBytesIterator, ReadableStorageTraits, StorageError,
    StoreKey, StoreKeys, StoreKeysPrefixes, StorePrefix, WritableStorageTraits,
};

use crate::backend::{ChunkStore, Walked, WriteCondition, patched};

/// How long a signature is valid: one request's time, generously.
const SIGN_FOR: Duration = Duration::from_secs(900);
/// The largest value read whole (a chunk, a shard, metadata).
const MAX_VALUE: u64 = 4 << 30;
/// Copied values larger than this go up as a multipart upload, in parts of `PART_SIZE`, each
/// verified by its own MD5 (a failed part is sent again, not the whole value).
pub const MULTIPART_THRESHOLD: usize = 64 << 20;
const PART_SIZE: usize = 16 << 20;
/// Attempts per part.
const PART_ATTEMPTS: usize = 3;

/// Where a remote array lives and how to sign for it.
#[derive(Debug, Clone)]
pub struct RemoteEndpoint {
    /// `http://host:port` (path-style addressing).
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
    /// A PEM file of the CA (or the self-signed certificate) to trust for an https endpoint,
    /// instead of the built-in Mozilla roots (`isthmus_grid::tls_bundle`).
    pub ca_bundle: Option<std::path::PathBuf>,
}

/// `bucket` on a remote S3 endpoint, under `prefix`, as a Zarr store.
pub struct S3Storage {
    bucket: Bucket,
    credentials: Credentials,
    agent: ureq::Agent,
    prefix: String,
    described: String,
}

type Response = ureq::http::Response<ureq::Body>;

fn http_error(what: &str, err: impl std::fmt::Display) -> StorageError {
    StorageError::Other(format!("{what}: {err}"))
}

/// A response that is not 2xx as an error carrying the S3 error text.
fn refused(what: &str, mut response: Response) -> StorageError {
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    StorageError::Other(format!("{what}: HTTP {status}: {}", body.chars().take(300).collect::<String>()))
}

fn read_body(response: Response) -> Result<Bytes, StorageError> {
    let bytes = response.into_body().with_config().limit(MAX_VALUE).read_to_vec().map_err(|e| http_error("read", e))?;
    Ok(Bytes::from(bytes))
}

impl S3Storage {
    pub fn new(remote: &RemoteEndpoint, prefix: &str) -> Result<Self, StorageError> {
        let url: url::Url =
            remote.endpoint.parse().map_err(|e| http_error(&format!("endpoint {:?}", remote.endpoint), e))?;
        let bucket = Bucket::new(url, UrlStyle::Path, remote.bucket.clone(), remote.region.clone())
            .map_err(|e| http_error("endpoint or bucket", e))?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections_per_host(32)
            .timeout_global(Some(Duration::from_secs(300)));
        let agent =
            isthmus_grid::tls_bundle::agent(config, remote.ca_bundle.as_deref()).map_err(StorageError::Other)?;
        let prefix = prefix.trim_matches('/');
        let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
        let described = format!("s3://{}/{}/{prefix}", remote.endpoint.trim_end_matches('/'), remote.bucket);
        Ok(Self {
            bucket,
            credentials: Credentials::new(remote.access_key.clone(), remote.secret_key.clone()),
            agent,
            prefix,
            described,
        })
    }

    fn object(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// A GET of `key`, with an optional `Range` header; `None` on 404.
    fn get_response(&self, key: &StoreKey, range: Option<String>) -> Result<Option<Response>, StorageError> {
        let url = self.bucket.get_object(Some(&self.credentials), &self.object(key.as_str())).sign(SIGN_FOR);
        let mut request = self.agent.get(url.as_str());
        if let Some(range) = range {
            request = request.header("Range", range);
        }
        let response = request.call().map_err(|e| http_error("GET", e))?;
        match response.status().as_u16() {
            200..300 => Ok(Some(response)),
            404 => Ok(None),
            _ => Err(refused("GET", response)),
        }
    }

    /// Every key (relative to this store) under `prefix`, with sizes, and the common prefixes
    /// when `delimiter` is set.
    fn walk(&self, prefix: &str, delimiter: bool) -> Result<Walked, StorageError> {
        let mut walked = Walked::default();
        let mut token: Option<String> = None;
        let strip = |key: &str| key.strip_prefix(&self.prefix).unwrap_or(key).to_string();
        loop {
            let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
            action.with_prefix(self.object(prefix));
            if delimiter {
                action.with_delimiter("/");
            }
            if let Some(token) = &token {
                action.with_continuation_token(token.clone());
            }
            let url = action.sign(SIGN_FOR);
            let response = self.agent.get(url.as_str()).call().map_err(|e| http_error("LIST", e))?;
            if !response.status().is_success() {
                return Err(refused("LIST", response));
            }
            let text = String::from_utf8_lossy(&read_body(response)?).into_owned();
            let page = rusty_s3::actions::ListObjectsV2::parse_response(&text).map_err(|e| http_error("LIST", e))?;
            walked.objects.extend(
                page.contents.iter().filter(|o| !o.key.ends_with('/')).map(|o| (strip(&o.key), o.size.unwrap_or(0))),
            );
            walked.prefixes.extend(page.common_prefixes.iter().map(|p| strip(&p.prefix)));
            match page.next_continuation_token {
                Some(next) => token = Some(next),
                None => return Ok(walked),
            }
        }
    }
}

impl ReadableStorageTraits for S3Storage {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let mut parts = Vec::new();
        for byte_range in byte_ranges {
            let (header, wanted) = match byte_range {
                ByteRange::FromStart(0, None) => (None, None),
                ByteRange::FromStart(first, None) => (Some(format!("bytes={first}-")), None),
                ByteRange::FromStart(_, Some(0)) | ByteRange::Suffix(0) => {
                    if self.size_key(key)?.is_none() {
                        return Ok(None);
                    }
                    parts.push(Ok(Bytes::new()));
                    continue;
                }
                ByteRange::FromStart(first, Some(length)) => {
                    (Some(format!("bytes={first}-{}", first + length - 1)), Some(length))
                }
                ByteRange::Suffix(length) => (Some(format!("bytes=-{length}")), Some(length)),
            };
            let Some(response) = self.get_response(key, header)? else {
                return Ok(None);
            };
            let bytes = read_body(response)?;
            if wanted.is_some_and(|length| length != bytes.len() as u64) {
                return Err(StorageError::Other(format!("{byte_range} is past the end of {key}")));
            }
            parts.push(Ok(bytes));
        }
        Ok(Some(Box::new(parts.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        let url = self.bucket.head_object(Some(&self.credentials), &self.object(key.as_str())).sign(SIGN_FOR);
        let response = self.agent.head(url.as_str()).call().map_err(|e| http_error("HEAD", e))?;
        match response.status().as_u16() {
            200..300 => {
                let length = response.headers().get("content-length").and_then(|v| v.to_str().ok());
                Ok(Some(length.and_then(|v| v.parse().ok()).unwrap_or(0)))
            }
            404 => Ok(None),
            _ => Err(refused("HEAD", response)),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl WritableStorageTraits for S3Storage {
    fn set(&self, key: &StoreKey, value: Bytes) -> Result<(), StorageError> {
        self.set_if(key, &value, WriteCondition::Always).map(drop)
    }

    /// Objects are replaced whole: read, patch, write back (zarrs never asks for this).
    fn set_partial_many(&self, key: &StoreKey, offset_values: OffsetBytesIterator) -> Result<(), StorageError> {
        self.set(key, patched(self.get(key)?, offset_values)?)
    }

    fn erase(&self, key: &StoreKey) -> Result<(), StorageError> {
        let url = self.bucket.delete_object(Some(&self.credentials), &self.object(key.as_str())).sign(SIGN_FOR);
        let response = self.agent.delete(url.as_str()).call().map_err(|e| http_error("DELETE", e))?;
        match response.status().as_u16() {
            200..300 | 404 => Ok(()),
            _ => Err(refused("DELETE", response)),
        }
    }

    fn erase_prefix(&self, prefix: &StorePrefix) -> Result<(), StorageError> {
        for (key, _) in self.walk(prefix.as_str(), false)?.objects {
            self.erase(&StoreKey::new(key)?)?;
        }
        Ok(())
    }

    fn supports_set_partial(&self) -> bool {
        false
    }
}

impl ListableStorageTraits for S3Storage {
    fn list(&self) -> Result<StoreKeys, StorageError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, StorageError> {
        self.walk(prefix.as_str(), false)?.keys()
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, StorageError> {
        self.walk(prefix.as_str(), true)?.directory()
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, StorageError> {
        Ok(self.walk(prefix.as_str(), false)?.size())
    }
}

/// A value's MD5 as the `Content-MD5` header has it.
fn content_md5(value: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, crate::backend::md5_bytes(value))
}

impl S3Storage {
    /// A large copied value as a multipart upload: the source tag set at creation, each part
    /// sent with its MD5 (the server refuses a part that arrives otherwise) and retried, the
    /// upload completed with the parts' ETags, or aborted if any part cannot be sent.
    fn put_in_parts(&self, object: &str, value: &[u8], source_tag: &str) -> Result<(), StorageError> {
        let url = self.bucket.create_multipart_upload(Some(&self.credentials), object).sign(SIGN_FOR);
        let mut response = self
            .agent
            .post(url.as_str())
            .header(format!("x-amz-meta-{}", crate::backend::SOURCE_TAG), source_tag)
            .send_empty()
            .map_err(|e| http_error("CreateMultipartUpload", e))?;
        if !response.status().is_success() {
            return Err(refused("CreateMultipartUpload", response));
        }
        let text = response.body_mut().read_to_string().map_err(|e| http_error("CreateMultipartUpload", e))?;
        let created = rusty_s3::actions::CreateMultipartUpload::parse_response(&text)
            .map_err(|e| http_error("CreateMultipartUpload answer", e))?;
        let upload_id = created.upload_id().to_string();
        let sent = self.send_parts(object, &upload_id, value);
        if sent.is_err() {
            let url = self.bucket.abort_multipart_upload(Some(&self.credentials), object, &upload_id).sign(SIGN_FOR);
            let _ = self.agent.delete(url.as_str()).call();
        }
        sent
    }

    fn send_parts(&self, object: &str, upload_id: &str, value: &[u8]) -> Result<(), StorageError> {
        let mut etags = Vec::new();
        for (index, part) in value.chunks(PART_SIZE).enumerate() {
            let number = u16::try_from(index + 1).map_err(|_| http_error("UploadPart", "more than 65535 parts"))?;
            let md5 = content_md5(part);
            let mut last_error = None;
            for _ in 0..PART_ATTEMPTS {
                let url = self.bucket.upload_part(Some(&self.credentials), object, number, upload_id).sign(SIGN_FOR);
                match self.agent.put(url.as_str()).header("Content-MD5", &md5).send(part) {
                    Ok(response) if response.status().is_success() => {
                        let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default();
                        etags.push(etag.trim_matches('"').to_string());
                        last_error = None;
                        break;
                    }
                    Ok(response) => last_error = Some(refused("UploadPart", response)),
                    Err(err) => last_error = Some(http_error("UploadPart", err)),
                }
            }
            if let Some(err) = last_error {
                return Err(err);
            }
        }
        let complete = self.bucket.complete_multipart_upload(
            Some(&self.credentials),
            object,
            upload_id,
            etags.iter().map(String::as_str),
        );
        let url = complete.sign(SIGN_FOR);
        let response = self
            .agent
            .post(url.as_str())
            .send(complete.body())
            .map_err(|e| http_error("CompleteMultipartUpload", e))?;
        if !response.status().is_success() {
            return Err(refused("CompleteMultipartUpload", response));
        }
        Ok(())
    }
}

impl ChunkStore for S3Storage {
    fn get_tagged(&self, key: &StoreKey) -> Result<Option<(Bytes, String)>, StorageError> {
        let Some(response) = self.get_response(key, None)? else {
            return Ok(None);
        };
        let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let etag = etag.trim_matches('"').to_string();
        Ok(Some((read_body(response)?, etag)))
    }

    fn set_if(&self, key: &StoreKey, value: &[u8], condition: WriteCondition) -> Result<bool, StorageError> {
        let url = self.bucket.put_object(Some(&self.credentials), &self.object(key.as_str())).sign(SIGN_FOR);
        let mut request = self.agent.put(url.as_str());
        match condition {
            WriteCondition::Always => {}
            WriteCondition::IfAbsent => request = request.header("If-None-Match", "*"),
            WriteCondition::IfTag(tag) => request = request.header("If-Match", format!("\"{tag}\"")),
        }
        let response = request.send(value).map_err(|e| http_error("PUT", e))?;
        match response.status().as_u16() {
            200..300 => Ok(true),
            // 412: the condition failed; 409: a concurrent conditional write won the race.
            412 | 409 => Ok(false),
            _ => Err(refused("PUT", response)),
        }
    }

    fn describe(&self) -> String {
        self.described.clone()
    }

    fn put_copy(&self, key: &StoreKey, value: &[u8], source_tag: &str) -> Result<(), StorageError> {
        let object = self.object(key.as_str());
        if value.len() > MULTIPART_THRESHOLD {
            return self.put_in_parts(&object, value, source_tag);
        }
        let url = self.bucket.put_object(Some(&self.credentials), &object).sign(SIGN_FOR);
        let response = self
            .agent
            .put(url.as_str())
            .header("Content-MD5", content_md5(value))
            .header(format!("x-amz-meta-{}", crate::backend::SOURCE_TAG), source_tag)
            .send(value)
            .map_err(|e| http_error("PUT", e))?;
        if !response.status().is_success() {
            return Err(refused("PUT", response));
        }
        Ok(())
    }

    fn copied_from(&self, key: &StoreKey) -> Result<Option<String>, StorageError> {
        let url = self.bucket.head_object(Some(&self.credentials), &self.object(key.as_str())).sign(SIGN_FOR);
        let response = self.agent.head(url.as_str()).call().map_err(|e| http_error("HEAD", e))?;
        match response.status().as_u16() {
            200..300 => {
                let name = format!("x-amz-meta-{}", crate::backend::SOURCE_TAG);
                Ok(response.headers().get(name.as_str()).and_then(|v| v.to_str().ok()).map(str::to_string))
            }
            404 => Ok(None),
            _ => Err(refused("HEAD", response)),
        }
    }
}
