/*
** feed.h: the change feed: records, reads, positions, tokens, retention.
**
** Every committed write is in the feed, written by the write itself in its
** own scope (write.c calls rg_feed_append), so the feed can never disagree
** with the items.  Each write transaction takes one sequence number (lsn);
** within a feed range, no smaller lsn ever appears after a larger one.
** feed.c writes the record format and the positions down.
*/

#ifndef rg_feed_h
#define rg_feed_h

#include "store/container.h"
#include "store/env.h"
#include "store/layout.h"

enum { RG_START_BEGINNING, RG_START_NOW, RG_START_TIME };   /* starts */

/* One change read from the feed; its JSON lives in the batch's text. */
typedef struct rg_change {
  uint64_t lsn;
  int64_t ts;                /* all_versions only */
  int range;                 /* physical partition, 0-based */
  int op;                    /* RG_OP_CREATE, RG_OP_REPLACE, RG_OP_DELETE */
  int ttl_expired;
  size_t off, len;
} rg_change;

/* The changes of one read, with the work of reading them. */
typedef struct rg_batch {
  rg_change *v;
  size_t n, cap;
  rg_buf text;
  rg_work work;
  int oom;
} rg_batch;

/* A read: ranges first .. first+n-1, range i from pos[i] (moved past what
** is consumed), merged in commit order, at most `max` changes. */
typedef struct rg_feedq {
  const rg_cont *c;
  int mode;
  int first, n;
  rg_fpos *pos;
  const rg_fpos *until;      /* stop before this place (NULL: no bound) */
  const uint8_t *lp;         /* only this logical partition (NULL: all) */
  size_t lplen;
  size_t max;
  int64_t now;               /* latest mode: expired items are invisible */
} rg_feedq;

/* Appends the change record of one write (op create, replace or delete;
** `doc` the new version, or the deleted one; `text` the new version's
** JSON, NULL for a delete). */
int rg_feed_append (rg_scope *s, const rg_cont *c, const rg_ikey *k, int op,
                    int ttl_expired, const cJSON *doc, const rg_buf *text,
                    rg_err *e);
/* A change record's size, and the record written at p (bulk loads). */
size_t rg_feed_record_size (const rg_ikey *k, size_t n);
void   rg_feed_record_put (uint8_t *p, int op, int ttl_expired, int64_t ts,
                           const rg_ikey *k, const char *json, size_t n);
/* A stored change record, split; the pointers point into the value. */
typedef struct rg_record {
  int op;                    /* RG_OP_CREATE, RG_OP_REPLACE, RG_OP_DELETE */
  int ttl_expired;
  int64_t ts;
  const uint8_t *key;        /* the item key (NULL in format 1 records) */
  size_t klen;
  const char *json;          /* the new version, or the deleted one */
  size_t n;
} rg_record;
int  rg_feed_record (const rg_val *v, rg_record *r);   /* 0, or -1: corrupt */
void rg_batch_init (rg_batch *b);
void rg_batch_clear (rg_batch *b);
void rg_batch_free (rg_batch *b);
/* Reads changes into `b` (copied: valid after the transaction). */
int  rg_feed_read (rg_txn *txn, rg_feedq *q, rg_batch *b, rg_err *e);
/* Counts the entries of a range from a position, up to `limit`. */
int  rg_feed_count (rg_txn *txn, const rg_cont *c, int mode, int range,
                    const rg_fpos *pos, uint64_t limit, uint64_t *count,
                    rg_err *e);
/* The position of a start (RG_START_*, `t` seconds for a time) in a range. */
int  rg_feed_start (rg_txn *txn, const rg_cont *c, int mode, int range,
                    int kind, double t, rg_fpos *pos, rg_err *e);
/* Continuation tokens of `n` positions, keyed by the database's secret
** (rg_env_secret), bound to the container, and carrying the read's mode,
** feed range (0: every range) and partition filter (lp, lplen; NULL: none).
** rg_feed_untoken gives them back (400 for a token that is not one of this
** container's). */
typedef struct rg_feedtok {
  int mode, range;
  uint8_t lp[RG_MAX_KEY];
  size_t lplen;
  int n;
  rg_fpos pos[RG_MAX_PARTITIONS];
} rg_feedtok;

void rg_feed_token (const uint8_t secret[16], const rg_cspec *spec, int mode,
                    int range, const uint8_t *lp, size_t lplen, int n,
                    const rg_fpos *pos, rg_buf *out);
int  rg_feed_untoken (const uint8_t secret[16], const rg_cspec *spec,
                      const char *tok, size_t len, rg_feedtok *t, rg_err *e);
/* Removes all_versions records past retention that every all_versions
** processor has checkpointed past (at most once a second unless `force`). */
int  rg_feed_trim (rg_scope *s, const rg_cont *c, int force, rg_err *e);
/* Appends a batch as JSON text in the mode's shape (dead letters). */
int  rg_batch_json (const rg_cspec *spec, int mode, const rg_batch *b,
                    rg_buf *out, rg_err *e);

#endif
