/*
** memkv.h: an ordered table in memory behind rg_ftkv (store/ftindex.h), for
** tests: a sorted array, binary search, copies of keys and values.  After
** a seek that finds nothing, prev gives the last key (as the interface
** asks).
*/

#ifndef memkv_h
#define memkv_h

#include <stdlib.h>
#include <string.h>

#include "store/ftindex.h"

typedef struct memkv_e {
  uint8_t *k, *v;
  size_t kn, vn;
} memkv_e;

typedef struct memkv {
  memkv_e *e;
  size_t n, cap;
} memkv;

typedef struct memkv_cur {
  memkv *m;
  size_t i;                          /* m->n: past the end */
} memkv_cur;

static int memkv_cmp (const uint8_t *a, size_t an, const uint8_t *b,
                      size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c) return c;
  return an < bn ? -1 : an > bn;
}

/* The first index whose key is >= k. */
static size_t memkv_lower (const memkv *m, const uint8_t *k, size_t kn) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (memkv_cmp(m->e[mid].k, m->e[mid].kn, k, kn) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int memkv_get (void *ud, const uint8_t *k, size_t kn, rg_slice *v) {
  memkv *m = (memkv *)ud;
  size_t i = memkv_lower(m, k, kn);
  if (i == m->n || memkv_cmp(m->e[i].k, m->e[i].kn, k, kn)) return 1;
  v->p = m->e[i].v;
  v->n = m->e[i].vn;
  return 0;
}

static int memkv_put (void *ud, const uint8_t *k, size_t kn,
                      const uint8_t *v, size_t vn) {
  memkv *m = (memkv *)ud;
  size_t i = memkv_lower(m, k, kn);
  uint8_t *nv = (uint8_t *)malloc(vn + 1);
  if (nv == NULL) return 500;
  memcpy(nv, v, vn);
  if (i < m->n && memkv_cmp(m->e[i].k, m->e[i].kn, k, kn) == 0) {
    free(m->e[i].v);
    m->e[i].v = nv;
    m->e[i].vn = vn;
    return 0;
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    memkv_e *ne = (memkv_e *)realloc(m->e, cap * sizeof(memkv_e));
    if (ne == NULL) { free(nv); return 500; }
    m->e = ne;
    m->cap = cap;
  }
  memmove(m->e + i + 1, m->e + i, (m->n - i) * sizeof(memkv_e));
  m->e[i].k = (uint8_t *)malloc(kn + 1);
  if (m->e[i].k == NULL) return 500;
  memcpy(m->e[i].k, k, kn);
  m->e[i].kn = kn;
  m->e[i].v = nv;
  m->e[i].vn = vn;
  m->n++;
  return 0;
}

static int memkv_del (void *ud, const uint8_t *k, size_t kn) {
  memkv *m = (memkv *)ud;
  size_t i = memkv_lower(m, k, kn);
  if (i == m->n || memkv_cmp(m->e[i].k, m->e[i].kn, k, kn)) return 1;
  free(m->e[i].k);
  free(m->e[i].v);
  memmove(m->e + i, m->e + i + 1, (m->n - i - 1) * sizeof(memkv_e));
  m->n--;
  return 0;
}

static void *memkv_open (void *ud) {
  memkv_cur *c = (memkv_cur *)calloc(1, sizeof(memkv_cur));
  if (c) { c->m = (memkv *)ud; c->i = c->m->n; }
  return c;
}

static int memkv_at (memkv_cur *c, rg_slice *ko, rg_slice *vo) {
  if (c->i >= c->m->n) return 1;
  ko->p = c->m->e[c->i].k;
  ko->n = c->m->e[c->i].kn;
  vo->p = c->m->e[c->i].v;
  vo->n = c->m->e[c->i].vn;
  return 0;
}

static int memkv_seek (void *cur, const uint8_t *k, size_t kn, rg_slice *ko,
                       rg_slice *vo) {
  memkv_cur *c = (memkv_cur *)cur;
  c->i = memkv_lower(c->m, k, kn);
  return memkv_at(c, ko, vo);
}

static int memkv_next (void *cur, rg_slice *ko, rg_slice *vo) {
  memkv_cur *c = (memkv_cur *)cur;
  if (c->i < c->m->n) c->i++;
  return memkv_at(c, ko, vo);
}

static int memkv_prev (void *cur, rg_slice *ko, rg_slice *vo) {
  memkv_cur *c = (memkv_cur *)cur;
  if (c->i == 0) { c->i = c->m->n; return 1; }
  c->i--;
  return memkv_at(c, ko, vo);
}

static void memkv_close (void *cur) { free(cur); }

static void memkv_init (memkv *m) { memset(m, 0, sizeof(*m)); }

static void memkv_free (memkv *m) {
  size_t i;
  for (i = 0; i < m->n; i++) { free(m->e[i].k); free(m->e[i].v); }
  free(m->e);
}

static void memkv_iface (memkv *m, rg_ftkv *kv) {
  kv->ud = m;
  kv->get = memkv_get;
  kv->put = memkv_put;
  kv->del = memkv_del;
  kv->open = memkv_open;
  kv->seek = memkv_seek;
  kv->next = memkv_next;
  kv->prev = memkv_prev;
  kv->close = memkv_close;
}

#endif
