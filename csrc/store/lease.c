/*
** lease.c: what processors keep in the database, record by record.
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
** Deleting the container drops all of them (catalog.c drops 'l' and 'd').
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
*/

#include <string.h>

#include "store/catalog.h"
#include "store/env_int.h"
#include "store/lease.h"

#define LEASE_FORMAT  1
#define LEASE_FIXED   45

/* 'l' or 'd', cid, name, 0x00: the prefix of a processor's keys. */
size_t rg_lease_prefix (uint8_t *out, int tag, const rg_pname *p) {
  return rg_meta_proc_key(out, tag, p->c->spec->cid, p->name, p->namelen);
}

static size_t lease_key (uint8_t *out, const rg_pname *p, int range) {
  return rg_meta_lease_key(out, rg_lease_prefix(out, RG_MK_LEASE, p), range);
}

size_t rg_lease_inst_key (uint8_t *out, const rg_pname *p) {
  return rg_meta_inst_key(out, rg_lease_prefix(out, RG_MK_LEASE, p), p->inst,
                          p->instlen);
}

static int lease_decode (const rg_val *v, rg_lease *l) {
  const uint8_t *p = (const uint8_t *)v->p;
  if (v->n < LEASE_FIXED || p[0] != LEASE_FORMAT) return -1;
  l->mode = p[1];
  l->expiry = rg_get_u64(p + 4);
  l->pos.lsn = rg_get_u64(p + 12);
  l->pos.sub = rg_get_u64(p + 20);
  l->attempts = rg_get_u32(p + 28);
  l->failures = rg_get_u32(p + 32);
  l->delivered = rg_get_u64(p + 36);
  l->ownerlen = p[44];
  if (l->ownerlen > RG_MAX_INSTANCE || v->n != LEASE_FIXED + l->ownerlen)
    return -1;
  memcpy(l->owner, p + LEASE_FIXED, l->ownerlen);
  return 0;
}

int rg_lease_get (rg_txn *txn, const rg_pname *p, int range, rg_lease *l,
                  rg_err *e) {
  uint8_t key[RG_LEASE_KEY_MAX];
  rg_val k, v;
  int rc;
  k.p = key;
  k.n = lease_key(key, p, range);
  rc = rg_kv_get(txn, RG_DB_META, k.p, k.n, &v);
  if (rc == RG_NOTFOUND)
    return rg_fail(e, 404, "processor '%.*s' has no state for feed range %d "
                   "(was its container deleted?)", (int)p->namelen, p->name,
                   range + 1);
  if (rc) return rg_kv_fail(e, rc, "processor lease");
  if (lease_decode(&v, l))
    return rg_fail(e, 500, "corrupt lease record of processor '%.*s'",
                   (int)p->namelen, p->name);
  return 0;
}

int rg_lease_put (rg_scope *s, const rg_pname *p, int range,
                  const rg_lease *l, rg_err *e) {
  uint8_t key[RG_LEASE_KEY_MAX], val[LEASE_FIXED + RG_MAX_INSTANCE];
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

int rg_lease_mine (const rg_pname *p, const rg_lease *l) {
  return l->ownerlen == p->instlen &&
         memcmp(l->owner, p->inst, p->instlen) == 0;
}

int rg_lease_floors (rg_txn *txn, rg_env *env, uint32_t cid, int nparts,
                     rg_fpos *floor, rg_err *e) {
  uint8_t from[5];
  rg_cur *cur;
  rg_val k, v;
  int r, rc;
  for (r = 0; r < nparts; r++) floor[r].lsn = floor[r].sub = UINT64_MAX;
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur)))
    return rg_kv_fail(e, rc, "processor leases");
  k.p = from;
  k.n = rg_meta_key(from, RG_MK_LEASE, cid, NULL, 0);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n > 5 && memcmp(k.p, from, 5) == 0) {
    const uint8_t *key = (const uint8_t *)k.p;
    const uint8_t *sep = (const uint8_t *)memchr(key + 5, 0, k.n - 5);
    rg_lease l;
    if (sep && (size_t)(sep - key) + 3 == k.n &&
        !(sep[1] == 0xFF && sep[2] == 0xFF) && lease_decode(&v, &l) == 0 &&
        l.mode == RG_FEED_ALL) {
      r = (int)rg_get_u16(sep + 1);
      if (r < nparts && (l.pos.lsn < floor[r].lsn ||
                         (l.pos.lsn == floor[r].lsn &&
                          l.pos.sub < floor[r].sub)))
        floor[r] = l.pos;
    }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND) return rg_kv_fail(e, rc, "processor leases");
  return 0;
}

int rg_lease_verify (rg_txn *txn, rg_env *env, const rg_cspec *s,
                     rg_buf *report) {
  uint8_t from[5];
  rg_cur *cur;
  rg_val k, v;
  int rc, bad = 0;
  if (rg_cur_open(txn, RG_DB_META, &cur)) return 0;
  k.p = from;
  k.n = rg_meta_key(from, RG_MK_LEASE, s->cid, NULL, 0);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n > 5 && memcmp(k.p, from, 5) == 0) {
    const uint8_t *key = (const uint8_t *)k.p;
    const uint8_t *sep = (const uint8_t *)memchr(key + 5, 0, k.n - 5);
    rg_lease l;
    if (sep && (size_t)(sep - key) + 3 == k.n &&
        !(sep[1] == 0xFF && sep[2] == 0xFF)) {
      int r = (int)rg_get_u16(sep + 1);
      const char *what = NULL;
      uint64_t last = 0;
      if (lease_decode(&v, &l)) what = "does not decode";
      else if (r >= s->nparts) what = "names a feed range the container lacks";
      else if (rg_kv_last(txn, s->cid, r, &last) == 0 && l.pos.lsn > last + 1)
        what = "points past the end of the feed";
      if (what) {
        bad++;
        rg_buf_addf(report, "container '%s': the lease of processor '%.*s' "
                    "on feed range %d %s\n", s->name,
                    (int)(sep - key - 5), (const char *)key + 5, r + 1, what);
      }
    }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  return bad;
}

int rg_lease_list (const rg_cont *c, rg_buf *out, int *count, rg_err *e) {
  uint8_t from[5];
  rg_cur *cur;
  rg_txn *txn;
  rg_val k, v;
  uint8_t last[RG_MAX_NAME];          /* the name listed last */
  size_t lastlen = 0;
  int rc;
  *count = 0;
  if ((rc = rg_read_begin(c->env, &txn, e))) return rc;
  if ((rc = rg_cont_alive(txn, c, e))) { rg_read_end(c->env); return rc; }
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur)) == 0) {
    k.p = from;
    k.n = rg_meta_key(from, RG_MK_LEASE, c->spec->cid, NULL, 0);
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    while (rc == 0 && k.n > 5 && memcmp(k.p, from, 5) == 0) {
      const uint8_t *key = (const uint8_t *)k.p;
      const uint8_t *sep = (const uint8_t *)memchr(key + 5, 0, k.n - 5);
      rg_lease l;
      /* a lease record (not a heartbeat), of a name not seen yet */
      size_t n = sep ? (size_t)(sep - key - 5) : 0;
      if (sep && n <= RG_MAX_NAME && n + 8 == k.n &&
          !(sep[1] == 0xFF && sep[2] == 0xFF) && lease_decode(&v, &l) == 0 &&
          !(*count && lastlen == n && memcmp(last, key + 5, n) == 0)) {
        uint8_t head[5];
        head[0] = (uint8_t)l.mode;
        rg_put_u32(head + 1, (uint32_t)n);
        rg_buf_add(out, head, 5);
        rg_buf_add(out, key + 5, n);
        memcpy(last, key + 5, n);
        lastlen = n;
        (*count)++;
      }
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
    }
    rg_cur_close(cur);
  }
  rg_read_end(c->env);
  if (rc && rc != RG_NOTFOUND) return rg_kv_fail(e, rc, "processor leases");
  if (out->oom) return rg_fail(e, 500, "out of memory");
  return 0;
}
