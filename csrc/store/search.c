/*
** search.c: a container's full-text indexes in the store, and the
** statistics its queries score with (search.h; the policy: ftpolicy.c).
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sql/text.h"
#include "store/env.h"
#include "store/ftindex.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/search.h"

/*
** {=====================================================================
** The indexes in the store
** ======================================================================
*/
/* An index's id: the hash of its path and language (search.h). */
static uint32_t index_id (const rg_ftpath *p) {
  uint8_t lang = (uint8_t)(p->lang + 1);
  return (uint32_t)(rg_hash(p->path, p->n) ^
                    (rg_hash(&lang, 1) >> 32));
}

/* The path's index (NULL: none), for a language (-1: any). */
static const rg_ftpath *index_of (const rg_cspec *s, const char *path,
                                  size_t n, int lang) {
  const rg_ftpath *fp;
  if ((fp = rg_ftpolicy_path(s, path, n)) == NULL || !fp->indexed ||
      (lang >= 0 && fp->lang != lang))
    return NULL;
  return fp;
}

static uint64_t fid_of (const rg_cspec *s, const rg_ftpath *p) {
  return (uint64_t)s->cid << 32 | index_id(p);
}

/* The string at a path, followed as a scan's statistics follow it
** (fts.c's rg_ftacc: object members by the raw segments between '/'),
** NULL when there is none. */
static const cJSON *text_at (const rg_ftpath *p, const cJSON *doc) {
  size_t i = 0, j;
  if (doc == NULL) return NULL;
  while (i < p->n && doc) {
    const cJSON *m;
    if (p->path[i] == '/') i++;
    for (j = i; j < p->n && p->path[j] != '/'; j++) {}
    if (!cJSON_IsObject(doc)) return NULL;
    for (m = doc->child; m; m = m->next)
      if (m->string && strlen(m->string) == j - i &&
          memcmp(m->string, p->path + i, j - i) == 0)
        break;
    doc = m;
    i = j;
  }
  return cJSON_IsString(doc) ? doc : NULL;
}

/*
** Where partitions are kept apart (a remote database, remote.h) an index
** has one instance per physical partition, beside its items, so that an
** item's write and its index upkeep apply together: `nb` instances, the
** seam of instance b writing bucket b's records (ftindex.h).  Locally one
** instance (nb 1, no bucket in its keys).
*/
static int remote_of (const rg_env *env) {
  return env != NULL && rg_env_remote(env) != NULL;
}

static int nb_of (const rg_env *env, const rg_cspec *c) {
  return rg_cspec_buckets(c, remote_of(env));
}

/* The bucket of a stored item (its key is valid, else it is not stored). */
static int bucket_of (const rg_cspec *c, const cJSON *doc) {
  const cJSON *pkv[RG_MAX_PK_PATHS];
  rg_ikey k;
  rg_err e;
  rg_doc_pk(c, doc, pkv);
  return rg_ikey_partition(c, pkv, &k, &e) == 0 ? k.range : 0;
}

#define FT_HEAD_MAX (RG_FTEXT_HEAD + 2)

/*
** An index instance is complete once its build record is there ('B'): an
** index the policy gained (a replace, or a database whose container named
** it before the store kept indexes) has none until a write transaction
** builds it from the items, and queries scan until then.  A remote
** database's instances are built each in its own bucket, the record with
** them, and checked each in its own: a build spans the buckets, and its
** parts apply one bucket at a time (docs/cluster.md, *Atomicity across
** places*), so one cut off leaves some buckets without theirs.  Writes
** build the instances that lack it (rg_ftup_begin), a query uses the
** index only when every instance has it (all_built), else it scans.
**
** A remote run reads what it has not fetched yet as absent (remote.h).
** Where an index has several instances such a read is never used: the
** other instances' records are in other places, which the run fetches
** before it answers or commits, and it runs again with them.  So while the
** run lacks something, an instance whose record reads absent is taken as
** built (what the run does next is thrown away if it was not), instead of
** being built or scanned for: one round of fetches brings the records and
** what the index path reads.  With one instance the record is in the
** place a write writes, where an absence can stand as a condition of the
** commit instead of being fetched: there it is taken as read.
*/
static int lacking (const rg_env *env, int nb) {
  return nb > 1 && env != NULL && !rg_env_complete(env);
}

/* Is instance b of index ixid built (b: -1 locally)? */
static int is_built (rg_txn *txn, const rg_env *env, int nb, uint32_t cid,
                     uint32_t ixid, int b, int *out, rg_err *e) {
  uint8_t k[FT_HEAD_MAX];
  rg_val v;
  int rc = rg_kv_get(txn, RG_DB_FTEXT, k,
                     rg_key_ftext(k, cid, ixid, b, RG_FK_BUILT), &v);
  *out = rc == 0 || (rc == RG_NOTFOUND && lacking(env, nb));
  if (rc && rc != RG_NOTFOUND)
    return rg_kv_fail(e, rc, "read a full-text index");
  return 0;
}

/* Is every instance of index fp built?  (Their records are read together:
** on a remote database, one fetch of a point in each bucket.) */
static int all_built (rg_txn *txn, const rg_env *env, const rg_cspec *c,
                      const rg_ftpath *fp, int *out, rg_err *e) {
  int b, nb = nb_of(env, c), remote = remote_of(env), rc = 0, built;
  *out = 1;
  for (b = 0; b < nb && rc == 0; b++) {
    rc = is_built(txn, env, nb, c->cid, index_id(fp), remote ? b : -1,
                  &built, e);
    if (!built) *out = 0;
  }
  return rc;
}

struct rg_ftup {
  rg_scope *s;
  const rg_cspec *c;
  int n, nb, remote;
  const rg_ftpath *p[RG_MAX_FT_PATHS];
  rg_fti_seam *st;                   /* nb: instance b's */
  rg_ftkv *kv;
  rg_fti_writer **w;                 /* n x nb, made at first use */
  uint8_t *fresh;                    /* n x nb: instance built from the
                                        items by begin, the batch's changes
                                        in already */
};

static int up_fail (rg_ftup *u, int rc, rg_err *e);

/* The writer of index i's instance in bucket b, made at its first use. */
static rg_fti_writer *writer (rg_ftup *u, int i, int b) {
  rg_fti_writer **w = &u->w[(size_t)i * (size_t)u->nb + (size_t)b];
  if (*w == NULL &&
      rg_fti_writer_new(w, &u->kv[b], fid_of(u->c, u->p[i]), u->p[i]->lang))
    *w = NULL;
  return *w;
}

/* Adds a document's text to (add) or removes it from index i, in the
** instance of the item's bucket. */
static int up_text (rg_ftup *u, int i, const cJSON *doc, uint32_t seq,
                    const cJSON *t, int add, rg_err *e) {
  int b = u->nb > 1 ? bucket_of(u->c, doc) : 0, rc;
  rg_fti_writer *w;
  if (b < 0 || b >= u->nb) b = 0;
  if (u->fresh[(size_t)i * (size_t)u->nb + (size_t)b]) return 0;
  if ((w = writer(u, i, b)) == NULL) return up_fail(u, 500, e);
  rc = add ? rg_fti_add(w, seq, t->valuestring, strlen(t->valuestring))
           : rg_fti_remove(w, seq, t->valuestring, strlen(t->valuestring));
  return rc ? up_fail(u, rc, e) : 0;
}

/* Builds instance b of index i of u (locally the one: b 0, nb 1) from
** the stored items of its bucket (items that expired unpurged too: their
** purge is a write that removes them), from nothing: whatever a lost or
** cut-off build left there goes first. */
static int build (rg_ftup *u, int i, int b, rg_err *e) {
  uint8_t pre[12], k0[FT_HEAD_MAX];
  uint32_t ixid = index_id(u->p[i]);
  int inst = u->remote ? b : -1;
  rg_cur *cur;
  rg_val k, v;
  uint64_t gone;
  int rc;
  if ((rc = rg_del_prefix(u->s, RG_DB_FTEXT, k0,
                          rg_key_ftext(k0, u->c->cid, ixid, inst, 0),
                          UINT64_MAX, &gone, e)))
    return rc;
  if ((rc = rg_cur_open(u->s->txn, RG_DB_ITEMS, &cur)))
    return rg_scope_fail(u->s, rc, "read the items", e);
  k.p = pre;                  /* from the bucket's first hash (layout.h) */
  k.n = rg_key_cid(pre, u->c->cid);
  if (u->nb > 1) {
    rg_put_u64(pre + k.n, rg_range_start(b, u->nb));
    k.n += 8;
  }
  for (rc = rg_cur_get(cur, &k, &v, RG_SEEK);
       rc == 0 && k.n >= 4 && memcmp(k.p, pre, 4) == 0;
       rc = rg_cur_get(cur, &k, &v, RG_NEXT)) {
    rg_ihdr h;
    const char *json;
    size_t jn;
    cJSON *doc = NULL;
    const cJSON *t;
    rg_err je;
    if (u->nb > 1 &&                    /* past the bucket's hashes */
        (k.n < 12 || rg_range_of(rg_get_u64((const uint8_t *)k.p + 4),
                                 u->nb) != b))
      break;
    if (rg_ihdr_get(v.p, v.n, &h, &json, &jn) ||
        rg_json_parse(json, jn, &doc, &je)) {
      rg_cur_close(cur);
      u->s->failed = 500;
      return rg_fail(e, 500, "corrupt item record");
    }
    if ((t = text_at(u->p[i], doc)) != NULL &&
        (rc = up_text(u, i, doc, h.seq, t, 1, e))) {
      cJSON_Delete(doc);
      rg_cur_close(cur);
      return rc;
    }
    cJSON_Delete(doc);
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND)
    return rg_scope_fail(u->s, rc, "read the items", e);
  u->fresh[(size_t)i * (size_t)u->nb + (size_t)b] = 1;
  return rg_put(u->s, RG_DB_FTEXT, k0,
                rg_key_ftext(k0, u->c->cid, ixid, inst, RG_FK_BUILT), "", 0,
                e);
}

static int up_fail (rg_ftup *u, int rc, rg_err *e) {
  int b;
  for (b = 0; b < u->nb; b++)
    if (u->st[b].rc)
      return rg_scope_fail(u->s, u->st[b].rc, "write a full-text index", e);
  if (rc == 400 || rc == 500) rc = rg_fail(e, rc, "full-text index: %s",
                                           rc == 500 ? "out of memory"
                                           : "bad item seq");
  u->s->failed = rc;
  return rc;
}

static void up_free (rg_ftup *u) {
  free(u->fresh);
  free(u->st);
  free(u->kv);
  free(u->w);
  free(u);
}

int rg_ftup_begin (rg_ftup **out, rg_scope *s, const rg_cspec *c, rg_err *e) {
  rg_ftup *u;
  int i, b;
  *out = NULL;
  if (c->ft == NULL) return 0;
  if ((u = (rg_ftup *)calloc(1, sizeof(*u))) == NULL) {
    s->failed = 500;
    return rg_fail(e, 500, "out of memory");
  }
  u->s = s;
  u->c = c;
  u->remote = remote_of(s->env);
  u->nb = nb_of(s->env, c);
  for (i = 0; i < c->ft->n; i++)
    if (c->ft->p[i].indexed) u->p[u->n++] = &c->ft->p[i];
  if (u->n == 0) { free(u); return 0; }
  u->st = (rg_fti_seam *)calloc((size_t)u->nb, sizeof(rg_fti_seam));
  u->kv = (rg_ftkv *)calloc((size_t)u->nb, sizeof(rg_ftkv));
  u->w = (rg_fti_writer **)calloc((size_t)u->nb * (size_t)u->n,
                                  sizeof(rg_fti_writer *));
  u->fresh = (uint8_t *)calloc((size_t)u->nb * (size_t)u->n, 1);
  if (u->st == NULL || u->kv == NULL || u->w == NULL || u->fresh == NULL) {
    up_free(u);
    s->failed = 500;
    return rg_fail(e, 500, "out of memory");
  }
  for (b = 0; b < u->nb; b++) {
    rg_fti_seam_init(&u->kv[b], &u->st[b], s->txn);
    if (u->remote) u->st[b].bucket = b;
  }
  for (i = 0; i < u->n; i++)            /* each instance lacking it */
    for (b = 0; b < u->nb; b++) {
      int built, rc;
      if ((rc = is_built(s->txn, s->env, u->nb, c->cid, index_id(u->p[i]),
                         u->remote ? b : -1, &built, e)) ||
          (!built && (rc = build(u, i, b, e)))) {
        if (!s->failed) s->failed = rc;
        rg_ftup_end(u, NULL);
        return rc;
      }
    }
  *out = u;
  return 0;
}

int rg_ftup_item (rg_ftup *u, uint32_t seq, const cJSON *old,
                  const cJSON *neu, rg_err *e) {
  int i, rc;
  if (u == NULL) return 0;
  for (i = 0; i < u->n; i++) {
    const cJSON *a = text_at(u->p[i], old), *b = text_at(u->p[i], neu);
    if (a == b) continue;                     /* both NULL */
    if (a && b && strcmp(a->valuestring, b->valuestring) == 0) continue;
    if (a && (rc = up_text(u, i, old, seq, a, 0, e))) return rc;
    if (b && (rc = up_text(u, i, neu, seq, b, 1, e))) return rc;
  }
  return 0;
}

/* Flushes every instance written (e NULL: none, the batch failed).  After
** a failure a remote run that lacks something flushes the other instances
** still, so that it learns in one round what each lacks (it runs again;
** within one, the first term that lacks its blocks ends the flush: the
** blocks a fetch brings for it cover others). */
int rg_ftup_end (rg_ftup *u, rg_err *e) {
  size_t i;
  int rc = 0;
  if (u == NULL) return 0;
  for (i = 0; i < (size_t)u->n * (size_t)u->nb; i++) {
    rg_fti_seam *st = &u->st[i % (size_t)u->nb];
    rg_fti_work w;
    rg_err more;
    if (u->w[i] == NULL) continue;
    memset(&w, 0, sizeof(w));
    if (rc && e && !rg_env_complete(u->s->env))
      rg_fti_flush(u->w[i], &w, &more);
    else if (rc == 0 && e && (rc = rg_fti_flush(u->w[i], &w, e)))
      rc = st->rc ? rg_scope_fail(u->s, st->rc, "write a full-text index", e)
                  : (u->s->failed = rc);
    u->s->work.text_written += w.blocks_written;
    rg_fti_writer_free(u->w[i]);
  }
  up_free(u);
  return rc;
}

int rg_ftindex_update (rg_scope *s, const rg_cspec *c, uint32_t seq,
                       const cJSON *old, const cJSON *neu, rg_err *e) {
  rg_ftup *u;
  int rc;
  if (c->ft == NULL) return 0;
  if ((rc = rg_ftup_begin(&u, s, c, e))) return rc;
  if ((rc = rg_ftup_item(u, seq, old, neu, e))) {
    rg_ftup_end(u, NULL);
    return rc;
  }
  return rg_ftup_end(u, e);
}

/* Is p's index in spec (same id)? */
static int has_index (const rg_cspec *spec, const rg_ftpath *p) {
  const rg_ftpath *q = index_of(spec, p->path, p->n, p->lang);
  return q != NULL;
}

int rg_ftindex_replace (rg_scope *s, const rg_cspec *from,
                        const rg_cspec *to, rg_err *e) {
  rg_ftup *u;
  int i, rc;
  for (i = 0; from->ft && i < from->ft->n; i++) {   /* indexes that went */
    const rg_ftpath *p = &from->ft->p[i];
    uint8_t k[RG_FTEXT_PREFIX];
    uint64_t gone;
    if (!p->indexed || has_index(to, p)) continue;
    if ((rc = rg_del_prefix(s, RG_DB_FTEXT, k,
                            rg_key_ftext(k, from->cid, index_id(p), -1, 0),
                            UINT64_MAX, &gone, e)))
      return rc;
  }
  /* those that came are built by the upkeep's first batch */
  if ((rc = rg_ftup_begin(&u, s, to, e))) return rc;
  return rg_ftup_end(u, e);
}

int rg_ftindex_count (const rg_cspec *s, const cJSON *doc, uint64_t *docs) {
  int i;
  if (s->ft == NULL) return 0;
  for (i = 0; i < s->ft->n; i++)
    if (s->ft->p[i].indexed && text_at(&s->ft->p[i], doc)) docs[i]++;
  return 0;
}

/* The statistics of index fp summed over its nb instances (remote: one per
** bucket; else the one): the container's.  *reads counts the records. */
static int sum_stats (rg_txn *txn, const rg_cspec *c, const rg_ftpath *fp,
                      int remote, int nb, const char *const *terms,
                      const size_t *lens, int nterms, uint64_t *docs,
                      uint64_t *tokens, uint64_t *df, uint64_t *reads,
                      rg_err *e) {
  uint64_t *bdf = NULL;
  int b, i, rc = 0;
  *docs = *tokens = 0;
  for (i = 0; i < nterms; i++) df[i] = 0;
  if (nterms &&
      (bdf = (uint64_t *)malloc((size_t)nterms * sizeof(*bdf))) == NULL)
    return rg_fail(e, 500, "out of memory");
  for (b = 0; b < nb && rc == 0; b++) {
    rg_fti_seam st;
    rg_ftkv kv;
    uint64_t d, t;
    rg_fti_seam_init(&kv, &st, txn);
    if (remote) st.bucket = b;
    if ((rc = rg_fti_stats(&kv, fid_of(c, fp), terms, lens, nterms, &d, &t,
                           bdf, e))) {
      if (st.rc) rc = rg_kv_fail(e, st.rc, "read a full-text index");
      break;
    }
    *docs += d;
    *tokens += t;
    for (i = 0; i < nterms; i++) df[i] += bdf[i];
    *reads += 1 + (uint64_t)nterms;
  }
  free(bdf);
  return rc;
}

int rg_ftindex_verify (rg_txn *txn, rg_env *env, const rg_cspec *s,
                       const uint64_t *docs, rg_buf *report) {
  rg_cur *cur;
  rg_val k, v;
  uint8_t pre[RG_FTEXT_PREFIX];
  int i, problems = 0, rc, remote = remote_of(env), nb = nb_of(env, s);
  for (i = 0; s->ft && i < s->ft->n; i++) {
    const rg_ftpath *p = &s->ft->p[i];
    const char *none = NULL;
    uint64_t sum = 0;
    int b, built0 = 0;
    if (!p->indexed) continue;
    for (b = 0; b < nb; b++) {              /* each instance */
      rg_fti_seam st;
      rg_ftkv kv;
      uint64_t d = 0, t = 0;
      rg_err e;
      int built = 0;
      rg_fti_seam_init(&kv, &st, txn);
      if (remote) st.bucket = b;
      if (is_built(txn, env, nb, s->cid, index_id(p), remote ? b : -1,
                   &built, &e))
        built = 1;
      if (b == 0) built0 = built;
      if (rg_fti_verify(&kv, fid_of(s, p), &e) ||
          rg_fti_stats(&kv, fid_of(s, p), &none, NULL, 0, &d, &t, NULL, &e)) {
        rg_buf_addf(report, "container '%s': the full-text index of %s%s: "
                    "%s\n", s->name, p->path, remote ? " (a bucket's)" : "",
                    e.msg);
        problems++;
        built0 = 0;
        break;
      }
      if (!built && d) {
        rg_buf_addf(report, "container '%s': the full-text index of %s holds "
                    "documents but lacks its build record\n", s->name,
                    p->path);
        problems++;
      }
      else if (built != built0) {
        rg_buf_addf(report, "container '%s': the full-text index of %s lacks "
                    "the build record of bucket %d\n", s->name, p->path,
                    built0 ? b : 0);
        problems++;
      }
      sum += d;
    }
    if (built0 && sum != docs[i]) {
      rg_buf_addf(report, "container '%s': the full-text index of %s holds "
                    "%llu documents, the items %llu\n", s->name, p->path,
                    (unsigned long long)sum, (unsigned long long)docs[i]);
      problems++;
    }
  }
  /* no record of an index the container does not have */
  if ((rc = rg_cur_open(txn, RG_DB_FTEXT, &cur))) {
    rg_buf_addf(report, "the full-text table cannot be read\n");
    return problems + 1;
  }
  k.p = pre;
  k.n = rg_key_cid(pre, s->cid);
  for (rc = rg_cur_get(cur, &k, &v, RG_SEEK);
       rc == 0 && k.n >= 4 && memcmp(k.p, pre, 4) == 0;) {
    uint32_t ix;
    int known = 0;
    if (k.n < RG_FTEXT_PREFIX) {
      rg_buf_addf(report, "container '%s': a full-text record's key is "
                  "short\n", s->name);
      problems++;
      break;
    }
    ix = rg_get_u32((const uint8_t *)k.p + 4);
    for (i = 0; s->ft && i < s->ft->n && !known; i++)
      known = s->ft->p[i].indexed && index_id(&s->ft->p[i]) == ix;
    if (!known) {
      rg_buf_addf(report, "container '%s': the full-text table holds "
                    "records of an index it does not have (%08lx)\n",
                    s->name, (unsigned long)ix);
      problems++;
    }
    /* the next index's records */
    {
      uint8_t nx[RG_FTEXT_PREFIX];
      memcpy(nx, k.p, RG_FTEXT_PREFIX);
      if (++ix == 0) break;
      rg_put_u32(nx + 4, ix);
      k.p = nx;
      k.n = RG_FTEXT_PREFIX;
      rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    }
  }
  rg_cur_close(cur);
  return problems;
}
/* }===================================================================== */


/*
** {=====================================================================
** Statistics
** ======================================================================
*/
static int src_lang (void *ud, const char *path, size_t n) {
  rg_ftsrc *f = (rg_ftsrc *)ud;
  return rg_ftpolicy_lang(f->c->spec, path, n);
}

/* Whether the container may hold items that have expired but are not
** purged yet (a TTL entry at or before now): the index still holds their
** text, which a scan's statistics leave out. */
static int expired_unpurged (rg_ftsrc *f, int *out, rg_err *e) {
  uint8_t tk[RG_TTL_KEY];
  rg_cur *cur;
  rg_val k, v;
  int rc;
  *out = 0;
  if (!f->c->spec->ttl_on) return 0;
  if ((rc = rg_cur_open(f->txn, RG_DB_TTL, &cur)))
    return rg_kv_fail(e, rc, "read the TTL entries for FullTextScore");
  k.p = tk;
  k.n = rg_key_ttl(tk, f->c->spec->cid, 0, 0);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  if (rc == 0 && k.n == RG_TTL_KEY && memcmp(k.p, tk, 4) == 0)
    *out = (int64_t)rg_get_u64((const uint8_t *)k.p + 4) <= f->now;
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND)
    return rg_kv_fail(e, rc, "read the TTL entries for FullTextScore");
  return 0;
}

/* The statistics from the path's index: 1 when there is none to use. */
static int index_stats (rg_ftsrc *f, const char *path, size_t n, int lang,
                        const char *const *terms, const size_t *lens,
                        int nterms, uint64_t *docs, uint64_t *tokens,
                        uint64_t *df, rg_err *e) {
  const rg_ftpath *fp;
  int rc, exp, remote = remote_of(f->c->env);
  if (f->plen != 4 ||                   /* the container's scope only */
      (fp = index_of(f->c->spec, path, n, lang)) == NULL)
    return 1;
  if ((rc = all_built(f->txn, f->c->env, f->c->spec, fp, &exp, e)))
    return rc;
  if (!exp) return 1;
  if ((rc = expired_unpurged(f, &exp, e))) return rc;
  if (exp) return 1;
  return sum_stats(f->txn, f->c->spec, fp, remote,
                   nb_of(f->c->env, f->c->spec), terms, lens, nterms, docs,
                   tokens, df, &f->w->text_read, e);
}

/* From the index, or one pass over the items under the prefix. */
static int src_stats (void *ud, const char *path, size_t n, int lang,
                      const char *const *terms, const size_t *lens,
                      int nterms, uint64_t *docs, uint64_t *tokens,
                      uint64_t *df, rg_err *e) {
  rg_ftsrc *f = (rg_ftsrc *)ud;
  rg_ftacc *acc;
  rg_cur *cur;
  rg_val k, v;
  int rc;
  if ((rc = index_stats(f, path, n, lang, terms, lens, nterms, docs, tokens,
                        df, e)) != 1)
    return rc;
  if (rg_ftacc_new(&acc, path, n, lang, terms, lens, nterms))
    return rg_fail(e, 500, "out of memory");
  if ((rc = rg_cur_open(f->txn, RG_DB_ITEMS, &cur))) {
    rg_ftacc_free(acc);
    return rg_kv_fail(e, rc, "read the items for FullTextScore");
  }
  k.p = f->prefix;
  k.n = f->plen;
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n >= f->plen && memcmp(k.p, f->prefix, f->plen) == 0) {
    rg_ihdr h;
    const char *json;
    size_t jn;
    if (rg_ihdr_get(v.p, v.n, &h, &json, &jn)) {
      rc = -1;
      break;
    }
    if (h.expiry == 0 || h.expiry > f->now) {
      f->w->loaded++;
      f->w->loaded_bytes += v.n;
      f->w->text_loaded++;
      if (rg_ftacc_doc(acc, json, jn)) { rc = -2; break; }
    }
    if (f->deadline && rg_deadline_passed(f->deadline)) { rc = -3; break; }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  if (rc == -1) rc = rg_fail(e, 500, "corrupt item record");
  else if (rc == -2) rc = rg_fail(e, 500, "out of memory");
  else if (rc == -3)
    rc = rg_fail(e, 408, "the query exceeded its time limit (%.2f s of CPU)",
                 (double)f->deadline->limit / 1e9);
  else if (rc && rc != RG_NOTFOUND)
    rc = rg_kv_fail(e, rc, "read the items for FullTextScore");
  else {
    rc = 0;
    rg_ftacc_result(acc, docs, tokens, df);
  }
  rg_ftacc_free(acc);
  return rc;
}

/* A path under a computed property (whose value no stored item holds,
** so no index has it: the query evaluates it on each item). */
static int computed (const rg_cspec *spec, const rg_qftterms *t) {
  size_t n;
  int i;
  for (n = 1; n < t->plen && t->path[n] != '/'; n++) {}
  for (i = 0; i < spec->ncp; i++)
    if (strlen(spec->cp[i].name) == n - 1 &&
        memcmp(spec->cp[i].name, t->path + 1, n - 1) == 0)
      return 1;
  return 0;
}

static int plan_lang (void *ud, const char *path, size_t n) {
  return rg_ftpolicy_lang((const rg_cspec *)ud, path, n);
}

int rg_ftindex_plan (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_query *q, const rg_qv *params,
                     const int32_t *conj, int nconj, rg_arena *mem,
                     rg_ftplan *out, rg_err *e) {
  int i, r, built;
  if (spec->ft == NULL) return 0;
  out->spec = spec;
  out->remote = remote_of(env);
  out->nb = nb_of(env, spec);
  for (i = 0; i < nconj; i++) {
    r = rg_qfts_terms(q, params, conj[i], plan_lang, (void *)spec, mem,
                      &out->t);
    if (r < 0) return -rg_fail(e, 500, "out of memory");
    if (r == 0 || computed(spec, &out->t)) continue;
    out->fp = index_of(spec, out->t.path, out->t.plen, -1);
    if (out->fp == NULL) continue;
    if ((r = all_built(txn, env, spec, out->fp, &built, e)))
      return -r;
    if (built) return 1;
  }
  return 0;
}

/* Seqs found in instance b, gathered with their bucket. */
typedef struct bseq {
  uint32_t seq;
  int bucket;
  double score;
} bseq;

static int bseq_cmp (const void *a, const void *b) {
  const bseq *x = (const bseq *)a, *y = (const bseq *)b;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int bseq_rank (const void *a, const void *b) {
  const bseq *x = (const bseq *)a, *y = (const bseq *)b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int add_bseqs (bseq **v, size_t *n, size_t *cap, const uint32_t *seqs,
                      const double *scores, size_t m, int b) {
  size_t i;
  if (*n + m > *cap) {
    size_t nc = (*n + m) * 2;
    bseq *x = (bseq *)realloc(*v, (nc ? nc : 1) * sizeof(bseq));
    if (x == NULL) return 500;
    *v = x;
    *cap = nc;
  }
  for (i = 0; i < m; i++) {
    (*v)[*n].seq = seqs[i];
    (*v)[*n].bucket = b;
    (*v)[*n].score = scores ? scores[i] : 0;
    (*n)++;
  }
  return 0;
}

/* Splits v (n) into malloc'd seqs, scores (or NULL) and buckets (or NULL,
** where there is one instance); frees v. */
static int split_bseqs (const rg_ftplan *p, bseq *v, size_t n,
                        uint32_t **seqs, double **scores, uint16_t **bk,
                        rg_err *e) {
  size_t i, m = n ? n : 1;
  *seqs = (uint32_t *)malloc(m * sizeof(uint32_t));
  if (scores) *scores = (double *)malloc(m * sizeof(double));
  if (bk) *bk = p->remote ? (uint16_t *)malloc(m * sizeof(uint16_t)) : NULL;
  if (*seqs == NULL || (scores && *scores == NULL) ||
      (bk && p->remote && *bk == NULL)) {
    free(*seqs);
    *seqs = NULL;
    if (scores) { free(*scores); *scores = NULL; }
    if (bk) { free(*bk); *bk = NULL; }
    free(v);
    return rg_fail(e, 500, "out of memory");
  }
  for (i = 0; i < n; i++) {
    (*seqs)[i] = v[i].seq;
    if (scores) (*scores)[i] = v[i].score;
    if (bk && *bk) (*bk)[i] = (uint16_t)v[i].bucket;
  }
  free(v);
  return 0;
}

int rg_ftindex_docs (rg_txn *txn, const rg_ftplan *p, uint32_t **seqs,
                     uint16_t **bk, size_t *n, rg_work *w, rg_err *e) {
  bseq *v = NULL;
  size_t nv = 0, cap = 0;
  int b, rc = 0;
  *seqs = NULL;
  *n = 0;
  if (bk) *bk = NULL;
  if (p->t.none) return 0;
  w->text_read += 1;
  for (b = 0; b < p->nb && rc == 0; b++) {   /* the union of each bucket's */
    rg_fti_seam st;
    rg_ftkv kv;
    rg_fti_work fw;
    uint32_t *d = NULL;
    size_t nd = 0;
    memset(&fw, 0, sizeof(fw));
    rg_fti_seam_init(&kv, &st, txn);
    if (p->remote) st.bucket = b;
    rc = rg_fti_docs(&kv, fid_of(p->spec, p->fp), p->t.t, p->t.len, p->t.n,
                     p->t.all, &d, &nd, &fw, e);
    w->text_read += fw.blocks_read;
    if (rc && st.rc) rc = rg_kv_fail(e, st.rc, "read a full-text index");
    if (rc == 0 && add_bseqs(&v, &nv, &cap, d, NULL, nd, b))
      rc = rg_fail(e, 500, "out of memory");
    free(d);
  }
  if (rc) { free(v); return rc; }
  if (p->nb > 1) qsort(v, nv, sizeof(bseq), bseq_cmp);
  if ((rc = split_bseqs(p, v, nv, seqs, NULL, bk, e))) return rc;
  *n = nv;
  return 0;
}

int rg_ftindex_item (rg_txn *txn, rg_env *env, const rg_ftplan *p,
                     uint32_t seq, int bucket, rg_val *ikey) {
  if (p->remote) {              /* its instance's place is the item's */
    uint8_t k[FT_HEAD_MAX];
    rg_val v;
    int rc = rg_kv_get(txn, RG_DB_FTEXT, k,
                       rg_key_ftext(k, p->spec->cid, index_id(p->fp), bucket,
                               RG_FK_BUILT), &v);
    if (rc && rc != RG_NOTFOUND) return rc;
  }
  return rg_ref_item(txn, env, seq, ikey);
}

int rg_ftindex_estimate (rg_txn *txn, const rg_ftplan *p, uint64_t *n,
                         rg_work *w, rg_err *e) {
  uint64_t docs, tokens, df[64];
  int i, rc;
  *n = 0;
  if (p->t.none) return 0;
  if ((rc = sum_stats(txn, p->spec, p->fp, p->remote, p->nb, p->t.t,
                      p->t.len, p->t.n, &docs, &tokens, df, &w->text_read,
                      e)))
    return rc;
  *n = p->t.all ? docs : 0;
  for (i = 0; i < p->t.n; i++)
    *n = p->t.all ? (df[i] < *n ? df[i] : *n) : *n + df[i];
  return 0;
}

int rg_ftindex_rank_plan (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                          const rg_query *q, const rg_qv *params,
                          int32_t call, int64_t now, rg_arena *mem,
                          rg_ftplan *out, rg_err *e) {
  rg_ftsrc f;
  rg_cont c;
  rg_work w;
  int r, exp;
  if (spec->ft == NULL) return 0;
  out->spec = spec;
  out->remote = remote_of(env);
  out->nb = nb_of(env, spec);
  r = rg_qfts_terms(q, params, call, plan_lang, (void *)spec, mem, &out->t);
  if (r < 0) return -rg_fail(e, 500, "out of memory");
  if (r == 0 || computed(spec, &out->t) ||
      (out->fp = index_of(spec, out->t.path, out->t.plen, -1)) == NULL)
    return 0;
  if ((r = all_built(txn, env, spec, out->fp, &exp, e)))
    return -r;
  if (!exp) return 0;
  memset(&c, 0, sizeof(c));
  memset(&w, 0, sizeof(w));
  memset(&f, 0, sizeof(f));
  c.spec = (rg_cspec *)spec;
  c.env = env;
  f.txn = txn;
  f.c = &c;
  f.now = now;
  f.w = &w;
  if ((r = expired_unpurged(&f, &exp, e))) return -r;
  return !exp;
}

int rg_ftindex_topk (rg_txn *txn, const rg_ftplan *p, size_t k,
                     uint32_t **seqs, double **scores, uint16_t **bk,
                     size_t *n, rg_work *w, rg_err *e) {
  rg_fti_hit *hit;
  rg_fti_totals tot, *tp = NULL;
  uint64_t df[64];
  bseq *v = NULL;
  size_t nv = 0, cap = 0, i;
  int b, rc = 0;
  *seqs = NULL;
  *scores = NULL;
  *n = 0;
  if (bk) *bk = NULL;
  if ((hit = (rg_fti_hit *)malloc((k ? k : 1) * sizeof(*hit))) == NULL)
    return rg_fail(e, 500, "out of memory");
  if (p->nb > 1 && p->t.n <= 64) {    /* scored as one index would score */
    tot.df = df;
    tp = &tot;
    rc = sum_stats(txn, p->spec, p->fp, p->remote, p->nb, p->t.t, p->t.len,
                   p->t.n, &tot.docs, &tot.tokens, df, &w->text_read, e);
  }
  w->text_read += 1;
  for (b = 0; b < p->nb && rc == 0; b++) {   /* each bucket's best k */
    rg_fti_seam st;
    rg_ftkv kv;
    rg_fti_work fw;
    size_t nh = 0;
    memset(&fw, 0, sizeof(fw));
    rg_fti_seam_init(&kv, &st, txn);
    if (p->remote) st.bucket = b;
    rc = rg_fti_topk_with(&kv, fid_of(p->spec, p->fp), p->t.t, p->t.len,
                          p->t.n, p->t.all, k, tp, NULL, NULL, hit, &nh, &fw,
                          e);
    w->text_read += fw.blocks_read;
    if (rc && st.rc) rc = rg_kv_fail(e, st.rc, "read a full-text index");
    for (i = 0; rc == 0 && i < nh; i++)
      if (add_bseqs(&v, &nv, &cap, &hit[i].doc, &hit[i].score, 1, b))
        rc = rg_fail(e, 500, "out of memory");
  }
  free(hit);
  if (rc) { free(v); return rc; }
  if (p->nb > 1) qsort(v, nv, sizeof(bseq), bseq_rank);
  if (nv > k) nv = k;                 /* the best k of the merged */
  if ((rc = split_bseqs(p, v, nv, seqs, scores, bk, e))) return rc;
  *n = nv;
  return 0;
}

void rg_ftsrc_init (rg_ftsrc *f, rg_txn *txn, const rg_cont *c,
                    const uint8_t *prefix, size_t plen, int64_t now,
                    rg_work *w) {
  memset(f, 0, sizeof(*f));
  f->iface.ud = f;
  f->iface.lang = src_lang;
  f->iface.stats = src_stats;
  f->txn = txn;
  f->c = c;
  memcpy(f->prefix, prefix, plen);
  f->plen = plen;
  f->now = now;
  f->w = w;
}
/* }===================================================================== */
