/*
** processor.c: the Lua binding of processors' state (regolith.procstate),
** which lua/regolith/processor.lua's loop drives.
**
** A state holds the processor's identity and what this process has handed
** out (store/procs.h); every operation on the shared state in the
** database is procs.c's.  The state keeps its container handle alive
** through its uservalue; it refuses to work once closed, or once its
** container or database is.  Operations that write may not run inside
** another write transaction (a handler, a procedure, a trigger): the
** lease would commit, or not, with that transaction's work.  No method
** that writes changes the handle: on a Redis Cluster its call may run
** again whole, and each run must do the whole work (close only marks the
** handle; release gives the leases back before it).
*/

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host/binding.h"
#include "luax/luajson.h"
#include "store/procs.h"

#define PROC_MT       "regolith.procstate"

typedef struct pstate {
  rg_lcont *lc;                /* the source; the uservalue keeps it alive */
  int closed;
  rg_proc p;
  char name[RG_MAX_NAME + 1];
  char inst[RG_MAX_INSTANCE + 1];
} pstate;


/*
** {=====================================================================
** The handle
** ======================================================================
*/
static pstate *toproc (lua_State *L, int idx) {
  return (pstate *)luaL_checkudata(L, idx, PROC_MT);
}

static pstate *checkproc (lua_State *L, int idx) {
  pstate *p = toproc(L, idx);
  if (p->closed || p->lc->c.spec == NULL || p->lc->db->env == NULL)
    luaL_error(L, "attempt to use a closed processor");
  return p;
}

/* The state must not be changed from inside another write transaction:
** the lease would commit (or not) with that transaction's work. */
static void outside_scope (lua_State *L, const pstate *p) {
  if (rg_env_scope(p->lc->c.env) != NULL)
    luaL_error(L, "processor '%s' cannot run inside a transaction (a "
               "handler, a procedure or a trigger)", p->name);
}

static int range_arg (lua_State *L, const pstate *p, int idx) {
  lua_Integer r = luaL_checkinteger(L, idx);
  if (r < 1 || r > p->p.nparts)
    luaL_error(L, "feed range %d does not exist", (int)r);
  return (int)r - 1;
}

/* _processor.new(container, name, instance, mode, max_items,
**                lease_seconds, max_attempts) -> state */
static int proc_new (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  size_t n, m;
  const char *name = luaL_checklstring(L, 2, &n);
  const char *inst = luaL_checklstring(L, 3, &m);
  int mode = (int)luaL_checkinteger(L, 4);
  lua_Integer max_items = luaL_checkinteger(L, 5);
  lua_Number lease_s = luaL_checknumber(L, 6);
  lua_Integer attempts = luaL_checkinteger(L, 7);
  rg_err e;
  pstate *p;
  if (rg_check_id(name, n, RG_MAX_NAME, "a processor name", &e))
    return luaL_error(L, "processor: %s", e.msg);
  if (m < 1 || m > RG_MAX_INSTANCE || memchr(inst, 0, m) ||
      !rg_utf8_valid(inst, m))
    return luaL_error(L, "processor: option 'instance' must be 1 to %d bytes "
                      "of UTF-8 without NUL", RG_MAX_INSTANCE);
  if ((mode != RG_FEED_LATEST && mode != RG_FEED_ALL) || max_items < 1 ||
      !(lease_s >= 1) || attempts < 1)
    return luaL_error(L, "processor: bad state arguments");
  p = (pstate *)rg_newuserdata(L, sizeof(pstate));
  memset(p, 0, sizeof(*p));
  luaL_getmetatable(L, PROC_MT);
  lua_setmetatable(L, -2);
  lua_createtable(L, 1, 0);          /* the uservalue keeps the source alive */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  rg_setuservalue(L, -2);
  p->lc = lc;
  memcpy(p->name, name, n);
  memcpy(p->inst, inst, m);
  p->p.id.c = &lc->c;
  p->p.id.name = p->name;
  p->p.id.namelen = n;
  p->p.id.inst = p->inst;
  p->p.id.instlen = m;
  p->p.mode = mode;
  p->p.nparts = lc->c.spec->nparts;
  p->p.max_items = (size_t)max_items;
  p->p.lease_ms = (int64_t)(lease_s * 1000);
  p->p.max_attempts = attempts > 0x7FFFFFFF ? 0x7FFFFFFF : (int)attempts;
  p->p.sync = lc->db->sync;
  return 1;
}

static int proc_tostring (lua_State *L) {
  pstate *p = toproc(L, 1);
  lua_pushfstring(L, "regolith.procstate (%s%s)", p->name,
                  p->closed ? ", closed" : "");
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** First sight, leases, closing
** ======================================================================
*/
/* state:init(opts) -> true | nil, msg, status (opts.start is read) */
static int proc_init (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int kind;
  double t;
  rg_err e;
  outside_scope(L, p);
  rgl_feed_opt_start(L, 2, &kind, &t, "processor");
  if (rg_proc_init(&p->p, kind, t, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* state:maintain() -> {range, ...} (the ranges held now) | nil, msg, st */
static int proc_maintain (lua_State *L) {
  pstate *p = checkproc(L, 1);
  rg_err e;
  int i;
  outside_scope(L, p);
  if (rg_proc_maintain(&p->p, &e)) return rgl_push_fail(L, &e);
  lua_createtable(L, p->p.nowned, 0);
  for (i = 0; i < p->p.nowned; i++) {
    lua_pushinteger(L, p->p.owned[i] + 1);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* state:delete() -> true | nil, msg, status: forgets the processor (its
** checkpoints, leases and dead letters); state:close() closes the state.
** Neither this nor release changes the handle: on a Redis Cluster a call
** may run again whole (a conflict at its apply, a fetch), and each run
** must do the whole work. */
static int proc_delete (lua_State *L) {
  pstate *p = checkproc(L, 1);
  rg_err e;
  outside_scope(L, p);
  if (rg_proc_forget(&p->p, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* state:release() -> true | nil, msg, status: gives the leases back (when
** the state, its container and its database are still open). */
static int proc_release (lua_State *L) {
  pstate *p = toproc(L, 1);
  rg_err e;
  int rc = 0;
  if (!p->closed && p->lc->c.spec != NULL && p->lc->db->env != NULL &&
      !p->lc->db->readonly) {
    outside_scope(L, p);
    rc = rg_proc_release(&p->p, &e);
  }
  if (rc) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* state:close() -> true: the state refuses to work from now on (it writes
** nothing: release gives the leases back first). */
static int proc_close (lua_State *L) {
  pstate *p = toproc(L, 1);
  p->closed = 1;
  lua_pushboolean(L, 1);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Batches: reading, checkpoints, failures
** ======================================================================
*/
typedef struct bbox {
  rg_batch b;
} bbox;

static void bbox_free (void *x) {
  rg_batch_free(&((bbox *)x)->b);
}

static bbox *new_bbox (lua_State *L) {
  bbox *g = (bbox *)rgl_newbox(L, sizeof(bbox), bbox_free);
  rg_batch_init(&g->b);
  return g;
}

/* The info table a handler receives.  The read is charged to the feed
** range's partition of a container with a budget, never refused: a
** processor behind its source is delivered all the same (its handler's
** writes are admitted as any writes are). */
static void push_batch_info (lua_State *L, const pstate *p, const rg_work *w,
                             int range, uint32_t attempt) {
  rg_lcont *lc = p->lc;
  if (rg_tp_live(lc->c.env, lc->c.spec->cid, &lc->tp)) {
    rg_admit a;
    rg_tp_route(&lc->tp, 0, 0, range, &a);
    rg_tp_debit(&a, rg_charge(w));
  }
  rgl_push_info(L, w, 200);
  lua_pushinteger(L, range + 1);
  lua_setfield(L, -2, "feed_range");
  lua_pushinteger(L, (lua_Integer)attempt);
  lua_setfield(L, -2, "attempt");
}

/* The source's budget is resolved before the batch is read: on a cluster
** what that reads is fetched with the batch, not after it, when a run
** that lacked it would have called the handler already. */
static void budget_first (const pstate *p) {
  (void)rg_tp_live(p->lc->c.env, p->lc->c.spec->cid, &p->lc->tp);
}

/* state:read(range) -> n, changes, info | 0 | nil, msg, status.
** For handlers outside a transaction: the batch at the checkpoint. */
static int proc_read (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int r = range_arg(L, p, 2);
  uint32_t attempt;
  rg_err e;
  bbox *g;
  outside_scope(L, p);
  budget_first(p);
  g = new_bbox(L);
  if (rg_proc_read(&p->p, r, &g->b, &attempt, &e)) return rgl_push_fail(L, &e);
  lua_pushinteger(L, (lua_Integer)g->b.n);
  if (g->b.n == 0) { rg_box_done(g); return 1; }
  if (rgl_batch_push(L, p->lc->c.spec, p->p.mode, &g->b, &e))
    return rgl_push_fail(L, &e);
  push_batch_info(L, p, &g->b.work, r, attempt);
  rg_box_done(g);
  return 3;
}

static int lost_fail (lua_State *L, int r) {
  rg_err e;
  rg_fail(&e, 409, "the lease on feed range %d was lost; the batch will be "
          "delivered again", r + 1);
  return rgl_push_fail(L, &e);
}

/* state:commit(range) -> true | nil, msg, status: moves the checkpoint
** past the batch state:read handed out. */
static int proc_commit (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int r = range_arg(L, p, 2), lost;
  rg_err e;
  outside_scope(L, p);
  if (rg_proc_commit(&p->p, r, &lost, &e)) return rgl_push_fail(L, &e);
  if (lost) return lost_fail(L, r);
  lua_pushboolean(L, 1);
  return 1;
}

/* state:fail(range, message) -> attempts, dead_lettered | nil, msg, st:
** counts a failed delivery of the batch handed out last. */
static int proc_fail (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int r = range_arg(L, p, 2), dead, lost;
  size_t msglen;
  const char *msg = luaL_checklstring(L, 3, &msglen);
  uint32_t attempts;
  rg_err e;
  outside_scope(L, p);
  if (rg_proc_fail(&p->p, r, msg, msglen, &attempts, &dead, &lost, &e))
    return rgl_push_fail(L, &e);
  if (lost) return lost_fail(L, r);
  lua_pushinteger(L, (lua_Integer)attempts);
  lua_pushboolean(L, dead);
  return 2;
}

typedef struct txq {
  lua_State *L;
  const pstate *p;
  int runner, out;             /* stack indices: the runner, its results */
} txq;

/* The handler of a transactional batch: the runner (which returns true, or
** false and the error) with the changes and their info; the changes, the
** info and the error are kept in the results table for the caller. */
static int run_handler (void *ud, const rg_batch *b, int range,
                        uint32_t attempt, int *failed, rg_err *e) {
  txq *q = (txq *)ud;
  lua_State *L = q->L;
  int rc;
  lua_pushvalue(L, q->runner);
  if ((rc = rgl_batch_push(L, q->p->lc->c.spec, q->p->p.mode, b, e)))
    return rc;
  push_batch_info(L, q->p, &b->work, range, attempt);
  lua_pushvalue(L, -2);
  lua_setfield(L, q->out, "changes");
  lua_pushvalue(L, -1);
  lua_setfield(L, q->out, "info");
  lua_call(L, 2, 2);
  if (!lua_toboolean(L, -2)) {
    lua_setfield(L, q->out, "err");
    lua_pop(L, 1);
    *failed = 1;
    return 0;
  }
  lua_pop(L, 2);
  return 0;
}

/* state:run_tx(range, runner) -> n, true | n, false, err, changes, info
** | 0 | nil, msg, status */
static int proc_run_tx (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int r = range_arg(L, p, 2), rc, lost, failed;
  uint64_t waiting = 0;
  size_t n;
  rg_err e;
  bbox *g;
  txq q;
  luaL_checktype(L, 3, LUA_TFUNCTION);
  outside_scope(L, p);
  budget_first(p);
  lua_settop(L, 3);
  /* a look first, so that an idle range costs no write transaction */
  if (rg_proc_waiting(&p->p, r, &waiting, &e)) return rgl_push_fail(L, &e);
  if (waiting == 0) { lua_pushinteger(L, 0); return 1; }
  lua_newtable(L);                                   /* 4: the results */
  g = new_bbox(L);                                   /* 5 */
  q.L = L;
  q.p = p;
  q.runner = 3;
  q.out = 4;
  rc = rg_proc_run_tx(&p->p, rgl_protect, L, r, run_handler, &q, &g->b, &n,
                      &lost, &failed, &e);
  if (rc == RG_RAISED) return lua_error(L);
  rg_box_done(g);
  if (failed) {
    lua_pushinteger(L, (lua_Integer)n);
    lua_pushboolean(L, 0);
    lua_getfield(L, 4, "err");
    lua_getfield(L, 4, "changes");
    lua_getfield(L, 4, "info");
    return 5;
  }
  if (rc) return rgl_push_fail(L, &e);
  if (lost) return lost_fail(L, r);
  lua_pushinteger(L, (lua_Integer)n);
  lua_pushboolean(L, 1);
  return 2;
}
/* }===================================================================== */


/*
** {=====================================================================
** Looking at a processor: lag, status, dead letters
** ======================================================================
*/
typedef struct sbox {
  rg_lease *ls;
  uint64_t *lag;
  rg_buf text;
} sbox;

static void sbox_free (void *x) {
  sbox *g = (sbox *)x;
  free(g->ls);
  free(g->lag);
  g->ls = NULL;
  g->lag = NULL;
  rg_buf_free(&g->text);
}

/* Reads every lease and the changes waiting after each checkpoint. */
static int snapshot (lua_State *L, pstate *p, sbox **out, rg_err *e) {
  sbox *g = (sbox *)rgl_newbox(L, sizeof(sbox), sbox_free);
  *out = g;
  rg_buf_init(&g->text);
  g->ls = (rg_lease *)malloc(sizeof(rg_lease) * (size_t)p->p.nparts);
  g->lag = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)p->p.nparts);
  if (g->ls == NULL || g->lag == NULL) return rg_fail(e, 500, "out of memory");
  return rg_proc_snapshot(&p->p, g->ls, g->lag, e);
}

/* state:lag() -> total, {[range] = n} */
static int proc_lag (lua_State *L) {
  pstate *p = checkproc(L, 1);
  uint64_t total = 0;
  rg_err e;
  sbox *g;
  int r;
  if (snapshot(L, p, &g, &e)) return rgl_push_fail(L, &e);
  lua_createtable(L, p->p.nparts, 0);
  for (r = 0; r < p->p.nparts; r++) {
    total += g->lag[r];
    lua_pushinteger(L, (lua_Integer)g->lag[r]);
    lua_rawseti(L, -2, r + 1);
  }
  lua_pushinteger(L, (lua_Integer)total);
  lua_insert(L, -2);
  rg_box_done(g);
  return 2;
}

/* state:ranges() -> {{range, mode, owner, expires, continuation, lag,
** failures, attempts, delivered}, ...} */
static int proc_ranges (lua_State *L) {
  pstate *p = checkproc(L, 1);
  int64_t now = rg_now_ms();
  rg_err e;
  sbox *g;
  int r;
  if (snapshot(L, p, &g, &e)) return rgl_push_fail(L, &e);
  lua_createtable(L, p->p.nparts, 0);
  for (r = 0; r < p->p.nparts; r++) {
    const rg_lease *l = &g->ls[r];
    lua_createtable(L, 0, 9);
    lua_pushinteger(L, r + 1);
    lua_setfield(L, -2, "range");
    lua_pushstring(L, l->mode == RG_FEED_ALL ? "all_versions" : "latest");
    lua_setfield(L, -2, "mode");
    if (l->ownerlen) {
      lua_pushlstring(L, l->owner, l->ownerlen);
      lua_setfield(L, -2, "owner");
      lua_pushnumber(L, (double)((int64_t)l->expiry - now) / 1000.0);
      lua_setfield(L, -2, "expires");
    }
    g->text.n = 0;
    rg_feed_token(rg_env_secret(p->lc->c.env), p->lc->c.spec, p->p.mode,
                  r + 1, NULL, 0, 1, &l->pos, &g->text);
    if (g->text.oom) return luaL_error(L, "out of memory");
    lua_pushlstring(L, g->text.p, g->text.n);
    lua_setfield(L, -2, "continuation");
    lua_pushinteger(L, (lua_Integer)g->lag[r]);
    lua_setfield(L, -2, "lag");
    lua_pushinteger(L, (lua_Integer)l->failures);
    lua_setfield(L, -2, "failures");
    lua_pushinteger(L, (lua_Integer)l->attempts);
    lua_setfield(L, -2, "attempts");
    lua_pushinteger(L, (lua_Integer)l->delivered);
    lua_setfield(L, -2, "delivered");
    lua_rawseti(L, -2, r + 1);
  }
  rg_box_done(g);
  return 1;
}

/* state:dead_letters() -> {{seq, range, changes, error, attempts, ts}, ...} */
static int proc_dead_letters (lua_State *L) {
  pstate *p = checkproc(L, 1);
  sbox *g = (sbox *)rgl_newbox(L, sizeof(sbox), sbox_free);
  rg_err e;
  size_t i;
  int n = 0;
  rg_buf_init(&g->text);
  if (rg_proc_dead_letters(&p->p, &g->text, &e)) return rgl_push_fail(L, &e);
  lua_newtable(L);
  for (i = 0; i < g->text.n;) {
    const uint8_t *head = (const uint8_t *)g->text.p + i;
    size_t len = (size_t)rg_get_u64(head + 8);
    int bad = rgl_json_push_stored(L, g->text.p + i + 16, len, &e);
    if (!bad && lua_type(L, -1) != LUA_TTABLE)
      bad = rg_fail(&e, 500, "not an object");
    if (bad) {
      rg_fail(&e, 500, "corrupt dead letter: %s", e.msg);
      return rgl_push_fail(L, &e);
    }
    lua_pushinteger(L, (lua_Integer)rg_get_u64(head));
    lua_setfield(L, -2, "seq");
    lua_rawseti(L, -2, ++n);
    i += 16 + len;
  }
  rg_box_done(g);
  return 1;
}

/* state:drop_dead_letter(seq) -> true | nil, msg, 404 */
static int proc_drop_dead_letter (lua_State *L) {
  pstate *p = checkproc(L, 1);
  lua_Integer seq = luaL_checkinteger(L, 2);
  rg_err e;
  outside_scope(L, p);
  if (rg_proc_drop_dead(&p->p, (uint64_t)seq, &e)) return rgl_push_fail(L, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* state:clear_dead_letters() -> count */
static int proc_clear_dead_letters (lua_State *L) {
  pstate *p = checkproc(L, 1);
  rg_err e;
  int count;
  outside_scope(L, p);
  if (rg_proc_clear_dead(&p->p, &count, &e)) return rgl_push_fail(L, &e);
  lua_pushinteger(L, count);
  return 1;
}
/* }===================================================================== */


/* c:processors() -> {{name, mode}, ...}: the processors that have state
** on the container, sorted by name. */
static int cont_processors (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  rg_buf *b = rgl_newbuf(L);
  size_t at = 0;
  int count, i;
  rg_err e;
  if (rg_lease_list(&lc->c, b, &count, &e)) return rgl_push_fail(L, &e);
  lua_createtable(L, count, 0);
  for (i = 1; i <= count; i++) {
    const uint8_t *head = (const uint8_t *)b->p + at;
    size_t n = rg_get_u32(head + 1);
    lua_createtable(L, 0, 2);
    lua_pushlstring(L, b->p + at + 5, n);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, head[0] == RG_FEED_ALL ? "all_versions" : "latest");
    lua_setfield(L, -2, "mode");
    lua_rawseti(L, -2, i);
    at += 5 + n;
  }
  rg_box_done(b);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Helpers of the loop, and registration
** ======================================================================
*/
/* _processor.instance_id() -> a name unique to this process and call */
static int l_instance_id (lua_State *L) {
  static unsigned long counter = 0;
  char host[64];
  if (gethostname(host, sizeof(host)) != 0) strcpy(host, "host");
  host[sizeof(host) - 1] = '\0';
  lua_pushfstring(L, "%s:%d:%d", host, (int)getpid(), (int)++counter);
  return 1;
}

/* _processor.clock() -> milliseconds since the epoch */
static int l_clock (lua_State *L) {
  lua_pushnumber(L, (lua_Number)rg_now_ms());
  return 1;
}

/* _processor.sleep(seconds) */
static int l_sleep (lua_State *L) {
  lua_Number s = luaL_checknumber(L, 1);
  struct timespec ts;
  if (s > 0) {
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (lua_Number)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* _processor.in_transaction(db) -> is a write scope running on it? */
static int l_in_transaction (lua_State *L) {
  rg_db *d = rgl_checkdb(L, 1);
  lua_pushboolean(L, rg_env_scope(d->env) != NULL);
  return 1;
}

void rgl_processor_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"init", proc_init},
    {"maintain", proc_maintain},
    {"read", proc_read},
    {"commit", proc_commit},
    {"fail", proc_fail},
    {"run_tx", proc_run_tx},
    {"lag", proc_lag},
    {"ranges", proc_ranges},
    {"dead_letters", proc_dead_letters},
    {"clear_dead_letters", proc_clear_dead_letters},
    {"drop_dead_letter", proc_drop_dead_letter},
    {"release", proc_release},
    {"close", proc_close},
    {"delete", proc_delete},
    {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"new", proc_new},
    {"instance_id", l_instance_id},
    {"clock", l_clock},
    {"sleep", l_sleep},
    {"in_transaction", l_in_transaction},
    {NULL, NULL}
  };
  static const luaL_Reg cont_methods[] = {
    {"processors", cont_processors},
    {NULL, NULL}
  };
  rgl_add_methods(L, RG_CONT_MT, cont_methods);
  luaL_newmetatable(L, PROC_MT);
  lua_pushcfunction(L, proc_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_newtable(L);                   /* the module's _processor table */
  luaL_setfuncs(L, funcs, 0);
  lua_setfield(L, -2, "_processor");
}
/* }===================================================================== */
