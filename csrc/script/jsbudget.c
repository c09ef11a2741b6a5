/*
** jsbudget.c: the budgets of the JavaScript runtime's runs (jsint.h; what
** they are is told in js.c's opening essay): the allocator, the checks
** Duktape calls, the watchdog thread.
*/

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "script/jsint.h"

__thread rg_js *rg_js_current;


/*
** {=====================================================================
** The allocator, the budgets, the watchdog
** ======================================================================
*/
/* Stops the run for good: its thread interrupts at the next instruction
** (and the interrupt answers "stop" from then on). */
void rg_js_stop (rg_js *js, int why) {
  if (js->stop == RG_STOP_NONE) js->stop = why;
  if (js->counter) *js->counter = 0;
}

/* Adds work to the run's and stops it past the budget or the deadline
** (which is read every 64 calls). */
void rg_js_spend (rg_js *js, uint64_t n) {
  js->spent += n;
  if (js->spent > js->budget) rg_js_stop(js, RG_STOP_BUDGET);
  if ((++js->checks & 63) == 0 && rg_coarse_ms() > js->deadline)
    rg_js_stop(js, RG_STOP_BUDGET);
}

/* May the heap grow by n bytes? */
static int admit (rg_js *js, size_t n) {
  if (!js->armed) return 1;
  if (js->stop == RG_STOP_MEMORY) return 0;
  rg_js_spend(js, ALLOC_COST + (n >> ALLOC_SHIFT));
  if (js->held + n > js->limit) {
    if (++js->refused >= 2) rg_js_stop(js, RG_STOP_MEMORY);
    return 0;
  }
  js->refused = 0;
  return 1;
}

void *rg_js_alloc (void *ud, duk_size_t n) {
  rg_js *js = (rg_js *)ud;
  blk *b;
  if (!admit(js, n) || (b = (blk *)malloc(sizeof(blk) + n)) == NULL)
    return NULL;
  b->n = n;
  b->next = js->all.next;
  b->prev = &js->all;
  b->next->prev = b;
  js->all.next = b;
  js->held += n;
  return b + 1;
}

void rg_js_dealloc (void *ud, void *p) {
  rg_js *js = (rg_js *)ud;
  blk *b;
  if (p == NULL) return;
  b = (blk *)p - 1;
  b->prev->next = b->next;
  b->next->prev = b->prev;
  js->held -= b->n;
  free(b);
}

void *rg_js_realloc (void *ud, void *p, duk_size_t n) {
  rg_js *js = (rg_js *)ud;
  blk *b, *nb;
  if (p == NULL) return rg_js_alloc(ud, n);
  b = (blk *)p - 1;
  if (n > b->n && !admit(js, n - b->n)) return NULL;
  b->prev->next = b->next;           /* out of the ring while it moves */
  b->next->prev = b->prev;
  nb = (blk *)realloc(b, sizeof(blk) + (n ? n : 1));
  if (nb == NULL) nb = b;            /* the old block stays */
  else {
    js->held = js->held - nb->n + n;
    nb->n = n;
  }
  nb->next = js->all.next;
  nb->prev = &js->all;
  nb->next->prev = nb;
  js->all.next = nb;
  return nb == b && n > b->n ? NULL : nb + 1;
}

/* Duktape's interrupt, every INTERRUPT instructions (and at every
** instruction once it has answered 1). */
int rg_js_interrupt (void *ud) {
  rg_js *js = (rg_js *)ud;
  if (!js->armed) return 0;
  if (js->stop == RG_STOP_NONE) {
    js->spent += INTERRUPT;
    if (js->spent > js->budget || rg_coarse_ms() > js->deadline)
      rg_js_stop(js, RG_STOP_BUDGET);
  }
  return js->stop != RG_STOP_NONE;
}

/* Before native calls and in native recursions: charges the call, bounds
** the C stack; nonzero makes Duktape throw a RangeError. */
int rg_js_native_check (void) {
  rg_js *js = rg_js_current;
  char here;
  if (js == NULL || !js->armed) return 0;
  if (js->stop == RG_STOP_NONE) rg_js_spend(js, NATIVE_COST);
  if (js->stop != RG_STOP_NONE) return 1;
  return js->cbase - &here > (ptrdiff_t)CSTACK_MAX;
}

/*
** The watchdog: one thread per process, made at the first run (and ended
** with the process's last heap: heaps_add), which
** sleeps until the deadline of the run armed now and, if it is still the
** same run then, zeroes its instruction countdown every millisecond until
** it is disarmed.  `gen` names the armed run; the countdown is a plain int
** Duktape decrements, written here without a lock: a write lost to the
** executor's own is made again a millisecond later.
*/
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;
static pid_t wd_pid;                 /* the process the thread runs in */
static pthread_t wd_thread;
static int wd_heaps, wd_quit;        /* heaps alive; the thread must end */
static struct { uint64_t gen; int64_t deadline; volatile duk_int_t *counter; }
  wd;

static void *watchdog (void *arg) {
  (void)arg;
  pthread_mutex_lock(&wd_lock);
  for (;;) {
    struct timespec ts;
    int64_t t;
    if (wd_quit) break;
    if (wd.counter == NULL) {
      pthread_cond_wait(&wd_cond, &wd_lock);
      continue;
    }
    t = rg_coarse_ms();
    if (t < wd.deadline) {
      clock_gettime(CLOCK_REALTIME, &ts);
      t = wd.deadline - t;
    }
    else {
      *wd.counter = 0;
      clock_gettime(CLOCK_REALTIME, &ts);
      t = 1;
    }
    ts.tv_sec += t / 1000;
    ts.tv_nsec += (t % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    pthread_cond_timedwait(&wd_cond, &wd_lock, &ts);
  }
  pthread_mutex_unlock(&wd_lock);
  return NULL;
}

/* A heap is made or freed: the thread ends with the last heap of the
** process (joined, so that it never outlives the module's code, which
** the host may unload once its databases are closed). */
void rg_js_heaps (int d) {
  int join;
  pthread_mutex_lock(&wd_lock);
  wd_heaps += d;
  join = wd_heaps == 0 && wd_pid == getpid();
  if (join) {
    wd_quit = 1;
    pthread_cond_signal(&wd_cond);
  }
  pthread_mutex_unlock(&wd_lock);
  if (join) {
    pthread_join(wd_thread, NULL);
    pthread_mutex_lock(&wd_lock);
    wd_pid = 0;
    wd_quit = 0;
    pthread_mutex_unlock(&wd_lock);
  }
}

/* Starts watching a run (making the thread in this process when it has
** none: a fork leaves the parent's behind). */
void rg_js_watch (rg_js *js) {
  pthread_mutex_lock(&wd_lock);
  if (wd_pid != getpid()) {         /* none yet, or the parent's (a fork) */
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 << 10);
    wd_quit = 0;
    if (pthread_create(&wd_thread, &a, watchdog, NULL) == 0) wd_pid = getpid();
    pthread_attr_destroy(&a);
  }
  wd.gen++;
  wd.deadline = js->deadline;
  wd.counter = js->counter;
  pthread_cond_signal(&wd_cond);
  pthread_mutex_unlock(&wd_lock);
}

void rg_js_unwatch (void) {
  pthread_mutex_lock(&wd_lock);
  wd.counter = NULL;
  pthread_mutex_unlock(&wd_lock);
}
/* }===================================================================== */
