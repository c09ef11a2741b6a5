/*
** env.h: LMDB environments, transactions, scopes and the write primitives.
**
** An environment (rg_env, opaque above store/) is one open database: one
** LMDB environment per path per process, shared by every handle that opens
** the path.  Reads run in a transaction from rg_read_begin; every write
** runs in a scope (rg_scope_run): one LMDB write transaction around a body
** function.
**
** Invariants:
**   - No transaction outlives one call into the core, and no LMDB value is
**     used after its transaction ends (copy it first).
**   - While a scope runs, every write made in this process joins it (a
**     procedure's ctx, a trigger, a transactional handler) and every read
**     sees its writes; LMDB serialises scopes across processes.
**   - A body that raises (through the host's protect callback) never leaves
**     a write transaction open: the scope aborts (or its savepoint rolls
**     back) and rg_scope_run returns RG_RAISED for the host to re-raise.
**   - Bodies must be rerunnable: when LMDB runs out of map the scope aborts,
**     the map grows and the body runs again from the start.
**   - Every change goes through rg_put/rg_reserve/rg_del/rg_cursor_del,
**     which mark the scope failed on a storage error (it can then only
**     abort) and keep the undo log of open savepoints.
*/

#ifndef rg_env_h
#define rg_env_h

#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>

#include "store/guarded.h"
#include "base/charge.h"
#include "base/support.h"

typedef struct rg_env rg_env;
typedef struct rg_scope rg_scope;
struct rg_cspec;
struct rg_hooks;

enum { RG_SYNC_FULL, RG_SYNC_LAZY, RG_SYNC_NONE };

typedef struct rg_open_opts {
  int sync;
  size_t map_size;           /* initial size (0: the default) */
  int readonly;
} rg_open_opts;

/* Opens (or shares) the environment of a database directory, creating it
** and its tables when missing (unless read-only). */
int  rg_env_open (const char *path, const rg_open_opts *o, rg_env **out,
                  rg_err *e);
/* Drops a reference; the last one closes the environment (and calls the
** hooks' release). */
void rg_env_release (rg_env *env);
const char *rg_env_path (const rg_env *env);
int  rg_env_refs (const rg_env *env);
int  rg_env_readonly (const rg_env *env);
/* The 16 bytes keying this database's continuation tokens. */
const uint8_t *rg_env_secret (const rg_env *env);
/* The write scope running now in this process, or NULL. */
rg_scope *rg_env_scope (const rg_env *env);
/* Installs the upward calls of the script runtime (hooks.h) and their
** state; rg_env_hooks gives the state back (NULL: none installed). */
void  rg_env_set_hooks (rg_env *env, const struct rg_hooks *h, void *st);
void *rg_env_hook_state (const rg_env *env);
const struct rg_hooks *rg_env_hooks (const rg_env *env);

/* A transaction to read with: the running write scope's (a reader sees
** its own writes) or the cached read-only one.  Call rg_read_end after. */
int  rg_read_begin (rg_env *env, MDB_txn **txn, rg_err *e);
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

/* A transaction scope: one LMDB write transaction and everything done in
** it.  Upper layers read txn, env, now and work, and set `bound` (saving
** and restoring it around what they run); the rest is the store's. */
struct rg_scope {
  rg_env *env;
  MDB_txn *txn;
  int64_t now;              /* the clock of every write in the scope */
  rg_work work;
  rg_binding bound;
  /* the store's own */
  uint64_t lsn;             /* 0 until the first write takes one */
  uint32_t ord;             /* next ordinal of a change within the lsn */
  uint32_t seq;             /* the last item seq handed out (seq_loaded) */
  int seq_loaded;
  uint32_t pathid_base;     /* path ids above this were made in the scope */
  int failed;               /* a storage error: the scope can only abort */
  int savepoints;           /* open savepoints */
  rg_buf undo;              /* their undo log: what writes overwrote */
  int map_full;             /* set when LMDB ran out of map: grow, rerun */
  uint32_t purged[16];      /* containers whose expired items are gone */
  int npurged;
  /* what its writes hold in memory until the commit (LMDB's dirty pages):
  ** each entry put or deleted, and the pages of a value too big to share
  ** a leaf; a script's transaction is bounded by it (RG_MAX_TXN_DIRTY) */
  uint64_t dirty;
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

/* Writes in a scope (every change goes through these): put a value;
** reserve `vn` bytes for one (NULL on failure); delete a key (absent is
** fine; *gone, when given, says whether it was there). */
int   rg_put (rg_scope *s, int db, const void *k, size_t kn, const void *v,
              size_t vn, rg_err *e);
void *rg_reserve (rg_scope *s, int db, const void *k, size_t kn, size_t vn,
                  rg_err *e);
int   rg_del (rg_scope *s, int db, const void *k, size_t kn, int *gone,
              rg_err *e);
/* A put with LMDB flags (MDB_APPEND: tried at the end first; with
** MDB_NOOVERWRITE, RG_EXISTS when the key is there). */
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
/* Deletes the entry under a cursor of table `db`. */
int   rg_cursor_del (rg_scope *s, int db, MDB_cursor *cur, rg_err *e);
/* Deletes up to `max` keys starting with `prefix`; *count says how many. */
int   rg_del_prefix (rg_scope *s, int db, const void *prefix, size_t pn,
                     uint64_t max, uint64_t *count, rg_err *e);
/* Marks an LMDB failure inside a scope; returns its status. */
int rg_scope_mdb (rg_scope *s, int rc, const char *what, rg_err *e);
/* A new item seq (never 0), from the database's counter; 0 (and the
** scope failed) when the counter could not be written. */
uint32_t rg_scope_seq (rg_scope *s, rg_err *e);
/* The scope's lsn, taken on first use; 0 (and the scope failed) when the
** counter could not be written. */
uint64_t rg_scope_lsn (rg_scope *s, rg_err *e);

/* An LMDB return code as a status (500, or 507 for a full disk). */
int rg_fail_mdb (rg_err *e, int rc, const char *what);

/* Flushes a directory (the names in it): 0 or 500. */
int rg_sync_dir (const char *path, rg_err *e);

/* A consistent, compacted hot copy into a new directory (409 if it holds
** a database already). */
int rg_env_backup (rg_env *env, const char *path, rg_err *e);

/* A repacked copy into a new directory (409 if it holds a database
** already): every table rewritten in key order into full pages; *bytes is
** the copy's size. */
int rg_env_compact (rg_env *env, const char *path, uint64_t *bytes,
                    rg_err *e);

/* Sizes of the environment: map, bytes used, page size, reader slots. */
typedef struct rg_env_info {
  uint64_t map_size, used_bytes, page_size, readers;
} rg_env_info;
void rg_env_info_get (rg_env *env, rg_env_info *out);

/* What each table holds: its entries and the bytes of its pages, and the
** free pages (a walk over every table of sorted duplicates, whose nested
** trees LMDB's own statistics leave out).  Names: rg_env_table_name. */
typedef struct rg_table_stat {
  uint64_t entries, bytes;
} rg_table_stat;
int rg_env_tables (rg_env *env, rg_table_stat out[], uint64_t *free_bytes,
                   rg_err *e);
const char *rg_env_table_name (int db);

#endif
