/*
** deadline.c: a limit on the CPU time a piece of work may take
** (deadline.h says how it is kept cheap).
*/

#include "base/deadline.h"

#define REF_MS 10            /* wall time before the CPU clock is read */

/* The CPU time of the calling thread, ns. */
static int64_t cpu_ns (void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The gate `left` ns of CPU from `now` (ms), no later than `cap` ms. */
static int64_t gate_at (int64_t now, int64_t left, int64_t cap) {
  int64_t g = now + (left > 0 ? left / 1000000 : 0);
  return g < cap ? g : cap;
}

/* Starts a stretch of work: no CPU clock read yet. */
static void stretch (rg_deadline *d) {
  d->wall = rg_coarse_ms();
  d->ref = -1;
  d->gate = gate_at(d->wall, d->limit - d->used, d->wall + REF_MS);
}

void rg_deadline_start (rg_deadline *d, int64_t limit_ns) {
  d->limit = limit_ns > 0 ? limit_ns : 0;
  d->used = 0;
  d->passed = 0;
  if (d->limit) stretch(d);
  else { d->ref = -1; d->gate = 0; d->wall = 0; }
}

/* The CPU the work has taken so far, ns: the CPU clock is read from the
** first call on, the wall time before it counted as CPU. */
static int64_t used_ns (rg_deadline *d, int64_t now) {
  if (d->ref < 0) {
    d->used += (now - d->wall) * 1000000;
    d->ref = cpu_ns();
    return d->used;
  }
  return d->used + (cpu_ns() - d->ref);
}

int rg_deadline_check (rg_deadline *d) {
  int64_t now, used;
  if (d->passed) return 1;
  if (d->limit == 0) return 0;
  now = rg_coarse_ms();
  used = used_ns(d, now);            /* REF_MS on: read the CPU clock */
  if (used >= d->limit) return d->passed = 1;
  /* at least one tick on, so that the CPU clock is read once a tick */
  d->gate = gate_at(now, d->limit - used, INT64_MAX);
  if (d->gate <= now) d->gate = now + 1;
  return 0;
}

int64_t rg_deadline_left (rg_deadline *d) {
  int64_t used;
  if (d->limit == 0) return INT64_MAX;
  if (d->passed) return 0;
  used = used_ns(d, rg_coarse_ms());
  return used < d->limit ? d->limit - used : 0;
}
