/*
** container.c: container specs and the indexing policy.
**
** A container's spec is what create_container was given, validated and
** normalized, stored as JSON text under meta 'c' cid (layout.c) and parsed
** into an rg_cspec by every process that opens the container.  A handle
** keeps its parsed spec; a container deleted and created again gets a new
** cid, and every call checks in its transaction that the cid is still in
** the catalog (rg_cont_alive).  db:replace_container changes the stored
** spec (its indexing policy, TTL, retention and size limit; never its
** partition key, partitions or unique keys): the same check compares the
** stored text with the handle's and, when they differ, the handle adopts
** the stored spec (spec_adopt), so that no call works with a spec
** other than its transaction's.  c:set_throughput rewrites the stored
** "throughput" too; the live budget is read from store/throughput.c,
** never from a parsed spec.
**
** The stored form:
**   { "name": "posts", "partition_key": ["/postId"],
**     "physical_partitions": 8,
**     "indexing": { "automatic": true, "included": ["/\*"],
**                   "excluded": ["/content/?"],
**                   "composite": [[{"path": "/a", "order": "ascending"}]] },
**     "unique_keys": [["/username"]],
**     "default_ttl": null | -1 | seconds,
**     "max_partition_bytes": 21474836480,
**     "change_feed": { "all_versions": false | true,
**                      "retention": null | seconds },
**     "throughput": null | RU/s | { "manual": RU/s } |
**                   { "autoscale_max": RU/s, "burst": true },
**     "computed_properties": [{"name": "cp_lower",
**                              "query": "SELECT VALUE LOWER(c.name) FROM c"}],
**     "revision": 2 }
**
** The all-versions feed (every create, replace, delete and expiry, with
** the version it made or removed) is kept only when change_feed asks for
** it: all_versions = true, or a retention (which bounds it).  The latest
** version feed is always there.
**
** `revision` is not an option: the binding adds it to the specs it creates
** (RG_SPEC_REVISION), a replaced spec keeps the one stored (catalog.c), and
** c:spec() leaves it out.  A container made before it existed has none (1):
** its items have no shape entries and its hierarchical keys hash whole,
** so the planner and the key layout keep to what such a container holds.
**
** Computed properties are top-level properties that queries see but items
** do not store: each is a query "SELECT VALUE expr FROM c" over the item
** (validated by the query engine: deterministic, no WHERE, JOIN, subquery,
** aggregate or user-defined function), parsed once with the spec.  At most
** RG_MAX_COMPUTED; a name is a property name other than a system
** property's (id, _etag, _ts, _lsn, _rid, _self, _attachments).  The index
** covers them like stored paths (index.c), and a stored property of the
** same name is neither indexed nor seen by queries.
**
** The indexing policy decides, for the normalized path of every scalar in a
** document (array positions written "[]"), whether it is indexed: among the
** included and excluded patterns that match, the most specific wins (more
** segments first, then "?" over "*"), and an exclusion wins a tie.  With
** `automatic = false` nothing is indexed.  "/_etag/?" is always excluded,
** and "/_lsn/?" unless an included pattern names it ("/_ts/?" is indexed
** as any path is).
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/container.h"
#include "store/layout.h"
#include "store/search.h"


/*
** {=====================================================================
** Validation helpers
** ======================================================================
*/
/* Refuses keys of the object `o` outside `allowed`. */
static int only_keys (const cJSON *o, const char *const *allowed,
                      const char *where, rg_err *e) {
  const cJSON *c;
  for (c = o->child; c != NULL; c = c->next) {
    const char *const *a;
    for (a = allowed; *a; a++)
      if (strcmp(*a, c->string) == 0) break;
    if (*a == NULL)
      return rg_fail(e, 400, "unknown option '%s' in %s", c->string, where);
  }
  return 0;
}

static int get_int (const cJSON *v, const char *name, int64_t lo, int64_t hi,
                    int64_t *out, rg_err *e) {
  if (!cJSON_IsNumber(v) || !rg_num_int(v, out) || *out < lo || *out > hi)
    return rg_fail(e, 400, "option '%s' must be an integer from %lld to %lld",
                   name, (long long)lo, (long long)hi);
  return 0;
}

int rg_tpset_parse (const cJSON *v, rg_tpset *out, const char *what,
                    rg_err *e) {
  static const char *const keys[] = { "manual", "autoscale_max", "burst",
                                      NULL };
  const cJSON *m, *a, *b;
  memset(out, 0, sizeof(*out));
  if (v == NULL || cJSON_IsNull(v)) return 0;
  if (cJSON_IsNumber(v)) {
    m = v;
    a = b = NULL;
  }
  else if (cJSON_IsObject(v)) {
    int rc = only_keys(v, keys, what, e);
    if (rc) return rc;
    m = cJSON_GetObjectItemCaseSensitive(v, "manual");
    a = cJSON_GetObjectItemCaseSensitive(v, "autoscale_max");
    b = cJSON_GetObjectItemCaseSensitive(v, "burst");
    if ((m == NULL) == (a == NULL))
      return rg_fail(e, 400, "%s: give either 'manual' or 'autoscale_max' "
                     "(request units per second)", what);
    if (b != NULL && !cJSON_IsBool(b))
      return rg_fail(e, 400, "%s: 'burst' must be a boolean", what);
  }
  else
    return rg_fail(e, 400, "%s must be a number of request units per "
                   "second, {autoscale_max = n} or nil", what);
  out->mode = m ? RG_TP_MANUAL : RG_TP_AUTOSCALE;
  if (m == NULL) m = a;
  if (!cJSON_IsNumber(m) || !(m->valuedouble >= 1.0 &&
      m->valuedouble <= RG_TP_MAX_RU) ||
      m->valuedouble != (double)(int64_t)m->valuedouble)
    return rg_fail(e, 400, "%s: request units per second must be a whole "
                   "number from 1 to %.0f", what, RG_TP_MAX_RU);
  out->ru = m->valuedouble;
  out->burst = b != NULL && cJSON_IsTrue(b);
  return 0;
}

/* The write path sets these, so a key built on them would move. */
static int system_path (const rg_path *p) {
  return p->n >= 1 && (strcmp(p->seg[0], "_etag") == 0 ||
                       strcmp(p->seg[0], "_ts") == 0 ||
                       strcmp(p->seg[0], "_lsn") == 0);
}

static int one_path (rg_path *out, const char *text, const char *name,
                     rg_err *e) {
  int rc = rg_path_parse(out, text, 0, e);
  if (rc) return rc;
  if (system_path(out)) {
    rg_path_free(out);
    return rg_fail(e, 400, "option '%s': '%s' is a system property, set by "
                   "every write", name, text);
  }
  return 0;
}

/* Parses a list of plain paths (pk, unique keys). */
static int get_paths (const cJSON *v, const char *name, rg_path *out,
                      int max, int *n, rg_err *e) {
  const cJSON *c;
  int rc;
  *n = 0;
  if (cJSON_IsString(v)) {
    if ((rc = one_path(&out[0], v->valuestring, name, e)) != 0) return rc;
    *n = 1;
    return 0;
  }
  if (!cJSON_IsArray(v) || v->child == NULL)
    return rg_fail(e, 400, "option '%s' must be a path or a list of paths",
                   name);
  for (c = v->child; c != NULL; c = c->next) {
    if (*n == max)
      return rg_fail(e, 400, "option '%s' takes at most %d paths", name, max);
    if (!cJSON_IsString(c))
      return rg_fail(e, 400, "option '%s' must list paths (strings)", name);
    if ((rc = one_path(&out[*n], c->valuestring, name, e)) != 0) return rc;
    (*n)++;
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Indexing policy
** ======================================================================
*/
static int add_pattern (rg_cspec *s, const char *text, int include,
                        rg_err *e) {
  rg_pattern *p = &s->pat[s->npat];
  int rc, i;
  const char *last;
  if ((rc = rg_path_parse(&p->path, text, 1, e)) != 0) return rc;
  last = p->path.seg[p->path.n - 1];
  if (strcmp(last, "?") == 0) p->kind = RG_PAT_SCALAR;
  else if (strcmp(last, "*") == 0) p->kind = RG_PAT_ALL;
  else {
    rg_path_free(&p->path);
    return rg_fail(e, 400, "index path '%s' must end with '/?' or '/*'", text);
  }
  p->path.n--;
  for (i = 0; i < p->path.n; i++)
    if (strcmp(p->path.seg[i], "?") == 0 || strcmp(p->path.seg[i], "*") == 0) {
      rg_path_free(&p->path);
      return rg_fail(e, 400, "index path '%s': '?' and '*' may only end it",
                     text);
    }
  p->include = include;
  s->npat++;
  return 0;
}

static int pattern_matches (const rg_pattern *p, const char *const *seg,
                            int n) {
  int i;
  if (p->kind == RG_PAT_SCALAR ? n != p->path.n : n < p->path.n) return 0;
  for (i = 0; i < p->path.n; i++)
    if (strcmp(p->path.seg[i], seg[i]) != 0) return 0;
  return 1;
}

int rg_cspec_indexed (const rg_cspec *s, const char *const *seg, int n) {
  int i, best = -1, best_rank = -1;
  if (!s->automatic) return 0;
  for (i = 0; i < s->npat; i++) {
    const rg_pattern *p = &s->pat[i];
    int rank;
    if (!pattern_matches(p, seg, n)) continue;
    rank = p->path.n * 4 + (p->kind == RG_PAT_SCALAR ? 2 : 0) +
           (p->include ? 0 : 1);
    if (rank > best_rank) { best_rank = rank; best = i; }
  }
  return best >= 0 && s->pat[best].include;
}

static int build_indexing (rg_cspec *s, const cJSON *ix, rg_err *e) {
  static const char *const keys[] = { "automatic", "included", "excluded",
                                       "composite", "full_text",
                                       "fullTextIndexes", "vector_indexes", NULL };
  const cJSON *inc = NULL, *exc = NULL, *comp = NULL, *c;
  int npat = 3 + s->nvemb, rc, i, lsn_asked = 0;
  s->automatic = 1;
  if (ix != NULL && !cJSON_IsNull(ix)) {
    const cJSON *a;
    if (!cJSON_IsObject(ix))
      return rg_fail(e, 400, "option 'indexing' must be a table");
    if ((rc = only_keys(ix, keys, "indexing", e)) != 0) return rc;
    a = cJSON_GetObjectItemCaseSensitive(ix, "automatic");
    if (a != NULL) {
      if (!cJSON_IsBool(a))
        return rg_fail(e, 400, "option 'indexing.automatic' must be a boolean");
      s->automatic = cJSON_IsTrue(a);
    }
    inc = cJSON_GetObjectItemCaseSensitive(ix, "included");
    exc = cJSON_GetObjectItemCaseSensitive(ix, "excluded");
    comp = cJSON_GetObjectItemCaseSensitive(ix, "composite");
  }
  if ((inc && !cJSON_IsArray(inc)) || (exc && !cJSON_IsArray(exc)))
    return rg_fail(e, 400, "options 'indexing.included' and "
                   "'indexing.excluded' must be lists of paths");
  npat += cJSON_GetArraySize(inc) + cJSON_GetArraySize(exc);
  s->pat = (rg_pattern *)calloc((size_t)npat, sizeof(rg_pattern));
  if (s->pat == NULL) return rg_fail(e, 500, "out of memory");
  if (inc == NULL || inc->child == NULL) {
    if ((rc = add_pattern(s, "/*", 1, e)) != 0) return rc;
  }
  for (c = inc ? inc->child : NULL; c; c = c->next) {
    if (!cJSON_IsString(c))
      return rg_fail(e, 400, "option 'indexing.included' must list paths");
    if ((rc = add_pattern(s, c->valuestring, 1, e)) != 0) return rc;
  }
  for (c = exc ? exc->child : NULL; c; c = c->next) {
    if (!cJSON_IsString(c))
      return rg_fail(e, 400, "option 'indexing.excluded' must list paths");
    if ((rc = add_pattern(s, c->valuestring, 0, e)) != 0) return rc;
  }
  for (i = 0; i < s->npat; i++)       /* _lsn is indexed only if named */
    if (s->pat[i].include && s->pat[i].path.n == 1 &&
        strcmp(s->pat[i].path.seg[0], "_lsn") == 0)
      lsn_asked = 1;
  if ((rc = add_pattern(s, "/_etag/?", 0, e)) != 0) return rc;
  if (!lsn_asked && (rc = add_pattern(s, "/_lsn/?", 0, e)) != 0) return rc;
  for (i = 0; i < s->nvemb; i++) {   /* vectors stay out of the range index */
    rg_buf t;
    rg_buf_init(&t);
    rg_buf_adds(&t, s->vemb[i].text);
    rg_buf_adds(&t, "/*");
    rg_buf_addc(&t, 0);
    rc = t.oom ? rg_fail(e, 500, "out of memory") : add_pattern(s, t.p, 0, e);
    rg_buf_free(&t);
    if (rc) return rc;
  }
  if (comp == NULL || cJSON_IsNull(comp)) return 0;
  if (!cJSON_IsArray(comp))
    return rg_fail(e, 400, "option 'indexing.composite' must be a list");
  s->comp = (rg_composite *)calloc((size_t)cJSON_GetArraySize(comp) + 1,
                                   sizeof(rg_composite));
  if (s->comp == NULL) return rg_fail(e, 500, "out of memory");
  for (c = comp->child; c; c = c->next) {
    static const char *const ckeys[] = { "path", "order", NULL };
    rg_composite *ci = &s->comp[s->ncomp++];
    const cJSON *m;
    rg_buf idtext;
    if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) < 2 ||
        cJSON_GetArraySize(c) > 8)
      return rg_fail(e, 400, "a composite index lists 2 to 8 paths");
    rg_buf_init(&idtext);
    rg_buf_adds(&idtext, "composite");
    for (m = c->child; m; m = m->next) {
      const cJSON *path = cJSON_GetObjectItemCaseSensitive(m, "path");
      const cJSON *order = cJSON_GetObjectItemCaseSensitive(m, "order");
      if (!cJSON_IsObject(m) || !cJSON_IsString(path)) {
        rg_buf_free(&idtext);
        return rg_fail(e, 400, "a composite index entry is "
                       "{path = \"/a\", order = \"ascending\"|\"descending\"}");
      }
      if ((rc = only_keys(m, ckeys, "a composite index entry", e)) != 0 ||
          (rc = rg_path_parse(&ci->path[ci->n], path->valuestring, 0, e)) != 0) {
        rg_buf_free(&idtext);
        return rc;
      }
      if (order != NULL && !(cJSON_IsString(order) &&
          (strcmp(order->valuestring, "ascending") == 0 ||
           strcmp(order->valuestring, "descending") == 0))) {
        rg_path_free(&ci->path[ci->n]);
        rg_buf_free(&idtext);
        return rg_fail(e, 400, "a composite index order is \"ascending\" or "
                       "\"descending\"");
      }
      ci->desc[ci->n] = order != NULL &&
                        strcmp(order->valuestring, "descending") == 0;
      rg_buf_addf(&idtext, "|%s|%d", path->valuestring, ci->desc[ci->n]);
      ci->n++;
    }
    rg_buf_addc(&idtext, 0);
    if (idtext.oom) return rg_fail(e, 500, "out of memory");
    ci->name = idtext.p;             /* the buffer is the name */
  }
  return 0;
}
/* }===================================================================== */


/* The computed properties: names and parsed queries. */
static int build_computed (rg_cspec *s, const cJSON *v, rg_err *e) {
  static const char *const system[] = {
    "id", "_etag", "_ts", "_lsn", "_rid", "_self", "_attachments", NULL
  };
  static const char *const ckeys[] = { "name", "query", NULL };
  const cJSON *c;
  int rc, i;
  if (v == NULL || cJSON_IsNull(v)) return 0;
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > RG_MAX_COMPUTED)
    return rg_fail(e, 400, "option 'computed_properties' is a list of at "
                   "most %d {name = ..., query = ...}", RG_MAX_COMPUTED);
  s->cp = (rg_qcomputed *)calloc((size_t)cJSON_GetArraySize(v) + 1,
                                 sizeof(rg_qcomputed));
  if (s->cp == NULL) return rg_fail(e, 500, "out of memory");
  for (c = v->child; c; c = c->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
    const cJSON *query = cJSON_GetObjectItemCaseSensitive(c, "query");
    rg_query *q = NULL;
    const char *const *sy;
    if (!cJSON_IsObject(c) || !cJSON_IsString(name) || !cJSON_IsString(query))
      return rg_fail(e, 400, "a computed property is {name = \"...\", "
                     "query = \"SELECT VALUE ... FROM c\"}");
    if ((rc = only_keys(c, ckeys, "a computed property", e))) return rc;
    if (name->valuestring[0] == '\0' || strlen(name->valuestring) > 255 ||
        strchr(name->valuestring, '/') != NULL)
      return rg_fail(e, 400, "computed property name '%s' is not a property "
                     "name", name->valuestring);
    for (sy = system; *sy; sy++)
      if (strcmp(*sy, name->valuestring) == 0)
        return rg_fail(e, 400, "computed property name '%s' is a system "
                       "property", name->valuestring);
    for (i = 0; i < s->ncp; i++)
      if (strcmp(s->cp[i].name, name->valuestring) == 0)
        return rg_fail(e, 400, "computed property '%s' is defined twice",
                       name->valuestring);
    if ((rc = rg_query_parse(query->valuestring, strlen(query->valuestring),
                             0, &q, e)) ||
        (rc = rg_query_computed_check(q, e))) {
      char msg[sizeof(e->msg)];
      memcpy(msg, e->msg, sizeof(msg));
      rg_query_free(q);
      return rg_fail(e, 400, "computed property '%s': %s",
                     name->valuestring, msg);
    }
    s->cp[s->ncp].q = q;
    if ((s->cp[s->ncp].name = strdup(name->valuestring)) == NULL) {
      rg_query_free(q);
      return rg_fail(e, 500, "out of memory");
    }
    s->cp[s->ncp].nlen = (uint32_t)strlen(name->valuestring);
    s->ncp++;
  }
  return 0;
}

/* Gives `s` the contents of `fresh` (a spec of the same container built
** from its replaced form) and keeps the old contents, in `fresh`, on the
** chain `s->older` until `s` is freed: pointers taken into the old
** contents stay valid for the call that took them. */
static void spec_adopt (rg_cspec *s, rg_cspec *fresh) {
  rg_cspec old = *s;
  *s = *fresh;
  *fresh = old;
  s->older = fresh;
}

/* Do two declared paths name the same thing? */
static int same_path (const rg_path *a, const rg_path *b) {
  int i;
  if (a->n != b->n) return 0;
  for (i = 0; i < a->n; i++) if (strcmp(a->seg[i], b->seg[i])) return 0;
  return 1;
}

int rg_cspec_same_layout (const rg_cspec *a, const rg_cspec *b, rg_err *e) {
  int i, j, same = a->npk == b->npk && a->nuniq == b->nuniq;
  for (i = 0; same && i < a->npk; i++) same = same_path(&a->pk[i], &b->pk[i]);
  if (!same) return rg_fail(e, 400, "a container's partition key cannot change");
  if (a->nparts != b->nparts)
    return rg_fail(e, 400, "a container's physical_partitions cannot change");
  if (rg_vpolicy_replace_ok(a, b, e)) return 400;
  for (i = 0; same && i < a->nuniq; i++) {
    same = a->uniq[i].n == b->uniq[i].n;
    for (j = 0; same && j < a->uniq[i].n; j++)
      same = same_path(&a->uniq[i].path[j], &b->uniq[i].path[j]);
  }
  if (!same) return rg_fail(e, 400, "a container's unique keys cannot change");
  return 0;
}

/* Are the members `key` of two spec texts the same (or both absent)? */
static int same_member (const cJSON *a, const cJSON *b, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, key);
  const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, key);
  return (x == NULL && y == NULL) || (x && y && cJSON_Compare(x, y, 1));
}

/* Computed properties are indexed: a change to them changes the entries. */
int rg_cspec_same_indexing (const rg_cspec *a, const rg_cspec *b) {
  cJSON *ja = cJSON_Parse(a->json), *jb = cJSON_Parse(b->json);
  int same = ja && jb && same_member(ja, jb, "indexing") &&
             same_member(ja, jb, "computed_properties") &&
             same_member(ja, jb, "vector_embeddings") &&
             same_member(ja, jb, "full_text") &&
             same_member(ja, jb, "fullTextPolicy");
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  return same;
}

void rg_cspec_free (rg_cspec *s) {
  int i, j;
  if (s == NULL) return;
  rg_cspec_free(s->older);
  free(s->name);
  for (i = 0; i < s->npk; i++) rg_path_free(&s->pk[i]);
  for (i = 0; i < s->npat; i++) rg_path_free(&s->pat[i].path);
  free(s->pat);
  for (i = 0; i < s->ncomp; i++)
  {
    for (j = 0; j < s->comp[i].n; j++) rg_path_free(&s->comp[i].path[j]);
    free(s->comp[i].name);
  }
  free(s->comp);
  for (i = 0; i < s->nuniq; i++)
    for (j = 0; j < s->uniq[i].n; j++) rg_path_free(&s->uniq[i].path[j]);
  free(s->uniq);
  for (i = 0; i < s->ncp; i++) {
    rg_query_free((rg_query *)s->cp[i].q);
    free((char *)s->cp[i].name);
  }
  free(s->cp);
  rg_ftpolicy_free(s->ft);
  rg_vpolicy_free(s);
  free(s->json);
  free(s);
}

int rg_cspec_build (const cJSON *j, uint32_t cid, rg_cspec **out, rg_err *e) {
  static const char *const keys[] = {
    "name", "partition_key", "physical_partitions", "indexing",
    "unique_keys", "default_ttl", "max_partition_bytes", "change_feed",
    "computed_properties", "revision", "throughput", "full_text",
    "fullTextPolicy", "vector_embeddings", NULL
  };
  rg_cspec *s;
  const cJSON *v;
  int64_t n;
  int rc;
  rg_buf text;
  *out = NULL;
  if (!cJSON_IsObject(j)) return rg_fail(e, 400, "a container spec is a table");
  if ((rc = only_keys(j, keys, "the container options", e)) != 0) return rc;
  s = (rg_cspec *)calloc(1, sizeof(rg_cspec));
  if (s == NULL) return rg_fail(e, 500, "out of memory");
  s->cid = cid;
  v = cJSON_GetObjectItemCaseSensitive(j, "name");
  if (!cJSON_IsString(v)) { rc = rg_fail(e, 400, "a container has a name"); goto fail; }
  if ((s->name = strdup(v->valuestring)) == NULL) goto oom;

  v = cJSON_GetObjectItemCaseSensitive(j, "partition_key");
  if (v == NULL) { rc = rg_fail(e, 400, "option 'partition_key' is required"); goto fail; }
  if ((rc = get_paths(v, "partition_key", s->pk, RG_MAX_PK_PATHS, &s->npk, e)))
    goto fail;

  s->nparts = 1;
  v = cJSON_GetObjectItemCaseSensitive(j, "physical_partitions");
  if (v != NULL) {
    if ((rc = get_int(v, "physical_partitions", 1, RG_MAX_PARTITIONS, &n, e)))
      goto fail;
    s->nparts = (int)n;
  }

  if ((rc = rg_vpolicy_build(s, j, e)) ||
      (rc = build_indexing(s, cJSON_GetObjectItemCaseSensitive(j, "indexing"),
                           e)))
    goto fail;

  v = cJSON_GetObjectItemCaseSensitive(j, "unique_keys");
  if (v != NULL && !cJSON_IsNull(v)) {
    const cJSON *u;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > 16) {
      rc = rg_fail(e, 400, "option 'unique_keys' is a list of at most 16 "
                   "lists of paths");
      goto fail;
    }
    s->uniq = (rg_uniq *)calloc((size_t)cJSON_GetArraySize(v) + 1,
                                sizeof(rg_uniq));
    if (s->uniq == NULL) goto oom;
    for (u = v->child; u; u = u->next) {
      rg_uniq *q = &s->uniq[s->nuniq++];
      if (!cJSON_IsArray(u)) {
        rc = rg_fail(e, 400, "option 'unique_keys' is a list of lists of paths");
        goto fail;
      }
      if ((rc = get_paths(u, "unique_keys", q->path, 8, &q->n, e))) goto fail;
    }
  }

  s->default_ttl = -1;
  v = cJSON_GetObjectItemCaseSensitive(j, "default_ttl");
  if (v != NULL && !cJSON_IsNull(v)) {
    if (!cJSON_IsNumber(v) || !rg_num_int(v, &n) || n == 0 || n < -1 ||
        n > RG_MAX_TTL) {
      rc = rg_fail(e, 400, "option 'default_ttl' is -1 or a whole number of "
                   "seconds from 1 to %d", RG_MAX_TTL);
      goto fail;
    }
    s->ttl_on = 1;
    s->default_ttl = n;
  }

  s->max_partition_bytes = RG_DEFAULT_PARTITION_BYTES;
  v = cJSON_GetObjectItemCaseSensitive(j, "max_partition_bytes");
  if (v != NULL) {
    if ((rc = get_int(v, "max_partition_bytes", 1, INT64_MAX, &n, e)))
      goto fail;
    s->max_partition_bytes = (uint64_t)n;
  }

  s->retention = -1;
  v = cJSON_GetObjectItemCaseSensitive(j, "change_feed");
  if (v != NULL && !cJSON_IsNull(v)) {
    static const char *const fkeys[] = { "all_versions", "retention", NULL };
    const cJSON *r, *av;
    if (!cJSON_IsObject(v)) {
      rc = rg_fail(e, 400, "option 'change_feed' must be a table");
      goto fail;
    }
    if ((rc = only_keys(v, fkeys, "change_feed", e))) goto fail;
    av = cJSON_GetObjectItemCaseSensitive(v, "all_versions");
    if (av != NULL && !cJSON_IsNull(av)) {
      if (!cJSON_IsBool(av)) {
        rc = rg_fail(e, 400, "option 'change_feed.all_versions' must be a "
                     "boolean");
        goto fail;
      }
      s->all_versions = cJSON_IsTrue(av);
    }
    r = cJSON_GetObjectItemCaseSensitive(v, "retention");
    if (r != NULL && !cJSON_IsNull(r)) {
      if ((rc = get_int(r, "change_feed.retention", 1, INT64_MAX, &n, e)))
        goto fail;
      if (av != NULL && cJSON_IsFalse(av)) {
        rc = rg_fail(e, 400, "option 'change_feed.retention' bounds the "
                     "all-versions feed: it needs all_versions");
        goto fail;
      }
      s->retention = n;
      s->all_versions = 1;           /* a retention keeps the history */
    }
  }

  if ((rc = build_computed(s, cJSON_GetObjectItemCaseSensitive(
                              j, "computed_properties"), e)))
    goto fail;

  if ((rc = rg_ftpolicy_build(s, j, cJSON_GetObjectItemCaseSensitive(
                                j, "indexing"), e)))
    goto fail;

  s->revision = 1;
  v = cJSON_GetObjectItemCaseSensitive(j, "revision");
  if (v != NULL) {
    if ((rc = get_int(v, "revision", 1, RG_SPEC_REVISION, &n, e))) goto fail;
    s->revision = (int)n;
  }

  if ((rc = rg_tpset_parse(cJSON_GetObjectItemCaseSensitive(j, "throughput"),
                           &s->tp, "option 'throughput'", e)))
    goto fail;

  rg_buf_init(&text);
  rg_json_print(j, &text);
  if (text.oom) goto oom;
  s->json = text.p;
  *out = s;
  return 0;
oom:
  rc = rg_fail(e, 500, "out of memory");
fail:
  rg_cspec_free(s);
  return rc;
}


/*
** {=====================================================================
** Documents
** ======================================================================
*/
void rg_doc_pk (const rg_cspec *c, const cJSON *doc,
                const cJSON *pkv[RG_MAX_PK_PATHS]) {
  int i;
  for (i = 0; i < RG_MAX_PK_PATHS; i++)
    pkv[i] = i < c->npk ? rg_path_get(doc, &c->pk[i]) : NULL;
}
/* }===================================================================== */

int rg_doc_ttl (const rg_cspec *c, const cJSON *doc, int64_t *ttl,
                rg_err *e) {
  const cJSON *t;
  *ttl = 0;
  if (!c->ttl_on) return 0;
  *ttl = c->default_ttl;
  t = cJSON_GetObjectItemCaseSensitive(doc, "ttl");
  if (t != NULL && !cJSON_IsNull(t)) {
    if (!cJSON_IsNumber(t) || !rg_num_int(t, ttl) || *ttl == 0 ||
        *ttl < -1 || *ttl > RG_MAX_TTL)
      return rg_fail(e, 400, "ttl must be -1 or a whole number of seconds "
                     "from 1 to %d", RG_MAX_TTL);
  }
  return 0;
}


/*
** {=====================================================================
** Containers in a transaction
** ======================================================================
*/
int rg_cont_alive (rg_txn *txn, const rg_cont *c, rg_err *e) {
  uint8_t mk[8];
  rg_val k, v;
  int rc;
  k.p = mk;
  k.n = rg_meta_key(mk, RG_MK_SPEC, c->spec->cid, NULL, 0);
  rc = rg_kv_get(txn, RG_DB_META, k.p, k.n, &v);
  if (rc == RG_NOTFOUND)
    return rg_fail(e, 404, "container '%s' has been deleted", c->spec->name);
  if (rc) return rg_kv_fail(e, rc, "catalog");
  if (v.n != strlen(c->spec->json) ||
      memcmp(v.p, c->spec->json, v.n) != 0) {
    cJSON *j = NULL;                  /* replaced: adopt the stored spec */
    rg_cspec *fresh = NULL;
    if (rg_json_parse((const char *)v.p, v.n, &j, e) ||
        rg_cspec_build(j, c->spec->cid, &fresh, e)) {
      cJSON_Delete(j);
      return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
    }
    cJSON_Delete(j);
    spec_adopt(c->spec, fresh);
  }
  return 0;
}

int rg_cont_each_spec (rg_txn *txn, int tb, rg_spec_fn fn, void *ud) {
  uint8_t from[1] = { RG_MK_SPEC };
  rg_cur *cur;
  rg_val k, v;
  int rc;
  if ((rc = rg_cur_open(txn, tb, &cur))) return rc;
  k.p = from;
  k.n = 1;
  for (rc = rg_cur_get(cur, &k, &v, RG_SEEK);
       rc == 0 && k.n == 5 && ((const uint8_t *)k.p)[0] == RG_MK_SPEC;
       rc = rg_cur_get(cur, &k, &v, RG_NEXT))
    if (fn(ud, rg_get_u32((const uint8_t *)k.p + 1), &v)) {
      rc = 0;
      break;
    }
  rg_cur_close(cur);
  return rc == RG_NOTFOUND ? 0 : rc;
}
/* }===================================================================== */
