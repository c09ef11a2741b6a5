/*
** func.c: the system functions of the query dialect (the date and time
** ones are in time.c) and LIKE.
**
** Every function takes its evaluated arguments and gives a value; as in
** Cosmos DB, arguments of the wrong type give undefined, never an error.
** Strings are UTF-8 and counted in characters (code points): LENGTH,
** SUBSTRING, INDEX_OF and the like measure characters, not bytes.  Case
** mapping (LOWER, UPPER, the case-insensitive options) is Unicode's simple
** mapping through the C library's C.UTF-8 locale, asked for with
** newlocale so that the process's own locale is never touched; where that
** locale is missing, only ASCII letters change case.  RegexMatch uses
** PCRE2 (a Debian package) in UTF mode, with the modifiers i, m, s and x,
** match limits that tell its work (regex_match), and a small cache of
** compiled patterns per query.
**
** Numbers are doubles; the Int* functions take integers (numbers with no
** fraction within the 64-bit range) and compute in 64-bit integers, and
** give undefined for anything else, a division by zero included.
*/

#include <locale.h>
#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wctype.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "sql/sql_int.h"

#define F(name, fn, min, max) { name, fn, min, max, 0 }
#define N(name, fn, min, max) { name, fn, min, max, 1 }
#define MANY 1000

const rg_qfinfo rg_qfuncs[] = {
  F("COUNT", RG_QF_COUNT, 1, 1), F("SUM", RG_QF_SUM, 1, 1),
  F("MIN", RG_QF_MIN, 1, 1), F("MAX", RG_QF_MAX, 1, 1),
  F("AVG", RG_QF_AVG, 1, 1),
  F("IS_DEFINED", RG_QF_IS_DEFINED, 1, 1), F("IS_NULL", RG_QF_IS_NULL, 1, 1),
  F("IS_STRING", RG_QF_IS_STRING, 1, 1), F("IS_NUMBER", RG_QF_IS_NUMBER, 1, 1),
  F("IS_BOOL", RG_QF_IS_BOOL, 1, 1), F("IS_ARRAY", RG_QF_IS_ARRAY, 1, 1),
  F("IS_OBJECT", RG_QF_IS_OBJECT, 1, 1),
  F("IS_PRIMITIVE", RG_QF_IS_PRIMITIVE, 1, 1),
  F("IS_FINITE_NUMBER", RG_QF_IS_FINITE_NUMBER, 1, 1),
  F("IS_INTEGER", RG_QF_IS_INTEGER, 1, 1),
  F("IS_DATETIME", RG_QF_IS_DATETIME, 1, 1),
  F("ARRAY_CONTAINS", RG_QF_ARRAY_CONTAINS, 2, 3),
  F("ARRAY_CONTAINS_ANY", RG_QF_ARRAY_CONTAINS_ANY, 2, MANY),
  F("ARRAY_CONTAINS_ALL", RG_QF_ARRAY_CONTAINS_ALL, 2, MANY),
  F("ARRAY_LENGTH", RG_QF_ARRAY_LENGTH, 1, 1),
  F("ARRAY_CONCAT", RG_QF_ARRAY_CONCAT, 2, MANY),
  F("ARRAY_SLICE", RG_QF_ARRAY_SLICE, 2, 3),
  F("ARRAY_MAX", RG_QF_ARRAY_MAX, 1, 1), F("ARRAY_MIN", RG_QF_ARRAY_MIN, 1, 1),
  F("ARRAY_SUM", RG_QF_ARRAY_SUM, 1, 1), F("ARRAY_AVG", RG_QF_ARRAY_AVG, 1, 1),
  F("ARRAY_MEDIAN", RG_QF_ARRAY_MEDIAN, 1, 1),
  F("CHOOSE", RG_QF_CHOOSE, 2, MANY),
  F("OBJECTTOARRAY", RG_QF_OBJECTTOARRAY, 1, 3),
  F("SETINTERSECT", RG_QF_SETINTERSECT, 2, 2),
  F("SETUNION", RG_QF_SETUNION, 2, 2),
  F("SETDIFFERENCE", RG_QF_SETDIFFERENCE, 2, 2),
  F("SETEQUAL", RG_QF_SETEQUAL, 2, 2),
  F("STARTSWITH", RG_QF_STARTSWITH, 2, 3), F("ENDSWITH", RG_QF_ENDSWITH, 2, 3),
  F("CONTAINS", RG_QF_CONTAINS, 2, 3),
  F("CONTAINS_ALL_CI", RG_QF_CONTAINS_ALL_CI, 2, MANY),
  F("CONTAINS_ALL_CS", RG_QF_CONTAINS_ALL_CS, 2, MANY),
  F("CONTAINS_ANY_CI", RG_QF_CONTAINS_ANY_CI, 2, MANY),
  F("CONTAINS_ANY_CS", RG_QF_CONTAINS_ANY_CS, 2, MANY),
  F("LOWER", RG_QF_LOWER, 1, 1), F("UPPER", RG_QF_UPPER, 1, 1),
  F("LENGTH", RG_QF_LENGTH, 1, 1), F("CONCAT", RG_QF_CONCAT, 2, MANY),
  F("SUBSTRING", RG_QF_SUBSTRING, 3, 3), F("LEFT", RG_QF_LEFT, 2, 2),
  F("RIGHT", RG_QF_RIGHT, 2, 2), F("LTRIM", RG_QF_LTRIM, 1, 2),
  F("RTRIM", RG_QF_RTRIM, 1, 2), F("TRIM", RG_QF_TRIM, 1, 2),
  F("INDEX_OF", RG_QF_INDEX_OF, 2, 3),
  F("LASTINDEXOF", RG_QF_LASTINDEXOF, 2, 3),
  F("REPLACE", RG_QF_REPLACE, 3, 3), F("REPLICATE", RG_QF_REPLICATE, 2, 2),
  F("REVERSE", RG_QF_REVERSE, 1, 1),
  F("STRINGEQUALS", RG_QF_STRINGEQUALS, 2, 3),
  F("REGEXMATCH", RG_QF_REGEXMATCH, 2, 3),
  F("STRINGJOIN", RG_QF_STRINGJOIN, 2, 2),
  F("STRINGSPLIT", RG_QF_STRINGSPLIT, 2, 2),
  F("STRINGTOARRAY", RG_QF_STRINGTOARRAY, 1, 1),
  F("STRINGTOBOOLEAN", RG_QF_STRINGTOBOOLEAN, 1, 1),
  F("STRINGTONULL", RG_QF_STRINGTONULL, 1, 1),
  F("STRINGTONUMBER", RG_QF_STRINGTONUMBER, 1, 1),
  F("STRINGTOOBJECT", RG_QF_STRINGTOOBJECT, 1, 1),
  F("TOSTRING", RG_QF_TOSTRING, 1, 1),
  F("ABS", RG_QF_ABS, 1, 1), F("ACOS", RG_QF_ACOS, 1, 1),
  F("ASIN", RG_QF_ASIN, 1, 1), F("ATAN", RG_QF_ATAN, 1, 1),
  F("ATN2", RG_QF_ATN2, 2, 2), F("CEILING", RG_QF_CEILING, 1, 1),
  F("COS", RG_QF_COS, 1, 1), F("COT", RG_QF_COT, 1, 1),
  F("DEGREES", RG_QF_DEGREES, 1, 1), F("EXP", RG_QF_EXP, 1, 1),
  F("FLOOR", RG_QF_FLOOR, 1, 1), F("LOG", RG_QF_LOG, 1, 2),
  F("LOG10", RG_QF_LOG10, 1, 1), F("PI", RG_QF_PI, 0, 0),
  F("POWER", RG_QF_POWER, 2, 2), F("RADIANS", RG_QF_RADIANS, 1, 1),
  N("RAND", RG_QF_RAND, 0, 0), F("ROUND", RG_QF_ROUND, 1, 1),
  F("SIGN", RG_QF_SIGN, 1, 1), F("SIN", RG_QF_SIN, 1, 1),
  F("SQRT", RG_QF_SQRT, 1, 1), F("SQUARE", RG_QF_SQUARE, 1, 1),
  F("TAN", RG_QF_TAN, 1, 1), F("TRUNC", RG_QF_TRUNC, 1, 1),
  F("NUMBERBIN", RG_QF_NUMBERBIN, 1, 2),
  F("INTADD", RG_QF_INTADD, 2, 2), F("INTSUB", RG_QF_INTSUB, 2, 2),
  F("INTMUL", RG_QF_INTMUL, 2, 2), F("INTDIV", RG_QF_INTDIV, 2, 2),
  F("INTMOD", RG_QF_INTMOD, 2, 2), F("INTBITAND", RG_QF_INTBITAND, 2, 2),
  F("INTBITOR", RG_QF_INTBITOR, 2, 2), F("INTBITXOR", RG_QF_INTBITXOR, 2, 2),
  F("INTBITNOT", RG_QF_INTBITNOT, 1, 1),
  F("INTBITLEFTSHIFT", RG_QF_INTBITLEFTSHIFT, 2, 2),
  F("INTBITRIGHTSHIFT", RG_QF_INTBITRIGHTSHIFT, 2, 2),
  N("GETCURRENTDATETIME", RG_QF_GETCURRENTDATETIME, 0, 0),
  N("GETCURRENTDATETIMESTATIC", RG_QF_GETCURRENTDATETIMESTATIC, 0, 0),
  N("GETCURRENTTICKS", RG_QF_GETCURRENTTICKS, 0, 0),
  N("GETCURRENTTICKSSTATIC", RG_QF_GETCURRENTTICKSSTATIC, 0, 0),
  N("GETCURRENTTIMESTAMP", RG_QF_GETCURRENTTIMESTAMP, 0, 0),
  N("GETCURRENTTIMESTAMPSTATIC", RG_QF_GETCURRENTTIMESTAMPSTATIC, 0, 0),
  N("NOW", RG_QF_NOW, 0, 2), N("AGO", RG_QF_AGO, 2, 2),
  F("DATETIMEADD", RG_QF_DATETIMEADD, 3, 3),
  F("DATETIMEPART", RG_QF_DATETIMEPART, 2, 2),
  F("DATETIMEDIFF", RG_QF_DATETIMEDIFF, 3, 3),
  F("DATETIMEBIN", RG_QF_DATETIMEBIN, 2, 4),
  F("DATETIMEFROMPARTS", RG_QF_DATETIMEFROMPARTS, 3, 7),
  F("DATETIMEFORMAT", RG_QF_DATETIMEFORMAT, 2, 2),
  F("DATETIMETOTICKS", RG_QF_DATETIMETOTICKS, 1, 1),
  F("DATETIMETOTIMESTAMP", RG_QF_DATETIMETOTIMESTAMP, 1, 1),
  F("TICKSTODATETIME", RG_QF_TICKSTODATETIME, 1, 1),
  F("TIMESTAMPTODATETIME", RG_QF_TIMESTAMPTODATETIME, 1, 1),
  F("YEAR", RG_QF_YEAR, 1, 1), F("MONTH", RG_QF_MONTH, 1, 1),
  F("DAY", RG_QF_DAY, 1, 1),
  F("IIF", RG_QF_IIF, 3, 3), F("DOCUMENTID", RG_QF_DOCUMENTID, 1, 1),
  /* full-text search (fts.c) */
  F("FULLTEXTCONTAINS", RG_QF_FULLTEXTCONTAINS, 2, 2),
  F("FULLTEXTCONTAINSALL", RG_QF_FULLTEXTCONTAINSALL, 2, MANY),
  F("FULLTEXTCONTAINSANY", RG_QF_FULLTEXTCONTAINSANY, 2, MANY),
  N("FULLTEXTSCORE", RG_QF_FULLTEXTSCORE, 2, MANY),
  N("RRF", RG_QF_RRF, 2, MANY),
  F("VECTORDISTANCE", RG_QF_VECTORDISTANCE, 2, 4),
  { NULL, 0, 0, 0, 0 }
};


/*
** {=====================================================================
** Characters
** ======================================================================
*/
/* Decodes the character at s (valid UTF-8); returns its length. */
static size_t utf8_get (const char *s, size_t n, unsigned *cp) {
  const unsigned char *p = (const unsigned char *)s;
  int k = rg_utf8_seq(p, n), i;
  if (k <= 0) { *cp = p[0]; return 1; }
  if (k == 1) { *cp = p[0]; return 1; }
  *cp = p[0] & (0x3Fu >> (k - 1));
  for (i = 1; i < k; i++) *cp = (*cp << 6) | (p[i] & 0x3F);
  return (size_t)k;
}

/* Characters (code points) in UTF-8 bytes. */
static size_t utf8_len (const char *s, size_t n) {
  size_t i, c = 0;
  for (i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

/* Byte offset of character `k` (clamped to the end). */
static size_t utf8_off (const char *s, size_t n, size_t k) {
  size_t i = 0;
  while (i < n && k > 0) {
    i++;
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    k--;
  }
  return i;
}

/* The C.UTF-8 locale, made once per process and freed when the library
** is unloaded (a Lua state closing unloads its C modules). */
static pthread_once_t case_once = PTHREAD_ONCE_INIT;
static locale_t case_loc;

static void case_init (void) {
  case_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
  if (case_loc == (locale_t)0)
    case_loc = newlocale(LC_CTYPE_MASK, "C.utf8", (locale_t)0);
}

__attribute__((destructor)) static void case_done (void) {
  if (case_loc != (locale_t)0) freelocale(case_loc);
  case_loc = (locale_t)0;
}

static locale_t case_locale (void) {
  pthread_once(&case_once, case_init);
  return case_loc;
}

static unsigned map_case (unsigned cp, int upper) {
  locale_t loc;
  if (cp < 0x80) {
    if (upper && cp >= 'a' && cp <= 'z') return cp - 32;
    if (!upper && cp >= 'A' && cp <= 'Z') return cp + 32;
    return cp;
  }
  if ((loc = case_locale()) == (locale_t)0) return cp;
  return (unsigned)(upper ? towupper_l((wint_t)cp, loc)
                          : towlower_l((wint_t)cp, loc));
}

/* The string with its case mapped, in the scratch arena (NULL: oom). */
static char *case_str (rg_qctx *x, const char *s, size_t n, int upper,
                       size_t *outn) {
  char *w = (char *)rg_arena_alloc(x->scratch, n * 2 + 4), *o = w;
  size_t i = 0;
  if (w == NULL) return NULL;
  while (i < n) {
    unsigned cp;
    size_t k = utf8_get(s + i, n - i, &cp);
    unsigned m = map_case(cp, upper);
    size_t need = m < 0x80 ? 1 : m < 0x800 ? 2 : m < 0x10000 ? 3 : 4;
    if (need > k && (size_t)(o - w) + need > n * 2 + 4) break;
    if (m == cp || (m >= 0xD800 && m < 0xE000)) { memcpy(o, s + i, k); o += k; }
    else o += rg_utf8_put(o, m);
    i += k;
  }
  *outn = (size_t)(o - w);
  return w;
}
/* }===================================================================== */


/*
** {=====================================================================
** LIKE
** ======================================================================
*/
/* Does the class at p ("[...]", p[0] == '[') match cp?  *plen receives
** its length; 0 when the bracket is not closed (then it is a literal). */
static int like_class (const char *p, size_t n, unsigned cp, size_t *plen) {
  size_t i = 1;
  int neg = 0, hit = 0;
  if (i < n && p[i] == '^') { neg = 1; i++; }
  if (i < n && p[i] == ']') {        /* a leading ] is literal */
    hit |= cp == ']';
    i++;
  }
  while (i < n && p[i] != ']') {
    unsigned a, b;
    size_t k = utf8_get(p + i, n - i, &a);
    i += k;
    if (i + 1 < n && p[i] == '-' && p[i + 1] != ']') {
      k = utf8_get(p + i + 1, n - i - 1, &b);
      i += 1 + k;
      hit |= cp >= a && cp <= b;
    }
    else hit |= cp == a;
  }
  if (i >= n) { *plen = 0; return 0; }
  *plen = i + 1;
  return neg ? !hit : hit;
}

/*
** A pattern is a sequence of elements, each matching one character (a
** literal, an escaped character, _, a class [...]), and stars (%).  The
** stars cut it into segments: the first must match where the string
** begins, the last where it ends (so its place is known: as many
** characters before the end as it has elements), and each one between
** at the leftmost place after the one before it (taking the leftmost
** place never loses a match the others could make).  So a pattern with
** one or two stars, or whose middle segments find their place at once,
** matches in time linear in the string; the search for a middle segment
** can cost its length at every place of the string, and that work is
** counted (rg_qctx_work: charged, and stopped by the query's time limit).
*/
enum { E_STAR, E_LIT, E_ANY, E_CLASS };

typedef struct like_state {
  const char *s, *p;
  size_t n, pn;
  unsigned esc;
  uint64_t steps;              /* elements compared */
  rg_qctx *x;
  int stop;                    /* the query must stop */
} like_state;

/* The element at p[pi]: its kind (E_*), its code point (E_LIT); returns
** where the next begins. */
static size_t like_elem (const like_state *L, size_t pi, int *kind,
                         unsigned *cp) {
  const char *p = L->p;
  size_t pn = L->pn, pk, cl;
  unsigned pc;
  pk = utf8_get(p + pi, pn - pi, &pc);
  if (L->esc && pc == L->esc && pi + pk < pn) {   /* an escaped character */
    size_t lk = utf8_get(p + pi + pk, pn - pi - pk, cp);
    *kind = E_LIT;
    return pi + pk + lk;
  }
  if (pc == '%') { *kind = E_STAR; return pi + pk; }
  if (pc == '_') { *kind = E_ANY; return pi + pk; }
  if (pc == '[') {
    like_class(p + pi, pn - pi, 0, &cl);
    if (cl) { *kind = E_CLASS; return pi + cl; }   /* unclosed: a literal */
  }
  *kind = E_LIT;
  *cp = pc;
  return pi + pk;
}

/* Counts a step; every 2^20 of them, asks whether the query must stop. */
static int like_step (like_state *L) {
  if ((++L->steps & 0xFFFFF) == 0 && rg_qctx_late(L->x)) L->stop = 1;
  return L->stop;
}

/* Does the segment p[a..b) (no stars) match the string at *si?  On a match
** *si moves past it. */
static int like_seg (like_state *L, size_t a, size_t b, size_t *si) {
  size_t i = *si;
  while (a < b) {
    unsigned cp = 0, sc;
    size_t cl;
    int kind, ok;
    size_t next = like_elem(L, a, &kind, &cp);
    if (i >= L->n || like_step(L)) return 0;
    i += utf8_get(L->s + i, L->n - i, &sc);
    switch (kind) {
      case E_ANY: ok = 1; break;
      case E_CLASS: ok = like_class(L->p + a, L->pn - a, sc, &cl); break;
      default: ok = sc == cp; break;
    }
    if (!ok) return 0;
    a = next;
  }
  *si = i;
  return 1;
}

/* The next star at or after pi (pn: none); *after, where what follows
** it begins. */
static size_t like_star (const like_state *L, size_t pi, size_t *after) {
  while (pi < L->pn) {
    int kind;
    unsigned cp;
    size_t next = like_elem(L, pi, &kind, &cp);
    if (kind == E_STAR) { *after = next; return pi; }
    pi = next;
  }
  *after = L->pn;
  return L->pn;
}

int rg_like (rg_qctx *x, const char *s, size_t n, const char *p, size_t pn,
             unsigned esc) {
  like_state L;
  size_t si = 0, end = n, first, after, last = (size_t)-1, a, m = 0, chars;
  int ok = 1;
  L.s = s; L.n = n; L.p = p; L.pn = pn; L.esc = esc;
  L.steps = 0; L.x = x; L.stop = 0;
  first = like_star(&L, 0, &after);
  if (first == pn) {                 /* no star: the whole string */
    ok = like_seg(&L, 0, pn, &si) && si == n;
    goto done;
  }
  if (!like_seg(&L, 0, first, &si)) { ok = 0; goto done; }
  for (a = after; a < pn; ) {        /* the last star */
    size_t next, nafter;
    next = like_star(&L, a, &nafter);
    if (next == pn) break;
    last = next;
    a = nafter;
  }
  if (last == (size_t)-1) last = first;
  like_star(&L, last, &a);           /* the last segment: p[a..pn) */
  {
    size_t i;
    int kind;
    unsigned cp;
    for (i = a; i < pn; i = like_elem(&L, i, &kind, &cp)) m++;
    for (i = si, chars = 0; i < n; chars++) {
      unsigned sc;
      i += utf8_get(s + i, n - i, &sc);
    }
    L.steps += chars;
    if (chars < m) { ok = 0; goto done; }
    for (end = si, i = 0; i < chars - m; i++) {
      unsigned sc;
      end += utf8_get(s + end, n - end, &sc);
    }
    i = end;
    if (!like_seg(&L, a, pn, &i)) { ok = 0; goto done; }
  }
  L.n = end;                         /* the middle segments, leftmost */
  for (a = after; a < pn && !L.stop; ) {
    size_t star = like_star(&L, a, &after);
    if (star > last) break;
    if (star > a) {
      size_t at = si;
      for (;;) {
        size_t i = at;
        unsigned sc;
        if (like_seg(&L, a, star, &i)) { si = i; break; }
        if (at >= end || L.stop) { ok = 0; goto done; }
        at += utf8_get(s + at, end - at, &sc);
      }
    }
    if (star == last) break;
    a = after;
  }
done:
  if (rg_qctx_work(x, L.steps, (uint64_t)n + pn) || L.stop) return -1;
  return ok;
}
/* }===================================================================== */


/*
** {=====================================================================
** Helpers
** ======================================================================
*/
static int is_bool (const rg_qv *v) {
  return v->t == RG_QV_TRUE || v->t == RG_QV_FALSE;
}

/* An optional boolean flag argument: 0/1, or -1 when it is not one. */
static int flag_arg (const rg_qv *a, int n, int i) {
  if (n <= i) return 0;
  if (!is_bool(&a[i])) return -1;
  return a[i].t == RG_QV_TRUE;
}

/* An integer argument (a number with no fraction within int64). */
static int int_arg (const rg_qv *v, int64_t *out) {
  if (v->t != RG_QV_NUM || v->d != v->d || floor(v->d) != v->d ||
      v->d < -9223372036854775808.0 || v->d > 9223372036854775808.0)
    return 0;
  *out = v->d >= 9223372036854775807.0 ? INT64_MAX : (int64_t)v->d;
  return 1;
}

static char *dup_str (rg_qctx *x, const char *s, size_t n) {
  return rg_arena_dup(x->scratch, n ? s : "", n);
}

/* A string made of pieces, in the scratch arena. */
static void set_built (rg_qctx *x, const rg_buf *b, rg_qv *out) {
  char *s;
  if (b->oom) { x->scratch->oom = 1; return; }
  if ((s = dup_str(x, b->p, b->n)) == NULL) return;
  rg_qv_str(out, s, b->n);
}

static int bytes_eq (rg_qctx *x, const char *a, size_t an, const char *b,
                     size_t bn, int icase) {
  if (!icase) return an == bn && (an == 0 || memcmp(a, b, an) == 0);
  {
    size_t la, lb;
    char *fa = case_str(x, a, an, 0, &la), *fb = case_str(x, b, bn, 0, &lb);
    if (fa == NULL || fb == NULL) return 0;
    return la == lb && (la == 0 || memcmp(fa, fb, la) == 0);
  }
}

/* Byte offset of the first occurrence of w in s at or after byte `from`,
** or -1. */
static long find (const char *s, size_t n, const char *w, size_t wn,
                  size_t from) {
  size_t i;
  if (wn == 0) return from <= n ? (long)from : -1;
  for (i = from; i + wn <= n; i++)
    if (s[i] == w[0] && memcmp(s + i, w, wn) == 0) return (long)i;
  return -1;
}

/* A JSON value of type `want` parsed from a string argument, or
** undefined. */
static void parse_json (rg_qctx *x, const rg_qv *s, int want, rg_qv *out) {
  rg_qv_undef(out);
  if (s->t != RG_QV_STR) return;
  if (rg_qv_parse(x->scratch, s->s, s->n, out) == 0 && out->t != want)
    rg_qv_undef(out);
}
/* }===================================================================== */


/*
** {=====================================================================
** Strings
** ======================================================================
*/
static int is_space (unsigned c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f' || c == 0xA0 || c == 0x2028 || c == 0x2029 ||
         c == 0x3000 || (c >= 0x2000 && c <= 0x200A);
}

/* Is character cp in the set `set` (UTF-8), or a space when set is NULL? */
static int in_set (unsigned cp, const rg_qv *set) {
  size_t i = 0;
  if (set == NULL) return is_space(cp);
  while (i < set->n) {
    unsigned c;
    i += utf8_get(set->s + i, set->n - i, &c);
    if (c == cp) return 1;
  }
  return 0;
}

static void trim (const rg_qv *a, int n, int left, int right, rg_qv *out) {
  const rg_qv *set = NULL;
  size_t b = 0, e;
  if (a[0].t != RG_QV_STR) return;
  if (n > 1) {
    if (a[1].t != RG_QV_STR) return;
    set = &a[1];
  }
  e = a[0].n;
  if (left)
    while (b < e) {
      unsigned c;
      size_t k = utf8_get(a[0].s + b, e - b, &c);
      if (!in_set(c, set)) break;
      b += k;
    }
  if (right)
    while (e > b) {
      size_t s = e - 1;
      unsigned c;
      while (s > b && ((unsigned char)a[0].s[s] & 0xC0) == 0x80) s--;
      utf8_get(a[0].s + s, e - s, &c);
      if (!in_set(c, set)) break;
      e = s;
    }
  rg_qv_str(out, a[0].s + b, e - b);
}

/* A count argument: a whole number (truncated), or -1. */
static double count_arg (const rg_qv *v) {
  if (v->t != RG_QV_NUM || v->d != v->d) return -1;
  return v->d < 0 ? -1 : floor(v->d);
}

static void contains_many (rg_qctx *x, const rg_qv *a, int n, int all,
                           int icase, rg_qv *out) {
  int i, undef_seen = 0;
  if (a[0].t != RG_QV_STR) return;
  for (i = 1; i < n; i++) {
    int hit = 0;
    if (a[i].t != RG_QV_STR) { undef_seen = 1; continue; }
    if (icase) {
      size_t ls, lw;
      char *fs = case_str(x, a[0].s, a[0].n, 0, &ls);
      char *fw = case_str(x, a[i].s, a[i].n, 0, &lw);
      if (fs == NULL || fw == NULL) return;
      hit = find(fs, ls, fw, lw, 0) >= 0;
    }
    else hit = find(a[0].s, a[0].n, a[i].s, a[i].n, 0) >= 0;
    if (all && !hit) { rg_qv_bool(out, 0); return; }
    if (!all && hit) { rg_qv_bool(out, 1); return; }
  }
  if (!undef_seen) rg_qv_bool(out, all);
}

static void string_fn (rg_qctx *x, int fn, const rg_qv *a, int n,
                       rg_qv *out) {
  rg_buf b;
  size_t k;
  switch (fn) {
    case RG_QF_STARTSWITH: case RG_QF_ENDSWITH: case RG_QF_CONTAINS: {
      int icase = flag_arg(a, n, 2), hit = 0;
      const char *s = a[0].s, *w = a[1].s;
      size_t sn = a[0].n, wn = a[1].n;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR || icase < 0) return;
      if (icase) {
        if ((s = case_str(x, s, sn, 0, &sn)) == NULL ||
            (w = case_str(x, w, wn, 0, &wn)) == NULL)
          return;
      }
      if (wn <= sn) {
        if (fn == RG_QF_STARTSWITH) hit = wn == 0 || memcmp(s, w, wn) == 0;
        else if (fn == RG_QF_ENDSWITH)
          hit = wn == 0 || memcmp(s + sn - wn, w, wn) == 0;
        else hit = find(s, sn, w, wn, 0) >= 0;
      }
      rg_qv_bool(out, hit);
      return;
    }
    case RG_QF_CONTAINS_ALL_CI: contains_many(x, a, n, 1, 1, out); return;
    case RG_QF_CONTAINS_ALL_CS: contains_many(x, a, n, 1, 0, out); return;
    case RG_QF_CONTAINS_ANY_CI: contains_many(x, a, n, 0, 1, out); return;
    case RG_QF_CONTAINS_ANY_CS: contains_many(x, a, n, 0, 0, out); return;
    case RG_QF_LOWER: case RG_QF_UPPER: {
      char *s;
      if (a[0].t != RG_QV_STR) return;
      if ((s = case_str(x, a[0].s, a[0].n, fn == RG_QF_UPPER, &k)) == NULL)
        return;
      rg_qv_str(out, s, k);
      return;
    }
    case RG_QF_LENGTH:
      if (a[0].t == RG_QV_STR) rg_qv_num(out, (double)utf8_len(a[0].s, a[0].n));
      return;
    case RG_QF_CONCAT: {
      int i;
      rg_buf_init(&b);
      for (i = 0; i < n; i++) {
        if (a[i].t != RG_QV_STR) { rg_buf_free(&b); return; }
        rg_buf_add(&b, a[i].s, a[i].n);
      }
      set_built(x, &b, out);
      rg_buf_free(&b);
      return;
    }
    case RG_QF_SUBSTRING: {
      double st, len;
      size_t b0, b1;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_NUM || a[2].t != RG_QV_NUM)
        return;
      st = a[1].d < 0 ? 0 : floor(a[1].d);
      len = a[2].d < 0 ? 0 : floor(a[2].d);
      if (st > 4e9) st = 4e9;
      if (len > 4e9) len = 4e9;
      b0 = utf8_off(a[0].s, a[0].n, (size_t)st);
      b1 = b0 + utf8_off(a[0].s + b0, a[0].n - b0, (size_t)len);
      rg_qv_str(out, a[0].s + b0, b1 - b0);
      return;
    }
    case RG_QF_LEFT: case RG_QF_RIGHT: {
      double len = count_arg(&a[1]);
      size_t chars;
      if (a[0].t != RG_QV_STR || len < 0) return;
      chars = utf8_len(a[0].s, a[0].n);
      if (len > (double)chars) len = (double)chars;
      if (fn == RG_QF_LEFT)
        rg_qv_str(out, a[0].s, utf8_off(a[0].s, a[0].n, (size_t)len));
      else {
        size_t off = utf8_off(a[0].s, a[0].n, chars - (size_t)len);
        rg_qv_str(out, a[0].s + off, a[0].n - off);
      }
      return;
    }
    case RG_QF_LTRIM: trim(a, n, 1, 0, out); return;
    case RG_QF_RTRIM: trim(a, n, 0, 1, out); return;
    case RG_QF_TRIM: trim(a, n, 1, 1, out); return;
    case RG_QF_INDEX_OF: case RG_QF_LASTINDEXOF: {
      size_t from = 0, chars;
      long at = -1;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR) return;
      chars = utf8_len(a[0].s, a[0].n);
      if (fn == RG_QF_INDEX_OF) {
        if (n > 2) {
          if (a[2].t != RG_QV_NUM) return;
          if (a[2].d > (double)chars) { rg_qv_num(out, -1); return; }
          from = a[2].d < 0 ? 0 : (size_t)floor(a[2].d);
        }
        at = find(a[0].s, a[0].n, a[1].s, a[1].n,
                  utf8_off(a[0].s, a[0].n, from));
      }
      else {
        size_t limit = a[0].n, i;
        if (n > 2) {
          double p;
          if (a[2].t != RG_QV_NUM) return;
          p = floor(a[2].d);
          if (p < 0) { rg_qv_num(out, -1); return; }
          if (p < (double)chars)     /* a match ending at or before p */
            limit = utf8_off(a[0].s, a[0].n, (size_t)p + 1);
        }
        for (i = 0; i + a[1].n <= limit; i++)
          if (((unsigned char)a[0].s[i] & 0xC0) != 0x80 &&
              (a[1].n == 0 || memcmp(a[0].s + i, a[1].s, a[1].n) == 0))
            at = (long)i;
      }
      rg_qv_num(out, at < 0 ? -1 : (double)utf8_len(a[0].s, (size_t)at));
      return;
    }
    case RG_QF_REPLACE: {
      size_t i = 0;
      long at;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR || a[2].t != RG_QV_STR)
        return;
      if (a[1].n == 0) { *out = a[0]; return; }
      rg_buf_init(&b);
      while ((at = find(a[0].s, a[0].n, a[1].s, a[1].n, i)) >= 0) {
        rg_buf_add(&b, a[0].s + i, (size_t)at - i);
        rg_buf_add(&b, a[2].s, a[2].n);
        i = (size_t)at + a[1].n;
      }
      rg_buf_add(&b, a[0].s + i, a[0].n - i);
      set_built(x, &b, out);
      rg_buf_free(&b);
      return;
    }
    case RG_QF_REPLICATE: {
      double times;
      size_t i;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_NUM || a[1].d < 0) return;
      times = floor(a[1].d);
      if (times * (double)utf8_len(a[0].s, a[0].n) > 10000) return;
      rg_buf_init(&b);
      for (i = 0; i < (size_t)times; i++) rg_buf_add(&b, a[0].s, a[0].n);
      set_built(x, &b, out);
      rg_buf_free(&b);
      return;
    }
    case RG_QF_REVERSE: {
      char *w;
      size_t i = 0;
      if (a[0].t != RG_QV_STR) return;
      if ((w = (char *)rg_arena_alloc(x->scratch, a[0].n + 1)) == NULL)
        return;
      while (i < a[0].n) {
        unsigned c;
        size_t kk = utf8_get(a[0].s + i, a[0].n - i, &c);
        memcpy(w + a[0].n - i - kk, a[0].s + i, kk);
        i += kk;
      }
      rg_qv_str(out, w, a[0].n);
      return;
    }
    case RG_QF_STRINGEQUALS: {
      int icase = flag_arg(a, n, 2);
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR || icase < 0) return;
      rg_qv_bool(out, bytes_eq(x, a[0].s, a[0].n, a[1].s, a[1].n, icase));
      return;
    }
    case RG_QF_STRINGJOIN: {
      const rg_qnode *c;
      uint32_t i;
      if (a[0].t != RG_QV_ARR || a[1].t != RG_QV_STR) return;
      rg_buf_init(&b);
      for (i = 0, c = a[0].node + 1; i < a[0].node->n; i++, c += c->size) {
        if (c->t != RG_QV_STR) { rg_buf_free(&b); return; }
        if (i) rg_buf_add(&b, a[1].s, a[1].n);
        rg_buf_add(&b, c->s, c->n);
      }
      set_built(x, &b, out);
      rg_buf_free(&b);
      return;
    }
    case RG_QF_STRINGSPLIT: {
      rg_qv *items;
      size_t cnt = 1, i = 0, j = 0;
      long at;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR) return;
      if (a[1].n)
        for (i = 0; (at = find(a[0].s, a[0].n, a[1].s, a[1].n, i)) >= 0;
             i = (size_t)at + a[1].n)
          cnt++;
      if ((items = (rg_qv *)rg_arena_alloc(x->scratch, cnt *
                                           sizeof(rg_qv))) == NULL)
        return;
      i = 0;
      if (a[1].n)
        while ((at = find(a[0].s, a[0].n, a[1].s, a[1].n, i)) >= 0) {
          rg_qv_str(&items[j++], a[0].s + i, (size_t)at - i);
          i = (size_t)at + a[1].n;
        }
      rg_qv_str(&items[j++], a[0].s + i, a[0].n - i);
      rg_qv_build(x->scratch, 0, items, NULL, NULL, (int)j, out);
      return;
    }
    case RG_QF_STRINGTOARRAY: parse_json(x, &a[0], RG_QV_ARR, out); return;
    case RG_QF_STRINGTOOBJECT: parse_json(x, &a[0], RG_QV_OBJ, out); return;
    case RG_QF_STRINGTONUMBER: parse_json(x, &a[0], RG_QV_NUM, out); return;
    case RG_QF_STRINGTONULL: parse_json(x, &a[0], RG_QV_NULL, out); return;
    case RG_QF_STRINGTOBOOLEAN:
      parse_json(x, &a[0], RG_QV_TRUE, out);
      if (out->t == RG_QV_UNDEF) parse_json(x, &a[0], RG_QV_FALSE, out);
      return;
    case RG_QF_TOSTRING:
      if (a[0].t == RG_QV_UNDEF) return;
      if (a[0].t == RG_QV_STR) { *out = a[0]; return; }
      rg_buf_init(&b);
      if (a[0].t == RG_QV_NUM && a[0].d != a[0].d) rg_buf_adds(&b, "NaN");
      else if (a[0].t == RG_QV_NUM && a[0].d == HUGE_VAL)
        rg_buf_adds(&b, "Infinity");
      else if (a[0].t == RG_QV_NUM && a[0].d == -HUGE_VAL)
        rg_buf_adds(&b, "-Infinity");
      else if (a[0].t == RG_QV_ARR || a[0].t == RG_QV_OBJ) {
        rg_qnode tmp;
        rg_qv c = a[0];
        c.node = rg_qv_node(&a[0], &tmp);
        /* compact JSON: print the value rebuilt without its raw text */
        {
          rg_qv built;
          if (rg_qv_build(x->scratch, 0, &c, NULL, NULL, 1, &built) == 0) {
            rg_qnode *nd = (rg_qnode *)built.node;
            size_t i2;
            for (i2 = 1; i2 < nd->size; i2++) nd[i2].raw = NULL;
            rg_qv_of_node(&c, nd + 1);
            rg_qv_print(&b, &c);
          }
        }
      }
      else rg_qv_print(&b, &a[0]);
      set_built(x, &b, out);
      rg_buf_free(&b);
      return;
    default: return;
  }
}

/* RegexMatch: compiled patterns are cached per query. */
#define RX_CACHE 4
#define RX_MIN      1000             /* a match's free steps: its input, */
#define RX_TIER     8                /* then tiers of 8 times more, */
#define RX_MAX      10000000u        /* up to 10^7 (about 0.3 s) */
#define RX_MAX_TEXT "10^7"
#define RX_HEAP_KB  65536            /* backtracking memory: 64 MiB */
typedef struct rxentry {
  char *pat;
  size_t n;
  uint32_t opts;
  pcre2_code *code;
} rxentry;

struct rg_qrx {
  rxentry e[RX_CACHE];
  int next;
  pcre2_match_data *md;
  pcre2_match_context *mc;
};

void rg_qrx_free (struct rg_qrx *rx) {
  int i;
  if (rx == NULL) return;
  for (i = 0; i < RX_CACHE; i++) {
    free(rx->e[i].pat);
    pcre2_code_free(rx->e[i].code);
  }
  pcre2_match_data_free(rx->md);
  pcre2_match_context_free(rx->mc);
  free(rx);
}

static void regex_match (rg_qctx *x, const rg_qv *a, int n, rg_qv *out) {
  struct rg_qrx *rx;
  uint32_t opts = PCRE2_UTF;
  rxentry *en = NULL;
  size_t i;
  int rc;
  if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR) return;
  if (n > 2) {
    if (a[2].t != RG_QV_STR) return;
    for (i = 0; i < a[2].n; i++)
      switch (a[2].s[i]) {
        case 'i': opts |= PCRE2_CASELESS; break;
        case 'm': opts |= PCRE2_MULTILINE; break;
        case 's': opts |= PCRE2_DOTALL; break;
        case 'x': opts |= PCRE2_EXTENDED; break;
        default: return;
      }
  }
  if (x->rx == NULL) {
    if ((x->rx = (struct rg_qrx *)calloc(1, sizeof(struct rg_qrx))) == NULL) {
      x->scratch->oom = 1;
      return;
    }
  }
  rx = x->rx;
  for (i = 0; i < RX_CACHE; i++)
    if (rx->e[i].pat && rx->e[i].opts == opts && rx->e[i].n == a[1].n &&
        memcmp(rx->e[i].pat, a[1].s, a[1].n) == 0) {
      en = &rx->e[i];
      break;
    }
  if (en == NULL) {
    int err;
    PCRE2_SIZE off;
    en = &rx->e[rx->next];
    rx->next = (rx->next + 1) % RX_CACHE;
    free(en->pat);
    pcre2_code_free(en->code);
    memset(en, 0, sizeof(*en));
    if ((en->pat = (char *)malloc(a[1].n + 1)) == NULL) {
      x->scratch->oom = 1;
      return;
    }
    memcpy(en->pat, a[1].s, a[1].n);
    en->n = a[1].n;
    en->opts = opts;
    en->code = pcre2_compile((PCRE2_SPTR)a[1].s, a[1].n, opts, &err, &off,
                             NULL);
  }
  if (en->code == NULL) return;      /* not a pattern: undefined */
  if (rx->md == NULL) {
    rx->md = pcre2_match_data_create(1, NULL);
    rx->mc = pcre2_match_context_create(NULL);
    if (rx->md == NULL || rx->mc == NULL) { x->scratch->oom = 1; return; }
    pcre2_set_heap_limit(rx->mc, RX_HEAP_KB);
  }
  /*
  ** PCRE2 backtracks, and tells its work only by failing past a limit: the
  ** match is tried under a limit of the input's length (free: a linear
  ** pass), then under limits RX_TIER times larger, up to RX_MAX.  The
  ** limit that sufficed is the work charged (at most RX_TIER times what
  ** was done, and the tries cost at most 1/(RX_TIER - 1) more); past
  ** RX_MAX the query fails rather than call the value not matching.
  */
  {
    uint64_t linear = (uint64_t)a[0].n + a[1].n + RX_MIN, limit = linear;
    for (;;) {
      pcre2_set_match_limit(rx->mc, (uint32_t)limit);
      pcre2_set_depth_limit(rx->mc, (uint32_t)limit);
      rc = pcre2_match(en->code, (PCRE2_SPTR)a[0].s, a[0].n, 0, 0, rx->md,
                       rx->mc);
      if (rc != PCRE2_ERROR_MATCHLIMIT && rc != PCRE2_ERROR_DEPTHLIMIT) break;
      if (rg_qctx_work(x, limit, 0) || limit >= RX_MAX) break;
      limit = limit * RX_TIER > RX_MAX ? RX_MAX : limit * RX_TIER;
    }
    if (rg_qctx_work(x, limit, linear)) return;
  }
  if (rc >= 0) rg_qv_bool(out, 1);
  else if (rc == PCRE2_ERROR_NOMATCH) rg_qv_bool(out, 0);
  else if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
           rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_NOMEMORY)
    rg_qctx_fail(x, 400, "RegexMatch: the pattern backtracks too much on "
                 "this value (more than " RX_MAX_TEXT " steps, or 64 MiB): "
                 "make it more specific");
}
/* }===================================================================== */


/*
** {=====================================================================
** Arrays
** ======================================================================
*/
static int elem_in (const rg_qnode *arr, const rg_qnode *want) {
  const rg_qnode *c;
  uint32_t i;
  for (i = 0, c = arr + 1; i < arr->n; i++, c += c->size)
    if (rg_qnode_equal(c, want)) return 1;
  return 0;
}

static int contains_partial (const rg_qnode *el, const rg_qnode *want) {
  const rg_qnode *c, *d;
  uint32_t i;
  if (want->t != RG_QV_OBJ || el->t != RG_QV_OBJ)
    return rg_qnode_equal(el, want);
  for (i = 0, c = want + 1; i < want->n; i++, c += c->size) {
    d = rg_qnode_member(el, c->key, c->klen);
    if (d == NULL || !rg_qnode_equal(d, c)) return 0;
  }
  return 1;
}

/* An array of the given element nodes. */
static void array_of (rg_qctx *x, const rg_qnode **el, size_t n, rg_qv *out) {
  rg_qv *items = (rg_qv *)rg_arena_alloc(x->scratch, (n + 1) * sizeof(rg_qv));
  size_t i;
  if (items == NULL) return;
  for (i = 0; i < n; i++) rg_qv_of_node(&items[i], el[i]);
  rg_qv_build(x->scratch, 0, items, NULL, NULL, (int)n, out);
}

/* Elements of a (in order, without repeats) kept when (in b) == keep. */
static void set_op (rg_qctx *x, const rg_qnode *a, const rg_qnode *b,
                    int keep, const rg_qnode **acc, size_t *n) {
  const rg_qnode *c;
  uint32_t i;
  size_t k;
  for (i = 0, c = a + 1; i < a->n; i++, c += c->size) {
    int dup = 0;
    if (b && elem_in(b, c) != keep) continue;
    for (k = 0; k < *n && !dup; k++) dup = rg_qnode_equal(acc[k], c);
    if (!dup) acc[(*n)++] = c;
  }
  (void)x;
}

static int num_cmp (const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void array_fn (rg_qctx *x, int fn, const rg_qv *a, int n,
                      rg_qv *out) {
  const rg_qnode *c;
  uint32_t i;
  switch (fn) {
    case RG_QF_ARRAY_LENGTH:
      if (a[0].t == RG_QV_ARR) rg_qv_num(out, (double)a[0].node->n);
      return;
    case RG_QF_ARRAY_CONTAINS: {
      rg_qnode tmp;
      const rg_qnode *want;
      int partial = flag_arg(a, n, 2);
      if (a[0].t != RG_QV_ARR || partial < 0) return;
      if (a[1].t == RG_QV_UNDEF) { rg_qv_bool(out, 0); return; }
      want = rg_qv_node(&a[1], &tmp);
      rg_qv_bool(out, 0);
      for (i = 0, c = a[0].node + 1; i < a[0].node->n; i++, c += c->size)
        if (partial ? contains_partial(c, want) : rg_qnode_equal(c, want)) {
          rg_qv_bool(out, 1);
          break;
        }
      return;
    }
    case RG_QF_ARRAY_CONTAINS_ANY: case RG_QF_ARRAY_CONTAINS_ALL: {
      int k, all = fn == RG_QF_ARRAY_CONTAINS_ALL, undef_seen = 0;
      if (a[0].t != RG_QV_ARR) return;
      for (k = 1; k < n; k++) {
        rg_qnode tmp;
        int hit;
        if (a[k].t == RG_QV_UNDEF) { undef_seen = 1; continue; }
        hit = elem_in(a[0].node, rg_qv_node(&a[k], &tmp));
        if (all && !hit) { rg_qv_bool(out, 0); return; }
        if (!all && hit) { rg_qv_bool(out, 1); return; }
      }
      if (!undef_seen) rg_qv_bool(out, all);
      return;
    }
    case RG_QF_ARRAY_CONCAT: {
      size_t total = 0, m = 0;
      const rg_qnode **el;
      int k;
      for (k = 0; k < n; k++) {
        if (a[k].t != RG_QV_ARR) return;
        total += a[k].node->n;
      }
      if ((el = (const rg_qnode **)rg_arena_alloc(x->scratch, (total + 1) *
                                                  sizeof(*el))) == NULL)
        return;
      for (k = 0; k < n; k++)
        for (i = 0, c = a[k].node + 1; i < a[k].node->n; i++, c += c->size)
          el[m++] = c;
      array_of(x, el, m, out);
      return;
    }
    case RG_QF_ARRAY_SLICE: {
      double len, st;
      size_t cnt, s, e;
      const rg_qnode **el;
      if (a[0].t != RG_QV_ARR || a[1].t != RG_QV_NUM) return;
      cnt = a[0].node->n;
      st = floor(a[1].d);
      if (st < 0) st += (double)cnt;
      if (st < 0) st = 0;
      if (st > (double)cnt) st = (double)cnt;
      s = (size_t)st;
      e = cnt;
      if (n > 2) {
        if (a[2].t != RG_QV_NUM) return;
        len = floor(a[2].d);
        if (len < 0) len = 0;
        if (len < (double)(cnt - s)) e = s + (size_t)len;
      }
      if ((el = (const rg_qnode **)rg_arena_alloc(x->scratch, (e - s + 1) *
                                                  sizeof(*el))) == NULL)
        return;
      for (i = 0, c = a[0].node + 1; i < cnt; i++, c += c->size)
        if (i >= s && i < e) el[i - s] = c;
      array_of(x, el, e - s, out);
      return;
    }
    case RG_QF_ARRAY_MAX: case RG_QF_ARRAY_MIN: {
      rg_qv best, v;
      int has = 0;
      if (a[0].t != RG_QV_ARR) return;
      for (i = 0, c = a[0].node + 1; i < a[0].node->n; i++, c += c->size) {
        if (c->t == RG_QV_ARR || c->t == RG_QV_OBJ) return;
        rg_qv_of_node(&v, c);
        if (!has || (fn == RG_QF_ARRAY_MAX ? rg_qv_any_cmp(&v, &best) > 0
                                           : rg_qv_any_cmp(&v, &best) < 0)) {
          best = v;
          has = 1;
        }
      }
      if (has) *out = best;
      return;
    }
    case RG_QF_ARRAY_SUM: case RG_QF_ARRAY_AVG: case RG_QF_ARRAY_MEDIAN: {
      double sum = 0, *v;
      size_t cnt;
      if (a[0].t != RG_QV_ARR) return;
      cnt = a[0].node->n;
      if ((v = (double *)rg_arena_alloc(x->scratch, (cnt + 1) *
                                        sizeof(double))) == NULL)
        return;
      for (i = 0, c = a[0].node + 1; i < cnt; i++, c += c->size) {
        if (c->t != RG_QV_NUM) return;
        v[i] = c->d;
        sum += c->d;
      }
      if (fn == RG_QF_ARRAY_SUM) rg_qv_num(out, sum);
      else if (cnt == 0) return;
      else if (fn == RG_QF_ARRAY_AVG) rg_qv_num(out, sum / (double)cnt);
      else {
        qsort(v, cnt, sizeof(double), num_cmp);
        rg_qv_num(out, cnt % 2 ? v[cnt / 2]
                               : (v[cnt / 2 - 1] + v[cnt / 2]) / 2);
      }
      return;
    }
    case RG_QF_CHOOSE: {
      double k;
      if (a[0].t != RG_QV_NUM) return;
      k = floor(a[0].d);
      if (k >= 1 && k < (double)n) *out = a[(int)k];
      return;
    }
    case RG_QF_OBJECTTOARRAY: {
      rg_qv *items, pair[2];
      const char *names[2];
      uint32_t nlens[2];
      if (a[0].t != RG_QV_OBJ) return;
      names[0] = "k"; nlens[0] = 1;
      names[1] = "v"; nlens[1] = 1;
      if (n > 1) {
        if (a[1].t != RG_QV_STR) return;
        names[0] = a[1].s;
        nlens[0] = (uint32_t)a[1].n;
      }
      if (n > 2) {
        if (a[2].t != RG_QV_STR) return;
        names[1] = a[2].s;
        nlens[1] = (uint32_t)a[2].n;
      }
      if ((items = (rg_qv *)rg_arena_alloc(x->scratch, (a[0].node->n + 1) *
                                           sizeof(rg_qv))) == NULL)
        return;
      for (i = 0, c = a[0].node + 1; i < a[0].node->n; i++, c += c->size) {
        rg_qv_str(&pair[0], c->key, c->klen);
        rg_qv_of_node(&pair[1], c);
        if (rg_qv_build(x->scratch, 1, pair, names, nlens, 2, &items[i]))
          return;
      }
      rg_qv_build(x->scratch, 0, items, NULL, NULL, (int)a[0].node->n, out);
      return;
    }
    case RG_QF_SETINTERSECT: case RG_QF_SETUNION: case RG_QF_SETDIFFERENCE:
    case RG_QF_SETEQUAL: {
      const rg_qnode **acc;
      size_t m = 0;
      if (a[0].t != RG_QV_ARR || a[1].t != RG_QV_ARR) return;
      if ((acc = (const rg_qnode **)rg_arena_alloc(x->scratch,
                    (a[0].node->n + a[1].node->n + 1) * sizeof(*acc))) == NULL)
        return;
      switch (fn) {
        case RG_QF_SETINTERSECT:
          set_op(x, a[1].node, a[0].node, 1, acc, &m);
          break;
        case RG_QF_SETUNION:
          set_op(x, a[0].node, NULL, 1, acc, &m);
          set_op(x, a[1].node, NULL, 1, acc, &m);
          break;
        case RG_QF_SETDIFFERENCE:
          set_op(x, a[0].node, a[1].node, 0, acc, &m);
          break;
        default: {
          size_t mb = 0;
          const rg_qnode **acc2 = acc + a[0].node->n;
          set_op(x, a[0].node, a[1].node, 0, acc, &m);
          set_op(x, a[1].node, a[0].node, 0, acc2, &mb);
          rg_qv_bool(out, m == 0 && mb == 0);
          return;
        }
      }
      array_of(x, acc, m, out);
      return;
    }
    default: return;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Mathematics
** ======================================================================
*/
static void int_fn (int fn, const rg_qv *a, rg_qv *out) {
  int64_t x, y = 0;
  uint64_t ux, uy;
  if (!int_arg(&a[0], &x)) return;
  if (fn != RG_QF_INTBITNOT && !int_arg(&a[1], &y)) return;
  ux = (uint64_t)x;
  uy = (uint64_t)y;
  switch (fn) {
    case RG_QF_INTADD: rg_qv_num(out, (double)(int64_t)(ux + uy)); break;
    case RG_QF_INTSUB: rg_qv_num(out, (double)(int64_t)(ux - uy)); break;
    case RG_QF_INTMUL: rg_qv_num(out, (double)(int64_t)(ux * uy)); break;
    case RG_QF_INTDIV:
      if (y == 0 || (x == INT64_MIN && y == -1)) return;
      rg_qv_num(out, (double)(x / y));
      break;
    case RG_QF_INTMOD:
      if (y == 0) return;
      rg_qv_num(out, y == -1 ? 0.0 : (double)(x % y));
      break;
    case RG_QF_INTBITAND: rg_qv_num(out, (double)(x & y)); break;
    case RG_QF_INTBITOR: rg_qv_num(out, (double)(x | y)); break;
    case RG_QF_INTBITXOR: rg_qv_num(out, (double)(x ^ y)); break;
    case RG_QF_INTBITNOT: rg_qv_num(out, (double)~x); break;
    case RG_QF_INTBITLEFTSHIFT:
      if (y < 0 || y > 63) { rg_qv_num(out, 0); break; }
      rg_qv_num(out, (double)(int64_t)(ux << y));
      break;
    default:                         /* right shift: arithmetic */
      if (y < 0 || y > 63) { rg_qv_num(out, x < 0 ? -1 : 0); break; }
      rg_qv_num(out, (double)(x < 0 ? ~(~x >> y) : x >> y));
  }
}

static double next_rand (rg_qctx *x) {
  uint64_t s = x->rand ? x->rand : 0x9E3779B97F4A7C15ull ^
               (uint64_t)rg_dt_now_ticks();
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  x->rand = s;
  return (double)(s >> 11) / 9007199254740992.0;
}

static void math_fn (rg_qctx *x, int fn, const rg_qv *a, int n, rg_qv *out) {
  double d, e;
  if (fn == RG_QF_PI) { rg_qv_num(out, M_PI); return; }
  if (fn == RG_QF_RAND) { rg_qv_num(out, next_rand(x)); return; }
  if (fn >= RG_QF_INTADD && fn <= RG_QF_INTBITRIGHTSHIFT) {
    int_fn(fn, a, out);
    return;
  }
  if (a[0].t != RG_QV_NUM) return;
  d = a[0].d;
  if (n > 1 && a[1].t != RG_QV_NUM) return;
  e = n > 1 ? a[1].d : 0;
  switch (fn) {
    case RG_QF_ABS: rg_qv_num(out, fabs(d)); break;
    case RG_QF_ACOS: rg_qv_num(out, acos(d)); break;
    case RG_QF_ASIN: rg_qv_num(out, asin(d)); break;
    case RG_QF_ATAN: rg_qv_num(out, atan(d)); break;
    case RG_QF_ATN2: rg_qv_num(out, atan2(d, e)); break;
    case RG_QF_CEILING: rg_qv_num(out, ceil(d)); break;
    case RG_QF_COS: rg_qv_num(out, cos(d)); break;
    case RG_QF_COT: rg_qv_num(out, 1.0 / tan(d)); break;
    case RG_QF_DEGREES: rg_qv_num(out, d * (180.0 / M_PI)); break;
    case RG_QF_EXP: rg_qv_num(out, exp(d)); break;
    case RG_QF_FLOOR: rg_qv_num(out, floor(d)); break;
    case RG_QF_LOG:
      if (n > 1) rg_qv_num(out, log10(d) / log10(e));
      else rg_qv_num(out, log(d));
      break;
    case RG_QF_LOG10: rg_qv_num(out, log10(d)); break;
    case RG_QF_POWER: rg_qv_num(out, pow(d, e)); break;
    case RG_QF_RADIANS: rg_qv_num(out, d * (M_PI / 180.0)); break;
    case RG_QF_ROUND: rg_qv_num(out, round(d)); break;
    case RG_QF_SIGN: rg_qv_num(out, d > 0 ? 1 : d < 0 ? -1 : 0); break;
    case RG_QF_SIN: rg_qv_num(out, sin(d)); break;
    case RG_QF_SQRT: rg_qv_num(out, sqrt(d)); break;
    case RG_QF_SQUARE: rg_qv_num(out, d * d); break;
    case RG_QF_TAN: rg_qv_num(out, tan(d)); break;
    case RG_QF_TRUNC: rg_qv_num(out, trunc(d)); break;
    case RG_QF_NUMBERBIN: {
      double bin = n > 1 ? e : 1, q;
      if (bin == 0) return;
      q = floor(d / bin);
      /* a bin of a decimal fraction: print as the decimal it is */
      if (fabs(bin) < 1) {
        double inv = 1 / bin, r = round(inv);
        if (fabs(inv - r) < 1e-9 && r != 0) { rg_qv_num(out, q / r); break; }
      }
      rg_qv_num(out, q * bin);
      break;
    }
    default: break;
  }
  if (out->t == RG_QV_NUM && out->d == 0) out->d = 0;   /* no -0 */
}
/* }===================================================================== */


void rg_qcall (rg_qctx *x, int fn, const rg_qv *a, int n, rg_qv *out) {
  rg_qv_undef(out);
  if (fn >= RG_QF_IS_DEFINED && fn <= RG_QF_IS_DATETIME) {
    int t = a[0].t;
    switch (fn) {
      case RG_QF_IS_DEFINED: rg_qv_bool(out, t != RG_QV_UNDEF); break;
      case RG_QF_IS_NULL: rg_qv_bool(out, t == RG_QV_NULL); break;
      case RG_QF_IS_STRING: rg_qv_bool(out, t == RG_QV_STR); break;
      case RG_QF_IS_NUMBER: rg_qv_bool(out, t == RG_QV_NUM); break;
      case RG_QF_IS_BOOL: rg_qv_bool(out, is_bool(&a[0])); break;
      case RG_QF_IS_ARRAY: rg_qv_bool(out, t == RG_QV_ARR); break;
      case RG_QF_IS_OBJECT: rg_qv_bool(out, t == RG_QV_OBJ); break;
      case RG_QF_IS_PRIMITIVE:
        rg_qv_bool(out, t >= RG_QV_NULL && t <= RG_QV_STR);
        break;
      case RG_QF_IS_FINITE_NUMBER:
        rg_qv_bool(out, t == RG_QV_NUM && isfinite(a[0].d));
        break;
      case RG_QF_IS_INTEGER: {
        int64_t v;
        rg_qv_bool(out, int_arg(&a[0], &v));
        break;
      }
      default: {
        int64_t ticks;
        rg_qv_bool(out, t == RG_QV_STR && rg_dt_parse(a[0].s, a[0].n, &ticks));
      }
    }
    return;
  }
  if (fn >= RG_QF_ARRAY_CONTAINS && fn <= RG_QF_SETEQUAL) {
    array_fn(x, fn, a, n, out);
    return;
  }
  if (fn == RG_QF_REGEXMATCH) { regex_match(x, a, n, out); return; }
  if (fn >= RG_QF_STARTSWITH && fn <= RG_QF_TOSTRING) {
    string_fn(x, fn, a, n, out);
    return;
  }
  if (fn >= RG_QF_ABS && fn <= RG_QF_INTBITRIGHTSHIFT) {
    math_fn(x, fn, a, n, out);
    return;
  }
  if (fn >= RG_QF_GETCURRENTDATETIME && fn <= RG_QF_DAY) {
    rg_qtime_call(x, fn, a, n, out);
    return;
  }
  if (fn == RG_QF_IIF) {
    *out = a[0].t == RG_QV_TRUE ? a[1] : a[2];
    return;
  }
  if (fn == RG_QF_DOCUMENTID) {
    if (a[0].t == RG_QV_OBJ && x->doc.node == a[0].node && x->docid)
      rg_qv_num(out, (double)(x->docid & ((1ull << 53) - 1)));
    return;
  }
}
