/*
** search_c.c: the vector search algorithms at the C level, on the data
** of search_data (the same files hnswlib and FAISS read in
** search_anchor.py): the exact scan (flat), SQ8 codes scanned and
** re-ranked (quantizedFlat), and the diskANN graph (base/vgraph.c) over
** arrays in memory: its build rate, its recall and queries/s at several
** list sizes, its recall after 20 % of the items are replaced or deleted
** (beside a fresh build of what remains), and filtered searches (the
** graph widening past its list, and the exact scan of what an index
** finds; each filter's exact top K goes to DIR/truth_keepP.u32).  One query at a time, one thread, timed in CPU time.  Prints
** one JSON object per line.
**
** Usage: search_c DIR [K [DEGREE [BUILD_LIST]]]   (10 32 100)
*/

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/vec.h"
#include "base/vgraph.h"

static size_t N, Q, D, K = 10;
static float *base, *query;
static uint32_t *truth;              /* Q x 100 */

/* CPU time of the process (one thread): what a shared machine's load
** changes least; the anchors measure the same (search_anchor.py). */
static double now (void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *load (const char *dir, const char *name, size_t n) {
  char path[4096];
  FILE *f;
  void *p = malloc(n);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (!p || !(f = fopen(path, "rb")) || fread(p, 1, n, f) != n) {
    fprintf(stderr, "search_c: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  return p;
}

/* Recall@K of one result list against the exact top K (ids). */
static size_t hits (const rg_vcand *r, size_t n, const uint32_t *exact) {
  size_t a, b, h = 0;
  for (a = 0; a < n && a < K; a++)
    for (b = 0; b < K; b++) if (r[a].id == exact[b]) { h++; break; }
  return h;
}


/*
** {=====================================================================
** The graph's storage: arrays
** ======================================================================
*/
typedef struct mem {
  uint32_t *adj;             /* N x RG_VG_MAX_DEGREE */
  uint8_t *nadj;
  uint8_t *codes;            /* N x D */
  uint8_t *live;
} mem;

static int m_get_adj (void *ud, uint32_t v, uint32_t *out, int *n) {
  mem *m = (mem *)ud;
  *n = m->nadj[v];
  memcpy(out, m->adj + (size_t)v * RG_VG_MAX_DEGREE, *n * sizeof(uint32_t));
  return 0;
}

static int m_put_adj (void *ud, uint32_t v, const uint32_t *a, int n) {
  mem *m = (mem *)ud;
  m->nadj[v] = (uint8_t)n;
  if (n) memcpy(m->adj + (size_t)v * RG_VG_MAX_DEGREE, a, n * sizeof(uint32_t));
  return 0;
}

static int m_get_code (void *ud, uint32_t v, const uint8_t **code) {
  mem *m = (mem *)ud;
  *code = m->live[v] ? m->codes + (size_t)v * D : NULL;
  return 0;
}

static int m_any (void *ud, uint32_t v, uint32_t *out) {
  mem *m = (mem *)ud;
  size_t i;
  *out = RG_VG_NONE;
  for (i = 0; i < N; i++) if (m->live[i] && i != v) { *out = (uint32_t)i; break; }
  return 0;
}

static void mem_init (mem *m) {
  m->adj = calloc(N * RG_VG_MAX_DEGREE, sizeof(uint32_t));
  m->nadj = calloc(N, 1);
  m->codes = malloc(N * D);
  m->live = calloc(N, 1);
  if (!m->adj || !m->nadj || !m->codes || !m->live) exit(1);
}

static void mem_free (mem *m) {
  free(m->adj); free(m->nadj); free(m->codes); free(m->live);
}
/* }===================================================================== */


/* The exact top K among candidates (re-ranked on the vectors). */
static size_t rerank (const float *q, const rg_vcand *c, size_t n,
                      const uint8_t *live, rg_vcand *out) {
  rg_vbest b;
  size_t i;
  rg_vbest_init(&b, out, K);
  for (i = 0; i < n; i++)
    if (!live || live[c[i].id])
      rg_vbest_offer(&b, rg_vl2_f32(q, base + (size_t)c[i].id * D, D), c[i].id);
  rg_vbest_sort(&b);
  return b.n;
}

/* The exact top K of query i among the live items (a fresh truth after
** deletes), or among those `keep` accepts. */
static void exact_top (size_t i, const uint8_t *live, const uint8_t *keep,
                       uint32_t *out) {
  rg_vcand mem[100];
  rg_vbest b;
  size_t j;
  rg_vbest_init(&b, mem, K);
  for (j = 0; j < N; j++)
    if ((!live || live[j]) && (!keep || keep[j]))
      rg_vbest_offer(&b, rg_vl2_f32(query + i * D, base + j * D, D), (uint32_t)j);
  rg_vbest_sort(&b);
  for (j = 0; j < K; j++) out[j] = j < b.n ? b.c[j].id : UINT32_MAX;
}

static int accept_keep (void *ud, uint32_t v) {
  return ((const uint8_t *)ud)[v];
}

/* Searches every query with list size L, re-ranking `rr` candidates. */
static void graph_run (rg_vgraph *g, const rg_sq8 *sq, size_t L, size_t rr,
                       const uint8_t *live, const uint32_t *exact,
                       const uint8_t *keep, const char *what, double keepf) {
  rg_vcand *cand = malloc(sizeof(rg_vcand) * (rr > L ? rr : L)), top[100];
  int16_t w[4096];
  rg_sq8q qq;
  size_t i, h = 0, n, m;
  double t = now();
  uint64_t reads = g->adj_reads, codes = g->codes_read;
  for (i = 0; i < Q; i++) {
    rg_sq8_query(sq, query + i * D, w, &qq);
    rg_vgraph_search(g, &qq, L, rr, keep ? accept_keep : NULL, (void *)keep,
                     cand, &n);
    m = rerank(query + i * D, cand, n, live, top);
    h += hits(top, m, exact + i * K);
  }
  t = now() - t;
  printf("{\"test\":\"%s\",\"list\":%zu,\"rerank\":%zu,\"keep\":%.3f,"
         "\"recall\":%.4f,\"qps\":%.0f,\"adj_reads\":%.1f,"
         "\"codes_read\":%.1f}\n", what, L, rr, keepf, h / (double)(Q * K),
         Q / t, (g->adj_reads - reads) / (double)Q,
         (g->codes_read - codes) / (double)Q);
  fflush(stdout);
  free(cand);
}

static void build (rg_vgraph *g, mem *m, const rg_sq8 *sq, const uint32_t *order,
                   size_t n, int degree, int blist, const char *what) {
  rg_vgio io = { m, m_get_adj, m_put_adj, m_get_code, m_any };
  size_t i;
  double t;
  rg_vgraph_init(g, &io, sq, degree, blist);
  t = now();
  for (i = 0; i < n; i++) {
    uint32_t v = order ? order[i] : (uint32_t)i;
    rg_sq8_encode(sq, base + (size_t)v * D, m->codes + (size_t)v * D);
    m->live[v] = 1;
    if (rg_vgraph_insert(g, v)) { fprintf(stderr, "insert failed\n"); exit(1); }
  }
  t = now() - t;
  {
    size_t edges = 0;
    for (i = 0; i < N; i++) edges += m->nadj[i];
    printf("{\"test\":\"%s\",\"vectors\":%zu,\"seconds\":%.2f,"
           "\"per_second\":%.0f,\"degree\":%d,\"build_list\":%d,"
           "\"mean_degree\":%.1f,\"graph_bytes_per_vector\":%.1f}\n", what,
           n, t, n / t, degree, blist, edges / (double)n,
           (2.0 * n + 4.0 * edges) / n);
    fflush(stdout);
  }
}

int main (int argc, char **argv) {
  char meta[256];
  FILE *f;
  size_t i, j;
  int degree = 32, blist = 100;
  float *lo;
  rg_sq8 sq;
  mem m;
  rg_vgraph g;
  uint8_t *codes_flat;
  uint32_t *exact;
  if (argc < 2) { fprintf(stderr, "usage: search_c DIR [K [DEGREE [L]]]\n"); return 2; }
  snprintf(meta, sizeof meta, "%s/meta.json", argv[1]);
  if (!(f = fopen(meta, "r")) || !fgets(meta, sizeof meta, f) ||
      sscanf(meta, "{\"n\":%zu,\"q\":%zu,\"dim\":%zu", &N, &Q, &D) != 3) {
    fprintf(stderr, "search_c: no meta.json in %s\n", argv[1]);
    return 1;
  }
  fclose(f);
  if (argc > 2) K = strtoul(argv[2], NULL, 10);
  if (argc > 3) degree = atoi(argv[3]);
  if (argc > 4) blist = atoi(argv[4]);
  base = load(argv[1], "base.f32", N * D * 4);
  query = load(argv[1], "query.f32", Q * D * 4);
  truth = load(argv[1], "truth.u32", Q * 100 * 4);
  exact = malloc(Q * K * sizeof(uint32_t));
  for (i = 0; i < Q; i++) memcpy(exact + i * K, truth + i * 100, K * 4);

  /* flat: the exact scan */
  {
    rg_vcand mem_[100];
    size_t h = 0;
    double t = now();
    for (i = 0; i < Q; i++) {
      rg_vbest b;
      rg_vbest_init(&b, mem_, K);
      for (j = 0; j < N; j++)
        rg_vbest_offer(&b, rg_vl2_f32(query + i * D, base + j * D, D), (uint32_t)j);
      rg_vbest_sort(&b);
      h += hits(b.c, b.n, exact + i * K);
    }
    t = now() - t;
    printf("{\"test\":\"flat\",\"recall\":%.4f,\"qps\":%.0f}\n",
           h / (double)(Q * K), Q / t);
    fflush(stdout);
  }

  /* SQ8 trained on the first 1,000 vectors, as the index does */
  lo = malloc(rg_sq8_floats(D) * sizeof(float));
  rg_sq8_init(&sq, D, RG_VD_EUCLIDEAN, lo);
  rg_sq8_train(&sq, base, N < 1000 ? N : 1000);

  /* quantizedFlat: every code scanned, K * mult re-ranked */
  codes_flat = malloc(N * D);
  for (j = 0; j < N; j++) rg_sq8_encode(&sq, base + j * D, codes_flat + j * D);
  {
    size_t mult[] = { 1, 2, 5, 10 };
    size_t mi;
    for (mi = 0; mi < 4; mi++) {
      rg_vcand *cand = malloc(sizeof(rg_vcand) * K * mult[mi]), top[100];
      int16_t w[4096];
      rg_sq8q qq;
      size_t h = 0;
      double t = now();
      for (i = 0; i < Q; i++) {
        rg_vbest b;
        rg_sq8_query(&sq, query + i * D, w, &qq);
        rg_vbest_init(&b, cand, K * mult[mi]);
        for (j = 0; j < N; j++)
          rg_vbest_offer(&b, rg_sq8_approx(&qq, codes_flat + j * D), (uint32_t)j);
        h += hits(top, rerank(query + i * D, b.c, b.n, NULL, top), exact + i * K);
      }
      t = now() - t;
      printf("{\"test\":\"quantizedFlat\",\"multiplier\":%zu,\"recall\":%.4f,"
             "\"qps\":%.0f,\"code_bytes\":%zu,\"vector_bytes\":%zu}\n",
             mult[mi], h / (double)(Q * K), Q / t, D, D * 4);
      fflush(stdout);
      free(cand);
    }
  }

  /* diskANN: build, then search at several list sizes */
  mem_init(&m);
  build(&g, &m, &sq, NULL, N, degree, blist, "diskANN build");
  {
    size_t lists[] = { 10, 20, 30, 40, 60, 100 };
    size_t li;
    for (li = 0; li < 6; li++)
      graph_run(&g, &sq, lists[li], lists[li], NULL, exact, NULL, "diskANN", 1);
  }

  /* filtered: the items whose number modulo 100 is below keep %, on the
  ** whole build (the anchor filters the same items) */
  {
    int keeps[] = { 1, 10, 50 };
    size_t ki, li, lists[][2] = { { 40, 10 }, { 40, 20 }, { 40, 40 } };
    uint8_t *keep = malloc(N);
    uint32_t *ftrue = malloc(Q * K * sizeof(uint32_t));
    for (ki = 0; ki < 3; ki++) {
      for (i = 0; i < N; i++) keep[i] = (int)(i % 100) < keeps[ki];
      for (i = 0; i < Q; i++) exact_top(i, NULL, keep, ftrue + i * K);
      {                               /* for search.lua's filtered queries */
        char path[4096];
        FILE *tf;
        snprintf(path, sizeof path, "%s/truth_keep%d.u32", argv[1], keeps[ki]);
        if ((tf = fopen(path, "wb")) == NULL ||
            fwrite(ftrue, sizeof(uint32_t), Q * K, tf) != Q * K || fclose(tf)) {
          fprintf(stderr, "search_c: cannot write %s\n", path);
          return 1;
        }
      }
      for (li = 0; li < 3; li++)
        graph_run(&g, &sq, lists[li][0], lists[li][1], NULL, ftrue, keep,
                  "diskANN filtered", keeps[ki] / 100.0);
      {                               /* what the planner does when an
                                         index serves the filter: the items
                                         it finds, scored exactly */
        uint32_t *ids = malloc(N * sizeof(uint32_t));
        size_t nids = 0, h = 0;
        double t;
        for (i = 0; i < N; i++) if (keep[i]) ids[nids++] = (uint32_t)i;
        t = now();
        for (i = 0; i < Q; i++) {
          rg_vcand mem_[100];
          rg_vbest b;
          rg_vbest_init(&b, mem_, K);
          for (j = 0; j < nids; j++)
            rg_vbest_offer(&b, rg_vl2_f32(query + i * D, base + (size_t)ids[j] * D, D),
                           ids[j]);
          rg_vbest_sort(&b);
          h += hits(b.c, b.n, ftrue + i * K);
        }
        t = now() - t;
        printf("{\"test\":\"filtered, index-served (exact)\",\"keep\":%.3f,"
               "\"recall\":%.4f,\"qps\":%.0f}\n", keeps[ki] / 100.0,
               h / (double)(Q * K), Q / t);
        fflush(stdout);
        free(ids);
      }
    }
    free(keep);
    free(ftrue);
  }

  /* 20 % of the items: 10 % replaced (deleted, inserted again with new
  ** values: the vector of another item, moved a little), 10 % deleted */
  {
    uint64_t s = 7;
    size_t changed = N / 5, del = 0, rep = 0;
    uint32_t *fresh = malloc(Q * K * sizeof(uint32_t)), *order;
    double t = now();
    for (i = 0; i < changed; i++) {
      uint32_t v;
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      v = (uint32_t)((s >> 33) % N);
      if (!m.live[v]) continue;
      if (rg_vgraph_delete(&g, v)) { fprintf(stderr, "delete failed\n"); return 1; }
      m.live[v] = 0;
      m.nadj[v] = 0;
      if (i % 2 == 0) {               /* replaced: a new vector in the slot */
        uint32_t o = (uint32_t)((s >> 13) % N);
        for (j = 0; j < D; j++)
          base[(size_t)v * D + j] = base[(size_t)o * D + j] + 0.01f * (float)((j % 7) - 3);
        rg_sq8_encode(&sq, base + (size_t)v * D, m.codes + (size_t)v * D);
        m.live[v] = 1;
        if (rg_vgraph_insert(&g, v)) { fprintf(stderr, "insert failed\n"); return 1; }
        rep++;
      } else del++;
    }
    t = now() - t;
    printf("{\"test\":\"diskANN updates\",\"replaced\":%zu,\"deleted\":%zu,"
           "\"per_second\":%.0f}\n", rep, del, (rep + del) / t);
    for (i = 0; i < Q; i++) exact_top(i, m.live, NULL, fresh + i * K);
    {
      size_t lists[] = { 20, 40, 60 };
      size_t li;
      for (li = 0; li < 3; li++)
        graph_run(&g, &sq, lists[li], lists[li], m.live, fresh, NULL,
                  "diskANN after updates", 1);
    }
    /* a fresh build of what remains, for comparison */
    order = malloc(N * sizeof(uint32_t));
    for (i = 0, j = 0; i < N; i++) if (m.live[i]) order[j++] = (uint32_t)i;
    {
      mem m2;
      rg_vgraph g2;
      size_t lists[] = { 20, 40, 60 };
      size_t li;
      mem_init(&m2);
      build(&g2, &m2, &sq, order, j, degree, blist, "diskANN fresh build");
      for (li = 0; li < 3; li++)
        graph_run(&g2, &sq, lists[li], lists[li], m2.live, fresh, NULL,
                  "diskANN fresh", 1);
      mem_free(&m2);
    }
    free(order);
    free(fresh);
  }
  mem_free(&m);
  free(codes_flat);
  free(lo);
  free(exact);
  free(base); free(query); free(truth);
  return 0;
}
