/*
** plan.c: routing, index choice and the storage sources of queries.
**
** Routing.  A query stays in one logical partition when opts.partition_key
** names it, or when its WHERE holds, as top-level conjuncts, an equality
** between every level of the partition key path and a literal or a
** parameter.  One logical partition is one contiguous key range `lp` of the
** items table (layout.c), so a routed query contacts one physical
** partition.  Any other query fans out over every physical partition.
** Physical partitions are hash ranges of one table here, so a fan-out is
** carried out as one pass in key order (or one pass over a global index,
** whose entries within a term are in hash order too); the model counts it
** as contacting all P partitions, and the merge of their results is the
** order of that pass.
**
** Indexes (index.c) hold, for every indexed scalar, an entry
**
**     cid | path-id | term | pk-hash u64 | item-digest u64  ->  item key
**
** A conjunct of the WHERE on an indexed path against constants becomes a
** seek: `p = v` (and ARRAY_CONTAINS(p, v) on p's elements, and `p IN
** (...)`, one seek per value) looks up one term, which a routed query
** narrows to its partition's hash; `p < v`, `p BETWEEN a AND b` and
** STARTSWITH(p, 's') read a range of terms of one type.  Entries only
** nominate candidates: the whole WHERE is evaluated again on every item
** loaded (long strings are cut in terms, and array paths hold every
** element), so an index can never change a result, only the work.
**
** ORDER BY.  A single-key ORDER BY on an indexed path (no array position)
** of a fan-out reads that path's entries in term order (backwards for
** DESC), which is the query's order: with TOP or a page size it stops as
** soon as it has what the merge needs.  Items with no scalar at the path
** have no entry; they sort first ascending (last descending), so they are
** found by a scan of the items, unless the WHERE proves the path holds a
** scalar in every result (a comparison on it, for instance).  A multi-key
** ORDER BY uses a composite index whose columns, after the ones the WHERE
** fixes by equality, are the keys in the same or all-opposite directions,
** when the WHERE proves every other column a scalar (items lacking one are
** not in a composite index).  Otherwise the rows are sorted.  Strings cut
** in terms can tie where their full values do not: such a run of entries
** is loaded and sorted on the full values.
**
** The planner's choice depends only on the query, its parameters and the
** container spec, never on the page size or the token, so every page of a
** paged query reads the same sequence.  Sources report their position
** (an item key, an index entry key) and a phase (the lookup number of an
** IN, the part of an ORDER BY scan) for the continuation token, whose
** context hashes the container id, the text, the parameters and the
** routing partition key.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/token.h"
#include "sql/sql.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/index.h"
#include "store/plan.h"

#define QMAX_SEGS 32

enum { SRC_SCAN = 1, SRC_TERMS, SRC_RANGE };
enum { SA_EQ = 1, SA_IN, SA_PREFIX, SA_RANGE };

typedef struct qpath {
  int n;
  int arr;                          /* an array position on the way */
  const char *seg[QMAX_SEGS];       /* MUTF-8, "[]" for array positions */
} qpath;

/* A conjunct that an index can serve. */
typedef struct sarg {
  int kind;
  qpath path;
  rg_qv lo, hi;                     /* EQ: lo; RANGE: bounds; PREFIX: lo */
  int has_lo, has_hi, lo_ex, hi_ex;
  int32_t e;                        /* IN: the expression */
  int ci, ci2;                      /* the conjunct(s) it comes from */
} sarg;

typedef struct plan {
  int routed;
  rg_ikey lp;
  int src;
  int mode, tie_desc;
  uint8_t prefix[12];               /* cid | path-id (or composite id) */
  /* SRC_TERMS: exact terms, sorted, each `tlen` bytes at `toff` */
  rg_buf terms;
  size_t *toff, *tlen, nterms;
  /* SRC_RANGE: entries whose term part starts with tpre, within lo..hi */
  rg_buf tpre, lo, hi;
  int has_lo, has_hi, lo_ex, hi_ex;
  int desc;                         /* read backwards */
  int ordered;                      /* the scan gives the ORDER BY order */
  int uphase;                       /* 0 none, 1 items without the path
                                       first (asc), 2 last (desc) */
  int ncols, gcol0, gcols;          /* term columns; the ORDER BY ones */
  int coldesc[8];
} plan;

typedef struct planner {
  const rg_query *q;
  const rg_cspec *spec;
  const rg_qv *params;
  rg_arena *mem;
  sarg *sa;
  int nsa;
  int32_t *conj;
  int nconj;
  char *implied;                    /* conjuncts the source guarantees */
  int host;                         /* rg_query_hplan: no ordered sources
                                       (1), or a scan (2) */
} planner;

typedef struct source {
  MDB_txn *txn;
  rg_env *env;
  const plan *pl;
  rg_qexec *x;
  rg_work *w;
  int64_t now;
  rg_err *e;
  int resumed, rphase;
  const uint8_t *rpos, *rokey;
  size_t rposlen, roklen;
  rg_buf okey;                      /* cut groups */
} source;


/*
** {=====================================================================
** Paths, constants and conjuncts
** ======================================================================
*/
/* A name as a NUL-terminated MUTF-8 string (NUL as C0 80). */
static const char *mutf8 (rg_arena *a, const char *s, size_t n) {
  size_t i, nul = 0;
  char *d, *w;
  for (i = 0; i < n; i++) nul += s[i] == '\0';
  if ((d = (char *)rg_arena_alloc(a, n + nul + 1)) == NULL) return NULL;
  for (i = 0, w = d; i < n; i++) {
    if (s[i] == '\0') { *w++ = (char)0xC0; *w++ = (char)0x80; }
    else *w++ = s[i];
  }
  *w = '\0';
  return d;
}

/* The normalized document path of an expression, if it is one. */
static int path_of (planner *P, int32_t e, qpath *out) {
  const rg_qexpr *ex = &P->q->ex[e];
  switch (ex->k) {
    case RG_QE_ALIAS:
      if (ex->slot == 0) { out->n = 0; out->arr = 0; return 1; }
      if (!path_of(P, P->q->join[ex->slot - 1].src, out)) return 0;
      if (out->n == QMAX_SEGS) return 0;
      out->seg[out->n++] = "[]";
      out->arr = 1;
      return 1;
    case RG_QE_PROP:
      if (!path_of(P, ex->a, out) || out->n == QMAX_SEGS) return 0;
      if ((out->seg[out->n] = mutf8(P->mem, ex->s, ex->n)) == NULL) return 0;
      if (strcmp(out->seg[out->n], "[]") == 0) out->arr = 1;  /* ambiguous */
      out->n++;
      return 1;
    case RG_QE_INDEX: {
      const rg_qexpr *ix = &P->q->ex[ex->b];
      if (ix->k != RG_QE_LIT || ix->v.t != RG_QV_NUM) return 0;
      if (!path_of(P, ex->a, out) || out->n == QMAX_SEGS) return 0;
      out->seg[out->n++] = "[]";
      out->arr = 1;
      return 1;
    }
    default: return 0;
  }
}

static int same_path (const qpath *a, const qpath *b) {
  int i;
  if (a->n != b->n) return 0;
  for (i = 0; i < a->n; i++)
    if (strcmp(a->seg[i], b->seg[i]) != 0) return 0;
  return 1;
}

static int path_is (const qpath *a, const rg_path *b) {
  int i;
  if (a->arr || a->n != b->n) return 0;
  for (i = 0; i < a->n; i++)
    if (strcmp(a->seg[i], b->seg[i]) != 0) return 0;
  return 1;
}

static int indexed (planner *P, const qpath *p) {
  return p->n > 0 && rg_cspec_indexed(P->spec, p->seg, p->n);
}

/* A literal or a bound parameter (never undefined). */
static int const_of (planner *P, int32_t e, rg_qv *v) {
  const rg_qexpr *ex = &P->q->ex[e];
  if (ex->k == RG_QE_LIT) *v = ex->v;
  else if (ex->k == RG_QE_PARAM) *v = P->params[ex->slot];
  else return 0;
  return v->t != RG_QV_UNDEF;
}

static int scalar (const rg_qv *v) {
  return v->t >= RG_QV_NULL && v->t <= RG_QV_STR;
}

static void conjuncts (planner *P, int32_t e, int32_t *out, int *n, int max) {
  const rg_qexpr *ex = &P->q->ex[e];
  if (ex->k == RG_QE_AND) {
    conjuncts(P, ex->a, out, n, max);
    conjuncts(P, ex->b, out, n, max);
  }
  else if (*n < max) out[(*n)++] = e;
}

/* Classifies conjunct e; 1 when it is a sarg (filled in *s). */
static int classify (planner *P, int32_t e, sarg *s) {
  const rg_qexpr *ex = &P->q->ex[e];
  const int32_t *args = P->q->list + ex->list;
  memset(s, 0, sizeof(*s));
  s->e = e;
  s->ci2 = -1;
  if (ex->k == RG_QE_BINARY && ex->op <= RG_QO_GE &&
      ex->op != RG_QO_NE) {
    int op = ex->op;
    rg_qv v;
    if (path_of(P, ex->a, &s->path) && const_of(P, ex->b, &v)) ;
    else if (path_of(P, ex->b, &s->path) && const_of(P, ex->a, &v)) {
      if (op == RG_QO_LT) op = RG_QO_GT;           /* 5 < p is p > 5 */
      else if (op == RG_QO_LE) op = RG_QO_GE;
      else if (op == RG_QO_GT) op = RG_QO_LT;
      else if (op == RG_QO_GE) op = RG_QO_LE;
    }
    else return 0;
    if (op == RG_QO_EQ) {
      if (!scalar(&v)) return 0;
      s->kind = SA_EQ;
      s->lo = v;
      return 1;
    }
    if (v.t != RG_QV_NUM && v.t != RG_QV_STR) return 0;
    s->kind = SA_RANGE;
    if (op == RG_QO_GT || op == RG_QO_GE) {
      s->lo = v; s->has_lo = 1; s->lo_ex = op == RG_QO_GT;
    }
    else {
      s->hi = v; s->has_hi = 1; s->hi_ex = op == RG_QO_LT;
    }
    return 1;
  }
  if (ex->k == RG_QE_BETWEEN && !ex->op) {
    if (!path_of(P, ex->a, &s->path) || !const_of(P, ex->b, &s->lo) ||
        !const_of(P, ex->c, &s->hi) || s->lo.t != s->hi.t ||
        (s->lo.t != RG_QV_NUM && s->lo.t != RG_QV_STR))
      return 0;
    s->kind = SA_RANGE;
    s->has_lo = s->has_hi = 1;
    return 1;
  }
  if (ex->k == RG_QE_IN && !ex->op) {
    int i;
    rg_qv v;
    if (!path_of(P, ex->a, &s->path)) return 0;
    for (i = 0; i < ex->nlist; i++)   /* scalars only: the index has no
                                         arrays or objects at a path */
      if (!const_of(P, P->q->list[ex->list + i], &v) || !scalar(&v)) return 0;
    s->kind = SA_IN;
    return 1;
  }
  if (ex->k == RG_QE_CALL && (ex->op == RG_QF_ARRAY_CONTAINS ||
                              ex->op == RG_QF_STARTSWITH)) {
    rg_qv v, flag;
    if (ex->nlist == 3 && !(const_of(P, args[2], &flag) &&
                            flag.t == RG_QV_FALSE))
      return 0;                      /* partial or case-insensitive */
    if (!path_of(P, args[0], &s->path) || !const_of(P, args[1], &v))
      return 0;
    if (ex->op == RG_QF_ARRAY_CONTAINS) {
      if (!scalar(&v) || s->path.n == QMAX_SEGS) return 0;
      s->path.seg[s->path.n++] = "[]";
      s->path.arr = 1;
      s->kind = SA_EQ;
      s->lo = v;
      return 1;
    }
    if (v.t != RG_QV_STR) return 0;
    s->kind = SA_PREFIX;
    s->lo = v;
    return 1;
  }
  return 0;
}

/* Does the WHERE prove that root path p holds a scalar in every row it
** keeps?  A comparison (or IN, BETWEEN, a string function, an IS_ type
** test) that is a top-level conjunct and can only be true on a scalar. */
static int proves_scalar (planner *P, const qpath *p) {
  int i;
  for (i = 0; i < P->nconj; i++) {
    const rg_qexpr *ex = &P->q->ex[P->conj[i]];
    const int32_t *args = P->q->list + ex->list;
    qpath q;
    rg_qv v;
    int32_t subj = -1, other = -1;
    if (ex->k == RG_QE_BINARY && ex->op <= RG_QO_GE) {
      if (path_of(P, ex->a, &q) && same_path(&q, p)) {
        subj = ex->a;
        other = ex->b;
      }
      else if (path_of(P, ex->b, &q) && same_path(&q, p)) {
        subj = ex->b;
        other = ex->a;
      }
      if (subj >= 0 && const_of(P, other, &v) && scalar(&v)) return 1;
    }
    else if ((ex->k == RG_QE_BETWEEN || ex->k == RG_QE_IN) && !ex->op) {
      if (path_of(P, ex->a, &q) && same_path(&q, p)) {
        if (ex->k == RG_QE_BETWEEN) {
          if (const_of(P, ex->b, &v) && scalar(&v)) return 1;
        }
        else {
          int k, ok = 1;
          for (k = 0; k < ex->nlist && ok; k++)
            ok = const_of(P, P->q->list[ex->list + k], &v) && scalar(&v);
          if (ok) return 1;
        }
      }
    }
    else if (ex->k == RG_QE_CALL && ex->nlist >= 1 &&
             (ex->op == RG_QF_STARTSWITH || ex->op == RG_QF_ENDSWITH ||
              ex->op == RG_QF_CONTAINS || ex->op == RG_QF_IS_STRING ||
              ex->op == RG_QF_IS_NUMBER || ex->op == RG_QF_IS_BOOL ||
              ex->op == RG_QF_IS_NULL)) {
      if (path_of(P, args[0], &q) && same_path(&q, p)) return 1;
    }
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Planning
** ======================================================================
*/
static int term_cut (const rg_buf *t) {
  return t->n >= 2 && (uint8_t)t->p[t->n - 2] == 0 &&
         (uint8_t)t->p[t->n - 1] == 2;
}

static void set_prefix (plan *pl, uint32_t cid, uint64_t id) {
  rg_put_u32(pl->prefix, cid);
  rg_put_u64(pl->prefix + 4, id);
}

static uint64_t path_id (const qpath *p) {
  return rg_index_path_id(p->seg, p->n);
}

/* The source guarantees sarg s exactly: its conjuncts need no test. */
static void imply (planner *P, const sarg *s) {
  if (P->implied == NULL) return;
  P->implied[s->ci] = 1;
  if (s->ci2 >= 0) P->implied[s->ci2] = 1;
}

typedef struct tslice {
  const char *p;
  size_t n;
} tslice;

static int tslice_cmp (const void *a, const void *b) {
  const tslice *x = (const tslice *)a, *y = (const tslice *)b;
  int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
  if (c) return c;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* The exact terms of an EQ or IN sarg, sorted and without duplicates. */
static int plan_terms (planner *P, plan *pl, const sarg *s, rg_err *e) {
  rg_qv one[1], *vals = one;
  int n = 1, i;
  size_t k, w;
  if (s->kind == SA_IN) {
    const rg_qexpr *ex = &P->q->ex[s->e];
    n = ex->nlist;
    vals = (rg_qv *)rg_arena_alloc(P->mem, (size_t)n * sizeof(rg_qv));
    if (vals == NULL) return rg_fail(e, 500, "out of memory");
    for (i = 0; i < n; i++) const_of(P, P->q->list[ex->list + i], &vals[i]);
  }
  else one[0] = s->lo;
  pl->toff = (size_t *)rg_arena_alloc(P->mem, (size_t)n * sizeof(size_t));
  pl->tlen = (size_t *)rg_arena_alloc(P->mem, (size_t)n * sizeof(size_t));
  if (pl->toff == NULL || pl->tlen == NULL)
    return rg_fail(e, 500, "out of memory");
  pl->nterms = 0;
  for (i = 0; i < n; i++) {
    size_t start = pl->terms.n;
    if (!scalar(&vals[i])) continue;   /* can never be equal to a scalar */
    rg_qv_term(&pl->terms, &vals[i], 0, RG_TERM_MAX);
    pl->toff[pl->nterms] = start;
    pl->tlen[pl->nterms] = pl->terms.n - start;
    pl->nterms++;
  }
  if (pl->terms.oom) return rg_fail(e, 500, "out of memory");
  {                                  /* sort by term, drop duplicates */
    tslice *sl = (tslice *)rg_arena_alloc(P->mem, (pl->nterms + 1) *
                                          sizeof(tslice));
    if (sl == NULL) return rg_fail(e, 500, "out of memory");
    for (k = 0; k < pl->nterms; k++) {
      sl[k].p = pl->terms.p + pl->toff[k];
      sl[k].n = pl->tlen[k];
    }
    if (pl->nterms > 1) qsort(sl, pl->nterms, sizeof(tslice), tslice_cmp);
    for (k = 0; k < pl->nterms; k++) {
      pl->toff[k] = (size_t)(sl[k].p - pl->terms.p);
      pl->tlen[k] = sl[k].n;
    }
  }
  for (k = 0, w = 0; k < pl->nterms; k++) {
    if (w > 0 && pl->tlen[w - 1] == pl->tlen[k] &&
        memcmp(pl->terms.p + pl->toff[w - 1], pl->terms.p + pl->toff[k],
               pl->tlen[k]) == 0)
      continue;
    pl->toff[w] = pl->toff[k];
    pl->tlen[w] = pl->tlen[k];
    w++;
  }
  pl->nterms = w;
  set_prefix(pl, P->spec->cid, path_id(&s->path));
  pl->src = SRC_TERMS;
  {                                  /* exact terms on a one-value path */
    int exact = !s->path.arr;
    for (k = 0; k < pl->nterms && exact; k++) {
      const char *end = pl->terms.p + pl->toff[k] + pl->tlen[k];
      exact = !(pl->tlen[k] >= 2 && end[-2] == 0 && end[-1] == 2);
    }
    if (exact) imply(P, s);
  }
  return 0;
}

/* A range over one type of terms (RANGE and PREFIX sargs). */
static int plan_range (planner *P, plan *pl, const sarg *s, rg_err *e) {
  set_prefix(pl, P->spec->cid, path_id(&s->path));
  pl->src = SRC_RANGE;
  pl->ncols = 1;
  if (s->kind == SA_PREFIX) {
    rg_qv_term(&pl->tpre, &s->lo, 0, RG_TERM_MAX);
    if (!term_cut(&pl->tpre)) imply(P, s);
    pl->tpre.n -= 2;                 /* the body, without its end */
  }
  else {
    rg_buf_addc(&pl->tpre, (s->has_lo ? s->lo.t : s->hi.t) == RG_QV_NUM
                           ? 0x08 : 0x09);
    if (s->has_lo) {
      rg_qv_term(&pl->lo, &s->lo, 0, RG_TERM_MAX);
      pl->has_lo = 1;
      pl->lo_ex = s->lo_ex && !term_cut(&pl->lo);
    }
    if (s->has_hi) {
      rg_qv_term(&pl->hi, &s->hi, 0, RG_TERM_MAX);
      pl->has_hi = 1;
      pl->hi_ex = s->hi_ex && !term_cut(&pl->hi);
    }
    if (!(pl->has_lo && term_cut(&pl->lo)) &&
        !(pl->has_hi && term_cut(&pl->hi)))
      imply(P, s);
  }
  if (pl->tpre.oom || pl->lo.oom || pl->hi.oom)
    return rg_fail(e, 500, "out of memory");
  return 0;
}

/* Ranks sargs: equality first, then IN, then prefixes and ranges. */
static int rank (const sarg *s) {
  switch (s->kind) {
    case SA_EQ: return 5;
    case SA_IN: return 4;
    case SA_PREFIX: return 3;
    default: return s->has_lo && s->has_hi ? 2 : 1;
  }
}

/* Can this sarg be served by the index?  (Ranges and IN lists only on
** paths without array positions, where an item has at most one entry.) */
static int usable (planner *P, const sarg *s) {
  if (s->kind == 0 || !indexed(P, &s->path)) return 0;
  if (s->kind != SA_EQ && s->path.arr) return 0;
  return 1;
}

/* The best sarg, or NULL; `skip` excludes a path (ORDER BY's). */
static const sarg *best_sarg (planner *P, int eq_only, int routed) {
  const sarg *best = NULL;
  int i;
  for (i = 0; i < P->nsa; i++) {
    const sarg *s = &P->sa[i];
    if (!usable(P, s)) continue;
    if ((eq_only || routed) && s->kind != SA_EQ && s->kind != SA_IN) continue;
    if (routed) {                    /* the partition key routes already */
      int k, pk = 0;
      for (k = 0; k < P->spec->npk; k++)
        if (path_is(&s->path, &P->spec->pk[k])) pk = 1;
      if (pk) continue;
    }
    if (best == NULL || rank(s) > rank(best)) best = s;
  }
  return best;
}

/* Joins `p > a` and `p < b` on one path into one two-sided range. */
static void merge_ranges (planner *P) {
  int i, j;
  for (i = 0; i < P->nsa; i++) {
    sarg *a = &P->sa[i];
    if (a->kind != SA_RANGE) continue;
    for (j = i + 1; j < P->nsa; j++) {
      sarg *b = &P->sa[j];
      if (b->kind != SA_RANGE || !same_path(&a->path, &b->path)) continue;
      if (a->has_lo && !a->has_hi && b->has_hi && !b->has_lo &&
          a->lo.t == b->hi.t) {
        a->hi = b->hi; a->has_hi = 1; a->hi_ex = b->hi_ex;
        a->ci2 = b->ci;
        b->kind = 0;
      }
      else if (a->has_hi && !a->has_lo && b->has_lo && !b->has_hi &&
               a->hi.t == b->lo.t) {
        a->lo = b->lo; a->has_lo = 1; a->lo_ex = b->lo_ex;
        a->ci2 = b->ci;
        b->kind = 0;
      }
    }
  }
}

/* Is path p fixed by an EQ sarg on it (a scalar constant)? */
static const sarg *fixed (planner *P, const qpath *p) {
  int i;
  for (i = 0; i < P->nsa; i++)
    if (P->sa[i].kind == SA_EQ && !P->sa[i].path.arr &&
        same_path(&P->sa[i].path, p))
      return &P->sa[i];
  return NULL;
}

/* Tries a composite index for the ORDER BY; 1 when planned. */
static int plan_composite (planner *P, plan *pl, int routed, rg_err *e) {
  const rg_query *q = P->q;
  qpath keys[RG_QMAX_ORDER];
  int kdesc[RG_QMAX_ORDER], nk = 0, i, j, c;
  for (i = 0; i < q->norder; i++) {  /* ORDER BY keys not fixed by = */
    qpath p;
    if (!path_of(P, q->order[i].expr, &p) || p.arr || p.n == 0) return 0;
    if (fixed(P, &p)) continue;
    keys[nk] = p;
    kdesc[nk] = q->order[i].desc;
    nk++;
  }
  if (nk == 0) return 0;
  for (c = 0; c < P->spec->ncomp; c++) {
    const rg_composite *ci = &P->spec->comp[c];
    int s = 0, rel = -1, ok = 1;
    size_t limit = 360 / (size_t)ci->n;
    const sarg *fx[8];
    while (s < ci->n) {              /* leading columns fixed by = */
      qpath p;
      p.n = ci->path[s].n;
      p.arr = 0;
      for (j = 0; j < p.n && j < QMAX_SEGS; j++) p.seg[j] = ci->path[s].seg[j];
      if ((fx[s] = fixed(P, &p)) == NULL) break;
      s++;
    }
    if (routed && s == 0) continue;  /* it would read every partition */
    if (s + nk > ci->n) continue;
    for (i = 0; i < nk && ok; i++) {
      int r = kdesc[i] != ci->desc[s + i];
      if (!path_is(&keys[i], &ci->path[s + i])) ok = 0;
      else if (rel >= 0 && r != rel) ok = 0;
      rel = r;
    }
    for (i = s; i < ci->n && ok; i++) {   /* no item may be missing */
      qpath p;
      p.n = ci->path[i].n;
      p.arr = 0;
      for (j = 0; j < p.n && j < QMAX_SEGS; j++) p.seg[j] = ci->path[i].seg[j];
      if (!proves_scalar(P, &p)) ok = 0;
    }
    if (!ok) continue;
    set_prefix(pl, P->spec->cid, ci->id);
    for (i = 0; i < s; i++) {
      size_t before = pl->tpre.n;
      rg_buf one;
      rg_buf_init(&one);
      rg_qv_term(&one, &fx[i]->lo, 0, limit);
      if (!term_cut(&one)) imply(P, fx[i]);
      rg_buf_free(&one);
      rg_qv_term(&pl->tpre, &fx[i]->lo, ci->desc[i], limit);
      (void)before;
    }
    if (pl->tpre.oom) { rg_fail(e, 500, "out of memory"); return -1; }
    pl->src = SRC_RANGE;
    pl->desc = rel;
    pl->ordered = 1;
    pl->tie_desc = rel;
    pl->ncols = ci->n;
    pl->gcol0 = s;
    pl->gcols = nk;
    for (i = 0; i < ci->n; i++) pl->coldesc[i] = ci->desc[i];
    return 1;
  }
  return 0;
}

/* Plans a single-key ORDER BY read from the path's index; 1 when done. */
static int plan_order (planner *P, plan *pl, rg_err *e) {
  const rg_query *q = P->q;
  qpath p;
  const sarg *on = NULL;
  int i, rc;
  if (q->norder != 1 || !path_of(P, q->order[0].expr, &p) || p.arr ||
      !indexed(P, &p))
    return 0;
  for (i = 0; i < P->nsa; i++) {
    const sarg *s = &P->sa[i];
    if (!same_path(&s->path, &p)) continue;
    if (s->kind == SA_RANGE || s->kind == SA_PREFIX) {
      if (on == NULL || rank(s) > rank(on)) on = s;
    }
  }
  if (on) {
    if ((rc = plan_range(P, pl, on, e))) return -1;
  }
  else {
    set_prefix(pl, P->spec->cid, path_id(&p));
    pl->src = SRC_RANGE;
    pl->ncols = 1;
    if (!proves_scalar(P, &p)) pl->uphase = q->order[0].desc ? 2 : 1;
  }
  pl->desc = q->order[0].desc;
  pl->tie_desc = pl->desc;
  pl->ordered = 1;
  pl->gcol0 = 0;
  pl->gcols = 1;
  return 1;
}

/* A partition key value as a cJSON node (on the C stack). */
static int pk_node (planner *P, const rg_qv *v, cJSON *n) {
  memset(n, 0, sizeof(*n));
  switch (v->t) {
    case RG_QV_NULL: n->type = cJSON_NULL; return 1;
    case RG_QV_FALSE: n->type = cJSON_False; return 1;
    case RG_QV_TRUE: n->type = cJSON_True; return 1;
    case RG_QV_NUM: n->type = cJSON_Number; n->valuedouble = v->d; return 1;
    case RG_QV_STR:
      n->type = cJSON_String;
      n->valuestring = (char *)mutf8(P->mem, v->s, v->n);
      return n->valuestring != NULL;
    default: return 0;
  }
}

/* The logical partition that the WHERE's equalities name, if any. */
static int where_partition (planner *P, rg_ikey *lp) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  int i, k;
  for (i = 0; i < RG_MAX_PK_PATHS; i++) pkv[i] = NULL;
  for (i = 0; i < P->spec->npk; i++) {
    for (k = 0; k < P->nsa; k++)
      if (P->sa[k].kind == SA_EQ && path_is(&P->sa[k].path, &P->spec->pk[i]))
        break;
    if (k == P->nsa || !pk_node(P, &P->sa[k].lo, &nodes[i])) return 0;
    pkv[i] = &nodes[i];
  }
  return rg_ikey_partition(P->spec, pkv, lp, NULL) == 0;
}

static int make_plan (planner *P, const rg_query_req *rq, plan *pl,
                      rg_err *e) {
  const rg_query *q = P->q;
  const sarg *s;
  rg_ikey wlp;
  int i, rc, wrouted;
  if (q->where >= 0) {               /* the conjuncts and their sargs */
    int max = P->q->nex;
    P->conj = (int32_t *)rg_arena_alloc(P->mem, (size_t)max * sizeof(int32_t));
    P->sa = (sarg *)rg_arena_alloc(P->mem, (size_t)max * sizeof(sarg));
    if (P->conj == NULL || P->sa == NULL)
      return rg_fail(e, 500, "out of memory");
    conjuncts(P, q->where, P->conj, &P->nconj, max);
    P->implied = (char *)rg_arena_alloc(P->mem, (size_t)max);
    if (P->implied == NULL) return rg_fail(e, 500, "out of memory");
    memset(P->implied, 0, (size_t)max);
    for (i = 0; i < P->nconj; i++)
      if (classify(P, P->conj[i], &P->sa[P->nsa])) P->sa[P->nsa++].ci = i;
    merge_ranges(P);
  }
  wrouted = where_partition(P, &wlp);
  if (rq->has_pk) {
    if ((rc = rg_ikey_partition(P->spec, rq->pkv, &pl->lp, e))) return rc;
    pl->routed = 1;
    if (wrouted && rq->pk_conflict_msg &&
        (wlp.lplen != pl->lp.lplen ||
         memcmp(wlp.key, pl->lp.key, wlp.lplen) != 0))
      return rg_fail(e, 400, "%s", rq->pk_conflict_msg);
  }
  else if (wrouted) {
    pl->lp = wlp;
    pl->routed = 1;
  }
  if (wrouted && !wlp.lossy && wlp.lplen == pl->lp.lplen &&
      memcmp(wlp.key, pl->lp.key, wlp.lplen) == 0)
    for (i = 0; i < P->spec->npk; i++) {   /* the partition is the answer */
      int k;
      for (k = 0; k < P->nsa; k++) {
        const sarg *sa = &P->sa[k];
        if (sa->kind == SA_EQ && path_is(&sa->path, &P->spec->pk[i])) {
          imply(P, sa);              /* the one where_partition took */
          break;
        }
      }
    }
  pl->mode = q->naggs ? RG_QX_AGG : q->distinct ? RG_QX_DISTINCT
           : q->norder ? RG_QX_SORT : RG_QX_STREAM;
  pl->tie_desc = q->norder && q->order[0].desc;
  if (P->host == 2) {                /* the host feeds every item */
    pl->src = SRC_SCAN;
    return 0;
  }
  if (q->norder && !q->naggs && !P->host) {
    if ((rc = plan_composite(P, pl, pl->routed, e)) < 0) return e->status;
    if (rc == 0 && !pl->routed) {
      if (best_sarg(P, 1, 0) == NULL &&
          (rc = plan_order(P, pl, e)) < 0)
        return e->status;
    }
    if (rc == 1) {
      if (pl->mode == RG_QX_SORT) pl->mode = RG_QX_STREAM;
      return 0;
    }
  }
  if ((s = best_sarg(P, 0, pl->routed)) != NULL) {
    if (s->kind == SA_EQ || s->kind == SA_IN) return plan_terms(P, pl, s, e);
    return plan_range(P, pl, s, e);
  }
  pl->src = SRC_SCAN;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Sources
** ======================================================================
*/
static int mdb_fail (source *S, int rc) {
  return rg_fail_mdb(S->e, rc, "query");
}

/* Feeds the item at `ikey` (value `val`, or read when NULL).  Returns the
** pipeline's answer: 0 more, 1 stop, or a status. */
static int feed (source *S, const uint8_t *ikey, size_t iklen, MDB_val *val,
                 const uint8_t *pos, size_t poslen, int phase, int uo,
                 int count, const uint8_t *digest) {
  MDB_val v;
  rg_qdoc d;
  int64_t expiry;
  int rc;
  if (iklen < 12) return 0;
  if (S->pl->routed && (iklen < S->pl->lp.lplen ||
                        memcmp(ikey, S->pl->lp.key, S->pl->lp.lplen) != 0))
    return 0;                        /* another partition */
  if (val == NULL) {
    MDB_val k;
    k.mv_data = (void *)ikey;
    k.mv_size = iklen;
    rc = mdb_get(S->txn, S->env->dbi[RG_DB_ITEMS], &k, &v);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return mdb_fail(S, rc);
    val = &v;
  }
  if (count) {
    S->w->loaded++;
    S->w->loaded_bytes += val->mv_size;
  }
  if (val->mv_size < RG_VHDR) return rg_fail(S->e, 500, "corrupt item record");
  expiry = (int64_t)rg_get_u64((const uint8_t *)val->mv_data);
  if (expiry != 0 && expiry <= S->now) return 0;   /* expired: invisible */
  d.text = (const char *)val->mv_data + RG_VHDR;
  d.len = val->mv_size - RG_VHDR;
  d.hash = rg_get_u64(ikey + 4);
  d.digest = digest ? rg_get_u64(digest) : rg_ikey_digest(ikey, iklen);
  d.pos = pos;
  d.poslen = poslen;
  d.phase = phase;
  d.unordered_only = uo;
  return rg_qexec_doc(S->x, &d, S->e);
}

static int starts (const MDB_val *k, const uint8_t *p, size_t n) {
  return k->mv_size >= n && memcmp(k->mv_data, p, n) == 0;
}

/* Positions `cur` on the last key <= key (inclusive) or < key; returns
** an LMDB code (MDB_NOTFOUND when there is none). */
static int seek_back (MDB_cursor *cur, const uint8_t *key, size_t n,
                      int inclusive, MDB_val *k, MDB_val *v) {
  int rc;
  k->mv_data = (void *)key;
  k->mv_size = n;
  rc = mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
  if (rc == 0) {
    if (inclusive && k->mv_size == n && memcmp(k->mv_data, key, n) == 0)
      return 0;
    return mdb_cursor_get(cur, k, v, MDB_PREV);
  }
  if (rc != MDB_NOTFOUND) return rc;
  return mdb_cursor_get(cur, k, v, MDB_LAST);
}

/* The smallest byte string greater than every key starting with p. */
static size_t after_prefix (const uint8_t *p, size_t n, uint8_t *out) {
  memcpy(out, p, n);
  while (n > 0 && out[n - 1] == 0xFF) n--;
  if (n > 0) out[n - 1]++;
  return n;
}

/* Scans the items under `prefix`, forwards or backwards, from `from`
** (inclusive) when given. */
static int scan_items (source *S, const uint8_t *prefix, size_t plen,
                       int back, int phase, int uo) {
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t bound[RG_MAX_KEY + 1];
  int rc, r = 0;
  int resume = S->resumed && S->rphase == phase;
  if ((rc = mdb_cursor_open(S->txn, S->env->dbi[RG_DB_ITEMS], &cur)))
    return mdb_fail(S, rc);
  if (!back) {
    k.mv_data = (void *)(resume ? S->rpos : prefix);
    k.mv_size = resume ? S->rposlen : plen;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  }
  else if (resume) rc = seek_back(cur, S->rpos, S->rposlen, 1, &k, &v);
  else {
    size_t bn = after_prefix(prefix, plen, bound);
    rc = bn ? seek_back(cur, bound, bn, 0, &k, &v)
            : mdb_cursor_get(cur, &k, &v, MDB_LAST);
  }
  while (rc == 0 && starts(&k, prefix, plen)) {
    r = feed(S, (const uint8_t *)k.mv_data, k.mv_size, &v,
             (const uint8_t *)k.mv_data, k.mv_size, phase, uo, 1, NULL);
    if (r) break;
    rc = mdb_cursor_get(cur, &k, &v, back ? MDB_PREV : MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (r < 0 || r > 1) return r;
  if (rc && rc != MDB_NOTFOUND) return mdb_fail(S, rc);
  return r;
}

/* One seek per term (and per partition hash when routed). */
static int src_terms (source *S) {
  const plan *pl = S->pl;
  MDB_cursor *cur;
  size_t i;
  int rc = 0, r = 0;
  if ((rc = mdb_cursor_open(S->txn, S->env->dbi[RG_DB_INDEX], &cur)))
    return mdb_fail(S, rc);
  for (i = S->resumed ? (size_t)S->rphase : 0; i < pl->nterms && !r; i++) {
    uint8_t key[RG_MAX_KEY + 16];
    size_t n = 12 + pl->tlen[i];
    MDB_val k, v;
    if (n + 8 > sizeof(key)) continue;
    memcpy(key, pl->prefix, 12);
    memcpy(key + 12, pl->terms.p + pl->toff[i], pl->tlen[i]);
    if (pl->routed) { rg_put_u64(key + n, pl->lp.hash); n += 8; }
    S->w->lookups++;
    if (S->resumed && (size_t)S->rphase == i) {
      k.mv_data = (void *)S->rpos;
      k.mv_size = S->rposlen;
    }
    else {
      k.mv_data = key;
      k.mv_size = n;
    }
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && starts(&k, key, n) &&
           k.mv_size == 12 + pl->tlen[i] + 16) {
      r = feed(S, (const uint8_t *)v.mv_data, v.mv_size, NULL,
               (const uint8_t *)k.mv_data, k.mv_size, (int)i, 0, 1,
               (const uint8_t *)k.mv_data + k.mv_size - 8);
      if (r) break;
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    if (rc && rc != MDB_NOTFOUND) { r = mdb_fail(S, rc); break; }
  }
  mdb_cursor_close(cur);
  return r;
}

/* Length of the term at p (n bytes left), 0 if malformed; *cut when it is
** a string cut to the length limit. */
static size_t term_len (const uint8_t *p, size_t n, int desc, int *cut) {
  uint8_t m = desc ? 0xFF : 0x00, t;
  size_t i;
  *cut = 0;
  if (n == 0) return 0;
  t = p[0] ^ m;
  if (t >= 0x05 && t <= 0x07) return 1;
  if (t == 0x08) return n >= 9 ? 9 : 0;
  if (t != 0x09) return 0;
  for (i = 1; i + 1 < n; i++) {
    if ((p[i] ^ m) != 0) continue;
    switch (p[i + 1] ^ m) {
      case 0xFF: i++; continue;
      case 0x01: return i + 2;
      case 0x02: *cut = 1; return i + 2;
      default: return 0;
    }
  }
  return 0;
}

/* Where a run of entries that must be sorted on full values ends in an
** entry key: after the first cut term among the ORDER BY columns (0 when
** there is none). */
static size_t group_len (const plan *pl, const uint8_t *key, size_t n) {
  size_t off = 12;
  int col;
  if (!pl->ordered || n < 12 + 16) return 0;
  for (col = 0; col < pl->ncols; col++) {
    int cut;
    size_t len = term_len(key + off, n - 16 - off, pl->coldesc[col], &cut);
    if (len == 0) return 0;
    off += len;
    if (cut && col >= pl->gcol0 && col < pl->gcol0 + pl->gcols) return off;
  }
  return 0;
}

typedef struct gitem {                /* an entry of a cut group */
  uint8_t *okey, *ekey, *ikey;
  size_t oklen, eklen, iklen;
} gitem;

static int gitem_cmp (const void *a, const void *b) {
  const gitem *x = (const gitem *)a, *y = (const gitem *)b;
  int c = memcmp(x->okey, y->okey, x->oklen < y->oklen ? x->oklen : y->oklen);
  if (c) return c;
  return x->oklen < y->oklen ? -1 : x->oklen > y->oklen;
}

/* Loads, sorts on full values and feeds a run of entries sharing the
** first `g` bytes; the cursor is left on the first entry after the run. */
static int feed_group (source *S, MDB_cursor *cur, MDB_val *k, MDB_val *v,
                       size_t g, int *rcp, int phase) {
  const plan *pl = S->pl;
  gitem *items = NULL;
  size_t n = 0, cap = 0, i;
  uint8_t gp[RG_MAX_KEY];
  int rc = 0, r = 0;
  memcpy(gp, k->mv_data, g);
  while (*rcp == 0 && starts(k, gp, g)) {
    gitem *it;
    MDB_val iv, ik;
    rg_qdoc d;
    if (n == cap) {
      gitem *ni;
      cap = cap ? cap * 2 : 16;
      if ((ni = (gitem *)realloc(items, cap * sizeof(gitem))) == NULL) {
        r = rg_fail(S->e, 500, "out of memory");
        goto done;
      }
      items = ni;
    }
    it = &items[n];
    memset(it, 0, sizeof(*it));
    ik = *v;
    if (!(pl->routed && (ik.mv_size < pl->lp.lplen ||
                         memcmp(ik.mv_data, pl->lp.key, pl->lp.lplen) != 0)) &&
        (rc = mdb_get(S->txn, S->env->dbi[RG_DB_ITEMS], &ik, &iv)) == 0 &&
        iv.mv_size >= RG_VHDR) {
      int64_t expiry = (int64_t)rg_get_u64((const uint8_t *)iv.mv_data);
      S->w->loaded++;
      S->w->loaded_bytes += iv.mv_size;
      if (expiry == 0 || expiry > S->now) {
        d.text = (const char *)iv.mv_data + RG_VHDR;
        d.len = iv.mv_size - RG_VHDR;
        d.hash = rg_get_u64((const uint8_t *)ik.mv_data + 4);
        d.digest = rg_get_u64((const uint8_t *)k->mv_data + k->mv_size - 8);
        d.pos = NULL;
        d.poslen = 0;
        d.phase = phase;
        d.unordered_only = 0;
        if ((r = rg_qexec_okey(S->x, &d, &S->okey, S->e))) goto done;
        it->oklen = S->okey.n;
        it->eklen = k->mv_size;
        it->iklen = ik.mv_size;
        if ((it->okey = (uint8_t *)malloc(it->oklen + it->eklen +
                                          it->iklen + 1)) == NULL) {
          r = rg_fail(S->e, 500, "out of memory");
          goto done;
        }
        it->ekey = it->okey + it->oklen;
        it->ikey = it->ekey + it->eklen;
        memcpy(it->okey, S->okey.p, it->oklen);
        memcpy(it->ekey, k->mv_data, it->eklen);
        memcpy(it->ikey, ik.mv_data, it->iklen);
        n++;
      }
    }
    else if (rc && rc != MDB_NOTFOUND) { r = mdb_fail(S, rc); goto done; }
    *rcp = mdb_cursor_get(cur, k, v, pl->desc ? MDB_PREV : MDB_NEXT);
  }
  if (n > 1) qsort(items, n, sizeof(gitem), gitem_cmp);
  for (i = 0; i < n && !r; i++) {
    gitem *it = &items[i];
    if (S->resumed && S->rphase == phase) {   /* skip what came before */
      size_t m = it->oklen < S->roklen ? it->oklen : S->roklen;
      int c = memcmp(it->okey, S->rokey, m);
      if (c < 0 || (c == 0 && it->oklen > S->roklen)) continue;
    }
    r = feed(S, it->ikey, it->iklen, NULL, it->ekey, it->eklen, phase, 0, 0,
             it->ekey + it->eklen - 8);
  }
done:
  for (i = 0; i < n; i++) free(items[i].okey);
  free(items);
  return r;
}

/* Is the term part of entry key k beyond the range's far end? */
static int past_end (const plan *pl, const MDB_val *k) {
  const uint8_t *t = (const uint8_t *)k->mv_data + 12;
  size_t tn = k->mv_size - 12 - 16;
  const rg_buf *b = pl->desc ? &pl->lo : &pl->hi;
  int has = pl->desc ? pl->has_lo : pl->has_hi;
  int ex = pl->desc ? pl->lo_ex : pl->hi_ex;
  int c;
  if (!has) return 0;
  c = memcmp(t, b->p, tn < b->n ? tn : b->n);
  if (c == 0) c = tn < b->n ? -1 : tn > b->n;
  if (pl->desc) c = -c;
  return ex ? c >= 0 : c > 0;
}

/* Is entry k the excluded near end of the range? */
static int at_excluded_start (const plan *pl, const MDB_val *k) {
  const rg_buf *b = pl->desc ? &pl->hi : &pl->lo;
  int ex = pl->desc ? pl->hi_ex : pl->lo_ex;
  return ex && k->mv_size - 28 == b->n &&
         memcmp((const uint8_t *)k->mv_data + 12, b->p, b->n) == 0;
}

static int src_range (source *S, int phase) {
  const plan *pl = S->pl;
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t pre[RG_MAX_KEY + 1], key[RG_MAX_KEY + 32];
  size_t pn = 12 + pl->tpre.n, n;
  int rc, r = 0;
  int resume = S->resumed && S->rphase == phase && S->rposlen >= pn;
  if (pn > RG_MAX_KEY) return 0;
  memcpy(pre, pl->prefix, 12);
  if (pl->tpre.n) memcpy(pre + 12, pl->tpre.p, pl->tpre.n);
  if ((rc = mdb_cursor_open(S->txn, S->env->dbi[RG_DB_INDEX], &cur)))
    return mdb_fail(S, rc);
  S->w->lookups++;
  if (resume) {
    size_t g = group_len(pl, S->rpos, S->rposlen);
    if (g && !pl->desc) {            /* back to the start of the run */
      k.mv_data = (void *)S->rpos;
      k.mv_size = g;
      rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    }
    else if (g) {
      size_t bn = after_prefix(S->rpos, g, key);
      rc = bn ? seek_back(cur, key, bn, 0, &k, &v)
              : mdb_cursor_get(cur, &k, &v, MDB_LAST);
    }
    else if (!pl->desc) {
      k.mv_data = (void *)S->rpos;
      k.mv_size = S->rposlen;
      rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    }
    else rc = seek_back(cur, S->rpos, S->rposlen, 1, &k, &v);
  }
  else if (!pl->desc) {
    const rg_buf *lo = pl->has_lo ? &pl->lo : &pl->tpre;
    memcpy(key, pl->prefix, 12);
    if (lo->n) memcpy(key + 12, lo->p, lo->n);
    k.mv_data = key;
    k.mv_size = 12 + lo->n;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  }
  else {
    memcpy(key, pl->prefix, 12);
    if (pl->has_hi) {                /* after every entry of the term */
      memcpy(key + 12, pl->hi.p, pl->hi.n);
      n = 12 + pl->hi.n;
      if (!pl->hi_ex) { memset(key + n, 0xFF, 17); n += 17; }
      rc = seek_back(cur, key, n, 0, &k, &v);
    }
    else {
      n = after_prefix(pre, pn, key);
      rc = n ? seek_back(cur, key, n, 0, &k, &v)
             : mdb_cursor_get(cur, &k, &v, MDB_LAST);
    }
  }
  while (rc == 0 && starts(&k, pre, pn) && k.mv_size >= 12 + 16 + 1) {
    size_t g;
    if (past_end(pl, &k)) break;
    if (at_excluded_start(pl, &k) ||
        (pl->routed && rg_get_u64((const uint8_t *)k.mv_data + k.mv_size - 16)
                       != pl->lp.hash)) {
      rc = mdb_cursor_get(cur, &k, &v, pl->desc ? MDB_PREV : MDB_NEXT);
      continue;
    }
    if ((g = group_len(pl, (const uint8_t *)k.mv_data, k.mv_size)) != 0) {
      r = feed_group(S, cur, &k, &v, g, &rc, phase);
      if (r) break;
      continue;
    }
    r = feed(S, (const uint8_t *)v.mv_data, v.mv_size, NULL,
             (const uint8_t *)k.mv_data, k.mv_size, phase, 0, 1,
             (const uint8_t *)k.mv_data + k.mv_size - 8);
    if (r) break;
    rc = mdb_cursor_get(cur, &k, &v, pl->desc ? MDB_PREV : MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (r) return r;
  if (rc && rc != MDB_NOTFOUND) return mdb_fail(S, rc);
  return 0;
}

static int run (source *S) {
  const plan *pl = S->pl;
  uint8_t cid[4];
  int r = 0;
  memcpy(cid, pl->prefix, 4);
  switch (pl->src) {
    case SRC_SCAN:
      if (pl->routed) return scan_items(S, pl->lp.key, pl->lp.lplen, 0, 0, 0);
      return scan_items(S, cid, 4, 0, 0, 0);
    case SRC_TERMS: return src_terms(S);
    default:
      if (pl->uphase == 1) {         /* without the path first, then ... */
        if (!(S->resumed && S->rphase == 1))
          r = scan_items(S, cid, 4, 0, 0, 1);
        return r ? r : src_range(S, 1);
      }
      if (!(pl->uphase == 2 && S->resumed && S->rphase == 1))
        r = src_range(S, 0);
      if (r == 0 && pl->uphase == 2) r = scan_items(S, cid, 4, 1, 1, 1);
      return r;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** The entry point
** ======================================================================
*/
typedef struct qstate {
  rg_query *q;
  rg_tape ptape;
  rg_arena mem;
  rg_buf ptext, tok;
  rg_qexec *x;
  plan pl;
} qstate;

static void qstate_free (qstate *st) {
  rg_qexec_free(st->x);              /* it refers to the query */
  rg_query_free(st->q);
  rg_tape_free(&st->ptape);
  rg_arena_free(&st->mem);
  rg_buf_free(&st->ptext);
  rg_buf_free(&st->tok);
  rg_buf_free(&st->pl.terms);
  rg_buf_free(&st->pl.tpre);
  rg_buf_free(&st->pl.lo);
  rg_buf_free(&st->pl.hi);
}

uint64_t rg_query_token_context (const rg_cspec *spec,
                                 const rg_query_req *rq, const char *ptext,
                                 size_t plen, const rg_ikey *lp) {
  rg_buf b;
  uint8_t cid[4];
  uint64_t h;
  rg_buf_init(&b);
  rg_put_u32(cid, spec->cid);
  rg_buf_add(&b, cid, 4);
  rg_buf_add(&b, spec->json, strlen(spec->json) + 1);
  rg_buf_add(&b, rq->sql, rq->sqllen);
  rg_buf_addc(&b, 0);
  rg_buf_add(&b, ptext, plen);
  rg_buf_addc(&b, 0);
  if (rq->has_pk) rg_buf_add(&b, lp->key, lp->lplen);
  h = rg_hash(b.p ? b.p : "", b.n);
  rg_buf_free(&b);
  return h;
}

int rg_query_exec (MDB_txn *txn, const rg_cont *c, int64_t now,
                   const rg_query_req *rq, rg_query_res *r, rg_err *e) {
  qstate st;
  planner P;
  source S;
  rg_qv *params = NULL;
  uint64_t ctx;
  int rc;
  memset(r, 0, sizeof(*r));
  rg_buf_init(&r->rows);
  rg_buf_init(&r->continuation);
  rg_buf_init(&r->offsets);
  memset(&st, 0, sizeof(st));
  rg_arena_init(&st.mem);
  rg_buf_init(&st.ptext);
  rg_buf_init(&st.tok);
  rg_buf_init(&st.pl.terms);
  rg_buf_init(&st.pl.tpre);
  rg_buf_init(&st.pl.lo);
  rg_buf_init(&st.pl.hi);
  if (rq->max_items < 0) {
    rc = rg_fail(e, 400, "max_items must be positive");
    goto done;
  }
  if ((rc = rg_query_parse(rq->sql, rq->sqllen, 0, &st.q, e))) goto done;
  if (rq->params) {
    if (!cJSON_IsObject(rq->params)) {
      rc = rg_fail(e, 400, "params must be a table of {name = value}");
      goto done;
    }
    rg_json_print(rq->params, &st.ptext);
    if (st.ptext.oom) { rc = rg_fail(e, 500, "out of memory"); goto done; }
  }
  if ((rc = rg_query_bind(st.q, rq->params ? st.ptext.p : NULL, st.ptext.n,
                          &st.ptape, &st.mem, &params, e)))
    goto done;
  if ((rc = rg_cont_alive(txn, c, e))) goto done;
  memset(&P, 0, sizeof(P));
  P.q = st.q;
  P.spec = c->spec;
  P.params = params;
  P.mem = &st.mem;
  set_prefix(&st.pl, c->spec->cid, 0);
  if ((rc = make_plan(&P, rq, &st.pl, e))) goto done;
  if (rq->admit &&
      (rc = rq->admit(rq->admit_ud, st.pl.routed, st.pl.lp.hash, e)))
    goto done;
  ctx = rg_query_token_context(c->spec, rq, st.ptext.p, st.ptext.n,
                               &st.pl.lp);
  if (rq->continuation) {
    if ((rc = rg_token_open(c->env->secret, RG_TOKEN_QUERY, ctx,
                            rq->continuation,
                            rq->contlen, &st.tok, e)))
      goto done;
  }
  if ((rc = rg_qexec_new(&st.x, st.q, params, st.pl.mode, st.pl.tie_desc,
                         rq->max_items,
                         rq->continuation ? (const uint8_t *)st.tok.p : NULL,
                         st.tok.n, e)))
    goto done;
  rg_qexec_limits(st.x, rq->max_rows, rq->max_bytes);
  if (st.q->where >= 0) {           /* test only what the source does not
                                       guarantee */
    int32_t *conds = (int32_t *)rg_arena_alloc(&st.mem, (size_t)(P.nconj + 1) *
                                               sizeof(int32_t));
    int i, n = 0;
    if (conds == NULL) { rc = rg_fail(e, 500, "out of memory"); goto done; }
    for (i = 0; i < P.nconj; i++)
      if (!P.implied[i]) conds[n++] = P.conj[i];
    rg_qexec_conds(st.x, conds, n);
  }
  memset(&S, 0, sizeof(S));
  S.txn = txn;
  S.env = c->env;
  S.pl = &st.pl;
  S.x = st.x;
  S.w = &r->work;
  S.now = now;
  S.e = e;
  rg_buf_init(&S.okey);
  S.resumed = rg_qexec_resume(st.x, &S.rphase, &S.rpos, &S.rposlen,
                              &S.rokey, &S.roklen);
  if (S.resumed && st.pl.src == SRC_TERMS && (size_t)S.rphase >= st.pl.nterms)
    rc = rg_fail(e, 400, "invalid continuation token (altered, truncated, "
                 "or made for another query or database)");
  else rc = run(&S);
  rg_buf_free(&S.okey);
  if (rc < 0 || rc > 1) goto done;
  st.tok.n = 0;
  if ((rc = rg_qexec_finish(st.x, &r->rows, &r->offsets, &r->count, &st.tok,
                            e)))
    goto done;
  if (st.tok.n) {
    rg_token_make(c->env->secret, RG_TOKEN_QUERY, ctx, st.tok.p, st.tok.n,
                  &r->continuation);
    if (r->continuation.oom) {
      rc = rg_fail(e, 500, "out of memory");
      goto done;
    }
  }
  r->work.partitions = st.pl.routed ? 1 : (uint64_t)c->spec->nparts;
  r->cross_partition = !st.pl.routed;
done:
  if (st.x) r->made = rg_qexec_made(st.x);
  qstate_free(&st);
  return rc;
}
/* }===================================================================== */

void rg_query_res_free (rg_query_res *r) {
  rg_buf_free(&r->rows);
  rg_buf_free(&r->continuation);
  rg_buf_free(&r->offsets);
}


/*
** {=====================================================================
** Plans for a host that reads storage itself (cluster mode)
** ======================================================================
*/
static const uint8_t *arena_copy (rg_arena *a, const rg_buf *b) {
  uint8_t *p = (uint8_t *)rg_arena_alloc(a, b->n + 1);
  if (p && b->n) memcpy(p, b->p, b->n);
  return p;
}

int rg_query_hplan (const rg_query *q, const rg_qv *params,
                    const rg_cspec *spec, const rg_query_req *rq, int scan,
                    rg_arena *mem, rg_hplan *out, rg_err *e) {
  planner P;
  plan pl;
  int rc, i;
  memset(out, 0, sizeof(*out));
  memset(&P, 0, sizeof(P));
  memset(&pl, 0, sizeof(pl));
  rg_buf_init(&pl.terms);
  rg_buf_init(&pl.tpre);
  rg_buf_init(&pl.lo);
  rg_buf_init(&pl.hi);
  P.q = q;
  P.spec = spec;
  P.params = params;
  P.mem = mem;
  P.host = scan ? 2 : 1;
  set_prefix(&pl, spec->cid, 0);
  if ((rc = make_plan(&P, rq, &pl, e))) goto done;
  out->routed = pl.routed;
  out->lp = pl.lp;
  out->src = pl.src == SRC_TERMS ? RG_HSRC_TERMS :
             pl.src == SRC_RANGE ? RG_HSRC_RANGE : RG_HSRC_SCAN;
  out->index_id = rg_get_u64(pl.prefix + 4);
  out->mode = pl.mode;
  out->tie_desc = pl.tie_desc;
  if (pl.src == SRC_TERMS) {
    const uint8_t *all = arena_copy(mem, &pl.terms);
    out->term = (const uint8_t **)rg_arena_alloc(mem, (pl.nterms + 1) *
                                                 sizeof(uint8_t *));
    out->tlen = pl.tlen;
    if (all == NULL || out->term == NULL) {
      rc = rg_fail(e, 500, "out of memory");
      goto done;
    }
    for (i = 0; i < (int)pl.nterms; i++) out->term[i] = all + pl.toff[i];
    out->nterms = (int)pl.nterms;
  }
  else if (pl.src == SRC_RANGE) {
    out->tpre = arena_copy(mem, &pl.tpre);
    out->lo = arena_copy(mem, &pl.lo);
    out->hi = arena_copy(mem, &pl.hi);
    if (!out->tpre || !out->lo || !out->hi) {
      rc = rg_fail(e, 500, "out of memory");
      goto done;
    }
    out->tpre_n = pl.tpre.n;
    out->lo_n = pl.lo.n;
    out->hi_n = pl.hi.n;
    out->has_lo = pl.has_lo;
    out->has_hi = pl.has_hi;
    out->lo_ex = pl.lo_ex;
    out->hi_ex = pl.hi_ex;
  }
  if (q->where >= 0) {               /* what the source does not imply */
    int32_t *conds = (int32_t *)rg_arena_alloc(mem, (size_t)(P.nconj + 1) *
                                               sizeof(int32_t));
    if (conds == NULL) { rc = rg_fail(e, 500, "out of memory"); goto done; }
    for (i = 0; i < P.nconj; i++)
      if (!P.implied[i]) conds[out->nconds++] = P.conj[i];
    out->conds = conds;
    out->has_conds = 1;
  }
done:
  rg_buf_free(&pl.terms);
  rg_buf_free(&pl.tpre);
  rg_buf_free(&pl.lo);
  rg_buf_free(&pl.hi);
  return rc;
}
/* }===================================================================== */
