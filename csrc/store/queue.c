/*
** queue.c: the write queue the processes of a database share (queue.h).
**
** The file <dir>/regolith.queue.2 (3 MiB): a header page (stamp, the leader
** lock, a futex word counting the batches, counters), then Q_SLOTS slots,
** each a small header, a request area and a result area.  It is allocated
** whole when made, and never flushed: it describes the processes of this
** boot, which its stamp names; a process finding another boot's stamp (or
** none) makes it anew, under a lock on its first byte (where it cannot be
** allocated, a full disk, there is no queue).  Its name carries its
** layout (Q_LAYOUT), and so does the meta key of its batch number
** (RG_META_QBATCH): a build laying the slots out otherwise uses another
** file and another number, so that its processes still running after an
** upgrade without a reboot keep their own queue, which the new build's
** never reads nor remakes under them (the two queues' leaders take LMDB's
** writer lock in turn, as two writers alone do), and neither reads the
** other's batch number as its own.
**
** A process queues: it takes a FREE slot (a compare-and-swap), writes its
** request, marks it PENDING, and then, until its slot has an outcome,
** tries the leader lock: held, it waits on its slot's bell (a futex word
** only its own events ring: its outcome, or its turn to lead) for at most
** Q_WAIT_MS, after which it tries again (so a leader that died is
** noticed: the lock is robust).  A leader letting go of the lock rings
** the bell of one slot still queued, whose process leads next; after its
** flush it rings each of its members' bells: every waiter is woken once
** for its outcome, and no waiter for another's.  Got, it leads: while
** other processes are in the queue it first waits a little for their
** requests (gather: eight looks 50 µs apart at most, and only while more
** keep coming), then it claims every PENDING slot, and every
** CLAIMED one (a dead leader's, since none other can hold the lock), and
** runs them in one scope (batch_body): it reads the last batch committed,
** settles the dead leader's slots by it, writes its own batch number, and
** runs each request in a savepoint through the host's run().  Once it is
** committed (LMDB's writer lock let go, the log not yet flushed: the
** commit is deferred, local.h), the slots are COMMITTED, the leader lock
** is let go and the waiters woken, so that the next leader's transaction
** begins while this one's flush runs; after the flush each slot gets its
** outcome, so an outcome given is durable.  A waiter whose slot stays
** COMMITTED while its leader is gone flushes the log itself.
**
** REGOLITH_QUEUE_TRACE=<file> (read once, when the queue is opened; off,
** it costs a branch) appends to <file> a line per request its process
** made ("r": from queued to claimed, to committed, to its outcome, to its
** process seeing it, and the whole, in µs; whether it led a batch) and
** one per batch it led ("b": members, the gathering, the transaction, the
** commit's flush, in µs), each line in one write(2) to a file opened for
** appending, so that the lines of several processes never mix, for
** examples/bench/queuetrace.lua.
*/

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "base/deadline.h"
#include "store/env_int.h"
#include "store/local.h"
#include "store/queue.h"
#include "store/shm.h"

#define Q_MAGIC   0x3155455551475247ull   /* "GRQUEUE1" */
#define Q_LAYOUT_N 2                      /* the layout, which names */
#define Q_TEXT(x) #x
#define Q_DIGITS(x) Q_TEXT(x)
#define Q_LAYOUT  ((uint32_t)Q_LAYOUT_N)
#define Q_FILE    "regolith.queue." Q_DIGITS(Q_LAYOUT_N)  /* the file */
#define Q_BATCH   RG_META_QBATCH Q_DIGITS(Q_LAYOUT_N)     /* its batch key */
#define Q_SLOTS   64
#define Q_REQ     (16u << 10)
#define Q_RES     (32u << 10)
#define Q_HEAD    4096
#define Q_WAIT_MS 10
#define Q_GATHER_US   400       /* a leader waits at most this long for */
#define Q_GATHER_STEP 50        /* more requests, looking this often (µs) */

enum { S_FREE, S_FILLING, S_PENDING, S_CLAIMED, S_COMMITTED, S_DONE, S_ALONE,
       S_FAILED };
/* what a member's run left in its slot (before the commit); O_DROP: its
** process is gone, it was not run */
enum { O_RESULT, O_ALONE, O_DROP };

typedef struct qslot {
  uint32_t state;
  uint32_t bell;               /* futex word: rung for this slot's process */
  int32_t pid;                 /* the process that queued it */
  int32_t sync;                /* the sync it asked for */
  int32_t status;              /* FAILED: the transaction's status */
  int32_t leader;              /* COMMITTED: the process making it durable */
  uint64_t batch;              /* CLAIMED: its batch (0: not known yet) */
  uint32_t outcome;            /* O_RESULT or O_ALONE, set before commit */
  uint32_t reqlen, reslen;     /* FAILED: reslen is the message's */
  uint32_t pad;
  int64_t t_claim, t_commit, t_out;  /* traced: when (µs, monotonic) */
  uint8_t req[Q_REQ];
  uint8_t res[Q_RES];
} qslot;

typedef struct qhead {
  uint64_t magic;
  uint32_t layout, nslots;
  char boot[40];
  pthread_mutex_t lead;
  uint32_t lead_state;
  uint32_t pad;
  uint64_t batches, members;   /* since the boot */
} qhead;

struct rg_queue {
  int fd;
  int gather_us;               /* Q_GATHER_US, or REGOLITH_QUEUE_GATHER's */
  int trace;                   /* REGOLITH_QUEUE_TRACE's fd, or -1 */
  size_t len;
  qhead *h;
  qslot *slots;
};

#define Q_LEN (Q_HEAD + (size_t)Q_SLOTS * sizeof(qslot))

/*
** {=====================================================================
** The file
** ======================================================================
*/
void rg_queue_close (rg_queue *q) {
  if (q == NULL) return;
  if (q->h) munmap(q->h, q->len);
  if (q->fd >= 0) close(q->fd);
  if (q->trace >= 0) close(q->trace);
  free(q);
}

/* Appends a line of the trace in one write(2) (O_APPEND: whole, whatever
** other processes append at the same time). */
static void trace_line (rg_queue *q, const char *fmt, ...) {
  char line[256];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n > 0 && (size_t)n < sizeof(line)) {
    ssize_t w = write(q->trace, line, (size_t)n);   /* failed: lost */
    (void)w;
  }
}

/* Opens (making it anew when it is another boot's) the queue file of the
** database at `path`; NULL when there is none to be had (the caller writes
** alone). */
static rg_queue *queue_open (const char *path) {
  char name[4096], boot[40];
  qhead head;
  struct stat st;
  rg_queue *q;
  int ok = 0;
  if (rg_boot_id(boot) != 0) return NULL;
  if ((q = (rg_queue *)calloc(1, sizeof(rg_queue))) == NULL) return NULL;
  q->len = Q_LEN;
  q->fd = q->trace = -1;
  q->gather_us = Q_GATHER_US;
  {                                 /* the benches' A/B: 0 never waits */
    const char *g = getenv("REGOLITH_QUEUE_GATHER");
    if (g != NULL && *g >= '0' && *g <= '9')
      q->gather_us = atoi(g) > 10000 ? 10000 : atoi(g);
  }
  {
    const char *t = getenv("REGOLITH_QUEUE_TRACE");
    if (t != NULL && *t != '\0')
      q->trace = open(t, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }
  snprintf(name, sizeof(name), "%s/" Q_FILE, path);
  if ((q->fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0 ||
      rg_file_lock(q->fd, F_WRLCK) != 0) {
    rg_queue_close(q);
    return NULL;
  }
  memset(&head, 0, sizeof(head));
  if (fstat(q->fd, &st) == 0 && st.st_size >= (off_t)Q_LEN &&
      pread(q->fd, &head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
      memcmp(head.boot, boot, 40) == 0)
    ok = head.magic == Q_MAGIC && head.layout == Q_LAYOUT &&
         head.nslots == Q_SLOTS ? 1 : -1;
  if (ok == 0) {                    /* another boot's, or new: made anew */
    memset(&head, 0, sizeof(head));
    head.magic = Q_MAGIC;
    head.layout = Q_LAYOUT;
    head.nslots = Q_SLOTS;
    memcpy(head.boot, boot, 40);
    /* every block allocated now: a page of a mapped file that would have
    ** to be allocated when first written, on a full disk, kills the
    ** process writing it (SIGBUS) */
    if (ftruncate(q->fd, 0) == 0 &&
        posix_fallocate(q->fd, 0, (off_t)Q_LEN) == 0 &&
        pwrite(q->fd, &head, sizeof(head), 0) == (ssize_t)sizeof(head))
      ok = 1;
  }
  if (ok == 1) {
    void *m = mmap(NULL, Q_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, q->fd, 0);
    if (m != MAP_FAILED) {
      q->h = (qhead *)m;
      q->slots = (qslot *)((uint8_t *)m + Q_HEAD);
    }
  }
  rg_file_lock(q->fd, F_UNLCK);
  if (q->h == NULL) {
    rg_queue_close(q);
    return NULL;
  }
  return q;
}

/* The queue of env, opened on first use; NULL where there is none to be
** had: a database whose tables a host elsewhere keeps (remote.h) has no
** directory for the file, and each of its writes commits by itself. */
static rg_queue *queue_get (rg_env *env) {
  if (env->remote) return NULL;
  if (env->queue == NULL && !env->queue_off &&
      (env->queue = queue_open(env->path)) == NULL)
    env->queue_off = 1;
  return env->queue;
}

void rg_queue_stats (rg_env *env, rg_queue_stat *out) {
  char name[4096];
  struct stat st;
  int i;
  memset(out, 0, sizeof(*out));
  if (env->remote) return;           /* no queue: see queue_get */
  snprintf(name, sizeof(name), "%s/" Q_FILE, env->path);
  if (env->readonly || (env->queue == NULL && stat(name, &st) != 0) ||
      queue_get(env) == NULL)
    return;                          /* never used: not made for this */
  out->batches = __atomic_load_n(&env->queue->h->batches, __ATOMIC_RELAXED);
  out->members = __atomic_load_n(&env->queue->h->members, __ATOMIC_RELAXED);
  for (i = 0; i < Q_SLOTS; i++) {
    uint32_t st = __atomic_load_n(&env->queue->slots[i].state,
                                  __ATOMIC_ACQUIRE);
    if (st == S_PENDING || st == S_CLAIMED) out->waiting++;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Waiting
** ======================================================================
*/
/* The monotonic clock in µs (the trace's). */
static int64_t now_us (void) {
  return rg_mono_ns() / 1000;
}

/* Waits until slot s's bell rings (moves from `seen`), for at most
** Q_WAIT_MS; 1 when that time passed with nothing rung. */
static int wait_bell (qslot *s, uint32_t seen) {
#ifdef __linux__
  struct timespec ts;
  ts.tv_sec = 0;
  ts.tv_nsec = Q_WAIT_MS * 1000000L;
  return syscall(SYS_futex, &s->bell, FUTEX_WAIT, seen, &ts, NULL, 0) != 0 &&
         errno == ETIMEDOUT;
#else
  struct timespec ts;
  ts.tv_sec = 0;
  ts.tv_nsec = 1000000L;
  nanosleep(&ts, NULL);
  return __atomic_load_n(&s->bell, __ATOMIC_ACQUIRE) == seen;
#endif
}

/* Wakes the process waiting on slot s's bell. */
static void ring (qslot *s) {
  __atomic_add_fetch(&s->bell, 1, __ATOMIC_SEQ_CST);
#ifdef __linux__
  syscall(SYS_futex, &s->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
}

/* Whether the process pid is gone: no such process, or one that ended and
** is not yet reaped by its parent (a zombie, whose pid still answers). */
static int dead (int32_t pid) {
  char name[64], stat[256], *p;
  ssize_t n;
  int fd;
  if (pid <= 0) return 0;
  if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
  snprintf(name, sizeof(name), "/proc/%d/stat", (int)pid);
  if ((fd = open(name, O_RDONLY | O_CLOEXEC)) < 0) return errno == ENOENT;
  n = read(fd, stat, sizeof(stat) - 1);
  close(fd);
  if (n <= 0) return 0;
  stat[n] = '\0';
  /* "pid (comm) S ...": the state follows the last ')' */
  if ((p = strrchr(stat, ')')) == NULL || p[1] != ' ') return 0;
  return p[2] == 'Z' || p[2] == 'X';
}

/* Frees slot s, seen in state st, when its process died and no one else
** will: an outcome it never read, a request it never finished writing,
** or a commit whose leader died too.  Whether it did. */
static int take_back (qslot *s, uint32_t st) {
  if ((st == S_FILLING || st >= S_DONE ||
       (st == S_COMMITTED && dead(s->leader))) && dead(s->pid))
    return __atomic_compare_exchange_n(&s->state, &st, S_FREE, 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return 0;
}

/* Takes a FREE slot for this process; NULL when there is none, even after
** taking back those whose process died. */
static qslot *take_slot (rg_queue *q) {
  int i, round;
  for (round = 0; round < 2; round++) {
    for (i = 0; i < Q_SLOTS; i++) {
      qslot *s = &q->slots[i];
      uint32_t st = S_FREE;
      if (__atomic_compare_exchange_n(&s->state, &st, S_FILLING, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return s;
    }
    for (i = 0; i < Q_SLOTS; i++)     /* a dead process's outcome, unread */
      take_back(&q->slots[i], __atomic_load_n(&q->slots[i].state,
                                              __ATOMIC_ACQUIRE));
  }
  return NULL;
}
/* }===================================================================== */


/*
** {=====================================================================
** Leading
** ======================================================================
*/
typedef struct batch {
  rg_queue *q;
  rg_env *env;
  const rg_qhost *h;
  int sync;
  int n;
  qslot *slot[Q_SLOTS];
  int settled[Q_SLOTS];        /* a dead leader's, committed: as it was */
  qslot *cur;                  /* the member running */
  rg_buf res;
} batch;

static void put_result (qslot *s, const rg_buf *res) {
  s->outcome = O_RESULT;
  memcpy(s->res, res->p ? res->p : "", res->n);
  s->reslen = (uint32_t)res->n;
}

/* Claims the slots queued (PENDING), and before the transaction (`first`)
** those a dead leader claimed (CLAIMED: no other leader can be running),
** taking the strongest sync among them; in the transaction, once the
** writer lock is held, the slots queued meanwhile whose sync is no
** stronger than the batch's join it.  A dead leader's slot whose process
** is gone is let go instead (a queued one is, by batch_body, just before
** it would run): a request runs only while its process waits for it, so
** that a process's death never makes a write of its own happen after the
** writes others made since. */
static void claim (batch *b, int first) {
  int i;
  for (i = 0; i < Q_SLOTS; i++) {
    qslot *s = &b->q->slots[i];
    uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    int sync = s->sync;
    if (sync < RG_SYNC_FULL || sync > RG_SYNC_NONE) sync = RG_SYNC_FULL;
    if (first && st == S_CLAIMED && dead(s->pid)) {
      /* no one waits for it: not run (a dead leader's own request, or one
      ** whose process died queued), as if it had died before queueing */
      __atomic_store_n(&s->state, S_FREE, __ATOMIC_RELEASE);
      continue;
    }
    if (st == S_PENDING && (first || sync >= b->sync)) {
      s->batch = 0;
      s->outcome = O_RESULT;
      if (b->q->trace >= 0) s->t_claim = now_us();
      __atomic_store_n(&s->state, S_CLAIMED, __ATOMIC_RELEASE);
    }
    else if (!(first && st == S_CLAIMED)) continue;  /* a dead leader's */
    if (sync < b->sync) b->sync = sync;
    b->slot[b->n++] = s;
  }
}

/* One member, in a savepoint of its own. */
static int member_body (rg_scope *sc, void *ud, rg_err *e) {
  batch *b = (batch *)ud;
  qslot *s = b->cur;
  int rc;
  (void)sc;
  b->res.n = 0;
  b->res.oom = 0;
  rc = b->h->run(b->h->ud, s->req, s->reqlen > Q_REQ ? Q_REQ : s->reqlen,
                 &b->res);
  if (b->res.oom || b->res.n > Q_RES) {   /* too large: its process runs it */
    s->outcome = O_ALONE;
    s->reslen = 0;
    return rg_fail(e, 413, "the result does not fit the queue's slot");
  }
  put_result(s, &b->res);
  return rc ? rg_fail(e, 400, "the request raised") : 0;
}

static int batch_body (rg_scope *sc, void *ud, rg_err *e) {
  batch *b = (batch *)ud;
  uint8_t buf[8];
  uint64_t last = 0, mine;
  rg_val v;
  int i, rc;
  rc = rg_kv_get(sc->txn, RG_DB_META, Q_BATCH, sizeof(Q_BATCH) - 1, &v);
  if (rc == 0 && v.n == 8) last = rg_get_u64((const uint8_t *)v.p);
  else if (rc && rc != RG_NOTFOUND) return rg_scope_fail(sc, rc, "read", e);
  mine = last + 1;
  claim(b, 0);
  for (i = 0; i < b->n; i++) {
    qslot *s = b->slot[i];
    b->settled[i] = s->batch != 0 && s->batch <= last;
    if (!b->settled[i]) s->batch = mine;
  }
  rg_put_u64(buf, mine);
  if ((rc = rg_put(sc, RG_DB_META, Q_BATCH, sizeof(Q_BATCH) - 1, buf, 8, e)))
    return rc;
  for (i = 0; i < b->n; i++) {
    rg_err me;
    if (b->settled[i]) continue;
    b->cur = b->slot[i];
    if (dead(b->cur->pid)) {           /* no one waits for it any more */
      b->cur->outcome = O_DROP;
      continue;
    }
    rc = rg_scope_run(b->env, b->h->protect, b->h->host, b->sync, 1,
                      member_body, b, &me);
    if (sc->failed) return rg_fail(e, sc->failed, "%s", me.msg);
    if (rc == RG_RAISED) {             /* undone: the host's error stands */
      b->res.n = 0;
      b->res.oom = 0;
      b->h->raised(b->h->ud, &b->res);
      if (b->res.oom || b->res.n > Q_RES) b->res.n = 0;
      put_result(b->cur, &b->res);
    }
  }
  return 0;
}

/* The outcome of a slot whose batch failed with `rc` (e says why). */
static void failed (qslot *s, int rc, const rg_err *e) {
  size_t n = strlen(e->msg);
  memcpy(s->res, e->msg, n);
  s->reslen = (uint32_t)n;
  s->status = rc;
  __atomic_store_n(&s->state, S_FAILED, __ATOMIC_RELEASE);
  ring(s);
}

/* The outcome of a slot whose batch is committed and durable. */
static void settle (qslot *s) {
  __atomic_store_n(&s->state, s->outcome == O_ALONE ? S_ALONE : S_DONE,
                   __ATOMIC_RELEASE);
  ring(s);
}

/* Lets go of the leader lock, and rings the bell of a slot still queued:
** its process leads next (were it gone, the others try again after
** Q_WAIT_MS). */
static void hand_over (rg_queue *q) {
  int i;
  pthread_mutex_unlock(&q->h->lead);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  /* the unlock, then the look */
  for (i = 0; i < Q_SLOTS; i++)
    if (__atomic_load_n(&q->slots[i].state, __ATOMIC_SEQ_CST) == S_PENDING) {
      ring(&q->slots[i]);
      return;
    }
}

/* With the leader lock held, before claiming: while other processes are
** in the queue (slots neither FREE nor PENDING: a request being written,
** a batch being flushed, whose writers come back with their next), waits
** for their requests, as long as each look finds more queued than the
** one before, for at most q->gather_us.  A writer alone never waits: the
** batch grows where the requests come faster than a commit. */
static void gather (rg_queue *q) {
  struct timespec ts;
  int waited, seen = -1;
  ts.tv_sec = 0;
  ts.tv_nsec = Q_GATHER_STEP * 1000L;
  for (waited = 0; waited < q->gather_us; waited += Q_GATHER_STEP) {
    int i, pending = 0, busy = 0, flushing = 0;
    for (i = 0; i < Q_SLOTS; i++) {
      uint32_t st = __atomic_load_n(&q->slots[i].state, __ATOMIC_ACQUIRE);
      if (st == S_PENDING) pending++;
      else if (st != S_FREE) busy++;
      if (st == S_COMMITTED || st == S_CLAIMED) flushing++;
    }
    if (busy > 0 && flushing == 0 && seen < 0) {
      /* no batch in flight: the others may be outcomes that processes
      ** which died never read, which a writer alone must not wait for at
      ** every batch (kill() first: take_back's look at /proc is dearer) */
      busy = 0;
      for (i = 0; i < Q_SLOTS; i++) {
        qslot *s = &q->slots[i];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == S_FREE || st == S_PENDING) continue;
        if (st >= S_DONE && s->pid > 0 && kill((pid_t)s->pid, 0) != 0 &&
            errno == ESRCH && take_back(s, st))
          continue;
        busy++;
      }
    }
    if (busy == 0 || pending <= seen) return;
    seen = pending;
    nanosleep(&ts, NULL);
  }
}

/* With the leader lock held, which it lets go: claims the queued slots and
** runs them in one transaction.  Once it is committed the lock is let go
** and the waiters woken, so that the next leader's transaction begins
** while this one's flush runs; then each slot gets its outcome.  Its
** members (0: it found none, their batch committed before it got the
** lock). */
static int lead (rg_queue *q, rg_env *env, const rg_qhost *h) {
  batch b;
  rg_err e;
  int i, rc;
  int64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  memset(&b, 0, sizeof(b));
  b.q = q;
  b.env = env;
  b.h = h;
  b.sync = RG_SYNC_NONE;
  if (q->trace >= 0) t0 = now_us();
  gather(q);
  claim(&b, 1);
  if (b.n == 0) {
    hand_over(q);
    return 0;
  }
  if (q->trace >= 0) t1 = now_us();
  rg_buf_init(&b.res);
  env->deferred = 1;
  rc = rg_scope_run(env, NULL, NULL, b.sync, 0, batch_body, &b, &e);
  env->deferred = 0;
  rg_buf_free(&b.res);
  if (q->trace >= 0) t2 = now_us();
  for (i = 0; i < b.n; i++) {
    qslot *s = b.slot[i];
    if (s->outcome == O_DROP && !b.settled[i])
      __atomic_store_n(&s->state, S_FREE, __ATOMIC_RELEASE);
    else if (rc == 0) {                /* committed, not yet durable */
      s->leader = (int32_t)getpid();
      s->t_commit = t2;
      __atomic_store_n(&s->state, S_COMMITTED, __ATOMIC_RELEASE);
    }
    else if (!b.settled[i]) failed(s, rc, &e);
    /* else committed by the dead leader: left to the next leader */
  }
  if (rc == 0) {
    __atomic_add_fetch(&q->h->batches, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&q->h->members, (uint64_t)b.n, __ATOMIC_RELAXED);
  }
  hand_over(q);
  if (rc) return b.n;
  rc = rg_local_durable(env->local, &e);
  if (q->trace >= 0) t3 = now_us();
  for (i = 0; i < b.n; i++) {
    qslot *s = b.slot[i];
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != S_COMMITTED) continue;
    s->t_out = t3;
    if (rc && s->outcome != O_ALONE) failed(s, rc, &e);
    else settle(s);
  }
  if (q->trace >= 0)
    trace_line(q, "b %d %lld %lld %lld\n", b.n, (long long)(t1 - t0),
               (long long)(t2 - t1), (long long)(t3 - t2));
  return b.n;
}
/* }===================================================================== */


int rg_queue_write (rg_env *env, int sync, const rg_qhost *h,
                    const void *req, size_t n, rg_buf *res, rg_err *e) {
  rg_queue *q;
  qslot *s;
  uint32_t st;
  int rc, led = 0;
  int64_t t_enq = 0;
  if (env->scope != NULL || env->readonly || n > Q_REQ ||
      (q = queue_get(env)) == NULL || (s = take_slot(q)) == NULL)
    return RG_QUEUE_ALONE;
  s->pid = (int32_t)getpid();        /* first: a FILLING slot's pid is */
  memcpy(s->req, req, n);            /* looked at by take_back */
  s->reqlen = (uint32_t)n;
  s->sync = sync;
  s->reslen = 0;
  s->status = 0;
  s->t_claim = s->t_commit = s->t_out = 0;
  if (q->trace >= 0) t_enq = now_us();
  __atomic_store_n(&s->state, S_PENDING, __ATOMIC_SEQ_CST);
  for (;;) {
    uint32_t seen = __atomic_load_n(&s->bell, __ATOMIC_SEQ_CST);
    if ((st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) >= S_DONE) break;
    /* queued, or claimed by a leader that may have died holding the lock:
    ** try to lead (committed: its leader is flushing, nothing to lead) */
    if (st <= S_CLAIMED &&
        rg_shm_trylock(&q->h->lead, &q->h->lead_state) >= 0) {
      if (lead(q, env, h) > 0) led = 1;
      continue;
    }
    if (wait_bell(s, seen) && st == S_COMMITTED && dead(s->leader)) {
      /* committed by a leader that died before its flush: flush it here */
      rg_err fe;
      int frc = rg_local_flush_log(env->local, &fe);
      if (frc && s->outcome != O_ALONE) failed(s, frc, &fe);
      else settle(s);
    }
  }
  if (q->trace >= 0 && s->t_claim && s->t_commit && s->t_out) {
    int64_t t = now_us();
    trace_line(q, "r %lld %lld %lld %lld %lld %d\n",
               (long long)(s->t_claim - t_enq),
               (long long)(s->t_commit - s->t_claim),
               (long long)(s->t_out - s->t_commit), (long long)(t - s->t_out),
               (long long)(t - t_enq), led);
  }
  if (st == S_DONE) {
    rg_buf_add(res, s->res, s->reslen > Q_RES ? Q_RES : s->reslen);
    rc = res->oom ? rg_fail(e, 500, "out of memory") : 0;
  }
  else if (st == S_ALONE) rc = RG_QUEUE_ALONE;
  else rc = rg_fail(e, s->status > 0 ? s->status : 500, "%.*s",
                    (int)(s->reslen > 400 ? 400 : s->reslen),
                    (const char *)s->res);
  __atomic_store_n(&s->state, S_FREE, __ATOMIC_RELEASE);
  return rc;
}
