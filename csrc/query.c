/*
** query.c: the query engine (SQL dialect, planner, executor).
*/

#include "regolith.h"

int rg_filter_eval (const char *filter, const cJSON *doc, int *pass,
                    rg_err *e) {
  (void)filter; (void)doc;
  *pass = 0;
  return rg_fail(e, 400, "patch filters need the query engine, which is "
                 "not part of this build yet");
}
