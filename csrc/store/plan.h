/*
** plan.h: queries over the store: routing, the planner's index choice,
** the scans and index lookups that feed the SQL row pipeline, and paging.
**
** plan.c writes the rules down.  Invariants: the planner's choice depends
** only on the query, its parameters and the container's spec, so that a
** continuation token resumes the same plan; every document a source feeds
** is checked against the whole WHERE, so an index changes the work (and
** the charge), never the result; expired items are invisible.
*/

#ifndef rg_plan_h
#define rg_plan_h

#include <cjson/cJSON.h>

#include "base/charge.h"
#include "sql/sql.h"
#include "store/container.h"
#include "store/env.h"
#include "store/layout.h"
#include "sql/sql.h"

typedef struct rg_query_req {
  const char *sql;
  size_t sqllen;
  const cJSON *params;         /* object {name = value} (no '@'), or NULL */
  int has_pk;                  /* route to this logical partition: */
  const cJSON *pkv[RG_MAX_PK_PATHS];
  long max_items;              /* page size; 0: every result in one page */
  const char *continuation;    /* NULL: from the start */
  size_t contlen;
  /* when set (procedures), a WHERE naming another logical partition than
  ** pkv fails with 400 and this message instead of returning nothing */
  const char *pk_conflict_msg;
  /* bounds (scripts, whose budgets no hook can enforce in C): documents
  ** read plus rows made (JOIN rows), 408 beyond; bytes of results held,
  ** 413 beyond; 0: no bound */
  uint64_t max_rows;
  size_t max_bytes;
  /* user-defined functions (the script runtime's), or NULL: none */
  const rg_qudf *udf;
  /* admission (store/throughput.h), when set: called once the query is
  ** planned and before it reads anything, with the hash of the logical
  ** partition, or hierarchical key prefix, it is routed to (routed; the
  ** hash names the physical partition) or not (a fan-out); a status it
  ** returns (429) ends the query with nothing read */
  int (*admit) (void *ud, int routed, uint64_t hash, rg_err *e);
  void *admit_ud;
  /* the CPU time the query may take (408 beyond), or NULL: no limit */
  rg_deadline *deadline;
  /* FullTextScore's statistics over the routed logical partition only
  ** (Cosmos's FullTextScoreScope Local); 0: the whole container */
  int fts_local;
} rg_query_req;

typedef struct rg_query_res {
  rg_buf rows;                 /* the page: JSON text of an array */
  size_t count;                /* results in the page */
  rg_buf continuation;         /* empty when no results remain */
  rg_work work;                /* partitions, lookups, loaded, ... */
  int cross_partition;
  rg_buf offsets;              /* size_t pairs: where each row's text is */
  uint64_t made;               /* documents read plus rows made */
} rg_query_res;

/* Runs one page of a query in `txn` (a read transaction, or a scope's);
** expired items are invisible as of `now`.  400 for bad SQL (the message
** names the position and what was expected), bad parameters or tokens. */
int  rg_query_exec (rg_txn *txn, const rg_cont *c, int64_t now,
                    const rg_query_req *q, rg_query_res *r, rg_err *e);
void rg_query_res_free (rg_query_res *r);
/* The context a query's continuation token is bound to: the container
** and its spec (a plan made under another indexing policy cannot be
** continued), the text, the parameters (their JSON text) and the routing
** partition (lp, when rq->has_pk). */
uint64_t rg_query_token_context (const rg_cspec *spec,
                                 const rg_query_req *rq, const char *ptext,
                                 size_t plen, const rg_ikey *lp);

/*
** A plan for a host that reads the items itself (cluster mode,
** docs/cluster.md): the same routing and the same seek as rg_query_exec
** would choose, except that GROUP BY and DISTINCT are left to the
** pipeline (never read from an index alone), that a routed partition is
** never read whole for being small (the host does not know its size), and
** that the host knows no shapes: an ORDER BY read from an index finds the
** items lacking its path by a scan of the route (phase `uphase`, with
** unordered_only), so an ascending one whose WHERE does not prove the path
** is sorted instead.  The host feeds the documents of the source to
** the row pipeline (sql.h) with `mode`, `tie_desc` and, when `has_conds`,
** the conjuncts `conds` to test.  Routing: `routed` (RG_HROUTE_*) with the
** item key prefix `rkey` (cid included) the route's items start with, in
** partition range `bucket`; `lp` the logical partition when it is one.
** Sources:
**   NONE   no FROM: the pipeline makes its one row (rg_qexec_once);
**   SCAN   every item of the container, or of the route;
**   TERMS  the index entries of `index_id` holding one of the exact terms
**          (each a seek), narrowed to the route when routed;
**   RANGE  the entries of `index_id` whose term starts with tpre, within
**          lo .. hi (when has_lo / has_hi; *_ex: exclusive; a bound is a
**          prefix: a longer term starting with it is equal to it); when
**          `ordered`, in the ORDER BY's order (backwards when `desc`): the
**          host merges its stores' entries by their local entry keys
**          (`prefix` | term | hash | digest), and sorts a run of entries
**          sharing rg_hplan_group bytes (a string cut in the terms) on the
**          full values (rg_qexec_okey).  `uphase` 2: the items lacking a
**          scalar at the path come after, in phase 1, by a scan.
** With `scan`, the source is always SCAN (a host holding a whole logical
** partition in memory, with a script's own writes).  Everything points
** into `mem`.
*/
enum { RG_HSRC_NONE = 1, RG_HSRC_SCAN, RG_HSRC_TERMS, RG_HSRC_RANGE };
enum { RG_HROUTE_NONE, RG_HROUTE_PARTITION, RG_HROUTE_PREFIX };

typedef struct rg_hplan {
  int routed;
  rg_ikey lp;                  /* RG_HROUTE_PARTITION */
  uint8_t rkey[RG_MAX_KEY];
  size_t rklen;
  int bucket;
  int src;
  uint64_t index_id;
  int nterms;
  const uint8_t **term;
  const size_t *tlen;
  const uint8_t *tpre, *lo, *hi;
  size_t tpre_n, lo_n, hi_n;
  int has_lo, has_hi, lo_ex, hi_ex;
  int mode, tie_desc;
  int has_conds, nconds;
  const int32_t *conds;
  uint8_t prefix[12];          /* cid | index id */
  int ordered, desc, uphase;
  int ncols, gcol0, gcols, coldesc[8];
} rg_hplan;

int rg_query_hplan (const rg_query *q, const rg_qv *params,
                    const rg_cspec *spec, const rg_query_req *rq, int scan,
                    rg_arena *mem, rg_hplan *out, rg_err *e);
/* An ordered plan's entry key: how many leading bytes its run of entries
** to sort on full values shares (0: it is in no such run). */
size_t rg_hplan_group (const rg_hplan *h, const uint8_t *key, size_t n);

#endif
