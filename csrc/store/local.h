/*
** local.h: the local backend: a database directory kept by LMDB.
**
** local.c implements the seam (kv.h) over one LMDB environment, and what
** only a directory on a disk has: opening and creating its tables, the
** cached read transaction, the write transaction with its map growth and
** its write-ahead log (wal.h), statistics, backups and compaction.  It is
** the one file besides wal.c that calls liblmdb.
**
** Invariants (besides kv.h's):
**   - One rg_local per directory per process (env.c shares it between
**     handles); at most one write transaction at a time, and the cached
**     read transaction is not live while it runs (a renewed reader would
**     hold the map a growth replaces).
**   - No LMDB handle, value or code crosses this header: the store above
**     sees rg_txn, rg_cur, rg_val and the codes of kv.h.
*/

#ifndef rg_local_h
#define rg_local_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"
#include "store/kv.h"

typedef struct rg_local rg_local;

/* How a commit is made durable (docs/guarantees.md). */
enum { RG_SYNC_FULL, RG_SYNC_LAZY, RG_SYNC_NONE };

/* Opens the environment of a directory (which exists), creating its
** tables, format version and secret when it is new or lacks some (unless
** read-only), after the log replayed what a power loss kept from the data
** file.  426 for a format 1 database, 404 for what is no database. */
int  rg_local_open (const char *path, int readonly, size_t map_size,
                    rg_local **out, uint8_t secret[16], rg_err *e);
/* Closes it; a writer checkpoints its log first (wal.h). */
void rg_local_close (rg_local *l);
/* This process's commits may carry page deltas in the log (wal.h; a
** database without a log has none). */
void rg_local_log_deltas (rg_local *l);

/* The cached read transaction, renewed: call rg_local_read_end after. */
int  rg_local_read (rg_local *l, rg_txn **t, rg_err *e);
void rg_local_read_end (rg_local *l);

/* The write transaction: begun (growing the map ahead of need, with the
** sync mode's flags and the log), then committed (made durable as the
** mode says; RG_RERUN when the map ran out) or aborted.  After RG_RERUN
** from any call, rg_local_grow makes the room to run it again.  A commit
** `deferred` is made, its writer lock let go, but not yet durable: the
** caller makes it so with rg_local_durable before its next transaction
** (the write queue's leader, letting the next leader start meanwhile). */
int  rg_local_begin (rg_local *l, int sync, rg_txn **t, rg_err *e);
int  rg_local_commit (rg_local *l, int deferred, rg_err *e);
int  rg_local_durable (rg_local *l, rg_err *e);
/* Flushes the log as far as any process appended it (rg_wal_flush). */
int  rg_local_flush_log (rg_local *l, rg_err *e);
void rg_local_abort (rg_local *l);
int  rg_local_grow (rg_local *l, rg_err *e);

/* Sizes: map, bytes used, page size, reader slots in use; and, when the
** database has a write-ahead log (`logged`), what every process did to it
** since the boot (wal.h's rg_wal_stat). */
typedef struct rg_env_info {
  uint64_t map_size, used_bytes, page_size, readers;
  int logged;
  uint64_t log_records, log_bytes, log_flushes, log_checkpoints,
           log_checkpoints_locked, log_deltas;
} rg_env_info;
void rg_local_info (rg_local *l, rg_env_info *out);

/* What each table holds (entries, bytes of pages, the nested trees of
** sorted duplicates included) and the free pages, read in t (a
** transaction of this backend). */
typedef struct rg_table_stat {
  uint64_t entries, bytes;
} rg_table_stat;
int  rg_local_tables (rg_local *l, rg_txn *t, rg_table_stat out[],
                      uint64_t *free_bytes, rg_err *e);

/* A consistent, compacted hot copy into a new directory (409 if it holds
** a database already). */
int  rg_local_backup (rg_local *l, const char *path, rg_err *e);
/* A repacked copy into a new directory (409 if it holds a database):
** every table rewritten in key order into full pages; *bytes its size. */
int  rg_local_compact (rg_local *l, const char *path, uint64_t *bytes,
                       rg_err *e);
/* The data file of the database at `path` was replaced by another (a
** compacted copy, an upgrade): its log is forgotten (wal.h). */
int  rg_local_forget (const char *path, rg_err *e);
/* Walks every page of the file as transaction t sees it, without LMDB
** (pagewalk.h): what is damaged, in *w (rg_walk_free it). */
struct rg_walk;
void rg_local_walk (rg_local *l, rg_txn *t, struct rg_walk *w);
/* Flushes the data file. */
int  rg_local_flush (rg_local *l, rg_err *e);

/*
** Another database's files read as they are (the upgrade reads a format 1
** database through this): the log replayed, the environment opened with
** the `n` plain tables named (table i of the transaction is names[i]), in
** one write transaction held until rg_local_close, which aborts it.  409
** when another process has the files open, 404 when a table is missing.
*/
int  rg_local_open_raw (const char *path, const char *const *names, int n,
                        rg_local **out, rg_txn **t, rg_err *e);

#endif
