/* Private to the remote tier: the frame around each value, and the table a
 * transport (Redis today) fills in. The tier (remote_tier.c) holds the
 * policy — trust, back-off, write-behind, counters; a transport only moves
 * bytes to and from one server and says how each attempt ended. */
#ifndef SJ_REMOTE_TIER_IMPL_H
#define SJ_REMOTE_TIER_IMPL_H

#include "shapejit/remote.h"

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

void sj_remote_trust_init(sj_remote_trust *t, const char *secret);

/* Fills the header of frame (SJ_REMOTE_FRAME_OVERHEAD + content_size bytes
 * whose content is already in place after the header). */
void sj_remote_frame_seal(const sj_remote_trust *t, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                          uint8_t *frame, size_t content_size);

/* NULL when frame is a value this tier may trust under key, with
 * *content_off / *content_size locating the content; otherwise why not. */
const char *sj_remote_frame_check(const sj_remote_trust *t, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                                  const uint8_t *frame, size_t size, size_t *content_off,
                                  size_t *content_size);

/* True when why (from sj_remote_frame_check) says the frame is whole but
 * its tag is not this tier's kind or does not verify with this tier's
 * secret: a fleet member with another secret wrote it. */
bool sj_remote_frame_foreign(const char *why);

/* ---- Transport. */
#define SJ_REMOTE_MAX_POOL 256

typedef enum sj_remote_io {
    SJ_REMOTE_IO_OK,
    SJ_REMOTE_IO_ABSENT,   /* the server has no value under the key */
    SJ_REMOTE_IO_OVERSIZE, /* the value is longer than the limit; not transferred */
    SJ_REMOTE_IO_INVALID,  /* the server answered with something that is not a value */
    SJ_REMOTE_IO_ERROR,    /* connection refused or lost, I/O or server error */
    SJ_REMOTE_IO_TIMEOUT   /* connect or command ran out of time */
} sj_remote_io;

/* A fetched value; `hold` is the transport's, handed back to release. */
typedef struct sj_remote_blob {
    const uint8_t *data;
    size_t size;
    void *hold;
} sj_remote_blob;

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
    void (*destroy)(void *impl);
} sj_remote_transport;

/* Opens a transport for cfg->url (already known to carry its scheme) without
 * touching the network. *safe_url receives the URL with the password masked
 * (sj_alloc'ed). */
typedef sj_status (*sj_remote_transport_open_fn)(sj_ctx *ctx, const sj_remote_config *cfg,
                                                 const sj_remote_transport **ops, void **impl,
                                                 char **safe_url);

sj_status sj_remote_redis_open(sj_ctx *ctx, const sj_remote_config *cfg,
                               const sj_remote_transport **ops, void **impl, char **safe_url);

#endif
