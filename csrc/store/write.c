/*
** write.c: the one write path.
**
** Every mutation goes through rg_write, whether it comes from a container
** method, a batch, a procedure's ctx, a trigger, a processor's handler or
** a TTL purge.  In order, it:
**
**   1. checks the container still exists and purges its expired items
**      (once per scope and container);
**   2. resolves the item: its key from the document (create, replace,
**      upsert) or from id and partition key (delete, patch), enforcing the
**      scope's partition binding (procedures, batches);
**   3. loads the current version and checks the operation's conditions
**      (exists or not: 409/404, if_match: 412, patch filter: 412);
**   4. builds the new version (the document, or the patched current one),
**      runs the pre-trigger, sets the system properties _etag, _ts, _lsn
**      (incoming values are dropped), and checks the limits (item size 413,
**      logical partition size 403, unique keys 409);
**   5. only then writes: the item, its index and unique entries, its TTL
**      and latest-version entries, the change-feed record, the partition
**      and container statistics;
**   6. runs the post-trigger, which sees the write and may change what the
**      caller receives.
**
** Every check comes before the first write, so a failing operation leaves
** the transaction as it found it: a procedure can go on after a 409.  The
** exceptions, a trigger failing after writes and a storage failure, fail
** the whole scope (a trigger inside an outer scope runs in a savepoint).
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sql/sql.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/feed.h"
#include "store/hooks.h"
#include "store/index.h"
#include "store/write.h"

#define NOT_SYSTEM(s) (strcmp(s, "_etag") && strcmp(s, "_ts") && strcmp(s, "_lsn"))

/* An item as found in storage. */
typedef struct item {
  cJSON *doc;              /* parsed; NULL when absent */
  size_t size;             /* bytes of JSON */
  int64_t expiry;          /* 0: never */
  uint64_t lsn;
} item;

static void item_free (item *it) {
  cJSON_Delete(it->doc);
  it->doc = NULL;
}

void rg_wres_free (rg_wres *r) {
  cJSON_Delete(r->doc);
  r->doc = NULL;
}


/*
** {=====================================================================
** Reading items
** ======================================================================
*/
int rg_item_get (MDB_txn *txn, rg_env *env, const rg_ikey *k, int64_t now,
                 MDB_val *json, rg_err *e) {
  MDB_val key, v;
  int64_t expiry;
  int rc;
  key.mv_data = (void *)k->key;
  key.mv_size = k->len;
  rc = mdb_get(txn, env->dbi[RG_DB_ITEMS], &key, &v);
  if (rc == MDB_NOTFOUND) return rg_fail(e, 404, "item not found");
  if (rc) return rg_fail_mdb(e, rc, "read");
  if (v.mv_size < RG_VHDR) return rg_fail(e, 500, "corrupt item record");
  expiry = (int64_t)rg_get_u64((const uint8_t *)v.mv_data);
  if (expiry != 0 && expiry <= now) return rg_fail(e, 404, "item not found");
  json->mv_data = (char *)v.mv_data + RG_VHDR;
  json->mv_size = v.mv_size - RG_VHDR;
  return 0;
}

/* Does the stored document really carry this id and partition key?  Only
** needed when the key holds digests in place of long strings. */
static int same_identity (const rg_cspec *c, const cJSON *doc,
                          const rg_ikey *k, const char *id, size_t idlen) {
  const cJSON *sid = cJSON_GetObjectItemCaseSensitive(doc, "id");
  const cJSON *pkv[RG_MAX_PK_PATHS];
  rg_ikey k2;
  rg_buf b;
  int same;
  if (!cJSON_IsString(sid)) return 0;
  rg_buf_init(&b);
  rg_str_bytes(sid, &b);
  same = b.n == idlen && memcmp(b.p ? b.p : "", id, idlen) == 0;
  rg_buf_free(&b);
  if (!same) return 0;
  rg_doc_pk(c, doc, pkv);
  if (rg_ikey_partition(c, pkv, &k2, NULL)) return 0;
  return k2.hash == k->hash && k2.lplen == k->lplen;
}

/* Loads the current version of an item, parsed. */
static int load_item (rg_scope *s, const rg_cont *c, const rg_ikey *k,
                      const char *id, size_t idlen, item *it, rg_err *e) {
  MDB_val key, v;
  int rc;
  memset(it, 0, sizeof(*it));
  key.mv_data = (void *)k->key;
  key.mv_size = k->len;
  rc = mdb_get(s->txn, s->env->dbi[RG_DB_ITEMS], &key, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rg_scope_mdb(s, rc, "read", e);
  if (v.mv_size < RG_VHDR) return rg_fail(e, 500, "corrupt item record");
  it->expiry = (int64_t)rg_get_u64((const uint8_t *)v.mv_data);
  it->size = v.mv_size - RG_VHDR;
  if ((rc = rg_json_parse((const char *)v.mv_data + RG_VHDR, it->size,
                          &it->doc, e)))
    return rg_fail(e, 500, "corrupt item: %s", e->msg);
  {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(it->doc, "_lsn");
    int64_t lsn = 0;
    if (l && cJSON_IsNumber(l)) rg_num_int(l, &lsn);
    it->lsn = (uint64_t)lsn;
  }
  if (k->lossy && id && !same_identity(c->spec, it->doc, k, id, idlen)) {
    item_free(it);
    return rg_fail(e, 500, "key digest collision between two items; "
                   "choose a shorter id or partition key");
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Storage of one change
** ======================================================================
*/
/* Adds `dn` items and `db` bytes to a counter pair stored under a key. */
static int bump (rg_scope *s, int dbi, const void *k, size_t kn, int64_t dn,
                 int64_t db, rg_err *e) {
  MDB_val key, v;
  uint8_t buf[16];
  uint64_t n = 0, b = 0;
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_get(s->txn, s->env->dbi[dbi], &key, &v);
  if (rc == 0 && v.mv_size == 16) {
    n = rg_get_u64((const uint8_t *)v.mv_data);
    b = rg_get_u64((const uint8_t *)v.mv_data + 8);
  }
  else if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "stats", e);
  n += (uint64_t)dn;
  b += (uint64_t)db;
  if (n == 0 && dbi == RG_DB_PARTS) return rg_del(s, dbi, k, kn, NULL, e);
  rg_put_u64(buf, n);
  rg_put_u64(buf + 8, b);
  return rg_put(s, dbi, k, kn, buf, 16, e);
}

/* Bytes now held by a logical partition. */
static int partition_bytes (rg_scope *s, const rg_ikey *k, uint64_t *bytes,
                            rg_err *e) {
  MDB_val key, v;
  int rc;
  key.mv_data = (void *)k->key;
  key.mv_size = k->lplen;
  *bytes = 0;
  rc = mdb_get(s->txn, s->env->dbi[RG_DB_PARTS], &key, &v);
  if (rc == 0 && v.mv_size == 16)
    *bytes = rg_get_u64((const uint8_t *)v.mv_data + 8);
  else if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "stats", e);
  return 0;
}

/* ttl and latest keys: cid | u16 range? | u64 | u64 digest */
static size_t ttl_key (uint8_t *out, uint32_t cid, int64_t expiry,
                       uint64_t digest) {
  rg_put_u32(out, cid);
  rg_put_u64(out + 4, (uint64_t)expiry);
  rg_put_u64(out + 12, digest);
  return 20;
}

static size_t latest_key (uint8_t *out, uint32_t cid, int range, uint64_t lsn,
                          uint64_t digest) {
  rg_put_u32(out, cid);
  rg_put_u16(out + 4, (uint32_t)range);
  rg_put_u64(out + 6, lsn);
  rg_put_u64(out + 14, digest);
  return 22;
}

/*
** Writes one change: `neu` (NULL for a delete) replaces `old` (its `doc`
** NULL when absent).  `text` is the new version's JSON.  All checks have
** passed; what fails now fails the scope.
*/
static int store (rg_scope *s, const rg_cont *c, const rg_ikey *k, item *old,
                  const cJSON *neu, const rg_buf *text, int64_t expiry,
                  int op, int ttl_expired, rg_err *e) {
  const rg_cspec *spec = c->spec;
  uint64_t digest = rg_ikey_digest(k->key, k->len);
  uint64_t lsn = rg_scope_lsn(s, e);
  uint8_t tk[24], lk[24], ck[8];
  int rc;
  int64_t dbytes;
  if (lsn == 0) return s->failed;
  if (neu) {                                    /* the item itself */
    uint8_t *val = (uint8_t *)rg_reserve(s, RG_DB_ITEMS, k->key, k->len,
                                         RG_VHDR + text->n, e);
    if (val == NULL) return s->failed;
    rg_put_u64(val, (uint64_t)expiry);
    memcpy(val + RG_VHDR, text->p, text->n);
  }
  else if ((rc = rg_del(s, RG_DB_ITEMS, k->key, k->len, NULL, e))) return rc;
  if ((rc = rg_index_update(s, spec, k, old->doc, neu, e))) return rc;
  if (old->doc && old->expiry &&                /* TTL entries */
      (rc = rg_del(s, RG_DB_TTL, tk,
                   ttl_key(tk, spec->cid, old->expiry, digest), NULL, e)))
    return rc;
  if (neu && expiry &&
      (rc = rg_put(s, RG_DB_TTL, tk, ttl_key(tk, spec->cid, expiry, digest),
                k->key, k->len, e)))
    return rc;
  if (old->doc &&                               /* latest-version entry */
      (rc = rg_del(s, RG_DB_LATEST, lk,
                latest_key(lk, spec->cid, k->range, old->lsn, digest), NULL, e)))
    return rc;
  if (neu &&
      (rc = rg_put(s, RG_DB_LATEST, lk,
                latest_key(lk, spec->cid, k->range, lsn, digest),
                k->key, k->len, e)))
    return rc;
  if ((rc = rg_feed_append(s, c, k, op, ttl_expired,
                           neu ? neu : old->doc, neu ? text : NULL, e)))
    return rc;
  dbytes = (int64_t)(neu ? text->n : 0) - (int64_t)(old->doc ? old->size : 0);
  if ((rc = bump(s, RG_DB_PARTS, k->key, k->lplen,
                 (neu != NULL) - (old->doc != NULL), dbytes, e)))
    return rc;
  if ((rc = bump(s, RG_DB_META, ck, rg_meta_key(ck, RG_MK_STATS, spec->cid,
                                                NULL, 0),
                 (neu != NULL) - (old->doc != NULL), dbytes, e)))
    return rc;
  s->work.written++;
  s->work.write_bytes += neu ? text->n : old->size;
  if (neu && text->n > 1024) s->work.write_extra_kb += (text->n - 1) / 1024;
  s->ord++;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** TTL
** ======================================================================
*/
/* Expiry of a new version (0: never); 400 for a bad ttl field. */
static int item_expiry (const rg_cspec *c, const cJSON *doc, int64_t now,
                        int64_t *expiry, rg_err *e) {
  int64_t ttl;
  int rc;
  *expiry = 0;
  if ((rc = rg_doc_ttl(c, doc, &ttl, e))) return rc;
  if (ttl > 0) *expiry = now + ttl;
  return 0;
}

int rg_purge_expired (rg_scope *s, const rg_cont *c, int *count, rg_err *e) {
  uint8_t from[24];
  int rc = 0, i;
  *count = 0;
  if (!c->spec->ttl_on) return 0;
  for (;;) {                         /* in rounds: collect, then delete */
    MDB_cursor *cur;
    MDB_val k, v;
    rg_ikey keys[32];
    uint8_t tkeys[32][20];
    int n = 0;
    if ((rc = mdb_cursor_open(s->txn, s->env->dbi[RG_DB_TTL], &cur)))
      return rg_scope_mdb(s, rc, "ttl", e);
    rg_put_u32(from, c->spec->cid);
    rg_put_u64(from + 4, 0);
    k.mv_data = from;
    k.mv_size = 12;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && n < 32 && k.mv_size == 20 && v.mv_size <= RG_MAX_KEY &&
           rg_get_u32((const uint8_t *)k.mv_data) == c->spec->cid &&
           (int64_t)rg_get_u64((const uint8_t *)k.mv_data + 4) <= s->now) {
      rg_ikey *ik = &keys[n];
      memset(ik, 0, sizeof(*ik));
      memcpy(ik->key, v.mv_data, v.mv_size);
      ik->len = v.mv_size;
      memcpy(tkeys[n], k.mv_data, 20);
      n++;
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "ttl", e);
    for (i = 0; i < n; i++) {
      item old;
      rg_ikey *ik = &keys[i];
      const cJSON *pkv[RG_MAX_PK_PATHS];
      rg_ikey full;
      if ((rc = load_item(s, c, ik, NULL, 0, &old, e))) return rc;
      if (old.doc == NULL) {         /* an entry without its item: drop it */
        if ((rc = rg_del(s, RG_DB_TTL, tkeys[i], 20, NULL, e))) return rc;
        continue;
      }
      /* the partition key gives the range and hash; the key is as stored */
      rg_doc_pk(c->spec, old.doc, pkv);
      if ((rc = rg_ikey_partition(c->spec, pkv, &full, e))) {
        item_free(&old);
        return rg_fail(e, 500, "corrupt item: %s", e->msg);
      }
      memcpy(full.key, ik->key, ik->len);
      full.len = ik->len;
      rc = store(s, c, &full, &old, NULL, NULL, 0, RG_OP_DELETE, 1, e);
      item_free(&old);
      if (rc) return rc;
      (*count)++;
    }
    if (n < 32) return 0;
  }
}

/* Once per scope and container: is it alive, and purge what expired (items
** past their TTL, change records past the feed's retention). */
static int prepare (rg_scope *s, const rg_cont *c, rg_err *e) {
  int i, n, rc;
  for (i = 0; i < s->npurged; i++)
    if (s->purged[i] == c->spec->cid) return 0;
  if ((rc = rg_cont_alive(s->txn, c, e))) return rc;
  if (s->npurged < (int)(sizeof(s->purged) / sizeof(s->purged[0])))
    s->purged[s->npurged++] = c->spec->cid;
  if ((rc = rg_purge_expired(s, c, &n, e))) return rc;
  return rg_feed_trim(s, c, 0, e);   /* all_versions retention (feed.c) */
}
/* }===================================================================== */


/*
** {=====================================================================
** Triggers: the script runtime's hooks (hooks.h)
** ======================================================================
*/
static int trigger_pre (rg_scope *s, const rg_cont *c, const rg_wreq *w,
                        int op, const rg_ikey *k, cJSON **doc, rg_err *e) {
  const rg_hooks *h = s->env->hooks;
  if (h == NULL || h->trigger_pre == NULL) {
    if (w->pre_trigger || w->post_trigger)
      return rg_fail(e, 400, "this database has no script runtime attached: "
                     "a write cannot name triggers");
    return 0;
  }
  return h->trigger_pre(s->env->hook_state, s, c, w, op, k, doc, e);
}

static int trigger_post (rg_scope *s, const rg_cont *c, const rg_wreq *w,
                         int op, const rg_ikey *k, const cJSON *stored,
                         rg_wres *r, rg_err *e) {
  const rg_hooks *h = s->env->hooks;
  if (h == NULL || h->trigger_post == NULL) return 0;
  return h->trigger_post(s->env->hook_state, s, c, w, op, k, stored, r, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Container replace: rebuilding indexes and expiries
** ======================================================================
*/
#define REBUILD_CHUNK 64

/* One item brought to the new spec: its key as stored, its value. */
static int rebuild_item (rg_scope *s, const rg_cont *c, const rg_cspec *from,
                         const uint8_t *key, size_t klen, int reindex,
                         int reexpire, rg_err *e) {
  const rg_cspec *spec = c->spec;
  const cJSON *pkv[RG_MAX_PK_PATHS];
  cJSON *doc = NULL;
  char *text = NULL;
  int64_t old_expiry, expiry, ts = 0;
  uint8_t tk[24];
  rg_ikey k;
  MDB_val kv, v;
  size_t n;
  int rc;
  kv.mv_data = (void *)key;
  kv.mv_size = klen;
  if ((rc = mdb_get(s->txn, s->env->dbi[RG_DB_ITEMS], &kv, &v)))
    return rg_scope_mdb(s, rc, "read", e);
  if (v.mv_size < RG_VHDR) return rg_fail(e, 500, "corrupt item record");
  old_expiry = (int64_t)rg_get_u64((const uint8_t *)v.mv_data);
  n = v.mv_size - RG_VHDR;
  /* the value is copied: the writes below may move the page it is on */
  if ((text = (char *)malloc(n ? n : 1)) == NULL)
    return rg_fail(e, 500, "out of memory");
  memcpy(text, (const char *)v.mv_data + RG_VHDR, n);
  if ((rc = rg_json_parse(text, n, &doc, e))) {
    rc = rg_fail(e, 500, "corrupt item: %s", e->msg);
    goto done;
  }
  rg_doc_pk(spec, doc, pkv);       /* the key gives hash and range */
  if ((rc = rg_ikey_partition(spec, pkv, &k, e))) {
    rc = rg_fail(e, 500, "corrupt item: %s", e->msg);
    goto done;
  }
  memcpy(k.key, key, klen);
  k.len = klen;
  if (reindex && (rc = rg_index_reindex(s, from, spec, &k, doc, e))) goto done;
  if (!reexpire) goto done;
  {                                /* the expiry counts from the last write */
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "_ts");
    if (t) rg_num_int(t, &ts);
  }
  if (item_expiry(spec, doc, ts, &expiry, e)) {   /* a bad ttl: the default */
    cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(doc, "ttl"));
    item_expiry(spec, doc, ts, &expiry, e);
  }
  if (expiry != old_expiry) {
    uint64_t digest = rg_ikey_digest(key, klen);
    uint8_t *val;
    if ((old_expiry &&
         (rc = rg_del(s, RG_DB_TTL, tk, ttl_key(tk, spec->cid, old_expiry,
                                               digest), NULL, e))) ||
        (expiry &&
         (rc = rg_put(s, RG_DB_TTL, tk, ttl_key(tk, spec->cid, expiry, digest),
                      key, klen, e))))
      goto done;
    if ((val = (uint8_t *)rg_reserve(s, RG_DB_ITEMS, key, klen, RG_VHDR + n,
                                     e)) == NULL) {
      rc = s->failed;
      goto done;
    }
    rg_put_u64(val, (uint64_t)expiry);
    memcpy(val + RG_VHDR, text, n);
  }
done:
  cJSON_Delete(doc);
  free(text);
  return rc;
}

int rg_cont_rebuild (rg_scope *s, const rg_cont *c, const rg_cspec *from,
                     int reindex, int reexpire, rg_err *e) {
  uint8_t keys[REBUILD_CHUNK][RG_MAX_KEY], prefix[4];
  size_t lens[REBUILD_CHUNK];
  int i, n, rc, more = 1;
  if (!reindex && !reexpire) return 0;
  rg_put_u32(prefix, c->spec->cid);
  memcpy(keys[0], prefix, 4);
  lens[0] = 4;
  n = 0;
  while (more) {                   /* chunks of keys, then their items */
    MDB_cursor *cur;
    MDB_val k, v;
    uint8_t after[RG_MAX_KEY];
    size_t alen = n ? lens[n - 1] : 4;
    memcpy(after, n ? keys[n - 1] : prefix, alen);
    if ((rc = mdb_cursor_open(s->txn, s->env->dbi[RG_DB_ITEMS], &cur)))
      return rg_scope_mdb(s, rc, "items", e);
    k.mv_data = after;
    k.mv_size = alen;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (rc == 0 && n && k.mv_size == alen && memcmp(k.mv_data, after, alen) == 0)
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    for (n = 0; rc == 0 && n < REBUILD_CHUNK && k.mv_size >= 4 &&
                memcmp(k.mv_data, prefix, 4) == 0; n++) {
      memcpy(keys[n], k.mv_data, k.mv_size);
      lens[n] = k.mv_size;
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "items", e);
    more = n == REBUILD_CHUNK;
    for (i = 0; i < n; i++)
      if ((rc = rebuild_item(s, c, from, keys[i], lens[i], reindex, reexpire,
                             e)))
        return rc;
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** The write path
** ======================================================================
*/
static void etag_of (char *out, uint64_t lsn, uint32_t ord) {
  snprintf(out, 40, "\"%llx-%x\"", (unsigned long long)lsn, ord);
}

/* Drops incoming system properties and sets the new ones. */
static int set_system (cJSON *doc, const char *etag, int64_t ts, uint64_t lsn,
                       rg_err *e) {
  cJSON *c = doc->child, *next, *n;
  for (; c; c = next) {
    next = c->next;
    if (c->string && !NOT_SYSTEM(c->string))
      cJSON_Delete(cJSON_DetachItemViaPointer(doc, c));
  }
  if ((n = cJSON_CreateString(etag)) == NULL) goto oom;
  cJSON_AddItemToObject(doc, "_etag", n);
  if ((n = rg_num_new_int(ts)) == NULL) goto oom;
  cJSON_AddItemToObject(doc, "_ts", n);
  if ((n = rg_num_new_int((int64_t)lsn)) == NULL) goto oom;
  cJSON_AddItemToObject(doc, "_lsn", n);
  return 0;
oom:
  return rg_fail(e, 500, "out of memory");
}

static int check_if_match (const item *old, const char *if_match, rg_err *e) {
  const cJSON *et;
  if (if_match == NULL) return 0;
  if (old->doc == NULL)
    return rg_fail(e, 412, "precondition failed: the item does not exist");
  et = cJSON_GetObjectItemCaseSensitive(old->doc, "_etag");
  if (!cJSON_IsString(et) || strcmp(et->valuestring, if_match) != 0)
    return rg_fail(e, 412, "precondition failed: the item's etag is %s, not "
                   "%s", cJSON_IsString(et) ? et->valuestring : "(none)",
                   if_match);
  return 0;
}

/* A document's partition key values must be scalars; *missing is the
** first level the document lacks (-1: none). */
static int doc_pk_check (const rg_cspec *c, const cJSON *const *pkv,
                         int *missing, rg_err *e) {
  int i;
  *missing = -1;
  for (i = 0; i < c->npk; i++) {
    const cJSON *v = pkv[i];
    if (v == NULL) { if (*missing < 0) *missing = i; }
    else if (!(cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v) ||
               cJSON_IsNull(v)))
      return rg_fail(e, 400, "a partition key value must be a string, "
                     "number, boolean or null");
  }
  return 0;
}

/* Resolves the item's key from the request. */
static int resolve (rg_scope *s, const rg_cont *c, const rg_wreq *w,
                    rg_ikey *k, const char **id, size_t *idlen, rg_err *e) {
  const cJSON *pkv[RG_MAX_PK_PATHS];
  int rc, i, missing = -1, other;
  if (w->doc != NULL) {
    const cJSON *jid;
    if (!cJSON_IsObject(w->doc))
      return rg_fail(e, 400, "a document must be an object");
    jid = cJSON_GetObjectItemCaseSensitive(w->doc, "id");
    if (jid == NULL) return rg_fail(e, 400, "the document has no id");
    if (!cJSON_IsString(jid)) return rg_fail(e, 400, "id must be a string");
    if (strstr(jid->valuestring, "\xC0\x80"))
      return rg_fail(e, 400, "id must not contain '/', '\\', '?', '#' or NUL");
    *id = jid->valuestring;
    *idlen = strlen(jid->valuestring);
    rg_doc_pk(c->spec, w->doc, pkv);
  }
  else {
    *id = w->id;
    *idlen = w->idlen;
    for (i = 0; i < RG_MAX_PK_PATHS; i++) pkv[i] = w->pkv[i];
  }
  if ((rc = rg_check_id(*id, *idlen, RG_MAX_ID, "id", e))) return rc;
  if (w->doc != NULL && (rc = doc_pk_check(c->spec, pkv, &missing, e)))
    return rc;
  if ((rc = rg_ikey_partition(c->spec, pkv, k, e))) return rc;
  other = s->bound.spec != NULL &&
          (s->bound.spec->cid != c->spec->cid || s->bound.lplen != k->lplen ||
           memcmp(s->bound.lp, k->key, k->lplen) != 0);
  /* a document lacking its key (the none partition key) is written only
     where the write names that partition (a partition key given with it,
     a batch's, a procedure's): elsewhere it is most likely a mistake */
  if (missing >= 0 && (s->bound.spec == NULL || other))
    return rg_fail(e, 400, "the partition key value%s is missing (%s%s)",
                   c->spec->npk > 1 ? " at a level" : "",
                   c->spec->npk > 1 ? "every level is required: " : "path ",
                   c->spec->pk[missing].seg[0]);
  if (other) return rg_fail(e, 400, "%s", s->bound.msg);
  rg_ikey_id(k, *id, *idlen);
  return 0;
}

static int write_body (rg_scope *s, const rg_cont *c, const rg_wreq *w,
                       rg_wres *r, item *old, cJSON **neu, rg_err *e) {
  const char *id = NULL;
  size_t idlen = 0;
  rg_ikey k;
  int rc, op = w->op;
  int64_t expiry = 0;
  uint64_t lsn, pbytes;
  rg_buf text;
  if ((rc = prepare(s, c, e))) return rc;
  if ((rc = resolve(s, c, w, &k, &id, &idlen, e))) return rc;
  if ((rc = load_item(s, c, &k, id, idlen, old, e))) return rc;

  switch (op) {                                 /* conditions */
    case RG_OP_CREATE:
      if (old->doc)
        return rg_fail(e, 409, "conflict: an item with id '%s' already exists "
                       "in this partition", id);
      break;
    case RG_OP_UPSERT:
      if (w->if_match && (rc = check_if_match(old, w->if_match, e))) return rc;
      op = old->doc ? RG_OP_REPLACE : RG_OP_CREATE;
      break;
    default:                                    /* replace, delete, patch */
      if (old->doc == NULL) return rg_fail(e, 404, "item not found");
      if ((rc = check_if_match(old, w->if_match, e))) return rc;
  }

  if (op == RG_OP_PATCH) {                      /* the new version */
    int pass = 1;
    if (w->filter && (rc = rg_filter_eval(w->filter, old->doc, &pass, e)))
      return rc;
    if (!pass)
      return rg_fail(e, 412, "precondition failed: the patch filter is false "
                     "for the item");
    if ((*neu = cJSON_Duplicate(old->doc, 1)) == NULL)
      return rg_fail(e, 500, "out of memory");
    if ((rc = rg_patch_apply(*neu, w->ops, w->nops, e))) return rc;
    {                                           /* identity must not move */
      rg_ikey k2;
      const cJSON *pkv[RG_MAX_PK_PATHS], *nid;
      nid = cJSON_GetObjectItemCaseSensitive(*neu, "id");
      rg_doc_pk(c->spec, *neu, pkv);
      if (!cJSON_IsString(nid) || strcmp(nid->valuestring, id) != 0 ||
          rg_ikey_partition(c->spec, pkv, &k2, NULL) != 0 ||
          k2.lplen != k.lplen || memcmp(k2.key, k.key, k.lplen) != 0)
        return rg_fail(e, 400, "a patch cannot change the id or the "
                       "partition key");
    }
    op = RG_OP_REPLACE;
  }
  else if (op != RG_OP_DELETE) {
    if ((*neu = cJSON_Duplicate(w->doc, 1)) == NULL)
      return rg_fail(e, 500, "out of memory");
  }

  if ((rc = trigger_pre(s, c, w, op, &k, neu, e))) return rc;

  if (*neu) {                                   /* system properties, limits */
    lsn = rg_scope_lsn(s, e);
    if (lsn == 0) return s->failed;
    etag_of(r->etag, lsn, s->ord);
    if ((rc = set_system(*neu, r->etag, s->now, lsn, e))) return rc;
    if ((rc = item_expiry(c->spec, *neu, s->now, &expiry, e))) return rc;
  }
  rg_buf_init(&text);
  if (*neu) {
    rg_json_print(*neu, &text);
    if (text.oom) { rg_buf_free(&text); return rg_fail(e, 500, "out of memory"); }
    if (text.n > RG_MAX_ITEM) {
      rc = rg_fail(e, 413, "the item is %lu bytes; the limit is %u",
                   (unsigned long)text.n, RG_MAX_ITEM);
      goto done;
    }
    if (text.n > (old->doc ? old->size : 0)) {
      if ((rc = partition_bytes(s, &k, &pbytes, e))) goto done;
      if (pbytes - (old->doc ? old->size : 0) + text.n >
          c->spec->max_partition_bytes) {
        rc = rg_fail(e, 403, "the logical partition is full (%llu bytes; "
                     "the limit is %llu)", (unsigned long long)pbytes,
                     (unsigned long long)c->spec->max_partition_bytes);
        goto done;
      }
    }
    if ((rc = rg_unique_check(s, c->spec, &k, old->doc, *neu, e))) goto done;
  }
  if ((rc = store(s, c, &k, old, *neu, &text, expiry, op, w->ttl_expired, e)))
    goto done;
  r->status = op == RG_OP_CREATE ? 201 : op == RG_OP_DELETE ? 204 : 200;
  rc = trigger_post(s, c, w, op, &k, *neu ? *neu : old->doc, r, e);
done:
  rg_buf_free(&text);
  return rc;
}

int rg_write (rg_scope *s, const rg_cont *c, const rg_wreq *w, rg_wres *r,
              rg_err *e) {
  item old;
  cJSON *neu = NULL;
  int rc;
  memset(r, 0, sizeof(*r));
  memset(&old, 0, sizeof(old));
  if (s->failed) return rg_fail(e, s->failed, "the transaction has failed");
  rc = write_body(s, c, w, r, &old, &neu, e);
  if (rc == 0 && r->doc == NULL && neu != NULL) {
    r->doc = neu;                               /* the caller receives it */
    neu = NULL;
  }
  cJSON_Delete(neu);
  item_free(&old);
  if (rc) rg_wres_free(r);
  return rc;
}
/* }===================================================================== */
