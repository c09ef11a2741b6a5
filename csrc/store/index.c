/*
** index.c: index and unique-key maintenance.
**
** The terms of a document.  Walking a document, every scalar has a
** normalized path: its object keys, with every array position written "[]"
** (so /tags/[] holds each element of tags).  When the container's indexing
** policy indexes that path (container.c), the scalar yields one index entry
** (layout.c):
**
**     cid u32 | path-id u64 | term | lp-hash u64 | item-digest u64  -> item key
**
** where path-id is the hash of the normalized path ("/tags/[]", with ~0 and
** ~1 escapes inside keys).  Each composite index yields one entry when every
** one of its paths holds a scalar, with the terms concatenated (descending
** ones complemented) under the composite's id.
**
** Computed properties (container.c) are walked as top-level members of
** the item holding the values their queries give (a stored member of the
** same name is left out).
**
** Shapes (containers of revision 2).  The shape of an item is the set of
** non-array paths where it holds an indexed scalar (the path ids, sorted);
** each item has one more entry, under the reserved path id RG_SHAPE_PATH
** with the 8-byte hash of its shape as the term:
**
**     cid u32 | RG_SHAPE_PATH u64 | u64 shape | lp-hash | digest  -> item key
**
** and the meta table keeps every shape ever seen:
**
**     'h' cid u64 shape  -> the sorted path ids (u64 each)
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

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/container.h"
#include "store/env_int.h"
#include "store/index.h"

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
** Terms of a document
** ======================================================================
*/
uint64_t rg_index_path_id (const char *const *seg, int n) {
  rg_buf b;
  uint64_t h;
  int i;
  rg_buf_init(&b);
  for (i = 0; i < n; i++) {
    const char *s;
    rg_buf_addc(&b, '/');
    for (s = seg[i]; *s; s++) {
      if (*s == '~') rg_buf_add(&b, "~0", 2);
      else if (*s == '/') rg_buf_add(&b, "~1", 2);
      else rg_buf_addc(&b, *s);
    }
  }
  h = rg_hash(b.p ? b.p : "", b.n);
  rg_buf_free(&b);
  return h;
}

void rg_index_prefix (rg_buf *b, uint32_t cid, uint64_t path_id) {
  uint8_t p[12];
  rg_put_u32(p, cid);
  rg_put_u64(p + 4, path_id);
  rg_buf_add(b, p, 12);
}

typedef struct walker {
  const rg_cspec *spec;
  const rg_ikey *k;
  uint8_t tail[16];              /* lp-hash | item-digest */
  const char *seg[RG_MAX_DEPTH + 2];
  keyset *ks;
  int arr;                       /* array positions on the path walked */
  uint64_t shape[RG_SHAPE_MAX + 1];
  int nshape;
} walker;

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
    uint64_t id = rg_index_path_id(w->seg, depth);
    rg_index_prefix(&w->ks->buf, w->spec->cid, id);
    rg_term(&w->ks->buf, v, 0);
    rg_buf_add(&w->ks->buf, w->tail, 16);
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
  for (i = 0; i < w->spec->ncp; i++) {
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

static int cmp_u64 (const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The shape of the paths walked: sorted, without repeats, into w->shape;
** its hash (0: wide). */
static uint64_t shape_of (walker *w) {
  int i, n = 0;
  uint8_t b[8 * RG_SHAPE_MAX];
  if (w->nshape > RG_SHAPE_MAX) return 0;
  qsort(w->shape, (size_t)w->nshape, sizeof(uint64_t), cmp_u64);
  for (i = 0; i < w->nshape; i++)
    if (n == 0 || w->shape[n - 1] != w->shape[i]) w->shape[n++] = w->shape[i];
  w->nshape = n;
  for (i = 0; i < n; i++) rg_put_u64(b + 8 * i, w->shape[i]);
  return rg_hash(b, (size_t)n * 8) | 1;    /* never 0 */
}

static void composite_terms (walker *w, const cJSON *doc) {
  int i, j;
  for (i = 0; i < w->spec->ncomp; i++) {
    const rg_composite *ci = &w->spec->comp[i];
    size_t start = w->ks->buf.n, limit = 360 / (size_t)ci->n;
    const cJSON *vals[8];
    for (j = 0; j < ci->n; j++) {
      vals[j] = rg_path_get(doc, &ci->path[j]);
      if (vals[j] == NULL || cJSON_IsObject(vals[j]) || cJSON_IsArray(vals[j]))
        break;
    }
    if (j < ci->n) continue;         /* not every path holds a scalar */
    rg_index_prefix(&w->ks->buf, w->spec->cid, ci->id);
    for (j = 0; j < ci->n; j++)
      rg_term_cut(&w->ks->buf, vals[j], ci->desc[j], limit);
    rg_buf_add(&w->ks->buf, w->tail, 16);
    ks_end(w->ks, start);
  }
}

/* The entries of a document; *shape receives its shape hash and `ids`
** (RG_SHAPE_MAX + 1 of them) its path ids, *nids how many (revision 2). */
static void doc_terms (const rg_cspec *spec, const rg_ikey *k,
                       const cJSON *doc, keyset *ks, uint64_t *shape,
                       uint64_t *ids, int *nids) {
  walker w;
  w.spec = spec;
  w.k = k;
  w.ks = ks;
  w.arr = 0;
  w.nshape = 0;
  rg_put_u64(w.tail, k->hash);
  rg_put_u64(w.tail + 8, rg_ikey_digest(k->key, k->len));
  if (!spec->automatic) return;
  walk(&w, doc, 0);
  if (spec->ncp) computed_terms(&w, doc);
  composite_terms(&w, doc);
  if (spec->revision >= 2) {
    size_t start = ks->buf.n;
    uint64_t h = shape_of(&w);
    uint8_t t[8];
    rg_index_prefix(&ks->buf, spec->cid, RG_SHAPE_PATH);
    rg_put_u64(t, h);
    rg_buf_add(&ks->buf, t, 8);
    rg_buf_add(&ks->buf, w.tail, 16);
    ks_end(ks, start);
    if (shape) *shape = h;
    if (ids) memcpy(ids, w.shape, (size_t)w.nshape * sizeof(uint64_t));
    if (nids) *nids = w.nshape;
  }
}

/* Is this index key a shape entry? */
static int shape_entry (const char *key, size_t n) {
  return n >= 12 && rg_get_u64((const uint8_t *)key + 4) == RG_SHAPE_PATH;
}

/* Records a shape in the meta table when it is new. */
static int shape_record (rg_scope *s, const rg_cspec *spec, uint64_t h,
                         const uint64_t *ids, int n, rg_err *e) {
  uint8_t key[13], val[8 * RG_SHAPE_MAX + 1];
  MDB_val k, v;
  int i, rc;
  if (h == 0) return 0;              /* wide: no record */
  key[0] = RG_MK_SHAPE;
  rg_put_u32(key + 1, spec->cid);
  rg_put_u64(key + 5, h);
  k.mv_data = key;
  k.mv_size = 13;
  rc = mdb_get(s->txn, s->env->dbi[RG_DB_META], &k, &v);
  if (rc == 0) return 0;
  if (rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "index", e);
  for (i = 0; i < n; i++) rg_put_u64(val + 8 * i, ids[i]);
  return rg_put(s, RG_DB_META, key, 13, val, (size_t)n * 8, e);
}

int rg_index_terms (const rg_cspec *spec, const cJSON *doc,
                    void (*f) (void *ud, uint64_t id, const uint8_t *term,
                               size_t n),
                    void *ud) {
  keyset ks;
  rg_ikey k;
  size_t *ord, n = 0, i;
  memset(&k, 0, sizeof(k));
  ks_init(&ks);
  doc_terms(spec, &k, doc, &ks, NULL, NULL, NULL);
  ord = ks.oom ? NULL : ks_sorted(&ks, &n);
  if (ord == NULL) { ks_free(&ks); return -1; }
  for (i = 0; i < n; i++) {         /* cid | id | term | hash | digest */
    const uint8_t *p = (const uint8_t *)ks.buf.p + ks.off[ord[i]];
    size_t len = ks.len[ord[i]];
    if (shape_entry((const char *)p, len)) continue;
    f(ud, rg_get_u64(p + 4), p + 12, len - 12 - 16);
  }
  free(ord);
  ks_free(&ks);
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Unique keys
** ======================================================================
*/
void rg_unique_digest (const rg_cspec *spec, int u, const cJSON *doc,
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

/* The unique-table key of unique key `u` for `doc`, into out (len). */
static size_t unique_key (const rg_cspec *spec, int u, const rg_ikey *k,
                          const cJSON *doc, uint8_t *out) {
  memcpy(out, k->key, k->lplen);
  out[k->lplen] = (uint8_t)u;
  rg_unique_digest(spec, u, doc, out + k->lplen + 1);
  return k->lplen + 17;
}

int rg_unique_check (rg_scope *s, const rg_cspec *spec, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e) {
  int u, rc;
  if (neu == NULL) return 0;
  for (u = 0; u < spec->nuniq; u++) {
    uint8_t nk[RG_MAX_KEY], ok[RG_MAX_KEY];
    size_t nn = unique_key(spec, u, k, neu, nk);
    MDB_val key, val;
    if (old && unique_key(spec, u, k, old, ok) == nn && memcmp(ok, nk, nn) == 0)
      continue;                      /* unchanged: still ours */
    key.mv_data = nk;
    key.mv_size = nn;
    rc = mdb_get(s->txn, s->env->dbi[RG_DB_UNIQUE], &key, &val);
    if (rc == MDB_NOTFOUND) continue;
    if (rc) return rg_scope_mdb(s, rc, "unique key", e);
    if (val.mv_size == k->len && memcmp(val.mv_data, k->key, k->len) == 0)
      continue;
    {
      rg_buf p;
      int i;
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
                   "logical partition has the same value at %s",
                   p.p ? p.p : "");
      rg_buf_free(&p);
      return rc;
    }
  }
  return 0;
}

static int unique_apply (rg_scope *s, const rg_cspec *spec, const rg_ikey *k,
                         const cJSON *old, const cJSON *neu, rg_err *e) {
  int u, rc;
  for (u = 0; u < spec->nuniq; u++) {
    uint8_t nk[RG_MAX_KEY], ok[RG_MAX_KEY];
    size_t nn = neu ? unique_key(spec, u, k, neu, nk) : 0;
    size_t on = old ? unique_key(spec, u, k, old, ok) : 0;
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
                       const rg_ikey *k, const cJSON *old, const cJSON *neu,
                       rg_err *e) {
  keyset ko, kn;
  size_t *oo = NULL, *on = NULL, no = 0, nn = 0, i = 0, j = 0;
  int rc = 0;
  uint64_t oshape = 0, nshape = 0, ids[RG_SHAPE_MAX + 1];
  int nids = 0;
  ks_init(&ko);
  ks_init(&kn);
  if (old) doc_terms(os, k, old, &ko, &oshape, NULL, NULL);
  if (neu) doc_terms(ns, k, neu, &kn, &nshape, ids, &nids);
  if (neu && ns->revision >= 2 && (nshape != oshape || os != ns) &&
      (rc = shape_record(s, ns, nshape, ids, nids, e)))
    goto done;
  if (ko.oom || kn.oom) { rc = rg_fail(e, 500, "out of memory"); goto done; }
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
      rc = rg_del(s, RG_DB_INDEX, ko.buf.p + ko.off[oo[i]], ko.len[oo[i]],
                  NULL, e);
      i++;
    }
    else {
      rc = rg_put(s, RG_DB_INDEX, kn.buf.p + kn.off[on[j]], kn.len[on[j]],
                  k->key, k->len, e);
      j++;
    }
    if (rc) goto done;
    if (!(c < 0 ? shape_entry(ko.buf.p + ko.off[oo[i - 1]], ko.len[oo[i - 1]])
                : shape_entry(kn.buf.p + kn.off[on[j - 1]],
                              kn.len[on[j - 1]])))
      s->work.terms++;               /* shapes are bookkeeping: not charged */
  }
done:
  free(oo);
  free(on);
  ks_free(&ko);
  ks_free(&kn);
  return rc;
}

int rg_index_update (rg_scope *s, const rg_cspec *spec, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e) {
  int rc = index_diff(s, spec, spec, k, old, neu, e);
  return rc ? rc : unique_apply(s, spec, k, old, neu, e);
}

int rg_index_reindex (rg_scope *s, const rg_cspec *from, const rg_cspec *to,
                      const rg_ikey *k, const cJSON *doc, rg_err *e) {
  return index_diff(s, from, to, k, doc, doc, e);
}


/*
** {=====================================================================
** Verification (db:verify)
** ======================================================================
*/
/* Checks that every index and unique entry `doc` needs exists and names
** this item; adds how many there are to *nindex and *nunique.  Problems
** are appended to `report`; returns how many were found. */
int rg_index_verify (MDB_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_ikey *k, const cJSON *doc, uint64_t *nindex,
                     uint64_t *nunique, rg_buf *report) {
  keyset ks;
  size_t *ord, n = 0, i;
  int bad = 0, u;
  uint64_t shape = 0;
  ks_init(&ks);
  doc_terms(spec, k, doc, &ks, &shape, NULL, NULL);
  ord = ks.oom ? NULL : ks_sorted(&ks, &n);
  if (ord == NULL) {
    ks_free(&ks);
    rg_buf_adds(report, "out of memory while verifying\n");
    return 1;
  }
  for (i = 0; i < n; i++) {
    MDB_val key, val;
    key.mv_data = ks.buf.p + ks.off[ord[i]];
    key.mv_size = ks.len[ord[i]];
    if (mdb_get(txn, env->dbi[RG_DB_INDEX], &key, &val) != 0 ||
        val.mv_size != k->len || memcmp(val.mv_data, k->key, k->len) != 0) {
      bad++;
      rg_buf_addf(report, "container %u: an index entry of item %.*s is "
                  "missing\n", spec->cid, (int)(k->len - k->lplen),
                  (const char *)k->key + k->lplen);
    }
  }
  *nindex += n;
  if (spec->revision >= 2 && shape != 0) {   /* its shape is recorded */
    uint8_t key[13];
    MDB_val mk, mv;
    key[0] = RG_MK_SHAPE;
    rg_put_u32(key + 1, spec->cid);
    rg_put_u64(key + 5, shape);
    mk.mv_data = key;
    mk.mv_size = 13;
    if (mdb_get(txn, env->dbi[RG_DB_META], &mk, &mv) != 0) {
      bad++;
      rg_buf_addf(report, "container %u: the shape of item %.*s is not "
                  "recorded\n", spec->cid, (int)(k->len - k->lplen),
                  (const char *)k->key + k->lplen);
    }
  }
  for (u = 0; u < spec->nuniq; u++) {
    uint8_t uk[RG_MAX_KEY];
    MDB_val key, val;
    key.mv_data = uk;
    key.mv_size = unique_key(spec, u, k, doc, uk);
    if (mdb_get(txn, env->dbi[RG_DB_UNIQUE], &key, &val) != 0 ||
        val.mv_size != k->len || memcmp(val.mv_data, k->key, k->len) != 0) {
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
