//! Requests that are not S3 operations, routed before the protocol layer's S3 dispatch (after
//! it has checked any signature): STS (`AssumeRoleWithWebIdentity`, unsigned: the token in the
//! form is the credential; `GetSessionToken`, signed with a user's keys), HTTP third-party copy
//! (`COPY`, WebDAV style; it needs a bearer token or a signature), and administration calls
//! (`crate::admin::route`, the root user's).

use s3s::route::S3Route;
use s3s::{Body, S3Request, S3Response, S3Result};

use isthmus_session::Principals;

use crate::bearer::BearerGrant;

pub struct GridRoutes {
    /// Who asks (the session floor): its grid credentials answer STS.
    pub principals: Principals,
    pub tpc: Option<crate::third_party_copy::ThirdPartyCopy>,
    /// Administration calls (`/?isthmus-admin=...`); none: they are refused.
    pub admin: Option<std::sync::Arc<crate::admin::Administration>>,
}

#[async_trait::async_trait]
impl S3Route for GridRoutes {
    fn is_match(
        &self,
        method: &hyper::Method,
        uri: &hyper::Uri,
        headers: &hyper::HeaderMap,
        extensions: &mut hyper::http::Extensions,
    ) -> bool {
        let name = if crate::admin::route::is_admin(uri) {
            "Admin"
        } else if crate::sts::is_sts(method, uri, headers) {
            "STS"
        } else if method.as_str() == "COPY" {
            "ThirdPartyCopy"
        } else {
            return false;
        };
        if let Some(slot) = extensions.get::<crate::metrics::OperationSlot>() {
            slot.set_static(name);
        }
        true
    }

    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        if crate::admin::route::is_admin(&req.uri) {
            return match &self.admin {
                Some(admin) => crate::admin::route::check_root(req, admin, &self.principals),
                None => Err(s3s::s3_error!(NotImplemented, "Administration is not enabled on this gateway")),
            };
        }
        if req.method.as_str() != "COPY" {
            return Ok(());
        }
        if req.credentials.is_some() || req.extensions.get::<BearerGrant>().is_some() {
            return Ok(());
        }
        Err(s3s::s3_error!(AccessDenied, "Third-party copy needs a bearer token or a signed request"))
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        if let Some(admin) = self.admin.as_ref().filter(|_| crate::admin::route::is_admin(&req.uri)) {
            return crate::admin::route::answer(admin.clone(), req).await;
        }
        if req.method.as_str() == "COPY" {
            return match &self.tpc {
                Some(tpc) => tpc.handle(req).await,
                None => Err(s3s::s3_error!(NotImplemented, "Third-party copy is not enabled on this gateway")),
            };
        }
        crate::sts::answer(req, self.principals.grid()).await
    }
}
