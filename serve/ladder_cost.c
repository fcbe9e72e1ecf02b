/* The cost model of ladder fitting (serve/ladder_cost.h): one-bucket
 * engines timed at a few extents and sizes, and a non-negative
 * least-squares fit. */
#include "serve/ladder_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


enum { MAX_GRID = SJ_LADDER_COST_MAX_GRID, N_SIZES = 4, MAX_POINTS = MAX_GRID * N_SIZES, MAX_TERMS = 5 };

/* Least squares with coefficients >= 0 over up to MAX_TERMS columns: solve
 * the normal equations on the columns still free, pin the most negative
 * coefficient to 0, repeat (a singular system pins its last free column). */
static void fit_nonnegative(const double x[][MAX_TERMS], const double *y, int n, int terms, double *coef) {
    bool free_col[MAX_TERMS];
    for (int t = 0; t < terms; t++) free_col[t] = true;
    for (;;) {
        int idx[MAX_TERMS], k = 0;
        for (int t = 0; t < terms; t++) {
            coef[t] = 0;
            if (free_col[t]) idx[k++] = t;
        }
        if (k == 0) return;
        double A[MAX_TERMS][MAX_TERMS + 1] = {{0}};
        for (int r = 0; r < k; r++) {
            for (int c = 0; c < k; c++)
                for (int p = 0; p < n; p++) A[r][c] += x[p][idx[r]] * x[p][idx[c]];
            for (int p = 0; p < n; p++) A[r][k] += x[p][idx[r]] * y[p];
        }
        bool singular = false;
        for (int c = 0; c < k && !singular; c++) {
            int piv = c;
            for (int r = c + 1; r < k; r++)
                if (fabs(A[r][c]) > fabs(A[piv][c])) piv = r;
            if (fabs(A[piv][c]) < 1e-12 * (1 + fabs(A[0][0]))) {
                singular = true;
                break;
            }
            for (int j = 0; j <= k; j++) {
                double tmp = A[c][j];
                A[c][j] = A[piv][j];
                A[piv][j] = tmp;
            }
            for (int r = 0; r < k; r++) {
                if (r == c) continue;
                double f = A[r][c] / A[c][c];
                for (int j = c; j <= k; j++) A[r][j] -= f * A[c][j];
            }
        }
        if (singular) {
            free_col[idx[k - 1]] = false;
            continue;
        }
        int worst = -1;
        for (int r = 0; r < k; r++) {
            coef[idx[r]] = A[r][k] / A[r][r];
            if (coef[idx[r]] < 0 && (worst < 0 || coef[idx[r]] < coef[worst])) worst = idx[r];
        }
        if (worst < 0) return;
        free_col[worst] = false;
    }
}

typedef struct measured {
    int n_points, n_grid, n_memory; /* n_memory: extents whose run memory the backend reported */
    int64_t grid[MAX_GRID];
    double x[MAX_POINTS][MAX_TERMS], us[MAX_POINTS];
    double mx[MAX_GRID][MAX_TERMS], bytes[MAX_GRID];
} measured;

/* Up to MAX_GRID extents spread geometrically over [lo, hi]. */
static int grid_extents(int64_t lo, int64_t hi, int64_t *out) {
    int n = 0;
    for (int i = 0; i < MAX_GRID; i++) {
        int64_t e = (int64_t)llround((double)lo * pow((double)hi / (double)lo, i / (double)(MAX_GRID - 1)));
        if (e < 1) e = 1;
        if (e > hi) e = hi;
        if (n == 0 || e > out[n - 1]) out[n++] = e;
    }
    return n;
}

static double wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

sj_status sj_engine_warm_latency(sj_engine *e, int64_t rows, double budget_ns, double *us, int64_t *extent) {
    sj_ctx *ctx = sj_engine_ctx(e);
    const sj_graph *g = sj_engine_graph(e);
    int n_in = sj_graph_num_inputs(g), n_out = sj_graph_num_outputs(g);
    sj_named_tensor *in = calloc((size_t)n_in + 1, sizeof *in), *out = calloc((size_t)n_out + 1, sizeof *out);
    sj_status st = in && out ? SJ_OK : sj_ctx_set_error(ctx, SJ_E_NOMEM, "timing %lld rows: out of memory", (long long)rows);
    for (int i = 0; st == SJ_OK && i < n_in; i++) {
        sj_value_desc d;
        sj_engine_input(e, i, &d);
        if (sj_shape_numel(&d.shape, rows) < 0) {
            st = sj_ctx_set_error(ctx, SJ_E_OUT_OF_RANGE, "input %s at %s = %lld has more than 2^40 elements", d.name,
                         sj_graph_symbol(g), (long long)rows);
            break;
        }
        sj_shape sh = sj_shape_at(&d.shape, rows);
        st = sj_tensor_alloc_typed(ctx, d.dtype, sh.rank, sh.dims, &in[i].tensor);
        if (st != SJ_OK) break;
        sj_tensor_fill_seeded(&in[i].tensor, (uint64_t)rows + (uint64_t)i);
        in[i].name = d.name;
    }
    double t[64];
    int reps = 0;
    double spent = 0;
    /* The first call makes the bucket ready; it is not a warm latency. */
    for (int r = 0; st == SJ_OK && r < 65; r++) {
        sj_run_info info;
        double t0 = wall_ns();
        st = sj_engine_run(e, in, n_in, out, n_out, &info);
        double dt = wall_ns() - t0;
        if (st != SJ_OK) {
            sj_ctx_prefix_error(ctx, "a request of %lld rows", (long long)rows);
            break;
        }
        for (int i = 0; i < n_out; i++) sj_tensor_free(ctx, &out[i].tensor);
        *extent = info.bucket;
        if (r == 0) continue;
        t[reps++] = dt / 1e3;
        spent += dt;
        if (reps >= 3 && spent > budget_ns) break;
    }
    if (st == SJ_OK) {
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        *us = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    }
    for (int i = 0; in && i < n_in; i++) sj_tensor_free(ctx, &in[i].tensor);
    free(in);
    free(out);
    return st;
}

/* One engine per grid extent (a one-bucket ladder, so small requests run in
 * the large bucket): warm latencies at 1, E/4, E/2 and E rows, and the
 * bucket's run memory. */
static sj_status measure(sj_ctx *ctx, int64_t lo, int64_t hi, sj_ladder_open_fn open, void *user,
                         measured *m) {
    memset(m, 0, sizeof *m);
    m->n_grid = grid_extents(lo, hi, m->grid);
    for (int gi = 0; gi < m->n_grid; gi++) {
        int64_t E = m->grid[gi];
        char spec[64], why[512] = "";
        snprintf(spec, sizeof spec, "list:%lld", (long long)E);
        sj_engine *e = NULL;
        sj_status st = open(user, spec, &e, why, sizeof why);
        if (st != SJ_OK)
            return sj_ctx_set_error(ctx, st, "cost model: opening a bucket at extent %lld: %s", (long long)E,
                           why[0] ? why : "unknown error");
        const int64_t sizes[N_SIZES] = {1, (E + 3) / 4, (E + 1) / 2, E};
        for (int s = 0; s < N_SIZES && st == SJ_OK; s++) {
            if (s > 0 && sizes[s] == sizes[s - 1]) continue;
            double us;
            int64_t ran_in;
            st = sj_engine_warm_latency(e, sizes[s], 3e7, &us, &ran_in);
            if (st != SJ_OK) break;
            double N = (double)sizes[s], Ed = (double)E;
            double *x = m->x[m->n_points];
            x[0] = 1, x[1] = N, x[2] = Ed, x[3] = N * Ed, x[4] = N * N;
            m->us[m->n_points++] = us;
        }
        sj_engine_memory mem;
        if (st == SJ_OK && sj_engine_bucket_memory(e, 0, &mem) == SJ_OK && mem.known) {
            double Ed = (double)E;
            double *x = m->mx[m->n_memory];
            x[0] = 1, x[1] = Ed, x[2] = Ed * Ed;
            m->bytes[m->n_memory++] = (double)mem.run_bytes;
        }
        sj_engine_close(e);
        if (st != SJ_OK) {
            sj_ctx_prefix_error(ctx, "cost model at extent %lld", (long long)E);
            return st;
        }
    }
    return SJ_OK;
}

sj_status sj_ladder_cost_measure(sj_ctx *ctx, int64_t lo, int64_t hi, sj_ladder_open_fn open, void *user,
                                 sj_ladder_cost_fit *out) {
    if (lo < 1 || hi < lo || hi > SJ_MAX_EXTENT || !open)
        return sj_ctx_set_error(ctx, SJ_E_INVALID_ARG, "cost model: sizes %lld..%lld are not a range in 1..%lld",
                       (long long)lo, (long long)hi, (long long)SJ_MAX_EXTENT);
    measured m;
    sj_status st = measure(ctx, lo, hi, open, user, &m);
    if (st != SJ_OK) return st;
    double c[MAX_TERMS], mc[MAX_TERMS] = {0};
    fit_nonnegative(m.x, m.us, m.n_points, 5, c);
    fit_nonnegative(m.mx, m.bytes, m.n_memory, 3, mc);
    *out = (sj_ladder_cost_fit){.cost = {c[0], c[1], c[2], c[3], c[4], mc[0], mc[1], mc[2]},
                                .n_points = m.n_points,
                                .n_grid = m.n_grid,
                                .memory_known = m.n_memory > 0};
    memcpy(out->grid, m.grid, sizeof out->grid);
    return SJ_OK;
}
