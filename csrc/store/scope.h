/*
** scope.h: reads, and the write scopes every change runs in.
**
** Reads run in a transaction from rg_read_begin: the running scope's,
** when there is one (a reader sees its own writes), or the backend's
** cached read transaction.  Every write runs in a scope (rg_scope_run):
** one write transaction of the backend around a body function, with the
** work counters a charge is computed from.
**
** Invariants:
**   - While a scope runs, every write made in this process joins it (a
**     procedure's ctx, a trigger, a transactional handler) and every read
**     sees its writes; the backend serialises scopes across processes.
**   - A body that raises (through the host's protect callback) never leaves
**     a write transaction open: the scope aborts (or its savepoint rolls
**     back) and rg_scope_run returns RG_RAISED for the host to re-raise.
**   - Bodies must be rerunnable: when the backend asks for it (RG_RERUN,
**     kv.h) the scope aborts, the backend makes room, and the body runs
**     again from the start.
**   - Every change goes through rg_put/rg_reserve/rg_del/rg_dput/rg_ddel/
**     rg_cursor_del, which mark the scope failed on a storage error (it can
**     then only abort); the seam keeps the savepoints' undo.
*/

#ifndef rg_scope_h
#define rg_scope_h

#include <stddef.h>
#include <stdint.h>

#include "base/charge.h"
#include "base/support.h"
#include "store/kv.h"

typedef struct rg_env rg_env;
typedef struct rg_scope rg_scope;
struct rg_cspec;

/* A transaction to read with: the running write scope's (a reader sees
** its own writes) or the cached read-only one.  Call rg_read_end after. */
int  rg_read_begin (rg_env *env, rg_txn **txn, rg_err *e);
void rg_read_end (rg_env *env);

/* What binds a scope to one logical partition (procedures, batches): the
** container and partition prefix, and the 400 message for any other. */
typedef struct rg_binding {
  const struct rg_cspec *spec;    /* NULL: unbound */
  const uint8_t *lp;
  size_t lplen;
  const char *msg;
  void *script;                   /* the running procedure/trigger, if any */
} rg_binding;

/* A transaction scope: one write transaction and everything done in it.
** Upper layers read txn, env, now and work, and set `bound` (saving and
** restoring it around what they run); the rest is the store's. */
struct rg_scope {
  rg_env *env;
  rg_txn *txn;
  int64_t now;              /* the clock of every write in the scope */
  rg_work work;
  rg_binding bound;
  /* the store's own */
  uint64_t lsn;             /* the lsn rg_scope_lsn gave last (0: none) */
  uint32_t ord;             /* next ordinal of a change within the lsn */
  uint32_t seq, seq_end;    /* item seqs taken, not yet handed out: seq ..
                               seq_end - 1 (rg_scope_seq) */
  uint32_t pathid_base;     /* path ids above this were made in the scope */
  uint64_t serial;          /* this scope's number in its environment: the
                               path ids it made are cached under it */
  uint32_t backs;           /* savepoint rollbacks so far (rg_scope_back) */
  uint64_t writes;          /* changes made so far (rg_put ... rg_cursor_del) */
  int failed;               /* a storage error: the scope can only abort */
  int rerun;                /* the backend asked for a rerun (RG_RERUN) */
  uint32_t purged[16];      /* containers whose expired items are gone */
  int npurged;
};

/* The body of a scope: returns 0 (commit) or a status (abort). */
typedef int (*rg_body) (rg_scope *s, void *ud, rg_err *e);

/* How a host runs a body that may raise: calls call(arg) protected and
** returns 0, or RG_RAISED when it raised (the host keeps the error). */
#define RG_RAISED (-1)
typedef int (*rg_protect) (void *host, void (*call) (void *), void *arg);

/* Runs `body` in a write scope on `env`, through `protect` when given
** (NULL: the body cannot raise).  When a scope is already running the body
** joins it; with `savepoint` set it then runs so that its failure leaves
** the outer scope as it was.  Returns 0, a status, or RG_RAISED. */
int rg_scope_run (rg_env *env, rg_protect protect, void *host, int sync,
                  int savepoint, rg_body body, void *ud, rg_err *e);

/* A mark in the running scope, to go back to: the seam's savepoint and the
** scope's own counters (lsn, ordinals, seqs, purges).  rg_scope_back
** undoes everything done since (and ends the mark), rg_scope_keep ends it
** keeping it; marks nest, and end innermost first. */
typedef struct rg_mark {
  size_t sp;
  uint64_t lsn;
  uint32_t ord, seq, seq_end, purged[16];
  int npurged;
} rg_mark;
void rg_scope_mark (rg_scope *s, rg_mark *m);
void rg_scope_back (rg_scope *s, const rg_mark *m);
void rg_scope_keep (rg_scope *s, const rg_mark *m);

/* Writes in a scope (every change goes through these): put a value;
** reserve `vn` bytes for one (NULL on failure); delete a key (absent is
** fine; *gone, when given, says whether it was there: the key is then
** read first, a condition of the write on the remote seam). */
int   rg_put (rg_scope *s, int db, const void *k, size_t kn, const void *v,
              size_t vn, rg_err *e);
void *rg_reserve (rg_scope *s, int db, const void *k, size_t kn, size_t vn,
                  rg_err *e);
int   rg_del (rg_scope *s, int db, const void *k, size_t kn, int *gone,
              rg_err *e);
/* A put with flags (RG_KV_APPEND: tried at the end first; with
** RG_KV_NOOVERWRITE, RG_EXISTS when the key is there). */
#define RG_EXISTS (-2)
int   rg_put_flags (rg_scope *s, int db, const void *k, size_t kn,
                    const void *v, size_t vn, unsigned flags, rg_err *e);
/* Tables of sorted duplicates (index, latest): add one duplicate (there
** already is fine; `append`: it is likely past the key's last one), or
** remove one (absent is fine).  rg_del would remove them all. */
int   rg_dput (rg_scope *s, int db, const void *k, size_t kn, const void *v,
               size_t vn, int append, rg_err *e);
int   rg_ddel (rg_scope *s, int db, const void *k, size_t kn, const void *v,
               size_t vn, int *gone, rg_err *e);
/* Deletes the entry under a cursor. */
int   rg_cursor_del (rg_scope *s, rg_cur *cur, rg_err *e);
/* Deletes up to `max` keys starting with `prefix`; *count says how many. */
int   rg_del_prefix (rg_scope *s, int db, const void *prefix, size_t pn,
                     uint64_t max, uint64_t *count, rg_err *e);
/* Marks a storage failure (a code of kv.h) inside a scope; returns its
** status. */
int rg_scope_fail (rg_scope *s, int rc, const char *what, rg_err *e);
/* A new item seq (never 0), from those the scope took from the backend
** (rg_kv_seqs: at least `ahead` at once, when it has none left); 0 (and
** the scope failed) when none could be taken. */
uint32_t rg_scope_seq (rg_scope *s, uint32_t ahead, rg_err *e);
/* The lsn of the scope's changes to the partition of item key k (NULL: not
** an item's; rg_kv_lsn), also left in s->lsn; 0 (and the scope failed)
** when it could not be taken. */
uint64_t rg_scope_lsn (rg_scope *s, const void *k, size_t kn, rg_err *e);
/* Adds to a pair of counters (rg_kv_add). */
int rg_scope_add (rg_scope *s, int db, const void *k, size_t kn,
                  int64_t items, int64_t bytes, uint64_t bound,
                  unsigned flags, rg_err *e);

#endif
