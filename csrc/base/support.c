/*
** support.c: the small tools every other file uses.
**
** Errors (rg_err: a status and a message), growable buffers that record
** allocation failure instead of returning it at every step, big-endian
** integers (the byte order of every key, so that memcmp orders them),
** SipHash-2-4 (the hash of partition keys and the MAC of continuation
** tokens), UTF-8 validation, declared document paths, and the id rules.
*/

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/support.h"


/*
** {=====================================================================
** Errors
** ======================================================================
*/
void rg_assert_fail (const char *what, const char *file, int line) {
  fprintf(stderr, "regolith: %s:%d: assertion failed: %s\n", file, line, what);
  abort();
}

int rg_room_status (int err) {
  return err == ENOSPC || err == EDQUOT ? 507 : 500;
}

int rg_sync_dir (const char *path, rg_err *e) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return rg_fail(e, 500, "storage failure: flushing '%s': %s", path,
                   strerror(err));
  }
  close(fd);
  return 0;
}

int rg_fail (rg_err *e, int status, const char *fmt, ...) {
  va_list ap;
  char msg[sizeof(e->msg)];
  if (e == NULL) return status;
  /* formatted apart: callers wrap the message already there
  ** (rg_fail(e, 500, "corrupt item: %s", e->msg)), and vsnprintf into the
  ** buffer it reads from is undefined (it garbled such messages) */
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  e->status = status;
  memcpy(e->msg, msg, sizeof(msg));
  return status;
}
/* }===================================================================== */


/*
** {=====================================================================
** Buffers
** ======================================================================
*/
void rg_buf_init (rg_buf *b) {
  b->p = NULL;
  b->n = b->cap = 0;
  b->oom = 0;
}

void rg_buf_free (rg_buf *b) {
  free(b->p);
  rg_buf_init(b);
}

int rg_buf_reserve (rg_buf *b, size_t extra) {
  size_t need, cap;
  char *p;
  if (b->oom) return -1;
  need = b->n + extra + 1;             /* room for a terminating NUL */
  if (need <= b->cap) return 0;
  cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  p = (char *)realloc(b->p, cap);
  if (p == NULL) { b->oom = 1; return -1; }
  b->p = p;
  b->cap = cap;
  return 0;
}

void rg_buf_add (rg_buf *b, const void *p, size_t n) {
  if (rg_buf_reserve(b, n) != 0) return;
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void rg_buf_addc (rg_buf *b, int c) {
  if (rg_buf_reserve(b, 1) != 0) return;
  b->p[b->n++] = (char)c;
  b->p[b->n] = '\0';
}

void rg_buf_adds (rg_buf *b, const char *s) {
  rg_buf_add(b, s, strlen(s));
}

void rg_buf_addf (rg_buf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof(tmp)) { rg_buf_add(b, tmp, (size_t)n); return; }
  if (rg_buf_reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}
/* }===================================================================== */


/*
** {=====================================================================
** Big-endian integers
** ======================================================================
*/
void rg_put_u16 (uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v;
}

void rg_put_u32 (uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);  p[3] = (uint8_t)v;
}

void rg_put_u64 (uint8_t *p, uint64_t v) {
  rg_put_u32(p, (uint32_t)(v >> 32));
  rg_put_u32(p + 4, (uint32_t)v);
}

uint32_t rg_get_u16 (const uint8_t *p) {
  return ((uint32_t)p[0] << 8) | p[1];
}

int rg_u32_cmp (const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

uint32_t rg_get_u32 (const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
         ((uint32_t)p[2] << 8) | p[3];
}

uint64_t rg_get_u64 (const uint8_t *p) {
  return ((uint64_t)rg_get_u32(p) << 32) | rg_get_u32(p + 4);
}
/* }===================================================================== */


/*
** {=====================================================================
** SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit hash, fast on
** short inputs, and a MAC when the key is secret.
** ======================================================================
*/
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND \
  do { \
    v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
    v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
    v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
    v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
  } while (0)

static uint64_t le64 (const uint8_t *p) {
  return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
         ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) |
         ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) |
         ((uint64_t)p[7] << 56);
}

uint64_t rg_siphash (const uint8_t key[16], const void *data, size_t n) {
  const uint8_t *p = (const uint8_t *)data;
  uint64_t k0 = le64(key), k1 = le64(key + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
  uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
  uint64_t v3 = k1 ^ 0x7465646279746573ULL;
  uint64_t b = (uint64_t)n << 56, m;
  size_t i, left = n & 7;
  for (i = 0; i + 8 <= n; i += 8) {
    m = le64(p + i);
    v3 ^= m; SIPROUND; SIPROUND; v0 ^= m;
  }
  switch (left) {
    case 7: b |= (uint64_t)p[i + 6] << 48; /* FALLTHROUGH */
    case 6: b |= (uint64_t)p[i + 5] << 40; /* FALLTHROUGH */
    case 5: b |= (uint64_t)p[i + 4] << 32; /* FALLTHROUGH */
    case 4: b |= (uint64_t)p[i + 3] << 24; /* FALLTHROUGH */
    case 3: b |= (uint64_t)p[i + 2] << 16; /* FALLTHROUGH */
    case 2: b |= (uint64_t)p[i + 1] << 8;  /* FALLTHROUGH */
    case 1: b |= (uint64_t)p[i]; break;
    default: break;
  }
  v3 ^= b; SIPROUND; SIPROUND; v0 ^= b;
  v2 ^= 0xff;
  SIPROUND; SIPROUND; SIPROUND; SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t rg_hash (const void *p, size_t n) {
  /* fixed forever: partition placement depends on it (store/layout.c) */
  static const uint8_t k[16] = { 'r','e','g','o','l','i','t','h',
                                 'l','a','y','o','u','t','v','1' };
  return rg_siphash(k, p, n);
}

static uint64_t rotl (uint64_t x, int r) { return x << r | x >> (64 - r); }

uint64_t rg_sum64 (const void *data, size_t n) {
  const uint64_t K1 = 0x9E3779B97F4A7C15ull, K2 = 0xC2B2AE3D27D4EB4Full;
  const uint8_t *p = (const uint8_t *)data;
  uint64_t h[4] = { K1, K2, K1 ^ n, K2 ^ n }, w, r;
  size_t i = 0;
  int k;
  for (; i + 32 <= n; i += 32)
    for (k = 0; k < 4; k++) {
      memcpy(&w, p + i + 8 * k, 8);
      h[k] = rotl(h[k] ^ w * K2, 31) * K1;
    }
  for (; i < n; i++) h[i & 3] = rotl(h[i & 3] ^ p[i] * K2, 31) * K1;
  r = rotl(h[0], 1) + rotl(h[1], 7) + rotl(h[2], 12) + rotl(h[3], 18);
  r ^= r >> 33; r *= K2; r ^= r >> 29; r *= K1; r ^= r >> 32;
  return r;
}
/* }===================================================================== */


/* The seconds of CLOCK_REALTIME, the clock queries read too (time(2)
** reads a coarse copy that lags it by up to a tick). */
int64_t rg_now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}


/*
** {=====================================================================
** UTF-8
** ======================================================================
*/
/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid.
** Rejects overlong forms, surrogates and code points past U+10FFFF. */
int rg_utf8_seq (const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) {
    if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
    return 2;
  }
  if (c < 0xF0) {
    if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;          /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0;         /* surrogate */
    return 3;
  }
  if (c < 0xF5) {
    if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
        (s[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;          /* overlong */
    if (c == 0xF4 && s[1] >= 0x90) return 0;         /* > U+10FFFF */
    return 4;
  }
  return 0;
}

/* Writes the UTF-8 form of code point cp at w; returns its length. */
size_t rg_utf8_put (char *w, unsigned cp) {
  if (cp < 0x80) { w[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    w[0] = (char)(0xC0 | (cp >> 6)); w[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    w[0] = (char)(0xE0 | (cp >> 12)); w[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    w[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  w[0] = (char)(0xF0 | (cp >> 18)); w[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  w[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); w[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static int hex4 (const char *p, unsigned *out) {
  unsigned v = 0;
  int i;
  for (i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return 0;
  }
  *out = v;
  return 1;
}

/*
** The escapes of JSON strings, shared by the JSON bridge, the query
** engine's reader of stored documents and the SQL lexer (whose strings
** take the same escapes, and \' besides, which it handles itself).
*/
size_t rg_unescape (const char *p, const char *end, unsigned *cp,
                    const char **why) {
  unsigned lo;
  *why = "unknown escape";
  if (end - p < 2) return 0;
  switch (p[1]) {
    case '"': *cp = '"'; return 2;
    case '\\': *cp = '\\'; return 2;
    case '/': *cp = '/'; return 2;
    case 'b': *cp = '\b'; return 2;
    case 'f': *cp = '\f'; return 2;
    case 'n': *cp = '\n'; return 2;
    case 'r': *cp = '\r'; return 2;
    case 't': *cp = '\t'; return 2;
    case 'u': break;
    default: return 0;
  }
  *why = "bad \\u escape";
  if (end - p < 6 || !hex4(p + 2, cp)) return 0;
  *why = "lone surrogate in a \\u escape";
  if (*cp >= 0xDC00 && *cp <= 0xDFFF) return 0;
  if (*cp < 0xD800 || *cp > 0xDBFF) return 6;
  if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8, &lo) ||
      lo < 0xDC00 || lo > 0xDFFF)
    return 0;
  *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
  return 12;
}

void rg_json_quote (rg_buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
  rg_buf_addc(b, '"');
  for (; p < end; p++) {
    unsigned c = *p;
    const char *esc;
    char u[7];
    if (c >= 0x20 && c != '"' && c != '\\' && c != 0xC0) continue;
    if (c == 0xC0 && (p + 1 == end || p[1] != 0x80)) continue;
    rg_buf_add(b, run, (size_t)(p - run));
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\b': esc = "\\b"; break;
      case '\f': esc = "\\f"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      case 0xC0: esc = "\\u0000"; p++; break;    /* MUTF-8 NUL */
      default:
        u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
        u[4] = hex[c >> 4]; u[5] = hex[c & 15]; u[6] = '\0';
        esc = u;
    }
    rg_buf_adds(b, esc);
    run = p + 1;
  }
  rg_buf_add(b, run, (size_t)(p - run));
  rg_buf_addc(b, '"');
}

int rg_utf8_valid (const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  while (p < end) {
    int k;
    if (*p < 0x80) { p++; continue; }
    k = rg_utf8_seq(p, (size_t)(end - p));
    if (k == 0) return 0;
    p += k;
  }
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Declared paths: "/a/b", "/tags/[]/?", "/\*"
** ======================================================================
*/
void rg_path_free (rg_path *p) {
  free(p->mem);
  p->mem = NULL;
  p->n = 0;
}

int rg_path_parse (rg_path *p, const char *s, int wild, rg_err *e) {
  size_t n = strlen(s), i;
  char *m, *w;
  p->n = 0;
  p->mem = NULL;
  if (n == 0 || s[0] != '/')
    return rg_fail(e, 400, "invalid path '%s': it must start with '/'", s);
  if (!rg_utf8_valid(s, n))
    return rg_fail(e, 400, "invalid path: not valid UTF-8");
  m = (char *)malloc(n + 1);
  if (m == NULL) return rg_fail(e, 500, "out of memory");
  p->mem = m;
  w = m;
  i = 1;
  for (;;) {                         /* one segment per turn */
    const char *start = w;
    while (i < n && s[i] != '/') {
      if (s[i] == '~') {             /* JSON-pointer escapes */
        if (i + 1 < n && s[i + 1] == '0') *w++ = '~';
        else if (i + 1 < n && s[i + 1] == '1') *w++ = '/';
        else goto bad;
        i += 2;
      }
      else *w++ = s[i++];
    }
    *w++ = '\0';
    if (*start == '\0') goto bad;    /* empty segment: "//" or trailing "/" */
    if (p->n == RG_MAX_PATH_SEGS) {
      rg_path_free(p);
      return rg_fail(e, 400, "invalid path '%s': more than %d segments", s,
                     RG_MAX_PATH_SEGS);
    }
    p->seg[p->n++] = start;
    if (i >= n) break;
    i++;                             /* skip '/' */
  }
  if (!wild) {
    int k;
    for (k = 0; k < p->n; k++)
      if (strcmp(p->seg[k], "?") == 0 || strcmp(p->seg[k], "*") == 0 ||
          strcmp(p->seg[k], "[]") == 0)
        goto bad;
  }
  return 0;
bad:
  rg_path_free(p);
  return rg_fail(e, 400, "invalid path '%s'", s);
}

const cJSON *rg_path_get (const cJSON *doc, const rg_path *p) {
  int i;
  const cJSON *v = doc;
  for (i = 0; i < p->n && v != NULL; i++) {
    if (!cJSON_IsObject(v)) return NULL;
    v = cJSON_GetObjectItemCaseSensitive(v, p->seg[i]);
  }
  return v;
}
/* }===================================================================== */


int rg_check_id (const char *s, size_t n, size_t max, const char *what,
                 rg_err *e) {
  size_t i;
  if (n == 0) return rg_fail(e, 400, "%s must not be empty", what);
  if (n > max)
    return rg_fail(e, 400, "%s is %lu bytes long; the limit is %lu", what,
                   (unsigned long)n, (unsigned long)max);
  for (i = 0; i < n; i++) {
    char c = s[i];
    if (c == '/' || c == '\\' || c == '?' || c == '#' || c == '\0')
      return rg_fail(e, 400,
                     "%s must not contain '/', '\\', '?', '#' or NUL", what);
  }
  if (!rg_utf8_valid(s, n))
    return rg_fail(e, 400, "%s is not valid UTF-8", what);
  return 0;
}
