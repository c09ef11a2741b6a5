/*
** feed.c: the change feed.
**
** Every write appends one change record, in the write's own transaction,
** to the feed table (layout.c):
**
**     cid u32 | range u16 | lsn u64 | ordinal u32  ->  record
**
** `range` is the item's physical partition (its feed range is range + 1),
** `lsn` the sequence number of the write transaction and `ordinal` the
** place of the change within it, so that a range's records are in commit
** order and the changes of one transaction (a procedure, a batch) share
** one lsn.  The record:
**
**     u8 format (1) | u8 op (1 create, 2 replace, 3 delete) | u8 flags
**     (1: the delete is a TTL expiry) | u64 ts | JSON text of the document
**
** where the document is the new version, or for a delete the version that
** was deleted (its id and partition key name the item).  These records are
** the all-versions feed.  The latest-version feed reads the latest table
** instead, where each live item has one entry under the lsn of its last
** write (write.c keeps it).
*/

#include <string.h>

#include "regolith.h"

#define RECORD_FORMAT 1

int rg_feed_append (rg_scope *s, const rg_cont *c, const rg_ikey *k, int op,
                    int ttl_expired, const cJSON *doc, const rg_buf *text,
                    rg_err *e) {
  uint8_t key[18];
  MDB_val kv, vv;
  rg_buf deleted;
  const char *json;
  size_t n;
  int rc;
  rg_buf_init(&deleted);
  if (text == NULL) {                /* a delete: keep the last version */
    rg_json_print(doc, &deleted);
    if (deleted.oom) return rg_fail(e, 500, "out of memory");
    json = deleted.p;
    n = deleted.n;
  }
  else {
    json = text->p;
    n = text->n;
  }
  rg_put_u32(key, c->spec->cid);
  rg_put_u16(key + 4, (uint32_t)k->range);
  rg_put_u64(key + 6, s->lsn);
  rg_put_u32(key + 14, s->ord);
  kv.mv_data = key;
  kv.mv_size = 18;
  vv.mv_size = 11 + n;
  rc = mdb_put(s->txn, s->env->dbi[RG_DB_FEED], &kv, &vv, MDB_RESERVE);
  if (rc == 0) {
    uint8_t *p = (uint8_t *)vv.mv_data;
    p[0] = RECORD_FORMAT;
    p[1] = (uint8_t)(op == RG_OP_CREATE ? 1 : op == RG_OP_REPLACE ? 2 : 3);
    p[2] = (uint8_t)(ttl_expired ? 1 : 0);
    rg_put_u64(p + 3, (uint64_t)s->now);
    memcpy(p + 11, json, n);
  }
  rg_buf_free(&deleted);
  if (rc) return rg_scope_mdb(s, rc, "change feed", e);
  return 0;
}
