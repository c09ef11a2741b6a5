/*
** deadline.c: a limit on the CPU time a piece of work may take
** (deadline.h says how it is kept cheap).
*/

#include "base/deadline.h"

#define PAUSED INT64_MIN

/* The CPU time of the calling thread, ns. */
static int64_t cpu_ns (void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The gate for `left` ns of CPU still allowed. */
static int64_t gate_for (int64_t left) {
  return rg_coarse_ms() + (left > 0 ? left / 1000000 : 0);
}

void rg_deadline_start (rg_deadline *d, int64_t limit_ns) {
  d->limit = limit_ns > 0 ? limit_ns : 0;
  d->used = 0;
  d->passed = 0;
  d->start = d->limit ? cpu_ns() : 0;
  d->gate = d->limit ? gate_for(d->limit) : 0;
}

int64_t rg_deadline_used (rg_deadline *d) {
  if (d->start == PAUSED) return d->used;
  return d->used + (cpu_ns() - d->start);
}

void rg_deadline_pause (rg_deadline *d) {
  if (d->limit == 0 || d->start == PAUSED) return;
  d->used = rg_deadline_used(d);
  d->start = PAUSED;
  d->gate = INT64_MAX;
}

void rg_deadline_resume (rg_deadline *d) {
  if (d->limit == 0 || d->start != PAUSED) return;
  d->start = cpu_ns();
  d->gate = gate_for(d->limit - d->used);
}

int rg_deadline_check (rg_deadline *d) {
  int64_t used;
  if (d->passed) return 1;
  if (d->limit == 0 || d->start == PAUSED) return 0;
  used = rg_deadline_used(d);
  if (used >= d->limit) return d->passed = 1;
  /* at least one tick on, so that the CPU clock is read once a tick */
  d->gate = gate_for(d->limit - used);
  if (d->gate <= rg_coarse_ms()) d->gate = rg_coarse_ms() + 1;
  return 0;
}
