/* shapejit.h — the umbrella header: includes every public header.
 *
 *   #include <shapejit.h>
 *   sj_ctx *ctx; sj_ctx_create(NULL, &ctx); ... sj_ctx_destroy(ctx);
 */
#ifndef SHAPEJIT_H
#define SHAPEJIT_H

#include "shapejit/common.h"
#include "shapejit/graph.h"
#include "shapejit/interp.h"
#include "shapejit/model.h"
#include "shapejit/tensor.h"

#endif
