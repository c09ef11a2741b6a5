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
#include "store/kv.h"

/* The tables (rg_tables, layout.c, names each; kv.h says how to declare
** one). */
enum { RG_DB_META, RG_DB_ITEMS, RG_DB_INDEX, RG_DB_UNIQUE, RG_DB_TTL,
       RG_DB_FEED, RG_DB_LATEST, RG_DB_PARTS, RG_DB_REFS,
       RG_DB_VECTOR,                 /* vector indexes (vindex.c) */
       RG_DB_FTEXT,                  /* full-text indexes (ftindex.c) */
       RG_NDB };

/* The format this build writes and reads (format 1 databases are read
** only by the upgrade, upgrade.c). */
#define RG_FORMAT_VERSION 2

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
/* The first hash of physical partition `range` (rg_range_of's inverse:
** a partition's hashes are one run, from its start to the next one's; the
** start of `nparts`, past the last, wraps to 0). */
uint64_t rg_range_start (int range, int nparts);
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
/* The term of a shape entry (index.c): the shape's 64-bit hash (8 bytes). */
#define RG_SHAPE_TERM 8
void rg_term_shape (uint8_t *out, uint64_t shape);

/*
** The keys of the other tables (layout.c writes each format down).  Each
** builder writes into `out` and returns the length.
*/
/* A container's id: the prefix of every key of its items, unique, TTL,
** feed, latest-version and partition entries (4 bytes). */
size_t rg_key_cid (uint8_t *out, uint32_t cid);
/* The refs table's key of an item seq (4 bytes). */
#define RG_REF_KEY 4
size_t rg_key_ref (uint8_t *out, uint32_t seq);
/* A TTL entry's key: cid | expiry | the item key's digest (20 bytes; with
** expiry 0 and digest 0, the first key of the container's entries). */
#define RG_TTL_KEY 20
size_t rg_key_ttl (uint8_t *out, uint32_t cid, int64_t expiry,
                   uint64_t digest);
/* A change record's key: cid | range | lsn | ordinal (18 bytes; the first
** `n` of them place a read). */
#define RG_FEED_KEY 18
size_t rg_key_feed (uint8_t *out, uint32_t cid, int range, uint64_t lsn,
                    uint32_t ord);
/* A unique entry's key: the logical partition, the unique key's number,
** the 16-byte digest of its values (index.c computes it). */
size_t rg_key_unique (uint8_t *out, const uint8_t *lp, size_t lplen, int u,
                      const uint8_t digest[16]);
/* An index key from an index's prefix (its path id) and a term; with
** `with_hash`, followed by the top 32 bits of a partition hash, the first
** half of a reference: where the planner seeks in the flat entries of
** rg_ixcur (index.h).  0 when it would not fit `cap` bytes. */
size_t rg_key_index (uint8_t *out, size_t cap, const uint8_t *prefix,
                     size_t plen, const uint8_t *term, size_t tn,
                     int with_hash, uint64_t hash);
/* A vector index record's key (vindex.c): cid | the index's id | shard
** (the instance's prefix: 16 bytes, with type 0), then the record's type
** and, except for the header, a number (RG_VECTOR_KEY bytes). */
#define RG_VECTOR_KEY 21
enum { RG_VK_HEADER = 'h', RG_VK_VECTORS = 'x', RG_VK_CODES = 'c',
       RG_VK_ADJ = 'a', RG_VK_FREE = 'f', RG_VK_SLOT = 's' };
size_t rg_key_vector (uint8_t *out, uint32_t cid, uint32_t ixid,
                      uint64_t shard, int type, uint32_t n);
/* A full-text index record's key (ftindex.c): cid | the index's id (the
** instance's prefix, RG_FTEXT_PREFIX bytes), then the record's kind, one
** of RG_FK_* (RG_FTEXT_HEAD bytes; none when kind is 0); ftindex.c appends
** the rest.  Where partitions are kept apart (a remote database) an
** instance is one bucket's: its keys carry the bucket (u16) after the
** prefix, which says their place (`bucket`, -1 for none; ftindex.h's seam
** puts it into the keys the index makes). */
#define RG_FTEXT_PREFIX 8
#define RG_FTEXT_HEAD   9
enum { RG_FK_BUILT = 'B', RG_FK_POSTINGS = 'P', RG_FK_LENGTHS = 'N',
       RG_FK_STATS = 'S' };
size_t rg_key_ftext (uint8_t *out, uint32_t cid, uint32_t ixid, int bucket,
                     int kind);
/* Writes the first half of a reference (the top 32 bits of `hash`). */
void   rg_ref_hash_put (uint8_t *out, uint64_t hash);

/*
** Where a key lives in a store that keeps each container's physical
** partitions apart (remote.h): what the key tells of its place.
**   RG_KP_GLOBAL  the database's own (meta); `first` for what is written
**                 once and read by the rest (path ids, shapes), which a
**                 store applies before what depends on it
**   RG_KP_HASH    the partition of hash `hash` in container `cid` (items,
**                 unique, parts)
**   RG_KP_RANGE   feed range `range` of container `cid` (feed, latest; a
**                 vector index record, whose instance is that range's:
**                 RG_VSHARD_RANGE; a full-text record of a bucket's
**                 instance)
**   RG_KP_CID     some partition of container `cid`: the key does not say
**                 which (a TTL entry; a container's statistics, kept per
**                 partition and summed)
**   RG_KP_NONE    the key names no container (a refs entry, an index
**                 entry): its place is the reader's context; an index
**                 entry's duplicate, when given, holds the partition hash's
**                 top 32 bits (`hash`, with `has_hash`)
** 0, or -1 for a key this layout does not make.
*/
enum { RG_KP_GLOBAL, RG_KP_HASH, RG_KP_RANGE, RG_KP_CID, RG_KP_NONE };
typedef struct rg_keyplace {
  int kind;
  uint32_t cid;
  uint64_t hash;
  int range, has_hash, stats, first;
} rg_keyplace;
int rg_key_place (int tb, const uint8_t *k, size_t kn, const uint8_t *dup,
                  size_t dn, rg_keyplace *out);
/* Where partitions are kept apart, a vector index has one instance per
** physical partition and shard: the shard (rg_key_vector) carries the
** range in its top 16 bits, the shard key's hash in the low 48. */
#define RG_VSHARD_LOW 0x0000FFFFFFFFFFFFull
#define RG_VSHARD_RANGE(shard) ((int)((shard) >> 48))
#define RG_VSHARD_AT(shard, range) \
  (((uint64_t)(range) << 48) | ((shard) & RG_VSHARD_LOW))

/* Meta keys (see layout.c for the full list). */
#define RG_META_VERSION "\x01version"
#define RG_META_SECRET  "\x01secret"
#define RG_META_LSN     "\x01lsn"
#define RG_META_CID     "\x01cid"
#define RG_META_SCRIPTS "\x01scripts"          /* u64: the scripts' version */
#define RG_META_SEQ     "\x01seq"              /* u32: the last item seq */
#define RG_META_PATHID  "\x01pathid"           /* u32: the last path id */
#define RG_META_THROUGHPUT "\x01throughput"    /* u64 version, setting JSON */
/* u64: the last batch the write queue committed, under this key followed
** by the queue's layout ("\x01qbatch2", store/queue.c; the bare key was
** layout 1's) */
#define RG_META_QBATCH  "\x01qbatch"
/* A remote database's only (remote.h): a container's catalog epoch, kept
** by each of its buckets (RG_META_EPOCH, the place's own) and by the
** global place beside its spec (RG_MK_EPOCH | cid). */
#define RG_META_EPOCH   "\001epoch"
enum { RG_MK_NAME = 'n', RG_MK_SPEC = 'c', RG_MK_STATS = 'k',
       RG_MK_PROC = 's', RG_MK_TRIG = 't', RG_MK_LEASE = 'l',
       RG_MK_DEAD = 'd', RG_MK_DROP = 'x', RG_MK_PATH = 'p',
       RG_MK_SHAPE = 'h', RG_MK_UDF = 'u', RG_MK_SINCE = 'v',
       RG_MK_EPOCH = 'e' };
/* Builds a meta key: tag, container id, then `n` bytes of name. */
size_t rg_meta_key (uint8_t *out, int tag, uint32_t cid, const char *name,
                    size_t n);
/* The path dictionary's key of a path text (a long one cut and followed
** by a digest): at most RG_PATH_KEY_MAX bytes. */
#define RG_PATH_KEY_MAX (5 + 490 + 9)
size_t rg_meta_path_key (uint8_t *out, uint32_t cid, const char *text,
                         size_t n);
/* The key of a shape's record. */
size_t rg_meta_shape_key (uint8_t *out, uint32_t cid, uint64_t shape);
/* A processor's keys (lease.c): tag RG_MK_LEASE or RG_MK_DEAD, cid, name,
** 0x00 (the prefix of its keys); then a range's lease (u16 range), an
** instance's heartbeat (FF FF instance), or a dead letter (u64 seq). */
size_t rg_meta_proc_key (uint8_t *out, int tag, uint32_t cid,
                         const char *name, size_t n);
size_t rg_meta_lease_key (uint8_t *out, size_t prefix, int range);
size_t rg_meta_inst_key (uint8_t *out, size_t prefix, const char *inst,
                         size_t n);
size_t rg_meta_dead_key (uint8_t *out, size_t prefix, uint64_t seq);

/*
** The stored item value: a header, then the JSON text.  The header is
** u8 flags | u32 seq | u64 expiry (seconds) when flags & RG_IH_EXPIRY.
** `seq` names the item in the refs table, index entries and the latest
** table (its reference, below) for as long as it lives.
*/
#define RG_IH_EXPIRY 1
#define RG_IHDR_MAX  13
#define RG_IHDR_MIN  5       /* without an expiry */
typedef struct rg_ihdr {
  uint32_t seq;
  int64_t expiry;            /* 0: never */
} rg_ihdr;
/* Writes a header into out (RG_IHDR_MAX bytes); returns its length. */
size_t rg_ihdr_put (uint8_t *out, uint32_t seq, int64_t expiry);
/* Splits a stored item value: 0, or -1 when it is corrupt. */
int    rg_ihdr_get (const void *v, size_t n, rg_ihdr *h, const char **json,
                    size_t *jn);

/*
** An item's reference: the top 32 bits of its partition hash, then its
** seq (u64 hash32 << 32 | seq, stored big-endian in 8 bytes).  Index
** entries and latest-version entries hold it; the refs table maps the seq
** back to the item key.  Sorting references sorts by physical partition.
*/
#define RG_REF_SIZE 8
/* Writes the reference of (hash, seq) (RG_REF_SIZE bytes). */
void     rg_ref_put (uint8_t *out, uint64_t hash, uint32_t seq);
#define rg_ref_seq(r) ((uint32_t)((r) & 0xFFFFFFFFu))

/* A latest-version entry (write.c, feed.c): its key (6 bytes, returned)
** and duplicate (12 bytes, when dup is given). */
#define RG_LATEST_DUP 12
size_t rg_latest_entry (uint8_t *key, uint8_t *dup, uint32_t cid, int range,
                        uint64_t lsn, uint32_t seq);

/* Path ids (index.c): a prefix-free encoding of 1 to 5 bytes. */
#define RG_PATHID_MAX 5
size_t rg_pathid_put (uint8_t *out, uint32_t id);
/* Length of the path id at p (n bytes), 0 when malformed; *id its value. */
size_t rg_pathid_get (const uint8_t *p, size_t n, uint32_t *id);

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
