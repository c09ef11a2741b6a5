/*
** layout.c: the storage layout, format 2.  Every key format of the database
** is written down here, once, and built here: item keys, partition
** prefixes, terms, item headers, references, path ids, the keys of the
** refs, TTL, feed, latest, unique and index tables, and meta keys.  The
** other files read and write these keys through the seam (kv.h), and the
** records stored under them are the owning file's (named below).
**
** A database is a set of named tables (rg_tables, below); locally one LMDB
** environment (a directory holding data.mdb and lock.mdb, local.c).  All
** integers in keys are big-endian, so that byte order (memcmp, kv.h) is
** numeric order.  `cid` is a container's
** 32-bit id (never reused), `lp` a logical partition's prefix (below),
** `seq` an item's 32-bit sequence number (below).
**
**   meta     catalog and bookkeeping:
**              "\1version"            -> u32 format version (RG_FORMAT_VERSION)
**              "\1secret"             -> 16 random bytes keying continuation
**                                        tokens to this database
**              "\1lsn"                -> u64 last change-feed sequence number
**              "\1cid"                -> u32 last container id handed out
**              "\1seq"                -> u32 last item seq handed out
**              "\1pathid"             -> u32 last path id handed out
**              "\1scripts"            -> u64 version of the scripts (scripts.c)
**              "\1qbatch2"            -> u64 the last batch the write queue
**                                        of layout 2 committed (queue.c;
**                                        "\1qbatch": layout 1's)
**              "\1throughput"         -> u64 version of the throughput
**                                        settings, then the database's
**                                        setting as JSON text (throughput.c)
**              'n' name               -> u32 cid (container names)
**              'c' cid                -> the container's spec, JSON text
**              'k' cid                -> u64 items, u64 bytes (container stats)
**              'p' cid path-text      -> path id (index.c)
**              's' cid name           -> stored procedure (u64 version, source)
**              't' cid name           -> trigger (u64 version, type, operation,
**                                        automatic, source; scripts.c)
**              'l' cid name 0 u16:range -> processor lease (lease.c)
**              'l' cid name 0 FFFF inst -> live processor instance
**              'd' cid name 0 u64:seq -> processor dead letter
**              'x' cid                -> a deletion under way (catalog.c)
**              'h' cid u64:shape      -> an item shape's path ids, u32 each
**                                        (index.c)
**              'u' cid name           -> user-defined function (u64 version,
**                                        source; scripts.c)
**              'v' cid                -> u64 lsn: the all-versions history
**                                        starts there (a container replace
**                                        turned it on; catalog.c)
**   items    lp id                    -> header + JSON text (below)
**   refs     u32:seq                  -> item key (lp id)
**   index    path-id term             => u32:hash32 u32:seq   (sorted duplicates
**                                        of 8 bytes; index.c)
**            shape-path-id u64:shape  => u32:hash32 u32:seq   (shapes; index.c)
**   unique   lp u8:unique-key# u128:values-digest   -> item key (index.c)
**   ttl      cid u64:expiry u64:digest              -> item key (write.c)
**   feed     cid u16:range u64:lsn u32:ordinal      -> change record (feed.c;
**                                        containers that keep all versions)
**   latest   cid u16:range        => u64:lsn u32:seq  (sorted duplicates of
**                                        12 bytes; write.c, feed.c)
**   parts    lp                                     -> u64 items, u64 bytes
**   vector   cid u32:index-id u64:shard 'h'         -> an index's header
**            cid u32:index-id u64:shard u8:type u32:n -> its blocks, lists
**                                        and slots (vindex.c: types 'x'
**                                        vectors, 'c' codes, 'a' neighbours,
**                                        'f' free slots, 's' an item's slot)
**   fulltext cid u32:index-id 'B'                   -> (empty) the index is built
**            cid u32:index-id 'S'                   -> u64 documents, u64 terms
**            cid u32:index-id 'N' u32:doc>>7        -> 128 x u32 length + 1 (0: none)
**            cid u32:index-id 'P' term 00 u32:doc   -> a block of postings (the
**                                        term's header in its last)
**                                        (ftindex.c/h: index-id is the hash
**                                        of the path and its language; doc
**                                        is the item's seq; a remote
**                                        database's keys have u16:bucket
**                                        after the index-id)
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
** Items.  The value is a header, u8 flags | u32 seq | u64 expiry (only
** when flags & 1; seconds, absolute), then the JSON text with the system
** properties (_etag, _ts, _lsn) last.  The seq is given from "\1seq" when
** the item is created and kept until it is deleted; the refs table maps it
** back to the item's key.  An item's reference is (top 32 bits of its
** partition hash, seq): 8 bytes that name it in index entries, sorted
** by physical partition.  Seqs wrap after 2^32 creates; one still in use
** is skipped.
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
** Index entries.  Each (container, normalized path) and each composite
** index has a path id from the dictionary in meta (index.c), encoded in 1
** to 5 bytes, prefix-free and in numeric order: < 0xC0 one byte; 0xC0-0xDF
** two; 0xE0-0xEF three; 0xF0 then the u32.  An entry's key is the path id
** and the term (a composite's: its columns' terms, descending ones
** complemented); each item holding that term is one 8-byte duplicate, its
** reference.  Path ids are prefix-free and terms are, so no key of a path
** is a prefix of another: the planner sees each entry as the flat bytes
** key | reference, in the table's order (rg_ixcur).
**
** The change feed (feed.c) and the latest-version table give every write
** transaction one sequence number (lsn), taken from "\1lsn" when the
** transaction first writes; changes within one transaction are told apart
** by an ordinal.  The latest table holds one entry per live item: under
** its range's key, the duplicate (lsn of its last write, seq), so that
** reading it from an lsn onwards yields each changed item once, at its
** latest version.  Seqs given in one transaction grow, so a load's
** duplicates are appended.
**
** Format 1 (the release before) kept the index as cid | u64 path hash |
** term | u64 lp-hash | u64 item digest -> item key, the latest table as
** cid | range | lsn | digest -> item key, an 8-byte expiry as the item
** header, and every container's all-versions feed; upgrade.c turns a
** format 1 database into this one.
*/

#include <string.h>

#include "base/json.h"
#include "store/layout.h"

/* The tables, in the order of the enum of layout.h (kv.h says how a
** table is declared). */
const rg_table rg_tables[RG_NDB] = {
  { "meta", 0, 0 }, { "items", 0, 0 }, { "index", RG_REF_SIZE, 0 },
  { "unique", 0, 0 }, { "ttl", 0, 0 }, { "feed", 0, 0 },
  { "latest", RG_LATEST_DUP, 0 }, { "parts", 0, 0 }, { "refs", 0, 0 },
  { "vector", 0, 1 }, { "fulltext", 0, 1 }
};

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

void rg_term_shape (uint8_t *out, uint64_t shape) {
  rg_put_u64(out, shape);
}

/* Appends the encoding of a scalar bounded in length (long strings are cut
** and followed by a digest): used where values identify, not order; 1
** when cut. */
static int term_bounded (rg_buf *b, const cJSON *v) {
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
  rg_assert(nparts > 0 && nparts <= RG_MAX_PARTITIONS);
  return (int)(((hash >> 32) * (uint64_t)nparts) >> 32);
}

uint64_t rg_range_start (int range, int nparts) {
  uint64_t b = (uint64_t)range, np = (uint64_t)nparts;
  rg_assert(nparts > 0 && range >= 0 && range <= nparts);
  return ((b << 32) + np - 1) / np << 32;
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
    lossy |= term_bounded(&tuple, v);
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
  /* room for the longest id after the partition (layout.h: every key
     fits LMDB's 511 bytes) */
  rg_assert(12 + tuple.n + RG_ID_CUT + 9 <= RG_MAX_KEY);
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
  rg_assert(k->len <= RG_MAX_KEY);
}

uint64_t rg_ikey_digest (const uint8_t *key, size_t len) {
  return rg_hash(key, len);
}
/* }===================================================================== */


/*
** {=====================================================================
** The keys of the other tables
** ======================================================================
*/
#define PTEXT_INLINE 490          /* longer path texts: cut, then a digest */

size_t rg_key_cid (uint8_t *out, uint32_t cid) {
  rg_put_u32(out, cid);
  return 4;
}

size_t rg_key_ref (uint8_t *out, uint32_t seq) {
  rg_put_u32(out, seq);
  return RG_REF_KEY;
}

size_t rg_key_ttl (uint8_t *out, uint32_t cid, int64_t expiry,
                   uint64_t digest) {
  rg_put_u32(out, cid);
  rg_put_u64(out + 4, (uint64_t)expiry);
  rg_put_u64(out + 12, digest);
  return RG_TTL_KEY;
}

size_t rg_key_feed (uint8_t *out, uint32_t cid, int range, uint64_t lsn,
                    uint32_t ord) {
  rg_assert(range >= 0 && range < RG_MAX_PARTITIONS);
  rg_put_u32(out, cid);
  rg_put_u16(out + 4, (uint32_t)range);
  rg_put_u64(out + 6, lsn);
  rg_put_u32(out + 14, ord);
  return RG_FEED_KEY;
}

size_t rg_key_unique (uint8_t *out, const uint8_t *lp, size_t lplen, int u,
                      const uint8_t digest[16]) {
  rg_assert(lplen + 17 <= RG_MAX_KEY && u >= 0 && u < 256);
  memmove(out, lp, lplen);
  out[lplen] = (uint8_t)u;
  memcpy(out + lplen + 1, digest, 16);
  return lplen + 17;
}

size_t rg_key_index (uint8_t *out, size_t cap, const uint8_t *prefix,
                     size_t plen, const uint8_t *term, size_t tn,
                     int with_hash, uint64_t hash) {
  size_t n = plen + tn + (with_hash ? 4 : 0);
  if (n > cap) return 0;
  memmove(out, prefix, plen);
  if (tn) memmove(out + plen, term, tn);
  if (with_hash) rg_ref_hash_put(out + plen + tn, hash);
  return n;
}

size_t rg_key_vector (uint8_t *out, uint32_t cid, uint32_t ixid,
                      uint64_t shard, int type, uint32_t n) {
  rg_put_u32(out, cid);
  rg_put_u32(out + 4, ixid);
  rg_put_u64(out + 8, shard);
  if (type == 0) return 16;
  out[16] = (uint8_t)type;
  if (type == RG_VK_HEADER) return 17;
  rg_put_u32(out + 17, n);
  return RG_VECTOR_KEY;
}

size_t rg_key_ftext (uint8_t *out, uint32_t cid, uint32_t ixid, int bucket,
                     int kind) {
  size_t n = RG_FTEXT_PREFIX;
  rg_put_u32(out, cid);
  rg_put_u32(out + 4, ixid);
  if (bucket >= 0) { rg_put_u16(out + n, (uint32_t)bucket); n += 2; }
  if (kind) out[n++] = (uint8_t)kind;
  return n;
}

void rg_ref_hash_put (uint8_t *out, uint64_t hash) {
  rg_put_u32(out, (uint32_t)(hash >> 32));
}

int rg_key_place (int tb, const uint8_t *k, size_t kn, const uint8_t *dup,
                  size_t dn, rg_keyplace *out) {
  memset(out, 0, sizeof(*out));
  switch (tb) {
    case RG_DB_META:
      out->kind = RG_KP_GLOBAL;
      if (kn >= 5 && k[0] == RG_MK_STATS) {       /* per partition, summed */
        out->kind = RG_KP_CID;
        out->cid = rg_get_u32(k + 1);
        out->stats = 1;
      }
      else if ((kn == sizeof(RG_META_LSN) - 1 &&
                memcmp(k, RG_META_LSN, kn) == 0) ||
               (kn == sizeof(RG_META_EPOCH) - 1 &&
                memcmp(k, RG_META_EPOCH, kn) == 0))
        out->kind = RG_KP_NONE;                   /* each place's own */
      else if ((kn >= 1 && (k[0] == RG_MK_PATH || k[0] == RG_MK_SHAPE)) ||
               (kn == sizeof(RG_META_PATHID) - 1 &&
                memcmp(k, RG_META_PATHID, kn) == 0))
        out->first = 1;
      return 0;
    case RG_DB_ITEMS: case RG_DB_UNIQUE: case RG_DB_PARTS:
      if (kn < 12) return -1;
      out->kind = RG_KP_HASH;
      out->cid = rg_get_u32(k);
      out->hash = rg_get_u64(k + 4);
      return 0;
    case RG_DB_FEED: case RG_DB_LATEST:
      if (kn < 6) return -1;
      out->kind = RG_KP_RANGE;
      out->cid = rg_get_u32(k);
      out->range = (int)rg_get_u16(k + 4);
      return 0;
    case RG_DB_TTL:
      if (kn < 4) return -1;
      out->kind = RG_KP_CID;
      out->cid = rg_get_u32(k);
      return 0;
    case RG_DB_INDEX:
      out->kind = RG_KP_NONE;
      if (dup && dn >= 4) {
        out->has_hash = 1;
        out->hash = (uint64_t)rg_get_u32(dup) << 32;
      }
      return 0;
    case RG_DB_REFS:
      out->kind = RG_KP_NONE;
      return 0;
    case RG_DB_VECTOR:               /* a record of one instance; a shorter */
      if (kn <= 16) return -1;       /* key spans every partition */
      out->kind = RG_KP_RANGE;
      out->cid = rg_get_u32(k);
      out->range = RG_VSHARD_RANGE(rg_get_u64(k + 8));
      return 0;
    case RG_DB_FTEXT:                /* a record of one bucket's instance */
      if (kn < RG_FTEXT_PREFIX + 2) return -1;   /* shorter: every bucket */
      out->kind = RG_KP_RANGE;
      out->cid = rg_get_u32(k);
      out->range = (int)rg_get_u16(k + RG_FTEXT_PREFIX);
      return 0;
    default:
      return -1;
  }
}

size_t rg_meta_key (uint8_t *out, int tag, uint32_t cid, const char *name,
                    size_t n) {
  out[0] = (uint8_t)tag;
  rg_put_u32(out + 1, cid);
  if (n) memcpy(out + 5, name, n);
  return 5 + n;
}

size_t rg_meta_path_key (uint8_t *out, uint32_t cid, const char *text,
                         size_t n) {
  size_t k = rg_meta_key(out, RG_MK_PATH, cid, NULL, 0);
  if (n <= PTEXT_INLINE + 9) {
    memcpy(out + k, text, n);
    return k + n;
  }
  memcpy(out + k, text, PTEXT_INLINE);
  out[k + PTEXT_INLINE] = 0xFF;
  rg_put_u64(out + k + PTEXT_INLINE + 1, rg_hash(text, n));
  return k + PTEXT_INLINE + 9;
}

size_t rg_meta_shape_key (uint8_t *out, uint32_t cid, uint64_t shape) {
  size_t n = rg_meta_key(out, RG_MK_SHAPE, cid, NULL, 0);
  rg_put_u64(out + n, shape);
  return n + 8;
}

size_t rg_meta_proc_key (uint8_t *out, int tag, uint32_t cid,
                         const char *name, size_t n) {
  size_t k = rg_meta_key(out, tag, cid, name, n);
  out[k++] = 0;
  return k;
}

size_t rg_meta_lease_key (uint8_t *out, size_t prefix, int range) {
  rg_put_u16(out + prefix, (uint32_t)range);
  return prefix + 2;
}

size_t rg_meta_inst_key (uint8_t *out, size_t prefix, const char *inst,
                         size_t n) {
  out[prefix] = out[prefix + 1] = 0xFF;
  memcpy(out + prefix + 2, inst, n);
  return prefix + 2 + n;
}

size_t rg_meta_dead_key (uint8_t *out, size_t prefix, uint64_t seq) {
  rg_put_u64(out + prefix, seq);
  return prefix + 8;
}
/* }===================================================================== */


/*
** {=====================================================================
** Item headers, references and path ids
** ======================================================================
*/
size_t rg_ihdr_put (uint8_t *out, uint32_t seq, int64_t expiry) {
  out[0] = expiry ? RG_IH_EXPIRY : 0;
  rg_put_u32(out + 1, seq);
  if (!expiry) return 5;
  rg_put_u64(out + 5, (uint64_t)expiry);
  return 13;
}

int rg_ihdr_get (const void *v, size_t n, rg_ihdr *h, const char **json,
                 size_t *jn) {
  const uint8_t *p = (const uint8_t *)v;
  size_t hl;
  if (n < 5 || (p[0] & ~RG_IH_EXPIRY) != 0) return -1;
  hl = (p[0] & RG_IH_EXPIRY) ? 13 : 5;
  if (n < hl) return -1;
  h->seq = rg_get_u32(p + 1);
  h->expiry = hl == 13 ? (int64_t)rg_get_u64(p + 5) : 0;
  if (json) *json = (const char *)p + hl;
  if (jn) *jn = n - hl;
  return 0;
}

static uint64_t ref_make (uint64_t hash, uint32_t seq) {
  return (hash & 0xFFFFFFFF00000000ull) | seq;
}

void rg_ref_put (uint8_t *out, uint64_t hash, uint32_t seq) {
  rg_assert(seq != 0);               /* 0 names no item */
  rg_put_u64(out, ref_make(hash, seq));
}

size_t rg_pathid_put (uint8_t *out, uint32_t id) {
  uint32_t v;
  if (id < 0xC0) { out[0] = (uint8_t)id; return 1; }
  v = id - 0xC0;
  if (v < (1u << 13)) {
    out[0] = (uint8_t)(0xC0 | (v >> 8));
    out[1] = (uint8_t)v;
    return 2;
  }
  v -= 1u << 13;
  if (v < (1u << 20)) {
    out[0] = (uint8_t)(0xE0 | (v >> 16));
    out[1] = (uint8_t)(v >> 8);
    out[2] = (uint8_t)v;
    return 3;
  }
  out[0] = 0xF0;
  rg_put_u32(out + 1, id);
  return 5;
}

size_t rg_pathid_get (const uint8_t *p, size_t n, uint32_t *id) {
  if (n < 1) return 0;
  if (p[0] < 0xC0) { *id = p[0]; return 1; }
  if (p[0] < 0xE0) {
    if (n < 2) return 0;
    *id = 0xC0 + (((uint32_t)(p[0] & 0x1F) << 8) | p[1]);
    return 2;
  }
  if (p[0] < 0xF0) {
    if (n < 3) return 0;
    *id = 0xC0 + (1u << 13) + (((uint32_t)(p[0] & 0x0F) << 16) |
                               ((uint32_t)p[1] << 8) | p[2]);
    return 3;
  }
  if (p[0] != 0xF0 || n < 5) return 0;
  *id = rg_get_u32(p + 1);
  return 5;
}
/* }===================================================================== */

/* A latest-version entry: key cid | u16 range, duplicate lsn | seq.  The
** seqs of one transaction's writes grow as they are given, so that the
** duplicates of a load come in order (appended). */
size_t rg_latest_entry (uint8_t *key, uint8_t *dup, uint32_t cid, int range,
                        uint64_t lsn, uint32_t seq) {
  rg_assert(range >= 0 && range < RG_MAX_PARTITIONS);
  rg_put_u32(key, cid);
  rg_put_u16(key + 4, (uint32_t)range);
  if (dup) {
    rg_put_u64(dup, lsn);
    rg_put_u32(dup + 8, seq);
  }
  return 6;
}
