/*
** ftindex.c: the full-text index (ftindex.h): posting blocks, lengths and
** statistics in one ordered table; the writer that merges a transaction's
** changes into it; block-max MaxScore for the top k; intersections.
**
** Blocks carry, instead of one (max tf, min dl) pair, the "competitive"
** pairs of their postings (the Pareto front: no pair beaten on both tf and
** dl by another), at most FRONT of them (neighbours merged into one pair
** taking the larger tf and the smaller dl, which still bounds both), so
** that a block's bound is the best BM25 factor any of its postings can
** reach under the current average length.  The writer recomputes the
** front of every block it rewrites from the lengths table.
*/

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/ftindex.h"
#include "store/layout.h"

#define FRONT       4                /* competitive pairs of a block */
#define MAX_TERM    RG_TEXT_MAX_TOKEN
#define FH          RG_FTEXT_HEAD    /* cid | index id | kind */
#define KEY_MAX     (FH + MAX_TERM + 1 + 4)
#define MAX_QUERY   64               /* terms of a search */
#define END         UINT32_MAX

/*
** {=====================================================================
** Encoding
** ======================================================================
*/
static size_t put_varint (uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) { p[n++] = (uint8_t)(v | 0x80); v >>= 7; }
  p[n++] = (uint8_t)v;
  return n;
}

/* Reads a varint: 0, or -1 past the end or too long. */
static int get_varint (const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  int shift = 0;
  while (*p < end && shift < 64) {
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) { *v = r; return 0; }
    shift += 7;
  }
  return -1;
}

static size_t key_head (uint8_t *k, uint8_t kind, uint64_t fid) {
  return rg_key_ftext(k, (uint32_t)(fid >> 32), (uint32_t)fid, -1, kind);
}

/* 'P' | fid | term | 00: the prefix of a term's blocks */
static size_t key_term (uint8_t *k, uint64_t fid, const char *t, size_t n) {
  size_t m = key_head(k, 'P', fid);
  memcpy(k + m, t, n);
  m += n;
  k[m++] = 0;
  return m;
}

/*
** The table over the seam: the cursor's key and value are given as the
** seam gives them (valid until the next operation).
*/
static int seam_rc (rg_fti_seam *st, int rc) {
  if (rc == 0) return 0;
  if (rc == RG_NOTFOUND) return 1;
  st->rc = rc;
  return 500;
}

/* A key as the table holds it: where the seam keeps one bucket's records
** (a remote database, ftindex.h), its bucket after the index's prefix. */
#define SEAM_KEY (KEY_MAX + 2)
static const uint8_t *seam_key (const rg_fti_seam *st, const uint8_t *k,
                                size_t *kn, uint8_t *buf) {
  if (st->bucket < 0 || *kn < RG_FTEXT_PREFIX || *kn > KEY_MAX) return k;
  memcpy(buf, k, RG_FTEXT_PREFIX);
  rg_put_u16(buf + RG_FTEXT_PREFIX, (uint16_t)st->bucket);
  memcpy(buf + RG_FTEXT_PREFIX + 2, k + RG_FTEXT_PREFIX,
         *kn - RG_FTEXT_PREFIX);
  *kn += 2;
  return buf;
}

static int seam_get (void *ud, const uint8_t *k, size_t kn, rg_slice *v) {
  rg_fti_seam *st = (rg_fti_seam *)ud;
  uint8_t b[SEAM_KEY];
  rg_val x;
  int rc;
  k = seam_key(st, k, &kn, b);
  rc = rg_kv_get(st->txn, RG_DB_FTEXT, k, kn, &x);
  if (rc == 0) { v->p = (const uint8_t *)x.p; v->n = x.n; }
  return seam_rc(st, rc);
}

static int seam_put (void *ud, const uint8_t *k, size_t kn, const uint8_t *v,
                     size_t vn) {
  rg_fti_seam *st = (rg_fti_seam *)ud;
  uint8_t b[SEAM_KEY];
  k = seam_key(st, k, &kn, b);
  return seam_rc(st, rg_kv_put(st->txn, RG_DB_FTEXT, k, kn, v, vn, 0));
}

static int seam_del (void *ud, const uint8_t *k, size_t kn) {
  rg_fti_seam *st = (rg_fti_seam *)ud;
  uint8_t b[SEAM_KEY];
  k = seam_key(st, k, &kn, b);
  return seam_rc(st, rg_kv_del(st->txn, RG_DB_FTEXT, k, kn));
}

typedef struct seam_cur {
  rg_fti_seam *st;
  rg_cur *c;
  uint8_t key[SEAM_KEY];             /* a key given without its bucket */
} seam_cur;

static void *seam_open (void *ud) {
  rg_fti_seam *st = (rg_fti_seam *)ud;
  seam_cur *c = (seam_cur *)malloc(sizeof(*c));
  int rc;
  if (c == NULL) return NULL;
  c->st = st;
  if ((rc = rg_cur_open(st->txn, RG_DB_FTEXT, &c->c))) {
    st->rc = rc;
    free(c);
    return NULL;
  }
  return c;
}

/* A cursor of one bucket's records walks that bucket's place alone (its
** keys all carry it): the key is given back without it. */
static int seam_move (seam_cur *c, rg_val *k, rg_slice *ko, rg_slice *vo,
                      int op) {
  rg_val v;
  int rc = rg_cur_get(c->c, k, &v, op);
  if (rc == 0) {
    ko->p = (const uint8_t *)k->p;
    ko->n = k->n;
    if (c->st->bucket >= 0 && k->n >= RG_FTEXT_PREFIX + 2 &&
        k->n - 2 <= KEY_MAX) {
      memcpy(c->key, k->p, RG_FTEXT_PREFIX);
      memcpy(c->key + RG_FTEXT_PREFIX,
             (const uint8_t *)k->p + RG_FTEXT_PREFIX + 2,
             k->n - RG_FTEXT_PREFIX - 2);
      ko->p = c->key;
      ko->n = k->n - 2;
    }
    vo->p = (const uint8_t *)v.p;
    vo->n = v.n;
  }
  return seam_rc(c->st, rc);
}

static int seam_seek (void *cur, const uint8_t *k, size_t kn, rg_slice *ko,
                      rg_slice *vo) {
  seam_cur *c = (seam_cur *)cur;
  uint8_t b[SEAM_KEY];
  rg_val x;
  x.p = seam_key(c->st, k, &kn, b);
  x.n = kn;
  return seam_move(c, &x, ko, vo, RG_SEEK);
}

static int seam_next (void *cur, rg_slice *ko, rg_slice *vo) {
  rg_val x;
  return seam_move((seam_cur *)cur, &x, ko, vo, RG_NEXT);
}

static int seam_prev (void *cur, rg_slice *ko, rg_slice *vo) {
  rg_val x;
  return seam_move((seam_cur *)cur, &x, ko, vo, RG_PREV);
}

static void seam_close (void *cur) {
  seam_cur *c = (seam_cur *)cur;
  if (c == NULL) return;
  rg_cur_close(c->c);
  free(c);
}

void rg_fti_seam_init (rg_ftkv *kv, rg_fti_seam *st, struct rg_txn *txn) {
  st->txn = txn;
  st->rc = 0;
  st->bucket = -1;
  kv->ud = st;
  kv->get = seam_get;
  kv->put = seam_put;
  kv->del = seam_del;
  kv->open = seam_open;
  kv->seek = seam_seek;
  kv->next = seam_next;
  kv->prev = seam_prev;
  kv->close = seam_close;
}

typedef struct pair { uint32_t tf, dl; } pair;

/* A term's header, in its last block. */
typedef struct thead {
  uint64_t df;
  pair front[FRONT];
  int nfront;
} thead;

/* A block's head: what precedes its postings. */
typedef struct bhead {
  uint32_t n, first, last;
  pair front[FRONT];
  int nfront;
  int is_last;
  thead th;                          /* is_last */
  const uint8_t *post;               /* its postings' bytes */
  size_t plen;
} bhead;

typedef struct block {
  bhead h;
  uint32_t doc[RG_FTI_BLOCK];
  uint32_t tf[RG_FTI_BLOCK];
} block;

static int get_pairs (const uint8_t **p, const uint8_t *end, pair *f,
                      int *nf) {
  uint64_t v, w;
  int i;
  if (get_varint(p, end, &v) || v == 0 || v > FRONT) return -1;
  *nf = (int)v;
  for (i = 0; i < *nf; i++) {
    if (get_varint(p, end, &v) || get_varint(p, end, &w) || v == 0 ||
        v > UINT32_MAX || w > UINT32_MAX)
      return -1;
    f[i].tf = (uint32_t)v;
    f[i].dl = (uint32_t)w;
  }
  return 0;
}

static size_t put_pairs (uint8_t *out, const pair *f, int nf) {
  size_t m = put_varint(out, (uint64_t)nf);
  int i;
  for (i = 0; i < nf; i++) {
    m += put_varint(out + m, f[i].tf);
    m += put_varint(out + m, f[i].dl);
  }
  return m;
}

static int decode_head (uint32_t first, const uint8_t *p, size_t len,
                        bhead *h) {
  const uint8_t *end = p + len;
  uint64_t v, span;
  if (get_varint(&p, end, &v) || (v >> 1) == 0 || (v >> 1) > RG_FTI_BLOCK)
    return -1;
  h->n = (uint32_t)(v >> 1);
  h->is_last = (int)(v & 1);
  if (get_varint(&p, end, &span) || span > (uint64_t)(END - 1 - first) ||
      (h->n == 1) != (span == 0))
    return -1;
  h->first = first;
  h->last = first + (uint32_t)span;
  if (get_pairs(&p, end, h->front, &h->nfront)) return -1;
  if (h->is_last) {
    if (get_varint(&p, end, &h->th.df) || h->th.df == 0 ||
        get_pairs(&p, end, h->th.front, &h->th.nfront))
      return -1;
  }
  h->post = p;
  h->plen = (size_t)(end - p);
  return 0;
}

static int decode_block (uint32_t first, const uint8_t *p, size_t len,
                         block *b) {
  const uint8_t *q, *end;
  uint64_t v, w;
  uint32_t i, d = first;
  if (decode_head(first, p, len, &b->h)) return -1;
  q = b->h.post;
  end = q + b->h.plen;
  for (i = 0; i < b->h.n; i++) {     /* delta << 1 | (tf > 1) [, tf] */
    uint64_t delta;
    if (get_varint(&q, end, &v)) return -1;
    delta = v >> 1;
    if (i == 0 ? delta != 0 : (delta == 0 || delta > (uint64_t)(END - 1 - d)))
      return -1;
    d += (uint32_t)delta;
    b->doc[i] = d;
    if (v & 1) {
      if (get_varint(&q, end, &w) || w < 2 || w > UINT32_MAX) return -1;
      b->tf[i] = (uint32_t)w;
    }
    else b->tf[i] = 1;
  }
  return q == end && d == b->h.last ? 0 : -1;
}

/* Encodes postings (prev: the doc before the first, 0 for a block's
** first posting); their bytes. */
static size_t encode_posts (const uint32_t *doc, const uint32_t *tf,
                            uint32_t n, uint32_t prev, uint8_t *out) {
  size_t m = 0;
  uint32_t i;
  for (i = 0; i < n; i++) {
    uint64_t delta = prev ? doc[i] - prev : 0;
    m += put_varint(out + m, delta << 1 | (tf[i] > 1));
    if (tf[i] > 1) m += put_varint(out + m, tf[i]);
    prev = doc[i];
  }
  return m;
}

/* A block's head (th: the term's header when it is the last block). */
static size_t encode_head (uint32_t n, uint32_t span, const pair *front,
                           int nf, const thead *th, uint8_t *out) {
  size_t m = put_varint(out, (uint64_t)n << 1 | (th != NULL));
  m += put_varint(out + m, span);
  m += put_pairs(out + m, front, nf);
  if (th) {
    m += put_varint(out + m, th->df);
    m += put_pairs(out + m, th->front, th->nfront);
  }
  return m;
}

#define HEAD_MAX (3 * 10 + 2 * (1 + FRONT * 10))
#define VALUE_MAX (HEAD_MAX + RG_FTI_BLOCK * 10)

static int pair_cmp (const void *a, const void *b) {
  const pair *x = (const pair *)a, *y = (const pair *)b;
  if (x->dl != y->dl) return x->dl < y->dl ? -1 : 1;
  return x->tf > y->tf ? -1 : x->tf < y->tf;
}

/* The competitive pairs of n (tf, dl) pairs (sorted in place), merged down
** to at most FRONT; their count (out may be p). */
static int make_front (pair *p, size_t n, pair *out) {
  size_t i;
  int m = 0;
  qsort(p, n, sizeof(pair), pair_cmp);
  for (i = 0; i < n; i++) {          /* dl ascending: keep rising tf */
    if (m && p[i].tf <= out[m - 1].tf) continue;
    if (m == FRONT) {                /* merge into the last */
      out[m - 1].tf = p[i].tf;
      continue;
    }
    out[m++] = p[i];
  }
  return m;
}

/* BM25's factor for a pair (rg_bm25_term without the idf). */
static double factor (uint32_t tf, uint32_t dl, double avgdl) {
  return rg_bm25_term(1.0, tf, dl, avgdl);
}

static double front_bound (const pair *f, int n, double avgdl) {
  double best = 0;
  int i;
  for (i = 0; i < n; i++) {
    double s = factor(f[i].tf, f[i].dl, avgdl);
    if (s > best) best = s;
  }
  return best;
}

static int in_term (const rg_slice *k, const uint8_t *prefix, size_t plen) {
  return k->n == plen + 4 && memcmp(k->p, prefix, plen) == 0;
}

/* Puts the cursor on a term's last block: 0 (ko, vo set), 1 (the term has
** none), or a status. */
static int last_block (const rg_ftkv *kv, void *cur, const uint8_t *prefix,
                       size_t plen, rg_slice *ko, rg_slice *vo) {
  uint8_t k[KEY_MAX];
  int r;
  memcpy(k, prefix, plen);
  rg_put_u32(k + plen, END);
  r = kv->seek(cur, k, plen + 4, ko, vo);
  if (r > 1) return r;
  r = kv->prev(cur, ko, vo);
  if (r > 1) return r;
  return r == 0 && in_term(ko, prefix, plen) ? 0 : 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Lengths and statistics
** ======================================================================
*/
#define NORM_SHIFT 7
#define NORM_N     (1u << NORM_SHIFT)

/* A document's length plus one (0: not indexed), through a one-block
** cache; 0, or a status. */
typedef struct norms {
  const rg_ftkv *kv;
  uint64_t fid, blk;
  int have;
  uint8_t v[NORM_N * 4];
} norms;

static int norm_get (norms *c, uint32_t doc, uint32_t *dl1) {
  uint32_t blk = doc >> NORM_SHIFT;
  if (!c->have || c->blk != blk) {
    uint8_t k[FH + 4];
    rg_slice v;
    int rc;
    key_head(k, 'N', c->fid);
    rg_put_u32(k + FH, blk);
    rc = c->kv->get(c->kv->ud, k, FH + 4, &v);
    if (rc > 1) return rc;
    if (rc == 1 || v.n != sizeof(c->v)) memset(c->v, 0, sizeof(c->v));
    else memcpy(c->v, v.p, sizeof(c->v));
    c->blk = blk;
    c->have = 1;
  }
  *dl1 = rg_get_u32(c->v + 4 * (doc & (NORM_N - 1)));
  return 0;
}

static int read_stats (const rg_ftkv *kv, uint64_t fid, uint64_t *docs,
                       uint64_t *tokens) {
  uint8_t k[FH];
  rg_slice v;
  int rc;
  key_head(k, 'S', fid);
  rc = kv->get(kv->ud, k, FH, &v);
  *docs = *tokens = 0;
  if (rc > 1) return rc;
  if (rc == 0 && v.n == 16) {
    *docs = rg_get_u64(v.p);
    *tokens = rg_get_u64(v.p + 8);
  }
  return 0;
}

/* A term's header: 0 (found), 1 (no such term), or a status. */
static int read_thead (const rg_ftkv *kv, void *cur, uint64_t fid,
                       const char *t, size_t n, thead *h) {
  uint8_t prefix[KEY_MAX];
  size_t plen = key_term(prefix, fid, t, n);
  rg_slice ko, vo;
  bhead bh;
  int r;
  memset(h, 0, sizeof(*h));
  if ((r = last_block(kv, cur, prefix, plen, &ko, &vo))) return r;
  if (decode_head(rg_get_u32(ko.p + plen), vo.p, vo.n, &bh) || !bh.is_last)
    return 500;
  *h = bh.th;
  return 0;
}

int rg_fti_stats (const rg_ftkv *kv, uint64_t fid, const char *const *terms,
                  const size_t *lens, int nterms, uint64_t *docs,
                  uint64_t *tokens, uint64_t *df, rg_err *e) {
  void *cur;
  int i, rc;
  if ((rc = read_stats(kv, fid, docs, tokens)))
    return rg_fail(e, rc, "full-text index: storage failed");
  if ((cur = kv->open(kv->ud)) == NULL) return rg_fail(e, 500, "out of memory");
  for (i = 0; i < nterms; i++) {
    thead h;
    if (lens[i] > MAX_TERM) { df[i] = 0; continue; }
    if ((rc = read_thead(kv, cur, fid, terms[i], lens[i], &h)) > 1) {
      kv->close(cur);
      return rg_fail(e, rc, "full-text index: %s", rc == 500 ?
                     "a block is corrupt" : "storage failed");
    }
    df[i] = rc == 0 ? h.df : 0;
  }
  kv->close(cur);
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Writing
** ======================================================================
*/
typedef struct op {                  /* one pending change of a term */
  uint32_t doc, tf, seq, dl;         /* tf 0: removed */
} op;

typedef struct pterm {
  char *t;
  uint32_t n;
  op *ops;
  size_t nops, cap;
} pterm;

typedef struct dop { uint32_t doc, dl1, seq; } dop;   /* dl1 0: removed */

/* Postings merged, waiting to be cut into blocks; dl END: a stored
** posting's (unknown here). */
typedef struct run {
  uint32_t doc[2 * RG_FTI_BLOCK], tf[2 * RG_FTI_BLOCK], dl[2 * RG_FTI_BLOCK];
} run;

struct rg_fti_writer {
  rg_ftkv kv;
  uint64_t fid;
  int lang;
  rg_analyzer an;
  pterm *terms;                      /* open addressing, power of 2 */
  size_t nterms, cap;
  dop *docs;
  size_t ndocs, dcap;
  int64_t ddocs, dtokens;            /* statistics' changes */
  uint32_t seq;
  /* the document being analyzed: its distinct terms, and their hash */
  struct { char *t; uint32_t n, tf; } *cur;
  size_t ncur, ccap;
  uint32_t *hslot, hcap;             /* indexes into cur, END empty */
  uint32_t dl;
  /* flushing */
  block *old;
  run *neu;
  uint8_t *val;                      /* VALUE_MAX bytes */
  void *kc;                          /* one cursor for the whole flush */
  pair tfront[RG_FTI_BLOCK + 2 * FRONT];
  int ntfront;                       /* the fronts of the blocks written */
};

int rg_fti_writer_new (rg_fti_writer **out, const rg_ftkv *kv, uint64_t fid,
                       int lang) {
  rg_fti_writer *w = (rg_fti_writer *)calloc(1, sizeof(*w));
  *out = NULL;
  if (w == NULL) return 500;
  w->kv = *kv;
  w->fid = fid;
  w->lang = lang;
  rg_analyzer_init(&w->an);
  w->old = (block *)malloc(sizeof(block));
  w->neu = (run *)malloc(sizeof(run));
  w->val = (uint8_t *)malloc(VALUE_MAX);
  if (w->old == NULL || w->neu == NULL || w->val == NULL) {
    rg_fti_writer_free(w);
    return 500;
  }
  *out = w;
  return 0;
}

void rg_fti_writer_free (rg_fti_writer *w) {
  size_t i;
  if (w == NULL) return;
  for (i = 0; i < w->cap; i++) {
    free(w->terms[i].t);
    free(w->terms[i].ops);
  }
  free(w->terms);
  free(w->docs);
  for (i = 0; i < w->ccap; i++) free(w->cur[i].t);
  free(w->cur);
  free(w->hslot);
  free(w->old);
  free(w->neu);
  free(w->val);
  rg_analyzer_free(&w->an);
  free(w);
}

static uint32_t fnv (const char *s, size_t n) {
  uint32_t h = 2166136261u;
  size_t i;
  for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static pterm *term_slot (rg_fti_writer *w, const char *t, size_t n) {
  size_t i;
  if ((w->nterms + 1) * 2 > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1024, j;
    pterm *nt = (pterm *)calloc(cap, sizeof(pterm));
    if (nt == NULL) return NULL;
    for (j = 0; j < w->cap; j++) {
      pterm *o = &w->terms[j];
      if (o->t == NULL) continue;
      for (i = fnv(o->t, o->n) & (cap - 1); nt[i].t; i = (i + 1) & (cap - 1)) {}
      nt[i] = *o;
    }
    free(w->terms);
    w->terms = nt;
    w->cap = cap;
  }
  for (i = fnv(t, n) & (w->cap - 1); w->terms[i].t;
       i = (i + 1) & (w->cap - 1))
    if (w->terms[i].n == n && memcmp(w->terms[i].t, t, n) == 0)
      return &w->terms[i];
  if ((w->terms[i].t = (char *)malloc(n + 1)) == NULL) return NULL;
  memcpy(w->terms[i].t, t, n);
  w->terms[i].n = (uint32_t)n;
  w->nterms++;
  return &w->terms[i];
}

/* Collects one document's distinct terms and counts. */
static int cur_term (void *ud, const char *t, size_t n, uint32_t pos) {
  rg_fti_writer *w = (rg_fti_writer *)ud;
  uint32_t h = fnv(t, n), i;
  size_t j;
  (void)pos;
  w->dl++;
  if ((w->ncur + 1) * 2 > w->hcap) { /* grow, and rehash */
    uint32_t cap = w->hcap ? w->hcap * 2 : 256, *nh;
    if ((nh = (uint32_t *)malloc(cap * sizeof(uint32_t))) == NULL) return -1;
    memset(nh, 0xFF, cap * sizeof(uint32_t));
    for (j = 0; j < w->ncur; j++) {
      for (i = fnv(w->cur[j].t, w->cur[j].n) & (cap - 1); nh[i] != END;
           i = (i + 1) & (cap - 1)) {}
      nh[i] = (uint32_t)j;
    }
    free(w->hslot);
    w->hslot = nh;
    w->hcap = cap;
  }
  for (i = h & (w->hcap - 1); w->hslot[i] != END; i = (i + 1) & (w->hcap - 1)) {
    size_t c = w->hslot[i];
    if (w->cur[c].n == n && memcmp(w->cur[c].t, t, n) == 0) {
      w->cur[c].tf++;
      return 0;
    }
  }
  if (w->ncur == w->ccap) {
    size_t cap = w->ccap ? w->ccap * 2 : 64;
    void *p = realloc(w->cur, cap * sizeof(*w->cur));
    if (p == NULL) return -1;
    w->cur = p;
    memset(w->cur + w->ccap, 0, (cap - w->ccap) * sizeof(*w->cur));
    w->ccap = cap;
  }
  if (w->cur[w->ncur].t == NULL &&
      (w->cur[w->ncur].t = (char *)malloc(MAX_TERM + 1)) == NULL)
    return -1;
  memcpy(w->cur[w->ncur].t, t, n);
  w->cur[w->ncur].n = (uint32_t)n;
  w->cur[w->ncur].tf = 1;
  w->hslot[i] = (uint32_t)w->ncur;
  w->ncur++;
  return 0;
}

static int change (rg_fti_writer *w, uint32_t doc, const char *text,
                   size_t n, int add) {
  size_t i;
  if (doc == 0 || doc == END) return 400;
  w->ncur = 0;
  w->dl = 0;
  if (w->hslot) memset(w->hslot, 0xFF, w->hcap * sizeof(uint32_t));
  if (rg_text_analyze(&w->an, w->lang, 1, text, n, cur_term, w)) return 500;
  for (i = 0; i < w->ncur; i++) {
    pterm *p = term_slot(w, w->cur[i].t, w->cur[i].n);
    if (p == NULL) return 500;
    if (p->nops == p->cap) {
      size_t cap = p->cap ? p->cap * 2 : 4;
      op *o = (op *)realloc(p->ops, cap * sizeof(op));
      if (o == NULL) return 500;
      p->ops = o;
      p->cap = cap;
    }
    p->ops[p->nops].doc = doc;
    p->ops[p->nops].tf = add ? w->cur[i].tf : 0;
    p->ops[p->nops].seq = w->seq;
    p->ops[p->nops].dl = w->dl;
    p->nops++;
  }
  if (w->ndocs == w->dcap) {
    size_t cap = w->dcap ? w->dcap * 2 : 256;
    dop *d = (dop *)realloc(w->docs, cap * sizeof(dop));
    if (d == NULL) return 500;
    w->docs = d;
    w->dcap = cap;
  }
  w->docs[w->ndocs].doc = doc;
  w->docs[w->ndocs].dl1 = add ? w->dl + 1 : 0;
  w->docs[w->ndocs].seq = w->seq++;
  w->ndocs++;
  w->ddocs += add ? 1 : -1;
  w->dtokens += add ? (int64_t)w->dl : -(int64_t)w->dl;
  return 0;
}

int rg_fti_add (rg_fti_writer *w, uint32_t doc, const char *text, size_t n) {
  return change(w, doc, text, n, 1);
}

int rg_fti_remove (rg_fti_writer *w, uint32_t doc, const char *text,
                   size_t n) {
  return change(w, doc, text, n, 0);
}

static int op_cmp (const void *a, const void *b) {
  const op *x = (const op *)a, *y = (const op *)b;
  if (x->doc != y->doc) return x->doc < y->doc ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int dop_cmp (const void *a, const void *b) {
  const dop *x = (const dop *)a, *y = (const dop *)b;
  if (x->doc != y->doc) return x->doc < y->doc ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int pterm_cmp (const void *a, const void *b) {
  const pterm *x = *(const pterm *const *)a, *y = *(const pterm *const *)b;
  int c = memcmp(x->t, y->t, x->n < y->n ? x->n : y->n);
  if (c) return c;
  return x->n < y->n ? -1 : x->n > y->n;
}

/* The lengths table: each document's last change wins. */
static int flush_norms (rg_fti_writer *w, rg_fti_work *work) {
  size_t i = 0;
  uint8_t k[FH + 4], v[NORM_N * 4];
  qsort(w->docs, w->ndocs, sizeof(dop), dop_cmp);
  while (i < w->ndocs) {
    uint32_t blk = w->docs[i].doc >> NORM_SHIFT;
    rg_slice old;
    int rc, any = 0;
    size_t j;
    key_head(k, 'N', w->fid);
    rg_put_u32(k + FH, blk);
    rc = w->kv.get(w->kv.ud, k, FH + 4, &old);
    if (rc > 1) return rc;
    if (rc == 0 && old.n == sizeof(v)) memcpy(v, old.p, sizeof(v));
    else memset(v, 0, sizeof(v));
    for (; i < w->ndocs && (w->docs[i].doc >> NORM_SHIFT) == blk; i++)
      rg_put_u32(v + 4 * (w->docs[i].doc & (NORM_N - 1)), w->docs[i].dl1);
    for (j = 0; j < NORM_N; j++) if (rg_get_u32(v + 4 * j)) any = 1;
    rc = any ? w->kv.put(w->kv.ud, k, FH + 4, v, sizeof(v))
             : w->kv.del(w->kv.ud, k, FH + 4);
    if (rc > 1) return rc;
    if (work) { work->blocks_written++; work->bytes_written += sizeof(v); }
  }
  return 0;
}

static void add_front (rg_fti_writer *w, const pair *f, int nf) {
  int j;
  for (j = 0; j < nf; j++) w->tfront[w->ntfront++] = f[j];
  if (w->ntfront > RG_FTI_BLOCK)
    w->ntfront = make_front(w->tfront, (size_t)w->ntfront, w->tfront);
}

/*
** Writes n postings of a run as blocks of at most RG_FTI_BLOCK, none of
** them the term's last (the term's last block gets its header after).
** A stored posting's length (dl END) is looked up when `exact` (after a
** removal, so that a block's bound tightens again); otherwise the stored
** block's front `oldf` stands for the stored postings.  *took is set when
** a block written has the key `old_first`.
*/
static int write_blocks (rg_fti_writer *w, norms *nc, const uint8_t *prefix,
                         size_t plen, const run *all, uint32_t n, int exact,
                         const pair *oldf, int noldf, uint32_t old_first,
                         int *took, rg_fti_work *work) {
  uint8_t k[KEY_MAX];
  pair ps[RG_FTI_BLOCK + FRONT], front[FRONT];
  uint32_t at = 0;
  int rc;
  memcpy(k, prefix, plen);
  while (at < n) {
    uint32_t take = n - at, i, np = 0;
    int nf, old_in = 0, j;
    size_t vn;
    if (take > RG_FTI_BLOCK) {       /* split evenly, not 128 + a sliver */
      uint32_t parts = (take + RG_FTI_BLOCK - 1) / RG_FTI_BLOCK;
      take = (take + parts - 1) / parts;
    }
    for (i = 0; i < take; i++) {
      uint32_t d = all->dl[at + i];
      if (d == END) {
        if (!exact) { old_in = 1; continue; }
        if ((rc = norm_get(nc, all->doc[at + i], &d))) return rc;
        d = d ? d - 1 : 0;
      }
      ps[np].tf = all->tf[at + i];
      ps[np++].dl = d;
    }
    if (old_in) for (j = 0; j < noldf; j++) ps[np++] = oldf[j];
    nf = make_front(ps, np, front);
    add_front(w, front, nf);
    vn = encode_head(take, all->doc[at + take - 1] - all->doc[at], front, nf,
                     NULL, w->val);
    vn += encode_posts(all->doc + at, all->tf + at, take, 0, w->val + vn);
    rg_put_u32(k + plen, all->doc[at]);
    if (all->doc[at] == old_first) *took = 1;
    if ((rc = w->kv.put(w->kv.ud, k, plen + 4, w->val, vn)) > 1) return rc;
    if (work) { work->blocks_written++; work->bytes_written += vn + plen + 4; }
    at += take;
  }
  return 0;
}

/* Rewrites the term's last block with the header (df, and a front that
** covers every block): after a general merge.  df 0: the term is gone. */
static int put_header (rg_fti_writer *w, const uint8_t *prefix, size_t plen,
                       uint64_t df, const thead *old, rg_fti_work *work) {
  rg_slice ko, vo;
  thead th;
  block *b = w->old;
  uint8_t k[KEY_MAX];
  size_t vn;
  int r, j;
  if (df == 0) return 0;
  if ((r = last_block(&w->kv, w->kc, prefix, plen, &ko, &vo)) == 1) return 500;
  if (r) return r;
  memcpy(k, ko.p, ko.n);
  if (decode_block(rg_get_u32(ko.p + plen), vo.p, vo.n, b)) return 500;
  if (work) { work->blocks_read++; work->postings_read += b->h.n; }
  add_front(w, b->h.front, b->h.nfront);
  for (j = 0; old && j < old->nfront; j++) w->tfront[w->ntfront++] = old->front[j];
  th.df = df;
  th.nfront = make_front(w->tfront, (size_t)w->ntfront, th.front);
  vn = encode_head(b->h.n, b->h.last - b->h.first, b->h.front, b->h.nfront,
                   &th, w->val);
  vn += encode_posts(b->doc, b->tf, b->h.n, 0, w->val + vn);
  if ((r = w->kv.put(w->kv.ud, k, plen + 4, w->val, vn)) > 1) return r;
  if (work) { work->blocks_written++; work->bytes_written += vn + plen + 4; }
  return 0;
}

/* Appends postings (all past the term's last) to its last block, found at
** the cursor (ko, vo): the stored postings are copied as bytes; only what
** no longer fits goes to new blocks.  The last block written carries the
** header. */
static int append (rg_fti_writer *w, const uint8_t *prefix, size_t plen,
                   const rg_slice *ko, const rg_slice *vo, const op *ops,
                   size_t nops, rg_fti_work *work) {
  bhead h;
  uint32_t first = rg_get_u32(ko->p + plen), room, fit, i;
  uint8_t k[KEY_MAX];
  pair ps[RG_FTI_BLOCK + FRONT], front[FRONT];
  thead th;
  size_t vn;
  int r, nf;
  memcpy(k, ko->p, ko->n);
  if (decode_head(first, vo->p, vo->n, &h) || !h.is_last) return 500;
  th = h.th;
  th.df += nops;
  room = RG_FTI_BLOCK - h.n;
  fit = nops < room ? (uint32_t)nops : room;
  for (i = 0; i < fit; i++) { ps[i].tf = ops[i].tf; ps[i].dl = ops[i].dl; }
  for (r = 0; r < h.nfront; r++) ps[fit + r] = h.front[r];
  nf = make_front(ps, fit + (uint32_t)h.nfront, front);
  /* the term's front: the old one and every new posting's */
  for (i = 0; i < nops; i++) {
    w->tfront[w->ntfront].tf = ops[i].tf;
    w->tfront[w->ntfront++].dl = ops[i].dl;
    if (w->ntfront > RG_FTI_BLOCK)
      w->ntfront = make_front(w->tfront, (size_t)w->ntfront, w->tfront);
  }
  add_front(w, th.front, th.nfront);
  th.nfront = make_front(w->tfront, (size_t)w->ntfront, th.front);
  {                                  /* the last block, grown */
    run *nr = w->neu;
    uint8_t *v = w->val;
    for (i = 0; i < fit; i++) { nr->doc[i] = ops[i].doc; nr->tf[i] = ops[i].tf; }
    vn = encode_head(h.n + fit, (fit ? nr->doc[fit - 1] : h.last) - first,
                     front, nf, fit == nops ? &th : NULL, v);
    memcpy(v + vn, h.post, h.plen);
    vn += h.plen;
    vn += encode_posts(nr->doc, nr->tf, fit, h.last, v + vn);
    if ((r = w->kv.put(w->kv.ud, k, plen + 4, v, vn)) > 1) return r;
    if (work) {
      work->blocks_read++;
      work->blocks_written++;
      work->bytes_written += vn + plen + 4;
    }
  }
  if (fit < nops) {                  /* the rest: new blocks, then header */
    run *nr = w->neu;
    size_t at = fit;
    int took = 0;
    while (at < nops) {
      uint32_t m = nops - at < 2 * RG_FTI_BLOCK ? (uint32_t)(nops - at)
                                                : 2 * RG_FTI_BLOCK;
      for (i = 0; i < m; i++) {
        nr->doc[i] = ops[at + i].doc;
        nr->tf[i] = ops[at + i].tf;
        nr->dl[i] = ops[at + i].dl;
      }
      if ((r = write_blocks(w, NULL, prefix, plen, nr, m, 0, NULL, 0, END,
                            &took, work)))
        return r;
      at += m;
    }
    w->ntfront = 0;
    return put_header(w, prefix, plen, th.df, &th, work);
  }
  return 0;
}

/* Merges one term's changes into its blocks. */
static int flush_term (rg_fti_writer *w, pterm *p, norms *nc,
                       rg_fti_work *work) {
  uint8_t prefix[KEY_MAX], k[KEY_MAX];
  size_t plen = key_term(prefix, w->fid, p->t, p->n), i = 0, j;
  block *old = w->old;
  run *neu = w->neu;
  int rc = 0, adds = 1, r;
  int64_t df = 0;
  thead h;
  rg_slice ko, vo;
  w->ntfront = 0;
  if (p->nops > 1) qsort(p->ops, p->nops, sizeof(op), op_cmp);
  for (i = j = 0; i < p->nops; i++) {          /* the last change wins */
    if (j && p->ops[j - 1].doc == p->ops[i].doc) p->ops[j - 1] = p->ops[i];
    else p->ops[j++] = p->ops[i];
  }
  p->nops = j;
  for (i = 0; i < p->nops; i++) if (p->ops[i].tf == 0) adds = 0;
  r = last_block(&w->kv, w->kc, prefix, plen, &ko, &vo);
  if (r > 1) return r;
  memset(&h, 0, sizeof(h));
  if (r == 0) {
    bhead bh;
    if (decode_head(rg_get_u32(ko.p + plen), vo.p, vo.n, &bh) || !bh.is_last)
      return 500;
    h = bh.th;
    if (adds && p->ops[0].doc > bh.last)     /* appends: the usual case */
      return append(w, prefix, plen, &ko, &vo, p->ops, p->nops, work);
  }
  df = (int64_t)h.df;
  i = 0;
  while (i < p->nops) {
    uint32_t lo = p->ops[i].doc, first = 0, limit = END;
    int have = 0, exact = 0, took = 0;
    size_t a, b, m;
    /* the block holding lo: the last whose first doc <= lo, else the
    ** term's first block (lo comes before it) */
    memcpy(k, prefix, plen);
    rg_put_u32(k + plen, lo);
    r = w->kv.seek(w->kc, k, plen + 4, &ko, &vo);
    if (r > 1) return r;
    if (r == 0 && in_term(&ko, prefix, plen) && rg_get_u32(ko.p + plen) == lo)
      have = 1;
    else {
      int r2 = w->kv.prev(w->kc, &ko, &vo);
      if (r2 > 1) return r2;
      if (r2 == 0 && in_term(&ko, prefix, plen)) have = 1;
      else if (r == 0) {             /* back to the one seek found */
        r2 = w->kv.seek(w->kc, k, plen + 4, &ko, &vo);
        if (r2 > 1) return r2;
        have = r2 == 0 && in_term(&ko, prefix, plen);
      }
    }
    old->h.n = 0;
    old->h.nfront = 0;
    if (have) {
      first = rg_get_u32(ko.p + plen);
      if (decode_block(first, vo.p, vo.n, old)) return 500;
      if (work) { work->blocks_read++; work->postings_read += old->h.n; }
      /* the next block's first doc bounds the changes this block takes */
      r = w->kv.next(w->kc, &ko, &vo);
      if (r > 1) return r;
      if (r == 0 && in_term(&ko, prefix, plen)) limit = rg_get_u32(ko.p + plen);
    }
    /* merge the stored postings with the changes below limit; a removal
    ** or a replacement makes the fronts exact again (from the lengths) */
    for (b = i; b < p->nops && p->ops[b].doc < limit; b++) {}
    {
      size_t c, x = 0;
      for (c = i; c < b; c++) {
        while (x < old->h.n && old->doc[x] < p->ops[c].doc) x++;
        if (p->ops[c].tf == 0 ||
            (x < old->h.n && old->doc[x] == p->ops[c].doc))
          exact = 1;
      }
    }
    a = m = 0;
    while (a < old->h.n || i < b) {
      if (m == 2 * RG_FTI_BLOCK) {   /* write a full run */
        if ((rc = write_blocks(w, nc, prefix, plen, neu, (uint32_t)m, exact,
                               old->h.front, old->h.nfront,
                               have ? first : END, &took, work)))
          return rc;
        m = 0;
      }
      if (i < b && (a == old->h.n || p->ops[i].doc <= old->doc[a])) {
        if (a < old->h.n && p->ops[i].doc == old->doc[a]) { a++; df--; }
        if (p->ops[i].tf) {
          neu->doc[m] = p->ops[i].doc;
          neu->dl[m] = p->ops[i].dl;
          neu->tf[m++] = p->ops[i].tf;
          df++;
        }
        i++;
      }
      else {
        neu->doc[m] = old->doc[a];
        neu->dl[m] = END;
        neu->tf[m++] = old->tf[a++];
      }
    }
    if (m && (rc = write_blocks(w, nc, prefix, plen, neu, (uint32_t)m, exact,
                                old->h.front, old->h.nfront,
                                have ? first : END, &took, work)))
      return rc;
    if (have && !took) {             /* the stored block's key is gone */
      memcpy(k, prefix, plen);
      rg_put_u32(k + plen, first);
      if ((r = w->kv.del(w->kv.ud, k, plen + 4)) > 1) return r;
    }
  }
  if (df < 0) return 500;
  return put_header(w, prefix, plen, (uint64_t)df, &h, work);
}

int rg_fti_flush (rg_fti_writer *w, rg_fti_work *work, rg_err *e) {
  pterm **order = NULL;
  norms nc;
  size_t i, n = 0;
  int rc = 0;
  uint64_t docs, tokens;
  uint8_t k[FH], v[16];
  if (w->ndocs == 0) return 0;
  if ((rc = flush_norms(w, work)))
    return rg_fail(e, rc, "full-text index: storage failed");
  memset(&nc, 0, sizeof(nc));
  nc.kv = &w->kv;
  nc.fid = w->fid;
  order = (pterm **)malloc((w->nterms + 1) * sizeof(pterm *));
  if (order == NULL) return rg_fail(e, 500, "out of memory");
  for (i = 0; i < w->cap; i++) if (w->terms[i].t) order[n++] = &w->terms[i];
  qsort(order, n, sizeof(pterm *), pterm_cmp);
  if ((w->kc = w->kv.open(w->kv.ud)) == NULL) {
    free(order);
    return rg_fail(e, 500, "out of memory");
  }
  for (i = 0; i < n && rc == 0; i++) rc = flush_term(w, order[i], &nc, work);
  w->kv.close(w->kc);
  w->kc = NULL;
  free(order);
  if (rc)
    return rg_fail(e, rc, "full-text index: %s", rc == 500 ?
                   "a block is corrupt, or out of memory" : "storage failed");
  if ((rc = read_stats(&w->kv, w->fid, &docs, &tokens)))
    return rg_fail(e, rc, "full-text index: storage failed");
  docs = (uint64_t)((int64_t)docs + w->ddocs);
  tokens = (uint64_t)((int64_t)tokens + w->dtokens);
  key_head(k, 'S', w->fid);
  rg_put_u64(v, docs);
  rg_put_u64(v + 8, tokens);
  rc = docs ? w->kv.put(w->kv.ud, k, FH, v, 16) : w->kv.del(w->kv.ud, k, FH);
  if (rc > 1) return rg_fail(e, rc, "full-text index: storage failed");
  /* ready for the next transaction */
  for (i = 0; i < w->cap; i++) {
    free(w->terms[i].t);
    free(w->terms[i].ops);
  }
  memset(w->terms, 0, w->cap * sizeof(pterm));
  w->nterms = 0;
  w->ndocs = 0;
  w->ddocs = w->dtokens = 0;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Searching
** ======================================================================
*/
typedef struct tcur {
  const rg_ftkv *kv;
  void *cur;
  uint8_t prefix[KEY_MAX];
  size_t plen;
  int qi;                            /* the term's place in the query */
  double idf, ub;                    /* the term's bound */
  block b;
  uint32_t i;
  double bub;                        /* the current block's bound */
  uint32_t doc;                      /* current posting; END past the end */
  rg_fti_work *work;
  double avgdl;
} tcur;

static int tc_load (tcur *t, const rg_slice *ko, const rg_slice *vo) {
  if (ko->n != t->plen + 4 || memcmp(ko->p, t->prefix, t->plen) != 0) {
    t->doc = END;
    return 0;
  }
  if (decode_block(rg_get_u32(ko->p + t->plen), vo->p, vo->n, &t->b))
    return 500;
  if (t->work) { t->work->blocks_read++; t->work->postings_read += t->b.h.n; }
  t->bub = t->idf * front_bound(t->b.h.front, t->b.h.nfront, t->avgdl);
  t->i = 0;
  t->doc = t->b.doc[0];
  return 0;
}

static int tc_open (tcur *t) {
  rg_slice ko, vo;
  int r;
  uint8_t k[KEY_MAX];
  memcpy(k, t->prefix, t->plen);
  rg_put_u32(k + t->plen, 0);
  r = t->kv->seek(t->cur, k, t->plen + 4, &ko, &vo);
  if (r == 1) { t->doc = END; return 0; }
  if (r) return r;
  return tc_load(t, &ko, &vo);
}

static int tc_next_block (tcur *t) {
  rg_slice ko, vo;
  int r = t->kv->next(t->cur, &ko, &vo);
  if (r == 1) { t->doc = END; return 0; }
  if (r) return r;
  return tc_load(t, &ko, &vo);
}

static int tc_next (tcur *t) {
  if (++t->i < t->b.h.n) { t->doc = t->b.doc[t->i]; return 0; }
  return tc_next_block(t);
}

/* Positions t at the block holding d, or the first block after it, and
** there at the first posting >= d; a seek, for long skips. */
static int tc_seek (tcur *t, uint32_t d) {
  uint8_t k[KEY_MAX];
  rg_slice ko, vo;
  int r;
  memcpy(k, t->prefix, t->plen);
  rg_put_u32(k + t->plen, d);
  r = t->kv->seek(t->cur, k, t->plen + 4, &ko, &vo);
  if (r > 1) return r;
  if (r == 0 && ko.n == t->plen + 4 && memcmp(ko.p, t->prefix, t->plen) == 0
      && rg_get_u32(ko.p + t->plen) == d)
    return tc_load(t, &ko, &vo);
  r = t->kv->prev(t->cur, &ko, &vo);   /* the block before: first < d */
  if (r > 1) return r;
  if (r == 0 && ko.n == t->plen + 4 &&
      memcmp(ko.p, t->prefix, t->plen) == 0) {
    if ((r = tc_load(t, &ko, &vo))) return r;
    if (t->b.doc[t->b.h.n - 1] >= d) return 1;   /* d is in it: search */
  }
  else if (r == 1) { t->doc = END; return 0; }
  r = t->kv->next(t->cur, &ko, &vo);
  if (r == 1) { t->doc = END; return 0; }
  if (r) return r;
  return tc_load(t, &ko, &vo);
}

/* Moves t to its first posting >= d. */
static int tc_advance (tcur *t, uint32_t d) {
  uint32_t lo, hi;
  int r;
  if (t->doc == END || t->doc >= d) return 0;
  if (t->b.doc[t->b.h.n - 1] < d) {
    rg_slice ko, vo;
    r = t->kv->next(t->cur, &ko, &vo);         /* the next block, often */
    if (r == 1) { t->doc = END; return 0; }
    if (r) return r;
    if (ko.n != t->plen + 4 || memcmp(ko.p, t->prefix, t->plen) != 0) {
      t->doc = END;
      return 0;
    }
    if ((r = tc_load(t, &ko, &vo))) return r;
    if (t->doc >= d) return 0;
    if (t->b.doc[t->b.h.n - 1] < d) {            /* further: seek */
      if ((r = tc_seek(t, d)) == 0) return 0;
      if (r != 1) return r;
    }
  }
  lo = t->i;
  hi = t->b.h.n - 1;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (t->b.doc[mid] < d) lo = mid + 1;
    else hi = mid;
  }
  t->i = lo;
  t->doc = t->b.doc[lo];
  return 0;
}

/* The k best: a min-heap by (score, -doc), and the ties of its least. */
typedef struct topk {
  rg_fti_hit *h;
  size_t n, k;
  rg_fti_hit *ties;
  size_t nties, capties;
} topk;

static int worse (const rg_fti_hit *a, const rg_fti_hit *b) {
  return a->score < b->score || (a->score == b->score && a->doc > b->doc);
}

static void heap_down (rg_fti_hit *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    rg_fti_hit t;
    if (l < n && worse(&h[l], &h[m])) m = l;
    if (r < n && worse(&h[r], &h[m])) m = r;
    if (m == i) return;
    t = h[i]; h[i] = h[m]; h[m] = t;
    i = m;
  }
}

static void heap_up (rg_fti_hit *h, size_t i) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    rg_fti_hit t;
    if (!worse(&h[i], &h[p])) return;
    t = h[i]; h[i] = h[p]; h[p] = t;
    i = p;
  }
}

static double threshold (const topk *t) {
  return t->n < t->k ? -1.0 : t->h[0].score;
}

/* Offers a hit: kept when it beats the least, or ties with it (the
** caller's own order decides ties, so every tie is handed on). */
static int offer (topk *t, uint32_t doc, double score) {
  rg_fti_hit x;
  x.doc = doc;
  x.score = score;
  if (t->n < t->k) {
    t->h[t->n] = x;
    heap_up(t->h, t->n++);
    return 0;
  }
  if (score == t->h[0].score) {
    if (t->nties == t->capties) {
      size_t cap = t->capties ? t->capties * 2 : 16;
      rg_fti_hit *p = (rg_fti_hit *)realloc(t->ties, cap * sizeof(*p));
      if (p == NULL) return 500;
      t->ties = p;
      t->capties = cap;
    }
    t->ties[t->nties++] = x;
    return 0;
  }
  if (score < t->h[0].score) return 0;
  {
    double least = t->h[0].score;
    rg_fti_hit out = t->h[0];
    t->h[0] = x;
    heap_down(t->h, t->n, 0);
    if (t->h[0].score == least) {    /* the one pushed out still ties */
      if (t->nties == t->capties) {
        size_t cap = t->capties ? t->capties * 2 : 16;
        rg_fti_hit *p = (rg_fti_hit *)realloc(t->ties, cap * sizeof(*p));
        if (p == NULL) return 500;
        t->ties = p;
        t->capties = cap;
      }
      t->ties[t->nties++] = out;
    }
    else t->nties = 0;               /* the least rose: no tie remains */
  }
  return 0;
}

static int hit_cmp (const void *a, const void *b) {
  const rg_fti_hit *x = (const rg_fti_hit *)a, *y = (const rg_fti_hit *)b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->doc < y->doc ? -1 : x->doc > y->doc;
}

static int ub_cmp (const void *a, const void *b) {
  const tcur *x = *(const tcur *const *)a, *y = *(const tcur *const *)b;
  return x->ub < y->ub ? -1 : x->ub > y->ub;
}

typedef struct search {
  const rg_ftkv *kv;
  uint64_t fid;
  int n;
  tcur *t;
  tcur *by[MAX_QUERY];               /* ascending bounds */
  uint32_t tf[MAX_QUERY];            /* by query place, of the candidate */
  norms nc;
  double avgdl;
  rg_fti_work *work;
} search;

static int open_search (search *s, const rg_ftkv *kv, uint64_t fid,
                        const char *const *terms, const size_t *lens, int n,
                        const rg_fti_totals *tot, rg_fti_work *work) {
  uint64_t docs, tokens;
  int i, rc;
  memset(s, 0, sizeof(*s));
  if (n > MAX_QUERY) return 400;
  s->kv = kv;
  s->fid = fid;
  s->n = n;
  s->work = work;
  s->nc.kv = kv;
  s->nc.fid = fid;
  s->t = (tcur *)calloc((size_t)n + 1, sizeof(tcur));
  if (s->t == NULL) return 500;
  if (tot) { docs = tot->docs; tokens = tot->tokens; }
  else if ((rc = read_stats(kv, fid, &docs, &tokens))) return rc;
  s->avgdl = docs ? (double)tokens / (double)docs : 0;
  for (i = 0; i < n; i++) {
    tcur *t = &s->t[i];
    thead h;
    if (lens[i] > MAX_TERM) return 400;
    t->kv = kv;
    t->qi = i;
    t->work = work;
    t->avgdl = s->avgdl;
    t->plen = key_term(t->prefix, fid, terms[i], lens[i]);
    if ((t->cur = kv->open(kv->ud)) == NULL) return 500;
    if ((rc = read_thead(kv, t->cur, fid, terms[i], lens[i], &h)) > 1)
      return rc;
    t->idf = rg_bm25_idf(docs, tot ? tot->df[i] : rc == 0 ? h.df : 0);
    t->ub = rc == 0 ? t->idf * front_bound(h.front, h.nfront, s->avgdl) : 0;
    if (rc == 1) { t->doc = END; t->bub = 0; }
    else if ((rc = tc_open(t))) return rc;
    s->by[i] = t;
  }
  qsort(s->by, (size_t)n, sizeof(tcur *), ub_cmp);
  return 0;
}

static void close_search (search *s) {
  int i;
  if (s->t)
    for (i = 0; i < s->n; i++)
      if (s->t[i].cur) s->kv->close(s->t[i].cur);
  free(s->t);
}

/* The full score of doc from the tfs gathered (in query order, as the
** query pipeline adds them). */
static int full_score (search *s, uint32_t doc, double *out) {
  uint32_t dl1;
  double score = 0;
  int i, rc;
  if ((rc = norm_get(&s->nc, doc, &dl1))) return rc;
  for (i = 0; i < s->n; i++)
    score += rg_bm25_term(s->t[i].idf, s->tf[i], dl1 ? dl1 - 1 : 0,
                          s->avgdl);
  if (s->work) s->work->docs_scored++;
  *out = score;
  return 0;
}

/* Any of the terms: block-max MaxScore.  Terms in ascending bound order;
** the first `ne` of them (non-essential) cannot lift a document above
** the threshold alone, so candidates come from the others. */
static int search_any (search *s, topk *top,
                       int (*accept) (void *, uint32_t, rg_err *), void *ud,
                       rg_err *e) {
  double prefix[MAX_QUERY + 1];
  int i, rc, ne = 0;
  prefix[0] = 0;
  for (i = 0; i < s->n; i++) prefix[i + 1] = prefix[i] + s->by[i]->ub;
  for (;;) {
    double th = threshold(top), score, bound;
    uint32_t d = END, lim = END;
    int k;
    while (ne < s->n && prefix[ne + 1] < th) ne++;
    if (ne == s->n) break;           /* nothing can enter any more */
    for (k = ne; k < s->n; k++) if (s->by[k]->doc < d) d = s->by[k]->doc;
    if (d == END) break;
    /* the essential terms' blocks: skip all of them at once when their
    ** bounds together cannot reach the threshold */
    bound = prefix[ne];
    for (k = ne; k < s->n; k++) {
      tcur *t = s->by[k];
      if (t->doc == END) continue;
      bound += t->bub;
      if (t->b.doc[t->b.h.n - 1] < lim) lim = t->b.doc[t->b.h.n - 1];
    }
    if (bound < th) {
      for (k = ne; k < s->n; k++)
        if ((rc = tc_advance(s->by[k], lim == END ? END : lim + 1)))
          return rg_fail(e, rc, "full-text index: storage failed");
      continue;
    }
    memset(s->tf, 0, sizeof(uint32_t) * (size_t)s->n);
    bound = prefix[ne];
    for (k = ne; k < s->n; k++) {
      tcur *t = s->by[k];
      if (t->doc == d) {
        s->tf[t->qi] = t->b.tf[t->i];
        bound += t->bub;
      }
    }
    if (bound >= th) {
      /* the non-essential terms, largest bound first, while they can */
      for (k = ne - 1; k >= 0; k--) {
        tcur *t = s->by[k];
        if ((rc = tc_advance(t, d)))
          return rg_fail(e, rc, "full-text index: storage failed");
        if (t->doc == d) s->tf[t->qi] = t->b.tf[t->i];
      }
      if ((rc = full_score(s, d, &score)))
        return rg_fail(e, rc, "full-text index: storage failed");
      if (score >= th && score > 0) {
        int ok = 1;
        if (accept) {
          int r = accept(ud, d, e);
          if (r < 0) return e->status ? e->status : 500;
          ok = r == 0;
        }
        if (ok && (rc = offer(top, d, score)))
          return rg_fail(e, rc, "out of memory");
      }
    }
    for (k = ne; k < s->n; k++)
      if (s->by[k]->doc == d && (rc = tc_next(s->by[k])))
        return rg_fail(e, rc, "full-text index: storage failed");
  }
  return 0;
}

/* All of the terms: a leapfrog over the lists, rarest first, with the
** blocks' bounds skipping what cannot reach the threshold. */
static int search_all (search *s, topk *top,
                       int (*accept) (void *, uint32_t, rg_err *), void *ud,
                       uint32_t **docs, size_t *ndocs, rg_err *e) {
  size_t cap = 0;
  int rc, k;
  if (s->n == 0) return 0;
  for (;;) {
    uint32_t d = 0, lim = END;
    double bound = 0, th = top ? threshold(top) : -1, score;
    int same = 1;
    for (k = 0; k < s->n; k++) {
      if (s->t[k].doc == END) return 0;
      if (s->t[k].doc > d) d = s->t[k].doc;
    }
    for (k = 0; k < s->n; k++) {
      if ((rc = tc_advance(&s->t[k], d)))
        return rg_fail(e, rc, "full-text index: storage failed");
      if (s->t[k].doc == END) return 0;
      if (s->t[k].doc != d) same = 0;
    }
    if (!same) continue;
    if (top) {
      for (k = 0; k < s->n; k++) {
        tcur *t = &s->t[k];
        bound += t->bub;
        if (t->b.doc[t->b.h.n - 1] < lim) lim = t->b.doc[t->b.h.n - 1];
      }
      if (bound < th) {              /* none of these blocks' docs can */
        for (k = 0; k < s->n; k++)
          if ((rc = tc_advance(&s->t[k], lim == END ? END : lim + 1)))
            return rg_fail(e, rc, "full-text index: storage failed");
        continue;
      }
      for (k = 0; k < s->n; k++) s->tf[k] = s->t[k].b.tf[s->t[k].i];
      if ((rc = full_score(s, d, &score)))
        return rg_fail(e, rc, "full-text index: storage failed");
      if (score >= th) {
        int ok = 1;
        if (accept) {
          int r = accept(ud, d, e);
          if (r < 0) return e->status ? e->status : 500;
          ok = r == 0;
        }
        if (ok && (rc = offer(top, d, score)))
          return rg_fail(e, rc, "out of memory");
      }
    }
    else {
      if (*ndocs == cap) {
        size_t nc = cap ? cap * 2 : 256;
        uint32_t *p = (uint32_t *)realloc(*docs, nc * sizeof(uint32_t));
        if (p == NULL) return rg_fail(e, 500, "out of memory");
        *docs = p;
        cap = nc;
      }
      (*docs)[(*ndocs)++] = d;
    }
    if ((rc = tc_next(&s->t[0])))
      return rg_fail(e, rc, "full-text index: storage failed");
  }
}

int rg_fti_topk (const rg_ftkv *kv, uint64_t fid, const char *const *terms,
                 const size_t *lens, int nterms, int all, size_t k,
                 int (*accept) (void *ud, uint32_t doc, rg_err *e),
                 void *ud, rg_fti_hit *out, size_t *nout,
                 rg_fti_work *work, rg_err *e) {
  return rg_fti_topk_with(kv, fid, terms, lens, nterms, all, k, NULL, accept,
                          ud, out, nout, work, e);
}

int rg_fti_topk_with (const rg_ftkv *kv, uint64_t fid,
                      const char *const *terms, const size_t *lens,
                      int nterms, int all, size_t k, const rg_fti_totals *tot,
                      int (*accept) (void *ud, uint32_t doc, rg_err *e),
                      void *ud, rg_fti_hit *out, size_t *nout,
                      rg_fti_work *work, rg_err *e) {
  search s;
  topk top;
  int rc;
  size_t i;
  *nout = 0;
  if (k == 0 || nterms == 0) return 0;
  memset(&top, 0, sizeof(top));
  top.k = k;
  top.h = (rg_fti_hit *)malloc(k * sizeof(rg_fti_hit));
  if (top.h == NULL) return rg_fail(e, 500, "out of memory");
  if ((rc = open_search(&s, kv, fid, terms, lens, nterms, tot, work))) {
    rc = rg_fail(e, rc, rc == 400 ? "a search has at most 64 terms" :
                 "full-text index: storage failed");
    goto done;
  }
  rc = all ? search_all(&s, &top, accept, ud, NULL, NULL, e)
           : search_any(&s, &top, accept, ud, e);
  if (rc) goto done;
  qsort(top.h, top.n, sizeof(rg_fti_hit), hit_cmp);
  for (i = 0; i < top.n; i++) out[i] = top.h[i];
  *nout = top.n;
  /* ties of the least beyond k are left to the caller's order: the
  ** first k by (score, doc) are returned */
done:
  close_search(&s);
  free(top.h);
  free(top.ties);
  return rc;
}

int rg_fti_docs (const rg_ftkv *kv, uint64_t fid, const char *const *terms,
                 const size_t *lens, int nterms, int all, uint32_t **docs,
                 size_t *n, rg_fti_work *work, rg_err *e) {
  search s;
  int rc, i;
  *docs = NULL;
  *n = 0;
  if ((rc = open_search(&s, kv, fid, terms, lens, nterms, NULL, work))) {
    close_search(&s);
    return rg_fail(e, rc, rc == 400 ? "a search has at most 64 terms" :
                   "full-text index: storage failed");
  }
  if (all) rc = search_all(&s, NULL, NULL, NULL, docs, n, e);
  else {
    size_t cap = 0, j, m = 0;
    for (i = 0; i < s.n && rc == 0; i++) {
      tcur *t = &s.t[i];
      while (t->doc != END) {
        if (*n == cap) {
          size_t nc = cap ? cap * 2 : 256;
          uint32_t *p = (uint32_t *)realloc(*docs, nc * sizeof(uint32_t));
          if (p == NULL) { rc = rg_fail(e, 500, "out of memory"); break; }
          *docs = p;
          cap = nc;
        }
        (*docs)[(*n)++] = t->doc;
        if ((rc = tc_next(t))) {
          rc = rg_fail(e, rc, "full-text index: storage failed");
          break;
        }
      }
    }
    if (rc == 0 && *n) {
      qsort(*docs, *n, sizeof(uint32_t), rg_u32_cmp);
      for (j = 0; j < *n; j++)
        if (m == 0 || (*docs)[m - 1] != (*docs)[j]) (*docs)[m++] = (*docs)[j];
      *n = m;
    }
  }
  close_search(&s);
  if (rc) { free(*docs); *docs = NULL; *n = 0; }
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Verifying
** ======================================================================
*/
static int vfail (rg_err *e, int rc, const char *what) {
  return rg_fail(e, rc == 500 || rc == 0 ? 500 : rc, "full-text index: %s",
                 rc > 1 && rc != 500 ? "storage failed" : what);
}

int rg_fti_verify (const rg_ftkv *kv, uint64_t fid, rg_err *e) {
  uint8_t k[FH + 4], term[KEY_MAX];
  void *cur = kv->open(kv->ud);
  rg_slice ko, vo;
  block *b = (block *)malloc(sizeof(block));
  norms nc;
  uint64_t docs = 0, tokens = 0, sd, st, df = 0, hdf = 0;
  size_t tn = 0;
  uint32_t last = 0;
  int r, rc = 0, have_term = 0, last_seen = 0;
  memset(&nc, 0, sizeof(nc));
  nc.kv = kv;
  nc.fid = fid;
  if (cur == NULL || b == NULL) { rc = rg_fail(e, 500, "out of memory"); goto done; }
  /* lengths: the statistics' sums */
  key_head(k, 'N', fid);
  for (r = kv->seek(cur, k, FH, &ko, &vo); r == 0 && ko.n == FH + 4 &&
       memcmp(ko.p, k, FH) == 0; r = kv->next(cur, &ko, &vo)) {
    uint32_t j;
    if (vo.n != NORM_N * 4) { rc = vfail(e, 500, "a lengths block is corrupt"); goto done; }
    for (j = 0; j < NORM_N; j++) {
      uint32_t v = rg_get_u32(vo.p + 4 * j);
      if (v) { docs++; tokens += v - 1; }
    }
  }
  if (r > 1) { rc = vfail(e, r, ""); goto done; }
  if ((r = read_stats(kv, fid, &sd, &st))) { rc = vfail(e, r, ""); goto done; }
  if (sd != docs || st != tokens) {
    rc = rg_fail(e, 500, "full-text index: statistics (%llu documents, %llu "
                 "terms) disagree with the lengths (%llu, %llu)",
                 (unsigned long long)sd, (unsigned long long)st,
                 (unsigned long long)docs, (unsigned long long)tokens);
    goto done;
  }
  /* postings: order, disjoint blocks, lengths, each term's header in its
  ** last block only, with its df */
  key_head(k, 'P', fid);
  for (r = kv->seek(cur, k, FH, &ko, &vo);; r = kv->next(cur, &ko, &vo)) {
    int at_end = r != 0 || ko.n < FH + 5 || memcmp(ko.p, k, FH) != 0;
    size_t this_n = at_end ? 0 : ko.n - 4;
    uint32_t i, first;
    if (r > 1) { rc = vfail(e, r, ""); goto done; }
    if (have_term && (at_end || this_n != tn || memcmp(ko.p, term, tn))) {
      if (!last_seen || hdf != df) {
        rc = rg_fail(e, 500, "full-text index: the term '%.*s' has %s",
                     (int)(tn - FH - 1), (const char *)term + FH, last_seen ?
                     "a df other than its postings'" : "no header in its "
                     "last block");
        goto done;
      }
      have_term = 0;
    }
    if (at_end) break;
    if (!have_term) {
      memcpy(term, ko.p, this_n);
      tn = this_n;
      if (term[tn - 1] != 0) { rc = vfail(e, 500, "a posting key is corrupt"); goto done; }
      have_term = 1;
      df = 0;
      last = 0;
      last_seen = 0;
    }
    first = rg_get_u32(ko.p + this_n);
    if (decode_block(first, vo.p, vo.n, b) || (df && first <= last) ||
        last_seen) {
      rc = rg_fail(e, 500, "full-text index: a block of '%.*s' is corrupt, "
                   "out of order, or after the one holding the header",
                   (int)(tn - FH - 1), (const char *)term + FH);
      goto done;
    }
    for (i = 0; i < b->h.n; i++) {
      uint32_t dl1;
      if ((r = norm_get(&nc, b->doc[i], &dl1))) { rc = vfail(e, r, ""); goto done; }
      if (dl1 == 0 || dl1 - 1 < b->tf[i]) {
        rc = rg_fail(e, 500, "full-text index: document %u has a posting "
                     "(tf %u, term %.*s) but no length, or a shorter one",
                     (unsigned)b->doc[i], (unsigned)b->tf[i], (int)(tn - FH - 1),
                     (const char *)term + FH);
        goto done;
      }
    }
    if (b->h.is_last) { last_seen = 1; hdf = b->h.th.df; }
    last = b->h.last;
    df += b->h.n;
  }
done:
  if (cur) kv->close(cur);
  free(b);
  return rc;
}
/* }===================================================================== */
