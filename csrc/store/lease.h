/*
** lease.h: what processors keep in the database, record by record.
**
** A processor's state lives in the meta table (lease.c writes the key
** and record formats down), so that every process running the same
** processor name on the same container shares it: one lease record per
** feed range (owner, expiry, checkpoint, counters), one heartbeat key per
** live instance, and the dead letters.  This file knows the records; the
** operations on them (taking, renewing, checkpointing) are procs.h's.
** Invariant: every change of a lease record happens in a write scope that
** read it first, so each operation on a lease is atomic across processes.
*/

#ifndef rg_lease_h
#define rg_lease_h

#include "store/container.h"
#include "store/env.h"
#include "store/layout.h"

/* A processor's identity: its container, name and instance. */
typedef struct rg_pname {
  const rg_cont *c;
  const char *name;
  size_t namelen;
  const char *inst;
  size_t instlen;
} rg_pname;

typedef struct rg_lease {
  int mode;                    /* RG_FEED_LATEST or RG_FEED_ALL */
  uint64_t expiry;             /* ms since the epoch; 0: free */
  rg_fpos pos;                 /* the checkpoint */
  uint32_t attempts, failures;
  uint64_t delivered;
  size_t ownerlen;
  char owner[RG_MAX_INSTANCE];
} rg_lease;

/* The longest meta key of a processor. */
#define RG_LEASE_KEY_MAX (5 + RG_MAX_NAME + 3 + RG_MAX_INSTANCE)

/* 'l' or 'd' (RG_MK_LEASE, RG_MK_DEAD), cid, name, 0x00: the prefix of a
** processor's keys; the key of a range's lease; of the instance's
** heartbeat. */
size_t rg_lease_prefix (uint8_t *out, int tag, const rg_pname *p);
size_t rg_lease_inst_key (uint8_t *out, const rg_pname *p);

/* Reads a range's lease (404 when the processor has none); writes one. */
int rg_lease_get (rg_txn *txn, const rg_pname *p, int range, rg_lease *l,
                  rg_err *e);
int rg_lease_put (rg_scope *s, const rg_pname *p, int range,
                  const rg_lease *l, rg_err *e);
/* Is the lease held by this instance? */
int rg_lease_mine (const rg_pname *p, const rg_lease *l);

/* The processors of a container (sorted by name), appended to `out` as
** (u8 mode, u32 length, name) records; *count says how many. */
int rg_lease_list (const rg_cont *c, rg_buf *out, int *count, rg_err *e);

/* The lowest position every all_versions processor of the container
** still needs, per range ({UINT64_MAX, UINT64_MAX} when none does): what
** retention may not trim. */
int rg_lease_floors (rg_txn *txn, rg_env *env, uint32_t cid, int nparts,
                     rg_fpos *floor, rg_err *e);
/* db:verify(): every lease record of the container decodes, names a feed
** range the container has, and points inside the feed (at most one past
** the last lsn).  Returns the number of problems appended to `report`. */
int rg_lease_verify (rg_txn *txn, rg_env *env, const rg_cspec *s,
                     rg_buf *report);

#endif
