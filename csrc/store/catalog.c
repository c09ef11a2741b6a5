/*
** catalog.c: the containers of a database.
**
** In the meta table (layout.c):
**   'n' name  -> u32 cid          the names
**   'c' cid   -> spec JSON text   the specs
**   'k' cid   -> u64 items, u64 bytes
**   'x' cid   -> u32 cid          a deletion not yet finished
**   "\1cid"   -> u32 the last id handed out (ids are never reused)
**
** Deleting a container takes it out of the catalog in one transaction
** (name and spec go, a drop marker comes), then removes its data a chunk
** of DROP_CHUNK keys per transaction, so that no transaction grows with
** the container; the marker goes with the last chunk.  An open finds the
** markers a crash left and finishes their work.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/index.h"
#include "store/search.h"
#include "store/throughput.h"
#include "store/write.h"

#define DROP_CHUNK 20000
#define MAX_PURGE  1024          /* containers one purge looks at */


/*
** {=====================================================================
** Specs
** ======================================================================
*/
/* Finds a container's id by name: 0, or 404. */
static int find_cid (rg_txn *txn, rg_env *env, const char *name, size_t n,
                     uint32_t *cid, rg_err *e) {
  uint8_t key[5 + RG_MAX_NAME];
  rg_val v;
  int rc = rg_kv_get(txn, RG_DB_META, key,
                       rg_meta_key(key, RG_MK_NAME, 0, name, n), &v);
  if (rc == RG_NOTFOUND)
    return rg_fail(e, 404, "container '%s' not found", name);
  if (rc) return rg_kv_fail(e, rc, "catalog");
  if (v.n != 4) return rg_fail(e, 500, "corrupt catalog entry");
  *cid = rg_get_u32((const uint8_t *)v.p);
  return 0;
}

int rg_load_spec (rg_txn *txn, rg_env *env, uint32_t cid, rg_cspec **out,
                  rg_err *e) {
  uint8_t key[8];
  rg_val v;
  cJSON *j = NULL;
  int rc = rg_kv_get(txn, RG_DB_META, key,
                       rg_meta_key(key, RG_MK_SPEC, cid, NULL, 0), &v);
  if (rc == RG_NOTFOUND) return rg_fail(e, 404, "container not found");
  if (rc) return rg_kv_fail(e, rc, "catalog");
  if ((rc = rg_json_parse((const char *)v.p, v.n, &j, e)))
    return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
  rc = rg_cspec_build(j, cid, out, e);
  cJSON_Delete(j);
  if (rc) return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
  return 0;
}

/* Loads a spec by id in a read transaction of its own. */
static int load_spec (rg_env *env, uint32_t cid, rg_cspec **out, rg_err *e) {
  rg_txn *txn;
  int rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  rc = rg_load_spec(txn, env, cid, out, e);
  rg_read_end(env);
  return rc;
}

int rg_catalog_find (rg_env *env, const char *name, size_t n, rg_cspec **out,
                     rg_err *e) {
  rg_txn *txn;
  uint32_t cid;
  int rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  rc = find_cid(txn, env, name, n, &cid, e);
  if (rc == 0) rc = rg_load_spec(txn, env, cid, out, e);
  rg_read_end(env);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Creating
** ======================================================================
*/
typedef struct create_req {
  const char *name;
  size_t namelen;
  const char *spec;            /* JSON text */
  size_t specn;
  int max;
  uint32_t cid;
} create_req;

static int count_containers (rg_txn *txn, rg_env *env, int *n) {
  rg_cur *cur;
  rg_val k, v;
  uint8_t from[5];
  int rc;
  *n = 0;
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur))) return rc;
  k.p = from;
  k.n = rg_meta_key(from, RG_MK_NAME, 0, NULL, 0);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n >= 5 && memcmp(k.p, from, 5) == 0) {
    (*n)++;
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  return rc == RG_NOTFOUND ? 0 : rc;
}

static int create_body (rg_scope *s, void *ud, rg_err *e) {
  create_req *q = (create_req *)ud;
  uint8_t key[5 + RG_MAX_NAME], buf[4];
  rg_val v;
  uint32_t last = 0;
  int rc = rg_kv_get(s->txn, RG_DB_META, key,
                       rg_meta_key(key, RG_MK_NAME, 0, q->name, q->namelen),
                       &v);
  if (rc == 0)
    return rg_fail(e, 409, "container '%s' already exists", q->name);
  if (rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "catalog", e);
  if (q->max > 0) {
    int n;
    if ((rc = count_containers(s->txn, s->env, &n)))
      return rg_scope_fail(s, rc, "catalog", e);
    if (n >= q->max)
      return rg_fail(e, 403, "the database already holds its maximum of %d "
                     "containers", q->max);
  }
  rc = rg_kv_get(s->txn, RG_DB_META, RG_META_CID, sizeof(RG_META_CID) - 1, &v);
  if (rc == 0 && v.n == 4) last = rg_get_u32((const uint8_t *)v.p);
  else if (rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "catalog", e);
  q->cid = last + 1;
  rg_put_u32(buf, q->cid);
  if ((rc = rg_put(s, RG_DB_META, RG_META_CID, sizeof(RG_META_CID) - 1, buf,
                   4, e)) ||
      (rc = rg_put(s, RG_DB_META, key, rg_meta_key(key, RG_MK_NAME, 0, q->name,
                                                   q->namelen), buf, 4, e)) ||
      (rc = rg_put(s, RG_DB_META, key,
                   rg_meta_key(key, RG_MK_SPEC, q->cid, NULL, 0), q->spec,
                   q->specn, e)))
    return rc;
  return 0;
}

int rg_catalog_create (rg_env *env, int sync, const char *name, size_t n,
                       const char *spec, size_t specn, int max,
                       rg_cspec **out, rg_err *e) {
  create_req q;
  int rc;
  if (env->readonly) return rg_fail(e, 403, "the database is open read-only");
  q.name = name;
  q.namelen = n;
  q.spec = spec;
  q.specn = specn;
  q.max = max;
  q.cid = 0;
  if ((rc = rg_scope_run(env, NULL, NULL, sync, 1, create_body, &q, e)))
    return rc;
  return load_spec(env, q.cid, out, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Replacing: a new indexing policy, TTL, retention or size limit
** ======================================================================
*/
/* A replace that does not name a throughput keeps the stored one (on the
** hosted service, a container's throughput is a resource of its own,
** which a replace of the container leaves alone). */
static int keep_throughput (const rg_cspec *old, cJSON *j, rg_err *e) {
  cJSON *was, *tp;
  if (!cJSON_IsObject(j) ||
      cJSON_GetObjectItemCaseSensitive(j, "throughput") != NULL ||
      old->tp.mode == RG_TP_NONE)
    return 0;
  if (rg_json_parse(old->json, strlen(old->json), &was, e))
    return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
  tp = cJSON_DetachItemFromObjectCaseSensitive(was, "throughput");
  cJSON_Delete(was);
  if (tp != NULL) cJSON_AddItemToObject(j, "throughput", tp);
  return 0;
}

/* A replace that turns the all-versions history off drops it; one that
** turns it on starts it at this transaction's lsn, which it records, since
** the items written before have no record (verify.c). */
static int history_switch (rg_scope *s, uint32_t cid, int on, rg_err *e) {
  uint8_t key[8], pre[4], val[8];
  size_t kn = rg_meta_key(key, RG_MK_SINCE, cid, NULL, 0);
  uint64_t gone, lsn;
  int rc;
  if (!on) {
    if ((rc = rg_del_prefix(s, RG_DB_FEED, pre, rg_key_cid(pre, cid),
                            UINT64_MAX, &gone, e)))
      return rc;
    return rg_del(s, RG_DB_META, key, kn, NULL, e);
  }
  if ((lsn = rg_scope_lsn(s, NULL, 0, e)) == 0) return s->failed;
  rg_put_u64(val, lsn);
  return rg_put(s, RG_DB_META, key, kn, val, 8, e);
}

static int replace_body (rg_scope *s, void *ud, rg_err *e) {
  create_req *q = (create_req *)ud;
  rg_cspec *old = NULL, *neu = NULL;
  cJSON *j = NULL;
  uint8_t key[8];
  rg_cont c;
  int rc;
  if ((rc = find_cid(s->txn, s->env, q->name, q->namelen, &q->cid, e)) ||
      (rc = rg_load_spec(s->txn, s->env, q->cid, &old, e)))
    return rc;
  if ((rc = rg_json_parse(q->spec, q->specn, &j, e)) ||
      (rc = keep_throughput(old, j, e)))
    goto done;
  /* the layout of the data follows the revision it was made with */
  cJSON_DeleteItemFromObjectCaseSensitive(j, "revision");
  if (old->revision > 1 &&
      cJSON_AddNumberToObject(j, "revision", old->revision) == NULL) {
    rc = rg_fail(e, 500, "out of memory");
    goto done;
  }
  if ((rc = rg_cspec_build(j, q->cid, &neu, e)) ||
      (rc = rg_cspec_same_layout(old, neu, e)) ||
      (rc = rg_put(s, RG_DB_META, key, rg_meta_key(key, RG_MK_SPEC, q->cid,
                                                   NULL, 0),
                   neu->json, strlen(neu->json), e)))
    goto done;
  if (memcmp(&old->tp, &neu->tp, sizeof(old->tp)) != 0 &&
      (rc = rg_tp_bump(s, q->cid, &old->tp, &neu->tp, old->nparts, e)))
    goto done;
  if (old->all_versions != neu->all_versions &&
      (rc = history_switch(s, q->cid, neu->all_versions, e)))
    goto done;
  c.env = s->env;
  c.spec = neu;
  rc = rg_cont_rebuild(s, &c, old, !rg_cspec_same_indexing(old, neu),
                       old->ttl_on != neu->ttl_on ||
                       old->default_ttl != neu->default_ttl, e);
done:
  cJSON_Delete(j);
  rg_cspec_free(old);
  rg_cspec_free(neu);
  return rc;
}

int rg_catalog_replace (rg_env *env, int sync, const char *name, size_t n,
                        const char *spec, size_t specn, rg_cspec **out,
                        rg_err *e) {
  create_req q;
  int rc;
  if (env->readonly) return rg_fail(e, 403, "the database is open read-only");
  memset(&q, 0, sizeof(q));
  q.name = name;
  q.namelen = n;
  q.spec = spec;
  q.specn = specn;
  if ((rc = rg_scope_run(env, NULL, NULL, sync, 1, replace_body, &q, e)))
    return rc;
  return load_spec(env, q.cid, out, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Deleting
** ======================================================================
*/
typedef struct drop_req {
  const char *name;
  size_t namelen;
  uint32_t cid;
  int done;
} drop_req;

/* Takes a container out of the catalog and marks its data for removal. */
static int unlist_body (rg_scope *s, void *ud, rg_err *e) {
  drop_req *q = (drop_req *)ud;
  uint8_t key[5 + RG_MAX_NAME], buf[4];
  int rc;
  if ((rc = find_cid(s->txn, s->env, q->name, q->namelen, &q->cid, e)))
    return rc;
  if ((rc = rg_del(s, RG_DB_META, key,
                   rg_meta_key(key, RG_MK_NAME, 0, q->name, q->namelen),
                   NULL, e)) ||
      (rc = rg_del(s, RG_DB_META, key,
                   rg_meta_key(key, RG_MK_SPEC, q->cid, NULL, 0), NULL, e)))
    return rc;
  rg_put_u32(buf, q->cid);
  return rg_put(s, RG_DB_META, key,
                rg_meta_key(key, RG_MK_DROP, q->cid, NULL, 0), buf, 4, e);
}

/* Removes up to `max` items of a dropped container, each with its refs
** entry (which only the item's header names). */
static int drop_items (rg_scope *s, uint32_t cid, uint64_t max,
                       uint64_t *count, rg_err *e) {
  rg_cur *cur;
  rg_val k, v;
  uint8_t p[4];
  int rc;
  *count = 0;
  if ((rc = rg_cur_open(s->txn, RG_DB_ITEMS, &cur)))
    return rg_scope_fail(s, rc, "delete", e);
  rg_key_cid(p, cid);
  while (*count < max) {
    rg_ihdr h;
    k.p = p;
    k.n = 4;
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    if (rc || k.n < 4 || memcmp(k.p, p, 4) != 0) break;
    if (rg_ihdr_get(v.p, v.n, &h, NULL, NULL) == 0) {
      uint8_t b[RG_REF_KEY];
      if ((rc = rg_del(s, RG_DB_REFS, b, rg_key_ref(b, h.seq), NULL, e)))
        break;
    }
    if ((rc = rg_cursor_del(s, cur, e))) break;
    *count += 2;
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND)
    return s->failed ? rc : rg_scope_fail(s, rc, "delete", e);
  return 0;
}

/* Removes a chunk of a dropped container's data; q->done when all gone. */
static int drop_body (rg_scope *s, void *ud, rg_err *e) {
  static const int tags[] = { RG_MK_STATS, RG_MK_PROC, RG_MK_TRIG,
                              RG_MK_LEASE, RG_MK_DEAD, RG_MK_SHAPE,
                              RG_MK_UDF, RG_MK_SINCE };
  drop_req *q = (drop_req *)ud;
  uint8_t prefix[5];
  uint64_t budget = DROP_CHUNK, n;
  int db, i, rc;
  q->done = 0;
  rg_key_cid(prefix, q->cid);
  if ((rc = drop_items(s, q->cid, budget, &n, e))) return rc;
  budget -= n < budget ? n : budget;
  if (budget && (rc = rg_index_drop(s, q->cid, budget, &n, e))) return rc;
  budget -= n < budget ? n : budget;
  for (db = RG_DB_ITEMS; db < RG_NDB; db++) {
    if (db == RG_DB_INDEX || db == RG_DB_REFS) continue;   /* done above */
    if ((rc = rg_del_prefix(s, db, prefix, 4, budget, &n, e))) return rc;
    budget -= n;
  }
  for (i = 0; i < (int)(sizeof(tags) / sizeof(tags[0])); i++) {
    if ((rc = rg_del_prefix(s, RG_DB_META, prefix,
                            rg_meta_key(prefix, tags[i], q->cid, NULL, 0),
                            budget, &n, e)))
      return rc;
    budget -= n;
  }
  if (budget > 0) {                  /* everything is gone */
    if ((rc = rg_del(s, RG_DB_META, prefix,
                     rg_meta_key(prefix, RG_MK_DROP, q->cid, NULL, 0), NULL,
                     e)))
      return rc;
    q->done = 1;
  }
  return 0;
}

static int drop_data (rg_env *env, int sync, drop_req *q, rg_err *e) {
  int rc;
  do {
    if ((rc = rg_scope_run(env, NULL, NULL, sync, 0, drop_body, q, e)))
      return rc;
  } while (!q->done);
  return 0;
}

int rg_catalog_resume_drops (rg_env *env, int sync, rg_err *e) {
  for (;;) {
    rg_txn *txn;
    rg_cur *cur;
    rg_val k, v;
    uint8_t from[1] = { RG_MK_DROP };
    drop_req q;
    int rc, found = 0;
    if ((rc = rg_read_begin(env, &txn, e))) return rc;
    if ((rc = rg_cur_open(txn, RG_DB_META, &cur)) == 0) {
      k.p = from;
      k.n = 1;
      rc = rg_cur_get(cur, &k, &v, RG_SEEK);
      if (rc == 0 && k.n == 5 && ((uint8_t *)k.p)[0] == RG_MK_DROP) {
        q.cid = rg_get_u32((const uint8_t *)k.p + 1);
        found = 1;
      }
      rg_cur_close(cur);
    }
    rg_read_end(env);
    if (!found) return 0;
    if ((rc = drop_data(env, sync, &q, e))) return rc;
  }
}

int rg_catalog_drop (rg_env *env, int sync, const char *name, size_t n,
                     rg_err *e) {
  drop_req q;
  int rc;
  if (env->readonly) return rg_fail(e, 403, "the database is open read-only");
  q.name = name;
  q.namelen = n;
  if ((rc = rg_scope_run(env, NULL, NULL, sync, 0, unlist_body, &q, e)))
    return rc;
  return drop_data(env, sync, &q, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Listing, with counters
** ======================================================================
*/
int rg_catalog_list (rg_env *env, rg_buf *out, rg_cstat **stats, int *n,
                     uint64_t *lsn, rg_err *e) {
  rg_txn *txn;
  rg_cur *cur;
  rg_val k, v;
  uint8_t from[5];
  rg_buf recs;                 /* u64 offset, u64 len, items, bytes, cid */
  int rc, i;
  *stats = NULL;
  *n = 0;
  *lsn = 0;
  rg_buf_init(&recs);
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  rg_kv_last(txn, 0, 0, lsn);
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur)) == 0) {
    k.p = from;
    k.n = rg_meta_key(from, RG_MK_NAME, 0, NULL, 0);
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    while (rc == 0 && k.n > 5 && memcmp(k.p, from, 5) == 0) {
      uint8_t sk[8], rec[40];
      rg_val sv;
      uint64_t items = 0, bytes = 0;
      uint32_t cid = v.n == 4 ? rg_get_u32((const uint8_t *)v.p)
                                    : 0;
      if (v.n == 4 &&
          rg_kv_get(txn, RG_DB_META, sk,
                      rg_meta_key(sk, RG_MK_STATS, cid, NULL, 0), &sv) == 0 &&
          sv.n == 16) {
        items = rg_get_u64((const uint8_t *)sv.p);
        bytes = rg_get_u64((const uint8_t *)sv.p + 8);
      }
      rg_put_u64(rec, out->n);
      rg_put_u64(rec + 8, k.n - 5);
      rg_put_u64(rec + 16, items);
      rg_put_u64(rec + 24, bytes);
      rg_put_u64(rec + 32, cid);
      rg_buf_add(&recs, rec, 40);
      rg_buf_add(out, (const char *)k.p + 5, k.n - 5);
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
    }
    rg_cur_close(cur);
  }
  rg_read_end(env);
  if (rc && rc != RG_NOTFOUND) {
    rg_buf_free(&recs);
    return rg_kv_fail(e, rc, "catalog");
  }
  if (recs.oom || out->oom ||
      (recs.n && (*stats = (rg_cstat *)malloc(recs.n / 40 *
                                              sizeof(rg_cstat))) == NULL)) {
    rg_buf_free(&recs);
    return rg_fail(e, 500, "out of memory");
  }
  *n = (int)(recs.n / 40);
  for (i = 0; i < *n; i++) {        /* the buffer no longer moves */
    const uint8_t *r = (const uint8_t *)recs.p + 40 * (size_t)i;
    (*stats)[i].name = out->p + rg_get_u64(r);
    (*stats)[i].namelen = (size_t)rg_get_u64(r + 8);
    (*stats)[i].items = rg_get_u64(r + 16);
    (*stats)[i].bytes = rg_get_u64(r + 24);
    (*stats)[i].cid = (uint32_t)rg_get_u64(r + 32);
  }
  rg_buf_free(&recs);
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** The TTL purge of every container
** ======================================================================
*/
typedef struct purge_req {
  rg_cont c;
  int count;
} purge_req;

static int purge_body (rg_scope *s, void *ud, rg_err *e) {
  purge_req *q = (purge_req *)ud;
  int rc;
  q->count = 0;
  if ((rc = rg_cont_alive(s->txn, &q->c, e))) return rc == 404 ? 0 : rc;
  return rg_purge_expired(s, &q->c, &q->count, e);
}

typedef struct purge_cids {
  uint32_t cids[MAX_PURGE];
  int n;
} purge_cids;

static int purge_cid (void *ud, uint32_t cid, const rg_val *spec) {
  purge_cids *l = (purge_cids *)ud;
  l->cids[l->n++] = cid;
  return l->n == MAX_PURGE;
}

int rg_catalog_purge (rg_env *env, int sync, int *count, rg_err *e) {
  purge_cids l;
  rg_txn *txn;
  int i, rc;
  *count = 0;
  if (env->readonly) return rg_fail(e, 403, "the database is open read-only");
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  l.n = 0;                           /* every container's id */
  rc = rg_cont_each_spec(txn, RG_DB_META, purge_cid, &l);
  rg_read_end(env);
  if (rc) return rg_kv_fail(e, rc, "reading the catalog");
  for (i = 0; i < l.n; i++) {
    purge_req q;
    q.c.env = env;
    rc = load_spec(env, l.cids[i], &q.c.spec, e);
    if (rc == 404) continue;
    if (rc) return rc;
    if (!q.c.spec->ttl_on) { rg_cspec_free(q.c.spec); continue; }
    rc = rg_scope_run(env, NULL, NULL, sync, 0, purge_body, &q, e);
    rg_cspec_free(q.c.spec);
    if (rc) return rc;
    *count += q.count;
  }
  return 0;
}
/* }===================================================================== */
