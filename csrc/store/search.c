/*
** search.c: the full-text policy of a container and the statistics its
** queries score with (search.h).
*/

#include <stdlib.h>
#include <string.h>

#include "sql/text.h"
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
** Statistics
** ======================================================================
*/
static int src_lang (void *ud, const char *path, size_t n) {
  rg_ftsrc *f = (rg_ftsrc *)ud;
  return rg_ftpolicy_lang(f->c->spec, path, n);
}

/* One pass over the items under the prefix. */
static int src_stats (void *ud, const char *path, size_t n, int lang,
                      const char *const *terms, const size_t *lens,
                      int nterms, uint64_t *docs, uint64_t *tokens,
                      uint64_t *df, rg_err *e) {
  rg_ftsrc *f = (rg_ftsrc *)ud;
  rg_ftacc *acc;
  rg_cur *cur;
  rg_val k, v;
  int rc;
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
