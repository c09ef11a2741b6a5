/*
** eval.c: values and expression evaluation for the query engine.
**
** Documents are not turned into cJSON trees to be queried.  A stored
** item's JSON text is parsed into a tape (sql.h): one array of nodes
** in document order, reused from item to item, with strings pointing into
** the text itself unless they held escapes.  A value under evaluation
** (rg_qv) is a scalar or a subtree of a tape, so a property read costs a
** walk over the object's members and no allocation, and a value copied
** into a result is copied as the JSON text it was stored as.  Values that
** queries build (object and array constructors, strings made by functions)
** live in a scratch arena that is reset for every row.
**
** Semantics are Cosmos DB's: a missing property is undefined, and so is
** any operation on operands of the wrong types (comparisons across types
** included); AND, OR and NOT are three-valued over booleans, anything else
** counting as undefined; a WHERE keeps a row only when it is exactly true.
**
** Encodings kept here: rg_qv_term gives the order-preserving term of a
** value in the index encoding of store/layout.c (undefined, arrays and objects
** as the single byte 0x01, below every scalar, which is how ORDER BY ranks
** them), and rg_qv_canon a canonical form in which equal values (objects
** in any member order) have equal bytes.
*/

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_int.h"

#define TWO63 9223372036854775808.0


/*
** {=====================================================================
** Numbers in text
** ======================================================================
*/
/* strtod on a slice, whatever the C locale's decimal point. */
static double slice_double (const char *s, size_t n) {
  char small[64], *buf = small, dp;
  const char *p = localeconv()->decimal_point;
  double d;
  size_t i;
  dp = p && p[0] ? p[0] : '.';
  if (n >= sizeof(small)) {
    buf = (char *)malloc(n + 1);
    if (buf == NULL) return 0;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (dp != '.')
    for (i = 0; i < n; i++) if (buf[i] == '.') buf[i] = dp;
  d = strtod(buf, NULL);
  if (buf != small) free(buf);
  return d;
}

static void print_num (rg_buf *b, double d) {
  char tmp[40], dp;
  const char *lp;
  int prec, n = 0, i;
  if (d != d || d == HUGE_VAL || d == -HUGE_VAL) {
    rg_buf_add(b, "null", 4);
    return;
  }
  if (d >= -TWO63 && d < TWO63 && floor(d) == d) {
    rg_buf_addf(b, "%lld", (long long)d);
    return;
  }
  for (prec = 15; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
    if (slice_double(tmp, (size_t)n) == d) break;
  }
  lp = localeconv()->decimal_point;
  dp = lp && lp[0] ? lp[0] : '.';
  for (i = 0; i < n; i++) if (tmp[i] == dp) tmp[i] = '.';
  rg_buf_add(b, tmp, (size_t)n);
}
/* }===================================================================== */


/*
** {=====================================================================
** Tapes: JSON text -> nodes
** ======================================================================
*/
typedef struct tparser {
  const char *s, *p, *end;
  rg_tape *t;
  rg_arena *a;
  int depth;
  int status;
} tparser;

static void tp_ws (tparser *P) {
  while (P->p < P->end &&
         (*P->p == ' ' || *P->p == '\n' || *P->p == '\r' || *P->p == '\t'))
    P->p++;
}

static int tp_fail (tparser *P, int status) {
  if (P->status == 0) P->status = status;
  return -1;
}

/* A new node; its index (the array may move while the tape grows). */
static long tp_node (tparser *P) {
  rg_tape *t = P->t;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    rg_qnode *nn = (rg_qnode *)realloc(t->node, cap * sizeof(rg_qnode));
    if (nn == NULL) return tp_fail(P, 500);
    t->node = nn;
    t->cap = cap;
  }
  memset(&t->node[t->n], 0, sizeof(rg_qnode));
  return (long)t->n++;
}

/* Scans a string at P->p (the quote); its raw bytes into *s, *n. */
static int tp_string (tparser *P, const char **s, uint32_t *n) {
  const char *p = P->p + 1, *start = p;
  int esc = 0;
  while (p < P->end && *p != '"') {
    if ((unsigned char)*p < 0x20) return tp_fail(P, 400);
    if (*p == '\\') { esc = 1; p += 2; }
    else p++;
  }
  if (p >= P->end) return tp_fail(P, 400);
  if ((size_t)(p - start) > 0xFFFFFFF0u) return tp_fail(P, 400);
  if (!esc) {
    *s = start;
    *n = (uint32_t)(p - start);
  }
  else {                             /* decoded is never longer */
    char *w = (char *)rg_arena_alloc(P->a, (size_t)(p - start) + 1), *o = w;
    const char *q = start;
    if (w == NULL) return tp_fail(P, 500);
    while (q < p) {
      if (*q != '\\') { *o++ = *q++; continue; }
      {
        unsigned cp;
        const char *why;
        size_t k = rg_unescape(q, p, &cp, &why);
        if (k == 0) return tp_fail(P, 400);
        o += rg_utf8_put(o, cp);
        q += k;
      }
    }
    *s = w;
    *n = (uint32_t)(o - w);
  }
  P->p = p + 1;
  return 0;
}

static int tp_number (tparser *P, double *d) {
  const char *p = P->p, *start = p;
  uint64_t acc = 0;
  int digits = 0, simple = 1, neg = 0;
  if (*p == '-') { neg = 1; p++; }
  if (p >= P->end || *p < '0' || *p > '9') return tp_fail(P, 400);
  while (p < P->end && *p >= '0' && *p <= '9') {
    if (digits < 18) acc = acc * 10 + (uint64_t)(*p - '0');
    else simple = 0;
    digits++;
    p++;
  }
  if (p < P->end && *p == '.') {
    simple = 0;
    p++;
    if (p >= P->end || *p < '0' || *p > '9') return tp_fail(P, 400);
    while (p < P->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < P->end && (*p == 'e' || *p == 'E')) {
    simple = 0;
    p++;
    if (p < P->end && (*p == '+' || *p == '-')) p++;
    if (p >= P->end || *p < '0' || *p > '9') return tp_fail(P, 400);
    while (p < P->end && *p >= '0' && *p <= '9') p++;
  }
  if (simple) *d = neg ? -(double)acc : (double)acc;
  else *d = slice_double(start, (size_t)(p - start));
  P->p = p;
  return 0;
}

static int tp_value (tparser *P, const char *key, uint32_t klen) {
  long i = tp_node(P);
  rg_qnode *nd;
  const char *start = P->p;
  if (i < 0) return -1;
  P->t->node[i].key = key;
  P->t->node[i].klen = klen;
  if (P->p >= P->end) return tp_fail(P, 400);
  switch (*P->p) {
    case '{': case '[': {
      int obj = *P->p == '{';
      char close = obj ? '}' : ']';
      uint32_t count = 0;
      if (++P->depth > RG_MAX_DEPTH + 8) return tp_fail(P, 400);
      P->p++;
      tp_ws(P);
      if (P->p < P->end && *P->p == close) P->p++;
      else {
        for (;;) {
          const char *k = NULL;
          uint32_t kn = 0;
          tp_ws(P);
          if (obj) {
            if (P->p >= P->end || *P->p != '"') return tp_fail(P, 400);
            if (tp_string(P, &k, &kn)) return -1;
            tp_ws(P);
            if (P->p >= P->end || *P->p != ':') return tp_fail(P, 400);
            P->p++;
            tp_ws(P);
          }
          if (tp_value(P, k, kn)) return -1;
          count++;
          tp_ws(P);
          if (P->p < P->end && *P->p == ',') { P->p++; continue; }
          if (P->p < P->end && *P->p == close) { P->p++; break; }
          return tp_fail(P, 400);
        }
      }
      P->depth--;
      nd = &P->t->node[i];
      nd->t = obj ? RG_QV_OBJ : RG_QV_ARR;
      nd->n = count;
      break;
    }
    case '"': {
      const char *s;
      uint32_t n;
      if (tp_string(P, &s, &n)) return -1;
      nd = &P->t->node[i];
      nd->t = RG_QV_STR;
      nd->s = s;
      nd->n = n;
      break;
    }
    case 't':
      if (P->end - P->p < 4 || memcmp(P->p, "true", 4)) return tp_fail(P, 400);
      P->p += 4;
      nd = &P->t->node[i];
      nd->t = RG_QV_TRUE;
      break;
    case 'f':
      if (P->end - P->p < 5 || memcmp(P->p, "false", 5)) return tp_fail(P, 400);
      P->p += 5;
      nd = &P->t->node[i];
      nd->t = RG_QV_FALSE;
      break;
    case 'n':
      if (P->end - P->p < 4 || memcmp(P->p, "null", 4)) return tp_fail(P, 400);
      P->p += 4;
      nd = &P->t->node[i];
      nd->t = RG_QV_NULL;
      break;
    default: {
      double d;
      if (tp_number(P, &d)) return -1;
      nd = &P->t->node[i];
      nd->t = RG_QV_NUM;
      nd->d = d;
    }
  }
  nd->size = (uint32_t)(P->t->n - (size_t)i);
  nd->raw = start;
  nd->rawlen = (uint32_t)(P->p - start);
  return 0;
}

int rg_tape_parse (rg_tape *t, rg_arena *a, const char *s, size_t n) {
  tparser P;
  t->n = 0;
  if (n > 0xFFFFFFF0u) return 400;
  P.s = P.p = s;
  P.end = s + n;
  P.t = t;
  P.a = a;
  P.depth = 0;
  P.status = 0;
  tp_ws(&P);
  if (tp_value(&P, NULL, 0) == 0) {
    tp_ws(&P);
    if (P.p != P.end) tp_fail(&P, 400);
  }
  if (P.status) t->n = 0;
  return P.status;
}

void rg_tape_free (rg_tape *t) {
  free(t->node);
  t->node = NULL;
  t->n = t->cap = 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Values
** ======================================================================
*/
static const rg_qv undef = { RG_QV_UNDEF, 0, NULL, 0, NULL };

void rg_qv_of_node (rg_qv *v, const rg_qnode *node) {
  v->t = node->t;
  v->d = node->d;
  v->s = node->s;
  v->n = node->n;
  v->node = node;
}

static void set_bool (rg_qv *v, int b) {
  *v = undef;
  v->t = b ? RG_QV_TRUE : RG_QV_FALSE;
}

static void set_num (rg_qv *v, double d) {
  *v = undef;
  if (d != d || d == HUGE_VAL || d == -HUGE_VAL) return;   /* undefined */
  v->t = RG_QV_NUM;
  v->d = d;
}

static void set_str (rg_qv *v, const char *s, size_t n) {
  *v = undef;
  v->t = RG_QV_STR;
  v->s = s;
  v->n = n;
}

/* Booleans are one kind for comparisons. */
static int kind (int t) {
  return t == RG_QV_TRUE ? RG_QV_FALSE : t;
}

const rg_qnode *rg_qnode_member (const rg_qnode *obj, const char *k,
                                 size_t n) {
  const rg_qnode *c = obj + 1;
  uint32_t i;
  for (i = 0; i < obj->n; i++, c += c->size)
    if (c->klen == n && (n == 0 || memcmp(c->key, k, n) == 0)) return c;
  return NULL;
}

static const rg_qnode *element (const rg_qnode *arr, uint32_t idx) {
  const rg_qnode *c = arr + 1;
  uint32_t i;
  if (idx >= arr->n) return NULL;
  for (i = 0; i < idx; i++) c += c->size;
  return c;
}

static int bytes_cmp (const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c) return c < 0 ? -1 : 1;
  return an < bn ? -1 : an > bn;
}

static int node_equal (const rg_qnode *x, const rg_qnode *y) {
  const rg_qnode *c, *d;
  uint32_t i;
  if (kind(x->t) != kind(y->t)) return 0;
  switch (x->t) {
    case RG_QV_NULL: return 1;
    case RG_QV_FALSE: case RG_QV_TRUE: return x->t == y->t;
    case RG_QV_NUM: return x->d == y->d;
    case RG_QV_STR: return x->n == y->n && memcmp(x->s, y->s, x->n) == 0;
    case RG_QV_ARR:
      if (x->n != y->n) return 0;
      for (i = 0, c = x + 1, d = y + 1; i < x->n; i++) {
        if (!node_equal(c, d)) return 0;
        c += c->size;
        d += d->size;
      }
      return 1;
    case RG_QV_OBJ:
      if (x->n != y->n) return 0;
      for (i = 0, c = x + 1; i < x->n; i++, c += c->size) {
        d = rg_qnode_member(y, c->key, c->klen);
        if (d == NULL || !node_equal(c, d)) return 0;
      }
      return 1;
    default: return 0;
  }
}

int rg_qv_equal (const rg_qv *a, const rg_qv *b) {
  if (kind(a->t) != kind(b->t)) return 0;
  switch (a->t) {
    case RG_QV_UNDEF: case RG_QV_NULL: return 1;
    case RG_QV_FALSE: case RG_QV_TRUE: return a->t == b->t;
    case RG_QV_NUM: return a->d == b->d;
    case RG_QV_STR: return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    default: return node_equal(a->node, b->node);
  }
}

/* Order of two values of the same scalar kind: -1, 0, 1. */
static int scalar_cmp (const rg_qv *a, const rg_qv *b) {
  switch (a->t) {
    case RG_QV_NUM: return a->d < b->d ? -1 : a->d > b->d;
    case RG_QV_STR: return bytes_cmp(a->s, a->n, b->s, b->n);
    case RG_QV_FALSE: case RG_QV_TRUE: return (a->t > b->t) - (a->t < b->t);
    default: return 0;               /* null */
  }
}

static int is_scalar (int t) {
  return t >= RG_QV_NULL && t <= RG_QV_STR;
}
/* }===================================================================== */


/*
** {=====================================================================
** Printing, terms, canonical forms
** ======================================================================
*/
static void print_node (rg_buf *b, const rg_qnode *nd) {
  const rg_qnode *c;
  uint32_t i;
  if (nd->raw) { rg_buf_add(b, nd->raw, nd->rawlen); return; }
  switch (nd->t) {
    case RG_QV_NULL: rg_buf_add(b, "null", 4); break;
    case RG_QV_FALSE: rg_buf_add(b, "false", 5); break;
    case RG_QV_TRUE: rg_buf_add(b, "true", 4); break;
    case RG_QV_NUM: print_num(b, nd->d); break;
    case RG_QV_STR: rg_json_quote(b, nd->s, nd->n); break;
    case RG_QV_ARR: case RG_QV_OBJ:
      rg_buf_addc(b, nd->t == RG_QV_ARR ? '[' : '{');
      for (i = 0, c = nd + 1; i < nd->n; i++, c += c->size) {
        if (i) rg_buf_addc(b, ',');
        if (nd->t == RG_QV_OBJ) {
          rg_json_quote(b, c->key, c->klen);
          rg_buf_addc(b, ':');
        }
        print_node(b, c);
      }
      rg_buf_addc(b, nd->t == RG_QV_ARR ? ']' : '}');
      break;
    default: rg_buf_add(b, "null", 4);
  }
}

void rg_qv_print (rg_buf *b, const rg_qv *v) {
  if (v->node) { print_node(b, v->node); return; }
  switch (v->t) {
    case RG_QV_NULL: rg_buf_add(b, "null", 4); break;
    case RG_QV_FALSE: rg_buf_add(b, "false", 5); break;
    case RG_QV_TRUE: rg_buf_add(b, "true", 4); break;
    case RG_QV_NUM: print_num(b, v->d); break;
    case RG_QV_STR: rg_json_quote(b, v->s, v->n); break;
    default: rg_buf_add(b, "null", 4);
  }
}

/* The number term of store/layout.c: IEEE bits made memcmp-ordered. */
static void term_number (rg_buf *b, double d) {
  uint64_t bits;
  uint8_t p[9];
  if (d == 0) d = 0;
  memcpy(&bits, &d, 8);
  if (bits >> 63) bits = ~bits;
  else bits ^= (uint64_t)1 << 63;
  p[0] = 0x08;
  rg_put_u64(p + 1, bits);
  rg_buf_add(b, p, 9);
}

/* The string term of store/layout.c, from raw bytes (NUL as 00 FF). */
static void term_string (rg_buf *b, const char *s, size_t n, size_t limit) {
  size_t i, body = 0, run = 0;
  int cut = 0;
  rg_buf_addc(b, 0x09);
  for (i = 0; i < n; i++) {
    size_t w = s[i] == '\0' ? 2 : 1;
    if (limit && body + w > limit) { cut = 1; break; }
    if (s[i] == '\0') {
      rg_buf_add(b, s + run, i - run);
      rg_buf_add(b, "\0\xFF", 2);
      run = i + 1;
    }
    body += w;
  }
  rg_buf_add(b, s + run, i - run);
  rg_buf_add(b, cut ? "\0\x02" : "\0\x01", 2);
}

void rg_qv_term (rg_buf *b, const rg_qv *v, int desc, size_t limit) {
  size_t start = b->n, i;
  switch (v->t) {
    case RG_QV_NULL: rg_buf_addc(b, 0x05); break;
    case RG_QV_FALSE: rg_buf_addc(b, 0x06); break;
    case RG_QV_TRUE: rg_buf_addc(b, 0x07); break;
    case RG_QV_NUM: term_number(b, v->d); break;
    case RG_QV_STR: term_string(b, v->s, v->n, limit); break;
    default: rg_buf_addc(b, 0x01);
  }
  if (desc && !b->oom)
    for (i = start; i < b->n; i++) b->p[i] = (char)~(unsigned char)b->p[i];
}

static int member_cmp (const void *x, const void *y) {
  const rg_qnode *a = *(const rg_qnode *const *)x;
  const rg_qnode *b = *(const rg_qnode *const *)y;
  return bytes_cmp(a->key, a->klen, b->key, b->klen);
}

static void canon_node (rg_buf *b, const rg_qnode *nd) {
  const rg_qnode *c, *small[16], **m;
  uint32_t i;
  rg_qv v;
  switch (nd->t) {
    case RG_QV_ARR:
      rg_buf_addc(b, 0x0A);
      for (i = 0, c = nd + 1; i < nd->n; i++, c += c->size) canon_node(b, c);
      rg_buf_addc(b, 0x00);
      return;
    case RG_QV_OBJ:
      m = nd->n <= 16 ? small
                      : (const rg_qnode **)malloc(nd->n * sizeof(*m));
      if (m == NULL) { b->oom = 1; return; }
      for (i = 0, c = nd + 1; i < nd->n; i++, c += c->size) m[i] = c;
      qsort(m, nd->n, sizeof(*m), member_cmp);
      rg_buf_addc(b, 0x0B);
      for (i = 0; i < nd->n; i++) {
        term_string(b, m[i]->key, m[i]->klen, 0);
        canon_node(b, m[i]);
      }
      rg_buf_addc(b, 0x00);
      if (m != small) free((void *)m);
      return;
    default:
      rg_qv_of_node(&v, nd);
      rg_qv_term(b, &v, 0, 0);
  }
}

void rg_qv_canon (rg_buf *b, const rg_qv *v) {
  if (v->node) canon_node(b, v->node);
  else rg_qv_term(b, v, 0, 0);
}
/* }===================================================================== */


/*
** {=====================================================================
** Building values
** ======================================================================
*/
static uint32_t nodes_of (const rg_qv *v) {
  return v->node ? v->node->size : 1;
}

static void scalar_node (rg_qnode *nd, const rg_qv *v) {
  memset(nd, 0, sizeof(*nd));
  nd->t = v->t;
  nd->d = v->d;
  nd->s = v->s;
  nd->n = (uint32_t)v->n;
  nd->size = 1;
}

int rg_qv_build (rg_arena *a, int obj, const rg_qv *items,
                 const char *const *names, const uint32_t *nlens, int n,
                 rg_qv *out) {
  size_t total = 1, off = 1;
  rg_qnode *nd;
  int i;
  for (i = 0; i < n; i++) total += nodes_of(&items[i]);
  if (total > 0xFFFFFFF0u) return 500;
  nd = (rg_qnode *)rg_arena_alloc(a, total * sizeof(rg_qnode));
  if (nd == NULL) { *out = undef; return 500; }
  memset(nd, 0, sizeof(*nd));
  nd->t = obj ? RG_QV_OBJ : RG_QV_ARR;
  nd->n = (uint32_t)n;
  nd->size = (uint32_t)total;
  for (i = 0; i < n; i++) {
    const rg_qv *v = &items[i];
    if (v->node) memcpy(&nd[off], v->node, v->node->size * sizeof(rg_qnode));
    else scalar_node(&nd[off], v);
    nd[off].key = obj ? names[i] : NULL;
    nd[off].klen = obj ? nlens[i] : 0;
    off += nodes_of(v);
  }
  rg_qv_of_node(out, nd);
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Functions
** ======================================================================
*/
static int fold (int c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int bytes_eq (const char *a, const char *b, size_t n, int icase) {
  size_t i;
  if (!icase) return memcmp(a, b, n) == 0;
  for (i = 0; i < n; i++)
    if (fold((unsigned char)a[i]) != fold((unsigned char)b[i])) return 0;
  return 1;
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

/* A number argument as a whole count (truncated), or -1 if none. */
static double count_arg (const rg_qv *v) {
  if (v->t != RG_QV_NUM) return -1;
  return v->d < 0 ? 0 : floor(v->d);
}

static int contains_partial (const rg_qnode *el, const rg_qnode *want) {
  const rg_qnode *c, *d;
  uint32_t i;
  if (want->t != RG_QV_OBJ || el->t != RG_QV_OBJ) return node_equal(el, want);
  for (i = 0, c = want + 1; i < want->n; i++, c += c->size) {
    d = rg_qnode_member(el, c->key, c->klen);
    if (d == NULL || !node_equal(d, c)) return 0;
  }
  return 1;
}

static void call (rg_qctx *x, const rg_qexpr *ex, rg_qv *out) {
  rg_qv a[3];
  const int32_t *args = x->q->list + ex->list;
  int i, n = ex->nlist;
  *out = undef;
  if (RG_QF_ISAGG(ex->op)) {         /* the result of the accumulation */
    if (x->aggs) *out = x->aggs[ex->slot];
    return;
  }
  if (ex->op == RG_QF_CONCAT) {
    rg_qv *v = (rg_qv *)rg_arena_alloc(x->scratch, (size_t)n * sizeof(rg_qv));
    size_t total = 0, w = 0;
    char *s;
    if (v == NULL) return;
    for (i = 0; i < n; i++) {
      rg_qeval(x, args[i], &v[i]);
      if (v[i].t != RG_QV_STR) return;
      total += v[i].n;
    }
    if ((s = (char *)rg_arena_alloc(x->scratch, total + 1)) == NULL) return;
    for (i = 0; i < n; i++) {
      if (v[i].n) memcpy(s + w, v[i].s, v[i].n);
      w += v[i].n;
    }
    set_str(out, s, total);
    return;
  }
  for (i = 0; i < n && i < 3; i++) rg_qeval(x, args[i], &a[i]);
  switch (ex->op) {
    case RG_QF_IS_DEFINED: set_bool(out, a[0].t != RG_QV_UNDEF); break;
    case RG_QF_IS_NULL: set_bool(out, a[0].t == RG_QV_NULL); break;
    case RG_QF_IS_STRING: set_bool(out, a[0].t == RG_QV_STR); break;
    case RG_QF_IS_NUMBER: set_bool(out, a[0].t == RG_QV_NUM); break;
    case RG_QF_IS_BOOL:
      set_bool(out, a[0].t == RG_QV_TRUE || a[0].t == RG_QV_FALSE);
      break;
    case RG_QF_IS_ARRAY: set_bool(out, a[0].t == RG_QV_ARR); break;
    case RG_QF_IS_OBJECT: set_bool(out, a[0].t == RG_QV_OBJ); break;
    case RG_QF_ARRAY_LENGTH:
      if (a[0].t == RG_QV_ARR) set_num(out, (double)a[0].node->n);
      break;
    case RG_QF_ARRAY_CONTAINS: {
      const rg_qnode *c;
      rg_qnode tmp;
      const rg_qnode *want;
      int partial = n > 2 && a[2].t == RG_QV_TRUE;
      uint32_t k;
      if (a[0].t != RG_QV_ARR) break;
      if (n > 2 && a[2].t != RG_QV_TRUE && a[2].t != RG_QV_FALSE) break;
      if (a[1].t == RG_QV_UNDEF) { set_bool(out, 0); break; }
      if (a[1].node) want = a[1].node;
      else { scalar_node(&tmp, &a[1]); want = &tmp; }
      set_bool(out, 0);
      for (k = 0, c = a[0].node + 1; k < a[0].node->n; k++, c += c->size)
        if (partial ? contains_partial(c, want) : node_equal(c, want)) {
          set_bool(out, 1);
          break;
        }
      break;
    }
    case RG_QF_STARTSWITH: case RG_QF_ENDSWITH: case RG_QF_CONTAINS: {
      int icase = 0, hit = 0;
      size_t k;
      if (a[0].t != RG_QV_STR || a[1].t != RG_QV_STR) break;
      if (n > 2) {
        if (a[2].t != RG_QV_TRUE && a[2].t != RG_QV_FALSE) break;
        icase = a[2].t == RG_QV_TRUE;
      }
      if (a[1].n <= a[0].n) {
        if (ex->op == RG_QF_STARTSWITH)
          hit = bytes_eq(a[0].s, a[1].s, a[1].n, icase);
        else if (ex->op == RG_QF_ENDSWITH)
          hit = bytes_eq(a[0].s + a[0].n - a[1].n, a[1].s, a[1].n, icase);
        else
          for (k = 0; !hit && k + a[1].n <= a[0].n; k++)
            hit = bytes_eq(a[0].s + k, a[1].s, a[1].n, icase);
      }
      set_bool(out, hit);
      break;
    }
    case RG_QF_LOWER: case RG_QF_UPPER: {
      char *s;
      size_t k;
      if (a[0].t != RG_QV_STR) break;
      if ((s = (char *)rg_arena_alloc(x->scratch, a[0].n + 1)) == NULL) break;
      for (k = 0; k < a[0].n; k++) {
        int c = (unsigned char)a[0].s[k];
        if (ex->op == RG_QF_LOWER) c = fold(c);
        else if (c >= 'a' && c <= 'z') c -= 32;
        s[k] = (char)c;
      }
      set_str(out, s, a[0].n);
      break;
    }
    case RG_QF_LENGTH:
      if (a[0].t == RG_QV_STR) set_num(out, (double)utf8_len(a[0].s, a[0].n));
      break;
    case RG_QF_SUBSTRING: {
      double st = count_arg(&a[1]), len = count_arg(&a[2]);
      size_t b0, b1, chars;
      if (a[0].t != RG_QV_STR || st < 0 || len < 0) break;
      chars = utf8_len(a[0].s, a[0].n);
      if (st > (double)chars) st = (double)chars;
      if (len > (double)chars) len = (double)chars;
      b0 = utf8_off(a[0].s, a[0].n, (size_t)st);
      b1 = b0 + utf8_off(a[0].s + b0, a[0].n - b0, (size_t)len);
      set_str(out, a[0].s + b0, b1 - b0);
      break;
    }
    case RG_QF_LEFT: {
      double len = count_arg(&a[1]);
      size_t chars;
      if (a[0].t != RG_QV_STR || len < 0) break;
      chars = utf8_len(a[0].s, a[0].n);
      if (len > (double)chars) len = (double)chars;
      set_str(out, a[0].s, utf8_off(a[0].s, a[0].n, (size_t)len));
      break;
    }
    default: break;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Evaluation
** ======================================================================
*/
static void compare (int op, const rg_qv *a, const rg_qv *b, rg_qv *out) {
  int c;
  *out = undef;
  if (a->t == RG_QV_UNDEF || b->t == RG_QV_UNDEF) return;
  if (kind(a->t) != kind(b->t)) return;    /* across types: undefined */
  if (op == RG_QO_EQ) { set_bool(out, rg_qv_equal(a, b)); return; }
  if (op == RG_QO_NE) { set_bool(out, !rg_qv_equal(a, b)); return; }
  if (!is_scalar(a->t)) return;
  c = scalar_cmp(a, b);
  switch (op) {
    case RG_QO_LT: set_bool(out, c < 0); break;
    case RG_QO_LE: set_bool(out, c <= 0); break;
    case RG_QO_GT: set_bool(out, c > 0); break;
    default: set_bool(out, c >= 0); break;
  }
}

static void binary (rg_qctx *x, int op, const rg_qv *a, const rg_qv *b,
                    rg_qv *out) {
  *out = undef;
  if (op <= RG_QO_GE) { compare(op, a, b, out); return; }
  if (op == RG_QO_CAT) {
    char *s;
    if (a->t != RG_QV_STR || b->t != RG_QV_STR) return;
    if ((s = (char *)rg_arena_alloc(x->scratch, a->n + b->n + 1)) == NULL)
      return;
    if (a->n) memcpy(s, a->s, a->n);
    if (b->n) memcpy(s + a->n, b->s, b->n);
    set_str(out, s, a->n + b->n);
    return;
  }
  if (a->t != RG_QV_NUM || b->t != RG_QV_NUM) return;
  switch (op) {
    case RG_QO_ADD: set_num(out, a->d + b->d); break;
    case RG_QO_SUB: set_num(out, a->d - b->d); break;
    case RG_QO_MUL: set_num(out, a->d * b->d); break;
    case RG_QO_DIV: if (b->d != 0) set_num(out, a->d / b->d); break;
    case RG_QO_MOD: if (b->d != 0) set_num(out, fmod(a->d, b->d)); break;
    default: break;
  }
}

void rg_qeval (rg_qctx *x, int32_t e, rg_qv *out) {
  const rg_qexpr *ex = &x->q->ex[e];
  rg_qv a, b, c;
  *out = undef;
  switch (ex->k) {
    case RG_QE_LIT: *out = ex->v; return;
    case RG_QE_PARAM: *out = x->params[ex->slot]; return;
    case RG_QE_ALIAS: *out = x->bind[ex->slot]; return;
    case RG_QE_PROP:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_OBJ) {
        const rg_qnode *m = rg_qnode_member(a.node, ex->s, ex->n);
        if (m) rg_qv_of_node(out, m);
      }
      return;
    case RG_QE_INDEX:
      rg_qeval(x, ex->a, &a);
      rg_qeval(x, ex->b, &b);
      if (a.t == RG_QV_ARR && b.t == RG_QV_NUM && b.d >= 0 &&
          floor(b.d) == b.d && b.d < 4294967295.0) {
        const rg_qnode *m = element(a.node, (uint32_t)b.d);
        if (m) rg_qv_of_node(out, m);
      }
      else if (a.t == RG_QV_OBJ && b.t == RG_QV_STR) {
        const rg_qnode *m = rg_qnode_member(a.node, b.s, b.n);
        if (m) rg_qv_of_node(out, m);
      }
      return;
    case RG_QE_UNARY:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_NUM) set_num(out, ex->op == RG_QO_NEG ? -a.d : a.d);
      return;
    case RG_QE_BINARY:
      rg_qeval(x, ex->a, &a);
      rg_qeval(x, ex->b, &b);
      binary(x, ex->op, &a, &b, out);
      return;
    case RG_QE_AND:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_FALSE) { set_bool(out, 0); return; }
      rg_qeval(x, ex->b, &b);
      if (b.t == RG_QV_FALSE) set_bool(out, 0);
      else if (a.t == RG_QV_TRUE && b.t == RG_QV_TRUE) set_bool(out, 1);
      return;
    case RG_QE_OR:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_TRUE) { set_bool(out, 1); return; }
      rg_qeval(x, ex->b, &b);
      if (b.t == RG_QV_TRUE) set_bool(out, 1);
      else if (a.t == RG_QV_FALSE && b.t == RG_QV_FALSE) set_bool(out, 0);
      return;
    case RG_QE_NOT:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_TRUE || a.t == RG_QV_FALSE)
        set_bool(out, a.t == RG_QV_FALSE);
      return;
    case RG_QE_TERNARY:
      rg_qeval(x, ex->a, &a);
      rg_qeval(x, a.t == RG_QV_TRUE ? ex->b : ex->c, out);
      return;
    case RG_QE_COALESCE:
      rg_qeval(x, ex->a, out);
      if (out->t == RG_QV_UNDEF) rg_qeval(x, ex->b, out);
      return;
    case RG_QE_IN: {
      int i, hit = 0;
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_UNDEF) return;
      for (i = 0; i < ex->nlist && !hit; i++) {
        rg_qeval(x, x->q->list[ex->list + i], &b);
        hit = kind(a.t) == kind(b.t) && rg_qv_equal(&a, &b);
      }
      set_bool(out, ex->op ? !hit : hit);
      return;
    }
    case RG_QE_BETWEEN: {
      rg_qv lo, hi;
      rg_qeval(x, ex->a, &a);
      rg_qeval(x, ex->b, &b);
      rg_qeval(x, ex->c, &c);
      compare(RG_QO_GE, &a, &b, &lo);
      compare(RG_QO_LE, &a, &c, &hi);
      if (lo.t == RG_QV_FALSE || hi.t == RG_QV_FALSE)
        set_bool(out, ex->op ? 1 : 0);
      else if (lo.t == RG_QV_TRUE && hi.t == RG_QV_TRUE)
        set_bool(out, ex->op ? 0 : 1);
      return;
    }
    case RG_QE_CALL: call(x, ex, out); return;
    case RG_QE_ARRAY: case RG_QE_OBJECT: {
      int i, n = 0, obj = ex->k == RG_QE_OBJECT;
      rg_qv *items = NULL;
      const char **names = NULL;
      uint32_t *nlens = NULL;
      if (ex->nlist) {
        items = (rg_qv *)rg_arena_alloc(x->scratch, ex->nlist * sizeof(rg_qv));
        names = (const char **)rg_arena_alloc(x->scratch,
                                              ex->nlist * sizeof(char *));
        nlens = (uint32_t *)rg_arena_alloc(x->scratch,
                                           ex->nlist * sizeof(uint32_t));
        if (items == NULL || names == NULL || nlens == NULL) return;
      }
      for (i = 0; i < ex->nlist; i++) {
        const rg_qexpr *m = &x->q->ex[x->q->list[ex->list + i]];
        rg_qeval(x, obj ? m->a : x->q->list[ex->list + i], &items[n]);
        if (items[n].t == RG_QV_UNDEF) continue;   /* left out */
        names[n] = m->s;
        nlens[n] = m->n;
        n++;
      }
      rg_qv_build(x->scratch, obj, items, names, nlens, n, out);
      return;
    }
    default: return;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Parameters
** ======================================================================
*/
int rg_query_bind (const rg_query *q, const char *json, size_t n,
                   rg_tape *t, rg_arena *a, rg_qv **out, rg_err *e) {
  rg_qv *v;
  const rg_qnode *root = NULL;
  int i, rc;
  *out = NULL;
  if (q->nparams == 0) return 0;
  v = (rg_qv *)rg_arena_alloc(a, (size_t)q->nparams * sizeof(rg_qv));
  if (v == NULL) return rg_fail(e, 500, "out of memory");
  if (json != NULL) {
    if ((rc = rg_tape_parse(t, a, json, n)))
      return rg_fail(e, rc, rc == 500 ? "out of memory"
                                      : "the parameters are not JSON");
    root = &t->node[0];
    if (root->t != RG_QV_OBJ)
      return rg_fail(e, 400, "the parameters must be a table of names");
  }
  for (i = 0; i < q->nparams; i++) {
    const rg_qparam *p = &q->param[i];
    const rg_qnode *m = root ? rg_qnode_member(root, p->name, p->nlen) : NULL;
    if (m == NULL) {
      int line, col, n = (int)(p->nlen > 100 ? 100 : p->nlen);
      rg_query_where(q->sql, p->pos, &line, &col);
      return rg_fail(e, 400, "parameter @%.*s (at %d:%d) is not bound: give "
                     "it a value in params", n, p->name, line, col);
    }
    rg_qv_of_node(&v[i], m);
  }
  *out = v;
  return 0;
}
/* }===================================================================== */
