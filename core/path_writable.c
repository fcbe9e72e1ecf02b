/* The writers' rule (path_writable.h). */
#include "core/path_writable.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool sj__path_writable(const char *what, const char *path, const struct stat *sb, char *why,
                       size_t cap) {
    if ((sb->st_mode & 0222) == 0) {
        if (why) snprintf(why, cap, "%s %s has mode %04o", what, path, (unsigned)(sb->st_mode & 07777));
        return false;
    }
    if (access(path, W_OK) != 0) {
        if (why) snprintf(why, cap, "%s %s: %s", what, path, strerror(errno));
        return false;
    }
    return true;
}
