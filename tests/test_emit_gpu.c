/* `shapejit emit` for the GPU targets, end to end through the command: the
 * PTX it writes assembles with ptxas, the CUDA C compiles with NVRTC (and
 * its PTX assembles), the cubin is a CUDA binary for the arch asked for that
 * cuobjdump lists where the toolkit has it. No GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"
#include "tests/test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "shapejit/ext/cuda_device.h"
#include "compile/gpu/nvrtc_impl.h"
#include "tests/ptxas_check.h"

#define CLI SJ_BINARY_DIR "/shapejit"
#define MODELS SJ_SOURCE_DIR "/examples/models/"

typedef struct fixture {
    sj_ctx *ctx;
    char dir[64];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK ||
        !scratch_dir_create(f->dir, sizeof f->dir, "emit"))
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

/* Runs argv[0] with stdout and stderr into `log`; its exit status, -1 when
 * it could not run. */
static int run(char *const argv[], const char *log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = -1, status;
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) == 0 &&
        waitpid(pid, &status, 0) == pid && WIFEXITED(status))
        rc = WEXITSTATUS(status);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* shapejit emit MODEL --rows 20 --target T [EXTRA...] --out FILE; the file's
 * text (malloc'd), failing the test with the command's log when it fails. */
static char *emit(fixture *f, const char *model, const char *target, const char *arch,
                  const char *path, const char *file, size_t *len) {
    char out[128], log[128], m[512];
    snprintf(out, sizeof out, "%s/%s", f->dir, file);
    snprintf(log, sizeof log, "%s/%s.log", f->dir, file);
    snprintf(m, sizeof m, MODELS "%s", model);
    char *argv[16] = {CLI, "emit", m, "--rows", "20", "--target", (char *)target, "--out", out};
    int n = 9;
    if (arch) argv[n++] = "--arch", argv[n++] = (char *)arch;
    if (path) argv[n++] = "--emit", argv[n++] = (char *)path;
    argv[n] = NULL;
    int rc = run(argv, log);
    if (rc != 0) {
        size_t ll;
        char *text = (char *)read_whole_file(log, &ll);
        text[ll] = 0;
        fail_msg("emit %s %s (%s): exit %d: %s", model, target, arch ? arch : "default", rc, text);
    }
    char *bytes = (char *)read_whole_file(out, len);
    bytes[*len] = 0;
    return bytes;
}

static void assemble(const char *ptx, int sm, const char *what) {
    char log[2048];
    int rc = sj_test_ptxas(ptx, sm, log, sizeof log);
    if (rc != 0) fail_msg("ptxas sm_%d rejected the PTX of %s (%d): %s", sm, what, rc, log);
}

static const char *const models[] = {"ffn.sjg", "mlp.sjg", "attention.sjg"};

static void test_nvptx_assembles(void **state) {
    fixture *f = *state;
    if (!sj_test_have_ptxas()) SJ_SKIP("no ptxas at build time (CUDA toolkit)");
    static const char *const arches[] = {"sm_80", "sm_90"};
    for (size_t m = 0; m < sizeof models / sizeof *models; m++)
        for (int a = 0; a < 2; a++) {
            size_t len;
            char *ptx = emit(f, models[m], "nvptx", arches[a], NULL, "k.ptx", &len);
            char want[32];
            snprintf(want, sizeof want, ".target %s", arches[a]);
            assert_non_null(strstr(ptx, want));
            assert_non_null(strstr(ptx, ".entry"));
            assemble(ptx, a ? 90 : 80, models[m]);
            free(ptx);
        }
}

static void test_cuda_c_compiles_with_nvrtc(void **state) {
    fixture *f = *state;
#ifndef SJ_HAVE_CUDA
    SJ_SKIP("built without the CUDA toolkit: no NVRTC");
#else
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        size_t len;
        char *src = emit(f, models[m], "cuda-c", NULL, NULL, "k.cu", &len);
        assert_non_null(strstr(src, "extern \"C\" __global__"));
        sj_gpu_code code;
        if (sj__nvrtc_compile(f->ctx, src, "emitted.cu", 90, &code) != SJ_OK)
            fail_msg("NVRTC rejected the emitted CUDA C of %s: %s", models[m],
                     sj_ctx_last_error(f->ctx));
        if (sj_test_have_ptxas()) assemble(code.ptx, 90, models[m]);
        sj__gpu_code_free(f->ctx, &code);
        free(src);
    }
#endif
}

/* The cuobjdump next to ptxas, if the toolkit has one. */
static bool cuobjdump_path(char *buf, size_t cap) {
#ifdef SJ_PTXAS
    snprintf(buf, cap, "%s", SJ_PTXAS);
    char *slash = strrchr(buf, '/');
    if (!slash) return false;
    snprintf(slash + 1, cap - (size_t)(slash + 1 - buf), "cuobjdump");
    return access(buf, X_OK) == 0;
#else
    (void)buf, (void)cap;
    return false;
#endif
}

static void test_cubin_is_for_the_arch(void **state) {
    fixture *f = *state;
#ifndef SJ_HAVE_NVJITLINK
    SJ_SKIP("built without nvJitLink: the NVPTX path makes PTX only");
#else
    char tool[4096];
    bool have_cuobjdump = cuobjdump_path(tool, sizeof tool);
    if (!have_cuobjdump)
        printf("no cuobjdump beside ptxas: the cubin is checked by its ELF header\n");
    static const struct {
        const char *arch, *path;
        int sm;
    } cases[] = {{"sm_80", NULL, 80}, {"sm_90", NULL, 90}, {"sm_90", "nvrtc", 90}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        char *cubin =
            emit(f, "attention.sjg", "cubin", cases[i].arch, cases[i].path, "k.cubin", &len);
        int sm = 0;
        assert_int_equal(sj_cubin_arch(f->ctx, cubin, len, &sm), SJ_OK);
        assert_int_equal(sm, cases[i].sm);
        free(cubin);
        if (have_cuobjdump) {
            char path[128], log[128];
            snprintf(path, sizeof path, "%s/k.cubin", f->dir);
            snprintf(log, sizeof log, "%s/cuobjdump.log", f->dir);
            char *argv[] = {tool, "-lelf", path, NULL};
            assert_int_equal(run(argv, log), 0);
        }
    }
#endif
}

/* Bad requests exit 2 with the reason and write nothing. */
static void test_bad_requests(void **state) {
    fixture *f = *state;
    char out[128], log[128];
    snprintf(out, sizeof out, "%s/bad.out", f->dir);
    snprintf(log, sizeof log, "%s/bad.log", f->dir);
    static const char *const cases[][5] = {
        {"cubin", "--arch", "sm_70", "unknown --arch 'sm_70'"},
        {"host-asm", "--arch", "sm_90", "--arch is for the GPU targets"},
        {"cuda-c", "--emit", "llvm", "--target cuda-c is the NVRTC path's source"},
        {"ptx", "--arch", "sm_90", "unknown target 'ptx'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *argv[] = {CLI,
                        "emit",
                        MODELS "ffn.sjg",
                        "--rows",
                        "3",
                        "--target",
                        (char *)cases[i][0],
                        (char *)cases[i][1],
                        (char *)cases[i][2],
                        "--out",
                        out,
                        NULL};
        assert_int_equal(run(argv, log), 2);
        size_t n;
        char *text = (char *)read_whole_file(log, &n);
        text[n] = 0;
        if (!strstr(text, cases[i][3])) fail_msg("case %zu: '%s' not in: %s", i, cases[i][3], text);
        free(text);
        assert_int_equal(access(out, F_OK), -1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvptx_assembles),
        cmocka_unit_test(test_cuda_c_compiles_with_nvrtc),
        cmocka_unit_test(test_cubin_is_for_the_arch),
        cmocka_unit_test(test_bad_requests),
    };
    return sj_run_tests(tests, setup, teardown);
}
