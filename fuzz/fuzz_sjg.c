/* .sjg text: parse; what parses must print, and the printed text must parse
 * again to a graph with the same hash (the printer's contract). */
#include "fuzz/fuzz_common.h"
#include "shapejit/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sj_ctx *ctx = fuzz_ctx();
    sj_graph *g = NULL;
    /* base_dir: a folder that does not exist, so npy("x") weights fail to
     * open rather than read whatever the fuzzer's working folder holds */
    sj_status st = sj_sjg_parse(ctx, (const char *)data, size, "fuzz.sjg", "/nonexistent-fuzz-dir", &g);
    fuzz_check_message(st);
    if (st != SJ_OK) return 0;
    char *text = NULL;
    size_t len = 0;
    if (sj_sjg_print(g, &text, &len) != SJ_OK) abort();
    sj_graph *again = NULL;
    if (sj_sjg_parse(ctx, text, len, "printed.sjg", NULL, &again) != SJ_OK) abort();
    uint8_t h1[32], h2[32];
    sj_graph_hash(g, h1);
    sj_graph_hash(again, h2);
    if (memcmp(h1, h2, 32) != 0) abort();
    sj_graph_destroy(again);
    sj_free(ctx, text);
    sj_graph_destroy(g);
    return 0;
}
