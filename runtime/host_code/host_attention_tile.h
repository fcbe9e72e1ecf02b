/* The fused attention kernel's tile code, instantiated once per code level
 * by host_attention.c (no include guard: it is included once per level).
 * Before including, define:
 *   SJ_AT_VT      the vector type (SJ_AT_VW floats: the level's register)
 *   SJ_AT_VW      its lanes: 16 AVX-512, 8 AVX2, 4 SSE
 *   SJ_AT_NR_MAX  the most row vectors per tile (the register blocks are
 *                 JU x NR_MAX and CU x NR_MAX vectors: sized to the level's
 *                 register file, since a vector wider than the registers
 *                 is split through the stack by the compiler)
 *   SJ_AT_ATTR    the level's target attribute (empty for the baseline)
 *   SJ_AT_NAME(f) f with the level's suffix
 * and then define the level's tile entry points from SJ_AT_NAME(attend_tile).
 * Not installed. */

/* Unaligned; macros, as a function returning a vector would have a
 * different ABI at each level. */
#define SJ_AT_LOAD(v, p) memcpy(&(v), (p), sizeof(SJ_AT_VT))
#define SJ_AT_STORE(p, v) memcpy((p), &(v), sizeof(SJ_AT_VT))
/* x as every lane (x - 0 is x, -0 included, so it compiles to a broadcast). */
#define SJ_AT_SPLAT(x) ((x) - (SJ_AT_VT){0})

/* The scores of keys j .. j + NJ of the block into s[j] (NR vectors of
 * rows each): NJ x NR accumulators in registers over the head dim, each
 * key element a broadcast shared by the NR row vectors. */
SJ_AT_ATTR static inline void SJ_AT_NAME(score_keys)(float *restrict s, const float *restrict qt, const float *restrict kb,
                              int64_t kl, int64_t kc, int64_t dk, int64_t j, int NJ, int NR) {
    const int tw = SJ_AT_VW * NR;
    SJ_AT_VT a[JU][SJ_AT_NR_MAX];
    for (int jj = 0; jj < NJ; jj++)
        for (int rr = 0; rr < NR; rr++) a[jj][rr] = (SJ_AT_VT){0};
    for (int64_t c = 0; c < dk; c++) {
        SJ_AT_VT qv[SJ_AT_NR_MAX];
        for (int rr = 0; rr < NR; rr++) SJ_AT_LOAD(qv[rr], qt + c * tw + SJ_AT_VW * rr);
        for (int jj = 0; jj < NJ; jj++) {
            SJ_AT_VT kv = SJ_AT_SPLAT(kb[(j + jj) * kl + c * kc]);
            for (int rr = 0; rr < NR; rr++) a[jj][rr] += qv[rr] * kv;
        }
    }
    for (int jj = 0; jj < NJ; jj++)
        for (int rr = 0; rr < NR; rr++) SJ_AT_STORE(s + (j + jj) * tw + SJ_AT_VW * rr, a[jj][rr]);
}

/* Value columns c0 .. c0 + NC of the accumulators: scaled by corr, plus the
 * block's weights times v, NC x NR accumulators in registers over the
 * block's keys. */
SJ_AT_ATTR static inline void SJ_AT_NAME(weigh_values)(float *restrict acc, const float *restrict p,
                                const float *restrict corr, const float *restrict vb, int64_t vl,
                                int64_t vc, int64_t nb, int64_t c0, int NC, int NR) {
    const int tw = SJ_AT_VW * NR;
    SJ_AT_VT a[CU][SJ_AT_NR_MAX], cv[SJ_AT_NR_MAX];
    for (int rr = 0; rr < NR; rr++) SJ_AT_LOAD(cv[rr], corr + SJ_AT_VW * rr);
    for (int cc = 0; cc < NC; cc++)
        for (int rr = 0; rr < NR; rr++) {
            SJ_AT_LOAD(a[cc][rr], acc + (c0 + cc) * tw + SJ_AT_VW * rr);
            a[cc][rr] *= cv[rr];
        }
    for (int64_t j = 0; j < nb; j++) {
        SJ_AT_VT pv[SJ_AT_NR_MAX];
        for (int rr = 0; rr < NR; rr++) SJ_AT_LOAD(pv[rr], p + j * tw + SJ_AT_VW * rr);
        for (int cc = 0; cc < NC; cc++) {
            SJ_AT_VT vv = SJ_AT_SPLAT(vb[j * vl + (c0 + cc) * vc]);
            for (int rr = 0; rr < NR; rr++) a[cc][rr] += pv[rr] * vv;
        }
    }
    for (int cc = 0; cc < NC; cc++)
        for (int rr = 0; rr < NR; rr++) SJ_AT_STORE(acc + (c0 + cc) * tw + SJ_AT_VW * rr, a[cc][rr]);
}

/* Up to VW * NR query rows (the tile's width, tw) against every key,
 * KEY_BLOCK keys at a time: scores, the online softmax step, then the
 * weighted values. The tile's queries (scaled, zero past the last row) and
 * accumulators are stored [head dim][tw], the block's scores and then
 * weights [key][tw]. Inlined (forced: it is large) into each width
 * below, so NR is a constant and the register blocks stay in registers. */
SJ_AT_ATTR __attribute__((always_inline)) static inline void SJ_AT_NAME(attend_tile)(
    const desc *d, const float *restrict q, const float *restrict kt, const float *restrict v,
    const float *restrict mask, float *restrict out, int64_t nq, int64_t n_keys, const int NR) {
    const int tw = SJ_AT_VW * NR;
    const int64_t dk = d->dk, dv = d->dims[4];
    const int64_t qm = d->st[0][2], qc = d->st[0][4], kc = d->st[1][4], kl = d->st[1][3];
    const int64_t vl = d->st[2][3], vc = d->st[2][4], mm = d->st[3][2], ml = d->st[3][3];
    const int64_t om = d->st[4][2], oc = d->st[4][4];
    _Alignas(64) float qt[SJ_ATTENTION_MAX_HEAD * TILE], acc[SJ_ATTENTION_MAX_HEAD * TILE];
    _Alignas(64) float p[KEY_BLOCK * TILE];
    _Alignas(64) float m[TILE], l[TILE], mx[TILE], ms[TILE], corr[TILE];
    for (int64_t c = 0; c < dk; c++)
        for (int64_t r = 0; r < tw; r++)
            qt[c * tw + r] = r < nq ? q[r * qm + c * qc] * d->scale : 0.0f;
    for (int64_t i = 0; i < dv * tw; i++) acc[i] = 0.0f;
    for (int r = 0; r < tw; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < n_keys; j0 += KEY_BLOCK) {
        int64_t nb = n_keys - j0 < KEY_BLOCK ? n_keys - j0 : KEY_BLOCK;
        const float *kb = kt + j0 * kl, *vb = v + j0 * vl;
        int64_t j = 0;
        for (; j + JU <= nb; j += JU) SJ_AT_NAME(score_keys)(p, qt, kb, kl, kc, dk, j, JU, NR);
        for (; j < nb; j++) SJ_AT_NAME(score_keys)(p, qt, kb, kl, kc, dk, j, 1, NR);
        if (mask) {
            const float *mb = mask + j0 * ml;
            for (j = 0; j < nb; j++) {
                float *pj = p + j * tw;
                if (mm == 0) /* one mask row for every query row: a broadcast */
                    for (int r = 0; r < tw; r++) pj[r] += mb[j * ml];
                else
                    for (int64_t r = 0; r < nq; r++) pj[r] += mb[r * mm + j * ml];
            }
        }
        /* The online softmax step, lane-wise. A NaN score never wins the
         * compare, so the max skips it and exp makes its row NaN. Where the
         * max is still -inf every score so far is -inf (or NaN): 0 stands in
         * for it, so those weights are 0 (or NaN), not exp(-inf + inf). */
        for (int r = 0; r < tw; r++) mx[r] = m[r];
        for (j = 0; j < nb; j++)
            for (int r = 0; r < tw; r++) mx[r] = p[j * tw + r] > mx[r] ? p[j * tw + r] : mx[r];
        for (int r = 0; r < tw; r++) {
            ms[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
            corr[r] = exp_nonpos(m[r] - ms[r]);
            l[r] *= corr[r];
            m[r] = mx[r];
        }
        for (j = 0; j < nb; j++)
            for (int r = 0; r < tw; r++) {
                float e = exp_nonpos(p[j * tw + r] - ms[r]);
                p[j * tw + r] = e;
                l[r] += e;
            }
        int64_t c0 = 0;
        for (; c0 + CU <= dv; c0 += CU) SJ_AT_NAME(weigh_values)(acc, p, corr, vb, vl, vc, nb, c0, CU, NR);
        for (; c0 < dv; c0++) SJ_AT_NAME(weigh_values)(acc, p, corr, vb, vl, vc, nb, c0, 1, NR);
    }
    for (int64_t r = 0; r < nq; r++) {
        /* l == 0: all scores -inf, NaN like softmax's 0/0. */
        float inv = l[r] == 0.0f ? NAN : 1.0f / l[r];
        for (int64_t c = 0; c < dv; c++) out[r * om + c * oc] = acc[c * tw + r] * inv;
    }
}

#undef SJ_AT_LOAD
#undef SJ_AT_STORE
#undef SJ_AT_SPLAT
