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
#include "store/search.h"
#include "store/spill.h"
#include "store/vindex.h"
#include "store/write.h"

#define NOT_SYSTEM(s) (strcmp(s, "_etag") && strcmp(s, "_ts") && strcmp(s, "_lsn"))

/* An item as found in storage. */
typedef struct item {
  cJSON *doc;              /* parsed; NULL when absent */
  size_t size;             /* bytes of JSON */
  int64_t expiry;          /* 0: never */
  uint32_t seq;            /* its reference's seq */
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
int rg_item_get (rg_txn *txn, rg_env *env, const rg_ikey *k, int64_t now,
                 rg_val *json, rg_err *e) {
  rg_val key, v;
  rg_ihdr h;
  const char *text;
  size_t n;
  int rc;
  key.p = (void *)k->key;
  key.n = k->len;
  rc = rg_kv_get(txn, RG_DB_ITEMS, key.p, key.n, &v);
  if (rc == RG_NOTFOUND) return rg_fail(e, 404, "item not found");
  if (rc) return rg_kv_fail(e, rc, "read");
  if (rg_ihdr_get(v.p, v.n, &h, &text, &n))
    return rg_fail(e, 500, "corrupt item record");
  if (h.expiry != 0 && h.expiry <= now) return rg_fail(e, 404, "item not found");
  json->p = (void *)text;
  json->n = n;
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
  rg_val key, v;
  rg_ihdr h;
  const char *text;
  int rc;
  memset(it, 0, sizeof(*it));
  key.p = (void *)k->key;
  key.n = k->len;
  rc = rg_kv_get(s->txn, RG_DB_ITEMS, key.p, key.n, &v);
  if (rc == RG_NOTFOUND) return 0;
  if (rc) return rg_scope_fail(s, rc, "read", e);
  if (rg_ihdr_get(v.p, v.n, &h, &text, &it->size))
    return rg_fail(e, 500, "corrupt item record");
  it->expiry = h.expiry;
  it->seq = h.seq;
  if ((rc = rg_json_parse(text, it->size, &it->doc, e)))
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
/* Bytes now held by a logical partition. */
static int partition_bytes (rg_scope *s, const rg_ikey *k, uint64_t *bytes,
                            rg_err *e) {
  rg_val key, v;
  int rc;
  key.p = (void *)k->key;
  key.n = k->lplen;
  *bytes = 0;
  rc = rg_kv_get(s->txn, RG_DB_PARTS, key.p, key.n, &v);
  if (rc == 0 && v.n == 16)
    *bytes = rg_get_u64((const uint8_t *)v.p + 8);
  else if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "stats", e);
  return 0;
}

/* A new item's seq, with its refs entry (seqs wrap after 2^32 creates:
** one still in use is skipped). */
static int new_seq (rg_scope *s, const rg_ikey *k, uint32_t *seq,
                    rg_err *e) {
  int rc, tries;
  for (tries = 0; tries < 1000; tries++) {
    uint8_t b[RG_REF_KEY];
    if ((*seq = rg_scope_seq(s, 1, e)) == 0) return s->failed;
    rc = rg_put_flags(s, RG_DB_REFS, b, rg_key_ref(b, *seq), k->key, k->len,
                      RG_KV_APPEND | RG_KV_NOOVERWRITE, e);
    if (rc != RG_EXISTS) return rc;
  }
  return rg_fail(e, 507, "insufficient storage: no item seq is free");
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
  uint64_t lsn = rg_scope_lsn(s, k->key, k->len, e);
  uint8_t tk[24], lk[8], ld[16], ck[8];
  uint32_t seq = old->seq;
  int rc;
  int64_t dbytes;
  if (lsn == 0) return s->failed;
  if (old->doc == NULL && (rc = new_seq(s, k, &seq, e))) return rc;
  if (neu) {                                    /* the item itself */
    uint8_t hdr[RG_IHDR_MAX], *val;
    size_t hn = rg_ihdr_put(hdr, seq, expiry);
    val = (uint8_t *)rg_reserve(s, RG_DB_ITEMS, k->key, k->len, hn + text->n, e);
    if (val == NULL) return s->failed;
    memcpy(val, hdr, hn);
    memcpy(val + hn, text->p, text->n);
  }
  else {
    uint8_t b[RG_REF_KEY];
    if ((rc = rg_del(s, RG_DB_ITEMS, k->key, k->len, NULL, e)) ||
        (rc = rg_del(s, RG_DB_REFS, b, rg_key_ref(b, seq), NULL, e)))
      return rc;
  }
  if ((rc = rg_index_update(s, spec, k, seq, old->doc, neu, e))) return rc;
  if (spec->nvix && (rc = rg_vindex_update(s, spec, seq, old->doc, neu, e)))
    return rc;
  if (spec->ft && (rc = rg_ftindex_update(s, spec, seq, old->doc, neu, e)))
    return rc;
  if (old->doc && old->expiry &&                /* TTL entries */
      (rc = rg_del(s, RG_DB_TTL, tk,
                   rg_key_ttl(tk, spec->cid, old->expiry, digest), NULL, e)))
    return rc;
  if (neu && expiry &&
      (rc = rg_put(s, RG_DB_TTL, tk,
                   rg_key_ttl(tk, spec->cid, expiry, digest),
                k->key, k->len, e)))
    return rc;
  if (old->doc) {                               /* latest-version entry */
    size_t kn = rg_latest_entry(lk, ld, spec->cid, k->range, old->lsn, seq);
    if ((rc = rg_ddel(s, RG_DB_LATEST, lk, kn, ld, RG_LATEST_DUP, NULL, e)))
      return rc;
  }
  if (neu) {
    size_t kn = rg_latest_entry(lk, ld, spec->cid, k->range, lsn, seq);
    if ((rc = rg_dput(s, RG_DB_LATEST, lk, kn, ld, RG_LATEST_DUP, 1, e)))
      return rc;
  }
  if (spec->all_versions &&
      (rc = rg_feed_append(s, c, k, op, ttl_expired,
                           neu ? neu : old->doc, neu ? text : NULL, e)))
    return rc;
  dbytes = (int64_t)(neu ? text->n : 0) - (int64_t)(old->doc ? old->size : 0);
  if ((rc = rg_scope_add(s, RG_DB_PARTS, k->key, k->lplen,
                         (neu != NULL) - (old->doc != NULL), dbytes,
                         spec->max_partition_bytes, RG_KV_DROP0, e)) ||
      (rc = rg_scope_add(s, RG_DB_META, ck,
                         rg_meta_key(ck, RG_MK_STATS, spec->cid, NULL, 0),
                         (neu != NULL) - (old->doc != NULL), dbytes, 0, 0,
                         e)))
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
    rg_cur *cur;
    rg_val k, v;
    rg_ikey keys[32];
    uint8_t tkeys[32][20];
    int n = 0;
    if ((rc = rg_cur_open(s->txn, RG_DB_TTL, &cur)))
      return rg_scope_fail(s, rc, "ttl", e);
    k.p = from;
    k.n = rg_key_ttl(from, c->spec->cid, 0, 0) - 8;   /* cid | expiry 0 */
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    while (rc == 0 && n < 32 && k.n == 20 && v.n <= RG_MAX_KEY &&
           rg_get_u32((const uint8_t *)k.p) == c->spec->cid &&
           (int64_t)rg_get_u64((const uint8_t *)k.p + 4) <= s->now) {
      rg_ikey *ik = &keys[n];
      memset(ik, 0, sizeof(*ik));
      memcpy(ik->key, v.p, v.n);
      ik->len = v.n;
      memcpy(tkeys[n], k.p, 20);
      n++;
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
    }
    rg_cur_close(cur);
    if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "ttl", e);
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
  if (w->no_triggers) return 0;
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
  if (w->no_triggers || h == NULL || h->trigger_post == NULL) return 0;
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
  rg_ihdr h;
  rg_val kv, v;
  const char *json;
  size_t n;
  int rc;
  kv.p = (void *)key;
  kv.n = klen;
  if ((rc = rg_kv_get(s->txn, RG_DB_ITEMS, kv.p, kv.n, &v)))
    return rg_scope_fail(s, rc, "read", e);
  if (rg_ihdr_get(v.p, v.n, &h, &json, &n))
    return rg_fail(e, 500, "corrupt item record");
  old_expiry = h.expiry;
  /* the value is copied: the writes below may move the page it is on */
  if ((text = (char *)malloc(n ? n : 1)) == NULL)
    return rg_fail(e, 500, "out of memory");
  memcpy(text, json, n);
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
  if (reindex && (rc = rg_index_reindex(s, from, spec, &k, h.seq, doc, e)))
    goto done;
  if (reindex && (from->nvix || spec->nvix) &&
      (rc = rg_vindex_reindex(s, from, spec, h.seq, doc, e)))
    goto done;
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
    uint8_t hdr[RG_IHDR_MAX], *val;
    size_t hn = rg_ihdr_put(hdr, h.seq, expiry);
    if ((old_expiry &&
         (rc = rg_del(s, RG_DB_TTL, tk, rg_key_ttl(tk, spec->cid, old_expiry,
                                               digest), NULL, e))) ||
        (expiry &&
         (rc = rg_put(s, RG_DB_TTL, tk,
                      rg_key_ttl(tk, spec->cid, expiry, digest),
                      key, klen, e))))
      goto done;
    if ((val = (uint8_t *)rg_reserve(s, RG_DB_ITEMS, key, klen, hn + n,
                                     e)) == NULL) {
      rc = s->failed;
      goto done;
    }
    memcpy(val, hdr, hn);
    memcpy(val + hn, text, n);
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
  if (reindex && (rc = rg_ftindex_replace(s, from, c->spec, e))) return rc;
  lens[0] = rg_key_cid(prefix, c->spec->cid);
  memcpy(keys[0], prefix, lens[0]);
  n = 0;
  while (more) {                   /* chunks of keys, then their items */
    rg_cur *cur;
    rg_val k, v;
    uint8_t after[RG_MAX_KEY];
    size_t alen = n ? lens[n - 1] : 4;
    memcpy(after, n ? keys[n - 1] : prefix, alen);
    if ((rc = rg_cur_open(s->txn, RG_DB_ITEMS, &cur)))
      return rg_scope_fail(s, rc, "items", e);
    k.p = after;
    k.n = alen;
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    if (rc == 0 && n && k.n == alen && memcmp(k.p, after, alen) == 0)
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
    for (n = 0; rc == 0 && n < REBUILD_CHUNK && k.n >= 4 &&
                memcmp(k.p, prefix, 4) == 0; n++) {
      memcpy(keys[n], k.p, k.n);
      lens[n] = k.n;
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
    }
    rg_cur_close(cur);
    if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "items", e);
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

/* Resolves the item's key from the request; `restore`: a document lacking
** its key goes to the none partition wherever it is written (an upgrade's
** restore of what was there). */
static int resolve (rg_scope *s, const rg_cont *c, const rg_wreq *w,
                    int restore, rg_ikey *k, const char **id, size_t *idlen,
                    rg_err *e) {
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
  if (missing >= 0 && !restore && (s->bound.spec == NULL || other))
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
  int stored = 0;
  uint64_t lsn, pbytes, writes;
  rg_buf text;
  if ((rc = prepare(s, c, e))) return rc;
  if ((rc = resolve(s, c, w, 0, &k, &id, &idlen, e))) return rc;
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

  writes = s->writes;             /* what the checks below may not change */
  if (*neu) {                                   /* system properties, limits */
    lsn = rg_scope_lsn(s, k.key, k.len, e);
    if (lsn == 0) return s->failed;
    writes = s->writes;           /* (taking the scope's lsn writes it) */
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
  stored = 1;
  if ((rc = store(s, c, &k, old, *neu, &text, expiry, op, w->ttl_expired, e)))
    goto done;
  r->status = op == RG_OP_CREATE ? 201 : op == RG_OP_DELETE ? 204 : 200;
  rc = trigger_post(s, c, w, op, &k, *neu ? *neu : old->doc, r, e);
done:
  /* a check that fails leaves the scope as it was (write.h) */
  rg_assert(stored || s->failed || s->writes == writes);
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


/*
** {=====================================================================
** Bulk load
** ======================================================================
**
** A batch is written in two passes.  The first checks each document as a
** create would and, when it passes, makes every entry it needs (its item,
** refs, index, latest-version, TTL, unique and change-feed entries) into
** lists, one per table, each sorted into a run; the second merges each
** list's runs (a heap) and writes them in key order, with a cursor that
** appends past the table's last key (an empty container's first batch is
** written as fully packed pages).  Seqs are given in order, so refs and
** latest-version entries always append.  The statistics are bumped once
** per logical partition and once per merge (or spill).
** Items that exist (upsert) and keys given twice in a batch go through
** the ordinary write path afterwards, in the same scope.
**
** A load in one transaction holds its entries (rg_bulk_hold): the batches'
** lists and maps grow, batch after batch, and are merged into the tables
** only when they reach the bound, before a batch's upserts of existing
** items, or at the end of the load (rg_bulk_flush), so that each table
** takes one sorted run for many batches: past its last key it is appended
** to and its pages are written once.  The checks of a batch see what the
** held entries will write through the maps (keys, unique keys, partition
** sizes), as they see an earlier document of the same batch.
**
** Past the bound, a load that creates spills its entries (spill.h): each
** table's runs merged into one and written to a temporary file, the
** statistics of their partitions and container bumped in the load's
** transaction, and the lists and maps emptied, so that memory stays
** within the bound however many partitions the load fills (a partition
** met again reads its size, the spilled entries' included, from its
** statistics, so its limit is the load's as a whole).  At the end one merge
** takes every spilled run and the entries still in memory, a heap over
** their heads, so each table is written once in key order.  An id or a
** unique key given again in a later run than the one that holds it is no
** longer seen by the batch's checks: the merge meets it as a key already
** put and fails the load (409, naming the id or the unique key's paths),
** nothing of it written.  A load that upserts merges into the tables at
** the bound instead, so that its later batches find the items there.
*/
typedef struct bent {             /* a table entry, its bytes in the pool */
  uint64_t pre;                   /* the key's first 8 bytes, big-endian */
  size_t k, v;
  uint32_t kn, vn;
} bent;

typedef struct blist {
  bent *v;
  size_t n, cap;
  size_t sorted;                  /* v[0..sorted) is in sorted runs */
  size_t *runs, nruns, rcap;      /* where each run starts */
} blist;

typedef struct bslot {            /* a map of byte strings of the pool */
  uint64_t h;
  size_t off;                     /* 0: free (the pool starts with a byte) */
  uint32_t len;
  int64_t a, b, c;
} bslot;

typedef struct bmap {
  bslot *v;
  size_t cap, n;
} bmap;

struct rg_bulk {
  rg_scope *s;
  const rg_cont *c;
  int mode;
  rg_buf pool;
  blist t[RG_NDB];
  bmap keys, uniq, parts;
  size_t *later, nlater, cap;     /* through the write path afterwards */
  uint32_t *vseq;                 /* the seq of each new item, when the
                                     container has vector indexes */
  rg_buf text, ikeys;
  bent *merged;                   /* the runs of a list merged */
  size_t mcap;
  size_t *heap;                   /* the merge's runs, by their head */
  size_t hcap;
  size_t hold;                    /* held up to this many bytes (0: not held) */
  rg_spill *sp;                   /* the spilled runs, or NULL */
  struct srun { uint64_t at[RG_NDB + 1]; } *sruns;  /* table db's entries
                                     of a run: [at[db], at[db + 1]) */
  size_t nsruns, srcap;
  size_t spilled;                 /* runs spilled since rg_bulk_hold */
  char *spec;                     /* the container's spec the held entries
                                     were made under */
  size_t accepted;                /* of the batch */
  int held;                       /* entries wait to be merged */
  int oom;
};
typedef struct rg_bulk bulk;

static size_t pool_add (bulk *b, const void *p, size_t n) {
  size_t off = b->pool.n;
  rg_buf_add(&b->pool, p, n);
  if (b->pool.oom) b->oom = 1;
  return off;
}

static void list_add (bulk *b, int db, size_t k, size_t kn, size_t v,
                      size_t vn) {
  blist *l = &b->t[db];
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    bent *a = (bent *)realloc(l->v, cap * sizeof(bent));
    if (a == NULL) { b->oom = 1; return; }
    l->v = a;
    l->cap = cap;
  }
  {
    const uint8_t *p = (const uint8_t *)b->pool.p + k;
    uint64_t pre = 0;
    size_t i;
    for (i = 0; i < 8; i++) pre = (pre << 8) | (i < kn ? p[i] : 0);
    l->v[l->n].pre = pre;
  }
  l->v[l->n].k = k;
  l->v[l->n].kn = (uint32_t)kn;
  l->v[l->n].v = v;
  l->v[l->n].vn = (uint32_t)vn;
  l->n++;
}

/* An entry whose key and value are copied into the pool. */
static void entry_add (bulk *b, int db, const void *k, size_t kn,
                       const void *v, size_t vn) {
  size_t ko = pool_add(b, k, kn), vo = pool_add(b, v, vn);
  list_add(b, db, ko, kn, vo, vn);
}

/* Finds (or with `add`, adds) a byte string in a map; NULL when absent. */
static bslot *map_get (bulk *b, bmap *m, const void *p, size_t n, int add) {
  uint64_t h = rg_hash(p, n);
  size_t i;
  if (m->cap) {
    for (i = (size_t)h & (m->cap - 1); m->v[i].off;
         i = (i + 1) & (m->cap - 1))
      if (m->v[i].h == h && m->v[i].len == n &&
          memcmp(b->pool.p + m->v[i].off, p, n) == 0)
        return &m->v[i];
  }
  if (!add) return NULL;
  if (2 * (m->n + 1) > m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 1024, j;
    bslot *v = (bslot *)calloc(cap, sizeof(bslot));
    if (v == NULL) { b->oom = 1; return NULL; }
    for (j = 0; j < m->cap; j++) {
      if (!m->v[j].off) continue;
      for (i = (size_t)m->v[j].h & (cap - 1); v[i].off; i = (i + 1) & (cap - 1)) ;
      v[i] = m->v[j];
    }
    free(m->v);
    m->v = v;
    m->cap = cap;
  }
  for (i = (size_t)h & (m->cap - 1); m->v[i].off; i = (i + 1) & (m->cap - 1)) ;
  memset(&m->v[i], 0, sizeof(bslot));
  m->v[i].h = h;
  m->v[i].len = (uint32_t)n;
  m->v[i].off = pool_add(b, p, n);
  if (b->oom) { m->v[i].off = 0; return NULL; }
  m->n++;
  return &m->v[i];
}

rg_bulk *rg_bulk_new (void) {
  bulk *b = (bulk *)calloc(1, sizeof(bulk));
  if (b == NULL) return NULL;
  rg_buf_init(&b->pool);
  rg_buf_init(&b->text);
  rg_buf_init(&b->ikeys);
  return b;
}

void rg_bulk_free (rg_bulk *b) {
  int i;
  if (b == NULL) return;
  rg_buf_free(&b->pool);
  rg_buf_free(&b->text);
  rg_buf_free(&b->ikeys);
  for (i = 0; i < RG_NDB; i++) {
    free(b->t[i].v);
    free(b->t[i].runs);
  }
  free(b->merged);
  free(b->heap);
  free(b->keys.v);
  free(b->uniq.v);
  free(b->parts.v);
  free(b->later);
  free(b->vseq);
  free(b->spec);
  rg_spill_close(b->sp);
  free(b->sruns);
  free(b);
}

/* Empties the lists and maps, keeping their memory (b->oom stays). */
static void bulk_empty (bulk *b) {
  int i;
  b->pool.n = 0;
  b->pool.oom = 0;
  rg_buf_addc(&b->pool, 0);          /* offset 0 names nothing */
  for (i = 0; i < RG_NDB; i++) b->t[i].n = b->t[i].sorted = b->t[i].nruns = 0;
  if (b->keys.cap) memset(b->keys.v, 0, b->keys.cap * sizeof(bslot));
  if (b->uniq.cap) memset(b->uniq.v, 0, b->uniq.cap * sizeof(bslot));
  if (b->parts.cap) memset(b->parts.v, 0, b->parts.cap * sizeof(bslot));
  b->keys.n = b->uniq.n = b->parts.n = 0;
}

/* Empties the lists and maps for a batch, and drops what was spilled. */
static void bulk_reset (bulk *b) {
  bulk_empty(b);
  b->held = 0;
  b->oom = 0;
  rg_spill_close(b->sp);             /* what was spilled: gone */
  b->sp = NULL;
  b->nsruns = 0;
}

void rg_bulk_hold (rg_bulk *b, size_t bound) {
  bulk_reset(b);
  b->hold = bound;
  b->spilled = 0;
}

size_t rg_bulk_spilled (const rg_bulk *b) {
  return b->spilled;
}

/* The memory the held entries take. */
static size_t bulk_size (const bulk *b) {
  size_t n = b->pool.n, i;
  for (i = 0; i < RG_NDB; i++) n += b->t[i].n * sizeof(bent);
  return n + (b->keys.cap + b->uniq.cap + b->parts.cap) * sizeof(bslot);
}

void rg_bulk_clear (rg_bulk_item *items, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    free(items[i].msg);
    items[i].msg = NULL;
    items[i].status = 0;
  }
}

static int item_fails (rg_bulk_item *it, const rg_err *ie) {
  it->status = ie->status;
  it->msg = strdup(ie->msg);
  return 0;
}

/* The next seq, past any still in use (seqs wrap after 2^32 creates). */
static int bulk_seq (bulk *b, uint32_t *seq, rg_err *e) {
  rg_scope *s = b->s;
  for (;;) {
    rg_val k, v;
    uint8_t kb[RG_REF_KEY];
    int rc;
    if ((*seq = rg_scope_seq(s, 256, e)) == 0) return s->failed;
    k.p = kb;
    k.n = rg_key_ref(kb, *seq);
    rc = rg_kv_get(s->txn, RG_DB_REFS, k.p, k.n, &v);
    if (rc == RG_NOTFOUND) return 0;
    if (rc) return rg_scope_fail(s, rc, "seq", e);
  }
}

/* First pass over one document: 0 when it is accepted (its entries are
** listed) or refused (item->status); a status fails the batch. */
static int bulk_one (bulk *b, size_t i, rg_bulk_item *it, rg_buf *text,
                     rg_buf *keys, rg_err *e) {
  rg_scope *s = b->s;
  const rg_cont *c = b->c;
  const rg_cspec *spec = c->spec;
  rg_wreq w;
  rg_ikey k;
  rg_err ie;
  const char *id;
  size_t idlen, nkeys, off, hn;
  uint64_t lsn = s->lsn;
  int64_t expiry = 0;
  uint32_t seq = 0;
  uint8_t hdr[RG_IHDR_MAX], buf[RG_MAX_KEY + 32];
  bslot *ps;
  rg_val kv, vv;
  int rc, u;
  memset(&w, 0, sizeof(w));
  w.op = RG_OP_CREATE;
  w.doc = it->doc;
  if (it->doc == NULL) return 0;     /* refused before the batch */
  if ((rc = resolve(s, c, &w, b->mode == RG_BULK_RESTORE, &k, &id, &idlen,
                    &ie)))
    return item_fails(it, &ie);
  kv.p = k.key;                /* exists, or given twice */
  kv.n = k.len;
  rc = rg_kv_get(s->txn, RG_DB_ITEMS, kv.p, kv.n, &vv);
  if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "read", e);
  if (rc == 0 || map_get(b, &b->keys, k.key, k.len, 0)) {
    if (b->mode == RG_BULK_UPSERT) {
      b->later[b->nlater++] = i;
      return 0;
    }
    rg_fail(&ie, 409, "conflict: an item with id '%s' already exists in this "
            "partition", id);
    return item_fails(it, &ie);
  }
  if (b->mode == RG_BULK_RESTORE) {  /* the document's own system properties */
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(it->doc, "_lsn");
    int64_t v = 0;
    if (!cJSON_IsNumber(l) || !rg_num_int(l, &v) || v < 1) {
      rg_fail(&ie, 400, "a restored item needs its _lsn");
      return item_fails(it, &ie);
    }
    lsn = (uint64_t)v;
  }
  else {
    char etag[40];
    etag_of(etag, lsn, s->ord);
    if ((rc = set_system(it->doc, etag, s->now, lsn, e))) return rc;
  }
  if (b->mode == RG_BULK_RESTORE) expiry = it->expiry;
  else if ((rc = item_expiry(spec, it->doc, s->now, &expiry, &ie)))
    return item_fails(it, &ie);
  text->n = 0;
  rg_json_print(it->doc, text);
  if (text->oom) return rg_fail(e, 500, "out of memory");
  if (text->n > RG_MAX_ITEM) {
    rg_fail(&ie, 413, "the item is %lu bytes; the limit is %u",
            (unsigned long)text->n, RG_MAX_ITEM);
    return item_fails(it, &ie);
  }
  if ((ps = map_get(b, &b->parts, k.key, k.lplen, 1)) == NULL)
    return rg_fail(e, 500, "out of memory");
  if (ps->a == 0 && ps->b == 0) {    /* first seen: what it holds already */
    uint64_t pb;
    if ((rc = partition_bytes(s, &k, &pb, e))) return rc;
    ps->c = (int64_t)pb;
  }
  if ((uint64_t)(ps->c + ps->b) + text->n > spec->max_partition_bytes) {
    rg_fail(&ie, 403, "the logical partition is full (%llu bytes; the limit "
            "is %llu)", (unsigned long long)(ps->c + ps->b),
            (unsigned long long)spec->max_partition_bytes);
    return item_fails(it, &ie);
  }
  if ((rc = rg_unique_check(s, spec, &k, NULL, it->doc, &ie))) {
    if (s->failed) return rc;
    return item_fails(it, &ie);
  }
  for (u = 0; u < spec->nuniq; u++) {
    size_t un = rg_unique_key(spec, u, &k, it->doc, buf);
    if (map_get(b, &b->uniq, buf, un, 0)) {
      rg_unique_fail(spec, u, &ie);
      return item_fails(it, &ie);
    }
  }
  /* accepted: from here on, what fails fails the batch */
  keys->n = 0;
  if ((rc = rg_index_keys(s->txn, s->env, s, spec, it->doc, keys, &nkeys, e)))
    return rc;
  if ((rc = bulk_seq(b, &seq, e))) return rc;
  if (b->vseq) b->vseq[i] = seq;
  if (map_get(b, &b->keys, k.key, k.len, 1) == NULL) return rg_fail(e, 500, "out of memory");
  ps->a++;
  ps->b += (int64_t)text->n;
  hn = rg_ihdr_put(hdr, seq, expiry);
  off = pool_add(b, k.key, k.len);                   /* the item */
  {
    size_t v = pool_add(b, hdr, hn);
    pool_add(b, text->p, text->n);
    list_add(b, RG_DB_ITEMS, off, k.len, v, hn + text->n);
  }
  {
    uint8_t sb[RG_REF_KEY];
    size_t sn = rg_key_ref(sb, seq);
    list_add(b, RG_DB_REFS, pool_add(b, sb, sn), sn, off, k.len);
  }
  {                                                   /* index entries */
    uint8_t ref[RG_REF_SIZE];
    size_t at = 0, ro;
    rg_ref_put(ref, k.hash, seq);
    ro = pool_add(b, ref, RG_REF_SIZE);
    while (at < keys->n) {
      size_t kn = rg_get_u16((const uint8_t *)keys->p + at);
      list_add(b, RG_DB_INDEX, pool_add(b, keys->p + at + 2, kn), kn, ro,
               RG_REF_SIZE);
      at += 2 + kn;
    }
    s->work.terms += nkeys;
  }
  {                                                   /* latest version */
    uint8_t lk[8], ld[RG_LATEST_DUP];
    size_t kn = rg_latest_entry(lk, ld, spec->cid, k.range, lsn, seq);
    entry_add(b, RG_DB_LATEST, lk, kn, ld, RG_LATEST_DUP);
  }
  if (expiry) {
    uint8_t tk[RG_TTL_KEY];
    size_t tn = rg_key_ttl(tk, spec->cid, expiry,
                           rg_ikey_digest(k.key, k.len));
    list_add(b, RG_DB_TTL, pool_add(b, tk, tn), tn, off, k.len);
  }
  for (u = 0; u < spec->nuniq; u++) {
    size_t un = rg_unique_key(spec, u, &k, it->doc, buf);
    if (map_get(b, &b->uniq, buf, un, 1) == NULL) return rg_fail(e, 500, "out of memory");
    list_add(b, RG_DB_UNIQUE, pool_add(b, buf, un), un, off, k.len);
    s->work.terms++;
  }
  if (spec->all_versions && b->mode != RG_BULK_RESTORE) {
    uint8_t fk[RG_FEED_KEY];
    size_t rn = rg_feed_record_size(&k, text->n), ro;
    size_t fn = rg_key_feed(fk, spec->cid, k.range, lsn, s->ord);
    ro = b->pool.n;
    if (rg_buf_reserve(&b->pool, rn)) return rg_fail(e, 500, "out of memory");
    rg_feed_record_put((uint8_t *)b->pool.p + ro, RG_OP_CREATE, 0, s->now, &k,
                       text->p, text->n);
    b->pool.n += rn;
    list_add(b, RG_DB_FEED, pool_add(b, fk, fn), fn, ro, rn);
  }
  it->status = 201;
  b->accepted++;
  s->ord++;
  s->work.written++;
  s->work.write_bytes += text->n;
  if (text->n > 1024) s->work.write_extra_kb += (text->n - 1) / 1024;
  return b->oom ? rg_fail(e, 500, "out of memory") : 0;
}

static const char *sort_base;

static int bent_cmp (const void *x, const void *y) {
  const bent *a = (const bent *)x, *b = (const bent *)y;
  int c;
  if (a->pre != b->pre) return a->pre < b->pre ? -1 : 1;
  if (a->kn > 8 && b->kn > 8) {
    c = memcmp(sort_base + a->k + 8, sort_base + b->k + 8,
               (a->kn < b->kn ? a->kn : b->kn) - 8);
    if (c) return c;
  }
  if (a->kn != b->kn) return a->kn < b->kn ? -1 : 1;
  c = memcmp(sort_base + a->v, sort_base + b->v, a->vn < b->vn ? a->vn : b->vn);
  if (c) return c;
  return a->vn < b->vn ? -1 : a->vn > b->vn;
}

static int cmp_val (const rg_val *a, const void *p, size_t n) {
  int c = memcmp(a->p, p, a->n < n ? a->n : n);
  if (c) return c;
  return a->n < n ? -1 : a->n > n;
}

/* Symbol d of an entry in the tables' order (key, then value, bytewise):
** byte d of the key (or of the value, `val`) plus one, 0 past its end. */
static unsigned bent_sym (const bent *e, size_t d, int val) {
  if (val)
    return d < e->vn ? (unsigned)(uint8_t)sort_base[e->v + d] + 1 : 0;
  if (d >= e->kn) return 0;
  if (d < 8) return (unsigned)(e->pre >> (56 - 8 * d) & 0xff) + 1;
  return (unsigned)(uint8_t)sort_base[e->k + d] + 1;
}

#define RSORT_SMALL 24    /* fewer entries: an insertion sort */
#define RSORT_DEPTH 32    /* deeper splits: glibc's sort (bounded stack) */

/* Sorts v[0..n) in the tables' order, all of whose entries agree before
** symbol d of the key (or, `val`, of the whole key and the value before
** symbol d), t: room for n entries.  A radix sort from the first symbol
** on (a symbol all entries share costs one count), so that most entries
** are placed by a few passes over them rather than compared through a
** function log n times; runs of equal keys go on to their values.
** `depth`: the splits above this one. */
static void bent_rsort (bent *v, bent *t, size_t n, size_t d, int val,
                        int depth) {
  size_t cnt[257], i;
  if (depth > RSORT_DEPTH && n >= RSORT_SMALL) {
    qsort(v, n, sizeof(bent), bent_cmp);
    return;
  }
  for (;;) {
    unsigned first;
    if (n < RSORT_SMALL) {
      for (i = 1; i < n; i++) {
        bent x = v[i];
        size_t j = i;
        for (; j > 0 && bent_cmp(&v[j - 1], &x) > 0; j--) v[j] = v[j - 1];
        v[j] = x;
      }
      return;
    }
    memset(cnt, 0, sizeof(cnt));
    for (i = 0; i < n; i++) cnt[bent_sym(&v[i], d, val)]++;
    first = bent_sym(&v[0], d, val);
    if (cnt[first] < n) break;
    if (first == 0) {                /* all end here: equal keys, or equal */
      if (val) return;
      val = 1;
      d = 0;
    }
    else d++;
  }
  {
    size_t at[257], o = 0, sym;
    for (sym = 0; sym < 257; sym++) { at[sym] = o; o += cnt[sym]; }
    for (i = 0; i < n; i++) t[at[bent_sym(&v[i], d, val)]++] = v[i];
    memcpy(v, t, n * sizeof(bent));
    o = cnt[0];                      /* ended here: equal keys (values next) */
    if (o > 1 && !val) bent_rsort(v, t, o, 0, 1, depth + 1);
    for (sym = 1; sym < 257; sym++) {
      if (cnt[sym] > 1)
        bent_rsort(v + o, t + o, cnt[sym], d + 1, val, depth + 1);
      o += cnt[sym];
    }
  }
}

/* A batch's entries of each table sorted: a run of its own. */
static int bulk_runs (bulk *b) {
  int db;
  sort_base = b->pool.p;
  for (db = 0; db < RG_NDB; db++) {
    blist *l = &b->t[db];
    if (l->n == l->sorted) continue;
    if (l->nruns == l->rcap) {
      size_t cap = l->rcap ? 2 * l->rcap : 16;
      size_t *a = (size_t *)realloc(l->runs, cap * sizeof(size_t));
      if (a == NULL) return 1;
      l->runs = a;
      l->rcap = cap;
    }
    if (b->mcap < l->n - l->sorted) {  /* the sort's room: the merge's */
      bent *a = (bent *)realloc(b->merged, (l->n - l->sorted) * sizeof(bent));
      if (a == NULL) return 1;
      b->merged = a;
      b->mcap = l->n - l->sorted;
    }
    bent_rsort(l->v + l->sorted, b->merged, l->n - l->sorted, 0, 0, 0);
#ifdef RG_DEBUG
    {                                /* (the merge's puts would take any
                                        order: only their hints would miss) */
      size_t i;
      for (i = l->sorted + 1; i < l->n; i++)
        rg_assert(bent_cmp(&l->v[i - 1], &l->v[i]) <= 0);
    }
#endif
    l->runs[l->nruns++] = l->sorted;
    l->sorted = l->n;
  }
  return 0;
}

/* A list's runs merged into one (a heap of the runs by their first entry
** not yet taken): 0, or 1 out of memory. */
static int bulk_merge_runs (bulk *b, blist *l) {
  size_t *h, *at, k = l->nruns, n = 0, i;
  bent *out;
  if (k < 2) return 0;
  if (b->mcap < l->n) {
    bent *a = (bent *)realloc(b->merged, l->n * sizeof(bent));
    if (a == NULL) return 1;
    b->merged = a;
    b->mcap = l->n;
  }
  if (b->hcap < 2 * k) {
    size_t *a = (size_t *)realloc(b->heap, 2 * k * sizeof(size_t));
    if (a == NULL) return 1;
    b->heap = a;
    b->hcap = 2 * k;
  }
  h = b->heap;                       /* h[0..k): runs; at[r]: run r's next */
  at = b->heap + k;
  out = b->merged;
  sort_base = b->pool.p;
#define RUN_END(r) ((r) + 1 < l->nruns ? l->runs[(r) + 1] : l->n)
#define LESS(x, y) (bent_cmp(&l->v[at[x]], &l->v[at[y]]) < 0)
  for (i = 0; i < k; i++) {
    size_t j = i;
    at[i] = l->runs[i];
    h[j] = i;                        /* sift up */
    while (j > 0 && LESS(h[j], h[(j - 1) / 2])) {
      size_t t = h[j]; h[j] = h[(j - 1) / 2]; h[(j - 1) / 2] = t;
      j = (j - 1) / 2;
    }
  }
  while (k > 0) {
    size_t r = h[0], j = 0;
    out[n++] = l->v[at[r]++];
    if (at[r] == RUN_END(r)) h[0] = h[--k];
    for (;;) {                       /* sift down */
      size_t c = 2 * j + 1, t;
      if (c >= k) break;
      if (c + 1 < k && LESS(h[c + 1], h[c])) c++;
      if (!LESS(h[c], h[j])) break;
      t = h[j]; h[j] = h[c]; h[c] = t;
      j = c;
    }
  }
#undef RUN_END
#undef LESS
  {                                  /* the merged list takes v's place */
    bent *v = l->v;
    size_t cap = l->cap;
    l->v = b->merged;
    l->cap = b->mcap;
    b->merged = v;
    b->mcap = cap;
  }
  l->runs[0] = 0;
  l->nruns = 1;
  return 0;
}

/* A sorted run the merge takes entries from: the entries in memory
** (rd.sp NULL) or a spilled run's of one table; k, v: its head. */
typedef struct bsrc {
  const bent *m, *mend;
  rg_sread rd;
  const uint8_t *k, *v;
  uint32_t kn, vn;
} bsrc;

/* The run's next entry as its head: 1, 0 at its end, or a status. */
static int src_next (const bulk *b, bsrc *x, rg_err *e) {
  int rc;
  if (x->rd.sp == NULL) {
    if (x->m == x->mend) return 0;
    x->k = (const uint8_t *)b->pool.p + x->m->k;
    x->kn = x->m->kn;
    x->v = (const uint8_t *)b->pool.p + x->m->v;
    x->vn = x->m->vn;
    x->m++;
    return 1;
  }
  if ((rc = rg_sread_next(&x->rd, e)) != 1) return rc;
  x->k = x->rd.k;
  x->kn = x->rd.kn;
  x->v = x->rd.v;
  x->vn = x->rd.vn;
  return 1;
}

/* The order of the tables (and of bent_cmp): key, then value, bytewise. */
static int src_cmp (const bsrc *a, const bsrc *b) {
  int c = memcmp(a->k, b->k, a->kn < b->kn ? a->kn : b->kn);
  if (c) return c;
  if (a->kn != b->kn) return a->kn < b->kn ? -1 : 1;
  c = memcmp(a->v, b->v, a->vn < b->vn ? a->vn : b->vn);
  if (c) return c;
  return a->vn < b->vn ? -1 : a->vn > b->vn;
}

static void heap_down (bsrc *src, size_t *h, size_t k, size_t j) {
  for (;;) {
    size_t c = 2 * j + 1, t;
    if (c >= k) break;
    if (c + 1 < k && src_cmp(&src[h[c + 1]], &src[h[c]]) < 0) c++;
    if (src_cmp(&src[h[c]], &src[h[j]]) >= 0) break;
    t = h[j]; h[j] = h[c]; h[c] = t;
    j = c;
  }
}

/* A key the table holds already: the load's own, given again in another
** run, or a write's in the load's transaction meanwhile. */
static int key_taken (rg_scope *s, bulk *b, int db, const bsrc *x,
                      rg_err *e) {
  if (db == RG_DB_ITEMS) {
    rg_ihdr h;
    const char *json;
    size_t jn;
    cJSON *doc = NULL;
    const cJSON *id = NULL;
    if (rg_ihdr_get(x->v, x->vn, &h, &json, &jn) == 0 &&
        (doc = cJSON_ParseWithLength(json, jn)) != NULL)
      id = cJSON_GetObjectItemCaseSensitive(doc, "id");
    rg_fail(e, 409, "conflict: an item with id '%s' already exists in this "
            "partition", cJSON_IsString(id) ? id->valuestring : "?");
    cJSON_Delete(doc);
  }
  else if (db == RG_DB_UNIQUE && x->kn >= 17 &&
           x->k[x->kn - 17] < (unsigned)b->c->spec->nuniq)
    rg_unique_fail(b->c->spec, x->k[x->kn - 17], e);
  else
    rg_fail(e, 409, "conflict: a write in the load's transaction took an id "
            "or unique key that the load holds");
  return s->failed = e->status;
}

/* Second pass: one table's entries, every run of them merged in key order
** (a heap of the runs by their heads) and appended past its last key. */
static int bulk_apply (bulk *b, int db, rg_err *e) {
  rg_scope *s = b->s;
  blist *l = &b->t[db];
  int dup = db == RG_DB_INDEX || db == RG_DB_LATEST;
  rg_cur *cur = NULL;
  rg_val lk, lv;
  rg_buf prev;                       /* the key put last (dup tables) */
  bsrc *src;
  size_t *h, k = 0, nsrc = 0, r;
  int rc = 0, appending = 0, have_last, group = 0, put = 0;
  if (l->n == 0 && b->nsruns == 0) return 0;
  if (bulk_runs(b) || bulk_merge_runs(b, l))
    return rg_fail(e, 500, "out of memory");
  src = (bsrc *)calloc(b->nsruns + 1, sizeof(bsrc));
  h = (size_t *)calloc(b->nsruns + 1, sizeof(size_t));
  rg_buf_init(&prev);
  if (src == NULL || h == NULL) {
    rc = rg_fail(e, 500, "out of memory");
    goto done;
  }
  for (r = 0; r < b->nsruns; r++)    /* the spilled runs, then memory's */
    if (b->sruns[r].at[db] < b->sruns[r].at[db + 1])
      rg_sread_init(&src[nsrc++].rd, b->sp, b->sruns[r].at[db],
                    b->sruns[r].at[db + 1],
                    rg_sread_buf(b->hold, b->nsruns));
  if (l->n) {
    src[nsrc].m = l->v;
    src[nsrc++].mend = l->v + l->n;
  }
  for (r = 0; r < nsrc; r++) {
    if ((rc = src_next(b, &src[r], e)) < 0 || rc > 1) goto failed;
    if (rc == 1) h[k++] = r;
  }
  rc = 0;
  if (k == 0) goto done;
  for (r = k / 2; r-- > 0; ) heap_down(src, h, k, r);
  if ((rc = rg_cur_open(s->txn, db, &cur))) {
    rc = rg_scope_fail(s, rc, "write", e);
    goto done;
  }
  rc = rg_cur_get(cur, &lk, &lv, RG_LAST);
  have_last = rc == 0;
  if (rc && rc != RG_NOTFOUND) {
    rc = rg_scope_fail(s, rc, "write", e);
    goto done;
  }
  rc = 0;
  while (k > 0) {
    bsrc *x = &src[h[0]];
    unsigned flags = 0;
    int first = !(dup && put && prev.n == x->kn &&              /* of its key */
                  memcmp(prev.p, x->k, x->kn) == 0);
    if (!appending) {
      int c = have_last ? cmp_val(&lk, x->k, x->kn) : -1;
      if (c < 0) appending = 1;       /* past the last key: all that follow */
    }
    if (!dup) flags |= RG_KV_NOOVERWRITE;   /* decided new: never replaced */
    if (appending) flags |= dup && !first ? RG_KV_APPENDDUP : RG_KV_APPEND;
    else if (dup && first && db == RG_DB_LATEST) {   /* past its last dup? */
      rg_val fk, fv;
      fk.p = x->k;
      fk.n = x->kn;
      group = 0;
      rc = rg_cur_get(cur, &fk, &fv, RG_SET);
      if (rc == 0) rc = rg_cur_get(cur, &fk, &fv, RG_LAST_DUP);
      if (rc == 0) group = cmp_val(&fv, x->v, x->vn) < 0;
      else if (rc == RG_NOTFOUND) group = 2;   /* a new key */
      else break;
      if (group == 1) flags |= RG_KV_APPENDDUP;
    }
    else if (dup && group) flags |= RG_KV_APPENDDUP;
    rc = rg_cur_put(cur, x->k, x->kn, x->v, x->vn, flags);
    if (rc == RG_KEYEXIST && dup) rc = 0;   /* there already */
    if (rc == RG_KEYEXIST) {
      rc = key_taken(s, b, db, x, e);
      goto done;
    }
    if (rc) break;
    put = 1;
    if (dup && first) {
      prev.n = 0;
      rg_buf_add(&prev, x->k, x->kn);
      if (prev.oom) {
        rc = rg_fail(e, 500, "out of memory");
        goto done;
      }
    }
    if ((rc = src_next(b, x, e)) == 0) h[0] = h[--k];
    else if (rc != 1) goto failed;
    rc = 0;
    heap_down(src, h, k, 0);
  }
  if (rc) rc = rg_scope_fail(s, rc, "write", e);
  goto done;
failed:                              /* a spilled run could not be read */
  s->failed = rc;
done:
  if (cur) rg_cur_close(cur);
  for (r = 0; src && r < nsrc; r++) rg_sread_free(&src[r].rd);
  free(src);
  free(h);
  rg_buf_free(&prev);
  return rc;
}

/* The statistics of the partitions the held entries add to, and of their
** container, bumped in the scope (once per partition); the caller then
** empties the map of partitions: a partition met again reads its size,
** these entries' included, from the statistics (partition_bytes). */
static int bulk_stats (rg_scope *s, bulk *b, rg_err *e) {
  const rg_cont *c = b->c;
  uint64_t added = 0, bytes = 0;
  size_t i;
  int rc = 0;
  for (i = 0; rc == 0 && i < b->parts.cap; i++) {
    bslot *ps = &b->parts.v[i];
    if (!ps->off || ps->a == 0) continue;
    rc = rg_scope_add(s, RG_DB_PARTS, b->pool.p + ps->off, ps->len, ps->a,
                      ps->b, c->spec->max_partition_bytes, RG_KV_DROP0, e);
    added += (uint64_t)ps->a;
    bytes += (uint64_t)ps->b;
  }
  if (rc == 0 && added) {
    uint8_t ck[8];
    rc = rg_scope_add(s, RG_DB_META, ck,
                      rg_meta_key(ck, RG_MK_STATS, c->spec->cid, NULL, 0),
                      (int64_t)added, (int64_t)bytes, 0, 0, e);
  }
  return rc;
}

/* The entries in memory written to the spill file as a run, table by
** table, their statistics bumped (bulk_stats), and all emptied. */
static int bulk_spill (bulk *b, rg_err *e) {
  rg_scope *s = b->s;
  struct srun *run;
  size_t i;
  int db, rc = 0;
  if (bulk_runs(b)) return rg_fail(e, 500, "out of memory");
  if (b->nsruns == b->srcap) {
    size_t cap = b->srcap ? 2 * b->srcap : 8;
    struct srun *a = (struct srun *)realloc(b->sruns, cap * sizeof(*a));
    if (a == NULL) return rg_fail(e, 500, "out of memory");
    b->sruns = a;
    b->srcap = cap;
  }
  if (b->sp == NULL && (rc = rg_spill_open(&b->sp, rg_env_path(s->env), e)))
    return s->failed = rc;
  run = &b->sruns[b->nsruns];
  for (db = 0; db < RG_NDB; db++) {
    blist *l = &b->t[db];
    run->at[db] = rg_spill_at(b->sp);
    if (bulk_merge_runs(b, l)) return rg_fail(e, 500, "out of memory");
    for (i = 0; i < l->n && rc == 0; i++)
      rc = rg_spill_put(b->sp, b->pool.p + l->v[i].k, l->v[i].kn,
                        b->pool.p + l->v[i].v, l->v[i].vn, e);
    if (rc) return s->failed = rc;
  }
  run->at[RG_NDB] = rg_spill_at(b->sp);
  if ((rc = rg_spill_flush(b->sp, e))) return s->failed = rc;
  b->nsruns++;
  b->spilled++;
  free(b->merged);                   /* the merge's buffer: not held */
  b->merged = NULL;
  b->mcap = 0;
  if ((rc = bulk_stats(s, b, e))) return rc;
  bulk_empty(b);
  return b->oom ? rg_fail(e, 500, "out of memory") : 0;
}

/* The container is still the one the held entries were made under: a
** write in the load's transaction (its progress function, its source)
** may have deleted it (404) or replaced its spec (rg_cont_alive adopts
** the stored one), and entries made under another spec would leave its
** indexes wrong: the load fails (409), nothing of it written. */
static int spec_unchanged (rg_scope *s, bulk *b, rg_err *e) {
  int rc;
  if (!b->hold) return 0;           /* a batch's own: prepared just now */
  rc = rg_cont_alive(s->txn, b->c, e);
  if (rc == 0 && b->spec && strcmp(b->spec, b->c->spec->json) != 0)
    rc = rg_fail(e, 409, "conflict: container '%s' was replaced in the "
                 "load's transaction", b->c->spec->name);
  return rc ? (s->failed = rc) : 0;
}

/* The held entries merged into the tables, table by table, and the
** statistics of their partitions and container bumped; then emptied. */
static int bulk_merge (rg_scope *s, bulk *b, rg_err *e) {
  static const int order[] = { RG_DB_ITEMS, RG_DB_REFS, RG_DB_INDEX,
                               RG_DB_LATEST, RG_DB_TTL, RG_DB_UNIQUE,
                               RG_DB_FEED };
  size_t i;
  int rc;
  b->s = s;
  if ((rc = spec_unchanged(s, b, e))) return rc;
  for (i = 0; rc == 0 && i < sizeof(order) / sizeof(order[0]); i++)
    rc = bulk_apply(b, order[i], e);
  if (rc == 0) rc = bulk_stats(s, b, e);
  if (rc == 0) bulk_reset(b);
  if (rc == 0 && b->hold) {          /* the merge's buffer: not held */
    free(b->merged);
    b->merged = NULL;
    b->mcap = 0;
  }
  return rc;
}

int rg_bulk_flush (rg_scope *s, rg_bulk *b, rg_err *e) {
  if (!b->held) return 0;
  if (s->failed) return rg_fail(e, s->failed, "the transaction has failed");
  return bulk_merge(s, b, e);
}

int rg_bulk_write (rg_scope *s, rg_bulk *b, const rg_cont *c,
                   rg_bulk_item *items, size_t n, int mode, size_t *written,
                   rg_err *e) {
  size_t i;
  int rc = 0, whole;
  *written = 0;
  if (s->failed) return rg_fail(e, s->failed, "the transaction has failed");
  whole = c->spec->nvix || c->spec->ft;    /* their indexes: batch by batch */
  if (b->held && b->hold && (b->c != c || b->mode != mode || whole) &&
      (rc = bulk_merge(s, b, e)))
    return rc;
  if (!b->held || !b->hold) bulk_reset(b);   /* only a load's carry over */
  b->nlater = 0;
  b->accepted = 0;
  b->s = s;
  b->c = c;
  b->mode = mode;
  for (i = 0; i < n; i++) {          /* a rerun starts afresh */
    if (items[i].status > 0 && items[i].status < 300) items[i].status = 0;
  }
  rc = mode == RG_BULK_RESTORE ? rg_cont_alive(s->txn, c, e) : prepare(s, c, e);
  if (rc) return rc;
  if (mode != RG_BULK_RESTORE && rg_scope_lsn(s, NULL, 0, e) == 0)
    return s->failed;
  if (b->cap < n) {
    size_t *a = (size_t *)realloc(b->later, n * sizeof(size_t));
    uint32_t *vs = (uint32_t *)realloc(b->vseq, n * sizeof(uint32_t));
    if (vs) b->vseq = vs;
    if (a == NULL || vs == NULL) return rg_fail(e, 500, "out of memory");
    b->later = a;
    b->cap = n;
  }
  if (whole) memset(b->vseq, 0, n * sizeof(uint32_t));
  if (b->hold && !b->held) {         /* the spec the entries are made under */
    free(b->spec);
    if ((b->spec = strdup(c->spec->json)) == NULL)
      return rg_fail(e, 500, "out of memory");
  }                                 /* (checked by bulk_merge) */
  b->held = 1;
  for (i = 0; i < n && rc == 0; i++)
    if (items[i].status == 0)
      rc = bulk_one(b, i, &items[i], &b->text, &b->ikeys, e);
  if (rc == 0 && (b->oom || bulk_runs(b))) rc = rg_fail(e, 500, "out of memory");
  if (rc) return rc;
  *written = b->accepted;
  if (!b->hold || whole || b->nlater ||
      (bulk_size(b) >= b->hold && mode == RG_BULK_UPSERT))
    rc = bulk_merge(s, b, e);
  else if (bulk_size(b) >= b->hold && (rc = bulk_spill(b, e)))
    s->failed = rc;                  /* the held entries are half spilled */
  for (i = 0; rc == 0 && c->spec->nvix && i < n; i++)   /* vector indexes:
                                                  one slot at a time */
    if (b->vseq[i])
      rc = rg_vindex_update(s, c->spec, b->vseq[i], NULL, items[i].doc, e);
  if (rc == 0 && c->spec->ft) {       /* full-text indexes: one flush */
    rg_ftup *u;
    if ((rc = rg_ftup_begin(&u, s, c->spec, e)) == 0) {
      for (i = 0; rc == 0 && u && i < n; i++)
        if (b->vseq[i]) rc = rg_ftup_item(u, b->vseq[i], NULL, items[i].doc, e);
      rc = rc ? (rg_ftup_end(u, NULL), rc) : rg_ftup_end(u, e);
    }
  }
  for (i = 0; rc == 0 && i < b->nlater; i++) {   /* upserts of existing items */
    rg_bulk_item *it = &items[b->later[i]];
    rg_wreq w;
    rg_wres r;
    rg_err ie;
    memset(&w, 0, sizeof(w));
    w.op = RG_OP_UPSERT;
    w.doc = it->doc;
    w.no_triggers = 1;
    if (rg_write(s, c, &w, &r, &ie) == 0) {
      it->status = r.status;
      (*written)++;
      rg_wres_free(&r);
    }
    else if (s->failed) rc = rg_fail(e, ie.status, "%s", ie.msg);
    else item_fails(it, &ie);
  }
  return rc;
}
/* }===================================================================== */
