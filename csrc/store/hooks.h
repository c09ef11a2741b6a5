/*
** hooks.h: the calls the store makes upward, into whatever runs scripts.
**
** The store knows nothing of Lua.  The script runtime (script/) installs
** these functions on an environment (rg_env_set_hooks) when a database is
** opened; the write path calls them around every write, and the
** environment calls `release` when it closes.  Without hooks, a write that
** names a trigger is refused (400) and automatic triggers do not run: a
** store used without the runtime (the plain C tests) has no scripts.
**
** Invariants: a hook returns 0 or a status and never raises or longjmps
** out of the store (scripts run under the sandbox's own protected call);
** `st` is the state given to rg_env_set_hooks.
*/

#ifndef rg_hooks_h
#define rg_hooks_h

#include "store/write.h"

typedef struct rg_hooks {
  /* Runs the pre-triggers of a write (the named one, the automatic ones);
  ** they may replace *doc (NULL for a delete).  Checks the named
  ** post-trigger too, before anything is written. */
  int  (*trigger_pre) (void *st, rg_scope *s, const rg_cont *c,
                       const rg_wreq *w, int op, const rg_ikey *k,
                       cJSON **doc, rg_err *e);
  /* Runs the post-triggers after the write; they may set r->doc. */
  int  (*trigger_post) (void *st, rg_scope *s, const rg_cont *c,
                        const rg_wreq *w, int op, const rg_ikey *k,
                        const cJSON *stored, rg_wres *r, rg_err *e);
  /* The environment is closing: free `st`. */
  void (*release) (void *st);
} rg_hooks;

#endif
