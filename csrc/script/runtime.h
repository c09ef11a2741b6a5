/*
** runtime.h: the script runtime of an environment, as the files of
** script/ share it (private to script/).
**
** One runtime per database environment (runtime.c): its sandbox, its
** limits, the script running now, and caches.  Procedures and triggers
** (runner.c) and user-defined functions (udf.c) run in it; a compiled
** chunk is cached per record version in the sandbox's registry.
*/

#ifndef rg_runtime_h
#define rg_runtime_h

#include "luax/compat.h"
#include "script/sandbox.h"
#include "store/env.h"
#include "store/layout.h"
#include "store/plan.h"

/* The automatic triggers of one container, as of a script version. */
typedef struct autotrig {
  char *name;
  size_t len;
  int type, op;
} autotrig;

typedef struct autoset {
  uint32_t cid;
  uint64_t version;
  int n;
  autotrig *t;
} autoset;

typedef struct rg_runtime {
  rg_sandbox *sb;               /* made on first run */
  struct rg_js *js;             /* the JavaScript heap (js.c), made on
                                   first use */
  uint64_t budget;
  size_t memory;
  struct exec *cur;             /* the execution running now */
  autoset *autos;
  int nautos;
} rg_runtime;

/* Frees a runtime and what it holds, its sandbox and JavaScript heap (the
** environment's release hook; a stepper's pool). */
void rg_runtime_free (rg_runtime *rt);
/* Makes the runtime's sandbox when it has none. */
int  rg_runtime_sandbox (rg_runtime *rt, rg_err *e);
/* Is a procedure or a trigger running now? */
int  rg_runtime_running (const rg_runtime *rt);
/* Pushes a record's compiled chunk (from the cache, or compiled now;
** raises the compiler's message). */
void rgl_runtime_push_chunk (lua_State *L, const uint8_t *key, size_t klen,
                            uint64_t version, const char *src, size_t len,
                            const char *name, size_t namelen);
/* Calls the chunk on top in a fresh environment; leaves the function it
** returns (raises when it returns anything else). */
void rgl_runtime_call_chunk (lua_State *L);

/* What a script's work costs it, in instructions, in either language: a
** document a query read or a row it made (ROW_COST; a JOIN's cross
** product is made row by row, in C); a storage operation, OP_COST plus
** RU_COST per request unit it charged (a small write inside a transaction,
** ~6 RU, takes about as long as 2500 Lua instructions); and the bytes of
** log lines a run may write. */
#define ROW_COST  32
#define OP_COST   200
#define RU_COST   400
#define LOG_MAX   (256u << 10)

/* The storage side of ctx (runner.c), which the JavaScript runtime uses
** too, through this table that every run of it is given (rg_jscall): a
** read of the partition lp (0, 304, 404), a query bounded and routed by
** the caller (its work added to the scope's), and whether a pre-trigger's
** new body is still item `id` of the partition.  So js.c, which runner.c
** calls, calls nothing of runner.c (a JavaScript procedure's query may
** call a JavaScript function: udf.c, then js.c again). */
typedef struct rg_ctxops {
  int (*read) (rg_scope *s, const rg_ikey *lp, const char *id, size_t idlen,
               const char *inm, cJSON **doc, rg_err *e);
  int (*query) (rg_scope *s, const rg_cont *c, struct rg_query_req *q,
                struct rg_query_res *res, rg_err *e);
  int (*same_item) (const rg_cont *c, const rg_ikey *lp, const char *id,
                    const cJSON *doc);
} rg_ctxops;

#endif
