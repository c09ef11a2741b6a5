/*
** scripts.c: stored procedures and triggers, as records.
**
** Scripts live in the meta table (layout.c), one record each:
**
**   's' cid name  ->  u64 version | source               (procedures)
**   'u' cid name  ->  u64 version | source               (user-defined
**                                                         functions)
**   't' cid name  ->  u64 version | u8 type | u8 operation | u8 automatic
**                     | source
**
** type is RG_TRIG_PRE (1) or RG_TRIG_POST (2), operation RG_TOP_ALL (0),
** CREATE (1), REPLACE (2) or DELETE (3), automatic 0 or 1; the source is the
** Lua text as given.  "\1scripts" holds the database's script version, a
** u64 that every create, replace and delete of a script
** moves forward; the record written takes the new value.  The step is 1
** plus a random 32-bit number: a version handed out in a transaction that
** is later rolled back could otherwise be handed out again for another
** source, and a cache would then believe it knew that source.
*/

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/catalog.h"
#include "store/env_int.h"
#include "store/scripts.h"

#define TRIG_HDR 11                 /* u64 version, type, op, automatic */

static uint64_t steps = 0;          /* versions handed out by this process */

static const char *what_of (int tag) {
  return tag == RG_MK_PROC ? "procedure" :
         tag == RG_MK_UDF ? "user-defined function" : "trigger";
}

static int parse_record (int tag, const rg_val *v, rg_srec *r) {
  const uint8_t *p = (const uint8_t *)v->p;
  size_t hdr = tag == RG_MK_TRIG ? TRIG_HDR : 8;
  memset(r, 0, sizeof(*r));
  if (v->n < hdr) return -1;
  r->version = rg_get_u64(p);
  if (tag == RG_MK_TRIG) {
    r->type = p[8];
    r->op = p[9];
    r->automatic = p[10];
    if ((r->type != RG_TRIG_PRE && r->type != RG_TRIG_POST) ||
        r->op > RG_TOP_DELETE)
      return -1;
  }
  r->src = (const char *)p + hdr;
  r->len = v->n - hdr;
  return 0;
}

int rg_srec_get (rg_txn *txn, rg_env *env, int tag, uint32_t cid,
                 const char *name, size_t n, rg_srec *r, uint8_t *key,
                 size_t *klen, rg_err *e) {
  rg_val k, v;
  int rc;
  k.p = key;
  k.n = *klen = rg_meta_key(key, tag, cid, name, n);
  rc = rg_kv_get(txn, RG_DB_META, k.p, k.n, &v);
  if (rc == RG_NOTFOUND)
    return rg_fail(e, 404, "%s '%.*s' not found", what_of(tag), (int)n, name);
  if (rc) return rg_kv_fail(e, rc, "script record");
  if (parse_record(tag, &v, r))
    return rg_fail(e, 500, "corrupt script record '%.*s'", (int)n, name);
  return 0;
}

int rg_scripts_version (rg_txn *txn, rg_env *env, uint64_t *version,
                        rg_err *e) {
  rg_val k, v;
  int rc;
  *version = 0;
  k.p = RG_META_SCRIPTS;
  k.n = sizeof(RG_META_SCRIPTS) - 1;
  rc = rg_kv_get(txn, RG_DB_META, k.p, k.n, &v);
  if (rc == RG_NOTFOUND) return 0;
  if (rc) return rg_kv_fail(e, rc, "script version");
  if (v.n == 8) *version = rg_get_u64((const uint8_t *)v.p);
  return 0;
}

int rg_srec_each (rg_txn *txn, rg_env *env, uint32_t cid, int tag,
                  rg_srec_fn fn, void *ud, rg_err *e) {
  rg_cur *cur;
  rg_val k, v;
  uint8_t from[5];
  int rc, stop = 0;
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur)))
    return rg_kv_fail(e, rc, "script records");
  k.p = from;
  k.n = rg_meta_key(from, tag, cid, NULL, 0);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n > 5 && memcmp(k.p, from, 5) == 0) {
    rg_srec r;
    int bad = parse_record(tag, &v, &r);
    if ((stop = fn(ud, (const char *)k.p + 5, k.n - 5,
                   bad ? NULL : &r)) != 0)
      break;
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  if (stop) return stop;
  if (rc && rc != RG_NOTFOUND) return rg_kv_fail(e, rc, "script records");
  return 0;
}

/* Moves the database's script version forward; the new value. */
static int next_version (rg_scope *s, uint64_t *out, rg_err *e) {
  struct { uint64_t n, pid, t; } seed;
  struct timespec ts;
  uint8_t buf[8];
  uint64_t cur;
  int rc;
  if ((rc = rg_scripts_version(s->txn, s->env, &cur, e))) {
    s->failed = rc;
    return rc;
  }
  clock_gettime(CLOCK_REALTIME, &ts);
  seed.n = ++steps;
  seed.pid = (uint64_t)getpid();
  seed.t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  *out = cur + 1 + (rg_siphash(s->env->secret, &seed, sizeof(seed)) >> 32);
  rg_put_u64(buf, *out);
  return rg_put(s, RG_DB_META, RG_META_SCRIPTS, sizeof(RG_META_SCRIPTS) - 1,
                buf, 8, e);
}

int rg_script_put (rg_scope *s, const rg_cont *c, int tag, const char *name,
                   size_t n, int mode, const int trig[3], const char *src,
                   size_t len, rg_err *e) {
  const char *what = what_of(tag);
  uint8_t key[5 + RG_MAX_NAME];
  size_t hdr = tag == RG_MK_TRIG ? TRIG_HDR : 8;
  uint64_t version;
  uint8_t *rec;
  rg_val k, v;
  int rc;
  if ((rc = rg_cont_alive(s->txn, c, e))) return rc;
  k.p = key;
  k.n = rg_meta_key(key, tag, c->spec->cid, name, n);
  rc = rg_kv_get(s->txn, RG_DB_META, k.p, k.n, &v);
  if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, what, e);
  if (mode == RG_PUT_CREATE && rc == 0)
    return rg_fail(e, 409, "%s '%.*s' already exists", what, (int)n, name);
  if (mode == RG_PUT_REPLACE && rc == RG_NOTFOUND)
    return rg_fail(e, 404, "%s '%.*s' not found", what, (int)n, name);
  if ((rc = next_version(s, &version, e))) return rc;
  if ((rec = (uint8_t *)rg_reserve(s, RG_DB_META, key, k.n, hdr + len,
                                   e)) == NULL)
    return s->failed;
  rg_put_u64(rec, version);
  if (tag == RG_MK_TRIG) {
    rec[8] = (uint8_t)trig[0];
    rec[9] = (uint8_t)trig[1];
    rec[10] = (uint8_t)(trig[2] != 0);
  }
  if (len) memcpy(rec + hdr, src, len);
  return 0;
}

int rg_script_delete (rg_scope *s, const rg_cont *c, int tag,
                      const char *name, size_t n, rg_err *e) {
  uint8_t key[5 + RG_MAX_NAME];
  uint64_t version;
  int rc, gone;
  if ((rc = rg_cont_alive(s->txn, c, e))) return rc;
  if ((rc = rg_del(s, RG_DB_META, key,
                   rg_meta_key(key, tag, c->spec->cid, name, n), &gone, e)))
    return rc;
  if (!gone)
    return rg_fail(e, 404, "%s '%.*s' not found", what_of(tag), (int)n, name);
  return next_version(s, &version, e);
}

int rg_script_get (const rg_cont *c, int tag, const char *name, size_t n,
                   rg_buf *src, int trig[3], rg_err *e) {
  uint8_t key[5 + RG_MAX_NAME];
  size_t klen;
  rg_txn *txn;
  rg_srec r;
  int rc;
  if ((rc = rg_read_begin(c->env, &txn, e))) return rc;
  if ((rc = rg_cont_alive(txn, c, e)) == 0 &&
      (rc = rg_srec_get(txn, c->env, tag, c->spec->cid, name, n, &r, key,
                        &klen, e)) == 0) {
    rg_buf_add(src, r.src, r.len);   /* copied before the read ends */
    if (trig) {
      trig[0] = r.type;
      trig[1] = r.op;
      trig[2] = r.automatic;
    }
  }
  rg_read_end(c->env);
  if (rc == 0 && src->oom) return rg_fail(e, 500, "out of memory");
  return rc;
}

typedef struct names {
  rg_buf *out;
  int count;
} names;

static int add_name (void *ud, const char *name, size_t n, const rg_srec *r) {
  names *q = (names *)ud;
  uint8_t len[4];
  (void)r;
  rg_put_u32(len, (uint32_t)n);
  rg_buf_add(q->out, len, 4);
  rg_buf_add(q->out, name, n);
  q->count++;
  return 0;
}

int rg_script_names (const rg_cont *c, int tag, rg_buf *out, int *count,
                     rg_err *e) {
  rg_txn *txn;
  names q;
  int rc;
  q.out = out;
  q.count = 0;
  *count = 0;
  if ((rc = rg_read_begin(c->env, &txn, e))) return rc;
  if ((rc = rg_cont_alive(txn, c, e)) == 0)
    rc = rg_srec_each(txn, c->env, c->spec->cid, tag, add_name, &q, e);
  rg_read_end(c->env);
  if (rc) return rc;
  if (out->oom) return rg_fail(e, 500, "out of memory");
  *count = q.count;
  return 0;
}
