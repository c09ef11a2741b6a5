/*
** udf.c: user-defined functions, called by queries as udf.name(...).
**
** A user-defined function is stored like a procedure (store/scripts.c,
** record 'u'): a Lua chunk that returns a function, compiled once per
** version in the environment's sandbox (runner.c's cache).  The query
** engine (sql/) knows nothing of Lua: it calls the rg_qudf interface that
** a query request carries, which this file implements over the sandbox.
**
** A query's functions share one execution: the first call arms the
** sandbox with the environment's budgets (script_budget, script_memory),
** runs each function's chunk once in a fresh environment, and every call
** of the query counts against those budgets; going over them fails the
** query (408, 413).  Inside a procedure (ctx:query) the sandbox is already
** armed by the procedure, whose budget the calls then spend.  Arguments
** cross into the sandbox and the result out of it as JSON, as procedure
** arguments do; a function that raises fails the query (400), and one
** returning nil gives undefined.  Functions see the same sandboxed globals
** as procedures and no ctx: they compute, they read and write nothing.
*/

#include <string.h>

#include "base/json.h"
#include "luax/luajson.h"
#include "script/js.h"
#include "script/runtime.h"
#include "script/sandbox.h"
#include "script/script.h"
#include "store/layout.h"
#include "store/scripts.h"

#define FUNCS "regolith.udf.functions"     /* this query's functions */

/* One call in the sandbox: the arguments and the place of the result. */
typedef struct ucall {
  rg_udfs *u;
  const char *name;
  size_t n;
  rg_srec rec;
  uint8_t key[5 + RG_MAX_NAME];
  size_t klen;
  const char *const *args;
  const size_t *lens;
  int nargs;
  cJSON *result;
  int converted;                     /* status of the result's conversion */
  rg_err err;
} ucall;

/* Pushes this query's function `name`, loading it on first use. */
static void push_function (lua_State *L, ucall *c) {
  lua_getfield(L, LUA_REGISTRYINDEX, FUNCS);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, FUNCS);
  }
  lua_pushlstring(L, c->name, c->n);
  lua_rawget(L, -2);
  if (lua_isfunction(L, -1)) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);                     /* functions */
  rgl_runtime_push_chunk(L, c->key, c->klen, c->rec.version, c->rec.src,
                        c->rec.len, c->name, c->n);
  rgl_runtime_call_chunk(L);          /* functions, fn */
  lua_pushlstring(L, c->name, c->n);
  lua_pushvalue(L, -2);
  lua_rawset(L, -4);
  lua_remove(L, -2);
}

static int call_main (lua_State *L) {
  ucall *c = (ucall *)lua_touserdata(L, 1);
  rg_err e;
  int i;
  lua_settop(L, 0);
  push_function(L, c);
  luaL_checkstack(L, c->nargs + 2, "too many arguments");
  for (i = 0; i < c->nargs; i++) {
    if (c->args[i] == NULL) lua_pushnil(L);
    else if (rgl_json_push_text(L, c->args[i], c->lens[i], &e))
      luaL_error(L, "an argument cannot be passed: %s", e.msg);
  }
  lua_call(L, c->nargs, 1);
  if (!lua_isnil(L, -1))
    c->converted = rgl_sandbox_from_lua(L, -1, &c->result, &c->err);
  return 0;
}

static int udf_call (void *ud, const char *name, size_t n,
                     const char *const *args, const size_t *lens, int nargs,
                     rg_buf *out, rg_err *e) {
  rg_udfs *u = (rg_udfs *)ud;
  rg_runtime *rt;
  lua_State *L;
  ucall c;
  int rc, why = RG_STOP_NONE;
  memset(&c, 0, sizeof(c));
  c.u = u;
  c.name = name;
  c.n = n;
  c.args = args;
  c.lens = lens;
  c.nargs = nargs;
  if (n > RG_MAX_NAME)
    return rg_fail(e, 404, "user-defined function '%.*s' not found",
                   (int)(n > 40 ? 40 : n), name);
  if ((rc = rg_srec_get(u->txn, u->c->env, RG_MK_UDF, u->c->spec->cid,
                        name, n, &c.rec, c.key, &c.klen, e)))
    return rc;
  if ((rt = (rg_runtime *)rg_env_hook_state(u->c->env)) == NULL)
    return rg_fail(e, 500, "the database has no script runtime");
  if (rg_js_is(c.rec.src, c.rec.len))
    return rg_js_udf(rt, u, name, n, &c.rec, c.key, c.klen, args, lens,
                     nargs, out, e);
  if ((rc = rg_runtime_sandbox(rt, e))) return rc;
  L = rgl_sandbox_state(rt->sb);
  /* the query's execution, unless a Lua script runs it (and pays) */
  if (!u->armed && (!rg_runtime_running(rt) || rg_js_running(rt))) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, FUNCS);
    rg_sandbox_arm(rt->sb, rt->budget, rt->memory);
    u->armed = 1;
    u->rt = rt;
  }
  if (u->stopped) return u->stopped_rc;
  {
    int top = lua_gettop(L);
    lua_pushcfunction(L, call_main);
    lua_pushlightuserdata(L, &c);
    rc = lua_pcall(L, 1, 0, 0);
    why = rgl_sandbox_stopped(L);
    if (why == RG_STOP_BUDGET || why == RG_STOP_TIME) {
      char lim[64];
      rc = rg_fail(e, 408, "user-defined function '%.*s' exceeded the %s",
                   (int)n, name,
                   rg_sandbox_exceeded(rt->sb, why, lim, sizeof(lim)));
    }
    else if (why == RG_STOP_MEMORY || rc == LUA_ERRMEM)
      rc = rg_fail(e, 413, "user-defined function '%.*s' exceeded the memory "
                   "budget (%llu bytes)", (int)n, name,
                   (unsigned long long)rt->memory);
    else if (rc != LUA_OK)
      rc = rg_fail(e, 400, "user-defined function '%.*s' failed: %s",
                   (int)n, name, lua_type(L, -1) == LUA_TSTRING
                   ? lua_tostring(L, -1) : "(error object is not a string)");
    else if (c.converted)
      rc = rg_fail(e, c.converted, "user-defined function '%.*s' returned a "
                   "value JSON cannot carry: %s", (int)n, name, c.err.msg);
    lua_settop(L, top);
  }
  if (rc == 0 && c.result) rg_json_print(c.result, out);
  cJSON_Delete(c.result);
  if (rc == 0 && out->oom) rc = rg_fail(e, 500, "out of memory");
  if (why != RG_STOP_NONE && u->armed) {   /* no more calls in this query */
    u->stopped = 1;
    u->stopped_rc = rc;
  }
  return rc;
}

void rg_udfs_init (rg_udfs *u, rg_txn *txn, const rg_cont *c) {
  memset(u, 0, sizeof(*u));
  u->iface.ud = u;
  u->iface.call = udf_call;
  u->txn = txn;
  u->c = c;
}

void rg_udfs_done (rg_udfs *u) {
  if (u->js_armed)
    rg_js_udfs_done((rg_runtime *)rg_env_hook_state(u->c->env), u);
  if (u->armed) {
    lua_State *L = rgl_sandbox_state(u->rt->sb);
    int why = rg_sandbox_disarm(u->rt->sb);
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, FUNCS);
    lua_settop(L, 0);
    if (why == RG_STOP_MEMORY) lua_gc(L, LUA_GCCOLLECT, 0);
    u->armed = 0;
  }
  u->rt = NULL;
}
