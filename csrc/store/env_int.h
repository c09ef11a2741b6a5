/*
** env_int.h: the environment as the store's files see it.  Nothing above
** store/ includes this header: upper layers use env.h's functions.
*/

#ifndef rg_env_int_h
#define rg_env_int_h

#include "store/env.h"
#include "store/layout.h"

struct rg_env {
  MDB_env *mdb;
  MDB_dbi dbi[RG_NDB];
  char *path;
  unsigned long dev, ino;
  int refs;
  int readonly;
  size_t map_size;
  MDB_txn *rtxn;            /* cached read transaction (reset between calls) */
  int rtxn_live;
  rg_scope *scope;          /* the write scope running now, if any */
  int broken;               /* a remap failed (errno): unusable until reopened */
  uint8_t secret[16];       /* keys continuation tokens to this database */
  struct rg_wal *wal;       /* the write-ahead log (wal.h), or NULL */
  struct rg_guard *guard;   /* the map's guard (guard.h), or NULL */
  int sums;                 /* the pages' checksums are checked */
  int damaged;              /* LMDB's own check failed: no more writes */
  const struct rg_hooks *hooks;    /* upward calls (hooks.h), or NULL */
  struct rg_pcache *pcache;        /* path ids known to be given (index.c) */
  void *hook_state;
  struct rg_tpfile *tp;     /* the throughput budgets (throughput.c), or NULL */
  struct rg_env *next;
};

/* The handle of a table a read-only open found missing: the `vector`
** table of a database made before vector indexes (vindex.c reads it as
** empty). */
#define RG_DBI_NONE ((MDB_dbi)~0u)

/* Frees the path-id cache of an environment (index.c). */
void rg_pcache_free (struct rg_pcache *pc);

#endif
