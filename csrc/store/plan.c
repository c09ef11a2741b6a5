/*
** plan.c: routing, index choice and the storage sources of queries.
**
** Routing.  A query stays in one logical partition when opts.partition_key
** names it, or when its WHERE holds, as top-level conjuncts, an equality
** between every level of the partition key path and a literal or a
** parameter.  One logical partition is one contiguous key range `lp` of the
** items table (layout.c), so a routed query contacts one physical
** partition.  In a container of revision 2 with a hierarchical key, a WHERE
** that fixes the first level (or the first two of three) routes to the one
** key range, inside one physical partition, that holds every logical
** partition with that prefix (layout.c hashes keys by prefix).  Any other
** query fans out over every physical partition.  Physical partitions are
** hash ranges of one table here, so a fan-out is carried out as one pass in
** key order (or one pass over a global index, whose entries within a term
** are in hash order too); the model counts it as contacting all P
** partitions, and the merge of their results is the order of that pass.
**
** Indexes (index.c) hold, for every indexed scalar, an entry, which the
** index cursor (rg_ixcur) presents as one flat key
**
**     path-id | term | reference (u32 hash32 | u32 seq)
**
** (the functions of the "Index entries" section below are the only ones
** that know this layout).  A path id comes from the path dictionary when
** the query is planned; a path without one has no entry at all.  A conjunct of the WHERE on an indexed path
** against constants becomes a seek: `p = v` (and ARRAY_CONTAINS(p, v) on
** p's elements, and `p IN (...)`, one seek per value) looks up one term,
** which a routed query narrows to its partition's hash; `p < v`, `p BETWEEN
** a AND b` and STARTSWITH(p, 's') read a range of terms of one type.
** Entries only nominate candidates: the whole WHERE is evaluated again on
** every item loaded (long strings are cut in terms, and array paths hold
** every element), so an index can never change a result, only the work.
** Inside one logical partition the entries of a range belong to every
** partition, ordered by term then the top 32 bits of the hash (which only
** nominate: the item key, through the refs table, decides): the source skips the others' (with
** a seek to the partition's hash in the term, or past the term, once a run
** of misses shows they are many), and loads only its own.
**
** Several conjuncts.  A composite index whose leading columns the WHERE
** fixes by equality, and whose next column it bounds by a range, reads
** exactly the matching entries (filter + filter).  Without one, the best
** single conjunct drives and every other equality is checked first against
** its own index, one exact probe of (term, reference) per candidate,
** so that an item neither conjunct allows is never loaded (intersection).
** Among equalities and IN lists the driver is the one whose terms hold
** fewest entries: the index counts a term's entries (its sorted
** duplicates) without reading them.  That is a fact of the data: a token
** of a streaming plan resumes the seek its position is in.
**
** ORDER BY.  A single-key ORDER BY on an indexed path (no array position)
** reads that path's entries in term order (backwards for DESC), which is
** the query's order: with TOP or a page size it stops as soon as it has
** what the merge needs.  Items with no scalar at the path have no entry;
** they sort first ascending (last descending).  In a revision 2 container
** every item has a shape entry (index.c): the shapes lacking the path are
** listed from the meta table and their entries name exactly those items,
** so they are read without touching the others (in an older container,
** by a scan of the items), unless the WHERE proves the path holds a scalar
** in every result.  A multi-key ORDER BY uses a composite index whose
** columns, after the ones the WHERE fixes by equality, are the keys in the
** same or all-opposite directions, when no result can lack a column (the
** WHERE proves it, or no shape lacking one has an item in the route).
** Otherwise the rows are sorted.  Strings cut in terms can tie where their
** full values do not: such a run of entries is loaded and sorted on the
** full values.
**
** GROUP BY, DISTINCT.  `GROUP BY p` (or `SELECT DISTINCT [VALUE] p`) with
** aggregates of p or of literals, and a WHERE the route or one range on p
** answers, is read from p's index alone: each run of equal terms becomes
** one document holding the value, standing for as many items as the run
** has entries (rg_qdoc.weight); only items whose value the index cannot
** give (cut strings, and those lacking a scalar at p, through the shapes)
** are loaded.
**
** The planner's choice depends on the query, its parameters and the
** container spec, and on one fact of the data: which shapes lack a path,
** which only adds or removes items that sort among the undefined ones,
** whose phase is numbered the same either way (a token of a sorting plan
** keeps its pages sorted).  Sources report their position (an item key,
** an index entry key) and a phase for the token, whose context hashes the
** container id, the text, the parameters and the routing partition key.
**
** The charge is the plan's, never the shortcut's.  The work counted
** (rg_work: index lookups, documents loaded and their bytes, index entries
** counted) is what the plan reads in the route: the entries and documents
** the route's own, whatever else the executor steps over.  How the plan is
** carried out is the executor's choice, and counted apart (rg_query_res's
** `done`): in a routed logical partition of at most RG_MEMORY_ITEMS items
** (rg_query_req's memory_items; the parts table says how many), the entries of the index a range, an
** ordered read or a walk reads (and the shape entries of its undefined
** items) are built in memory from the partition's items, in one pass, where
** the stored index interleaves every partition's entries of each term.  The
** sources read them through the same cursor (xcur), so the documents fed,
** their order, the positions in tokens and the work counted are those the
** stored index gives: a partition of 256 items and one of 257 cost what
** their plan costs.
*/

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/token.h"
#include "sql/sql.h"
#include "store/catalog.h"
#include "store/env_int.h"
#include "store/index.h"
#include "store/plan.h"
#include "store/vindex.h"
#include "store/search.h"

#define QMAX_SEGS        32
#define MAX_SHAPES       1024    /* shapes listed; beyond, scan */
#define SKIP_AFTER       8       /* misses before seeking past them */
#define PH_OLD           0x7F    /* a token's phase without the bit an
                                     earlier release set for a partition
                                     it read whole */

enum { SRC_NONE = 1, SRC_SCAN, SRC_TERMS, SRC_RANGE, SRC_WALK,
       SRC_VECTOR, SRC_TEXT };
enum { SA_EQ = 1, SA_IN, SA_PREFIX, SA_RANGE };
enum { R_NONE, R_PARTITION, R_PREFIX };          /* routing */

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
  int loose;                        /* its conjunct is tested all the same */
  int counted;                      /* EQ, IN: entries counted, in */
  int64_t entries;                  /* (-1: unknown) */
} sarg;

/* An exact probe: an index entry's key without its reference. */
typedef struct probe {
  uint8_t key[RG_MAX_KEY];
  size_t n;
} probe;

typedef struct plan {
  int routed;                       /* R_* */
  rg_ikey lp;                       /* R_PARTITION */
  uint8_t rkey[RG_MAX_KEY];         /* the route's item key prefix */
  size_t rklen;
  uint64_t rhash, rmask;            /* the route's entries: hash & mask */
  uint64_t ehash, emask;            /* what references tell of it (the
                                       top 32 bits) */
  int src;
  int mode, tie_desc;
  uint32_t cid;
  uint8_t prefix[RG_PATHID_MAX];    /* the path's (composite's) id */
  size_t plen;
  const rg_composite *comp;         /* the composite index read, or */
  qpath ipath;                      /* the path whose index is read */
  int absent;                       /* no id: nothing was indexed there */
  /* SRC_TERMS: exact terms, sorted, each `tlen` bytes at `toff` */
  rg_buf terms;
  size_t *toff, *tlen, nterms;
  /* SRC_RANGE, SRC_WALK: entries whose term part starts with tpre, within
  ** lo..hi */
  rg_buf tpre, lo, hi;
  int has_lo, has_hi, lo_ex, hi_ex;
  int desc;                         /* read backwards */
  int ordered;                      /* the scan gives the ORDER BY order */
  int ncols, gcol0, gcols;          /* term columns; the ORDER BY ones */
  int coldesc[8];
  /* the items without a scalar at the path: 0 none, 1 read first (asc),
  ** 2 last (desc); through the shapes lacking it, or by a scan */
  int uphase, uscan;
  qpath upath;
  uint64_t *ushape;
  int nushape;
  uint8_t sprefix[RG_PATHID_MAX];   /* the shape entries' path id */
  size_t splen;
  /* intersection: entries every candidate must have (none can pass when
  ** a probe's path has no id) */
  probe *probes;
  int nprobes, probe_none;
  /* SRC_WALK: the path whose values the documents hold; its column's
  ** place in a composite's terms (after wskip bytes), and its order */
  qpath wpath;
  size_t wskip;
  int wcomp, wdesc;
  int wroute;                       /* the fixed columns are the route's
                                       key: every entry is in the route */
  /* SRC_VECTOR: the best items of a vector index (vindex.h); vseek
  ** (SRC_TERMS, SRC_RANGE; 0: none): among the items that seek finds */
  rg_vsearch vs;
  size_t vwant;                     /* rows the page's TOP needs */
  int vseek;
  /* SRC_TEXT: the items a full-text index says can pass the WHERE
  ** (search.h; ftwhere), or (ftwant > 0) its best items for ORDER BY RANK
  ** FullTextScore (ft), then those that can pass (ftwhere) or all */
  rg_ftplan ft, ftw;
  int ftwhere;
  size_t ftwant;                    /* rows the page's TOP needs */
} plan;

typedef struct planner {
  const rg_query *q;
  const rg_qblock *m;
  const rg_cspec *spec;
  const rg_qv *params;
  rg_arena *mem;
  rg_txn *txn;
  rg_env *env;
  sarg *sa;
  int nsa;
  int32_t *conj;
  int nconj;
  char *implied;                    /* conjuncts the source guarantees */
  const sarg *rsa[RG_MAX_PK_PATHS]; /* the equalities a route was taken
                                       from, one a level (or NULL) */
  int force_sort;                   /* a token of a sorting plan */
  const uint8_t *rpos;              /* a streaming token's position */
  size_t rposlen;
  int status;                       /* a path dictionary read failed */
  rg_err *e;
} planner;

/* An entry built in memory (a small partition's): its flat key (index
** prefix | term | reference, as the stored index presents it) and its
** item's key and stored value. */
typedef struct mentry {
  const uint8_t *key, *ikey;
  size_t n, ikn;
  rg_val val;
} mentry;

typedef struct memix {              /* entries in the stored index's order */
  mentry *e;
  size_t n, cap;
} memix;

enum { MX_MAIN, MX_SHAPES };

typedef struct source {
  rg_txn *txn;
  rg_env *env;
  const plan *pl;
  rg_qexec *x;
  rg_work *w;                       /* the plan's work: the charge */
  rg_work *xw;                      /* the executor's (items read, index
                                       seeks, index entries read) */
  /* the routed partition's entries in memory: built once the stored
  ** index has been read switch_at times (seeks and entries; 0: never) */
  uint64_t switch_at;
  int inmem;
  memix mem[2];                     /* MX_MAIN, MX_SHAPES */
  const rg_cspec *spec;
  rg_arena *arena;                  /* their keys */
  /* a walk's: the digests of the container's expired items not yet
  ** purged (sorted), whose entries it does not count */
  uint64_t *expired;
  size_t nexpired;
  int64_t now;
  rg_err *e;
  int resumed, rphase;
  int past;                         /* resume after the document at rpos */
  const uint8_t *rpos, *rokey;
  size_t rposlen, roklen;
  int text;                         /* the pipeline needs the items' text */
  rg_buf okey;                      /* cut groups */
  rg_buf doc;                       /* SRC_WALK: a run's document */
  rg_cur *items;                /* item lookups: a cursor stays on its
                                       page when the next key is there */
  rg_cur *probe;                /* intersection probes */
  /* SRC_VECTOR's seek: the seqs of the entries it finds (read without
  ** their items' keys), not fed, and while they are few, the entries
  ** (u32 n, the entry), to be fed without seeking again */
  int collect;
  uint32_t *cseq;
  size_t ncseq, cseqcap;
  rg_buf cent;
} source;


#define VSEEK_EXACT 40               /* SRC_VECTOR's seek finding at most this
                                        many items per row wanted: each is
                                        scored */
#define VSEEK_MAX 1000               /* past this many: the search keeps to
                                        none (the WHERE tested after) */

/*
** {=====================================================================
** Index entries (the one place that knows their layout)
** ======================================================================
*/
#define ENT_TAIL RG_REF_SIZE        /* the reference: hash32 | seq */

/* The term part of entry key k (of an index whose id is `head` bytes). */
static const uint8_t *ent_term (size_t head, const rg_val *k, size_t *n) {
  *n = k->n >= head + ENT_TAIL ? k->n - head - ENT_TAIL : 0;
  return (const uint8_t *)k->p + head;
}

/* The hash bits the entry's reference holds (the top 32). */
static uint64_t ent_hash (const rg_val *k) {
  return (uint64_t)rg_get_u32((const uint8_t *)k->p + k->n -
                              ENT_TAIL) << 32;
}

/* The entry's reference (ENT_TAIL bytes). */
static const uint8_t *ent_ref (const rg_val *k) {
  return (const uint8_t *)k->p + k->n - ENT_TAIL;
}

static int ent_ok (size_t head, const rg_val *k) {
  return k->n >= head + ENT_TAIL + 1;
}

/* The path id of a dictionary text into out (*n bytes): 1, or 0 when the
** text has none (nothing was ever indexed there) or on failure
** (P->status). */
static int ix_id (planner *P, const char *text, size_t tn, uint8_t *out,
                  size_t *n) {
  int rc;
  *n = 0;
  rc = rg_pathid_find(P->txn, P->env, P->spec->cid, text, tn, out, n,
                          P->e);
  if (rc == 0) return 1;
  *n = 0;
  if (rc != 404 && P->status == 0) P->status = rc;
  return 0;
}

/* The path id of a normalized path (0 when it has none: ids start at 1). */
static uint32_t ix_path_num (planner *P, const char *const *seg, int nseg) {
  uint8_t id[RG_PATHID_MAX];
  size_t n;
  uint32_t v = 0;
  rg_buf t;
  rg_buf_init(&t);
  rg_index_path_text(&t, seg, nseg);
  if (t.oom) P->status = rg_fail(P->e, 500, "out of memory");
  else if (ix_id(P, t.p, t.n, id, &n)) rg_pathid_get(id, n, &v);
  rg_buf_free(&t);
  return v;
}

/* An index's key prefix, the id of a path (or of the composite `name`):
** into out, its length (0: no id, nothing indexed there). */
static size_t ix_prefix (planner *P, const char *const *seg, int nseg,
                         const char *name, uint8_t *out) {
  size_t n = 0;
  rg_buf t;
  rg_buf_init(&t);
  if (name) rg_buf_adds(&t, name);
  else rg_index_path_text(&t, seg, nseg);
  if (t.oom) P->status = rg_fail(P->e, 500, "out of memory");
  else ix_id(P, t.p, t.n, out, &n);
  rg_buf_free(&t);
  return n;
}

/* Does the entry exist (the probe's key holding the reference)? */
static int ix_has (rg_cur *cur, const probe *p, const uint8_t *ref,
                   int *rc) {
  rg_val k, v;
  k.p = (void *)p->key;
  k.n = p->n;
  v.p = (void *)ref;
  v.n = ENT_TAIL;
  *rc = rg_cur_get(cur, &k, &v, RG_BOTH);
  if (*rc == RG_NOTFOUND) { *rc = 0; return 0; }
  return *rc == 0;
}

/* }===================================================================== */


/*
** {=====================================================================
** Entry cursors: the stored index, or a partition's entries in memory
** ======================================================================
*/
/* A cursor over index entries, presented as the stored index presents
** them (flat keys, in byte order): the stored index's, or the entries a
** small partition's items were found to have (MX_MAIN, MX_SHAPES), built
** in memory.  The sources cannot tell the two apart. */
typedef struct xcur {
  rg_ixcur ix;
  const memix *m;                   /* NULL: the stored index */
  size_t at;                        /* m: the entry under the cursor (n:
                                       none) */
  rg_work *xw;
  source *S;
  int which;                        /* MX_MAIN, MX_SHAPES */
  int lazy;                         /* the stored index: moves leave the
                                       item key unresolved (xcur_item) */
} xcur;

static int build_partition (source *S, rg_err *e);

static int xcur_open (source *S, xcur *c, int which) {
  int rc;
  c->xw = S->xw;
  c->S = S;
  c->which = which;
  c->lazy = 0;
  if (S->inmem) {
    c->m = &S->mem[which];
    c->at = c->m->n;
    return 0;
  }
  c->m = NULL;
  if ((rc = rg_ixcur_open(&c->ix, S->txn, S->env)) == 0 &&
      S->pl->routed != R_NONE)        /* only the route's entries count */
    rg_ixcur_route(&c->ix, S->pl->rhash, S->pl->rmask);
  return rc;
}

static void xcur_close (xcur *c) {
  if (c->m == NULL) rg_ixcur_close(&c->ix);
}

static int bytes_cmp (const uint8_t *a, size_t an, const uint8_t *b,
                      size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c ? c : an < bn ? -1 : an > bn;
}

/* RG_IX_* over the entries in memory. */
static int mem_move (xcur *c, rg_val *k, int op) {
  const memix *m = c->m;
  size_t lo = 0, hi = m->n;
  switch (op) {
    case RG_IX_SEEK:                 /* the first entry >= k */
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bytes_cmp(m->e[mid].key, m->e[mid].n, (const uint8_t *)k->p,
                      k->n) < 0)
          lo = mid + 1;
        else hi = mid;
      }
      c->at = lo;
      break;
    case RG_IX_NEXT: c->at = c->at < m->n ? c->at + 1 : m->n; break;
    case RG_IX_PREV: c->at = c->at > 0 && c->at < m->n ? c->at - 1 : m->n;
      break;
    default: c->at = m->n ? m->n - 1 : 0; break;   /* RG_IX_LAST */
  }
  if (c->at >= m->n) { c->at = m->n; return RG_NOTFOUND; }
  k->p = (void *)m->e[c->at].key;
  k->n = m->e[c->at].n;
  return 0;
}

static void mem_free (source *S) {
  int i;
  for (i = 0; i < 2; i++) {
    free(S->mem[i].e);
    memset(&S->mem[i], 0, sizeof(memix));
  }
}

/* The stored index has been read long enough for this partition: its
** entries are built in memory and the cursor moves there, to the entry
** after (NEXT) or before (PREV) the one k holds, the one the stored index
** would have given.  *moved is 0 when they cannot be built: the stored
** index goes on. */
static int to_memory (xcur *c, rg_val *k, int op, int *moved) {
  source *S = c->S;
  uint8_t at[RG_MAX_KEY + RG_REF_SIZE];
  size_t n = k->n;
  rg_val key;
  rg_err e;
  int rc;
  S->switch_at = 0;                  /* once */
  *moved = 0;
  if (n > sizeof(at)) return 0;
  memcpy(at, k->p, n);
  if (build_partition(S, &e)) {      /* (a failure is the stored index's
                                        to meet, if it is one) */
    mem_free(S);
    return 0;
  }
  S->inmem = 1;
  rg_ixcur_close(&c->ix);
  c->m = &S->mem[c->which];
  *moved = 1;
  key.p = at;
  key.n = n;
  rc = mem_move(c, &key, RG_IX_SEEK);        /* the first entry >= k */
  if (op == RG_IX_NEXT) {
    if (rc == 0 && key.n == n && memcmp(key.p, at, n) == 0)
      rc = mem_move(c, k, RG_IX_NEXT);
    else if (rc == 0) *k = key;
  }
  else rc = mem_move(c, k, rc == RG_NOTFOUND ? RG_IX_LAST : RG_IX_PREV);
  return rc;
}

/* The item key of entry k, the one under the cursor, into *v when a lazy
** cursor left it unresolved (v->p NULL): a seek in the refs table.  Empty
** when its reference is dangling, which feed() skips. */
static int xcur_item (xcur *c, const rg_val *k, rg_val *v) {
  int rc;
  if (v->p != NULL) return 0;
  rg_assert(c->m == NULL);
  rc = rg_ixcur_item(&c->ix, k, v);
  if (rc == RG_NOTFOUND) { v->n = 0; v->p = (void *)""; rc = 0; }
  return rc;
}

/* Moves the cursor (RG_IX_*) and resolves the item key of the entry into
** *v (xcur_item), unless the cursor is lazy: then *v is left unresolved
** (NULL) for the caller to resolve when it needs the key. */
static int ix_get (xcur *c, rg_val *k, rg_val *v, int op) {
  int rc, moved;
  if (c->m == NULL && c->S->switch_at && (op == RG_IX_NEXT ||
                                          op == RG_IX_PREV) &&
      c->xw->lookups + c->xw->scanned >= c->S->switch_at) {
    rc = to_memory(c, k, op, &moved);
    if (moved) {
      if (rc == 0) {
        v->p = (void *)c->m->e[c->at].ikey;
        v->n = c->m->e[c->at].ikn;
      }
      return rc;
    }
  }
  if (c->m) {
    if ((rc = mem_move(c, k, op)) == 0) {
      v->p = (void *)c->m->e[c->at].ikey;
      v->n = c->m->e[c->at].ikn;
    }
    return rc;
  }
  if (op == RG_IX_SEEK || op == RG_IX_LAST) c->xw->lookups++;
  if ((rc = rg_ixcur_get(&c->ix, k, op))) return rc;
  c->xw->scanned++;
  v->p = NULL;
  v->n = 0;
  return c->lazy ? 0 : xcur_item(c, k, v);
}

/* The stored value of the item of the entry under the cursor, when the
** cursor knows it (entries built in memory), else NULL. */
static rg_val *xcur_val (xcur *c) {
  return c->m && c->at < c->m->n ? (rg_val *)&c->m->e[c->at].val : NULL;
}
/* }===================================================================== */


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

static int path_add (planner *P, qpath *out, const char *s, size_t n) {
  if (out->n == QMAX_SEGS) return 0;
  if (s == NULL) {
    out->seg[out->n++] = "[]";
    out->arr = 1;
    return 1;
  }
  if ((out->seg[out->n] = mutf8(P->mem, s, n)) == NULL) return 0;
  if (strcmp(out->seg[out->n], "[]") == 0) out->arr = 1;   /* ambiguous */
  out->n++;
  return 1;
}

/* The normalized document path of an expression, if it is one. */
static int path_of (planner *P, int32_t e, qpath *out) {
  const rg_qexpr *ex = &P->q->ex[e];
  int k;
  switch (ex->k) {
    case RG_QE_ROOT: out->n = 0; out->arr = 0; return 1;
    case RG_QE_ALIAS:
      for (k = 0; k < P->m->nsrc; k++) {
        const rg_qsrc *s = &P->m->src[k];
        if (s->slot != ex->slot) continue;
        switch (s->kind) {
          case RG_QS_ROOT: out->n = 0; out->arr = 0; return 1;
          case RG_QS_VALUE: return path_of(P, s->expr, out);
          case RG_QS_IN:
            return path_of(P, s->expr, out) && path_add(P, out, NULL, 0);
          default: return 0;
        }
      }
      return 0;
    case RG_QE_COMPUTED:
      out->n = 0;
      out->arr = 0;
      return path_add(P, out, ex->s, ex->n);
    case RG_QE_PROP:
      return path_of(P, ex->a, out) && path_add(P, out, ex->s, ex->n);
    case RG_QE_INDEX: {
      const rg_qexpr *ix = &P->q->ex[ex->b];
      if (ix->k != RG_QE_LIT || ix->v.t != RG_QV_NUM) return 0;
      return path_of(P, ex->a, out) && path_add(P, out, NULL, 0);
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

static void path_from (qpath *p, const rg_path *d) {
  int j;
  p->n = d->n < QMAX_SEGS ? d->n : QMAX_SEGS;
  p->arr = 0;
  for (j = 0; j < p->n; j++) p->seg[j] = d->seg[j];
}

static int indexed (planner *P, const qpath *p) {
  return p->n > 0 && rg_cspec_indexed(P->spec, p->seg, p->n);
}

static uint32_t path_id (planner *P, const qpath *p) {
  return ix_path_num(P, p->seg, p->n);
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
  return v->t >= RG_QV_NULL && v->t <= RG_QV_STR &&
         !(v->t == RG_QV_NUM && v->d != v->d);
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
  const int32_t *args = rg_qargs(P->q, ex);
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
  if (ex->k == RG_QE_LIKE && !ex->op && ex->c < 0) {
    rg_qv pat;
    size_t i;
    char *pre;
    if (!path_of(P, ex->a, &s->path) || !const_of(P, ex->b, &pat) ||
        pat.t != RG_QV_STR)
      return 0;
    for (i = 0; i < pat.n; i++)
      if (pat.s[i] == '%' || pat.s[i] == '_' || pat.s[i] == '[') break;
    if (i == 0) return 0;
    if ((pre = rg_arena_dup(P->mem, pat.s, i)) == NULL) return 0;
    s->kind = SA_PREFIX;
    s->lo.t = RG_QV_STR;
    s->lo.s = pre;
    s->lo.n = i;
    s->loose = 1;                    /* the LIKE is still tested */
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
    const int32_t *args = rg_qargs(P->q, ex);
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
              ex->op == RG_QF_IS_NULL || ex->op == RG_QF_IS_PRIMITIVE ||
              ex->op == RG_QF_IS_INTEGER || ex->op == RG_QF_IS_FINITE_NUMBER ||
              ex->op == RG_QF_REGEXMATCH || ex->op == RG_QF_STRINGEQUALS)) {
      if (path_of(P, args[0], &q) && same_path(&q, p)) return 1;
    }
    else if (ex->k == RG_QE_LIKE && !ex->op) {
      if (path_of(P, ex->a, &q) && same_path(&q, p)) return 1;
    }
  }
  return 0;
}
/* }===================================================================== */


/* }===================================================================== */


/*
** {=====================================================================
** Shapes and partition sizes
** ======================================================================
*/
/* Items in the routed logical partition (the parts table). */
static uint64_t partition_items (planner *P, const rg_ikey *lp) {
  rg_val k, v;
  k.p = (void *)lp->key;
  k.n = lp->lplen;
  if (rg_kv_get(P->txn, RG_DB_PARTS, k.p, k.n, &v) == 0 &&
      v.n >= 8)
    return rg_get_u64((const uint8_t *)v.p);
  return 0;
}

/* Does the route hold an item of shape h?  (Its references tell the top
** 32 bits of the hash: a partition sharing them may answer for the route,
** which only makes the read look at entries that are not its own.) */
static int shape_present (planner *P, const plan *pl, uint64_t h) {
  uint8_t key[RG_PATHID_MAX + 16], t[8];
  rg_ixcur cur;
  rg_val k;
  size_t n;
  int rc, found = 0;
  rg_term_shape(t, h);
  n = rg_key_index(key, sizeof(key), pl->sprefix, pl->splen, t,
                   RG_SHAPE_TERM, pl->routed != R_NONE, pl->rhash);
  if (rg_ixcur_open(&cur, P->txn, P->env)) return 1;
  if (pl->routed != R_NONE) rg_ixcur_route(&cur, pl->rhash, pl->rmask);
  k.p = key;
  k.n = n;
  rc = rg_ixcur_get(&cur, &k, RG_IX_SEEK);
  if (rc == 0 && k.n == pl->splen + 8 + ENT_TAIL &&
      memcmp(k.p, key, pl->splen + 8) == 0)
    found = pl->routed == R_NONE || (ent_hash(&k) & pl->emask) == pl->ehash;
  else if (rc && rc != RG_NOTFOUND) found = 1;   /* unknown: assume */
  rg_ixcur_close(&cur);
  return found;
}

static int has_id (const uint8_t *ids, size_t n, uint32_t id) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    uint32_t v = rg_get_u32(ids + 4 * mid);
    if (v == id) return 1;
    if (v < id) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

/* The shapes with items in the route that lack a scalar at one of the
** paths `ids`: how many (kept in pl->ushape when `keep`), or -1 when that
** cannot be known (an older container, or too many shapes). */
static int lacking_shapes (planner *P, plan *pl, const uint32_t *ids,
                           int nids, int keep) {
  uint8_t from[13];
  uint64_t found[MAX_SHAPES + 1];
  rg_cur *cur;
  rg_val k, v;
  int rc, n = 0, seen = 0, i;
  if (P->spec->revision < 2) return -1;
  if (pl->splen == 0 &&              /* no shape entry yet: no item */
      (pl->splen = ix_prefix(P, NULL, 0, RG_SHAPE_TEXT, pl->sprefix)) == 0)
    return P->status ? -1 : 0;
  if (shape_present(P, pl, 0)) found[n++] = 0;   /* wide shapes */
  rg_meta_key(from, RG_MK_SHAPE, P->spec->cid, NULL, 0);
  if (rg_cur_open(P->txn, RG_DB_META, &cur)) return -1;
  k.p = from;
  k.n = 5;
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n == 13 && memcmp(k.p, from, 5) == 0) {
    uint64_t h = rg_get_u64((const uint8_t *)k.p + 5);
    int lacks = 0;
    if (++seen > MAX_SHAPES) { n = -1; break; }
    for (i = 0; i < nids && !lacks; i++)
      lacks = !has_id((const uint8_t *)v.p, v.n / 4, ids[i]);
    if (lacks && shape_present(P, pl, h)) found[n++] = h;
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  if (n > 0 && keep) {
    if ((pl->ushape = (uint64_t *)rg_arena_alloc(P->mem, (size_t)n *
                                                 sizeof(uint64_t))) == NULL)
      return -1;
    memcpy(pl->ushape, found, (size_t)n * sizeof(uint64_t));
    pl->nushape = n;
  }
  return n;
}

/* Plans the reading of the items lacking a scalar at path p: 0 when there
** is none to read. */
static int plan_undefined (planner *P, plan *pl, const qpath *p) {
  uint32_t id = path_id(P, p);
  int n = lacking_shapes(P, pl, &id, 1, 1);
  pl->upath = *p;
  if (n < 0) { pl->uscan = 1; return 1; }
  return n > 0;
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

/* The index the plan reads: path p's, or composite ci's. */
static void set_prefix (planner *P, plan *pl, const qpath *p,
                        const rg_composite *ci) {
  pl->plen = p ? ix_prefix(P, p->seg, p->n, NULL, pl->prefix)
               : ix_prefix(P, NULL, 0, ci->name, pl->prefix);
  pl->absent = pl->plen == 0;
  pl->comp = p ? NULL : ci;
  if (p) pl->ipath = *p;
}

/* The source guarantees sarg s exactly: its conjuncts need no test. */
static void imply (planner *P, const sarg *s) {
  if (P->implied == NULL || s->loose) return;
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

/* Can this sarg be served by the index?  (Ranges and IN lists only on
** paths without array positions, where an item has at most one entry.) */
static int usable (planner *P, const sarg *s) {
  if (s->kind == 0 || !indexed(P, &s->path)) return 0;
  if (s->kind != SA_EQ && s->path.arr) return 0;
  return 1;
}

/* Is sarg s on a partition key path (the route serves it already)? */
static int on_pk (planner *P, const sarg *s) {
  int k;
  for (k = 0; k < P->spec->npk; k++)
    if (path_is(&s->path, &P->spec->pk[k])) return 1;
  return 0;
}

/* The other equalities become probes of candidates (intersection). */
static void plan_probes (planner *P, plan *pl, const sarg *drv) {
  int i;
  pl->probes = (probe *)rg_arena_alloc(P->mem, 4 * sizeof(probe));
  if (pl->probes == NULL) return;
  for (i = 0; i < P->nsa && pl->nprobes < 4; i++) {
    const sarg *s = &P->sa[i];
    uint8_t pre[RG_PATHID_MAX];
    size_t pn;
    rg_buf t;
    probe *pr;
    if (s == drv || s->kind != SA_EQ || !usable(P, s) ||
        same_path(&s->path, &drv->path) ||
        (pl->routed != R_NONE && on_pk(P, s)))
      continue;
    if ((pn = ix_prefix(P, s->path.seg, s->path.n, NULL, pre)) == 0) {
      pl->probe_none = 1;            /* no entry there: no candidate passes */
      continue;
    }
    rg_buf_init(&t);
    rg_qv_term(&t, &s->lo, 0, RG_TERM_MAX);
    pr = &pl->probes[pl->nprobes];
    if (!t.oom && (pr->n = rg_key_index(pr->key, sizeof(pr->key), pre, pn,
                                  (const uint8_t *)t.p, t.n, 0, 0)) != 0)
      pl->nprobes++;
    rg_buf_free(&t);
  }
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
  set_prefix(P, pl, &s->path, NULL);
  pl->src = SRC_TERMS;
  {                                  /* exact terms on a one-value path */
    int exact = !s->path.arr;
    for (k = 0; k < pl->nterms && exact; k++) {
      const char *end = pl->terms.p + pl->toff[k] + pl->tlen[k];
      exact = !(pl->tlen[k] >= 2 && end[-2] == 0 && end[-1] == 2);
    }
    if (exact) imply(P, s);
  }
  plan_probes(P, pl, s);
  return 0;
}

/* A range over one type of terms (RANGE and PREFIX sargs). */
static int plan_range (planner *P, plan *pl, const sarg *s, rg_err *e) {
  set_prefix(P, pl, &s->path, NULL);
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
  plan_probes(P, pl, s);
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

/* The values an EQ or IN sarg seeks: how many (at most max) into vals. */
static int sarg_values (planner *P, const sarg *s, rg_qv *vals, int max) {
  const rg_qexpr *ex;
  int i, n = 0;
  if (s->kind == SA_EQ) { vals[0] = s->lo; return 1; }
  ex = &P->q->ex[s->e];
  for (i = 0; i < ex->nlist && n < max; i++)
    if (const_of(P, P->q->list[ex->list + i], &vals[n]) && scalar(&vals[n]))
      n++;
  return i < ex->nlist ? -1 : n;
}

/* How many index entries an EQ or IN sarg's seeks would read: the
** duplicates of each of its terms, which the index counts without
** reading them (in the whole container: the route's share is not
** counted); -1 when that cannot be known.  Counted once per sarg. */
static int64_t sarg_entries (planner *P, sarg *s) {
  uint8_t pre[RG_PATHID_MAX], key[RG_MAX_KEY];
  rg_qv vals[64];
  rg_cur *cur;
  rg_buf t;
  size_t pn;
  int i, n;
  if (s->counted) return s->entries;
  s->counted = 1;
  s->entries = -1;
  if ((n = sarg_values(P, s, vals, 64)) < 0) return -1;
  if ((pn = ix_prefix(P, s->path.seg, s->path.n, NULL, pre)) == 0)
    return P->status ? -1 : (s->entries = 0);   /* no id: no entry */
  if (rg_cur_open(P->txn, RG_DB_INDEX, &cur)) return -1;
  rg_buf_init(&t);
  s->entries = 0;
  for (i = 0; i < n && s->entries >= 0; i++) {
    rg_val k, v;
    size_t c = 0;
    int rc;
    t.n = 0;
    rg_qv_term(&t, &vals[i], 0, RG_TERM_MAX);
    if (t.oom || (k.n = rg_key_index(key, sizeof(key), pre, pn,
                                      (const uint8_t *)t.p, t.n, 0, 0)) == 0) {
      s->entries = -1;
      break;
    }
    k.p = key;
    rc = rg_cur_get(cur, &k, &v, RG_SET);
    if (rc == 0 && rg_cur_count(cur, &c) == 0) s->entries += (int64_t)c;
    else if (rc != RG_NOTFOUND) s->entries = -1;
  }
  rg_buf_free(&t);
  rg_cur_close(cur);
  return s->entries;
}

/* Is sarg s's index the one a streaming token's position is in?  (A
** token resumes the seek it was made by, whatever the counts are now.) */
static int sarg_resumes (planner *P, const sarg *s) {
  uint8_t pre[RG_PATHID_MAX];
  size_t pn;
  if (P->rpos == NULL) return 0;
  pn = ix_prefix(P, s->path.seg, s->path.n, NULL, pre);
  return pn && P->rposlen > pn && memcmp(P->rpos, pre, pn) == 0;
}

/* Is a better driver than b?  Among equalities and IN lists, the one
** whose terms hold fewest entries (the index counts each term's), then
** the higher rank; a seek a token resumes first. */
static int better (planner *P, sarg *a, sarg *b) {
  int ra = rank(a), rb = rank(b);
  if (ra >= 4 && rb >= 4) {
    int64_t na, nb;
    if (sarg_resumes(P, a)) return 1;
    if (sarg_resumes(P, b)) return 0;
    na = sarg_entries(P, a);
    nb = sarg_entries(P, b);
    if (na >= 0 && nb >= 0 && na != nb) return na < nb;
  }
  return ra > rb;
}

/* The best sarg, or NULL: equalities only when `eq_only`; none on the
** partition key when routed (the route serves it). */
static const sarg *best_sarg (planner *P, int eq_only, int routed) {
  sarg *best = NULL;
  int i;
  for (i = 0; i < P->nsa; i++) {
    sarg *s = &P->sa[i];
    if (!usable(P, s)) continue;
    if (eq_only && s->kind != SA_EQ && s->kind != SA_IN) continue;
    if (routed && on_pk(P, s)) continue;
    if (best == NULL || better(P, s, best)) best = s;
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

/* The sarg of kind `kind` (0: EQ or RANGE) on path p, or NULL. */
static const sarg *sarg_on (planner *P, const qpath *p, int kind) {
  int i;
  for (i = 0; i < P->nsa; i++) {
    const sarg *s = &P->sa[i];
    if (s->path.arr || !same_path(&s->path, p)) continue;
    if (kind ? s->kind == kind : s->kind == SA_EQ) return s;
  }
  return NULL;
}

/* Is path p fixed by an EQ sarg on it (a scalar constant)? */
static const sarg *fixed (planner *P, const qpath *p) {
  return sarg_on(P, p, SA_EQ);
}

/* The composite index columns [from, n) of ci hold a scalar in every
** result: the WHERE proves it or no item of the route lacks one. */
static int columns_defined (planner *P, plan *pl, const rg_composite *ci,
                            int from) {
  uint32_t ids[8];
  int i, nids = 0;
  for (i = from; i < ci->n; i++) {
    qpath p;
    path_from(&p, &ci->path[i]);
    if (!proves_scalar(P, &p)) ids[nids++] = path_id(P, &p);
  }
  return nids == 0 || lacking_shapes(P, pl, ids, nids, 0) == 0;
}

/* The prefix of the composite's leading columns fixed by equalities. */
static int composite_fixed (planner *P, plan *pl, const rg_composite *ci,
                            int s, const sarg *const *fx, rg_err *e) {
  size_t limit = rg_composite_limit(ci);
  int i;
  set_prefix(P, pl, NULL, ci);
  for (i = 0; i < s; i++) {
    rg_buf one;
    rg_buf_init(&one);
    rg_qv_term(&one, &fx[i]->lo, 0, limit);
    if (!term_cut(&one)) imply(P, fx[i]);
    rg_buf_free(&one);
    rg_qv_term(&pl->tpre, &fx[i]->lo, ci->desc[i], limit);
  }
  if (pl->tpre.oom) { rg_fail(e, 500, "out of memory"); return -1; }
  pl->src = SRC_RANGE;
  pl->ncols = ci->n;
  for (i = 0; i < ci->n; i++) pl->coldesc[i] = ci->desc[i];
  return 0;
}

/* How many leading columns of ci are fixed by equalities (into fx). */
static int leading_fixed (planner *P, const rg_composite *ci,
                          const sarg **fx) {
  int s = 0;
  while (s < ci->n) {
    qpath p;
    path_from(&p, &ci->path[s]);
    if ((fx[s] = fixed(P, &p)) == NULL) break;
    s++;
  }
  return s;
}

/* Narrows a composite read to a range (or an ascending prefix) `r` on
** column s, after the fixed columns already in pl->tpre. */
static void composite_range (planner *P, plan *pl, const rg_composite *ci,
                             int s, const sarg *r) {
  size_t limit = rg_composite_limit(ci), pn = pl->tpre.n;
  if (r->kind == SA_RANGE) {
    int desc = ci->desc[s], cut = 0;
    uint8_t t = (r->has_lo ? r->lo.t : r->hi.t) == RG_QV_NUM ? 0x08 : 0x09;
    rg_buf one;
    rg_buf_addc(&pl->tpre, desc ? (uint8_t)~t : t);
    rg_buf_init(&one);
    if (r->has_lo) {
      rg_buf *b = desc ? &pl->hi : &pl->lo;
      rg_buf_add(b, pl->tpre.p, pn);
      rg_qv_term(b, &r->lo, desc, limit);
      rg_qv_term(&one, &r->lo, 0, limit);
      cut |= term_cut(&one);
      if (desc) { pl->has_hi = 1; pl->hi_ex = r->lo_ex; }
      else { pl->has_lo = 1; pl->lo_ex = r->lo_ex; }
    }
    if (r->has_hi) {
      rg_buf *b = desc ? &pl->lo : &pl->hi;
      rg_buf_add(b, pl->tpre.p, pn);
      rg_qv_term(b, &r->hi, desc, limit);
      one.n = 0;
      rg_qv_term(&one, &r->hi, 0, limit);
      cut |= term_cut(&one);
      if (desc) { pl->has_lo = 1; pl->lo_ex = r->hi_ex; }
      else { pl->has_hi = 1; pl->hi_ex = r->hi_ex; }
    }
    rg_buf_free(&one);
    if (cut) pl->lo_ex = pl->hi_ex = 0;
    else imply(P, r);
  }
  else if (!ci->desc[s]) {           /* a prefix of an ascending column */
    rg_qv_term(&pl->tpre, &r->lo, 0, limit);
    if (term_cut(&pl->tpre)) pl->tpre.n = pn;
    else {
      pl->tpre.n -= 2;               /* the body, without its end */
      imply(P, r);
    }
  }
}

/* The range (or prefix) sarg on composite column s, or NULL. */
static const sarg *column_range (planner *P, const rg_composite *ci, int s) {
  qpath p;
  const sarg *r;
  if (s >= ci->n) return NULL;
  path_from(&p, &ci->path[s]);
  if ((r = sarg_on(P, &p, SA_RANGE)) == NULL && !ci->desc[s])
    r = sarg_on(P, &p, SA_PREFIX);
  return r;
}

/* Is there an equality (or IN) the composite's `s` leading columns leave
** out?  Seeking it reads that value's entries only, where the composite
** reads its whole run (in order, or bounded by a range) and tests each
** item: plan_order's rule (a path's ORDER BY read is taken only without
** such an equality), for plan_composite and plan_composite_filter. */
static int equality_outside (planner *P, const plan *pl,
                             const rg_composite *ci, int s) {
  int i, j;
  for (i = 0; i < P->nsa; i++) {
    const sarg *x = &P->sa[i];
    int in = 0;
    if (!usable(P, x) || (x->kind != SA_EQ && x->kind != SA_IN)) continue;
    if (pl->routed != R_NONE && on_pk(P, x)) continue;
    for (j = 0; j < s && !in; j++) in = path_is(&x->path, &ci->path[j]);
    if (!in) return 1;
  }
  return 0;
}

/* Tries a composite index for the ORDER BY; 1 when planned. */
static int plan_composite (planner *P, plan *pl, rg_err *e) {
  const rg_qblock *m = P->m;
  qpath keys[RG_QMAX_ORDER];
  int kdesc[RG_QMAX_ORDER], nk = 0, i, c;
  for (i = 0; i < m->norder; i++) {  /* ORDER BY keys not fixed by = */
    qpath p;
    if (!path_of(P, m->order[i].expr, &p) || p.arr || p.n == 0) return 0;
    if (fixed(P, &p)) continue;
    keys[nk] = p;
    kdesc[nk] = m->order[i].desc;
    nk++;
  }
  if (nk == 0) return 0;
  for (c = 0; c < P->spec->ncomp; c++) {
    const rg_composite *ci = &P->spec->comp[c];
    const sarg *fx[8];
    int s = leading_fixed(P, ci, fx), rel = -1, ok = 1;
    if (s + nk > ci->n) continue;
    for (i = 0; i < nk && ok; i++) {
      int r = kdesc[i] != ci->desc[s + i];
      if (!path_is(&keys[i], &ci->path[s + i])) ok = 0;
      else if (rel >= 0 && r != rel) ok = 0;
      rel = r;
    }
    if (!ok || equality_outside(P, pl, ci, s) ||
        !columns_defined(P, pl, ci, s))
      continue;
    if (composite_fixed(P, pl, ci, s, fx, e)) return -1;
    {
      const sarg *r = column_range(P, ci, s);
      if (r) composite_range(P, pl, ci, s, r);
    }
    pl->desc = rel;
    pl->ordered = 1;
    pl->tie_desc = rel;
    pl->gcol0 = s;
    pl->gcols = nk;
    return 1;
  }
  return 0;
}

/* Tries a composite index for two or more filters: its leading columns
** fixed by equalities, the next one bounded by a range or a prefix; 1 when
** planned. */
static int plan_composite_filter (planner *P, plan *pl, rg_err *e) {
  const rg_composite *ci;
  const sarg *fx[8], *r = NULL;
  int c, best = -1, best_cover = 1, s;
  for (c = 0; c < P->spec->ncomp; c++) {
    const rg_composite *cc = &P->spec->comp[c];
    const sarg *f[8], *rr;
    int k = leading_fixed(P, cc, f), cover = k;
    if (equality_outside(P, pl, cc, k)) continue;    /* seek that instead */
    if ((rr = column_range(P, cc, k)) != NULL) cover++;
    if (cover > best_cover) { best = c; best_cover = cover; r = rr; }
  }
  if (best < 0) return 0;
  ci = &P->spec->comp[best];
  s = leading_fixed(P, ci, fx);
  if (composite_fixed(P, pl, ci, s, fx, e)) return -1;
  if (r) composite_range(P, pl, ci, s, r);
  if (pl->tpre.oom || pl->lo.oom || pl->hi.oom) {
    rg_fail(e, 500, "out of memory");
    return -1;
  }
  return 1;
}

/* Plans a single-key ORDER BY read from the path's index; 1 when done. */
static int plan_order (planner *P, plan *pl, rg_err *e) {
  const rg_qblock *m = P->m;
  qpath p;
  const sarg *on = NULL;
  int i, rc;
  if (m->norder != 1 || !path_of(P, m->order[0].expr, &p) || p.arr ||
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
    set_prefix(P, pl, &p, NULL);
    pl->src = SRC_RANGE;
    pl->ncols = 1;
    if (!proves_scalar(P, &p) && plan_undefined(P, pl, &p))
      pl->uphase = m->order[0].desc ? 2 : 1;
  }
  pl->desc = m->order[0].desc;
  pl->tie_desc = pl->desc;
  pl->ordered = 1;
  pl->gcol0 = 0;
  pl->gcols = 1;
  return 1;
}

/* GROUP BY p, or SELECT DISTINCT [VALUE] p, answered from p's index; or
** aggregates of literals (COUNT(1)) over a route every item of which
** holds a value of the partition key (`keyed`: not the none partition),
** from the index of its first level.  The path, or 0 when the query is
** not of that shape. */
static int walk_path (planner *P, qpath *p, int keyed) {
  const rg_query *q = P->q;
  const rg_qblock *m = P->m;
  int32_t e = -1;
  int i;
  if (m->nsrc != 1 || m->src[0].kind != RG_QS_ROOT || m->norder) return 0;
  if (m->ngroup == 1) e = m->group[0];
  else if (m->ngroup == 0 && m->distinct && m->nsel == 1 && m->naggs == 0)
    e = q->sel[m->sel0].expr;
  else if (m->ngroup == 0 && !m->distinct && m->naggs > 0 && keyed)
    path_from(p, &P->spec->pk[0]);
  else return 0;
  if ((e >= 0 && !path_of(P, e, p)) || p->arr || !indexed(P, p)) return 0;
  for (i = 0; i < q->nex; i++) {     /* the aggregates take p or literals */
    const rg_qexpr *ex = &q->ex[i];
    qpath a;
    const rg_qexpr *arg;
    if (ex->k != RG_QE_CALL || !RG_QF_ISAGG(ex->op) || ex->n != 0) continue;
    arg = &q->ex[q->list[ex->list]];
    if (arg->k == RG_QE_LIT && arg->v.t != RG_QV_UNDEF) continue;
    if (!path_of(P, q->list[ex->list], &a) || !same_path(&a, p)) return 0;
  }
  return 1;
}

/* Are the bounds of sarg s exact in the index (no cut string)? */
static int sarg_exact (const sarg *s) {
  rg_buf t;
  int cut = 0;
  rg_buf_init(&t);
  if (s->kind == SA_PREFIX || s->has_lo) {
    rg_qv_term(&t, &s->lo, 0, RG_TERM_MAX);
    cut |= term_cut(&t);
  }
  t.n = 0;
  if (s->kind == SA_RANGE && s->has_hi) {
    rg_qv_term(&t, &s->hi, 0, RG_TERM_MAX);
    cut |= term_cut(&t);
  }
  rg_buf_free(&t);
  return !cut && !s->loose;
}

/* Does every level of the partition key have, among the s fixed columns
** fx of a composite, the very equality the route was taken from (exact:
** the route is not lossy)?  Then the entries under those columns are
** those of the route's items, and no other's; but for a number from 2^53
** on, whose route is its double's while an item's key keeps the integer
** it was written as (layout.c), and whose term is the double's. */
static int route_fixed (const planner *P, const sarg *const *fx, int s) {
  int i, k;
  for (i = 0; i < P->spec->npk; i++) {
    const sarg *r = P->rsa[i];
    for (k = 0; k < s && fx[k] != r; k++) {}
    if (r == NULL || k == s ||
        (r->lo.t == RG_QV_NUM && !(fabs(r->lo.d) < 9007199254740992.0)))
      return 0;
  }
  return 1;
}

/* A composite index whose leading columns equalities fix (exactly: no
** string cut in them) and whose next column is p, when every other
** conjunct is implied by the route: the walk reads p's values there, in
** the fixed columns' range (GROUP BY inside a partition, with the
** partition key first), when no item of the route lacks a later column.
** 1 when planned. */
static int plan_walk_composite (planner *P, plan *pl, const qpath *p,
                                rg_err *e) {
  int c, i;
  for (c = 0; c < P->spec->ncomp; c++) {
    const rg_composite *ci = &P->spec->comp[c];
    const sarg *fx[8];
    size_t limit = rg_composite_limit(ci);
    int s = leading_fixed(P, ci, fx), ok = s >= 1 && s < ci->n &&
                                          path_is(p, &ci->path[s]);
    for (i = 0; i < s && ok; i++) {  /* exact terms */
      rg_buf t;
      rg_buf_init(&t);
      rg_qv_term(&t, &fx[i]->lo, 0, limit);
      ok = !term_cut(&t);
      rg_buf_free(&t);
    }
    for (i = 0; i < P->nconj && ok; i++) {
      int k, fixed_here = 0;
      for (k = 0; k < s; k++)
        if (fx[k]->ci == i) fixed_here = 1;
      ok = P->implied[i] || fixed_here;
    }
    /* an item lacking a later column has no entry in this index */
    if (!ok || !columns_defined(P, pl, ci, s + 1)) continue;
    if (composite_fixed(P, pl, ci, s, fx, e)) return -1;
    pl->src = SRC_WALK;
    pl->wpath = *p;
    pl->wskip = pl->tpre.n;
    pl->wcomp = 1;
    pl->wroute = route_fixed(P, fx, s);
    pl->wdesc = ci->desc[s];
    if (!proves_scalar(P, p) && plan_undefined(P, pl, p)) pl->uphase = 2;
    return 1;
  }
  return 0;
}

/* Plans the walk of p's index, when every conjunct is implied by the
** route or is one exact range on p (which narrows the walk); 1 when
** planned. */
static int plan_walk (planner *P, plan *pl, const qpath *p, rg_err *e) {
  const sarg *on = NULL;
  int i, rc;
  if (P->spec->ncomp && (rc = plan_walk_composite(P, pl, p, e)) != 0)
    return rc;
  for (i = 0; i < P->nsa; i++) {
    const sarg *s = &P->sa[i];
    if (s->path.arr || !same_path(&s->path, p) || !usable(P, s)) continue;
    if ((s->kind == SA_RANGE || s->kind == SA_PREFIX) && sarg_exact(s))
      on = s;
  }
  for (i = 0; i < P->nconj; i++)
    if (!P->implied[i] && !(on && (i == on->ci || i == on->ci2))) return 0;
  if (on) {
    if (plan_range(P, pl, on, e)) return -1;
    pl->nprobes = 0;
  }
  else {
    set_prefix(P, pl, p, NULL);
    pl->ncols = 1;
  }
  pl->src = SRC_WALK;
  pl->wpath = *p;
  if (!proves_scalar(P, p) && plan_undefined(P, pl, p)) pl->uphase = 2;
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

/* The leading levels of the partition key that the WHERE's equalities fix:
** how many, their values in nodes/pkv. */
static int where_levels (planner *P, cJSON *nodes, const cJSON **pkv) {
  int i, k;
  for (i = 0; i < RG_MAX_PK_PATHS; i++) pkv[i] = NULL;
  for (i = 0; i < P->spec->npk; i++) {
    for (k = 0; k < P->nsa; k++)
      if (P->sa[k].kind == SA_EQ && path_is(&P->sa[k].path, &P->spec->pk[i]))
        break;
    if (k == P->nsa || !pk_node(P, &P->sa[k].lo, &nodes[i])) return i;
    pkv[i] = &nodes[i];
  }
  return i;
}

/* The logical partition that the WHERE's equalities name, if any. */
static int where_partition (planner *P, rg_ikey *lp) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  if (where_levels(P, nodes, pkv) != P->spec->npk) return 0;
  return rg_ikey_partition(P->spec, pkv, lp, NULL) == 0;
}

/* A hierarchical key's prefix the WHERE names: the route. */
static int where_prefix (planner *P, plan *pl) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  int n = where_levels(P, nodes, pkv);
  if (n == 0 || n >= P->spec->npk) return 0;
  if (!rg_ikey_prefix(P->spec, pkv, n, pl->rkey, &pl->rklen, &pl->rhash,
                      &pl->rmask))
    return 0;
  pl->routed = R_PREFIX;
  return 1;
}

static void route_partition (plan *pl, const rg_ikey *lp) {
  pl->routed = R_PARTITION;
  pl->lp = *lp;
  memcpy(pl->rkey, lp->key, lp->lplen);
  pl->rklen = lp->lplen;
  pl->rhash = lp->hash;
  pl->rmask = ~(uint64_t)0;
}

static int make_plan (planner *P, const rg_query_req *rq, plan *pl,
                      rg_err *e) {
  const rg_qblock *m = P->m;
  const sarg *s;
  rg_ikey wlp;
  qpath wp;
  int i, rc, wrouted;
  {                                  /* the conjuncts and their sargs */
    int max = P->q->nex + 1;
    P->conj = (int32_t *)rg_arena_alloc(P->mem, (size_t)max * sizeof(int32_t));
    P->sa = (sarg *)rg_arena_alloc(P->mem, (size_t)max * sizeof(sarg));
    P->implied = (char *)rg_arena_alloc(P->mem, (size_t)max);
    if (P->conj == NULL || P->sa == NULL || P->implied == NULL)
      return rg_fail(e, 500, "out of memory");
    memset(P->implied, 0, (size_t)max);
    if (m->where >= 0) conjuncts(P, m->where, P->conj, &P->nconj, max);
    for (i = 0; i < P->nconj; i++)
      if (classify(P, P->conj[i], &P->sa[P->nsa])) P->sa[P->nsa++].ci = i;
    merge_ranges(P);
  }
  pl->rmask = ~(uint64_t)0;
  wrouted = where_partition(P, &wlp);
  if (rq->has_pk) {
    rg_ikey lp;
    if ((rc = rg_ikey_partition(P->spec, rq->pkv, &lp, e))) return rc;
    route_partition(pl, &lp);
    if (wrouted && rq->pk_conflict_msg &&
        (wlp.lplen != pl->lp.lplen ||
         memcmp(wlp.key, pl->lp.key, wlp.lplen) != 0))
      return rg_fail(e, 400, "%s", rq->pk_conflict_msg);
  }
  else if (wrouted) route_partition(pl, &wlp);
  else where_prefix(P, pl);
  pl->emask = pl->rmask & 0xFFFFFFFF00000000ull;
  pl->ehash = pl->rhash & pl->emask;
  if (wrouted && !wlp.lossy && wlp.lplen == pl->lp.lplen &&
      memcmp(wlp.key, pl->lp.key, wlp.lplen) == 0)
    for (i = 0; i < P->spec->npk; i++) {   /* the partition is the answer */
      int k;
      for (k = 0; k < P->nsa; k++) {
        const sarg *sa = &P->sa[k];
        if (sa->kind == SA_EQ && path_is(&sa->path, &P->spec->pk[i])) {
          imply(P, sa);              /* the one where_partition took */
          P->rsa[i] = sa;
          break;
        }
      }
    }
  pl->mode = rg_query_mode(P->q);
  pl->tie_desc = m->norder && m->order[0].desc;
  if (m->nsrc == 0) { pl->src = SRC_NONE; return 0; }
  if ((pl->mode == RG_QX_GROUP || pl->mode == RG_QX_DISTINCT ||
               pl->mode == RG_QX_AGG) &&
      walk_path(P, &wp, pl->routed != R_NONE &&
                        !(rq->has_pk && rq->pkv[0] == NULL))) {
    if ((rc = plan_walk(P, pl, &wp, e)) < 0) return e->status;
    if (rc == 1) return 0;
  }
  if (m->norder && !m->naggs && !m->ngroup && !P->force_sort) {
    if ((rc = plan_composite(P, pl, e)) < 0) return e->status;
    if (rc == 0 && best_sarg(P, 1, pl->routed != R_NONE) == NULL &&
        (rc = plan_order(P, pl, e)) < 0)
      return e->status;
    if (rc == 1) {
      if (pl->mode == RG_QX_SORT) pl->mode = RG_QX_STREAM;
      return 0;
    }
  }
  if (P->spec->ncomp && (rc = plan_composite_filter(P, pl, e)) != 0)
    return rc < 0 ? e->status : 0;
  if ((s = best_sarg(P, 0, pl->routed != R_NONE)) != NULL) {
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
static int kv_fail (source *S, int rc) {
  return rg_kv_fail(S->e, rc, "query");
}

/* Is item key `ikey` inside the route? */
static int in_route (const plan *pl, const uint8_t *ikey, size_t iklen) {
  return pl->routed == R_NONE ||
         (iklen >= pl->rklen && memcmp(ikey, pl->rkey, pl->rklen) == 0);
}

/* May the entry's partition be inside the route?  (Its reference holds
** the top 32 bits of the hash: the item key, in_route, decides.) */
static int ent_in_route (const plan *pl, const rg_val *k) {
  return pl->routed == R_NONE || (ent_hash(k) & pl->emask) == pl->ehash;
}

/* Is the entry's partition beyond the route's in the entry's term? */
static int ent_past_route (const plan *pl, const rg_val *k) {
  return (ent_hash(k) & pl->emask) > pl->ehash;
}

/* What names a document for ties: its reference (hash32, seq), the order
** of an index's entries within one term, so that reading an index in
** ORDER BY order and sorting give ties the same order. */
static void doc_names (rg_qdoc *d, const uint8_t *ikey, uint32_t seq) {
  d->hash = rg_get_u64(ikey + 4) & 0xFFFFFFFF00000000ull;
  d->digest = seq;
}

/* Looks an item up by key, through the source's items cursor: entries of
** one partition name neighbouring keys, found on the page already read. */
static int item_lookup (source *S, rg_val *k, rg_val *v) {
  int rc;
  if (S->items == NULL &&
      (rc = rg_cur_open(S->txn, RG_DB_ITEMS, &S->items)))
    return rc;
  S->xw->loaded++;
  return rg_cur_get(S->items, k, v, RG_SET);
}

/* Feeds the item at `ikey` (value `val`, or read when NULL).  Returns the
** pipeline's answer: 0 more, 1 stop, or a status. */
static int feed (source *S, const uint8_t *ikey, size_t iklen, rg_val *val,
                 const uint8_t *pos, size_t poslen, int phase, int uo,
                 int count) {
  rg_val v;
  rg_qdoc d;
  rg_ihdr h;
  int rc;
  if (S->collect) {                  /* pos: the index entry, whose
                                        reference ends with the seq; an
                                        entry counted without its item */
    if (poslen < ENT_TAIL) return 0;
    S->w->scanned++;
    if (S->ncseq == S->cseqcap) {
      size_t cap = S->cseqcap ? 2 * S->cseqcap : 1024;
      uint32_t *c = (uint32_t *)realloc(S->cseq, cap * sizeof(uint32_t));
      if (c == NULL) return rg_fail(S->e, 500, "out of memory");
      S->cseq = c;
      S->cseqcap = cap;
    }
    S->cseq[S->ncseq++] = rg_get_u32(pos + poslen - 4);
    if (S->ncseq <= VSEEK_EXACT * S->pl->vwant) {
      uint32_t len = (uint32_t)poslen;
      rg_buf_add(&S->cent, &len, 4);
      rg_buf_add(&S->cent, pos, poslen);
      if (S->cent.oom) return rg_fail(S->e, 500, "out of memory");
    }
    return S->ncseq > VSEEK_MAX * S->pl->vwant;   /* 1: too many */
  }
  if (iklen < 12) return 0;
  if (!in_route(S->pl, ikey, iklen)) return 0;   /* another partition */
  if (val == NULL) {
    rg_val k;
    k.p = (void *)ikey;
    k.n = iklen;
    rc = item_lookup(S, &k, &v);
    if (rc == RG_NOTFOUND) return 0;
    if (rc) return kv_fail(S, rc);
    val = &v;
  }
  if (count) {
    S->w->loaded++;
    S->w->loaded_bytes += val->n;
  }
  memset(&d, 0, sizeof(d));
  if (rg_ihdr_get(val->p, val->n, &h, &d.text, &d.len))
    return rg_fail(S->e, 500, "corrupt item record");
  if (h.expiry != 0 && h.expiry <= S->now) return 0;   /* expired: invisible */
  doc_names(&d, ikey, h.seq);
  d.pos = pos;
  d.poslen = poslen;
  d.phase = phase;
  d.unordered_only = uo;
  return rg_qexec_doc(S->x, &d, S->e);
}

static int starts (const rg_val *k, const uint8_t *p, size_t n) {
  return k->n >= n && memcmp(k->p, p, n) == 0;
}

/* Positions `cur` on the last key <= key (inclusive) or < key; returns
** an LMDB code (RG_NOTFOUND when there is none). */
static int seek_back (rg_cur *cur, const uint8_t *key, size_t n,
                      int inclusive, rg_val *k, rg_val *v) {
  int rc;
  k->p = (void *)key;
  k->n = n;
  rc = rg_cur_get(cur, k, v, RG_SEEK);
  if (rc == 0) {
    if (inclusive && k->n == n && memcmp(k->p, key, n) == 0)
      return 0;
    return rg_cur_get(cur, k, v, RG_PREV);
  }
  if (rc != RG_NOTFOUND) return rc;
  return rg_cur_get(cur, k, v, RG_LAST);
}

/* seek_back and seek over the index's flat entries. */
static int ix_seek_back (xcur *c, const uint8_t *key, size_t n,
                         int inclusive, rg_val *k, rg_val *v) {
  int rc;
  k->p = (void *)key;
  k->n = n;
  rc = ix_get(c, k, v, RG_IX_SEEK);
  if (rc == 0) {
    if (inclusive && k->n == n && memcmp(k->p, key, n) == 0)
      return 0;
    return ix_get(c, k, v, RG_IX_PREV);
  }
  if (rc != RG_NOTFOUND) return rc;
  return ix_get(c, k, v, RG_IX_LAST);
}

static int seek (xcur *c, const uint8_t *key, size_t n, rg_val *k,
                 rg_val *v) {
  k->p = (void *)key;
  k->n = n;
  return ix_get(c, k, v, RG_IX_SEEK);
}

/* Seeks to where the previous page ended: its last entry, or the one
** after it when that document gave all its rows. */
static int seek_resume (source *S, xcur *c, rg_val *k, rg_val *v) {
  int rc = seek(c, S->rpos, S->rposlen, k, v);
  if (rc == 0 && S->past && k->n == S->rposlen &&
      memcmp(k->p, S->rpos, k->n) == 0)
    rc = ix_get(c, k, v, RG_IX_NEXT);
  return rc;
}

/* The smallest byte string greater than every key starting with p. */
static size_t after_prefix (const uint8_t *p, size_t n, uint8_t *out) {
  memcpy(out, p, n);
  while (n > 0 && out[n - 1] == 0xFF) n--;
  if (n > 0) out[n - 1]++;
  return n;
}

/* Scans the items under `prefix`, forwards or backwards, from where the
** previous page ended when it ended in this phase. */
static int scan_items (source *S, const uint8_t *prefix, size_t plen,
                       int back, int phase, int uo) {
  rg_cur *cur;
  rg_val k, v;
  uint8_t bound[RG_MAX_KEY + 1];
  int rc, r = 0;
  int resume = S->resumed && S->rphase == phase;
  if ((rc = rg_cur_open(S->txn, RG_DB_ITEMS, &cur)))
    return kv_fail(S, rc);
  rg_cur_bound(cur, prefix, plen);
  if (!back) {
    k.p = (void *)(resume ? S->rpos : prefix);
    k.n = resume ? S->rposlen : plen;
    rc = rg_cur_get(cur, &k, &v, RG_SEEK);
    if (rc == 0 && resume && S->past && k.n == S->rposlen &&
        memcmp(k.p, S->rpos, k.n) == 0)
      rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  else if (resume)
    rc = seek_back(cur, S->rpos, S->rposlen, !S->past, &k, &v);
  else {
    size_t bn = after_prefix(prefix, plen, bound);
    rc = bn ? seek_back(cur, bound, bn, 0, &k, &v)
            : rg_cur_get(cur, &k, &v, RG_LAST);
  }
  while (rc == 0 && starts(&k, prefix, plen)) {
    S->xw->loaded++;
    r = feed(S, (const uint8_t *)k.p, k.n, &v,
             (const uint8_t *)k.p, k.n, phase, uo, 1);
    if (r) break;
    rc = rg_cur_get(cur, &k, &v, back ? RG_PREV : RG_NEXT);
  }
  rg_cur_close(cur);
  if (r < 0 || r > 1) return r;
  if (rc && rc != RG_NOTFOUND) return kv_fail(S, rc);
  return r;
}

/* The items of the route: its key range, or the container's. */
static int scan_route (source *S, int back, int phase, int uo) {
  const plan *pl = S->pl;
  uint8_t cid[4];
  if (pl->routed != R_NONE)
    return scan_items(S, pl->rkey, pl->rklen, back, phase, uo);
  return scan_items(S, cid, rg_key_cid(cid, pl->cid), back, phase, uo);
}

/* Does a candidate pass the probes (intersection)? */
static int probes_pass (source *S, const rg_val *k, int *rc) {
  const plan *pl = S->pl;
  int i;
  if (pl->probe_none) return 0;
  if (pl->nprobes && S->probe == NULL &&
      (*rc = rg_cur_open(S->txn, RG_DB_INDEX, &S->probe)))
    return 0;
  for (i = 0; i < pl->nprobes; i++) {
    S->xw->lookups++;
    if (!ix_has(S->probe, &pl->probes[i], ent_ref(k), rc)) return 0;
  }
  return 1;
}

static int tslice_find (const plan *pl, const uint8_t *t, size_t n) {
  size_t lo = 0, hi = pl->nterms;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    tslice a, b;
    int c;
    a.p = (const char *)t;
    a.n = n;
    b.p = pl->terms.p + pl->toff[mid];
    b.n = pl->tlen[mid];
    c = tslice_cmp(&a, &b);
    if (c == 0) return (int)mid;
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return -1;
}

/* One seek per term (to the route's hash when routed). */
static int src_terms (source *S) {
  const plan *pl = S->pl;
  xcur cur;
  size_t i = 0;
  int rc = 0, r = 0;
  if (S->resumed) {                  /* the term of the last entry */
    rg_val rk;
    const uint8_t *t;
    size_t tn;
    int at;
    rk.p = (void *)S->rpos;
    rk.n = S->rposlen;
    t = ent_term(pl->plen, &rk, &tn);
    if (pl->absent || !ent_ok(pl->plen, &rk) ||
        memcmp(S->rpos, pl->prefix, pl->plen) != 0 ||
        (at = tslice_find(pl, t, tn)) < 0)
      return rg_fail(S->e, 400, "invalid continuation token (altered, "
                     "truncated, or made for another query or database)");
    i = (size_t)at;
  }
  S->w->lookups += (uint64_t)pl->nprobes;
  if (pl->absent) {                  /* each seek finds nothing */
    S->w->lookups += pl->nterms - i;
    return 0;
  }
  if ((rc = xcur_open(S, &cur, MX_MAIN))) return kv_fail(S, rc);
  cur.lazy = S->collect;             /* an entry's seq is in its key */
  for (; i < pl->nterms && !r; i++) {
    uint8_t key[RG_MAX_KEY + 16];
    size_t n = rg_key_index(key, sizeof(key), pl->prefix, pl->plen,
                      (const uint8_t *)pl->terms.p + pl->toff[i], pl->tlen[i],
                      pl->routed != R_NONE, pl->rhash);
    size_t tn = pl->plen + pl->tlen[i];
    rg_val k, v;
    if (n == 0) continue;
    S->w->lookups++;
    if (S->resumed && (S->rposlen >= tn && memcmp(S->rpos, key, tn) == 0))
      rc = seek_resume(S, &cur, &k, &v);
    else rc = seek(&cur, key, n, &k, &v);
    while (rc == 0 && starts(&k, key, tn) &&
           k.n == tn + ENT_TAIL) {
      if (!ent_in_route(pl, &k)) {
        if (ent_past_route(pl, &k)) break;
      }
      else if (probes_pass(S, &k, &rc)) {
        r = feed(S, (const uint8_t *)v.p, v.n, xcur_val(&cur),
                 (const uint8_t *)k.p, k.n, 0, 0, 1);
        if (r) break;
      }
      if (rc) break;
      rc = ix_get(&cur, &k, &v, RG_IX_NEXT);
    }
    if (rc && rc != RG_NOTFOUND) { r = kv_fail(S, rc); break; }
  }
  xcur_close(&cur);
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
/* `head`: the bytes before the terms (an index's prefix), `tail`: after
** them (the item reference): a local index's entries and a cluster's
** differ in both. */
static size_t group_of (int ncols, const int *coldesc, int gcol0, int gcols,
                        size_t head, size_t tail, const uint8_t *key,
                        size_t n) {
  size_t off = head;
  int col;
  if (n < head + tail) return 0;
  for (col = 0; col < ncols; col++) {
    int cut;
    size_t len = term_len(key + off, n - tail - off, coldesc[col], &cut);
    if (len == 0) return 0;
    off += len;
    if (cut && col >= gcol0 && col < gcol0 + gcols) return off;
  }
  return 0;
}

static size_t group_len (const plan *pl, const uint8_t *key, size_t n) {
  if (!pl->ordered) return 0;
  return group_of(pl->ncols, pl->coldesc, pl->gcol0, pl->gcols, pl->plen,
                  ENT_TAIL, key, n);
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
static int feed_group (source *S, xcur *cur, rg_val *k, rg_val *v,
                       size_t g, int *rcp, int phase) {
  const plan *pl = S->pl;
  gitem *items = NULL;
  size_t n = 0, cap = 0, i;
  uint8_t gp[RG_MAX_KEY];
  int rc = 0, r = 0;
  memcpy(gp, k->p, g);
  while (*rcp == 0 && starts(k, gp, g)) {
    gitem *it;
    rg_val iv, ik;
    rg_qdoc d;
    rg_ihdr ih;
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
    memset(&d, 0, sizeof(d));
    if (ik.n >= 12 &&
        in_route(pl, (const uint8_t *)ik.p, ik.n) &&
        (xcur_val(cur) ? (iv = *xcur_val(cur), 1)
                       : (rc = item_lookup(S, &ik, &iv)) == 0) &&
        rg_ihdr_get(iv.p, iv.n, &ih, &d.text, &d.len) == 0) {
      S->w->loaded++;
      S->w->loaded_bytes += iv.n;
      if (ih.expiry == 0 || ih.expiry > S->now) {
        doc_names(&d, (const uint8_t *)ik.p, ih.seq);
        d.pos = NULL;
        d.poslen = 0;
        d.phase = phase;
        d.unordered_only = 0;
        if ((r = rg_qexec_okey(S->x, &d, &S->okey, S->e))) goto done;
        it->oklen = S->okey.n;
        it->eklen = k->n;
        it->iklen = ik.n;
        if ((it->okey = (uint8_t *)malloc(it->oklen + it->eklen +
                                          it->iklen + 1)) == NULL) {
          r = rg_fail(S->e, 500, "out of memory");
          goto done;
        }
        it->ekey = it->okey + it->oklen;
        it->ikey = it->ekey + it->eklen;
        memcpy(it->okey, S->okey.p, it->oklen);
        memcpy(it->ekey, k->p, it->eklen);
        memcpy(it->ikey, ik.p, it->iklen);
        n++;
      }
    }
    else if (rc && rc != RG_NOTFOUND) { r = kv_fail(S, rc); goto done; }
    *rcp = ix_get(cur, k, v, pl->desc ? RG_IX_PREV : RG_IX_NEXT);
  }
  if (n > 1) qsort(items, n, sizeof(gitem), gitem_cmp);
  for (i = 0; i < n && !r; i++) {
    gitem *it = &items[i];
    if (S->resumed && S->rphase == phase) {   /* skip what came before */
      size_t m = it->oklen < S->roklen ? it->oklen : S->roklen;
      int c = memcmp(it->okey, S->rokey, m);
      if (c < 0 || (c == 0 && it->oklen > S->roklen)) continue;
    }
    r = feed(S, it->ikey, it->iklen, NULL, it->ekey, it->eklen, phase, 0, 0);
  }
done:
  for (i = 0; i < n; i++) free(items[i].okey);
  free(items);
  return r;
}

/* Is the term part of entry key k beyond the range's far end?  (A term
** part longer than the bound but starting with it is a composite entry
** whose bounded column equals the bound.) */
static int past_end (const plan *pl, const rg_val *k) {
  size_t tn;
  const uint8_t *t = ent_term(pl->plen, k, &tn);
  const rg_buf *b = pl->desc ? &pl->lo : &pl->hi;
  int has = pl->desc ? pl->has_lo : pl->has_hi;
  int ex = pl->desc ? pl->lo_ex : pl->hi_ex;
  int c;
  if (!has) return 0;
  c = memcmp(t, b->p, tn < b->n ? tn : b->n);
  if (c == 0) c = tn < b->n ? -1 : 0;
  if (pl->desc) c = -c;
  return ex ? c >= 0 : c > 0;
}

/* Is entry k at the excluded near end of the range? */
static int at_excluded_start (const plan *pl, const rg_val *k) {
  const rg_buf *b = pl->desc ? &pl->hi : &pl->lo;
  int ex = pl->desc ? pl->hi_ex : pl->lo_ex;
  size_t tn;
  const uint8_t *t = ent_term(pl->plen, k, &tn);
  return ex && tn >= b->n && memcmp(t, b->p, b->n) == 0;
}

/* In a routed read, entries of other partitions: after SKIP_AFTER in a
** row, seek past them (to the route's hash in this term, or past the
** term).  Returns the cursor's code, on the next entry to look at. */
static int skip_other (source *S, xcur *cur, rg_val *k, rg_val *v,
                       int *misses) {
  const plan *pl = S->pl;
  uint8_t key[RG_MAX_KEY + 32];
  size_t tn, n, hn = pl->plen;
  uint64_t h;
  if (++*misses < SKIP_AFTER)
    return ix_get(cur, k, v, pl->desc ? RG_IX_PREV : RG_IX_NEXT);
  *misses = 0;
  ent_term(pl->plen, k, &tn);
  hn += tn;
  h = ent_hash(k) & pl->emask;
  memcpy(key, k->p, hn);
  if (!pl->desc) {
    if (h < pl->ehash) {
      rg_ref_hash_put(key + hn, pl->ehash);
      return seek(cur, key, hn + 4, k, v);
    }
    n = after_prefix(key, hn, key);
    return n ? seek(cur, key, n, k, v) : RG_NOTFOUND;
  }
  if (h > pl->ehash) {
    rg_ref_hash_put(key + hn, pl->ehash | ~pl->emask);
    memset(key + hn + 4, 0xFF, 4);
    return ix_seek_back(cur, key, hn + ENT_TAIL, 1, k, v);
  }
  return ix_seek_back(cur, key, hn, 0, k, v);
}

/* Positions the cursor at the start of the range (or where the previous
** page ended in this phase). */
static int range_start (source *S, xcur *cur, rg_val *k, rg_val *v,
                        int phase, const uint8_t *pre, size_t pn) {
  const plan *pl = S->pl;
  uint8_t key[RG_MAX_KEY + 32];
  size_t n;
  if (S->resumed && S->rphase == phase && S->rposlen >= pn) {
    size_t g = group_len(pl, S->rpos, S->rposlen);
    if (g && !pl->desc) return seek(cur, S->rpos, g, k, v);   /* the run */
    if (g) {
      size_t bn = after_prefix(S->rpos, g, key);
      return bn ? ix_seek_back(cur, key, bn, 0, k, v)
                : ix_get(cur, k, v, RG_IX_LAST);
    }
    if (!pl->desc) return seek_resume(S, cur, k, v);
    return ix_seek_back(cur, S->rpos, S->rposlen, !S->past, k, v);
  }
  if (!pl->desc) {
    const rg_buf *lo = pl->has_lo ? &pl->lo : &pl->tpre;
    n = rg_key_index(key, sizeof(key), pl->prefix, pl->plen,
                     (const uint8_t *)lo->p, lo->n, 0, 0);
    return n ? seek(cur, key, n, k, v) : RG_NOTFOUND;
  }
  if (pl->has_hi) {                  /* after every entry of the term */
    n = rg_key_index(key, sizeof(key) - ENT_TAIL - 1, pl->prefix, pl->plen,
               (const uint8_t *)pl->hi.p, pl->hi.n, 0, 0);
    if (n == 0) return RG_NOTFOUND;
    if (!pl->hi_ex) { memset(key + n, 0xFF, ENT_TAIL + 1); n += ENT_TAIL + 1; }
    return ix_seek_back(cur, key, n, 0, k, v);
  }
  n = after_prefix(pre, pn, key);
  return n ? ix_seek_back(cur, key, n, 0, k, v)
           : ix_get(cur, k, v, RG_IX_LAST);
}

static int src_range (source *S, int phase) {
  const plan *pl = S->pl;
  xcur cur;
  rg_val k, v;
  uint8_t pre[RG_MAX_KEY + 1];
  size_t pn = pl->plen + pl->tpre.n;
  int rc, r = 0, misses = 0;
  S->w->lookups += 1 + (uint64_t)pl->nprobes;
  if (pn > RG_MAX_KEY || pl->absent) return 0;
  rg_key_index(pre, sizeof(pre), pl->prefix, pl->plen,
               (const uint8_t *)pl->tpre.p, pl->tpre.n, 0, 0);
  if ((rc = xcur_open(S, &cur, MX_MAIN))) return kv_fail(S, rc);
  cur.lazy = S->collect;             /* an entry's seq is in its key */
  rc = range_start(S, &cur, &k, &v, phase, pre, pn);
  while (rc == 0 && starts(&k, pre, pn) && ent_ok(pl->plen, &k)) {
    size_t g;
    if (past_end(pl, &k)) break;
    if (at_excluded_start(pl, &k)) {
      rc = ix_get(&cur, &k, &v, pl->desc ? RG_IX_PREV : RG_IX_NEXT);
      continue;
    }
    if (!ent_in_route(pl, &k)) {
      rc = skip_other(S, &cur, &k, &v, &misses);
      continue;
    }
    misses = 0;
    if ((g = group_len(pl, (const uint8_t *)k.p, k.n)) != 0) {
      r = feed_group(S, &cur, &k, &v, g, &rc, phase);
      if (r) break;
      continue;
    }
    if (probes_pass(S, &k, &rc)) {
      r = feed(S, (const uint8_t *)v.p, v.n, xcur_val(&cur),
               (const uint8_t *)k.p, k.n, phase, 0, 1);
      if (r) break;
    }
    if (rc) break;
    rc = ix_get(&cur, &k, &v, pl->desc ? RG_IX_PREV : RG_IX_NEXT);
  }
  xcur_close(&cur);
  if (r) return r;
  if (rc && rc != RG_NOTFOUND) return kv_fail(S, rc);
  return 0;
}

/* The items lacking a scalar at the path: through the entries of the
** shapes lacking it, or by a scan of the route. */
static int src_undefined (source *S, int phase) {
  const plan *pl = S->pl;
  xcur cur;
  size_t hn = pl->splen;
  int i = 0, rc = 0, r = 0;
  if (pl->uscan) return scan_route(S, 0, phase, 1);
  if (pl->nushape == 0) return 0;
  if ((rc = xcur_open(S, &cur, MX_SHAPES))) return kv_fail(S, rc);
  S->w->lookups++;
  if (S->resumed && S->rphase == phase && S->rposlen >= hn + 8) {
    uint64_t at = rg_get_u64(S->rpos + hn);
    while (i < pl->nushape && pl->ushape[i] < at) i++;
  }
  for (; i < pl->nushape && !r; i++) {
    uint8_t key[RG_PATHID_MAX + 16], t[8];
    size_t n;
    rg_val k, v;
    rg_term_shape(t, pl->ushape[i]);
    n = rg_key_index(key, sizeof(key), pl->sprefix, hn, t, RG_SHAPE_TERM,
                     pl->routed != R_NONE, pl->rhash);
    if (S->resumed && S->rphase == phase && S->rposlen > hn + 8 &&
        memcmp(S->rpos, key, hn + 8) == 0)
      rc = seek_resume(S, &cur, &k, &v);
    else rc = seek(&cur, key, n, &k, &v);
    while (rc == 0 && starts(&k, key, hn + 8) &&
           k.n == hn + 8 + ENT_TAIL) {
      if (!ent_in_route(pl, &k)) {
        if (ent_past_route(pl, &k)) break;
      }
      else {
        r = feed(S, (const uint8_t *)v.p, v.n, xcur_val(&cur),
                 (const uint8_t *)k.p, k.n, phase, 1, 1);
        if (r) break;
      }
      rc = ix_get(&cur, &k, &v, RG_IX_NEXT);
    }
    if (rc && rc != RG_NOTFOUND) { r = kv_fail(S, rc); break; }
  }
  xcur_close(&cur);
  return r;
}

/* The document of a run of equal terms: the path's value, nested. */
static int walk_doc (source *S, const uint8_t *t, size_t tn) {
  const qpath *p = &S->pl->wpath;
  size_t used;
  int i;
  S->doc.n = 0;
  for (i = 0; i < p->n; i++) {
    rg_buf_addc(&S->doc, '{');
    rg_json_quote(&S->doc, p->seg[i], strlen(p->seg[i]));
    rg_buf_addc(&S->doc, ':');
  }
  if (rg_qv_term_json(t, tn, &S->doc, &used) != 0 || used != tn) return -1;
  for (i = 0; i < p->n; i++) rg_buf_addc(&S->doc, '}');
  return S->doc.oom ? -1 : 0;
}

static int u64_cmp (const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Does the sorted array a of n values hold x? */
static int u64_has (const uint64_t *a, size_t n, uint64_t x) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a[mid] == x) return 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

/* The digests of the container's items expired as of S->now and not yet
** purged, from the TTL table (one seek when there are none). */
static int expired_items (source *S) {
  uint8_t from[RG_TTL_KEY];
  size_t cap = 0;
  rg_cur *cur;
  rg_val k, v;
  int rc;
  rg_key_ttl(from, S->pl->cid, 0, 0);
  if ((rc = rg_cur_open(S->txn, RG_DB_TTL, &cur))) return kv_fail(S, rc);
  k.p = from;
  k.n = 4;
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && k.n == RG_TTL_KEY && memcmp(k.p, from, 4) == 0 &&
         (int64_t)rg_get_u64((const uint8_t *)k.p + 4) <= S->now) {
    if (S->nexpired == cap) {
      uint64_t *n;
      cap = cap ? cap * 2 : 16;
      if ((n = (uint64_t *)realloc(S->expired, cap * sizeof(uint64_t))) == NULL) {
        rg_cur_close(cur);
        return rg_fail(S->e, 500, "out of memory");
      }
      S->expired = n;
    }
    S->expired[S->nexpired++] = rg_get_u64((const uint8_t *)k.p + 12);
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  if (rc && rc != RG_NOTFOUND) return kv_fail(S, rc);
  if (S->nexpired > 1)
    qsort(S->expired, S->nexpired, sizeof(uint64_t), u64_cmp);
  return 0;
}

/* Is the item of key ik expired (a walk counts no expired item)? */
static int is_expired (const source *S, const rg_val *ik) {
  return S->nexpired > 0 &&
         u64_has(S->expired, S->nexpired,
                 rg_ikey_digest((const uint8_t *)ik->p, ik->n));
}

/* GROUP BY and DISTINCT from the index: one document per run of equal
** values (standing for the run's entries in the route, expired items
** left out); the items of a cut value are loaded.  In a composite index
** the value is the column after the fixed ones (wskip bytes into the
** terms). */
static int src_walk (source *S, int phase) {
  const plan *pl = S->pl;
  xcur cur;
  rg_val k, v;
  uint8_t pre[RG_MAX_KEY + 1], key[RG_MAX_KEY + 32], val[RG_MAX_KEY];
  size_t pn = pl->plen + pl->tpre.n;
  int rc, r = 0;
  S->w->lookups++;
  if (pn > RG_MAX_KEY || pl->absent) return 0;
  if (S->expired == NULL && (r = expired_items(S))) return r;
  rg_key_index(pre, sizeof(pre), pl->prefix, pl->plen,
               (const uint8_t *)pl->tpre.p, pl->tpre.n, 0, 0);
  if ((rc = xcur_open(S, &cur, MX_MAIN))) return kv_fail(S, rc);
  /* an entry counts by itself when its item is surely in the route and
  ** none is expired: its item key is needed only for a cut value's item */
  cur.lazy = (pl->routed == R_NONE || pl->wroute) && S->nexpired == 0;
  rc = range_start(S, &cur, &k, &v, phase, pre, pn);
  while (rc == 0 && starts(&k, pre, pn) && ent_ok(pl->plen, &k) && !r) {
    size_t tn, gn, n, i;
    const uint8_t *t;
    uint64_t count = 0;
    int cut;
    if (past_end(pl, &k)) break;
    if (at_excluded_start(pl, &k)) {
      rc = ix_get(&cur, &k, &v, RG_IX_NEXT);
      continue;
    }
    t = ent_term(pl->plen, &k, &tn);
    if (tn <= pl->wskip ||
        (gn = term_len(t + pl->wskip, tn - pl->wskip, pl->wdesc, &cut)) == 0) {
      r = rg_fail(S->e, 500, "corrupt index entry");
      break;
    }
    n = pl->plen + pl->wskip + gn;   /* the run: entries of this value */
    memcpy(key, k.p, n);
    if (pl->routed != R_NONE && !pl->wcomp) {   /* to the route's entries */
      rg_ref_hash_put(key + n, pl->ehash);
      rc = seek(&cur, key, n + 4, &k, &v);
    }
    while (rc == 0 && starts(&k, key, n) &&
           (pl->wcomp || k.n == n + ENT_TAIL)) {
      if (!ent_in_route(pl, &k)) {
        if (!pl->wcomp && ent_past_route(pl, &k)) break;
      }
      else if (cut) {                /* the full values are in the items */
        if ((rc = xcur_item(&cur, &k, &v))) break;
        r = feed(S, (const uint8_t *)v.p, v.n, xcur_val(&cur), NULL, 0,
                 phase, 0, 1);
        if (r) break;
      }
      else if (cur.lazy) count++;
      /* the reference's hash bits only nominate: the item key decides */
      else if (in_route(pl, (const uint8_t *)v.p, v.n) && !is_expired(S, &v))
        count++;
      rc = ix_get(&cur, &k, &v, RG_IX_NEXT);
    }
    if (r || (rc && rc != RG_NOTFOUND)) break;
    if (count) {
      rg_qdoc d;
      for (i = 0; i < gn; i++)       /* the value's term, ascending */
        val[i] = pl->wdesc ? (uint8_t)~key[n - gn + i] : key[n - gn + i];
      if (walk_doc(S, val, gn)) {
        r = rg_fail(S->e, 500, "corrupt index entry");
        break;
      }
      S->w->scanned += count;
      memset(&d, 0, sizeof(d));
      d.text = S->doc.p;
      d.len = S->doc.n;
      d.phase = phase;
      d.weight = count;
      d.index_values = 1;
      if ((r = rg_qexec_doc(S->x, &d, S->e))) break;
    }
    if (pl->routed != R_NONE && !pl->wcomp && rc == 0 && starts(&k, key, n)) {
      size_t an = after_prefix(key, n, key);      /* past the term */
      rc = an ? seek(&cur, key, an, &k, &v) : RG_NOTFOUND;
    }
  }
  xcur_close(&cur);
  if (r) return r;
  if (rc && rc != RG_NOTFOUND) return kv_fail(S, rc);
  return 0;
}

/*
** The entries of a small partition, built in memory from its items.
*/
/* Is path p's first segment a computed property (its values are not in
** the items' text)? */
static int computed_path (const rg_cspec *spec, const char *const *seg,
                          int n) {
  int i;
  for (i = 0; i < spec->ncp && n > 0; i++)
    if (strcmp(spec->cp[i].name, seg[0]) == 0) return 1;
  return 0;
}

/* When may the plan's entries be built from the items of its partition?
** A range, an ordered read or a walk (an equality seeks the partition's
** own entries at once) routed to a logical partition of at most `max`
** items, on an index of stored paths: once the stored index has been read
** (seeks and entries) twice as many times as the partition has items, it
** is likely to be read much longer, stepping over other partitions'
** entries.  0: never. */
static uint64_t switch_point (planner *P, const plan *pl, long max) {
  const rg_cspec *spec = P->spec;
  uint64_t n;
  int i;
  if (pl->routed != R_PARTITION || pl->absent ||
      (pl->src != SRC_RANGE && pl->src != SRC_WALK) || !spec->automatic)
    return 0;
  if (spec->ncp) {
    if (pl->comp) {
      for (i = 0; i < pl->comp->n; i++)
        if (computed_path(spec, pl->comp->path[i].seg, pl->comp->path[i].n))
          return 0;
    }
    else if (computed_path(spec, pl->ipath.seg, pl->ipath.n)) return 0;
    if (pl->uphase && computed_path(spec, pl->upath.seg, pl->upath.n))
      return 0;
  }
  if (max == 0) max = RG_MEMORY_ITEMS;
  if (max < 0 || (n = partition_items(P, &pl->lp)) > (uint64_t)max) return 0;
  return 2 * n + 16;
}

/* Adds the entry prefix | term | reference of the item (key ik, stored
** value val, seq) to m; the key is made in arena a. */
static int mem_add (memix *m, rg_arena *a, const uint8_t *pre, size_t pn,
                    const uint8_t *term, size_t tn, const rg_val *ik,
                    const rg_val *val, uint32_t seq) {
  uint8_t *key;
  mentry *me;
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    mentry *ne = (mentry *)realloc(m->e, cap * sizeof(mentry));
    if (ne == NULL) return -1;
    m->e = ne;
    m->cap = cap;
  }
  if ((key = (uint8_t *)rg_arena_alloc(a, pn + tn + RG_REF_SIZE)) == NULL)
    return -1;
  memcpy(key, pre, pn);
  if (tn) memcpy(key + pn, term, tn);
  rg_ref_put(key + pn + tn, rg_get_u64((const uint8_t *)ik->p + 4), seq);
  me = &m->e[m->n++];
  me->key = key;
  me->n = pn + tn + RG_REF_SIZE;
  me->ikey = (const uint8_t *)ik->p;
  me->ikn = ik->n;
  me->val = *val;
  return 0;
}

static int mentry_cmp (const void *a, const void *b) {
  const mentry *x = (const mentry *)a, *y = (const mentry *)b;
  return bytes_cmp(x->key, x->n, y->key, y->n);
}

static int ushape_has (const plan *pl, uint64_t h) {
  return u64_has(pl->ushape, (size_t)pl->nushape, h);
}

/* The terms item text `t` gives the plan's index into *out: 1, 0 when it
** has no entry there, -1 when the text is not JSON or out of memory. */
static int item_terms (const plan *pl, rg_tape *tape, rg_arena *a,
                       const char *t, size_t n, rg_buf *out) {
  const char *const *seg[8];
  int nseg[8], i;
  if (pl->comp) {
    for (i = 0; i < pl->comp->n; i++) {
      seg[i] = pl->comp->path[i].seg;
      nseg[i] = pl->comp->path[i].n;
    }
    return rg_qdoc_terms(tape, a, t, n, seg, nseg, pl->comp->desc,
                         pl->comp->n, rg_composite_limit(pl->comp), out);
  }
  seg[0] = pl->ipath.seg;
  nseg[0] = pl->ipath.n;
  return rg_qdoc_terms(tape, a, t, n, seg, nseg, NULL, 1, RG_TERM_MAX, out);
}

/* Builds, from the items of the routed partition, the entries the plan
** reads (its index's, and the shape entries of its undefined items), in
** the order of the stored index: every item of the partition, expired or
** not, has there the entries the write path gave it. */
static int build_partition (source *S, rg_err *e) {
  const plan *pl = S->pl;
  int shapes = pl->uphase && !pl->uscan && pl->nushape > 0;
  int wide = shapes && pl->ushape[0] == 0;   /* may lack anything */
  int same = pl->comp == NULL && same_path(&pl->ipath, &pl->upath);
  rg_arena *a = S->arena;
  rg_tape tape;
  rg_arena docmem;
  rg_buf terms;
  rg_cur *cur;
  rg_val k, v;
  int rc, r = 0;
  memset(&tape, 0, sizeof(tape));
  rg_arena_init(&docmem);
  rg_buf_init(&terms);
  if ((rc = rg_cur_open(S->txn, RG_DB_ITEMS, &cur)))
    return rg_kv_fail(e, rc, "query");
  k.p = (void *)pl->rkey;
  k.n = pl->rklen;
  rc = rg_cur_get(cur, &k, &v, RG_SEEK);
  while (rc == 0 && starts(&k, pl->rkey, pl->rklen) && r == 0) {
    rg_ihdr h;
    const char *text;
    size_t tn;
    int has;
    S->xw->loaded++;
    if (rg_ihdr_get(v.p, v.n, &h, &text, &tn)) {
      r = rg_fail(e, 500, "corrupt item record");
      break;
    }
    rg_arena_reset(&docmem);
    terms.n = 0;
    if ((has = item_terms(pl, &tape, &docmem, text, tn, &terms)) < 0) {
      r = rg_fail(e, 500, terms.oom ? "out of memory"
                                       : "corrupt item record");
      break;
    }
    if (has && mem_add(&S->mem[MX_MAIN], a, pl->prefix, pl->plen,
                       (const uint8_t *)terms.p, terms.n, &k, &v, h.seq)) {
      r = rg_fail(e, 500, "out of memory");
      break;
    }
    if (shapes) {                    /* its shape, if it may be a lacking one */
      int lacks = same ? !has : 0;
      if (!same) {
        const char *const *seg[1];
        int nseg[1];
        seg[0] = pl->upath.seg;
        nseg[0] = pl->upath.n;
        terms.n = 0;
        lacks = rg_qdoc_terms(&tape, &docmem, text, tn, seg, nseg, NULL, 1,
                              RG_TERM_MAX, &terms) == 0;
      }
      if (lacks || wide) {
        cJSON *doc = NULL;
        uint64_t sh = 0;
        uint8_t st[RG_SHAPE_TERM];
        if ((r = rg_json_parse(text, tn, &doc, e)) ||
            (r = rg_index_shape(S->txn, S->env, S->spec, doc, &sh, e))) {
          cJSON_Delete(doc);
          break;
        }
        cJSON_Delete(doc);
        rg_term_shape(st, sh);
        if (ushape_has(pl, sh) &&
            mem_add(&S->mem[MX_SHAPES], a, pl->sprefix, pl->splen, st,
                    RG_SHAPE_TERM, &k, &v, h.seq)) {
          r = rg_fail(e, 500, "out of memory");
          break;
        }
      }
    }
    rc = rg_cur_get(cur, &k, &v, RG_NEXT);
  }
  rg_cur_close(cur);
  rg_tape_free(&tape);
  rg_arena_free(&docmem);
  rg_buf_free(&terms);
  if (r) return r;
  if (rc && rc != RG_NOTFOUND) return rg_kv_fail(e, rc, "query");
  for (rc = 0; rc < 2; rc++)
    if (S->mem[rc].n > 1)
      qsort(S->mem[rc].e, S->mem[rc].n, sizeof(mentry), mentry_cmp);
  return 0;
}

/*
** {=====================================================================
** Vector search
** ======================================================================
*/
/* A constant expression's elements as a vector of the embedding's type
** (float32 for both float types) in `out`: 0, or -1 when it is none. */
static int query_vector (planner *P, int32_t e, const rg_vembed *m,
                         void *out) {
  const rg_qexpr *ex = &P->q->ex[e];
  int i, n = 0;
  double d[4096];
  if (ex->k == RG_QE_PARAM) {
    const rg_qv *v = &P->params[ex->slot];
    const rg_qnode *c;
    if (v->t != RG_QV_ARR || v->node->n != (uint32_t)m->dims) return -1;
    for (i = 0, c = v->node + 1; i < m->dims; i++, c += c->size) {
      if (c->t != RG_QV_NUM) return -1;
      d[n++] = c->d;
    }
  } else if (ex->k == RG_QE_ARRAY && ex->nlist == m->dims) {
    for (i = 0; i < ex->nlist; i++) {
      const rg_qexpr *el = &P->q->ex[P->q->list[ex->list + i]];
      int neg = 0;
      if (el->k == RG_QE_UNARY && el->op == RG_QO_NEG) {
        el = &P->q->ex[el->a];
        neg = 1;
      }
      if (el->k != RG_QE_LIT || el->v.t != RG_QV_NUM) return -1;
      d[n++] = neg ? -el->v.d : el->v.d;
    }
  } else return -1;
  for (i = 0; i < n; i++) {
    if (m->dtype == RG_VT_FLOAT16) {
      uint16_t h;
      if (rg_vput(RG_VT_FLOAT16, &h, 0, d[i])) return -1;
      ((float *)out)[i] = rg_half_to_float(h);
    } else if (rg_vput(m->dtype, out, (size_t)i, d[i])) return -1;
  }
  return 0;
}

/* A count (TOP, OFFSET, LIMIT): a literal or a parameter; -1 otherwise. */
static int64_t count_value (planner *P, int32_t e) {
  const rg_qexpr *ex = &P->q->ex[e];
  const rg_qv *v = ex->k == RG_QE_LIT ? &ex->v
                 : ex->k == RG_QE_PARAM ? &P->params[ex->slot] : NULL;
  if (v == NULL || v->t != RG_QV_NUM || v->d < 0 || v->d != floor(v->d) ||
      v->d > 1e9)
    return -1;
  return (int64_t)v->d;
}

/* ORDER BY VectorDistance(path, query) with a TOP, over a path with a
** vector index whose similarity and type the call keeps: the index's
** best items, in SORT mode, instead of the plan made.  Not when the query
** is routed to one partition (its items are read: there are few), nor
** when an index seek serves the WHERE unless filterPriority is 0 (the
** seek finds the few items that pass, each then scored exactly) or the
** WHERE fixes the index's shard key (that shard alone is searched). */
static int plan_vector (planner *P, plan *pl, rg_err *e) {
  const rg_qblock *m = P->m;
  const rg_qexpr *call;
  const rg_qvd *vd;
  const rg_vembed *emb;
  qpath path;
  int64_t top, off = 0;
  void *query;
  int one_shard = 0, vseek = 0;
  uint64_t shard = 0;
  if (m->norder != 1 || m->ngroup || m->naggs || m->distinct ||
      pl->routed != R_NONE)
    return 0;
  call = &P->q->ex[m->order[0].expr];
  if (call->k != RG_QE_CALL || call->op != RG_QF_VECTORDISTANCE) return 0;
  vd = &P->q->vd[call->slot];
  if (!path_of(P, P->q->list[call->list], &path) || path.arr) return 0;
  emb = rg_vpolicy_find(P->spec, path.seg, path.n);
  if (emb == NULL || emb->index < 0 || vd->dist != emb->dist ||
      vd->dtype != emb->dtype)
    return 0;
  {                                  /* a WHERE that fixes the shard key: its
                                        shard alone */
    const rg_vindex *ix = &P->spec->vix[emb->index];
    rg_buf t;
    int i, j, fixed = ix->nshard > 0;
    rg_buf_init(&t);
    for (i = 0; fixed && i < ix->nshard; i++) {
      const sarg *eq = NULL;
      for (j = 0; j < P->nsa; j++)
        if (P->sa[j].kind == SA_EQ && scalar(&P->sa[j].lo) &&
            path_is(&P->sa[j].path, &ix->shard[i]))
          eq = &P->sa[j];
      if (eq) rg_qv_term(&t, &eq->lo, 0, RG_TERM_MAX);
      else fixed = 0;
    }
    if (t.oom) { rg_buf_free(&t); return rg_fail(e, 500, "out of memory"); }
    if (fixed) {
      one_shard = 1;
      shard = rg_vindex_shard_hash(t.p, t.n);
    }
    rg_buf_free(&t);
  }
  if (pl->src != SRC_SCAN && vd->filter_priority != 0 && !one_shard) {
    /* the seek's items: a diskANN graph searched among them (src_vector
    ** scores them exactly when they are few); other kinds score them */
    if (P->spec->vix[emb->index].kind != RG_VIX_DISKANN ||
        (pl->src != SRC_TERMS && pl->src != SRC_RANGE) || pl->uphase ||
        pl->ordered)
      return 0;
    vseek = pl->src;
  }
  if (m->top >= 0) top = count_value(P, m->top);
  else if (m->limit >= 0) top = count_value(P, m->limit);
  else return 0;
  if (m->offset >= 0) off = count_value(P, m->offset);
  if (top < 0 || off < 0) return 0;
  query = rg_arena_alloc(P->mem, 4 * (size_t)emb->dims);
  if (query == NULL) return rg_fail(e, 500, "out of memory");
  if (query_vector(P, P->q->list[call->list + 1], emb, query)) return 0;
  memset(&pl->vs, 0, sizeof(pl->vs));
  pl->vs.spec = P->spec;
  pl->vs.embed = (int)(emb - P->spec->vemb);
  pl->vs.query = query;
  pl->vs.brute = vd->brute;
  pl->vs.quant_mult = vd->quant_mult;
  pl->vs.search_mult = vd->search_mult;
  pl->vs.one_shard = one_shard;
  pl->vs.shard = shard;
  {
    rg_scope *sc = rg_env_scope(P->env);
    pl->vs.in_scope = sc != NULL && sc->txn == P->txn;
  }

  pl->vwant = (size_t)(top + off);
  pl->vseek = vseek;
  if (P->implied)                    /* the index guarantees no conjunct a
                                        seek it replaces did */
    memset(P->implied, 0, (size_t)P->nconj);
  pl->src = SRC_VECTOR;
  pl->mode = RG_QX_SORT;
  return 0;
}

static int cseq_has (void *ud, uint32_t seq) {
  const source *S = (const source *)ud;
  return bsearch(&seq, S->cseq, S->ncseq, sizeof(uint32_t), rg_u32_cmp) != NULL;
}

/* The item key of an index entry kept apart from its cursor (its key and
** reference, `n` bytes), as the seek would read it: on a remote database
** the refs entry is read in the entry's partition (remote.h's context:
** the entry read again, from what was fetched). */
static int entry_item (source *S, const uint8_t *ent, size_t n,
                       rg_val *ikey) {
  if (n < RG_REF_SIZE) return RG_NOTFOUND;
  if (rg_env_remote(S->env) != NULL) {
    rg_cur *c;
    rg_val k, d;
    int rc;
    if ((rc = rg_cur_open(S->txn, RG_DB_INDEX, &c))) return rc;
    k.p = ent;
    k.n = n - RG_REF_SIZE;
    d.p = ent + n - RG_REF_SIZE;
    d.n = RG_REF_SIZE;
    rc = rg_cur_get(c, &k, &d, RG_BOTH);
    rg_cur_close(c);
    if (rc && rc != RG_NOTFOUND) return rc;
  }
  return rg_ref_item(S->txn, S->env, rg_get_u32(ent + n - 4), ikey);
}

/* SRC_VECTOR's seek run without feeding: the seqs it finds, sorted.  Few
** (VSEEK_EXACT per row wanted): the entries it kept fed, their items
** scored (1, or a status); else 0 and the search keeps to them; many
** (past VSEEK_MAX per row): 0 and none kept (S->ncseq 0), the WHERE is
** tested on what the search gives, as most items pass it.  (SRC_VECTOR
** sorts: a token never resumes its seek.) */
static int vseek_run (source *S) {
  int rc;
  S->collect = 1;
  rc = S->pl->vseek == SRC_TERMS ? src_terms(S) : src_range(S, 0);
  S->collect = 0;
  if (rc == 1) {                     /* too many */
    S->ncseq = 0;
    return 0;
  }
  if (rc) return rc;
  if (S->ncseq <= VSEEK_EXACT * S->pl->vwant) {
    const uint8_t *p = (const uint8_t *)S->cent.p, *end = p + S->cent.n;
    while (rc == 0 && p < end) {     /* as the seek would feed them */
      uint32_t n;
      const uint8_t *pos = p + 4;
      rg_val ik;
      memcpy(&n, p, 4);
      p = pos + n;
      rc = entry_item(S, pos, n, &ik);
      if (rc == RG_NOTFOUND) { rc = 0; continue; }   /* dangling */
      if (rc) return kv_fail(S, rc);
      rc = feed(S, (const uint8_t *)ik.p, ik.n, NULL, pos, n, 0, 0, 1);
    }
    return rc == 0 || rc == 1 ? 1 : rc;
  }
  qsort(S->cseq, S->ncseq, sizeof(uint32_t), rg_u32_cmp);
  return 0;
}

/* The items of SRC_VECTOR, best first, until the pipeline has as many
** rows as it needs or the index has no more: a search for the rows wanted,
** then for twice as many while the WHERE leaves too few, each going on
** from where the last stopped (rg_vsearch.widen, diskANN: a round reads
** only what it adds, so small steps load few items past those needed; an
** index that searches again from the start is asked for four times as
** many); with a seek, among the items it finds. */
static int src_vector (source *S) {
  rg_vsearch vs = S->pl->vs;
  size_t want = S->pl->vwant, ask = want ? want : 1, fedcap = 0, nfed = 0, i;
  uint32_t *fed = NULL;              /* seqs fed already, sorted */
  int rc = 0;
  if (want == 0) return 0;
  vs.widen = 1;                      /* each round goes on from the last */
  if (S->pl->vseek) {
    if ((rc = vseek_run(S))) return rc == 1 ? 0 : rc;
    if (S->ncseq) {
      vs.accept = cseq_has;
      vs.aud = S;
    }
  }
  for (;;) {
    vs.k = ask;
    if ((rc = rg_vindex_search(S->txn, S->env, &vs, S->e))) break;
    S->w->vector_read += vs.vectors_read * rg_vtype_size(
      S->pl->vs.spec->vemb[vs.embed].dtype) * (uint64_t)
      S->pl->vs.spec->vemb[vs.embed].dims;
    S->w->codes += vs.codes_read;
    S->w->nodes += vs.nodes_read;
    vs.vectors_read = vs.codes_read = vs.nodes_read = 0;
    for (i = 0; i < vs.nhit && rc == 0; i++) {
      rg_val ik;
      size_t lo = 0, hi = nfed;
      uint32_t seq = vs.hit[i].seq;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fed[mid] < seq) lo = mid + 1; else hi = mid;
      }
      if (lo < nfed && fed[lo] == seq) continue;
      if (nfed == fedcap) {
        size_t cap = fedcap ? 2 * fedcap : 64;
        uint32_t *nf = (uint32_t *)realloc(fed, cap * sizeof(uint32_t));
        if (nf == NULL) { rc = rg_fail(S->e, 500, "out of memory"); break; }
        fed = nf;
        fedcap = cap;
      }
      memmove(fed + lo + 1, fed + lo, (nfed - lo) * sizeof(uint32_t));
      fed[lo] = seq;
      nfed++;
      rc = rg_vindex_item(S->txn, S->env, &vs, &vs.hit[i], &ik);
      if (rc == RG_NOTFOUND) { rc = 0; continue; }
      if (rc) { rc = kv_fail(S, rc); break; }
      rc = feed(S, (const uint8_t *)ik.p, ik.n, NULL, NULL, 0, 0, 0, 1);
    }
    if (rc || rg_qexec_passed(S->x) >= want || !vs.more || vs.nhit < ask)
      break;
    rg_vsearch_free(&vs);
    ask *= vs.nkept ? 2 : 4;         /* going on costs what a round adds;
                                        starting again (flat,
                                        quantizedFlat) all of it */
  }
  rg_vsearch_end(&vs);
  free(fed);
  return rc == 1 ? 0 : rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Full-text candidates
** ======================================================================
*/
/* A scan's plan over the container (a routed one reads its partition)
** whose WHERE holds a full-text condition on an indexed path, or that
** ranks by FullTextScore with TOP (search.c chooses): the items the index
** names, fed as the scan feeds them. */
static int plan_text (planner *P, plan *pl, int local, int64_t now,
                      rg_err *e) {
  const rg_qblock *m = P->m;
  int r;
  size_t want = 0;
  if (pl->src != SRC_SCAN || pl->routed != R_NONE) return 0;
  r = rg_ftindex_plan(P->txn, P->env, P->spec, P->q, P->params, P->conj,
                      P->nconj, P->mem, &pl->ftw, e);
  if (r < 0) return -r;
  pl->ftwhere = r;
  if (m->rank && m->norder == 1 && !local && !m->ngroup && !m->naggs &&
      !m->distinct && (m->top >= 0 || m->limit >= 0)) {
    int64_t top = count_value(P, m->top >= 0 ? m->top : m->limit), off = 0;
    if (m->offset >= 0) off = count_value(P, m->offset);
    if (top >= 0 && off >= 0 && top + off > 0) {
      r = rg_ftindex_rank_plan(P->txn, P->env, P->spec, P->q, P->params,
                               m->order[0].expr, now, P->mem, &pl->ft, e);
      if (r < 0) return -r;
      if (r == 1) want = (size_t)(top + off);
    }
  }
  if (want && pl->ftwhere) {         /* few candidates: score them all */
    rg_work w;
    uint64_t n;
    memset(&w, 0, sizeof(w));
    if ((r = rg_ftindex_estimate(P->txn, &pl->ftw, &n, &w, e))) return r;
    if (n <= 64 * (uint64_t)want + 256) want = 0;
  }
  if (want && pl->ftwhere && pl->ftw.t.all && pl->ftw.fp == pl->ft.fp) {
    int i, j, sub = 1;                /* every row that can pass holds all
                                         the score's terms: rank those */
    for (i = 0; i < pl->ft.t.n && sub; i++) {
      for (j = 0; j < pl->ftw.t.n; j++)
        if (pl->ftw.t.len[j] == pl->ft.t.len[i] &&
            memcmp(pl->ftw.t.t[j], pl->ft.t.t[i], pl->ft.t.len[i]) == 0)
          break;
      sub = j < pl->ftw.t.n;
    }
    pl->ft.t.all = sub;
  }
  if (want || pl->ftwhere) {
    pl->src = SRC_TEXT;
    pl->ftwant = want;
  }
  return 0;
}

/* Feeds the items of n seqs in key order (a scan's order and positions,
** from where the previous page ended), each found in its bucket's
** instance of index p (bk: search.h; NULL locally).  0, 1 (stop), or a
** status. */
static int feed_seqs (source *S, const rg_ftplan *p, const uint32_t *seqs,
                      const uint16_t *bk, size_t n) {
  size_t i, nk = 0;
  size_t *off = NULL;
  tslice *keys = NULL;
  rg_buf b;
  int rc, r = 0;
  rg_buf_init(&b);
  if (n && ((off = (size_t *)malloc(n * sizeof(size_t))) == NULL ||
            (keys = (tslice *)malloc(n * sizeof(tslice))) == NULL)) {
    r = rg_fail(S->e, 500, "out of memory");
    goto done;
  }
  for (i = 0; i < n; i++) {
    rg_val ik;
    rc = rg_ftindex_item(S->txn, S->env, p, seqs[i], bk ? bk[i] : 0, &ik);
    if (rc == RG_NOTFOUND) continue;
    if (rc) { r = kv_fail(S, rc); goto done; }
    off[nk] = b.n;
    keys[nk++].n = ik.n;
    rg_buf_add(&b, ik.p, ik.n);
  }
  if (b.oom) { r = rg_fail(S->e, 500, "out of memory"); goto done; }
  for (i = 0; i < nk; i++) keys[i].p = b.p + off[i];
  if (nk) qsort(keys, nk, sizeof(tslice), tslice_cmp);
  for (i = 0; i < nk && r == 0; i++) {
    if (S->resumed && S->rphase == 0) {
      tslice at;
      at.p = (const char *)S->rpos;
      at.n = S->rposlen;
      if (tslice_cmp(&keys[i], &at) < 0) continue;
    }
    r = feed(S, (const uint8_t *)keys[i].p, keys[i].n, NULL,
             (const uint8_t *)keys[i].p, keys[i].n, 0, 0, 1);
  }
done:
  free(off);
  free(keys);
  rg_buf_free(&b);
  return r;
}

/* The items that can pass the WHERE but those fed (sorted seqs). */
static int feed_candidates (source *S, const uint32_t *fed, size_t nfed) {
  uint32_t *seqs = NULL;
  uint16_t *bk = NULL;
  size_t n = 0, i, m = 0;
  int r;
  if ((r = rg_ftindex_docs(S->txn, &S->pl->ftw, &seqs, &bk, &n, S->w,
                           S->e)))
    return r;
  for (i = 0; i < n; i++)
    if (!nfed || !bsearch(&seqs[i], fed, nfed, sizeof(uint32_t), rg_u32_cmp)) {
      if (bk) bk[m] = bk[i];
      seqs[m++] = seqs[i];
    }
  r = feed_seqs(S, &S->pl->ftw, seqs, bk, m);
  free(seqs);
  free(bk);
  return r;
}

/* The items of the container but those fed (sorted seqs), in key order. */
static int feed_rest (source *S, const uint32_t *fed, size_t nfed) {
  uint8_t cid[4];
  rg_cur *cur;
  rg_val k, v;
  int rc, r = 0;
  size_t plen = rg_key_cid(cid, S->pl->cid);
  if ((rc = rg_cur_open(S->txn, RG_DB_ITEMS, &cur))) return kv_fail(S, rc);
  k.p = cid;
  k.n = plen;
  for (rc = rg_cur_get(cur, &k, &v, RG_SEEK); rc == 0 && starts(&k, cid, plen);
       rc = rg_cur_get(cur, &k, &v, RG_NEXT)) {
    rg_ihdr h;
    const char *json;
    size_t jn;
    if (rg_ihdr_get(v.p, v.n, &h, &json, &jn) == 0 && nfed &&
        bsearch(&h.seq, fed, nfed, sizeof(uint32_t), rg_u32_cmp))
      continue;
    if ((r = feed(S, (const uint8_t *)k.p, k.n, &v, (const uint8_t *)k.p,
                  k.n, 0, 0, 1)))
      break;
  }
  rg_cur_close(cur);
  if (r) return r;
  return rc && rc != RG_NOTFOUND ? kv_fail(S, rc) : 0;
}

/* ORDER BY RANK: the index's best items by the query's own score, in
** rounds (one more than the rows wanted, so that a first round whose last
** score is below the others' feeds them all; then four times as many
** while the WHERE leaves too few).  Each round feeds the items scoring above its last one (all
** of them, ties included, rank above every item not fed), and once the
** index has no more, the rest of the container (scores 0 and none). */
static int src_rank (source *S) {
  size_t want = S->pl->ftwant, ask = want + 1, nfed = 0, i, m;
  uint32_t *fed = NULL, *seqs = NULL, *batch = NULL;
  uint16_t *bk = NULL, *bbk = NULL;
  double *scores = NULL;
  size_t n = 0;
  int r = 0;
  for (;;) {
    uint32_t *nf;
    int done;
    if ((r = rg_ftindex_topk(S->txn, &S->pl->ft, ask, &seqs, &scores, &bk,
                             &n, S->w, S->e)))
      break;
    done = n < ask;
    if ((batch = (uint32_t *)malloc((n ? n : 1) * sizeof(uint32_t))) ==
        NULL ||
        (bk && (bbk = (uint16_t *)malloc((n ? n : 1) * sizeof(uint16_t))) ==
         NULL) ||
        (nf = (uint32_t *)realloc(fed, (nfed + n + 1) * sizeof(uint32_t))) ==
        NULL) {
      r = rg_fail(S->e, 500, "out of memory");
      break;
    }
    fed = nf;
    for (i = m = 0; i < n; i++) {
      if (!done && scores[i] <= scores[n - 1]) break;
      if (nfed && bsearch(&seqs[i], fed, nfed, sizeof(uint32_t), rg_u32_cmp))
        continue;
      if (bbk) bbk[m] = bk[i];
      batch[m++] = seqs[i];
    }
    if ((r = feed_seqs(S, &S->pl->ft, batch, bbk, m))) break;
    memcpy(fed + nfed, batch, m * sizeof(uint32_t));
    nfed += m;
    qsort(fed, nfed, sizeof(uint32_t), rg_u32_cmp);
    free(batch);
    free(seqs);
    free(scores);
    free(bk);
    free(bbk);
    batch = seqs = NULL;
    scores = NULL;
    bk = bbk = NULL;
    if (rg_qexec_passed(S->x) >= want) break;
    if (done) {
      r = S->pl->ftwhere ? feed_candidates(S, fed, nfed)
                         : feed_rest(S, fed, nfed);
      break;
    }
    ask *= 4;
  }
  free(batch);
  free(seqs);
  free(scores);
  free(bk);
  free(bbk);
  free(fed);
  return r;
}

/* The candidates of a WHERE's full-text condition, or the ranking's. */
static int src_text (source *S) {
  uint32_t *seqs = NULL;
  uint16_t *bk = NULL;
  size_t n = 0;
  int r;
  if (S->pl->ftwant) return src_rank(S);
  if ((r = rg_ftindex_docs(S->txn, &S->pl->ftw, &seqs, &bk, &n, S->w, S->e)))
    return r;
  r = feed_seqs(S, &S->pl->ftw, seqs, bk, n);
  free(seqs);
  free(bk);
  return r;
}
/* }===================================================================== */


static int run (source *S) {
  const plan *pl = S->pl;
  int r = 0;
  switch (pl->src) {
    case SRC_NONE: return rg_qexec_once(S->x, S->e);
    case SRC_SCAN: return scan_route(S, 0, 0, 0);
    case SRC_TERMS: return src_terms(S);
    case SRC_VECTOR: return src_vector(S);
    case SRC_TEXT: return src_text(S);
    default: {
      int (*main) (source *, int) = pl->src == SRC_WALK ? src_walk
                                                         : src_range;
      if (pl->uphase == 1) {         /* without the path first, then ... */
        if (!(S->resumed && S->rphase == 1)) r = src_undefined(S, 0);
        return r ? r : main(S, 1);
      }
      if (!(pl->uphase == 2 && S->resumed && S->rphase == 1))
        r = main(S, 0);
      if (r == 0 && pl->uphase == 2) r = src_undefined(S, 1);
      return r;
    }
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
  rg_ftsrc fts;                      /* full-text statistics (search.h) */
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

/* The context a query's continuation token is bound to: the container
** and its spec (a plan made under another indexing policy cannot be
** continued), the text, the parameters (their JSON text) and the routing
** partition (lp, when rq->has_pk). */
static uint64_t token_context (const rg_cspec *spec, const rg_query_req *rq,
                               const char *ptext, size_t plen,
                               const rg_ikey *lp) {
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

static int bad_token (rg_err *e) {
  return rg_fail(e, 400, "invalid continuation token (altered, truncated, "
                 "or made for another query or database)");
}

int rg_query_exec (rg_txn *txn, const rg_cont *c, int64_t now,
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
  if (c->spec->ncp) rg_query_computed(st.q, c->spec->cp, c->spec->ncp);
  if (rq->params) {
    if (!cJSON_IsObject(rq->params)) {
      rc = rg_fail(e, 400, "params must be a table of {name = value}");
      goto done;
    }
    rg_json_print(rq->params, &st.ptext);
    if (st.ptext.oom) { rc = rg_fail(e, 500, "out of memory"); goto done; }
  }
  if ((rc = rg_query_bind(st.q, rq->params ? st.ptext.p : NULL, st.ptext.n,
                          &st.ptape, &st.mem, &params, e)) ||
      (rc = rg_query_vpolicy(st.q, params, c->spec, e)))
    goto done;
  if ((rc = rg_cont_alive(txn, c, e))) goto done;
  memset(&P, 0, sizeof(P));
  P.q = st.q;
  P.m = &st.q->blk[0];
  P.spec = c->spec;
  P.params = params;
  P.mem = &st.mem;
  P.txn = txn;
  P.env = c->env;
  P.e = e;
  st.pl.cid = c->spec->cid;
  if (rq->continuation) {            /* the token's context is checked once
                                        the routing is known, below */
    int mode, phase;
    const uint8_t *pos;
    size_t poslen;
    rg_buf peek;
    rg_buf_init(&peek);
    if (rg_token_open(NULL, RG_TOKEN_QUERY, 0, rq->continuation,
                      rq->contlen, &peek, NULL) == 0 &&
        rg_qexec_peek((const uint8_t *)peek.p, peek.n, &mode, &phase, &pos,
                      &poslen) == 0) {
      P.force_sort = mode == RG_QX_SORT;
      if (mode == RG_QX_STREAM && poslen &&
          (P.rpos = (const uint8_t *)rg_arena_dup(&st.mem, (const char *)pos,
                                                  poslen)) != NULL)
        P.rposlen = poslen;
    }
    rg_buf_free(&peek);
  }
  if ((rc = make_plan(&P, rq, &st.pl, e))) goto done;
  if (P.status) { rc = P.status; goto done; }   /* the path dictionary */
  if (c->spec->nvix && (rc = plan_vector(&P, &st.pl, e))) goto done;
  if (c->spec->ft &&
      (rc = plan_text(&P, &st.pl, rq->fts_local &&
                      st.pl.routed == R_PARTITION, now, e)))
    goto done;
  if (rq->admit &&                   /* a prefix's hash names its range */
      (rc = rq->admit(rq->admit_ud, st.pl.routed != R_NONE, st.pl.rhash, e)))
    goto done;
  ctx = token_context(c->spec, rq, st.ptext.p, st.ptext.n, &st.pl.lp);
  if (rq->continuation) {
    if ((rc = rg_token_open(c->env->secret, RG_TOKEN_QUERY, ctx,
                            rq->continuation, rq->contlen, &st.tok, e)))
      goto done;
  }
  if ((rc = rg_qexec_new(&st.x, st.q, params, st.pl.mode, st.pl.tie_desc,
                         rq->max_items,
                         rq->continuation ? (const uint8_t *)st.tok.p : NULL,
                         st.tok.n, e)))
    goto done;
  rg_qexec_limits(st.x, rq->max_rows, rq->max_bytes);
  rg_qexec_deadline(st.x, rq->deadline);
  {                                  /* full-text statistics: the scope */
    uint8_t cid[4];
    rg_put_u32(cid, c->spec->cid);
    if (rq->fts_local && st.pl.routed == R_PARTITION)
      rg_ftsrc_init(&st.fts, txn, c, st.pl.rkey, st.pl.rklen, now, &r->work);
    else rg_ftsrc_init(&st.fts, txn, c, cid, 4, now, &r->work);
    st.fts.deadline = rq->deadline;
    rg_qexec_text(st.x, &st.fts.iface);
  }
  if (c->spec->ncp) rg_qexec_computed(st.x, c->spec->cp, c->spec->ncp);
  if (rq->udf) rg_qexec_udf(st.x, rq->udf);
  if (st.q->blk[0].where >= 0) {     /* test only what the source does not
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
  S.xw = &r->done;
  S.now = now;
  S.e = e;
  S.text = rg_qexec_needs_text(st.x);
  rg_buf_init(&S.okey);
  rg_buf_init(&S.doc);
  S.resumed = rg_qexec_resume(st.x, &S.rphase, &S.rpos, &S.rposlen,
                              &S.rokey, &S.roklen);
  S.rphase &= PH_OLD;
  S.past = S.resumed && rg_qexec_resume_past(st.x);
  if (S.resumed && st.pl.src == SRC_TERMS && S.rposlen == 0)
    rc = bad_token(e);
  else {
    S.spec = c->spec;
    S.arena = &st.mem;
    S.switch_at = switch_point(&P, &st.pl, rq->memory_items);
    rc = run(&S);
    r->inmem = S.inmem;
  }
  mem_free(&S);
  free(S.expired);
  if (S.items) rg_cur_close(S.items);
  if (S.probe) rg_cur_close(S.probe);
  free(S.cseq);
  rg_buf_free(&S.cent);
  rg_buf_free(&S.okey);
  rg_buf_free(&S.doc);
  r->work.steps += rg_qexec_steps(st.x);
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
  r->work.partitions = st.pl.src == SRC_NONE ? 0
                     : st.pl.routed != R_NONE ? 1 : (uint64_t)c->spec->nparts;
  r->cross_partition = st.pl.src != SRC_NONE &&
                       st.pl.routed != R_PARTITION;
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
