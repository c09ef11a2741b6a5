/*
** index.h: index and unique-key maintenance.
**
** For every scalar the indexing policy covers, an item has one entry in
** the index table (under its path's id and the value's term); for every
** unique key of its container, one entry in the unique table.  Invariant:
** the entries of an item are exactly those its stored version needs; they
** change in the same scope as the item (rg_index_update), and a unique
** violation gives 409 before anything is written.
*/

#ifndef rg_index_h
#define rg_index_h

#include "store/env.h"
#include "store/layout.h"

/* Brings the index and unique-key entries of one item from what `old`
** needed to what `new` needs (either may be NULL).  Unique violations
** give 409 before anything is written. */
int rg_index_update (rg_scope *s, const rg_cspec *c, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e);
/* Moves one item's index entries from the indexing policy of `from` to
** that of `to` (container replace; unique keys never change). */
int rg_index_reindex (rg_scope *s, const rg_cspec *from, const rg_cspec *to,
                      const rg_ikey *k, const cJSON *doc, rg_err *e);
/* Checks the unique keys `new` would take (409), writing nothing. */
int rg_unique_check (rg_scope *s, const rg_cspec *c, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e);
/* The index entries a document needs, without storage (cluster mode):
** for each distinct one, in key order, calls f with the index's id (a
** path's, rg_index_path_id, or a composite index's) and the term bytes;
** -1 when out of memory. */
int rg_index_terms (const rg_cspec *c, const cJSON *doc,
                    void (*f) (void *ud, uint64_t id, const uint8_t *term,
                               size_t n),
                    void *ud);
/* The 16-byte digest of the values of unique key `u` in `doc` (an
** undefined value counts as null): what the unique table keys on. */
void rg_unique_digest (const rg_cspec *c, int u, const cJSON *doc,
                       uint8_t out[16]);
/* db:verify: checks the index and unique entries an item needs (see
** verify.c); returns the number of problems appended to `report`. */
int rg_index_verify (MDB_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_ikey *k, const cJSON *doc, uint64_t *nindex,
                     uint64_t *nunique, rg_buf *report);
/* The id of a normalized path (segments, array positions "[]") in index
** keys, and the key prefix of that path's entries: cid | path-id. */
uint64_t rg_index_path_id (const char *const *seg, int n);
/* The path id of shape entries, and the most paths a shape lists. */
#define RG_SHAPE_PATH 1ull
#define RG_SHAPE_MAX  64
void rg_index_prefix (rg_buf *b, uint32_t cid, uint64_t path_id);

#endif
