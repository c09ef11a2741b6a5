/*
** value.c: the values the query engine works on, and the tapes it reads
** documents into (sql.h).
**
** Documents are not turned into cJSON trees to be queried.  A stored
** item's JSON text is parsed into a tape: one array of nodes in document
** order, reused from item to item, with strings pointing into the text
** itself unless they held escapes.  A value under evaluation (rg_qv) is a
** scalar or a subtree of a tape, so a property read costs a walk over the
** object's members and no allocation, and a value copied into a result is
** copied as the JSON text it was stored as.  Values that queries build
** (object and array constructors, strings made by functions) live in a
** scratch arena that is reset for every row.
**
** Encodings kept here: rg_qv_term gives the order-preserving term of a
** value in the index encoding of store/layout.c (undefined, arrays and
** objects as the single byte 0x01, below every scalar, which is how ORDER
** BY ranks them), and rg_qv_canon a canonical form in which equal values
** (objects in any member order) have equal bytes.  This file is below the
** rest of sql/: the parser (parse.c), evaluation (eval.c), the functions
** (func.c, time.c, fts.c) and the pipeline (exec.c) build on it, and it
** calls none of them; so do the helpers every one of them reports
** failures and checks the time limit with (the last section).
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

/* The member of a parsed object named by MUTF-8 text (NUL as C0 80);
** a name holding NUL is decoded in `a` (*oom set when it cannot be). */
static const rg_qnode *member_mutf8 (const rg_qnode *obj, rg_arena *a,
                                     const char *name, int *oom) {
  size_t i, n = strlen(name);
  char *raw;
  if (memchr(name, 0xC0, n) == NULL) return rg_qnode_member(obj, name, n);
  if ((raw = (char *)rg_arena_alloc(a, n + 1)) == NULL) {
    *oom = 1;
    return NULL;
  }
  for (i = 0, n = 0; name[i]; i++) {
    if ((unsigned char)name[i] == 0xC0 && (unsigned char)name[i + 1] == 0x80) {
      raw[n++] = '\0';
      i++;
    }
    else raw[n++] = name[i];
  }
  return rg_qnode_member(obj, raw, n);
}

int rg_qdoc_terms (rg_tape *t, rg_arena *a, const char *text, size_t len,
                   const char *const *const *seg, const int *nseg,
                   const int *desc, int n, size_t limit, rg_buf *out) {
  size_t start = out->n;
  int i, j;
  if (rg_tape_parse(t, a, text, len) || t->n == 0) return -1;
  for (i = 0; i < n; i++) {
    const rg_qnode *nd = &t->node[0];
    rg_qv v;
    for (j = 0; j < nseg[i] && nd; j++)
      nd = nd->t == RG_QV_OBJ ? member_mutf8(nd, a, seg[i][j], &out->oom)
                             : NULL;
    if (out->oom) return -1;
    if (nd == NULL || nd->t < RG_QV_NULL || nd->t > RG_QV_STR) {
      out->n = start;
      return 0;
    }
    rg_qv_of_node(&v, nd);
    rg_qv_term(out, &v, desc ? desc[i] : 0, limit);
  }
  return out->oom ? -1 : 1;
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
      print_num(out, d);
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
** Failures and where they are
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

void rg_query_where (const char *sql, size_t off, int *line, int *col) {
  size_t i;
  *line = 1;
  *col = 1;
  for (i = 0; i < off; i++) {
    unsigned char c = (unsigned char)sql[i];
    if (c == '\n') { (*line)++; *col = 1; }
    else if ((c & 0xC0) != 0x80) (*col)++;
  }
}
/* }===================================================================== */
