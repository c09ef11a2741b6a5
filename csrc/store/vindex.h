/*
** vindex.h: the vector indexes of a container, kept in the store (the
** `vector` table): flat, quantizedFlat and diskANN (container.h's
** rg_vindex), maintained in the write transaction and searched by the
** planner.
**
** What an index holds, per (container, embedding path, shard): every item
** whose value at the path is a vector of the embedding's type and
** dimensions, in a slot (`vid`); its exact vector and squared norm; once
** the index has seen RG_VX_TRAIN vectors (quantizedFlat, diskANN), its
** SQ8 code; and (diskANN) its graph neighbours.  Before that many, a
** search reads the exact vectors, as Cosmos DB scans below 1,000.
**
** Invariants: an item has a slot in an index exactly when its stored
** version holds a vector for it (rg_vindex_update keeps this in the
** write's scope, as rg_index_update keeps the range index); a slot's
** vector, code, seq and neighbour list change together; the header's
** `gen` is the lsn of the last transaction that changed the index, so a
** process may cache what it read at one gen (codes) for as long as the
** stored gen is the same.  db:verify() checks all of it
** (rg_vindex_verify).  The storage format is written down in vindex.c.
*/

#ifndef rg_vindex_h
#define rg_vindex_h

#include "base/vec.h"
#include "store/container.h"
#include "store/env.h"

#define RG_VX_TRAIN 1000           /* vectors before codes are made */

/* Brings the vector index slots of one item (seq) from what `old` needed
** to what `neu` needs (either NULL), for every vector index of the
** container: 0 or a status. */
int rg_vindex_update (rg_scope *s, const rg_cspec *c, uint32_t seq,
                      const cJSON *old, const cJSON *neu, rg_err *e);
/* Moves one item from the vector indexes of `from` to those of `to`
** (container replace: an index added is filled, one removed emptied). */
int rg_vindex_reindex (rg_scope *s, const rg_cspec *from, const rg_cspec *to,
                       uint32_t seq, const cJSON *doc, rg_err *e);

/*
** A search: the best `k` items of one index by the exact score of the
** query vector (its elements converted to the embedding's type: float32
** for both float types), best first.  `accept` (NULL: all) filters items
** by seq as the search goes (diskANN: every visited item still guides, and
** the search widens past its list until the best 2k accepted are settled);
** `more` is set when the index may hold further accepted items past the
** k given (the planner then asks again with a larger k).  With `widen`,
** the search keeps what it read (a diskANN graph search's state, the
** candidates ranked on their exact vectors) until rg_vsearch_end, and a
** search asked again (same query, filter and transaction, a larger k)
** goes on from where it stopped instead of starting again.
*/
typedef struct rg_vhit {
  uint32_t seq;
  double score;              /* the similarity, as VectorDistance gives */
  uint64_t shard;            /* the instance that holds it */
} rg_vhit;

typedef struct rg_vsearch {
  const rg_cspec *spec;
  int embed;                 /* the embedding (spec->vemb) */
  const void *query;         /* dims elements */
  size_t k;
  int brute;                 /* read every exact vector */
  int quant_mult;            /* quantizedVectorListMultiplier (0: 5) */
  int search_mult;           /* searchListSizeMultiplier (0: 10) */
  int (*accept) (void *ud, uint32_t seq);
  void *aud;
  int in_scope;              /* the transaction is a write scope's (it
                                reads no cache) */
  int one_shard;             /* search that shard alone (the WHERE fixes
                                the shard key's values) */
  uint64_t shard;
  int widen;
  struct vwiden *kept;       /* what a widening search keeps, by shard */
  size_t nkept;
  /* out */
  rg_vhit *hit;              /* malloc'd, k of them at most */
  size_t nhit;
  int more;
  uint64_t vectors_read, codes_read, nodes_read;
} rg_vsearch;

int  rg_vindex_search (rg_txn *txn, rg_env *env, rg_vsearch *q, rg_err *e);
/* The item key of hit h of search q (rg_ref_item's answer): on a remote
** database, read in the place of the instance that holds it, which is the
** item's (vindex.c: one instance per physical partition). */
int  rg_vindex_item (rg_txn *txn, rg_env *env, const rg_vsearch *q,
                     const rg_vhit *h, rg_val *ikey);
/* The shard of the terms (layout.c's encoding, concatenated; 0x01 for
** a value that is no scalar) of the shard key's values. */
uint64_t rg_vindex_shard_hash (const void *terms, size_t n);
/* Frees the hits (a widening search keeps the rest); rg_vsearch_end frees
** all of it. */
void rg_vsearch_free (rg_vsearch *q);
void rg_vsearch_end (rg_vsearch *q);

/* db:verify: checks every vector index of a container against its items
** (each item with a vector has exactly one slot, holding its vector, the
** right code and seq; every list is well formed); problems are appended
** to `report`, and counted. */
int rg_vindex_verify (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                      rg_buf *report);
/* The same for one item: it has a slot, holding its vector, exactly when
** its document holds a vector for the index. */
int rg_vindex_verify_item (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                           uint32_t seq, const cJSON *doc, rg_buf *report);

#endif
