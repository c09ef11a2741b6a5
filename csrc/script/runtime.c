/*
** runtime.c: the script runtime of an environment (runtime.h): its
** sandbox, made on first use, and the cache of compiled chunks.  Procedures
** and triggers (runner.c) and user-defined functions (udf.c) both run in
** a runtime; this file calls neither of them.
*/

#include <stdlib.h>
#include <string.h>

#include "luax/compat.h"
#include "script/js.h"
#include "script/runtime.h"
#include "script/sandbox.h"
#include "script/script.h"

#define CACHE     "regolith.script.cache"

static void free_autos (rg_runtime *rt) {
  int i, j;
  for (i = 0; i < rt->nautos; i++) {
    for (j = 0; j < rt->autos[i].n; j++) free(rt->autos[i].t[j].name);
    free(rt->autos[i].t);
  }
  free(rt->autos);
  rt->autos = NULL;
  rt->nautos = 0;
}

/* Frees a runtime: its sandbox, its JavaScript heap and caches. */
void rg_runtime_free (rg_runtime *rt) {
  if (rt == NULL) return;
  rg_sandbox_free(rt->sb);
  rg_js_free(rt->js);
  free_autos(rt);
  free(rt);
}

int rg_runtime_running (const rg_runtime *rt) {
  return rt->cur != NULL;
}

int rg_runtime_sandbox (rg_runtime *rt, rg_err *e) {
  if (rt->sb == NULL && (rt->sb = rg_sandbox_new()) == NULL)
    return rg_fail(e, 500, "cannot create the script sandbox: out of memory");
  return 0;
}

/* Pushes the compiled chunk of a record (its meta key, version and
** source), compiling it when this process has not compiled that version
** yet. */
void rgl_runtime_push_chunk (lua_State *L, const uint8_t *key, size_t klen,
                            uint64_t version, const char *src, size_t len,
                            const char *name, size_t namelen) {
  uint8_t ver[8];
  const char *have;
  size_t n;
  rg_put_u64(ver, version);
  lua_getfield(L, LUA_REGISTRYINDEX, CACHE);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CACHE);
  }
  lua_pushlstring(L, (const char *)key, klen);
  lua_pushvalue(L, -1);
  lua_rawget(L, -3);                 /* cache, key, entry */
  if (lua_istable(L, -1)) {
    lua_rawgeti(L, -1, 1);
    have = lua_tolstring(L, -1, &n);
    if (have && n == 8 && memcmp(have, ver, 8) == 0) {
      lua_rawgeti(L, -2, 2);         /* the chunk */
      lua_replace(L, -5);
      lua_settop(L, lua_gettop(L) - 3);
      return;
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);                     /* cache, key */
  if (rgl_sandbox_load(L, src, len, name, namelen))
    lua_error(L);                    /* the compiler's message */
  lua_createtable(L, 2, 0);          /* cache, key, chunk, entry */
  lua_pushlstring(L, (const char *)ver, 8);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, 2);
  lua_pushvalue(L, -3);
  lua_insert(L, -2);                 /* cache, key, chunk, key, entry */
  lua_rawset(L, -5);
  lua_replace(L, -3);                /* chunk, key */
  lua_pop(L, 1);
}

/* Calls the chunk in a fresh environment; leaves the function it returns. */
void rgl_runtime_call_chunk (lua_State *L) {
  rgl_sandbox_env(L);
  rgl_sandbox_setenv(L, -2);
  lua_call(L, 0, 1);
  if (lua_type(L, -1) != LUA_TFUNCTION)
    luaL_error(L, "the chunk must return a function, not %s",
               luaL_typename(L, -1));
}
