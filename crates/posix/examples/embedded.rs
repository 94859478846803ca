//! The engine as a library: S3 semantics in-process on a directory, no server.
//! Run: cargo run -p isthmus-posix --example embedded -- /tmp/isthmus-example

use std::io::Read;

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{
    CompletedPart, CopyRequest, GetRequest, ListRequest, MultipartStore, PutRequest, RequestContext, Store, StoreError,
    StoreExt,
};

fn main() -> Result<(), StoreError> {
    let root = std::env::args().nth(1).unwrap_or_else(|| "./example-data".into());
    let store = PosixStore::open(&root, StoreOptions::default())?;
    // Every call says who asks: here the process itself, on a thread that may block.
    let cx = RequestContext::process();
    match store.create_bucket(&cx, "demo", &Default::default()) {
        Ok(()) | Err(StoreError::BucketAlreadyExists) => {}
        Err(err) => return Err(err),
    }

    // A whole object from a buffer; the ETag is the MD5 of the bytes.
    let info = store.put_bytes(&cx, "demo", "runs/001/result.csv", b"t,p\n0,1\n", PutRequest::default())?;
    println!("put {} ({} bytes, ETag {})", info.key, info.size, info.etag);

    // Streaming write: nothing is visible until commit.
    let mut writer = store.put_object(&cx, "demo", "runs/001/log.txt", PutRequest::default())?;
    for line in ["step 1\n", "step 2\n"] {
        writer.write_all(line.as_bytes())?;
    }
    writer.commit()?;

    // Ranged read.
    let request =
        GetRequest { range: Some(isthmus_store::ByteRange::FromTo { first: 0, last: Some(3) }), ..Default::default() };
    let mut head = String::new();
    store.get_object(&cx, "demo", "runs/001/result.csv", &request)?.body.read_to_string(&mut head)?;
    println!("first bytes: {head:?}");

    // Ordered listing with a delimiter.
    let page = store.list_objects(
        &cx,
        "demo",
        &ListRequest { prefix: "runs/".into(), delimiter: Some("/".into()), max_keys: 1000, ..Default::default() },
    )?;
    println!("prefixes under runs/: {:?}", page.common_prefixes);

    // Copy, HEAD, multipart, delete.
    store.copy_object(&cx, ("demo", "runs/001/result.csv"), ("demo", "latest.csv"), &CopyRequest::default())?;
    println!("latest.csv: {} bytes", store.head_object(&cx, "demo", "latest.csv", &Default::default())?.size);
    let upload = store.create_multipart_upload(&cx, "demo", "assembled.bin", PutRequest::default())?;
    let mut part = store.upload_part(
        &cx,
        "demo",
        "assembled.bin",
        &upload,
        &isthmus_store::PartRequest { part_number: 1, ..Default::default() },
    )?;
    part.write_all(b"a single (last) part may be small")?;
    let etag = part.commit()?.etag;
    let done = store.complete_multipart_upload(
        &cx,
        "demo",
        "assembled.bin",
        &upload,
        &[CompletedPart { part_number: 1, etag, checksum: None }],
        PutRequest::default(),
    )?;
    println!("multipart ETag {}", done.etag);
    store.delete_object(&cx, "demo", "latest.csv", &Default::default())?;
    Ok(())
}
