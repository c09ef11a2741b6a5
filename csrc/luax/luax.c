/*
** luax.c: the helpers every Lua-facing file shares.
**
** Failures and info tables follow one rule (luax.h).  Options tables are
** checked whole: an unknown key raises, so that a typo cannot pass
** silently.  Boxes hold C memory across calls that may raise, as
** lauxlib's boxes do.
*/

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "luax/luax.h"


/*
** {=====================================================================
** Failures, info tables, options
** ======================================================================
*/
int rgl_push_fail (lua_State *L, const rg_err *e) {
  lua_pushnil(L);
  lua_pushstring(L, e->msg);
  lua_pushinteger(L, e->status);
  return 3;
}

double rgl_push_info (lua_State *L, const rg_work *w, int status) {
  double charge = w ? rg_charge(w) : 0.0;
  lua_createtable(L, 0, 4);
  lua_pushnumber(L, charge);
  lua_setfield(L, -2, "charge");
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  return charge;
}

void rgl_opts_check (lua_State *L, int idx, const char *const *allowed,
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

void rgl_add_methods (lua_State *L, const char *mt, const luaL_Reg *funcs) {
  luaL_getmetatable(L, mt);
  lua_getfield(L, -1, "__index");
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 2);
}

/* Option getters: absent gives the default; a wrong type or range raises. */
lua_Integer rgl_opt_int (lua_State *L, int idx, const char *name,
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
const char *rgl_opt_lstring (lua_State *L, int idx, const char *name,
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

const char *rgl_opt_string (lua_State *L, int idx, const char *name,
                           const char *what) {
  size_t n;
  const char *s = rgl_opt_lstring(L, idx, name, &n, what);
  if (s && strlen(s) != n)           /* C would read "full\0x" as "full" */
    luaL_error(L, "%s: option '%s' must not contain NUL", what, name);
  return s;
}

int rg_opt_text (const char *s, size_t n, const char *name, rg_err *e) {
  if (s && strlen(s) != n)
    return rg_fail(e, 400, "option '%s' must not contain NUL", name);
  return 0;
}

int rgl_opt_bool (lua_State *L, int idx, const char *name, int def,
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

double rgl_push_query_info (lua_State *L, const rg_work *w, int cross) {
  double charge = rgl_push_info(L, w, 200);
  lua_pushinteger(L, (lua_Integer)w->partitions);
  lua_setfield(L, -2, "partitions");
  lua_pushinteger(L, (lua_Integer)w->loaded);
  lua_setfield(L, -2, "loaded");
  lua_pushinteger(L, (lua_Integer)w->lookups);
  lua_setfield(L, -2, "index_lookups");
  lua_pushinteger(L, (lua_Integer)w->scanned);
  lua_setfield(L, -2, "scanned");
  if (w->vector_read || w->codes || w->nodes) {   /* what a vector index
                                                     search read */
    lua_pushinteger(L, (lua_Integer)w->vector_read);
    lua_setfield(L, -2, "vector_bytes");
    lua_pushinteger(L, (lua_Integer)w->codes);
    lua_setfield(L, -2, "vector_codes");
    lua_pushinteger(L, (lua_Integer)w->nodes);
    lua_setfield(L, -2, "vector_nodes");
  }
  lua_pushboolean(L, cross);
  lua_setfield(L, -2, "cross_partition");
  if (w->text_loaded) {              /* what FullTextScore's statistics read */
    lua_pushinteger(L, (lua_Integer)w->text_loaded);
    lua_setfield(L, -2, "full_text_loaded");
  }
  if (w->text_read) {                /* what a full-text index gave */
    lua_pushinteger(L, (lua_Integer)w->text_read);
    lua_setfield(L, -2, "full_text_read");
  }
  return charge;
}

void rgl_push_executor (lua_State *L, const rg_work *done, int inmem) {
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)done->loaded);
  lua_setfield(L, -2, "items_read");
  lua_pushinteger(L, (lua_Integer)done->lookups);
  lua_setfield(L, -2, "index_seeks");
  lua_pushinteger(L, (lua_Integer)done->scanned);
  lua_setfield(L, -2, "index_entries");
  lua_pushboolean(L, inmem);
  lua_setfield(L, -2, "partition_in_memory");
  lua_setfield(L, -2, "executor");
}
/* }===================================================================== */


/*
** {=====================================================================
** Boxes
** ======================================================================
*/
typedef struct box {
  void (*cleanup) (void *);
  union { double d; void *p; long long l; } payload[1];
} box;

static int box_gc (lua_State *L) {
  box *b = (box *)lua_touserdata(L, 1);
  if (b->cleanup) { b->cleanup(b->payload); b->cleanup = NULL; }
  return 0;
}

void *rgl_newbox (lua_State *L, size_t size, void (*cleanup) (void *)) {
  box *b = (box *)rg_newuserdata(L, offsetof(box, payload) + size);
  memset(b, 0, offsetof(box, payload) + size);
  b->cleanup = cleanup;
  if (luaL_newmetatable(L, "regolith.box")) {
    lua_pushcfunction(L, box_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b->payload;
}

void rg_box_done (void *payload) {
  box *b = (box *)((char *)payload - offsetof(box, payload));
  if (b->cleanup) { b->cleanup(payload); b->cleanup = NULL; }
}

static void buf_free (void *b) {
  rg_buf_free((rg_buf *)b);
}

rg_buf *rgl_newbuf (lua_State *L) {
  rg_buf *b = (rg_buf *)rgl_newbox(L, sizeof(rg_buf), buf_free);
  rg_buf_init(b);
  return b;
}
/* }===================================================================== */

void rgl_push_lines (lua_State *L, const rg_buf *b) {
  size_t at;
  int n = 0;
  lua_newtable(L);
  for (at = 0; at + 4 <= b->n; n++) {
    uint32_t len = rg_get_u32((const uint8_t *)b->p + at);
    lua_pushlstring(L, b->p + at + 4, len);
    lua_rawseti(L, -2, n + 1);
    at += 4 + len;
  }
}
