/*
** throughput.h: provisioned throughput, budgets of request units per
** second, shared by every process that opens the database.
**
** A container may have a budget of its own (its spec's "throughput": a
** manual RU/s, or autoscale up to a maximum), split evenly among its
** physical partitions; a database may have one that its containers without
** their own share.  docs/throughput.md states the rule; throughput.c keeps
** it.  Every request is admitted before it does any work, against the
** partitions it will touch, and its actual charge is debited after it ran.
**
** Invariants:
**   - A request is refused (429) only before it did anything, so a refused
**     request changes nothing; a request is admitted while the balance of
**     every partition it needs is positive, and its charge may take the
**     balance below zero (a debt the refill pays back before the next one).
**   - The budgets live in one file mapped by every process (the database
**     directory's throughput.shm) and change by atomic operations only; its
**     configuration changes under the file's lock and is always a copy of
**     what the database stores (specs and the "\1throughput" meta key),
**     which it is rebuilt from when it is new, from another boot, or behind.
**   - A container with no budget (and no database budget) costs a request
**     one function call, one load and one compare (rg_tp_on).
*/

#ifndef rg_throughput_h
#define rg_throughput_h

#include <stdint.h>

#include <cjson/cJSON.h>

#include "store/container.h"
#include "store/env.h"

typedef struct rg_tpslot rg_tpslot;

/* What a container's requests are accounted against, resolved once per
** configuration change: its own slot (counters, and its budget when it has
** one) and the budget its requests draw on (its own or the database's). */
typedef struct rg_tpref {
  const uint64_t *genp;        /* the file's generation word (NULL: never
                                  resolved) */
  uint64_t gen;                /* the generation resolved */
  rg_tpslot *own;
  rg_tpslot *pool;
} rg_tpref;

/* One request: where it was admitted, for rg_tp_debit; the wait a 429
** asks for. */
typedef struct rg_admit {
  rg_tpslot *own, *pool;       /* both NULL: nothing to account */
  int own_r, pool_r;           /* partitions; RG_TP_EVERY: all of them */
  uint64_t now;                /* ns, the clock of the budgets */
  uint32_t retry_after_ms;     /* of a 429 */
  int retries;                 /* 429s waited out (counted by the caller) */
} rg_admit;

#define RG_TP_EVERY (-1)

/* Opens (creating it when missing, rebuilding it when stale) the budgets
** file of a database that was just opened; detaches it when it closes.  A
** process that cannot open the file read-write accounts nothing (the rule
** is in docs/throughput.md); 507 for a full disk. */
int  rg_tp_attach (rg_env *env, rg_err *e);
void rg_tp_detach (rg_env *env);

/* Does container `cid` account its requests?  Resolves `ref` when the
** configuration changed since it was last resolved: rg_tp_live checks
** that inline, with one load and a compare. */
int rg_tp_on (rg_env *env, uint32_t cid, rg_tpref *ref);
static inline int rg_tp_live (rg_env *env, uint32_t cid, rg_tpref *ref) {
  if (ref->genp != NULL &&
      __atomic_load_n(ref->genp, __ATOMIC_ACQUIRE) == ref->gen)
    return ref->pool != NULL;
  return rg_tp_on(env, cid, ref);
}

/* Admits a request of container `spec` (resolved in `ref` by rg_tp_on):
** to the logical partition of `hash` when `routed`, else to the
** container's physical partition `range`, or to every partition
** (RG_TP_EVERY).  0, or 429 with a->retry_after_ms and `e` when a
** partition it needs is over its budget (counted as throttled). */
int rg_tp_admit (const rg_cspec *spec, const rg_tpref *ref, int routed,
                 uint64_t hash, int range, rg_admit *a, rg_err *e);
/* Where a request goes (as rg_tp_admit), without admitting it: for a
** debit of its own (each item of a read_many, a processor's read). */
void rg_tp_route (const rg_tpref *ref, int routed, uint64_t hash, int range,
                  rg_admit *a);
/* Debits an admitted request's charge (RU), and counts it. */
void rg_tp_debit (const rg_admit *a, double charge);
/* Waits `ms` milliseconds (the retry hint of a 429). */
void rg_tp_sleep (uint32_t ms);

/* Configuration, stored in the database and applied to the live budgets.
** Neither may run inside a write scope (the caller checks).  `value` is
** the setting's JSON form (rg_tpset_parse), NULL for none.  404 when the
** container is gone. */
int rg_tp_set_container (rg_env *env, int sync, uint32_t cid,
                         const cJSON *value, rg_err *e);
int rg_tp_set_database (rg_env *env, int sync, const cJSON *value, rg_err *e);
/* The database's setting as stored (JSON text; empty when none). */
int rg_tp_database (rg_env *env, rg_buf *out, rg_err *e);
/* After a container was created, replaced (or deleted): its budget and
** counters.  A replace that changed the throughput (of container `cid`,
** from `old` to `neu`, on `nparts` partitions) bumps the version in its
** transaction with rg_tp_bump. */
void rg_tp_created (rg_env *env, uint32_t cid);
void rg_tp_replaced (rg_env *env, uint32_t cid);
void rg_tp_dropped (rg_env *env, uint32_t cid);
int  rg_tp_bump (rg_scope *s, uint32_t cid, const rg_tpset *old,
                 const rg_tpset *neu, int nparts, rg_err *e);

/* Counters, over the last RG_TP_WINDOW seconds where a rate is asked. */
#define RG_TP_WINDOW 10

typedef struct rg_tppart {
  int range;                   /* 0-based */
  double rate;                 /* RU/s consumed over the window */
  double balance;              /* RU left now (negative: a debt) */
  uint64_t requests, throttled;
} rg_tppart;

typedef struct rg_tpstat {
  rg_tpset set;                /* the live setting (mode NONE: shared) */
  int shared;                  /* draws on the database's budget */
  int nparts;
  double consumed;             /* RU since the counters began */
  double rate;                 /* RU/s over the window */
  double scaled_to;            /* autoscale: the RU/s it scaled to */
  uint64_t requests, throttled;
  rg_tppart part[RG_MAX_PARTITIONS];
} rg_tpstat;

/* The counters of container `cid` (0: the database's budget); 404 when it
** accounts nothing. */
int rg_tp_stat (rg_env *env, uint32_t cid, rg_tpstat *out, rg_err *e);

#endif
