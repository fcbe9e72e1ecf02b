/* Loading an .onnx file by path (onnx_file.c), for sj_model_load. Private
 * to the library.
 *
 *   sj_graph *g;
 *   SJ_TRY(sj__onnx_load_file(ctx, "bert.onnx", &options, &g));
 */
#ifndef SJ_ONNX_FILE_H
#define SJ_ONNX_FILE_H

#include "shapejit/model.h"

/* Loads the .onnx file at path as sj_onnx_load_mem would its bytes, reading
 * the top graph's large raw_data blocks from the file straight into the
 * blocks the graph keeps, so that they are never held twice. o is read as
 * given (sj_model_load has read the caller's into its own). */
sj_status sj__onnx_load_file(sj_ctx *ctx, const char *path, const sj_model_options *o,
                            sj_graph **out);

#endif
