/*
** verify.c: db:verify(), every invariant the storage keeps, checked.
**
** In one read transaction (a consistent snapshot), for every container in
** the catalog:
**   - its spec parses;
**   - every item's key is the key its own id and partition key give, its
**     JSON parses, and its _lsn is at most the database's last lsn;
**   - its reference's seq maps back to its key in the refs table;
**   - every index and unique entry the item needs exists and names it, and
**     the tables hold no others (the counts match; every path id in index
**     keys is in the container's dictionary);
**   - its TTL entry exists exactly when its header has an expiry;
**   - its latest-version entry sits under its _lsn, and, in a container
**     that keeps the all-versions feed, the feed holds the record of that
**     write (one that does not keep it has no records);
**   - the statistics of each logical partition and of the container match
**     the items;
**   - every processor lease decodes and points inside the feed;
** and every item, index, feed, latest or refs entry belongs to a container
** in the catalog (or to one whose deletion is under way), every refs entry
** names an item that names it back, and no path id was given twice.
** Returns true, or nil and a report naming each problem (at most
** MAX_PROBLEMS are listed, then a count).
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/feed.h"
#include "store/index.h"
#include "store/lease.h"
#include "store/pagewalk.h"
#include "store/search.h"
#include "store/verify.h"
#include "store/vindex.h"

#define MAX_PROBLEMS 50

typedef struct verifier {
  rg_txn *txn;
  rg_env *env;
  rg_buf report;
  int problems;
  uint32_t *rcid;              /* refs per container: cids and counts */
  uint64_t *rcount;
  size_t nr;
} verifier;

static void problem (verifier *v, const char *fmt, const char *a,
                     unsigned long b) {
  v->problems++;
  if (v->problems <= MAX_PROBLEMS) {
    rg_buf_addf(&v->report, fmt, a, b);
    rg_buf_addc(&v->report, '\n');
  }
}

/* Entries of table `db` whose key starts with the 4-byte cid (with `dups`,
** the duplicates of each key). */
static uint64_t count_entries (verifier *v, int db, uint32_t cid, int dups) {
  rg_cur *cur;
  rg_val k, d;
  uint8_t p[4];
  uint64_t n = 0;
  int rc;
  if (rg_cur_open(v->txn, db, &cur)) return 0;
  k.p = p;
  k.n = rg_key_cid(p, cid);
  rc = rg_cur_get(cur, &k, &d, RG_SEEK);
  while (rc == 0 && k.n >= 4 && memcmp(k.p, p, 4) == 0) {
    size_t more = 1;
    if (dups && rg_cur_count(cur, &more)) more = 0;
    n += more;
    rc = rg_cur_get(cur, &k, &d, dups ? RG_NEXT_NODUP : RG_NEXT);
  }
  rg_cur_close(cur);
  return n;
}

static int exists (verifier *v, int db, const void *key, size_t n,
                   rg_val *out);

static uint64_t count_prefix (verifier *v, int db, uint32_t cid) {
  return count_entries(v, db, cid, 0);
}

static uint64_t refs_of (verifier *v, uint32_t cid) {
  size_t i;
  for (i = 0; i < v->nr; i++) if (v->rcid[i] == cid) return v->rcount[i];
  return 0;
}

/* One pass over the refs table: every entry names an item whose header
** names it back; the entries are counted per container. */
static void verify_refs (verifier *v) {
  rg_cur *cur;
  rg_val k, d;
  size_t cap = 0, i;
  int rc;
  if (rg_cur_open(v->txn, RG_DB_REFS, &cur)) return;
  rc = rg_cur_get(cur, &k, &d, RG_FIRST);
  for (; rc == 0; rc = rg_cur_get(cur, &k, &d, RG_NEXT)) {
    rg_val iv;
    rg_ihdr ih;
    uint32_t cid;
    if (k.n != 4 || d.n < 12) {
      problem(v, "the refs table holds a malformed entry%s", "", 0);
      continue;
    }
    cid = rg_get_u32((const uint8_t *)d.p);
    if (!exists(v, RG_DB_ITEMS, d.p, d.n, &iv) ||
        rg_ihdr_get(iv.p, iv.n, &ih, NULL, NULL) ||
        ih.seq != rg_get_u32((const uint8_t *)k.p))
      problem(v, "the refs table names an item that does not name it back "
              "(seq %s%lu)", "", (unsigned long)rg_get_u32(
                (const uint8_t *)k.p));
    for (i = 0; i < v->nr && v->rcid[i] != cid; i++) ;
    if (i == v->nr) {
      if (v->nr == cap) {
        uint32_t *a;
        uint64_t *b;
        cap = cap ? 2 * cap : 16;
        if ((a = (uint32_t *)realloc(v->rcid, cap * sizeof(uint32_t))))
          v->rcid = a;
        if ((b = (uint64_t *)realloc(v->rcount, cap * sizeof(uint64_t))))
          v->rcount = b;
        if (a == NULL || b == NULL) break;
      }
      v->rcid[v->nr] = cid;
      v->rcount[v->nr++] = 0;
    }
    v->rcount[i]++;
  }
  rg_cur_close(cur);
}

static int exists (verifier *v, int db, const void *key, size_t n,
                   rg_val *out) {
  rg_val k, d;
  k.p = (void *)key;
  k.n = n;
  if (rg_kv_get(v->txn, db, k.p, k.n, &d) != 0) return 0;
  if (out) *out = d;
  return 1;
}

/* Is there a feed record of this item's write at (range, lsn)? */
static int feed_has (verifier *v, const rg_cspec *s, const rg_ikey *k,
                     uint64_t lsn, const char *id) {
  rg_cur *cur;
  rg_val key, d;
  uint8_t p[RG_FEED_KEY];
  int rc, found = 0;
  if (rg_cur_open(v->txn, RG_DB_FEED, &cur)) return 0;
  key.p = p;
  key.n = rg_key_feed(p, s->cid, k->range, lsn, 0) - 4;  /* cid range lsn */
  rc = rg_cur_get(cur, &key, &d, RG_SEEK);
  while (!found && rc == 0 && key.n == RG_FEED_KEY &&
         memcmp(key.p, p, RG_FEED_KEY - 4) == 0) {
    rg_record r;
    if (rg_feed_record(&d, &r) == 0) {
      if (r.key != NULL)             /* the record names its item */
        found = r.klen == k->len && memcmp(r.key, k->key, k->len) == 0;
      else {                         /* an old record: read its document */
        cJSON *doc = NULL;
        if (rg_json_parse(r.json, r.n, &doc, NULL) == 0) {
          const cJSON *rid = cJSON_GetObjectItemCaseSensitive(doc, "id");
          const cJSON *pkv[RG_MAX_PK_PATHS];
          rg_ikey k2;
          rg_doc_pk(s, doc, pkv);
          found = cJSON_IsString(rid) && strcmp(rid->valuestring, id) == 0 &&
                  rg_ikey_partition(s, pkv, &k2, NULL) == 0 &&
                  k2.lplen == k->lplen && memcmp(k2.key, k->key, k->lplen) == 0;
          cJSON_Delete(doc);
        }
      }
    }
    rc = rg_cur_get(cur, &key, &d, RG_NEXT);
  }
  rg_cur_close(cur);
  return found;
}

typedef struct lpstat {
  uint8_t lp[RG_MAX_KEY];
  size_t len;
  uint64_t items, bytes;
} lpstat;

static void check_lp (verifier *v, const rg_cspec *s, const lpstat *lp) {
  rg_val d;
  if (lp->len == 0) return;
  if (!exists(v, RG_DB_PARTS, lp->lp, lp->len, &d) || d.n != 16 ||
      rg_get_u64((const uint8_t *)d.p) != lp->items ||
      rg_get_u64((const uint8_t *)d.p + 8) != lp->bytes)
    problem(v, "container '%s': the statistics of a logical partition "
            "(%lu items) do not match its items", s->name,
            (unsigned long)lp->items);
}

static void verify_container (verifier *v, const rg_cspec *s) {
  rg_cur *cur;
  rg_val k, d;
  uint8_t p[4];
  uint64_t items = 0, bytes = 0, nindex = 0, nunique = 0, nttl = 0, nlp = 0;
  uint64_t ftdocs[RG_MAX_FT_PATHS] = { 0 };   /* texts of each indexed path */
  lpstat *lp = (lpstat *)calloc(1, sizeof(lpstat));
  int64_t since = 0;               /* the history starts there */
  int rc;
  {
    uint8_t sk[8];
    rg_val sv;
    if (exists(v, RG_DB_META, sk, rg_meta_key(sk, RG_MK_SINCE, s->cid, NULL,
                                              0), &sv) && sv.n == 8)
      since = (int64_t)rg_get_u64((const uint8_t *)sv.p);
  }
  if (lp == NULL || rg_cur_open(v->txn, RG_DB_ITEMS, &cur)) {
    free(lp);
    problem(v, "container '%s': cannot read items", s->name, 0);
    return;
  }
  k.p = p;
  k.n = rg_key_cid(p, s->cid);
  rc = rg_cur_get(cur, &k, &d, RG_SEEK);
  for (; rc == 0 && k.n >= 4 && memcmp(k.p, p, 4) == 0;
       rc = rg_cur_get(cur, &k, &d, RG_NEXT)) {
    cJSON *doc = NULL;
    const cJSON *id, *jl, *pkv[RG_MAX_PK_PATHS];
    rg_ikey ik;
    rg_ihdr ih;
    const char *text;
    size_t tn;
    int64_t expiry, lsn = 0;
    if (rg_ihdr_get(d.p, d.n, &ih, &text, &tn) ||
        rg_json_parse(text, tn, &doc, NULL) != 0) {
      problem(v, "container '%s': an item's value is not valid JSON", s->name, 0);
      continue;
    }
    uint64_t last = 0;
    expiry = ih.expiry;
    id = cJSON_GetObjectItemCaseSensitive(doc, "id");
    jl = cJSON_GetObjectItemCaseSensitive(doc, "_lsn");
    rg_doc_pk(s, doc, pkv);
    if (!cJSON_IsString(id) || rg_ikey_partition(s, pkv, &ik, NULL) != 0) {
      problem(v, "container '%s': an item lacks its id or partition key",
              s->name, 0);
      cJSON_Delete(doc);
      continue;
    }
    {
      rg_buf raw;
      rg_buf_init(&raw);
      rg_str_bytes(id, &raw);
      rg_ikey_id(&ik, raw.p ? raw.p : "", raw.n);
      rg_buf_free(&raw);
    }
    if (ik.len != k.n || memcmp(ik.key, k.p, ik.len) != 0)
      problem(v, "item '%s' is stored under a key its id and partition key "
              "do not give (container %lu)", id->valuestring,
              (unsigned long)s->cid);
    if (!jl || !cJSON_IsNumber(jl) || !rg_num_int(jl, &lsn) || lsn < 1 ||
        rg_kv_last(v->txn, s->cid, ik.range, &last) || (uint64_t)lsn > last)
      problem(v, "item '%s' has an _lsn outside the feed (container %lu)",
              id->valuestring, (unsigned long)s->cid);
    {
      rg_val rk;
      if (rg_ref_item(v->txn, v->env, ih.seq, &rk) != 0 ||
          rk.n != k.n || memcmp(rk.p, k.p, k.n))
        problem(v, "item '%s': its reference does not lead back to it in "
                "the refs table (container %lu)", id->valuestring,
                (unsigned long)s->cid);
    }
    v->problems += rg_index_verify(v->txn, v->env, s, &ik, ih.seq, doc,
                                   &nindex, &nunique, &v->report);
    if (s->nvix)
      v->problems += rg_vindex_verify_item(v->txn, v->env, s, ih.seq, doc,
                                           &v->report);
    rg_ftindex_count(s, doc, ftdocs);
    if (expiry) {
      uint8_t tk[RG_TTL_KEY];
      size_t tn = rg_key_ttl(tk, s->cid, expiry, rg_ikey_digest(ik.key,
                                                                ik.len));
      nttl++;
      if (!exists(v, RG_DB_TTL, tk, tn, NULL))
        problem(v, "item '%s' expires but has no TTL entry (container %lu)",
                id->valuestring, (unsigned long)s->cid);
    }
    {
      uint8_t lk[8], ld[RG_LATEST_DUP];
      rg_val key, dup;
      rg_cur *lc;
      int found = 0;
      key.p = lk;
      key.n = rg_latest_entry(lk, ld, s->cid, ik.range, (uint64_t)lsn,
                                    ih.seq);
      dup.p = ld;
      dup.n = RG_LATEST_DUP;
      if (rg_cur_open(v->txn, RG_DB_LATEST, &lc) == 0) {
        found = rg_cur_get(lc, &key, &dup, RG_BOTH) == 0;
        rg_cur_close(lc);
      }
      if (!found)
        problem(v, "item '%s' has no latest-version entry at its _lsn "
                "(container %lu)", id->valuestring, (unsigned long)s->cid);
    }
    if (s->all_versions && s->retention < 0 && lsn >= since &&
        !feed_has(v, s, &ik, (uint64_t)lsn, id->valuestring))
      problem(v, "item '%s': the change feed lacks the record of its last "
              "write (container %lu)", id->valuestring, (unsigned long)s->cid);
    if (lp->len != ik.lplen || memcmp(lp->lp, ik.key, ik.lplen) != 0) {
      check_lp(v, s, lp);
      nlp++;
      memcpy(lp->lp, ik.key, ik.lplen);
      lp->len = ik.lplen;
      lp->items = lp->bytes = 0;
    }
    lp->items++;
    lp->bytes += tn;
    items++;
    bytes += tn;
    cJSON_Delete(doc);
  }
  rg_cur_close(cur);
  check_lp(v, s, lp);
  free(lp);
  if (count_prefix(v, RG_DB_PARTS, s->cid) != nlp)
    problem(v, "container '%s': statistics are kept for %lu logical "
            "partitions that hold no item", s->name,
            (unsigned long)(count_prefix(v, RG_DB_PARTS, s->cid) - nlp));
  if (count_prefix(v, RG_DB_UNIQUE, s->cid) != nunique)
    problem(v, "container '%s': the unique-key table holds entries no item "
            "needs (%lu expected)", s->name, (unsigned long)nunique);
  {
    uint64_t have = 0;
    if (rg_index_count(v->txn, v->env, s->cid, &have) == 0 && have != nindex)
      problem(v, "container '%s': the index holds entries no item needs (%lu "
              "expected)", s->name, (unsigned long)nindex);
  }
  v->problems += rg_vindex_verify(v->txn, v->env, s, &v->report);
  v->problems += rg_ftindex_verify(v->txn, v->env, s, ftdocs, &v->report);
  if (!s->all_versions && count_prefix(v, RG_DB_FEED, s->cid) != 0)
    problem(v, "container '%s' keeps no all-versions feed, but the feed "
            "table holds %lu records of it", s->name,
            (unsigned long)count_prefix(v, RG_DB_FEED, s->cid));
  if (refs_of(v, s->cid) != items)
    problem(v, "container '%s': the refs table does not hold one entry per "
            "item (%lu items)", s->name, (unsigned long)items);
  if (count_prefix(v, RG_DB_TTL, s->cid) != nttl)
    problem(v, "container '%s': the TTL table holds %lu entries no item "
            "needs", s->name,
            (unsigned long)(count_prefix(v, RG_DB_TTL, s->cid) - nttl));
  if (count_entries(v, RG_DB_LATEST, s->cid, 1) != items)
    problem(v, "container '%s': the latest-version table does not hold one "
            "entry per item (%lu items)", s->name, (unsigned long)items);
  {
    uint8_t sk[8];
    rg_val sv;
    uint64_t n = 0, b = 0;
    if (exists(v, RG_DB_META, sk, rg_meta_key(sk, RG_MK_STATS, s->cid, NULL, 0),
               &sv) && sv.n == 16) {
      n = rg_get_u64((const uint8_t *)sv.p);
      b = rg_get_u64((const uint8_t *)sv.p + 8);
    }
    if (n != items || b != bytes)
      problem(v, "container '%s': its statistics say %lu items, not as "
              "stored", s->name, (unsigned long)n);
  }
}

/* Each table's entries must belong to a known container. */
static int known_cid (verifier *v, const uint32_t *cids, int n,
                      uint32_t cid) {
  uint8_t dk[5];
  int i;
  for (i = 0; i < n; i++) if (cids[i] == cid) return 1;
  return exists(v, RG_DB_META, dk, rg_meta_key(dk, RG_MK_DROP, cid, NULL, 0),
                NULL);
}

/* The path dictionary: ids given once, to known containers; every index
** key under one of them. */
static void verify_paths (verifier *v, const uint32_t *cids, int n) {
  rg_cur *cur;
  rg_val k, d;
  uint8_t from[1] = { RG_MK_PATH };
  uint32_t *ids = NULL, last = 0, id;
  size_t nid = 0, cap = 0, i;
  int rc;
  if (exists(v, RG_DB_META, RG_META_PATHID, sizeof(RG_META_PATHID) - 1, &d) &&
      d.n == 4)
    last = rg_get_u32((const uint8_t *)d.p);
  if (rg_cur_open(v->txn, RG_DB_META, &cur)) return;
  k.p = from;
  k.n = 1;
  rc = rg_cur_get(cur, &k, &d, RG_SEEK);
  for (; rc == 0 && k.n > 5 && ((uint8_t *)k.p)[0] == RG_MK_PATH;
       rc = rg_cur_get(cur, &k, &d, RG_NEXT)) {
    uint32_t cid = rg_get_u32((const uint8_t *)k.p + 1);
    if (d.n > RG_PATHID_MAX ||
        rg_pathid_get((const uint8_t *)d.p, d.n, &id) !=
        d.n || id == 0 || id > last) {
      problem(v, "the path dictionary holds a malformed id%s", "", 0);
      continue;
    }
    if (!known_cid(v, cids, n, cid))
      problem(v, "the path dictionary holds paths of container id %s%lu, "
              "which is not in the catalog", "", (unsigned long)cid);
    if (nid == cap) {
      uint32_t *a = (uint32_t *)realloc(ids, (cap = cap ? 2 * cap : 64) *
                                        sizeof(uint32_t));
      if (a == NULL) break;
      ids = a;
    }
    ids[nid++] = id;
  }
  rg_cur_close(cur);
  if (nid > 1) qsort(ids, nid, sizeof(uint32_t), rg_u32_cmp);
  for (i = 1; i < nid; i++)
    if (ids[i] == ids[i - 1])
      problem(v, "the path dictionary gives path id %s%lu twice", "",
              (unsigned long)ids[i]);
  if (rg_cur_open(v->txn, RG_DB_INDEX, &cur) == 0) {
    rc = rg_cur_get(cur, &k, &d, RG_FIRST);
    while (rc == 0) {
      uint8_t next[RG_PATHID_MAX];
      if (rg_pathid_get((const uint8_t *)k.p, k.n, &id) == 0) {
        problem(v, "the index holds a key without a path id%s", "", 0);
        break;
      }
      if (!bsearch(&id, ids, nid, sizeof(uint32_t), rg_u32_cmp))
        problem(v, "the index holds entries under path id %s%lu, which the "
                "dictionary does not give", "", (unsigned long)id);
      if (id == UINT32_MAX) break;
      k.p = next;              /* skip to the next path id */
      k.n = rg_pathid_put(next, id + 1);
      rc = rg_cur_get(cur, &k, &d, RG_SEEK);
    }
    rg_cur_close(cur);
  }
  free(ids);
}

static void verify_owners (verifier *v, const uint32_t *cids, int n) {
  static const int tables[] = { RG_DB_ITEMS, RG_DB_TTL, RG_DB_FEED,
                                RG_DB_LATEST, RG_DB_PARTS, RG_DB_UNIQUE };
  size_t t;
  for (t = 0; t < v->nr; t++)
    if (!known_cid(v, cids, n, v->rcid[t]))
      problem(v, "the refs table names items of container id %s%lu, which "
              "is not in the catalog", "", (unsigned long)v->rcid[t]);
  verify_paths(v, cids, n);
  for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
    rg_cur *cur;
    rg_val k, d;
    int rc;
    if (rg_cur_open(v->txn, tables[t], &cur)) continue;
    rc = rg_cur_get(cur, &k, &d, RG_FIRST);
    while (rc == 0) {
      uint32_t cid = k.n >= 4 ? rg_get_u32((const uint8_t *)k.p) : 0;
      uint8_t next[4];
      if (!known_cid(v, cids, n, cid))
        problem(v, "table entries belong to container id %s%lu, which is "
                "not in the catalog", "", (unsigned long)cid);
      if (cid == UINT32_MAX) break;
      k.p = next;                    /* skip to the next container */
      k.n = rg_key_cid(next, cid + 1);
      rc = rg_cur_get(cur, &k, &d, RG_SEEK);
    }
    rg_cur_close(cur);
  }
}

/* Every page of the file, as the transaction sees it, walked without
** LMDB (pagewalk.h): a damaged file is reported as such, and the checks
** that would follow it through LMDB are not made.  The problems. */
static int walk_pages (verifier *v) {
  rg_walk w;
  int n;
  rg_env_walk(v->env, v->txn, &w);
  n = (int)w.damaged;
  if (n) {
    rg_buf_add(&v->report, w.report.p, w.report.n);
    if (w.damaged > 50)
      rg_buf_addf(&v->report, "... %llu damaged pages in all\n",
                  (unsigned long long)w.damaged);
    rg_buf_adds(&v->report, "the file is damaged: the checks of the items, "
                "indexes and feed were not made (restore it from a backup)");
  }
  rg_walk_free(&w);
  return n;
}

/* The containers' ids, grown as the catalog is walked. */
typedef struct cid_list {
  uint32_t *cids;
  int n, cap, oom;
} cid_list;

static int list_cid (void *ud, uint32_t cid, const rg_val *spec) {
  cid_list *l = (cid_list *)ud;
  if (l->n == l->cap) {
    uint32_t *c = (uint32_t *)realloc(l->cids, (size_t)(l->cap = l->cap ?
                                      l->cap * 2 : 16) * sizeof(uint32_t));
    if (c == NULL) return l->oom = 1;
    l->cids = c;
  }
  l->cids[l->n++] = cid;
  return 0;
}

int rg_verify (rg_env *env, rg_buf *report) {
  verifier v;
  cid_list l = { NULL, 0, 0, 0 };
  uint32_t *cids;
  int n, rc, i;
  rg_err e;
  memset(&v, 0, sizeof(v));
  v.env = env;
  rg_buf_init(&v.report);
  if ((rc = rg_read_begin(env, &v.txn, &e))) {
    rg_buf_adds(report, e.msg);
    return 1;
  }
  if ((rc = walk_pages(&v)) != 0) {  /* a damaged file: only that */
    rg_read_end(env);
    rg_buf_add(report, v.report.p, v.report.n);
    rg_buf_free(&v.report);
    return rc;
  }
  if ((rc = rg_cont_each_spec(v.txn, RG_DB_META, list_cid, &l)) != 0) {
    rg_kv_fail(&e, rc, "reading the catalog");
    problem(&v, "%s (the containers after id %lu were not checked)", e.msg,
            l.n ? (unsigned long)l.cids[l.n - 1] : 0ul);
  }
  else if (l.oom)
    problem(&v, "out of memory%s (the containers after id %lu were not "
            "checked)", "", l.n ? (unsigned long)l.cids[l.n - 1] : 0ul);
  cids = l.cids;
  n = l.n;
  verify_refs(&v);
  for (i = 0; i < n; i++) {
    rg_cspec *s = NULL;
    if (rg_load_spec(v.txn, env, cids[i], &s, &e) != 0) {
      problem(&v, "container id %s%lu: its spec does not parse", "",
              (unsigned long)cids[i]);
      continue;
    }
    verify_container(&v, s);
    v.problems += rg_lease_verify(v.txn, env, s, &v.report);
    rg_cspec_free(s);
  }
  verify_owners(&v, cids, n);
  rg_read_end(env);
  free(cids);
  free(v.rcid);
  free(v.rcount);
  if (v.problems > MAX_PROBLEMS)
    rg_buf_addf(&v.report, "... and %d more problems\n",
                v.problems - MAX_PROBLEMS);
  rg_buf_add(report, v.report.p ? v.report.p : "", v.report.n);
  rg_buf_free(&v.report);
  return v.problems;
}
