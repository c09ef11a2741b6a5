/*
** processor.c: what processors keep in the database, and the
** transactional batch.
**
** A processor (lua/regolith/processor.lua runs its loop) reads the change
** feed of one container and hands batches of changes to a handler.  Its
** state lives in the database, so that every process running the same
** processor name on the same container shares it:
**
**   meta 'l' cid name 0x00 u16 range        -> lease record (one per range)
**   meta 'l' cid name 0x00 0xFFFF instance  -> u64 expiry (ms): an instance
**                                              that is running
**   meta 'd' cid name 0x00 u64 seq          -> dead letter (JSON text)
**
** Names hold no NUL, so the 0x00 ends the name and no processor's keys are
** a prefix of another's; ranges are below 256, so 0xFFFF marks instances.
** Deleting the container drops all of them (lua_db.c drops 'l' and 'd').
**
** The lease record (format 1), one per (processor, feed range):
**
**     u8 format | u8 mode (1 latest, 2 all_versions) | u16 0 |
**     u64 expiry, ms since the epoch (0: free) | u64 lsn | u64 sub |
**     u32 attempts | u32 failures | u64 delivered | u8 n | n bytes: owner
**
** (lsn, sub) is the checkpoint: the position (feed.c) of the first change
** not yet processed.  `owner` is the instance holding the lease (empty:
** free); `attempts` counts the failed deliveries of the batch at the
** checkpoint (0 once it moves), `failures` every handler failure on the
** range, `delivered` every change checkpointed past.  The records are
** created together, in one transaction, the first time the name is seen,
** each at the position of the processor's `start`; later opens keep them.
**
** Invariants.  Every change of a lease record happens in a write
** transaction that read it first, and LMDB runs one write transaction at a
** time across processes, so acquiring, renewing, checkpointing and
** releasing are atomic.  An instance works on a range only while it owns
** the lease and the lease has not expired: it renews its leases every
** third of lease_seconds (and with every checkpoint), a checkpoint or a
** failure is recorded only if the lease is still its own and still at the
** batch's first change (else the batch is dropped as lost), and another
** instance takes a lease only once it is free or has expired.  Instances
** share the ranges: each takes at most ceil(ranges / live instances), and
** one holding more gives the excess back, between batches.
**
** Transactional batches.  rg_scope_run holds one write transaction around
** reading the lease, reading the batch, calling the handler (whose writes
** through container methods join the scope) and moving the checkpoint, so
** the handler's writes and the checkpoint commit together or not at all.
** A handler error aborts that transaction; the failure is then counted in
** a transaction of its own, which also dead-letters the batch (and moves
** the checkpoint past it) once `max_attempts` is reached.
*/

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "regolith.h"

#define PROC_MT       "regolith.procstate"
#define LEASE_FORMAT  1
#define LEASE_FIXED   45
#define KEY_MAX       (5 + RG_MAX_NAME + 3 + RG_MAX_INSTANCE)

typedef struct lease {
  int mode;
  uint64_t expiry;             /* ms since the epoch; 0: free */
  rg_fpos pos;                 /* the checkpoint */
  uint32_t attempts, failures;
  uint64_t delivered;
  size_t ownerlen;
  char owner[RG_MAX_INSTANCE];
} lease;

/* The batch last handed out on a range: [start, end), n changes. */
typedef struct pending {
  rg_fpos start, end;
  size_t n;
} pending;

/* A processor's C side (a userdata owned by the Lua processor object). */
typedef struct pstate {
  rg_lcont *lc;                /* the source; the uservalue keeps it alive */
  char name[RG_MAX_NAME + 1];
  size_t namelen;
  char inst[RG_MAX_INSTANCE + 1];
  size_t instlen;
  int mode, nparts, max_attempts;
  size_t max_items;
  int64_t lease_ms;
  int closed;
  int nowned;
  int owned[RG_MAX_PARTITIONS];
  pending pend[RG_MAX_PARTITIONS];
} pstate;


/*
** {=====================================================================
** Clock, keys and records
** ======================================================================
*/
static int64_t now_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 'l' or 'd', cid, name, 0x00: the prefix of a processor's keys. */
static size_t proc_prefix (uint8_t *out, int tag, const pstate *p) {
  size_t k = rg_meta_key(out, tag, p->lc->c.spec->cid, p->name, p->namelen);
  out[k++] = 0;
  return k;
}

static size_t lease_key (uint8_t *out, const pstate *p, int range) {
  size_t k = proc_prefix(out, RG_MK_LEASE, p);
  rg_put_u16(out + k, (uint32_t)range);
  return k + 2;
}

static size_t inst_key (uint8_t *out, const pstate *p) {
  size_t k = proc_prefix(out, RG_MK_LEASE, p);
  out[k++] = 0xFF;
  out[k++] = 0xFF;
  memcpy(out + k, p->inst, p->instlen);
  return k + p->instlen;
}

static int lease_decode (const MDB_val *v, lease *l) {
  const uint8_t *p = (const uint8_t *)v->mv_data;
  if (v->mv_size < LEASE_FIXED || p[0] != LEASE_FORMAT) return -1;
  l->mode = p[1];
  l->expiry = rg_get_u64(p + 4);
  l->pos.lsn = rg_get_u64(p + 12);
  l->pos.sub = rg_get_u64(p + 20);
  l->attempts = rg_get_u32(p + 28);
  l->failures = rg_get_u32(p + 32);
  l->delivered = rg_get_u64(p + 36);
  l->ownerlen = p[44];
  if (l->ownerlen > RG_MAX_INSTANCE || v->mv_size != LEASE_FIXED + l->ownerlen)
    return -1;
  memcpy(l->owner, p + LEASE_FIXED, l->ownerlen);
  return 0;
}

static int lease_get (MDB_txn *txn, const pstate *p, int range, lease *l,
                      rg_err *e) {
  uint8_t key[KEY_MAX];
  MDB_val k, v;
  int rc;
  k.mv_data = key;
  k.mv_size = lease_key(key, p, range);
  rc = mdb_get(txn, p->lc->c.env->dbi[RG_DB_META], &k, &v);
  if (rc == MDB_NOTFOUND)
    return rg_fail(e, 404, "processor '%s' has no state for feed range %d "
                   "(was its container deleted?)", p->name, range + 1);
  if (rc) return rg_fail_mdb(e, rc, "processor lease");
  if (lease_decode(&v, l))
    return rg_fail(e, 500, "corrupt lease record of processor '%s'", p->name);
  return 0;
}

static int lease_put (rg_scope *s, const pstate *p, int range, const lease *l,
                      rg_err *e) {
  uint8_t key[KEY_MAX], val[LEASE_FIXED + RG_MAX_INSTANCE];
  memset(val, 0, LEASE_FIXED);
  val[0] = LEASE_FORMAT;
  val[1] = (uint8_t)l->mode;
  rg_put_u64(val + 4, l->expiry);
  rg_put_u64(val + 12, l->pos.lsn);
  rg_put_u64(val + 20, l->pos.sub);
  rg_put_u32(val + 28, l->attempts);
  rg_put_u32(val + 32, l->failures);
  rg_put_u64(val + 36, l->delivered);
  val[44] = (uint8_t)l->ownerlen;
  memcpy(val + LEASE_FIXED, l->owner, l->ownerlen);
  return rg_put(s, RG_DB_META, key, lease_key(key, p, range), val,
                LEASE_FIXED + l->ownerlen, e);
}

static int mine (const pstate *p, const lease *l) {
  return l->ownerlen == p->instlen &&
         memcmp(l->owner, p->inst, p->instlen) == 0;
}

static int same_pos (const rg_fpos *a, const rg_fpos *b) {
  return a->lsn == b->lsn && a->sub == b->sub;
}

int rg_proc_floors (MDB_txn *txn, rg_env *env, uint32_t cid, int nparts,
                    rg_fpos *floor, rg_err *e) {
  uint8_t from[5];
  MDB_cursor *cur;
  MDB_val k, v;
  int r, rc;
  for (r = 0; r < nparts; r++) floor[r].lsn = floor[r].sub = UINT64_MAX;
  if ((rc = mdb_cursor_open(txn, env->dbi[RG_DB_META], &cur)))
    return rg_fail_mdb(e, rc, "processor leases");
  k.mv_data = from;
  k.mv_size = rg_meta_key(from, RG_MK_LEASE, cid, NULL, 0);
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0 && k.mv_size > 5 && memcmp(k.mv_data, from, 5) == 0) {
    const uint8_t *key = (const uint8_t *)k.mv_data;
    const uint8_t *sep = (const uint8_t *)memchr(key + 5, 0, k.mv_size - 5);
    lease l;
    if (sep && (size_t)(sep - key) + 3 == k.mv_size &&
        !(sep[1] == 0xFF && sep[2] == 0xFF) && lease_decode(&v, &l) == 0 &&
        l.mode == RG_FEED_ALL) {
      r = (int)rg_get_u16(sep + 1);
      if (r < nparts && (l.pos.lsn < floor[r].lsn ||
                         (l.pos.lsn == floor[r].lsn &&
                          l.pos.sub < floor[r].sub)))
        floor[r] = l.pos;
    }
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return rg_fail_mdb(e, rc, "processor leases");
  return 0;
}
/* db:verify(): every lease record of the container decodes, names a feed
** range the container has, and points inside the feed (at most one past
** the last lsn).  Returns the number of problems appended to `report`. */
int rg_proc_verify (MDB_txn *txn, rg_env *env, const rg_cspec *s,
                    uint64_t last_lsn, rg_buf *report) {
  uint8_t from[5];
  MDB_cursor *cur;
  MDB_val k, v;
  int rc, bad = 0;
  if (mdb_cursor_open(txn, env->dbi[RG_DB_META], &cur)) return 0;
  k.mv_data = from;
  k.mv_size = rg_meta_key(from, RG_MK_LEASE, s->cid, NULL, 0);
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0 && k.mv_size > 5 && memcmp(k.mv_data, from, 5) == 0) {
    const uint8_t *key = (const uint8_t *)k.mv_data;
    const uint8_t *sep = (const uint8_t *)memchr(key + 5, 0, k.mv_size - 5);
    lease l;
    if (sep && (size_t)(sep - key) + 3 == k.mv_size &&
        !(sep[1] == 0xFF && sep[2] == 0xFF)) {
      int r = (int)rg_get_u16(sep + 1);
      const char *what = NULL;
      if (lease_decode(&v, &l)) what = "does not decode";
      else if (r >= s->nparts) what = "names a feed range the container lacks";
      else if (l.pos.lsn > last_lsn + 1) what = "points past the end of the feed";
      if (what) {
        bad++;
        rg_buf_addf(report, "container '%s': the lease of processor '%.*s' "
                    "on feed range %d %s\n", s->name,
                    (int)(sep - key - 5), (const char *)key + 5, r + 1, what);
      }
    }
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  return bad;
}
/* }===================================================================== */


/*
** {=====================================================================
** The handle of a processor's state
** ======================================================================
*/
static pstate *toproc (lua_State *L, int idx) {
  return (pstate *)luaL_checkudata(L, idx, PROC_MT);
}

static pstate *checkproc (lua_State *L, int idx) {
  pstate *p = toproc(L, idx);
  if (p->closed || p->lc->c.spec == NULL || p->lc->db->env == NULL)
    luaL_error(L, "attempt to use a closed processor");
  return p;
}

/* The state must not be changed from inside another write transaction:
** the lease would commit (or not) with that transaction's work. */
static void outside_scope (lua_State *L, const pstate *p) {
  if (p->lc->c.env->scope != NULL)
    luaL_error(L, "processor '%s' cannot run inside a transaction (a "
               "handler, a procedure or a trigger)", p->name);
}

static int range_arg (lua_State *L, const pstate *p, int idx) {
  lua_Integer r = luaL_checkinteger(L, idx);
  if (r < 1 || r > p->nparts)
    luaL_error(L, "feed range %d does not exist", (int)r);
  return (int)r - 1;
}

static int proc_sync (const pstate *p) { return p->lc->db->sync; }

/* _processor.new(container, name, instance, mode, max_items,
**                lease_seconds, max_attempts) -> state */
static int proc_new (lua_State *L) {
  rg_lcont *lc = rg_checkcont(L, 1);
  size_t n, m;
  const char *name = luaL_checklstring(L, 2, &n);
  const char *inst = luaL_checklstring(L, 3, &m);
  int mode = (int)luaL_checkinteger(L, 4);
  lua_Integer max_items = luaL_checkinteger(L, 5);
  lua_Number lease_s = luaL_checknumber(L, 6);
  lua_Integer attempts = luaL_checkinteger(L, 7);
  rg_err e;
  pstate *p;
  if (rg_check_id(name, n, RG_MAX_NAME, "a processor name", &e))
    return luaL_error(L, "processor: %s", e.msg);
  if (m < 1 || m > RG_MAX_INSTANCE || memchr(inst, 0, m))
    return luaL_error(L, "processor: option 'instance' must be 1 to %d bytes "
                      "without NUL", RG_MAX_INSTANCE);
  if ((mode != RG_FEED_LATEST && mode != RG_FEED_ALL) || max_items < 1 ||
      !(lease_s >= 1) || attempts < 1)
    return luaL_error(L, "processor: bad state arguments");
  p = (pstate *)rg_newuserdata(L, sizeof(pstate));
  memset(p, 0, sizeof(*p));
  luaL_getmetatable(L, PROC_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 1, 0);          /* the uservalue keeps the source alive */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  rg_setuservalue(L, -2);
  p->lc = lc;
  memcpy(p->name, name, n);
  p->namelen = n;
  memcpy(p->inst, inst, m);
  p->instlen = m;
  p->mode = mode;
  p->nparts = lc->c.spec->nparts;
  p->max_items = (size_t)max_items;
  p->lease_ms = (int64_t)(lease_s * 1000);
  p->max_attempts = attempts > 0x7FFFFFFF ? 0x7FFFFFFF : (int)attempts;
  return 1;
}

static int proc_tostring (lua_State *L) {
  pstate *p = toproc(L, 1);
  lua_pushfstring(L, "regolith.procstate (%s%s)", p->name,
                  p->closed ? ", closed" : "");
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** First sight: creating the leases at the start position
** ======================================================================
*/
typedef struct initq {
  pstate *p;
  int kind;
  double t;
} initq;

static int init_body (rg_scope *s, void *ud, rg_err *e) {
  initq *q = (initq *)ud;
  pstate *p = q->p;
  lease l;
  int r, rc;
  if ((rc = rg_cont_alive(s->txn, &p->lc->c, e))) return rc;
  for (r = 0; r < p->nparts; r++) {
    rc = lease_get(s->txn, p, r, &l, e);
    if (rc == 0) {
      if (l.mode != p->mode)
        return rg_fail(e, 409, "processor '%s' on '%s' already exists in "
                       "%s mode", p->name, p->lc->c.spec->name,
                       l.mode == RG_FEED_ALL ? "all_versions" : "latest");
      continue;
    }
    if (rc != 404) return rc;
    memset(&l, 0, sizeof(l));
    l.mode = p->mode;
    if ((rc = rg_feed_start(s->txn, &p->lc->c, p->mode, r, q->kind, q->t,
                            &l.pos, e)) ||
        (rc = lease_put(s, p, r, &l, e)))
      return rc;
  }
  return 0;
}

/* state:init(opts) -> true | nil, msg, status (opts.start is read) */
static int proc_init (lua_State *L) {
  pstate *p = checkproc(L, 1);
  initq q;
  rg_err e;
  outside_scope(L, p);
  q.p = p;
  rg_feed_opt_start(L, 2, &q.kind, &q.t, "processor");
  if (rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, init_body, &q, &e))
    return rg_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Leases: heartbeat, share, take, renew, release
** ======================================================================
*/
/* Counts the live instances (this one included), renews this one's
** heartbeat and forgets the instances whose heartbeat expired. */
static int instances (rg_scope *s, const pstate *p, int64_t now, int *live,
                      rg_err *e) {
  uint8_t key[KEY_MAX], hb[8];
  size_t plen = proc_prefix(key, RG_MK_LEASE, p) + 2, i;
  MDB_dbi dbi = s->env->dbi[RG_DB_META];
  MDB_cursor *cur;
  MDB_val k, v;
  rg_buf dead;                       /* keys to delete: u16 length, bytes */
  int rc;
  *live = 1;
  key[plen - 2] = key[plen - 1] = 0xFF;
  rg_buf_init(&dead);
  if ((rc = mdb_cursor_open(s->txn, dbi, &cur)))
    return rg_scope_mdb(s, rc, "processor instances", e);
  k.mv_data = key;
  k.mv_size = plen;
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0 && k.mv_size > plen && memcmp(k.mv_data, key, plen) == 0) {
    const char *inst = (const char *)k.mv_data + plen;
    int self = k.mv_size - plen == p->instlen &&
               memcmp(inst, p->inst, p->instlen) == 0;
    if (!self) {
      if (v.mv_size == 8 && (int64_t)rg_get_u64((const uint8_t *)v.mv_data) >
          now)
        (*live)++;
      else {
        uint8_t len[2];
        rg_put_u16(len, (uint32_t)k.mv_size);
        rg_buf_add(&dead, len, 2);
        rg_buf_add(&dead, k.mv_data, k.mv_size);
      }
    }
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) {
    rg_buf_free(&dead);
    return rg_scope_mdb(s, rc, "processor instances", e);
  }
  if (dead.oom) {
    rg_buf_free(&dead);
    return rg_fail(e, 500, "out of memory");
  }
  for (i = 0, rc = 0; rc == 0 && i < dead.n;) {
    size_t kn = rg_get_u16((const uint8_t *)dead.p + i);
    rc = rg_del(s, RG_DB_META, dead.p + i + 2, kn, NULL, e);
    i += 2 + kn;
  }
  rg_buf_free(&dead);
  if (rc) return rc;
  rg_put_u64(hb, (uint64_t)(now + p->lease_ms));
  return rg_put(s, RG_DB_META, key, inst_key(key, p), hb, 8, e);
}

static int maintain_body (rg_scope *s, void *ud, rg_err *e) {
  pstate *p = (pstate *)ud;
  int64_t now = now_ms();
  lease *ls;
  int live, share, held = 0, r, pass, rc;
  p->nowned = 0;
  if ((rc = rg_cont_alive(s->txn, &p->lc->c, e)) ||
      (rc = instances(s, p, now, &live, e)))
    return rc;
  if ((ls = (lease *)malloc(sizeof(lease) * (size_t)p->nparts)) == NULL)
    return rg_fail(e, 500, "out of memory");
  for (r = 0; r < p->nparts; r++) {
    if ((rc = lease_get(s->txn, p, r, &ls[r], e))) goto done;
    held += mine(p, &ls[r]);
  }
  share = (p->nparts + live - 1) / live;
  for (r = p->nparts - 1; r >= 0 && held > share; r--)   /* give back */
    if (mine(p, &ls[r])) {
      ls[r].ownerlen = 0;
      ls[r].expiry = 0;
      if ((rc = lease_put(s, p, r, &ls[r], e))) goto done;
      held--;
    }
  for (pass = 0; pass < 2; pass++)          /* free ones first, then expired */
    for (r = 0; r < p->nparts && held < share; r++) {
      lease *l = &ls[r];
      if (mine(p, l) || (pass == 0 ? l->ownerlen != 0 :
                         l->ownerlen == 0 || (int64_t)l->expiry > now))
        continue;
      memcpy(l->owner, p->inst, p->instlen);
      l->ownerlen = p->instlen;
      held++;
    }
  for (r = 0; r < p->nparts; r++)             /* renew what is held */
    if (mine(p, &ls[r])) {
      ls[r].expiry = (uint64_t)(now + p->lease_ms);
      if ((rc = lease_put(s, p, r, &ls[r], e))) goto done;
      p->owned[p->nowned++] = r;
    }
done:
  free(ls);
  return rc;
}

/* state:maintain() -> {range, ...} (the ranges held now) | nil, msg, st */
static int proc_maintain (lua_State *L) {
  pstate *p = checkproc(L, 1);
  rg_err e;
  int i;
  outside_scope(L, p);
  if (rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, maintain_body, p, &e)) {
    p->nowned = 0;
    return rg_push_fail(L, &e);
  }
  lua_createtable(L, p->nowned, 0);
  for (i = 0; i < p->nowned; i++) {
    lua_pushinteger(L, p->owned[i] + 1);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int release_body (rg_scope *s, void *ud, rg_err *e) {
  pstate *p = (pstate *)ud;
  uint8_t key[KEY_MAX];
  lease l;
  int r, rc;
  for (r = 0; r < p->nparts; r++) {
    rc = lease_get(s->txn, p, r, &l, e);
    if (rc == 404) continue;
    if (rc) return rc;
    if (!mine(p, &l)) continue;
    l.ownerlen = 0;
    l.expiry = 0;
    if ((rc = lease_put(s, p, r, &l, e))) return rc;
  }
  return rg_del(s, RG_DB_META, key, inst_key(key, p), NULL, e);
}

/* Removes every key of the processor (leases, instances, dead letters). */
static int forget_body (rg_scope *s, void *ud, rg_err *e) {
  pstate *p = (pstate *)ud;
  static const int tags[] = { RG_MK_LEASE, RG_MK_DEAD };
  uint8_t key[KEY_MAX];
  uint64_t n, found = 0;
  int i, rc;
  for (i = 0; i < 2; i++) {
    if ((rc = rg_del_prefix(s, RG_DB_META, key, proc_prefix(key, tags[i], p),
                            UINT64_MAX, &n, e)))
      return rc;
    if (tags[i] == RG_MK_LEASE) found = n;
  }
  if (!found)
    return rg_fail(e, 404, "processor '%s' on '%s' has no state", p->name,
                   p->lc->c.spec->name);
  return 0;
}

/* state:delete() -> true | nil, msg, status: forgets the processor (its
** checkpoints, leases and dead letters) and closes the state. */
static int proc_delete (lua_State *L) {
  pstate *p = checkproc(L, 1);
  rg_err e;
  outside_scope(L, p);
  if (rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, forget_body, p, &e))
    return rg_push_fail(L, &e);
  p->closed = 1;
  lua_pushboolean(L, 1);
  return 1;
}

/* state:close() -> true | nil, msg, status: gives the leases back (when
** the database is still open) and closes the state. */
static int proc_close (lua_State *L) {
  pstate *p = toproc(L, 1);
  rg_err e;
  int rc = 0;
  if (p->closed) { lua_pushboolean(L, 1); return 1; }
  if (p->lc->c.spec != NULL && p->lc->db->env != NULL) {
    outside_scope(L, p);
    if (!p->lc->db->readonly)
      rc = rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, release_body, p, &e);
  }
  p->closed = 1;
  if (rc) return rg_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Batches: reading, checkpoints, failures, dead letters
** ======================================================================
*/
typedef struct bbox {
  rg_batch b;
  rg_buf text;
} bbox;

static void bbox_free (void *x) {
  bbox *g = (bbox *)x;
  rg_batch_free(&g->b);
  rg_buf_free(&g->text);
}

static bbox *new_bbox (lua_State *L) {
  bbox *g = (bbox *)rg_newbox(L, sizeof(bbox), bbox_free);
  rg_batch_init(&g->b);
  rg_buf_init(&g->text);
  return g;
}

/* The info table a handler receives. */
static void push_batch_info (lua_State *L, const rg_work *w, int range,
                             uint32_t attempt) {
  rg_push_info(L, w, 200);
  lua_pushinteger(L, range + 1);
  lua_setfield(L, -2, "feed_range");
  lua_pushinteger(L, (lua_Integer)attempt);
  lua_setfield(L, -2, "attempt");
}

static void one_range (rg_feedq *f, const pstate *p, int range, rg_fpos *pos,
                       int64_t now) {
  memset(f, 0, sizeof(*f));
  f->c = &p->lc->c;
  f->mode = p->mode;
  f->first = range;
  f->n = 1;
  f->pos = pos;
  f->max = p->max_items;
  f->now = now;
}

/* Reads the lease of a range this instance must hold, valid for at least
** a third of the lease time (a read-only check: the write comes later). */
static int held_lease (MDB_txn *txn, const pstate *p, int r, lease *l,
                       rg_err *e) {
  int rc;
  if ((rc = rg_cont_alive(txn, &p->lc->c, e)) ||
      (rc = lease_get(txn, p, r, l, e)))
    return rc;
  if (!mine(p, l))
    return rg_fail(e, 409, "the lease on feed range %d is held by another "
                   "instance", r + 1);
  if ((int64_t)l->expiry < now_ms() + p->lease_ms / 3)
    return rg_fail(e, 409, "the lease on feed range %d must be renewed",
                   r + 1);
  return 0;
}

/* state:read(range) -> n, changes, info | 0 | nil, msg, status.
** For handlers outside a transaction: the batch at the checkpoint. */
static int proc_read (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int r = range_arg(L, p, 2), rc;
  rg_fpos pos;
  rg_feedq f;
  rg_err e;
  MDB_txn *txn;
  lease l;
  bbox *g;
  outside_scope(L, p);
  g = new_bbox(L);
  if ((rc = rg_read_begin(p->lc->c.env, &txn, &e))) return rg_push_fail(L, &e);
  if ((rc = held_lease(txn, p, r, &l, &e)) == 0) {
    pos = l.pos;
    one_range(&f, p, r, &pos, rg_now());
    rc = rg_feed_read(txn, &f, &g->b, &e);
  }
  rg_read_end(p->lc->c.env);
  if (rc) return rg_push_fail(L, &e);
  p->pend[r].start = l.pos;
  p->pend[r].end = pos;
  p->pend[r].n = g->b.n;
  lua_pushinteger(L, (lua_Integer)g->b.n);
  if (g->b.n == 0) { rg_box_done(g); return 1; }
  if (rg_batch_push(L, p->lc->c.spec, p->mode, &g->b, &e))
    return rg_push_fail(L, &e);
  push_batch_info(L, &g->b.work, r, l.attempts + 1);
  rg_box_done(g);
  return 3;
}

typedef struct ckq {
  pstate *p;
  int r;
  int lost;
  const char *msg;             /* fail: the error */
  size_t msglen;
  uint32_t attempts;           /* fail: the failed attempts so far */
  int dead;                    /* fail: the batch went to the dead letters */
  bbox *g;
} ckq;

/* The lease of a batch's range, if it is still this instance's and still
** at the batch's first change; else the batch is lost. */
static int batch_lease (rg_scope *s, ckq *q, lease *l, rg_err *e) {
  int rc = lease_get(s->txn, q->p, q->r, l, e);
  if (rc) return rc;
  q->lost = !mine(q->p, l) || !same_pos(&l->pos, &q->p->pend[q->r].start);
  return 0;
}

static int commit_body (rg_scope *s, void *ud, rg_err *e) {
  ckq *q = (ckq *)ud;
  pstate *p = q->p;
  lease l;
  int rc;
  if ((rc = batch_lease(s, q, &l, e)) || q->lost) return rc;
  l.pos = p->pend[q->r].end;
  l.attempts = 0;
  l.delivered += p->pend[q->r].n;
  l.expiry = (uint64_t)(now_ms() + p->lease_ms);
  if ((rc = lease_put(s, p, q->r, &l, e))) return rc;
  return p->mode == RG_FEED_ALL ? rg_feed_trim(s, &p->lc->c, 1, e) : 0;
}

static int lost_fail (lua_State *L, const ckq *q) {
  rg_err e;
  rg_fail(&e, 409, "the lease on feed range %d was lost; the batch will be "
          "delivered again", q->r + 1);
  return rg_push_fail(L, &e);
}

/* state:commit(range) -> true | nil, msg, status: moves the checkpoint
** past the batch state:read handed out. */
static int proc_commit (lua_State *L) {
  pstate *p = checkproc(L, 1);
  ckq q;
  rg_err e;
  memset(&q, 0, sizeof(q));
  q.p = p;
  q.r = range_arg(L, p, 2);
  outside_scope(L, p);
  if (rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, commit_body, &q, &e))
    return rg_push_fail(L, &e);
  if (q.lost) return lost_fail(L, &q);
  lua_pushboolean(L, 1);
  return 1;
}

/* Appends `s` as a JSON string, bytes that are not UTF-8 made '?'. */
static void json_string (rg_buf *out, const char *s, size_t n) {
  rg_buf clean;
  cJSON *node;
  size_t i = 0;
  rg_buf_init(&clean);
  while (i < n) {
    int k = s[i] ? rg_utf8_seq((const unsigned char *)s + i, n - i) : 1;
    if (k <= 0) { rg_buf_addc(&clean, '?'); i++; }
    else { rg_buf_add(&clean, s + i, (size_t)k); i += (size_t)k; }
  }
  node = rg_str_new(clean.p ? clean.p : "", clean.n);
  if (node == NULL || clean.oom) out->oom = 1;
  else rg_json_print(node, out);
  cJSON_Delete(node);
  rg_buf_free(&clean);
}

/* Stores the batch [start, end) of a range as a dead letter. */
static int dead_letter (rg_scope *s, ckq *q, const lease *l, rg_err *e) {
  pstate *p = q->p;
  uint8_t key[KEY_MAX];
  size_t plen = proc_prefix(key, RG_MK_DEAD, p);
  rg_fpos pos = p->pend[q->r].start;
  uint64_t seq = 1;
  MDB_cursor *cur;
  MDB_val k, v;
  rg_feedq f;
  int rc;
  one_range(&f, p, q->r, &pos, s->now);
  f.until = &p->pend[q->r].end;
  f.max = (size_t)-1;
  rg_batch_clear(&q->g->b);
  q->g->text.n = 0;
  if ((rc = rg_feed_read(s->txn, &f, &q->g->b, e))) return rc;
  rg_buf_addf(&q->g->text, "{\"range\":%d,\"attempts\":%lu,\"ts\":%lld,"
              "\"error\":", q->r + 1, (unsigned long)l->attempts,
              (long long)s->now);
  json_string(&q->g->text, q->msg, q->msglen);
  rg_buf_adds(&q->g->text, ",\"changes\":");
  if ((rc = rg_batch_json(p->lc->c.spec, p->mode, &q->g->b, &q->g->text, e)))
    return rc;
  rg_buf_addc(&q->g->text, '}');
  if (q->g->text.oom) return rg_fail(e, 500, "out of memory");
  /* the next sequence number: one past the last dead letter's */
  memset(key + plen, 0xFF, 8);
  if ((rc = mdb_cursor_open(s->txn, s->env->dbi[RG_DB_META], &cur)))
    return rg_scope_mdb(s, rc, "dead letters", e);
  k.mv_data = key;
  k.mv_size = plen + 8;
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  rc = mdb_cursor_get(cur, &k, &v, rc == 0 ? MDB_PREV : MDB_LAST);
  if (rc == 0 && k.mv_size == plen + 8 && memcmp(k.mv_data, key, plen) == 0)
    seq = rg_get_u64((const uint8_t *)k.mv_data + plen) + 1;
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "dead letters", e);
  rg_put_u64(key + plen, seq);
  return rg_put(s, RG_DB_META, key, plen + 8, q->g->text.p, q->g->text.n, e);
}

static int fail_body (rg_scope *s, void *ud, rg_err *e) {
  ckq *q = (ckq *)ud;
  pstate *p = q->p;
  lease l;
  int rc;
  q->dead = 0;
  if ((rc = batch_lease(s, q, &l, e)) || q->lost) return rc;
  l.attempts++;
  l.failures++;
  q->attempts = l.attempts;
  if ((int)l.attempts >= p->max_attempts) {
    if ((rc = dead_letter(s, q, &l, e))) return rc;
    l.pos = p->pend[q->r].end;
    l.attempts = 0;
    q->dead = 1;
  }
  l.expiry = (uint64_t)(now_ms() + p->lease_ms);
  if ((rc = lease_put(s, p, q->r, &l, e))) return rc;
  return q->dead && p->mode == RG_FEED_ALL ?
         rg_feed_trim(s, &p->lc->c, 1, e) : 0;
}

/* state:fail(range, message) -> attempts, dead_lettered | nil, msg, st:
** counts a failed delivery of the batch handed out last. */
static int proc_fail (lua_State *L) {
  pstate *p = checkproc(L, 1);
  ckq q;
  rg_err e;
  memset(&q, 0, sizeof(q));
  q.p = p;
  q.r = range_arg(L, p, 2);
  q.msg = luaL_checklstring(L, 3, &q.msglen);
  outside_scope(L, p);
  lua_settop(L, 3);
  q.g = new_bbox(L);
  if (rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, fail_body, &q, &e))
    return rg_push_fail(L, &e);
  if (q.lost) return lost_fail(L, &q);
  rg_box_done(q.g);
  lua_pushinteger(L, (lua_Integer)q.attempts);
  lua_pushboolean(L, q.dead);
  return 2;
}

typedef struct txq {
  pstate *p;
  lua_State *L;
  int r;
  int runner, out;             /* stack indices: the runner, its results */
  int lost, failed;
  size_t n;
  bbox *g;
} txq;

/*
** The transactional batch: inside one write transaction, the lease, the
** batch at its checkpoint, the handler (through the runner, which returns
** true, or false and the error), and the new checkpoint.  Rerunnable: it
** rereads everything (after a map growth the handler runs again, its
** first run's writes having been rolled back).
*/
static int tx_body (rg_scope *s, void *ud, rg_err *e) {
  txq *q = (txq *)ud;
  pstate *p = q->p;
  lua_State *L = q->L;
  rg_fpos pos;
  rg_feedq f;
  lease l;
  int rc;
  rg_batch_clear(&q->g->b);
  q->lost = q->failed = 0;
  q->n = 0;
  if ((rc = lease_get(s->txn, p, q->r, &l, e))) return rc;
  if (!mine(p, &l)) { q->lost = 1; return 0; }
  pos = l.pos;
  one_range(&f, p, q->r, &pos, s->now);
  if ((rc = rg_feed_read(s->txn, &f, &q->g->b, e))) return rc;
  q->n = q->g->b.n;
  p->pend[q->r].start = l.pos;
  p->pend[q->r].end = pos;
  p->pend[q->r].n = q->n;
  if (q->n == 0) {                /* only expired items: move past them */
    if (same_pos(&pos, &l.pos)) return 0;
    l.pos = pos;
    return lease_put(s, p, q->r, &l, e);
  }
  lua_pushvalue(L, q->runner);
  if ((rc = rg_batch_push(L, p->lc->c.spec, p->mode, &q->g->b, e))) return rc;
  push_batch_info(L, &q->g->b.work, q->r, l.attempts + 1);
  lua_pushvalue(L, -2);
  lua_setfield(L, q->out, "changes");
  lua_pushvalue(L, -1);
  lua_setfield(L, q->out, "info");
  lua_call(L, 2, 2);
  if (!lua_toboolean(L, -2)) {
    lua_setfield(L, q->out, "err");
    lua_pop(L, 1);
    q->failed = 1;
    return rg_fail(e, 500, "the handler failed");
  }
  lua_pop(L, 2);
  l.pos = pos;
  l.attempts = 0;
  l.delivered += q->n;
  l.expiry = (uint64_t)(now_ms() + p->lease_ms);
  if ((rc = lease_put(s, p, q->r, &l, e))) return rc;
  return p->mode == RG_FEED_ALL ? rg_feed_trim(s, &p->lc->c, 1, e) : 0;
}

/* state:run_tx(range, runner) -> n, true | n, false, err, changes, info
** | 0 | nil, msg, status */
static int proc_run_tx (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int r = range_arg(L, p, 2), rc;
  uint64_t waiting = 0;
  MDB_txn *txn;
  rg_err e;
  lease l;
  txq *q;
  luaL_checktype(L, 3, LUA_TFUNCTION);
  outside_scope(L, p);
  lua_settop(L, 3);
  /* a look first, so that an idle range costs no write transaction */
  if ((rc = rg_read_begin(p->lc->c.env, &txn, &e))) return rg_push_fail(L, &e);
  if ((rc = held_lease(txn, p, r, &l, &e)) == 0)
    rc = rg_feed_count(txn, &p->lc->c, p->mode, r, &l.pos, 1, &waiting, &e);
  rg_read_end(p->lc->c.env);
  if (rc) return rg_push_fail(L, &e);
  if (waiting == 0) { lua_pushinteger(L, 0); return 1; }
  lua_newtable(L);                                   /* 4: the results */
  q = (txq *)lua_newuserdata(L, sizeof(txq));        /* 5 */
  memset(q, 0, sizeof(*q));
  q->g = new_bbox(L);                                /* 6 */
  q->p = p;
  q->L = L;
  q->r = r;
  q->runner = 3;
  q->out = 4;
  rc = rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, tx_body, q, &e);
  rg_box_done(q->g);
  if (q->failed) {
    lua_pushinteger(L, (lua_Integer)q->n);
    lua_pushboolean(L, 0);
    lua_getfield(L, 4, "err");
    lua_getfield(L, 4, "changes");
    lua_getfield(L, 4, "info");
    return 5;
  }
  if (rc) return rg_push_fail(L, &e);
  if (q->lost) {
    ckq c;
    c.r = r;
    return lost_fail(L, &c);
  }
  lua_pushinteger(L, (lua_Integer)q->n);
  lua_pushboolean(L, 1);
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Looking at a processor: lag, status, dead letters
** ======================================================================
*/
typedef struct sbox {
  lease *ls;
  uint64_t *lag;
  rg_buf text;
} sbox;

static void sbox_free (void *x) {
  sbox *g = (sbox *)x;
  free(g->ls);
  free(g->lag);
  g->ls = NULL;
  g->lag = NULL;
  rg_buf_free(&g->text);
}

/* Reads every lease and the changes waiting after each checkpoint. */
static int snapshot (lua_State *L, pstate *p, sbox **out, rg_err *e) {
  sbox *g = (sbox *)rg_newbox(L, sizeof(sbox), sbox_free);
  MDB_txn *txn;
  int r, rc;
  *out = g;
  rg_buf_init(&g->text);
  g->ls = (lease *)malloc(sizeof(lease) * (size_t)p->nparts);
  g->lag = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)p->nparts);
  if (g->ls == NULL || g->lag == NULL) return rg_fail(e, 500, "out of memory");
  if ((rc = rg_read_begin(p->lc->c.env, &txn, e))) return rc;
  rc = rg_cont_alive(txn, &p->lc->c, e);
  for (r = 0; rc == 0 && r < p->nparts; r++)
    if ((rc = lease_get(txn, p, r, &g->ls[r], e)) == 0)
      rc = rg_feed_count(txn, &p->lc->c, p->mode, r, &g->ls[r].pos,
                         UINT64_MAX, &g->lag[r], e);
  rg_read_end(p->lc->c.env);
  return rc;
}

/* state:lag() -> total, {[range] = n} */
static int proc_lag (lua_State *L) {
  pstate *p = checkproc(L, 1);
  uint64_t total = 0;
  rg_err e;
  sbox *g;
  int r;
  if (snapshot(L, p, &g, &e)) return rg_push_fail(L, &e);
  lua_createtable(L, p->nparts, 0);
  for (r = 0; r < p->nparts; r++) {
    total += g->lag[r];
    lua_pushinteger(L, (lua_Integer)g->lag[r]);
    lua_rawseti(L, -2, r + 1);
  }
  lua_pushinteger(L, (lua_Integer)total);
  lua_insert(L, -2);
  rg_box_done(g);
  return 2;
}

/* state:ranges() -> {{range, owner, expires, continuation, lag, failures,
** attempts, delivered}, ...} */
static int proc_ranges (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int64_t now = now_ms();
  rg_err e;
  sbox *g;
  int r;
  if (snapshot(L, p, &g, &e)) return rg_push_fail(L, &e);
  lua_createtable(L, p->nparts, 0);
  for (r = 0; r < p->nparts; r++) {
    const lease *l = &g->ls[r];
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, r + 1);
    lua_setfield(L, -2, "range");
    if (l->ownerlen) {
      lua_pushlstring(L, l->owner, l->ownerlen);
      lua_setfield(L, -2, "owner");
      lua_pushnumber(L, (double)((int64_t)l->expiry - now) / 1000.0);
      lua_setfield(L, -2, "expires");
    }
    g->text.n = 0;
    rg_feed_token(p->lc->c.env, p->lc->c.spec, p->mode, r + 1, NULL, 0, 1,
                  &l->pos, &g->text);
    if (g->text.oom) return luaL_error(L, "out of memory");
    lua_pushlstring(L, g->text.p, g->text.n);
    lua_setfield(L, -2, "continuation");
    lua_pushinteger(L, (lua_Integer)g->lag[r]);
    lua_setfield(L, -2, "lag");
    lua_pushinteger(L, (lua_Integer)l->failures);
    lua_setfield(L, -2, "failures");
    lua_pushinteger(L, (lua_Integer)l->attempts);
    lua_setfield(L, -2, "attempts");
    lua_pushinteger(L, (lua_Integer)l->delivered);
    lua_setfield(L, -2, "delivered");
    lua_rawseti(L, -2, r + 1);
  }
  rg_box_done(g);
  return 1;
}

/* state:dead_letters() -> {{range, changes, error, attempts, ts}, ...} */
static int proc_dead_letters (lua_State *L) {
  pstate *p = checkproc(L, 1);
  uint8_t key[KEY_MAX];
  size_t plen = proc_prefix(key, RG_MK_DEAD, p), i;
  MDB_cursor *cur;
  MDB_txn *txn;
  MDB_val k, v;
  rg_err e;
  sbox *g = (sbox *)rg_newbox(L, sizeof(sbox), sbox_free);
  int rc, n = 0;
  rg_buf_init(&g->text);
  if ((rc = rg_read_begin(p->lc->c.env, &txn, &e))) return rg_push_fail(L, &e);
  if ((rc = mdb_cursor_open(txn, p->lc->c.env->dbi[RG_DB_META], &cur)) == 0) {
    k.mv_data = key;
    k.mv_size = plen;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size == plen + 8 &&
           memcmp(k.mv_data, key, plen) == 0) {
      uint8_t len[8];
      rg_put_u64(len, v.mv_size);    /* copied out: pushed after the read */
      rg_buf_add(&g->text, len, 8);
      rg_buf_add(&g->text, v.mv_data, v.mv_size);
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
  }
  rg_read_end(p->lc->c.env);
  if (rc && rc != MDB_NOTFOUND) {
    rg_fail_mdb(&e, rc, "dead letters");
    return rg_push_fail(L, &e);
  }
  if (g->text.oom) return luaL_error(L, "out of memory");
  lua_newtable(L);
  for (i = 0; i < g->text.n;) {
    size_t len = (size_t)rg_get_u64((const uint8_t *)g->text.p + i);
    if (rg_json_push_stored(L, g->text.p + i + 8, len, &e)) {
      rg_fail(&e, 500, "corrupt dead letter: %s", e.msg);
      return rg_push_fail(L, &e);
    }
    lua_rawseti(L, -2, ++n);
    i += 8 + len;
  }
  rg_box_done(g);
  return 1;
}

typedef struct clearq {
  pstate *p;
  int count;
} clearq;

static int clear_body (rg_scope *s, void *ud, rg_err *e) {
  clearq *q = (clearq *)ud;
  uint8_t key[KEY_MAX];
  uint64_t n;
  int rc = rg_del_prefix(s, RG_DB_META, key, proc_prefix(key, RG_MK_DEAD, q->p),
                         UINT64_MAX, &n, e);
  q->count = (int)n;
  return rc;
}

/* state:clear_dead_letters() -> count */
static int proc_clear_dead_letters (lua_State *L) {
  pstate *p = checkproc(L, 1);
  clearq q;
  rg_err e;
  outside_scope(L, p);
  q.p = p;
  if (rg_scope_run(L, p->lc->c.env, proc_sync(p), 0, clear_body, &q, &e))
    return rg_push_fail(L, &e);
  lua_pushinteger(L, q.count);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Helpers of the loop, and registration
** ======================================================================
*/
/* _processor.instance_id() -> a name unique to this process and call */
static int l_instance_id (lua_State *L) {
  static unsigned long counter = 0;
  char host[64];
  if (gethostname(host, sizeof(host)) != 0) strcpy(host, "host");
  host[sizeof(host) - 1] = '\0';
  lua_pushfstring(L, "%s:%d:%d", host, (int)getpid(), (int)++counter);
  return 1;
}

/* _processor.clock() -> milliseconds since the epoch */
static int l_clock (lua_State *L) {
  lua_pushnumber(L, (lua_Number)now_ms());
  return 1;
}

/* _processor.sleep(seconds) */
static int l_sleep (lua_State *L) {
  lua_Number s = luaL_checknumber(L, 1);
  struct timespec ts;
  if (s > 0) {
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (lua_Number)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* _processor.in_transaction(db) -> is a write scope running on it? */
static int l_in_transaction (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  lua_pushboolean(L, d->env->scope != NULL);
  return 1;
}

void rg_processor_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"init", proc_init},
    {"maintain", proc_maintain},
    {"read", proc_read},
    {"commit", proc_commit},
    {"fail", proc_fail},
    {"run_tx", proc_run_tx},
    {"lag", proc_lag},
    {"ranges", proc_ranges},
    {"dead_letters", proc_dead_letters},
    {"clear_dead_letters", proc_clear_dead_letters},
    {"close", proc_close},
    {"delete", proc_delete},
    {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"new", proc_new},
    {"instance_id", l_instance_id},
    {"clock", l_clock},
    {"sleep", l_sleep},
    {"in_transaction", l_in_transaction},
    {NULL, NULL}
  };
  luaL_newmetatable(L, PROC_MT);
  lua_pushcfunction(L, proc_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_newtable(L);                   /* the module's _processor table */
  luaL_setfuncs(L, funcs, 0);
  luaL_getmetatable(L, RG_DB_MT);    /* for processor.lua to extend */
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "db_meta");
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "db_methods");
  lua_pop(L, 1);
  lua_setfield(L, -2, "_processor");
}
/* }===================================================================== */
