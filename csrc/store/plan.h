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
  /* the executor's choice, never the plan's: a routed logical partition
  ** of at most this many items has the entries a range, an ordered read
  ** or a walk reads built in memory from its items (0: RG_MEMORY_ITEMS;
  ** negative: never) */
  long memory_items;
  /* the CPU time the query may take (408 beyond), or NULL: no limit */
  rg_deadline *deadline;
  /* FullTextScore's statistics over the routed logical partition only
  ** (Cosmos's FullTextScoreScope Local); 0: the whole container */
  int fts_local;
} rg_query_req;

#define RG_MEMORY_ITEMS 256

typedef struct rg_query_res {
  rg_buf rows;                 /* the page: JSON text of an array */
  size_t count;                /* results in the page */
  rg_buf continuation;         /* empty when no results remain */
  rg_work work;                /* the plan's work, what it is charged:
                                  partitions, lookups, loaded, ... */
  /* what the executor did to carry the plan out: items read from storage
  ** (loaded), seeks of the stored index (lookups) and entries read from it
  ** (scanned); `inmem` when the routed partition's entries were built in
  ** memory from its items instead */
  rg_work done;
  int inmem;
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

#endif
