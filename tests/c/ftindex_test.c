/*
** ftindex_test.c: the full-text index (store/ftindex.c) against a brute
** force, over an ordered table held in memory (memkv.h, the rg_ftkv a test
** or a benchmark can use without storage).
**
** A seeded corpus of documents over a Zipf vocabulary is added, replaced
** and removed in transactions of random sizes; after each, the index's
** statistics, its top k (any and all of the terms, k from 1 to 50) and its
** document lists must equal what a scan of the live documents computes
** with the same pipeline and formula, score for score, and rg_fti_verify
** must find nothing.  A damaged block must then be found.
**
** Run by `make test`: build/<lua>/tests/ftindex_test.
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/ftindex.h"
#include "store/layout.h"
#include "memkv.h"

static int failures = 0, checks = 0;

#define CHECK(cond) \
  do { checks++; if (!(cond)) { failures++; \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
  } } while (0)

static uint64_t rng = 42;
static uint32_t rnd (void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng >> 33);
}

#define VOCAB 400
#define NDOC  1500
static char words[VOCAB][16];

static void make_words (void) {
  static const char *const syl[] = { "ka", "to", "mi", "ru", "se", "pa",
                                     "no", "li", "gu", "ve", "zo", "ba" };
  int i;
  for (i = 0; i < VOCAB; i++) {
    int n = 2 + i % 3, j, x = i;
    words[i][0] = '\0';
    for (j = 0; j < n; j++) { strcat(words[i], syl[x % 12]); x = x / 12 + j * 7; }
  }
}

/* A word of rank r with probability ~ 1/r. */
static int zipf (void) {
  double u = (rnd() + 0.5) / 4294967296.0;
  int r = (int)(VOCAB * u * u * u);
  return r < VOCAB ? r : VOCAB - 1;
}

static char *make_text (void) {
  int n = 1 + (int)(rnd() % 40), i;
  char *t = (char *)malloc((size_t)n * 17 + 1);
  t[0] = '\0';
  for (i = 0; i < n; i++) {
    strcat(t, words[zipf()]);
    strcat(t, i % 7 == 6 ? ". The " : " ");
  }
  return t;
}

static char *live[NDOC + 2];         /* text by doc number (NULL: none) */

/* Brute force: tf of each term and length of each live document. */
typedef struct bterm { const char *t; size_t n; } bterm;
typedef struct bdoc { uint32_t dl; uint32_t tf[8]; bterm *q; int nq; } bdoc;

static int count_tok (void *ud, const char *s, size_t n, uint32_t pos) {
  bdoc *d = (bdoc *)ud;
  int i;
  (void)pos;
  d->dl++;
  for (i = 0; i < d->nq; i++)
    if (d->q[i].n == n && memcmp(d->q[i].t, s, n) == 0) d->tf[i]++;
  return 0;
}

static int hit_order (const void *a, const void *b) {
  const rg_fti_hit *x = (const rg_fti_hit *)a, *y = (const rg_fti_hit *)b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->doc < y->doc ? -1 : x->doc > y->doc;
}

static rg_analyzer an;

static void check_queries (const rg_ftkv *kv) {
  rg_err e;
  int round;
  for (round = 0; round < 12; round++) {
    bterm q[3];
    const char *ts[3];
    size_t ls[3];
    int nq = 1 + round % 3, i, all = round % 2;
    uint64_t docs = 0, tokens = 0, df[3] = { 0, 0, 0 }, idocs, itokens,
             idf[3];
    rg_fti_hit *want = (rg_fti_hit *)malloc(NDOC * sizeof(rg_fti_hit));
    rg_fti_hit got[64];
    size_t nw = 0, ng, k;
    uint32_t d, *list = NULL;
    size_t nlist;
    double avgdl;
    double lidf[3];
    for (i = 0; i < nq; i++) {
      /* frequent and rare words alike; distinct */
      int w = round < 6 ? i * 3 : VOCAB / 4 + (int)(rnd() % (VOCAB / 2)) + i;
      q[i].t = words[w];
      q[i].n = strlen(words[w]);
      ts[i] = q[i].t;
      ls[i] = q[i].n;
    }
    for (d = 1; d <= NDOC; d++) {
      bdoc b;
      if (!live[d]) continue;
      memset(&b, 0, sizeof(b));
      b.q = q;
      b.nq = nq;
      rg_text_analyze(&an, 0, 1, live[d], strlen(live[d]), count_tok, &b);
      docs++;
      tokens += b.dl;
      for (i = 0; i < nq; i++) df[i] += b.tf[i] > 0;
    }
    CHECK(rg_fti_stats(kv, 7, ts, ls, nq, &idocs, &itokens, idf, &e) == 0);
    CHECK(idocs == docs && itokens == tokens);
    for (i = 0; i < nq; i++) CHECK(idf[i] == df[i]);
    avgdl = docs ? (double)tokens / (double)docs : 0;
    for (i = 0; i < nq; i++) lidf[i] = rg_bm25_idf(docs, df[i]);
    for (d = 1; d <= NDOC; d++) {
      bdoc b;
      double s = 0;
      int has = 0, every = 1;
      if (!live[d]) continue;
      memset(&b, 0, sizeof(b));
      b.q = q;
      b.nq = nq;
      rg_text_analyze(&an, 0, 1, live[d], strlen(live[d]), count_tok, &b);
      for (i = 0; i < nq; i++) {
        s += rg_bm25_term(lidf[i], b.tf[i], b.dl, avgdl);
        if (b.tf[i]) has = 1; else every = 0;
      }
      if (all ? every : has) {
        want[nw].doc = d;
        want[nw++].score = s;
      }
    }
    qsort(want, nw, sizeof(rg_fti_hit), hit_order);
    for (k = 1; k <= 50; k += 7) {
      size_t j;
      int same;
      CHECK(rg_fti_topk(kv, 7, ts, ls, nq, all, k, NULL, NULL, got, &ng,
                        NULL, &e) == 0);
      CHECK(ng == (nw < k ? nw : k));
      same = ng == (nw < k ? nw : k);
      for (j = 0; same && j < ng; j++)
        same = got[j].doc == want[j].doc && got[j].score == want[j].score;
      if (!same) {
        fprintf(stderr, "round %d (%s of %d terms), k %zu: index and brute "
                "force differ\n", round, all ? "all" : "any", nq, k);
        for (j = 0; j < ng && j < 5; j++)
          fprintf(stderr, "  got %u %.17g want %u %.17g\n", got[j].doc,
                  got[j].score, j < nw ? want[j].doc : 0,
                  j < nw ? want[j].score : 0);
      }
      CHECK(same);
    }
    CHECK(rg_fti_docs(kv, 7, ts, ls, nq, all, &list, &nlist, NULL, &e) == 0);
    {
      uint32_t *w2 = (uint32_t *)malloc((nw + 1) * sizeof(uint32_t));
      size_t j, x;
      int same = nlist == nw;
      for (j = 0; j < nw; j++) w2[j] = want[j].doc;
      /* ascending */
      for (j = 1; j < nw; j++)
        for (x = j; x > 0 && w2[x - 1] > w2[x]; x--) {
          uint32_t t = w2[x]; w2[x] = w2[x - 1]; w2[x - 1] = t;
        }
      for (j = 0; same && j < nw; j++) same = list[j] == w2[j];
      CHECK(same);
      free(w2);
    }
    free(list);
    free(want);
  }
}

int main (void) {
  memkv m;
  rg_ftkv kv;
  rg_fti_writer *w;
  rg_err e;
  int tx;
  uint32_t next = 1;
  make_words();
  rg_analyzer_init(&an);
  memkv_init(&m);
  memkv_iface(&m, &kv);
  CHECK(rg_fti_writer_new(&w, &kv, 7, 0) == 0);
  for (tx = 0; tx < 60; tx++) {
    int ops = 1 + (int)(rnd() % (tx < 20 ? 120 : 30)), o;
    for (o = 0; o < ops; o++) {
      uint32_t r = rnd() % 10;
      if (r < 6 || next < 20) {                  /* create */
        if (next > NDOC) continue;
        live[next] = make_text();
        CHECK(rg_fti_add(w, next, live[next], strlen(live[next])) == 0);
        next++;
      }
      else {
        uint32_t d = 1 + rnd() % (next - 1);
        if (!live[d]) continue;
        CHECK(rg_fti_remove(w, d, live[d], strlen(live[d])) == 0);
        free(live[d]);
        live[d] = NULL;
        if (r < 9) {                             /* replace */
          live[d] = make_text();
          CHECK(rg_fti_add(w, d, live[d], strlen(live[d])) == 0);
        }
      }
    }
    CHECK(rg_fti_flush(w, NULL, &e) == 0);
    if (tx % 10 == 9 || tx == 59) {
      if (rg_fti_verify(&kv, 7, &e)) fprintf(stderr, "verify: %s\n", e.msg);
      CHECK(rg_fti_verify(&kv, 7, &e) == 0);
      check_queries(&kv);
    }
  }
  /* a document whose text has no term: counted, with length 0 */
  live[next] = strdup("the of and");
  CHECK(rg_fti_add(w, next, live[next], strlen(live[next])) == 0);
  CHECK(rg_fti_flush(w, NULL, &e) == 0);
  CHECK(rg_fti_verify(&kv, 7, &e) == 0);
  check_queries(&kv);
  /* damage: a block's flag of the term's header flipped */
  {
    size_t i;
    int damaged = 0;
    for (i = 0; i < m.n && !damaged; i++)
      if (m.e[i].k[RG_FTEXT_HEAD - 1] == RG_FK_POSTINGS) {
        m.e[i].v[0] ^= 1;
        damaged = 1;
      }
    CHECK(damaged);
    CHECK(rg_fti_verify(&kv, 7, &e) == 500);
  }
  rg_fti_writer_free(w);
  memkv_free(&m);
  {
    uint32_t d;
    for (d = 1; d <= NDOC + 1; d++) free(live[d]);
  }
  rg_analyzer_free(&an);
  printf("ftindex_test: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
