//! The engine a host name selects: `isthmus` (optionally with a port, as IOR's `host=` may
//! give it) is the engine in this process on the data root `ISTHMUS_ROOT`; `unix:PATH` is a
//! gateway's local socket (the gateway knows the caller by its uid); any other host is refused
//! with `NameLookupError`, since this library speaks no HTTP (a site keeps the real libs3 for
//! HTTP endpoints). A null host name is the default host of `S3_initialize`.

use std::ffi::c_char;
use std::sync::{Arc, OnceLock};

use isthmus_posix::StoreOptions;
use isthmus_store::{RequestContext, Store};

use crate::abi::BucketContext;
use crate::drive::text;
use crate::face::Failure;

/// The host name that selects the in-process engine.
pub const ENGINE_HOST: &str = "isthmus";

static DEFAULT_HOST: OnceLock<String> = OnceLock::new();

/// The context of this library's calls: the host process acting for itself.
pub fn cx() -> RequestContext {
    RequestContext::process()
}

/// Records the default host (`S3_initialize`); the first one given stays.
pub fn set_default_host(host: &str) {
    let _ = DEFAULT_HOST.set(host.to_string());
}

fn in_process() -> Result<&'static dyn Store, String> {
    static STORE: OnceLock<Result<Arc<dyn Store>, String>> = OnceLock::new();
    STORE
        .get_or_init(|| {
            let root = std::env::var("ISTHMUS_ROOT").map_err(|_| "set ISTHMUS_ROOT to the data root".to_string())?;
            isthmus_session::stack::open_root(std::path::Path::new(&root), StoreOptions::default())
                .map_err(|e| format!("cannot open {root}: {e}"))
        })
        .as_ref()
        .map(|store| &**store)
        .map_err(Clone::clone)
}

/// The gateway reached through the local socket named by `host` (`unix:/run/isthmus.sock`):
/// one connection pool per process, to the first socket named. A failed connection is not
/// kept: the next call tries again. A refusal keeps its S3 status (a caller the gateway maps
/// to no user gets ErrorAccessDenied).
fn local(host: &str) -> Result<&'static dyn Store, Failure> {
    /// The socket named first, and the gateway reached through it.
    type NamedGateway = (String, Arc<dyn Store>);
    static LOCAL: OnceLock<NamedGateway> = OnceLock::new();
    let (first, store) = match LOCAL.get() {
        Some(gateway) => gateway,
        None => {
            let store = isthmus_session::stack::open(host, StoreOptions::default()).map_err(|e| {
                let failure = Failure::from(e);
                Failure { message: format!("cannot use the local gateway at {host}: {}", failure.message), ..failure }
            })?;
            LOCAL.get_or_init(|| (host.to_string(), store))
        }
    };
    if first != host {
        let why = format!("this process already uses the local gateway {first}; one socket per process");
        return Err(Failure::new("FailedToInitializeRequest", why));
    }
    Ok(&**store)
}

/// The engine for a host name, or why this library cannot serve it.
///
/// # Safety
/// `host` is null or a valid C string.
pub unsafe fn engine(host: *const c_char) -> Result<&'static dyn Store, Failure> {
    // SAFETY: per this function's contract.
    let host = unsafe { text(host) }.map(str::to_string).or_else(|| DEFAULT_HOST.get().cloned());
    let failed = |m| Failure::new("FailedToInitializeRequest", m);
    match host.as_deref() {
        Some(h) if h.split(':').next() == Some(ENGINE_HOST) => in_process().map_err(failed),
        Some(h) if isthmus_local::socket_path(h).is_some() => local(h),
        other => Err(Failure::new(
            "NameLookupError",
            format!(
                "this libs3 drop-in serves only the host name '{ENGINE_HOST}' (in-process, from ISTHMUS_ROOT) and unix:/path/to/socket (a gateway's local socket), not '{}'; use the real libs3 for HTTP endpoints",
                other.unwrap_or("(no host)")
            ),
        )),
    }
}

/// The engine and bucket name of a bucket context.
///
/// # Safety
/// `ctx` is null or points to a valid bucket context (the 2.0 one or the start of a 4.x one).
pub unsafe fn bucket_of<'a>(ctx: *const BucketContext) -> Result<(&'static dyn Store, &'a str), Failure> {
    // SAFETY: per this function's contract.
    let ctx = unsafe { ctx.as_ref() }.ok_or_else(|| Failure::new("InternalError", "no bucket context"))?;
    // SAFETY: the context's strings are null or valid C strings.
    let store = unsafe { engine(ctx.host_name) }?;
    // SAFETY: as above.
    let bucket =
        unsafe { text(ctx.bucket_name) }.ok_or_else(|| Failure::new("ErrorInvalidBucketName", "no bucket name"))?;
    Ok((store, bucket))
}
