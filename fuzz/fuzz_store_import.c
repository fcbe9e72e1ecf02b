/* A store export archive imported into an in-memory store: records,
 * strings, frame lengths, zstd frames and digests. */
#include "fuzz/fuzz_common.h"
#include "shapejit/store.h"

#include <stdio.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sj_ctx *ctx = fuzz_ctx();
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/sj_fuzz_import.%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    sj_store_config cfg;
    sj_store_config_init(&cfg);
    cfg.max_artifact_bytes = 1 << 20; /* bounds what a forged frame may claim */
    sj_store *s;
    if (sj_store_open(ctx, &cfg, &s) != SJ_OK) abort();
    int64_t imported = -1, rejected = -1;
    sj_status st = sj_store_import(s, path, &imported, &rejected);
    fuzz_check_message(st);
    if (imported < 0 || rejected < 0) abort();
    sj_store_close(s);
    unlink(path);
    return 0;
}
