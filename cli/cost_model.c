/* The cost model of ladder fitting (cli/cost_model.h): one-bucket engines
 * timed at a few extents and sizes, and a non-negative least-squares fit. */
#include "cli/cost_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { MAX_GRID = CLI_COST_MAX_GRID, N_SIZES = 4, MAX_POINTS = MAX_GRID * N_SIZES, MAX_TERMS = 5 };

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

/* One engine per grid extent (a one-bucket ladder, so small requests run in
 * the large bucket): warm latencies at 1, E/4, E/2 and E rows, and the
 * bucket's run memory. */
static int measure(const char *cmd, sj_ctx *ctx, const sj_graph *model, const cli_engine_args *base,
                   int64_t lo, int64_t hi, measured *m) {
    memset(m, 0, sizeof *m);
    m->n_grid = grid_extents(lo, hi, m->grid);
    for (int gi = 0; gi < m->n_grid; gi++) {
        int64_t E = m->grid[gi];
        char spec[64];
        snprintf(spec, sizeof spec, "list:%lld", (long long)E);
        cli_engine_args ea = *base;
        ea.ladder = spec;
        sj_graph *g;
        if (sj_graph_clone(model, &g) != SJ_OK) return cli_fail_status(cmd, ctx, SJ_E_NOMEM);
        sj_engine *e;
        char store_path[4096];
        int rc = cli_engine_open(cmd, ctx, g, &ea, &e, store_path, sizeof store_path);
        if (rc != CLI_EXIT_OK) return rc;
        const int64_t sizes[N_SIZES] = {1, (E + 3) / 4, (E + 1) / 2, E};
        for (int s = 0; s < N_SIZES && rc == CLI_EXIT_OK; s++) {
            if (s > 0 && sizes[s] == sizes[s - 1]) continue;
            double us;
            int64_t ran_in;
            rc = cli_warm_latency(cmd, ctx, e, sizes[s], 3e7, &us, &ran_in);
            if (rc != CLI_EXIT_OK) break;
            double N = (double)sizes[s], Ed = (double)E;
            double *x = m->x[m->n_points];
            x[0] = 1, x[1] = N, x[2] = Ed, x[3] = N * Ed, x[4] = N * N;
            m->us[m->n_points++] = us;
        }
        sj_engine_memory mem;
        if (rc == CLI_EXIT_OK && sj_engine_bucket_memory(e, 0, &mem) == SJ_OK && mem.known) {
            double Ed = (double)E;
            double *x = m->mx[m->n_memory];
            x[0] = 1, x[1] = Ed, x[2] = Ed * Ed;
            m->bytes[m->n_memory++] = (double)mem.run_bytes;
        }
        sj_engine_close(e);
        if (rc != CLI_EXIT_OK) return rc;
    }
    return CLI_EXIT_OK;
}

int cli_cost_measure(const char *cmd, sj_ctx *ctx, const sj_graph *model, const cli_engine_args *base,
                     int64_t lo, int64_t hi, cli_cost_fit *out) {
    measured m;
    int rc = measure(cmd, ctx, model, base, lo, hi, &m);
    if (rc != CLI_EXIT_OK) return rc;
    double c[MAX_TERMS], mc[MAX_TERMS] = {0};
    fit_nonnegative(m.x, m.us, m.n_points, 5, c);
    fit_nonnegative(m.mx, m.bytes, m.n_memory, 3, mc);
    *out = (cli_cost_fit){.cost = {c[0], c[1], c[2], c[3], c[4], mc[0], mc[1], mc[2]},
                          .n_points = m.n_points,
                          .n_grid = m.n_grid,
                          .memory_known = m.n_memory > 0};
    memcpy(out->grid, m.grid, sizeof out->grid);
    return CLI_EXIT_OK;
}
