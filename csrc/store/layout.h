/*
** layout.h: the storage layout, the tables and the keys of a database.
**
** store/layout.c writes every key format down, with the encoding of terms
** (order-preserving, prefix-free) and of partition keys.  Invariants:
** integers in keys are big-endian, so LMDB's memcmp order is numeric
** order; one logical partition is one contiguous key range inside its
** physical partition's hash range; every key fits LMDB's 511 bytes.
*/

#ifndef rg_layout_h
#define rg_layout_h

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/support.h"
#include "store/container.h"

enum { RG_DB_META, RG_DB_ITEMS, RG_DB_INDEX, RG_DB_UNIQUE, RG_DB_TTL,
       RG_DB_FEED, RG_DB_LATEST, RG_DB_PARTS, RG_NDB };

#define RG_FORMAT_VERSION 1

/* Where an item lives: its key in the items table and the logical
** partition prefix of that key. */
typedef struct rg_ikey {
  uint64_t hash;             /* hash of the partition key value */
  int range;                 /* physical partition, 0 .. nparts-1 */
  size_t lplen;              /* key[0 .. lplen) is the logical partition */
  size_t len;
  int lossy;                 /* a long string or id was cut to a digest */
  uint8_t key[RG_MAX_KEY];
} rg_ikey;

/* Builds the logical-partition prefix from the partition key values
** (one per level).  NULL (undefined) or an empty object at every level is
** the none partition key (items lacking their key); at some levels only,
** 400. */
int  rg_ikey_partition (const rg_cspec *s, const cJSON *const *pkv,
                        rg_ikey *k, rg_err *e);
/* The key range of the logical partitions sharing the first `levels`
** values of a hierarchical key (revision 2 containers; fewer levels than
** the key has): the items' key prefix (key, *klen bytes), and the hash
** bits they share (hash & mask).  1, or 0 when no such range exists. */
int  rg_ikey_prefix (const rg_cspec *s, const cJSON *const *pkv, int levels,
                     uint8_t *key, size_t *klen, uint64_t *hash,
                     uint64_t *mask);
/* Appends the id: `k` becomes the item's full key. */
void rg_ikey_id (rg_ikey *k, const char *id, size_t n);
/* Physical partition of a hash. */
int  rg_range_of (uint64_t hash, int nparts);
/* 64-bit digest of an item key (names the item in index, TTL and latest
** keys, where the full key would not fit). */
uint64_t rg_ikey_digest (const uint8_t *key, size_t len);

/* Appends the order-preserving encoding of a scalar (a term); strings are
** cut after `limit` encoded bytes (0: never).  rg_term cuts at RG_TERM_MAX. */
#define RG_TERM_MAX 200
void rg_term_cut (rg_buf *b, const cJSON *v, int desc, size_t limit);
void rg_term (rg_buf *b, const cJSON *v, int desc);
/* The exact term (numbers keep 64-bit integers apart), never cut: where a
** term identifies (partition keys, unique values). */
void rg_term_exact (rg_buf *b, const cJSON *v);
/* Appends the encoding of a scalar bounded in length (long strings are cut
** and followed by a digest): used where values identify, not order. */
int  rg_term_bounded (rg_buf *b, const cJSON *v);   /* 1 when cut */

/* Meta keys (see layout.c for the full list). */
#define RG_META_VERSION "\x01version"
#define RG_META_SECRET  "\x01secret"
#define RG_META_LSN     "\x01lsn"
#define RG_META_CID     "\x01cid"
#define RG_META_SCRIPTS "\x01scripts"          /* u64: the scripts' version */
#define RG_META_THROUGHPUT "\x01throughput"    /* u64 version, setting JSON */
enum { RG_MK_NAME = 'n', RG_MK_SPEC = 'c', RG_MK_STATS = 'k',
       RG_MK_PROC = 's', RG_MK_TRIG = 't', RG_MK_LEASE = 'l',
       RG_MK_DEAD = 'd', RG_MK_DROP = 'x', RG_MK_SHAPE = 'h',
       RG_MK_UDF = 'u' };
/* Builds a meta key: tag, container id, then `n` bytes of name. */
size_t rg_meta_key (uint8_t *out, int tag, uint32_t cid, const char *name,
                    size_t n);

/* The stored item value: an 8-byte header (expiry seconds, 0: never)
** followed by the JSON text. */
#define RG_VHDR 8

/* Operations, as calls name them and change records store them. */
enum { RG_OP_CREATE = 1, RG_OP_REPLACE, RG_OP_UPSERT, RG_OP_DELETE,
       RG_OP_PATCH, RG_OP_READ };

/* Feed modes, and a place in one feed range: the key to read next (lsn,
** then the ordinal in all_versions mode or the item digest in latest
** mode; see feed.c). */
enum { RG_FEED_LATEST = 1, RG_FEED_ALL = 2 };
typedef struct rg_fpos {
  uint64_t lsn, sub;
} rg_fpos;

#endif
