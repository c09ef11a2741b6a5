/*
** search.h: the full-text policy of a container, and the statistics its
** queries score with.
**
** The policy (Cosmos DB's fullTextPolicy) gives a default language and,
** for each text path, its language; the full-text indexes (Cosmos's
** indexingPolicy.fullTextIndexes) name paths of the policy.  Both are
** parsed with the container's spec and are immutable with it.  Paths are
** plain ("/text", "/a/b"): no wildcard, no array position.
**
** The statistics of BM25 (documents with text at a path, their terms,
** each term's document frequency) are read, for each FullTextScore of a
** query, from the path's full-text index when it has one and the scope is
** the container's (and no item has expired unpurged), otherwise by one
** pass over the items of the container, or of the routed logical
** partition when the request asks for that scope.  On a remote database
** the index's statistics are its buckets' instances' summed.  Every item the
** pass reads is counted in the query's work (it is charged like the
** query's own reads, and `info` shows it), and the pass ends with the
** query's 408 when the query's CPU time limit passes during it.
*/

#ifndef rg_search_h
#define rg_search_h

#include "base/charge.h"
#include "base/deadline.h"
#include "sql/sql.h"
#include "store/container.h"
#include "store/kv.h"
#include "store/scope.h"

typedef struct rg_ftpath {
  char *path;                       /* "/text" */
  size_t n;
  int lang;                         /* text.h's RG_LANG_* */
  int indexed;                      /* a full-text index names it */
} rg_ftpath;

struct rg_ftpolicy {
  int lang;                         /* the default language */
  int n;
  rg_ftpath *p;
};

/* Reads the policy from a spec's JSON form: `full_text` {default_language,
** paths = [{path, language}]} or Cosmos's `fullTextPolicy` {defaultLanguage,
** fullTextPaths}, and the indexes from the `indexing` table's `full_text`
** (paths) or `fullTextIndexes` ([{path}]).  Sets s->ft (NULL when the spec
** has neither); 400 for what is invalid. */
int  rg_ftpolicy_build (rg_cspec *s, const cJSON *spec, const cJSON *ix,
                        rg_err *e);
void rg_ftpolicy_free (struct rg_ftpolicy *p);
/* The policy's entry of a path (NULL: none). */
const rg_ftpath *rg_ftpolicy_path (const rg_cspec *s, const char *path,
                                   size_t n);
/* The language of a path under the policy (NULL: its default); en-US
** without a policy.  (These four: ftpolicy.c.) */
int  rg_ftpolicy_lang (const rg_cspec *s, const char *path, size_t n);

/*
** The full-text indexes in the store (the `fulltext` table, ftindex.h's
** layout under the prefix cid | index id): one per path the indexes
** name, holding every item whose value at the path is a string (the
** documents a scan's statistics count), analyzed in the path's language.
** The id hashes the path and its language, so that a policy giving the
** path another language makes another index.  Invariant: an index holds
** exactly the texts of the container's stored items (rg_ftup keeps it in
** every write's scope, db:verify checks it).
*/

/* Upkeep: one batch of changes, each item's old and new version (either
** NULL), flushed at rg_ftup_end (which frees u, also after a failure).
** rg_ftup_begin first builds every instance of an index that lacks its
** build record (one per bucket on a remote database, each from its
** bucket's items and with its own record), so a build cut off between
** buckets is completed by the next write.  rg_ftindex_update is one
** change.  0, or a status (the scope failed). */
typedef struct rg_ftup rg_ftup;
int  rg_ftup_begin (rg_ftup **u, rg_scope *s, const rg_cspec *c, rg_err *e);
int  rg_ftup_item (rg_ftup *u, uint32_t seq, const cJSON *old,
                   const cJSON *neu, rg_err *e);
int  rg_ftup_end (rg_ftup *u, rg_err *e);
int  rg_ftindex_update (rg_scope *s, const rg_cspec *c, uint32_t seq,
                        const cJSON *old, const cJSON *neu, rg_err *e);
/* A container's replace (write.c's rebuild): the indexes of `from` that
** `to` lacks are removed at once, those `to` gains are built from the
** items. */
int  rg_ftindex_replace (rg_scope *s, const rg_cspec *from,
                         const rg_cspec *to, rg_err *e);
/* db:verify: each index's own invariants (rg_fti_verify), its documents
** against `docs[i]` (the items holding text at the i-th path of the
** policy, which verify counts with rg_ftindex_count), and no stray record
** of the container in the table.  Problems are appended to report and
** counted. */
int  rg_ftindex_count (const rg_cspec *s, const cJSON *doc, uint64_t *docs);
int  rg_ftindex_verify (rg_txn *txn, rg_env *env, const rg_cspec *s,
                        const uint64_t *docs, rg_buf *report);

/*
** Queries.  rg_ftindex_plan finds, among a WHERE's conjuncts, a full-text
** condition (FullTextContains, All, Any: rg_qfts_terms) on a path whose
** index is built (every instance's build record there; else the query
** scans): 1 and *out, or 0.  rg_ftindex_docs gives the seqs of
** the items that can pass it (ascending, malloc'd), counting the index
** records read in w->text_read.  0, or a status.  On a remote database
** the index is one instance per bucket (ftindex.h): the seqs are the
** union of the buckets', and *bk (malloc'd; NULL locally) gives each
** seq's bucket, which rg_ftindex_item needs to find its item there.
*/
typedef struct rg_ftplan {
  const rg_cspec *spec;
  const rg_ftpath *fp;
  rg_qftterms t;
  int remote, nb;                   /* a remote database's; instances */
} rg_ftplan;
int rg_ftindex_plan (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_query *q, const rg_qv *params,
                     const int32_t *conj, int nconj, rg_arena *mem,
                     rg_ftplan *out, rg_err *e);
int rg_ftindex_docs (rg_txn *txn, const rg_ftplan *p, uint32_t **seqs,
                     uint16_t **bk, size_t *n, rg_work *w, rg_err *e);
/* The item key of seq (rg_ref_item's answer), found in instance
** `bucket` (remote; locally any). */
int rg_ftindex_item (rg_txn *txn, rg_env *env, const rg_ftplan *p,
                     uint32_t seq, int bucket, rg_val *ikey);
/* How many items rg_ftindex_docs would give at most (the smallest
** document frequency of All's terms, the sum of Any's): 0, or a status. */
int rg_ftindex_estimate (rg_txn *txn, const rg_ftplan *p, uint64_t *n,
                         rg_work *w, rg_err *e);
/* ORDER BY RANK FullTextScore(path, ...) over a path whose index is built,
** when the query's statistics are the index's (the container's scope, no
** item expired unpurged at `now`): 1 and *out, or 0.  rg_ftindex_topk
** gives the best k items by the score the query computes, best first
** (seqs and scores, malloc'd; fewer than k: every item with a score above
** 0), among those holding all the terms when p->t.all is set (the
** planner sets it when the WHERE requires them all).  0, or a status.
** On a remote database each bucket's instance gives its best k scored
** with the container's statistics (the buckets' summed), merged: the
** same items and scores as one index; *bk as rg_ftindex_docs's. */
int rg_ftindex_rank_plan (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                          const rg_query *q, const rg_qv *params,
                          int32_t call, int64_t now, rg_arena *mem,
                          rg_ftplan *out, rg_err *e);
int rg_ftindex_topk (rg_txn *txn, const rg_ftplan *p, size_t k,
                     uint32_t **seqs, double **scores, uint16_t **bk,
                     size_t *n, rg_work *w, rg_err *e);

/* A query's source of full-text statistics: items under `prefix` (the
** container's or the route's), read in `txn`, counted in `w`. */
typedef struct rg_ftsrc {
  rg_qtext iface;
  rg_txn *txn;
  const rg_cont *c;
  uint8_t prefix[RG_MAX_KEY];
  size_t plen;
  int64_t now;
  rg_work *w;
  rg_deadline *deadline;            /* the query's, or NULL */
} rg_ftsrc;

void rg_ftsrc_init (rg_ftsrc *f, rg_txn *txn, const rg_cont *c,
                    const uint8_t *prefix, size_t plen, int64_t now,
                    rg_work *w);

#endif
