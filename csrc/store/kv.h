/*
** kv.h: the seam between the store's rules and its storage.
**
** Every file of store/ reaches the database's tables through this
** interface and nothing else: point reads, writes and deletes, ordered
** cursors, transactions and savepoints, at the level of the tables that
** layout.c declares and whose keys it builds.  Behind it is one
** implementation per backend: local.c keeps the tables in LMDB (it and
** wal.c are the only files that call liblmdb, which `make layers`
** checks).  So the rules of a write, the upkeep of its indexes and feed,
** and the sources of a query are written once, above the seam, for
** whatever keeps the bytes.
**
** The model.  A table is an ordered map from keys to values, both byte
** strings; keys compare as bytes (memcmp, a prefix before its
** extensions), at most RG_MAX_KEY bytes.  A table declared with a
** duplicate size (rg_tables, layout.c) holds under each key a set of
** values of exactly that size, in byte order ("sorted duplicates": the
** index and latest tables); its cursors step through (key, value) pairs,
** key by key, values in order.
**
** Invariants every implementation keeps, and every caller relies on:
**   - A transaction sees the state of one commit plus its own writes; a
**     write transaction's writes become visible to others all at once,
**     at its commit, or never.
**   - A value (or key) given by a read is valid until the next write in
**     its transaction or the transaction's end, whichever comes first:
**     copy it to keep it.
**   - Writes happen only in a write transaction.  A write that fails
**     leaves the transaction unusable except to abort it (the scope
**     marks it failed, scope.h); RG_RERUN is the one failure that asks
**     for the whole transaction to be run again once the backend has
**     done what it needs (LMDB: a larger map).
**   - A savepoint's rollback undoes exactly the writes made since it,
**     in the tables and in what cursors will read; savepoints nest.
**   - Return codes: 0; RG_NOTFOUND (no such key, duplicate or position);
**     RG_KEYEXIST (a put that must not overwrite found the key);
**     RG_RERUN; RG_CORRUPT (what the backend read does not decode, or a
**     caller found so); anything else is a storage failure, turned into a
**     status and a message by rg_kv_fail.
**
** Declaring a table: a name in the enum of layout.h (before RG_NDB), a
** row in rg_tables (layout.c: its name in the database and its duplicate
** size, 0 for one value per key; `late` when databases of the format
** already exist), and its key format in layout.c's essay.  A database
** opened for writing gets the tables it lacks; one opened read-only reads
** a late table it lacks as empty (and refuses to open without any other).
*/

#ifndef rg_kv_h
#define rg_kv_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"

/* A key or value as a read gives it (see the validity rule above). */
typedef struct rg_val {
  const void *p;
  size_t n;
} rg_val;

/* A table's declaration (rg_tables[RG_NDB], layout.c). */
typedef struct rg_table {
  const char *name;          /* its name in the database */
  unsigned dupsize;          /* sorted duplicates of this size; 0: none */
  int late;                  /* added after databases of this format were
                                made: one opened read-only without it reads
                                it as empty */
} rg_table;
extern const struct rg_table rg_tables[];

/* Return codes beside 0 (their values are LMDB's own, so that the local
** backend passes them through as they come). */
#define RG_KEYEXIST (-30799)
#define RG_NOTFOUND (-30798)
#define RG_CORRUPT  (-30796)      /* a record that does not decode */
#define RG_RERUN    (-30792)
#define RG_NOPLACE  (-30900)      /* a key whose place a backend cannot tell */

/* Put flags: RG_KV_APPEND, the key is likely past the table's last one;
** RG_KV_APPENDDUP, the duplicate is likely past its key's last one (both
** are hints: tried at the end first); RG_KV_NOOVERWRITE, RG_KEYEXIST
** when the key is there. */
enum { RG_KV_APPEND = 1, RG_KV_NOOVERWRITE = 2, RG_KV_APPENDDUP = 4 };

/* Cursor moves (rg_cur_get).  k and v are filled with the entry the
** cursor lands on; the moves marked "k in" read the key (and value) to
** find from them first. */
enum {
  RG_FIRST, RG_LAST, RG_NEXT,
  RG_PREV,          /* the entry before; after an RG_SEEK that found none,
                       the last (LMDB's cursor past the end) */
  RG_SEEK,          /* k in: the first entry whose key is >= k */
  RG_SET,           /* k in: the first entry of exactly key k */
  RG_CURRENT,       /* where the cursor is */
  RG_NEXT_NODUP,    /* the first entry of the next key */
  RG_PREV_NODUP,    /* the last entry of the previous key */
  RG_NEXT_DUP,      /* the next value of the same key (RG_NOTFOUND past) */
  RG_LAST_DUP,      /* the last value of the current key */
  RG_BOTH,          /* k, v in: exactly that key and duplicate */
  RG_BOTH_RANGE,    /* k, v in: that key, its first duplicate >= v */
  RG_SEEK_FLAT      /* k in (tables of sorted duplicates): the first entry
                       whose key | duplicate bytes are >= k's bytes, which
                       may run on past a key into its duplicates (a backend
                       keeping the pairs flat answers it in one step) */
};

typedef struct rg_txn rg_txn;
typedef struct rg_cur rg_cur;

/* What a backend implements (one static table per backend). */
typedef struct rg_kv_ops {
  int (*get) (rg_txn *t, int tb, const void *k, size_t kn, rg_val *v);
  int (*put) (rg_txn *t, int tb, const void *k, size_t kn, const void *v,
              size_t vn, unsigned flags);
  void *(*reserve) (rg_txn *t, int tb, const void *k, size_t kn, size_t vn,
                    int *rc);
  int (*del) (rg_txn *t, int tb, const void *k, size_t kn);
  int (*dput) (rg_txn *t, int tb, const void *k, size_t kn, const void *d,
               size_t dn, unsigned flags);
  int (*ddel) (rg_txn *t, int tb, const void *k, size_t kn, const void *d,
               size_t dn);
  int (*cur_open) (rg_txn *t, int tb, rg_cur **c);
  void (*cur_close) (rg_cur *c);
  int (*cur_get) (rg_cur *c, rg_val *k, rg_val *v, int op);
  int (*cur_count) (rg_cur *c, size_t *n);
  int (*cur_put) (rg_cur *c, const void *k, size_t kn, const void *v,
                  size_t vn, unsigned flags);
  int (*cur_del) (rg_cur *c);
  size_t (*savepoint) (rg_txn *t);
  int (*rollback) (rg_txn *t, size_t mark);
  void (*release) (rg_txn *t, size_t mark);
  int (*lsn) (rg_txn *t, const void *k, size_t kn, uint64_t *lsn);
  int (*seqs) (rg_txn *t, uint32_t n, uint32_t *first);
  int (*add) (rg_txn *t, int tb, const void *k, size_t kn, int64_t items,
              int64_t bytes, uint64_t bound, unsigned flags);
  int (*last) (rg_txn *t, uint32_t cid, int range, uint64_t *lsn);
  uint64_t (*pending) (rg_txn *t);
  void (*cur_bound) (rg_cur *c, const void *prefix, size_t n);
  void (*cur_route) (rg_cur *c, uint64_t hash, uint64_t mask);
} rg_kv_ops;

/* A transaction and a cursor begin with their backend's table: the
** functions below dispatch through it. */
struct rg_txn { const rg_kv_ops *ops; };
struct rg_cur { const rg_kv_ops *ops; };

/* Reads key k of table tb: 0 and *v, or RG_NOTFOUND.  On a table of
** sorted duplicates, the key's first value. */
static inline int rg_kv_get (rg_txn *t, int tb, const void *k, size_t kn,
                             rg_val *v) {
  return t->ops->get(t, tb, k, kn, v);
}
/* Writes a value (flags RG_KV_*). */
static inline int rg_kv_put (rg_txn *t, int tb, const void *k, size_t kn,
                             const void *v, size_t vn, unsigned flags) {
  return t->ops->put(t, tb, k, kn, v, vn, flags);
}
/* Makes room for a value of vn bytes and returns where to write it
** (before the next call on the transaction); NULL and *rc on failure. */
static inline void *rg_kv_reserve (rg_txn *t, int tb, const void *k,
                                   size_t kn, size_t vn, int *rc) {
  return t->ops->reserve(t, tb, k, kn, vn, rc);
}
/* Deletes a key (and all its duplicates): 0 or RG_NOTFOUND. */
static inline int rg_kv_del (rg_txn *t, int tb, const void *k, size_t kn) {
  return t->ops->del(t, tb, k, kn);
}
/* Tables of sorted duplicates: adds one (0; RG_KEYEXIST when it was
** there, which changes nothing), or removes one (0 or RG_NOTFOUND). */
static inline int rg_kv_dput (rg_txn *t, int tb, const void *k, size_t kn,
                              const void *d, size_t dn, unsigned flags) {
  return t->ops->dput(t, tb, k, kn, d, dn, flags);
}
static inline int rg_kv_ddel (rg_txn *t, int tb, const void *k, size_t kn,
                              const void *d, size_t dn) {
  return t->ops->ddel(t, tb, k, kn, d, dn);
}

/* Cursors: opened on one table of a transaction, closed before it ends. */
static inline int rg_cur_open (rg_txn *t, int tb, rg_cur **c) {
  return t->ops->cur_open(t, tb, c);
}
static inline void rg_cur_close (rg_cur *c) {
  if (c) c->ops->cur_close(c);
}
/* Moves (RG_FIRST ...): 0 and the entry in k, v; RG_NOTFOUND when there
** is none (the cursor's place is then unspecified until a move that sets
** it: FIRST, LAST, SEEK, SET, BOTH, BOTH_RANGE). */
static inline int rg_cur_get (rg_cur *c, rg_val *k, rg_val *v, int op) {
  return c->ops->cur_get(c, k, v, op);
}
/* The cursor's caller reads no entry that does not start with `prefix`
** (n bytes; 0, the default: no bound): a backend that fetches what it
** reads need not fetch past it.  The moves answer as before: an entry
** past the bound may come back (the caller stops on it), or none. */
static inline void rg_cur_bound (rg_cur *c, const void *prefix, size_t n) {
  c->ops->cur_bound(c, prefix, n);
}
/* The cursor's caller reads no entry but those of items whose partition
** hash h has (h & mask) == (hash & mask) (mask 0, the default: every
** item's): a backend that places an item's entries by its partition hash
** need not ask the places that hold none of those.  The moves answer as
** before, or leave out entries of other partitions (the caller skips
** them all the same). */
static inline void rg_cur_route (rg_cur *c, uint64_t hash, uint64_t mask) {
  c->ops->cur_route(c, hash, mask);
}
/* The number of duplicates of the key under the cursor. */
static inline int rg_cur_count (rg_cur *c, size_t *n) {
  return c->ops->cur_count(c, n);
}
/* Writes through a cursor, which is then on what it wrote: a value (a
** plain table), or one duplicate (RG_KEYEXIST when it was there).  Where
** keys come in order (a bulk load), RG_KV_APPEND and RG_KV_APPENDDUP make
** this the cheapest write. */
static inline int rg_cur_put (rg_cur *c, const void *k, size_t kn,
                              const void *v, size_t vn, unsigned flags) {
  return c->ops->cur_put(c, k, kn, v, vn, flags);
}
/* Deletes the entry under the cursor (one duplicate, in such tables);
** the next RG_NEXT gives the entry after it. */
static inline int rg_cur_del (rg_cur *c) {
  return c->ops->cur_del(c);
}

/* Savepoints: a mark to roll back to, or release (keeping the writes).
** Marks are released or rolled back innermost first. */
static inline size_t rg_kv_savepoint (rg_txn *t) {
  return t->ops->savepoint(t);
}
static inline int rg_kv_rollback (rg_txn *t, size_t mark) {
  return t->ops->rollback(t, mark);
}
static inline void rg_kv_release (rg_txn *t, size_t mark) {
  t->ops->release(t, mark);
}

/*
** What a backend hands out.  The lsn of the transaction's changes to the
** partition of item key k (NULL: not an item's): every call of one
** transaction in one place gets the same, the first takes it (locally one
** per transaction, from the "\1lsn" counter; a backend that cannot know it
** before the commit gives a stand-in it replaces then).  n new item seqs,
** first .. first + n - 1 (never 0; the counter may wrap, a seq in use is
** the caller's to skip).
*/
static inline int rg_kv_lsn (rg_txn *t, const void *k, size_t kn,
                             uint64_t *lsn) {
  return t->ops->lsn(t, k, kn, lsn);
}
static inline int rg_kv_seqs (rg_txn *t, uint32_t n, uint32_t *first) {
  return t->ops->seqs(t, n, first);
}
/* The last lsn given to a change of feed range `range` of container cid
** (cid 0: of the database); 0 when none.  Locally the database has one
** counter; a backend may keep one per range. */
static inline int rg_kv_last (rg_txn *t, uint32_t cid, int range,
                              uint64_t *lsn) {
  return t->ops->last(t, cid, range, lsn);
}
/* Counters: adds to the pair (u64 items, u64 bytes) stored under a key
** (absent: 0, 0); with RG_KV_DROP0 the key goes when items reaches 0.
** `bound` (0: none) is the most a growth may take the bytes to: the caller
** checked it against what it read, and a backend whose reads are not
** those of the commit checks it again there.  Adding never conflicts with another
** writer's adding (a backend may apply it as a delta). */
enum { RG_KV_DROP0 = 1 };
static inline int rg_kv_add (rg_txn *t, int tb, const void *k, size_t kn,
                             int64_t items, int64_t bytes, uint64_t bound,
                             unsigned flags) {
  return t->ops->add(t, tb, k, kn, items, bytes, bound, flags);
}
/* The memory a write transaction's writes hold until its commit, bytes
** (the backend's estimate; a savepoint's rollback takes nothing back):
** what bounds a script's transaction (RG_MAX_TXN_DIRTY, base/limits.h). */
static inline uint64_t rg_kv_pending (rg_txn *t) {
  return t->ops->pending(t);
}

/* A failure code as a status and a message about `what` (500, or 507 for
** a full disk). */
int rg_kv_fail (rg_err *e, int rc, const char *what);

#endif
