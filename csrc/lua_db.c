/*
** lua_db.c: the Lua binding of a database handle, and luaopen.
**
** A handle ("regolith.db" userdata) follows liolib's pattern: it is created
** closed (env NULL) before the environment is opened, so that a failure or
** an error never leaves a half-made handle with a resource; close is
** idempotent and shared by __gc and __close; every method but close and
** __tostring refuses a closed handle.  Container handles keep their
** database handle alive through their uservalue, and refuse to work once
** it is closed.
**
** Conventions (SPEC 2.1): misuse (wrong argument types, unknown options,
** option values of the wrong type or range) raises a Lua error; expected
** failures return nil, message, status; success returns a result and an
** info table with `charge` and `status`.
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regolith.h"

#define DROP_CHUNK 20000


/*
** {=====================================================================
** Shared helpers of the binding
** ======================================================================
*/
int rg_push_fail (lua_State *L, const rg_err *e) {
  lua_pushnil(L);
  lua_pushstring(L, e->msg);
  lua_pushinteger(L, e->status);
  return 3;
}

void rg_push_info (lua_State *L, const rg_work *w, int status) {
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, w ? rg_charge(w) : 0.0);
  lua_setfield(L, -2, "charge");
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
}

void rg_opts_check (lua_State *L, int idx, const char *const *allowed,
                    const char *what) {
  if (lua_isnoneornil(L, idx)) return;
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_error(L, "%s: options must be a table, not %s", what,
               luaL_typename(L, idx));
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    const char *const *a;
    const char *k;
    size_t n;
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s: option names must be strings", what);
    k = lua_tolstring(L, -1, &n);
    for (a = allowed; *a; a++)       /* "sync\0x" is no "sync" */
      if (strlen(*a) == n && memcmp(*a, k, n) == 0) break;
    if (*a == NULL)
      luaL_error(L, "%s: unknown option '%s'%s", what, k,
                 strlen(k) != n ? " (followed by a NUL byte)" : "");
  }
}

void rg_add_methods (lua_State *L, const char *mt, const luaL_Reg *funcs) {
  luaL_getmetatable(L, mt);
  lua_getfield(L, -1, "__index");
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 2);
}

/* Option getters: absent gives the default; a wrong type or range raises. */
lua_Integer rg_opt_int (lua_State *L, int idx, const char *name,
                        lua_Integer def, lua_Integer lo, lua_Integer hi,
                        const char *what) {
  lua_Number d;
  lua_Integer v = 0;
  if (lua_isnoneornil(L, idx)) return def;
  lua_getfield(L, idx, name);
  if (lua_isnil(L, -1)) { lua_pop(L, 1); return def; }
  d = lua_tonumber(L, -1);
  /* range first: converting a double outside it (or NaN) is undefined */
  if (lua_type(L, -1) != LUA_TNUMBER || !(d >= (lua_Number)lo &&
      d <= (lua_Number)hi) || floor(d) != d) {
    char range[64];                  /* lua_pushfstring knows no %lld */
    snprintf(range, sizeof(range), "%lld to %lld", (long long)lo,
             (long long)hi);
    luaL_error(L, "%s: option '%s' must be an integer from %s", what, name,
               range);
  }
  v = (lua_Integer)d;
#if !RG_LUAJIT
  if (lua_isinteger(L, -1)) v = lua_tointeger(L, -1);
#endif
  lua_pop(L, 1);
  return v;
}

/* A string option; the value stays valid while the options table lives. */
const char *rg_opt_lstring (lua_State *L, int idx, const char *name,
                            size_t *len, const char *what) {
  const char *s;
  *len = 0;
  if (lua_isnoneornil(L, idx)) return NULL;
  lua_getfield(L, idx, name);
  if (lua_isnil(L, -1)) { lua_pop(L, 1); return NULL; }
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "%s: option '%s' must be a string", what, name);
  s = lua_tolstring(L, -1, len);
  lua_pop(L, 1);                     /* still referenced by the table */
  return s;
}

const char *rg_opt_string (lua_State *L, int idx, const char *name,
                           const char *what) {
  size_t n;
  const char *s = rg_opt_lstring(L, idx, name, &n, what);
  if (s && strlen(s) != n)           /* C would read "full\0x" as "full" */
    luaL_error(L, "%s: option '%s' must not contain NUL", what, name);
  return s;
}

int rg_opt_text (const char *s, size_t n, const char *name, rg_err *e) {
  if (s && strlen(s) != n)
    return rg_fail(e, 400, "option '%s' must not contain NUL", name);
  return 0;
}

int rg_opt_bool (lua_State *L, int idx, const char *name, int def,
                 const char *what) {
  int v;
  if (lua_isnoneornil(L, idx)) return def;
  lua_getfield(L, idx, name);
  if (lua_isnil(L, -1)) { lua_pop(L, 1); return def; }
  if (lua_type(L, -1) != LUA_TBOOLEAN)
    luaL_error(L, "%s: option '%s' must be a boolean", what, name);
  v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
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
/* }===================================================================== */


/*
** {=====================================================================
** The handle
** ======================================================================
*/
static rg_db *todb (lua_State *L, int idx) {
  return (rg_db *)luaL_checkudata(L, idx, RG_DB_MT);
}

rg_db *rg_checkdb (lua_State *L, int idx) {
  rg_db *d = todb(L, idx);
  if (d->env == NULL) luaL_error(L, "attempt to use a closed database");
  return d;
}

static int db_close (lua_State *L) {
  rg_db *d = todb(L, 1);
  if (d->env != NULL) {
    if (d->env->scope != NULL && d->env->refs == 1)
      return luaL_error(L, "cannot close the database inside its own "
                        "transaction");
    rg_env_release(d->env);
    d->env = NULL;
  }
  return 0;
}

static int db_gc (lua_State *L) {
  rg_db *d = todb(L, 1);
  if (d->env != NULL && d->env->scope == NULL) {
    rg_env_release(d->env);
    d->env = NULL;
  }
  return 0;
}

static int db_tostring (lua_State *L) {
  rg_db *d = todb(L, 1);
  if (d->env == NULL) lua_pushliteral(L, "regolith.db (closed)");
  else lua_pushfstring(L, "regolith.db (%s)", d->env->path);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** The catalog: creating, finding, listing and deleting containers
** ======================================================================
*/
static int meta_get (MDB_txn *txn, rg_env *env, const void *k, size_t kn,
                     MDB_val *v) {
  MDB_val key;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  return mdb_get(txn, env->dbi[RG_DB_META], &key, v);
}

/* Finds a container's id by name: 0, or 404. */
static int find_cid (MDB_txn *txn, rg_env *env, const char *name, size_t n,
                     uint32_t *cid, rg_err *e) {
  uint8_t key[5 + RG_MAX_NAME];
  MDB_val v;
  int rc = meta_get(txn, env, key, rg_meta_key(key, RG_MK_NAME, 0, name, n),
                    &v);
  if (rc == MDB_NOTFOUND)
    return rg_fail(e, 404, "container '%s' not found", name);
  if (rc) return rg_fail_mdb(e, rc, "catalog");
  if (v.mv_size != 4) return rg_fail(e, 500, "corrupt catalog entry");
  *cid = rg_get_u32((const uint8_t *)v.mv_data);
  return 0;
}

/* Loads and builds a container's spec. */
int rg_load_spec (MDB_txn *txn, rg_env *env, uint32_t cid, rg_cspec **out,
                  rg_err *e) {
  uint8_t key[8];
  MDB_val v;
  cJSON *j = NULL;
  int rc = meta_get(txn, env, key, rg_meta_key(key, RG_MK_SPEC, cid, NULL, 0),
                    &v);
  if (rc == MDB_NOTFOUND) return rg_fail(e, 404, "container not found");
  if (rc) return rg_fail_mdb(e, rc, "catalog");
  if ((rc = rg_json_parse((const char *)v.mv_data, v.mv_size, &j, e)))
    return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
  rc = rg_cspec_build(j, cid, out, e);
  cJSON_Delete(j);
  if (rc) return rg_fail(e, 500, "corrupt container spec: %s", e->msg);
  return 0;
}

typedef struct create_req {
  const char *name;
  size_t namelen;
  const char *spec;            /* JSON text */
  size_t specn;
  int max;
  uint32_t cid;
} create_req;

static int count_containers (MDB_txn *txn, rg_env *env, int *n) {
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t from[5];
  int rc;
  *n = 0;
  if ((rc = mdb_cursor_open(txn, env->dbi[RG_DB_META], &cur))) return rc;
  k.mv_data = from;
  k.mv_size = rg_meta_key(from, RG_MK_NAME, 0, NULL, 0);
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0 && k.mv_size >= 5 && memcmp(k.mv_data, from, 5) == 0) {
    (*n)++;
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

static int create_body (rg_scope *s, void *ud, rg_err *e) {
  create_req *q = (create_req *)ud;
  uint8_t key[5 + RG_MAX_NAME], buf[4];
  MDB_val v;
  uint32_t last = 0;
  int rc = meta_get(s->txn, s->env, key,
                    rg_meta_key(key, RG_MK_NAME, 0, q->name, q->namelen), &v);
  if (rc == 0)
    return rg_fail(e, 409, "container '%s' already exists", q->name);
  if (rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "catalog", e);
  if (q->max > 0) {
    int n;
    if ((rc = count_containers(s->txn, s->env, &n)))
      return rg_scope_mdb(s, rc, "catalog", e);
    if (n >= q->max)
      return rg_fail(e, 403, "the database already holds its maximum of %d "
                     "containers", q->max);
  }
  rc = meta_get(s->txn, s->env, RG_META_CID, sizeof(RG_META_CID) - 1, &v);
  if (rc == 0 && v.mv_size == 4) last = rg_get_u32((const uint8_t *)v.mv_data);
  else if (rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "catalog", e);
  q->cid = last + 1;
  rg_put_u32(buf, q->cid);
  if ((rc = rg_put(s, RG_DB_META, RG_META_CID, sizeof(RG_META_CID) - 1, buf, 4, e)) ||
      (rc = rg_put(s, RG_DB_META, key, rg_meta_key(key, RG_MK_NAME, 0, q->name,
                                         q->namelen), buf, 4, e)) ||
      (rc = rg_put(s, RG_DB_META, key, rg_meta_key(key, RG_MK_SPEC, q->cid, NULL, 0),
                     q->spec, q->specn, e)))
    return rc;
  return 0;
}

/* db:create_container(name, opts) -> container, info */
static int db_create_container (lua_State *L) {
  static const char *const allowed[] = {
    "partition_key", "physical_partitions", "indexing", "unique_keys",
    "default_ttl", "max_partition_bytes", "change_feed", NULL
  };
  rg_db *d = rg_checkdb(L, 1);
  rg_err e;
  create_req q;
  cJSON *j = NULL, *nm;
  rg_cspec *spec = NULL;
  rg_buf text;
  int bad, rc;
  q.name = check_name(L, 2, &q.namelen, "a container name", &e, &bad);
  luaL_checktype(L, 3, LUA_TTABLE);
  rg_opts_check(L, 3, allowed, "create_container");
  if (bad) return rg_push_fail(L, &e);
  if (rg_json_from_lua(L, 3, &j, &e))
    return luaL_error(L, "create_container: %s", e.msg);
  nm = rg_str_new(q.name, q.namelen);
  if (nm == NULL) { cJSON_Delete(j); return luaL_error(L, "out of memory"); }
  cJSON_AddItemToObject(j, "name", nm);
  rc = rg_cspec_build(j, 0, &spec, &e);
  if (rc) {
    cJSON_Delete(j);
    return luaL_error(L, "create_container: %s", e.msg);
  }
  rg_cspec_free(spec);
  rg_buf_init(&text);
  rg_json_print(j, &text);
  cJSON_Delete(j);
  if (text.oom) { rg_buf_free(&text); return luaL_error(L, "out of memory"); }
  q.spec = text.p;
  q.specn = text.n;
  q.max = d->max_containers;
  /* text.p is C memory; create_body raises no Lua error that could leak it */
  if (d->readonly) {
    rg_buf_free(&text);
    rg_fail(&e, 403, "the database is open read-only");
    return rg_push_fail(L, &e);
  }
  rc = rg_scope_run(L, d->env, d->sync, 1, create_body, &q, &e);
  rg_buf_free(&text);
  if (rc) return rg_push_fail(L, &e);
  {
    MDB_txn *txn;
    if ((rc = rg_read_begin(d->env, &txn, &e))) return rg_push_fail(L, &e);
    rc = rg_load_spec(txn, d->env, q.cid, &spec, &e);
    rg_read_end(d->env);
    if (rc) return rg_push_fail(L, &e);
  }
  rg_push_container(L, 1, spec);
  rg_push_info(L, NULL, 201);
  return 2;
}

/* db:container(name) -> container | nil, msg, 404 */
static int db_container (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  rg_err e;
  MDB_txn *txn;
  rg_cspec *spec = NULL;
  uint32_t cid;
  size_t n;
  int bad, rc;
  const char *name = check_name(L, 2, &n, "a container name", &e, &bad);
  if (bad) return rg_push_fail(L, &e);
  if ((rc = rg_read_begin(d->env, &txn, &e))) return rg_push_fail(L, &e);
  rc = find_cid(txn, d->env, name, n, &cid, &e);
  if (rc == 0) rc = rg_load_spec(txn, d->env, cid, &spec, &e);
  rg_read_end(d->env);
  if (rc) return rg_push_fail(L, &e);
  rg_push_container(L, 1, spec);
  return 1;
}

/* db:containers() -> {name, ...} (sorted by name) */
static int db_containers (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  rg_err e;
  MDB_txn *txn;
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t from[5];
  int rc, n = 0;
  if ((rc = rg_read_begin(d->env, &txn, &e))) return rg_push_fail(L, &e);
  lua_newtable(L);
  if ((rc = mdb_cursor_open(txn, d->env->dbi[RG_DB_META], &cur)) == 0) {
    k.mv_data = from;
    k.mv_size = rg_meta_key(from, RG_MK_NAME, 0, NULL, 0);
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size > 5 && memcmp(k.mv_data, from, 5) == 0) {
      lua_pushlstring(L, (const char *)k.mv_data + 5, k.mv_size - 5);
      lua_rawseti(L, -2, ++n);
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
  }
  rg_read_end(d->env);
  if (rc && rc != MDB_NOTFOUND) {
    rg_fail_mdb(&e, rc, "catalog");
    return rg_push_fail(L, &e);
  }
  return 1;
}

typedef struct drop_req {
  const char *name;
  size_t namelen;
  uint32_t cid;
  int done;
} drop_req;

/* Takes a container out of the catalog and marks its data for removal. */
static int unlist_body (rg_scope *s, void *ud, rg_err *e) {
  drop_req *q = (drop_req *)ud;
  uint8_t key[5 + RG_MAX_NAME], buf[4];
  int rc;
  if ((rc = find_cid(s->txn, s->env, q->name, q->namelen, &q->cid, e)))
    return rc;
  if ((rc = rg_del(s, RG_DB_META, key,
                   rg_meta_key(key, RG_MK_NAME, 0, q->name, q->namelen),
                   NULL, e)) ||
      (rc = rg_del(s, RG_DB_META, key,
                   rg_meta_key(key, RG_MK_SPEC, q->cid, NULL, 0), NULL, e)))
    return rc;
  rg_put_u32(buf, q->cid);
  return rg_put(s, RG_DB_META, key, rg_meta_key(key, RG_MK_DROP, q->cid, NULL, 0), buf,
                  4, e);
}

/* Removes a chunk of a dropped container's data; q->done when all gone. */
static int drop_body (rg_scope *s, void *ud, rg_err *e) {
  static const int tags[] = { RG_MK_STATS, RG_MK_PROC, RG_MK_TRIG,
                              RG_MK_LEASE, RG_MK_DEAD };
  drop_req *q = (drop_req *)ud;
  uint8_t prefix[5];
  uint64_t budget = DROP_CHUNK, n;
  int db, i, rc;
  q->done = 0;
  rg_put_u32(prefix, q->cid);
  for (db = RG_DB_ITEMS; db < RG_NDB; db++) {
    if ((rc = rg_del_prefix(s, db, prefix, 4, budget, &n, e))) return rc;
    budget -= n;
  }
  for (i = 0; i < (int)(sizeof(tags) / sizeof(tags[0])); i++) {
    if ((rc = rg_del_prefix(s, RG_DB_META, prefix,
                            rg_meta_key(prefix, tags[i], q->cid, NULL, 0),
                            budget, &n, e)))
      return rc;
    budget -= n;
  }
  if (budget > 0) {                  /* everything is gone */
    if ((rc = rg_del(s, RG_DB_META, prefix,
                     rg_meta_key(prefix, RG_MK_DROP, q->cid, NULL, 0), NULL,
                     e)))
      return rc;
    q->done = 1;
  }
  return 0;
}

static int drop_data (lua_State *L, rg_db *d, drop_req *q, rg_err *e) {
  int rc;
  do {
    if ((rc = rg_scope_run(L, d->env, d->sync, 0, drop_body, q, e))) return rc;
  } while (!q->done);
  return 0;
}

/* Finishes the deletions a crash interrupted. */
static int resume_drops (lua_State *L, rg_db *d, rg_err *e) {
  for (;;) {
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    uint8_t from[1] = { RG_MK_DROP };
    drop_req q;
    int rc, found = 0;
    if ((rc = rg_read_begin(d->env, &txn, e))) return rc;
    if ((rc = mdb_cursor_open(txn, d->env->dbi[RG_DB_META], &cur)) == 0) {
      k.mv_data = from;
      k.mv_size = 1;
      rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
      if (rc == 0 && k.mv_size == 5 && ((uint8_t *)k.mv_data)[0] == RG_MK_DROP) {
        q.cid = rg_get_u32((const uint8_t *)k.mv_data + 1);
        found = 1;
      }
      mdb_cursor_close(cur);
    }
    rg_read_end(d->env);
    if (!found) return 0;
    if ((rc = drop_data(L, d, &q, e))) return rc;
  }
}

/* db:delete_container(name) -> true, info */
static int db_delete_container (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  rg_err e;
  drop_req q;
  int bad;
  q.name = check_name(L, 2, &q.namelen, "a container name", &e, &bad);
  if (bad) return rg_push_fail(L, &e);
  if (d->env->scope != NULL)
    return luaL_error(L, "delete_container cannot run inside a transaction");
  if (d->readonly) {
    rg_fail(&e, 403, "the database is open read-only");
    return rg_push_fail(L, &e);
  }
  if (rg_scope_run(L, d->env, d->sync, 0, unlist_body, &q, &e) ||
      drop_data(L, d, &q, &e))
    return rg_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rg_push_info(L, NULL, 204);
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Statistics, backup, TTL purge
** ======================================================================
*/
/* db:stats() -> {map_size, used_bytes, page_size, lsn, items, bytes,
**               containers = {name = {items, bytes}}} */
static int db_stats (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  rg_err e;
  MDB_envinfo info;
  MDB_stat st;
  MDB_txn *txn;
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t from[5];
  uint64_t items = 0, bytes = 0;
  int rc;
  /* after the read begins: it adopts a map another process grew, and
  ** refuses an environment without one */
  if ((rc = rg_read_begin(d->env, &txn, &e))) return rg_push_fail(L, &e);
  mdb_env_info(d->env->mdb, &info);
  mdb_env_stat(d->env->mdb, &st);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, (lua_Integer)info.me_mapsize);
  lua_setfield(L, -2, "map_size");
  lua_pushinteger(L, (lua_Integer)((info.me_last_pgno + 1) * st.ms_psize));
  lua_setfield(L, -2, "used_bytes");
  lua_pushinteger(L, (lua_Integer)st.ms_psize);
  lua_setfield(L, -2, "page_size");
  lua_pushinteger(L, (lua_Integer)info.me_numreaders);
  lua_setfield(L, -2, "readers");
  rc = meta_get(txn, d->env, RG_META_LSN, sizeof(RG_META_LSN) - 1, &v);
  lua_pushinteger(L, rc == 0 && v.mv_size == 8 ?
                  (lua_Integer)rg_get_u64((const uint8_t *)v.mv_data) : 0);
  lua_setfield(L, -2, "lsn");
  lua_newtable(L);
  if (mdb_cursor_open(txn, d->env->dbi[RG_DB_META], &cur) == 0) {
    k.mv_data = from;
    k.mv_size = rg_meta_key(from, RG_MK_NAME, 0, NULL, 0);
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size > 5 && memcmp(k.mv_data, from, 5) == 0) {
      uint8_t sk[8];
      MDB_val sv;
      uint64_t n = 0, b = 0;
      if (v.mv_size == 4 &&
          meta_get(txn, d->env, sk, rg_meta_key(sk, RG_MK_STATS,
                   rg_get_u32((const uint8_t *)v.mv_data), NULL, 0), &sv) == 0
          && sv.mv_size == 16) {
        n = rg_get_u64((const uint8_t *)sv.mv_data);
        b = rg_get_u64((const uint8_t *)sv.mv_data + 8);
      }
      lua_pushlstring(L, (const char *)k.mv_data + 5, k.mv_size - 5);
      lua_createtable(L, 0, 2);
      lua_pushinteger(L, (lua_Integer)n);
      lua_setfield(L, -2, "items");
      lua_pushinteger(L, (lua_Integer)b);
      lua_setfield(L, -2, "bytes");
      lua_rawset(L, -3);
      items += n;
      bytes += b;
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
  }
  rg_read_end(d->env);
  lua_setfield(L, -2, "containers");
  lua_pushinteger(L, (lua_Integer)items);
  lua_setfield(L, -2, "items");
  lua_pushinteger(L, (lua_Integer)bytes);
  lua_setfield(L, -2, "bytes");
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
  rg_db *d = rg_checkdb(L, 1);
  const char *path = check_path(L, 2);
  rg_err e;
  if (rg_env_backup(d->env, path, &e)) return rg_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rg_push_info(L, NULL, 200);
  return 2;
}

/* db:verify() -> true | nil, report */
static int db_verify (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  rg_buf report;
  int problems;
  rg_buf_init(&report);
  problems = rg_verify(d->env, &report);
  if (problems == 0) {
    rg_buf_free(&report);
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushnil(L);
  lua_pushlstring(L, report.p ? report.p : "", report.n);
  rg_buf_free(&report);
  return 2;
}

typedef struct purge_req {
  rg_cont c;
  int count;
} purge_req;

static int purge_body (rg_scope *s, void *ud, rg_err *e) {
  purge_req *q = (purge_req *)ud;
  int rc;
  q->count = 0;
  if ((rc = rg_cont_alive(s->txn, &q->c, e))) return rc == 404 ? 0 : rc;
  return rg_purge_expired(s, &q->c, &q->count, e);
}

/* db:purge_expired() -> count, info */
static int db_purge_expired (lua_State *L) {
  rg_db *d = rg_checkdb(L, 1);
  rg_err e;
  uint32_t cids[1024];
  if (d->readonly) {
    rg_fail(&e, 403, "the database is open read-only");
    return rg_push_fail(L, &e);
  }
  int n = 0, i, rc, total = 0;
  rg_work work;
  {                                  /* every container's id */
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    uint8_t from[1] = { RG_MK_SPEC };
    if ((rc = rg_read_begin(d->env, &txn, &e))) return rg_push_fail(L, &e);
    if (mdb_cursor_open(txn, d->env->dbi[RG_DB_META], &cur) == 0) {
      k.mv_data = from;
      k.mv_size = 1;
      rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
      while (rc == 0 && n < 1024 && k.mv_size == 5 &&
             ((uint8_t *)k.mv_data)[0] == RG_MK_SPEC) {
        cids[n++] = rg_get_u32((const uint8_t *)k.mv_data + 1);
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
      }
      mdb_cursor_close(cur);
    }
    rg_read_end(d->env);
  }
  memset(&work, 0, sizeof(work));
  for (i = 0; i < n; i++) {
    purge_req q;
    MDB_txn *txn;
    q.c.env = d->env;
    if ((rc = rg_read_begin(d->env, &txn, &e))) return rg_push_fail(L, &e);
    rc = rg_load_spec(txn, d->env, cids[i], &q.c.spec, &e);
    rg_read_end(d->env);
    if (rc == 404) continue;
    if (rc) return rg_push_fail(L, &e);
    if (!q.c.spec->ttl_on) { rg_cspec_free(q.c.spec); continue; }
    rc = rg_scope_run(L, d->env, d->sync, 0, purge_body, &q, &e);
    rg_cspec_free(q.c.spec);
    if (rc) return rg_push_fail(L, &e);
    total += q.count;
  }
  lua_pushinteger(L, total);
  rg_push_info(L, &work, 200);
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Opening
** ======================================================================
*/
/* regolith.open(path, opts) -> db | nil, msg, status */
static int l_open (lua_State *L) {
  static const char *const allowed[] = {
    "sync", "map_size", "readonly", "script_budget", "script_memory",
    "max_containers", NULL
  };
  static const char *const syncs[] = { "full", "lazy", "none", NULL };
  const char *path = check_path(L, 1);
  const char *sync;
  rg_open_opts o;
  rg_db *d;
  rg_err e;
  int i;
  rg_opts_check(L, 2, allowed, "open");
  memset(&o, 0, sizeof(o));
  o.sync = RG_SYNC_FULL;
  sync = rg_opt_string(L, 2, "sync", "open");
  if (sync) {
    for (i = 0; syncs[i]; i++) if (strcmp(sync, syncs[i]) == 0) break;
    if (syncs[i] == NULL)
      return luaL_error(L, "open: option 'sync' must be \"full\", \"lazy\" "
                        "or \"none\"");
    o.sync = i;
  }
  o.map_size = (size_t)rg_opt_int(L, 2, "map_size", 0, 1 << 16,
                                  (lua_Integer)1 << 50, "open");
  o.readonly = rg_opt_bool(L, 2, "readonly", 0, "open");
  d = (rg_db *)rg_newuserdata(L, sizeof(rg_db));
  memset(d, 0, sizeof(*d));               /* closed until opened */
  luaL_getmetatable(L, RG_DB_MT);
  lua_setmetatable(L, -2);
  d->sync = o.sync;
  d->readonly = o.readonly;
  d->script_budget = rg_opt_int(L, 2, "script_budget", 0, 1,
                                (lua_Integer)1 << 50, "open");
  d->script_memory = rg_opt_int(L, 2, "script_memory", 0, 1 << 16,
                                (lua_Integer)1 << 40, "open");
  d->max_containers = (int)rg_opt_int(L, 2, "max_containers", 0, 1, 1 << 20,
                                      "open");
  if (rg_env_open(path, &o, &d->env, &e)) return rg_push_fail(L, &e);
  if (rg_script_limits(d->env, (uint64_t)d->script_budget,
                       (uint64_t)d->script_memory, &e)) {
    rg_env_release(d->env);
    d->env = NULL;
    return rg_push_fail(L, &e);
  }
  if (!o.readonly && resume_drops(L, d, &e)) return rg_push_fail(L, &e);
  return 1;
}

int luaopen_regolith_core (lua_State *L) {
  static const luaL_Reg db_methods[] = {
    {"close", db_close},
    {"create_container", db_create_container},
    {"container", db_container},
    {"containers", db_containers},
    {"delete_container", db_delete_container},
    {"stats", db_stats},
    {"backup", db_backup},
    {"purge_expired", db_purge_expired},
    {"verify", db_verify},
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
  static const luaL_Reg funcs[] = {
    {"open", l_open},
    {NULL, NULL}
  };
  luaL_newmetatable(L, RG_DB_MT);
  luaL_setfuncs(L, db_meta, 0);
  lua_newtable(L);
  luaL_setfuncs(L, db_methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  rg_container_open(L);
  rg_script_open(L);
  rg_query_open(L);
  lua_newtable(L);
  luaL_setfuncs(L, funcs, 0);
  rg_json_open(L);
  rg_feed_open(L);
  return 1;
}
/* }===================================================================== */
