/*
** feed.c: the Lua binding of the change feed: c:changes, c:feed_ranges,
** and changes as Lua values (for handlers too).
**
** A change in latest mode is the document; in all_versions mode it is
** {current = doc | previous = doc, metadata = {operation, lsn, ts, id,
** partition_key, ttl_expired}} (docs/feed.md).  Options are checked whole
** (an unknown key raises).  A continuation token carries the mode, the
** feed range and the partition filter of its read: a read from a token
** needs no other option, and an option naming another mode, range or
** partition key than the token's is 400 with a message saying which.
*/

#include <math.h>
#include <string.h>

#include "host/binding.h"
#include "luax/luajson.h"
#include "store/catalog.h"
#include "store/feed.h"

#define PAGE_DEFAULT  100
#define PAGE_MAX      100000


/*
** {=====================================================================
** Changes as Lua values
** ======================================================================
*/
static const char *const op_names[] = {
  "", "create", "replace", "", "delete"
};

/* Pushes a field name of a declared path (MUTF-8) as raw bytes. */
static void push_segment (lua_State *L, const char *seg) {
  if (strstr(seg, "\xC0\x80") == NULL) lua_pushstring(L, seg);
  else {
    luaL_Buffer B;
    luaL_buffinit(L, &B);
    for (; *seg; seg++) {
      if ((uint8_t)seg[0] == 0xC0 && (uint8_t)seg[1] == 0x80) {
        luaL_addchar(&B, '\0');
        seg++;
      }
      else luaL_addchar(&B, *seg);
    }
    luaL_pushresult(&B);
  }
}

/* Pushes the value at a declared path of the document at `doc` (or nil). */
static void push_path (lua_State *L, int doc, const rg_path *p) {
  int i;
  lua_pushvalue(L, doc);
  for (i = 0; i < p->n; i++) {
    if (lua_type(L, -1) != LUA_TTABLE) {
      lua_pop(L, 1);
      lua_pushnil(L);
      return;
    }
    push_segment(L, p->seg[i]);
    lua_rawget(L, -2);
    lua_remove(L, -2);
  }
}

/* Pushes the partition key of a document as `read` takes it: for a
** document lacking it, the none value (an empty object). */
static void push_pk (lua_State *L, const rg_cspec *spec, int doc) {
  int i;
  push_path(L, doc, &spec->pk[0]);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    luaL_getmetatable(L, "regolith.object");
    lua_setmetatable(L, -2);
    return;
  }
  if (spec->npk == 1) return;
  lua_pop(L, 1);
  lua_createtable(L, spec->npk, 0);
  for (i = 0; i < spec->npk; i++) {
    push_path(L, doc, &spec->pk[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

int rgl_batch_push (lua_State *L, const rg_cspec *spec, int mode,
                   const rg_batch *b, rg_err *e) {
  size_t i;
  int arr, rc;
  luaL_checkstack(L, 8, NULL);
  lua_createtable(L, b->n > 0x7FFFFFF ? 0x7FFFFFF : (int)b->n, 0);
  arr = lua_gettop(L);
  for (i = 0; i < b->n; i++) {
    const rg_change *ch = &b->v[i];
    const char *json = b->text.p + ch->off;
    if (mode == RG_FEED_LATEST) {
      if ((rc = rgl_json_push_stored(L, json, ch->len, e))) goto fail;
      lua_rawseti(L, arr, (int)i + 1);
      continue;
    }
    lua_createtable(L, 0, 2);                      /* arr+1: the change */
    if ((rc = rgl_json_push_stored(L, json, ch->len, e))) goto fail;
    lua_createtable(L, 0, 6);                      /* arr+3: metadata */
    lua_pushstring(L, op_names[ch->op == RG_OP_CREATE ? 1 :
                               ch->op == RG_OP_REPLACE ? 2 : 4]);
    lua_setfield(L, -2, "operation");
    lua_pushinteger(L, (lua_Integer)ch->lsn);
    lua_setfield(L, -2, "lsn");
    lua_pushinteger(L, (lua_Integer)ch->ts);
    lua_setfield(L, -2, "ts");
    lua_getfield(L, arr + 2, "id");
    lua_setfield(L, -2, "id");
    push_pk(L, spec, arr + 2);
    lua_setfield(L, -2, "partition_key");
    lua_pushboolean(L, ch->ttl_expired);
    lua_setfield(L, -2, "ttl_expired");
    lua_setfield(L, arr + 1, "metadata");
    lua_setfield(L, arr + 1, ch->op == RG_OP_DELETE ? "previous" : "current");
    lua_rawseti(L, arr, (int)i + 1);
  }
  return 0;
fail:
  lua_settop(L, arr - 1);
  return rg_fail(e, 500, "corrupt change: %s", e->msg);
}
/* }===================================================================== */


/*
** {=====================================================================
** c:changes, c:feed_ranges
** ======================================================================
*/
/* The feed's mode option, shared by c:changes and db:processor (raises on
** misuse). */
static int opt_mode (lua_State *L, int idx, const char *what) {
  const char *m = rgl_opt_string(L, idx, "mode", what);
  if (m == NULL || strcmp(m, "latest") == 0) return RG_FEED_LATEST;
  if (strcmp(m, "all_versions") == 0) return RG_FEED_ALL;
  luaL_error(L, "%s: option 'mode' must be \"latest\" or \"all_versions\"",
             what);
  return 0;
}

void rgl_feed_opt_start (lua_State *L, int idx, int *kind, double *t,
                        const char *what) {
  *kind = RG_START_BEGINNING;
  *t = 0;
  if (lua_isnoneornil(L, idx)) return;
  lua_getfield(L, idx, "start");
  if (lua_type(L, -1) == LUA_TNUMBER) {
    *t = lua_tonumber(L, -1);
    if (*t != *t || *t == HUGE_VAL || *t == -HUGE_VAL)
      luaL_error(L, "%s: option 'start' must be a finite number of seconds",
                 what);
    *kind = RG_START_TIME;
  }
  else if (lua_type(L, -1) == LUA_TSTRING &&
           strcmp(lua_tostring(L, -1), "now") == 0)
    *kind = RG_START_NOW;
  else if (!lua_isnil(L, -1) && !(lua_type(L, -1) == LUA_TSTRING &&
                                  strcmp(lua_tostring(L, -1),
                                         "beginning") == 0))
    luaL_error(L, "%s: option 'start' must be \"beginning\", \"now\" or a "
               "time in seconds since the epoch", what);
  lua_pop(L, 1);
}

/* The logical partition of a partition-key value (a value, or an array of
** one value per level) at idx: 0 or 400. */
static int pk_prefix (lua_State *L, int idx, const rg_cspec *spec,
                      rg_ikey *k, rg_err *e) {
  const cJSON *pkv[RG_MAX_PK_PATHS] = { NULL, NULL, NULL };
  cJSON *v = NULL, *c;
  int rc, i = 0;
  if ((rc = rgl_json_from_lua(L, idx, &v, e))) return rc;
  if (spec->npk == 1) pkv[0] = v;
  else if (cJSON_IsObject(v) && v->child == NULL) {}   /* none: {} */
  else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == spec->npk)
    for (c = v->child; c; c = c->next) pkv[i++] = c;
  else {
    cJSON_Delete(v);
    return rg_fail(e, 400, "the partition key is hierarchical: give an array "
                   "of %d values (every level is required)", spec->npk);
  }
  rc = rg_ikey_partition(spec, pkv, k, e);
  cJSON_Delete(v);
  return rc;
}

typedef struct page {
  rg_batch b;
  rg_buf tok;
} page;

static void page_free (void *p) {
  page *g = (page *)p;
  rg_batch_free(&g->b);
  rg_buf_free(&g->tok);
}

static const char *mode_name (int mode) {
  return mode == RG_FEED_ALL ? "all_versions" : "latest";
}

/* Is option `name` given (non-nil) in the options table at idx? */
static int given (lua_State *L, int idx, const char *name) {
  int r;
  if (lua_isnoneornil(L, idx)) return 0;
  lua_getfield(L, idx, name);
  r = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return r;
}

/* The read a token continues, against the options given with it: the
** token's mode, range and filter apply; an option naming others is 400. */
static int from_token (rg_feedtok *t, int mode, int mode_given, int range,
                       int range_given, const rg_ikey *pk, int pk_given,
                       rg_err *e) {
  if (mode_given && mode != t->mode)
    return rg_fail(e, 400, "the continuation token continues a read in mode "
                   "\"%s\", not \"%s\": leave mode out, or start a new read",
                   mode_name(t->mode), mode_name(mode));
  if (range_given && range != t->range) {
    if (t->range)
      return rg_fail(e, 400, "the continuation token continues a read of "
                     "feed range %d, not %d: leave feed_range out, or start a "
                     "new read", t->range, range);
    return rg_fail(e, 400, "the continuation token continues a read of %s, "
                   "not of feed range %d: leave feed_range out, or start a "
                   "new read", t->lplen ? "one partition key"
                                        : "every feed range", range);
  }
  if (pk_given && (t->lplen != pk->lplen ||
                   memcmp(t->lp, pk->key, pk->lplen) != 0))
    return rg_fail(e, 400, "the continuation token continues a read %s, not "
                   "of this partition key: leave partition_key out, or "
                   "start a new read",
                   t->lplen ? "of another partition key"
                   : t->range ? "of one feed range" : "of every feed range");
  return 0;
}

/* c:changes(opts) -> changes, info (info.continuation always) */
static int cont_changes (lua_State *L) {
  static const char *const allowed[] = {
    "start", "continuation", "mode", "max_items", "partition_key",
    "feed_range", NULL
  };
  rg_lcont *lc = rgl_checkcont(L, 1);
  const rg_cspec *spec = lc->c.spec;
  rg_env *env = lc->c.env;
  rg_feedtok *ft;
  rg_feedq q;
  rg_ikey pk;
  rg_err e;
  rg_admit a;
  rg_txn *txn;
  page *g;
  const char *tok;
  const uint8_t *lp = NULL;
  size_t lplen = 0, toklen;
  int mode, range, kind, i, rc, pk_given = 0;
  long max;
  double t;
  lua_settop(L, 2);
  rgl_opts_check(L, 2, allowed, "changes");
  mode = opt_mode(L, 2, "changes");
  max = (long)rgl_opt_int(L, 2, "max_items", PAGE_DEFAULT, 1, PAGE_MAX,
                         "changes");
  range = (int)rgl_opt_int(L, 2, "feed_range", 0, 1, spec->nparts, "changes");
  rgl_feed_opt_start(L, 2, &kind, &t, "changes");
  tok = rgl_opt_lstring(L, 2, "continuation", &toklen, "changes");
  if (!lua_isnil(L, 2)) {
    lua_getfield(L, 2, "partition_key");           /* 3 */
    if (!lua_isnil(L, 3)) {
      if (range)
        return luaL_error(L, "changes: give partition_key or feed_range, "
                          "not both");
      if (pk_prefix(L, 3, spec, &pk, &e)) return rgl_push_fail(L, &e);
      pk_given = 1;
    }
  }
  g = (page *)rgl_newbox(L, sizeof(page) + sizeof(rg_feedtok), page_free);
  ft = (rg_feedtok *)(g + 1);
  rg_batch_init(&g->b);
  rg_buf_init(&g->tok);
  if (tok) {
    if (rg_feed_untoken(rg_env_secret(env), spec, tok, toklen, ft, &e) ||
        from_token(ft, mode, given(L, 2, "mode"), range, range != 0, &pk,
                   pk_given, &e))
      return rgl_push_fail(L, &e);
    mode = ft->mode;
    range = ft->range;
    if (ft->lplen) { lp = ft->lp; lplen = ft->lplen; }
  }
  else if (pk_given) { lp = pk.key; lplen = pk.lplen; }
  memset(&q, 0, sizeof(q));
  q.first = 0;
  q.n = spec->nparts;
  if (range) { q.first = range - 1; q.n = 1; }
  if (lp) {
    q.first = rg_range_of(rg_get_u64(lp + 4), spec->nparts);
    q.n = 1;
  }
  /* admitted to the partition it reads: a logical partition's, a feed
  ** range's, or every one */
  if ((rc = rg_admit_begin(lc, lp != NULL, lp ? rg_get_u64(lp + 4) : 0,
                      lp ? 0 : range ? range - 1 : RG_TP_EVERY, &a, &e)))
    return rgl_push_throttled(L, &e, &a);
  q.c = &lc->c;
  q.mode = mode;
  q.pos = ft->pos;
  q.lp = lp;
  q.lplen = lplen;
  q.max = (size_t)max;
  q.now = rg_now();
  if ((rc = rg_read_begin(env, &txn, &e))) return rgl_push_fail(L, &e);
  rc = rg_cont_alive(txn, &lc->c, &e);
  for (i = 0; rc == 0 && !tok && i < q.n; i++)
    rc = rg_feed_start(txn, &lc->c, mode, q.first + i, kind, t, &ft->pos[i],
                       &e);
  if (rc == 0) rc = rg_feed_read(txn, &q, &g->b, &e);
  rg_read_end(env);
  if (rc) {
    rgl_account_work(L, lc, &a, &g->b.work);
    return rgl_push_fail(L, &e);
  }
  rg_feed_token(rg_env_secret(env), spec, mode, range, lp, lplen, q.n,
                ft->pos, &g->tok);
  if (g->tok.oom) {
    rg_fail(&e, 500, "out of memory");
    return rgl_push_fail(L, &e);
  }
  if (rgl_batch_push(L, spec, mode, &g->b, &e)) return rgl_push_fail(L, &e);
  rgl_account(L, lc, &a, rgl_push_info(L, &g->b.work, 200));
  lua_pushlstring(L, g->tok.p, g->tok.n);
  lua_setfield(L, -2, "continuation");
  lua_pushinteger(L, (lua_Integer)g->b.n);
  lua_setfield(L, -2, "count");
  rg_box_done(g);
  return 2;
}

/* c:feed_ranges() -> {1, ..., P} */
static int cont_feed_ranges (lua_State *L) {
  rg_lcont *lc = rgl_checkcont(L, 1);
  int i;
  lua_createtable(L, lc->c.spec->nparts, 0);
  for (i = 1; i <= lc->c.spec->nparts; i++) {
    lua_pushinteger(L, i);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

void rgl_feed_open (lua_State *L) {
  static const luaL_Reg methods[] = {
    {"changes", cont_changes},
    {"feed_ranges", cont_feed_ranges},
    {NULL, NULL}
  };
  rgl_add_methods(L, RG_CONT_MT, methods);
}
/* }===================================================================== */
