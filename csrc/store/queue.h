/*
** queue.h: the write queue the processes of a database share
** (store/queue.c; docs/api.md, The write queue).
**
** Without it, each process's write is a write transaction and a flush of
** its own, and processes writing at once (nginx's workers) take LMDB's
** writer lock in turn.  Through the queue, a process puts its request,
** described as data (bytes the host makes and reads), in a slot of a
** mapped file (<dir>/regolith.queue.2, named for its layout) and waits.
** Whoever holds the queue's leader lock runs every request queued, each
** in a savepoint of its own, in one write transaction committed and
** flushed once, and leaves each result in its slot; each process takes
** its own, as if it had run alone.
** A request the queue cannot take (no queue file, a database whose tables
** a host elsewhere keeps (remote.h), every slot taken, a request too
** large, a scope running in the caller) is the caller's to run directly;
** so is one whose result is too large for its slot (the leader undoes
** it).  So a deferred commit (env->deferred) is only ever a local one.
**
** Invariants:
**   - A slot goes FREE -> FILLING (its process writes the request) ->
**     PENDING -> CLAIMED (by a leader holding the leader lock) ->
**     COMMITTED (the transaction is committed, its flush under way, the
**     leader lock let go) -> DONE (its result, durable), ALONE (undone:
**     its process runs it) or FAILED (the transaction failed: nothing of
**     it is kept) -> FREE (its process took the outcome).  Only a leader moves a slot from PENDING to an
**     outcome; only the slot's process frees it, or whoever finds that
**     process dead.
**   - A leader's transaction writes its batch number ("\1qbatch2" in meta:
**     the last committed one + 1), and every member's outcome is in its
**     slot before the commit.  So a leader taking the lock from one that
**     died knows, in its own transaction, whether each slot the dead one
**     claimed was committed (its batch is not above the stored one: the
**     outcome stands, made durable by this leader's flush) or not (it runs
**     again, if its process still waits).  A leader that died between its
**     commit and its flush leaves its slots COMMITTED: their processes
**     flush the log themselves.  No acknowledged request is lost, none is
**     made twice, and a dead leader or waiter blocks no one.
**   - A request runs only while its process waits for it: a leader lets
**     go of the slots of processes that died instead of running them (a
**     dead leader's own request among them).
**   - The batch runs under the strongest sync of its members.
*/

#ifndef rg_queue_h
#define rg_queue_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"
#include "store/env.h"
#include "store/scope.h"

typedef struct rg_queue rg_queue;

/* How a process runs a request (any process's) when it leads: run() puts
** the request's result in res and returns 0 to keep its writes, or
** non-zero to undo them (the request raised; its result stands).  It runs
** through protect (given `host`, as rg_scope_run), inside a savepoint of
** its own in the leader's scope; when it raised, raised() gives the result
** to hand over instead (the error is the host's). */
typedef struct rg_qhost {
  rg_protect protect;
  void *host;
  void *ud;
  int  (*run) (void *ud, const void *req, size_t n, rg_buf *res);
  void (*raised) (void *ud, rg_buf *res);
} rg_qhost;

/* The caller runs the request itself (rg_queue_write). */
#define RG_QUEUE_ALONE (-3)

/* Runs the request `req` (n bytes) through the queue of env, under `sync`
** at least: 0 and its result appended to res; RG_QUEUE_ALONE, the caller
** runs it directly; or the status of the transaction that held it, which
** failed (e says why; nothing of it is kept). */
int  rg_queue_write (rg_env *env, int sync, const rg_qhost *h,
                     const void *req, size_t n, rg_buf *res, rg_err *e);
/* Lets the queue of an environment go (env.c, at its last release). */
void rg_queue_close (rg_queue *q);

/* Batches committed through the queue of env since the boot, and the
** requests they held, counted by every process; and the requests queued
** now whose outcome is not yet decided (PENDING or CLAIMED).  All 0 where
** there is no queue. */
typedef struct rg_queue_stat {
  uint64_t batches, members, waiting;
} rg_queue_stat;
void rg_queue_stats (rg_env *env, rg_queue_stat *out);

#endif
