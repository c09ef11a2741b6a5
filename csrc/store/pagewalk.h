/*
** pagewalk.h: every page of an LMDB 0.9 data file, walked from its newest
** meta page down, without LMDB (store/pagewalk.c).
**
** db:verify walks the file this way before it asks LMDB anything, so that
** a file however damaged is reported, never followed into a crash: each
** page is read with pread and checked (pagecheck.h), and in its context:
** a tree's pages are branches down to the tree's depth and leaves there,
** an overflow run is as long as its value needs, no page is reached twice
** (a loop), and no page is both in use and free.  The walk also stamps
** checksums (rg_pages_stamp): into a copy made without them (a backup),
** or over pages another LMDB program rewrote (their sums went stale).
*/

#ifndef rg_pagewalk_h
#define rg_pagewalk_h

#include <stdint.h>

#include "base/support.h"

typedef struct rg_walk {
  uint64_t pages;              /* pages the newest meta page says the file has */
  uint64_t used, free, summed; /* reached from a root; listed free; with sums */
  uint64_t damaged;            /* problems found */
  rg_buf report;               /* one line each (the first 50) */
} rg_walk;

/* Walks the data file open at fd, from the meta page of transaction
** txnid (0: the newest; a live read transaction's keeps its pages from
** being reused meanwhile), checking the pages' checksums when `sums`;
** 0, or -1 when it cannot be read at all (w->report says why).
** rg_walk_free after. */
int  rg_pages_walk (int fd, uint64_t txnid, int sums, rg_walk *w);
void rg_walk_free (rg_walk *w);
/* Stamps a checksum into every page in use that passes its checks and has
** none or a stale one (the file open read-write at fd, by no writer); the
** pages stamped in *n.  0, or a status. */
int  rg_pages_stamp (int fd, uint64_t *n, rg_err *e);

#endif
