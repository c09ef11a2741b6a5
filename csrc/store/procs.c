/*
** procs.c: processors' operations on their state (lease.h's records).
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

#include "base/json.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/procs.h"

int64_t rg_now_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int same_pos (const rg_fpos *a, const rg_fpos *b) {
  return a->lsn == b->lsn && a->sub == b->sub;
}

/* Runs one of this file's bodies (which never raise) in a scope of its own. */
static int run (rg_proc *p, rg_body body, void *ud, rg_err *e) {
  return rg_scope_run(p->id.c->env, NULL, NULL, p->sync, 0, body, ud, e);
}


/*
** {=====================================================================
** First sight: creating the leases at the start position
** ======================================================================
*/
typedef struct initq {
  rg_proc *p;
  int kind;
  double t;
} initq;

static int init_body (rg_scope *s, void *ud, rg_err *e) {
  initq *q = (initq *)ud;
  rg_proc *p = q->p;
  rg_lease l;
  int r, rc;
  if ((rc = rg_cont_alive(s->txn, p->id.c, e))) return rc;
  for (r = 0; r < p->nparts; r++) {
    rc = rg_lease_get(s->txn, &p->id, r, &l, e);
    if (rc == 0) {
      if (l.mode != p->mode)
        return rg_fail(e, 409, "processor '%.*s' on '%s' already exists in "
                       "%s mode", (int)p->id.namelen, p->id.name,
                       p->id.c->spec->name,
                       l.mode == RG_FEED_ALL ? "all_versions" : "latest");
      continue;
    }
    if (rc != 404) return rc;
    memset(&l, 0, sizeof(l));
    l.mode = p->mode;
    if ((rc = rg_feed_start(s->txn, p->id.c, p->mode, r, q->kind, q->t,
                            &l.pos, e)) ||
        (rc = rg_lease_put(s, &p->id, r, &l, e)))
      return rc;
  }
  return 0;
}

int rg_proc_init (rg_proc *p, int kind, double t, rg_err *e) {
  initq q;
  q.p = p;
  q.kind = kind;
  q.t = t;
  return run(p, init_body, &q, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Leases: heartbeat, share, take, renew, release
** ======================================================================
*/
/* Counts the live instances (this one included), renews this one's
** heartbeat and forgets the instances whose heartbeat expired. */
static int instances (rg_scope *s, const rg_proc *p, int64_t now, int *live,
                      rg_err *e) {
  uint8_t key[RG_LEASE_KEY_MAX], hb[8];
  size_t plen = rg_lease_prefix(key, RG_MK_LEASE, &p->id) + 2, i;
  rg_cur *cur;
  rg_val k, v;
  rg_buf dead;                       /* keys to delete: u16 length, bytes */
  int rc;
  *live = 1;
  key[plen - 2] = key[plen - 1] = 0xFF;
  rg_buf_init(&dead);
  if ((rc = rg_cur_open(s->txn, RG_DB_META, &cur)))
    return rg_scope_fail(s, rc, "processor instances", e);
  k.p = key;
  k.n = plen;
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n > plen && memcmp(k.p, key, plen) == 0) {
    const char *inst = (const char *)k.p + plen;
    int self = k.n - plen == p->id.instlen &&
               memcmp(inst, p->id.inst, p->id.instlen) == 0;
    if (!self) {
      if (v.n == 8 && (int64_t)rg_get_u64((const uint8_t *)v.p) >
          now)
        (*live)++;
      else {
        uint8_t len[2];
        rg_put_u16(len, (uint32_t)k.n);
        rg_buf_add(&dead, len, 2);
        rg_buf_add(&dead, k.p, k.n);
      }
    }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND) {
    rg_buf_free(&dead);
    return rg_scope_fail(s, rc, "processor instances", e);
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
  return rg_put(s, RG_DB_META, key, rg_lease_inst_key(key, &p->id), hb, 8, e);
}

static int maintain_body (rg_scope *s, void *ud, rg_err *e) {
  rg_proc *p = (rg_proc *)ud;
  int64_t now = rg_now_ms();
  rg_lease *ls;
  int live, share, held = 0, r, pass, rc;
  p->nowned = 0;
  if ((rc = rg_cont_alive(s->txn, p->id.c, e)) ||
      (rc = instances(s, p, now, &live, e)))
    return rc;
  if ((ls = (rg_lease *)malloc(sizeof(rg_lease) * (size_t)p->nparts)) == NULL)
    return rg_fail(e, 500, "out of memory");
  for (r = 0; r < p->nparts; r++) {
    if ((rc = rg_lease_get(s->txn, &p->id, r, &ls[r], e))) goto done;
    held += rg_lease_mine(&p->id, &ls[r]);
  }
  share = (p->nparts + live - 1) / live;
  for (r = p->nparts - 1; r >= 0 && held > share; r--)   /* give back */
    if (rg_lease_mine(&p->id, &ls[r])) {
      ls[r].ownerlen = 0;
      ls[r].expiry = 0;
      if ((rc = rg_lease_put(s, &p->id, r, &ls[r], e))) goto done;
      held--;
    }
  for (pass = 0; pass < 2; pass++)          /* free ones first, then expired */
    for (r = 0; r < p->nparts && held < share; r++) {
      rg_lease *l = &ls[r];
      if (rg_lease_mine(&p->id, l) ||
          (pass == 0 ? l->ownerlen != 0 :
           l->ownerlen == 0 || (int64_t)l->expiry > now))
        continue;
      memcpy(l->owner, p->id.inst, p->id.instlen);
      l->ownerlen = p->id.instlen;
      held++;
    }
  for (r = 0; r < p->nparts; r++)             /* renew what is held */
    if (rg_lease_mine(&p->id, &ls[r])) {
      ls[r].expiry = (uint64_t)(now + p->lease_ms);
      if ((rc = rg_lease_put(s, &p->id, r, &ls[r], e))) goto done;
      p->owned[p->nowned++] = r;
    }
done:
  free(ls);
  return rc;
}

int rg_proc_maintain (rg_proc *p, rg_err *e) {
  int rc = run(p, maintain_body, p, e);
  if (rc) p->nowned = 0;
  return rc;
}

static int release_body (rg_scope *s, void *ud, rg_err *e) {
  rg_proc *p = (rg_proc *)ud;
  uint8_t key[RG_LEASE_KEY_MAX];
  rg_lease l;
  int r, rc;
  for (r = 0; r < p->nparts; r++) {
    rc = rg_lease_get(s->txn, &p->id, r, &l, e);
    if (rc == 404) continue;
    if (rc) return rc;
    if (!rg_lease_mine(&p->id, &l)) continue;
    l.ownerlen = 0;
    l.expiry = 0;
    if ((rc = rg_lease_put(s, &p->id, r, &l, e))) return rc;
  }
  return rg_del(s, RG_DB_META, key, rg_lease_inst_key(key, &p->id), NULL, e);
}

int rg_proc_release (rg_proc *p, rg_err *e) {
  return run(p, release_body, p, e);
}

/* Removes every key of the processor (leases, instances, dead letters). */
static int forget_body (rg_scope *s, void *ud, rg_err *e) {
  rg_proc *p = (rg_proc *)ud;
  static const int tags[] = { RG_MK_LEASE, RG_MK_DEAD };
  uint8_t key[RG_LEASE_KEY_MAX];
  uint64_t n, found = 0;
  int i, rc;
  for (i = 0; i < 2; i++) {
    if ((rc = rg_del_prefix(s, RG_DB_META, key,
                            rg_lease_prefix(key, tags[i], &p->id),
                            UINT64_MAX, &n, e)))
      return rc;
    if (tags[i] == RG_MK_LEASE) found = n;
  }
  if (!found)
    return rg_fail(e, 404, "processor '%.*s' on '%s' has no state",
                   (int)p->id.namelen, p->id.name, p->id.c->spec->name);
  return 0;
}

int rg_proc_forget (rg_proc *p, rg_err *e) {
  return run(p, forget_body, p, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Batches: reading, checkpoints, failures, dead letters
** ======================================================================
*/
static void one_range (rg_feedq *f, const rg_proc *p, int range,
                       rg_fpos *pos, int64_t now) {
  memset(f, 0, sizeof(*f));
  f->c = p->id.c;
  f->mode = p->mode;
  f->first = range;
  f->n = 1;
  f->pos = pos;
  f->max = p->max_items;
  f->now = now;
}

/* Reads the lease of a range this instance must hold, valid for at least
** a third of the lease time (a read-only check: the write comes later). */
static int held_lease (rg_txn *txn, const rg_proc *p, int r, rg_lease *l,
                       rg_err *e) {
  int rc;
  if ((rc = rg_cont_alive(txn, p->id.c, e)) ||
      (rc = rg_lease_get(txn, &p->id, r, l, e)))
    return rc;
  if (!rg_lease_mine(&p->id, l))
    return rg_fail(e, 409, "the lease on feed range %d is held by another "
                   "instance", r + 1);
  if ((int64_t)l->expiry < rg_now_ms() + p->lease_ms / 3)
    return rg_fail(e, 409, "the lease on feed range %d must be renewed",
                   r + 1);
  return 0;
}

int rg_proc_read (rg_proc *p, int r, rg_batch *b, uint32_t *attempt,
                  rg_err *e) {
  rg_env *env = p->id.c->env;
  rg_fpos pos;
  rg_feedq f;
  rg_txn *txn;
  rg_lease l;
  int rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  if ((rc = held_lease(txn, p, r, &l, e)) == 0) {
    pos = l.pos;
    one_range(&f, p, r, &pos, rg_now());
    rc = rg_feed_read(txn, &f, b, e);
  }
  rg_read_end(env);
  if (rc) return rc;
  p->pend[r].start = l.pos;
  p->pend[r].end = pos;
  p->pend[r].n = b->n;
  *attempt = l.attempts + 1;
  return 0;
}

typedef struct ckq {
  rg_proc *p;
  int r;
  int lost;
  const char *msg;             /* fail: the error */
  size_t msglen;
  uint32_t attempts;           /* fail: the failed attempts so far */
  int dead;                    /* fail: the batch went to the dead letters */
  rg_batch b;                  /* fail: the dead letter's changes */
  rg_buf text;                 /* fail: the dead letter */
} ckq;

/* The lease of a batch's range, if it is still this instance's and still
** at the batch's first change; else the batch is lost. */
static int batch_lease (rg_scope *s, ckq *q, rg_lease *l, rg_err *e) {
  int rc = rg_lease_get(s->txn, &q->p->id, q->r, l, e);
  if (rc) return rc;
  q->lost = !rg_lease_mine(&q->p->id, l) ||
            !same_pos(&l->pos, &q->p->pend[q->r].start);
  return 0;
}

static int commit_body (rg_scope *s, void *ud, rg_err *e) {
  ckq *q = (ckq *)ud;
  rg_proc *p = q->p;
  rg_lease l;
  int rc;
  if ((rc = batch_lease(s, q, &l, e)) || q->lost) return rc;
  l.pos = p->pend[q->r].end;
  l.attempts = 0;
  l.delivered += p->pend[q->r].n;
  l.expiry = (uint64_t)(rg_now_ms() + p->lease_ms);
  if ((rc = rg_lease_put(s, &p->id, q->r, &l, e))) return rc;
  return p->mode == RG_FEED_ALL ? rg_feed_trim(s, p->id.c, 1, e) : 0;
}

int rg_proc_commit (rg_proc *p, int r, int *lost, rg_err *e) {
  ckq q;
  int rc;
  memset(&q, 0, sizeof(q));
  q.p = p;
  q.r = r;
  rc = run(p, commit_body, &q, e);
  *lost = q.lost;
  return rc;
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
static int dead_letter (rg_scope *s, ckq *q, const rg_lease *l, rg_err *e) {
  rg_proc *p = q->p;
  uint8_t key[RG_LEASE_KEY_MAX];
  size_t plen = rg_lease_prefix(key, RG_MK_DEAD, &p->id);
  rg_fpos pos = p->pend[q->r].start;
  uint64_t seq = 1;
  rg_cur *cur;
  rg_val k, v;
  rg_feedq f;
  int rc;
  one_range(&f, p, q->r, &pos, s->now);
  f.until = &p->pend[q->r].end;
  f.max = (size_t)-1;
  rg_batch_clear(&q->b);
  q->text.n = 0;
  if ((rc = rg_feed_read(s->txn, &f, &q->b, e))) return rc;
  rg_buf_addf(&q->text, "{\"range\":%d,\"attempts\":%lu,\"ts\":%lld,"
              "\"error\":", q->r + 1, (unsigned long)l->attempts,
              (long long)s->now);
  json_string(&q->text, q->msg, q->msglen);
  rg_buf_adds(&q->text, ",\"changes\":");
  if ((rc = rg_batch_json(p->id.c->spec, p->mode, &q->b, &q->text, e)))
    return rc;
  rg_buf_addc(&q->text, '}');
  if (q->text.oom) return rg_fail(e, 500, "out of memory");
  /* the next sequence number: one past the last dead letter's */
  memset(key + plen, 0xFF, 8);
  if ((rc = rg_cur_open(s->txn, RG_DB_META, &cur)))
    return rg_scope_fail(s, rc, "dead letters", e);
  k.p = key;
  k.n = plen + 8;
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  rc = rg_cur_get(cur, &k, &v, rc == 0 ? RG_PREV : RG_LAST);
  if (rc == 0 && k.n == plen + 8 && memcmp(k.p, key, plen) == 0)
    seq = rg_get_u64((const uint8_t *)k.p + plen) + 1;
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "dead letters", e);
  return rg_put(s, RG_DB_META, key, rg_meta_dead_key(key, plen, seq),
                q->text.p, q->text.n, e);
}

static int fail_body (rg_scope *s, void *ud, rg_err *e) {
  ckq *q = (ckq *)ud;
  rg_proc *p = q->p;
  rg_lease l;
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
  l.expiry = (uint64_t)(rg_now_ms() + p->lease_ms);
  if ((rc = rg_lease_put(s, &p->id, q->r, &l, e))) return rc;
  return q->dead && p->mode == RG_FEED_ALL ?
         rg_feed_trim(s, p->id.c, 1, e) : 0;
}

int rg_proc_fail (rg_proc *p, int r, const char *msg, size_t msglen,
                  uint32_t *attempts, int *dead, int *lost, rg_err *e) {
  ckq q;
  int rc;
  memset(&q, 0, sizeof(q));
  q.p = p;
  q.r = r;
  q.msg = msg;
  q.msglen = msglen;
  rg_batch_init(&q.b);
  rg_buf_init(&q.text);
  rc = run(p, fail_body, &q, e);
  rg_batch_free(&q.b);
  rg_buf_free(&q.text);
  *attempts = q.attempts;
  *dead = q.dead;
  *lost = q.lost;
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** The transactional batch
** ======================================================================
*/
int rg_proc_waiting (rg_proc *p, int r, uint64_t *waiting, rg_err *e) {
  rg_env *env = p->id.c->env;
  rg_txn *txn;
  rg_lease l;
  int rc;
  *waiting = 0;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  if ((rc = held_lease(txn, p, r, &l, e)) == 0)
    rc = rg_feed_count(txn, p->id.c, p->mode, r, &l.pos, 1, waiting, e);
  rg_read_end(env);
  return rc;
}

typedef struct txq {
  rg_proc *p;
  int r;
  rg_proc_handler h;
  void *ud;
  rg_batch *b;
  size_t n;
  int lost, failed;
} txq;

/*
** Inside one write transaction: the lease, the batch at its checkpoint, the
** new checkpoint (and the trim it allows), then the handler, whose failure
** aborts it all.  Rerunnable: it rereads everything
** (after a map growth the handler runs again, its first run's writes
** having been rolled back).
*/
static int tx_body (rg_scope *s, void *ud, rg_err *e) {
  txq *q = (txq *)ud;
  rg_proc *p = q->p;
  rg_fpos pos;
  rg_feedq f;
  rg_lease l;
  uint32_t attempt;
  int rc;
  rg_batch_clear(q->b);
  q->lost = q->failed = 0;
  q->n = 0;
  if ((rc = rg_lease_get(s->txn, &p->id, q->r, &l, e))) return rc;
  if (!rg_lease_mine(&p->id, &l)) { q->lost = 1; return 0; }
  pos = l.pos;
  one_range(&f, p, q->r, &pos, s->now);
  if ((rc = rg_feed_read(s->txn, &f, q->b, e))) return rc;
  q->n = q->b->n;
  p->pend[q->r].start = l.pos;
  p->pend[q->r].end = pos;
  p->pend[q->r].n = q->n;
  if (q->n == 0) {                /* only expired items: move past them */
    if (same_pos(&pos, &l.pos)) return 0;
    l.pos = pos;
    return rg_lease_put(s, &p->id, q->r, &l, e);
  }
  attempt = l.attempts + 1;
  l.pos = pos;
  l.attempts = 0;
  l.delivered += q->n;
  l.expiry = (uint64_t)(rg_now_ms() + p->lease_ms);
  if ((rc = rg_lease_put(s, &p->id, q->r, &l, e)) ||
      (p->mode == RG_FEED_ALL && (rc = rg_feed_trim(s, p->id.c, 1, e))))
    return rc;
  /* Everything read so far, the handler's code runs once: never on a
  ** batch or a trim the backend has not given whole (a remote one: the
  ** host fetches the rest and runs this again first). */
  if (!rg_env_complete(s->env)) return 0;
  if ((rc = q->h(q->ud, q->b, q->r, attempt, &q->failed, e))) return rc;
  if (q->failed) return rg_fail(e, 500, "the handler failed");
  l.expiry = (uint64_t)(rg_now_ms() + p->lease_ms);   /* from its end */
  return rg_lease_put(s, &p->id, q->r, &l, e);
}

int rg_proc_run_tx (rg_proc *p, rg_protect protect, void *host, int r,
                    rg_proc_handler h, void *ud, rg_batch *b, size_t *n,
                    int *lost, int *failed, rg_err *e) {
  txq q;
  int rc;
  memset(&q, 0, sizeof(q));
  q.p = p;
  q.r = r;
  q.h = h;
  q.ud = ud;
  q.b = b;
  rc = rg_scope_run(p->id.c->env, protect, host, p->sync, 0, tx_body, &q, e);
  *n = q.n;
  *lost = q.lost;
  *failed = q.failed;
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Looking at a processor: lag, status, dead letters
** ======================================================================
*/
int rg_proc_snapshot (rg_proc *p, rg_lease *ls, uint64_t *lag, rg_err *e) {
  rg_env *env = p->id.c->env;
  rg_txn *txn;
  int r, rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  rc = rg_cont_alive(txn, p->id.c, e);
  for (r = 0; rc == 0 && r < p->nparts; r++)
    if ((rc = rg_lease_get(txn, &p->id, r, &ls[r], e)) == 0)
      rc = rg_feed_count(txn, p->id.c, p->mode, r, &ls[r].pos, UINT64_MAX,
                         &lag[r], e);
  rg_read_end(env);
  return rc;
}

int rg_proc_dead_letters (rg_proc *p, rg_buf *out, rg_err *e) {
  rg_env *env = p->id.c->env;
  uint8_t key[RG_LEASE_KEY_MAX];
  size_t plen = rg_lease_prefix(key, RG_MK_DEAD, &p->id);
  rg_cur *cur;
  rg_txn *txn;
  rg_val k, v;
  int rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur)) == 0) {
    k.p = key;
    k.n = plen;
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    while (rc == 0 && k.n == plen + 8 &&
           memcmp(k.p, key, plen) == 0) {
      uint8_t head[16];
      memcpy(head, (const uint8_t *)k.p + plen, 8);     /* seq */
      rg_put_u64(head + 8, v.n);  /* copied out: valid after the read */
      rg_buf_add(out, head, 16);
      rg_buf_add(out, v.p, v.n);
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
    }
    rg_cur_close(cur);
  }
  rg_read_end(env);
  if (rc && rc != RG_NOTFOUND) return rg_kv_fail(e, rc, "dead letters");
  if (out->oom) return rg_fail(e, 500, "out of memory");
  return 0;
}

typedef struct clearq {
  rg_proc *p;
  int count;
} clearq;

static int clear_body (rg_scope *s, void *ud, rg_err *e) {
  clearq *q = (clearq *)ud;
  uint8_t key[RG_LEASE_KEY_MAX];
  uint64_t n;
  int rc = rg_del_prefix(s, RG_DB_META, key,
                         rg_lease_prefix(key, RG_MK_DEAD, &q->p->id),
                         UINT64_MAX, &n, e);
  q->count = (int)n;
  return rc;
}

int rg_proc_clear_dead (rg_proc *p, int *count, rg_err *e) {
  clearq q;
  int rc;
  q.p = p;
  q.count = 0;
  rc = run(p, clear_body, &q, e);
  *count = q.count;
  return rc;
}

typedef struct dropq {
  rg_proc *p;
  uint64_t seq;
} dropq;

static int drop_body (rg_scope *s, void *ud, rg_err *e) {
  dropq *q = (dropq *)ud;
  uint8_t key[RG_LEASE_KEY_MAX + 8];
  size_t plen = rg_lease_prefix(key, RG_MK_DEAD, &q->p->id);
  int rc, gone;
  if ((rc = rg_del(s, RG_DB_META, key, rg_meta_dead_key(key, plen, q->seq),
                   &gone, e)))
    return rc;
  if (!gone)
    return rg_fail(e, 404, "processor '%.*s' has no dead letter %llu",
                   (int)q->p->id.namelen, q->p->id.name,
                   (unsigned long long)q->seq);
  return 0;
}

int rg_proc_drop_dead (rg_proc *p, uint64_t seq, rg_err *e) {
  dropq q;
  q.p = p;
  q.seq = seq;
  return run(p, drop_body, &q, e);
}
/* }===================================================================== */
