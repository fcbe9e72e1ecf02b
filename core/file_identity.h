/* What tells a file is the one read before, short of reading its bytes:
 * device, inode, size, and the nanosecond mtime and ctime. Any write moves
 * ctime to the present, which no process can set back (utimensat sets
 * mtime only), so equal identities mean equal bytes, as ccache's direct
 * mode trusts them, except for a write in the same timestamp tick as the
 * identity was taken: a file changed under two seconds ago is not
 * "settled", and callers then read it instead of trusting it. Private.
 *
 *   sj_file_identity before, after;
 *   if (sj__file_identity_get(path, &before) && sj__file_identity_settled(&before)) {
 *       ...read path...
 *       bool trusted = sj__file_identity_get(path, &after) &&
 *                      sj__file_identity_equal(&before, &after);
 *   }
 */
#ifndef SJ_CORE_FILE_IDENTITY_H
#define SJ_CORE_FILE_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct sj_file_identity {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} sj_file_identity;

#define SJ_FILE_IDENTITY_BYTES 40

void sj__file_identity_of(const struct stat *sb, sj_file_identity *out);
/* stat(path) (following symlinks, as a read does); false when it fails. */
bool sj__file_identity_get(const char *path, sj_file_identity *out);
bool sj__file_identity_equal(const sj_file_identity *a, const sj_file_identity *b);
/* Whether the file's last change is at least two seconds in the past. */
bool sj__file_identity_settled(const sj_file_identity *id);
/* The identity as SJ_FILE_IDENTITY_BYTES little-endian bytes, for a key. */
void sj__file_identity_bytes(const sj_file_identity *id, uint8_t out[SJ_FILE_IDENTITY_BYTES]);
/* The identity of the file this library's code was loaded from (the
 * shared library, or the program it is linked into), so that a key built
 * with it changes with every build; false when it cannot be found. */
bool sj__library_identity(sj_file_identity *out);

#endif
