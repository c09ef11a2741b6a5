/*
** vgraph.c: the diskANN graph over its storage calls (vgraph.h says what
** each operation does and keeps).
*/

#include <stdlib.h>
#include <string.h>

#include "base/vgraph.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(RG_NO_CLONES)
#define RG_VINT __attribute__((target_clones("avx2", "default"), \
                               optimize("O3")))
#else
#define RG_VINT
#endif

RG_VINT int32_t rg_sq8_code_l2 (const uint8_t *a, const uint8_t *b,
                                size_t n) {
  int32_t acc = 0;
  size_t i;
  for (i = 0; i < n; i++) {
    int16_t d = (int16_t)(a[i] - b[i]);
    acc += (int32_t)d * d;
  }
  return acc;
}

void rg_vgraph_init (rg_vgraph *g, const rg_vgio *io, const rg_sq8 *sq,
                     int degree, int build_list) {
  memset(g, 0, sizeof(*g));
  g->io = *io;
  g->sq = sq;
  g->degree = degree < 2 ? 2 : degree > RG_VG_MAX_DEGREE ? RG_VG_MAX_DEGREE
                                                         : degree;
  g->max_degree = g->degree + g->degree / 4;
  if (g->max_degree > RG_VG_MAX_DEGREE) g->max_degree = RG_VG_MAX_DEGREE;
  g->build_list = build_list < g->degree ? g->degree : build_list;
  g->alpha = 1.2f;
  g->entry = RG_VG_NONE;
}


/*
** {=====================================================================
** Visited sets and candidate lists
** ======================================================================
*/
typedef rg_vgset vset;                /* a slot RG_VG_NONE: empty */

static int vset_init (vset *s, size_t hint) {
  size_t cap = 64;
  while (cap < 2 * hint) cap *= 2;
  s->slot = (uint32_t *)malloc(cap * sizeof(uint32_t));
  if (s->slot == NULL) return -1;
  memset(s->slot, 0xff, cap * sizeof(uint32_t));
  s->cap = cap;
  s->n = 0;
  return 0;
}

static size_t vhash (uint32_t id, size_t cap) {
  return (size_t)((id * 2654435761u) ^ (id >> 16)) & (cap - 1);
}

/* 1 added, 0 there already, -1 out of memory. */
static int vset_add (vset *s, uint32_t id) {
  size_t i;
  if (2 * (s->n + 1) > s->cap) {     /* grow: rehash into twice the room */
    vset t;
    size_t k;
    if (vset_init(&t, s->cap) != 0) return -1;
    for (k = 0; k < s->cap; k++)
      if (s->slot[k] != RG_VG_NONE) {
        i = vhash(s->slot[k], t.cap);
        while (t.slot[i] != RG_VG_NONE) i = (i + 1) & (t.cap - 1);
        t.slot[i] = s->slot[k];
        t.n++;
      }
    free(s->slot);
    *s = t;
  }
  for (i = vhash(id, s->cap); s->slot[i] != RG_VG_NONE; i = (i + 1) & (s->cap - 1))
    if (s->slot[i] == id) return 0;
  s->slot[i] = id;
  s->n++;
  return 1;
}

static int before (float ka, uint32_t ia, float kb, uint32_t ib) {
  return ka < kb || (ka == kb && ia < ib);
}

/* Inserts (key, id) in the sorted list when it belongs: its position, or
** -1 when it does not (the list is full of better ones). */
static long list_put (rg_vglist *l, float key, uint32_t id) {
  size_t lo = 0, hi = l->n, pos;
  if (l->n == l->cap && !before(key, id, l->c[l->n - 1].key, l->c[l->n - 1].id))
    return -1;
  while (lo < hi) {                  /* the first entry after (key, id) */
    size_t mid = (lo + hi) / 2;
    if (before(l->c[mid].key, l->c[mid].id, key, id)) lo = mid + 1;
    else hi = mid;
  }
  pos = lo;
  if (l->n < l->cap) l->n++;
  memmove(l->c + pos + 1, l->c + pos, (l->n - 1 - pos) * sizeof(rg_vcand));
  memmove(l->done + pos + 1, l->done + pos, l->n - 1 - pos);
  l->c[pos].key = key;
  l->c[pos].id = id;
  l->done[pos] = 0;
  return (long)pos;
}
/* }===================================================================== */


/*
** {=====================================================================
** Greedy search
** ======================================================================
*/
/* What a search measures from: a query, or a node's code. */
typedef struct target {
  const rg_sq8q *q;
  const uint8_t *code;
  size_t n;
} target;

static float key_of (const target *t, const uint8_t *code) {
  if (t->q) return rg_sq8_approx(t->q, code);
  return (float)rg_sq8_code_l2(t->code, code, t->n);
}

/* The nodes a search expanded (insert and delete read them). */
typedef struct expanded {
  rg_vcand *c;
  size_t n, cap;
} expanded;

static int expanded_add (expanded *x, float key, uint32_t id) {
  if (x->n == x->cap) {
    size_t cap = x->cap ? 2 * x->cap : 64;
    rg_vcand *c = (rg_vcand *)realloc(x->c, cap * sizeof(rg_vcand));
    if (c == NULL) return -1;
    x->c = c;
    x->cap = cap;
  }
  x->c[x->n].key = key;
  x->c[x->n].id = id;
  x->n++;
  return 0;
}

/* Meets node v in a walk: *code is its code when v is met for the first
** time, NULL when it was met before or is a freed slot.  Returns a
** status. */
static int meet (rg_vgraph *g, vset *seen, uint32_t v, const uint8_t **code) {
  int added = vset_add(seen, v);
  *code = NULL;
  if (added < 0) return 500;
  if (added == 0) return 0;
  g->codes_read++;
  return g->io.get_code(g->io.ud, v, code);
}

/* A search from the entry point for `t`, with a list of `list` nodes;
** `exp` (may be NULL) collects the nodes expanded, `top` (may be NULL,
** room for *ntop) the best of the list. */
static int greedy (rg_vgraph *g, const target *t, size_t list,
                   expanded *exp, rg_vcand *top, size_t *ntop) {
  rg_vglist l;
  vset seen;
  uint32_t adj[RG_VG_MAX_DEGREE];
  const uint8_t *code;
  size_t first = 0;
  int rc = 0, n, i;
  if (g->entry == RG_VG_NONE) {      /* an empty graph: nothing to give */
    if (ntop) *ntop = 0;
    return 0;
  }
  l.c = (rg_vcand *)malloc(list * sizeof(rg_vcand));
  l.done = (uint8_t *)malloc(list);
  l.n = 0;
  l.cap = list;
  if (l.c == NULL || l.done == NULL || vset_init(&seen, list * 8) != 0) {
    free(l.c);
    free(l.done);
    return 500;
  }
  if ((rc = meet(g, &seen, g->entry, &code))) goto done;
  if (code != NULL) list_put(&l, key_of(t, code), g->entry);
  for (;;) {
    uint32_t v;
    while (first < l.n && l.done[first]) first++;
    if (first == l.n) break;
    l.done[first] = 1;
    v = l.c[first].id;
    if (exp && expanded_add(exp, l.c[first].key, v)) { rc = 500; goto done; }
    if ((rc = g->io.get_adj(g->io.ud, v, adj, &n))) goto done;
    g->adj_reads++;
    for (i = 0; i < n; i++) {
      float k;
      long pos;
      if ((rc = meet(g, &seen, adj[i], &code))) goto done;
      if (code == NULL) continue;    /* met before, or a freed slot */
      k = key_of(t, code);
      pos = list_put(&l, k, adj[i]);
      if (pos >= 0 && (size_t)pos < first) first = (size_t)pos;
    }
  }
done:
  if (rc == 0 && top) {              /* the list itself: the best it kept */
    size_t i, n = *ntop < l.n ? *ntop : l.n;
    for (i = 0; i < n; i++) top[i] = l.c[i];
    *ntop = n;
  }
  free(l.c);
  free(l.done);
  free(seen.slot);
  return rc;
}

/* A min-heap of candidates to expand, nearest first (ties by the lower
** id), that grows as a filtered search needs (also a plain array: the
** nodes expanded). */
typedef rg_vgheap vheap;

/* Appends c (the array is no heap after: s->done). */
static int vheap_add (vheap *h, rg_vcand c) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 256;
    rg_vcand *m = (rg_vcand *)realloc(h->c, cap * sizeof(rg_vcand));
    if (m == NULL) return -1;
    h->c = m;
    h->cap = cap;
  }
  h->c[h->n++] = c;
  return 0;
}

static int vheap_push (vheap *h, float key, uint32_t id) {
  rg_vcand c;
  size_t i;
  c.key = key;
  c.id = id;
  if (vheap_add(h, c)) return -1;
  for (i = h->n - 1; i > 0; i = (i - 1) / 2) {   /* sift up */
    rg_vcand *p = &h->c[(i - 1) / 2];
    if (!before(key, id, p->key, p->id)) break;
    h->c[i] = *p;
  }
  h->c[i] = c;
  return 0;
}

static rg_vcand vheap_pop (vheap *h) {
  rg_vcand top = h->c[0], last = h->c[--h->n];
  size_t i = 0;
  for (;;) {                                   /* sift the last down */
    size_t m = 2 * i + 1;
    if (m >= h->n) break;
    if (m + 1 < h->n && before(h->c[m + 1].key, h->c[m + 1].id,
                               h->c[m].key, h->c[m].id))
      m++;
    if (!before(h->c[m].key, h->c[m].id, last.key, last.id)) break;
    h->c[i] = h->c[m];
    i = m;
  }
  if (h->n) h->c[i] = last;
  return top;
}

/* A search whose results are the nodes `accept` accepts (NULL: all), into
** best (room for k), going on from what `s` kept.  Best-first from the
** entry point, every node measured guides; a node is expanded while it
** lies within the `list` nearest nodes measured (what an unfiltered search
** expands) or closer than the k-th accepted node found (all of them while
** fewer than k are found), so the search goes on past its list as far as
** the filter makes it need: about k / (the fraction accepted) nodes around
** the query.  Every node measured is kept (in s->front until expanded,
** then in s->done), so a later call with a larger list or k first ranks
** them all again, then expands from where the bounds now allow. */
static int search_more (rg_vgraph *g, rg_vgsearch *s, const target *t,
                        size_t list, int (*accept) (void *, uint32_t),
                        void *aud, rg_vbest *best) {
  rg_vcand *bm = (rg_vcand *)malloc(list * sizeof(rg_vcand));
  rg_vbest beam;                     /* the `list` nearest measured */
  uint32_t adj[RG_VG_MAX_DEGREE];
  const uint8_t *code;
  size_t j;
  int rc = 0, n, i;
  if (bm == NULL) return 500;
  rg_vbest_init(&beam, bm, list);
  if (!s->started) {                 /* the entry point, measured */
    if (vset_init(&s->seen, list * 8) != 0) { rc = 500; goto done; }
    s->started = 1;
    if ((rc = meet(g, &s->seen, g->entry, &code))) goto done;
    if (code != NULL && vheap_push(&s->front, key_of(t, code), g->entry)) {
      rc = 500;
      goto done;
    }
  }
  for (j = 0; j < s->done.n + s->front.n; j++) {   /* ranked again */
    const rg_vcand *c = j < s->done.n ? &s->done.c[j]
                                       : &s->front.c[j - s->done.n];
    rg_vbest_offer(&beam, c->key, c->id);
    if (accept == NULL || accept(aud, c->id))
      rg_vbest_offer(best, c->key, c->id);
  }
  while (s->front.n > 0) {
    float lim = rg_vbest_bound(&beam), acc = rg_vbest_bound(best);
    rg_vcand c;
    if (acc > lim) lim = acc;
    if (s->front.c[0].key > lim) break;   /* and so is every one left */
    c = vheap_pop(&s->front);
    if (vheap_add(&s->done, c)) { rc = 500; goto done; }
    if ((rc = g->io.get_adj(g->io.ud, c.id, adj, &n))) goto done;
    g->adj_reads++;
    for (i = 0; i < n; i++) {
      float k;
      if ((rc = meet(g, &s->seen, adj[i], &code))) goto done;
      if (code == NULL) continue;    /* met before, or a freed slot */
      k = key_of(t, code);
      if (vheap_push(&s->front, k, adj[i])) { rc = 500; goto done; }
      lim = rg_vbest_bound(&beam);
      acc = rg_vbest_bound(best);
      if (acc > lim) lim = acc;
      if (k >= lim) continue;        /* kept for a wider search: this one
                                        could neither expand it nor take
                                        it among the best k */
      rg_vbest_offer(&beam, k, adj[i]);
      if (accept == NULL || accept(aud, adj[i]))
        rg_vbest_offer(best, k, adj[i]);
    }
  }
done:
  free(bm);
  return rc;
}

void rg_vgsearch_free (rg_vgsearch *s) {
  free(s->seen.slot);
  free(s->front.c);
  free(s->done.c);
  memset(s, 0, sizeof(*s));
}

int rg_vgraph_search_more (rg_vgraph *g, rg_vgsearch *s, const rg_sq8q *q,
                           size_t list, size_t k,
                           int (*accept) (void *ud, uint32_t v), void *aud,
                           rg_vcand *out, size_t *n) {
  target t;
  rg_vbest best;
  int rc;
  t.q = q;
  t.code = NULL;
  t.n = g->sq->n;
  *n = 0;
  if (k == 0) return 0;
  if (list < k) list = k;
  rg_vbest_init(&best, out, k);
  rc = g->entry == RG_VG_NONE ? 0
     : search_more(g, s, &t, list, accept, aud, &best);
  rg_vbest_sort(&best);
  *n = best.n;
  return rc;
}

int rg_vgraph_search (rg_vgraph *g, const rg_sq8q *q, size_t list, size_t k,
                      int (*accept) (void *ud, uint32_t v), void *aud,
                      rg_vcand *out, size_t *n) {
  rg_vgsearch s;
  target t;
  int rc;
  if (accept == NULL && k > 0) {     /* every node a result: the list's */
    t.q = q;
    t.code = NULL;
    t.n = g->sq->n;
    *n = k;
    return greedy(g, &t, list < k ? k : list, NULL, out, n);
  }
  memset(&s, 0, sizeof(s));
  rc = rg_vgraph_search_more(g, &s, q, list, k, accept, aud, out, n);
  rg_vgsearch_free(&s);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Robust prune, insert, delete
** ======================================================================
*/
typedef struct pcand {
  float key;                 /* distance to the node being pruned */
  uint32_t id;
  const uint8_t *code;
  int gone;
} pcand;

static int pcand_cmp (const void *a, const void *b) {
  const pcand *x = (const pcand *)a, *y = (const pcand *)b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The neighbours of node p (code pc) chosen from `ids` (any order,
** repeats and p itself allowed, freed slots dropped): into out, *nout. */
static int prune (rg_vgraph *g, uint32_t p, const uint8_t *pc,
                  const uint32_t *ids, size_t nids, uint32_t *out, int *nout) {
  pcand *c = (pcand *)malloc((nids + 1) * sizeof(pcand));
  size_t i, j, m = 0;
  size_t dim = g->sq->n;
  int rc = 0, kept = 0;
  if (c == NULL) return 500;
  for (i = 0; i < nids; i++) {
    const uint8_t *code;
    if (ids[i] == p) continue;
    if ((rc = g->io.get_code(g->io.ud, ids[i], &code))) goto done;
    g->codes_read++;
    if (code == NULL) continue;
    c[m].id = ids[i];
    c[m].code = code;
    c[m].key = (float)rg_sq8_code_l2(pc, code, dim);
    c[m].gone = 0;
    m++;
  }
  qsort(c, m, sizeof(pcand), pcand_cmp);
  for (i = 0, j = 0; i < m; i++)     /* repeats sort together */
    if (j == 0 || c[i].id != c[j - 1].id || c[i].key != c[j - 1].key)
      c[j++] = c[i];
  m = j;
  for (i = 0; i < m && kept < g->degree; i++) {
    if (c[i].gone) continue;
    out[kept++] = c[i].id;
    for (j = i + 1; j < m; j++) {
      if (c[j].gone) continue;
      if (g->alpha * (float)rg_sq8_code_l2(c[i].code, c[j].code, dim) <=
          c[j].key)
        c[j].gone = 1;
    }
  }
done:
  *nout = kept;
  free(c);
  return rc;
}

/* Adds the edge p -> v, pruning p's list when it is full. */
static int add_edge (rg_vgraph *g, uint32_t p, uint32_t v) {
  uint32_t adj[RG_VG_MAX_DEGREE + 1], out[RG_VG_MAX_DEGREE];
  const uint8_t *pc;
  int n, i, m, rc;
  if ((rc = g->io.get_adj(g->io.ud, p, adj, &n))) return rc;
  g->adj_reads++;
  for (i = 0; i < n; i++) if (adj[i] == v) return 0;
  adj[n++] = v;
  if (n <= g->max_degree) {
    g->adj_writes++;
    return g->io.put_adj(g->io.ud, p, adj, n);
  }
  if ((rc = g->io.get_code(g->io.ud, p, &pc))) return rc;
  if (pc == NULL) return 0;
  if ((rc = prune(g, p, pc, adj, (size_t)n, out, &m))) return rc;
  g->adj_writes++;
  return g->io.put_adj(g->io.ud, p, out, m);
}

int rg_vgraph_insert (rg_vgraph *g, uint32_t v) {
  const uint8_t *code;
  target t;
  expanded x;
  uint32_t *ids = NULL, out[RG_VG_MAX_DEGREE];
  size_t i;
  int rc, m;
  if ((rc = g->io.get_code(g->io.ud, v, &code))) return rc;
  if (code == NULL) return 500;
  if (g->entry == RG_VG_NONE || g->entry == v) {
    g->entry = v;
    g->adj_writes++;
    return g->io.put_adj(g->io.ud, v, NULL, 0);
  }
  t.q = NULL;
  t.code = code;
  t.n = g->sq->n;
  memset(&x, 0, sizeof(x));
  if ((rc = greedy(g, &t, (size_t)g->build_list, &x, NULL, NULL)))
    goto done;
  if ((ids = (uint32_t *)malloc((x.n + 1) * sizeof(uint32_t))) == NULL) {
    rc = 500;
    goto done;
  }
  for (i = 0; i < x.n; i++) ids[i] = x.c[i].id;
  if ((rc = prune(g, v, code, ids, x.n, out, &m))) goto done;
  g->adj_writes++;
  if ((rc = g->io.put_adj(g->io.ud, v, out, m))) goto done;
  for (i = 0; i < (size_t)m; i++)
    if ((rc = add_edge(g, out[i], v))) goto done;
done:
  free(ids);
  free(x.c);
  return rc;
}

int rg_vgraph_delete (rg_vgraph *g, uint32_t v) {
  const uint8_t *code;
  uint32_t vadj[RG_VG_MAX_DEGREE], adj[RG_VG_MAX_DEGREE],
           cand[2 * RG_VG_MAX_DEGREE], out[RG_VG_MAX_DEGREE];
  target t;
  expanded x;
  vset done;
  size_t i;
  int rc, nv, n, m, k, j;
  if ((rc = g->io.get_code(g->io.ud, v, &code))) return rc;
  if ((rc = g->io.get_adj(g->io.ud, v, vadj, &nv))) return rc;
  g->adj_reads++;
  if (g->entry == v) {               /* a neighbour takes its place */
    g->entry = RG_VG_NONE;
    for (i = 0; i < (size_t)nv && g->entry == RG_VG_NONE; i++) {
      const uint8_t *c;
      if ((rc = g->io.get_code(g->io.ud, vadj[i], &c))) return rc;
      if (c != NULL && vadj[i] != v) g->entry = vadj[i];
    }
    if (g->entry == RG_VG_NONE && (rc = g->io.any(g->io.ud, v, &g->entry)))
      return rc;
  }
  memset(&x, 0, sizeof(x));
  if (code != NULL && g->entry != RG_VG_NONE) {
    t.q = NULL;
    t.code = code;
    t.n = g->sq->n;
    if ((rc = greedy(g, &t, (size_t)g->build_list, &x, NULL, NULL)))
      goto fail;
  }
  if (vset_init(&done, x.n + 1) != 0) { rc = 500; goto fail; }
  for (i = 0; i < x.n; i++) {        /* the nodes around v that point to it */
    uint32_t p = x.c[i].id;
    const uint8_t *pc;
    if (p == v || vset_add(&done, p) == 0) continue;
    if ((rc = g->io.get_adj(g->io.ud, p, adj, &n))) break;
    g->adj_reads++;
    for (k = 0; k < n && adj[k] != v; k++) {}
    if (k == n) continue;
    for (j = 0, m = 0; j < n; j++) if (adj[j] != v) cand[m++] = adj[j];
    for (j = 0; j < nv; j++) if (vadj[j] != p) cand[m++] = vadj[j];
    if ((rc = g->io.get_code(g->io.ud, p, &pc))) break;
    if (pc == NULL) continue;
    if ((rc = prune(g, p, pc, cand, (size_t)m, out, &k))) break;
    g->adj_writes++;
    if ((rc = g->io.put_adj(g->io.ud, p, out, k))) break;
  }
  free(done.slot);
  if (rc == 0) {
    g->adj_writes++;
    rc = g->io.put_adj(g->io.ud, v, NULL, 0);
  }
fail:
  free(x.c);
  return rc;
}
/* }===================================================================== */
