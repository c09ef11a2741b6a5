/*
** parse.c: the lexer and parser of the query dialect.
**
** The dialect is the Cosmos DB NoSQL subset of docs/query.md:
**
**   query    := SELECT [DISTINCT] [TOP n] select FROM from {JOIN join}
**               [WHERE expr] [ORDER BY key {, key}] [OFFSET n LIMIT m]
**   select   := '*' | VALUE expr | expr [[AS] name] {, expr [[AS] name]}
**   from     := name [[AS] alias]           (the alias names the item)
**   join     := alias IN expr               (expr rooted at an earlier alias)
**   key      := expr [ASC | DESC]
**   n, m     := an integer literal or a @parameter
**   filter   := FROM from {JOIN join} WHERE expr    (patch filters)
**
** Expressions, from the loosest binding to the tightest: `c ? a : b`,
** `a ?? b`, OR, AND, NOT, comparisons (= != <> < <= > >= [NOT] IN (...)
** [NOT] BETWEEN a AND b), `||`, + -, * / %, unary - +, then property
** access `.name`, `["name"]` and `[index]` on a primary: a literal (number,
** 'string' or "string", true, false, null, undefined), a @parameter, an
** alias, a function call, `(expr)`, an array `[...]` or an object
** `{name: expr, ...}`.  Keywords and function names are case-insensitive;
** after a dot any word is a property name.  `--` starts a comment.
**
** The parser builds the expression nodes of rg_query (sql.h) in one
** array, then resolves names: aliases to binding slots (0 the FROM alias,
** then the joins in order), parameters to slots, aggregate calls to
** accumulator slots, and checks the rules a grammar cannot say (aggregates
** only in the SELECT list and never nested, with every alias reference of
** such a query inside an aggregate; SELECT * only over a single input).
** Every error is 400 and names the place: "syntax error at 1:17: expected
** FROM, found 'WHERE'".  Nesting is bounded (RG_QMAX_DEPTH) so that the
** recursive parser and evaluator cannot exhaust the C stack.
*/

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_int.h"

enum {
  TK_EOF, TK_IDENT, TK_NUM, TK_STR, TK_PARAM, TK_STAR, TK_COMMA, TK_DOT,
  TK_LP, TK_RP, TK_LB, TK_RB, TK_LC, TK_RC, TK_COLON, TK_QUEST, TK_COAL,
  TK_EQ, TK_NE, TK_LT, TK_LE, TK_GT, TK_GE, TK_PLUS, TK_MINUS, TK_SLASH,
  TK_PCT, TK_CAT
};

typedef struct token {
  int k;
  uint32_t pos, len;          /* where it is in the text */
  double num;
  const char *s;              /* identifier, parameter name, string bytes */
  uint32_t n;
} token;

typedef struct pstate {
  const char *src;
  size_t n, p;                /* the text and the lexer's cursor */
  token t;                    /* the current token */
  rg_query *q;
  rg_err *e;
  int depth;
  int filter;                 /* the patch-filter form */
  uint32_t star_pos;          /* where SELECT * is */
  int status;                 /* the first error */
} pstate;

static const char *const reserved[] = {
  "SELECT", "FROM", "WHERE", "ORDER", "BY", "AS", "JOIN", "IN", "AND", "OR",
  "NOT", "BETWEEN", "TOP", "DISTINCT", "VALUE", "OFFSET", "LIMIT", "ASC",
  "DESC", "TRUE", "FALSE", "NULL", "UNDEFINED", "GROUP", "LIKE", "EXISTS",
  NULL
};

static const struct { const char *name; int fn, min, max; } functions[] = {
  {"COUNT", RG_QF_COUNT, 1, 1}, {"SUM", RG_QF_SUM, 1, 1},
  {"MIN", RG_QF_MIN, 1, 1}, {"MAX", RG_QF_MAX, 1, 1},
  {"AVG", RG_QF_AVG, 1, 1},
  {"IS_DEFINED", RG_QF_IS_DEFINED, 1, 1}, {"IS_NULL", RG_QF_IS_NULL, 1, 1},
  {"IS_STRING", RG_QF_IS_STRING, 1, 1}, {"IS_NUMBER", RG_QF_IS_NUMBER, 1, 1},
  {"IS_BOOL", RG_QF_IS_BOOL, 1, 1}, {"IS_ARRAY", RG_QF_IS_ARRAY, 1, 1},
  {"IS_OBJECT", RG_QF_IS_OBJECT, 1, 1},
  {"ARRAY_CONTAINS", RG_QF_ARRAY_CONTAINS, 2, 3},
  {"ARRAY_LENGTH", RG_QF_ARRAY_LENGTH, 1, 1},
  {"STARTSWITH", RG_QF_STARTSWITH, 2, 3}, {"ENDSWITH", RG_QF_ENDSWITH, 2, 3},
  {"CONTAINS", RG_QF_CONTAINS, 2, 3}, {"LOWER", RG_QF_LOWER, 1, 1},
  {"UPPER", RG_QF_UPPER, 1, 1}, {"LENGTH", RG_QF_LENGTH, 1, 1},
  {"CONCAT", RG_QF_CONCAT, 2, 64}, {"SUBSTRING", RG_QF_SUBSTRING, 3, 3},
  {"LEFT", RG_QF_LEFT, 2, 2},
  {NULL, 0, 0, 0}
};


/*
** {=====================================================================
** Errors
** ======================================================================
*/
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

/* A short description of the current token, for messages. */
static void describe (pstate *P, char *out, size_t size) {
  const token *t = &P->t;
  size_t n = t->len > 24 ? 24 : t->len;
  if (t->k == TK_EOF) snprintf(out, size, "the end of the text");
  else {
    while (n > 0 && n < t->len &&
           ((unsigned char)P->src[t->pos + n] & 0xC0) == 0x80)
      n--;                           /* do not cut a character */
    snprintf(out, size, "'%.*s%s'", (int)n, P->src + t->pos,
             n < t->len ? "..." : "");
  }
}

static int fail_at (pstate *P, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 3, 4)))
#endif
  ;

static int fail_at (pstate *P, size_t pos, const char *fmt, ...) {
  char what[300];
  va_list ap;
  int line, col;
  if (P->status) return P->status;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  rg_query_where(P->src, pos, &line, &col);
  P->status = rg_fail(P->e, 400, "syntax error at %d:%d: %s", line, col, what);
  return P->status;
}

/* "expected X, found Y" at the current token. */
static int expected (pstate *P, const char *what) {
  char found[64];
  describe(P, found, sizeof(found));
  return fail_at(P, P->t.pos, "expected %s, found %s", what, found);
}

static int oom (pstate *P) {
  if (!P->status) P->status = rg_fail(P->e, 500, "out of memory");
  return P->status;
}
/* }===================================================================== */


/*
** {=====================================================================
** Lexer
** ======================================================================
*/
static int is_alpha (int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == '$' || c >= 0x80;
}

static int is_digit (int c) {
  return c >= '0' && c <= '9';
}

/* Scans a quoted string starting at P->p; its bytes go to the arena. */
static int lex_string (pstate *P, token *t) {
  const char *s = P->src;
  char q = s[P->p], *w, *o;
  size_t i = P->p + 1, start = i, end;
  while (i < P->n && s[i] != q) {
    if (s[i] == '\\') i++;
    i++;
  }
  if (i >= P->n) return fail_at(P, P->p, "unterminated string");
  end = i;
  if ((w = (char *)rg_arena_alloc(&P->q->mem, i - start + 1)) == NULL)
    return oom(P);
  o = w;
  for (i = start; i < end; i++) {
    unsigned cp;
    const char *why;
    size_t k;
    if (s[i] != '\\') { *o++ = s[i]; continue; }
    if (s[i + 1] == '\'') { *o++ = '\''; i++; continue; }
    if ((k = rg_unescape(s + i, s + end, &cp, &why)) == 0)
      return fail_at(P, i, "%s in a string", why);
    o += rg_utf8_put(o, cp);
    i += k - 1;
  }
  t->k = TK_STR;
  t->s = w;
  t->n = (uint32_t)(o - w);
  P->p = i + 1;
  return 0;
}

static int lex_number (pstate *P, token *t) {
  const char *s = P->src;
  size_t i = P->p;
  char buf[64];
  while (i < P->n && is_digit((unsigned char)s[i])) i++;
  if (i + 1 < P->n && s[i] == '.' && is_digit((unsigned char)s[i + 1])) {
    i++;
    while (i < P->n && is_digit((unsigned char)s[i])) i++;
  }
  if (i < P->n && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < P->n && (s[j] == '+' || s[j] == '-')) j++;
    if (j < P->n && is_digit((unsigned char)s[j])) {
      i = j;
      while (i < P->n && is_digit((unsigned char)s[i])) i++;
    }
  }
  if (i < P->n && is_alpha((unsigned char)s[i]))
    return fail_at(P, P->p, "malformed number");
  if (i - P->p >= sizeof(buf)) return fail_at(P, P->p, "number too long");
  memcpy(buf, s + P->p, i - P->p);
  buf[i - P->p] = '\0';
  {                                  /* whatever the C locale's point */
    const char *lp = localeconv()->decimal_point;
    char dp = lp && lp[0] ? lp[0] : '.';
    size_t k;
    if (dp != '.')
      for (k = 0; buf[k]; k++) if (buf[k] == '.') buf[k] = dp;
    t->num = strtod(buf, NULL);
    if (t->num == HUGE_VAL) return fail_at(P, P->p, "number out of range");
  }
  t->k = TK_NUM;
  P->p = i;
  return 0;
}

/* Reads the next token into P->t. */
static int next (pstate *P) {
  const char *s = P->src;
  token *t = &P->t;
  if (P->status) return P->status;
  for (;;) {                         /* white space and -- comments */
    while (P->p < P->n && (s[P->p] == ' ' || s[P->p] == '\t' ||
                           s[P->p] == '\n' || s[P->p] == '\r'))
      P->p++;
    if (P->p + 1 < P->n && s[P->p] == '-' && s[P->p + 1] == '-') {
      while (P->p < P->n && s[P->p] != '\n') P->p++;
      continue;
    }
    break;
  }
  memset(t, 0, sizeof(*t));
  t->pos = (uint32_t)P->p;
  if (P->p >= P->n) { t->k = TK_EOF; return 0; }
  {
    unsigned char c = (unsigned char)s[P->p];
    unsigned char d = P->p + 1 < P->n ? (unsigned char)s[P->p + 1] : 0;
    if (is_alpha(c) || (c == '@' && is_alpha(d))) {
      size_t i = P->p + (c == '@');
      while (i < P->n && (is_alpha((unsigned char)s[i]) ||
                          is_digit((unsigned char)s[i])))
        i++;
      t->k = c == '@' ? TK_PARAM : TK_IDENT;
      t->s = s + P->p + (c == '@');
      t->n = (uint32_t)(i - P->p - (c == '@'));
      P->p = i;
    }
    else if (is_digit(c)) { if (lex_number(P, t)) return P->status; }
    else if (c == '\'' || c == '"') { if (lex_string(P, t)) return P->status; }
    else {
      int k, w = 1;
      switch (c) {
        case '*': k = TK_STAR; break;
        case ',': k = TK_COMMA; break;
        case '.': k = TK_DOT; break;
        case '(': k = TK_LP; break;
        case ')': k = TK_RP; break;
        case '[': k = TK_LB; break;
        case ']': k = TK_RB; break;
        case '{': k = TK_LC; break;
        case '}': k = TK_RC; break;
        case ':': k = TK_COLON; break;
        case '?':
          if (d == '?') { k = TK_COAL; w = 2; }
          else k = TK_QUEST;
          break;
        case '=': k = TK_EQ; break;
        case '!':
          if (d != '=') return fail_at(P, P->p, "unexpected character '!'");
          k = TK_NE; w = 2;
          break;
        case '<':
          if (d == '=') { k = TK_LE; w = 2; }
          else if (d == '>') { k = TK_NE; w = 2; }
          else k = TK_LT;
          break;
        case '>': if (d == '=') { k = TK_GE; w = 2; } else k = TK_GT; break;
        case '+': k = TK_PLUS; break;
        case '-': k = TK_MINUS; break;
        case '/': k = TK_SLASH; break;
        case '%': k = TK_PCT; break;
        case '|':
          if (d != '|') return fail_at(P, P->p, "unexpected character '|'");
          k = TK_CAT; w = 2;
          break;
        default:
          if (c >= 0x20 && c < 0x7F)
            return fail_at(P, P->p, "unexpected character '%c'", c);
          return fail_at(P, P->p, "unexpected character (byte 0x%02X)", c);
      }
      t->k = k;
      P->p += (size_t)w;
    }
  }
  t->len = (uint32_t)(P->p - t->pos);
  return 0;
}

static int word_is (const char *s, size_t n, const char *kw) {
  size_t i;
  for (i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (c >= 'a' && c <= 'z') c -= 32;
    if (kw[i] == '\0' || c != kw[i]) return 0;
  }
  return kw[n] == '\0';
}

/* Is the current token the keyword kw (upper case)? */
static int is_kw (pstate *P, const char *kw) {
  return P->t.k == TK_IDENT && word_is(P->t.s, P->t.n, kw);
}

static int is_reserved (const char *s, size_t n) {
  int i;
  for (i = 0; reserved[i]; i++)
    if (word_is(s, n, reserved[i])) return 1;
  return 0;
}

/* Consumes the keyword kw, or fails with "expected kw". */
static int want_kw (pstate *P, const char *kw) {
  if (!is_kw(P, kw)) return expected(P, kw);
  return next(P);
}

static int want (pstate *P, int k, const char *what) {
  if (P->t.k != k) return expected(P, what);
  return next(P);
}
/* }===================================================================== */


/*
** {=====================================================================
** Expression nodes
** ======================================================================
*/
static int32_t node (pstate *P, int k, uint32_t pos) {
  rg_query *q = P->q;
  rg_qexpr *ex;
  if (P->status) return -1;
  if (q->nex == q->capex) {
    int cap = q->capex ? q->capex * 2 : 32;
    rg_qexpr *nx = (rg_qexpr *)realloc(q->ex, (size_t)cap * sizeof(rg_qexpr));
    if (nx == NULL) { oom(P); return -1; }
    q->ex = nx;
    q->capex = cap;
  }
  ex = &q->ex[q->nex];
  memset(ex, 0, sizeof(*ex));
  ex->k = (uint8_t)k;
  ex->a = ex->b = ex->c = -1;
  ex->slot = -1;
  ex->pos = pos;
  ex->depth = 1;
  return q->nex++;
}

#define EX(P, i) (&(P)->q->ex[i])

/* Sets the depth of node i from its operands; fails when too deep. */
static int32_t deepen (pstate *P, int32_t i) {
  rg_qexpr *ex;
  uint32_t d = 0;
  if (i < 0 || P->status) return -1;
  ex = EX(P, i);
  if (ex->a >= 0 && EX(P, ex->a)->depth > d) d = EX(P, ex->a)->depth;
  if (ex->b >= 0 && EX(P, ex->b)->depth > d) d = EX(P, ex->b)->depth;
  if (ex->c >= 0 && EX(P, ex->c)->depth > d) d = EX(P, ex->c)->depth;
  if (ex->nlist) {
    int k;
    for (k = 0; k < ex->nlist; k++) {
      uint32_t kd = EX(P, P->q->list[ex->list + k])->depth;
      if (kd > d) d = kd;
    }
  }
  ex->depth = d + 1;
  if (ex->depth > RG_QMAX_DEPTH) {
    fail_at(P, ex->pos, "the expression nests too deeply (more than %d "
            "levels)", RG_QMAX_DEPTH);
    return -1;
  }
  return i;
}

static int32_t binop (pstate *P, int k, int op, int32_t a, int32_t b,
                      uint32_t pos) {
  int32_t i;
  if (a < 0 || b < 0) return -1;
  if ((i = node(P, k, pos)) < 0) return -1;
  EX(P, i)->op = (uint8_t)op;
  EX(P, i)->a = a;
  EX(P, i)->b = b;
  return deepen(P, i);
}

/* A growing list of expression indices, moved into q->list at the end. */
typedef struct elist {
  int32_t small[16], *v;
  int n, cap;
} elist;

static void el_init (elist *l) {
  l->v = l->small;
  l->n = 0;
  l->cap = 16;
}

static int el_add (pstate *P, elist *l, int32_t x) {
  if (l->n == l->cap) {
    int cap = l->cap * 2;
    int32_t *nv = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    if (nv == NULL) return oom(P);
    memcpy(nv, l->v, (size_t)l->n * sizeof(int32_t));
    if (l->v != l->small) free(l->v);
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = x;
  return 0;
}

/* Moves the list into the query's list array; returns its start. */
static int32_t el_done (pstate *P, elist *l) {
  rg_query *q = P->q;
  int32_t start = q->nlist;
  if (!P->status && l->n > 0) {
    if (q->nlist + l->n > q->caplist) {
      int cap = q->caplist ? q->caplist : 32;
      int32_t *nl;
      while (cap < q->nlist + l->n) cap *= 2;
      nl = (int32_t *)realloc(q->list, (size_t)cap * sizeof(int32_t));
      if (nl == NULL) oom(P);
      else { q->list = nl; q->caplist = cap; }
    }
    if (!P->status) {
      memcpy(q->list + q->nlist, l->v, (size_t)l->n * sizeof(int32_t));
      q->nlist += l->n;
    }
  }
  if (l->v != l->small) free(l->v);
  l->v = l->small;
  return start;
}
/* }===================================================================== */


/*
** {=====================================================================
** Expressions
** ======================================================================
*/
static int32_t expr (pstate *P);

/* A comma-separated list up to `close`; the opening token is consumed. */
static int list_of (pstate *P, int close, const char *what, int32_t *start,
                    int32_t *count) {
  elist l;
  el_init(&l);
  if (P->t.k != close) {
    for (;;) {
      int32_t x = expr(P);
      if (x < 0 || el_add(P, &l, x)) break;
      if (P->t.k == TK_COMMA) { next(P); continue; }
      if (P->t.k != close) expected(P, what);
      break;
    }
  }
  *count = l.n;
  *start = el_done(P, &l);
  if (P->status) return P->status;
  return next(P);                    /* the closing token */
}

static int32_t call (pstate *P, const char *name, uint32_t nlen,
                     uint32_t pos) {
  int f, nargs;
  int32_t i, start, count;
  for (f = 0; functions[f].name; f++)
    if (word_is(name, nlen, functions[f].name)) break;
  if (functions[f].name == NULL) {
    fail_at(P, pos, "unknown function '%.*s'", (int)(nlen > 40 ? 40 : nlen),
            name);
    return -1;
  }
  if (next(P)) return -1;            /* '(' */
  if ((i = node(P, RG_QE_CALL, pos)) < 0) return -1;
  if (list_of(P, TK_RP, "',' or ')'", &start, &count)) return -1;
  nargs = count;
  if (nargs < functions[f].min || nargs > functions[f].max) {
    if (functions[f].min == functions[f].max)
      fail_at(P, pos, "%s takes %d argument%s, not %d", functions[f].name,
              functions[f].min, functions[f].min == 1 ? "" : "s", nargs);
    else
      fail_at(P, pos, "%s takes %d to %d arguments, not %d",
              functions[f].name, functions[f].min, functions[f].max, nargs);
    return -1;
  }
  EX(P, i)->op = (uint8_t)functions[f].fn;
  EX(P, i)->list = start;
  EX(P, i)->nlist = count;
  return deepen(P, i);
}

static int32_t object (pstate *P, uint32_t pos) {
  elist l;
  int32_t i = node(P, RG_QE_OBJECT, pos);
  if (i < 0 || next(P)) return -1;   /* '{' */
  el_init(&l);
  if (P->t.k != TK_RC) {
    for (;;) {
      int32_t m, v;
      const char *name;
      uint32_t nlen, mpos = P->t.pos;
      int k;
      if (P->t.k != TK_IDENT && P->t.k != TK_STR) {
        expected(P, "a property name");
        break;
      }
      name = P->t.s;
      nlen = P->t.n;
      if (next(P) || want(P, TK_COLON, "':'")) break;
      if ((v = expr(P)) < 0) break;
      for (k = 0; k < l.n; k++) {
        const rg_qexpr *o = EX(P, l.v[k]);
        if (o->n == nlen && memcmp(o->s, name, nlen) == 0) {
          fail_at(P, mpos, "duplicate property '%.*s' in an object",
                  (int)(nlen > 40 ? 40 : nlen), name);
          break;
        }
      }
      if (P->status || (m = node(P, RG_QE_MEMBER, mpos)) < 0) break;
      EX(P, m)->s = name;
      EX(P, m)->n = nlen;
      EX(P, m)->a = v;
      if (deepen(P, m) < 0 || el_add(P, &l, m)) break;
      if (P->t.k == TK_COMMA) { next(P); continue; }
      if (P->t.k != TK_RC) expected(P, "',' or '}'");
      break;
    }
  }
  EX(P, i)->nlist = l.n;
  EX(P, i)->list = el_done(P, &l);
  if (P->status || next(P)) return -1;
  return deepen(P, i);
}

static int32_t primary (pstate *P) {
  token t = P->t;
  int32_t i;
  switch (t.k) {
    case TK_NUM:
      if ((i = node(P, RG_QE_LIT, t.pos)) < 0) return -1;
      EX(P, i)->v.t = RG_QV_NUM;
      EX(P, i)->v.d = t.num;
      return next(P) ? -1 : i;
    case TK_STR:
      if ((i = node(P, RG_QE_LIT, t.pos)) < 0) return -1;
      EX(P, i)->v.t = RG_QV_STR;
      EX(P, i)->v.s = t.s;
      EX(P, i)->v.n = t.n;
      return next(P) ? -1 : i;
    case TK_PARAM:
      if ((i = node(P, RG_QE_PARAM, t.pos)) < 0) return -1;
      EX(P, i)->s = t.s;
      EX(P, i)->n = t.n;
      return next(P) ? -1 : i;
    case TK_LP:
      if (next(P) || (i = expr(P)) < 0) return -1;
      if (want(P, TK_RP, "')'")) return -1;
      return i;
    case TK_LB: {
      int32_t start, count;
      if ((i = node(P, RG_QE_ARRAY, t.pos)) < 0 || next(P)) return -1;
      if (list_of(P, TK_RB, "',' or ']'", &start, &count)) return -1;
      EX(P, i)->list = start;
      EX(P, i)->nlist = count;
      return deepen(P, i);
    }
    case TK_LC: return object(P, t.pos);
    case TK_IDENT: {
      static const struct { const char *kw; int t; } lits[] = {
        {"TRUE", RG_QV_TRUE}, {"FALSE", RG_QV_FALSE}, {"NULL", RG_QV_NULL},
        {"UNDEFINED", RG_QV_UNDEF}, {NULL, 0}
      };
      int k;
      for (k = 0; lits[k].kw; k++)
        if (is_kw(P, lits[k].kw)) {
          if ((i = node(P, RG_QE_LIT, t.pos)) < 0) return -1;
          EX(P, i)->v.t = (uint8_t)lits[k].t;
          return next(P) ? -1 : i;
        }
      if (P->p < P->n) {             /* a call: the name then '(' */
        size_t j = P->p;
        while (j < P->n && (P->src[j] == ' ' || P->src[j] == '\t' ||
                            P->src[j] == '\n' || P->src[j] == '\r'))
          j++;
        if (j < P->n && P->src[j] == '(') {
          if (next(P)) return -1;
          return call(P, t.s, t.n, t.pos);
        }
      }
      if (is_reserved(t.s, t.n)) {
        expected(P, "an expression");
        return -1;
      }
      if ((i = node(P, RG_QE_IDENT, t.pos)) < 0) return -1;
      EX(P, i)->s = t.s;
      EX(P, i)->n = t.n;
      return next(P) ? -1 : i;
    }
    default:
      expected(P, "an expression");
      return -1;
  }
}

static int32_t postfix (pstate *P) {
  int32_t x = primary(P);
  while (x >= 0) {
    uint32_t pos = P->t.pos;
    int32_t i;
    if (P->t.k == TK_DOT) {
      if (next(P)) return -1;
      if (P->t.k != TK_IDENT) { expected(P, "a property name"); return -1; }
      if ((i = node(P, RG_QE_PROP, pos)) < 0) return -1;
      EX(P, i)->a = x;
      EX(P, i)->s = P->t.s;
      EX(P, i)->n = P->t.n;
      if (next(P)) return -1;
      x = deepen(P, i);
    }
    else if (P->t.k == TK_LB) {
      int32_t ix;
      if (next(P) || (ix = expr(P)) < 0) return -1;
      if (want(P, TK_RB, "']'")) return -1;
      if (EX(P, ix)->k == RG_QE_LIT && EX(P, ix)->v.t == RG_QV_STR) {
        /* c["name"] is c.name */
        if ((i = node(P, RG_QE_PROP, pos)) < 0) return -1;
        EX(P, i)->a = x;
        EX(P, i)->s = EX(P, ix)->v.s;
        EX(P, i)->n = (uint32_t)EX(P, ix)->v.n;
      }
      else {
        if ((i = node(P, RG_QE_INDEX, pos)) < 0) return -1;
        EX(P, i)->a = x;
        EX(P, i)->b = ix;
      }
      x = deepen(P, i);
    }
    else break;
  }
  return x;
}

static int32_t unary (pstate *P) {
  if (P->t.k == TK_MINUS || P->t.k == TK_PLUS) {
    uint32_t pos = P->t.pos;
    int op = P->t.k == TK_MINUS ? RG_QO_NEG : RG_QO_POS;
    int32_t a, i;
    if (++P->depth > RG_QMAX_DEPTH) {
      fail_at(P, pos, "the expression nests too deeply");
      return -1;
    }
    if (next(P) || (a = unary(P)) < 0) return -1;
    P->depth--;
    if (EX(P, a)->k == RG_QE_LIT && EX(P, a)->v.t == RG_QV_NUM) {
      if (op == RG_QO_NEG) EX(P, a)->v.d = -EX(P, a)->v.d;   /* fold */
      EX(P, a)->pos = pos;
      return a;
    }
    if ((i = node(P, RG_QE_UNARY, pos)) < 0) return -1;
    EX(P, i)->op = (uint8_t)op;
    EX(P, i)->a = a;
    return deepen(P, i);
  }
  return postfix(P);
}

static int32_t mul (pstate *P) {
  int32_t x = unary(P);
  while (x >= 0 && (P->t.k == TK_STAR || P->t.k == TK_SLASH ||
                    P->t.k == TK_PCT)) {
    int op = P->t.k == TK_STAR ? RG_QO_MUL : P->t.k == TK_SLASH ? RG_QO_DIV
                                                                 : RG_QO_MOD;
    uint32_t pos = P->t.pos;
    if (next(P)) return -1;
    x = binop(P, RG_QE_BINARY, op, x, unary(P), pos);
  }
  return x;
}

static int32_t add (pstate *P) {
  int32_t x = mul(P);
  while (x >= 0 && (P->t.k == TK_PLUS || P->t.k == TK_MINUS)) {
    int op = P->t.k == TK_PLUS ? RG_QO_ADD : RG_QO_SUB;
    uint32_t pos = P->t.pos;
    if (next(P)) return -1;
    x = binop(P, RG_QE_BINARY, op, x, mul(P), pos);
  }
  return x;
}

static int32_t concat (pstate *P) {
  int32_t x = add(P);
  while (x >= 0 && P->t.k == TK_CAT) {
    uint32_t pos = P->t.pos;
    if (next(P)) return -1;
    x = binop(P, RG_QE_BINARY, RG_QO_CAT, x, add(P), pos);
  }
  return x;
}

static int32_t comparison (pstate *P) {
  int32_t x = concat(P);
  for (;;) {
    uint32_t pos = P->t.pos;
    int op = -1, negate = 0;
    if (x < 0) return -1;
    switch (P->t.k) {
      case TK_EQ: op = RG_QO_EQ; break;
      case TK_NE: op = RG_QO_NE; break;
      case TK_LT: op = RG_QO_LT; break;
      case TK_LE: op = RG_QO_LE; break;
      case TK_GT: op = RG_QO_GT; break;
      case TK_GE: op = RG_QO_GE; break;
      default: break;
    }
    if (op >= 0) {
      if (next(P)) return -1;
      x = binop(P, RG_QE_BINARY, op, x, concat(P), pos);
      continue;
    }
    if (is_kw(P, "NOT")) {           /* NOT IN, NOT BETWEEN */
      size_t save = P->p;
      token t = P->t;
      if (next(P)) return -1;
      if (!is_kw(P, "IN") && !is_kw(P, "BETWEEN")) {
        P->p = save;                 /* not ours: put NOT back */
        P->t = t;
        return x;
      }
      negate = 1;
    }
    if (is_kw(P, "IN")) {
      int32_t i, start, count;
      if (next(P) || want(P, TK_LP, "'(' after IN")) return -1;
      if ((i = node(P, RG_QE_IN, pos)) < 0) return -1;
      if (list_of(P, TK_RP, "',' or ')'", &start, &count)) return -1;
      if (count == 0) {
        fail_at(P, pos, "IN needs at least one value");
        return -1;
      }
      EX(P, i)->op = (uint8_t)negate;
      EX(P, i)->a = x;
      EX(P, i)->list = start;
      EX(P, i)->nlist = count;
      x = deepen(P, i);
      continue;
    }
    if (is_kw(P, "BETWEEN")) {
      int32_t i, lo, hi;
      if (next(P) || (lo = concat(P)) < 0) return -1;
      if (want_kw(P, "AND") || (hi = concat(P)) < 0) return -1;
      if ((i = node(P, RG_QE_BETWEEN, pos)) < 0) return -1;
      EX(P, i)->op = (uint8_t)negate;
      EX(P, i)->a = x;
      EX(P, i)->b = lo;
      EX(P, i)->c = hi;
      x = deepen(P, i);
      continue;
    }
    return x;
  }
}

static int32_t negation (pstate *P) {
  if (is_kw(P, "NOT")) {
    uint32_t pos = P->t.pos;
    int32_t a, i;
    if (++P->depth > RG_QMAX_DEPTH) {
      fail_at(P, pos, "the expression nests too deeply");
      return -1;
    }
    if (next(P) || (a = negation(P)) < 0) return -1;
    P->depth--;
    if ((i = node(P, RG_QE_NOT, pos)) < 0) return -1;
    EX(P, i)->a = a;
    return deepen(P, i);
  }
  return comparison(P);
}

static int32_t conjunction (pstate *P) {
  int32_t x = negation(P);
  while (x >= 0 && is_kw(P, "AND")) {
    uint32_t pos = P->t.pos;
    if (next(P)) return -1;
    x = binop(P, RG_QE_AND, 0, x, negation(P), pos);
  }
  return x;
}

static int32_t disjunction (pstate *P) {
  int32_t x = conjunction(P);
  while (x >= 0 && is_kw(P, "OR")) {
    uint32_t pos = P->t.pos;
    if (next(P)) return -1;
    x = binop(P, RG_QE_OR, 0, x, conjunction(P), pos);
  }
  return x;
}

static int32_t coalesce (pstate *P) {
  int32_t x = disjunction(P);
  while (x >= 0 && P->t.k == TK_COAL) {
    uint32_t pos = P->t.pos;
    if (next(P)) return -1;
    x = binop(P, RG_QE_COALESCE, 0, x, disjunction(P), pos);
  }
  return x;
}

static int32_t expr (pstate *P) {
  int32_t c, a, b, i;
  uint32_t pos;
  if (++P->depth > RG_QMAX_DEPTH) {
    fail_at(P, P->t.pos, "the expression nests too deeply (more than %d "
            "levels)", RG_QMAX_DEPTH);
    return -1;
  }
  c = coalesce(P);
  if (c >= 0 && P->t.k == TK_QUEST) {
    pos = P->t.pos;
    if (next(P) || (a = expr(P)) < 0) return -1;
    if (want(P, TK_COLON, "':'") || (b = expr(P)) < 0) return -1;
    if ((i = node(P, RG_QE_TERNARY, pos)) < 0) return -1;
    EX(P, i)->a = c;
    EX(P, i)->b = a;
    EX(P, i)->c = b;
    c = deepen(P, i);
  }
  P->depth--;
  return c;
}
/* }===================================================================== */


/*
** {=====================================================================
** Clauses
** ======================================================================
*/
/* An alias name: an identifier that is not a keyword. */
static int alias_name (pstate *P, const char *what, const char **s,
                       uint32_t *n) {
  if (P->t.k != TK_IDENT || is_reserved(P->t.s, P->t.n))
    return expected(P, what);
  *s = P->t.s;
  *n = P->t.n;
  return next(P);
}

/* TOP n, OFFSET n, LIMIT n: a non-negative integer literal or a @param. */
static int32_t count_value (pstate *P, const char *what) {
  int32_t i;
  if (P->t.k == TK_PARAM) return primary(P);
  if (P->t.k != TK_NUM || P->t.num < 0 || floor(P->t.num) != P->t.num) {
    expected(P, what);
    return -1;
  }
  if ((i = node(P, RG_QE_LIT, P->t.pos)) < 0) return -1;
  EX(P, i)->v.t = RG_QV_NUM;
  EX(P, i)->v.d = P->t.num;
  return next(P) ? -1 : i;
}

static int add_sel (pstate *P, int32_t x, const char *name, uint32_t nlen) {
  rg_query *q = P->q;
  if (q->nsel == q->capsel) {
    int cap = q->capsel ? q->capsel * 2 : 8;
    rg_qsel *ns = (rg_qsel *)realloc(q->sel, (size_t)cap * sizeof(rg_qsel));
    if (ns == NULL) return oom(P);
    q->sel = ns;
    q->capsel = cap;
  }
  q->sel[q->nsel].expr = x;
  q->sel[q->nsel].name = name;
  q->sel[q->nsel].nlen = nlen;
  q->nsel++;
  return 0;
}

static int select_list (pstate *P) {
  rg_query *q = P->q;
  if (P->t.k == TK_STAR) {
    q->star = 1;
    P->star_pos = P->t.pos;
    return next(P);
  }
  if (is_kw(P, "VALUE")) {
    int32_t x;
    q->value = 1;
    if (next(P) || (x = expr(P)) < 0) return P->status;
    return add_sel(P, x, NULL, 0);
  }
  for (;;) {
    int32_t x = expr(P);
    const char *name = NULL;
    uint32_t nlen = 0;
    if (x < 0) return P->status;
    if (is_kw(P, "AS")) {
      if (next(P)) return P->status;
      if (P->t.k != TK_IDENT && P->t.k != TK_STR)
        return expected(P, "a name after AS");
      name = P->t.s;
      nlen = P->t.n;
      if (next(P)) return P->status;
    }
    else if (P->t.k == TK_IDENT && !is_reserved(P->t.s, P->t.n)) {
      name = P->t.s;                 /* SELECT c.a x */
      nlen = P->t.n;
      if (next(P)) return P->status;
    }
    if (add_sel(P, x, name, nlen)) return P->status;
    if (P->t.k != TK_COMMA) return 0;
    if (next(P)) return P->status;
  }
}

static int from_clause (pstate *P) {
  rg_query *q = P->q;
  const char *s = NULL;
  uint32_t n = 0;
  if (want_kw(P, "FROM")) return P->status;
  if (alias_name(P, "a name after FROM", &s, &n)) return P->status;
  q->alias = s;
  q->alen = n;
  if (is_kw(P, "AS")) {
    if (next(P) || alias_name(P, "an alias after AS", &q->alias, &q->alen))
      return P->status;
  }
  else if (P->t.k == TK_IDENT && !is_reserved(P->t.s, P->t.n)) {
    q->alias = P->t.s;               /* FROM container alias */
    q->alen = P->t.n;
    if (next(P)) return P->status;
  }
  while (is_kw(P, "JOIN")) {
    int32_t src;
    if (q->njoin == RG_QMAX_JOIN)
      return fail_at(P, P->t.pos, "at most %d JOINs", RG_QMAX_JOIN);
    if (next(P) || alias_name(P, "an alias after JOIN", &s, &n))
      return P->status;
    if (want_kw(P, "IN") || (src = expr(P)) < 0) return P->status;
    q->join[q->njoin].name = s;
    q->join[q->njoin].nlen = n;
    q->join[q->njoin].src = src;
    q->njoin++;
  }
  return 0;
}

static int query (pstate *P, int filter) {
  rg_query *q = P->q;
  if (next(P)) return P->status;
  if (filter) {
    if (is_kw(P, "SELECT")) {        /* "SELECT * FROM c WHERE ..." too */
      if (next(P)) return P->status;
      if (P->t.k != TK_STAR) return expected(P, "'*'");
      if (next(P)) return P->status;
    }
    q->star = 1;
    if (from_clause(P)) return P->status;
    if (want_kw(P, "WHERE") || (q->where = expr(P)) < 0) return P->status;
    if (P->t.k != TK_EOF) return expected(P, "the end of the filter");
    return 0;
  }
  if (want_kw(P, "SELECT")) return P->status;
  if (is_kw(P, "DISTINCT")) { q->distinct = 1; if (next(P)) return P->status; }
  if (is_kw(P, "TOP")) {
    if (next(P) || (q->top = count_value(P, "a number after TOP")) < 0)
      return P->status;
  }
  if (select_list(P) || from_clause(P)) return P->status;
  if (is_kw(P, "WHERE")) {
    if (next(P) || (q->where = expr(P)) < 0) return P->status;
  }
  if (is_kw(P, "ORDER")) {
    if (next(P) || want_kw(P, "BY")) return P->status;
    for (;;) {
      int32_t x;
      if (q->norder == RG_QMAX_ORDER)
        return fail_at(P, P->t.pos, "at most %d ORDER BY keys", RG_QMAX_ORDER);
      if ((x = expr(P)) < 0) return P->status;
      q->order[q->norder].expr = x;
      q->order[q->norder].desc = 0;
      if (is_kw(P, "ASC")) { if (next(P)) return P->status; }
      else if (is_kw(P, "DESC")) {
        q->order[q->norder].desc = 1;
        if (next(P)) return P->status;
      }
      q->norder++;
      if (P->t.k != TK_COMMA) break;
      if (next(P)) return P->status;
    }
  }
  if (is_kw(P, "OFFSET")) {
    if (next(P) || (q->offset = count_value(P, "a number after OFFSET")) < 0)
      return P->status;
    if (want_kw(P, "LIMIT")) return P->status;
    if ((q->limit = count_value(P, "a number after LIMIT")) < 0)
      return P->status;
  }
  if (P->t.k != TK_EOF) {
    if (q->where < 0 && q->norder == 0 && q->offset < 0)
      return expected(P, "WHERE, ORDER BY, OFFSET or the end of the query");
    return expected(P, "the end of the query");
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Names and rules
** ======================================================================
*/
typedef struct resolver {
  pstate *P;
  int nalias;                        /* aliases visible */
  int in_agg;                        /* inside an aggregate call */
  int aggs_ok;                       /* aggregates allowed here */
  int bare;                          /* alias references outside aggregates */
  uint32_t bare_pos;
} resolver;

static int param_slot (pstate *P, const char *s, uint32_t n, uint32_t pos) {
  rg_query *q = P->q;
  int i;
  for (i = 0; i < q->nparams; i++)
    if (q->param[i].nlen == n && memcmp(q->param[i].name, s, n) == 0)
      return i;
  if (q->nparams % 8 == 0) {
    rg_qparam *np = (rg_qparam *)realloc(q->param, (size_t)(q->nparams + 8) *
                                         sizeof(rg_qparam));
    if (np == NULL) { oom(P); return -1; }
    q->param = np;
  }
  q->param[q->nparams].name = s;
  q->param[q->nparams].nlen = n;
  q->param[q->nparams].pos = pos;
  return q->nparams++;
}

static int resolve (resolver *R, int32_t i) {
  pstate *P = R->P;
  rg_query *q = P->q;
  rg_qexpr *ex;
  int k;
  if (i < 0 || P->status) return P->status;
  ex = EX(P, i);
  switch (ex->k) {
    case RG_QE_IDENT: {
      int slot = -1;
      if (ex->n == q->alen && memcmp(ex->s, q->alias, ex->n) == 0) slot = 0;
      for (k = 0; k < R->nalias - 1; k++)
        if (ex->n == q->join[k].nlen &&
            memcmp(ex->s, q->join[k].name, ex->n) == 0)
          slot = k + 1;
      if (slot < 0)
        return fail_at(P, ex->pos, "unknown name '%.*s' (the FROM alias is "
                       "'%.*s')", (int)(ex->n > 40 ? 40 : ex->n), ex->s,
                       (int)(q->alen > 40 ? 40 : q->alen), q->alias);
      ex->k = RG_QE_ALIAS;
      ex->slot = slot;
      if (!R->in_agg && !R->bare) { R->bare = 1; R->bare_pos = ex->pos; }
      return 0;
    }
    case RG_QE_PARAM:
      ex->slot = param_slot(P, ex->s, ex->n, ex->pos);
      return P->status;
    case RG_QE_CALL:
      if (RG_QF_ISAGG(ex->op)) {
        if (!R->aggs_ok)
          return fail_at(P, ex->pos, "aggregate functions are allowed only "
                         "in the SELECT list");
        if (R->in_agg)
          return fail_at(P, ex->pos, "aggregate functions cannot be nested");
        ex->slot = q->naggs++;
        R->in_agg = 1;
        for (k = 0; k < ex->nlist; k++)
          if (resolve(R, q->list[ex->list + k])) return P->status;
        R->in_agg = 0;
        return 0;
      }
      break;
    default: break;
  }
  if (resolve(R, ex->a) || resolve(R, ex->b) || resolve(R, ex->c))
    return P->status;
  if (ex->k != RG_QE_PROP)
    for (k = 0; k < ex->nlist; k++)
      if (resolve(R, q->list[ex->list + k])) return P->status;
  return 0;
}

/* The output name of select item i: AS, a property's name, or $n. */
static int name_items (pstate *P) {
  rg_query *q = P->q;
  int i, j, unnamed = 0;
  for (i = 0; i < q->nsel; i++) {
    rg_qsel *s = &q->sel[i];
    const rg_qexpr *ex = EX(P, s->expr);
    if (s->name) continue;
    if (ex->k == RG_QE_PROP) { s->name = ex->s; s->nlen = ex->n; }
    else if (ex->k == RG_QE_ALIAS) {
      s->name = ex->slot == 0 ? q->alias : q->join[ex->slot - 1].name;
      s->nlen = ex->slot == 0 ? q->alen : q->join[ex->slot - 1].nlen;
    }
    else {
      char tmp[16];
      int n = snprintf(tmp, sizeof(tmp), "$%d", ++unnamed);
      if ((s->name = rg_arena_dup(&q->mem, tmp, (size_t)n)) == NULL)
        return oom(P);
      s->nlen = (uint32_t)n;
    }
  }
  for (i = 0; i < q->nsel; i++)
    for (j = 0; j < i; j++)
      if (q->sel[i].nlen == q->sel[j].nlen &&
          memcmp(q->sel[i].name, q->sel[j].name, q->sel[i].nlen) == 0)
        return fail_at(P, EX(P, q->sel[i].expr)->pos, "duplicate output "
                       "name '%.*s' (use AS to name it)",
                       (int)(q->sel[i].nlen > 40 ? 40 : q->sel[i].nlen),
                       q->sel[i].name);
  return 0;
}

static int check (pstate *P) {
  rg_query *q = P->q;
  resolver R;
  int i;
  memset(&R, 0, sizeof(R));
  R.P = P;
  for (i = 0; i < q->njoin; i++) {   /* a join sees the aliases before it */
    if (q->join[i].nlen == q->alen &&
        memcmp(q->join[i].name, q->alias, q->alen) == 0)
      return fail_at(P, EX(P, q->join[i].src)->pos, "the JOIN alias '%.*s' "
                     "is already in use", (int)q->alen, q->alias);
    R.nalias = i + 1;
    if (resolve(&R, q->join[i].src)) return P->status;
  }
  R.nalias = q->njoin + 1;
  if (q->where >= 0 && resolve(&R, q->where)) return P->status;
  for (i = 0; i < q->norder; i++)
    if (resolve(&R, q->order[i].expr)) return P->status;
  if (q->top >= 0 && resolve(&R, q->top)) return P->status;
  if (q->offset >= 0 && (resolve(&R, q->offset) || resolve(&R, q->limit)))
    return P->status;
  R.aggs_ok = 1;
  R.bare = 0;
  for (i = 0; i < q->nsel; i++)
    if (resolve(&R, q->sel[i].expr)) return P->status;
  if (q->naggs > 0) {
    if (R.bare)
      return fail_at(P, R.bare_pos, "with aggregate functions, every "
                     "reference to the input must be inside an aggregate");
    if (q->norder > 0)
      return fail_at(P, EX(P, q->order[0].expr)->pos, "ORDER BY cannot be "
                     "used with aggregate functions");
  }
  if (q->star && q->njoin > 0 && !P->filter)
    return fail_at(P, P->star_pos, "SELECT * is only valid with a single "
                   "input; name what to select with JOIN");
  if (!q->star && !q->value) return name_items(P);
  return 0;
}
/* }===================================================================== */


int rg_query_parse (const char *sql, size_t n, int filter, rg_query **out,
                    rg_err *e) {
  pstate P;
  rg_query *q;
  *out = NULL;
  if (n > RG_MAX_SQL)
    return rg_fail(e, 400, "the query text is %lu bytes; the limit is %u",
                   (unsigned long)n, RG_MAX_SQL);
  if (!rg_utf8_valid(sql, n))
    return rg_fail(e, 400, "the query text is not valid UTF-8");
  if ((q = (rg_query *)calloc(1, sizeof(rg_query))) == NULL)
    return rg_fail(e, 500, "out of memory");
  rg_arena_init(&q->mem);
  q->top = q->offset = q->limit = q->where = -1;
  /* the query keeps its own copy: names and literals point into it */
  if ((q->sql = rg_arena_dup(&q->mem, sql, n)) == NULL) {
    rg_query_free(q);
    return rg_fail(e, 500, "out of memory");
  }
  q->sqllen = n;
  memset(&P, 0, sizeof(P));
  P.src = q->sql;
  P.n = n;
  P.q = q;
  P.e = e;
  P.filter = filter;
  if (query(&P, filter) == 0) check(&P);
  if (P.status) {
    rg_query_free(q);
    return P.status;
  }
  *out = q;
  return 0;
}

void rg_query_free (rg_query *q) {
  if (q == NULL) return;
  free(q->ex);
  free(q->list);
  free(q->sel);
  free(q->param);
  rg_arena_free(&q->mem);
  free(q);
}
