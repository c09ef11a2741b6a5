/*
** parse.c: the lexer and parser of the query dialect.
**
** The dialect is the Cosmos DB for NoSQL query language (docs/query.md):
**
**   query    := SELECT [DISTINCT] [TOP n] select [FROM source {JOIN source}]
**               [WHERE expr] [GROUP BY expr {, expr}] [ORDER BY key {, key}]
**               [OFFSET n LIMIT m]
**   select   := '*' | VALUE expr | expr [[AS] name] {, expr [[AS] name]}
**   source   := alias IN expr | '(' query ')' [[AS] alias]
**             | expr [[AS] alias]
**   key      := expr [ASC | DESC]
**   n, m     := an integer literal or a @parameter
**   filter   := FROM source {JOIN source} WHERE expr   (patch filters)
**
** The FROM of the query names the container: its expression starts with
** any name (`FROM c`, `FROM root r`, `FROM c.address a`, `FROM t IN
** c.tags`); every other source (JOINs, the FROM of a subquery) ranges over
** values of aliases already named.  Without FROM, a query makes one row.
**
** Expressions, from the loosest binding to the tightest: `c ? a : b`,
** `a ?? b`, OR, AND, NOT, comparisons (= != <> < <= > >= [NOT] IN (...)
** [NOT] BETWEEN a AND b, [NOT] LIKE p [ESCAPE e]), `||`, `|`, `^`, `&`,
** << >> >>>, + -, * / %, unary - + ~, then property access `.name`,
** `["name"]` and `[index]` on a primary: a literal (number, 0x hex number,
** 'string' or "string", true, false, null, undefined, NaN, Infinity), a
** @parameter, an alias, a function call, udf.name(...), `(expr)`, a
** subquery `(SELECT ...)`, EXISTS(SELECT ...), ARRAY(SELECT ...), an array
** `[...]` or an object `{name: expr, ...}`.  Keywords and function names
** are case-insensitive; after a dot any word is a property name.  `--`
** starts a comment.
**
** The parser builds the expression nodes of rg_query (sql.h) in one array
** and one block per SELECT, then resolves names: aliases to binding slots
** (unique across blocks, innermost scope first), parameters to slots,
** aggregate calls to accumulator slots of their block, and checks the
** rules a grammar cannot say: aggregates only in a SELECT list and never
** nested; with aggregates and no GROUP BY, every reference to the block's
** input inside one; with GROUP BY, every reference outside an aggregate
** part of a GROUP BY expression (those parts become RG_QE_GROUPREF); no
** ORDER BY with aggregates; SELECT * only over a single input.  Every error
** is 400 and names the place: "syntax error at 1:17: expected FROM, found
** 'WHERE'".  Nesting is bounded (RG_QMAX_DEPTH) so that the recursive
** parser and evaluator cannot exhaust the C stack.
*/

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "sql/sql_int.h"

enum {
  TK_EOF, TK_IDENT, TK_NUM, TK_STR, TK_PARAM, TK_STAR, TK_COMMA, TK_DOT,
  TK_LP, TK_RP, TK_LB, TK_RB, TK_LC, TK_RC, TK_COLON, TK_QUEST, TK_COAL,
  TK_EQ, TK_NE, TK_LT, TK_LE, TK_GT, TK_GE, TK_PLUS, TK_MINUS, TK_SLASH,
  TK_PCT, TK_CAT, TK_AMP, TK_BAR, TK_CARET, TK_TILDE, TK_SHL, TK_SHR,
  TK_USHR
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
  int status;                 /* the first error */
} pstate;

static const char *const reserved[] = {
  "SELECT", "FROM", "WHERE", "ORDER", "BY", "AS", "JOIN", "IN", "AND", "OR",
  "NOT", "BETWEEN", "TOP", "DISTINCT", "VALUE", "OFFSET", "LIMIT", "ASC",
  "DESC", "TRUE", "FALSE", "NULL", "UNDEFINED", "GROUP", "LIKE", "EXISTS",
  "ESCAPE", NULL
};


/*
** {=====================================================================
** Errors
** ======================================================================
*/
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
  RG_PRINTF(3, 4);

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

static int hex_value (int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
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
  if (s[i] == '0' && i + 1 < P->n &&
      (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    double v = 0;
    i += 2;
    if (i >= P->n || hex_value((unsigned char)s[i]) < 0)
      return fail_at(P, P->p, "malformed number");
    while (i < P->n && hex_value((unsigned char)s[i]) >= 0)
      v = v * 16 + hex_value((unsigned char)s[i++]);
    if (i < P->n && is_alpha((unsigned char)s[i]))
      return fail_at(P, P->p, "malformed number");
    t->num = v;
    t->k = TK_NUM;
    P->p = i;
    return 0;
  }
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
    unsigned char d2 = P->p + 2 < P->n ? (unsigned char)s[P->p + 2] : 0;
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
          else if (d == '<') { k = TK_SHL; w = 2; }
          else k = TK_LT;
          break;
        case '>':
          if (d == '=') { k = TK_GE; w = 2; }
          else if (d == '>' && d2 == '>') { k = TK_USHR; w = 3; }
          else if (d == '>') { k = TK_SHR; w = 2; }
          else k = TK_GT;
          break;
        case '+': k = TK_PLUS; break;
        case '-': k = TK_MINUS; break;
        case '/': k = TK_SLASH; break;
        case '%': k = TK_PCT; break;
        case '&': k = TK_AMP; break;
        case '^': k = TK_CARET; break;
        case '~': k = TK_TILDE; break;
        case '|':
          if (d == '|') { k = TK_CAT; w = 2; }
          else k = TK_BAR;
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

/* The next character that is not white space after the current token. */
static int peek_char (pstate *P) {
  size_t j = P->p;
  while (j < P->n && (P->src[j] == ' ' || P->src[j] == '\t' ||
                      P->src[j] == '\n' || P->src[j] == '\r'))
    j++;
  return j < P->n ? (unsigned char)P->src[j] : -1;
}

/* Is the token after the current one the keyword kw?  (The lexer is put
** back.) */
static int next_is_kw (pstate *P, const char *kw) {
  size_t save = P->p;
  token t = P->t;
  int r;
  if (next(P)) return 0;
  r = is_kw(P, kw);
  P->p = save;
  P->t = t;
  return r;
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
#define BLK(P, i) (&(P)->q->blk[i])

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

static int new_block (pstate *P, int parent, uint32_t pos) {
  rg_query *q = P->q;
  rg_qblock *b;
  if (P->status) return -1;
  if (q->nblk == RG_QMAX_BLOCKS) {
    fail_at(P, pos, "at most %d subqueries", RG_QMAX_BLOCKS - 1);
    return -1;
  }
  if (q->nblk == q->capblk) {
    int cap = q->capblk ? q->capblk * 2 : 4;
    rg_qblock *nb = (rg_qblock *)realloc(q->blk, (size_t)cap *
                                         sizeof(rg_qblock));
    if (nb == NULL) { oom(P); return -1; }
    q->blk = nb;
    q->capblk = cap;
  }
  b = &q->blk[q->nblk];
  memset(b, 0, sizeof(*b));
  b->top = b->offset = b->limit = b->where = -1;
  b->parent = parent;
  b->pos = pos;
  b->sel0 = q->nsel;
  return q->nblk++;
}
/* }===================================================================== */


/*
** {=====================================================================
** Expressions
** ======================================================================
*/
static int32_t expr (pstate *P);
static int select_block (pstate *P, int blk, int filter);

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
  for (f = 0; rg_qfuncs[f].name; f++)
    if (word_is(name, nlen, rg_qfuncs[f].name)) break;
  if (rg_qfuncs[f].name == NULL) {
    if (word_is(name, nlen, "ST_DISTANCE") || word_is(name, nlen, "ST_WITHIN")
        || word_is(name, nlen, "ST_INTERSECTS") ||
        word_is(name, nlen, "ST_AREA") || word_is(name, nlen, "ST_ISVALID") ||
        word_is(name, nlen, "ST_ISVALIDDETAILED") ||
        word_is(name, nlen, "FULLTEXTCONTAINS") ||
        word_is(name, nlen, "FULLTEXTCONTAINSALL") ||
        word_is(name, nlen, "FULLTEXTCONTAINSANY") ||
        word_is(name, nlen, "FULLTEXTSCORE") || word_is(name, nlen, "RRF"))
      fail_at(P, pos, "function '%.*s' is not supported (spatial and "
              "full-text functions are not implemented)",
              (int)(nlen > 40 ? 40 : nlen), name);
    else
      fail_at(P, pos, "unknown function '%.*s'",
              (int)(nlen > 40 ? 40 : nlen), name);
    return -1;
  }
  if (next(P)) return -1;            /* '(' */
  if ((i = node(P, RG_QE_CALL, pos)) < 0) return -1;
  if (list_of(P, TK_RP, "',' or ')'", &start, &count)) return -1;
  nargs = count;
  if (rg_qfuncs[f].fn == RG_QF_NOW && nargs == 1) {   /* NOW([part, n]) */
    fail_at(P, pos, "NOW takes no argument or two (a part and a number), "
            "not 1");
    return -1;
  }
  if (nargs < rg_qfuncs[f].min || nargs > rg_qfuncs[f].max) {
    if (rg_qfuncs[f].min == rg_qfuncs[f].max)
      fail_at(P, pos, "%s takes %d argument%s, not %d", rg_qfuncs[f].name,
              rg_qfuncs[f].min, rg_qfuncs[f].min == 1 ? "" : "s", nargs);
    else if (rg_qfuncs[f].max >= 64)
      fail_at(P, pos, "%s takes at least %d arguments, not %d",
              rg_qfuncs[f].name, rg_qfuncs[f].min, nargs);
    else
      fail_at(P, pos, "%s takes %d to %d arguments, not %d",
              rg_qfuncs[f].name, rg_qfuncs[f].min, rg_qfuncs[f].max, nargs);
    return -1;
  }
  if (rg_qfuncs[f].nondet) P->q->nondet = 1;
  EX(P, i)->op = (uint8_t)rg_qfuncs[f].fn;
  EX(P, i)->list = start;
  EX(P, i)->nlist = count;
  if (rg_qfuncs[f].fn == RG_QF_VECTORDISTANCE) {
    char msg[256];
    uint32_t at;
    int rc = rg_qvd_check(P->q, i, &at, msg, sizeof msg);
    if (rc == 500) return oom(P), -1;
    if (rc) return fail_at(P, at, "%s", msg), -1;
  }
  return deepen(P, i);
}

/* ORDER BY VectorDistance(...) in block b, the key x: alone, with no
** direction (most similar first: rg_query_vectors sets it), and only over
** the rows it scores (the WHERE gains IS_DEFINED of the call). */
static int order_by_vector (pstate *P, int b, int32_t x, uint32_t pos) {
  rg_qvd *vd = &P->q->vd[EX(P, x)->slot];
  int32_t def, w;
  elist l;
  if (is_kw(P, "ASC") || is_kw(P, "DESC"))
    return fail_at(P, P->t.pos, "ORDER BY VectorDistance takes no ASC or "
                   "DESC: it orders the most similar first");
  if (BLK(P, b)->norder > 0 || P->t.k == TK_COMMA)
    return fail_at(P, pos, "ORDER BY VectorDistance must be the only "
                   "ORDER BY key");
  vd->blk = b;
  if ((def = node(P, RG_QE_CALL, pos)) < 0) return P->status;
  el_init(&l);
  if (el_add(P, &l, x)) return P->status;
  EX(P, def)->op = RG_QF_IS_DEFINED;
  EX(P, def)->nlist = 1;
  EX(P, def)->list = el_done(P, &l);
  if (P->status || deepen(P, def) < 0) return P->status;
  w = BLK(P, b)->where;
  if (w >= 0) {
    if ((w = binop(P, RG_QE_AND, 0, w, def, pos)) < 0) return P->status;
  } else w = def;
  BLK(P, b)->where = w;
  BLK(P, b)->order[0].expr = x;
  BLK(P, b)->order[0].desc = rg_vdist_higher(vd->dist);
  BLK(P, b)->norder = 1;
  return 0;
}

/* udf.name(args): the current token is "udf". */
static int32_t udf_call (pstate *P, uint32_t pos) {
  int32_t i, start, count;
  if (next(P) || want(P, TK_DOT, "'.'")) return -1;
  if (P->t.k != TK_IDENT) { expected(P, "a function name after udf."); return -1; }
  if ((i = node(P, RG_QE_UDF, pos)) < 0) return -1;
  EX(P, i)->s = P->t.s;
  EX(P, i)->n = P->t.n;
  if (next(P) || want(P, TK_LP, "'('")) return -1;
  if (list_of(P, TK_RP, "',' or ')'", &start, &count)) return -1;
  EX(P, i)->list = start;
  EX(P, i)->nlist = count;
  P->q->uses_udf = 1;
  return deepen(P, i);
}

/* A subquery: '(' SELECT ... ')' (the '(' is the current token). */
static int32_t subquery (pstate *P, int kind, uint32_t pos) {
  int32_t i;
  int b;
  if (want(P, TK_LP, "'('")) return -1;
  if (!is_kw(P, "SELECT")) { expected(P, "SELECT"); return -1; }
  if (++P->depth > RG_QMAX_DEPTH) {
    fail_at(P, pos, "the expression nests too deeply");
    return -1;
  }
  if ((b = new_block(P, -2, pos)) < 0) return -1;
  if (select_block(P, b, 0)) return -1;
  P->depth--;
  if (want(P, TK_RP, "')' after the subquery")) return -1;
  if ((i = node(P, RG_QE_SUBQ, pos)) < 0) return -1;
  EX(P, i)->op = (uint8_t)kind;
  EX(P, i)->slot = b;
  P->q->has_subq = 1;
  return i;
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

static int32_t literal (pstate *P, int t, double d, uint32_t pos) {
  int32_t i;
  if ((i = node(P, RG_QE_LIT, pos)) < 0) return -1;
  EX(P, i)->v.t = (uint8_t)t;
  EX(P, i)->v.d = d;
  return next(P) ? -1 : i;
}

static int32_t primary (pstate *P) {
  token t = P->t;
  int32_t i;
  switch (t.k) {
    case TK_NUM: return literal(P, RG_QV_NUM, t.num, t.pos);
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
      if (next_is_kw(P, "SELECT")) return subquery(P, RG_QSUB_SCALAR, t.pos);
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
      int k, c = peek_char(P);
      for (k = 0; lits[k].kw; k++)
        if (is_kw(P, lits[k].kw)) return literal(P, lits[k].t, 0, t.pos);
      if (c == '(' && (is_kw(P, "EXISTS") || is_kw(P, "ARRAY"))) {
        int kind = is_kw(P, "EXISTS") ? RG_QSUB_EXISTS : RG_QSUB_ARRAY;
        if (next(P)) return -1;      /* now at '(' */
        if (next_is_kw(P, "SELECT")) return subquery(P, kind, t.pos);
        if (next(P)) return -1;
        expected(P, kind == RG_QSUB_EXISTS ? "SELECT after EXISTS("
                                           : "SELECT after ARRAY(");
        return -1;
      }
      if (c == '(') {                /* a call: the name then '(' */
        if (next(P)) return -1;
        return call(P, t.s, t.n, t.pos);
      }
      if (c == '.' && t.n == 3 && word_is(t.s, t.n, "UDF")) {
        size_t j = P->p + 1;         /* udf.name( */
        while (j < P->n && (P->src[j] == ' ' || P->src[j] == '\t' ||
                            P->src[j] == '\n' || P->src[j] == '\r'))
          j++;
        while (j < P->n && (is_alpha((unsigned char)P->src[j]) ||
                            is_digit((unsigned char)P->src[j])))
          j++;
        while (j < P->n && (P->src[j] == ' ' || P->src[j] == '\t' ||
                            P->src[j] == '\n' || P->src[j] == '\r'))
          j++;
        if (j < P->n && P->src[j] == '(') return udf_call(P, t.pos);
      }
      if (t.n == 3 && memcmp(t.s, "NaN", 3) == 0)
        return literal(P, RG_QV_NUM, NAN, t.pos);
      if (t.n == 8 && memcmp(t.s, "Infinity", 8) == 0)
        return literal(P, RG_QV_NUM, HUGE_VAL, t.pos);
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
  if (P->t.k == TK_MINUS || P->t.k == TK_PLUS || P->t.k == TK_TILDE) {
    uint32_t pos = P->t.pos;
    int op = P->t.k == TK_MINUS ? RG_QO_NEG
           : P->t.k == TK_PLUS ? RG_QO_POS : RG_QO_BNOT;
    int32_t a, i;
    if (++P->depth > RG_QMAX_DEPTH) {
      fail_at(P, pos, "the expression nests too deeply");
      return -1;
    }
    if (next(P) || (a = unary(P)) < 0) return -1;
    P->depth--;
    if (op != RG_QO_BNOT && EX(P, a)->k == RG_QE_LIT &&
        EX(P, a)->v.t == RG_QV_NUM) {
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

/* One level of left-associative binary operators: tokens toks[i] make
** operators ops[i]; operands come from `sub`. */
static int32_t level (pstate *P, int32_t (*sub) (pstate *), const int *toks,
                      const int *ops, int n) {
  int32_t x = sub(P);
  for (;;) {
    int i;
    uint32_t pos = P->t.pos;
    if (x < 0) return -1;
    for (i = 0; i < n; i++) if (P->t.k == toks[i]) break;
    if (i == n) return x;
    if (next(P)) return -1;
    x = binop(P, RG_QE_BINARY, ops[i], x, sub(P), pos);
  }
}

static int32_t mul (pstate *P) {
  static const int t[] = { TK_STAR, TK_SLASH, TK_PCT };
  static const int o[] = { RG_QO_MUL, RG_QO_DIV, RG_QO_MOD };
  return level(P, unary, t, o, 3);
}

static int32_t add (pstate *P) {
  static const int t[] = { TK_PLUS, TK_MINUS };
  static const int o[] = { RG_QO_ADD, RG_QO_SUB };
  return level(P, mul, t, o, 2);
}

static int32_t shift (pstate *P) {
  static const int t[] = { TK_SHL, TK_SHR, TK_USHR };
  static const int o[] = { RG_QO_SHL, RG_QO_SHR, RG_QO_USHR };
  return level(P, add, t, o, 3);
}

static int32_t band (pstate *P) {
  static const int t[] = { TK_AMP };
  static const int o[] = { RG_QO_BAND };
  return level(P, shift, t, o, 1);
}

static int32_t bxor (pstate *P) {
  static const int t[] = { TK_CARET };
  static const int o[] = { RG_QO_BXOR };
  return level(P, band, t, o, 1);
}

static int32_t bor (pstate *P) {
  static const int t[] = { TK_BAR };
  static const int o[] = { RG_QO_BOR };
  return level(P, bxor, t, o, 1);
}

static int32_t concat (pstate *P) {
  static const int t[] = { TK_CAT };
  static const int o[] = { RG_QO_CAT };
  return level(P, bor, t, o, 1);
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
    if (is_kw(P, "NOT")) {           /* NOT IN, NOT BETWEEN, NOT LIKE */
      if (!next_is_kw(P, "IN") && !next_is_kw(P, "BETWEEN") &&
          !next_is_kw(P, "LIKE"))
        return x;
      if (next(P)) return -1;
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
    if (is_kw(P, "LIKE")) {
      int32_t i, pat, esc = -1;
      if (next(P) || (pat = concat(P)) < 0) return -1;
      if (is_kw(P, "ESCAPE")) {
        if (next(P) || (esc = concat(P)) < 0) return -1;
      }
      if ((i = node(P, RG_QE_LIKE, pos)) < 0) return -1;
      EX(P, i)->op = (uint8_t)negate;
      EX(P, i)->a = x;
      EX(P, i)->b = pat;
      EX(P, i)->c = esc;
      x = deepen(P, i);
      continue;
    }
    if (negate) { expected(P, "IN, BETWEEN or LIKE after NOT"); return -1; }
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

/* [[AS] alias] after a source; *s stays NULL when there is none. */
static int opt_alias (pstate *P, const char **s, uint32_t *n) {
  if (is_kw(P, "AS")) {
    if (next(P)) return P->status;
    return alias_name(P, "an alias after AS", s, n);
  }
  if (P->t.k == TK_IDENT && !is_reserved(P->t.s, P->t.n))
    return alias_name(P, "an alias", s, n);
  return 0;
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

/* A select list being read: appended to q->sel once complete, after the
** items of the subqueries inside it. */
typedef struct slist {
  rg_qsel small[8], *v;
  int n, cap;
} slist;

static int sl_add (pstate *P, slist *l, int32_t x, const char *name,
                   uint32_t nlen) {
  if (l->n == l->cap) {
    int cap = l->cap * 2;
    rg_qsel *nv = (rg_qsel *)malloc((size_t)cap * sizeof(rg_qsel));
    if (nv == NULL) return oom(P);
    memcpy(nv, l->v, (size_t)l->n * sizeof(rg_qsel));
    if (l->v != l->small) free(l->v);
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n].expr = x;
  l->v[l->n].name = name;
  l->v[l->n].nlen = nlen;
  l->n++;
  return 0;
}

static int sl_done (pstate *P, slist *l, int b) {
  rg_query *q = P->q;
  if (!P->status && l->n) {
    if (q->nsel + l->n > q->capsel) {
      int cap = q->capsel ? q->capsel : 8;
      rg_qsel *ns;
      while (cap < q->nsel + l->n) cap *= 2;
      ns = (rg_qsel *)realloc(q->sel, (size_t)cap * sizeof(rg_qsel));
      if (ns == NULL) oom(P);
      else { q->sel = ns; q->capsel = cap; }
    }
    if (!P->status) {
      memcpy(q->sel + q->nsel, l->v, (size_t)l->n * sizeof(rg_qsel));
      BLK(P, b)->sel0 = q->nsel;
      BLK(P, b)->nsel = l->n;
      q->nsel += l->n;
    }
  }
  if (l->v != l->small) free(l->v);
  l->v = l->small;
  return P->status;
}

static int select_list (pstate *P, int b) {
  slist l;
  l.v = l.small;
  l.n = 0;
  l.cap = 8;
  if (P->t.k == TK_STAR) {
    BLK(P, b)->star = 1;
    BLK(P, b)->pos = P->t.pos;
    if (next(P)) return P->status;
    if (P->t.k == TK_COMMA)
      return fail_at(P, P->t.pos, "'*' must be the only item selected");
    return 0;
  }
  if (is_kw(P, "VALUE")) {
    int32_t x;
    BLK(P, b)->value = 1;
    if (next(P)) return P->status;
    if (P->t.k == TK_STAR)
      return fail_at(P, P->t.pos, "SELECT VALUE * is not valid: use SELECT *");
    if ((x = expr(P)) >= 0) sl_add(P, &l, x, NULL, 0);
    return sl_done(P, &l, b);
  }
  for (;;) {
    int32_t x = expr(P);
    const char *name = NULL;
    uint32_t nlen = 0;
    if (x < 0) break;
    if (is_kw(P, "AS")) {
      if (next(P)) break;
      if (P->t.k != TK_IDENT && P->t.k != TK_STR) {
        expected(P, "a name after AS");
        break;
      }
      name = P->t.s;
      nlen = P->t.n;
      if (next(P)) break;
    }
    else if (P->t.k == TK_IDENT && !is_reserved(P->t.s, P->t.n)) {
      name = P->t.s;                 /* SELECT c.a x */
      nlen = P->t.n;
      if (next(P)) break;
    }
    if (sl_add(P, &l, x, name, nlen)) break;
    if (P->t.k == TK_STAR) {
      fail_at(P, P->t.pos, "'*' must be the only item selected");
      break;
    }
    if (P->t.k != TK_COMMA) break;
    if (next(P)) break;
    if (P->t.k == TK_STAR) {
      fail_at(P, P->t.pos, "'*' must be the only item selected");
      break;
    }
  }
  return sl_done(P, &l, b);
}

/* The FROM of the query names the container: the first name of its
** expression becomes the item itself (RG_QE_ROOT).  Only property and
** element access is allowed on it. */
static int container_expr (pstate *P, int32_t x) {
  int32_t i = x;
  for (;;) {
    rg_qexpr *ex = EX(P, i);
    if (ex->k == RG_QE_PROP) { i = ex->a; continue; }
    if (ex->k == RG_QE_INDEX) {
      const rg_qexpr *ix = EX(P, ex->b);
      if (ix->k != RG_QE_LIT || ix->v.t != RG_QV_NUM)
        return fail_at(P, ix->pos, "a FROM source takes property names and "
                       "array positions only");
      i = ex->a;
      continue;
    }
    if (ex->k == RG_QE_IDENT) { ex->k = RG_QE_ROOT; return 0; }
    return fail_at(P, ex->pos, "expected the container's name in FROM");
  }
}

/* One FROM or JOIN source of block b (index k). */
static int source (pstate *P, int b, int k, int main_from) {
  rg_qsrc s;
  memset(&s, 0, sizeof(s));
  s.pos = P->t.pos;
  s.slot = -1;
  if (P->t.k == TK_IDENT && is_reserved(P->t.s, P->t.n))
    return expected(P, main_from ? "a name after FROM" : "a source after JOIN");
  if (P->t.k == TK_LP && next_is_kw(P, "SELECT")) {
    int32_t x;
    if (main_from)
      return fail_at(P, P->t.pos, "a subquery as the FROM of a query is not "
                     "supported (use it in a JOIN)");
    if ((x = subquery(P, RG_QSUB_ARRAY, s.pos)) < 0) return P->status;
    s.kind = RG_QS_SUBQ;
    s.expr = EX(P, x)->slot;
    if (opt_alias(P, &s.name, &s.nlen)) return P->status;
  }
  else if (P->t.k == TK_IDENT && !is_reserved(P->t.s, P->t.n) &&
           next_is_kw(P, "IN")) {
    s.kind = RG_QS_IN;
    s.name = P->t.s;
    s.nlen = P->t.n;
    if (next(P) || next(P)) return P->status;   /* the alias, IN */
    if ((s.expr = expr(P)) < 0) return P->status;
    if (main_from && container_expr(P, s.expr)) return P->status;
  }
  else {
    const rg_qexpr *ex;
    if ((s.expr = expr(P)) < 0) return P->status;
    ex = EX(P, s.expr);
    if (ex->k == RG_QE_IDENT) { s.name = ex->s; s.nlen = ex->n; }
    else if (ex->k == RG_QE_PROP) { s.name = ex->s; s.nlen = ex->n; }
    if (main_from && ex->k == RG_QE_IDENT) {
      s.kind = RG_QS_ROOT;
      s.expr = -1;
    }
    else {
      s.kind = RG_QS_VALUE;
      if (main_from && container_expr(P, s.expr)) return P->status;
    }
    {
      const char *an = NULL;
      uint32_t al = 0;
      token at = P->t;
      if (opt_alias(P, &an, &al)) return P->status;
      if (an) { s.name = an; s.nlen = al; }
      if (an && (s.expr < 0 || EX(P, s.expr)->k == RG_QE_IDENT) &&
          at.k == TK_IDENT &&
          (P->t.k == TK_DOT || P->t.k == TK_LB)) {
        P->t = at;                   /* JOIN t c.tags: IN is missing */
        return expected(P, "IN");
      }
    }
    if (s.name == NULL)
      return fail_at(P, s.pos, "name this source with AS");
  }
  BLK(P, b)->src[k] = s;
  return 0;
}

static int from_clause (pstate *P, int b) {
  int main_from = b == 0;
  if (want_kw(P, "FROM")) return P->status;
  if (source(P, b, 0, main_from)) return P->status;
  BLK(P, b)->nsrc = 1;
  while (is_kw(P, "JOIN")) {
    int k = BLK(P, b)->nsrc;
    if (k == 1 + RG_QMAX_JOIN)
      return fail_at(P, P->t.pos, "at most %d JOINs", RG_QMAX_JOIN);
    if (next(P) || source(P, b, k, 0)) return P->status;
    BLK(P, b)->nsrc = k + 1;
  }
  return 0;
}

/* The clauses of block b, from SELECT (or FROM, for a filter). */
static int select_block (pstate *P, int b, int filter) {
  if (filter) {
    if (is_kw(P, "SELECT")) {        /* "SELECT * FROM c WHERE ..." too */
      if (next(P)) return P->status;
      if (P->t.k != TK_STAR) return expected(P, "'*'");
      if (next(P)) return P->status;
    }
    BLK(P, b)->star = 1;
    if (from_clause(P, b)) return P->status;
    if (want_kw(P, "WHERE")) return P->status;
    {
      int32_t w = expr(P);
      if (w < 0) return P->status;
      BLK(P, b)->where = w;
    }
    if (P->t.k != TK_EOF) return expected(P, "the end of the filter");
    return 0;
  }
  if (want_kw(P, "SELECT")) return P->status;
  if (is_kw(P, "DISTINCT")) {
    BLK(P, b)->distinct = 1;
    if (next(P)) return P->status;
  }
  if (is_kw(P, "TOP")) {
    int32_t t;
    if (next(P) || (t = count_value(P, "a number after TOP")) < 0)
      return P->status;
    BLK(P, b)->top = t;
  }
  if (select_list(P, b)) return P->status;
  if (is_kw(P, "FROM") && from_clause(P, b)) return P->status;
  if (is_kw(P, "WHERE")) {
    int32_t w;
    if (next(P) || (w = expr(P)) < 0) return P->status;
    BLK(P, b)->where = w;
  }
  if (is_kw(P, "GROUP")) {
    if (next(P) || want_kw(P, "BY")) return P->status;
    for (;;) {
      int32_t x;
      int n = BLK(P, b)->ngroup;
      if (n == RG_QMAX_GROUP)
        return fail_at(P, P->t.pos, "at most %d GROUP BY expressions",
                       RG_QMAX_GROUP);
      if ((x = expr(P)) < 0) return P->status;
      BLK(P, b)->group[n] = x;
      BLK(P, b)->ngroup = n + 1;
      if (P->t.k != TK_COMMA) break;
      if (next(P)) return P->status;
    }
  }
  if (is_kw(P, "ORDER")) {
    if (next(P) || want_kw(P, "BY")) return P->status;
    if (is_kw(P, "RANK")) {          /* one scoring function, best first */
      int32_t x;
      if (next(P) || (x = expr(P)) < 0) return P->status;
      BLK(P, b)->order[0].expr = x;
      BLK(P, b)->order[0].desc = 1;
      BLK(P, b)->norder = 1;
      BLK(P, b)->rank = 1;
    }
    else for (;;) {
      int32_t x;
      int n = BLK(P, b)->norder, desc = 0;
      if (n == RG_QMAX_ORDER)
        return fail_at(P, P->t.pos, "at most %d ORDER BY keys", RG_QMAX_ORDER);
      if ((x = expr(P)) < 0) return P->status;
      if (EX(P, x)->k == RG_QE_CALL && EX(P, x)->op == RG_QF_VECTORDISTANCE) {
        if (order_by_vector(P, b, x, EX(P, x)->pos)) return P->status;
        break;
      }
      if (BLK(P, b)->norder == 1 &&
          EX(P, BLK(P, b)->order[0].expr)->k == RG_QE_CALL &&
          EX(P, BLK(P, b)->order[0].expr)->op == RG_QF_VECTORDISTANCE)
        return fail_at(P, EX(P, x)->pos, "ORDER BY VectorDistance must be "
                       "the only ORDER BY key");
      if (is_kw(P, "ASC")) { if (next(P)) return P->status; }
      else if (is_kw(P, "DESC")) {
        desc = 1;
        if (next(P)) return P->status;
      }
      BLK(P, b)->order[n].expr = x;
      BLK(P, b)->order[n].desc = desc;
      BLK(P, b)->norder = n + 1;
      if (P->t.k != TK_COMMA) break;
      if (next(P)) return P->status;
    }
  }
  if (is_kw(P, "OFFSET")) {
    int32_t o, l;
    if (next(P) || (o = count_value(P, "a number after OFFSET")) < 0)
      return P->status;
    if (want_kw(P, "LIMIT")) return P->status;
    if ((l = count_value(P, "a number after LIMIT")) < 0) return P->status;
    BLK(P, b)->offset = o;
    BLK(P, b)->limit = l;
  }
  return P->status;
}

static int query (pstate *P, int filter) {
  const rg_qblock *b;
  if (next(P)) return P->status;
  if (new_block(P, -1, 0) < 0) return P->status;
  if (select_block(P, 0, filter)) return P->status;
  if (P->t.k == TK_EOF) return 0;
  b = BLK(P, 0);
  if (b->nsrc == 0 && b->where < 0 && P->t.k == TK_IDENT &&
      !is_reserved(P->t.s, P->t.n))
    return expected(P, "FROM");
  if (b->nsrc == 0 && b->where < 0)
    return expected(P, "FROM, WHERE, GROUP BY, ORDER BY, OFFSET or the end "
                    "of the query");
  if (b->where < 0 && b->ngroup == 0 && b->norder == 0 && b->offset < 0)
    return expected(P, "WHERE, GROUP BY, ORDER BY, OFFSET or the end of the "
                    "query");
  return expected(P, "the end of the query");
}
/* }===================================================================== */


/*
** {=====================================================================
** Names and rules
** ======================================================================
*/
/* The names a block sees: its sources (the first nvis), then its
** enclosing blocks'. */
typedef struct bscope {
  int blk;
  int nvis;
  struct bscope *up;
  int aggs_ok;                       /* aggregates allowed here */
  int in_agg;                        /* inside an aggregate call */
  int bare;                          /* own aliases outside aggregates */
  uint32_t bare_pos;
} bscope;

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

static int resolve_block (pstate *P, int b, bscope *up);

static int unknown_name (pstate *P, const rg_qexpr *ex) {
  const rg_qblock *m = BLK(P, 0);
  if (m->nsrc > 0 && m->src[0].name)
    return fail_at(P, ex->pos, "unknown name '%.*s' (the FROM alias is "
                   "'%.*s')", (int)(ex->n > 40 ? 40 : ex->n), ex->s,
                   (int)(m->src[0].nlen > 40 ? 40 : m->src[0].nlen),
                   m->src[0].name);
  return fail_at(P, ex->pos, "unknown name '%.*s'%s",
                 (int)(ex->n > 40 ? 40 : ex->n), ex->s,
                 m->nsrc ? "" : " (the query has no FROM)");
}

static int resolve (pstate *P, bscope *S, int32_t i) {
  rg_query *q = P->q;
  rg_qexpr *ex;
  int k;
  if (i < 0 || P->status) return P->status;
  ex = EX(P, i);
  switch (ex->k) {
    case RG_QE_IDENT: {
      bscope *s;
      for (s = S; s; s = s->up) {
        const rg_qblock *b = BLK(P, s->blk);
        for (k = s->nvis - 1; k >= 0; k--)
          if (b->src[k].name && b->src[k].nlen == ex->n &&
              memcmp(b->src[k].name, ex->s, ex->n) == 0) {
            ex->k = RG_QE_ALIAS;
            ex->slot = b->src[k].slot;
            if (s == S && !S->in_agg && !S->bare) {
              S->bare = 1;
              S->bare_pos = ex->pos;
            }
            return 0;
          }
      }
      return unknown_name(P, ex);
    }
    case RG_QE_PARAM:
      ex->slot = param_slot(P, ex->s, ex->n, ex->pos);
      return P->status;
    case RG_QE_SUBQ:
      return resolve_block(P, ex->slot, S);
    case RG_QE_CALL:
      if (RG_QF_ISAGG(ex->op)) {
        if (!S->aggs_ok)
          return fail_at(P, ex->pos, "aggregate functions are allowed only "
                         "in the SELECT list");
        if (S->in_agg)
          return fail_at(P, ex->pos, "aggregate functions cannot be nested");
        ex->slot = q->naggs++;
        ex->n = (uint32_t)S->blk;
        BLK(P, S->blk)->naggs++;
        S->in_agg = 1;
        for (k = 0; k < ex->nlist; k++)
          if (resolve(P, S, q->list[ex->list + k])) return P->status;
        S->in_agg = 0;
        return 0;
      }
      break;
    default: break;
  }
  if (resolve(P, S, ex->a) || resolve(P, S, ex->b) || resolve(P, S, ex->c))
    return P->status;
  if (ex->k != RG_QE_PROP)
    for (k = 0; k < ex->nlist; k++)
      if (resolve(P, S, q->list[EX(P, i)->list + k])) return P->status;
  return 0;
}

/* Are two expressions the same (GROUP BY matching)? */
static int same_expr (pstate *P, int32_t i, int32_t j) {
  const rg_qexpr *a, *b;
  int k;
  if (i < 0 || j < 0) return i == j;
  a = EX(P, i);
  b = EX(P, j);
  if (a->k != b->k || a->op != b->op || a->nlist != b->nlist) return 0;
  switch (a->k) {
    case RG_QE_LIT:
      if (a->v.t != b->v.t) return 0;
      if (a->v.t == RG_QV_NUM) return a->v.d == b->v.d;
      if (a->v.t == RG_QV_STR)
        return a->v.n == b->v.n && memcmp(a->v.s, b->v.s, a->v.n) == 0;
      return 1;
    case RG_QE_ALIAS: case RG_QE_PARAM: return a->slot == b->slot;
    case RG_QE_SUBQ: case RG_QE_GROUPREF: return 0;
    case RG_QE_PROP: case RG_QE_MEMBER: case RG_QE_UDF:
      if (a->n != b->n || memcmp(a->s, b->s, a->n) != 0) return 0;
      break;
    default: break;
  }
  if (!same_expr(P, a->a, b->a) || !same_expr(P, a->b, b->b) ||
      !same_expr(P, a->c, b->c))
    return 0;
  if (a->k != RG_QE_PROP)
    for (k = 0; k < a->nlist; k++)
      if (!same_expr(P, P->q->list[a->list + k], P->q->list[b->list + k]))
        return 0;
  return 1;
}

/* Replaces the parts of a SELECT item of grouped block b that are its
** GROUP BY expressions by references to the group's values. */
static void groupify (pstate *P, const rg_qblock *b, int32_t i) {
  rg_qexpr *ex;
  int g, k;
  if (i < 0) return;
  ex = EX(P, i);
  if (ex->k == RG_QE_CALL && RG_QF_ISAGG(ex->op)) return;
  if (ex->k == RG_QE_SUBQ) return;
  for (g = 0; g < b->ngroup; g++)
    if (same_expr(P, i, b->group[g])) {
      ex->k = RG_QE_GROUPREF;
      ex->slot = g;
      return;
    }
  groupify(P, b, ex->a);
  groupify(P, b, ex->b);
  groupify(P, b, ex->c);
  if (ex->k != RG_QE_PROP)
    for (k = 0; k < ex->nlist; k++) groupify(P, b, P->q->list[ex->list + k]);
}

static int32_t stray_alias (pstate *P, const rg_qblock *b, int32_t i);

/* stray_alias over every expression of block s. */
static int32_t stray_block (pstate *P, const rg_qblock *b,
                            const rg_qblock *s) {
  int32_t r;
  int k;
  for (k = 0; k < s->nsrc; k++) {
    if (s->src[k].kind == RG_QS_SUBQ)
      r = stray_block(P, b, BLK(P, s->src[k].expr));
    else r = stray_alias(P, b, s->src[k].expr);
    if (r >= 0) return r;
  }
  if ((r = stray_alias(P, b, s->where)) >= 0) return r;
  for (k = 0; k < s->ngroup; k++)
    if ((r = stray_alias(P, b, s->group[k])) >= 0) return r;
  for (k = 0; k < s->norder; k++)
    if ((r = stray_alias(P, b, s->order[k].expr)) >= 0) return r;
  for (k = 0; k < s->nsel; k++)
    if ((r = stray_alias(P, b, P->q->sel[s->sel0 + k].expr)) >= 0) return r;
  return -1;
}

/* The first reference to one of block b's aliases outside aggregates and
** group values in expression i (subqueries included): its node, or -1. */
static int32_t stray_alias (pstate *P, const rg_qblock *b, int32_t i) {
  const rg_qexpr *ex;
  int32_t r;
  int k;
  if (i < 0) return -1;
  ex = EX(P, i);
  switch (ex->k) {
    case RG_QE_ALIAS:
      for (k = 0; k < b->nsrc; k++) if (b->src[k].slot == ex->slot) return i;
      return -1;
    case RG_QE_GROUPREF: return -1;
    case RG_QE_CALL: if (RG_QF_ISAGG(ex->op)) return -1; break;
    case RG_QE_SUBQ: return stray_block(P, b, BLK(P, ex->slot));
    default: break;
  }
  if ((r = stray_alias(P, b, ex->a)) >= 0 ||
      (r = stray_alias(P, b, ex->b)) >= 0 ||
      (r = stray_alias(P, b, ex->c)) >= 0)
    return r;
  if (ex->k != RG_QE_PROP)
    for (k = 0; k < ex->nlist; k++)
      if ((r = stray_alias(P, b, P->q->list[ex->list + k])) >= 0) return r;
  return -1;
}

/* The output name of the select items of block b: AS, a property's name,
** an alias, or $n. */
static int name_items (pstate *P, int b) {
  rg_query *q = P->q;
  const rg_qblock *blk = BLK(P, b);
  int i, j, unnamed = 0;
  for (i = 0; i < blk->nsel; i++) {
    rg_qsel *s = &q->sel[blk->sel0 + i];
    const rg_qexpr *ex = EX(P, s->expr);
    if (s->name) continue;
    if (ex->k == RG_QE_PROP || ex->k == RG_QE_COMPUTED) {
      s->name = ex->s;
      s->nlen = ex->n;
    }
    else if (ex->k == RG_QE_GROUPREF &&
             EX(P, blk->group[ex->slot])->k == RG_QE_PROP) {
      s->name = EX(P, blk->group[ex->slot])->s;
      s->nlen = EX(P, blk->group[ex->slot])->n;
    }
    else if (ex->k == RG_QE_ALIAS) {
      const rg_qblock *o;
      int k, found = 0;
      for (o = blk; o && !found; o = o->parent >= 0 ? BLK(P, o->parent) : NULL)
        for (k = 0; k < o->nsrc; k++)
          if (o->src[k].slot == ex->slot) {
            s->name = o->src[k].name;
            s->nlen = o->src[k].nlen;
            found = 1;
            break;
          }
    }
    if (s->name == NULL) {
      char tmp[16];
      int n = snprintf(tmp, sizeof(tmp), "$%d", ++unnamed);
      if ((s->name = rg_arena_dup(&q->mem, tmp, (size_t)n)) == NULL)
        return oom(P);
      s->nlen = (uint32_t)n;
    }
  }
  for (i = 0; i < blk->nsel; i++)
    for (j = 0; j < i; j++) {
      const rg_qsel *x = &q->sel[blk->sel0 + i], *y = &q->sel[blk->sel0 + j];
      if (x->nlen == y->nlen && memcmp(x->name, y->name, x->nlen) == 0)
        return fail_at(P, EX(P, x->expr)->pos, "duplicate output name "
                       "'%.*s' (use AS to name it)",
                       (int)(x->nlen > 40 ? 40 : x->nlen), x->name);
    }
  return 0;
}

static int resolve_block (pstate *P, int b, bscope *up) {
  rg_query *q = P->q;
  bscope S;
  int i, k;
  memset(&S, 0, sizeof(S));
  S.blk = b;
  S.up = up;
  BLK(P, b)->parent = up ? up->blk : -1;
  for (i = 0; i < BLK(P, b)->nsrc; i++) {
    rg_qsrc *s = &BLK(P, b)->src[i];
    for (k = 0; k < i; k++) {
      const rg_qsrc *o = &BLK(P, b)->src[k];
      if (s->name && o->name && s->nlen == o->nlen &&
          memcmp(s->name, o->name, s->nlen) == 0)
        return fail_at(P, s->pos, "the alias '%.*s' is already in use",
                       (int)(s->nlen > 40 ? 40 : s->nlen), s->name);
    }
    S.nvis = i;                      /* a source sees those before it */
    if (s->kind == RG_QS_SUBQ) {
      if (resolve_block(P, s->expr, &S)) return P->status;
    }
    else if (s->kind != RG_QS_ROOT && resolve(P, &S, s->expr))
      return P->status;
    if (q->nslots == RG_QMAX_SLOTS)
      return fail_at(P, s->pos, "at most %d aliases in a query",
                     RG_QMAX_SLOTS);
    BLK(P, b)->src[i].slot = q->nslots++;
  }
  S.nvis = BLK(P, b)->nsrc;
  if (resolve(P, &S, BLK(P, b)->where)) return P->status;
  for (i = 0; i < BLK(P, b)->ngroup; i++)
    if (resolve(P, &S, BLK(P, b)->group[i])) return P->status;
  for (i = 0; i < BLK(P, b)->norder; i++)
    if (resolve(P, &S, BLK(P, b)->order[i].expr)) return P->status;
  if (resolve(P, &S, BLK(P, b)->top) || resolve(P, &S, BLK(P, b)->offset) ||
      resolve(P, &S, BLK(P, b)->limit))
    return P->status;
  S.aggs_ok = 1;
  S.bare = 0;
  for (i = 0; i < BLK(P, b)->nsel; i++)
    if (resolve(P, &S, q->sel[BLK(P, b)->sel0 + i].expr)) return P->status;
  {
    const rg_qblock *blk = BLK(P, b);
    if (blk->ngroup > 0) {
      if (blk->star)
        return fail_at(P, blk->pos, "SELECT * cannot be used with GROUP BY");
      if (blk->norder > 0)
        return fail_at(P, EX(P, blk->order[0].expr)->pos, "ORDER BY cannot "
                       "be used with GROUP BY");
      if (blk->distinct)
        return fail_at(P, blk->pos, "DISTINCT cannot be used with GROUP BY");
      for (i = 0; i < blk->nsel; i++) {
        int32_t r;
        groupify(P, blk, q->sel[blk->sel0 + i].expr);
        if ((r = stray_alias(P, blk, q->sel[blk->sel0 + i].expr)) >= 0)
          return fail_at(P, EX(P, r)->pos, "with GROUP BY, every reference "
                         "to the input outside an aggregate must be part of "
                         "a GROUP BY expression");
      }
    }
    else if (blk->naggs > 0) {
      if (S.bare)
        return fail_at(P, S.bare_pos, "with aggregate functions, every "
                       "reference to the input must be inside an aggregate");
      if (blk->norder > 0)
        return fail_at(P, EX(P, blk->order[0].expr)->pos, "ORDER BY cannot "
                       "be used with aggregate functions");
    }
    if (blk->star && blk->nsrc != 1 && !P->filter)
      return fail_at(P, blk->pos, blk->nsrc == 0
                     ? "SELECT * needs a FROM clause"
                     : "SELECT * is only valid with a single input; name "
                       "what to select with JOIN");
    if (!blk->star && !blk->value) return name_items(P, b);
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Computed properties
** ======================================================================
*/
/* The slot of the item when the query's FROM is the item itself. */
static int32_t root_slot (const rg_query *q) {
  const rg_qblock *m = &q->blk[0];
  return m->nsrc > 0 && m->src[0].kind == RG_QS_ROOT ? m->src[0].slot : -1;
}

int rg_query_computed_check (const rg_query *q, rg_err *e) {
  const rg_qblock *m = &q->blk[0];
  int i;
  if (q->nblk > 1 || q->has_subq)
    return rg_fail(e, 400, "a computed property's query cannot use "
                   "subqueries");
  if (!m->value || m->nsrc != 1 || m->src[0].kind != RG_QS_ROOT)
    return rg_fail(e, 400, "a computed property's query is SELECT VALUE "
                   "expr FROM c");
  if (m->where >= 0 || m->ngroup || m->norder || m->top >= 0 ||
      m->distinct || m->offset >= 0)
    return rg_fail(e, 400, "a computed property's query cannot use WHERE, "
                   "GROUP BY, ORDER BY, TOP, DISTINCT or OFFSET LIMIT");
  if (q->naggs || q->uses_udf || q->nondet || q->nparams)
    return rg_fail(e, 400, "a computed property's query cannot use "
                   "aggregates, user-defined or nondeterministic functions "
                   "or parameters");
  for (i = 0; i < q->nex; i++)
    if (q->ex[i].k == RG_QE_CALL && q->ex[i].op == RG_QF_DOCUMENTID)
      return rg_fail(e, 400, "a computed property's query cannot use "
                     "DocumentId");
  return 0;
}

void rg_query_computed (rg_query *q, const rg_qcomputed *cp, int n) {
  int32_t root = root_slot(q);
  int i, k;
  if (root < 0 || n == 0) return;
  for (i = 0; i < q->nex; i++) {
    rg_qexpr *ex = &q->ex[i];
    const rg_qexpr *on;
    if (ex->k != RG_QE_PROP) continue;
    on = &q->ex[ex->a];
    if (!(on->k == RG_QE_ALIAS && on->slot == root) && on->k != RG_QE_ROOT)
      continue;
    for (k = 0; k < n; k++)
      if (cp[k].nlen == ex->n && memcmp(cp[k].name, ex->s, ex->n) == 0) {
        ex->k = RG_QE_COMPUTED;
        ex->slot = k;
        break;
      }
  }
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
  if (query(&P, filter) == 0) resolve_block(&P, 0, NULL);
  if (P.status == 0) P.status = rg_qfts_check(q, e);
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
  free(q->blk);
  free(q->param);
  free(q->vd);
  rg_arena_free(&q->mem);
  free(q);
}

int rg_query_mode (const rg_query *q) {
  const rg_qblock *m = &q->blk[0];
  if (m->ngroup) return RG_QX_GROUP;
  if (m->naggs) return RG_QX_AGG;
  if (m->distinct) return RG_QX_DISTINCT;
  if (m->norder) return RG_QX_SORT;
  return RG_QX_STREAM;
}
