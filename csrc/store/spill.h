/*
** spill.h: sorted runs of table entries kept in a temporary file.
**
** A bulk load in one transaction (write.c) holds its entries in memory up
** to a bound; past it, it writes them here, each table's entries sorted, and
** merges every run into the tables once, at the end.  The file:
**
**   - is made in the database's directory with no name (O_TMPFILE; where
**     the file system has none, a name unlinked at once), so nothing is
**     left behind whatever ends the process: success, failure, a crash;
**   - holds records one after the other, each a key's and a value's
**     lengths (4 bytes each, native order: the file never outlives the
**     process) then the key and the value;
**   - is written only at its end (rg_spill_put, buffered) and read by
**     ranges of offsets (rg_sread), any number at a time.
**
** Every failure is a status in rg_err: 507 when the disk is full, 500
** otherwise.
*/
#ifndef RG_STORE_SPILL_H
#define RG_STORE_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"

typedef struct rg_spill rg_spill;

int  rg_spill_open (rg_spill **out, const char *dir, rg_err *e);
void rg_spill_close (rg_spill *sp);            /* NULL is fine */
/* Where the next record goes: the bytes written so far. */
uint64_t rg_spill_at (const rg_spill *sp);
int  rg_spill_put (rg_spill *sp, const void *k, uint32_t kn, const void *v,
                   uint32_t vn, rg_err *e);
/* Writes out what rg_spill_put buffered (before the records are read). */
int  rg_spill_flush (rg_spill *sp, rg_err *e);

/* Reads the records of [from, to) in order: rg_sread_next gives 1 and the
** record in k/kn, v/vn (valid until the next call), 0 at the end, or a
** status. */
typedef struct rg_sread {
  const rg_spill *sp;
  uint64_t at, end;              /* of the file, not yet in buf */
  uint8_t *buf;
  size_t bi, bn, cap;            /* buf[bi..bn): read, not yet given */
  size_t size;                   /* read this much at a time */
  const uint8_t *k, *v;
  uint32_t kn, vn;
} rg_sread;
/* `buf`: the bytes read at a time (the buffer grows only for a longer
** record); rg_sread_buf gives it for `runs` readers of a load held to
** `bound` bytes: their buffers together stay within the bound but for a
** floor of 64 KiB each, a MiB each at most. */
void rg_sread_init (rg_sread *r, const rg_spill *sp, uint64_t from,
                    uint64_t to, size_t buf);
size_t rg_sread_buf (size_t bound, size_t runs);
int  rg_sread_next (rg_sread *r, rg_err *e);
void rg_sread_free (rg_sread *r);

#endif
