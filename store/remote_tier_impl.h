/* Private to the remote tier: the frame around each value, and the table a
 * transport (Redis today) fills in. The tier (remote_tier.c) holds the
 * policy — trust, back-off, write-behind, counters; a transport only moves
 * bytes to and from one server and says how each attempt ended. */
#ifndef SJ_REMOTE_TIER_IMPL_H
#define SJ_REMOTE_TIER_IMPL_H

#include "shapejit/ext/remote_tier.h"

#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Frame: little-endian, SJ_REMOTE_FRAME_OVERHEAD bytes, then content.
 *   0  4  magic "SJRT"
 *   4  1  version (1)
 *   5  1  tag kind: 1 = BLAKE3 checksum, 2 = keyed-BLAKE3 MAC
 *   6  2  zero
 *   8 32  key digest the value was stored under
 *  40  8  content length
 *  48 32  tag over bytes [0, 48) and the content */
#define SJ_REMOTE_FRAME_VERSION 1
#define SJ_REMOTE_TAG_CHECKSUM 1
#define SJ_REMOTE_TAG_MAC 2

typedef struct sj_remote_trust {
    bool keyed;       /* a secret was configured */
    uint8_t key[32];  /* derived from the secret; unused when !keyed */
} sj_remote_trust;

void sj__remote_trust_init(sj_remote_trust *t, const char *secret);

/* Fills the header of frame (SJ_REMOTE_FRAME_OVERHEAD + content_size bytes
 * whose content is already in place after the header). */
void sj__remote_frame_seal(const sj_remote_trust *t, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                          uint8_t *frame, size_t content_size);

/* NULL when frame is a value this tier may trust under key, with
 * *content_off / *content_size locating the content; otherwise why not. */
const char *sj__remote_frame_check(const sj_remote_trust *t, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                                  const uint8_t *frame, size_t size, size_t *content_off,
                                  size_t *content_size);

/* True when why (from sj__remote_frame_check) says the frame is whole but
 * its tag is not this tier's kind or does not verify with this tier's
 * secret: a fleet member with another secret wrote it. */
bool sj__remote_frame_foreign(const char *why);

/* ---- Transport. */
#define SJ_REMOTE_MAX_POOL 256

typedef enum sj_remote_io {
    SJ_REMOTE_IO_OK,
    SJ_REMOTE_IO_ABSENT,   /* the server has no value under the key */
    SJ_REMOTE_IO_OVERSIZE, /* the value is longer than the limit; not transferred */
    SJ_REMOTE_IO_INVALID,  /* the server answered with something that is not a value */
    SJ_REMOTE_IO_PROTOCOL, /* the bytes that came back are not a Redis reply at all */
    SJ_REMOTE_IO_ERROR,    /* connection refused or lost, I/O or server error */
    SJ_REMOTE_IO_TIMEOUT   /* connect or command ran out of time */
} sj_remote_io;

/* A fetched value; `hold` is the transport's, handed back to release. */
typedef struct sj_remote_blob {
    const uint8_t *data;
    size_t size;
    void *hold;
} sj_remote_blob;

/* Compile leases (remote_lease.c): take is SET NX PX (ABSENT: another owner
 * holds it); renew and drop compare the owner token first, so neither ever
 * extends or deletes another owner's lease (ABSENT: not ours any more). */
typedef enum sj_remote_lease_op {
    SJ_REMOTE_LEASE_TAKE,
    SJ_REMOTE_LEASE_RENEW,
    SJ_REMOTE_LEASE_DROP
} sj_remote_lease_op;

/* Every function writes a short reason into why (cap bytes) when it does not
 * return SJ_REMOTE_IO_OK. fetch may run on many threads at once; store runs
 * on the write-behind thread only. A transport frees a connection whose
 * attempt ended in ERROR or TIMEOUT and makes a new one on the next call. */
typedef struct sj_remote_transport {
    const char *name;
    sj_remote_io (*fetch)(void *impl, const char *key, size_t key_len, size_t max_size,
                          sj_remote_blob *out, char *why, size_t cap);
    void (*release)(void *impl, sj_remote_blob *blob);
    sj_remote_io (*store)(void *impl, const char *key, size_t key_len, const uint8_t *data,
                          size_t size, char *why, size_t cap);
    sj_remote_io (*lease)(void *impl, sj_remote_lease_op op, const char *name, size_t name_len,
                          const char *token, int ms, char *why, size_t cap);
    /* The token holding the lease now (GET): OK with owner set, ABSENT when
     * no one holds it. */
    sj_remote_io (*lease_owner)(void *impl, const char *name, size_t name_len, char *owner,
                                size_t owner_cap, char *why, size_t cap);
    void (*destroy)(void *impl);
} sj_remote_transport;

/* Opens a transport for cfg->url (already known to carry its scheme) without
 * touching the network. *safe_url receives the URL with the password masked
 * (sj_alloc'ed). */
typedef sj_status (*sj_remote_transport_open_fn)(sj_ctx *ctx, const sj_remote_config *cfg,
                                                 const sj_remote_transport **ops, void **impl,
                                                 char **safe_url);

sj_status sj__remote_redis_open(sj_ctx *ctx, const sj_remote_config *cfg,
                               const sj_remote_transport **ops, void **impl, char **safe_url);

/* ---- The tier itself, shared by remote_tier.c (get, put, back-off) and
 * remote_lease.c (compile leases). */
#define SJ_REMOTE_WHY_MAX 256
/* prefix + "lease:" + 64 hex digits + NUL */
#define SJ_REMOTE_NAME_MAX (SJ_REMOTE_MAX_PREFIX + 6 + 2 * SJ_REMOTE_KEY_SIZE + 1)

typedef struct sj_remote_counters {
    atomic_uint_fast64_t hits, misses, errors, timeouts, rejected, backoff_skips, puts,
        dropped_puts, foreign, kept_foreign, leases_won, lease_waits, lease_waited_hits,
        lease_waited_compiles, lease_errors;
} sj_remote_counters;

typedef struct sj_remote_put_item sj_remote_put_item;

/* A lease this process holds: renewed by the renewer thread until dropped. */
struct sj_remote_lease {
    sj_remote *r;
    struct sj_remote_lease *next;
    char name[SJ_REMOTE_NAME_MAX];
    size_t name_len;
    char token[64];
};

struct sj_remote {
    sj_ctx *ctx;
    const sj_remote_transport *tp;
    void *tp_impl;
    char *safe_url;
    char *prefix;
    size_t prefix_len;
    sj_remote_trust trust;
    bool read_only;
    int backoff_ms;
    size_t max_value_size;
    size_t queue_capacity;
    void (*on_warning)(void *user, const char *message);
    void *warning_user;
    atomic_bool warned; /* on_warning was called */

    /* The tier is off until this CLOCK_MONOTONIC time (ns); 0 = on. */
    atomic_int_fast64_t off_until_ns;
    pthread_mutex_t why_lock;
    char last_failure[SJ_REMOTE_WHY_MAX]; /* what started the current back-off */

    sj_remote_counters n;

    pthread_mutex_t q_lock;
    pthread_cond_t q_work; /* an item arrived, or stopping */
    pthread_cond_t q_idle; /* the queue drained and nothing is in flight */
    sj_remote_put_item *q_head, *q_tail;
    size_t q_len;
    bool q_busy, stopping, writer_started;
    pthread_t writer;

    /* Compile leases: 0 = off. The renewer renews every held lease each
     * lease_ms / 3; lease_lock guards the list and never spans a command. */
    int lease_ms;
    pthread_mutex_t lease_lock;
    pthread_cond_t lease_wake; /* CLOCK_MONOTONIC; stopping */
    struct sj_remote_lease *leases;
    bool lease_inited, lease_stopping, renewer_started;
    pthread_t renewer;
    atomic_uint_fast64_t lease_seq;
    char token_base[40]; /* random per tier; each lease adds its sequence number */
};

int64_t sj__remote_now_ns(void);
void sj__remote_bump(atomic_uint_fast64_t *c);
/* *ts = CLOCK_MONOTONIC now + ms (for pthread_cond_timedwait on a
 * monotonic condition variable). remote_redis.c. */
void sj__remote_deadline_after_ms(struct timespec *ts, int ms);
/* After an error or timeout: the tier goes off for backoff_ms. */
void sj__remote_enter_backoff(sj_remote *r, sj_remote_io io, const char *why);
/* Remaining back-off in ms (rounded up), 0 when the tier is on. */
int64_t sj__remote_backoff_left_ms(sj_remote *r);
/* sj_remote_get; an absent value is counted a miss only when count_absent
 * (a waiter polling for a value does not count each poll). */
sj_status sj__remote_fetch(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], void **data,
                          size_t *size, bool count_absent);
/* Queues the drop of l behind every put queued before it, so the value is
 * published before the lease goes; false when there is no writer. */
bool sj__remote_queue_release(sj_remote *r, sj_remote_lease *l);
/* Compare-and-delete of l on the server (unless backing off); unlists and
 * frees l. */
void sj__remote_lease_drop(sj_remote_lease *l);
/* Lease machinery at create (random token base, renewer thread) and
 * destroy (after the writer: drops what is still held). */
sj_status sj__remote_leases_start(sj_remote *r, int lease_ms);
void sj__remote_leases_stop(sj_remote *r);

#endif
