/* LLVM NVPTX without a GPU: a hand-built kernel (thread indexing, libdevice
 * math, shared-memory tree reduction) becomes PTX that ptxas assembles for
 * sm_80 and sm_90 and nvJitLink links to a cubin; bad IR is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <string.h>

#include "compile/gpu/nvptx_impl.h"
#include "compile/gpu/nvrtc_impl.h"
#include "tests/ptxas_check.h"

#define BLOCK 256

typedef struct kb {
    LLVMContextRef lc;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMTypeRef i32, i64, f32, ptr;
} kb;

static void kb_init(kb *k, const char *name) {
    k->lc = LLVMContextCreate();
    k->m = LLVMModuleCreateWithNameInContext(name, k->lc);
    k->b = LLVMCreateBuilderInContext(k->lc);
    k->i32 = LLVMInt32TypeInContext(k->lc);
    k->i64 = LLVMInt64TypeInContext(k->lc);
    k->f32 = LLVMFloatTypeInContext(k->lc);
    k->ptr = LLVMPointerTypeInContext(k->lc, 0);
}

static void kb_free(kb *k) {
    LLVMDisposeBuilder(k->b);
    LLVMDisposeModule(k->m);
    LLVMContextDispose(k->lc);
}

static LLVMValueRef load_ptr(kb *k, LLVMValueRef base, unsigned i) {
    LLVMValueRef idx = LLVMConstInt(k->i64, i, 0);
    LLVMValueRef p = LLVMBuildGEP2(k->b, k->ptr, base, &idx, 1, "");
    return LLVMBuildLoad2(k->b, k->ptr, p, "");
}

/* y[row] = sum_j exp(x[row, j]) for row < active_extent: one block per row,
 * a strided partial sum per thread, then a shared-memory tree. */
static LLVMValueRef build_row_sum_exp(kb *k) {
    LLVMTypeRef params[3] = {k->ptr, k->ptr, k->i64};
    LLVMValueRef fn = LLVMAddFunction(k->m, "row_sum_exp",
                                      LLVMFunctionType(LLVMVoidTypeInContext(k->lc), params, 3, 0));
    sj__nvptx_mark_kernel(k->m, fn);
    LLVMValueRef shared = sj__nvptx_shared_f32(k->m, "partial", BLOCK);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->lc, fn, "entry"),
                      body = LLVMAppendBasicBlockInContext(k->lc, fn, "body"),
                      loop = LLVMAppendBasicBlockInContext(k->lc, fn, "loop"),
                      step = LLVMAppendBasicBlockInContext(k->lc, fn, "step"),
                      reduce = LLVMAppendBasicBlockInContext(k->lc, fn, "reduce"),
                      tree = LLVMAppendBasicBlockInContext(k->lc, fn, "tree"),
                      tree_body = LLVMAppendBasicBlockInContext(k->lc, fn, "tree_body"),
                      tree_add = LLVMAppendBasicBlockInContext(k->lc, fn, "tree_add"),
                      tree_sync = LLVMAppendBasicBlockInContext(k->lc, fn, "tree_sync"),
                      done = LLVMAppendBasicBlockInContext(k->lc, fn, "done"),
                      write = LLVMAppendBasicBlockInContext(k->lc, fn, "write"),
                      exit = LLVMAppendBasicBlockInContext(k->lc, fn, "exit");
    LLVMBuilderRef b = k->b;
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef bufs = LLVMGetParam(fn, 0), info = LLVMGetParam(fn, 1), n = LLVMGetParam(fn, 2);
    LLVMValueRef x = load_ptr(k, bufs, 0), y = load_ptr(k, bufs, 1);
    LLVMValueRef cols = LLVMBuildLoad2(b, k->i64, info, "cols");
    LLVMValueRef row = LLVMBuildZExt(b, sj__nvptx_sreg(k->m, b, "ctaid.x"), k->i64, "row");
    LLVMValueRef tid32 = sj__nvptx_sreg(k->m, b, "tid.x");
    LLVMValueRef ntid32 = sj__nvptx_sreg(k->m, b, "ntid.x");
    LLVMValueRef tid = LLVMBuildZExt(b, tid32, k->i64, "tid");
    LLVMValueRef ntid = LLVMBuildZExt(b, ntid32, k->i64, "ntid");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, row, n, ""), body, exit);

    LLVMPositionBuilderAtEnd(b, body);
    LLVMValueRef row_base = LLVMBuildMul(b, row, cols, "row_base");
    LLVMBuildBr(b, loop);

    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef j = LLVMBuildPhi(b, k->i64, "j"), acc = LLVMBuildPhi(b, k->f32, "acc");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, j, cols, ""), step, reduce);

    LLVMPositionBuilderAtEnd(b, step);
    LLVMValueRef at = LLVMBuildAdd(b, row_base, j, "");
    LLVMValueRef v = LLVMBuildLoad2(b, k->f32, LLVMBuildGEP2(b, k->f32, x, &at, 1, ""), "v");
    LLVMValueRef e = sj__nvptx_libdevice_f32(k->m, b, "__nv_expf", &v, 1);
    LLVMValueRef acc2 = LLVMBuildFAdd(b, acc, e, "acc2");
    LLVMValueRef j2 = LLVMBuildAdd(b, j, ntid, "j2");
    LLVMBuildBr(b, loop);
    LLVMValueRef zero = LLVMConstReal(k->f32, 0.0);
    LLVMAddIncoming(j, (LLVMValueRef[]){tid, j2}, (LLVMBasicBlockRef[]){body, step}, 2);
    LLVMAddIncoming(acc, (LLVMValueRef[]){zero, acc2}, (LLVMBasicBlockRef[]){body, step}, 2);

    LLVMTypeRef arr = LLVMArrayType2(k->f32, BLOCK);
    LLVMPositionBuilderAtEnd(b, reduce);
    LLVMValueRef z64 = LLVMConstInt(k->i64, 0, 0);
    LLVMValueRef mine = LLVMBuildGEP2(b, arr, shared, (LLVMValueRef[]){z64, tid}, 2, "mine");
    LLVMBuildStore(b, acc, mine);
    sj__nvptx_barrier(k->m, b);
    LLVMValueRef half0 = LLVMBuildLShr(b, ntid, LLVMConstInt(k->i64, 1, 0), "");
    LLVMBuildBr(b, tree);

    LLVMPositionBuilderAtEnd(b, tree);
    LLVMValueRef s = LLVMBuildPhi(b, k->i64, "s");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntUGT, s, z64, ""), tree_body, done);

    LLVMPositionBuilderAtEnd(b, tree_body);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, tid, s, ""), tree_add, tree_sync);

    LLVMPositionBuilderAtEnd(b, tree_add);
    LLVMValueRef other_i = LLVMBuildAdd(b, tid, s, "");
    LLVMValueRef other = LLVMBuildGEP2(b, arr, shared, (LLVMValueRef[]){z64, other_i}, 2, "");
    LLVMValueRef sum = LLVMBuildFAdd(b, LLVMBuildLoad2(b, k->f32, mine, ""),
                                     LLVMBuildLoad2(b, k->f32, other, ""), "");
    LLVMBuildStore(b, sum, mine);
    LLVMBuildBr(b, tree_sync);

    LLVMPositionBuilderAtEnd(b, tree_sync);
    sj__nvptx_barrier(k->m, b);
    LLVMValueRef s2 = LLVMBuildLShr(b, s, LLVMConstInt(k->i64, 1, 0), "s2");
    LLVMBuildBr(b, tree);
    LLVMAddIncoming(s, (LLVMValueRef[]){half0, s2}, (LLVMBasicBlockRef[]){reduce, tree_sync}, 2);

    LLVMPositionBuilderAtEnd(b, done);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, tid, z64, ""), write, exit);

    LLVMPositionBuilderAtEnd(b, write);
    LLVMValueRef first = LLVMBuildGEP2(b, arr, shared, (LLVMValueRef[]){z64, z64}, 2, "");
    LLVMBuildStore(b, LLVMBuildLoad2(b, k->f32, first, ""),
                   LLVMBuildGEP2(b, k->f32, y, &row, 1, ""));
    LLVMBuildBr(b, exit);

    LLVMPositionBuilderAtEnd(b, exit);
    LLVMBuildRetVoid(b);
    return fn;
}

static int setup(void **state) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    *state = ctx;
    return 0;
}
static int teardown(void **state) {
    sj_ctx_destroy(*state);
    return 0;
}

static void test_reduction_kernel_assembles(void **state) {
    sj_ctx *ctx = *state;
#ifndef SJ_CUDA_LIBDEVICE
    SJ_SKIP("no libdevice.10.bc at build time: exp cannot be linked");
#endif
    const int arches[] = {80, 90};
    for (int i = 0; i < 2; i++) {
        kb k;
        kb_init(&k, "row_sum_exp");
        build_row_sum_exp(&k);
        char *ptx;
        size_t n;
        sj_status st = sj__nvptx_compile(ctx, k.m, arches[i], NULL, &ptx, &n);
        if (st != SJ_OK) fail_msg("sm_%d: %s", arches[i], sj_ctx_last_error(ctx));
        kb_free(&k);
        assert_int_equal(strlen(ptx), n);
        assert_non_null(strstr(ptx, ".entry row_sum_exp"));
        assert_non_null(strstr(ptx, ".shared"));
        assert_non_null(strstr(ptx, "bar.sync"));
        assert_non_null(strstr(ptx, "%tid.x"));
        assert_non_null(strstr(ptx, "%ctaid.x"));
        /* libdevice was inlined, not left as an external call */
        assert_null(strstr(ptx, "__nv_expf"));
        char target[32];
        snprintf(target, sizeof target, ".target sm_%d", arches[i]);
        assert_non_null(strstr(ptx, target));

        if (sj_test_have_ptxas()) {
            char log[4096];
            int rc = sj_test_ptxas(ptx, arches[i], log, sizeof log);
            if (rc != 0) fail_msg("ptxas sm_%d (rc %d): %s", arches[i], rc, log);
        } else {
            print_message("ptxas not found at build time: PTX not assembled\n");
        }
#ifdef SJ_HAVE_NVJITLINK
        void *cubin;
        size_t cubin_len;
        st = sj__ptx_to_cubin(ctx, ptx, n, arches[i], &cubin, &cubin_len);
        if (st != SJ_OK) fail_msg("nvjitlink sm_%d: %s", arches[i], sj_ctx_last_error(ctx));
        assert_true(cubin_len > 4 && memcmp(cubin, "\x7f" "ELF", 4) == 0);
        sj_free(ctx, cubin);
#endif
        sj_free(ctx, ptx);
    }
}

static void test_invalid_ir_is_compile_error(void **state) {
    sj_ctx *ctx = *state;
    kb k;
    kb_init(&k, "bad");
    LLVMValueRef fn = LLVMAddFunction(k.m, "bad", LLVMFunctionType(LLVMVoidTypeInContext(k.lc), NULL, 0, 0));
    sj__nvptx_mark_kernel(k.m, fn);
    LLVMPositionBuilderAtEnd(k.b, LLVMAppendBasicBlockInContext(k.lc, fn, "entry"));
    LLVMBuildRet(k.b, LLVMConstInt(k.i32, 1, 0)); /* void function returning i32 */
    char *ptx = (char *)1;
    size_t n = 1;
    assert_int_equal(sj__nvptx_compile(ctx, k.m, 80, NULL, &ptx, &n), SJ_E_COMPILE);
    assert_null(ptx);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "invalid kernel IR"));
    kb_free(&k);
}

static void test_missing_libdevice_is_reported(void **state) {
    sj_ctx *ctx = *state;
    kb k;
    kb_init(&k, "row_sum_exp");
    build_row_sum_exp(&k);
    char *ptx;
    size_t n;
    assert_int_equal(sj__nvptx_compile(ctx, k.m, 90, "/nonexistent/libdevice.10.bc", &ptx, &n),
                     SJ_E_IO);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "/nonexistent/libdevice.10.bc"));
    kb_free(&k);
}

static void test_unsupported_arch(void **state) {
    sj_ctx *ctx = *state;
    LLVMTargetMachineRef tm;
    assert_int_equal(sj__nvptx_target_machine(ctx, 75, &tm), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "sm_75"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduction_kernel_assembles),
        cmocka_unit_test(test_invalid_ir_is_compile_error),
        cmocka_unit_test(test_missing_libdevice_is_reported),
        cmocka_unit_test(test_unsupported_arch),
    };
    return sj_run_tests(tests, setup, teardown);
}
