/*
** catalog.h: the containers of a database: creating, finding, listing and
** deleting them, their specs, statistics, and the TTL purge of them all.
**
** The catalog lives in the meta table (layout.c): names to container ids,
** ids to stored specs.  Invariants: a container id is never reused; a
** deleted container first leaves the catalog (so no call can find it) and
** then loses its data in chunks of bounded transactions, under a drop
** marker that makes the next open finish what a crash interrupted; every
** handle re-checks that its container is alive (rg_cont_alive) before it
** works, so a handle outliving its container gets 404.
*/

#ifndef rg_catalog_h
#define rg_catalog_h

#include "store/container.h"
#include "store/env.h"

/* Loads a container's spec from the catalog (404 when gone). */
int rg_load_spec (rg_txn *txn, rg_env *env, uint32_t cid, rg_cspec **out,
                  rg_err *e);

/* Creates a container from its spec's JSON text (already validated by
** rg_cspec_build) and loads it: 409 when the name exists, 403 beyond
** `max` containers (0: no bound).  Joins a running scope as a savepoint. */
int rg_catalog_create (rg_env *env, int sync, const char *name, size_t n,
                       const char *spec, size_t specn, int max,
                       rg_cspec **out, rg_err *e);
/* Replaces a container's spec (its indexing policy, TTL, retention and
** size limit; 400 for its partition key, partitions or unique keys) and
** brings every item to it in the same scope: index entries and expiries
** are rebuilt, items and the change feed are left as they are.  Handles
** adopt the new spec at their next call (rg_cont_alive). */
int rg_catalog_replace (rg_env *env, int sync, const char *name, size_t n,
                        const char *spec, size_t specn, rg_cspec **out,
                        rg_err *e);
/* Finds a container by name (404). */
int rg_catalog_find (rg_env *env, const char *name, size_t n, rg_cspec **out,
                     rg_err *e);
/* Deletes a container and all its data (404); not inside a scope. */
int rg_catalog_drop (rg_env *env, int sync, const char *name, size_t n,
                     rg_err *e);
/* Finishes the deletions a crash interrupted (called at open). */
int rg_catalog_resume_drops (rg_env *env, int sync, rg_err *e);

/* One container's counters. */
typedef struct rg_cstat {
  const char *name;          /* points into the listing's buffer */
  size_t namelen;
  uint64_t items, bytes;
  uint32_t cid;
} rg_cstat;

/* Every container, sorted by name, with its counters: `out` holds the
** names, `stats` (malloc'd, *n of them) points into it.  *lsn is the
** database's last change-feed sequence number. */
int rg_catalog_list (rg_env *env, rg_buf *out, rg_cstat **stats, int *n,
                     uint64_t *lsn, rg_err *e);

/* Removes the expired items of every container with a TTL; *count says
** how many. */
int rg_catalog_purge (rg_env *env, int sync, int *count, rg_err *e);

#endif
