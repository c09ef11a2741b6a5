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
#include "store/remote.h"

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
  if (env->remote) return rg_remote_read(env->remote, txn, e);
  return rg_local_read(env->local, txn, e);
}

void rg_read_end (rg_env *env) {
  if (env->scope != NULL) return;
  if (env->remote) rg_remote_read_end(env->remote);
  else rg_local_read_end(env->local);
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

void rg_scope_mark (rg_scope *s, rg_mark *m) {
  m->sp = rg_kv_savepoint(s->txn);
  m->lsn = s->lsn;
  m->ord = s->ord;
  m->seq = s->seq;
  m->seq_end = s->seq_end;
  m->npurged = s->npurged;
  memcpy(m->purged, s->purged, sizeof(m->purged));
}

void rg_scope_back (rg_scope *s, const rg_mark *m) {
  int rc = rg_kv_rollback(s->txn, m->sp);
  rg_err ue;
  if (rc) rg_scope_fail(s, rc, "savepoint rollback", &ue);
  s->lsn = m->lsn;                   /* lsn, ordinals, purges as before */
  s->ord = m->ord;
  s->seq = m->seq;
  s->seq_end = m->seq_end;
  s->npurged = m->npurged;
  memcpy(s->purged, m->purged, sizeof(s->purged));
  s->backs++;                        /* the path ids made since: unknown */
}

void rg_scope_keep (rg_scope *s, const rg_mark *m) {
  rg_kv_release(s->txn, m->sp);
}

static int run_nested (rg_protect protect, void *host, rg_env *env,
                       int savepoint, tramp *t, rg_err *e) {
  rg_scope *s = env->scope;
  rg_mark m;
  int rc;
  if (!savepoint) {
    /* what the body raises unwinds to the outer scope's protected call */
    return t->body(s, t->ud, e);
  }
  if (s->failed) return rg_fail(e, s->failed, "the transaction has failed");
  rg_scope_mark(s, &m);
  t->s = s;
  rc = call_body(protect, host, t);
  if (s->rerun ||                    /* the whole scope runs again */
      (rc == 0 && t->status == 0 && !s->failed))
    rg_scope_keep(s, &m);
  else rg_scope_back(s, &m);
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
  if (env->remote) {                 /* the host runs it again, if need be */
    /* a deferred commit is the queue's leader's, and a remote database
    ** has no queue (queue.c): its commit is whole when it returns */
    rg_assert(!env->deferred);
    memset(&s, 0, sizeof(s));
    s.env = env;
    s.now = rg_now();
    s.serial = ++env->scopes;
    if ((rc = rg_remote_begin(env->remote, &s.txn, e))) return rc;
    env->scope = &s;
    t.s = &s;
    rc = call_body(protect, host, &t);
    env->scope = NULL;
    if (rc || t.status != 0 || s.failed) {
      rg_remote_abort(env->remote);
      if (rc) return RG_RAISED;
      return t.status ? t.status : s.failed;
    }
    return rg_remote_commit(env->remote, e);
  }
  for (rerun = 0; rerun < MAX_RERUNS; rerun++) {
    memset(&s, 0, sizeof(s));
    s.env = env;
    s.now = rg_now();
    s.serial = ++env->scopes;
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
  rg_val v;
  int rc;
  s->writes++;
  /* Whether it was there is an answer the caller acts on: read it first.
  ** Behind the remote seam a delete alone is blind (it cannot tell); the
  ** read fetches the key and makes its value a condition of the write. */
  if (gone && (rc = rg_kv_get(s->txn, db, k, kn, &v)) && rc != RG_NOTFOUND)
    return rg_scope_fail(s, rc, "delete", e);
  rc = rg_kv_del(s->txn, db, k, kn);
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

uint32_t rg_scope_seq (rg_scope *s, uint32_t ahead, rg_err *e) {
  if (s->seq == s->seq_end) {
    uint32_t first;
    int rc;
    if (ahead == 0) ahead = 1;
    if ((rc = rg_kv_seqs(s->txn, ahead, &first))) {
      rg_scope_fail(s, rc, "seq", e);
      return 0;
    }
    s->seq = first;
    s->seq_end = first + ahead;     /* (0 after the last u32: never met) */
  }
  rg_assert(s->seq != 0);
  return s->seq++;
}

uint64_t rg_scope_lsn (rg_scope *s, const void *k, size_t kn, rg_err *e) {
  uint64_t lsn;
  int rc = rg_kv_lsn(s->txn, k, kn, &lsn);
  if (rc) {
    rg_scope_fail(s, rc, "lsn", e);
    return 0;
  }
  rg_assert(lsn != 0);
  s->writes++;
  return s->lsn = lsn;
}

int rg_scope_add (rg_scope *s, int db, const void *k, size_t kn,
                  int64_t items, int64_t bytes, uint64_t bound,
                  unsigned flags, rg_err *e) {
  int rc;
  s->writes++;
  rc = rg_kv_add(s->txn, db, k, kn, items, bytes, bound, flags);
  return rc ? rg_scope_fail(s, rc, "stats", e) : 0;
}
/* }===================================================================== */
