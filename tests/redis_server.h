/* A throwaway redis-server for tests and benchmarks: started on a free
 * loopback port with persistence off, stopped and reaped by the caller.
 * Header-only so the test and the benchmark, separate programs, share it.
 *
 *   sj_test_redis srv;
 *   if (!sj_test_redis_path()) skip;          // redis-server not installed
 *   if (sj_test_redis_start(&srv, 0) != 0) fail;
 *   ... "redis://127.0.0.1:<srv.port>" ...
 *   sj_test_redis_stop(&srv);                  // SIGKILL + waitpid
 *
 * The server gets PR_SET_PDEATHSIG, so a test that crashes or is killed
 * does not leave it running. */
#ifndef SJ_TEST_REDIS_SERVER_H
#define SJ_TEST_REDIS_SERVER_H

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct sj_test_redis {
    pid_t pid; /* 0 when not running */
    int port;
} sj_test_redis;

/* The redis-server binary, or NULL when none is installed. */
static inline const char *sj_test_redis_path(void) {
    static const char *const candidates[] = {"/usr/bin/redis-server", "/usr/local/bin/redis-server"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (access(candidates[i], X_OK) == 0) return candidates[i];
    return NULL;
}

static inline double sj_test_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void sj_test_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A loopback port nobody listens on right now: the kernel picks it for a
 * socket bound to port 0, which is then closed. */
static inline int sj_test_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* A plain hiredis connection to the test server (for raw reads and writes
 * that bypass the tier). NULL on failure. */
static inline redisContext *sj_test_redis_connect(int port) {
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

static inline bool sj_test_redis_ping(int port) {
    redisContext *c = sj_test_redis_connect(port);
    if (!c) return false;
    redisReply *r = redisCommand(c, "PING");
    bool ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

static inline void sj_test_redis_stop(sj_test_redis *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGKILL); /* also ends a SIGSTOPped server */
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
}

static inline pid_t sj_test_redis_spawn(const char *path, int port) {
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
    }
    execl(path, "redis-server", "--bind", "127.0.0.1", "--port", port_s, "--save", "",
          "--appendonly", "no", "--daemonize", "no", "--dir", "/tmp", "--loglevel", "warning",
          (char *)NULL);
    _exit(127);
}

/* Starts a server on port (0: a free one, retried if another process takes
 * it first) and waits until it answers PING. 0 on success. */
static inline int sj_test_redis_start(sj_test_redis *s, int port) {
    const char *path = sj_test_redis_path();
    s->pid = 0;
    s->port = 0;
    if (!path) return -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        int p = port ? port : sj_test_free_port();
        if (p <= 0) return -1;
        pid_t pid = sj_test_redis_spawn(path, p);
        if (pid < 0) return -1;
        s->pid = pid;
        s->port = p;
        for (double t0 = sj_test_now_ms(); sj_test_now_ms() - t0 < 5000;) {
            if (waitpid(pid, NULL, WNOHANG) == pid) { /* exited: port taken, most likely */
                s->pid = 0;
                break;
            }
            if (sj_test_redis_ping(p)) return 0;
            sj_test_sleep_ms(10);
        }
        sj_test_redis_stop(s);
        if (port) sj_test_sleep_ms(100); /* a fixed port: give it time to come free */
    }
    return -1;
}

#endif
