/*
** raw_lmdb.c: the rawest baseline for the item benchmarks.
**
** What a point read and a write cost with nothing but LMDB and cJSON:
**   read:   mdb_get in a (renewed) read transaction + cJSON_Parse of the
**           bytes + cJSON_Delete
**   write:  cJSON_Parse of the document + cJSON_PrintUnformatted +
**           mdb_put in its own write transaction + commit
** Usage: raw_lmdb DIR DOCFILE COUNT SYNC(full|none)
** Prints one JSON object of medians in microseconds.
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lmdb.h>
#include <cjson/cJSON.h>

static double now_us (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp (const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median (double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp);
  return v[n / 2];
}

#define CHECK(x) do { int rc_ = (x); if (rc_) { \
  fprintf(stderr, "%s: %s\n", #x, mdb_strerror(rc_)); exit(1); } } while (0)

int main (int argc, char **argv) {
  MDB_env *env;
  MDB_dbi dbi;
  MDB_txn *txn;
  char *doc, key[64];
  long n, i, rounds;
  FILE *f;
  size_t len;
  double *wt, *rt, t;
  int batch = 100;
  if (argc < 5) { fprintf(stderr, "usage: raw_lmdb DIR DOCFILE COUNT SYNC\n"); return 2; }
  f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 1; }
  fseek(f, 0, SEEK_END);
  len = (size_t)ftell(f);
  rewind(f);
  doc = malloc(len + 1);
  if (fread(doc, 1, len, f) != len) return 1;
  doc[len] = 0;
  fclose(f);
  n = atol(argv[3]);
  rounds = n / batch;
  CHECK(mdb_env_create(&env));
  CHECK(mdb_env_set_mapsize(env, (size_t)1 << 32));
  CHECK(mdb_env_open(env, argv[1], MDB_NOTLS |
        (strcmp(argv[4], "none") == 0 ? MDB_NOSYNC : 0), 0644));
  CHECK(mdb_txn_begin(env, NULL, 0, &txn));
  CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
  CHECK(mdb_txn_commit(txn));
  wt = calloc((size_t)rounds, sizeof(double));
  rt = calloc((size_t)rounds, sizeof(double));
  for (i = 0; i < rounds; i++) {          /* writes, one transaction each */
    int j;
    t = now_us();
    for (j = 0; j < batch; j++) {
      cJSON *tree = cJSON_Parse(doc);
      char *text = cJSON_PrintUnformatted(tree);
      MDB_val k, v;
      snprintf(key, sizeof(key), "item-%08ld", i * batch + j);
      k.mv_data = key; k.mv_size = strlen(key);
      v.mv_data = text; v.mv_size = strlen(text);
      CHECK(mdb_txn_begin(env, NULL, 0, &txn));
      CHECK(mdb_put(txn, dbi, &k, &v, 0));
      CHECK(mdb_txn_commit(txn));
      free(text);
      cJSON_Delete(tree);
    }
    wt[i] = (now_us() - t) / batch;
  }
  CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
  mdb_txn_reset(txn);
  for (i = 0; i < rounds; i++) {          /* point reads */
    int j;
    t = now_us();
    for (j = 0; j < batch; j++) {
      MDB_val k, v;
      cJSON *tree;
      long at = (i * 7919 + j * 104729) % n;
      snprintf(key, sizeof(key), "item-%08ld", at);
      k.mv_data = key; k.mv_size = strlen(key);
      CHECK(mdb_txn_renew(txn));
      CHECK(mdb_get(txn, dbi, &k, &v));
      tree = cJSON_ParseWithLength(v.mv_data, v.mv_size);
      if (!tree) { fprintf(stderr, "parse failed\n"); return 1; }
      cJSON_Delete(tree);
      mdb_txn_reset(txn);
    }
    rt[i] = (now_us() - t) / batch;
  }
  mdb_txn_abort(txn);
  printf("{\"write_us\":%.3f,\"read_us\":%.3f,\"bytes\":%lu}\n",
         median(wt, (int)rounds), median(rt, (int)rounds), (unsigned long)len);
  mdb_env_close(env);
  return 0;
}
