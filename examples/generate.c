/* Greedy text generation with a KV cache, from the store.
 *
 *   example_generate PREFILL STEP STORE PROMPT NEW_TOKENS [EXPECT]
 *     PREFILL, STEP  the two ONNX models of a causal LM (tools/export_generate.py
 *                    writes them; Optimum's decoder_model.onnx and
 *                    decoder_with_past_model.onnx are the same pair)
 *     PROMPT         token ids, comma-separated ("17,4,99")
 *     EXPECT         the tokens it must generate (exit 1 otherwise)
 *
 * The prefill runs the prompt (its length picks a bucket of `seq`) and
 * returns the logits and each layer's keys and values; each step then runs
 * the last token picked (the argmax of the last position's logits) against
 * the cache the last run returned, in the bucket of its length `past`. The
 * step's mask covers the cache and the new token, so its dim `total` is
 * tied to past + 1. A second run of the program loads every bucket from
 * the store and compiles nothing; it prints each step's time.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shapejit/engine.h"

#define MAX_TOKENS 4096
#define MAX_IO 256

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* "17,4,99" -> ids; the count, or -1 with a message. */
static int parse_ids(const char *s, int64_t *ids, int max) {
    int n = 0;
    for (char *end; *s; s = *end == ',' ? end + 1 : end) {
        long long v = strtoll(s, &end, 10);
        if (end == s || (*end && *end != ',') || v < 0 || n == max) {
            fprintf(stderr, "generate: bad token list at '%s'\n", s);
            return -1;
        }
        ids[n++] = v;
    }
    return n;
}

static sj_status open_engine(sj_ctx *ctx, const char *model, const char *store, const char *dynamic,
                             const char *ladder, const sj_dim_value *dims, int n_dims,
                             sj_engine **out) {
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.store_path = store;
    cfg.ladder = ladder;
    cfg.model.dynamic_name = dynamic;
    cfg.model.fixed_dims = dims;
    cfg.model.n_fixed_dims = n_dims;
    return sj_engine_open(ctx, model, &cfg, out);
}

/* A cache's name once "past" or "present" is taken out of it: what a step
 * input and the output it is fed from share (past_key_0, present_key_0). */
static const char *cache_key(const char *name) {
    if (strncmp(name, "present", 7) == 0) return name + 7;
    if (strncmp(name, "past", 4) == 0) return name + 4;
    return NULL;
}

/* The argmax of the last position's logits ([1, seq, vocab]). */
static int64_t pick(const sj_tensor *logits) {
    int64_t vocab = logits->dims[logits->rank - 1];
    const float *row = logits->data + sj_tensor_numel(logits) - vocab;
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; v++)
        if (row[v] > row[best]) best = v;
    return best;
}

typedef struct {
    sj_named_tensor out[MAX_IO];
    int n_out;
} run_result;

static void result_free(sj_ctx *ctx, run_result *r) {
    for (int i = 0; i < r->n_out; i++) sj_tensor_free(ctx, &r->out[i].tensor);
    r->n_out = 0;
}

static const sj_tensor *find(const run_result *r, const char *name) {
    for (int i = 0; i < r->n_out; i++)
        if (strcmp(r->out[i].name, name) == 0) return &r->out[i].tensor;
    return NULL;
}

/* Runs e on the token inputs and, for a step, the caches of `last` (the
 * previous run's outputs, by cache key). */
static sj_status run(sj_engine *e, const int64_t *ids, int64_t seq, int64_t total,
                     const run_result *last, run_result *r) {
    static int64_t ones[MAX_TOKENS];
    for (int64_t i = 0; i < total; i++) ones[i] = 1;
    int n_in = sj_engine_num_inputs(e);
    if (n_in > MAX_IO || sj_engine_num_outputs(e) > MAX_IO) return SJ_E_UNSUPPORTED;
    sj_named_tensor in[MAX_IO];
    for (int i = 0; i < n_in; i++) {
        sj_value_desc d;
        sj_status st = sj_engine_input(e, i, &d);
        if (st != SJ_OK) return st;
        in[i].name = d.name;
        sj_tensor t = {.rank = 2, .dims = {1, seq}, .dtype = SJ_I64, .i64 = (int64_t *)ids};
        if (strcmp(d.name, "attention_mask") == 0) {
            t.dims[1] = total, t.i64 = ones;
        } else if (strcmp(d.name, "input_ids") != 0) { /* a cache: the last run's output */
            const char *key = cache_key(d.name);
            const sj_tensor *from = NULL;
            for (int j = 0; key && last && j < last->n_out && !from; j++) {
                const char *k = cache_key(last->out[j].name);
                if (k && strcmp(k, key) == 0) from = &last->out[j].tensor;
            }
            if (!from) {
                fprintf(stderr, "generate: input '%s' is neither input_ids, attention_mask nor "
                                "a cache a previous run returned\n", d.name);
                return SJ_E_NOT_FOUND;
            }
            t = *from;
        }
        in[i].tensor = t;
    }
    r->n_out = sj_engine_num_outputs(e);
    memset(r->out, 0, sizeof r->out);
    sj_status st = sj_engine_run(e, in, n_in, r->out, r->n_out, NULL);
    if (st != SJ_OK) r->n_out = 0;
    return st;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s PREFILL STEP STORE PROMPT NEW_TOKENS [EXPECT]\n", argv[0]);
        return 2;
    }
    static int64_t tokens[MAX_TOKENS], expect[MAX_TOKENS];
    int prompt = parse_ids(argv[4], tokens, MAX_TOKENS);
    int new_tokens = atoi(argv[5]);
    int n_expect = argc == 7 ? parse_ids(argv[6], expect, MAX_TOKENS) : 0;
    if (prompt < 1 || new_tokens < 1 || prompt + new_tokens > MAX_TOKENS || n_expect < 0) {
        fprintf(stderr, "generate: need 1 or more prompt tokens and 1..%d in all\n", MAX_TOKENS);
        return 2;
    }
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    const sj_dim_value batch1[] = {{"batch", 1}}, step_dims[] = {{"batch", 1},
                                                                 {"total", SJ_DIM_AFFINE(1, 1)}};
    sj_engine *prefill = NULL, *step = NULL;
    int rc = 1;
    run_result a = {0}, b = {0}, *last = &a, *next = &b;
    if (open_engine(ctx, argv[1], argv[3], "seq", "pow2:1:64", batch1, 1, &prefill) != SJ_OK ||
        open_engine(ctx, argv[2], argv[3], "past", "pow2:1:4096", step_dims, 2, &step) != SJ_OK)
        goto done;

    double t0 = now_ms();
    if (run(prefill, tokens, prompt, prompt, NULL, last) != SJ_OK) goto done;
    const sj_tensor *logits = find(last, "logits");
    if (!logits) logits = &last->out[0].tensor;
    tokens[prompt] = pick(logits);
    printf("prefill of %d tokens: %.2f ms\n", prompt, now_ms() - t0);
    for (int t = 1; t < new_tokens; t++) {
        int64_t past = prompt + t - 1;
        t0 = now_ms();
        if (run(step, &tokens[past], 1, past + 1, last, next) != SJ_OK) goto done;
        logits = find(next, "logits");
        tokens[past + 1] = pick(logits ? logits : &next->out[0].tensor);
        double ms = now_ms() - t0;
        result_free(ctx, last);
        run_result *swap = last;
        last = next, next = swap;
        printf("step %d (past %" PRId64 "): token %" PRId64 ", %.2f ms\n", t, past,
               tokens[past + 1], ms);
    }
    printf("generated:");
    for (int t = 0; t < new_tokens; t++) printf("%s%" PRId64, t ? "," : " ", tokens[prompt + t]);
    printf("\n");
    for (int t = 0; t < n_expect; t++)
        if (t >= new_tokens || tokens[prompt + t] != expect[t]) {
            fprintf(stderr, "generate: token %d is %" PRId64 ", expected %" PRId64 "\n", t,
                    t < new_tokens ? tokens[prompt + t] : -1, expect[t]);
            goto done;
        }
    rc = 0;
    /* printed only on success: the tests match this line */
    sj_engine_stats s;
    sj_engine_stats_get(step, &s);
    printf("step buckets: %llu compiled, %llu from the store\n", (unsigned long long)s.compiles,
           (unsigned long long)s.store_hits);
done:
    if (rc && sj_ctx_last_error(ctx)[0]) fprintf(stderr, "generate: %s\n", sj_ctx_last_error(ctx));
    result_free(ctx, &a);
    result_free(ctx, &b);
    sj_engine_close(step);
    sj_engine_close(prefill);
    sj_ctx_destroy(ctx);
    return rc;
}
