/*
** pagewalk.c: every page of an LMDB 0.9 data file, walked from its newest
** meta page down, without LMDB (pagewalk.h says why; pages.h and
** pagecheck.h the format).
**
** The walk keeps two bits a page: reached (in use) and listed free.  A tree
** is walked from its root: its pages must be branches above its depth and
** leaves at it; each leaf node that names an overflow run, a table (a
** sub-database record in the main tree's leaves) or a set of duplicates
** (a sub-database) is followed; the free-page tree's values are lists of
** page numbers, each marked free.  Pages are read one at a time (an
** overflow run whole), so memory stays a few pages deep whatever the file.
*/

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/pagecheck.h"
#include "store/pages.h"
#include "store/pagewalk.h"
#include "store/preflight.h"

#define MAX_LINES   50
#define MAX_DEPTH   32                 /* LMDB's cursor stack */
#define DB_DUPSORT  0x04               /* md_flags: sorted duplicates */
#define DB_DUPFIXED 0x10               /* ... of a fixed size */
#define OVPAGES(n, ps) ((RG_PG_HDR - 1 + (n)) / (ps) + 1)

typedef struct walker {
  int fd;
  unsigned psize;
  uint64_t pages;
  uint8_t *used, *freed;               /* a bit per page */
  rg_walk *w;
  int stamp;                           /* stamp sums instead of checking */
  int sums;                            /* check the sums */
  uint64_t stamped;
  int failed;                          /* a write failed (errno) */
} walker;

static int bit (const uint8_t *b, uint64_t pg) { return b[pg / 8] >> (pg % 8) & 1; }
static void set_bit (uint8_t *b, uint64_t pg) { b[pg / 8] |= (uint8_t)(1u << (pg % 8)); }

static void problem (walker *k, uint64_t pg, const char *tree,
                     const char *what) {
  rg_walk *w = k->w;
  w->damaged++;
  if (w->damaged > MAX_LINES) return;
  rg_buf_addf(&w->report, "page %llu of data.mdb (%s): %s\n",
              (unsigned long long)pg, tree, what);
}

static int read_pages (walker *k, uint64_t pg, uint64_t n, uint8_t *buf) {
  size_t len = (size_t)(n * k->psize);
  return pread(k->fd, buf, len, (off_t)(pg * k->psize)) == (ssize_t)len ? 0 : -1;
}

/* Stamps the page (or run) in buf, read from page pg, and writes its
** header's pad and flags back. */
static void restamp (walker *k, uint64_t pg, uint8_t *buf, size_t n) {
  rg_page_stamp(buf, n);
  if (pwrite(k->fd, buf + 8, 4, (off_t)(pg * k->psize + 8)) != 4)
    k->failed = errno ? errno : EIO;
  else k->stamped++;
}

/* Is the sum of the page (run) in buf missing or wrong?  Counts those
** that hold. */
static int sum_off (walker *k, const uint8_t *buf, size_t n) {
  uint16_t flags = rg_le16(buf + RG_PG_FLAGS);
  if (flags & (RG_PG_META | RG_PG_LEAF2)) return 0;
  if (!rg_page_has_sum(buf)) return 1;
  if (rg_le16(buf + 8) != rg_page_sum(buf, n)) return 1;
  k->w->summed++;
  return 0;
}

/* What a tree's leaves may hold (LMDB trusts a node's flags to match its
** tree: a set of duplicates in a tree without them is a crash): */
enum { T_MAIN, T_FREE, T_PLAIN, T_DUPSORT, T_DUPS };

static void walk_tree (walker *k, const char *tree, uint64_t root,
                       unsigned depth, int dupfixed, int kind);

/* Marks the page numbers of a free list (an IDL: count, then the pages). */
static void free_list (walker *k, const char *tree, const uint8_t *v,
                       uint64_t n, uint64_t at) {
  uint64_t count, i;
  if (n < 8) { problem(k, at, tree, "a free list shorter than its count"); return; }
  count = rg_le64(v);
  if (count > (n - 8) / 8) {
    problem(k, at, tree, "a free list longer than its value");
    return;
  }
  for (i = 0; i < count; i++) {
    uint64_t pg = rg_le64(v + 8 + 8 * i);
    if (pg < 2 || pg >= k->pages) {
      problem(k, at, tree, "a free page number outside the file");
      return;
    }
    if (bit(k->freed, pg)) problem(k, pg, tree, "listed free twice");
    set_bit(k->freed, pg);
    k->w->free++;
  }
}

/* An overflow run holding a value of n bytes, from page pg. */
static void overflow (walker *k, const char *tree, uint64_t pg, uint64_t n,
                      int is_free) {
  uint64_t need = OVPAGES(n, k->psize), run, i;
  uint8_t *buf;
  const char *why;
  if (pg < 2 || pg + need > k->pages) {
    problem(k, pg, tree, "an overflow run outside the file");
    return;
  }
  for (i = 0; i < need; i++)
    if (bit(k->used, pg + i)) {
      problem(k, pg + i, tree, "reached twice (a loop, or pages shared)");
      return;
    }
  if ((buf = (uint8_t *)malloc((size_t)(need * k->psize))) == NULL) {
    problem(k, pg, tree, "out of memory reading an overflow run");
    return;
  }
  if (read_pages(k, pg, need, buf) != 0)
    problem(k, pg, tree, "cannot be read");
  else if ((why = rg_page_check(buf, pg, k->psize, k->pages, &run)) != NULL &&
           !(why == rg_page_badsum && !k->sums))
    problem(k, pg, tree, why);
  else if (!(rg_le16(buf + RG_PG_FLAGS) & RG_PG_OVERFLOW))
    problem(k, pg, tree, "a value's overflow page is not one");
  else if (run != need)
    problem(k, pg, tree, "an overflow run of another length than its value");
  else {
    for (i = 0; i < need; i++) set_bit(k->used, pg + i);
    k->w->used += need;
    if (sum_off(k, buf, (size_t)(need * k->psize))) {
      if (k->stamp) restamp(k, pg, buf, (size_t)(need * k->psize));
      else if (k->sums && rg_page_has_sum(buf))
        problem(k, pg, tree, rg_page_badsum);
    }
    if (is_free) free_list(k, tree, buf + RG_PG_HDR, n, pg);
  }
  free(buf);
}

/* The nodes of a leaf page (at p, psize bytes) of `tree`, of kind T_*. */
static void leaf_nodes (walker *k, const char *tree, uint64_t pg,
                        const uint8_t *p, int kind) {
  unsigned n = rg_node_count(p), i;
  for (i = 0; i < n; i++) {
    const uint8_t *nd = rg_node_at(p, i);
    uint16_t flags = rg_le16(nd + 4), ksize = rg_le16(nd + 6);
    uint64_t dsize = rg_node_dsize(nd);
    const uint8_t *data = nd + RG_NODE_HDR + ksize;
    int fits = kind == T_MAIN ? flags == RG_NODE_SUBDB
             : kind == T_DUPSORT ? !(flags & RG_NODE_BIG) &&
                                   !((flags & RG_NODE_SUBDB) &&
                                     !(flags & RG_NODE_DUP))
             : kind == T_DUPS ? flags == 0
             : !(flags & (RG_NODE_SUBDB | RG_NODE_DUP));
    if (!fits) {
      problem(k, pg, tree, "a node's kind does not fit its table");
      continue;
    }
    if (flags & RG_NODE_BIG) {
      overflow(k, tree, rg_le64(data), dsize, kind == T_FREE);
      continue;
    }
    if (flags & RG_NODE_SUBDB) {
      char name[96];
      uint16_t mflags = rg_le16(data + 4);
      int sub;
      if (kind == T_MAIN) {
        size_t m = ksize < sizeof(name) - 8 ? ksize : sizeof(name) - 8;
        memcpy(name, "table ", 6);
        memcpy(name + 6, nd + RG_NODE_HDR, m);
        name[6 + m] = '\0';
        sub = (mflags & DB_DUPSORT) ? T_DUPSORT : T_PLAIN;
      }
      else {
        snprintf(name, sizeof(name), "%s, duplicates", tree);
        sub = T_DUPS;
      }
      walk_tree(k, name, rg_le64(data + RG_DB_ROOT),
                rg_le16(data + RG_DB_DEPTH),
                (mflags & DB_DUPFIXED) ? (int)rg_le32(data + RG_DB_PAD) : 0,
                sub);
      continue;
    }
    if (kind == T_FREE) free_list(k, tree, data, dsize, pg);
  }
}

static void visit (walker *k, const char *tree, uint64_t pg, unsigned level,
                   unsigned depth, int dupfixed, int tkind) {
  uint8_t *p;
  uint64_t run;
  uint16_t flags, kind;
  const char *why;
  if (pg < 2 || pg >= k->pages) {
    problem(k, pg, tree, "a page number outside the file");
    return;
  }
  if (bit(k->used, pg)) {
    problem(k, pg, tree, "reached twice (a loop, or pages shared)");
    return;
  }
  set_bit(k->used, pg);
  k->w->used++;
  if ((p = (uint8_t *)malloc(k->psize)) == NULL) {
    problem(k, pg, tree, "out of memory");
    return;
  }
  if (read_pages(k, pg, 1, p) != 0) {
    problem(k, pg, tree, "cannot be read");
    goto done;
  }
  why = rg_page_check(p, pg, k->psize, k->pages, &run);
  if (why == rg_page_badsum && (k->stamp || !k->sums))  /* stale: stamped */
    why = rg_page_check_nosum(p, pg, k->psize, k->pages, &run);
  if (why) { problem(k, pg, tree, why); goto done; }
  flags = rg_le16(p + RG_PG_FLAGS);
  kind = flags & (RG_PG_BRANCH | RG_PG_LEAF | RG_PG_OVERFLOW | RG_PG_META |
                  RG_PG_LEAF2);
  if (level < depth ? kind != RG_PG_BRANCH
      : dupfixed ? kind != (RG_PG_LEAF | RG_PG_LEAF2) : kind != RG_PG_LEAF) {
    problem(k, pg, tree, level < depth ? "a branch page expected here"
                                       : "a leaf page expected here");
    goto done;
  }
  if (kind == (RG_PG_LEAF | RG_PG_LEAF2) && rg_le16(p + 8) != dupfixed) {
    problem(k, pg, tree, "its key size is not its table's");
    goto done;
  }
  if (sum_off(k, p, k->psize) && k->stamp) restamp(k, pg, p, k->psize);
  if (kind == RG_PG_BRANCH) {
    unsigned n = rg_node_count(p), i;
    if (level >= MAX_DEPTH) { problem(k, pg, tree, "a tree deeper than LMDB goes"); goto done; }
    for (i = 0; i < n && !k->failed; i++) {
      const uint8_t *nd = rg_node_at(p, i);
      uint64_t child = rg_node_child(nd);
      visit(k, tree, child, level + 1, depth, dupfixed, tkind);
    }
  }
  else if (kind == RG_PG_LEAF) leaf_nodes(k, tree, pg, p, tkind);
done:
  free(p);
}

static void walk_tree (walker *k, const char *tree, uint64_t root,
                       unsigned depth, int dupfixed, int kind) {
  if (root == RG_PG_INVALID) return;
  if (depth == 0 || depth > MAX_DEPTH) {
    problem(k, root, tree, "a tree of impossible depth");
    return;
  }
  if (dupfixed < 0 || dupfixed > RG_NODE_MAXKEY) {
    problem(k, root, tree, "a table of impossible duplicates");
    return;
  }
  visit(k, tree, root, 1, depth, dupfixed, kind);
}

static int walk (int fd, uint64_t txnid, rg_walk *w, int stamp, int sums,
                 walker *k) {
  struct stat st;
  rg_meta m[2];
  int best;
  uint64_t pg, infile;
  memset(k, 0, sizeof(*k));
  k->fd = fd;
  k->w = w;
  k->stamp = stamp;
  k->sums = sums;
  if (fstat(fd, &st) != 0 || (best = rg_meta_read(fd, (uint64_t)st.st_size, m)) < 0) {
    rg_buf_adds(&w->report, "data.mdb: its meta pages do not check out\n");
    w->damaged++;
    return -1;
  }
  if (txnid && m[1 - best].ok && m[1 - best].txnid == txnid) best = 1 - best;
  k->psize = m[best].psize;
  infile = (uint64_t)st.st_size / k->psize;
  k->pages = m[best].last_pg + 1;
  w->pages = k->pages;
  if (k->pages > infile) {
    rg_buf_addf(&w->report, "data.mdb is shorter than its last page, %llu\n",
                (unsigned long long)m[best].last_pg);
    w->damaged++;
    return -1;
  }
  k->used = (uint8_t *)calloc((size_t)(k->pages / 8 + 1), 1);
  k->freed = (uint8_t *)calloc((size_t)(k->pages / 8 + 1), 1);
  if (k->used == NULL || k->freed == NULL) {
    free(k->used);
    free(k->freed);
    rg_buf_adds(&w->report, "out of memory walking data.mdb\n");
    w->damaged++;
    return -1;
  }
  walk_tree(k, "free pages", m[best].root[0], m[best].depth[0], 0, T_FREE);
  walk_tree(k, "main", m[best].root[1], m[best].depth[1], 0, T_MAIN);
  for (pg = 2; pg < k->pages && !stamp; pg++)
    if (bit(k->used, pg) && bit(k->freed, pg))
      problem(k, pg, "free pages", "in use, and listed free");
  free(k->used);
  free(k->freed);
  return 0;
}

int rg_pages_walk (int fd, uint64_t txnid, int sums, rg_walk *w) {
  walker k;
  memset(w, 0, sizeof(*w));
  rg_buf_init(&w->report);
  return walk(fd, txnid, w, 0, sums, &k);
}

void rg_walk_free (rg_walk *w) {
  rg_buf_free(&w->report);
}

int rg_pages_stamp (int fd, uint64_t *n, rg_err *e) {
  rg_walk w;
  walker k;
  int rc;
  memset(&w, 0, sizeof(w));
  rg_buf_init(&w.report);
  rc = walk(fd, 0, &w, 1, 0, &k);
  *n = k.stamped;
  rg_buf_free(&w.report);
  if (k.failed)
    return rg_fail(e, rg_room_status(k.failed), "storage failure: "
                   "stamping checksums: %s", strerror(k.failed));
  if (rc == 0 && fdatasync(fd) != 0)
    return rg_fail(e, 500, "storage failure: stamping checksums: %s",
                   strerror(errno));
  return 0;
}
