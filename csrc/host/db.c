/*
** db.c: the Lua binding of a database handle: regolith.open and the db
** methods.
**
** A handle ("regolith.db" userdata) follows liolib's pattern: it is created
** closed (env NULL) before the environment is opened, so that a failure or
** an error never leaves a half-made handle with a resource; close is
** idempotent and shared by __gc and __close; every method but close and
** __tostring refuses a closed handle.  Container handles keep their
** database handle alive through their uservalue, and refuse to work once
** it is closed.
**
** Conventions (docs/api.md): misuse (wrong argument types, unknown
** options, option values of the wrong type or range) raises a Lua error;
** expected failures return nil, message, status; success returns a result
** and an info table with `charge` and `status`.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "host/binding.h"
#include "luax/luajson.h"
#include "script/script.h"
#include "store/catalog.h"
#include "store/queue.h"
#include "store/upgrade.h"
#include "store/verify.h"


/*
** {=====================================================================
** The handle
** ======================================================================
*/
static rg_db *todb (lua_State *L, int idx) {
  return (rg_db *)luaL_checkudata(L, idx, RG_DB_MT);
}

rg_db *rgl_checkdb (lua_State *L, int idx) {
  rg_db *d = todb(L, idx);
  if (d->env == NULL) luaL_error(L, "attempt to use a closed database");
  return d;
}

static int db_close (lua_State *L) {
  rg_db *d = todb(L, 1);
  if (d->env != NULL) {
    if (rg_env_scope(d->env) != NULL && rg_env_refs(d->env) == 1)
      return luaL_error(L, "cannot close the database inside its own "
                        "transaction");
    rg_env_release(d->env);
    d->env = NULL;
  }
  return 0;
}

static int db_gc (lua_State *L) {
  rg_db *d = todb(L, 1);
  if (d->env != NULL && rg_env_scope(d->env) == NULL) {
    rg_env_release(d->env);
    d->env = NULL;
  }
  return 0;
}

static int db_tostring (lua_State *L) {
  rg_db *d = todb(L, 1);
  if (d->env == NULL) lua_pushliteral(L, "regolith.db (closed)");
  else lua_pushfstring(L, "regolith.db (%s)", rg_env_path(d->env));
  return 1;
}

/* A name argument: a string (else misuse); the id rules give 400. */
static const char *check_name (lua_State *L, int idx, size_t *n,
                               const char *what, rg_err *e, int *bad) {
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "bad argument #%d: %s must be a string", idx - 1, what);
  s = lua_tolstring(L, idx, n);
  *bad = rg_check_id(s, *n, RG_MAX_NAME, what, e);
  return s;
}

static int readonly_fail (lua_State *L) {
  rg_err e;
  rg_fail(&e, 403, "the database is open read-only");
  return rgl_push_fail(L, &e);
}
/* }===================================================================== */


/*
** {=====================================================================
** Containers
** ======================================================================
*/
/* The stored form of a container's spec: the options at optsix
** (already checked for unknown keys) with the name and the current
** revision (a replaced container keeps its own: catalog.c), validated
** (misuse raises, naming `what`), in a boxed buffer left on the stack. */
static rg_buf *spec_text (lua_State *L, int optsix, const char *what,
                          const char *name, size_t namelen) {
  cJSON *j = NULL, *nm;
  rg_cspec *spec = NULL;
  rg_buf *text;
  rg_err e;
  if (rgl_json_from_lua(L, optsix, &j, &e))
    luaL_error(L, "%s: %s", what, e.msg);
  if (rg_vpolicy_normalize(j, &e)) {
    cJSON_Delete(j);
    luaL_error(L, "%s: %s", what, e.msg);
  }
  nm = rg_str_new(name, namelen);
  if (nm == NULL) { cJSON_Delete(j); luaL_error(L, "out of memory"); }
  cJSON_AddItemToObject(j, "name", nm);
  cJSON_AddNumberToObject(j, "revision", RG_SPEC_REVISION);
  if (rg_cspec_build(j, 0, &spec, &e)) {
    cJSON_Delete(j);
    luaL_error(L, "%s: %s", what, e.msg);
  }
  rg_cspec_free(spec);
  text = rgl_newbuf(L);              /* may raise: the tree is freed first */
  rg_json_print(j, text);
  cJSON_Delete(j);
  if (text->oom) luaL_error(L, "out of memory");
  return text;
}

/* db:create_container(name, opts) -> container, info (201) and
** db:replace_container(name, opts) -> container, info (200). */
static int container_call (lua_State *L, int replace) {
  static const char *const allowed[] = {
    "partition_key", "physical_partitions", "indexing", "unique_keys",
    "default_ttl", "max_partition_bytes", "change_feed",
    "computed_properties", "throughput", "full_text", "fullTextPolicy",
    "vector_embeddings", "vectorEmbeddingPolicy", NULL
  };
  const char *what = replace ? "replace_container" : "create_container";
  rg_db *d = rgl_checkdb(L, 1);
  const char *name;
  size_t namelen;
  rg_cspec *spec = NULL;
  rg_buf *text;
  rg_err e;
  int bad, rc;
  name = check_name(L, 2, &namelen, "a container name", &e, &bad);
  luaL_checktype(L, 3, LUA_TTABLE);
  rgl_opts_check(L, 3, allowed, what);
  if (bad) return rgl_push_fail(L, &e);
  text = spec_text(L, 3, what, name, namelen);
  if (d->readonly) return readonly_fail(L);
  if (replace)
    rc = rg_catalog_replace(d->env, d->sync, name, namelen, text->p, text->n,
                            &spec, &e);
  else
    rc = rg_catalog_create(d->env, d->sync, name, namelen, text->p, text->n,
                           d->max_containers, &spec, &e);
  rg_box_done(text);
  if (rc) return rgl_push_fail(L, &e);
  if (replace) rg_tp_replaced(d->env, spec->cid);
  else rg_tp_created(d->env, spec->cid);   /* its budget, or its counters */
  rgl_push_container(L, 1, spec);
  rgl_push_info(L, NULL, replace ? 200 : 201);
  return 2;
}

static int db_create_container (lua_State *L) {
  return container_call(L, 0);
}

static int db_replace_container (lua_State *L) {
  return container_call(L, 1);
}

/* db:container(name) -> container | nil, msg, 404 */
static int db_container (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_cspec *spec = NULL;
  rg_err e;
  size_t n;
  int bad;
  const char *name = check_name(L, 2, &n, "a container name", &e, &bad);
  if (bad) return rgl_push_fail(L, &e);
  if (rg_catalog_find(d->env, name, n, &spec, &e)) return rgl_push_fail(L, &e);
  rgl_push_container(L, 1, spec);
  return 1;
}

/* The containers with their counters, held in a box while they are pushed. */
typedef struct lbox {
  rg_buf names;
  rg_cstat *stats;
  int n;
  uint64_t lsn;
} lbox;

static void lbox_free (void *x) {
  lbox *g = (lbox *)x;
  rg_buf_free(&g->names);
  free(g->stats);
  g->stats = NULL;
}

static lbox *list_containers (lua_State *L, rg_db *d, rg_err *e) {
  lbox *g = (lbox *)rgl_newbox(L, sizeof(lbox), lbox_free);
  rg_buf_init(&g->names);
  if (rg_catalog_list(d->env, &g->names, &g->stats, &g->n, &g->lsn, e))
    return NULL;
  return g;
}

/* db:containers() -> {name, ...} (sorted by name) */
static int db_containers (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_err e;
  lbox *g = list_containers(L, d, &e);
  int i;
  if (g == NULL) return rgl_push_fail(L, &e);
  lua_createtable(L, g->n, 0);
  for (i = 0; i < g->n; i++) {
    lua_pushlstring(L, g->stats[i].name, g->stats[i].namelen);
    lua_rawseti(L, -2, i + 1);
  }
  rg_box_done(g);
  return 1;
}

/* db:delete_container(name) -> true, info */
static int db_delete_container (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  const char *name;
  size_t n;
  rg_err e;
  int bad;
  name = check_name(L, 2, &n, "a container name", &e, &bad);
  if (bad) return rgl_push_fail(L, &e);
  if (rg_env_scope(d->env) != NULL)
    return luaL_error(L, "delete_container cannot run inside a transaction");
  if (d->readonly) return readonly_fail(L);
  {
    rg_cspec *spec = NULL;
    uint32_t cid = 0;
    if (rg_catalog_find(d->env, name, n, &spec, &e) == 0) cid = spec->cid;
    rg_cspec_free(spec);
    if (rg_catalog_drop(d->env, d->sync, name, n, &e))
      return rgl_push_fail(L, &e);
    if (cid) rg_tp_dropped(d->env, cid);
  }
  lua_pushboolean(L, 1);
  rgl_push_info(L, NULL, 204);
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Statistics, backup, verify, TTL purge
** ======================================================================
*/

/* Pushes a table of counters: names[i] = v[i], up to the NULL name. */
static void push_counters (lua_State *L, const char *const *names,
                           const uint64_t *v) {
  int i;
  lua_newtable(L);
  for (i = 0; names[i]; i++) {
    lua_pushinteger(L, (lua_Integer)v[i]);
    lua_setfield(L, -2, names[i]);
  }
}
/* db:stats(opts) -> {map_size, used_bytes, page_size, readers, lsn, items,
**               bytes, throughput, containers = {name = {items, bytes,
**               throughput}}}; throughput: the counters of a budget
**               (host/throughput.c), where there is one; with opts.tables,
**               also tables = {name = {entries, bytes}} and free_bytes (a
**               walk over the whole index: not for hot paths) */
static int db_stats (lua_State *L) {
  static const char *const allowed[] = { "tables", NULL };
  rg_db *d = rgl_checkdb(L, 1);
  uint64_t items = 0, bytes = 0;
  rg_env_info info;
  rg_err e;
  lbox *g;
  int i, tables = 0;
  if (!lua_isnoneornil(L, 2)) {
    rgl_opts_check(L, 2, allowed, "stats");
    lua_getfield(L, 2, "tables");
    tables = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  /* after the listing's read: it adopts a map another process grew, and
  ** refuses an environment without one */
  if ((g = list_containers(L, d, &e)) == NULL) return rgl_push_fail(L, &e);
  rg_env_info_get(d->env, &info);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, (lua_Integer)info.map_size);
  lua_setfield(L, -2, "map_size");
  lua_pushinteger(L, (lua_Integer)info.used_bytes);
  lua_setfield(L, -2, "used_bytes");
  lua_pushinteger(L, (lua_Integer)info.page_size);
  lua_setfield(L, -2, "page_size");
  lua_pushinteger(L, (lua_Integer)info.readers);
  lua_setfield(L, -2, "readers");
  if (info.logged) {
    static const char *const names[] = { "records", "bytes", "flushes",
                                         "checkpoints", "checkpoints_locked",
                                         "deltas", NULL };
    const uint64_t v[] = { info.log_records, info.log_bytes, info.log_flushes,
                           info.log_checkpoints, info.log_checkpoints_locked,
                           info.log_deltas };
    push_counters(L, names, v);
    lua_setfield(L, -2, "log");
  }
  {
    static const char *const names[] = { "batches", "members", "waiting",
                                         NULL };
    rg_queue_stat qs;
    uint64_t v[3];
    rg_queue_stats(d->env, &qs);
    v[0] = qs.batches;
    v[1] = qs.members;
    v[2] = qs.waiting;
    push_counters(L, names, v);
    lua_setfield(L, -2, "queue");
  }
  lua_pushinteger(L, (lua_Integer)g->lsn);
  lua_setfield(L, -2, "lsn");
  lua_createtable(L, 0, g->n);
  for (i = 0; i < g->n; i++) {
    lua_pushlstring(L, g->stats[i].name, g->stats[i].namelen);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)g->stats[i].items);
    lua_setfield(L, -2, "items");
    lua_pushinteger(L, (lua_Integer)g->stats[i].bytes);
    lua_setfield(L, -2, "bytes");
    if (rgl_push_tpstat(L, d->env, g->stats[i].cid))
      lua_setfield(L, -2, "throughput");
    lua_rawset(L, -3);
    items += g->stats[i].items;
    bytes += g->stats[i].bytes;
  }
  lua_setfield(L, -2, "containers");
  if (rgl_push_tpstat(L, d->env, 0)) lua_setfield(L, -2, "throughput");
  lua_pushinteger(L, (lua_Integer)items);
  lua_setfield(L, -2, "items");
  lua_pushinteger(L, (lua_Integer)bytes);
  lua_setfield(L, -2, "bytes");
  rg_box_done(g);
  if (tables) {
    rg_table_stat ts[RG_NDB];
    uint64_t free_bytes;
    if (rg_env_tables(d->env, ts, &free_bytes, &e)) return rgl_push_fail(L, &e);
    lua_createtable(L, 0, RG_NDB);
    for (i = 0; i < RG_NDB; i++) {
      lua_createtable(L, 0, 2);
      lua_pushinteger(L, (lua_Integer)ts[i].entries);
      lua_setfield(L, -2, "entries");
      lua_pushinteger(L, (lua_Integer)ts[i].bytes);
      lua_setfield(L, -2, "bytes");
      lua_setfield(L, -2, rg_env_table_name(i));
    }
    lua_setfield(L, -2, "tables");
    lua_pushinteger(L, (lua_Integer)free_bytes);
    lua_setfield(L, -2, "free_bytes");
  }
  return 1;
}

/* A file system path argument: a string without NUL (the system would
** read "dir\0x" as "dir", another directory). */
static const char *check_path (lua_State *L, int arg) {
  size_t n;
  const char *path = luaL_checklstring(L, arg, &n);
  if (strlen(path) != n) luaL_argerror(L, arg, "a path must not contain NUL");
  return path;
}

/* db:backup(path) -> true, info */
static int db_backup (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  const char *path = check_path(L, 2);
  rg_err e;
  if (rg_env_backup(d->env, path, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rgl_push_info(L, NULL, 200);
  return 2;
}

/* db:compact(path) -> true, info (info.bytes: the copy's size) */
static int db_compact (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  const char *path = check_path(L, 2);
  uint64_t bytes;
  rg_err e;
  if (rg_env_compact(d->env, path, &bytes, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rgl_push_info(L, NULL, 200);
  lua_pushinteger(L, (lua_Integer)bytes);
  lua_setfield(L, -2, "bytes");
  return 2;
}

/* db:verify() -> true | nil, report */
static int db_verify (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_buf *report = rgl_newbuf(L);
  if (rg_verify(d->env, report) == 0) {
    rg_box_done(report);
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushnil(L);
  lua_pushlstring(L, report->p ? report->p : "", report->n);
  rg_box_done(report);
  return 2;
}

/* db:purge_expired() -> count, info */
static int db_purge_expired (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_work work;
  rg_err e;
  int count;
  if (d->readonly) return readonly_fail(L);
  if (rg_catalog_purge(d->env, d->sync, &count, &e))
    return rgl_push_fail(L, &e);
  memset(&work, 0, sizeof(work));
  lua_pushinteger(L, count);
  rgl_push_info(L, &work, 200);
  return 2;
}

/*
** db:group(fns) -> results, info | nil, msg, status
**
** Group commit: runs every function of the array fns in one write
** transaction, each in a savepoint of its own, and commits once.  A member
** that raises has its writes rolled back alone and the others go on; a
** write that fails inside a member rolls back alone, as it always does.
** results[i] is { true, <what fns[i] returned>, n = ... } or { false,
** <the error>, n = 2 }.  When the transaction cannot commit (a full disk:
** 507) or a storage failure ends it, nothing of any member is kept and the
** call fails as one.  Members must not yield (the transaction is open) and
** must be rerunnable (a map that runs out of room runs them all again).
*/
typedef struct group_q {
  lua_State *L;
  rg_db *d;
  int n, i;
} group_q;

/* Stores in results (index 3) at i: { ok, values from `from` to top }. */
static void group_result (lua_State *L, int i, int ok, int from) {
  int k, top = lua_gettop(L);
  lua_createtable(L, top - from + 2, 1);
  lua_pushboolean(L, ok);
  lua_rawseti(L, -2, 1);
  for (k = from; k <= top; k++) {
    lua_pushvalue(L, k);
    lua_rawseti(L, -2, k - from + 2);
  }
  lua_pushinteger(L, top - from + 2);
  lua_setfield(L, -2, "n");
  lua_rawseti(L, 3, i);
  lua_settop(L, from - 1);
}

static int member_body (rg_scope *s, void *ud, rg_err *e) {
  group_q *q = (group_q *)ud;
  lua_State *L = q->L;
  int top = lua_gettop(L);
  (void)s; (void)e;
  lua_rawgeti(L, 2, q->i);
  lua_call(L, 0, LUA_MULTRET);
  group_result(L, q->i, 1, top + 1);
  return 0;
}

static int group_body (rg_scope *s, void *ud, rg_err *e) {
  group_q *q = (group_q *)ud;
  lua_State *L = q->L;
  int i, rc;
  (void)s;
  for (i = 1; i <= q->n; i++) {        /* a rerun starts afresh */
    lua_pushnil(L);
    lua_rawseti(L, 3, i);
  }
  for (i = 1; i <= q->n; i++) {
    q->i = i;
    rc = rg_scope_run(q->d->env, rgl_protect, L, q->d->sync, 1, member_body,
                      q, e);
    if (rc == RG_RAISED)               /* the error is on top */
      group_result(L, i, 0, lua_gettop(L));
    else if (rc) return rc;            /* the transaction failed: all fail */
  }
  return 0;
}

static int db_group (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  group_q q;
  rg_err e;
  int i;
  luaL_checktype(L, 2, LUA_TTABLE);
  q.n = (int)rg_rawlen(L, 2);
  for (i = 1; i <= q.n; i++) {
    lua_rawgeti(L, 2, i);
    if (!lua_isfunction(L, -1))
      return luaL_error(L, "group: member %d is not a function", i);
    lua_pop(L, 1);
  }
  if (d->readonly) return readonly_fail(L);
  lua_settop(L, 2);
  lua_createtable(L, q.n, 0);          /* 3: the results */
  q.L = L;
  q.d = d;
  if (rgl_scope_run(L, d->env, d->sync, 0, group_body, &q, &e))
    return rgl_push_fail(L, &e);
  lua_settop(L, 3);
  rgl_push_info(L, NULL, 200);
  return 2;
}
/* }===================================================================== */


/*
** db:_queue(request, exec) -> result | false | nil, msg, status
**
** The write queue's binding (store/queue.h), for lua/regolith/queue.lua,
** which makes the requests and results (text) and the function `exec`
** that runs one: exec(request) -> keep, result (keep false: undo its
** writes).  `exec` runs every request of a batch this process leads,
** whichever process queued it.  Returns the result of this request; false
** when the caller must run it itself (queue.h: RG_QUEUE_ALONE); nil, msg,
** status when the transaction that held it failed.  A result is text
** whose first byte says what follows: 'R' the results, 'D' a document
** as the JSON text the write printed (after the JSON of its `info` and a
** newline), 'E' the message of an error the request raised.
*/
typedef struct qcall {
  lua_State *L;
  int execix;
} qcall;

static int queue_run (void *host, const void *req, size_t n, rg_buf *res) {
  qcall *c = (qcall *)host;
  lua_State *L = c->L;
  int top = lua_gettop(L), keep;
  const char *out;
  size_t len;
  lua_pushvalue(L, c->execix);
  lua_pushlstring(L, (const char *)req, n);
  lua_call(L, 1, 2);
  keep = lua_toboolean(L, top + 1);
  if ((out = lua_tolstring(L, top + 2, &len)) != NULL)
    rg_buf_add(res, out, len);
  else {
    rg_buf_adds(res, "Equeue: exec gave no result");
    keep = 0;
  }
  lua_settop(L, top);
  return !keep;
}

/* The error a request raised is on top of the stack: 'E' and its text. */
static void queue_raised (void *host, rg_buf *res) {
  qcall *c = (qcall *)host;
  lua_State *L = c->L;
  const char *msg = lua_tostring(L, -1);
  rg_buf_addc(res, 'E');
  rg_buf_adds(res, msg ? msg : "(an error object that is not a string)");
  lua_pop(L, 1);
}

static int db_queue (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  size_t n;
  const char *req = luaL_checklstring(L, 2, &n);
  rg_qhost h;
  qcall c;
  rg_buf *res;
  rg_err e;
  int rc;
  luaL_checktype(L, 3, LUA_TFUNCTION);
  lua_settop(L, 3);
  if (d->readonly) return readonly_fail(L);
  res = rgl_newbuf(L);                 /* 4 */
  c.L = L;
  c.execix = 3;
  h.protect = rgl_protect;
  h.host = L;
  h.ud = &c;
  h.run = queue_run;
  h.raised = queue_raised;
  rc = rg_queue_write(d->env, d->sync, &h, req, n, res, &e);
  if (rc == RG_QUEUE_ALONE) {
    rg_box_done(res);
    lua_pushboolean(L, 0);
    return 1;
  }
  if (rc) {
    rg_box_done(res);
    return rgl_push_fail(L, &e);
  }
  lua_pushlstring(L, res->p ? res->p : "", res->n);
  rg_box_done(res);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Opening
** ======================================================================
*/
/*
** regolith.open(path, opts) -> db | nil, msg, status; and, for the cluster
** module (lua/regolith/cluster), regolith.core._open_remote(name, secret,
** opts): a database whose tables its host keeps (remote.h), with the
** options of a local one but map_size.
*/
static int open_db (lua_State *L, int remote) {
  static const char *const allowed[] = {
    "sync", "map_size", "readonly", "script_budget", "script_memory",
    "max_containers", "retry_throttled", "query_memory_items", "query_time",
    "log_deltas", NULL
  };
  static const char *const syncs[] = { "full", "lazy", "none", NULL };
  const char *path = remote ? luaL_checkstring(L, 1) : check_path(L, 1);
  const char *sync;
  rg_open_opts o;
  rg_db *d;
  rg_err e;
  int i, optidx = remote ? 3 : 2;
  if (remote) {
    size_t n;
    (void)luaL_checklstring(L, 2, &n);
    luaL_argcheck(L, n == 16, 2, "a database secret is 16 bytes");
    lua_pushvalue(L, 3);               /* the options at 2 for what follows */
    lua_replace(L, 2);
    optidx = 2;
  }
  rgl_opts_check(L, optidx, allowed, "open");
  memset(&o, 0, sizeof(o));
  o.sync = RG_SYNC_FULL;
  sync = rgl_opt_string(L, 2, "sync", "open");
  if (sync) {
    for (i = 0; syncs[i]; i++) if (strcmp(sync, syncs[i]) == 0) break;
    if (syncs[i] == NULL)
      return luaL_error(L, "open: option 'sync' must be \"full\", \"lazy\" "
                        "or \"none\"");
    o.sync = i;
  }
  o.map_size = (size_t)rgl_opt_int(L, 2, "map_size", 0, 1 << 16,
                                   (lua_Integer)1 << 50, "open");
  o.readonly = rgl_opt_bool(L, 2, "readonly", 0, "open");
  o.log_deltas = rgl_opt_bool(L, 2, "log_deltas", 0, "open");
  d = (rg_db *)rg_newuserdata(L, sizeof(rg_db));
  memset(d, 0, sizeof(*d));               /* closed until opened */
  luaL_getmetatable(L, RG_DB_MT);
  lua_setmetatable(L, -2);
  d->sync = o.sync;
  d->readonly = o.readonly;
  d->script_budget = rgl_opt_int(L, 2, "script_budget", 0, 1,
                                 (lua_Integer)1 << 50, "open");
  d->script_memory = rgl_opt_int(L, 2, "script_memory", 0, 1 << 16,
                                 (lua_Integer)1 << 40, "open");
  d->max_containers = (int)rgl_opt_int(L, 2, "max_containers", 0, 1, 1 << 20,
                                       "open");
  d->retry_throttled = (int)rgl_opt_int(L, 2, "retry_throttled", 0, 0, 1000,
                                        "open");
  d->memory_items = (long)rgl_opt_int(L, 2, "query_memory_items",
                                      RG_MEMORY_ITEMS, 0, 1 << 20, "open");
  if (d->memory_items == 0) d->memory_items = -1;       /* never */
  d->query_time = RG_QUERY_TIME;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "query_time");
    if (!lua_isnil(L, -1)) {
      lua_Number t = lua_tonumber(L, -1);
      if (lua_type(L, -1) != LUA_TNUMBER || !(t >= 0 && t <= 1e6))
        return luaL_error(L, "open: option 'query_time' must be a number of "
                          "seconds from 0 (0: no limit) to 1e6");
      d->query_time = (double)t;
    }
    lua_pop(L, 1);
  }
  if (remote) {
    const char *secret = lua_tostring(L, 4);
    if (rg_env_open_remote(path, (const uint8_t *)secret, o.readonly, &d->env,
                           &e))
      return rgl_push_fail(L, &e);
  }
  else if (rg_env_open(path, &o, &d->env, &e)) return rgl_push_fail(L, &e);
  if (rg_script_limits(d->env, (uint64_t)d->script_budget,
                       (uint64_t)d->script_memory, &e)) {
    rg_env_release(d->env);
    d->env = NULL;
    return rgl_push_fail(L, &e);
  }
  if (!remote && !o.readonly && rg_catalog_resume_drops(d->env, d->sync, &e))
    return rgl_push_fail(L, &e);
  return 1;
}

static int l_open (lua_State *L) { return open_db(L, 0); }

static int l_open_remote (lua_State *L) {
  lua_settop(L, 3);
  lua_pushvalue(L, 2);                 /* the secret, kept at 4 */
  return open_db(L, 1);
}

/* regolith.upgrade(path, opts) -> true, info | nil, msg, status.
** opts.history "keep" (the default) or "drop"; opts.keep_old (default
** true: the old data file stays as data.mdb.format1).  info = {from, to,
** upgraded, containers, items, feed_records, old_bytes, new_bytes,
** old_file}. */
static int l_upgrade (lua_State *L) {
  static const char *const allowed[] = { "history", "keep_old", NULL };
  const char *path = check_path(L, 1);
  const char *history;
  rg_upgrade_opts o;
  rg_upgrade_info info;
  rg_err e;
  lua_settop(L, 2);
  rgl_opts_check(L, 2, allowed, "upgrade");
  history = rgl_opt_string(L, 2, "history", "upgrade");
  if (history && strcmp(history, "keep") != 0 && strcmp(history, "drop") != 0)
    return luaL_error(L, "upgrade: history must be \"keep\" or \"drop\"");
  memset(&o, 0, sizeof(o));
  o.drop_history = history && strcmp(history, "drop") == 0;
  o.remove_old = !rgl_opt_bool(L, 2, "keep_old", 1, "upgrade");
  if (rg_upgrade(path, &o, &info, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rgl_push_info(L, NULL, 200);
  lua_pushinteger(L, info.from);
  lua_setfield(L, -2, "from");
  lua_pushinteger(L, info.to);
  lua_setfield(L, -2, "to");
  lua_pushboolean(L, info.from != info.to);
  lua_setfield(L, -2, "upgraded");
  lua_pushinteger(L, (lua_Integer)info.containers);
  lua_setfield(L, -2, "containers");
  lua_pushinteger(L, (lua_Integer)info.items);
  lua_setfield(L, -2, "items");
  lua_pushinteger(L, (lua_Integer)info.feed_records);
  lua_setfield(L, -2, "feed_records");
  lua_pushinteger(L, (lua_Integer)info.old_bytes);
  lua_setfield(L, -2, "old_bytes");
  lua_pushinteger(L, (lua_Integer)info.new_bytes);
  lua_setfield(L, -2, "new_bytes");
  if (info.kept_old) {
    lua_pushfstring(L, "%s/data.mdb.format1", path);
    lua_setfield(L, -2, "old_file");
  }
  return 2;
}

void rgl_db_open (lua_State *L) {
  static const luaL_Reg db_methods[] = {
    {"close", db_close},
    {"create_container", db_create_container},
    {"replace_container", db_replace_container},
    {"container", db_container},
    {"containers", db_containers},
    {"delete_container", db_delete_container},
    {"stats", db_stats},
    {"backup", db_backup},
    {"compact", db_compact},
    {"purge_expired", db_purge_expired},
    {"verify", db_verify},
    {"group", db_group},
    {"_queue", db_queue},
    {NULL, NULL}
  };
  static const luaL_Reg db_meta[] = {
    {"__gc", db_gc},
#if LUA_VERSION_NUM >= 504
    {"__close", db_gc},
#endif
    {"__tostring", db_tostring},
    {NULL, NULL}
  };
  luaL_newmetatable(L, RG_DB_MT);
  luaL_setfuncs(L, db_meta, 0);
  lua_newtable(L);
  luaL_setfuncs(L, db_methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_open);
  lua_setfield(L, -2, "open");
  lua_pushcfunction(L, l_upgrade);
  lua_setfield(L, -2, "upgrade");
  lua_pushcfunction(L, l_open_remote);
  lua_setfield(L, -2, "_open_remote");
}
/* }===================================================================== */
