//! Stores that run every call of another store inside a scope they choose (the gateway's own
//! identity for an erasure pool's files; the request's Unix identity for the session floor's
//! stack): `scoped_store!` writes the forwarding of the whole interface (`Store` and
//! `MultipartStore`) once, so each such wrapper states only its scope, how a writer it returns
//! keeps that scope, and how a body it returns is read.

/// Implements `Store` and `MultipartStore` for a wrapper by calling the same method of its
/// inner store, each call inside `run(cx, || ...)`; writers pass through `writer(cx, w)` and
/// GET responses through `response(cx, r)`, so their later writes, commit and reads can keep
/// the scope; `files(self)` says which capabilities the wrapper offers (`no_files`: none).
/// `upload_part_copy` keeps the trait's default, which calls the methods written here.
///
/// ```ignore
/// scoped_store! {
///     impl[S: Store + ?Sized] for AsRequester<S>, inner: self.0,
///     run: run, writer: writer, response: response, files: files_of,
/// }
/// ```
#[macro_export]
macro_rules! scoped_store {
    (
        impl[$($generics:tt)*] for $wrapper:ty, inner: $this:ident . $field:tt,
        run: $run:path, writer: $writer:path, response: $response:path, files: $files:path $(,)?
    ) => {
        impl<$($generics)*> $crate::Store for $wrapper {
            $crate::scoped_store!(@calls $this . $field, $run;
                fn list_buckets(cx) -> Vec<$crate::BucketInfo>;
                fn create_bucket(cx, bucket: &str, request: &$crate::CreateBucketRequest) -> ();
                fn head_bucket(cx, bucket: &str) -> ();
                fn bucket_facts(cx, bucket: &str) -> $crate::BucketFacts;
                fn delete_bucket(cx, bucket: &str) -> ();
                fn bucket_config(cx, bucket: &str) -> $crate::BucketConfig;
                fn set_bucket_config(cx, bucket: &str, config: &$crate::BucketConfig) -> ();
                fn head_object(cx, bucket: &str, key: &str, request: &$crate::HeadRequest) -> $crate::ObjectInfo;
                fn delete_object(cx, bucket: &str, key: &str, request: &$crate::DeleteRequest)
                    -> $crate::DeleteOutcome;
                fn copy_object(cx, source: (&str, &str), destination: (&str, &str), request: &$crate::CopyRequest)
                    -> $crate::ObjectInfo;
                fn list_objects(cx, bucket: &str, request: &$crate::ListRequest) -> $crate::ListPage;
                fn list_object_versions(cx, bucket: &str, request: &$crate::ListVersionsRequest)
                    -> $crate::VersionsPage;
                fn update_object(cx, bucket: &str, key: &str, change: $crate::ObjectChange) -> ();
            );

            fn put_object(
                &$this,
                cx: &$crate::RequestContext,
                bucket: &str,
                key: &str,
                request: $crate::PutRequest,
            ) -> $crate::StoreResult<$crate::BoxedWriter> {
                let inner = $run(cx, || $this.$field.put_object(cx, bucket, key, request))?;
                Ok($writer(cx, inner))
            }

            fn get_object(
                &$this,
                cx: &$crate::RequestContext,
                bucket: &str,
                key: &str,
                request: &$crate::GetRequest,
            ) -> $crate::StoreResult<$crate::GetResponse> {
                let response = $run(cx, || $this.$field.get_object(cx, bucket, key, request))?;
                Ok($response(cx, response))
            }

            fn files(&$this) -> Option<&dyn $crate::ObjectFiles> {
                $files($this)
            }
        }

        impl<$($generics)*> $crate::MultipartStore for $wrapper {
            $crate::scoped_store!(@calls $this . $field, $run;
                fn create_multipart_upload(cx, bucket: &str, key: &str, request: $crate::PutRequest) -> String;
                fn complete_multipart_upload(cx, bucket: &str, key: &str, upload_id: &str,
                    parts: &[$crate::multipart::CompletedPart], request: $crate::PutRequest) -> $crate::ObjectInfo;
                fn abort_multipart_upload(cx, bucket: &str, key: &str, upload_id: &str) -> ();
                fn list_parts(cx, bucket: &str, key: &str, upload_id: &str, request: &$crate::ListPartsRequest)
                    -> $crate::multipart::PartsPage;
                fn list_multipart_uploads(cx, bucket: &str, request: &$crate::multipart::ListUploadsRequest)
                    -> $crate::multipart::UploadsPage;
            );

            fn upload_part(
                &$this,
                cx: &$crate::RequestContext,
                bucket: &str,
                key: &str,
                upload_id: &str,
                request: &$crate::PartRequest,
            ) -> $crate::StoreResult<$crate::BoxedWriter> {
                let inner = $run(cx, || $this.$field.upload_part(cx, bucket, key, upload_id, request))?;
                Ok($writer(cx, inner))
            }
        }
    };
    (@calls $this:ident . $field:tt, $run:path; $(fn $name:ident(cx $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {
        $(fn $name(&$this, cx: &$crate::RequestContext $(, $arg: $ty)*) -> $crate::StoreResult<$ret> {
            $run(cx, || $this.$field.$name(cx $(, $arg)*))
        })*
    };
}

/// For `scoped_store!`'s `files`: a wrapper that offers no capability (its inner store keeps no
/// object as a plain file).
pub fn no_files<T>(_: &T) -> Option<&dyn crate::ObjectFiles> {
    None
}
