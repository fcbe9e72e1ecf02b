/* server/server.h — the Open Inference Protocol (KServe v2) over HTTP/1.1
 * in front of sj_engine models: what `shapejit serve --listen` runs.
 *
 *   srv_config cfg;
 *   srv_config_init(&cfg);                        // 127.0.0.1:8000, limits, ready when all buckets are
 *   cfg.port = 0;                                 // any free port
 *   srv_server *s;
 *   srv_create(ctx, &cfg, &s);
 *   srv_add_model(s, "ffn", engine);              // the server owns the engine from here on
 *   if (srv_start(s) != SJ_OK) fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));
 *   printf("listening on %s:%u\n", cfg.host, srv_port(s));
 *   ...                                           // wait for SIGTERM
 *   srv_drain(s, 30000);                          // no new requests; in-flight ones finish
 *   srv_destroy(s);                               // closes every engine
 *
 * HTTP comes from libmicrohttpd and JSON from jansson (both Debian
 * packages): a parser written here would be one more place for a request to
 * crash the process, and both libraries have been fuzzed for years.
 *
 * Not part of the library (server/ sits beside cli/): a process that embeds
 * shapejit brings its own endpoint; this one is the command's.
 */
#ifndef SJ_SERVER_H
#define SJ_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shapejit/engine.h"

/* When /v2/health/ready turns true for a model: after every bucket is
 * ready (compiled, or loaded from the store), after the first one (the
 * largest, so every request fits somewhere at once; the rest compile in
 * the background), or at once (buckets compile when requests need them). */
typedef enum srv_ready_when { SRV_READY_ALL, SRV_READY_FIRST_BUCKET, SRV_READY_NOW } srv_ready_when;

/* --ladder fit:K (a model's engine config whose ladder is "fit:K"): the
 * model serves on the provisional ladder, the sizes of its first `window`
 * requests are recorded, K buckets are fitted to them and precompiled in
 * the background, and runs switch to them once every one is ready (runs
 * above the fitted top stay on the provisional ladder); no request waits
 * for any of it. stderr, /metrics (shapejit_ladder_fit_*) and the model's
 * metadata ("ladder_fit") tell how far it got. */
typedef struct srv_fit_options {
    int64_t window;          /* requests recorded before the fit; default 1000 */
    bool cost_rows;          /* cost = rows a bucket computes; false (default): measured here */
    const char *provisional; /* the ladder served until the switch; default pow2:1:1024 */
} srv_fit_options;

typedef struct srv_config {
    const char *host;         /* numeric address or "localhost"; default 127.0.0.1 */
    uint16_t port;            /* 0: any free port (srv_port says which) */
    size_t max_body_bytes;    /* larger bodies get 413; default 64 MiB */
    /* Memory one request's JSON may take once parsed (a number in a JSON
     * array costs ~20x its text): above it, 413 asking for binary data.
     * Default 256 MiB. */
    size_t max_json_memory_bytes;
    int64_t max_rows;         /* rows per request along the dynamic dim; 0 = the ladder's top */
    unsigned max_connections; /* further connections are closed at once; default 64 */
    unsigned idle_timeout_s;  /* a connection silent this long is closed; default 30 */
    unsigned request_timeout_s; /* a request still uploading after this is cut; default 60 */
    /* A connection must send a request's complete headers within this of
     * opening, or of its previous response, or it is cut: slow headers
     * (a line every few seconds resets the idle timeout) cannot pin the
     * connection slots. 0: idle_timeout_s. */
    unsigned header_timeout_s;
    srv_ready_when ready_when;
    int warm_jobs;            /* compile threads for the warm start; 0 = 1 */
    /* Zero-stall: a request whose bucket is not ready runs in the smallest
     * ready larger bucket while its own compiles in the background. */
    bool promote;
    /* Automatic batching of concurrent requests for models whose rows are
     * provably independent: how long a request may wait for company;
     * 0 = no batching. */
    int64_t max_batch_delay_us;
    int64_t max_batch_rows;   /* rows per batched run; 0 = the ladder's top */
    srv_fit_options fit;      /* for models whose ladder is "fit:K" */
} srv_config;

void srv_config_init(srv_config *cfg);

typedef struct srv_server srv_server;

sj_status srv_create(sj_ctx *ctx, const srv_config *cfg, srv_server **out);
/* Adds a model under `name` ([A-Za-z0-9_.-]+, unique). Takes ownership of
 * e, also when it fails. Only before srv_start. */
sj_status srv_add_model(srv_server *s, const char *name, sj_engine *e);
int srv_num_models(const srv_server *s);

/* Opens the model file at path with cfg (sj_engine_open) and adds it; a
 * cfg->ladder "fit:K" fits K buckets to the traffic (srv_fit_options). */
sj_status srv_open_model(srv_server *s, const char *name, const char *path,
                         const sj_engine_config *cfg);
/* The same for a graph already built (taken, also on failure). */
sj_status srv_open_graph(srv_server *s, const char *name, sj_graph *g, const sj_engine_config *cfg);
/* A model repository: every sub-folder DIR/NAME holding one model file
 * (.sjg or .onnx) becomes model NAME, opened with base overridden by an
 * optional DIR/NAME/config.json: {"ladder": "pow2:1:256", "dynamic": "seq",
 * "dynamic_axis": "x:0", "dims": {"batch": 1}, "backend": "host"}; with
 * "ladder": "fit:K" also "fit_window": N and "fit_cost": "measured"|"rows"
 * (default: the server's srv_fit_options). Any other key, a folder with no
 * or two model files, or a bad value fails naming the file. */
sj_status srv_open_repository(srv_server *s, const char *dir, const sj_engine_config *base);
/* Binds and starts answering; warm-up (per ready_when) runs in the
 * background, /v2/health/ready says when it is done. */
sj_status srv_start(srv_server *s);
uint16_t srv_port(const srv_server *s);
/* True once every model is ready (or one failed to warm: *failed). */
bool srv_warm_done(const srv_server *s, bool *failed);
/* Stops accepting connections, answers 503 to requests that arrive on open
 * ones, and waits up to timeout_ms for the requests in flight. Returns how
 * many were still running at the deadline. */
int srv_drain(srv_server *s, int timeout_ms);
void srv_destroy(srv_server *s); /* NULL is a no-op; stops everything, closes the engines */

#endif
