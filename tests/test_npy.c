/* .npy read/write: round trips, every kind of bad header, payload size
 * checks, and that a failed write leaves no file behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shapejit/tensor.h"
#include "tests/test_util.h"

static sj_ctx *ctx;
static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    return scratch_dir_create(tmpdir, sizeof tmpdir, "test_npy") ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(tmpdir);
    sj_ctx_destroy(ctx);
    return 0;
}

/* An .npy image: preamble of the given version, the dict padded to 64,
 * then payload_bytes bytes of payload. */
static size_t make_npy(uint8_t *buf, int major, const char *dict, size_t payload_bytes) {
    size_t pre = major == 1 ? 10 : 12;
    size_t dlen = strlen(dict);
    size_t total = (pre + dlen + 1 + 63) / 64 * 64;
    size_t hlen = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(buf + pre, dict, dlen);
    memset(buf + pre + dlen, ' ', hlen - dlen - 1);
    buf[total - 1] = '\n';
    for (size_t i = 0; i < payload_bytes; i++) buf[total + i] = (uint8_t)i;
    return total + payload_bytes;
}

static void expect_parse_error(const uint8_t *buf, size_t len, const char *needle) {
    sj_tensor t;
    assert_int_equal(sj_npy_read_mem(ctx, buf, len, "case.npy", &t), SJ_E_PARSE);
    const char *msg = sj_ctx_last_error(ctx);
    if (!strstr(msg, "case.npy") || !strstr(msg, needle))
        fail_msg("message '%s' lacks 'case.npy' or '%s'", msg, needle);
    assert_null(t.data);
}

static void test_round_trip_every_rank(void **state) {
    (void)state;
    const int64_t dims[5][4] = {{0}, {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
    for (int rank = 0; rank <= 4; rank++) {
        sj_tensor t, back;
        assert_int_equal(sj_tensor_alloc(ctx, rank, dims[rank], &t), SJ_OK);
        for (int64_t i = 0; i < sj_tensor_numel(&t); i++) t.data[i] = (float)i * 0.37f - 1.5f;
        char path[512];
        snprintf(path, sizeof path, "%s/r%d.npy", tmpdir, rank);
        assert_int_equal(sj_npy_write(ctx, path, &t), SJ_OK);
        assert_int_equal(sj_npy_read(ctx, path, &back), SJ_OK);
        assert_int_equal(back.rank, rank);
        for (int i = 0; i < rank; i++) assert_int_equal(back.dims[i], t.dims[i]);
        assert_memory_equal(back.data, t.data, (size_t)sj_tensor_numel(&t) * sizeof(float));
        /* The header is what numpy writes: 64-byte aligned payload. */
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((sb.st_size - sj_tensor_numel(&t) * 4) % 64, 0);
        sj_tensor_free(ctx, &t);
        sj_tensor_free(ctx, &back);
    }
}

/* int64, int32 and bool round-trip with numpy's descr strings, rank 6 too. */
static void test_round_trip_typed(void **state) {
    (void)state;
    const sj_dtype types[3] = {SJ_I64, SJ_I32, SJ_BOOL};
    const char *descr[3] = {"'<i8'", "'<i4'", "'|b1'"};
    const int64_t dims[6] = {2, 1, 3, 1, 2, 2};
    for (int k = 0; k < 3; k++) {
        sj_tensor t, back;
        assert_int_equal(sj_tensor_alloc_typed(ctx, types[k], 6, dims, &t), SJ_OK);
        assert_int_equal(t.dtype, types[k]);
        int64_t n = sj_tensor_numel(&t);
        for (int64_t i = 0; i < n; i++) {
            if (types[k] == SJ_I64) t.i64[i] = (i - 7) * 3000000000LL;
            if (types[k] == SJ_I32) t.i32[i] = (int32_t)(i * 77 - 500);
            if (types[k] == SJ_BOOL) t.b8[i] = (uint8_t)(i % 3 == 0);
        }
        char path[512];
        snprintf(path, sizeof path, "%s/typed%d.npy", tmpdir, k);
        assert_int_equal(sj_npy_write(ctx, path, &t), SJ_OK);
        FILE *f = fopen(path, "rb");
        char head[128] = {0};
        assert_true(fread(head, 1, sizeof head - 1, f) > 0);
        fclose(f);
        assert_non_null(strstr(head + 10, descr[k])); /* after the binary preamble */
        assert_int_equal(sj_npy_read(ctx, path, &back), SJ_OK);
        assert_int_equal(back.dtype, types[k]);
        assert_int_equal(back.rank, 6);
        assert_memory_equal(back.bytes, t.bytes, (size_t)sj_tensor_bytes(&t));
        sj_tensor_free(ctx, &t);
        sj_tensor_free(ctx, &back);
    }
}

static void test_empty_tensor(void **state) {
    (void)state;
    int64_t dims[2] = {0, 3};
    sj_tensor t, back;
    assert_int_equal(sj_tensor_alloc(ctx, 2, dims, &t), SJ_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/empty.npy", tmpdir);
    assert_int_equal(sj_npy_write(ctx, path, &t), SJ_OK);
    assert_int_equal(sj_npy_read(ctx, path, &back), SJ_OK);
    assert_int_equal(back.rank, 2);
    assert_int_equal(back.dims[0], 0);
    assert_int_equal(back.dims[1], 3);
    sj_tensor_free(ctx, &t);
    sj_tensor_free(ctx, &back);
}

static void test_versions_2_and_3(void **state) {
    (void)state;
    uint8_t buf[256];
    for (int major = 1; major <= 3; major++) {
        size_t n = make_npy(buf, major, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}", 8);
        sj_tensor t;
        assert_int_equal(sj_npy_read_mem(ctx, buf, n, "v.npy", &t), SJ_OK);
        assert_int_equal(t.rank, 1);
        assert_int_equal(t.dims[0], 2);
        assert_memory_equal(t.data, buf + n - 8, 8);
        sj_tensor_free(ctx, &t);
    }
    /* Key order is free, and Python 2's long suffix is understood. */
    size_t n = make_npy(buf, 1, "{'shape': (2L, 1L), 'fortran_order': False, 'descr': '<f4', }", 8);
    sj_tensor t;
    assert_int_equal(sj_npy_read_mem(ctx, buf, n, "v.npy", &t), SJ_OK);
    assert_int_equal(t.rank, 2);
    sj_tensor_free(ctx, &t);
}

static void test_bad_headers(void **state) {
    (void)state;
    uint8_t buf[512];
    size_t n;
    const char *ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";

    n = make_npy(buf, 1, ok_dict, 8);
    buf[1] = 'X';
    expect_parse_error(buf, n, "magic");
    expect_parse_error(buf, 5, "magic");

    n = make_npy(buf, 1, ok_dict, 8);
    buf[6] = 4;
    expect_parse_error(buf, n, "version 4.0");

    n = make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
    expect_parse_error(buf, n, "'descr' is '<f8'");
    n = make_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
    expect_parse_error(buf, n, "descr");
    n = make_npy(buf, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 4);
    expect_parse_error(buf, n, "'descr' is '<u2'");
    n = make_npy(buf, 1, "{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", 16);
    expect_parse_error(buf, n, "descr");
    /* bool bytes other than 0 and 1 */
    n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", 4);
    expect_parse_error(buf, n, "bool element 2 is 2");

    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
    expect_parse_error(buf, n, "fortran_order");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8);
    expect_parse_error(buf, n, "fortran_order");

    n = make_npy(buf, 1, "{'descr': '<f4', 'shape': (2,), }", 8);
    expect_parse_error(buf, n, "lacks field 'fortran_order'");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8);
    expect_parse_error(buf, n, "unknown key 'x'");
    n = make_npy(buf, 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8);
    expect_parse_error(buf, n, "'descr' repeated");

    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8);
    expect_parse_error(buf, n, "'shape' is not a tuple");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8);
    expect_parse_error(buf, n, "'shape' is not a tuple");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8);
    expect_parse_error(buf, n, "shape");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 2), }", 8);
    expect_parse_error(buf, n, "more than 6 dims");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8);
    expect_parse_error(buf, n, "shape");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 2), }", 8);
    expect_parse_error(buf, n, "elements");

    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", 8);
    expect_parse_error(buf, n, "after the dict");
    n = make_npy(buf, 1, "('descr', '<f4')", 8);
    expect_parse_error(buf, n, "not a dict");

    /* No newline at the end of the header. */
    n = make_npy(buf, 1, ok_dict, 8);
    buf[n - 8 - 1] = ' ';
    expect_parse_error(buf, n, "newline");
    /* A header length pointing past the end of the bytes. */
    n = make_npy(buf, 1, ok_dict, 0);
    buf[9] = 0x10;
    expect_parse_error(buf, n, "truncated in the header");
}

static void test_payload_size(void **state) {
    (void)state;
    uint8_t buf[256];
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
    size_t n = make_npy(buf, 1, dict, 24);
    sj_tensor t;
    assert_int_equal(sj_npy_read_mem(ctx, buf, n, "ok.npy", &t), SJ_OK);
    sj_tensor_free(ctx, &t);
    expect_parse_error(buf, n - 1, "truncated file");
    expect_parse_error(buf, n - 24, "truncated file");
    n = make_npy(buf, 1, dict, 28);
    expect_parse_error(buf, n, "header lies");

    /* The same checks on a file, which is read without loading it whole. */
    char path[512];
    snprintf(path, sizeof path, "%s/short.npy", tmpdir);
    n = make_npy(buf, 1, dict, 20);
    write_whole_file(path, buf, n);
    assert_int_equal(sj_npy_read(ctx, path, &t), SJ_E_PARSE);
    assert_error_contains(ctx, "short.npy");
    assert_error_contains(ctx, "truncated file");
    assert_null(t.data);
}

static void test_read_io_errors(void **state) {
    (void)state;
    sj_tensor t;
    char path[512];
    snprintf(path, sizeof path, "%s/absent.npy", tmpdir);
    assert_int_equal(sj_npy_read(ctx, path, &t), SJ_E_IO);
    assert_error_contains(ctx, "absent.npy");
    assert_int_equal(sj_npy_read(ctx, tmpdir, &t), SJ_E_IO);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void test_failed_write_leaves_nothing(void **state) {
    (void)state;
    char sub[512], target[600];
    snprintf(sub, sizeof sub, "%s/w", tmpdir);
    assert_int_equal(mkdir(sub, 0777), 0);
    int64_t dims[2] = {4, 4};
    sj_tensor t;
    assert_int_equal(sj_tensor_alloc(ctx, 2, dims, &t), SJ_OK);

    /* The target is a directory: the data is written, the rename fails,
     * and the temporary file must be gone afterwards. */
    snprintf(target, sizeof target, "%s/dir.npy", sub);
    assert_int_equal(mkdir(target, 0777), 0);
    assert_int_equal(sj_npy_write(ctx, target, &t), SJ_E_IO);
    assert_error_contains(ctx, "dir.npy");
    assert_int_equal(count_entries(sub), 1);
    rmdir(target);

    /* A directory that does not exist. */
    snprintf(target, sizeof target, "%s/nodir/x.npy", sub);
    assert_int_equal(sj_npy_write(ctx, target, &t), SJ_E_IO);

    /* Malformed tensors are refused before any file is made. */
    snprintf(target, sizeof target, "%s/bad.npy", sub);
    sj_tensor bad = t;
    bad.rank = 7;
    assert_int_equal(sj_npy_write(ctx, target, &bad), SJ_E_INVALID_ARG);
    bad = t;
    bad.dims[1] = -1;
    assert_int_equal(sj_npy_write(ctx, target, &bad), SJ_E_INVALID_ARG);
    bad = t;
    bad.data = NULL;
    assert_int_equal(sj_npy_write(ctx, target, &bad), SJ_E_INVALID_ARG);
    assert_int_equal(count_entries(sub), 0);

    /* An existing file is replaced whole. */
    assert_int_equal(sj_npy_write(ctx, target, &t), SJ_OK);
    t.data[0] = 42.0f;
    assert_int_equal(sj_npy_write(ctx, target, &t), SJ_OK);
    sj_tensor back;
    assert_int_equal(sj_npy_read(ctx, target, &back), SJ_OK);
    assert_true(back.data[0] == 42.0f);
    assert_int_equal(count_entries(sub), 1);
    unlink(target);
    rmdir(sub);
    sj_tensor_free(ctx, &back);
    sj_tensor_free(ctx, &t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_rank),
        cmocka_unit_test(test_round_trip_typed),
        cmocka_unit_test(test_empty_tensor),
        cmocka_unit_test(test_versions_2_and_3),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_payload_size),
        cmocka_unit_test(test_read_io_errors),
        cmocka_unit_test(test_failed_write_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
