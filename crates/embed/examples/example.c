/* libisthmus example: S3 semantics in-process on a directory, no server, no HTTP.
 * Usage: example ROOT            (creates bucket "embedded" under ROOT)
 * Build: cc example.c $(pkg-config --cflags --libs isthmus) -o example
 * Every call returns an IsthmusStatus; isthmus_last_error() explains a failure. */
#include <isthmus.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        enum IsthmusStatus s_ = (call);                                                             \
        if (s_ != ISTHMUS_STATUS_OK) {                                                              \
            fprintf(stderr, "%s:%d %s: %s (%s)\n", __FILE__, __LINE__, #call, isthmus_status_name(s_), \
                    isthmus_last_error());                                                          \
            return 1;                                                                               \
        }                                                                                           \
    } while (0)

struct producer { const char *data; size_t len, off; };

static ptrdiff_t produce(void *ctx, uint8_t *buf, size_t cap) {
    struct producer *p = ctx;
    size_t n = p->len - p->off < cap ? p->len - p->off : cap;
    memcpy(buf, p->data + p->off, n);
    p->off += n;
    return (ptrdiff_t)n;
}

static int32_t count(void *ctx, const uint8_t *data, size_t len) {
    (void)data;
    *(size_t *)ctx += len;
    return 0;
}

struct worker { const struct IsthmusStore *store; int id; int failed; };

static void *work(void *arg) {
    struct worker *w = arg;
    char key[64], body[64], back[64];
    for (int i = 0; i < 200 && !w->failed; i++) {
        snprintf(key, sizeof key, "threads/t%d/k%d", w->id, i % 10);
        int n = snprintf(body, sizeof body, "thread %d write %d", w->id, i);
        size_t got = 0;
        if (isthmus_put(w->store, "embedded", key, (const uint8_t *)body, (size_t)n, NULL, NULL) != ISTHMUS_STATUS_OK ||
            isthmus_get(w->store, "embedded", key, 0, 0, (uint8_t *)back, sizeof back, &got, NULL) != ISTHMUS_STATUS_OK ||
            got != (size_t)n || memcmp(back, body, got) != 0)
            w->failed = 1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ROOT\n", argv[0]);
        return 2;
    }
    struct IsthmusStore *store = NULL;
    CHECK(isthmus_open(argv[1], 1, &store));
    enum IsthmusStatus created = isthmus_create_bucket(store, "embedded");
    if (created != ISTHMUS_STATUS_OK && created != ISTHMUS_STATUS_BUCKET_ALREADY_EXISTS) CHECK(created);

    struct IsthmusObjectInfo info;
    const char *hello = "hello from C";
    CHECK(isthmus_put(store, "embedded", "greetings/hello.txt", (const uint8_t *)hello, strlen(hello), "text/plain", &info));
    printf("put greetings/hello.txt etag=%s size=%llu\n", info.etag, (unsigned long long)info.size);

    char buf[64];
    size_t len = 0;
    CHECK(isthmus_get(store, "embedded", "greetings/hello.txt", 6, 4, (uint8_t *)buf, sizeof buf, &len, NULL));
    printf("range 6+4: %.*s\n", (int)len, buf);
    if (isthmus_get(store, "embedded", "greetings/hello.txt", 0, 0, (uint8_t *)buf, 4, &len, NULL) != ISTHMUS_STATUS_BUFFER_TOO_SMALL || len != strlen(hello)) {
        fprintf(stderr, "expected BufferTooSmall with the needed size\n");
        return 1;
    }
    if (isthmus_head(store, "embedded", "missing", &info) != ISTHMUS_STATUS_NO_SUCH_KEY) return 1;
    printf("missing: %s\n", isthmus_last_error());

    static char big[3 << 20];
    memset(big, 'x', sizeof big);
    struct producer p = {big, sizeof big, 0};
    CHECK(isthmus_put_stream(store, "embedded", "big.bin", produce, &p, &info));
    size_t streamed = 0;
    CHECK(isthmus_get_stream(store, "embedded", "big.bin", 0, 0, count, &streamed, NULL));
    printf("streamed %zu bytes etag=%s\n", streamed, info.etag);

    char upload[48], e1[48], e2[48];
    CHECK(isthmus_multipart_create(store, "embedded", "multi.bin", upload));
    CHECK(isthmus_multipart_put_part(store, "embedded", "multi.bin", upload, 1, (const uint8_t *)big, 5 << 20 > sizeof big ? sizeof big : 5 << 20, e1));
    CHECK(isthmus_multipart_put_part(store, "embedded", "multi.bin", upload, 2, (const uint8_t *)"tail", 4, e2));
    uint32_t numbers[2] = {1, 2};
    const char *etags[2] = {e1, e2};
    /* Part 1 is under 5 MiB here, so S3 rules refuse the upload: the error says why. */
    enum IsthmusStatus mp = isthmus_multipart_complete(store, "embedded", "multi.bin", upload, numbers, etags, 2, &info);
    printf("complete with a small first part: %s, code %s (%s)\n", isthmus_status_name(mp), isthmus_last_error_code(),
           isthmus_last_error());
    CHECK(isthmus_multipart_abort(store, "embedded", "multi.bin", upload));

    CHECK(isthmus_copy(store, "embedded", "greetings/hello.txt", "embedded", "greetings/copy.txt", &info));

    pthread_t threads[4];
    struct worker workers[4];
    for (int t = 0; t < 4; t++) {
        workers[t] = (struct worker){store, t, 0};
        pthread_create(&threads[t], NULL, work, &workers[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(threads[t], NULL);
        if (workers[t].failed) {
            fprintf(stderr, "thread %d failed: %s\n", t, isthmus_last_error());
            return 1;
        }
    }

    struct IsthmusList *list = isthmus_list_open(store, "embedded", "", "/");
    struct IsthmusListEntry entry;
    enum IsthmusStatus s;
    while ((s = isthmus_list_next(list, &entry)) == ISTHMUS_STATUS_OK)
        printf("%s %s\n", entry.is_prefix ? "prefix" : "object", entry.key);
    isthmus_list_close(list);
    if (s != ISTHMUS_STATUS_END) CHECK(s);
    isthmus_close(store);
    printf("done\n");
    return 0;
}
