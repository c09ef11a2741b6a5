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
** User-defined functions for one query (udf.c): rg_udfs_init makes the
** interface to put in the query request (rg_query_req.udf, `iface`), over
** the transaction the query runs in; rg_udfs_done ends the query's
** execution in the sandbox.  Inside a procedure the procedure's budget is
** spent; otherwise the query's calls share one budget, the environment's.
*/

typedef struct rg_udfs {
  rg_qudf iface;
  rg_txn *txn;
  const rg_cont *c;
  struct rg_runtime *rt;
  int armed, stopped, stopped_rc;
  int js_armed, js_stopped, js_stopped_rc;   /* JavaScript functions (js.c) */
} rg_udfs;

void rg_udfs_init (rg_udfs *u, rg_txn *txn, const rg_cont *c);
void rg_udfs_done (rg_udfs *u);

#endif
