/*
** remote.c: the Lua side of a database whose tables a host keeps
** elsewhere (store/remote.h): the methods the cluster module
** (lua/regolith/cluster) drives a call with, on a database handle opened
** by regolith.core._open_remote.
**
**   db:_remote_reset(now_ms, keep_ms)     a new call
**   db:_remote_rerun()                    a run again, in the same call
**   db:_remote_state()  -> "done" | "fetch" | "apply"
**   db:_remote_needs()  -> {need...}, seqs wanted, {budget field...}: need = {cid, bucket,
**                          buckets, tb, key, range, after, back, limit}
**   db:_remote_feed_point(cid, bucket, buckets, tb, key, value|nil, now)
**   db:_remote_feed_range(cid, bucket, buckets, tb, lo, after, back,
**                         keys, values, done, version, now)
**   db:_remote_feed_seqs(first, n)
**   db:_remote_feed_tp(now_us, fields, words_us): the budgets' words the
**                          needs named (their third list), the host's clock
**   db:_remote_tp_spent() -> {field, us, ...}: the call is done; what it
**                          spent ("=us": a word set)
**   db:_remote_parts()  -> {{cid, bucket, buckets, data}...}, stand-in
**   db:_remote_applied(i, lsn), db:_remote_refused(i)
**   db:_in_scope()      -> is a write scope running (the call's own)?
**   db:_remote_complete() -> has every read so far been answered (and
**                            none contradicted by a fetch since)?
**   db:_remote_mark()   -> a mark in the running scope (scope.h);
**   db:_remote_back(m), db:_remote_keep(m): back to it, or keep what
**                          was done since
**   db:_remote_fetched() what the reads asked is fed: they are answered
**                          (a call inside a scope, run again alone)
**   c:_remote_bucket(pk) -> cid, bucket, buckets: the place of a logical
**                          partition's items (the specs of faults find
**                          its slot with it)
**
** A place is (cid, bucket, buckets); the global place's cid is
** 4294967295.  These raise on misuse (the module's own calls).
*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/binding.h"
#include "store/remote.h"

static rg_remote *toremote (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_remote *r = rg_env_remote(d->env);
  if (r == NULL) luaL_error(L, "not a cluster database");
  return r;
}

static void place_arg (lua_State *L, int i, rg_place *pl) {
  pl->cid = (uint32_t)luaL_checkinteger(L, i);
  pl->bucket = (uint32_t)luaL_checkinteger(L, i + 1);
  pl->buckets = (uint32_t)luaL_checkinteger(L, i + 2);
}

static int table_arg (lua_State *L, int i) {
  lua_Integer tb = luaL_checkinteger(L, i);
  luaL_argcheck(L, tb >= 0 && tb < RG_NDB, i, "no such table");
  return (int)tb;
}

static int m_reset (lua_State *L) {
  rg_remote_reset(toremote(L), (int64_t)luaL_checknumber(L, 2),
                  (int64_t)luaL_checknumber(L, 3));
  return 0;
}

static int m_rerun (lua_State *L) {
  rg_remote_rerun(toremote(L));
  return 0;
}

static int m_state (lua_State *L) {
  static const char *const names[] = { "done", "fetch", "apply" };
  lua_pushstring(L, names[rg_remote_state(toremote(L))]);
  return 1;
}

static void set_int (lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

/* A place's fields (cid, bucket, buckets) into the table on top. */
static void set_place (lua_State *L, const rg_place *pl) {
  set_int(L, "cid", pl->cid);
  set_int(L, "bucket", pl->bucket);
  set_int(L, "buckets", pl->buckets);
}

static int m_needs (lua_State *L) {
  rg_remote *r = toremote(L);
  const rg_need *v;
  size_t n = rg_remote_needs(r, &v), i;
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    lua_createtable(L, 0, 9);
    set_place(L, &v[i].pl);
    set_int(L, "tb", v[i].tb);
    lua_pushlstring(L, (const char *)v[i].k, v[i].kn);
    lua_setfield(L, -2, "key");
    if (v[i].range) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "range");
      lua_pushboolean(L, v[i].after);
      lua_setfield(L, -2, "after");
      lua_pushboolean(L, v[i].back);
      lua_setfield(L, -2, "back");
      set_int(L, "limit", v[i].limit);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, rg_remote_want_seqs(r));
  lua_newtable(L);                   /* the budgets' words it lacks */
  for (i = 0; rg_remote_tp_want(r, i) != NULL; i++) {
    lua_pushstring(L, rg_remote_tp_want(r, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 3;
}

static int m_feed_point (lua_State *L) {
  rg_remote *r = toremote(L);
  rg_place pl;
  size_t kn, vn = 0;
  const char *k, *v = NULL;
  int tb;
  place_arg(L, 2, &pl);
  tb = table_arg(L, 5);
  k = luaL_checklstring(L, 6, &kn);
  if (!lua_isnil(L, 7)) v = luaL_checklstring(L, 7, &vn);
  if (rg_remote_feed_point(r, &pl, tb, k, kn, v, vn,
                           (int64_t)luaL_checknumber(L, 8)))
    return luaL_error(L, "out of memory");
  return 0;
}

static int m_feed_range (lua_State *L) {
  rg_remote *r = toremote(L);
  rg_place pl;
  size_t lon, n, i;
  const char *lo;
  const void **ks, **vs;
  size_t *kns, *vns;
  int tb, after, back, done, rc;
  place_arg(L, 2, &pl);
  tb = table_arg(L, 5);
  lo = luaL_checklstring(L, 6, &lon);
  after = lua_toboolean(L, 7);
  back = lua_toboolean(L, 8);
  luaL_checktype(L, 9, LUA_TTABLE);
  luaL_checktype(L, 10, LUA_TTABLE);
  done = lua_toboolean(L, 11);
  n = (size_t)rg_rawlen(L, 9);
  ks = (const void **)calloc(n + 1, sizeof(void *));
  vs = (const void **)calloc(n + 1, sizeof(void *));
  kns = (size_t *)calloc(n + 1, sizeof(size_t));
  vns = (size_t *)calloc(n + 1, sizeof(size_t));
  if (!ks || !vs || !kns || !vns) {
    free(ks); free(vs); free(kns); free(vns);
    return luaL_error(L, "out of memory");
  }
  for (i = 0; i < n; i++) {             /* the strings stay in the tables */
    lua_rawgeti(L, 9, (lua_Integer)i + 1);
    ks[i] = lua_tolstring(L, -1, &kns[i]);
    lua_pop(L, 1);
    lua_rawgeti(L, 10, (lua_Integer)i + 1);
    vs[i] = lua_tolstring(L, -1, &vns[i]);
    lua_pop(L, 1);
    if (ks[i] == NULL) ks[i] = "", kns[i] = 0;
    if (vs[i] == NULL) vs[i] = "", vns[i] = 0;
  }
  rc = rg_remote_feed_range(r, &pl, tb, lo, lon, after, back, n, ks, kns, vs,
                            vns, done, (uint64_t)luaL_checknumber(L, 12),
                            (int64_t)luaL_checknumber(L, 13));
  free(ks); free(vs); free(kns); free(vns);
  if (rc) return luaL_error(L, "out of memory");
  return 0;
}

static int m_feed_seqs (lua_State *L) {
  rg_remote_feed_seqs(toremote(L), (uint32_t)luaL_checkinteger(L, 2),
                      (uint32_t)luaL_checkinteger(L, 3));
  return 0;
}

/* The host's words are in microseconds, as its clock (now_us). */
static int m_feed_tp (lua_State *L) {
  rg_remote *r = toremote(L);
  uint64_t now = (uint64_t)luaL_checknumber(L, 2) * 1000u;
  lua_Integer i, n;
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  n = (lua_Integer)rg_rawlen(L, 3);
  for (i = 1; i <= n; i++) {
    double w;
    lua_rawgeti(L, 3, i);
    lua_rawgeti(L, 4, i);
    w = lua_tonumber(L, -1);
    rg_remote_tp_feed(r, luaL_checkstring(L, -2),
                      w > 0 ? (uint64_t)w * 1000u : 0, now);
    lua_pop(L, 2);
  }
  return 0;
}

/* What the call spent: field, microseconds (text), ... */
static int m_tp_spent (lua_State *L) {
  rg_remote *r = toremote(L);
  const char *f;
  uint64_t ns;
  size_t i;
  int k = 0, set;
  rg_remote_done(r);                 /* the call is done */
  lua_newtable(L);
  for (i = 0; (f = rg_remote_tp_spent(r, i, &ns, &set)) != NULL; i++) {
    char us[24];
    if (ns < 500 && !set) continue;
    snprintf(us, sizeof(us), "%s%llu", set ? "=" : "",
             (unsigned long long)((ns + 500) / 1000));
    lua_pushstring(L, f);
    lua_rawseti(L, -2, ++k);
    lua_pushstring(L, us);
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

static int m_parts (lua_State *L) {
  rg_remote *r = toremote(L);
  const rg_part *v;
  size_t n = rg_remote_parts(r, &v), i;
  lua_createtable(L, (int)n, 0);
  for (i = 0; i < n; i++) {
    lua_createtable(L, 0, 4);
    set_place(L, &v[i].pl);
    lua_pushlstring(L, v[i].data, v[i].n);
    lua_setfield(L, -2, "data");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, (lua_Integer)rg_remote_stand_in(r));
  return 2;
}

static int m_applied (lua_State *L) {
  rg_remote_applied(toremote(L), (size_t)luaL_checkinteger(L, 2) - 1,
                    (uint64_t)luaL_checknumber(L, 3));
  return 0;
}

static int m_refused (lua_State *L) {
  rg_remote_refused(toremote(L), (size_t)luaL_checkinteger(L, 2) - 1);
  return 0;
}

static int m_in_scope (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  lua_pushboolean(L, rg_env_scope(d->env) != NULL);
  return 1;
}

static int m_complete (lua_State *L) {
  lua_pushboolean(L, rg_remote_complete(toremote(L)));
  return 1;
}

#define RG_MARK_MT "regolith.remote_mark"

static rg_scope *running (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_scope *s = rg_env_scope(d->env);
  if (s == NULL) luaL_error(L, "no write scope is running");
  return s;
}

static int m_mark (lua_State *L) {
  rg_scope *s = running(L);
  rg_mark *m = (rg_mark *)lua_newuserdata(L, sizeof(rg_mark));
  luaL_setmetatable(L, RG_MARK_MT);
  rg_scope_mark(s, m);
  rg_remote_tp_mark(toremote(L));
  return 1;
}

static int m_back (lua_State *L) {
  rg_scope *s = running(L);
  rg_scope_back(s, (const rg_mark *)luaL_checkudata(L, 2, RG_MARK_MT));
  rg_remote_tp_unmark(toremote(L), 1);
  return 0;
}

static int m_keep (lua_State *L) {
  rg_scope *s = running(L);
  rg_scope_keep(s, (const rg_mark *)luaL_checkudata(L, 2, RG_MARK_MT));
  rg_remote_tp_unmark(toremote(L), 0);
  return 0;
}

static int m_fetched (lua_State *L) {
  rg_remote_fetched(toremote(L));
  return 0;
}

static int m_bucket (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  rg_ikey k;
  if (!rgl_pk_partition(L, 2, lc->c.spec, &k))
    return luaL_error(L, "_remote_bucket: not a partition key of the container");
  lua_pushinteger(L, lc->c.spec->cid);
  lua_pushinteger(L, k.range);
  lua_pushinteger(L, lc->c.spec->nparts);
  return 3;
}

void rgl_remote_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"_remote_reset", m_reset},
    {"_remote_rerun", m_rerun},
    {"_remote_state", m_state},
    {"_remote_needs", m_needs},
    {"_remote_feed_point", m_feed_point},
    {"_remote_feed_range", m_feed_range},
    {"_remote_feed_seqs", m_feed_seqs},
    {"_remote_feed_tp", m_feed_tp},
    {"_remote_tp_spent", m_tp_spent},
    {"_remote_parts", m_parts},
    {"_remote_applied", m_applied},
    {"_remote_refused", m_refused},
    {"_in_scope", m_in_scope},
    {"_remote_complete", m_complete},
    {"_remote_mark", m_mark},
    {"_remote_back", m_back},
    {"_remote_keep", m_keep},
    {"_remote_fetched", m_fetched},
    {NULL, NULL}
  };
  static const luaL_Reg cont_methods[] = {
    {"_remote_bucket", m_bucket},
    {NULL, NULL}
  };
  luaL_newmetatable(L, RG_MARK_MT);
  lua_pop(L, 1);
  rgl_add_methods(L, RG_DB_MT, methods);
  rgl_add_methods(L, RG_CONT_MT, cont_methods);
}
