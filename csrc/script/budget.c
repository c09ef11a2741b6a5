/*
** budget.c: the accounting of a sandboxed execution (sandbox.h): the
** state's allocator, the instruction hook, explicit charges, stops,
** arming and disarming an execution, and the bound of a script's write
** set (either language's: budget.h).  What the limits are and why is
** written at the top of sandbox.c; this file is below the rest of
** script/ (the environment of sandbox.c, the patterns of pattern.c and the
** runner charge through it) and calls none of them.
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/deadline.h"
#include "base/limits.h"
#include "luax/compat.h"
#include "script/budget.h"
#include "script/sandbox.h"
#include "store/env.h"
#include "store/scope.h"

#define HOOK_PERIOD   100
#define ALLOC_COST    12             /* an allocation costs 12 ... */
#define ALLOC_SHIFT   4              /* ... plus 1/16 per byte */
#define TIME_RATE     200000000      /* instructions a second of CPU ... */
#define MIN_TIME      1000000000     /* ... and at least 1 s (ns) */
#define CSTACK_MAX    (2u << 20)     /* C stack a run may use, bytes */


/*
** {=====================================================================
** Accounting: the allocator, the hook, charges
** ======================================================================
*/
static void hook (lua_State *L, lua_Debug *ar);

/* Sets the count hook on the state. */
static void set_hook (rg_sandbox *sb, lua_Hook f, int count) {
  lua_sethook(sb->S, f, f ? LUA_MASKCOUNT : 0, count);
}

/* Marks the execution stopped and makes the hook run before every
** instruction from now on (lua_sethook is safe at any point). */
static void stop (rg_sandbox *sb, int why) {
  if (sb->stop == RG_STOP_NONE) sb->stop = why;
  set_hook(sb, hook, 1);
}

#if RG_LUAJIT
/* Over the limit: the hook collects before the next instruction. */
static void over (rg_sandbox *sb) {
  if (sb->collect || sb->stop != RG_STOP_NONE) return;
  sb->collect = 1;
  set_hook(sb, hook, 1);
}
#endif

void *rg_sandbox_alloc (void *ud, void *p, size_t osize, size_t nsize) {
  rg_sandbox *sb = (rg_sandbox *)ud;
  void *np;
  if (p == NULL) osize = 0;          /* then osize tells the object type */
  if (nsize == 0) {
    free(p);
    sb->used -= osize;
    return NULL;
  }
  if (nsize > osize && sb->armed) {
    size_t grow = nsize - osize, want = sb->used + grow;
    int wrap = want < sb->used;
#if RG_LUAJIT
    if (sb->stop == RG_STOP_MEMORY || wrap || want > sb->hard) {
      stop(sb, RG_STOP_MEMORY);
      return NULL;
    }
    if (want > sb->limit) over(sb);
#else
    if (sb->stop == RG_STOP_MEMORY || wrap || want > sb->limit) {
      if (sb->refused) stop(sb, RG_STOP_MEMORY);
      sb->refused = 1;
      return NULL;
    }
#endif
    sb->spent += ALLOC_COST + (grow >> ALLOC_SHIFT);
    if (sb->spent >= sb->budget) stop(sb, RG_STOP_BUDGET);
  }
  np = realloc(p, nsize);
  if (np == NULL) {
    if (nsize <= osize) return p;    /* a shrink may keep its block */
    return NULL;
  }
  if (nsize > osize) { sb->used += nsize - osize; sb->refused = 0; }
  else sb->used -= osize - nsize;
  return np;
}

/* The key under which a state made by luaL_newstate finds its sandbox. */
static const char sysalloc_key = 'S';

void rgl_sandbox_adopt (lua_State *S, rg_sandbox *sb) {
  sb->sysalloc = 1;
  lua_pushlightuserdata(S, (void *)&sysalloc_key);
  lua_pushlightuserdata(S, sb);
  lua_rawset(S, LUA_REGISTRYINDEX);
}

rg_sandbox *rgl_sandbox_of (lua_State *L) {
  void *ud = NULL;
  rg_sandbox *sb;
  if (lua_getallocf(L, &ud) == rg_sandbox_alloc) return (rg_sandbox *)ud;
  lua_pushlightuserdata(L, (void *)&sysalloc_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  sb = (rg_sandbox *)lua_touserdata(L, -1);
  lua_pop(L, 1);
  return sb;
}

/* The bytes the state holds. */
static size_t held (rg_sandbox *sb) {
  if (!sb->sysalloc) return sb->used;
  return (size_t)lua_gc(sb->S, LUA_GCCOUNT, 0) * 1024 +
         (size_t)lua_gc(sb->S, LUA_GCCOUNTB, 0);
}

static const char *stop_message (int why) {
  switch (why) {
    case RG_STOP_BUDGET: return "instruction budget exceeded";
    case RG_STOP_MEMORY: return "memory budget exceeded";
    case RG_STOP_TIME: return "time limit exceeded";
    case RG_STOP_WRITES: return "transaction write limit exceeded";
    default: return "aborted";
  }
}

static int raise_stop (lua_State *L, rg_sandbox *sb) {
  lua_pushstring(L, stop_message(sb->stop));
  return lua_error(L);
}

/*
** Under LuaJIT (see over), and on every check with LuaJIT's own allocator:
** when the state holds more than the limit, a full collection decides
** whether it really does.  Runs in the hook, or in a charge, where the
** state is between operations.
*/
static void check_memory (lua_State *L, rg_sandbox *sb) {
#if RG_LUAJIT
  if (sb->sysalloc && held(sb) > sb->limit) sb->collect = 1;
  if (!sb->collect || sb->stop != RG_STOP_NONE) return;
  sb->collect = 0;
  lua_gc(L, LUA_GCCOLLECT, 0);
  if (held(sb) > sb->limit) stop(sb, RG_STOP_MEMORY);
  else set_hook(sb, hook, HOOK_PERIOD);
#else
  (void)L; (void)sb;
#endif
}

static void hook (lua_State *L, lua_Debug *ar) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  (void)ar;
  if (!sb->armed) return;
  if (sb->collect) check_memory(L, sb);    /* an overdraft: not a period */
  else if (sb->stop == RG_STOP_NONE) {
    sb->spent += HOOK_PERIOD;
    if (sb->spent >= sb->budget) stop(sb, RG_STOP_BUDGET);
    else if (rg_deadline_passed(&sb->time)) stop(sb, RG_STOP_TIME);
    else if (sb->sysalloc) check_memory(L, sb);
  }
  if (sb->stop != RG_STOP_NONE) raise_stop(L, sb);
}

void rgl_sandbox_charge (lua_State *L, uint64_t n) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  if (!sb->armed) return;
  if (sb->stop == RG_STOP_NONE) {
    sb->spent += n;
    if (sb->spent >= sb->budget || sb->spent < n) stop(sb, RG_STOP_BUDGET);
    else if (rg_deadline_passed(&sb->time)) stop(sb, RG_STOP_TIME);
    else if (sb->sysalloc) check_memory(L, sb);
  }
  if (sb->stop != RG_STOP_NONE) raise_stop(L, sb);
}

/* The room an execution has left before its memory limit. */
size_t rg_sandbox_room (rg_sandbox *sb) {
  size_t h = held(sb);
  if (!sb->armed) return (size_t)-1;
  return h < sb->limit ? sb->limit - h : 0;
}

int rgl_sandbox_stop (lua_State *L, int why) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  stop(sb, why);
  return raise_stop(L, sb);
}

/*
** Raises "C stack overflow" when the C stack has grown more than
** CSTACK_MAX below where the run was armed.  Lua 5.4 bounds the nesting of
** C calls itself (200), but LuaJIT does not in every path: a gsub whose
** replacement calls gsub again ran off the end of the stack.  Called by
** the C functions of the sandbox that call back into the script.
*/
void rgl_sandbox_cstack (lua_State *L) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  char here;
  uintptr_t at = (uintptr_t)&here;
  if (!sb->armed) return;
  if ((at < sb->cbase ? sb->cbase - at : at - sb->cbase) > CSTACK_MAX)
    luaL_error(L, "C stack overflow");
}

int rgl_sandbox_stopped (lua_State *L) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  return sb->stop;
}

void rgl_sandbox_left (lua_State *L, uint64_t *instructions, size_t *bytes) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  size_t r;
  *instructions = 0;
  *bytes = 0;
  if (!sb->armed) return;
  *instructions = sb->spent < sb->budget ? sb->budget - sb->spent : 1;
  r = rg_sandbox_room(sb);
  *bytes = r ? r : 1;
}

static size_t add_sat (size_t a, size_t b) {
  return a + b < a ? (size_t)-1 : a + b;
}

/* The CPU time an execution of `budget` instructions may take, ns. */
static int64_t time_limit (uint64_t budget) {
  double ns = (double)budget * (1e9 / TIME_RATE);
  if (ns < MIN_TIME) return MIN_TIME;
  return ns > 9e18 ? INT64_MAX : (int64_t)ns;
}

void rg_sandbox_arm (rg_sandbox *sb, uint64_t budget, size_t memory) {
  char here;
  sb->cbase = (uintptr_t)&here;
  sb->limit = add_sat(held(sb), memory);
  sb->hard = add_sat(sb->limit, memory);
  sb->spent = 0;
  sb->budget = budget;
  sb->stop = RG_STOP_NONE;
  sb->refused = 0;
  sb->collect = 0;
  rg_deadline_start(&sb->time, time_limit(budget));
  sb->armed = 1;
  set_hook(sb, hook, HOOK_PERIOD);
}

int rg_sandbox_disarm (rg_sandbox *sb) {
  int why = sb->stop;
  sb->armed = 0;
  sb->stop = RG_STOP_NONE;
  sb->refused = 0;
  sb->collect = 0;
  set_hook(sb, NULL, 0);
  return why;
}

const char *rg_sandbox_exceeded (rg_sandbox *sb, int why, char *buf,
                                  size_t n) {
  if (why == RG_STOP_TIME)
    snprintf(buf, n, "time limit (%.2f s of CPU)",
             (double)sb->time.limit / 1e9);
  else
    snprintf(buf, n, "instruction budget (%llu instructions)",
             (unsigned long long)sb->budget);
  return buf;
}

rg_deadline *rg_sandbox_deadline (rg_sandbox *sb) {
  return sb->armed ? &sb->time : NULL;
}

/* }===================================================================== */

/*
** The write set of a script's transaction: one rule for both languages,
** checked after each storage operation.  Locally the bound is the memory
** LMDB holds until the commit; on a Redis Cluster a place's part also
** applies in one Function call, which blocks its primary for the time it
** takes (about 0.1 ms an item on a loaded test machine), so the items and
** bytes a call adds are bounded so that an apply stays far under
** cluster-node-timeout.  A call counts from its mark: the transaction it
** runs in may hold other writes (a processor's batch, a group), which are
** its caller's, not the script's.
*/
static int write_bounds (rg_scope *s, uint64_t *items, uint64_t *bytes) {
  int remote = rg_env_remote(s->env) != NULL;
  *items = remote ? RG_MAX_APPLY_ITEMS : UINT64_MAX;
  *bytes = remote ? RG_MAX_APPLY_BYTES : RG_MAX_TXN_DIRTY;
  return remote;
}

void rg_script_mark (rg_scope *s, rg_wmark *m) {
  m->written = s->work.written;
  m->bytes = rg_kv_pending(s->txn);
}

/* The one rule of "a tenth left": whether `left` of `whole` is no more. */
static int tenth_left (uint64_t left, uint64_t whole) {
  return left <= whole / RG_ACCEPT_LEFT;
}

int rg_script_writes (rg_scope *s, const rg_wmark *m) {
  uint64_t items, bytes, n = s->work.written, b = rg_kv_pending(s->txn);
  if (write_bounds(s, &items, &bytes)) {   /* the call's own */
    n = n > m->written ? n - m->written : 0;
    b = b > m->bytes ? b - m->bytes : 0;
  }
  if (n > items || b > bytes) return RG_WRITES_OVER;
  if ((items != UINT64_MAX && tenth_left(items - n, items)) ||
      tenth_left(bytes - b, bytes))
    return RG_WRITES_NEAR;
  return 0;
}

int rg_script_accepted (const rg_runleft *r, rg_scope *s,
                        const rg_wmark *m) {
  if (r->stopped || tenth_left(r->insns_left, r->insns) ||
      tenth_left(r->memory_left, r->memory) ||
      (r->time > 0 && (r->time_left <= 0 ||
                       tenth_left((uint64_t)r->time_left, (uint64_t)r->time))))
    return 0;
  return s == NULL || rg_script_writes(s, m) == 0;
}

int rg_sandbox_accepted (rg_sandbox *sb, rg_scope *s, const rg_wmark *m) {
  rg_runleft r;
  r.stopped = !sb->armed || sb->stop != RG_STOP_NONE;
  r.insns = sb->budget;
  r.insns_left = sb->spent < sb->budget ? sb->budget - sb->spent : 0;
  r.memory = sb->hard - sb->limit;     /* what was armed (rg_sandbox_arm) */
  r.memory_left = rg_sandbox_room(sb);
  r.time = sb->time.limit;
  r.time_left = rg_deadline_left(&sb->time);
  return rg_script_accepted(&r, s, m);
}

int rg_script_writes_fail (rg_scope *s, const char *what, const char *name,
                           size_t namelen, rg_err *e) {
  uint64_t items, bytes;
  write_bounds(s, &items, &bytes);
  if (items != UINT64_MAX)
    return rg_fail(e, 413, "%s '%.*s' exceeded the write limit of one call "
                   "on a cluster (%llu items, %llu bytes): nothing of it is "
                   "written", what, (int)namelen, name,
                   (unsigned long long)items, (unsigned long long)bytes);
  return rg_fail(e, 413, "%s '%.*s' exceeded the write limit of its "
                 "transaction (%llu bytes)", what, (int)namelen, name,
                 (unsigned long long)bytes);
}
