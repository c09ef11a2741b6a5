/*
** throughput.c: the Lua binding of provisioned throughput.
**
**   c:set_throughput(x)      -> true, info   x: RU/s, {autoscale_max = n},
**   db:set_throughput(x)     -> true, info      {manual = n, burst = true}
**   db:throughput()          -> x | nil         or nil (none)
**
** What every request method shares (admission, the 429, the counters) is
** admit.c's.  The rule and its numbers are the store's (store/throughput.c,
** docs/throughput.md).  A setting is an option: a wrong one raises.
*/

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "host/binding.h"
#include "luax/luajson.h"




/*
** {=====================================================================
** Settings
** ======================================================================
*/
/* The setting argument at idx as JSON (NULL for nil), validated: a wrong
** one raises, as any option does. */
static cJSON *setting_arg (lua_State *L, int idx, const char *what) {
  cJSON *j = NULL;
  rg_tpset set;
  rg_err e;
  int t = lua_type(L, idx);
  if (t == LUA_TNONE || t == LUA_TNIL) return NULL;
  if (t != LUA_TNUMBER && t != LUA_TTABLE)
    luaL_error(L, "%s: the throughput must be a number of request units per "
               "second, a table or nil, not %s", what, luaL_typename(L, idx));
  if (rgl_json_from_lua(L, idx, &j, &e))
    luaL_error(L, "%s: %s", what, e.msg);
  if (rg_tpset_parse(j, &set, what, &e)) {
    cJSON_Delete(j);
    luaL_error(L, "%s", e.msg);
  }
  return j;
}

/* Runs a change of setting (value j, freed here). */
static int set_call (lua_State *L, rg_db *d, rg_env *env, uint32_t cid,
                     cJSON *j, int container) {
  rg_err e;
  int rc;
  if (d->readonly) {
    cJSON_Delete(j);
    rg_fail(&e, 403, "the database is open read-only");
    return rgl_push_fail(L, &e);
  }
  if (rg_env_scope(env) != NULL) {
    cJSON_Delete(j);
    return luaL_error(L, "set_throughput cannot run inside a transaction");
  }
  rc = container ? rg_tp_set_container(env, d->sync, cid, j, &e)
                 : rg_tp_set_database(env, d->sync, j, &e);
  cJSON_Delete(j);
  if (rc) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rgl_push_info(L, NULL, 200);
  return 2;
}

/* c:set_throughput(x) -> true, info */
static int cont_set_throughput (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  cJSON *j;
  lua_settop(L, 2);
  j = setting_arg(L, 2, "set_throughput");
  return set_call(L, lc->db, lc->c.env, lc->c.spec->cid, j, 1);
}

/* db:set_throughput(x) -> true, info */
static int db_set_throughput (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  cJSON *j;
  lua_settop(L, 2);
  j = setting_arg(L, 2, "set_throughput");
  return set_call(L, d, d->env, 0, j, 0);
}

/* db:throughput() -> the database's setting, or nil */
static int db_throughput (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  rg_buf *text = rgl_newbuf(L);
  rg_err e;
  if (rg_tp_database(d->env, text, &e)) return rgl_push_fail(L, &e);
  if (text->n == 0) lua_pushnil(L);
  else if (rgl_json_push_stored(L, text->p, text->n, &e))
    return rgl_push_fail(L, &e);
  rg_box_done(text);
  return 1;
}
/* }===================================================================== */




void rgl_throughput_open (lua_State *L) {
  static const luaL_Reg cont[] = {
    {"set_throughput", cont_set_throughput},
    {NULL, NULL}
  };
  static const luaL_Reg db[] = {
    {"set_throughput", db_set_throughput},
    {"throughput", db_throughput},
    {NULL, NULL}
  };
  rgl_add_methods(L, RG_CONT_MT, cont);
  rgl_add_methods(L, RG_DB_MT, db);
}
