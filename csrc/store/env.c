/*
** env.c: LMDB environments, transactions and scopes.
**
** Environments.  LMDB forbids opening one environment twice in a process
** (its locks are per process), so every handle opened on a path shares one
** rg_env, found in a process-wide list by device and inode and counted by
** references.  Environments are opened with MDB_NOTLS: a read transaction
** is not tied to a thread, so coroutines may read.  Stale reader slots left
** by killed processes are reclaimed on open (mdb_reader_check).
**
** Read transactions.  No transaction ever outlives one call into the core.
** Reads outside a write scope use one cached read-only transaction per
** environment, renewed at the start of a read and reset at its end (a renew
** is far cheaper than a begin).  If a Lua error interrupts a read, the next
** read finds the transaction still live and resets it first.
**
** Scopes.  Every write runs in a scope (env.h): one LMDB write
** transaction, run by rg_scope_run around a body function.  A host whose
** bodies may raise (the Lua binding) passes a protect callback: the body
** runs protected, and when it raises the transaction is aborted (or the
** savepoint rolled back) before rg_scope_run returns RG_RAISED for the host
** to re-raise, so that an error can never leave the write transaction
** open.  While a scope runs, the
** environment points to it: every call made meanwhile in this process
** (a procedure's ctx, a trigger, a transactional processor's handler)
** joins it instead of beginning a second write transaction, which LMDB
** would deadlock on, and reads see the scope's own writes.
**
** Map growth.  The map starts at `map_size` and doubles when the data comes
** near its end, before a write transaction begins (LMDB can only resize
** with no write transaction open).  Should a write still run out of room
** (MDB_MAP_FULL), the scope is aborted, the map grown, and the body run
** again from the start: bodies must be rerunnable, which they are because
** they only read their inputs.  Other processes see the larger map as
** MDB_MAP_RESIZED when they next begin a transaction and adopt it.  A user
** therefore never sees "map full"; a full disk gives 507 at commit, and
** the database stays as it was before that transaction (LMDB writes a
** transaction's pages where the last commit does not look, and its meta
** page last).
**
** Full disks and failed remaps.  The file grows as commits write pages
** past its end; when the file system fills part-way through a write, LMDB
** reports the short write as EIO, which a commit turns into 507 when the
** file system has (almost) no room left.  A remap is more delicate: LMDB
** unmaps the old map before it maps the new one, and when that fails
** (no address space: a ulimit -v) it is left with no map at all, which the
** next transaction would read through.  So a growth first probes the
** address space it needs and gives 507 when it is not there, leaving the
** map as it was; a proactive growth that cannot be made is skipped (the
** write may still fit); and should a remap fail anyway, the environment is
** marked broken and every call on it fails (507) until every handle on it
** is closed and the database opened again.
*/

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include "store/env_int.h"
#include "store/hooks.h"
#include "store/throughput.h"
#include "store/wal.h"

#define DEFAULT_MAP   (64u << 20)
#define MAP_QUANTUM   (1u << 20)
#define MAX_READERS   1024
#define MAX_RERUNS    16
#define FULL_ROOM     (1u << 20)     /* less free than this: the disk is full */

static const char *const dbnames[RG_NDB] = {
  "meta", "items", "index", "unique", "ttl", "feed", "latest", "parts"
};

static rg_env *envs = NULL;      /* the environments open in this process */


/*
** {=====================================================================
** Opening and closing
** ======================================================================
*/
static int random_bytes (uint8_t *out, size_t n) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  size_t got = 0;
  if (fd < 0) return -1;
  while (got < n) {
    ssize_t r = read(fd, out + got, n - got);
    if (r <= 0) { if (r < 0 && errno == EINTR) continue; close(fd); return -1; }
    got += (size_t)r;
  }
  close(fd);
  return 0;
}

int rg_fail_mdb (rg_err *e, int rc, const char *what) {
  /* a full disk is the one storage failure a user can fix: say so */
  if (rc == ENOSPC || rc == EDQUOT)
    return rg_fail(e, 507, "insufficient storage: %s: %s", what,
                   mdb_strerror(rc));
  return rg_fail(e, 500, "storage failure: %s: %s", what, mdb_strerror(rc));
}

/* The failure of an environment whose map is gone (see the top). */
static int broken_fail (const rg_env *env, rg_err *e) {
  return rg_fail(e, 507, "insufficient storage: the database's map could not "
                 "be remapped (%s); close every handle on '%s' and open it "
                 "again", strerror(env->broken), env->path);
}

/*
** Remaps the environment to `size` bytes, or with 0 to the size another
** process has set.  A growth is probed first: the old map is released
** before the new one is made, so what must be free is the difference;
** without it, 507 and the map stays as it was.  A remap that fails all
** the same leaves LMDB with no map: the environment is then marked broken.
*/
static int remap (rg_env *env, size_t size, rg_err *e) {
  MDB_envinfo info;
  int rc;
  if (env->broken) return broken_fail(env, e);
  mdb_env_info(env->mdb, &info);
  if (size > info.me_mapsize) {
    size_t more = size - info.me_mapsize;
    void *probe = mmap(NULL, more, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe == MAP_FAILED)
      return rg_fail(e, 507, "insufficient storage: the map cannot grow to "
                     "%lu bytes (%s)", (unsigned long)size, strerror(errno));
    munmap(probe, more);
  }
  if ((rc = mdb_env_set_mapsize(env->mdb, size)) != 0) {
    if (rc != EINVAL) env->broken = rc;  /* EINVAL: refused before unmapping */
    return env->broken ? broken_fail(env, e)
                       : rg_fail_mdb(e, rc, "growing the map");
  }
  return 0;
}

/* Begins a transaction, adopting a map another process has grown. */
static int txn_begin (rg_env *env, unsigned flags, MDB_txn **txn,
                      rg_err *e) {
  int rc, tries;
  if (env->broken) return broken_fail(env, e);
  for (tries = 0; tries < 8; tries++) {
    rc = mdb_txn_begin(env->mdb, NULL, flags, txn);
    if (rc != MDB_MAP_RESIZED) break;
    if ((rc = remap(env, 0, e))) return rc;
  }
  return rc ? rg_fail_mdb(e, rc, "begin") : 0;
}

/*
** A failed commit.  LMDB reports a short write (the file system filled up
** part-way through it) as EIO: when the file system holding the database
** has (almost) no room left, that is a full disk, which the user can fix,
** and 507 like ENOSPC.
*/
static int commit_fail (const rg_env *env, int rc, rg_err *e) {
  struct statvfs fs;
  if (rc == EIO && statvfs(env->path, &fs) == 0) {
    unsigned long long room = (unsigned long long)fs.f_frsize *
                              (geteuid() == 0 ? fs.f_bfree : fs.f_bavail);
    if (room < FULL_ROOM)
      return rg_fail(e, 507, "insufficient storage: commit: the file system "
                     "is full (%llu bytes free)", room);
  }
  return rg_fail_mdb(e, rc, "commit");
}

/*
** Opens the tables and checks the format version, reading the secret.  A
** database that exists is opened in a read transaction, so an open never
** waits for a writer; a new one (or one missing its tables) is set up in a
** write transaction, which creates the tables, the version and the secret
** (several processes may race to do it: the first wins, the others find
** everything there).
*/
static int init_tables (rg_env *env, int create, rg_err *e) {
  MDB_txn *txn;
  MDB_val k, v;
  int rc, i;
  if ((rc = txn_begin(env, create ? 0 : MDB_RDONLY, &txn, e)) != 0)
    return rc;
  for (i = 0; i < RG_NDB; i++) {
    rc = mdb_dbi_open(txn, dbnames[i], create ? MDB_CREATE : 0, &env->dbi[i]);
    if (rc == MDB_NOTFOUND) {
      mdb_txn_abort(txn);
      if (!create && !env->readonly) return init_tables(env, 1, e);
      return rg_fail(e, 404, "not a regolith database (table '%s' missing)",
                     dbnames[i]);
    }
    if (rc) goto fail;
  }
  k.mv_data = RG_META_VERSION;
  k.mv_size = sizeof(RG_META_VERSION) - 1;
  rc = mdb_get(txn, env->dbi[RG_DB_META], &k, &v);
  if (rc == MDB_NOTFOUND && !create && !env->readonly) {
    mdb_txn_abort(txn);
    return init_tables(env, 1, e);
  }
  if (rc == MDB_NOTFOUND && create) {
    uint8_t ver[4], secret[16];
    rg_put_u32(ver, RG_FORMAT_VERSION);
    v.mv_data = ver;
    v.mv_size = 4;
    if ((rc = mdb_put(txn, env->dbi[RG_DB_META], &k, &v, 0))) goto fail;
    if (random_bytes(secret, 16) != 0) {
      mdb_txn_abort(txn);
      return rg_fail(e, 500, "cannot read /dev/urandom");
    }
    k.mv_data = RG_META_SECRET;
    k.mv_size = sizeof(RG_META_SECRET) - 1;
    v.mv_data = secret;
    v.mv_size = 16;
    if ((rc = mdb_put(txn, env->dbi[RG_DB_META], &k, &v, 0))) goto fail;
  }
  else if (rc == MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    return rg_fail(e, 404, "not a regolith database (no format version)");
  }
  else if (rc) goto fail;
  else if (v.mv_size != 4 || rg_get_u32((const uint8_t *)v.mv_data) !=
           RG_FORMAT_VERSION) {
    mdb_txn_abort(txn);
    return rg_fail(e, 500, "database format version %u is not supported "
                   "(this build reads version %d)",
                   v.mv_size == 4 ? rg_get_u32((const uint8_t *)v.mv_data) : 0,
                   RG_FORMAT_VERSION);
  }
  k.mv_data = RG_META_SECRET;
  k.mv_size = sizeof(RG_META_SECRET) - 1;
  rc = mdb_get(txn, env->dbi[RG_DB_META], &k, &v);
  if (rc || v.mv_size != 16) {
    mdb_txn_abort(txn);
    return rg_fail(e, 500, "database secret missing");
  }
  memcpy(env->secret, v.mv_data, 16);
  /* committing (even a read transaction) keeps the table handles */
  if ((rc = mdb_txn_commit(txn))) return commit_fail(env, rc, e);
  return 0;
fail:
  mdb_txn_abort(txn);
  return rg_fail_mdb(e, rc, "opening tables");
}

/*
** Reserves the blocks of the lock file before LMDB maps it.  LMDB sizes the
** file with ftruncate, a file full of holes, and writes it through a shared
** map: on a full disk the first write to a page the file system cannot
** give is a SIGBUS, which kills the process.  Allocating the blocks first
** turns that into ENOSPC here (507).  A new file is made at least as large
** as LMDB needs for MAX_READERS (it takes a larger one as it is, with a few
** more reader slots); an existing one, maybe in use by other processes, only
** has its holes filled, never its size changed.  A read-only open makes no
** file (LMDB will).
*/
static int reserve_lock (const char *path, int readonly, rg_err *e) {
  char name[4096];
  struct stat st;
  int fd, rc = 0;
  if ((size_t)snprintf(name, sizeof(name), "%s/lock.mdb", path) >= sizeof(name))
    return 0;                        /* LMDB will say what is wrong */
  fd = open(name, O_RDWR | O_CLOEXEC | (readonly ? 0 : O_CREAT), 0644);
  if (fd < 0) return 0;
  if (fstat(fd, &st) == 0) {
    if (st.st_size == 0)
      rc = posix_fallocate(fd, 0, (off_t)MAX_READERS * 64 + 4096);
    else if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, st.st_size) != 0)
      rc = errno;
  }
  close(fd);
  if (rc == ENOSPC || rc == EDQUOT)
    return rg_fail(e, 507, "insufficient storage: cannot open '%s': %s", path,
                   strerror(rc));
  return 0;                          /* anything else: as LMDB would have */
}

int rg_env_open (const char *path, const rg_open_opts *o, rg_env **out,
                 rg_err *e) {
  struct stat st;
  rg_env *env;
  MDB_envinfo info;
  int rc, dead;
  unsigned flags;
  *out = NULL;
  if (!o->readonly && mkdir(path, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create directory '%s': %s", path,
                   strerror(errno));
  if (stat(path, &st) != 0)
    return rg_fail(e, 404, "cannot open '%s': %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return rg_fail(e, 400, "'%s' is not a directory", path);
  for (env = envs; env; env = env->next)
    if (env->dev == (unsigned long)st.st_dev &&
        env->ino == (unsigned long)st.st_ino) {
      if (env->readonly && !o->readonly)
        return rg_fail(e, 409, "'%s' is already open read-only in this "
                       "process", path);
      env->refs++;
      *out = env;
      return 0;
    }
  if ((rc = reserve_lock(path, o->readonly, e))) return rc;
  env = (rg_env *)calloc(1, sizeof(rg_env));
  if (env == NULL || (env->path = strdup(path)) == NULL) {
    free(env);
    return rg_fail(e, 500, "out of memory");
  }
  env->dev = (unsigned long)st.st_dev;
  env->ino = (unsigned long)st.st_ino;
  env->readonly = o->readonly;
  env->refs = 1;
  /* before LMDB reads the file: the log, replayed after a restart */
  if ((rc = rg_wal_open(path, o->readonly, &env->wal, e))) goto fail;
  if ((rc = mdb_env_create(&env->mdb))) goto fail_mdb;
  mdb_env_set_maxdbs(env->mdb, RG_NDB + 4);
  mdb_env_set_maxreaders(env->mdb, MAX_READERS);
  mdb_env_set_mapsize(env->mdb, o->map_size ? o->map_size : DEFAULT_MAP);
  flags = MDB_NOTLS | (o->readonly ? MDB_RDONLY : 0);
  if ((rc = mdb_env_open(env->mdb, path, flags, 0644))) goto fail_mdb;
  mdb_reader_check(env->mdb, &dead);
  mdb_env_info(env->mdb, &info);
  env->map_size = info.me_mapsize;
  if ((rc = init_tables(env, 0, e))) goto fail;
  if (env->wal && (rc = rg_wal_attach(env->wal, env->mdb, e))) goto fail;
  if ((rc = rg_tp_attach(env, e))) goto fail;
  env->next = envs;
  envs = env;
  *out = env;
  return 0;
fail_mdb:
  rc = rg_fail(e, rc == EACCES ? 403 : rc == ENOSPC || rc == EDQUOT ? 507 : 500,
               "cannot open database '%s': %s", path, mdb_strerror(rc));
fail:
  rg_wal_close(env->wal);
  if (env->rtxn) mdb_txn_abort(env->rtxn);
  if (env->mdb) mdb_env_close(env->mdb);
  free(env->path);
  free(env);
  return rc;
}

void rg_env_release (rg_env *env) {
  rg_env **p;
  if (--env->refs > 0) return;
  for (p = &envs; *p; p = &(*p)->next)
    if (*p == env) { *p = env->next; break; }
  if (env->hooks && env->hooks->release) env->hooks->release(env->hook_state);
  rg_tp_detach(env);
  if (env->rtxn) mdb_txn_abort(env->rtxn);
  if (env->wal && !env->readonly && !env->broken) {   /* the log, closed */
    MDB_txn *txn;
    rg_err e;
    if (mdb_txn_begin(env->mdb, NULL, 0, &txn) == 0) {
      rg_wal_closing(env->wal, txn, &e);
      mdb_txn_abort(txn);
    }
  }
  rg_wal_close(env->wal);
  mdb_env_close(env->mdb);
  free(env->path);
  free(env);
}

const char *rg_env_path (const rg_env *env) { return env->path; }
int rg_env_refs (const rg_env *env) { return env->refs; }
int rg_env_readonly (const rg_env *env) { return env->readonly; }
const uint8_t *rg_env_secret (const rg_env *env) { return env->secret; }
rg_scope *rg_env_scope (const rg_env *env) { return env->scope; }

void rg_env_set_hooks (rg_env *env, const rg_hooks *h, void *st) {
  env->hooks = h;
  env->hook_state = st;
}

void *rg_env_hook_state (const rg_env *env) { return env->hook_state; }
const rg_hooks *rg_env_hooks (const rg_env *env) { return env->hooks; }

void rg_env_info_get (rg_env *env, rg_env_info *out) {
  MDB_envinfo info;
  MDB_stat st;
  mdb_env_info(env->mdb, &info);
  mdb_env_stat(env->mdb, &st);
  out->map_size = info.me_mapsize;
  out->used_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
  out->page_size = st.ms_psize;
  out->readers = info.me_numreaders;
}
/* }===================================================================== */


/*
** {=====================================================================
** Read transactions
** ======================================================================
*/
int rg_read_begin (rg_env *env, MDB_txn **txn, rg_err *e) {
  int rc, tries;
  if (env->scope != NULL) {          /* read your own writes */
    *txn = env->scope->txn;
    return 0;
  }
  if (env->broken) return broken_fail(env, e);
  if (env->rtxn_live) {              /* left live by an interrupted call */
    mdb_txn_reset(env->rtxn);
    env->rtxn_live = 0;
  }
  for (tries = 0; tries < 4; tries++) {
    if (env->rtxn == NULL)
      rc = mdb_txn_begin(env->mdb, NULL, MDB_RDONLY, &env->rtxn);
    else
      rc = mdb_txn_renew(env->rtxn);
    if (rc == 0) {
      env->rtxn_live = 1;
      *txn = env->rtxn;
      return 0;
    }
    if (rc != MDB_MAP_RESIZED && env->rtxn) {
      mdb_txn_abort(env->rtxn);
      env->rtxn = NULL;
    }
    if (rc == MDB_MAP_RESIZED) {     /* another process grew the map */
      if (env->rtxn && tries > 0) {  /* give the handle up and start anew */
        mdb_txn_abort(env->rtxn);
        env->rtxn = NULL;
      }
      if ((rc = remap(env, 0, e))) return rc;
      continue;
    }
    break;
  }
  return rg_fail_mdb(e, rc, "read transaction");
}

void rg_read_end (rg_env *env) {
  if (env->scope == NULL && env->rtxn_live) {
    mdb_txn_reset(env->rtxn);
    env->rtxn_live = 0;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Scopes
** ======================================================================
*/
typedef struct tramp {
  rg_body body;
  rg_scope *s;
  void *ud;
  rg_err *e;
  int status;
} tramp;

static void tramp_call (void *arg) {
  tramp *t = (tramp *)arg;
  t->status = t->body(t->s, t->ud, t->e);
}

/* Calls the body, protected when the host gave a protect callback: 0 when
** it returned (its status in t->status), RG_RAISED when it raised. */
static int call_body (rg_protect protect, void *host, tramp *t) {
  if (protect == NULL) {
    tramp_call(t);
    return 0;
  }
  return protect(host, tramp_call, t) ? RG_RAISED : 0;
}

/* Grows the map so that at least `need` bytes stay free beyond the data. */
static int grow_map (rg_env *env, size_t need, rg_err *e) {
  MDB_envinfo info;
  MDB_stat st;
  size_t used, size;
  int rc;
  if (env->broken) return broken_fail(env, e);
  mdb_env_info(env->mdb, &info);
  mdb_env_stat(env->mdb, &st);
  used = (info.me_last_pgno + 1) * (size_t)st.ms_psize;
  size = info.me_mapsize;
  if (used + need <= size) { env->map_size = size; return 0; }
  while (used + need > size) size *= 2;
  size = (size + MAP_QUANTUM - 1) / MAP_QUANTUM * MAP_QUANTUM;
  if ((rc = remap(env, size, e))) return rc;
  env->map_size = size;
  return 0;
}

/* With a log, LMDB never flushes: the log (or a checkpoint) does. */
static void set_sync (rg_env *env, int sync) {
  mdb_env_set_flags(env->mdb, MDB_NOSYNC | MDB_NOMETASYNC, 0);
  if (env->wal) mdb_env_set_flags(env->mdb, MDB_NOSYNC, 1);
  else if (sync == RG_SYNC_LAZY) mdb_env_set_flags(env->mdb, MDB_NOMETASYNC, 1);
  else if (sync == RG_SYNC_NONE) mdb_env_set_flags(env->mdb, MDB_NOSYNC, 1);
}

/*
** Savepoints.  A call made inside a running scope that must be undoable on
** its own (a container method called by a transactional handler, a write
** whose trigger fails inside one) runs as a savepoint: while any savepoint
** is open, every write first appends the key's previous value (or its
** absence) to the scope's undo log; rolling a savepoint back replays its
** part of the log backwards.  (LMDB's nested transactions would do the
** same, but each allocates a dirty-page table of some megabytes, and the log
** costs only what the savepoint actually overwrites.)
**
** An undo record: u8 table | u8 had-a-value | u32 key length | u32 value
** length | key | value.
*/
static int undo_record (rg_scope *s, int db, const void *k, size_t kn,
                        rg_err *e) {
  MDB_val key, old;
  uint8_t head[10];
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_get(s->txn, s->env->dbi[db], &key, &old);
  if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "savepoint", e);
  head[0] = (uint8_t)db;
  head[1] = rc == 0;
  rg_put_u32(head + 2, (uint32_t)kn);
  rg_put_u32(head + 6, rc == 0 ? (uint32_t)old.mv_size : 0);
  rg_buf_add(&s->undo, head, 10);
  rg_buf_add(&s->undo, k, kn);
  if (rc == 0) rg_buf_add(&s->undo, old.mv_data, old.mv_size);
  if (s->undo.oom) {
    s->failed = 500;
    return rg_fail(e, 500, "out of memory (savepoint)");
  }
  return 0;
}

/* Undoes the writes logged after `mark`, newest first. */
static int undo_to (rg_scope *s, size_t mark, rg_err *e) {
  size_t *at = NULL, n = 0, cap = 0, i = mark;
  int rc = 0;
  while (i < s->undo.n) {            /* index the records, then go back */
    const uint8_t *r = (const uint8_t *)s->undo.p + i;
    if (n == cap) {
      size_t *a = (size_t *)realloc(at, (cap = cap ? cap * 2 : 64) *
                                    sizeof(size_t));
      if (a == NULL) { free(at); s->failed = 500; return rg_fail(e, 500, "out of memory"); }
      at = a;
    }
    at[n++] = i;
    i += 10 + rg_get_u32(r + 2) + rg_get_u32(r + 6);
  }
  while (n-- > 0 && rc == 0) {
    const uint8_t *r = (const uint8_t *)s->undo.p + at[n];
    MDB_val key, val;
    key.mv_size = rg_get_u32(r + 2);
    key.mv_data = (void *)(r + 10);
    val.mv_size = rg_get_u32(r + 6);
    val.mv_data = (void *)(r + 10 + key.mv_size);
    if (r[1]) rc = mdb_put(s->txn, s->env->dbi[r[0]], &key, &val, 0);
    else {
      rc = mdb_del(s->txn, s->env->dbi[r[0]], &key, NULL);
      if (rc == MDB_NOTFOUND) rc = 0;
    }
  }
  free(at);
  s->undo.n = mark;
  if (rc) return rg_scope_mdb(s, rc, "savepoint rollback", e);
  return 0;
}

static int run_nested (rg_protect protect, void *host, rg_env *env,
                       int savepoint, tramp *t, rg_err *e) {
  rg_scope *s = env->scope;
  size_t mark = s->undo.n;
  uint64_t lsn = s->lsn;
  uint32_t ord = s->ord, purged[16];
  int npurged = s->npurged, rc;
  if (!savepoint) {
    /* what the body raises unwinds to the outer scope's protected call */
    return t->body(s, t->ud, e);
  }
  if (s->failed) return rg_fail(e, s->failed, "the transaction has failed");
  memcpy(purged, s->purged, sizeof(purged));
  s->savepoints++;
  t->s = s;
  rc = call_body(protect, host, t);
  s->savepoints--;
  if (rc == 0 && t->status == 0 && !s->failed && !s->map_full) {
    if (s->savepoints == 0) s->undo.n = 0;   /* nothing left to undo to */
    return 0;
  }
  if (!s->map_full) {                /* (a full map reruns the whole scope) */
    rg_err ue;
    undo_to(s, mark, &ue);
    s->lsn = lsn;                    /* lsn, ordinals, purges as before */
    s->ord = ord;
    s->npurged = npurged;
    memcpy(s->purged, purged, sizeof(purged));
  }
  if (rc) return RG_RAISED;
  return t->status ? t->status : s->failed;
}

int rg_scope_run (rg_env *env, rg_protect protect, void *host, int sync,
                  int savepoint, rg_body body, void *ud, rg_err *e) {
  rg_scope s;
  tramp t;
  int rc, rerun;
  t.body = body;
  t.ud = ud;
  t.e = e;
  t.status = 0;
  if (env->readonly)
    return rg_fail(e, 403, "the database is open read-only");
  if (env->scope != NULL)
    return run_nested(protect, host, env, savepoint, &t, e);
  if (env->rtxn_live) {              /* nothing may hold the old map */
    mdb_txn_reset(env->rtxn);
    env->rtxn_live = 0;
  }
  for (rerun = 0; rerun < MAX_RERUNS; rerun++) {
    memset(&s, 0, sizeof(s));
    s.env = env;
    s.now = rg_now();
    /* room ahead of need; when it cannot be made the write may still fit,
    ** and running out gives MDB_MAP_FULL, then a growth that must succeed */
    if (grow_map(env, env->map_size / 4, e) && env->broken) return 507;
    set_sync(env, sync);
    if ((rc = txn_begin(env, 0, &s.txn, e))) return rc;
    if (env->wal && (rc = rg_wal_begin(env->wal, s.txn, sync, e))) {
      mdb_txn_abort(s.txn);
      rg_wal_end(env->wal);
      return rc;
    }
    env->scope = &s;
    t.s = &s;
    t.status = 0;
    rc = call_body(protect, host, &t);
    env->scope = NULL;
    rg_buf_free(&s.undo);
    if (rc || s.map_full || t.status != 0 || s.failed) {
      mdb_txn_abort(s.txn);
      if (env->wal) rg_wal_end(env->wal);
    }
    if (rc) return RG_RAISED;
    if (s.map_full) {
      if ((rc = grow_map(env, env->map_size, e))) return rc;
      continue;
    }
    if (t.status != 0 || s.failed) return t.status ? t.status : s.failed;
    rc = mdb_txn_commit(s.txn);
    if (env->wal) {
      int st = rc == 0 ? rg_wal_durable(env->wal, e) : 0;
      rg_wal_end(env->wal);
      if (st) return st;
    }
    if (rc == MDB_MAP_FULL) {
      if ((rc = grow_map(env, env->map_size, e))) return rc;
      continue;
    }
    if (rc) return commit_fail(env, rc, e);
    return 0;
  }
  return rg_fail(e, 507, "insufficient storage: the map cannot grow enough");
}

/*
** Writes.  Every change the core makes inside a scope goes through these,
** so that a storage failure always marks the scope (it can then only
** abort; MDB_MAP_FULL makes it grow the map and run again).
*/
int rg_put (rg_scope *s, int db, const void *k, size_t kn, const void *v,
            size_t vn, rg_err *e) {
  MDB_val key, val;
  int rc;
  if (s->savepoints && (rc = undo_record(s, db, k, kn, e))) return rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  val.mv_data = (void *)v;
  val.mv_size = vn;
  if ((rc = mdb_put(s->txn, s->env->dbi[db], &key, &val, 0)))
    return rg_scope_mdb(s, rc, "write", e);
  return 0;
}

void *rg_reserve (rg_scope *s, int db, const void *k, size_t kn, size_t vn,
                  rg_err *e) {
  MDB_val key, val;
  int rc;
  if (s->savepoints && undo_record(s, db, k, kn, e)) return NULL;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  val.mv_size = vn;
  if ((rc = mdb_put(s->txn, s->env->dbi[db], &key, &val, MDB_RESERVE))) {
    rg_scope_mdb(s, rc, "write", e);
    return NULL;
  }
  return val.mv_data;
}

int rg_del (rg_scope *s, int db, const void *k, size_t kn, int *gone,
            rg_err *e) {
  MDB_val key;
  int rc;
  if (s->savepoints && (rc = undo_record(s, db, k, kn, e))) return rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_del(s->txn, s->env->dbi[db], &key, NULL);
  if (gone) *gone = rc == 0;
  if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "delete", e);
  return 0;
}

int rg_cursor_del (rg_scope *s, int db, MDB_cursor *cur, rg_err *e) {
  MDB_val k, v;
  int rc;
  if (s->savepoints) {
    if ((rc = mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT)))
      return rg_scope_mdb(s, rc, "delete", e);
    if ((rc = undo_record(s, db, k.mv_data, k.mv_size, e))) return rc;
  }
  if ((rc = mdb_cursor_del(cur, 0))) return rg_scope_mdb(s, rc, "delete", e);
  return 0;
}

int rg_del_prefix (rg_scope *s, int db, const void *prefix, size_t pn,
                   uint64_t max, uint64_t *count, rg_err *e) {
  MDB_cursor *cur;
  MDB_val k, v;
  int rc;
  *count = 0;
  if ((rc = mdb_cursor_open(s->txn, s->env->dbi[db], &cur)))
    return rg_scope_mdb(s, rc, "delete", e);
  while (*count < max) {
    k.mv_data = (void *)prefix;
    k.mv_size = pn;
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (rc || k.mv_size < pn || memcmp(k.mv_data, prefix, pn) != 0) break;
    if ((rc = rg_cursor_del(s, db, cur, e))) {
      mdb_cursor_close(cur);
      return rc;
    }
    (*count)++;
  }
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "delete", e);
  return 0;
}

int rg_scope_mdb (rg_scope *s, int rc, const char *what, rg_err *e) {
  if (rc == MDB_MAP_FULL) {
    s->map_full = 1;
    s->failed = 507;
    return rg_fail(e, 507, "map full (the write will be retried)");
  }
  s->failed = rg_fail_mdb(e, rc, what);
  return s->failed;
}

uint64_t rg_scope_lsn (rg_scope *s, rg_err *e) {
  if (s->lsn == 0) {
    MDB_val k, v;
    uint8_t buf[8];
    uint64_t last = 0;
    int rc;
    k.mv_data = RG_META_LSN;
    k.mv_size = sizeof(RG_META_LSN) - 1;
    rc = mdb_get(s->txn, s->env->dbi[RG_DB_META], &k, &v);
    if (rc == 0 && v.mv_size == 8)
      last = rg_get_u64((const uint8_t *)v.mv_data);
    else if (rc != MDB_NOTFOUND) { rg_scope_mdb(s, rc, "lsn", e); return 0; }
    rg_put_u64(buf, last + 1);
    if (rg_put(s, RG_DB_META, RG_META_LSN, sizeof(RG_META_LSN) - 1, buf, 8, e))
      return 0;
    s->lsn = last + 1;
  }
  return s->lsn;
}
/* }===================================================================== */


int rg_env_backup (rg_env *env, const char *path, rg_err *e) {
  struct stat st;
  char data[4096];
  int rc;
  if (env->broken) return broken_fail(env, e);
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create '%s': %s", path, strerror(errno));
  snprintf(data, sizeof(data), "%s/data.mdb", path);
  if (stat(data, &st) == 0)
    return rg_fail(e, 409, "'%s' already holds a database", path);
  if ((rc = mdb_env_copy2(env->mdb, path, MDB_CP_COMPACT))) {
    unlink(data);                    /* a part of a copy is no backup */
    return rg_fail_mdb(e, rc, "backup");
  }
  return 0;
}
