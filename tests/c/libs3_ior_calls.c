/* Drives libs3 the way IOR's S3-libs3 backend (hpc/ior src/aiori-S3-libs3.c) does: one global
 * status that starts as Interrupted, a properties callback that sets OK, a complete callback
 * that stores the status and keeps the error details' pointers (read after the call returns);
 * path-style bucket context, no request context, timeout 0. Then what IOR does not use: the
 * error paths, a request context and, against a libs3 4.x header, multipart uploads and
 * ranged copies.
 *
 * Builds against the Isthmus 4.x header (crates/libs3-4/include, which defines ISTHMUS_LIBS3)
 * or Debian's libs3 2.0 header; the 2.0 build leaves out what 2.0 lacks.
 *
 * usage: libs3_ior_calls HOST BUCKET [denied]
 * Prints "ok <step>" per step; exits 1 at the first failure. "denied": only checks that
 * listing the service is refused with ErrorAccessDenied (a caller the gateway maps to no user). */
#include <libs3.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ISTHMUS_LIBS3
#define TOKEN NULL,
#define REGION(r) r,
#define TIMEOUT 0,
#else
#define TOKEN
#define REGION(r)
#define TIMEOUT
#endif

static S3Status s3status = S3StatusInterrupted;
static S3ErrorDetails s3error;
static S3BucketContext bucket_context;
static const char *host;
static int64_t last_modified;
static uint64_t content_length;
static char etag[128];

static void fail(const char *what) {
    fprintf(stderr, "FAILED %s: %d %s (%s)\n", what, (int)s3status, S3_get_status_name(s3status),
            s3error.message ? s3error.message : "no message");
    exit(1);
}

#define CHECK(cond, what)              \
    do {                               \
        if (!(cond)) fail(what);       \
        printf("ok %s\n", what);       \
        fflush(stdout);                \
    } while (0)

/* The status must be `expected`, and the error message (kept after the call) readable. */
static void expect_error(S3Status expected, const char *what) {
    if (s3status != expected) {
        fprintf(stderr, "expected %s\n", S3_get_status_name(expected));
        fail(what);
    }
    if (!s3error.message || !s3error.message[0]) fail("an error message that outlives the call");
    printf("ok %s -> %s: %s\n", what, S3_get_status_name(s3status), s3error.message);
}

/* IOR's callbacks. */
static S3Status properties_cb(const S3ResponseProperties *p, void *data) {
    (void)data;
    s3status = S3StatusOK;
    if (p) {
        content_length = p->contentLength;
        last_modified = p->lastModified;
        snprintf(etag, sizeof etag, "%s", p->eTag ? p->eTag : "");
    }
    return S3StatusOK;
}

static void complete_cb(S3Status status, const S3ErrorDetails *error, void *data) {
    (void)data;
    s3status = status;
    if (error) s3error = *error;
    else s3error.message = NULL;
}

static S3ResponseHandler response_handler = {&properties_cb, &complete_cb};

/* Object bytes: a pattern of the object's name and the offset, so a range can be checked. */
static unsigned char byte_at(const char *key, uint64_t offset) {
    return (unsigned char)(key[offset % strlen(key)] + offset * 7 + (offset >> 12));
}

struct transfer {
    const char *key;
    uint64_t offset, length, done;
    int calls;
    int mismatch;
    int abort_after;
};

static int put_data_cb(int size, char *buf, void *data) {
    struct transfer *t = data;
    uint64_t n = t->length - t->done;
    if (n > (uint64_t)size) n = (uint64_t)size;
    for (uint64_t i = 0; i < n; i++) buf[i] = (char)byte_at(t->key, t->offset + t->done + i);
    t->done += n;
    t->calls++;
    return (int)n;
}

static S3Status get_data_cb(int size, const char *buf, void *data) {
    struct transfer *t = data;
    t->calls++;
    if (t->abort_after && t->calls >= t->abort_after) return S3StatusAbortedByCallback;
    uint64_t n = t->length - t->done;
    if (n > (uint64_t)size) n = (uint64_t)size; /* IOR drops what is beyond its buffer */
    for (uint64_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] != byte_at(t->key, t->offset + t->done + i)) t->mismatch = 1;
    t->done += n;
    return S3StatusOK;
}

static void put(const char *key, uint64_t length, S3RequestContext *ctx) {
    struct transfer t = {key, 0, length, 0, 0, 0, 0};
    S3PutObjectHandler h = {response_handler, &put_data_cb};
    s3status = S3StatusInterrupted;
    S3_put_object(&bucket_context, key, length, NULL, ctx, TIMEOUT &h, &t);
    if (s3status != S3StatusOK || t.done != length) fail(key);
    if (length > (1 << 20) && t.calls < 2) fail("the body pulled in several chunks");
}

static void get_range(const char *key, uint64_t offset, uint64_t length, S3RequestContext *ctx) {
    struct transfer t = {key, offset, length, 0, 0, 0, 0};
    S3GetObjectHandler h = {response_handler, &get_data_cb};
    s3status = S3StatusInterrupted;
    S3_get_object(&bucket_context, key, NULL, offset, length, ctx, TIMEOUT &h, &t);
    if (s3status != S3StatusOK || t.done != length || t.mismatch) fail("get: the bytes written come back");
}

static void head(const char *key) {
    s3status = S3StatusInterrupted;
    content_length = (uint64_t)-1;
    S3_head_object(&bucket_context, key, NULL, TIMEOUT &response_handler, NULL);
}

static void delete_object(const char *key) {
    s3status = S3StatusInterrupted;
    S3_delete_object(&bucket_context, key, NULL, TIMEOUT &response_handler, NULL);
}

/* mdtest's statfs: count the buckets. */
static int buckets_seen, own_bucket_seen, host_bucket_seen;
static S3Status list_service_cb(const char *owner, const char *name_, const char *bucket, int64_t created, void *data) {
    (void)owner; (void)name_; (void)created;
    (*(int *)data)++;
    if (strcmp(bucket, bucket_context.bucketName) == 0) own_bucket_seen = 1;
    if (strcmp(bucket, "isthmus") == 0) host_bucket_seen = 1;
    return S3StatusOK;
}

static void list_service(void) {
    S3ListServiceHandler h = {response_handler, &list_service_cb};
    s3status = S3StatusInterrupted;
    buckets_seen = own_bucket_seen = host_bucket_seen = 0;
    S3_list_service(S3ProtocolHTTP, "", "", TOKEN host, REGION(NULL) NULL, TIMEOUT &h, &buckets_seen);
}

/* IOR's removal: the listing callback deletes each key it is given (a call from inside a
 * callback), and keeps the next marker's pointer to use after the call has returned. */
struct removal {
    int truncated;
    const char *next;
    int deleted, pages, max_page;
};

static S3Status remove_cb(int truncated, const char *next, int count, const S3ListBucketContent *contents,
                          int prefixes, const char **common, void *data) {
    (void)prefixes; (void)common;
    struct removal *r = data;
    if (next == NULL) {
        fprintf(stderr, "nextMarker is NULL\n");
        return S3StatusAbortedByCallback;
    }
    r->truncated = truncated;
    r->next = truncated ? next : NULL;
    r->pages++;
    if (count > r->max_page) r->max_page = count;
    for (int i = 0; i < count; i++) {
        S3Status outer = s3status;
        delete_object(contents[i].key);
        if (s3status != S3StatusOK) return s3status;
        r->deleted++;
        s3status = outer;
    }
    return S3StatusOK;
}

/* IOR asks for INT_MAX keys (a page of at most 1000); `max_keys` smaller makes pages here. */
static int remove_with_prefix(const char *prefix, int max_keys, struct removal *r) {
    S3ListBucketHandler h = {response_handler, &remove_cb};
    const char *marker = NULL;
    do {
        s3status = S3StatusInterrupted;
        S3_list_bucket(&bucket_context, prefix, marker, NULL, max_keys, NULL, TIMEOUT &h, r);
        if (s3status != S3StatusOK) return 0;
        marker = r->next; /* read after the call returned, as IOR does */
    } while (r->truncated);
    return 1;
}

/* A plain listing: keys counted, the first one kept. */
static int listed;
static char first_key[256];
static S3Status count_cb(int truncated, const char *next, int count, const S3ListBucketContent *contents,
                         int prefixes, const char **common, void *data) {
    (void)truncated; (void)next; (void)prefixes; (void)common; (void)data;
    if (count > 0 && listed == 0) snprintf(first_key, sizeof first_key, "%s", contents[0].key);
    listed += count;
    return S3StatusOK;
}

static int list_count(const char *prefix, const char *marker) {
    S3ListBucketHandler h = {response_handler, &count_cb};
    listed = 0;
    first_key[0] = 0;
    s3status = S3StatusInterrupted;
    S3_list_bucket(&bucket_context, prefix, marker, NULL, INT_MAX, NULL, TIMEOUT &h, NULL);
    return listed;
}

#ifdef ISTHMUS_LIBS3
/* ---- Multipart (libs3 4.x only) ---- */
static char upload_id[256];
static int order, completed_at, upload_id_at;
static void mp_complete_cb(S3Status status, const S3ErrorDetails *error, void *data) {
    complete_cb(status, error, data);
    completed_at = ++order;
}
static S3Status initial_cb(const char *id, void *data) {
    (void)data;
    snprintf(upload_id, sizeof upload_id, "%s", id);
    upload_id_at = ++order;
    return S3StatusOK;
}

static void initiate(const char *key) {
    S3MultipartInitialHandler h = {{&properties_cb, &mp_complete_cb}, &initial_cb};
    s3status = S3StatusInterrupted;
    upload_id[0] = 0;
    S3_initiate_multipart(&bucket_context, key, NULL, &h, NULL, 0, NULL);
    if (s3status != S3StatusOK || !upload_id[0] || upload_id_at <= completed_at) fail("initiate: id after complete");
}

static char part_etags[3][128];
static void upload_part(const char *key, int number, const char *pattern, uint64_t length) {
    struct transfer t = {pattern, 0, length, 0, 0, 0, 0};
    S3PutObjectHandler h = {response_handler, &put_data_cb};
    s3status = S3StatusInterrupted;
    etag[0] = 0;
    S3_upload_part(&bucket_context, key, NULL, &h, number, upload_id, (int)length, NULL, 0, &t);
    if (s3status != S3StatusOK || !etag[0]) fail("upload part: its ETag in the properties");
    snprintf(part_etags[number], sizeof part_etags[number], "%s", etag);
}

static int parts_listed;
static uint64_t parts_bytes;
static S3Status parts_cb(int truncated, const char *next, const char *initiator, const char *initiator_name,
                         const char *owner, const char *owner_name, const char *storage, int count, int handled,
                         const S3ListPart *parts, void *data) {
    (void)truncated; (void)next; (void)initiator; (void)initiator_name; (void)owner; (void)owner_name;
    (void)storage; (void)handled; (void)data;
    for (int i = 0; i < count; i++) {
        parts_listed++;
        parts_bytes += parts[i].size;
        if (strcmp(parts[i].eTag, part_etags[parts[i].partNumber]) != 0) return S3StatusAbortedByCallback;
    }
    return S3StatusOK;
}

static void list_parts(const char *key) {
    S3ListPartsHandler h = {response_handler, &parts_cb};
    parts_listed = 0;
    parts_bytes = 0;
    s3status = S3StatusInterrupted;
    S3_list_parts(&bucket_context, key, NULL, upload_id, NULL, 0, NULL, 0, &h, NULL);
}

static int uploads_seen;
static S3Status uploads_cb(int truncated, const char *next_key, const char *next_id, int count,
                           const S3ListMultipartUpload *uploads, int prefixes, const char **common, void *data) {
    (void)truncated; (void)next_key; (void)next_id; (void)prefixes; (void)common; (void)data;
    for (int i = 0; i < count; i++)
        if (strcmp(uploads[i].uploadId, upload_id) == 0) uploads_seen++;
    return S3StatusOK;
}

static void list_uploads(void) {
    S3ListMultipartUploadsHandler h = {response_handler, &uploads_cb};
    uploads_seen = 0;
    s3status = S3StatusInterrupted;
    S3_list_multipart_uploads(&bucket_context, "mp", NULL, NULL, NULL, NULL, 0, NULL, 0, &h, NULL);
}

static char xml[1024];
static size_t xml_sent;
static int xml_cb(int size, char *buf, void *data) {
    (void)data;
    size_t n = strlen(xml) - xml_sent;
    if (n > (size_t)size) n = (size_t)size;
    memcpy(buf, xml + xml_sent, n);
    xml_sent += n;
    return (int)n;
}
static char committed_location[512], committed_etag[128];
static S3Status commit_cb(const char *location, const char *etag_, void *data) {
    (void)data;
    snprintf(committed_location, sizeof committed_location, "%s", location);
    snprintf(committed_etag, sizeof committed_etag, "%s", etag_);
    return S3StatusOK;
}

static void complete_upload(const char *key, int parts) {
    int n = snprintf(xml, sizeof xml, "<CompleteMultipartUpload>");
    for (int i = 1; i <= parts; i++)
        n += snprintf(xml + n, sizeof xml - (size_t)n, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i,
                      part_etags[i]);
    snprintf(xml + n, sizeof xml - (size_t)n, "</CompleteMultipartUpload>");
    xml_sent = 0;
    committed_etag[0] = 0;
    S3MultipartCommitHandler h = {response_handler, &xml_cb, &commit_cb};
    s3status = S3StatusInterrupted;
    S3_complete_multipart_upload(&bucket_context, key, &h, upload_id, (int)strlen(xml), NULL, 0, NULL);
}

/* The object of parts written with pattern `a` (5 MiB) then `b` (1 KiB) reads back as them. */
static void check_two_parts(const char *key, const char *a, const char *b) {
    struct transfer first = {a, 0, 5 << 20, 0, 0, 0, 0}, second = {b, 0, 1024, 0, 0, 0, 0};
    S3GetObjectHandler h = {response_handler, &get_data_cb};
    S3_get_object(&bucket_context, key, NULL, 0, 5 << 20, NULL, 0, &h, &first);
    if (s3status != S3StatusOK || first.done != (5 << 20) || first.mismatch) fail("the first part reads back");
    S3_get_object(&bucket_context, key, NULL, 5 << 20, 0, NULL, 0, &h, &second);
    if (s3status != S3StatusOK || second.done != 1024 || second.mismatch) fail("the last part reads back");
}

static void multipart(void) {
    initiate("mp/object");
    CHECK(1, "initiate multipart (properties, complete, then the upload id)");
    upload_part("mp/object", 1, "part-one", 5 << 20);
    upload_part("mp/object", 2, "part-two", 1024);
    CHECK(1, "upload two parts, ETags through the properties callback");
    list_parts("mp/object");
    CHECK(s3status == S3StatusOK && parts_listed == 2 && parts_bytes == (5 << 20) + 1024, "list parts");
    list_uploads();
    CHECK(s3status == S3StatusOK && uploads_seen == 1, "list multipart uploads");
    complete_upload("mp/object", 2);
    CHECK(s3status == S3StatusOK && strstr(committed_location, "mp/object") && committed_etag[0] == '"' &&
              strstr(committed_etag, "-2\""),
          "complete multipart (XML through the data callback; location and ETag after complete)");
    check_two_parts("mp/object", "part-one", "part-two");
    CHECK(1, "the completed object reads back part by part");
    head("mp/object");
    CHECK(s3status == S3StatusOK && content_length == (5 << 20) + 1024, "head the completed object");

    /* An aborted upload is gone. */
    initiate("mp/aborted");
    upload_part("mp/aborted", 1, "lost", 100);
    S3AbortMultipartUploadHandler ah = {{&properties_cb, &complete_cb}};
    s3status = S3StatusInterrupted;
    S3_abort_multipart_upload(&bucket_context, "mp/aborted", upload_id, 0, &ah);
    CHECK(s3status == S3StatusOK, "abort (the properties callback, no complete callback, as libs3)");
    list_uploads();
    CHECK(s3status == S3StatusOK && uploads_seen == 0, "the aborted upload is no longer listed");
    list_parts("mp/aborted");
    expect_error(S3StatusErrorNoSuchUpload, "list parts of an aborted upload");
    complete_upload("mp/aborted", 1);
    expect_error(S3StatusErrorNoSuchUpload, "complete an aborted upload");

    /* A ranged copy into a part, then a small uploaded part. */
    initiate("mp/copied");
    char copy_etag[128] = "";
    int64_t copy_time = 0;
    s3status = S3StatusInterrupted;
    S3_copy_object_range(&bucket_context, "mp/object", NULL, "mp/copied", 1, upload_id, 0, 5 << 20, NULL, &copy_time,
                         sizeof copy_etag, copy_etag, NULL, 0, &response_handler, NULL);
    CHECK(s3status == S3StatusOK && copy_etag[0] == '"' && copy_time > 0, "copy a range into part 1");
    snprintf(part_etags[1], sizeof part_etags[1], "%s", copy_etag);
    upload_part("mp/copied", 2, "part-three", 1024);
    complete_upload("mp/copied", 2);
    CHECK(s3status == S3StatusOK, "complete the upload made of a copied range");
    check_two_parts("mp/copied", "part-one", "part-three");
    CHECK(1, "the copied range reads back");

    /* Too small a first part is refused at completion, as S3 does. */
    initiate("mp/small");
    upload_part("mp/small", 1, "tiny", 10);
    upload_part("mp/small", 2, "tiny", 10);
    complete_upload("mp/small", 2);
    expect_error(S3StatusErrorEntityTooSmall, "complete with a first part under 5 MiB");
    S3_abort_multipart_upload(&bucket_context, "mp/small", upload_id, 0, &ah);

    delete_object("mp/object");
    delete_object("mp/copied");
    CHECK(s3status == S3StatusOK, "delete the multipart objects");
}
#endif

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST BUCKET [denied]\n", argv[0]);
        return 2;
    }
    host = argv[1];
    memset(&bucket_context, 0, sizeof bucket_context);
    bucket_context.hostName = host;
    bucket_context.bucketName = argv[2];
    bucket_context.protocol = S3ProtocolHTTP;
    bucket_context.uriStyle = S3UriStylePath;
    bucket_context.accessKeyId = "";
    bucket_context.secretAccessKey = "";

    CHECK(S3_initialize(NULL, S3_INIT_ALL, host) == S3StatusOK, "initialize");
    if (argc > 3 && strcmp(argv[3], "denied") == 0) {
        list_service();
        expect_error(S3StatusErrorAccessDenied, "list the service as a user the gateway does not know");
        S3_deinitialize();
        return 0;
    }

    s3status = S3StatusInterrupted;
    S3_create_bucket(S3ProtocolHTTP, "", "", TOKEN host, argv[2], REGION(NULL) S3CannedAclPrivate, NULL, NULL,
                     TIMEOUT &response_handler, NULL);
    CHECK(s3status == S3StatusOK, "create bucket");
    list_service();
    CHECK(s3status == S3StatusOK && buckets_seen >= 1 && own_bucket_seen && !host_bucket_seen,
          "list service (statfs), and no bucket named after the host");
    s3status = S3StatusInterrupted;
    S3_test_bucket(S3ProtocolHTTP, S3UriStylePath, "", "", TOKEN host, argv[2], REGION(NULL) 0, NULL, NULL,
                   TIMEOUT &response_handler, NULL);
    CHECK(s3status == S3StatusOK, "test bucket");
    s3status = S3StatusInterrupted;
    S3_test_bucket(S3ProtocolHTTP, S3UriStylePath, "", "", TOKEN host, "no-such-bucket-here", REGION(NULL) 0, NULL,
                   NULL, TIMEOUT &response_handler, NULL);
    CHECK(s3status != S3StatusOK, "test a missing bucket fails");

    /* mdtest create: an empty object; IOR's xfer: each transfer its own object. */
    put("file0", 0, NULL);
    head("file0");
    CHECK(s3status == S3StatusOK && content_length == 0 && last_modified > 0, "put and head an empty object");
    const uint64_t size = (5 << 19) + 3; /* 2.5 MiB and a bit: three data callbacks */
    char keys[3][64];
    for (int i = 0; i < 3; i++) {
        if (i == 0) snprintf(keys[i], sizeof keys[i], "obj");
        else snprintf(keys[i], sizeof keys[i], "obj-%llu-%llu", (unsigned long long)(i * size), (unsigned long long)size);
        put(keys[i], size, NULL);
    }
    CHECK(1, "put three objects through the data callback in chunks");
    for (int i = 0; i < 3; i++) {
        head(keys[i]);
        if (s3status != S3StatusOK || content_length != size || last_modified <= 0) fail("head");
    }
    CHECK(1, "head: content length and last modified");
    for (int i = 0; i < 3; i++) get_range(keys[i], 0, size, NULL);
    CHECK(1, "get each object whole (IOR's range 0..length)");
    get_range("obj", 1000, 5000, NULL);
    get_range("obj", size - 10, 10, NULL);
    CHECK(1, "get ranges");

    /* A request context: calls given one complete at once; running it finds nothing to do. */
    S3RequestContext *ctx = NULL;
    CHECK(S3_create_request_context(&ctx) == S3StatusOK && ctx, "create a request context");
    put("with-context", 1000, ctx);
    get_range("with-context", 0, 1000, ctx);
    int remaining = -1;
    CHECK(S3_runall_request_context(ctx) == S3StatusOK &&
              S3_runonce_request_context(ctx, &remaining) == S3StatusOK && remaining == 0,
          "calls with a request context complete at once");
    S3_destroy_request_context(ctx);
    delete_object("with-context");

    /* Listing with a prefix and a marker ("" and NULL both start at the beginning). */
    char key[64];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof key, "obj-frag-%04d", i);
        put(key, 0, NULL);
    }
    int all = list_count("obj-frag-", NULL);
    CHECK(s3status == S3StatusOK && all == 8 && strcmp(first_key, "obj-frag-0000") == 0, "list with a prefix");
    CHECK(list_count("obj-frag-", "") == 8 && strcmp(first_key, "obj-frag-0000") == 0, "an empty marker is none");
    CHECK(list_count("obj-frag-", "obj-frag-0004") == 3 && strcmp(first_key, "obj-frag-0005") == 0,
          "list after a marker");

    /* IOR's delete: the object, then every fragment found by listing its prefix. */
    delete_object("obj");
    CHECK(s3status == S3StatusOK, "delete object");
    struct removal r = {0, NULL, 0, 0, 0};
    CHECK(remove_with_prefix("obj", 3, &r) && r.deleted == 10 && r.pages >= 4 && r.max_page == 3,
          "list with prefix, deleting from the callback and following the next marker after the call");
    CHECK(list_count("obj", NULL) == 0 && s3status == S3StatusOK, "nothing left under the prefix");

    /* Errors. */
    head("no-such-key");
#ifdef ISTHMUS_LIBS3
    expect_error(S3StatusHttpErrorNotFound, "head a missing object");
#else
    expect_error(S3StatusErrorNoSuchKey, "head a missing object");
#endif
    struct transfer t = {"no-such-key", 0, 10, 0, 0, 0, 0};
    S3GetObjectHandler gh = {response_handler, &get_data_cb};
    s3status = S3StatusInterrupted;
    S3_get_object(&bucket_context, "no-such-key", NULL, 0, 10, NULL, TIMEOUT &gh, &t);
    expect_error(S3StatusErrorNoSuchKey, "get a missing object");
    put("big", 3 << 20, NULL);
    struct transfer stop = {"big", 0, 3 << 20, 0, 0, 0, 1};
    s3status = S3StatusInterrupted;
    S3_get_object(&bucket_context, "big", NULL, 0, 0, NULL, TIMEOUT &gh, &stop);
    CHECK(s3status == S3StatusAbortedByCallback && stop.calls == 1, "a data callback stops a get");
    delete_object("big");
    s3status = S3StatusInterrupted;
    S3_delete_bucket(S3ProtocolHTTP, S3UriStylePath, "", "", TOKEN host, argv[2], REGION(NULL) NULL,
                     TIMEOUT &response_handler, NULL);
    expect_error(S3StatusErrorBucketNotEmpty, "delete a bucket that is not empty");
    S3BucketContext elsewhere = bucket_context;
    elsewhere.hostName = "s3.example.com";
    s3status = S3StatusInterrupted;
    S3_head_object(&elsewhere, "file0", NULL, TIMEOUT &response_handler, NULL);
    expect_error(S3StatusNameLookupError, "a host this library does not serve");
    if (!strstr(s3error.message, "isthmus") || !strstr(s3error.message, "unix:")) fail("the refusal says what is served");

#ifdef ISTHMUS_LIBS3
    multipart();
    CHECK(S3_status_is_retryable(S3StatusErrorRequestTimeout) && !S3_status_is_retryable(S3StatusErrorNoSuchKey),
          "retryable statuses as libs3 4.1");
    CHECK(strcmp(S3_get_status_name(S3StatusErrorNoSuchUpload), "ErrorNoSuchUpload") == 0 &&
              strcmp(S3_get_status_name((S3Status)135), "Unknown") == 0,
          "status names by 4.1's numbers");
#endif

    /* Finalize as IOR: remove what is left, delete the bucket, deinitialize. */
    delete_object("file0");
    s3status = S3StatusInterrupted;
    S3_delete_bucket(S3ProtocolHTTP, S3UriStylePath, "", "", TOKEN host, argv[2], REGION(NULL) NULL,
                     TIMEOUT &response_handler, NULL);
    CHECK(s3status == S3StatusOK, "delete bucket");
    S3_deinitialize();
    printf("all done\n");
    return 0;
}
