/*
** ftindex.h: the full-text index: posting lists in blocks, document
** lengths, term and path statistics, kept in an ordered key-value table,
** and the searches over them (block-max WAND for the top k by BM25,
** intersections for FullTextContainsAll).
**
** The index reaches its table only through rg_ftkv (get, put, delete and an
** ordered cursor), so that any storage with those operations inside a
** transaction can hold it.  Values returned by get and the cursor are
** valid until the next operation on that table or cursor (LMDB's rule):
** the index copies what it keeps.
**
** Layout, one table (the store's `fulltext` table, layout.c, whose key
** builder rg_key_ftext writes each key's head), keys big-endian; fid is
** the id of one indexed (container, path): the container's id in its high
** 32 bits, the index's id in the low ones, the head cid | index id | kind:
**
**   head 'P' | term | 00 | first doc u32   a block of postings (the last
**                                          holds the term's header: df,
**                                          its competitive (tf, dl) pairs)
**   head 'N' | doc >> 7 u32                128 x u32 length + 1 (0: none)
**   head 'S'                               u64 docs | u64 terms
**
** A posting is (doc, tf): `doc` the document's number (the item's seq,
** given at creation and kept until deletion), `tf` how often the term
** occurs in the document's text at the path.  A block holds 1 to
** RG_FTI_BLOCK postings in ascending doc order:
**
**   varint n | varint max tf | varint min dl | (n - 1) varint doc deltas
**   (from the key's first doc) | n varint tfs
**
** A block's (max tf, min dl), and a term's, bound BM25's term factor from
** above for every posting in it (the factor grows with tf and falls with
** dl), so a search may skip a block whose bound cannot reach the k-th
** best score.  Removals leave the bounds as they are: still bounds.  A
** document's length is its number of terms (stopwords left out), capped at
** 65535 in the lengths table, which is what BM25 reads; 'S' holds the
** number of documents with text at the path and the sum of their lengths,
** 'T' each term's document frequency.  Documents whose text yields no
** term count in 'S' (they hold text) and have length 0.
**
** Invariants (rg_fti_verify checks them): blocks of one term are disjoint
** and ascending; every block's first doc is its key's; each term's df is
** the number of its postings; 'S' docs and terms agree with the lengths
** table; every posting's doc has a length at least its tf.
*/

#ifndef rg_ftindex_h
#define rg_ftindex_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"
#include "sql/text.h"

#define RG_FTI_BLOCK 128             /* postings in a block at most */

/* A byte string borrowed from the table. */
typedef struct rg_slice {
  const uint8_t *p;
  size_t n;
} rg_slice;

/*
** The table: get (0 found, 1 not found), put, del (0, 1 not found), and
** cursors: seek to the first key >= k (0, or 1 when none), next and prev
** (0, or 1 past the end).  Any other return is a failure status (500 with
** e filled by the table).
*/
typedef struct rg_ftkv {
  void *ud;
  int  (*get) (void *ud, const uint8_t *k, size_t kn, rg_slice *v);
  int  (*put) (void *ud, const uint8_t *k, size_t kn, const uint8_t *v,
               size_t vn);
  int  (*del) (void *ud, const uint8_t *k, size_t kn);
  void *(*open) (void *ud);
  int  (*seek) (void *cur, const uint8_t *k, size_t kn, rg_slice *ko,
                rg_slice *vo);
  int  (*next) (void *cur, rg_slice *ko, rg_slice *vo);
  int  (*prev) (void *cur, rg_slice *ko, rg_slice *vo);
  void (*close) (void *cur);
} rg_ftkv;

/* The table over the store's seam (kv.h): the `fulltext` table of the
** transaction txn; rg_fti_seam fills kv from st, which must live as long
** as kv is used.  A storage failure is returned as 500, its code kept in
** st->rc.  Where partitions are kept apart (a remote database, remote.h)
** an index has one instance per physical partition, beside its items: a
** seam given st->bucket >= 0 reads and writes that bucket's instance, its
** keys carrying the bucket (u16) after the index's prefix (layout.h). */
struct rg_txn;
typedef struct rg_fti_seam {
  struct rg_txn *txn;
  int rc;
  int bucket;                 /* -1 (rg_fti_seam_init), or the bucket whose
                                 records the seam reads and writes */
} rg_fti_seam;
void rg_fti_seam_init (rg_ftkv *kv, rg_fti_seam *st, struct rg_txn *txn);

/* The work an index operation did, for charges and `info`. */
typedef struct rg_fti_work {
  uint64_t blocks_read, blocks_written, postings_read, docs_scored;
  uint64_t bytes_written;
} rg_fti_work;

/*
** Writing.  A writer gathers the postings of the documents added or
** removed in one transaction and writes them, term by term in key order,
** at rg_fti_flush (each block read and rewritten once per flush, however
** many documents touched it).  rg_fti_add takes a document's text,
** rg_fti_remove the text it was indexed with.  0, or a status.
*/
typedef struct rg_fti_writer rg_fti_writer;
int  rg_fti_writer_new (rg_fti_writer **out, const rg_ftkv *kv, uint64_t fid,
                        int lang);
int  rg_fti_add (rg_fti_writer *w, uint32_t doc, const char *text, size_t n);
int  rg_fti_remove (rg_fti_writer *w, uint32_t doc, const char *text,
                    size_t n);
int  rg_fti_flush (rg_fti_writer *w, rg_fti_work *work, rg_err *e);
void rg_fti_writer_free (rg_fti_writer *w);

/* The statistics of BM25 for analyzed terms: documents, their terms, each
** term's df.  0, or a status. */
int  rg_fti_stats (const rg_ftkv *kv, uint64_t fid, const char *const *terms,
                   const size_t *lens, int nterms, uint64_t *docs,
                   uint64_t *tokens, uint64_t *df, rg_err *e);

/*
** The top k documents by BM25 over analyzed, distinct terms (at most 64):
** all of them (`all` 1, FullTextContainsAll's documents) or any (0).  A
** document with a score is offered to `accept` (NULL: all accepted),
** which may load it and test the rest of a query; only accepted ones
** count.  Results best first, ties by ascending doc; *nout of them.
** 0, or a status (the callback's too).
*/
typedef struct rg_fti_hit {
  uint32_t doc;
  double score;
} rg_fti_hit;

int  rg_fti_topk (const rg_ftkv *kv, uint64_t fid, const char *const *terms,
                  const size_t *lens, int nterms, int all, size_t k,
                  int (*accept) (void *ud, uint32_t doc, rg_err *e),
                  void *ud, rg_fti_hit *out, size_t *nout,
                  rg_fti_work *work, rg_err *e);

/* rg_fti_topk scoring with the statistics given (`tot`: documents, their
** terms and each term's df, in query order) instead of the index's own:
** a container's instances searched one by one score as one index would.
** NULL: the index's. */
typedef struct rg_fti_totals {
  uint64_t docs, tokens;
  const uint64_t *df;
} rg_fti_totals;
int  rg_fti_topk_with (const rg_ftkv *kv, uint64_t fid,
                       const char *const *terms, const size_t *lens,
                       int nterms, int all, size_t k,
                       const rg_fti_totals *tot,
                       int (*accept) (void *ud, uint32_t doc, rg_err *e),
                       void *ud, rg_fti_hit *out, size_t *nout,
                       rg_fti_work *work, rg_err *e);

/* Every document holding all (or any) of the terms, ascending, into a
** malloc'd array (*docs, *n).  0, or a status. */
int  rg_fti_docs (const rg_ftkv *kv, uint64_t fid, const char *const *terms,
                  const size_t *lens, int nterms, int all, uint32_t **docs,
                  size_t *n, rg_fti_work *work, rg_err *e);

/* Checks the invariants of one fid's entries: 0, or 500 naming the first
** broken one. */
int  rg_fti_verify (const rg_ftkv *kv, uint64_t fid, rg_err *e);

#endif
