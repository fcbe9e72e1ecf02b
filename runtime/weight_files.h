/* Weights derived at load (a GEMM's packed panels) kept as files, so the
 * next process maps them instead of making them again. Private to the
 * runtime.
 *
 *   sj_weight_map *m;
 *   const void *data;
 *   if (sj__weight_file_map(ctx, dir, key, bytes, &m, &data) == SJ_OK) {
 *       ...lend data (it lies in m) to the weight pool...
 *   } else {
 *       ...make the bytes into buf...
 *       sj__weight_file_save(ctx, dir, key, buf, bytes);   // best effort
 *   }
 *
 * Making BERT-base's packed weights costs a warm process most of its time
 * to ready: 340 MB of fresh pages zeroed and written. A file's pages are
 * the page cache's: mapping them costs a page-table walk, and every
 * process on the machine shares one copy.
 *
 * One file per key and build of this library, DIR/<hash of both>.pack
 * (another build may pack otherwise): a 4096-byte header (magic, the
 * byte count, the key, the BLAKE3 of the bytes, a check of the header),
 * then the bytes, page aligned. A file is written under a temporary name,
 * made read-only and renamed into place, and never written again:
 * a reader sees a whole file or none, and since nothing of ours truncates
 * one, its mapping cannot fault (weight_map.h says why that matters). The
 * mapping trusts the bytes while the file's identity holds, as the model
 * digests trust an unchanged model file; a check that sees the identity
 * move hashes them again against the header's hash. A header that does not
 * match (another key, another size, damaged) is not used: the caller makes
 * the bytes again and the save replaces the file. */
#ifndef SJ_RUNTIME_WEIGHT_FILES_H
#define SJ_RUNTIME_WEIGHT_FILES_H

#include "core/weight_map.h"

#include <stddef.h>
#include <stdint.h>

/* Maps DIR/<key>.pack when its header names key and bytes. *data (page
 * aligned, `bytes` long) lies in *out, the caller's reference.
 * SJ_E_NOT_FOUND: no file; SJ_E_CORRUPT: a file whose header does not
 * match (message says what); SJ_E_IO: it could not be read or mapped. */
sj_status sj__weight_file_map(sj_ctx *ctx, const char *dir, const uint8_t key[32], size_t bytes,
                             sj_weight_map **out, const void **data);

/* Writes buf as DIR/<key>.pack (making DIR, mode 0700, when absent),
 * replacing any file there. Best effort: false when it could not (a full
 * disk, a read-only folder), and nothing is left behind; the context's
 * last error is not touched, as a failed save loses nothing. */
bool sj__weight_file_save(sj_ctx *ctx, const char *dir, const uint8_t key[32], const void *buf,
                         size_t bytes);

/* Bounds DIR to max_bytes of files, removing the least recently used
 * first (a map or a save marks a file used: its mtime), and any temporary a
 * writer left behind over an hour ago (it crashed mid-write). A process
 * mapping a removed file keeps its pages; the next one packs it again.
 * A missing folder is SJ_OK with nothing removed; SJ_E_IO names what could
 * not be read or removed. Counts (may be NULL) what went. */
sj_status sj__weight_files_prune(sj_ctx *ctx, const char *dir, int64_t max_bytes, int64_t *files,
                                int64_t *bytes);

#endif
