/*
** sql_int.h: the query engine's internals, shared by parse.c, eval.c and
** exec.c and by nothing outside sql/.
**
** Tapes are parsed and values compared, printed and built here; a row is
** evaluated in an rg_qctx that binds the FROM alias and the joins, the
** parameters and the aggregates' results, with a scratch arena reset per
** row.
*/

#ifndef rg_sql_int_h
#define rg_sql_int_h

#include "sql/sql.h"

/* Parses JSON text into `t` (reset first); decoded strings go to `a`.
** 0, 400 for text that is not JSON, 500 out of memory. */
int  rg_tape_parse (rg_tape *t, rg_arena *a, const char *s, size_t n);

void rg_qv_of_node (rg_qv *v, const rg_qnode *node);
const rg_qnode *rg_qnode_member (const rg_qnode *obj, const char *k,
                                 size_t n);

/* Deep equality of two values of the same kind. */
int  rg_qv_equal (const rg_qv *a, const rg_qv *b);

/* JSON text of a value. */
void rg_qv_print (rg_buf *b, const rg_qv *v);

/* A canonical encoding: equal values (objects in any member order) give
** equal bytes (DISTINCT). */
void rg_qv_canon (rg_buf *b, const rg_qv *v);

/* A value built from `n` values: an array, or an object (names given). */
int  rg_qv_build (rg_arena *a, int obj, const rg_qv *items,
                  const char *const *names, const uint32_t *nlens, int n,
                  rg_qv *out);

/* Line and column (1-based, in characters) of a byte offset. */
void rg_query_where (const char *sql, size_t off, int *line, int *col);

/* The evaluation context of one row. */
typedef struct rg_qctx {
  const rg_query *q;
  rg_qv bind[1 + RG_QMAX_JOIN];        /* the FROM alias, then the joins */
  const rg_qv *params;
  const rg_qv *aggs;                   /* results of the aggregates */
  rg_arena *scratch;                   /* built values; reset per row */
} rg_qctx;

/* Evaluates expression `e`; out-of-memory shows in scratch->oom. */
void rg_qeval (rg_qctx *x, int32_t e, rg_qv *out);

#endif
