/*
** scope.c: reads, write scopes and savepoints (scope.h).
**
** Scopes.  Every write runs in a scope: one write transaction of the
** backend, run by rg_scope_run around a body function.  A host whose
** bodies may raise (the Lua binding) passes a protect callback: the body
** runs protected, and when it raises the transaction is aborted (or the
** savepoint rolled back) before rg_scope_run returns RG_RAISED for the host
** to re-raise, so that an error can never leave the write transaction
** open.  While a scope runs, the environment points to it: every call
** made meanwhile in this process (a procedure's ctx, a trigger, a
** transactional processor's handler) joins it instead of beginning a
** second write transaction, which LMDB would deadlock on, and reads see
** the scope's own writes.
**
** Savepoints.  A call made inside a running scope that must be undoable on
** its own (a container method called by a transactional handler, a write
** whose trigger fails inside one) runs as a savepoint of the seam (kv.h):
** its failure rolls back its writes, and the scope's own counters (lsn,
** ordinals, seqs, the purges done) go back to what they were.
**
** Reruns.  When the backend asks for a rerun (RG_RERUN: the local map is
** full), the scope is aborted, the backend makes room, and the body runs
** again from the start, up to MAX_RERUNS times.
*/

#include <string.h>

#include "store/env_int.h"

#define MAX_RERUNS 16


/*
** {=====================================================================
** Reads
** ======================================================================
*/
int rg_read_begin (rg_env *env, rg_txn **txn, rg_err *e) {
  if (env->scope != NULL) {          /* read your own writes */
    *txn = env->scope->txn;
    return 0;
  }
  return rg_local_read(env->local, txn, e);
}

void rg_read_end (rg_env *env) {
  if (env->scope == NULL) rg_local_read_end(env->local);
}
/* }===================================================================== */


/*
** {=====================================================================
** Scopes
** ======================================================================
*/
typedef struct tramp {
  rg_body body;
  rg_scope *s;
  void *ud;
  rg_err *e;
  int status;
} tramp;

static void tramp_call (void *arg) {
  tramp *t = (tramp *)arg;
  t->status = t->body(t->s, t->ud, t->e);
}

/* Calls the body, protected when the host gave a protect callback: 0 when
** it returned (its status in t->status), RG_RAISED when it raised. */
static int call_body (rg_protect protect, void *host, tramp *t) {
  if (protect == NULL) {
    tramp_call(t);
    return 0;
  }
  return protect(host, tramp_call, t) ? RG_RAISED : 0;
}

static int run_nested (rg_protect protect, void *host, rg_env *env,
                       int savepoint, tramp *t, rg_err *e) {
  rg_scope *s = env->scope;
  size_t mark;
  uint64_t lsn = s->lsn;
  uint32_t ord = s->ord, seq = s->seq, purged[16];
  int seq_loaded = s->seq_loaded;
  int npurged = s->npurged, rc;
  if (!savepoint) {
    /* what the body raises unwinds to the outer scope's protected call */
    return t->body(s, t->ud, e);
  }
  if (s->failed) return rg_fail(e, s->failed, "the transaction has failed");
  memcpy(purged, s->purged, sizeof(purged));
  mark = rg_kv_savepoint(s->txn);
  t->s = s;
  rc = call_body(protect, host, t);
  if (rc == 0 && t->status == 0 && !s->failed && !s->rerun) {
    rg_kv_release(s->txn, mark);
    return 0;
  }
  if (s->rerun)                      /* the whole scope runs again */
    rg_kv_release(s->txn, mark);
  else {
    int urc = rg_kv_rollback(s->txn, mark);
    rg_err ue;
    if (urc) rg_scope_fail(s, urc, "savepoint rollback", &ue);
    s->lsn = lsn;                    /* lsn, ordinals, purges as before */
    s->ord = ord;
    s->seq = seq;
    s->seq_loaded = seq_loaded;
    s->npurged = npurged;
    memcpy(s->purged, purged, sizeof(purged));
  }
  if (rc) return RG_RAISED;
  return t->status ? t->status : s->failed;
}

int rg_scope_run (rg_env *env, rg_protect protect, void *host, int sync,
                  int savepoint, rg_body body, void *ud, rg_err *e) {
  rg_scope s;
  tramp t;
  int rc, rerun;
  t.body = body;
  t.ud = ud;
  t.e = e;
  t.status = 0;
  if (env->readonly)
    return rg_fail(e, 403, "the database is open read-only");
  if (env->scope != NULL)
    return run_nested(protect, host, env, savepoint, &t, e);
  for (rerun = 0; rerun < MAX_RERUNS; rerun++) {
    memset(&s, 0, sizeof(s));
    s.env = env;
    s.now = rg_now();
    if ((rc = rg_local_begin(env->local, sync, &s.txn, e))) return rc;
    rg_assert(env->scope == NULL);
    env->scope = &s;
    t.s = &s;
    t.status = 0;
    rc = call_body(protect, host, &t);
    rg_assert(env->scope == &s);
    env->scope = NULL;
    if (rc || s.rerun || t.status != 0 || s.failed) {
      rg_local_abort(env->local);
      if (rc) return RG_RAISED;
      if (!s.rerun) return t.status ? t.status : s.failed;
    }
    else {
      rc = rg_local_commit(env->local, env->deferred, e);
      if (rc != RG_RERUN) return rc;
    }
    if ((rc = rg_local_grow(env->local, e))) return rc;
  }
  return rg_fail(e, 507, "insufficient storage: the map cannot grow enough");
}
/* }===================================================================== */


/*
** {=====================================================================
** Writes
** ======================================================================
**
** Every change the core makes inside a scope goes through these, so that
** a storage failure always marks the scope (it can then only abort;
** RG_RERUN makes it run again).
*/
int rg_scope_fail (rg_scope *s, int rc, const char *what, rg_err *e) {
  rg_assert(rc != 0 && rc != RG_NOTFOUND);
  if (rc == RG_RERUN) s->rerun = 1;
  s->failed = rg_kv_fail(e, rc, what);
  return s->failed;
}

int rg_put (rg_scope *s, int db, const void *k, size_t kn, const void *v,
            size_t vn, rg_err *e) {
  s->writes++;
  int rc = rg_kv_put(s->txn, db, k, kn, v, vn, 0);
  return rc ? rg_scope_fail(s, rc, "write", e) : 0;
}

int rg_put_flags (rg_scope *s, int db, const void *k, size_t kn,
                  const void *v, size_t vn, unsigned flags, rg_err *e) {
  s->writes++;
  int rc = rg_kv_put(s->txn, db, k, kn, v, vn, flags);
  if (rc == RG_KEYEXIST) return RG_EXISTS;
  return rc ? rg_scope_fail(s, rc, "write", e) : 0;
}

int rg_dput (rg_scope *s, int db, const void *k, size_t kn, const void *v,
             size_t vn, int append, rg_err *e) {
  s->writes++;
  int rc = rg_kv_dput(s->txn, db, k, kn, v, vn,
                      append ? RG_KV_APPENDDUP : 0);
  if (rc == RG_KEYEXIST) return 0;       /* there already */
  return rc ? rg_scope_fail(s, rc, "write", e) : 0;
}

int rg_ddel (rg_scope *s, int db, const void *k, size_t kn, const void *v,
             size_t vn, int *gone, rg_err *e) {
  s->writes++;
  int rc = rg_kv_ddel(s->txn, db, k, kn, v, vn);
  if (gone) *gone = rc == 0;
  if (rc == RG_NOTFOUND) return 0;
  return rc ? rg_scope_fail(s, rc, "delete", e) : 0;
}

void *rg_reserve (rg_scope *s, int db, const void *k, size_t kn, size_t vn,
                  rg_err *e) {
  s->writes++;
  int rc;
  void *p = rg_kv_reserve(s->txn, db, k, kn, vn, &rc);
  if (p == NULL) rg_scope_fail(s, rc, "write", e);
  return p;
}

int rg_del (rg_scope *s, int db, const void *k, size_t kn, int *gone,
            rg_err *e) {
  s->writes++;
  int rc = rg_kv_del(s->txn, db, k, kn);
  if (gone) *gone = rc == 0;
  if (rc == RG_NOTFOUND) return 0;
  return rc ? rg_scope_fail(s, rc, "delete", e) : 0;
}

int rg_cursor_del (rg_scope *s, rg_cur *cur, rg_err *e) {
  s->writes++;
  int rc = rg_cur_del(cur);
  return rc ? rg_scope_fail(s, rc, "delete", e) : 0;
}

int rg_del_prefix (rg_scope *s, int db, const void *prefix, size_t pn,
                   uint64_t max, uint64_t *count, rg_err *e) {
  rg_cur *cur;
  rg_val k, v;
  int rc;
  *count = 0;
  if ((rc = rg_cur_open(s->txn, db, &cur)))
    return rg_scope_fail(s, rc, "delete", e);
  while (*count < max) {
    k.p = prefix;
    k.n = pn;
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    if (rc || k.n < pn || memcmp(k.p, prefix, pn) != 0) break;
    if ((rc = rg_cursor_del(s, cur, e))) {
      rg_cur_close(cur);
      return rc;
    }
    (*count)++;
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "delete", e);
  return 0;
}

/* Reads a counter of the meta table (0 when absent). */
static int counter (rg_scope *s, const char *key, size_t kn, size_t size,
                    const char *what, uint64_t *out, rg_err *e) {
  rg_val v;
  int rc = rg_kv_get(s->txn, RG_DB_META, key, kn, &v);
  *out = 0;
  if (rc == 0 && v.n == size)
    *out = size == 4 ? rg_get_u32((const uint8_t *)v.p)
                     : rg_get_u64((const uint8_t *)v.p);
  else if (rc != 0 && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, what, e);
  return 0;
}

uint32_t rg_scope_seq (rg_scope *s, rg_err *e) {
  uint8_t buf[4];
  if (!s->seq_loaded) {
    uint64_t last;
    if (counter(s, RG_META_SEQ, sizeof(RG_META_SEQ) - 1, 4, "seq", &last, e))
      return 0;
    s->seq = (uint32_t)last;
    s->seq_loaded = 1;
  }
  if (++s->seq == 0) s->seq = 1;     /* wrapped: 0 names no item */
  rg_put_u32(buf, s->seq);
  if (rg_put(s, RG_DB_META, RG_META_SEQ, sizeof(RG_META_SEQ) - 1, buf, 4, e))
    return 0;
  return s->seq;
}

uint64_t rg_scope_lsn (rg_scope *s, rg_err *e) {
  if (s->lsn == 0) {
    uint8_t buf[8];
    uint64_t last;
    if (counter(s, RG_META_LSN, sizeof(RG_META_LSN) - 1, 8, "lsn", &last, e))
      return 0;
    rg_put_u64(buf, last + 1);
    if (rg_put(s, RG_DB_META, RG_META_LSN, sizeof(RG_META_LSN) - 1, buf, 8, e))
      return 0;
    s->lsn = last + 1;
  }
  return s->lsn;
}
/* }===================================================================== */
