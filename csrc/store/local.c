/*
** local.c: the local backend, LMDB behind the seam (local.h, kv.h).
**
** Environments.  Environments are opened with MDB_NOTLS: a read
** transaction is not tied to a thread, so coroutines may read.  Stale
** reader slots left by killed processes are reclaimed on open
** (mdb_reader_check).  LMDB forbids opening one environment twice in a
** process; env.c shares one rg_local between the handles of a directory.
**
** Read transactions.  Reads outside a write scope use one cached
** read-only transaction per environment, renewed at the start of a read
** and reset at its end (a renew is far cheaper than a begin).  If a Lua
** error interrupts a read, the next read finds the transaction still live
** and resets it first.
**
** Map growth.  The map starts at `map_size` and doubles when the data
** comes near its end, before a write transaction begins (LMDB can only
** resize with no write transaction open).  Should a write still run out
** of room (MDB_MAP_FULL, which the seam passes on as RG_RERUN), the scope
** is aborted, the map grown (rg_local_grow), and the body run again from
** the start.  Other processes see the larger map as MDB_MAP_RESIZED when
** they next begin a transaction and adopt it.  A user therefore never
** sees "map full"; a full disk gives 507 at commit, and the database stays
** as it was before that transaction (LMDB writes a transaction's pages
** where the last commit does not look, and its meta page last).
**
** Full disks and failed remaps.  The file grows as commits write pages
** past its end; when the file system fills part-way through a write, LMDB
** reports the short write as EIO, which a commit turns into 507 when the
** file system has (almost) no room left.  A remap is more delicate: LMDB
** unmaps the old map before it maps the new one, and when that fails
** (no address space: a ulimit -v) it is left with no map at all, which the
** next transaction would read through.  So a growth first probes the
** address space it needs and gives 507 when it is not there, leaving the
** map as it was; a proactive growth that cannot be made is skipped (the
** write may still fit); and should a remap fail anyway, the environment is
** marked broken and every call on it fails (507) until every handle on it
** is closed and the database opened again.
**
** Savepoints.  While any savepoint is open, every write first appends the
** key's previous value (or its absence) to the transaction's undo log;
** rolling a savepoint back replays its part of the log backwards.  (LMDB's
** nested transactions would do the same, but each allocates a dirty-page
** table of some megabytes, and the log costs only what the savepoint
** actually overwrites.)  An undo record: u8 table | u8 kind | u32 key
** length | u32 value length | key | value, where kind is UNDO_ABSENT (the
** key had no value: delete it), UNDO_VALUE (put the value back), and for
** the tables of sorted duplicates UNDO_DUP_ADDED (delete that duplicate)
** or UNDO_DUP_GONE (put it back).
*/

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <lmdb.h>

#include "store/guarded.h"
#include "store/layout.h"
#include "store/local.h"
#include "store/pagecheck.h"
#include "store/pagewalk.h"
#include "store/preflight.h"
#include "store/wal.h"

#define DEFAULT_MAP   (64u << 20)
#define MAP_QUANTUM   (1u << 20)
#define MAX_READERS   1024
#define FULL_ROOM     (1u << 20)     /* less free than this: the disk is full */

/* The seam's codes are LMDB's own (kv.h). */
typedef char check_notfound[RG_NOTFOUND == MDB_NOTFOUND ? 1 : -1];
typedef char check_keyexist[RG_KEYEXIST == MDB_KEYEXIST ? 1 : -1];
typedef char check_rerun[RG_RERUN == MDB_MAP_FULL ? 1 : -1];
typedef char check_corrupt[RG_CORRUPT == MDB_CORRUPTED ? 1 : -1];

/* A transaction of this backend. */
typedef struct ltxn {
  rg_txn base;
  MDB_txn *mdb;
  rg_local *l;
  int savepoints;            /* open savepoints */
  rg_buf undo;               /* their undo log: what writes overwrote */
  uint64_t lsn;              /* the transaction's lsn, 0 until taken */
  uint64_t dirty;            /* rg_kv_pending: dirty_cost of its writes */
  int deferred;              /* committed, not yet made durable */
} ltxn;

typedef struct lcur {
  rg_cur base;
  MDB_cursor *mc;
  ltxn *t;
  int tb;
} lcur;

/* The handle of a table a read-only open found missing (a late one,
** kv.h): read as empty. */
#define DBI_NONE ((MDB_dbi)~0u)

struct rg_local {
  MDB_env *mdb;
  MDB_dbi dbi[RG_NDB];       /* DBI_NONE: a late table this file lacks */
  const unsigned *dupsize;   /* per table (0: plain) */
  int ntables;
  char *path;
  int readonly;
  size_t map_size;
  int broken;                /* a remap failed (errno): unusable until
                                reopened */
  struct rg_wal *wal;        /* the write-ahead log (wal.h), or NULL */
  struct rg_guard *guard;    /* the map's guard (guard.h), or NULL */
  int sums;                  /* the pages' checksums are checked */
  int damaged;               /* LMDB's own check failed: no more writes */
  int refused;               /* the open refused the file as it is */
  uint8_t secret[16];
  ltxn r;                    /* the cached read transaction */
  int rtxn_live;
  ltxn w;                    /* the write transaction */
  unsigned dups[RG_NDB];
};

static const rg_kv_ops lmdb_ops;

#define T(t) ((ltxn *)(t))
#define C(c) ((lcur *)(c))

static unsigned db_flags (const rg_local *l, int tb) {
  return l->dupsize[tb] ? MDB_DUPSORT | MDB_DUPFIXED : 0;
}

int rg_kv_fail (rg_err *e, int rc, const char *what) {
  if (rc == RG_RERUN)
    return rg_fail(e, 507, "map full (the write will be retried)");
  if (rc == RG_NOPLACE)
    return rg_fail(e, 500, "storage failure: %s: a key whose place the "
                   "store cannot tell", what);
  /* a full disk is the one storage failure a user can fix: say so */
  if (rg_room_status(rc) == 507)
    return rg_fail(e, 507, "insufficient storage: %s: %s", what,
                   mdb_strerror(rc));
  if (rc == MDB_CORRUPTED && rg_guard_why && rg_guard_pgno == 0)
    return rg_fail(e, 500, "the database is damaged: %s: %s; `regolith "
                   "verify` walks the file", what, rg_guard_why);
  if (rc == MDB_CORRUPTED && rg_guard_why)  /* the guard's (guard.h) */
    return rg_fail(e, 500, "the database is damaged: %s: page %llu of "
                   "data.mdb does not check out (%s); `regolith verify` "
                   "walks the file", what, (unsigned long long)rg_guard_pgno,
                   rg_guard_why);
  return rg_fail(e, 500, "storage failure: %s: %s", what, mdb_strerror(rc));
}


/*
** {=====================================================================
** The seam: tables, cursors, savepoints
** ======================================================================
*/
static void kv (MDB_val *key, MDB_val *val, const void *k, size_t kn,
                const void *v, size_t vn) {
  key->mv_data = (void *)k;
  key->mv_size = kn;
  val->mv_data = (void *)v;
  val->mv_size = vn;
}

enum { UNDO_ABSENT, UNDO_VALUE, UNDO_DUP_ADDED, UNDO_DUP_GONE, UNDO_LSN };

static int undo_add (ltxn *t, int tb, int kind, const void *k, size_t kn,
                     const void *v, size_t vn) {
  uint8_t head[10];
  head[0] = (uint8_t)tb;
  head[1] = (uint8_t)kind;
  rg_put_u32(head + 2, (uint32_t)kn);
  rg_put_u32(head + 6, (uint32_t)vn);
  rg_buf_add(&t->undo, head, 10);
  rg_buf_add(&t->undo, k, kn);
  if (vn) rg_buf_add(&t->undo, v, vn);
  return t->undo.oom ? ENOMEM : 0;
}

/* Logs what key k holds now, before a write changes it. */
static int undo_record (ltxn *t, int tb, const void *k, size_t kn) {
  MDB_val key, old;
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_get(t->mdb, t->l->dbi[tb], &key, &old);
  if (rc == 0) return undo_add(t, tb, UNDO_VALUE, k, kn, old.mv_data,
                               old.mv_size);
  if (rc != MDB_NOTFOUND) return rc;
  return undo_add(t, tb, UNDO_ABSENT, k, kn, NULL, 0);
}

/* Undoes the writes logged after `mark`, newest first. */
static int undo_to (ltxn *t, size_t mark) {
  size_t *at = NULL, n = 0, cap = 0, i = mark;
  int rc = 0;
  while (i < t->undo.n) {            /* index the records, then go back */
    const uint8_t *r = (const uint8_t *)t->undo.p + i;
    if (n == cap) {
      size_t *a = (size_t *)realloc(at, (cap = cap ? cap * 2 : 64) *
                                    sizeof(size_t));
      if (a == NULL) { free(at); return ENOMEM; }
      at = a;
    }
    at[n++] = i;
    i += 10 + rg_get_u32(r + 2) + rg_get_u32(r + 6);
  }
  while (n-- > 0 && rc == 0) {
    const uint8_t *r = (const uint8_t *)t->undo.p + at[n];
    MDB_dbi dbi = t->l->dbi[r[0]];
    MDB_val key, val;
    key.mv_size = rg_get_u32(r + 2);
    key.mv_data = (void *)(r + 10);
    val.mv_size = rg_get_u32(r + 6);
    val.mv_data = (void *)(r + 10 + key.mv_size);
    switch (r[1]) {
      case UNDO_LSN:                 /* the lsn when the savepoint began */
        t->lsn = rg_get_u64(r + 10);
        break;
      case UNDO_VALUE: case UNDO_DUP_GONE:
        rc = mdb_put(t->mdb, dbi, &key, &val, 0);
        break;
      case UNDO_ABSENT: case UNDO_DUP_ADDED:
        rc = mdb_del(t->mdb, dbi, &key, r[1] == UNDO_ABSENT ? NULL : &val);
        if (rc == MDB_NOTFOUND) rc = 0;
        break;
    }
  }
  free(at);
  t->undo.n = mark;
  return rc;
}

static int l_get (rg_txn *tx, int tb, const void *k, size_t kn, rg_val *v) {
  ltxn *t = T(tx);
  MDB_val key, val;
  int rc;
  rg_assert(tb >= 0 && tb < t->l->ntables);
  key.mv_data = (void *)k;
  key.mv_size = kn;
  if (t->l->dbi[tb] == DBI_NONE) return RG_NOTFOUND;
  rc = mdb_get(t->mdb, t->l->dbi[tb], &key, &val);
  v->p = val.mv_data;
  v->n = val.mv_size;
  return rc;
}

/* What a write of key and value adds to the memory its transaction holds
** until the commit (LMDB's dirty pages): a value too big to share a leaf
** page is given pages of its own, which LMDB never spills before the
** commit (it bounds its dirty pages by their count, not their size); any
** other write makes its leaf page dirty (4 KiB) unless an earlier write
** of the transaction did: writes in key order share pages, writes spread
** over a large table do not, so each counts as at least a quarter page.
** Deleting counts as writing the key. */
static uint64_t dirty_cost (size_t kn, size_t vn) {
  const size_t page = 4096, nodemax = 2038;     /* LMDB 0.9, 4 KiB pages */
  size_t n = kn + vn + 16;
  if (kn + vn + 8 > nodemax) return (vn + 16 + page - 1) / page * page + kn;
  return n < page / 4 ? page / 4 : n;
}

static uint64_t l_pending (rg_txn *tx) {
  return T(tx)->dirty;
}

/* The seam's put flags as LMDB's. */
static unsigned mflags (unsigned f) {
  return ((f & RG_KV_APPEND) ? MDB_APPEND : 0) |
         ((f & RG_KV_APPENDDUP) ? MDB_APPENDDUP : 0) |
         ((f & RG_KV_NOOVERWRITE) ? MDB_NOOVERWRITE : 0);
}

#define HINTS (MDB_APPEND | MDB_APPENDDUP)

/* mdb_put (or mdb_cursor_put, with mc), then again without the append
** hints when they made it give MDB_KEYEXIST (the key was not past the
** end). */
static int put_retry (ltxn *t, MDB_cursor *mc, int tb, const void *k,
                      size_t kn, const void *v, size_t vn, unsigned flags) {
  MDB_val key, val;
  int rc;
  kv(&key, &val, k, kn, v, vn);
  rc = mc ? mdb_cursor_put(mc, &key, &val, flags)
          : mdb_put(t->mdb, t->l->dbi[tb], &key, &val, flags);
  if (rc == MDB_KEYEXIST && (flags & HINTS)) {
    kv(&key, &val, k, kn, v, vn);
    rc = mc ? mdb_cursor_put(mc, &key, &val, flags & ~HINTS)
            : mdb_put(t->mdb, t->l->dbi[tb], &key, &val, flags & ~HINTS);
  }
  return rc;
}

static int l_put (rg_txn *tx, int tb, const void *k, size_t kn,
                  const void *v, size_t vn, unsigned flags) {
  ltxn *t = T(tx);
  int rc;
  rg_assert(t == &t->l->w && t->l->dupsize[tb] == 0);
  if (t->savepoints && (rc = undo_record(t, tb, k, kn))) return rc;
  t->dirty += dirty_cost(kn, vn);
  return put_retry(t, NULL, tb, k, kn, v, vn, mflags(flags));
}

static void *l_reserve (rg_txn *tx, int tb, const void *k, size_t kn,
                        size_t vn, int *rc) {
  ltxn *t = T(tx);
  MDB_val key, val;
  rg_assert(t == &t->l->w && t->l->dupsize[tb] == 0);
  if (t->savepoints && (*rc = undo_record(t, tb, k, kn))) return NULL;
  t->dirty += dirty_cost(kn, vn);
  key.mv_data = (void *)k;
  key.mv_size = kn;
  val.mv_size = vn;
  if ((*rc = mdb_put(t->mdb, t->l->dbi[tb], &key, &val, MDB_RESERVE)))
    return NULL;
  return val.mv_data;
}

static int l_del (rg_txn *tx, int tb, const void *k, size_t kn) {
  ltxn *t = T(tx);
  MDB_val key;
  int rc;
  rg_assert(t == &t->l->w);
  if (t->savepoints) {
    if (t->l->dupsize[tb]) {         /* every duplicate, one by one */
      MDB_cursor *mc;
      MDB_val val;
      kv(&key, &val, k, kn, NULL, 0);
      if ((rc = mdb_cursor_open(t->mdb, t->l->dbi[tb], &mc))) return rc;
      rc = mdb_cursor_get(mc, &key, &val, MDB_SET_KEY);
      for (; rc == 0; rc = mdb_cursor_get(mc, &key, &val, MDB_NEXT_DUP))
        if ((rc = undo_add(t, tb, UNDO_DUP_GONE, k, kn, val.mv_data,
                           val.mv_size)))
          break;
      mdb_cursor_close(mc);
      if (rc && rc != MDB_NOTFOUND) return rc;
    }
    else if ((rc = undo_record(t, tb, k, kn))) return rc;
  }
  t->dirty += dirty_cost(kn, 0);
  key.mv_data = (void *)k;
  key.mv_size = kn;
  return mdb_del(t->mdb, t->l->dbi[tb], &key, NULL);
}

static int l_dput (rg_txn *tx, int tb, const void *k, size_t kn,
                   const void *d, size_t dn, unsigned flags) {
  ltxn *t = T(tx);
  int rc;
  rg_assert(t == &t->l->w && t->l->dupsize[tb] == dn);
  t->dirty += dirty_cost(kn, dn);
  rc = put_retry(t, NULL, tb, k, kn, d, dn, MDB_NODUPDATA | mflags(flags));
  if (rc == 0 && t->savepoints)
    return undo_add(t, tb, UNDO_DUP_ADDED, k, kn, d, dn);
  return rc;
}

static int l_ddel (rg_txn *tx, int tb, const void *k, size_t kn,
                   const void *d, size_t dn) {
  ltxn *t = T(tx);
  MDB_val key, val;
  int rc;
  rg_assert(t == &t->l->w && t->l->dupsize[tb] == dn);
  t->dirty += dirty_cost(kn, 0);
  kv(&key, &val, k, kn, d, dn);
  rc = mdb_del(t->mdb, t->l->dbi[tb], &key, &val);
  if (rc == 0 && t->savepoints)
    return undo_add(t, tb, UNDO_DUP_GONE, k, kn, d, dn);
  return rc;
}

static int l_cur_open (rg_txn *tx, int tb, rg_cur **out) {
  ltxn *t = T(tx);
  lcur *c = (lcur *)malloc(sizeof(lcur));
  int rc;
  *out = NULL;
  rg_assert(tb >= 0 && tb < t->l->ntables);
  if (c == NULL) return ENOMEM;
  c->mc = NULL;                      /* a missing late table: empty */
  if (t->l->dbi[tb] != DBI_NONE &&
      (rc = mdb_cursor_open(t->mdb, t->l->dbi[tb], &c->mc))) {
    free(c);
    return rc;
  }
  c->base.ops = &lmdb_ops;
  c->t = t;
  c->tb = tb;
  *out = &c->base;
  return 0;
}

static void l_cur_close (rg_cur *c) {
  if (C(c)->mc) mdb_cursor_close(C(c)->mc);
  free(c);
}

static const MDB_cursor_op cur_ops[] = {
  MDB_FIRST, MDB_LAST, MDB_NEXT, MDB_PREV, MDB_SET_RANGE, MDB_SET_KEY,
  MDB_GET_CURRENT, MDB_NEXT_NODUP, MDB_PREV_NODUP, MDB_NEXT_DUP,
  MDB_LAST_DUP, MDB_GET_BOTH, MDB_GET_BOTH_RANGE
};

static int l_cur_get (rg_cur *c, rg_val *k, rg_val *v, int op);

/* RG_SEEK_FLAT (kv.h): the first key >= the bytes sought, unless a key is
** a proper prefix of them (they end within its duplicates), and then the
** first of its duplicates >= the rest (padded with zeros). */
static int seek_flat (rg_cur *c, rg_val *k, rg_val *v) {
  size_t ds = C(c)->t->l->dupsize[C(c)->tb];
  rg_val want = *k, k0, d0;
  uint8_t part[16];                  /* (the widest duplicate: 12) */
  int rc, rc0;
  rg_assert(ds > 0 && ds <= sizeof(part));
  rc = l_cur_get(c, k, v, RG_SEEK);
  if (rc && rc != RG_NOTFOUND) return rc;
  rc0 = l_cur_get(c, &k0, &d0, rc == 0 ? RG_PREV_NODUP : RG_LAST);
  if (rc0 == 0 && k0.n < want.n && want.n - k0.n <= ds &&
      memcmp(k0.p, want.p, k0.n) == 0) {
    memset(part, 0, ds);
    memcpy(part, (const uint8_t *)want.p + k0.n, want.n - k0.n);
    d0.p = part;
    d0.n = ds;
    rc0 = l_cur_get(c, &k0, &d0, RG_BOTH_RANGE);
    if (rc0 == 0) {
      *k = k0;
      *v = d0;
      return 0;
    }
    if (rc0 != RG_NOTFOUND) return rc0;
    if ((rc0 = l_cur_get(c, &k0, &d0, RG_SET))) return rc0;
  }
  else if (rc0 && rc0 != RG_NOTFOUND) return rc0;
  if (rc == RG_NOTFOUND) return RG_NOTFOUND;
  /* back to the first key >= want, at its first duplicate */
  return l_cur_get(c, k, v, rc0 == 0 ? RG_NEXT_NODUP : RG_FIRST);
}

static int l_cur_get (rg_cur *c, rg_val *k, rg_val *v, int op) {
  MDB_val key, val;
  int rc;
  rg_assert(op >= RG_FIRST && op <= RG_SEEK_FLAT);
  if (C(c)->mc == NULL) return RG_NOTFOUND;
  if (op == RG_SEEK_FLAT) return seek_flat(c, k, v);
  if (op == RG_BOTH || op == RG_BOTH_RANGE)
    kv(&key, &val, k->p, k->n, v->p, v->n);
  else if (op == RG_SEEK || op == RG_SET)
    kv(&key, &val, k->p, k->n, NULL, 0);
  rc = mdb_cursor_get(C(c)->mc, &key, &val, cur_ops[op]);
  if (rc == 0) {
    k->p = key.mv_data;
    k->n = key.mv_size;
    v->p = val.mv_data;
    v->n = val.mv_size;
  }
  return rc;
}

static int l_cur_count (rg_cur *c, size_t *n) {
  size_t count = 0;
  int rc = C(c)->mc ? mdb_cursor_count(C(c)->mc, &count) : RG_NOTFOUND;
  *n = (size_t)count;
  return rc;
}

static int l_cur_put (rg_cur *cu, const void *k, size_t kn, const void *v,
                      size_t vn, unsigned flags) {
  lcur *c = C(cu);
  ltxn *t = c->t;
  int rc, dup = t->l->dupsize[c->tb] != 0;
  rg_assert(t == &t->l->w && (!dup || vn == t->l->dupsize[c->tb]));
  if (t->savepoints && !dup && (rc = undo_record(t, c->tb, k, kn)))
    return rc;
  t->dirty += dirty_cost(kn, vn);
  rc = put_retry(t, c->mc, c->tb, k, kn, v, vn,
                 (dup ? MDB_NODUPDATA : 0) | mflags(flags));
  if (rc == 0 && dup && t->savepoints)
    return undo_add(t, c->tb, UNDO_DUP_ADDED, k, kn, v, vn);
  return rc;
}

static int l_cur_del (rg_cur *cu) {
  lcur *c = C(cu);
  ltxn *t = c->t;
  int rc;
  rg_assert(t == &t->l->w);
  if (t->savepoints) {
    MDB_val k, v;
    if ((rc = mdb_cursor_get(c->mc, &k, &v, MDB_GET_CURRENT))) return rc;
    rc = t->l->dupsize[c->tb]
         ? undo_add(t, c->tb, UNDO_DUP_GONE, k.mv_data, k.mv_size, v.mv_data,
                    v.mv_size)
         : undo_record(t, c->tb, k.mv_data, k.mv_size);
    if (rc) return rc;
  }
  t->dirty += dirty_cost(0, 0);
  return mdb_cursor_del(c->mc, 0);
}

static size_t l_savepoint (rg_txn *tx) {
  ltxn *t = T(tx);
  size_t mark = t->undo.n;
  uint8_t lsn[8];
  rg_assert(t == &t->l->w);
  t->savepoints++;
  rg_put_u64(lsn, t->lsn);          /* (out of memory: the next write fails) */
  undo_add(t, 0, UNDO_LSN, lsn, 8, NULL, 0);
  return mark;
}

static void l_release (rg_txn *tx, size_t mark) {
  ltxn *t = T(tx);
  rg_assert(t->savepoints > 0 && mark <= t->undo.n);
  (void)mark;
  if (--t->savepoints == 0) t->undo.n = 0;   /* nothing left to undo to */
}

static int l_rollback (rg_txn *tx, size_t mark) {
  ltxn *t = T(tx);
  int rc;
  rg_assert(t->savepoints > 0 && mark <= t->undo.n);
  rc = undo_to(t, mark);
  t->savepoints--;
  return rc;
}

/* The lsn: one per transaction, the "\1lsn" counter's next. */
static int l_lsn (rg_txn *tx, const void *k, size_t kn, uint64_t *out) {
  ltxn *t = T(tx);
  rg_val v;
  uint8_t buf[8];
  int rc;
  (void)k; (void)kn;
  if (t->lsn == 0) {
    uint64_t last = 0;
    rc = l_get(tx, RG_DB_META, RG_META_LSN, sizeof(RG_META_LSN) - 1, &v);
    if (rc == 0 && v.n == 8) last = rg_get_u64((const uint8_t *)v.p);
    else if (rc && rc != RG_NOTFOUND) return rc;
    rg_put_u64(buf, last + 1);
    if ((rc = l_put(tx, RG_DB_META, RG_META_LSN, sizeof(RG_META_LSN) - 1,
                    buf, 8, 0)))
      return rc;
    t->lsn = last + 1;
  }
  *out = t->lsn;
  return 0;
}

/* Item seqs: the "\1seq" counter, moved past the n given (after 2^32
** creates it starts again at 1: the caller skips a seq still in use). */
static int l_seqs (rg_txn *tx, uint32_t n, uint32_t *first) {
  rg_val v;
  uint8_t buf[4];
  uint32_t last = 0;
  int rc = l_get(tx, RG_DB_META, RG_META_SEQ, sizeof(RG_META_SEQ) - 1, &v);
  rg_assert(n > 0);
  if (rc == 0 && v.n == 4) last = rg_get_u32((const uint8_t *)v.p);
  else if (rc && rc != RG_NOTFOUND) return rc;
  if (last > UINT32_MAX - n) last = 0;       /* wrapped: 0 names no item */
  *first = last + 1;
  rg_put_u32(buf, last + n);
  return l_put(tx, RG_DB_META, RG_META_SEQ, sizeof(RG_META_SEQ) - 1, buf, 4,
               0);
}

/* A pair of counters, read and written back (the bound is the caller's:
** it read what this transaction commits over). */
static int l_add (rg_txn *tx, int tb, const void *k, size_t kn, int64_t dn,
                  int64_t db, uint64_t bound, unsigned flags) {
  rg_val v;
  uint8_t buf[16];
  uint64_t n = 0, b = 0;
  int rc = l_get(tx, tb, k, kn, &v);
  (void)bound;
  if (rc == 0 && v.n == 16) {
    n = rg_get_u64((const uint8_t *)v.p);
    b = rg_get_u64((const uint8_t *)v.p + 8);
  }
  else if (rc && rc != RG_NOTFOUND) return rc;
  n += (uint64_t)dn;
  b += (uint64_t)db;
  if (n == 0 && (flags & RG_KV_DROP0)) {
    rc = l_del(tx, tb, k, kn);
    return rc == RG_NOTFOUND ? 0 : rc;
  }
  rg_put_u64(buf, n);
  rg_put_u64(buf + 8, b);
  return l_put(tx, tb, k, kn, buf, 16, 0);
}

/* The last lsn: the database's one counter. */
static int l_last (rg_txn *tx, uint32_t cid, int range, uint64_t *lsn) {
  rg_val v;
  int rc = l_get(tx, RG_DB_META, RG_META_LSN, sizeof(RG_META_LSN) - 1, &v);
  (void)cid; (void)range;
  *lsn = rc == 0 && v.n == 8 ? rg_get_u64((const uint8_t *)v.p) : 0;
  return rc == RG_NOTFOUND ? 0 : rc;
}

/* LMDB reads in place: a bound changes nothing. */
static void l_cur_bound (rg_cur *c, const void *prefix, size_t n) {
  (void)c;
  (void)prefix;
  (void)n;
}

/* One file holds every partition: a route changes nothing. */
static void l_cur_route (rg_cur *c, uint64_t hash, uint64_t mask) {
  (void)c;
  (void)hash;
  (void)mask;
}

static const rg_kv_ops lmdb_ops = {
  l_get, l_put, l_reserve, l_del, l_dput, l_ddel,
  l_cur_open, l_cur_close, l_cur_get, l_cur_count, l_cur_put, l_cur_del,
  l_savepoint, l_rollback, l_release, l_lsn, l_seqs, l_add, l_last,
  l_pending, l_cur_bound, l_cur_route
};
/* }===================================================================== */


/*
** {=====================================================================
** Opening and closing
** ======================================================================
*/
static int random_bytes (uint8_t *out, size_t n) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  size_t got = 0;
  if (fd < 0) return -1;
  while (got < n) {
    ssize_t r = read(fd, out + got, n - got);
    if (r <= 0) { if (r < 0 && errno == EINTR) continue; close(fd); return -1; }
    got += (size_t)r;
  }
  close(fd);
  return 0;
}

/* The failure of an environment whose map is gone (see the top). */
static int broken_fail (const rg_local *l, rg_err *e) {
  return rg_fail(e, 507, "insufficient storage: the database's map could not "
                 "be remapped (%s); close every handle on '%s' and open it "
                 "again", strerror(l->broken), l->path);
}

/*
** Remaps the environment to `size` bytes, or with 0 to the size another
** process has set.  A growth is probed first: the old map is released
** before the new one is made, so what must be free is the difference;
** without it, 507 and the map stays as it was.  A remap that fails all
** the same leaves LMDB with no map: the environment is then marked broken.
*/
static int remap (rg_local *l, size_t size, rg_err *e) {
  MDB_envinfo info;
  int rc;
  if (l->broken) return broken_fail(l, e);
  mdb_env_info(l->mdb, &info);
  if (size > info.me_mapsize) {
    size_t more = size - info.me_mapsize;
    void *probe = mmap(NULL, more, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe == MAP_FAILED)
      return rg_fail(e, 507, "insufficient storage: the map cannot grow to "
                     "%lu bytes (%s)", (unsigned long)size, strerror(errno));
    munmap(probe, more);
  }
  if ((rc = mdb_env_set_mapsize(l->mdb, size)) != 0) {
    if (rc != EINVAL) l->broken = rc;  /* EINVAL: refused before unmapping */
    return l->broken ? broken_fail(l, e)
                     : rg_kv_fail(e, rc, "growing the map");
  }
  rg_guard_remap(l->guard);
  return 0;
}

/* Begins a transaction, adopting a map another process has grown. */
static int txn_begin (rg_local *l, unsigned flags, MDB_txn **txn,
                      rg_err *e) {
  int rc, tries;
  if (l->broken) return broken_fail(l, e);
  for (tries = 0; tries < 8; tries++) {
    rc = mdb_txn_begin(l->mdb, NULL, flags, txn);
    if (rc != MDB_MAP_RESIZED) break;
    if ((rc = remap(l, 0, e))) return rc;
  }
  return rc ? rg_kv_fail(e, rc, "begin") : 0;
}

/* Stamps the checksum of every page in use that lacks one or holds a
** stale one, with the writer's lock held (no page changes meanwhile), and
** says so in regolith.id. */
static int stamp_all (rg_local *l, rg_err *e) {
  MDB_txn *txn;
  uint64_t n, at;
  int rc, fd;
  if (mdb_env_get_fd(l->mdb, &fd) != 0) return 0;
  if ((rc = txn_begin(l, 0, &txn, e))) return rc;
  at = (uint64_t)mdb_txn_id(txn) - 1;  /* the last one committed */
  rc = rg_pages_stamp(fd, &n, e);
  mdb_txn_abort(txn);
  if (rc == 0) {                     /* else the next open stamps again */
    rg_err ignored;
    rg_preflight_stamped(l->path, l->secret, at, &ignored);
  }
  return rc;
}

/* LMDB's assert callback: a check of its own failed on what it read
** (guard.h). */
static void lmdb_assert (MDB_env *mdb, const char *msg) {
  rg_local *l = (rg_local *)mdb_env_get_userctx(mdb);
  if (l) l->damaged = 1;
  rg_guard_fail(msg);
}

/* Guards the map LMDB made (guard.h), once a read transaction showed
** that liblmdb lays its transactions out as the guard reads them. */
static rg_guard *guard_map (MDB_env *mdb, int sums) {
  static int checked;
  MDB_stat st;
  MDB_txn *txn;
  int fd;
  if (!checked && mdb_txn_begin(mdb, NULL, MDB_RDONLY, &txn) == 0) {
    checked = 1;
    rg_guard_layout(txn, (uint64_t)mdb_txn_id(txn), 2);
    mdb_txn_abort(txn);
  }
  if (mdb_env_get_fd(mdb, &fd) != 0) return NULL;
  mdb_env_stat(mdb, &st);
  return rg_guard_open(fd, st.ms_psize, sums);
}

/*
** A failed commit.  LMDB reports a short write (the file system filled up
** part-way through it) as EIO: when the file system holding the database
** has (almost) no room left, that is a full disk, which the user can fix,
** and 507 like ENOSPC.
*/
static int commit_fail (const rg_local *l, int rc, rg_err *e) {
  struct statvfs fs;
  /* its record stays in the log (wal.h): a power cut before the next
  ** transaction unmakes it replays the commit */
  const char *what = l->wal && rg_wal_kept(l->wal)
    ? "commit (its record was not unmade from the log: whether a "
      "power cut would make it is unknown)" : "commit";
  if (rc == EIO && statvfs(l->path, &fs) == 0) {
    unsigned long long room = (unsigned long long)fs.f_frsize *
                              (geteuid() == 0 ? fs.f_bfree : fs.f_bavail);
    if (room < FULL_ROOM)
      return rg_fail(e, 507, "insufficient storage: %s: the file system "
                     "is full (%llu bytes free)", what, room);
  }
  return rg_kv_fail(e, rc, what);
}

/* The database's secret, from its table 'meta' (at *where in the map when
** where is not NULL): 0, or -1 when it is not there. */
static int get_secret (MDB_txn *txn, MDB_dbi meta, uint8_t secret[16],
                       const void **where) {
  MDB_val k, v;
  k.mv_data = RG_META_SECRET;
  k.mv_size = sizeof(RG_META_SECRET) - 1;
  if (mdb_get(txn, meta, &k, &v) != 0 || v.mv_size != 16) return -1;
  memcpy(secret, v.mv_data, 16);
  if (where) *where = v.mv_data;
  return 0;
}

/*
** Opens the tables and checks the format version, reading the secret.  A
** database that exists is opened in a read transaction, so an open never
** waits for a writer; a new one (a file without tables, or one missing a
** late table) is set up in a write transaction, which creates the tables,
** the version and the secret (several processes may race to do it: the
** first wins, the others find everything there).  The version is read before any other table is
** opened: a format 1 database has tables this format opens with other
** flags, and gets the error that names the upgrade.
*/
static int init_tables (rg_local *l, int create, uint8_t secret[16],
                        rg_err *e) {
  MDB_txn *txn;
  MDB_val k, v;
  MDB_stat st;
  int rc, i, fresh = 0;
  if ((rc = txn_begin(l, create ? 0 : MDB_RDONLY, &txn, e)) != 0)
    return rc;
  rc = mdb_dbi_open(txn, rg_tables[RG_DB_META].name, 0, &l->dbi[RG_DB_META]);
  if (rc == MDB_NOTFOUND) {
    /* a new file has no table at all; one that has some, but not 'meta',
    ** is never written into: a regolith database whose main tree is
    ** damaged, or the file of something else */
    MDB_dbi main, dbi;
    if ((rc = mdb_dbi_open(txn, NULL, 0, &main)) ||
        (rc = mdb_stat(txn, main, &st)))
      goto fail;
    if (st.ms_entries > 0 || !create) {
      int theirs = 0;                /* a table of regolith's is there */
      for (i = 0; st.ms_entries > 0 && i < RG_NDB && !theirs; i++)
        theirs = i != RG_DB_META &&
                 mdb_dbi_open(txn, rg_tables[i].name, 0, &dbi) != MDB_NOTFOUND;
      mdb_txn_abort(txn);
      if (st.ms_entries == 0 && !l->readonly)
        return init_tables(l, 1, secret, e);
      l->refused = 1;
      if (theirs)
        return rg_fail(e, 500, "the database '%s' is damaged: its table "
                       "'meta' is missing (restore it from a backup)",
                       l->path);
      return rg_fail(e, 404, "not a regolith database (table 'meta' "
                     "missing)");
    }
    rc = mdb_dbi_open(txn, rg_tables[RG_DB_META].name, MDB_CREATE,
                      &l->dbi[RG_DB_META]);
    fresh = 1;
  }
  if (rc) goto fail;
  k.mv_data = RG_META_VERSION;
  k.mv_size = sizeof(RG_META_VERSION) - 1;
  rc = mdb_get(txn, l->dbi[RG_DB_META], &k, &v);
  if (rc == 0 && (v.mv_size != 4 || rg_get_u32((const uint8_t *)v.mv_data) !=
                  RG_FORMAT_VERSION)) {
    unsigned ver = v.mv_size == 4 ? rg_get_u32((const uint8_t *)v.mv_data) : 0;
    mdb_txn_abort(txn);
    l->refused = 1;
    if (ver == 1)
      return rg_fail(e, 426, "'%s' is a database of format 1; this build "
                     "reads format %d: upgrade it first with "
                     "regolith.upgrade(path) or `regolith upgrade DIR` "
                     "(docs/api.md, \"Storage format\")", l->path,
                     RG_FORMAT_VERSION);
    return rg_fail(e, 500, "database format version %u is not supported "
                   "(this build reads version %d)", ver, RG_FORMAT_VERSION);
  }
  if (rc && rc != MDB_NOTFOUND) goto fail;
  /* 'meta' is made with the version in one transaction: a 'meta' without
  ** it is damaged (a bit of its leaf flipped, say), never one to set up
  ** again, which would write a new secret into a damaged file */
  if (rc == MDB_NOTFOUND && !fresh) {
    mdb_txn_abort(txn);
    l->refused = 1;
    return rg_fail(e, 500, "the database '%s' is damaged: its table 'meta' "
                   "holds no format version (restore it from a backup)",
                   l->path);
  }
  for (i = 0; i < RG_NDB; i++) {
    if (i == RG_DB_META) continue;
    rc = mdb_dbi_open(txn, rg_tables[i].name,
                      db_flags(l, i) | (create ? MDB_CREATE : 0), &l->dbi[i]);
    if (rc == MDB_NOTFOUND && l->readonly && rg_tables[i].late) {
      l->dbi[i] = DBI_NONE;          /* made before it: read as empty */
      continue;
    }
    if (rc == MDB_NOTFOUND) {
      mdb_txn_abort(txn);
      /* The format version was found, so the file is a regolith
      ** database; every table but a late one exists since format 2, and
      ** one missing means a damaged main tree, never a table to make
      ** afresh (an empty 'latest' or 'refs' would pass for the real one) */
      if (!rg_tables[i].late) {
        l->refused = 1;
        return rg_fail(e, 500, "the database is damaged: its table '%s' "
                       "is missing (restore it from a backup)",
                       rg_tables[i].name);
      }
      /* a late table: made here (MDB_CREATE finds every table, and a
      ** read-only open reads one as empty, above) */
      rg_assert(!create && !l->readonly);
      return init_tables(l, 1, secret, e);
    }
    if (rc) goto fail;
  }
  k.mv_data = RG_META_VERSION;
  k.mv_size = sizeof(RG_META_VERSION) - 1;
  rc = mdb_get(txn, l->dbi[RG_DB_META], &k, &v);
  if (rc == MDB_NOTFOUND) {
    uint8_t ver[4], sec[16];
    rg_put_u32(ver, RG_FORMAT_VERSION);
    v.mv_data = ver;
    v.mv_size = 4;
    if ((rc = mdb_put(txn, l->dbi[RG_DB_META], &k, &v, 0))) goto fail;
    if (random_bytes(sec, 16) != 0) {
      mdb_txn_abort(txn);
      return rg_fail(e, 500, "cannot read /dev/urandom");
    }
    k.mv_data = RG_META_SECRET;
    k.mv_size = sizeof(RG_META_SECRET) - 1;
    v.mv_data = sec;
    v.mv_size = 16;
    if ((rc = mdb_put(txn, l->dbi[RG_DB_META], &k, &v, 0))) goto fail;
  }
  else if (rc) goto fail;
  if (get_secret(txn, l->dbi[RG_DB_META], secret, NULL) != 0) {
    mdb_txn_abort(txn);
    return rg_fail(e, 500, "database secret missing");
  }
  /* committing (even a read transaction) keeps the table handles */
  if ((rc = mdb_txn_commit(txn))) return commit_fail(l, rc, e);
  return 0;
fail:
  mdb_txn_abort(txn);
  return rg_kv_fail(e, rc, "opening tables");
}

/*
** Reserves the blocks of the lock file before LMDB maps it.  LMDB sizes the
** file with ftruncate, a file full of holes, and writes it through a shared
** map: on a full disk the first write to a page the file system cannot
** give is a SIGBUS, which kills the process.  Allocating the blocks first
** turns that into ENOSPC here (507).  A new file is made at least as large
** as LMDB needs for MAX_READERS (it takes a larger one as it is, with a few
** more reader slots); an existing one, maybe in use by other processes, only
** has its holes filled, never its size changed.  A read-only open makes no
** file (LMDB will).
*/
static int reserve_lock (const char *path, int readonly, rg_err *e) {
  char name[4096];
  struct stat st;
  int fd, rc = 0;
  if ((size_t)snprintf(name, sizeof(name), "%s/lock.mdb", path) >= sizeof(name))
    return 0;                        /* LMDB will say what is wrong */
  fd = open(name, O_RDWR | O_CLOEXEC | (readonly ? 0 : O_CREAT), 0644);
  if (fd < 0) return 0;
  if (fstat(fd, &st) == 0) {
    if (st.st_size == 0)
      rc = posix_fallocate(fd, 0, (off_t)MAX_READERS * 64 + 4096);
    else if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, st.st_size) != 0)
      rc = errno;
  }
  close(fd);
  if (rg_room_status(rc) == 507)
    return rg_fail(e, 507, "insufficient storage: cannot open '%s': %s", path,
                   strerror(rc));
  return 0;                          /* anything else: as LMDB would have */
}

static rg_local *local_new (const char *path, int readonly) {
  rg_local *l = (rg_local *)calloc(1, sizeof(rg_local));
  int i;
  if (l == NULL || (l->path = strdup(path)) == NULL) {
    free(l);
    return NULL;
  }
  l->readonly = readonly;
  for (i = 0; i < RG_NDB; i++) l->dups[i] = rg_tables[i].dupsize;
  l->dupsize = l->dups;
  l->ntables = RG_NDB;
  l->r.base.ops = l->w.base.ops = &lmdb_ops;
  l->r.l = l->w.l = l;
  return l;
}

void rg_local_close (rg_local *l) {
  if (l == NULL) return;
  if (l->w.mdb) mdb_txn_abort(l->w.mdb);     /* a raw open's */
  if (l->r.mdb) mdb_txn_abort(l->r.mdb);
  if (l->wal && !l->readonly && !l->broken) {   /* the log, closed */
    MDB_txn *txn;
    rg_err e;
    if (mdb_txn_begin(l->mdb, NULL, 0, &txn) == 0) {
      rg_wal_closing(l->wal, txn, &e);
      /* every commit of this process stamped its pages: as far as the
      ** file goes now, they all carry their checksums */
      rg_preflight_stamped(l->path, l->secret,
                           (uint64_t)mdb_txn_id(txn) - 1, &e);
      mdb_txn_abort(txn);
    }
  }
  rg_wal_close(l->wal);
  rg_guard_close(l->guard);
  if (l->mdb) mdb_env_close(l->mdb);
  rg_buf_free(&l->w.undo);
  free(l->path);
  free(l);
}

/*
** The log's files, as an open that refuses the data file as it is (init_
** tables: another program's LMDB file, a damaged or older regolith one)
** leaves them: those it made are removed again, so that the directory is
** as the open found it.  No process logs into them meanwhile: the data
** file is never written into, so every open of it refuses it alike (one
** that found the files there, made by this one, removes nothing).
** LMDB's lock.mdb stays: every LMDB program's open makes it, a read-only
** one too, and another may be using it by now.
*/
static const char *const log_files[] = { "regolith.wal", "regolith.shm" };

/* Which of the log's files are missing: a bit for each. */
static unsigned files_missing (const char *path) {
  char name[4096];
  struct stat st;
  unsigned i, bits = 0;
  for (i = 0; i < 2; i++) {
    snprintf(name, sizeof(name), "%s/%s", path, log_files[i]);
    if (stat(name, &st) != 0 && errno == ENOENT) bits |= 1u << i;
  }
  return bits;
}

static void files_remove (const char *path, unsigned bits) {
  char name[4096];
  unsigned i;
  rg_err ignored;                    /* the refusal is what the caller gets */
  for (i = 0; i < 2; i++)
    if (bits >> i & 1) {
      snprintf(name, sizeof(name), "%s/%s", path, log_files[i]);
      unlink(name);
    }
  if (bits) rg_sync_dir(path, &ignored);
}

/*
** The tables of names failed a page's checksum, read with them from the
** open's start because regolith.id says every page carries its own at the
** file's transaction.  That holds for the database regolith.id names.  The
** data file of another database put in its place, whose pages carry stale
** checksums (another LMDB program wrote them) and whose transaction
** happens to be the one regolith.id names, is not damaged but another
** database, and the refusal must say so: it says what to do.  So the
** secret is read again without the checksums (every page still checked
** for its shape): when regolith.id names another database, that is the
** refusal; when it names this one, or when the page holding the secret
** fails its own checksum (a flipped bit in the secret would make this
** database pass for another), the refusal `rc` as damaged stands.
*/
static int damaged_or_another (rg_local *l, int rc, rg_err *e) {
  MDB_envinfo info;
  MDB_txn *txn;
  MDB_dbi meta;
  rg_err other;
  const void *at;
  uint8_t secret[16];
  int ok, sums;
  rg_guard_sums(l->guard, 0);
  if (mdb_txn_begin(l->mdb, NULL, MDB_RDONLY, &txn) != 0) return rc;
  mdb_env_info(l->mdb, &info);
  ok = mdb_dbi_open(txn, rg_tables[RG_DB_META].name, 0, &meta) == 0 &&
       get_secret(txn, meta, secret, &at) == 0 &&
       rg_guard_sum_holds(l->guard, at) == 1;
  mdb_txn_abort(txn);
  if (ok && rg_preflight_identity(l->path, secret,
                                  (uint64_t)info.me_last_txnid, 1, &sums,
                                  &other) != 0) {
    if (e) *e = other;
    return other.status;
  }
  return rc;
}

void rg_local_log_deltas (rg_local *l) {
  if (l->wal) rg_wal_deltas(l->wal);
}

int rg_local_open (const char *path, int readonly, size_t map_size,
                   rg_local **out, uint8_t secret[16], rg_err *e) {
  rg_local *l;
  MDB_envinfo info;
  int rc, dead, sums, early, refused;
  unsigned made;
  *out = NULL;
  if ((rc = reserve_lock(path, readonly, e))) return rc;
  if ((l = local_new(path, readonly)) == NULL)
    return rg_fail(e, 500, "out of memory");
  made = readonly ? 0 : files_missing(path);  /* a read-only open makes none */
  /* before LMDB reads the file: its checks (preflight.h), and the log,
  ** replayed after a restart */
  if ((rc = rg_preflight_log(path, readonly, e))) goto fail;
  if ((rc = rg_wal_open(path, readonly, &l->wal, e))) goto fail;
  if ((rc = rg_preflight_map(path, e))) goto fail;
  if ((rc = mdb_env_create(&l->mdb))) goto fail_mdb;
  mdb_env_set_userctx(l->mdb, l);
  mdb_env_set_assert(l->mdb, lmdb_assert);
  mdb_env_set_maxdbs(l->mdb, RG_NDB + 4);
  mdb_env_set_maxreaders(l->mdb, MAX_READERS);
  mdb_env_set_mapsize(l->mdb, map_size ? map_size : DEFAULT_MAP);
  if ((rc = mdb_env_open(l->mdb, path, MDB_NOTLS | (readonly ? MDB_RDONLY : 0),
                         0644)))
    goto fail_mdb;
  l->guard = guard_map(l->mdb, 0);
  mdb_reader_check(l->mdb, &dead);
  mdb_env_info(l->mdb, &info);
  l->map_size = info.me_mapsize;
  /* the tables of names read with their checksums checked, where
  ** regolith.id says every page carries one: a flipped bit in a node's
  ** flags there sends LMDB astray before any later check */
  early = l->wal && rg_preflight_summed(path, (uint64_t)info.me_last_txnid);
  if (early) rg_guard_sums(l->guard, 1);
  if ((rc = init_tables(l, 0, secret, e))) {
    if (early && rg_guard_why == rg_page_badsum)
      rc = damaged_or_another(l, rc, e);
    goto fail;
  }
  memcpy(l->secret, secret, 16);
  mdb_env_info(l->mdb, &info);
  if ((rc = rg_preflight_identity(path, secret, (uint64_t)info.me_last_txnid,
                                  readonly, &sums, e)))
    goto fail;
  /* the pages' checksums: stamped again where something else wrote
  ** (pagecheck.h), then checked; only a process whose writes stamp them
  ** (the log's hooks are in: l->wal) can trust its own */
  if (!sums && !readonly && l->wal && (rc = stamp_all(l, e))) goto fail;
  l->sums = l->wal && (sums || !readonly);
  rg_guard_sums(l->guard, l->sums);
  if (l->wal && (rc = rg_wal_attach(l->wal, l->mdb, e))) goto fail;
  *out = l;
  return 0;
fail_mdb:
  rc = rg_fail(e, rc == EACCES ? 403 : rg_room_status(rc),
               "cannot open database '%s': %s", path, mdb_strerror(rc));
fail:
  refused = l->refused;
  l->readonly = 1;                   /* no closing checkpoint */
  rg_local_close(l);
  if (refused) files_remove(path, made);
  return rc;
}

typedef struct readers {
  pid_t self, other;
} readers;

static int reader_line (const char *msg, void *ctx) {
  readers *r = (readers *)ctx;
  long pid;
  if (sscanf(msg, "%ld", &pid) == 1 && pid > 0 && (pid_t)pid != r->self)
    r->other = (pid_t)pid;
  return 0;
}

int rg_local_open_raw (const char *path, const char *const *names, int n,
                       rg_local **out, rg_txn **t, rg_err *e) {
  char data[4096];
  struct stat st;
  readers rd;
  rg_local *l;
  int rc, i, dead;
  *out = NULL;
  *t = NULL;
  rg_assert(n > 0 && n <= RG_NDB);
  snprintf(data, sizeof(data), "%s/data.mdb", path);
  if (stat(data, &st) != 0)
    return rg_fail(e, 404, "no database in '%s'", path);
  if ((l = local_new(path, 1)) == NULL) return rg_fail(e, 500, "out of memory");
  for (i = 0; i < n; i++) l->dups[i] = 0;
  l->ntables = n;
  {                                /* what the log holds, replayed first */
    struct rg_wal *w;
    if ((rc = rg_wal_open(path, 0, &w, e))) goto out;
    rg_wal_close(w);
  }
  if ((rc = mdb_env_create(&l->mdb))) goto fail;
  mdb_env_set_maxdbs(l->mdb, 16);
  mdb_env_set_mapsize(l->mdb, (size_t)st.st_size + (64u << 20));
  if ((rc = mdb_env_open(l->mdb, path, MDB_NOTLS, 0644))) goto fail;
  mdb_reader_check(l->mdb, &dead);
  rd.self = getpid();
  rd.other = 0;
  mdb_reader_list(l->mdb, reader_line, &rd);
  if (rd.other) {
    rc = rg_fail(e, 409, "process %ld has the database open; close every "
                 "handle on it first", (long)rd.other);
    goto out;
  }
  if ((rc = mdb_txn_begin(l->mdb, NULL, 0, &l->w.mdb))) goto fail;
  for (i = 0; i < n; i++)
    if ((rc = mdb_dbi_open(l->w.mdb, names[i], 0, &l->dbi[i]))) {
      if (rc == MDB_NOTFOUND) {
        rc = rg_fail(e, 404, "'%s' is not a regolith database", path);
        goto out;
      }
      goto fail;
    }
  *out = l;
  *t = &l->w.base;
  return 0;
fail:
  rc = rg_kv_fail(e, rc, "opening the database");
out:
  rg_local_close(l);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Transactions
** ======================================================================
*/
int rg_local_read (rg_local *l, rg_txn **t, rg_err *e) {
  int rc, tries;
  if (l->broken) return broken_fail(l, e);
  rg_assert(l->w.mdb == NULL);
  if (l->rtxn_live) {                /* left live by an interrupted call */
    mdb_txn_reset(l->r.mdb);
    l->rtxn_live = 0;
  }
  for (tries = 0; tries < 4; tries++) {
    if (l->r.mdb == NULL)
      rc = mdb_txn_begin(l->mdb, NULL, MDB_RDONLY, &l->r.mdb);
    else
      rc = mdb_txn_renew(l->r.mdb);
    if (rc == 0) {
      l->rtxn_live = 1;
      *t = &l->r.base;
      return 0;
    }
    if (rc != MDB_MAP_RESIZED && l->r.mdb) {
      mdb_txn_abort(l->r.mdb);
      l->r.mdb = NULL;
    }
    if (rc == MDB_MAP_RESIZED) {     /* another process grew the map */
      if (l->r.mdb && tries > 0) {   /* give the handle up and start anew */
        mdb_txn_abort(l->r.mdb);
        l->r.mdb = NULL;
      }
      if ((rc = remap(l, 0, e))) return rc;
      continue;
    }
    break;
  }
  return rg_kv_fail(e, rc, "read transaction");
}

void rg_local_read_end (rg_local *l) {
  if (l->rtxn_live) {
    mdb_txn_reset(l->r.mdb);
    l->rtxn_live = 0;
  }
}

/* Grows the map so that at least `need` bytes stay free beyond the data. */
static int grow_map (rg_local *l, size_t need, rg_err *e) {
  MDB_envinfo info;
  MDB_stat st;
  size_t used, size;
  int rc;
  if (l->broken) return broken_fail(l, e);
  mdb_env_info(l->mdb, &info);
  mdb_env_stat(l->mdb, &st);
  used = (info.me_last_pgno + 1) * (size_t)st.ms_psize;
  size = info.me_mapsize;
  if (used + need <= size) { l->map_size = size; return 0; }
  while (used + need > size) size *= 2;
  size = (size + MAP_QUANTUM - 1) / MAP_QUANTUM * MAP_QUANTUM;
  if ((rc = remap(l, size, e))) return rc;
  l->map_size = size;
  return 0;
}

int rg_local_grow (rg_local *l, rg_err *e) {
  return grow_map(l, l->map_size, e);
}

/* With a log, LMDB never flushes: the log (or a checkpoint) does. */
static void set_sync (rg_local *l, int sync) {
  mdb_env_set_flags(l->mdb, MDB_NOSYNC | MDB_NOMETASYNC, 0);
  if (l->wal) mdb_env_set_flags(l->mdb, MDB_NOSYNC, 1);
  else if (sync == RG_SYNC_LAZY) mdb_env_set_flags(l->mdb, MDB_NOMETASYNC, 1);
  else if (sync == RG_SYNC_NONE) mdb_env_set_flags(l->mdb, MDB_NOSYNC, 1);
}

int rg_local_begin (rg_local *l, int sync, rg_txn **t, rg_err *e) {
  int rc;
  rg_assert(l->w.mdb == NULL && !l->w.deferred);
  /* LMDB's state after a call it could not finish is not to be written
  ** from again, nor is a tree found damaged to be written into */
  if (l->damaged || rg_guard_met(l->guard))
    return rg_fail(e, 500, "the database '%s' is damaged: writes are refused "
                   "until it is opened again (`regolith verify` walks the "
                   "file)", l->path);
  rg_local_read_end(l);              /* nothing may hold the old map */
  /* room ahead of need; when it cannot be made the write may still fit,
  ** and running out gives MDB_MAP_FULL, then a growth that must succeed */
  if (grow_map(l, l->map_size / 4, e) && l->broken) return 507;
  set_sync(l, sync);
  if ((rc = txn_begin(l, 0, &l->w.mdb, e))) return rc;
  if (l->wal && (rc = rg_wal_begin(l->wal, l->w.mdb, sync, e))) {
    mdb_txn_abort(l->w.mdb);
    l->w.mdb = NULL;
    rg_wal_end(l->wal);
    return rc;
  }
  l->w.savepoints = 0;
  l->w.undo.n = 0;
  l->w.lsn = 0;
  l->w.dirty = 0;
  *t = &l->w.base;
  return 0;
}

void rg_local_abort (rg_local *l) {
  rg_assert(l->w.mdb != NULL);
  mdb_txn_abort(l->w.mdb);
  l->w.mdb = NULL;
  if (l->wal) rg_wal_end(l->wal);
  if (l->w.undo.cap > (1u << 20)) rg_buf_free(&l->w.undo);
}

int rg_local_commit (rg_local *l, int deferred, rg_err *e) {
  int rc, st = 0;
  rg_assert(l->w.mdb != NULL && l->w.savepoints == 0 && !l->w.deferred);
  if (l->wal) rg_wal_committing(l->wal);
  rc = mdb_txn_commit(l->w.mdb);
  l->w.mdb = NULL;
  if (l->w.undo.cap > (1u << 20)) rg_buf_free(&l->w.undo);
  if (rc == 0 && deferred) {
    l->w.deferred = 1;
    return 0;
  }
  if (l->wal) {
    st = rc == 0 ? rg_wal_durable(l->wal, e) : 0;
    rg_wal_end(l->wal);
  }
  if (rc == MDB_MAP_FULL) return RG_RERUN;
  if (rc) return commit_fail(l, rc, e);
  return st;
}

int rg_local_durable (rg_local *l, rg_err *e) {
  int st = 0;
  rg_assert(l->w.deferred);
  l->w.deferred = 0;
  if (l->wal) {
    st = rg_wal_durable(l->wal, e);
    rg_wal_end(l->wal);
  }
  return st;
}

int rg_local_flush_log (rg_local *l, rg_err *e) {
  return l->wal ? rg_wal_flush(l->wal, e) : 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Statistics
** ======================================================================
*/
void rg_local_info (rg_local *l, rg_env_info *out) {
  MDB_envinfo info;
  MDB_stat st;
  mdb_env_info(l->mdb, &info);
  mdb_env_stat(l->mdb, &st);
  out->map_size = info.me_mapsize;
  out->used_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
  out->page_size = st.ms_psize;
  out->readers = info.me_numreaders;
  out->logged = l->wal != NULL;
  if (l->wal) {
    rg_wal_stat ws;
    rg_wal_stats(l->wal, &ws);
    out->log_records = ws.records;
    out->log_bytes = ws.bytes;
    out->log_flushes = ws.flushes;
    out->log_checkpoints = ws.checkpoints;
    out->log_checkpoints_locked = ws.checkpoints_locked;
    out->log_deltas = ws.deltas;
  }
}

/*
** The pages of each table.  LMDB counts a table's own tree; the nested
** trees holding a key's duplicates once they outgrow the key's page are
** counted here: each MDB_NEXT_MULTIPLE step over a DUPFIXED key reads one
** leaf page of its nested tree (one step over a small set kept inside the
** node reads none), and a nested tree of L > 1 leaves has about
** L / 150 branch pages above them (fanout of a small fixed key).  The
** free pages are those the free list holds.
*/
static uint64_t nested_pages (MDB_cursor *cur, size_t dupsize) {
  MDB_val k, d;
  uint64_t pages = 0;
  int rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT_NODUP)) {
    size_t count = 0;
    uint64_t leaves = 0;
    if (mdb_cursor_count(cur, &count) || count * dupsize < 1024) continue;
    rc = mdb_cursor_get(cur, &k, &d, MDB_GET_MULTIPLE);
    while (rc == 0) {
      leaves++;
      rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT_MULTIPLE);
    }
    if (leaves > 1 || count * dupsize > 2000)
      pages += leaves + (leaves > 1 ? (leaves + 149) / 150 : 0);
  }
  return pages;
}

int rg_local_tables (rg_local *l, rg_txn *tx, rg_table_stat out[],
                     uint64_t *free_bytes, rg_err *e) {
  MDB_txn *txn = T(tx)->mdb;
  MDB_cursor *cur;
  MDB_stat st;
  MDB_val k, d;
  int i, rc = 0;
  uint64_t psize;
  rg_assert(tx->ops == &lmdb_ops && T(tx)->l == l);
  *free_bytes = 0;
  mdb_env_stat(l->mdb, &st);
  psize = st.ms_psize;
  for (i = 0; i < RG_NDB && rc == 0; i++) {
    if (l->dbi[i] == DBI_NONE) continue;        /* a table not there */
    if ((rc = mdb_stat(txn, l->dbi[i], &st))) break;
    out[i].entries = st.ms_entries;
    out[i].bytes = psize * (st.ms_branch_pages + st.ms_leaf_pages +
                            st.ms_overflow_pages);
    if (l->dupsize[i] && (rc = mdb_cursor_open(txn, l->dbi[i], &cur)) == 0) {
      out[i].bytes += psize * nested_pages(cur, l->dupsize[i]);
      mdb_cursor_close(cur);
    }
  }
  if (rc == 0 && (rc = mdb_cursor_open(txn, 0, &cur)) == 0) {   /* free list */
    int r = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
    for (; r == 0; r = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
      if (d.mv_size >= sizeof(size_t))
        *free_bytes += psize * (uint64_t)*(const size_t *)d.mv_data;
    mdb_cursor_close(cur);
  }
  return rc ? rg_kv_fail(e, rc, "table statistics") : 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Copies: backups and compaction
** ======================================================================
**
** rg_local_backup copies the pages in use; rg_local_compact rewrites every
** table of one read snapshot into a new environment in key order,
** appending, so that every page is full (LMDB's pages split in the middle
** and stay 50-70 % full when keys come in any other order).  The copy is
** made in "<dest>/.compact" and renamed to "<dest>/data.mdb" only once it
** is complete and flushed, so a crash never leaves a part of a copy that
** could be taken for a database.
*/
#define COMPACT_CHUNK 100000     /* entries per transaction of the copy */

/* A copy's destination: a directory (made when missing) holding no
** database; data gets "<path>/data.mdb". */
static int copy_dest (rg_local *l, const char *path, char *data, size_t n,
                      rg_err *e) {
  struct stat st;
  if (l->broken) return broken_fail(l, e);
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create '%s': %s", path, strerror(errno));
  snprintf(data, n, "%s/data.mdb", path);
  if (stat(data, &st) == 0)
    return rg_fail(e, 409, "'%s' already holds a database", path);
  return 0;
}

int rg_local_backup (rg_local *l, const char *path, rg_err *e) {
  char data[4096];
  uint64_t stamped;
  int rc, fd;
  if ((rc = copy_dest(l, path, data, sizeof(data), e))) return rc;
  /* a log left there belongs to no file of the directory (wal.h) */
  if ((rc = rg_wal_forget(path, e))) return rc;
  if ((rc = mdb_env_copy2(l->mdb, path, MDB_CP_COMPACT))) {
    unlink(data);                    /* a part of a copy is no backup */
    return rg_kv_fail(e, rc, "backup");
  }
  if ((fd = open(data, O_RDWR | O_CLOEXEC)) < 0 || fsync(fd) != 0) {
    rc = errno;
    if (fd >= 0) close(fd);
    unlink(data);
    return rg_fail(e, 500, "storage failure: flushing the backup: %s",
                   strerror(rc));
  }
  /* the copy numbers its pages anew: their checksums, made anew too */
  if ((rc = rg_pages_stamp(fd, &stamped, e))) {
    close(fd);
    unlink(data);
    return rc;
  }
  close(fd);
  return rg_sync_dir(path, e);
}

static int compact_table (MDB_txn *src, MDB_env *dst, MDB_dbi sdbi,
                          const char *name, unsigned flags,
                          uint64_t *entries) {
  MDB_cursor *sc = NULL, *dc = NULL;
  MDB_txn *dtxn = NULL;
  MDB_dbi ddbi;
  MDB_val k, v, pk;
  uint8_t prev[RG_MAX_KEY];
  uint64_t n = 0;
  int rc, first = 1;
  if ((rc = mdb_cursor_open(src, sdbi, &sc))) return rc;
  if ((rc = mdb_txn_begin(dst, NULL, 0, &dtxn)) ||
      (rc = mdb_dbi_open(dtxn, name, flags | MDB_CREATE, &ddbi)) ||
      (rc = mdb_cursor_open(dtxn, ddbi, &dc)))
    goto done;
  pk.mv_data = prev;
  pk.mv_size = 0;
  rc = mdb_cursor_get(sc, &k, &v, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(sc, &k, &v, MDB_NEXT)) {
    int same = !first && (flags & MDB_DUPSORT) && k.mv_size == pk.mv_size &&
               memcmp(k.mv_data, prev, k.mv_size) == 0;
    if ((rc = mdb_cursor_put(dc, &k, &v, same ? MDB_APPENDDUP : MDB_APPEND)))
      goto done;
    if (k.mv_size <= sizeof(prev)) {
      memcpy(prev, k.mv_data, k.mv_size);
      pk.mv_size = k.mv_size;
    }
    first = 0;
    if (++n % COMPACT_CHUNK == 0) {  /* bound the dirty pages */
      mdb_cursor_close(dc);
      dc = NULL;
      if ((rc = mdb_txn_commit(dtxn))) { dtxn = NULL; goto done; }
      dtxn = NULL;
      if ((rc = mdb_txn_begin(dst, NULL, 0, &dtxn)) ||
          (rc = mdb_cursor_open(dtxn, ddbi, &dc)))
        goto done;
    }
  }
  if (rc == MDB_NOTFOUND) rc = 0;
done:
  if (dc) mdb_cursor_close(dc);
  if (rc == 0 && dtxn) { rc = mdb_txn_commit(dtxn); dtxn = NULL; }
  if (dtxn) mdb_txn_abort(dtxn);
  mdb_cursor_close(sc);
  *entries += n;
  return rc;
}

int rg_local_compact (rg_local *l, const char *path, uint64_t *bytes,
                      rg_err *e) {
  char tmp[4096], data[4096], from[4096];
  MDB_env *dst = NULL;
  MDB_txn *src = NULL;
  MDB_envinfo info;
  MDB_stat ms;
  uint64_t entries = 0;
  int rc, i;
  *bytes = 0;
  if ((rc = copy_dest(l, path, data, sizeof(data), e))) return rc;
  snprintf(tmp, sizeof(tmp), "%s/.compact", path);
  snprintf(from, sizeof(from), "%s/.compact/data.mdb", path);
  unlink(from);                      /* what an interrupted copy left */
  snprintf(data, sizeof(data), "%s/.compact/lock.mdb", path);
  unlink(data);
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create '%s': %s", tmp, strerror(errno));
  mdb_env_info(l->mdb, &info);
  mdb_env_stat(l->mdb, &ms);
  if ((rc = mdb_env_create(&dst))) goto fail;
  mdb_env_set_maxdbs(dst, RG_NDB + 4);
  /* the copy is no larger than the pages in use */
  mdb_env_set_mapsize(dst, (info.me_last_pgno + 64) * (size_t)ms.ms_psize +
                           (64u << 20));
  if ((rc = mdb_env_open(dst, tmp, MDB_NOSYNC, 0644))) goto fail;
  if ((rc = mdb_txn_begin(l->mdb, NULL, MDB_RDONLY, &src))) goto fail;
  for (i = 0; i < RG_NDB && rc == 0; i++)
    if (l->dbi[i] != DBI_NONE)
      rc = compact_table(src, dst, l->dbi[i], rg_tables[i].name,
                         db_flags(l, i), &entries);
  mdb_txn_abort(src);
  src = NULL;
  if (rc) goto fail;
  if ((rc = mdb_env_sync(dst, 1))) goto fail;
  mdb_env_info(dst, &info);
  *bytes = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
  mdb_env_close(dst);
  dst = NULL;
  {                                  /* the copy's pages, checksummed */
    uint64_t stamped;
    int fd = open(from, O_RDWR | O_CLOEXEC);
    rc = fd < 0 ? rg_fail(e, 500, "cannot open '%s': %s", from,
                          strerror(errno))
                : rg_pages_stamp(fd, &stamped, e);
    if (fd >= 0) close(fd);
    if (rc) { unlink(from); return rc; }
  }
  /* a log left in the directory describes no file that is there: it must
     never be replayed over the copy (wal.h) */
  if ((rc = rg_wal_forget(path, e))) {
    unlink(from);
    return rc;
  }
  snprintf(data, sizeof(data), "%s/data.mdb", path);
  if (rename(from, data) != 0) {
    rc = errno;
    unlink(from);
    return rg_fail(e, 500, "cannot move the copy into '%s': %s", path,
                   strerror(rc));
  }
  snprintf(data, sizeof(data), "%s/.compact/lock.mdb", path);
  unlink(data);
  rmdir(tmp);
  return rg_sync_dir(path, e);     /* the name, flushed */
fail:
  if (src) mdb_txn_abort(src);
  if (dst) mdb_env_close(dst);
  unlink(from);
  snprintf(data, sizeof(data), "%s/.compact/lock.mdb", path);
  unlink(data);
  rmdir(tmp);
  return rg_kv_fail(e, rc, "compact");
}

void rg_local_walk (rg_local *l, rg_txn *t, rg_walk *w) {
  int fd;
  memset(w, 0, sizeof(*w));
  rg_assert(t->ops == &lmdb_ops);
  if (mdb_env_get_fd(l->mdb, &fd) != 0) return;
  rg_pages_walk(fd, (uint64_t)mdb_txn_id(T(t)->mdb), l->sums, w);
}

int rg_local_forget (const char *path, rg_err *e) {
  return rg_wal_forget(path, e);
}

int rg_local_flush (rg_local *l, rg_err *e) {
  int rc = mdb_env_sync(l->mdb, 1);
  return rc ? rg_kv_fail(e, rc, "flushing the data file") : 0;
}
/* }===================================================================== */
