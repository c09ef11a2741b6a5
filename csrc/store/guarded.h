/*
** guarded.h: every call into liblmdb that may read a page of the map runs
** inside RG_GUARDED (guard.h), by name: this header redefines the names of
** those functions as wrappers, so the store's code calls them as LMDB
** documents them and a damaged page comes back as MDB_CORRUPTED.  Included
** by env.h right after lmdb.h (so by every file that calls LMDB).
**
** A write left half-way (mdb_put, mdb_del, a cursor's put or delete, a
** table's creation) leaves LMDB's own cursors linked on the dead stack:
** rg_guard_untrack unlinks them, so that the transaction can be aborted.
** mdb_txn_commit: LMDB frees a transaction whether its commit succeeds or
** not; one abandoned half-way is not freed, and holds the writer's lock,
** so the wrapper aborts it.  The damaged page and why are in
** rg_guard_pgno and rg_guard_why (rg_fail_mdb names them).
*/

#ifndef rg_guarded_h
#define rg_guarded_h

#include <lmdb.h>

#include "store/guard.h"

#define RG_G_RC(rc) ((rc) == RG_GUARD_DAMAGED ? MDB_CORRUPTED : (rc))

/* A value given is as long as the pages that hold it (guard.h). */
#define RG_G_VALUE(rc, v) \
  do { if ((rc) == 0 && (v) && rg_guard_value((v)->mv_data, \
                                              (v)->mv_size) != 0) \
         (rc) = MDB_CORRUPTED; } while (0)

static inline int rg_g_get (MDB_txn *t, MDB_dbi d, MDB_val *k, MDB_val *v) {
  int rc;
  RG_GUARDED(rc, mdb_get(t, d, k, v));
  RG_G_VALUE(rc, v);
  return RG_G_RC(rc);
}

/* A write left by longjmp: its transaction made fit to abort. */
#define RG_G_WRITE(rc, txn) \
  do { if ((rc) == RG_GUARD_DAMAGED) { char here_; \
         rg_guard_untrack((txn), &here_); } } while (0)

static inline int rg_g_put (MDB_txn *t, MDB_dbi d, MDB_val *k, MDB_val *v,
                            unsigned f) {
  int rc;
  RG_GUARDED(rc, mdb_put(t, d, k, v, f));
  RG_G_WRITE(rc, t);
  return RG_G_RC(rc);
}

static inline int rg_g_del (MDB_txn *t, MDB_dbi d, MDB_val *k, MDB_val *v) {
  int rc;
  RG_GUARDED(rc, mdb_del(t, d, k, v));
  RG_G_WRITE(rc, t);
  return RG_G_RC(rc);
}

static inline int rg_g_cursor_get (MDB_cursor *c, MDB_val *k, MDB_val *v,
                                   MDB_cursor_op op) {
  int rc;
  RG_GUARDED(rc, mdb_cursor_get(c, k, v, op));
  RG_G_VALUE(rc, v);
  return RG_G_RC(rc);
}

static inline int rg_g_cursor_put (MDB_cursor *c, MDB_val *k, MDB_val *v,
                                   unsigned f) {
  int rc;
  RG_GUARDED(rc, mdb_cursor_put(c, k, v, f));
  RG_G_WRITE(rc, mdb_cursor_txn(c));
  return RG_G_RC(rc);
}

static inline int rg_g_cursor_del (MDB_cursor *c, unsigned f) {
  int rc;
  RG_GUARDED(rc, mdb_cursor_del(c, f));
  RG_G_WRITE(rc, mdb_cursor_txn(c));
  return RG_G_RC(rc);
}

static inline int rg_g_cursor_count (MDB_cursor *c, size_t *n) {
  int rc;
  RG_GUARDED(rc, mdb_cursor_count(c, n));
  return RG_G_RC(rc);
}

static inline int rg_g_dbi_open (MDB_txn *t, const char *name, unsigned f,
                                 MDB_dbi *d) {
  int rc;
  RG_GUARDED(rc, mdb_dbi_open(t, name, f, d));
  RG_G_WRITE(rc, t);
  return RG_G_RC(rc);
}

static inline int rg_g_stat (MDB_txn *t, MDB_dbi d, MDB_stat *s) {
  int rc;
  RG_GUARDED(rc, mdb_stat(t, d, s));
  return RG_G_RC(rc);
}

static inline int rg_g_env_copy2 (MDB_env *env, const char *path,
                                  unsigned f) {
  int rc;
  RG_GUARDED(rc, mdb_env_copy2(env, path, f));
  return RG_G_RC(rc);
}

static inline int rg_g_txn_commit (MDB_txn *t) {
  int rc;
  RG_GUARDED(rc, mdb_txn_commit(t));
  if (rc == RG_GUARD_DAMAGED) {
    char here;
    rg_guard_untrack(t, &here);
    mdb_txn_abort(t);
  }
  return RG_G_RC(rc);
}

#define mdb_get          rg_g_get
#define mdb_put          rg_g_put
#define mdb_del          rg_g_del
#define mdb_cursor_get   rg_g_cursor_get
#define mdb_cursor_put   rg_g_cursor_put
#define mdb_cursor_del   rg_g_cursor_del
#define mdb_cursor_count rg_g_cursor_count
#define mdb_dbi_open     rg_g_dbi_open
#define mdb_stat         rg_g_stat
#define mdb_env_copy2    rg_g_env_copy2
#define mdb_txn_commit   rg_g_txn_commit

#endif
