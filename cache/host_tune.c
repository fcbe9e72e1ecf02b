/* Per-bucket schedule tuning for the host compiler (host_tune.h). */
#include "cache/host_tune.h"

#include "core/core_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Relative gap below which two schedules count as equally fast. */
#define TUNE_NOISE 0.05
#define TUNE_MAX_RUNS 31

enum { N_SCHEDULES = 2, N_SIZES = 2 };
static const sj_attention_schedule schedules[N_SCHEDULES] = {SJ_ATTENTION_FUSED, SJ_ATTENTION_UNFUSED};
static const char *const schedule_names[N_SCHEDULES] = {"fused", "unfused"};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A graph's inputs (seeded) and outputs at `rows`. */
typedef struct io_set {
    int n_in, n_out;
    sj_tensor *in, *out;
} io_set;

static void io_free(sj_ctx *ctx, io_set *io) {
    for (int i = 0; io->in && i < io->n_in; i++) sj_tensor_free(ctx, &io->in[i]);
    for (int i = 0; io->out && i < io->n_out; i++) sj_tensor_free(ctx, &io->out[i]);
    sj_free(ctx, io->in);
    sj_free(ctx, io->out);
    memset(io, 0, sizeof *io);
}

static sj_status io_make(const sj_graph *g, int64_t rows, io_set *io) {
    sj_ctx *ctx = sj_graph_ctx(g);
    memset(io, 0, sizeof *io);
    io->n_in = sj_graph_num_inputs(g);
    io->n_out = sj_graph_num_outputs(g);
    io->in = sj_calloc(ctx, (size_t)io->n_in + 1, sizeof *io->in);
    io->out = sj_calloc(ctx, (size_t)io->n_out + 1, sizeof *io->out);
    if (!io->in || !io->out) return sj_fail(ctx, SJ_E_NOMEM, "tuning: out of memory");
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < io->n_in + io->n_out; i++) {
        sj_value_desc d;
        bool input = i < io->n_in;
        st = input ? sj_graph_input_desc(g, i, &d) : sj_graph_output_desc(g, i - io->n_in, &d);
        if (st != SJ_OK) break;
        sj_shape s = sj_shape_at(&d.shape, rows);
        sj_tensor *t = input ? &io->in[i] : &io->out[i - io->n_in];
        st = sj_tensor_alloc_typed(ctx, d.dtype, s.rank, s.dims, t);
        if (st == SJ_OK && input) sj_tensor_fill_seeded(t, (uint64_t)rows * 31u + (uint64_t)i);
    }
    if (st != SJ_OK) io_free(ctx, io);
    return st;
}

/* Median ms of runs of exe at `rows` within share_ms (at least one timed
 * run after the one that makes the run memory). */
static sj_status time_runs(sj_executable *exe, int64_t rows, io_set *io, double share_ms, double *median) {
    SJ_TRY(sj_executable_run(exe, rows, io->in, io->out));
    double t[TUNE_MAX_RUNS], start = now_ms();
    int n = 0;
    while (n < TUNE_MAX_RUNS && (n < 3 || now_ms() - start < share_ms)) {
        double t0 = now_ms();
        SJ_TRY(sj_executable_run(exe, rows, io->in, io->out));
        t[n++] = now_ms() - t0;
        if (now_ms() - start >= 2 * share_ms) break;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return SJ_OK;
}

/* Compiles under schedule s and times it at both sizes. */
static sj_status try_schedule(const sj_graph *g, int64_t extent, const sj_compile_options *base, int s,
                              sj_device *dev, io_set io[N_SIZES], const int64_t rows[N_SIZES], double share_ms,
                              double ms[N_SIZES], sj_artifact **out) {
    sj_compile_options o = *base;
    o.attention = schedules[s];
    SJ_TRY(sj_compile(g, extent, &o, out));
    sj_executable *exe = NULL;
    sj_status st = sj_artifact_load(*out, dev, g, &exe);
    for (int k = 0; st == SJ_OK && k < N_SIZES; k++)
        st = time_runs(exe, rows[k], &io[k], share_ms / N_SIZES, &ms[k]);
    sj_executable_destroy(exe);
    if (st != SJ_OK) {
        sj_error_prefix(sj_graph_ctx(g), "tuning: schedule attention=%s", schedule_names[s]);
        sj_artifact_destroy(*out);
        *out = NULL;
    }
    return st;
}

static sj_status compile_untimed(const sj_graph *g, int64_t extent, const sj_compile_options *base,
                                 sj_artifact **out) {
    SJ_TRY(sj_compile(g, extent, base, out));
    sj_status st = sj_artifact_set_tuning(*out, "one schedule: nothing to tune (no fusable attention)");
    if (st != SJ_OK) {
        sj_artifact_destroy(*out);
        *out = NULL;
    }
    return st;
}

sj_status sj_host_tune(const sj_graph *g, int64_t extent, const sj_compile_options *base, sj_device *dev,
                       int budget_ms, sj_artifact **out) {
    sj_ctx *ctx = sj_graph_ctx(g);
    *out = NULL;
    if (budget_ms < 1)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tuning: the budget must be at least 1 ms per bucket, got %d",
                       budget_ms);
    int count[N_SCHEDULES + 1];
    sj_compile_options o = *base;
    for (int s = 0; s <= N_SCHEDULES; s++) {
        o.attention = s < N_SCHEDULES ? schedules[s] : SJ_ATTENTION_AUTO;
        SJ_TRY(sj_compile_kernel_count(g, extent, &o, &count[s]));
    }
    if (count[0] == count[1]) return compile_untimed(g, extent, base, out);
    /* The schedule AUTO picks at this extent: kept unless another is clearly faster. */
    int fallback = count[N_SCHEDULES] == count[0] ? 0 : 1;
    const int64_t rows[N_SIZES] = {extent, extent > 1 ? extent / 2 : 1};
    io_set io[N_SIZES] = {{0}};
    sj_status st = SJ_OK;
    for (int k = 0; st == SJ_OK && k < N_SIZES; k++) st = io_make(g, rows[k], &io[k]);
    sj_artifact *made[N_SCHEDULES] = {NULL};
    double ms[N_SCHEDULES][N_SIZES], share = (double)budget_ms / N_SCHEDULES;
    for (int s = 0; st == SJ_OK && s < N_SCHEDULES; s++)
        st = try_schedule(g, extent, base, s, dev, io, rows, share, ms[s], &made[s]);
    for (int k = 0; k < N_SIZES; k++) io_free(ctx, &io[k]);
    if (st == SJ_OK) {
        double score[N_SCHEDULES];
        int best = 0;
        for (int s = 0; s < N_SCHEDULES; s++) {
            score[s] = ms[s][0] + ms[s][1];
            if (score[s] < score[best]) best = s;
        }
        bool kept = best != fallback && score[best] > score[fallback] * (1 - TUNE_NOISE);
        int chosen = kept ? fallback : best;
        char record[512];
        int w = snprintf(record, sizeof record, "attention schedule at rows %lld and %lld (budget %d ms):",
                         (long long)rows[0], (long long)rows[1], budget_ms);
        for (int s = 0; s < N_SCHEDULES && w > 0 && (size_t)w < sizeof record; s++)
            w += snprintf(record + w, sizeof record - (size_t)w, " %s %.4f + %.4f ms%s%s", schedule_names[s],
                          ms[s][0], ms[s][1], s == chosen ? " (chosen)" : "", s + 1 < N_SCHEDULES ? "," : "");
        if (kept && w > 0 && (size_t)w < sizeof record)
            snprintf(record + w, sizeof record - (size_t)w, "; within %.0f%%: the default kept",
                     100 * TUNE_NOISE);
        st = sj_artifact_set_tuning(made[chosen], record);
        if (st == SJ_OK) {
            *out = made[chosen];
            made[chosen] = NULL;
        }
    }
    for (int s = 0; s < N_SCHEDULES; s++) sj_artifact_destroy(made[s]);
    return st;
}
