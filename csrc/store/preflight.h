/*
** preflight.h: what opening a database checks before LMDB maps its data
** file (store/preflight.c; docs/guarantees.md, A damaged file).
**
** LMDB 0.9 trusts its file: it maps data.mdb and reads the pages its
** newest meta page names.  A file shorter than that meta says is a SIGBUS
** at the first page past its end, which kills the host; a data file
** removed or emptied while the database's other files remain is taken for
** a new database, and every item is gone without a word.  Opening
** therefore checks, in two steps, and refuses with 500 and a message
** saying what is wrong (and what to do) instead:
**   - before the log is replayed (rg_preflight_log): the data file is
**     there, not empty, with meta pages that check out, and holds at least
**     the transaction of the log's last checkpoint (the data file was
**     flushed there: an older one is another file, put in its place).  A
**     replay over a file that is not the one its log describes would write
**     that file's pages over it.  A directory with neither a data file nor
**     a log is a new database;
**   - after it, before LMDB maps the file (rg_preflight_map): the newest
**     meta page's page size, last page and tree roots are possible, and the
**     file is as long as its last page says.
** Both only read; a read-only open is checked the same way.
**
** A directory remembers the database it holds: regolith.id (written when
** a read-write open finds it missing, made whole by a rename and flushed)
** holds a hash of the database's secret, the 16 random bytes made with it,
** and the transaction up to which every page in use carries its checksum
** (pagecheck.h).
** So a data file emptied or removed while regolith.id remains is refused
** even when the log is gone too, and once the secret is read
** (rg_preflight_identity) a data file of another database put in the
** place of this one is refused.  A damaged regolith.id is refused rather
** than taken for none.  To make a directory hold another database on
** purpose (a restored backup of another), remove regolith.id with the log.
*/

#ifndef rg_preflight_h
#define rg_preflight_h

#include "base/support.h"

int rg_preflight_log (const char *path, int readonly, rg_err *e);
int rg_preflight_map (const char *path, rg_err *e);
/* Before the secret is read: does regolith.id say that every page in use
** carries its checksum, for the transaction txnid the file holds?  (Which
** database the file is, rg_preflight_identity says once the secret is
** read.) */
int rg_preflight_summed (const char *path, uint64_t txnid);
/* Once the database's secret is read: regolith.id names this database, or
** is written (read-write) when missing.  *sums: every page in use carries
** its checksum (regolith.id says so for the transaction txnid the file
** holds); else the checksums are to be stamped again (rg_pages_stamp,
** read-write) or not checked (read-only). */
int rg_preflight_identity (const char *path, const uint8_t secret[16],
                           uint64_t txnid, int readonly, int *sums,
                           rg_err *e);
/* Records that every page in use carries its checksum at transaction
** txnid (written when the checksums were stamped, and by a process letting
** the database go: a crash or another program's writes leave regolith.id
** behind the file, and the next open stamps them again). */
int rg_preflight_stamped (const char *path, const uint8_t secret[16],
                          uint64_t txnid, rg_err *e);

/* What a meta page holds, and whether it checks out. */
typedef struct rg_meta {
  int ok;                      /* magic, version, page size possible */
  unsigned psize;
  uint64_t txnid, last_pg;
  uint64_t root[2];            /* FREE and MAIN trees (RG_PG_INVALID: empty) */
  unsigned depth[2];
  uint64_t entries[2];
} rg_meta;

/* Reads the two meta pages of the data file open at fd (size bytes): m[0],
** m[1]; returns the index of the one LMDB would use, or -1 when LMDB would
** refuse the file (either fails its checks, as LMDB needs both). */
int rg_meta_read (int fd, uint64_t size, rg_meta m[2]);

#endif
