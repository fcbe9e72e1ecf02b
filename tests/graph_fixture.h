/* What the graph-building test programs (test_graph, test_interp) share: a
 * fixture holding a context and an empty graph with the symbolic dim "N",
 * leaf builders that stop the test with the library's message, and the
 * literal-array shorthands. Include after <cmocka.h>.
 *
 *   static void test_x(void **state) {
 *       graph_fixture *f = *state;
 *       sj_value x = INPUT(f->g, "x", S, 4);    // x: [N, 4]
 *   }
 *   cmocka_unit_test_setup_teardown(test_x, graph_fixture_setup, graph_fixture_teardown)
 */
#ifndef SJ_TEST_GRAPH_FIXTURE_H
#define SJ_TEST_GRAPH_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "shapejit/graph.h"

#define S SJ_DIM_SYM
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define RANK(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* Declares input `name` with the listed dims. */
#define INPUT(g, name, ...) input_ok((g), (name), RANK(__VA_ARGS__), DIMS(__VA_ARGS__))

typedef struct graph_fixture {
    sj_ctx *ctx;
    sj_graph *g; /* symbol "N" */
} graph_fixture;

static inline int graph_fixture_setup(void **state) {
    graph_fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    if (sj_graph_create(f->ctx, "N", &f->g) != SJ_OK) return -1;
    *state = f;
    return 0;
}

static inline int graph_fixture_teardown(void **state) {
    graph_fixture *f = *state;
    sj_graph_destroy(f->g);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static inline sj_value input_ok(sj_graph *g, const char *name, int rank, const int64_t *dims) {
    sj_value v;
    if (sj_graph_input(g, name, rank, dims, &v) != SJ_OK)
        fail_msg("input %s: %s", name, sj_ctx_last_error(sj_graph_ctx(g)));
    return v;
}

static inline sj_value param_ok(sj_graph *g, const char *name, int rank, const int64_t *dims,
                                const float *data) {
    sj_value v;
    if (sj_graph_param(g, name, rank, dims, data, &v) != SJ_OK)
        fail_msg("param %s: %s", name, sj_ctx_last_error(sj_graph_ctx(g)));
    return v;
}

/* The last error contains every listed fragment (NULL = none). */
static inline void assert_error_has(sj_ctx *ctx, const char *a, const char *b, const char *c) {
    const char *msg = sj_ctx_last_error(ctx);
    const char *parts[] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i] && !strstr(msg, parts[i])) fail_msg("message '%s' lacks '%s'", msg, parts[i]);
}

#endif
