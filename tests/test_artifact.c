/* Artifact format: round trip, self-description, and rejection of every
 * truncation and of altered bytes; compile options hash; emitted text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/compile.h"
#include "plan/artifact_impl.h"

#define S SJ_DIM_SYM

typedef struct fixture {
    sj_ctx *ctx;
    sj_graph *g;
    sj_artifact *a;
    uint8_t *bytes;
    size_t len;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (sj_ctx_create(NULL, &f->ctx) != SJ_OK || sj_graph_create(f->ctx, "N", &f->g) != SJ_OK)
        return -1;
    float w[8 * 4] = {0};
    sj_value x, wv, y;
    if (sj_graph_input(f->g, "x", 2, (int64_t[]){S, 8}, &x) != SJ_OK ||
        sj_graph_param(f->g, "w", 2, (int64_t[]){8, 4}, w, &wv) != SJ_OK ||
        sj_graph_matmul(f->g, x, wv, &y) != SJ_OK || sj_graph_softmax(f->g, SJ_OP_SOFTMAX, y, 1, &y) ||
        sj_graph_output(f->g, y, "y") != SJ_OK)
        return -1;
    if (sj_compile(f->g, 32, NULL, &f->a) != SJ_OK) return -1;
    if (sj_artifact_serialize(f->a, &f->bytes, &f->len) != SJ_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sj_free(f->ctx, f->bytes);
    sj_artifact_destroy(f->a);
    sj_graph_destroy(f->g);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static void test_round_trip(void **state) {
    fixture *f = *state;
    sj_artifact *b;
    assert_int_equal(sj_artifact_deserialize(f->ctx, f->bytes, f->len, &b), SJ_OK);
    uint8_t *again;
    size_t len;
    assert_int_equal(sj_artifact_serialize(b, &again, &len), SJ_OK);
    assert_int_equal(len, f->len);
    assert_memory_equal(again, f->bytes, len);
    sj_free(f->ctx, again);

    sj_artifact_info info, orig;
    sj_artifact_get_info(b, &info);
    sj_artifact_get_info(f->a, &orig);
    assert_int_equal(info.format_version, SJ_ARTIFACT_FORMAT_VERSION);
    assert_string_equal(info.target, "host");
    assert_string_equal(info.triple, orig.triple);
    assert_true(strlen(info.cpu) > 0);
    assert_non_null(strchr(info.features, '+'));
    assert_string_equal(info.shapejit_version, sj_version_string());
    assert_memory_equal(info.llvm_version, "19.", 3);
    assert_int_equal(info.extent, 32);
    assert_int_equal(info.n_kernels, 2);
    assert_int_equal(info.n_code, 1);
    uint8_t h[32];
    sj_graph_hash(f->g, h);
    assert_memory_equal(info.graph_hash, h, 32);
    sj_compile_options o;
    sj_compile_options_init(&o);
    assert_true(info.options_hash == sj_compile_options_hash(&o));
    const uint8_t *code;
    size_t code_len;
    assert_int_equal(sj_artifact_find_code(b, SJ_CODE_HOST_OBJECT, &code, &code_len), SJ_OK);
    /* a bundle of one object file per kernel */
    assert_memory_equal(code, "SJOBJS01\x02\0\0\0", 12);
    assert_memory_equal(code + 12 + 8, "\x7f" "ELF", 4);
    assert_int_equal(sj_artifact_find_code(b, SJ_CODE_PTX, &code, &code_len), SJ_E_NOT_FOUND);
    sj_artifact_destroy(b);
}

/* The code parts are the objects, where the bytes hold them; a kernel
 * whose code does not depend on the bucket is the same part (the same
 * bytes, the same key) in another bucket's artifact, which is what lets a
 * store keep it once. */
static void test_code_parts(void **state) {
    fixture *f = *state;
    sj_artifact_part *p;
    int n;
    assert_int_equal(sj_artifact_code_parts(f->ctx, f->bytes, f->len, &p, &n), SJ_OK);
    assert_int_equal(n, 2);
    for (int i = 0; i < n; i++) {
        assert_true(p[i].offset + p[i].len <= f->len);
        assert_memory_equal(f->bytes + p[i].offset, "\x7f" "ELF", 4);
        if (i) assert_true(p[i].offset >= p[i - 1].offset + p[i - 1].len);
    }
    assert_memory_not_equal(p[0].key, p[1].key, 32);
    sj_artifact *a64;
    uint8_t *b64;
    size_t len64;
    sj_artifact_part *p64;
    int n64;
    assert_int_equal(sj_compile(f->g, 64, NULL, &a64), SJ_OK);
    assert_int_equal(sj_artifact_serialize(a64, &b64, &len64), SJ_OK);
    assert_int_equal(sj_artifact_code_parts(f->ctx, b64, len64, &p64, &n64), SJ_OK);
    int same = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n64; j++)
            if (!memcmp(p[i].key, p64[j].key, 32)) {
                assert_int_equal(p[i].len, p64[j].len);
                assert_memory_equal(f->bytes + p[i].offset, b64 + p64[j].offset, p[i].len);
                same++;
            }
    assert_true(same >= 1);
    /* bytes that are not an artifact are refused, not cut up */
    b64[len64 / 2] ^= 0x40;
    sj_artifact_part *bad = (sj_artifact_part *)1;
    int n_bad = 7;
    assert_int_equal(sj_artifact_code_parts(f->ctx, b64, len64, &bad, &n_bad), SJ_E_CORRUPT);
    assert_null(bad);
    assert_int_equal(n_bad, 0);
    sj_free(f->ctx, p);
    sj_free(f->ctx, p64);
    sj_free(f->ctx, b64);
    sj_artifact_destroy(a64);
}

static void test_every_truncation_rejected(void **state) {
    fixture *f = *state;
    for (size_t n = 0; n < f->len; n++) {
        sj_artifact *b = (sj_artifact *)1;
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any over-read */
        memcpy(copy, f->bytes, n);
        assert_int_equal(sj_artifact_deserialize(f->ctx, copy, n, &b), SJ_E_CORRUPT);
        assert_null(b);
        free(copy);
    }
}

static void test_flipped_bytes_rejected(void **state) {
    fixture *f = *state;
    uint8_t *copy = malloc(f->len);
    for (size_t i = 0; i < f->len; i++) {
        memcpy(copy, f->bytes, f->len);
        copy[i] ^= (uint8_t)(1u << (i % 8));
        sj_artifact *b;
        sj_status st = sj_artifact_deserialize(f->ctx, copy, f->len, &b);
        assert_true(st == SJ_E_CORRUPT || st == SJ_E_UNSUPPORTED);
        assert_non_null(strstr(sj_ctx_last_error(f->ctx), "artifact"));
    }
    free(copy);
}

/* A body whose checksum is right but whose contents lie is caught by the
 * bounds checks and plan validation. */
static void fix_checksum(uint8_t *p, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len - 8; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++) p[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

static void test_lying_contents_rejected(void **state) {
    fixture *f = *state;
    uint8_t *copy = malloc(f->len);
    int rejected = 0, total = 0;
    /* Every 4-byte field of the body set to 0xffffffff in turn. */
    for (size_t i = 24; i + 4 <= f->len - 8; i += 4) {
        memcpy(copy, f->bytes, f->len);
        memset(copy + i, 0xff, 4);
        fix_checksum(copy, f->len);
        sj_artifact *b;
        sj_status st = sj_artifact_deserialize(f->ctx, copy, f->len, &b);
        total++;
        if (st != SJ_OK) rejected++;
        else sj_artifact_destroy(b); /* e.g. inside the code blob: still a well-formed artifact */
    }
    assert_true(rejected > 0 && total > rejected);
    /* A newer format version is reported as such. */
    memcpy(copy, f->bytes, f->len);
    copy[8] = 99;
    fix_checksum(copy, f->len);
    sj_artifact *b;
    assert_int_equal(sj_artifact_deserialize(f->ctx, copy, f->len, &b), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "version 99"));
    free(copy);
}

static void test_options_hash(void **state) {
    (void)state;
    sj_compile_options a, b;
    sj_compile_options_init(&a);
    sj_compile_options_init(&b);
    assert_true(sj_compile_options_hash(&a) == sj_compile_options_hash(&b));
    b.fusion = false;
    assert_true(sj_compile_options_hash(&a) != sj_compile_options_hash(&b));
    sj_compile_options_init(&b);
    b.opt_level = 2;
    assert_true(sj_compile_options_hash(&a) != sj_compile_options_hash(&b));
    sj_compile_options_init(&b);
    b.cpu = "znver3";
    assert_true(sj_compile_options_hash(&a) != sj_compile_options_hash(&b));
    sj_compile_options_init(&b);
    b.blas_min_work = 4096;
    assert_true(sj_compile_options_hash(&a) != sj_compile_options_hash(&b));
}

static void test_emit_text(void **state) {
    fixture *f = *state;
    char *ir, *as;
    size_t n;
    assert_int_equal(sj_emit_text(f->g, 32, NULL, SJ_EMIT_LLVM_IR, &ir, &n), SJ_OK);
    assert_int_equal(strlen(ir), n);
    assert_non_null(strstr(ir, "define void @sjk_"));
    assert_int_equal(sj_emit_text(f->g, 32, NULL, SJ_EMIT_HOST_ASM, &as, &n), SJ_OK);
    assert_non_null(strstr(as, "sjk_"));
    sj_free(f->ctx, ir);
    sj_free(f->ctx, as);
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.target = SJ_TARGET_NVRTC;
    sj_artifact *a;
    sj_status st = sj_compile(f->g, 32, &o, &a);
    if (st == SJ_OK) sj_artifact_destroy(a);
    else assert_int_equal(st, SJ_E_UNSUPPORTED);
    sj_compile_options_init(&o);
    o.opt_level = 7;
    assert_int_equal(sj_compile(f->g, 32, &o, &a), SJ_E_INVALID_ARG);
    assert_int_equal(sj_compile(f->g, 0, NULL, &a), SJ_E_OUT_OF_RANGE);
}

typedef struct failing {
    int allocs, fail_at;
} failing;

static void *fail_alloc(void *u, size_t n) {
    failing *f = u;
    if (f->allocs++ == f->fail_at) return NULL;
    return malloc(n);
}
static void *fail_realloc(void *u, void *p, size_t n) {
    failing *f = u;
    if (f->allocs++ == f->fail_at) return NULL;
    return realloc(p, n);
}
static void fail_free(void *u, void *p) {
    (void)u;
    free(p);
}

/* Every allocation of a compile and of a deserialisation failing in turn:
 * an error each time, nothing leaked (ASan checks), nothing half-made. */
static void test_allocation_failures(void **state) {
    (void)state;
    failing fl = {0, -1};
    sj_ctx_config cfg;
    sj_ctx_config_init(&cfg);
    cfg.allocator = (sj_allocator){fail_alloc, fail_realloc, fail_free, &fl};
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(&cfg, &ctx), SJ_OK);
    sj_graph *g;
    sj_value x, y;
    assert_int_equal(sj_graph_create(ctx, "N", &g), SJ_OK);
    assert_int_equal(sj_graph_input(g, "x", 2, (int64_t[]){S, 4}, &x), SJ_OK);
    assert_int_equal(sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 1, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_EXP, y, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.opt_level = 0;
    /* Count a clean run's allocations, then fail each in turn. (The graph
     * hash tolerates a failed scratch allocation, so one run may pass.) */
    sj_artifact *a = NULL, *b = NULL;
    fl.allocs = 0;
    assert_int_equal(sj_compile(g, 8, &o, &a), SJ_OK);
    int total = fl.allocs, failed = 0;
    for (int i = 0; i < total; i++) {
        fl.allocs = 0;
        fl.fail_at = i;
        sj_status st = sj_compile(g, 8, &o, &b);
        if (st == SJ_OK) sj_artifact_destroy(b);
        else failed += st == SJ_E_NOMEM;
    }
    assert_true(failed >= total - 1);
    fl.fail_at = -1;
    uint8_t *bytes;
    size_t len;
    assert_int_equal(sj_artifact_serialize(a, &bytes, &len), SJ_OK);
    fl.allocs = 0;
    assert_int_equal(sj_artifact_deserialize(ctx, bytes, len, &b), SJ_OK);
    sj_artifact_destroy(b);
    total = fl.allocs;
    for (int i = 0; i < total; i++) {
        fl.allocs = 0;
        fl.fail_at = i;
        b = (sj_artifact *)1;
        assert_int_equal(sj_artifact_deserialize(ctx, bytes, len, &b), SJ_E_NOMEM);
        assert_null(b);
    }
    fl.fail_at = -1;
    sj_free(ctx, bytes);
    sj_artifact_destroy(a);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_code_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_truncation_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_bytes_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lying_contents_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_options_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_emit_text, setup, teardown),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
