/*
** guard.h: LMDB's map, guarded: a page is checked the first time LMDB
** touches it, and a damaged one is an error, never a signal (store/
** guard.c; docs/guarantees.md, A damaged file).
**
** LMDB 0.9 reads its pages in place through a read-only map of the data
** file and follows every offset and page number it finds.  A damaged page
** would send it outside the page or the map (SIGSEGV), past the end of the
** file (SIGBUS), or make it copy a node of impossible size into a page it
** writes (a heap overflow, silent).  So the map is made inaccessible, and
** the first access to a page faults: the fault handler checks the page
** (pagecheck.h) as a second map of the file (the shadow) shows it and,
** when it passes, makes it readable (an overflow run whole, and the pages
** around it in its cluster of 16 that pass their checks too) and lets the
** access go on; the page is never checked again.  When
** it does not pass, the LMDB call that touched it is abandoned: every call
** into LMDB runs inside RG_GUARDED, which returns RG_GUARD_DAMAGED instead
** of the call's own result, and the caller aborts its transaction (LMDB's
** own state for it is then garbage; nothing else is).  A fault in the map
** outside a guarded call (none is expected) lets the page be read as it is.
** A page is readable only once it passed: no other thread reads it before.
**
** Costs: a fault, the checks of a cluster and an mprotect the first time a
** process touches a cluster of pages (about 15 us); nothing after, so reads
** run as before.  Each readable
** island of pages is one kernel mapping; past vm.max_map_count (65,530)
** an mprotect fails and the guard opens the whole map (and says so once
** on stderr), as it does when the handlers cannot be installed.
**
** Signals.  The handlers for SIGSEGV and SIGBUS are installed once per
** process (SA_NODEFER, so that leaving a handler by longjmp needs no mask
** restored); a fault that is not in a guarded map goes to the handler
** that was there before (a sanitizer's, the default: the process dies as
** it would have).  Frames are per thread.
*/

#ifndef rg_guard_h
#define rg_guard_h

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rg_guard rg_guard;

#define RG_GUARD_DAMAGED (-30790)      /* a damaged page was touched */

/* One guarded call in progress (a thread's innermost is rg_guard_top). */
typedef struct rg_gframe {
  sigjmp_buf jb;
  struct rg_gframe *prev;
  uint64_t pgno;                       /* the damaged page */
  const char *why;
} rg_gframe;

extern __thread rg_gframe *rg_guard_top;
/* What the last damaged page of this thread was, and why. */
extern __thread uint64_t rg_guard_pgno;
extern __thread const char *rg_guard_why;

/* Guards the map of the data file open at fd (pages of psize bytes; the
** map is found in /proc/self/maps: LMDB does not tell where it is), with
** the pages' checksums checked unless `sums` is 0: NULL
** when it cannot (the map stays as LMDB made it).  rg_guard_remap after
** LMDB mapped it again (a larger map), rg_guard_close before it unmaps
** it. */
rg_guard *rg_guard_open (int fd, unsigned psize, int sums);
void      rg_guard_remap (rg_guard *g);
/* LMDB of this process wrote n bytes of pages at off of the data file
** open at fd: they are whole (they are what it had in memory), and open
** without a check, so that new pages cost no fault. */
void      rg_guard_written (int fd, uint64_t off, size_t n);
/* A value LMDB gave (n bytes at p): when it lies in a guarded map and is
** longer than a page, the overflow run before it holds it all (a node's
** size is not checked against its run when the page is).  0, or -1 with
** rg_guard_pgno and rg_guard_why set. */
int       rg_guard_value (const void *p, size_t n);
/* LMDB's own check of its state failed (its assert callback, before it
** would abort the process): inside a guarded call, the call ends as on a
** damaged page; outside one, returns (and LMDB aborts). */
void      rg_guard_fail (const char *what);
/* Whether the page of the map that holds p (a value LMDB gave) carries a
** checksum that holds, or none: 1; 0 when its checksum fails; -1 when p is
** not in the map. */
int       rg_guard_sum_holds (rg_guard *g, const void *p);
/* Has the map met a damaged page? */
int       rg_guard_met (const rg_guard *g);
/* Turns the checking of the pages' checksums on or off; turned on, the
** pages checked before without them are closed again, to be checked with
** them when next touched. */
void      rg_guard_sums (rg_guard *g, int on);
void      rg_guard_close (rg_guard *g);

/* Checks, on a live read transaction of id txnid with numdbs tables open,
** that MDB_txn is laid out as guard.c reads it (LMDB 0.9): 1, or 0 (no
** map is guarded then). */
int  rg_guard_layout (void *rtxn, uint64_t txnid, unsigned numdbs);
/* After a write call left by longjmp: unlinks from the transaction the
** cursors LMDB had linked on the stack below `frame`, so that it can be
** aborted. */
void rg_guard_untrack (void *txn, const void *frame);

/* rc = call, or RG_GUARD_DAMAGED when the call touched a damaged page. */
#define RG_GUARDED(rc, call) do { \
    rg_gframe rg_f_; \
    rg_f_.prev = rg_guard_top; \
    rg_guard_top = &rg_f_; \
    rg_guard_why = NULL; \
    if (sigsetjmp(rg_f_.jb, 0) == 0) { (rc) = (call); } \
    else { (rc) = RG_GUARD_DAMAGED; rg_guard_pgno = rg_f_.pgno; \
           rg_guard_why = rg_f_.why; } \
    rg_guard_top = rg_f_.prev; \
  } while (0)

#endif
