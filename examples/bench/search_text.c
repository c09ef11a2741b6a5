/*
** search_text.c: full-text search against SQLite FTS5, same documents,
** same run, one thread.
**
** The corpus is made here, seeded: N documents (default 200,000) of 10 to
** 200 words drawn from a Zipf vocabulary (s = 1.0) of synthetic words.
** The words are syllables of a consonant and a, o or u, which neither
** stemmer changes (Snowball's English, regolith's; Porter's, FTS5's) and
** which hold no stopword, so that both engines see the same terms: the
** same tokenizer, as far as two engines can share one.
**
**   FTS5      tokenize = 'porter unicode61', bm25() (k1 1.2, b 0.75),
**             documents inserted in transactions of --batch (10,000, as
**             regolith's bulk_load)
**   regolith  the documents in an LMDB table and their full-text index
**             (store/ftindex.c) in another, written in the same LMDB
**             transactions of --batch documents, through the rg_ftkv table
**             interface the index is written against
**
** Then, for 300 random pairs of terms in two bands of document frequency
** (100 to 2,000, and above 2,000), the top 10 by BM25 of the documents
** holding both terms (AND) and either (OR), timed one query at a time:
** FTS5 `MATCH 'a AND b' ORDER BY bm25(t) LIMIT 10`, regolith
** rg_fti_topk.  The two top 10s are compared (same documents in the same
** order); BM25's idf differs (FTS5: ln((N - df + 0.5) / (df + 0.5)),
** floored at 1e-6; regolith: ln(1 + (N - df + 0.5) / (df + 0.5))), so
** they are compared under regolith's idf recomputed for FTS5's candidates
** too (FTS5 scores every match; the candidates are its whole match set).
**
** Hybrid: each document also has a 64-d vector (a mixture of Gaussians,
** seeded); a hybrid query fuses, by RRF (k = 60), the top 60 of the OR
** text search and the top 60 of an exact scan of the vectors, into a top
** 10.  Its p95 is compared with the text's and the vector scan's p95s.
**
** Then the same through the store and its SQL API (store_phase, below).
**
** Build times are given as wall time and as this thread's CPU time, which
** the other work of a shared machine disturbs less.
**
** Usage: search_text DIR [--docs N] [--pairs P] [--seed S] [--batch B]
**                        [--scan S] [--json FILE]
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libstemmer.h>
#include <lmdb.h>
#include <sqlite3.h>

#include "base/json.h"
#include "store/catalog.h"
#include "store/ftindex.h"
#include "store/plan.h"
#include "store/verify.h"
#include "store/write.h"

static double now_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* This thread's CPU time: what the machine's other work does not add. */
static double cpu_ms (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng_state;
static uint32_t rnd (void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 33);
}
static double unif (void) { return (rnd() + 0.5) / 2147483648.0; }
static double gauss (void) {
  return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
}

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
                      exit(1); } while (0)
#define MDB(x) do { int rc_ = (x); if (rc_) DIE("%s: %s", #x, \
                    mdb_strerror(rc_)); } while (0)

/*
** {=====================================================================
** The corpus
** ======================================================================
*/
#define VOCAB 60000
static char *word[VOCAB];
static double *cdf;

static void make_vocab (void) {
  static const char cons[] = "bdgkmnprtz", vow[] = "aou";
  struct sb_stemmer *en = sb_stemmer_new("english", NULL);
  struct sb_stemmer *po = sb_stemmer_new("porter", NULL);
  uint64_t cand = 0;
  int n = 0, i;
  double z = 0;
  if (!en || !po) DIE("libstemmer: no english or porter stemmer");
  while (n < VOCAB) {
    char w[16];
    uint64_t x = cand++;
    int syl = x < 900 ? 2 : x < 900 + 27000 ? 3 : 4, k, len = 0;
    uint64_t base = syl == 2 ? x : syl == 3 ? x - 900 : x - 27900;
    for (k = 0; k < syl; k++) {
      w[len++] = cons[(base % 30) / 3];
      w[len++] = vow[base % 3];
      base /= 30;
    }
    w[len] = '\0';
    if (rg_text_stopword(RG_LANG_EN_US, w, (size_t)len)) continue;
    {
      const sb_symbol *a = sb_stemmer_stem(en, (const sb_symbol *)w, len);
      int al = sb_stemmer_length(en);
      if (al != len || memcmp(a, w, (size_t)len)) continue;
      a = sb_stemmer_stem(po, (const sb_symbol *)w, len);
      al = sb_stemmer_length(po);
      if (al != len || memcmp(a, w, (size_t)len)) continue;
    }
    word[n++] = strdup(w);
  }
  /* ranks shuffled over the shapes, so that frequent words are not all
  ** the short ones in order */
  for (i = VOCAB - 1; i > 0; i--) {
    int j = (int)(rnd() % (uint32_t)(i + 1));
    char *t = word[i]; word[i] = word[j]; word[j] = t;
  }
  cdf = (double *)malloc(VOCAB * sizeof(double));
  for (i = 0; i < VOCAB; i++) { z += 1.0 / (i + 1); cdf[i] = z; }
  for (i = 0; i < VOCAB; i++) cdf[i] /= z;
  sb_stemmer_delete(en);
  sb_stemmer_delete(po);
}

static int zipf (void) {
  double u = unif();
  int lo = 0, hi = VOCAB - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (cdf[mid] < u) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static char **docs;
static size_t ndocs, text_bytes;
static uint32_t *df;                 /* by word rank */

static void make_docs (size_t n) {
  size_t i;
  uint32_t *seen = (uint32_t *)calloc(VOCAB, sizeof(uint32_t));
  char *buf = (char *)malloc(200 * 16 + 16);
  docs = (char **)malloc(n * sizeof(char *));
  df = (uint32_t *)calloc(VOCAB, sizeof(uint32_t));
  for (i = 0; i < n; i++) {
    int len = 10 + (int)(rnd() % 191), k;
    size_t m = 0;
    for (k = 0; k < len; k++) {
      int r = zipf();
      size_t wl = strlen(word[r]);
      if (seen[r] != i + 1) { seen[r] = (uint32_t)i + 1; df[r]++; }
      if (k && k % 12 == 0) { buf[m++] = '.'; buf[m++] = ' '; }
      else if (k) buf[m++] = ' ';
      memcpy(buf + m, word[r], wl);
      m += wl;
    }
    buf[m++] = '.';
    buf[m] = '\0';
    docs[i] = strdup(buf);
    text_bytes += m;
  }
  ndocs = n;
  free(seen);
  free(buf);
}
/* }===================================================================== */


/*
** {=====================================================================
** rg_ftkv over an LMDB table (what the engine's table seam will give)
** ======================================================================
*/
typedef struct lkv { MDB_txn *txn; MDB_dbi dbi; } lkv;
typedef struct lcur { MDB_cursor *c; int off; } lcur;

static int l_get (void *ud, const uint8_t *k, size_t kn, rg_slice *v) {
  lkv *l = (lkv *)ud;
  MDB_val key, val;
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_get(l->txn, l->dbi, &key, &val);
  if (rc == MDB_NOTFOUND) return 1;
  if (rc) return 500;
  v->p = (const uint8_t *)val.mv_data;
  v->n = val.mv_size;
  return 0;
}
static int l_put (void *ud, const uint8_t *k, size_t kn, const uint8_t *v,
                  size_t vn) {
  lkv *l = (lkv *)ud;
  MDB_val key, val;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  val.mv_data = (void *)v;
  val.mv_size = vn;
  return mdb_put(l->txn, l->dbi, &key, &val, 0) ? 500 : 0;
}
static int l_del (void *ud, const uint8_t *k, size_t kn) {
  lkv *l = (lkv *)ud;
  MDB_val key;
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_del(l->txn, l->dbi, &key, NULL);
  return rc == MDB_NOTFOUND ? 1 : rc ? 500 : 0;
}
static void *l_open (void *ud) {
  lkv *l = (lkv *)ud;
  lcur *c = (lcur *)calloc(1, sizeof(lcur));
  if (c && mdb_cursor_open(l->txn, l->dbi, &c->c)) { free(c); return NULL; }
  return c;
}
static int l_at (int rc, MDB_val *k, MDB_val *v, rg_slice *ko, rg_slice *vo) {
  if (rc == MDB_NOTFOUND) return 1;
  if (rc) return 500;
  ko->p = (const uint8_t *)k->mv_data;
  ko->n = k->mv_size;
  vo->p = (const uint8_t *)v->mv_data;
  vo->n = v->mv_size;
  return 0;
}
static int l_seek (void *cur, const uint8_t *k, size_t kn, rg_slice *ko,
                   rg_slice *vo) {
  lcur *c = (lcur *)cur;
  MDB_val key, val;
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_cursor_get(c->c, &key, &val, MDB_SET_RANGE);
  c->off = rc == MDB_NOTFOUND;
  return l_at(rc, &key, &val, ko, vo);
}
static int l_next (void *cur, rg_slice *ko, rg_slice *vo) {
  lcur *c = (lcur *)cur;
  MDB_val key, val;
  if (c->off) return 1;
  return l_at(mdb_cursor_get(c->c, &key, &val, MDB_NEXT), &key, &val, ko, vo);
}
static int l_prev (void *cur, rg_slice *ko, rg_slice *vo) {
  lcur *c = (lcur *)cur;
  MDB_val key, val;
  int op = c->off ? MDB_LAST : MDB_PREV;
  c->off = 0;
  return l_at(mdb_cursor_get(c->c, &key, &val, op), &key, &val, ko, vo);
}
static void l_close (void *cur) {
  lcur *c = (lcur *)cur;
  mdb_cursor_close(c->c);
  free(c);
}
static void l_iface (lkv *l, rg_ftkv *kv) {
  kv->ud = l;
  kv->get = l_get;
  kv->put = l_put;
  kv->del = l_del;
  kv->open = l_open;
  kv->seek = l_seek;
  kv->next = l_next;
  kv->prev = l_prev;
  kv->close = l_close;
}
/* }===================================================================== */


static int dcmp (const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct pct { double p50, p95, p99; } pct;
static pct percentiles (double *v, int n) {
  pct p;
  qsort(v, (size_t)n, sizeof(double), dcmp);
  p.p50 = v[n / 2];
  p.p95 = v[(int)(n * 0.95)];
  p.p99 = v[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1];
  return p;
}

#define DIM 64
static float *vecs, *centers;

static void make_vectors (void) {
  size_t i;
  int d, c;
  centers = (float *)malloc(100 * DIM * sizeof(float));
  vecs = (float *)malloc(ndocs * DIM * sizeof(float));
  for (c = 0; c < 100 * DIM; c++) centers[c] = (float)gauss();
  for (i = 0; i < ndocs; i++) {
    int k = (int)(rnd() % 100);
    for (d = 0; d < DIM; d++)
      vecs[i * DIM + d] = centers[k * DIM + d] + 0.35f * (float)gauss();
  }
}

/* The top n documents (1-based numbers) nearest q by L2, best first. */
static void vector_top (const float *q, size_t n, uint32_t *out) {
  double *best = (double *)malloc(n * sizeof(double));
  size_t i, m = 0, j;
  for (i = 0; i < ndocs; i++) {
    double s = 0;
    const float *v = vecs + i * DIM;
    int d;
    for (d = 0; d < DIM; d++) { double t = v[d] - q[d]; s += t * t; }
    if (m < n || s < best[m - 1]) {
      if (m < n) m++;
      for (j = m - 1; j > 0 && best[j - 1] > s; j--) {
        best[j] = best[j - 1];
        out[j] = out[j - 1];
      }
      best[j] = s;
      out[j] = (uint32_t)i + 1;
    }
  }
  free(best);
}

typedef struct fused { uint32_t doc; double s; } fused;
static int fcmp (const void *a, const void *b) {
  const fused *x = (const fused *)a, *y = (const fused *)b;
  if (x->s != y->s) return x->s > y->s ? -1 : 1;
  return x->doc < y->doc ? -1 : x->doc > y->doc;
}

/*
** Through the store: the documents bulk-loaded into a container whose
** full-text index covers /t (range indexing off, so that the full-text
** index's cost stands alone), queried through the SQL API as a program
** queries (rg_query_exec: parsing, planning, loading the items named,
** scoring, projecting), with the index, and the same queries on a
** container without it (a scan of every item, FullTextScore's statistics
** by a pass over them) for the first `nscan` pairs, and FTS5 on the same
** pairs.  The top 10s of the index and the scan must be the same.
*/
typedef struct sbulk {
  const rg_cont *c;
  rg_bulk *b;
  rg_bulk_item *items;
  size_t n, written;
} sbulk;

static int sbulk_body (rg_scope *s, void *ud, rg_err *err) {
  sbulk *q = (sbulk *)ud;
  return rg_bulk_write(s, q->b, q->c, q->items, q->n, RG_BULK_CREATE,
                       &q->written, err);
}

static rg_cont store_load (rg_env *env, const char *name, int indexed,
                           size_t batch, double *wall, double *cpu) {
  char spec[256];
  rg_cont c;
  rg_err e;
  sbulk q;
  rg_bulk_item *items = (rg_bulk_item *)calloc(batch, sizeof(rg_bulk_item));
  size_t i, j;
  char *doc = (char *)malloc(4096 + 8 * 220);
  double t0, c0;
  snprintf(spec, sizeof(spec), "{\"name\":\"%s\",\"partition_key\":\"/pk\","
           "\"full_text\":{\"paths\":[{\"path\":\"/t\"}]},\"indexing\":"
           "{\"excluded\":[\"/*\"]%s}}", name,
           indexed ? ",\"full_text\":[\"/t\"]" : "");
  c.env = env;
  if (rg_catalog_create(env, RG_SYNC_NONE, name, strlen(name), spec,
                        strlen(spec), 0, &c.spec, &e))
    DIE("create %s: %s", name, e.msg);
  memset(&q, 0, sizeof(q));
  q.c = &c;
  q.b = rg_bulk_new();
  q.items = items;
  t0 = now_ms();
  c0 = cpu_ms();
  for (i = 0; i < ndocs; i += batch) {
    size_t m = ndocs - i < batch ? ndocs - i : batch;
    for (j = 0; j < m; j++) {
      int dn = snprintf(doc, 4096 + 8 * 220, "{\"id\":\"%zu\",\"pk\":\"p%zu\","
                        "\"t\":\"%s\"}", i + j + 1, (i + j) % 16, docs[i + j]);
      if (rg_json_parse(doc, (size_t)dn, &items[j].doc, &e))
        DIE("parse: %s", e.msg);
    }
    q.n = m;
    if (rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, sbulk_body, &q, &e))
      DIE("bulk load: %s", e.msg);
    rg_bulk_clear(items, m);
    for (j = 0; j < m; j++) cJSON_Delete(items[j].doc);
  }
  *wall = now_ms() - t0;
  *cpu = cpu_ms() - c0;
  rg_bulk_free(q.b);
  free(items);
  free(doc);
  return c;
}

/* One query's top 10 ids into ids (a JSON array's text); its time. */
static double store_query (rg_env *env, const rg_cont *c, const char *sql,
                           const char *a, const char *b, rg_buf *ids,
                           rg_work *w) {
  rg_query_req q;
  rg_query_res r;
  rg_txn *txn;
  rg_err e;
  cJSON *params = cJSON_CreateObject();
  double t0;
  cJSON_AddStringToObject(params, "a", a);
  cJSON_AddStringToObject(params, "b", b);
  memset(&q, 0, sizeof(q));
  memset(&r, 0, sizeof(r));
  q.sql = sql;
  q.sqllen = strlen(sql);
  q.params = params;
  t0 = now_ms();
  if (rg_read_begin(env, &txn, &e)) DIE("read: %s", e.msg);
  if (rg_query_exec(txn, c, 0, &q, &r, &e)) DIE("query: %s", e.msg);
  rg_read_end(env);
  t0 = now_ms() - t0;
  ids->n = 0;
  rg_buf_add(ids, r.rows.p, r.rows.n);
  if (w) *w = r.work;
  rg_query_res_free(&r);
  cJSON_Delete(params);
  return t0;
}

static void store_phase (const char *dir, size_t batch, int pairs, int nscan,
                         const int *mid, int nmid, const int *hi, int nhi,
                         sqlite3_stmt *fq) {
  static const char *const sql[2] = {
    "SELECT TOP 10 VALUE c.id FROM c WHERE FullTextContainsAll(c.t, @a, @b) "
    "ORDER BY RANK FullTextScore(c.t, @a, @b)",
    "SELECT TOP 10 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.t, @a, @b)"
  };
  static const char *const band_name[2] = { "df 100-2,000", "df > 2,000" };
  char path[512], cmd[1100];
  rg_open_opts o;
  rg_env *env;
  rg_err e;
  rg_cont ix, sc;
  double wall, cpu, swall, scpu;
  double *ti = (double *)malloc((size_t)pairs * sizeof(double));
  double *ts = (double *)malloc((size_t)pairs * sizeof(double));
  double *tf = (double *)malloc((size_t)pairs * sizeof(double));
  rg_buf a, b;
  int band, mode;
  snprintf(path, sizeof(path), "%s/store", dir);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", path, path);
  if (system(cmd)) DIE("cannot make %s", path);
  memset(&o, 0, sizeof(o));
  o.sync = RG_SYNC_NONE;
  if (rg_env_open(path, &o, &env, &e)) DIE("open: %s", e.msg);
  ix = store_load(env, "ix", 1, batch, &wall, &cpu);
  sc = store_load(env, "scan", 0, batch, &swall, &scpu);
  printf("store, bulk load with the full-text index: %.0f documents/s "
         "(CPU %.0f); without it: %.0f (CPU %.0f): the index costs %.2fx\n",
         ndocs / (wall / 1e3), ndocs / (cpu / 1e3), ndocs / (swall / 1e3),
         ndocs / (scpu / 1e3), cpu / scpu);
  rg_buf_init(&a);
  rg_buf_init(&b);
  for (band = 0; band < 2; band++)
    for (mode = 0; mode < 2; mode++) {
      int p, ns = 0, same = 0;
      pct pi, pf, ps;
      rg_work w;
      uint64_t loaded = 0, read = 0;
      for (p = 0; p < pairs; p++) {
        const int *pool = band ? hi : mid;
        int np = band ? nhi : nmid;
        int x = pool[rnd() % (uint32_t)np], y = pool[rnd() % (uint32_t)np];
        char m[64];
        double t0;
        if (x == y) { p--; continue; }
        ti[p] = store_query(env, &ix, sql[mode], word[x], word[y], &a, &w);
        loaded += w.loaded;
        read += w.text_read;
        if (p < nscan) {
          ts[ns++] = store_query(env, &sc, sql[mode], word[x], word[y], &b,
                                 NULL);
          same += a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
        }
        snprintf(m, sizeof(m), "%s %s %s", word[x], mode ? "OR" : "AND",
                 word[y]);
        sqlite3_bind_text(fq, 1, m, -1, SQLITE_TRANSIENT);
        t0 = now_ms();
        while (sqlite3_step(fq) == SQLITE_ROW) {}
        tf[p] = now_ms() - t0;
        sqlite3_reset(fq);
      }
      pi = percentiles(ti, pairs);
      pf = percentiles(tf, pairs);
      ps = percentiles(ts, ns);
      printf("SQL %-13s %s  index p50 %.3f p95 %.3f p99 %.3f ms (%.1f items "
             "loaded, %.1f index records read a query) | FTS5 p50 %.3f p95 "
             "%.3f | scan (%d queries) p50 %.1f p95 %.1f ms | index = scan: "
             "%d/%d\n", band_name[band], mode ? "OR " : "AND", pi.p50, pi.p95,
             pi.p99, (double)loaded / pairs, (double)read / pairs, pf.p50,
             pf.p95, ns, ps.p50, ps.p95, same, ns);
    }
  {
    rg_buf report;
    rg_buf_init(&report);
    if (rg_verify(env, &report)) DIE("verify: %.*s", (int)report.n, report.p);
    rg_buf_free(&report);
  }
  rg_cspec_free(ix.spec);
  rg_cspec_free(sc.spec);
  rg_buf_free(&a);
  rg_buf_free(&b);
  free(ti); free(ts); free(tf);
  rg_env_release(env);
}

int main (int argc, char **argv) {
  const char *dir = NULL, *json = NULL;
  size_t n = 200000, i, batch = 10000;
  int pairs = 300, nscan = 5, a;
  uint64_t seed = 42;
  char path[512];
  MDB_env *env;
  MDB_dbi dbd, dbf;
  MDB_txn *txn;
  lkv l;
  rg_ftkv kv;
  rg_err e;
  sqlite3 *db;
  double t0, reg_build, fts_build, reg_cpu = 0, fts_cpu = 0;
  double reg_index_bytes, fts_index_bytes;
  FILE *out = stdout;
  for (a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--docs") && a + 1 < argc) n = strtoul(argv[++a], 0, 10);
    else if (!strcmp(argv[a], "--pairs") && a + 1 < argc) pairs = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--seed") && a + 1 < argc) seed = strtoull(argv[++a], 0, 10);
    else if (!strcmp(argv[a], "--json") && a + 1 < argc) json = argv[++a];
    else if (!strcmp(argv[a], "--batch") && a + 1 < argc) batch = strtoul(argv[++a], 0, 10);
    else if (!strcmp(argv[a], "--scan") && a + 1 < argc) nscan = atoi(argv[++a]);
    else if (!dir) dir = argv[a];
    else DIE("usage: search_text DIR [--docs N] [--pairs P] [--seed S] [--json FILE]");
  }
  if (!dir) DIE("usage: search_text DIR [--docs N] [--pairs P] [--seed S] [--json FILE]");
  rng_state = seed;
  make_vocab();
  make_docs(n);
  make_vectors();
  printf("corpus: %zu documents, %.1f MB of text, %d-word Zipf vocabulary, "
         "seed %llu; %zu documents per transaction\n", ndocs,
         text_bytes / 1e6, VOCAB, (unsigned long long)seed, batch);

  /* regolith: documents and index in the same LMDB transactions */
  snprintf(path, sizeof(path), "%s/regolith", dir);
  {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", path, path);
    if (system(cmd)) DIE("cannot make %s", path);
  }
  MDB(mdb_env_create(&env));
  MDB(mdb_env_set_maxdbs(env, 4));
  MDB(mdb_env_set_mapsize(env, (size_t)8 << 30));
  MDB(mdb_env_open(env, path, MDB_NOSYNC | MDB_NOMETASYNC, 0644));
  MDB(mdb_txn_begin(env, NULL, 0, &txn));
  MDB(mdb_dbi_open(txn, "docs", MDB_CREATE, &dbd));
  MDB(mdb_dbi_open(txn, "fulltext", MDB_CREATE, &dbf));
  MDB(mdb_txn_commit(txn));
  l.dbi = dbf;
  l_iface(&l, &kv);
  {
    rg_fti_writer *w;
    rg_fti_work bw;
    memset(&bw, 0, sizeof(bw));
    double c_add = 0, c_flush = 0, c_commit = 0, c0;
    if (rg_fti_writer_new(&w, &kv, 1, RG_LANG_EN_US)) DIE("writer");
    t0 = now_ms();
    reg_cpu = cpu_ms();
    for (i = 0; i < ndocs; i++) {
      if (i % batch == 0) { MDB(mdb_txn_begin(env, NULL, 0, &txn)); l.txn = txn; }
      {
        uint8_t k[4];
        MDB_val key, val;
        rg_put_u32(k, (uint32_t)i + 1);
        key.mv_data = k;
        key.mv_size = 4;
        val.mv_data = docs[i];
        val.mv_size = strlen(docs[i]);
        MDB(mdb_put(txn, dbd, &key, &val, MDB_APPEND));
      }
      c0 = cpu_ms();
      if (rg_fti_add(w, (uint32_t)i + 1, docs[i], strlen(docs[i]))) DIE("add");
      c_add += cpu_ms() - c0;
      if (i % batch == batch - 1 || i + 1 == ndocs) {
        c0 = cpu_ms();
        if (rg_fti_flush(w, &bw, &e)) DIE("flush: %s", e.msg);
        c_flush += cpu_ms() - c0;
        c0 = cpu_ms();
        MDB(mdb_txn_commit(txn));
        c_commit += cpu_ms() - c0;
      }
    }
    reg_build = now_ms() - t0;
    reg_cpu = cpu_ms() - reg_cpu;
    printf("regolith build CPU: %.2f s (analysis %.2f, flush %.2f, commit "
           "%.2f)\n", reg_cpu / 1e3, c_add / 1e3, c_flush / 1e3,
           c_commit / 1e3);
    rg_fti_writer_free(w);
    printf("build work: %llu blocks read (%llu postings), %llu written "
           "(%.1f MB)\n", (unsigned long long)bw.blocks_read,
           (unsigned long long)bw.postings_read,
           (unsigned long long)bw.blocks_written, bw.bytes_written / 1e6);
  }
  {
    MDB_stat st;
    MDB(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    MDB(mdb_stat(txn, dbf, &st));
    reg_index_bytes = (double)st.ms_psize *
      (double)(st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages);
    l.txn = txn;
    if (rg_fti_verify(&kv, 1, &e)) DIE("verify: %s", e.msg);
    mdb_txn_abort(txn);
  }

  /* FTS5 */
  snprintf(path, sizeof(path), "%s/fts5.db", dir);
  remove(path);
  if (sqlite3_open(path, &db)) DIE("sqlite: %s", sqlite3_errmsg(db));
  sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
               "CREATE VIRTUAL TABLE t USING fts5(body, tokenize = "
               "'porter unicode61')", 0, 0, 0);
  {
    sqlite3_stmt *ins;
    sqlite3_prepare_v2(db, "INSERT INTO t(rowid, body) VALUES (?, ?)", -1,
                       &ins, 0);
    t0 = now_ms();
    fts_cpu = cpu_ms();
    for (i = 0; i < ndocs; i++) {
      if (i % batch == 0) sqlite3_exec(db, "BEGIN", 0, 0, 0);
      sqlite3_bind_int64(ins, 1, (sqlite3_int64)i + 1);
      sqlite3_bind_text(ins, 2, docs[i], -1, SQLITE_STATIC);
      if (sqlite3_step(ins) != SQLITE_DONE) DIE("fts5 insert: %s", sqlite3_errmsg(db));
      sqlite3_reset(ins);
      if (i % batch == batch - 1 || i + 1 == ndocs)
        sqlite3_exec(db, "COMMIT", 0, 0, 0);
    }
    fts_build = now_ms() - t0;
    fts_cpu = cpu_ms() - fts_cpu;
    sqlite3_finalize(ins);
  }
  {
    sqlite3_stmt *s;
    fts_index_bytes = 0;
    if (sqlite3_prepare_v2(db, "SELECT SUM(pgsize) FROM dbstat WHERE name "
                           "IN ('t_data', 't_idx', 't_docsize', "
                           "'sqlite_autoindex_t_idx_1', 't_config')", -1, &s,
                           0) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      fts_index_bytes = sqlite3_column_double(s, 0);
    sqlite3_finalize(s);
  }
  printf("build: regolith %.0f documents/s (%.1f s), FTS5 %.0f documents/s "
         "(%.1f s): %.2fx\n", ndocs / (reg_build / 1e3), reg_build / 1e3,
         ndocs / (fts_build / 1e3), fts_build / 1e3, fts_build / reg_build);
  printf("build, CPU time: regolith %.0f documents/s, FTS5 %.0f documents/s: "
         "%.2fx\n", ndocs / (reg_cpu / 1e3), ndocs / (fts_cpu / 1e3),
         fts_cpu / reg_cpu);
  printf("index: regolith %.1f MB (%.3fx the text), FTS5 %.1f MB (%.3fx)\n",
         reg_index_bytes / 1e6, reg_index_bytes / text_bytes,
         fts_index_bytes / 1e6, fts_index_bytes / text_bytes);

  /* queries */
  {
    static const char *const band_name[2] = { "df 100-2,000", "df > 2,000" };
    int *mid = (int *)malloc(VOCAB * sizeof(int)), nmid = 0;
    int *hi = (int *)malloc(VOCAB * sizeof(int)), nhi = 0, band, mode;
    sqlite3_stmt *q;
    double *tr = (double *)malloc((size_t)pairs * sizeof(double));
    double *tf = (double *)malloc((size_t)pairs * sizeof(double));
    pct res[2][2][2];                /* band, mode (AND, OR), engine */
    int same_top[2][2], same_set[2][2], compared[2][2];
    double text_p95 = 0;
    for (i = 0; i < VOCAB; i++) {
      if (df[i] >= 100 && df[i] <= 2000) mid[nmid++] = (int)i;
      else if (df[i] > 2000) hi[nhi++] = (int)i;
    }
    printf("terms: %d with df 100-2,000, %d with df > 2,000\n", nmid, nhi);
    sqlite3_prepare_v2(db, "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? "
                       "ORDER BY bm25(t) LIMIT 10", -1, &q, 0);
    MDB(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
    l.txn = txn;
    for (band = 0; band < 2; band++)
      for (mode = 0; mode < 2; mode++) {
        int p;
        same_top[band][mode] = same_set[band][mode] = compared[band][mode] = 0;
        for (p = 0; p < pairs; p++) {
          int *pool = band ? hi : mid, np = band ? nhi : nmid;
          int x = pool[rnd() % (uint32_t)np], y = pool[rnd() % (uint32_t)np];
          const char *ts[2];
          size_t ls[2];
          char m[64];
          rg_fti_hit hits[10];
          size_t nh, j;
          uint32_t fdoc[10];
          int nf = 0;
          if (x == y) { p--; continue; }
          ts[0] = word[x]; ts[1] = word[y];
          ls[0] = strlen(ts[0]); ls[1] = strlen(ts[1]);
          t0 = now_ms();
          if (rg_fti_topk(&kv, 1, ts, ls, 2, mode == 0, 10, NULL, NULL, hits,
                          &nh, NULL, &e))
            DIE("topk: %s", e.msg);
          tr[p] = now_ms() - t0;
          snprintf(m, sizeof(m), "%s %s %s", ts[0], mode ? "OR" : "AND", ts[1]);
          sqlite3_bind_text(q, 1, m, -1, SQLITE_TRANSIENT);
          t0 = now_ms();
          while (sqlite3_step(q) == SQLITE_ROW)
            fdoc[nf++] = (uint32_t)sqlite3_column_int64(q, 0);
          tf[p] = now_ms() - t0;
          sqlite3_reset(q);
          compared[band][mode]++;
          if ((size_t)nf == nh) {
            int order = 1, set = 1;
            for (j = 0; j < nh; j++) {
              size_t z;
              int found = 0;
              if (fdoc[j] != hits[j].doc) order = 0;
              for (z = 0; z < nh; z++) if (fdoc[z] == hits[j].doc) found = 1;
              if (!found) set = 0;
            }
            same_top[band][mode] += order;
            same_set[band][mode] += set;
          }
        }
        res[band][mode][0] = percentiles(tr, pairs);
        res[band][mode][1] = percentiles(tf, pairs);
        if (band == 1 && mode == 1) text_p95 = res[band][mode][0].p95;
        printf("%-13s %s  regolith p50 %.3f p95 %.3f p99 %.3f ms | FTS5 p50 "
               "%.3f p95 %.3f p99 %.3f ms | same top 10: %d/%d in order, "
               "%d/%d as sets\n", band_name[band], mode ? "OR " : "AND",
               res[band][mode][0].p50, res[band][mode][0].p95,
               res[band][mode][0].p99, res[band][mode][1].p50,
               res[band][mode][1].p95, res[band][mode][1].p99,
               same_top[band][mode], compared[band][mode],
               same_set[band][mode], compared[band][mode]);
      }
    store_phase(dir, batch, pairs, nscan, mid, nmid, hi, nhi, q);
    /* hybrid: OR text of frequent terms + an exact vector scan, fused */
    {
      double *tv = (double *)malloc((size_t)pairs * sizeof(double));
      double *th = (double *)malloc((size_t)pairs * sizeof(double));
      double *tt = (double *)malloc((size_t)pairs * sizeof(double));
      pct pv, ph, pt;
      int p;
      for (p = 0; p < pairs; p++) {
        int x = hi[rnd() % (uint32_t)nhi], y = hi[rnd() % (uint32_t)nhi];
        const char *ts[2];
        size_t ls[2], nh, j, nf = 0;
        rg_fti_hit hits[60];
        uint32_t vtop[60];
        float qv[DIM];
        fused f[120];
        int d;
        double t1, t2;
        for (d = 0; d < DIM; d++)
          qv[d] = centers[(rnd() % 100) * DIM + d] + 0.35f * (float)gauss();
        ts[0] = word[x]; ts[1] = word[y];
        ls[0] = strlen(ts[0]); ls[1] = strlen(ts[1]);
        t0 = now_ms();
        if (rg_fti_topk(&kv, 1, ts, ls, 2, 0, 60, NULL, NULL, hits, &nh,
                        NULL, &e))
          DIE("topk: %s", e.msg);
        t1 = now_ms();
        vector_top(qv, 60, vtop);
        t2 = now_ms();
        for (j = 0; j < nh; j++) {
          f[nf].doc = hits[j].doc;
          f[nf++].s = 1.0 / (60.0 + (double)(j + 1));
        }
        for (j = 0; j < 60; j++) {
          size_t z;
          for (z = 0; z < nh && f[z].doc != vtop[j]; z++) {}
          if (z < nh) f[z].s += 1.0 / (60.0 + (double)(j + 1));
          else { f[nf].doc = vtop[j]; f[nf++].s = 1.0 / (60.0 + (double)(j + 1)); }
        }
        qsort(f, nf, sizeof(fused), fcmp);
        th[p] = now_ms() - t0;
        tt[p] = t1 - t0;
        tv[p] = t2 - t1;
      }
      pt = percentiles(tt, pairs);
      pv = percentiles(tv, pairs);
      ph = percentiles(th, pairs);
      printf("hybrid (RRF of OR text top 60 and exact %d-d vector top 60, "
             "top 10): p50 %.3f p95 %.3f ms; text p95 %.3f + vector p95 %.3f "
             "+ 1 = %.3f ms\n", DIM, ph.p50, ph.p95, pt.p95, pv.p95,
             pt.p95 + pv.p95 + 1);
      if (json) {
        FILE *jf = fopen(json, "w");
        if (jf) {
          fprintf(jf, "{\"docs\":%zu,\"text_mb\":%.2f,\"build_docs_s\":"
                  "{\"regolith\":%.0f,\"fts5\":%.0f},\"index_ratio\":"
                  "{\"regolith\":%.4f,\"fts5\":%.4f},\"hybrid_p95\":%.3f,"
                  "\"text_p95\":%.3f,\"vector_p95\":%.3f,\"queries\":[",
                  ndocs, text_bytes / 1e6, ndocs / (reg_build / 1e3),
                  ndocs / (fts_build / 1e3), reg_index_bytes / text_bytes,
                  fts_index_bytes / text_bytes, ph.p95, pt.p95, pv.p95);
          for (band = 0; band < 2; band++)
            for (mode = 0; mode < 2; mode++)
              fprintf(jf, "%s{\"band\":\"%s\",\"mode\":\"%s\",\"regolith\":"
                      "[%.4f,%.4f,%.4f],\"fts5\":[%.4f,%.4f,%.4f],"
                      "\"same_order\":%d,\"same_set\":%d,\"of\":%d}",
                      band || mode ? "," : "", band_name[band],
                      mode ? "OR" : "AND", res[band][mode][0].p50,
                      res[band][mode][0].p95, res[band][mode][0].p99,
                      res[band][mode][1].p50, res[band][mode][1].p95,
                      res[band][mode][1].p99, same_top[band][mode],
                      same_set[band][mode], compared[band][mode]);
          fprintf(jf, "]}\n");
          fclose(jf);
        }
      }
      free(tv); free(th); free(tt);
      (void)text_p95;
    }
    mdb_txn_abort(txn);
    sqlite3_finalize(q);
    free(mid); free(hi); free(tr); free(tf);
  }
  sqlite3_close(db);
  mdb_env_close(env);
  (void)out;
  return 0;
}
