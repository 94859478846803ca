//! The S3 target: any S3 endpoint over HTTP, requests signed with SigV4 (presigned URLs), one
//! keep-alive connection per worker.

use std::io::Read;
use std::time::{Duration, SystemTime};

use crate::target::{BenchError, BenchResult, Connection, READ_BUF, Target, directory_prefix};

/// Any S3 endpoint, with SigV4 (presigned URLs) and one keep-alive connection per worker.
pub struct S3Target {
    bucket: rusty_s3::Bucket,
    credentials: rusty_s3::Credentials,
    endpoint: String,
    /// What other buckets are addressed with (the S3 mappings use several).
    address: Address,
}

/// The endpoint, URL style and region, to address any bucket there.
#[derive(Clone)]
struct Address {
    url: url::Url,
    style: rusty_s3::UrlStyle,
    region: String,
}

impl Address {
    fn bucket(&self, name: &str) -> BenchResult<rusty_s3::Bucket> {
        rusty_s3::Bucket::new(self.url.clone(), self.style, name.to_string(), self.region.clone())
            .map_err(|e| BenchError::Setup(format!("invalid bucket {name:?}: {e}")))
    }
}

const SIGN_FOR: Duration = Duration::from_secs(3600);

impl S3Target {
    /// A path-style target in us-east-1, the form every S3 server accepts (the gateway too).
    pub fn new(endpoint: &str, bucket: &str, access_key: &str, secret_key: &str) -> BenchResult<Self> {
        Self::addressed(endpoint, bucket, access_key, secret_key, false, "us-east-1")
    }

    /// A target addressed as the endpoint wants: `virtual_host` puts the bucket in the host name
    /// (bucket.host:port, as AWS prefers), and `region` is the one requests are signed for.
    pub fn addressed(
        endpoint: &str,
        bucket: &str,
        access_key: &str,
        secret_key: &str,
        virtual_host: bool,
        region: &str,
    ) -> BenchResult<Self> {
        let url: url::Url =
            endpoint.parse().map_err(|e| BenchError::Setup(format!("invalid endpoint {endpoint:?}: {e}")))?;
        let style = if virtual_host { rusty_s3::UrlStyle::VirtualHost } else { rusty_s3::UrlStyle::Path };
        let address = Address { url, style, region: region.to_string() };
        Ok(Self {
            bucket: address.bucket(bucket)?,
            credentials: rusty_s3::Credentials::new(access_key, secret_key),
            endpoint: endpoint.to_string(),
            address,
        })
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder().http_status_as_error(false).max_idle_connections_per_host(4).build().into()
    }
}

struct S3Connection {
    /// The bucket operations address: the run's own (`home`) unless `use_bucket` said another.
    bucket: rusty_s3::Bucket,
    home: rusty_s3::Bucket,
    address: Address,
    credentials: rusty_s3::Credentials,
    agent: ureq::Agent,
    buf: Vec<u8>,
}

fn http_err(e: ureq::Error) -> BenchError {
    BenchError::Http(e.to_string())
}

fn check(mut resp: ureq::http::Response<ureq::Body>, what: &str) -> BenchResult<ureq::http::Response<ureq::Body>> {
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(resp);
    }
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    Err(BenchError::Http(format!("{what}: HTTP {status}: {}", body.chars().take(300).collect::<String>())))
}

impl S3Connection {
    fn drain(&mut self, resp: ureq::http::Response<ureq::Body>) -> BenchResult<u64> {
        let mut reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
        self.buf.resize(READ_BUF, 0);
        let mut total = 0u64;
        loop {
            let n = reader.read(&mut self.buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    }
}

impl Connection for S3Connection {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.put_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.put(url.as_str()).send(data).map_err(http_err)?;
        let resp = check(resp, "PUT")?;
        self.drain(resp).map(drop)
    }

    fn get(&mut self, key: &str) -> BenchResult<u64> {
        use rusty_s3::S3Action;
        let url = self.bucket.get_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.get(url.as_str()).call().map_err(http_err)?;
        let resp = check(resp, "GET")?;
        self.drain(resp)
    }

    fn head(&mut self, key: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.head_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.head(url.as_str()).call().map_err(http_err)?;
        check(resp, "HEAD").map(drop)
    }

    fn delete(&mut self, key: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.delete_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.delete(url.as_str()).call().map_err(http_err)?;
        let resp = check(resp, "DELETE")?;
        self.drain(resp).map(drop)
    }

    fn copy(&mut self, from: &str, to: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        // CopyObject is a PUT naming its source in x-amz-copy-source, which is signed too.
        let source = format!("/{}/{}", self.bucket.name(), encode_key(from));
        let mut action = self.bucket.put_object(Some(&self.credentials), to);
        action.headers_mut().insert("x-amz-copy-source", source.clone());
        let url = action.sign(SIGN_FOR);
        let resp = self.agent.put(url.as_str()).header("x-amz-copy-source", &source).send_empty().map_err(http_err)?;
        let resp = check(resp, "COPY")?;
        self.drain(resp).map(drop)
    }

    fn use_bucket(&mut self, name: Option<&str>) -> BenchResult<()> {
        let name = name.unwrap_or(self.home.name());
        if self.bucket.name() != name {
            self.bucket = if name == self.home.name() { self.home.clone() } else { self.address.bucket(name)? };
        }
        Ok(())
    }

    fn create_bucket(&mut self, name: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.address.bucket(name)?.create_bucket(&self.credentials).sign(SIGN_FOR);
        let resp = self.agent.put(url.as_str()).send_empty().map_err(http_err)?;
        // An existing bucket of ours is fine.
        if resp.status().as_u16() == 409 {
            return Ok(());
        }
        let resp = check(resp, "CreateBucket")?;
        self.drain(resp).map(drop)
    }

    fn head_bucket(&mut self, name: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.address.bucket(name)?.head_bucket(Some(&self.credentials)).sign(SIGN_FOR);
        let resp = self.agent.head(url.as_str()).call().map_err(http_err)?;
        check(resp, "HeadBucket").map(drop)
    }

    fn delete_bucket(&mut self, name: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.address.bucket(name)?.delete_bucket(&self.credentials).sign(SIGN_FOR);
        let resp = self.agent.delete(url.as_str()).call().map_err(http_err)?;
        let resp = check(resp, "DeleteBucket")?;
        self.drain(resp).map(drop)
    }

    fn remove_bucket(&mut self, name: &str) -> BenchResult<()> {
        let previous = self.bucket.name().to_string();
        self.use_bucket(Some(name))?;
        let emptied = (|| {
            while let Some(page) = self.list_v2("", None, 1000)? {
                if page.contents.is_empty() {
                    break;
                }
                for object in page.contents {
                    self.delete(&object.key)?;
                }
            }
            BenchResult::Ok(())
        })();
        self.use_bucket(Some(&previous))?;
        emptied?;
        match self.delete_bucket(name) {
            Err(BenchError::Http(e)) if e.contains("HTTP 404") => Ok(()),
            other => other,
        }
    }

    fn list_page(&mut self, prefix: &str, after: Option<&str>, max: usize) -> BenchResult<(usize, Option<String>)> {
        let page = self.list_v2(prefix, after, max)?.ok_or_else(|| BenchError::Http("LIST: no such bucket".into()))?;
        Ok((page.contents.len(), page.next_continuation_token))
    }

    fn walk(&mut self, prefix: &str, seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        let prefix = directory_prefix(prefix);
        let mut token: Option<String> = None;
        loop {
            let page = self
                .list_v2(&prefix, token.as_deref(), 1000)?
                .ok_or_else(|| BenchError::Http("LIST: no such bucket".into()))?;
            for object in &page.contents {
                let modified = object
                    .last_modified
                    .as_deref()
                    .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                // A folder object (`name/`) is a directory, not a file.
                if let Some(name) = object.key.rsplit('/').next().filter(|n| !n.is_empty()) {
                    seen(name, object.size.unwrap_or(0), modified);
                }
            }
            match page.next_continuation_token {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }
}

/// `key` percent-encoded for x-amz-copy-source, slashes kept.
fn encode_key(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl S3Connection {
    /// One ListObjectsV2 page; `None` when the bucket does not exist.
    fn list_v2(
        &mut self,
        prefix: &str,
        token: Option<&str>,
        max: usize,
    ) -> BenchResult<Option<rusty_s3::actions::ListObjectsV2Response>> {
        use rusty_s3::S3Action;
        let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
        action.with_prefix(prefix);
        action.with_max_keys(max);
        if let Some(token) = token {
            action.with_continuation_token(token);
        }
        let url = action.sign(SIGN_FOR);
        let resp = self.agent.get(url.as_str()).call().map_err(http_err)?;
        if resp.status().as_u16() == 404 {
            return Ok(None);
        }
        let mut resp = check(resp, "LIST")?;
        let text = resp.body_mut().with_config().limit(64 << 20).read_to_string().map_err(http_err)?;
        rusty_s3::actions::ListObjectsV2::parse_response(&text)
            .map(Some)
            .map_err(|e| BenchError::Http(format!("LIST response: {e}")))
    }
}

impl Target for S3Target {
    fn kind(&self) -> &'static str {
        "s3"
    }
    fn describe(&self) -> String {
        format!("{} bucket {}", self.endpoint, self.bucket.name())
    }
    fn prepare(&self) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.create_bucket(&self.credentials).sign(SIGN_FOR);
        let resp = Self::agent().put(url.as_str()).send_empty().map_err(http_err)?;
        // An existing bucket of ours is fine.
        if resp.status().as_u16() == 409 {
            return Ok(());
        }
        check(resp, "CreateBucket").map(drop)
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(self.connection()))
    }
    fn cleanup(&self) -> BenchResult<()> {
        self.connection().remove_bucket(self.bucket.name())
    }
}

impl S3Target {
    fn connection(&self) -> S3Connection {
        S3Connection {
            bucket: self.bucket.clone(),
            home: self.bucket.clone(),
            address: self.address.clone(),
            credentials: self.credentials.clone(),
            agent: Self::agent(),
            buf: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_targets_address_buckets_by_path_or_host() {
        let path = S3Target::new("http://127.0.0.1:9000", "b", "k", "s").unwrap();
        assert_eq!(path.bucket.object_url("x/y").as_str(), "http://127.0.0.1:9000/b/x/y");
        let host = S3Target::addressed("https://s3.example.org", "b", "k", "s", true, "eu-west-1").unwrap();
        assert_eq!(host.bucket.object_url("x/y").as_str(), "https://b.s3.example.org/x/y");
        assert_eq!(host.bucket.region(), "eu-west-1");
    }
}
