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

void rg_qv_print_num (rg_buf *b, double d) {
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

void rg_qv_undef (rg_qv *v) {
  *v = undef;
}

void rg_qv_bool (rg_qv *v, int b) {
  *v = undef;
  v->t = b ? RG_QV_TRUE : RG_QV_FALSE;
}

void rg_qv_num (rg_qv *v, double d) {
  *v = undef;
  if (d != d || d == HUGE_VAL || d == -HUGE_VAL) return;   /* undefined */
  v->t = RG_QV_NUM;
  v->d = d;
}

void rg_qv_str (rg_qv *v, const char *s, size_t n) {
  *v = undef;
  v->t = RG_QV_STR;
  v->s = s;
  v->n = n;
}

int rg_qv_kind (int t) {
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

const rg_qnode *rg_qnode_element (const rg_qnode *arr, uint32_t idx) {
  const rg_qnode *c = arr + 1;
  uint32_t i;
  if (idx >= arr->n) return NULL;
  for (i = 0; i < idx; i++) c += c->size;
  return c;
}

static void scalar_node (rg_qnode *nd, const rg_qv *v) {
  memset(nd, 0, sizeof(*nd));
  nd->t = v->t;
  nd->d = v->d;
  nd->s = v->s;
  nd->n = (uint32_t)v->n;
  nd->size = 1;
}

const rg_qnode *rg_qv_node (const rg_qv *v, rg_qnode *tmp) {
  if (v->node) return v->node;
  scalar_node(tmp, v);
  return tmp;
}

static int bytes_cmp (const char *a, size_t an, const char *b, size_t bn) {
  int c = an && bn ? memcmp(a, b, an < bn ? an : bn) : 0;
  if (c) return c < 0 ? -1 : 1;
  return an < bn ? -1 : an > bn;
}

int rg_qnode_equal (const rg_qnode *x, const rg_qnode *y) {
  const rg_qnode *c, *d;
  uint32_t i;
  if (rg_qv_kind(x->t) != rg_qv_kind(y->t)) return 0;
  switch (x->t) {
    case RG_QV_NULL: return 1;
    case RG_QV_FALSE: case RG_QV_TRUE: return x->t == y->t;
    case RG_QV_NUM: return x->d == y->d;
    case RG_QV_STR: return x->n == y->n && memcmp(x->s, y->s, x->n) == 0;
    case RG_QV_ARR:
      if (x->n != y->n) return 0;
      for (i = 0, c = x + 1, d = y + 1; i < x->n; i++) {
        if (!rg_qnode_equal(c, d)) return 0;
        c += c->size;
        d += d->size;
      }
      return 1;
    case RG_QV_OBJ:
      if (x->n != y->n) return 0;
      for (i = 0, c = x + 1; i < x->n; i++, c += c->size) {
        d = rg_qnode_member(y, c->key, c->klen);
        if (d == NULL || !rg_qnode_equal(c, d)) return 0;
      }
      return 1;
    default: return 0;
  }
}

int rg_qv_equal (const rg_qv *a, const rg_qv *b) {
  if (rg_qv_kind(a->t) != rg_qv_kind(b->t)) return 0;
  switch (a->t) {
    case RG_QV_UNDEF: case RG_QV_NULL: return 1;
    case RG_QV_FALSE: case RG_QV_TRUE: return a->t == b->t;
    case RG_QV_NUM: return a->d == b->d;
    case RG_QV_STR: return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    default: return rg_qnode_equal(a->node, b->node);
  }
}

int rg_qv_scalar_cmp (const rg_qv *a, const rg_qv *b) {
  switch (a->t) {
    case RG_QV_NUM: return a->d < b->d ? -1 : a->d > b->d;
    case RG_QV_STR: return bytes_cmp(a->s, a->n, b->s, b->n);
    case RG_QV_FALSE: case RG_QV_TRUE: return (a->t > b->t) - (a->t < b->t);
    default: return 0;               /* null */
  }
}

int rg_qv_any_cmp (const rg_qv *a, const rg_qv *b) {
  int ra = rg_qv_kind(a->t), rb = rg_qv_kind(b->t);
  if (ra != rb) return ra < rb ? -1 : 1;
  return rg_qv_scalar_cmp(a, b);
}

static int is_scalar (int t) {
  return t >= RG_QV_NULL && t <= RG_QV_STR;
}
int rg_qv_parse (rg_arena *a, const char *s, size_t n, rg_qv *out) {
  rg_tape t;
  char *copy = rg_arena_dup(a, n ? s : "", n);
  int rc = -1;
  rg_qv_undef(out);
  if (copy == NULL) return -1;
  memset(&t, 0, sizeof(t));
  if (rg_tape_parse(&t, a, copy, n) == 0 && t.n) {
    rg_qnode *nd = (rg_qnode *)rg_arena_alloc(a, t.n * sizeof(rg_qnode));
    if (nd) {
      memcpy(nd, t.node, t.n * sizeof(rg_qnode));
      rg_qv_of_node(out, nd);
      rc = 0;
    }
  }
  rg_tape_free(&t);
  return rc;
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
    case RG_QV_NUM: rg_qv_print_num(b, nd->d); break;
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
    case RG_QV_NUM: rg_qv_print_num(b, v->d); break;
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

int rg_qv_term_json (const uint8_t *t, size_t n, rg_buf *out, size_t *used) {
  size_t i;
  *used = 0;
  if (n == 0) return -1;
  switch (t[0]) {
    case 0x05: rg_buf_add(out, "null", 4); *used = 1; return 0;
    case 0x06: rg_buf_add(out, "false", 5); *used = 1; return 0;
    case 0x07: rg_buf_add(out, "true", 4); *used = 1; return 0;
    case 0x08: {
      uint64_t bits;
      double d;
      if (n < 9) return -1;
      bits = rg_get_u64(t + 1);
      if (bits >> 63) bits ^= (uint64_t)1 << 63;
      else bits = ~bits;
      memcpy(&d, &bits, 8);
      rg_qv_print_num(out, d);
      *used = 9;
      return 0;
    }
    case 0x09: {
      rg_buf raw;
      rg_buf_init(&raw);
      for (i = 1; i + 1 < n; i++) {
        if (t[i] != 0) { rg_buf_addc(&raw, t[i]); continue; }
        if (t[i + 1] == 0xFF) { rg_buf_addc(&raw, 0); i++; continue; }
        if (t[i + 1] == 0x01) {
          rg_json_quote(out, raw.p ? raw.p : "", raw.n);
          rg_buf_free(&raw);
          *used = i + 2;
          return 0;
        }
        break;                       /* 0x02: cut, or malformed */
      }
      rg_buf_free(&raw);
      return -1;
    }
    default: return -1;
  }
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
** Evaluation
** ======================================================================
*/
void rg_qctx_fail (rg_qctx *x, int status, const char *msg) {
  if (x->status) return;
  x->status = status;
  rg_fail(&x->err, status, "%s", msg);
}

int rg_qctx_late (rg_qctx *x) {
  if (x->status) return 1;
  if (x->deadline == NULL || !rg_deadline_passed(x->deadline)) return 0;
  x->status = rg_fail(&x->err, 408, "the query exceeded its time limit "
                      "(%.2f s of CPU)", (double)x->deadline->limit / 1e9);
  return 1;
}

int rg_qctx_work (rg_qctx *x, uint64_t steps, uint64_t linear) {
  if (steps > linear) x->steps += steps - linear;
  return rg_qctx_late(x);
}

static void compare (int op, const rg_qv *a, const rg_qv *b, rg_qv *out) {
  int c;
  *out = undef;
  if (a->t == RG_QV_UNDEF || b->t == RG_QV_UNDEF) return;
  if (rg_qv_kind(a->t) != rg_qv_kind(b->t)) return;   /* across types */
  if (op == RG_QO_EQ) { rg_qv_bool(out, rg_qv_equal(a, b)); return; }
  if (op == RG_QO_NE) { rg_qv_bool(out, !rg_qv_equal(a, b)); return; }
  if (!is_scalar(a->t)) return;
  c = rg_qv_scalar_cmp(a, b);
  switch (op) {
    case RG_QO_LT: rg_qv_bool(out, c < 0); break;
    case RG_QO_LE: rg_qv_bool(out, c <= 0); break;
    case RG_QO_GT: rg_qv_bool(out, c > 0); break;
    default: rg_qv_bool(out, c >= 0); break;
  }
}

/* JavaScript's ToInt32: bitwise operators work on 32-bit integers. */
static int32_t to_int32 (double d) {
  double m;
  if (d != d || d == HUGE_VAL || d == -HUGE_VAL) return 0;
  d = d < 0 ? ceil(d) : floor(d);
  m = fmod(d, 4294967296.0);
  if (m < 0) m += 4294967296.0;
  return (int32_t)(uint32_t)m;
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
    rg_qv_str(out, s, a->n + b->n);
    return;
  }
  if (a->t != RG_QV_NUM || b->t != RG_QV_NUM) return;
  switch (op) {
    case RG_QO_ADD: rg_qv_num(out, a->d + b->d); break;
    case RG_QO_SUB: rg_qv_num(out, a->d - b->d); break;
    case RG_QO_MUL: rg_qv_num(out, a->d * b->d); break;
    case RG_QO_DIV: if (b->d != 0) rg_qv_num(out, a->d / b->d); break;
    case RG_QO_MOD: if (b->d != 0) rg_qv_num(out, fmod(a->d, b->d)); break;
    case RG_QO_BAND:
      rg_qv_num(out, (double)(to_int32(a->d) & to_int32(b->d)));
      break;
    case RG_QO_BOR:
      rg_qv_num(out, (double)(to_int32(a->d) | to_int32(b->d)));
      break;
    case RG_QO_BXOR:
      rg_qv_num(out, (double)(to_int32(a->d) ^ to_int32(b->d)));
      break;
    case RG_QO_SHL:
      rg_qv_num(out, (double)(int32_t)((uint32_t)to_int32(a->d) <<
                                       ((uint32_t)to_int32(b->d) & 31)));
      break;
    case RG_QO_SHR: {
      int32_t v = to_int32(a->d);
      uint32_t s = (uint32_t)to_int32(b->d) & 31;
      rg_qv_num(out, (double)(v < 0 ? ~(~v >> s) : v >> s));
      break;
    }
    case RG_QO_USHR:
      rg_qv_num(out, (double)((uint32_t)to_int32(a->d) >>
                              ((uint32_t)to_int32(b->d) & 31)));
      break;
    default: break;
  }
}

/* The value of computed property k for the current document. */
static void computed (rg_qctx *x, int k, rg_qv *out) {
  *out = undef;
  if (k < 0 || k >= x->ncp || x->doc.t == RG_QV_UNDEF) return;
  if (x->cp_members) {               /* a document of index values */
    const rg_qnode *m = x->doc.t == RG_QV_OBJ
      ? rg_qnode_member(x->doc.node, x->cp[k].name, x->cp[k].nlen) : NULL;
    if (m) rg_qv_of_node(out, m);
    return;
  }
  if (!x->cpdone[k]) {
    const rg_query *cq = x->cp[k].q;
    rg_qctx c;
    rg_qv bind[2];
    memset(&c, 0, sizeof(c));
    c.q = cq;
    c.bind = bind;
    c.scratch = x->scratch;
    c.doc = x->doc;
    bind[0] = x->doc;
    bind[1] = x->doc;
    c.now_ticks = x->now_ticks;
    rg_qeval(&c, cq->sel[cq->blk[0].sel0].expr, &x->cpv[k]);
    rg_qfts_free(&c);                /* a FullTextContains' analyses */
    x->cpdone[k] = 1;
  }
  *out = x->cpv[k];
}

static void udf (rg_qctx *x, const rg_qexpr *ex, rg_qv *out) {
  const int32_t *args = rg_qargs(x->q, ex);
  const char *small[8], **av = small;
  size_t smalll[8], *al = smalll;
  rg_buf text, res;
  rg_err e;
  int i, rc;
  *out = undef;
  if (x->status) return;
  if (x->udf == NULL) {
    rg_qctx_fail(x, 400, "user-defined functions cannot be called here");
    return;
  }
  if (ex->nlist > 8) {
    av = (const char **)rg_arena_alloc(x->scratch, (size_t)ex->nlist *
                                       sizeof(char *));
    al = (size_t *)rg_arena_alloc(x->scratch, (size_t)ex->nlist *
                                  sizeof(size_t));
    if (av == NULL || al == NULL) return;
  }
  rg_buf_init(&text);
  rg_buf_init(&res);
  {
    size_t *offs = (size_t *)rg_arena_alloc(x->scratch, (size_t)(ex->nlist + 1)
                                            * sizeof(size_t));
    if (offs == NULL) return;
    for (i = 0; i < ex->nlist; i++) {
      rg_qv v;
      rg_qeval(x, args[i], &v);
      offs[i] = v.t == RG_QV_UNDEF ? (size_t)-1 : text.n;
      if (v.t != RG_QV_UNDEF) rg_qv_print(&text, &v);
      al[i] = v.t == RG_QV_UNDEF ? 0 : text.n - offs[i];
    }
    if (text.oom) { x->scratch->oom = 1; rg_buf_free(&text); return; }
    for (i = 0; i < ex->nlist; i++)
      av[i] = offs[i] == (size_t)-1 ? NULL : text.p + offs[i];
  }
  rc = x->udf->call(x->udf->ud, ex->s, ex->n, av, al, ex->nlist, &res, &e);
  rg_buf_free(&text);
  if (rc) {
    rg_qctx_fail(x, rc, e.msg);
    rg_buf_free(&res);
    return;
  }
  if (res.n) rg_qv_parse(x->scratch, res.p, res.n, out);
  rg_buf_free(&res);
}

void rg_qeval (rg_qctx *x, int32_t e, rg_qv *out) {
  const rg_qexpr *ex = &x->q->ex[e];
  rg_qv a, b, c;
  *out = undef;
  switch (ex->k) {
    case RG_QE_LIT: *out = ex->v; return;
    case RG_QE_PARAM: *out = x->params[ex->slot]; return;
    case RG_QE_ALIAS: *out = x->bind[ex->slot]; return;
    case RG_QE_ROOT: *out = x->doc; return;
    case RG_QE_GROUPREF: if (x->groupv) *out = x->groupv[ex->slot]; return;
    case RG_QE_COMPUTED: computed(x, ex->slot, out); return;
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
        const rg_qnode *m = rg_qnode_element(a.node, (uint32_t)b.d);
        if (m) rg_qv_of_node(out, m);
      }
      else if (a.t == RG_QV_OBJ && b.t == RG_QV_STR) {
        const rg_qnode *m = rg_qnode_member(a.node, b.s, b.n);
        if (m) rg_qv_of_node(out, m);
      }
      return;
    case RG_QE_UNARY:
      rg_qeval(x, ex->a, &a);
      if (a.t != RG_QV_NUM) return;
      if (ex->op == RG_QO_BNOT) rg_qv_num(out, (double)~to_int32(a.d));
      else rg_qv_num(out, ex->op == RG_QO_NEG ? -a.d : a.d);
      return;
    case RG_QE_BINARY:
      rg_qeval(x, ex->a, &a);
      rg_qeval(x, ex->b, &b);
      binary(x, ex->op, &a, &b, out);
      return;
    case RG_QE_AND:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_FALSE) { rg_qv_bool(out, 0); return; }
      rg_qeval(x, ex->b, &b);
      if (b.t == RG_QV_FALSE) rg_qv_bool(out, 0);
      else if (a.t == RG_QV_TRUE && b.t == RG_QV_TRUE) rg_qv_bool(out, 1);
      return;
    case RG_QE_OR:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_TRUE) { rg_qv_bool(out, 1); return; }
      rg_qeval(x, ex->b, &b);
      if (b.t == RG_QV_TRUE) rg_qv_bool(out, 1);
      else if (a.t == RG_QV_FALSE && b.t == RG_QV_FALSE) rg_qv_bool(out, 0);
      return;
    case RG_QE_NOT:
      rg_qeval(x, ex->a, &a);
      if (a.t == RG_QV_TRUE || a.t == RG_QV_FALSE)
        rg_qv_bool(out, a.t == RG_QV_FALSE);
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
        hit = rg_qv_kind(a.t) == rg_qv_kind(b.t) && rg_qv_equal(&a, &b);
      }
      rg_qv_bool(out, ex->op ? !hit : hit);
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
        rg_qv_bool(out, ex->op ? 1 : 0);
      else if (lo.t == RG_QV_TRUE && hi.t == RG_QV_TRUE)
        rg_qv_bool(out, ex->op ? 0 : 1);
      return;
    }
    case RG_QE_LIKE: {
      unsigned esc = 0;
      rg_qeval(x, ex->a, &a);
      rg_qeval(x, ex->b, &b);
      if (a.t != RG_QV_STR || b.t != RG_QV_STR) return;
      if (ex->c >= 0) {
        unsigned cp;
        int k;
        rg_qeval(x, ex->c, &c);
        if (c.t != RG_QV_STR || c.n == 0) return;
        k = rg_utf8_seq((const unsigned char *)c.s, c.n);
        if (k <= 0 || (size_t)k != c.n) return;   /* one character */
        cp = (unsigned char)c.s[0];
        if (k > 1) {
          cp &= 0x3Fu >> (k - 1);
          for (int j = 1; j < k; j++)
            cp = (cp << 6) | ((unsigned char)c.s[j] & 0x3F);
        }
        esc = cp;
      }
      {
        int m = rg_like(x, a.s, a.n, b.s, b.n, esc);
        if (m >= 0) rg_qv_bool(out, ex->op ? !m : m);
      }
      return;
    }
    case RG_QE_CALL: {
      rg_qv small[8], *args = small;
      int i, n = ex->nlist;
      if (RG_QF_ISAGG(ex->op)) {     /* the result of the accumulation */
        if (x->aggs) *out = x->aggs[ex->slot];
        return;
      }
      if (ex->op >= RG_QF_FULLTEXTCONTAINS && ex->op <= RG_QF_RRF) {
        rg_qfts_call(x, e, out);     /* full text: its own arguments */
        return;
      }
      if (ex->op == RG_QF_VECTORDISTANCE) {   /* the vectors alone: the
                                                 rest chose the plan */
        for (i = 0; i < 2; i++)
          rg_qeval(x, x->q->list[ex->list + i], &args[i]);
        rg_qvd_eval(x, ex, args, 2, out);
        return;
      }
      if (n > 8) {
        args = (rg_qv *)rg_arena_alloc(x->scratch, (size_t)n * sizeof(rg_qv));
        if (args == NULL) return;
      }
      for (i = 0; i < n; i++) rg_qeval(x, x->q->list[ex->list + i], &args[i]);
      rg_qcall(x, ex->op, args, n, out);
      return;
    }
    case RG_QE_UDF: udf(x, ex, out); return;
    case RG_QE_SUBQ: rg_qsubquery(x, ex, out); return;
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
** Aggregates
** ======================================================================
*/
int rg_qagg_add (rg_qagg *g, const rg_qv *v, uint64_t w) {
  if (v->t == RG_QV_UNDEF) return 0;
  if (w == 0) w = 1;
  switch (g->fn) {
    case RG_QF_COUNT: g->count += w; break;
    case RG_QF_SUM: case RG_QF_AVG:
      if (v->t != RG_QV_NUM) g->bad = 1;
      else { g->sum += v->d * (double)w; g->count += w; }
      break;
    default:                         /* MIN, MAX */
      if (v->t == RG_QV_ARR || v->t == RG_QV_OBJ) { g->bad = 1; break; }
      if (!g->has || (g->fn == RG_QF_MIN ? rg_qv_any_cmp(v, &g->best) < 0
                                         : rg_qv_any_cmp(v, &g->best) > 0)) {
        g->has = 1;
        g->best = *v;
        g->best.node = NULL;
        if (v->t == RG_QV_STR) {
          g->str.n = 0;
          rg_buf_add(&g->str, v->s, v->n);
          if (g->str.oom) return -1;
          g->best.s = g->str.p ? g->str.p : "";
        }
      }
  }
  return 0;
}

void rg_qagg_result (const rg_qagg *g, rg_qv *out) {
  *out = undef;
  switch (g->fn) {
    case RG_QF_COUNT: rg_qv_num(out, (double)g->count); break;
    case RG_QF_SUM: if (!g->bad) rg_qv_num(out, g->sum); break;
    case RG_QF_AVG:
      if (!g->bad && g->count) rg_qv_num(out, g->sum / (double)g->count);
      break;
    default: if (!g->bad && g->has) *out = g->best;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Subqueries
** ======================================================================
*/
/*
** A subquery runs inside the evaluation of the row that contains it, with
** that row's bindings: its sources range over values of the outer aliases
** (or, without FROM, make one row), its rows are filtered, grouped,
** aggregated, projected, made distinct, ordered and cut in memory, and its
** results (values in the scratch arena or in the document's tape) become
** one value: the first result (scalar), whether there is one (EXISTS), or
** an array of them all (ARRAY, and the rows a JOIN ranges over).
*/
typedef struct sgroup {              /* a group of a grouped subquery */
  rg_buf key;
  rg_qv *vals;                       /* its GROUP BY values */
  rg_qagg *aggs;
} sgroup;

typedef struct subrun {
  rg_qctx *x;
  const rg_qblock *b;
  int blk, kind;
  int32_t *aggslot;                  /* the block's aggregate calls */
  int naggs;
  rg_qagg *aggs;                     /* ungrouped accumulators */
  sgroup *groups;
  size_t ngroups, capgroups;
  rg_qv *vals;                       /* results */
  size_t nvals, capvals;
  rg_buf keys;                       /* ORDER BY keys, one after another */
  size_t *koff;
  uint64_t *dhash;                   /* DISTINCT: hashes of results */
  rg_buf canon;
  size_t *coff;
  int stop;                          /* enough results */
  int oom;
} subrun;

static int sr_push (subrun *r, const rg_qv *v) {
  if (r->nvals == r->capvals) {
    size_t cap = r->capvals ? r->capvals * 2 : 16;
    rg_qv *nv = (rg_qv *)realloc(r->vals, cap * sizeof(rg_qv));
    size_t *nk = (size_t *)realloc(r->koff, (cap + 1) * sizeof(size_t));
    uint64_t *nh;
    size_t *nc;
    if (nv) r->vals = nv;
    if (nk) r->koff = nk;
    nh = (uint64_t *)realloc(r->dhash, cap * sizeof(uint64_t));
    if (nh) r->dhash = nh;
    nc = (size_t *)realloc(r->coff, (cap + 1) * sizeof(size_t));
    if (nc) r->coff = nc;
    if (!nv || !nk || !nh || !nc) { r->oom = 1; return -1; }
    r->capvals = cap;
  }
  r->vals[r->nvals++] = *v;
  return 0;
}

/* The projection of the current row (star: the single binding). */
static int sr_project (subrun *r, rg_qv *out) {
  rg_qctx *x = r->x;
  const rg_qblock *b = r->b;
  const rg_query *q = x->q;
  if (b->star) { *out = x->bind[b->src[0].slot]; return 1; }
  if (b->value) {
    rg_qeval(x, q->sel[b->sel0].expr, out);
    return out->t != RG_QV_UNDEF;
  }
  {
    rg_qv *items = (rg_qv *)rg_arena_alloc(x->scratch, (size_t)b->nsel *
                                           sizeof(rg_qv) + 1);
    const char **names = (const char **)rg_arena_alloc(x->scratch,
                                        (size_t)b->nsel * sizeof(char *) + 1);
    uint32_t *nlens = (uint32_t *)rg_arena_alloc(x->scratch,
                                        (size_t)b->nsel * sizeof(uint32_t) + 1);
    int i, n = 0;
    if (items == NULL || names == NULL || nlens == NULL) return 0;
    for (i = 0; i < b->nsel; i++) {
      rg_qeval(x, q->sel[b->sel0 + i].expr, &items[n]);
      if (items[n].t == RG_QV_UNDEF) continue;
      names[n] = q->sel[b->sel0 + i].name;
      nlens[n] = q->sel[b->sel0 + i].nlen;
      n++;
    }
    rg_qv_build(x->scratch, 1, items, names, nlens, n, out);
    return out->t != RG_QV_UNDEF;
  }
}

/* Keeps a projected result: DISTINCT, ORDER BY keys, early stops. */
static void sr_keep (subrun *r, const rg_qv *v) {
  rg_qctx *x = r->x;
  const rg_qblock *b = r->b;
  size_t i;
  if (b->distinct) {
    size_t start = r->canon.n;
    uint64_t h;
    rg_qv_canon(&r->canon, v);
    if (r->canon.oom) { r->oom = 1; return; }
    h = rg_hash(r->canon.p + start, r->canon.n - start);
    for (i = 0; i < r->nvals; i++)
      if (r->dhash[i] == h &&
          r->coff[i + 1] - r->coff[i] == r->canon.n - start &&
          memcmp(r->canon.p + r->coff[i], r->canon.p + start,
                 r->canon.n - start) == 0) {
        r->canon.n = start;
        return;
      }
    if (sr_push(r, v)) return;
    r->dhash[r->nvals - 1] = h;
    r->coff[r->nvals - 1] = start;
    r->coff[r->nvals] = r->canon.n;
  }
  else if (sr_push(r, v)) return;
  if (b->norder) {
    int k;
    r->koff[r->nvals - 1] = r->keys.n;
    for (k = 0; k < b->norder; k++) {
      rg_qv o;
      rg_qeval(x, b->order[k].expr, &o);
      rg_qv_term(&r->keys, &o, b->order[k].desc, 0);
    }
    r->koff[r->nvals] = r->keys.n;
    if (r->keys.oom) r->oom = 1;
  }
  else if (r->kind == RG_QSUB_EXISTS ||
           (r->kind == RG_QSUB_SCALAR && b->offset < 0 && !b->distinct))
    r->stop = 1;                     /* the first result is the answer */
}

static sgroup *sr_group (subrun *r) {
  rg_qctx *x = r->x;
  const rg_qblock *b = r->b;
  rg_qv *vals;
  rg_buf key;
  size_t i;
  int g, k;
  rg_buf_init(&key);
  vals = (rg_qv *)rg_arena_alloc(x->scratch, (size_t)b->ngroup *
                                 sizeof(rg_qv));
  if (vals == NULL) { r->oom = 1; return NULL; }
  for (g = 0; g < b->ngroup; g++) {
    rg_qeval(x, b->group[g], &vals[g]);
    rg_qv_canon(&key, &vals[g]);
    rg_buf_addc(&key, 0);
  }
  if (key.oom) { rg_buf_free(&key); r->oom = 1; return NULL; }
  for (i = 0; i < r->ngroups; i++)
    if (r->groups[i].key.n == key.n &&
        memcmp(r->groups[i].key.p, key.p, key.n) == 0) {
      rg_buf_free(&key);
      return &r->groups[i];
    }
  if (r->ngroups == r->capgroups) {
    size_t cap = r->capgroups ? r->capgroups * 2 : 8;
    sgroup *ng = (sgroup *)realloc(r->groups, cap * sizeof(sgroup));
    if (ng == NULL) { rg_buf_free(&key); r->oom = 1; return NULL; }
    r->groups = ng;
    r->capgroups = cap;
  }
  {
    sgroup *s = &r->groups[r->ngroups];
    s->key = key;
    s->vals = vals;
    s->aggs = (rg_qagg *)calloc((size_t)r->naggs + 1, sizeof(rg_qagg));
    if (s->aggs == NULL) { rg_buf_free(&key); r->oom = 1; return NULL; }
    for (k = 0; k < r->naggs; k++) {
      const rg_qexpr *a = &x->q->ex[r->aggslot[k]];
      s->aggs[k].fn = a->op;
      s->aggs[k].arg = x->q->list[a->list];
      rg_buf_init(&s->aggs[k].str);
    }
    r->ngroups++;
    return s;
  }
}

static void sr_accumulate (subrun *r, rg_qagg *aggs) {
  int k;
  for (k = 0; k < r->naggs; k++) {
    rg_qv v;
    rg_qeval(r->x, aggs[k].arg, &v);
    if (rg_qagg_add(&aggs[k], &v, 1)) r->oom = 1;
  }
}

static void sr_row (subrun *r) {
  rg_qctx *x = r->x;
  const rg_qblock *b = r->b;
  rg_qv v;
  if (x->made) {
    if (++*x->made > x->max_made && x->max_made) {
      rg_qctx_fail(x, 408, "the query made more rows than its bound");
      r->stop = 1;
      return;
    }
  }
  if (rg_qctx_late(x)) { r->stop = 1; return; }
  if (b->where >= 0) {
    rg_qeval(x, b->where, &v);
    if (v.t != RG_QV_TRUE) return;
  }
  if (b->ngroup) {
    sgroup *g = sr_group(r);
    if (g) sr_accumulate(r, g->aggs);
    return;
  }
  if (b->naggs) { sr_accumulate(r, r->aggs); return; }
  if (sr_project(r, &v)) sr_keep(r, &v);
}


static void sr_rows (subrun *r, int k) {
  rg_qctx *x = r->x;
  const rg_qblock *b = r->b;
  const rg_qsrc *s;
  rg_qv v;
  if (r->stop || r->oom || x->status || x->scratch->oom) return;
  if (k == b->nsrc) { sr_row(r); return; }
  s = &b->src[k];
  switch (s->kind) {
    case RG_QS_VALUE: case RG_QS_ROOT:
      if (s->kind == RG_QS_ROOT) v = x->doc;
      else rg_qeval(x, s->expr, &v);
      if (v.t == RG_QV_UNDEF) return;
      x->bind[s->slot] = v;
      sr_rows(r, k + 1);
      return;
    case RG_QS_SUBQ: rg_qblock_run(x, s->expr, RG_QSUB_ARRAY, &v); break;
    default: rg_qeval(x, s->expr, &v); break;
  }
  if (v.t == RG_QV_ARR) {
    const rg_qnode *c;
    uint32_t i;
    for (i = 0, c = v.node + 1; i < v.node->n && !r->stop; i++, c += c->size) {
      rg_qv_of_node(&x->bind[s->slot], c);
      sr_rows(r, k + 1);
    }
  }
}

static subrun *sort_run;

static int sr_cmp (const void *pa, const void *pb) {
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  size_t la = sort_run->koff[a + 1] - sort_run->koff[a];
  size_t lb = sort_run->koff[b + 1] - sort_run->koff[b];
  int c = memcmp(sort_run->keys.p + sort_run->koff[a],
                 sort_run->keys.p + sort_run->koff[b], la < lb ? la : lb);
  if (c) return c;
  if (la != lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b;         /* stable */
}

/* A TOP, OFFSET or LIMIT of the block: -1 when absent or not a count. */
static int64_t sr_count (rg_qctx *x, int32_t e) {
  rg_qv v;
  if (e < 0) return -1;
  rg_qeval(x, e, &v);
  if (v.t != RG_QV_NUM || v.d < 0 || v.d > 9007199254740992.0 ||
      floor(v.d) != v.d) {
    rg_qctx_fail(x, 400, "TOP, OFFSET and LIMIT must be non-negative "
                 "integers");
    return -1;
  }
  return (int64_t)v.d;
}

void rg_qblock_run (rg_qctx *x, int blk, int kind, rg_qv *out) {
  const rg_query *q = x->q;
  subrun r;
  size_t *ord = NULL, i, n, first;
  int64_t top, off, lim;
  int k;
  *out = undef;
  memset(&r, 0, sizeof(r));
  r.x = x;
  r.b = &q->blk[blk];
  r.blk = blk;
  r.kind = kind;
  rg_buf_init(&r.keys);
  rg_buf_init(&r.canon);
  if (r.b->naggs) {
    r.aggslot = (int32_t *)rg_arena_alloc(x->scratch, (size_t)r.b->naggs *
                                          sizeof(int32_t));
    r.aggs = (rg_qagg *)calloc((size_t)r.b->naggs, sizeof(rg_qagg));
    if (r.aggslot == NULL || r.aggs == NULL) { free(r.aggs); return; }
    for (i = 0; i < (size_t)q->nex; i++) {
      const rg_qexpr *a = &q->ex[i];
      if (a->k == RG_QE_CALL && RG_QF_ISAGG(a->op) && a->n == (uint32_t)blk &&
          r.naggs < r.b->naggs) {
        r.aggslot[r.naggs] = (int32_t)i;
        r.aggs[r.naggs].fn = a->op;
        r.aggs[r.naggs].arg = q->list[a->list];
        rg_buf_init(&r.aggs[r.naggs].str);
        r.naggs++;
      }
    }
  }
  top = sr_count(x, r.b->top);
  off = sr_count(x, r.b->offset);
  lim = sr_count(x, r.b->limit);
  if (r.b->nsrc == 0) sr_row(&r);
  else sr_rows(&r, 0);
  /* aggregates: one row, or one per group */
  if (r.b->ngroup || r.b->naggs) {
    size_t ng = r.b->ngroup ? r.ngroups : 1;
    const rg_qv *saved = x->groupv;
    for (i = 0; i < ng && !r.oom; i++) {
      rg_qagg *aggs = r.b->ngroup ? r.groups[i].aggs : r.aggs;
      rg_qv v;
      for (k = 0; k < r.naggs; k++)
        rg_qagg_result(&aggs[k], &x->aggs[q->ex[r.aggslot[k]].slot]);
      if (r.b->ngroup) x->groupv = r.groups[i].vals;
      if (sr_project(&r, &v)) sr_keep(&r, &v);
      r.stop = 0;
    }
    x->groupv = saved;
  }
  n = r.nvals;
  if (!r.oom && r.b->norder && n > 1) {
    if ((ord = (size_t *)malloc(n * sizeof(size_t))) == NULL) r.oom = 1;
    else {
      for (i = 0; i < n; i++) ord[i] = i;
      sort_run = &r;
      qsort(ord, n, sizeof(size_t), sr_cmp);
    }
  }
  first = off > 0 ? (size_t)off : 0;
  if (first > n) first = n;
  n -= first;
  if (lim >= 0 && (size_t)lim < n) n = (size_t)lim;
  if (top >= 0 && (size_t)top < n) n = (size_t)top;
  if (r.oom) x->scratch->oom = 1;
  else if (kind == RG_QSUB_EXISTS) rg_qv_bool(out, n > 0);
  else if (kind == RG_QSUB_SCALAR) {
    if (n > 0) *out = r.vals[ord ? ord[first] : first];
  }
  else {
    rg_qv *items = (rg_qv *)rg_arena_alloc(x->scratch, (n + 1) *
                                           sizeof(rg_qv));
    if (items) {
      for (i = 0; i < n; i++) items[i] = r.vals[ord ? ord[first + i] : first + i];
      rg_qv_build(x->scratch, 0, items, NULL, NULL, (int)n, out);
    }
  }
  free(ord);
  for (i = 0; i < r.ngroups; i++) {
    for (k = 0; k < r.naggs; k++) rg_buf_free(&r.groups[i].aggs[k].str);
    free(r.groups[i].aggs);
    rg_buf_free(&r.groups[i].key);
  }
  free(r.groups);
  if (r.aggs) for (k = 0; k < r.naggs; k++) rg_buf_free(&r.aggs[k].str);
  free(r.aggs);
  free(r.vals);
  free(r.koff);
  free(r.dhash);
  free(r.coff);
  rg_buf_free(&r.keys);
  rg_buf_free(&r.canon);
}

void rg_qsubquery (rg_qctx *x, const rg_qexpr *ex, rg_qv *out) {
  rg_qblock_run(x, ex->slot, ex->op, out);
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
