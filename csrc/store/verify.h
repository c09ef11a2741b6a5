/*
** verify.h: db:verify(), every storage invariant checked in one snapshot.
**
** In one read transaction: every item decodes and sits under its own key;
** its index, unique-key, TTL and latest entries exist, and no entry points
** at nothing; partition and container counters match; the feed holds the
** item's last write; leases decode and point inside the feed.
*/

#ifndef rg_verify_h
#define rg_verify_h

#include "store/env.h"

/* Returns the number of problems, each described in `report`. */
int rg_verify (rg_env *env, rg_buf *report);

#endif
