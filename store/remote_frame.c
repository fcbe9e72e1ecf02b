/* The frame around a remote value: it binds the content to the key it was
 * stored under and, with a secret, to the fleet that holds the secret. */
#include "store/remote_tier_impl.h"

#include "core/hash.h"

#include <llvm-c/blake3.h>
#include <string.h>

#define HEADER_TAGGED 48 /* bytes of header covered by the tag */

/* A fixed, application-specific context string, as BLAKE3's derive_key mode
 * asks: the same secret used elsewhere yields an unrelated key here. */
static const char MAC_KEY_CONTEXT[] = "shapejit 2026-11 remote tier value MAC v1";

void sj__remote_trust_init(sj_remote_trust *t, const char *secret) {
    memset(t, 0, sizeof *t);
    if (!secret || !secret[0]) return;
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init_derive_key(&h, MAC_KEY_CONTEXT);
    llvm_blake3_hasher_update(&h, secret, strlen(secret));
    llvm_blake3_hasher_finalize(&h, t->key, sizeof t->key);
    t->keyed = true;
}


static void compute_tag(const sj_remote_trust *t, const uint8_t *frame, size_t content_size,
                        uint8_t tag[32]) {
    llvm_blake3_hasher h;
    if (t->keyed)
        llvm_blake3_hasher_init_keyed(&h, t->key);
    else
        llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, frame, HEADER_TAGGED);
    llvm_blake3_hasher_update(&h, frame + SJ_REMOTE_FRAME_OVERHEAD, content_size);
    llvm_blake3_hasher_finalize(&h, tag, 32);
}

void sj__remote_frame_seal(const sj_remote_trust *t, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                          uint8_t *frame, size_t content_size) {
    memcpy(frame, "SJRT", 4);
    frame[4] = SJ_REMOTE_FRAME_VERSION;
    frame[5] = t->keyed ? SJ_REMOTE_TAG_MAC : SJ_REMOTE_TAG_CHECKSUM;
    frame[6] = frame[7] = 0;
    memcpy(frame + 8, key, SJ_REMOTE_KEY_SIZE);
    sj__put_le(frame + 40, content_size, 8);
    compute_tag(t, frame, content_size, frame + HEADER_TAGGED);
}

/* The refusals that mean "written by a node with another secret (or
 * none)", as opposed to damage: such a value is never published over. */
static const char NO_MAC[] = "value carries no MAC but this tier requires one";
static const char UNEXPECTED_MAC[] = "value carries a MAC but this tier has no secret to check it";
static const char BAD_MAC[] = "MAC does not verify (tampered, or another secret)";

bool sj__remote_frame_foreign(const char *why) {
    return why == NO_MAC || why == UNEXPECTED_MAC || why == BAD_MAC;
}

/* Compares in time independent of where the tags differ, so a forger learns
 * nothing from how fast a guess is refused. */
static bool tags_equal(const uint8_t *a, const uint8_t *b) {
    uint8_t diff = 0;
    for (int i = 0; i < 32; i++) diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

const char *sj__remote_frame_check(const sj_remote_trust *t, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                                  const uint8_t *frame, size_t size, size_t *content_off,
                                  size_t *content_size) {
    if (size < SJ_REMOTE_FRAME_OVERHEAD) return "shorter than a frame header";
    if (memcmp(frame, "SJRT", 4) != 0) return "bad magic (not a shapejit remote value)";
    if (frame[4] != SJ_REMOTE_FRAME_VERSION) return "unknown frame version";
    if (frame[6] != 0 || frame[7] != 0) return "reserved header bytes not zero";
    if (frame[5] != SJ_REMOTE_TAG_MAC && frame[5] != SJ_REMOTE_TAG_CHECKSUM)
        return "unknown tag kind";
    if (t->keyed && frame[5] != SJ_REMOTE_TAG_MAC) return NO_MAC;
    if (!t->keyed && frame[5] != SJ_REMOTE_TAG_CHECKSUM) return UNEXPECTED_MAC;
    if (sj__get_le(frame + 40, 8) != size - SJ_REMOTE_FRAME_OVERHEAD)
        return "content length does not match the value's size";
    if (memcmp(frame + 8, key, SJ_REMOTE_KEY_SIZE) != 0) return "value was stored under another key";
    uint8_t tag[32];
    compute_tag(t, frame, size - SJ_REMOTE_FRAME_OVERHEAD, tag);
    if (!tags_equal(tag, frame + HEADER_TAGGED))
        return t->keyed ? BAD_MAC : "checksum does not verify (corrupted)";
    *content_off = SJ_REMOTE_FRAME_OVERHEAD;
    *content_size = size - SJ_REMOTE_FRAME_OVERHEAD;
    return NULL;
}
