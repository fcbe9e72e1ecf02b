/* tools/conformance/conformance.h — the ONNX backend node-test conformance
 * runner and the backends it drives. A client of the library (built as the
 * static library sj_conformance for the CLI, the tests and the GPU check),
 * not part of libshapejit: it creates devices and compiles, which the ONNX
 * importer below it must not.
 *
 *   sj_onnx_backend be = sj_onnx_backend_interp();
 *   sj_onnx_conformance_options co;
 *   sj_onnx_conformance_options_init(&co);
 *   co.only = "gemm|softmax";              // POSIX extended regex on the test name
 *   sj_onnx_conformance_summary sum;
 *   sj_onnx_conformance_run(ctx, "/usr/share/libonnx-testdata/data/node", &be, &co, &sum);
 *   printf("%d passed, %d failed, %d unsupported\n", sum.passed, sum.failed, sum.unsupported);
 */
#ifndef SJ_TOOLS_CONFORMANCE_H
#define SJ_TOOLS_CONFORMANCE_H

#include "shapejit/ext/onnx.h"

/* Something that runs a graph: the reference interpreter, or a compiled
 * backend. run() has sj_interp_run's contract (inputs in declaration order,
 * outputs allocated by run, caller frees them; nothing left allocated on
 * failure). `user` is passed back unchanged. */
typedef struct sj_onnx_backend {
    const char *name;
    sj_status (*run)(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                     sj_tensor *outputs);
    void (*destroy)(void *user); /* releases `user`; NULL when there is nothing to release */
    void *user;
} sj_onnx_backend;

/* The reference interpreter (sj_interp_run) as a backend. */
sj_onnx_backend sj_onnx_backend_interp(void);
/* The LLVM host backend: each graph is compiled (sj_compile, host target)
 * and run on a host device. A graph with a symbolic dim is compiled at a
 * bucket extent larger than the active one (the next power of two above
 * it), so every test also checks that padded rows never leak into results.
 * Release with sj_onnx_backend_destroy. */
sj_status sj_onnx_backend_host_create(sj_ctx *ctx, sj_onnx_backend *out);
/* Releases what the backend holds (no-op for the interpreter). */
void sj_onnx_backend_destroy(sj_onnx_backend *b);

typedef enum sj_onnx_test_outcome {
    SJ_ONNX_TEST_PASSED,
    SJ_ONNX_TEST_FAILED,     /* wrong numbers, wrong shape, or a backend error */
    SJ_ONNX_TEST_UNSUPPORTED /* an op, dtype or feature outside what shapejit handles */
} sj_onnx_test_outcome;

/* One test's result, passed to the report callback. Strings are valid only
 * during the callback. */
typedef struct sj_onnx_test_result {
    const char *name;    /* the test folder's name, e.g. "test_gemm_alpha" */
    sj_onnx_test_outcome outcome;
    const char *message; /* why it failed / is unsupported; "" when passed */
} sj_onnx_test_result;

typedef struct sj_onnx_conformance_options {
    const char *only; /* POSIX extended regex on the test name; NULL = all */
    double rtol;      /* default 1e-3 */
    double atol;      /* default 1e-7 */
    /* Called once per test, in name order (may be NULL). */
    void (*report)(void *user, const sj_onnx_test_result *r);
    void *report_user;
} sj_onnx_conformance_options;

void sj_onnx_conformance_options_init(sj_onnx_conformance_options *o);

typedef struct sj_onnx_conformance_summary {
    int passed, failed, unsupported;
} sj_onnx_conformance_summary;

/* Runs every test folder under dir (each holds model.onnx and
 * test_data_set_N/input_K.pb, output_K.pb). A test passes when every output
 * of every data set matches within |got - want| <= atol + rtol * |want|,
 * NaN where NaN is expected. Models without a dim_param load with no
 * symbolic dim; int64 inputs (shapes, axes) are bound as constants.
 * Returns SJ_OK when the walk itself succeeded (whatever the tests did);
 * an unreadable dir or a bad regex is an error. */
sj_status sj_onnx_conformance_run(sj_ctx *ctx, const char *dir, const sj_onnx_backend *backend,
                                  const sj_onnx_conformance_options *o,
                                  sj_onnx_conformance_summary *out);

#endif
