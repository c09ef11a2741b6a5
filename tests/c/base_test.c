/*
** base_test.c: the base and sql layers in plain C, linked with cJSON alone
** (no LMDB, no Lua): JSON text and trees, patches, tokens, charges, and the
** query dialect over documents held in memory.
**
** Run by `make test` (and `make layers`): build/<lua>/tests/base_test.
*/

#include <stdio.h>
#include <string.h>

#include "base/charge.h"
#include "base/json.h"
#include "base/patch.h"
#include "base/token.h"
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

int main (void) {
  test_json();
  test_patch();
  test_token();
  test_charge();
  test_sql();
  printf("base_test: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
