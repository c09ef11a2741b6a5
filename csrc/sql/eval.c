/*
** eval.c: expression evaluation for the query engine, over the values of
** value.c.
**
** Semantics are Cosmos DB's: a missing property is undefined, and so is
** any operation on operands of the wrong types (comparisons across types
** included); AND, OR and NOT are three-valued over booleans, anything else
** counting as undefined; a WHERE keeps a row only when it is exactly true.
*/

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_int.h"


static const rg_qv undef = { RG_QV_UNDEF, 0, NULL, 0, NULL };

static int is_scalar (int t) {
  return t >= RG_QV_NULL && t <= RG_QV_STR;
}


/*
** {=====================================================================
** Evaluation
** ======================================================================
*/
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

static void subquery (rg_qctx *x, const rg_qexpr *ex, rg_qv *out);

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
      if (ex->op == RG_QF_RRF) n = 0;    /* it fails: ORDER BY RANK's alone */
      for (i = 0; i < n; i++) rg_qeval(x, x->q->list[ex->list + i], &args[i]);
      if (ex->op >= RG_QF_FULLTEXTCONTAINS && ex->op <= RG_QF_RRF)
        rg_qfts_call(x, e, args, n, out);   /* prepared once per query */
      else rg_qcall(x, ex->op, args, n, out);
      return;
    }
    case RG_QE_UDF: udf(x, ex, out); return;
    case RG_QE_SUBQ: subquery(x, ex, out); return;
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

static void subquery (rg_qctx *x, const rg_qexpr *ex, rg_qv *out) {
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
