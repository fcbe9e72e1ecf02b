/* shapejit emit MODEL --rows N --target T: the code of the bucket holding N
 * (LLVM IR, host assembly, PTX, CUDA C, or a cubin), to look at what the
 * compiler made of a model, or to hand GPU code to other tools. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/serving.h"
#include "client_util/files.h"
#include "shapejit/ext/compile.h"

static const char usage[] =
    "usage: shapejit emit MODEL --rows N --target llvm-ir|host-asm|nvptx|cuda-c|cubin\n"
    "                     [--arch sm_80|sm_90] [--emit llvm|nvrtc] [--cpu C] [--ladder SPEC]\n"
    "                     [--precision fp32|bf16|fp16] [--out FILE] " CLI_MODEL_USAGE "\n"
    "  Writes the code of the bucket that holds N (compiled at the bucket's\n"
    "  extent) to FILE, or to stdout. GPU targets need no GPU.\n"
    "  --target T         llvm-ir (optimised LLVM IR), host-asm (host assembly),\n"
    "                     nvptx (PTX), cuda-c (the CUDA C source NVRTC compiles),\n"
    "                     cubin (the CUDA binary; binary, so not to a terminal)\n"
    "  --arch A           GPU targets: sm_80 or sm_90 (default)\n"
    "  --cpu C            host targets: native (default), x86-64-v2|v3|v4 or an LLVM CPU name\n"
    "  --emit P           nvptx, cubin: the path that makes them, llvm (LLVM NVPTX,\n"
    "                     default) or nvrtc (CUDA C through NVRTC)\n"
    "  --ladder SPEC      buckets (default " CLI_DEFAULT_LADDER ")\n"
    CLI_PRECISION_USAGE;

/* What --target, --emit and --arch ask for. */
typedef struct emit_request {
    sj_target target;
    sj_emit_kind kind;
    bool cubin; /* the cubin blob of a compiled artifact, not text */
} emit_request;

static int parse_target(const char *cmd, const char *target, const char *path, const char *arch,
                        emit_request *r) {
    bool gpu = true;
    if (!strcmp(target, "llvm-ir")) {
        *r = (emit_request){SJ_TARGET_HOST, SJ_EMIT_LLVM_IR, false};
        gpu = false;
    } else if (!strcmp(target, "host-asm")) {
        *r = (emit_request){SJ_TARGET_HOST, SJ_EMIT_HOST_ASM, false};
        gpu = false;
    } else if (!strcmp(target, "nvptx")) {
        *r = (emit_request){SJ_TARGET_NVPTX, SJ_EMIT_PTX, false};
    } else if (!strcmp(target, "cuda-c")) {
        *r = (emit_request){SJ_TARGET_NVRTC, SJ_EMIT_CUDA_C, false};
    } else if (!strcmp(target, "cubin")) {
        *r = (emit_request){SJ_TARGET_NVPTX, SJ_EMIT_CUBIN, true};
    } else {
        return cli_usage_error(cmd,
                               "unknown target '%s' (llvm-ir, host-asm, nvptx, cuda-c or cubin)",
                               target);
    }
    if (!gpu && (arch || path))
        return cli_usage_error(cmd, "%s is for the GPU targets (nvptx, cuda-c, cubin)",
                               arch ? "--arch" : "--emit");
    if (arch && strcmp(arch, "sm_80") != 0 && strcmp(arch, "sm_90") != 0)
        return cli_usage_error(cmd, "unknown --arch '%s' (sm_80 or sm_90)", arch);
    if (path && strcmp(path, "llvm") != 0 && strcmp(path, "nvrtc") != 0)
        return cli_usage_error(cmd, "unknown --emit '%s' (llvm or nvrtc)", path);
    if (path && r->target == SJ_TARGET_NVRTC && strcmp(path, "nvrtc") != 0)
        return cli_usage_error(cmd, "--target cuda-c is the NVRTC path's source (--emit nvrtc)");
    if (path && !strcmp(path, "nvrtc")) r->target = SJ_TARGET_NVRTC;
    return CLI_EXIT_OK;
}

#ifdef SJ_RUNTIME_ONLY
/* This build has no compiler (compile/ is left out): say where the code is
 * made instead, with the flags that make it. */
static int emit_bucket(const char *cmd, sj_ctx *ctx, const sj_graph *g, int64_t extent,
                       const sj_compile_options *o, const emit_request *req, const char *out) {
    (void)ctx, (void)g, (void)extent, (void)req, (void)out;
    const char *target = o->target == SJ_TARGET_HOST    ? "host"
                         : o->target == SJ_TARGET_NVRTC ? "nvrtc"
                                                        : "nvptx";
    bool gpu = o->target != SJ_TARGET_HOST;
    return cli_fail(cmd,
                    "compile (%s%s%s): this runtime-only build (SJ_COMPILERS=OFF) compiles "
                    "nothing; run `shapejit precompile MODEL --ladder SPEC --target %s%s%s` on a "
                    "build machine",
                    target, gpu ? " " : "", gpu ? o->arch : "", target, gpu ? " --arch " : "",
                    gpu ? o->arch : "");
}
#else
/* Compiles the bucket's code (text, or the cubin's bytes) and writes it to
 * out (NULL: stdout). Returns a CLI exit status, the message printed. */
static int emit_bucket(const char *cmd, sj_ctx *ctx, const sj_graph *g, int64_t extent,
                       const sj_compile_options *o, const emit_request *req, const char *out) {
    char *text = NULL;
    size_t len = 0;
    int rc = CLI_EXIT_OK;
    sj_status st = sj_emit_text(g, extent, o, req->kind, &text, &len);
    if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    if (rc == CLI_EXIT_OK) {
        /* A temporary file renamed into place: no partial FILE on failure. */
        char tmp[4096];
        FILE *f = stdout;
        if (out && snprintf(tmp, sizeof tmp, "%s.tmp", out) >= (int)sizeof tmp)
            rc = cli_fail(cmd, "--out path too long");
        else if (out && (st = cu_check_replaceable(ctx, "--out", out)) != SJ_OK)
            rc = cli_fail_status(cmd, ctx, st);
        else if (out && !(f = fopen(tmp, "wb")))
            rc = cli_fail(cmd, "cannot write %s", tmp);
        if (rc == CLI_EXIT_OK) {
            bool ok = fwrite(text, 1, len, f) == len;
            if (out) {
                ok = fclose(f) == 0 && ok;
                if (!ok || rename(tmp, out) != 0) {
                    remove(tmp);
                    rc = cli_fail(cmd, "cannot write %s", out);
                }
            } else {
                rc = cli_stdout_done(cmd, rc);
            }
        }
    }
    sj_free(ctx, text);
    return rc;
}
#endif

int cli_cmd_emit(int argc, char **argv) {
    const char *cmd = "emit";
    const char *target = NULL, *out = NULL, *spec = CLI_DEFAULT_LADDER, *arch = NULL, *path = NULL,
               *cpu = NULL, *precision = NULL;
    int64_t rows = 0;
    cli_model_flags model = {0};
    const cli_opt opts[] = {
        {"--rows", CLI_OPT_INT, &rows},  {"--target", CLI_OPT_STRING, &target},
        {"--out", CLI_OPT_STRING, &out}, {"--ladder", CLI_OPT_STRING, &spec},
        {"--arch", CLI_OPT_STRING, &arch}, {"--emit", CLI_OPT_STRING, &path},
        {"--cpu", CLI_OPT_STRING, &cpu}, {"--precision", CLI_OPT_STRING, &precision},
        CLI_MODEL_OPTS(model),
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r =
        cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (!target)
        return cli_usage_error(cmd,
                               "--target is required (llvm-ir, host-asm, nvptx, cuda-c or cubin)");
    emit_request req = {SJ_TARGET_HOST, SJ_EMIT_LLVM_IR, false};
    int prc = parse_target(cmd, target, path, arch, &req);
    if (prc != CLI_EXIT_OK) return prc;
    if (cpu && req.target != SJ_TARGET_HOST)
        return cli_usage_error(cmd, "--cpu is for the host targets (llvm-ir, host-asm)");
    sj_precision policy = SJ_PRECISION_FP32;
    if (precision && sj_precision_from_name(precision, &policy) != SJ_OK)
        return cli_usage_error(cmd, "unknown --precision '%s' (fp32, bf16 or fp16)", precision);
    if (req.cubin && !out && isatty(STDOUT_FILENO))
        return cli_usage_error(cmd, "--target cubin is binary: give --out FILE or redirect stdout");
    if (rows < 1 || rows > SJ_MAX_EXTENT)
        return cli_usage_error(cmd, "--rows N is required, in 1..%lld", (long long)SJ_MAX_EXTENT);

    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    sj_graph *g = NULL;
    sj_ladder *ladder = NULL;
    int rc = cli_load_model(cmd, ctx, pos[0], &model, &g);
    if (rc == CLI_EXIT_OK && sj_ladder_parse(ctx, spec, &ladder) != SJ_OK)
        rc = cli_usage_error(cmd, "--ladder: %s", sj_ctx_last_error(ctx));
    int bucket = 0;
    if (rc == CLI_EXIT_OK && sj_ladder_bucket_for(ladder, rows, &bucket) != SJ_OK)
        rc = cli_fail(cmd, "%s", sj_ctx_last_error(ctx));
    if (rc == CLI_EXIT_OK) {
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.target = req.target;
        if (req.target != SJ_TARGET_HOST) o.arch = arch ? arch : "sm_90";
        o.cpu = cpu;
        o.precision = policy;
        rc = emit_bucket(cmd, ctx, g, sj_ladder_extent(ladder, bucket), &o, &req, out);
    }
    sj_ladder_destroy(ladder);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
