/*
** vindex.c: vector indexes in the store (vindex.h says what they keep).
**
** Storage format (the `vector` table, whose keys layout.c builds;
** integers big-endian in keys, host order in values, as a database file
** is of one architecture).  An index instance is named by a 16-byte prefix
**
**     P = cid u32 | ixid u32 | shard u64
**
** where ixid is the low 32 bits of rg_hash of the embedding's path text
** (vpolicy.c refuses two paths of one container with the same ixid) and
** shard is 0, or, with a shard_key, rg_hash of the JSON text of the item's
** values at its paths (an undefined one written `undefined`); on a remote
** database, whose places are buckets (remote.h), the item's physical
** partition goes in the shard's top 16 bits (layout.h's RG_VSHARD_AT): one
** instance per bucket, beside its items, written with them.  Under P:
**
**     P 'h'            -> header: u8 version 1, u8 kind, u8 type, u8 dist,
**                         u16 dims, u16 degree, u32 count, u32 top, u32 free,
**                         u32 entry, u64 gen, u8 trained, then when trained
**                         the SQ8 offsets (dims f32) and step (f32)
**     P 'x' u32:block  -> exact vectors of slots block*BV .. +BV-1:
**                         BV u32 seqs (0: empty), BV f64 squared norms,
**                         BV vectors (dims elements of the type: float32,
**                         float16 bits, int8, uint8)
**     P 'c' u32:block  -> codes of slots block*BC .. +BC-1: BC u32 seqs,
**                         BC codes of dims bytes (once trained)
**     P 'a' u32:vid    -> u8 n, n u32 neighbours (diskANN)
**     P 'f' u32:vid    -> (empty) a free slot below `top`
**     P 's' u32:seq    -> u32 vid: the item's slot
**
** `gen` is big-endian (a remote host stamps its lsn over the stand-in the
** engine wrote, as in keys).  BV and BC fill one 4 KB page (a block is one overflow page, read in
** place).  Slots are given from the free ones first (lowest), then at
** `top`.  `count` is the live slots; `gen` the lsn of the last change.
**
** The code cache.  A search in a read transaction reads codes through a
** process-wide cache of code blocks, one per index instance, named by the
** database's secret and P and valid for one `gen`: copies made as blocks
** are first read, dropped whole when the stored gen moves on.  Only read
** transactions fill it (they see committed states alone, each gen's
** one); a write's scope reads the table, and so does a remote database's
** search (another client moves its gen unseen).  Its memory is bounded
** (RG_VX_CACHE bytes in all): past that, blocks are read in place, so an
** index never needs to fit in memory.
*/

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/vgraph.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/vindex.h"

#define VX_VERSION 1
#define VX_BLOCK   4060          /* bytes of a block's value */
#define VX_DEGREE  32
#define VX_HDR_FIXED 32          /* the header before the trained flag */
#define RG_VX_CACHE  ((size_t)512 << 20)

enum { T_HDR = RG_VK_HEADER, T_VEC = RG_VK_VECTORS, T_CODE = RG_VK_CODES,
       T_ADJ = RG_VK_ADJ, T_FREE = RG_VK_FREE, T_SEQ = RG_VK_SLOT };


/*
** {=====================================================================
** An index as one call sees it
** ======================================================================
*/
typedef struct vx {
  rg_env *env;
  rg_txn *txn;
  rg_scope *s;               /* NULL: reading */
  const rg_vembed *emb;
  const rg_vindex *ix;
  uint32_t cid, ixid;
  uint64_t shard;
  uint8_t p[16];             /* the instance's prefix */
  /* the header */
  int found, trained;
  uint32_t count, top, nfree, entry;
  uint64_t gen;
  float *lo;
  rg_sq8 sq;
  /* geometry */
  int dims, type, kind;
  size_t esize, vb, bv, bc;
  /* a work buffer: one vector widened, one code */
  float *wide;
  uint8_t *code;
  /* the code block read last, and the code blocks read since the last put
  ** (pointers valid until one: `epoch` counts the puts) */
  uint32_t cblock;
  const uint8_t *cptr;
  const uint8_t **bptr;
  uint32_t *bepoch, epoch;
  size_t nbptr;
  rg_err *e;
  uint64_t vectors_read, codes_read, nodes_read, nodes_written;
  struct vcache *cache;      /* reads: the code cache, pinned */
} vx;

static size_t key (const vx *x, uint8_t *k, int type, uint32_t n) {
  return rg_key_vector(k, x->cid, x->ixid, x->shard, type, n);
}

static int get (vx *x, const uint8_t *k, size_t kn, rg_val *v) {
  int rc = rg_kv_get(x->txn, RG_DB_VECTOR, k, kn, v);
  if (rc == RG_NOTFOUND) return RG_NOTFOUND;
  if (rc) return rg_kv_fail(x->e, rc, "read a vector index");
  return 0;
}

static int put (vx *x, const uint8_t *k, size_t kn, const void *v, size_t vn) {
  x->cptr = NULL;                    /* pointers read so far may move */
  x->epoch++;
  return rg_put(x->s, RG_DB_VECTOR, k, kn, v, vn, x->e);
}

static int del (vx *x, const uint8_t *k, size_t kn) {
  x->cptr = NULL;
  x->epoch++;
  return rg_del(x->s, RG_DB_VECTOR, k, kn, NULL, x->e);
}

/* The id of an embedding's indexes in their keys. */
static uint32_t index_id (const rg_vembed *m) {
  return (uint32_t)rg_hash(m->text, strlen(m->text));
}

static void cache_unpin (struct vcache *c);

static void vx_free (vx *x) {
  cache_unpin(x->cache);
  x->cache = NULL;
  free(x->bptr);
  free(x->bepoch);
  x->bptr = NULL;
  x->bepoch = NULL;
  free(x->lo);
  free(x->wide);
  free(x->code);
  x->lo = NULL;
  x->wide = NULL;
  x->code = NULL;
}

/* Opens the index of embedding `m` (its index ix) and shard in a txn,
** reading the header (absent: an empty index). */
static int vx_open (vx *x, rg_env *env, rg_txn *txn, rg_scope *s,
                    const rg_cspec *c, const rg_vembed *m, uint64_t shard,
                    rg_err *e) {
  uint8_t k[RG_VECTOR_KEY];
  rg_val v;
  int rc;
  memset(x, 0, sizeof(*x));
  x->env = env;
  x->txn = txn;
  x->s = s;
  x->emb = m;
  x->ix = &c->vix[m->index];
  x->e = e;
  x->dims = m->dims;
  x->type = m->dtype;
  x->kind = x->ix->kind;
  x->esize = rg_vtype_size(m->dtype);
  x->vb = (size_t)m->dims * x->esize;
  x->bv = VX_BLOCK / (12 + x->vb);
  if (x->bv == 0) x->bv = 1;
  x->bc = VX_BLOCK / (4 + (size_t)m->dims);
  if (x->bc == 0) x->bc = 1;
  x->entry = RG_VG_NONE;
  x->cid = c->cid;
  x->ixid = index_id(m);
  x->shard = shard;
  key(x, x->p, 0, 0);
  x->lo = (float *)calloc(rg_sq8_floats((size_t)m->dims), sizeof(float));
  x->wide = (float *)malloc(sizeof(float) * (size_t)m->dims);
  x->code = (uint8_t *)malloc((size_t)m->dims);
  if (x->lo == NULL || x->wide == NULL || x->code == NULL) {
    vx_free(x);
    return rg_fail(e, 500, "out of memory");
  }
  rg_sq8_init(&x->sq, (size_t)m->dims, m->dist, x->lo);
  rc = get(x, k, key(x, k, T_HDR, 0), &v);
  if (rc == RG_NOTFOUND) return 0;
  if (rc) { vx_free(x); return rc; }
  {
    const uint8_t *h = (const uint8_t *)v.p;
    uint16_t dims;
    if (v.n < VX_HDR_FIXED + 1 || h[0] != VX_VERSION) goto corrupt;
    memcpy(&dims, h + 4, 2);
    if (dims != m->dims || h[1] != x->kind || h[2] != m->dtype ||
        h[3] != m->dist)
      goto corrupt;
    memcpy(&x->count, h + 8, 4);
    memcpy(&x->top, h + 12, 4);
    memcpy(&x->nfree, h + 16, 4);
    memcpy(&x->entry, h + 20, 4);
    x->gen = rg_get_u64(h + 24);
    x->trained = h[VX_HDR_FIXED] != 0;
    if (x->trained) {
      if (v.n != VX_HDR_FIXED + 1 + 4 * ((size_t)dims + 1)) goto corrupt;
      memcpy(x->lo, h + VX_HDR_FIXED + 1, 4 * (size_t)dims);
      memcpy(&x->sq.step, h + VX_HDR_FIXED + 1 + 4 * (size_t)dims, 4);
    }
    x->found = 1;
  }
  return 0;
corrupt:
  vx_free(x);
  return rg_fail(e, 500, "corrupt vector index header ('%s')", m->text);
}

/* An index left empty keeps nothing: its free slots and header go. */
static int vx_clear (vx *x) {
  uint8_t k[RG_VECTOR_KEY];
  uint64_t n;
  int rc;
  key(x, k, T_FREE, 0);
  if ((rc = rg_del_prefix(x->s, RG_DB_VECTOR, k, 17, UINT64_MAX, &n, x->e)))
    return rc;
  x->cptr = NULL;
  return del(x, k, key(x, k, T_HDR, 0));
}

static int vx_save (vx *x) {
  uint8_t k[RG_VECTOR_KEY], h[VX_HDR_FIXED + 1 + 4 * (4096 + 1)];
  uint16_t dims = (uint16_t)x->dims, degree = VX_DEGREE;
  size_t n = VX_HDR_FIXED + 1;
  uint64_t lsn = rg_scope_lsn(x->s, NULL, 0, x->e);
  if (lsn == 0) return x->s->failed ? x->s->failed : 500;
  if (x->count == 0) return vx_clear(x);
  x->gen = lsn;
  memset(h, 0, sizeof h);
  h[0] = VX_VERSION;
  h[1] = (uint8_t)x->kind;
  h[2] = (uint8_t)x->type;
  h[3] = (uint8_t)x->emb->dist;
  memcpy(h + 4, &dims, 2);
  memcpy(h + 6, &degree, 2);
  memcpy(h + 8, &x->count, 4);
  memcpy(h + 12, &x->top, 4);
  memcpy(h + 16, &x->nfree, 4);
  memcpy(h + 20, &x->entry, 4);
  rg_put_u64(h + 24, x->gen);   /* big-endian: a host stamps the lsn */
  h[VX_HDR_FIXED] = (uint8_t)x->trained;
  if (x->trained) {
    memcpy(h + n, x->lo, 4 * (size_t)x->dims);
    memcpy(h + n + 4 * (size_t)x->dims, &x->sq.step, 4);
    n += 4 * ((size_t)x->dims + 1);
  }
  return put(x, k, key(x, k, T_HDR, 0), h, n);
}
/* }===================================================================== */


/*
** {=====================================================================
** Vectors of documents, slots and blocks
** ======================================================================
*/
/* The vector of `doc` at the embedding's path in its stored type, into buf
** (vb bytes): 0, or -1 when the document holds none. */
static int doc_vector (const vx *x, const cJSON *doc, uint8_t *buf) {
  const cJSON *a = doc ? rg_path_get(doc, &x->emb->path) : NULL, *el;
  size_t i = 0;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != x->dims) return -1;
  for (el = a->child; el; el = el->next, i++)
    if (!cJSON_IsNumber(el) || rg_vput(x->type, buf, i, el->valuedouble))
      return -1;
  return 0;
}

/* A stored vector as float32 elements (the kernels' and codes' input). */
static const void *widen (vx *x, const uint8_t *vec) {
  int i;
  switch (x->type) {
    case RG_VT_FLOAT32: return vec;
    case RG_VT_FLOAT16:
      rg_vwiden_f16((const uint16_t *)(const void *)vec, x->wide,
                    (size_t)x->dims);
      return x->wide;
    default:
      for (i = 0; i < x->dims; i++) x->wide[i] = (float)rg_vget(x->type, vec, (size_t)i);
      return x->wide;
  }
}

/* The kernel type of the index's elements (float16 is summed as float32). */
static int ktype (const vx *x) {
  return x->type == RG_VT_FLOAT16 ? RG_VT_FLOAT32 : x->type;
}

/* Elements for the kernels: float32 for float types, the bytes for ints. */
static const void *kvec (vx *x, const uint8_t *vec) {
  return x->type == RG_VT_FLOAT16 ? widen(x, vec) : vec;
}

/* A copy of block `b` of `type` (zeroed when absent) into `out` (size). */
static int read_block (vx *x, int type, uint32_t b, uint8_t *out,
                       size_t size) {
  uint8_t k[RG_VECTOR_KEY];
  rg_val v;
  int rc = get(x, k, key(x, k, type, b), &v);
  if (rc == RG_NOTFOUND) { memset(out, 0, size); return 0; }
  if (rc) return rc;
  if (v.n != size)
    return rg_fail(x->e, 500, "corrupt vector index block ('%s')",
                   x->emb->text);
  memcpy(out, v.p, size);
  return 0;
}

static size_t vblock_size (const vx *x) { return x->bv * (12 + x->vb); }
static size_t cblock_size (const vx *x) { return x->bc * (4 + (size_t)x->dims); }

/* Sets slot vid's exact vector (seq 0: empties it). */
static int set_vector (vx *x, uint32_t vid, uint32_t seq, const uint8_t *vec) {
  size_t size = vblock_size(x), i = vid % x->bv;
  uint8_t k[RG_VECTOR_KEY], *blk = (uint8_t *)malloc(size);
  uint32_t b = (uint32_t)(vid / x->bv);
  double norm = 0;
  int rc, any = 0;
  if (blk == NULL) return rg_fail(x->e, 500, "out of memory");
  if ((rc = read_block(x, T_VEC, b, blk, size))) goto done;
  if (seq) norm = rg_vnorm2(ktype(x), kvec(x, vec), (size_t)x->dims);
  memcpy(blk + 4 * i, &seq, 4);
  memcpy(blk + 4 * x->bv + 8 * i, &norm, 8);
  if (seq) memcpy(blk + 12 * x->bv + x->vb * i, vec, x->vb);
  else memset(blk + 12 * x->bv + x->vb * i, 0, x->vb);
  for (i = 0; i < x->bv; i++) {
    uint32_t s;
    memcpy(&s, blk + 4 * i, 4);
    any |= s != 0;
  }
  key(x, k, T_VEC, b);
  rc = any ? put(x, k, RG_VECTOR_KEY, blk, size) : del(x, k, RG_VECTOR_KEY);
done:
  free(blk);
  return rc;
}

/* Sets slot vid's code (seq 0: empties it). */
static int set_code (vx *x, uint32_t vid, uint32_t seq, const uint8_t *code) {
  size_t size = cblock_size(x), i = vid % x->bc;
  uint8_t k[RG_VECTOR_KEY], *blk = (uint8_t *)malloc(size);
  uint32_t b = (uint32_t)(vid / x->bc);
  int rc, any = 0;
  if (blk == NULL) return rg_fail(x->e, 500, "out of memory");
  if ((rc = read_block(x, T_CODE, b, blk, size))) goto done;
  memcpy(blk + 4 * i, &seq, 4);
  if (seq) memcpy(blk + 4 * x->bc + (size_t)x->dims * i, code, (size_t)x->dims);
  else memset(blk + 4 * x->bc + (size_t)x->dims * i, 0, (size_t)x->dims);
  for (i = 0; i < x->bc; i++) {
    uint32_t s;
    memcpy(&s, blk + 4 * i, 4);
    any |= s != 0;
  }
  key(x, k, T_CODE, b);
  rc = any ? put(x, k, RG_VECTOR_KEY, blk, size) : del(x, k, RG_VECTOR_KEY);
done:
  free(blk);
  return rc;
}

/* Slot vid's vector (pointer valid until the next put), seq and norm;
** *vec NULL for an empty slot. */
static int vector_of (vx *x, uint32_t vid, const uint8_t **vec, uint32_t *seq,
                      double *norm) {
  uint8_t k[RG_VECTOR_KEY];
  rg_val v;
  size_t i = vid % x->bv;
  int rc = get(x, k, key(x, k, T_VEC, (uint32_t)(vid / x->bv)), &v);
  *vec = NULL;
  if (rc == RG_NOTFOUND) return 0;
  if (rc) return rc;
  if (v.n != vblock_size(x))
    return rg_fail(x->e, 500, "corrupt vector index block ('%s')",
                   x->emb->text);
  x->vectors_read++;
  memcpy(seq, (const uint8_t *)v.p + 4 * i, 4);
  if (*seq == 0) return 0;
  memcpy(norm, (const uint8_t *)v.p + 4 * x->bv + 8 * i, 8);
  *vec = (const uint8_t *)v.p + 12 * x->bv + x->vb * i;
  return 0;
}

static int slot_of (vx *x, uint32_t seq, uint32_t *vid) {
  uint8_t k[RG_VECTOR_KEY];
  rg_val v;
  int rc = get(x, k, key(x, k, T_SEQ, seq), &v);
  if (rc) return rc;
  if (v.n != 4)
    return rg_fail(x->e, 500, "corrupt vector index slot map");
  memcpy(vid, v.p, 4);
  return 0;
}

/* A free slot: the lowest freed one, else the next at `top`. */
static int alloc_slot (vx *x, uint32_t *vid) {
  rg_cur *cur;
  rg_val kv, v;
  uint8_t k[RG_VECTOR_KEY];
  int rc;
  if (x->nfree == 0) { *vid = x->top++; return 0; }
  if ((rc = rg_cur_open(x->txn, RG_DB_VECTOR, &cur)))
    return rg_kv_fail(x->e, rc, "read a vector index");
  kv.p = k;
  kv.n = key(x, k, T_FREE, 0);
  rc = rg_cur_get(cur, &kv, &v, RG_SEEK);
  if (rc == 0 && (kv.n != RG_VECTOR_KEY || memcmp(kv.p, k, 17) != 0))
    rc = RG_NOTFOUND;
  if (rc == 0) *vid = rg_get_u32((const uint8_t *)kv.p + 17);
  rg_cur_close(cur);
  if (rc == RG_NOTFOUND)
    return rg_fail(x->e, 500, "corrupt vector index: a free slot counted "
                   "and missing ('%s')", x->emb->text);
  if (rc) return rg_kv_fail(x->e, rc, "read a vector index");
  x->nfree--;
  return del(x, k, key(x, k, T_FREE, *vid));
}
/* }===================================================================== */


/*
** {=====================================================================
** The code cache
** ======================================================================
*/
typedef struct vcache {
  uint8_t id[32];            /* the database's secret | P */
  uint64_t gen;
  size_t nblocks, bsize;
  uint8_t **blocks;          /* NULL: not read yet; EMPTY: no block */
  int refs, stale;
  struct vcache *next;
} vcache;

static uint8_t empty_block;
#define EMPTY (&empty_block)
static vcache *caches;
static size_t cache_bytes;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static void cache_drop (vcache *c) {
  size_t i;
  for (i = 0; i < c->nblocks; i++)
    if (c->blocks[i] && c->blocks[i] != EMPTY) {
      free(c->blocks[i]);
      cache_bytes -= c->bsize;
    }
  free(c->blocks);
  free(c);
}

/* The cache of x's instance at its gen, pinned (NULL: none to be had). */
static vcache *cache_pin (vx *x) {
  vcache *c, **pp;
  uint8_t id[32];
  size_t nblocks = x->top / x->bc + 1;
  memcpy(id, rg_env_secret(x->env), 16);
  memcpy(id + 16, x->p, 16);
  pthread_mutex_lock(&cache_mu);
  for (pp = &caches; (c = *pp) != NULL; pp = &c->next)
    if (!c->stale && memcmp(c->id, id, 32) == 0) break;
  if (c && (c->gen != x->gen || c->nblocks < nblocks)) {   /* moved on */
    c->stale = 1;
    *pp = c->next;
    if (c->refs == 0) cache_drop(c);
    c = NULL;
  }
  if (c == NULL && (c = (vcache *)calloc(1, sizeof(vcache))) != NULL) {
    memcpy(c->id, id, 32);
    c->gen = x->gen;
    c->nblocks = nblocks;
    c->bsize = cblock_size(x);
    if ((c->blocks = (uint8_t **)calloc(nblocks, sizeof(uint8_t *))) == NULL) {
      free(c);
      c = NULL;
    } else {
      c->next = caches;
      caches = c;
    }
  }
  if (c) c->refs++;
  pthread_mutex_unlock(&cache_mu);
  return c;
}

/* The caches go with the module (an unloaded module leaves no block). */
#if defined(__GNUC__)
__attribute__((destructor))
#endif
static void cache_free_all (void) {
  vcache *c, *next;
  pthread_mutex_lock(&cache_mu);
  for (c = caches; c; c = next) {
    next = c->next;
    if (c->refs == 0) cache_drop(c);
  }
  caches = NULL;
  pthread_mutex_unlock(&cache_mu);
}

static void cache_unpin (vcache *c) {
  if (c == NULL) return;
  pthread_mutex_lock(&cache_mu);
  if (--c->refs == 0 && c->stale) cache_drop(c);
  pthread_mutex_unlock(&cache_mu);
}

/* Block b of the cache: its copy (read and kept on first use), EMPTY, or
** NULL when it cannot be kept (the caller reads the table). */
static const uint8_t *cache_block (vx *x, uint32_t b) {
  vcache *c = x->cache;
  uint8_t *p;
  uint8_t k[RG_VECTOR_KEY];
  rg_val v;
  if (b >= c->nblocks) return EMPTY;
  p = __atomic_load_n(&c->blocks[b], __ATOMIC_ACQUIRE);
  if (p) return p;
  if (get(x, k, key(x, k, T_CODE, b), &v) != 0) p = EMPTY;
  else if (v.n != c->bsize) return NULL;
  else {
    pthread_mutex_lock(&cache_mu);
    if (cache_bytes + c->bsize <= RG_VX_CACHE &&
        (p = (uint8_t *)malloc(c->bsize)) != NULL) {
      memcpy(p, v.p, c->bsize);
      cache_bytes += c->bsize;
    }
    pthread_mutex_unlock(&cache_mu);
    if (p == NULL) return NULL;
  }
  {
    uint8_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&c->blocks[b], &expect, p, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      if (p != EMPTY) {              /* another reader kept it first */
        pthread_mutex_lock(&cache_mu);
        cache_bytes -= c->bsize;
        pthread_mutex_unlock(&cache_mu);
        free(p);
      }
      p = expect;
    }
  }
  return p;
}
/* }===================================================================== */


/*
** {=====================================================================
** The graph's storage
** ======================================================================
*/
static int g_get_adj (void *ud, uint32_t v, uint32_t *out, int *n) {
  vx *x = (vx *)ud;
  uint8_t k[RG_VECTOR_KEY];
  rg_val val;
  int rc = get(x, k, key(x, k, T_ADJ, v), &val);
  *n = 0;
  if (rc == RG_NOTFOUND) return 0;
  if (rc) return rc;
  x->nodes_read++;
  {
    const uint8_t *p = (const uint8_t *)val.p;
    if (val.n < 1 || val.n != 1 + 4 * (size_t)p[0] ||
        p[0] > RG_VG_MAX_DEGREE)
      return rg_fail(x->e, 500, "corrupt vector index graph ('%s')",
                     x->emb->text);
    *n = p[0];
    memcpy(out, p + 1, 4 * (size_t)*n);
  }
  return 0;
}

static int g_put_adj (void *ud, uint32_t v, const uint32_t *adj, int n) {
  vx *x = (vx *)ud;
  uint8_t k[RG_VECTOR_KEY], val[1 + 4 * RG_VG_MAX_DEGREE];
  x->nodes_written++;
  val[0] = (uint8_t)n;
  if (n) memcpy(val + 1, adj, 4 * (size_t)n);
  return put(x, k, key(x, k, T_ADJ, v), val, 1 + 4 * (size_t)n);
}

static int g_get_code (void *ud, uint32_t v, const uint8_t **code) {
  vx *x = (vx *)ud;
  uint32_t b = (uint32_t)(v / x->bc), seq;
  size_t i = v % x->bc;
  *code = NULL;
  if (x->cache && (x->cptr == NULL || x->cblock != b)) {
    const uint8_t *p = cache_block(x, b);
    if (p == EMPTY) return 0;
    if (p) { x->cptr = p; x->cblock = b; }
  }
  if ((x->cptr == NULL || x->cblock != b) && b < x->nbptr &&
      x->bepoch[b] == x->epoch + 1) {
    x->cptr = x->bptr[b];            /* read since the last put */
    x->cblock = b;
  }
  if (x->cptr == NULL || x->cblock != b) {
    uint8_t k[RG_VECTOR_KEY];
    rg_val val;
    int rc = get(x, k, key(x, k, T_CODE, b), &val);
    if (rc == RG_NOTFOUND) return 0;
    if (rc) return rc;
    if (val.n != cblock_size(x))
      return rg_fail(x->e, 500, "corrupt vector index block ('%s')",
                     x->emb->text);
    x->cptr = (const uint8_t *)val.p;
    x->cblock = b;
    if (b >= x->nbptr) {             /* room for every block there is */
      size_t n = (size_t)x->top / x->bc + 1, i;
      const uint8_t **np;
      uint32_t *ne;
      if (n <= b) n = (size_t)b + 1;
      np = (const uint8_t **)realloc(x->bptr, n * sizeof(*np));
      if (np) x->bptr = np;
      ne = np ? (uint32_t *)realloc(x->bepoch, n * sizeof(*ne)) : NULL;
      if (ne) {
        x->bepoch = ne;
        for (i = x->nbptr; i < n; i++) ne[i] = 0;
        x->nbptr = n;
      }
    }
    if (b < x->nbptr) {
      x->bptr[b] = x->cptr;
      x->bepoch[b] = x->epoch + 1;
    }
  }
  x->codes_read++;
  memcpy(&seq, x->cptr + 4 * i, 4);
  if (seq) *code = x->cptr + 4 * x->bc + (size_t)x->dims * i;
  return 0;
}

static int g_any (void *ud, uint32_t v, uint32_t *out) {
  vx *x = (vx *)ud;
  rg_cur *cur;
  rg_val kv, val;
  uint8_t k[RG_VECTOR_KEY];
  int rc;
  *out = RG_VG_NONE;
  if ((rc = rg_cur_open(x->txn, RG_DB_VECTOR, &cur)))
    return rg_kv_fail(x->e, rc, "read a vector index");
  kv.p = k;
  kv.n = key(x, k, T_SEQ, 0);
  for (rc = rg_cur_get(cur, &kv, &val, RG_SEEK); rc == 0;
       rc = rg_cur_get(cur, &kv, &val, RG_NEXT)) {
    uint32_t w;
    if (kv.n != RG_VECTOR_KEY || memcmp(kv.p, k, 17) != 0) break;
    if (val.n != 4) continue;
    memcpy(&w, val.p, 4);
    if (w != v) { *out = w; break; }
  }
  rg_cur_close(cur);
  return rc == 0 || rc == RG_NOTFOUND ? 0
                                       : rg_kv_fail(x->e, rc, "read a vector index");
}

static void graph_of (vx *x, rg_vgraph *g) {
  rg_vgio io;
  io.ud = x;
  io.get_adj = g_get_adj;
  io.put_adj = g_put_adj;
  io.get_code = g_get_code;
  io.any = g_any;
  rg_vgraph_init(g, &io, &x->sq, VX_DEGREE, x->ix->search_list);
  g->entry = x->entry;
}
/* }===================================================================== */


/*
** {=====================================================================
** Upkeep
** ======================================================================
*/
/* Codes for every stored vector, and (diskANN) the graph over them: what
** the index does when it reaches RG_VX_TRAIN vectors. */
static int train (vx *x) {
  rg_cur *cur;
  rg_val kv, v;
  uint8_t k[RG_VECTOR_KEY];
  float *sample = NULL;
  uint32_t *vids = NULL, *seqs = NULL;
  size_t n = 0, cap = (size_t)x->count + 1, i;
  int rc;
  sample = (float *)malloc(cap * sizeof(float) * (size_t)x->dims);
  vids = (uint32_t *)malloc(cap * sizeof(uint32_t));
  seqs = (uint32_t *)malloc(cap * sizeof(uint32_t));
  if (!sample || !vids || !seqs) { rc = rg_fail(x->e, 500, "out of memory"); goto done; }
  if ((rc = rg_cur_open(x->txn, RG_DB_VECTOR, &cur))) {
    rc = rg_kv_fail(x->e, rc, "read a vector index");
    goto done;
  }
  kv.p = k;
  kv.n = key(x, k, T_VEC, 0);
  for (rc = rg_cur_get(cur, &kv, &v, RG_SEEK); rc == 0;
       rc = rg_cur_get(cur, &kv, &v, RG_NEXT)) {
    const uint8_t *blk = (const uint8_t *)v.p;
    uint32_t b;
    if (kv.n != RG_VECTOR_KEY || memcmp(kv.p, k, 17) != 0) break;
    if (v.n != vblock_size(x)) { rc = -1; break; }
    b = rg_get_u32((const uint8_t *)kv.p + 17);
    for (i = 0; i < x->bv && n < cap; i++) {
      uint32_t seq;
      memcpy(&seq, blk + 4 * i, 4);
      if (seq == 0) continue;
      memcpy(sample + n * (size_t)x->dims,
             widen(x, blk + 12 * x->bv + x->vb * i), 4 * (size_t)x->dims);
      vids[n] = (uint32_t)(b * x->bv + i);
      seqs[n] = seq;
      n++;
    }
  }
  rg_cur_close(cur);
  if (rc == -1) { rc = rg_fail(x->e, 500, "corrupt vector index block"); goto done; }
  if (rc != RG_NOTFOUND && rc != 0) { rc = rg_kv_fail(x->e, rc, "read a vector index"); goto done; }
  if ((rc = rg_sq8_train(&x->sq, sample, n)) != 0) {
    rc = rg_fail(x->e, 500, "out of memory");
    goto done;
  }
  x->trained = 1;
  for (i = 0; i < n; i++) {
    if (rg_sq8_encode(&x->sq, sample + i * (size_t)x->dims, x->code)) {
      rc = rg_fail(x->e, 500, "out of memory");
      goto done;
    }
    if ((rc = set_code(x, vids[i], seqs[i], x->code))) goto done;
  }
  if (x->kind == RG_VIX_DISKANN) {
    rg_vgraph g;
    graph_of(x, &g);
    g.entry = RG_VG_NONE;
    for (i = 0; i < n; i++)
      if ((rc = rg_vgraph_insert(&g, vids[i]))) goto done;
    x->entry = g.entry;
  }
  rc = 0;
done:
  free(sample);
  free(vids);
  free(seqs);
  return rc;
}

static int add_item (vx *x, uint32_t seq, const uint8_t *vec) {
  uint8_t k[RG_VECTOR_KEY], vb[4];
  uint32_t vid = 0;
  int rc;
  if ((rc = alloc_slot(x, &vid)) || (rc = set_vector(x, vid, seq, vec)))
    return rc;
  memcpy(vb, &vid, 4);
  if ((rc = put(x, k, key(x, k, T_SEQ, seq), vb, 4))) return rc;
  x->count++;
  if (x->kind == RG_VIX_FLAT) return 0;
  if (!x->trained)
    return x->count >= RG_VX_TRAIN ? train(x) : 0;
  if (rg_sq8_encode(&x->sq, (const float *)widen(x, vec), x->code))
    return rg_fail(x->e, 500, "out of memory");
  if ((rc = set_code(x, vid, seq, x->code))) return rc;
  if (x->kind == RG_VIX_DISKANN) {
    rg_vgraph g;
    graph_of(x, &g);
    if ((rc = rg_vgraph_insert(&g, vid))) return rc;
    x->entry = g.entry;
  }
  return 0;
}

static int remove_item (vx *x, uint32_t seq) {
  uint8_t k[RG_VECTOR_KEY];
  uint32_t vid;
  int rc = slot_of(x, seq, &vid);
  if (rc == RG_NOTFOUND) return 0;  /* it had no vector here */
  if (rc) return rc;
  if (x->kind == RG_VIX_DISKANN && x->trained) {
    rg_vgraph g;
    graph_of(x, &g);
    if ((rc = rg_vgraph_delete(&g, vid))) return rc;
    x->entry = g.entry;
    if ((rc = del(x, k, key(x, k, T_ADJ, vid)))) return rc;
  }
  if (x->trained && (rc = set_code(x, vid, 0, NULL))) return rc;
  if ((rc = set_vector(x, vid, 0, NULL)) ||
      (rc = del(x, k, key(x, k, T_SEQ, seq))))
    return rc;
  x->count--;
  if (vid + 1 == x->top) x->top--;   /* the last slot: no free entry */
  else {
    if ((rc = put(x, k, key(x, k, T_FREE, vid), "", 0))) return rc;
    x->nfree++;
  }
  return 0;
}

/* The shard of a document (0 without a shard key): the hash of the
** terms (layout.c's encoding) of its values at the shard key's paths,
** 0x01 for one that is no scalar; the planner hashes a query's values the
** same way (rg_vindex_shard_hash). */
static uint64_t shard_hash (const rg_vindex *ix, const cJSON *doc) {
  rg_buf b;
  uint64_t h;
  int i;
  if (ix->nshard == 0) return 0;
  rg_buf_init(&b);
  for (i = 0; i < ix->nshard; i++) {
    const cJSON *v = rg_path_get(doc, &ix->shard[i]);
    if (v == NULL || cJSON_IsArray(v) || cJSON_IsObject(v)) rg_buf_addc(&b, 1);
    else rg_term(&b, v, 0);
  }
  h = rg_vindex_shard_hash(b.p, b.n);
  rg_buf_free(&b);
  return h;
}

/* The instance of a document: its shard, and where partitions are kept
** apart (a remote database) its physical partition (RG_VSHARD_AT), so
** that an instance lives beside its items and a write's changes to it
** apply with theirs. */
static uint64_t shard_of (rg_env *env, const rg_cspec *c,
                          const rg_vindex *ix, const cJSON *doc) {
  uint64_t h = shard_hash(ix, doc);
  if (rg_env_remote(env) != NULL) {
    const cJSON *pkv[RG_MAX_PK_PATHS];
    rg_ikey k;
    rg_err e;
    rg_doc_pk(c, doc, pkv);
    /* a stored item's key is valid (else it would not be stored) */
    if (rg_ikey_partition(c, pkv, &k, &e) == 0)
      h = RG_VSHARD_AT(h, k.range);
  }
  return h;
}

uint64_t rg_vindex_shard_hash (const void *terms, size_t n) {
  uint64_t h = rg_hash(terms ? terms : "", n);
  return h ? h : 1;
}

/* One index: the item's old slot out, its new one in (an unchanged
** vector in the same shard stays as it is). */
static int update_one (rg_scope *s, const rg_cspec *c, const rg_vembed *m,
                       uint32_t seq, const cJSON *old, const cJSON *neu,
                       rg_err *e) {
  const rg_vindex *ix = &c->vix[m->index];
  uint64_t so = old ? shard_of(s->env, c, ix, old) : 0;
  uint64_t sn = neu ? shard_of(s->env, c, ix, neu) : 0;
  vx a;
  uint8_t *vo = NULL, *vn = NULL;
  int rc = 0, ho, hn;
  size_t vb = (size_t)m->dims * rg_vtype_size(m->dtype);
  vo = (uint8_t *)malloc(vb);
  vn = (uint8_t *)malloc(vb);
  if (!vo || !vn) { free(vo); free(vn); return rg_fail(e, 500, "out of memory"); }
  memset(&a, 0, sizeof(a));
  a.emb = m;
  a.dims = m->dims;
  a.type = m->dtype;
  ho = old && doc_vector(&a, old, vo) == 0;
  hn = neu && doc_vector(&a, neu, vn) == 0;
  if (ho && hn && so == sn && memcmp(vo, vn, vb) == 0) goto done;
  if (ho) {
    if ((rc = vx_open(&a, s->env, s->txn, s, c, m, so, e))) goto done;
    if ((rc = remove_item(&a, seq)) == 0) rc = vx_save(&a);
    s->work.vector_written += vb;
    s->work.nodes_written += a.nodes_written;
    vx_free(&a);
    if (rc) goto done;
  }
  if (hn) {
    if ((rc = vx_open(&a, s->env, s->txn, s, c, m, sn, e))) goto done;
    if ((rc = add_item(&a, seq, vn)) == 0) rc = vx_save(&a);
    s->work.vector_written += vb;
    s->work.nodes_written += a.nodes_written;
    vx_free(&a);
  }
done:
  free(vo);
  free(vn);
  return rc;
}

int rg_vindex_update (rg_scope *s, const rg_cspec *c, uint32_t seq,
                      const cJSON *old, const cJSON *neu, rg_err *e) {
  int i, rc;
  for (i = 0; i < c->nvix; i++)
    if ((rc = update_one(s, c, &c->vemb[c->vix[i].embed], seq, old, neu, e)))
      return rc;
  return 0;
}

int rg_vindex_reindex (rg_scope *s, const rg_cspec *from, const rg_cspec *to,
                       uint32_t seq, const cJSON *doc, rg_err *e) {
  int i, rc;
  for (i = 0; i < from->nvix; i++) {   /* indexes that went */
    const rg_vembed *m = &from->vemb[from->vix[i].embed];
    const rg_vembed *n = rg_vpolicy_find(to, m->path.seg, m->path.n);
    if (n && n->index >= 0) continue;
    if ((rc = update_one(s, from, m, seq, doc, NULL, e))) return rc;
  }
  for (i = 0; i < to->nvix; i++) {     /* indexes that came */
    const rg_vembed *m = &to->vemb[to->vix[i].embed];
    const rg_vembed *o = rg_vpolicy_find(from, m->path.seg, m->path.n);
    if (o && o->index >= 0) continue;
    if ((rc = update_one(s, to, m, seq, NULL, doc, e))) return rc;
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Search
** ======================================================================
*/
/* A cursor over the records of one type of an index instance. */
typedef struct vcur {
  rg_cur *c;
  uint8_t k[RG_VECTOR_KEY];
  int started;
} vcur;

/* The next record of `type` under x's prefix: 0 (*vid, *val), 1 when
** there are no more, or a status. */
static int vcur_next (vx *x, vcur *c, int type, uint32_t *n, rg_val *val) {
  rg_val kv;
  int rc;
  if (c->c == NULL) {
    if ((rc = rg_cur_open(x->txn, RG_DB_VECTOR, &c->c)))
      return rg_kv_fail(x->e, rc, "read a vector index");
    key(x, c->k, type, 0);
    kv.p = c->k;
    kv.n = RG_VECTOR_KEY;
    rc = rg_cur_get(c->c, &kv, val, RG_SEEK);
  } else rc = rg_cur_get(c->c, &kv, val, RG_NEXT);
  if (rc == RG_NOTFOUND) return 1;
  if (rc) return rg_kv_fail(x->e, rc, "read a vector index");
  if (kv.n != RG_VECTOR_KEY || memcmp(kv.p, c->k, 17) != 0) return 1;
  *n = rg_get_u32((const uint8_t *)kv.p + 17);
  return 0;
}

static void vcur_close (vcur *c) {
  if (c->c) rg_cur_close(c->c);
  c->c = NULL;
}

/* The key a best-k list sorts by: lower is better, for every similarity. */
static float rank_key (int dist, double score) {
  return (float)(rg_vdist_higher(dist) ? -score : score);
}

/* What a widening search (rg_vsearch.widen) keeps of one shard: its graph
** search, and the candidates ranked on their exact vectors, so that
** going on reads only what is new. */
struct vwiden {
  uint64_t shard;
  rg_vgsearch gs;
  size_t list;               /* the first search's list */
  rg_vcand *sc;              /* each ranked: (rank key, seq); HUGE_VALF
                                when its slot was empty or refused */
  uint32_t *vid;             /* the slots ranked, sorted */
  size_t n, cap;
};

typedef struct sstate {
  vx *x;
  rg_vsearch *q;
  double qnorm;
  const void *qk;            /* the query for the kernels */
  struct vwiden *w;          /* a widening search's (NULL: none) */
} sstate;

/* The exact score of slot vid for the query: 0 (*ok set when the slot
** is live and accepted), or a status. */
static int exact (sstate *st, uint32_t vid, double *score, uint32_t *seq,
                  int *ok) {
  vx *x = st->x;
  const uint8_t *vec;
  double norm;
  rg_vsums sums;
  int rc = vector_of(x, vid, &vec, seq, &norm);
  *ok = 0;
  if (rc || vec == NULL) return rc;
  if (st->q->accept && !st->q->accept(st->q->aud, *seq)) return 0;
  rg_vsums_of(x->emb->dist, ktype(x), st->qk, kvec(x, vec), (size_t)x->dims,
              st->qnorm, norm, &sums);
  *ok = rg_vscore(x->emb->dist, &sums, score) == 0;
  return 0;
}

/* Every exact vector of the index: the best k, by slot. */
static int scan_exact (sstate *st, rg_vbest *best) {
  vx *x = st->x;
  vcur c;
  rg_val v;
  uint32_t b;
  size_t seen = 0;
  int rc;
  memset(&c, 0, sizeof(c));
  while ((rc = vcur_next(x, &c, T_VEC, &b, &v)) == 0) {
    const uint8_t *blk = (const uint8_t *)v.p;
    size_t i;
    if (v.n != vblock_size(x)) {
      rc = rg_fail(x->e, 500, "corrupt vector index block ('%s')",
                   x->emb->text);
      break;
    }
    for (i = 0; i < x->bv; i++) {
      uint32_t seq;
      double norm, score;
      rg_vsums sums;
      memcpy(&seq, blk + 4 * i, 4);
      if (seq == 0) continue;
      x->vectors_read++;
      if (st->q->accept && !st->q->accept(st->q->aud, seq)) continue;
      memcpy(&norm, blk + 4 * x->bv + 8 * i, 8);
      rg_vsums_of(x->emb->dist, ktype(x), st->qk,
                  kvec(x, blk + 12 * x->bv + x->vb * i), (size_t)x->dims,
                  st->qnorm, norm, &sums);
      if (rg_vscore(x->emb->dist, &sums, &score)) continue;
      seen++;
      rg_vbest_offer(best, rank_key(x->emb->dist, score),
                     (uint32_t)(b * x->bv + i));
    }
  }
  vcur_close(&c);
  if (rc != 1) return rc;
  st->q->more = seen > best->n;
  return 0;
}

static int vid_cmp (const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Room in w for `need` ranked slots: 0, or -1 out of memory. */
static int widen_room (struct vwiden *w, size_t need) {
  size_t cap = 2 * need;
  rg_vcand *sc;
  uint32_t *vid;
  if (w->cap >= need) return 0;
  if ((sc = (rg_vcand *)realloc(w->sc, cap * sizeof(rg_vcand))) == NULL)
    return -1;
  w->sc = sc;
  if ((vid = (uint32_t *)realloc(w->vid, cap * sizeof(uint32_t))) == NULL)
    return -1;
  w->vid = vid;
  w->cap = cap;
  return 0;
}

/* Candidates (slots, by approximate key) ranked on the exact vectors,
** appended to the search's hits.  A widening search ranks only the slots
** it has not ranked before, and gives the best of all it ranked. */
static int rerank (sstate *st, const rg_vcand *cand, size_t n) {
  rg_vsearch *q = st->q;
  struct vwiden *w = st->w;
  rg_vcand *mem = (rg_vcand *)malloc((q->k + 1) * sizeof(rg_vcand));
  rg_vbest best;
  size_t i, old = w ? w->n : 0;
  int rc = 0;
  if (mem == NULL || (w && widen_room(w, w->n + n))) {
    free(mem);
    return rg_fail(st->x->e, 500, "out of memory");
  }
  rg_vbest_init(&best, mem, q->k);
  for (i = 0; i < n; i++) {
    double score;
    uint32_t seq;
    int ok;
    if (w && bsearch(&cand[i].id, w->vid, old, sizeof(uint32_t), vid_cmp))
      continue;                      /* ranked before: in w->sc */
    if ((rc = exact(st, cand[i].id, &score, &seq, &ok))) break;
    if (w) {
      w->vid[w->n] = cand[i].id;
      w->sc[w->n].key = ok ? rank_key(st->x->emb->dist, score) : HUGE_VALF;
      w->sc[w->n++].id = seq;
    }
    else if (ok) rg_vbest_offer(&best, rank_key(st->x->emb->dist, score), seq);
  }
  if (w) {
    for (i = 0; i < w->n; i++)
      if (w->sc[i].key != HUGE_VALF)
        rg_vbest_offer(&best, w->sc[i].key, w->sc[i].id);
    qsort(w->vid, w->n, sizeof(uint32_t), vid_cmp);
  }
  rg_vbest_sort(&best);
  for (i = 0; rc == 0 && i < best.n; i++) {
    double sc = best.c[i].key;
    q->hit[q->nhit].seq = best.c[i].id;
    q->hit[q->nhit].shard = st->x->shard;
    q->hit[q->nhit].score = rg_vdist_higher(st->x->emb->dist) ? -sc : sc;
    q->nhit++;
  }
  free(mem);
  return rc;
}

static int accept_code (void *ud, uint32_t vid) {
  sstate *st = (sstate *)ud;
  const uint8_t *code;
  uint32_t seq;
  vx *x = st->x;
  if (g_get_code(x, vid, &code) || code == NULL) return 0;
  memcpy(&seq, x->cptr + 4 * (vid % x->bc), 4);
  return st->q->accept(st->q->aud, seq);
}

/* The query as the codes see it: float32 elements (unit length for
** cosine, whose codes are of unit vectors), into buf. */
static const float *code_query (vx *x, const void *query, float *buf) {
  const float *qf = (const float *)query;
  size_t i, n = (size_t)x->dims;
  if (x->type == RG_VT_INT8 || x->type == RG_VT_UINT8) {
    for (i = 0; i < n; i++) buf[i] = (float)rg_vget(x->type, query, i);
    qf = buf;
  }
  if (x->emb->dist == RG_VD_COSINE) {
    float s = rg_vdot_f32(qf, qf, n);
    s = s > 0 ? 1.0f / sqrtf(s) : 1.0f;
    for (i = 0; i < n; i++) buf[i] = qf[i] * s;
    qf = buf;
  }
  return qf;
}

/* quantizedFlat: every code scanned, k * multiplier re-ranked. */
static int search_codes (sstate *st, const rg_sq8q *qq) {
  vx *x = st->x;
  rg_vsearch *q = st->q;
  size_t want = q->k * (size_t)(q->quant_mult ? q->quant_mult : 5), seen = 0;
  rg_vcand *cand = (rg_vcand *)malloc((want + 1) * sizeof(rg_vcand));
  rg_vbest best;
  vcur c;
  rg_val v;
  uint32_t b;
  int rc = 0;
  if (cand == NULL) return rg_fail(x->e, 500, "out of memory");
  rg_vbest_init(&best, cand, want);
  memset(&c, 0, sizeof(c));
  b = 0;
  for (;;) {
    const uint8_t *blk;
    size_t j;
    if (x->cache) {                  /* the cached blocks, in order */
      if (b > x->top / x->bc) { rc = 1; break; }
      blk = cache_block(x, b);
      if (blk == EMPTY) { b++; continue; }
      if (blk == NULL) {
        uint8_t k[RG_VECTOR_KEY];
        if ((rc = get(x, k, key(x, k, T_CODE, b), &v)) != 0) {
          if (rc != RG_NOTFOUND) break;
          b++;
          continue;
        }
        blk = (const uint8_t *)v.p;
      }
    } else {
      if ((rc = vcur_next(x, &c, T_CODE, &b, &v)) != 0) break;
      if (v.n != cblock_size(x)) {
        rc = rg_fail(x->e, 500, "corrupt vector index block ('%s')",
                     x->emb->text);
        break;
      }
      blk = (const uint8_t *)v.p;
    }
    for (j = 0; j < x->bc; j++) {
      uint32_t seq;
      memcpy(&seq, blk + 4 * j, 4);
      if (seq == 0) continue;
      x->codes_read++;
      if (q->accept && !q->accept(q->aud, seq)) continue;
      seen++;
      rg_vbest_offer(&best, rg_sq8_approx(qq, blk + 4 * x->bc +
                                          (size_t)x->dims * j),
                     (uint32_t)(b * x->bc + j));
    }
    if (x->cache) b++;
  }
  vcur_close(&c);
  if (rc == 1) {
    rg_vbest_sort(&best);
    q->more = seen > q->k;
    rc = rerank(st, best.c, best.n);
  }
  free(cand);
  return rc;
}

/* diskANN: the graph searched with a list of k * multiplier; with a
** filter, for the best 2k accepted (the search widens past its list until
** it has them: search_c measures 2k to hold the exact best k).  A
** widening search goes on from where it stopped, its list growing as
** 2k once past the first's (the nearest nodes are settled already). */
static int search_graph (sstate *st, const rg_sq8q *qq) {
  vx *x = st->x;
  rg_vsearch *q = st->q;
  size_t list = q->k * (size_t)(q->search_mult ? q->search_mult : 10), n = 0;
  size_t want;
  rg_vcand *cand;
  rg_vgraph g;
  int rc;
  if (list < 10) list = 10;
  if (st->w && st->w->list) {        /* going on */
    list = st->w->list > 2 * q->k ? st->w->list : 2 * q->k;
  }
  else if (st->w) st->w->list = list;
  want = q->accept && 2 * q->k < list ? 2 * q->k : list;
  if ((cand = (rg_vcand *)malloc((list + 1) * sizeof(rg_vcand))) == NULL)
    return rg_fail(x->e, 500, "out of memory");
  graph_of(x, &g);
  if (st->w)
    rc = rg_vgraph_search_more(&g, &st->w->gs, qq, list, want,
                               q->accept ? accept_code : NULL, st, cand, &n);
  else
    rc = rg_vgraph_search(&g, qq, list, want, q->accept ? accept_code : NULL,
                          st, cand, &n);
  if (rc == 0) {
    q->more = n >= q->k;
    rc = rerank(st, cand, n);
  }
  free(cand);
  return rc;
}

/* What a widening search keeps of `shard` (made empty the first time):
** NULL out of memory. */
static struct vwiden *kept_of (rg_vsearch *q, uint64_t shard) {
  struct vwiden *w;
  size_t i;
  for (i = 0; i < q->nkept; i++)
    if (q->kept[i].shard == shard) return &q->kept[i];
  w = (struct vwiden *)realloc(q->kept, (q->nkept + 1) * sizeof(*w));
  if (w == NULL) return NULL;
  q->kept = w;
  w = &q->kept[q->nkept++];
  memset(w, 0, sizeof(*w));
  w->shard = shard;
  return w;
}

/* One index instance (one shard): its best k appended to q->hit. */
static int search_one (vx *x, rg_vsearch *q) {
  sstate st;
  int16_t *w;
  float *buf;
  rg_sq8q qq;
  int rc;
  st.x = x;
  st.q = q;
  st.qk = q->query;
  st.qnorm = rg_vnorm2(ktype(x), q->query, (size_t)x->dims);
  st.w = NULL;
  if (q->widen && !q->brute && x->kind == RG_VIX_DISKANN && x->trained &&
      (st.w = kept_of(q, x->shard)) == NULL)
    return rg_fail(x->e, 500, "out of memory");
  if (q->brute || x->kind == RG_VIX_FLAT || !x->trained) {
    rg_vcand *cand = (rg_vcand *)malloc((q->k + 1) * sizeof(rg_vcand));
    rg_vbest best;
    if (cand == NULL) return rg_fail(x->e, 500, "out of memory");
    rg_vbest_init(&best, cand, q->k);
    if ((rc = scan_exact(&st, &best)) == 0) {
      rg_vbest_sort(&best);
      rc = rerank(&st, best.c, best.n);
    }
    free(cand);
    return rc;
  }
  w = (int16_t *)malloc(sizeof(int16_t) * (size_t)x->dims);
  buf = (float *)malloc(sizeof(float) * (size_t)x->dims);
  if (w == NULL || buf == NULL) {
    free(w);
    free(buf);
    return rg_fail(x->e, 500, "out of memory");
  }
  rg_sq8_query(&x->sq, code_query(x, q->query, buf), w, &qq);
  rc = x->kind == RG_VIX_QFLAT ? search_codes(&st, &qq)
                               : search_graph(&st, &qq);
  free(w);
  free(buf);
  return rc;
}

static int hit_cmp_higher (const void *a, const void *b) {
  const rg_vhit *x = (const rg_vhit *)a, *y = (const rg_vhit *)b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int hit_cmp_lower (const void *a, const void *b) {
  const rg_vhit *x = (const rg_vhit *)a, *y = (const rg_vhit *)b;
  if (x->score != y->score) return x->score < y->score ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The next shard of an index at or after `from`: 0 (*shard), 1 when none. */
static int next_shard (rg_txn *txn, uint32_t cid, uint32_t ixid,
                       uint64_t from, uint64_t *shard, rg_err *e) {
  rg_cur *cur;
  rg_val kv, v;
  uint8_t k[RG_VECTOR_KEY];
  int rc;
  if ((rc = rg_cur_open(txn, RG_DB_VECTOR, &cur)))
    return rg_kv_fail(e, rc, "read a vector index");
  kv.p = k;
  kv.n = rg_key_vector(k, cid, ixid, from, 0, 0);
  rc = rg_cur_get(cur, &kv, &v, RG_SEEK);
  if (rc == 0 && (kv.n < 17 || memcmp(kv.p, k, 8) != 0))
    rc = RG_NOTFOUND;
  if (rc == 0) *shard = rg_get_u64((const uint8_t *)kv.p + 8);
  rg_cur_close(cur);
  if (rc == RG_NOTFOUND) return 1;
  return rc ? rg_kv_fail(e, rc, "read a vector index") : 0;
}

/* Searches the instance of shard `shard` (none there: nothing), its hits
** added to q's. */
static int search_shard (rg_txn *txn, rg_env *env, rg_vsearch *q,
                         const rg_vembed *m, uint64_t shard, size_t *cap,
                         int remote, rg_err *e) {
  vx x;
  int rc;
  if (*cap < q->nhit + q->k) {
    size_t nc = (q->nhit + q->k) * 2;
    rg_vhit *nh = (rg_vhit *)realloc(q->hit, nc * sizeof(rg_vhit));
    if (nh == NULL) return rg_fail(e, 500, "out of memory");
    q->hit = nh;
    *cap = nc;
  }
  if ((rc = vx_open(&x, env, txn, NULL, q->spec, m, shard, e))) return rc;
  if (x.found && x.trained && !q->brute && q->in_scope == 0 && !remote)
    x.cache = cache_pin(&x);
  rc = x.found ? search_one(&x, q) : 0;
  q->vectors_read += x.vectors_read;
  q->codes_read += x.codes_read;
  q->nodes_read += x.nodes_read;
  vx_free(&x);
  return rc;
}

int rg_vindex_search (rg_txn *txn, rg_env *env, rg_vsearch *q, rg_err *e) {
  const rg_vembed *m = &q->spec->vemb[q->embed];
  uint64_t shard = 0;
  size_t cap = 0;
  int rc, remote = rg_env_remote(env) != NULL;
  q->nhit = 0;
  q->more = 0;
  q->hit = NULL;
  if (m->index < 0) return rg_fail(e, 500, "no vector index on '%s'", m->text);
  if (q->one_shard && remote) {        /* that shard's instance in each */
    int b, nb = rg_cspec_buckets(q->spec, remote);          /* bucket */
    for (b = 0, rc = 0; b < nb && rc == 0; b++)
      rc = search_shard(txn, env, q, m, RG_VSHARD_AT(q->shard, b), &cap,
                        remote, e);
    if (rc) return rc;
  }
  else {
    if (q->one_shard) shard = q->shard;
    while ((rc = next_shard(txn, q->spec->cid, index_id(m), shard,
                            &shard, e)) == 0) {
      if (q->one_shard && shard != q->shard)
        break;                                      /* that shard is empty */
      if ((rc = search_shard(txn, env, q, m, shard, &cap, remote, e)))
        return rc;
      if (shard == UINT64_MAX || q->one_shard) break;
      shard++;
    }
    if (rc < 0 || rc > 1) return rc;
  }
  if (q->nhit > 1)
    qsort(q->hit, q->nhit, sizeof(rg_vhit),
          rg_vdist_higher(m->dist) ? hit_cmp_higher : hit_cmp_lower);
  if (q->nhit > q->k) { q->nhit = q->k; q->more = 1; }
  return 0;
}

int rg_vindex_item (rg_txn *txn, rg_env *env, const rg_vsearch *q,
                    const rg_vhit *h, rg_val *ikey) {
  if (rg_env_remote(env) != NULL) {  /* its instance's place is the item's */
    const rg_vembed *m = &q->spec->vemb[q->embed];
    uint8_t k[RG_VECTOR_KEY];
    rg_val v;
    int rc = rg_kv_get(txn, RG_DB_VECTOR, k,
                       rg_key_vector(k, q->spec->cid, index_id(m),
                                     h->shard, T_HDR, 0), &v);
    if (rc && rc != RG_NOTFOUND) return rc;
  }
  return rg_ref_item(txn, env, h->seq, ikey);
}

void rg_vsearch_free (rg_vsearch *q) {
  free(q->hit);
  q->hit = NULL;
  q->nhit = 0;
}

void rg_vsearch_end (rg_vsearch *q) {
  size_t i;
  rg_vsearch_free(q);
  for (i = 0; i < q->nkept; i++) {
    rg_vgsearch_free(&q->kept[i].gs);
    free(q->kept[i].sc);
    free(q->kept[i].vid);
  }
  free(q->kept);
  q->kept = NULL;
  q->nkept = 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Verify
** ======================================================================
*/
/* Checks one index instance: its slots against the items, its codes and
** graph; returns the problems found. */
static int verify_one (vx *x, rg_buf *report) {
  vcur c;
  rg_val v;
  uint32_t n, live = 0, frees = 0;
  int problems = 0, rc;
#define PROBLEM(...) do { problems++; rg_buf_addf(report, __VA_ARGS__); \
                          rg_buf_addc(report, '\n'); } while (0)
  memset(&c, 0, sizeof(c));
  while ((rc = vcur_next(x, &c, T_VEC, &n, &v)) == 0) {
    const uint8_t *blk = (const uint8_t *)v.p;
    size_t i;
    if (v.n != vblock_size(x)) {
      PROBLEM("vector index '%s': block %u has %zu bytes", x->emb->text, n,
              (size_t)v.n);
      continue;
    }
    for (i = 0; i < x->bv; i++) {
      uint32_t seq, vid = (uint32_t)(n * x->bv + i), back;
      memcpy(&seq, blk + 4 * i, 4);
      if (seq == 0) continue;
      live++;
      if (vid >= x->top)
        PROBLEM("vector index '%s': slot %u above the top %u", x->emb->text,
                vid, x->top);
      if (slot_of(x, seq, &back) != 0 || back != vid)
        PROBLEM("vector index '%s': item seq %u in slot %u is not mapped to "
                "it", x->emb->text, seq, vid);
    }
  }
  vcur_close(&c);
  memset(&c, 0, sizeof(c));
  while ((rc = vcur_next(x, &c, T_FREE, &n, &v)) == 0) frees++;
  vcur_close(&c);
  if (live != x->count)
    PROBLEM("vector index '%s': %u vectors, the header says %u",
            x->emb->text, live, x->count);
  if (frees != x->nfree)
    PROBLEM("vector index '%s': %u free slots, the header says %u",
            x->emb->text, frees, x->nfree);
  if (x->kind != RG_VIX_FLAT && x->count >= RG_VX_TRAIN && !x->trained)
    PROBLEM("vector index '%s': %u vectors and no codes", x->emb->text,
            x->count);
  if (x->trained) {                  /* each live slot's code is its own */
    uint32_t vid;
    for (vid = 0; vid < x->top; vid++) {
      const uint8_t *vec, *code;
      uint32_t seq, cseq = 0;
      double norm;
      if (vector_of(x, vid, &vec, &seq, &norm) || g_get_code(x, vid, &code))
        break;
      if (code) memcpy(&cseq, x->cptr + 4 * (vid % x->bc), 4);
      if ((vec == NULL) != (code == NULL) || (vec && cseq != seq)) {
        PROBLEM("vector index '%s': slot %u has a vector and a code of "
                "other items", x->emb->text, vid);
        continue;
      }
      if (vec == NULL) continue;
      if (rg_sq8_encode(&x->sq, (const float *)widen(x, vec), x->code) == 0 &&
          memcmp(x->code, code, (size_t)x->dims) != 0)
        PROBLEM("vector index '%s': slot %u's code is not its vector's",
                x->emb->text, vid);
      if (x->kind == RG_VIX_DISKANN) {
        uint32_t adj[RG_VG_MAX_DEGREE];
        uint8_t k[RG_VECTOR_KEY];
        rg_val val;
        int na, i, j;
        if (get(x, k, key(x, k, T_ADJ, vid), &val) != 0) {
          PROBLEM("vector index '%s': slot %u is not in the graph",
                  x->emb->text, vid);
          continue;
        }
        if (g_get_adj(x, vid, adj, &na)) {
          PROBLEM("vector index '%s': slot %u has a bad neighbour list",
                  x->emb->text, vid);
          continue;
        }
        for (i = 0; i < na; i++) {
          if (adj[i] == vid || na > VX_DEGREE + VX_DEGREE / 4)
            PROBLEM("vector index '%s': slot %u's neighbour list is not a "
                    "graph's", x->emb->text, vid);
          for (j = 0; j < i; j++)
            if (adj[j] == adj[i])
              PROBLEM("vector index '%s': slot %u names %u twice",
                      x->emb->text, vid, adj[i]);
        }
      }
    }
    if (x->kind == RG_VIX_DISKANN && x->count > 0 &&
        (x->entry == RG_VG_NONE || x->entry >= x->top))
      PROBLEM("vector index '%s': no entry point", x->emb->text);
  }
#undef PROBLEM
  return problems;
}

int rg_vindex_verify_item (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                           uint32_t seq, const cJSON *doc, rg_buf *report) {
  int i, problems = 0;
  rg_err e;
  for (i = 0; i < spec->nvix; i++) {
    const rg_vembed *m = &spec->vemb[spec->vix[i].embed];
    vx x;
    uint8_t *vec;
    uint32_t vid;
    int has, rc;
    if (vx_open(&x, env, txn, NULL, spec, m,
                shard_of(env, spec, &spec->vix[i], doc), &e)) {
      rg_buf_addf(report, "vector index '%s': %s\n", m->text, e.msg);
      problems++;
      continue;
    }
    vec = (uint8_t *)malloc(x.vb);
    has = vec && doc_vector(&x, doc, vec) == 0;
    rc = slot_of(&x, seq, &vid);
    if (has && rc != 0) {
      rg_buf_addf(report, "vector index '%s': item seq %u has a vector and "
                  "no slot\n", m->text, seq);
      problems++;
    } else if (!has && rc == 0) {
      rg_buf_addf(report, "vector index '%s': item seq %u has a slot and no "
                  "vector\n", m->text, seq);
      problems++;
    } else if (has) {
      const uint8_t *stored;
      uint32_t sseq;
      double norm;
      if (vector_of(&x, vid, &stored, &sseq, &norm) || stored == NULL ||
          sseq != seq || memcmp(stored, vec, x.vb) != 0) {
        rg_buf_addf(report, "vector index '%s': slot %u does not hold item "
                    "seq %u's vector\n", m->text, vid, seq);
        problems++;
      }
    }
    free(vec);
    vx_free(&x);
  }
  return problems;
}

/* Does a key of the vector table belong to one of the container's
** indexes, in a form the format has? */
static int known_key (const rg_cspec *spec, const uint8_t *k, size_t n) {
  int i;
  if (n != 17 && n != RG_VECTOR_KEY) return 0;
  if ((n == 17) != (k[16] == T_HDR)) return 0;
  if (k[16] == 0 || !strchr("hxcafs", k[16])) return 0;
  for (i = 0; i < spec->nvix; i++)
    if (rg_get_u32(k + 4) == index_id(&spec->vemb[spec->vix[i].embed]))
      return 1;
  return 0;
}

int rg_vindex_verify (rg_txn *txn, rg_env *env, const rg_cspec *spec,
                      rg_buf *report) {
  int i, problems = 0, rc;
  rg_err e;
  rg_cur *cur;
  if (rg_cur_open(txn, RG_DB_VECTOR, &cur) == 0) {
    rg_val kv, v;
    uint8_t p4[4];
    uint64_t stray = 0;
    kv.p = p4;
    kv.n = rg_key_cid(p4, spec->cid);
    for (rc = rg_cur_get(cur, &kv, &v, RG_SEEK); rc == 0;
         rc = rg_cur_get(cur, &kv, &v, RG_NEXT)) {
      if (kv.n < 4 || memcmp(kv.p, p4, 4) != 0) break;
      if (!known_key(spec, (const uint8_t *)kv.p, kv.n)) stray++;
    }
    rg_cur_close(cur);
    if (stray) {
      rg_buf_addf(report, "container '%s': the vector table holds %lu "
                  "entries no vector index needs\n", spec->name,
                  (unsigned long)stray);
      problems++;
    }
  }
  for (i = 0; i < spec->nvix; i++) {
    const rg_vembed *m = &spec->vemb[spec->vix[i].embed];
    uint64_t shard = 0;
    while (next_shard(txn, spec->cid, index_id(m), shard, &shard,
                      &e) == 0) {
      vx x;
      if (vx_open(&x, env, txn, NULL, spec, m, shard, &e)) {
        rg_buf_addf(report, "vector index '%s': %s\n", m->text, e.msg);
        problems++;
      } else {
        problems += verify_one(&x, report);
        vx_free(&x);
      }
      if (shard == UINT64_MAX) break;
      shard++;
    }
  }
  return problems;
}
/* }===================================================================== */
