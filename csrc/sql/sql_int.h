/*
** sql_int.h: the query engine's internals, shared by parse.c, eval.c,
** func.c, time.c and exec.c and by nothing outside sql/.
**
** Tapes are parsed and values compared, printed and built here; a row is
** evaluated in an rg_qctx that binds the aliases of every block, the
** parameters, the aggregates' and groups' results and the document, with
** a scratch arena reset per document.
*/

#ifndef rg_sql_int_h
#define rg_sql_int_h

#include "sql/sql.h"

/* Parses JSON text into `t` (reset first); decoded strings go to `a`.
** 0, 400 for text that is not JSON, 500 out of memory. */
int  rg_tape_parse (rg_tape *t, rg_arena *a, const char *s, size_t n);

void rg_qv_of_node (rg_qv *v, const rg_qnode *node);
/* A value parsed from JSON text, held in `a`: 0, or -1 (not JSON). */
int  rg_qv_parse (rg_arena *a, const char *s, size_t n, rg_qv *out);
const rg_qnode *rg_qnode_member (const rg_qnode *obj, const char *k,
                                 size_t n);
const rg_qnode *rg_qnode_element (const rg_qnode *arr, uint32_t idx);
/* The node of a value (scalars get one in `tmp`). */
const rg_qnode *rg_qv_node (const rg_qv *v, rg_qnode *tmp);

/* Deep equality of two values of the same kind. */
int  rg_qv_equal (const rg_qv *a, const rg_qv *b);
int  rg_qnode_equal (const rg_qnode *x, const rg_qnode *y);
/* Booleans are one kind for comparisons. */
int  rg_qv_kind (int t);
/* Order of two scalars of the same kind: -1, 0, 1. */
int  rg_qv_scalar_cmp (const rg_qv *a, const rg_qv *b);
/* A total order over scalars: null < false < true < numbers < strings. */
int  rg_qv_any_cmp (const rg_qv *a, const rg_qv *b);

/* JSON text of a value (non-finite numbers print as null). */
void rg_qv_print (rg_buf *b, const rg_qv *v);

/* A canonical encoding: equal values (objects in any member order) give
** equal bytes (DISTINCT, GROUP BY). */
void rg_qv_canon (rg_buf *b, const rg_qv *v);

/* A value built from `n` values: an array, or an object (names given). */
int  rg_qv_build (rg_arena *a, int obj, const rg_qv *items,
                  const char *const *names, const uint32_t *nlens, int n,
                  rg_qv *out);

/* Value setters. */
void rg_qv_undef (rg_qv *v);
void rg_qv_bool (rg_qv *v, int b);
void rg_qv_num (rg_qv *v, double d);       /* non-finite: undefined */
void rg_qv_str (rg_qv *v, const char *s, size_t n);

/* Line and column (1-based, in characters) of a byte offset. */
void rg_query_where (const char *sql, size_t off, int *line, int *col);

/* One aggregate's accumulator. */
typedef struct rg_qagg {
  int fn;
  int32_t arg;
  uint64_t count;
  double sum;
  int bad;                           /* a value of the wrong type was seen */
  int has;
  rg_qv best;                        /* MIN/MAX */
  rg_buf str;                        /* its bytes when a string */
} rg_qagg;

/* Adds a value `w` times; 0, or -1 out of memory. */
int  rg_qagg_add (rg_qagg *g, const rg_qv *v, uint64_t w);
/* The result (undefined when there is none). */
void rg_qagg_result (const rg_qagg *g, rg_qv *out);

struct rg_qrx;

/* The evaluation context of one row. */
typedef struct rg_qctx {
  const rg_query *q;
  rg_qv *bind;                         /* q->nslots aliases */
  const rg_qv *params;
  rg_qv *aggs;                         /* q->naggs results */
  const rg_qv *groupv;                 /* the group's GROUP BY values */
  rg_qv doc;                           /* the document */
  rg_arena *scratch;                   /* built values; reset per document */
  /* computed properties: definitions, values cached per document */
  const rg_qcomputed *cp;
  int ncp;
  int cp_members;                      /* the document holds their values */
  rg_qv *cpv;
  uint8_t *cpdone;
  const rg_qudf *udf;
  const rg_qtext *text;                /* full-text statistics, or NULL */
  struct rg_qfts *fts;                 /* full-text state (fts.c) */
  /* time: the query's fixed now (static functions), in ticks */
  int64_t now_ticks;
  uint64_t rand;
  /* rows made by subqueries, counted against the page's bound */
  uint64_t *made;
  uint64_t max_made;
  uint64_t docid;                      /* DocumentId of the document */
  struct rg_qrx *rx;                   /* compiled patterns (func.c) */
  /* the work of LIKE and RegexMatch beyond a pass over their input (a
  ** linear pass is paid for by loading the document): charged as the
  ** rg_work counter `steps`; the CPU time the query may take, or NULL */
  uint64_t steps;
  rg_deadline *deadline;
  struct rg_qvcache *vcache;           /* query vectors, converted once
                                          (vector.c) */
  /* the first failure (a UDF's, a bound), 0 while none */
  int status;
  rg_err *e;
  rg_err err;
} rg_qctx;

/* Evaluates expression `e`; out-of-memory shows in scratch->oom, other
** failures in x->status. */
void rg_qeval (rg_qctx *x, int32_t e, rg_qv *out);
/* Calls a system function (func.c) on evaluated arguments. */
void rg_qcall (rg_qctx *x, int fn, const rg_qv *a, int n, rg_qv *out);
/* Frees the compiled patterns of a context. */
void rg_qrx_free (struct rg_qrx *rx);
void rg_qblock_run (rg_qctx *x, int blk, int kind, rg_qv *out);
/* Fails the evaluation (the first failure is kept). */
void rg_qctx_fail (rg_qctx *x, int status, const char *msg);
/* Has the query used its time?  Then it fails with 408 (returns 1); 1
** also once the evaluation has failed. */
int  rg_qctx_late (rg_qctx *x);
/* Counts `steps` of evaluation work, of which `linear` are free (see
** `steps` above), and asks rg_qctx_late. */
int  rg_qctx_work (rg_qctx *x, uint64_t steps, uint64_t linear);

/* Full text (fts.c): a FullText* or RRF call node evaluated (given the
** values of all its arguments, evaluated by eval.c; none for RRF); the row
** changed (its texts' analyses are dropped); the state freed.  Parse-time
** checks of the calls and of ORDER BY RANK (400).  RRF's components and
** weights (at most max; the count), and whether a component ranks higher
** values first. */
void rg_qfts_call (rg_qctx *x, int32_t e, const rg_qv *args, int n,
                   rg_qv *out);
void rg_qfts_newdoc (rg_qctx *x);
void rg_qfts_free (rg_qctx *x);
int  rg_qfts_check (const rg_query *q, rg_err *e);
int  rg_qfts_rrf (const rg_query *q, const rg_qv *params, int32_t e,
                  int32_t *comp, double *w, int max);
int  rg_qfts_rank_desc (const rg_query *q, const rg_qv *params, int32_t e);

/* Date and time (time.c): "YYYY-MM-DDThh:mm:ss.fffffffZ" strings and ticks
** (100 ns since 0001-01-01).  0 when the text is not one. */
int  rg_dt_parse (const char *s, size_t n, int64_t *ticks);
int64_t rg_dt_now_ticks (void);
#define RG_TICKS_PER_SEC   10000000LL
#define RG_UNIX_EPOCH_TICKS 621355968000000000LL
void rg_qtime_call (rg_qctx *x, int fn, const rg_qv *a, int n, rg_qv *out);

/* VectorDistance (vector.c): registers a call the parser made (its entry
** in q->vd), checking its literal arguments: 0, or 400 with the message
** and the offset to report (or 500); evaluates one; frees a context's
** cache of converted query vectors. */
int  rg_qvd_check (rg_query *q, int32_t call, uint32_t *pos, char *msg,
                   size_t size);
void rg_qvd_eval (rg_qctx *x, const rg_qexpr *ex, const rg_qv *a, int n,
                  rg_qv *out);
void rg_qvcache_free (struct rg_qvcache *c);

/* LIKE (func.c): does s match the pattern (escape 0: none)?  1 or 0; -1
** when the query must stop (its time is up). */
int  rg_like (rg_qctx *x, const char *s, size_t n, const char *p, size_t pn,
              unsigned esc);

#endif
