/*
** store_test.c: the storage engine in plain C, with no Lua state.
**
** It links the lower layers' archives (store, sql, base) with LMDB and
** cJSON only, so it also proves that they need nothing from Lua.  Each
** test opens a fresh database in a temporary directory and uses the
** store's public headers the way the Lua binding does: containers through
** the catalog, writes through rg_write in scopes, reads through read
** transactions, queries through rg_query_exec, the change feed, processors'
** leases and db:verify.
**
** Run by `make test` (and `make layers`): build/<lua>/tests/store_test.
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/patch.h"
#include "sql/sql.h"
#include "store/catalog.h"
#include "store/feed.h"
#include "store/plan.h"
#include "store/procs.h"
#include "store/remote.h"
#include "store/spill.h"
#include "store/kv.h"
#include "store/pagecheck.h"
#include "store/pagedelta.h"
#include "store/verify.h"
#include "store/wal.h"
#include "store/write.h"

static int failures = 0, checks = 0;

#define CHECK(cond) \
  do { checks++; if (!(cond)) { failures++; \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
  } } while (0)

/* The status a call returned, shown with its message when unexpected. */
#define STATUS(call, want) \
  do { int rc_ = (call); checks++; if (rc_ != (want)) { failures++; \
    fprintf(stderr, "%s:%d: %s gave %d (%s), expected %d\n", __FILE__, \
            __LINE__, #call, rc_, e.msg, want); } } while (0)

static char dir[64];
static rg_env *env;
static rg_err e;

static void open_db (size_t map_size) {
  rg_open_opts o;
  memset(&o, 0, sizeof(o));
  o.sync = RG_SYNC_NONE;
  o.map_size = map_size;
  strcpy(dir, "/tmp/rg_store_test_XXXXXX");
  if (mkdtemp(dir) == NULL) { perror("mkdtemp"); exit(2); }
  STATUS(rg_env_open(dir, &o, &env, &e), 0);
}

static void close_db (void) {
  char cmd[128];
  rg_env_release(env);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* A container from its spec's JSON text. */
static rg_cont make_container (const char *name, const char *spec_json) {
  rg_cont c;
  rg_cspec *spec = NULL;
  cJSON *j = NULL;
  rg_buf text;
  c.env = env;
  c.spec = NULL;
  STATUS(rg_json_parse(spec_json, strlen(spec_json), &j, &e), 0);
  cJSON_AddItemToObject(j, "name", rg_str_new(name, strlen(name)));
  STATUS(rg_cspec_build(j, 0, &spec, &e), 0);
  rg_cspec_free(spec);
  rg_buf_init(&text);
  rg_json_print(j, &text);
  cJSON_Delete(j);
  STATUS(rg_catalog_create(env, RG_SYNC_NONE, name, strlen(name), text.p,
                           text.n, 0, &c.spec, &e), 0);
  rg_buf_free(&text);
  return c;
}

/* One write in a scope of its own. */
typedef struct wq {
  const rg_cont *c;
  rg_wreq w;
  rg_wres r;
} wq;

static int write_body (rg_scope *s, void *ud, rg_err *err) {
  wq *q = (wq *)ud;
  rg_wres_free(&q->r);
  memset(&q->r, 0, sizeof(q->r));
  return rg_write(s, q->c, &q->w, &q->r, err);
}

static int write_json (const rg_cont *c, int op, const char *json,
                       rg_wres *out) {
  wq q;
  cJSON *doc = NULL;
  int rc;
  memset(&q, 0, sizeof(q));
  if ((rc = rg_json_parse(json, strlen(json), &doc, &e))) return rc;
  q.c = c;
  q.w.op = op;
  q.w.doc = doc;
  rc = rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, write_body, &q, &e);
  cJSON_Delete(doc);
  if (out) *out = q.r;
  else rg_wres_free(&q.r);
  return rc;
}

/* Reads (id, string pk) into `out` (JSON text); 0 or 404. */
static int read_item (const rg_cont *c, const char *id, const char *pk,
                      rg_buf *out) {
  const cJSON *pkv[RG_MAX_PK_PATHS] = { NULL, NULL, NULL };
  cJSON *pkn = cJSON_CreateString(pk);
  rg_txn *txn;
  rg_val v;
  rg_ikey k;
  int rc;
  pkv[0] = pkn;
  rc = rg_ikey_partition(c->spec, pkv, &k, &e);
  cJSON_Delete(pkn);
  if (rc) return rc;
  rg_ikey_id(&k, id, strlen(id));
  if ((rc = rg_read_begin(env, &txn, &e))) return rc;
  rc = rg_item_get(txn, env, &k, rg_now(), &v, &e);
  if (rc == 0) {
    out->n = 0;
    rg_buf_add(out, v.p, v.n);
  }
  rg_read_end(env);
  return rc;
}

/* Runs a query (one page of at most `max` rows; 0: all) into `rows`. */
static int query (const rg_cont *c, const char *sql, size_t *count,
                  rg_work *work, rg_buf *rows) {
  rg_query_req q;
  rg_query_res r;
  rg_txn *txn;
  int rc;
  memset(&q, 0, sizeof(q));
  memset(&r, 0, sizeof(r));
  q.sql = sql;
  q.sqllen = strlen(sql);
  if ((rc = rg_read_begin(env, &txn, &e))) return rc;
  rc = rg_query_exec(txn, c, rg_now(), &q, &r, &e);
  rg_read_end(env);
  if (rc == 0) {
    *count = r.count;
    if (work) *work = r.work;
    if (rows) { rows->n = 0; rg_buf_add(rows, r.rows.p, r.rows.n); }
  }
  rg_query_res_free(&r);
  return rc;
}

static void test_items (void) {
  rg_cont c;
  rg_buf b;
  rg_wres r;
  size_t n;
  rg_work w;
  open_db(0);
  rg_buf_init(&b);
  c = make_container("posts", "{\"partition_key\":\"/pk\","
                     "\"physical_partitions\":4,"
                     "\"unique_keys\":[[\"/slug\"]]}");
  STATUS(write_json(&c, RG_OP_CREATE, "{\"id\":\"a\",\"pk\":\"p1\","
                    "\"slug\":\"x\",\"n\":1}", &r), 0);
  CHECK(r.status == 201);
  CHECK(r.etag[0] == '"');
  rg_wres_free(&r);
  STATUS(write_json(&c, RG_OP_CREATE, "{\"id\":\"a\",\"pk\":\"p1\"}", NULL),
         409);
  STATUS(write_json(&c, RG_OP_CREATE, "{\"id\":\"b\",\"pk\":\"p1\","
                    "\"slug\":\"x\"}", NULL), 409);     /* unique key */
  STATUS(write_json(&c, RG_OP_CREATE, "{\"id\":\"b\",\"pk\":\"p2\","
                    "\"slug\":\"x\",\"n\":2}", NULL), 0);
  STATUS(write_json(&c, RG_OP_CREATE, "{\"pk\":\"p2\"}", NULL), 400);
  STATUS(read_item(&c, "a", "p1", &b), 0);
  CHECK(b.n > 0 && strstr(b.p, "\"_lsn\":1") != NULL);
  STATUS(read_item(&c, "b", "p1", &b), 404);
  STATUS(write_json(&c, RG_OP_UPSERT, "{\"id\":\"a\",\"pk\":\"p1\","
                    "\"slug\":\"y\",\"n\":3}", &r), 0);
  CHECK(r.status == 200);
  rg_wres_free(&r);
  STATUS(query(&c, "SELECT VALUE c.n FROM c WHERE c.n > 1 ORDER BY c.n",
               &n, &w, &b), 0);
  CHECK(n == 2);
  CHECK(b.n == 5 && memcmp(b.p, "[2,3]", 5) == 0);
  CHECK(w.partitions == 4);
  STATUS(query(&c, "SELECT * FROM c WHERE c.pk = 'p1'", &n, &w, NULL), 0);
  CHECK(n == 1 && w.partitions == 1);
  STATUS(query(&c, "SELECT * FROM", &n, NULL, NULL), 400);
  /* a write naming a trigger: no script runtime is attached */
  {
    wq q;
    cJSON *doc = cJSON_Parse("{\"id\":\"t\",\"pk\":\"p1\"}");
    memset(&q, 0, sizeof(q));
    q.c = &c;
    q.w.op = RG_OP_CREATE;
    q.w.doc = doc;
    q.w.pre_trigger = "audit";
    STATUS(rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, write_body, &q, &e),
           400);
    rg_wres_free(&q.r);
    cJSON_Delete(doc);
    STATUS(read_item(&c, "t", "p1", &b), 404);  /* nothing half-written */
  }
  {
    rg_buf report;
    rg_buf_init(&report);
    CHECK(rg_verify(env, &report) == 0);
    if (report.n) fprintf(stderr, "%.*s", (int)report.n, report.p);
    rg_buf_free(&report);
  }
  rg_cspec_free(c.spec);
  rg_buf_free(&b);
  close_db();
}

/* A patch applied through the write path, with a failing filter. */
static void test_patch (void) {
  rg_cont c;
  rg_buf b;
  wq q;
  rg_patch_op ops[1];
  cJSON *one = cJSON_CreateNumber(1), *pk = cJSON_CreateString("p");
  open_db(0);
  rg_buf_init(&b);
  c = make_container("c", "{\"partition_key\":\"/pk\"}");
  STATUS(write_json(&c, RG_OP_CREATE, "{\"id\":\"a\",\"pk\":\"p\",\"n\":1}",
                    NULL), 0);
  memset(&q, 0, sizeof(q));
  ops[0].op = RG_PATCH_INCR;
  ops[0].path = "/n";
  ops[0].from = NULL;
  ops[0].value = one;
  q.c = &c;
  q.w.op = RG_OP_PATCH;
  q.w.id = "a";
  q.w.idlen = 1;
  q.w.pkv[0] = pk;
  q.w.ops = ops;
  q.w.nops = 1;
  STATUS(rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, write_body, &q, &e), 0);
  q.w.filter = "FROM c WHERE c.n = 1";
  STATUS(rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, write_body, &q, &e),
         412);
  rg_wres_free(&q.r);
  STATUS(read_item(&c, "a", "p", &b), 0);
  CHECK(strstr(b.p, "\"n\":2") != NULL);
  cJSON_Delete(one);
  cJSON_Delete(pk);
  rg_cspec_free(c.spec);
  rg_buf_free(&b);
  close_db();
}

/* The change feed: every write, in order; a token continues a read. */
static void test_feed (void) {
  rg_cont c;
  rg_fpos pos[1];
  rg_batch b;
  rg_feedq f;
  rg_buf tok;
  rg_txn *txn;
  char doc[64];
  int i;
  open_db(0);
  c = make_container("c", "{\"partition_key\":\"/pk\","
                     "\"change_feed\":{\"all_versions\":true}}");
  for (i = 0; i < 10; i++) {
    snprintf(doc, sizeof(doc), "{\"id\":\"%d\",\"pk\":\"p\"}", i);
    STATUS(write_json(&c, RG_OP_CREATE, doc, NULL), 0);
  }
  STATUS(write_json(&c, RG_OP_UPSERT, "{\"id\":\"3\",\"pk\":\"p\",\"x\":1}",
                    NULL), 0);
  rg_batch_init(&b);
  rg_buf_init(&tok);
  memset(&f, 0, sizeof(f));
  f.c = &c;
  f.mode = RG_FEED_ALL;
  f.first = 0;
  f.n = 1;
  f.pos = pos;
  f.max = 4;
  f.now = rg_now();
  STATUS(rg_read_begin(env, &txn, &e), 0);
  STATUS(rg_feed_start(txn, &c, RG_FEED_ALL, 0, RG_START_BEGINNING, 0, &pos[0],
                       &e), 0);
  STATUS(rg_feed_read(txn, &f, &b, &e), 0);
  rg_read_end(env);
  CHECK(b.n == 4 && b.v[0].lsn == 1 && b.v[3].lsn == 4);
  rg_feed_token(rg_env_secret(env), c.spec, RG_FEED_ALL, 0, NULL, 0, 1, pos,
                &tok);
  {                                  /* the token carries its read */
    static rg_feedtok ft;
    STATUS(rg_feed_untoken(rg_env_secret(env), c.spec, tok.p, tok.n, &ft, &e),
           0);
    CHECK(ft.mode == RG_FEED_ALL && ft.range == 0 && ft.lplen == 0 &&
          ft.n == 1 && ft.pos[0].lsn == pos[0].lsn);
    STATUS(rg_feed_untoken(rg_env_secret(env), c.spec, tok.p, tok.n - 1, &ft,
                           &e), 400);
  }
  rg_batch_clear(&b);
  f.max = 100;
  STATUS(rg_read_begin(env, &txn, &e), 0);
  STATUS(rg_feed_read(txn, &f, &b, &e), 0);
  rg_read_end(env);
  CHECK(b.n == 7 && b.v[6].op == RG_OP_REPLACE && b.v[6].lsn == 11);
  rg_batch_free(&b);
  rg_buf_free(&tok);
  rg_cspec_free(c.spec);
  close_db();
}

/* A processor's leases, a batch and its checkpoint, without Lua. */
static void test_processor (void) {
  rg_cont c;
  rg_proc p;
  rg_batch b;
  uint32_t attempt;
  int lost;
  uint64_t waiting;
  open_db(0);
  c = make_container("c", "{\"partition_key\":\"/pk\"}");
  STATUS(write_json(&c, RG_OP_CREATE, "{\"id\":\"1\",\"pk\":\"p\"}", NULL), 0);
  memset(&p, 0, sizeof(p));
  p.id.c = &c;
  p.id.name = "copier";
  p.id.namelen = 6;
  p.id.inst = "i1";
  p.id.instlen = 2;
  p.mode = RG_FEED_LATEST;
  p.nparts = 1;
  p.max_attempts = 3;
  p.max_items = 10;
  p.lease_ms = 60000;
  p.sync = RG_SYNC_NONE;
  STATUS(rg_proc_init(&p, RG_START_BEGINNING, 0, &e), 0);
  STATUS(rg_proc_maintain(&p, &e), 0);
  CHECK(p.nowned == 1);
  rg_batch_init(&b);
  STATUS(rg_proc_read(&p, 0, &b, &attempt, &e), 0);
  CHECK(b.n == 1 && attempt == 1);
  STATUS(rg_proc_commit(&p, 0, &lost, &e), 0);
  CHECK(!lost);
  STATUS(rg_proc_waiting(&p, 0, &waiting, &e), 0);
  CHECK(waiting == 0);
  STATUS(rg_proc_release(&p, &e), 0);
  STATUS(rg_proc_forget(&p, &e), 0);
  STATUS(rg_proc_forget(&p, &e), 404);
  rg_batch_free(&b);
  rg_cspec_free(c.spec);
  close_db();
}

/* A map too small for the data grows as writes need it. */
static void test_growth (void) {
  rg_cont c;
  char doc[2200];
  size_t n;
  int i;
  open_db(1 << 16);
  c = make_container("c", "{\"partition_key\":\"/pk\"}");
  memset(doc, 0, sizeof(doc));
  for (i = 0; i < 400; i++) {
    int k = snprintf(doc, sizeof(doc), "{\"id\":\"%d\",\"pk\":\"p%d\",\"s\":\"",
                     i, i % 7);
    memset(doc + k, 'x', 2000);
    strcpy(doc + k + 2000, "\"}");
    STATUS(write_json(&c, RG_OP_CREATE, doc, NULL), 0);
  }
  STATUS(query(&c, "SELECT VALUE COUNT(1) FROM c", &n, NULL, NULL), 0);
  CHECK(n == 1);
  {
    rg_env_info info;
    rg_env_info_get(env, &info);
    CHECK(info.map_size > (1 << 16));
  }
  rg_cspec_free(c.spec);
  close_db();
}

/* Bulk load: a batch written at once, refused documents one by one; the
** new tables (refs, path dictionary, latest duplicates) hold, and verify
** says so; a compacted copy holds the same. */
typedef struct bq {
  const rg_cont *c;
  rg_bulk *b;
  rg_bulk_item *items;
  size_t n, written;
} bq;

static int bulk_body (rg_scope *s, void *ud, rg_err *err) {
  bq *q = (bq *)ud;
  return rg_bulk_write(s, q->b, q->c, q->items, q->n, RG_BULK_CREATE,
                       &q->written, err);
}

static void test_bulk (void) {
  rg_cont c;
  bq q;
  rg_bulk_item items[300];
  rg_buf report, rows;
  size_t i, count;
  rg_work w;
  char doc[128];
  uint64_t bytes;
  char copy[96];
  open_db(0);
  c = make_container("c", "{\"partition_key\":\"/pk\","
                     "\"physical_partitions\":3,\"unique_keys\":[[\"/u\"]]}");
  memset(items, 0, sizeof(items));
  for (i = 0; i < 300; i++) {
    snprintf(doc, sizeof(doc), "{\"id\":\"%lu\",\"pk\":\"p%lu\",\"u\":%lu,"
             "\"t\":[\"a\",%lu]}", (unsigned long)i, (unsigned long)(i % 11),
             (unsigned long)(i == 299 ? 2 : i), (unsigned long)(i % 5));
    STATUS(rg_json_parse(doc, strlen(doc), &items[i].doc, &e), 0);
  }
  cJSON_DeleteItemFromObject(items[5].doc, "id");          /* 400 */
  memset(&q, 0, sizeof(q));
  q.c = &c;
  q.b = rg_bulk_new();
  q.items = items;
  q.n = 300;
  STATUS(rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, bulk_body, &q, &e), 0);
  CHECK(q.written == 298);
  CHECK(items[0].status == 201 && items[5].status == 400 &&
        items[299].status == 409 && items[299].msg != NULL);
  rg_bulk_clear(items, 300);
  for (i = 0; i < 300; i++) cJSON_Delete(items[i].doc);
  rg_bulk_free(q.b);
  rg_buf_init(&report);
  CHECK(rg_verify(env, &report) == 0);
  if (report.n) fprintf(stderr, "%.*s", (int)report.n, report.p);
  rg_buf_init(&rows);
  STATUS(query(&c, "SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.t, 3)",
               &count, &w, &rows), 0);
  CHECK(count == 60 && w.lookups == 1 && w.loaded == 60);
  STATUS(query(&c, "SELECT VALUE c.id FROM c WHERE c.u = 17", &count, &w,
               NULL), 0);
  CHECK(count == 1 && w.loaded == 1);
  {                                  /* every table counted, dups too */
    rg_table_stat ts[RG_NDB];
    uint64_t free_bytes;
    STATUS(rg_env_tables(env, ts, &free_bytes, &e), 0);
    CHECK(ts[RG_DB_ITEMS].entries == 298 && ts[RG_DB_REFS].entries == 298 &&
          ts[RG_DB_LATEST].entries == 298 && ts[RG_DB_FEED].entries == 0);
    CHECK(ts[RG_DB_INDEX].entries > 298 * 3);
  }
  snprintf(copy, sizeof(copy), "%s-copy", dir);
  STATUS(rg_env_compact(env, copy, &bytes, &e), 0);
  CHECK(bytes > 0);
  STATUS(rg_env_compact(env, copy, &bytes, &e), 409);
  rg_cspec_free(c.spec);
  rg_buf_free(&rows);
  rg_buf_free(&report);
  close_db();
  {                                  /* the copy opens, verifies, answers */
    rg_open_opts o;
    char cmd[128];
    memset(&o, 0, sizeof(o));
    STATUS(rg_env_open(copy, &o, &env, &e), 0);
    rg_buf_init(&report);
    CHECK(rg_verify(env, &report) == 0);
    STATUS(rg_catalog_find(env, "c", 1, &c.spec, &e), 0);
    c.env = env;
    STATUS(query(&c, "SELECT VALUE COUNT(1) FROM c WHERE c.u > 100", &count,
                 &w, NULL), 0);
    CHECK(count == 1 && w.lookups == 1);
    rg_cspec_free(c.spec);
    rg_buf_free(&report);
    rg_env_release(env);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", copy);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", copy);
  }
}

/*
** The seam (store/kv.h) as a backend must keep it: point reads, ordered
** cursors over a plain table and over a table of sorted duplicates, and
** savepoints that undo exactly the writes made since them.  The tables
** used are the database's own (refs: plain; latest: duplicates of
** RG_LATEST_DUP bytes), with keys no item uses.
*/
typedef struct seam_case {
  int phase;
} seam_case;

static void key4 (uint8_t *k, uint32_t n) { rg_put_u32(k, n); }

static void dup12 (uint8_t *d, uint64_t lsn) {
  memset(d, 0, RG_LATEST_DUP);
  rg_put_u64(d, lsn);
}

static int seam_body (rg_scope *s, void *ud, rg_err *err) {
  seam_case *q = (seam_case *)ud;
  rg_txn *t = s->txn;
  rg_cur *c;
  rg_val k, v;
  uint8_t kb[4], d[RG_LATEST_DUP], lk[6] = { 0xFF, 0xFF, 0xFF, 0xF0, 0, 0 };
  size_t n, mark, inner;
  uint32_t i;
  (void)err;
  if (q->phase == 0) {
    for (i = 1; i <= 5; i++) {         /* plain: keys 0xFFFFFF01..05 */
      key4(kb, 0xFFFFFF00u + i);
      CHECK(rg_kv_put(t, RG_DB_REFS, kb, 4, "v", 1, 0) == 0);
    }
    for (i = 3; i >= 1; i--) {         /* duplicates, given out of order */
      dup12(d, i);
      CHECK(rg_kv_dput(t, RG_DB_LATEST, lk, 6, d, RG_LATEST_DUP, 0) == 0);
    }
    dup12(d, 2);
    CHECK(rg_kv_dput(t, RG_DB_LATEST, lk, 6, d, RG_LATEST_DUP, 0) ==
          RG_KEYEXIST);
    return 0;
  }
  /* ordered reads */
  CHECK(rg_cur_open(t, RG_DB_REFS, &c) == 0);
  key4(kb, 0xFFFFFF02u);
  k.p = kb;
  k.n = 3;                             /* a prefix seeks to the first */
  CHECK(rg_cur_get(c, &k, &v, RG_SEEK) == 0 && k.n == 4 &&
        rg_get_u32(k.p) == 0xFFFFFF01u);
  CHECK(rg_cur_get(c, &k, &v, RG_NEXT) == 0 && rg_get_u32(k.p) == 0xFFFFFF02u);
  CHECK(rg_cur_get(c, &k, &v, RG_LAST) == 0 && rg_get_u32(k.p) == 0xFFFFFF05u);
  CHECK(rg_cur_get(c, &k, &v, RG_NEXT) == RG_NOTFOUND);
  k.p = kb;
  k.n = 4;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == 0 && v.n == 1);
  rg_cur_close(c);
  CHECK(rg_cur_open(t, RG_DB_LATEST, &c) == 0);
  k.p = lk;
  k.n = 6;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == 0 &&
        rg_get_u64(v.p) == 1);          /* duplicates in byte order */
  CHECK(rg_cur_count(c, &n) == 0 && n == 3);
  CHECK(rg_cur_get(c, &k, &v, RG_NEXT_DUP) == 0 && rg_get_u64(v.p) == 2);
  CHECK(rg_cur_get(c, &k, &v, RG_LAST_DUP) == 0 && rg_get_u64(v.p) == 3);
  CHECK(rg_cur_get(c, &k, &v, RG_NEXT_DUP) == RG_NOTFOUND);
  dup12(d, 2);
  k.p = lk;
  k.n = 6;
  v.p = d;
  v.n = RG_LATEST_DUP;
  CHECK(rg_cur_get(c, &k, &v, RG_BOTH) == 0);
  dup12(d, 0);
  v.p = d;
  CHECK(rg_cur_get(c, &k, &v, RG_BOTH_RANGE) == 0 && rg_get_u64(v.p) == 1);
  rg_cur_close(c);
  /* savepoints: nested, each undoing its own writes only */
  mark = rg_kv_savepoint(t);
  key4(kb, 0xFFFFFF01u);
  CHECK(rg_kv_put(t, RG_DB_REFS, kb, 4, "changed", 7, 0) == 0);
  key4(kb, 0xFFFFFF02u);
  CHECK(rg_kv_del(t, RG_DB_REFS, kb, 4) == 0);
  key4(kb, 0xFFFFFF09u);
  CHECK(rg_kv_put(t, RG_DB_REFS, kb, 4, "new", 3, RG_KV_APPEND) == 0);
  dup12(d, 9);
  CHECK(rg_kv_dput(t, RG_DB_LATEST, lk, 6, d, RG_LATEST_DUP,
                   RG_KV_APPENDDUP) == 0);
  dup12(d, 1);
  CHECK(rg_kv_ddel(t, RG_DB_LATEST, lk, 6, d, RG_LATEST_DUP) == 0);
  inner = rg_kv_savepoint(t);
  CHECK(rg_cur_open(t, RG_DB_REFS, &c) == 0);
  key4(kb, 0xFFFFFF03u);
  k.p = kb;
  k.n = 4;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == 0 && rg_cur_del(c) == 0);
  rg_cur_close(c);
  CHECK(rg_kv_del(t, RG_DB_LATEST, lk, 6) == 0);   /* every duplicate */
  CHECK(rg_kv_get(t, RG_DB_LATEST, lk, 6, &v) == RG_NOTFOUND);
  CHECK(rg_kv_rollback(t, inner) == 0);
  key4(kb, 0xFFFFFF03u);
  CHECK(rg_kv_get(t, RG_DB_REFS, kb, 4, &v) == 0);
  CHECK(rg_cur_open(t, RG_DB_LATEST, &c) == 0);
  k.p = lk;
  k.n = 6;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == 0 && rg_get_u64(v.p) == 2 &&
        rg_cur_count(c, &n) == 0 && n == 3);       /* 2, 3, 9 */
  rg_cur_close(c);
  CHECK(rg_kv_rollback(t, mark) == 0);
  key4(kb, 0xFFFFFF01u);
  CHECK(rg_kv_get(t, RG_DB_REFS, kb, 4, &v) == 0 && v.n == 1);
  key4(kb, 0xFFFFFF02u);
  CHECK(rg_kv_get(t, RG_DB_REFS, kb, 4, &v) == 0);
  key4(kb, 0xFFFFFF09u);
  CHECK(rg_kv_get(t, RG_DB_REFS, kb, 4, &v) == RG_NOTFOUND);
  CHECK(rg_cur_open(t, RG_DB_LATEST, &c) == 0);
  k.p = lk;
  k.n = 6;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == 0 && rg_get_u64(v.p) == 1 &&
        rg_cur_count(c, &n) == 0 && n == 3);       /* 1, 2, 3 */
  rg_cur_close(c);
  /* a released savepoint keeps its writes */
  mark = rg_kv_savepoint(t);
  key4(kb, 0xFFFFFF04u);
  CHECK(rg_kv_del(t, RG_DB_REFS, kb, 4) == 0);
  rg_kv_release(t, mark);
  CHECK(rg_kv_get(t, RG_DB_REFS, kb, 4, &v) == RG_NOTFOUND);
  CHECK(rg_kv_del(t, RG_DB_REFS, kb, 4) == RG_NOTFOUND);
  /* leave the tables as they were */
  for (i = 1; i <= 5; i++) {
    key4(kb, 0xFFFFFF00u + i);
    rg_kv_del(t, RG_DB_REFS, kb, 4);
  }
  CHECK(rg_kv_del(t, RG_DB_LATEST, lk, 6) == 0);
  return 0;
}

static void test_seam (void) {
  seam_case q;
  rg_err ve;
  open_db(0);
  q.phase = 0;
  STATUS(rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, seam_body, &q, &e),
         0);
  q.phase = 1;
  STATUS(rg_scope_run(env, NULL, NULL, RG_SYNC_NONE, 0, seam_body, &q, &e),
         0);
  close_db();
  /* the log reads LMDB 0.9's layout, and refuses a library of another */
  CHECK(rg_wal_check_lmdb(0, 9, 24, &ve) == 0);
  CHECK(rg_wal_check_lmdb(0, 9, 33, &ve) == 0);
  CHECK(rg_wal_check_lmdb(1, 0, 0, &ve) == 500 &&
        strstr(ve.msg, "liblmdb 1.0.0") != NULL);
  CHECK(rg_wal_check_lmdb(0, 10, 0, &ve) == 500);
}

/* A physical partition's hashes are one run from rg_range_start: the
** first hash of bucket r is r's (a full-text build walks a bucket's items
** from it, search.c), the one before it bucket r - 1's, and the next
** bucket starts where r's run ends. */
static void test_ranges (void) {
  int np, r, bad = 0;
  for (np = 1; np <= RG_MAX_PARTITIONS; np++) {
    if (rg_range_start(0, np) != 0) bad++;
    for (r = 0; r < np; r++) {
      uint64_t h = rg_range_start(r, np), x = rg_range_start(r + 1, np);
      if (rg_range_of(h, np) != r || rg_range_of(x - 1, np) != r ||
          (r > 0 && rg_range_of(h - 1, np) != r - 1) ||
          (r + 1 < np && x <= h) ||
          (r + 1 < np && rg_range_of(x, np) != r + 1))
        bad++;
    }
  }
  CHECK(bad == 0);
  CHECK(rg_range_start(3, 8) == (uint64_t)3 << 61);
  CHECK(rg_range_start(8, 8) == 0);         /* the end: past the last hash */
}

/*
** {=====================================================================
** The remote overlay: a fetch in the middle of a transaction
** ======================================================================
*/
static int has_bytes (const rg_part *pt, const uint8_t *b, size_t n) {
  size_t i;
  for (i = 0; i + n <= pt->n; i++)
    if (memcmp((const uint8_t *)pt->data + i, b, n) == 0) return 1;
  return 0;
}

/* What the host fetches never changes what the transaction wrote: a
** duplicate deleted blind stays deleted (and its delete goes out), a put
** keeps its value, a counter reads the fetched base plus its own deltas,
** an undo after the fetch goes back to the fetched value; a fetch that
** contradicts what the running transaction read makes it go again. */
static void test_remote (void) {
  rg_remote *r = rg_remote_new();
  rg_place g = { RG_PLACE_GLOBAL, 0, 0 }, b = { 7, 0, 1 };
  const char *spec = "{\"physical_partitions\":1}";
  uint8_t sk[5], lk[6], d1[RG_LATEST_DUP], d2[RG_LATEST_DUP];
  uint8_t e1[6 + RG_LATEST_DUP], e2[6 + RG_LATEST_DUP], ik[16], pk[12];
  uint8_t cnt[16];
  const void *ks[2];
  size_t kns[2], vns[2] = { 0, 0 }, n, mark;
  const void *vs[2] = { NULL, NULL };
  const rg_part *parts;
  rg_txn *t;
  rg_cur *c;
  rg_val k, v;
  CHECK(r != NULL);
  rg_remote_reset(r, 1, 0);
  sk[0] = RG_MK_SPEC;
  rg_put_u32(sk + 1, 7);
  CHECK(rg_remote_feed_point(r, &g, RG_DB_META, sk, 5, spec, strlen(spec),
                             1) == 0);
  rg_latest_entry(lk, d1, 7, 0, 5, 1);
  rg_latest_entry(lk, d2, 7, 0, 6, 2);
  memcpy(e1, lk, 6); memcpy(e1 + 6, d1, RG_LATEST_DUP);
  memcpy(e2, lk, 6); memcpy(e2 + 6, d2, RG_LATEST_DUP);
  rg_put_u32(ik, 7); rg_put_u64(ik + 4, 42); memcpy(ik + 12, "item", 4);
  rg_put_u32(pk, 7); rg_put_u64(pk + 4, 42);
  STATUS(rg_remote_begin(r, &t, &e), 0);
  /* writes before the fetch: blind, on entries not fetched yet */
  CHECK(rg_kv_ddel(t, RG_DB_LATEST, lk, 6, d1, RG_LATEST_DUP) == 0);
  CHECK(rg_kv_put(t, RG_DB_ITEMS, ik, 16, "mine", 4, 0) == 0);
  CHECK(rg_kv_add(t, RG_DB_PARTS, pk, 12, 1, 10, 0, 0) == 0);
  mark = rg_kv_savepoint(t);
  CHECK(rg_kv_ddel(t, RG_DB_LATEST, lk, 6, d2, RG_LATEST_DUP) == 0);
  /* the fetch: the place holds both duplicates, the item, the counter */
  ks[0] = e1; kns[0] = sizeof(e1);
  ks[1] = e2; kns[1] = sizeof(e2);
  CHECK(rg_remote_feed_range(r, &b, RG_DB_LATEST, lk, 6, 0, 0, 2, ks, kns,
                             vs, vns, 1, 3, 1) == 0);
  CHECK(rg_remote_feed_point(r, &b, RG_DB_ITEMS, ik, 16, "theirs", 6,
                             1) == 0);
  rg_put_u64(cnt, 5); rg_put_u64(cnt + 8, 100);
  CHECK(rg_remote_feed_point(r, &b, RG_DB_PARTS, pk, 12, cnt, 16, 1) == 0);
  CHECK(rg_remote_complete(r));
  CHECK(rg_cur_open(t, RG_DB_LATEST, &c) == 0);
  k.p = lk;
  k.n = 6;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == RG_NOTFOUND);   /* both deleted */
  rg_cur_close(c);
  CHECK(rg_kv_get(t, RG_DB_ITEMS, ik, 16, &v) == 0 && v.n == 4 &&
        memcmp(v.p, "mine", 4) == 0);
  CHECK(rg_kv_get(t, RG_DB_PARTS, pk, 12, &v) == 0 && v.n == 16 &&
        rg_get_u64(v.p) == 6 && rg_get_u64((const uint8_t *)v.p + 8) == 110);
  /* the undo goes back to what the place holds, not to what the
     transaction saw before the fetch (absent) */
  CHECK(rg_kv_rollback(t, mark) == 0);
  CHECK(rg_cur_open(t, RG_DB_LATEST, &c) == 0);
  k.p = lk;
  k.n = 6;
  CHECK(rg_cur_get(c, &k, &v, RG_SET) == 0 && memcmp(v.p, d2, 12) == 0 &&
        rg_cur_count(c, &n) == 0 && n == 1);
  rg_cur_close(c);
  STATUS(rg_remote_commit(r, &e), 0);
  CHECK(rg_remote_state(r) == RG_REMOTE_APPLY);
  CHECK(rg_remote_parts(r, &parts) == 1);
  CHECK(has_bytes(&parts[0], e1, sizeof(e1)));   /* the delete goes out */
  CHECK(!has_bytes(&parts[0], e2, sizeof(e2)));  /* undone */
  CHECK(has_bytes(&parts[0], (const uint8_t *)"mine", 4));
  /* a fetch that changes what the running transaction read */
  rg_remote_rerun(r);
  STATUS(rg_remote_begin(r, &t, &e), 0);
  CHECK(rg_kv_get(t, RG_DB_ITEMS, ik, 16, &v) == 0 && v.n == 6);
  CHECK(rg_remote_feed_point(r, &b, RG_DB_ITEMS, ik, 16, "moved", 5,
                             1) == 0);
  CHECK(!rg_remote_complete(r));
  /* and a range whose version moved: what the transaction wrote there
     stays (its undo names it), the rest is forgotten */
  CHECK(rg_kv_ddel(t, RG_DB_LATEST, lk, 6, d2, RG_LATEST_DUP) == 0);
  mark = rg_kv_savepoint(t);
  CHECK(rg_kv_ddel(t, RG_DB_LATEST, lk, 6, d1, RG_LATEST_DUP) == 0);
  CHECK(rg_remote_feed_range(r, &b, RG_DB_LATEST, lk, 6, 0, 0, 1, ks, kns,
                             vs, vns, 1, 4, 1) == 0);
  CHECK(rg_kv_rollback(t, mark) == 0);
  STATUS(rg_remote_commit(r, &e), 0);
  CHECK(rg_remote_state(r) == RG_REMOTE_FETCH);  /* again, whole */
  rg_remote_rerun(r);
  CHECK(rg_remote_complete(r));
  rg_remote_free(r);
}
/* }===================================================================== */

/*
** {=====================================================================
** Spilled runs: records of any size read back, range by range
** ======================================================================
*/
static void test_spill (void) {
  rg_spill *sp;
  rg_sread r[2];
  uint64_t at[3];
  size_t big = 3u << 20, i;          /* past the MiB a read takes */
  uint8_t *v = (uint8_t *)malloc(big);
  char key[32];
  int run, n;
  CHECK(v != NULL);
  if (v == NULL) return;
  for (i = 0; i < big; i++) v[i] = (uint8_t)(i * 7);
  open_db(0);
  STATUS(rg_spill_open(&sp, dir, &e), 0);
  for (run = 0; run < 2; run++) {   /* run 0: small records around a big one */
    at[run] = rg_spill_at(sp);
    for (n = 0; n < 5000; n++) {
      size_t vn = n == 2500 ? big : (size_t)(n % 300);
      snprintf(key, sizeof(key), "r%d-%05d", run, n);
      STATUS(rg_spill_put(sp, key, (uint32_t)strlen(key), v, (uint32_t)vn, &e), 0);
    }
  }
  at[2] = rg_spill_at(sp);
  STATUS(rg_spill_flush(sp, &e), 0);
  {                                  /* the directory shows no file */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test $(ls -A %s | grep -vc -e '\\.mdb$' "
             "-e '^regolith\\.' -e '^throughput\\.') -eq 0", dir);
    CHECK(system(cmd) == 0);
  }
  /* a reader's buffer: from the bound shared by the runs, 64 KiB to 1 MiB */
  CHECK(rg_sread_buf((size_t)1 << 30, 2) == 1u << 20);
  CHECK(rg_sread_buf((size_t)16 << 20, 31) == 512u << 10);
  CHECK(rg_sread_buf((size_t)64 << 20, 1600) == 64u << 10);
  CHECK(rg_sread_buf(1, 5000) == 64u << 10);
  rg_sread_init(&r[0], sp, at[0], at[1], rg_sread_buf(1, 2));
  rg_sread_init(&r[1], sp, at[1], at[2], rg_sread_buf((size_t)1 << 30, 2));
  for (n = 0; n < 5000; n++)         /* both runs at once, interleaved */
    for (run = 0; run < 2; run++) {
      size_t vn = n == 2500 ? big : (size_t)(n % 300);
      snprintf(key, sizeof(key), "r%d-%05d", run, n);
      CHECK(rg_sread_next(&r[run], &e) == 1);
      CHECK(r[run].kn == strlen(key) && memcmp(r[run].k, key, r[run].kn) == 0);
      CHECK(r[run].vn == vn && memcmp(r[run].v, v, vn) == 0);
      if (n < 2500)                  /* grown only for the big record */
        CHECK(r[run].cap == (run ? 1u << 20 : 64u << 10));
      else
        CHECK(r[run].cap >= big + 8 + strlen(key));
    }
  for (run = 0; run < 2; run++) {
    CHECK(rg_sread_next(&r[run], &e) == 0);
    rg_sread_free(&r[run]);
  }
  rg_sread_init(&r[0], sp, at[0], at[0] + 10, 1 << 16);   /* cut short */
  CHECK(rg_sread_next(&r[0], &e) == 500);
  rg_sread_free(&r[0]);
  rg_spill_close(sp);
  STATUS(rg_spill_open(&sp, "/nonexistent/dir", &e), 500);
  CHECK(sp == NULL);
  free(v);
  close_db();
}
/* }===================================================================== */

/*
** {=====================================================================
** Page deltas (pagedelta.h): round trips, fallbacks, pairing, the cache
** ======================================================================
*/
#define PS 4096
/* pages.h's (whose names layout.h's clash with) */
#define RG_PG_BRANCH     0x01
#define RG_PG_LEAF       0x02
#define RG_PG_OVERFLOW   0x04
#define RG_PG_LEAF2      0x20
static unsigned rg_le16 (const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static uint32_t rnd_state = 12345;
static uint32_t rnd (void) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return rnd_state >> 8;
}

static void put16 (uint8_t *p, unsigned v) { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); }
static void put64 (uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* A leaf page `pgno` of n nodes (key "k%05u" of node i+first, a value of
** vlen bytes), as LMDB lays it out: pointers up from 16, nodes down from
** the end; stamped and trimmed. */
static void leaf (uint8_t *p, uint64_t pgno, unsigned first, unsigned n,
                  unsigned vlen) {
  unsigned i, upper = PS;
  memset(p, 0xA5, PS);                 /* the middle: garbage */
  put64(p, pgno);
  put16(p + 8, 0);
  put16(p + 10, RG_PG_LEAF);
  for (i = 0; i < n; i++) {
    char key[8];
    unsigned sz = 8 + 6 + vlen;
    snprintf(key, sizeof(key), "k%05u", first + i);
    upper -= (sz + 1) & ~1u;
    put16(p + upper, vlen); put16(p + upper + 2, 0); put16(p + upper + 4, 0);
    put16(p + upper + 6, 6);
    memcpy(p + upper + 8, key, 6);
    memset(p + upper + 14, (int)(first + i), vlen);
    put16(p + 16 + 2 * i, upper);
  }
  put16(p + 12, 16 + 2 * n);
  put16(p + 14, upper);
  rg_page_stamp(p, PS);
  rg_pdelta_trim(p, PS);
}

/* A branch page `pgno` whose node i has key "k%05u" of keys[i] (the first
** none) and child kids[i]; stamped and trimmed. */
static void branch (uint8_t *p, uint64_t pgno, const unsigned *keys,
                    const uint64_t *kids, unsigned n) {
  unsigned i, upper = PS;
  memset(p, 0, PS);
  put64(p, pgno);
  put16(p + 10, RG_PG_BRANCH);
  for (i = 0; i < n; i++) {
    unsigned ks = i ? 6 : 0;
    char key[8];
    upper -= (8 + ks + 1) & ~1u;
    put16(p + upper, (unsigned)(kids[i] & 0xFFFF));
    put16(p + upper + 2, (unsigned)(kids[i] >> 16 & 0xFFFF));
    put16(p + upper + 4, (unsigned)(kids[i] >> 32 & 0xFFFF));
    put16(p + upper + 6, ks);
    snprintf(key, sizeof(key), "k%05u", keys[i]);
    memcpy(p + upper + 8, key, ks);
    put16(p + 16 + 2 * i, upper);
  }
  put16(p + 12, 16 + 2 * n);
  put16(p + 14, upper);
  rg_page_stamp(p, PS);
}

static size_t trimmed_size (const uint8_t *p) {
  unsigned lo, up;
  if (!rg_pdelta_usable(p, PS, &lo, &up)) return PS;
  return lo + (PS - up);
}

/* The delta of p from s round-trips exactly, or is refused as not smaller. */
static size_t round_trip (const uint8_t *s, const uint8_t *p) {
  static uint8_t d[2 * PS], out[PS];
  size_t limit = trimmed_size(p), n = rg_pdelta_encode(s, p, PS, d, limit);
  if (n == 0) return 0;
  CHECK(n < limit);
  CHECK(rg_pdelta_apply(s, d, n, PS, out) == 0);
  CHECK(memcmp(out, p, PS) == 0);
  return n;
}

typedef struct pages_ud { const uint8_t *pg[64]; uint64_t no[64]; int n; } pages_ud;
static const uint8_t *lookup (void *ud, uint64_t pgno) {
  pages_ud *u = (pages_ud *)ud;
  int i;
  for (i = 0; i < u->n; i++) if (u->no[i] == pgno) return u->pg[i];
  return NULL;
}
static uint64_t paired[16][2];
static int npaired;
/* Records a pairing; nonzero when pg was paired before (among the first
** 16 kept). */
static int on_pair (void *ud, uint64_t pg, uint64_t src) {
  int i;
  (void)ud;
  for (i = 0; i < npaired && i < 16; i++) if (paired[i][0] == pg) return 1;
  if (npaired < 16) { paired[npaired][0] = pg; paired[npaired][1] = src; }
  npaired++;
  return 0;
}

static void test_pagedelta (void) {
  static uint8_t s[PS], p[PS], q[PS], old_root[PS], new_root[PS], out[PS];
  static uint8_t d[2 * PS];
  unsigned lo, up, i, round;
  size_t n;
  /* a leaf with one node more: the pointers shift, the new node lands
  ** below the others; the delta is a small part of the page */
  leaf(s, 100, 0, 40, 50);
  leaf(p, 200, 0, 41, 50);
  n = round_trip(s, p);
  CHECK(n > 0 && n < trimmed_size(p) / 4);
  rg_pdelta_encode(s, p, PS, d, PS);
  rg_pdelta_apply(s, d, n, PS, out);
  CHECK(rg_le16(out + 8) == rg_page_sum(out, PS));   /* its checksum holds */
  /* the replay's check: the delta makes the page the commit made (its
  ** number and 64-bit sum) from the right source, and a wrong source whose
  ** result passes the page's 16-bit checksum is still refused */
  {
    static uint8_t s2[PS], q[PS], cover[PS];
    uint64_t sum = rg_pdelta_sum(p, PS);
    unsigned o, v, found = 0;
    size_t at = 0;
    CHECK(rg_pdelta_make(s, d, n, PS, 200, sum, out) == 0 &&
          memcmp(out, p, PS) == 0);
    CHECK(rg_pdelta_make(s, d, n, PS, 201, sum, out) == -1);
    CHECK(rg_pdelta_make(s, d, n, PS, 200, sum ^ 1, out) == -1);
    memset(cover, 0, PS);
    while (at + 4 <= n) {
      unsigned a = rg_le16(d + at), len = rg_le16(d + at + 2);
      memset(cover + a, 1, len);
      at += 4 + len;
    }
    rg_pdelta_usable(p, PS, &lo, &up);
    /* two bytes of a node the delta leaves as the source has them, set so
    ** that the page's checksum still holds */
    for (o = up; !found && o + 2 <= PS; o += 2) {
      if (cover[o] || cover[o + 1]) continue;
      memcpy(q, p, PS);
      for (v = 0; v < 65536 && !found; v++) {
        q[o] = (uint8_t)v; q[o + 1] = (uint8_t)(v >> 8);
        if (memcmp(q, p, PS) != 0 && rg_le16(q + 8) == rg_page_sum(q, PS))
          found = 1;
      }
    }
    CHECK(found);
    o -= 2;
    memcpy(s2, s, PS);
    s2[o] = q[o]; s2[o + 1] = q[o + 1];
    CHECK(rg_pdelta_apply(s2, d, n, PS, out) == 0 && memcmp(out, q, PS) == 0 &&
          rg_page_has_sum(out) && rg_le16(out + 8) == rg_page_sum(out, PS) &&
          memcmp(out, p, 8) == 0);                     /* its number too */
    CHECK(rg_pdelta_make(s2, d, n, PS, 200, sum, out) == -1);
  }
  /* a value changed in place */
  leaf(q, 201, 0, 40, 50);
  q[PS - 30] ^= 0xFF;
  rg_page_stamp(q, PS);
  CHECK(round_trip(s, q) > 0);
  /* unrelated pages: no delta smaller than the page */
  for (round = 0; round < 50; round++) {
    for (i = 0; i < PS; i++) { s[i] = (uint8_t)rnd(); p[i] = (uint8_t)rnd(); }
    put16(s + 10, RG_PG_LEAF); put16(p + 10, RG_PG_LEAF);
    put16(s + 12, 16 + 2 * (rnd() % 100)); put16(s + 14, PS - rnd() % 2000);
    put16(p + 12, 16 + 2 * (rnd() % 100)); put16(p + 14, PS - rnd() % 2000);
    rg_page_stamp(s, PS); rg_page_stamp(p, PS);
    rg_pdelta_trim(s, PS); rg_pdelta_trim(p, PS);
    CHECK(round_trip(s, p) == 0);
    /* a random few bytes changed (not its kind and bounds): exact, and
    ** smaller */
    memcpy(q, s, PS);
    for (i = 0; i < 1 + rnd() % 20; i++) {
      unsigned at = rnd() % PS;
      rg_pdelta_usable(q, PS, &lo, &up);
      if ((at >= lo && at < up) || (at >= 10 && at < 16)) continue;
      q[at] ^= (uint8_t)(1 + rnd() % 255);
    }
    rg_pdelta_trim(q, PS);
    CHECK(round_trip(s, q) > 0 || memcmp(s, q, PS) == 0);
  }
  /* what is not a branch or leaf page takes no delta; a delta past the
  ** page is refused */
  memset(p, 0, PS);
  put16(p + 10, RG_PG_OVERFLOW);
  CHECK(!rg_pdelta_usable(p, PS, &lo, &up));
  put16(p + 10, RG_PG_LEAF | RG_PG_LEAF2);
  CHECK(!rg_pdelta_usable(p, PS, &lo, &up));
  put16(d, PS - 2); put16(d + 2, 4); memset(d + 4, 1, 4);
  CHECK(rg_pdelta_apply(s, d, 8, PS, out) == -1);
  CHECK(rg_pdelta_apply(s, d, 3, PS, out) == -1);
  /* pairing: root 10 over leaves 11 and 12 becomes root 20 over 11 and
  ** 22 (12 changed); sources only from the old pages known */
  {
    pages_ud fresh, known;
    unsigned keys[2] = { 0, 40 };
    uint64_t kids[2] = { 11, 12 }, kids2[2] = { 11, 22 };
    static uint8_t l11[PS], l12[PS], l22[PS];
    leaf(l11, 11, 0, 40, 20);
    leaf(l12, 12, 40, 40, 20);
    leaf(l22, 22, 40, 41, 20);
    branch(old_root, 10, keys, kids, 2);
    branch(new_root, 20, keys, kids2, 2);
    fresh.n = 2; fresh.no[0] = 20; fresh.pg[0] = new_root;
    fresh.no[1] = 22; fresh.pg[1] = l22;
    known.n = 3; known.no[0] = 10; known.pg[0] = old_root;
    known.no[1] = 11; known.pg[1] = l11; known.no[2] = 12; known.pg[2] = l12;
    npaired = 0;
    rg_pdelta_pair(20, 10, PS, lookup, lookup, on_pair, &fresh);
    /* (lookup's ud is the fresh set for both: no old page is known, so
    ** nothing pairs) */
    CHECK(npaired == 0);
    {
      /* both sets: one callback per set */
      pages_ud both;
      both.n = 0;
      for (i = 0; i < (unsigned)fresh.n; i++) {
        both.no[both.n] = fresh.no[i]; both.pg[both.n++] = fresh.pg[i];
      }
      for (i = 0; i < (unsigned)known.n; i++) {
        both.no[both.n] = known.no[i]; both.pg[both.n++] = known.pg[i];
      }
      npaired = 0;
      rg_pdelta_pair(20, 10, PS, lookup, lookup, on_pair, &both);
      CHECK(npaired == 2 && paired[0][0] == 20 && paired[0][1] == 10 &&
            paired[1][0] == 22 && paired[1][1] == 12);
      CHECK(round_trip(l12, l22) > 0);
      CHECK(round_trip(old_root, new_root) > 0);
    }
  }
  /* a damaged tree whose 200 children all point back at their own page,
  ** in the new tree and the old: each page is descended once (without
  ** that, 200^64 walks) */
  {
    static unsigned keys[200];
    static uint64_t self[200], old_self[200];
    pages_ud both;
    for (i = 0; i < 200; i++) { keys[i] = i; self[i] = 30; old_self[i] = 31; }
    branch(new_root, 30, keys, self, 200);
    branch(old_root, 31, keys, old_self, 200);
    both.n = 2; both.no[0] = 30; both.pg[0] = new_root;
    both.no[1] = 31; both.pg[1] = old_root;
    npaired = 0;
    rg_pdelta_pair(30, 31, PS, lookup, lookup, on_pair, &both);
    CHECK(npaired == 1 && paired[0][0] == 30 && paired[0][1] == 31);
  }
  /* the cache: every page it gives is the last one put under its number;
  ** a page dropped is gone; it never holds more than its bound */
  {
    rg_pgcache *c = rg_pgcache_new(PS, 16 * PS);
    static uint32_t last[200];
    uint8_t *buf = NULL;
    unsigned ok = 1, max = 0;
    CHECK(c != NULL);
    memset(last, 0, sizeof(last));
    for (round = 1; round < 5000; round++) {
      uint64_t pg = rnd() % 200;
      const uint8_t *img;
      if (rnd() % 5 == 0) { rg_pgcache_drop(c, pg); last[pg] = 0; }
      else {
        if (buf == NULL) buf = (uint8_t *)malloc(PS);
        memcpy(buf, &round, 4);
        rg_pgcache_put(c, pg, &buf);
        last[pg] = round;
      }
      if (rg_pgcache_count(c) > max) max = (unsigned)rg_pgcache_count(c);
      pg = rnd() % 200;
      if ((img = rg_pgcache_get(c, pg)) != NULL) {
        uint32_t v;
        memcpy(&v, img, 4);
        if (v != last[pg]) ok = 0;
      }
    }
    CHECK(ok);
    CHECK(max == 16);
    rg_pgcache_clear(c);
    CHECK(rg_pgcache_count(c) == 0 && rg_pgcache_get(c, 1) == NULL);
    free(buf);
    rg_pgcache_free(c);
  }
}
/* }===================================================================== */

int main (void) {
  test_pagedelta();
  test_ranges();
  test_seam();
  test_remote();
  test_items();
  test_bulk();
  test_spill();
  test_patch();
  test_feed();
  test_processor();
  test_growth();
  printf("store_test: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
