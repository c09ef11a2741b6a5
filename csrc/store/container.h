/*
** container.h: container specs, the indexing policy, and containers as the
** store's functions take them.
**
** A spec is built from its JSON form (the options of create_container, or
** the stored form) and validated whole: 400 for anything invalid.  Built
** specs are immutable; a container handle holds one until it closes.
*/

#ifndef rg_container_h
#define rg_container_h

#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/support.h"
#include "sql/sql.h"
#include "store/kv.h"

struct rg_env;
struct rg_ftpolicy;                 /* store/search.h */

enum { RG_PAT_SCALAR = 1, RG_PAT_ALL = 2 };   /* "/a/?" and "/a/\*" */

typedef struct rg_pattern {
  rg_path path;      /* segments without the final ? or * */
  int kind;
  int include;
} rg_pattern;

typedef struct rg_composite {
  int n;
  rg_path path[8];
  int desc[8];
  char *name;        /* its text in the path dictionary (index.c) */
} rg_composite;

typedef struct rg_uniq {
  int n;
  rg_path path[8];
} rg_uniq;

/* A provisioned-throughput setting (docs/throughput.md): none, a manual
** budget of `ru` request units per second, or autoscale up to `ru`; with
** `burst`, idle capacity accumulates (store/throughput.c). */
enum { RG_TP_NONE = 0, RG_TP_MANUAL, RG_TP_AUTOSCALE };
#define RG_TP_MAX_RU 1000000000.0

typedef struct rg_tpset {
  int mode;
  double ru;                        /* RU/s, or the autoscale maximum */
  int burst;
} rg_tpset;

/* Reads a setting from its JSON form: null (none), a number (manual
** RU/s) or an object {manual = n | autoscale_max = n, burst = bool}; 400
** for anything else.  `what` names it in messages. */
int rg_tpset_parse (const cJSON *v, rg_tpset *out, const char *what,
                    rg_err *e);

/*
** Vector search (store/vpolicy.c): a container's vector embeddings (path,
** element type, dimensions, similarity) and its vector indexes, at most
** one per embedding.
*/
enum { RG_VIX_FLAT, RG_VIX_QFLAT, RG_VIX_DISKANN };
#define RG_VIX_MAX_SHARD 3

typedef struct rg_vembed {
  rg_path path;
  char *text;                       /* the path as given */
  int dtype, dist, dims;            /* RG_VT_*, RG_VD_* (base/vec.h) */
  int index;                        /* its vector index, or -1 */
} rg_vembed;

typedef struct rg_vindex {
  int embed;                        /* its embedding */
  int kind;                         /* RG_VIX_* */
  int qbytes;                       /* quantization_byte_size; 0: chosen */
  int search_list;                  /* indexing_search_list_size */
  int nshard;
  rg_path shard[RG_VIX_MAX_SHARD];  /* vectorIndexShardKey */
} rg_vindex;

/* A container's parsed, validated spec.  Immutable once built. */
typedef struct rg_cspec rg_cspec;
struct rg_cspec {
  char *name;
  uint32_t cid;
  int npk;
  rg_path pk[RG_MAX_PK_PATHS];
  int nparts;                       /* physical partitions (hash ranges) */
  int automatic;
  int npat;
  rg_pattern *pat;                  /* included and excluded patterns */
  int ncomp;
  rg_composite *comp;
  int nuniq;
  rg_uniq *uniq;
  int ttl_on;                       /* default_ttl given */
  int64_t default_ttl;              /* -1: items expire only by their own */
  uint64_t max_partition_bytes;
  int all_versions;                 /* the all-versions feed is kept */
  int64_t retention;                /* all_versions retention; -1 forever */
  int ncp;                          /* computed properties, parsed */
  rg_qcomputed *cp;
  /* 2 for containers made since queries use shape entries and prefix
  ** hashing of hierarchical keys (index.c, layout.c); absent: 1 */
  int revision;
  struct rg_ftpolicy *ft;           /* full-text policy, or NULL */
  rg_tpset tp;                      /* as created (the live one may differ:
                                       store/throughput.h) */
  int nvemb;                        /* vector embeddings and indexes */
  rg_vembed *vemb;
  int nvix;
  rg_vindex *vix;
  char *json;                       /* the stored form (JSON text) */
  struct rg_cspec *older;           /* replaced contents (rg_cspec_adopt) */
};

/* The instances an index kept beside its items has (vindex.c, search.c):
** one per physical partition where partitions are kept apart (`remote`),
** else one. */
static inline int rg_cspec_buckets (const rg_cspec *c, int remote) {
  return remote && c->nparts > 1 ? c->nparts : 1;
}

#define RG_MAX_COMPUTED 20
#define RG_SPEC_REVISION 2

/* Builds a spec from its JSON form (a stored spec, or one made from the
** options of create_container); 400 for what is invalid. */
int  rg_cspec_build (const cJSON *j, uint32_t cid, rg_cspec **out, rg_err *e);
void rg_cspec_free (rg_cspec *s);
/* What a replace cannot change: the partition key, the physical partitions,
** the unique keys (they decide where items and entries are): 0 or 400. */
int  rg_cspec_same_layout (const rg_cspec *a, const rg_cspec *b, rg_err *e);
/* Do two specs have the same indexing policy (as given)? */
int  rg_cspec_same_indexing (const rg_cspec *a, const rg_cspec *b);
/* Does the indexing policy index a scalar at this (normalized) path? */
int  rg_cspec_indexed (const rg_cspec *s, const char *const *seg, int n);

/* Vector policy (vpolicy.c).  Rewrites Cosmos DB's spelling of it
** (vectorEmbeddingPolicy, indexing.vectorIndexes and their members) into
** the stored one, in place, before a spec is built from options: 0 or
** 400.  Builds, frees (rg_cspec_build and rg_cspec_free call these), and
** checks that a replace adds or removes embeddings and indexes and changes
** none (0 or 400).  The embedding of a normalized path, or NULL; the name
** of an index kind. */
int  rg_vpolicy_normalize (cJSON *j, rg_err *e);
int  rg_vpolicy_build (rg_cspec *s, const cJSON *j, rg_err *e);
void rg_vpolicy_free (rg_cspec *s);
int  rg_vpolicy_replace_ok (const rg_cspec *a, const rg_cspec *b, rg_err *e);
const rg_vembed *rg_vpolicy_find (const rg_cspec *s, const char *const *seg,
                                  int n);
/* Gives each VectorDistance call of a query whose options do not name its
** similarity or type those of the embedding at its first argument's path
** (a path of the item), then binds the calls' parameters
** (rg_query_vectors): 0 or 400. */
int  rg_query_vpolicy (rg_query *q, const rg_qv *params, const rg_cspec *spec,
                       rg_err *e);

/* A container as the write path, queries and the feed see it. */
typedef struct rg_cont {
  struct rg_env *env;
  rg_cspec *spec;
} rg_cont;

/* Does the container still exist in this transaction? (404 if not)  When
** its spec was replaced (rg_catalog_replace), the handle's spec adopts the
** stored one first, so every call works with the spec of its transaction. */
int rg_cont_alive (rg_txn *txn, const rg_cont *c, rg_err *e);

/* Walks the container specs of the catalog in table `tb` (RG_DB_META, or
** the old catalog an upgrade reads), in cid order: fn(ud, cid, spec) for
** each, until fn returns nonzero.  The spec's text is valid only until
** fn returns (kv.h).  Returns 0 (every spec seen, or fn stopped the walk)
** or the seam's code of the read that failed; fn keeps its own error in
** ud.  The one walk of the catalog: the TTL purge, verify, the upgrade
** and the throughput settings all use it. */
typedef int (*rg_spec_fn) (void *ud, uint32_t cid, const rg_val *spec);
int rg_cont_each_spec (rg_txn *txn, int tb, rg_spec_fn fn, void *ud);

/* The time to live of a document: its `ttl` field, else the container's
** default_ttl (0 when the container has none: never expires; -1: never);
** 400 for a bad ttl field.  The item expires `ttl` seconds after its
** write when ttl > 0. */
int  rg_doc_ttl (const rg_cspec *c, const cJSON *doc, int64_t *ttl,
                 rg_err *e);

/* Partition-key values of a document (NULL entries are undefined). */
void rg_doc_pk (const rg_cspec *c, const cJSON *doc,
                const cJSON *pkv[RG_MAX_PK_PATHS]);

#endif
