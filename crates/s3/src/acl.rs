//! ACLs: the canned ACLs of `x-amz-acl` on CreateBucket, PutBucketAcl, PutObject,
//! CreateMultipartUpload, CopyObject and PutObjectAcl; grants to users of the gateway by
//! canonical id (`x-amz-grant-*` headers or an AccessControlPolicy body) on PutBucketAcl and
//! PutObjectAcl; Get{Bucket,Object}Acl answering with the owner and the grants.

use isthmus_store::BucketSettings;
use isthmus_store::{Acl, CannedAcl, Grant, GrantPermission, ObjectChange};
use s3s::dto::{Grant as Grant_, *};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::subresources::require_current_version;

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

/// The canned ACL of an `x-amz-acl` header.
pub fn parse_canned(acl: Option<&str>) -> S3Result<Option<CannedAcl>> {
    acl.map(|a| a.parse::<CannedAcl>().map_err(crate::error::s3_error)).transpose()
}

/// Refuses grant headers where this gateway keeps no grants (objects being written, new
/// buckets): grants are set with PutBucketAcl and PutObjectAcl.
macro_rules! no_grant_headers {
    ($input:expr) => {
        if $input.grant_full_control.is_some()
            || $input.grant_read.is_some()
            || $input.grant_read_acp.is_some()
            || $input.grant_write_acp.is_some()
        {
            return Err(s3_error!(
                NotImplemented,
                "Grant headers are taken by PutBucketAcl and PutObjectAcl only; use x-amz-acl here"
            ));
        }
    };
}
pub(crate) use no_grant_headers;

/// One grant as a request states it: the grantee (a user id or a group URI) and a permission.
struct Stated {
    id: Option<String>,
    uri: Option<String>,
    email: Option<String>,
    permission: String,
}

/// The grants of `x-amz-grant-*` headers: `id="…", uri="…", emailAddress="…"` lists.
fn header_grants(headers: &[(&str, Option<&String>)]) -> S3Result<Vec<Stated>> {
    let mut stated = Vec::new();
    for (permission, value) in headers {
        let Some(value) = value else { continue };
        for grantee in value.split(',') {
            let (kind, raw) = grantee
                .split_once('=')
                .ok_or_else(|| s3_error!(InvalidArgument, "Malformed grant header: {grantee:?}"))?;
            let raw = raw.trim().trim_matches('"').to_string();
            let mut grant = Stated { id: None, uri: None, email: None, permission: permission.to_string() };
            match kind.trim().to_ascii_lowercase().as_str() {
                "id" => grant.id = Some(raw),
                "uri" => grant.uri = Some(raw),
                "emailaddress" => grant.email = Some(raw),
                other => return Err(s3_error!(InvalidArgument, "Unknown grantee type {other:?} in a grant header")),
            }
            stated.push(grant);
        }
    }
    Ok(stated)
}

/// The grants of an AccessControlPolicy body.
fn body_grants(policy: &AccessControlPolicy) -> Vec<Stated> {
    policy
        .grants
        .iter()
        .flatten()
        .map(|g| Stated {
            id: g.grantee.as_ref().and_then(|e| e.id.clone()),
            uri: g.grantee.as_ref().and_then(|e| e.uri.clone()),
            email: g.grantee.as_ref().and_then(|e| e.email_address.clone()),
            permission: g.permission.as_ref().map(|p| p.as_str().to_string()).unwrap_or_default(),
        })
        .collect()
}

/// The ACL stated grants stand for. Groups become the canned ACL they make up (AllUsers READ is
/// public-read, with WRITE public-read-write; AuthenticatedUsers READ is authenticated-read);
/// users of this gateway, named by canonical id (their access key), get READ, or on a bucket
/// READ and WRITE. The owner's FULL_CONTROL is implied and may be stated. What this gateway
/// cannot enforce is refused whole: FULL_CONTROL, READ_ACP and WRITE_ACP for others, grants by
/// e-mail address, other groups.
fn acl_of_grants(gw: &Gateway, stated: Vec<Stated>, owner: &str, on_bucket: bool) -> S3Result<Acl> {
    let mut acl = Acl::default();
    let (mut all_read, mut all_write, mut authenticated_read) = (false, false, false);
    for grant in stated {
        let permission = grant.permission.as_str();
        if grant.email.is_some() {
            return Err(s3_error!(NotImplemented, "Grants by e-mail address are not supported: grant by canonical id"));
        }
        if let Some(uri) = grant.uri {
            match (uri.as_str(), permission) {
                (ALL_USERS, Permission::READ) => all_read = true,
                (ALL_USERS, Permission::WRITE) if on_bucket => all_write = true,
                (AUTHENTICATED_USERS, Permission::READ) => authenticated_read = true,
                _ => {
                    return Err(s3_error!(
                        NotImplemented,
                        "The grant of {permission} to the group {uri} is not supported"
                    ));
                }
            }
            continue;
        }
        let Some(id) = grant.id else {
            return Err(s3_error!(MalformedACLError, "A grant names no grantee"));
        };
        if id == owner && permission == Permission::FULL_CONTROL {
            continue;
        }
        if gw.principals.users().get(&id).is_none() && id != owner {
            return Err(s3_error!(InvalidArgument, "Invalid id: {id:?} is not a user of this gateway"));
        }
        let permission = match permission {
            Permission::READ => GrantPermission::Read,
            Permission::WRITE if on_bucket => GrantPermission::Write,
            other => {
                return Err(s3_error!(
                    NotImplemented,
                    "Grants of {other} are not supported: grant READ (and on a bucket WRITE)"
                ));
            }
        };
        if !acl.grants(&id, permission) {
            acl.grants.push(Grant { grantee: id, permission });
        }
    }
    acl.canned = match (all_read, all_write, authenticated_read) {
        (false, false, false) => CannedAcl::Private,
        (true, false, false) => CannedAcl::PublicRead,
        (true, true, false) => CannedAcl::PublicReadWrite,
        (false, false, true) => CannedAcl::AuthenticatedRead,
        _ => return Err(s3_error!(NotImplemented, "This combination of group grants is not supported")),
    };
    Ok(acl)
}

/// The ACL a PutBucketAcl or PutObjectAcl asks for: canned (`x-amz-acl`), grant headers, or an
/// AccessControlPolicy body; one of them, as S3 requires.
fn requested_acl(
    gw: &Gateway,
    canned: Option<&str>,
    headers: &[(&str, Option<&String>)],
    body: Option<&AccessControlPolicy>,
    owner: &str,
    on_bucket: bool,
) -> S3Result<Acl> {
    let has_headers = headers.iter().any(|(_, v)| v.is_some());
    if [canned.is_some(), has_headers, body.is_some()].iter().filter(|x| **x).count() > 1 {
        return Err(s3_error!(InvalidRequest, "Specify a canned ACL, grant headers or an ACL body, not several"));
    }
    if let Some(policy) = body {
        return acl_of_grants(gw, body_grants(policy), owner, on_bucket);
    }
    if has_headers {
        return acl_of_grants(gw, header_grants(headers)?, owner, on_bucket);
    }
    Ok(Acl::canned(parse_canned(canned)?.unwrap_or_default()))
}

fn group_grant(uri: &str, permission: &'static str) -> Grant_ {
    Grant_ {
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

fn user_grant(id: &str, permission: &'static str) -> Grant_ {
    Grant_ {
        grantee: Some(Grantee {
            type_: Type::from_static(Type::CANONICAL_USER),
            id: Some(id.to_string()),
            display_name: Some(id.to_string()),
            email_address: None,
            uri: None,
        }),
        permission: Some(Permission::from_static(permission)),
    }
}

/// The grants S3 lists for an ACL: the owner's full control, the groups' of the canned ACL,
/// then the users'.
fn grants(acl: &Acl, owner: &str) -> Vec<Grant_> {
    let mut grants = vec![user_grant(owner, Permission::FULL_CONTROL)];
    match acl.canned {
        CannedAcl::Private => {}
        CannedAcl::PublicRead => grants.push(group_grant(ALL_USERS, Permission::READ)),
        CannedAcl::PublicReadWrite => {
            grants.push(group_grant(ALL_USERS, Permission::READ));
            grants.push(group_grant(ALL_USERS, Permission::WRITE));
        }
        CannedAcl::AuthenticatedRead => grants.push(group_grant(AUTHENTICATED_USERS, Permission::READ)),
    }
    for grant in &acl.grants {
        let permission = match grant.permission {
            GrantPermission::Read => Permission::READ,
            GrantPermission::Write => Permission::WRITE,
        };
        grants.push(user_grant(&grant.grantee, permission));
    }
    grants
}

/// The owner of a bucket as ACLs name it: its creator, or root for buckets made with mkdir.
fn owner_in(
    store: &dyn isthmus_store::Store,
    cx: &isthmus_store::RequestContext,
    bucket: &str,
    root: &str,
) -> isthmus_store::StoreResult<String> {
    Ok(store.bucket_owner(cx, bucket)?.unwrap_or_else(|| root.to_string()))
}

/// The owner of a bucket, for an ACL being put (its own id may be stated with FULL_CONTROL).
async fn bucket_owner(gw: &Gateway, cx: &isthmus_store::RequestContext, bucket: &str) -> S3Result<String> {
    let (bucket, root) = (bucket.to_string(), gw.principals.users().root().to_string());
    gw.read(cx, move |store, cx| owner_in(store, cx, &bucket, &root)).await
}

pub async fn put_bucket_acl(
    gw: &Gateway,
    req: S3Request<PutBucketAclInput>,
) -> S3Result<S3Response<PutBucketAclOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let owner = bucket_owner(gw, &cx, &input.bucket).await?;
    let headers = [
        (Permission::READ, input.grant_read.as_ref()),
        (Permission::WRITE, input.grant_write.as_ref()),
        (Permission::FULL_CONTROL, input.grant_full_control.as_ref()),
        (Permission::READ_ACP, input.grant_read_acp.as_ref()),
        (Permission::WRITE_ACP, input.grant_write_acp.as_ref()),
    ];
    let canned = input.acl.as_ref().map(|a| a.as_str());
    let acl = requested_acl(gw, canned, &headers, input.access_control_policy.as_ref(), &owner, true)?;
    let bucket = input.bucket;
    gw.write(&cx, move |store, cx| store.set_bucket_acl(cx, &bucket, acl.clone())).await?;
    Ok(S3Response::new(PutBucketAclOutput::default()))
}

pub async fn get_bucket_acl(
    gw: &Gateway,
    req: S3Request<GetBucketAclInput>,
) -> S3Result<S3Response<GetBucketAclOutput>> {
    let cx = gw.cx(&req)?;
    let bucket = req.input.bucket;
    let root = gw.principals.users().root().to_string();
    let (acl, owner) = gw
        .read(&cx, move |store, cx| Ok((store.bucket_acl(cx, &bucket)?, owner_in(store, cx, &bucket, &root)?)))
        .await?;
    Ok(S3Response::new(GetBucketAclOutput { grants: Some(grants(&acl, &owner)), owner: Some(owner_of(owner)) }))
}

fn owner_of(id: String) -> Owner {
    Owner { id: Some(id.clone()), display_name: Some(id) }
}

pub async fn put_object_acl(
    gw: &Gateway,
    req: S3Request<PutObjectAclInput>,
) -> S3Result<S3Response<PutObjectAclOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    if input.grant_write.is_some() {
        return Err(s3_error!(NotImplemented, "WRITE grants apply to buckets, not objects"));
    }
    let owner = bucket_owner(gw, &cx, &input.bucket).await?;
    let headers = [
        (Permission::READ, input.grant_read.as_ref()),
        (Permission::FULL_CONTROL, input.grant_full_control.as_ref()),
        (Permission::READ_ACP, input.grant_read_acp.as_ref()),
        (Permission::WRITE_ACP, input.grant_write_acp.as_ref()),
    ];
    let canned = input.acl.as_ref().map(|a| a.as_str());
    let acl = requested_acl(gw, canned, &headers, input.access_control_policy.as_ref(), &owner, false)?;
    let (bucket, key, version) = (input.bucket, input.key, input.version_id);
    gw.write(&cx, move |store, cx| {
        require_current_version(store, cx, &bucket, &key, version.as_deref())?;
        store.update_object(cx, &bucket, &key, ObjectChange::Acl(acl.clone()))
    })
    .await?;
    Ok(S3Response::new(PutObjectAclOutput::default()))
}

/// An object's owner is its bucket's (objects have no owner of their own here).
pub async fn get_object_acl(
    gw: &Gateway,
    req: S3Request<GetObjectAclInput>,
) -> S3Result<S3Response<GetObjectAclOutput>> {
    let cx = gw.cx(&req)?;
    let input = req.input;
    let (bucket, key, version) = (input.bucket, input.key, input.version_id);
    let root = gw.principals.users().root().to_string();
    let (acl, owner) = gw
        .read(&cx, move |store, cx| {
            // Reading an object's ACL is the bucket owner's, as changing it.
            let owner = owner_in(store, cx, &bucket, &root)?;
            require_current_version(store, cx, &bucket, &key, version.as_deref())?;
            let info = store.head_object(cx, &bucket, &key, &Default::default())?;
            Ok((info.meta.object_acl(), owner))
        })
        .await?;
    Ok(S3Response::new(GetObjectAclOutput {
        grants: Some(grants(&acl, &owner)),
        owner: Some(owner_of(owner)),
        ..Default::default()
    }))
}
