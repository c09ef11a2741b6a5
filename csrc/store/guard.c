/*
** guard.c: LMDB's map, guarded (guard.h says what and why).
**
** A guard keeps a bit per page of the map: set once the page was checked
** and made readable.  The handler finds the guard of a faulting address in
** a small table of guarded maps that it reads without a lock (entries are
** published with release stores and never freed while in the table).
*/

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "store/guard.h"
#include "store/pagecheck.h"
#include "store/pages.h"

#define MAX_GUARDS 64
#define CLUSTER    16                  /* pages opened together, at most */

struct rg_guard {
  struct rg_guard *retired;            /* closed guards, kept (see close) */
  uint8_t *volatile map;
  volatile size_t mapsize;
  int fd;
  unsigned psize;
  const uint8_t *volatile shadow;      /* the file mapped again, to check */
  size_t shadowsize;
  uint8_t *volatile seen;              /* a bit per page: checked, readable */
  size_t nseen;                        /* bytes of `seen` */
  volatile int off;                    /* opened whole: no more checks */
  int sums;                            /* check the pages' checksums */
  volatile int met;                    /* a damaged page was met */
};

__thread rg_gframe *rg_guard_top;
__thread uint64_t rg_guard_pgno;
__thread const char *rg_guard_why;

static rg_guard *volatile guards[MAX_GUARDS];
static volatile int nslots;            /* guards[] used up to here */
static rg_guard *retired;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction old_segv, old_bus;
static int installed;                  /* 1 installed, -1 impossible */
static int layout;

static void on_fault (int sig, siginfo_t *si, void *ctx);

static int install (void) {
  struct sigaction sa;
  if (installed) return installed > 0;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &old_segv) != 0 ||
      sigaction(SIGBUS, &sa, &old_bus) != 0) {
    installed = -1;
    return 0;
  }
  installed = 1;
  return 1;
}

/* Opens the whole map: the guard gives up (too many mappings). */
static void give_up (rg_guard *g, const char *why) {
  static const char msg[] = "regolith: the guard of a database map is off: ";
  if (g->off) return;
  g->off = 1;
  mprotect(g->map, g->mapsize, PROT_READ);
  if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, why, strlen(why)) < 0 ||
      write(2, "\n", 1) < 0) {}
}

static int seen (const rg_guard *g, uint64_t pg) {
  return pg / 8 < g->nseen && (g->seen[pg / 8] >> (pg % 8) & 1);
}

static void mark (rg_guard *g, uint64_t pg, uint64_t n) {
  for (; n--; pg++)
    if (pg / 8 < g->nseen)
      __atomic_or_fetch(&g->seen[pg / 8], (uint8_t)(1u << (pg % 8)),
                        __ATOMIC_RELAXED);
}

/* Pages the file may hold: as far as the newest meta page's last page, and
** no further than the file goes.  Looked at for every check: another
** process's commits make the file and its trees longer (a count kept from
** an earlier check took their new pages for pages past the end). */
static uint64_t file_pages (rg_guard *g) {
  struct stat st;
  uint64_t inmeta = 0, infile, last;
  int i;
  for (i = 0; i < 2; i++) {
    const uint8_t *m = g->map + (size_t)i * g->psize + RG_PG_HDR;
    if (rg_le32(m + RG_META_MAGIC) != RG_MDB_MAGIC) continue;
    last = rg_le64(m + RG_META_LASTPG) + 1;
    if (last > inmeta) inmeta = last;
  }
  infile = fstat(g->fd, &st) == 0 ? (uint64_t)st.st_size / g->psize : 0;
  if (infile > g->mapsize / g->psize) infile = g->mapsize / g->psize;
  return inmeta && inmeta < infile ? inmeta : infile;
}

/* Leaves the guarded call that touched a damaged page.  Outside one, lets
** the page be read as it is (returns 1), or, past the end of the file,
** returns 0: the fault goes to the handler that was there before. */
static int damaged (rg_guard *g, uint64_t pg, uint64_t n, const char *why,
                    int readable) {
  rg_gframe *f = rg_guard_top;
  g->met = 1;
  if (f) {
    f->pgno = pg;
    f->why = why;
    siglongjmp(f->jb, 1);
  }
  if (!readable) return 0;
  if (mprotect(g->map + pg * g->psize, n * g->psize, PROT_READ) != 0)
    give_up(g, "a page cannot be opened");
  return 1;
}

/* Whether page q (as the shadow shows it) may be followed: NULL, or what
** is wrong with it; *run, the pages it spans. */
static const char *check_one (rg_guard *g, uint64_t q, uint64_t pages,
                              uint64_t *run) {
  const uint8_t *p = g->shadow + q * g->psize;
  const char *why = rg_page_check(p, q, g->psize, pages, run);
  if (why == rg_page_badsum && !g->sums)
    why = rg_page_check_nosum(p, q, g->psize, pages, run);
  if (why == NULL && (rg_le16(p + RG_PG_FLAGS) & RG_PG_OVERFLOW) &&
      g->sums && rg_page_has_sum(p) &&
      rg_le16(p + 8) != rg_page_sum(p, *run * g->psize))
    why = rg_page_badsum;
  return why;
}

/* The first touch of page pg: check it and open it (or its run), with
** the pages around it in its cluster that pass their checks too (one
** fault and one mprotect for them all, and the kernel maps them together:
** a page that does not pass, such as the middle of an overflow run, stays
** closed and is checked when it is touched).  0 when the fault is not the
** guard's to handle. */
static int check (rg_guard *g, uint64_t pg) {
  uint64_t pages = file_pages(g), run, lo, hi, b0, b1;
  const char *why;
  if (pg >= pages)
    return damaged(g, pg, 1, "it lies past the end of the file", 0);
  why = check_one(g, pg, pages, &run);
  if (why) return damaged(g, pg, run, why, 1);
  b0 = pg & ~(uint64_t)(CLUSTER - 1);
  b1 = b0 + CLUSTER < pages ? b0 + CLUSTER : pages;
  lo = pg;
  hi = pg + run;
  while (hi < b1 && !seen(g, hi) && check_one(g, hi, pages, &run) == NULL &&
         hi + run <= b1)
    hi += run;
  while (lo > b0 && lo > 2 && !seen(g, lo - 1) &&
         check_one(g, lo - 1, pages, &run) == NULL && run == 1)
    lo--;
  if (mprotect(g->map + lo * g->psize, (hi - lo) * g->psize, PROT_READ) != 0)
    give_up(g, "a page cannot be opened (too many mappings?)");
  else mark(g, lo, hi - lo);
  return 1;
}

static void chain (int sig, siginfo_t *si, void *ctx) {
  struct sigaction *o = sig == SIGBUS ? &old_bus : &old_segv;
  if ((o->sa_flags & SA_SIGINFO) && o->sa_sigaction) {
    o->sa_sigaction(sig, si, ctx);
    return;
  }
  if (o->sa_handler == SIG_DFL || o->sa_handler == SIG_IGN) {
    signal(sig, SIG_DFL);            /* the fault comes again: as before */
    return;
  }
  o->sa_handler(sig);
}

static void on_fault (int sig, siginfo_t *si, void *ctx) {
  uintptr_t a = (uintptr_t)si->si_addr;
  int i, top = nslots;
  for (i = 0; i < top; i++) {
    rg_guard *g = __atomic_load_n(&guards[i], __ATOMIC_ACQUIRE);
    uintptr_t lo;
    uint64_t pg;
    if (g == NULL || g->off) continue;
    lo = (uintptr_t)g->shadow;
    if (lo && a >= lo && a < lo + g->mapsize) {   /* a check read past the */
      damaged(g, (a - lo) / g->psize, 1,          /* end of the file */
              "it lies past the end of the file", 0);
      break;
    }
    lo = (uintptr_t)g->map;
    if (a < lo || a >= lo + g->mapsize) continue;
    pg = (a - lo) / g->psize;
    if (sig == SIGBUS) {               /* the file is shorter than that */
      damaged(g, pg, 1, "it lies past the end of the file", 0);
      break;
    }
    if (seen(g, pg)) break;            /* not ours: a write, or worse */
    if (check(g, pg)) return;
    break;
  }
  chain(sig, si, ctx);
}

/* Makes the map inaccessible but for the meta pages, which LMDB reads
** through pointers of its own at every transaction's start. */
static int protect (rg_guard *g) {
  size_t meta = 2 * (size_t)g->psize;
  if (g->mapsize <= meta) return 0;
  return mprotect(g->map + meta, g->mapsize - meta, PROT_NONE);
}

/* (Re)makes the shadow: the file mapped a second time, read by the checks
** (the guarded map stays closed until a page passed).  LMDB changes its
** map only with no transaction of the process live: no check runs. */
static int set_map (rg_guard *g, void *map, size_t mapsize) {
  size_t need = (mapsize / g->psize + 7) / 8;
  uint8_t *s = g->seen;
  void *sh = mmap(NULL, mapsize, PROT_READ, MAP_SHARED, g->fd, 0);
  if (sh == MAP_FAILED) return -1;
  if (need > g->nseen) {
    s = (uint8_t *)calloc(need, 1);
    if (s == NULL) { munmap(sh, mapsize); return -1; }
  }
  else memset(s, 0, g->nseen);
  g->mapsize = 0;                      /* the handler skips it meanwhile */
  if (g->shadow) munmap((void *)g->shadow, g->shadowsize);
  g->shadow = (const uint8_t *)sh;
  g->shadowsize = mapsize;
  if (s != g->seen) {
    uint8_t *old = g->seen;
    g->seen = s;
    g->nseen = need;
    free(old);
  }
  mark(g, 0, 2);
  g->map = (uint8_t *)map;
  g->mapsize = mapsize;
  return 0;
}

/* Is a mapping at lo one of the guards' shadows? */
static int a_shadow (unsigned long lo) {
  int i;
  for (i = 0; i < nslots; i++)
    if (guards[i] && (unsigned long)guards[i]->shadow == lo) return 1;
  return 0;
}

/* Where the file open at fd is mapped (LMDB does not say): its mapping in
** /proc/self/maps, found by device and inode, not a shadow.  0, or -1 when
** none.  Under mu. */
static int find_map (int fd, void **map, size_t *size) {
  struct stat st;
  char line[512];
  FILE *f;
  int found = -1;
  if (fstat(fd, &st) != 0 || (f = fopen("/proc/self/maps", "re")) == NULL)
    return -1;
  while (found < 0 && fgets(line, sizeof(line), f)) {
    unsigned long lo, hi, off, ino;
    unsigned maj, mnr;
    if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off, &maj, &mnr,
               &ino) == 6 &&
        ino == (unsigned long)st.st_ino && off == 0 &&
        makedev(maj, mnr) == st.st_dev && !a_shadow(lo)) {
      *map = (void *)lo;
      *size = hi - lo;
      found = 0;
    }
  }
  fclose(f);
  return found;
}

void rg_guard_written (int fd, uint64_t off, size_t n) {
  int i, top = nslots;
  for (i = 0; i < top; i++) {
    rg_guard *g = __atomic_load_n(&guards[i], __ATOMIC_ACQUIRE);
    uint64_t pg, last, k;
    if (g == NULL || g->fd != fd || g->off || n == 0) continue;
    pg = off / g->psize;
    last = (off + n - 1) / g->psize;
    if ((last + 1) * g->psize > g->mapsize) return;  /* past the map */
    for (k = pg; k <= last && seen(g, k); k++) {}
    if (k > last) return;                             /* open already */
    if (mprotect(g->map + pg * g->psize, (last - pg + 1) * g->psize,
                 PROT_READ) != 0)
      give_up(g, "a page cannot be opened (too many mappings?)");
    else mark(g, pg, last - pg + 1);
    return;
  }
}

int rg_guard_value (const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  int i, top = nslots;
  for (i = 0; i < top; i++) {
    rg_guard *g = __atomic_load_n(&guards[i], __ATOMIC_ACQUIRE);
    const uint8_t *head;
    uintptr_t lo;
    if (g == NULL || g->off) continue;
    lo = (uintptr_t)g->map;
    if (a < lo || a >= lo + g->mapsize) continue;
    if (n <= g->psize - RG_PG_HDR) return 0;        /* inside its page */
    head = (const uint8_t *)p - RG_PG_HDR;          /* an overflow run's */
    if (((uintptr_t)head - lo) % g->psize != 0 ||
        !(rg_le16(head + RG_PG_FLAGS) & RG_PG_OVERFLOW) ||
        (uint64_t)rg_le32(head + 12) * g->psize - RG_PG_HDR < n) {
      rg_guard_pgno = ((uintptr_t)head - lo) / g->psize;
      rg_guard_why = "a value is longer than its overflow run";
      g->met = 1;
      return -1;
    }
    return 0;
  }
  return 0;                            /* not in a map: LMDB's own memory */
}

void rg_guard_fail (const char *what) {
  static __thread char msg[240];
  rg_gframe *f = rg_guard_top;
  if (f == NULL) return;               /* LMDB aborts, as it would have */
  snprintf(msg, sizeof(msg), "LMDB found it inconsistent (%s)", what);
  f->pgno = 0;
  f->why = msg;
  siglongjmp(f->jb, 1);
}

int rg_guard_sum_holds (rg_guard *g, const void *p) {
  uintptr_t a = (uintptr_t)p, lo;
  uint64_t pg, run;
  int holds = -1;
  if (g == NULL) return -1;
  pthread_mutex_lock(&mu);
  lo = (uintptr_t)g->map;
  if (g->shadow && a >= lo && a < lo + g->mapsize) {
    pg = (a - lo) / g->psize;
    holds = rg_page_check(g->shadow + pg * g->psize, pg, g->psize,
                          file_pages(g), &run) != rg_page_badsum;
  }
  pthread_mutex_unlock(&mu);
  return holds;
}

int rg_guard_met (const rg_guard *g) {
  return g != NULL && g->met;
}

void rg_guard_sums (rg_guard *g, int on) {
  int was;
  if (g == NULL) return;
  pthread_mutex_lock(&mu);
  was = g->sums;
  g->sums = on;
  /* the pages opened before were checked without their checksums (the
  ** open reads the tables of names before it knows whether the sums are
  ** to be trusted): closed again, each is checked with its sum when it is
  ** next touched */
  if (on && !was && !g->off) {
    memset(g->seen, 0, g->nseen);
    mark(g, 0, 2);                   /* the meta pages stay open */
    if (protect(g) != 0) give_up(g, "the map cannot be guarded again");
  }
  pthread_mutex_unlock(&mu);
}

rg_guard *rg_guard_open (int fd, unsigned psize, int sums) {
  rg_guard *g;
  void *map;
  size_t mapsize;
  int i;
  if (layout != 1 || getenv("REGOLITH_NO_GUARD") || psize == 0 ||
      psize % (unsigned)sysconf(_SC_PAGESIZE) != 0)
    return NULL;
  if ((g = (rg_guard *)calloc(1, sizeof(rg_guard))) == NULL) return NULL;
  g->fd = fd;
  g->psize = psize;
  g->sums = sums;
  pthread_mutex_lock(&mu);
  if (!install() || find_map(fd, &map, &mapsize) != 0 ||
      (uintptr_t)map % (uintptr_t)sysconf(_SC_PAGESIZE) != 0 ||
      set_map(g, map, mapsize) != 0) {
    pthread_mutex_unlock(&mu);
    free(g);
    return NULL;
  }
  for (i = 0; i < MAX_GUARDS; i++)
    if (guards[i] == NULL) break;
  if (i == MAX_GUARDS || protect(g) != 0) {
    pthread_mutex_unlock(&mu);
    munmap((void *)g->shadow, g->shadowsize);
    free(g->seen);
    free(g);
    return NULL;
  }
  __atomic_store_n(&guards[i], g, __ATOMIC_RELEASE);
  if (i >= nslots) nslots = i + 1;
  pthread_mutex_unlock(&mu);
  return g;
}

void rg_guard_remap (rg_guard *g) {
  void *map;
  size_t mapsize;
  if (g == NULL) return;
  pthread_mutex_lock(&mu);
  if (find_map(g->fd, &map, &mapsize) != 0 || set_map(g, map, mapsize) != 0 ||
      (!g->off && protect(g) != 0))
    give_up(g, "the map cannot be guarded again");
  pthread_mutex_unlock(&mu);
}

void rg_guard_close (rg_guard *g) {
  int i;
  if (g == NULL) return;
  pthread_mutex_lock(&mu);
  for (i = 0; i < MAX_GUARDS; i++)
    if (guards[i] == g) __atomic_store_n(&guards[i], NULL, __ATOMIC_RELEASE);
  if (!g->off) mprotect(g->map, g->mapsize, PROT_READ);
  g->off = 1;
  /* a handler of another thread may have found it in the table just
  ** before: it is kept (its bitmap is not: no fault of this map can come
  ** once LMDB is done with it, which it is before it unmaps the file) */
  free(g->seen);
  g->seen = NULL;
  g->nseen = 0;
  if (g->shadow) munmap((void *)g->shadow, g->shadowsize);
  g->shadow = NULL;
  g->retired = retired;
  retired = g;
  pthread_mutex_unlock(&mu);
}

/* The library unloaded (the interpreter closing its state unloads it after
** every database was closed): the closed guards are freed, and the
** handlers, which would point into unmapped code, are put back when no
** guard is open. */
__attribute__((destructor)) static void unload (void) {
  rg_guard *g;
  int i, open = 0;
  pthread_mutex_lock(&mu);
  for (i = 0; i < MAX_GUARDS; i++) open |= guards[i] != NULL;
  if (installed == 1 && !open) {
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    installed = 0;
  }
  while ((g = retired) != NULL) {
    retired = g->retired;
    free(g);
  }
  pthread_mutex_unlock(&mu);
}

/*
** {=====================================================================
** Transactions left by a damaged page (LMDB 0.9's layout)
** ======================================================================
** LMDB's writes link cursors of their own, on the stack, into the
** transaction's lists while they work (mdb_put, mdb_del, a page split or
** merge), and unlink them when they return.  A call left by longjmp leaves
** them linked, and aborting the transaction would free them.  So the
** cursors of those lists that lie on the stack below the frame the call
** was left to are unlinked first.  This reads MDB_txn as liblmdb 0.9
** lays it out (x86-64: mt_txnid at 24, mt_cursors at 104, mt_dbflags at
** 112, mt_numdbs at 120; a cursor's first field links it), which
** rg_guard_layout checks on a live read transaction before any guard is
** made.
*/
#define TXN_TXNID    24
#define TXN_CURSORS  104
#define TXN_DBFLAGS  112
#define TXN_NUMDBS   120
#define STACK_REACH  (8u << 20)


int rg_guard_layout (void *rtxn, uint64_t txnid, unsigned numdbs) {
  const char *t = (const char *)rtxn;
  uint64_t id;
  void *cursors, *dbflags;
  unsigned n;
  if (sizeof(void *) != 8) return layout = 0;
  memcpy(&id, t + TXN_TXNID, 8);
  memcpy(&cursors, t + TXN_CURSORS, sizeof(void *));
  memcpy(&dbflags, t + TXN_DBFLAGS, sizeof(void *));
  memcpy(&n, t + TXN_NUMDBS, sizeof(unsigned));
  /* a read transaction tracks no cursors */
  return layout = id == txnid && cursors == NULL && dbflags != NULL &&
                  n >= numdbs && n < numdbs + 64;
}

void rg_guard_untrack (void *txn, const void *frame) {
  char *t = (char *)txn;
  uintptr_t hi = (uintptr_t)frame, lo = hi - STACK_REACH;
  void **lists;
  unsigned n, i;
  memcpy(&lists, t + TXN_CURSORS, sizeof(void *));
  memcpy(&n, t + TXN_NUMDBS, sizeof(unsigned));
  if (lists == NULL) return;
  for (i = 0; i < n; i++) {
    void **link = &lists[i];
    while (*link) {
      uintptr_t c = (uintptr_t)*link;
      if (c >= lo && c < hi) *link = *(void **)*link;   /* unlink it */
      else link = (void **)*link;
    }
  }
}
