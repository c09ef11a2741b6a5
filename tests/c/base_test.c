/*
** base_test.c: the base and sql layers in plain C, linked with cJSON alone
** (no LMDB, no Lua): JSON text and trees, patches, tokens, charges, vectors,
** and the query dialect over documents held in memory.
**
** Run by `make test` (and `make layers`): build/<lua>/tests/base_test.
*/

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "base/charge.h"
#include "base/json.h"
#include "base/patch.h"
#include "base/token.h"
#include "base/vec.h"
#include "base/vgraph.h"
#include "sql/sql.h"

static int failures = 0, checks = 0;

#define CHECK(cond) \
  do { checks++; if (!(cond)) { failures++; \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
  } } while (0)

/* Parses, prints and compares with `want` (NULL: the text itself). */
static void round_trip (const char *text, const char *want) {
  cJSON *t = NULL;
  rg_buf b;
  rg_err e;
  rg_buf_init(&b);
  CHECK(rg_json_parse(text, strlen(text), &t, &e) == 0);
  if (t) rg_json_print(t, &b);
  if (!want) want = text;
  CHECK(b.n == strlen(want) && memcmp(b.p, want, b.n) == 0);
  cJSON_Delete(t);
  rg_buf_free(&b);
}

static void test_json (void) {
  cJSON *t = NULL;
  rg_err e;
  int64_t i;
  round_trip("{\"a\":[1,2.5,\"x\",null,true,{}]}", NULL);
  round_trip("9223372036854775807", NULL);          /* exact beyond 2^53 */
  round_trip("0.30000000000000004", NULL);
  round_trip("\"nul\\u0000byte\"", NULL);
  round_trip(" [ 1 , 2 ] ", "[1,2]");
  CHECK(rg_json_parse("[1,]", 4, &t, &e) == 400);
  CHECK(strstr(e.msg, "byte 4") != NULL);
  CHECK(rg_json_parse("\"\xff\"", 3, &t, &e) == 400);    /* not UTF-8 */
  CHECK(rg_json_parse("9223372036854775807", 19, &t, &e) == 0);
  CHECK(rg_num_int(t, &i) == 1 && i == INT64_MAX);
  cJSON_Delete(t);
}

static void test_patch (void) {
  cJSON *doc = cJSON_Parse("{\"n\":1,\"a\":[1,2]}");
  cJSON *v = cJSON_CreateNumber(5), *s = cJSON_CreateString("z");
  rg_patch_op ops[3];
  rg_buf b;
  rg_err e;
  memset(ops, 0, sizeof(ops));
  ops[0].op = RG_PATCH_INCR; ops[0].path = "/n"; ops[0].value = v;
  ops[1].op = RG_PATCH_ADD; ops[1].path = "/a/-"; ops[1].value = s;
  ops[2].op = RG_PATCH_REMOVE; ops[2].path = "/a/0";
  CHECK(rg_patch_apply(doc, ops, 3, &e) == 0);
  rg_buf_init(&b);
  rg_json_print(doc, &b);
  CHECK(b.n == 19 && memcmp(b.p, "{\"n\":6,\"a\":[2,\"z\"]}", 19) == 0);
  ops[0].op = RG_PATCH_REPLACE; ops[0].path = "/missing";
  CHECK(rg_patch_apply(doc, ops, 1, &e) == 400);
  rg_buf_free(&b);
  cJSON_Delete(doc);
  cJSON_Delete(v);
  cJSON_Delete(s);
}

static void test_token (void) {
  uint8_t secret[16] = { 1, 2, 3 }, other[16] = { 9 };
  rg_buf tok, pl;
  rg_err e;
  rg_buf_init(&tok);
  rg_buf_init(&pl);
  rg_token_make(secret, RG_TOKEN_QUERY, 42, "payload", 7, &tok);
  CHECK(rg_token_open(secret, RG_TOKEN_QUERY, 42, tok.p, tok.n, &pl, &e) == 0);
  CHECK(pl.n == 7 && memcmp(pl.p, "payload", 7) == 0);
  CHECK(rg_token_open(secret, RG_TOKEN_QUERY, 43, tok.p, tok.n, &pl, &e) ==
        400);
  CHECK(rg_token_open(other, RG_TOKEN_QUERY, 42, tok.p, tok.n, &pl, &e) ==
        400);
  CHECK(rg_token_open(secret, RG_TOKEN_FEED, 42, tok.p, tok.n, &pl, &e) ==
        400);
  CHECK(rg_token_open(secret, RG_TOKEN_QUERY, 42, tok.p, tok.n - 1, &pl,
                      &e) == 400);
  rg_buf_free(&tok);
  rg_buf_free(&pl);
}

static void test_charge (void) {
  rg_work w;
  memset(&w, 0, sizeof(w));
  w.read_units = rg_read_units(1024);
  CHECK(rg_charge(&w) == 1.0);
  w.read_units = rg_read_units(1025);
  CHECK(rg_charge(&w) == 2.0);
}

/* A storage call's errno as a status: no room is 507 (a full disk or
** quota: the one failure a user can fix), anything else 500. */
static void test_room (void) {
  CHECK(rg_room_status(ENOSPC) == 507);
  CHECK(rg_room_status(EDQUOT) == 507);
  CHECK(rg_room_status(EIO) == 500);
  CHECK(rg_room_status(EACCES) == 500);
  CHECK(rg_room_status(0) == 500);
}

/* The dialect over documents fed by hand, as the store's sources do. */
static void test_sql (void) {
  static const char *const docs[] = {
    "{\"id\":\"a\",\"n\":3,\"tags\":[\"x\",\"y\"]}",
    "{\"id\":\"b\",\"n\":1,\"tags\":[]}",
    "{\"id\":\"c\",\"n\":2}",
  };
  rg_query *q = NULL;
  rg_qexec *x = NULL;
  rg_buf rows, offs, tok;
  size_t count = 0;
  rg_err e;
  int i, pass;
  const char *sql = "SELECT VALUE c.id FROM c WHERE c.n >= 2 ORDER BY c.n";
  cJSON *doc;
  rg_buf_init(&rows);
  rg_buf_init(&offs);
  rg_buf_init(&tok);
  CHECK(rg_query_parse(sql, strlen(sql), 0, &q, &e) == 0);
  CHECK(rg_qexec_new(&x, q, NULL, RG_QX_SORT, 0, 0, NULL, 0, &e) == 0);
  for (i = 0; x && i < 3; i++) {
    rg_qdoc d;
    memset(&d, 0, sizeof(d));
    d.text = docs[i];
    d.len = strlen(docs[i]);
    d.digest = (uint64_t)i;
    CHECK(rg_qexec_doc(x, &d, &e) == 0);
  }
  CHECK(x && rg_qexec_finish(x, &rows, &offs, &count, &tok, &e) == 0);
  CHECK(count == 2 && rows.n == 9 && memcmp(rows.p, "[\"c\",\"a\"]", 9) == 0);
  rg_qexec_free(x);
  rg_query_free(q);
  CHECK(rg_query_parse("SELECT * FROM c WHERE", 21, 0, &q, &e) == 400);
  CHECK(strstr(e.msg, "1:") != NULL);
  doc = cJSON_Parse(docs[0]);
  CHECK(rg_filter_eval("FROM c WHERE ARRAY_CONTAINS(c.tags, 'y')", doc, &pass,
                       &e) == 0 && pass == 1);
  CHECK(rg_filter_eval("FROM c WHERE c.n = 4", doc, &pass, &e) == 0 &&
        pass == 0);
  CHECK(rg_filter_eval("FROM c WHERE c.n = @n", doc, &pass, &e) == 400);
  cJSON_Delete(doc);
  rg_buf_free(&rows);
  rg_buf_free(&offs);
  rg_buf_free(&tok);
}

/* Vectors: elements, kernels against sums in double, scores, SQ8 codes,
** the best-k list. */
static void test_vec (void) {
  float a[37], b[37], u[4] = { 1, 2, 3, 4 };
  double dot = 0, l2 = 0, s;
  int8_t i8a[3] = { 1, -2, 3 }, i8b[3] = { 4, 5, -6 };
  uint8_t code[37];
  float mem[38], w[37];
  int16_t qm[37];
  rg_sq8 q;
  rg_sq8q qq;
  rg_vsums sums;
  rg_vcand cm[3];
  rg_vbest best;
  int i;
  CHECK(rg_vtype_parse("Float16", 7) == RG_VT_FLOAT16);
  CHECK(rg_vdist_parse("DotProduct", 10) == RG_VD_DOTPRODUCT);
  CHECK(rg_vdist_parse("manhattan", 9) == -1);
  CHECK(rg_float_to_half(1.0f) == 0x3c00 && rg_half_to_float(0x3c00) == 1.0f);
  CHECK(rg_half_to_float(rg_float_to_half(65504.0f)) == 65504.0f);
  CHECK(rg_half_to_float(0x0001) == 5.9604644775390625e-8f);
  CHECK(rg_float_to_half(1.00048828125f) == 0x3c00);   /* a tie: even */
  CHECK(rg_vput(RG_VT_FLOAT16, w, 0, 70000.0) == -1);
  CHECK(rg_vput(RG_VT_INT8, w, 0, 128) == -1 &&
        rg_vput(RG_VT_INT8, w, 0, 1.5) == -1 &&
        rg_vput(RG_VT_INT8, w, 0, -128) == 0);
  CHECK(rg_vput(RG_VT_UINT8, w, 0, -1) == -1 &&
        rg_vput(RG_VT_UINT8, w, 0, 255) == 0);
  for (i = 0; i < 37; i++) {
    a[i] = (float)(i % 7) - 3.0f;
    b[i] = (float)((i * 5) % 11) * 0.5f;
    dot += (double)a[i] * b[i];
    l2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
  }
  CHECK(rg_vdot_f32(a, b, 37) == (float)dot);     /* small integers: exact */
  CHECK(rg_vl2_f32(a, b, 37) == (float)l2);
  CHECK(rg_vdot_i8(i8a, i8b, 3) == 4 - 10 - 18);
  CHECK(rg_vl2_i8(i8a, i8b, 3) == 9 + 49 + 81);
  rg_vsums_of(RG_VD_COSINE, RG_VT_FLOAT32, u, u, 4, -1, -1, &sums);
  CHECK(rg_vscore(RG_VD_COSINE, &sums, &s) == 0 && s == 1.0);
  rg_vsums_of(RG_VD_EUCLIDEAN, RG_VT_INT8, i8a, i8b, 3, -1, -1, &sums);
  CHECK(rg_vscore(RG_VD_EUCLIDEAN, &sums, &s) == 0 && s == (float)sqrt(139.0));
  memset(w, 0, sizeof w);
  rg_vsums_of(RG_VD_COSINE, RG_VT_FLOAT32, u, w, 4, -1, -1, &sums);
  CHECK(rg_vscore(RG_VD_COSINE, &sums, &s) == -1);   /* a zero vector */
  /* SQ8: a code ranks close vectors first */
  rg_sq8_init(&q, 37, RG_VD_EUCLIDEAN, mem);
  {
    float both[74];
    memcpy(both, a, sizeof a);
    memcpy(both + 37, b, sizeof b);
    CHECK(rg_sq8_train(&q, both, 2) == 0);
  }
  CHECK(rg_sq8_encode(&q, a, code) == 0);
  rg_sq8_query(&q, a, qm, &qq);                /* 4 * l2 in half steps */
  CHECK(rg_sq8_approx(&qq, code) * q.step * q.step / 4 < 0.001 * l2);
  rg_sq8_query(&q, b, qm, &qq);
  CHECK(fabs(rg_sq8_approx(&qq, code) * q.step * q.step / 4 - l2) <
        0.01 * l2);
  rg_vbest_init(&best, cm, 3);
  CHECK(rg_vbest_offer(&best, 5, 1) && rg_vbest_offer(&best, 3, 2) &&
        rg_vbest_offer(&best, 5, 0) && rg_vbest_offer(&best, 1, 3));
  CHECK(!rg_vbest_offer(&best, 9, 4) && rg_vbest_bound(&best) == 5);
  rg_vbest_sort(&best);
  CHECK(best.n == 3 && best.c[0].id == 3 && best.c[1].id == 2 &&
        best.c[2].id == 0);
}

/* The diskANN graph over arrays: exact neighbours found on a small set,
** the lists' invariants kept through inserts and deletes. */
#define TG_N 400
#define TG_D 8
static uint32_t tg_adj[TG_N][RG_VG_MAX_DEGREE];
static int tg_nadj[TG_N];
static uint8_t tg_code[TG_N][TG_D], tg_live[TG_N];

static int tg_get_adj (void *ud, uint32_t v, uint32_t *out, int *n) {
  (void)ud;
  *n = tg_nadj[v];
  memcpy(out, tg_adj[v], (size_t)*n * sizeof(uint32_t));
  return 0;
}

static int tg_put_adj (void *ud, uint32_t v, const uint32_t *a, int n) {
  (void)ud;
  tg_nadj[v] = n;
  if (n) memcpy(tg_adj[v], a, (size_t)n * sizeof(uint32_t));
  return 0;
}

static int tg_get_code (void *ud, uint32_t v, const uint8_t **code) {
  (void)ud;
  *code = tg_live[v] ? tg_code[v] : NULL;
  return 0;
}

static int tg_any (void *ud, uint32_t v, uint32_t *out) {
  uint32_t i;
  (void)ud;
  *out = RG_VG_NONE;
  for (i = 0; i < TG_N; i++) if (tg_live[i] && i != v) { *out = i; break; }
  return 0;
}

static int tg_keep (void *ud, uint32_t v) {
  (void)ud;
  return v % 20 == 1;
}

static int tg_none (void *ud, uint32_t v) {
  (void)ud;
  (void)v;
  return 0;
}

/* The best k live nodes tg_keep keeps, by code: a scan. */
static void tg_scan (const rg_sq8q *qq, rg_vbest *scan, rg_vcand *mem,
                     size_t k) {
  uint32_t u;
  rg_vbest_init(scan, mem, k);
  for (u = 0; u < TG_N; u++)
    if (tg_live[u] && tg_keep(NULL, u))
      rg_vbest_offer(scan, rg_sq8_approx(qq, tg_code[u]), u);
  rg_vbest_sort(scan);
}

static void test_vgraph (void) {
  rg_vgio io = { NULL, tg_get_adj, tg_put_adj, tg_get_code, tg_any };
  float lo[TG_D + 1], x[TG_N][TG_D];
  rg_sq8 sq;
  rg_vgraph g;
  uint32_t s = 1, v;
  int i, j, k, bad = 0, found = 0;
  for (v = 0; v < TG_N; v++)
    for (j = 0; j < TG_D; j++) {
      s = s * 1103515245u + 12345u;
      x[v][j] = (float)((s >> 16) % 1000) / 100.0f;
    }
  rg_sq8_init(&sq, TG_D, RG_VD_EUCLIDEAN, lo);
  CHECK(rg_sq8_train(&sq, &x[0][0], TG_N) == 0);
  rg_vgraph_init(&g, &io, &sq, 8, 32);
  for (v = 0; v < TG_N; v++) {
    rg_sq8_encode(&sq, x[v], tg_code[v]);
    tg_live[v] = 1;
    CHECK(rg_vgraph_insert(&g, v) == 0);
  }
  for (v = 0; v < TG_N; v += 3) {     /* a third deleted */
    CHECK(rg_vgraph_delete(&g, v) == 0);
    tg_live[v] = 0;
    tg_nadj[v] = 0;
  }
  for (v = 0; v < TG_N; v++) {
    if (!tg_live[v]) continue;
    bad += tg_nadj[v] > g.max_degree || tg_nadj[v] == 0;
    for (j = 0; j < tg_nadj[v]; j++) {
      bad += tg_adj[v][j] == v;
      for (k = 0; k < j; k++) bad += tg_adj[v][k] == tg_adj[v][j];
    }
  }
  CHECK(bad == 0);
  CHECK(g.entry != RG_VG_NONE && tg_live[g.entry]);
  for (v = 1; v < TG_N; v += 7) {     /* each live point finds itself */
    int16_t w[TG_D];
    rg_sq8q qq;
    rg_vcand out[4];
    size_t n;
    if (!tg_live[v]) continue;
    rg_sq8_query(&sq, x[v], w, &qq);
    CHECK(rg_vgraph_search(&g, &qq, 16, 4, NULL, NULL, out, &n) == 0);
    for (i = 0; i < (int)n; i++) found += out[i].id == v;
    for (i = 0; i < (int)n; i++) CHECK(tg_live[out[i].id]);
  }
  CHECK(found >= 36);                 /* of the 38 live ones probed */
  /* a filter keeping one node in 20: the search widens past its list
  ** until it holds the best k accepted (by code), as a scan of the codes
  ** finds them; a filter keeping none ends with none */
  found = 0;
  for (v = 2; v < TG_N; v += 9) {
    int16_t w[TG_D];
    rg_sq8q qq;
    rg_vcand out[4], mem[4];
    rg_vbest scan;
    size_t n;
    rg_sq8_query(&sq, x[v], w, &qq);
    tg_scan(&qq, &scan, mem, 4);
    CHECK(rg_vgraph_search(&g, &qq, 8, 4, tg_keep, NULL, out, &n) == 0);
    CHECK(n == 4);
    for (i = 0; i < (int)n; i++) {
      CHECK(tg_live[out[i].id] && tg_keep(NULL, out[i].id));
      CHECK(i == 0 || out[i - 1].key <= out[i].key);
      found += out[i].id == scan.c[i].id;
    }
    CHECK(rg_vgraph_search(&g, &qq, 8, 4, tg_none, NULL, out, &n) == 0);
    CHECK(n == 0);
  }
  CHECK(found >= 171);                /* 95 % of the 180 (45 probes x 4) */
  /* a search that goes on (rg_vgraph_search_more): widened three times it
  ** holds the best accepted as one search from the start would, measures
  ** no node twice, and reads no more of the graph than that search and
  ** the rounds before; one that accepts none reads nothing more when
  ** asked again (it has read the whole graph) */
  found = 0;
  for (v = 4; v < TG_N; v += 9) {
    static const size_t lists[3] = { 8, 8, 24 }, ks[3] = { 2, 4, 12 };
    int16_t w[TG_D];
    rg_sq8q qq;
    rg_vcand out[12], fresh[12], mem[12];
    rg_vbest scan;
    rg_vgsearch gs;
    size_t n, nf;
    uint64_t reads, codes, chain = 0;
    rg_sq8_query(&sq, x[v], w, &qq);
    tg_scan(&qq, &scan, mem, 12);
    memset(&gs, 0, sizeof(gs));
    codes = g.codes_read;
    for (k = 0; k < 3; k++) {
      reads = g.adj_reads;
      CHECK(rg_vgraph_search_more(&g, &gs, &qq, lists[k], ks[k], tg_keep,
                                  NULL, out, &n) == 0);
      chain += g.adj_reads - reads;
      CHECK(n == ks[k]);
      for (i = 0; i < (int)n; i++) {
        CHECK(tg_live[out[i].id] && tg_keep(NULL, out[i].id));
        CHECK(i == 0 || out[i - 1].key < out[i].key ||
              (out[i - 1].key == out[i].key && out[i - 1].id < out[i].id));
      }
    }
    CHECK(g.codes_read - codes <= TG_N);  /* each node measured once */
    for (i = 0; i < 12; i++) found += out[i].id == scan.c[i].id;
    reads = g.adj_reads;
    CHECK(rg_vgraph_search(&g, &qq, 24, 12, tg_keep, NULL, fresh, &nf) == 0);
    CHECK(nf == 12);
    CHECK(chain <= 2 * (g.adj_reads - reads));
    for (i = 0; i < 12; i++) CHECK(out[i].key <= fresh[i].key);
    rg_vgsearch_free(&gs);
    /* no filter, then one that takes none */
    CHECK(rg_vgraph_search_more(&g, &gs, &qq, 8, 4, NULL, NULL, out, &n) == 0);
    CHECK(n == 4 && tg_live[out[0].id]);
    CHECK(rg_vgraph_search_more(&g, &gs, &qq, 16, 8, NULL, NULL, out, &n) == 0);
    CHECK(n == 8);
    for (i = 1; i < 8; i++) CHECK(out[i - 1].key <= out[i].key);
    rg_vgsearch_free(&gs);
    CHECK(rg_vgraph_search_more(&g, &gs, &qq, 8, 4, tg_none, NULL, out,
                                &n) == 0 && n == 0);
    reads = g.adj_reads;
    CHECK(rg_vgraph_search_more(&g, &gs, &qq, 32, 16, tg_none, NULL, out,
                                &n) == 0 && n == 0);
    CHECK(g.adj_reads == reads);
    rg_vgsearch_free(&gs);
  }
  CHECK(found >= 513);                /* 95 % of the 540 (45 probes x 12) */
}

int main (void) {
  test_json();
  test_patch();
  test_token();
  test_charge();
  test_room();
  test_sql();
  test_vec();
  test_vgraph();
  printf("base_test: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
