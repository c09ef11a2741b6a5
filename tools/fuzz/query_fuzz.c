/*
** query_fuzz.c: a libFuzzer target for the query parser and row pipeline.
**
** The input is query text, optionally preceded by one line of JSON that
** binds its parameters.  It is parsed as a query and as a patch filter;
** a query that parses and binds runs over a small set of documents held in
** memory (the pipeline of sql/exec.c, with a source that behaves like
** the storage scans: positions, phases, resuming; a query without FROM
** runs once), once unpaged and then page by page with pages of 1 and 3
** rows, resuming from each page's token payload.  The pages joined must
** equal the unpaged result, byte for byte, or the target aborts.  Its
** computed property (cp_low, LOWER of s) and its user-defined functions
** (udf.echo returns its first argument, udf.fail fails) exercise those
** interfaces; the grammar's whole reach (subqueries, GROUP BY, LIKE, the
** system functions) comes from the dictionary.  Functions of the clock and
** RAND make results differ between runs, so a query using them is run but
** its pages are not compared; neither are those of the full-text scores
** (marked nondeterministic to keep them out of computed properties), whose
** statistics come from a pass over the same documents.
**
** It links the sql and base archives (no Lua, no LMDB):
**   make fuzz FUZZ_SECONDS=60
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql/sql.h"

static const char *const docs[] = {
  "{\"id\":\"a\",\"pk\":\"p1\",\"n\":1,\"s\":\"Hello\",\"b\":true,\"z\":null,"
  "\"arr\":[1,2,3],\"v\":[1,0.5,-2],"
  "\"obj\":{\"x\":1,\"y\":\"two\"},\"tags\":[\"red\",\"blue\"],"
  "\"kids\":[{\"name\":\"k1\",\"age\":3},{\"name\":\"k2\",\"age\":7}]}",
  "{\"id\":\"b\",\"pk\":\"p2\",\"n\":2.5,\"s\":\"world\",\"b\":false,"
  "\"v\":[0,2,1],"
  "\"tags\":[\"green\"],\"kids\":[{\"name\":\"k3\",\"age\":5}]}",
  "{\"id\":\"c\",\"pk\":\"p1\",\"n\":-3,\"s\":\"h\\u00e9llo\\n\\\"q\\\"\","
  "\"tags\":[],\"kids\":[],\"deep\":{\"a\":{\"b\":{\"c\":[[1],[2,[3]]]}}}}",
  "{\"id\":\"d\",\"pk\":7,\"n\":\"12\",\"s\":\"\\u0000nul\",\"arr\":[],"
  "\"obj\":{},\"big\":12345678901234567890,\"f\":1e-7}",
  "{\"id\":\"e\",\"pk\":\"p3\",\"n\":null,\"s\":\"\\ud83d\\ude00 smile\","
  "\"tags\":[\"red\",\"red\"],\"arr\":[{\"x\":1},{\"x\":[1]}]}",
  "{\"id\":\"f\",\"pk\":\"p1\",\"n\":2,\"tags\":[\"blue\"],"
  "\"obj\":{\"y\":\"two\",\"x\":1}}",
};
#define NDOCS (sizeof(docs) / sizeof(docs[0]))

static const char default_params[] =
  "{\"a\":1,\"s\":\"red\",\"n\":2,\"arr\":[1,2],\"o\":{\"x\":1},\"z\":null,"
  "\"t\":true,\"k\":3}";

/* udf.echo(x) is x; udf.fail() fails the query; any other is unknown. */
static int udf_call (void *ud, const char *name, size_t n,
                     const char *const *args, const size_t *lens, int nargs,
                     rg_buf *out, rg_err *e) {
  (void)ud;
  if (n == 4 && memcmp(name, "echo", 4) == 0) {
    if (nargs > 0 && args[0]) rg_buf_add(out, args[0], lens[0]);
    return 0;
  }
  if (n == 4 && memcmp(name, "fail", 4) == 0)
    return rg_fail(e, 400, "udf.fail failed");
  return rg_fail(e, 404, "no such function");
}

static const rg_qudf udfs = { NULL, udf_call };

/* Full-text statistics: a pass over the documents, as the store's. */
static int text_lang (void *ud, const char *path, size_t n) {
  (void)ud;
  return n == 2 && memcmp(path, "/s", 2) == 0 ? 3 : -1;   /* fr-FR */
}

static int text_stats (void *ud, const char *path, size_t n, int lang,
                       const char *const *terms, const size_t *lens,
                       int nterms, uint64_t *ndocs, uint64_t *tokens,
                       uint64_t *df, rg_err *e) {
  rg_ftacc *a;
  size_t i;
  (void)ud;
  if (rg_ftacc_new(&a, path, n, lang, terms, lens, nterms))
    return rg_fail(e, 500, "out of memory");
  for (i = 0; i < NDOCS; i++)
    if (rg_ftacc_doc(a, docs[i], strlen(docs[i]))) {
      rg_ftacc_free(a);
      return rg_fail(e, 500, "out of memory");
    }
  rg_ftacc_result(a, ndocs, tokens, df);
  rg_ftacc_free(a);
  return 0;
}

static const rg_qtext texts = { NULL, text_lang, text_stats };
static rg_qcomputed computed[1];

/* One page: feeds the documents from where the token left off. */
static int run_page (const rg_query *q, const rg_qv *params, int mode,
                     long page, rg_buf *payload, rg_buf *rows, size_t *count,
                     rg_buf *out_payload) {
  rg_qexec *x = NULL;
  rg_err e;
  uint8_t pos[NDOCS][4];
  int phase = 0, rc;
  const uint8_t *rpos, *rokey;
  size_t rposlen = 0, roklen, i, start = 0;
  rg_buf offs;
  rg_buf_init(&offs);
  rc = rg_qexec_new(&x, q, params, mode, 0, page,
                    payload ? (const uint8_t *)payload->p : NULL,
                    payload ? payload->n : 0, &e);
  if (rc) { rg_qexec_free(x); rg_buf_free(&offs); return rc; }
  rg_qexec_udf(x, &udfs);
  rg_qexec_text(x, &texts);
  if (computed[0].q) rg_qexec_computed(x, computed, 1);
  if (rg_qexec_resume(x, &phase, &rpos, &rposlen, &rokey, &roklen) &&
      rposlen == 4)
    start = rg_get_u32(rpos);        /* like a cursor seek: inclusive */
  if (q->blk[0].nsrc == 0) {         /* no FROM: one row */
    rc = rg_qexec_once(x, &e);
    if (rc == 1) rc = 0;
    start = NDOCS;
  }
  for (i = start; i < NDOCS; i++) {
    rg_qdoc d;
    memset(&d, 0, sizeof(d));
    rg_put_u32(pos[i], (uint32_t)i);
    d.text = docs[i];
    d.len = strlen(docs[i]);
    d.hash = (uint64_t)(i * 2654435761u);
    d.digest = (uint64_t)i;
    d.pos = pos[i];
    d.poslen = 4;
    rc = rg_qexec_doc(x, &d, &e);
    if (rc == 1) { rc = 0; break; }
    if (rc) break;
  }
  if (rc == 0) rc = rg_qexec_finish(x, rows, &offs, count, out_payload, &e);
  rg_qexec_free(x);
  rg_buf_free(&offs);
  return rc;
}

/* Joins a page's rows (the text of an array) to `all`. */
static void append_rows (rg_buf *all, const rg_buf *rows) {
  if (rows->n <= 2) return;
  if (all->n) rg_buf_addc(all, ',');
  rg_buf_add(all, rows->p + 1, rows->n - 2);
}

static void run_query (const rg_query *q, const rg_qv *params) {
  int mode = rg_query_mode(q);
  rg_buf rows, tok, all, want;
  size_t count = 0;
  long sizes[2] = { 1, 3 };
  int k;
  rg_buf_init(&rows);
  rg_buf_init(&tok);
  rg_buf_init(&want);
  if (run_page(q, params, mode, 0, NULL, &rows, &count, &tok) != 0) goto done;
  if (tok.n != 0) abort();           /* an unpaged query needs no token */
  if (q->nondet) goto done;          /* the clock moves between runs */
  append_rows(&want, &rows);
  for (k = 0; k < 2; k++) {
    rg_buf payload;
    int pages = 0;
    rg_buf_init(&all);
    rg_buf_init(&payload);
    for (;;) {
      rows.n = 0;
      tok.n = 0;
      count = 0;
      if (run_page(q, params, mode, sizes[k], pages ? &payload : NULL, &rows,
                   &count, &tok) != 0)
        abort();                     /* a page of a good query failed */
      if (count > (size_t)sizes[k]) abort();
      append_rows(&all, &rows);
      if (tok.n == 0) break;
      payload.n = 0;
      rg_buf_add(&payload, tok.p, tok.n);
      if (++pages > 200) abort();    /* paging must end */
    }
    if (all.n != want.n || (all.n && memcmp(all.p, want.p, all.n) != 0)) {
      fprintf(stderr, "paged (%ld) and unpaged results differ:\n%.*s\n%.*s\n",
              sizes[k], (int)all.n, all.p, (int)want.n, want.p);
      abort();
    }
    rg_buf_free(&all);
    rg_buf_free(&payload);
  }
done:
  rg_buf_free(&rows);
  rg_buf_free(&tok);
  rg_buf_free(&want);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  const char *sql = (const char *)data, *ptext = default_params;
  size_t n = size, plen = sizeof(default_params) - 1;
  rg_query *q = NULL;
  rg_tape tape;
  rg_arena mem;
  rg_qv *params = NULL;
  rg_err e;
  char *filter;
  if (size > 0 && data[0] == '{') {  /* a first line of parameters */
    const char *nl = memchr(data, '\n', size);
    if (nl) {
      ptext = sql;
      plen = (size_t)(nl - sql);
      sql = nl + 1;
      n = size - plen - 1;
    }
  }
  /* the filter form takes a C string */
  if ((filter = (char *)malloc(n + 1)) != NULL) {
    memcpy(filter, sql, n);
    filter[n] = '\0';
    if (rg_query_parse(filter, strlen(filter), 1, &q, &e) == 0)
      rg_query_free(q);
    free(filter);
  }
  q = NULL;
  if (computed[0].q == NULL) {
    static const char cp[] = "SELECT VALUE LOWER(c.s) FROM c";
    rg_query *cq = NULL;
    if (rg_query_parse(cp, sizeof(cp) - 1, 0, &cq, &e) == 0) {
      computed[0].name = "cp_low";
      computed[0].nlen = 6;
      computed[0].q = cq;            /* kept for the process's life */
    }
  }
  if (rg_query_parse(sql, n, 0, &q, &e) != 0) return 0;
  if (computed[0].q) rg_query_computed(q, computed, 1);
  memset(&tape, 0, sizeof(tape));
  rg_arena_init(&mem);
  if (rg_query_bind(q, ptext, plen, &tape, &mem, &params, &e) == 0)
    run_query(q, params);
  rg_tape_free(&tape);
  rg_arena_free(&mem);
  rg_query_free(q);
  return 0;
}
