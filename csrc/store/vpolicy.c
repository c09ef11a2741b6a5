/*
** vpolicy.c: a container's vector policy: its vector embeddings and its
** vector indexes (container.h, "Vector search").
**
** The stored form, in a container's spec:
**   "vector_embeddings": [{ "path": "/embedding", "data_type": "float32",
**                           "dimensions": 1536,
**                           "distance_function": "cosine" }],
**   "indexing": { ..., "vector_indexes": [{ "path": "/embedding",
**                 "type": "diskANN", "quantization_byte_size": 96,
**                 "indexing_search_list_size": 100,
**                 "shard_key": ["/tenant"] }] }
** Cosmos DB's spelling is taken as well and rewritten into this one before
** the spec is built and stored (rg_vpolicy_normalize):
** vectorEmbeddingPolicy.vectorEmbeddings[] {path, dataType, dimensions,
** distanceFunction} and indexing.vectorIndexes[] {path, type,
** quantizationByteSize, indexingSearchListSize, vectorIndexShardKey}, with
** names of types and functions in any case.
**
** The rules (Cosmos DB's): an embedding's path is a plain path (no
** wildcard, not inside an array), at most one embedding per path;
** data_type float32 (default), float16, int8 or uint8; dimensions 1 to
** 4096 (default 1536); distance_function cosine (default), dotproduct or
** euclidean.  A vector index names the path of an embedding, one index per
** path: flat (at most 505 dimensions), quantizedFlat or diskANN (at most
** 4096); quantization_byte_size 1 to min(dimensions, 512) (quantizedFlat
** and diskANN; absent: the system chooses), indexing_search_list_size 10
** to 500 (diskANN; default 100), shard_key up to 3 paths (quantizedFlat
** and diskANN).  A replace may add or remove embeddings and indexes, never
** change one (400).  The range index never covers an embedding's path
** (arrays of hundreds of numbers are no use to it): build_indexing in
** container.c excludes "path/\*" for each.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/vec.h"
#include "store/container.h"

#define MAX_DIMS      4096
#define MAX_FLAT_DIMS 505
#define MAX_QBYTES    512
#define MAX_SHARD     3

static const char *const kind_names[] = { "flat", "quantizedFlat", "diskANN" };

static int ci_equal (const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    int x = (unsigned char)*a, y = (unsigned char)*b;
    if (x >= 'A' && x <= 'Z') x += 'a' - 'A';
    if (y >= 'A' && y <= 'Z') y += 'a' - 'A';
    if (x != y) return 0;
  }
  return *a == *b;
}

static int kind_parse (const char *s) {
  int k;
  for (k = 0; k <= RG_VIX_DISKANN; k++) if (ci_equal(s, kind_names[k])) return k;
  return -1;
}


/*
** {=====================================================================
** Cosmos DB's spelling
** ======================================================================
*/
typedef struct rename { const char *from, *to; } rename;

static const rename embed_keys[] = {
  { "dataType", "data_type" }, { "distanceFunction", "distance_function" },
  { NULL, NULL }
};
static const rename index_keys[] = {
  { "quantizationByteSize", "quantization_byte_size" },
  { "indexingSearchListSize", "indexing_search_list_size" },
  { "vectorIndexShardKey", "shard_key" }, { NULL, NULL }
};

/* Moves member `from` of `o` to the name `to` (400 when both are there). */
static int move (cJSON *o, const char *from, const char *to, const char *where,
                 rg_err *e) {
  cJSON *v;
  if (!cJSON_HasObjectItem(o, from)) return 0;
  if (cJSON_HasObjectItem(o, to))
    return rg_fail(e, 400, "%s: '%s' and '%s' are the same option", where,
                   from, to);
  v = cJSON_DetachItemFromObjectCaseSensitive(o, from);
  cJSON_AddItemToObject(o, to, v);
  return 0;
}

/* A name given in any case, as the canonical one. */
static void canonical (cJSON *o, const char *key, const char *name) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsString(v) && strcmp(v->valuestring, name) != 0 &&
      ci_equal(v->valuestring, name))
    cJSON_ReplaceItemInObjectCaseSensitive(o, key, cJSON_CreateString(name));
}

static int entries (cJSON *list, const rename *keys, const char *where,
                    rg_err *e) {
  cJSON *c;
  int rc, k;
  if (!cJSON_IsArray(list)) return 0;          /* the build says why */
  for (c = list->child; c; c = c->next) {
    if (!cJSON_IsObject(c)) continue;
    for (k = 0; keys[k].from; k++)
      if ((rc = move(c, keys[k].from, keys[k].to, where, e))) return rc;
    for (k = 0; k < RG_VT_COUNT; k++)
      canonical(c, "data_type", rg_vtype_name(k));
    for (k = 0; k < RG_VD_COUNT; k++)
      canonical(c, "distance_function", rg_vdist_name(k));
    for (k = 0; k <= RG_VIX_DISKANN; k++) canonical(c, "type", kind_names[k]);
  }
  return 0;
}

int rg_vpolicy_normalize (cJSON *j, rg_err *e) {
  cJSON *p, *ix;
  int rc;
  if (!cJSON_IsObject(j)) return 0;
  p = cJSON_GetObjectItemCaseSensitive(j, "vectorEmbeddingPolicy");
  if (p != NULL) {
    cJSON *list;
    if (cJSON_HasObjectItem(j, "vector_embeddings"))
      return rg_fail(e, 400, "options 'vectorEmbeddingPolicy' and "
                     "'vector_embeddings' are the same option");
    if (!cJSON_IsNull(p) && !cJSON_IsObject(p))
      return rg_fail(e, 400, "option 'vectorEmbeddingPolicy' must be an "
                     "object {vectorEmbeddings = [...]}");
    for (list = p->child; list; list = list->next)
      if (strcmp(list->string, "vectorEmbeddings") != 0)
        return rg_fail(e, 400, "unknown option '%s' in vectorEmbeddingPolicy",
                       list->string);
    p = cJSON_DetachItemFromObjectCaseSensitive(j, "vectorEmbeddingPolicy");
    list = cJSON_DetachItemFromObjectCaseSensitive(p, "vectorEmbeddings");
    cJSON_Delete(p);
    if (list) cJSON_AddItemToObject(j, "vector_embeddings", list);
  }
  if ((rc = entries(cJSON_GetObjectItemCaseSensitive(j, "vector_embeddings"),
                    embed_keys, "a vector embedding", e)))
    return rc;
  ix = cJSON_GetObjectItemCaseSensitive(j, "indexing");
  if (!cJSON_IsObject(ix)) return 0;
  if ((rc = move(ix, "vectorIndexes", "vector_indexes", "indexing", e)))
    return rc;
  return entries(cJSON_GetObjectItemCaseSensitive(ix, "vector_indexes"),
                 index_keys, "a vector index", e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Building and checking
** ======================================================================
*/
static int only (const cJSON *o, const char *const *allowed, const char *where,
                 rg_err *e) {
  const cJSON *c;
  for (c = o->child; c; c = c->next) {
    const char *const *a;
    for (a = allowed; *a; a++) if (strcmp(*a, c->string) == 0) break;
    if (*a == NULL)
      return rg_fail(e, 400, "unknown option '%s' in %s", c->string, where);
  }
  return 0;
}

static int int_in (const cJSON *v, const char *what, int lo, int hi, int *out,
                   rg_err *e) {
  int64_t n;
  if (!cJSON_IsNumber(v) || !rg_num_int(v, &n) || n < lo || n > hi)
    return rg_fail(e, 400, "%s must be an integer from %d to %d", what, lo,
                   hi);
  *out = (int)n;
  return 0;
}

static int plain_path (rg_path *p, const cJSON *v, const char *what,
                       rg_err *e) {
  int rc;
  if (!cJSON_IsString(v))
    return rg_fail(e, 400, "%s: 'path' must be a path such as \"/embedding\"",
                   what);
  if ((rc = rg_path_parse(p, v->valuestring, 0, e))) return rc;
  if (p->seg[0][0] == '_' || strcmp(p->seg[0], "id") == 0) {
    rg_path_free(p);
    return rg_fail(e, 400, "%s: '%s' is a system property", what,
                   v->valuestring);
  }
  return 0;
}

static int same_path (const rg_path *a, const rg_path *b) {
  int i;
  if (a->n != b->n) return 0;
  for (i = 0; i < a->n; i++) if (strcmp(a->seg[i], b->seg[i]) != 0) return 0;
  return 1;
}

static int build_embedding (rg_vembed *m, const cJSON *c, rg_err *e) {
  static const char *const keys[] = { "path", "data_type", "dimensions",
                                      "distance_function", NULL };
  const cJSON *v;
  int rc;
  m->dtype = RG_VT_FLOAT32;
  m->dist = RG_VD_COSINE;
  m->dims = 1536;
  m->index = -1;
  if (!cJSON_IsObject(c))
    return rg_fail(e, 400, "a vector embedding is {path = \"/v\", data_type "
                   "= \"float32\", dimensions = n, distance_function = "
                   "\"cosine\"}");
  if ((rc = only(c, keys, "a vector embedding", e))) return rc;
  if ((rc = plain_path(&m->path, cJSON_GetObjectItemCaseSensitive(c, "path"),
                       "a vector embedding", e)))
    return rc;
  m->text = strdup(cJSON_GetObjectItemCaseSensitive(c, "path")->valuestring);
  if (m->text == NULL) return rg_fail(e, 500, "out of memory");
  if ((v = cJSON_GetObjectItemCaseSensitive(c, "data_type")) != NULL &&
      (!cJSON_IsString(v) ||
       (m->dtype = rg_vtype_parse(v->valuestring,
                                  strlen(v->valuestring))) < 0))
    return rg_fail(e, 400, "a vector embedding's data_type is float32, "
                   "float16, int8 or uint8");
  if ((v = cJSON_GetObjectItemCaseSensitive(c, "distance_function")) != NULL &&
      (!cJSON_IsString(v) ||
       (m->dist = rg_vdist_parse(v->valuestring,
                                 strlen(v->valuestring))) < 0))
    return rg_fail(e, 400, "a vector embedding's distance_function is "
                   "cosine, dotproduct or euclidean");
  if ((v = cJSON_GetObjectItemCaseSensitive(c, "dimensions")) != NULL &&
      (rc = int_in(v, "a vector embedding's dimensions", 1, MAX_DIMS,
                   &m->dims, e)))
    return rc;
  return 0;
}

static int build_index (rg_cspec *s, rg_vindex *x, const cJSON *c,
                        rg_err *e) {
  static const char *const keys[] = { "path", "type", "quantization_byte_size",
                                      "indexing_search_list_size",
                                      "shard_key", NULL };
  const cJSON *v;
  rg_path p;
  rg_vembed *m = NULL;
  int rc, i, max;
  x->qbytes = 0;
  x->search_list = 100;
  if (!cJSON_IsObject(c))
    return rg_fail(e, 400, "a vector index is {path = \"/v\", type = "
                   "\"flat\" | \"quantizedFlat\" | \"diskANN\"}");
  if ((rc = only(c, keys, "a vector index", e))) return rc;
  if ((rc = plain_path(&p, cJSON_GetObjectItemCaseSensitive(c, "path"),
                       "a vector index", e)))
    return rc;
  for (i = 0; i < s->nvemb; i++)
    if (same_path(&s->vemb[i].path, &p)) m = &s->vemb[i];
  rg_path_free(&p);
  if (m == NULL)
    return rg_fail(e, 400, "a vector index's path must be the path of a "
                   "vector embedding (vector_embeddings)");
  if (m->index >= 0)
    return rg_fail(e, 400, "path '%s' has two vector indexes", m->text);
  x->embed = (int)(m - s->vemb);
  v = cJSON_GetObjectItemCaseSensitive(c, "type");
  if (!cJSON_IsString(v) || (x->kind = kind_parse(v->valuestring)) < 0)
    return rg_fail(e, 400, "a vector index's type is flat, quantizedFlat or "
                   "diskANN");
  max = x->kind == RG_VIX_FLAT ? MAX_FLAT_DIMS : MAX_DIMS;
  if (m->dims > max)
    return rg_fail(e, 400, "a %s index takes vectors of at most %d "
                   "dimensions ('%s' has %d)", kind_names[x->kind], max,
                   m->text, m->dims);
  if ((v = cJSON_GetObjectItemCaseSensitive(c, "quantization_byte_size"))) {
    if (x->kind == RG_VIX_FLAT)
      return rg_fail(e, 400, "a flat index takes no quantization_byte_size");
    if ((rc = int_in(v, "quantization_byte_size", 1,
                     m->dims < MAX_QBYTES ? m->dims : MAX_QBYTES, &x->qbytes,
                     e)))
      return rc;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(c, "indexing_search_list_size"))) {
    if (x->kind != RG_VIX_DISKANN)
      return rg_fail(e, 400, "only a diskANN index takes "
                     "indexing_search_list_size");
    if ((rc = int_in(v, "indexing_search_list_size", 10, 500,
                     &x->search_list, e)))
      return rc;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(c, "shard_key"))) {
    const cJSON *k;
    if (x->kind == RG_VIX_FLAT)
      return rg_fail(e, 400, "a flat index takes no shard_key");
    if (cJSON_IsString(v)) v = NULL;            /* one path: below */
    else if (!cJSON_IsArray(v) || v->child == NULL ||
             cJSON_GetArraySize(v) > MAX_SHARD)
      return rg_fail(e, 400, "a vector index's shard_key is a list of 1 to "
                     "%d paths", MAX_SHARD);
    for (k = v ? v->child : cJSON_GetObjectItemCaseSensitive(c, "shard_key");
         k; k = v ? k->next : NULL) {
      if ((rc = plain_path(&x->shard[x->nshard], k, "a vector index's "
                           "shard_key", e)))
        return rc;
      x->nshard++;
    }
  }
  m->index = (int)(x - s->vix);
  return 0;
}

int rg_vpolicy_build (rg_cspec *s, const cJSON *j, rg_err *e) {
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "vector_embeddings");
  const cJSON *ix = cJSON_GetObjectItemCaseSensitive(j, "indexing"), *c;
  int rc, i;
  if (list != NULL && !cJSON_IsNull(list)) {
    if (!cJSON_IsArray(list))
      return rg_fail(e, 400, "option 'vector_embeddings' must be a list");
    s->vemb = (rg_vembed *)calloc((size_t)cJSON_GetArraySize(list) + 1,
                                  sizeof(rg_vembed));
    if (s->vemb == NULL) return rg_fail(e, 500, "out of memory");
    for (c = list->child; c; c = c->next) {
      rg_vembed *m = &s->vemb[s->nvemb++];
      if ((rc = build_embedding(m, c, e))) return rc;
      for (i = 0; i < s->nvemb - 1; i++)
        if (same_path(&s->vemb[i].path, &m->path))
          return rg_fail(e, 400, "path '%s' has two vector embeddings",
                         m->text);
    }
  }
  list = cJSON_IsObject(ix) ? cJSON_GetObjectItemCaseSensitive(
                                ix, "vector_indexes") : NULL;
  if (list == NULL || cJSON_IsNull(list)) return 0;
  if (!cJSON_IsArray(list))
    return rg_fail(e, 400, "option 'indexing.vector_indexes' must be a list");
  s->vix = (rg_vindex *)calloc((size_t)cJSON_GetArraySize(list) + 1,
                               sizeof(rg_vindex));
  if (s->vix == NULL) return rg_fail(e, 500, "out of memory");
  for (c = list->child; c; c = c->next)
    if ((rc = build_index(s, &s->vix[s->nvix++], c, e))) return rc;
  return 0;
}

void rg_vpolicy_free (rg_cspec *s) {
  int i, k;
  for (i = 0; i < s->nvemb; i++) {
    rg_path_free(&s->vemb[i].path);
    free(s->vemb[i].text);
  }
  free(s->vemb);
  for (i = 0; i < s->nvix; i++)
    for (k = 0; k < s->vix[i].nshard; k++) rg_path_free(&s->vix[i].shard[k]);
  free(s->vix);
}

static int same_index (const rg_cspec *a, const rg_vindex *x,
                       const rg_cspec *b, const rg_vindex *y) {
  int k;
  (void)a; (void)b;
  if (x->kind != y->kind || x->qbytes != y->qbytes ||
      x->search_list != y->search_list || x->nshard != y->nshard)
    return 0;
  for (k = 0; k < x->nshard; k++)
    if (!same_path(&x->shard[k], &y->shard[k])) return 0;
  return 1;
}

int rg_vpolicy_replace_ok (const rg_cspec *a, const rg_cspec *b, rg_err *e) {
  int i, j;
  for (i = 0; i < a->nvemb; i++)
    for (j = 0; j < b->nvemb; j++) {
      const rg_vembed *x = &a->vemb[i], *y = &b->vemb[j];
      if (!same_path(&x->path, &y->path)) continue;
      if (x->dtype != y->dtype || x->dist != y->dist || x->dims != y->dims)
        return rg_fail(e, 400, "the vector embedding of '%s' cannot change: "
                       "remove it, then add it again", x->text);
      if (x->index >= 0 && y->index >= 0 &&
          !same_index(a, &a->vix[x->index], b, &b->vix[y->index]))
        return rg_fail(e, 400, "the vector index of '%s' cannot change: "
                       "remove it, then add it again", x->text);
    }
  return 0;
}

/* The segments of the item's path an expression reads (c.a.b, c["a"]),
** copied NUL-terminated into `buf`: their number, or -1. */
static int item_path (const rg_query *q, int32_t e, const char **seg,
                      char *buf, size_t size) {
  const rg_qexpr *chain[RG_MAX_PATH_SEGS];
  const rg_qblock *m = &q->blk[0];
  int n = 0, i;
  size_t used = 0;
  for (;;) {
    const rg_qexpr *ex = &q->ex[e];
    if (ex->k == RG_QE_PROP) { if (n == RG_MAX_PATH_SEGS) return -1;
                               chain[n++] = ex; e = ex->a; continue; }
    if (ex->k == RG_QE_INDEX && q->ex[ex->b].k == RG_QE_LIT &&
        q->ex[ex->b].v.t == RG_QV_STR) {
      if (n == RG_MAX_PATH_SEGS) return -1;
      chain[n++] = ex;
      e = ex->a;
      continue;
    }
    if (ex->k == RG_QE_ROOT) break;
    if (ex->k == RG_QE_ALIAS && m->nsrc > 0 && m->src[0].kind == RG_QS_ROOT &&
        ex->slot == m->src[0].slot)
      break;
    return -1;
  }
  for (i = 0; i < n; i++) {
    const rg_qexpr *ex = chain[n - 1 - i];
    const char *s = ex->k == RG_QE_PROP ? ex->s : q->ex[ex->b].v.s;
    size_t len = ex->k == RG_QE_PROP ? ex->n : q->ex[ex->b].v.n;
    if (used + len + 1 > size || memchr(s, 0, len)) return -1;
    memcpy(buf + used, s, len);
    buf[used + len] = 0;
    seg[i] = buf + used;
    used += len + 1;
  }
  return n;
}

int rg_query_vpolicy (rg_query *q, const rg_qv *params, const rg_cspec *spec,
                      rg_err *e) {
  int i;
  for (i = 0; spec && i < q->nvd; i++) {
    rg_qvd *vd = &q->vd[i];
    const char *seg[RG_MAX_PATH_SEGS];
    char buf[1024];
    const rg_vembed *m;
    int n;
    if (vd->dist_given && vd->dtype_given) continue;
    n = item_path(q, q->list[q->ex[vd->call].list], seg, buf, sizeof buf);
    if (n <= 0 || (m = rg_vpolicy_find(spec, seg, n)) == NULL) continue;
    if (!vd->dist_given) vd->dist = m->dist;
    if (!vd->dtype_given) vd->dtype = m->dtype;
  }
  return rg_query_vectors(q, params, e);
}

const rg_vembed *rg_vpolicy_find (const rg_cspec *s, const char *const *seg,
                                  int n) {
  int i, k;
  for (i = 0; i < s->nvemb; i++) {
    const rg_path *p = &s->vemb[i].path;
    if (p->n != n) continue;
    for (k = 0; k < n && strcmp(p->seg[k], seg[k]) == 0; k++) {}
    if (k == n) return &s->vemb[i];
  }
  return NULL;
}
/* }===================================================================== */
