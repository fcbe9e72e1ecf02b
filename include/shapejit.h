/* shapejit.h — the umbrella header: includes every public header.
 *
 *   #include <shapejit.h>
 *   sj_ctx *ctx; sj_ctx_create(NULL, &ctx); ... sj_ctx_destroy(ctx);
 *
 * Each header also compiles on its own (tests/headers.cmake checks both).
 */
#ifndef SHAPEJIT_H
#define SHAPEJIT_H

#include "shapejit/artifact.h"
#include "shapejit/backends.h"
#include "shapejit/bucketed_cache.h"
#include "shapejit/common.h"
#include "shapejit/compile.h"
#include "shapejit/cuda_device.h"
#include "shapejit/device.h"
#include "shapejit/engine.h"
#include "shapejit/graph.h"
#include "shapejit/interp.h"
#include "shapejit/ladder.h"
#include "shapejit/metadata_cache.h"
#include "shapejit/model.h"
#include "shapejit/onnx.h"
#include "shapejit/op_cache.h"
#include "shapejit/remote.h"
#include "shapejit/runtime.h"
#include "shapejit/store.h"
#include "shapejit/tensor.h"

#endif
