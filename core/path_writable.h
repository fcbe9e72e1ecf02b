/* Whether a file or folder may be written, by the rule every writer of
 * this library keeps (the store, the packed-weights folder). Private.
 *
 *   struct stat sb;
 *   char why[256];
 *   if (stat(path, &sb) == 0 && !sj__path_writable("the store file", path, &sb, why, sizeof why))
 *       ... open read-only; why says so ...
 */
#ifndef SJ_CORE_PATH_WRITABLE_H
#define SJ_CORE_PATH_WRITABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* false, with why ("<what> <path> has mode 0444", or access(2)'s reason),
 * where a write to path (sb its stat) would be refused. The mode bits are
 * honoured even for root, who could write anyway: a store made read-only
 * (chmod -R a-w) was made so on purpose. access(2) adds what the bits do
 * not show, a read-only mount (EROFS, for root too) or another owner's
 * file. why may be NULL. */
bool sj__path_writable(const char *what, const char *path, const struct stat *sb, char *why,
                       size_t cap);

#endif
