/*
** throughput.c: provisioned throughput (docs/throughput.md has the rule).
**
** Budgets.  A budget of R request units per second is split evenly among
** P physical partitions: a container's own among its `physical_partitions`,
** the database's among ceil(R / 10,000) partitions (Cosmos DB gives a new
** database one physical partition per 10,000 RU/s), onto which the logical
** partitions of the containers sharing it are mapped by their hash.  Each
** partition is a bucket of r = R / P RU/s holding at most one second of
** them (with burst, 300 seconds of idle capacity, drained at most 3,000
** RU/s).  A bucket is kept as one 64-bit word, the generic cell rate
** algorithm's "theoretical arrival time": `tat`, the instant (ns, on the
** system's monotonic clock) at which the bucket is full again.  With w the
** bucket's size as time (1 s), its balance at `now` is (now + w - tat) * r
** RU: a request is admitted while that is positive (tat < now + w), and
** its charge c moves tat to max(tat, now) + c / r, which may take the
** balance below zero: a debt, paid back by the refill before the next
** request is admitted (so a request larger than the budget still runs, as
** on the hosted service).  A 429 asks to retry after tat - w - now.
** Admission is a load, a debit a compare-and-swap: no lock, and correct
** across processes because the word lives in shared memory.
**
** Counters.  Each partition also counts the milli-RU it consumed, the
** requests it admitted and refused.  A request adds its count and its
** milli-RU to one word (`live`: requests in the top 24 bits, milli-RU in
** the low 40), one atomic add; the first request of a second swaps that
** word for zero and folds it into the 64-bit totals, then records the
** total in a ring of RING snapshots (the second, and the total before
** it), which gives the rate over the last RG_TP_WINDOW seconds without a
** timer.  Fan-out requests count on a line of their own in the slot.
**
** The file.  throughput.shm, in the database directory, mapped shared by
** every process that opens the database:
**
**   header   (4 KB)  magic, version, the boot it belongs to (the clock's
**                    origin), the configuration generation (bumped by
**                    every change: handles re-resolve), the file size, the
**                    arena's use, and what of the database it mirrors:
**                    the "\1throughput" version and the last container id
**   directory        NDIR entries {used, cid, offset, size}: one slot per
**                    container that accounts (cid 0: the database budget)
**   arena            the slots: a 64-byte head (setting, per-partition
**                    rate as ns per RU, bucket size), a line of fan-out
**                    counters, then one 192-byte record per partition
**
** The hot path reads and writes slots with atomic operations only.  The
** configuration (slots made, changed, freed; the file grown) changes under
** an exclusive flock of the file, never while the LMDB write lock is held
** (so the two locks cannot deadlock), and is always a copy of what the
** database stores: a container's "throughput" in its spec, the database's
** under the meta key "\1throughput" (u64 version, then the setting's
** JSON text), whose version every change bumps.  After a change commits,
** the changing process applies it under the lock, reading it back from the
** database; a file that is new, from an earlier boot (its clock readings
** would be meaningless), of another format, or behind the database (a
** process died between a commit and its application) is rebuilt from the
** database when it is attached.  A directory entry is published last
** (`used` set with release order, then the generation bumped), so a reader
** that resolves while it changes sees a complete entry or none, and
** resolves again at its next request.  Slots are never unmapped while the
** database is open (a process whose map is older than the file maps the
** file again and keeps the old map), so a pointer a handle holds stays
** valid; a freed slot reused by another container can at worst receive a
** stale charge.
*/

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/layout.h"
#include "store/remote.h"
#include "store/throughput.h"

#define TP_FILE      "throughput.shm"
#define TP_MAGIC     0x74706874676572ull      /* "regthpt" */
#define TP_VERSION   1
#define TP_NDIR      1024
#define TP_DIR       4096
#define TP_ARENA     (TP_DIR + TP_NDIR * 16)
#define TP_GROW      (64u << 10)
#define TP_MAX_FILE  (64u << 20)
#define RING         16
#define SEC_BITS     24
#define VAL_MASK     ((1ull << 40) - 1)
#define NS           1000000000ull
#define BURST_WINDOW 300                      /* seconds of idle capacity */
#define BURST_RATE   3000.0                   /* RU/s a partition bursts to */
#define DB_SPLIT     10000.0                  /* RU/s per database partition */

#define LOAD(p)       __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v)   __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v)     __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define CAS(p, o, n)  __atomic_compare_exchange_n((p), (o), (n), 1, \
                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)

typedef struct tp_header {
  uint64_t magic;
  uint32_t version, ndir;
  uint32_t headsize, partsize;      /* the layout this file was made with */
  char boot[40];                    /* /proc/sys/kernel/random/boot_id */
  uint64_t gen;                     /* configuration generation (>= 1) */
  uint64_t size;                    /* bytes of the file */
  uint64_t used;                    /* bytes of the arena handed out */
  uint64_t synced_ver;              /* the "\1throughput" version mirrored */
  uint64_t synced_cid;              /* the last container id mirrored */
} tp_header;

typedef struct tp_dirent {
  uint32_t used, cid, off, size;
} tp_dirent;

typedef struct tp_part {
  uint64_t tat;                     /* the bucket: ns when it is full */
  uint64_t tat_burst;               /* the burst drain's (burst only) */
  uint64_t live;                    /* this second: requests << 40 | milli */
  uint64_t snap_sec;                /* second of the last snapshot */
  uint64_t consumed;                /* milli-RU, folded from `live` */
  uint64_t requests;                /* routed requests admitted, folded */
  uint64_t throttled;               /* routed requests refused */
  uint64_t pad0;
  uint64_t ring[RING];              /* sec << 40 | consumed (low 40 bits) */
} tp_part;

struct rg_tpslot {
  uint32_t cid, nparts;
  uint32_t mode, burst;
  double ru;                        /* RU/s (autoscale: the maximum) */
  double nspr;                      /* ns of refill per RU, one partition */
  double nspr_burst;                /* of the burst drain (0: no burst) */
  uint64_t window;                  /* the bucket's size as time, ns */
  uint64_t since;                   /* second the counters began */
  uint64_t heap;                    /* a remote database's (hslot) */
  uint64_t fan_requests;            /* fan-outs admitted, refused */
  uint64_t fan_throttled;
  uint64_t pad1[6];
  tp_part part[1];                  /* nparts of them */
};

#define SLOT_HEAD offsetof(rg_tpslot, part)
#define SLOT_SIZE(n) (SLOT_HEAD + (size_t)(n) * sizeof(tp_part))

typedef struct tpmap {
  void *base;
  size_t len;
  struct tpmap *older;
} tpmap;

/* A remote database's slot: in this process's memory, its words kept by
** the host (remote.h), named by `field` (the container, its setting,
** then the partition).  Never freed while the database is open. */
typedef struct hslot {
  struct hslot *next;
  rg_remote *r;
  char field[RG_TP_FIELD - 16];
  rg_tpslot s;                      /* last: its partitions follow */
} hslot;

#define HSLOT(s) ((hslot *)((char *)(s) - offsetof(hslot, s)))

/* A process's view of the file (env->tp); a remote database's has no
** file (fd -1), only its slots. */
struct rg_tpfile {
  int fd;
  tpmap *map;                       /* the newest map first */
  void *first;                      /* the first map's base */
  hslot *heap;                      /* the newest first */
};

static tp_header *head (const struct rg_tpfile *f) {
  return (tp_header *)f->map->base;
}

static tp_dirent *dir (const struct rg_tpfile *f) {
  return (tp_dirent *)((char *)f->map->base + TP_DIR);
}

/* The clock of the budgets: the system's monotonic clock, as the kernel
** last ticked it (a fifth of the cost of a precise reading; a tick late
** at most, which every retry hint adds). */
#ifdef CLOCK_MONOTONIC_COARSE
#define TP_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define TP_CLOCK CLOCK_MONOTONIC
#endif

static uint64_t now_ns (void) {
  struct timespec ts;
  clock_gettime(TP_CLOCK, &ts);
  return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

/* The clock's resolution, in ns (read once). */
static uint64_t tick_ns (void) {
  static uint64_t tick = 0;
  if (tick == 0) {
    struct timespec ts;
    uint64_t t = NS / 100;
    if (clock_getres(TP_CLOCK, &ts) == 0)
      t = (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
    tick = t ? t : 1;
  }
  return tick;
}

void rg_tp_sleep (uint32_t ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}


/*
** {=====================================================================
** Mapping, growing, locking
** ======================================================================
*/
/* Maps the file again when it grew past the newest map (older maps stay,
** for the pointers into them).  0, or -1 when it cannot. */
static int cover (struct rg_tpfile *f, size_t end) {
  struct stat st;
  tpmap *m;
  void *p;
  if (end <= f->map->len) return 0;
  if (fstat(f->fd, &st) != 0 || (size_t)st.st_size < end) return -1;
  p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
           f->fd, 0);
  if (p == MAP_FAILED) return -1;
  if ((m = (tpmap *)malloc(sizeof(tpmap))) == NULL) {
    munmap(p, (size_t)st.st_size);
    return -1;
  }
  m->base = p;
  m->len = (size_t)st.st_size;
  m->older = f->map;
  f->map = m;
  return 0;
}

/* The slot at a directory entry, mapped, or NULL. */
static rg_tpslot *slot_of (struct rg_tpfile *f, const tp_dirent *d,
                           uint32_t cid) {
  uint32_t off = LOAD(&d->off), size = LOAD(&d->size);
  rg_tpslot *s;
  if (off < TP_ARENA || size < SLOT_SIZE(1) ||
      (uint64_t)off + size > LOAD(&head(f)->size) || cover(f, off + size))
    return NULL;
  s = (rg_tpslot *)((char *)f->map->base + off);
  if (s->cid != cid || s->nparts < 1 || s->nparts > RG_MAX_PARTITIONS ||
      SLOT_SIZE(s->nparts) > size)
    return NULL;
  return s;
}

/* Grows the file (under the lock) to at least `size` bytes, its blocks
** allocated: a write to a shared map of a hole on a full disk would be a
** SIGBUS, an allocation that fails is a 507. */
static int grow (struct rg_tpfile *f, uint64_t size, rg_err *e) {
  int rc;
  size = (size + TP_GROW - 1) / TP_GROW * TP_GROW;
  if (size > TP_MAX_FILE)
    return rg_fail(e, 507, "insufficient storage: the throughput budgets "
                   "file is full (%u MB)", TP_MAX_FILE >> 20);
  if ((rc = posix_fallocate(f->fd, 0, (off_t)size)) != 0)
    return rg_fail(e, rg_room_status(rc),
                   "%sthe throughput budgets file cannot grow: %s",
                   rg_room_status(rc) == 507 ? "insufficient storage: " : "",
                   strerror(rc));
  if (cover(f, (size_t)size))
    return rg_fail(e, 500, "the throughput budgets file cannot be mapped");
  STORE(&head(f)->size, size);
  return 0;
}

static void lock (struct rg_tpfile *f) {
  while (flock(f->fd, LOCK_EX) != 0 && errno == EINTR) {}
}

static void unlock (struct rg_tpfile *f) {
  flock(f->fd, LOCK_UN);
}

static void publish (struct rg_tpfile *f) {
  __atomic_fetch_add(&head(f)->gen, 1, __ATOMIC_RELEASE);
}
/* }===================================================================== */


/*
** {=====================================================================
** Slots: made, set, freed (under the lock)
** ======================================================================
*/
/* The per-partition rate and bucket of a setting on n partitions. */
static void rates (const rg_tpset *set, int n, double *nspr,
                   double *nspr_burst, uint64_t *window) {
  double r = set->mode == RG_TP_NONE ? 0 : set->ru / n;
  *nspr = r > 0 ? 1e9 / r : 0;
  *nspr_burst = 0;
  *window = NS;
  if (r > 0 && set->burst && r < BURST_RATE) {
    *nspr_burst = 1e9 / BURST_RATE;
    *window = BURST_WINDOW * NS;
  }
}

/* Gives slot s the setting `set`, keeping each partition's balance (in
** RU, at most the new bucket) so that a change takes effect at once.  A
** raise grows the bucket, and its growth comes full, as a new budget's
** does: each partition gains one second of the difference of the rates,
** which pays the debt run up under the old budget (a raise large enough
** admits the next request at once); a cut leaves a debt what it was, to
** be paid at the new rate. */
static void configure (rg_tpslot *s, const rg_tpset *set, uint64_t now,
                       int fresh) {
  double nspr, nspr_b;
  uint64_t window;
  int i;
  rates(set, (int)s->nparts, &nspr, &nspr_b, &window);
  for (i = 0; i < (int)s->nparts && nspr > 0; i++) {
    tp_part *p = &s->part[i];
    /* a new budget holds one second of its rate (burst capacity builds up
    ** while idle), a changed one what it held */
    double cap = (double)window / nspr, bal = (double)NS / nspr, t;
    if (!fresh && s->nspr > 0) {
      bal = ((double)(now + s->window) - (double)LOAD(&p->tat)) / s->nspr;
      if (nspr < s->nspr) bal += (double)NS / nspr - (double)NS / s->nspr;
    }
    if (bal > cap) bal = cap;
    t = (double)(now + window) - bal * nspr;
    STORE(&p->tat, t < 0 ? 0 : (uint64_t)t);
    if (fresh || s->nspr_burst == 0) STORE(&p->tat_burst, 0);
  }
  s->mode = (uint32_t)set->mode;
  s->burst = (uint32_t)set->burst;
  s->ru = set->ru;
  s->nspr = nspr;
  s->nspr_burst = nspr_b;
  s->window = window;
}

static int find (struct rg_tpfile *f, uint32_t cid) {
  tp_dirent *d = dir(f);
  int i;
  for (i = 0; i < TP_NDIR; i++)
    if (LOAD(&d[i].used) && d[i].cid == cid) return i;
  return -1;
}

static void release_slot (struct rg_tpfile *f, int i) {
  __atomic_store_n(&dir(f)[i].used, 0, __ATOMIC_RELEASE);
}

/* Makes (or finds, or remakes with another partition count) the slot of
** `cid` with n partitions and the setting `set`. */
static int set_slot (struct rg_tpfile *f, uint32_t cid, int n,
                     const rg_tpset *set, uint64_t now, rg_err *e) {
  tp_dirent *d = dir(f);
  tp_header *h = head(f);
  size_t need = (SLOT_SIZE(n) + 63) / 64 * 64;
  rg_tpslot *s;
  int i = find(f, cid), k, empty = -1, reuse = -1, rc;
  if (i >= 0) {
    s = slot_of(f, &d[i], cid);
    if (s != NULL && (int)s->nparts == n) {
      configure(s, set, now, 0);
      return 0;
    }
    release_slot(f, i);
  }
  for (k = 0; k < TP_NDIR; k++) {
    if (LOAD(&d[k].used)) continue;
    if (d[k].size == 0) { if (empty < 0) empty = k; }
    else if (d[k].size >= need && (reuse < 0 || d[k].size < d[reuse].size))
      reuse = k;
  }
  if (reuse >= 0) k = reuse;
  else if (empty >= 0) {
    uint64_t off = TP_ARENA + h->used;
    if (off + need > h->size && (rc = grow(f, off + need, e))) return rc;
    k = empty;
    d[k].off = (uint32_t)off;
    d[k].size = (uint32_t)need;
    h->used += need;
  }
  else
    return rg_fail(e, 507, "insufficient storage: the throughput budgets "
                   "file has no room for another container (%d)", TP_NDIR);
  if (cover(f, (size_t)d[k].off + d[k].size))
    return rg_fail(e, 500, "the throughput budgets file cannot be mapped");
  s = (rg_tpslot *)((char *)f->map->base + d[k].off);
  memset(s, 0, d[k].size);
  s->cid = cid;
  s->nparts = (uint32_t)n;
  s->since = now / NS;
  configure(s, set, now, 1);
  d[k].cid = cid;
  __atomic_store_n(&d[k].used, 1, __ATOMIC_RELEASE);
  return 0;
}

static void drop_slot (struct rg_tpfile *f, uint32_t cid) {
  int i = find(f, cid);
  if (i >= 0) release_slot(f, i);
}

/* The database budget's partitions: one per 10,000 RU/s. */
static int db_parts (const rg_tpset *set) {
  int n = (int)ceil(set->ru / DB_SPLIT);
  return n < 1 ? 1 : n > RG_MAX_PARTITIONS ? RG_MAX_PARTITIONS : n;
}
/* }===================================================================== */


/*
** {=====================================================================
** Mirroring the database
** ======================================================================
*/
typedef struct stored {
  uint64_t version;                 /* of "\1throughput" */
  uint32_t last_cid;
  rg_tpset db;
} stored;

/* A setting from JSON text (bad text: none; the writer validated it). */
static void parse_set (const char *text, size_t n, const char *key,
                       rg_tpset *set, int *nparts) {
  cJSON *j = NULL, *v;
  rg_err e;
  memset(set, 0, sizeof(*set));
  if (nparts) *nparts = 1;
  if (n == 0 || rg_json_parse(text, n, &j, &e)) return;
  v = key ? cJSON_GetObjectItemCaseSensitive(j, key) : j;
  if (rg_tpset_parse(v, set, "throughput", &e)) memset(set, 0, sizeof(*set));
  if (nparts) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "physical_partitions");
    if (cJSON_IsNumber(p) && p->valuedouble >= 1 &&
        p->valuedouble <= RG_MAX_PARTITIONS)
      *nparts = (int)p->valuedouble;
  }
  cJSON_Delete(j);
}

/* The database's setting and its version (what a remote call reads: the
** last cid is the mirror file's concern, and a read of it would be one
** more entry of the global place to fetch at every request). */
static void read_setting (rg_txn *txn, stored *st) {
  rg_val v;
  memset(st, 0, sizeof(*st));
  if (rg_kv_get(txn, RG_DB_META, RG_META_THROUGHPUT,
                sizeof(RG_META_THROUGHPUT) - 1, &v) == 0 && v.n >= 8) {
    st->version = rg_get_u64((const uint8_t *)v.p);
    parse_set((const char *)v.p + 8, v.n - 8, NULL, &st->db, NULL);
  }
}

static void read_stored (rg_txn *txn, rg_env *env, stored *st) {
  rg_val v;
  read_setting(txn, st);
  if (rg_kv_get(txn, RG_DB_META, RG_META_CID, sizeof(RG_META_CID) - 1,
                &v) == 0 && v.n == 4)
    st->last_cid = rg_get_u32((const uint8_t *)v.p);
}

/* A container's live setting from its stored spec `v`: 1 when it
** accounts (a budget of its own, or counters on the database's), else 0. */
static int spec_set (const rg_val *v, const stored *st, rg_tpset *set,
                     int *nparts) {
  memset(set, 0, sizeof(*set));
  *nparts = 1;
  if (st->db.mode == RG_TP_NONE &&
      memmem(v->p, v->n, "\"throughput\"", 12) == NULL)
    return 0;                         /* not worth parsing */
  parse_set((const char *)v->p, v->n, "throughput", set, nparts);
  return set->mode != RG_TP_NONE || st->db.mode != RG_TP_NONE;
}

/* The same for container `cid`; -1 when it is gone. */
static int container_set (rg_txn *txn, rg_env *env, uint32_t cid,
                          const stored *st, rg_tpset *set, int *nparts) {
  uint8_t key[8];
  rg_val v;
  if (rg_kv_get(txn, RG_DB_META, key,
                rg_meta_key(key, RG_MK_SPEC, cid, NULL, 0), &v) != 0)
    return -1;
  return spec_set(&v, st, set, nparts);
}

/* Rebuilds every slot from the database (under the lock). */
typedef struct resync_walk {
  struct rg_tpfile *f;
  const stored *st;
  uint64_t now;
  rg_err *e;
  int rc;                           /* set_slot's failure */
} resync_walk;

/* A slot for every container that accounts. */
static int resync_spec (void *ud, uint32_t cid, const rg_val *spec) {
  resync_walk *w = (resync_walk *)ud;
  rg_tpset set;
  int n;
  if (spec_set(spec, w->st, &set, &n) == 1)
    w->rc = set_slot(w->f, cid, n, &set, w->now, w->e);
  return w->rc;
}

static int resync (struct rg_tpfile *f, rg_env *env, rg_err *e) {
  tp_header *h = head(f);
  tp_dirent *d = dir(f);
  uint64_t now = now_ns();
  rg_txn *txn;
  stored st;
  int i, rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  read_stored(txn, env, &st);
  for (i = 0; i < TP_NDIR; i++)     /* slots of containers gone */
    if (LOAD(&d[i].used) && d[i].cid != 0) {
      rg_tpset set;
      int n;
      if (container_set(txn, env, d[i].cid, &st, &set, &n) != 1)
        release_slot(f, i);
    }
  rc = 0;
  if (st.db.mode == RG_TP_NONE) drop_slot(f, 0);
  else rc = set_slot(f, 0, db_parts(&st.db), &st.db, now, e);
  if (rc == 0) {
    resync_walk w;
    int mrc;
    w.f = f;
    w.st = &st;
    w.now = now;
    w.e = e;
    w.rc = 0;
    mrc = rg_cont_each_spec(txn, RG_DB_META, resync_spec, &w);
    if ((rc = w.rc) == 0 && mrc != 0)
      rc = rg_kv_fail(e, mrc, "reading the catalog");
  }
  if (rc == 0) {
    h->synced_ver = st.version;
    h->synced_cid = st.last_cid;
  }
  rg_read_end(env);
  publish(f);
  return rc;
}

/*
** Applies what a change to container `cid` (0: the database's setting)
** left in the database; `bumped` says whether the change bumped the
** version.  When the file is behind in any other way, everything is
** rebuilt instead.
*/
static int apply (rg_env *env, uint32_t cid, int bumped, int created,
                  rg_err *e) {
  struct rg_tpfile *f = env->tp;
  tp_header *h;
  rg_txn *txn;
  stored st;
  int rc = 0, full;
  if (f == NULL || env->remote) return 0;
  lock(f);
  h = head(f);
  if ((rc = rg_read_begin(env, &txn, e))) { unlock(f); return rc; }
  read_stored(txn, env, &st);
  full = cid == 0 ||
         !(st.version == h->synced_ver ||
           (bumped && st.version == h->synced_ver + 1)) ||
         !(st.last_cid == h->synced_cid ||
           (created && st.last_cid == h->synced_cid + 1 &&
            st.last_cid == cid));
  if (!full) {
    rg_tpset set;
    int n, live = container_set(txn, env, cid, &st, &set, &n);
    if (live == 1) rc = set_slot(f, cid, n, &set, now_ns(), e);
    else drop_slot(f, cid);
    if (rc == 0) {
      h->synced_ver = st.version;
      h->synced_cid = st.last_cid;
    }
  }
  rg_read_end(env);
  if (full) rc = resync(f, env, e);
  else publish(f);
  unlock(f);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Attaching
** ======================================================================
*/
static void boot_id (char out[40]) {
  FILE *p = fopen("/proc/sys/kernel/random/boot_id", "r");
  memset(out, 0, 40);
  if (p == NULL) return;
  if (fgets(out, 40, p) == NULL) memset(out, 0, 40);
  fclose(p);
}

static int stale (const tp_header *h, const char boot[40], size_t size) {
  return size < TP_ARENA || h->magic != TP_MAGIC ||
         h->version != TP_VERSION || h->ndir != TP_NDIR ||
         h->headsize != SLOT_HEAD || h->partsize != sizeof(tp_part) ||
         memcmp(h->boot, boot, 40) != 0 || h->size < TP_ARENA ||
         h->used > h->size - TP_ARENA;
}

static void unmap_all (struct rg_tpfile *f) {
  while (f->map) {
    tpmap *m = f->map;
    f->map = m->older;
    munmap(m->base, m->len);
    free(m);
  }
}

int rg_tp_attach (rg_env *env, rg_err *e) {
  char path[4096], boot[40];
  struct rg_tpfile *f;
  struct stat st;
  rg_txn *txn;
  stored sto;
  int fd, rc = 0, behind;
  env->tp = NULL;
  if ((size_t)snprintf(path, sizeof(path), "%s/" TP_FILE, env->path) >=
      sizeof(path))
    return 0;
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return 0;              /* not ours to account: the rule */
  if ((f = (struct rg_tpfile *)calloc(1, sizeof(*f))) == NULL) {
    close(fd);
    return rg_fail(e, 500, "out of memory");
  }
  f->fd = fd;
  lock(f);
  boot_id(boot);
  if (fstat(fd, &st) != 0) goto none;
  if ((size_t)st.st_size < TP_ARENA) {
    int r = posix_fallocate(fd, 0, TP_ARENA);
    if (rg_room_status(r) == 507) {
      rc = rg_fail(e, 507, "insufficient storage: cannot make '%s': %s", path,
                   strerror(r));
      goto none;
    }
    if (r != 0 || fstat(fd, &st) != 0) goto none;
  }
  if ((f->map = (tpmap *)calloc(1, sizeof(tpmap))) == NULL) goto none;
  f->map->len = (size_t)st.st_size;
  f->map->base = mmap(NULL, f->map->len, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fd, 0);
  if (f->map->base == MAP_FAILED) { free(f->map); f->map = NULL; goto none; }
  env->tp = f;
  f->first = f->map->base;
  if (stale(head(f), boot, (size_t)st.st_size)) {
    tp_header *h = head(f);
    uint64_t gen = h->magic == TP_MAGIC ? h->gen : 0;
    memset(f->map->base, 0, TP_ARENA);
    h->magic = TP_MAGIC;
    h->version = TP_VERSION;
    h->ndir = TP_NDIR;
    h->headsize = (uint32_t)SLOT_HEAD;
    h->partsize = (uint32_t)sizeof(tp_part);
    memcpy(h->boot, boot, 40);
    h->gen = gen + 1;
    h->size = (uint64_t)st.st_size;
    h->synced_ver = h->synced_cid = ~0ull;      /* behind: rebuilt below */
  }
  if ((rc = rg_read_begin(env, &txn, e)) == 0) {
    read_stored(txn, env, &sto);
    rg_read_end(env);
    behind = sto.version != head(f)->synced_ver ||
             sto.last_cid != head(f)->synced_cid;
    if (behind) rc = resync(f, env, e);
  }
  unlock(f);
  if (rc) rg_tp_detach(env);
  return rc;
none:
  unlock(f);
  unmap_all(f);
  close(fd);
  free(f);
  env->tp = NULL;
  return rc;
}

void rg_tp_detach (rg_env *env) {
  struct rg_tpfile *f = env->tp;
  if (f == NULL) return;
  while (f->heap) {
    hslot *h = f->heap;
    f->heap = h->next;
    free(h);
  }
  unmap_all(f);
  if (f->fd >= 0) close(f->fd);
  free(f);
  env->tp = NULL;
}
/* }===================================================================== */


/*
** {=====================================================================
** Admission and debit (the hot path)
** ======================================================================
*/
static void resolve (struct rg_tpfile *f, uint32_t cid, rg_tpref *ref,
                     uint64_t gen) {
  tp_dirent *d = dir(f);
  rg_tpslot *own = NULL, *db = NULL;
  int i;
  for (i = 0; i < TP_NDIR; i++) {
    uint32_t c;
    if (!__atomic_load_n(&d[i].used, __ATOMIC_ACQUIRE)) continue;
    c = LOAD(&d[i].cid);
    if (c == cid) own = slot_of(f, &d[i], cid);
    else if (c == 0) db = slot_of(f, &d[i], 0);
  }
  ref->own = own;
  ref->pool = own && own->mode != RG_TP_NONE ? own : db;
  ref->gen = gen;
}

/* The generation of a database without a budgets file: never changes. */
static const uint64_t no_file = 0;

/*
** A remote database's budgets.  The rule is the same; what differs is
** where a bucket's word lives and whose clock it is on: the host keeps
** the words, so that every client of the database draws on the same
** budget, and its clock is the one every admission reads (remote.h).  A
** slot is made in this process's memory for each (container, setting),
** from the database's stored settings read at every request (the catalog
** entries a call reads anyway, kept between calls as the catalog's are);
** its words are the host's as this call read them, and what a request
** spends goes to the host when its call is done.  A changed setting has
** words of its own (its field names it): it starts full.
*/
static rg_tpslot *heap_slot (rg_env *env, uint32_t cid, int n,
                             const rg_tpset *set) {
  struct rg_tpfile *f = env->tp;
  char field[sizeof(((hslot *)0)->field)];
  hslot *h;
  uint64_t now;
  if (f == NULL) {
    if ((f = (struct rg_tpfile *)calloc(1, sizeof(*f))) == NULL) return NULL;
    f->fd = -1;
    env->tp = f;
  }
  snprintf(field, sizeof(field), "%u:%d:%d:%.15g:%d", cid, n, set->mode,
           set->ru, set->burst);
  for (h = f->heap; h != NULL; h = h->next)
    if (strcmp(h->field, field) == 0) return &h->s;
  if ((h = (hslot *)calloc(1, offsetof(hslot, s) + SLOT_SIZE(n))) == NULL)
    return NULL;
  h->r = env->remote;
  memcpy(h->field, field, sizeof(field));
  h->s.cid = cid;
  h->s.nparts = (uint32_t)n;
  h->s.heap = 1;
  now = rg_remote_tp_clock(env->remote);
  h->s.since = now / NS;
  configure(&h->s, set, now, 1);
  h->next = f->heap;
  f->heap = h;
  return &h->s;
}

static int on_remote (rg_env *env, uint32_t cid, rg_tpref *ref) {
  rg_tpslot *db = NULL;
  rg_txn *txn;
  rg_tpset set;
  rg_err e;
  stored st;
  int n, live;
  memset(ref, 0, sizeof(*ref));      /* no generation: asked every time */
  if (rg_read_begin(env, &txn, &e)) return 0;
  read_setting(txn, &st);
  live = container_set(txn, env, cid, &st, &set, &n);
  rg_read_end(env);
  if (live == 1) ref->own = heap_slot(env, cid, n, &set);
  if (st.db.mode != RG_TP_NONE)
    db = heap_slot(env, 0, db_parts(&st.db), &st.db);
  ref->pool = ref->own && ref->own->mode != RG_TP_NONE ? ref->own : db;
  return ref->pool != NULL;
}

/* The name of a remote slot's word: partition i's bucket, or (`burst`)
** its burst drain's. */
static void field_of (const rg_tpslot *s, int i, int burst,
                      char out[RG_TP_FIELD]) {
  snprintf(out, RG_TP_FIELD, "%s:%d%s", HSLOT(s)->field, i, burst ? "b" : "");
}

/* Partitions from..to-1 of remote slot s take the host's words as this
** call read them, with what its run spent (a run that is not used spent
** nothing); 0 when one is not read yet (the host is asked for it). */
static int words_in (rg_tpslot *s, int from, int to) {
  char f[RG_TP_FIELD];
  uint64_t w;
  int i, all = 1;
  for (i = from; i < to; i++) {
    field_of(s, i, 0, f);
    if (rg_remote_tp_word(HSLOT(s)->r, f, &w)) STORE(&s->part[i].tat, w);
    else all = 0;
    if (s->nspr_burst > 0) {
      field_of(s, i, 1, f);
      if (rg_remote_tp_word(HSLOT(s)->r, f, &w))
        STORE(&s->part[i].tat_burst, w);
      else all = 0;
    }
  }
  return all;
}


static void add_later (void *ud, uint64_t v, uint64_t unused);

/* Adds v to counter w of slot s (a remote call's when it is done). */
static void add (const rg_tpslot *s, uint64_t *w, uint64_t v) {
  if (s->heap) rg_remote_later_add(HSLOT(s)->r, add_later, w, v, 0);
  else ADD(w, v);
}

/* The clock of slot s's budget (ns). */
static uint64_t clock_of (const rg_tpslot *s) {
  return s != NULL && s->heap ? rg_remote_tp_clock(HSLOT(s)->r) : now_ns();
}

static int same_set (const rg_tpset *a, const rg_tpset *b) {
  return a->mode == b->mode && a->ru == b->ru && a->burst == b->burst;
}

/*
** A remote budget's setting changes (in the call that stores it): its new
** words are what configure makes of the old ones, as a local change makes
** them in place (a raise pays a debt at once, a cut keeps it; a new budget,
** or another partition count, starts full), set when the call is done.
** When the old words are not read yet, the host is asked for them.
*/
static void carry (rg_env *env, uint32_t cid, const rg_tpset *old,
                   int n_old, const rg_tpset *neu, int n_new) {
  rg_tpslot *from = NULL, *to;
  char f[RG_TP_FIELD];
  uint64_t now;
  int i, fresh;
  if (env->remote == NULL || neu->mode == RG_TP_NONE ||
      (same_set(old, neu) && n_old == n_new))
    return;
  fresh = old->mode == RG_TP_NONE || n_old != n_new;
  if (!fresh && ((from = heap_slot(env, cid, n_old, old)) == NULL ||
                 !words_in(from, 0, n_old)))
    return;
  if ((to = heap_slot(env, cid, n_new, neu)) == NULL) return;
  now = rg_remote_tp_clock(env->remote);
  if (fresh) configure(to, neu, now, 1);
  else {
    to->mode = from->mode;
    to->burst = from->burst;
    to->ru = from->ru;
    to->nspr = from->nspr;
    to->nspr_burst = from->nspr_burst;
    to->window = from->window;
    for (i = 0; i < n_new; i++) {
      STORE(&to->part[i].tat, LOAD(&from->part[i].tat));
      STORE(&to->part[i].tat_burst, LOAD(&from->part[i].tat_burst));
    }
    configure(to, neu, now, 0);
  }
  for (i = 0; i < n_new; i++) {
    field_of(to, i, 0, f);
    rg_remote_tp_set(env->remote, f, LOAD(&to->part[i].tat));
    if (to->nspr_burst > 0) {
      field_of(to, i, 1, f);
      rg_remote_tp_set(env->remote, f, LOAD(&to->part[i].tat_burst));
    }
  }
}

int rg_tp_on (rg_env *env, uint32_t cid, rg_tpref *ref) {
  struct rg_tpfile *f = env->tp;
  const uint64_t *genp;
  uint64_t gen;
  if (env->remote) return on_remote(env, cid, ref);
  if (f == NULL) {
    memset(ref, 0, sizeof(*ref));
    ref->genp = &no_file;
    return 0;
  }
  /* the first map holds the header for as long as the file is attached */
  genp = &((tp_header *)f->first)->gen;
  gen = __atomic_load_n(genp, __ATOMIC_ACQUIRE);
  if (gen != ref->gen || ref->genp != genp) resolve(f, cid, ref, gen);
  ref->genp = genp;
  return ref->pool != NULL;
}

/* How long (ns) partition p must wait before it admits; 0: now. */
static inline uint64_t wait_of (const rg_tpslot *s, tp_part *p,
                                uint64_t now) {
  uint64_t t = LOAD(&p->tat), lim = now + s->window, w = 0;
  if (t >= lim) w = t - lim + 1;
  if (s->nspr_burst > 0) {
    t = LOAD(&p->tat_burst);
    lim = now + NS;
    if (t >= lim && t - lim + 1 > w) w = t - lim + 1;
  }
  return w;
}

/* The physical partition of a hash (layout.c's rule, rg_range_of). */
#define RANGE_OF(hash, n) ((int)((((hash) >> 32) * (uint64_t)(n)) >> 32))

static void route (const rg_tpref *ref, int routed, uint64_t hash, int range,
                   rg_admit *a) {
  rg_tpslot *own = ref->own, *pool = ref->pool;
  a->own = own;
  a->pool = pool;
  a->now = clock_of(pool ? pool : own);
  a->own_r = own == NULL ? 0 : routed ? RANGE_OF(hash, own->nparts) : range;
  a->pool_r = pool == NULL ? 0 : pool == own ? a->own_r
            : routed ? RANGE_OF(hash, pool->nparts) : RG_TP_EVERY;
}

void rg_tp_route (const rg_tpref *ref, int routed, uint64_t hash, int range,
                  rg_admit *a) {
  route(ref, routed, hash, range, a);
}

int rg_tp_admit (const rg_cspec *spec, const rg_tpref *ref, int routed,
                 uint64_t hash, int range, rg_admit *a, rg_err *e) {
  rg_tpslot *own, *pool;
  uint64_t wait = 0;
  int refused = -1, i, from, to;
  route(ref, routed, hash, range, a);
  own = a->own;
  pool = a->pool;
  if (pool == NULL) return 0;
  if (pool->heap) {                  /* the host's words, and its clock */
    int every = a->pool_r == RG_TP_EVERY;
    if (!words_in(pool, every ? 0 : a->pool_r,
                  every ? (int)pool->nparts : a->pool_r + 1))
      return 0;                      /* asked: this run's answer is unused */
    a->now = clock_of(pool);
  }
  if (pool->nparts == 1 || a->pool_r != RG_TP_EVERY) {  /* the common case */
    int r = a->pool_r == RG_TP_EVERY ? 0 : a->pool_r;
    if ((wait = wait_of(pool, &pool->part[r], a->now)) == 0) return 0;
    refused = r;
    goto refuse;
  }
  from = a->pool_r == RG_TP_EVERY ? 0 : a->pool_r;
  to = a->pool_r == RG_TP_EVERY ? (int)pool->nparts : a->pool_r + 1;
  for (i = from; i < to; i++) {
    uint64_t w = wait_of(pool, &pool->part[i], a->now);
    if (w > wait) {
      wait = w;
      if (refused < 0) refused = i;
    }
  }
  if (wait == 0) return 0;
refuse:
  wait += tick_ns();                 /* the clock may be a tick late */
  a->retry_after_ms = (uint32_t)((wait + 999999) / 1000000);
  if (own != NULL) {
    if (a->own_r == RG_TP_EVERY) add(own, &own->fan_throttled, 1);
    else add(own, &own->part[a->own_r].throttled, 1);
  }
  if (pool != own) {
    if (a->pool_r == RG_TP_EVERY) add(pool, &pool->fan_throttled, 1);
    else add(pool, &pool->part[a->pool_r].throttled, 1);
  }
  if (pool == own && pool->nparts == 1)
    return rg_fail(e, 429, "request rate is large: container '%s' is over "
                   "its budget of %g RU/s; no changes were made; retry after "
                   "%u ms", spec->name, pool->ru, a->retry_after_ms);
  if (pool == own)
    return rg_fail(e, 429, "request rate is large: physical partition %d of "
                   "container '%s' is over its share (%g of %g RU/s); no "
                   "changes were made; retry after %u ms", refused + 1,
                   spec->name, pool->ru / pool->nparts, pool->ru,
                   a->retry_after_ms);
  if (pool->nparts == 1)
    return rg_fail(e, 429, "request rate is large: the database's shared "
                   "budget of %g RU/s is spent; no changes were made; retry "
                   "after %u ms", pool->ru, a->retry_after_ms);
  return rg_fail(e, 429, "request rate is large: partition %d of the "
                 "database's shared budget is over its share (%g of %g "
                 "RU/s); no changes were made; retry after %u ms",
                 refused + 1, pool->ru / pool->nparts, pool->ru,
                 a->retry_after_ms);
}

/* Moves a bucket word by d ns past max(itself, now). */
static inline void spend_word (uint64_t *word, uint64_t now, uint64_t d) {
  uint64_t old = LOAD(word), nw;
  do nw = (old > now ? old : now) + d; while (!CAS(word, &old, nw));
}

/* Spends `ru` in partition i of slot s (on a remote database, also in
** what its call gives the host). */
static void spend_part (rg_tpslot *s, int i, uint64_t now, double ru) {
  char f[RG_TP_FIELD];
  uint64_t d = (uint64_t)(ru * s->nspr + 0.5);
  spend_word(&s->part[i].tat, now, d);
  if (s->heap) {
    field_of(s, i, 0, f);
    rg_remote_tp_spend(HSLOT(s)->r, f, d);
  }
  if (s->nspr_burst > 0) {
    d = (uint64_t)(ru * s->nspr_burst + 0.5);
    spend_word(&s->part[i].tat_burst, now, d);
    if (s->heap) {
      field_of(s, i, 1, f);
      rg_remote_tp_spend(HSLOT(s)->r, f, d);
    }
  }
}

static void spend (rg_tpslot *s, int r, uint64_t now, double charge) {
  int i, from = r == RG_TP_EVERY ? 0 : r;
  int to = r == RG_TP_EVERY ? (int)s->nparts : r + 1;
  double share = charge / (to - from);
  for (i = from; i < to; i++) spend_part(s, i, now, share);
}

/* Counts `n` requests of milli-RU in a partition; the second's first
** folds the last second's counts into the totals and snapshots them. */
static inline void consume_now (tp_part *p, uint64_t n, uint64_t milli,
                                uint64_t sec) {
  uint64_t last = LOAD(&p->snap_sec);
  if (last != sec && CAS(&p->snap_sec, &last, sec)) {
    uint64_t v = __atomic_exchange_n(&p->live, 0, __ATOMIC_RELAXED);
    uint64_t c = ADD(&p->consumed, v & VAL_MASK) + (v & VAL_MASK);
    ADD(&p->requests, v >> 40);
    STORE(&p->ring[sec % RING], (sec << 40) | (c & VAL_MASK));
  }
  ADD(&p->live, (n << 40) | milli);
}

/* A remote call counts once, when it is done (remote.h): a run of it
** that lacked something is not used. */
static void consume_later (void *ud, uint64_t nm, uint64_t sec) {
  consume_now((tp_part *)ud, nm >> 40, nm & VAL_MASK, sec);
}

static void add_later (void *ud, uint64_t v, uint64_t unused) {
  (void)unused;
  ADD((uint64_t *)ud, v);
}

static inline void consume (const rg_tpslot *s, tp_part *p, uint64_t n,
                            uint64_t milli, uint64_t sec) {
  if (s->heap)
    rg_remote_later_add(HSLOT(s)->r, consume_later, p, n << 40 | milli, sec);
  else consume_now(p, n, milli, sec);
}

/* A partition's totals: milli-RU and requests, folded or not. */
static uint64_t consumed_of (tp_part *p) {
  return LOAD(&p->consumed) + (LOAD(&p->live) & VAL_MASK);
}

static uint64_t requests_of (tp_part *p) {
  return LOAD(&p->requests) + (LOAD(&p->live) >> 40);
}

static void count (rg_tpslot *s, int r, uint64_t milli, uint64_t sec) {
  if (r == RG_TP_EVERY) {
    uint64_t share = milli / s->nparts;
    uint32_t i;
    for (i = 0; i < s->nparts; i++)
      consume(s, &s->part[i], 0,
              i == 0 ? milli - share * (s->nparts - 1) : share, sec);
    add(s, &s->fan_requests, 1);
  }
  else consume(s, &s->part[r], 1, milli, sec);
}

void rg_tp_debit (const rg_admit *a, double charge) {
  rg_tpslot *pool = a->pool;
  uint64_t milli, sec;
  if (pool == NULL) return;
  if (charge < 0) charge = 0;
  milli = (uint64_t)(charge * 1000.0 + 0.5);
  sec = (a->now / NS) & ((1ull << SEC_BITS) - 1);
  if (pool == a->own && a->pool_r != RG_TP_EVERY) {   /* the common case */
    tp_part *p = &pool->part[a->pool_r];
    if (pool->nspr > 0) spend_part(pool, a->pool_r, a->now, charge);
    consume(pool, p, 1, milli, sec);
    return;
  }
  if (pool->nspr > 0) spend(pool, a->pool_r, a->now, charge);
  if (a->own) count(a->own, a->own_r, milli, sec);
  if (a->pool != a->own) count(a->pool, a->pool_r, milli, sec);
}
/* }===================================================================== */


/*
** {=====================================================================
** Configuration
** ======================================================================
*/
typedef struct setreq {
  uint32_t cid;                     /* 0: the database */
  const cJSON *value;
  rg_tpset set;                     /* the value's */
} setreq;

/* Bumps the "\1throughput" version; for the database, stores the value
** (for a container, keeps the database's). */
static int bump (rg_scope *s, const setreq *q, rg_err *e) {
  rg_val v;
  rg_buf b;
  uint8_t ver[8];
  uint64_t n = 0;
  int rc = rg_kv_get(s->txn, RG_DB_META, RG_META_THROUGHPUT,
                    sizeof(RG_META_THROUGHPUT) - 1, &v);
  if (rc != 0 && rc != RG_NOTFOUND)
    return rg_scope_fail(s, rc, "throughput", e);
  if (rc == 0 && v.n >= 8) n = rg_get_u64((const uint8_t *)v.p);
  rg_put_u64(ver, n + 1);
  rg_buf_init(&b);
  rg_buf_add(&b, ver, 8);
  if (q->cid != 0) {
    if (rc == 0 && v.n > 8)
      rg_buf_add(&b, (const char *)v.p + 8, v.n - 8);
  }
  else if (q->value) rg_json_print(q->value, &b);
  if (b.oom) { rg_buf_free(&b); return rg_fail(e, 500, "out of memory"); }
  rc = rg_put(s, RG_DB_META, RG_META_THROUGHPUT,
              sizeof(RG_META_THROUGHPUT) - 1, b.p, b.n, e);
  rg_buf_free(&b);
  return rc;
}

/* Reads every container's spec: on a remote database the database's
** setting is trusted from call to call while the catalog epoch of the
** container a call uses holds, so a change of it moves every container's
** epoch, and the backend learns them from these reads (remote.h). */
static int touch_spec (void *ud, uint32_t cid, const rg_val *spec) {
  return 0;
}

static int read_specs (rg_scope *s, rg_err *e) {
  int rc = rg_cont_each_spec(s->txn, RG_DB_META, touch_spec, NULL);
  return rc ? rg_scope_fail(s, rc, "catalog", e) : 0;
}

static int set_body (rg_scope *s, void *ud, rg_err *e) {
  setreq *q = (setreq *)ud;
  uint8_t key[8];
  rg_val v;
  cJSON *j = NULL;
  rg_cspec *spec = NULL;
  rg_buf text;
  size_t kn;
  int rc;
  if (q->cid == 0) {
    if (s->env->remote) {
      stored st;
      int rc2;
      read_setting(s->txn, &st);
      carry(s->env, 0, &st.db, db_parts(&st.db), &q->set, db_parts(&q->set));
      if ((rc2 = read_specs(s, e))) return rc2;
    }
    return bump(s, q, e);
  }
  kn = rg_meta_key(key, RG_MK_SPEC, q->cid, NULL, 0);
  if ((rc = rg_kv_get(s->txn, RG_DB_META, key, kn, &v)) == RG_NOTFOUND)
    return rg_fail(e, 404, "the container has been deleted");
  if (rc) return rg_scope_fail(s, rc, "catalog", e);
  if (s->env->remote) {
    rg_tpset old;
    int n;
    parse_set((const char *)v.p, v.n, "throughput", &old, &n);
    carry(s->env, q->cid, &old, n, &q->set, n);
  }
  if ((rc = rg_json_parse((const char *)v.p, v.n, &j, e)))
    return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
  cJSON_DeleteItemFromObjectCaseSensitive(j, "throughput");
  if (q->value) {
    cJSON *c = cJSON_Duplicate(q->value, 1);
    if (c == NULL) { cJSON_Delete(j); return rg_fail(e, 500, "out of memory"); }
    cJSON_AddItemToObject(j, "throughput", c);
  }
  if ((rc = rg_cspec_build(j, q->cid, &spec, e))) {
    cJSON_Delete(j);
    return rc;
  }
  rg_cspec_free(spec);
  rg_buf_init(&text);
  rg_json_print(j, &text);
  cJSON_Delete(j);
  if (text.oom) { rg_buf_free(&text); return rg_fail(e, 500, "out of memory"); }
  rc = rg_put(s, RG_DB_META, key, kn, text.p, text.n, e);
  rg_buf_free(&text);
  return rc ? rc : bump(s, q, e);
}

static int set_any (rg_env *env, int sync, uint32_t cid, const cJSON *value,
                    rg_err *e) {
  setreq q;
  rg_tpset set;
  int rc;
  if (value && cJSON_IsNull(value)) value = NULL;
  if ((rc = rg_tpset_parse(value, &set, "throughput", e))) return rc;
  q.cid = cid;
  q.value = value;
  q.set = set;
  if ((rc = rg_scope_run(env, NULL, NULL, sync, 0, set_body, &q, e)))
    return rc;
  return apply(env, cid, 1, 0, e);
}

int rg_tp_set_container (rg_env *env, int sync, uint32_t cid,
                         const cJSON *value, rg_err *e) {
  return set_any(env, sync, cid, value, e);
}

int rg_tp_set_database (rg_env *env, int sync, const cJSON *value,
                        rg_err *e) {
  return set_any(env, sync, 0, value, e);
}

int rg_tp_database (rg_env *env, rg_buf *out, rg_err *e) {
  rg_txn *txn;
  rg_val v;
  int rc;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  if (rg_kv_get(txn, RG_DB_META, RG_META_THROUGHPUT,
                sizeof(RG_META_THROUGHPUT) - 1, &v) == 0 && v.n > 8)
    rg_buf_add(out, (const char *)v.p + 8, v.n - 8);
  rg_read_end(env);
  return out->oom ? rg_fail(e, 500, "out of memory") : 0;
}

void rg_tp_created (rg_env *env, uint32_t cid) {
  rg_err e;
  if (env->remote) return;           /* read at every request */
  apply(env, cid, 0, 1, &e);
}

void rg_tp_replaced (rg_env *env, uint32_t cid) {
  rg_err e;
  if (env->remote) return;
  apply(env, cid, 1, 0, &e);
}

int rg_tp_bump (rg_scope *s, uint32_t cid, const rg_tpset *old,
                const rg_tpset *neu, int nparts, rg_err *e) {
  setreq q;
  memset(&q, 0, sizeof(q));
  q.cid = 1;                         /* any container: keeps the database's */
  carry(s->env, cid, old, nparts, neu, nparts);
  return bump(s, &q, e);
}

void rg_tp_dropped (rg_env *env, uint32_t cid) {
  struct rg_tpfile *f = env->tp;
  if (f == NULL || env->remote) return;
  lock(f);
  drop_slot(f, cid);
  publish(f);
  unlock(f);
}
/* }===================================================================== */


/*
** {=====================================================================
** Counters
** ======================================================================
*/
/* RU/s consumed by a partition over the last RG_TP_WINDOW seconds (span:
** the seconds the counters have run, at most the window). */
static double part_rate (tp_part *p, uint64_t sec, double span) {
  uint64_t total = consumed_of(p), base = 0, best = 0;
  int i, found = 0;
  for (i = 0; i < RING; i++) {
    uint64_t x = LOAD(&p->ring[i]), age;
    if (x == 0) continue;
    age = (sec - (x >> 40)) & ((1ull << SEC_BITS) - 1);
    if (age < RG_TP_WINDOW && (!found || age > best)) {
      best = age;
      base = x & VAL_MASK;
      found = 1;
    }
  }
  if (!found) return 0;
  return (double)((total - base) & VAL_MASK) / 1000.0 / span;
}

int rg_tp_stat (rg_env *env, uint32_t cid, rg_tpstat *out, rg_err *e) {
  struct rg_tpfile *f = env->tp;
  rg_tpslot *s = NULL;
  uint64_t now, sec;
  double span, top = 0;
  int i;
  memset(out, 0, offsetof(rg_tpstat, part));
  if (env->remote) {                 /* the setting now; this process's
                                        counters */
    rg_tpref ref;
    on_remote(env, cid, &ref);
    s = cid == 0 ? ref.pool : ref.own;
    if (s != NULL && cid == 0 && s->cid != 0) s = NULL;
    if (s != NULL) words_in(s, 0, (int)s->nparts);   /* its balances */
  }
  else if (f != NULL) {
    tp_dirent *d = dir(f);
    for (i = 0; i < TP_NDIR; i++) {
      if (!__atomic_load_n(&d[i].used, __ATOMIC_ACQUIRE)) continue;
      if (d[i].cid == cid) s = slot_of(f, &d[i], cid);
    }
  }
  if (s == NULL) return rg_fail(e, 404, "no throughput is provisioned");
  now = clock_of(s);
  sec = (now / NS) & ((1ull << SEC_BITS) - 1);
  out->set.mode = (int)s->mode;
  out->set.ru = s->ru;
  out->set.burst = (int)s->burst;
  out->shared = s->mode == RG_TP_NONE;
  out->nparts = (int)s->nparts;
  span = (double)(now / NS - s->since);
  span = span < 1 ? 1 : span > RG_TP_WINDOW ? RG_TP_WINDOW : span;
  out->requests = LOAD(&s->fan_requests);
  out->throttled = LOAD(&s->fan_throttled);
  for (i = 0; i < (int)s->nparts; i++) {
    tp_part *p = &s->part[i];
    rg_tppart *o = &out->part[i];
    o->range = i;
    o->rate = part_rate(p, sec, span);
    o->requests = requests_of(p);
    o->throttled = LOAD(&p->throttled);
    if (s->nspr > 0) {               /* a bucket holds its size at most */
      uint64_t t = LOAD(&p->tat);
      o->balance = ((double)(now + s->window) - (double)(t > now ? t : now))
                   / s->nspr;
    }
    out->consumed += (double)consumed_of(p) / 1000.0;
    out->rate += o->rate;
    out->requests += o->requests;
    out->throttled += o->throttled;
    if (o->rate > top) top = o->rate;
  }
  if (s->mode == RG_TP_AUTOSCALE) {   /* scaled to its busiest partition */
    out->scaled_to = top * s->nparts;
    if (out->scaled_to < s->ru / 10) out->scaled_to = s->ru / 10;
    if (out->scaled_to > s->ru) out->scaled_to = s->ru;
  }
  return 0;
}
/* }===================================================================== */
