/*
** sandbox.h: the Lua state scripts run in, and its limits.  Private to
** script/.
**
** One sandbox per environment (runner.c): a Lua state of its own (not the
** host's), whose globals a script never sees; each execution gets a fresh
** environment table holding only what docs/scripts.md lists.  An armed
** execution is counted: VM instructions by a hook, work done in C (pattern
** matching, JSON conversions) by explicit charges, memory by the state's
** allocator; running out stops the execution for good (a stop cannot be
** caught by pcall).  pattern.c and utf8lib.c supply the budget-aware
** string patterns and, for LuaJIT, Lua 5.4's utf8 library.
*/

#ifndef rg_sandbox_h
#define rg_sandbox_h

#include <cjson/cJSON.h>

#include "luax/compat.h"

#include "base/deadline.h"
#include "base/support.h"

typedef struct rg_sandbox rg_sandbox;

/* A sandbox, as sandbox.c (its state and environment) and budget.c (its
** accounting) share it. */
struct rg_sandbox {
  lua_State *S;
  size_t used;                 /* bytes the state holds */
  size_t limit;                /* while armed: the most it may hold */
  size_t hard;                 /* LuaJIT: the limit plus the overdraft */
  int armed;
  int refused;                 /* a growth was refused, not yet retried */
  int collect;                 /* LuaJIT: over the limit, the hook collects */
  int sysalloc;                /* LuaJIT without GC64: LuaJIT's allocator */
  int stop;                    /* RG_STOP_* once the execution must end */
  uint64_t spent, budget;      /* instructions */
  rg_deadline time;            /* the CPU time the execution may take */
  uintptr_t cbase;             /* the C stack where the run was armed */
  uint64_t seeds;              /* executions so far (reseeds math.random) */
};


enum { RG_STOP_NONE, RG_STOP_BUDGET, RG_STOP_MEMORY, RG_STOP_ABORT,
       RG_STOP_TIME, RG_STOP_WRITES };

rg_sandbox *rg_sandbox_new (void);                 /* NULL: out of memory */
void        rg_sandbox_free (rg_sandbox *sb);
lua_State  *rgl_sandbox_state (rg_sandbox *sb);
rg_sandbox *rgl_sandbox_of (lua_State *S);
/* The allocator of a sandbox's state (ud: the sandbox); where a state
** cannot take it (LuaJIT without GC64), rgl_sandbox_adopt records the
** sandbox in the state made without it (budget.c). */
void       *rg_sandbox_alloc (void *ud, void *p, size_t osize, size_t nsize);
void        rgl_sandbox_adopt (lua_State *S, rg_sandbox *sb);
/* The bytes an armed execution may still allocate ((size_t)-1: not armed). */
size_t      rg_sandbox_room (rg_sandbox *sb);
/* Starts an execution's accounting: at most `budget` instructions and
** `memory` bytes more than the state holds now. */
void     rg_sandbox_arm (rg_sandbox *sb, uint64_t budget, size_t memory);
/* Ends it; returns why it was stopped (RG_STOP_*), RG_STOP_NONE if not. */
int      rg_sandbox_disarm (rg_sandbox *sb);
/* What the last execution, stopped for `why` (RG_STOP_BUDGET or
** RG_STOP_TIME, both 408), exceeded, for a message: "instruction budget
** (N instructions)" or "time limit (T s of CPU)"; in buf. */
const char *rg_sandbox_exceeded (rg_sandbox *sb, int why, char *buf,
                                 size_t n);
/* The CPU time the armed execution may still take (base/deadline.h), for
** work it asks of C (its queries). */
rg_deadline *rg_sandbox_deadline (rg_sandbox *sb);
/* Charges work done in C; raises once the budget is spent. */
void     rgl_sandbox_charge (lua_State *S, uint64_t n);
/* Stops the execution for good (RG_STOP_ABORT...) and raises. */
int      rgl_sandbox_stop (lua_State *S, int why);
int      rgl_sandbox_stopped (lua_State *S);
/* Raises "C stack overflow" when the run's C stack is too deep: called
** before a C function calls back into the script. */
void     rgl_sandbox_cstack (lua_State *S);
/* What the armed execution has left: instructions and bytes (0: not
** armed, no bound). */
void     rgl_sandbox_left (lua_State *S, uint64_t *instructions,
                          size_t *bytes);
/* Pushes a fresh environment for one execution. */
void     rgl_sandbox_env (lua_State *S);
/* Compiles text (never bytecode) as chunk "name"; a Lua load status. */
int      rgl_sandbox_load (lua_State *S, const char *src, size_t n,
                          const char *name, size_t namelen);
/* Pops an environment and makes it the globals of the chunk at fidx. */
void     rgl_sandbox_setenv (lua_State *S, int fidx);
/* rgl_json_from_lua for the sandbox, charging the conversion to the budget.
** Raises only when the budget runs out, with *out already set (so the
** caller must hold it where it is freed), or when the tree would take
** more than the memory budget has left (a memory stop, *out NULL); 413
** when no stack room can be made for the conversion. */
int      rgl_sandbox_from_lua (lua_State *S, int idx, cJSON **out, rg_err *e);
/* Registers the budget-aware find, match, gmatch and gsub in the table at
** idx (pattern.c). */
void     rgl_pattern_open (lua_State *S, int idx);
/* Pushes a table holding Lua 5.4's utf8 library, for hosts without one
** (utf8lib.c). */
void     rgl_utf8lib_open (lua_State *S);

#endif
