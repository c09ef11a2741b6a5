/*
** vector_fuzz.c: a libFuzzer target for the vector layer (base/vec.c) and
** the diskANN graph (base/vgraph.c).
**
** The input is a small program.  Its first bytes choose the dimensions
** (1-24), the similarity, the graph's degree (2-12) and build list, then
** each 1 + D bytes are an operation: insert a vector (the bytes as
** elements, scaled) into a free slot, delete a live slot, or search for a
** vector.  After every operation the graph's invariants are checked (no
** list names its own node or an id twice, none holds more than the
** degree, the entry point is live while any node is), and every search
** result is live and ordered.  Beside it, the elements and kernels: a
** float16 round trip is stable, every element type puts back what it
** gets, and the scores of a pair are finite or absent, never NaN.
**
** It links the base archive alone:  make fuzz FUZZ_SECONDS=60
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "base/vgraph.h"

#define MAXN 64
#define MAXD 24

#define CHECK(cond, what) \
  do { if (!(cond)) { fprintf(stderr, "check failed: %s (%s:%d)\n", what, \
                              __FILE__, __LINE__); abort(); } } while (0)

static uint32_t adj[MAXN][RG_VG_MAX_DEGREE];
static int nadj[MAXN];
static uint8_t codes[MAXN][MAXD], live[MAXN];
static int dims;

static int get_adj (void *ud, uint32_t v, uint32_t *out, int *n) {
  (void)ud;
  CHECK(v < MAXN, "an id the graph never had");
  *n = nadj[v];
  memcpy(out, adj[v], (size_t)*n * sizeof(uint32_t));
  return 0;
}

static int put_adj (void *ud, uint32_t v, const uint32_t *a, int n) {
  (void)ud;
  CHECK(v < MAXN && n >= 0 && n <= RG_VG_MAX_DEGREE, "a bad list written");
  nadj[v] = n;
  if (n) memcpy(adj[v], a, (size_t)n * sizeof(uint32_t));
  return 0;
}

static int get_code (void *ud, uint32_t v, const uint8_t **code) {
  (void)ud;
  CHECK(v < MAXN, "an id the graph never had");
  *code = live[v] ? codes[v] : NULL;
  return 0;
}

static int any (void *ud, uint32_t v, uint32_t *out) {
  uint32_t i;
  (void)ud;
  *out = RG_VG_NONE;
  for (i = 0; i < MAXN; i++) if (live[i] && i != v) { *out = i; break; }
  return 0;
}

static void check_graph (const rg_vgraph *g) {
  int v, j, k, any = 0;
  for (v = 0; v < MAXN; v++) {
    if (!live[v]) continue;
    any = 1;
    CHECK(nadj[v] <= g->max_degree, "a list past the degree");
    for (j = 0; j < nadj[v]; j++) {
      CHECK(adj[v][j] != (uint32_t)v, "a node is its own neighbour");
      CHECK(adj[v][j] < MAXN, "a neighbour out of range");
      for (k = 0; k < j; k++) CHECK(adj[v][k] != adj[v][j], "a repeated edge");
    }
  }
  CHECK(!any || (g->entry < MAXN && live[g->entry]), "the entry is not live");
}

static void elements (const uint8_t *p, size_t n) {
  size_t i;
  for (i = 0; i + 4 <= n; i += 4) {
    float f;
    uint16_t h, h2;
    double back;
    int t;
    memcpy(&f, p + i, 4);
    h = rg_float_to_half(f);
    if ((h & 0x7c00) != 0x7c00) {     /* finite: a round trip is stable */
      h2 = rg_float_to_half(rg_half_to_float(h));
      CHECK(h2 == h, "float16 round trip");
    }
    for (t = 0; t < RG_VT_COUNT; t++) {
      uint8_t buf[8];
      if (rg_vput(t, buf, 0, (double)f) == 0) {
        back = rg_vget(t, buf, 0);
        CHECK(isfinite(back), "an element that is not finite");
        if (t == RG_VT_INT8 || t == RG_VT_UINT8 || t == RG_VT_FLOAT32)
          CHECK(back == (double)f, "an element changed");
      }
    }
  }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  rg_vgio io = { NULL, get_adj, put_adj, get_code, any };
  float lo[MAXD + 1], vecs[MAXN][MAXD], x[MAXD];
  rg_sq8 sq;
  rg_vgraph g;
  size_t pos = 4, i;
  int dist, d;
  elements(data, size);
  if (size < 4) return 0;
  dims = 1 + data[0] % MAXD;
  dist = data[1] % RG_VD_COUNT;
  memset(nadj, 0, sizeof nadj);
  memset(live, 0, sizeof live);
  rg_sq8_init(&sq, (size_t)dims, dist, lo);
  {                                   /* trained on the program's vectors */
    float sample[8][MAXD];
    size_t m = 0;
    for (i = pos; i + 1 + (size_t)dims <= size && m < 8; i += 1 + dims, m++)
      for (d = 0; d < dims; d++) sample[m][d] = (float)(int8_t)data[i + 1 + d] / 8;
    if (m && rg_sq8_train(&sq, &sample[0][0], m)) return 0;
  }
  rg_vgraph_init(&g, &io, &sq, 2 + data[2] % 11, 2 + data[3] % 24);
  while (pos + 1 + (size_t)dims <= size) {
    int op = data[pos] % 4;
    uint32_t slot = data[pos] / 4 % MAXN;
    for (d = 0; d < dims; d++) x[d] = (float)(int8_t)data[pos + 1 + d] / 8;
    pos += 1 + dims;
    if (op <= 1 && !live[slot]) {     /* insert */
      memcpy(vecs[slot], x, sizeof x);
      CHECK(rg_sq8_encode(&sq, x, codes[slot]) == 0, "encode");
      live[slot] = 1;
      CHECK(rg_vgraph_insert(&g, slot) == 0, "insert");
    } else if (op == 2 && live[slot]) {
      CHECK(rg_vgraph_delete(&g, slot) == 0, "delete");
      live[slot] = 0;
      nadj[slot] = 0;
    } else {                          /* search, and a pair's scores */
      int16_t w[MAXD];
      rg_sq8q qq;
      rg_vcand out[8];
      size_t n, k;
      rg_sq8_query(&sq, x, w, &qq);
      CHECK(rg_vgraph_search(&g, &qq, 8, 4, NULL, NULL, out, &n) == 0,
            "search");
      for (k = 0; k < n; k++) {
        rg_vsums s;
        double score;
        CHECK(out[k].id < MAXN && live[out[k].id], "a result not live");
        CHECK(k == 0 || out[k - 1].key <= out[k].key, "results out of order");
        rg_vsums_of(dist, RG_VT_FLOAT32, x, vecs[out[k].id], (size_t)dims,
                    -1, -1, &s);
        if (rg_vscore(dist, &s, &score) == 0)
          CHECK(isfinite(score), "a score that is not finite");
      }
    }
    check_graph(&g);
  }
  return 0;
}
