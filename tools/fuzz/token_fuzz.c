/*
** token_fuzz.c: a libFuzzer target for continuation tokens (base/token.c)
** and what decodes their payloads (store/feed.c's feed positions,
** sql/exec.c's query resume state).
**
** A token is base64url(version | kind | payload | mac), the mac keyed with
** the database's secret over the kind, a context and the payload.  The
** rule under test: a token is accepted only if it is, byte for byte, a
** token the database made for that kind and context; anything else is
** refused with 400, and nothing behind the mac crashes on a payload.  The
** first input byte picks a mode, the rest is its material:
**
**   0  arbitrary text offered as a query token and as a feed token (for a
**      few contexts and range counts): always 400;
**   1  a token made for a fuzzed payload, then altered as the input says
**      (a bit flipped, a character replaced, inserted or removed, the text
**      cut or extended, another kind or context asked for): accepted only
**      when the altered text is the very token made, for the same kind
**      and context, and then with the same payload;
**   2  a fuzzed payload behind a valid mac, decoded as feed positions: 0
**      or 400, and positions decoded re-encode to a token that decodes to
**      the same positions;
**   3  a fuzzed payload behind a valid mac, decoded as a query's resume
**      state by the row pipeline of a few queries (streamed, sorted,
**      aggregated, distinct), which then runs a page: 0 or 400.
**
** The feed's token context (feed.c's token_ctx) is computed here as feed.c
** does; the target checks that its own tokens equal rg_feed_token's, so a
** change there shows up as a failure here rather than as blind fuzzing.
**
** It links the store, sql and base archives (no Lua):
**   make fuzz FUZZ_SECONDS=60
*/

#include "fuzz_util.h"

#include "base/token.h"
#include "sql/sql.h"
#include "store/feed.h"

static uint8_t secret[16];
static rg_cspec spec;

static const char *const queries[] = {
  "SELECT * FROM c",
  "SELECT c.id FROM c WHERE c.n > 0 ORDER BY c.n DESC",
  "SELECT COUNT(1) AS n, SUM(c.n) AS s FROM c",
  "SELECT DISTINCT VALUE c.pk FROM c",
  "SELECT TOP 3 c.id, t FROM c JOIN t IN c.tags OFFSET 1 LIMIT 2",
  "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk",
};
#define NQUERIES (sizeof(queries) / sizeof(queries[0]))

static const char *const docs[] = {
  "{\"id\":\"a\",\"pk\":\"p1\",\"n\":1,\"tags\":[\"x\",\"y\"]}",
  "{\"id\":\"b\",\"pk\":\"p2\",\"n\":2.5,\"tags\":[]}",
  "{\"id\":\"c\",\"pk\":\"p1\",\"n\":-3,\"tags\":[\"z\"]}",
  "{\"id\":\"d\",\"pk\":7}",
};
#define NDOCS (sizeof(docs) / sizeof(docs[0]))

/* feed.c's token context: cid | token format. */
static uint64_t feed_ctx (void) {
  uint8_t buf[5];
  rg_put_u32(buf, spec.cid);
  buf[4] = 2;
  return rg_hash(buf, 5);
}

static void setup (void) {
  rg_fpos pos[3] = { { 1, 2 }, { 300, 0 }, { UINT64_MAX, 77 } };
  rg_buf a, b;
  int i;
  for (i = 0; i < 16; i++) secret[i] = (uint8_t)(i * 37 + 11);
  spec.cid = 42;
  spec.nparts = 3;
  /* the context computed here is feed.c's */
  rg_buf_init(&a);
  rg_buf_init(&b);
  rg_feed_token(secret, &spec, RG_FEED_ALL, 0, (const uint8_t *)"lp", 2, 3,
                pos, &a);
  {
    uint8_t pl[64];
    size_t n = 0;
    pl[n++] = RG_FEED_ALL;
    rg_put_u16(pl + n, 0);           /* every range */
    n += 2;
    rg_put_u16(pl + n, 2);           /* the partition filter "lp" */
    n += 2;
    pl[n++] = 'l';
    pl[n++] = 'p';
    rg_put_u16(pl + n, 3);
    n += 2;
    for (i = 0; i < 3; i++) {
      uint64_t v[2];
      int k;
      v[0] = pos[i].lsn;
      v[1] = pos[i].sub;
      for (k = 0; k < 2; k++) {
        while (v[k] >= 0x80) { pl[n++] = (uint8_t)(v[k] | 0x80); v[k] >>= 7; }
        pl[n++] = (uint8_t)v[k];
      }
    }
    rg_token_make(secret, RG_TOKEN_FEED, feed_ctx(), pl, n, &b);
  }
  FZ_CHECK(a.n == b.n && memcmp(a.p, b.p, a.n) == 0,
           "feed_ctx here no longer matches feed.c's token context");
  rg_buf_free(&a);
  rg_buf_free(&b);
}

/* Mode 0: arbitrary text is never a token. */
static void arbitrary (const char *s, size_t n) {
  static rg_feedtok ft;
  rg_buf pl;
  rg_err e;
  rg_buf_init(&pl);
  FZ_CHECK(rg_token_open(secret, RG_TOKEN_QUERY, 7, s, n, &pl, &e) == 400,
           "arbitrary text accepted as a query token");
  FZ_CHECK(rg_token_open(secret, RG_TOKEN_FEED, 7, s, n, &pl, &e) == 400,
           "arbitrary text accepted as a feed token");
  FZ_CHECK(rg_feed_untoken(secret, &spec, s, n, &ft, &e) == 400,
           "arbitrary text accepted as a feed continuation");
  rg_buf_free(&pl);
}

/* Mode 1: an altered token is refused unless it is the token made. */
static void altered (const uint8_t *d, size_t n) {
  static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  rg_buf tok, alt, pl;
  rg_err e;
  uint64_t ctx, actx;
  int kind, akind, rc;
  size_t at;
  if (n < 5) return;
  kind = d[0] & 1 ? RG_TOKEN_FEED : RG_TOKEN_QUERY;
  ctx = d[1];
  rg_buf_init(&tok);
  rg_buf_init(&alt);
  rg_buf_init(&pl);
  rg_token_make(secret, kind, ctx, d + 5, n - 5, &tok);
  FZ_CHECK(!tok.oom, "out of memory");
  /* the token made opens, with its payload */
  FZ_CHECK(rg_token_open(secret, kind, ctx, tok.p, tok.n, &pl, &e) == 0,
           "a token made is refused");
  FZ_CHECK(pl.n == n - 5 && (pl.n == 0 || memcmp(pl.p, d + 5, pl.n) == 0),
           "a token made opens to another payload");
  rg_buf_add(&alt, tok.p, tok.n);
  at = tok.n ? d[3] % tok.n : 0;
  akind = kind;
  actx = ctx;
  switch (d[2] % 8) {
    case 0: alt.p[at] ^= (char)(1 << (d[4] % 8)); break;
    case 1: alt.p[at] = b64[d[4] % 64]; break;
    case 2: alt.n = at; break;                              /* cut */
    case 3: rg_buf_addc(&alt, b64[d[4] % 64]); break;       /* extend */
    case 4:                                                 /* remove */
      memmove(alt.p + at, alt.p + at + 1, alt.n - at - 1);
      alt.n--;
      break;
    case 5:                                                 /* insert */
      rg_buf_addc(&alt, 0);
      memmove(alt.p + at + 1, alt.p + at, alt.n - at - 1);
      alt.p[at] = (char)d[4];
      break;
    case 6: akind = kind == RG_TOKEN_FEED ? RG_TOKEN_QUERY : RG_TOKEN_FEED;
      break;
    default: actx = ctx ^ ((uint64_t)1 << (d[4] % 64)); break;
  }
  rc = rg_token_open(secret, akind, actx, alt.p, alt.n, &pl, &e);
  FZ_CHECK(rc == 0 || rc == 400, "token status");
  if (rc == 0) {
    FZ_CHECK(akind == kind && actx == ctx,
             "a token was accepted for another kind or context");
    FZ_CHECK(alt.n == tok.n && memcmp(alt.p, tok.p, tok.n) == 0,
             "an altered token was accepted");
  }
  rg_buf_free(&tok);
  rg_buf_free(&alt);
  rg_buf_free(&pl);
}

/* Mode 2: a feed read (mode, range, filter, positions) from any payload
** behind a valid mac. */
static void feed_payload (const uint8_t *d, size_t n) {
  static rg_feedtok t, again;
  rg_buf tok, tok2;
  rg_err e;
  int rc, i;
  rg_buf_init(&tok);
  rg_buf_init(&tok2);
  rg_token_make(secret, RG_TOKEN_FEED, feed_ctx(), d, n, &tok);
  rc = rg_feed_untoken(secret, &spec, tok.p, tok.n, &t, &e);
  FZ_CHECK(rc == 0 || rc == 400, "feed token status");
  if (rc == 0) {
    FZ_CHECK((t.mode == RG_FEED_LATEST || t.mode == RG_FEED_ALL) &&
             t.range <= spec.nparts && !(t.range && t.lplen) &&
             t.n == (t.range || t.lplen ? 1 : spec.nparts),
             "a feed token decoded to a read that cannot be");
    rg_feed_token(secret, &spec, t.mode, t.range, t.lplen ? t.lp : NULL,
                  t.lplen, t.n, t.pos, &tok2);
    FZ_CHECK(rg_feed_untoken(secret, &spec, tok2.p, tok2.n, &again, &e) == 0,
             "a feed token made from a decoded read is refused");
    FZ_CHECK(again.mode == t.mode && again.range == t.range &&
             again.lplen == t.lplen && again.n == t.n &&
             memcmp(again.lp, t.lp, t.lplen) == 0,
             "a feed read does not survive a token");
    for (i = 0; i < t.n; i++)
      FZ_CHECK(again.pos[i].lsn == t.pos[i].lsn &&
               again.pos[i].sub == t.pos[i].sub,
               "feed positions do not survive a token");
  }
  rg_buf_free(&tok);
  rg_buf_free(&tok2);
}

/* Mode 3: a query's resume state from any payload behind the mac. */
static void query_payload (const uint8_t *d, size_t n) {
  static rg_query *q[NQUERIES];
  static int parsed;
  rg_qexec *x = NULL;
  rg_buf rows, offs, out;
  rg_err e;
  size_t count = 0, i, qi;
  int mode, rc;
  if (!parsed) {
    for (i = 0; i < NQUERIES; i++)
      FZ_CHECK(rg_query_parse(queries[i], strlen(queries[i]), 0, &q[i], &e)
               == 0, "a fixed query does not parse");
    parsed = 1;
  }
  if (n < 2) return;
  qi = d[0] % NQUERIES;
  mode = rg_query_mode(q[qi]);
  rg_buf_init(&rows);
  rg_buf_init(&offs);
  rg_buf_init(&out);
  rc = rg_qexec_new(&x, q[qi], NULL, mode, d[1] & 1, 1 + (d[1] >> 1 & 3),
                    d + 2, n - 2, &e);
  FZ_CHECK(rc == 0 || rc == 400, "resume status");
  if (rc == 0) {
    int phase;
    const uint8_t *rpos, *rokey;
    size_t rposlen = 0, roklen, start = 0;
    uint8_t pos[NDOCS][4];
    if (rg_qexec_resume(x, &phase, &rpos, &rposlen, &rokey, &roklen) &&
        rposlen == 4)
      start = rg_get_u32(rpos);
    for (i = start; i < NDOCS; i++) {
      rg_qdoc doc;
      memset(&doc, 0, sizeof(doc));
      rg_put_u32(pos[i], (uint32_t)i);
      doc.text = docs[i];
      doc.len = strlen(docs[i]);
      doc.hash = (uint64_t)(i * 2654435761u);
      doc.digest = (uint64_t)i;
      doc.pos = pos[i];
      doc.poslen = 4;
      rc = rg_qexec_doc(x, &doc, &e);
      if (rc == 1) { rc = 0; break; }
      FZ_CHECK(rc == 0 || rc == 400, "row status after a resume");
      if (rc) break;
    }
    if (rc == 0) {
      rc = rg_qexec_finish(x, &rows, &offs, &count, &out, &e);
      FZ_CHECK(rc == 0 || rc == 400, "page status after a resume");
      if (rc == 0)
        FZ_CHECK(fz_valid_json(rows.p ? rows.p : "[]", rows.p ? rows.n : 2),
                 "a page resumed from a payload is not JSON");
    }
  }
  rg_qexec_free(x);
  rg_buf_free(&rows);
  rg_buf_free(&offs);
  rg_buf_free(&out);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  if (spec.cid == 0) setup();
  if (size < 1) return 0;
  switch (data[0] % 4) {
    case 0: arbitrary((const char *)data + 1, size - 1); break;
    case 1: altered(data + 1, size - 1); break;
    case 2: feed_payload(data + 1, size - 1); break;
    default: query_payload(data + 1, size - 1); break;
  }
  return 0;
}
