//! The C types of libs3 that both faces share, laid out as libs3 4.1 lays them out. The 4.1
//! bucket context and put properties are the 2.0 ones with fields added at the end, so the
//! shared code reads them through the 2.0 prefix (`BucketContext`, `PutProperties`); response
//! properties are always produced in the longer 4.1 form, whose extra field a 2.0 caller never
//! reads. The multipart types exist only in 4.1.

use std::ffi::{c_char, c_int, c_void};

/// A status as the C caller sees it: a number of the face's `S3Status` enumeration.
pub type S3Status = c_int;

#[repr(C)]
pub struct S3NameValue {
    pub name: *const c_char,
    pub value: *const c_char,
}

#[repr(C)]
pub struct S3ResponseProperties {
    pub request_id: *const c_char,
    pub request_id2: *const c_char,
    pub content_type: *const c_char,
    pub content_length: u64,
    pub server: *const c_char,
    pub e_tag: *const c_char,
    pub last_modified: i64,
    pub meta_data_count: c_int,
    pub meta_data: *const S3NameValue,
    /// 4.1 only (a 2.0 caller's struct ends before it).
    pub uses_server_side_encryption: c_char,
}

#[repr(C)]
pub struct S3ErrorDetails {
    pub message: *const c_char,
    pub resource: *const c_char,
    pub further_details: *const c_char,
    pub extra_details_count: c_int,
    pub extra_details: *mut S3NameValue,
}

pub type PropertiesCallback = unsafe extern "C" fn(*const S3ResponseProperties, *mut c_void) -> S3Status;
pub type CompleteCallback = unsafe extern "C" fn(S3Status, *const S3ErrorDetails, *mut c_void);
pub type PutDataCallback = unsafe extern "C" fn(c_int, *mut c_char, *mut c_void) -> c_int;
pub type GetDataCallback = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> S3Status;

#[repr(C)]
pub struct S3ResponseHandler {
    pub properties: Option<PropertiesCallback>,
    pub complete: Option<CompleteCallback>,
}

/// The 2.0 bucket context, which is also the start of the 4.1 one.
#[repr(C)]
pub struct BucketContext {
    pub host_name: *const c_char,
    pub bucket_name: *const c_char,
    pub protocol: c_int,
    pub uri_style: c_int,
    pub access_key_id: *const c_char,
    pub secret_access_key: *const c_char,
}

/// The 4.1 bucket context: the 2.0 one, then a session token and a signing region (neither
/// is used: the socket knows its peer, the engine signs nothing).
#[repr(C)]
pub struct BucketContext4 {
    pub base: BucketContext,
    pub security_token: *const c_char,
    pub auth_region: *const c_char,
}

/// The 2.0 put properties, which are also the start of the 4.1 ones.
#[repr(C)]
pub struct PutProperties {
    pub content_type: *const c_char,
    pub md5: *const c_char,
    pub cache_control: *const c_char,
    pub content_disposition_filename: *const c_char,
    pub content_encoding: *const c_char,
    pub expires: i64,
    pub canned_acl: c_int,
    pub meta_data_count: c_int,
    pub meta_data: *const S3NameValue,
}

/// The 4.1 put properties: the 2.0 ones and a server-side encryption flag (ignored).
#[repr(C)]
pub struct PutProperties4 {
    pub base: PutProperties,
    pub use_server_side_encryption: c_char,
}

#[repr(C)]
pub struct S3GetConditions {
    pub if_modified_since: i64,
    pub if_not_modified_since: i64,
    pub if_match_etag: *const c_char,
    pub if_not_match_etag: *const c_char,
}

#[repr(C)]
pub struct S3ListBucketContent {
    pub key: *const c_char,
    pub last_modified: i64,
    pub e_tag: *const c_char,
    pub size: u64,
    pub owner_id: *const c_char,
    pub owner_display_name: *const c_char,
}

#[repr(C)]
pub struct S3ListMultipartUpload {
    pub key: *const c_char,
    pub upload_id: *const c_char,
    pub initiator_id: *const c_char,
    pub initiator_display_name: *const c_char,
    pub owner_id: *const c_char,
    pub owner_display_name: *const c_char,
    pub storage_class: *const c_char,
    pub initiated: i64,
}

#[repr(C)]
pub struct S3ListPart {
    pub e_tag: *const c_char,
    pub last_modified: i64,
    pub part_number: u64,
    pub size: u64,
}

/// An ACL grant (only its size matters here: ACL calls are not served).
#[repr(C)]
pub struct S3AclGrant {
    pub grantee_type: c_int,
    pub grantee: [c_char; 256],
    pub permission: c_int,
}

#[repr(C)]
pub struct S3PutObjectHandler {
    pub response: S3ResponseHandler,
    pub data: Option<PutDataCallback>,
}

#[repr(C)]
pub struct S3GetObjectHandler {
    pub response: S3ResponseHandler,
    pub data: Option<GetDataCallback>,
}

pub type ListBucketCallback = unsafe extern "C" fn(
    c_int,
    *const c_char,
    c_int,
    *const S3ListBucketContent,
    c_int,
    *const *const c_char,
    *mut c_void,
) -> S3Status;

#[repr(C)]
pub struct S3ListBucketHandler {
    pub response: S3ResponseHandler,
    pub list: Option<ListBucketCallback>,
}

pub type ListServiceCallback =
    unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, i64, *mut c_void) -> S3Status;

#[repr(C)]
pub struct S3ListServiceHandler {
    pub response: S3ResponseHandler,
    pub list: Option<ListServiceCallback>,
}

#[repr(C)]
pub struct S3MultipartInitialHandler {
    pub response: S3ResponseHandler,
    pub upload_id: Option<unsafe extern "C" fn(*const c_char, *mut c_void) -> S3Status>,
}

#[repr(C)]
pub struct S3MultipartCommitHandler {
    pub response: S3ResponseHandler,
    pub data: Option<PutDataCallback>,
    pub committed: Option<unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void) -> S3Status>,
}

pub type ListUploadsCallback = unsafe extern "C" fn(
    c_int,
    *const c_char,
    *const c_char,
    c_int,
    *const S3ListMultipartUpload,
    c_int,
    *const *const c_char,
    *mut c_void,
) -> S3Status;

#[repr(C)]
pub struct S3ListMultipartUploadsHandler {
    pub response: S3ResponseHandler,
    pub list: Option<ListUploadsCallback>,
}

pub type ListPartsCallback = unsafe extern "C" fn(
    c_int,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
    c_int,
    c_int,
    *const S3ListPart,
    *mut c_void,
) -> S3Status;

#[repr(C)]
pub struct S3ListPartsHandler {
    pub response: S3ResponseHandler,
    pub list: Option<ListPartsCallback>,
}

#[repr(C)]
pub struct S3AbortMultipartUploadHandler {
    pub response: S3ResponseHandler,
}

// The layouts libs3 4.1 has on a 64-bit target (measured against its header).
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<S3NameValue>() == 16);
    assert!(size_of::<S3ResponseProperties>() == 80);
    assert!(offset_of!(S3ResponseProperties, uses_server_side_encryption) == 72);
    assert!(size_of::<S3AclGrant>() == 264);
    assert!(size_of::<BucketContext>() == 40);
    assert!(size_of::<BucketContext4>() == 56);
    assert!(offset_of!(BucketContext4, auth_region) == 48);
    assert!(size_of::<PutProperties>() == 64);
    assert!(size_of::<PutProperties4>() == 72);
    assert!(offset_of!(PutProperties4, use_server_side_encryption) == 64);
    assert!(size_of::<S3GetConditions>() == 32);
    assert!(size_of::<S3ErrorDetails>() == 40);
    assert!(size_of::<S3ListBucketContent>() == 48);
    assert!(size_of::<S3ListMultipartUpload>() == 64);
    assert!(size_of::<S3ListPart>() == 32);
    assert!(size_of::<S3PutObjectHandler>() == 24);
    assert!(size_of::<S3MultipartCommitHandler>() == 32);
    assert!(size_of::<S3AbortMultipartUploadHandler>() == 16);
};
