/*
** ftpolicy.c: a container's full-text policy (search.h, "The policy"):
** its default language, its paths and their languages, and which paths
** its full-text indexes name, read from the spec's JSON form.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sql/text.h"
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

const rg_ftpath *rg_ftpolicy_path (const rg_cspec *s, const char *path,
                                  size_t n) {
  return s->ft == NULL ? NULL : find(s->ft, path, n);
}

int rg_ftpolicy_lang (const rg_cspec *s, const char *path, size_t n) {
  const rg_ftpath *fp;
  if (s->ft == NULL) return RG_LANG_EN_US;
  if (path && (fp = find(s->ft, path, n)) != NULL) return fp->lang;
  return s->ft->lang;
}
/* }===================================================================== */
