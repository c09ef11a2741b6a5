/*
** support.h: the small tools every layer uses.
**
** Errors (rg_err: an HTTP-like status and a message), growable buffers
** that record allocation failure instead of returning it at every step,
** big-endian integers (the byte order of every key, so that memcmp orders
** them), SipHash-2-4 (the hash of partition keys and the MAC of
** continuation tokens), UTF-8, declared document paths, and the id rules.
**
** Rules kept by every rg_ function of every layer below the Lua binding:
** it never sees a lua_State and never raises; a function that can fail
** returns 0 or a status (400, 404, ...) and fills an rg_err; a function
** that returns a cJSON tree or a malloc'd block through an out-parameter
** hands it to the caller, and one taking a `const` pointer borrows it.
*/

#ifndef rg_support_h
#define rg_support_h

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/limits.h"

#if defined(__GNUC__)
#define RG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RG_PRINTF(f, a)
#endif

/*
** Assertions on the invariants the headers state.  On in debug and
** sanitizer builds (-DRG_DEBUG: `make check`, the fuzzers, the plain C
** tests), where a broken one prints where and aborts; free in a release
** build, where the expression is not evaluated.  An assertion states what
** the code already relies on: it never replaces the check of an input.
*/
void rg_assert_fail (const char *what, const char *file, int line);
#ifdef RG_DEBUG
#define rg_assert(c) ((c) ? (void)0 : rg_assert_fail(#c, __FILE__, __LINE__))
#else
#define rg_assert(c) ((void)sizeof(c))
#endif

/* An expected failure: an HTTP-like status and a message. */
typedef struct rg_err {
  int status;
  char msg[512];
} rg_err;

/* Fills `e` (which may be NULL) and returns `status`, so that
** `return rg_fail(e, 400, ...)`.  The message may quote e->msg. */
int rg_fail (rg_err *e, int status, const char *fmt, ...) RG_PRINTF(3, 4);

/* The status of a storage call that failed with errno `err`: 507
** (insufficient storage) for a full disk or quota, the one storage failure
** a user can fix, and 500 for any other. */
int rg_room_status (int err);

/* Flushes a directory (the names in it), as a file's creation, removal or
** rename needs to be durable: 0 or 500. */
int rg_sync_dir (const char *path, rg_err *e);

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
void rg_buf_addf (rg_buf *b, const char *fmt, ...) RG_PRINTF(2, 3);
/* Appends s (n bytes of UTF-8, or of MUTF-8: C0 80 is NUL) as a JSON string. */
void rg_json_quote (rg_buf *b, const char *s, size_t n);

/* Big-endian fixed-width integers, the byte order of every key. */
void     rg_put_u16 (uint8_t *p, uint32_t v);
void     rg_put_u32 (uint8_t *p, uint32_t v);
void     rg_put_u64 (uint8_t *p, uint64_t v);
uint32_t rg_get_u16 (const uint8_t *p);
uint32_t rg_get_u32 (const uint8_t *p);
uint64_t rg_get_u64 (const uint8_t *p);
/* qsort/bsearch order of uint32_t values, ascending. */
int      rg_u32_cmp (const void *a, const void *b);

/* SipHash-2-4 with a 128-bit key. */
uint64_t rg_siphash (const uint8_t key[16], const void *p, size_t n);
/* The fixed-key hash used inside the storage format (stable forever). */
uint64_t rg_hash (const void *p, size_t n);
/* A fast 64-bit checksum over four lanes, unkeyed (for telling a torn,
** stale or wrong block from the one summed, not for tables an adversary
** fills); fixed forever: the write-ahead log's records and page deltas
** carry it. */
uint64_t rg_sum64 (const void *p, size_t n);

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

#endif
