/*
** scope.c: store scopes under a Lua protected call.
**
** rgl_protect is where a store scope meets a Lua error: the body runs
** under lua_pcall, and an error aborts the scope (or rolls its savepoint
** back) before rgl_scope_run, or whoever called rg_scope_run, raises it
** again.  So a Lua error can never leave a write transaction open.
*/

#include "luax/luax.h"

typedef struct pcall {
  void (*call) (void *);
  void *arg;
} pcall;

static int pcall_body (lua_State *L) {
  pcall *p = (pcall *)lua_touserdata(L, lua_upvalueindex(1));
  p->call(p->arg);
  return 0;
}

/*
** The protect of rg_scope_run for a Lua host: calls call(arg) under
** lua_pcall, giving the protected call a copy of the caller's stack, so
** that the body sees its arguments at the same indices as the caller
** does.  On an error the error object is left on top of the stack.
*/
int rgl_protect (void *host, void (*call) (void *), void *arg) {
  lua_State *L = (lua_State *)host;
  int top = lua_gettop(L), i;
  pcall p;
  p.call = call;
  p.arg = arg;
  luaL_checkstack(L, top + 2, NULL);
  lua_pushlightuserdata(L, &p);
  lua_pushcclosure(L, pcall_body, 1);
  for (i = 1; i <= top; i++) lua_pushvalue(L, i);
  return lua_pcall(L, top, 0, 0) == LUA_OK ? 0 : RG_RAISED;
}

int rgl_scope_run (lua_State *L, rg_env *env, int sync, int savepoint,
                   rg_body body, void *ud, rg_err *e) {
  int rc = rg_scope_run(env, rgl_protect, L, sync, savepoint, body, ud, e);
  if (rc == RG_RAISED) return lua_error(L);   /* the scope is gone */
  return rc;
}
