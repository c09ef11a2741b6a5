/*
** pagedelta.h: a page of an LMDB 0.9 data file as the changes from an
** earlier page, so that the write-ahead log need not carry it whole
** (store/pagedelta.c; wal.h says when the log uses one).
**
** LMDB never writes a page of the tree a commit started from: it copies it
** to a free page and changes the copy (a branch's child pointer, a leaf's
** new node and its pointer array, the header).  A delta of page P from
** source S is P's bytes as ranges (offset u16 | length u16 | bytes) over
** S: applied to S it makes P exactly, on the page's used parts.  Only
** branch and leaf pages take part (not pages of fixed-size keys, overflow
** or meta pages), each compared with its unused middle, between its
** pointers and its nodes, as zeros (rg_pdelta_trim): the log never keeps
** that middle, so a source read back from the data file has it zeroed too
** before a delta is applied.
**
** Pairing: which page of the tree a commit started from is the source of
** which page of its new tree.  rg_pdelta_pair walks both trees from their
** roots at once, down through pages of the new one that the commit wrote,
** each child paired with the child under the same key in the old page,
** and into sub-databases (the tables in the main tree, sorted-duplicate
** sets in a table) the same way.  A pairing is only a guess at the
** smallest delta: whether a source may be used, and that the delta makes
** the page, are the caller's to make sure of.
**
** The page cache (rg_pgcache): page images by number, at most `bytes` of
** them; putting a page to a full cache drops the one used longest ago
** (a clock's second chance).
*/

#ifndef rg_pagedelta_h
#define rg_pagedelta_h

#include <stddef.h>
#include <stdint.h>

/* 1 when the page at p (psize bytes) is a branch or leaf page with
** pointer-array bounds that hold (a delta may be made of it), its used
** parts then [0, *lower) and [*upper, psize); else 0. */
int    rg_pdelta_usable (const uint8_t *p, unsigned psize, unsigned *lower,
                         unsigned *upper);
/* Zeros the unused middle of a usable page. */
void   rg_pdelta_trim (uint8_t *p, unsigned psize);
/* The delta of page p from source s (both usable and trimmed, psize
** bytes) into out; its length, or 0 when it would be `limit` bytes or more
** (out holds at least limit bytes). */
size_t rg_pdelta_encode (const uint8_t *s, const uint8_t *p, unsigned psize,
                         uint8_t *out, size_t limit);
/* out (psize bytes) = source s with the delta d of n bytes applied: 0, or
** -1 when the delta does not fit the page (damage). */
int    rg_pdelta_apply (const uint8_t *s, const uint8_t *d, size_t n,
                        unsigned psize, uint8_t *out);
/* The 64-bit sum of a usable, trimmed page (psize bytes) that a delta
** carries with it. */
uint64_t rg_pdelta_sum (const uint8_t *p, unsigned psize);
/* out = source s with the delta d of n bytes applied, when that makes
** page `pgno` whose sum is `sum`: 0, else -1 (a wrong source, or damage:
** a 16-bit page checksum would let one wrong page in 65,536 through). */
int    rg_pdelta_make (const uint8_t *s, const uint8_t *d, size_t n,
                       unsigned psize, uint64_t pgno, uint64_t sum,
                       uint8_t *out);

/* A page by its number, or NULL when it is not known (rg_pdelta_pair's
** lookups: the new tree's pages, the old tree's). */
typedef const uint8_t *(*rg_pdelta_page) (void *ud, uint64_t pgno);
/* 0 the first time pgno is found, else nonzero: the walk then does not
** descend pgno again, so a page reached twice (a damaged tree that points
** back at itself) costs one call, and a walk at most nodes x pages. */
typedef int (*rg_pdelta_found) (void *ud, uint64_t pgno, uint64_t source);
/* Pairs the pages of the tree at `root` that `fresh` knows with those of
** the tree at `old` that `known` knows (found(ud, page, source) for each,
** the roots first), and those of the sub-databases their leaves name;
** each page of the new tree is descended once at most. */
void   rg_pdelta_pair (uint64_t root, uint64_t old, unsigned psize,
                       rg_pdelta_page fresh, rg_pdelta_page known,
                       rg_pdelta_found found, void *ud);

/* The first slot of page pgno in an open-addressed table of mask + 1
** slots (a power of two): the page cache's, and the log's table of a
** commit's pages. */
unsigned rg_pgno_home (uint64_t pgno, unsigned mask);

typedef struct rg_pgcache rg_pgcache;
/* NULL when out of memory. */
rg_pgcache     *rg_pgcache_new (unsigned psize, size_t bytes);
void           rg_pgcache_free (rg_pgcache *c);
void           rg_pgcache_clear (rg_pgcache *c);
const uint8_t *rg_pgcache_get (rg_pgcache *c, uint64_t pgno);
/* The image of page pgno is *page (psize bytes, malloc'ed): the cache
** takes it, and gives back in *page a buffer of the same size to reuse. */
void           rg_pgcache_put (rg_pgcache *c, uint64_t pgno, uint8_t **page);
void           rg_pgcache_drop (rg_pgcache *c, uint64_t pgno);
size_t         rg_pgcache_count (const rg_pgcache *c);

#endif
