/* What the server's files share: the server and model records, the
 * response being built, metrics. Private to server/. */
#ifndef SJ_SERVER_IMPL_H
#define SJ_SERVER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "server/server.h"

/* Errors travel through the context: sj_ctx_set_error records the message
 * and returns the status; SRV_TRY passes a failed status up unchanged. */
#define SRV_TRY(expr)                                                                              \
    do {                                                                                           \
        sj_status srv_try_st_ = (expr);                                                            \
        if (srv_try_st_ != SJ_OK) return srv_try_st_;                                              \
    } while (0)

#define SRV_MAX_MODELS 64
#define SRV_MAX_IO 64     /* inputs or outputs of a model the server takes */
#define SRV_NAME_MAX 128

/* Latency histogram bounds in seconds (Prometheus `le` labels). */
#define SRV_HIST_N 16
extern const double srv_hist_bounds[SRV_HIST_N];

typedef struct srv_metrics {
    _Atomic uint64_t requests, failures;
    _Atomic uint64_t hist[SRV_HIST_N + 1]; /* per bound, then +Inf; not cumulative */
    _Atomic uint64_t latency_ns;           /* sum */
    _Atomic uint64_t rows; /* real rows (padding: the cache's per-bucket figures) */
    _Atomic uint64_t stalls;               /* waited for their own bucket's compile or load */
    _Atomic uint64_t promotions;           /* ran in a larger ready bucket instead */
    _Atomic uint64_t batches, batched_requests; /* runs that served several requests */
} srv_metrics;

/* The JSON memory budget's pool (json_memory.c). */
typedef struct srv_json_pool {
    _Atomic size_t used;
    size_t limit;
} srv_json_pool;

typedef enum srv_state { SRV_LOADING, SRV_READY, SRV_FAILED } srv_state;

typedef struct srv_batcher srv_batcher;

/* --ladder fit:K for one model (model_fit.c). */
typedef struct srv_fit {
    int k;
    int64_t window;
    bool cost_rows;
    char provisional[256];  /* the provisional ladder's spec */
    /* What the fitted (and measuring) engines are opened with: the model's
     * engine config, its strings and secret copied (wiped at the end). */
    sj_engine_config cfg;
    char *owned[10];
    int n_owned;
    struct sj_ladder_switch *ls; /* NULL until the model starts */
} srv_fit;

typedef struct srv_model {
    struct srv_server *srv;
    char name[SRV_NAME_MAX];
    sj_engine *e;
    int n_in, n_out;
    sj_value_desc in[SRV_MAX_IO], out[SRV_MAX_IO]; /* names borrowed from the engine */
    int dyn_axis_in[SRV_MAX_IO], dyn_axis_out[SRV_MAX_IO]; /* axis of the dynamic dim, -1 none */
    bool has_dyn;
    int64_t top; /* the largest bucket's extent */
    int64_t max_rows;
    _Atomic int state;
    char warm_error[512];
    pthread_t warm_thread;
    bool warm_started;
    _Atomic bool stop; /* background work ends early at shutdown */
    /* Zero-stall: buckets asked to compile in the background, one flag each. */
    _Atomic bool *bg_queued;
    pthread_mutex_t bg_mu;
    pthread_cond_t bg_cv;
    int bg_pending; /* queued bucket indices not yet taken */
    int *bg_queue;
    pthread_t bg_thread;
    bool bg_started;
    srv_batcher *batcher; /* NULL: every request runs alone */
    int64_t batch_rows;   /* with a batcher: most rows a stacked run takes */
    srv_fit *fit;         /* --ladder fit:K, else NULL */
    char batch_why[256];  /* why batching is off (row dependence; "" when not asked) */
    /* Store or remote-tier trouble told on stderr, once per kind. */
    _Atomic bool told_store, told_remote;
    srv_metrics m;
} srv_model;

struct srv_server {
    sj_ctx *ctx;
    srv_config cfg;
    char host[256];
    srv_model *models[SRV_MAX_MODELS];
    int n_models;
    struct MHD_Daemon *daemon;
    uint16_t port;
    _Atomic bool draining;
    _Atomic int in_flight;
    /* Responses by status class, for /metrics. */
    _Atomic uint64_t http_2xx, http_4xx, http_5xx, http_closed;
    /* Requests refused for the JSON memory budget: alone above it, or with
     * others holding it. */
    _Atomic uint64_t json_over_limit, json_busy;
    srv_json_pool json; /* --max-json-memory-bytes, for every request together */
    /* Open connections, for the deadline watchdog (http.c). */
    pthread_mutex_t conn_mu;
    pthread_cond_t conn_cv;
    struct srv_conn *conns;
    bool watchdog_started, watchdog_stop;
    pthread_t watchdog;
};

/* A response under construction: status, body (malloc'd; MHD frees it) and
 * for binary outputs the length of the JSON part. */
typedef struct srv_response {
    unsigned status;
    char *body;
    size_t len;
    long json_len; /* -1: the whole body is JSON */
    const char *content_type; /* NULL: application/json */
    size_t held; /* of body, bytes reserved in pool until sent */
    srv_json_pool *pool;
} srv_response;

/* {"error": "..."} with the given status. */
void srv_error(srv_response *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A JSON body (the json_t is consumed). */
struct json_t;
void srv_json(srv_response *r, unsigned status, struct json_t *j);

srv_model *srv_find_model(srv_server *s, const char *name);
bool srv_model_ready(const srv_model *m);

/* protocol.c: GET /v2/models/NAME and POST /v2/models/NAME/infer. */
void srv_model_metadata(srv_model *m, srv_response *r);
/* GET /v2/models/NAME/config: how the model is served (batching, and why
 * not), as Triton's model configuration extension answers it. */
void srv_model_config(srv_model *m, srv_response *r);
void srv_infer(srv_model *m, const char *body, size_t len, const char *header_len,
               srv_response *r);

/* model.c: prepares, warms and runs a model. */
sj_status srv_model_create(srv_server *s, const char *name, sj_engine *e, srv_model **out);
sj_status srv_model_start(srv_model *m);
void srv_model_destroy(srv_model *m);
/* Runs one request (inputs in the model's order, n_in of them, all at `rows`):
 * through the batcher when the model has one, else promoted or alone.
 * Outputs are allocated on the context (caller frees). */
sj_status srv_model_run(srv_model *m, int64_t rows, const sj_tensor *in, sj_tensor *out);
/* The engine run behind it; counts stalls, promotions and rows. */
sj_status srv_model_run_direct(srv_model *m, int64_t rows, const sj_tensor *in, sj_tensor *out);
/* Says on stderr, once per kind, that the model's store or remote tier
 * failed (a full store kept serving from memory, silently, before). */
void srv_model_tell_trouble(srv_model *m);

/* model_fit.c: opens a model (path, or g taken) with cfg and adds it as
 * name; a "fit:K" ladder opens it on fo->provisional and gives it a fit. */
sj_status srv_open_fitting(srv_server *s, const char *name, const char *path, sj_graph *g,
                           const sj_engine_config *cfg, const srv_fit_options *fo);
/* Starts recording (before any request); the switch told on stderr. */
sj_status srv_fit_start(srv_model *m);
/* Waits for a fit in progress, closes the fitted engine, says on stderr
 * when the window never filled; a model without a fit is a no-op. */
void srv_fit_destroy(srv_model *m);
/* The engine a run of `rows` goes to (the model's own without a fit). */
sj_engine *srv_fit_route(srv_model *m, int64_t rows);
/* The "ladder_fit" object of the model's metadata (NULL without a fit). */
struct json_t *srv_fit_json(srv_model *m);

/* json_memory.c: the JSON memory budget (--max-json-memory-bytes), one
 * pool per server shared by every request: parsed request JSON (what
 * jansson really allocates, counted by its allocator hook while an account
 * is open on the thread) and response bodies (reserved as they grow, given
 * back once sent). */
/* One request's share: what it holds now, and why a reservation failed. */
typedef struct srv_json_account {
    srv_json_pool *pool;
    size_t used;
    bool over_self; /* this request alone would pass the limit: 413/400 */
    bool over_pool; /* the others hold the rest now: 503, retry */
} srv_json_account;

void srv_json_memory_init(void);
/* jansson's allocations on this thread count against a until _end. */
void srv_json_account_begin(srv_json_account *a, srv_json_pool *p);
void srv_json_account_end(srv_json_account *a);
/* n more bytes for a (a response body growing); false when over a limit. */
bool srv_json_reserve(srv_json_account *a, size_t n);
void srv_json_unreserve(srv_json_pool *p, size_t n);
/* Error bodies are written outside the budget (a full pool must not turn a
 * 400 into a 500): suspend returns the thread's account, resume restores it. */
srv_json_account *srv_json_account_suspend(void);
void srv_json_account_resume(srv_json_account *a);

/* metrics.c */
void srv_metrics_observe(srv_metrics *m, double seconds, bool failed);
/* The Prometheus text exposition of everything (malloc'd). */
char *srv_metrics_render(srv_server *s, size_t *len);

/* batcher.c: concatenates concurrent requests along the dynamic dim. */
sj_status srv_batcher_create(srv_model *m, int64_t delay_us, int64_t max_rows, srv_batcher **out);
void srv_batcher_destroy(srv_batcher *b);
sj_status srv_batcher_run(srv_batcher *b, int64_t rows, const sj_tensor *in, sj_tensor *out);

/* repository.c is declared in server.h. Monotonic seconds. */
double srv_now(void);

#endif
