/*
** wal.h: the write-ahead log that makes a durable commit one contiguous
** append and one flush (store/wal.c; docs/guarantees.md).
**
** LMDB writes a transaction's pages where the last commit does not look,
** then its meta page, and flushes twice; the pages are scattered, and each
** scattered page in a flush costs far more than a contiguous one.  With
** the log, LMDB runs without flushing (MDB_NOSYNC), and every page it
** writes for a transaction is also copied into one record appended to the
** log file (<dir>/regolith.wal), which is flushed once, before the meta
** page goes to the data file.  The data file is flushed only at
** checkpoints.  Ordinarily a checkpoint stops no writer: once the records
** since the last one pass a few MiB, a commit claims one at itself, and a
** thread of some process flushes the data file and writes a header naming
** that commit as the log's base, while writers go on appending; the
** records are a ring, going back to the start of the file once the base
** has moved past it.  A checkpoint under the writer lock, which restarts
** the log, is left for a commit that cannot be logged, a writer that
** finds the log behind, the ring filled faster than checkpoints keep up,
** and a close.  After a power loss, the first process to open the
** database copies the records of the log from the base on, in order, over
** the data file (the pages as they were committed), and then sets both
** meta pages to the last record's.
**
** What is shared by the processes using the database lives in a small
** mapped file (<dir>/regolith.shm) that is never flushed, stamped with the
** boot's identity: a process that finds it stamped by another boot (or
** missing) knows the machine restarted, and recovers.
**
** Invariants:
**   - A record holds every page LMDB wrote for its transaction (page
**     images trimmed of the unused middle of branch and leaf pages), the
**     meta page last; records have consecutive transaction ids from the
**     checkpoint's, a checksum, and the checkpoint's epoch.
**   - Page deltas (pagedelta.h), where a process asked for them
**     (rg_wal_deltas; off by default: on a disk whose flush costs about
**     the same for 28 KB as for 74 KB, the CPU they take makes a lone
**     durable commit slower, docs/performance.md): a branch or leaf page
**     may be written as
**     the changes from a source page S instead, when that is smaller; the
**     replay reads S from the data file as it has left it.  S is a page
**     the same process's commits wrote, kept in its cache, and
**     it may serve only while (1) the last commit was this process's (no
**     other record lies between S's last write and this one, so the cache
**     holds each page's last write), (2) no checkpoint was claimed or
**     made since S was written (so any replay that reaches this record
**     starts before S's record and applies it first; a page written
**     before the base may have been reused and overwritten since), and
**     (3) this record does not write S itself.  A commit that claims a checkpoint empties the cache; a
**     commit that fails, or is not logged, empties it too.  Each delta is
**     checked at the commit (applied to S, it makes the page exactly) and
**     at the replay (the page it makes has the number and the 64-bit sum
**     that the delta carries, or the database is refused as damaged).  A record with deltas has its own magic; a
**     build before them stops at it as at the end of the log, without a
**     word, so after a crash or power cut such a log must be replayed by
**     a build that knows them (a clean close leaves none to replay).
**     Memory a database handle keeps for them across commits, at most:
**     4 MiB of cached images; 256 images of the commit's own pages (1 MiB
**     with 4 KiB pages, 4 MiB with 16 KiB ones); the record's second
**     buffer, 1 MiB (a bigger one, as big as its commit's record, is freed
**     when the commit ends); 4 pages of scratch; and tables of a few dozen
**     bytes per page of the last commit.
**   - A transaction starts with the log flushed at least up to the one two
**     before it, which is what LMDB's page reuse needs (a transaction may
**     overwrite pages the commit two before it freed): the replay can
**     always reach a state whose pages are all there.  Sync "lazy" asks
**     no more: never more than the last two commits are unflushed.
**   - A header names its base K only once the data file holding K's pages
**     is flushed; records are never written over the ones a replay from
**     the header on the disk reads (from its base on), nor before that
**     header is flushed.
**   - Sync "full": a commit's record is flushed before the call returns
**     (rg_wal_durable): other processes commit meanwhile, and one flush
**     serves every record appended before it (group commit across
**     processes).  A commit holds its data pages that overwrite blocks
**     the data file already has, on a file system that overwrites them
**     in place (ext2-4, tmpfs: so that their writes cannot fail for
**     room), up to 8 MiB; when it held any, the flush begins on a thread
**     of the process as soon as the record is appended, and the held
**     pages are written meanwhile (after the record, not before it as the
**     others are), the meta page after them, before the writer lock is let
**     go; a commit that held none flushes after it, in rg_wal_durable.
**     Held pages that cannot be written fail the commit, and its record is
**     zeroed (flushed) before the call returns, so that no replay makes
**     it; a power cut between the record's flush and the zeroing can
**     still replay it, and when the zeroing cannot be written, or the meta
**     page's own write fails after the held pages, the record stays until
**     the next transaction unmakes it: the commit's error
**     then says that its outcome is unknown (rg_wal_kept).  The thread is
**     one per database handle that committed with sync "full", idle
**     between commits, with every signal blocked, joined at rg_wal_close.
**   - Only the commit's own page writes are held (rg_wal_committing);
**     a transaction that wrote a page before its commit began (LMDB
**     spilled its dirty pages, and reads them back through the map) holds
**     none.  What remains assumed of LMDB 0.9 (checked against 0.9.24's
**     mdb_txn_commit and mdb_page_spill): the commit's own puts (the
**     tables' roots, the free list) spill only when the dirty list is
**     within a few dozen pages of full (131,071), and such a spill writes
**     at least 16,383 of its entries, more than HOLD_MAX, so it is written
**     at once; it could be held only if nearly all of those entries were
**     loose or kept pages, which LMDB skips.
**     Sync "none": commits are not logged; the first such commit after
**     logged ones checkpoints and marks the log "unlogged", and the first
**     logged commit after them checkpoints again.
**   - A process closing the database checkpoints, marked "closed": a
**     restart then trusts the data file, and the next commit checkpoints
**     again before it logs.
**   - Only the store sees LMDB's writes: liblmdb's calls to pwrite and
**     writev (and lseek, whose position the writev's hook keeps) are
**     routed through wal.c (its import table is patched once per
**     process); writes to files that are not a database's data file,
**     or made outside a write scope, go straight through.  Where that is
**     not possible (LMDB linked statically, no boot identity), there is no
**     log and the sync modes are LMDB's own.
*/

#ifndef rg_wal_h
#define rg_wal_h

#include <lmdb.h>

#include "base/support.h"

typedef struct rg_wal rg_wal;

/* Before LMDB opens the directory: joins the processes using it, and when
** this is the first open since the machine started, replays the log into
** the data file (a read-only open too, when it may write the files).
** *out is NULL (and 0 returned) when there is no log. */
int  rg_wal_open (const char *path, int readonly, rg_wal **out, rg_err *e);
/* 0 when a liblmdb of this version (mdb_version's numbers) has the page
** and meta layout the log was built for (LMDB 0.9), else 500 and why:
** rg_wal_open refuses such a library. */
int  rg_wal_check_lmdb (int major, int minor, int patch, rg_err *e);
/* After LMDB opened it (and its tables exist): starts logging its data
** file, from a checkpoint when this process recovered. */
int  rg_wal_attach (rg_wal *w, MDB_env *mdb, rg_err *e);
/* This process's commits to the database may carry page deltas from now
** on (until it closes it); REGOLITH_LOG_DELTAS=1 in the environment turns
** them on for every database the process opens. */
void rg_wal_deltas (rg_wal *w);
void rg_wal_close (rg_wal *w);
/* When a process lets the database go, with the writer lock held (txn, a
** write transaction it aborts after): a checkpoint marked "closed", so that
** until the next logged commit the data file alone is the truth (another
** LMDB program may then write it, and a restart replays nothing over it). */
int  rg_wal_closing (rg_wal *w, MDB_txn *txn, rg_err *e);

/* The transaction of the last checkpoint the log at `path` names (the
** data file was flushed there: it can hold no older one), read without
** joining the database; 0 when there is no log or no whole header.
** *closed (when given): the checkpoint was a process letting the database
** go (whatever committed since was not written through this library). */
uint64_t rg_wal_base (const char *path, int *closed);

/* The data file of the database at `path` was replaced by another file (a
** compacted copy moved into place, an upgrade): the log, the shared file,
** the write queue's (queue.h: requests left by processes that died) and
** regolith.id (preflight.h), which describe the file that was there,
** are removed and the directory flushed, so that no replay ever writes that file's pages over
** the new one.  Only where no process has the database open. */
int  rg_wal_forget (const char *path, rg_err *e);

/* Around one write transaction: begin (after mdb_txn_begin) returns 0 or a
** status; end after its commit or abort. */
int  rg_wal_begin (rg_wal *w, MDB_txn *txn, int sync, rg_err *e);
void rg_wal_end (rg_wal *w);
/* Right before mdb_txn_commit of the transaction begun: its page writes
** from here on are the commit's (only those may be held). */
void rg_wal_committing (rg_wal *w);
/* After a commit LMDB failed, before the next begin: 1 when its record
** stays in the log (not unmade: the zeroing failed, or the meta page's
** write after the held pages), so that a power cut before
** the next transaction unmakes it may still make the commit. */
int  rg_wal_kept (const rg_wal *w);
/* Flushes every record appended so far, by any process (a commit another
** process made, whose own flush may never come: the write queue's leader
** that died after its commit); 0 or a status. */
int  rg_wal_flush (rg_wal *w, rg_err *e);
/* After a commit, before the call returns: sync "full" waits until its
** record is on the disk (for the flush its commit began, else flushing the
** log unless a flush begun after the record did).  0 or a status (the
** commit is made, its durability is not known). */
int  rg_wal_durable (rg_wal *w, rg_err *e);

/* What the log did since the machine started, counted by every process
** of the database: records appended and their bytes, flushes of the log,
** checkpoints without the writer lock and under it, pages written as
** deltas. */
typedef struct rg_wal_stat {
  uint64_t records, bytes, flushes, checkpoints, checkpoints_locked, deltas;
} rg_wal_stat;
void rg_wal_stats (rg_wal *w, rg_wal_stat *out);

#endif
