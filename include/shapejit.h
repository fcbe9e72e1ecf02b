/* shapejit.h — the umbrella header: includes the stable tier.
 *
 *   #include <shapejit.h>
 *   sj_ctx *ctx; sj_ctx_create(NULL, &ctx);
 *   sj_engine *e; sj_engine_open(ctx, "model.onnx", NULL, &e);
 *   ... sj_engine_run(e, ...) ...
 *   sj_engine_close(e); sj_ctx_destroy(ctx);
 *
 * The extension tier (devices, executables, caches, compilers, artifacts)
 * lives in shapejit/ext/ and is included by name. Each header also
 * compiles on its own (tests/headers.cmake checks both).
 */
#ifndef SHAPEJIT_H
#define SHAPEJIT_H

#include "shapejit/common.h"
#include "shapejit/engine.h"
#include "shapejit/graph.h"
#include "shapejit/ladder.h"
#include "shapejit/model.h"
#include "shapejit/precision.h"
#include "shapejit/remote.h"
#include "shapejit/store.h"
#include "shapejit/tensor.h"

#endif
