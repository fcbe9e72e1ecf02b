/* The HTTP side: a libmicrohttpd daemon (one thread per connection, so a
 * request that waits for a compile or a batch blocks only its own
 * connection), routing of the KServe v2 paths, bodies read under the size
 * and time limits, and draining at shutdown. */
#include "server/server_impl.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* json_dumps would allocate through jansson's hook (json_memory.c), but the
 * body is handed to MHD, which frees it with free(): dump into malloc'd
 * memory instead. */
typedef struct dump_buf {
    char *p;
    size_t len, cap;
} dump_buf;

static int dump_to(const char *chunk, size_t n, void *user) {
    dump_buf *b = user;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap - b->len < n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, chunk, n);
    b->len += n;
    return 0;
}

void srv_json(srv_response *r, unsigned status, json_t *j) {
    srv_json_account *a = srv_json_account_suspend();
    r->status = status;
    r->json_len = -1;
    dump_buf b = {0};
    /* 9 significant digits round-trip every float32. */
    if (!j || json_dump_callback(j, dump_to, &b, JSON_COMPACT | JSON_REAL_PRECISION(9)) != 0) {
        free(b.p);
        b.p = NULL;
    }
    json_decref(j);
    r->body = b.p;
    r->len = b.len;
    if (!r->body) {
        r->status = 500;
        r->body = strdup("{\"error\": \"out of memory writing the response\"}");
        r->len = r->body ? strlen(r->body) : 0;
    }
    srv_json_account_resume(a);
}

void srv_error(srv_response *r, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(r->body);
    r->body = NULL;
    srv_json_unreserve(r->pool, r->held);
    r->held = 0;
    srv_json_account *a = srv_json_account_suspend();
    /* json_string refuses invalid UTF-8 (a name echoed from a request). */
    json_t *s = json_string(msg);
    if (!s) s = json_string("the error message was not valid UTF-8");
    srv_json(r, status, json_pack("{s:o}", "error", s));
    srv_json_account_resume(a);
}

srv_model *srv_find_model(srv_server *s, const char *name) {
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i]->name, name)) return s->models[i];
    return NULL;
}

/* Per request: its body so far and when it began. */
typedef struct request {
    double t0;
    char *body;
    size_t len, cap;
    bool too_large;
    bool counted; /* in s->in_flight */
    size_t held;  /* the response body's bytes in s->json, given back once it is sent */
} request;

static enum MHD_Result reply(struct MHD_Connection *c, srv_server *s, request *q, srv_response *r,
                            bool close) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->len, r->body ? r->body : (void *)"", r->body ? MHD_RESPMEM_MUST_FREE
                                                                                   : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        srv_json_unreserve(r->pool, r->held);
        return MHD_NO;
    }
    r->body = NULL;
    /* The body stays held until MHD has sent it: on_completed gives it back. */
    q->held += r->held;
    r->held = 0;
    if (r->json_len >= 0) {
        char n[32];
        snprintf(n, sizeof n, "%ld", r->json_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", n);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    } else {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->content_type ? r->content_type : "application/json");
    }
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    if (r->status < 300)
        atomic_fetch_add(&s->http_2xx, 1);
    else if (r->status < 500)
        atomic_fetch_add(&s->http_4xx, 1);
    else
        atomic_fetch_add(&s->http_5xx, 1);
    return ret;
}

static void metrics(srv_server *s, srv_response *r) {
    r->status = 200;
    r->json_len = -1;
    r->body = srv_metrics_render(s, &r->len);
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (!r->body) {
        r->content_type = NULL;
        srv_error(r, 500, "out of memory rendering the metrics");
    }
}

static void server_metadata(srv_response *r) {
    srv_json(r, 200,
             json_pack("{s:s,s:s,s:[s]}", "name", "shapejit", "version", sj_version_string(),
                       "extensions", "binary_tensor_data"));
}

static bool all_ready(srv_server *s) {
    for (int i = 0; i < s->n_models; i++)
        if (!srv_model_ready(s->models[i])) return false;
    return true;
}

/* /v2/models/NAME[/versions/V][/ready|/infer]: the model, and what follows. */
static srv_model *model_route(srv_server *s, const char *path, const char **rest, srv_response *r) {
    const char *name = path + strlen("/v2/models/");
    const char *slash = strchr(name, '/');
    size_t n = slash ? (size_t)(slash - name) : strlen(name);
    char buf[SRV_NAME_MAX];
    if (n == 0 || n >= sizeof buf) {
        srv_error(r, 404, "no model named '%.*s'", (int)(n > 200 ? 200 : n), name);
        return NULL;
    }
    memcpy(buf, name, n);
    buf[n] = '\0';
    srv_model *m = srv_find_model(s, buf);
    if (!m) {
        srv_error(r, 404, "no model named '%s'", buf);
        return NULL;
    }
    *rest = slash ? slash : "";
    if (!strncmp(*rest, "/versions/", 10)) {
        const char *v = *rest + 10;
        const char *vs = strchr(v, '/');
        size_t vn = vs ? (size_t)(vs - v) : strlen(v);
        if (vn != 1 || v[0] != '1') {
            srv_error(r, 404, "model '%s' has no version '%.*s' (it has version 1)", buf,
                      (int)(vn > 64 ? 64 : vn), v);
            return NULL;
        }
        *rest = vs ? vs : "";
    }
    return m;
}

static void route(srv_server *s, struct MHD_Connection *c, const char *url, const char *method,
                  request *q, srv_response *r) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/v2/health/live")) {
        if (!get) goto bad_method;
        srv_json(r, 200, json_object());
        return;
    }
    if (!strcmp(url, "/v2/health/ready")) {
        if (!get) goto bad_method;
        if (atomic_load(&s->draining))
            srv_error(r, 503, "shutting down");
        else if (!all_ready(s))
            srv_error(r, 503, "not ready: models are warming up");
        else
            srv_json(r, 200, json_object());
        return;
    }
    if (!strcmp(url, "/v2") || !strcmp(url, "/v2/")) {
        if (!get) goto bad_method;
        server_metadata(r);
        return;
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) goto bad_method;
        metrics(s, r);
        return;
    }
    if (!strncmp(url, "/v2/models/", 11)) {
        const char *rest;
        srv_model *m = model_route(s, url, &rest, r);
        if (!m) return;
        if (!strcmp(rest, "") || !strcmp(rest, "/")) {
            if (!get) goto bad_method;
            srv_model_metadata(m, r);
        } else if (!strcmp(rest, "/config")) {
            if (!get) goto bad_method;
            srv_model_config(m, r);
        } else if (!strcmp(rest, "/ready")) {
            if (!get) goto bad_method;
            if (atomic_load(&m->state) == SRV_FAILED)
                srv_error(r, 503, "model '%s' failed to warm up: %s", m->name, m->warm_error);
            else if (!srv_model_ready(m))
                srv_error(r, 503, "model '%s' is not ready: warming up", m->name);
            else
                srv_json(r, 200, json_object());
        } else if (!strcmp(rest, "/infer")) {
            if (!post) goto bad_method;
            /* A request that began before a drain is served: it is in
             * flight. Later ones were refused at their first call. */
            if (atomic_load(&m->state) == SRV_FAILED) {
                srv_error(r, 503, "model '%s' failed to warm up: %s", m->name, m->warm_error);
            } else if (!srv_model_ready(m)) {
                srv_error(r, 503, "model '%s' is not ready: warming up", m->name);
            } else {
                double t0 = srv_now();
                srv_infer(m, q->body ? q->body : "", q->len,
                          MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                      "Inference-Header-Content-Length"),
                          r);
                srv_metrics_observe(&m->m, srv_now() - t0, r->status != 200);
            }
        } else {
            srv_error(r, 404, "no such path: %s", url);
        }
        return;
    }
    srv_error(r, 404, "no such path: %s", url);
    return;
bad_method:
    srv_error(r, 405, "%s is not allowed on %s", method, url);
}

/* ---- deadlines
 *
 * MHD's connection timeout is an idle timeout: any byte resets it, so a
 * client that sends one header line every few seconds holds its connection
 * for ever, and 64 of them hold every slot. Each connection's record says
 * which phase it is in and since when; a watchdog thread cuts (shutdown(2)
 * on the socket, which ends the connection's thread's wait) one that has
 * been receiving headers longer than header_timeout_s, or a body longer
 * than request_timeout_s. Running a request has no deadline: a compile may
 * be in the way. */

typedef enum conn_phase { CONN_HEADERS, CONN_BODY, CONN_BUSY } conn_phase;

typedef struct srv_conn {
    struct srv_conn *prev, *next;
    int fd;
    conn_phase phase;
    double since;
    bool cut;
} srv_conn;

static void conn_phase_set(srv_server *s, struct MHD_Connection *c, conn_phase p) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_conn *k = ci ? ci->socket_context : NULL;
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    k->phase = p;
    k->since = srv_now();
    pthread_mutex_unlock(&s->conn_mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        srv_conn *k = ci ? calloc(1, sizeof *k) : NULL;
        if (!k) return; /* no deadline for this one; the idle timeout still holds */
        k->fd = ci->connect_fd;
        k->phase = CONN_HEADERS;
        k->since = srv_now();
        pthread_mutex_lock(&s->conn_mu);
        k->next = s->conns;
        if (k->next) k->next->prev = k;
        s->conns = k;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = k;
        return;
    }
    /* Closed: MHD closes the socket after this returns, so the watchdog,
     * which touches a socket only while its record is listed, never shuts
     * down a descriptor number reused by another file. */
    srv_conn *k = *socket_context;
    if (!k) return;
    pthread_mutex_lock(&s->conn_mu);
    if (k->prev)
        k->prev->next = k->next;
    else
        s->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&s->conn_mu);
    free(k);
    *socket_context = NULL;
}

static void *watchdog(void *arg) {
    srv_server *s = arg;
    double hdr = s->cfg.header_timeout_s, body = s->cfg.request_timeout_s;
    /* A quarter of the shorter deadline: a connection is cut at most 25%
     * late; never busier than 20 scans a second. */
    double tick = (hdr < body ? hdr : body) / 4;
    if (tick < 0.05) tick = 0.05;
    if (tick > 1) tick = 1;
    double told = 0;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->watchdog_stop) {
        double now = srv_now();
        /* Once a second, outside the lock: has a store or remote tier
         * failed (its writes are behind the requests that cause them)? */
        if (now - told >= 1) {
            pthread_mutex_unlock(&s->conn_mu);
            for (int i = 0; i < s->n_models; i++) srv_model_tell_trouble(s->models[i]);
            pthread_mutex_lock(&s->conn_mu);
            told = now;
            if (s->watchdog_stop) break;
        }
        for (srv_conn *k = s->conns; k; k = k->next) {
            double limit = k->phase == CONN_HEADERS ? hdr : k->phase == CONN_BODY ? body : -1;
            if (k->cut || limit < 0 || now - k->since <= limit) continue;
            shutdown(k->fd, SHUT_RDWR);
            k->cut = true;
            /* A body cut mid-way ends its request, which on_completed counts. */
            if (k->phase == CONN_HEADERS) atomic_fetch_add(&s->http_closed, 1);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_nsec * 1e-9 + tick;
        ts.tv_sec += (time_t)t;
        ts.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        pthread_cond_timedwait(&s->conn_cv, &s->conn_mu, &ts);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls) {
    srv_server *s = cls;
    request *q = *con_cls;
    srv_response r = {.json_len = -1};
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q) return MHD_NO;
        q->t0 = srv_now();
        q->counted = true;
        conn_phase_set(s, c, CONN_BODY); /* headers complete: the body's deadline runs */
        atomic_fetch_add(&s->in_flight, 1);
        *con_cls = q;
        if (atomic_load(&s->draining)) {
            srv_error(&r, 503, "shutting down: no new requests");
            return reply(c, s, q, &r, true);
        }
        /* A declared body above the limit is refused before a byte is read. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            unsigned long long n = strtoull(cl, &end, 10);
            if (end != cl && n > s->cfg.max_body_bytes) {
                srv_error(&r, 413, "request body of %llu bytes is above the limit of %zu bytes", n,
                          s->cfg.max_body_bytes);
                return reply(c, s, q, &r, true);
            }
        }
        return MHD_YES;
    }
    if (*data_size) {
        /* A slow sender does not hold its connection past the limit. */
        if (srv_now() - q->t0 > s->cfg.request_timeout_s) {
            atomic_fetch_add(&s->http_closed, 1);
            return MHD_NO;
        }
        size_t n = *data_size;
        *data_size = 0;
        if (q->too_large || q->len + n > s->cfg.max_body_bytes) {
            q->too_large = true; /* chunked: the rest is read and dropped, then 413 */
            free(q->body);
            q->body = NULL;
            q->len = q->cap = 0;
            return MHD_YES;
        }
        if (q->len + n > q->cap) {
            size_t cap = q->cap ? q->cap : 4096;
            while (cap < q->len + n) cap *= 2;
            if (cap > s->cfg.max_body_bytes) cap = s->cfg.max_body_bytes;
            char *b = realloc(q->body, cap);
            if (!b) return MHD_NO;
            q->body = b;
            q->cap = cap;
        }
        memcpy(q->body + q->len, data, n);
        q->len += n;
        return MHD_YES;
    }
    if (q->too_large) {
        srv_error(&r, 413, "request body is above the limit of %zu bytes", s->cfg.max_body_bytes);
        return reply(c, s, q, &r, true);
    }
    conn_phase_set(s, c, CONN_BUSY);
    route(s, c, url, method, q, &r);
    return reply(c, s, q, &r, atomic_load(&s->draining));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    srv_server *s = cls;
    request *q = *con_cls;
    if (!q) return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) atomic_fetch_add(&s->http_closed, 1);
    /* Kept alive: the next request's headers have their deadline from now. */
    conn_phase_set(s, c, CONN_HEADERS);
    if (q->counted) atomic_fetch_sub(&s->in_flight, 1);
    srv_json_unreserve(&s->json, q->held);
    free(q->body);
    free(q);
    *con_cls = NULL;
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    /* MHD's own reports (a client that closed early, a malformed request
     * line) are about one connection; they go to stderr, the server runs on. */
    fputs("shapejit serve: http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

void srv_config_init(srv_config *cfg) {
    *cfg = (srv_config){
        .host = "127.0.0.1",
        .port = 8000,
        .max_body_bytes = 64u << 20,
        .max_json_memory_bytes = (size_t)256 << 20,
        .max_connections = 64,
        .idle_timeout_s = 30,
        .request_timeout_s = 60,
        .header_timeout_s = 30,
        .ready_when = SRV_READY_ALL,
        .warm_jobs = 1,
        .promote = true,
        .max_batch_delay_us = 200,
    };
}

sj_status srv_create(sj_ctx *ctx, const srv_config *cfg, srv_server **out) {
    *out = NULL;
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return sj_ctx_set_error(ctx, SJ_E_NOMEM, "serve: out of memory");
    s->ctx = ctx;
    if (cfg)
        s->cfg = *cfg;
    else
        srv_config_init(&s->cfg);
    snprintf(s->host, sizeof s->host, "%s", s->cfg.host ? s->cfg.host : "127.0.0.1");
    s->cfg.host = s->host;
    if (!s->cfg.max_connections) s->cfg.max_connections = 64;
    if (!s->cfg.idle_timeout_s) s->cfg.idle_timeout_s = 30;
    if (!s->cfg.request_timeout_s) s->cfg.request_timeout_s = 60;
    if (!s->cfg.header_timeout_s) s->cfg.header_timeout_s = s->cfg.idle_timeout_s;
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_cond_init(&s->conn_cv, NULL);
    if (!s->cfg.max_body_bytes) s->cfg.max_body_bytes = 64u << 20;
    if (!s->cfg.max_json_memory_bytes) s->cfg.max_json_memory_bytes = (size_t)256 << 20;
    s->json.limit = s->cfg.max_json_memory_bytes;
    srv_json_memory_init();
    *out = s;
    return SJ_OK;
}

static bool valid_name(const char *n) {
    if (!n[0] || strlen(n) >= SRV_NAME_MAX) return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '-'))
            return false;
    return true;
}

sj_status srv_add_model(srv_server *s, const char *name, sj_engine *e) {
    if (!valid_name(name)) {
        sj_engine_close(e);
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG,
                       "model name '%s': use letters, digits, '_', '.' and '-' (1..%d)", name,
                       SRV_NAME_MAX - 1);
    }
    if (srv_find_model(s, name)) {
        sj_engine_close(e);
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "two models named '%s'", name);
    }
    if (s->n_models == SRV_MAX_MODELS) {
        sj_engine_close(e);
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "more than %d models", SRV_MAX_MODELS);
    }
    srv_model *m;
    SRV_TRY(srv_model_create(s, name, e, &m));
    s->models[s->n_models++] = m;
    return SJ_OK;
}

int srv_num_models(const srv_server *s) { return s->n_models; }
uint16_t srv_port(const srv_server *s) { return s->port; }

bool srv_warm_done(const srv_server *s, bool *failed) {
    bool done = true;
    *failed = false;
    for (int i = 0; i < s->n_models; i++) {
        int st = atomic_load(&s->models[i]->state);
        if (st == SRV_FAILED) *failed = true;
        if (st == SRV_LOADING) done = false;
    }
    return done || *failed;
}

static sj_status resolve(srv_server *s, struct sockaddr_storage *sa, socklen_t *len) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)s->cfg.port);
    int rc = getaddrinfo(s->host, port, &hints, &res);
    if (rc != 0 || !res)
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "--listen %s: %s", s->host, gai_strerror(rc));
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return SJ_OK;
}

sj_status srv_start(srv_server *s) {
    if (!s->n_models) return sj_ctx_set_error(s->ctx, SJ_E_STATE, "serve: no model to serve");
    struct sockaddr_storage sa;
    socklen_t salen;
    SRV_TRY(resolve(s, &sa, &salen));
    for (int i = 0; i < s->n_models; i++) SRV_TRY(srv_model_start(s->models[i]));
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (sa.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(
        flags, s->cfg.port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_CONNECTION_LIMIT, s->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        s->cfg.idle_timeout_s, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
    if (!s->daemon)
        return sj_ctx_set_error(s->ctx, SJ_E_IO, "--listen %s:%u: cannot listen (address in use, or not "
                       "an address of this machine)", s->host, (unsigned)s->cfg.port);
    if (pthread_create(&s->watchdog, NULL, watchdog, s) != 0)
        return sj_ctx_set_error(s->ctx, SJ_E_INTERNAL, "serve: cannot start the connection deadline thread");
    s->watchdog_started = true;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : s->cfg.port;
    return SJ_OK;
}

int srv_drain(srv_server *s, int timeout_ms) {
    atomic_store(&s->draining, true);
    if (s->daemon) {
        MHD_socket l = MHD_quiesce_daemon(s->daemon);
        if (l != MHD_INVALID_SOCKET) close(l);
    }
    for (int i = 0; i < s->n_models; i++) atomic_store(&s->models[i]->stop, true);
    double deadline = srv_now() + timeout_ms / 1e3;
    while (atomic_load(&s->in_flight) > 0 && srv_now() < deadline) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->in_flight);
}

void srv_destroy(srv_server *s) {
    if (!s) return;
    for (int i = 0; i < s->n_models; i++) atomic_store(&s->models[i]->stop, true);
    if (s->watchdog_started) {
        pthread_mutex_lock(&s->conn_mu);
        s->watchdog_stop = true;
        pthread_cond_broadcast(&s->conn_cv);
        pthread_mutex_unlock(&s->conn_mu);
        pthread_join(s->watchdog, NULL);
    }
    if (s->daemon) MHD_stop_daemon(s->daemon);
    for (int i = 0; i < s->n_models; i++) srv_model_destroy(s->models[i]);
    pthread_mutex_destroy(&s->conn_mu);
    pthread_cond_destroy(&s->conn_cv);
    free(s);
}
