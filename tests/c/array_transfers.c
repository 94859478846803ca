/* Arrays and transfers from C: creates a 2-D float32 array (zstd), writes T steps of one row
 * block each with session transfers (the step buffer is reused at once), waits for all, reads
 * a strided region back, and checks the refusals (an array created twice, an overlapping
 * transfer in flight). Prints the strided region for the test to compare with zarr-python. */
#include <isthmus.h>
#include <stdio.h>
#include <string.h>

#define STEPS 6
#define ROWS 4
#define COLS 10

#define CHECK(call) do { enum IsthmusStatus s_ = (call); if (s_ != ISTHMUS_STATUS_OK) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, isthmus_status_name(s_), isthmus_last_error()); return 1; } } while (0)

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    struct IsthmusStore *store = NULL;
    CHECK(isthmus_open(argv[1], 1, &store));
    isthmus_create_bucket(store, "arrays");
    uint64_t shape[2] = {STEPS * ROWS, COLS}, chunks[2] = {ROWS, 5};
    struct IsthmusArray *array = NULL;
    CHECK(isthmus_array_create(store, "arrays", "c.zarr", 2, shape, chunks, "float32", "zstd:3", NULL,
                               "{\"origin\": \"c\"}", &array));
    struct IsthmusArray *again = NULL;
    enum IsthmusStatus twice = isthmus_array_create(store, "arrays", "c.zarr", 2, shape, chunks, "float32", "", NULL, NULL, &again);
    printf("twice %s %s\n", isthmus_status_name(twice), isthmus_last_error_code());

    struct IsthmusTransfers *session = NULL;
    CHECK(isthmus_transfers_new(0, 2, 1, &session));
    struct IsthmusTransfer *steps[STEPS];
    float block[ROWS * COLS];
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < ROWS * COLS; i++) block[i] = (float)(t * 100 + i);
        uint64_t offset[2] = {(uint64_t)t * ROWS, 0}, count[2] = {ROWS, COLS};
        CHECK(isthmus_transfer_create(session, array, 1, offset, count, NULL, block, sizeof block, -1, &steps[t]));
        CHECK(isthmus_transfer_start(steps[t]));
        memset(block, 0, sizeof block); /* reused at once: the transfer copied it */
    }
    /* A read overlapping step 0 while it is in flight is refused. */
    float one;
    uint64_t at[2] = {0, 0}, single[2] = {1, 1};
    struct IsthmusTransfer *clash = NULL;
    CHECK(isthmus_transfer_create(session, array, 0, at, single, NULL, &one, sizeof one, -1, &clash));
    enum IsthmusStatus refused = isthmus_transfer_start(clash);
    printf("overlap %s\n", isthmus_status_name(refused));
    CHECK(isthmus_transfer_wait_all(steps, STEPS));
    for (int t = 0; t < STEPS; t++) {
        if (isthmus_transfer_status(steps[t]) != 2) { fprintf(stderr, "step %d not done\n", t); return 1; }
        isthmus_transfer_free(steps[t]);
    }
    CHECK(isthmus_transfer_start(clash));
    CHECK(isthmus_transfer_wait(clash));
    printf("first %g\n", one);
    isthmus_transfer_free(clash);

    float strided[6 * 2];
    uint64_t offset[2] = {1, 3}, count[2] = {6, 2}, stride[2] = {4, 5};
    CHECK(isthmus_array_read(array, offset, count, stride, strided, sizeof strided));
    printf("strided");
    for (int i = 0; i < 12; i++) printf(" %g", strided[i]);
    printf("\n");
    uint64_t got[2];
    CHECK(isthmus_array_shape(array, got));
    printf("shape %llu %llu element %zu\n", (unsigned long long)got[0], (unsigned long long)got[1], isthmus_array_element_size(array));
    isthmus_transfers_close(session);
    isthmus_array_close(array);
    isthmus_close(store);
    puts("done");
    return 0;
}
