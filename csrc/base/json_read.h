/*
** json_read.h: the scanner of the JSON text reader, shared by its two
** builders.
**
** One recursive-descent reader turns JSON text into values; what it
** builds differs by caller: base/json.c makes cJSON trees, and
** luax/luajson.c pushes Lua values straight onto a stack (the read path of
** every document, which then never builds a tree).  Both builders include
** this scanner, whose functions are static inline so that neither pays a
** call through a pointer, or across files, per token.
**
** The reader is strict: RFC 8259 JSON, UTF-8 checked unless the text is
** `trusted` (written by rg_json_print, as stored items are), integers kept
** exact up to 64 bits.  A fault gives 400 "invalid JSON at byte N: ...".
*/

#ifndef rg_json_read_h
#define rg_json_read_h

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/support.h"

/* The reader's state; builders embed it as the first member of theirs. */
typedef struct rg_jscan {
  const char *s, *p, *end;
  int depth;
  int trusted;                  /* text written by us: skip UTF-8 checks */
  int mutf8;                    /* decoded NUL as C0 80 (cJSON strings) */
  rg_buf *tmp;                  /* decoded strings with escapes */
  rg_err *e;
} rg_jscan;

/* The decimal point of the C locale in force (strtod follows it). */
static inline char rg_js_point (void) {
  const char *p = localeconv()->decimal_point;
  return p && p[0] ? p[0] : '.';
}

static inline int rg_js_fail (rg_jscan *P, const char *what) {
  return rg_fail(P->e, 400, "invalid JSON at byte %lu: %s",
                 (unsigned long)(P->p - P->s) + 1, what);
}

static inline void rg_js_ws (rg_jscan *P) {
  while (P->p < P->end &&
         (*P->p == ' ' || *P->p == '\n' || *P->p == '\r' || *P->p == '\t'))
    P->p++;
}

static inline void rg_js_addutf8 (rg_buf *b, unsigned cp, int mutf8) {
  char u[4];
  if (cp == 0 && mutf8) rg_buf_add(b, "\xC0\x80", 2);
  else rg_buf_add(b, u, rg_utf8_put(u, cp));
}

/*
** Scans a string (P->p at the opening quote).  Without escapes the result
** is a slice of the text; with them it is decoded into P->tmp (NUL as C0 80
** when P->mutf8 is set, as a real NUL otherwise).
*/
static inline int rg_js_string (rg_jscan *P, const char **out, size_t *len) {
  const char *p = P->p + 1, *run = p;
  int escaped = 0;
  if (P->trusted) {
    /* Stored text (written by rg_json_print) holds valid UTF-8 and no raw
    ** control characters: a string without a backslash before its closing
    ** quote is the bytes up to that quote, found at memchr's speed. */
    const char *q = (const char *)memchr(p, '"', (size_t)(P->end - p));
    if (q != NULL && memchr(p, '\\', (size_t)(q - p)) == NULL) {
      *out = p;
      *len = (size_t)(q - p);
      P->p = q + 1;
      return 0;
    }
  }
  for (;;) {
    unsigned char c;
    if (p >= P->end) { P->p = p; return rg_js_fail(P, "unterminated string"); }
    c = (unsigned char)*p;
    if (c == '"') break;
    if (c < 0x20) { P->p = p; return rg_js_fail(P, "control character in string"); }
    if (c >= 0x80) {
      int k = P->trusted ? 1 : rg_utf8_seq((const unsigned char *)p,
                                           (size_t)(P->end - p));
      if (k == 0) { P->p = p; return rg_js_fail(P, "string is not valid UTF-8"); }
      p += k;
      continue;
    }
    if (c != '\\') { p++; continue; }
    if (!escaped) { P->tmp->n = 0; P->tmp->oom = 0; escaped = 1; }
    rg_buf_add(P->tmp, run, (size_t)(p - run));
    if (p + 1 >= P->end) { P->p = p; return rg_js_fail(P, "unterminated string"); }
    {
      unsigned cp;
      const char *why;
      size_t k = rg_unescape(p, P->end, &cp, &why);
      if (k == 0) { P->p = p; return rg_js_fail(P, why); }
      rg_js_addutf8(P->tmp, cp, P->mutf8);
      p += k;
    }
    run = p;
  }
  if (escaped) {
    rg_buf_add(P->tmp, run, (size_t)(p - run));
    if (P->tmp->oom) return rg_fail(P->e, 500, "out of memory");
    *out = P->tmp->p ? P->tmp->p : "";
    *len = P->tmp->n;
  }
  else {
    *out = run;
    *len = (size_t)(p - run);
  }
  P->p = p + 1;
  return 0;
}

/* Scans a number: an exact integer (isint 1) or a double. */
static inline int rg_js_number (rg_jscan *P, int *isint, int64_t *iv, double *dv) {
  const char *p = P->p, *start = p;
  uint64_t acc = 0;
  int neg = 0, overflow = 0, frac = 0;
  if (*p == '-') { neg = 1; p++; }
  if (p >= P->end || *p < '0' || *p > '9') return rg_js_fail(P, "bad number");
  if (*p == '0') p++;
  else {
    while (p < P->end && *p >= '0' && *p <= '9') {
      unsigned dgt = (unsigned)(*p - '0');
      if (acc > (UINT64_MAX - dgt) / 10) overflow = 1;
      else acc = acc * 10 + dgt;
      p++;
    }
  }
  if (p < P->end && *p == '.') {
    frac = 1; p++;
    if (p >= P->end || *p < '0' || *p > '9') { P->p = p; return rg_js_fail(P, "bad number"); }
    while (p < P->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < P->end && (*p == 'e' || *p == 'E')) {
    frac = 1; p++;
    if (p < P->end && (*p == '+' || *p == '-')) p++;
    if (p >= P->end || *p < '0' || *p > '9') { P->p = p; return rg_js_fail(P, "bad number"); }
    while (p < P->end && *p >= '0' && *p <= '9') p++;
  }
  if (!frac && !overflow &&
      (neg ? acc <= (uint64_t)1 << 63 : acc < (uint64_t)1 << 63)) {
    *isint = 1;
    *iv = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  }
  else {
    char small[64], *num = small, dp = rg_js_point();
    size_t n = (size_t)(p - start), i;
    if (n >= sizeof(small)) {
      num = (char *)malloc(n + 1);
      if (num == NULL) return rg_fail(P->e, 500, "out of memory");
    }
    memcpy(num, start, n);
    num[n] = '\0';
    if (dp != '.')
      for (i = 0; i < n; i++) if (num[i] == '.') num[i] = dp;
    *dv = strtod(num, NULL);
    if (num != small) free(num);
    if (*dv == HUGE_VAL || *dv == -HUGE_VAL)
      return rg_js_fail(P, "number out of range");
    *isint = rg_dbl_int(*dv, iv);
  }
  P->p = p;
  return 0;
}

static inline int rg_js_literal (rg_jscan *P, const char *word, size_t n) {
  if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0)
    return rg_js_fail(P, "unexpected character");
  P->p += n;
  return 0;
}

#endif
