/*
** script.c: the procedure runner.  Stored procedures and triggers, written
** in Lua, stored in the database, run atomically inside one logical
** partition (SPEC section 4).
**
** Storage.  Scripts live in the meta table (layout.c), one record each:
**
**   's' cid name  ->  u64 version | source
**   't' cid name  ->  u64 version | u8 type | u8 operation | u8 automatic
**                     | source
**
** type is RG_TRIG_PRE (1) or RG_TRIG_POST (2), operation RG_TOP_ALL (0),
** CREATE (1), REPLACE (2) or DELETE (3), automatic 0 or 1; the source is the
** Lua text as given.  "\1scripts" holds the database's script version, a
** u64 that every create, replace and delete of a procedure or trigger
** moves forward; the record written takes the new value.  The step is 1
** plus a random 32-bit number: a version handed out in a transaction that
** is later rolled back could otherwise be handed out again for another
** source, and a cache would then believe it knew that source.
**
** Caches.  Each process compiles a script once per version: the sandbox's
** registry maps a record's key to (version, compiled chunk), and every run
** reads the record in its own transaction and recompiles when the version
** differs, so a procedure replaced by another process is seen by the next
** call here.  The automatic triggers of a container are cached the same
** way, under the database's script version (one read per write checks it).
**
** One runner per environment.  Each database environment (one per path
** per process, env.c) has one runner and one sandbox (sandbox.c), made on
** first use and freed with the environment.  Per environment rather than
** per handle, because that is where scripts are met: a trigger fires from
** the write path, which knows the environment and its scope but not the
** handle that made the call; and the compiled scripts are a property of
** the database, shared by every handle on it.  The limits (script_budget,
** script_memory) are therefore the environment's too: set by the first
** open of the path in the process; a later open naming other values is
** refused with 409.
**
** Execution.  A procedure runs in the scope of its call (rg_scope_run, one
** write transaction; lua_script.c), bound to the logical partition of its
** partition key (s->bound*), so that any write to another partition fails
** with RG_BOUND_MSG; its reads use the scope's transaction and see its own
** writes.  The runner arms the sandbox (budget, memory), and calls, under
** lua_pcall in the sandbox: the chunk (in a fresh environment, so nothing
** carries over between executions) which returns the function, then the
** function with ctx and the arguments (JSON trees pushed into the sandbox).
** The result goes back through the JSON codec; a value JSON cannot carry
** fails the call (400).  Any failure, a script error (400), ctx:abort
** (its status), the budget (408) or the memory (413), makes the body
** return a status and the scope roll back: nothing written survives.
** s->script points to the running execution while it runs; rg_trigger_pre
** and rg_trigger_post do nothing then, which is how writes made through
** ctx do not fire triggers.  A run counts one script in the scope's work
** (1 RU, charge.c), and its ctx operations count as the same calls would.
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
** back; a write joining an outer scope runs in a savepoint, env.c).
**
** C memory and errors.  Script errors unwind only the sandbox's stack, to
** the runner's lua_pcall; the runner's frame and the scope are never
** skipped.  What a ctx call holds in C memory (trees, patch ops, a query's
** page) is kept in the execution record and freed at the next ctx call or
** at the end of the run, so that an error between two Lua calls cannot leak
** it.  LMDB values (a script's source) are used before the script writes.
*/

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "regolith.h"

#define CACHE     "regolith.script.cache"
#define CTX_MT    "regolith.ctx"
#define LOG_MAX   (256u << 10)         /* bytes of ctx:log lines per run */
#define NTMP      4

enum { K_PROC, K_PRE, K_POST };

/* The automatic triggers of one container, as of a script version. */
typedef struct autotrig {
  char *name;
  size_t len;
  int type, op;
} autotrig;

typedef struct autoset {
  uint32_t cid;
  uint64_t version;
  int n;
  autotrig *t;
} autoset;

typedef struct runtime {
  rg_sandbox *sb;               /* made on first run */
  uint64_t budget;
  size_t memory;
  struct exec *cur;             /* the execution running now */
  uint64_t steps;               /* versions handed out by this process */
  autoset *autos;
  int nautos;
} runtime;

/* A stored record, read in a transaction (src points into it). */
typedef struct record {
  uint64_t version;
  int type, op, automatic;
  const char *src;
  size_t len;
} record;

/* One run of a procedure or a trigger. */
typedef struct exec {
  runtime *rt;
  int kind;
  const char *name;
  size_t namelen;
  rg_scope *s;
  const rg_cont *c;
  uint8_t ckey[5 + RG_MAX_NAME];   /* the record's key (cache key) */
  size_t cklen;
  record rec;
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
static runtime *runtime_of (rg_env *env) {
  runtime *rt = (runtime *)env->scripts;
  if (rt == NULL) {
    rt = (runtime *)calloc(1, sizeof(runtime));
    if (rt == NULL) return NULL;
    rt->budget = RG_SCRIPT_BUDGET;
    rt->memory = RG_SCRIPT_MEMORY;
    env->scripts = rt;
  }
  return rt;
}

static void free_autos (runtime *rt) {
  int i, j;
  for (i = 0; i < rt->nautos; i++) {
    for (j = 0; j < rt->autos[i].n; j++) free(rt->autos[i].t[j].name);
    free(rt->autos[i].t);
  }
  free(rt->autos);
  rt->autos = NULL;
  rt->nautos = 0;
}

void rg_script_close (rg_env *env) {
  runtime *rt = (runtime *)env->scripts;
  if (rt == NULL) return;
  rg_sandbox_free(rt->sb);
  free_autos(rt);
  free(rt);
  env->scripts = NULL;
}

int rg_script_limits (rg_env *env, uint64_t budget, uint64_t memory,
                      rg_err *e) {
  runtime *rt = runtime_of(env);
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  if (env->refs == 1) {              /* the first open: it decides */
    rt->budget = budget ? budget : RG_SCRIPT_BUDGET;
    rt->memory = memory ? (size_t)memory : RG_SCRIPT_MEMORY;
    return 0;
  }
  if ((budget && budget != rt->budget) ||
      (memory && (size_t)memory != rt->memory))
    return rg_fail(e, 409, "'%s' is already open in this process with "
                   "script_budget = %llu and script_memory = %llu; the "
                   "first open of a database sets its script limits",
                   env->path, (unsigned long long)rt->budget,
                   (unsigned long long)rt->memory);
  return 0;
}

static int get_sandbox (runtime *rt, rg_err *e) {
  if (rt->sb == NULL && (rt->sb = rg_sandbox_new()) == NULL)
    return rg_fail(e, 500, "cannot create the script sandbox: out of memory");
  return 0;
}

static const char *what_of (int kind) {
  return kind == K_PROC ? "procedure" :
         kind == K_PRE ? "pre-trigger" : "post-trigger";
}
/* }===================================================================== */


/*
** {=====================================================================
** Records
** ======================================================================
*/
#define TRIG_HDR 11                 /* u64 version, type, op, automatic */

static int parse_record (int tag, const MDB_val *v, record *r) {
  const uint8_t *p = (const uint8_t *)v->mv_data;
  size_t hdr = tag == RG_MK_TRIG ? TRIG_HDR : 8;
  memset(r, 0, sizeof(*r));
  if (v->mv_size < hdr) return -1;
  r->version = rg_get_u64(p);
  if (tag == RG_MK_TRIG) {
    r->type = p[8];
    r->op = p[9];
    r->automatic = p[10];
    if ((r->type != RG_TRIG_PRE && r->type != RG_TRIG_POST) ||
        r->op > RG_TOP_DELETE)
      return -1;
  }
  r->src = (const char *)p + hdr;
  r->len = v->mv_size - hdr;
  return 0;
}

/* Reads a record: 0, 404 (absent) or 500. */
static int get_record (MDB_txn *txn, rg_env *env, int tag, uint32_t cid,
                       const char *name, size_t n, record *r, uint8_t *key,
                       size_t *klen, rg_err *e) {
  MDB_val k, v;
  int rc;
  k.mv_data = key;
  k.mv_size = *klen = rg_meta_key(key, tag, cid, name, n);
  rc = mdb_get(txn, env->dbi[RG_DB_META], &k, &v);
  if (rc == MDB_NOTFOUND)
    return rg_fail(e, 404, "%s '%.*s' not found",
                   tag == RG_MK_PROC ? "procedure" : "trigger", (int)n, name);
  if (rc) return rg_fail_mdb(e, rc, "script record");
  if (parse_record(tag, &v, r))
    return rg_fail(e, 500, "corrupt script record '%.*s'", (int)n, name);
  return 0;
}

static uint64_t get_version (MDB_txn *txn, rg_env *env, int *rc) {
  MDB_val k, v;
  k.mv_data = RG_META_SCRIPTS;
  k.mv_size = sizeof(RG_META_SCRIPTS) - 1;
  *rc = mdb_get(txn, env->dbi[RG_DB_META], &k, &v);
  if (*rc == MDB_NOTFOUND) { *rc = 0; return 0; }
  if (*rc == 0 && v.mv_size != 8) return 0;
  return *rc ? 0 : rg_get_u64((const uint8_t *)v.mv_data);
}

/* Moves the database's script version forward; the new value. */
static int next_version (rg_scope *s, runtime *rt, uint64_t *out, rg_err *e) {
  struct { uint64_t n, pid, t; } seed;
  struct timespec ts;
  uint8_t buf[8];
  uint64_t cur;
  int rc;
  cur = get_version(s->txn, s->env, &rc);
  if (rc) return rg_scope_mdb(s, rc, "script version", e);
  clock_gettime(CLOCK_REALTIME, &ts);
  seed.n = ++rt->steps;
  seed.pid = (uint64_t)getpid();
  seed.t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  *out = cur + 1 + (rg_siphash(s->env->secret, &seed, sizeof(seed)) >> 32);
  rg_put_u64(buf, *out);
  return rg_put(s, RG_DB_META, RG_META_SCRIPTS, sizeof(RG_META_SCRIPTS) - 1,
                buf, 8, e);
}

int rg_script_put (rg_scope *s, const rg_cont *c, int tag, const char *name,
                   size_t n, int mode, const int trig[3], const char *src,
                   size_t len, rg_err *e) {
  const char *what = tag == RG_MK_PROC ? "procedure" : "trigger";
  runtime *rt = runtime_of(s->env);
  uint8_t key[5 + RG_MAX_NAME];
  size_t hdr = tag == RG_MK_TRIG ? TRIG_HDR : 8;
  uint64_t version;
  uint8_t *rec;
  MDB_val k, v;
  int rc;
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  if ((rc = rg_cont_alive(s->txn, c, e))) return rc;
  k.mv_data = key;
  k.mv_size = rg_meta_key(key, tag, c->spec->cid, name, n);
  rc = mdb_get(s->txn, s->env->dbi[RG_DB_META], &k, &v);
  if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, what, e);
  if (mode == RG_PUT_CREATE && rc == 0)
    return rg_fail(e, 409, "%s '%.*s' already exists", what, (int)n, name);
  if (mode == RG_PUT_REPLACE && rc == MDB_NOTFOUND)
    return rg_fail(e, 404, "%s '%.*s' not found", what, (int)n, name);
  if ((rc = next_version(s, rt, &version, e))) return rc;
  if ((rec = (uint8_t *)rg_reserve(s, RG_DB_META, key, k.mv_size, hdr + len,
                                   e)) == NULL)
    return s->failed;
  rg_put_u64(rec, version);
  if (tag == RG_MK_TRIG) {
    rec[8] = (uint8_t)trig[0];
    rec[9] = (uint8_t)trig[1];
    rec[10] = (uint8_t)(trig[2] != 0);
  }
  if (len) memcpy(rec + hdr, src, len);
  return 0;
}

int rg_script_delete (rg_scope *s, const rg_cont *c, int tag,
                      const char *name, size_t n, rg_err *e) {
  const char *what = tag == RG_MK_PROC ? "procedure" : "trigger";
  runtime *rt = runtime_of(s->env);
  uint8_t key[5 + RG_MAX_NAME];
  uint64_t version;
  int rc, gone;
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  if ((rc = rg_cont_alive(s->txn, c, e))) return rc;
  if ((rc = rg_del(s, RG_DB_META, key,
                   rg_meta_key(key, tag, c->spec->cid, name, n), &gone, e)))
    return rc;
  if (!gone) return rg_fail(e, 404, "%s '%.*s' not found", what, (int)n, name);
  return next_version(s, rt, &version, e);
}

int rg_script_names (lua_State *L, const rg_cont *c, int tag, rg_err *e) {
  MDB_txn *txn;
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t from[5];
  int rc, n = 0;
  if ((rc = rg_read_begin(c->env, &txn, e))) return rc;
  if ((rc = rg_cont_alive(txn, c, e))) { rg_read_end(c->env); return rc; }
  lua_newtable(L);
  rg_meta_key(from, tag, c->spec->cid, NULL, 0);
  if ((rc = mdb_cursor_open(txn, c->env->dbi[RG_DB_META], &cur)) == 0) {
    k.mv_data = from;
    k.mv_size = 5;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size > 5 && memcmp(k.mv_data, from, 5) == 0) {
      lua_pushlstring(L, (const char *)k.mv_data + 5, k.mv_size - 5);
      lua_rawseti(L, -2, ++n);
      rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(cur);
  }
  rg_read_end(c->env);
  if (rc && rc != MDB_NOTFOUND) {
    lua_pop(L, 1);
    return rg_fail_mdb(e, rc, "script records");
  }
  return 0;
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
  runtime *rt = (runtime *)lua_touserdata(L, lua_upvalueindex(1));
  exec *x = rt->cur;
  if (x == NULL) luaL_error(L, "ctx is only usable while its script runs");
  if (rg_sandbox_stopped(L)) rg_sandbox_stop(L, rg_sandbox_stopped(L));
  free_tmp(x);
  return x;
}

/* Pushes an info table for the work done since `before`. */
static void push_info (lua_State *L, exec *x, const rg_work *before,
                       int status) {
  rg_work w;
  rg_work_diff(&w, &x->s->work, before);
  rg_push_info(L, &w, status);
}

/* A document argument as a tree in x->tmp[slot]; 400 when it is not a
** table or not JSON-clean. */
static int doc_arg (lua_State *L, exec *x, int idx, int slot, rg_err *e) {
  if (lua_type(L, idx) != LUA_TTABLE)
    return rg_fail(e, 400, "a document must be a table, not %s",
                   luaL_typename(L, idx));
  return rg_sandbox_from_lua(L, idx, &x->tmp[slot], e);
}

/* ctx:read(id, opts) -> doc, info | nil, msg, status */
static int do_read (lua_State *L) {
  static const char *const allowed[] = { "if_none_match", NULL };
  exec *x = current(L);
  rg_scope *s = x->s;
  rg_work before = s->work;
  const char *id, *inm = NULL;
  size_t idlen, inmlen;
  rg_ikey k;
  MDB_val v;
  rg_err e;
  int rc;
  rg_opts_check(L, 3, allowed, "ctx:read");
  inm = rg_opt_lstring(L, 3, "if_none_match", &inmlen, "ctx:read");
  if (rg_opt_text(inm, inmlen, "if_none_match", &e))
    return rg_push_fail(L, &e);
  if (lua_type(L, 2) != LUA_TSTRING) {
    rg_fail(&e, 400, "id must be a string, not %s", luaL_typename(L, 2));
    return rg_push_fail(L, &e);
  }
  id = lua_tolstring(L, 2, &idlen);
  if (rg_check_id(id, idlen, RG_MAX_ID, "id", &e)) return rg_push_fail(L, &e);
  k = x->lp;
  rg_ikey_id(&k, id, idlen);
  rc = rg_item_get(s->txn, s->env, &k, s->now, &v, &e);
  if (rc == 404) s->work.read_units++;
  if (rc) return rg_push_fail(L, &e);
  s->work.read_units += rg_read_units(v.mv_size);
  if (rg_json_parse((const char *)v.mv_data, v.mv_size, &x->tmp[0], &e)) {
    rg_fail(&e, 500, "corrupt item: %s", e.msg);
    return rg_push_fail(L, &e);
  }
  if (k.lossy) {                     /* the key holds digests: check */
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(x->tmp[0], "id");
    rg_buf b;
    int same;
    rg_buf_init(&b);
    if (cJSON_IsString(sid)) rg_str_bytes(sid, &b);
    same = cJSON_IsString(sid) && b.n == idlen &&
           memcmp(b.p ? b.p : "", id, idlen) == 0;
    rg_buf_free(&b);
    if (!same) {
      rg_fail(&e, 404, "item not found");
      return rg_push_fail(L, &e);
    }
  }
  if (inm) {
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(x->tmp[0], "_etag");
    if (cJSON_IsString(tag) && strcmp(tag->valuestring, inm) == 0) {
      rg_fail(&e, 304, "not modified");
      return rg_push_fail(L, &e);
    }
  }
  rg_json_push(L, x->tmp[0]);
  push_info(L, x, &before, 200);
  return 2;
}

/* Builds x->ops from a list of patch operations (a tree in tmp[1]). */
static int patch_ops (exec *x, const cJSON *list, int *nops, rg_err *e) {
  static const char *const names[] = {
    "add", "set", "replace", "remove", "incr", "move", NULL
  };
  const cJSON *it;
  int n = 0, i = 0;
  if (!cJSON_IsArray(list))
    return rg_fail(e, 400, "patch operations must be a list of tables");
  for (it = list->child; it; it = it->next) n++;
  if (n < 1) return rg_fail(e, 400, "a patch needs at least one operation");
  if (n > RG_MAX_PATCH_OPS)
    return rg_fail(e, 400, "a patch takes at most %d operations, not %d",
                   RG_MAX_PATCH_OPS, n);
  if ((x->ops = (rg_patch_op *)calloc((size_t)n, sizeof(rg_patch_op))) == NULL)
    return rg_fail(e, 500, "out of memory");
  for (it = list->child; it; it = it->next, i++) {
    rg_patch_op *op = &x->ops[i];
    const cJSON *f, *name = NULL, *path = NULL, *from = NULL, *value = NULL;
    int k;
    if (!cJSON_IsObject(it))
      return rg_fail(e, 400, "patch operation %d is not a table", i + 1);
    for (f = it->child; f; f = f->next) {
      if (strcmp(f->string, "op") == 0) name = f;
      else if (strcmp(f->string, "path") == 0) path = f;
      else if (strcmp(f->string, "from") == 0) from = f;
      else if (strcmp(f->string, "value") == 0) value = f;
      else return rg_fail(e, 400, "patch operation %d: unknown field '%s'",
                          i + 1, f->string);
    }
    for (k = 0; names[k]; k++)
      if (cJSON_IsString(name) && strcmp(names[k], name->valuestring) == 0)
        break;
    if (names[k] == NULL)
      return rg_fail(e, 400, "patch operation %d: op must be add, set, "
                     "replace, remove, incr or move", i + 1);
    op->op = k + 1;
    if (!cJSON_IsString(path))
      return rg_fail(e, 400, "patch operation %d: path must be a string",
                     i + 1);
    op->path = path->valuestring;
    if (op->op == RG_PATCH_MOVE) {
      if (!cJSON_IsString(from))
        return rg_fail(e, 400, "patch operation %d: move needs a 'from' "
                       "path", i + 1);
      op->from = from->valuestring;
    }
    if (op->op != RG_PATCH_REMOVE && op->op != RG_PATCH_MOVE) {
      if (value == NULL)
        return rg_fail(e, 400, "patch operation %d: %s needs a value", i + 1,
                       names[k]);
      op->value = value;
    }
  }
  *nops = n;
  return 0;
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
  rg_opts_check(L, optix, allowed, what);
  memset(&w, 0, sizeof(w));
  w.op = op;
  w.if_match = rg_opt_lstring(L, optix, "if_match", &n1, what);
  w.filter = rg_opt_lstring(L, optix, "filter", &n2, what);
  if (rg_opt_text(w.if_match, n1, "if_match", &e) ||
      rg_opt_text(w.filter, n2, "filter", &e))
    return rg_push_fail(L, &e);
  if (w.filter && op != RG_OP_PATCH)
    return luaL_error(L, "%s: unknown option 'filter'", what);
  if (op == RG_OP_DELETE || op == RG_OP_PATCH) {
    int i;
    if (lua_type(L, 2) != LUA_TSTRING) {
      rg_fail(&e, 400, "id must be a string, not %s", luaL_typename(L, 2));
      return rg_push_fail(L, &e);
    }
    w.id = lua_tolstring(L, 2, &w.idlen);
    for (i = 0; i < RG_MAX_PK_PATHS; i++) w.pkv[i] = x->pkv[i];
    if (op == RG_OP_PATCH) {
      if (lua_type(L, 3) != LUA_TTABLE) {
        rg_fail(&e, 400, "patch operations must be a list of tables");
        return rg_push_fail(L, &e);
      }
      if (rg_sandbox_from_lua(L, 3, &x->tmp[1], &e) ||
          patch_ops(x, x->tmp[1], &w.nops, &e))
        return rg_push_fail(L, &e);
      w.ops = x->ops;
    }
  }
  else {
    if (doc_arg(L, x, 2, 0, &e)) return rg_push_fail(L, &e);
    w.doc = x->tmp[0];
  }
  if (rg_write(s, x->c, &w, &x->wres, &e)) return rg_push_fail(L, &e);
  if (op == RG_OP_DELETE || x->wres.doc == NULL) lua_pushboolean(L, 1);
  else rg_json_push(L, x->wres.doc);
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

/* What a query's work costs a script, in instructions: a document read or
** a row made (a JOIN's cross product is made row by row, in C, where no
** hook runs). */
#define ROW_COST 32

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
  rg_opts_check(L, 4, allowed, "ctx:query");
  memset(&q, 0, sizeof(q));
  if (lua_type(L, 2) != LUA_TSTRING) {
    rg_fail(&e, 400, "the query must be a string, not %s",
            luaL_typename(L, 2));
    return rg_push_fail(L, &e);
  }
  q.sql = lua_tolstring(L, 2, &q.sqllen);
  if (q.sqllen > RG_MAX_SQL) {
    rg_fail(&e, 400, "the query text is over %u bytes", RG_MAX_SQL);
    return rg_push_fail(L, &e);
  }
  if (!lua_isnoneornil(L, 3)) {
    if (lua_type(L, 3) != LUA_TTABLE) {
      rg_fail(&e, 400, "query parameters must be a table of name = value");
      return rg_push_fail(L, &e);
    }
    if (rg_sandbox_from_lua(L, 3, &x->tmp[0], &e)) return rg_push_fail(L, &e);
    if (!cJSON_IsObject(x->tmp[0])) {
      rg_fail(&e, 400, "query parameters must be a table of name = value");
      return rg_push_fail(L, &e);
    }
    q.params = x->tmp[0];
  }
  q.max_items = (long)rg_opt_int(L, 4, "max_items", 0, 1, 1 << 30,
                                 "ctx:query");
  q.continuation = rg_opt_lstring(L, 4, "continuation", &q.contlen,
                                  "ctx:query");
  if (!lua_isnoneornil(L, 4)) {      /* a partition key: must be ours */
    lua_getfield(L, 4, "partition_key");
    if (!lua_isnil(L, -1)) {
      const cJSON *pkv[RG_MAX_PK_PATHS];
      const cJSON *t;
      rg_ikey k;
      int ok = rg_sandbox_from_lua(L, -1, &x->tmp[1], &e) == 0;
      memset(pkv, 0, sizeof(pkv));
      if (ok && x->c->spec->npk == 1) pkv[0] = x->tmp[1];
      else if (ok && cJSON_IsArray(x->tmp[1]))
        for (i = 0, t = x->tmp[1]->child; t && i < RG_MAX_PK_PATHS;
             t = t->next, i++)
          pkv[i] = t;
      if (!ok || rg_ikey_partition(x->c->spec, pkv, &k, NULL) ||
          k.lplen != x->lp.lplen || memcmp(k.key, x->lp.key, k.lplen) != 0) {
        rg_fail(&e, 400, "%s", RG_BOUND_MSG);
        return rg_push_fail(L, &e);
      }
    }
    lua_pop(L, 1);
  }
  q.has_pk = 1;
  for (i = 0; i < RG_MAX_PK_PATHS; i++) q.pkv[i] = x->pkv[i];
  q.pk_conflict_msg = RG_BOUND_MSG;  /* a WHERE naming another partition */
  rg_sandbox_left(L, &left, &room);
  q.max_rows = left / ROW_COST + 1;
  q.max_bytes = room;
  memset(&x->qres, 0, sizeof(x->qres));
  x->qlive = 1;
  rc = rg_query_exec(s->txn, x->c, s->now, &q, &x->qres, &e);
  if (rc == 408 && x->qres.made > q.max_rows)
    rg_sandbox_stop(L, RG_STOP_BUDGET);
  if (rc == 413) rg_sandbox_stop(L, RG_STOP_MEMORY);
  rg_sandbox_charge(L, x->qres.made * ROW_COST);
  if (rc) return rg_push_fail(L, &e);
  s->work.read_units += x->qres.work.read_units;
  s->work.lookups += x->qres.work.lookups;
  s->work.partitions += x->qres.work.partitions;
  s->work.loaded += x->qres.work.loaded;
  s->work.loaded_bytes += x->qres.work.loaded_bytes;
  rg_sandbox_charge(L, x->qres.rows.n / 8);
  /* straight into the sandbox, whose allocator counts it: a tree of the
  ** page would be host memory many times the text */
  if (rg_json_push_text(L, x->qres.rows.p ? x->qres.rows.p : "[]",
                        x->qres.rows.p ? x->qres.rows.n : 2, &e)) {
    rg_fail(&e, 500, "query page: %s", e.msg);
    return rg_push_fail(L, &e);
  }
  rg_push_query_info(L, &x->qres.work, x->qres.cross_partition);
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
#define OP_COST 200
#define RU_COST 400

static int charged_op (lua_State *L, lua_CFunction f) {
  exec *x = current(L);
  rg_work before = x->s->work, w;
  int n = f(L);
  rg_work_diff(&w, &x->s->work, &before);
  rg_sandbox_charge(L, OP_COST + (uint64_t)(rg_charge(&w) * RU_COST));
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
  rg_sandbox_cstack(L);
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
  return rg_sandbox_stop(L, RG_STOP_ABORT);
}

/* ctx:body(): the trigger's document. */
static int ctx_body (lua_State *L) {
  exec *x = current(L);
  if (x->kind == K_PROC)
    return luaL_error(L, "ctx:body is only available in triggers");
  if (x->kind == K_PRE) {
    if (*x->doc) rg_json_push(L, *x->doc);
    else {                           /* a delete: {id = ...} */
      lua_createtable(L, 0, 1);
      lua_pushlstring(L, x->id, x->idlen);
      lua_setfield(L, -2, "id");
    }
  }
  else if (x->replied) {
    if (x->reply) rg_json_push(L, x->reply);
    else lua_pushnil(L);
  }
  else rg_json_push(L, x->stored);
  return 1;
}

/* Is `doc` the same item (id and logical partition) as the run's? */
static int same_item (exec *x, const cJSON *doc) {
  const cJSON *pkv[RG_MAX_PK_PATHS];
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
  rg_ikey k;
  if (!cJSON_IsString(id) || strcmp(id->valuestring, x->id) != 0) return 0;
  rg_doc_pk(x->c->spec, doc, pkv);
  return rg_ikey_partition(x->c->spec, pkv, &k, NULL) == 0 &&
         k.lplen == x->lp.lplen && memcmp(k.key, x->lp.key, k.lplen) == 0;
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
    if (!same_item(x, x->tmp[0]))
      return luaL_error(L, "ctx:set_body: a pre-trigger cannot change the "
                        "id or the partition key");
    cJSON_Delete(*x->doc);
    *x->doc = x->tmp[0];
    x->tmp[0] = NULL;
    return 0;
  }
  if (lua_isnoneornil(L, 2))
    x->tmp[0] = cJSON_CreateNull();
  else if (rg_sandbox_from_lua(L, 2, &x->tmp[0], &e))
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
      {"body", ctx_body}, {"set_body", ctx_set_body}, {NULL, NULL}
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
  rg_json_push(L, x->pk);
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
/* Pushes the compiled chunk of the run's record, compiling it when this
** process has not compiled that version yet. */
static void push_chunk (lua_State *L, exec *x) {
  uint8_t ver[8];
  const char *have;
  size_t n;
  rg_put_u64(ver, x->rec.version);
  lua_getfield(L, LUA_REGISTRYINDEX, CACHE);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CACHE);
  }
  lua_pushlstring(L, (const char *)x->ckey, x->cklen);
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
  if (rg_sandbox_load(L, x->rec.src, x->rec.len, x->name, x->namelen))
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
static void call_chunk (lua_State *L) {
  rg_sandbox_env(L);
  rg_sandbox_setenv(L, -2);
  lua_call(L, 0, 1);
  if (lua_type(L, -1) != LUA_TFUNCTION)
    luaL_error(L, "the chunk must return a function, not %s",
               luaL_typename(L, -1));
}

/* The protected part of a run, in the sandbox: chunk, ctx, arguments,
** call, result. */
static int exec_main (lua_State *L) {
  exec *x = (exec *)lua_touserdata(L, 1);
  int i;
  lua_settop(L, 0);
  push_chunk(L, x);
  call_chunk(L);
  push_ctx(L, x);
  luaL_checkstack(L, x->nargs + 2, "too many arguments");
  for (i = 0; i < x->nargs; i++) {
    if (x->args[i]) rg_json_push(L, x->args[i]);
    else lua_pushnil(L);
  }
  lua_call(L, 1 + x->nargs, 1);
  if (x->kind == K_PROC) {
    if (lua_isnil(L, -1)) {
      if ((x->result = cJSON_CreateNull()) == NULL)
        luaL_error(L, "out of memory");
    }
    else if (rg_sandbox_from_lua(L, -1, &x->result, &x->err)) {
      char msg[sizeof(x->err.msg)];
      memcpy(msg, x->err.msg, sizeof(msg));
      x->status = x->err.status;
      rg_fail(&x->err, x->status, "returned a value JSON cannot carry: %s",
              msg);
    }
  }
  return 0;
}

/* What a finished run amounts to: 0 or a status with its message. */
static int outcome (exec *x, lua_State *L, int rc, int why, rg_err *e) {
  const char *what = what_of(x->kind);
  int n = (int)x->namelen;
  if (why == RG_STOP_BUDGET)
    return rg_fail(e, 408, "%s '%.*s' exceeded its instruction budget "
                   "(%llu instructions)", what, n, x->name,
                   (unsigned long long)x->rt->budget);
  if (why == RG_STOP_MEMORY || rc == LUA_ERRMEM)
    return rg_fail(e, 413, "%s '%.*s' exceeded its memory budget "
                   "(%llu bytes)", what, n, x->name,
                   (unsigned long long)x->rt->memory);
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

/*
** Runs x in the sandbox, inside scope x->s, bound to x->lp.  Restores the
** scope's binding and script afterwards.
*/
static int run (exec *x, rg_err *e) {
  runtime *rt = x->rt;
  rg_scope *s = x->s;
  const rg_cspec *bound = s->bound;
  const uint8_t *bound_lp = s->bound_lp;
  size_t bound_lplen = s->bound_lplen;
  const char *bound_msg = s->bound_msg;
  void *script = s->script;
  lua_State *L;
  int rc, why;
  if (rt->cur != NULL)
    return rg_fail(e, 500, "a script cannot start while another runs");
  if ((rc = get_sandbox(rt, e))) return rc;
  L = rg_sandbox_state(rt->sb);
  s->work.scripts++;
  s->bound = x->c->spec;
  s->bound_lp = x->lp.key;
  s->bound_lplen = x->lp.lplen;
  s->bound_msg = RG_BOUND_MSG;
  s->script = x;
  rt->cur = x;
  lua_settop(L, 0);
  lua_pushcfunction(L, exec_main);
  lua_pushlightuserdata(L, x);
  rg_sandbox_arm(rt->sb, rt->budget, rt->memory);
  rc = lua_pcall(L, 1, 0, 0);
  why = rg_sandbox_disarm(rt->sb);
  rt->cur = NULL;
  s->script = script;
  s->bound = bound;
  s->bound_lp = bound_lp;
  s->bound_lplen = bound_lplen;
  s->bound_msg = bound_msg;
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

static void exec_init (exec *x, runtime *rt, int kind, rg_scope *s,
                       const rg_cont *c) {
  memset(x, 0, sizeof(*x));
  x->rt = rt;
  x->kind = kind;
  x->s = s;
  x->c = c;
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
  runtime *rt = runtime_of(s->env);
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
  if ((rc = get_record(s->txn, s->env, RG_MK_PROC, c->spec->cid, name, n,
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

/* Runs a freshly compiled chunk (on top) and checks what it returns. */
static int check_main (lua_State *L) {
  call_chunk(L);
  return 0;
}

int rg_script_check (rg_env *env, int tag, const char *name, size_t n,
                     const char *src, size_t len, rg_err *e) {
  const char *what = tag == RG_MK_PROC ? "procedure" : "trigger";
  runtime *rt = runtime_of(env);
  lua_State *L;
  int rc, why;
  if (rt == NULL) return rg_fail(e, 500, "out of memory");
  if (rt->cur != NULL)
    return rg_fail(e, 500, "a script cannot be stored while a script runs");
  if ((rc = get_sandbox(rt, e))) return rc;
  L = rg_sandbox_state(rt->sb);
  lua_settop(L, 0);
  lua_pushcfunction(L, check_main);
  rg_sandbox_arm(rt->sb, rt->budget, rt->memory);
  rc = rg_sandbox_load(L, src, len, name, n);
  if (rc == LUA_OK) rc = lua_pcall(L, 1, 0, 0);
  else rc = -rc;                     /* the compiler failed */
  why = rg_sandbox_disarm(rt->sb);
  if (why == RG_STOP_BUDGET)
    rc = rg_fail(e, 408, "%s '%.*s' exceeded its instruction budget while "
                 "loading (%llu instructions)", what, (int)n, name,
                 (unsigned long long)rt->budget);
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
  record r;
  int rc;
  if ((rc = rg_check_id(name, n, RG_MAX_NAME, "a trigger name", e))) return rc;
  if ((rc = get_record(s->txn, s->env, RG_MK_TRIG, c->spec->cid, name, n, &r,
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

/* The automatic triggers of c as of the database's script version. */
static int autos_of (rg_scope *s, const rg_cont *c, runtime *rt,
                     const autoset **out, rg_err *e) {
  uint64_t version;
  autoset *set = NULL;
  MDB_cursor *cur;
  MDB_val k, v;
  uint8_t from[5];
  int rc, i;
  *out = NULL;
  version = get_version(s->txn, s->env, &rc);
  if (rc) return rg_scope_mdb(s, rc, "script version", e);
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
  if ((rc = mdb_cursor_open(s->txn, s->env->dbi[RG_DB_META], &cur)))
    return rg_scope_mdb(s, rc, "triggers", e);
  k.mv_data = from;
  k.mv_size = rg_meta_key(from, RG_MK_TRIG, c->spec->cid, NULL, 0);
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0 && k.mv_size > 5 && memcmp(k.mv_data, from, 5) == 0) {
    record r;
    if (parse_record(RG_MK_TRIG, &v, &r) == 0 && r.automatic) {
      autotrig *t = (autotrig *)realloc(set->t, (size_t)(set->n + 1) *
                                        sizeof(autotrig));
      char *name = (char *)malloc(k.mv_size - 5 + 1);
      if (t) set->t = t;
      if (t == NULL || name == NULL) {
        free(name);
        mdb_cursor_close(cur);
        return rg_fail(e, 500, "out of memory");
      }
      memcpy(name, (const char *)k.mv_data + 5, k.mv_size - 5);
      name[k.mv_size - 5] = '\0';
      t = &set->t[set->n++];
      t->name = name;
      t->len = k.mv_size - 5;
      t->type = r.type;
      t->op = r.op;
    }
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (rc != MDB_NOTFOUND && rc != 0) return rg_scope_mdb(s, rc, "triggers", e);
  set->version = version;
  *out = set;
  return 0;
}

/* Runs one trigger on a write. */
static int run_trigger (rg_scope *s, const rg_cont *c, runtime *rt, int kind,
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
  if ((rc = get_record(s->txn, s->env, RG_MK_TRIG, c->spec->cid, name, n,
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
  runtime *rt;
  int rc, i;
  if (s->script != NULL || w->ttl_expired) return 0;
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

int rg_trigger_pre (rg_scope *s, const rg_cont *c, const rg_wreq *w, int op,
                    const rg_ikey *k, cJSON **doc, rg_err *e) {
  return fire(s, c, w, K_PRE, op, k, doc, NULL, NULL, e);
}

int rg_trigger_post (rg_scope *s, const rg_cont *c, const rg_wreq *w, int op,
                     const rg_ikey *k, const cJSON *stored, rg_wres *r,
                     rg_err *e) {
  return fire(s, c, w, K_POST, op, k, NULL, stored, r, e);
}
/* }===================================================================== */
