/*
** search.c: the full-text policy of a container and the statistics its
** queries score with (search.h).
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sql/text.h"
#include "store/ftindex.h"
#include "store/layout.h"
#include "store/search.h"

/*
** {=====================================================================
** The policy
** ======================================================================
*/
static int lang_of (const cJSON *v, const char *what, int *out, rg_err *e) {
  if (!cJSON_IsString(v) ||
      (*out = rg_text_lang(v->valuestring, strlen(v->valuestring))) < 0)
    return rg_fail(e, 400, "%s is one of en-US, de-DE, es-ES, fr-FR, it-IT, "
                   "pt-PT, pt-BR", what);
  return 0;
}

/* A plain path "/a/b": no wildcard, no array position. */
static int plain_path (const cJSON *v, const char *what, rg_err *e) {
  rg_path p;
  int rc, i;
  if (!cJSON_IsString(v))
    return rg_fail(e, 400, "%s: a path must be a string", what);
  if ((rc = rg_path_parse(&p, v->valuestring, 0, e))) return rc;
  for (i = 0; i < p.n; i++)
    if (strcmp(p.seg[i], "[]") == 0 || strcmp(p.seg[i], "*") == 0 ||
        strcmp(p.seg[i], "?") == 0) {
      rg_path_free(&p);
      return rg_fail(e, 400, "%s: full-text paths take no wildcard or array "
                     "position (\"%s\")", what, v->valuestring);
    }
  rg_path_free(&p);
  return 0;
}

static rg_ftpath *find (struct rg_ftpolicy *p, const char *path, size_t n) {
  int i;
  for (i = 0; i < p->n; i++)
    if (p->p[i].n == n && memcmp(p->p[i].path, path, n) == 0) return &p->p[i];
  return NULL;
}

int rg_ftpolicy_build (rg_cspec *s, const cJSON *spec, const cJSON *ix,
                       rg_err *e) {
  const cJSON *pol = cJSON_GetObjectItemCaseSensitive(spec, "full_text");
  const cJSON *cos = cJSON_GetObjectItemCaseSensitive(spec, "fullTextPolicy");
  const cJSON *idx = NULL, *paths = NULL, *c;
  struct rg_ftpolicy *p;
  int cosmos = 0, rc = 0;
  if (ix && cJSON_IsObject(ix)) {
    idx = cJSON_GetObjectItemCaseSensitive(ix, "full_text");
    if (idx == NULL) idx = cJSON_GetObjectItemCaseSensitive(ix, "fullTextIndexes");
  }
  if (pol && cos)
    return rg_fail(e, 400, "give either option 'full_text' or "
                   "'fullTextPolicy'");
  if (pol == NULL || cJSON_IsNull(pol)) { pol = cos; cosmos = 1; }
  if (pol && cJSON_IsNull(pol)) pol = NULL;
  if (idx && cJSON_IsNull(idx)) idx = NULL;
  s->ft = NULL;
  if (pol == NULL && idx == NULL) return 0;
  if ((p = (struct rg_ftpolicy *)calloc(1, sizeof(*p))) == NULL)
    return rg_fail(e, 500, "out of memory");
  s->ft = p;
  if (pol) {
    static const char *const lk[] = { "default_language", "paths", NULL };
    static const char *const ck[] = { "defaultLanguage", "fullTextPaths", NULL };
    const char *const *k = cosmos ? ck : lk;
    const cJSON *m;
    if (!cJSON_IsObject(pol))
      return rg_fail(e, 400, "option '%s' is a table", cosmos ?
                     "fullTextPolicy" : "full_text");
    for (m = pol->child; m; m = m->next)
      if (strcmp(m->string, k[0]) && strcmp(m->string, k[1]))
        return rg_fail(e, 400, "option '%s' has no field '%s'",
                       cosmos ? "fullTextPolicy" : "full_text", m->string);
    m = cJSON_GetObjectItemCaseSensitive(pol, k[0]);
    if (m && !cJSON_IsNull(m) &&
        (rc = lang_of(m, "the full-text default language", &p->lang, e)))
      return rc;
    paths = cJSON_GetObjectItemCaseSensitive(pol, k[1]);
    if (paths && cJSON_IsNull(paths)) paths = NULL;
    if (paths && (!cJSON_IsArray(paths) ||
                  cJSON_GetArraySize(paths) > RG_MAX_FT_PATHS))
      return rg_fail(e, 400, "the full-text paths are a list of at most %d "
                     "{path, language}", RG_MAX_FT_PATHS);
  }
  p->p = (rg_ftpath *)calloc((size_t)cJSON_GetArraySize(paths) + 1,
                             sizeof(rg_ftpath));
  if (p->p == NULL) return rg_fail(e, 500, "out of memory");
  if (paths) for (c = paths->child; c; c = c->next) {
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(c, "path");
    const cJSON *lang = cJSON_GetObjectItemCaseSensitive(c, "language");
    rg_ftpath *fp;
    if (!cJSON_IsObject(c))
      return rg_fail(e, 400, "a full-text path is {path, language}");
    if ((rc = plain_path(path, "a full-text path", e))) return rc;
    if (find(p, path->valuestring, strlen(path->valuestring)))
      return rg_fail(e, 400, "the full-text path %s is given twice",
                     path->valuestring);
    fp = &p->p[p->n];
    fp->lang = p->lang;
    if (lang && !cJSON_IsNull(lang) &&
        (rc = lang_of(lang, "a full-text path's language", &fp->lang, e)))
      return rc;
    if ((fp->path = strdup(path->valuestring)) == NULL)
      return rg_fail(e, 500, "out of memory");
    fp->n = strlen(fp->path);
    p->n++;
  }
  if (idx) {
    if (!cJSON_IsArray(idx))
      return rg_fail(e, 400, "the full-text indexes are a list of paths");
    for (c = idx->child; c; c = c->next) {
      const cJSON *path = cJSON_IsObject(c)
                          ? cJSON_GetObjectItemCaseSensitive(c, "path") : c;
      rg_ftpath *fp;
      if ((rc = plain_path(path, "a full-text index", e))) return rc;
      fp = find(p, path->valuestring, strlen(path->valuestring));
      if (fp == NULL)
        return rg_fail(e, 400, "the full-text index on %s needs the path in "
                       "the full-text policy", path->valuestring);
      fp->indexed = 1;
    }
  }
  return 0;
}

void rg_ftpolicy_free (struct rg_ftpolicy *p) {
  int i;
  if (p == NULL) return;
  for (i = 0; i < p->n; i++) free(p->p[i].path);
  free(p->p);
  free(p);
}

int rg_ftpolicy_lang (const rg_cspec *s, const char *path, size_t n) {
  const rg_ftpath *fp;
  if (s->ft == NULL) return RG_LANG_EN_US;
  if (path && (fp = find(s->ft, path, n)) != NULL) return fp->lang;
  return s->ft->lang;
}
/* }===================================================================== */


/*
** {=====================================================================
** The indexes in the store
** ======================================================================
*/
uint32_t rg_ftindex_id (const rg_ftpath *p) {
  uint8_t lang = (uint8_t)(p->lang + 1);
  return (uint32_t)(rg_hash(p->path, p->n) ^
                    (rg_hash(&lang, 1) >> 32));
}

const rg_ftpath *rg_ftindex_of (const rg_cspec *s, const char *path,
                                size_t n, int lang) {
  const rg_ftpath *fp;
  if (s->ft == NULL || (fp = find(s->ft, path, n)) == NULL || !fp->indexed ||
      (lang >= 0 && fp->lang != lang))
    return NULL;
  return fp;
}

static uint64_t fid_of (const rg_cspec *s, const rg_ftpath *p) {
  return (uint64_t)s->cid << 32 | rg_ftindex_id(p);
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

struct rg_ftup {
  rg_scope *s;
  const rg_cspec *c;
  rg_fti_seam st;
  rg_ftkv kv;
  int n;
  const rg_ftpath *p[RG_MAX_FT_PATHS];
  rg_fti_writer *w[RG_MAX_FT_PATHS];
  uint8_t built[RG_MAX_FT_PATHS];    /* built from the items by begin: the
                                        batch's changes are in already */
};

static int up_fail (rg_ftup *u, int rc, rg_err *e);

/* An index is complete once its build record is there ('B'): an index
** the policy gained (a replace, or a database whose container named it
** before the store kept indexes) has none until a write transaction
** builds it from the items, and queries scan until then. */
static int is_built (rg_txn *txn, uint32_t cid, uint32_t ixid, int *out,
                     rg_err *e) {
  uint8_t k[RG_FTEXT_HEAD];
  rg_val v;
  int rc = rg_kv_get(txn, RG_DB_FTEXT, k, rg_key_ftext(k, cid, ixid,
                                                        RG_FK_BUILT), &v);
  *out = rc == 0;
  if (rc && rc != RG_NOTFOUND)
    return rg_kv_fail(e, rc, "read a full-text index");
  return 0;
}

/* Builds index i of u from every stored item of the container (items
** that expired unpurged too: their purge is a write that removes them). */
static int build (rg_ftup *u, int i, rg_err *e) {
  uint8_t pre[4], k0[RG_FTEXT_HEAD];
  rg_cur *cur;
  rg_val k, v;
  uint64_t gone;
  int rc;
  /* from nothing: whatever a lost build record left goes first */
  if ((rc = rg_del_prefix(u->s, RG_DB_FTEXT, k0,
                          rg_key_ftext(k0, u->c->cid, rg_ftindex_id(u->p[i]),
                                       0), UINT64_MAX, &gone, e)))
    return rc;
  if ((rc = rg_cur_open(u->s->txn, RG_DB_ITEMS, &cur)))
    return rg_scope_fail(u->s, rc, "read the items", e);
  k.p = pre;
  k.n = rg_key_cid(pre, u->c->cid);
  for (rc = rg_cur_get(cur, &k, &v, RG_SEEK);
       rc == 0 && k.n >= 4 && memcmp(k.p, pre, 4) == 0;
       rc = rg_cur_get(cur, &k, &v, RG_NEXT)) {
    rg_ihdr h;
    const char *json;
    size_t jn;
    cJSON *doc = NULL;
    const cJSON *t;
    rg_err je;
    if (rg_ihdr_get(v.p, v.n, &h, &json, &jn) ||
        rg_json_parse(json, jn, &doc, &je)) {
      rg_cur_close(cur);
      u->s->failed = 500;
      return rg_fail(e, 500, "corrupt item record");
    }
    if ((t = text_at(u->p[i], doc)) != NULL &&
        (rc = rg_fti_add(u->w[i], h.seq, t->valuestring,
                         strlen(t->valuestring)))) {
      cJSON_Delete(doc);
      rg_cur_close(cur);
      return up_fail(u, rc, e);
    }
    cJSON_Delete(doc);
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND)
    return rg_scope_fail(u->s, rc, "read the items", e);
  u->built[i] = 1;
  return rg_put(u->s, RG_DB_FTEXT, k0,
                rg_key_ftext(k0, u->c->cid, rg_ftindex_id(u->p[i]),
                             RG_FK_BUILT), "", 0, e);
}

static int up_fail (rg_ftup *u, int rc, rg_err *e) {
  if (u->st.rc) return rg_scope_fail(u->s, u->st.rc, "write a full-text index",
                                     e);
  if (rc == 400 || rc == 500) rc = rg_fail(e, rc, "full-text index: %s",
                                           rc == 500 ? "out of memory"
                                           : "bad item seq");
  u->s->failed = rc;
  return rc;
}

int rg_ftup_begin (rg_ftup **out, rg_scope *s, const rg_cspec *c, rg_err *e) {
  rg_ftup *u;
  int i;
  *out = NULL;
  if (c->ft == NULL) return 0;
  if ((u = (rg_ftup *)calloc(1, sizeof(*u))) == NULL) {
    s->failed = 500;
    return rg_fail(e, 500, "out of memory");
  }
  u->s = s;
  u->c = c;
  rg_fti_seam_init(&u->kv, &u->st, s->txn);
  for (i = 0; i < c->ft->n; i++) {
    const rg_ftpath *p = &c->ft->p[i];
    if (!p->indexed) continue;
    u->p[u->n] = p;
    if (rg_fti_writer_new(&u->w[u->n], &u->kv, fid_of(c, p), p->lang)) {
      rg_ftup_end(u, NULL);
      s->failed = 500;
      return rg_fail(e, 500, "out of memory");
    }
    u->n++;
  }
  for (i = 0; i < u->n; i++) {
    int built, rc;
    if ((rc = is_built(s->txn, c->cid, rg_ftindex_id(u->p[i]), &built, e)) ||
        (!built && (rc = build(u, i, e)))) {
      if (!s->failed) s->failed = rc;
      rg_ftup_end(u, NULL);
      return rc;
    }
  }
  if (u->n == 0) { free(u); return 0; }
  *out = u;
  return 0;
}

int rg_ftup_item (rg_ftup *u, uint32_t seq, const cJSON *old,
                  const cJSON *neu, rg_err *e) {
  int i, rc;
  if (u == NULL) return 0;
  for (i = 0; i < u->n; i++) {
    const cJSON *a = text_at(u->p[i], old), *b = text_at(u->p[i], neu);
    if (a == b || u->built[i]) continue;      /* both NULL, or built */
    if (a && b && strcmp(a->valuestring, b->valuestring) == 0) continue;
    if (a && (rc = rg_fti_remove(u->w[i], seq, a->valuestring,
                                 strlen(a->valuestring))))
      return up_fail(u, rc, e);
    if (b && (rc = rg_fti_add(u->w[i], seq, b->valuestring,
                              strlen(b->valuestring))))
      return up_fail(u, rc, e);
  }
  return 0;
}

int rg_ftup_end (rg_ftup *u, rg_err *e) {
  int i, rc = 0;
  if (u == NULL) return 0;
  for (i = 0; i < u->n; i++) {
    rg_fti_work w;
    memset(&w, 0, sizeof(w));
    if (rc == 0 && e && (rc = rg_fti_flush(u->w[i], &w, e)))
      rc = u->st.rc ? rg_scope_fail(u->s, u->st.rc,
                                    "write a full-text index", e)
                    : (u->s->failed = rc);
    u->s->work.text_written += w.blocks_written;
    rg_fti_writer_free(u->w[i]);
  }
  free(u);
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
  const rg_ftpath *q = rg_ftindex_of(spec, p->path, p->n, p->lang);
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
                            rg_key_ftext(k, from->cid, rg_ftindex_id(p), 0),
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

int rg_ftindex_verify (rg_txn *txn, const rg_cspec *s, const uint64_t *docs,
                       rg_buf *report) {
  rg_fti_seam st;
  rg_ftkv kv;
  rg_cur *cur;
  rg_val k, v;
  uint8_t pre[RG_FTEXT_PREFIX];
  int i, problems = 0, rc;
  rg_fti_seam_init(&kv, &st, txn);
  for (i = 0; s->ft && i < s->ft->n; i++) {
    const rg_ftpath *p = &s->ft->p[i];
    const char *none = NULL;
    uint64_t d = 0, t = 0;
    rg_err e;
    int built = 0;
    if (!p->indexed) continue;
    if (is_built(txn, s->cid, rg_ftindex_id(p), &built, &e)) built = 1;
    if (rg_fti_verify(&kv, fid_of(s, p), &e) ||
        rg_fti_stats(&kv, fid_of(s, p), &none, NULL, 0, &d, &t, NULL, &e)) {
      rg_buf_addf(report, "container '%s': the full-text index of %s: %s\n",
                    s->name, p->path, e.msg);
      problems++;
    }
    else if (!built && d) {
      rg_buf_addf(report, "container '%s': the full-text index of %s holds "
                  "documents but lacks its build record\n", s->name, p->path);
      problems++;
    }
    else if (built && d != docs[i]) {
      rg_buf_addf(report, "container '%s': the full-text index of %s holds "
                    "%llu documents, the items %llu\n", s->name, p->path,
                    (unsigned long long)d, (unsigned long long)docs[i]);
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
      known = s->ft->p[i].indexed && rg_ftindex_id(&s->ft->p[i]) == ix;
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
  rg_fti_seam st;
  rg_ftkv kv;
  int rc, exp;
  if (f->plen != 4 ||                   /* the container's scope only */
      (fp = rg_ftindex_of(f->c->spec, path, n, lang)) == NULL)
    return 1;
  if ((rc = is_built(f->txn, f->c->spec->cid, rg_ftindex_id(fp), &exp, e)))
    return rc;
  if (!exp) return 1;
  if ((rc = expired_unpurged(f, &exp, e))) return rc;
  if (exp) return 1;
  rg_fti_seam_init(&kv, &st, f->txn);
  if ((rc = rg_fti_stats(&kv, fid_of(f->c->spec, fp), terms, lens, nterms,
                         docs, tokens, df, e)))
    return st.rc ? rg_kv_fail(e, st.rc, "read a full-text index") : rc;
  f->w->text_read += 1 + (uint64_t)nterms;
  return 0;
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

int rg_ftindex_plan (rg_txn *txn, const rg_cspec *spec, const rg_query *q,
                     const rg_qv *params, const int32_t *conj, int nconj,
                     rg_arena *mem, rg_ftplan *out, rg_err *e) {
  int i, r, built;
  if (spec->ft == NULL) return 0;
  out->spec = spec;
  for (i = 0; i < nconj; i++) {
    r = rg_qfts_terms(q, params, conj[i], plan_lang, (void *)spec, mem,
                      &out->t);
    if (r < 0) return -rg_fail(e, 500, "out of memory");
    if (r == 0 || computed(spec, &out->t)) continue;
    out->fp = rg_ftindex_of(spec, out->t.path, out->t.plen, -1);
    if (out->fp == NULL) continue;
    if ((r = is_built(txn, spec->cid, rg_ftindex_id(out->fp), &built, e)))
      return -r;
    if (built) return 1;
  }
  return 0;
}

int rg_ftindex_docs (rg_txn *txn, const rg_ftplan *p,
                     uint32_t **seqs, size_t *n, rg_work *w, rg_err *e) {
  rg_fti_seam st;
  rg_ftkv kv;
  rg_fti_work fw;
  int rc;
  *seqs = NULL;
  *n = 0;
  if (p->t.none) return 0;
  memset(&fw, 0, sizeof(fw));
  rg_fti_seam_init(&kv, &st, txn);
  rc = rg_fti_docs(&kv, fid_of(p->spec, p->fp), p->t.t, p->t.len, p->t.n,
                   p->t.all, seqs, n, &fw, e);
  w->text_read += 1 + fw.blocks_read;
  if (rc && st.rc) return rg_kv_fail(e, st.rc, "read a full-text index");
  return rc;
}

int rg_ftindex_estimate (rg_txn *txn, const rg_ftplan *p, uint64_t *n,
                         rg_work *w, rg_err *e) {
  rg_fti_seam st;
  rg_ftkv kv;
  uint64_t docs, tokens, df[64];
  int i, rc;
  *n = 0;
  if (p->t.none) return 0;
  rg_fti_seam_init(&kv, &st, txn);
  if ((rc = rg_fti_stats(&kv, fid_of(p->spec, p->fp), p->t.t, p->t.len,
                         p->t.n, &docs, &tokens, df, e)))
    return st.rc ? rg_kv_fail(e, st.rc, "read a full-text index") : rc;
  w->text_read += 1 + (uint64_t)p->t.n;
  *n = p->t.all ? docs : 0;
  for (i = 0; i < p->t.n; i++)
    *n = p->t.all ? (df[i] < *n ? df[i] : *n) : *n + df[i];
  return 0;
}

int rg_ftindex_rank_plan (rg_txn *txn, const rg_cspec *spec,
                          const rg_query *q, const rg_qv *params,
                          int32_t call, int64_t now, rg_arena *mem,
                          rg_ftplan *out, rg_err *e) {
  rg_ftsrc f;
  rg_cont c;
  rg_work w;
  int r, exp;
  if (spec->ft == NULL) return 0;
  out->spec = spec;
  r = rg_qfts_terms(q, params, call, plan_lang, (void *)spec, mem, &out->t);
  if (r < 0) return -rg_fail(e, 500, "out of memory");
  if (r == 0 || computed(spec, &out->t) ||
      (out->fp = rg_ftindex_of(spec, out->t.path, out->t.plen, -1)) == NULL)
    return 0;
  if ((r = is_built(txn, spec->cid, rg_ftindex_id(out->fp), &exp, e)))
    return -r;
  if (!exp) return 0;
  memset(&c, 0, sizeof(c));
  memset(&w, 0, sizeof(w));
  memset(&f, 0, sizeof(f));
  c.spec = (rg_cspec *)spec;
  f.txn = txn;
  f.c = &c;
  f.now = now;
  f.w = &w;
  if ((r = expired_unpurged(&f, &exp, e))) return -r;
  return !exp;
}

int rg_ftindex_topk (rg_txn *txn, const rg_ftplan *p, size_t k,
                     uint32_t **seqs, double **scores, size_t *n,
                     rg_work *w, rg_err *e) {
  rg_fti_seam st;
  rg_ftkv kv;
  rg_fti_work fw;
  rg_fti_hit *hit;
  size_t i;
  int rc;
  *seqs = NULL;
  *scores = NULL;
  *n = 0;
  if ((hit = (rg_fti_hit *)malloc((k ? k : 1) * sizeof(*hit))) == NULL ||
      (*seqs = (uint32_t *)malloc((k ? k : 1) * sizeof(uint32_t))) == NULL ||
      (*scores = (double *)malloc((k ? k : 1) * sizeof(double))) == NULL) {
    free(hit);
    free(*seqs);
    *seqs = NULL;
    return rg_fail(e, 500, "out of memory");
  }
  memset(&fw, 0, sizeof(fw));
  rg_fti_seam_init(&kv, &st, txn);
  rc = rg_fti_topk(&kv, fid_of(p->spec, p->fp), p->t.t, p->t.len, p->t.n,
                   p->t.all, k, NULL, NULL, hit, n, &fw, e);
  w->text_read += 1 + fw.blocks_read;
  for (i = 0; rc == 0 && i < *n; i++) {
    (*seqs)[i] = hit[i].doc;
    (*scores)[i] = hit[i].score;
  }
  free(hit);
  if (rc) {
    free(*seqs);
    free(*scores);
    *seqs = NULL;
    *scores = NULL;
    *n = 0;
    if (st.rc) return rg_kv_fail(e, st.rc, "read a full-text index");
  }
  return rc;
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
