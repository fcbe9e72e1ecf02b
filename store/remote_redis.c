/* The Redis transport of the remote tier (hiredis, blocking contexts with
 * connect and command timeouts). A small pool of connections lets several
 * serving threads fetch at once; a connection whose attempt failed is freed,
 * never reused. */
#include "core/core_impl.h"
#include "store/remote_tier_impl.h"

#include <hiredis/hiredis.h>

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct redis_url {
    char *host, *user, *password;
    int port, db;
} redis_url;

typedef struct redis_transport {
    sj_ctx *ctx;
    redis_url url;
    struct timeval connect_tv, command_tv;
    int command_timeout_ms;
    pthread_mutex_t lock;
    pthread_cond_t returned; /* a connection went back to the pool or was freed */
    redisContext **idle;
    int n_idle, n_open, pool_size;
} redis_transport;

/* ---- URL: redis://[[user]:password@]host[:port][/db] */

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Copies [s, s+n) %-decoded; NULL with *bad set when an escape is broken. */
static char *decode_part(sj_ctx *ctx, const char *s, size_t n, bool *bad) {
    char *out = sj_alloc(ctx, n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 2 < n ? hex_value(s[i + 1]) : -1;
            int lo = i + 2 < n ? hex_value(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                sj_free(ctx, out);
                *bad = true;
                return NULL;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = 0;
    return out;
}

static bool parse_int(const char *s, size_t n, long lo, long hi, int *out) {
    if (n == 0 || n > 10) return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

static void url_free(sj_ctx *ctx, redis_url *u) {
    sj_free(ctx, u->host);
    sj_free(ctx, u->user);
    sj_free(ctx, u->password);
    memset(u, 0, sizeof *u);
}

#define URL_FORM "redis://[[user]:password@]host[:port][/db]"

static sj_status parse_url(sj_ctx *ctx, const char *url, redis_url *u) {
    memset(u, 0, sizeof *u);
    u->port = 6379;
    static const char scheme[] = "redis://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote URL: expected %s", URL_FORM);
    const char *p = url + sizeof scheme - 1;
    /* The password may hold '/' and '@': the host starts after the last '@'. */
    const char *at = strrchr(p, '@');
    const char *hostpart = at ? at + 1 : p;
    bool bad = false;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (!colon)
            return sj_fail(ctx, SJ_E_INVALID_ARG,
                           "remote URL: credentials before '@' need a ':' before the password "
                           "(%s)", URL_FORM);
        if (colon > p && !(u->user = decode_part(ctx, p, (size_t)(colon - p), &bad))) goto fail_decode;
        if (!(u->password = decode_part(ctx, colon + 1, (size_t)(at - colon - 1), &bad))) goto fail_decode;
        if (!u->password[0]) {
            url_free(ctx, u);
            return sj_fail(ctx, SJ_E_INVALID_ARG, "remote URL: empty password after ':'");
        }
    }
    const char *slash = strchr(hostpart, '/');
    const char *end = slash ? slash : hostpart + strlen(hostpart);
    const char *host = hostpart, *host_end, *port = NULL;
    if (*host == '[') {
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end) {
            url_free(ctx, u);
            return sj_fail(ctx, SJ_E_INVALID_ARG, "remote URL: '[' of an IPv6 host without ']'");
        }
        host++;
        if (host_end + 1 < end) {
            if (host_end[1] != ':') {
                url_free(ctx, u);
                return sj_fail(ctx, SJ_E_INVALID_ARG,
                               "remote URL: expected ':port' after the IPv6 host");
            }
            port = host_end + 2;
        }
    } else {
        host_end = memchr(host, ':', (size_t)(end - host));
        if (host_end)
            port = host_end + 1;
        else
            host_end = end;
    }
    if (host_end == host) {
        url_free(ctx, u);
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote URL: no host (%s)", URL_FORM);
    }
    if (port && !parse_int(port, (size_t)(end - port), 1, 65535, &u->port)) {
        url_free(ctx, u);
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote URL: port '%.*s' is not a number in 1..65535",
                       (int)(end - port), port);
    }
    if (slash && slash[1] && !parse_int(slash + 1, strlen(slash + 1), 0, INT_MAX, &u->db)) {
        url_free(ctx, u);
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "remote URL: database '%s' after '/' is not a non-negative number",
                       slash + 1);
    }
    if (!(u->host = decode_part(ctx, host, (size_t)(host_end - host), &bad))) goto fail_decode;
    return SJ_OK;
fail_decode:
    url_free(ctx, u);
    if (bad)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "remote URL: broken %%-escape in the credentials or host (%%XX, not %%00)");
    return sj_fail(ctx, SJ_E_NOMEM, "remote URL: out of memory");
}

static char *masked_url(sj_ctx *ctx, const redis_url *u) {
    char buf[512];
    const char *lb = strchr(u->host, ':') ? "[" : "", *rb = lb[0] ? "]" : "";
    snprintf(buf, sizeof buf, "redis://%s%s%s%s%s:%d/%d", u->user ? u->user : "",
             u->password ? ":***@" : "", lb, u->host, rb, u->port, u->db);
    return sj_strdup(ctx, buf);
}

/* ---- Connections */

/* A failed call on c: a timeout when the socket ran out of time, an error
 * otherwise. `saved_errno` is errno right after the hiredis call. */
static sj_remote_io classify(const redisContext *c, int saved_errno) {
    if (c->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
                                   saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS))
        return SJ_REMOTE_IO_TIMEOUT;
    return SJ_REMOTE_IO_ERROR;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until c's socket is ready for `events` or the deadline passes. */
static sj_remote_io wait_ready(redisContext *c, short events, int64_t deadline, const char *name,
                               int timeout_ms, char *why, size_t cap) {
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) break;
        struct pollfd p = {.fd = c->fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0) return SJ_REMOTE_IO_OK;
        if (n < 0 && errno != EINTR) {
            snprintf(why, cap, "%s: poll: %s", name, strerror(errno));
            return SJ_REMOTE_IO_ERROR;
        }
    }
    snprintf(why, cap, "%s: no complete reply within %d ms", name, timeout_ms);
    return SJ_REMOTE_IO_TIMEOUT;
}

/* What the first line of a reply announces, checked before the reader
 * buffers the rest: only the reply kinds these commands get, and a bulk
 * string no longer than max_reply bytes. hdr holds the line's first bytes. */
static sj_remote_io check_header(const char *hdr, size_t n, bool complete, size_t max_reply,
                                 const char *name, char *why, size_t cap) {
    if (!hdr[0] || !strchr("$+-:", hdr[0])) { /* strchr finds a NUL too */
        snprintf(why, cap, "%s: not a Redis reply (it starts with '%c', 0x%02x)", name,
                 hdr[0] >= 0x20 && hdr[0] < 0x7f ? hdr[0] : '?', (unsigned char)hdr[0]);
        return SJ_REMOTE_IO_PROTOCOL;
    }
    if (hdr[0] != '$') return SJ_REMOTE_IO_OK;
    long long len = 0;
    for (size_t i = 1; i < n && hdr[i] != '\r'; i++) {
        if (hdr[1] == '-' && i == 1) return SJ_REMOTE_IO_OK; /* $-1: nil */
        if (hdr[i] < '0' || hdr[i] > '9' || len > (LLONG_MAX - 9) / 10) {
            snprintf(why, cap, "%s: not a Redis reply (malformed bulk length)", name);
            return SJ_REMOTE_IO_PROTOCOL;
        }
        len = len * 10 + (hdr[i] - '0');
    }
    if (!complete) {
        snprintf(why, cap, "%s: not a Redis reply (bulk length line too long)", name);
        return SJ_REMOTE_IO_PROTOCOL;
    }
    if ((unsigned long long)len > max_reply) {
        snprintf(why, cap, "%s: reply announces %lld bytes, over the %zu-byte limit", name, len,
                 max_reply);
        return SJ_REMOTE_IO_OVERSIZE;
    }
    return SJ_REMOTE_IO_OK;
}

/* One command with a deadline for the whole exchange (hiredis's socket
 * timeout bounds each recv, so a server trickling a byte at a time would
 * hold a caller for as long as it liked), and a bound on the reply's size
 * checked as bytes arrive (hiredis buffers whatever length a reply
 * announces). On failure the connection is in an unknown state: the caller
 * frees it. */
static sj_remote_io exec_command(redisContext *c, int timeout_ms, size_t max_reply,
                                 const char *name, char *why, size_t cap, redisReply **out,
                                 const char *fmt, va_list ap) {
    *out = NULL;
    int64_t deadline = mono_ms() + timeout_ms;
    if (redisvAppendCommand(c, fmt, ap) != REDIS_OK) {
        snprintf(why, cap, "%s: %s", name, c->errstr[0] ? c->errstr : "out of memory");
        return SJ_REMOTE_IO_ERROR;
    }
    sj_remote_io io;
    for (int done = 0; !done;) {
        if ((io = wait_ready(c, POLLOUT, deadline, name, timeout_ms, why, cap)) != SJ_REMOTE_IO_OK)
            return io;
        /* a blocking write of a large value waits at most what is left */
        int64_t left = deadline - mono_ms();
        if (left < 1) left = 1;
        redisSetTimeout(c, (struct timeval){.tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000});
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            int e = errno;
            snprintf(why, cap, "%s: %s", name, c->errstr);
            return classify(c, e);
        }
    }
    char hdr[32];
    size_t hdr_n = 0, received = 0;
    bool hdr_done = false;
    char buf[16384];
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
            snprintf(why, cap, "%s: not a Redis reply (%s)", name, c->errstr);
            return SJ_REMOTE_IO_PROTOCOL;
        }
        if (reply) {
            *out = reply;
            return SJ_REMOTE_IO_OK;
        }
        if ((io = wait_ready(c, POLLIN, deadline, name, timeout_ms, why, cap)) != SJ_REMOTE_IO_OK)
            return io;
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (n <= 0) {
            snprintf(why, cap, "%s: %s", name, n == 0 ? "server closed the connection" : strerror(errno));
            return SJ_REMOTE_IO_ERROR;
        }
        received += (size_t)n;
        for (ssize_t i = 0; i < n && !hdr_done; i++) {
            hdr[hdr_n++] = buf[i];
            hdr_done = buf[i] == '\n' || hdr_n == sizeof hdr;
            if (hdr_done &&
                (io = check_header(hdr, hdr_n, buf[i] == '\n', max_reply, name, why, cap)) !=
                    SJ_REMOTE_IO_OK)
                return io;
        }
        /* bulk header and CRLFs aside, no reply is longer than max_reply:
         * this also bounds a status line that never ends */
        if (received > max_reply + sizeof hdr + 2) {
            snprintf(why, cap, "%s: reply longer than the %zu-byte limit", name, max_reply);
            return SJ_REMOTE_IO_OVERSIZE;
        }
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            snprintf(why, cap, "%s: out of memory reading the reply", name);
            return SJ_REMOTE_IO_ERROR;
        }
    }
}

/* Replies to AUTH, SELECT and SET are short status lines. */
#define SHORT_REPLY 4096

static sj_remote_io exec_short(redisContext *c, int timeout_ms, const char *name, char *why,
                               size_t cap, redisReply **out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sj_remote_io io = exec_command(c, timeout_ms, SHORT_REPLY, name, why, cap, out, fmt, ap);
    va_end(ap);
    return io;
}

/* Runs a setup command (AUTH, SELECT) that must answer +OK. */
static sj_remote_io setup_command(const char *what, char *why, size_t cap, sj_remote_io sent,
                                  redisReply *r) {
    if (sent != SJ_REMOTE_IO_OK) return sent;
    sj_remote_io io = SJ_REMOTE_IO_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, cap, "%s refused: %.*s", what, (int)r->len, r->str);
        io = SJ_REMOTE_IO_ERROR;
    } else if (r->type != REDIS_REPLY_STATUS) {
        snprintf(why, cap, "%s: unexpected reply type %d", what, r->type);
        io = SJ_REMOTE_IO_ERROR;
    }
    freeReplyObject(r);
    return io;
}

static sj_remote_io connect_one(redis_transport *t, redisContext **out, char *why, size_t cap) {
    redisContext *c = redisConnectWithTimeout(t->url.host, t->url.port, t->connect_tv);
    int e = errno;
    if (!c) {
        snprintf(why, cap, "connect to %s:%d: out of memory", t->url.host, t->url.port);
        return SJ_REMOTE_IO_ERROR;
    }
    sj_remote_io io = SJ_REMOTE_IO_OK;
    if (c->err) {
        io = classify(c, e);
        snprintf(why, cap, "connect to %s:%d: %s", t->url.host, t->url.port, c->errstr);
    } else if (redisSetTimeout(c, t->command_tv) != REDIS_OK) {
        snprintf(why, cap, "setting the command timeout: %s", c->errstr);
        io = SJ_REMOTE_IO_ERROR;
    }
    redisReply *r = NULL;
    int ms = t->command_timeout_ms;
    if (io == SJ_REMOTE_IO_OK && t->url.password) {
        sj_remote_io sent =
            t->url.user
                ? exec_short(c, ms, "AUTH", why, cap, &r, "AUTH %s %s", t->url.user, t->url.password)
                : exec_short(c, ms, "AUTH", why, cap, &r, "AUTH %s", t->url.password);
        io = setup_command("AUTH", why, cap, sent, r);
    }
    if (io == SJ_REMOTE_IO_OK && t->url.db != 0) {
        sj_remote_io sent = exec_short(c, ms, "SELECT", why, cap, &r, "SELECT %d", t->url.db);
        io = setup_command("SELECT", why, cap, sent, r);
    }
    if (io != SJ_REMOTE_IO_OK) {
        redisFree(c);
        return io;
    }
    *out = c;
    return SJ_REMOTE_IO_OK;
}

void sj__remote_deadline_after_ms(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* An idle connection, or a new one while the pool has room; when every
 * connection is busy, waits at most one command timeout, so a caller queued
 * behind a stalled server is bounded like the caller that is stalled. */
static sj_remote_io acquire(redis_transport *t, redisContext **out, char *why, size_t cap) {
    struct timespec deadline;
    sj__remote_deadline_after_ms(&deadline, t->command_timeout_ms);
    pthread_mutex_lock(&t->lock);
    while (t->n_idle == 0 && t->n_open >= t->pool_size) {
        if (pthread_cond_timedwait(&t->returned, &t->lock, &deadline) == ETIMEDOUT &&
            t->n_idle == 0 && t->n_open >= t->pool_size) {
            pthread_mutex_unlock(&t->lock);
            snprintf(why, cap, "all %d connections stayed busy for %d ms", t->pool_size,
                     t->command_timeout_ms);
            return SJ_REMOTE_IO_TIMEOUT;
        }
    }
    if (t->n_idle > 0) {
        *out = t->idle[--t->n_idle];
        pthread_mutex_unlock(&t->lock);
        return SJ_REMOTE_IO_OK;
    }
    t->n_open++;
    pthread_mutex_unlock(&t->lock);
    sj_remote_io io = connect_one(t, out, why, cap);
    if (io != SJ_REMOTE_IO_OK) {
        pthread_mutex_lock(&t->lock);
        t->n_open--;
        pthread_cond_signal(&t->returned);
        pthread_mutex_unlock(&t->lock);
    }
    return io;
}

/* healthy: the context may serve another command. Otherwise it is freed,
 * and so are the idle ones: they lead to the same server, which just failed,
 * and reusing one after the back-off would only fail again (or write into a
 * reset connection). The next attempt connects afresh. */
static void give_back(redis_transport *t, redisContext *c, bool healthy) {
    redisContext *stale[SJ_REMOTE_MAX_POOL + 1];
    int n_stale = 0;
    pthread_mutex_lock(&t->lock);
    if (healthy) {
        t->idle[t->n_idle++] = c;
    } else {
        stale[n_stale++] = c;
        while (t->n_idle > 0) stale[n_stale++] = t->idle[--t->n_idle];
        t->n_open -= n_stale;
    }
    pthread_cond_broadcast(&t->returned);
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < n_stale; i++) redisFree(stale[i]);
}

/* hiredis writes with write(2): writing to a peer that reset the connection
 * raises SIGPIPE, whose default action ends the process. A library may not
 * change the process's signal handling, so SIGPIPE is blocked on this thread
 * for the call, and one the call raised is consumed before unblocking. */
typedef struct pipe_guard {
    sigset_t pipe, old;
    bool was_pending;
} pipe_guard;

static void pipe_guard_enter(pipe_guard *g) {
    sigemptyset(&g->pipe);
    sigaddset(&g->pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &g->pipe, &g->old);
}

static void pipe_guard_leave(pipe_guard *g) {
    if (!g->was_pending) {
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            struct timespec zero = {0, 0};
            sigtimedwait(&g->pipe, NULL, &zero);
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- Transport functions */

/* Runs one command on a pooled connection within one command timeout,
 * refusing a reply over max_reply bytes. A failure returns its class, why =
 * "NAME: <what went wrong>"; otherwise *reply holds the reply (the caller
 * frees it) and the connection is back in the pool. */
static sj_remote_io run_command(redis_transport *t, const char *name, size_t max_reply, char *why,
                                size_t cap, redisReply **reply, const char *fmt, ...) {
    redisContext *c;
    sj_remote_io io = acquire(t, &c, why, cap);
    if (io != SJ_REMOTE_IO_OK) return io;
    va_list ap;
    va_start(ap, fmt);
    io = exec_command(c, t->command_timeout_ms, max_reply, name, why, cap, reply, fmt, ap);
    va_end(ap);
    give_back(t, c, io == SJ_REMOTE_IO_OK);
    return io;
}

static sj_remote_io fetch_unguarded(void *impl, const char *key, size_t key_len, size_t max_size,
                                    sj_remote_blob *out, char *why, size_t cap) {
    redisReply *r;
    /* GETRANGE 0..max sends at most max+1 bytes: an oversized value is known
     * from the reply's length without the server sending, or hiredis
     * buffering, the whole of it. A missing key reads as "". */
    sj_remote_io io = run_command(impl, "GETRANGE", max_size + 1, why, cap, &r,
                                  "GETRANGE %b 0 %lld", key, key_len, (long long)max_size);
    if (io != SJ_REMOTE_IO_OK) return io;
    if (r->type == REDIS_REPLY_STRING && r->len == 0) {
        io = SJ_REMOTE_IO_ABSENT;
        snprintf(why, cap, "no value under the key");
    } else if (r->type == REDIS_REPLY_STRING && r->len > max_size) {
        io = SJ_REMOTE_IO_OVERSIZE;
        snprintf(why, cap, "value is larger than max_value_size (%zu bytes)", max_size);
    } else if (r->type == REDIS_REPLY_STRING) {
        out->data = (const uint8_t *)r->str;
        out->size = r->len;
        out->hold = r;
        return SJ_REMOTE_IO_OK;
    } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "WRONGTYPE", 9) == 0) {
        io = SJ_REMOTE_IO_INVALID;
        snprintf(why, cap, "key holds a Redis value that is not a string");
    } else if (r->type == REDIS_REPLY_ERROR) {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "GETRANGE refused: %.*s", (int)r->len, r->str);
    } else {
        io = SJ_REMOTE_IO_INVALID;
        snprintf(why, cap, "GETRANGE: unexpected reply type %d", r->type);
    }
    freeReplyObject(r);
    return io;
}

static sj_remote_io redis_fetch(void *impl, const char *key, size_t key_len, size_t max_size,
                                sj_remote_blob *out, char *why, size_t cap) {
    pipe_guard g;
    pipe_guard_enter(&g);
    sj_remote_io io = fetch_unguarded(impl, key, key_len, max_size, out, why, cap);
    pipe_guard_leave(&g);
    return io;
}

static void redis_release(void *impl, sj_remote_blob *blob) {
    (void)impl;
    freeReplyObject(blob->hold);
    memset(blob, 0, sizeof *blob);
}

static sj_remote_io store_unguarded(void *impl, const char *key, size_t key_len,
                                    const uint8_t *data, size_t size, char *why, size_t cap) {
    redisReply *r;
    sj_remote_io io =
        run_command(impl, "SET", SHORT_REPLY, why, cap, &r, "SET %b %b", key, key_len, data, size);
    if (io != SJ_REMOTE_IO_OK) return io;
    if (r->type == REDIS_REPLY_ERROR) {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "SET refused: %.*s", (int)r->len, r->str);
    } else if (r->type != REDIS_REPLY_STATUS) {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "SET: unexpected reply type %d", r->type);
    }
    freeReplyObject(r);
    return io;
}

static sj_remote_io redis_store(void *impl, const char *key, size_t key_len, const uint8_t *data,
                                size_t size, char *why, size_t cap) {
    pipe_guard g;
    pipe_guard_enter(&g);
    sj_remote_io io = store_unguarded(impl, key, key_len, data, size, why, cap);
    pipe_guard_leave(&g);
    return io;
}

/* Compare-and-renew and compare-and-delete: the lease is changed only while
 * it still holds this owner's token (atomic on the server). */
static const char RENEW_LUA[] = "if redis.call('get',KEYS[1])==ARGV[1] then "
                                "return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end";
static const char DROP_LUA[] = "if redis.call('get',KEYS[1])==ARGV[1] then "
                               "return redis.call('del',KEYS[1]) else return 0 end";

static sj_remote_io lease_unguarded(redis_transport *t, sj_remote_lease_op op, const char *name,
                                    size_t name_len, const char *token, int ms, char *why,
                                    size_t cap) {
    static const char *const what[] = {"SET NX PX", "EVAL renew", "EVAL drop"};
    redisReply *r;
    sj_remote_io io;
    if (op == SJ_REMOTE_LEASE_TAKE)
        io = run_command(t, what[op], SHORT_REPLY, why, cap, &r, "SET %b %s NX PX %d", name,
                         name_len, token, ms);
    else if (op == SJ_REMOTE_LEASE_RENEW)
        io = run_command(t, what[op], SHORT_REPLY, why, cap, &r, "EVAL %s 1 %b %s %d", RENEW_LUA,
                         name, name_len, token, ms);
    else
        io = run_command(t, what[op], SHORT_REPLY, why, cap, &r, "EVAL %s 1 %b %s", DROP_LUA, name,
                         name_len, token);
    if (io != SJ_REMOTE_IO_OK) return io;
    /* taken / renewed / dropped: +OK or :1; held by another, or not ours: nil or :0 */
    if ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) ||
        (r->type == REDIS_REPLY_INTEGER && r->integer == 1)) {
        io = SJ_REMOTE_IO_OK;
    } else if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_INTEGER && r->integer == 0)) {
        io = SJ_REMOTE_IO_ABSENT;
        snprintf(why, cap, "%s", op == SJ_REMOTE_LEASE_TAKE ? "held by another owner"
                                                             : "the lease is not this owner's");
    } else if (r->type == REDIS_REPLY_ERROR) {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "%s refused: %.*s", what[op], (int)r->len, r->str);
    } else {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "%s: unexpected reply type %d", what[op], r->type);
    }
    freeReplyObject(r);
    return io;
}

static sj_remote_io redis_lease(void *impl, sj_remote_lease_op op, const char *name,
                                size_t name_len, const char *token, int ms, char *why, size_t cap) {
    pipe_guard g;
    pipe_guard_enter(&g);
    sj_remote_io io = lease_unguarded(impl, op, name, name_len, token, ms, why, cap);
    pipe_guard_leave(&g);
    return io;
}

static sj_remote_io owner_unguarded(redis_transport *t, const char *name, size_t name_len,
                                    char *owner, size_t owner_cap, char *why, size_t cap) {
    redisReply *r;
    sj_remote_io io = run_command(t, "GET", SHORT_REPLY, why, cap, &r, "GET %b", name, name_len);
    if (io != SJ_REMOTE_IO_OK) return io;
    if (r->type == REDIS_REPLY_STRING) {
        snprintf(owner, owner_cap, "%.*s", (int)r->len, r->str);
    } else if (r->type == REDIS_REPLY_NIL) {
        io = SJ_REMOTE_IO_ABSENT;
        snprintf(why, cap, "no one holds the lease");
    } else if (r->type == REDIS_REPLY_ERROR) {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "GET refused: %.*s", (int)r->len, r->str);
    } else {
        io = SJ_REMOTE_IO_ERROR;
        snprintf(why, cap, "GET: unexpected reply type %d", r->type);
    }
    freeReplyObject(r);
    return io;
}

static sj_remote_io redis_lease_owner(void *impl, const char *name, size_t name_len, char *owner,
                                      size_t owner_cap, char *why, size_t cap) {
    pipe_guard g;
    pipe_guard_enter(&g);
    sj_remote_io io = owner_unguarded(impl, name, name_len, owner, owner_cap, why, cap);
    pipe_guard_leave(&g);
    return io;
}

static void redis_destroy(void *impl) {
    redis_transport *t = impl;
    for (int i = 0; i < t->n_idle; i++) redisFree(t->idle[i]);
    pthread_cond_destroy(&t->returned);
    pthread_mutex_destroy(&t->lock);
    url_free(t->ctx, &t->url);
    sj_free(t->ctx, t->idle);
    sj_free(t->ctx, t);
}

static const sj_remote_transport REDIS_TRANSPORT = {
    .name = "redis",
    .fetch = redis_fetch,
    .release = redis_release,
    .store = redis_store,
    .lease = redis_lease,
    .lease_owner = redis_lease_owner,
    .destroy = redis_destroy,
};

static struct timeval ms_to_tv(int ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

sj_status sj__remote_redis_open(sj_ctx *ctx, const sj_remote_config *cfg,
                               const sj_remote_transport **ops, void **impl, char **safe_url) {
    redis_url u;
    SJ_TRY(parse_url(ctx, cfg->url, &u));
    redis_transport *t = sj_calloc(ctx, 1, sizeof *t);
    redisContext **idle = sj_calloc(ctx, (size_t)cfg->pool_size, sizeof *idle);
    char *masked = masked_url(ctx, &u);
    pthread_condattr_t ca;
    bool cond_ok = false;
    if (t && idle && masked && pthread_condattr_init(&ca) == 0) {
        cond_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                  pthread_cond_init(&t->returned, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!cond_ok) {
        url_free(ctx, &u);
        sj_free(ctx, t);
        sj_free(ctx, idle);
        sj_free(ctx, masked);
        return sj_fail(ctx, SJ_E_NOMEM, "remote tier: out of memory opening the Redis transport");
    }
    pthread_mutex_init(&t->lock, NULL);
    t->ctx = ctx;
    t->url = u;
    t->connect_tv = ms_to_tv(cfg->connect_timeout_ms);
    t->command_tv = ms_to_tv(cfg->command_timeout_ms);
    t->command_timeout_ms = cfg->command_timeout_ms;
    t->idle = idle;
    t->pool_size = cfg->pool_size;
    *ops = &REDIS_TRANSPORT;
    *impl = t;
    *safe_url = masked;
    return SJ_OK;
}
