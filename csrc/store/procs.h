/*
** procs.h: processors' operations on their state: first sight, sharing
** and renewing leases, reading a batch under a lease, checkpoints,
** failures and dead letters, the transactional batch, lag and status.
**
** A processor (lua/regolith/processor.lua runs its loop) reads the change
** feed of one container and hands batches to a handler; the Lua binding
** (host/processor.c) calls these.  Invariants, over lease.h's records: an
** instance works on a range only while it owns the lease and the lease has
** not expired; a checkpoint or a failure is recorded only if the lease is
** still its own and still at the batch's first change (else the batch is
** reported lost, and will be delivered again); another instance takes a
** lease only once it is free or has expired; instances share the ranges,
** each taking at most ceil(ranges / live instances).  Every operation but
** the reads runs in a write scope of its own and may not run inside
** another (the caller checks).
*/

#ifndef rg_procs_h
#define rg_procs_h

#include "store/feed.h"
#include "store/lease.h"

/* The batch last handed out on a range: [start, end), n changes. */
typedef struct rg_pending {
  rg_fpos start, end;
  size_t n;
} rg_pending;

/* A processor as this process runs it. */
typedef struct rg_proc {
  rg_pname id;                 /* container, name, instance */
  int mode, nparts, max_attempts;
  size_t max_items;
  int64_t lease_ms;
  int sync;                    /* of the scopes it runs */
  int nowned;                  /* the ranges held after rg_proc_maintain */
  int owned[RG_MAX_PARTITIONS];
  rg_pending pend[RG_MAX_PARTITIONS];
} rg_proc;

/* Milliseconds since the epoch (the clock of leases). */
int64_t rg_now_ms (void);

/* Creates the leases at the start position (RG_START_*, `t` seconds) the
** first time the name is seen; 409 when it exists in another mode. */
int rg_proc_init (rg_proc *p, int kind, double t, rg_err *e);
/* Heartbeat, then gives back what is over its share, takes free and then
** expired leases up to it, and renews what it holds (p->owned). */
int rg_proc_maintain (rg_proc *p, rg_err *e);
/* Gives every lease it holds back, and its heartbeat. */
int rg_proc_release (rg_proc *p, rg_err *e);
/* Forgets the processor: leases, heartbeats, dead letters (404: none). */
int rg_proc_forget (rg_proc *p, rg_err *e);

/* For handlers outside a transaction: the batch at the checkpoint of a
** range this instance holds (409 otherwise), into `b`; *attempt is the
** delivery's number.  The batch is remembered as pending. */
int rg_proc_read (rg_proc *p, int r, rg_batch *b, uint32_t *attempt,
                  rg_err *e);
/* Moves the checkpoint past the pending batch; *lost when the lease moved. */
int rg_proc_commit (rg_proc *p, int r, int *lost, rg_err *e);
/* Counts a failed delivery of the pending batch (error `msg`): *attempts
** so far, and *dead when it went to the dead letters (the checkpoint
** then moves past it); *lost when the lease moved. */
int rg_proc_fail (rg_proc *p, int r, const char *msg, size_t msglen,
                  uint32_t *attempts, int *dead, int *lost, rg_err *e);

/* Is anything waiting on a range this instance holds (a read-only look,
** so that an idle range costs no write transaction)? */
int rg_proc_waiting (rg_proc *p, int r, uint64_t *waiting, rg_err *e);
/* The handler of a transactional batch: sets *failed when it failed (the
** batch then fails and the scope aborts); returns 0, or a status with `e`
** filled for a failure of its own.  It may raise through the protect the
** scope runs with. */
typedef int (*rg_proc_handler) (void *ud, const rg_batch *b, int range,
                                uint32_t attempt, int *failed, rg_err *e);
/* The transactional batch: in one write scope, the lease, the batch at its
** checkpoint (into `b`), the handler, and the new checkpoint.  *n is the
** batch's size; *lost when the lease is not ours; *failed when the handler
** failed (returns 500 then, nothing committed).  May return RG_RAISED. */
int rg_proc_run_tx (rg_proc *p, rg_protect protect, void *host, int r,
                    rg_proc_handler h, void *ud, rg_batch *b, size_t *n,
                    int *lost, int *failed, rg_err *e);

/* Every lease, and the changes waiting after each checkpoint (arrays of
** p->nparts). */
int rg_proc_snapshot (rg_proc *p, rg_lease *ls, uint64_t *lag, rg_err *e);
/* The dead letters, oldest first, appended to `out` as (u64 sequence
** number, u64 length, JSON text) records. */
int rg_proc_dead_letters (rg_proc *p, rg_buf *out, rg_err *e);
/* Removes every dead letter; *count says how many. */
int rg_proc_clear_dead (rg_proc *p, int *count, rg_err *e);
/* Removes the dead letter of sequence number `seq` (404: none). */
int rg_proc_drop_dead (rg_proc *p, uint64_t seq, rg_err *e);

#endif
