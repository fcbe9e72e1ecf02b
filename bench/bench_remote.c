/* Remote-tier hit latency: sj_remote_get of one 64 KiB artifact from a
 * redis-server on loopback (started here, stopped at the end), verified
 * (keyed-BLAKE3 MAC) and copied out. Prints the median and tail in
 * microseconds, then one JSON line with remote_hit_us_per_artifact.
 *
 *   bench_remote [GETS] [VALUE_BYTES]      defaults 2000 and 65536 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_timing.h"
#include "shapejit/remote.h"
#include "tests/redis_server.h"

static int run(sj_ctx *ctx, const char *url, int gets, size_t value_size, const char *secret,
               double *median_us) {
    sj_remote_config rc;
    sj_remote_config_init(&rc);
    rc.url = url;
    rc.secret = secret;
    sj_remote *r;
    if (sj_remote_create(ctx, &rc, &r) != SJ_OK) {
        fprintf(stderr, "bench_remote: %s\n", sj_ctx_last_error(ctx));
        return 1;
    }
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    for (int i = 0; i < SJ_REMOTE_KEY_SIZE; i++) key[i] = (uint8_t)(i * 37 + 11);
    uint8_t *value = malloc(value_size);
    double *us = malloc(sizeof *us * (size_t)gets);
    if (!value || !us) {
        fprintf(stderr, "bench_remote: out of memory\n");
        free(value);
        free(us);
        sj_remote_destroy(r);
        return 1;
    }
    for (size_t i = 0; i < value_size; i++) value[i] = (uint8_t)(i * 2654435761u >> 13);
    int rc_out = 0;
    if (sj_remote_put(r, key, value, value_size) != SJ_OK) rc_out = 1;
    sj_remote_flush(r);
    for (int i = 0; i < gets + 50 && rc_out == 0; i++) { /* 50 warm-up gets */
        void *got;
        size_t n;
        double t0 = sj_test_now_ms();
        sj_status st = sj_remote_get(r, key, &got, &n);
        double dt = (sj_test_now_ms() - t0) * 1e3;
        if (st != SJ_OK || n != value_size) {
            fprintf(stderr, "bench_remote: get %d: %s: %s\n", i, sj_status_str(st),
                    sj_ctx_last_error(ctx));
            rc_out = 1;
            break;
        }
        sj_free(ctx, got);
        if (i >= 50) us[i - 50] = dt;
    }
    if (rc_out == 0) {
        qsort(us, (size_t)gets, sizeof *us, bench_cmp_double);
        *median_us = us[gets / 2];
        printf("remote hit, %7zu B value, %-9s: median %8.1f us   p90 %8.1f us   p99 %8.1f us"
               "   (%d gets)\n",
               value_size, secret ? "MAC" : "checksum", *median_us, us[gets * 9 / 10],
               us[gets * 99 / 100], gets);
    }
    free(value);
    free(us);
    sj_remote_destroy(r);
    return rc_out;
}

int main(int argc, char **argv) {
    int gets = argc > 1 ? atoi(argv[1]) : 2000;
    long size = argc > 2 ? atol(argv[2]) : 65536;
    if (gets < 10 || size < 1 || size > (64L << 20) - SJ_REMOTE_FRAME_OVERHEAD) {
        fprintf(stderr, "usage: bench_remote [GETS >= 10] [VALUE_BYTES 1..64 MiB]\n");
        return 2;
    }
    if (!sj_test_redis_path()) {
        printf("bench_remote: SKIP: redis-server is not installed (Debian: redis-server)\n");
        return 0;
    }
    sj_test_redis srv;
    if (sj_test_redis_start(&srv, 0) != 0) {
        fprintf(stderr, "bench_remote: could not start redis-server on a loopback port\n");
        return 1;
    }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    sj_ctx *ctx;
    int rc = sj_ctx_create(NULL, &ctx) != SJ_OK;
    double mac_us = 0, plain_us = 0;
    if (!rc) rc = run(ctx, url, gets, (size_t)size, "bench fleet secret", &mac_us);
    if (!rc) rc = run(ctx, url, gets, (size_t)size, NULL, &plain_us);
    sj_ctx_destroy(ctx);
    sj_test_redis_stop(&srv);
    if (!rc)
        printf("{\"remote_hit_us_per_artifact\": %.1f, \"remote_hit_us_checksum_only\": %.1f, "
               "\"value_bytes\": %ld}\n",
               mac_us, plain_us, size);
    return rc;
}
