/*
** wal.c: the write-ahead log in front of LMDB (wal.h says what and why).
**
** The log file: two header slots of 4 KiB (a checkpoint writes the one its
** epoch names, so that a torn header leaves the other), then records from
** REC_START on.  A header: magic | epoch | base txnid | page size | flags
** (UNLOGGED: the data file alone is the truth) | boot | the base's meta
** (bytes 16..152 of its meta page) | checksum.  A record: magic | length
** | epoch | txnid | segments | checksum, then the segments: file offset |
** length | bytes (padded to 8).  A checkpoint flushes the data file,
** writes a header with the next epoch, flushes the log, and makes records
** start over at REC_START: records left there from before carry the old
** epoch, so replay stops at them.
**
** Seeing LMDB's writes.  liblmdb calls pwrite (one page, the meta page)
** and lseek+writev (runs of pages); its import table's slots for pwrite and
** writev are pointed at hook_pwrite and hook_writev once per process
** (install_hooks).  The hooks let every write through, and while a write
** scope of a logged database runs, copy what LMDB writes to its data file
** into the record; the meta page, the last write of a commit, makes the
** hook append the record and flush the log first.
*/

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "store/guarded.h"
#include "store/local.h"
#include "store/pagecheck.h"
#include "store/pages.h"
#include "store/wal.h"

#define HDR_SLOT     4096
#define REC_START    8192
#define REC_HEAD     40
#define LOG_LIMIT    (32u << 20)     /* checkpoint when the log is longer */
#define CAPTURE_MAX  (64u << 20)     /* a bigger commit checkpoints instead */
#define GROW         (1u << 20)      /* the log grows by zeros, this much */
#define WAL_MAGIC    0x3130304c41574752ull  /* "RGWAL001" */
#define REC_MAGIC    0x43524752u            /* "RGRC" */
#define SHM_MAGIC    0x314d485347524752ull  /* "RGRGSHM1" */
#define META_OFF     16              /* the meta after the page header */
#define META_LEN     136             /* sizeof(MDB_meta), LMDB 0.9 (checked
                                        against mdb_version at open) */
#define META_TXNID   128             /* mm_txnid inside it */
#define F_UNLOGGED   1u             /* commits since are not logged */
#define F_CLOSED     2u             /* no commit since: the data file is whole */

/* LMDB 0.9's page header: pgno u64 | pad u16 | flags u16 | lower | upper */
#define P_BRANCH     0x01
#define P_LEAF       0x02
#define P_OVERFLOW   0x04
#define P_META       0x08
#define P_LEAF2      0x20

/* What the processes of one database share (regolith.shm, never flushed). */
typedef struct shared {
  uint64_t magic;
  char boot[40];
  uint64_t epoch, next_off, base, last_txnid, last_start, synced, size;
  uint32_t unlogged, closed;
  /* guards `synced` and `gen`, which a process flushing the log after its
  ** commit (outside the writer lock) updates; `gen` changes whenever
  ** records may be unmade (a checkpoint, a repair), so that a flush that
  ** began before does not vouch for records written after */
  pthread_mutex_t mu;
  uint64_t gen;
  uint32_t mu_state;         /* 0: not made yet, 1: being made, 2: made */
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
};

static int hooked;           /* 0 not tried, 1 installed, -1 impossible */
static struct { int fd; rg_wal *w; } reg[64];


/*
** {=====================================================================
** Checksums, headers
** ======================================================================
*/
static uint64_t rotl (uint64_t x, int r) { return x << r | x >> (64 - r); }

/* A 64-bit hash over four lanes: it tells a torn or stale record from a
** whole one (no adversary writes the log). */
static uint64_t hash64 (const uint8_t *p, size_t n) {
  const uint64_t K1 = 0x9E3779B97F4A7C15ull, K2 = 0xC2B2AE3D27D4EB4Full;
  uint64_t h[4] = { K1, K2, K1 ^ n, K2 ^ n }, w, r;
  size_t i = 0;
  int k;
  for (; i + 32 <= n; i += 32)
    for (k = 0; k < 4; k++) {
      memcpy(&w, p + i + 8 * k, 8);
      h[k] = rotl(h[k] ^ w * K2, 31) * K1;
    }
  for (; i < n; i++) h[i & 3] = rotl(h[i & 3] ^ p[i] * K2, 31) * K1;
  r = rotl(h[0], 1) + rotl(h[1], 7) + rotl(h[2], 12) + rotl(h[3], 18);
  r ^= r >> 33; r *= K2; r ^= r >> 29; r *= K1; r ^= r >> 32;
  return r;
}

typedef struct header {
  uint64_t magic, epoch, base;
  uint32_t psize, flags;
  char boot[40];
  uint8_t meta[META_LEN];
  uint64_t sum;
} header;

static int read_header (int wfd, header *out) {
  header h[2];
  int i, best = -1;
  for (i = 0; i < 2; i++) {
    if (pread(wfd, &h[i], sizeof(header), (off_t)i * HDR_SLOT) != (ssize_t)sizeof(header))
      continue;
    if (h[i].magic != WAL_MAGIC ||
        h[i].sum != hash64((const uint8_t *)&h[i], offsetof(header, sum)))
      continue;
    if (best < 0 || h[i].epoch > h[best].epoch) best = i;
  }
  if (best < 0) return -1;
  *out = h[best];
  return 0;
}

static int fail_errno (rg_err *e, const char *what, const char *path) {
  int err = errno;
  return rg_fail(e, err == ENOSPC || err == EDQUOT ? 507 : 500,
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

/* Writes zeros from the log's end to `to` (or GROW further), so that the
** records written there later overwrite allocated blocks. */
static int grow_log (rg_wal *w, uint64_t to) {
  static const uint8_t zeros[65536];
  uint64_t at = w->sh->size < REC_START ? REC_START : w->sh->size;   /* never the headers */
  uint64_t end = to > at + GROW ? to : at + GROW;
  while (at < end) {
    size_t n = end - at < sizeof(zeros) ? (size_t)(end - at) : sizeof(zeros);
    ssize_t r = pwrite(w->wfd, zeros, n, (off_t)at);
    if (r <= 0) return -1;
    at += (uint64_t)r;
  }
  w->sh->size = end;
  return 0;
}

/* The mutex is made by the first process that needs it (a shared file
** from a build before it holds zeros there, and its processes never use
** it): process-shared, and robust, so that a process dying while it holds
** it leaves it usable. */
static void make_mu (shared *sh) {
  uint32_t zero = 0;
  if (__atomic_compare_exchange_n(&sh->mu_state, &zero, 1, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    __atomic_store_n(&sh->mu_state, 2, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(&sh->mu_state, __ATOMIC_ACQUIRE) != 2) sched_yield();
}

static void lock_mu (shared *sh) {
  if (__atomic_load_n(&sh->mu_state, __ATOMIC_ACQUIRE) != 2) make_mu(sh);
  if (pthread_mutex_lock(&sh->mu) == EOWNERDEAD)   /* died holding it: */
    pthread_mutex_consistent(&sh->mu);              /* two words, no harm */
}

/* With the writer lock held: the log is flushed up to `txnid` (a flush
** under the lock, a checkpoint), or records from after `txnid` on may be
** unmade (`unmade`, a repair): flushes begun before vouch for nothing. */
static void set_synced (shared *sh, uint64_t txnid, int unmade) {
  lock_mu(sh);
  sh->synced = txnid;
  if (unmade) sh->gen++;
  pthread_mutex_unlock(&sh->mu);
}

static uint64_t synced (shared *sh) {
  uint64_t t;
  lock_mu(sh);
  t = sh->synced;
  pthread_mutex_unlock(&sh->mu);
  return t;
}

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
  lock_mu(sh);
  if (sh->gen == gen && sh->synced < upto) sh->synced = upto;
  pthread_mutex_unlock(&sh->mu);
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
  uint32_t len = (uint32_t)w->rec.n, magic = REC_MAGIC;
  uint64_t off = sh->next_off, sum = 0;
  if (w->overflow || w->rec.oom) { errno = EFBIG; return -1; }
  memcpy(r, &magic, 4);
  memcpy(r + 4, &len, 4);
  memcpy(r + 8, &sh->epoch, 8);
  memcpy(r + 16, &w->txnid, 8);
  memcpy(r + 24, &w->nseg, 4);
  memset(r + 28, 0, 4);
  memcpy(r + 32, &sum, 8);
  sum = hash64(r, len);
  memcpy(r + 32, &sum, 8);
  if (off + len > sh->size && grow_log(w, off + len) != 0) return -1;
  if (pwrite(w->wfd, r, len, (off_t)off) != (ssize_t)len) return -1;
  sh->last_start = off;
  __atomic_store_n(&sh->last_txnid, w->txnid, __ATOMIC_RELEASE);
  sh->next_off = off + len;
  w->pending = w->sync == RG_SYNC_FULL && synced(sh) < w->txnid;
  return 0;
}

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

/*
** A checkpoint at transaction `base` (the last committed, the writer lock
** held): the data file is flushed, then a header names `base` as where the
** log starts, and records start over.  0 or a status.
*/
static int checkpoint (rg_wal *w, uint64_t base, unsigned flags, rg_err *e) {
  shared *sh = w->sh;
  header h;
  memset(&h, 0, sizeof(h));
  /* the records first: until the new header is on the disk the old one
  ** rules, and a replay from it over the flushed data file must reach the
  ** last commit, or it would set the meta pages back behind what the data
  ** file's flush made durable */
  if (synced(sh) < sh->last_txnid && flush_log(w) != 0)
    return fail_errno(e, "flushing the", "regolith.wal");
  if (fdatasync(w->dfd) != 0) return fail_errno(e, "flushing the data file for the", "checkpoint");
  if (read_meta(w->dfd, w->psize, base, h.meta) != 0)
    return rg_fail(e, 500, "storage failure: checkpoint: no meta page holds "
                   "transaction %llu", (unsigned long long)base);
  h.magic = WAL_MAGIC;
  h.epoch = sh->epoch + 1;
  h.base = base;
  h.psize = w->psize;
  h.flags = flags;
  memcpy(h.boot, w->boot, sizeof(h.boot));
  h.sum = hash64((const uint8_t *)&h, offsetof(header, sum));
  if (pwrite(w->wfd, &h, sizeof(h), (off_t)(h.epoch % 2) * HDR_SLOT) != (ssize_t)sizeof(h) ||
      fdatasync(w->wfd) != 0)
    return fail_errno(e, "writing the", "checkpoint");
  sh->epoch = h.epoch;
  sh->base = sh->last_txnid = base;
  set_synced(sh, base, 1);
  sh->next_off = REC_START;
  sh->last_start = 0;
  sh->unlogged = (flags & F_UNLOGGED) != 0;
  sh->closed = (flags & F_CLOSED) != 0;
  return 0;
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

/* Every page (or overflow run) LMDB writes to a data file gets its
** checksum (pagecheck.h) on its way, before the log copies it: each write
** is one page or run, the meta pages aside. */
static void stamp (int fd, const void *buf, size_t n, off_t off) {
  rg_wal *w = data_file(fd);
  if (w && w->psize && (uint64_t)off >= 2u * w->psize && n >= w->psize &&
      n % w->psize == 0) {
    rg_page_stamp((uint8_t *)(uintptr_t)buf, n);
    rg_guard_written(fd, (uint64_t)off, n);     /* guard.h */
  }
}

/* LMDB counts in a meta page's last page every page its transaction took,
** written or not: a page taken and given back within the transaction (a
** loose page) is never written, and when it is the last one the file ends
** short of it.  The file is made that long (a hole) before the meta page
** naming it is written, so that a data file shorter than its meta page
** says is damage (preflight.h), never LMDB's bookkeeping.  buf: n bytes of
** a meta page written at off (LMDB writes its tail only). */
static int fit_meta (int fd, unsigned psize, const uint8_t *buf, size_t n,
                     uint64_t off) {
  struct stat st;
  uint64_t at = (off < psize ? 0 : psize) + RG_PG_HDR + RG_META_LASTPG, need;
  if (at < off || at + 8 > off + n) return 0;
  need = (rg_le64(buf + (at - off)) + 1) * psize;
  if (fstat(fd, &st) != 0) return -1;
  if ((uint64_t)st.st_size >= need) return 0;
  return ftruncate(fd, (off_t)need);
}

/* The meta page: the commit's last write.  The record goes to the log
** (flushed), then the meta page to the data file.  A record that cannot be
** logged (a full disk, a commit too big to copy) makes the commit durable
** through the data file instead: flushed, and a checkpoint at it. */
static ssize_t commit_meta (rg_wal *w, int fd, const void *buf, size_t n,
                            off_t off) {
  ssize_t r;
  int logged;
  rg_err e;
  capture(w, (const uint8_t *)buf, n, (uint64_t)off);
  logged = append_record(w) == 0;
  w->capturing = 0;
  r = pwrite(fd, buf, n, off);
  if (r != (ssize_t)n || logged) return r;
  if (checkpoint(w, w->txnid, 0, &e) != 0) w->failed = 1;
  return r;
}

static ssize_t hook_pwrite (int fd, const void *buf, size_t n, off_t off) {
  rg_wal *w = logging(fd), *d = data_file(fd);
  stamp(fd, buf, n, off);
  if (d && d->psize && (uint64_t)off < 2u * d->psize &&
      fit_meta(fd, d->psize, (const uint8_t *)buf, n, (uint64_t)off) != 0)
    return -1;                       /* LMDB fails the commit (errno) */
  if (w == NULL) return pwrite(fd, buf, n, off);
  if ((uint64_t)off < 2u * w->psize) return commit_meta(w, fd, buf, n, off);
  capture(w, (const uint8_t *)buf, n, (uint64_t)off);
  return pwrite(fd, buf, n, off);
}

static ssize_t hook_writev (int fd, const struct iovec *iov, int cnt) {
  rg_wal *w = logging(fd);
  off_t at;
  int i;
  if (data_file(fd) != NULL && (at = lseek(fd, 0, SEEK_CUR)) >= 0)
    for (i = 0; i < cnt; i++) {
      stamp(fd, iov[i].iov_base, iov[i].iov_len, at);
      if (w != NULL)
        capture(w, (const uint8_t *)iov[i].iov_base, iov[i].iov_len,
                (uint64_t)at);
      at += (off_t)iov[i].iov_len;
    }
  return writev(fd, iov, cnt);
}

#if __WORDSIZE == 64
#define R_SYM(i) ELF64_R_SYM(i)
#else
#define R_SYM(i) ELF32_R_SYM(i)
#endif

/* Points the slots of liblmdb's import table for pwrite and writev at the
** hooks; counts the slots in *(int *)data. */
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
                   : strcmp(name, "writev") == 0 ? (void *)hook_writev : NULL;
      void **slot;
      uintptr_t page;
      long ps = sysconf(_SC_PAGESIZE);
      if (hook == NULL) continue;
      slot = (void **)(info->dlpi_addr + rel[k][j].r_offset);
      page = (uintptr_t)slot & ~(uintptr_t)(ps - 1);
      if (mprotect((void *)page, (size_t)ps * 2, PROT_READ | PROT_WRITE) != 0)
        continue;
      *slot = hook;
      (*(int *)data)++;
    }
  }
  return 1;
}

static int install_hooks (void) {
  int slots = 0;
  if (hooked) return hooked > 0 ? 0 : -1;
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
static int boot_id (char *out) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t n;
  memset(out, 0, 40);
  if (fd < 0) return -1;
  n = read(fd, out, 39);
  close(fd);
  return n >= 16 ? 0 : -1;
}

static int lock_shared_file (int fd, int type) {
  struct flock l;
  memset(&l, 0, sizeof(l));
  l.l_type = (short)type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 1;
  while (fcntl(fd, F_SETLKW, &l) != 0)
    if (errno != EINTR) return -1;
  return 0;
}

/* The record at `off` into rec, when it is whole: the transaction
** `expect` of epoch `epoch`, its checksum right.  Its length, or 0. */
static uint32_t whole_record (rg_wal *w, uint64_t off, uint64_t expect,
                              uint64_t epoch, rg_buf *rec) {
  uint8_t head[REC_HEAD];
  uint32_t magic, len;
  uint64_t ep, txnid, sum, zero = 0;
  if (pread(w->wfd, head, REC_HEAD, (off_t)off) != REC_HEAD) return 0;
  memcpy(&magic, head, 4);
  memcpy(&len, head + 4, 4);
  memcpy(&ep, head + 8, 8);
  memcpy(&txnid, head + 16, 8);
  memcpy(&sum, head + 32, 8);
  if (magic != REC_MAGIC || ep != epoch || txnid != expect ||
      len < REC_HEAD || len > CAPTURE_MAX + 4096 || len % 8) return 0;
  rec->n = 0;
  if (rg_buf_reserve(rec, len) != 0) return 0;
  if (pread(w->wfd, rec->p, len, (off_t)off) != (ssize_t)len) return 0;
  memcpy((uint8_t *)rec->p + 32, &zero, 8);
  if (hash64((const uint8_t *)rec->p, len) != sum) return 0;
  rec->n = len;
  return len;
}

/*
** Where the records end at `off` (the next one, `expect`, is not whole):
** an end, or damage?  A crash leaves the last record torn, and may leave
** the one after it whole (a transaction starts once the log is flushed up
** to the one two before it: the disk may keep N + 1 and lose N), never
** one further on.  So a whole record of a transaction from expect + 2 on
** further in the log means a record in the middle was damaged; replaying
** up to it would set the database back and lose commits that were made
** durable.  Returns that transaction, or 0.
*/
static uint64_t later_record (rg_wal *w, uint64_t off, uint64_t expect,
                              uint64_t epoch) {
  uint8_t buf[65536];
  rg_buf rec;
  uint64_t found = 0;
  ssize_t got;
  memset(&rec, 0, sizeof(rec));
  for (off += 8; !found && (got = pread(w->wfd, buf, sizeof(buf),
                                        (off_t)off)) >= REC_HEAD;
       off += (uint64_t)got - REC_HEAD) {
    size_t i;
    for (i = 0; i + REC_HEAD <= (size_t)got && !found; i += 8) {
      uint32_t magic;
      uint64_t ep, txnid;
      memcpy(&magic, buf + i, 4);
      if (magic != REC_MAGIC) continue;
      memcpy(&ep, buf + i + 8, 8);
      memcpy(&txnid, buf + i + 16, 8);
      if (ep == epoch && txnid >= expect + 2 && txnid < expect + (1u << 30) &&
          whole_record(w, off + i, txnid, epoch, &rec))
        found = txnid;
    }
    if ((size_t)got < sizeof(buf)) break;
  }
  rg_buf_free(&rec);
  return found;
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
  int dfd;
  if (read_header(w->wfd, &h) != 0 || (h.flags & (F_UNLOGGED | F_CLOSED)))
    return 0;
  snprintf(name, sizeof(name), "%s/data.mdb", path);
  memset(&rec, 0, sizeof(rec));
  for (off = REC_START, expect = h.base + 1;
       (len = whole_record(w, off, expect, h.epoch, &rec)) != 0; expect++)
    off += len;
  if ((later = later_record(w, off, expect, h.epoch)) != 0) {
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
  last = h.base;
  memcpy(meta, h.meta, META_LEN);
  for (off = REC_START, expect = h.base + 1;
       (len = whole_record(w, off, expect, h.epoch, &rec)) != 0; expect++) {
    size_t at = REC_HEAD;
    uint32_t nseg, i;
    memcpy(&nseg, (uint8_t *)rec.p + 24, 4);
    for (i = 0; i < nseg && at + 16 <= len; i++) {
      uint64_t soff;
      uint32_t slen;
      memcpy(&soff, (uint8_t *)rec.p + at, 8);
      memcpy(&slen, (uint8_t *)rec.p + at + 8, 4);
      at += 16;
      if (at + slen > len) break;
      if (pwrite(dfd, (uint8_t *)rec.p + at, slen, (off_t)soff) != (ssize_t)slen) {
        rg_buf_free(&rec);
        close(dfd);
        return fail_errno(e, "replaying the", name);
      }
      at += (slen + 7) / 8 * 8;
    }
    last = expect;
    off += len;
  }
  rg_buf_free(&rec);
  if (last > h.base && read_meta(dfd, h.psize, last, meta) != 0) {
    close(dfd);
    return rg_fail(e, 500, "storage failure: replaying the log: the meta page "
                   "of transaction %llu is missing", (unsigned long long)last);
  }
  if (fit_meta(dfd, h.psize, meta, META_LEN, META_OFF) != 0 ||
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
  for (i = 0; i < 64; i++) if (reg[i].w == w) reg[i].w = NULL;
  if (w->locked) lock_shared_file(w->sfd, F_UNLCK);
  if (w->sh) munmap(w->sh, sizeof(shared));
  if (w->sfd >= 0) close(w->sfd);
  if (w->wfd >= 0) close(w->wfd);
  rg_buf_free(&w->rec);
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
  if (boot_id(w->boot) != 0) { free(w); return 0; }
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
  if (w->wfd < 0 || lock_shared_file(w->sfd, F_WRLCK) != 0) {
    rc = fail_errno(e, "opening the", name);
    rg_wal_close(w);
    return rc;
  }
  w->locked = 1;
  if (created) {                     /* the new file's name must survive */
    int dfd = open(path, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
  }
  if (w->sh->magic == SHM_MAGIC && memcmp(w->sh->boot, w->boot, 40) == 0) {
    lock_shared_file(w->sfd, F_UNLCK);     /* others run it: join them */
    w->locked = 0;
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
  /* and the identity of the file that was there (preflight.h) */
  static const char *const names[] = { "regolith.wal", "regolith.shm",
                                        "regolith.id" };
  char name[4096];
  int i;
  for (i = 0; i < 3; i++) {
    snprintf(name, sizeof(name), "%s/%s", path, names[i]);
    if (unlink(name) != 0 && errno != ENOENT)
      return fail_errno(e, "removing the", name);
  }
  return rg_sync_dir(path, e);
}

int rg_wal_attach (rg_wal *w, MDB_env *mdb, rg_err *e) {
  MDB_stat st;
  MDB_envinfo info;
  struct stat fs;
  int i, rc = 0, fd;
  if (mdb_env_get_fd(mdb, &fd) != 0) return rg_fail(e, 500, "no data file");
  w->dfd = fd;
  mdb_env_stat(mdb, &st);
  w->psize = st.ms_psize;
  if (w->recovered) {
    shared *sh = w->sh;
    header h;
    mdb_env_info(mdb, &info);
    memset(sh, 0, sizeof(*sh));
    sh->epoch = read_header(w->wfd, &h) == 0 ? h.epoch : 0;
    sh->size = fstat(w->wfd, &fs) == 0 ? (uint64_t)fs.st_size : 0;
    rc = checkpoint(w, (uint64_t)info.me_last_txnid, 0, e);
    if (rc == 0) {
      memcpy(sh->boot, w->boot, 40);
      sh->magic = SHM_MAGIC;
    }
    w->recovered = 0;
  }
  if (w->locked) {
    lock_shared_file(w->sfd, F_UNLCK);
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
int rg_wal_begin (rg_wal *w, MDB_txn *txn, int sync, rg_err *e) {
  shared *sh = w->sh;
  uint64_t t = (uint64_t)mdb_txn_id(txn), last = t - 1;
  int rc;
  w->txnid = t;
  w->sync = sync;
  w->capturing = w->overflow = w->failed = w->pending = 0;
  w->nseg = 0;
  w->rec.n = 0;
  if (sync == RG_SYNC_NONE)              /* not logged: the file is the truth */
    return sh->unlogged && !sh->closed ? 0 : checkpoint(w, last, F_UNLOGGED, e);
  if (sh->unlogged || sh->closed || sh->next_off > LOG_LIMIT || sh->last_txnid < last ||
      sh->last_txnid > t) {
    if ((rc = checkpoint(w, last, 0, e))) return rc;
  }
  else if (sh->last_txnid == t) {
    /* the record of a transaction whose process died before committing
    ** it: unmade before another takes its place */
    uint64_t zero = 0;
    if (pwrite(w->wfd, &zero, 8, (off_t)sh->last_start) != 8 ||
        fdatasync(w->wfd) != 0)
      return fail_errno(e, "repairing the", "log");
    sh->next_off = sh->last_start;
    sh->last_txnid = last;
    set_synced(sh, sh->synced > last ? last : sh->synced, 1);
  }
  /* LMDB may rewrite pages that the transaction two before this one
  ** freed: the replay must reach at least that one */
  if (synced(sh) + 2 < t && flush_log(w) != 0) return fail_errno(e, "flushing the", "regolith.wal");
  /* room for the record, made before anything is written: on a full disk
  ** the transaction fails here, whole, rather than at its commit, when
  ** LMDB has made it and only a checkpoint could make it durable */
  if (sh->next_off + GROW > sh->size && grow_log(w, sh->next_off + GROW) != 0)
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
  if (w->failed)
    return rg_fail(e, 500, "storage failure: the commit is made but could not "
                   "be flushed (its checkpoint failed)");
  if (!w->pending || synced(w->sh) >= w->txnid) return 0;
  if (flush_log(w) != 0)
    return fail_errno(e, "flushing the", "regolith.wal (the commit is made; "
                      "whether it would survive a power cut is unknown)");
  return 0;
}

void rg_wal_end (rg_wal *w) {
  w->capturing = 0;
  if (w->rec.cap > CAPTURE_MAX / 4) rg_buf_free(&w->rec);
}
/* }===================================================================== */
