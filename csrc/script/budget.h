/*
** budget.h: the bound of a script's write set, one rule for both
** languages (budget.c).  Private to script/: the Lua runner (runner.c)
** and the JavaScript runtime (js.c) check it after each storage operation
** of a procedure or a trigger, and both languages' near-bound signal
** (JavaScript's isAccepted, Lua's ctx:is_accepted) comes from
** rg_script_accepted.
**
** Invariant: a call counts from its mark, so a transaction holding other
** writes (a processor's batch, a group) charges the script only what it
** added itself on a Redis Cluster; locally the whole transaction's memory
** is the bound.
*/

#ifndef rg_budget_h
#define rg_budget_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"

struct rg_scope;
/* Where a script's call started in its transaction's writes
** (rg_script_mark): on a Redis Cluster a call is bounded by what it adds
** itself, within a transaction that may hold other writes (a processor's
** batch, a group). */
typedef struct rg_wmark { uint64_t written, bytes; } rg_wmark;
void rg_script_mark (struct rg_scope *s, rg_wmark *m);
/* The write set of a script's transaction (scope s) against its bound:
** the memory it holds locally (RG_MAX_TXN_DIRTY), and on a Redis Cluster
** what the call begun at m may add to one apply (RG_MAX_APPLY_ITEMS and
** _BYTES, base/limits.h).  RG_WRITES_OVER: the script must be stopped
** (RG_STOP_WRITES, 413); RG_WRITES_NEAR: less than a tenth of a bound is
** left, so the run is not accepted (rg_script_accepted); else 0. */
enum { RG_WRITES_NEAR = 1, RG_WRITES_OVER = 2 };
int  rg_script_writes (struct rg_scope *s, const rg_wmark *m);
/* The near-bound signal of a run (JavaScript's isAccepted, a Lua
** script's ctx:is_accepted()): may it start another storage operation?
** Not once it is stopped, nor once less than a tenth of any of its bounds
** is left: its instructions, its memory, its time (time 0: none), or its
** write set (rg_script_writes not 0; s NULL: no write set).  Each
** language's counters give the totals and what is left; the rule is
** this one. */
#define RG_ACCEPT_LEFT 10
typedef struct rg_runleft {
  int stopped;
  uint64_t insns, insns_left;          /* instructions */
  uint64_t memory, memory_left;        /* bytes */
  int64_t time, time_left;             /* any one unit */
} rg_runleft;
int  rg_script_accepted (const rg_runleft *r, struct rg_scope *s,
                         const rg_wmark *m);
/* The same for the Lua sandbox's run, from its own counters. */
struct rg_sandbox;
int  rg_sandbox_accepted (struct rg_sandbox *sb, struct rg_scope *s,
                          const rg_wmark *m);
/* The 413 of a script stopped for its write set ("procedure 'f' exceeded
** ..."), naming the bound that applies. */
int  rg_script_writes_fail (struct rg_scope *s, const char *what, const char *name,
                            size_t namelen, rg_err *e);

#endif
