/* Integer values computed from no input, known as affine forms of their
 * element's position: what lets the row-independence proof (rows.c) follow
 * the index arithmetic exporters write around a dynamic batch, such as
 * mask[arange(batch) * seq + arange(seq)] or a GatherND of (arange(batch),
 * arange(seq)) pairs, and see that row r reads row r. Not installed.
 *
 * A form gives element i of value v as c0[t] + sum_d c[t][d] * i_d, where
 * t is i's index along the last axis when the value is a tuple of n > 1
 * forms (a concat of index columns, as GatherND takes), else 0 (one form
 * for every element). n == 0: not known to be affine. */
#ifndef SJ_IR_ROW_FORMS_H
#define SJ_IR_ROW_FORMS_H

#include "ir/graph_impl.h"

typedef struct sj_row_form {
    int n;
    int64_t c0[SJ_MAX_RANK];
    int64_t c[SJ_MAX_RANK][SJ_MAX_RANK];
} sj_row_form;

/* The form of node v of g, given the forms of the values before it (forms
 * may be consulted at any earlier index); unknown for anything but integer
 * params, ranges, reshapes that add or drop dims of 1, expands, casts
 * between integer types, adds, subtracts and scalings, and concats along
 * the last axis. */
void sj__row_form_of(const sj_graph *g, const sj_row_form *forms, sj_value v, sj_row_form *out);

/* Form t of f (the one form when f has one). */
static inline int sj__row_form_pick(const sj_row_form *f, int t) { return f->n == 1 ? 0 : t; }

#endif
