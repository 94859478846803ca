//! The multipart calls of libs3 4.x: initiate, upload a part (its body pulled from the data
//! callback), complete (the caller hands the CompleteMultipartUpload XML through a data
//! callback, as it would send it over HTTP), abort, and the two listings. The callbacks come
//! in libs3's order: properties, complete, then the handler's result callback.

use std::ffi::{CString, c_char, c_int, c_void};

use isthmus_store::multipart::MAX_PART_NUMBER;
use isthmus_store::{CompletedPart, ListPartsRequest, ListUploadsRequest, PartRequest};

use crate::abi::{
    BucketContext, PutProperties, S3AbortMultipartUploadHandler, S3ListMultipartUpload, S3ListMultipartUploadsHandler,
    S3ListPart, S3ListPartsHandler, S3MultipartCommitHandler, S3MultipartInitialHandler, S3PutObjectHandler,
};
use crate::drive::{
    boundary, callback_result, finish, properties, pull, put_request, required, response_of, serve, text, unix_seconds,
};
use crate::engine::{bucket_of, cx};
use crate::face::{Face, Failure};

/// The largest CompleteMultipartUpload document taken (10,000 parts with long ETags fit).
const MAX_COMPLETE_XML: c_int = 4 << 20;

/// S3_initiate_multipart: properties, complete, then the upload id to the handler's callback
/// (valid during that callback only, as in libs3).
///
/// # Safety
/// `ctx`, `props` and `handler` are null or valid; `key` is null or a valid C string.
pub unsafe fn initiate(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    props: *const PutProperties,
    handler: *const S3MultipartInitialHandler,
    data: *mut c_void,
) {
    boundary((), || {
        let mut upload_id = None;
        let call = || {
            // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
            let (store, bucket) = unsafe { bucket_of(ctx) }?;
            // SAFETY: `key` is null or a valid C string (this function's contract).
            let key = unsafe { required(key, "key") }?;
            // SAFETY: `props` is null or valid put properties (this function's contract).
            let id = store.create_multipart_upload(&cx(), bucket, key, unsafe { put_request(props) })?;
            upload_id = Some(CString::new(id).unwrap_or_default());
            Ok(())
        };
        // SAFETY: the caller's handler and callback data, per this function's contract.
        unsafe { finish(face, response_of(handler), data, call) };
        // SAFETY: the caller's handler; the upload id outlives the callback.
        if let (Some(id), Some(cb)) = (upload_id, unsafe { handler.as_ref() }.and_then(|h| h.upload_id)) {
            // SAFETY: the caller's callback, called with its own data; what it is given outlives the call.
            unsafe { cb(id.as_ptr(), data) };
        }
    })
}

/// A part number libs3 passes as an int, checked against S3's range.
fn part_number(seq: c_int) -> Result<u32, Failure> {
    u32::try_from(seq).ok().filter(|n| (1..=MAX_PART_NUMBER).contains(n)).ok_or_else(|| {
        Failure::new("ErrorInvalidArgument", format!("part number {seq} is not in 1..={MAX_PART_NUMBER}"))
    })
}

/// A length libs3 passes as an int, checked not negative.
fn length(n: c_int, what: &str) -> Result<u64, Failure> {
    u64::try_from(n).map_err(|_| Failure::new("ErrorInvalidArgument", format!("negative {what} {n}")))
}

/// S3_upload_part: `part_length` bytes pulled from the data callback; the part's ETag reaches
/// the caller through the properties callback.
///
/// # Safety
/// `ctx`, `handler` are null or valid; `key`, `upload_id` null or valid C strings.
#[allow(clippy::too_many_arguments)]
pub unsafe fn upload_part(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    handler: *const S3PutObjectHandler,
    seq: c_int,
    upload_id: *const c_char,
    part_length: c_int,
    data: *mut c_void,
) {
    let response = response_of(handler);
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        // SAFETY: `key` is null or a valid C string; `upload_id` is null or a valid C string (this function's contract).
        let (key, id) = unsafe { (required(key, "key")?, required(upload_id, "upload id")?) };
        let length = length(part_length, "part length")?;
        let request = PartRequest { part_number: part_number(seq)?, size_hint: Some(length), ..Default::default() };
        let mut writer = store.upload_part(&cx(), bucket, key, id, &request)?;
        // SAFETY: the handler's data callback may be called with `data` (this function's contract).
        unsafe { pull(length, handler.as_ref().and_then(|h| h.data), data, |b| Ok(writer.write_all(b)?)) }?;
        let info = writer.commit()?;
        // SAFETY: the handler is null or valid, its callbacks callable with `data` (this function's contract).
        unsafe { properties(response, data, &info, 0) }
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response, data, call) }
}

/// The parts a CompleteMultipartUpload document names.
fn completed_parts(xml: &str) -> Result<Vec<CompletedPart>, Failure> {
    let malformed = |why: String| Failure::new("ErrorMalformedXML", why);
    let doc = roxmltree::Document::parse(xml).map_err(|e| malformed(format!("CompleteMultipartUpload: {e}")))?;
    let child = |node: roxmltree::Node, name: &str| {
        node.children().find(|c| c.tag_name().name() == name).and_then(|c| c.text()).map(str::trim).map(str::to_string)
    };
    doc.root_element()
        .children()
        .filter(|n| n.tag_name().name() == "Part")
        .map(|part| {
            let number = child(part, "PartNumber").and_then(|n| n.parse().ok());
            match (number, child(part, "ETag")) {
                (Some(part_number), Some(etag)) => Ok(CompletedPart { part_number, etag, checksum: None }),
                _ => Err(malformed("a Part without a PartNumber or an ETag".into())),
            }
        })
        .collect()
}

/// S3_complete_multipart_upload: `xml_length` bytes of CompleteMultipartUpload XML pulled from
/// the handler's data callback; properties, complete, then the location ("/bucket/key") and
/// the object's quoted ETag to the handler's result callback.
///
/// # Safety
/// `ctx`, `handler` are null or valid; `key`, `upload_id` null or valid C strings.
#[allow(clippy::too_many_arguments)]
pub unsafe fn complete_upload(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    handler: *const S3MultipartCommitHandler,
    upload_id: *const c_char,
    xml_length: c_int,
    data: *mut c_void,
) {
    let response = response_of(handler);
    boundary((), || {
        let mut done = None;
        let call = || {
            // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
            let (store, bucket) = unsafe { bucket_of(ctx) }?;
            // SAFETY: `key` is null or a valid C string; `upload_id` is null or a valid C string (this function's contract).
            let (key, id) = unsafe { (required(key, "key")?, required(upload_id, "upload id")?) };
            if !(0..=MAX_COMPLETE_XML).contains(&xml_length) {
                return Err(Failure::new("XmlDocumentTooLarge", format!("{xml_length} bytes of XML")));
            }
            let mut xml = Vec::new();
            // SAFETY: `handler` is null or a valid handler (this function's contract).
            let source = unsafe { handler.as_ref() }.and_then(|h| h.data);
            // SAFETY: the handler's data callback may be called with `data` (this function's contract).
            unsafe {
                pull(xml_length as u64, source, data, |b| {
                    xml.extend_from_slice(b);
                    Ok(())
                })
            }?;
            let xml = String::from_utf8(xml).map_err(|_| Failure::new("ErrorMalformedXML", "the XML is not UTF-8"))?;
            let parts = completed_parts(&xml)?;
            let info = store.complete_multipart_upload(&cx(), bucket, key, id, &parts, Default::default())?;
            // SAFETY: the handler is null or valid, its callbacks callable with `data` (this function's contract).
            unsafe { properties(response, data, &info, 0) }?;
            let location = CString::new(format!("/{bucket}/{key}")).unwrap_or_default();
            let etag = CString::new(format!("\"{}\"", info.etag)).unwrap_or_default();
            done = Some((location, etag));
            Ok(())
        };
        // SAFETY: the caller's handler and callback data, per this function's contract.
        unsafe { finish(face, response, data, call) };
        // SAFETY: the caller's handler; the strings outlive the callback.
        if let (Some((location, etag)), Some(cb)) = (done, unsafe { handler.as_ref() }.and_then(|h| h.committed)) {
            // SAFETY: the caller's callback, called with its own data; what it is given outlives the call.
            unsafe { cb(location.as_ptr(), etag.as_ptr(), data) };
        }
    })
}

/// S3_abort_multipart_upload. libs3 passes no callback data: the properties callback gets a
/// null one, and the complete callback is not called (as in libs3); a failure is printed to
/// stderr (libs3 prints the status even on success).
///
/// # Safety
/// `ctx`, `handler` are null or valid; `key`, `upload_id` null or valid C strings.
pub unsafe fn abort(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    upload_id: *const c_char,
    handler: *const S3AbortMultipartUploadHandler,
) {
    boundary((), || {
        let result = isthmus_session::door::guard(|| -> Result<(), Failure> {
            // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
            let (store, bucket) = unsafe { bucket_of(ctx) }?;
            // SAFETY: `key` is null or a valid C string; `upload_id` is null or a valid C string (this function's contract).
            let (key, id) = unsafe { (required(key, "key")?, required(upload_id, "upload id")?) };
            store.abort_multipart_upload(&cx(), bucket, key, id)?;
            // SAFETY: `handler` is null or a valid handler (this function's contract).
            if let Some(cb) = unsafe { handler.as_ref() }.and_then(|h| h.response.properties) {
                let none = std::ptr::null();
                // SAFETY: the caller's callback, called with its own data; what it is given outlives the call.
                callback_result(unsafe { cb(none, std::ptr::null_mut()) }, "the properties callback stopped")?;
            }
            Ok(())
        });
        if let Err(failure) = result {
            eprintln!("\nERROR: {}: {}", face.name_of(&failure.code), failure.message);
        }
    })
}

/// S3_list_parts: one callback with the page. `lastPartNumber` is the number of parts earlier
/// callbacks of this call delivered (always 0: one callback per call).
///
/// # Safety
/// `ctx`, `handler` are null or valid; the strings are null or valid C strings.
#[allow(clippy::too_many_arguments)]
pub unsafe fn list_parts(
    face: &Face,
    ctx: *const BucketContext,
    key: *const c_char,
    part_number_marker: *const c_char,
    upload_id: *const c_char,
    max_parts: c_int,
    handler: *const S3ListPartsHandler,
    data: *mut c_void,
) {
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        // SAFETY: `key` is null or a valid C string; `upload_id` is null or a valid C string (this function's contract).
        let (key, id) = unsafe { (required(key, "key")?, required(upload_id, "upload id")?) };
        // SAFETY: `part_number_marker` is null or a valid C string (this function's contract).
        let after_part = match unsafe { text(part_number_marker) }.filter(|m| !m.is_empty()) {
            None => 0,
            Some(m) => {
                m.parse().map_err(|_| Failure::new("ErrorInvalidArgument", format!("part number marker {m:?}")))?
            }
        };
        let max_parts = if max_parts > 0 { (max_parts as usize).min(1000) } else { 1000 };
        let page = store.list_parts(&cx(), bucket, key, id, &ListPartsRequest { after_part, max_parts })?;
        // SAFETY: `handler` is null or a valid handler (this function's contract).
        let Some(cb) = unsafe { handler.as_ref() }.and_then(|h| h.list) else { return Ok(()) };
        let etags: Vec<CString> =
            page.parts.iter().map(|p| CString::new(format!("\"{}\"", p.etag)).unwrap_or_default()).collect();
        let parts: Vec<S3ListPart> = page
            .parts
            .iter()
            .zip(&etags)
            .map(|(p, e)| S3ListPart {
                e_tag: e.as_ptr(),
                last_modified: unix_seconds(p.last_modified),
                part_number: u64::from(p.part_number),
                size: p.size,
            })
            .collect();
        let next =
            CString::new(page.next_part_number_marker.map(|n| n.to_string()).unwrap_or_default()).unwrap_or_default();
        let owner = c"isthmus".as_ptr();
        // SAFETY: the caller's callback; every pointer it gets outlives the call.
        let code = unsafe {
            cb(
                c_int::from(page.is_truncated),
                next.as_ptr(),
                owner,
                owner,
                owner,
                owner,
                c"STANDARD".as_ptr(),
                parts.len() as c_int,
                0,
                parts.as_ptr(),
                data,
            )
        };
        callback_result(code, "the listing callback stopped")
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response_of(handler), data, call) }
}

/// S3_list_multipart_uploads: one callback with the page (the delimiter and the encoding type
/// are not used: no common prefixes are reported).
///
/// # Safety
/// `ctx`, `handler` are null or valid; the strings are null or valid C strings.
#[allow(clippy::too_many_arguments)]
pub unsafe fn list_uploads(
    face: &Face,
    ctx: *const BucketContext,
    prefix: *const c_char,
    key_marker: *const c_char,
    upload_id_marker: *const c_char,
    max_uploads: c_int,
    handler: *const S3ListMultipartUploadsHandler,
    data: *mut c_void,
) {
    let call = || {
        // SAFETY: `ctx` is null or a valid bucket context (this function's contract).
        let (store, bucket) = unsafe { bucket_of(ctx) }?;
        // SAFETY: `prefix` and the markers are null or valid C strings (this function's contract).
        let given = |p| unsafe { text(p) }.filter(|m: &&str| !m.is_empty()).map(str::to_string);
        let request = ListUploadsRequest {
            prefix: given(prefix).unwrap_or_default(),
            key_marker: given(key_marker),
            upload_id_marker: given(upload_id_marker),
            max_uploads: if max_uploads > 0 { (max_uploads as usize).min(1000) } else { 1000 },
        };
        let page = store.list_multipart_uploads(&cx(), bucket, &request)?;
        // SAFETY: `handler` is null or a valid handler (this function's contract).
        let Some(cb) = unsafe { handler.as_ref() }.and_then(|h| h.list) else { return Ok(()) };
        let cstr = |s: &str| CString::new(s).unwrap_or_default();
        let names: Vec<(CString, CString)> = page.uploads.iter().map(|u| (cstr(&u.key), cstr(&u.upload_id))).collect();
        let owner = c"isthmus".as_ptr();
        let uploads: Vec<S3ListMultipartUpload> = page
            .uploads
            .iter()
            .zip(&names)
            .map(|(u, (k, id))| S3ListMultipartUpload {
                key: k.as_ptr(),
                upload_id: id.as_ptr(),
                initiator_id: owner,
                initiator_display_name: owner,
                owner_id: owner,
                owner_display_name: owner,
                storage_class: c"STANDARD".as_ptr(),
                initiated: unix_seconds(u.initiated),
            })
            .collect();
        let next_key = cstr(page.next_key_marker.as_deref().unwrap_or_default());
        let next_id = cstr(page.next_upload_id_marker.as_deref().unwrap_or_default());
        // SAFETY: the caller's callback; every pointer it gets outlives the call.
        let code = unsafe {
            cb(
                c_int::from(page.is_truncated),
                next_key.as_ptr(),
                next_id.as_ptr(),
                uploads.len() as c_int,
                uploads.as_ptr(),
                0,
                std::ptr::null(),
                data,
            )
        };
        callback_result(code, "the listing callback stopped")
    };
    // SAFETY: the caller's handler and callback data, per this function's contract.
    unsafe { serve(face, response_of(handler), data, call) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_complete_document_names_its_parts() {
        let xml = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag></Part>\
                   <Part><PartNumber> 2 </PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>";
        let parts = completed_parts(xml).unwrap();
        assert_eq!(
            parts.iter().map(|p| (p.part_number, p.etag.as_str())).collect::<Vec<_>>(),
            [(1, "\"a\""), (2, "b")]
        );
        assert!(
            completed_parts("<CompleteMultipartUpload><Part><ETag>x</ETag></Part></CompleteMultipartUpload>").is_err()
        );
        assert!(completed_parts("<not xml").is_err());
        assert!(part_number(0).is_err() && part_number(10_001).is_err() && part_number(1).is_ok());
        assert!(length(-1, "part length").is_err());
    }
}
