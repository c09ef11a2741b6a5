/*
** runner.c: the procedure runner.  Stored procedures and triggers, written
** in Lua, stored in the database (store/scripts.c), run atomically inside
** one logical partition (docs/scripts.md).
**
** Caches.  Each process compiles a script once per version: the sandbox's
** registry maps a record's key to (version, compiled chunk), and every run
** reads the record in its own transaction and recompiles when the version
** differs, so a procedure replaced by another process is seen by the next
** call here.  The automatic triggers of a container are cached the same
** way, under the database's script version (one read per write checks it).
**
** One runner per environment.  Each database environment (one per path
** per process, store/env.c) has one runner and one sandbox (sandbox.c),
** made on first use and freed with the environment: the runner installs
** itself as the environment's hooks (store/hooks.h), through which the
** write path fires triggers and the environment releases the runner.  Per
** environment rather than per handle, because that is where scripts are
** met: a trigger fires from the write path, which knows the environment
** and its scope but not the handle that made the call; and the compiled
** scripts are a property of the database, shared by every handle on it.
** The limits (script_budget, script_memory) are therefore the
** environment's too: set by the first open of the path in the process; a
** later open naming other values is refused with 409.
**
** Execution.  A procedure runs in the scope of its call (rg_scope_run, one
** write transaction; host/scripts.c), bound to the logical partition of
** its partition key (s->bound), so that any write to another partition
** fails with RG_BOUND_MSG; its reads use the scope's transaction and see
** its own writes.  The runner arms the sandbox (budget, memory), and calls,
** under lua_pcall in the sandbox: the chunk (in a fresh environment, so
** nothing carries over between executions) which returns the function,
** then the function with ctx and the arguments (JSON trees pushed into the
** sandbox).  The result goes back through the JSON codec; a value JSON
** cannot carry fails the call (400).  Any failure, a script error (400),
** ctx:abort (its status), the budget (408) or the memory (413), makes the
** body return a status and the scope roll back: nothing written survives.
** s->bound.script points to the running execution while it runs; the
** trigger hooks do nothing then, which is how writes made through ctx do
** not fire triggers.  A run counts one script in the scope's work (1 RU,
** base/charge.c), and its ctx operations count as the same calls would.
**
** Triggers.  A write names at most one pre- and one post-trigger; the
** automatic ones of its container fire on every matching write without
** being named.  Named first, then the automatic ones in name order (a named
** automatic trigger runs once).  The write's operation is create, replace
** (an upsert of an existing item, a patch) or delete; a named trigger of
** another operation, or of the other type, is 400 before anything is
** written.  A pre-trigger sees the document about to be written and may
** replace it (not its id nor its partition key); a post-trigger runs after
** the write in the same transaction and may replace what the caller
** receives.  A trigger's failure fails the write (which the scope rolls
** back; a write joining an outer scope runs in a savepoint, store/env.c).
**
** C memory and errors.  Script errors unwind only the sandbox's stack, to
** the runner's lua_pcall; the runner's frame and the scope are never
** skipped, and no hook ever raises into the store.  What a ctx call holds
** in C memory (trees, patch ops, a query's page) is kept in the execution
** record and freed at the next ctx call or at the end of the run, so that
** an error between two Lua calls cannot leak it.  LMDB values (a script's
** source) are used before the script writes.
*/

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "luax/luajson.h"
#include "luax/luax.h"
#include "script/budget.h"
#include "script/js.h"
#include "script/runtime.h"
#include "script/sandbox.h"
#include "script/script.h"
#include "store/catalog.h"
#include "store/hooks.h"
#include "store/plan.h"
#include "store/scripts.h"

#define CTX_MT    "regolith.ctx"
#define NTMP      4

enum { K_PROC, K_PRE, K_POST };

/* One run of a procedure or a trigger. */
typedef struct exec {
  rg_runtime *rt;
  int kind;
  const char *name;
  size_t namelen;
  rg_scope *s;
  const rg_cont *c;
  uint8_t ckey[5 + RG_MAX_NAME];   /* the record's key (cache key) */
  size_t cklen;
  rg_srec rec;
  rg_wmark mark;                   /* where its writes start */
  rg_ikey lp;                      /* the partition (len == lplen) */
  const cJSON *pk;                 /* ctx.partition_key */
  const cJSON *pkv[RG_MAX_PK_PATHS];
  cJSON *pkown;                    /* pk when the run made it */
  /* procedures */
  cJSON *const *args;
  int nargs;
  cJSON *result;
  rg_buf *log;
  /* triggers */
  int op;                          /* RG_OP_CREATE, REPLACE or DELETE */
  cJSON **doc;                     /* pre: the document to be written */
  char *id;                        /* pre: its id (MUTF-8), or the raw id */
  size_t idlen;                    /*   of a delete */
  const cJSON *stored;             /* post */
  cJSON *reply;                    /* post: what the caller will receive */
  int replied;
  /* failure: ctx:abort's status and message, or a bad result */
  int status;
  rg_err err;
  /* C memory of the ctx call in progress */
  cJSON *tmp[NTMP];
  rg_patch_op *ops;
  rg_wres wres;
  rg_query_res qres;
  int qlive;
} exec;

static const char *const op_names[] = {
  "", "create", "replace", "upsert", "delete", "patch", "read"
};



/*
** {=====================================================================
** The runner of an environment
** ======================================================================
*/
static const rg_hooks hooks;

/* The release hook: the environment is closing. */
static void release (void *st) {
  rg_runtime_free((rg_runtime *)st);
}

/* The runner of an environment, made (and its hooks installed) on first
** use. */
static rg_runtime *runtime_of (rg_env *env) {
  rg_runtime *rt = (rg_runtime *)rg_env_hook_state(env);
  if (rt == NULL) {
    rt = (rg_runtime *)calloc(1, sizeof(rg_runtime));
    if (rt == NULL) return NULL;
    rt->budget = RG_SCRIPT_BUDGET;
    rt->memory = RG_SCRIPT_MEMORY;
    rg_env_set_hooks(env, &hooks, rt);
  }
  return rt;
}





int rg_script_limits (rg_env *env, uint64_t budget, uint64_t memory,
                      rg_err *e) {
  rg_runtime *rt = runtime_of(env);
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  if (rg_env_refs(env) == 1) {       /* the first open: it decides */
    rt->budget = budget ? budget : RG_SCRIPT_BUDGET;
    rt->memory = memory ? (size_t)memory : RG_SCRIPT_MEMORY;
    return 0;
  }
  if ((budget && budget != rt->budget) ||
      (memory && (size_t)memory != rt->memory))
    return rg_fail(e, 409, "'%s' is already open in this process with "
                   "script_budget = %llu and script_memory = %llu; the "
                   "first open of a database sets its script limits",
                   rg_env_path(env), (unsigned long long)rt->budget,
                   (unsigned long long)rt->memory);
  return 0;
}


static const char *what_of (int kind) {
  return kind == K_PROC ? "procedure" :
         kind == K_PRE ? "pre-trigger" : "post-trigger";
}
/* }===================================================================== */


/*
** {=====================================================================
** The ctx object
** ======================================================================
*/
static void free_tmp (exec *x) {
  int i;
  for (i = 0; i < NTMP; i++) {
    cJSON_Delete(x->tmp[i]);
    x->tmp[i] = NULL;
  }
  free(x->ops);
  x->ops = NULL;
  rg_wres_free(&x->wres);
  if (x->qlive) {
    rg_query_res_free(&x->qres);
    x->qlive = 0;
  }
}

/* The execution a ctx method belongs to; releases the C memory of the
** previous call. */
static exec *current (lua_State *L) {
  rg_runtime *rt = (rg_runtime *)lua_touserdata(L, lua_upvalueindex(1));
  exec *x = rt->cur;
  if (x == NULL) luaL_error(L, "ctx is only usable while its script runs");
  if (rgl_sandbox_stopped(L)) rgl_sandbox_stop(L, rgl_sandbox_stopped(L));
  free_tmp(x);
  return x;
}

/* Pushes an info table for the work done since `before`. */
static void push_info (lua_State *L, exec *x, const rg_work *before,
                       int status) {
  rg_work w;
  rg_work_diff(&w, &x->s->work, before);
  rgl_push_info(L, &w, status);
}

/* A document argument as a tree in x->tmp[slot]; 400 when it is not a
** table or not JSON-clean. */
static int doc_arg (lua_State *L, exec *x, int idx, int slot, rg_err *e) {
  if (lua_type(L, idx) != LUA_TTABLE)
    return rg_fail(e, 400, "a document must be a table, not %s",
                   luaL_typename(L, idx));
  return rgl_sandbox_from_lua(L, idx, &x->tmp[slot], e);
}

/*
** The storage side of ctx, shared with the JavaScript runtime (js.c), so
** that a script in either language reads, queries and checks what it
** writes by the same code.
*/

/* Reads item `id` of the partition lp in the scope into *doc (owned by the
** caller): 0, 404, 304 (etag `inm`), or 500 for a corrupt item; counts the
** read units. */
static int part_read (rg_scope *s, const rg_ikey *lp, const char *id,
                      size_t idlen, const char *inm, cJSON **doc, rg_err *e) {
  rg_ikey k = *lp;
  rg_val v;
  int rc;
  *doc = NULL;
  rg_ikey_id(&k, id, idlen);
  rc = rg_item_get(s->txn, s->env, &k, s->now, &v, e);
  if (rc == 404) s->work.read_units++;
  if (rc) return rc;
  s->work.read_units += rg_read_units(v.n);
  if (rg_json_parse((const char *)v.p, v.n, doc, e))
    return rg_fail(e, 500, "corrupt item: %s", e->msg);
  if (k.lossy) {                     /* the key holds digests: check */
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(*doc, "id");
    rg_buf b;
    int same;
    rg_buf_init(&b);
    if (cJSON_IsString(sid)) rg_str_bytes(sid, &b);
    same = cJSON_IsString(sid) && b.n == idlen &&
           memcmp(b.p ? b.p : "", id, idlen) == 0;
    rg_buf_free(&b);
    if (!same) return rg_fail(e, 404, "item not found");
  }
  if (inm) {
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(*doc, "_etag");
    if (cJSON_IsString(tag) && strcmp(tag->valuestring, inm) == 0)
      return rg_fail(e, 304, "not modified");
  }
  return 0;
}

/* Runs a script's query (its partition and bounds set by the caller) in
** the scope, with the container's user-defined functions, into *res
** (which the caller frees); adds its work to the scope's. */
static int part_query (rg_scope *s, const rg_cont *c, rg_query_req *q,
                       rg_query_res *res, rg_err *e) {
  rg_udfs udfs;
  int rc;
  rg_udfs_init(&udfs, s->txn, c);
  q->udf = &udfs.iface;
  rc = rg_query_exec(s->txn, c, s->now, q, res, e);
  rg_udfs_done(&udfs);
  if (rc) return rc;
  s->work.read_units += res->work.read_units;
  s->work.lookups += res->work.lookups;
  s->work.partitions += res->work.partitions;
  s->work.loaded += res->work.loaded;
  s->work.loaded_bytes += res->work.loaded_bytes;
  s->work.scanned += res->work.scanned;
  s->work.steps += res->work.steps;
  return 0;
}

/* Is `doc` item `id` of the partition lp (a pre-trigger's new body)? */
static int same_item (const rg_cont *c, const rg_ikey *lp, const char *id,
                      const cJSON *doc) {
  const cJSON *pkv[RG_MAX_PK_PATHS];
  const cJSON *sid = cJSON_GetObjectItemCaseSensitive(doc, "id");
  rg_ikey k;
  if (!cJSON_IsString(sid) || strcmp(sid->valuestring, id) != 0) return 0;
  rg_doc_pk(c->spec, doc, pkv);
  return rg_ikey_partition(c->spec, pkv, &k, NULL) == 0 &&
         k.lplen == lp->lplen && memcmp(k.key, lp->key, k.lplen) == 0;
}

/* The table js.c's runs are given (runtime.h). */
static const rg_ctxops ctx_ops = { part_read, part_query, same_item };

/* ctx:read(id, opts) -> doc, info | nil, msg, status */
static int do_read (lua_State *L) {
  static const char *const allowed[] = { "if_none_match", NULL };
  exec *x = current(L);
  rg_scope *s = x->s;
  rg_work before = s->work;
  const char *id, *inm = NULL;
  size_t idlen, inmlen;
  rg_err e;
  rgl_opts_check(L, 3, allowed, "ctx:read");
  inm = rgl_opt_lstring(L, 3, "if_none_match", &inmlen, "ctx:read");
  if (rg_opt_text(inm, inmlen, "if_none_match", &e))
    return rgl_push_fail(L, &e);
  if (lua_type(L, 2) != LUA_TSTRING) {
    rg_fail(&e, 400, "id must be a string, not %s", luaL_typename(L, 2));
    return rgl_push_fail(L, &e);
  }
  id = lua_tolstring(L, 2, &idlen);
  if (rg_check_id(id, idlen, RG_MAX_ID, "id", &e)) return rgl_push_fail(L, &e);
  if (part_read(s, &x->lp, id, idlen, inm, &x->tmp[0], &e))
    return rgl_push_fail(L, &e);
  rgl_json_push(L, x->tmp[0]);
  push_info(L, x, &before, 200);
  return 2;
}

/* The writes: ctx:create(doc, opts), replace, upsert; ctx:delete(id, opts);
** ctx:patch(id, ops, opts).  They go through the one write path, in the
** running scope, naming no trigger. */
static int do_write (lua_State *L, int op) {
  static const char *const allowed[] = { "if_match", "filter", NULL };
  exec *x = current(L);
  rg_scope *s = x->s;
  rg_work before = s->work;
  int optix = op == RG_OP_PATCH ? 4 : 3;
  const char *what = op_names[op];
  rg_wreq w;
  rg_err e;
  size_t n1, n2;
  rgl_opts_check(L, optix, allowed, what);
  memset(&w, 0, sizeof(w));
  w.op = op;
  w.if_match = rgl_opt_lstring(L, optix, "if_match", &n1, what);
  w.filter = rgl_opt_lstring(L, optix, "filter", &n2, what);
  if (rg_opt_text(w.if_match, n1, "if_match", &e) ||
      rg_opt_text(w.filter, n2, "filter", &e))
    return rgl_push_fail(L, &e);
  if (w.filter && op != RG_OP_PATCH)
    return luaL_error(L, "%s: unknown option 'filter'", what);
  if (op == RG_OP_DELETE || op == RG_OP_PATCH) {
    int i;
    if (lua_type(L, 2) != LUA_TSTRING) {
      rg_fail(&e, 400, "id must be a string, not %s", luaL_typename(L, 2));
      return rgl_push_fail(L, &e);
    }
    w.id = lua_tolstring(L, 2, &w.idlen);
    for (i = 0; i < RG_MAX_PK_PATHS; i++) w.pkv[i] = x->pkv[i];
    if (op == RG_OP_PATCH) {
      if (lua_type(L, 3) != LUA_TTABLE) {
        rg_fail(&e, 400, "patch operations must be a list of tables");
        return rgl_push_fail(L, &e);
      }
      if (rgl_sandbox_from_lua(L, 3, &x->tmp[1], &e) ||
          rg_patch_ops_parse(x->tmp[1], &x->ops, &w.nops, &e))
        return rgl_push_fail(L, &e);
      w.ops = x->ops;
    }
  }
  else {
    if (doc_arg(L, x, 2, 0, &e)) return rgl_push_fail(L, &e);
    w.doc = x->tmp[0];
  }
  if (rg_write(s, x->c, &w, &x->wres, &e)) return rgl_push_fail(L, &e);
  if (op == RG_OP_DELETE || x->wres.doc == NULL) lua_pushboolean(L, 1);
  else rgl_json_push(L, x->wres.doc);
  push_info(L, x, &before, x->wres.status);
  if (x->wres.etag[0]) {
    lua_pushstring(L, x->wres.etag);
    lua_setfield(L, -2, "etag");
  }
  return 2;
}

static int do_create (lua_State *L) { return do_write(L, RG_OP_CREATE); }
static int do_replace (lua_State *L) { return do_write(L, RG_OP_REPLACE); }
static int do_upsert (lua_State *L) { return do_write(L, RG_OP_UPSERT); }
static int do_delete (lua_State *L) { return do_write(L, RG_OP_DELETE); }
static int do_patch (lua_State *L) { return do_write(L, RG_OP_PATCH); }


/* ctx:query(sql, params, opts) -> rows, info | nil, msg, status: always in
** the bound logical partition.  The engine is bounded by what the script
** has left: its rows by the instruction budget, the bytes of its results
** by the memory budget; going past either stops the script (408, 413). */
static int do_query (lua_State *L) {
  static const char *const allowed[] = {
    "max_items", "continuation", "partition_key", NULL
  };
  exec *x = current(L);
  rg_scope *s = x->s;
  rg_query_req q;
  rg_err e;
  uint64_t left;
  size_t room;
  int i, rc;
  rgl_opts_check(L, 4, allowed, "ctx:query");
  memset(&q, 0, sizeof(q));
  if (lua_type(L, 2) != LUA_TSTRING) {
    rg_fail(&e, 400, "the query must be a string, not %s",
            luaL_typename(L, 2));
    return rgl_push_fail(L, &e);
  }
  q.sql = lua_tolstring(L, 2, &q.sqllen);
  if (q.sqllen > RG_MAX_SQL) {
    rg_fail(&e, 400, "the query text is over %u bytes", RG_MAX_SQL);
    return rgl_push_fail(L, &e);
  }
  if (!lua_isnoneornil(L, 3)) {
    if (lua_type(L, 3) != LUA_TTABLE) {
      rg_fail(&e, 400, "query parameters must be a table of name = value");
      return rgl_push_fail(L, &e);
    }
    if (rgl_sandbox_from_lua(L, 3, &x->tmp[0], &e)) return rgl_push_fail(L, &e);
    if (!cJSON_IsObject(x->tmp[0])) {
      rg_fail(&e, 400, "query parameters must be a table of name = value");
      return rgl_push_fail(L, &e);
    }
    q.params = x->tmp[0];
  }
  q.max_items = (long)rgl_opt_int(L, 4, "max_items", 0, 1, 1 << 30,
                                 "ctx:query");
  q.continuation = rgl_opt_lstring(L, 4, "continuation", &q.contlen,
                                  "ctx:query");
  if (!lua_isnoneornil(L, 4)) {      /* a partition key: must be ours */
    lua_getfield(L, 4, "partition_key");
    if (!lua_isnil(L, -1)) {
      const cJSON *pkv[RG_MAX_PK_PATHS];
      const cJSON *t;
      rg_ikey k;
      int ok = rgl_sandbox_from_lua(L, -1, &x->tmp[1], &e) == 0;
      memset(pkv, 0, sizeof(pkv));
      if (ok && x->c->spec->npk == 1) pkv[0] = x->tmp[1];
      else if (ok && cJSON_IsObject(x->tmp[1]) && !x->tmp[1]->child) {}
      else if (ok && cJSON_IsArray(x->tmp[1]))
        for (i = 0, t = x->tmp[1]->child; t && i < RG_MAX_PK_PATHS;
             t = t->next, i++)
          pkv[i] = t;
      else ok = 0;
      if (!ok || rg_ikey_partition(x->c->spec, pkv, &k, NULL) ||
          k.lplen != x->lp.lplen || memcmp(k.key, x->lp.key, k.lplen) != 0) {
        rg_fail(&e, 400, "%s", RG_BOUND_MSG);
        return rgl_push_fail(L, &e);
      }
    }
    lua_pop(L, 1);
  }
  q.has_pk = 1;
  for (i = 0; i < RG_MAX_PK_PATHS; i++) q.pkv[i] = x->pkv[i];
  q.pk_conflict_msg = RG_BOUND_MSG;  /* a WHERE naming another partition */
  rgl_sandbox_left(L, &left, &room);
  q.max_rows = left / ROW_COST + 1;
  q.max_bytes = room;
  q.deadline = rg_sandbox_deadline(x->rt->sb);
  memset(&x->qres, 0, sizeof(x->qres));
  x->qlive = 1;
  rc = part_query(s, x->c, &q, &x->qres, &e);
  if (rc == 408 && x->qres.made > q.max_rows)
    rgl_sandbox_stop(L, RG_STOP_BUDGET);
  if (rc == 408 && q.deadline && q.deadline->passed)
    rgl_sandbox_stop(L, RG_STOP_TIME);
  if (rc == 413) rgl_sandbox_stop(L, RG_STOP_MEMORY);
  rgl_sandbox_charge(L, x->qres.made * ROW_COST + x->qres.work.steps);
  if (rc) return rgl_push_fail(L, &e);
  rgl_sandbox_charge(L, x->qres.rows.n / 8);
  /* straight into the sandbox, whose allocator counts it: a tree of the
  ** page would be host memory many times the text */
  if (rgl_json_push_text(L, x->qres.rows.p ? x->qres.rows.p : "[]",
                        x->qres.rows.p ? x->qres.rows.n : 2, &e)) {
    rg_fail(&e, 500, "query page: %s", e.msg);
    return rgl_push_fail(L, &e);
  }
  rgl_push_query_info(L, &x->qres.work, x->qres.cross_partition);
  rgl_push_executor(L, &x->qres.done, x->qres.inmem);
  if (x->qres.continuation.n) {
    lua_pushlstring(L, x->qres.continuation.p, x->qres.continuation.n);
    lua_setfield(L, -2, "continuation");
  }
  return 2;
}

/*
** The storage operations of ctx are charged to the script's budget by what
** they did: OP_COST instructions a call plus RU_COST per request unit (a
** small write inside a transaction, ~6 RU, takes about as long as 2500
** instructions here), so a script looping over writes spends its budget in
** about the time one looping in Lua does.
*/

static int charged_op (lua_State *L, lua_CFunction f) {
  exec *x = current(L);
  rg_work before, w;
  int n;
  before = x->s->work;
  n = f(L);
  rg_work_diff(&w, &x->s->work, &before);
  /* the memory the transaction holds until its commit is bounded: the
  ** host's, not the script's, so no budget of the script sees it */
  if (rg_script_writes(x->s, &x->mark) == RG_WRITES_OVER)
    rgl_sandbox_stop(L, RG_STOP_WRITES);
  rgl_sandbox_charge(L, OP_COST + (uint64_t)(rg_charge(&w) * RU_COST));
  return n;
}

static int ctx_read (lua_State *L) { return charged_op(L, do_read); }
static int ctx_create (lua_State *L) { return charged_op(L, do_create); }
static int ctx_replace (lua_State *L) { return charged_op(L, do_replace); }
static int ctx_upsert (lua_State *L) { return charged_op(L, do_upsert); }
static int ctx_delete (lua_State *L) { return charged_op(L, do_delete); }
static int ctx_patch (lua_State *L) { return charged_op(L, do_patch); }
static int ctx_query (lua_State *L) { return charged_op(L, do_query); }

/* A value as text, as tostring gives it (a __tostring may call ctx:log
** again, each level with a buffer on the C stack). */
static const char *text_of (lua_State *L, int idx, size_t *n) {
  rgl_sandbox_cstack(L);
#if RG_LUAJIT
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  lua_getglobal(L, "tostring");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  return lua_tolstring(L, -1, n);
#else
  return luaL_tolstring(L, idx, n);
#endif
}

/* ctx:log(...): one line, the values as tostring gives them, spaced. */
static int ctx_log (lua_State *L) {
  exec *x = current(L);
  int top = lua_gettop(L), i;
  luaL_Buffer b;
  const char *line;
  size_t n;
  luaL_buffinit(L, &b);
  for (i = 2; i <= top; i++) {
    const char *s = text_of(L, i, &n);
    (void)s;
    if (i > 2) luaL_addchar(&b, ' ');
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  line = lua_tolstring(L, -1, &n);
  if (x->log && x->log->n + n + 4 <= LOG_MAX) {
    uint8_t len[4];
    rg_put_u32(len, (uint32_t)n);
    rg_buf_add(x->log, len, 4);
    rg_buf_add(x->log, line, n);
  }
  return 0;
}

/* ctx:is_accepted(): may the script start another storage operation?
** False once less than a tenth of a bound is left (rg_script_accepted,
** JavaScript's isAccepted): its instructions, memory or time, or its
** write set; then the script should return what it did, and its caller
** call it again for the rest. */
static int ctx_is_accepted (lua_State *L) {
  exec *x = current(L);
  lua_pushboolean(L, rg_sandbox_accepted(rgl_sandbox_of(L), x->s, &x->mark));
  return 1;
}

/* ctx:abort(message, status): ends the script for good; the call fails
** with the status (400 by default, 400 to 599). */
static int ctx_abort (lua_State *L) {
  exec *x = current(L);
  lua_Integer status = luaL_optinteger(L, 3, 400);
  size_t n = 0;
  const char *msg = "aborted";
  if (status < 400 || status > 599)
    return luaL_error(L, "ctx:abort: status must be from 400 to 599");
  if (!lua_isnoneornil(L, 2)) msg = text_of(L, 2, &n);
  else n = strlen(msg);
  x->status = (int)status;
  rg_fail(&x->err, (int)status, "%.*s", (int)(n < 400 ? n : 400), msg);
  return rgl_sandbox_stop(L, RG_STOP_ABORT);
}

/* ctx:body(): the trigger's document. */
static int ctx_body (lua_State *L) {
  exec *x = current(L);
  if (x->kind == K_PROC)
    return luaL_error(L, "ctx:body is only available in triggers");
  if (x->kind == K_PRE) {
    if (*x->doc) rgl_json_push(L, *x->doc);
    else {                           /* a delete: {id = ...} */
      lua_createtable(L, 0, 1);
      lua_pushlstring(L, x->id, x->idlen);
      lua_setfield(L, -2, "id");
    }
  }
  else if (x->replied) {
    if (x->reply) rgl_json_push(L, x->reply);
    else lua_pushnil(L);
  }
  else rgl_json_push(L, x->stored);
  return 1;
}

/* ctx:set_body(v): a pre-trigger's new document; a post-trigger's reply. */
static int ctx_set_body (lua_State *L) {
  exec *x = current(L);
  rg_err e;
  if (x->kind == K_PROC)
    return luaL_error(L, "ctx:set_body is only available in triggers");
  if (x->kind == K_PRE) {
    if (*x->doc == NULL)
      return luaL_error(L, "ctx:set_body: a delete has no document to "
                        "replace");
    if (doc_arg(L, x, 2, 0, &e) || !cJSON_IsObject(x->tmp[0]))
      return luaL_error(L, "ctx:set_body: %s", e.status ? e.msg :
                        "a document must be an object");
    if (!same_item(x->c, &x->lp, x->id, x->tmp[0]))
      return luaL_error(L, "ctx:set_body: a pre-trigger cannot change the "
                        "id or the partition key");
    cJSON_Delete(*x->doc);
    *x->doc = x->tmp[0];
    x->tmp[0] = NULL;
    return 0;
  }
  if (lua_isnoneornil(L, 2))
    x->tmp[0] = cJSON_CreateNull();
  else if (rgl_sandbox_from_lua(L, 2, &x->tmp[0], &e))
    return luaL_error(L, "ctx:set_body: %s", e.msg);
  cJSON_Delete(x->reply);
  x->reply = x->tmp[0];
  x->tmp[0] = NULL;
  x->replied = 1;
  return 0;
}

static void push_ctx (lua_State *L, exec *x) {
  if (luaL_newmetatable(L, CTX_MT)) {
    static const luaL_Reg methods[] = {
      {"read", ctx_read}, {"create", ctx_create}, {"replace", ctx_replace},
      {"upsert", ctx_upsert}, {"delete", ctx_delete}, {"patch", ctx_patch},
      {"query", ctx_query}, {"log", ctx_log}, {"abort", ctx_abort},
      {"body", ctx_body}, {"set_body", ctx_set_body},
      {"is_accepted", ctx_is_accepted}, {NULL, NULL}
    };
    const luaL_Reg *m;
    lua_newtable(L);
    for (m = methods; m->name; m++) {
      lua_pushlightuserdata(L, x->rt);
      lua_pushcclosure(L, m->func, 1);
      lua_setfield(L, -2, m->name);
    }
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_createtable(L, 0, 2);
  rgl_json_push(L, x->pk);
  lua_setfield(L, -2, "partition_key");
  if (x->kind != K_PROC) {
    lua_pushstring(L, op_names[x->op]);
    lua_setfield(L, -2, "operation");
  }
  lua_insert(L, -2);
  lua_setmetatable(L, -2);
}
/* }===================================================================== */


/*
** {=====================================================================
** Running a script
** ======================================================================
*/


/* A procedure's result (on top) as JSON in x->result. */
static void keep_result (lua_State *L, exec *x) {
  if (lua_isnil(L, -1)) {
    if ((x->result = cJSON_CreateNull()) == NULL)
      luaL_error(L, "out of memory");
  }
  else if (rgl_sandbox_from_lua(L, -1, &x->result, &x->err)) {
    char msg[sizeof(x->err.msg)];
    memcpy(msg, x->err.msg, sizeof(msg));
    x->status = x->err.status;
    rg_fail(&x->err, x->status, "returned a value JSON cannot carry: %s",
            msg);
  }
}

/* Pushes the run's function, ctx and arguments. */
static void push_call (lua_State *L, exec *x) {
  int i;
  rgl_runtime_push_chunk(L, x->ckey, x->cklen, x->rec.version, x->rec.src,
                        x->rec.len, x->name, x->namelen);
  rgl_runtime_call_chunk(L);
  push_ctx(L, x);
  luaL_checkstack(L, x->nargs + 2, "too many arguments");
  for (i = 0; i < x->nargs; i++) {
    if (x->args[i]) rgl_json_push(L, x->args[i]);
    else lua_pushnil(L);
  }
}

/* The protected part of a run, in the sandbox: chunk, ctx, arguments,
** call, result. */
static int exec_main (lua_State *L) {
  exec *x = (exec *)lua_touserdata(L, 1);
  lua_settop(L, 0);
  push_call(L, x);
  lua_call(L, 1 + x->nargs, 1);
  if (x->kind == K_PROC) keep_result(L, x);
  return 0;
}

/* What a finished run amounts to: 0 or a status with its message. */
static int outcome (exec *x, lua_State *L, int rc, int why, rg_err *e) {
  const char *what = what_of(x->kind);
  int n = (int)x->namelen;
  char lim[64];
  if (why == RG_STOP_BUDGET || why == RG_STOP_TIME)
    return rg_fail(e, 408, "%s '%.*s' exceeded its %s", what, n, x->name,
                   rg_sandbox_exceeded(x->rt->sb, why, lim, sizeof(lim)));
  if (why == RG_STOP_MEMORY || rc == LUA_ERRMEM)
    return rg_fail(e, 413, "%s '%.*s' exceeded its memory budget "
                   "(%llu bytes)", what, n, x->name,
                   (unsigned long long)x->rt->memory);
  if (why == RG_STOP_WRITES)
    return rg_script_writes_fail(x->s, what, x->name, x->namelen, e);
  if (why == RG_STOP_ABORT)
    return rg_fail(e, x->status, "%s '%.*s' aborted: %s", what, n, x->name,
                   x->err.msg);
  if (rc != LUA_OK) {
    int t = lua_type(L, -1);
    if (t == LUA_TSTRING || t == LUA_TNUMBER)
      return rg_fail(e, 400, "%s '%.*s' failed: %s", what, n, x->name,
                     lua_tostring(L, -1));
    return rg_fail(e, 400, "%s '%.*s' failed: (error object is a %s value)",
                   what, n, x->name, lua_typename(L, t));
  }
  if (x->status)
    return rg_fail(e, x->status, "%s '%.*s' %s", what, n, x->name,
                   x->err.msg);
  return 0;
}

/* Runs x in the JavaScript runtime (js.c), bound and counted as run()
** binds and counts a Lua run. */
static int run_js (exec *x, rg_err *e) {
  rg_runtime *rt = x->rt;
  rg_scope *s = x->s;
  rg_binding saved = s->bound;
  rg_jscall call;
  int rc;
  memset(&call, 0, sizeof(call));
  call.kind = x->kind == K_PROC ? RG_JS_PROC :
              x->kind == K_PRE ? RG_JS_PRE : RG_JS_POST;
  call.name = x->name;
  call.namelen = x->namelen;
  call.s = s;
  call.mark = &x->mark;
  call.c = x->c;
  call.ckey = x->ckey;
  call.cklen = x->cklen;
  call.version = x->rec.version;
  call.src = x->rec.src;
  call.len = x->rec.len;
  call.lp = &x->lp;
  call.pk = x->pk;
  call.pkv = x->pkv;
  call.args = x->args;
  call.nargs = x->nargs;
  call.result = &x->result;
  call.log = x->log;
  call.op = x->op;
  call.doc = x->doc;
  call.id = x->id;
  call.idlen = x->idlen;
  call.stored = x->stored;
  call.reply = &x->reply;
  call.replied = &x->replied;
  call.ctx = &ctx_ops;
  s->work.scripts++;
  s->bound.spec = x->c->spec;
  s->bound.lp = x->lp.key;
  s->bound.lplen = x->lp.lplen;
  s->bound.msg = RG_BOUND_MSG;
  s->bound.script = x;
  rt->cur = x;
  rc = rg_js_exec(rt, &call, e);
  rt->cur = NULL;
  s->bound = saved;
  return rc;
}

/*
** Runs x in the sandbox, inside scope x->s, bound to x->lp.  Restores the
** scope's binding and script afterwards.
*/
static int run (exec *x, rg_err *e) {
  rg_runtime *rt = x->rt;
  rg_scope *s = x->s;
  rg_binding saved = s->bound;
  lua_State *L;
  int rc, why;
  if (rt->cur != NULL)
    return rg_fail(e, 500, "a script cannot start while another runs");
  if (rg_js_is(x->rec.src, x->rec.len)) return run_js(x, e);
  if ((rc = rg_runtime_sandbox(rt, e))) return rc;
  L = rgl_sandbox_state(rt->sb);
  s->work.scripts++;
  s->bound.spec = x->c->spec;
  s->bound.lp = x->lp.key;
  s->bound.lplen = x->lp.lplen;
  s->bound.msg = RG_BOUND_MSG;
  s->bound.script = x;
  rt->cur = x;
  lua_settop(L, 0);
  lua_pushcfunction(L, exec_main);
  lua_pushlightuserdata(L, x);
  rg_sandbox_arm(rt->sb, rt->budget, rt->memory);
  rc = lua_pcall(L, 1, 0, 0);
  why = rg_sandbox_disarm(rt->sb);
  rt->cur = NULL;
  s->bound = saved;
  rc = outcome(x, L, rc, why, e);
  lua_settop(L, 0);
  free_tmp(x);
  if (why == RG_STOP_MEMORY || rc == 413) lua_gc(L, LUA_GCCOLLECT, 0);
  return rc;
}

/* Makes x->pk (owned) from partition-key values, and x->pkv into it. */
static int own_pk (exec *x, const cJSON *const *pkv, rg_err *e) {
  int i, npk = x->c->spec->npk;
  if (npk == 1) {
    if ((x->pkown = cJSON_Duplicate(pkv[0], 1)) == NULL)
      return rg_fail(e, 500, "out of memory");
    x->pkv[0] = x->pkown;
  }
  else {
    cJSON *v;
    if ((x->pkown = cJSON_CreateArray()) == NULL)
      return rg_fail(e, 500, "out of memory");
    for (i = 0; i < npk; i++) {
      if ((v = cJSON_Duplicate(pkv[i], 1)) == NULL)
        return rg_fail(e, 500, "out of memory");
      cJSON_AddItemToArray(x->pkown, v);
      x->pkv[i] = v;
    }
  }
  x->pk = x->pkown;
  return 0;
}

static void exec_init (exec *x, rg_runtime *rt, int kind, rg_scope *s,
                       const rg_cont *c) {
  memset(x, 0, sizeof(*x));
  x->rt = rt;
  x->kind = kind;
  x->s = s;
  x->c = c;
  rg_script_mark(s, &x->mark);
}

static void exec_free (exec *x) {
  free_tmp(x);
  cJSON_Delete(x->pkown);
  cJSON_Delete(x->result);
  cJSON_Delete(x->reply);
  free(x->id);
}

int rg_proc_execute (rg_scope *s, const rg_cont *c, const char *name,
                     size_t n, const cJSON *pk, cJSON *const *args,
                     int nargs, cJSON **result, rg_buf *log, rg_err *e) {
  rg_runtime *rt = runtime_of(s->env);
  const cJSON *t;
  exec x;
  int rc, i;
  *result = NULL;
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  exec_init(&x, rt, K_PROC, s, c);
  x.name = name;
  x.namelen = n;
  x.pk = pk;
  if (c->spec->npk == 1) x.pkv[0] = pk;
  else if (cJSON_IsObject(pk) && pk->child == NULL) {}  /* none: {} */
  else {
    if (!cJSON_IsArray(pk) || cJSON_GetArraySize(pk) != c->spec->npk)
      return rg_fail(e, 400, "the partition key is hierarchical: give an "
                     "array of %d values (every level is required)",
                     c->spec->npk);
    for (i = 0, t = pk->child; t; t = t->next, i++) x.pkv[i] = t;
  }
  if ((rc = rg_cont_alive(s->txn, c, e)) ||
      (rc = rg_ikey_partition(c->spec, x.pkv, &x.lp, e)))
    return rc;
  if ((rc = rg_srec_get(s->txn, s->env, RG_MK_PROC, c->spec->cid, name, n,
                       &x.rec, x.ckey, &x.cklen, e)))
    return rc;
  x.args = args;
  x.nargs = nargs;
  x.log = log;
  rc = run(&x, e);
  if (rc == 0) {
    *result = x.result;
    x.result = NULL;
  }
  exec_free(&x);
  return rc;
}

static int check_with (rg_runtime *rt, int tag, const char *name, size_t n,
                       const char *src, size_t len, rg_err *e);

/* Runs a freshly compiled chunk (on top) and checks what it returns. */
static int check_main (lua_State *L) {
  rgl_runtime_call_chunk(L);
  return 0;
}

int rg_script_check (rg_env *env, int tag, const char *name, size_t n,
                     const char *src, size_t len, rg_err *e) {
  rg_runtime *rt = runtime_of(env);
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  if (rt->cur != NULL)
    return rg_fail(e, 500, "a script cannot be stored while a script runs");
  if (rg_js_is(src, len)) return rg_js_check(rt, tag, name, n, src, len, e);
  return check_with(rt, tag, name, n, src, len, e);
}

static int check_with (rg_runtime *rt, int tag, const char *name, size_t n,
                       const char *src, size_t len, rg_err *e) {
  const char *what = tag == RG_MK_PROC ? "procedure" :
                     tag == RG_MK_UDF ? "user-defined function" : "trigger";
  lua_State *L;
  int rc, why;
  if (rt->cur != NULL)
    return rg_fail(e, 500, "a script cannot be stored while a script runs");
  if ((rc = rg_runtime_sandbox(rt, e))) return rc;
  L = rgl_sandbox_state(rt->sb);
  lua_settop(L, 0);
  lua_pushcfunction(L, check_main);
  rg_sandbox_arm(rt->sb, rt->budget, rt->memory);
  rc = rgl_sandbox_load(L, src, len, name, n);
  if (rc == LUA_OK) rc = lua_pcall(L, 1, 0, 0);
  else rc = -rc;                     /* the compiler failed */
  why = rg_sandbox_disarm(rt->sb);
  if (why == RG_STOP_BUDGET || why == RG_STOP_TIME) {
    char lim[64];
    rc = rg_fail(e, 408, "%s '%.*s' exceeded its %s while loading", what,
                 (int)n, name,
                 rg_sandbox_exceeded(rt->sb, why, lim, sizeof(lim)));
  }
  else if (why == RG_STOP_MEMORY || rc == LUA_ERRMEM || rc == -LUA_ERRMEM)
    rc = rg_fail(e, 413, "%s '%.*s' exceeded its memory budget while "
                 "loading (%llu bytes)", what, (int)n, name,
                 (unsigned long long)rt->memory);
  else if (rc != LUA_OK)
    rc = rg_fail(e, 400, "%s '%.*s' %s: %s", what, (int)n, name,
                 rc < 0 ? "does not compile" : "cannot be loaded",
                 lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) :
                 "(error object is not a string)");
  lua_settop(L, 0);
  if (rc == 413) lua_gc(L, LUA_GCCOLLECT, 0);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** Triggers
** ======================================================================
*/
static int top_of (int op) {
  return op == RG_OP_CREATE ? RG_TOP_CREATE :
         op == RG_OP_DELETE ? RG_TOP_DELETE : RG_TOP_REPLACE;
}

static const char *const top_names[] = { "all", "create", "replace", "delete" };

/* Checks that trigger `name` exists, has the type and runs on the
** operation. */
static int check_named (rg_scope *s, const rg_cont *c, const char *name,
                        int type, int op, rg_err *e) {
  uint8_t key[5 + RG_MAX_NAME];
  size_t klen, n = strlen(name);
  rg_srec r;
  int rc;
  if ((rc = rg_check_id(name, n, RG_MAX_NAME, "a trigger name", e))) return rc;
  if ((rc = rg_srec_get(s->txn, s->env, RG_MK_TRIG, c->spec->cid, name, n, &r,
                       key, &klen, e)))
    return rc;
  if (r.type != type)
    return rg_fail(e, 400, "trigger '%s' is a %s-trigger; it cannot be named "
                   "as %s_trigger", name,
                   r.type == RG_TRIG_PRE ? "pre" : "post",
                   type == RG_TRIG_PRE ? "pre" : "post");
  if (r.op != RG_TOP_ALL && r.op != top_of(op))
    return rg_fail(e, 400, "trigger '%s' runs on %s; this write is a %s",
                   name, top_names[r.op], top_names[top_of(op)]);
  return 0;
}

#define NO_MEMORY (-2)

/* Adds an automatic trigger to the set being read (rg_srec_each). */
static int add_auto (void *ud, const char *name, size_t n, const rg_srec *r) {
  autoset *set = (autoset *)ud;
  autotrig *t;
  char *copy;
  if (r == NULL || !r->automatic) return 0;
  t = (autotrig *)realloc(set->t, (size_t)(set->n + 1) * sizeof(autotrig));
  if (t) set->t = t;
  if (t == NULL || (copy = (char *)malloc(n + 1)) == NULL) return NO_MEMORY;
  memcpy(copy, name, n);
  copy[n] = '\0';
  t = &set->t[set->n++];
  t->name = copy;
  t->len = n;
  t->type = r->type;
  t->op = r->op;
  return 0;
}

/* The automatic triggers of c as of the database's script version. */
static int autos_of (rg_scope *s, const rg_cont *c, rg_runtime *rt,
                     const autoset **out, rg_err *e) {
  uint64_t version;
  autoset *set = NULL;
  int rc, i;
  *out = NULL;
  if ((rc = rg_scripts_version(s->txn, s->env, &version, e))) return rc;
  if (version == 0) return 0;        /* no script was ever stored */
  for (i = 0; i < rt->nautos; i++)
    if (rt->autos[i].cid == c->spec->cid) { set = &rt->autos[i]; break; }
  if (set && set->version == version) { *out = set; return 0; }
  if (set == NULL) {
    autoset *a = (autoset *)realloc(rt->autos,
                                    (size_t)(rt->nautos + 1) * sizeof(autoset));
    if (a == NULL) return rg_fail(e, 500, "out of memory");
    rt->autos = a;
    set = &rt->autos[rt->nautos++];
    memset(set, 0, sizeof(*set));
    set->cid = c->spec->cid;
  }
  for (i = 0; i < set->n; i++) free(set->t[i].name);
  set->n = 0;
  set->version = 0;                  /* valid again once complete */
  rc = rg_srec_each(s->txn, s->env, c->spec->cid, RG_MK_TRIG, add_auto, set,
                    e);
  if (rc == NO_MEMORY) return rg_fail(e, 500, "out of memory");
  if (rc) return rc;
  /* (a run reading guesses keeps no cache: env.h) */
  set->version = rg_env_complete(s->env) ? version : 0;
  *out = set;
  return 0;
}

/* Runs one trigger on a write. */
static int run_trigger (rg_scope *s, const rg_cont *c, rg_runtime *rt, int kind,
                        const char *name, size_t n, const rg_wreq *w, int op,
                        const rg_ikey *k, cJSON **doc, const cJSON *stored,
                        rg_wres *r, rg_err *e) {
  const cJSON *pkv[RG_MAX_PK_PATHS];
  const cJSON *body = kind == K_PRE ? *doc : stored;
  exec x;
  int rc, i;
  exec_init(&x, rt, kind, s, c);
  x.name = name;
  x.namelen = n;
  x.op = op;
  x.doc = doc;
  x.stored = stored;
  if ((rc = rg_srec_get(s->txn, s->env, RG_MK_TRIG, c->spec->cid, name, n,
                       &x.rec, x.ckey, &x.cklen, e)))
    return rc;
  if (body) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(body, "id");
    rg_doc_pk(c->spec, body, pkv);
    x.idlen = cJSON_IsString(id) ? strlen(id->valuestring) : 0;
    x.id = (char *)malloc(x.idlen + 1);
    if (x.id && x.idlen) memcpy(x.id, id->valuestring, x.idlen);
  }
  else {                             /* a delete's pre-trigger */
    for (i = 0; i < RG_MAX_PK_PATHS; i++) pkv[i] = w->pkv[i];
    x.idlen = w->idlen;
    x.id = (char *)malloc(w->idlen + 1);
    if (x.id) memcpy(x.id, w->id, w->idlen);
  }
  if (x.id == NULL) { exec_free(&x); return rg_fail(e, 500, "out of memory"); }
  x.id[x.idlen] = '\0';
  x.lp = *k;
  x.lp.len = x.lp.lplen;
  if ((rc = own_pk(&x, pkv, e)) == 0 && (rc = run(&x, e)) == 0 &&
      kind == K_POST && x.replied) {
    rg_wres_free(r);
    r->doc = x.reply;
    x.reply = NULL;
  }
  exec_free(&x);
  return rc;
}

static int fire (rg_scope *s, const rg_cont *c, const rg_wreq *w, int kind,
                 int op, const rg_ikey *k, cJSON **doc, const cJSON *stored,
                 rg_wres *r, rg_err *e) {
  const char *named = kind == K_PRE ? w->pre_trigger : w->post_trigger;
  int type = kind == K_PRE ? RG_TRIG_PRE : RG_TRIG_POST;
  const autoset *set;
  rg_runtime *rt;
  int rc, i;
  if (s->bound.script != NULL || w->ttl_expired) return 0;
  if ((rt = runtime_of(s->env)) == NULL)
    return rg_fail(e, 500, "out of memory");
  if (kind == K_PRE) {               /* both names, before any write */
    if (w->pre_trigger &&
        (rc = check_named(s, c, w->pre_trigger, RG_TRIG_PRE, op, e)))
      return rc;
    if (w->post_trigger &&
        (rc = check_named(s, c, w->post_trigger, RG_TRIG_POST, op, e)))
      return rc;
  }
  if (named && (rc = run_trigger(s, c, rt, kind, named, strlen(named), w, op,
                                 k, doc, stored, r, e)))
    return rc;
  if ((rc = autos_of(s, c, rt, &set, e))) return rc;
  for (i = 0; set && i < set->n; i++) {
    const autotrig *t = &set->t[i];
    if (t->type != type || (t->op != RG_TOP_ALL && t->op != top_of(op)))
      continue;
    if (named && strlen(named) == t->len && memcmp(named, t->name, t->len) == 0)
      continue;
    if ((rc = run_trigger(s, c, rt, kind, t->name, t->len, w, op, k, doc,
                          stored, r, e)))
      return rc;
  }
  return 0;
}

static int trigger_pre (void *st, rg_scope *s, const rg_cont *c,
                        const rg_wreq *w, int op, const rg_ikey *k,
                        cJSON **doc, rg_err *e) {
  (void)st;
  return fire(s, c, w, K_PRE, op, k, doc, NULL, NULL, e);
}

static int trigger_post (void *st, rg_scope *s, const rg_cont *c,
                         const rg_wreq *w, int op, const rg_ikey *k,
                         const cJSON *stored, rg_wres *r, rg_err *e) {
  (void)st;
  return fire(s, c, w, K_POST, op, k, NULL, stored, r, e);
}

static const rg_hooks hooks = { trigger_pre, trigger_post, release };
/* }===================================================================== */
