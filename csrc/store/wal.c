/*
** wal.c: the write-ahead log in front of LMDB (wal.h says what and why).
**
** The log file: two header slots of 4 KiB (a checkpoint writes the one its
** sequence number names, so that a torn header leaves the other), then
** records from REC_START on.  A header: magic | epoch | base txnid | page
** size | flags (UNLOGGED: the data file alone is the truth; CLOSED: no
** commit since) | boot | the base's meta (bytes 16..152 of its meta page)
** | sequence | where the record after the base starts | checksum.  A
** record: magic | length | epoch | txnid | segments | checksum, then the
** segments: file offset | length | bytes (padded to 8).
**
** The records are a ring.  Records are appended at the end until it
** passes WRAP_AT; then, when the records the last checkpoint left needed
** (from its header's base_off on) begin far enough past REC_START, a jump
** (a record of no segments that says "go on at REC_START") is written at
** the end and the next records go from REC_START up to base_off, never
** onto it.  A checkpoint that does not stop writers (checkpoint_run):
** the writer whose commit takes the live part of the log past CKPT_BYTES
** claims one at its own transaction K, ending at O; once K is known
** committed, a thread of some process flushes the data file (every page
** of K and before is in it: the pages of K's tree, which the transactions
** after K cannot overwrite before the log holds K+1, the one that freed
** them), then writes a header naming K and O, and flushes the log: a
** replay then starts at O.  Meanwhile writers go on appending after O.
** Only when the ring is full (a checkpoint could not keep up), when a
** commit is too big for it, and when the log is restarted (a recovery, a
** close, unlogged commits) does a checkpoint run under the writer lock
** (checkpoint): the records then start over at REC_START with the next
** epoch, and those left there from before carry the old one, so replay
** stops at them.  Within an epoch a transaction id is written once (a
** record unmade is zeroed first), so a record of an earlier lap never
** passes for the next one.
**
** Seeing LMDB's writes.  liblmdb calls pwrite (one page, the meta page)
** and lseek+writev (runs of pages); its import table's slots for pwrite,
** writev and lseek are pointed at hook_pwrite, hook_writev and hook_lseek
** once per process (install_hooks); hook_lseek keeps the position it set,
** so that hook_writev knows where the run goes without asking.  The hooks let every write through, and while a write
** scope of a logged database runs, copy what LMDB writes to its data file
** into the record; the meta page, the last write of a commit, makes the
** hook append the record first.  With sync "full" the hooks hold the data
** pages the commit writes (copies, in `held`; from rg_wal_committing on,
** none once the transaction spilled) instead of writing them, as long as
** they overwrite blocks the file has (below dwritten: no hole, no growth;
** on a file system that overwrites in place, `inplace`):
** once the record is appended the flusher thread starts its flush when
** pages were held, and the meta page's hook writes the held pages (a run
** of contiguous ones in one pwritev), then the meta page, while the log
** flushes.
*/

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/support.h"
#include "store/guarded.h"
#include "store/local.h"
#include "store/pagecheck.h"
#include "store/pagedelta.h"
#include "store/pages.h"
#include "store/shm.h"
#include "store/wal.h"

#define HDR_SLOT     4096
#define REC_START    8192
#define REC_HEAD     40
#define CKPT_BYTES   (8u << 20)      /* a checkpoint when the live log is longer */
#define WRAP_AT      (32u << 20)     /* records go back to REC_START past this */
#define LIVE_MAX     (512u << 20)    /* checkpoints cannot keep up: one under
                                        the writer lock */
#define CAPTURE_MAX  (64u << 20)     /* a bigger commit checkpoints instead */
#define GROW         (1u << 20)      /* the log grows by zeros, this much */
#define HOLD_MAX     (8u << 20)      /* data pages held for the flush, at most */
#define WAL_MAGIC    0x3130304c41574752ull  /* "RGWAL001": the header before
                                                the ring (no sequence) */
#define WAL_MAGIC2   0x3230304c41574752ull  /* "RGWAL002" */
#define REC_MAGIC    0x43524752u            /* "RGRC" */
#define DELTA_MAGIC  0x44524752u            /* "RGRD": a record with deltas */
#define JUMP_MAGIC   0x504d4a52u            /* "RJMP": go on at REC_START */
#define SHM_MAGIC    0x314d485347524752ull  /* "RGRGSHM1" */
#define SHM_LAYOUT   2u              /* the fields after mu_state are kept */
#define META_OFF     16              /* the meta after the page header */
#define META_LEN     136             /* sizeof(MDB_meta), LMDB 0.9 (checked
                                        against mdb_version at open) */
#define META_TXNID   128             /* mm_txnid inside it */
#define F_UNLOGGED   1u             /* commits since are not logged */
#define F_CLOSED     2u             /* no commit since: the data file is whole */
#define SEG_DELTA    1u             /* a segment's kind: a page's delta */
#define DELTA_HEAD   32             /* its head: offset u64 | length u32 |
                                       kind u32 | source page u64 | the
                                       page's sum u64 (rg_pdelta_sum) */
#define PCACHE_BYTES (4u << 20)     /* the page images kept for deltas */
#define POOL_MAX     256            /* images of a commit's pages, at most */
#define REC2_KEEP    (1u << 20)     /* the record's second buffer (deltas)
                                       kept across commits, at most */

/* LMDB 0.9's page header: pgno u64 | pad u16 | flags u16 | lower | upper */
#define P_BRANCH     0x01
#define P_LEAF       0x02
#define P_OVERFLOW   0x04
#define P_META       0x08
#define P_LEAF2      0x20

/* The checkpoint claimed by a commit (shared.ck_state). */
enum { CK_NONE, CK_CLAIMED, CK_READY, CK_RUNNING };

/* What the processes of one database share (regolith.shm, never flushed). */
typedef struct shared {
  uint64_t magic;
  char boot[40];
  uint64_t epoch, next_off, base, last_txnid, last_start, synced, size;
  uint32_t unlogged, closed;
  /* guards `synced` and `gen`, which a process flushing the log after its
  ** commit (outside the writer lock) updates; `gen` changes whenever
  ** records may be unmade (a checkpoint, a repair), so that a flush that
  ** began before does not vouch for records written after; and, from
  ** layout 2 on, base_off, hseq and the claim (ck_*) */
  pthread_mutex_t mu;
  uint64_t gen;
  uint32_t mu_state;         /* 0: not made yet, 1: being made, 2: made */
  /* layout 2 (a file of a build before holds zeros from here on) */
  uint32_t layout;
  uint64_t hseq;             /* the sequence of the header on the disk */
  uint64_t base_off;         /* where the record after its base starts */
  uint64_t frontier;         /* the end of the furthest record of the epoch */
  /* the claimed checkpoint: the commit ck_txnid, whose record ends at
  ** ck_off, in epoch ck_epoch; ck_gen tells one claim from the next;
  ** ck_pid runs it (CK_RUNNING) */
  uint32_t ck_state;
  int32_t ck_pid;
  uint64_t ck_gen, ck_txnid, ck_off, ck_epoch;
  uint8_t ck_meta[META_LEN];
  /* held by whoever writes a header: one checkpoint at a time */
  pthread_mutex_t ck_mu;
  uint32_t ck_mu_state;
  /* counters since the boot (rg_wal_stats), added to atomically */
  uint64_t n_records, n_bytes, n_flushes, n_ckpt_run, n_ckpt_lock;
  uint64_t n_deltas;         /* (zero in a file of a build before them) */
} shared;

struct rg_wal {
  int wfd, dfd, sfd;         /* the log, LMDB's data file, the shared file */
  shared *sh;
  unsigned psize;
  int locked;                /* holds the recovery lock (until attach) */
  int readonly;              /* recovers, never logs */
  int recovered;
  int capturing, sync, overflow, failed;
  int pending;               /* sync "full": its record is not flushed yet */
  uint64_t txnid;
  uint32_t nseg;
  rg_buf rec;
  char boot[40];
  uint64_t claimed;          /* the claim this commit made (its ck_gen), or 0 */
  /* what the hooks know of the data file without asking the kernel: its
  ** length is at least dsize (it never shrinks while open); LMDB's last
  ** lseek put its position at `at` (at_known until a write moves it) */
  uint64_t dsize;
  off_t at;
  int at_known;
  int ck_live;               /* a checkpoint thread of this process runs */
  int ck_thread_made;        /* ck_thread is to be joined */
  pthread_t ck_thread;
  /* sync "full": the data pages LMDB wrote, held until the record is
  ** appended and its flush begun (off u64 | len u64 | bytes); the data
  ** file has no hole below dwritten (a held page never allocates) */
  rg_buf held;
  uint64_t dwritten;
  int inplace;               /* the file system overwrites blocks in place */
  int nohold;                /* this transaction holds no more pages */
  int committing;            /* LMDB is committing it (rg_wal_committing) */
  int kept;                  /* its record is appended and not unmade */
  int kicked;                /* this commit's flush runs on the flusher */
  /* the flusher: a thread of fl_pid that flushes the log when asked
  ** (fl_asked passes fl_done), its result in fl_rc and fl_errno */
  pthread_mutex_t fl_mu;
  pthread_cond_t fl_cv;
  pthread_t fl_thread;
  pid_t fl_pid;
  uint64_t fl_asked, fl_done;
  int fl_rc, fl_errno, fl_stop;
  /* page deltas: the cache holds images of pages this process's own
  ** commits wrote, each the last write of its page, in epoch pc_epoch,
  ** after the claim pc_gen, the last of them pc_last (whose meta named
  ** the roots pc_roots: the free tree's, the main tree's) */
  int use_deltas;            /* asked for (rg_wal_deltas) */
  rg_pgcache *pc;
  uint64_t pc_epoch, pc_gen, pc_last, pc_roots[2];
  /* this commit's pages (fresh, nfresh; found by number through ftab),
  ** their images in buffers of fpool; what rg_wal_durable does with the
  ** cache once the commit is known made (staged) */
  struct fresh *fresh;
  size_t nfresh, fcap;
  uint32_t *ftab;
  unsigned fmask;
  uint8_t **fpool;
  size_t npool;
  uint8_t *scratch;
  rg_buf rec2;
  int staged;
  uint64_t st_epoch, st_gen, st_roots[2];
  int appended, has_delta;
  uint32_t ndelta;           /* its pages written as deltas */
  size_t meta_at;            /* the record's meta segment */
};

/* A page this commit writes: its image (trimmed, when one may be made
** and it is written once) and the source of its delta, or RG_PG_INVALID;
** `at`: where its first segment starts in the record. */
struct fresh {
  uint64_t pgno, src;
  size_t at, end;            /* its segments in the record: [at, end) */
  int kind;                  /* 0: no image; 1: one segment; 2: two */
  long pool;                 /* its image: fpool[pool], or -1 */
};

enum { ST_NONE, ST_ADD, ST_CLEAR, ST_DONE };

static int hooked;           /* 0 not tried, 1 installed, -1 impossible */
/* CKPT_BYTES and WRAP_AT, which the harnesses make small
** (REGOLITH_WAL_RING="ckpt_bytes wrap_at") so that a short run claims
** checkpoints and wraps the ring many times; LIVE_MAX and GROW follow
** (16 rings, a ring at most), so that a ring whose checkpoints fall behind
** (a slow flush of the data file) stays as small as the real one, to scale */
static uint64_t ckpt_bytes = CKPT_BYTES, wrap_at = WRAP_AT,
                live_max = LIVE_MAX, grow = GROW;
static int env_deltas;       /* REGOLITH_LOG_DELTAS=1: rg_wal_deltas for all */
static struct { int fd; rg_wal *w; } reg[64];


/*
** {=====================================================================
** Checksums, headers
** ======================================================================
*/

/* A header as this build writes it; one of a build before the ring
** (WAL_MAGIC) ends at `seq` with its checksum there, and reads as seq =
** epoch, base_off = REC_START. */
typedef struct header {
  uint64_t magic, epoch, base;
  uint32_t psize, flags;
  char boot[40];
  uint8_t meta[META_LEN];
  uint64_t seq, base_off;
  uint64_t sum;
} header;

static int read_header (int wfd, header *out) {
  header h[2];
  int i, best = -1;
  for (i = 0; i < 2; i++) {
    uint64_t old;
    if (pread(wfd, &h[i], sizeof(header), (off_t)i * HDR_SLOT) != (ssize_t)sizeof(header))
      continue;
    if (h[i].magic == WAL_MAGIC) {
      memcpy(&old, &h[i].seq, 8);
      if (old != rg_sum64((const uint8_t *)&h[i], offsetof(header, seq))) continue;
      h[i].seq = h[i].epoch;
      h[i].base_off = REC_START;
    }
    else if (h[i].magic != WAL_MAGIC2 ||
             h[i].sum != rg_sum64((const uint8_t *)&h[i], offsetof(header, sum)) ||
             h[i].base_off < REC_START)
      continue;
    if (best < 0 || h[i].seq > h[best].seq) best = i;
  }
  if (best < 0) return -1;
  *out = h[best];
  return 0;
}

/* Writes a header (its seq names the slot) and flushes the log: 0 or -1. */
static int write_header (int wfd, header *h) {
  h->magic = WAL_MAGIC2;
  h->sum = rg_sum64((const uint8_t *)h, offsetof(header, sum));
  if (pwrite(wfd, h, sizeof(*h), (off_t)(h->seq % 2) * HDR_SLOT) != (ssize_t)sizeof(*h))
    return -1;
  return fdatasync(wfd);
}

static int fail_errno (rg_err *e, const char *what, const char *path) {
  int err = errno;
  return rg_fail(e, rg_room_status(err),
                 "%s%s log: %s: %s", err == ENOSPC || err == EDQUOT ?
                 "insufficient storage: " : "storage failure: ", what, path,
                 strerror(err));
}
/* }===================================================================== */


/*
** {=====================================================================
** Records
** ======================================================================
*/
static void add_segment (rg_wal *w, uint64_t off, const void *p, size_t n) {
  uint8_t head[16];
  static const uint8_t zeros[8];
  uint32_t len = (uint32_t)n;
  memcpy(head, &off, 8);
  memcpy(head + 8, &len, 4);
  memset(head + 12, 0, 4);
  rg_buf_add(&w->rec, head, 16);
  rg_buf_add(&w->rec, p, n);
  if (n % 8) rg_buf_add(&w->rec, zeros, 8 - n % 8);
  w->nseg++;
}

/* Copies what LMDB writes at `off` into the record: a branch or leaf page
** without the unused middle between its pointers and its nodes. */
static void capture (rg_wal *w, const uint8_t *p, size_t n, uint64_t off) {
  uint16_t flags, lower, upper;
  if (w->overflow) return;
  if (w->rec.n + n + 64 > CAPTURE_MAX || w->rec.oom) {
    w->overflow = 1;
    return;
  }
  if (n == w->psize && off % w->psize == 0) {
    memcpy(&flags, p + 10, 2);
    memcpy(&lower, p + 12, 2);
    memcpy(&upper, p + 14, 2);
    if ((flags & (P_BRANCH | P_LEAF)) &&
        !(flags & (P_OVERFLOW | P_META | P_LEAF2)) &&
        lower >= 16 && lower <= upper && upper <= w->psize) {
      add_segment(w, off, p, lower);
      if (upper < w->psize) add_segment(w, off + upper, p + upper, w->psize - upper);
      return;
    }
  }
  add_segment(w, off, p, n);
}

/* Writes zeros from the log's end to `to` (or `grow` further), so that the
** records written there later overwrite allocated blocks. */
static int grow_log (rg_wal *w, uint64_t to) {
  static const uint8_t zeros[65536];
  uint64_t at = w->sh->size < REC_START ? REC_START : w->sh->size;   /* never the headers */
  uint64_t end = to > at + grow ? to : at + grow;
  while (at < end) {
    size_t n = end - at < sizeof(zeros) ? (size_t)(end - at) : sizeof(zeros);
    ssize_t r = pwrite(w->wfd, zeros, n, (off_t)at);
    if (r <= 0) return -1;
    at += (uint64_t)r;
  }
  w->sh->size = end;
  return 0;
}

/* mu guards words only, each written whole: a holder that died left
** nothing half-done. */
static void lock_mu (shared *sh) { rg_shm_lock(&sh->mu, &sh->mu_state); }

/* With the writer lock held: the log is flushed up to `txnid` (a flush
** under the lock, a checkpoint), or records from after `txnid` on may be
** unmade (`unmade`, a repair): flushes begun before vouch for nothing. */
static void set_synced (shared *sh, uint64_t txnid, int unmade) {
  lock_mu(sh);
  sh->synced = txnid;
  if (unmade) sh->gen++;
  pthread_mutex_unlock(&sh->mu);
}

/* A word mu guards, read under it. */
static uint64_t read_mu (shared *sh, const uint64_t *word) {
  uint64_t v;
  lock_mu(sh);
  v = *word;
  pthread_mutex_unlock(&sh->mu);
  return v;
}

static uint64_t synced (shared *sh) { return read_mu(sh, &sh->synced); }

/* Flushes the log: afterwards every record appended before it is on the
** disk.  0, or -1 (errno). */
static int flush_log (rg_wal *w) {
  shared *sh = w->sh;
  uint64_t gen, upto;
  lock_mu(sh);
  gen = sh->gen;
  upto = __atomic_load_n(&sh->last_txnid, __ATOMIC_ACQUIRE);
  pthread_mutex_unlock(&sh->mu);
  if (fdatasync(w->wfd) != 0) return -1;
  __atomic_add_fetch(&sh->n_flushes, 1, __ATOMIC_RELAXED);
  lock_mu(sh);
  if (sh->gen == gen && sh->synced < upto) sh->synced = upto;
  pthread_mutex_unlock(&sh->mu);
  return 0;
}

/* The flusher: a thread of this process that runs flush_log when asked,
** so that a commit of sync "full" writes its data pages and its meta page
** while the log's flush of its record is under way. */
static void *flusher (void *arg) {
  rg_wal *w = (rg_wal *)arg;
  pthread_mutex_lock(&w->fl_mu);
  for (;;) {
    uint64_t asked;
    int rc, err;
    while (w->fl_done == w->fl_asked && !w->fl_stop)
      pthread_cond_wait(&w->fl_cv, &w->fl_mu);
    if (w->fl_done == w->fl_asked) break;            /* stopped, nothing asked */
    asked = w->fl_asked;           /* what is asked later needs a later flush */
    pthread_mutex_unlock(&w->fl_mu);
    rc = flush_log(w);
    err = errno;
    pthread_mutex_lock(&w->fl_mu);
    w->fl_rc = rc;
    w->fl_errno = err;
    w->fl_done = asked;
    pthread_cond_broadcast(&w->fl_cv);
  }
  pthread_mutex_unlock(&w->fl_mu);
  return NULL;
}

/* Asks the flusher for a flush of everything appended so far (making the
** thread in this process first: one made before a fork is not there).
** 0, or -1 when there is no thread (the caller flushes itself). */
static int flush_begin (rg_wal *w) {
  if (w->fl_pid != getpid()) {
    sigset_t all, old;
    int rc;
    pthread_mutex_init(&w->fl_mu, NULL);
    pthread_cond_init(&w->fl_cv, NULL);
    w->fl_asked = w->fl_done = 0;
    w->fl_stop = 0;
    sigfillset(&all);                 /* signals stay with the other threads */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&w->fl_thread, NULL, flusher, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) return -1;
    w->fl_pid = getpid();
  }
  pthread_mutex_lock(&w->fl_mu);
  w->fl_asked++;
  pthread_cond_broadcast(&w->fl_cv);
  pthread_mutex_unlock(&w->fl_mu);
  return 0;
}

/* Waits for the flush asked last: flush_log's result (errno set). */
static int flush_wait (rg_wal *w) {
  int rc, err;
  pthread_mutex_lock(&w->fl_mu);
  while (w->fl_done != w->fl_asked) pthread_cond_wait(&w->fl_cv, &w->fl_mu);
  rc = w->fl_rc;
  err = w->fl_errno;
  pthread_mutex_unlock(&w->fl_mu);
  errno = err;
  return rc;
}

/* Fills a record's head (magic, length, epoch, txnid, segments) and its
** checksum over the whole record. */
static void seal (uint8_t *r, uint32_t magic, uint32_t len, uint64_t epoch,
                  uint64_t txnid, uint32_t nseg) {
  uint64_t sum = 0;
  memcpy(r, &magic, 4);
  memcpy(r + 4, &len, 4);
  memcpy(r + 8, &epoch, 8);
  memcpy(r + 16, &txnid, 8);
  memcpy(r + 24, &nseg, 4);
  memset(r + 28, 0, 4);
  memcpy(r + 32, &sum, 8);
  sum = rg_sum64(r, len);
  memcpy(r + 32, &sum, 8);
}

/* Where the records after the last checkpoint's base start, as the header
** on the disk says. */
static uint64_t base_off (shared *sh) { return read_mu(sh, &sh->base_off); }

/* The bytes of the records a replay would read: from base_off to the end
** (and, once the records went back to REC_START, from there to next_off). */
static uint64_t live_bytes (shared *sh) {
  uint64_t b = base_off(sh);
  if (sh->next_off >= b) return sh->next_off - b;
  return (sh->frontier > b ? sh->frontier - b : 0) + (sh->next_off - REC_START);
}

/* Where the next record of `len` bytes goes (the writer lock held): at the
** end; at REC_START, after a jump written at the end, when the end passed
** WRAP_AT and the live records begin past it; after a jump, below the live
** records, never onto them.  -1 (errno) when it cannot be placed. */
static int place (rg_wal *w, uint32_t len, uint64_t *at) {
  shared *sh = w->sh;
  uint64_t b = base_off(sh), off = sh->next_off;
  uint8_t jump[REC_HEAD];
  if (off < b) {                      /* a later lap, below the live records */
    if (off + len >= b) { errno = ENOSPC; return -1; }
    *at = off;
    return 0;
  }
  if (off >= wrap_at && (uint64_t)REC_START + len < b) {
    seal(jump, JUMP_MAGIC, REC_HEAD, sh->epoch, w->txnid, 0);
    if (off + REC_HEAD > sh->size && grow_log(w, off + REC_HEAD) != 0) return -1;
    if (pwrite(w->wfd, jump, REC_HEAD, (off_t)off) != REC_HEAD) return -1;
    if (off + REC_HEAD > sh->frontier) sh->frontier = off + REC_HEAD;
    *at = REC_START;
    return 0;
  }
  if (off + len > sh->size && grow_log(w, off + len) != 0) return -1;
  *at = off;
  return 0;
}

/* Appends the record of transaction w->txnid, unflushed: a record of sync
** "full" is flushed after the commit, outside the writer lock
** (rg_wal_durable), so that other processes commit while it flushes and
** one flush serves every record appended before it; the log is also
** flushed before a transaction when it is more than two behind
** (rg_wal_begin).  0, or -1 (errno) when it could not be made. */
static int append_record (rg_wal *w) {
  shared *sh = w->sh;
  uint8_t *r = (uint8_t *)w->rec.p;
  uint32_t len = (uint32_t)w->rec.n;
  uint64_t off;
  if (w->overflow || w->rec.oom) { errno = EFBIG; return -1; }
  seal(r, w->has_delta ? DELTA_MAGIC : REC_MAGIC, len, sh->epoch, w->txnid,
       w->nseg);
  if (place(w, len, &off) != 0) return -1;
  if (pwrite(w->wfd, r, len, (off_t)off) != (ssize_t)len) return -1;
  sh->last_start = off;
  __atomic_store_n(&sh->last_txnid, w->txnid, __ATOMIC_RELEASE);
  __atomic_add_fetch(&sh->n_records, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&sh->n_bytes, len, __ATOMIC_RELAXED);
  if (w->ndelta)
    __atomic_add_fetch(&sh->n_deltas, w->ndelta, __ATOMIC_RELAXED);
  sh->next_off = off + len;
  if (off + len > sh->frontier) sh->frontier = off + len;
  w->pending = w->sync == RG_SYNC_FULL && synced(sh) < w->txnid;
  return 0;
}

/*
** {=====================================================================
** Page deltas
** ======================================================================
*/
/* Which segments of the record are pages, and their images: the entries
** of `fresh`, in the record's order, found by number through ftab; a
** page written twice (LMDB spilled it, then wrote it again), the pages
** of a run (overflow) and those past the first POOL_MAX have none.  0,
** or -1 when out of memory. */
static struct fresh *fresh_find (rg_wal *w, uint64_t pgno) {
  unsigned i;
  if (w->ftab == NULL) return NULL;
  for (i = rg_pgno_home(pgno, w->fmask);
       w->ftab[i]; i = (i + 1) & w->fmask)
    if (w->fresh[w->ftab[i] - 1].pgno == pgno) return &w->fresh[w->ftab[i] - 1];
  return NULL;
}

static const uint8_t *fresh_image (rg_wal *w, const struct fresh *f) {
  return f && f->pool >= 0 ? w->fpool[f->pool] : NULL;
}

static int fresh_add (rg_wal *w, uint64_t pgno, size_t at, size_t end,
                      int kind) {
  if (w->nfresh == w->fcap) {
    size_t cap = w->fcap ? 2 * w->fcap : 256;
    void *p = realloc(w->fresh, cap * sizeof(*w->fresh));
    if (p == NULL) return -1;
    w->fresh = (struct fresh *)p;
    w->fcap = cap;
  }
  w->fresh[w->nfresh++] = (struct fresh){ pgno, RG_PG_INVALID, at, end, kind, -1 };
  return 0;
}

static int index_record (rg_wal *w) {
  const uint8_t *r = (const uint8_t *)w->rec.p;
  size_t at = REC_HEAD, n = w->rec.n, i, used = 0;
  unsigned ps = w->psize, size = 16, lo, up;
  w->nfresh = 0;
  w->meta_at = 0;
  while (at + 16 <= n) {
    uint64_t off = rg_le64(r + at), pg;
    uint32_t len = rg_le32(r + at + 8);
    size_t next = at + 16 + (len + 7) / 8 * 8;
    int kind = 0;
    if (off < 2u * ps) { w->meta_at = at; at = next; continue; }
    if (off % ps == 0 && len >= RG_PG_HDR && len <= ps &&
        rg_pdelta_usable(r + at + 16, ps, &lo, &up)) {
      if (len == ps) kind = 1;
      else if (len == lo && up == ps) kind = 1;
      else if (len == lo && next + 16 <= n &&
               rg_le64(r + next) == off + up &&
               rg_le32(r + next + 8) == ps - up) {
        kind = 2;
        next += 16 + (ps - up + 7) / 8 * 8;
      }
    }
    if (kind) {
      if (fresh_add(w, off / ps, at, next, kind) != 0) return -1;
    }
    else
      for (pg = off / ps; pg <= (off + (len ? len : 1) - 1) / ps; pg++)
        if (fresh_add(w, pg, at, next, 0) != 0) return -1;
    at = next;
  }
  while (size < 2 * w->nfresh) size *= 2;
  if (w->ftab == NULL || w->fmask + 1 < size) {
    free(w->ftab);
    if ((w->ftab = (uint32_t *)malloc(size * sizeof(uint32_t))) == NULL)
      return -1;
    w->fmask = size - 1;
  }
  memset(w->ftab, 0, (size_t)(w->fmask + 1) * sizeof(uint32_t));
  for (i = 0; i < w->nfresh; i++) {
    struct fresh *f = &w->fresh[i], *was = fresh_find(w, f->pgno);
    unsigned k;
    if (was) {                        /* written twice: no image */
      was->kind = f->kind = 0;
      continue;
    }
    for (k = rg_pgno_home(f->pgno, w->fmask);
         w->ftab[k]; k = (k + 1) & w->fmask) {}
    w->ftab[k] = (uint32_t)i + 1;
  }
  for (i = 0; i < w->nfresh; i++) {     /* the images, trimmed */
    struct fresh *f = &w->fresh[i];
    uint8_t *img;
    uint32_t len;
    if (!f->kind) continue;
    if (used == POOL_MAX) {           /* a big commit: the rest have none */
      f->kind = 0;
      continue;
    }
    if (used == w->npool) {
      void *p = realloc(w->fpool, (w->npool + 64) * sizeof(uint8_t *));
      if (p == NULL) return -1;
      w->fpool = (uint8_t **)p;
      memset(w->fpool + w->npool, 0, 64 * sizeof(uint8_t *));
      w->npool += 64;
    }
    if (w->fpool[used] == NULL && (w->fpool[used] = (uint8_t *)malloc(ps)) == NULL)
      return -1;
    img = w->fpool[used];
    len = rg_le32(r + f->at + 8);
    memcpy(img, r + f->at + 16, len);
    rg_pdelta_usable(img, ps, &lo, &up);
    if (len == ps) rg_pdelta_trim(img, ps);
    else {                            /* [0, lower), then [upper, psize) */
      memset(img + len, 0, up - len);
      if (f->kind == 2)
        memcpy(img + up, r + f->at + 16 + (len + 7) / 8 * 8 + 16, ps - up);
    }
    f->pool = (long)used++;
  }
  return 0;
}

/* The roots of the free and the main tree that the record's meta names;
** 0, or -1 when its meta segment does not hold them. */
static int meta_roots (rg_wal *w, uint64_t roots[2]) {
  const uint8_t *r = (const uint8_t *)w->rec.p;
  uint64_t off;
  uint32_t len;
  int i;
  if (w->meta_at == 0) return -1;
  off = rg_le64(r + w->meta_at) % w->psize;
  len = rg_le32(r + w->meta_at + 8);
  for (i = 0; i < 2; i++) {
    uint64_t at = RG_PG_HDR + RG_META_DBS + RG_META_DB * i + RG_DB_ROOT;
    if (at < off || at + 8 > off + len) return -1;
    roots[i] = rg_le64(r + w->meta_at + 16 + (at - off));
  }
  return 0;
}

static const uint8_t *page_fresh (void *ud, uint64_t pgno) {
  rg_wal *w = (rg_wal *)ud;
  return fresh_image(w, fresh_find(w, pgno));
}

/* A source: a page in the cache that this record does not write. */
static const uint8_t *page_known (void *ud, uint64_t pgno) {
  rg_wal *w = (rg_wal *)ud;
  return fresh_find(w, pgno) ? NULL : rg_pgcache_get(w->pc, pgno);
}

/* The first pairing of a page wins; a page paired already is not
** descended again. */
static int page_paired (void *ud, uint64_t pgno, uint64_t source) {
  struct fresh *f = fresh_find((rg_wal *)ud, pgno);
  if (f == NULL || f->pool < 0 || f->src != RG_PG_INVALID) return 1;
  f->src = source;
  return 0;
}

/* The record rewritten into rec2 with a delta segment in place of each
** paired page whose delta makes it exactly and is smaller; swapped into
** rec when there is one. */
static void make_deltas (rg_wal *w) {
  const uint8_t *r = (const uint8_t *)w->rec.p;
  unsigned ps = w->psize;
  size_t i, pos = REC_HEAD;
  uint32_t nseg = w->nseg;
  rg_buf t;
  if (w->scratch == NULL && (w->scratch = (uint8_t *)malloc(4u * ps)) == NULL)
    return;
  w->rec2.n = 0;
  w->rec2.oom = 0;
  if (rg_buf_reserve(&w->rec2, w->rec.n) != 0) return;
  rg_buf_add(&w->rec2, r, REC_HEAD);
  for (i = 0; i < w->nfresh; i++) {
    struct fresh *f = &w->fresh[i];
    const uint8_t *src, *img = fresh_image(w, f);
    uint8_t head[DELTA_HEAD], *d = w->scratch, *check = w->scratch + 3u * ps;
    size_t dn, whole = f->end - f->at, cost;
    uint32_t len, kind = SEG_DELTA;
    static const uint8_t zeros[8];
    if (f->src == RG_PG_INVALID || img == NULL ||
        (src = rg_pgcache_get(w->pc, f->src)) == NULL || whole <= DELTA_HEAD)
      continue;
    dn = rg_pdelta_encode(src, img, ps, d, whole - DELTA_HEAD);
    if (dn == 0 || rg_pdelta_apply(src, d, dn, ps, check) != 0 ||
        memcmp(check, img, ps) != 0)
      continue;                       /* (made exactly, or not at all) */
    cost = DELTA_HEAD + (dn + 7) / 8 * 8;
    if (cost >= whole) continue;
    rg_buf_add(&w->rec2, r + pos, f->at - pos);
    len = (uint32_t)(DELTA_HEAD - 16 + dn);
    {
      uint64_t off = f->pgno * ps, sum = rg_pdelta_sum(img, ps);
      memcpy(head, &off, 8);
      memcpy(head + 8, &len, 4);
      memcpy(head + 12, &kind, 4);
      memcpy(head + 16, &f->src, 8);
      memcpy(head + 24, &sum, 8);
    }
    rg_buf_add(&w->rec2, head, DELTA_HEAD);
    rg_buf_add(&w->rec2, d, dn);
    if (dn % 8) rg_buf_add(&w->rec2, zeros, 8 - dn % 8);
    nseg -= (uint32_t)f->kind - 1;
    pos = f->end;
    w->has_delta = 1;
    w->ndelta++;
  }
  if (!w->has_delta || w->rec2.oom) { w->has_delta = w->ndelta = 0; return; }
  rg_buf_add(&w->rec2, r + pos, w->rec.n - pos);
  if (w->rec2.oom) { w->has_delta = w->ndelta = 0; return; }
  t = w->rec;
  w->rec = w->rec2;
  w->rec2 = t;
  w->nseg = nseg;
}

/*
** In a commit, its record captured whole and not yet appended (the writer
** lock held): its pages paired with the cache's and written as deltas where
** that is smaller, and what the cache is to become once the commit is made
** staged.  The cache may serve this commit only when the last commit was
** this process's (pc_last + 1 == txnid: no other process's record lies
** between its pages and this one) and no checkpoint was claimed or made
** since its pages were cached (ck_gen and the epoch unchanged): then each
** of its pages was last written by a record that every replay reaching
** this one applies first.  Otherwise it is emptied, and this commit's
** pages start it again.
*/
static void deltas (rg_wal *w) {
  shared *sh = w->sh;
  uint64_t roots[2];
  int i;
  w->staged = ST_NONE;
  w->has_delta = 0;
  w->ndelta = 0;
  if (!w->use_deltas || w->overflow || w->rec.oom || w->psize == 0) return;
  if (w->pc == NULL && (w->pc = rg_pgcache_new(w->psize, PCACHE_BYTES)) == NULL)
    return;
  w->st_gen = read_mu(sh, &sh->ck_gen);
  w->st_epoch = sh->epoch;
  if (w->pc_last == 0 || w->pc_last + 1 != w->txnid ||
      w->pc_epoch != w->st_epoch || w->pc_gen != w->st_gen) {
    rg_pgcache_clear(w->pc);
    w->pc_last = 0;
  }
  if (index_record(w) != 0 || meta_roots(w, roots) != 0) return;
  w->st_roots[0] = roots[0];
  w->st_roots[1] = roots[1];
  w->staged = ST_ADD;
  if (w->pc_last == 0) return;
  for (i = 0; i < 2; i++)
    rg_pdelta_pair(roots[i], w->pc_roots[i], w->psize, page_fresh, page_known,
                   page_paired, w);
  make_deltas(w);
}

/* The commit is made: the cache takes its pages (or, when it claimed a
** checkpoint, is emptied: its pages are at the base, not after it). */
static void deltas_made (rg_wal *w) {
  size_t i;
  if (w->staged == ST_NONE || w->staged == ST_DONE) return;
  if (w->staged == ST_CLEAR) rg_pgcache_clear(w->pc);
  else
    for (i = 0; i < w->nfresh; i++) {
      struct fresh *f = &w->fresh[i];
      if (f->pool >= 0) rg_pgcache_put(w->pc, f->pgno, &w->fpool[f->pool]);
      else rg_pgcache_drop(w->pc, f->pgno);
    }
  w->pc_epoch = w->st_epoch;
  w->pc_gen = w->st_gen;
  w->pc_last = w->txnid;
  w->pc_roots[0] = w->st_roots[0];
  w->pc_roots[1] = w->st_roots[1];
  w->staged = ST_DONE;
}

/* A transaction ends: when it appended a record and the cache did not
** take its pages (its commit failed, or was not logged), nothing the
** cache holds can be trusted. */
static void deltas_end (rg_wal *w) {
  if (w->appended && w->staged != ST_DONE && w->pc) {
    rg_pgcache_clear(w->pc);
    w->pc_last = 0;
  }
  w->staged = ST_NONE;
  w->appended = 0;
}
/* }===================================================================== */


/* The meta (bytes 16..152 of its page) of transaction `txnid` in the data
** file; 0, or -1 when neither meta page holds it. */
static int read_meta (int dfd, unsigned psize, uint64_t txnid, uint8_t *out) {
  int i;
  for (i = 0; i < 2; i++) {
    uint64_t t;
    if (pread(dfd, out, META_LEN, (off_t)i * psize + META_OFF) != META_LEN) continue;
    memcpy(&t, out + META_TXNID, 8);
    if (t == txnid) return 0;
  }
  return -1;
}

/* Takes the checkpoint lock; a holder that died part-way through a
** checkpoint_run leaves its claim to be run again. */
static void lock_ck (shared *sh) {
  if (rg_shm_lock(&sh->ck_mu, &sh->ck_mu_state)) {
    lock_mu(sh);
    if (sh->ck_state == CK_RUNNING) sh->ck_state = CK_READY;
    pthread_mutex_unlock(&sh->mu);
  }
}

/*
** A checkpoint at transaction `base` (the last committed, the writer lock
** held) that restarts the log: the data file is flushed, then a header of
** the next epoch names `base` and records start over at REC_START.  A
** claimed checkpoint not yet run is dropped (this one covers it).  0 or a
** status.
*/
static int checkpoint (rg_wal *w, uint64_t base, unsigned flags, rg_err *e) {
  shared *sh = w->sh;
  header h;
  int rc = 0;
  memset(&h, 0, sizeof(h));
  lock_ck(sh);
  lock_mu(sh);
  sh->ck_state = CK_NONE;
  sh->ck_gen++;
  pthread_mutex_unlock(&sh->mu);
  /* the records first: until the new header is on the disk the old one
  ** rules, and a replay from it over the flushed data file must reach the
  ** last commit, or it would set the meta pages back behind what the data
  ** file's flush made durable */
  if (synced(sh) < sh->last_txnid && flush_log(w) != 0)
    rc = fail_errno(e, "flushing the", "regolith.wal");
  else if (fdatasync(w->dfd) != 0)
    rc = fail_errno(e, "flushing the data file for the", "checkpoint");
  else if (read_meta(w->dfd, w->psize, base, h.meta) != 0)
    rc = rg_fail(e, 500, "storage failure: checkpoint: no meta page holds "
                 "transaction %llu", (unsigned long long)base);
  if (rc) { pthread_mutex_unlock(&sh->ck_mu); return rc; }
  h.epoch = sh->epoch + 1;
  h.seq = sh->hseq + 1;
  h.base = base;
  h.base_off = REC_START;
  h.psize = w->psize;
  h.flags = flags;
  memcpy(h.boot, w->boot, sizeof(h.boot));
  if (write_header(w->wfd, &h) != 0) {
    rc = fail_errno(e, "writing the", "checkpoint");
    pthread_mutex_unlock(&sh->ck_mu);
    return rc;
  }
  sh->epoch = h.epoch;
  sh->base = sh->last_txnid = base;
  set_synced(sh, base, 1);
  lock_mu(sh);
  sh->hseq = h.seq;
  sh->base_off = REC_START;
  pthread_mutex_unlock(&sh->mu);
  sh->next_off = sh->frontier = REC_START;
  sh->last_start = 0;
  sh->unlogged = (flags & F_UNLOGGED) != 0;
  sh->closed = (flags & F_CLOSED) != 0;
  __atomic_add_fetch(&sh->n_ckpt_lock, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&sh->ck_mu);
  return 0;
}

/*
** A checkpoint that does not stop writers: the claim's commit K (known
** committed: CK_RUNNING, by this process) becomes the log's base.  The
** data file is flushed without the writer lock, while writers go on
** appending records after the claim's offset; the pages of K's tree are
** all in it by then (a transaction reuses only pages that the one two
** before it freed, and starts only once the log holds that one: so a page
** of K's tree is overwritten only by a transaction at K+3 or later, when
** the log holds K+1, whose record makes the page unneeded).  Then a
** header names K and where the records after it start.  Run by a thread
** of the process (checkpoint_thread); nothing is returned: a claim that
** fails is dropped, and the next is made as the log grows.
*/
static void checkpoint_run (rg_wal *w, uint64_t gen) {
  shared *sh = w->sh;
  header h;
  int ok;
  memset(&h, 0, sizeof(h));
  lock_ck(sh);
  lock_mu(sh);
  ok = sh->ck_state == CK_RUNNING && sh->ck_gen == gen && sh->ck_epoch == sh->epoch;
  if (ok) {
    h.epoch = sh->ck_epoch;
    h.base = sh->ck_txnid;
    h.base_off = sh->ck_off;
    memcpy(h.meta, sh->ck_meta, META_LEN);
  }
  pthread_mutex_unlock(&sh->mu);
  if (!ok) { pthread_mutex_unlock(&sh->ck_mu); return; }
  /* the records first, as checkpoint does: a flush of the data file then
  ** never makes durable a commit whose record is not (so every commit
  ** before a flush of either file survives, sync "lazy" too) */
  ok = (synced(sh) >= __atomic_load_n(&sh->last_txnid, __ATOMIC_ACQUIRE) ||
        flush_log(w) == 0) && fdatasync(w->dfd) == 0;
  h.psize = w->psize;
  memcpy(h.boot, w->boot, sizeof(h.boot));
  h.seq = read_mu(sh, &sh->hseq) + 1;
  ok = ok && write_header(w->wfd, &h) == 0;
  lock_mu(sh);
  if (sh->ck_gen == gen) {
    if (ok && sh->epoch == h.epoch) {
      sh->hseq = h.seq;
      sh->base = h.base;
      sh->base_off = h.base_off;
      sh->n_ckpt_run++;
    }
    sh->ck_state = CK_NONE;
  }
  pthread_mutex_unlock(&sh->mu);
  pthread_mutex_unlock(&sh->ck_mu);
}

typedef struct ck_arg { rg_wal *w; uint64_t gen; } ck_arg;

static void *checkpoint_thread (void *arg) {
  ck_arg a = *(ck_arg *)arg;
  free(arg);
  checkpoint_run(a.w, a.gen);
  __atomic_store_n(&a.w->ck_live, 0, __ATOMIC_RELEASE);
  return NULL;
}

static int alive (int32_t pid) {
  return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH);
}

/* After a commit of this process: a claimed checkpoint whose commit is
** known committed, and that no live process runs, is started on a thread
** of this one (one at a time per process). */
static void checkpoint_start (rg_wal *w) {
  shared *sh = w->sh;
  ck_arg *a;
  uint64_t gen = 0;
  if (__atomic_load_n(&w->ck_live, __ATOMIC_ACQUIRE)) return;
  if (w->ck_thread_made) {           /* the last one ended: reap it */
    pthread_join(w->ck_thread, NULL);
    w->ck_thread_made = 0;
  }
  lock_mu(sh);
  if (sh->ck_state == CK_READY ||
      (sh->ck_state == CK_RUNNING && sh->ck_pid != (int32_t)getpid() &&
       !alive(sh->ck_pid))) {
    sh->ck_state = CK_RUNNING;
    sh->ck_pid = (int32_t)getpid();
    gen = sh->ck_gen;
  }
  pthread_mutex_unlock(&sh->mu);
  if (gen == 0) return;
  if ((a = (ck_arg *)malloc(sizeof(*a))) != NULL) {
    a->w = w;
    a->gen = gen;
    w->ck_live = 1;
    if (pthread_create(&w->ck_thread, NULL, checkpoint_thread, a) == 0) {
      w->ck_thread_made = 1;
      return;
    }
    w->ck_live = 0;
    free(a);
  }
  lock_mu(sh);                        /* no thread: give the claim back */
  if (sh->ck_gen == gen && sh->ck_state == CK_RUNNING) sh->ck_state = CK_READY;
  pthread_mutex_unlock(&sh->mu);
}

/* Waits for this process's checkpoint thread, if any. */
static void checkpoint_join (rg_wal *w) {
  if (w->ck_thread_made) {
    pthread_join(w->ck_thread, NULL);
    w->ck_thread_made = 0;
    w->ck_live = 0;
  }
}

/* In a commit, once its record is appended (the writer lock held): when
** the live log passed CKPT_BYTES and no checkpoint is claimed, this
** commit claims one at itself.  Its meta is read once LMDB wrote it. */
static void checkpoint_claim (rg_wal *w) {
  shared *sh = w->sh;
  w->claimed = 0;
  if (sh->layout != SHM_LAYOUT || live_bytes(sh) < ckpt_bytes) return;
  lock_mu(sh);
  if (sh->ck_state == CK_NONE) {
    sh->ck_state = CK_CLAIMED;
    sh->ck_gen++;
    sh->ck_txnid = w->txnid;
    sh->ck_off = sh->next_off;
    sh->ck_epoch = sh->epoch;
    w->claimed = sh->ck_gen;
  }
  pthread_mutex_unlock(&sh->mu);
}

/* After the meta page of the claiming commit is written (writer lock
** held): its meta into the claim; a claim without one is dropped. */
static void checkpoint_meta (rg_wal *w) {
  shared *sh = w->sh;
  uint8_t meta[META_LEN];
  int ok;
  if (!w->claimed) return;
  ok = read_meta(w->dfd, w->psize, w->txnid, meta) == 0;
  lock_mu(sh);
  if (sh->ck_gen == w->claimed && sh->ck_state == CK_CLAIMED) {
    if (ok) memcpy(sh->ck_meta, meta, META_LEN);
    else sh->ck_state = CK_NONE;
  }
  pthread_mutex_unlock(&sh->mu);
  if (!ok) w->claimed = 0;
}

/* A claim's commit is known committed (by its process after the commit,
** or by the next writer, whose transaction id is past it): CK_READY.  A
** claim at `unmade` (a commit its process died making) is dropped. */
static void checkpoint_settle (shared *sh, uint64_t committed, uint64_t unmade) {
  lock_mu(sh);
  if (sh->ck_state == CK_CLAIMED) {
    if (sh->ck_txnid <= committed) sh->ck_state = CK_READY;
    else if (sh->ck_txnid == unmade) sh->ck_state = CK_NONE;
  }
  pthread_mutex_unlock(&sh->mu);
}
/* }===================================================================== */


/*
** {=====================================================================
** The hooks on liblmdb
** ======================================================================
*/
static rg_wal *data_file (int fd) {
  int i;
  for (i = 0; i < 64; i++)
    if (reg[i].w && reg[i].fd == fd) return reg[i].w;
  return NULL;
}

static rg_wal *logging (int fd) {
  rg_wal *w = data_file(fd);
  return w && w->capturing ? w : NULL;
}

/* A write of LMDB to a data file of n bytes at off is pages (or an
** overflow run), not a meta page: each write is one page or run. */
static int pages (const rg_wal *w, size_t n, uint64_t off) {
  return w && w->psize && off >= 2u * w->psize && n >= w->psize &&
         n % w->psize == 0;
}

/* Every page (or overflow run) LMDB writes to a data file gets its
** checksum (pagecheck.h) on its way, before the log copies it. */
static void stamp (int fd, const void *buf, size_t n, off_t off) {
  if (pages(data_file(fd), n, (uint64_t)off))
    rg_page_stamp((uint8_t *)(uintptr_t)buf, n);
}

/* Pages about to be written (or, held ones, just written) are opened in
** the guarded map (guard.h): a held page only once its bytes are in the
** file, so that a failed write leaves it checked. */
static void opened (int fd, size_t n, uint64_t off) {
  if (pages(data_file(fd), n, off)) rg_guard_written(fd, off, n);
}

/* LMDB counts in a meta page's last page every page its transaction took,
** written or not: a page taken and given back within the transaction (a
** loose page) is never written, and when it is the last one the file ends
** short of it.  The file is made that long (a hole) before the meta page
** naming it is written, so that a data file shorter than its meta page
** says is damage (preflight.h), never LMDB's bookkeeping.  buf: n bytes of
** a meta page written at off (LMDB writes its tail only).  known (or NULL):
** a length the file is known to have at least (it never shrinks while
** open), so that a commit whose pages it covers asks no fstat; updated. */
static int fit_meta (int fd, unsigned psize, const uint8_t *buf, size_t n,
                     uint64_t off, uint64_t *known) {
  struct stat st;
  uint64_t at = (off < psize ? 0 : psize) + RG_PG_HDR + RG_META_LASTPG, need;
  if (at < off || at + 8 > off + n) return 0;
  need = (rg_le64(buf + (at - off)) + 1) * psize;
  if (known && need <= *known) return 0;   /* long enough: no fstat */
  if (fstat(fd, &st) != 0) return -1;
  if ((uint64_t)st.st_size < need && ftruncate(fd, (off_t)need) != 0) return -1;
  if (known) *known = (uint64_t)st.st_size < need ? need : (uint64_t)st.st_size;
  return 0;
}

/* Whether a file system of this type overwrites a file's written blocks
** in place, never asking for room: ext2 to ext4 and tmpfs (not XFS, whose
** reflinked extents, shared with a copy, are copied on write). */
static int in_place (unsigned long type) {
  return type == 0xEF53 || type == 0x01021994;
}

/* A write of the data file that went through: the file has no hole below
** its end when it had none below its start. */
static void written (rg_wal *d, uint64_t off, ssize_t r) {
  if (r > 0 && off <= d->dwritten && off + (uint64_t)r > d->dwritten)
    d->dwritten = off + (uint64_t)r;
}

/* Writes the held pages, each run of contiguous ones in one pwritev:
** 0, or -1 (errno). */
static int write_held (rg_wal *w, int fd) {
  struct iovec iov[64];
  size_t at = 0, len;
  while (at < w->held.n) {
    uint64_t head[2], off;
    int k = 0;
    ssize_t r;
    memcpy(head, w->held.p + at, 16);
    off = head[0];
    len = 0;
    while (at < w->held.n && k < 64) {
      memcpy(head, w->held.p + at, 16);
      if (head[0] != off + len) break;
      iov[k].iov_base = w->held.p + at + 16;
      iov[k].iov_len = (size_t)head[1];
      len += (size_t)head[1];
      at += 16 + (size_t)head[1];
      k++;
    }
    r = pwritev(fd, iov, k, (off_t)off);
    if (r != (ssize_t)len) {
      if (r >= 0) errno = EIO;
      return -1;
    }
    opened(fd, len, off);
  }
  w->held.n = 0;
  return 0;
}

/* Sync "full": a data page (or run) is held, not written, until the
** record is appended and its flush begun (commit_meta), when it overwrites
** blocks the file has (it cannot fail for room).  Only the commit's own
** writes are held (rg_wal_committing): LMDB reads back through its map the
** pages it spilled, so a page written before the commit began (a spill)
** is written at once, and the transaction holds nothing from then on (its
** dirty list was full: its commit may spill too).  A transaction that
** writes more than HOLD_MAX has what is held written at once, and holds
** no more.  1 when held, 0 when the caller writes it, -1 (errno) when held
** pages failed. */
static int hold (rg_wal *w, int fd, const void *p, size_t n, uint64_t off) {
  uint64_t head[2];
  if (w->sync != RG_SYNC_FULL || w->nohold) return 0;
  if (!w->committing) {
    w->nohold = 1;
    return 0;
  }
  if (!w->inplace || off + n > w->dwritten) return 0;
  if (w->held.n + n + 16 > HOLD_MAX) {
    w->nohold = 1;
    return write_held(w, fd) == 0 ? 0 : -1;
  }
  if (rg_buf_reserve(&w->held, n + 16) != 0) return 0;
  head[0] = off;
  head[1] = n;
  rg_buf_add(&w->held, head, 16);
  rg_buf_add(&w->held, p, n);
  return 1;
}

/* The log's last record, of transaction last + 1, whose commit failed or
** never came, is unmade: zeroed and flushed, so that no replay makes it,
** and the next record takes its place.  0, or -1 (errno) when the zeroing
** could not be written or flushed: the record then stays the last one,
** and the next transaction's begin tries again. */
static int unmake_last (rg_wal *w, uint64_t last) {
  shared *sh = w->sh;
  uint64_t zero = 0;
  ssize_t r = pwrite(w->wfd, &zero, 8, (off_t)sh->last_start);
  if (r != 8) {
    if (r >= 0) errno = EIO;
    return -1;
  }
  if (fdatasync(w->wfd) != 0) return -1;
  sh->next_off = sh->last_start;
  sh->last_txnid = last;
  set_synced(sh, sh->synced > last ? last : sh->synced, 1);
  return 0;
}

/* The record of this commit, appended, is unmade (its held pages could not
** be written: the commit fails); LMDB gets the write's errno. */
static void unmake (rg_wal *w) {
  int err = errno;
  if (unmake_last(w, w->txnid - 1) == 0) w->kept = 0;
  w->pending = 0;
  errno = err;
}

/* The meta page: the commit's last write.  The record goes to the log,
** then the held data pages and the meta page to the data file; with sync
** "full" the record's flush runs on the flusher meanwhile (rg_wal_durable
** waits for it).  A record that cannot be logged (a full disk, a commit
** too big to copy) makes the commit durable through the data file
** instead: flushed, and a checkpoint at it. */
static ssize_t commit_meta (rg_wal *w, int fd, const void *buf, size_t n,
                            off_t off) {
  ssize_t r;
  int logged;
  rg_err e;
  capture(w, (const uint8_t *)buf, n, (uint64_t)off);
  w->appended = 1;
  deltas(w);
  logged = append_record(w) == 0;
  if (!logged) w->staged = ST_NONE;
  w->capturing = 0;
  w->kept = logged;
  rg_assert(w->held.n == 0 || w->committing);   /* only the commit holds */
  if (logged && w->pending && w->held.n > 0 && flush_begin(w) == 0)
    w->kicked = 1;
  if (write_held(w, fd) != 0) {
    if (logged) unmake(w);
    return -1;                       /* LMDB fails the commit (errno) */
  }
  if (logged) {
    checkpoint_claim(w);
    if (w->claimed && w->staged != ST_NONE) {
      w->staged = ST_CLEAR;
      w->st_gen = w->claimed;
    }
  }
  r = pwrite(fd, buf, n, off);
  if (r != (ssize_t)n) return r;
  if (logged) { checkpoint_meta(w); return r; }
  if (checkpoint(w, w->txnid, 0, &e) != 0) w->failed = 1;
  return r;
}

static ssize_t hook_pwrite (int fd, const void *buf, size_t n, off_t off) {
  rg_wal *w = logging(fd), *d = data_file(fd);
  stamp(fd, buf, n, off);
  if (d && d->psize && (uint64_t)off < 2u * d->psize &&
      fit_meta(fd, d->psize, (const uint8_t *)buf, n, (uint64_t)off,
               &d->dsize) != 0)
    return -1;                       /* LMDB fails the commit (errno) */
  if (w == NULL) {
    ssize_t r;
    opened(fd, n, (uint64_t)off);
    r = pwrite(fd, buf, n, off);
    if (d) written(d, (uint64_t)off, r);
    return r;
  }
  if ((uint64_t)off < 2u * w->psize) return commit_meta(w, fd, buf, n, off);
  capture(w, (const uint8_t *)buf, n, (uint64_t)off);
  switch (hold(w, fd, buf, n, (uint64_t)off)) {
    case 1: return (ssize_t)n;
    case -1: return -1;               /* LMDB fails the commit (errno) */
    default: {
      ssize_t r;
      opened(fd, n, (uint64_t)off);
      r = pwrite(fd, buf, n, off);
      written(w, (uint64_t)off, r);
      return r;
    }
  }
}

/* LMDB writes a run of pages with lseek, then writev: the position is
** kept here, so that the writev's hook need not ask the kernel for it. */
static off_t hook_lseek (int fd, off_t off, int whence) {
  rg_wal *d = data_file(fd);
  off_t r = lseek(fd, off, whence);
  if (d) {
    d->at = r;
    d->at_known = r >= 0;
  }
  return r;
}

static ssize_t hook_writev (int fd, const struct iovec *iov, int cnt) {
  rg_wal *w = logging(fd), *d = data_file(fd);
  off_t at = -1, start;
  size_t total = 0;
  ssize_t r;
  int i, held = w != NULL;
  if (d != NULL) {
    at = d->at_known ? d->at : lseek(fd, 0, SEEK_CUR);
    d->at_known = 0;                  /* the write moves the position */
  }
  start = at;
  if (at >= 0)
    for (i = 0; i < cnt; i++) {
      stamp(fd, iov[i].iov_base, iov[i].iov_len, at);
      if (w != NULL)
        capture(w, (const uint8_t *)iov[i].iov_base, iov[i].iov_len,
                (uint64_t)at);
      at += (off_t)iov[i].iov_len;
    }
  for (i = 0; i < cnt; i++) total += iov[i].iov_len;
  /* held whole or not at all: the run is one write */
  if (held && start >= 0) {
    size_t mark = w->held.n;
    for (i = 0, at = start; held == 1 && i < cnt; at += (off_t)iov[i].iov_len, i++)
      held = hold(w, fd, iov[i].iov_base, iov[i].iov_len, (uint64_t)at);
    if (held == 1) return (ssize_t)total;
    if (held < 0) return -1;          /* LMDB fails the commit (errno) */
    if (w->held.n > mark) w->held.n = mark;   /* (all written, if none left) */
  }
  for (i = 0, at = start; start >= 0 && i < cnt; at += (off_t)iov[i].iov_len, i++)
    opened(fd, iov[i].iov_len, (uint64_t)at);
  r = writev(fd, iov, cnt);
  if (d != NULL && start >= 0) written(d, (uint64_t)start, r);
  return r;
}

#if __WORDSIZE == 64
#define R_SYM(i) ELF64_R_SYM(i)
#else
#define R_SYM(i) ELF32_R_SYM(i)
#endif

/* Points the slots of liblmdb's import table for pwrite, writev and lseek
** at the hooks; counts those of pwrite and writev in *(int *)data (the
** log needs them; lseek's only spares the writev's hook a system call). */
static int patch_object (struct dl_phdr_info *info, size_t size, void *data) {
  const ElfW(Dyn) *dyn = NULL;
  const ElfW(Sym) *syms = NULL;
  const char *strs = NULL;
  const ElfW(Rela) *rel[2] = { NULL, NULL };
  size_t relsz[2] = { 0, 0 };
  uintptr_t target = (uintptr_t)(void *)mdb_env_open, lo, hi;
  int i, found = 0, k;
  (void)size;
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      lo = info->dlpi_addr + ph->p_vaddr;
      hi = lo + ph->p_memsz;
      if (target >= lo && target < hi) found = 1;
    }
    if (ph->p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
  }
  if (!found || dyn == NULL) return 0;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    uintptr_t p = dyn->d_un.d_ptr;
    if (p < info->dlpi_addr) p += info->dlpi_addr;   /* not relocated */
    switch (dyn->d_tag) {
      case DT_SYMTAB: syms = (const ElfW(Sym) *)p; break;
      case DT_STRTAB: strs = (const char *)p; break;
      case DT_JMPREL: rel[0] = (const ElfW(Rela) *)p; break;
      case DT_PLTRELSZ: relsz[0] = dyn->d_un.d_val; break;
      case DT_RELA: rel[1] = (const ElfW(Rela) *)p; break;
      case DT_RELASZ: relsz[1] = dyn->d_un.d_val; break;
      default: break;
    }
  }
  if (syms == NULL || strs == NULL) return 1;
  for (k = 0; k < 2; k++) {
    size_t j;
    if (rel[k] == NULL) continue;
    for (j = 0; j < relsz[k] / sizeof(ElfW(Rela)); j++) {
      const char *name = strs + syms[R_SYM(rel[k][j].r_info)].st_name;
      void *hook = strcmp(name, "pwrite") == 0 || strcmp(name, "pwrite64") == 0
                   ? (void *)hook_pwrite
                   : strcmp(name, "writev") == 0 ? (void *)hook_writev
                   : strcmp(name, "lseek") == 0 || strcmp(name, "lseek64") == 0
                   ? (void *)hook_lseek : NULL;
      void **slot;
      uintptr_t page;
      long ps = sysconf(_SC_PAGESIZE);
      if (hook == NULL) continue;
      slot = (void **)(info->dlpi_addr + rel[k][j].r_offset);
      page = (uintptr_t)slot & ~(uintptr_t)(ps - 1);
      if (mprotect((void *)page, (size_t)ps * 2, PROT_READ | PROT_WRITE) != 0)
        continue;
      *slot = hook;
      if (hook != (void *)hook_lseek) (*(int *)data)++;   /* lseek's is a help */
    }
  }
  return 1;
}

static int install_hooks (void) {
  int slots = 0;
  const char *ring;
  if (hooked) return hooked > 0 ? 0 : -1;
  if ((ring = getenv("REGOLITH_WAL_RING")) != NULL) {
    unsigned long long c, w;
    if (sscanf(ring, "%llu %llu", &c, &w) == 2 && c >= 4096 && w >= 4 * c) {
      ckpt_bytes = c;
      wrap_at = w;
      live_max = 16 * w;
      grow = w < GROW ? w : GROW;
    }
  }
  env_deltas = (ring = getenv("REGOLITH_LOG_DELTAS")) != NULL &&
               strcmp(ring, "1") == 0;
  dl_iterate_phdr(patch_object, &slots);
  hooked = slots >= 2 ? 1 : -1;
  return hooked > 0 ? 0 : -1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Opening, recovery
** ======================================================================
*/
/* Whether a process has the database's LMDB environment open: each one
** holds a shared lock on the first byte of lock.mdb while it does (LMDB's
** mdb_env_excl_lock).  Asked when the shared file was stamped by a build
** keeping another layout: once its processes are gone (an upgrade without
** a reboot), this one takes the log over as the first after a restart. */
static int in_use (const char *path) {
  char name[4096];
  struct flock l;
  int fd, used = 1;
  snprintf(name, sizeof(name), "%s/lock.mdb", path);
  if ((fd = open(name, O_RDWR | O_CLOEXEC)) < 0) return errno != ENOENT;
  memset(&l, 0, sizeof(l));
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 1;
  if (fcntl(fd, F_OFD_GETLK, &l) == 0) used = l.l_type != F_UNLCK;
  close(fd);
  return used;
}

/* The record of kind `magic` at `off` into rec, when it is whole: the
** transaction `expect` of epoch `epoch`, its checksum right (REC_MAGIC: a
** record with deltas too).  Its length, or 0. */
static uint32_t whole_record (rg_wal *w, uint64_t off, uint32_t magic,
                              uint64_t expect, uint64_t epoch, rg_buf *rec) {
  uint8_t head[REC_HEAD];
  uint32_t m, len;
  uint64_t ep, txnid, sum, zero = 0;
  if (pread(w->wfd, head, REC_HEAD, (off_t)off) != REC_HEAD) return 0;
  memcpy(&m, head, 4);
  memcpy(&len, head + 4, 4);
  memcpy(&ep, head + 8, 8);
  memcpy(&txnid, head + 16, 8);
  memcpy(&sum, head + 32, 8);
  if ((m != magic && !(magic == REC_MAGIC && m == DELTA_MAGIC)) ||
      ep != epoch || txnid != expect ||
      len < REC_HEAD || len > CAPTURE_MAX + 4096 || len % 8) return 0;
  rec->n = 0;
  if (rg_buf_reserve(rec, len) != 0) return 0;
  if (pread(w->wfd, rec->p, len, (off_t)off) != (ssize_t)len) return 0;
  memcpy((uint8_t *)rec->p + 32, &zero, 8);
  if (rg_sum64((const uint8_t *)rec->p, len) != sum) return 0;
  rec->n = len;
  return len;
}

/* The next record of a replay, transaction `expect`, at *off into rec:
** at *off, or, when a whole jump of that transaction is there, at
** REC_START (*off set to it).  Its length, or 0 when it is not whole. */
static uint32_t next_record (rg_wal *w, uint64_t *off, uint64_t expect,
                             uint64_t epoch, rg_buf *rec) {
  uint32_t len = whole_record(w, *off, REC_MAGIC, expect, epoch, rec);
  if (len == 0 && *off != REC_START &&
      whole_record(w, *off, JUMP_MAGIC, expect, epoch, rec) == REC_HEAD &&
      (len = whole_record(w, REC_START, REC_MAGIC, expect, epoch, rec)) != 0)
    *off = REC_START;
  return len;
}

/*
** Where the records end (the next one, `expect`, is not whole): an end, or
** damage?  A crash leaves the last record torn, and may leave the one
** after it whole (a transaction starts once the log is flushed up to the
** one two before it: the disk may keep N + 1 and lose N), never one
** further on.  So a whole record of the epoch's transaction from expect + 2
** on anywhere in the log means a record in the middle was damaged;
** replaying up to it would set the database back and lose commits that
** were made durable.  Anywhere: past a jump the records go on at
** REC_START, before the end; and what a later lap leaves of an earlier one
** holds older transactions only (an epoch writes a transaction's record
** once, a record unmade is zeroed first).  Returns that transaction, or 0.
*/
static uint64_t later_record (rg_wal *w, uint64_t expect, uint64_t epoch) {
  uint8_t buf[65536];
  rg_buf rec;
  uint64_t found = 0, off;
  ssize_t got;
  memset(&rec, 0, sizeof(rec));
  for (off = REC_START; !found && (got = pread(w->wfd, buf, sizeof(buf),
                                               (off_t)off)) >= REC_HEAD;
       off += (uint64_t)got - REC_HEAD) {
    size_t i;
    for (i = 0; i + REC_HEAD <= (size_t)got && !found; i += 8) {
      uint32_t magic;
      uint64_t ep, txnid;
      memcpy(&magic, buf + i, 4);
      if (magic != REC_MAGIC && magic != DELTA_MAGIC) continue;
      memcpy(&ep, buf + i + 8, 8);
      memcpy(&txnid, buf + i + 16, 8);
      if (ep == epoch && txnid >= expect + 2 && txnid < expect + (1u << 30) &&
          whole_record(w, off + i, REC_MAGIC, txnid, epoch, &rec))
        found = txnid;
    }
    if ((size_t)got < sizeof(buf)) break;
  }
  rg_buf_free(&rec);
  return found;
}

/* A delta segment of a replay (d, n bytes: the source's number, the
** page's sum, then the delta) makes the page at `off`: the source is read
** from the data file as the replay left it (a record before this one
** wrote it last, wal.h), its unused middle zeroed, the delta applied, and
** the page written only when it is the page the commit made (its number
** and 64-bit sum).  0, -1 (errno) when the file cannot be read or
** written, -2 when the page does not come out whole (damage). */
static int replay_delta (int dfd, unsigned psize, uint64_t off,
                         const uint8_t *d, uint32_t n, uint8_t *src,
                         uint8_t *out) {
  unsigned lo, up;
  if (n < DELTA_HEAD - 16 || psize == 0 || off % psize) return -2;
  if (pread(dfd, src, psize, (off_t)(rg_le64(d) * psize)) != (ssize_t)psize)
    return -2;
  if (!rg_pdelta_usable(src, psize, &lo, &up)) return -2;
  rg_pdelta_trim(src, psize);
  if (rg_pdelta_make(src, d + 16, n - 16, psize, off / psize, rg_le64(d + 8),
                     out) != 0)
    return -2;
  return pwrite(dfd, out, psize, (off_t)off) == (ssize_t)psize ? 0 : -1;
}

/* The newest transaction either meta page of the data file names. */
static uint64_t data_txnid (int dfd, unsigned psize) {
  uint64_t t, best = 0;
  uint8_t m[META_LEN];
  int i;
  for (i = 0; i < 2; i++)
    if (pread(dfd, m, META_LEN, (off_t)i * psize + META_OFF) == META_LEN) {
      memcpy(&t, m + META_TXNID, 8);
      if (t > best) best = t;
    }
  return best;
}

/*
** Replays the log into the data file: every whole record from the header's
** base on, in order, then both meta pages set to the last one's.  Run by
** the first process after a restart, before LMDB opens the file.  The
** records are checked first, and nothing is written when the log is
** damaged in its middle (later_record): the database is refused instead.
*/
static int recover (rg_wal *w, const char *path, rg_err *e) {
  header h;
  char name[4096];
  uint64_t off, expect, last, later;
  uint8_t meta[META_LEN];
  uint32_t len;
  rg_buf rec;
  uint8_t *pages = NULL;
  int dfd;
  if (read_header(w->wfd, &h) != 0 || (h.flags & (F_UNLOGGED | F_CLOSED)))
    return 0;
  snprintf(name, sizeof(name), "%s/data.mdb", path);
  memset(&rec, 0, sizeof(rec));
  for (off = h.base_off, expect = h.base + 1;
       (len = next_record(w, &off, expect, h.epoch, &rec)) != 0; expect++)
    off += len;
  if ((later = later_record(w, expect, h.epoch)) != 0) {
    rg_buf_free(&rec);
    return rg_fail(e, 500, "the database '%s' is damaged: its log "
                   "(regolith.wal) does not check out at byte %llu (the "
                   "record of transaction %llu), and holds transaction %llu "
                   "further on; replaying only what comes before would lose "
                   "commits made durable: restore it from a backup", path,
                   (unsigned long long)off, (unsigned long long)expect,
                   (unsigned long long)later);
  }
  if ((dfd = open(name, O_RDWR | O_CLOEXEC)) < 0) {
    rg_buf_free(&rec);
    return 0;
  }
  /* the data file's meta pages, written after the log's record (flushed
  ** first under sync "full"; under "lazy" up to two commits behind), may
  ** not be more than two transactions past the log's end */
  if ((later = data_txnid(dfd, h.psize)) > expect + 1) {
    rg_buf_free(&rec);
    close(dfd);
    return rg_fail(e, 500, "the database '%s' is damaged: its log "
                   "(regolith.wal) ends at transaction %llu, while the data "
                   "file holds transaction %llu: the log was cut short or "
                   "damaged, and replaying it would lose commits made "
                   "durable: restore it from a backup", path,
                   (unsigned long long)(expect - 1),
                   (unsigned long long)later);
  }
  if (h.psize == 0 || (pages = (uint8_t *)malloc(2u * h.psize)) == NULL) {
    rg_buf_free(&rec);
    close(dfd);
    return rg_fail(e, 500, "out of memory");
  }
  last = h.base;
  memcpy(meta, h.meta, META_LEN);
  for (off = h.base_off, expect = h.base + 1;
       (len = next_record(w, &off, expect, h.epoch, &rec)) != 0; expect++) {
    size_t at = REC_HEAD;
    uint32_t nseg, i;
    memcpy(&nseg, (uint8_t *)rec.p + 24, 4);
    for (i = 0; i < nseg && at + 16 <= len; i++) {
      const uint8_t *seg = (const uint8_t *)rec.p + at;
      uint64_t soff = rg_le64(seg);
      uint32_t slen = rg_le32(seg + 8), kind = rg_le32(seg + 12);
      int rc;
      at += 16;
      if (at + slen > len) break;
      if (kind == SEG_DELTA)
        rc = replay_delta(dfd, h.psize, soff, seg + 16, slen, pages,
                          pages + h.psize);
      else if (kind != 0) rc = -2;
      else rc = pwrite(dfd, seg + 16, slen, (off_t)soff) == (ssize_t)slen ? 0 : -1;
      if (rc != 0) {
        rg_buf_free(&rec);
        free(pages);
        close(dfd);
        if (rc == -1) return fail_errno(e, "replaying the", name);
        return rg_fail(e, 500, "the database '%s' is damaged: the record of "
                       "transaction %llu in its log (regolith.wal) holds a "
                       "page (at byte %llu of data.mdb) that its source "
                       "page does not make: restore it from a backup", path,
                       (unsigned long long)expect, (unsigned long long)soff);
      }
      at += (slen + 7) / 8 * 8;
    }
    last = expect;
    off += len;
  }
  rg_buf_free(&rec);
  free(pages);
  if (last > h.base && read_meta(dfd, h.psize, last, meta) != 0) {
    close(dfd);
    return rg_fail(e, 500, "storage failure: replaying the log: the meta page "
                   "of transaction %llu is missing", (unsigned long long)last);
  }
  if (fit_meta(dfd, h.psize, meta, META_LEN, META_OFF, NULL) != 0 ||
      pwrite(dfd, meta, META_LEN, META_OFF) != META_LEN ||
      pwrite(dfd, meta, META_LEN, (off_t)h.psize + META_OFF) != META_LEN ||
      fdatasync(dfd) != 0) {
    close(dfd);
    return fail_errno(e, "replaying the", name);
  }
  close(dfd);
  return 0;
}

void rg_wal_close (rg_wal *w) {
  int i;
  if (w == NULL) return;
  checkpoint_join(w);
  if (w->fl_pid == getpid()) {            /* the flusher of this process */
    pthread_mutex_lock(&w->fl_mu);
    w->fl_stop = 1;
    pthread_cond_broadcast(&w->fl_cv);
    pthread_mutex_unlock(&w->fl_mu);
    pthread_join(w->fl_thread, NULL);
    pthread_mutex_destroy(&w->fl_mu);
    pthread_cond_destroy(&w->fl_cv);
  }
  for (i = 0; i < 64; i++) if (reg[i].w == w) reg[i].w = NULL;
  if (w->locked) rg_file_lock(w->sfd, F_UNLCK);
  if (w->sh) munmap(w->sh, sizeof(shared));
  if (w->sfd >= 0) close(w->sfd);
  if (w->wfd >= 0) close(w->wfd);
  rg_buf_free(&w->rec);
  rg_buf_free(&w->rec2);
  rg_buf_free(&w->held);
  rg_pgcache_free(w->pc);
  free(w->fresh);
  free(w->ftab);
  for (i = 0; i < (int)w->npool; i++) free(w->fpool[i]);
  free(w->fpool);
  free(w->scratch);
  free(w);
}

int rg_wal_check_lmdb (int major, int minor, int patch, rg_err *e) {
  if (major == 0 && minor == 9 && MDB_VERSION_MAJOR == 0 &&
      MDB_VERSION_MINOR == 9)
    return 0;
  return rg_fail(e, 500, "liblmdb %d.%d.%d is not the LMDB 0.9 whose page "
                 "and meta layout the write-ahead log reads (built against "
                 "%d.%d.%d): it can neither log nor replay this database's "
                 "commits", major, minor, patch, MDB_VERSION_MAJOR,
                 MDB_VERSION_MINOR, MDB_VERSION_PATCH);
}

static int wal_open (const char *path, int readonly, rg_wal **out, rg_err *e) {
  char name[4096];
  struct stat st;
  rg_wal *w;
  int rc, created = 0;
  *out = NULL;
  if (install_hooks() != 0) return 0;
  w = (rg_wal *)calloc(1, sizeof(rg_wal));
  if (w == NULL) return rg_fail(e, 500, "out of memory");
  w->wfd = w->sfd = w->dfd = -1;
  w->readonly = readonly;
  w->use_deltas = env_deltas;
  if (rg_boot_id(w->boot) != 0) { free(w); return 0; }
  snprintf(name, sizeof(name), "%s/regolith.shm", path);
  w->sfd = open(name, O_RDWR | (readonly ? 0 : O_CREAT) | O_CLOEXEC, 0644);
  if (w->sfd < 0 && readonly) {   /* cannot take part: read the file as is */
    free(w);
    return 0;
  }
  if (w->sfd < 0 ||
      fstat(w->sfd, &st) != 0 ||
      (st.st_size < (off_t)sizeof(shared) &&
       posix_fallocate(w->sfd, 0, 4096) != 0)) {
    rc = fail_errno(e, "opening the", name);
    rg_wal_close(w);
    return rc;
  }
  w->sh = (shared *)mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE,
                         MAP_SHARED, w->sfd, 0);
  if (w->sh == MAP_FAILED) {
    w->sh = NULL;
    rc = fail_errno(e, "mapping the", name);
    rg_wal_close(w);
    return rc;
  }
  snprintf(name, sizeof(name), "%s/regolith.wal", path);
  w->wfd = open(name, O_RDWR | O_CLOEXEC);
  if (w->wfd < 0 && errno == ENOENT && !readonly) {
    w->wfd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    created = 1;
  }
  if (w->wfd < 0 && readonly) {
    rg_wal_close(w);
    return 0;
  }
  if (w->wfd < 0 || rg_file_lock(w->sfd, F_WRLCK) != 0) {
    rc = fail_errno(e, "opening the", name);
    rg_wal_close(w);
    return rc;
  }
  w->locked = 1;
  if (created) {                     /* the new file's name must survive */
    int dfd = open(path, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
  }
  if (w->sh->magic == SHM_MAGIC && memcmp(w->sh->boot, w->boot, 40) == 0 &&
      (w->sh->layout == SHM_LAYOUT || in_use(path))) {
    rg_file_lock(w->sfd, F_UNLCK);     /* others run it: join them */
    w->locked = 0;
    if (w->sh->layout != SHM_LAYOUT) {     /* ... unless they keep another */
      rg_wal_close(w);
      return rg_fail(e, 409, "the database is in use by a process of an older "
                     "build of regolith, whose log this one cannot share: "
                     "close it first");
    }
  }
  else {                                   /* the first since the boot */
    if ((rc = recover(w, path, e)) != 0) { rg_wal_close(w); return rc; }
    w->recovered = 1;
  }
  *out = w;
  return 0;
}

int rg_wal_open (const char *path, int readonly, rg_wal **out, rg_err *e) {
  int major, minor, patch, rc;
  *out = NULL;
  /* the layout the log reads and writes is LMDB 0.9's: a library of
     another would have its pages misread, and a replay write them wrong */
  mdb_version(&major, &minor, &patch);
  if ((rc = rg_wal_check_lmdb(major, minor, patch, e))) return rc;
  rc = wal_open(path, readonly, out, e);
  return readonly ? 0 : rc;       /* read-only: what it can, or the file as is */
}

uint64_t rg_wal_base (const char *path, int *closed) {
  char name[4096];
  header h;
  uint64_t base = 0;
  int fd;
  if (closed) *closed = 0;
  snprintf(name, sizeof(name), "%s/regolith.wal", path);
  if ((fd = open(name, O_RDONLY | O_CLOEXEC)) < 0) return 0;
  if (read_header(fd, &h) == 0) {
    base = h.base;
    if (closed) *closed = (h.flags & F_CLOSED) != 0;
  }
  close(fd);
  return base;
}

int rg_wal_forget (const char *path, rg_err *e) {
  /* and the identity of the file that was there (preflight.h); the write
  ** queue's file is named for its layout (queue.c: layout 1's, then 2's) */
  static const char *const names[] = { "regolith.wal", "regolith.shm",
                                        "regolith.id", "regolith.queue",
                                        "regolith.queue.2" };
  char name[4096];
  int i;
  for (i = 0; i < 5; i++) {
    snprintf(name, sizeof(name), "%s/%s", path, names[i]);
    if (unlink(name) != 0 && errno != ENOENT)
      return fail_errno(e, "removing the", name);
  }
  return rg_sync_dir(path, e);
}

void rg_wal_deltas (rg_wal *w) { w->use_deltas = 1; }

int rg_wal_attach (rg_wal *w, MDB_env *mdb, rg_err *e) {
  MDB_stat st;
  MDB_envinfo info;
  struct stat fs;
  int i, rc = 0, fd;
  if (mdb_env_get_fd(mdb, &fd) != 0) return rg_fail(e, 500, "no data file");
  w->dfd = fd;
  {
    /* held pages overwrite only blocks the file has: up to its first hole,
    ** on a file system that overwrites them in place.  A copy-on-write one
    ** (btrfs, ZFS) may refuse an overwrite for room, and a held page's
    ** write failing at the meta page is fatal to LMDB's handle, where a
    ** full disk must fail only the write (507). */
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    struct statfs fs;
    w->dwritten = hole > 0 ? (uint64_t)hole : 0;
    w->inplace = fstatfs(fd, &fs) == 0 && in_place(fs.f_type);
    w->at_known = 0;
  }
  mdb_env_stat(mdb, &st);
  w->psize = st.ms_psize;
  if (w->recovered) {
    shared *sh = w->sh;
    header h;
    mdb_env_info(mdb, &info);
    memset(sh, 0, sizeof(*sh));
    if (read_header(w->wfd, &h) == 0) {
      sh->epoch = h.epoch;
      sh->hseq = h.seq;
    }
    sh->size = fstat(w->wfd, &fs) == 0 ? (uint64_t)fs.st_size : 0;
    sh->layout = SHM_LAYOUT;
    rc = checkpoint(w, (uint64_t)info.me_last_txnid, 0, e);
    if (rc == 0) {
      memcpy(sh->boot, w->boot, 40);
      sh->magic = SHM_MAGIC;
    }
    w->recovered = 0;
  }
  if (w->locked) {
    rg_file_lock(w->sfd, F_UNLCK);
    w->locked = 0;
  }
  if (rc || w->readonly) return rc;
  for (i = 0; i < 64; i++)
    if (reg[i].w == NULL) { reg[i].fd = fd; reg[i].w = w; return 0; }
  return rg_fail(e, 500, "too many databases open in this process");
}
/* }===================================================================== */


/*
** {=====================================================================
** Transactions
** ======================================================================
*/
/* The records of a later lap are about to reach the live ones (the
** checkpoints did not keep up), or the live log is very long: a
** checkpoint under the writer lock restarts it. */
static int ring_full (shared *sh) {
  uint64_t b = base_off(sh);
  if (sh->next_off < b && b - sh->next_off < wrap_at / 16) return 1;
  return live_bytes(sh) > live_max;
}

int rg_wal_begin (rg_wal *w, MDB_txn *txn, int sync, rg_err *e) {
  shared *sh = w->sh;
  uint64_t t = (uint64_t)mdb_txn_id(txn), last = t - 1;
  int rc;
  w->txnid = t;
  w->sync = sync;
  w->capturing = w->overflow = w->failed = w->pending = w->kicked = 0;
  w->nohold = w->committing = w->kept = 0;
  w->nseg = 0;
  w->rec.n = 0;
  w->held.n = 0;
  w->held.oom = 0;
  if (sync == RG_SYNC_NONE)              /* not logged: the file is the truth */
    return sh->unlogged && !sh->closed ? 0 : checkpoint(w, last, F_UNLOGGED, e);
  checkpoint_settle(sh, last, t);
  if (sh->unlogged || sh->closed || sh->last_txnid < last || sh->last_txnid > t ||
      ring_full(sh)) {
    if ((rc = checkpoint(w, last, 0, e))) return rc;
  }
  else if (sh->last_txnid == t) {
    /* the record of a transaction whose commit failed, or whose process
    ** died before committing it: unmade before another takes its place */
    if (unmake_last(w, last) != 0)
      return fail_errno(e, "repairing the", "log");
  }
  /* LMDB may rewrite pages that the transaction two before this one
  ** freed: the replay must reach at least that one */
  if (synced(sh) + 2 < t && flush_log(w) != 0) return fail_errno(e, "flushing the", "regolith.wal");
  /* room for the record, made before anything is written: on a full disk
  ** the transaction fails here, whole, rather than at its commit, when
  ** LMDB has made it and only a checkpoint could make it durable */
  if (sh->next_off >= base_off(sh) && sh->next_off + grow > sh->size &&
      grow_log(w, sh->next_off + grow) != 0)
    return fail_errno(e, "growing the", "regolith.wal");
  if (rg_buf_reserve(&w->rec, REC_HEAD) != 0) return rg_fail(e, 500, "out of memory");
  w->rec.n = REC_HEAD;
  w->capturing = 1;
  return 0;
}

int rg_wal_closing (rg_wal *w, MDB_txn *txn, rg_err *e) {
  if (w->readonly) return 0;
  return checkpoint(w, (uint64_t)mdb_txn_id(txn) - 1,
                    F_CLOSED | (w->sh->unlogged ? F_UNLOGGED : 0u), e);
}

int rg_wal_durable (rg_wal *w, rg_err *e) {
  int rc = 0;
  if (w->kicked) {                        /* its flush, begun at the record */
    w->kicked = 0;
    if (flush_wait(w) != 0) {
      w->pending = 0;
      rc = fail_errno(e, "flushing the", "regolith.wal (the commit is made; "
                      "whether it would survive a power cut is unknown)");
    }
  }
  if (w->failed)
    return rg_fail(e, 500, "storage failure: the commit is made but could not "
                   "be flushed (its checkpoint failed)");
  deltas_made(w);
  if (w->claimed) {                       /* its claim: committed */
    checkpoint_settle(w->sh, w->txnid, 0);
    w->claimed = 0;
  }
  if (rc == 0 && w->pending && synced(w->sh) < w->txnid && flush_log(w) != 0)
    rc = fail_errno(e, "flushing the", "regolith.wal (the commit is made; "
                    "whether it would survive a power cut is unknown)");
  if (__atomic_load_n(&w->sh->ck_state, __ATOMIC_RELAXED) >= CK_READY)
    checkpoint_start(w);
  return rc;
}

int rg_wal_flush (rg_wal *w, rg_err *e) {
  if (synced(w->sh) < __atomic_load_n(&w->sh->last_txnid, __ATOMIC_ACQUIRE) &&
      flush_log(w) != 0)
    return fail_errno(e, "flushing the", "regolith.wal");
  return 0;
}

void rg_wal_committing (rg_wal *w) {
  w->committing = 1;
}

int rg_wal_kept (const rg_wal *w) {
  return w->kept;
}

void rg_wal_end (rg_wal *w) {
  deltas_end(w);
  w->capturing = 0;
  w->claimed = 0;
  w->committing = 0;
  if (w->kicked) {                        /* a commit that failed after it */
    w->kicked = 0;
    flush_wait(w);
  }
  w->held.n = 0;
  if (w->rec.cap > CAPTURE_MAX / 4) rg_buf_free(&w->rec);
  if (w->rec2.cap > REC2_KEEP) rg_buf_free(&w->rec2);
  if (w->held.cap > HOLD_MAX / 4) rg_buf_free(&w->held);
}

void rg_wal_stats (rg_wal *w, rg_wal_stat *out) {
  shared *sh = w->sh;
  memset(out, 0, sizeof(*out));
  if (sh == NULL || sh->layout != SHM_LAYOUT) return;
  out->records = __atomic_load_n(&sh->n_records, __ATOMIC_RELAXED);
  out->bytes = __atomic_load_n(&sh->n_bytes, __ATOMIC_RELAXED);
  out->flushes = __atomic_load_n(&sh->n_flushes, __ATOMIC_RELAXED);
  out->checkpoints = __atomic_load_n(&sh->n_ckpt_run, __ATOMIC_RELAXED);
  out->checkpoints_locked = __atomic_load_n(&sh->n_ckpt_lock, __ATOMIC_RELAXED);
  out->deltas = __atomic_load_n(&sh->n_deltas, __ATOMIC_RELAXED);
}
/* }===================================================================== */
