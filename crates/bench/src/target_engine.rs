//! The engine targets: the Isthmus engine called in-process (`embedded:///path`) or through a
//! gateway's local socket (`unix:///path`), both through the `Store` interface.

use std::io::Read;
use std::time::SystemTime;

use crate::target::{BenchResult, Connection, READ_BUF, Target};
use isthmus_store::StoreExt;

/// The Isthmus engine called directly, without HTTP: what the embedded door costs.
pub struct EmbeddedTarget {
    pub store: std::sync::Arc<dyn isthmus_store::Store>,
    /// The data root (the run's bucket is made in its default pool and removed from there).
    pub root: std::path::PathBuf,
    pub bucket: String,
}

/// A connection to an engine called through the `Store` interface: in-process, or through a
/// gateway's local socket.
struct EngineConnection {
    store: std::sync::Arc<dyn isthmus_store::Store>,
    /// The benchmark acts as the process itself, as an embedding program does.
    cx: isthmus_store::RequestContext,
    /// The bucket operations address: the run's own (`home`) unless `use_bucket` said another.
    bucket: String,
    home: String,
    buf: Vec<u8>,
}

impl EngineConnection {
    /// A connection of the process itself to `store`, on `bucket`.
    fn new(store: std::sync::Arc<dyn isthmus_store::Store>, bucket: &str) -> Self {
        Self {
            store,
            cx: isthmus_store::RequestContext::process(),
            bucket: bucket.to_string(),
            home: bucket.to_string(),
            buf: Vec::new(),
        }
    }

    /// Creates the run's bucket unless it exists.
    fn create_bucket(store: &dyn isthmus_store::Store, bucket: &str) -> BenchResult<()> {
        use isthmus_store::StoreError;
        match store.create_bucket(&isthmus_store::RequestContext::process(), bucket, &Default::default()) {
            Ok(()) | Err(StoreError::BucketAlreadyExists | StoreError::BucketAlreadyOwnedByYou) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Connection for EngineConnection {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()> {
        self.store.put_bytes(&self.cx, &self.bucket, key, data, isthmus_store::PutRequest::default())?;
        Ok(())
    }

    fn get(&mut self, key: &str) -> BenchResult<u64> {
        let mut body = self.store.get_object(&self.cx, &self.bucket, key, &isthmus_store::GetRequest::default())?.body;
        self.buf.resize(READ_BUF, 0);
        let mut total = 0u64;
        loop {
            let n = body.read(&mut self.buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    }

    fn head(&mut self, key: &str) -> BenchResult<()> {
        self.store.head_object(&self.cx, &self.bucket, key, &Default::default())?;
        Ok(())
    }

    fn delete(&mut self, key: &str) -> BenchResult<()> {
        self.store.delete_object(&self.cx, &self.bucket, key, &Default::default())?;
        Ok(())
    }

    fn use_bucket(&mut self, name: Option<&str>) -> BenchResult<()> {
        let name = name.unwrap_or(&self.home);
        if self.bucket != name {
            self.bucket = name.to_string();
        }
        Ok(())
    }

    fn create_bucket(&mut self, name: &str) -> BenchResult<()> {
        Self::create_bucket(&*self.store, name)
    }

    fn head_bucket(&mut self, name: &str) -> BenchResult<()> {
        Ok(self.store.head_bucket(&self.cx, name)?)
    }

    fn delete_bucket(&mut self, name: &str) -> BenchResult<()> {
        Ok(self.store.delete_bucket(&self.cx, name)?)
    }

    fn remove_bucket(&mut self, name: &str) -> BenchResult<()> {
        remove_bucket(&*self.store, name)
    }

    fn copy(&mut self, from: &str, to: &str) -> BenchResult<()> {
        let request = isthmus_store::CopyRequest::default();
        self.store.copy_object(&self.cx, (&self.bucket, from), (&self.bucket, to), &request)?;
        Ok(())
    }

    fn list_page(&mut self, prefix: &str, after: Option<&str>, max: usize) -> BenchResult<(usize, Option<String>)> {
        let request = isthmus_store::ListRequest {
            prefix: prefix.to_string(),
            delimiter: None,
            start_after: after.map(str::to_string),
            max_keys: max,
        };
        let page = self.store.list_objects(&self.cx, &self.bucket, &request)?;
        Ok((page.objects.len() + page.common_prefixes.len(), page.next_marker))
    }

    fn walk(&mut self, prefix: &str, seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        let mut request = isthmus_store::ListRequest {
            prefix: crate::target::directory_prefix(prefix),
            delimiter: None,
            start_after: None,
            max_keys: 1000,
        };
        loop {
            let page = self.store.list_objects(&self.cx, &self.bucket, &request)?;
            for object in &page.objects {
                if let Some(name) = object.key.rsplit('/').next().filter(|n| !n.is_empty()) {
                    seen(name, object.size, object.last_modified);
                }
            }
            match page.next_marker.filter(|_| page.is_truncated) {
                Some(next) => request.start_after = Some(next),
                None => return Ok(()),
            }
        }
    }
}

impl Target for EmbeddedTarget {
    fn kind(&self) -> &'static str {
        "embedded"
    }
    fn describe(&self) -> String {
        format!("embedded://{} bucket {}", self.root.display(), self.bucket)
    }
    fn prepare(&self) -> BenchResult<()> {
        EngineConnection::create_bucket(&*self.store, &self.bucket)
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(EngineConnection::new(self.store.clone(), &self.bucket)))
    }
    fn cleanup(&self) -> BenchResult<()> {
        match std::fs::remove_dir_all(self.root.join(&self.bucket)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// An engine reached through a gateway's local socket (`unix:///path`): the local door's cost.
pub struct LocalSocketTarget {
    pub store: std::sync::Arc<dyn isthmus_store::Store>,
    pub address: String,
    pub bucket: String,
}

impl Target for LocalSocketTarget {
    fn kind(&self) -> &'static str {
        "local"
    }
    fn describe(&self) -> String {
        format!("{} bucket {}", self.address, self.bucket)
    }
    fn prepare(&self) -> BenchResult<()> {
        EngineConnection::create_bucket(&*self.store, &self.bucket)
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(EngineConnection::new(self.store.clone(), &self.bucket)))
    }
    /// Deletes every object through the socket, then the bucket.
    fn cleanup(&self) -> BenchResult<()> {
        remove_bucket(&*self.store, &self.bucket)
    }
}

/// Deletes every object of `bucket` through the engine, then the bucket; a missing bucket is
/// fine.
fn remove_bucket(store: &dyn isthmus_store::Store, bucket: &str) -> BenchResult<()> {
    let cx = isthmus_store::RequestContext::process();
    loop {
        let request = isthmus_store::ListRequest { max_keys: 1000, ..Default::default() };
        let page = match store.list_objects(&cx, bucket, &request) {
            Err(isthmus_store::StoreError::NoSuchBucket) => return Ok(()),
            other => other?,
        };
        for object in &page.objects {
            store.delete_object(&cx, bucket, &object.key, &Default::default())?;
        }
        if !page.is_truncated {
            break;
        }
    }
    match store.delete_bucket(&cx, bucket) {
        Err(isthmus_store::StoreError::NoSuchBucket) => Ok(()),
        other => Ok(other?),
    }
}
