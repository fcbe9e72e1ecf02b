/* Winograd convolution F(2x2, 3x3) (onnx_winograd.h), after Lavin and
 * Gray, "Fast Algorithms for Convolutional Neural Networks" (2015): with
 * d a 4x4 input tile and g a 3x3 filter, the 2x2 outputs are
 * A^T [(G g G^T) . (B^T d B)] A, the product elementwise over 16 points,
 * so summed over the input channels it is 16 matrix products. */
#include "formats/onnx/onnx_winograd.h"
#include "formats/onnx/onnx_node.h"

#include <stdlib.h>

enum { M_OUT = 2, A = 4, POINTS = A * A, Q_IN = 4, Q_OUT = 9 };

/* F(2x2, 3x3)'s transforms (row-major): B^T [A x A], G [A x 3], A^T
 * [M_OUT x A]. A transformed point sums Q_IN taps of +-1, an output Q_OUT
 * points of +-1. (F(4x4, 3x3) saves more multiplies, but its coefficients
 * up to 64 cost about 1e-4 of relative accuracy in float32, and its tiles
 * leave the GEMMs too few rows per image to run them faster: ResNet-18
 * measured no gain.) */
static const double BT[A * A] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double G[A * 3] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double AT[M_OUT * A] = {1, 1, 1, 0, 0, 1, -1, -1};

/* Below these the GEMM is too narrow for its 2.25x to pay for the
 * transforms' passes over V and M (each 4x the input or output). */
enum { MIN_CHANNELS = 16, MIN_POSITIONS = 16 };

bool sj__onnx_winograd_fits(const sj_onnx_window *w, int64_t c, int64_t m) {
    if (w->n != 2 || c < MIN_CHANNELS || m < MIN_CHANNELS || w->positions < MIN_POSITIONS) return false;
    for (int d = 0; d < 2; d++)
        if (w->kernel[d] != 3 || w->stride[d] != 1 || w->dilation[d] != 1) return false;
    return true;
}

/* The tiles: th x tw of them, each 2x2 outputs from a 4x4 patch. */
typedef struct tiles {
    int64_t th, tw, n;
} tiles;

/* x as [1, N, H * W + 1, C]: channels last, one zero appended past the
 * positions (what taps in the padding read). */
static sj_status tiles_source(sj_onnx_loader *L, sj_value x, bool x_cl, const sj_shape *xs, sj_value *out) {
    sj_graph *g = L->g;
    int64_t n = xs->dims[0], c = xs->dims[1], flat = xs->dims[2] * xs->dims[3];
    if (!x_cl) {
        int64_t d3[3] = {n, c, flat};
        int perm[3] = {0, 2, 1};
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, x, 3, d3, &x)));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(g, x, perm, &x)));
    }
    int64_t d4[4] = {1, n, flat, c};
    sj_value zero;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, x, 4, d4, out)));
    d4[2] = 1;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_fill(g, SJ_F32, 0.0, 4, d4, &zero)));
    return sj__onnx_node_prefix(L, sj_graph_concat(g, *out, zero, 2, out));
}

/* A sum of q terms, term j a gather of data along `axis` through tab[j]
 * (rank trank, dims td) times coef[j] (rank crank, dims cd): the terms are
 * loads inside one kernel, the tables and coefficients params, so every
 * sum of these extents shares its code. */
typedef struct terms {
    int q;
    int32_t *tab;  /* q tables of tab_len entries, one after another */
    float *coef;   /* q coefficient arrays of coef_len entries */
    int64_t tab_len, coef_len;
} terms;

static sj_status terms_alloc(sj_onnx_loader *L, terms *t, int q, int64_t tab_len, int64_t coef_len) {
    t->q = q;
    t->tab_len = tab_len;
    t->coef_len = coef_len;
    t->tab = calloc((size_t)(q * tab_len), sizeof *t->tab);
    t->coef = calloc((size_t)(q * coef_len), sizeof *t->coef);
    if (!t->tab || !t->coef) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a Winograd table");
    return SJ_OK;
}

static void terms_free(terms *t) {
    free(t->tab);
    free(t->coef);
}

static sj_status terms_sum(sj_onnx_loader *L, sj_value data, int axis, const terms *t, int trank,
                           const int64_t *td, int crank, const int64_t *cd, sj_value *out) {
    sj_value sum = SJ_NO_VALUE;
    for (int j = 0; j < t->q; j++) {
        sj_value tab, coef, d;
        SJ_TRY(sj__onnx_made_param(L, SJ_I32, trank, td, t->tab + j * t->tab_len, &tab));
        SJ_TRY(sj__onnx_made_param(L, SJ_F32, crank, cd, t->coef + j * t->coef_len, &coef));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(L->g, data, tab, axis, &d)));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, d, coef, &d));
        if (sum == SJ_NO_VALUE) sum = d;
        else SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, sum, d, &sum));
    }
    *out = sum;
    return SJ_OK;
}

/* V [N, 16, T, C]: point (i, j) of a tile is
 * sum_uv BT[i][u] BT[j][v] d[u][v], four taps of +-1. Its term k reads
 * tab[k][p][t], the input position of the tap at tile t (or H * W, the
 * appended zero, in the padding), times coef[k][p]. */
static sj_status input_transform(sj_onnx_loader *L, sj_value src, const sj_onnx_window *w, const tiles *t,
                                 int64_t n, int64_t c, sj_value *out) {
    int64_t h = w->in[0], wd = w->in[1], flat = h * wd;
    terms tm;
    sj_status st = terms_alloc(L, &tm, Q_IN, POINTS * t->n, POINTS);
    for (int p = 0; p < POINTS && st == SJ_OK; p++) {
        int k = 0;
        for (int u = 0; u < A; u++)
            for (int v = 0; v < A; v++) {
                double cf = BT[(p / A) * A + u] * BT[(p % A) * A + v];
                if (cf == 0.0) continue;
                tm.coef[k * POINTS + p] = (float)cf;
                int32_t *tab = tm.tab + k * tm.tab_len + p * t->n;
                for (int64_t ty = 0; ty < t->th; ty++)
                    for (int64_t tx = 0; tx < t->tw; tx++) {
                        int64_t y = M_OUT * ty - w->pad_begin[0] + u, x = M_OUT * tx - w->pad_begin[1] + v;
                        bool in = y >= 0 && y < h && x >= 0 && x < wd;
                        tab[ty * t->tw + tx] = (int32_t)(in ? y * wd + x : flat);
                    }
                k++;
            }
    }
    int64_t td[2] = {POINTS, t->n}, cd[3] = {POINTS, 1, 1}, d4[4] = {n, POINTS, t->n, c};
    sj_value sum;
    if (st == SJ_OK) st = terms_sum(L, src, 2, &tm, 2, td, 3, cd, &sum);
    terms_free(&tm);
    SJ_TRY(st);
    return sj__onnx_node_prefix(L, sj_graph_reshape(L->g, sum, 4, d4, out));
}

/* U [16, C, M]: G g G^T for every (input, output) channel pair of the
 * weight [M, C, 3, 3], in double and rounded once. */
static sj_status filter_transform(sj_onnx_loader *L, const float *wt, int64_t c, int64_t m, sj_value *out) {
    float *u = malloc((size_t)(POINTS * c * m) * sizeof *u);
    if (!u) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a Winograd weight");
    for (int64_t mi = 0; mi < m; mi++)
        for (int64_t ci = 0; ci < c; ci++) {
            const float *k = wt + (mi * c + ci) * 9;
            double gk[A][3]; /* G g */
            for (int i = 0; i < A; i++)
                for (int b = 0; b < 3; b++)
                    gk[i][b] = G[i * 3] * k[b] + G[i * 3 + 1] * k[3 + b] + G[i * 3 + 2] * k[6 + b];
            for (int i = 0; i < A; i++)
                for (int j = 0; j < A; j++)
                    u[((i * A + j) * c + ci) * m + mi] =
                        (float)(gk[i][0] * G[j * 3] + gk[i][1] * G[j * 3 + 1] + gk[i][2] * G[j * 3 + 2]);
        }
    int64_t d[3] = {POINTS, c, m};
    sj_status st = sj__onnx_made_param(L, SJ_F32, 3, d, u, out);
    free(u);
    return st;
}

/* Y [N, P, M] from the products [N, 16, T, M]: output (y, x) is point
 * (y % 2, x % 2) of tile (y / 2, x / 2), sum_ij AT[y % 2][i] AT[x % 2][j]
 * M[i, j] there, nine products of +-1. Its term k reads the products (as
 * [N, 16 * T, M]) at tab[k][p] times coef[k][p]. */
static sj_status output_transform(sj_onnx_loader *L, sj_value prod, const sj_onnx_window *w, const tiles *t,
                                  int64_t n, int64_t m, sj_value *out) {
    int64_t ho = w->out[0], wo = w->out[1], np = ho * wo;
    terms tm;
    sj_status st = terms_alloc(L, &tm, Q_OUT, np, np);
    for (int64_t y = 0; y < ho && st == SJ_OK; y++)
        for (int64_t x = 0; x < wo; x++) {
            int64_t p = y * wo + x, tile = (y / M_OUT) * t->tw + x / M_OUT;
            int k = 0;
            for (int i = 0; i < A; i++)
                for (int j = 0; j < A; j++) {
                    double cf = AT[(y % M_OUT) * A + i] * AT[(x % M_OUT) * A + j];
                    if (cf == 0.0) continue;
                    tm.tab[k * np + p] = (int32_t)((i * A + j) * t->n + tile);
                    tm.coef[k * np + p] = (float)cf;
                    k++;
                }
        }
    int64_t flat[3] = {n, POINTS * t->n, m}, cd[2] = {np, 1};
    sj_value pf;
    if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_reshape(L->g, prod, 3, flat, &pf));
    if (st == SJ_OK) st = terms_sum(L, pf, 1, &tm, 1, &np, 2, cd, out);
    terms_free(&tm);
    return st;
}

sj_status sj__onnx_winograd_conv(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                                 const sj_shape *xs, const sj_onnx_window *w, const float *weight,
                                 int64_t m, sj_value *out) {
    tiles t = {.th = (w->out[0] + M_OUT - 1) / M_OUT, .tw = (w->out[1] + M_OUT - 1) / M_OUT};
    t.n = t.th * t.tw;
    int64_t n = xs->dims[0], c = xs->dims[1];
    sj_value src, v, u, prod;
    SJ_TRY(tiles_source(L, x, x_channels_last, xs, &src));
    SJ_TRY(input_transform(L, src, w, &t, n, c, &v));
    SJ_TRY(filter_transform(L, weight, c, m, &u));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_matmul(L->g, v, u, &prod)));
    return output_transform(L, prod, w, &t, n, m, out);
}
