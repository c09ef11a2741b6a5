/*
** exec.c: the row pipeline of the query engine.
**
** A source (store/plan.c's scans and index lookups) feeds documents one
** at a time; this file turns them into one page of results.  It knows
** nothing of storage: it sees JSON text, a (hash, digest) pair that names
** the item, and an opaque position of the source, so that it can be run on
** documents held in memory (the fuzz target does).
**
** Per document: the text is parsed into a tape, the FROM source and the
** JOINs are expanded into rows (the item itself, a value in it, or each
** element of an array or each result of a subquery; the cross product in
** order; a row is numbered by its ordinal within the document), each row's
** WHERE is evaluated, and a row that passes goes to one of five modes:
**
**   STREAM    rows come in the final order (no ORDER BY, or the source
**             reads an index in ORDER BY order): OFFSET skips, TOP/LIMIT
**             and the page size stop the source early;
**   SORT      ORDER BY not served by the source: every row gets an order
**             key and the smallest ones are kept in a bounded heap;
**   AGG       aggregates: accumulators, one result row at the end;
**   GROUP     GROUP BY: accumulators per group (a hash set keyed by the
**             canonical form of the group's values), one row per group,
**             in the order of the groups' values;
**   DISTINCT  every distinct projected value is kept (hash set), ordered
**             by ORDER BY or else by its canonical form.
**
** A document may stand for several identical ones (rg_qdoc.weight: the
** planner feeds one per run of equal index terms when it answers GROUP BY
** or an aggregate from the index), which the accumulators multiply in.  A
** query without FROM makes one row (rg_qexec_once).
**
** Order keys.  A row's order key is the concatenation of the terms of its
** ORDER BY values (rg_qv_term: undefined, arrays and objects lowest, then
** null, false, true, numbers, strings; DESC keys complemented), then the
** item's partition hash and digest and the row's ordinal (complemented
** when ties run descending), so memcmp on keys is a total order.
**
** Resuming (the continuation token's payload; the token itself is made
** and checked by store/plan.c):
**
**   u8 format (1) | u8 mode | u64 results returned so far | u64 OFFSET
**   rows consumed so far | u8 source phase | u32 ordinal | u16 n | n bytes
**   of source position | u16 m | m bytes of order key
**
** STREAM resumes at the source position of the last row consumed (the
** source seeks there; rows of that document up to the ordinal are
** skipped).  SORT resumes after the last order key: the source is read
** again and only greater keys are kept.  DISTINCT and GROUP count: the
** distinct values or the groups are computed again and those already
** returned are skipped.  AGG never needs a token: its one row fits any
** page.
*/

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql_int.h"
#include "sql/text.h"

#define PAYLOAD_FORMAT 1
#define RG_QMAX_FUSE   16            /* RRF's scoring functions */
#define FUSE_KEY        9            /* a number's term: the fused score */

typedef struct hentry {              /* a kept row: key and text */
  char *key;
  size_t klen;
  char *row;
  size_t rlen;
  char *canon;                       /* DISTINCT, GROUP: the canonical value */
  size_t clen;
  uint64_t hash;                     /* DISTINCT, GROUP: hash of canon */
  rg_qagg *aggs;                     /* GROUP: the group's accumulators */
} hentry;

struct rg_qexec {
  const rg_query *q;
  const rg_qblock *m;                /* the query's own block */
  int mode, tie_desc;
  long page;                         /* rows in this page; 0: all */
  int64_t offset, limit;             /* limit -1: none */
  /* where the previous page ended */
  int resumed, rphase;
  uint32_t rord;
  rg_buf rpos, rokey;
  uint64_t emitted, skipped;
  /* this page */
  rg_buf rows, offs;
  size_t count;
  int done, more;
  int have_last, lphase;
  uint32_t lord;
  rg_buf lpos, lokey;
  const char *ltext;                 /* STREAM: the last row's document, */
  size_t llen;                       /* its order key made when needed */
  uint64_t lhash, ldigest;
  int lpending;
  /* the conditions to evaluate (default: the WHERE) */
  const int32_t *conds;
  int nconds, use_conds;
  int fast;                          /* SELECT * streamed, nothing to test */
  /* bounds of the page's work (0: none): documents and rows, bytes */
  uint64_t max_rows, made;
  uint64_t passed;                   /* SORT: rows past the WHERE */
  size_t max_bytes, held;
  int count_only;                    /* COUNT(literal)s, nothing to test */
  int32_t uo_expr;                   /* what unordered_only documents test */
  /* the document and row being processed */
  rg_tape tape;
  rg_arena docmem, scratch;
  rg_qctx ctx;
  const rg_qdoc *doc;
  int resume_doc;
  uint32_t ordinal;
  rg_buf tmp, key, canon;
  int status;
  rg_err *e;
  /* SORT: a max-heap of at most cap entries (cap 0: unbounded) */
  hentry *heap;
  size_t nheap, capheap, bound;
  /* DISTINCT, GROUP: an open-addressing set of nset entries in `heap` */
  size_t *slots, nslots;
  /* AGG, GROUP: the query's aggregate calls */
  int naggs;
  int32_t *aggslot;                  /* their slots in ctx.aggs */
  rg_qagg *aggs;                     /* AGG: the accumulators */
  /* ORDER BY RANK RRF(...): every row is kept with its components' scores
  ** (fscore[row * fuse + i], NAN where it has none), fused at the end */
  int fuse;
  int32_t fcomp[RG_QMAX_FUSE];
  double fw[RG_QMAX_FUSE];
  int fdesc[RG_QMAX_FUSE], fts[RG_QMAX_FUSE];
  double *fscore;
  size_t fcap;
};


/*
** {=====================================================================
** Setting up
** ======================================================================
*/
/* TOP, OFFSET, LIMIT: a non-negative integer, from a literal or a
** parameter. */
static int count_of (const rg_query *q, const rg_qv *params, int32_t i,
                     const char *what, int64_t *out, rg_err *e) {
  const rg_qexpr *ex = &q->ex[i];
  const rg_qv *v = ex->k == RG_QE_PARAM ? &params[ex->slot] : &ex->v;
  if (v->t != RG_QV_NUM || v->d < 0 || v->d > 9007199254740992.0 ||
      (double)(int64_t)v->d != v->d) {
    int line, col;
    rg_query_where(q->sql, ex->pos, &line, &col);
    return rg_fail(e, 400, "%s (at %d:%d) must be a non-negative integer",
                   what, line, col);
  }
  *out = (int64_t)v->d;
  return 0;
}

/* Aggregates that are all COUNT of a defined literal count documents. */
static int counts_only (const rg_qexec *x) {
  int i;
  if (x->mode != RG_QX_AGG || x->m->nsrc != 1 ||
      x->m->src[0].kind != RG_QS_ROOT)
    return 0;
  for (i = 0; i < x->naggs; i++) {
    const rg_qexpr *ex = &x->q->ex[x->aggslot[i]];
    const rg_qexpr *a = &x->q->ex[x->q->list[ex->list]];
    if (ex->op != RG_QF_COUNT || a->k != RG_QE_LIT || a->v.t == RG_QV_UNDEF)
      return 0;
  }
  return 1;
}

static int bad_token (rg_err *e) {
  return rg_fail(e, 400, "invalid continuation token (altered, truncated, "
                 "or made for another query or database)");
}

static int read_payload (rg_qexec *x, const uint8_t *p, size_t n,
                         rg_err *e) {
  size_t poslen, oklen;
  if (n < 1 + 1 + 8 + 8 + 1 + 4 + 2 || p[0] != PAYLOAD_FORMAT ||
      p[1] != x->mode)
    return bad_token(e);
  x->emitted = rg_get_u64(p + 2);
  x->skipped = rg_get_u64(p + 10);
  x->rphase = p[18];
  x->rord = rg_get_u32(p + 19);
  poslen = rg_get_u16(p + 23);
  if (n < 25 + poslen + 2) return bad_token(e);
  rg_buf_add(&x->rpos, p + 25, poslen);
  oklen = rg_get_u16(p + 25 + poslen);
  if (n != 27 + poslen + oklen) return bad_token(e);
  rg_buf_add(&x->rokey, p + 27 + poslen, oklen);
  if (x->rpos.oom || x->rokey.oom) return rg_fail(e, 500, "out of memory");
  x->resumed = 1;
  return 0;
}

/* The accumulators of the query's own aggregate calls. */
static int setup_aggs (rg_qexec *x, rg_qagg **out, rg_err *e) {
  const rg_query *q = x->q;
  rg_qagg *g = (rg_qagg *)calloc((size_t)x->naggs + 1, sizeof(rg_qagg));
  int i;
  if (g == NULL) return rg_fail(e, 500, "out of memory");
  for (i = 0; i < x->naggs; i++) {
    const rg_qexpr *ex = &q->ex[x->aggslot[i]];
    g[i].fn = ex->op;
    g[i].arg = q->list[ex->list];
    rg_buf_init(&g[i].str);
  }
  *out = g;
  return 0;
}

static void free_aggs (rg_qexec *x, rg_qagg *g) {
  int i;
  if (g == NULL) return;
  for (i = 0; i < x->naggs; i++) rg_buf_free(&g[i].str);
  free(g);
}

/* ORDER BY RANK RRF(...): its components, weights and directions; every
** row is kept (the ranks are known only once all are in). */
static int fuse_setup (rg_qexec *x, const rg_qv *params, rg_err *e) {
  const rg_query *q = x->q;
  int32_t k = x->m->order[0].expr;
  int i;
  if (q->ex[k].k != RG_QE_CALL || q->ex[k].op != RG_QF_RRF) return 0;
  x->fuse = rg_qfts_rrf(q, params, k, x->fcomp, x->fw, RG_QMAX_FUSE);
  if (x->fuse > RG_QMAX_FUSE)
    return rg_fail(e, 400, "RRF fuses at most %d scoring functions",
                   RG_QMAX_FUSE);
  for (i = 0; i < x->fuse; i++) {
    if (!isfinite(x->fw[i]))
      return rg_fail(e, 400, "RRF's weights are finite numbers");
    x->fdesc[i] = rg_qfts_rank_desc(q, params, x->fcomp[i]);
    x->fts[i] = q->ex[x->fcomp[i]].op == RG_QF_FULLTEXTSCORE;
  }
  x->bound = 0;
  return 0;
}

int rg_qexec_new (rg_qexec **out, const rg_query *q, const rg_qv *params,
                  int mode, int tie_desc, long page, const uint8_t *resume,
                  size_t rlen, rg_err *e) {
  rg_qexec *x;
  const rg_qblock *m = &q->blk[0];
  int rc, i;
  *out = NULL;
  if ((x = (rg_qexec *)calloc(1, sizeof(rg_qexec))) == NULL)
    return rg_fail(e, 500, "out of memory");
  x->q = q;
  x->m = m;
  x->mode = mode;
  x->tie_desc = tie_desc;
  x->page = page;
  x->limit = -1;
  x->uo_expr = -1;
  rg_buf_init(&x->rpos);
  rg_buf_init(&x->rokey);
  rg_buf_init(&x->rows);
  rg_buf_init(&x->offs);
  rg_buf_init(&x->lpos);
  rg_buf_init(&x->lokey);
  rg_buf_init(&x->tmp);
  rg_buf_init(&x->key);
  rg_buf_init(&x->canon);
  rg_arena_init(&x->docmem);
  rg_arena_init(&x->scratch);
  x->ctx.q = q;
  x->ctx.params = params;
  x->ctx.scratch = &x->scratch;
  x->ctx.now_ticks = rg_dt_now_ticks();
  x->ctx.made = &x->made;
  x->ctx.e = e;
  *out = x;
  if (q->nvd && !q->vd_bound && (rc = rg_query_vectors((rg_query *)q, params,
                                                      e)))
    return rc;
  x->ctx.bind = (rg_qv *)calloc((size_t)q->nslots + 1, sizeof(rg_qv));
  x->ctx.aggs = (rg_qv *)calloc((size_t)q->naggs + 1, sizeof(rg_qv));
  if (x->ctx.bind == NULL || x->ctx.aggs == NULL)
    return rg_fail(e, 500, "out of memory");
  if (m->top >= 0 && (rc = count_of(q, params, m->top, "TOP", &x->limit, e)))
    return rc;
  if (m->offset >= 0) {
    int64_t lim;
    if ((rc = count_of(q, params, m->offset, "OFFSET", &x->offset, e)) ||
        (rc = count_of(q, params, m->limit, "LIMIT", &lim, e)))
      return rc;
    if (x->limit < 0 || lim < x->limit) x->limit = lim;
  }
  if (resume && (rc = read_payload(x, resume, rlen, e))) return rc;
  if (mode == RG_QX_AGG || mode == RG_QX_GROUP) {
    x->aggslot = (int32_t *)calloc((size_t)m->naggs + 1, sizeof(int32_t));
    if (x->aggslot == NULL) return rg_fail(e, 500, "out of memory");
    for (i = 0; i < q->nex && x->naggs < m->naggs; i++) {
      const rg_qexpr *ex = &q->ex[i];
      if (ex->k == RG_QE_CALL && RG_QF_ISAGG(ex->op) && ex->n == 0 &&
          ex->slot >= 0)
        x->aggslot[x->naggs++] = i;
    }
    if (mode == RG_QX_AGG && (rc = setup_aggs(x, &x->aggs, e))) return rc;
  }
  if (mode == RG_QX_SORT) {          /* how many rows the heap must keep */
    uint64_t off = x->offset > (int64_t)x->skipped
                   ? (uint64_t)x->offset - x->skipped : 0;
    uint64_t want = x->page > 0 ? (uint64_t)x->page : 0;
    if (x->limit >= 0) {
      uint64_t left = (uint64_t)x->limit > x->emitted
                      ? (uint64_t)x->limit - x->emitted : 0;
      if (want == 0 || left < want) want = left;
      if (left == 0) x->done = 1;
    }
    x->bound = want ? off + want + 1 : 0;
  }
  if (mode == RG_QX_SORT && m->rank &&
      (rc = fuse_setup(x, params, e)))
    return rc;
  if (x->limit >= 0 && x->emitted >= (uint64_t)x->limit) x->done = 1;
  if (mode == RG_QX_GROUP) x->uo_expr = m->group[0];
  else if (mode == RG_QX_DISTINCT && m->nsel) x->uo_expr = q->sel[m->sel0].expr;
  else if (m->norder) x->uo_expr = m->order[0].expr;
  x->fast = mode == RG_QX_STREAM && m->star && m->nsrc == 1 &&
            m->src[0].kind == RG_QS_ROOT && m->where < 0;
  x->count_only = m->where < 0 && counts_only(x);
  return 0;
}

int rg_qexec_peek (const uint8_t *p, size_t n, int *mode, int *phase,
                   const uint8_t **pos, size_t *poslen) {
  if (n < 25 || p[0] != PAYLOAD_FORMAT) return -1;
  *mode = p[1];
  *phase = p[18];
  *poslen = rg_get_u16(p + 23);
  if (n < 25 + *poslen) return -1;
  *pos = p + 25;
  return 0;
}

int rg_qexec_resume (const rg_qexec *x, int *phase, const uint8_t **pos,
                     size_t *poslen, const uint8_t **okey, size_t *oklen) {
  if (!x->resumed || x->mode != RG_QX_STREAM) return 0;   /* re-read all */
  *phase = x->rphase;
  *pos = (const uint8_t *)x->rpos.p;
  *poslen = x->rpos.n;
  *okey = (const uint8_t *)x->rokey.p;
  *oklen = x->rokey.n;
  return 1;
}

int rg_qexec_resume_past (const rg_qexec *x) {
  const rg_qblock *m = x->m;
  return x->resumed && x->mode == RG_QX_STREAM && m->nsrc == 1 &&
         (m->src[0].kind == RG_QS_ROOT || m->src[0].kind == RG_QS_VALUE);
}

static void free_entry (rg_qexec *x, hentry *h) {
  free(h->key);
  h->key = NULL;
  free_aggs(x, h->aggs);
  h->aggs = NULL;
}

void rg_qexec_free (rg_qexec *x) {
  size_t i;
  if (x == NULL) return;
  for (i = 0; i < x->nheap; i++) free_entry(x, &x->heap[i]);
  free(x->heap);
  free(x->slots);
  free_aggs(x, x->aggs);
  free(x->aggslot);
  free(x->fscore);
  rg_qfts_free(&x->ctx);
  free(x->ctx.bind);
  free(x->ctx.aggs);
  free(x->ctx.cpv);
  free(x->ctx.cpdone);
  rg_qrx_free(x->ctx.rx);
  rg_qvcache_free(x->ctx.vcache);
  rg_buf_free(&x->rpos);
  rg_buf_free(&x->rokey);
  rg_buf_free(&x->rows);
  rg_buf_free(&x->offs);
  rg_buf_free(&x->lpos);
  rg_buf_free(&x->lokey);
  rg_buf_free(&x->tmp);
  rg_buf_free(&x->key);
  rg_buf_free(&x->canon);
  rg_tape_free(&x->tape);
  rg_arena_free(&x->docmem);
  rg_arena_free(&x->scratch);
  free(x);
}
/* }===================================================================== */


/*
** {=====================================================================
** Rows
** ======================================================================
*/
static int oom (rg_qexec *x) {
  if (!x->status) x->status = rg_fail(x->e, 500, "out of memory");
  x->done = 1;
  return x->status;
}

static int eval_failed (rg_qexec *x);

/* Counts a document fed or a row made against the bound, and asks whether
** the page has used its time; 1 when the page must stop (408). */
static int meter_rows (rg_qexec *x) {
  if (rg_qctx_late(&x->ctx)) return eval_failed(x);
  if (++x->made <= x->max_rows || x->max_rows == 0) return 0;
  if (!x->status)
    x->status = rg_fail(x->e, 408, "the query read or made more than %llu "
                        "documents and rows", (unsigned long long)x->max_rows);
  x->done = 1;
  return 1;
}

/* Counts bytes of results held against the bound; 1 when the page must
** stop (413). */
static int meter_bytes (rg_qexec *x, size_t n) {
  x->held += n;
  if (x->max_bytes == 0 || x->held <= x->max_bytes) return 0;
  if (!x->status)
    x->status = rg_fail(x->e, 413, "the query's results are over %llu bytes",
                        (unsigned long long)x->max_bytes);
  x->done = 1;
  return 1;
}

/* Takes a failure of the evaluation (a user-defined function's, a bound)
** into the page. */
static int eval_failed (rg_qexec *x) {
  if (x->ctx.status == 0) return 0;
  if (!x->status) x->status = rg_fail(x->e, x->ctx.status, "%s",
                                      x->ctx.err.msg);
  x->done = 1;
  return 1;
}

/* The order key of the current row into x->key (ord 0: no ordinal). */
static void order_key (rg_qexec *x, const rg_qdoc *d, uint32_t ord,
                       int with_ord) {
  const rg_qblock *m = x->m;
  uint8_t tail[20];
  size_t i, start;
  int k;
  x->key.n = 0;
  for (k = 0; k < m->norder; k++) {
    rg_qv v;
    rg_qeval(&x->ctx, m->order[k].expr, &v);
    rg_qv_term(&x->key, &v, m->order[k].desc, 0);
  }
  rg_put_u64(tail, d->hash);
  rg_put_u64(tail + 8, d->digest);
  rg_put_u32(tail + 16, ord);
  start = x->key.n;
  rg_buf_add(&x->key, tail, with_ord ? 20 : 16);
  if (x->tie_desc && !x->key.oom)
    for (i = start; i < x->key.n; i++)
      x->key.p[i] = (char)~(unsigned char)x->key.p[i];
}

/* The row's result value; 0 when there is none (VALUE undefined). */
static int project (rg_qexec *x, rg_qv *out) {
  const rg_query *q = x->q;
  const rg_qblock *m = x->m;
  if (m->star) { *out = x->ctx.bind[m->src[0].slot]; return 1; }
  if (m->value) {
    rg_qeval(&x->ctx, q->sel[m->sel0].expr, out);
    return out->t != RG_QV_UNDEF;
  }
  {
    rg_qv *items = (rg_qv *)rg_arena_alloc(&x->scratch,
                                           (size_t)m->nsel * sizeof(rg_qv) + 1);
    const char **names = (const char **)rg_arena_alloc(&x->scratch,
                                      (size_t)m->nsel * sizeof(char *) + 1);
    uint32_t *nlens = (uint32_t *)rg_arena_alloc(&x->scratch,
                                     (size_t)m->nsel * sizeof(uint32_t) + 1);
    int i, n = 0;
    if (items == NULL || names == NULL || nlens == NULL) return 0;
    for (i = 0; i < m->nsel; i++) {
      rg_qeval(&x->ctx, q->sel[m->sel0 + i].expr, &items[n]);
      if (items[n].t == RG_QV_UNDEF) continue;
      names[n] = q->sel[m->sel0 + i].name;
      nlens[n] = q->sel[m->sel0 + i].nlen;
      n++;
    }
    rg_qv_build(&x->scratch, 1, items, names, nlens, n, out);
    return 1;
  }
}

static void emit (rg_qexec *x, const char *row, size_t n) {
  size_t off[2];
  if (meter_bytes(x, n + 1)) return;
  if (x->count > 0) rg_buf_addc(&x->rows, ',');
  else rg_buf_addc(&x->rows, '[');
  off[0] = x->rows.n;
  off[1] = n;
  rg_buf_add(&x->rows, row, n);
  rg_buf_add(&x->offs, off, sizeof(off));
  x->count++;
}

/* Records the last row consumed: its source position, and its order key
** (given, or for STREAM made from the document when a token needs it; the
** document's text stays valid until the page is finished). */
static void set_last (rg_qexec *x, const rg_qdoc *d, uint32_t ord,
                      const rg_buf *okey) {
  x->have_last = 1;
  x->lphase = d ? d->phase : 0;
  x->lord = ord;
  x->lpos.n = 0;
  if (d) rg_buf_add(&x->lpos, d->pos, d->poslen);
  x->lokey.n = 0;
  if (okey) rg_buf_add(&x->lokey, okey->p, okey->n);
  x->lpending = okey == NULL && d != NULL && x->m->norder > 0 &&
                d->text != NULL;
  if (x->lpending) {
    x->ltext = d->text;
    x->llen = d->len;
    x->lhash = d->hash;
    x->ldigest = d->digest;
  }
}

static int within_limit (rg_qexec *x) {
  return x->limit < 0 || x->emitted + x->count < (uint64_t)x->limit;
}

/* A row in STREAM mode; `raw` is the document's text for SELECT * rows
** that needed no evaluation (the fast path). */
static void stream_row (rg_qexec *x, const rg_qdoc *d, uint32_t ord,
                        int raw) {
  rg_qv v;
  if (x->limit >= 0 && x->emitted + x->count >= (uint64_t)x->limit) {
    x->done = 1;
    return;
  }
  if (!raw && !project(x, &v)) return;
  if (x->skipped < (uint64_t)x->offset) {
    x->skipped++;
    set_last(x, d, ord, NULL);
    return;
  }
  if (x->page > 0 && x->count >= (size_t)x->page) {
    x->more = 1;
    x->done = 1;
    return;
  }
  if (raw) emit(x, d->text, d->len);
  else {
    x->tmp.n = 0;
    rg_qv_print(&x->tmp, &v);
    emit(x, x->tmp.p, x->tmp.n);
  }
  set_last(x, d, ord, NULL);
  if (!within_limit(x)) x->done = 1;   /* TOP reached: read no further */
}

static int key_cmp (const hentry *a, const hentry *b) {
  int c = memcmp(a->key, b->key, a->klen < b->klen ? a->klen : b->klen);
  if (c) return c;
  return a->klen < b->klen ? -1 : a->klen > b->klen;
}

/* Makes an entry holding copies of key, row and canon. */
static int make_entry (hentry *h, const rg_buf *key, const rg_buf *row,
                       const rg_buf *canon) {
  size_t cl = canon ? canon->n : 0;
  char *m = (char *)malloc(key->n + row->n + cl + 1);
  if (m == NULL) return -1;
  memcpy(m, key->p, key->n);
  memcpy(m + key->n, row->p, row->n);
  if (cl) memcpy(m + key->n + row->n, canon->p, cl);
  h->key = m;
  h->klen = key->n;
  h->row = m + key->n;
  h->rlen = row->n;
  h->canon = m + key->n + row->n;
  h->clen = cl;
  h->aggs = NULL;
  return 0;
}

static void sift_down (hentry *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, big = i;
    hentry t;
    if (l < n && key_cmp(&h[l], &h[big]) > 0) big = l;
    if (r < n && key_cmp(&h[r], &h[big]) > 0) big = r;
    if (big == i) return;
    t = h[i]; h[i] = h[big]; h[big] = t;
    i = big;
  }
}

static void sift_up (hentry *h, size_t i) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    hentry t;
    if (key_cmp(&h[i], &h[p]) <= 0) return;
    t = h[i]; h[i] = h[p]; h[p] = t;
    i = p;
  }
}

static void fuse_row (rg_qexec *x, const rg_qdoc *d, uint32_t ord);

static void sort_row (rg_qexec *x, const rg_qdoc *d, uint32_t ord) {
  rg_qv v;
  hentry probe;
  x->passed++;
  if (x->fuse) { fuse_row(x, d, ord); return; }
  order_key(x, d, ord, 1);
  if (x->key.oom) { oom(x); return; }
  if (x->resumed) {
    size_t n = x->key.n < x->rokey.n ? x->key.n : x->rokey.n;
    int c = memcmp(x->key.p, x->rokey.p, n);
    if (c < 0 || (c == 0 && x->key.n <= x->rokey.n)) return;
  }
  probe.key = x->key.p;
  probe.klen = x->key.n;
  if (x->bound && x->nheap == x->bound &&
      key_cmp(&probe, &x->heap[0]) >= 0)
    return;                          /* not among the smallest */
  if (!project(x, &v)) return;
  x->tmp.n = 0;
  rg_qv_print(&x->tmp, &v);
  if (x->tmp.oom) { oom(x); return; }
  if (meter_bytes(x, x->key.n + x->tmp.n + sizeof(hentry))) return;
  if (x->bound && x->nheap == x->bound) {
    free_entry(x, &x->heap[0]);
    if (make_entry(&x->heap[0], &x->key, &x->tmp, NULL)) { oom(x); return; }
    sift_down(x->heap, x->nheap, 0);
    return;
  }
  if (x->nheap == x->capheap) {
    size_t cap = x->capheap ? x->capheap * 2 : 64;
    hentry *nh = (hentry *)realloc(x->heap, cap * sizeof(hentry));
    if (nh == NULL) { oom(x); return; }
    x->heap = nh;
    x->capheap = cap;
  }
  if (make_entry(&x->heap[x->nheap], &x->key, &x->tmp, NULL)) {
    oom(x);
    return;
  }
  x->nheap++;
  if (x->bound) sift_up(x->heap, x->nheap - 1);
}

/* Keeps a row of an RRF ranking: its components' scores, a key whose
** first FUSE_KEY bytes the fused score fills in at the end, and its text. */
static void fuse_row (rg_qexec *x, const rg_qdoc *d, uint32_t ord) {
  uint8_t tail[FUSE_KEY + 20];
  double sc[RG_QMAX_FUSE];
  size_t i;
  int k;
  rg_qv v;
  for (k = 0; k < x->fuse; k++) {
    rg_qeval(&x->ctx, x->fcomp[k], &v);
    sc[k] = v.t == RG_QV_NUM && !(x->fts[k] && v.d <= 0) ? v.d : NAN;
  }
  if (!project(x, &v)) return;
  x->tmp.n = 0;
  rg_qv_print(&x->tmp, &v);
  if (x->tmp.oom) { oom(x); return; }
  memset(tail, 0, FUSE_KEY);
  rg_put_u64(tail + FUSE_KEY, d->hash);
  rg_put_u64(tail + FUSE_KEY + 8, d->digest);
  rg_put_u32(tail + FUSE_KEY + 16, ord);
  if (x->tie_desc)
    for (i = FUSE_KEY; i < sizeof(tail); i++) tail[i] = (uint8_t)~tail[i];
  x->key.n = 0;
  rg_buf_add(&x->key, tail, sizeof(tail));
  if (x->key.oom) { oom(x); return; }
  if (meter_bytes(x, x->key.n + x->tmp.n + sizeof(hentry) +
                  (size_t)x->fuse * sizeof(double)))
    return;
  if (x->nheap == x->capheap) {
    size_t cap = x->capheap ? x->capheap * 2 : 64;
    hentry *nh = (hentry *)realloc(x->heap, cap * sizeof(hentry));
    if (nh == NULL) { oom(x); return; }
    x->heap = nh;
    x->capheap = cap;
  }
  if (x->nheap == x->fcap) {
    size_t cap = x->fcap ? x->fcap * 2 : 64;
    double *ns = (double *)realloc(x->fscore, cap * (size_t)x->fuse *
                                   sizeof(double));
    if (ns == NULL) { oom(x); return; }
    x->fscore = ns;
    x->fcap = cap;
  }
  if (make_entry(&x->heap[x->nheap], &x->key, &x->tmp, NULL)) {
    oom(x);
    return;
  }
  memcpy(x->fscore + x->nheap * (size_t)x->fuse, sc,
         (size_t)x->fuse * sizeof(double));
  x->nheap++;
}

/* Ranks of one component: rows with a score, best first, ties by key. */
typedef struct fuse_by { const rg_qexec *x; int k; } fuse_by;
static int fuse_cmp (const void *pa, const void *pb, void *ud) {
  const fuse_by *by = (const fuse_by *)ud;
  const rg_qexec *x = by->x;
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  double sa = x->fscore[a * (size_t)x->fuse + (size_t)by->k];
  double sb = x->fscore[b * (size_t)x->fuse + (size_t)by->k];
  if (sa != sb) return (sa > sb) == (x->fdesc[by->k] != 0) ? -1 : 1;
  return key_cmp(&x->heap[a], &x->heap[b]);
}

/* Fuses the kept rows' ranks into their keys' scores, then drops the rows
** a previous page returned. */
static void fuse_finish (rg_qexec *x) {
  size_t n = x->nheap, i, j, m;
  size_t *idx;
  double *fused;
  int k;
  if (n == 0) return;
  idx = (size_t *)malloc(n * sizeof(size_t));
  fused = (double *)calloc(n, sizeof(double));
  if (idx == NULL || fused == NULL) { free(idx); free(fused); oom(x); return; }
  for (k = 0; k < x->fuse; k++) {
    fuse_by by;
    m = 0;
    for (i = 0; i < n; i++)
      if (!isnan(x->fscore[i * (size_t)x->fuse + (size_t)k])) idx[m++] = i;
    by.x = x;
    by.k = k;
    qsort_r(idx, m, sizeof(size_t), fuse_cmp, &by);
    for (j = 0; j < m; j++)
      fused[idx[j]] += x->fw[k] / (RG_RRF_K + (double)(j + 1));
  }
  for (i = 0; i < n; i++) {
    rg_qv v;
    x->key.n = 0;
    rg_qv_num(&v, fused[i]);
    rg_qv_term(&x->key, &v, 1, 0);
    if (x->key.oom || x->key.n != FUSE_KEY) { oom(x); break; }
    memcpy(x->heap[i].key, x->key.p, FUSE_KEY);
  }
  free(idx);
  free(fused);
  if (x->resumed) {                  /* rows up to the last one returned */
    hentry r;
    r.key = x->rokey.p;
    r.klen = x->rokey.n;
    for (i = j = 0; i < n; i++) {
      if (key_cmp(&x->heap[i], &r) <= 0) {
        free_entry(x, &x->heap[i]);
        continue;
      }
      x->heap[j++] = x->heap[i];
    }
    x->nheap = j;
  }
}

static uint64_t canon_hash (const rg_buf *b) {
  return rg_hash(b->p ? b->p : "", b->n);
}

static int grow_set (rg_qexec *x) {
  size_t n = x->nslots ? x->nslots * 2 : 64, i;
  size_t *s = (size_t *)malloc(n * sizeof(size_t));
  if (s == NULL) return -1;
  for (i = 0; i < n; i++) s[i] = (size_t)-1;
  for (i = 0; i < x->nheap; i++) {
    size_t j = (size_t)(x->heap[i].hash & (n - 1));
    while (s[j] != (size_t)-1) j = (j + 1) & (n - 1);
    s[j] = i;
  }
  free(x->slots);
  x->slots = s;
  x->nslots = n;
  return 0;
}

/* Finds the entry of x->canon in the set, or the free slot for it; the
** entry's index, or (size_t)-1 with *slot set. */
static size_t set_find (rg_qexec *x, uint64_t h, size_t *slot) {
  size_t j;
  for (j = (size_t)(h & (x->nslots - 1)); x->slots[j] != (size_t)-1;
       j = (j + 1) & (x->nslots - 1)) {
    hentry *o = &x->heap[x->slots[j]];
    if (o->hash == h && o->clen == x->canon.n &&
        memcmp(o->canon, x->canon.p, x->canon.n) == 0)
      return x->slots[j];
  }
  *slot = j;
  return (size_t)-1;
}

/* Adds an entry of (key, tmp, canon) to the set at `slot`; its index. */
static size_t set_add (rg_qexec *x, uint64_t h, size_t slot) {
  if (meter_bytes(x, x->key.n + x->tmp.n + x->canon.n + sizeof(hentry)))
    return (size_t)-1;
  if (x->nheap == x->capheap) {
    size_t cap = x->capheap ? x->capheap * 2 : 64;
    hentry *nh = (hentry *)realloc(x->heap, cap * sizeof(hentry));
    if (nh == NULL) { oom(x); return (size_t)-1; }
    x->heap = nh;
    x->capheap = cap;
  }
  if (make_entry(&x->heap[x->nheap], &x->key, &x->tmp, &x->canon)) {
    oom(x);
    return (size_t)-1;
  }
  x->heap[x->nheap].hash = h;
  x->slots[slot] = x->nheap;
  return x->nheap++;
}

static void distinct_row (rg_qexec *x, const rg_qdoc *d, uint32_t ord) {
  rg_qv v;
  uint64_t h;
  size_t at, slot = 0;
  if (!project(x, &v)) return;
  x->canon.n = 0;
  rg_qv_canon(&x->canon, &v);
  x->tmp.n = 0;
  rg_qv_print(&x->tmp, &v);
  if (x->m->norder) order_key(x, d, ord, 1);
  else { x->key.n = 0; rg_buf_add(&x->key, x->canon.p ? x->canon.p : "",
                                   x->canon.n); }
  if (x->canon.oom || x->tmp.oom || x->key.oom) { oom(x); return; }
  h = canon_hash(&x->canon);
  if ((x->nheap + 1) * 2 > x->nslots && grow_set(x)) { oom(x); return; }
  if ((at = set_find(x, h, &slot)) != (size_t)-1) {
    hentry *o = &x->heap[at];
    hentry probe;
    probe.key = x->key.p;
    probe.klen = x->key.n;
    if (x->m->norder && key_cmp(&probe, o) < 0) {   /* an earlier row */
      hentry n;
      if (make_entry(&n, &x->key, &x->tmp, &x->canon)) { oom(x); return; }
      n.hash = h;
      free_entry(x, o);
      *o = n;
    }
    return;
  }
  set_add(x, h, slot);
}

/* GROUP: the row's group (made when new), its accumulators updated. */
static void group_row (rg_qexec *x, const rg_qdoc *d) {
  const rg_qblock *m = x->m;
  rg_qv vals[RG_QMAX_GROUP];
  uint64_t h;
  size_t at, slot = 0;
  int g, i;
  x->canon.n = 0;
  x->key.n = 0;
  x->tmp.n = 0;
  rg_buf_addc(&x->tmp, '{');
  for (g = 0; g < m->ngroup; g++) {
    rg_qeval(&x->ctx, m->group[g], &vals[g]);
    rg_qv_canon(&x->canon, &vals[g]);
    rg_buf_addc(&x->canon, 0);
    rg_qv_term(&x->key, &vals[g], 0, 0);
    if (vals[g].t != RG_QV_UNDEF) {  /* {"0": v0, "2": v2}: undefined out */
      if (x->tmp.n > 1) rg_buf_addc(&x->tmp, ',');
      rg_buf_addf(&x->tmp, "\"%d\":", g);
      rg_qv_print(&x->tmp, &vals[g]);
    }
  }
  rg_buf_addc(&x->tmp, '}');
  rg_buf_add(&x->key, x->canon.p, x->canon.n);   /* ties: canonical form */
  if (x->canon.oom || x->tmp.oom || x->key.oom) { oom(x); return; }
  h = canon_hash(&x->canon);
  if ((x->nheap + 1) * 2 > x->nslots && grow_set(x)) { oom(x); return; }
  if ((at = set_find(x, h, &slot)) == (size_t)-1) {
    if ((at = set_add(x, h, slot)) == (size_t)-1) return;
    if (setup_aggs(x, &x->heap[at].aggs, x->e)) { oom(x); return; }
  }
  for (i = 0; i < x->naggs; i++) {
    rg_qv v;
    rg_qeval(&x->ctx, x->heap[at].aggs[i].arg, &v);
    if (rg_qagg_add(&x->heap[at].aggs[i], &v, d->weight)) { oom(x); return; }
  }
}

static void agg_row (rg_qexec *x, const rg_qdoc *d) {
  int i;
  for (i = 0; i < x->naggs; i++) {
    rg_qv v;
    rg_qeval(&x->ctx, x->aggs[i].arg, &v);
    if (rg_qagg_add(&x->aggs[i], &v, d->weight)) { oom(x); return; }
  }
}

static void row (rg_qexec *x, const rg_qdoc *d) {
  uint32_t ord = ++x->ordinal;
  rg_qv v;
  if (meter_rows(x)) return;
  if (x->resume_doc && ord <= x->rord) return;
  if (d->unordered_only && x->uo_expr >= 0) {
    rg_qeval(&x->ctx, x->uo_expr, &v);
    if (v.t >= RG_QV_NULL && v.t <= RG_QV_STR) return;
  }
  if (x->use_conds) {
    int i;
    for (i = 0; i < x->nconds; i++) {
      rg_qeval(&x->ctx, x->conds[i], &v);
      if (v.t != RG_QV_TRUE) { eval_failed(x); return; }
    }
  }
  else if (x->m->where >= 0) {
    rg_qeval(&x->ctx, x->m->where, &v);
    if (v.t != RG_QV_TRUE) { eval_failed(x); return; }
  }
  if (eval_failed(x)) return;
  switch (x->mode) {
    case RG_QX_STREAM: stream_row(x, d, ord, 0); break;
    case RG_QX_SORT: sort_row(x, d, ord); break;
    case RG_QX_AGG: agg_row(x, d); break;
    case RG_QX_GROUP: group_row(x, d); break;
    default: distinct_row(x, d, ord); break;
  }
  if (x->scratch.oom) oom(x);
  eval_failed(x);
}

/* The rows of the current document: the FROM source, then the JOINs. */
static void expand (rg_qexec *x, const rg_qdoc *d, int j) {
  const rg_qsrc *s;
  rg_qv src;
  const rg_qnode *c;
  uint32_t i;
  if (j == x->m->nsrc) { row(x, d); return; }
  s = &x->m->src[j];
  switch (s->kind) {
    case RG_QS_ROOT:
      x->ctx.bind[s->slot] = x->ctx.doc;
      expand(x, d, j + 1);
      return;
    case RG_QS_VALUE:
      rg_qeval(&x->ctx, s->expr, &src);
      if (src.t == RG_QV_UNDEF) return;
      x->ctx.bind[s->slot] = src;
      expand(x, d, j + 1);
      return;
    case RG_QS_SUBQ: rg_qblock_run(&x->ctx, s->expr, RG_QSUB_ARRAY, &src); break;
    default: rg_qeval(&x->ctx, s->expr, &src); break;
  }
  if (eval_failed(x) || src.t != RG_QV_ARR) return;
  for (i = 0, c = src.node + 1; i < src.node->n && !x->done;
       i++, c += c->size) {
    rg_qv_of_node(&x->ctx.bind[s->slot], c);
    expand(x, d, j + 1);
  }
}

/* Binds the FROM source of the current document (order keys made outside
** the rows, for a source read in ORDER BY order). */
static void expand_first (rg_qexec *x, int j) {
  const rg_qsrc *s;
  (void)j;
  if (x->m->nsrc == 0) return;
  s = &x->m->src[0];
  if (s->kind == RG_QS_ROOT) x->ctx.bind[s->slot] = x->ctx.doc;
  else if (s->kind == RG_QS_VALUE)
    rg_qeval(&x->ctx, s->expr, &x->ctx.bind[s->slot]);
}

static int load (rg_qexec *x, const rg_qdoc *d, rg_err *e) {
  int rc;
  rg_arena_reset(&x->docmem);
  rg_arena_reset(&x->scratch);
  rg_qfts_newdoc(&x->ctx);
  if (x->ctx.cpdone) memset(x->ctx.cpdone, 0, (size_t)x->ctx.ncp);
  memset(x->ctx.bind, 0, (size_t)x->q->nslots * sizeof(rg_qv));
  x->ctx.docid = d->digest;
  x->ctx.cp_members = d->index_values;
  if (d->text == NULL) { rg_qv_undef(&x->ctx.doc); return 0; }
  if ((rc = rg_tape_parse(&x->tape, &x->docmem, d->text, d->len)))
    return rg_fail(e, 500, rc == 500 ? "out of memory"
                   : "corrupt item: its stored text is not JSON");
  rg_qv_of_node(&x->ctx.doc, &x->tape.node[0]);
  return 0;
}

void rg_qexec_limits (rg_qexec *x, uint64_t max_rows, size_t max_bytes) {
  x->max_rows = max_rows;
  x->max_bytes = max_bytes;
  x->ctx.max_made = max_rows;
}

uint64_t rg_qexec_passed (const rg_qexec *x) {
  return x->passed;
}

uint64_t rg_qexec_made (const rg_qexec *x) {
  return x->made;
}

void rg_qexec_deadline (rg_qexec *x, rg_deadline *d) {
  x->ctx.deadline = d;
}

uint64_t rg_qexec_steps (const rg_qexec *x) {
  return x->ctx.steps;
}

void rg_qexec_conds (rg_qexec *x, const int32_t *conds, int n) {
  x->conds = conds;
  x->nconds = n;
  x->use_conds = 1;
  x->fast = x->mode == RG_QX_STREAM && x->m->star && x->m->nsrc == 1 &&
            x->m->src[0].kind == RG_QS_ROOT && n == 0;
  x->count_only = n == 0 && counts_only(x);
}

void rg_qexec_computed (rg_qexec *x, const rg_qcomputed *cp, int n) {
  if (n <= 0) return;
  x->ctx.cp = cp;
  x->ctx.ncp = n;
  x->ctx.cpv = (rg_qv *)calloc((size_t)n, sizeof(rg_qv));
  x->ctx.cpdone = (uint8_t *)calloc((size_t)n, 1);
  if (x->ctx.cpv == NULL || x->ctx.cpdone == NULL) {
    free(x->ctx.cpv);
    free(x->ctx.cpdone);
    x->ctx.cpv = NULL;
    x->ctx.cpdone = NULL;
    x->ctx.ncp = 0;
    oom(x);
  }
}

void rg_qexec_text (rg_qexec *x, const rg_qtext *t) {
  x->ctx.text = t;
}

void rg_qexec_udf (rg_qexec *x, const rg_qudf *u) {
  x->ctx.udf = u;
}

int rg_qexec_needs_text (const rg_qexec *x) {
  return !x->count_only;
}

int rg_qexec_doc (rg_qexec *x, const rg_qdoc *d, rg_err *e) {
  int rc;
  if (x->done) return x->status ? x->status : 1;
  x->e = e;
  x->ctx.e = e;
  x->doc = d;
  x->ordinal = 0;
  if (meter_rows(x)) return x->status;
  x->resume_doc = x->resumed && x->mode == RG_QX_STREAM &&
                  d->phase == x->rphase && d->poslen == x->rpos.n &&
                  (d->poslen == 0 || memcmp(d->pos, x->rpos.p, d->poslen) == 0);
  if (x->count_only && !d->unordered_only) {   /* one row to count */
    int i;
    for (i = 0; i < x->naggs; i++)
      x->aggs[i].count += d->weight ? d->weight : 1;
    return 0;
  }
  if (x->fast && !d->unordered_only) {   /* the item is the row, as stored */
    x->ordinal = 1;
    if (!(x->resume_doc && x->rord >= 1)) stream_row(x, d, 1, 1);
    return x->status ? x->status : x->done;
  }
  if ((rc = load(x, d, e))) return rc;
  expand(x, d, 0);
  if (x->status) return x->status;
  return x->done;
}

int rg_qexec_once (rg_qexec *x, rg_err *e) {
  rg_qdoc d;
  int rc;
  memset(&d, 0, sizeof(d));
  if (x->done) return x->status ? x->status : 1;
  x->e = e;
  x->ctx.e = e;
  x->doc = &d;
  x->ordinal = 0;
  x->resume_doc = x->resumed && x->mode == RG_QX_STREAM;
  if ((rc = load(x, &d, e))) return rc;
  row(x, &d);
  if (x->status) return x->status;
  return x->done;
}

int rg_qexec_okey (rg_qexec *x, const rg_qdoc *d, rg_buf *out, rg_err *e) {
  int rc;
  if ((rc = load(x, d, e))) return rc;
  expand_first(x, 0);
  order_key(x, d, 0, 0);
  out->n = 0;
  rg_buf_add(out, x->key.p, x->key.n);
  if (out->oom || x->key.oom || x->scratch.oom)
    return rg_fail(e, 500, "out of memory");
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Ending the page
** ======================================================================
*/
static int cmp_entries (const void *a, const void *b) {
  return key_cmp((const hentry *)a, (const hentry *)b);
}

static void payload (rg_qexec *x, rg_buf *out) {
  uint8_t head[25], n2[2];
  head[0] = PAYLOAD_FORMAT;
  head[1] = (uint8_t)x->mode;
  rg_put_u64(head + 2, x->emitted + x->count);
  rg_put_u64(head + 10, x->skipped);
  head[18] = (uint8_t)x->lphase;
  rg_put_u32(head + 19, x->lord);
  rg_put_u16(head + 23, (uint32_t)x->lpos.n);
  rg_buf_add(out, head, 25);
  rg_buf_add(out, x->lpos.p, x->lpos.n);
  rg_put_u16(n2, (uint32_t)x->lokey.n);
  rg_buf_add(out, n2, 2);
  rg_buf_add(out, x->lokey.p, x->lokey.n);
}

static int page_room (rg_qexec *x) {
  return (x->page == 0 || x->count < (size_t)x->page) && within_limit(x);
}

static void finish_sort (rg_qexec *x) {
  size_t i = 0;
  if (x->fuse) fuse_finish(x);
  if (x->nheap > 1) qsort(x->heap, x->nheap, sizeof(hentry), cmp_entries);
  while (i < x->nheap && x->skipped < (uint64_t)x->offset) {
    rg_buf kb;
    x->skipped++;
    kb.p = x->heap[i].key;
    kb.n = x->heap[i].klen;
    set_last(x, NULL, 0, &kb);
    i++;
  }
  while (i < x->nheap && page_room(x)) {
    rg_buf kb;
    emit(x, x->heap[i].row, x->heap[i].rlen);
    kb.p = x->heap[i].key;
    kb.n = x->heap[i].klen;
    set_last(x, NULL, 0, &kb);
    i++;
  }
  x->more = i < x->nheap && within_limit(x);
}

static void finish_distinct (rg_qexec *x) {
  size_t i = 0;
  uint64_t skip = (uint64_t)x->offset + x->emitted;
  if (x->nheap > 1) qsort(x->heap, x->nheap, sizeof(hentry), cmp_entries);
  i = skip < x->nheap ? (size_t)skip : x->nheap;
  while (i < x->nheap && page_room(x)) {
    emit(x, x->heap[i].row, x->heap[i].rlen);
    i++;
  }
  x->more = i < x->nheap && within_limit(x);
  x->have_last = 1;
}

/* Projects one row of aggregate results (and group values). */
static void agg_project (rg_qexec *x, const rg_qagg *aggs) {
  rg_qv v;
  int i;
  for (i = 0; i < x->naggs; i++)
    rg_qagg_result(&aggs[i], &x->ctx.aggs[x->q->ex[x->aggslot[i]].slot]);
  memset(x->ctx.bind, 0, (size_t)x->q->nslots * sizeof(rg_qv));
  rg_qv_undef(&x->ctx.doc);
  if (project(x, &v)) {
    if (eval_failed(x)) return;
    x->tmp.n = 0;
    rg_qv_print(&x->tmp, &v);
    emit(x, x->tmp.p, x->tmp.n);
  }
}

static void finish_group (rg_qexec *x) {
  size_t i;
  uint64_t skip = (uint64_t)x->offset + x->emitted;
  rg_qv vals[RG_QMAX_GROUP];
  if (x->nheap > 1) qsort(x->heap, x->nheap, sizeof(hentry), cmp_entries);
  i = skip < x->nheap ? (size_t)skip : x->nheap;
  x->ctx.groupv = vals;
  while (i < x->nheap && page_room(x) && !x->status) {
    const hentry *h = &x->heap[i];
    int g;
    rg_arena_reset(&x->docmem);
    rg_arena_reset(&x->scratch);
    if (rg_tape_parse(&x->tape, &x->docmem, h->row, h->rlen)) { oom(x); break; }
    for (g = 0; g < x->m->ngroup; g++) {
      char name[8];
      int n = snprintf(name, sizeof(name), "%d", g);
      const rg_qnode *nd = rg_qnode_member(&x->tape.node[0], name, (size_t)n);
      if (nd) rg_qv_of_node(&vals[g], nd);
      else rg_qv_undef(&vals[g]);
    }
    agg_project(x, h->aggs);
    i++;
  }
  x->ctx.groupv = NULL;
  x->more = i < x->nheap && within_limit(x);
  x->have_last = 1;
}

static void finish_agg (rg_qexec *x) {
  if (x->offset == 0 && x->limit != 0 && x->emitted == 0) {
    rg_arena_reset(&x->scratch);
    agg_project(x, x->aggs);
  }
  x->more = 0;
}

int rg_qexec_finish (rg_qexec *x, rg_buf *rows, rg_buf *offsets,
                     size_t *count, rg_buf *tok, rg_err *e) {
  x->e = e;
  x->ctx.e = e;
  if (x->status) return x->status;
  switch (x->mode) {
    case RG_QX_SORT: finish_sort(x); break;
    case RG_QX_DISTINCT: finish_distinct(x); break;
    case RG_QX_AGG: finish_agg(x); break;
    case RG_QX_GROUP: finish_group(x); break;
    default: break;
  }
  if (x->status) return x->status;
  if (x->count == 0) rg_buf_addc(&x->rows, '[');
  rg_buf_addc(&x->rows, ']');
  if (x->rows.oom || x->offs.oom || x->lpos.oom || x->lokey.oom)
    return rg_fail(e, 500, "out of memory");
  rg_buf_free(rows);
  *rows = x->rows;
  rg_buf_init(&x->rows);
  rg_buf_free(offsets);
  *offsets = x->offs;
  rg_buf_init(&x->offs);
  *count = x->count;
  tok->n = 0;
  if (x->more && x->have_last) {
    if (x->lpending) {               /* the last row's order key, now */
      rg_qdoc d;
      int rc;
      memset(&d, 0, sizeof(d));
      d.text = x->ltext;
      d.len = x->llen;
      d.hash = x->lhash;
      d.digest = x->ldigest;
      if ((rc = load(x, &d, e))) return rc;
      expand_first(x, 0);
      order_key(x, &d, x->lord, 1);
      x->lokey.n = 0;
      rg_buf_add(&x->lokey, x->key.p, x->key.n);
    }
    payload(x, tok);
    if (tok->oom) return rg_fail(e, 500, "out of memory");
  }
  return 0;
}
/* }===================================================================== */
