/*
** env.c: opening and closing databases (env.h).
**
** Every handle opened on a directory shares one rg_env, found in a
** process-wide list by device and inode and counted by references.  The
** first open opens the backend (local.c: the log's replay, LMDB, the
** tables) and attaches the throughput budgets; the last release lets go
** of everything the environment holds, in the reverse order.  This file
** is above the files whose state an environment carries (throughput.c,
** queue.c, index.c's path-id cache), so that they never call back into it.
*/

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "store/env_int.h"
#include "store/pagewalk.h"
#include "store/preflight.h"
#include "store/hooks.h"
#include "store/queue.h"
#include "store/remote.h"
#include "store/throughput.h"
#include "store/upgrade.h"

static rg_env *envs = NULL;      /* the environments open in this process */

static int file_exists (const char *dir, const char *name) {
  char p[4096];
  struct stat st;
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  return stat(p, &st) == 0;
}

int rg_upgrade_interrupted (const char *path) {
  return !file_exists(path, "data.mdb") &&
         file_exists(path, "data.mdb.format1") &&
         file_exists(path, ".upgrade/data.mdb");
}

int rg_env_open (const char *path, const rg_open_opts *o, rg_env **out,
                 rg_err *e) {
  struct stat st;
  rg_env *env;
  int rc;
  *out = NULL;
  if (!o->readonly && mkdir(path, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create directory '%s': %s", path,
                   strerror(errno));
  if (stat(path, &st) != 0)
    return rg_fail(e, 404, "cannot open '%s': %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return rg_fail(e, 400, "'%s' is not a directory", path);
  if (rg_upgrade_interrupted(path))
    return rg_fail(e, 409, "the upgrade of '%s' was interrupted: run "
                   "regolith.upgrade(path) or `regolith upgrade DIR` again to "
                   "finish it", path);
  for (env = envs; env; env = env->next)
    if (env->dev == (unsigned long)st.st_dev &&
        env->ino == (unsigned long)st.st_ino) {
      if (env->readonly && !o->readonly)
        return rg_fail(e, 409, "'%s' is already open read-only in this "
                       "process", path);
      env->refs++;
      if (o->log_deltas && env->local) rg_local_log_deltas(env->local);
      *out = env;
      return 0;
    }
  env = (rg_env *)calloc(1, sizeof(rg_env));
  if (env == NULL || (env->path = strdup(path)) == NULL) {
    free(env);
    return rg_fail(e, 500, "out of memory");
  }
  env->dev = (unsigned long)st.st_dev;
  env->ino = (unsigned long)st.st_ino;
  env->readonly = o->readonly;
  env->refs = 1;
  if ((rc = rg_local_open(path, o->readonly, o->map_size, &env->local,
                          env->secret, e)) ||
      (rc = rg_tp_attach(env, e))) {
    rg_local_close(env->local);
    free(env->path);
    free(env);
    return rc;
  }
  if (o->log_deltas) rg_local_log_deltas(env->local);
  env->next = envs;
  envs = env;
  *out = env;
  return 0;
}

int rg_env_open_remote (const char *name, const uint8_t secret[16],
                        int readonly, rg_env **out, rg_err *e) {
  rg_env *env = (rg_env *)calloc(1, sizeof(rg_env));
  *out = NULL;
  if (env == NULL || (env->path = strdup(name)) == NULL ||
      (env->remote = rg_remote_new()) == NULL) {
    if (env) free(env->path);
    free(env);
    return rg_fail(e, 500, "out of memory");
  }
  memcpy(env->secret, secret, 16);
  env->readonly = readonly;
  env->refs = 1;
  *out = env;
  return 0;
}

struct rg_remote *rg_env_remote (const rg_env *env) { return env->remote; }

int rg_env_complete (const rg_env *env) {
  return env->remote == NULL || rg_remote_complete(env->remote);
}

void rg_env_release (rg_env *env) {
  rg_env **p;
  rg_assert(env->refs > 0 && env->scope == NULL);
  if (--env->refs > 0) return;
  if (env->remote) {
    if (env->hooks && env->hooks->release) env->hooks->release(env->hook_state);
    rg_tp_detach(env);
    rg_remote_free(env->remote);
    rg_pcache_free(env->pcache);
    free(env->path);
    free(env);
    return;
  }
  for (p = &envs; *p; p = &(*p)->next)
    if (*p == env) { *p = env->next; break; }
  if (env->hooks && env->hooks->release) env->hooks->release(env->hook_state);
  rg_tp_detach(env);
  rg_queue_close(env->queue);
  rg_local_close(env->local);
  rg_pcache_free(env->pcache);
  free(env->path);
  free(env);
}

const char *rg_env_path (const rg_env *env) { return env->path; }
int rg_env_refs (const rg_env *env) { return env->refs; }
const uint8_t *rg_env_secret (const rg_env *env) { return env->secret; }
rg_scope *rg_env_scope (const rg_env *env) { return env->scope; }

void rg_env_set_hooks (rg_env *env, const rg_hooks *h, void *st) {
  env->hooks = h;
  env->hook_state = st;
}

void *rg_env_hook_state (const rg_env *env) { return env->hook_state; }

void rg_env_info_get (rg_env *env, rg_env_info *out) {
  if (env->remote) { memset(out, 0, sizeof(*out)); return; }
  rg_local_info(env->local, out);
}

/* What only a directory has. */
static int not_remote (rg_env *env, const char *what, rg_err *e) {
  return rg_fail(e, 501, "%s: not on a cluster database ('%s'): it keeps "
                 "no files", what, env->path);
}

const char *rg_env_table_name (int db) { return rg_tables[db].name; }

int rg_env_tables (rg_env *env, rg_table_stat out[], uint64_t *free_bytes,
                   rg_err *e) {
  rg_txn *txn;
  int rc;
  if (env->remote) return not_remote(env, "table statistics", e);
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  rc = rg_local_tables(env->local, txn, out, free_bytes, e);
  rg_read_end(env);
  return rc;
}

int rg_env_backup (rg_env *env, const char *path, rg_err *e) {
  if (env->remote) return not_remote(env, "backup", e);
  return rg_local_backup(env->local, path, e);
}

void rg_env_walk (rg_env *env, rg_txn *txn, struct rg_walk *w) {
  if (env->remote) {        /* no file of pages: nothing to walk */
    memset(w, 0, sizeof(*w));
    return;
  }
  rg_local_walk(env->local, txn, w);
}

int rg_env_compact (rg_env *env, const char *path, uint64_t *bytes,
                    rg_err *e) {
  if (env->remote) return not_remote(env, "compact", e);
  return rg_local_compact(env->local, path, bytes, e);
}
