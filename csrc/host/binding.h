/*
** binding.h: the Lua binding's handles, shared by the files of host/.
**
** Handles follow liolib's pattern: a namespaced metatable, created closed
** before the resource is opened, an idempotent close shared by __gc and
** __close, methods that refuse a closed handle.  A container handle keeps
** its database handle alive through its uservalue and refuses to work once
** that is closed; so does a processor's state with its container.  Each
** file registers its own methods on the handle types (rgl_add_methods).
*/

#ifndef rg_binding_h
#define rg_binding_h

#include "luax/compat.h"

#include "luax/luax.h"
#include "store/container.h"
#include "store/env.h"
#include "store/feed.h"
#include "store/layout.h"
#include "store/plan.h"
#include "store/throughput.h"

#define RG_DB_MT   "regolith.db"
#define RG_CONT_MT "regolith.container"

typedef struct rg_db {
  rg_env *env;               /* NULL once closed */
  int sync;
  int readonly;
  lua_Integer script_budget;
  lua_Integer script_memory;
  int max_containers;
  int retry_throttled;       /* 429s a call waits out before it returns one */
  long memory_items;         /* rg_query_req's (0: the default; -1: never) */
  double query_time;         /* s of CPU a query page may take; 0: no limit */
} rg_db;

typedef struct rg_lcont {
  rg_db *db;                 /* kept alive through the uservalue */
  rg_cont c;                 /* c.spec NULL once closed */
  rg_tpref tp;               /* its throughput budget, as last resolved */
} rg_lcont;

rg_db    *rgl_checkdb (lua_State *L, int idx);     /* open handles only */
rg_lcont *rgl_checkcont (lua_State *L, int idx);   /* open handles only */
/* Pushes a container handle for `spec` (which it takes) of the database
** handle at dbidx. */
void rgl_push_container (lua_State *L, int dbidx, rg_cspec *spec);

/* The logical partition a partition-key argument at idx names (a value,
** or an array of one value per level): 1, or 0 when it names none (the
** call itself will say why).  Leaves the stack as it was. */
int  rgl_pk_partition (lua_State *L, int idx, const rg_cspec *spec,
                       rg_ikey *k);

/*
** Provisioned throughput (host/throughput.c, docs/throughput.md).  Every
** request of a container is admitted before it does any work, routed to
** the logical partition of `hash`, else to physical partition `range`
** (RG_TP_EVERY: all of them): 0, or 429 with `e` once the database's
** retry_throttled retries are spent (a call inside a write scope never
** waits).  A container that accounts nothing costs one call and a compare.
** After the work, rgl_account (or rgl_account_work, for a failure) debits
** its charge and notes the retries in the info table on top.
*/
int  rg_admit_retry (rg_lcont *lc, int routed, uint64_t hash, int range,
                      rg_admit *a, rg_err *e);
/* Admission where the container is known to account (rg_tp_live). */
static inline int rg_admit_on (rg_lcont *lc, int routed, uint64_t hash,
                                int range, rg_admit *a, rg_err *e) {
  int rc = rg_tp_admit(lc->c.spec, &lc->tp, routed, hash, range, a, e);
  return rc == 429 ? rg_admit_retry(lc, routed, hash, range, a, e) : rc;
}
static inline int rg_admit_begin (rg_lcont *lc, int routed, uint64_t hash,
                             int range, rg_admit *a, rg_err *e) {
  a->own = a->pool = NULL;
  a->retries = 0;
  if (!rg_tp_live(lc->c.env, lc->c.spec->cid, &lc->tp)) return 0;
  return rg_admit_on(lc, routed, hash, range, a, e);
}
/* After a 429 found mid-call (a query's plan): waits the hint and returns
** 1 when a retry is allowed, else 0. */
int  rg_admit_wait (rg_lcont *lc, rg_admit *a);
/* Sets info.retries in the table on top. */
void rgl_note_retries (lua_State *L, const rg_admit *a);
/* After a call that pushed its info table: `charge` is what it reported. */
static inline void rgl_account (lua_State *L, rg_lcont *lc,
                                const rg_admit *a, double charge) {
  if (a->pool != NULL) {
    rg_tp_debit(a, charge);
    if (lc->db->retry_throttled > 0) rgl_note_retries(L, a);
  }
}
/* After a call that failed: the work it did. */
static inline void rgl_account_work (lua_State *L, rg_lcont *lc,
                                     const rg_admit *a, const rg_work *w) {
  (void)L;
  (void)lc;
  if (a->pool != NULL) rg_tp_debit(a, rg_charge(w));
}
/* What a refused request returns: nil, message, 429, info (charge 0,
** status 429, retry_after_ms, retries): 4 values. */
int  rgl_push_throttled (lua_State *L, const rg_err *e, const rg_admit *a);
/* The throughput counters of container `cid` (0: the database), as a
** table on the stack, or nothing (returns 0) when it accounts nothing. */
int  rgl_push_tpstat (lua_State *L, rg_env *env, uint32_t cid);

/* Pushes a batch of changes as a Lua array in the mode's shape. */
int  rgl_batch_push (lua_State *L, const rg_cspec *spec, int mode,
                     const rg_batch *b, rg_err *e);
void rgl_feed_opt_start (lua_State *L, int idx, int *kind, double *t,
                         const char *what);

/* Each file's registration (module.c calls them). */
void rgl_db_open (lua_State *L);
void rgl_container_open (lua_State *L);
void rgl_query_open (lua_State *L);
void rgl_scripts_open (lua_State *L);
void rgl_feed_open (lua_State *L);
void rgl_processor_open (lua_State *L);
void rgl_remote_open (lua_State *L);
void rgl_throughput_open (lua_State *L);
void rgl_signals_open (lua_State *L);

#endif
