/*
** upgrade.c: format 1 databases made format 2 (upgrade.h).
**
** Format 1 (regolith 0.1 before this format) differs from format 2 in:
**   items    lp id -> u64 expiry | JSON text          (format 2: a header
**            with the item's seq, then the JSON)
**   index    cid u64:path-hash term hash u64:digest -> item key
**                                                     (format 2: path ids,
**            references as sorted duplicates, the refs table)
**   latest   cid u16:range u64:lsn u64:digest -> item key
**   feed     kept for every container (format 2: only where the spec asks)
**   meta     no "\1seq", "\1pathid" or path dictionary; lease positions in
**            latest mode name an item digest where format 2 names a seq;
**            shape records ('h') list 64-bit path hashes (format 2: path
**            ids; they are made again with the index)
** The unique, TTL and parts tables, the feed records and the rest of meta
** have the same formats.
**
** Steps (the old database is read in one write transaction held from the
** start, so no other writer can change it meanwhile):
**   1. the catalog, scripts, processor records and counters are copied
**      into a new environment in <path>/.upgrade; a container's spec gets
**      change_feed.all_versions = true, since format 1 kept its history
**      (unless the history is dropped); statistics are left to step 2;
**      lease positions in latest mode go back to the start of their lsn
**      (at most the changes of one transaction are delivered again);
**   2. every item is written again by bulk load in restore mode (its own
**      _etag, _ts, _lsn and expiry), which makes its refs, index, unique,
**      TTL and latest-version entries and the statistics;
**   3. the feed records are copied (unless dropped);
**   4. the new database must verify, and hold as many items per container
**      as the old one; then it is flushed, and the renames make it the
**      database: data.mdb -> data.mdb.format1, .upgrade/data.mdb ->
**      data.mdb.  Between the two renames the directory has no data.mdb:
**      opening it says so, and running the upgrade again finishes.
**
** The write-ahead log (wal.h).  A format 1 database written with the log
** may have commits in its log that a power loss kept from the data file:
** the old database is opened after the log is replayed, as any open would.
** The log describes the old file's pages, so before the renames the old
** file is flushed and the log and its shared file are removed: replayed
** over the new file, they would overwrite it with the old one's pages.
** The new database starts a log of its own when it is next opened.
*/

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/upgrade.h"
#include "store/verify.h"
#include "store/write.h"

#define BATCH      10000        /* items (or records) per transaction */
#define LEASE_SIZE 45           /* the fixed part of a lease record */

enum { O_META, O_ITEMS, O_FEED, O_N };
static const char *const old_names[O_N] = { "meta", "items", "feed" };

typedef struct upg {
  const char *path;
  const rg_upgrade_opts *o;
  rg_upgrade_info *info;
  rg_local *old;
  rg_txn *otxn;                /* the old database, read throughout */
  rg_env *nenv;
  uint32_t *cids;               /* the containers (in the old catalog) */
  uint64_t *counts;             /* their items, as counted in the old one */
  size_t ncids, cap;            /* how many, and the arrays' room */
  int oom;                      /* the arrays could not grow */
} upg;

static void pathf (char *out, size_t n, const char *path, const char *what) {
  snprintf(out, n, "%s/%s", path, what);
}

static int file_exists (const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Removes the files of .upgrade other than its data file (with `data`,
** that too) and the directory when it is then empty: the new database's
** lock file, and its log and shared files, which describe the file there
** (the renames move it, and it starts a log of its own). */
static void clear_tmp_files (const char *path, int data) {
  static const char *const names[] = { ".upgrade/lock.mdb",
    ".upgrade/regolith.wal", ".upgrade/regolith.shm",
    ".upgrade/throughput.shm", ".upgrade/data.mdb" };
  char p[4096];
  int i;
  for (i = 0; i < 4 + (data != 0); i++) {
    pathf(p, sizeof(p), path, names[i]);
    unlink(p);
  }
  pathf(p, sizeof(p), path, ".upgrade");
  rmdir(p);
}

/* The second rename, and the cleaning up (also what finishes an
** interrupted upgrade). */
static int finish (const char *path, int remove_old, rg_err *e) {
  char data[4096], old[4096], neu[4096];
  pathf(data, sizeof(data), path, "data.mdb");
  pathf(old, sizeof(old), path, "data.mdb.format1");
  pathf(neu, sizeof(neu), path, ".upgrade/data.mdb");
  if (!file_exists(data) && rename(neu, data) != 0)
    return rg_fail(e, 500, "upgrade: cannot move the new database into "
                   "place: %s", strerror(errno));
  clear_tmp_files(path, 0);
  if (remove_old) unlink(old);
  return 0;
}

/* Removes what an earlier, unfinished attempt left in .upgrade. */
static void clear_tmp (const char *path) {
  clear_tmp_files(path, 1);
}


/*
** {=====================================================================
** The old database
** ======================================================================
*/
static int open_old (upg *u, rg_err *e) {
  char data[4096];
  struct stat st;
  rg_val v;
  int rc;
  pathf(data, sizeof(data), u->path, "data.mdb");
  if (stat(data, &st) != 0)
    return rg_fail(e, 404, "no database in '%s'", u->path);
  u->info->old_bytes = (uint64_t)st.st_size;
  if ((rc = rg_local_open_raw(u->path, old_names, O_N, &u->old, &u->otxn,
                              e)))
    return rg_fail(e, rc, "upgrade: %s", e->msg);
  rc = rg_kv_get(u->otxn, O_META, RG_META_VERSION,
                 sizeof(RG_META_VERSION) - 1, &v);
  if (rc == 0 && v.n == 4) {
    u->info->from = (int)rg_get_u32((const uint8_t *)v.p);
    return 0;
  }
  if (rc == 0 || rc == RG_NOTFOUND)
    return rg_fail(e, 404, "'%s' is not a regolith database (no format "
                   "version)", u->path);
  return rg_kv_fail(e, rc, "upgrade: the old database");
}

static void close_old (upg *u) {
  rg_local_close(u->old);
  u->old = NULL;
  u->otxn = NULL;
}

static int live (const upg *u, uint32_t cid) {
  size_t i;
  for (i = 0; i < u->ncids; i++) if (u->cids[i] == cid) return 1;
  return 0;
}

/* The containers of the old catalog (its specs). */
static int list_cid (void *ud, uint32_t cid, const rg_val *spec) {
  upg *u = (upg *)ud;
  if (u->ncids == u->cap) {
    size_t cap = u->cap ? 2 * u->cap : 16;
    uint32_t *a = (uint32_t *)realloc(u->cids, cap * sizeof(uint32_t));
    uint64_t *b;
    if (a) u->cids = a;
    b = a ? (uint64_t *)realloc(u->counts, cap * sizeof(uint64_t)) : NULL;
    if (b) u->counts = b;
    if (!a || !b) return u->oom = 1;
    u->cap = cap;
  }
  u->counts[u->ncids] = 0;
  u->cids[u->ncids++] = cid;
  return 0;
}

static int list_cids (upg *u, rg_err *e) {
  int rc = rg_cont_each_spec(u->otxn, O_META, list_cid, u);
  if (rc) return rg_kv_fail(e, rc, "upgrade");
  return u->oom ? rg_fail(e, 500, "out of memory") : 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Step 1: the catalog and the records of meta
** ======================================================================
*/
/* A spec that keeps the all-versions feed, as format 1 did. */
static int spec_with_history (const rg_val *v, rg_buf *out, rg_err *e) {
  cJSON *j = NULL, *cf, *av;
  int rc = rg_json_parse((const char *)v->p, v->n, &j, e);
  if (rc) return rg_fail(e, 500, "upgrade: a corrupt container spec: %s",
                         e->msg);
  cf = cJSON_GetObjectItemCaseSensitive(j, "change_feed");
  if (cf == NULL || cJSON_IsNull(cf)) {
    cJSON_DeleteItemFromObjectCaseSensitive(j, "change_feed");
    cf = cJSON_AddObjectToObject(j, "change_feed");
  }
  av = cf ? cJSON_GetObjectItemCaseSensitive(cf, "all_versions") : NULL;
  if (cf && av == NULL) cJSON_AddBoolToObject(cf, "all_versions", 1);
  rg_json_print(j, out);
  cJSON_Delete(j);
  if (cf == NULL || out->oom) return rg_fail(e, 500, "out of memory");
  return 0;
}

static int meta_body (rg_scope *s, void *ud, rg_err *e) {
  upg *u = (upg *)ud;
  rg_cur *cur;
  rg_val k, v;
  int rc;
  if ((rc = rg_cur_open(u->otxn, O_META, &cur)))
    return rg_kv_fail(e, rc, "upgrade");
  rc = rg_cur_get(cur, &k, &v, RG_FIRST);
  for (; rc == 0; rc = rg_cur_get(cur, &k, &v, RG_NEXT)) {
    const uint8_t *key = (const uint8_t *)k.p;
    const void *val = v.p;
    size_t vn = v.n;
    uint8_t lease[LEASE_SIZE + RG_MAX_INSTANCE];
    rg_buf spec;
    int tag = k.n ? key[0] : 0, r;
    if (tag == 1) {                  /* "\1..." counters and the secret */
      if (k.n == sizeof(RG_META_VERSION) - 1 &&
          memcmp(key, RG_META_VERSION, k.n) == 0)
        continue;
    }
    else if (tag == RG_MK_NAME) {
      if (vn != 4 || !live(u, rg_get_u32((const uint8_t *)val))) continue;
    }
    else if (k.n < 5 || !live(u, rg_get_u32(key + 1)) ||
             tag == RG_MK_STATS || tag == RG_MK_DROP || tag == RG_MK_SHAPE)
      continue;                      /* a dropped container's, or rebuilt
                                        (shapes list format 2's path ids) */
    rg_buf_init(&spec);
    if (tag == RG_MK_SPEC && !u->o->drop_history) {
      if ((r = spec_with_history(&v, &spec, e))) {
        rg_cur_close(cur);
        return r;
      }
      val = spec.p;
      vn = spec.n;
    }
    else if (tag == RG_MK_LEASE && vn >= LEASE_SIZE &&
             vn <= sizeof(lease) && ((const uint8_t *)val)[0] == 1 &&
             ((const uint8_t *)val)[1] == 1) {
      /* a latest-mode position: the start of its lsn (sub was a digest) */
      memcpy(lease, val, vn);
      rg_put_u64(lease + 20, 0);
      val = lease;
    }
    r = rg_put(s, RG_DB_META, k.p, k.n, val, vn, e);
    rg_buf_free(&spec);
    if (r) { rg_cur_close(cur); return r; }
  }
  rg_cur_close(cur);
  if (rc != RG_NOTFOUND) return rg_kv_fail(e, rc, "upgrade");
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Steps 2 and 3: items and feed records
** ======================================================================
*/
typedef struct ibatch {
  upg *u;
  rg_cont c;
  rg_bulk *bulk;
  rg_bulk_item *items;
  size_t n;
} ibatch;

static int items_body (rg_scope *s, void *ud, rg_err *e) {
  ibatch *q = (ibatch *)ud;
  size_t written, i;
  int rc = rg_bulk_write(s, q->bulk, &q->c, q->items, q->n, RG_BULK_RESTORE,
                         &written, e);
  if (rc) return rc;
  for (i = 0; i < q->n; i++)
    if (q->items[i].status != 201)
      return rg_fail(e, 500, "upgrade: an item of container '%s' could not "
                     "be written again: %s", q->c.spec->name,
                     q->items[i].msg ? q->items[i].msg : "refused");
  return 0;
}

static void ibatch_empty (ibatch *q) {
  size_t i;
  rg_bulk_clear(q->items, q->n);
  for (i = 0; i < q->n; i++) cJSON_Delete(q->items[i].doc);
  memset(q->items, 0, q->n * sizeof(rg_bulk_item));
  q->n = 0;
}

static int copy_items (upg *u, size_t ci, rg_err *e) {
  ibatch q;
  rg_cur *cur = NULL;
  rg_txn *ntxn;
  rg_val k, v;
  uint8_t p[4];
  int rc;
  memset(&q, 0, sizeof(q));
  q.u = u;
  q.c.env = u->nenv;
  if ((rc = rg_read_begin(u->nenv, &ntxn, e))) return rc;
  rc = rg_load_spec(ntxn, u->nenv, u->cids[ci], &q.c.spec, e);
  rg_read_end(u->nenv);
  if (rc) return rc;
  q.items = (rg_bulk_item *)calloc(BATCH, sizeof(rg_bulk_item));
  q.bulk = rg_bulk_new();
  if (q.items == NULL || q.bulk == NULL) {
    rc = rg_fail(e, 500, "out of memory");
    goto done;
  }
  if ((rc = rg_cur_open(u->otxn, O_ITEMS, &cur))) {
    rc = rg_kv_fail(e, rc, "upgrade");
    goto done;
  }
  k.p = p;
  k.n = rg_key_cid(p, u->cids[ci]);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  for (;;) {
    int more = rc == 0 && k.n >= 4 && memcmp(k.p, p, 4) == 0;
    if (rc && rc != RG_NOTFOUND) { rc = rg_kv_fail(e, rc, "upgrade"); break; }
    if (more) {
      rg_bulk_item *it = &q.items[q.n];
      if (v.n < 8 ||
          rg_json_parse((const char *)v.p + 8, v.n - 8, &it->doc,
                        e)) {
        rc = rg_fail(e, 500, "upgrade: a corrupt item in container '%s'",
                     q.c.spec->name);
        break;
      }
      it->expiry = (int64_t)rg_get_u64((const uint8_t *)v.p);
      q.n++;
      u->counts[ci]++;
    }
    if (q.n == BATCH || (!more && q.n > 0)) {
      if ((rc = rg_scope_run(u->nenv, NULL, NULL,
                             RG_SYNC_NONE, 0, items_body, &q,
                             e)))
        break;
      u->info->items += q.n;
      ibatch_empty(&q);
    }
    if (!more) { rc = 0; break; }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
done:
  if (cur) rg_cur_close(cur);
  if (q.items) ibatch_empty(&q);
  free(q.items);
  rg_bulk_free(q.bulk);
  rg_cspec_free(q.c.spec);
  return rc;
}

typedef struct fbatch {
  upg *u;
  rg_cur *cur;
  uint8_t start[RG_MAX_KEY];      /* where the batch starts (a rerun too) */
  size_t startn;
  int done;
  uint64_t n;
} fbatch;

/* Copies up to BATCH feed records of live containers from q->start on,
** and sets q->start to the first one left. */
static int feed_body (rg_scope *s, void *ud, rg_err *e) {
  fbatch *q = (fbatch *)ud;
  rg_val k, v;
  int rc, n = 0;
  k.p = q->start;
  k.n = q->startn;
  rc = rg_cur_get(q->cur, &k, &v, q->startn ? RG_SEEK : RG_FIRST);
  q->n = 0;
  for (; rc == 0 && n < BATCH; rc = rg_cur_get(q->cur, &k, &v, RG_NEXT),
                              n++) {
    if (k.n < 4 || !live(q->u, rg_get_u32((const uint8_t *)k.p)))
      continue;
    rc = rg_put_flags(s, RG_DB_FEED, k.p, k.n, v.p,
                      v.n, RG_KV_APPEND, e);
    if (rc) return rc;
    q->n++;
  }
  if (rc == RG_NOTFOUND) { q->done = 1; return 0; }
  if (rc) return rg_kv_fail(e, rc, "upgrade");
  if (k.n > sizeof(q->start)) return rg_fail(e, 500, "corrupt feed key");
  q->done = 0;
  return 0;
}

static int copy_feed (upg *u, rg_err *e) {
  fbatch q;
  int rc = 0;
  memset(&q, 0, sizeof(q));
  q.u = u;
  if ((rc = rg_cur_open(u->otxn, O_FEED, &q.cur)))
    return rg_kv_fail(e, rc, "upgrade");
  while (!q.done && rc == 0) {
    rc = rg_scope_run(u->nenv, NULL, NULL, RG_SYNC_NONE, 0, feed_body, &q, e);
    if (rc == 0) u->info->feed_records += q.n;
    if (rc == 0 && !q.done) {        /* the next batch starts where it is */
      rg_val k, v;
      if ((rc = rg_cur_get(q.cur, &k, &v, RG_CURRENT))) {
        rc = rg_kv_fail(e, rc, "upgrade");
        break;
      }
      memcpy(q.start, k.p, k.n);
      q.startn = k.n;
    }
  }
  rg_cur_close(q.cur);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Step 4: the checks, and the renames
** ======================================================================
*/
static int check_new (upg *u, rg_err *e) {
  rg_buf report;
  rg_cstat *stats = NULL;
  rg_buf names;
  uint64_t lsn;
  int n = 0, i, rc;
  size_t c;
  rg_buf_init(&report);
  if (rg_verify(u->nenv, &report) != 0) {
    rc = rg_fail(e, 500, "upgrade: the new database does not verify, so the "
                 "old one is left as it was: %.*s", (int)(report.n > 300 ? 300
                 : report.n), report.p ? report.p : "");
    rg_buf_free(&report);
    return rc;
  }
  rg_buf_free(&report);
  rg_buf_init(&names);
  if ((rc = rg_catalog_list(u->nenv, &names, &stats, &n, &lsn, e))) {
    rg_buf_free(&names);
    return rc;
  }
  u->info->containers = (uint64_t)n;
  for (c = 0; c < u->ncids && rc == 0; c++) {
    rg_txn *txn;
    rg_cspec *spec = NULL;
    if ((rc = rg_read_begin(u->nenv, &txn, e))) break;
    rc = rg_load_spec(txn, u->nenv, u->cids[c], &spec, e);
    rg_read_end(u->nenv);
    if (rc) break;
    for (i = 0; i < n; i++)
      if (stats[i].namelen == strlen(spec->name) &&
          memcmp(stats[i].name, spec->name, stats[i].namelen) == 0)
        break;
    if (i == n || stats[i].items != u->counts[c])
      rc = rg_fail(e, 500, "upgrade: container '%s' would hold %llu items "
                   "instead of %llu, so the old database is left as it was",
                   spec->name, (unsigned long long)(i < n ? stats[i].items : 0),
                   (unsigned long long)u->counts[c]);
    rg_cspec_free(spec);
  }
  free(stats);
  rg_buf_free(&names);
  return rc;
}

int rg_upgrade (const char *path, const rg_upgrade_opts *o,
                rg_upgrade_info *info, rg_err *e) {
  char tmp[4096], data[4096], old[4096], lock[4096];
  rg_open_opts no;
  upg u;
  size_t c;
  int rc;
  memset(info, 0, sizeof(*info));
  info->to = RG_FORMAT_VERSION;
  if (rg_upgrade_interrupted(path)) {        /* finish the renames */
    info->from = 1;
    info->kept_old = !o->remove_old;
    return finish(path, o->remove_old, e);
  }
  memset(&u, 0, sizeof(u));
  u.path = path;
  u.o = o;
  u.info = info;
  if ((rc = open_old(&u, e))) goto out;
  if (info->from == RG_FORMAT_VERSION) { info->to = info->from; goto out; }
  if (info->from != 1) {
    rc = rg_fail(e, 500, "upgrade: format %d is not one this build can "
                 "upgrade", info->from);
    goto out;
  }
  if ((rc = list_cids(&u, e))) goto out;
  clear_tmp(path);
  pathf(tmp, sizeof(tmp), path, ".upgrade");
  memset(&no, 0, sizeof(no));
  no.sync = RG_SYNC_NONE;
  no.map_size = (size_t)info->old_bytes + (64u << 20);
  if ((rc = rg_env_open(tmp, &no, &u.nenv, e))) goto out;
  if ((rc = rg_scope_run(u.nenv, NULL, NULL, RG_SYNC_NONE, 0, meta_body, &u,
                         e)))
    goto out;
  for (c = 0; c < u.ncids && rc == 0; c++) rc = copy_items(&u, c, e);
  if (rc == 0 && !o->drop_history) rc = copy_feed(&u, e);
  if (rc == 0) rc = check_new(&u, e);
  if (rc) goto out;
  {                                          /* flushed before it counts */
    rg_env_info ni;
    rg_env_info_get(u.nenv, &ni);
    info->new_bytes = ni.used_bytes;
    if ((rc = rg_local_flush(u.nenv->local, e))) {
      rc = rg_fail(e, rc, "upgrade: flushing the new database: %s", e->msg);
      goto out;
    }
  }
  rg_env_release(u.nenv);
  u.nenv = NULL;
  /* the old file flushed (its log is about to go), then its log removed */
  if ((rc = rg_local_flush(u.old, e))) {
    rc = rg_fail(e, rc, "upgrade: flushing the old database: %s", e->msg);
    goto out;
  }
  close_old(&u);
  if ((rc = rg_local_forget(path, e))) goto out;
  pathf(data, sizeof(data), path, "data.mdb");
  pathf(old, sizeof(old), path, "data.mdb.format1");
  pathf(lock, sizeof(lock), path, "lock.mdb");
  if (rename(data, old) != 0) {
    rc = rg_fail(e, 500, "upgrade: cannot rename data.mdb: %s",
                 strerror(errno));
    goto out;
  }
  unlink(lock);                    /* the old reader table; LMDB makes one */
  info->kept_old = !o->remove_old;
  rc = finish(path, o->remove_old, e);
out:
  if (u.nenv) rg_env_release(u.nenv);
  close_old(&u);
  if (rc && !rg_upgrade_interrupted(path)) clear_tmp(path);
  free(u.cids);
  free(u.counts);
  return rc;
}
/* }===================================================================== */
