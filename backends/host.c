/* The host backend behind the bucketed cache's compiler table: sj_compile
 * + the artifact format for bytes, executables on host devices for runs. */
#include "shapejit/ext/backends.h"

#include "backends/artifact_exe.h"
#include "backends/backend_registry.h"
#include "backends/host_tune.h"
#include "backends/kernel_objects.h"
#include "core/clock.h"
#include "core/core_impl.h"
#include "core/hash.h"
#include "compile/llvm/llvm_impl.h"
#include "runtime/cpu_features.h"

#include <llvm-c/blake3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define HOST_MAX_DEVICES 256
/* "SJHO" + the u64 sj_compile_options_hash, little-endian. */
#define HOST_OPTIONS_BYTES 12
#define SJ_HOST_MAX_LEVELS 4

struct sj_host_compiler {
    sj_ctx *ctx;
    sj_compile_options options;
    char *cpu_opt, *features_opt; /* copies of the options' strings */
    bool replay;
    bool tune;
    int tune_budget_ms;
    int n_devices;
    sj_device **devices;
    atomic_uint next_device;
    uint8_t options_bytes[HOST_OPTIONS_BYTES];
    uint8_t quick_options_bytes[HOST_OPTIONS_BYTES]; /* tiered's quick table (backend row) */
    char *triple, *cpu;
    char features_key[SJ_STORE_FIELD_MAX];
    char compiler_version[64];
    /* The x86-64 levels this host can run, highest first, whose stored
     * artifacts a native compiler loads when none for its own CPU is stored. */
    int n_fallbacks;
    sj_compiler_target fallbacks[SJ_HOST_MAX_LEVELS];
    char fallback_features[SJ_HOST_MAX_LEVELS][SJ_STORE_FIELD_MAX];
    uint8_t fallback_options[SJ_HOST_MAX_LEVELS][HOST_OPTIONS_BYTES];
    /* sj_compile_stages totals (ns), summed by concurrent compiles and loads. */
    _Atomic uint64_t kernels, launches, lower_ns, emit_ns, optimise_ns, codegen_ns, load_ns;
    _Atomic uint64_t objects_compiled, objects_found;
};

void sj_host_compiler_config_init(sj_host_compiler_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    sj_compile_options_init(&cfg->options);
    cfg->devices = 1;
    cfg->threads = 1;
    cfg->replay = true;
    cfg->tune_budget_ms = 200;
}

/* The store key holds the enabled features only (what the code may use);
 * when they do not fit a key field, a digest of them stands in. */
static void features_key(const char *features, char *out, size_t cap) {
    size_t used = 0, n_enabled = 0;
    bool fits = true;
    out[0] = '\0';
    for (const char *p = features; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 1 && p[0] == '+') {
            n_enabled++;
            if (used + len + 2 > cap) fits = false;
            if (fits) {
                if (used) out[used++] = ',';
                memcpy(out + used, p, len);
                used += len;
                out[used] = '\0';
            }
        }
        if (!end) break;
        p = end + 1;
    }
    if (fits) return;
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, features, strlen(features));
    uint8_t d[16];
    llvm_blake3_hasher_finalize(&h, d, sizeof d);
    int w = snprintf(out, cap, "blake3:");
    for (size_t i = 0; i < sizeof d && (size_t)w + 2 < cap; i++)
        w += snprintf(out + w, cap - (size_t)w, "%02x", d[i]);
    snprintf(out + w, cap - (size_t)w, " (%zu enabled)", n_enabled);
}

void sj_host_compiler_destroy(sj_host_compiler *hc) {
    if (!hc) return;
    for (int i = 0; hc->devices && i < hc->n_devices; i++) sj_device_destroy(hc->devices[i]);
    sj_free(hc->ctx, hc->devices);
    sj_free(hc->ctx, hc->cpu_opt);
    sj_free(hc->ctx, hc->features_opt);
    sj_free(hc->ctx, hc->triple);
    sj_free(hc->ctx, hc->cpu);
    sj_free(hc->ctx, hc);
}

/* Tuned code has keys of its own: the options' hash, mixed with "tuned". */
static void options_bytes(const sj_compile_options *o, bool tune, uint8_t out[HOST_OPTIONS_BYTES]) {
    uint64_t oh = sj_compile_options_hash(o);
    if (tune) oh = sj__fnv1a(oh, "tuned", 5);
    memcpy(out, "SJHO", 4);
    for (int i = 0; i < 8; i++) out[4 + i] = (uint8_t)(oh >> (8 * i));
}

/* A native compiler also loads what a build machine stored for a portable
 * level: the highest first, and only levels whose every feature the host
 * (as host_features describes it) has. */
static void add_level_fallbacks(sj_host_compiler *hc, const char *host_features) {
    for (int i = sj__llvm_host_num_levels() - 1; i >= 0 && hc->n_fallbacks < SJ_HOST_MAX_LEVELS; i--) {
        const char *level_features;
        const char *name = sj__llvm_host_level(i, &level_features);
        if (sj__cpu_features_missing(level_features, host_features, NULL, 0)) continue;
        int k = hc->n_fallbacks++;
        sj_compile_options o = hc->options;
        o.cpu = name;
        options_bytes(&o, hc->tune, hc->fallback_options[k]);
        features_key(level_features, hc->fallback_features[k], SJ_STORE_FIELD_MAX);
        hc->fallbacks[k] = (sj_compiler_target){.cpu = name, .features = hc->fallback_features[k],
                                                .options = hc->fallback_options[k],
                                                .options_len = HOST_OPTIONS_BYTES};
    }
}

static sj_status resolve_target(sj_host_compiler *hc, const char *host_features) {
    /* "native" is spelled NULL, so both hash (and key) alike. Options are
     * checked here, before any compile, and the features kept in their
     * checked form (implied ones added), which the options hash, the store
     * key and the artifacts then all agree on. */
    if (sj__llvm_host_is_native(hc->options.cpu)) {
        sj_free(hc->ctx, hc->cpu_opt);
        hc->options.cpu = hc->cpu_opt = NULL;
    }
    if (hc->options.features) {
        char *checked;
        SJ_TRY(sj__llvm_host_features(hc->ctx, hc->options.features, &checked));
        sj_free(hc->ctx, hc->features_opt);
        hc->options.features = hc->features_opt = checked;
    }
    char *triple, *host_cpu, *host_view, *features;
    SJ_TRY(sj__llvm_host_info(hc->ctx, &triple, &host_cpu, &host_view));
    hc->triple = triple;
    sj_free(hc->ctx, host_cpu);
    sj_status st = sj__llvm_host_target(hc->ctx, hc->options.cpu, hc->options.features, &hc->cpu, &features);
    if (st == SJ_OK) {
        features_key(features, hc->features_key, sizeof hc->features_key);
        sj_free(hc->ctx, features);
        if (!hc->options.cpu && !hc->options.features)
            add_level_fallbacks(hc, host_features ? host_features : host_view);
        if (strlen(hc->triple) >= SJ_STORE_FIELD_MAX || strlen(hc->cpu) >= SJ_STORE_FIELD_MAX)
            st = sj_fail(hc->ctx, SJ_E_INVALID_ARG, "host compiler: target name longer than %d bytes",
                         SJ_STORE_FIELD_MAX - 1);
    }
    sj_free(hc->ctx, host_view);
    return st;
}

sj_status sj_host_compiler_create(sj_ctx *ctx, const sj_host_compiler_config *cfg,
                                  sj_host_compiler **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_host_compiler_config defaults;
    if (!cfg) {
        sj_host_compiler_config_init(&defaults);
        cfg = &defaults;
    }
    if (cfg->options.target != SJ_TARGET_HOST)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host compiler: options target %d is not the host",
                       (int)cfg->options.target);
    if (cfg->devices < 1 || cfg->devices > HOST_MAX_DEVICES)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host compiler: %d devices, expected 1..%d",
                       cfg->devices, HOST_MAX_DEVICES);
    if (cfg->threads < 1 || cfg->threads > SJ_HOST_MAX_THREADS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host compiler: %d threads per device, expected 1..%d",
                       cfg->threads, SJ_HOST_MAX_THREADS);
    if (cfg->tune && (cfg->tune_budget_ms < 1 || cfg->tune_budget_ms > 600000))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host compiler: tuning budget %d ms per bucket, expected 1..600000",
                       cfg->tune_budget_ms);
    sj_host_compiler *hc = sj_calloc(ctx, 1, sizeof *hc);
    if (!hc) return sj_fail(ctx, SJ_E_NOMEM, "host compiler: out of memory");
    hc->ctx = ctx;
    hc->options = cfg->options;
    hc->replay = cfg->replay;
    hc->tune = cfg->tune;
    hc->tune_budget_ms = cfg->tune_budget_ms;
    sj_status st = SJ_OK;
    /* The options' strings are copied so the caller's may go away. */
    if (cfg->options.cpu && !(hc->cpu_opt = sj_strdup(ctx, cfg->options.cpu))) st = SJ_E_NOMEM;
    if (cfg->options.features && !(hc->features_opt = sj_strdup(ctx, cfg->options.features)))
        st = SJ_E_NOMEM;
    hc->options.cpu = hc->cpu_opt;
    hc->options.features = hc->features_opt;
    hc->devices = sj_calloc(ctx, (size_t)cfg->devices, sizeof *hc->devices);
    if (st != SJ_OK || !hc->devices) {
        sj_host_compiler_destroy(hc);
        return sj_fail(ctx, SJ_E_NOMEM, "host compiler: out of memory");
    }
    st = resolve_target(hc, cfg->host_features);
    sj_host_device_config dcfg;
    sj_host_device_config_init(&dcfg);
    dcfg.policy = cfg->policy;
    dcfg.threads = cfg->threads;
    dcfg.weight_dir = cfg->weight_dir;
    for (int i = 0; st == SJ_OK && i < cfg->devices; i++) {
        st = sj_host_device_create_config(ctx, &dcfg, &hc->devices[i]);
        if (st == SJ_OK) hc->n_devices++;
    }
    if (st != SJ_OK) {
        sj_host_compiler_destroy(hc);
        return st;
    }
    options_bytes(&hc->options, hc->tune, hc->options_bytes);
    snprintf(hc->compiler_version, sizeof hc->compiler_version, "llvm-%s codegen-%d", SJ_LLVM_VERSION_STRING,
             SJ_HOST_CODEGEN_REVISION);
    *out = hc;
    return SJ_OK;
}

/* The cache's find, asked by a kernel's code key through the object names. */
typedef struct object_finder {
    sj_compiler table;
    sj_status (*find)(void *user, const uint8_t name[32], void **bytes, size_t *len);
    void *user;
} object_finder;

static sj_status find_object(void *user, const uint8_t code[32], void **bytes, size_t *len) {
    object_finder *f = user;
    uint8_t name[32];
    sj__kernel_object_name(&f->table, code, name);
    return f->find(f->user, name, bytes, len);
}

/* A compiled artifact's figures into the sj_compile_stages totals, then
 * its bytes (a is destroyed). */
static sj_status package(sj_host_compiler *hc, sj_artifact *a, void **artifact, size_t *len) {
    atomic_fetch_add_explicit(&hc->kernels, (uint64_t)a->plan.n_kernels, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->launches, (uint64_t)a->plan.n_launches, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->lower_ns, a->times.lower_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->emit_ns, a->times.emit_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->optimise_ns, a->times.optimise_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->codegen_ns, a->times.codegen_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->objects_compiled, a->times.objects_compiled, memory_order_relaxed);
    atomic_fetch_add_explicit(&hc->objects_found, a->times.objects_found, memory_order_relaxed);
    uint8_t *bytes;
    sj_status st = sj_artifact_serialize(a, &bytes, len);
    sj_artifact_destroy(a);
    if (st == SJ_OK) *artifact = bytes;
    return st;
}

static sj_status host_compile_from(void *self, const sj_graph *g, int64_t extent,
                                   sj_status (*find)(void *user, const uint8_t name[32], void **bytes,
                                                     size_t *len),
                                   void *user, void **artifact, size_t *len) {
    sj_host_compiler *hc = self;
    sj_artifact *a;
    object_finder finder = {.find = find, .user = user};
    sj_host_compiler_table(hc, &finder.table);
    sj_kernel_objects objects = {&finder, find_object};
    sj_compile_options o = hc->options;
    o.objects = find ? &objects : NULL;
    if (hc->tune)
        SJ_TRY(sj__host_tune(g, extent, &hc->options, hc->tune_budget_ms, &a));
    else
        SJ_TRY(sj_compile(g, extent, &o, &a));
    return package(hc, a, artifact, len);
}

static sj_status host_compile(void *self, const sj_graph *g, int64_t extent, void **artifact,
                             size_t *len) {
    return host_compile_from(self, g, extent, NULL, NULL, artifact, len);
}

/* Tiered compilation's quick code: the options at SJ_ENGINE_TIER_OPT_LEVEL,
 * untuned (tuning times every schedule: the opposite of quick), each
 * kernel compiled (the store's objects are the full code's). Counted in
 * the same stages as every compile. */
static sj_status host_compile_quick(void *self, const sj_graph *g, int64_t extent, void **artifact,
                                    size_t *len) {
    sj_host_compiler *hc = self;
    sj_compile_options o = hc->options;
    o.opt_level = SJ_ENGINE_TIER_OPT_LEVEL;
    sj_artifact *a;
    SJ_TRY(sj_compile(g, extent, &o, &a));
    return package(hc, a, artifact, len);
}

/* Each kernel object's name, as host_compile_from asks for it. */
static sj_status host_part_names(void *self, const sj_graph *g, const void *artifact, size_t len,
                                uint8_t (**names)[32], int *n) {
    sj_compiler table;
    sj_host_compiler_table(self, &table);
    return sj__kernel_object_names(&table, sj_graph_ctx(g), artifact, len, names, n);
}

static sj_status host_load(void *self, const sj_graph *g, int64_t extent, const void *artifact,
                           size_t len, void **exe) {
    sj_host_compiler *hc = self;
    sj_ctx *ctx = sj_graph_ctx(g);
    uint64_t t0 = sj__now_ns();
    sj_artifact *a;
    SJ_TRY(sj_artifact_deserialize(ctx, artifact, len, &a));
    sj_artifact_info info;
    sj_artifact_get_info(a, &info);
    sj_status st = SJ_OK;
    if (sj_graph_symbol(g) && info.extent != extent)
        st = sj_fail(ctx, SJ_E_MISMATCH, "host artifact: compiled at extent %lld, wanted %lld",
                     (long long)info.extent, (long long)extent);
    /* Checks the graph hash and this CPU's features before any code loads. */
    unsigned d = atomic_fetch_add(&hc->next_device, 1) % (unsigned)hc->n_devices;
    sj_executable *e = NULL;
    if (st == SJ_OK) st = sj_artifact_load(a, hc->devices[d], g, &e);
    sj_artifact_destroy(a);
    atomic_fetch_add_explicit(&hc->load_ns, sj__now_ns() - t0, memory_order_relaxed);
    if (st != SJ_OK) {
        sj_executable_destroy(e);
        return st;
    }
    *exe = e;
    return SJ_OK;
}

/* The capture is made by the first run, not at load: it needs the run
 * memory, which a loaded bucket does not hold until it serves (and gives
 * back when trimmed, taking the capture with it). */
static sj_status host_run(void *self, void *exe, int64_t active, const sj_tensor *inputs,
                          sj_tensor *outputs) {
    sj_host_compiler *hc = self;
    if (hc->replay && !sj_executable_has_capture(exe)) SJ_TRY(sj_executable_capture(exe));
    return sj_executable_run_or_replay(exe, active, inputs, outputs);
}

static void host_stages(void *self, sj_compile_stages *out) {
    sj_host_compiler *hc = self;
    memset(out, 0, sizeof *out);
    out->kernels = atomic_load_explicit(&hc->kernels, memory_order_relaxed);
    out->launches = atomic_load_explicit(&hc->launches, memory_order_relaxed);
    out->lower_ms = (double)atomic_load_explicit(&hc->lower_ns, memory_order_relaxed) / 1e6;
    out->emit_ms = (double)atomic_load_explicit(&hc->emit_ns, memory_order_relaxed) / 1e6;
    out->optimise_ms = (double)atomic_load_explicit(&hc->optimise_ns, memory_order_relaxed) / 1e6;
    out->codegen_ms = (double)atomic_load_explicit(&hc->codegen_ns, memory_order_relaxed) / 1e6;
    out->load_ms = (double)atomic_load_explicit(&hc->load_ns, memory_order_relaxed) / 1e6;
    out->objects_compiled = atomic_load_explicit(&hc->objects_compiled, memory_order_relaxed);
    out->objects_found = atomic_load_explicit(&hc->objects_found, memory_order_relaxed);
}

void sj_host_compiler_table(sj_host_compiler *hc, sj_compiler *out) {
    memset(out, 0, sizeof *out);
    out->ctx = hc;
    out->target_triple = hc->triple;
    out->target_cpu = hc->cpu;
    out->target_features = hc->features_key;
    out->artifact_version = SJ_ARTIFACT_FORMAT_VERSION;
    out->compiler_version = hc->compiler_version;
    out->options = hc->options_bytes;
    out->options_len = HOST_OPTIONS_BYTES;
    out->fallbacks = hc->n_fallbacks ? hc->fallbacks : NULL;
    out->n_fallbacks = hc->n_fallbacks;
    out->compile = host_compile;
    out->load = host_load;
    out->run = host_run;
    out->stages = host_stages;
    sj__artifact_exe_ops(out);
    out->part_names = host_part_names;
    out->compile_from = host_compile_from;
}

int sj_host_compiler_num_devices(const sj_host_compiler *hc) { return hc ? hc->n_devices : 0; }

sj_device *sj_host_compiler_device(sj_host_compiler *hc, int i) {
    return hc && i >= 0 && i < hc->n_devices ? hc->devices[i] : NULL;
}

static void host_close(void *owner) { sj_host_compiler_destroy(owner); }

/* The registry's host row. Recompiling for this CPU is what a native host
 * compiler does on a miss; a chosen CPU (a level) compiles every bucket for
 * that one, so native_after with one makes no sense. */
sj_status sj__backend_host_open(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out) {
    if (p->native_after > 0 && p->cpu && strcmp(p->cpu, "native") != 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "native_after %d recompiles for this CPU, but cpu '%s' compiles for that "
                       "one; leave cpu native (it loads stored levels first)",
                       p->native_after, p->cpu);
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.devices = p->workers > 0 ? p->workers : 1;
    hcfg.threads = p->threads > 0 ? p->threads : 1;
    hcfg.options.cpu = p->cpu;
    hcfg.options.precision = p->precision;
    hcfg.tune = p->tune;
    hcfg.tune_budget_ms = p->tune_budget_ms;
    hcfg.weight_dir = p->weight_dir;
    sj_host_compiler *hc;
    sj_status st = sj_host_compiler_create(ctx, &hcfg, &hc);
    if (st != SJ_OK) {
        sj__error_prefix(ctx, "backend host");
        return st;
    }
    sj_host_compiler_table(hc, &out->comp);
    if (p->tiered) {
        /* The same table (its executables are comp's) with the quick
         * compile and the quick options' key bytes: nothing stores quick
         * code, but a table's options always say what it compiles. */
        out->quick = out->comp;
        sj_compile_options o = hc->options;
        o.opt_level = SJ_ENGINE_TIER_OPT_LEVEL;
        options_bytes(&o, false, hc->quick_options_bytes);
        out->quick.options = hc->quick_options_bytes;
        out->quick.compile = host_compile_quick;
        out->quick.compile_from = NULL;
        out->quick.part_names = NULL;
        out->quick.parts = NULL;
        out->quick.fallbacks = NULL;
        out->quick.n_fallbacks = 0;
    }
    out->owner = hc;
    out->close = host_close;
    /* A chosen CPU (a level a fleet shares) is part of what messages and
     * summaries call the target. */
    if (p->cpu && strcmp(p->cpu, "native") != 0)
        snprintf(out->target, sizeof out->target, "host %s", out->comp.target_cpu);
    return SJ_OK;
}
