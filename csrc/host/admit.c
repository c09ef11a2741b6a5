/*
** admit.c: what every request method of the binding shares about
** provisioned throughput: admission with its retries, the debit after the
** work, the shape of a 429 (nil, message, 429, info with retry_after_ms),
** and the counters db:stats() shows.  The rule and its numbers are the
** store's (store/throughput.c, docs/throughput.md); the methods that
** change a setting are throughput.c's.
*/

#include <stdlib.h>
#include <string.h>

#include "host/binding.h"


/*
** {=====================================================================
** Admission, debit, 429
** ======================================================================
*/
int rg_admit_wait (rg_lcont *lc, rg_admit *a) {
  if (a->retries >= lc->db->retry_throttled ||
      rg_env_scope(lc->c.env) != NULL)  /* never wait holding the writer */
    return 0;
  rg_tp_sleep(a->retry_after_ms);
  a->retries++;
  return 1;
}

/* After a 429: waits its hint and asks again, as often as allowed. */
int rg_admit_retry (rg_lcont *lc, int routed, uint64_t hash, int range,
                     rg_admit *a, rg_err *e) {
  int rc = 429;
  while (rc == 429 && rg_admit_wait(lc, a)) {
    if (!rg_tp_on(lc->c.env, lc->c.spec->cid, &lc->tp)) {
      a->own = a->pool = NULL;       /* the budget went meanwhile */
      return 0;
    }
    rc = rg_tp_admit(lc->c.spec, &lc->tp, routed, hash, range, a, e);
  }
  return rc;
}

void rgl_note_retries (lua_State *L, const rg_admit *a) {
  lua_pushinteger(L, a->retries);
  lua_setfield(L, -2, "retries");
}

int rgl_push_throttled (lua_State *L, const rg_err *e, const rg_admit *a) {
  rgl_push_fail(L, e);
  rgl_push_info(L, NULL, e->status);
  lua_pushinteger(L, (lua_Integer)a->retry_after_ms);
  lua_setfield(L, -2, "retry_after_ms");
  lua_pushinteger(L, a->retries);
  lua_setfield(L, -2, "retries");
  return 4;
}
/* }===================================================================== */


/*
** {=====================================================================
** Counters
** ======================================================================
*/
static int hotter (const void *a, const void *b) {
  const rg_tppart *x = (const rg_tppart *)a, *y = (const rg_tppart *)b;
  if (x->rate != y->rate) return x->rate < y->rate ? 1 : -1;
  if (x->throttled != y->throttled) return x->throttled < y->throttled ? 1 : -1;
  return x->range - y->range;
}

#define HOT 3                        /* partitions listed, hottest first */

static void set_num (lua_State *L, const char *k, double v) {
  lua_pushnumber(L, (double)(long long)(v * 100 + (v < 0 ? -0.5 : 0.5)) / 100);
  lua_setfield(L, -2, k);
}

static void set_int (lua_State *L, const char *k, uint64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

int rgl_push_tpstat (lua_State *L, rg_env *env, uint32_t cid) {
  rg_tpstat *s = (rg_tpstat *)rgl_newbox(L, sizeof(rg_tpstat), NULL);
  double share;
  rg_err e;
  int i, n;
  if (rg_tp_stat(env, cid, s, &e)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_createtable(L, 0, 12);
  lua_pushstring(L, s->shared ? "shared" : s->set.mode == RG_TP_AUTOSCALE ?
                 "autoscale" : "manual");
  lua_setfield(L, -2, "mode");
  if (!s->shared) {
    set_num(L, s->set.mode == RG_TP_AUTOSCALE ? "autoscale_max" :
            "ru_per_second", s->set.ru);
    lua_pushboolean(L, s->set.burst);
    lua_setfield(L, -2, "burst");
    if (s->set.mode == RG_TP_AUTOSCALE) set_num(L, "scaled_to", s->scaled_to);
  }
  set_int(L, "physical_partitions", (uint64_t)s->nparts);
  set_num(L, "consumed_ru", s->consumed);
  set_num(L, "consumed_per_second", s->rate);
  set_int(L, "requests", s->requests);
  set_int(L, "throttled", s->throttled);
  share = s->shared ? 0 : s->set.ru / s->nparts;
  qsort(s->part, (size_t)s->nparts, sizeof(rg_tppart), hotter);
  n = s->nparts < HOT ? s->nparts : HOT;
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    const rg_tppart *p = &s->part[i];
    lua_createtable(L, 0, 6);
    set_int(L, "partition", (uint64_t)p->range + 1);
    set_num(L, "consumed_per_second", p->rate);
    if (share > 0) {
      set_num(L, "utilization", p->rate / share);
      set_num(L, "balance", p->balance);
    }
    set_int(L, "requests", p->requests);
    set_int(L, "throttled", p->throttled);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "hot_partitions");
  lua_remove(L, -2);                 /* the box */
  return 1;
}
/* }===================================================================== */
