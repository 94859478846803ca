//! The Isthmus S3 HTTP gateway: the S3 protocol (s3s: routing, XML, SigV4, aws-chunked) on
//! hyper + tokio, in front of any engine `Store`. Each family of operations has its module;
//! this file wires them into the `S3` trait and builds the service.

pub mod access_hook;
pub mod access_log;
mod acl;
mod active_content;
pub mod admin;
pub mod admin_http;
mod attributes;
pub mod auth;
pub mod bearer;
mod body;
mod bucket;
mod bucket_policy;
pub mod console;
pub mod convert;
mod cors;
mod cors_http;
mod dispatch;
pub mod error;
mod error_body;
mod expect;
mod fast_read;
mod idle;
pub mod integrity;
mod list;
pub mod metrics;
mod multipart;
mod notification;
mod object;
mod post_filename;
mod post_form;
mod post_policy;
mod request_facts;
mod routes;
mod select;
pub mod server;
mod sigv2_bucket_slash;
mod sts;
mod subresources;
mod tagging;
pub mod third_party_copy;
pub mod tls;

use std::sync::Arc;

use isthmus_store::{RequestContext, Store, StoreResult};
use s3s::dto::*;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{S3, S3Request, S3Response, S3Result};

pub use isthmus_session::{Identities, IdentitySpec, IoPolicy, Placement, Principals, Runner, User, UserDirectory};
pub use server::{GatewayConfig, serve};

/// The S3 front of an engine (any `Store`, behind `dyn`).
#[derive(Clone)]
pub struct Gateway {
    runner: Runner,
    /// Who is asking: users, their identities, tokens (the session floor).
    principals: Principals,
    /// The largest array selection answered (`?select=`), in bytes.
    select_max_bytes: u64,
    /// The ARNs of the notification destinations the operator configured.
    notification_destinations: Arc<Vec<String>>,
}

/// The default of `select_max_bytes`: 1 GiB.
pub const DEFAULT_SELECT_MAX_BYTES: u64 = 1 << 30;

impl Gateway {
    pub fn new(runner: Runner, principals: Principals) -> Self {
        Self {
            runner,
            principals,
            select_max_bytes: DEFAULT_SELECT_MAX_BYTES,
            notification_destinations: Arc::default(),
        }
    }

    /// Sets the ARNs a bucket's notification rules may name (the operator's destinations).
    pub fn with_notification_destinations(mut self, arns: Vec<String>) -> Self {
        self.notification_destinations = Arc::new(arns);
        self
    }

    /// The ARNs a bucket's notification rules may name.
    fn notification_destinations(&self) -> &[String] {
        &self.notification_destinations
    }

    /// Sets the largest array selection the gateway answers.
    pub fn with_select_max_bytes(mut self, bytes: u64) -> Self {
        self.select_max_bytes = bytes;
        self
    }

    /// The context of a request's engine calls, as the session floor decides it from what the
    /// request carries (its checked signature, bearer token or session token), with the bucket
    /// owner it expects (`x-amz-expected-bucket-owner`, checked by the authorization layer).
    fn cx<T>(&self, req: &S3Request<T>) -> S3Result<RequestContext> {
        let bearer = req.extensions.get::<bearer::BearerGrant>().map(|grant| &*grant.0);
        let security_token = bearer::security_token(req);
        let asking = isthmus_session::Asking {
            access_key: req.credentials.as_ref().map(|c| c.access_key.as_str()),
            bearer,
            security_token: security_token.as_deref(),
        };
        let source_ip = req.extensions.get::<request_facts::PeerAddress>().map(|peer| peer.0.ip());
        Ok(self.context(&asking, &req.headers)?.from_address(source_ip))
    }

    /// The context of a request from `asking` whose headers are `headers` (`cx`; the fast path
    /// of anonymous reads asks it here too, `fast_read`).
    fn context(&self, asking: &isthmus_session::Asking<'_>, headers: &hyper::HeaderMap) -> S3Result<RequestContext> {
        let cx = self.principals.context(asking).map_err(auth::refusal_error)?;
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        Ok(cx
            .expecting_bucket_owner(header("x-amz-expected-bucket-owner"))
            .expecting_source_owner(header("x-amz-source-expected-bucket-owner")))
    }

    /// Runs one engine call placed as `placement` says (the session floor's runner).
    async fn call<T, F>(&self, cx: &RequestContext, placement: Placement, f: F) -> S3Result<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.runner.call(cx, placement, f).await.map_err(error::s3_error)
    }

    /// Runs a short engine call that only reads.
    async fn read<T, F>(&self, cx: &RequestContext, f: F) -> S3Result<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.call(cx, Placement::Read, f).await
    }

    /// Runs a short engine call that changes something.
    async fn write<T, F>(&self, cx: &RequestContext, f: F) -> S3Result<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.call(cx, Placement::Write, f).await
    }

    /// Runs an engine call that walks many entries (listings).
    async fn scan<T, F>(&self, cx: &RequestContext, f: F) -> S3Result<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.call(cx, Placement::Scan, f).await
    }

    /// Runs an engine call that moves data (copies, multipart completion).
    async fn long<T, F>(&self, cx: &RequestContext, f: F) -> S3Result<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.call(cx, Placement::Long, f).await
    }
}

/// Wires each S3 operation to the module of its family that serves it (`bucket`, `object`,
/// `list`, `multipart`, `tagging`, `acl`, `bucket_policy`, `attributes`): one line each.
macro_rules! operations {
    ($($module:ident::$operation:ident($input:ident) -> $output:ident;)*) => {
        #[async_trait::async_trait]
        impl S3 for Gateway {
            $(
                async fn $operation(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    $module::$operation(self, req).await
                }
            )*
        }
    };
}

operations! {
    bucket::list_buckets(ListBucketsInput) -> ListBucketsOutput;
    bucket::create_bucket(CreateBucketInput) -> CreateBucketOutput;
    bucket::head_bucket(HeadBucketInput) -> HeadBucketOutput;
    bucket::delete_bucket(DeleteBucketInput) -> DeleteBucketOutput;
    bucket::get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    object::put_object(PutObjectInput) -> PutObjectOutput;
    object::get_object(GetObjectInput) -> GetObjectOutput;
    object::head_object(HeadObjectInput) -> HeadObjectOutput;
    object::delete_object(DeleteObjectInput) -> DeleteObjectOutput;
    object::copy_object(CopyObjectInput) -> CopyObjectOutput;
    list::list_objects(ListObjectsInput) -> ListObjectsOutput;
    list::list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output;
    multipart::create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
    multipart::upload_part(UploadPartInput) -> UploadPartOutput;
    multipart::complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput;
    multipart::abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
    multipart::list_parts(ListPartsInput) -> ListPartsOutput;
    multipart::list_multipart_uploads(ListMultipartUploadsInput) -> ListMultipartUploadsOutput;
    object::delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
    bucket::get_bucket_versioning(GetBucketVersioningInput) -> GetBucketVersioningOutput;
    bucket::put_bucket_versioning(PutBucketVersioningInput) -> PutBucketVersioningOutput;
    list::list_object_versions(ListObjectVersionsInput) -> ListObjectVersionsOutput;
    tagging::put_object_tagging(PutObjectTaggingInput) -> PutObjectTaggingOutput;
    tagging::get_object_tagging(GetObjectTaggingInput) -> GetObjectTaggingOutput;
    tagging::delete_object_tagging(DeleteObjectTaggingInput) -> DeleteObjectTaggingOutput;
    acl::put_bucket_acl(PutBucketAclInput) -> PutBucketAclOutput;
    acl::get_bucket_acl(GetBucketAclInput) -> GetBucketAclOutput;
    acl::put_object_acl(PutObjectAclInput) -> PutObjectAclOutput;
    acl::get_object_acl(GetObjectAclInput) -> GetObjectAclOutput;
    bucket_policy::put_bucket_policy(PutBucketPolicyInput) -> PutBucketPolicyOutput;
    bucket_policy::get_bucket_policy(GetBucketPolicyInput) -> GetBucketPolicyOutput;
    bucket_policy::delete_bucket_policy(DeleteBucketPolicyInput) -> DeleteBucketPolicyOutput;
    bucket_policy::put_public_access_block(PutPublicAccessBlockInput) -> PutPublicAccessBlockOutput;
    bucket_policy::get_public_access_block(GetPublicAccessBlockInput) -> GetPublicAccessBlockOutput;
    bucket_policy::delete_public_access_block(DeletePublicAccessBlockInput) -> DeletePublicAccessBlockOutput;
    cors::put_bucket_cors(PutBucketCorsInput) -> PutBucketCorsOutput;
    cors::get_bucket_cors(GetBucketCorsInput) -> GetBucketCorsOutput;
    cors::delete_bucket_cors(DeleteBucketCorsInput) -> DeleteBucketCorsOutput;
    notification::put_bucket_notification_configuration(PutBucketNotificationConfigurationInput) -> PutBucketNotificationConfigurationOutput;
    notification::get_bucket_notification_configuration(GetBucketNotificationConfigurationInput) -> GetBucketNotificationConfigurationOutput;
    tagging::put_bucket_tagging(PutBucketTaggingInput) -> PutBucketTaggingOutput;
    tagging::get_bucket_tagging(GetBucketTaggingInput) -> GetBucketTaggingOutput;
    tagging::delete_bucket_tagging(DeleteBucketTaggingInput) -> DeleteBucketTaggingOutput;
    attributes::get_object_attributes(GetObjectAttributesInput) -> GetObjectAttributesOutput;
    multipart::upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
}

/// The largest file a browser (POST) upload may carry.
pub const POST_OBJECT_MAX_SIZE: u64 = 64 << 20;

/// What the service offers besides S3 on the engine: virtual-hosted names, array selections,
/// grid credentials, quotas.
#[derive(Default)]
pub struct ServiceOptions<'a> {
    /// Virtual-hosted-style addressing under this domain (with the ports served on: the S3
    /// listeners' and the console's, whose page signs with its own host).
    pub domain: Option<(&'a str, Vec<u16>)>,
    pub select_max_bytes: u64,
    pub quotas: Option<Arc<isthmus_access::quota::Quotas>>,
    /// Where third-party copies stage pulls (none: COPY is refused).
    pub tpc_staging: Option<std::path::PathBuf>,
    /// Where third-party copies may connect (default: public hosts only, never this gateway).
    pub outbound: Arc<isthmus_grid::OutboundPolicy>,
    /// How many third-party copies run at once, and how long one may wait and run.
    pub tpc_limits: isthmus_grid::CopyLimits,
    /// Administration of users on the running gateway (none: refused); it must manage the
    /// same `UserDirectory` the service is given.
    pub admin: Option<Arc<admin::Administration>>,
    /// The ARNs of the operator's notification destinations, which bucket rules may name.
    pub notification_destinations: Vec<String>,
}

/// Builds the S3 service: the gateway over `runner` (whose store is the session floor's
/// stack, `isthmus_session::stack::served`), SigV4 authentication against the principals'
/// users and temporary credentials, and virtual-hosted-style addressing under `domain` (with
/// the port the server listens on) when one is given; path style always works.
pub fn build_service(
    runner: Runner,
    principals: Principals,
    options: ServiceOptions<'_>,
) -> Result<GatewayService, String> {
    let ServiceOptions {
        domain,
        select_max_bytes,
        quotas,
        tpc_staging,
        outbound,
        tpc_limits,
        admin,
        notification_destinations,
    } = options;
    let gateway = Gateway::new(runner, principals.clone())
        .with_select_max_bytes(select_max_bytes)
        .with_notification_destinations(notification_destinations);
    let mut builder = S3ServiceBuilder::new(gateway.clone());
    builder.set_auth(auth::GatewayKeys(principals.clone()));
    let tpc = tpc_staging.map(|staging| third_party_copy::ThirdPartyCopy {
        gateway: gateway.clone(),
        staging,
        marker_interval: third_party_copy::MARKER_INTERVAL,
        outbound,
        slots: isthmus_grid::CopySlots::new(tpc_limits),
        quotas,
    });
    builder.set_route(routes::GridRoutes { principals, tpc, admin });
    builder.set_access(access_hook::SignedRequestsOnly);
    // The protocol layer holds a browser (POST) upload's file in memory before the gateway sees
    // it: bounded here, so memory stays bounded (larger files go by PUT or multipart).
    let mut config = s3s::config::S3Config::default();
    config.post_object_max_file_size = POST_OBJECT_MAX_SIZE;
    builder.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(config))));
    let mut domains = Vec::new();
    if let Some((domain, ports)) = domain {
        // Clients on a non-default port send `Host: bucket.domain:port`; accept both forms.
        let mut names = vec![domain.to_string()];
        if !domain.contains(':') {
            names.extend(ports.iter().map(|port| format!("{domain}:{port}")));
        }
        builder.set_host(
            s3s::host::MultiDomain::new(names.clone()).map_err(|e| format!("invalid domain {domain:?}: {e}"))?,
        );
        domains = names;
    }
    let fast = Arc::new(fast_read::FastRead::new(gateway.clone(), domains));
    Ok(GatewayService { s3: builder.build(), fast })
}

/// What `build_service` builds and `serve` serves: the S3 protocol layer, and beside it the
/// fast path of anonymous reads (`fast_read`).
#[derive(Clone)]
pub struct GatewayService {
    s3: S3Service,
    fast: Arc<fast_read::FastRead>,
}
