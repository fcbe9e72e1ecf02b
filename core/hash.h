/* The small non-cryptographic hashes and generators every layer shares, in
 * one place so a format that depends on one (artifact checksums, compile
 * option hashes, .sjg random(), name maps) cannot drift from another copy.
 * Content hashes (graphs, store digests) are BLAKE3 (ir/hash.c).
 * Private to the library.
 *
 *   uint64_t h = sj__fnv1a(SJ_FNV_OFFSET, bytes, n);   // checksum of a buffer
 *   uint64_t s = seed;  double u = (double)(sj__splitmix64(&s) >> 11) * 0x1p-53;
 *   char hex[65];  sj__hex_encode(digest, 32, hex);
 *   uint8_t b[8];  sj__put_le(b, size, 8);  ...  size = sj__get_le(b, 8);
 */
#ifndef SJ_CORE_HASH_H
#define SJ_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SJ_FNV_OFFSET 0xcbf29ce484222325ull

/* FNV-1a, 64 bit, continued from `h` (SJ_FNV_OFFSET to start). */
uint64_t sj__fnv1a(uint64_t h, const void *p, size_t n);
/* The same over a NUL-terminated string. */
uint64_t sj__fnv1a_str(uint64_t h, const char *s);
/* sj__fnv1a_str from SJ_FNV_OFFSET: short names hash fast and spread well. */
uint64_t sj__hash_str(const char *s);

/* splitmix64: a seeded generator; advances *state. Its sequence is part of
 * the .sjg format (random(seed=...), docs/sjg.md), so it must never change. */
uint64_t sj__splitmix64(uint64_t *state);

/* v's low n bytes (n <= 8) at p, little-endian, and back: the byte order
 * of every stored and hashed format, whatever the host's. */
void sj__put_le(uint8_t *p, uint64_t v, int n);
uint64_t sj__get_le(const uint8_t *p, int n);

/* Lower-case hex of n bytes into out[2n + 1], NUL-terminated. */
void sj__hex_encode(const uint8_t *bytes, size_t n, char *out);

#endif
