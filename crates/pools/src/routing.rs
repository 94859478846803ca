//! The `Store`, `MultipartStore` and `ObjectFiles` implementations of `Pools`: each call goes to
//! the pool holding its bucket; while a bucket migrates, writes go to the target pool, reads
//! look there first and then in the source, deletes remove both copies, and listings merge both
//! pools' pages.

use std::time::Instant;

use super::migration::copy_across;
use super::{Pools, Route};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::{
    BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome, DeleteRequest,
    GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest, ListVersionsRequest, MultipartStore,
    ObjectChange, ObjectFiles, ObjectInfo, PartRequest, PutRequest, RequestContext, Store, UpdateFile, VersionsPage,
};

fn no_such_key(err: &StoreError) -> bool {
    matches!(err, StoreError::NoSuchKey)
}

fn no_such_upload(err: &StoreError) -> bool {
    matches!(err, StoreError::NoSuchUpload)
}

impl Pools {
    /// A request about one object (or upload): during a migration, the target first, then the
    /// source when the target has no such thing (`missing`).
    fn on_object<T>(
        &self,
        cx: &RequestContext,
        bucket: &str,
        missing: fn(&StoreError) -> bool,
        call: impl Fn(&dyn Store) -> StoreResult<T>,
    ) -> StoreResult<T> {
        match self.route(cx, bucket)? {
            Route::One(index) => call(&*self.pools[index].store),
            Route::Moving { from, to } => match call(&*self.pools[to].store) {
                Err(err) if missing(&err) => match call(&*self.pools[from].store) {
                    Err(StoreError::NoSuchBucket) => Err(err),
                    other => other,
                },
                other => other,
            },
        }
    }

    /// The pool that holds `key` of `bucket` now (the source of a migration until the key is
    /// moved).
    fn holder_of_key(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<usize> {
        match self.route(cx, bucket)? {
            Route::One(index) => Ok(index),
            Route::Moving { from, to } => {
                match self.pools[to].store.head_object(cx, bucket, key, &HeadRequest::default()) {
                    Err(StoreError::NoSuchKey) => Ok(from),
                    _ => Ok(to),
                }
            }
        }
    }

    /// A change of an object's ACL or tags during a migration: the object is moved first (the
    /// change would otherwise race with the migrator's copy), then changed in the target.
    fn on_object_change(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        call: impl Fn(&dyn Store) -> StoreResult<()>,
    ) -> StoreResult<()> {
        match self.route(cx, bucket)? {
            Route::One(index) => call(&*self.pools[index].store),
            Route::Moving { from, to } => {
                let (source, target) = (&*self.pools[from].store, &*self.pools[to].store);
                if self.holder_of_key(cx, bucket, key)? == from {
                    // Copying a whole object is long work: never on an async worker.
                    if !cx.may_block {
                        return Err(StoreError::WouldBlock);
                    }
                    match copy_across(cx, source, target, bucket, key, None) {
                        // Moved by the migrator or written by a client meanwhile.
                        Ok(_) | Err(StoreError::PreconditionFailed) => {}
                        Err(err) => return Err(err),
                    }
                }
                call(target)
            }
        }
    }
}

impl Store for Pools {
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        let mut all: Vec<BucketInfo> = Vec::new();
        for pool in &self.pools {
            for bucket in pool.store.list_buckets(cx)? {
                if !all.iter().any(|b| b.name == bucket.name) {
                    all.push(bucket);
                }
            }
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        let target = self.placement(request.location.as_deref())?;
        // A name is unique across pools: one that exists anywhere answers as the backend would.
        if let Ok(index) = self.find(cx, bucket) {
            return self.pools[index].store.create_bucket(cx, bucket, request);
        }
        self.pools[target].store.create_bucket(cx, bucket, request)?;
        self.placed.insert(bucket.to_string(), (target, Instant::now()));
        Ok(())
    }

    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.pool(cx, bucket)?.head_bucket(cx, bucket)
    }

    /// The facts of the pool the bucket's requests go to, which names itself as the bucket's
    /// location.
    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        let pool = &self.pools[self.find(cx, bucket)?];
        let facts = pool.store.bucket_facts(cx, bucket)?;
        Ok(BucketFacts { pool: Some(pool.name.clone()), ..facts })
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        if matches!(self.route(cx, bucket)?, Route::Moving { .. }) {
            return Err(StoreError::InvalidRequest(format!(
                "bucket {bucket:?} is being moved to another pool: delete it when the move is done"
            )));
        }
        let deleted = self.pool(cx, bucket)?.delete_bucket(cx, bucket);
        if deleted.is_ok() {
            self.placed.remove(bucket);
        }
        deleted
    }

    fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        self.pool(cx, bucket)?.bucket_config(cx, bucket)
    }

    /// During a migration the settings are written to both pools: to the one reads come from
    /// first, which decides whether the write replaces the version it read, then to the other
    /// as they are. Versioning does not change while a bucket moves.
    fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        let (from, to) = match self.route(cx, bucket)? {
            Route::One(index) => return self.pools[index].store.set_bucket_config(cx, bucket, config),
            Route::Moving { from, to } => (from, to),
        };
        let read_from = self.find(cx, bucket)?;
        let current = self.pools[read_from].store.bucket_config(cx, bucket)?;
        if current.versioning != config.versioning {
            return Err(StoreError::InvalidRequest(format!(
                "bucket {bucket:?} is being moved to another pool: change its versioning when the move is done"
            )));
        }
        self.pools[read_from].store.set_bucket_config(cx, bucket, config)?;
        let other = if read_from == to { from } else { to };
        let as_written = BucketConfig { version: None, ..config.clone() };
        match self.pools[other].store.set_bucket_config(cx, bucket, &as_written) {
            Ok(()) | Err(StoreError::NoSuchBucket) => Ok(()),
            Err(err) => Err(err),
        }
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        self.pool(cx, bucket)?.put_object(cx, bucket, key, request)
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        self.on_object(cx, bucket, no_such_key, |store| store.get_object(cx, bucket, key, request))
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        self.on_object(cx, bucket, no_such_key, |store| store.head_object(cx, bucket, key, request))
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        match self.route(cx, bucket)? {
            Route::One(index) => self.pools[index].store.delete_object(cx, bucket, key, request),
            // The source copy first: a migrator copying the key meanwhile then finds it gone
            // and takes its copy back, so a deleted object never comes back.
            Route::Moving { from, to } => {
                match self.pools[from].store.delete_object(cx, bucket, key, request) {
                    Ok(_) | Err(StoreError::NoSuchKey | StoreError::NoSuchBucket) => {}
                    Err(err) => return Err(err),
                }
                self.pools[to].store.delete_object(cx, bucket, key, request)
            }
        }
    }

    /// Within a pool, the pool copies (a reflink where it can); between pools the bytes
    /// stream from one to the other, the source's metadata and tags kept unless replaced.
    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        let from = self.holder_of_key(cx, source.0, source.1)?;
        let to = self.find(cx, destination.0)?;
        if from == to {
            return self.pools[from].store.copy_object(cx, source, destination, request);
        }
        isthmus_store::copy_between(&*self.pools[from].store, &*self.pools[to].store, cx, source, destination, request)
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        let Route::Moving { from, to } = self.route(cx, bucket)? else {
            return self.pool(cx, bucket)?.list_objects(cx, bucket, request);
        };
        let target = self.pools[to].store.list_objects(cx, bucket, request)?;
        let source = match self.pools[from].store.list_objects(cx, bucket, request) {
            Err(StoreError::NoSuchBucket) => return Ok(target),
            page => page?,
        };
        Ok(merge_list_pages(target, source, request.max_keys))
    }

    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        let Route::Moving { from, to } = self.route(cx, bucket)? else {
            return self.pool(cx, bucket)?.list_object_versions(cx, bucket, request);
        };
        let target = self.pools[to].store.list_object_versions(cx, bucket, request)?;
        let source = match self.pools[from].store.list_object_versions(cx, bucket, request) {
            Err(StoreError::NoSuchBucket) => return Ok(target),
            page => page?,
        };
        Ok(merge_version_pages(target, source, request.max_keys))
    }

    fn update_object(&self, cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()> {
        self.on_object_change(cx, bucket, key, |store| store.update_object(cx, bucket, key, change.clone()))
    }

    /// Files where some pool has them; a bucket in a pool without them answers as that pool.
    fn files(&self) -> Option<&dyn ObjectFiles> {
        self.pools.iter().any(|pool| pool.store.files().is_some()).then_some(self as &dyn ObjectFiles)
    }
}

impl MultipartStore for Pools {
    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.pool(cx, bucket)?.create_multipart_upload(cx, bucket, key, request)
    }

    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        self.on_object(cx, bucket, no_such_upload, |store| store.upload_part(cx, bucket, key, upload_id, request))
    }

    fn complete_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        self.on_object(cx, bucket, no_such_upload, |store| {
            store.complete_multipart_upload(cx, bucket, key, upload_id, parts, request.clone())
        })
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        self.on_object(cx, bucket, no_such_upload, |store| store.abort_multipart_upload(cx, bucket, key, upload_id))
    }

    fn list_parts(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        self.on_object(cx, bucket, no_such_upload, |store| store.list_parts(cx, bucket, key, upload_id, request))
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        let Route::Moving { from, to } = self.route(cx, bucket)? else {
            return self.pool(cx, bucket)?.list_multipart_uploads(cx, bucket, request);
        };
        let mut page = self.pools[to].store.list_multipart_uploads(cx, bucket, request)?;
        // Uploads begun in the source before the migration are few and finishing: listed after
        // the target's, in one page.
        if let Ok(source) = self.pools[from].store.list_multipart_uploads(cx, bucket, request) {
            page.uploads.extend(source.uploads);
            page.uploads.sort_by(|a, b| (&a.key, a.initiated).cmp(&(&b.key, b.initiated)));
            page.is_truncated |= source.is_truncated;
        }
        Ok(page)
    }
}

/// Each call goes to the bucket's pool, as the object calls do; a pool without files answers
/// as a store without them (no file, no record, nothing kept).
impl ObjectFiles for Pools {
    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        self.on_object(cx, bucket, no_such_key, |store| {
            store.files().map_or(Ok(None), |files| files.object_file(cx, bucket, key))
        })
    }

    /// In place only where the bucket lives in one pool: during a migration an object's bytes
    /// are copied to the target, and a write into the source's file could be left behind.
    fn object_file_for_update(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>> {
        match self.route(cx, bucket)? {
            Route::One(index) => {
                let files = self.pools[index].store.files();
                files.map_or(Ok(None), |files| files.object_file_for_update(cx, bucket, key))
            }
            Route::Moving { .. } => Ok(None),
        }
    }

    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        self.on_object(cx, bucket, no_such_key, |store| {
            store.files().map_or(Ok(None), |files| files.read_derived(cx, bucket, key, kind))
        })
    }

    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        self.on_object(cx, bucket, no_such_key, |store| {
            store.files().map_or(Ok(()), |files| files.write_derived(cx, bucket, key, kind, bytes))
        })
    }
}

/// One listing entry of a merged page: an object or a common prefix.
enum Entry<T> {
    Item(T),
    Prefix(String),
}

/// Merges two pages of the same listing request (target and source of a migration) into one
/// page of at most `max` entries in key order, the target's entry kept where both have a key.
/// A truncated page lists everything up to its marker and nothing after it, so the merged page
/// stops at the smaller marker of the truncated ones.
fn merge_entries<T>(
    target: Vec<Entry<T>>,
    target_next: Option<String>,
    source: Vec<Entry<T>>,
    source_next: Option<String>,
    key: impl Fn(&T) -> &str,
    max: usize,
) -> (Vec<Entry<T>>, Option<String>) {
    let name = |entry: &Entry<T>| -> String {
        match entry {
            Entry::Item(item) => key(item).to_string(),
            Entry::Prefix(prefix) => prefix.clone(),
        }
    };
    let cutoff = [target_next, source_next].into_iter().flatten().min();
    let mut target = target.into_iter().peekable();
    let mut source = source.into_iter().peekable();
    let mut kept: Vec<Entry<T>> = Vec::new();
    let mut more = cutoff.is_some();
    loop {
        let next = match (target.peek().map(&name), source.peek().map(&name)) {
            (None, None) => break,
            (Some(_), None) => target.next(),
            (None, Some(_)) => source.next(),
            (Some(t), Some(s)) => {
                if s == t {
                    source.next();
                }
                if s < t { source.next() } else { target.next() }
            }
        };
        let entry = next.expect("peeked");
        if cutoff.as_deref().is_some_and(|c| name(&entry).as_str() > c) {
            break;
        }
        if kept.len() == max {
            more = true;
            break;
        }
        kept.push(entry);
    }
    let next = if more { kept.last().map(&name).or(cutoff) } else { None };
    (kept, next)
}

fn merge_list_pages(target: ListPage, source: ListPage, max: usize) -> ListPage {
    let entries = |page: ListPage| -> (Vec<Entry<ObjectInfo>>, Option<String>) {
        let mut entries: Vec<Entry<ObjectInfo>> = page.objects.into_iter().map(Entry::Item).collect();
        entries.extend(page.common_prefixes.into_iter().map(Entry::Prefix));
        entries.sort_by(|a, b| entry_key(a).cmp(entry_key(b)));
        (entries, page.next_marker.filter(|_| page.is_truncated))
    };
    fn entry_key(entry: &Entry<ObjectInfo>) -> &str {
        match entry {
            Entry::Item(object) => &object.key,
            Entry::Prefix(prefix) => prefix,
        }
    }
    let (t, t_next) = entries(target);
    let (s, s_next) = entries(source);
    let (kept, next) = merge_entries(t, t_next, s, s_next, |o: &ObjectInfo| o.key.as_str(), max);
    let mut page = ListPage { is_truncated: next.is_some(), next_marker: next, ..ListPage::default() };
    for entry in kept {
        match entry {
            Entry::Item(object) => page.objects.push(object),
            Entry::Prefix(prefix) => page.common_prefixes.push(prefix),
        }
    }
    page
}

/// Versions of a migrating bucket: it has no versioning (a versioned bucket is not migrated),
/// so one (null) version per key, merged as objects are.
fn merge_version_pages(target: VersionsPage, source: VersionsPage, max: usize) -> VersionsPage {
    let entries = |page: VersionsPage| {
        let mut entries: Vec<Entry<isthmus_store::ObjectVersion>> =
            page.versions.into_iter().map(Entry::Item).collect();
        entries.extend(page.common_prefixes.into_iter().map(Entry::Prefix));
        entries.sort_by_cached_key(|e| match e {
            Entry::Item(v) => v.info.key.clone(),
            Entry::Prefix(p) => p.clone(),
        });
        (entries, page.next_key_marker.filter(|_| page.is_truncated))
    };
    let (t, t_next) = entries(target);
    let (s, s_next) = entries(source);
    let (kept, next) = merge_entries(t, t_next, s, s_next, |v: &isthmus_store::ObjectVersion| v.info.key.as_str(), max);
    let mut page = VersionsPage { is_truncated: next.is_some(), next_key_marker: next, ..VersionsPage::default() };
    for entry in kept {
        match entry {
            Entry::Item(version) => page.versions.push(version),
            Entry::Prefix(prefix) => page.common_prefixes.push(prefix),
        }
    }
    page.next_version_id_marker =
        page.versions.last().filter(|_| page.is_truncated).and_then(|v| v.info.version_id.clone());
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str, etag: &str) -> ObjectInfo {
        ObjectInfo {
            key: key.into(),
            size: 1,
            last_modified: std::time::SystemTime::UNIX_EPOCH,
            etag: etag.into(),
            meta: Default::default(),
            checksum: None,
            parts: Vec::new(),
            version_id: None,
        }
    }

    fn page(keys: &[&str], prefixes: &[&str], etag: &str, truncated: bool) -> ListPage {
        let mut names: Vec<&str> = keys.iter().chain(prefixes).copied().collect();
        names.sort();
        ListPage {
            objects: keys.iter().map(|k| object(k, etag)).collect(),
            common_prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
            is_truncated: truncated,
            next_marker: truncated.then(|| names.last().unwrap().to_string()),
        }
    }

    #[test]
    fn merged_pages_are_ordered_deduplicated_and_stop_at_the_first_truncation() {
        // Both complete: all entries, the target's copy of a key both hold.
        let merged = merge_list_pages(page(&["b", "d"], &["x/"], "t", false), page(&["a", "d"], &[], "s", false), 10);
        let keys: Vec<(&str, &str)> = merged.objects.iter().map(|o| (o.key.as_str(), o.etag.as_str())).collect();
        assert_eq!(keys, [("a", "s"), ("b", "t"), ("d", "t")]);
        assert_eq!(merged.common_prefixes, ["x/"]);
        assert!(!merged.is_truncated && merged.next_marker.is_none());
        // max_keys reached: truncated at the last entry kept.
        let merged = merge_list_pages(page(&["b", "d"], &[], "t", false), page(&["a", "c"], &[], "s", false), 3);
        assert_eq!(merged.objects.len(), 3);
        assert_eq!(merged.next_marker.as_deref(), Some("c"));
        // The source page stopped at "c": nothing after it, though the target lists "d".
        let merged = merge_list_pages(page(&["b", "d"], &[], "t", false), page(&["a", "c"], &[], "s", true), 2);
        assert_eq!(merged.objects.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(merged.next_marker.as_deref(), Some("b"));
        let merged = merge_list_pages(page(&["b", "d"], &[], "t", false), page(&["a", "c"], &[], "s", true), 5);
        assert_eq!(merged.objects.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(merged.is_truncated);
        assert_eq!(merged.next_marker.as_deref(), Some("c"));
        // Paging through with the markers gives every key once.
        let target = ["a1", "a3", "b", "c2", "d"];
        let source = ["a2", "a3", "c1", "c2", "e"];
        let slice = |keys: &[&'static str], after: &Option<String>, max: usize| {
            let rest: Vec<&str> = keys.iter().copied().filter(|k| after.as_deref().is_none_or(|a| *k > a)).collect();
            let truncated = rest.len() > max;
            page(&rest[..rest.len().min(max)], &[], "", truncated)
        };
        let (mut marker, mut all) = (None, Vec::new());
        loop {
            let merged = merge_list_pages(slice(&target, &marker, 2), slice(&source, &marker, 2), 2);
            all.extend(merged.objects.iter().map(|o| o.key.clone()));
            if !merged.is_truncated {
                break;
            }
            marker = merged.next_marker;
        }
        assert_eq!(all, ["a1", "a2", "a3", "b", "c1", "c2", "d", "e"]);
    }
}
