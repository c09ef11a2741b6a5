/*
** index.h: index and unique-key maintenance, the path dictionary, and the
** index cursor the planner reads through.
**
** For every scalar the indexing policy covers, an item has one entry in
** the index table (under its path's id and the value's term, holding the
** item's reference); for every unique key of its container, one entry in
** the unique table.  Invariant: the entries of an item are exactly those
** its stored version needs; they change in the same scope as the item
** (rg_index_update), and a unique violation gives 409 before anything is
** written.  A path id, once given, never changes (so processes may cache
** it); ids are given in write scopes only.
*/

#ifndef rg_index_h
#define rg_index_h

#include "store/env.h"
#include "store/layout.h"

/* Brings the index and unique-key entries of one item (its seq `seq`)
** from what `old` needed to what `new` needs (either may be NULL). */
int rg_index_update (rg_scope *s, const rg_cspec *c, const rg_ikey *k,
                     uint32_t seq, const cJSON *old, const cJSON *neu,
                     rg_err *e);
/* Moves one item's index entries from the indexing policy of `from` to
** that of `to` (container replace; unique keys never change). */
int rg_index_reindex (rg_scope *s, const rg_cspec *from, const rg_cspec *to,
                      const rg_ikey *k, uint32_t seq, const cJSON *doc,
                      rg_err *e);
/* Checks the unique keys `new` would take (409), writing nothing. */
int rg_unique_check (rg_scope *s, const rg_cspec *c, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e);
/* The 409 of a document taking unique key `u` that another item holds. */
int rg_unique_fail (const rg_cspec *spec, int u, rg_err *e);
/* The unique-table key of unique key `u` for `doc` (RG_MAX_KEY bytes). */
size_t rg_unique_key (const rg_cspec *spec, int u, const rg_ikey *k,
                      const cJSON *doc, uint8_t *out);

/* The index keys (without the reference) a document needs, appended to
** `keys` as u16 length | key.  With `s` set, missing path ids are given
** (a write); without, paths that have none are left out.  0 or a status. */
int rg_index_keys (rg_txn *txn, rg_env *env, rg_scope *s,
                   const rg_cspec *spec, const cJSON *doc, rg_buf *keys,
                   size_t *count, rg_err *e);

/* db:verify: checks the index and unique entries an item needs (see
** verify.c); returns the number of problems appended to `report`. */
int rg_index_verify (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_ikey *k, uint32_t seq, const cJSON *doc,
                     uint64_t *nindex, uint64_t *nunique, rg_buf *report);
/* Counts the index entries of a container (every path id it has). */
int rg_index_count (rg_txn *txn, rg_env *env, uint32_t cid, uint64_t *n);
/* Removes up to `max` of a dropped container's index entries and path
** ids; *count says how many went. */
int rg_index_drop (rg_scope *s, uint32_t cid, uint64_t max, uint64_t *count,
                   rg_err *e);

/* A composite index's term: its columns' terms concatenated, the strings
** among them cut after RG_COMPOSITE_TERMS bytes divided among the columns. */
#define RG_COMPOSITE_TERMS 360
#define rg_composite_limit(ci) (RG_COMPOSITE_TERMS / (size_t)(ci)->n)

/* The hash of the shape a stored document has (what its shape entry
** holds: 0 for a wide one), as rg_index_update found it; the planner
** builds a small partition's entries in memory.  0 or a status. */
int rg_index_shape (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                    const cJSON *doc, uint64_t *h, rg_err *e);

/* Shapes (revision 2 containers, index.c): the dictionary text whose path
** id holds the shape entries, and the most paths a shape lists. */
#define RG_SHAPE_TEXT "shape"
#define RG_SHAPE_MAX  64
/* The dictionary text of a normalized path (segments, array positions
** "[]"), and of a composite index ("composite|/a|0|/b|1"). */
void rg_index_path_text (rg_buf *b, const char *const *seg, int n);
/* The path id of a dictionary text in container `cid`, as key bytes
** (RG_PATHID_MAX): 0, 404 when the path has none (nothing was ever
** indexed under it), or a status. */
int rg_pathid_find (rg_txn *txn, rg_env *env, uint32_t cid,
                    const char *text, size_t n, uint8_t *out, size_t *len,
                    rg_err *e);

/*
** The index as the planner reads it.  Each entry is presented as one
** flat key, `key | reference` (the reference is the last RG_REF_SIZE
** bytes), in the table's order: keys are prefix-free within a path id, so
** this order is the bytes' order.  A seek takes any bytes (a path id, a
** term, a term and part of a reference, a whole entry).  The item key of
** the entry under the cursor is resolved through the refs table.
*/
enum { RG_IX_SEEK = 1,       /* the first entry >= the key */
       RG_IX_NEXT, RG_IX_PREV,
       RG_IX_LAST };         /* the very last entry of the index */
typedef struct rg_ixcur {
  rg_txn *txn;
  rg_env *env;
  rg_cur *cur, *refs;
  uint8_t buf[RG_MAX_KEY + RG_REF_SIZE];
  size_t nbuf;                /* the entry last given (0: none) */
} rg_ixcur;
int  rg_ixcur_open (rg_ixcur *c, rg_txn *txn, rg_env *env);
void rg_ixcur_close (rg_ixcur *c);
/* The caller reads only the entries of items whose partition hash h has
** (h & mask) == (hash & mask) (rg_cur_route): others may still come. */
void rg_ixcur_route (rg_ixcur *c, uint64_t hash, uint64_t mask);
/* Moves (RG_IX_*; SEEK from the bytes in *k) and gives the entry in *k
** (valid until the next move): 0, RG_NOTFOUND, or a code of the seam.  An
** entry out of order (before the bytes sought, not after the entry last
** given by NEXT, not before it by PREV) is RG_CORRUPT: a damaged tree can
** give one, and a walk that trusted it could go round for ever. */
int  rg_ixcur_get (rg_ixcur *c, rg_val *k, int op);
/* The item key of the entry last given (*ikey, valid in the
** transaction): 0, RG_NOTFOUND (a dangling reference), or a code. */
int  rg_ixcur_item (rg_ixcur *c, const rg_val *entry, rg_val *ikey);
/* The item key of a reference's seq, through the refs table. */
int  rg_ref_item (rg_txn *txn, rg_env *env, uint32_t seq, rg_val *ikey);

#endif
