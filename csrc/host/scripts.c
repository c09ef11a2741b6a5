/*
** scripts.c: the Lua binding of procedures and triggers.
**
**   c:create_procedure(name, source)   c:replace_procedure(name, source)
**   c:delete_procedure(name)           c:procedures()   c:procedure(name)
**   c:execute(name, pk, ...)           -> result, info (info.log)
**   c:create_trigger(name, def)        c:replace_trigger(name, def)
**   c:delete_trigger(name)             c:triggers()     c:trigger(name)
**   c:create_udf(name, source)         c:replace_udf(name, source)
**   c:delete_udf(name)                 c:udfs()         c:udf(name)
**
** A name that is not a string and a trigger definition that is not a
** proper options table are misuse (raised); everything else, sources,
** partition keys, arguments, is data: nil, message, status.  A source is
** compiled, and its chunk run, before the scope that stores it begins, so
** that no transaction is open while a script runs for nothing.  execute
** runs its body in one scope (rgl_scope_run): the whole call is one
** transaction.  The arguments are converted from Lua inside the body, so
** that a rerun (the map grew) starts from the Lua values; C memory lives in
** a box.
*/

#include <stdlib.h>
#include <string.h>

#include "host/binding.h"
#include "luax/luajson.h"
#include "script/script.h"
#include "store/scripts.h"

/* A name argument: not a string raises; the id rules give 400. */
static const char *name_arg (lua_State *L, int idx, size_t *n,
                             const char *what, rg_err *e, int *bad) {
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "bad argument #%d: %s must be a string, not %s", idx - 1,
               what, luaL_typename(L, idx));
  s = lua_tolstring(L, idx, n);
  *bad = rg_check_id(s, *n, RG_MAX_NAME, what, e);
  return s;
}

static int readonly (lua_State *L, rg_lcont *lc, rg_err *e) {
  (void)L;
  if (lc->db->readonly) {
    rg_fail(e, 403, "the database is open read-only");
    return 1;
  }
  return 0;
}


/*
** {=====================================================================
** Storing, deleting and listing
** ======================================================================
*/
typedef struct put_req {
  const rg_cont *c;
  int tag, mode, del;
  const char *name;
  size_t n;
  int trig[3];
  const char *src;
  size_t len;
} put_req;

static int put_body (rg_scope *s, void *ud, rg_err *e) {
  put_req *q = (put_req *)ud;
  if (q->del) return rg_script_delete(s, q->c, q->tag, q->name, q->n, e);
  return rg_script_put(s, q->c, q->tag, q->name, q->n, q->mode, q->trig,
                       q->src, q->len, e);
}

/* Checks the source (at srcix) and stores it; pushes true, info. */
static int store (lua_State *L, rg_lcont *lc, put_req *q, int srcix) {
  rg_err e;
  int status = q->del ? 204 : q->mode == RG_PUT_CREATE ? 201 : 200;
  if (!q->del) {
    if (lua_type(L, srcix) != LUA_TSTRING) {
      rg_fail(&e, 400, "the %s source must be a string, not %s",
              q->tag == RG_MK_PROC ? "procedure" :
              q->tag == RG_MK_UDF ? "user-defined function" : "trigger",
              luaL_typename(L, srcix));
      return rgl_push_fail(L, &e);
    }
    q->src = lua_tolstring(L, srcix, &q->len);
    if (q->len > RG_MAX_SOURCE) {
      rg_fail(&e, 413, "the source is %lu bytes; the limit is %u",
              (unsigned long)q->len, RG_MAX_SOURCE);
      return rgl_push_fail(L, &e);
    }
    if (rg_script_check(lc->c.env, q->tag, q->name, q->n, q->src, q->len, &e))
      return rgl_push_fail(L, &e);
  }
  if (rgl_scope_run(L, lc->c.env, lc->db->sync, 1, put_body, q, &e))
    return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  rgl_push_info(L, NULL, status);
  return 2;
}

/* A request about the script (RG_MK_PROC or RG_MK_TRIG) named by
** argument 2 of c:..._procedure/_trigger; *bad when the name is not one. */
static rg_lcont *script_req (lua_State *L, put_req *q, int tag, int mode,
                             int del, rg_err *e, int *bad) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  memset(q, 0, sizeof(*q));
  q->c = &lc->c;
  q->tag = tag;
  q->mode = mode;
  q->del = del;
  q->name = name_arg(L, 2, &q->n, tag == RG_MK_PROC ? "a procedure name"
                                  : tag == RG_MK_UDF ? "a function name"
                                  : "a trigger name", e, bad);
  return lc;
}

/* Stores (source in argument 3) or deletes a script. */
static int script_put (lua_State *L, int tag, int mode, int del) {
  put_req q;
  rg_err e;
  int bad;
  rg_lcont *lc = script_req(L, &q, tag, mode, del, &e, &bad);
  if (bad || readonly(L, lc, &e)) return rgl_push_fail(L, &e);
  return store(L, lc, &q, 3);
}

static int cont_create_procedure (lua_State *L) {
  return script_put(L, RG_MK_PROC, RG_PUT_CREATE, 0);
}

static int cont_replace_procedure (lua_State *L) {
  return script_put(L, RG_MK_PROC, RG_PUT_REPLACE, 0);
}

static int cont_delete_procedure (lua_State *L) {
  return script_put(L, RG_MK_PROC, 0, 1);
}

static int cont_create_udf (lua_State *L) {
  return script_put(L, RG_MK_UDF, RG_PUT_CREATE, 0);
}

static int cont_replace_udf (lua_State *L) {
  return script_put(L, RG_MK_UDF, RG_PUT_REPLACE, 0);
}

static int cont_delete_udf (lua_State *L) {
  return script_put(L, RG_MK_UDF, 0, 1);
}

/* Picks `value` among `names` (0-based index); raises when it is not one. */
static int choice (lua_State *L, const char *value, const char *const *names,
                   const char *what, const char *option) {
  int i;
  for (i = 0; names[i]; i++) if (strcmp(value, names[i]) == 0) return i;
  return luaL_error(L, "%s: option '%s' must be %s", what, option,
                    names[1] && names[2] ? "\"create\", \"replace\", "
                    "\"delete\" or \"all\"" : "\"pre\" or \"post\"");
}

static int trig_put (lua_State *L, int mode) {
  static const char *const allowed[] = {
    "type", "operation", "automatic", "source", NULL
  };
  static const char *const types[] = { "pre", "post", NULL };
  static const char *const ops[] = { "all", "create", "replace", "delete",
                                     NULL };
  const char *what = mode == RG_PUT_CREATE ? "create_trigger"
                                           : "replace_trigger";
  const char *type, *op;
  put_req q;
  rg_err e;
  int bad;
  rg_lcont *lc = script_req(L, &q, RG_MK_TRIG, mode, 0, &e, &bad);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  rgl_opts_check(L, 3, allowed, what);
  type = rgl_opt_string(L, 3, "type", what);
  if (type == NULL)
    return luaL_error(L, "%s: option 'type' is required (\"pre\" or "
                      "\"post\")", what);
  q.trig[0] = choice(L, type, types, what, "type") == 0 ? RG_TRIG_PRE
                                                        : RG_TRIG_POST;
  op = rgl_opt_string(L, 3, "operation", what);
  q.trig[1] = op ? choice(L, op, ops, what, "operation") : RG_TOP_ALL;
  q.trig[2] = rgl_opt_bool(L, 3, "automatic", 0, what);
  lua_getfield(L, 3, "source");      /* 4: data, not an option */
  if (bad || readonly(L, lc, &e)) return rgl_push_fail(L, &e);
  return store(L, lc, &q, 4);
}

static int cont_create_trigger (lua_State *L) {
  return trig_put(L, RG_PUT_CREATE);
}

static int cont_replace_trigger (lua_State *L) {
  return trig_put(L, RG_PUT_REPLACE);
}

static int cont_delete_trigger (lua_State *L) {
  return script_put(L, RG_MK_TRIG, 0, 1);
}

static int names (lua_State *L, int tag) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  rg_buf *b = rgl_newbuf(L);
  rg_err e;
  size_t at = 0;
  int count, i;
  if (rg_script_names(&lc->c, tag, b, &count, &e)) return rgl_push_fail(L, &e);
  lua_createtable(L, count, 0);
  for (i = 1; i <= count; i++) {
    size_t n = rg_get_u32((const uint8_t *)b->p + at);
    lua_pushlstring(L, b->p + at + 4, n);
    lua_rawseti(L, -2, i);
    at += 4 + n;
  }
  rg_box_done(b);
  return 1;
}

static int cont_procedures (lua_State *L) { return names(L, RG_MK_PROC); }
static int cont_triggers (lua_State *L) { return names(L, RG_MK_TRIG); }
static int cont_udfs (lua_State *L) { return names(L, RG_MK_UDF); }

/* c:procedure(name) and c:udf(name) -> source, info; c:trigger(name) ->
** {type, operation, automatic, source}, info; nil, msg, 404 when there is
** none. */
static int get_script (lua_State *L, int tag) {
  static const char *const types[] = { "", "pre", "post" };
  static const char *const ops[] = { "all", "create", "replace", "delete" };
  rg_lcont *lc = rgl_checkcont(L, 1);
  const char *name;
  rg_buf *src;
  size_t n;
  int trig[3], bad;
  rg_err e;
  name = name_arg(L, 2, &n, tag == RG_MK_PROC ? "a procedure name"
                            : tag == RG_MK_UDF ? "a function name"
                            : "a trigger name", &e, &bad);
  if (bad) return rgl_push_fail(L, &e);
  src = rgl_newbuf(L);
  if (rg_script_get(&lc->c, tag, name, n, src, trig, &e))
    return rgl_push_fail(L, &e);
  if (tag == RG_MK_TRIG) {
    lua_createtable(L, 0, 4);
    lua_pushstring(L, types[trig[0] == RG_TRIG_POST ? 2 : 1]);
    lua_setfield(L, -2, "type");
    lua_pushstring(L, ops[trig[1] >= 0 && trig[1] <= RG_TOP_DELETE ?
                          trig[1] : 0]);
    lua_setfield(L, -2, "operation");
    lua_pushboolean(L, trig[2]);
    lua_setfield(L, -2, "automatic");
  }
  lua_pushlstring(L, src->p ? src->p : "", src->n);
  if (tag == RG_MK_TRIG) lua_setfield(L, -2, "source");
  rg_box_done(src);
  rgl_push_info(L, NULL, 200);
  return 2;
}

static int cont_procedure (lua_State *L) { return get_script(L, RG_MK_PROC); }
static int cont_trigger (lua_State *L) { return get_script(L, RG_MK_TRIG); }
static int cont_udf (lua_State *L) { return get_script(L, RG_MK_UDF); }
/* }===================================================================== */


/*
** {=====================================================================
** execute
** ======================================================================
*/
typedef struct xcall {
  lua_State *L;
  const rg_cont *c;
  const char *name;
  size_t n;
  int pkix, argix, nargs;
  cJSON *pk;
  cJSON **args;
  cJSON *result;
  rg_buf log;
  rg_work work;
} xcall;

static void xcall_clear (void *p) {
  xcall *q = (xcall *)p;
  int i;
  cJSON_Delete(q->pk);
  q->pk = NULL;
  for (i = 0; q->args && i < q->nargs; i++) {
    cJSON_Delete(q->args[i]);
    q->args[i] = NULL;
  }
  cJSON_Delete(q->result);
  q->result = NULL;
  rg_buf_free(&q->log);
}

static void xcall_free (void *p) {
  xcall *q = (xcall *)p;
  xcall_clear(q);
  free(q->args);
  q->args = NULL;
}

static int exec_body (rg_scope *s, void *ud, rg_err *e) {
  xcall *q = (xcall *)ud;
  lua_State *L = q->L;
  rg_work before = s->work;
  int i, rc;
  xcall_clear(q);                    /* a rerun starts afresh */
  rg_buf_init(&q->log);
  if (lua_isnoneornil(L, q->pkix))
    return rg_fail(e, 400, "the partition key value is missing");
  if ((rc = rgl_json_from_lua(L, q->pkix, &q->pk, e))) {
    char msg[sizeof(e->msg)];
    memcpy(msg, e->msg, sizeof(msg));
    return rg_fail(e, rc, "the partition key: %s", msg);
  }
  for (i = 0; i < q->nargs; i++) {
    if (lua_isnil(L, q->argix + i)) continue;
    if ((rc = rgl_json_from_lua(L, q->argix + i, &q->args[i], e))) {
      char msg[sizeof(e->msg)];
      memcpy(msg, e->msg, sizeof(msg));
      return rg_fail(e, rc, "argument %d: %s", i + 1, msg);
    }
  }
  rc = rg_proc_execute(s, q->c, q->name, q->n, q->pk, q->args, q->nargs,
                       &q->result, &q->log, e);
  rg_work_diff(&q->work, &s->work, &before);
  if (q->log.oom && rc == 0) rc = rg_fail(e, 500, "out of memory");
  return rc;
}

/* c:execute(name, pk, ...) -> result, info | nil, msg, status */
static int cont_execute (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  int top = lua_gettop(L), bad;
  xcall *q;
  rg_err e;
  rg_admit a;
  rg_ikey k;
  const char *name;
  size_t n;
  name = name_arg(L, 2, &n, "a procedure name", &e, &bad);
  if (bad || readonly(L, lc, &e)) return rgl_push_fail(L, &e);
  q = (xcall *)rgl_newbox(L, sizeof(xcall), xcall_free);
  q->L = L;
  q->c = &lc->c;
  q->name = name;
  q->n = n;
  q->pkix = 3;
  q->argix = 4;
  q->nargs = top > 3 ? top - 3 : 0;
  if (q->nargs &&
      (q->args = (cJSON **)calloc((size_t)q->nargs, sizeof(cJSON *))) == NULL)
    return luaL_error(L, "out of memory");
  /* charged to the partition it runs in, admitted before it runs */
  a.own = a.pool = NULL;
  a.retries = 0;
  if (rg_tp_live(lc->c.env, lc->c.spec->cid, &lc->tp) &&
      rgl_pk_partition(L, 3, lc->c.spec, &k) &&
      rg_admit_on(lc, 1, k.hash, 0, &a, &e)) {
    rg_box_done(q);
    return rgl_push_throttled(L, &e, &a);
  }
  if (rgl_scope_run(L, lc->c.env, lc->db->sync, 1, exec_body, q, &e)) {
    rgl_account_work(L, lc, &a, &q->work);
    rg_box_done(q);
    return rgl_push_fail(L, &e);
  }
  rgl_json_push(L, q->result);
  rgl_account(L, lc, &a, rgl_push_info(L, &q->work, 200));
  rgl_push_lines(L, &q->log);
  lua_setfield(L, -2, "log");
  rg_box_done(q);
  return 2;
}
/* }===================================================================== */


void rgl_scripts_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"create_procedure", cont_create_procedure},
    {"replace_procedure", cont_replace_procedure},
    {"delete_procedure", cont_delete_procedure},
    {"procedures", cont_procedures},
    {"procedure", cont_procedure},
    {"execute", cont_execute},
    {"create_trigger", cont_create_trigger},
    {"replace_trigger", cont_replace_trigger},
    {"delete_trigger", cont_delete_trigger},
    {"triggers", cont_triggers},
    {"trigger", cont_trigger},
    {"create_udf", cont_create_udf},
    {"replace_udf", cont_replace_udf},
    {"delete_udf", cont_delete_udf},
    {"udfs", cont_udfs},
    {"udf", cont_udf},
    {NULL, NULL}
  };
  rgl_add_methods(L, RG_CONT_MT, methods);
}
