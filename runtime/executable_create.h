/* Making an executable from a launch plan: what the artifact loader (and
 * the runtime's own tests and benchmarks) call. Not installed: a plan is
 * lowering's internal type, so a library user makes executables with
 * sj_artifact_load (shapejit/ext/artifact.h) instead. */
#ifndef SJ_RUNTIME_EXECUTABLE_CREATE_H
#define SJ_RUNTIME_EXECUTABLE_CREATE_H

#include "shapejit/ext/runtime.h"
#include "plan/plan.h"

/* Loads `code` (format `fmt`) as the executable's own module and checks the
 * plan against the graph (slot kinds and sizes, kernel names, word ranges):
 * a mismatch is SJ_E_CORRUPT naming the slot or launch. */
sj_status sj__executable_create(sj_device *dev, const sj_launch_plan *plan, sj_code_format fmt,
                               const void *code, size_t code_len, const sj_graph *g,
                               sj_executable **out);
/* Same with a module the caller keeps (it must outlive the executable). */
sj_status sj__executable_create_from_module(sj_device *dev, const sj_launch_plan *plan,
                                           sj_module *module, const sj_graph *g,
                                           sj_executable **out);

#endif
