/* Loading .onnx files by path (formats/onnx/onnx_file.c): the skeleton read,
 * which reads large raw_data blocks straight into their weights blocks,
 * gives the graph that unpacking the whole file gives (the same hash: its
 * weights, dims, names and nodes), keeps protobuf's last-one-wins rule for
 * a field given twice, and leaves every malformed file's error as the
 * whole-file path words it. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/test_util.h"
#include "tests/onnx_builder.h"
#include "shapejit/graph.h"

typedef struct fixture {
    sj_ctx *ctx;
    char dir[64];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK || !scratch_dir_create(f->dir, sizeof f->dir, "onnxfile"))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    remove_tree(f->dir);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static void write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

/* a and b hash alike: the same weights, dims, names and nodes. */
static void assert_same_graph(const sj_graph *a, const sj_graph *b, const char *path, int threads) {
    uint8_t ha[32], hb[32];
    sj_graph_hash(a, ha);
    sj_graph_hash(b, hb);
    if (memcmp(ha, hb, 32) != 0) fail_msg("%s: the loads differ (load_threads %d)", path, threads);
}

#define H 64 /* W is H x H floats: 16 KiB, a block the skeleton read takes */

/* y = x W + b over x [N, H]: W is a large initialiser, b (H floats) a small
 * one, which stays in the skeleton. seed varies W. */
static void build_linear(mb *b, float seed) {
    static float w[H * H], bias[H];
    for (int i = 0; i < H * H; i++) w[i] = seed + (float)((i * 37) % 101) / 101.0f;
    for (int i = 0; i < H; i++) bias[i] = 1.0f - (float)i / H;
    mb_init(b, 13);
    mb_input(b, "x", "N,64");
    mb_init_f(b, "W", 2, (int64_t[]){H, H}, w);
    mb_init_f(b, "b", 1, (int64_t[]){H}, bias);
    mb_node(b, "MatMul", "mm", "x,W", "xw");
    mb_node(b, "Add", "add", "xw,b", "y");
    mb_output(b, "y", "N,64");
}

/* Loads bytes from memory and from a file holding them; both must give st.
 * On SJ_OK the two graphs' hashes go to mem_hash and file_hash. The file's
 * error must name it; the memory load is named as the file. */
static void load_both(fixture *f, const uint8_t *bytes, size_t len, sj_status st,
                      uint8_t mem_hash[32], uint8_t file_hash[32], const char *fragment) {
    char path[128];
    snprintf(path, sizeof path, "%s/m.onnx", f->dir);
    write_bytes(path, bytes, len);
    sj_graph *gm = NULL, *gf = NULL;
    if (sj_onnx_load_mem(f->ctx, bytes, len, path, NULL, &gm) != st) fail_msg("memory load: %s", sj_ctx_last_error(f->ctx));
    if (fragment) assert_error_contains(f->ctx, fragment);
    assert_int_equal(sj_model_load(f->ctx, path, NULL, &gf), st);
    if (fragment) {
        assert_error_contains(f->ctx, fragment);
        assert_error_contains(f->ctx, path);
    }
    if (st != SJ_OK) {
        assert_null(gm);
        assert_null(gf);
        return;
    }
    sj_graph_hash(gm, mem_hash);
    sj_graph_hash(gf, file_hash);
    sj_graph_destroy(gm);
    sj_graph_destroy(gf);
}

static void test_file_load_matches_whole_read(void **state) {
    fixture *f = *state;
    mb b;
    build_linear(&b, 0.5f);
    size_t len;
    uint8_t *bytes = mb_pack(&b, &len);
    uint8_t hm[32], hf[32];
    load_both(f, bytes, len, SJ_OK, hm, hf, NULL);
    assert_memory_equal(hm, hf, 32);
    /* and the weights took part: another seed, another hash */
    mb c;
    build_linear(&c, 0.25f);
    uint8_t *other = mb_pack(&c, &len);
    uint8_t hm2[32], hf2[32];
    load_both(f, other, len, SJ_OK, hm2, hf2, NULL);
    assert_memory_equal(hm2, hf2, 32);
    assert_memory_not_equal(hm, hm2, 32);
    mb_free(&b);
    mb_free(&c);
}

/* A model whose initialisers are all small has nothing to strip: it loads
 * from the bytes the pass read, to the graph the whole read gives. */
static void test_small_model_loads_alike(void **state) {
    fixture *f = *state;
    static const float bias[4] = {1, -2, 3, -4};
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", "N,4");
    mb_init_f(&b, "b", 1, (int64_t[]){4}, bias);
    mb_node(&b, "Add", "add", "x,b", "y");
    mb_output(&b, "y", "N,4");
    size_t len;
    uint8_t *bytes = mb_pack(&b, &len);
    uint8_t hm[32], hf[32];
    load_both(f, bytes, len, SJ_OK, hm, hf, NULL);
    assert_memory_equal(hm, hf, 32);
    mb_free(&b);
}

/* dst: a varint of len, then len bytes of src; returns the bytes written. */
static size_t length_prefixed(uint8_t *dst, const void *src, size_t len) {
    size_t n = 0;
    for (size_t v = len;; v >>= 7) {
        dst[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f) break;
    }
    memcpy(dst + n, src, len);
    return n + len;
}

/* W's raw_data given twice (the second as a field protobuf-c writes after
 * the known ones): the second one counts, as protobuf reads it, on both
 * paths. */
static void test_field_given_twice_last_wins(void **state) {
    fixture *f = *state;
    mb second, twice;
    build_linear(&second, 0.75f);
    build_linear(&twice, 0.5f);
    Onnx__TensorProto *w2 = second.inits[0], *wt = twice.inits[0];
    /* an unknown field's bytes are packed as they are: the length first */
    uint8_t field[3 + sizeof(float) * H * H];
    size_t n = length_prefixed(field, w2->raw_data.data, w2->raw_data.len);
    ProtobufCMessageUnknownField extra = {
        .tag = 9, /* raw_data */
        .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
        .len = n,
        .data = field,
    };
    wt->base.n_unknown_fields = 1;
    wt->base.unknown_fields = &extra;
    size_t len;
    uint8_t *bytes = mb_pack(&twice, &len);
    uint8_t hm[32], hf[32], want[32], unused[32];
    load_both(f, bytes, len, SJ_OK, hm, hf, NULL);
    assert_memory_equal(hm, hf, 32);
    bytes = mb_pack(&second, &len);
    load_both(f, bytes, len, SJ_OK, want, unused, NULL);
    assert_memory_equal(hf, want, 32);

    /* a small raw_data after the large one wins too: 4 bytes for W's 4096
     * values, refused alike by both paths */
    static const float one = 1.0f;
    extra.len = length_prefixed(field, &one, sizeof one);
    bytes = mb_pack(&twice, &len);
    load_both(f, bytes, len, SJ_E_PARSE, NULL, NULL, "raw_data holds 4 bytes");
    wt->base.n_unknown_fields = 0;
    wt->base.unknown_fields = NULL;
    mb_free(&second);
    mb_free(&twice);
}

/* Every cut of the file, through a header, the middle of W's block or its
 * last byte, fails as the whole-file read fails it; a flipped byte in a
 * header does too, or loads the same graph both ways. */
static void test_cut_and_corrupt_files_fail_alike(void **state) {
    fixture *f = *state;
    mb b;
    build_linear(&b, 0.5f);
    size_t len;
    uint8_t *bytes = mb_pack(&b, &len);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    size_t cuts[] = {1, 7, 40, len / 2, len - 300, len - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        memcpy(copy, bytes, cuts[c]);
        load_both(f, copy, cuts[c], SJ_E_PARSE, NULL, NULL, "not a valid ONNX model");
    }
    char path[128], mem_msg[1024];
    snprintf(path, sizeof path, "%s/m.onnx", f->dir);
    for (size_t at = 0; at < 64 && at < len; at++) {
        memcpy(copy, bytes, len);
        copy[at] ^= 0x80;
        write_bytes(path, copy, len);
        sj_graph *gm = NULL, *gf = NULL;
        sj_status sm = sj_onnx_load_mem(f->ctx, copy, len, path, NULL, &gm);
        snprintf(mem_msg, sizeof mem_msg, "%s", sj_ctx_last_error(f->ctx));
        sj_status sf = sj_model_load(f->ctx, path, NULL, &gf);
        assert_int_equal(sm, sf);
        if (sm != SJ_OK) {
            assert_string_equal(mem_msg, sj_ctx_last_error(f->ctx));
        } else {
            assert_same_graph(gm, gf, path, 0);
        }
        sj_graph_destroy(gm);
        sj_graph_destroy(gf);
    }
    free(copy);
    mb_free(&b);
}

/* The exported models the suite commits: each loads by path to the graph
 * its bytes give when unpacked whole. */
static void test_exported_models_load_alike(void **state) {
    fixture *f = *state;
    char root[4000];
    snprintf(root, sizeof root, "%s/tests/data/real_models", SJ_SOURCE_DIR);
    DIR *d = opendir(root);
    assert_non_null(d);
    int checked = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s/model.onnx", root, e->d_name);
        FILE *fp = fopen(path, "rb");
        if (!fp) continue; /* a notes file, not a model folder */
        assert_int_equal(fseek(fp, 0, SEEK_END), 0);
        long n = ftell(fp);
        assert_true(n > 0);
        rewind(fp);
        uint8_t *bytes = malloc((size_t)n);
        assert_non_null(bytes);
        assert_int_equal(fread(bytes, 1, (size_t)n, fp), (size_t)n);
        fclose(fp);
        /* the manifests' two kinds: a vision model's batch dynamic, or an
         * encoder's seq with batch fixed at 1 */
        static const sj_dim_value batch1 = {.name = "batch", .value = 1};
        sj_model_options o;
        sj_model_options_init(&o);
        o.dynamic_name = "batch";
        sj_graph *gm = NULL, *gf = NULL;
        sj_status sm = sj_onnx_load_mem(f->ctx, bytes, (size_t)n, path, &o, &gm);
        if (sm != SJ_OK) {
            o.dynamic_name = "seq";
            o.fixed_dims = &batch1;
            o.n_fixed_dims = 1;
            sm = sj_onnx_load_mem(f->ctx, bytes, (size_t)n, path, &o, &gm);
        }
        /* the blocks read by one thread, by as many as the machine has,
         * and by more threads than most models have large blocks */
        for (int threads = 0; threads <= 16; threads += threads ? 15 : 1) {
            o.load_threads = threads;
            sj_status sf = sj_model_load(f->ctx, path, &o, &gf);
            assert_int_equal(sm, sf);
            if (sm == SJ_OK) assert_same_graph(gm, gf, path, threads);
            sj_graph_destroy(gf);
            gf = NULL;
        }
        if (sm == SJ_OK) checked++;
        sj_graph_destroy(gm);
        free(bytes);
    }
    closedir(d);
    if (checked < 15) fail_msg("%d of the committed models loaded", checked);
}

static void test_negative_load_threads_refused(void **state) {
    fixture *f = *state;
    mb b;
    build_linear(&b, 0.5f);
    size_t len;
    uint8_t *bytes = mb_pack(&b, &len);
    char path[128];
    snprintf(path, sizeof path, "%s/m.onnx", f->dir);
    write_bytes(path, bytes, len);
    sj_model_options o;
    sj_model_options_init(&o);
    o.load_threads = -1;
    sj_graph *g = NULL;
    assert_int_equal(sj_model_load(f->ctx, path, &o, &g), SJ_E_INVALID_ARG);
    assert_null(g);
    assert_error_contains(f->ctx, "load_threads -1 is negative");
    mb_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_load_matches_whole_read),
        cmocka_unit_test(test_small_model_loads_alike),
        cmocka_unit_test(test_field_given_twice_last_wins),
        cmocka_unit_test(test_cut_and_corrupt_files_fail_alike),
        cmocka_unit_test(test_exported_models_load_alike),
        cmocka_unit_test(test_negative_load_threads_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
