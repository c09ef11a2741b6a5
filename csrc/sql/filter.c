/*
** filter.c: patch filters, conditions in the query dialect.
**
** A patch filter is a condition in the query dialect, "FROM c WHERE
** c.status = 'open'" (JOINs allowed: it holds when some row passes), run
** on the item's current version before a patch applies.  It goes through
** the same parser and row pipeline as queries, so it has exactly their
** semantics; it cannot take parameters.
*/

#include <string.h>

#include "base/json.h"
#include "sql/sql_int.h"

int rg_filter_eval (const char *filter, const cJSON *doc, int *pass,
                    rg_err *e) {
  rg_query *q = NULL;
  rg_qexec *x = NULL;
  rg_buf text, rows, offs, tok;
  rg_qdoc d;
  size_t count = 0;
  int rc;
  *pass = 0;
  rg_buf_init(&text);
  rg_buf_init(&rows);
  rg_buf_init(&offs);
  rg_buf_init(&tok);
  if ((rc = rg_query_parse(filter, strlen(filter), 1, &q, e))) {
    char msg[sizeof(e->msg)];
    memcpy(msg, e->msg, sizeof(msg));
    rg_fail(e, rc, "bad filter: %s", msg);
    goto done;
  }
  if (q->nparams) {
    int n = (int)(q->param[0].nlen > 64 ? 64 : q->param[0].nlen);
    rc = rg_fail(e, 400, "bad filter: a filter cannot use parameters "
                 "(@%.*s)", n, q->param[0].name);
    goto done;
  }
  rg_json_print(doc, &text);
  if (text.oom) { rc = rg_fail(e, 500, "out of memory"); goto done; }
  if ((rc = rg_qexec_new(&x, q, NULL, RG_QX_STREAM, 0, 1, NULL, 0, e)))
    goto done;
  memset(&d, 0, sizeof(d));
  d.text = text.p;
  d.len = text.n;
  rc = rg_qexec_doc(x, &d, e);
  if (rc != 0 && rc != 1) goto done;
  if ((rc = rg_qexec_finish(x, &rows, &offs, &count, &tok, e))) goto done;
  *pass = count > 0;
done:
  rg_qexec_free(x);
  rg_query_free(q);
  rg_buf_free(&text);
  rg_buf_free(&rows);
  rg_buf_free(&offs);
  rg_buf_free(&tok);
  return rc;
}

int rg_qcomputed_json (const rg_query *cq, const char *doc, size_t n,
                       rg_buf *out, rg_err *e) {
  rg_tape t;
  rg_arena mem;
  rg_qctx c;
  rg_qv bind[2], v;
  int rc;
  memset(&t, 0, sizeof(t));
  rg_arena_init(&mem);
  if ((rc = rg_tape_parse(&t, &mem, doc, n))) {
    rg_arena_free(&mem);
    return rg_fail(e, rc, "the item is not JSON");
  }
  memset(&c, 0, sizeof(c));
  c.q = cq;
  c.bind = bind;
  c.scratch = &mem;
  rg_qv_of_node(&c.doc, &t.node[0]);
  bind[0] = bind[1] = c.doc;
  rg_qeval(&c, cq->sel[cq->blk[0].sel0].expr, &v);
  if (v.t != RG_QV_UNDEF) rg_qv_print(out, &v);
  rg_qfts_free(&c);                  /* a FullTextContains' analyses */
  rc = mem.oom || out->oom ? rg_fail(e, 500, "out of memory") : 0;
  rg_tape_free(&t);
  rg_arena_free(&mem);
  return rc;
}
