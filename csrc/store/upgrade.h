/*
** upgrade.h: a database of an older format made one of this format.
**
** rg_upgrade rebuilds a format 1 database as format 2 (layout.c): the
** catalog, scripts, processors' records and counters are carried over;
** every item is written again from its stored JSON, with its own _etag,
** _ts, _lsn and expiry, which rebuilds the index, unique, TTL, refs and
** latest-version tables and the statistics; the all-versions feed is
** carried over record by record (or dropped, when asked).  The new
** database is built beside the old one and checked (db:verify, and the
** count of every container's items) before it takes the old one's place;
** the old data file is kept as data.mdb.format1 unless asked otherwise.
** Invariants: nothing replaces the old data file before the new one is
** complete, flushed and verified; an upgrade interrupted at any point can
** be run again; no other process may have the database open.
*/

#ifndef rg_upgrade_h
#define rg_upgrade_h

#include <stdint.h>

#include "base/support.h"

typedef struct rg_upgrade_opts {
  int drop_history;          /* leave the all-versions feed behind */
  int remove_old;            /* delete data.mdb.format1 once done */
} rg_upgrade_opts;

typedef struct rg_upgrade_info {
  int from, to;              /* formats; from == to: nothing was done */
  uint64_t containers, items, feed_records;
  uint64_t old_bytes, new_bytes;
  int kept_old;              /* data.mdb.format1 is there */
} rg_upgrade_info;

/* Upgrades the database in directory `path`: 0 (also when it is of this
** format already), 409 when another process has it open, 404 when there
** is none, 500 when the new database would not verify (the old one is
** left as it was), or a storage status. */
int rg_upgrade (const char *path, const rg_upgrade_opts *o,
                rg_upgrade_info *info, rg_err *e);

#endif
