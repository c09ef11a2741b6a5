/*
** text_fuzz.c: a libFuzzer target for the text pipeline of full-text
** search (sql/text.c) and the full-text functions over it (sql/fts.c).
**
** The first byte picks a language and the rest is text (any bytes: the
** pipeline must take invalid UTF-8).  Checked, or the target aborts:
**   - every term is valid UTF-8 of 1 to RG_TEXT_MAX_TOKEN bytes, is not a
**     stopword, and positions never go down;
**   - the analysis is a function of (language, text): twice the same;
**   - a term is at edit distance 0 from itself, the distance is
**     symmetric, and no distance exceeds its bound plus one;
**   - the text contains itself as a phrase (FullTextContains) whenever it
**     has a term, and its first term alone, through the query pipeline
**     (the text is passed as a parameter, as a user's would be).
**
**   make fuzz FUZZ_SECONDS=60
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql.h"
#include "sql/text.h"

#define CHECK(cond, what) \
  do { if (!(cond)) { fprintf(stderr, "check failed: %s\n", what); \
                      abort(); } } while (0)

typedef struct terms {
  rg_buf b;
  size_t n;
  uint32_t off[4096], len[4096], pos[4096];
  int lang;
} terms;

static int collect (void *ud, const char *s, size_t n, uint32_t pos) {
  terms *t = (terms *)ud;
  CHECK(n >= 1 && n <= RG_TEXT_MAX_TOKEN, "term length");
  CHECK(rg_utf8_valid(s, n), "term is UTF-8");
  if (t->n && pos < t->pos[t->n - 1]) CHECK(0, "positions ascend");
  if (t->n == 4096) return 1;
  t->off[t->n] = (uint32_t)t->b.n;
  t->len[t->n] = (uint32_t)n;
  t->pos[t->n] = pos;
  rg_buf_add(&t->b, s, n);
  t->n++;
  return 0;
}

static int unstemmed (void *ud, const char *s, size_t n, uint32_t pos) {
  int *lang = (int *)ud;
  (void)pos;
  CHECK(!rg_text_stopword(*lang, s, n), "no stopword comes out");
  return 0;
}

/* Runs SELECT VALUE FullTextContains(@t, @q) and returns its JSON. */
static void contains (const char *text, size_t n, const char *q, size_t qn,
                      rg_buf *out) {
  static const char sql[] = "SELECT VALUE FullTextContains(@t, @q)";
  rg_query *qq = NULL;
  rg_qexec *x = NULL;
  rg_tape tape = { NULL, 0, 0 };
  rg_arena a;
  rg_qv *params;
  rg_buf p, offs, tok;
  size_t count;
  rg_err e;
  rg_arena_init(&a);
  rg_buf_init(&p);
  rg_buf_init(&offs);
  rg_buf_init(&tok);
  rg_buf_adds(&p, "{\"t\":");
  rg_json_quote(&p, text, n);
  rg_buf_adds(&p, ",\"q\":");
  rg_json_quote(&p, q, qn);
  rg_buf_addc(&p, '}');
  CHECK(rg_query_parse(sql, sizeof(sql) - 1, 0, &qq, &e) == 0, "parses");
  if (rg_query_bind(qq, p.p, p.n, &tape, &a, &params, &e) == 0 &&
      rg_qexec_new(&x, qq, params, rg_query_mode(qq), 0, 0, NULL, 0,
                   &e) == 0 &&
      rg_qexec_once(x, &e) == 0)
    rg_qexec_finish(x, out, &offs, &count, &tok, &e);
  rg_qexec_free(x);
  rg_query_free(qq);
  rg_tape_free(&tape);
  rg_arena_free(&a);
  rg_buf_free(&p);
  rg_buf_free(&offs);
  rg_buf_free(&tok);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  static rg_analyzer an;
  static int ready;
  terms *t1, *t2;
  const char *s = (const char *)data + 1;
  size_t n = size ? size - 1 : 0, i;
  int lang;
  if (!ready) { rg_analyzer_init(&an); ready = 1; }
  if (size == 0) return 0;
  lang = data[0] % RG_LANG_COUNT;
  t1 = (terms *)calloc(1, sizeof(terms));
  t2 = (terms *)calloc(1, sizeof(terms));
  CHECK(t1 && t2, "memory");
  rg_buf_init(&t1->b);
  rg_buf_init(&t2->b);
  CHECK(rg_text_analyze(&an, lang, 1, s, n, collect, t1) >= 0, "analysis");
  rg_text_analyze(&an, lang, 1, s, n, collect, t2);
  CHECK(t1->n == t2->n && t1->b.n == t2->b.n &&
        (t1->b.n == 0 || memcmp(t1->b.p, t2->b.p, t1->b.n) == 0),
        "deterministic");
  rg_text_analyze(&an, lang, 0, s, n, unstemmed, &lang);
  for (i = 0; i + 1 < t1->n && i < 64; i++) {
    const char *a = t1->b.p + t1->off[i], *b = t1->b.p + t1->off[i + 1];
    int d1 = rg_text_edits(a, t1->len[i], b, t1->len[i + 1], 2);
    int d2 = rg_text_edits(b, t1->len[i + 1], a, t1->len[i], 2);
    CHECK(rg_text_edits(a, t1->len[i], a, t1->len[i], 2) == 0, "d(a,a) = 0");
    CHECK(d1 == d2, "symmetric");
    CHECK(d1 >= 0 && d1 <= 3, "bounded");
  }
  if (lang == RG_LANG_EN_US && t1->n > 0 && t1->n <= 256 &&
      rg_utf8_valid(s, n)) {
    rg_buf out;
    rg_buf_init(&out);
    contains(s, n, s, n, &out);
    CHECK(out.n == 6 && memcmp(out.p, "[true]", 6) == 0,
          "a text contains itself");
    out.n = 0;
    contains(s, n, t1->b.p, t1->len[0], &out);
    /* a stem searched again is analyzed again: Snowball's stems are not
    ** always fixed points, so only a crash or a non-boolean is wrong */
    CHECK(out.n == 0 || (out.n >= 6 && out.p[0] == '['), "a boolean");
    rg_buf_free(&out);
  }
  rg_buf_free(&t1->b);
  rg_buf_free(&t2->b);
  free(t1);
  free(t2);
  return 0;
}
