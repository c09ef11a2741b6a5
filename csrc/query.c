/*
** query.c: the query engine's entry points, until the engine lands.
*/

#include "regolith.h"

int rg_filter_eval (const char *filter, const cJSON *doc, int *pass,
                    rg_err *e) {
  (void)filter; (void)doc;
  *pass = 0;
  return rg_fail(e, 400, "patch filters need the query engine, which is "
                 "not part of this build yet");
}

int rg_query_exec (MDB_txn *txn, const rg_cont *c, int64_t now,
                   const rg_query_req *q, rg_query_res *r, rg_err *e) {
  (void)txn; (void)c; (void)now; (void)q;
  rg_buf_init(&r->rows);
  rg_buf_init(&r->continuation);
  return rg_fail(e, 400, "queries need the query engine, which is not part "
                 "of this build yet");
}

void rg_query_res_free (rg_query_res *r) {
  rg_buf_free(&r->rows);
  rg_buf_free(&r->continuation);
}
