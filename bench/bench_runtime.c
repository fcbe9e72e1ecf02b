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

#include "shapejit/metadata_cache.h"
#include "shapejit/runtime.h"
#include "jit/lower/plan.h"

#define BATCHES 15

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The cache owns nothing real here: buffers are tags, so only the cache's
 * own work is timed. */
static void release_nothing(void *user, void *buffer) {
    (void)user;
    (void)buffer;
}

#define INFO_WORDS 12 /* a rank-2 and a rank-3 tensor's shapes and strides, a scalar */

static void fill_key(int64_t *w, int64_t id) {
    for (int i = 0; i < INFO_WORDS; i++) w[i] = id * 31 + i;
}

static int bench_hit(sj_ctx *ctx, double *out_ns) {
    sj_mdcache *c;
    if (sj_mdcache_create(ctx, NULL, release_nothing, NULL, &c) != SJ_OK) return 1;
    enum { KEYS = 256, CALLS = 200000 };
    static int64_t keys[KEYS][INFO_WORDS];
    for (int k = 0; k < KEYS; k++) {
        fill_key(keys[k], k);
        sj_mdcache_store(c, keys[k], INFO_WORDS, (void *)(uintptr_t)(k + 1));
    }
    double t[BATCHES];
    uintptr_t sink = 0;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (int i = 0; i < CALLS; i++) {
            void *buf;
            sj_mdcache_lookup(c, keys[i % KEYS], INFO_WORDS, &buf);
            sink += (uintptr_t)buf;
        }
        t[b] = (now_ns() - t0) / CALLS;
    }
    sj_mdcache_destroy(c);
    if (sink == 0) return 1; /* every lookup hit, so the sum cannot be 0 */
    *out_ns = median(t, BATCHES);
    return 0;
}

/* A full cache of `entries`: each store of a new key evicts the LRU one. */
static int bench_evict_insert(sj_ctx *ctx, size_t entries, double *out_ns, double *probes) {
    sj_mdcache_policy p;
    sj_mdcache_policy_init(&p);
    p.max_entries = entries;
    sj_mdcache *c;
    if (sj_mdcache_create(ctx, &p, release_nothing, NULL, &c) != SJ_OK) return 1;
    int64_t w[INFO_WORDS], id = 0;
    for (size_t i = 0; i < entries; i++) {
        fill_key(w, id++);
        sj_mdcache_store(c, w, INFO_WORDS, (void *)(uintptr_t)id);
    }
    enum { CALLS = 50000 };
    double t[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (int i = 0; i < CALLS; i++) {
            fill_key(w, id++);
            void *buf;
            if (sj_mdcache_lookup(c, w, INFO_WORDS, &buf) == SJ_MDCACHE_BUILD_STORE)
                sj_mdcache_store(c, w, INFO_WORDS, (void *)(uintptr_t)id);
        }
        t[b] = (now_ns() - t0) / CALLS;
    }
    sj_mdcache_stats s;
    sj_mdcache_get_stats(c, &s);
    sj_mdcache_destroy(c);
    if (s.entries != entries || s.evictions == 0) return 1;
    *out_ns = median(t, BATCHES);
    *probes = (double)s.eviction_probes / (double)s.evictions;
    return 0;
}

/* --- a small plan: a chain of elementwise kernels over x [N, 16]. */
#define COLS 16
#define CHAIN 8

static void k_axpb(void *const *b, const int64_t *info, int64_t n) {
    const float *x = b[0];
    float *y = b[1];
    float a = (float)info[1], c = (float)info[2];
    for (int64_t i = 0; i < n * info[0]; i++) y[i] = a * x[i] + c;
}

static const sj_native_kernel chain_kernels[] = {{"axpb", k_axpb}};

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
    double t[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (int i = 0; i < CALLS; i++) run(exe, 1, in, out);
        t[b] = (now_ns() - t0) / CALLS;
    }
    return median(t, BATCHES);
}

static int bench_dispatch(sj_ctx *ctx, double *eager_ns, double *replay_ns) {
    sj_device *dev;
    chain_plan m;
    sj_executable *exe;
    if (sj_host_device_create(ctx, NULL, &dev) != SJ_OK || chain_init(ctx, 64, &m) ||
        sj_executable_create(dev, &m.plan, SJ_CODE_HOST_NATIVE, chain_kernels,
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
    int rc = bench_hit(ctx, &hit);
    for (int i = 0; i < 3 && !rc; i++) rc = bench_evict_insert(ctx, sizes[i], &evict[i], &probes[i]);
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
