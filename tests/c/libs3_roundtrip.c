/* A program built against Debian's libs3 (SigV2): creates a bucket, puts an object, gets it
 * back, lists it and deletes it. Endpoint and keys from S3_HOSTNAME, S3_ACCESS_KEY_ID and
 * S3_SECRET_ACCESS_KEY; the bucket name is argv[1]. Exits non-zero on the first failure. */
#include <libs3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static S3Status last_status;
static char payload[] = "written through libs3, read back through libs3";
static size_t put_offset;
static char got[256];
static size_t got_len;
static int listed;

static S3Status on_properties(const S3ResponseProperties *p, void *data) {
    (void)p; (void)data;
    return S3StatusOK;
}

static void on_complete(S3Status status, const S3ErrorDetails *error, void *data) {
    (void)data;
    last_status = status;
    if (status != S3StatusOK && error && error->message)
        fprintf(stderr, "error: %s\n", error->message);
}

static int put_data(int size, char *buffer, void *data) {
    (void)data;
    size_t left = strlen(payload) - put_offset;
    size_t n = left < (size_t)size ? left : (size_t)size;
    memcpy(buffer, payload + put_offset, n);
    put_offset += n;
    return (int)n;
}

static S3Status get_data(int size, const char *buffer, void *data) {
    (void)data;
    if (got_len + (size_t)size >= sizeof got) return S3StatusAbortedByCallback;
    memcpy(got + got_len, buffer, (size_t)size);
    got_len += (size_t)size;
    return S3StatusOK;
}

static S3Status on_list(int truncated, const char *next, int count, const S3ListBucketContent *contents,
                        int prefixes, const char **common, void *data) {
    (void)truncated; (void)next; (void)prefixes; (void)common; (void)data;
    for (int i = 0; i < count; i++)
        if (strcmp(contents[i].key, "dir/object.txt") == 0 && contents[i].size == strlen(payload)) listed = 1;
    return S3StatusOK;
}

static void check(const char *what) {
    if (last_status != S3StatusOK) {
        fprintf(stderr, "%s failed: %s\n", what, S3_get_status_name(last_status));
        exit(1);
    }
    printf("%s ok\n", what);
}

int main(int argc, char **argv) {
    const char *host = getenv("S3_HOSTNAME"), *key = getenv("S3_ACCESS_KEY_ID"), *secret = getenv("S3_SECRET_ACCESS_KEY");
    if (argc != 2 || !host || !key || !secret) {
        fprintf(stderr, "usage: S3_HOSTNAME=h:p S3_ACCESS_KEY_ID=.. S3_SECRET_ACCESS_KEY=.. %s BUCKET\n", argv[0]);
        return 2;
    }
    if (S3_initialize("isthmus-test", S3_INIT_ALL, host) != S3StatusOK) return 1;
    S3ResponseHandler response = {on_properties, on_complete};
    S3_create_bucket(S3ProtocolHTTP, key, secret, host, argv[1], S3CannedAclPrivate, NULL, NULL, &response, NULL);
    check("create bucket");
    S3BucketContext ctx = {host, argv[1], S3ProtocolHTTP, S3UriStylePath, key, secret};
    S3PutObjectHandler put = {response, put_data};
    S3_put_object(&ctx, "dir/object.txt", strlen(payload), NULL, NULL, &put, NULL);
    check("put object");
    S3GetObjectHandler get = {response, get_data};
    S3_get_object(&ctx, "dir/object.txt", NULL, 0, 0, NULL, &get, NULL);
    check("get object");
    if (got_len != strlen(payload) || memcmp(got, payload, got_len) != 0) {
        fprintf(stderr, "content differs\n");
        return 1;
    }
    S3ListBucketHandler list = {response, on_list};
    S3_list_bucket(&ctx, "dir/", NULL, NULL, 100, NULL, &list, NULL);
    check("list bucket");
    if (!listed) {
        fprintf(stderr, "object not listed\n");
        return 1;
    }
    S3_delete_object(&ctx, "dir/object.txt", NULL, &response, NULL);
    check("delete object");
    S3_delete_bucket(S3ProtocolHTTP, S3UriStylePath, key, secret, host, argv[1], NULL, &response, NULL);
    check("delete bucket");
    S3_deinitialize();
    return 0;
}
