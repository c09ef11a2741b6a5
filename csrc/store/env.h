/*
** env.h: a database open in this process (an environment).
**
** An environment (rg_env, opaque above store/) is one open database: one
** per directory per process, shared by every handle that opens it
** (LMDB's locks are per process, so a directory may not be opened twice),
** found by device and inode and counted by references.  It holds the
** backend (local.h), the database's secret, the script runtime's hooks
** (hooks.h), the write scope running now (scope.h), the path-id cache
** (index.c) and the throughput budgets (throughput.h).  env.c opens and
** closes it, which is why it sits above the files whose state it owns.
**
** Invariants:
**   - No transaction outlives one call into the core, and no value read
**     is used after its transaction ends (kv.h).
**   - The last release closes everything the environment holds, hooks'
**     state first, the backend last.
*/

#ifndef rg_env_h
#define rg_env_h

#include <stddef.h>
#include <stdint.h>

#include "base/charge.h"
#include "base/support.h"
#include "store/kv.h"
#include "store/local.h"
#include "store/scope.h"

struct rg_hooks;

typedef struct rg_open_opts {
  int sync;
  size_t map_size;           /* initial size (0: the default) */
  int readonly;
  int log_deltas;            /* page deltas in the log (wal.h): from now on
                             ** in this process, for every handle */
} rg_open_opts;

/* Opens (or shares) the environment of a database directory, creating it
** and its tables when missing (unless read-only). */
int  rg_env_open (const char *path, const rg_open_opts *o, rg_env **out,
                  rg_err *e);
/* Opens a database kept by a host elsewhere (remote.h), named `name`
** (its path in messages), with its secret: not shared with other handles
** (each has its own overlay). */
int  rg_env_open_remote (const char *name, const uint8_t secret[16],
                         int readonly, rg_env **out, rg_err *e);
/* The remote backend of an environment, or NULL (a local one). */
struct rg_remote *rg_env_remote (const rg_env *env);
/* Is what the running call read so far what the database holds?  Always
** locally; a remote backend's run may be reading guesses (remote.h), and
** nothing built from them may be kept past the run (a cache). */
int rg_env_complete (const rg_env *env);
/* Is an upgrade of `path` interrupted between its two renames (upgrade.h)?
** Then the directory has no data.mdb, an open gives 409, and running the
** upgrade again finishes it. */
int  rg_upgrade_interrupted (const char *path);
/* Drops a reference; the last one closes the environment (and calls the
** hooks' release). */
void rg_env_release (rg_env *env);
const char *rg_env_path (const rg_env *env);
int  rg_env_refs (const rg_env *env);
/* The 16 bytes keying this database's continuation tokens. */
const uint8_t *rg_env_secret (const rg_env *env);
/* The write scope running now in this process, or NULL. */
rg_scope *rg_env_scope (const rg_env *env);
/* Installs the upward calls of the script runtime (hooks.h) and their
** state; rg_env_hook_state gives the state back (NULL: none installed). */
void  rg_env_set_hooks (rg_env *env, const struct rg_hooks *h, void *st);
void *rg_env_hook_state (const rg_env *env);

/* The backend's sizes, tables, copies (local.h). */
void rg_env_info_get (rg_env *env, rg_env_info *out);
int  rg_env_tables (rg_env *env, rg_table_stat out[], uint64_t *free_bytes,
                    rg_err *e);
const char *rg_env_table_name (int db);
int  rg_env_backup (rg_env *env, const char *path, rg_err *e);
/* Every page of the file as txn sees it, walked without LMDB
** (pagewalk.h, local.h): verify's first check (a remote database has no
** pages: an empty walk). */
struct rg_walk;
void rg_env_walk (rg_env *env, rg_txn *txn, struct rg_walk *w);
int  rg_env_compact (rg_env *env, const char *path, uint64_t *bytes,
                     rg_err *e);

#endif
