/*
** vector.c: VectorDistance in the dialect: its arguments and options, its
** value, and the direction of ORDER BY VectorDistance (sql.h, "rg_qvd").
**
** VectorDistance(v1, v2 [, brute_force [, options]]) is the similarity of
** two vectors (base/vec.h): cosine, dot product or euclidean distance over
** elements of type float32, float16, int8 or uint8.  Which similarity and
** type: the options' distanceFunction and dataType; else the container's
** vector policy for the path of v1 (the planner fills that in); else
** cosine and float32, Cosmos DB's defaults.  As with every function, an
** argument that is no vector of that type (not an array of numbers the
** type holds, or of another length than the other, or empty) gives
** undefined, never an error.  The third argument (true: never use a
** vector index) and the options (distanceFunction, dataType,
** searchListSizeMultiplier and quantizedVectorListMultiplier 1-100,
** filterPriority 0-1) must be literals or parameters, and bad ones are
** 400: they choose the plan, which must not change from row to row.
**
** A query vector given as a literal array or a parameter is converted
** once per pipeline (the context's cache), not once per row.
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "sql/sql_int.h"

#define MAX_MULT 100

/* The converted constant arguments of each call of one pipeline. */
struct rg_qvcache {
  int n;
  struct vconst {
    int state;               /* 0 not tried, 1 a vector, -1 none */
    size_t len;
    void *buf;
    double norm2;
  } *c;                      /* 2 per call: v1, v2 */
};

void rg_qvcache_free (struct rg_qvcache *c) {
  int i;
  if (c == NULL) return;
  for (i = 0; i < 2 * c->n; i++) free(c->c[i].buf);
  free(c->c);
  free(c);
}


/*
** {=====================================================================
** Options
** ======================================================================
*/
static int name_is (const char *s, size_t n, const char *name) {
  size_t i;
  if (strlen(name) != n) return 0;
  for (i = 0; i < n; i++) {
    int a = (unsigned char)s[i], b = (unsigned char)name[i];
    if (a >= 'A' && a <= 'Z') a += 'a' - 'A';
    if (b >= 'A' && b <= 'Z') b += 'a' - 'A';
    if (a != b) return 0;
  }
  return 1;
}

/* One option (name, value) into vd: 0, or 400 with the message. */
static int set_option (rg_qvd *vd, const char *name, size_t nlen,
                       const rg_qv *v, char *msg, size_t size) {
  int m = (int)(nlen > 40 ? 40 : nlen);
  if (name_is(name, nlen, "distanceFunction")) {
    int d = v->t == RG_QV_STR ? rg_vdist_parse(v->s, v->n) : -1;
    if (d < 0) {
      snprintf(msg, size, "VectorDistance: distanceFunction must be "
               "'cosine', 'dotproduct' or 'euclidean'");
      return 400;
    }
    vd->dist = d;
    vd->dist_given = 1;
  } else if (name_is(name, nlen, "dataType")) {
    int t = v->t == RG_QV_STR ? rg_vtype_parse(v->s, v->n) : -1;
    if (t < 0) {
      snprintf(msg, size, "VectorDistance: dataType must be 'float32', "
               "'float16', 'int8' or 'uint8'");
      return 400;
    }
    vd->dtype = t;
    vd->dtype_given = 1;
  } else if (name_is(name, nlen, "searchListSizeMultiplier") ||
             name_is(name, nlen, "quantizedVectorListMultiplier")) {
    int search = name_is(name, nlen, "searchListSizeMultiplier");
    if (v->t != RG_QV_NUM || v->d != floor(v->d) || v->d < 1 ||
        v->d > MAX_MULT) {
      snprintf(msg, size, "VectorDistance: %s must be an integer from 1 to "
               "%d", search ? "searchListSizeMultiplier"
                            : "quantizedVectorListMultiplier", MAX_MULT);
      return 400;
    }
    if (search) vd->search_mult = (int)v->d;
    else vd->quant_mult = (int)v->d;
  } else if (name_is(name, nlen, "filterPriority")) {
    if (v->t != RG_QV_NUM || !(v->d >= 0 && v->d <= 1)) {
      snprintf(msg, size, "VectorDistance: filterPriority must be a number "
               "from 0 to 1");
      return 400;
    }
    vd->filter_priority = v->d;
  } else {
    snprintf(msg, size, "VectorDistance: unknown option '%.*s' (options: "
             "distanceFunction, dataType, searchListSizeMultiplier, "
             "quantizedVectorListMultiplier, filterPriority)", m, name);
    return 400;
  }
  return 0;
}

/* The value of a literal (a negated number literal included): 0 or -1. */
static int literal_value (const rg_query *q, int32_t e, rg_qv *out) {
  const rg_qexpr *ex = &q->ex[e];
  if (ex->k == RG_QE_LIT) { *out = ex->v; return 0; }
  if (ex->k == RG_QE_UNARY && ex->op == RG_QO_NEG &&
      q->ex[ex->a].k == RG_QE_LIT && q->ex[ex->a].v.t == RG_QV_NUM) {
    *out = q->ex[ex->a].v;
    out->d = -out->d;
    return 0;
  }
  return -1;
}

/* Options from an object value (a bound parameter). */
static int options_of_value (rg_qvd *vd, const rg_qv *v, char *msg,
                             size_t size) {
  const rg_qnode *c;
  uint32_t i;
  int rc;
  if (v->t != RG_QV_OBJ) {
    snprintf(msg, size, "VectorDistance: the options must be an object");
    return 400;
  }
  for (i = 0, c = v->node + 1; i < v->node->n; i++, c += c->size) {
    rg_qv m;
    rg_qv_of_node(&m, c);
    if ((rc = set_option(vd, c->key, c->klen, &m, msg, size))) return rc;
  }
  return 0;
}

int rg_qvd_check (rg_query *q, int32_t call, uint32_t *pos, char *msg,
                  size_t size) {
  const rg_qexpr *ex = &q->ex[call];
  const int32_t *args = rg_qargs(q, ex);
  rg_qvd *vd;
  int rc;
  if (q->nvd == q->capvd) {
    int cap = q->capvd ? 2 * q->capvd : 4;
    rg_qvd *nv = (rg_qvd *)realloc(q->vd, (size_t)cap * sizeof(rg_qvd));
    if (nv == NULL) { snprintf(msg, size, "out of memory"); return 500; }
    q->vd = nv;
    q->capvd = cap;
  }
  vd = &q->vd[q->nvd];
  memset(vd, 0, sizeof(*vd));
  vd->call = call;
  vd->dist = RG_VD_COSINE;
  vd->dtype = RG_VT_FLOAT32;
  vd->filter_priority = -1;
  vd->bool_arg = vd->opt_arg = -1;
  vd->blk = -1;
  *pos = ex->pos;
  if (ex->nlist >= 3) {
    const rg_qexpr *b = &q->ex[args[2]];
    *pos = b->pos;
    if (b->k == RG_QE_PARAM) vd->bool_arg = args[2];
    else if (b->k == RG_QE_LIT &&
             (b->v.t == RG_QV_TRUE || b->v.t == RG_QV_FALSE))
      vd->brute = b->v.t == RG_QV_TRUE;
    else {
      snprintf(msg, size, "VectorDistance's third argument (brute force) "
               "must be true or false");
      return 400;
    }
  }
  if (ex->nlist == 4) {
    const rg_qexpr *o = &q->ex[args[3]];
    int i;
    *pos = o->pos;
    if (o->k == RG_QE_PARAM) vd->opt_arg = args[3];
    else if (o->k != RG_QE_OBJECT) {
      snprintf(msg, size, "VectorDistance's fourth argument must be an "
               "object of options, such as {'distanceFunction': "
               "'euclidean'}");
      return 400;
    } else
      for (i = 0; i < o->nlist; i++) {
        const rg_qexpr *m = &q->ex[q->list[o->list + i]];
        rg_qv v;
        *pos = m->pos;
        if (literal_value(q, m->a, &v)) {
          snprintf(msg, size, "VectorDistance: option '%.*s' must be a "
                   "literal", (int)(m->n > 40 ? 40 : m->n), m->s);
          return 400;
        }
        if ((rc = set_option(vd, m->s, m->n, &v, msg, size))) return rc;
      }
  }
  q->ex[call].slot = q->nvd++;
  return 0;
}

int rg_query_vectors (rg_query *q, const rg_qv *params, rg_err *e) {
  int i;
  char msg[256];
  for (i = 0; i < q->nvd; i++) {
    rg_qvd *vd = &q->vd[i];
    if (vd->bool_arg >= 0) {
      const rg_qexpr *p = &q->ex[vd->bool_arg];
      const rg_qv *v = params ? &params[p->slot] : NULL;
      if (v == NULL || (v->t != RG_QV_TRUE && v->t != RG_QV_FALSE))
        return rg_fail(e, 400, "VectorDistance's third argument (brute "
                       "force), parameter @%.*s, must be true or false",
                       (int)(p->n > 40 ? 40 : p->n), p->s);
      vd->brute = v->t == RG_QV_TRUE;
    }
    if (vd->opt_arg >= 0 && !vd->dist_given && !vd->dtype_given &&
        !vd->search_mult && !vd->quant_mult && vd->filter_priority < 0) {
      const rg_qexpr *p = &q->ex[vd->opt_arg];
      rg_qv none;
      rg_qv_undef(&none);
      if (options_of_value(vd, params ? &params[p->slot] : &none, msg,
                           sizeof msg))
        return rg_fail(e, 400, "parameter @%.*s: %s",
                       (int)(p->n > 40 ? 40 : p->n), p->s, msg);
    }
  }
  for (i = 0; i < q->nblk; i++) {      /* every key that is a call, most
                                          similar first (ORDER BY RANK's
                                          too) */
    rg_qblock *b = &q->blk[i];
    int k;
    for (k = 0; k < b->norder; k++) {
      const rg_qexpr *ex = &q->ex[b->order[k].expr];
      if (ex->k == RG_QE_CALL && ex->op == RG_QF_VECTORDISTANCE &&
          ex->slot >= 0)
        b->order[k].desc = rg_vdist_higher(q->vd[ex->slot].dist);
    }
  }
  q->vd_bound = 1;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Evaluation
** ======================================================================
*/
/* The elements of an array value as a vector of type t (float32 elements
** for both float types) in `buf` (room for node->n elements of 4 bytes):
** 0, or -1 when it is not one. */
static int to_vector (const rg_qv *v, int t, void *buf) {
  const rg_qnode *c;
  uint32_t i;
  if (v->t != RG_QV_ARR || v->node->n == 0) return -1;
  for (i = 0, c = v->node + 1; i < v->node->n; i++, c += c->size) {
    if (c->t != RG_QV_NUM) return -1;
    if (t == RG_VT_FLOAT16) {
      uint16_t h;
      if (rg_vput(RG_VT_FLOAT16, &h, 0, c->d)) return -1;
      ((float *)buf)[i] = rg_half_to_float(h);
    } else if (rg_vput(t, buf, i, c->d)) return -1;
  }
  return 0;
}

/* Is the expression the same value for every row (a parameter, or an
** array literal of number literals)? */
static int constant (const rg_query *q, int32_t e) {
  const rg_qexpr *ex = &q->ex[e];
  int i;
  rg_qv v;
  if (ex->k == RG_QE_PARAM) return 1;
  if (ex->k != RG_QE_ARRAY) return 0;
  for (i = 0; i < ex->nlist; i++)
    if (literal_value(q, q->list[ex->list + i], &v)) return 0;
  return 1;
}

/* A constant argument, converted once: its entry, or NULL. */
static struct vconst *cached (rg_qctx *x, const rg_qvd *vd, int k,
                              const rg_qv *v, int kt) {
  struct rg_qvcache *c = x->vcache;
  struct vconst *vc;
  int i = (int)(vd - x->q->vd);
  if (c == NULL) {
    if ((c = (struct rg_qvcache *)calloc(1, sizeof(*c))) == NULL) return NULL;
    c->c = (struct vconst *)calloc(2 * (size_t)x->q->nvd, sizeof(*c->c));
    if (c->c == NULL) { free(c); return NULL; }
    c->n = x->q->nvd;
    x->vcache = c;
  }
  vc = &c->c[2 * i + k];
  if (vc->state == 0) {
    vc->state = -1;
    if (v->t == RG_QV_ARR && v->node->n > 0 &&
        (vc->buf = malloc(4 * (size_t)v->node->n)) != NULL &&
        to_vector(v, vd->dtype, vc->buf) == 0) {
      vc->state = 1;
      vc->len = v->node->n;
      vc->norm2 = rg_vnorm2(kt, vc->buf, vc->len);
    }
  }
  return vc;
}

void rg_qvd_eval (rg_qctx *x, const rg_qexpr *ex, const rg_qv *a, int n,
                  rg_qv *out) {
  const rg_query *q = x->q;
  const rg_qvd *vd = &q->vd[ex->slot];
  const int32_t *args = rg_qargs(q, ex);
  int k, kt = vd->dtype == RG_VT_FLOAT16 ? RG_VT_FLOAT32 : vd->dtype;
  const void *vec[2];
  size_t len[2];
  double norm[2];
  rg_vsums sums;
  double score;
  (void)n;
  for (k = 0; k < 2; k++) {
    norm[k] = -1;
    if (constant(q, args[k])) {
      struct vconst *vc = cached(x, vd, k, &a[k], kt);
      if (vc == NULL) { x->scratch->oom = 1; return; }
      if (vc->state < 0) return;
      vec[k] = vc->buf;
      len[k] = vc->len;
      norm[k] = vc->norm2;
    } else {
      void *buf;
      if (a[k].t != RG_QV_ARR || a[k].node->n == 0) return;
      buf = rg_arena_alloc(x->scratch, 4 * (size_t)a[k].node->n);
      if (buf == NULL || to_vector(&a[k], vd->dtype, buf)) return;
      vec[k] = buf;
      len[k] = a[k].node->n;
    }
  }
  if (len[0] != len[1]) return;
  rg_vsums_of(vd->dist, kt, vec[0], vec[1], len[0], norm[0], norm[1], &sums);
  if (rg_vscore(vd->dist, &sums, &score) == 0) rg_qv_num(out, score);
}
/* }===================================================================== */
