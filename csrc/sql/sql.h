/*
** sql.h: the SQL dialect (Cosmos DB NoSQL): parsing, values, evaluation
** and the row pipeline, over JSON text, with no storage underneath.
**
** A query is parsed once (rg_query_parse) into expressions in one array;
** documents come in as JSON text from whatever source a caller has (the
** store's scans and index lookups, a patch filter's one document, a test),
** are flattened into tapes, turned into rows (JOIN), filtered, ordered,
** counted and projected into one page (rg_qexec_*).  The store's planner
** reads the parsed query (rg_query, rg_qexpr) to choose its index ranges;
** the evaluation context (sql_int.h) is the engine's own.
**
** Invariants: the engine allocates from arenas and frees with them; it
** never raises; bad SQL, parameters or resume payloads give 400 with a
** message naming the position ("syntax error at line:column: ...");
** results are JSON text copied from the documents as stored.
*/

#ifndef rg_sql_h
#define rg_sql_h

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/arena.h"
#include "base/support.h"

/* Value types, in the order ORDER BY ranks them (arrays and objects rank
** with undefined: ORDER BY sorts by scalars). */
enum { RG_QV_UNDEF, RG_QV_NULL, RG_QV_FALSE, RG_QV_TRUE, RG_QV_NUM,
       RG_QV_STR, RG_QV_ARR, RG_QV_OBJ };

/*
** A tape is a JSON value flattened into an array of nodes in document
** order: a container's children follow it, and `size` (the nodes of a
** subtree, itself included) skips over one.  Strings are raw bytes (NUL
** allowed), pointing into the text when it held no escape; `raw` is the
** value's own JSON text, so that a value read from a document is copied
** out as it is stored.  Built values (constructors) have `raw` NULL.
*/
typedef struct rg_qnode {
  uint8_t t;
  uint32_t n;                /* string bytes; elements or members */
  uint32_t size;             /* nodes in this subtree, itself included */
  uint32_t klen;
  const char *key;           /* member name inside an object, else NULL */
  double d;                  /* number */
  const char *s;             /* string bytes */
  const char *raw;           /* JSON text of the value, or NULL */
  uint32_t rawlen;
} rg_qnode;

typedef struct rg_tape {
  rg_qnode *node;
  size_t n, cap;
} rg_tape;

void rg_tape_free (rg_tape *t);

/* A value during evaluation: a scalar, or a subtree of some tape. */
typedef struct rg_qv {
  uint8_t t;
  double d;
  const char *s;
  size_t n;
  const rg_qnode *node;      /* arrays and objects; scalars from a tape */
} rg_qv;

/* The order-preserving term of a value (store/layout.c's encoding; undefined,
** arrays and objects give 0x01, below every scalar); strings cut after
** `limit` encoded bytes (0: never), as index terms are. */
void rg_qv_term (rg_buf *b, const rg_qv *v, int desc, size_t limit);

/* Expressions: nodes in one array, linked by index (-1: none). */
enum {
  RG_QE_LIT, RG_QE_PARAM, RG_QE_ALIAS, RG_QE_IDENT, RG_QE_PROP,
  RG_QE_INDEX, RG_QE_UNARY, RG_QE_BINARY, RG_QE_AND, RG_QE_OR, RG_QE_NOT,
  RG_QE_TERNARY, RG_QE_COALESCE, RG_QE_IN, RG_QE_BETWEEN, RG_QE_CALL,
  RG_QE_ARRAY, RG_QE_OBJECT, RG_QE_MEMBER
};
enum {                       /* operators of UNARY and BINARY */
  RG_QO_EQ, RG_QO_NE, RG_QO_LT, RG_QO_LE, RG_QO_GT, RG_QO_GE,
  RG_QO_ADD, RG_QO_SUB, RG_QO_MUL, RG_QO_DIV, RG_QO_MOD, RG_QO_CAT,
  RG_QO_NEG, RG_QO_POS
};
enum {                       /* functions; the aggregates come first */
  RG_QF_COUNT, RG_QF_SUM, RG_QF_MIN, RG_QF_MAX, RG_QF_AVG,
  RG_QF_IS_DEFINED, RG_QF_IS_NULL, RG_QF_IS_STRING, RG_QF_IS_NUMBER,
  RG_QF_IS_BOOL, RG_QF_IS_ARRAY, RG_QF_IS_OBJECT, RG_QF_ARRAY_CONTAINS,
  RG_QF_ARRAY_LENGTH, RG_QF_STARTSWITH, RG_QF_ENDSWITH, RG_QF_CONTAINS,
  RG_QF_LOWER, RG_QF_UPPER, RG_QF_LENGTH, RG_QF_CONCAT, RG_QF_SUBSTRING,
  RG_QF_LEFT
};
#define RG_QF_ISAGG(f) ((f) <= RG_QF_AVG)

typedef struct rg_qexpr {
  uint8_t k, op;             /* kind; operator, function, or NOT IN */
  int32_t a, b, c;           /* operands */
  int32_t list, nlist;       /* arguments, items, members: q->list[...] */
  int32_t slot;              /* alias, parameter or aggregate slot */
  uint32_t pos;              /* byte offset in the text (errors) */
  uint32_t depth;            /* nesting of the subtree (bounded) */
  const char *s;             /* property, member or identifier name */
  uint32_t n;
  rg_qv v;                   /* a literal */
} rg_qexpr;

#define RG_QMAX_JOIN  8
#define RG_QMAX_ORDER 8
#define RG_QMAX_DEPTH 100      /* expression nesting */

typedef struct rg_qsel {
  int32_t expr;
  const char *name;          /* the output property */
  uint32_t nlen;
} rg_qsel;

typedef struct rg_qparam {
  const char *name;          /* without '@' */
  uint32_t nlen, pos;
} rg_qparam;

/* A parsed query.  Everything it points to lives in `mem`. */
typedef struct rg_query {
  rg_qexpr *ex;
  int nex, capex;
  int32_t *list;
  int nlist, caplist;
  rg_arena mem;
  const char *sql;
  size_t sqllen;
  int distinct, star, value;
  int32_t top, offset, limit;          /* literal or parameter; -1 absent */
  rg_qsel *sel;
  int nsel, capsel;
  const char *alias;
  uint32_t alen;
  int njoin;
  struct { const char *name; uint32_t nlen; int32_t src; } join[RG_QMAX_JOIN];
  int32_t where;
  int norder;
  struct { int32_t expr; int desc; } order[RG_QMAX_ORDER];
  int naggs;                           /* aggregate calls (slots) */
  int nparams;
  rg_qparam *param;
} rg_query;

/* Parses a query (`filter`: the form "FROM c [JOIN ...] WHERE cond" of
** patch filters).  400 with "syntax error at line:column: ..." messages. */
int  rg_query_parse (const char *sql, size_t n, int filter, rg_query **out,
                     rg_err *e);
void rg_query_free (rg_query *q);
/* Binds the parameters from JSON text of an object (NULL: none): one value
** per parameter slot into *out (allocated in `a`); 400 naming the first
** parameter the text does not bind. */
int  rg_query_bind (const rg_query *q, const char *json, size_t n,
                    rg_tape *t, rg_arena *a, rg_qv **out, rg_err *e);


/*
** The row pipeline (exec.c): documents come in from a source (the
** planner's scans and index lookups, or a test harness), rows are made
** (JOIN), filtered, ordered, counted and projected into one page.
*/
enum { RG_QX_STREAM = 1, RG_QX_SORT, RG_QX_AGG, RG_QX_DISTINCT };

typedef struct rg_qdoc {
  const char *text;          /* the item's JSON (valid until the finish) */
  size_t len;
  uint64_t hash, digest;     /* partition hash and item digest: ties */
  const uint8_t *pos;        /* the source's position of this document */
  size_t poslen;
  int phase;                 /* the source's phase (resuming) */
  int unordered_only;        /* keep only rows whose first ORDER BY value
                                is not a scalar */
} rg_qdoc;

typedef struct rg_qexec rg_qexec;

/* A pipeline for one page: `mode` RG_QX_*, `tie_desc` orders ties by
** descending (hash, digest), `page` rows at most (0: all), `resume` the
** payload of a continuation token (NULL: from the start).  400 for a
** payload this query cannot resume from or bad TOP/OFFSET/LIMIT. */
int  rg_qexec_new (rg_qexec **out, const rg_query *q, const rg_qv *params,
                   int mode, int tie_desc, long page, const uint8_t *resume,
                   size_t rlen, rg_err *e);
/* The conditions to test instead of the WHERE (its conjuncts that the
** source does not already guarantee); `conds` must outlive the pipeline. */
void rg_qexec_conds (rg_qexec *x, const int32_t *conds, int n);
/* Bounds the page's work: documents fed plus rows made (408 beyond), and
** bytes of results held (413 beyond); 0: no bound.  rg_qexec_made tells
** the work done so far. */
void rg_qexec_limits (rg_qexec *x, uint64_t max_rows, size_t max_bytes);
uint64_t rg_qexec_made (const rg_qexec *x);
/* Where the previous page ended: 1 and the source position, or 0. */
int  rg_qexec_resume (const rg_qexec *x, int *phase, const uint8_t **pos,
                      size_t *poslen, const uint8_t **okey, size_t *oklen);
/* Feeds one document: 0 more wanted, 1 the page is complete, or a
** status. */
int  rg_qexec_doc (rg_qexec *x, const rg_qdoc *d, rg_err *e);
/* The order key of a document's first row (ORDER BY on the FROM alias). */
int  rg_qexec_okey (rg_qexec *x, const rg_qdoc *d, rg_buf *out, rg_err *e);
/* Ends the page: the rows (JSON array text), where each row is (offset,
** length pairs), their count, and the token payload (empty: done). */
int  rg_qexec_finish (rg_qexec *x, rg_buf *rows, rg_buf *offsets,
                      size_t *count, rg_buf *payload, rg_err *e);
void rg_qexec_free (rg_qexec *x);

/*
** A patch filter: a condition in the dialect ("FROM c WHERE ...", JOINs
** allowed: it holds when some row passes) evaluated on one document; 400
** for bad text or for parameters, which a filter cannot take.
*/
int  rg_filter_eval (const char *filter, const cJSON *doc, int *pass,
                     rg_err *e);

#endif
