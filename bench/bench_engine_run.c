/* The C side of bench/python/bench_python.py: the cost of one
 * sj_engine_run (plus freeing its outputs, as a Python caller's arrays are
 * freed) at a given N, so the Python binding's overhead is the difference.
 *
 *   bench_engine_run MODEL N [CALLS [CPU]]    -> "sj_engine_run N=1: 812.4 ns/call"
 *
 * CPU (x86-64-v2, x86-64-v3, native: the engine's cpu) times one level's
 * code on this machine; the default is native.
 * Inputs are zero-filled tensors of each model input's dtype and shape at
 * N (zero is a valid token id too); the bucket is compiled before timing.
 * Thread CPU time, median of BENCH_BATCHES batches (bench_timing.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_timing.h"
#include "shapejit/engine.h"

#define MAX_IO 16

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5)
        return fprintf(stderr, "usage: %s MODEL N [CALLS [CPU]]\n", argv[0]), 2;
    int64_t n = atoll(argv[2]);
    int calls = argc >= 4 ? atoi(argv[3]) : 20000;
    if (n < 1 || calls < 1)
        return fprintf(stderr, "bench_engine_run: N and CALLS must be >= 1\n"), 2;
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK)
        return 1;
    sj_engine *e = NULL;
    sj_named_tensor in[MAX_IO] = {{0}}, out[MAX_IO];
    int n_in = 0, n_out = 0, rc = 1;
    sj_engine_config ec;
    sj_engine_config_init(&ec);
    if (argc == 5) ec.cpu = argv[4];
    if (sj_engine_open(ctx, argv[1], &ec, &e) != SJ_OK)
        goto done;
    n_in = sj_engine_num_inputs(e);
    n_out = sj_engine_num_outputs(e);
    if (n_in > MAX_IO || n_out > MAX_IO) {
        fprintf(stderr, "bench_engine_run: more than %d inputs or outputs\n", MAX_IO);
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        sj_value_desc d;
        sj_engine_input(e, i, &d);
        int64_t dims[SJ_MAX_RANK];
        for (int k = 0; k < d.shape.rank; k++)
            dims[k] = d.shape.dims[k] == SJ_DIM_SYM ? n : d.shape.dims[k];
        in[i].name = d.name;
        if (sj_tensor_alloc(ctx, d.shape.rank, dims, &in[i].tensor) != SJ_OK)
            goto done;
        /* sj_tensor_alloc makes float32; a typed input gets zeroed bytes of its size. */
        if (d.dtype != SJ_F32) {
            sj_free(ctx, in[i].tensor.bytes);
            in[i].tensor.bytes =
                sj_calloc(ctx, (size_t)sj_tensor_numel(&in[i].tensor) + 1, sj_dtype_size(d.dtype));
            in[i].tensor.dtype = d.dtype;
            if (!in[i].tensor.bytes)
                goto done;
        }
    }
    /* First run compiles the bucket; then a warm-up batch. */
    for (int i = 0; i < 1 + calls / 10; i++) {
        if (sj_engine_run(e, in, n_in, out, n_out, NULL) != SJ_OK)
            goto done;
        for (int k = 0; k < n_out; k++)
            sj_tensor_free(ctx, &out[k].tensor);
    }
    double t[BENCH_BATCHES];
    for (int b = 0; b < BENCH_BATCHES; b++) {
        double t0 = bench_cpu_ns();
        for (int i = 0; i < calls / BENCH_BATCHES + 1; i++) {
            sj_engine_run(e, in, n_in, out, n_out, NULL);
            for (int k = 0; k < n_out; k++)
                sj_tensor_free(ctx, &out[k].tensor);
        }
        t[b] = (bench_cpu_ns() - t0) / (calls / BENCH_BATCHES + 1);
    }
    printf("sj_engine_run N=%lld: %.1f ns/call\n", (long long)n, bench_median(t, BENCH_BATCHES));
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "bench_engine_run: %s\n", sj_ctx_last_error(ctx));
    for (int i = 0; i < n_in; i++)
        sj_tensor_free(ctx, &in[i].tensor);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return rc;
}
