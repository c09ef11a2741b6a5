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
** query, by one pass over the items of the container, or of the routed
** logical partition when the request asks for that scope.  Every item the
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
/* The language of a path under the policy (NULL: its default); en-US
** without a policy. */
int  rg_ftpolicy_lang (const rg_cspec *s, const char *path, size_t n);

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
