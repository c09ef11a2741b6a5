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
  uint64_t budget;
  size_t memory;
  struct exec *cur;             /* the execution running now */
  autoset *autos;
  int nautos;
  int held;                     /* a stepper's: a run holds it */
} rg_runtime;

/* Frees a runtime (the environment's release hook; a stepper's pool). */
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
struct rg_stepper;

/* A runtime of a stepper's pool that no run holds (made when all are);
** NULL and e filled when it cannot be made. */
rg_runtime *rg_stepper_runtime (struct rg_stepper *p, rg_err *e);

#endif
