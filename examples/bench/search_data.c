/*
** search_data.c: the vector data of the search benchmark, made the same
** way on every machine from a seed.
**
** Base and query vectors come from one distribution: a mixture of 100
** Gaussians (standard normal centres, within-cluster sigma 0.35) in a
** 24-dimensional latent space, mapped to DIM dimensions by a random linear
** map (entries normal with variance 1/24), plus normal noise of sigma
** 0.05.  It is easier than real embeddings (its intrinsic dimension is
** low) and it is the data of docs/search.md's anchors.  The numbers come
** from splitmix64 and Marsaglia's polar method, so the files depend only
** on the seed and the sizes (and libm's log and sqrt, correctly rounded on
** the usual platforms).
**
** Usage: search_data DIR [N [Q [DIM [SEED]]]]   (100000 1000 128 42)
** Writes DIR/base.f32 (N x DIM float32, little-endian, row after row),
** DIR/query.f32 (Q x DIM), DIR/truth.u32 (Q x 100: the exact euclidean
** nearest neighbours of each query, nearest first, ties by lower number)
** and DIR/meta.json.
*/

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"

#define LATENT 24
#define CLUSTERS 100
#define TRUTH 100

static uint64_t state;

static uint64_t next64 (void) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform (void) {        /* (0, 1) */
  return ((double)(next64() >> 11) + 0.5) / 9007199254740992.0;
}

static double normal (void) {
  static int have = 0;
  static double spare;
  double u, v, s;
  if (have) { have = 0; return spare; }
  do {
    u = 2 * uniform() - 1;
    v = 2 * uniform() - 1;
    s = u * u + v * v;
  } while (s >= 1 || s == 0);
  s = sqrt(-2 * log(s) / s);
  spare = v * s;
  have = 1;
  return u * s;
}

static void write_file (const char *dir, const char *name, const void *p,
                        size_t n) {
  char path[4096];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "search_data: cannot write %s\n", path);
    exit(1);
  }
}

static void make (float *out, size_t n, size_t dim, const double *centres,
                  const double *map) {
  size_t i, j, k;
  double z[LATENT];
  for (i = 0; i < n; i++) {
    const double *c = centres + (next64() % CLUSTERS) * LATENT;
    for (k = 0; k < LATENT; k++) z[k] = c[k] + 0.35 * normal();
    for (j = 0; j < dim; j++) {
      double x = 0.05 * normal();
      for (k = 0; k < LATENT; k++) x += map[j * LATENT + k] * z[k];
      out[i * dim + j] = (float)x;
    }
  }
}

int main (int argc, char **argv) {
  size_t n = 100000, q = 1000, dim = 128, i, j;
  uint64_t seed = 42;
  double *centres, *map;
  float *base, *query;
  uint32_t *truth;
  char meta[256];
  rg_vcand *mem;
  if (argc < 2) {
    fprintf(stderr, "usage: search_data DIR [N [Q [DIM [SEED]]]]\n");
    return 2;
  }
  if (argc > 2) n = strtoul(argv[2], NULL, 10);
  if (argc > 3) q = strtoul(argv[3], NULL, 10);
  if (argc > 4) dim = strtoul(argv[4], NULL, 10);
  if (argc > 5) seed = strtoull(argv[5], NULL, 10);
  state = seed;
  centres = malloc(sizeof(double) * CLUSTERS * LATENT);
  map = malloc(sizeof(double) * dim * LATENT);
  base = malloc(sizeof(float) * n * dim);
  query = malloc(sizeof(float) * q * dim);
  truth = malloc(sizeof(uint32_t) * q * TRUTH);
  mem = malloc(sizeof(rg_vcand) * TRUTH);
  if (!centres || !map || !base || !query || !truth || !mem) return 1;
  for (i = 0; i < CLUSTERS * LATENT; i++) centres[i] = normal();
  for (i = 0; i < dim * LATENT; i++) map[i] = normal() / sqrt(LATENT);
  make(base, n, dim, centres, map);
  make(query, q, dim, centres, map);
  for (i = 0; i < q; i++) {          /* exact neighbours, by our kernel */
    rg_vbest best;
    rg_vbest_init(&best, mem, TRUTH);
    for (j = 0; j < n; j++)
      rg_vbest_offer(&best, rg_vl2_f32(query + i * dim, base + j * dim, dim),
                     (uint32_t)j);
    rg_vbest_sort(&best);
    for (j = 0; j < TRUTH; j++)
      truth[i * TRUTH + j] = j < best.n ? best.c[j].id : UINT32_MAX;
  }
  write_file(argv[1], "base.f32", base, sizeof(float) * n * dim);
  write_file(argv[1], "query.f32", query, sizeof(float) * q * dim);
  write_file(argv[1], "truth.u32", truth, sizeof(uint32_t) * q * TRUTH);
  snprintf(meta, sizeof meta,
           "{\"n\":%zu,\"q\":%zu,\"dim\":%zu,\"seed\":%llu,\"truth\":%d}\n",
           n, q, dim, (unsigned long long)seed, TRUTH);
  write_file(argv[1], "meta.json", meta, strlen(meta));
  free(centres); free(map); free(base); free(query); free(truth); free(mem);
  return 0;
}
