/* Runtime benchmark: metadata info cache hit and insert-with-eviction cost,
 * and eager vs replayed dispatch of a small plan of native kernels on the
 * host at active extent 1.
 *
 *   bench_runtime [--json FILE]
 *
 * Every figure is the median of several batches; a batch times many calls
 * and divides, so clock resolution does not matter. Time is the thread's CPU
 * time: on a shared machine, time spent descheduled is not the code's cost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_mdcache.h"
#include "bench/bench_timing.h"
#include "shapejit/ext/metadata_cache.h"
#include "shapejit/ext/runtime.h"
#include "plan/plan.h"
#include "runtime/executable_create.h"

/* --- a small plan: a chain of elementwise kernels over x [N, 16]. */
#define COLS 16
#define CHAIN 8

static void k_axpb(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    (void)scratch;
    const float *x = b[0];
    float *y = b[1];
    float a = (float)info[1], c = (float)info[2];
    for (int64_t i = 0; i < n * info[0]; i++) y[i] = a * x[i] + c;
}

static const sj_native_kernel chain_kernels[] = {{"axpb", k_axpb, NULL, 0}};

typedef struct chain_plan {
    sj_graph *g;
    sj_kernel_desc kernel;
    sj_buffer_slot slots[CHAIN + 1];
    sj_launch launches[CHAIN];
    int32_t launch_slots[2 * CHAIN];
    int64_t words[3 * CHAIN];
    sj_launch_plan plan;
} chain_plan;

/* x -> (*1 + 1) repeated CHAIN times -> y; intermediates in the arena. The
 * graph only needs the right input and output shapes. */
static int chain_init(sj_ctx *ctx, int64_t extent, chain_plan *m) {
    memset(m, 0, sizeof *m);
    int64_t d[] = {SJ_DIM_SYM, COLS};
    sj_value x, y;
    if (sj_graph_create(ctx, "N", &m->g) != SJ_OK || sj_graph_input(m->g, "x", 2, d, &x) != SJ_OK ||
        sj_graph_unary(m->g, SJ_OP_RELU, x, &y) != SJ_OK || sj_graph_output(m->g, y, "y") != SJ_OK)
        return 1;
    int64_t bytes = extent * COLS * 4;
    strcpy(m->kernel.name, "axpb");
    m->slots[0] = (sj_buffer_slot){SJ_SLOT_INPUT, 0, 0, bytes};
    for (int i = 1; i < CHAIN; i++)
        m->slots[i] = (sj_buffer_slot){SJ_SLOT_ARENA, 0, (int64_t)((i - 1) % 2) * bytes, bytes};
    m->slots[CHAIN] = (sj_buffer_slot){SJ_SLOT_OUTPUT, 0, 0, bytes};
    for (int i = 0; i < CHAIN; i++) {
        m->launch_slots[2 * i] = i;
        m->launch_slots[2 * i + 1] = i + 1;
        m->words[3 * i] = COLS;
        m->words[3 * i + 1] = 1;
        m->words[3 * i + 2] = i; /* distinct infos: one cache entry per launch */
        m->launches[i] = (sj_launch){.kernel = 0, .first_slot = 2 * i, .n_slots = 2,
                                     .first_word = 3 * i, .n_words = 3};
    }
    m->plan = (sj_launch_plan){.extent = extent, .n_kernels = 1, .kernels = &m->kernel,
                               .n_slots = CHAIN + 1, .slots = m->slots, .n_launches = CHAIN,
                               .launches = m->launches, .n_launch_slots = 2 * CHAIN,
                               .launch_slots = m->launch_slots, .n_words = 3 * CHAIN,
                               .words = m->words, .arena_bytes = 2 * bytes};
    return 0;
}

typedef sj_status (*run_fn)(sj_executable *, int64_t, const sj_tensor *, sj_tensor *);

static double time_runs(sj_executable *exe, run_fn run, sj_tensor *in, sj_tensor *out) {
    enum { CALLS = 20000 };
    double t[BENCH_BATCHES];
    for (int b = 0; b < BENCH_BATCHES; b++) {
        double t0 = bench_cpu_ns();
        for (int i = 0; i < CALLS; i++) run(exe, 1, in, out);
        t[b] = (bench_cpu_ns() - t0) / CALLS;
    }
    return bench_median(t, BENCH_BATCHES);
}

static int bench_dispatch(sj_ctx *ctx, double *eager_ns, double *replay_ns) {
    sj_device *dev;
    chain_plan m;
    sj_executable *exe;
    if (sj_host_device_create(ctx, NULL, &dev) != SJ_OK || chain_init(ctx, 64, &m) ||
        sj__executable_create(dev, &m.plan, SJ_CODE_HOST_NATIVE, chain_kernels,
                             sizeof chain_kernels, m.g, &exe) != SJ_OK) {
        fprintf(stderr, "dispatch setup: %s\n", sj_ctx_last_error(ctx));
        return 1;
    }
    int64_t d[] = {1, COLS};
    sj_tensor in, out;
    sj_tensor_alloc(ctx, 2, d, &in);
    sj_tensor_alloc(ctx, 2, d, &out);
    int rc = sj_executable_run(exe, 1, &in, &out) != SJ_OK || sj_executable_capture(exe) != SJ_OK;
    if (!rc) {
        *eager_ns = time_runs(exe, sj_executable_run, &in, &out);
        *replay_ns = time_runs(exe, sj_executable_replay, &in, &out);
        rc = out.data[0] != (float)(CHAIN * (CHAIN - 1) / 2); /* x = 0, then + 0 + 1 + ... */
    }
    sj_tensor_free(ctx, &in);
    sj_tensor_free(ctx, &out);
    sj_executable_destroy(exe);
    sj_graph_destroy(m.g);
    sj_device_destroy(dev);
    return rc;
}

int main(int argc, char **argv) {
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    double hit, evict[3], probes[3], eager, replay;
    const size_t sizes[3] = {16, 4096, 65536};
    int rc = bench_mdcache_hit(ctx, &hit);
    for (int i = 0; i < 3 && !rc; i++) rc = bench_mdcache_evict_insert(ctx, sizes[i], &evict[i], &probes[i]);
    if (!rc) rc = bench_dispatch(ctx, &eager, &replay);
    if (rc) {
        fprintf(stderr, "bench_runtime: a measurement failed its own check\n");
        sj_ctx_destroy(ctx);
        return 1;
    }
    printf("%-44s %12s\n", "measure", "value");
    printf("%-44s %9.1f ns\n", "metadata cache hit (median)", hit);
    for (int i = 0; i < 3; i++) {
        char label[64];
        snprintf(label, sizeof label, "metadata insert+evict at %zu entries", sizes[i]);
        printf("%-44s %9.1f ns (%.1f entries examined per eviction)\n", label, evict[i],
               probes[i]);
    }
    printf("%-44s %9.1f ns (%.1f ns/launch)\n", "eager run, N=1, 8 launches", eager,
           eager / CHAIN);
    printf("%-44s %9.1f ns (%.1f ns/launch)\n", "replay run, N=1, 8 launches", replay,
           replay / CHAIN);
    printf("%-44s %9.2f x\n", "replay_vs_eager_dispatch (eager / replay)", eager / replay);
    if (json) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", json);
        FILE *f = fopen(tmp, "w");
        if (!f) {
            perror(tmp);
            sj_ctx_destroy(ctx);
            return 1;
        }
        fprintf(f,
                "{\"metadata_hit_ns\": %.2f, \"metadata_evict_insert_ns\": {\"16\": %.2f, "
                "\"4096\": %.2f, \"65536\": %.2f}, \"replay_vs_eager_dispatch\": %.3f, "
                "\"eager_run_ns\": %.1f, \"replay_run_ns\": %.1f}\n",
                hit, evict[0], evict[1], evict[2], eager / replay, eager, replay);
        if (fclose(f) != 0 || rename(tmp, json) != 0) {
            perror(json);
            remove(tmp);
            sj_ctx_destroy(ctx);
            return 1;
        }
    }
    sj_ctx_destroy(ctx);
    return 0;
}
