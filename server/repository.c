/* Models from files: one model file, or a repository folder with a
 * sub-folder per model (the layout Triton and KServe use) whose optional
 * config.json says what the command line says for a single model. */
#include "server/server_impl.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/ladder_switch.h"
#include "client_util/files.h"

#define MAX_DIMS 16

static bool has_ext(const char *f, const char *ext) {
    size_t n = strlen(f), k = strlen(ext);
    return n > k && !strcmp(f + n - k, ext);
}

/* The one .sjg or .onnx file in dir. */
static sj_status model_file(srv_server *s, const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return sj_ctx_set_error(s->ctx, SJ_E_IO, "%s: cannot open: %s", dir, strerror(errno));
    int found = 0;
    struct dirent *de;
    char first[512] = "";
    while ((de = readdir(d))) {
        if (!has_ext(de->d_name, ".sjg") && !has_ext(de->d_name, ".onnx")) continue;
        if (found++ == 0) {
            snprintf(first, sizeof first, "%s", de->d_name);
        } else {
            closedir(d);
            return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "%s: two model files (%s and %s); keep one",
                           dir, first, de->d_name);
        }
    }
    closedir(d);
    if (!found)
        return sj_ctx_set_error(s->ctx, SJ_E_NOT_FOUND, "%s: no model file (.sjg or .onnx)", dir);
    if ((size_t)snprintf(out, cap, "%s/%s", dir, first) >= cap)
        return sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "%s/%s: path too long", dir, first);
    return SJ_OK;
}

typedef struct model_config {
    json_t *root; /* owns the strings below */
    sj_engine_config cfg;
    sj_dim_value dims[MAX_DIMS];
    char dyn_input[256];
    srv_fit_options fit; /* the server's, overridden by fit_window and fit_cost */
    bool fit_keys;       /* either was given */
} model_config;

static sj_status read_config(srv_server *s, const char *path, model_config *mc) {
    json_error_t err;
    /* opened by cu_open_regular, not json_load_file: a FIFO there would
     * block the open until a writer came, and the server would never start */
    int fd;
    SRV_TRY(cu_open_regular(s->ctx, path, &fd));
    mc->root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &err);
    close(fd);
    if (!mc->root)
        return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    if (!json_is_object(mc->root)) return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: not a JSON object", path);
    const char *key;
    json_t *v;
    json_object_foreach(mc->root, key, v) {
        if (!strcmp(key, "ladder") || !strcmp(key, "dynamic") || !strcmp(key, "backend") ||
            !strcmp(key, "dynamic_axis")) {
            const char *str = json_string_value(v);
            if (!str) return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"%s\" must be a string", path, key);
            if (!strcmp(key, "ladder")) mc->cfg.ladder = str;
            if (!strcmp(key, "dynamic")) mc->cfg.model.dynamic_name = str;
            if (!strcmp(key, "backend")) mc->cfg.backend = str;
            if (!strcmp(key, "dynamic_axis")) {
                const char *colon = strrchr(str, ':');
                char *end;
                long axis = colon ? strtol(colon + 1, &end, 10) : -1;
                if (!colon || colon == str || *end || axis < 0 || axis >= SJ_MAX_RANK ||
                    (size_t)(colon - str) >= sizeof mc->dyn_input)
                    return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"dynamic_axis\" must be INPUT:AXIS, "
                                   "got \"%s\"", path, str);
                memcpy(mc->dyn_input, str, (size_t)(colon - str));
                mc->dyn_input[colon - str] = '\0';
                mc->cfg.model.dynamic_input = mc->dyn_input;
                mc->cfg.model.dynamic_axis = (int)axis;
            }
        } else if (!strcmp(key, "dims")) {
            if (!json_is_object(v))
                return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"dims\" must be an object of NAME: SIZE", path);
            const char *dn;
            json_t *dv;
            int n = 0;
            json_object_foreach(v, dn, dv) {
                if (n == MAX_DIMS)
                    return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: more than %d dims", path, MAX_DIMS);
                /* a size, or a tie to the dynamic dim ("past+1") */
                const char *dyn = json_string_value(json_object_get(mc->root, "dynamic"));
                int64_t d = json_is_integer(dv) ? json_integer_value(dv) : 0;
                if (json_is_string(dv) && sj_dim_parse(json_string_value(dv), dyn, &d) != SJ_OK) d = 0;
                if (!(json_is_integer(dv) || json_is_string(dv)) || d == 0 || (json_is_integer(dv) && d < 1))
                    return sj_ctx_set_error(s->ctx, SJ_E_PARSE,
                                            "%s: dims.%s must be an integer >= 1, or a string "
                                            "[K*]DYNAMIC[+C] tying it to \"dynamic\"",
                                            path, dn);
                mc->dims[n++] = (sj_dim_value){dn, d};
            }
            mc->cfg.model.fixed_dims = mc->dims;
            mc->cfg.model.n_fixed_dims = n;
        } else if (!strcmp(key, "fit_window")) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > SJ_LADDER_SWITCH_MAX_WINDOW)
                return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"fit_window\" must be an integer in 1..%d (requests)",
                               path, SJ_LADDER_SWITCH_MAX_WINDOW);
            mc->fit.window = json_integer_value(v);
            mc->fit_keys = true;
        } else if (!strcmp(key, "fit_cost")) {
            const char *str = json_string_value(v);
            if (!str || (strcmp(str, "measured") && strcmp(str, "rows")))
                return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"fit_cost\" must be \"measured\" or \"rows\"", path);
            mc->fit.cost_rows = !strcmp(str, "rows");
            mc->fit_keys = true;
        } else {
            return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: unknown key \"%s\" (known: ladder, dynamic, "
                           "dynamic_axis, dims, backend, fit_window, fit_cost)", path, key);
        }
    }
    int k;
    int fit = sj_ladder_switch_parse(mc->cfg.ladder, &k);
    if (fit < 0)
        return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"ladder\": \"%s\": fit:K needs K, a bucket count in 1..%d", path,
                       mc->cfg.ladder, SJ_LADDER_MAX_BUCKETS);
    if (mc->fit_keys && !fit)
        return sj_ctx_set_error(s->ctx, SJ_E_PARSE, "%s: \"fit_window\" and \"fit_cost\" need \"ladder\": \"fit:K\"",
                       path);
    return SJ_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

sj_status srv_open_repository(srv_server *s, const char *dir, const sj_engine_config *base) {
    DIR *d = opendir(dir);
    if (!d) return sj_ctx_set_error(s->ctx, SJ_E_IO, "--model-repository %s: cannot open: %s", dir, strerror(errno));
    /* Sorted, so models are listed and opened in the same order every time. */
    char *names[SRV_MAX_MODELS + 1];
    int n = 0;
    sj_status st = SJ_OK;
    struct dirent *de;
    while (st == SJ_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (n == SRV_MAX_MODELS)
            st = sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "%s: more than %d models", dir, SRV_MAX_MODELS);
        else if (!(names[n++] = strdup(de->d_name)))
            st = sj_ctx_set_error(s->ctx, SJ_E_NOMEM, "out of memory");
    }
    closedir(d);
    if (st == SJ_OK && n == 0)
        st = sj_ctx_set_error(s->ctx, SJ_E_NOT_FOUND, "--model-repository %s: no model folders in it", dir);
    if (st == SJ_OK) qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; st == SJ_OK && i < n; i++) {
        char folder[4096], file[4096], cfg_path[4096 + 16];
        if ((size_t)snprintf(folder, sizeof folder, "%s/%s", dir, names[i]) >= sizeof folder) {
            st = sj_ctx_set_error(s->ctx, SJ_E_INVALID_ARG, "%s/%s: path too long", dir, names[i]);
            break;
        }
        st = model_file(s, folder, file, sizeof file);
        model_config mc = {.cfg = *base, .fit = s->cfg.fit};
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", folder);
        struct stat sb;
        if (st == SJ_OK && stat(cfg_path, &sb) == 0) st = read_config(s, cfg_path, &mc);
        if (st == SJ_OK) {
            st = srv_open_fitting(s, names[i], file, NULL, &mc.cfg, &mc.fit);
            if (st != SJ_OK) sj_ctx_prefix_error(s->ctx, "model '%s'", names[i]);
        }
        json_decref(mc.root);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    return st;
}
