/*
** script.h: the script runtime: stored procedures and triggers run in an
** embedded, sandboxed Lua state with an instruction and a memory budget.
**
** The runtime attaches itself to an environment when a handle opens it
** (rg_script_limits), which installs the trigger hooks the write path
** calls (store/hooks.h); from then on every write on that database runs
** its triggers.  Invariants: a script sees only what docs/scripts.md
** lists; its writes commit with the scope of its call or not at all;
** exceeding the budget (408) or the memory (413) stops it for good,
** whatever it catches; no script error ever unwinds past the runner into
** the store or the host.
*/

#ifndef rg_script_h
#define rg_script_h

#include <cjson/cJSON.h>

#include "luax/compat.h"

#include "store/container.h"
#include "store/env.h"

#define RG_SCRIPT_BUDGET 1000000000ull         /* instructions, ~5 s */
#define RG_SCRIPT_MEMORY (64u << 20)           /* bytes */
#define RG_BOUND_MSG "scripts cannot reference partition keys other than " \
                     "the one for which the request was submitted"

/* Sets the script limits of an environment from the options of a handle
** opening it (0: not given), attaching the runtime.  The first open sets
** them; a later open naming other values gets 409. */
int  rg_script_limits (rg_env *env, uint64_t budget, uint64_t memory,
                       rg_err *e);
/* Compiles a source in the sandbox and runs its chunk, which must return
** a function (400; 408/413 when the chunk exceeds the limits).  `tag` is
** RG_MK_PROC, RG_MK_TRIG or RG_MK_UDF (for messages). */
int  rg_script_check (rg_env *env, int tag, const char *name, size_t n,
                      const char *src, size_t len, rg_err *e);
/* Executes a procedure in the scope, bound to the logical partition of
** `pk` (a value, or an array for hierarchical keys).  `args[i]` NULL is
** nil.  On success *result holds the JSON-clean result (owned by the
** caller); `log` receives ctx:log lines, each a u32 length and bytes. */
int  rg_proc_execute (rg_scope *s, const rg_cont *c, const char *name,
                      size_t n, const cJSON *pk, cJSON *const *args,
                      int nargs, cJSON **result, rg_buf *log, rg_err *e);

/*
** Resumable runs (cluster mode, docs/cluster.md): a script whose host does
** every read, write and query itself.  A stepper is a pool of sandboxes
** with the limits given (0: the defaults); a run holds one of them from
** its first resume to its end.  rgl_run_resume(H, run, idx) resumes the
** run with the host's answer to its last request (the table at idx of H;
** ignored on the first call) and pushes onto H a table: the next request
**   {op = "read", id, if_none_match}
**   {op = "create" | "replace" | "upsert", doc = JSON text, if_match}
**   {op = "delete" | "patch", id, ops = JSON text, if_match, filter}
**   {op = "query", sql, params = JSON text, max_items, continuation,
**    max_rows, max_bytes}
** or the outcome {done = true, status = 0 | n, error, result = JSON text
** (procedures), body = JSON text (pre-triggers), replied, reply = JSON text
** (post-triggers), log = {lines}}.  An answer: {status = n, message, doc =
** JSON text, etag, rows = JSON text, continuation, cross_partition, made,
** stop = "budget" | "memory", work = {rg_work's counters}}.  The arguments
** are checked, the results made and the budgets counted by the local
** runner's own code, so a script behaves the same in both modes.
*/
typedef struct rg_stepper rg_stepper;
typedef struct rg_run rg_run;

enum { RG_RUN_PROC = 1, RG_RUN_PRE, RG_RUN_POST };

typedef struct rg_run_args {
  int kind;
  const rg_cspec *spec;            /* must outlive the run */
  const char *name, *src;          /* must outlive the run */
  size_t namelen, srclen;
  uint64_t version;                /* names the compiled chunk in caches */
  const cJSON *pk;                 /* a value, or an array (copied) */
  cJSON *const *args;              /* procedures (copied) */
  int nargs;
  int op;                          /* triggers: RG_OP_CREATE, REPLACE, DELETE */
  const cJSON *body;               /* pre: the document (NULL: a delete);
                                      post: the stored one (copied) */
  const char *id;                  /* a delete's pre-trigger */
  size_t idlen;
} rg_run_args;

rg_stepper *rg_stepper_new (uint64_t budget, size_t memory);
void rg_stepper_free (rg_stepper *p);
/* rg_script_check for a stepper. */
int  rg_stepper_check (rg_stepper *p, int tag, const char *name, size_t n,
                        const char *src, size_t len, rg_err *e);
int  rg_run_start (rg_stepper *p, const rg_run_args *a, rg_run **out,
                    rg_err *e);
int  rgl_run_resume (lua_State *H, rg_run *r, int idx);
void rg_run_free (rg_run *r);

/*
** User-defined functions for one query (udf.c): rg_udfs_init makes the
** interface to put in the query request (rg_query_req.udf, `iface`), over
** the transaction the query runs in; rg_udfs_done ends the query's
** execution in the sandbox.  Inside a procedure the procedure's budget is
** spent; otherwise the query's calls share one budget, the environment's.
** rg_udfs_host is the same for a host holding the records itself (cluster
** mode): `find` gives the record of a function of container `cid` (0, or
** 404 with rg_udfs_missing's message), and the calls run in a sandbox of
** the stepper `pool`, which the query holds from its first call to
** rg_udfs_done, with the stepper's budgets.
*/
typedef int (*rg_udf_find) (void *ud, const char *name, size_t n,
                            const char **src, size_t *len, uint64_t *version);

typedef struct rg_udfs {
  rg_qudf iface;
  rg_txn *txn;
  const rg_cont *c;
  struct rg_runtime *rt;
  int armed, stopped, stopped_rc;
  rg_stepper *pool;                /* rg_udfs_host's */
  uint32_t cid;
  rg_udf_find find;
  void *find_ud;
  int js_armed, js_stopped, js_stopped_rc;   /* JavaScript functions (js.c) */
} rg_udfs;

void rg_udfs_init (rg_udfs *u, rg_txn *txn, const rg_cont *c);
void rg_udfs_host (rg_udfs *u, rg_stepper *pool, uint32_t cid,
                   rg_udf_find find, void *ud);
void rg_udfs_done (rg_udfs *u);

#endif
