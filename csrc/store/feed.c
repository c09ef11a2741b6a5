/*
** feed.c: the change feed.
**
** Every committed write is in the feed, written by the write itself in its
** own transaction, so the feed can never disagree with the items.  Two
** tables hold it (layout.c):
**
**   latest   cid u32 | range u16  ->  duplicates lsn u64 | seq u32
**   feed     cid u32 | range u16 | lsn u64 | ordinal u32  ->  change record
**
** The latest table is always kept; the feed table (the all-versions feed)
** only for containers whose spec asks for it (container.c): a read or a
** processor in all_versions mode on another container gets 400.
**
** Sequence numbers.  A write transaction takes one lsn (the counter
** "\1lsn" in meta, incremented when the transaction first writes); LMDB
** runs one write transaction at a time across every process, so lsns are
** handed out in commit order, and a reader that has seen lsn n will never
** later find a change committed with a smaller one.  The changes of one
** transaction (a batch, a procedure with its triggers) share its lsn and
** are told apart by the ordinal.  `range` is the physical partition of the
** item (its feed range is range + 1), so that one feed range is one
** contiguous run of keys in commit order, and a logical partition, which
** lives in one physical partition, has its changes in write order.
**
** The change record (format 2):
**
**     u8 format | u8 op (1 create, 2 replace, 3 delete) | u8 flags (1: the
**     delete is a TTL expiry) | u64 ts (seconds) | u16 n | n bytes: the
**     item key | JSON text of the document
**
** where the document is the new version, or for a delete the version that
** was deleted.  The item key (its first bytes are the logical partition)
** lets a read filtered by partition key compare bytes instead of parsing
** documents.  Format 1 (no key length and key) is still read.  The feed
** table is the all-versions feed: creates, replaces, deletes and expiries.
**
** The latest table is the latest-version feed: write.c keeps exactly one
** entry per live item, a duplicate (lsn of the item's last write, its seq)
** of its range's key (the entry under the old lsn is deleted when the item
** is written again), so that reading it from some lsn on yields each item
** changed since then once, at its latest version.  The seq leads to the
** item through the refs table.  Deleted items have no entry; expired items keep
** theirs until the purge, and reads skip them.
**
** Positions.  A place in a feed range is the key to read next, (lsn, sub):
** sub is the ordinal in the feed table, the item's seq in the latest
** table.  A read moves each range's position past the entries it
** consumed, whether they were delivered or filtered out.  A read over
** several ranges merges them by (lsn, sub), so a page is in commit order
** and no range can starve another.  Positions are what continuation tokens
** carry (one per range read) and what processor leases hold.
**
** Continuation tokens (token.c, kind RG_TOKEN_FEED) carry what the read
** they continue was, and where it ended:
**
**     u8 mode | u16 feed range (0: all) | u16 n | n bytes of the
**     partition-key filter (lp) | u16 count | count x (varint lsn, varint
**     sub)
**
** and are bound to the container id (a token of another container, or of
** a container re-created under the same name, is refused with 400).  A
** read from a token needs no other option: the mode, the range and the
** filter come from it, and an option naming another one is refused with
** its own message (host/feed.c).
**
** Retention.  With change_feed.retention set, a feed record goes once it
** is older than that many seconds and every all_versions processor on the
** container (its lease records, lease.c) has checkpointed past it.
** Trimming happens inside write transactions: every write transaction on
** the container checks (at most once a second per container and process,
** and removing at most TRIM_MAX records a time), and so does every
** checkpoint of an all_versions processor.  Trimming is not charged.  The
** latest table is never trimmed: latest mode keeps the life of the
** container.
*/

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/token.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/feed.h"
#include "store/index.h"
#include "store/procs.h"

#define RECORD_FORMAT 2
#define RECORD_HEAD   13         /* format, op, flags, ts, key length */
#define TRIM_MAX      1000       /* records trimmed per transaction */
#define TRIM_SLOTS    64


/*
** {=====================================================================
** Writing
** ======================================================================
*/
int rg_feed_append (rg_scope *s, const rg_cont *c, const rg_ikey *k, int op,
                    int ttl_expired, const cJSON *doc, const rg_buf *text,
                    rg_err *e) {
  uint8_t key[RG_FEED_KEY], *p;
  rg_buf deleted;
  const char *json;
  size_t n;
  /* the write took the scope's lsn before it wrote anything: every change
     of one transaction is under one lsn, told apart by the ordinal */
  rg_assert(s->lsn != 0);
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
  p = (uint8_t *)rg_reserve(s, RG_DB_FEED, key,
                            rg_key_feed(key, c->spec->cid, k->range, s->lsn,
                                        s->ord),
                            rg_feed_record_size(k, n), e);
  if (p != NULL) rg_feed_record_put(p, op, ttl_expired, s->now, k, json, n);
  rg_buf_free(&deleted);
  return p != NULL ? 0 : s->failed;
}

size_t rg_feed_record_size (const rg_ikey *k, size_t n) {
  return RECORD_HEAD + k->len + n;
}

void rg_feed_record_put (uint8_t *p, int op, int ttl_expired, int64_t ts,
                         const rg_ikey *k, const char *json, size_t n) {
  p[0] = RECORD_FORMAT;
  p[1] = (uint8_t)(op == RG_OP_CREATE ? 1 : op == RG_OP_REPLACE ? 2 : 3);
  p[2] = (uint8_t)(ttl_expired ? 1 : 0);
  rg_put_u64(p + 3, (uint64_t)ts);
  rg_put_u16(p + 11, (uint32_t)k->len);
  memcpy(p + RECORD_HEAD, k->key, k->len);
  memcpy(p + RECORD_HEAD + k->len, json, n);
}
/* }===================================================================== */


/*
** {=====================================================================
** Records, positions and keys
** ======================================================================
*/
int rg_feed_record (const rg_val *v, rg_record *r) {
  const uint8_t *p = (const uint8_t *)v->p;
  size_t head;
  if (v->n < 11 || p[1] < 1 || p[1] > 3) return -1;
  r->op = p[1] == 1 ? RG_OP_CREATE : p[1] == 2 ? RG_OP_REPLACE : RG_OP_DELETE;
  r->ttl_expired = p[2] & 1;
  r->ts = (int64_t)rg_get_u64(p + 3);
  if (p[0] == 1) {
    r->key = NULL;
    r->klen = 0;
    head = 11;
  }
  else if (p[0] == 2 && v->n >= RECORD_HEAD) {
    r->klen = rg_get_u16(p + 11);
    r->key = p + RECORD_HEAD;
    head = RECORD_HEAD + r->klen;
    if (head > v->n) return -1;
  }
  else return -1;
  r->json = (const char *)p + head;
  r->n = v->n - head;
  return 0;
}

/* Is the change in the logical partition whose prefix is lp? */
static int record_in (const rg_cspec *spec, const rg_record *r,
                      const uint8_t *lp, size_t lplen) {
  const cJSON *pkv[RG_MAX_PK_PATHS];
  cJSON *doc = NULL;
  rg_ikey k;
  int in;
  if (r->key)           /* terms are prefix-free: a shared prefix is one lp */
    return r->klen >= lplen && memcmp(r->key, lp, lplen) == 0;
  if (rg_json_parse(r->json, r->n, &doc, NULL)) return 0;
  rg_doc_pk(spec, doc, pkv);
  in = rg_ikey_partition(spec, pkv, &k, NULL) == 0 && k.lplen == lplen &&
       memcmp(k.key, lp, lplen) == 0;
  cJSON_Delete(doc);
  return in;
}

static int pos_cmp (uint64_t lsn, uint64_t sub, const rg_fpos *p) {
  if (lsn != p->lsn) return lsn < p->lsn ? -1 : 1;
  if (sub != p->sub) return sub < p->sub ? -1 : 1;
  return 0;
}

/* The position just after the entry (lsn, sub). */
static rg_fpos pos_after (int mode, uint64_t lsn, uint64_t sub) {
  rg_fpos p;
  uint64_t top = 0xFFFFFFFFu;        /* an ordinal, or a seq */
  (void)mode;
  if (sub >= top) { p.lsn = lsn + 1; p.sub = 0; }
  else { p.lsn = lsn; p.sub = sub + 1; }
  return p;
}

/* The key of a position in a range of the feed table. */
static size_t pos_key (uint8_t *out, uint32_t cid, int range, rg_fpos p) {
  if (p.sub > 0xFFFFFFFFu) { p.lsn++; p.sub = 0; }
  return rg_key_feed(out, cid, range, p.lsn, (uint32_t)p.sub);
}

/* 400 unless the container keeps the feed of that mode (all_versions is
** kept only when its spec asks for it). */
static int mode_ok (const rg_cspec *spec, int mode, rg_err *e) {
  if (mode == RG_FEED_ALL && !spec->all_versions)
    return rg_fail(e, 400, "container '%s' keeps no all-versions history: "
                   "create it with change_feed = {all_versions = true} to "
                   "read all_versions", spec->name);
  return 0;
}

static int feed_table (int mode) {
  return mode == RG_FEED_ALL ? RG_DB_FEED : RG_DB_LATEST;
}

/* A cursor walking one range. */
typedef struct head {
  rg_cur *cur;
  int live;                    /* on an entry of the range, before `until` */
  uint64_t lsn, sub;
  rg_val k, v;
} head;

/* Settles a head after a cursor move that returned rc.  In the feed
** table an entry is a key (cid, range, lsn, ordinal); in the latest table
** a duplicate (lsn, reference) of the key (cid, range). */
static int head_check (head *h, int rc, int mode, uint32_t cid, int range,
                       const rg_fpos *until) {
  const uint8_t *k;
  h->live = 0;
  if (rc == RG_NOTFOUND) return 0;
  if (rc) return rc;
  k = (const uint8_t *)h->k.p;
  if (h->k.n != (mode == RG_FEED_ALL ? 18 : 6) ||
      rg_get_u32(k) != cid || (int)rg_get_u16(k + 4) != range)
    return 0;
  if (mode == RG_FEED_ALL) {
    h->lsn = rg_get_u64(k + 6);
    h->sub = rg_get_u32(k + 14);
  }
  else {
    if (h->v.n != RG_LATEST_DUP) return RG_CORRUPT;
    h->lsn = rg_get_u64((const uint8_t *)h->v.p);
    h->sub = rg_get_u32((const uint8_t *)h->v.p + 8);
  }
  if (until && pos_cmp(h->lsn, h->sub, until) >= 0) return 0;
  h->live = 1;
  return 0;
}

static int head_seek (head *h, int mode, uint32_t cid, int range, rg_fpos p,
                      const rg_fpos *until) {
  uint8_t key[RG_FEED_KEY], dup[RG_LATEST_DUP];
  int rc;
  h->k.p = key;
  if (mode == RG_FEED_ALL) {
    h->k.n = pos_key(key, cid, range, p);
    rc = rg_cur_get(h->cur, &h->k, &h->v, RG_SEEK);
  }
  else {
    if (p.sub > 0xFFFFFFFFu) { p.lsn++; p.sub = 0; }
    h->k.n = rg_latest_entry(key, dup, cid, range, p.lsn,
                                   (uint32_t)p.sub);
    h->v.p = dup;
    h->v.n = RG_LATEST_DUP;
    rc = rg_cur_get(h->cur, &h->k, &h->v, RG_BOTH_RANGE);
  }
  return head_check(h, rc, mode, cid, range, until);
}

/* Moves a head to the next entry of its range. */
static int head_next (head *h, int mode, uint32_t cid, int range,
                      const rg_fpos *until) {
  return head_check(h, rg_cur_get(h->cur, &h->k, &h->v,
                                      mode == RG_FEED_ALL ? RG_NEXT
                                                          : RG_NEXT_DUP),
                    mode, cid, range, until);
}

/* Cursors on refs and items for the lookups of one read: an item found
** next to the last one is found on the page already read. */
typedef struct lookups {
  rg_cur *refs, *items;
} lookups;

/* The item key and value of a latest-version entry (RG_NOTFOUND when the
** reference is gone), through `lk`'s cursors when given. */
static int latest_item (rg_txn *txn, const rg_env *env, const head *h,
                        lookups *lk, rg_val *ikey, rg_val *val) {
  rg_val k, hv;
  uint8_t seq[RG_REF_KEY];
  int rc;
  /* The refs table keys by seq alone: landing on the head's entry again
  ** makes its bucket the transaction's context (remote.h), whatever the other
  ** heads read meanwhile. */
  if ((rc = rg_cur_get(h->cur, &k, &hv, RG_CURRENT))) return rc;
  if (lk == NULL) {
    if ((rc = rg_ref_item(txn, (rg_env *)env, (uint32_t)h->sub, ikey)))
      return rc;
    return rg_kv_get(txn, RG_DB_ITEMS, ikey->p, ikey->n, val);
  }
  if ((lk->refs == NULL &&
       (rc = rg_cur_open(txn, RG_DB_REFS, &lk->refs))) ||
      (lk->items == NULL &&
       (rc = rg_cur_open(txn, RG_DB_ITEMS, &lk->items))))
    return rc;
  k.p = seq;
  k.n = rg_key_ref(seq, (uint32_t)h->sub);
  if ((rc = rg_cur_get(lk->refs, &k, ikey, RG_SET))) return rc;
  return rg_cur_get(lk->items, ikey, val, RG_SET);
}
/* }===================================================================== */


/*
** {=====================================================================
** Reading: pages and batches
** ======================================================================
*/
void rg_batch_init (rg_batch *b) {
  memset(b, 0, sizeof(*b));
  rg_buf_init(&b->text);
}

void rg_batch_free (rg_batch *b) {
  free(b->v);
  rg_buf_free(&b->text);
  rg_batch_init(b);
}

/* Empties a batch, keeping its memory. */
void rg_batch_clear (rg_batch *b) {
  b->n = 0;
  b->text.n = 0;
  b->text.oom = 0;
  b->oom = 0;
  memset(&b->work, 0, sizeof(b->work));
}

static void batch_add (rg_batch *b, const rg_change *ch, const char *json,
                       size_t n) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 16;
    rg_change *v = (rg_change *)realloc(b->v, cap * sizeof(rg_change));
    if (v == NULL) { b->oom = 1; return; }
    b->v = v;
    b->cap = cap;
  }
  b->v[b->n] = *ch;
  b->v[b->n].off = b->text.n;
  b->v[b->n].len = n;
  rg_buf_add(&b->text, json, n);
  b->n++;
}

/* Consumes the entry under head h (range r): adds it to the batch unless
** a filter or an expiry leaves it out. */
static int take (rg_txn *txn, const rg_feedq *q, rg_batch *b, head *h,
                 int range, lookups *lk, rg_err *e) {
  rg_change ch;
  memset(&ch, 0, sizeof(ch));
  ch.lsn = h->lsn;
  ch.range = range;
  if (q->mode == RG_FEED_ALL) {
    rg_record r;
    if (rg_feed_record(&h->v, &r))
      return rg_fail(e, 500, "corrupt change record (lsn %llu)",
                     (unsigned long long)h->lsn);
    if (q->lp && !record_in(q->c->spec, &r, q->lp, q->lplen)) return 0;
    ch.op = r.op;
    ch.ttl_expired = r.ttl_expired;
    ch.ts = r.ts;
    batch_add(b, &ch, r.json, r.n);
    b->work.loaded_bytes += r.n;
  }
  else {
    rg_val key, v;
    rg_ihdr ih;
    const char *text;
    size_t n;
    int rc = latest_item(txn, q->c->env, h, lk, &key, &v);
    if (rc == RG_NOTFOUND) return 0;
    if (rc) return rg_kv_fail(e, rc, "change feed");
    if (q->lp && (key.n < q->lplen ||
                  memcmp(key.p, q->lp, q->lplen) != 0))
      return 0;
    if (rg_ihdr_get(v.p, v.n, &ih, &text, &n))
      return rg_fail(e, 500, "corrupt item record");
    if (ih.expiry != 0 && ih.expiry <= q->now) return 0;     /* invisible */
    ch.op = RG_OP_REPLACE;
    batch_add(b, &ch, text, n);
    b->work.loaded_bytes += n;
  }
  return 0;
}

int rg_feed_read (rg_txn *txn, rg_feedq *q, rg_batch *b, rg_err *e) {
  uint32_t cid = q->c->spec->cid;
  head one, *h;
  lookups lk = { NULL, NULL };
  int i, rc = 0, opened = 0;
  if ((rc = mode_ok(q->c->spec, q->mode, e))) return rc;
  h = q->n == 1 ? &one : (head *)calloc((size_t)q->n, sizeof(head));
  if (h == NULL) return rg_fail(e, 500, "out of memory");
  memset(&one, 0, sizeof(one));
  for (i = 0; i < q->n && rc == 0; i++) {
    if ((rc = rg_cur_open(txn, feed_table(q->mode), &h[i].cur)))
      break;
    opened++;
    rc = head_seek(&h[i], q->mode, cid, q->first + i, q->pos[i], q->until);
    b->work.lookups++;
  }
  if (rc) rc = rg_kv_fail(e, rc, "change feed");
  while (rc == 0 && b->n < q->max) {
    int best = -1;
    head *x;
    for (i = 0; i < q->n; i++)
      if (h[i].live && (best < 0 || h[i].lsn < h[best].lsn ||
                        (h[i].lsn == h[best].lsn && h[i].sub < h[best].sub)))
        best = i;
    if (best < 0) break;
    x = &h[best];
    q->pos[best] = pos_after(q->mode, x->lsn, x->sub);
    b->work.loaded++;
    if ((rc = take(txn, q, b, x, q->first + best, &lk, e))) break;
    rc = head_next(x, q->mode, cid, q->first + best, q->until);
    if (rc) rc = rg_kv_fail(e, rc, "change feed");
  }
  if (lk.refs) rg_cur_close(lk.refs);
  if (lk.items) rg_cur_close(lk.items);
  for (i = 0; i < opened; i++) rg_cur_close(h[i].cur);
  if (h != &one) free(h);
  if (rc == 0 && (b->oom || b->text.oom))
    rc = rg_fail(e, 500, "out of memory");
  return rc;
}

int rg_feed_count (rg_txn *txn, const rg_cont *c, int mode, int range,
                   const rg_fpos *pos, uint64_t limit, uint64_t *count,
                   rg_err *e) {
  head h;
  int rc;
  *count = 0;
  if ((rc = mode_ok(c->spec, mode, e))) return rc;
  memset(&h, 0, sizeof(h));
  if ((rc = rg_cur_open(txn, feed_table(mode), &h.cur)))
    return rg_kv_fail(e, rc, "change feed");
  rc = head_seek(&h, mode, c->spec->cid, range, *pos, NULL);
  while (rc == 0 && h.live && *count < limit) {
    (*count)++;
    rc = head_next(&h, mode, c->spec->cid, range, NULL);
  }
  rg_cur_close(h.cur);
  if (rc) return rg_kv_fail(e, rc, "change feed");
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Where a read starts
** ======================================================================
*/
/* The _ts of an item from its JSON text: write.c puts the system
** properties last, so the last "_ts" key is the top-level one. */
static int64_t text_ts (const char *s, size_t n) {
  static const char pat[] = "\"_ts\":";
  size_t m = sizeof(pat) - 1, i;
  int64_t v = 0;
  if (n < m) return 0;
  for (i = n - m + 1; i-- > 0;)
    if (memcmp(s + i, pat, m) == 0) {
      for (i += m; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        v = v * 10 + (s[i] - '0');
      return v;
    }
  return 0;
}

/* The time of the entry under a head. */
static int64_t head_ts (rg_txn *txn, const rg_env *env, int mode,
                        const head *h) {
  if (mode == RG_FEED_ALL) {
    rg_record r;
    return rg_feed_record(&h->v, &r) ? 0 : r.ts;
  }
  else {
    rg_val key, v;
    rg_ihdr ih;
    const char *text;
    size_t n;
    if (latest_item(txn, env, h, NULL, &key, &v) ||
        rg_ihdr_get(v.p, v.n, &ih, &text, &n))
      return 0;
    return text_ts(text, n);
  }
}


/*
** The position of a start in one range.  A time start is the first entry
** whose time is at least `t`, found by bisecting the lsns (times grow with
** lsns as long as the clock does not step back): in latest mode the time
** of the item's last write, in all_versions mode the record's.
*/
int rg_feed_start (rg_txn *txn, const rg_cont *c, int mode, int range,
                   int kind, double t, rg_fpos *pos, rg_err *e) {
  uint64_t lo = 0, hi;
  head h;
  int rc = 0;
  pos->lsn = pos->sub = 0;
  if ((rc = mode_ok(c->spec, mode, e))) return rc;
  if (kind == RG_START_BEGINNING) return 0;
  if ((rc = rg_kv_last(txn, c->spec->cid, range, &hi)))
    return rg_kv_fail(e, rc, "change feed");
  hi++;
  if (kind == RG_START_NOW) { pos->lsn = hi; return 0; }
  memset(&h, 0, sizeof(h));
  if ((rc = rg_cur_open(txn, feed_table(mode), &h.cur)))
    return rg_kv_fail(e, rc, "change feed");
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    rg_fpos p;
    p.lsn = mid;
    p.sub = 0;
    if ((rc = head_seek(&h, mode, c->spec->cid, range, p, NULL))) break;
    if (!h.live || (double)head_ts(txn, c->env, mode, &h) >= t) hi = mid;
    else lo = h.lsn + 1;
  }
  rg_cur_close(h.cur);
  if (rc) return rg_kv_fail(e, rc, "change feed");
  pos->lsn = lo;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Continuation tokens
** ======================================================================
*/
#define FEED_TOKEN_FORMAT 2

static uint64_t token_ctx (const rg_cspec *spec) {
  uint8_t head[5];
  rg_put_u32(head, spec->cid);
  head[4] = FEED_TOKEN_FORMAT;
  return rg_hash(head, 5);
}

static void put_varint (rg_buf *b, uint64_t v) {
  while (v >= 0x80) {
    rg_buf_addc(b, (int)(v & 0x7F) | 0x80);
    v >>= 7;
  }
  rg_buf_addc(b, (int)v);
}

static int get_varint (const uint8_t **p, const uint8_t *end, uint64_t *v) {
  int shift = 0;
  *v = 0;
  while (*p < end && shift < 64) {
    uint8_t c = *(*p)++;
    *v |= (uint64_t)(c & 0x7F) << shift;
    if (!(c & 0x80)) return 0;
    shift += 7;
  }
  return -1;
}

void rg_feed_token (const uint8_t secret[16], const rg_cspec *spec, int mode,
                    int range, const uint8_t *lp, size_t lplen, int n,
                    const rg_fpos *pos, rg_buf *out) {
  rg_buf pl;
  uint8_t head[7];
  int i;
  rg_buf_init(&pl);
  head[0] = (uint8_t)mode;
  rg_put_u16(head + 1, (uint32_t)range);
  rg_put_u16(head + 3, (uint32_t)(lp ? lplen : 0));
  rg_buf_add(&pl, head, 5);
  if (lp) rg_buf_add(&pl, lp, lplen);
  rg_put_u16(head, (uint32_t)n);
  rg_buf_add(&pl, head, 2);
  for (i = 0; i < n; i++) {
    put_varint(&pl, pos[i].lsn);
    put_varint(&pl, pos[i].sub);
  }
  if (pl.oom) out->oom = 1;
  else rg_token_make(secret, RG_TOKEN_FEED, token_ctx(spec), pl.p, pl.n,
                     out);
  rg_buf_free(&pl);
}

int rg_feed_untoken (const uint8_t secret[16], const rg_cspec *spec,
                     const char *tok, size_t len, rg_feedtok *t, rg_err *e) {
  rg_buf pl;
  const uint8_t *p, *end;
  size_t lplen;
  int i, rc;
  rg_buf_init(&pl);
  if ((rc = rg_token_open(secret, RG_TOKEN_FEED, token_ctx(spec), tok, len,
                          &pl, e))) {
    rg_buf_free(&pl);
    return rc;
  }
  p = (const uint8_t *)pl.p;
  end = p + pl.n;
  if (pl.n < 7) goto bad;
  t->mode = p[0];
  t->range = (int)rg_get_u16(p + 1);
  lplen = rg_get_u16(p + 3);
  if ((t->mode != RG_FEED_LATEST && t->mode != RG_FEED_ALL) ||
      t->range > spec->nparts || lplen > RG_MAX_KEY ||
      (lplen && t->range) || 5 + lplen + 2 > pl.n)
    goto bad;
  memcpy(t->lp, p + 5, lplen);
  t->lplen = lplen;
  p += 5 + lplen;
  t->n = (int)rg_get_u16(p);
  p += 2;
  if (t->n != (t->range || lplen ? 1 : spec->nparts)) goto bad;
  for (i = 0; i < t->n; i++)
    if (get_varint(&p, end, &t->pos[i].lsn) ||
        get_varint(&p, end, &t->pos[i].sub))
      goto bad;
  if (p != end) goto bad;
  rg_buf_free(&pl);
  return 0;
bad:
  rg_buf_free(&pl);
  return rg_fail(e, 400, "invalid continuation token (altered, truncated, or "
                 "made for another change feed)");
}
/* }===================================================================== */


/*
** {=====================================================================
** Retention
** ======================================================================
*/
/* When each container was last found with nothing to trim (per process). */
static struct { const rg_env *env; uint32_t cid; int64_t next; }
  trim_seen[TRIM_SLOTS];

int rg_feed_trim (rg_scope *s, const rg_cont *c, int force, rg_err *e) {
  const rg_cspec *spec = c->spec;
  int slot = (int)(spec->cid % TRIM_SLOTS), budget = TRIM_MAX, r, rc = 0;
  int64_t horizon;
  rg_fpos *floor = NULL;
  head h;
  if (spec->retention < 0) return 0;
  if (!force && trim_seen[slot].env == s->env &&
      trim_seen[slot].cid == spec->cid && s->now < trim_seen[slot].next)
    return 0;
  horizon = s->now - spec->retention;   /* older than this: past retention */
  memset(&h, 0, sizeof(h));
  if ((rc = rg_cur_open(s->txn, RG_DB_FEED, &h.cur)))
    return rg_scope_fail(s, rc, "change feed", e);
  for (r = 0; r < spec->nparts && budget > 0 && rc == 0; r++) {
    rg_fpos start = { 0, 0 };
    for (;;) {
      rg_record rec;
      if ((rc = head_seek(&h, RG_FEED_ALL, spec->cid, r, start, NULL))) {
        rc = rg_scope_fail(s, rc, "change feed", e);
        break;
      }
      if (!h.live || budget == 0 || rg_feed_record(&h.v, &rec) ||
          rec.ts >= horizon)
        break;
      if (floor == NULL) {           /* what the processors still need */
        floor = (rg_fpos *)malloc(sizeof(rg_fpos) * (size_t)spec->nparts);
        if (floor == NULL) { rc = rg_fail(e, 500, "out of memory"); break; }
        if ((rc = rg_lease_floors(s->txn, s->env, spec->cid, spec->nparts,
                                 floor, e)))
          break;
      }
      if (pos_cmp(h.lsn, h.sub, &floor[r]) >= 0) break;
      if ((rc = rg_cursor_del(s, h.cur, e))) break;
      budget--;
      start = pos_after(RG_FEED_ALL, h.lsn, h.sub);
    }
  }
  rg_cur_close(h.cur);
  free(floor);
  if (rc == 0) {
    trim_seen[slot].env = s->env;
    trim_seen[slot].cid = spec->cid;
    trim_seen[slot].next = budget > 0 ? s->now + 1 : 0;
  }
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Changes as JSON (dead letters)
** ======================================================================
*/
static const char *const op_names[] = {
  "", "create", "replace", "", "delete"
};

/* Appends the JSON text of a node (or null). */
static void print_or_null (const cJSON *v, rg_buf *out) {
  if (v) rg_json_print(v, out);
  else rg_buf_adds(out, "null");
}

int rg_batch_json (const rg_cspec *spec, int mode, const rg_batch *b,
                   rg_buf *out, rg_err *e) {
  size_t i;
  int k;
  rg_buf_addc(out, '[');
  for (i = 0; i < b->n; i++) {
    const rg_change *ch = &b->v[i];
    const char *json = b->text.p + ch->off;
    cJSON *doc = NULL;
    if (i) rg_buf_addc(out, ',');
    if (mode == RG_FEED_LATEST) {
      rg_buf_add(out, json, ch->len);
      continue;
    }
    if (rg_json_parse(json, ch->len, &doc, e))
      return rg_fail(e, 500, "corrupt change: %s", e->msg);
    rg_buf_addf(out, "{\"%s\":", ch->op == RG_OP_DELETE ? "previous" :
                "current");
    rg_buf_add(out, json, ch->len);
    rg_buf_addf(out, ",\"metadata\":{\"operation\":\"%s\",\"lsn\":%llu,"
                "\"ts\":%lld,\"id\":", op_names[ch->op == RG_OP_CREATE ? 1 :
                                                 ch->op == RG_OP_REPLACE ? 2 :
                                                 4],
                (unsigned long long)ch->lsn, (long long)ch->ts);
    print_or_null(cJSON_GetObjectItemCaseSensitive(doc, "id"), out);
    rg_buf_adds(out, ",\"partition_key\":");
    if (rg_path_get(doc, &spec->pk[0]) == NULL) rg_buf_adds(out, "{}");
    else if (spec->npk == 1)
      print_or_null(rg_path_get(doc, &spec->pk[0]), out);
    else {
      rg_buf_addc(out, '[');
      for (k = 0; k < spec->npk; k++) {
        if (k) rg_buf_addc(out, ',');
        print_or_null(rg_path_get(doc, &spec->pk[k]), out);
      }
      rg_buf_addc(out, ']');
    }
    rg_buf_addf(out, ",\"ttl_expired\":%s}}", ch->ttl_expired ? "true" :
                "false");
    cJSON_Delete(doc);
  }
  rg_buf_addc(out, ']');
  if (out->oom) return rg_fail(e, 500, "out of memory");
  return 0;
}
/* }===================================================================== */
