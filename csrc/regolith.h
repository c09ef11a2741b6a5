/*
** regolith.h: the private header of regolith's C core.
**
** The core is a handful of concepts, one file each:
**   support.c    buffers, errors, hashing, path parsing (the small shared tools)
**   json.c       the JSON bridge: Lua values <-> cJSON trees <-> JSON text
**   layout.c     the storage layout: every key format, written down once
**   env.c        LMDB environments, transactions, map growth, scopes
**   container.c  container specs: options, the catalog, the indexing policy
**   index.c      index and unique-key maintenance (terms of a document)
**   write.c      the one write path every mutation goes through
**   patch.c      the patch engine (partial updates of a cJSON tree)
**   charge.c     the request-charge cost model
**   feed.c       the change feed: records, reads, positions, retention
**   processor.c  processors' leases, checkpoints, dead letters
**   script.c     the procedure runner: procedures and triggers
**   sandbox.c    the Lua state scripts run in, its limits (pattern.c,
**                and utf8lib.c for LuaJIT, which has no utf8 library)
**   lua_db.c     the Lua binding of a database handle (and luaopen)
**   lua_container.c  the Lua binding of a container handle (item API)
**   lua_script.c the Lua binding of procedures and triggers
**
** Ownership rules used throughout: a function that returns a cJSON tree or
** a malloc'd block through an out-parameter hands it to the caller; a
** function taking a `const` pointer borrows it.  Functions that can fail
** return 0 on success or an HTTP-like status (400, 404, ...) and fill an
** rg_err with the message; they never raise Lua errors, except the few
** lua_* helpers that say so.
*/

#ifndef regolith_h
#define regolith_h

#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>
#include <cjson/cJSON.h>

#include "lua.h"
#include "lauxlib.h"


/*
** {=====================================================================
** Compatibility: the same source builds for Lua 5.4 and LuaJIT (5.1 API)
** ======================================================================
*/
#if LUA_VERSION_NUM < 502
#define RG_LUAJIT 1
#define rg_rawlen(L, i)          lua_objlen(L, i)
#define rg_newuserdata(L, sz)    lua_newuserdata(L, sz)
/* LuaJIT has no uservalues; a userdata's environment table serves */
#define rg_setuservalue(L, i)    lua_setfenv(L, i)
#define rg_getuservalue(L, i)    lua_getfenv(L, i)
#define rg_isinteger(L, i)       0
#define LUA_OK 0
#else
#define RG_LUAJIT 0
#define rg_rawlen(L, i)          lua_rawlen(L, i)
#define rg_newuserdata(L, sz)    lua_newuserdatauv(L, sz, 1)
#define rg_setuservalue(L, i)    lua_setiuservalue(L, i, 1)
#define rg_getuservalue(L, i)    lua_getiuservalue(L, i, 1)
#define rg_isinteger(L, i)       lua_isinteger(L, i)
#endif
/* }===================================================================== */


/*
** {=====================================================================
** Limits (SPEC section 7)
** ======================================================================
*/
#define RG_MAX_DEPTH       128            /* JSON nesting */
#define RG_MAX_ITEM        (2u << 20)     /* stored item text, bytes: 413 */
#define RG_MAX_ID          1023           /* id bytes: 400 */
#define RG_MAX_NAME        255            /* container/procedure/trigger names */
#define RG_MAX_PATCH_OPS   10
#define RG_MAX_BATCH_OPS   100
#define RG_MAX_PK_PATHS    3
#define RG_MAX_PARTITIONS  256
#define RG_MAX_PATH_SEGS   16             /* segments in a declared path */
#define RG_MAX_KEY         511            /* LMDB's compiled-in key limit */
#define RG_MAX_SQL         (512u << 10)
#define RG_MAX_TTL         2147483647     /* seconds (about 68 years) */
#define RG_DEFAULT_PARTITION_BYTES (20ull << 30)
/* }===================================================================== */


/*
** {=====================================================================
** support.c: errors, buffers, hashing, paths, names
** ======================================================================
*/

/* An expected failure: an HTTP-like status and a message. */
typedef struct rg_err {
  int status;
  char msg[512];
} rg_err;

/* Fills `e` and returns `status`, so that `return rg_fail(e, 400, ...)`. */
int rg_fail (rg_err *e, int status, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 3, 4)))
#endif
  ;

/* Turns an LMDB return code into a status (500, or 507 for a full disk). */
int rg_fail_mdb (rg_err *e, int rc, const char *what);

/*
** A growable byte buffer.  Allocation failure sets `oom` and turns later
** appends into no-ops, so a builder checks once at the end.
*/
typedef struct rg_buf {
  char *p;
  size_t n, cap;
  int oom;
} rg_buf;

void rg_buf_init (rg_buf *b);
void rg_buf_free (rg_buf *b);
int  rg_buf_reserve (rg_buf *b, size_t extra);   /* 0 ok, -1 oom */
void rg_buf_add (rg_buf *b, const void *p, size_t n);
void rg_buf_addc (rg_buf *b, int c);
void rg_buf_adds (rg_buf *b, const char *s);
void rg_buf_addf (rg_buf *b, const char *fmt, ...);
/* Appends s (n bytes of UTF-8, or of MUTF-8: C0 80 is NUL) as a JSON string. */
void rg_json_quote (rg_buf *b, const char *s, size_t n);

/* Big-endian fixed-width integers, the byte order of every key. */
void     rg_put_u16 (uint8_t *p, uint32_t v);
void     rg_put_u32 (uint8_t *p, uint32_t v);
void     rg_put_u64 (uint8_t *p, uint64_t v);
uint32_t rg_get_u16 (const uint8_t *p);
uint32_t rg_get_u32 (const uint8_t *p);
uint64_t rg_get_u64 (const uint8_t *p);

/* SipHash-2-4 with a 128-bit key. */
uint64_t rg_siphash (const uint8_t key[16], const void *p, size_t n);
/* The fixed-key hash used inside the storage format (stable forever). */
uint64_t rg_hash (const void *p, size_t n);

/* UTF-8: length of the valid sequence at s (0 if invalid); whole-string check. */
int rg_utf8_seq (const unsigned char *s, size_t n);
int rg_utf8_valid (const char *s, size_t n);
size_t rg_utf8_put (char *w, unsigned cp);      /* 1..4 bytes written */
/* The JSON escape at p (p[0] is the backslash, end the end of the text):
** its code point in *cp and its length (2, 6 or 12), or 0 and *why. */
size_t rg_unescape (const char *p, const char *end, unsigned *cp,
                    const char **why);

/* Seconds since the epoch (the clock of _ts and TTL). */
int64_t rg_now (void);

/*
** A declared document path ("/a/b", "/tags/[]/?", ...), split into
** segments.  The segments point into `mem`, one block owned by the path.
*/
typedef struct rg_path {
  int n;
  const char *seg[RG_MAX_PATH_SEGS];
  char *mem;
} rg_path;

/* Parses "/a/b" (JSON-pointer escapes ~0 ~1 allowed).  `wild` allows the
** index-pattern forms: a final "?" or "*" segment and "[]" segments. */
int  rg_path_parse (rg_path *p, const char *s, int wild, rg_err *e);
void rg_path_free (rg_path *p);
/* Follows a path (no wildcards) into a document; NULL when undefined. */
const cJSON *rg_path_get (const cJSON *doc, const rg_path *p);

/* Checks an id or a name: 1..max bytes, valid UTF-8, none of / \ ? # NUL. */
int rg_check_id (const char *s, size_t n, size_t max, const char *what,
                 rg_err *e);
/* }===================================================================== */


/*
** {=====================================================================
** json.c: the JSON bridge
** ======================================================================
** Inside cJSON trees strings are kept in modified UTF-8: a NUL character
** is the two bytes C0 80 (never valid in real UTF-8), so that strings
** holding NUL survive cJSON's C strings.  Integers beyond 2^53 keep their
** exact decimal text in the number node's `valuestring` (cJSON frees and
** duplicates it for any node type), so they print and come back exactly.
*/
#define RG_NULL_TAG      "regolith.null"   /* never used as data */

/* Converts the Lua value at `idx` into a new cJSON tree (validating: NaN,
** infinities, cycles, depth, non-string keys, mixed tables, invalid UTF-8,
** functions and userdata give 400).  May raise only on memory errors. */
int  rg_json_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e);
/* The same, refusing with 413 a tree that would take over `max` bytes (0:
** no bound), checked while it is built. */
int  rg_json_from_lua_max (lua_State *L, int idx, size_t max, cJSON **out,
                           rg_err *e);
/* Appends the compact JSON text of `v` to `b`. */
void rg_json_print (const cJSON *v, rg_buf *b);
/* Parses JSON text strictly into a new tree (400 on any fault). */
int  rg_json_parse (const char *s, size_t n, cJSON **out, rg_err *e);
/* Pushes the value of JSON text straight onto the Lua stack (0 or 400). */
int  rg_json_push_text (lua_State *L, const char *s, size_t n, rg_err *e);
/* The same for text this core wrote (structure checked, UTF-8 trusted). */
int  rg_json_push_stored (lua_State *L, const char *s, size_t n, rg_err *e);
/* Pushes a tree as a Lua value. */
void rg_json_push (lua_State *L, const cJSON *v);
/* Registers null, array, object and json.encode/decode in the table on
** top of the stack, and the marker metatables in the registry. */
void rg_json_open (lua_State *L);
/* Is the value at idx regolith.null? */
int  rg_json_isnull (lua_State *L, int idx);
void rg_json_pushnull (lua_State *L);

/* Number nodes: integral value as int64 (1) or not integral (0). */
int    rg_num_int (const cJSON *v, int64_t *out);
cJSON *rg_num_new_int (int64_t i);
/* A string node from raw bytes (which may hold NUL). */
cJSON *rg_str_new (const char *s, size_t n);
/* The raw bytes of a string node into `b` (C0 80 back to NUL). */
void   rg_str_bytes (const cJSON *v, rg_buf *b);
/* Byte-order comparison of two string nodes as raw bytes. */
int    rg_str_cmp (const char *a, const char *b);
/* Length in bytes of the raw string a MUTF-8 string stands for. */
size_t rg_str_rawlen (const char *s);
/* }===================================================================== */


/*
** {=====================================================================
** container.c: container specs
** ======================================================================
*/
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
  uint64_t id;       /* hash naming the index in index keys */
} rg_composite;

typedef struct rg_uniq {
  int n;
  rg_path path[8];
} rg_uniq;

/* A container's parsed, validated spec.  Immutable once built. */
typedef struct rg_cspec {
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
  int64_t retention;                /* all_versions retention; -1 forever */
  char *json;                       /* the stored form (JSON text) */
} rg_cspec;

/* Builds a spec from its JSON form (a stored spec, or one made from the
** options of create_container); 400 for what is invalid. */
int  rg_cspec_build (const cJSON *j, uint32_t cid, rg_cspec **out, rg_err *e);
void rg_cspec_free (rg_cspec *s);
/* Does the indexing policy index a scalar at this (normalized) path? */
int  rg_cspec_indexed (const rg_cspec *s, const char *const *seg, int n);
/* }===================================================================== */


/*
** {=====================================================================
** layout.c: keys
** ======================================================================
*/
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
** (one per level; NULL means undefined and gives 400). */
int  rg_ikey_partition (const rg_cspec *s, const cJSON *const *pkv,
                        rg_ikey *k, rg_err *e);
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
enum { RG_MK_NAME = 'n', RG_MK_SPEC = 'c', RG_MK_STATS = 'k',
       RG_MK_PROC = 's', RG_MK_TRIG = 't', RG_MK_LEASE = 'l',
       RG_MK_DEAD = 'd', RG_MK_DROP = 'x' };
/* Builds a meta key: tag, container id, then `n` bytes of name. */
size_t rg_meta_key (uint8_t *out, int tag, uint32_t cid, const char *name,
                    size_t n);

/* The stored item value: an 8-byte header (expiry seconds, 0: never)
** followed by the JSON text. */
#define RG_VHDR 8
/* }===================================================================== */


/*
** {=====================================================================
** env.c: environments, transactions and scopes
** ======================================================================
*/
typedef struct rg_scope rg_scope;

/* One LMDB environment per database path per process, shared by every
** handle that opens the path. */
typedef struct rg_env {
  MDB_env *mdb;
  MDB_dbi dbi[RG_NDB];
  char *path;
  unsigned long dev, ino;
  int refs;
  int readonly;
  size_t map_size;
  MDB_txn *rtxn;            /* cached read transaction (reset between calls) */
  int rtxn_live;
  rg_scope *scope;          /* the write scope running now, if any */
  int broken;               /* a remap failed (errno): unusable until reopened */
  uint8_t secret[16];       /* keys continuation tokens to this database */
  void *scripts;            /* the procedure runner's state (script.c) */
  struct rg_env *next;
} rg_env;

enum { RG_SYNC_FULL, RG_SYNC_LAZY, RG_SYNC_NONE };

typedef struct rg_open_opts {
  int sync;
  size_t map_size;
  int readonly;
} rg_open_opts;

int  rg_env_open (const char *path, const rg_open_opts *o, rg_env **out,
                  rg_err *e);
void rg_env_release (rg_env *env);

/* A transaction to read with: the running write scope's (a reader sees
** its own writes) or the cached read-only one.  Call rg_read_end after. */
int  rg_read_begin (rg_env *env, MDB_txn **txn, rg_err *e);
void rg_read_end (rg_env *env);

/* The work a scope (or a read) has done, from which charges are computed
** (charge.c).  Internal reads of the write path are not counted. */
typedef struct rg_work {
  uint64_t read_units;      /* point reads: KB units, at least 1 a read */
  uint64_t written;         /* items written or deleted */
  uint64_t write_bytes;
  uint64_t write_extra_kb;  /* KB of written items beyond their first */
  uint64_t terms;           /* index and unique entries put or deleted */
  uint64_t lookups;         /* index seeks */
  uint64_t partitions;      /* physical partitions contacted by queries */
  uint64_t loaded;          /* items loaded by queries */
  uint64_t loaded_bytes;
  uint64_t scripts;         /* procedure and trigger runs */
} rg_work;

/* A transaction scope: one LMDB write transaction and everything done in
** it.  A call, a batch, a procedure with its triggers, a transactional
** processor batch: each is one scope; nested calls join it. */
struct rg_scope {
  rg_env *env;
  MDB_txn *txn;
  lua_State *L;             /* the state the scope runs in (triggers) */
  uint64_t lsn;             /* 0 until the first write takes one */
  uint32_t ord;             /* next ordinal of a change within the lsn */
  int64_t now;              /* the clock of every write in the scope */
  rg_work work;
  int failed;               /* a storage error: the scope can only abort */
  int savepoints;           /* open savepoints (env.c) */
  rg_buf undo;              /* their undo log: what writes overwrote */
  int map_full;             /* set when LMDB ran out of map: grow, rerun */
  uint32_t purged[16];      /* containers whose expired items are gone */
  int npurged;
  /* partition binding (procedures, batches): NULL when unbound */
  const rg_cspec *bound;
  const uint8_t *bound_lp;
  size_t bound_lplen;
  const char *bound_msg;    /* the 400 message for another partition */
  void *script;             /* the running procedure/trigger, if any */
};

/* The body of a scope: returns 0 (commit) or a status (abort). */
typedef int (*rg_body) (rg_scope *s, void *ud, rg_err *e);

/* Runs `body` in a write scope on `env`.  When a scope is already running
** the body joins it; with `savepoint` set it then runs in a nested
** transaction so that its failure leaves the outer scope as it was.
** Grows the map and reruns the body when LMDB runs out of room.  Lua
** errors raised by the body abort the transaction and propagate. */
int rg_scope_run (lua_State *L, rg_env *env, int sync, int savepoint,
                  rg_body body, void *ud, rg_err *e);

/* Writes in a scope (every change goes through these): put a value;
** reserve `vn` bytes for one (NULL on failure); delete a key (absent is
** fine; *gone, when given, says whether it was there). */
int   rg_put (rg_scope *s, int db, const void *k, size_t kn, const void *v,
              size_t vn, rg_err *e);
void *rg_reserve (rg_scope *s, int db, const void *k, size_t kn, size_t vn,
                  rg_err *e);
int   rg_del (rg_scope *s, int db, const void *k, size_t kn, int *gone,
              rg_err *e);
/* Deletes the entry under a cursor of table `db`. */
int   rg_cursor_del (rg_scope *s, int db, MDB_cursor *cur, rg_err *e);
/* Deletes up to `max` keys starting with `prefix`; *count says how many. */
int   rg_del_prefix (rg_scope *s, int db, const void *prefix, size_t pn,
                     uint64_t max, uint64_t *count, rg_err *e);
/* Marks an LMDB failure inside a scope; returns its status. */
int rg_scope_mdb (rg_scope *s, int rc, const char *what, rg_err *e);
/* The scope's lsn, taken on first use; 0 (and the scope failed) when the
** counter could not be written. */
uint64_t rg_scope_lsn (rg_scope *s, rg_err *e);

int rg_env_backup (rg_env *env, const char *path, rg_err *e);
/* db:verify's check of processor leases (processor.c). */
int rg_proc_verify (MDB_txn *txn, rg_env *env, const rg_cspec *s,
                    uint64_t last_lsn, rg_buf *report);
/* Checks every storage invariant (verify.c); returns the number of
** problems, each described in `report`. */
int rg_verify (rg_env *env, rg_buf *report);
/* }===================================================================== */


/*
** {=====================================================================
** token.c: continuation tokens
** ======================================================================
*/
enum { RG_TOKEN_QUERY = 'q', RG_TOKEN_FEED = 'f' };

/* Appends to `out` a token carrying `payload`, bound to the database, the
** kind and the context (a hash of what it continues). */
void rg_token_make (const rg_env *env, int kind, uint64_t ctx,
                    const void *payload, size_t n, rg_buf *out);
/* Checks a token and puts its payload in `payload`; 400 when it is not a
** token this database made for this kind and context. */
int  rg_token_open (const rg_env *env, int kind, uint64_t ctx,
                    const char *tok, size_t n, rg_buf *payload, rg_err *e);
/* }===================================================================== */


/*
** {=====================================================================
** index.c: index and unique-key maintenance
** ======================================================================
*/
/* Brings the index and unique-key entries of one item from what `old`
** needed to what `new` needs (either may be NULL).  Unique violations
** give 409 before anything is written. */
int rg_index_update (rg_scope *s, const rg_cspec *c, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e);
/* Checks the unique keys `new` would take (409), writing nothing. */
int rg_unique_check (rg_scope *s, const rg_cspec *c, const rg_ikey *k,
                     const cJSON *old, const cJSON *neu, rg_err *e);
/* db:verify: checks the index and unique entries an item needs (see
** verify.c); returns the number of problems appended to `report`. */
int rg_index_verify (MDB_txn *txn, rg_env *env, const rg_cspec *spec,
                     const rg_ikey *k, const cJSON *doc, uint64_t *nindex,
                     uint64_t *nunique, rg_buf *report);
/* The id of a normalized path (segments, array positions "[]") in index
** keys, and the key prefix of that path's entries: cid | path-id. */
uint64_t rg_index_path_id (const char *const *seg, int n);
void rg_index_prefix (rg_buf *b, uint32_t cid, uint64_t path_id);
/* }===================================================================== */


/*
** {=====================================================================
** write.c: the one write path
** ======================================================================
*/
enum { RG_OP_CREATE = 1, RG_OP_REPLACE, RG_OP_UPSERT, RG_OP_DELETE,
       RG_OP_PATCH, RG_OP_READ };

typedef struct rg_patch_op rg_patch_op;

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
} rg_wreq;

typedef struct rg_wres {
  int status;                /* 200, 201, 204 */
  cJSON *doc;                /* what the caller receives (owned) */
  char etag[40];
} rg_wres;

/* A container as the write path and queries see it. */
typedef struct rg_cont {
  rg_env *env;
  rg_cspec *spec;
} rg_cont;

int  rg_write (rg_scope *s, const rg_cont *c, const rg_wreq *w, rg_wres *r,
               rg_err *e);
void rg_wres_free (rg_wres *r);
/* Removes every expired item of the container (once per scope). */
int  rg_purge_expired (rg_scope *s, const rg_cont *c, int *count, rg_err *e);
/* Reads an item by key in `txn`: 0 and the value (header stripped,
** valid until the transaction changes), or 404 (absent or expired). */
int  rg_item_get (MDB_txn *txn, rg_env *env, const rg_ikey *k, int64_t now,
                  MDB_val *json, rg_err *e);
/* Does the container still exist in this transaction? */
int  rg_cont_alive (MDB_txn *txn, const rg_cont *c, rg_err *e);
/* Evaluates a condition in the query dialect ("FROM c WHERE ...") on a
** document (query engine); 400 for bad text. */
int  rg_filter_eval (const char *filter, const cJSON *doc, int *pass,
                     rg_err *e);
/* Partition-key values of a document (NULL entries are undefined). */
void rg_doc_pk (const rg_cspec *c, const cJSON *doc,
                const cJSON *pkv[RG_MAX_PK_PATHS]);
/* }===================================================================== */


/*
** {=====================================================================
** The query engine (query*.c)
** ======================================================================
*/
typedef struct rg_query_req {
  const char *sql;
  size_t sqllen;
  const cJSON *params;         /* object {name = value} (no '@'), or NULL */
  int has_pk;                  /* route to this logical partition: */
  const cJSON *pkv[RG_MAX_PK_PATHS];
  long max_items;              /* page size; 0: every result in one page */
  const char *continuation;    /* NULL: from the start */
  size_t contlen;
  /* when set (procedures), a WHERE naming another logical partition than
  ** pkv fails with 400 and this message instead of returning nothing */
  const char *pk_conflict_msg;
  /* bounds (scripts, whose budgets no hook can enforce in C): documents
  ** read plus rows made (JOIN rows), 408 beyond; bytes of results held,
  ** 413 beyond; 0: no bound */
  uint64_t max_rows;
  size_t max_bytes;
} rg_query_req;

typedef struct rg_query_res {
  rg_buf rows;                 /* the page: JSON text of an array */
  size_t count;                /* results in the page */
  rg_buf continuation;         /* empty when no results remain */
  rg_work work;                /* partitions, lookups, loaded, ... */
  int cross_partition;
  rg_buf offsets;              /* size_t pairs: where each row's text is */
  uint64_t made;               /* documents read plus rows made */
} rg_query_res;

/* Runs one page of a query in `txn` (a read transaction, or a scope's);
** expired items are invisible as of `now`.  400 for bad SQL (the message
** names the position and what was expected), bad parameters or tokens. */
int  rg_query_exec (MDB_txn *txn, const rg_cont *c, int64_t now,
                    const rg_query_req *q, rg_query_res *r, rg_err *e);
void rg_query_res_free (rg_query_res *r);
/* }===================================================================== */


/*
** {=====================================================================
** Query engine internals (query_parse.c, query_eval.c, query_exec.c,
** query_plan.c).  Nothing outside the engine uses these.
** ======================================================================
*/
/* Arenas: memory taken in chunks that never move, freed all at once.
** Allocation failure sets `oom` and returns NULL. */
typedef struct rg_chunk rg_chunk;
typedef struct rg_arena {
  rg_chunk *head;
  int oom;
} rg_arena;

void  rg_arena_init (rg_arena *a);
void *rg_arena_alloc (rg_arena *a, size_t n);          /* 8-aligned */
char *rg_arena_dup (rg_arena *a, const char *s, size_t n);
void  rg_arena_reset (rg_arena *a);   /* frees all but the largest chunk */
void  rg_arena_free (rg_arena *a);

/* Value types, in the order ORDER BY ranks them (arrays and objects rank
** with undefined: ORDER BY sorts by scalars). */
enum { RG_QV_UNDEF, RG_QV_NULL, RG_QV_FALSE, RG_QV_TRUE, RG_QV_NUM,
       RG_QV_STR, RG_QV_ARR, RG_QV_OBJ };

/*
** A tape is a JSON value flattened into an array of nodes in document
** order: a container's children follow it, and `size` (the nodes of a
** subtree, itself included) skips over one.  Strings are raw bytes (NUL
** allowed), pointing into the text when it held no escape; `raw` is the
** value's own JSON text, so that a value read from a document is copied
** out as it is stored.  Built values (constructors) have `raw` NULL.
*/
typedef struct rg_qnode {
  uint8_t t;
  uint32_t n;                /* string bytes; elements or members */
  uint32_t size;             /* nodes in this subtree, itself included */
  uint32_t klen;
  const char *key;           /* member name inside an object, else NULL */
  double d;                  /* number */
  const char *s;             /* string bytes */
  const char *raw;           /* JSON text of the value, or NULL */
  uint32_t rawlen;
} rg_qnode;

typedef struct rg_tape {
  rg_qnode *node;
  size_t n, cap;
} rg_tape;

/* Parses JSON text into `t` (reset first); decoded strings go to `a`.
** 0, 400 for text that is not JSON, 500 out of memory. */
int  rg_tape_parse (rg_tape *t, rg_arena *a, const char *s, size_t n);
void rg_tape_free (rg_tape *t);

/* A value during evaluation: a scalar, or a subtree of some tape. */
typedef struct rg_qv {
  uint8_t t;
  double d;
  const char *s;
  size_t n;
  const rg_qnode *node;      /* arrays and objects; scalars from a tape */
} rg_qv;

void rg_qv_of_node (rg_qv *v, const rg_qnode *node);
const rg_qnode *rg_qnode_member (const rg_qnode *obj, const char *k,
                                 size_t n);
/* Deep equality of two values of the same kind. */
int  rg_qv_equal (const rg_qv *a, const rg_qv *b);
/* JSON text of a value. */
void rg_qv_print (rg_buf *b, const rg_qv *v);
/* The order-preserving term of a value (layout.c's encoding; undefined,
** arrays and objects give 0x01, below every scalar); strings cut after
** `limit` encoded bytes (0: never), as index terms are. */
void rg_qv_term (rg_buf *b, const rg_qv *v, int desc, size_t limit);
/* A canonical encoding: equal values (objects in any member order) give
** equal bytes (DISTINCT). */
void rg_qv_canon (rg_buf *b, const rg_qv *v);
/* A value built from `n` values: an array, or an object (names given). */
int  rg_qv_build (rg_arena *a, int obj, const rg_qv *items,
                  const char *const *names, const uint32_t *nlens, int n,
                  rg_qv *out);

/* Expressions: nodes in one array, linked by index (-1: none). */
enum {
  RG_QE_LIT, RG_QE_PARAM, RG_QE_ALIAS, RG_QE_IDENT, RG_QE_PROP,
  RG_QE_INDEX, RG_QE_UNARY, RG_QE_BINARY, RG_QE_AND, RG_QE_OR, RG_QE_NOT,
  RG_QE_TERNARY, RG_QE_COALESCE, RG_QE_IN, RG_QE_BETWEEN, RG_QE_CALL,
  RG_QE_ARRAY, RG_QE_OBJECT, RG_QE_MEMBER
};
enum {                       /* operators of UNARY and BINARY */
  RG_QO_EQ, RG_QO_NE, RG_QO_LT, RG_QO_LE, RG_QO_GT, RG_QO_GE,
  RG_QO_ADD, RG_QO_SUB, RG_QO_MUL, RG_QO_DIV, RG_QO_MOD, RG_QO_CAT,
  RG_QO_NEG, RG_QO_POS
};
enum {                       /* functions; the aggregates come first */
  RG_QF_COUNT, RG_QF_SUM, RG_QF_MIN, RG_QF_MAX, RG_QF_AVG,
  RG_QF_IS_DEFINED, RG_QF_IS_NULL, RG_QF_IS_STRING, RG_QF_IS_NUMBER,
  RG_QF_IS_BOOL, RG_QF_IS_ARRAY, RG_QF_IS_OBJECT, RG_QF_ARRAY_CONTAINS,
  RG_QF_ARRAY_LENGTH, RG_QF_STARTSWITH, RG_QF_ENDSWITH, RG_QF_CONTAINS,
  RG_QF_LOWER, RG_QF_UPPER, RG_QF_LENGTH, RG_QF_CONCAT, RG_QF_SUBSTRING,
  RG_QF_LEFT
};
#define RG_QF_ISAGG(f) ((f) <= RG_QF_AVG)

typedef struct rg_qexpr {
  uint8_t k, op;             /* kind; operator, function, or NOT IN */
  int32_t a, b, c;           /* operands */
  int32_t list, nlist;       /* arguments, items, members: q->list[...] */
  int32_t slot;              /* alias, parameter or aggregate slot */
  uint32_t pos;              /* byte offset in the text (errors) */
  uint32_t depth;            /* nesting of the subtree (bounded) */
  const char *s;             /* property, member or identifier name */
  uint32_t n;
  rg_qv v;                   /* a literal */
} rg_qexpr;

#define RG_QMAX_JOIN  8
#define RG_QMAX_ORDER 8
#define RG_QMAX_DEPTH 100      /* expression nesting */

typedef struct rg_qsel {
  int32_t expr;
  const char *name;          /* the output property */
  uint32_t nlen;
} rg_qsel;

typedef struct rg_qparam {
  const char *name;          /* without '@' */
  uint32_t nlen, pos;
} rg_qparam;

/* A parsed query.  Everything it points to lives in `mem`. */
typedef struct rg_query {
  rg_qexpr *ex;
  int nex, capex;
  int32_t *list;
  int nlist, caplist;
  rg_arena mem;
  const char *sql;
  size_t sqllen;
  int distinct, star, value;
  int32_t top, offset, limit;          /* literal or parameter; -1 absent */
  rg_qsel *sel;
  int nsel, capsel;
  const char *alias;
  uint32_t alen;
  int njoin;
  struct { const char *name; uint32_t nlen; int32_t src; } join[RG_QMAX_JOIN];
  int32_t where;
  int norder;
  struct { int32_t expr; int desc; } order[RG_QMAX_ORDER];
  int naggs;                           /* aggregate calls (slots) */
  int nparams;
  rg_qparam *param;
} rg_query;

/* Parses a query (`filter`: the form "FROM c [JOIN ...] WHERE cond" of
** patch filters).  400 with "syntax error at line:column: ..." messages. */
int  rg_query_parse (const char *sql, size_t n, int filter, rg_query **out,
                     rg_err *e);
void rg_query_free (rg_query *q);
/* Line and column (1-based, in characters) of a byte offset. */
void rg_query_where (const char *sql, size_t off, int *line, int *col);
/* Binds the parameters from JSON text of an object (NULL: none): one value
** per parameter slot into *out (allocated in `a`); 400 naming the first
** parameter the text does not bind. */
int  rg_query_bind (const rg_query *q, const char *json, size_t n,
                    rg_tape *t, rg_arena *a, rg_qv **out, rg_err *e);

/* The evaluation context of one row. */
typedef struct rg_qctx {
  const rg_query *q;
  rg_qv bind[1 + RG_QMAX_JOIN];        /* the FROM alias, then the joins */
  const rg_qv *params;
  const rg_qv *aggs;                   /* results of the aggregates */
  rg_arena *scratch;                   /* built values; reset per row */
} rg_qctx;

/* Evaluates expression `e`; out-of-memory shows in scratch->oom. */
void rg_qeval (rg_qctx *x, int32_t e, rg_qv *out);

/*
** The row pipeline (query_exec.c): documents come in from a source (the
** planner's scans and index lookups, or a test harness), rows are made
** (JOIN), filtered, ordered, counted and projected into one page.
*/
enum { RG_QX_STREAM = 1, RG_QX_SORT, RG_QX_AGG, RG_QX_DISTINCT };

typedef struct rg_qdoc {
  const char *text;          /* the item's JSON (valid until the finish) */
  size_t len;
  uint64_t hash, digest;     /* partition hash and item digest: ties */
  const uint8_t *pos;        /* the source's position of this document */
  size_t poslen;
  int phase;                 /* the source's phase (resuming) */
  int unordered_only;        /* keep only rows whose first ORDER BY value
                                is not a scalar */
} rg_qdoc;

typedef struct rg_qexec rg_qexec;

/* A pipeline for one page: `mode` RG_QX_*, `tie_desc` orders ties by
** descending (hash, digest), `page` rows at most (0: all), `resume` the
** payload of a continuation token (NULL: from the start).  400 for a
** payload this query cannot resume from or bad TOP/OFFSET/LIMIT. */
int  rg_qexec_new (rg_qexec **out, const rg_query *q, const rg_qv *params,
                   int mode, int tie_desc, long page, const uint8_t *resume,
                   size_t rlen, rg_err *e);
/* The conditions to test instead of the WHERE (its conjuncts that the
** source does not already guarantee); `conds` must outlive the pipeline. */
void rg_qexec_conds (rg_qexec *x, const int32_t *conds, int n);
/* Bounds the page's work: documents fed plus rows made (408 beyond), and
** bytes of results held (413 beyond); 0: no bound.  rg_qexec_made tells
** the work done so far. */
void rg_qexec_limits (rg_qexec *x, uint64_t max_rows, size_t max_bytes);
uint64_t rg_qexec_made (const rg_qexec *x);
/* Where the previous page ended: 1 and the source position, or 0. */
int  rg_qexec_resume (const rg_qexec *x, int *phase, const uint8_t **pos,
                      size_t *poslen, const uint8_t **okey, size_t *oklen);
/* Feeds one document: 0 more wanted, 1 the page is complete, or a
** status. */
int  rg_qexec_doc (rg_qexec *x, const rg_qdoc *d, rg_err *e);
/* The order key of a document's first row (ORDER BY on the FROM alias). */
int  rg_qexec_okey (rg_qexec *x, const rg_qdoc *d, rg_buf *out, rg_err *e);
/* Ends the page: the rows (JSON array text), where each row is (offset,
** length pairs), their count, and the token payload (empty: done). */
int  rg_qexec_finish (rg_qexec *x, rg_buf *rows, rg_buf *offsets,
                      size_t *count, rg_buf *payload, rg_err *e);
void rg_qexec_free (rg_qexec *x);

/* Registers c:query and c:query_rows (lua_query.c). */
void rg_query_open (lua_State *L);
/* Pushes the info table of a query page (charge, status and the work). */
void rg_push_query_info (lua_State *L, const rg_work *w, int cross);
/* }===================================================================== */


/*
** {=====================================================================
** feed.c: the change feed
** ======================================================================
*/
enum { RG_FEED_LATEST = 1, RG_FEED_ALL = 2 };                   /* modes */
enum { RG_START_BEGINNING, RG_START_NOW, RG_START_TIME };

/* A place in one feed range: the key to read next (lsn, then the ordinal
** in all_versions mode or the item digest in latest mode). */
typedef struct rg_fpos {
  uint64_t lsn, sub;
} rg_fpos;

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
int  rg_feed_record (const MDB_val *v, rg_record *r);   /* 0, or -1: corrupt */
void rg_batch_init (rg_batch *b);
void rg_batch_clear (rg_batch *b);
void rg_batch_free (rg_batch *b);
/* Reads changes into `b` (copied: valid after the transaction). */
int  rg_feed_read (MDB_txn *txn, rg_feedq *q, rg_batch *b, rg_err *e);
/* Counts the entries of a range from a position, up to `limit`. */
int  rg_feed_count (MDB_txn *txn, const rg_cont *c, int mode, int range,
                    const rg_fpos *pos, uint64_t limit, uint64_t *count,
                    rg_err *e);
/* The position of a start (RG_START_*, `t` seconds for a time) in a range. */
int  rg_feed_start (MDB_txn *txn, const rg_cont *c, int mode, int range,
                    int kind, double t, rg_fpos *pos, rg_err *e);
/* Continuation tokens of `n` positions, bound to the container, the mode,
** the feed range (0: every range) and the partition filter. */
void rg_feed_token (const rg_env *env, const rg_cspec *spec, int mode,
                    int range, const uint8_t *lp, size_t lplen, int n,
                    const rg_fpos *pos, rg_buf *out);
int  rg_feed_untoken (const rg_env *env, const rg_cspec *spec, int mode,
                      int range, const uint8_t *lp, size_t lplen, int n,
                      const char *tok, size_t len, rg_fpos *pos, rg_err *e);
/* Removes all_versions records past retention that every all_versions
** processor has checkpointed past (at most once a second unless `force`). */
int  rg_feed_trim (rg_scope *s, const rg_cont *c, int force, rg_err *e);
/* Pushes a batch as a Lua array of changes in the mode's shape. */
int  rg_batch_push (lua_State *L, const rg_cspec *spec, int mode,
                    const rg_batch *b, rg_err *e);
/* Appends the same as JSON text (dead letters). */
int  rg_batch_json (const rg_cspec *spec, int mode, const rg_batch *b,
                    rg_buf *out, rg_err *e);
/* Options shared by c:changes and db:processor (raise on misuse). */
int  rg_feed_opt_mode (lua_State *L, int idx, const char *what);
void rg_feed_opt_start (lua_State *L, int idx, int *kind, double *t,
                        const char *what);
/* Registers c:changes and c:feed_ranges, and the processors' core. */
void rg_feed_open (lua_State *L);
/* }===================================================================== */


/*
** {=====================================================================
** processor.c: processors' leases, checkpoints and dead letters
** ======================================================================
*/
#define RG_MAX_INSTANCE 200          /* bytes of a processor instance name */

/* The lowest position every all_versions processor of the container
** still needs, per range ({UINT64_MAX, UINT64_MAX} when none does). */
int  rg_proc_floors (MDB_txn *txn, rg_env *env, uint32_t cid, int nparts,
                     rg_fpos *floor, rg_err *e);
/* Registers the processors' core (regolith.core._processor). */
void rg_processor_open (lua_State *L);
/* }===================================================================== */


/*
** {=====================================================================
** script.c: the procedure runner (procedures and triggers)
** ======================================================================
*/
/* Runs the pre-triggers of a write (the named one, the automatic ones);
** they may replace *doc (NULL for a delete).  Checks the named post-trigger
** too, before anything is written. */
int rg_trigger_pre (rg_scope *s, const rg_cont *c, const rg_wreq *w, int op,
                    const rg_ikey *k, cJSON **doc, rg_err *e);
/* Runs the post-triggers after the write; they may set r->doc. */
int rg_trigger_post (rg_scope *s, const rg_cont *c, const rg_wreq *w, int op,
                     const rg_ikey *k, const cJSON *stored, rg_wres *r,
                     rg_err *e);

#define RG_META_SCRIPTS "\x01scripts"          /* u64: the scripts' version */
#define RG_SCRIPT_BUDGET 1000000000ull         /* instructions, ~5 s */
#define RG_SCRIPT_MEMORY (64u << 20)           /* bytes */
#define RG_MAX_SOURCE    RG_MAX_ITEM           /* bytes of source: 413 */
#define RG_BOUND_MSG "scripts cannot reference partition keys other than " \
                     "the one for which the request was submitted"

enum { RG_TRIG_PRE = 1, RG_TRIG_POST = 2 };
enum { RG_TOP_ALL = 0, RG_TOP_CREATE, RG_TOP_REPLACE, RG_TOP_DELETE };
enum { RG_PUT_CREATE = 1, RG_PUT_REPLACE };

/* Sets the script limits of an environment from the options of a handle
** opening it (0: not given).  The first open sets them; a later open
** naming other values gets 409. */
int  rg_script_limits (rg_env *env, uint64_t budget, uint64_t memory,
                       rg_err *e);
/* Frees the environment's runner (env.c calls it on release). */
void rg_script_close (rg_env *env);
/* Compiles a source in the sandbox and runs its chunk, which must return
** a function (400; 408/413 when the chunk exceeds the limits).  `tag` is
** RG_MK_PROC or RG_MK_TRIG (for messages). */
int  rg_script_check (rg_env *env, int tag, const char *name, size_t n,
                      const char *src, size_t len, rg_err *e);
/* Stores a procedure (tag RG_MK_PROC) or trigger (RG_MK_TRIG, with `trig`
** = {type, operation, automatic}); mode RG_PUT_CREATE (409 when it exists)
** or RG_PUT_REPLACE (404 when it does not). */
int  rg_script_put (rg_scope *s, const rg_cont *c, int tag, const char *name,
                    size_t n, int mode, const int trig[3], const char *src,
                    size_t len, rg_err *e);
int  rg_script_delete (rg_scope *s, const rg_cont *c, int tag,
                       const char *name, size_t n, rg_err *e);
/* Pushes the names of a container's procedures or triggers (sorted). */
int  rg_script_names (lua_State *L, const rg_cont *c, int tag, rg_err *e);
/* Executes a procedure in the scope, bound to the logical partition of
** `pk` (a value, or an array for hierarchical keys).  `args[i]` NULL is
** nil.  On success *result holds the JSON-clean result (owned by the
** caller); `log` receives ctx:log lines, each a u32 length and bytes. */
int  rg_proc_execute (rg_scope *s, const rg_cont *c, const char *name,
                      size_t n, const cJSON *pk, cJSON *const *args,
                      int nargs, cJSON **result, rg_buf *log, rg_err *e);
/* lua_script.c: the container methods of procedures and triggers. */
void rg_script_open (lua_State *L);
/* }===================================================================== */


/*
** {=====================================================================
** sandbox.c, pattern.c, utf8lib.c: the Lua state scripts run in
** ======================================================================
*/
typedef struct rg_sandbox rg_sandbox;

enum { RG_STOP_NONE, RG_STOP_BUDGET, RG_STOP_MEMORY, RG_STOP_ABORT };

rg_sandbox *rg_sandbox_new (void);                 /* NULL: out of memory */
void        rg_sandbox_free (rg_sandbox *sb);
lua_State  *rg_sandbox_state (rg_sandbox *sb);
rg_sandbox *rg_sandbox_of (lua_State *S);
/* Starts an execution's accounting: at most `budget` instructions and
** `memory` bytes more than the state holds now. */
void     rg_sandbox_arm (rg_sandbox *sb, uint64_t budget, size_t memory);
/* Ends it; returns why it was stopped (RG_STOP_*), RG_STOP_NONE if not. */
int      rg_sandbox_disarm (rg_sandbox *sb);
/* Charges work done in C; raises once the budget is spent. */
void     rg_sandbox_charge (lua_State *S, uint64_t n);
/* Stops the execution for good (RG_STOP_ABORT...) and raises. */
int      rg_sandbox_stop (lua_State *S, int why);
int      rg_sandbox_stopped (lua_State *S);
/* Raises "C stack overflow" when the run's C stack is too deep: called
** before a C function calls back into the script. */
void     rg_sandbox_cstack (lua_State *S);
/* What the armed execution has left: instructions and bytes (0: not
** armed, no bound). */
void     rg_sandbox_left (lua_State *S, uint64_t *instructions,
                          size_t *bytes);
/* Pushes a fresh environment for one execution. */
void     rg_sandbox_env (lua_State *S);
/* Compiles text (never bytecode) as chunk "name"; a Lua load status. */
int      rg_sandbox_load (lua_State *S, const char *src, size_t n,
                          const char *name, size_t namelen);
/* Pops an environment and makes it the globals of the chunk at fidx. */
void     rg_sandbox_setenv (lua_State *S, int fidx);
/* rg_json_from_lua for the sandbox, charging the conversion to the budget.
** Raises only when the budget runs out, with *out already set (so the
** caller must hold it where it is freed), or when the tree would take
** more than the memory budget has left (a memory stop, *out NULL); 413
** when no stack room can be made for the conversion. */
int      rg_sandbox_from_lua (lua_State *S, int idx, cJSON **out, rg_err *e);
/* Registers the budget-aware find, match, gmatch and gsub in the table at
** idx (pattern.c). */
void     rg_pattern_open (lua_State *S, int idx);
/* Pushes a table holding Lua 5.4's utf8 library, for hosts without one
** (utf8lib.c). */
void     rg_utf8lib_open (lua_State *S);
/* }===================================================================== */


/*
** {=====================================================================
** patch.c: the patch engine
** ======================================================================
*/
enum { RG_PATCH_ADD = 1, RG_PATCH_SET, RG_PATCH_REPLACE, RG_PATCH_REMOVE,
       RG_PATCH_INCR, RG_PATCH_MOVE };

struct rg_patch_op {
  int op;
  const char *path;          /* JSON pointer, MUTF-8 */
  const char *from;          /* move */
  const cJSON *value;        /* add/set/replace/incr: borrowed */
};

/* Applies the ops in order to `doc` (modified in place); 400 with a
** message naming the op on any fault. */
int rg_patch_apply (cJSON *doc, const rg_patch_op *ops, int n, rg_err *e);
/* }===================================================================== */


/*
** {=====================================================================
** charge.c: request charges
** ======================================================================
*/
double   rg_charge (const rg_work *w);
uint64_t rg_read_units (size_t bytes);
void   rg_work_diff (rg_work *out, const rg_work *after, const rg_work *before);
/* }===================================================================== */


/*
** {=====================================================================
** The Lua binding (lua_db.c, lua_container.c)
** ======================================================================
*/
#define RG_DB_MT   "regolith.db"
#define RG_CONT_MT "regolith.container"

typedef struct rg_db {
  rg_env *env;               /* NULL once closed */
  int sync;
  int readonly;
  lua_Integer script_budget;
  lua_Integer script_memory;
  int max_containers;
} rg_db;

typedef struct rg_lcont {
  rg_db *db;                 /* kept alive through the uservalue */
  rg_cont c;                 /* c.spec NULL once closed */
} rg_lcont;

rg_db    *rg_checkdb (lua_State *L, int idx);      /* open handles only */
/* Adds functions to the method table of the handle type `mt`; each area
** (queries, scripts, the feed) registers its own methods this way. */
void rg_add_methods (lua_State *L, const char *mt, const luaL_Reg *funcs);
rg_lcont *rg_checkcont (lua_State *L, int idx);    /* open handles only */
void rg_push_container (lua_State *L, int dbidx, rg_cspec *spec);
void rg_container_open (lua_State *L);

/* Options tables: raise on unknown keys (misuse, SPEC 2.1). */
void rg_opts_check (lua_State *L, int idx, const char *const *allowed,
                    const char *what);
lua_Integer rg_opt_int (lua_State *L, int idx, const char *name,
                        lua_Integer def, lua_Integer lo, lua_Integer hi,
                        const char *what);
const char *rg_opt_string (lua_State *L, int idx, const char *name,
                           const char *what);   /* raises on NUL too */
/* A string option that is data (an etag, a filter, a trigger name, a
** token): its length too, NUL bytes included; rg_opt_text then gives 400
** for one holding NUL (which C strings would cut short). */
const char *rg_opt_lstring (lua_State *L, int idx, const char *name,
                            size_t *len, const char *what);
int rg_opt_text (const char *s, size_t n, const char *name, rg_err *e);
int rg_opt_bool (lua_State *L, int idx, const char *name, int def,
                 const char *what);
/* Loads a container's spec from the catalog (404 when gone). */
int rg_load_spec (MDB_txn *txn, rg_env *env, uint32_t cid, rg_cspec **out,
                  rg_err *e);

/* A box: a userdata owning C memory, freed by `cleanup` on __gc (after a
** Lua error) or by the caller with rg_box_done.  The payload is zeroed. */
void *rg_newbox (lua_State *L, size_t size, void (*cleanup) (void *));
void  rg_box_done (void *payload);

/* Returns nil, message, status (3 values). */
int rg_push_fail (lua_State *L, const rg_err *e);
/* Pushes an info table with charge and status; leaves it on the stack. */
void rg_push_info (lua_State *L, const rg_work *w, int status);
/* }===================================================================== */

#endif
