/*
** vgraph.h: the diskANN graph (Vamana), over any storage.
**
** Nodes are vector slots (`vid`, 32-bit).  Each has at most `degree`
** out-neighbours and an SQ8 code (base/vec.h); the graph reaches both,
** and writes neighbour lists, only through the calls of rg_vgio, which
** the store backs with its tables (and a test or a benchmark with
** arrays): nothing here keeps the graph in memory, and every change is
** made by put_adj inside the caller's transaction.
**
** Distances while building and navigating are computed on codes:
** between a query and a code asymmetrically (rg_sq8_approx), between two
** codes as the squared difference of their bytes (for cosine the codes
** are of unit vectors, so this orders by angle; a dot-product index is
** navigated the same way).  The caller ranks the candidates a search
** returns on the exact vectors.
**
**   insert   a greedy search from the entry point for the new node's
**            code (list size `build_list`), a robust prune (alpha) of
**            the nodes it expanded into the node's neighbours, and the
**            reverse edges, each list that grows past `degree` pruned
**            again (FreshDiskANN's insert);
**   delete   in place: a greedy search for the node's code finds the
**            nodes around it; each of those pointing to it gets its other
**            neighbours and the node's own, pruned; then the node goes.
**            An edge that a search missed still points to the freed
**            slot, and is skipped (or, once the slot is reused, is one
**            more long edge): a search never depends on an edge;
**   search   a greedy (beam) search with a list of `list` candidates,
**            nearest first.  With a filter (`accept`), every node measured
**            still guides but only the accepted are results, and the
**            search goes on past its list while a node lies closer than
**            the k-th accepted found (or fewer than k are found): it reads
**            about k / (the fraction accepted) nodes, all of the graph
**            for a filter that accepts none.  It keeps every node it
**            measured, so that it can go on with a larger list and k
**            (rg_vgraph_search_more) rather than start again.
**
** Invariants: a node's list never names itself, never holds an id twice,
** and holds at most `max_degree` ids; every operation is deterministic (ties
** by the lower id), so the same writes build the same graph everywhere.
*/

#ifndef rg_vgraph_h
#define rg_vgraph_h

#include <stddef.h>
#include <stdint.h>

#include "base/vec.h"

#define RG_VG_MAX_DEGREE 64
#define RG_VG_NONE UINT32_MAX

/* The storage of one graph.  Each call returns 0 or a status (and the
** operation stops with it). */
typedef struct rg_vgio {
  void *ud;
  /* the out-neighbours of v into out (room for RG_VG_MAX_DEGREE): *n of
  ** them (0 for a node with none or a free slot) */
  int (*get_adj) (void *ud, uint32_t v, uint32_t *out, int *n);
  int (*put_adj) (void *ud, uint32_t v, const uint32_t *adj, int n);
  /* the code of v; *code NULL when the slot is free */
  int (*get_code) (void *ud, uint32_t v, const uint8_t **code);
  /* some node of the graph other than v, into *out (RG_VG_NONE: none):
  ** the entry point's successor when it goes and left no neighbour */
  int (*any) (void *ud, uint32_t v, uint32_t *out);
} rg_vgio;

typedef struct rg_vgraph {
  rg_vgio io;
  const rg_sq8 *sq;          /* the codes' quantizer */
  int degree;                /* R: what a prune keeps at most */
  int max_degree;            /* a list grows to this before it is pruned
                                (R + R/4: fewer prunes, DiskANN's slack) */
  int build_list;            /* L while inserting */
  float alpha;               /* the prune's alpha, 1.2 */
  uint32_t entry;            /* RG_VG_NONE: empty */
  /* work counters (charges, info) */
  uint64_t adj_reads, adj_writes, codes_read;
} rg_vgraph;

void rg_vgraph_init (rg_vgraph *g, const rg_vgio *io, const rg_sq8 *sq,
                     int degree, int build_list);

/* A candidate list: the best `cap` (key, id) seen, nearest first. */
typedef struct rg_vglist {
  rg_vcand *c;
  uint8_t *done;             /* expanded */
  size_t n, cap;
} rg_vglist;

/* Adds node v (its code stored already): 0 or a status.  With the graph
** empty, v becomes the entry point. */
int rg_vgraph_insert (rg_vgraph *g, uint32_t v);
/* Removes node v (its code still readable; the caller frees the slot
** after): 0 or a status.  When v was the entry point, g->entry becomes
** one of its neighbours, or any other node (RG_VG_NONE: the graph is now
** empty); the caller stores it. */
int rg_vgraph_delete (rg_vgraph *g, uint32_t v);

/* Searches for the query (rg_sq8_query made from it): the best `k` nodes
** that `accept` accepts (NULL: all), by approximate key, nearest first,
** into out (room for k): *n of them.  `list` >= k is the beam; with a
** filter, the search widens past it until the k accepted are settled. */
int rg_vgraph_search (rg_vgraph *g, const rg_sq8q *q, size_t list, size_t k,
                      int (*accept) (void *ud, uint32_t v), void *aud,
                      rg_vcand *out, size_t *n);

/* What a search has read, kept so that it can go on: the nodes met, those
** measured and not expanded (nearest first), those expanded.  Zeroed
** before the first call of rg_vgraph_search_more; rg_vgsearch_free after
** the last. */
typedef struct rg_vgset { uint32_t *slot; size_t cap, n; } rg_vgset;
typedef struct rg_vgheap { rg_vcand *c; size_t n, cap; } rg_vgheap;
typedef struct rg_vgsearch {
  rg_vgset seen;
  rg_vgheap front;           /* measured, not expanded: a min-heap */
  rg_vgheap done;            /* expanded */
  int started;
} rg_vgsearch;

/* rg_vgraph_search that goes on from where the last call with `s` stopped
** (the same query, graph and filter; `list` and `k` no smaller): every
** node measured before is a candidate again, only what the larger list
** and k add is read, and the result is what one search with them from
** the start would give (or better: nothing expanded is forgotten).
** rg_vgraph_search with a filter is this, once. */
int rg_vgraph_search_more (rg_vgraph *g, rg_vgsearch *s, const rg_sq8q *q,
                           size_t list, size_t k,
                           int (*accept) (void *ud, uint32_t v), void *aud,
                           rg_vcand *out, size_t *n);
void rg_vgsearch_free (rg_vgsearch *s);

/* The squared byte distance of two codes of n bytes (exact). */
int32_t rg_sq8_code_l2 (const uint8_t *a, const uint8_t *b, size_t n);

#endif
