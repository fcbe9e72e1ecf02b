/* serve --ladder fit:K's switch (serve/ladder_switch.c, used by serve and serve --listen): requests are routed
 * to the provisional engine until the window fills and the fitted engine
 * has every bucket ready, then to the fitted one (sizes above its top stay
 * on the provisional); outputs match a reference across the switch; a
 * window that never fills fits nothing; K above the distinct sizes, a
 * failed open and a failed cost model keep the provisional serving; many
 * threads filling the window at once start one fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "serve/ladder_cost.h"
#include "serve/ladder_switch.h"
#include "shapejit/engine.h"
#include "tests/test_util.h"

#define FFN SJ_SOURCE_DIR "/examples/models/ffn.sjg"

static sj_ctx *ctx;

static int setup(void **state) {
    (void)state;
    return sj_ctx_create(NULL, &ctx) == SJ_OK ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    sj_ctx_destroy(ctx);
    return 0;
}

static sj_engine *open_engine(const char *backend, const char *ladder) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.backend = backend;
    cfg.ladder = ladder;
    sj_engine *e;
    sj_status st = sj_engine_open(ctx, FFN, &cfg, &e);
    if (st != SJ_OK) fail_msg("open %s %s: %s", backend, ladder, sj_ctx_last_error(ctx));
    return e;
}

typedef struct opener {
    const char *fail_with; /* non-NULL: the open fails with this */
    _Atomic int calls;
    char spec[256];        /* the last spec asked for */
} opener;

static sj_status open_host(void *user, const char *spec, sj_engine **out, char *why, size_t cap) {
    opener *o = user;
    atomic_fetch_add(&o->calls, 1);
    snprintf(o->spec, sizeof o->spec, "%s", spec);
    if (o->fail_with) {
        snprintf(why, cap, "%s", o->fail_with);
        return SJ_E_IO;
    }
    *out = open_engine("host", spec);
    return SJ_OK;
}

static sj_status cost_fails(void *user, int64_t lo, int64_t hi, sj_ladder_cost *out, char *why, size_t cap) {
    (void)user, (void)lo, (void)hi, (void)out;
    snprintf(why, cap, "no timer here");
    return SJ_E_DEVICE;
}

/* One request of `rows` run alone: recorded, then routed. */
static sj_engine *take(sj_ladder_switch *ls, int64_t rows) {
    sj_ladder_switch_record(ls, rows);
    return sj_ladder_switch_route(ls, rows);
}

/* y = f(x) for a seeded x of `rows` rows on e; returns the bucket extent. */
static int64_t run_rows(sj_engine *e, int64_t rows, uint64_t seed, sj_tensor *y) {
    int64_t d[2] = {rows, 64};
    sj_tensor x;
    assert_int_equal(sj_tensor_alloc(ctx, 2, d, &x), SJ_OK);
    sj_tensor_fill_seeded(&x, seed);
    sj_named_tensor in = {"x", x}, out[1];
    sj_run_info info;
    sj_status st = sj_engine_run(e, &in, 1, out, 1, &info);
    if (st != SJ_OK) fail_msg("run %lld rows: %s", (long long)rows, sj_ctx_last_error(ctx));
    sj_tensor_free(ctx, &x);
    *y = out[0].tensor;
    return info.bucket;
}

static void expect_close(const sj_tensor *a, const sj_tensor *b, int64_t rows) {
    assert_int_equal(sj_tensor_numel(a), rows * 64);
    assert_int_equal(sj_tensor_numel(b), rows * 64);
    for (int64_t i = 0; i < rows * 64; i++)
        if (fabsf(a->data[i] - b->data[i]) > 1e-4f * (1.0f + fabsf(b->data[i])))
            fail_msg("rows %lld, element %lld: %g vs reference %g", (long long)rows, (long long)i,
                     (double)a->data[i], (double)b->data[i]);
}

/* One request through the switch, checked against the reference engine;
 * returns the extent it ran in and which engine took it. */
static int64_t serve_checked(sj_ladder_switch *ls, sj_engine *ref, int64_t rows, uint64_t seed, sj_engine **took) {
    sj_engine *e = take(ls, rows);
    if (took) *took = e;
    sj_tensor y, want;
    int64_t extent = run_rows(e, rows, seed, &y);
    run_rows(ref, rows, seed, &want);
    expect_close(&y, &want, rows);
    sj_tensor_free(ctx, &y);
    sj_tensor_free(ctx, &want);
    return extent;
}

/* Two modes, 2 or 4 and 30..32 rows: the rows cost fits list:4,32. Before
 * the switch requests run in pow2:1:64's buckets; after, in the fitted
 * ones, with the same outputs as the interpreter's; 50 rows (above the
 * fitted top) stays on the provisional. */
static void test_switch_routes_and_outputs(void **state) {
    (void)state;
    sj_engine *prov = open_engine("host", "pow2:1:64"), *ref = open_engine("interp", "list:64");
    opener o = {0};
    sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 2, .window = 20, .open = open_host,
                                  .open_user = &o};
    sj_ladder_switch *ls;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_OK);
    for (int i = 0; i < 20; i++) {
        int64_t rows = i % 2 ? 1 + i % 4 : 30 + i % 3;
        sj_engine *took;
        serve_checked(ls, ref, rows, (uint64_t)i, &took);
        assert_ptr_equal(took, prov);
    }
    sj_ladder_switch_wait(ls);
    sj_engine *fitted = sj_ladder_switch_fitted(ls);
    assert_non_null(fitted);
    assert_string_equal(o.spec, "list:4,32");
    sj_engine_stats st;
    sj_engine_stats_get(fitted, &st);
    assert_int_equal(st.buckets, 2);
    assert_int_equal(st.buckets_ready, 2); /* precompiled before the switch */
    uint64_t compiles = st.compiles;
    for (int i = 0; i < 20; i++) {
        int64_t rows = i % 2 ? 1 + i % 4 : 30 + i % 3;
        sj_engine *took;
        int64_t extent = serve_checked(ls, ref, rows, 100 + (uint64_t)i, &took);
        assert_ptr_equal(took, fitted);
        assert_int_equal(extent, rows <= 4 ? 4 : 32);
    }
    sj_engine *took;
    assert_int_equal(serve_checked(ls, ref, 50, 7, &took), 64);
    assert_ptr_equal(took, prov);
    sj_engine_stats_get(fitted, &st);
    assert_int_equal(st.compiles, compiles); /* nothing compiled on a request */
    sj_ladder_switch_report r;
    sj_ladder_switch_get(ls, &r);
    assert_true(r.fitted && r.switched);
    assert_string_equal(r.fitted_spec, "list:4,32");
    assert_int_equal(r.seen, 20);
    assert_int_equal(r.distinct, 5); /* 2, 4, 30, 31, 32 */
    assert_int_equal(r.lo, 2);
    assert_int_equal(r.hi, 32);
    assert_int_equal(r.switched_after, 20);
    assert_int_equal(r.on_fitted, 20);
    assert_int_equal(r.above_fitted, 1);
    assert_string_equal(r.error, "");
    assert_int_equal(o.calls, 1);
    sj_ladder_switch_destroy(ls);
    sj_engine_close(ref);
    sj_engine_close(prov);
}

/* Fewer requests than the window: no fit starts, every request stays on
 * the provisional engine, and wait returns at once. */
static void test_window_not_filled(void **state) {
    (void)state;
    sj_engine *prov = open_engine("interp", "pow2:1:16");
    opener o = {0};
    sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 3, .window = 100, .open = open_host,
                                  .open_user = &o};
    sj_ladder_switch *ls;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_OK);
    for (int64_t rows = 1; rows <= 5; rows++) assert_ptr_equal(take(ls, rows), prov);
    sj_ladder_switch_wait(ls);
    sj_ladder_switch_report r;
    sj_ladder_switch_get(ls, &r);
    assert_int_equal(r.seen, 5);
    assert_int_equal(r.window, 100);
    assert_false(r.fitted);
    assert_false(r.switched);
    assert_null(r.fitted_spec);
    assert_null(sj_ladder_switch_fitted(ls));
    assert_int_equal(o.calls, 0);
    sj_ladder_switch_destroy(ls);
    sj_engine_close(prov);
}

/* Every request one size, K = 3: one bucket at that size; a larger size
 * afterwards runs on the provisional. */
static void test_one_size_k_above_distinct(void **state) {
    (void)state;
    sj_engine *prov = open_engine("host", "pow2:1:16");
    opener o = {0};
    sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 3, .window = 6, .open = open_host,
                                  .open_user = &o};
    sj_ladder_switch *ls;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_OK);
    for (int i = 0; i < 6; i++) assert_ptr_equal(take(ls, 7), prov);
    sj_ladder_switch_wait(ls);
    sj_ladder_switch_report r;
    sj_ladder_switch_get(ls, &r);
    assert_true(r.switched);
    assert_string_equal(r.fitted_spec, "list:7");
    assert_int_equal(r.fit.buckets, 1);
    assert_int_equal(r.distinct, 1);
    sj_engine *fitted = sj_ladder_switch_fitted(ls);
    assert_ptr_equal(take(ls, 7), fitted);
    assert_ptr_equal(take(ls, 3), fitted);
    assert_ptr_equal(take(ls, 8), prov);
    sj_ladder_switch_destroy(ls);
    sj_engine_close(prov);
}

typedef struct told {
    char line[600];
    _Atomic int n;
} told;
static void remember(void *user, const char *line) {
    told *t = user;
    snprintf(t->line, sizeof t->line, "%s", line);
    atomic_fetch_add(&t->n, 1);
}

/* The fitted engine does not open, or the cost model cannot be measured:
 * told once, no switch, the provisional keeps serving. */
static void test_failures_keep_provisional(void **state) {
    (void)state;
    sj_engine *prov = open_engine("interp", "pow2:1:16");
    for (int which = 0; which < 2; which++) {
        opener o = {.fail_with = which == 0 ? "disk on fire" : NULL};
        told t = {0};
        sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 2, .window = 4,
                                      .cost = which == 1 ? cost_fails : NULL, .open = open_host,
                                      .open_user = &o, .on_event = remember, .event_user = &t};
        sj_ladder_switch *ls;
        assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_OK);
        for (int64_t rows = 1; rows <= 4; rows++) take(ls, rows);
        sj_ladder_switch_wait(ls);
        assert_ptr_equal(take(ls, 2), prov);
        sj_ladder_switch_report r;
        sj_ladder_switch_get(ls, &r);
        assert_false(r.switched);
        assert_int_equal(r.state, SJ_LADDER_SWITCH_FAILED);
        assert_int_equal(t.n, 1);
        const char *want = which == 0 ? "opening the fitted ladder failed: disk on fire"
                                      : "measuring the cost model failed: no timer here";
        if (!strstr(r.error, want) || !strstr(t.line, want) || !strstr(t.line, "provisional ladder keeps serving"))
            fail_msg("error '%s', told '%s'", r.error, t.line);
        assert_int_equal(o.calls, which == 0 ? 1 : 0);
        sj_ladder_switch_destroy(ls);
    }
    sj_engine_close(prov);
}

static void test_bad_config(void **state) {
    (void)state;
    sj_engine *prov = open_engine("interp", "pow2:1:16");
    opener o = {0};
    sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 0, .window = 4, .open = open_host,
                                  .open_user = &o};
    sj_ladder_switch *ls = (sj_ladder_switch *)&c;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_E_INVALID_ARG);
    assert_null(ls);
    c.k = SJ_LADDER_MAX_BUCKETS + 1;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_E_INVALID_ARG);
    c.k = 2, c.window = 0;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_E_INVALID_ARG);
    c.window = SJ_LADDER_SWITCH_MAX_WINDOW + 1;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_E_INVALID_ARG);
    c.window = 4, c.open = NULL;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_E_INVALID_ARG);
    if (!strstr(sj_ctx_last_error(ctx), "ladder fit: needs a provisional engine, an opener"))
        fail_msg("message: %s", sj_ctx_last_error(ctx));
    sj_ladder_switch_destroy(NULL);
    sj_engine_close(prov);
}

/* "fit:K" is recognised in one place for serve, serve --listen and a
 * model repository's config.json. */
static void test_parse(void **state) {
    (void)state;
    int k = -7;
    assert_int_equal(sj_ladder_switch_parse("fit:3", &k), 1);
    assert_int_equal(k, 3);
    assert_int_equal(sj_ladder_switch_parse("fit:4096", &k), 1);
    assert_int_equal(k, 4096);
    k = -7;
    const char *bad[] = {"fit:0", "fit:abc", "fit:", "fit:4097", "fit:-2", "fit:3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(sj_ladder_switch_parse(bad[i], &k), -1);
    assert_int_equal(sj_ladder_switch_parse("pow2:1:64", &k), 0);
    assert_int_equal(sj_ladder_switch_parse("list:3", &k), 0);
    assert_int_equal(sj_ladder_switch_parse(NULL, &k), 0);
    assert_int_equal(k, -7);
}

/* A server batches requests: the window records each request's rows while
 * a batch routes by its summed rows, which may lie above the fitted top
 * (then the provisional runs it). The state reads recording, then
 * switched. */
static void test_record_apart_from_route(void **state) {
    (void)state;
    sj_engine *prov = open_engine("interp", "pow2:1:16");
    opener o = {0};
    sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 2, .window = 3, .open = open_host,
                                  .open_user = &o};
    sj_ladder_switch *ls;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_OK);
    sj_ladder_switch_report r;
    sj_ladder_switch_get(ls, &r);
    assert_int_equal(r.state, SJ_LADDER_SWITCH_RECORDING);
    assert_string_equal(sj_ladder_switch_state_name(r.state), "recording");
    /* Three requests of 2, 2 and 9 rows ran as one batch of 13. */
    sj_ladder_switch_record(ls, 2);
    sj_ladder_switch_record(ls, 2);
    sj_ladder_switch_record(ls, 9);
    sj_ladder_switch_wait(ls);
    sj_ladder_switch_get(ls, &r);
    assert_int_equal(r.state, SJ_LADDER_SWITCH_SWITCHED);
    assert_string_equal(sj_ladder_switch_state_name(r.state), "switched");
    assert_string_equal(r.fitted_spec, "list:2,9");
    assert_int_equal(r.hi, 9);
    sj_engine *fitted = sj_ladder_switch_fitted(ls);
    assert_ptr_equal(sj_ladder_switch_route(ls, 13), prov);
    assert_ptr_equal(sj_ladder_switch_route(ls, 9), fitted);
    assert_ptr_equal(sj_ladder_switch_route(ls, 1), fitted);
    /* After the switch nothing more is recorded. */
    sj_ladder_switch_record(ls, 5);
    sj_ladder_switch_get(ls, &r);
    assert_int_equal(r.seen, 3);
    assert_int_equal(r.switched_after, 3);
    assert_int_equal(r.on_fitted, 2);
    assert_int_equal(r.above_fitted, 1);
    sj_ladder_switch_destroy(ls);
    sj_engine_close(prov);
}

static sj_status open_interp(void *user, const char *spec, sj_engine **out, char *why, size_t cap) {
    opener *o = user;
    atomic_fetch_add(&o->calls, 1);
    if (o->fail_with) {
        snprintf(why, cap, "%s", o->fail_with);
        return SJ_E_IO;
    }
    *out = open_engine("interp", spec);
    return SJ_OK;
}

/* The measured cost model both serving paths fit with: one-bucket engines
 * at extents spread over the range, coefficients >= 0; an opener's failure
 * and a bad range are errors that say so. */
static void test_cost_measure(void **state) {
    (void)state;
    opener o = {0};
    sj_ladder_cost_fit m;
    assert_int_equal(sj_ladder_cost_measure(ctx, 1, 64, open_interp, &o, &m), SJ_OK);
    assert_int_equal(m.n_grid, 4);
    assert_int_equal(o.calls, 4);
    assert_int_equal(m.grid[0], 1);
    assert_int_equal(m.grid[3], 64);
    assert_true(m.n_points >= 10); /* 1 row at extent 1, four sizes at the others */
    const double c[] = {m.cost.a, m.cost.b, m.cost.c, m.cost.d, m.cost.e};
    for (int i = 0; i < 5; i++) assert_true(isfinite(c[i]) && c[i] >= 0);
    /* Some time per request, whatever the terms take it as. */
    assert_true(sj_ladder_cost_at(&m.cost, 64, 64) > 0);

    o.fail_with = "disk on fire";
    assert_int_equal(sj_ladder_cost_measure(ctx, 1, 64, open_interp, &o, &m), SJ_E_IO);
    if (!strstr(sj_ctx_last_error(ctx), "cost model: opening a bucket at extent 1: disk on fire"))
        fail_msg("message: %s", sj_ctx_last_error(ctx));
    assert_int_equal(sj_ladder_cost_measure(ctx, 9, 3, open_interp, &o, &m), SJ_E_INVALID_ARG);
    if (!strstr(sj_ctx_last_error(ctx), "sizes 9..3 are not a range"))
        fail_msg("message: %s", sj_ctx_last_error(ctx));
}

typedef struct hammer {
    sj_ladder_switch *ls;
    sj_engine *prov;
    int id;
    int wrong;
} hammer;
static void *hammer_thread(void *arg) {
    hammer *h = arg;
    for (int i = 0; i < 200; i++) {
        int64_t rows = 1 + (h->id * 7 + i) % 12;
        sj_engine *e = take(h->ls, rows);
        sj_engine *fitted = sj_ladder_switch_fitted(h->ls);
        if (e != h->prov && e != fitted) h->wrong++;
    }
    return NULL;
}

/* Four threads fill the window at once: one fit, exactly `window` sizes
 * recorded, every request routed to one of the two engines. */
static void test_threads_fill_window(void **state) {
    (void)state;
    sj_engine *prov = open_engine("interp", "pow2:1:16");
    opener o = {0};
    sj_ladder_switch_config c = {.ctx = ctx, .provisional = prov, .k = 2, .window = 50, .open = open_host,
                                  .open_user = &o};
    sj_ladder_switch *ls;
    assert_int_equal(sj_ladder_switch_create(&c, &ls), SJ_OK);
    pthread_t t[4];
    hammer h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (hammer){.ls = ls, .prov = prov, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &h[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    sj_ladder_switch_wait(ls);
    for (int i = 0; i < 4; i++) assert_int_equal(h[i].wrong, 0);
    sj_ladder_switch_report r;
    sj_ladder_switch_get(ls, &r);
    assert_int_equal(o.calls, 1);
    assert_int_equal(r.seen, 50);
    assert_true(r.switched);
    assert_int_equal(r.hi, 12);
    assert_int_equal(r.switched_after + r.on_fitted + r.above_fitted, 800);
    sj_ladder_switch_destroy(ls);
    sj_engine_close(prov);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_switch_routes_and_outputs), cmocka_unit_test(test_window_not_filled),
        cmocka_unit_test(test_one_size_k_above_distinct), cmocka_unit_test(test_failures_keep_provisional),
        cmocka_unit_test(test_bad_config),                cmocka_unit_test(test_threads_fill_window),
        cmocka_unit_test(test_parse),                     cmocka_unit_test(test_record_apart_from_route),
        cmocka_unit_test(test_cost_measure),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
