/*
** pagecheck.c: is a page of an LMDB 0.9 data file what LMDB may follow?
** (pagecheck.h; the format is pages.h's.)
**
** LMDB reads its pages in place and trusts every offset, size and page
** number it finds in them.  A page passes here when following it cannot
** lead outside the page or the file: its header names its own number and a
** known kind; for a branch or leaf page, every node pointer, node header,
** key and value lies inside the page, every page number it holds (a child,
** an overflow run, a sub-database's root) lies inside the file, and every
** sub-page of sorted duplicates passes the same checks inside its node; an
** overflow run ends inside the file.  And its checksum holds, when it has
** one (pagecheck.h says where it is kept).
**
** What a single page cannot tell: whether a page number points at a page
** of the kind its parent expects, whether keys are in order.  The walk of
** db:verify (rg_pages_walk) checks those, from the roots down.
*/

#include <string.h>

#include "store/pagecheck.h"
#include "store/pages.h"

/* CRC-32C (Castagnoli) steps, by the SSE 4.2 instruction where there is
** one. */
static uint32_t crc_table[256];

static void crc_init (void) {
  uint32_t i, j, c;
  for (i = 0; i < 256; i++) {
    for (c = i, j = 0; j < 8; j++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc_byte (uint32_t c, const uint8_t *p, size_t n) {
  if (crc_table[1] == 0) crc_init();
  while (n--) c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
  return c;
}

/* The same as crc_hard computes, a byte at a time (where SSE 4.2 is
** missing): both must agree, a file being read on other machines. */
static uint32_t crc_soft (uint32_t c, const uint8_t *p, size_t n) {
  uint32_t a = c, b = ~c, d = c ^ 0x5bd1e995u, e = c ^ 0x1b873593u;
  uint8_t w[8];
  int i;
  for (; n >= 32; n -= 32, p += 32) {
    a = crc_byte(a, p, 8);
    b = crc_byte(b, p + 8, 8);
    d = crc_byte(d, p + 16, 8);
    e = crc_byte(e, p + 24, 8);
  }
  for (; n >= 8; n -= 8, p += 8) a = crc_byte(a, p, 8);
  c = crc_byte(a, p, n);
  for (i = 0; i < 8; i++) w[i] = (uint8_t)((uint64_t)c >> (8 * i));
  b = crc_byte(b, w, 8);
  for (i = 0; i < 8; i++) w[i] = (uint8_t)((uint64_t)b >> (8 * i));
  d = crc_byte(d, w, 8);
  for (i = 0; i < 8; i++) w[i] = (uint8_t)((uint64_t)d >> (8 * i));
  return crc_byte(e, w, 8);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Four CRCs over the words of four interleaved lanes, folded: the
** instruction's latency is hidden behind the other lanes (a page in about
** a quarter of the time one chain takes).  Not CRC-32C, a checksum as
** good for what it is for. */
__attribute__((target("sse4.2")))
static uint32_t crc_hard (uint32_t c, const uint8_t *p, size_t n) {
  uint64_t a = c, b = ~(uint64_t)c, d = c ^ 0x5bd1e995u, e = c ^ 0x1b873593u;
  uint64_t w0, w1, w2, w3;
  for (; n >= 32; n -= 32, p += 32) {
    memcpy(&w0, p, 8);
    memcpy(&w1, p + 8, 8);
    memcpy(&w2, p + 16, 8);
    memcpy(&w3, p + 24, 8);
    a = __builtin_ia32_crc32di(a, w0);
    b = __builtin_ia32_crc32di(b, w1);
    d = __builtin_ia32_crc32di(d, w2);
    e = __builtin_ia32_crc32di(e, w3);
  }
  for (; n >= 8; n -= 8, p += 8) {
    memcpy(&w0, p, 8);
    a = __builtin_ia32_crc32di(a, w0);
  }
  c = (uint32_t)a;
  for (; n; n--) c = __builtin_ia32_crc32qi(c, *p++);
  b = __builtin_ia32_crc32di(b, (uint64_t)c);
  d = __builtin_ia32_crc32di(d, b);
  return (uint32_t)__builtin_ia32_crc32di(e, d);
}

static int has_sse42 = -1;

static uint32_t crc32c (uint32_t c, const uint8_t *p, size_t n) {
  if (has_sse42 < 0) has_sse42 = __builtin_cpu_supports("sse4.2") != 0;
  return has_sse42 ? crc_hard(c, p, n) : crc_soft(c, p, n);
}
#else
static uint32_t crc32c (uint32_t c, const uint8_t *p, size_t n) {
  return crc_soft(c, p, n);
}
#endif

uint16_t rg_page_sum (const uint8_t *p, size_t n) {
  uint32_t c = crc32c(0xFFFFFFFFu, p, 8);          /* pgno */
  uint16_t s, flags = rg_le16(p + RG_PG_FLAGS), lower = rg_le16(p + 12),
           upper = rg_le16(p + 14);
  if ((flags & (RG_PG_BRANCH | RG_PG_LEAF)) && !(flags & RG_PG_OVERFLOW) &&
      lower >= RG_PG_HDR && lower <= upper && upper <= n) {
    /* not the free space between the pointers and the nodes, which
    ** holds whatever was there (the log does not keep it) */
    c = crc32c(c, p + 10, lower - 10u);
    c = crc32c(c, p + upper, n - upper);
  }
  else c = crc32c(c, p + 10, n - 10);               /* all but the pad */
  c = ~c;
  s = (uint16_t)(c ^ (c >> 16));
  return s ? s : 1;
}

int rg_page_has_sum (const uint8_t *p) {
  uint16_t flags = rg_le16(p + RG_PG_FLAGS);
  return (flags & RG_PG_SUMMED) && !(flags & (RG_PG_META | RG_PG_LEAF2));
}

void rg_page_stamp (uint8_t *p, size_t n) {
  uint16_t flags = rg_le16(p + RG_PG_FLAGS), s;
  if (flags & (RG_PG_META | RG_PG_LEAF2)) return;
  flags |= RG_PG_SUMMED;
  memcpy(p + RG_PG_FLAGS, &flags, 2);
  s = rg_page_sum(p, n);
  memcpy(p + 8, &s, 2);
}

/* The nodes of a branch or leaf page (or sub-page) of `size` bytes at p,
** whose page numbers must lie below `pages`.  `sub`: a sub-page (its nodes
** hold no sub-pages, sub-databases or overflow runs). */
static const char *nodes_ok (const uint8_t *p, size_t size, uint64_t pages,
                             int branch, int sub) {
  uint16_t lower = rg_le16(p + 12), upper = rg_le16(p + 14);
  unsigned n, i;
  if (lower < RG_PG_HDR || lower > upper || upper > size || (lower & 1))
    return "its free space bounds are impossible";
  n = (unsigned)(lower - RG_PG_HDR) >> 1;
  if (branch && n == 0) return "a branch page without children";
  for (i = 0; i < n; i++) {
    uint16_t at = rg_le16(p + RG_PG_HDR + 2 * i);
    const uint8_t *nd;
    uint16_t nflags, ksize;
    uint64_t dsize;
    if (at < upper || (size_t)at + RG_NODE_HDR > size)
      return "a node lies outside the page";
    nd = p + at;
    nflags = rg_le16(nd + 4);
    ksize = rg_le16(nd + 6);
    if ((size_t)at + RG_NODE_HDR + ksize > size)
      return "a key runs past the end of the page";
    if (ksize > RG_NODE_MAXKEY) return "a key is longer than LMDB allows";
    if (branch) {
      uint64_t pg = (uint64_t)rg_le16(nd) | (uint64_t)rg_le16(nd + 2) << 16 |
                    (uint64_t)nflags << 32;
      if (pg < 2 || pg >= pages) return "a child page number is outside the file";
      continue;
    }
    dsize = (uint64_t)rg_le16(nd) | (uint64_t)rg_le16(nd + 2) << 16;
    if (nflags & ~(RG_NODE_BIG | RG_NODE_SUBDB | RG_NODE_DUP))
      return "a node has unknown flags";
    if (nflags & RG_NODE_BIG) {
      uint64_t pg;
      if (sub) return "a sub-page node points to an overflow run";
      if ((size_t)at + RG_NODE_HDR + ksize + 8 > size)
        return "an overflow page number runs past the page";
      pg = rg_le64(nd + RG_NODE_HDR + ksize);
      if (pg < 2 || pg >= pages) return "an overflow page number is outside the file";
      continue;
    }
    if ((size_t)at + RG_NODE_HDR + ksize + dsize > size)
      return "a value runs past the end of the page";
    if (nflags & RG_NODE_SUBDB) {
      uint64_t root;
      if (sub || dsize != RG_META_DB) return "a sub-database record has the wrong size";
      root = rg_le64(nd + RG_NODE_HDR + ksize + RG_DB_ROOT);
      if (root != RG_PG_INVALID && (root < 2 || root >= pages))
        return "a sub-database root is outside the file";
    }
    else if (nflags & RG_NODE_DUP) {
      const uint8_t *sp = nd + RG_NODE_HDR + ksize;
      uint16_t sflags;
      const char *why;
      if (sub) return "a sub-page holds a sub-page";
      if (dsize < RG_PG_HDR) return "a sub-page is shorter than its header";
      sflags = rg_le16(sp + RG_PG_FLAGS);
      if (!(sflags & RG_PG_LEAF)) return "a sub-page is not a leaf";
      if (sflags & RG_PG_LEAF2) {
        uint16_t ks = rg_le16(sp + 8), lo = rg_le16(sp + 12),
                 up = rg_le16(sp + 14);
        if (ks == 0 || lo < RG_PG_HDR || lo > up || up > dsize ||
            RG_PG_HDR + (size_t)((lo - RG_PG_HDR) >> 1) * ks > dsize)
          return "a sub-page of fixed-size keys is impossible";
      }
      else if ((why = nodes_ok(sp, (size_t)dsize, pages, 0, 1)) != NULL)
        return why;
    }
  }
  return NULL;
}

const char rg_page_badsum[] = "its checksum does not hold";

static const char *check (const uint8_t *p, uint64_t pgno, unsigned psize,
                          uint64_t pages, uint64_t *run, int sums) {
  uint16_t flags = rg_le16(p + RG_PG_FLAGS);
  *run = 1;
  if (rg_le64(p) != pgno) return "it names another page number";
  switch (flags & ~(RG_PG_SUBP | RG_PG_SUMMED)) {
    case RG_PG_META:
      return pgno < 2 ? NULL : "a meta page past the first two";
    case RG_PG_OVERFLOW: {
      uint32_t n = rg_le32(p + 12);
      if (n == 0 || pgno + n > pages) return "its overflow run ends outside the file";
      *run = n;
      return NULL;                   /* the run's sum is checked by the caller */
    }
    case RG_PG_BRANCH:
      break;
    case RG_PG_LEAF:
      break;
    case RG_PG_LEAF | RG_PG_LEAF2: {
      uint16_t ks = rg_le16(p + 8), lower = rg_le16(p + 12),
               upper = rg_le16(p + 14);
      if (ks == 0 || lower < RG_PG_HDR || lower > upper || upper > psize ||
          RG_PG_HDR + (size_t)((lower - RG_PG_HDR) >> 1) * ks > psize)
        return "its fixed-size keys are impossible";
      return NULL;
    }
    default:
      return "it is of no known kind";
  }
  if (flags & RG_PG_SUBP) return "a sub-page stands as a page";
  if (sums && rg_page_has_sum(p) && rg_le16(p + 8) != rg_page_sum(p, psize))
    return rg_page_badsum;
  return nodes_ok(p, psize, pages, (flags & RG_PG_BRANCH) != 0, 0);
}

const char *rg_page_check (const uint8_t *p, uint64_t pgno, unsigned psize,
                           uint64_t pages, uint64_t *run) {
  return check(p, pgno, psize, pages, run, 1);
}

const char *rg_page_check_nosum (const uint8_t *p, uint64_t pgno,
                                 unsigned psize, uint64_t pages,
                                 uint64_t *run) {
  return check(p, pgno, psize, pages, run, 0);
}
