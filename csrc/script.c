/*
** script.c: stored procedures and triggers.
**
** Triggers are stored under meta 't' cid name (layout.c).  A write names
** at most one pre-trigger and one post-trigger; naming one that does not
** exist is 404.
*/

#include <string.h>

#include "regolith.h"

static int named_trigger (rg_scope *s, const rg_cont *c, const char *name,
                          rg_err *e) {
  uint8_t key[5 + RG_MAX_NAME];
  MDB_val k, v;
  size_t n = strlen(name);
  int rc;
  if ((rc = rg_check_id(name, n, RG_MAX_NAME, "a trigger name", e))) return rc;
  k.mv_data = key;
  k.mv_size = rg_meta_key(key, RG_MK_TRIG, c->spec->cid, name, n);
  rc = mdb_get(s->txn, s->env->dbi[RG_DB_META], &k, &v);
  if (rc == MDB_NOTFOUND)
    return rg_fail(e, 404, "trigger '%s' not found", name);
  if (rc) return rg_scope_mdb(s, rc, "trigger", e);
  return rg_fail(e, 500, "trigger '%s' cannot run: this build has no "
                 "script runner", name);
}

int rg_trigger_pre (rg_scope *s, const rg_cont *c, const rg_wreq *w, int op,
                    const rg_ikey *k, cJSON **doc, rg_err *e) {
  (void)op; (void)k; (void)doc;
  return w->pre_trigger ? named_trigger(s, c, w->pre_trigger, e) : 0;
}

int rg_trigger_post (rg_scope *s, const rg_cont *c, const rg_wreq *w, int op,
                     const rg_ikey *k, const cJSON *stored, rg_wres *r,
                     rg_err *e) {
  (void)op; (void)k; (void)stored; (void)r;
  return w->post_trigger ? named_trigger(s, c, w->post_trigger, e) : 0;
}
