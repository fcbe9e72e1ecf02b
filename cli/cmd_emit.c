/* shapejit emit MODEL --rows N --target T: the code of the bucket holding N,
 * as text, to look at what the compiler made of a model. */
#include <stdio.h>
#include <string.h>

#include "cli/serving.h"
#include "shapejit/ext/compile.h"

static const char usage[] =
    "usage: shapejit emit MODEL --rows N --target llvm-ir|host-asm [--ladder SPEC]\n"
    "                     [--out FILE] " CLI_MODEL_USAGE "\n"
    "  Writes the code of the bucket that holds N (compiled at the bucket's\n"
    "  extent) to FILE, or to stdout.\n"
    "  --target T         llvm-ir (optimised LLVM IR) or host-asm (host assembly)\n"
    "  --ladder SPEC      buckets (default " CLI_DEFAULT_LADDER ")\n";

int cli_cmd_emit(int argc, char **argv) {
    const char *cmd = "emit";
    const char *target = NULL, *out = NULL, *spec = CLI_DEFAULT_LADDER;
    int64_t rows = 0;
    cli_model_flags model = {0};
    const cli_opt opts[] = {
        {"--rows", CLI_OPT_INT, &rows},  {"--target", CLI_OPT_STRING, &target},
        {"--out", CLI_OPT_STRING, &out}, {"--ladder", CLI_OPT_STRING, &spec},
        CLI_MODEL_OPTS(model),
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r =
        cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 1, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (!target) return cli_usage_error(cmd, "--target is required (llvm-ir or host-asm)");
    sj_emit_kind kind;
    if (!strcmp(target, "llvm-ir"))
        kind = SJ_EMIT_LLVM_IR;
    else if (!strcmp(target, "host-asm"))
        kind = SJ_EMIT_HOST_ASM;
    else if (!strcmp(target, "nvptx") || !strcmp(target, "cuda-c") || !strcmp(target, "cubin"))
        return cli_fail(cmd, "target %s: this build emits llvm-ir and host-asm only", target);
    else
        return cli_usage_error(cmd, "unknown target '%s' (llvm-ir or host-asm)", target);
    if (rows < 1 || rows > SJ_MAX_EXTENT)
        return cli_usage_error(cmd, "--rows N is required, in 1..%lld", (long long)SJ_MAX_EXTENT);

    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    sj_graph *g = NULL;
    sj_ladder *ladder = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = cli_load_model(cmd, ctx, pos[0], &model, &g);
    if (rc == CLI_EXIT_OK && sj_ladder_parse(ctx, spec, &ladder) != SJ_OK)
        rc = cli_usage_error(cmd, "--ladder: %s", sj_ctx_last_error(ctx));
    int bucket = 0;
    if (rc == CLI_EXIT_OK && sj_ladder_bucket_for(ladder, rows, &bucket) != SJ_OK)
        rc = cli_fail(cmd, "%s", sj_ctx_last_error(ctx));
    if (rc == CLI_EXIT_OK) {
        sj_compile_options o;
        sj_compile_options_init(&o);
        sj_status st = sj_emit_text(g, sj_ladder_extent(ladder, bucket), &o, kind, &text, &len);
        if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    }
    if (rc == CLI_EXIT_OK) {
        /* A temporary file renamed into place: no partial FILE on failure. */
        char tmp[4096];
        FILE *f = stdout;
        if (out && snprintf(tmp, sizeof tmp, "%s.tmp", out) >= (int)sizeof tmp)
            rc = cli_fail(cmd, "--out path too long");
        else if (out && !(f = fopen(tmp, "w")))
            rc = cli_fail(cmd, "cannot write %s", tmp);
        if (rc == CLI_EXIT_OK) {
            bool ok = fwrite(text, 1, len, f) == len;
            if (out) {
                ok = fclose(f) == 0 && ok;
                if (!ok || rename(tmp, out) != 0) {
                    remove(tmp);
                    rc = cli_fail(cmd, "cannot write %s", out);
                }
            } else if (!ok || fflush(stdout) != 0) {
                rc = cli_fail(cmd, "cannot write to stdout");
            }
        }
    }
    sj_free(ctx, text);
    sj_ladder_destroy(ladder);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return rc;
}
