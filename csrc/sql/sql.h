/*
** sql.h: the SQL dialect (Cosmos DB NoSQL): parsing, values, evaluation
** and the row pipeline, over JSON text, with no storage underneath.
**
** A query is parsed once (rg_query_parse) into expressions in one array
** and blocks (the query, and each subquery inside it); documents come in
** as JSON text from whatever source a caller has (the store's scans and
** index lookups, a patch filter's one document, a test), are flattened
** into tapes, turned into rows (FROM and JOIN), filtered, grouped,
** ordered, counted and projected into one page (rg_qexec_*).  The store's
** planner reads the parsed query (rg_query, rg_qblock, rg_qexpr) to choose
** its index ranges; the evaluation context (sql_int.h) is the engine's own.
**
** What the engine cannot do itself comes through interfaces the caller
** gives: computed properties (their definitions, parsed queries), and
** user-defined functions (rg_qudf, a function table the script runtime
** implements, so that this layer never sees Lua).
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
#include "base/deadline.h"
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
/* A document's index terms, as the store's index writes them (the planner
** builds the entries of a small partition in memory from its items): the
** text is parsed into `t` (decoded strings in `a`), then for each of the
** `n` paths (object member names, MUTF-8; no array positions) the term of
** its scalar is appended to `out`, complemented where `desc[i]` (NULL:
** none), strings cut after `limit` bytes.  1 when every path holds a
** scalar, 0 when one does not (out as it was), -1 when the text is not
** JSON or memory ran out. */
int  rg_qdoc_terms (rg_tape *t, rg_arena *a, const char *text, size_t len,
                    const char *const *const *seg, const int *nseg,
                    const int *desc, int n, size_t limit, rg_buf *out);
/* The JSON text of the value a scalar term encodes (numbers as doubles,
** strings decoded); 0, or -1 for a malformed or cut term.  *used receives
** the term's length. */
int  rg_qv_term_json (const uint8_t *t, size_t n, rg_buf *out, size_t *used);

/* Expressions: nodes in one array, linked by index (-1: none). */
enum {
  RG_QE_LIT, RG_QE_PARAM, RG_QE_ALIAS, RG_QE_IDENT, RG_QE_PROP,
  RG_QE_INDEX, RG_QE_UNARY, RG_QE_BINARY, RG_QE_AND, RG_QE_OR, RG_QE_NOT,
  RG_QE_TERNARY, RG_QE_COALESCE, RG_QE_IN, RG_QE_BETWEEN, RG_QE_CALL,
  RG_QE_ARRAY, RG_QE_OBJECT, RG_QE_MEMBER,
  RG_QE_ROOT,                /* the document (a FROM container expression) */
  RG_QE_LIKE,                /* a [NOT] LIKE b [ESCAPE c] */
  RG_QE_SUBQ,                /* a subquery: op RG_QSUB_*, slot its block */
  RG_QE_UDF,                 /* udf.name(...): s, n the name */
  RG_QE_GROUPREF,            /* a GROUP BY expression's value: slot */
  RG_QE_COMPUTED             /* a computed property of the item: slot */
};
enum {                       /* operators of UNARY and BINARY */
  RG_QO_EQ, RG_QO_NE, RG_QO_LT, RG_QO_LE, RG_QO_GT, RG_QO_GE,
  RG_QO_ADD, RG_QO_SUB, RG_QO_MUL, RG_QO_DIV, RG_QO_MOD, RG_QO_CAT,
  RG_QO_BAND, RG_QO_BOR, RG_QO_BXOR, RG_QO_SHL, RG_QO_SHR, RG_QO_USHR,
  RG_QO_NEG, RG_QO_POS, RG_QO_BNOT
};
enum { RG_QSUB_SCALAR, RG_QSUB_EXISTS, RG_QSUB_ARRAY };

/* Functions (func.c has the table); the aggregates come first.  The
** planner names a few of these. */
enum {
  RG_QF_COUNT, RG_QF_SUM, RG_QF_MIN, RG_QF_MAX, RG_QF_AVG,
  /* type checking */
  RG_QF_IS_DEFINED, RG_QF_IS_NULL, RG_QF_IS_STRING, RG_QF_IS_NUMBER,
  RG_QF_IS_BOOL, RG_QF_IS_ARRAY, RG_QF_IS_OBJECT, RG_QF_IS_PRIMITIVE,
  RG_QF_IS_FINITE_NUMBER, RG_QF_IS_INTEGER, RG_QF_IS_DATETIME,
  /* arrays */
  RG_QF_ARRAY_CONTAINS, RG_QF_ARRAY_CONTAINS_ANY, RG_QF_ARRAY_CONTAINS_ALL,
  RG_QF_ARRAY_LENGTH, RG_QF_ARRAY_CONCAT, RG_QF_ARRAY_SLICE,
  RG_QF_ARRAY_MAX, RG_QF_ARRAY_MIN, RG_QF_ARRAY_SUM, RG_QF_ARRAY_AVG,
  RG_QF_ARRAY_MEDIAN, RG_QF_CHOOSE, RG_QF_OBJECTTOARRAY, RG_QF_SETINTERSECT,
  RG_QF_SETUNION, RG_QF_SETDIFFERENCE, RG_QF_SETEQUAL,
  /* strings */
  RG_QF_STARTSWITH, RG_QF_ENDSWITH, RG_QF_CONTAINS, RG_QF_CONTAINS_ALL_CI,
  RG_QF_CONTAINS_ALL_CS, RG_QF_CONTAINS_ANY_CI, RG_QF_CONTAINS_ANY_CS,
  RG_QF_LOWER, RG_QF_UPPER, RG_QF_LENGTH, RG_QF_CONCAT, RG_QF_SUBSTRING,
  RG_QF_LEFT, RG_QF_RIGHT, RG_QF_LTRIM, RG_QF_RTRIM, RG_QF_TRIM,
  RG_QF_INDEX_OF, RG_QF_LASTINDEXOF, RG_QF_REPLACE, RG_QF_REPLICATE,
  RG_QF_REVERSE, RG_QF_STRINGEQUALS, RG_QF_REGEXMATCH, RG_QF_STRINGJOIN,
  RG_QF_STRINGSPLIT, RG_QF_STRINGTOARRAY, RG_QF_STRINGTOBOOLEAN,
  RG_QF_STRINGTONULL, RG_QF_STRINGTONUMBER, RG_QF_STRINGTOOBJECT,
  RG_QF_TOSTRING,
  /* mathematics */
  RG_QF_ABS, RG_QF_ACOS, RG_QF_ASIN, RG_QF_ATAN, RG_QF_ATN2, RG_QF_CEILING,
  RG_QF_COS, RG_QF_COT, RG_QF_DEGREES, RG_QF_EXP, RG_QF_FLOOR, RG_QF_LOG,
  RG_QF_LOG10, RG_QF_PI, RG_QF_POWER, RG_QF_RADIANS, RG_QF_RAND, RG_QF_ROUND,
  RG_QF_SIGN, RG_QF_SIN, RG_QF_SQRT, RG_QF_SQUARE, RG_QF_TAN, RG_QF_TRUNC,
  RG_QF_NUMBERBIN, RG_QF_INTADD, RG_QF_INTSUB, RG_QF_INTMUL, RG_QF_INTDIV,
  RG_QF_INTMOD, RG_QF_INTBITAND, RG_QF_INTBITOR, RG_QF_INTBITXOR,
  RG_QF_INTBITNOT, RG_QF_INTBITLEFTSHIFT, RG_QF_INTBITRIGHTSHIFT,
  /* date and time */
  RG_QF_GETCURRENTDATETIME, RG_QF_GETCURRENTDATETIMESTATIC,
  RG_QF_GETCURRENTTICKS, RG_QF_GETCURRENTTICKSSTATIC,
  RG_QF_GETCURRENTTIMESTAMP, RG_QF_GETCURRENTTIMESTAMPSTATIC, RG_QF_NOW,
  RG_QF_AGO, RG_QF_DATETIMEADD, RG_QF_DATETIMEPART, RG_QF_DATETIMEDIFF,
  RG_QF_DATETIMEBIN, RG_QF_DATETIMEFROMPARTS, RG_QF_DATETIMEFORMAT,
  RG_QF_DATETIMETOTICKS, RG_QF_DATETIMETOTIMESTAMP, RG_QF_TICKSTODATETIME,
  RG_QF_TIMESTAMPTODATETIME, RG_QF_YEAR, RG_QF_MONTH, RG_QF_DAY,
  /* conditional, items */
  RG_QF_IIF, RG_QF_DOCUMENTID,
  /* full-text search and fusion (fts.c) */
  RG_QF_FULLTEXTCONTAINS, RG_QF_FULLTEXTCONTAINSALL,
  RG_QF_FULLTEXTCONTAINSANY, RG_QF_FULLTEXTSCORE, RG_QF_RRF,
  /* vector search (vector.c) */
  RG_QF_VECTORDISTANCE,
  RG_QF_COUNT_
};
#define RG_QF_ISAGG(f) ((f) <= RG_QF_AVG)

/* The function table: name (upper case), arguments, whether it is
** deterministic (computed properties take only those). */
typedef struct rg_qfinfo {
  const char *name;
  int fn, min, max;
  int nondet;
} rg_qfinfo;
extern const rg_qfinfo rg_qfuncs[];          /* ends with name NULL */

typedef struct rg_qexpr {
  uint8_t k, op;             /* kind; operator, function, or NOT IN/LIKE */
  int32_t a, b, c;           /* operands */
  int32_t list, nlist;       /* arguments, items, members: q->list[...] */
  int32_t slot;              /* alias, parameter, aggregate, block, group
                                or computed-property slot */
  uint32_t pos;              /* byte offset in the text (errors) */
  uint32_t depth;            /* nesting of the subtree (bounded) */
  const char *s;             /* property, member or identifier name */
  uint32_t n;                /* its length; an aggregate call's block */
  rg_qv v;                   /* a literal */
} rg_qexpr;

#define RG_QMAX_JOIN   8
#define RG_QMAX_ORDER  8
#define RG_QMAX_GROUP  8
#define RG_QMAX_DEPTH  100     /* expression nesting */
#define RG_QMAX_BLOCKS 64      /* the query and its subqueries */
#define RG_QMAX_SLOTS  128     /* FROM and JOIN aliases in all blocks */

typedef struct rg_qsel {
  int32_t expr;
  const char *name;          /* the output property */
  uint32_t nlen;
} rg_qsel;

typedef struct rg_qparam {
  const char *name;          /* without '@' */
  uint32_t nlen, pos;
} rg_qparam;

/* A FROM or JOIN source.  ROOT: the item itself (`FROM c`); VALUE: the
** value of an expression, when defined (`FROM c.address a`, `JOIN (SELECT
** ...) x` is a SUBQ); IN: each element of an array (`JOIN t IN c.tags`);
** SUBQ: each result of a subquery. */
enum { RG_QS_ROOT, RG_QS_VALUE, RG_QS_IN, RG_QS_SUBQ };

typedef struct rg_qsrc {
  uint8_t kind;
  int32_t expr;              /* VALUE, IN: the expression; SUBQ: block */
  int32_t slot;              /* the binding slot of its alias */
  const char *name;          /* the alias (NULL: an unnamed subquery) */
  uint32_t nlen;
  uint32_t pos;
} rg_qsrc;

/* A SELECT: the query itself (block 0) or a subquery. */
typedef struct rg_qblock {
  int distinct, star, value;
  int32_t top, offset, limit;          /* literal or parameter; -1 absent */
  int sel0, nsel;                      /* q->sel[sel0 .. sel0 + nsel) */
  int nsrc;                            /* 0: no FROM */
  rg_qsrc src[1 + RG_QMAX_JOIN];       /* FROM, then the JOINs */
  int32_t where;
  int norder;
  struct { int32_t expr; int desc; } order[RG_QMAX_ORDER];
  int rank;                            /* ORDER BY RANK: order[0] ranks */
  int ngroup;
  int32_t group[RG_QMAX_GROUP];
  int naggs;                           /* aggregate calls in its SELECT */
  int parent;                          /* the enclosing block, -1 */
  uint32_t pos;
} rg_qblock;

/*
** VectorDistance(v1, v2 [, brute_force [, options]]) (vector.c).  Each
** call of a query has an entry in q->vd (the call's `slot` indexes it):
** its similarity and data type (from its options; else, for a call
** whose first argument is a path of the item, the container's vector
** policy, which the planner fills in; else cosine and float32), its
** options as given (0 or -1 when absent), and the expressions of its third
** and fourth arguments (a literal, or a parameter bound by
** rg_query_vectors).  A query ordered by a call (ORDER BY VectorDistance,
** alone and with no ASC or DESC) keeps only the rows it scores, most
** similar first: its block's WHERE gains IS_DEFINED of the call, and the
** key's direction follows the similarity (rg_query_vectors sets it).
*/
typedef struct rg_qvd {
  int32_t call;               /* the RG_QE_CALL node */
  int dist, dtype;            /* RG_VD_*, RG_VT_* (base/vec.h) */
  int dist_given, dtype_given;/* named by the options */
  int brute;                  /* third argument true */
  int search_mult;            /* searchListSizeMultiplier (0: absent) */
  int quant_mult;             /* quantizedVectorListMultiplier (0) */
  double filter_priority;     /* filterPriority (-1: absent) */
  int32_t bool_arg, opt_arg;  /* -1 when absent */
  int blk;                    /* the block it orders (-1: none) */
} rg_qvd;

/* A parsed query.  Everything it points to lives in `mem`. */
typedef struct rg_query {
  rg_qexpr *ex;
  int nex, capex;
  int32_t *list;
  int nlist, caplist;
  rg_arena mem;
  const char *sql;
  size_t sqllen;
  rg_qblock *blk;                      /* blk[0] is the query */
  int nblk, capblk;
  rg_qsel *sel;
  int nsel, capsel;
  int nslots;                          /* binding slots, every block */
  int naggs;                           /* aggregate slots, every block */
  int nparams;
  rg_qparam *param;
  int uses_udf, nondet;                /* udf calls; nondeterministic ones */
  int has_subq;
  rg_qvd *vd;                          /* VectorDistance calls (vector.c) */
  int nvd, capvd;
  int vd_bound;                        /* rg_query_vectors ran */
} rg_query;

/* The list of expressions of ex (arguments, items, members); NULL when
** empty (the query may then have no list at all). */
static inline const int32_t *rg_qargs (const rg_query *q,
                                       const rg_qexpr *ex) {
  return ex->nlist ? q->list + ex->list : NULL;
}

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

/* Binds the VectorDistance options given as parameters (400 for one that
** is not an object of known options, or a third argument that is not a
** boolean) and sets the direction of ORDER BY VectorDistance from each
** call's similarity: run it after filling in the calls' policy defaults
** (rg_qexec_new runs it when nobody did). */
int  rg_query_vectors (rg_query *q, const rg_qv *params, rg_err *e);

/*
** Computed properties: a container's definitions, "SELECT VALUE expr FROM
** c" each (rg_query_computed_check validates one: VALUE, the root as FROM,
** no JOIN, WHERE, GROUP BY, ORDER BY, TOP, DISTINCT, OFFSET, subquery,
** aggregate, user-defined or nondeterministic function; 400 otherwise).
** rg_query_computed rewrites a query's references to them (a property of
** the item named like one) into RG_QE_COMPUTED nodes; the pipeline then
** evaluates each at most once per item.  rg_qcomputed_json gives the value
** of one for a document (the index writes it): JSON text, empty when
** undefined.
*/
typedef struct rg_qcomputed {
  const char *name;
  uint32_t nlen;
  const rg_query *q;
} rg_qcomputed;

int  rg_query_computed_check (const rg_query *q, rg_err *e);
void rg_query_computed (rg_query *q, const rg_qcomputed *cp, int n);
int  rg_qcomputed_json (const rg_query *cq, const char *doc, size_t n,
                        rg_buf *out, rg_err *e);

/*
** User-defined functions.  `call` runs udf.name with `nargs` arguments
** given as JSON text (NULL for undefined) and writes its result's JSON
** text into `out` (left empty: undefined); 0, or a status with `e` filled,
** which fails the query (404 for an unknown function, 400 for an error in
** it, 408 over its budget).
*/
typedef struct rg_qudf {
  void *ud;
  int (*call) (void *ud, const char *name, size_t n, const char *const *args,
               const size_t *lens, int nargs, rg_buf *out, rg_err *e);
} rg_qudf;


/*
** Full-text search (fts.c).  The container gives what a scoring function
** cannot see in one row through this interface: `lang` the language of a
** path ("/text") under the container's full-text policy (path NULL: its
** default), -1 for en-US; `stats` BM25's statistics of `path` for the
** analyzed terms (the documents holding text there, their terms, each
** term's document frequency), over the container or the queried
** partition, as the request asks.  0, or a status with `e` filled.
*/
typedef struct rg_qtext {
  void *ud;
  int (*lang) (void *ud, const char *path, size_t n);
  int (*stats) (void *ud, const char *path, size_t n, int lang,
                const char *const *terms, const size_t *lens, int nterms,
                uint64_t *docs, uint64_t *tokens, uint64_t *df, rg_err *e);
} rg_qtext;

/* The terms of a full-text condition, for an index (store/search.c):
** e a FullTextContains, FullTextContainsAll or FullTextContainsAny call on
** a property of the FROM item, with constant search arguments.  Every row
** the call can be true for holds all (`all` 1) or one (0) of the terms at
** the path, analyzed in the language `lang` gives the path (0 to 64
** distinct terms; `none`: no row can pass).  Fuzzy arguments (a distance
** above 0) are left out of All's terms and make Any's unanswerable, as do
** more than 64 terms in Any.  1 when answerable, 0 when not, -1 out of
** memory.  The call itself is still tested on every row.  For a
** FullTextScore call, its distinct terms in order (all 0): the rows with a
** score above 0 hold one of them. */
typedef struct rg_qftterms {
  char path[512];
  size_t plen;
  int all, none, n;
  const char **t;
  size_t *len;
} rg_qftterms;
int rg_qfts_terms (const rg_query *q, const rg_qv *params, int32_t e,
                   int (*lang) (void *ud, const char *path, size_t n),
                   void *ud, rg_arena *mem, rg_qftterms *out);

/* The statistics of a scan: documents as JSON text in, BM25's figures of
** one path and its terms out (the analysis of text.h in `lang`).
** rg_ftacc_doc: 0, or 500 out of memory (text that is not JSON counts as
** a document without the path). */
typedef struct rg_ftacc rg_ftacc;
int  rg_ftacc_new (rg_ftacc **out, const char *path, size_t pn, int lang,
                   const char *const *terms, const size_t *lens, int nterms);
int  rg_ftacc_doc (rg_ftacc *a, const char *json, size_t n);
void rg_ftacc_result (const rg_ftacc *a, uint64_t *docs, uint64_t *tokens,
                      uint64_t *df);
void rg_ftacc_free (rg_ftacc *a);

/*
** The row pipeline (exec.c): documents come in from a source (the
** planner's scans and index lookups, or a test harness), rows are made
** (FROM, JOIN), filtered, grouped, ordered, counted and projected into one
** page.
*/
enum { RG_QX_STREAM = 1, RG_QX_SORT, RG_QX_AGG, RG_QX_DISTINCT,
       RG_QX_GROUP };

/* The mode a query runs in when the source gives no order. */
int  rg_query_mode (const rg_query *q);

typedef struct rg_qdoc {
  const char *text;          /* the item's JSON (valid until the finish) */
  size_t len;
  uint64_t hash, digest;     /* partition hash and item digest: ties */
  const uint8_t *pos;        /* the source's position of this document */
  size_t poslen;
  int phase;                 /* the source's phase (resuming) */
  int unordered_only;        /* keep only rows whose first ORDER BY value
                                (or GROUP BY or DISTINCT value) is not a
                                scalar */
  uint64_t weight;           /* AGG and GROUP: the document stands for this
                                many identical ones (0: 1) */
  int index_values;          /* made of values read from an index: it holds
                                computed properties as members */
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
/* Computed properties (after rg_query_computed on the same definitions)
** and user-defined functions; both must outlive the pipeline. */
void rg_qexec_computed (rg_qexec *x, const rg_qcomputed *cp, int n);
void rg_qexec_udf (rg_qexec *x, const rg_qudf *u);
/* The container's full-text statistics and languages; must outlive the
** pipeline. */
void rg_qexec_text (rg_qexec *x, const rg_qtext *t);
/* Bounds the page's work: documents fed plus rows made (408 beyond), and
** bytes of results held (413 beyond); 0: no bound.  rg_qexec_made tells
** the work done so far. */
void rg_qexec_limits (rg_qexec *x, uint64_t max_rows, size_t max_bytes);
uint64_t rg_qexec_made (const rg_qexec *x);
/* Bounds the CPU time of the page's work (NULL: none): 408 once it is
** spent, checked at every document, row and 2^20 steps of LIKE. */
void rg_qexec_deadline (rg_qexec *x, rg_deadline *d);
/* The evaluation work to charge (rg_work's `steps`). */
uint64_t rg_qexec_steps (const rg_qexec *x);
/* SORT: the rows that passed the WHERE so far (a source that reads its
** items best first stops once the page's TOP has them). */
uint64_t rg_qexec_passed (const rg_qexec *x);
/* Does the pipeline need the documents' text (0: it only counts them, so
** a source may feed blank documents)? */
int  rg_qexec_needs_text (const rg_qexec *x);
/* The mode, the source phase and the source position (pointing into the
** payload) recorded in a token's payload (before a pipeline is made): 0,
** or -1 when the payload is not one. */
int  rg_qexec_peek (const uint8_t *payload, size_t n, int *mode, int *phase,
                    const uint8_t **pos, size_t *poslen);
/* Where the previous page ended: 1 and the source position, or 0. */
int  rg_qexec_resume (const rg_qexec *x, int *phase, const uint8_t **pos,
                      size_t *poslen, const uint8_t **okey, size_t *oklen);
/* Did the document at that position give every row it had (a query of
** one row per document: no JOIN)?  Then a source resumes after it. */
int  rg_qexec_resume_past (const rg_qexec *x);
/* Feeds one document: 0 more wanted, 1 the page is complete, or a
** status. */
int  rg_qexec_doc (rg_qexec *x, const rg_qdoc *d, rg_err *e);
/* A query without FROM: its one row. */
int  rg_qexec_once (rg_qexec *x, rg_err *e);
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
