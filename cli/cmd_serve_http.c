/* shapejit serve --listen HOST:PORT: the Open Inference Protocol endpoint
 * (server/) for one model or a model repository, until SIGTERM or SIGINT,
 * which drain the requests in flight and exit 0. The environment is mapped
 * to configuration here ($SHAPEJIT_STORE and friends), as for every
 * command. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/ladder_switch.h"
#include "cli/serving.h"
#include "server/server.h"

static const char usage[] =
    "usage: shapejit serve --listen [HOST:]PORT (MODEL | --model-repository DIR) [options]\n"
    "\n"
    "Answers the Open Inference Protocol (KServe v2) over HTTP/1.1: GET /v2/health/live,\n"
    "/v2/health/ready, /v2, /v2/models/NAME[/ready|/config], POST /v2/models/NAME/infer (JSON\n"
    "tensors and the binary tensor data extension), GET /metrics (Prometheus text).\n"
    "A model is named after its file without the extension (--name overrides), or\n"
    "after its folder in a repository (DIR/NAME/model.sjg|.onnx plus an optional\n"
    "config.json: ladder, dynamic, dynamic_axis, dims, backend, fit_window, fit_cost).\n"
    "Prints 'listening\n"
    "on http://HOST:PORT' once bound and 'ready' once warm; SIGTERM or SIGINT drains\n"
    "the requests in flight and exits 0.\n"
    "  --listen [HOST:]PORT   address to bind; HOST defaults to 127.0.0.1 (loopback);\n"
    "                     PORT 0 picks a free port\n"
    "  --model-repository DIR  serve every model folder under DIR\n"
    "  --name NAME        the single model's name\n"
    "  --ladder SPEC      buckets (default pow2:1:1024)\n"
    "  --ladder fit:K     fit K buckets to the traffic: serve on the default ladder\n"
    "                     (pow2:1:1024), record the sizes of the first N requests (each\n"
    "                     request's rows, not a batch's), fit the K-bucket ladder of least\n"
    "                     expected cost to them (fewer when they hold fewer distinct sizes),\n"
    "                     precompile it in the background and switch to it once every\n"
    "                     bucket is ready; no request waits. Runs above the fitted top stay\n"
    "                     on the default ladder; a window that never fills fits nothing.\n"
    "                     Told on stderr, in /metrics (shapejit_ladder_fit_*) and in the\n"
    "                     model's metadata (\"ladder_fit\"). A repository's config.json\n"
    "                     may say \"ladder\": \"fit:K\" (with \"fit_window\", \"fit_cost\")\n"
    "  --fit-window N     requests recorded before the fit (default 1000)\n"
    "  --fit-cost C       measured (default): the cost model 'ladder fit MODEL' measures,\n"
    "                     here, in the background; rows: the rows a bucket computes (E)\n"
    CLI_STORE_USAGE
    "  --backend B        host (default), interp or cuda; --emit llvm|nvrtc, --arch sm_80|sm_90\n"
    CLI_CUDA_DRIVER_USAGE
    "  --cpu C            host: native (default), x86-64-v2|v3|v4, or an LLVM CPU name\n"
    CLI_PRECISION_USAGE
    CLI_TUNE_USAGE
    "  --workers N        host devices, so runs of different buckets overlap (default 2)\n"
    CLI_THREADS_USAGE
    "  --ready-when W     all (default): ready once every bucket is compiled or loaded;\n"
    "                     first-bucket: once the largest is (the rest compile behind);\n"
    "                     now: at once (buckets compile when requests need them)\n"
    "  --no-promote       a request whose bucket is not ready waits for it, instead of\n"
    "                     running at once in a larger ready bucket\n"
    "  --max-batch-delay-us N  how long a request may wait to be batched with others\n"
    "                     (default 200; 0 = off). Only for models whose rows are provably\n"
    "                     independent along the dynamic dim\n"
    "  --max-batch-rows N rows per batched run (default: the ladder's top)\n"
    "  --max-body-bytes N larger request bodies get 413 (default 67108864)\n"
    "  --max-json-memory-bytes N  memory every request's JSON may take at once, in one\n"
    "                     budget for the process: parsed requests (about 50 bytes a\n"
    "                     number) and response bodies until sent. A request alone\n"
    "                     above it gets 413 (parsing) or 400 (its response), asking\n"
    "                     for binary data; one that finds it held by others, 503\n"
    "                     (default 268435456)\n"
    "  --max-rows N       rows per request (default: the ladder's top)\n"
    "  --max-connections N  concurrent connections (default 64)\n"
    "  --idle-timeout-s N close a connection silent this long (default 30)\n"
    "  --request-timeout-s N  cut a request still uploading after this (default 60)\n"
    "  --header-timeout-s N  cut a connection that has not sent a request's complete\n"
    "                     headers N s after it opened or after its previous response,\n"
    "                     however steadily it trickles (default: --idle-timeout-s)\n"
    "  --drain-timeout-s N  at shutdown, wait this long for requests in flight (default 30)\n"
    "  --jobs N           compile threads for the warm start (default 1)\n"
    CLI_NATIVE_AFTER_USAGE
    CLI_TIERED_USAGE
    "                     (useful with --ready-when now or first-bucket: the warm start\n"
    "                     compiles the full code)\n"
    CLI_REMOTE_USAGE
    "  " CLI_MODEL_USAGE "\n";

#define DEFAULT_SERVE_LADDER "pow2:1:1024"

static int parse_listen(const char *cmd, const char *s, char *host, size_t cap, uint16_t *port) {
    const char *colon = strrchr(s, ':');
    const char *p = colon ? colon + 1 : s;
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') { /* [::1]:8000 */
        s++;
        hl -= 2;
    }
    char *end;
    long v = strtol(p, &end, 10);
    if (!*p || *end || v < 0 || v > 65535)
        return cli_usage_error(cmd, "--listen '%s': PORT must be 0..65535", s);
    if (hl >= cap) return cli_usage_error(cmd, "--listen '%s': host too long", s);
    if (hl) {
        memcpy(host, s, hl);
        host[hl] = '\0';
    } else {
        snprintf(host, cap, "127.0.0.1");
    }
    *port = (uint16_t)v;
    return CLI_EXIT_OK;
}

static int check_range(const char *cmd, const char *flag, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        return cli_usage_error(cmd, "%s must be in %lld..%lld", flag, (long long)lo, (long long)hi);
    return CLI_EXIT_OK;
}

/* Waits for SIGTERM or SIGINT (blocked in every thread, so only here),
 * saying 'ready' once the warm-up is done. */
static int wait_for_signal(srv_server *s, int64_t drain_s) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    bool said_ready = false;
    for (;;) {
        bool failed;
        if (!said_ready && srv_warm_done(s, &failed)) {
            printf(failed ? "shapejit serve: warm-up failed for a model (see above); it answers 503\n"
                          : "shapejit serve: ready\n");
            fflush(stdout);
            said_ready = true;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            printf("shapejit serve: %s: draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            fflush(stdout);
            break;
        }
    }
    int left = srv_drain(s, (int)(drain_s * 1000));
    if (left)
        fprintf(stderr, "shapejit serve: %d requests still running after %llds; closing them\n", left,
                (long long)drain_s);
    printf("shapejit serve: stopped\n");
    fflush(stdout);
    return CLI_EXIT_OK;
}

int cli_cmd_serve_listen(int argc, char **argv) {
    const char *cmd = "serve";
    const char *listen = NULL, *repo = NULL, *name = NULL, *ladder = NULL, *store = NULL;
    const char *backend = NULL, *emit = NULL, *arch = NULL, *ready_when = "all";
    cli_backend_args compile = {0}; /* --cpu, --precision, --tune */
    int64_t workers = 2, threads = 0, delay_us = 200, batch_rows = 0, max_body = 64 << 20;
    int64_t max_json = (int64_t)256 << 20, max_rows = 0, max_conn = 64, idle_s = 30, req_s = 60, drain_s = 30, jobs = 1;
    int64_t header_s = 0; /* 0: the idle timeout */
    int64_t native_after = INT64_MIN; /* not given: never */
    int64_t fit_window = INT64_MIN;   /* not given: the library's default */
    const char *fit_cost = NULL;
    bool no_promote = false, tiered = false;
    cli_model_flags model = {0};
    cli_remote_flags remote = {0};
    const cli_opt opts[] = {
        {"--listen", CLI_OPT_STRING, &listen},
        {"--model-repository", CLI_OPT_STRING, &repo},
        {"--name", CLI_OPT_STRING, &name},
        {"--ladder", CLI_OPT_STRING, &ladder},
        {"--store", CLI_OPT_STRING, &store},
        {"--backend", CLI_OPT_STRING, &backend},
        {"--emit", CLI_OPT_STRING, &emit},
        {"--arch", CLI_OPT_STRING, &arch},
        {"--cuda-driver", CLI_OPT_STRING, &compile.cuda_driver},
        {"--workers", CLI_OPT_INT, &workers},
        {"--threads", CLI_OPT_INT, &threads},
        {"--ready-when", CLI_OPT_STRING, &ready_when},
        {"--no-promote", CLI_OPT_FLAG, &no_promote},
        {"--max-batch-delay-us", CLI_OPT_INT, &delay_us},
        {"--max-batch-rows", CLI_OPT_INT, &batch_rows},
        {"--max-body-bytes", CLI_OPT_INT, &max_body},
        {"--max-json-memory-bytes", CLI_OPT_INT, &max_json},
        {"--max-rows", CLI_OPT_INT, &max_rows},
        {"--max-connections", CLI_OPT_INT, &max_conn},
        {"--idle-timeout-s", CLI_OPT_INT, &idle_s},
        {"--request-timeout-s", CLI_OPT_INT, &req_s},
        {"--header-timeout-s", CLI_OPT_INT, &header_s},
        {"--drain-timeout-s", CLI_OPT_INT, &drain_s},
        {"--jobs", CLI_OPT_INT, &jobs},
        {"--native-after", CLI_OPT_INT, &native_after},
        {"--tiered", CLI_OPT_FLAG, &tiered},
        {"--fit-window", CLI_OPT_INT, &fit_window},
        {"--fit-cost", CLI_OPT_STRING, &fit_cost},
        {"--cpu", CLI_OPT_STRING, &compile.cpu},
        {"--precision", CLI_OPT_STRING, &compile.precision},
        CLI_TUNE_OPTS(compile),
        CLI_MODEL_OPTS(model),
        CLI_REMOTE_OPTS(remote),
    };
    const char *pos[1];
    int n_pos;
    cli_parse_result r = cli_parse(cmd, usage, argc, argv, opts, CLI_COUNT(opts), pos, 0, 1, &n_pos);
    if (r != CLI_PARSED) return cli_parse_exit(r);
    if (!listen) return cli_usage_error(cmd, "--listen [HOST:]PORT is required here");
    if ((n_pos == 1) == (repo != NULL))
        return cli_usage_error(cmd, "give one MODEL or --model-repository DIR");
    if (repo && (name || model.dynamic || model.dynamic_axis || model.dims.n))
        return cli_usage_error(cmd, "--name and the model options are for a single MODEL; a "
                               "repository's models take them from config.json");
    int fit_k = 0;
    int is_fit = sj_ladder_switch_parse(ladder, &fit_k);
    if (is_fit < 0)
        return cli_usage_error(cmd, "--ladder fit:K: K must be a bucket count in 1..%d, got '%s'",
                               SJ_LADDER_MAX_BUCKETS, ladder + 4);
    /* A repository's config.json may ask for a fit, so there they are defaults. */
    if (!is_fit && !repo && (fit_window != INT64_MIN || fit_cost))
        return cli_usage_error(cmd, "--fit-window and --fit-cost need --ladder fit:K");
    if (fit_window != INT64_MIN && (fit_window < 1 || fit_window > SJ_LADDER_SWITCH_MAX_WINDOW))
        return cli_usage_error(cmd, "--fit-window must be in 1..%d requests, got %lld",
                               SJ_LADDER_SWITCH_MAX_WINDOW, (long long)fit_window);
    if (fit_cost && strcmp(fit_cost, "measured") && strcmp(fit_cost, "rows"))
        return cli_usage_error(cmd, "--fit-cost must be measured or rows, got '%s'", fit_cost);
    srv_config sc;
    srv_config_init(&sc);
    sc.fit.window = fit_window == INT64_MIN ? SJ_LADDER_SWITCH_DEFAULT_WINDOW : fit_window;
    sc.fit.cost_rows = fit_cost && !strcmp(fit_cost, "rows");
    /* The ladder served until a switch: the one given, or the default. */
    sc.fit.provisional = ladder && !is_fit ? ladder : DEFAULT_SERVE_LADDER;
    char host[256];
    int rc = parse_listen(cmd, listen, host, sizeof host, &sc.port);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--workers", workers, 1, 64);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--threads", threads, 0, SJ_HOST_MAX_THREADS);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--max-batch-delay-us", delay_us, 0, 1000000);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--max-batch-rows", batch_rows, 0, SJ_MAX_EXTENT);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--max-body-bytes", max_body, 1, (int64_t)1 << 40);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--max-json-memory-bytes", max_json, 1, (int64_t)1 << 40);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--max-rows", max_rows, 0, SJ_MAX_EXTENT);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--max-connections", max_conn, 1, 65536);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--idle-timeout-s", idle_s, 1, 86400);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--request-timeout-s", req_s, 1, 86400);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--header-timeout-s", header_s, 0, 86400);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--drain-timeout-s", drain_s, 0, 86400);
    if (rc == CLI_EXIT_OK) rc = check_range(cmd, "--jobs", jobs, 1, 256);
    if (rc == CLI_EXIT_OK && native_after != INT64_MIN)
        rc = check_range(cmd, "--native-after", native_after, 1, INT32_MAX);
    if (rc == CLI_EXIT_OK && tiered && backend && strcmp(backend, "host") != 0)
        rc = cli_usage_error(cmd, "--tiered is for --backend host");
    if (rc != CLI_EXIT_OK) return rc;
    if (!strcmp(ready_when, "all"))
        sc.ready_when = SRV_READY_ALL;
    else if (!strcmp(ready_when, "first-bucket"))
        sc.ready_when = SRV_READY_FIRST_BUCKET;
    else if (!strcmp(ready_when, "now"))
        sc.ready_when = SRV_READY_NOW;
    else
        return cli_usage_error(cmd, "--ready-when must be all, first-bucket or now");
    cli_backend_args ba = compile;
    ba.name = backend;
    ba.emit = emit;
    ba.arch = arch;
    ba.devices = (int)workers;
    rc = cli_backend_check(cmd, &ba);
    if (rc != CLI_EXIT_OK) return rc;
    char store_path[4096];
    rc = cli_store_path(cmd, store, store_path, sizeof store_path);
    if (rc != CLI_EXIT_OK) return rc;
    const char *remote_url = NULL;
    char secret[CLI_SECRET_MAX + 1] = "";
    int lease_ms;
    rc = cli_remote_lease_ms(cmd, &remote, &lease_ms);
    if (rc == CLI_EXIT_OK) rc = cli_remote_resolve(cmd, &remote, &remote_url, secret);
    if (rc != CLI_EXIT_OK) return rc;

    sc.host = host;
    sc.max_body_bytes = (size_t)max_body;
    sc.max_json_memory_bytes = (size_t)max_json;
    sc.max_rows = max_rows;
    sc.max_connections = (unsigned)max_conn;
    sc.idle_timeout_s = (unsigned)idle_s;
    sc.request_timeout_s = (unsigned)req_s;
    sc.header_timeout_s = (unsigned)(header_s ? header_s : idle_s);
    sc.warm_jobs = (int)jobs;
    sc.promote = !no_promote;
    sc.max_batch_delay_us = delay_us;
    sc.max_batch_rows = batch_rows;

    sj_engine_config ec;
    sj_engine_config_init(&ec);
    ec.ladder = ladder ? ladder : DEFAULT_SERVE_LADDER;
    ec.store_path = store_path[0] ? store_path : NULL;
    /* Only the default may quietly degrade: a path the user named must work. */
    ec.store_fallback_to_memory = store == NULL;
    ec.remote_url = remote_url;
    ec.remote_secret = secret;
    ec.remote_secret_len = strlen(secret);
    ec.remote_read_only = remote_url && remote.read_only;
    ec.remote_lease_ms = lease_ms;
    cli_backend_config(&ba, &ec);
    if (threads) ec.threads = (int)threads; /* 0: cli_backend_config's default */
    ec.native_after = native_after == INT64_MIN ? 0 : (int)native_after;
    ec.tiered = tiered;

    /* Blocked before any thread starts, so every thread inherits the mask
     * and the signals wait for sigtimedwait in this one. A shell starts
     * background jobs with SIGINT ignored, and an ignored signal is dropped
     * even while blocked: the default action is restored first. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* A client that hangs up mid-response must not kill the process. */
    signal(SIGPIPE, SIG_IGN);

    sj_ctx *ctx = cli_ctx_create(cmd);
    if (!ctx) return CLI_EXIT_FAIL;
    srv_server *s = NULL;
    sj_status st = srv_create(ctx, &sc, &s);
    if (st == SJ_OK && repo) {
        st = srv_open_repository(s, repo, &ec);
    } else if (st == SJ_OK) {
        sj_graph *g = NULL;
        rc = cli_load_model(cmd, ctx, pos[0], &model, &g);
        char base[256];
        if (rc == CLI_EXIT_OK) {
            const char *slash = strrchr(pos[0], '/');
            snprintf(base, sizeof base, "%s", slash ? slash + 1 : pos[0]);
            char *dot = strrchr(base, '.');
            if (dot && dot != base) *dot = '\0';
            st = srv_open_graph(s, name ? name : base, g, &ec); /* takes g */
        }
    }
    /* The engines copied the secret. */
    memset(secret, 0, sizeof secret);
    __asm__ __volatile__("" : : "r"(secret) : "memory");
    if (rc == CLI_EXIT_OK && st == SJ_OK) st = srv_start(s);
    if (rc == CLI_EXIT_OK && st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
    if (rc == CLI_EXIT_OK) {
        printf("shapejit serve: listening on http://%s:%u (%d model%s)\n", host, srv_port(s),
               srv_num_models(s), srv_num_models(s) == 1 ? "" : "s");
        fflush(stdout);
        rc = wait_for_signal(s, drain_s);
    }
    srv_destroy(s);
    sj_ctx_destroy(ctx);
    return rc;
}
