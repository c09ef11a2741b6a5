/*
** query.c: the Lua binding of queries.
**
**   c:query(sql, params, opts)       -> rows, info | nil, message, status
**
** (c:query_rows, the iterator over every page, is Lua: regolith/init.lua.)
** opts: partition_key (a value, or an array of one value per level),
** max_items (page size), continuation (a token from info.continuation).
** An unknown option or a wrong-typed one raises; the SQL text, the params
** table and the token are data, so what is wrong with them is 400.
**
** The Lua values (parameters, partition key) are converted to C before
** the read transaction begins; the query runs in C with no call into the
** caller's Lua state (rg_query_exec holds none; user-defined functions run
** in the database's script sandbox, script/udf.c), the transaction ends,
** and only then are the rows pushed, from the page's JSON text.  The C result lives in a
** box until it has been pushed, so that a memory error while pushing
** cannot leak it.
*/

#include <string.h>

#include "host/binding.h"
#include "luax/luajson.h"
#include "script/script.h"
#include "store/plan.h"

typedef struct qcall {
  cJSON *params, *pk;
  rg_query_res res;
} qcall;

static void qcall_clear (void *p) {
  qcall *q = (qcall *)p;
  cJSON_Delete(q->params);
  cJSON_Delete(q->pk);
  q->params = q->pk = NULL;
  rg_query_res_free(&q->res);
}

/* The info of a query page, here and in a script's ctx:query: charge,
** status, partitions contacted, items loaded, index lookups, whether it
** fanned out. */
/* params: nil or a table {name = value} (a leading '@' is allowed). */
static int params_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e) {
  cJSON *c, *d;
  int rc;
  *out = NULL;
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_type(L, idx) != LUA_TTABLE)
    return rg_fail(e, 400, "params must be a table of {name = value}, not %s",
                   luaL_typename(L, idx));
  if ((rc = rgl_json_from_lua(L, idx, out, e))) {
    char msg[sizeof(e->msg)];
    memcpy(msg, e->msg, sizeof(msg));
    return rg_fail(e, rc, "params: %s", msg);
  }
  if (!cJSON_IsObject(*out))
    return rg_fail(e, 400, "params must be a table of {name = value}, not "
                   "an array");
  for (c = (*out)->child; c; c = c->next) {
    if (c->string[0] == '@')
      memmove(c->string, c->string + 1, strlen(c->string));
    for (d = (*out)->child; d != c; d = d->next)
      if (strcmp(d->string, c->string) == 0)
        return rg_fail(e, 400, "params: @%s is given twice", c->string);
  }
  return 0;
}

static int scalar (const cJSON *v) {
  return cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v) ||
         cJSON_IsNull(v);
}

/* The none partition key value: an empty object (JSON {}). */
static int none (const cJSON *v) {
  return cJSON_IsObject(v) && v->child == NULL;
}

/* opts.partition_key (on the stack at idx) into the request; the tree is
** kept in *own. */
static int query_pk (lua_State *L, int idx, const rg_cspec *spec, cJSON **own,
                     rg_query_req *rq, rg_err *e) {
  int rc, i;
  cJSON *c;
  if (lua_isnil(L, idx)) return 0;
  if ((rc = rgl_json_from_lua(L, idx, own, e))) {
    char msg[sizeof(e->msg)];
    memcpy(msg, e->msg, sizeof(msg));
    return rg_fail(e, rc, "partition_key: %s", msg);
  }
  if (none(*own)) { rq->has_pk = 1; return 0; }    /* every level none */
  if (spec->npk == 1) {
    if (!scalar(*own))
      return rg_fail(e, 400, "a partition key value must be a string, "
                     "number, boolean or regolith.null");
    rq->pkv[0] = *own;
  }
  else {
    if (!cJSON_IsArray(*own) || cJSON_GetArraySize(*own) != spec->npk)
      return rg_fail(e, 400, "the partition key is hierarchical: give an "
                     "array of %d values (every level is required)",
                     spec->npk);
    for (i = 0, c = (*own)->child; c; c = c->next, i++) {
      if (!scalar(c))
        return rg_fail(e, 400, "a partition key value must be a string, "
                       "number, boolean or regolith.null");
      rq->pkv[i] = c;
    }
  }
  rq->has_pk = 1;
  return 0;
}

/* Admission once the query is planned (store/plan.h): the partition it
** is routed to, or every partition of a fan-out. */
typedef struct qadmit {
  rg_lcont *lc;
  rg_admit a;
  int admitted;
} qadmit;

static int query_admit (void *ud, int routed, uint64_t hash, rg_err *e) {
  qadmit *qa = (qadmit *)ud;
  int rc = rg_tp_admit(qa->lc->c.spec, &qa->lc->tp, routed, hash,
                       RG_TP_EVERY, &qa->a, e);
  qa->admitted = rc == 0;
  return rc;
}

/*
** Runs one page.  The stack holds the container at cix, the SQL at sqlix,
** the params at pix and the partition key value at pkix (nil when none).
** Pushes rows, info (returns 2) or nil, message, status (returns 3).
*/
static int page (lua_State *L, int cix, int sqlix, int pix, int pkix,
                 lua_Integer max_items, const char *cont, size_t contlen,
                 int fts_local) {
  rg_lcont *lc = rgl_checkcont(L, cix);
  rg_query_req rq;
  rg_deadline dl;
  qadmit qa;
  qcall *q;
  rg_err e;
  rg_txn *txn;
  size_t *off;
  int rc, top;
  memset(&rq, 0, sizeof(rq));
  memset(&qa, 0, sizeof(qa));
  qa.lc = lc;
  if (lua_type(L, sqlix) != LUA_TSTRING) {
    rg_fail(&e, 400, "the query must be a string, not %s",
            luaL_typename(L, sqlix));
    return rgl_push_fail(L, &e);
  }
  rq.sql = lua_tolstring(L, sqlix, &rq.sqllen);
  rq.max_items = (long)max_items;
  rq.memory_items = lc->db->memory_items;
  rq.continuation = cont;
  rq.contlen = contlen;
  rq.fts_local = fts_local;
  q = (qcall *)rgl_newbox(L, sizeof(qcall), qcall_clear);
  top = lua_gettop(L);
  if ((rc = params_from_lua(L, pix, &q->params, &e)) ||
      (rc = query_pk(L, pkix, lc->c.spec, &q->pk, &rq, &e))) {
    rg_box_done(q);
    return rgl_push_fail(L, &e);
  }
  rq.params = q->params;
  if (lc->db->query_time > 0) {
    rg_deadline_start(&dl, (int64_t)(lc->db->query_time * 1e9));
    rq.deadline = &dl;
  }
  do {                               /* again after a 429 waited out */
    if (rg_tp_live(lc->c.env, lc->c.spec->cid, &lc->tp)) {
      rq.admit = query_admit;
      rq.admit_ud = &qa;
    }
    else rq.admit = NULL;
    qa.admitted = 0;
    if ((rc = rg_read_begin(lc->c.env, &txn, &e)) == 0) {
      rg_udfs udfs;
      rg_udfs_init(&udfs, txn, &lc->c);
      rq.udf = &udfs.iface;
      rc = rg_query_exec(txn, &lc->c, rg_now(), &rq, &q->res, &e);
      rg_udfs_done(&udfs);
      rg_read_end(lc->c.env);
    }
  } while (rc == 429 && !qa.admitted && rg_admit_wait(lc, &qa.a));
  if (!qa.admitted) qa.a.pool = NULL;
  if (rc) {
    rgl_account_work(L, lc, &qa.a, &q->res.work);
    rg_box_done(q);
    if (rc == 429 && !qa.admitted) return rgl_push_throttled(L, &e, &qa.a);
    return rgl_push_fail(L, &e);
  }
  lua_settop(L, top);
  lua_createtable(L, (int)q->res.count, 0);
  if (q->res.count == 0) {           /* an empty list stays an array */
    luaL_getmetatable(L, "regolith.array");
    lua_setmetatable(L, -2);
  }
  off = (size_t *)q->res.offsets.p;
  if (rgl_json_push_stored_list(L, q->res.rows.p, off, q->res.count, &e)) {
    char msg[sizeof(e.msg)];
    memcpy(msg, e.msg, sizeof(msg));
    rg_box_done(q);
    rg_fail(&e, 400, "a result cannot be returned: %s", msg);
    return rgl_push_fail(L, &e);
  }
  rgl_account(L, lc, &qa.a, rgl_push_query_info(L, &q->res.work,
                                                 q->res.cross_partition));
  rgl_push_executor(L, &q->res.done, q->res.inmem);
  lua_pushinteger(L, (lua_Integer)q->res.count);
  lua_setfield(L, -2, "count");
  if (q->res.continuation.n) {
    lua_pushlstring(L, q->res.continuation.p, q->res.continuation.n);
    lua_setfield(L, -2, "continuation");
  }
  rg_box_done(q);
  return 2;
}

static const char *const query_opts[] = {
  "partition_key", "max_items", "continuation", "full_text_score_scope", NULL
};

/* full_text_score_scope: "container" (the default) or "local" (the
** queried logical partition's statistics); 1 for local. */
static int fts_scope (lua_State *L, int idx) {
  const char *s = rgl_opt_string(L, idx, "full_text_score_scope", "query");
  if (s == NULL || strcmp(s, "container") == 0) return 0;
  if (strcmp(s, "local") == 0) return 1;
  return luaL_error(L, "query: option 'full_text_score_scope' is "
                    "\"container\" or \"local\"");
}

/* c:query(sql, params, opts) */
static int cont_query (lua_State *L) {
  lua_Integer max_items;
  const char *cont;
  size_t contlen = 0;
  int local;
  rgl_checkcont(L, 1);
  lua_settop(L, 4);
  rgl_opts_check(L, 4, query_opts, "query");
  max_items = rgl_opt_int(L, 4, "max_items", 0, 1, 1 << 30, "query");
  cont = rgl_opt_lstring(L, 4, "continuation", &contlen, "query");
  local = fts_scope(L, 4);
  if (lua_isnil(L, 4)) lua_pushnil(L);
  else lua_getfield(L, 4, "partition_key");      /* 5 */
  return page(L, 1, 2, 3, 5, max_items, cont, contlen, local);
}

void rgl_query_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"query", cont_query},
    {NULL, NULL}
  };
  rgl_add_methods(L, RG_CONT_MT, methods);
}
