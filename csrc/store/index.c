/*
** index.c: index and unique-key maintenance, and the path dictionary.
**
** The terms of a document.  Walking a document, every scalar has a
** normalized path: its object keys, with every array position written "[]"
** (so /tags/[] holds each element of tags).  When the container's indexing
** policy indexes that path (container.c), the scalar yields one index entry
** (layout.c), in a table of sorted duplicates:
**
**     path-id | term  ->  reference (u32 hash32 | u32 seq), one per item
**
** A path id is a short number (1 to 5 bytes, layout.c) given to each
** (container, path) pair the first time a write indexes a scalar there; the
** dictionary in meta maps the path's text ("/tags/[]", with ~0 and ~1
** escapes inside keys) to it:
**
**     meta 'p' cid text -> path id bytes
**
** (texts too long for a key keep 490 bytes and an 8-byte digest), and
** "\1pathid" holds the last id given.  A composite index is one "path"
** whose text names its columns ("composite|/a|0|/b|1"); its entry's term
** is the columns' terms concatenated (descending ones complemented), when
** every one of its paths holds a scalar.  Ids are never reused (a dropped
** container's go with its data), so each process keeps the ids it has
** seen committed in a cache.  The cache also holds the ids the running
** scope made (a load's new paths, met again by every document), each under
** the scope's serial and its count of savepoint rollbacks: such an id is
** used only by that scope's transaction and only while no savepoint was
** rolled back since it was cached (after a rollback or an abort, it may
** not exist, so the table is asked again); once committed, it is cached
** as committed the next time the table is read.
**
** Computed properties (container.c) are walked as top-level members of
** the item holding the values their queries give (a stored member of the
** same name is left out).
**
** Shapes (containers of revision 2).  The shape of an item is the set of
** non-array paths where it holds an indexed scalar (their path ids,
** sorted); each item has one more entry, under the path id of the text
** RG_SHAPE_TEXT ("shape", which no path or composite text can be), with
** the 8-byte hash of its shape as the term:
**
**     shape-path-id | u64 shape  ->  reference
**
** and the meta table keeps every shape ever seen:
**
**     'h' cid u64 shape  -> the sorted path ids (u32 each)
**
** so that the planner can list the shapes lacking a path and read, through
** their entries, exactly the items without a scalar there (ORDER BY ranks
** them first ascending) instead of reading every item.  An item with more
** than RG_SHAPE_MAX such paths has the wide shape 0, which has no record
** and is taken as lacking anything.  Shape entries are bookkeeping: they
** are not counted in the work a write is charged for.
**
** An update is a difference: the entries the old version needed that the
** new one does not are deleted, the missing ones put, and the unchanged
** ones (most, in a typical replace or patch) are left alone.  Every entry
** put or deleted counts as a term in the work of the scope (charge.c).
**
** Unique keys are per logical partition:
**
**     lp | u8 unique-key number | 128-bit digest of the values  -> item key
**
** An undefined value counts as null.  The checks run before anything is
** written (rg_unique_check), so a violation (409) leaves nothing behind.
*/

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/container.h"
#include "store/env_int.h"
#include "store/index.h"

#define PCACHE_MAX   65536        /* cached path ids per environment */

/* A set of keys, built in one buffer. */
typedef struct keyset {
  rg_buf buf;
  size_t *off, *len;
  size_t n, cap;
  int oom;
  const char *base;              /* buf.p, for the sort comparator */
} keyset;

static void ks_init (keyset *ks) {
  memset(ks, 0, sizeof(*ks));
  rg_buf_init(&ks->buf);
}

static void ks_free (keyset *ks) {
  rg_buf_free(&ks->buf);
  free(ks->off);
  free(ks->len);
}

/* Closes the key that started at `start` in ks->buf. */
static void ks_end (keyset *ks, size_t start) {
  if (ks->buf.oom) { ks->oom = 1; return; }
  if (ks->n == ks->cap) {
    size_t cap = ks->cap ? ks->cap * 2 : 32;
    size_t *o = (size_t *)realloc(ks->off, cap * sizeof(size_t));
    size_t *l;
    if (o == NULL) { ks->oom = 1; return; }
    ks->off = o;
    l = (size_t *)realloc(ks->len, cap * sizeof(size_t));
    if (l == NULL) { ks->oom = 1; return; }
    ks->len = l;
    ks->cap = cap;
  }
  ks->off[ks->n] = start;
  ks->len[ks->n] = ks->buf.n - start;
  ks->n++;
}

static const keyset *sort_ks;

static int cmp_entry (const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  size_t li = sort_ks->len[i], lj = sort_ks->len[j];
  int c = memcmp(sort_ks->base + sort_ks->off[i], sort_ks->base + sort_ks->off[j],
                 li < lj ? li : lj);
  if (c) return c;
  return li < lj ? -1 : li > lj;
}

/* Returns the sorted order of the keys, without duplicates. */
static size_t *ks_sorted (keyset *ks, size_t *n) {
  size_t *ord = (size_t *)malloc((ks->n + 1) * sizeof(size_t)), i, w = 0;
  if (ord == NULL) return NULL;
  for (i = 0; i < ks->n; i++) ord[i] = i;
  ks->base = ks->buf.p;
  sort_ks = ks;
  qsort(ord, ks->n, sizeof(size_t), cmp_entry);
  for (i = 0; i < ks->n; i++)
    if (w == 0 || cmp_entry(&ord[w - 1], &ord[i]) != 0) ord[w++] = ord[i];
  *n = w;
  return ord;
}


/*
** {=====================================================================
** The path dictionary
** ======================================================================
*/
typedef struct pslot {
  char *text;                    /* NULL: free */
  size_t n;
  uint64_t h;
  uint64_t serial;               /* 0: committed; else the scope's that made
                                    it, valid in it while its backs match */
  uint32_t backs;
  uint32_t cid;
  uint8_t len;
  uint8_t id[RG_PATHID_MAX];
} pslot;

struct rg_pcache {
  pslot *v;
  size_t cap, used;
};

void rg_pcache_free (struct rg_pcache *pc) {
  size_t i;
  if (pc == NULL) return;
  for (i = 0; i < pc->cap; i++) free(pc->v[i].text);
  free(pc->v);
  free(pc);
}

static uint64_t ptext_hash (uint32_t cid, const char *text, size_t n) {
  return rg_hash(text, n) ^ ((uint64_t)cid * 0x9E3779B97F4A7C15ull);
}

static pslot *pc_find (struct rg_pcache *pc, uint32_t cid, const char *text,
                       size_t n, uint64_t h) {
  size_t i;
  if (pc == NULL || pc->cap == 0) return NULL;
  for (i = (size_t)h & (pc->cap - 1); pc->v[i].text;
       i = (i + 1) & (pc->cap - 1))
    if (pc->v[i].h == h && pc->v[i].cid == cid && pc->v[i].n == n &&
        memcmp(pc->v[i].text, text, n) == 0)
      return &pc->v[i];
  return NULL;
}

/* Whether a cached id holds for a lookup in `txn`: a committed one always,
** one the running scope made only in its transaction and only while no
** savepoint was rolled back since. */
static int pc_holds (const rg_env *env, const rg_txn *txn, const pslot *ps) {
  const rg_scope *s = env->scope;
  if (ps->serial == 0) return 1;
  return s != NULL && s->txn == txn && s->serial == ps->serial &&
         s->backs == ps->backs;
}

/* Remembers a path id, committed (`s` NULL) or made by the running scope
** `s` (memory permitting: the cache is only a cache, and starts over when
** full).  A text cached already takes the new id and state. */
static void pc_add (rg_env *env, const rg_scope *s, uint32_t cid,
                    const char *text, size_t n, uint64_t h,
                    const uint8_t *id, size_t len) {
  struct rg_pcache *pc = env->pcache;
  pslot *ps = pc_find(pc, cid, text, n, h);
  size_t i;
  if (ps != NULL) {
    ps->serial = s ? s->serial : 0;
    ps->backs = s ? s->backs : 0;
    ps->len = (uint8_t)len;
    memcpy(ps->id, id, len);
    return;
  }
  if (pc == NULL) {
    if ((pc = (struct rg_pcache *)calloc(1, sizeof(*pc))) == NULL) return;
    env->pcache = pc;
  }
  if (pc->used >= PCACHE_MAX) {
    for (i = 0; i < pc->cap; i++) { free(pc->v[i].text); pc->v[i].text = NULL; }
    pc->used = 0;
  }
  if (2 * (pc->used + 1) > pc->cap) {          /* grow, rehash */
    size_t cap = pc->cap ? pc->cap * 2 : 256, j;
    pslot *v = (pslot *)calloc(cap, sizeof(pslot));
    if (v == NULL) return;
    for (j = 0; j < pc->cap; j++) {
      if (pc->v[j].text == NULL) continue;
      for (i = (size_t)pc->v[j].h & (cap - 1); v[i].text; i = (i + 1) & (cap - 1)) ;
      v[i] = pc->v[j];
    }
    free(pc->v);
    pc->v = v;
    pc->cap = cap;
  }
  for (i = (size_t)h & (pc->cap - 1); pc->v[i].text; i = (i + 1) & (pc->cap - 1)) ;
  if ((pc->v[i].text = (char *)malloc(n + 1)) == NULL) return;
  memcpy(pc->v[i].text, text, n);
  pc->v[i].text[n] = 0;
  pc->v[i].n = n;
  pc->v[i].h = h;
  pc->v[i].cid = cid;
  pc->v[i].serial = s ? s->serial : 0;
  pc->v[i].backs = s ? s->backs : 0;
  pc->v[i].len = (uint8_t)len;
  memcpy(pc->v[i].id, id, len);
  pc->used++;
}

void rg_index_path_text (rg_buf *b, const char *const *seg, int n) {
  int i;
  for (i = 0; i < n; i++) {
    const char *s;
    rg_buf_addc(b, '/');
    for (s = seg[i]; *s; s++) {
      if (*s == '~') rg_buf_add(b, "~0", 2);
      else if (*s == '/') rg_buf_add(b, "~1", 2);
      else rg_buf_addc(b, *s);
    }
  }
}

int rg_pathid_find (rg_txn *txn, rg_env *env, uint32_t cid,
                    const char *text, size_t n, uint8_t *out, size_t *len,
                    rg_err *e) {
  uint64_t h = ptext_hash(cid, text, n);
  pslot *ps = pc_find(env->pcache, cid, text, n, h);
  uint8_t key[RG_MAX_KEY];
  rg_val k, v;
  uint32_t id;
  int rc;
  if (ps && pc_holds(env, txn, ps)) {
    memcpy(out, ps->id, ps->len);
    *len = ps->len;
    return 0;
  }
  k.p = key;
  k.n = rg_meta_path_key(key, cid, text, n);
  rc = rg_kv_get(txn, RG_DB_META, k.p, k.n, &v);
  if (rc == RG_NOTFOUND) return 404;
  if (rc) return rg_kv_fail(e, rc, "path dictionary");
  if (v.n > RG_PATHID_MAX ||
      rg_pathid_get((const uint8_t *)v.p, v.n, &id) != v.n)
    return rg_fail(e, 500, "corrupt path dictionary entry");
  memcpy(out, v.p, v.n);
  *len = v.n;
  /* committed, or given by the running scope (then seen in its txn) */
  if (env->scope == NULL || env->scope->pathid_base == 0 ||
      id < env->scope->pathid_base)
    pc_add(env, NULL, cid, text, n, h, out, *len);
  else if (env->scope->txn == txn)
    pc_add(env, env->scope, cid, text, n, h, out, *len);
  return 0;
}

/* The path id of a text, given now when it has none. */
static int pathid_make (rg_scope *s, uint32_t cid, const char *text,
                        size_t n, uint8_t *out, size_t *len, rg_err *e) {
  uint8_t key[RG_MAX_KEY], buf[4];
  rg_val k, v;
  uint32_t last = 0;
  int rc = rg_pathid_find(s->txn, s->env, cid, text, n, out, len, e);
  if (rc != 404) return rc;
  k.p = RG_META_PATHID;
  k.n = sizeof(RG_META_PATHID) - 1;
  rc = rg_kv_get(s->txn, RG_DB_META, k.p, k.n, &v);
  if (rc == 0 && v.n == 4) last = rg_get_u32((const uint8_t *)v.p);
  else if (rc && rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "path id", e);
  if (last == UINT32_MAX)
    return rg_fail(e, 507, "insufficient storage: no path id is left");
  if (s->pathid_base == 0) s->pathid_base = last + 1;
  rg_put_u32(buf, last + 1);
  *len = rg_pathid_put(out, last + 1);
  if ((rc = rg_put(s, RG_DB_META, RG_META_PATHID, sizeof(RG_META_PATHID) - 1,
                   buf, 4, e)) ||
      (rc = rg_put(s, RG_DB_META, key, rg_meta_path_key(key, cid, text, n),
                   out, *len, e)))
    return rc;
  pc_add(s->env, s, cid, text, n, ptext_hash(cid, text, n), out, *len);
  return 0;
}

/* The path ids given to container `cid`: *ids (malloc'd), *n of them. */
static int path_ids (rg_txn *txn, rg_env *env, uint32_t cid,
                       uint32_t **ids, size_t *n) {
  rg_cur *cur;
  rg_val k, v;
  uint8_t p[5];
  size_t cap = 0;
  int rc;
  *ids = NULL;
  *n = 0;
  if ((rc = rg_cur_open(txn, RG_DB_META, &cur))) return rc;
  k.p = p;
  k.n = rg_meta_key(p, RG_MK_PATH, cid, NULL, 0);
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n >= 5 && memcmp(k.p, p, 5) == 0) {
    uint32_t id;
    if (v.n <= RG_PATHID_MAX &&
        rg_pathid_get((const uint8_t *)v.p, v.n, &id) ==
        v.n) {
      if (*n == cap) {
        uint32_t *a = (uint32_t *)realloc(*ids, (cap = cap ? 2 * cap : 32) *
                                          sizeof(uint32_t));
        if (a == NULL) { rc = ENOMEM; break; }
        *ids = a;
      }
      (*ids)[(*n)++] = id;
    }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  return rc == RG_NOTFOUND ? 0 : rc;
}

int rg_index_count (rg_txn *txn, rg_env *env, uint32_t cid, uint64_t *n) {
  rg_cur *cur;
  uint32_t *ids;
  size_t nid, i;
  int rc;
  *n = 0;
  if ((rc = path_ids(txn, env, cid, &ids, &nid))) return rc;
  if ((rc = rg_cur_open(txn, RG_DB_INDEX, &cur))) {
    free(ids);
    return rc;
  }
  for (i = 0; i < nid && rc == 0; i++) {
    uint8_t p[RG_PATHID_MAX];
    size_t pn = rg_pathid_put(p, ids[i]);
    rg_val k, v;
    k.p = p;
    k.n = pn;
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    while (rc == 0 && k.n >= pn && memcmp(k.p, p, pn) == 0) {
      size_t dups;
      if ((rc = rg_cur_count(cur, &dups))) break;
      *n += dups;
      rc = rg_cur_get(cur, &k, &v, RG_NEXT_NODUP);
    }
    if (rc == RG_NOTFOUND) rc = 0;
  }
  rg_cur_close(cur);
  free(ids);
  return rc;
}

int rg_index_drop (rg_scope *s, uint32_t cid, uint64_t max, uint64_t *count,
                   rg_err *e) {
  uint32_t *ids;
  size_t nid, i;
  uint8_t pk[5];
  uint64_t n;
  int rc;
  *count = 0;
  if ((rc = path_ids(s->txn, s->env, cid, &ids, &nid)))
    return rg_scope_fail(s, rc, "path dictionary", e);
  for (i = 0; i < nid && *count < max; i++) {
    uint8_t p[RG_PATHID_MAX];
    size_t pn = rg_pathid_put(p, ids[i]);
    if ((rc = rg_del_prefix(s, RG_DB_INDEX, p, pn, max - *count, &n, e))) {
      free(ids);
      return rc;
    }
    *count += n;
  }
  free(ids);
  if (*count >= max) return 0;
  /* every entry is gone: now the dictionary */
  rc = rg_del_prefix(s, RG_DB_META, pk, rg_meta_key(pk, RG_MK_PATH, cid, NULL, 0),
                     max - *count, &n, e);
  *count += n;
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Terms of a document
** ======================================================================
*/
typedef struct walker {
  rg_txn *txn;
  rg_env *env;
  rg_scope *s;                   /* set: give missing path ids */
  const rg_cspec *spec;
  const char *seg[RG_MAX_DEPTH + 2];
  rg_buf text;                   /* a path's dictionary text */
  keyset *ks;
  size_t unknown;                /* paths without an id (find mode) */
  int status;
  rg_err *e;
  int arr;                       /* array positions on the path walked */
  uint32_t shape[RG_SHAPE_MAX + 1];
  int nshape;
  uint8_t sid[RG_PATHID_MAX];    /* the shape entries' path id */
  size_t sidlen;
} walker;

/* Starts an entry key for the path text in w->text: 1 when it has an id
** (the key is started in w->ks->buf; *idp receives the id when given), 0
** when it has none (find mode) or on failure (w->status). */
static int start_key (walker *w, uint32_t *idp) {
  uint8_t id[RG_PATHID_MAX];
  size_t len;
  int rc;
  if (w->text.oom) { w->status = rg_fail(w->e, 500, "out of memory"); return 0; }
  rc = w->s ? pathid_make(w->s, w->spec->cid, w->text.p, w->text.n, id, &len,
                          w->e)
            : rg_pathid_find(w->txn, w->env, w->spec->cid, w->text.p,
                             w->text.n, id, &len, w->e);
  if (rc == 404 && w->s == NULL) { w->unknown++; return 0; }
  if (rc) { w->status = rc; return 0; }
  rg_buf_add(&w->ks->buf, id, len);
  if (idp) rg_pathid_get(id, len, idp);
  return 1;
}

/* Is `name` a computed property of the spec (a stored member of that name
** is shadowed)? */
static int computed_name (const rg_cspec *s, const char *name) {
  int i;
  for (i = 0; i < s->ncp; i++)
    if (strcmp(s->cp[i].name, name) == 0) return 1;
  return 0;
}

static void walk (walker *w, const cJSON *v, int depth) {
  const cJSON *c;
  if (w->status) return;
  if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
    int arr = cJSON_IsArray(v);
    if (depth > RG_MAX_DEPTH) return;
    w->arr += arr;
    for (c = v->child; c; c = c->next) {
      if (depth == 0 && !arr && w->spec->ncp && computed_name(w->spec,
                                                              c->string))
        continue;
      w->seg[depth] = arr ? "[]" : c->string;
      walk(w, c, depth + 1);
    }
    w->arr -= arr;
    return;
  }
  if (rg_cspec_indexed(w->spec, w->seg, depth)) {
    size_t start = w->ks->buf.n;
    uint32_t id;
    w->text.n = 0;
    rg_index_path_text(&w->text, w->seg, depth);
    if (!start_key(w, &id)) return;
    rg_term(&w->ks->buf, v, 0);
    ks_end(w->ks, start);
    if (!w->arr && w->nshape <= RG_SHAPE_MAX) w->shape[w->nshape++] = id;
  }
}

/* The computed properties' values, walked as top-level members. */
static void computed_terms (walker *w, const cJSON *doc) {
  rg_buf text, val;
  rg_err e;
  int i;
  rg_buf_init(&text);
  rg_buf_init(&val);
  rg_json_print(doc, &text);
  if (text.oom) { w->ks->oom = 1; goto done; }
  for (i = 0; i < w->spec->ncp && !w->status; i++) {
    cJSON *v;
    val.n = 0;
    if (rg_qcomputed_json(w->spec->cp[i].q, text.p, text.n, &val, &e) ||
        val.n == 0)
      continue;                      /* undefined: no entry */
    rg_buf_addc(&val, 0);
    if (val.oom || (v = cJSON_Parse(val.p)) == NULL) { w->ks->oom = 1; break; }
    w->seg[0] = w->spec->cp[i].name;
    walk(w, v, 1);
    cJSON_Delete(v);
  }
done:
  rg_buf_free(&text);
  rg_buf_free(&val);
}

/* The shape of the paths walked: sorted, without repeats, into w->shape;
** its hash (0: wide). */
static uint64_t shape_of (walker *w) {
  int i, n = 0;
  uint8_t b[4 * RG_SHAPE_MAX];
  if (w->nshape > RG_SHAPE_MAX) return 0;
  qsort(w->shape, (size_t)w->nshape, sizeof(uint32_t), rg_u32_cmp);
  for (i = 0; i < w->nshape; i++)
    if (n == 0 || w->shape[n - 1] != w->shape[i]) w->shape[n++] = w->shape[i];
  w->nshape = n;
  for (i = 0; i < n; i++) rg_put_u32(b + 4 * i, w->shape[i]);
  return rg_hash(b, (size_t)n * 4) | 1;    /* never 0 */
}

static void composite_terms (walker *w, const cJSON *doc) {
  int i, j;
  for (i = 0; i < w->spec->ncomp && !w->status; i++) {
    const rg_composite *ci = &w->spec->comp[i];
    size_t start = w->ks->buf.n, limit = rg_composite_limit(ci);
    const cJSON *vals[8];
    for (j = 0; j < ci->n; j++) {
      vals[j] = rg_path_get(doc, &ci->path[j]);
      if (vals[j] == NULL || cJSON_IsObject(vals[j]) || cJSON_IsArray(vals[j]))
        break;
    }
    if (j < ci->n) continue;         /* not every path holds a scalar */
    w->text.n = 0;
    rg_buf_adds(&w->text, ci->name);
    if (!start_key(w, NULL)) continue;
    for (j = 0; j < ci->n; j++)
      rg_term_cut(&w->ks->buf, vals[j], ci->desc[j], limit);
    ks_end(w->ks, start);
  }
}

/* What doc_terms tells of a document's shape (revision 2). */
typedef struct shapeinfo {
  uint64_t h;                    /* its hash, 0: wide */
  uint32_t ids[RG_SHAPE_MAX + 1];
  int nids;
  uint8_t sid[RG_PATHID_MAX];    /* the shape entries' path id */
  size_t sidlen;                 /* 0: none (no shape entry) */
} shapeinfo;

/* The entry keys `doc` needs, into ks (the shape entry among them, and
** the shape into *si when given): 0 or a status. */
static int doc_terms (rg_txn *txn, rg_env *env, rg_scope *s,
                      const rg_cspec *spec, const cJSON *doc, keyset *ks,
                      size_t *unknown, shapeinfo *si, rg_err *e) {
  walker w;
  if (si) { si->h = 0; si->nids = 0; si->sidlen = 0; }
  if (unknown) *unknown = 0;
  if (!spec->automatic) return 0;
  w.unknown = 0;
  w.txn = txn;
  w.env = env;
  w.s = s;
  w.spec = spec;
  w.ks = ks;
  w.status = 0;
  w.e = e;
  w.arr = 0;
  w.nshape = 0;
  rg_buf_init(&w.text);
  walk(&w, doc, 0);
  if (spec->ncp) computed_terms(&w, doc);
  composite_terms(&w, doc);
  if (spec->revision >= 2 && w.status == 0 && env != NULL) {
    size_t start = ks->buf.n;
    uint64_t h = shape_of(&w);
    uint8_t t[8];
    w.text.n = 0;
    rg_buf_adds(&w.text, RG_SHAPE_TEXT);
    if (start_key(&w, NULL)) {
      if (si) {
        si->sidlen = ks->buf.n - start;
        memcpy(si->sid, ks->buf.p + start, si->sidlen);
      }
      rg_term_shape(t, h);
      rg_buf_add(&ks->buf, t, RG_SHAPE_TERM);
      ks_end(ks, start);
    }
    if (si) {
      si->h = h;
      si->nids = w.nshape > RG_SHAPE_MAX ? 0 : w.nshape;
      memcpy(si->ids, w.shape, (size_t)si->nids * sizeof(uint32_t));
    }
  }
  rg_buf_free(&w.text);
  if (unknown) *unknown = w.unknown;
  if (w.status == 0 && ks->oom) w.status = rg_fail(e, 500, "out of memory");
  return w.status;
}

/* Is this index key a shape entry (of the shape path id in si)? */
static int shape_entry (const shapeinfo *si, const char *key, size_t n) {
  return si->sidlen && n == si->sidlen + 8 &&
         memcmp(key, si->sid, si->sidlen) == 0;
}

/* Records a shape in the meta table when it is new. */
static int shape_record (rg_scope *s, const rg_cspec *spec,
                         const shapeinfo *si, rg_err *e) {
  uint8_t key[16], val[4 * RG_SHAPE_MAX + 1];
  rg_val k, v;
  int i, rc;
  if (si->h == 0) return 0;          /* wide: no record */
  k.p = key;
  k.n = rg_meta_shape_key(key, spec->cid, si->h);
  rc = rg_kv_get(s->txn, RG_DB_META, k.p, k.n, &v);
  if (rc == 0) return 0;
  if (rc != RG_NOTFOUND) return rg_scope_fail(s, rc, "index", e);
  for (i = 0; i < si->nids; i++) rg_put_u32(val + 4 * i, si->ids[i]);
  return rg_put(s, RG_DB_META, key, k.n, val, (size_t)si->nids * 4, e);
}

int rg_index_keys (rg_txn *txn, rg_env *env, rg_scope *s,
                   const rg_cspec *spec, const cJSON *doc, rg_buf *keys,
                   size_t *count, rg_err *e) {
  keyset ks;
  shapeinfo si;
  size_t *ord, n, i;
  int rc;
  ks_init(&ks);
  *count = 0;
  if ((rc = doc_terms(txn, env, s, spec, doc, &ks, NULL, &si, e)) ||
      (s && (rc = shape_record(s, spec, &si, e)))) {
    ks_free(&ks);
    return rc;
  }
  if ((ord = ks_sorted(&ks, &n)) == NULL) {
    ks_free(&ks);
    return rg_fail(e, 500, "out of memory");
  }
  for (i = 0; i < n; i++) {
    uint8_t l[2];
    rg_put_u16(l, (uint32_t)ks.len[ord[i]]);
    rg_buf_add(keys, l, 2);
    rg_buf_add(keys, ks.buf.p + ks.off[ord[i]], ks.len[ord[i]]);
  }
  *count = n;
  free(ord);
  ks_free(&ks);
  return keys->oom ? rg_fail(e, 500, "out of memory") : 0;
}

int rg_index_shape (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                    const cJSON *doc, uint64_t *h, rg_err *e) {
  keyset ks;
  shapeinfo si;
  int rc;
  ks_init(&ks);
  rc = doc_terms(txn, env, NULL, spec, doc, &ks, NULL, &si, e);
  ks_free(&ks);
  *h = si.h;
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Unique keys
** ======================================================================
*/
/* The 16-byte digest of the values of unique key `u` in `doc` (an
** undefined value counts as null): what the unique table keys on. */
static void unique_digest (const rg_cspec *spec, int u, const cJSON *doc,
                           uint8_t out[16]) {
  static const uint8_t k2[16] = { 'r','e','g','o','l','i','t','h',
                                  'u','n','i','q','u','e','v','1' };
  const rg_uniq *q = &spec->uniq[u];
  rg_buf b;
  int i;
  rg_buf_init(&b);
  for (i = 0; i < q->n; i++) {
    const cJSON *v = rg_path_get(doc, &q->path[i]);
    if (v == NULL || cJSON_IsNull(v)) rg_buf_addc(&b, 0x05);
    else if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
      rg_buf_addc(&b, 0x0A);
      rg_json_print(v, &b);
      rg_buf_addc(&b, 0);
    }
    else rg_term_exact(&b, v);
  }
  rg_put_u64(out, rg_hash(b.p ? b.p : "", b.n));
  rg_put_u64(out + 8, rg_siphash(k2, b.p ? b.p : "", b.n));
  rg_buf_free(&b);
}

size_t rg_unique_key (const rg_cspec *spec, int u, const rg_ikey *k,
                      const cJSON *doc, uint8_t *out) {
  uint8_t d[16];
  unique_digest(spec, u, doc, d);
  return rg_key_unique(out, k->key, k->lplen, u, d);
}

int rg_unique_check (rg_scope *s, const rg_cspec *spec, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e) {
  int u, rc;
  if (neu == NULL) return 0;
  for (u = 0; u < spec->nuniq; u++) {
    uint8_t nk[RG_MAX_KEY], ok[RG_MAX_KEY];
    size_t nn = rg_unique_key(spec, u, k, neu, nk);
    rg_val key, val;
    if (old && rg_unique_key(spec, u, k, old, ok) == nn && memcmp(ok, nk, nn) == 0)
      continue;                      /* unchanged: still ours */
    key.p = nk;
    key.n = nn;
    rc = rg_kv_get(s->txn, RG_DB_UNIQUE, key.p, key.n, &val);
    if (rc == RG_NOTFOUND) continue;
    if (rc) return rg_scope_fail(s, rc, "unique key", e);
    if (val.n == k->len && memcmp(val.p, k->key, k->len) == 0)
      continue;
    return rg_unique_fail(spec, u, e);
  }
  return 0;
}

int rg_unique_fail (const rg_cspec *spec, int u, rg_err *e) {
  rg_buf p;
  int i, rc;
  rg_buf_init(&p);
  for (i = 0; i < spec->uniq[u].n; i++) {
    int j;
    if (i) rg_buf_adds(&p, ", ");
    for (j = 0; j < spec->uniq[u].path[i].n; j++) {
      rg_buf_addc(&p, '/');
      rg_buf_adds(&p, spec->uniq[u].path[i].seg[j]);
    }
  }
  rc = rg_fail(e, 409, "unique key violation: another item in this "
               "logical partition has the same value at %s", p.p ? p.p : "");
  rg_buf_free(&p);
  return rc;
}

static int unique_apply (rg_scope *s, const rg_cspec *spec, const rg_ikey *k,
                         const cJSON *old, const cJSON *neu, rg_err *e) {
  int u, rc;
  for (u = 0; u < spec->nuniq; u++) {
    uint8_t nk[RG_MAX_KEY], ok[RG_MAX_KEY];
    size_t nn = neu ? rg_unique_key(spec, u, k, neu, nk) : 0;
    size_t on = old ? rg_unique_key(spec, u, k, old, ok) : 0;
    if (on && nn == on && memcmp(ok, nk, nn) == 0) continue;
    if (on) {
      if ((rc = rg_del(s, RG_DB_UNIQUE, ok, on, NULL, e))) return rc;
      s->work.terms++;
    }
    if (nn) {
      if ((rc = rg_put(s, RG_DB_UNIQUE, nk, nn, k->key, k->len, e))) return rc;
      s->work.terms++;
    }
  }
  return 0;
}
/* }===================================================================== */


/* Brings the index entries of one item from what `old` needed under the
** spec `os` to what `neu` needs under `ns`: writes only the difference. */
static int index_diff (rg_scope *s, const rg_cspec *os, const rg_cspec *ns,
                       const rg_ikey *k, uint32_t seq, const cJSON *old,
                       const cJSON *neu, rg_err *e) {
  keyset ko, kn;
  shapeinfo so, sn;
  size_t *oo = NULL, *on = NULL, no = 0, nn = 0, i = 0, j = 0;
  uint8_t ref[RG_REF_SIZE];
  int rc = 0;
  ks_init(&ko);
  ks_init(&kn);
  so.h = sn.h = 0;
  so.sidlen = sn.sidlen = 0;
  rg_ref_put(ref, k->hash, seq);
  if (old && (rc = doc_terms(s->txn, s->env, NULL, os, old, &ko, NULL, &so,
                             e)))
    goto done;
  if (neu && (rc = doc_terms(s->txn, s->env, s, ns, neu, &kn, NULL, &sn, e)))
    goto done;
  if (neu && ns->revision >= 2 && (sn.h != so.h || os != ns) &&
      (rc = shape_record(s, ns, &sn, e)))
    goto done;
  oo = ks_sorted(&ko, &no);
  on = ks_sorted(&kn, &nn);
  if (oo == NULL || on == NULL) { rc = rg_fail(e, 500, "out of memory"); goto done; }
  /* merge the two sorted lists: delete what only the old has, put what
     only the new has */
  while (i < no || j < nn) {
    int c;
    if (i == no) c = 1;
    else if (j == nn) c = -1;
    else {
      size_t li = ko.len[oo[i]], lj = kn.len[on[j]];
      c = memcmp(ko.buf.p + ko.off[oo[i]], kn.buf.p + kn.off[on[j]],
                 li < lj ? li : lj);
      if (c == 0) c = li < lj ? -1 : li > lj;
    }
    if (c == 0) { i++; j++; continue; }
    if (c < 0) {
      const char *key = ko.buf.p + ko.off[oo[i]];
      size_t kl = ko.len[oo[i]];
      rc = rg_ddel(s, RG_DB_INDEX, key, kl, ref, RG_REF_SIZE, NULL, e);
      if (!shape_entry(&so, key, kl))
        s->work.terms++;             /* shapes are bookkeeping: not charged */
      i++;
    }
    else {
      const char *key = kn.buf.p + kn.off[on[j]];
      size_t kl = kn.len[on[j]];
      rc = rg_dput(s, RG_DB_INDEX, key, kl, ref, RG_REF_SIZE, 0, e);
      if (!shape_entry(&sn, key, kl)) s->work.terms++;
      j++;
    }
    if (rc) goto done;
  }
done:
  free(oo);
  free(on);
  ks_free(&ko);
  ks_free(&kn);
  return rc;
}

int rg_index_update (rg_scope *s, const rg_cspec *spec, const rg_ikey *k,
                     uint32_t seq, const cJSON *old, const cJSON *neu,
                     rg_err *e) {
  int rc = index_diff(s, spec, spec, k, seq, old, neu, e);
  return rc ? rc : unique_apply(s, spec, k, old, neu, e);
}

int rg_index_reindex (rg_scope *s, const rg_cspec *from, const rg_cspec *to,
                      const rg_ikey *k, uint32_t seq, const cJSON *doc,
                      rg_err *e) {
  return index_diff(s, from, to, k, seq, doc, doc, e);
}


/*
** {=====================================================================
** Verification (db:verify)
** ======================================================================
*/
/* Checks that every index and unique entry `doc` needs exists and names
** this item; adds how many there are to *nindex and *nunique.  Problems
** are appended to `report`; returns how many were found. */
int rg_index_verify (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_ikey *k, uint32_t seq, const cJSON *doc,
                     uint64_t *nindex, uint64_t *nunique, rg_buf *report) {
  keyset ks;
  shapeinfo si;
  size_t *ord = NULL, n = 0, i, missing, unknown = 0;
  uint8_t ref[RG_REF_SIZE];
  rg_cur *cur = NULL;
  int bad = 0, u;
  rg_err e;
  ks_init(&ks);
  rg_ref_put(ref, k->hash, seq);
  if (doc_terms(txn, env, NULL, spec, doc, &ks, &unknown, &si, &e) ||
      (ord = ks_sorted(&ks, &n)) == NULL ||
      rg_cur_open(txn, RG_DB_INDEX, &cur)) {
    free(ord);
    ks_free(&ks);
    rg_buf_adds(report, "out of memory while verifying\n");
    return 1;
  }
  /* a path without an id: its entry cannot be there */
  missing = unknown;
  for (i = 0; i < n; i++) {
    rg_val key, val;
    key.p = ks.buf.p + ks.off[ord[i]];
    key.n = ks.len[ord[i]];
    val.p = ref;
    val.n = RG_REF_SIZE;
    if (rg_cur_get(cur, &key, &val, RG_BOTH) != 0) missing++;
  }
  if (missing) {
    bad++;
    rg_buf_addf(report, "container %u: %lu index entr%s of item %.*s %s "
                "missing\n", spec->cid, (unsigned long)missing,
                missing == 1 ? "y" : "ies", (int)(k->len - k->lplen),
                (const char *)k->key + k->lplen, missing == 1 ? "is" : "are");
  }
  *nindex += n + unknown;
  rg_cur_close(cur);
  if (spec->revision >= 2 && si.h != 0) {   /* its shape is recorded */
    uint8_t sk[16];
    rg_val mk, mv;
    mk.p = sk;
    mk.n = rg_meta_shape_key(sk, spec->cid, si.h);
    if (rg_kv_get(txn, RG_DB_META, mk.p, mk.n, &mv) != 0 ||
        mv.n != (size_t)si.nids * 4) {
      bad++;
      rg_buf_addf(report, "container %u: the shape of item %.*s is not "
                  "recorded\n", spec->cid, (int)(k->len - k->lplen),
                  (const char *)k->key + k->lplen);
    }
  }
  for (u = 0; u < spec->nuniq; u++) {
    uint8_t uk[RG_MAX_KEY];
    rg_val key, val;
    key.p = uk;
    key.n = rg_unique_key(spec, u, k, doc, uk);
    if (rg_kv_get(txn, RG_DB_UNIQUE, key.p, key.n, &val) != 0 ||
        val.n != k->len || memcmp(val.p, k->key, k->len) != 0) {
      bad++;
      rg_buf_addf(report, "container %u: unique key %d of an item does not "
                  "name it\n", spec->cid, u + 1);
    }
  }
  *nunique += (uint64_t)spec->nuniq;
  free(ord);
  ks_free(&ks);
  return bad;
}
/* }===================================================================== */


/*
** {=====================================================================
** The index as one sequence of flat entries (the planner's view)
** ======================================================================
*/
int rg_ixcur_open (rg_ixcur *c, rg_txn *txn, rg_env *env) {
  int rc;
  c->txn = txn;
  c->env = env;
  c->cur = c->refs = NULL;
  c->nbuf = 0;
  if ((rc = rg_cur_open(txn, RG_DB_INDEX, &c->cur))) return rc;
  if ((rc = rg_cur_open(txn, RG_DB_REFS, &c->refs))) {
    rg_cur_close(c->cur);
    c->cur = NULL;
  }
  return rc;
}

void rg_ixcur_close (rg_ixcur *c) {
  if (c->cur) rg_cur_close(c->cur);
  if (c->refs) rg_cur_close(c->refs);
  c->cur = c->refs = NULL;
}

void rg_ixcur_route (rg_ixcur *c, uint64_t hash, uint64_t mask) {
  rg_cur_route(c->cur, hash, mask);
}

/* The entry under the cursor, flat, into *k. */
static int flat (rg_ixcur *c, const rg_val *key, const rg_val *dup,
                 rg_val *k) {
  if (key->n > RG_MAX_KEY || dup->n != RG_REF_SIZE)
    return RG_CORRUPT;
  memcpy(c->buf, key->p, key->n);
  memcpy(c->buf + key->n, dup->p, RG_REF_SIZE);
  k->p = c->buf;
  k->n = c->nbuf = key->n + RG_REF_SIZE;
  return 0;
}

/* The entry key | dup (dup RG_REF_SIZE bytes) against the n bytes at b,
** as flat bytes: < 0, 0, > 0. */
static int flat_cmp (const rg_val *key, const rg_val *dup,
                     const uint8_t *b, size_t n) {
  size_t kn = key->n, m = kn < n ? kn : n, all = kn + RG_REF_SIZE;
  int c = memcmp(key->p, b, m);
  if (c || kn >= n) return c ? c : 1;
  m = n - kn < RG_REF_SIZE ? n - kn : RG_REF_SIZE;
  if ((c = memcmp(dup->p, b + kn, m)) != 0) return c;
  return all > n ? 1 : all < n ? -1 : 0;
}

int rg_ixcur_get (rg_ixcur *c, rg_val *k, int op) {
  rg_val key, dup;
  int rc, order = 0;
  switch (op) {
    case RG_IX_SEEK:
      key = *k;
      rc = rg_cur_get(c->cur, &key, &dup, RG_SEEK_FLAT);
      break;
    case RG_IX_NEXT: rc = rg_cur_get(c->cur, &key, &dup, RG_NEXT); break;
    case RG_IX_PREV: rc = rg_cur_get(c->cur, &key, &dup, RG_PREV); break;
    default: rc = rg_cur_get(c->cur, &key, &dup, RG_LAST); break;
  }
  if (rc) return rc;
  if (dup.n != RG_REF_SIZE) return RG_CORRUPT;
  if (op == RG_IX_SEEK)
    order = flat_cmp(&key, &dup, (const uint8_t *)k->p, k->n) >= 0;
  else if (op == RG_IX_NEXT || op == RG_IX_PREV) {
    int c0 = c->nbuf ? flat_cmp(&key, &dup, c->buf, c->nbuf) : 0;
    order = !c->nbuf || (op == RG_IX_NEXT ? c0 > 0 : c0 < 0);
  }
  else order = 1;
  if (!order) return RG_CORRUPT;
  return flat(c, &key, &dup, k);
}

int rg_ixcur_item (rg_ixcur *c, const rg_val *entry, rg_val *ikey) {
  rg_val k;
  uint8_t seq[4];
  if (entry->n < RG_REF_SIZE) return RG_NOTFOUND;
  memcpy(seq, (const uint8_t *)entry->p + entry->n - 4, 4);
  k.p = seq;
  k.n = 4;
  return rg_cur_get(c->refs, &k, ikey, RG_SET);
}

int rg_ref_item (rg_txn *txn, rg_env *env, uint32_t seq, rg_val *ikey) {
  uint8_t b[RG_REF_KEY];
  return rg_kv_get(txn, RG_DB_REFS, b, rg_key_ref(b, seq), ikey);
}
/* }===================================================================== */
