/* Windows folded over their taps: a gather through a constant index table
 * [taps, positions] (or [positions, taps]) whose taps a reduction folds,
 * alone (a max or average pool) or times another value (a depthwise conv's
 * weight). formats/onnx/onnx_window.h lays Conv and the pools out that way.
 * Lowering inlines such a gather into its reduction, so the taps are loads
 * inside the sum and never a buffer (a conv's would be taps times its
 * input). So it does a table gather that is one term of an elementwise
 * expression (the sums of taps of a Winograd conv's input transform,
 * formats/onnx/onnx_winograd.h). Not installed.
 *
 * A padded window's gather reads its data with one fill element appended
 * (a concat of the data and a one-element fill along the gathered axis);
 * lowering reads the data in place instead, the fill standing for the
 * appended element, so the padded copy is never made.
 *
 *   bool *win;                                  // per node: a window gather
 *   sj_value *pad;                              // per node: the concat it skips
 *   SJ_TRY(sj__window_find(g, &win, &pad));
 *   if (win[v]) ... inline gather v into its reduction
 *   if (pad[v] != SJ_NO_VALUE) ... gather v reads pad[v]'s first operand
 *   sj_free(g->ctx, win);
 *   sj_free(g->ctx, pad);
 */
#ifndef SJ_LOWER_WINDOW_FUSE_H
#define SJ_LOWER_WINDOW_FUSE_H

#include "ir/graph_impl.h"

/* *win: n_nodes flags (sj_calloc'd on g->ctx; the caller frees), set on
 * each gather that is a window folded over its taps:
 *   - its index is a constant int32/int64 table of two axes (the taps and
 *     the positions, in either order) and it gathers float32 data along an
 *     axis of constant length;
 *   - it has one use and is no output, and that use is a sum, mean or max
 *     over one of the table's axes alone, or a multiply of the same shape
 *     (used once, no output) that a sum or mean over such an axis folds;
 * and on each table gather: a constant int table of any rank (constant
 * dims), float32 data along an axis of constant length, one use and no
 * output, that use a float32 elementwise op.
 * *pad: n_nodes values (sj_alloc'd; the caller frees), SJ_NO_VALUE but on
 * each gather through a constant table whose data is a concat, no output
 * and used by such gathers alone (one or many), of float32 data x and a
 * FILL one element long, along the gathered axis: that concat. The gather
 * may then read x, an index of x's length reading the fill's value. */
sj_status sj__window_find(const sj_graph *g, bool **win, sj_value **pad);

#endif
