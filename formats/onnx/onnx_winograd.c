/* Winograd F(2x2, 3x3) convolution (onnx_winograd.h), after Lavin and
 * Gray, "Fast Algorithms for Convolutional Neural Networks" (2015): with
 * d a 4x4 input tile and g a 3x3 filter, the 2x2 outputs are
 * A^T [(G g G^T) . (B^T d B)] A, the product elementwise over 16 points,
 * so summed over the input channels it is 16 matrix products. */
#include "formats/onnx/onnx_winograd.h"
#include "formats/onnx/onnx_node.h"

#include <stdlib.h>

enum { TAPS = 16 };

static const float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
static const float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

/* Below these the GEMM is too narrow for its 2.25x to pay for the
 * transforms' passes over V and M (each 4x the input or output). */
enum { MIN_CHANNELS = 16, MIN_POSITIONS = 16 };

bool sj__onnx_winograd_fits(const sj_onnx_window *w, int64_t c, int64_t m) {
    if (w->n != 2 || c < MIN_CHANNELS || m < MIN_CHANNELS || w->positions < MIN_POSITIONS) return false;
    for (int d = 0; d < 2; d++)
        if (w->kernel[d] != 3 || w->stride[d] != 1 || w->dilation[d] != 1) return false;
    return true;
}

/* Tile geometry: th x tw tiles, each 2x2 outputs from a 4x4 input patch. */
typedef struct tiles {
    int64_t th, tw, n;
} tiles;

static sj_status param(sj_onnx_loader *L, sj_dtype dt, int rank, const int64_t *dims, const void *data,
                       sj_value *out) {
    char name[64];
    sj__onnx_synth_name(L, name, sizeof name);
    return sj__onnx_node_prefix(L, sj_graph_param_typed(L->g, name, dt, rank, dims, data, out));
}

/* The input transform's taps: point (i, j) of a tile is
 * sum_uv BT[i][u] BT[j][v] d[u][v], four taps of +-1 each. Term q of it
 * reads tab[q][i * 4 + j][t] (the input position of its tap at tile t, or
 * H * W, the appended zero, where that lies in the padding) times
 * sign[q][i * 4 + j]. */
typedef struct input_terms {
    int32_t *tab[4];
    float sign[4][TAPS];
    bool padded;
} input_terms;

static sj_status input_terms_make(sj_onnx_loader *L, const sj_onnx_window *w, const tiles *t,
                                  input_terms *it) {
    int64_t h = w->in[0], wd = w->in[1], flat = h * wd;
    it->padded = false;
    for (int q = 0; q < 4; q++) {
        it->tab[q] = malloc((size_t)(t->n * TAPS) * sizeof *it->tab[q]);
        if (!it->tab[q]) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a Winograd table");
    }
    for (int p = 0; p < TAPS; p++) {
        int i = p / 4, j = p % 4, q = 0;
        for (int k = 0; k < TAPS; k++) {
            float cf = BT[i][k / 4] * BT[j][k % 4];
            if (cf == 0.0f) continue;
            int u = k / 4, v = k % 4;
            it->sign[q][p] = cf;
            for (int64_t a = 0; a < t->th; a++)
                for (int64_t b = 0; b < t->tw; b++) {
                    int64_t y = 2 * a - w->pad_begin[0] + u, x = 2 * b - w->pad_begin[1] + v;
                    bool in = y >= 0 && y < h && x >= 0 && x < wd;
                    it->tab[q][p * t->n + a * t->tw + b] = (int32_t)(in ? y * wd + x : flat);
                    it->padded = it->padded || !in;
                }
            q++;
        }
    }
    return SJ_OK;
}

static void input_terms_free(input_terms *it) {
    for (int q = 0; q < 4; q++) free(it->tab[q]);
}

/* x as [1, N, H * W (+ 1 zero when padded), C]. */
static sj_status tiles_source(sj_onnx_loader *L, sj_value x, bool x_cl, const sj_shape *xs, bool padded,
                              sj_value *out) {
    sj_graph *g = L->g;
    int64_t n = xs->dims[0], c = xs->dims[1], flat = xs->dims[2] * xs->dims[3];
    if (!x_cl) {
        int64_t d3[3] = {n, c, flat};
        int perm[3] = {0, 2, 1};
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, x, 3, d3, &x)));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_transpose(g, x, perm, &x)));
    }
    int64_t d4[4] = {1, n, flat, c};
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, x, 4, d4, out)));
    if (!padded) return SJ_OK;
    sj_value zero;
    d4[2] = 1;
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_fill(g, SJ_F32, 0.0, 4, d4, &zero)));
    return sj__onnx_node_prefix(L, sj_graph_concat(g, *out, zero, 2, out));
}

/* V [16, N, T, C] (a view of [N, 16, T, C], so each GEMM's rows lie
 * contiguous): the four terms, each a gather of the input through its
 * [16, T] table times its signs, summed in one kernel that reads the input
 * in place; the same code for every conv of these extents, the tables and
 * signs being params. */
static sj_status input_transform(sj_onnx_loader *L, sj_value src, const input_terms *it, const tiles *t,
                                 int64_t n, int64_t c, sj_value *out) {
    sj_graph *g = L->g;
    sj_value sum = SJ_NO_VALUE;
    for (int q = 0; q < 4; q++) {
        int64_t td[2] = {TAPS, t->n}, sd[3] = {TAPS, 1, 1};
        sj_value tab, sign, d;
        SJ_TRY(param(L, SJ_I32, 2, td, it->tab[q], &tab));
        SJ_TRY(param(L, SJ_F32, 3, sd, it->sign[q], &sign));
        SJ_TRY(sj__onnx_node_prefix(L, sj_graph_gather(g, src, tab, 2, &d)));
        SJ_TRY(sj__onnx_binary(L, SJ_OP_MUL, d, sign, &d));
        if (sum == SJ_NO_VALUE) sum = d;
        else SJ_TRY(sj__onnx_binary(L, SJ_OP_ADD, sum, d, &sum));
    }
    int64_t d4[4] = {n, TAPS, t->n, c};
    int perm[4] = {1, 0, 2, 3};
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_reshape(g, sum, 4, d4, &sum)));
    return sj__onnx_node_prefix(L, sj_graph_transpose(g, sum, perm, out));
}

/* U [16, 1, C, M]: G g G^T for every (input, output) channel pair of the
 * weight [M, C, 3, 3]. */
static sj_status filter_transform(sj_onnx_loader *L, const float *wt, int64_t c, int64_t m, sj_value *out) {
    float *u = malloc((size_t)(TAPS * c * m) * sizeof *u);
    if (!u) return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a Winograd weight");
    for (int64_t mi = 0; mi < m; mi++)
        for (int64_t ci = 0; ci < c; ci++) {
            const float *k = wt + (mi * c + ci) * 9;
            float gk[4][3]; /* G g */
            for (int i = 0; i < 4; i++)
                for (int b = 0; b < 3; b++)
                    gk[i][b] = G[i][0] * k[b] + G[i][1] * k[3 + b] + G[i][2] * k[6 + b];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    u[((i * 4 + j) * c + ci) * m + mi] = gk[i][0] * G[j][0] + gk[i][1] * G[j][1] + gk[i][2] * G[j][2];
        }
    int64_t d[4] = {TAPS, 1, c, m};
    sj_status st = param(L, SJ_F32, 4, d, u, out);
    free(u);
    return st;
}

/* Y [N, P, M]: output (y, x) is point (y % 2, x % 2) of tile (y / 2, x / 2),
 * sum_ij AT[y % 2][i] AT[x % 2][j] M[i, j] there: each product gathered at
 * its position's tile and scaled by its coefficient there (0 or +-1). */
static sj_status output_transform(sj_onnx_loader *L, sj_value prod, const sj_onnx_window *w, const tiles *t,
                                  sj_value *out) {
    sj_graph *g = L->g;
    int64_t ho = w->out[0], wo = w->out[1], np = ho * wo;
    int32_t *tile = malloc((size_t)np * sizeof *tile);
    float *cf = malloc((size_t)np * sizeof *cf);
    if (!tile || !cf) {
        free(tile);
        free(cf);
        return sj__onnx_node_fail(L, SJ_E_NOMEM, "out of memory for a Winograd table");
    }
    for (int64_t y = 0; y < ho; y++)
        for (int64_t x = 0; x < wo; x++) tile[y * wo + x] = (int32_t)((y / 2) * t->tw + x / 2);
    sj_value ptab, sum = SJ_NO_VALUE;
    sj_status st = param(L, SJ_I32, 1, &np, tile, &ptab);
    for (int p = 0; p < TAPS && st == SJ_OK; p++) {
        int i = p / 4, j = p % 4;
        bool ones = true;
        for (int64_t y = 0; y < ho; y++)
            for (int64_t x = 0; x < wo; x++) {
                cf[y * wo + x] = AT[y % 2][i] * AT[x % 2][j];
                ones = ones && cf[y * wo + x] == 1.0f;
            }
        int32_t at = p;
        int64_t cd[2] = {np, 1};
        sj_value pick, slice, term, coef;
        st = param(L, SJ_I32, 0, NULL, &at, &pick);
        if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_gather(g, prod, pick, 0, &slice));
        if (st == SJ_OK) st = sj__onnx_node_prefix(L, sj_graph_gather(g, slice, ptab, 1, &term));
        if (st == SJ_OK && !ones) {
            st = param(L, SJ_F32, 2, cd, cf, &coef);
            if (st == SJ_OK) st = sj__onnx_binary(L, SJ_OP_MUL, term, coef, &term);
        }
        if (st == SJ_OK) {
            if (sum == SJ_NO_VALUE) sum = term;
            else st = sj__onnx_binary(L, SJ_OP_ADD, sum, term, &sum);
        }
    }
    free(tile);
    free(cf);
    if (st == SJ_OK) *out = sum;
    return st;
}

sj_status sj__onnx_winograd_conv(sj_onnx_loader *L, sj_value x, bool x_channels_last,
                                 const sj_shape *xs, const sj_onnx_window *w, const float *weight,
                                 int64_t m, sj_value *out) {
    tiles t = {.th = (w->out[0] + 1) / 2, .tw = (w->out[1] + 1) / 2};
    t.n = t.th * t.tw;
    input_terms it = {0};
    sj_value src, v, u, prod;
    sj_status st = input_terms_make(L, w, &t, &it);
    if (st == SJ_OK) st = tiles_source(L, x, x_channels_last, xs, it.padded, &src);
    if (st == SJ_OK) st = input_transform(L, src, &it, &t, xs->dims[0], xs->dims[1], &v);
    input_terms_free(&it);
    SJ_TRY(st);
    SJ_TRY(filter_transform(L, weight, xs->dims[1], m, &u));
    SJ_TRY(sj__onnx_node_prefix(L, sj_graph_matmul(L->g, v, u, &prod)));
    return output_transform(L, prod, w, &t, out);
}
