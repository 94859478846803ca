//! Bucket ACLs: the canned ACLs of `x-amz-acl` on CreateBucket and PutBucketAcl, and
//! GetBucketAcl answering with the owner and the grants a canned ACL stands for. Explicit
//! grants (`x-amz-grant-*`, an AccessControlPolicy body) are refused with NotImplemented.

use isthmus_store::CannedAcl;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

/// The canned ACL of an `x-amz-acl` header.
pub fn parse_canned(acl: Option<&BucketCannedACL>) -> S3Result<Option<CannedAcl>> {
    acl.map(|a| a.as_str().parse::<CannedAcl>().map_err(crate::error::s3_error)).transpose()
}

fn group_grant(uri: &str, permission: &'static str) -> Grant {
    Grant {
        grantee: Some(Grantee {
            type_: Type::from_static(Type::GROUP),
            uri: Some(uri.to_string()),
            display_name: None,
            email_address: None,
            id: None,
        }),
        permission: Some(Permission::from_static(permission)),
    }
}

/// The grants S3 lists for a canned ACL: the owner's full control, then the groups'.
fn grants(acl: CannedAcl, owner: &str) -> Vec<Grant> {
    let mut grants = vec![Grant {
        grantee: Some(Grantee {
            type_: Type::from_static(Type::CANONICAL_USER),
            id: Some(owner.to_string()),
            display_name: Some(owner.to_string()),
            email_address: None,
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    }];
    match acl {
        CannedAcl::Private => {}
        CannedAcl::PublicRead => grants.push(group_grant(ALL_USERS, Permission::READ)),
        CannedAcl::PublicReadWrite => {
            grants.push(group_grant(ALL_USERS, Permission::READ));
            grants.push(group_grant(ALL_USERS, Permission::WRITE));
        }
        CannedAcl::AuthenticatedRead => grants.push(group_grant(AUTHENTICATED_USERS, Permission::READ)),
    }
    grants
}

pub async fn put_bucket_acl(
    gw: &Gateway,
    req: S3Request<PutBucketAclInput>,
) -> S3Result<S3Response<PutBucketAclOutput>> {
    let cx = gw.cx(&req);
    let input = req.input;
    let explicit = input.access_control_policy.is_some()
        || input.grant_full_control.is_some()
        || input.grant_read.is_some()
        || input.grant_read_acp.is_some()
        || input.grant_write.is_some()
        || input.grant_write_acp.is_some();
    if explicit {
        return Err(s3_error!(NotImplemented, "Only canned ACLs (x-amz-acl) are supported"));
    }
    let acl = parse_canned(input.acl.as_ref())?.unwrap_or_default();
    let bucket = input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_acl(cx, &bucket, acl)).await?;
    Ok(S3Response::new(PutBucketAclOutput::default()))
}

pub async fn get_bucket_acl(
    gw: &Gateway,
    req: S3Request<GetBucketAclInput>,
) -> S3Result<S3Response<GetBucketAclOutput>> {
    let cx = gw.cx(&req);
    let bucket = req.input.bucket;
    let root = gw.users.root().to_string();
    let (acl, owner) = gw
        .read(&cx, move |store, cx| {
            let acl = store.bucket_acl(cx, &bucket)?;
            // Buckets made with mkdir belong to root.
            let owner = store.bucket_owner(cx, &bucket)?.unwrap_or_else(|| root.clone());
            Ok((acl, owner))
        })
        .await?;
    Ok(S3Response::new(GetBucketAclOutput {
        grants: Some(grants(acl, &owner)),
        owner: Some(Owner { id: Some(owner.clone()), display_name: Some(owner) }),
    }))
}
