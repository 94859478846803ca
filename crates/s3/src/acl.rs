//! ACLs: the canned ACLs of `x-amz-acl` on CreateBucket, PutBucketAcl, PutObject,
//! CreateMultipartUpload, CopyObject and PutObjectAcl, and Get{Bucket,Object}Acl answering with
//! the owner and the grants a canned ACL stands for. Explicit grants (`x-amz-grant-*`, an
//! AccessControlPolicy body) are refused with NotImplemented.

use isthmus_store::CannedAcl;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::object::require_current_version;

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

/// The canned ACL of an `x-amz-acl` header.
pub fn parse_canned(acl: Option<&str>) -> S3Result<Option<CannedAcl>> {
    acl.map(|a| a.parse::<CannedAcl>().map_err(crate::error::s3_error)).transpose()
}

/// Refuses explicit grants: only canned ACLs are supported.
macro_rules! only_canned {
    ($input:expr) => {
        if $input.access_control_policy.is_some()
            || $input.grant_full_control.is_some()
            || $input.grant_read.is_some()
            || $input.grant_read_acp.is_some()
            || $input.grant_write_acp.is_some()
        {
            return Err(s3_error!(NotImplemented, "Only canned ACLs (x-amz-acl) are supported"));
        }
    };
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
    only_canned!(input);
    if input.grant_write.is_some() {
        return Err(s3_error!(NotImplemented, "Only canned ACLs (x-amz-acl) are supported"));
    }
    let acl = parse_canned(input.acl.as_ref().map(|a| a.as_str()))?.unwrap_or_default();
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
    Ok(S3Response::new(GetBucketAclOutput { grants: Some(grants(acl, &owner)), owner: Some(owner_of(owner)) }))
}

fn owner_of(id: String) -> Owner {
    Owner { id: Some(id.clone()), display_name: Some(id) }
}

pub async fn put_object_acl(
    gw: &Gateway,
    req: S3Request<PutObjectAclInput>,
) -> S3Result<S3Response<PutObjectAclOutput>> {
    let cx = gw.cx(&req);
    let input = req.input;
    only_canned!(input);
    let acl = parse_canned(input.acl.as_ref().map(|a| a.as_str()))?.unwrap_or_default();
    let (bucket, key, version) = (input.bucket, input.key, input.version_id);
    gw.write(&cx, move |store, cx| {
        require_current_version(store, cx, &bucket, &key, version.as_deref())?;
        store.set_object_acl(cx, &bucket, &key, acl)
    })
    .await?;
    Ok(S3Response::new(PutObjectAclOutput::default()))
}

/// An object's owner is its bucket's (objects have no owner of their own here).
pub async fn get_object_acl(
    gw: &Gateway,
    req: S3Request<GetObjectAclInput>,
) -> S3Result<S3Response<GetObjectAclOutput>> {
    let cx = gw.cx(&req);
    let input = req.input;
    let (bucket, key, version) = (input.bucket, input.key, input.version_id);
    let root = gw.users.root().to_string();
    let (acl, owner) = gw
        .read(&cx, move |store, cx| {
            // Reading an object's ACL is the bucket owner's, as changing it.
            let owner = store.bucket_owner(cx, &bucket)?.unwrap_or_else(|| root.clone());
            require_current_version(store, cx, &bucket, &key, version.as_deref())?;
            let info = store.head_object(cx, &bucket, &key, &Default::default())?;
            Ok((info.meta.acl.unwrap_or_default(), owner))
        })
        .await?;
    Ok(S3Response::new(GetObjectAclOutput {
        grants: Some(grants(acl, &owner)),
        owner: Some(owner_of(owner)),
        ..Default::default()
    }))
}
