/*
** fts.c: the full-text functions of the dialect and reciprocal rank
** fusion: FullTextContains, FullTextContainsAll, FullTextContainsAny,
** FullTextScore and RRF, evaluated on one row at a time.
**
** The search arguments are constants of the query (literals, parameters,
** arrays and objects of them), so each call node is analyzed once per
** query (text.h's pipeline, in the path's language) and kept in the
** query's full-text state.  A document's text is analyzed once per row
** and path, and the tokens kept until the next document.
**
** A search string is a phrase: it matches where its terms stand in the
** document at the same distances as in the string (stopwords keep their
** places).  `{term, distance}` matches terms within that many edits
** (0 to 2) of the term's stem, every one of them: Cosmos DB keeps the ten
** closest of its index's terms; here every document's terms are tested,
** so that a scan and an index give the same rows.
**
** FullTextScore is BM25 (text.h) over the terms of its strings (each
** term once), with statistics that the container gives through rg_qtext
** (the documents holding text at the path, their terms, each term's
** document frequency): those of the whole container, or of the queried
** partition when the request asks for that scope.  A row whose value at
** the path is not a string has no score (undefined); one with none of the
** terms scores 0.  Without statistics (no container: a patch filter, a
** bare pipeline), FullTextScore fails the query with 400.
**
** RRF(s1, s2, ... [, [w1, w2, ...]]) exists only as the key of ORDER BY
** RANK, where the row pipeline (exec.c) holds every candidate, ranks each
** component over all of them, and fuses: sum of w / (60 + rank) over the
** components a row has a score for (a FullTextScore counts where it is
** above 0).  rg_qfts_rank_desc says which way a component ranks.
*/

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "sql/sql_int.h"
#include "sql/text.h"

#define MAX_QTERMS   256     /* terms of one call's search strings */
#define MAX_PATH     512     /* bytes of a scored path */
#define DOC_CACHE    4       /* texts of one row kept analyzed */

typedef struct ftterm {
  char *s;
  uint32_t n, pos;
} ftterm;

/* One search argument: a phrase, or a fuzzy term (dist > 0). */
typedef struct ftphrase {
  ftterm *t;
  int n, dist;
} ftphrase;

typedef struct ftcall {
  int ready, lang;
  ftphrase *ph;                      /* Contains*: one per argument */
  int nph;
  ftterm *term;                      /* Score: the distinct terms */
  int nterm;
  double *idf, avgdl;
  char path[MAX_PATH];
  size_t plen;
} ftcall;

typedef struct ftdoc {
  const char *s;                     /* the text, as the row holds it */
  size_t n;
  int lang, used;
  uint32_t *off, *len, *pos;         /* tokens */
  size_t ntok, cap;
  rg_buf bytes;
} ftdoc;

struct rg_qfts {
  rg_analyzer an;
  rg_arena mem;                      /* the calls' analyses: the query's */
  ftcall **call;                     /* by expression index */
  ftdoc doc[DOC_CACHE];
  unsigned next;                     /* the entry to reuse */
};

static struct rg_qfts *state (rg_qctx *x) {
  struct rg_qfts *f = x->fts;
  if (f) return f;
  if ((f = (struct rg_qfts *)calloc(1, sizeof(*f))) == NULL) return NULL;
  f->call = (ftcall **)calloc((size_t)x->q->nex + 1, sizeof(ftcall *));
  if (f->call == NULL) { free(f); return NULL; }
  rg_analyzer_init(&f->an);
  rg_arena_init(&f->mem);
  x->fts = f;
  return f;
}

void rg_qfts_newdoc (rg_qctx *x) {
  int i;
  if (x->fts == NULL) return;
  for (i = 0; i < DOC_CACHE; i++) x->fts->doc[i].used = 0;
}

void rg_qfts_free (rg_qctx *x) {
  struct rg_qfts *f = x->fts;
  int i;
  if (f == NULL) return;
  for (i = 0; i < DOC_CACHE; i++) {
    free(f->doc[i].off);
    free(f->doc[i].len);
    free(f->doc[i].pos);
    rg_buf_free(&f->doc[i].bytes);
  }
  rg_analyzer_free(&f->an);
  rg_arena_free(&f->mem);
  free(f->call);
  free(f);
  x->fts = NULL;
}


/*
** {=====================================================================
** Checks at parse time
** ======================================================================
*/
/* Is e a constant of the query: a literal, a parameter, or an array or
** object of them? */
static int is_const (const rg_query *q, int32_t e) {
  const rg_qexpr *ex = &q->ex[e];
  int i;
  switch (ex->k) {
    case RG_QE_LIT: case RG_QE_PARAM: return 1;
    case RG_QE_ARRAY:
      for (i = 0; i < ex->nlist; i++)
        if (!is_const(q, q->list[ex->list + i])) return 0;
      return 1;
    case RG_QE_OBJECT:
      for (i = 0; i < ex->nlist; i++)
        if (!is_const(q, q->ex[q->list[ex->list + i]].a)) return 0;
      return 1;
    default: return 0;
  }
}

/* A function whose value ranks rows: FullTextScore, VectorDistance. */
static int scoring (const rg_query *q, int32_t e) {
  const rg_qexpr *ex = &q->ex[e];
  if (ex->k != RG_QE_CALL) return 0;
  return ex->op == RG_QF_FULLTEXTSCORE || ex->op == RG_QF_VECTORDISTANCE;
}

/* Writes the path ("/a/b") of a property of the FROM item into out;
** 0, or -1 when e is not one. */
static int root_path (const rg_query *q, int32_t e, char *out, size_t cap,
                      size_t *n) {
  const rg_qexpr *segs[32];
  int k = 0, root = q->blk[0].nsrc ? q->blk[0].src[0].slot : -1;
  size_t m = 0;
  while (q->ex[e].k == RG_QE_PROP) {
    if (k == 32) return -1;
    segs[k++] = &q->ex[e];
    e = q->ex[e].a;
  }
  if (k == 0) return -1;
  if (q->blk[0].src[0].kind != RG_QS_ROOT) return -1;
  if (!(q->ex[e].k == RG_QE_ALIAS && q->ex[e].slot == root) &&
      q->ex[e].k != RG_QE_ROOT)
    return -1;
  while (k--) {
    if (m + 1 + segs[k]->n >= cap) return -1;
    out[m++] = '/';
    memcpy(out + m, segs[k]->s, segs[k]->n);
    m += segs[k]->n;
  }
  out[m] = '\0';
  *n = m;
  return 0;
}

static int at (const rg_query *q, int32_t e, rg_err *err, const char *msg) {
  int line, col;
  rg_query_where(q->sql, q->ex[e].pos, &line, &col);
  return rg_fail(err, 400, "syntax error at %d:%d: %s", line, col, msg);
}

int rg_qfts_check (const rg_query *q, rg_err *err) {
  int i, b;
  int32_t rank_expr[RG_QMAX_BLOCKS];
  for (b = 0; b < q->nblk; b++) {
    const rg_qblock *m = &q->blk[b];
    rank_expr[b] = m->rank ? m->order[0].expr : -1;
    if (m->rank && !scoring(q, m->order[0].expr) &&
        !(q->ex[m->order[0].expr].k == RG_QE_CALL &&
          q->ex[m->order[0].expr].op == RG_QF_RRF))
      return at(q, m->order[0].expr, err, "ORDER BY RANK takes "
                "FullTextScore, VectorDistance or RRF");
  }
  for (i = 0; i < q->nex; i++) {
    const rg_qexpr *ex = &q->ex[i];
    const int32_t *a = rg_qargs(q, ex);
    int j, n = ex->nlist;
    char path[MAX_PATH];
    size_t pn;
    if (ex->k != RG_QE_CALL || ex->op < RG_QF_FULLTEXTCONTAINS ||
        ex->op > RG_QF_RRF)
      continue;
    if (ex->op == RG_QF_RRF) {
      int is_key = 0, ncomp = n;
      for (b = 0; b < q->nblk; b++) if (rank_expr[b] == i) is_key = 1;
      if (!is_key)
        return at(q, i, err, "RRF can only be the key of ORDER BY RANK");
      if (q->ex[a[n - 1]].k == RG_QE_ARRAY) {
        const rg_qexpr *w = &q->ex[a[n - 1]];
        ncomp = n - 1;
        if (w->nlist != ncomp)
          return at(q, a[n - 1], err, "RRF needs one weight per scoring "
                    "function");
        for (j = 0; j < w->nlist; j++) {
          const rg_qexpr *x = &q->ex[q->list[w->list + j]];
          if (!(x->k == RG_QE_PARAM ||
                (x->k == RG_QE_LIT && x->v.t == RG_QV_NUM)))
            return at(q, q->list[w->list + j], err, "RRF's weights are "
                      "numbers");
        }
      }
      if (ncomp < 2)
        return at(q, i, err, "RRF fuses at least two scoring functions");
      for (j = 0; j < ncomp; j++)
        if (!scoring(q, a[j]))
          return at(q, a[j], err, "RRF fuses FullTextScore and "
                    "VectorDistance calls");
      continue;
    }
    for (j = 1; j < n; j++)
      if (!is_const(q, a[j]))
        return at(q, a[j], err, "full-text search terms must be literals "
                  "or parameters");
    if (ex->op == RG_QF_FULLTEXTSCORE &&
        root_path(q, a[0], path, sizeof(path), &pn))
      return at(q, a[0], err, "FullTextScore scores a property path of the "
                "FROM item (such as c.text)");
  }
  return 0;
}

int rg_qfts_rank_desc (const rg_query *q, const rg_qv *params, int32_t e) {
  const rg_qexpr *ex = &q->ex[e];
  (void)params;
  /* FullTextScore: higher is better.  VectorDistance: as its similarity
  ** says (euclidean: a lower distance is better), final once
  ** rg_query_vectors has run, which it has before a pipeline is made */
  if (ex->k == RG_QE_CALL && ex->op == RG_QF_VECTORDISTANCE &&
      ex->slot >= 0 && q->vd)
    return rg_vdist_higher(q->vd[ex->slot].dist);
  return 1;
}

int rg_qfts_rrf (const rg_query *q, const rg_qv *params, int32_t e,
                 int32_t *comp, double *w, int max) {
  const rg_qexpr *ex = &q->ex[e];
  const int32_t *a = rg_qargs(q, ex);
  int n = ex->nlist, i;
  if (n && q->ex[a[n - 1]].k == RG_QE_ARRAY) {
    const rg_qexpr *wl = &q->ex[a[n - 1]];
    n--;
    for (i = 0; i < n && i < max; i++) {
      const rg_qexpr *x = &q->ex[q->list[wl->list + i]];
      const rg_qv *v = x->k == RG_QE_PARAM ? &params[x->slot] : &x->v;
      w[i] = v->t == RG_QV_NUM ? v->d : NAN;
    }
  }
  else for (i = 0; i < n && i < max; i++) w[i] = 1.0;
  for (i = 0; i < n && i < max; i++) comp[i] = a[i];
  return n;
}
/* }===================================================================== */


/*
** {=====================================================================
** Analysis of a call's arguments
** ======================================================================
*/
typedef struct collect {
  rg_arena *a;
  ftterm *t;
  int n, cap, distinct, full;
} collect;

static int add_term (void *ud, const char *s, size_t n, uint32_t pos) {
  collect *c = (collect *)ud;
  int i;
  if (c->distinct)
    for (i = 0; i < c->n; i++)
      if (c->t[i].n == n && memcmp(c->t[i].s, s, n) == 0) return 0;
  if (c->n == c->cap) { c->full = 1; return 1; }
  if ((c->t[c->n].s = rg_arena_dup(c->a, s, n)) == NULL) return -1;
  c->t[c->n].n = (uint32_t)n;
  c->t[c->n].pos = pos;
  c->n++;
  return 0;
}

static int analyze_into (struct rg_qfts *f, int lang, const char *s,
                         size_t n, collect *c) {
  int r = rg_text_analyze(&f->an, lang, 1, s, n, add_term, c);
  return r < 0 ? -1 : 0;
}

/* Reads one search argument (a string, or {term, distance}) into ph. */
static int read_phrase (rg_qctx *x, struct rg_qfts *f, int lang,
                        const rg_qv *v, ftphrase *ph) {
  collect c;
  memset(&c, 0, sizeof(c));
  c.a = &f->mem;
  c.cap = MAX_QTERMS;
  c.t = (ftterm *)rg_arena_alloc(&f->mem, MAX_QTERMS * sizeof(ftterm));
  if (c.t == NULL) return -1;
  ph->dist = 0;
  if (v->t == RG_QV_OBJ) {
    const rg_qnode *t = rg_qnode_member(v->node, "term", 4);
    const rg_qnode *d = rg_qnode_member(v->node, "distance", 8);
    if (t == NULL || t->t != RG_QV_STR) {
      rg_qctx_fail(x, 400, "a fuzzy search term is {term = \"word\", "
                   "distance = 0 to 2}");
      return 1;
    }
    if (d) {
      if (d->t != RG_QV_NUM || d->d != floor(d->d) || d->d < 0 ||
          d->d > 2) {
        rg_qctx_fail(x, 400, "a fuzzy search's distance is 0, 1 or 2");
        return 1;
      }
      ph->dist = (int)d->d;
    }
    if (analyze_into(f, lang, t->s, t->n, &c)) return -1;
  }
  else if (v->t == RG_QV_STR) {
    if (analyze_into(f, lang, v->s, v->n, &c)) return -1;
  }
  else {
    rg_qctx_fail(x, 400, "full-text search terms are strings");
    return 1;
  }
  if (c.full) {
    rg_qctx_fail(x, 400, "a full-text search string has too many terms");
    return 1;
  }
  ph->t = c.t;
  ph->n = c.n;
  return 0;
}

static int lang_of (rg_qctx *x, const char *path, size_t n) {
  int l = x->text && x->text->lang ? x->text->lang(x->text->ud, path, n) : -1;
  return l < 0 || l >= RG_LANG_COUNT ? RG_LANG_EN_US : l;
}

/* Analyzes call node e (its arguments' values: args) once per query;
** NULL after a failure. */
static ftcall *prepare (rg_qctx *x, int32_t e, const rg_qv *args) {
  const rg_query *q = x->q;
  const rg_qexpr *ex = &q->ex[e];
  const int32_t *a = rg_qargs(q, ex);
  struct rg_qfts *f = state(x);
  ftcall *c;
  int i, r;
  if (f == NULL) { x->scratch->oom = 1; return NULL; }
  if ((c = f->call[e]) != NULL && c->ready) return c;
  if (c == NULL) {
    c = (ftcall *)rg_arena_alloc(&f->mem, sizeof(ftcall));
    if (c == NULL) { x->scratch->oom = 1; return NULL; }
    memset(c, 0, sizeof(*c));
    f->call[e] = c;
  }
  if (root_path(q, a[0], c->path, sizeof(c->path), &c->plen) == 0)
    c->lang = lang_of(x, c->path, c->plen);
  else {
    c->plen = 0;
    c->lang = lang_of(x, NULL, 0);
  }
  if (ex->op == RG_QF_FULLTEXTSCORE) {
    collect col;
    uint64_t docs = 0, tokens = 0, *df;
    const char **ts;
    size_t *tl;
    memset(&col, 0, sizeof(col));
    col.a = &f->mem;
    col.cap = MAX_QTERMS;
    col.distinct = 1;
    col.t = (ftterm *)rg_arena_alloc(&f->mem, MAX_QTERMS * sizeof(ftterm));
    if (col.t == NULL) { x->scratch->oom = 1; return NULL; }
    for (i = 1; i < ex->nlist; i++) {
      rg_qv v = args[i];
      if (v.t == RG_QV_ARR) {        /* the older form: an array */
        const rg_qnode *el = v.node + 1;
        uint32_t k;
        for (k = 0; k < v.node->n; k++, el += el->size) {
          if (el->t != RG_QV_STR) {
            rg_qctx_fail(x, 400, "FullTextScore's terms are strings");
            return NULL;
          }
          if (analyze_into(f, c->lang, el->s, el->n, &col)) {
            x->scratch->oom = 1;
            return NULL;
          }
        }
      }
      else if (v.t == RG_QV_STR) {
        if (analyze_into(f, c->lang, v.s, v.n, &col)) {
          x->scratch->oom = 1;
          return NULL;
        }
      }
      else {
        rg_qctx_fail(x, 400, "FullTextScore's terms are strings");
        return NULL;
      }
      if (col.full) {
        rg_qctx_fail(x, 400, "FullTextScore takes at most 256 terms");
        return NULL;
      }
    }
    c->term = col.t;
    c->nterm = col.n;
    c->idf = (double *)rg_arena_alloc(&f->mem, (col.n + 1) * sizeof(double));
    df = (uint64_t *)rg_arena_alloc(&f->mem, (col.n + 1) * sizeof(uint64_t));
    ts = (const char **)rg_arena_alloc(&f->mem, (col.n + 1) * sizeof(char *));
    tl = (size_t *)rg_arena_alloc(&f->mem, (col.n + 1) * sizeof(size_t));
    if (!c->idf || !df || !ts || !tl) { x->scratch->oom = 1; return NULL; }
    for (i = 0; i < col.n; i++) {
      ts[i] = col.t[i].s;
      tl[i] = col.t[i].n;
      df[i] = 0;
    }
    if (x->text == NULL || x->text->stats == NULL) {
      rg_qctx_fail(x, 400, "FullTextScore needs a container's statistics "
                   "(it ranks the documents of a query)");
      return NULL;
    }
    if ((r = x->text->stats(x->text->ud, c->path, c->plen, c->lang, ts, tl,
                            col.n, &docs, &tokens, df, &x->err))) {
      if (!x->status) x->status = r;
      return NULL;
    }
    c->avgdl = docs ? (double)tokens / (double)docs : 0;
    for (i = 0; i < col.n; i++) c->idf[i] = rg_bm25_idf(docs, df[i]);
  }
  else {
    c->nph = ex->nlist - 1;
    c->ph = (ftphrase *)rg_arena_alloc(&f->mem,
                                       (size_t)c->nph * sizeof(ftphrase));
    if (c->ph == NULL) { x->scratch->oom = 1; return NULL; }
    for (i = 0; i < c->nph; i++) {
      rg_qv v = args[i + 1];
      if ((r = read_phrase(x, f, c->lang, &v, &c->ph[i]))) {
        if (r < 0) x->scratch->oom = 1;
        return NULL;
      }
    }
  }
  c->ready = 1;
  return c;
}
/* }===================================================================== */


/*
** {=====================================================================
** Documents
** ======================================================================
*/
static int add_tok (void *ud, const char *s, size_t n, uint32_t pos) {
  ftdoc *d = (ftdoc *)ud;
  if (d->ntok == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    uint32_t *o = (uint32_t *)realloc(d->off, cap * sizeof(uint32_t));
    if (o) d->off = o;
    uint32_t *l = (uint32_t *)realloc(d->len, cap * sizeof(uint32_t));
    if (l) d->len = l;
    uint32_t *p = (uint32_t *)realloc(d->pos, cap * sizeof(uint32_t));
    if (p) d->pos = p;
    if (!o || !l || !p) return -1;
    d->cap = cap;
  }
  d->off[d->ntok] = (uint32_t)d->bytes.n;
  d->len[d->ntok] = (uint32_t)n;
  d->pos[d->ntok] = pos;
  rg_buf_add(&d->bytes, s, n);
  if (d->bytes.oom) return -1;
  d->ntok++;
  return 0;
}

/* The row's analysis of text s in lang; NULL out of memory. */
static ftdoc *doc_of (rg_qctx *x, const char *s, size_t n, int lang) {
  struct rg_qfts *f = x->fts;
  ftdoc *d;
  int i;
  for (i = 0; i < DOC_CACHE; i++) {
    d = &f->doc[i];
    if (d->used && d->s == s && d->n == n && d->lang == lang) return d;
  }
  d = &f->doc[f->next++ % DOC_CACHE];
  d->used = 0;
  d->ntok = 0;
  d->bytes.n = 0;
  d->bytes.oom = 0;
  if (rg_text_analyze(&f->an, lang, 1, s, n, add_tok, d)) return NULL;
  d->s = s;
  d->n = n;
  d->lang = lang;
  d->used = 1;
  return d;
}

static int tok_is (const ftdoc *d, size_t i, const ftterm *t, int dist) {
  const char *s = d->bytes.p + d->off[i];
  if (dist == 0)
    return d->len[i] == t->n && memcmp(s, t->s, t->n) == 0;
  return rg_text_edits(s, d->len[i], t->s, t->n, dist) <= dist;
}

/* Does the phrase occur in the document? */
static int has_phrase (const ftdoc *d, const ftphrase *ph) {
  size_t i, j;
  int k;
  if (ph->n == 0) return 0;
  for (i = 0; i < d->ntok; i++) {
    if (!tok_is(d, i, &ph->t[0], ph->dist)) continue;
    for (k = 1; k < ph->n; k++) {
      uint32_t want = d->pos[i] + (ph->t[k].pos - ph->t[0].pos);
      int found = 0;
      /* positions ascend: look ahead until past the wanted one */
      for (j = i + 1; j < d->ntok && d->pos[j] <= want; j++)
        if (d->pos[j] == want && tok_is(d, j, &ph->t[k], ph->dist)) {
          found = 1;
          break;
        }
      if (!found) break;
    }
    if (k == ph->n) return 1;
  }
  return 0;
}

void rg_qfts_call (rg_qctx *x, int32_t e, const rg_qv *args, int n,
                   rg_qv *out) {
  const rg_qexpr *ex = &x->q->ex[e];
  ftcall *c;
  ftdoc *d;
  rg_qv v;
  int i;
  rg_qv_undef(out);
  if (ex->op == RG_QF_RRF) {
    rg_qctx_fail(x, 400, "RRF can only be the key of ORDER BY RANK");
    return;
  }
  rg_assert(n == ex->nlist);
  if ((c = prepare(x, e, args)) == NULL) return;
  v = args[0];
  if (v.t != RG_QV_STR) {
    if (ex->op != RG_QF_FULLTEXTSCORE) rg_qv_bool(out, 0);
    return;
  }
  if ((d = doc_of(x, v.s, v.n, c->lang)) == NULL) {
    x->scratch->oom = 1;
    return;
  }
  switch (ex->op) {
    case RG_QF_FULLTEXTCONTAINS:
    case RG_QF_FULLTEXTCONTAINSALL:
      for (i = 0; i < c->nph; i++)
        if (!has_phrase(d, &c->ph[i])) { rg_qv_bool(out, 0); return; }
      rg_qv_bool(out, c->nph > 0);
      return;
    case RG_QF_FULLTEXTCONTAINSANY:
      for (i = 0; i < c->nph; i++)
        if (has_phrase(d, &c->ph[i])) { rg_qv_bool(out, 1); return; }
      rg_qv_bool(out, 0);
      return;
    default: {                       /* FullTextScore */
      double score = 0;
      size_t j;
      for (i = 0; i < c->nterm; i++) {
        uint32_t tf = 0;
        for (j = 0; j < d->ntok; j++)
          if (d->len[j] == c->term[i].n &&
              memcmp(d->bytes.p + d->off[j], c->term[i].s, c->term[i].n) == 0)
            tf++;
        score += rg_bm25_term(c->idf[i], tf, (uint32_t)d->ntok, c->avgdl);
      }
      rg_qv_num(out, score);
    }
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** The terms an index answers
** ======================================================================
*/
#define MAX_ITERMS 64        /* terms of an index search (ftindex.h) */

static int collect_init (collect *c, rg_arena *mem, int distinct) {
  memset(c, 0, sizeof(*c));
  c->a = mem;
  c->cap = MAX_QTERMS;
  c->distinct = distinct;
  c->t = (ftterm *)rg_arena_alloc(mem, MAX_QTERMS * sizeof(ftterm));
  return c->t == NULL ? -1 : 0;
}

static int terms_out (const collect *c, rg_arena *mem, rg_qftterms *out) {
  int i;
  out->n = c->n;
  out->t = (const char **)rg_arena_alloc(mem, ((size_t)c->n + 1) *
                                              sizeof(char *));
  out->len = (size_t *)rg_arena_alloc(mem, ((size_t)c->n + 1) *
                                           sizeof(size_t));
  if (out->t == NULL || out->len == NULL) return -1;
  for (i = 0; i < c->n; i++) {
    out->t[i] = c->t[i].s;
    out->len[i] = c->t[i].n;
  }
  return 1;
}

/* The strings of a search argument: a string, or an array of them (a
** literal's items or a parameter's); 0 when it is something else. */
static int arg_strings (const rg_query *q, const rg_qv *params, int32_t e,
                        rg_analyzer *an, int lang, collect *c, int *r) {
  const rg_qexpr *a = &q->ex[e];
  const rg_qv *v = a->k == RG_QE_LIT ? &a->v
                 : a->k == RG_QE_PARAM && params ? &params[a->slot] : NULL;
  int k;
  if (a->k == RG_QE_ARRAY) {
    for (k = 0; k < a->nlist; k++) {
      const rg_qexpr *el = &q->ex[q->list[a->list + k]];
      if (el->k == RG_QE_ARRAY ||
          !arg_strings(q, params, q->list[a->list + k], an, lang, c, r))
        return 0;
    }
    return 1;
  }
  if (v == NULL) return 0;
  if (v->t == RG_QV_ARR && a->k == RG_QE_PARAM) {
    const rg_qnode *el = v->node + 1;
    uint32_t i;
    for (i = 0; i < v->node->n; i++, el += el->size) {
      if (el->t != RG_QV_STR) return 0;
      if (rg_text_analyze(an, lang, 1, el->s, el->n, add_term, c) < 0)
        *r = -1;
    }
    return 1;
  }
  if (v->t != RG_QV_STR) return 0;
  if (rg_text_analyze(an, lang, 1, v->s, v->n, add_term, c) < 0) *r = -1;
  return 1;
}

/* FullTextScore's terms: every distinct term of its strings, in order
** (prepare's), any of which gives a row a score above 0. */
static int score_terms (const rg_query *q, const rg_qv *params,
                        const rg_qexpr *ex, int lang, rg_arena *mem,
                        rg_qftterms *out) {
  rg_analyzer an;
  collect c;
  int i, r = 1;
  if (collect_init(&c, mem, 1)) return -1;
  rg_analyzer_init(&an);
  for (i = 1; i < ex->nlist && r == 1; i++)
    if (!arg_strings(q, params, q->list[ex->list + i], &an, lang, &c, &r))
      r = 0;
  rg_analyzer_free(&an);
  if (r != 1) return r;
  if (c.full || c.n == 0 || c.n > MAX_ITERMS) return 0;
  out->all = 0;
  return terms_out(&c, mem, out);
}

int rg_qfts_terms (const rg_query *q, const rg_qv *params, int32_t e,
                   int (*lang) (void *ud, const char *path, size_t n),
                   void *ud, rg_arena *mem, rg_qftterms *out) {
  const rg_qexpr *ex = &q->ex[e];
  rg_analyzer an;
  collect c;
  int i, l, any, r = 1;
  if (ex->k != RG_QE_CALL || ex->nlist < 2 ||
      (ex->op != RG_QF_FULLTEXTCONTAINS &&
       ex->op != RG_QF_FULLTEXTCONTAINSALL &&
       ex->op != RG_QF_FULLTEXTCONTAINSANY &&
       ex->op != RG_QF_FULLTEXTSCORE))
    return 0;
  memset(out, 0, sizeof(*out));
  if (root_path(q, q->list[ex->list], out->path, sizeof(out->path),
                &out->plen))
    return 0;
  l = lang(ud, out->path, out->plen);
  if (l < 0 || l >= RG_LANG_COUNT) l = RG_LANG_EN_US;
  if (ex->op == RG_QF_FULLTEXTSCORE)
    return score_terms(q, params, ex, l, mem, out);
  any = ex->op == RG_QF_FULLTEXTCONTAINSANY;
  out->all = !any;
  if (collect_init(&c, mem, 1)) return -1;
  rg_analyzer_init(&an);
  for (i = 1; i < ex->nlist && r == 1; i++) {
    const rg_qexpr *a = &q->ex[q->list[ex->list + i]];
    const rg_qv *v = a->k == RG_QE_LIT ? &a->v
                   : a->k == RG_QE_PARAM && params ? &params[a->slot] : NULL;
    int before = c.n, k;
    if (v == NULL || v->t != RG_QV_STR) {   /* fuzzy, or not a string */
      if (any) r = 0;
      continue;
    }
    k = rg_text_analyze(&an, l, 1, v->s, v->n, add_term, &c);
    if (k < 0) r = -1;
    else if (c.full) { if (any) r = 0; c.full = 0; }
    else if (c.n == before && !any) {
      /* an empty phrase is never found (has_phrase); a phrase of terms
      ** already taken adds nothing */
      int phrase_terms = 0;
      collect d;
      if (collect_init(&d, mem, 0)) r = -1;
      else if (rg_text_analyze(&an, l, 1, v->s, v->n, add_term, &d) < 0)
        r = -1;
      else phrase_terms = d.n;
      if (r == 1 && phrase_terms == 0 && !d.full) out->none = 1;
    }
  }
  rg_analyzer_free(&an);
  if (r != 1) return r;
  if (c.n > MAX_ITERMS) {
    if (any) return 0;
    c.n = MAX_ITERMS;                /* All: a subset of the terms */
  }
  if (c.n == 0 && !out->none) return 0;
  return terms_out(&c, mem, out);
}
/* }===================================================================== */


/*
** {=====================================================================
** Statistics of a scan
** ======================================================================
*/
struct rg_ftacc {
  rg_analyzer an;
  rg_arena mem, docmem;
  rg_tape tape;
  int lang, nseg, nterm;
  const char **seg;
  size_t *slen;
  ftterm *term;
  uint64_t docs, tokens, *df;
  uint8_t *seen;
  uint32_t dl;
};

int rg_ftacc_new (rg_ftacc **out, const char *path, size_t pn, int lang,
                  const char *const *terms, const size_t *lens, int nterms) {
  rg_ftacc *a = (rg_ftacc *)calloc(1, sizeof(*a));
  size_t i, s;
  int k;
  *out = NULL;
  if (a == NULL) return 500;
  rg_arena_init(&a->mem);
  rg_arena_init(&a->docmem);
  a->lang = lang;
  a->nterm = nterms;
  a->seg = (const char **)rg_arena_alloc(&a->mem, (pn + 1) * sizeof(char *));
  a->slen = (size_t *)rg_arena_alloc(&a->mem, (pn + 1) * sizeof(size_t));
  a->term = (ftterm *)rg_arena_alloc(&a->mem, (nterms + 1) * sizeof(ftterm));
  a->df = (uint64_t *)rg_arena_alloc(&a->mem, (nterms + 1) * sizeof(uint64_t));
  a->seen = (uint8_t *)rg_arena_alloc(&a->mem, (size_t)nterms + 1);
  if (!a->seg || !a->slen || !a->term || !a->df || !a->seen) goto fail;
  for (i = 0; i < pn; i = s) {       /* "/a/b": segments a, b */
    if (path[i] == '/') i++;
    for (s = i; s < pn && path[s] != '/'; s++) {}
    if ((a->seg[a->nseg] = rg_arena_dup(&a->mem, path + i, s - i)) == NULL)
      goto fail;
    a->slen[a->nseg++] = s - i;
  }
  for (k = 0; k < nterms; k++) {
    if ((a->term[k].s = rg_arena_dup(&a->mem, terms[k], lens[k])) == NULL)
      goto fail;
    a->term[k].n = (uint32_t)lens[k];
    a->df[k] = 0;
  }
  rg_analyzer_init(&a->an);
  *out = a;
  return 0;
fail:
  rg_arena_free(&a->mem);
  free(a);
  return 500;
}

static int acc_tok (void *ud, const char *s, size_t n, uint32_t pos) {
  rg_ftacc *a = (rg_ftacc *)ud;
  int k;
  (void)pos;
  a->dl++;
  for (k = 0; k < a->nterm; k++)
    if (!a->seen[k] && a->term[k].n == n && memcmp(a->term[k].s, s, n) == 0)
      a->seen[k] = 1;
  return 0;
}

int rg_ftacc_doc (rg_ftacc *a, const char *json, size_t n) {
  const rg_qnode *nd;
  int k, r;
  rg_arena_reset(&a->docmem);
  if ((r = rg_tape_parse(&a->tape, &a->docmem, json, n)))
    return r == 500 ? 500 : 0;       /* not JSON: no text */
  nd = &a->tape.node[0];
  for (k = 0; k < a->nseg && nd; k++)
    nd = nd->t == RG_QV_OBJ ? rg_qnode_member(nd, a->seg[k], a->slen[k])
                            : NULL;
  if (nd == NULL || nd->t != RG_QV_STR) return 0;
  a->dl = 0;
  memset(a->seen, 0, (size_t)a->nterm);
  if (rg_text_analyze(&a->an, a->lang, 1, nd->s, nd->n, acc_tok, a))
    return 500;
  a->docs++;
  a->tokens += a->dl;
  for (k = 0; k < a->nterm; k++) a->df[k] += a->seen[k];
  return 0;
}

void rg_ftacc_result (const rg_ftacc *a, uint64_t *docs, uint64_t *tokens,
                      uint64_t *df) {
  int k;
  *docs = a->docs;
  *tokens = a->tokens;
  for (k = 0; k < a->nterm; k++) df[k] = a->df[k];
}

void rg_ftacc_free (rg_ftacc *a) {
  if (a == NULL) return;
  rg_tape_free(&a->tape);
  rg_analyzer_free(&a->an);
  rg_arena_free(&a->mem);
  rg_arena_free(&a->docmem);
  free(a);
}
/* }===================================================================== */
