/*
** env_int.h: the environment as the store's files see it.  Nothing above
** store/ includes this header: upper layers use env.h's functions.
*/

#ifndef rg_env_int_h
#define rg_env_int_h

#include "store/env.h"
#include "store/layout.h"

struct rg_env {
  struct rg_local *local;   /* the backend (local.h), or */
  struct rg_remote *remote; /* the remote one (remote.h) */
  char *path;
  unsigned long dev, ino;
  int refs;
  int readonly;
  rg_scope *scope;          /* the write scope running now, if any */
  uint8_t secret[16];       /* keys continuation tokens to this database */
  const struct rg_hooks *hooks;    /* upward calls (hooks.h), or NULL */
  struct rg_pcache *pcache;        /* path ids known to be given (index.c) */
  uint64_t scopes;          /* write scopes begun: the last one's serial */
  void *hook_state;
  struct rg_tpfile *tp;     /* the throughput budgets (throughput.c), or NULL */
  struct rg_queue *queue;   /* the write queue (queue.c), once used */
  int queue_off;            /* no queue to be had: write alone */
  int deferred;             /* a scope's commit is left to be made durable
                               (rg_local_commit): the queue's leader */
  struct rg_env *next;
};

/* Frees the path-id cache of an environment (index.c). */
void rg_pcache_free (struct rg_pcache *pc);

#endif
