/*
** layout.c: the storage layout.  Every key format of the database is
** written down here, once.  This file builds item keys, partition
** prefixes, terms and meta keys; the other keys are built by the file that
** owns their table (named below), from these pieces.
**
** A database is one LMDB environment (a directory holding data.mdb and
** lock.mdb) with these named tables.  All integers in keys are big-endian,
** so that LMDB's memcmp order is numeric order.  `cid` is a container's
** 32-bit id (never reused), `lp` a logical partition's prefix (below).
**
**   meta     catalog and bookkeeping:
**              "\1version"            -> u32 format version (RG_FORMAT_VERSION)
**              "\1secret"             -> 16 random bytes keying continuation
**                                        tokens to this database
**              "\1lsn"                -> u64 last change-feed sequence number
**              "\1cid"                -> u32 last container id handed out
**              "\1scripts"            -> u64 version of the scripts (scripts.c)
**              "\1throughput"         -> u64 version of the throughput
**                                        settings, then the database's
**                                        setting as JSON text (throughput.c)
**              'n' name               -> u32 cid (container names)
**              'c' cid                -> the container's spec, JSON text
**              'k' cid                -> u64 items, u64 bytes (container stats)
**              's' cid name           -> stored procedure (u64 version, source)
**              't' cid name           -> trigger (u64 version, type, operation,
**                                        automatic, source; scripts.c)
**              'l' cid name 0 u16:range -> processor lease (lease.c)
**              'l' cid name 0 FFFF inst -> live processor instance
**              'd' cid name 0 u64:seq -> processor dead letter
**              'h' cid u64:shape      -> an item shape's path ids (index.c)
**              'u' cid name           -> user-defined function (u64 version,
**                                        source; scripts.c)
**   items    lp id                    -> u64 expiry (0: never) + JSON text
**   index    cid u64:path term hash u64:digest      -> item key
**            cid u64:1 u64:shape hash u64:digest    -> item key (shapes) (index.c)
**   unique   lp u8:unique-key# u128:values-digest   -> item key (index.c)
**   ttl      cid u64:expiry u64:digest              -> item key (write.c)
**   feed     cid u16:range u64:lsn u32:ordinal      -> change record (feed.c)
**   latest   cid u16:range u64:lsn u64:digest       -> item key (write.c)
**   parts    lp                                     -> u64 items, u64 bytes
**
** Logical and physical partitions.  A partition key value (one value per
** level, up to three levels) is encoded as a tuple of terms (below) and
** hashed (SipHash-2-4, fixed key) to 64 bits.  In containers of revision 2
** (container.c) a hierarchical key's hash is made of prefixes: its top 32
** bits hash the first level alone, and with three levels the next 16 bits
** hash the first two; the rest hash the whole tuple.  So the logical
** partitions that share a first level (or the first two) form one key
** range inside one physical partition, where a query naming that prefix
** is routed.  An item's key starts with
**
**     lp = cid u32 | hash u64 | tuple
**
** so one logical partition is one contiguous key range, and, because the
** hash comes first, a physical partition (a hash range: partition r of P
** holds the hashes whose top 32 bits h satisfy floor(h * P / 2^32) = r)
** is one contiguous range of logical partitions.  The id follows the
** tuple; ids of more than RG_ID_INLINE bytes are cut and followed by 0xFF
** (never a byte of UTF-8) and a digest of the whole id, so that every key
** fits LMDB's 511-byte limit.  An item is always checked against its
** stored id and partition key after a read, so a digest collision could
** never return the wrong item.
**
** Terms.  A scalar is encoded so that memcmp order is the query order
** null < false < true < numbers < strings, and so that the encoding is
** prefix-free (no term is a prefix of another, which lets terms be
** concatenated and lets a descending term be the bitwise complement):
**     0x04 none (partition keys only: the value of an item that lacks its
**          partition key, Cosmos's undefined partition key; below)
**     0x05 null | 0x06 false | 0x07 true
**     0x08 number: the IEEE double, sign bit flipped for positives and all
**          bits flipped for negatives (-0 is 0), 8 bytes.  Where a term
**          identifies (partition keys, unique values) 2 more bytes follow:
**          the difference between an integer and its double (2^15 + d), so
**          that 64-bit integers beyond 2^53 stay apart and in order.  Index
**          terms keep the double alone, as queries compare numbers (the
**          loaded item is always checked against the full condition).
**     0x09 string: the raw bytes with 0x00 written 0x00 0xFF, then 0x00 0x01;
**          a string cut to a length limit ends 0x00 0x02 instead (it sorts
**          after every exact string with the same beginning), and where the
**          term identifies rather than orders, the cut is followed by an
**          8-byte digest of the whole string.
**
** Index entries name their item by the logical partition's hash and an
** 8-byte digest of the item key, and hold the full item key as their value:
** the key stays short whatever the id, and the hash after the term keeps
** one term's entries in physical-partition order.
**
** The change feed (feed.c) and the latest-version table give every write
** transaction one sequence number (lsn), taken from "\1lsn" when the
** transaction first writes; changes within one transaction are told apart
** by an ordinal.  The latest table holds one entry per live item, under the
** lsn of its last write, so that reading it from an lsn onwards yields each
** changed item once, at its latest version.
*/

#include <string.h>

#include "base/json.h"
#include "store/layout.h"

#define RG_ID_INLINE     200      /* ids longer than this are cut + digest */
#define RG_ID_CUT        180
#define RG_PK_STR_INLINE 80       /* encoded bytes of an exact pk string */
#define RG_PK_STR_CUT    64

enum { T_NONE = 0x04, T_NULL = 0x05, T_FALSE = 0x06, T_TRUE = 0x07,
       T_NUMBER = 0x08, T_STRING = 0x09 };


/*
** {=====================================================================
** Terms
** ======================================================================
*/
/* A number term: the double's 8 bytes; `exact` adds the 2 bytes of the
** integer residual (identity terms). */
static void put_number (rg_buf *b, const cJSON *v, int exact_terms) {
  double d = v->valuedouble;
  uint64_t bits;
  uint8_t p[11];
  int64_t exact, residual = 0;
  if (d == 0) d = 0;                       /* -0 is 0 */
  memcpy(&bits, &d, 8);
  if (bits >> 63) bits = ~bits;
  else bits ^= (uint64_t)1 << 63;
  /* an integer beyond 2^53 differs from its double by at most 2^10; the
     double of an int64 lies in [-2^63, 2^63], and only 2^63 itself does
     not convert back */
  if (exact_terms && v->valuestring != NULL && rg_num_int(v, &exact)) {
    if (d >= 9223372036854775808.0) residual = (exact - INT64_MAX) - 1;
    else residual = exact - (int64_t)d;
  }
  p[0] = T_NUMBER;
  rg_put_u64(p + 1, bits);
  rg_put_u16(p + 9, (uint32_t)(residual + 32768));
  rg_buf_add(b, p, exact_terms ? 11 : 9);
}

/*
** Appends a string term.  `limit` bounds the encoded body (0: none); a cut
** string ends 0x00 0x02, followed by a digest of the whole when `digest`.
*/
static void put_string (rg_buf *b, const char *mutf8, size_t limit,
                        int digest) {
  const unsigned char *s = (const unsigned char *)mutf8;
  size_t body = 0;
  int cut = 0;
  rg_buf_addc(b, T_STRING);
  for (; *s; s++) {
    int nul = (s[0] == 0xC0 && s[1] == 0x80);
    size_t w = nul ? 2 : 1;
    if (limit && body + w > limit) { cut = 1; break; }
    if (nul) { rg_buf_add(b, "\0\xFF", 2); s++; }
    else rg_buf_addc(b, *s);
    body += w;
  }
  if (!cut) { rg_buf_add(b, "\0\x01", 2); return; }
  rg_buf_add(b, "\0\x02", 2);
  if (digest) {
    uint8_t d[8];
    rg_put_u64(d, rg_hash(mutf8, strlen(mutf8)));
    rg_buf_add(b, d, 8);
  }
}

static void put_term (rg_buf *b, const cJSON *v, int desc, size_t limit,
                      int exact) {
  size_t start = b->n, i;
  switch (v->type & 0xFF) {
    case cJSON_NULL: rg_buf_addc(b, T_NULL); break;
    case cJSON_False: rg_buf_addc(b, T_FALSE); break;
    case cJSON_True: rg_buf_addc(b, T_TRUE); break;
    case cJSON_Number: put_number(b, v, exact); break;
    case cJSON_String: put_string(b, v->valuestring, limit, 0); break;
    default: return;                       /* not a scalar: no term */
  }
  if (desc && !b->oom)
    for (i = start; i < b->n; i++) b->p[i] = (char)~(unsigned char)b->p[i];
}

void rg_term_cut (rg_buf *b, const cJSON *v, int desc, size_t limit) {
  put_term(b, v, desc, limit, 0);
}

void rg_term_exact (rg_buf *b, const cJSON *v) {
  put_term(b, v, 0, 0, 1);
}

void rg_term (rg_buf *b, const cJSON *v, int desc) {
  rg_term_cut(b, v, desc, RG_TERM_MAX);
}

int rg_term_bounded (rg_buf *b, const cJSON *v) {
  if (cJSON_IsString(v)) {
    /* exact when short, cut with a digest when long */
    int cut = strlen(v->valuestring) + 2 > RG_PK_STR_INLINE;
    put_string(b, v->valuestring, cut ? RG_PK_STR_CUT : 0, 1);
    return cut;
  }
  rg_term_exact(b, v);
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Item keys
** ======================================================================
*/
int rg_range_of (uint64_t hash, int nparts) {
  return (int)(((hash >> 32) * (uint64_t)nparts) >> 32);
}

/* The "none" value of a level: absent (a document lacking the path) or an
** empty object (how callers name it, as the Cosmos SDKs send [{}]). */
static int is_none (const cJSON *v) {
  return v == NULL || (cJSON_IsObject(v) && v->child == NULL);
}

/*
** The none partition key (every level none) is a logical partition of its
** own, apart from null: the items that lack their partition key.  A key
** that is none at some levels only is refused.  Whether a document may lack
** its key is the write path's decision (write.c, resolve).
*/
int rg_ikey_partition (const rg_cspec *s, const cJSON *const *pkv,
                       rg_ikey *k, rg_err *e) {
  rg_buf exact, tuple;
  size_t lens[2] = { 0, 0 };
  int i, rc = 0, lossy = 0, none = 0;
  rg_buf_init(&exact);
  rg_buf_init(&tuple);
  for (i = 0; i < s->npk; i++) none += is_none(pkv[i]);
  if (none && none != s->npk) {
    for (i = 0; !is_none(pkv[i]); i++) {}
    rc = rg_fail(e, 400, "the partition key value at a level is missing "
                 "(every level is required: %s)", s->pk[i].seg[0]);
    goto done;
  }
  for (i = 0; i < s->npk; i++) {
    const cJSON *v = pkv[i];
    if (none) {
      rg_buf_addc(&exact, T_NONE);
      rg_buf_addc(&tuple, T_NONE);
      if (i < 2) lens[i] = exact.n;
      continue;
    }
    if (!(cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v) ||
          cJSON_IsNull(v))) {
      rc = rg_fail(e, 400, "a partition key value must be a string, number, "
                   "boolean or null");
      goto done;
    }
    rg_term_exact(&exact, v);
    lossy |= rg_term_bounded(&tuple, v);
    if (i < 2) lens[i] = exact.n;
  }
  if (exact.oom || tuple.oom) { rc = rg_fail(e, 500, "out of memory"); goto done; }
  k->hash = rg_hash(exact.p, exact.n);
  if (s->npk > 1 && s->revision >= 2) {   /* prefix hashing */
    uint64_t h1 = rg_hash(exact.p, lens[0]);
    if (s->npk == 2)
      k->hash = (h1 & 0xFFFFFFFF00000000ull) | (k->hash & 0xFFFFFFFFull);
    else
      k->hash = (h1 & 0xFFFFFFFF00000000ull) |
                (rg_hash(exact.p, lens[1]) & 0x00000000FFFF0000ull) |
                (k->hash & 0xFFFFull);
  }
  k->range = rg_range_of(k->hash, s->nparts);
  rg_put_u32(k->key, s->cid);
  rg_put_u64(k->key + 4, k->hash);
  memcpy(k->key + 12, tuple.p, tuple.n);
  k->lplen = k->len = 12 + tuple.n;
  k->lossy = lossy;
done:
  rg_buf_free(&exact);
  rg_buf_free(&tuple);
  return rc;
}

int rg_ikey_prefix (const rg_cspec *s, const cJSON *const *pkv, int levels,
                    uint8_t *key, size_t *klen, uint64_t *hash,
                    uint64_t *mask) {
  rg_buf exact;
  size_t l1 = 0;
  int i;
  if (s->revision < 2 || s->npk < 2 || levels < 1 || levels >= s->npk)
    return 0;
  rg_buf_init(&exact);
  for (i = 0; i < levels; i++) {
    if (pkv[i] == NULL) { rg_buf_free(&exact); return 0; }
    rg_term_exact(&exact, pkv[i]);
    if (i == 0) l1 = exact.n;
  }
  if (exact.oom) { rg_buf_free(&exact); return 0; }
  *hash = rg_hash(exact.p, l1) & 0xFFFFFFFF00000000ull;
  *mask = 0xFFFFFFFF00000000ull;
  if (levels == 2) {                 /* of three */
    *hash |= rg_hash(exact.p, exact.n) & 0x00000000FFFF0000ull;
    *mask = 0xFFFFFFFFFFFF0000ull;
  }
  rg_buf_free(&exact);
  rg_put_u32(key, s->cid);
  rg_put_u64(key + 4, *hash);
  *klen = levels == 2 ? 10 : 8;
  return 1;
}

void rg_ikey_id (rg_ikey *k, const char *id, size_t n) {
  uint8_t *p = k->key + k->lplen;
  if (n <= RG_ID_INLINE) {
    memcpy(p, id, n);
    k->len = k->lplen + n;
  }
  else {
    memcpy(p, id, RG_ID_CUT);
    p[RG_ID_CUT] = 0xFF;
    rg_put_u64(p + RG_ID_CUT + 1, rg_hash(id, n));
    k->len = k->lplen + RG_ID_CUT + 9;
    k->lossy = 1;
  }
}

uint64_t rg_ikey_digest (const uint8_t *key, size_t len) {
  return rg_hash(key, len);
}
/* }===================================================================== */


size_t rg_meta_key (uint8_t *out, int tag, uint32_t cid, const char *name,
                    size_t n) {
  out[0] = (uint8_t)tag;
  rg_put_u32(out + 1, cid);
  if (n) memcpy(out + 5, name, n);
  return 5 + n;
}
