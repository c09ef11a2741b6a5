/*
** module.c: luaopen_regolith_core, the one symbol the module exports.
**
** The module table gets open, null, array, object, json, is_container,
** the processors' core (_processor), the command's signals (_signals),
** the sum and the charge of packed works (_work_add, _work_info),
** and _methods: the method tables of
** the handle types, where lua/regolith/init.lua adds, in one place, the
** methods written in Lua (db:processor, db:run_processors, c:query_rows).
** Each file of host/ registers its handle type or its methods.
*/

#include <string.h>

#include "host/binding.h"
#include "luax/luajson.h"

#if defined(__GNUC__)
#define RG_EXPORT __attribute__((visibility("default")))
#else
#define RG_EXPORT
#endif

RG_EXPORT int luaopen_regolith_core (lua_State *L);

/* is_container(v) -> is v a container handle (open or closed)? */
static int l_is_container (lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, RG_CONT_MT) != NULL);
  return 1;
}

/* A packed work (c:_bulk_batch's), or an empty one for nil. */
static void work_arg (lua_State *L, int i, rg_work *w) {
  size_t n;
  const char *s;
  memset(w, 0, sizeof(*w));
  if (lua_isnil(L, i)) return;
  s = luaL_checklstring(L, i, &n);
  luaL_argcheck(L, n == sizeof(*w), i, "not a packed work");
  memcpy(w, s, sizeof(*w));
}

/* _work_add(a, b) -> a + b, packed works (a may be nil). */
static int l_work_add (lua_State *L) {
  rg_work a, b;
  work_arg(L, 1, &a);
  work_arg(L, 2, &b);
  rg_work_add(&a, &b);
  lua_pushlstring(L, (const char *)&a, sizeof(a));
  return 1;
}

/* _work_info(w) -> the info of a call that did that work (its charge). */
static int l_work_info (lua_State *L) {
  rg_work w;
  work_arg(L, 1, &w);
  rgl_push_info(L, &w, 200);
  return 1;
}

/* Sets t[name] to the metatable `mt` and t[name .. "_methods"] to its
** __index, in the table on top of the stack. */
static void expose (lua_State *L, const char *mt, const char *name,
                    const char *methods) {
  luaL_getmetatable(L, mt);
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, methods);
  lua_setfield(L, -2, name);
}

int luaopen_regolith_core (lua_State *L) {
  lua_newtable(L);
  rgl_db_open(L);
  rgl_container_open(L);
  rgl_scripts_open(L);
  rgl_query_open(L);
  rgl_feed_open(L);
  rgl_processor_open(L);
  rgl_throughput_open(L);
  rgl_remote_open(L);
  rgl_json_open(L);
  rgl_signals_open(L);
  lua_pushcfunction(L, l_is_container);
  lua_setfield(L, -2, "is_container");
  lua_pushcfunction(L, l_work_add);
  lua_setfield(L, -2, "_work_add");
  lua_pushcfunction(L, l_work_info);
  lua_setfield(L, -2, "_work_info");
  lua_newtable(L);
  expose(L, RG_DB_MT, "db", "db_methods");
  expose(L, RG_CONT_MT, "container", "container_methods");
  lua_setfield(L, -2, "_methods");
  return 1;
}
