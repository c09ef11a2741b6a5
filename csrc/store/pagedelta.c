/*
** pagedelta.c: a page as the changes from an earlier one, the pairing of a
** commit's pages with their earlier versions, and a cache of page images
** (pagedelta.h says what and why; pages.h and pagecheck.h the format).
**
** A delta is a run of ranges, offset u16 | length u16 | bytes, in
** increasing order: the bytes where the page differs from its source,
** two ranges closer than GAP equal bytes being one (a range's head costs
** four).  Pages of more than 32 KiB take no deltas (the offsets are u16).
*/

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/support.h"
#include "store/pagecheck.h"
#include "store/pagedelta.h"
#include "store/pages.h"

#define GAP        4             /* equal bytes a range may hold */
#define PSIZE_MAX  32768
#define PAIR_DEPTH 64            /* trees and sub-databases, nested */

/*
** {=====================================================================
** Deltas
** ======================================================================
*/
int rg_pdelta_usable (const uint8_t *p, unsigned psize, unsigned *lower,
                      unsigned *upper) {
  uint16_t flags = rg_le16(p + RG_PG_FLAGS), lo = rg_le16(p + 12),
           up = rg_le16(p + 14);
  if (!(flags & (RG_PG_BRANCH | RG_PG_LEAF)) ||
      (flags & (RG_PG_OVERFLOW | RG_PG_META | RG_PG_LEAF2)) ||
      lo < RG_PG_HDR || lo > up || up > psize || psize > PSIZE_MAX)
    return 0;
  *lower = lo;
  *upper = up;
  return 1;
}

void rg_pdelta_trim (uint8_t *p, unsigned psize) {
  unsigned lo, up;
  if (rg_pdelta_usable(p, psize, &lo, &up)) memset(p + lo, 0, up - lo);
}

/* The ranges where p differs from s within [x, to), appended to out at
** *n; 0, or -1 once they reach `limit` bytes. */
static int ranges (const uint8_t *s, const uint8_t *p, unsigned x,
                   unsigned to, uint8_t *out, size_t *n, size_t limit) {
  for (;;) {
    unsigned a, b;
    uint16_t h[2];
    while (x + 256 <= to && memcmp(s + x, p + x, 256) == 0) x += 256;
#ifdef __SSE2__
    for (; x + 16 <= to; x += 16)        /* equal runs, skipped */
      if (_mm_movemask_epi8(_mm_cmpeq_epi8(
            _mm_loadu_si128((const __m128i *)(const void *)(s + x)),
            _mm_loadu_si128((const __m128i *)(const void *)(p + x)))) != 0xFFFF)
        break;
#endif
    for (; x + 8 <= to; x += 8) {
      uint64_t u, v;
      memcpy(&u, s + x, 8);
      memcpy(&v, p + x, 8);
      if (u != v) break;
    }
    while (x < to && s[x] == p[x]) x++;
    if (x >= to) return 0;
    a = x;
    b = x + 1;                          /* [a, b): the range so far */
    for (x = b; x < to; x++) {
      if (s[x] != p[x]) b = x + 1;
      else if (x - b >= GAP) break;
    }
    if (*n + 4 + (b - a) >= limit) return -1;
    h[0] = (uint16_t)a;
    h[1] = (uint16_t)(b - a);
    memcpy(out + *n, h, 4);
    memcpy(out + *n + 4, p + a, b - a);
    *n += 4 + (b - a);
    x = b;
  }
}

size_t rg_pdelta_encode (const uint8_t *s, const uint8_t *p, unsigned psize,
                         uint8_t *out, size_t limit) {
  size_t n = 0;
  unsigned slo, sup, plo, pup, from, to;
  if (!rg_pdelta_usable(s, psize, &slo, &sup) ||
      !rg_pdelta_usable(p, psize, &plo, &pup))
    return 0;
  /* between both pages' pointers and both pages' nodes, both are zeros */
  from = slo > plo ? slo : plo;
  to = sup < pup ? sup : pup;
  if (to < from) to = from;
  if (ranges(s, p, 0, from, out, &n, limit) != 0 ||
      ranges(s, p, to, psize, out, &n, limit) != 0)
    return 0;
  return n;
}

int rg_pdelta_apply (const uint8_t *s, const uint8_t *d, size_t n,
                     unsigned psize, uint8_t *out) {
  size_t i = 0;
  memcpy(out, s, psize);
  while (i < n) {
    unsigned a, len;
    if (i + 4 > n) return -1;
    a = rg_le16(d + i);
    len = rg_le16(d + i + 2);
    i += 4;
    if (len == 0 || a + len > psize || i + len > n) return -1;
    memcpy(out + a, d + i, len);
    i += len;
  }
  return 0;
}

uint64_t rg_pdelta_sum (const uint8_t *p, unsigned psize) {
  return rg_sum64(p, psize);
}

int rg_pdelta_make (const uint8_t *s, const uint8_t *d, size_t n,
                    unsigned psize, uint64_t pgno, uint64_t sum,
                    uint8_t *out) {
  if (rg_pdelta_apply(s, d, n, psize, out) != 0 || rg_le64(out) != pgno ||
      rg_pdelta_sum(out, psize) != sum)
    return -1;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Pairing
** ======================================================================
*/
typedef struct pairer {
  unsigned psize;
  rg_pdelta_page fresh, known;
  rg_pdelta_found found;
  void *ud;
} pairer;

/* The i-th node of the usable page p, when its header and key lie inside
** the page (else NULL); its key size in *ksize. */
static const uint8_t *node (const uint8_t *p, unsigned psize, unsigned i,
                            unsigned *ksize) {
  unsigned at = rg_le16(p + RG_PG_HDR + 2 * i);
  if (at < RG_PG_HDR || at + RG_NODE_HDR > psize) return NULL;
  *ksize = rg_le16(p + at + 6);
  if (at + RG_NODE_HDR + *ksize > psize) return NULL;
  return p + at;
}

/* The node of page s with the key of node nd (ksize bytes), tried at
** `hint` first; NULL when there is none. */
static const uint8_t *same_key (const uint8_t *s, unsigned psize,
                                unsigned hint, const uint8_t *nd,
                                unsigned ksize) {
  unsigned n = rg_node_count(s), i, k;
  const uint8_t *o;
  if (hint < n && (o = node(s, psize, hint, &k)) != NULL && k == ksize &&
      memcmp(o + RG_NODE_HDR, nd + RG_NODE_HDR, k) == 0)
    return o;
  for (i = 0; i < n; i++)
    if (i != hint && (o = node(s, psize, i, &k)) != NULL && k == ksize &&
        memcmp(o + RG_NODE_HDR, nd + RG_NODE_HDR, k) == 0)
      return o;
  return NULL;
}

/* A leaf node's sub-database root, or RG_PG_INVALID. */
static uint64_t sub_root (const uint8_t *nd, unsigned ksize, unsigned psize,
                          const uint8_t *page) {
  const uint8_t *data = nd + RG_NODE_HDR + ksize;
  if (!(rg_le16(nd + 4) & RG_NODE_SUBDB) || rg_node_dsize(nd) != RG_META_DB ||
      (size_t)(data - page) + RG_META_DB > psize)
    return RG_PG_INVALID;
  return rg_le64(data + RG_DB_ROOT);
}

static void pair_tree (pairer *k, uint64_t pg, uint64_t old, int level) {
  const uint8_t *p, *s;
  unsigned lo, up, n, i;
  uint16_t kind;
  if (level > PAIR_DEPTH || pg == old || pg == RG_PG_INVALID ||
      old == RG_PG_INVALID || (p = k->fresh(k->ud, pg)) == NULL ||
      (s = k->known(k->ud, old)) == NULL ||
      !rg_pdelta_usable(p, k->psize, &lo, &up) ||
      !rg_pdelta_usable(s, k->psize, &lo, &up))
    return;
  kind = rg_le16(p + RG_PG_FLAGS) & (RG_PG_BRANCH | RG_PG_LEAF);
  if (k->found(k->ud, pg, old) != 0) return;   /* walked already */
  if (kind != (rg_le16(s + RG_PG_FLAGS) & (RG_PG_BRANCH | RG_PG_LEAF))) return;
  n = rg_node_count(p);
  for (i = 0; i < n; i++) {
    unsigned ksize;
    const uint8_t *nd = node(p, k->psize, i, &ksize), *o;
    uint64_t child, was;
    if (nd == NULL) continue;
    child = kind == RG_PG_BRANCH ? rg_node_child(nd)
                                 : sub_root(nd, ksize, k->psize, p);
    if (child == RG_PG_INVALID || k->fresh(k->ud, child) == NULL ||
        (o = same_key(s, k->psize, i, nd, ksize)) == NULL)
      continue;
    was = kind == RG_PG_BRANCH ? rg_node_child(o)
                               : sub_root(o, rg_le16(o + 6), k->psize, s);
    pair_tree(k, child, was, level + 1);
  }
}

void rg_pdelta_pair (uint64_t root, uint64_t old, unsigned psize,
                     rg_pdelta_page fresh, rg_pdelta_page known,
                     rg_pdelta_found found, void *ud) {
  pairer k = { psize, fresh, known, found, ud };
  pair_tree(&k, root, old, 0);
}
/* }===================================================================== */


/*
** {=====================================================================
** The page cache
** ======================================================================
*/
/* Slots hold an image each (allocated when first used); a table of
** 2^k >= 2 * slots entries (slot + 1, 0: none), linearly probed, finds a
** slot by page number. */
struct rg_pgcache {
  unsigned psize, slots, hand, count, mask;
  uint64_t *pgno;
  uint8_t **img;
  uint8_t *ref;
  uint32_t *table;
};

unsigned rg_pgno_home (uint64_t pgno, unsigned mask) {
  return (unsigned)((pgno * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static unsigned home (const rg_pgcache *c, uint64_t pgno) {
  return rg_pgno_home(pgno, c->mask);
}

/* The table position of pgno, or -1. */
static long find (const rg_pgcache *c, uint64_t pgno) {
  unsigned i = home(c, pgno);
  while (c->table[i]) {
    if (c->pgno[c->table[i] - 1] == pgno) return (long)i;
    i = (i + 1) & c->mask;
  }
  return -1;
}

/* Empties table position i, moving back the entries probed past it. */
static void unlist (rg_pgcache *c, unsigned i) {
  unsigned j = i;
  c->table[i] = 0;
  for (;;) {
    unsigned h;
    j = (j + 1) & c->mask;
    if (!c->table[j]) return;
    h = home(c, c->pgno[c->table[j] - 1]);
    if (i <= j ? (i < h && h <= j) : (i < h || h <= j)) continue;
    c->table[i] = c->table[j];
    c->table[j] = 0;
    i = j;
  }
}

rg_pgcache *rg_pgcache_new (unsigned psize, size_t bytes) {
  rg_pgcache *c = (rg_pgcache *)calloc(1, sizeof(*c));
  unsigned size = 16, i;
  if (c == NULL) return NULL;
  c->psize = psize;
  c->slots = (unsigned)(bytes / psize);
  if (c->slots < 4) c->slots = 4;
  while (size < 2 * c->slots) size *= 2;
  c->mask = size - 1;
  c->pgno = (uint64_t *)malloc(c->slots * sizeof(uint64_t));
  c->img = (uint8_t **)calloc(c->slots, sizeof(uint8_t *));
  c->ref = (uint8_t *)calloc(c->slots, 1);
  c->table = (uint32_t *)calloc(size, sizeof(uint32_t));
  if (!c->pgno || !c->img || !c->ref || !c->table) {
    rg_pgcache_free(c);
    return NULL;
  }
  for (i = 0; i < c->slots; i++) c->pgno[i] = RG_PG_INVALID;
  return c;
}

void rg_pgcache_free (rg_pgcache *c) {
  unsigned i;
  if (c == NULL) return;
  if (c->img) for (i = 0; i < c->slots; i++) free(c->img[i]);
  free(c->img);
  free(c->pgno);
  free(c->ref);
  free(c->table);
  free(c);
}

void rg_pgcache_clear (rg_pgcache *c) {
  unsigned i;
  if (c->count == 0) return;
  for (i = 0; i < c->slots; i++) c->pgno[i] = RG_PG_INVALID;
  memset(c->table, 0, (size_t)(c->mask + 1) * sizeof(uint32_t));
  c->count = 0;
}

const uint8_t *rg_pgcache_get (rg_pgcache *c, uint64_t pgno) {
  long i = find(c, pgno);
  unsigned s;
  if (i < 0) return NULL;
  s = c->table[i] - 1;
  c->ref[s] = 1;
  return c->img[s];
}

void rg_pgcache_put (rg_pgcache *c, uint64_t pgno, uint8_t **page) {
  long i = find(c, pgno);
  unsigned s;
  uint8_t *was;
  if (i >= 0) s = c->table[i] - 1;
  else {
    for (;;) {                         /* the clock: a second chance */
      s = c->hand;
      c->hand = (c->hand + 1) % c->slots;
      if (c->pgno[s] == RG_PG_INVALID) break;
      if (c->ref[s]) { c->ref[s] = 0; continue; }
      unlist(c, (unsigned)find(c, c->pgno[s]));
      c->count--;
      break;
    }
    c->pgno[s] = pgno;
    c->count++;
    for (i = home(c, pgno); c->table[i]; i = (i + 1) & c->mask) {}
    c->table[i] = s + 1;
  }
  was = c->img[s];
  c->img[s] = *page;
  *page = was;
  c->ref[s] = 1;
}

void rg_pgcache_drop (rg_pgcache *c, uint64_t pgno) {
  long i = find(c, pgno);
  if (i < 0) return;
  c->pgno[c->table[i] - 1] = RG_PG_INVALID;
  unlist(c, (unsigned)i);
  c->count--;
}

size_t rg_pgcache_count (const rg_pgcache *c) {
  return c->count;
}
/* }===================================================================== */
