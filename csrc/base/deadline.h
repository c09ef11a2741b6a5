/*
** deadline.h: a limit on the CPU time a piece of work may take.
**
** A script's execution and a query are each given a number of seconds of
** the CPU time of the thread that runs them (docs/scripts.md, Limits;
** docs/query.md, Limits).  CPU time, not the wall clock, so that a busy
** machine, which makes the work wait, does not make it fail: what is
** bounded is the work itself.
**
** Reading a thread's CPU clock is a system call (2 us on the reference
** machine, a virtual one), too dear for every query; the coarse monotonic
** clock is read through the vDSO in tens of ns.  A thread cannot use more
** CPU time than wall time passes, so:
**   - the CPU clock is first read (`ref`) only when the work has lasted
**     REF_MS of wall time: the CPU it took before counts as that wall
**     time, an upper bound; work that ends sooner never reads it;
**   - then the limit cannot have been reached before `gate`, the instant
**     at which the time left would be over if the thread ran all along:
**     rg_deadline_passed reads the coarse clock only, until the gate, then
**     the CPU clock, and moves the gate by the CPU time still left.
** So a deadline costs a coarse clock read when it starts and at every
** check, and a few CPU clock reads in work that runs to its limit, which
** is noticed within one tick of the coarse clock (4 ms) of the check that
** follows it.  The count errs only towards stopping early, by at most the
** time the thread waited during its first REF_MS.
**
** A deadline is not shared between threads: the one that starts it is
** the one whose CPU is counted.
*/

#ifndef rg_deadline_h
#define rg_deadline_h

#include <stdint.h>
#include <time.h>

typedef struct rg_deadline {
  int64_t limit;      /* ns of CPU time the work may take; 0: no limit */
  int64_t used;       /* ns of CPU taken before `ref` (or the stretch) */
  int64_t wall;       /* ms, coarse: when the current stretch began */
  int64_t ref;        /* the thread's CPU clock once read, or -1 */
  int64_t gate;       /* ms, coarse monotonic: no check before */
  int passed;
} rg_deadline;

/* The coarse monotonic clock, in ms. */
static inline int64_t rg_coarse_ms (void) {
  struct timespec ts;
#if defined(CLOCK_MONOTONIC_COARSE)
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The monotonic clock, in ns (the fine one: a queue's trace, a clock
** kept beside a server's). */
static inline int64_t rg_mono_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Starts the clock of work allowed `limit_ns` of CPU (0: no limit). */
void    rg_deadline_start (rg_deadline *d, int64_t limit_ns);
/* The slow part of rg_deadline_passed: reads the CPU clock. */
int     rg_deadline_check (rg_deadline *d);

/* The CPU time still left, ns (INT64_MAX without a limit); reads the
** CPU clock, as the check does (a system call: for a signal asked once
** in a while, not for every step). */
int64_t rg_deadline_left (rg_deadline *d);
/* 1 once the work has taken its limit. */
static inline int rg_deadline_passed (rg_deadline *d) {
  if (d->passed) return 1;
  if (d->limit == 0 || rg_coarse_ms() < d->gate) return 0;
  return rg_deadline_check(d);
}

#endif
