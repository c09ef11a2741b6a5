/*
** write.h: the one write path, and reading items by key.
**
** Every mutation, whether it comes from a container method, a patch, a
** batch, a procedure's ctx, a trigger, a processor's handler or a TTL
** purge, goes through rg_write, which validates, runs the pre-triggers
** (hooks.h), writes the item, maintains indexes and unique keys, appends
** to the change feed, runs the post-triggers and counts the work.  So no
** feature can forget the feed or an index.
**
** Invariants: every check comes before the first write, so a failing
** operation leaves the scope as it was (a trigger's failure is rolled back
** by the savepoint its caller runs it in); system properties (_etag, _ts,
** _lsn) are set here and nowhere else.
*/

#ifndef rg_write_h
#define rg_write_h

#include <cjson/cJSON.h>

#include "base/patch.h"
#include "store/container.h"
#include "store/env.h"
#include "store/layout.h"

typedef struct rg_wreq {
  int op;
  const cJSON *doc;          /* create/replace/upsert: borrowed */
  const char *id;            /* delete/patch */
  size_t idlen;
  const cJSON *pkv[RG_MAX_PK_PATHS];   /* delete/patch: borrowed */
  const rg_patch_op *ops;    /* patch */
  int nops;
  const char *filter;        /* patch: a condition in the query dialect */
  const char *if_match;
  const char *pre_trigger, *post_trigger;
  int ttl_expired;           /* a TTL purge (internal) */
  int no_triggers;           /* a bulk load: not even automatic triggers */
} rg_wreq;

typedef struct rg_wres {
  int status;                /* 200, 201, 204 */
  cJSON *doc;                /* what the caller receives (owned) */
  char etag[40];
} rg_wres;

int  rg_write (rg_scope *s, const rg_cont *c, const rg_wreq *w, rg_wres *r,
               rg_err *e);
void rg_wres_free (rg_wres *r);
/* Removes every expired item of the container (once per scope). */
int  rg_purge_expired (rg_scope *s, const rg_cont *c, int *count, rg_err *e);
/*
** Bulk load: up to a batch of new documents written in the scope at once,
** with everything an ordinary create writes (index and unique entries,
** TTL, latest-version and all-versions entries, statistics) but no
** trigger.  Each document is checked first as a create is (400, 403, 409,
** 413); one that fails gets its status and message and leaves nothing
** behind, the others are written.  RG_BULK_UPSERT replaces the documents
** whose item exists (as upsert does, without triggers); RG_BULK_RESTORE
** (the upgrade) keeps the documents' own _etag, _ts and _lsn.  A storage
** failure fails the scope (the whole batch).  *written counts the items
** written.
*/
enum { RG_BULK_CREATE, RG_BULK_UPSERT, RG_BULK_RESTORE };
typedef struct rg_bulk_item {
  cJSON *doc;                /* the caller's; its system properties are set */
  int64_t expiry;            /* RG_BULK_RESTORE: the item's expiry (0: never) */
  int status;                /* 201 (200 replaced), or the failure's status */
  char *msg;                 /* the failure's message (malloc'd), or NULL */
} rg_bulk_item;
typedef struct rg_bulk rg_bulk;   /* the memory a load reuses, batch after batch */
rg_bulk *rg_bulk_new (void);
void rg_bulk_free (rg_bulk *b);
int  rg_bulk_write (rg_scope *s, rg_bulk *b, const rg_cont *c,
                    rg_bulk_item *items, size_t n, int mode, size_t *written,
                    rg_err *e);
void rg_bulk_clear (rg_bulk_item *items, size_t n);
/* A load in one transaction: from here on (and emptied now) the entries of
** b's batches are held, up to `bound` bytes of memory; past it they are
** spilled to a temporary file (their statistics bumped then), or merged
** into the tables in key order by a load that upserts; they are merged
** when a batch upserts items that exist, or at rg_bulk_flush, which the
** load calls before it commits.  Until then the tables do not show the
** held items (the batches' own checks do).  Containers with vector or
** full-text indexes are merged batch by batch. */
void rg_bulk_hold (rg_bulk *b, size_t bound);
int  rg_bulk_flush (rg_scope *s, rg_bulk *b, rg_err *e);
/* The runs spilled to the temporary file since rg_bulk_hold. */
size_t rg_bulk_spilled (const rg_bulk *b);

/* Reads an item by key in `txn`: 0 and the value (header stripped,
** valid until the transaction changes), or 404 (absent or expired). */
int  rg_item_get (rg_txn *txn, rg_env *env, const rg_ikey *k, int64_t now,
                  rg_val *json, rg_err *e);

/* Container replace: brings every item from the spec `from` to c->spec,
** in the scope: its index entries (`reindex`) and its expiry (`reexpire`:
** the item header and TTL entries).  Items, their _etag, _ts and _lsn
** and the change feed are left as they are. */
int  rg_cont_rebuild (rg_scope *s, const rg_cont *c, const rg_cspec *from,
                      int reindex, int reexpire, rg_err *e);

#endif
