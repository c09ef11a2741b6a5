/*
** container.c: the Lua binding of a container handle, the item API.
**
**   c:create(doc, opts)   c:read(id, pk, opts)   c:replace(doc, opts)
**   c:upsert(doc, opts)   c:delete(id, pk, opts)  c:patch(id, pk, ops, opts)
**   c:read_many(list)     c:batch(pk, ops)       c:name()   c:spec()
**   c:_bulk_opts(opts)  c:_bulk_batch(docs, mode, joined)
**   c:_bulk_whole(fn, again)                        (regolith/bulk.lua)
**
** Reads run in the environment's cached read transaction and push the
** stored JSON straight onto the Lua stack.  Writes run their body in a
** scope (env.c): the document is converted from Lua inside the body, so a
** body that must run again (the map grew) starts from the Lua value.  C
** memory a write holds lives in a box (a userdata whose __gc frees it), so
** that a Lua error, however unlikely, can never leak it.
*/

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "host/binding.h"
#include "luax/luajson.h"
#include "store/catalog.h"
#include "store/write.h"


/*
** {=====================================================================
** The handle
** ======================================================================
*/
static rg_lcont *tocont (lua_State *L, int idx) {
  return (rg_lcont *)luaL_checkudata(L, idx, RG_CONT_MT);
}

rg_lcont *rgl_checkcont (lua_State *L, int idx) {
  rg_lcont *lc = tocont(L, idx);
  if (lc->c.spec == NULL || lc->db->env == NULL)
    luaL_error(L, "attempt to use a closed container");
  return lc;
}

void rgl_push_container (lua_State *L, int dbidx, rg_cspec *spec) {
  rg_db *d = (rg_db *)lua_touserdata(L, dbidx);
  rg_lcont *lc;
  dbidx = dbidx < 0 ? lua_gettop(L) + dbidx + 1 : dbidx;
  lc = (rg_lcont *)rg_newuserdata(L, sizeof(rg_lcont));
  lc->db = d;
  lc->c.env = d->env;
  lc->c.spec = spec;
  memset(&lc->tp, 0, sizeof(lc->tp));
  luaL_getmetatable(L, RG_CONT_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 1, 0);          /* the uservalue keeps the db alive */
  lua_pushvalue(L, dbidx);
  lua_rawseti(L, -2, 1);
  rg_setuservalue(L, -2);
}

static int cont_gc (lua_State *L) {
  rg_lcont *lc = tocont(L, 1);
  rg_cspec_free(lc->c.spec);
  lc->c.spec = NULL;
  return 0;
}

static int cont_tostring (lua_State *L) {
  rg_lcont *lc = tocont(L, 1);
  if (lc->c.spec == NULL || lc->db->env == NULL)
    lua_pushliteral(L, "regolith.container (closed)");
  else lua_pushfstring(L, "regolith.container (%s)", lc->c.spec->name);
  return 1;
}

static int cont_name (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  lua_pushstring(L, lc->c.spec->name);
  return 1;
}

/* c:spec() -> the spec as stored now (its throughput may have changed
** since the handle was made); a deleted container's, as the handle knew
** it. */
static int cont_spec (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  rg_cspec *now = NULL;
  const char *json = lc->c.spec->json;
  rg_txn *txn;
  rg_err e;
  int rc;
  if (rg_read_begin(lc->c.env, &txn, &e) == 0) {
    if (rg_load_spec(txn, lc->c.env, lc->c.spec->cid, &now, &e) == 0)
      json = now->json;
    rg_read_end(lc->c.env);
  }
  rc = rgl_json_push_stored(L, json, strlen(json), &e);
  rg_cspec_free(now);
  if (rc) return rgl_push_fail(L, &e);
  lua_pushnil(L);                    /* the layout's revision is internal */
  lua_setfield(L, -2, "revision");
  return 1;
}

static rg_db *writable (lua_State *L, rg_lcont *lc, rg_err *e) {
  (void)L;
  if (lc->db->readonly) {
    rg_fail(e, 403, "the database is open read-only");
    return NULL;
  }
  return lc->db;
}
/* }===================================================================== */


static int pk_isnone (lua_State *L, int idx);

/*
** {=====================================================================
** Ids and partition keys from Lua
** ======================================================================
*/
/* A scalar partition-key value as a cJSON node living on the C stack.
** Strings holding NUL need a MUTF-8 copy, made in a Lua buffer so that an
** error cannot leak it, and left on top of the stack while it is used. */
static int pk_node (lua_State *L, int idx, cJSON *n, rg_err *e) {
  memset(n, 0, sizeof(*n));
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      if (!rg_utf8_valid(s, len))
        return rg_fail(e, 400, "a partition key value is not valid UTF-8");
      n->type = cJSON_String;
      if (memchr(s, '\0', len) == NULL) n->valuestring = (char *)s;
      else {
        luaL_Buffer B;
        size_t i;
        luaL_buffinit(L, &B);
        for (i = 0; i < len; i++) {
          if (s[i] == '\0') luaL_addlstring(&B, "\xC0\x80", 2);
          else luaL_addchar(&B, s[i]);
        }
        luaL_pushresult(&B);
        n->valuestring = (char *)lua_tostring(L, -1);
      }
      return 0;
    }
    case LUA_TNUMBER: {
      lua_Number d = lua_tonumber(L, idx);
      if (d != d || d == HUGE_VAL || d == -HUGE_VAL)
        return rg_fail(e, 400, "a partition key value must be finite");
      n->type = cJSON_Number;
      n->valuedouble = d;
#if !RG_LUAJIT
      if (lua_isinteger(L, idx)) {    /* beyond 2^53: keep the exact text */
        lua_Integer i = lua_tointeger(L, idx);
        if (i > ((lua_Integer)1 << 53) || i < -((lua_Integer)1 << 53)) {
          lua_pushfstring(L, "%I", (LUAI_UACINT)i);
          n->valuestring = (char *)lua_tostring(L, -1);
        }
      }
#endif
      return 0;
    }
    case LUA_TBOOLEAN:
      n->type = lua_toboolean(L, idx) ? cJSON_True : cJSON_False;
      return 0;
    default:
      if (rgl_json_isnull(L, idx)) { n->type = cJSON_NULL; return 0; }
      if (pk_isnone(L, idx)) { n->type = cJSON_Object; return 0; }
      return rg_fail(e, 400, "a partition key value must be a string, number, "
                     "boolean or regolith.null, not %s",
                     luaL_typename(L, idx));
  }
}

static int pk_isnone (lua_State *L, int idx) {
  int none;
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  lua_pushnil(L);
  if (lua_next(L, idx)) { lua_pop(L, 2); return 0; }
  none = 1;
  if (lua_getmetatable(L, idx)) {
    luaL_getmetatable(L, "regolith.array");
    none = !lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  return none;
}

/* The partition key argument at idx: a value, or for hierarchical keys an
** array of one value per level (or the none value, an empty object).
** Fills nodes/pkv, cJSON nodes on the C stack; strings holding NUL leave
** a copy on the Lua stack while they are used. */
static int pk_from_lua (lua_State *L, int idx, const rg_cspec *spec,
                       cJSON nodes[RG_MAX_PK_PATHS],
                       const cJSON *pkv[RG_MAX_PK_PATHS], rg_err *e) {
  int i, rc;
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  for (i = 0; i < RG_MAX_PK_PATHS; i++) pkv[i] = NULL;
  if (spec->npk == 1) {
    if (lua_isnoneornil(L, idx))
      return rg_fail(e, 400, "the partition key value is missing");
    if ((rc = pk_node(L, idx, &nodes[0], e))) return rc;
    pkv[0] = &nodes[0];
    return 0;
  }
  if (pk_isnone(L, idx)) return 0;         /* every level NULL: none */
  if (lua_type(L, idx) != LUA_TTABLE || (int)rg_rawlen(L, idx) != spec->npk)
    return rg_fail(e, 400, "the partition key is hierarchical: give an array "
                   "of %d values (every level is required)", spec->npk);
  luaL_checkstack(L, spec->npk + 2, NULL);
  for (i = 0; i < spec->npk; i++) {
    lua_rawgeti(L, idx, i + 1);      /* left on the stack while in use */
    if ((rc = pk_node(L, lua_gettop(L), &nodes[i], e))) return rc;
    pkv[i] = &nodes[i];
  }
  return 0;
}

/* An item's key from (id, pk) arguments. */
static int key_from_args (lua_State *L, const rg_cspec *spec, int idix,
                          int pkix, rg_ikey *k, const char **id, size_t *idlen,
                          rg_err *e) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  int rc;
  if (lua_type(L, idix) != LUA_TSTRING)
    return rg_fail(e, 400, "id must be a string, not %s", luaL_typename(L, idix));
  *id = lua_tolstring(L, idix, idlen);
  if ((rc = rg_check_id(*id, *idlen, RG_MAX_ID, "id", e))) return rc;
  if ((rc = pk_from_lua(L, pkix, spec, nodes, pkv, e))) return rc;
  if ((rc = rg_ikey_partition(spec, pkv, k, e))) return rc;
  rg_ikey_id(k, *id, *idlen);
  return 0;
}

int rgl_pk_partition (lua_State *L, int idx, const rg_cspec *spec,
                      rg_ikey *k) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  rg_err e;
  int top = lua_gettop(L), ok;
  idx = idx < 0 ? top + idx + 1 : idx;
  ok = pk_from_lua(L, idx, spec, nodes, pkv, &e) == 0 &&
       rg_ikey_partition(spec, pkv, k, &e) == 0;
  lua_settop(L, top);
  return ok;
}

/* The logical partition a document (a table at idx) names, its values
** read from the table without converting it (a level it lacks is the
** none value): 1, or 0 when its key is no good (the write will say why).
** Leaves the stack as it was. */
static int doc_partition (lua_State *L, int idx, const rg_cspec *spec,
                          rg_ikey *k) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS] = { NULL, NULL, NULL };
  rg_err e;
  int top = lua_gettop(L), ok = lua_type(L, idx) == LUA_TTABLE, i, j;
  luaL_checkstack(L, 2 * RG_MAX_PK_PATHS + 4, NULL);
  for (i = 0; ok && i < spec->npk; i++) {
    int found = 1;
    lua_pushvalue(L, idx);           /* each level's value stays on the stack */
    for (j = 0; found && j < spec->pk[i].n; j++) {
      if (lua_type(L, -1) != LUA_TTABLE) found = 0;
      else {
        lua_pushstring(L, spec->pk[i].seg[j]);
        lua_rawget(L, -2);
        lua_remove(L, -2);
      }
    }
    if (found && !lua_isnil(L, -1)) {
      ok = pk_node(L, lua_gettop(L), &nodes[i], &e) == 0;
      pkv[i] = &nodes[i];
    }
  }
  ok = ok && rg_ikey_partition(spec, pkv, k, &e) == 0;
  lua_settop(L, top);
  return ok;
}

/* For keys holding digests: is the pushed document really (id, pk)? */
static int check_identity (lua_State *L, const rg_cspec *spec, const char *id,
                           size_t idlen, const rg_ikey *k) {
  const char *sid;
  size_t n;
  int ok;
  lua_getfield(L, -1, "id");
  sid = lua_tolstring(L, -1, &n);
  ok = sid && n == idlen && memcmp(sid, id, n) == 0;
  lua_pop(L, 1);
  (void)spec; (void)k;
  return ok;
}
/* }===================================================================== */


/*
** {=====================================================================
** Reads
** ======================================================================
*/
/* c:read(id, pk, opts) -> doc, info | nil, msg, 404 | nil, msg, 304 */
static int cont_read (lua_State *L) {
  static const char *const allowed[] = { "if_none_match", NULL };
  rg_lcont *lc = rgl_checkcont(L, 1);
  rg_env *env = lc->c.env;
  const char *inm = NULL, *id;
  size_t idlen, size = 0;
  rg_ikey k;
  rg_err e;
  rg_work w;
  rg_admit a;
  rg_txn *txn;
  rg_val v;
  int rc;
  if (!lua_isnoneornil(L, 4)) {
    size_t n;
    rgl_opts_check(L, 4, allowed, "read");
    inm = rgl_opt_lstring(L, 4, "if_none_match", &n, "read");
    if (rg_opt_text(inm, n, "if_none_match", &e)) return rgl_push_fail(L, &e);
  }
  if ((rc = key_from_args(L, lc->c.spec, 2, 3, &k, &id, &idlen, &e)))
    return rgl_push_fail(L, &e);
  if ((rc = rg_admit_begin(lc, 1, k.hash, 0, &a, &e)))
    return rgl_push_throttled(L, &e, &a);
  if ((rc = rg_read_begin(env, &txn, &e))) return rgl_push_fail(L, &e);
  if ((rc = rg_cont_alive(txn, &lc->c, &e)) == 0 &&
      (rc = rg_item_get(txn, env, &k, rg_now(), &v, &e)) == 0) {
    size = v.n;
    if ((rc = rgl_json_push_stored(L, (const char *)v.p, v.n, &e)))
      rc = rg_fail(&e, 500, "corrupt item: %s", e.msg);
  }
  rg_read_end(env);
  memset(&w, 0, sizeof(w));
  w.read_units = rg_read_units(size);  /* a miss costs a read too */
  if (rc) {
    rgl_account_work(L, lc, &a, &w);
    return rgl_push_fail(L, &e);
  }
  if (k.lossy && !check_identity(L, lc->c.spec, id, idlen, &k)) {
    rgl_account_work(L, lc, &a, &w);
    rg_fail(&e, 404, "item not found");
    return rgl_push_fail(L, &e);
  }
  if (inm) {
    int same;
    lua_getfield(L, -1, "_etag");
    same = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), inm) == 0;
    lua_pop(L, 1);
    if (same) {
      rgl_account_work(L, lc, &a, &w);
      rg_fail(&e, 304, "not modified");
      return rgl_push_fail(L, &e);
    }
  }
  rgl_account(L, lc, &a, rgl_push_info(L, &w, 200));
  return 2;
}

/* The key of entry i of a read_many list (at index 2): 1, or 0 when it
** is no good (the read says why).  Leaves the stack as it was. */
static int many_key (lua_State *L, int i, const rg_cspec *spec, rg_ikey *k) {
  int top = lua_gettop(L), ok = 0;
  const char *id;
  size_t idlen;
  rg_err e;
  lua_rawgeti(L, 2, i);
  if (lua_type(L, top + 1) == LUA_TTABLE) {
    lua_rawgeti(L, top + 1, 1);
    lua_rawgeti(L, top + 1, 2);
    ok = key_from_args(L, spec, top + 2, top + 3, k, &id, &idlen, &e) == 0;
  }
  lua_settop(L, top);
  return ok;
}

/* Admits a read_many whole, before anything is read: every partition it
** names must have budget left. */
static int many_admit (lua_State *L, rg_lcont *lc, int n, rg_admit *a,
                       rg_err *e) {
  int rc, i;
  memset(a, 0, sizeof(*a));
  do {
    rc = 0;
    for (i = 1; rc == 0 && i <= n; i++) {
      rg_ikey k;
      if (many_key(L, i, lc->c.spec, &k))
        rc = rg_tp_admit(lc->c.spec, &lc->tp, 1, k.hash, 0, a, e);
    }
  } while (rc == 429 && rg_admit_wait(lc, a));
  return rc;
}

/* c:read_many({{id, pk}, ...}) -> docs, info (missing items left out) */
static int cont_read_many (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  rg_env *env = lc->c.env;
  rg_err e;
  rg_work w;
  rg_admit a;
  rg_txn *txn;
  int n, i, rc, out = 0, on;
  int64_t now = rg_now();
  if (lua_type(L, 2) != LUA_TTABLE) {
    rg_fail(&e, 400, "read_many takes a list of {id, partition key} pairs");
    return rgl_push_fail(L, &e);
  }
  n = (int)rg_rawlen(L, 2);
  memset(&w, 0, sizeof(w));
  lua_settop(L, 2);
  memset(&a, 0, sizeof(a));
  on = rg_tp_live(env, lc->c.spec->cid, &lc->tp);
  if (on && many_admit(L, lc, n, &a, &e))
    return rgl_push_throttled(L, &e, &a);
  lua_createtable(L, n, 0);          /* 3: the results */
  if ((rc = rg_read_begin(env, &txn, &e))) return rgl_push_fail(L, &e);
  rc = rg_cont_alive(txn, &lc->c, &e);
  for (i = 1; rc == 0 && i <= n; i++) {
    rg_ikey k;
    const char *id;
    size_t idlen;
    rg_val v;
    int top = lua_gettop(L);
    lua_rawgeti(L, 2, i);            /* top+1: the pair */
    if (lua_type(L, top + 1) != LUA_TTABLE) {
      rc = rg_fail(&e, 400, "read_many: entry %d is not an {id, pk} pair", i);
      break;
    }
    lua_rawgeti(L, top + 1, 1);      /* top+2: id */
    lua_rawgeti(L, top + 1, 2);      /* top+3: pk */
    if ((rc = key_from_args(L, lc->c.spec, top + 2, top + 3, &k, &id, &idlen,
                            &e))) {
      char msg[sizeof(e.msg)];
      memcpy(msg, e.msg, sizeof(msg));
      rg_fail(&e, rc, "read_many: entry %d: %s", i, msg);
      break;
    }
    rc = rg_item_get(txn, env, &k, now, &v, &e);
    if (on && (rc == 0 || rc == 404)) {       /* each item's own partition */
      rg_admit ai;
      rg_tp_route(&lc->tp, 1, k.hash, 0, &ai);
      rg_tp_debit(&ai, (double)(rc ? 1 : rg_read_units(v.n)));
    }
    if (rc == 404) {
      w.read_units++;
      rc = 0;
    }
    else if (rc == 0) {
      w.read_units += rg_read_units(v.n);
      if ((rc = rgl_json_push_stored(L, (const char *)v.p, v.n,
                                    &e))) {
        rc = rg_fail(&e, 500, "corrupt item: %s", e.msg);
        break;
      }
      if (!k.lossy || check_identity(L, lc->c.spec, id, idlen, &k))
        lua_rawseti(L, 3, ++out);
    }
    lua_settop(L, top);
  }
  rg_read_end(env);
  if (rc) return rgl_push_fail(L, &e);
  lua_settop(L, 3);
  rgl_push_info(L, &w, 200);
  if (on && lc->db->retry_throttled > 0) {
    lua_pushinteger(L, a.retries);
    lua_setfield(L, -2, "retries");
  }
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Single writes
** ======================================================================
*/
typedef struct wcall {
  lua_State *L;
  const rg_cont *c;
  int op;
  int docix;                   /* create/replace/upsert: the document */
  int idix, pkix;              /* delete/patch */
  int opsix;                   /* patch: the op list */
  int bindix;                  /* create/replace/upsert: opts.partition_key */
  const char *if_match, *filter, *pre, *post;
  cJSON *doc;                  /* converted in the body */
  rg_patch_op *ops;
  cJSON **values;
  int nops;
  rg_wres r;
  rg_work work;
} wcall;

static void wcall_clear (void *p) {
  wcall *q = (wcall *)p;
  int i;
  cJSON_Delete(q->doc);
  q->doc = NULL;
  for (i = 0; i < q->nops; i++) {
    cJSON_Delete(q->values[i]);
    cJSON_free((void *)q->ops[i].path);
    cJSON_free((void *)q->ops[i].from);
  }
  free(q->ops);
  free(q->values);
  q->ops = NULL;
  q->values = NULL;
  q->nops = 0;
  rg_wres_free(&q->r);
}

/* Is the key at idx (a string, or not) one of `fields`?  Compared with its
** length: "op\0x" is no "op". */
static int known_field (lua_State *L, int idx, const char *const *fields) {
  size_t n;
  const char *k;
  if (lua_type(L, idx) != LUA_TSTRING) return 0;
  k = lua_tolstring(L, idx, &n);
  for (; *fields; fields++)
    if (strlen(*fields) == n && memcmp(*fields, k, n) == 0) return 1;
  return 0;
}

static char *mutf8_of (lua_State *L, int idx) {
  size_t n;
  const char *s = lua_tolstring(L, idx, &n);
  cJSON *tmp = rg_str_new(s, n);
  char *out;
  if (tmp == NULL) return NULL;
  out = tmp->valuestring;
  tmp->valuestring = NULL;
  cJSON_Delete(tmp);
  return out;
}

/* Converts a patch op list (at idx) into q->ops; 400 for bad entries. */
static int patch_ops (lua_State *L, int idx, wcall *q, rg_err *e) {
  static const char *const names[] = {
    "add", "set", "replace", "remove", "incr", "move", NULL
  };
  int n, i, rc;
  if (lua_type(L, idx) != LUA_TTABLE)
    return rg_fail(e, 400, "patch operations must be a list of tables");
  n = (int)rg_rawlen(L, idx);
  if (n < 1) return rg_fail(e, 400, "a patch needs at least one operation");
  if (n > RG_MAX_PATCH_OPS)
    return rg_fail(e, 400, "a patch takes at most %d operations, not %d",
                   RG_MAX_PATCH_OPS, n);
  q->ops = (rg_patch_op *)calloc((size_t)n, sizeof(rg_patch_op));
  q->values = (cJSON **)calloc((size_t)n, sizeof(cJSON *));
  if (q->ops == NULL || q->values == NULL) return rg_fail(e, 500, "out of memory");
  for (i = 0; i < n; i++) {
    rg_patch_op *op = &q->ops[i];
    int t = lua_gettop(L), k;
    const char *name;
    q->nops = i + 1;
    lua_rawgeti(L, idx, i + 1);
    if (lua_type(L, t + 1) != LUA_TTABLE) {
      lua_settop(L, t);
      return rg_fail(e, 400, "patch operation %d is not a table", i + 1);
    }
    lua_pushnil(L);
    while (lua_next(L, t + 1) != 0) {
      static const char *const fields[] = { "op", "path", "value", "from",
                                            NULL };
      const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
      lua_pop(L, 1);
      if (!known_field(L, -1, fields)) {
        lua_settop(L, t);
        return rg_fail(e, 400, "patch operation %d: unknown field '%s'", i + 1,
                       key);
      }
    }
    lua_getfield(L, t + 1, "op");
    name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
    for (k = 0; names[k]; k++) if (strcmp(names[k], name) == 0) break;
    if (names[k] == NULL) {
      lua_settop(L, t);
      return rg_fail(e, 400, "patch operation %d: op must be add, set, "
                     "replace, remove, incr or move", i + 1);
    }
    op->op = k + 1;
    lua_getfield(L, t + 1, "path");
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_settop(L, t);
      return rg_fail(e, 400, "patch operation %d: path must be a string", i + 1);
    }
    if ((op->path = mutf8_of(L, -1)) == NULL) {
      lua_settop(L, t);
      return rg_fail(e, 500, "out of memory");
    }
    lua_getfield(L, t + 1, "from");
    if (op->op == RG_PATCH_MOVE) {
      if (lua_type(L, -1) != LUA_TSTRING) {
        lua_settop(L, t);
        return rg_fail(e, 400, "patch operation %d: move needs a 'from' path",
                       i + 1);
      }
      if ((op->from = mutf8_of(L, -1)) == NULL) {
        lua_settop(L, t);
        return rg_fail(e, 500, "out of memory");
      }
    }
    lua_getfield(L, t + 1, "value");
    if (op->op != RG_PATCH_REMOVE && op->op != RG_PATCH_MOVE) {
      if (lua_isnil(L, -1)) {
        lua_settop(L, t);
        return rg_fail(e, 400, "patch operation %d: %s needs a value", i + 1,
                       names[k]);
      }
      if ((rc = rgl_json_from_lua(L, -1, &q->values[i], e))) {
        char msg[sizeof(e->msg)];
        memcpy(msg, e->msg, sizeof(msg));
        lua_settop(L, t);
        return rg_fail(e, rc, "patch operation %d: %s", i + 1, msg);
      }
      op->value = q->values[i];
    }
    lua_settop(L, t);
  }
  return 0;
}

/* A partition a call binds the scope to (a batch's, opts.partition_key),
** and the binding it replaced. */
typedef struct binding {
  rg_binding saved;
  rg_ikey key;                 /* the partition bound to */
} binding;

/* Binds the scope to the partition of the key at idx; `msg` is the 400
** message for a write to another partition. */
static int bind_partition (rg_scope *s, lua_State *L, int idx,
                           const rg_cspec *spec, const char *msg,
                           binding *b, rg_err *e) {
  cJSON nodes[RG_MAX_PK_PATHS];
  const cJSON *pkv[RG_MAX_PK_PATHS];
  int rc;
  if ((rc = pk_from_lua(L, idx, spec, nodes, pkv, e)) ||
      (rc = rg_ikey_partition(spec, pkv, &b->key, e)))
    return rc;
  b->saved = s->bound;
  s->bound.spec = spec;
  s->bound.lp = b->key.key;
  s->bound.lplen = b->key.lplen;
  s->bound.msg = msg;
  return 0;
}

static void unbind_partition (rg_scope *s, const binding *b) {
  s->bound = b->saved;
}

/* A write given opts.partition_key: the document must belong to that
** logical partition (400 otherwise), which is how a document lacking its
** key is written to the none partition key (an empty object). */
static int bound_write (rg_scope *s, wcall *q, const rg_wreq *w, rg_err *e) {
  binding b;
  int rc;
  if ((rc = bind_partition(s, q->L, q->bindix, q->c->spec, "the document's "
                           "partition key differs from the partition_key "
                           "option", &b, e)))
    return rc;
  rc = rg_write(s, q->c, w, &q->r, e);
  unbind_partition(s, &b);
  return rc;
}

static int write_body (rg_scope *s, void *ud, rg_err *e) {
  wcall *q = (wcall *)ud;
  lua_State *L = q->L;
  rg_wreq w;
  rg_work before = s->work;
  cJSON nodes[RG_MAX_PK_PATHS];
  int rc;
  wcall_clear(q);                    /* a rerun starts afresh */
  memset(&w, 0, sizeof(w));
  w.op = q->op;
  w.if_match = q->if_match;
  w.filter = q->filter;
  w.pre_trigger = q->pre;
  w.post_trigger = q->post;
  if (q->docix) {
    if (lua_type(L, q->docix) != LUA_TTABLE)
      return rg_fail(e, 400, "a document must be a table, not %s",
                     luaL_typename(L, q->docix));
    if ((rc = rgl_json_from_lua(L, q->docix, &q->doc, e))) return rc;
    w.doc = q->doc;
  }
  else {
    if (lua_type(L, q->idix) != LUA_TSTRING)
      return rg_fail(e, 400, "id must be a string, not %s",
                     luaL_typename(L, q->idix));
    w.id = lua_tolstring(L, q->idix, &w.idlen);
    if ((rc = pk_from_lua(L, q->pkix, q->c->spec, nodes, w.pkv, e)))
      return rc;
    if (q->opsix) {
      if ((rc = patch_ops(L, q->opsix, q, e))) return rc;
      w.ops = q->ops;
      w.nops = q->nops;
    }
  }
  if (q->bindix) rc = bound_write(s, q, &w, e);
  else rc = rg_write(s, q->c, &w, &q->r, e);
  rg_work_diff(&q->work, &s->work, &before);
  return rc;
}

/* Admits a single write: to the partition its document names, or its
** partition_key option (at bindix, when given), or for delete and patch
** its partition-key argument; one whose key is no good fails in the
** write path with nothing done. */
static int write_admit (lua_State *L, rg_lcont *lc, int op, int bindix,
                        rg_admit *a, rg_err *e) {
  rg_ikey k;
  a->own = a->pool = NULL;
  a->retries = 0;
  if (!rg_tp_live(lc->c.env, lc->c.spec->cid, &lc->tp)) return 0;
  if (!(op == RG_OP_DELETE || op == RG_OP_PATCH
        ? rgl_pk_partition(L, 3, lc->c.spec, &k)
        : bindix ? rgl_pk_partition(L, bindix, lc->c.spec, &k)
        : doc_partition(L, 2, lc->c.spec, &k)))
    return 0;
  return rg_admit_on(lc, 1, k.hash, 0, a, e);
}

/* `text`: the document a write returns comes back as its JSON text, as
** rg_json_print writes it, instead of a table (the write queue's form:
** its leader hands the text over to the process that asked, whose
** json.decode makes of it the table the write returns alone). */
static int write_call (lua_State *L, int op, int text) {
  static const char *const allowed[] = {
    "if_match", "pre_trigger", "post_trigger", "filter", "partition_key",
    NULL
  };
  static const char *const names[] = {
    "", "create", "replace", "upsert", "delete", "patch"
  };
  rg_lcont *lc = rgl_checkcont(L, 1);
  int optix = op == RG_OP_PATCH ? 5 : op == RG_OP_DELETE ? 4 : 3;
  const char *what = names[op];
  wcall *q;
  rg_db *d;
  rg_err e;
  rg_admit a;
  int rc;
  lua_settop(L, optix);
  rgl_opts_check(L, optix, allowed, what);
  if (op != RG_OP_PATCH && !lua_isnil(L, optix)) {
    lua_getfield(L, optix, "filter");
    if (!lua_isnil(L, -1))
      return luaL_error(L, "%s: unknown option 'filter'", what);
    lua_pop(L, 1);
  }
  lua_pushnil(L);                    /* optix + 1: opts.partition_key */
  if (!lua_isnil(L, optix)) {
    lua_getfield(L, optix, "partition_key");
    if (!lua_isnil(L, -1) && (op == RG_OP_DELETE || op == RG_OP_PATCH))
      return luaL_error(L, "%s: unknown option 'partition_key' (the "
                        "partition key is an argument)", what);
    lua_replace(L, optix + 1);
  }
  if ((d = writable(L, lc, &e)) == NULL) return rgl_push_fail(L, &e);
  q = (wcall *)rgl_newbox(L, sizeof(wcall), wcall_clear);
  q->L = L;
  q->c = &lc->c;
  q->op = op;
  if (op == RG_OP_DELETE || op == RG_OP_PATCH) {
    q->idix = 2;
    q->pkix = 3;
    q->opsix = op == RG_OP_PATCH ? 4 : 0;
  }
  else q->docix = 2;
  if (!lua_isnil(L, optix + 1)) q->bindix = optix + 1;
  {                                  /* data: NUL is 400, not a cut */
    size_t n1, n2, n3, n4;
    q->if_match = rgl_opt_lstring(L, optix, "if_match", &n1, what);
    q->filter = rgl_opt_lstring(L, optix, "filter", &n2, what);
    q->pre = rgl_opt_lstring(L, optix, "pre_trigger", &n3, what);
    q->post = rgl_opt_lstring(L, optix, "post_trigger", &n4, what);
    if (rg_opt_text(q->if_match, n1, "if_match", &e) ||
        rg_opt_text(q->filter, n2, "filter", &e) ||
        rg_opt_text(q->pre, n3, "pre_trigger", &e) ||
        rg_opt_text(q->post, n4, "post_trigger", &e)) {
      rg_box_done(q);
      return rgl_push_fail(L, &e);
    }
  }
  if ((rc = write_admit(L, lc, op, q->bindix, &a, &e))) {
    rg_box_done(q);
    return rgl_push_throttled(L, &e, &a);
  }
  rc = rgl_scope_run(L, lc->c.env, d->sync, 1, write_body, q, &e);
  if (rc) {
    rgl_account_work(L, lc, &a, &q->work);
    rg_box_done(q);
    return rgl_push_fail(L, &e);
  }
  if (op == RG_OP_DELETE && q->r.doc == NULL) lua_pushboolean(L, 1);
  else if (q->r.doc && text) {
    rg_buf *b = rgl_newbuf(L);
    rg_json_print(q->r.doc, b);
    if (b->oom) {
      rg_box_done(b);
      rg_box_done(q);
      return luaL_error(L, "out of memory");
    }
    lua_pushlstring(L, b->p, b->n);
    rg_box_done(b);
    lua_remove(L, -2);               /* the buffer's box */
  }
  else if (q->r.doc) rgl_json_push(L, q->r.doc);
  else lua_pushboolean(L, 1);
  rgl_account(L, lc, &a, rgl_push_info(L, &q->work, q->r.status));
  if (q->r.etag[0]) {
    lua_pushstring(L, q->r.etag);
    lua_setfield(L, -2, "etag");
  }
  rg_box_done(q);
  return 2;
}

static int cont_create (lua_State *L) { return write_call(L, RG_OP_CREATE, 0); }
static int cont_replace (lua_State *L) { return write_call(L, RG_OP_REPLACE, 0); }
static int cont_upsert (lua_State *L) { return write_call(L, RG_OP_UPSERT, 0); }
static int cont_delete (lua_State *L) { return write_call(L, RG_OP_DELETE, 0); }
static int cont_patch (lua_State *L) { return write_call(L, RG_OP_PATCH, 0); }

/* c:_text_create(...) and the others: the same writes, the document they
** return given as its JSON text (write_call; lua/regolith/queue.lua). */
static int cont_text_create (lua_State *L) { return write_call(L, RG_OP_CREATE, 1); }
static int cont_text_replace (lua_State *L) { return write_call(L, RG_OP_REPLACE, 1); }
static int cont_text_upsert (lua_State *L) { return write_call(L, RG_OP_UPSERT, 1); }
static int cont_text_delete (lua_State *L) { return write_call(L, RG_OP_DELETE, 1); }
static int cont_text_patch (lua_State *L) { return write_call(L, RG_OP_PATCH, 1); }
/* }===================================================================== */


/*
** {=====================================================================
** Transactional batch
** ======================================================================
*/
typedef struct bres {
  int status;
  cJSON *doc;
} bres;

typedef struct bcall {
  lua_State *L;
  const rg_cont *c;
  int pkix, opsix, n;
  bres *res;
  int failed;                  /* 1-based index of the failing op */
  uint64_t bytes;              /* of the items written (RG_MAX_BATCH_BYTES) */
  wcall w;                     /* the op in progress */
  rg_work work;
} bcall;

static void bcall_clear (void *p) {
  bcall *q = (bcall *)p;
  int i;
  for (i = 0; q->res && i < q->n; i++) cJSON_Delete(q->res[i].doc);
  free(q->res);
  q->res = NULL;
  wcall_clear(&q->w);
}

static int batch_op (rg_scope *s, bcall *q, int i, int t, const rg_ikey *lp,
                     rg_err *e) {
  static const char *const names[] = {
    "create", "replace", "upsert", "delete", "patch", "read", NULL
  };
  static const char *const fields[] = {
    "op", "doc", "id", "ops", "if_match", "filter", NULL
  };
  lua_State *L = q->L;
  const char *name;
  uint64_t bytes;
  int k, rc, op;
  if (lua_type(L, t) != LUA_TTABLE)
    return rg_fail(e, 400, "batch operation is not a table");
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
    lua_pop(L, 1);
    if (!known_field(L, -1, fields)) {
      lua_pop(L, 1);
      return rg_fail(e, 400, "unknown field '%s'", key);
    }
  }
  lua_getfield(L, t, "op");          /* t+1 */
  name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  for (k = 0; names[k]; k++) if (strcmp(names[k], name) == 0) break;
  if (names[k] == NULL)
    return rg_fail(e, 400, "op must be create, upsert, replace, read, delete "
                   "or patch");
  op = k + 1;
  lua_getfield(L, t, "doc");         /* t+2 */
  lua_getfield(L, t, "id");          /* t+3 */
  lua_getfield(L, t, "ops");         /* t+4 */
  lua_getfield(L, t, "if_match");    /* t+5 */
  lua_getfield(L, t, "filter");      /* t+6 */
  if ((!lua_isnil(L, t + 5) && lua_type(L, t + 5) != LUA_TSTRING) ||
      (!lua_isnil(L, t + 6) && lua_type(L, t + 6) != LUA_TSTRING))
    return rg_fail(e, 400, "if_match and filter must be strings");
  {
    size_t n1, n2;
    const char *s1 = lua_tolstring(L, t + 5, &n1);
    const char *s2 = lua_tolstring(L, t + 6, &n2);
    if (rg_opt_text(s1, n1, "if_match", e) ||
        rg_opt_text(s2, n2, "filter", e))
      return 400;
  }
  if (op == RG_OP_READ) {
    rg_val v;
    size_t idlen;
    const char *id;
    rg_ikey k2 = *lp;
    if (lua_type(L, t + 3) != LUA_TSTRING)
      return rg_fail(e, 400, "read needs an id");
    id = lua_tolstring(L, t + 3, &idlen);
    if ((rc = rg_check_id(id, idlen, RG_MAX_ID, "id", e))) return rc;
    k2.len = k2.lplen;
    rg_ikey_id(&k2, id, idlen);
    rc = rg_item_get(s->txn, s->env, &k2, s->now, &v, e);
    if (rc) { if (rc == 404) s->work.read_units++; return rc; }
    s->work.read_units += rg_read_units(v.n);
    if ((rc = rg_json_parse((const char *)v.p, v.n,
                            &q->res[i].doc, e)))
      return rg_fail(e, 500, "corrupt item: %s", e->msg);
    q->res[i].status = 200;
    return 0;
  }
  wcall_clear(&q->w);
  memset(&q->w, 0, sizeof(q->w));
  q->w.L = L;
  q->w.c = q->c;
  q->w.op = op;
  q->w.if_match = lua_tostring(L, t + 5);
  q->w.filter = lua_tostring(L, t + 6);
  if (op == RG_OP_DELETE || op == RG_OP_PATCH) {
    if (lua_type(L, t + 3) != LUA_TSTRING)
      return rg_fail(e, 400, "%s needs an id", names[k]);
    q->w.idix = t + 3;
    q->w.pkix = q->pkix;
    q->w.opsix = op == RG_OP_PATCH ? t + 4 : 0;
  }
  else q->w.docix = t + 2;
  bytes = s->work.write_bytes;
  rc = write_body(s, &q->w, e);
  q->res[i].status = q->w.r.status;
  q->res[i].doc = q->w.r.doc;
  q->w.r.doc = NULL;
  if (rc == 0 && op != RG_OP_DELETE &&
      (q->bytes += s->work.write_bytes - bytes) > RG_MAX_BATCH_BYTES)
    return rg_fail(e, 413, "the batch's items come to more than %u bytes "
                   "(%llu with this operation's): a batch writes at most "
                   "2 MiB", RG_MAX_BATCH_BYTES, (unsigned long long)q->bytes);
  return rc;
}

static int batch_body (rg_scope *s, void *ud, rg_err *e) {
  bcall *q = (bcall *)ud;
  lua_State *L = q->L;
  rg_work before = s->work;
  binding b;
  int i, rc = 0;
  bcall_clear(q);
  q->failed = 0;
  q->bytes = 0;
  if ((q->res = (bres *)calloc((size_t)q->n, sizeof(bres))) == NULL)
    return rg_fail(e, 500, "out of memory");
  if ((rc = bind_partition(s, L, q->pkix, q->c->spec, "the operation's "
                           "partition key differs from the batch's", &b, e)))
    return rc;
  for (i = 0; i < q->n; i++) {
    int t = lua_gettop(L);
    lua_rawgeti(L, q->opsix, i + 1);
    rc = batch_op(s, q, i, t + 1, &b.key, e);
    lua_settop(L, t);
    if (rc) {
      char msg[sizeof(e->msg)];
      memcpy(msg, e->msg, sizeof(msg));
      rg_fail(e, rc, "batch operation %d failed: %s", i + 1, msg);
      q->failed = i + 1;
      break;
    }
  }
  unbind_partition(s, &b);
  rg_work_diff(&q->work, &s->work, &before);
  return rc;
}

/* c:batch(pk, ops) -> results, info | nil, msg, status, results */
static int cont_batch (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  bcall *q;
  rg_db *d;
  rg_err e;
  rg_admit a;
  rg_ikey k;
  int rc, i;
  lua_settop(L, 3);
  if ((d = writable(L, lc, &e)) == NULL) return rgl_push_fail(L, &e);
  if (lua_type(L, 3) != LUA_TTABLE) {
    rg_fail(&e, 400, "a batch takes a list of operations");
    return rgl_push_fail(L, &e);
  }
  q = (bcall *)rgl_newbox(L, sizeof(bcall), bcall_clear);
  q->L = L;
  q->c = &lc->c;
  q->pkix = 2;
  q->opsix = 3;
  q->n = (int)rg_rawlen(L, 3);
  if (q->n == 0) {
    rg_fail(&e, 400, "a batch needs at least one operation");
    return rgl_push_fail(L, &e);
  }
  if (q->n > RG_MAX_BATCH_OPS) {
    rg_fail(&e, 400, "a batch takes at most %d operations, not %d",
            RG_MAX_BATCH_OPS, q->n);
    return rgl_push_fail(L, &e);
  }
  a.own = a.pool = NULL;
  a.retries = 0;
  if (rg_tp_live(lc->c.env, lc->c.spec->cid, &lc->tp) &&
      rgl_pk_partition(L, 2, lc->c.spec, &k) &&
      (rc = rg_admit_on(lc, 1, k.hash, 0, &a, &e))) {
    rg_box_done(q);
    return rgl_push_throttled(L, &e, &a);
  }
  rc = rgl_scope_run(L, lc->c.env, d->sync, 1, batch_body, q, &e);
  rgl_account_work(L, lc, &a, &q->work);
  lua_createtable(L, q->n, 0);
  for (i = 0; i < q->n; i++) {
    lua_createtable(L, 0, 2);
    if (rc) {
      lua_pushinteger(L, i + 1 == q->failed ? rc : 424);
      lua_setfield(L, -2, "status");
    }
    else {
      lua_pushinteger(L, q->res[i].status);
      lua_setfield(L, -2, "status");
      if (q->res[i].doc) {
        rgl_json_push(L, q->res[i].doc);
        lua_setfield(L, -2, "doc");
      }
    }
    lua_rawseti(L, -2, i + 1);
  }
  rg_box_done(q);
  if (rc) {
    int results = lua_gettop(L);
    lua_pushnil(L);
    lua_pushstring(L, e.msg);
    lua_pushinteger(L, rc);
    lua_pushvalue(L, results);
    return 4;
  }
  rgl_push_info(L, &q->work, 200);
  if (a.pool != NULL && lc->db->retry_throttled > 0) {
    lua_pushinteger(L, a.retries);
    lua_setfield(L, -2, "retries");
  }
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Bulk load
** ======================================================================
*/
#define BULK_BATCH     10000
#define BULK_BATCH_MAX 1000000
#define BULK_HOLD      ((size_t)1 << 30)  /* a load's entries held in memory */
#define BULK_HOLD_MAX  ((size_t)1 << 40)
#define BULK_LOAD_MT   "regolith.bulkload"

/* A load in one transaction: the entries its batches hold (rg_bulk_hold),
** a full userdata c:_bulk_whole passes to its function, and that to each
** c:_bulk_batch.  Closing it (load:__close, a to-be-closed variable, or
** its collection) ends the load's input: a batch given it afterwards
** raises "the load is over".  It does not abandon the load: while the
** function runs, what the batches gave stays held, and the load commits
** or not as the function's result says (true: merged and committed; nil,
** msg, status or an error: nothing written), so that `local l <close> =
** load` ends the load where its scope ends.  The held memory is freed
** when c:_bulk_whole returns, however it ends.  A run again from the
** start (the map grew) opens the load again. */
typedef struct bulkload {
  rg_bulk *b;                  /* NULL: closed and freed */
  int running;                 /* inside c:_bulk_whole: b is its load's */
  int closed;                  /* no more batches */
} bulkload;

/* Closes the load (idempotent, __close and __gc): its memory is freed
** unless c:_bulk_whole still runs it. */
static int bulkload_close (lua_State *L) {
  bulkload *h = (bulkload *)luaL_checkudata(L, 1, BULK_LOAD_MT);
  h->closed = 1;
  if (!h->running) {
    rg_bulk_free(h->b);
    h->b = NULL;
  }
  return 0;
}

static int bulkload_tostring (lua_State *L) {
  bulkload *h = (bulkload *)luaL_checkudata(L, 1, BULK_LOAD_MT);
  if (h->closed) lua_pushliteral(L, "regolith.bulkload (closed)");
  else lua_pushfstring(L, "regolith.bulkload (%p)", (void *)h);
  return 1;
}

typedef struct bulkcall {
  const rg_cont *c;
  rg_bulk *b;
  rg_bulk_item *items;
  size_t n, cap, written;
  int mode, shared;            /* shared: b is the load's (bulkload) */
  rg_work work, batch;         /* of the whole load; of the batch */
} bulkcall;

static void bulk_empty (bulkcall *q) {
  size_t i;
  rg_bulk_clear(q->items, q->n);
  for (i = 0; i < q->n; i++) {
    cJSON_Delete(q->items[i].doc);
    q->items[i].doc = NULL;
  }
  q->n = 0;
}

static void bulkcall_clear (void *p) {
  bulkcall *q = (bulkcall *)p;
  bulk_empty(q);
  free(q->items);
  q->items = NULL;
  if (!q->shared) rg_bulk_free(q->b);
  q->b = NULL;
}

static int bulk_body (rg_scope *s, void *ud, rg_err *e) {
  bulkcall *q = (bulkcall *)ud;
  rg_work before = s->work;
  int rc = rg_bulk_write(s, q->b, q->c, q->items, q->n, q->mode, &q->written,
                         e);
  rg_work_diff(&q->batch, &s->work, &before);
  return rc;
}

/* c:_bulk_opts(opts) -> batch, mode, whole, memory: bulk_load's options
** checked (regolith/bulk.lua runs the load, a batch at a time); whole: the
** load is one transaction (opts.transaction "load", on a local database);
** memory: what such a load holds before it merges into the tables. */
static int cont_bulk_opts (lua_State *L) {
  static const char *const allowed[] = { "batch", "mode", "progress",
                                         "transaction", "memory", NULL };
  const char *mode, *txn;
  lua_Integer batch, memory;
  rg_lcont *lc = rgl_checkcont(L, 1);
  lua_settop(L, 2);
  rgl_opts_check(L, 2, allowed, "bulk_load");
  /* on a cluster a batch applies in one Function call per place: by
  ** default no more than one procedure call may write (base/limits.h) */
  batch = rgl_opt_int(L, 2, "batch", rg_env_remote(lc->c.env) ?
                      RG_MAX_APPLY_ITEMS : BULK_BATCH, 1, BULK_BATCH_MAX,
                      "bulk_load");
  memory = rgl_opt_int(L, 2, "memory", (lua_Integer)BULK_HOLD, 1,
                       (lua_Integer)BULK_HOLD_MAX, "bulk_load");
  mode = rgl_opt_string(L, 2, "mode", "bulk_load");
  if (mode && strcmp(mode, "create") != 0 && strcmp(mode, "upsert") != 0)
    return luaL_error(L, "bulk_load: mode must be \"create\" or \"upsert\"");
  txn = rgl_opt_string(L, 2, "transaction", "bulk_load");
  if (txn && strcmp(txn, "batch") != 0 && strcmp(txn, "load") != 0)
    return luaL_error(L, "bulk_load: transaction must be \"batch\" or "
                      "\"load\"");
  if (!lua_isnil(L, 2)) {
    lua_getfield(L, 2, "progress");
    if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
      return luaL_error(L, "bulk_load: progress must be a function");
    lua_pop(L, 1);
  }
  lua_pushinteger(L, batch);
  lua_pushstring(L, mode ? mode : "create");
  lua_pushboolean(L, txn && strcmp(txn, "load") == 0 &&
                  rg_env_remote(lc->c.env) == NULL);
  lua_pushinteger(L, memory);
  return 4;
}

/* c:_bulk_whole(fn, again, memory) -> true, spilled | nil, msg, status: runs fn(load) in
** one write transaction (joining a running one), committed when fn returns
** true (the entries its batches hold merged into the tables first),
** abandoned when it returns nil, msg, status (or raises).  load: what
** fn passes to c:_bulk_batch as `joined`.  A map
** that runs out of room runs fn again from the start if `again` (the
** documents can be read again), else fails the load (507): the iterator
** it read from is spent.  spilled: the runs the load spilled to its
** temporary file (rg_bulk_spilled; of its last run). */
typedef struct wholecall {
  lua_State *L;
  rg_lcont *lc;
  rg_db *d;
  bulkload *h;                 /* at index 5 */
  size_t memory;
  int again, runs, rc;
  rg_err e;
} wholecall;

static int whole_body (rg_scope *s, void *ud, rg_err *e) {
  wholecall *q = (wholecall *)ud;
  lua_State *L = q->L;
  int rc = 0;
  if (q->runs++ > 0 && !q->again)
    return rg_fail(e, 507, "insufficient storage: the map grew during a "
                   "load in one transaction from an iterator (open the "
                   "database with a larger map_size, or load in batches)");
  rg_bulk_hold(q->h->b, q->memory);    /* a run starts with nothing held */
  q->h->closed = 0;
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 5);
  lua_call(L, 1, 3);
  if (!lua_toboolean(L, -3))
    rc = rg_fail(e, (int)luaL_optinteger(L, -1, 500), "%s",
                 lua_tostring(L, -2) ? lua_tostring(L, -2) : "failed");
  lua_pop(L, 3);
  if (rc == 0) rc = rg_bulk_flush(s, q->h->b, e);   /* before the commit */
  return rc;
}

/* The load's scope, under lua_pcall so that the load stops running
** however it ends: the stack is c:_bulk_whole's (the load at 5), the call
** at 6. */
static int whole_run (lua_State *L) {
  wholecall *q = (wholecall *)lua_touserdata(L, 6);
  q->L = L;
  q->rc = rgl_scope_run(L, q->lc->c.env, q->d->sync, 1, whole_body, q,
                        &q->e);
  return 0;
}

static int cont_bulk_whole (lua_State *L) {
  wholecall q;
  int i, status;
  size_t spilled;
  q.lc = rgl_checkcont(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 4);
  q.again = lua_toboolean(L, 3);
  q.memory = (size_t)luaL_optinteger(L, 4, (lua_Integer)BULK_HOLD);
  q.runs = 0;
  if ((q.d = writable(L, q.lc, &q.e)) == NULL) return rgl_push_fail(L, &q.e);
  q.h = (bulkload *)lua_newuserdata(L, sizeof(bulkload));       /* 5 */
  q.h->b = NULL;                       /* closed until its load exists */
  q.h->running = 0;
  q.h->closed = 1;
  luaL_setmetatable(L, BULK_LOAD_MT);
  if ((q.h->b = rg_bulk_new()) == NULL)
    return luaL_error(L, "bulk_load: out of memory");
  q.h->running = 1;
  lua_pushcfunction(L, whole_run);
  for (i = 1; i <= 5; i++) lua_pushvalue(L, i);
  lua_pushlightuserdata(L, &q);
  status = lua_pcall(L, 6, 0, 0);
  q.h->running = 0;
  spilled = rg_bulk_spilled(q.h->b);
  lua_pushcfunction(L, bulkload_close);  /* its memory back now, not at gc */
  lua_pushvalue(L, 5);
  lua_call(L, 1, 0);
  if (status != 0) return lua_error(L);
  if (q.rc) return rgl_push_fail(L, &q.e);
  lua_pushboolean(L, 1);
  lua_pushinteger(L, (lua_Integer)spilled);
  return 2;
}

/* c:_bulk_batch(docs, mode, joined) -> written, errors, work | nil, msg,
** status, work: one transaction (with `joined`, a part of the running
** one, c:_bulk_whole's, with no savepoint of its own: its failure fails
** that transaction; when `joined` is c:_bulk_whole's load, the batch's
** entries are held with the load's, rg_bulk_hold) writing the documents docs[1..n] (n at most
** BULK_BATCH_MAX) as creates (mode "create") or upserts would, but for
** the triggers; errors = {{index, status, message}} of those refused (the
** others are written).  Under a throughput budget the batch is admitted as
** a fan-out request is (every physical partition's balance positive) and
** debited its charge.  work: the batch's work, packed (core._work). */
static int cont_bulk_batch (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  const char *mode = luaL_checkstring(L, 3);
  int joined = lua_toboolean(L, 4);
  bulkload *h = (bulkload *)luaL_testudata(L, 4, BULK_LOAD_MT);
  size_t i, n, failed = 0;
  bulkcall *q;
  rg_admit a;
  rg_db *d;
  rg_err e;
  int rc;
  luaL_checktype(L, 2, LUA_TTABLE);
  if (h && h->closed) return luaL_error(L, "bulk_load: the load is over");
  lua_settop(L, 3);                    /* (joined and h are read) */
  n = (size_t)rg_rawlen(L, 2);
  luaL_argcheck(L, n <= BULK_BATCH_MAX, 2, "too many documents in a batch");
  a.own = a.pool = NULL;
  a.retries = 0;
  if ((d = writable(L, lc, &e)) == NULL) return rgl_push_fail(L, &e);
  q = (bulkcall *)rgl_newbox(L, sizeof(bulkcall), bulkcall_clear);   /* 4 */
  q->c = &lc->c;
  q->mode = strcmp(mode, "upsert") == 0 ? RG_BULK_UPSERT : RG_BULK_CREATE;
  q->cap = n ? n : 1;
  q->shared = h != NULL;
  if ((q->items = (rg_bulk_item *)calloc(q->cap, sizeof(rg_bulk_item))) == NULL ||
      (q->b = h ? h->b : rg_bulk_new()) == NULL)
    return luaL_error(L, "bulk_load: out of memory");
  for (i = 0; i < n; i++) {
    rg_bulk_item *it = &q->items[q->n++];
    lua_rawgeti(L, 2, (lua_Integer)i + 1);
    if (lua_type(L, -1) != LUA_TTABLE) {
      rg_fail(&e, 400, "a document must be a table, not %s",
              luaL_typename(L, -1));
      it->status = e.status;
      it->msg = strdup(e.msg);
    }
    else if (rgl_json_from_lua(L, lua_gettop(L), &it->doc, &e)) {
      it->status = e.status;
      it->msg = strdup(e.msg);
    }
    lua_pop(L, 1);
  }
  if (n > 0) {
    if ((rc = rg_admit_begin(lc, 0, 0, RG_TP_EVERY, &a, &e)))
      return rgl_push_fail(L, &e);
    rc = rgl_scope_run(L, lc->c.env, d->sync, !joined, bulk_body, q, &e);
    rgl_account_work(L, lc, &a, &q->batch);
    if (rc) return rgl_push_fail(L, &e);
  }
  lua_pushinteger(L, (lua_Integer)q->written);
  lua_newtable(L);
  for (i = 0; i < q->n; i++) {
    rg_bulk_item *it = &q->items[i];
    if (it->status >= 200 && it->status < 300) continue;
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)i + 1);
    lua_setfield(L, -2, "index");
    lua_pushinteger(L, it->status);
    lua_setfield(L, -2, "status");
    lua_pushstring(L, it->msg ? it->msg : "refused");
    lua_setfield(L, -2, "message");
    lua_rawseti(L, -2, (lua_Integer)++failed);
  }
  lua_pushlstring(L, (const char *)&q->batch, sizeof(q->batch));
  rg_box_done(q);
  return 3;
}
/* }===================================================================== */


void rgl_container_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"name", cont_name},
    {"spec", cont_spec},
    {"create", cont_create},
    {"read", cont_read},
    {"replace", cont_replace},
    {"upsert", cont_upsert},
    {"delete", cont_delete},
    {"patch", cont_patch},
    {"read_many", cont_read_many},
    {"batch", cont_batch},
    {"_text_create", cont_text_create},
    {"_text_replace", cont_text_replace},
    {"_text_upsert", cont_text_upsert},
    {"_text_delete", cont_text_delete},
    {"_text_patch", cont_text_patch},
    {"_bulk_opts", cont_bulk_opts},
    {"_bulk_batch", cont_bulk_batch},
    {"_bulk_whole", cont_bulk_whole},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", cont_gc},
    {"__tostring", cont_tostring},
    {NULL, NULL}
  };
  static const luaL_Reg load_meta[] = {
    {"__gc", bulkload_close},
#if LUA_VERSION_NUM >= 504
    {"__close", bulkload_close},
#endif
    {"__tostring", bulkload_tostring},
    {NULL, NULL}
  };
  luaL_newmetatable(L, RG_CONT_MT);
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newmetatable(L, BULK_LOAD_MT);  /* no methods: c:_bulk_batch's */
  luaL_setfuncs(L, load_meta, 0);
  lua_pop(L, 1);
}
