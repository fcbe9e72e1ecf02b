/* See cpu_features.h. */
#include "runtime/cpu_features.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Whether the comma-separated list enables feat (given without its sign,
 * length n). */
static bool enables(const char *list, const char *feat, size_t n) {
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n + 1 && p[0] == '+' && !memcmp(p + 1, feat, n)) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

int sj__cpu_features_missing(const char *need, const char *have, char *missing, size_t cap) {
    size_t used = 0;
    int n = 0;
    if (missing && cap) missing[0] = '\0';
    for (const char *p = need; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 1 && p[0] == '+' && !enables(have, p + 1, len - 1)) {
            n++;
            if (missing && used < cap) {
                int w = snprintf(missing + used, cap - used, "%s%.*s", used ? " " : "",
                                 (int)(len - 1), p + 1);
                if (w > 0 && (size_t)w < cap - used) used += (size_t)w;
            }
        }
        if (!end) break;
        p = end + 1;
    }
    return n;
}
