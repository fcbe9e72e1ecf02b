/* Per-bucket schedule tuning for the host compiler (host_tune.h). */
#include "backends/host_tune.h"

#include "core/core_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Relative gap below which two schedules count as equally fast. */
#define TUNE_NOISE 0.05
#define TUNE_MAX_RUNS 31

enum { MAX_SCHEDULES = 4, N_SIZES = 2 };

/* One candidate: a value for each schedule dimension that differs at this
 * bucket (AUTO for one that does not), and its name in the record. */
typedef struct schedule {
    sj_attention_schedule attention;
    sj_matmul_schedule matmul;
    char name[24];
} schedule;

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

/* Median ms of runs of exe at `rows`: after the run that makes the run
 * memory, until share_ms is spent and 3 were timed, at most 2 * share_ms. */
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
static sj_status try_schedule(const sj_graph *g, int64_t extent, const sj_compile_options *base,
                              const schedule *s, sj_device *dev, io_set io[N_SIZES],
                              const int64_t rows[N_SIZES], double share_ms, double ms[N_SIZES],
                              sj_artifact **out) {
    sj_compile_options o = *base;
    o.attention = s->attention;
    o.matmul = s->matmul;
    SJ_TRY(sj_compile(g, extent, &o, out));
    sj_executable *exe = NULL;
    sj_status st = sj_artifact_load(*out, dev, g, &exe);
    for (int k = 0; st == SJ_OK && k < N_SIZES; k++)
        st = time_runs(exe, rows[k], &io[k], share_ms / N_SIZES, &ms[k]);
    sj_executable_destroy(exe);
    if (st != SJ_OK) {
        sj__error_prefix(sj_graph_ctx(g), "tuning bucket %lld: schedule %s", (long long)extent, s->name);
        sj_artifact_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* The candidates at this extent into s (their count in *count_out), and in
 * *fallback the one AUTO would pick: the attention schedules where they
 * give different kernels, times the matmul ones where the plan has a matmul
 * in a bucket small enough for the few-rows schedule (from 2 rows: at 1 the
 * tiles fall back to it). */
static sj_status candidates(const sj_graph *g, int64_t extent, const sj_compile_options *base,
                            schedule s[MAX_SCHEDULES], int *count_out, int *fallback) {
    static const sj_attention_schedule att[3] = {SJ_ATTENTION_FUSED, SJ_ATTENTION_UNFUSED, SJ_ATTENTION_AUTO};
    int count[3], matmuls[3];
    sj_compile_options o = *base;
    for (int a = 0; a < 3; a++) {
        o.attention = att[a];
        SJ_TRY(sj_compile_kernel_counts(g, extent, &o, &count[a], &matmuls[a]));
    }
    bool attention = count[0] != count[1];
    /* unfused attention has matmuls (q kT, p v) the fused kernel takes in */
    bool matmul = (matmuls[0] > 0 || matmuls[1] > 0) && extent >= 2 && extent <= SJ_MATMUL_ROWS_MAX;
    int auto_attention = count[2] == count[0] ? 0 : 1, n = 0;
    *fallback = 0;
    for (int a = 0; a < (attention ? 2 : 1); a++)
        for (int m = 0; m < (matmul ? 2 : 1); m++) {
            schedule *c = &s[n];
            c->attention = attention ? att[a] : SJ_ATTENTION_AUTO;
            c->matmul = m ? SJ_MATMUL_TILED : SJ_MATMUL_AUTO;
            snprintf(c->name, sizeof c->name, "%s%s%s", attention ? (a ? "unfused" : "fused") : "",
                     attention && matmul ? "+" : "", matmul ? (m ? "tiled" : "rows") : "");
            if ((!attention || a == auto_attention) && m == 0) *fallback = n;
            n++;
        }
    *count_out = n;
    return SJ_OK;
}

static sj_status compile_untimed(const sj_graph *g, int64_t extent, const sj_compile_options *base,
                                 sj_artifact **out) {
    SJ_TRY(sj_compile(g, extent, base, out));
    sj_status st = sj_artifact_set_tuning(*out, "one schedule: nothing to tune (no schedule differs at this extent)");
    if (st != SJ_OK) {
        sj_artifact_destroy(*out);
        *out = NULL;
    }
    return st;
}

sj_status sj__host_tune(const sj_graph *g, int64_t extent, const sj_compile_options *base, int budget_ms,
                       sj_artifact **out) {
    sj_ctx *ctx = sj_graph_ctx(g);
    *out = NULL;
    if (budget_ms < 1)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tuning: the budget must be at least 1 ms per bucket, got %d",
                       budget_ms);
    schedule sched[MAX_SCHEDULES];
    int fallback, n;
    SJ_TRY(candidates(g, extent, base, sched, &n, &fallback));
    if (n < 2) return compile_untimed(g, extent, base, out);
    const int64_t rows[N_SIZES] = {extent, extent > 1 ? extent / 2 : 1};
    io_set io[N_SIZES] = {{0}};
    sj_device *dev = NULL;
    sj_status st = sj_host_device_create(ctx, NULL, &dev);
    for (int k = 0; st == SJ_OK && k < N_SIZES; k++) st = io_make(g, rows[k], &io[k]);
    sj_artifact *made[MAX_SCHEDULES] = {NULL};
    double ms[MAX_SCHEDULES][N_SIZES], share = (double)budget_ms / n;
    for (int s = 0; st == SJ_OK && s < n; s++)
        st = try_schedule(g, extent, base, &sched[s], dev, io, rows, share, ms[s], &made[s]);
    for (int k = 0; k < N_SIZES; k++) io_free(ctx, &io[k]);
    sj_device_destroy(dev);
    if (st == SJ_OK) {
        double score[MAX_SCHEDULES];
        int best = 0;
        for (int s = 0; s < n; s++) {
            score[s] = ms[s][0] + ms[s][1];
            if (score[s] < score[best]) best = s;
        }
        bool kept = best != fallback && score[best] > score[fallback] * (1 - TUNE_NOISE);
        int chosen = kept ? fallback : best;
        char record[512];
        int w = snprintf(record, sizeof record, "schedules at rows %lld and %lld (budget %d ms):",
                         (long long)rows[0], (long long)rows[1], budget_ms);
        for (int s = 0; s < n && w > 0 && (size_t)w < sizeof record; s++)
            w += snprintf(record + w, sizeof record - (size_t)w, " %s %.6f + %.6f ms%s%s", sched[s].name,
                          ms[s][0], ms[s][1], s == chosen ? " (chosen)" : "", s + 1 < n ? "," : "");
        if (kept && w > 0 && (size_t)w < sizeof record)
            snprintf(record + w, sizeof record - (size_t)w, "; within %.0f%%: the default kept",
                     100 * TUNE_NOISE);
        st = sj_artifact_set_tuning(made[chosen], record);
        if (st == SJ_OK) {
            *out = made[chosen];
            made[chosen] = NULL;
        }
    }
    for (int s = 0; s < n; s++) sj_artifact_destroy(made[s]);
    return st;
}
