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
#include "store/pagewalk.h"
#include "store/preflight.h"
#include "store/hooks.h"
#include "store/upgrade.h"
#include "store/throughput.h"
#include "store/wal.h"

#define DEFAULT_MAP   (64u << 20)
#define MAP_QUANTUM   (1u << 20)
#define MAX_READERS   1024
#define MAX_RERUNS    16
#define FULL_ROOM     (1u << 20)     /* less free than this: the disk is full */

static const char *const dbnames[RG_NDB] = {
  "meta", "items", "index", "unique", "ttl", "feed", "latest", "parts", "refs",
  "vector"
};

/* Tables holding sorted duplicates (one key, many fixed-size values). */
static unsigned db_flags (int db) {
  return db == RG_DB_INDEX || db == RG_DB_LATEST ? MDB_DUPSORT | MDB_DUPFIXED
                                                 : 0;
}

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
  if (rc == MDB_CORRUPTED && rg_guard_why && rg_guard_pgno == 0)
    return rg_fail(e, 500, "the database is damaged: %s: %s; `regolith "
                   "verify` walks the file", what, rg_guard_why);
  if (rc == MDB_CORRUPTED && rg_guard_why)  /* the guard's (guard.h) */
    return rg_fail(e, 500, "the database is damaged: %s: page %llu of "
                   "data.mdb does not check out (%s); `regolith verify` "
                   "walks the file", what, (unsigned long long)rg_guard_pgno,
                   rg_guard_why);
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
  rg_guard_remap(env->guard);
  return 0;
}

static int txn_begin (rg_env *env, unsigned flags, MDB_txn **txn,
                      rg_err *e);

/* Stamps the checksum of every page in use that lacks one or holds a
** stale one, with the writer's lock held (no page changes meanwhile), and
** says so in regolith.id. */
static int stamp_all (rg_env *env, rg_err *e) {
  MDB_txn *txn;
  uint64_t n, at;
  int rc, fd;
  if (mdb_env_get_fd(env->mdb, &fd) != 0) return 0;
  if ((rc = txn_begin(env, 0, &txn, e))) return rc;
  at = (uint64_t)mdb_txn_id(txn) - 1;  /* the last one committed */
  rc = rg_pages_stamp(fd, &n, e);
  mdb_txn_abort(txn);
  if (rc == 0) {                     /* else the next open stamps again */
    rg_err ignored;
    rg_preflight_stamped(env->path, env->secret, at, &ignored);
  }
  return rc;
}

/* LMDB's assert callback: a check of its own failed on what it read
** (guard.h). */
static void lmdb_assert (MDB_env *mdb, const char *msg) {
  rg_env *env;
  for (env = envs; env; env = env->next)
    if (env->mdb == mdb) env->damaged = 1;
  rg_guard_fail(msg);
}

/* Guards the map LMDB made (guard.h), once a read transaction showed
** that liblmdb lays its transactions out as the guard reads them. */
static rg_guard *guard_map (MDB_env *mdb, int sums) {
  static int checked;
  MDB_stat st;
  MDB_txn *txn;
  int fd;
  if (!checked && mdb_txn_begin(mdb, NULL, MDB_RDONLY, &txn) == 0) {
    checked = 1;
    rg_guard_layout(txn, (uint64_t)mdb_txn_id(txn), 2);
    mdb_txn_abort(txn);
  }
  if (mdb_env_get_fd(mdb, &fd) != 0) return NULL;
  mdb_env_stat(mdb, &st);
  return rg_guard_open(fd, st.ms_psize, sums);
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
** everything there).  The version is read before any other table is
** opened: a format 1 database has tables this format opens with other
** flags, and gets the error that names the upgrade.
*/
static int init_tables (rg_env *env, int create, rg_err *e) {
  MDB_txn *txn;
  MDB_val k, v;
  int rc, i;
  if ((rc = txn_begin(env, create ? 0 : MDB_RDONLY, &txn, e)) != 0)
    return rc;
  rc = mdb_dbi_open(txn, dbnames[RG_DB_META], create ? MDB_CREATE : 0,
                    &env->dbi[RG_DB_META]);
  if (rc == MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    if (!create && !env->readonly) return init_tables(env, 1, e);
    return rg_fail(e, 404, "not a regolith database (table 'meta' missing)");
  }
  if (rc) goto fail;
  k.mv_data = RG_META_VERSION;
  k.mv_size = sizeof(RG_META_VERSION) - 1;
  rc = mdb_get(txn, env->dbi[RG_DB_META], &k, &v);
  if (rc == 0 && (v.mv_size != 4 || rg_get_u32((const uint8_t *)v.mv_data) !=
                  RG_FORMAT_VERSION)) {
    unsigned ver = v.mv_size == 4 ? rg_get_u32((const uint8_t *)v.mv_data) : 0;
    mdb_txn_abort(txn);
    if (ver == 1)
      return rg_fail(e, 426, "'%s' is a database of format 1; this build "
                     "reads format %d: upgrade it first with "
                     "regolith.upgrade(path) or `regolith upgrade DIR` "
                     "(docs/api.md, \"Storage format\")", env->path,
                     RG_FORMAT_VERSION);
    return rg_fail(e, 500, "database format version %u is not supported "
                   "(this build reads version %d)", ver, RG_FORMAT_VERSION);
  }
  if (rc && rc != MDB_NOTFOUND) goto fail;
  if (rc == MDB_NOTFOUND && !create) {
    mdb_txn_abort(txn);
    if (!env->readonly) return init_tables(env, 1, e);
    return rg_fail(e, 404, "not a regolith database (no format version)");
  }
  for (i = 0; i < RG_NDB; i++) {
    if (i == RG_DB_META) continue;
    rc = mdb_dbi_open(txn, dbnames[i], db_flags(i) | (create ? MDB_CREATE : 0),
                      &env->dbi[i]);
    if (rc == MDB_NOTFOUND && env->readonly && i == RG_DB_VECTOR) {
      env->dbi[i] = RG_DBI_NONE;     /* made before vector indexes: none */
      continue;
    }
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
  if (rc == MDB_NOTFOUND) {
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
  else if (rc) goto fail;
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
  int rc, dead, sums;
  unsigned flags;
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
  /* before LMDB reads the file: its checks (preflight.h), and the log,
  ** replayed after a restart */
  if ((rc = rg_preflight_log(path, o->readonly, e))) goto fail;
  if ((rc = rg_wal_open(path, o->readonly, &env->wal, e))) goto fail;
  if ((rc = rg_preflight_map(path, e))) goto fail;
  if ((rc = mdb_env_create(&env->mdb))) goto fail_mdb;
  mdb_env_set_assert(env->mdb, lmdb_assert);
  mdb_env_set_maxdbs(env->mdb, RG_NDB + 4);
  mdb_env_set_maxreaders(env->mdb, MAX_READERS);
  mdb_env_set_mapsize(env->mdb, o->map_size ? o->map_size : DEFAULT_MAP);
  flags = MDB_NOTLS | (o->readonly ? MDB_RDONLY : 0);
  if ((rc = mdb_env_open(env->mdb, path, flags, 0644))) goto fail_mdb;
  env->guard = guard_map(env->mdb, 0);
  mdb_reader_check(env->mdb, &dead);
  mdb_env_info(env->mdb, &info);
  env->map_size = info.me_mapsize;
  if ((rc = init_tables(env, 0, e))) goto fail;
  mdb_env_info(env->mdb, &info);
  if ((rc = rg_preflight_identity(path, env->secret,
                                  (uint64_t)info.me_last_txnid, o->readonly,
                                  &sums, e)))
    goto fail;
  /* the pages' checksums: stamped again where something else wrote
  ** (pagecheck.h), then checked; only a process whose writes stamp them
  ** (the log's hooks are in: env->wal) can trust its own */
  if (!sums && !o->readonly && env->wal && (rc = stamp_all(env, e)))
    goto fail;
  env->sums = env->wal && (sums || !o->readonly);
  rg_guard_sums(env->guard, env->sums);
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
  rg_guard_close(env->guard);
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
      /* every commit of this process stamped its pages: as far as the
      ** file goes now, they all carry their checksums */
      rg_preflight_stamped(env->path, env->secret,
                           (uint64_t)mdb_txn_id(txn) - 1, &e);
      mdb_txn_abort(txn);
    }
  }
  rg_wal_close(env->wal);
  rg_pcache_free(env->pcache);
  rg_guard_close(env->guard);
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

const char *rg_env_table_name (int db) { return dbnames[db]; }

/*
** The pages of each table.  LMDB counts a table's own tree; the nested
** trees holding a key's duplicates once they outgrow the key's page are
** counted here: each MDB_NEXT_MULTIPLE step over a DUPFIXED key reads one
** leaf page of its nested tree (one step over a small set kept inside the
** node reads none), and a nested tree of L > 1 leaves has about
** L / 150 branch pages above them (fanout of a small fixed key).  The
** free pages are those the free list holds.
*/
static uint64_t nested_pages (MDB_cursor *cur, size_t dupsize) {
  MDB_val k, d;
  uint64_t pages = 0;
  int rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT_NODUP)) {
    size_t count = 0;
    uint64_t leaves = 0, seen = 0;
    if (mdb_cursor_count(cur, &count) || count * dupsize < 1024) continue;
    rc = mdb_cursor_get(cur, &k, &d, MDB_GET_MULTIPLE);
    while (rc == 0) {
      leaves++;
      seen += d.mv_size / dupsize;
      rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT_MULTIPLE);
    }
    if (leaves > 1 || count * dupsize > 2000)
      pages += leaves + (leaves > 1 ? (leaves + 149) / 150 : 0);
    (void)seen;
  }
  return pages;
}

int rg_env_tables (rg_env *env, rg_table_stat out[], uint64_t *free_bytes,
                   rg_err *e) {
  MDB_txn *txn;
  MDB_cursor *cur;
  MDB_stat st;
  MDB_val k, d;
  int i, rc;
  uint64_t psize;
  *free_bytes = 0;
  if ((rc = rg_read_begin(env, &txn, e))) return rc;
  mdb_env_stat(env->mdb, &st);
  psize = st.ms_psize;
  for (i = 0; i < RG_NDB && rc == 0; i++) {
    if (env->dbi[i] == RG_DBI_NONE) continue;     /* a table not there */
    if ((rc = mdb_stat(txn, env->dbi[i], &st))) break;
    out[i].entries = st.ms_entries;
    out[i].bytes = psize * (st.ms_branch_pages + st.ms_leaf_pages +
                            st.ms_overflow_pages);
    if (db_flags(i) && (rc = mdb_cursor_open(txn, env->dbi[i], &cur)) == 0) {
      out[i].bytes += psize * nested_pages(cur, i == RG_DB_LATEST ?
                                           RG_LATEST_DUP : RG_REF_SIZE);
      mdb_cursor_close(cur);
    }
  }
  if (rc == 0 && (rc = mdb_cursor_open(txn, 0, &cur)) == 0) {   /* free list */
    int r = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
    for (; r == 0; r = mdb_cursor_get(cur, &k, &d, MDB_NEXT))
      if (d.mv_size >= sizeof(size_t))
        *free_bytes += psize * (uint64_t)*(const size_t *)d.mv_data;
    mdb_cursor_close(cur);
  }
  rg_read_end(env);
  return rc ? rg_fail_mdb(e, rc, "table statistics") : 0;
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
** An undo record: u8 table | u8 kind | u32 key length | u32 value
** length | key | value, where kind is UNDO_ABSENT (the key had no value:
** delete it), UNDO_VALUE (put the value back), and for the tables of
** sorted duplicates UNDO_DUP_ADDED (delete that duplicate) or
** UNDO_DUP_GONE (put it back).
*/
enum { UNDO_ABSENT, UNDO_VALUE, UNDO_DUP_ADDED, UNDO_DUP_GONE };

static int undo_add (rg_scope *s, int db, int kind, const void *k, size_t kn,
                     const void *v, size_t vn, rg_err *e) {
  uint8_t head[10];
  head[0] = (uint8_t)db;
  head[1] = (uint8_t)kind;
  rg_put_u32(head + 2, (uint32_t)kn);
  rg_put_u32(head + 6, (uint32_t)vn);
  rg_buf_add(&s->undo, head, 10);
  rg_buf_add(&s->undo, k, kn);
  if (vn) rg_buf_add(&s->undo, v, vn);
  if (s->undo.oom) {
    s->failed = 500;
    return rg_fail(e, 500, "out of memory (savepoint)");
  }
  return 0;
}

static int undo_record (rg_scope *s, int db, const void *k, size_t kn,
                        rg_err *e) {
  MDB_val key, old;
  int rc;
  key.mv_data = (void *)k;
  key.mv_size = kn;
  rc = mdb_get(s->txn, s->env->dbi[db], &key, &old);
  if (rc && rc != MDB_NOTFOUND) return rg_scope_mdb(s, rc, "savepoint", e);
  if (rc == 0) return undo_add(s, db, UNDO_VALUE, k, kn, old.mv_data,
                               old.mv_size, e);
  return undo_add(s, db, UNDO_ABSENT, k, kn, NULL, 0, e);
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
    MDB_dbi dbi = s->env->dbi[r[0]];
    MDB_val key, val;
    key.mv_size = rg_get_u32(r + 2);
    key.mv_data = (void *)(r + 10);
    val.mv_size = rg_get_u32(r + 6);
    val.mv_data = (void *)(r + 10 + key.mv_size);
    switch (r[1]) {
      case UNDO_VALUE: case UNDO_DUP_GONE:
        rc = mdb_put(s->txn, dbi, &key, &val, 0);
        break;
      case UNDO_ABSENT: case UNDO_DUP_ADDED:
        rc = mdb_del(s->txn, dbi, &key, r[1] == UNDO_ABSENT ? NULL : &val);
        if (rc == MDB_NOTFOUND) rc = 0;
        break;
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
  uint32_t ord = s->ord, seq = s->seq, purged[16];
  int seq_loaded = s->seq_loaded;
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
    s->seq = seq;
    s->seq_loaded = seq_loaded;
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
  /* LMDB's state after a call it could not finish is not to be written
  ** from again, nor is a tree found damaged to be written into */
  if (env->damaged || rg_guard_met(env->guard))
    return rg_fail(e, 500, "the database '%s' is damaged: writes are refused "
                   "until it is opened again (`regolith verify` walks the "
                   "file)", env->path);
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
    if (!s.map_full) {
      if (t.status != 0 || s.failed) return t.status ? t.status : s.failed;
      rc = mdb_txn_commit(s.txn);
      if (env->wal) {
        int st = rc == 0 ? rg_wal_durable(env->wal, e) : 0;
        rg_wal_end(env->wal);
        if (st) return st;
      }
      if (rc != MDB_MAP_FULL) return rc ? commit_fail(env, rc, e) : 0;
    }
    if ((rc = grow_map(env, env->map_size, e)) == 0) continue;
    return rc;
  }
  return rg_fail(e, 507, "insufficient storage: the map cannot grow enough");
}

/*
** Writes.  Every change the core makes inside a scope goes through these,
** so that a storage failure always marks the scope (it can then only
** abort; MDB_MAP_FULL makes it grow the map and run again).
*/
/* Key and value as LMDB takes them. */
static void kv (MDB_val *key, MDB_val *val, const void *k, size_t kn,
                const void *v, size_t vn) {
  key->mv_data = (void *)k;
  key->mv_size = kn;
  val->mv_data = (void *)v;
  val->mv_size = vn;
}

/* What a write of key and value adds to the memory its transaction holds
** until the commit (LMDB's dirty pages): a value too big to share a leaf
** page is given pages of its own, which LMDB never spills before the
** commit (it bounds its dirty pages by their count, not their size); any
** other write makes its leaf page dirty (4 KiB) unless an earlier write
** of the transaction did: writes in key order share pages, writes spread
** over a large table do not, so each counts as at least a quarter page.
** Deleting counts as writing the key. */
static uint64_t rg_dirty_cost (size_t kn, size_t vn) {
  const size_t page = 4096, nodemax = 2038;     /* LMDB 0.9, 4 KiB pages */
  size_t n = kn + vn + 16;
  if (kn + vn + 8 > nodemax) return (vn + 16 + page - 1) / page * page + kn;
  return n < page / 4 ? page / 4 : n;
}

/* mdb_put, then again without the `retry` flags when they made it give
** MDB_KEYEXIST (MDB_APPEND, MDB_APPENDDUP: the key was not past the end). */
static int put_retry (rg_scope *s, int db, const void *k, size_t kn,
                      const void *v, size_t vn, unsigned flags,
                      unsigned retry) {
  MDB_val key, val;
  int rc;
  kv(&key, &val, k, kn, v, vn);
  rc = mdb_put(s->txn, s->env->dbi[db], &key, &val, flags);
  if (rc == MDB_KEYEXIST && (flags & retry)) {
    kv(&key, &val, k, kn, v, vn);
    rc = mdb_put(s->txn, s->env->dbi[db], &key, &val, flags & ~retry);
  }
  return rc;
}

int rg_put (rg_scope *s, int db, const void *k, size_t kn, const void *v,
            size_t vn, rg_err *e) {
  return rg_put_flags(s, db, k, kn, v, vn, 0, e);
}

int rg_put_flags (rg_scope *s, int db, const void *k, size_t kn,
                  const void *v, size_t vn, unsigned flags, rg_err *e) {
  int rc;
  if (s->savepoints && (rc = undo_record(s, db, k, kn, e))) return rc;
  s->dirty += rg_dirty_cost(kn, vn);
  rc = put_retry(s, db, k, kn, v, vn, flags, MDB_APPEND);
  if (rc == MDB_KEYEXIST) return RG_EXISTS;
  if (rc) return rg_scope_mdb(s, rc, "write", e);
  return 0;
}

int rg_dput (rg_scope *s, int db, const void *k, size_t kn, const void *v,
             size_t vn, int append, rg_err *e) {
  int rc = put_retry(s, db, k, kn, v, vn,
                     MDB_NODUPDATA | (append ? MDB_APPENDDUP : 0),
                     MDB_APPENDDUP);
  s->dirty += rg_dirty_cost(kn, vn);
  if (rc == MDB_KEYEXIST) return 0;      /* there already */
  if (rc) return rg_scope_mdb(s, rc, "write", e);
  if (s->savepoints) return undo_add(s, db, UNDO_DUP_ADDED, k, kn, v, vn, e);
  return 0;
}

int rg_ddel (rg_scope *s, int db, const void *k, size_t kn, const void *v,
             size_t vn, int *gone, rg_err *e) {
  MDB_val key, val;
  int rc;
  kv(&key, &val, k, kn, v, vn);
  s->dirty += rg_dirty_cost(kn, 0);
  rc = mdb_del(s->txn, s->env->dbi[db], &key, &val);
  if (gone) *gone = rc == 0;
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rg_scope_mdb(s, rc, "delete", e);
  if (s->savepoints) return undo_add(s, db, UNDO_DUP_GONE, k, kn, v, vn, e);
  return 0;
}

void *rg_reserve (rg_scope *s, int db, const void *k, size_t kn, size_t vn,
                  rg_err *e) {
  MDB_val key, val;
  int rc;
  if (s->savepoints && undo_record(s, db, k, kn, e)) return NULL;
  s->dirty += rg_dirty_cost(kn, vn);
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
  s->dirty += rg_dirty_cost(kn, 0);
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
    rc = db_flags(db) ? undo_add(s, db, UNDO_DUP_GONE, k.mv_data, k.mv_size,
                                 v.mv_data, v.mv_size, e)
                      : undo_record(s, db, k.mv_data, k.mv_size, e);
    if (rc) return rc;
  }
  s->dirty += rg_dirty_cost(0, 0);
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

uint32_t rg_scope_seq (rg_scope *s, rg_err *e) {
  uint8_t buf[4];
  if (!s->seq_loaded) {
    MDB_val k, v;
    int rc;
    k.mv_data = RG_META_SEQ;
    k.mv_size = sizeof(RG_META_SEQ) - 1;
    rc = mdb_get(s->txn, s->env->dbi[RG_DB_META], &k, &v);
    if (rc == 0 && v.mv_size == 4) s->seq = rg_get_u32((const uint8_t *)v.mv_data);
    else if (rc != MDB_NOTFOUND) { rg_scope_mdb(s, rc, "seq", e); return 0; }
    else s->seq = 0;
    s->seq_loaded = 1;
  }
  if (++s->seq == 0) s->seq = 1;     /* wrapped: 0 names no item */
  rg_put_u32(buf, s->seq);
  if (rg_put(s, RG_DB_META, RG_META_SEQ, sizeof(RG_META_SEQ) - 1, buf, 4, e))
    return 0;
  return s->seq;
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


/* A copy's destination: a directory (made when missing) holding no
** database; data gets "<path>/data.mdb". */
static int copy_dest (rg_env *env, const char *path, char *data, size_t n,
                      rg_err *e) {
  struct stat st;
  if (env->broken) return broken_fail(env, e);
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create '%s': %s", path, strerror(errno));
  snprintf(data, n, "%s/data.mdb", path);
  if (stat(data, &st) == 0)
    return rg_fail(e, 409, "'%s' already holds a database", path);
  return 0;
}

int rg_sync_dir (const char *path, rg_err *e) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return rg_fail(e, 500, "storage failure: flushing '%s': %s", path,
                   strerror(err));
  }
  close(fd);
  return 0;
}

int rg_env_backup (rg_env *env, const char *path, rg_err *e) {
  char data[4096];
  uint64_t stamped;
  int rc, fd;
  if ((rc = copy_dest(env, path, data, sizeof(data), e))) return rc;
  /* a log left there belongs to no file of the directory (wal.h) */
  if ((rc = rg_wal_forget(path, e))) return rc;
  if ((rc = mdb_env_copy2(env->mdb, path, MDB_CP_COMPACT))) {
    unlink(data);                    /* a part of a copy is no backup */
    return rg_fail_mdb(e, rc, "backup");
  }
  if ((fd = open(data, O_RDWR | O_CLOEXEC)) < 0 || fsync(fd) != 0) {
    rc = errno;
    if (fd >= 0) close(fd);
    unlink(data);
    return rg_fail(e, 500, "storage failure: flushing the backup: %s",
                   strerror(rc));
  }
  /* the copy numbers its pages anew: their checksums, made anew too */
  if ((rc = rg_pages_stamp(fd, &stamped, e))) {
    close(fd);
    unlink(data);
    return rc;
  }
  close(fd);
  return rg_sync_dir(path, e);
}


/*
** {=====================================================================
** Compaction: a repacked copy
** ======================================================================
**
** rg_env_backup copies the pages in use; rg_env_compact rewrites every
** table of one read snapshot into a new environment in key order,
** appending, so that every page is full (LMDB's pages split in the middle
** and stay 50-70 % full when keys come in any other order).  The copy is
** made in "<dest>/.compact" and renamed to "<dest>/data.mdb" only once it
** is complete and flushed, so a crash never leaves a part of a copy that
** could be taken for a database.
*/
#define COMPACT_CHUNK 100000     /* entries per transaction of the copy */

static int compact_table (MDB_txn *src, MDB_env *dst, MDB_dbi sdbi,
                          const char *name, unsigned flags,
                          uint64_t *entries) {
  MDB_cursor *sc = NULL, *dc = NULL;
  MDB_txn *dtxn = NULL;
  MDB_dbi ddbi;
  MDB_val k, v, pk;
  uint8_t prev[RG_MAX_KEY];
  uint64_t n = 0;
  int rc, first = 1;
  if ((rc = mdb_cursor_open(src, sdbi, &sc))) return rc;
  if ((rc = mdb_txn_begin(dst, NULL, 0, &dtxn)) ||
      (rc = mdb_dbi_open(dtxn, name, flags | MDB_CREATE, &ddbi)) ||
      (rc = mdb_cursor_open(dtxn, ddbi, &dc)))
    goto done;
  pk.mv_data = prev;
  pk.mv_size = 0;
  rc = mdb_cursor_get(sc, &k, &v, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(sc, &k, &v, MDB_NEXT)) {
    int same = !first && (flags & MDB_DUPSORT) && k.mv_size == pk.mv_size &&
               memcmp(k.mv_data, prev, k.mv_size) == 0;
    if ((rc = mdb_cursor_put(dc, &k, &v, same ? MDB_APPENDDUP : MDB_APPEND)))
      goto done;
    if (k.mv_size <= sizeof(prev)) {
      memcpy(prev, k.mv_data, k.mv_size);
      pk.mv_size = k.mv_size;
    }
    first = 0;
    if (++n % COMPACT_CHUNK == 0) {  /* bound the dirty pages */
      mdb_cursor_close(dc);
      dc = NULL;
      if ((rc = mdb_txn_commit(dtxn))) { dtxn = NULL; goto done; }
      dtxn = NULL;
      if ((rc = mdb_txn_begin(dst, NULL, 0, &dtxn)) ||
          (rc = mdb_cursor_open(dtxn, ddbi, &dc)))
        goto done;
    }
  }
  if (rc == MDB_NOTFOUND) rc = 0;
done:
  if (dc) mdb_cursor_close(dc);
  if (rc == 0 && dtxn) { rc = mdb_txn_commit(dtxn); dtxn = NULL; }
  if (dtxn) mdb_txn_abort(dtxn);
  mdb_cursor_close(sc);
  *entries += n;
  return rc;
}

int rg_env_compact (rg_env *env, const char *path, uint64_t *bytes,
                    rg_err *e) {
  char tmp[4096], data[4096], from[4096];
  MDB_env *dst = NULL;
  MDB_txn *src = NULL;
  MDB_envinfo info;
  MDB_stat ms;
  uint64_t entries = 0;
  int rc, i;
  *bytes = 0;
  if ((rc = copy_dest(env, path, data, sizeof(data), e))) return rc;
  snprintf(tmp, sizeof(tmp), "%s/.compact", path);
  snprintf(from, sizeof(from), "%s/.compact/data.mdb", path);
  unlink(from);                      /* what an interrupted copy left */
  snprintf(data, sizeof(data), "%s/.compact/lock.mdb", path);
  unlink(data);
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return rg_fail(e, 500, "cannot create '%s': %s", tmp, strerror(errno));
  mdb_env_info(env->mdb, &info);
  mdb_env_stat(env->mdb, &ms);
  if ((rc = mdb_env_create(&dst))) goto fail;
  mdb_env_set_maxdbs(dst, RG_NDB + 4);
  /* the copy is no larger than the pages in use */
  mdb_env_set_mapsize(dst, (info.me_last_pgno + 64) * (size_t)ms.ms_psize +
                           (64u << 20));
  if ((rc = mdb_env_open(dst, tmp, MDB_NOSYNC, 0644))) goto fail;
  if ((rc = mdb_txn_begin(env->mdb, NULL, MDB_RDONLY, &src))) goto fail;
  for (i = 0; i < RG_NDB && rc == 0; i++)
    if (env->dbi[i] != RG_DBI_NONE)
      rc = compact_table(src, dst, env->dbi[i], dbnames[i], db_flags(i),
                         &entries);
  mdb_txn_abort(src);
  src = NULL;
  if (rc) goto fail;
  if ((rc = mdb_env_sync(dst, 1))) goto fail;
  mdb_env_info(dst, &info);
  *bytes = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
  mdb_env_close(dst);
  dst = NULL;
  {                                  /* the copy's pages, checksummed */
    uint64_t stamped;
    int fd = open(from, O_RDWR | O_CLOEXEC);
    rc = fd < 0 ? rg_fail(e, 500, "cannot open '%s': %s", from,
                          strerror(errno))
                : rg_pages_stamp(fd, &stamped, e);
    if (fd >= 0) close(fd);
    if (rc) { unlink(from); return rc; }
  }
  /* a log left in the directory describes no file that is there: it must
     never be replayed over the copy (wal.h) */
  if ((rc = rg_wal_forget(path, e))) {
    unlink(from);
    return rc;
  }
  snprintf(data, sizeof(data), "%s/data.mdb", path);
  if (rename(from, data) != 0) {
    rc = errno;
    unlink(from);
    return rg_fail(e, 500, "cannot move the copy into '%s': %s", path,
                   strerror(rc));
  }
  snprintf(data, sizeof(data), "%s/.compact/lock.mdb", path);
  unlink(data);
  rmdir(tmp);
  return rg_sync_dir(path, e);     /* the name, flushed */
fail:
  if (src) mdb_txn_abort(src);
  if (dst) mdb_env_close(dst);
  unlink(from);
  snprintf(data, sizeof(data), "%s/.compact/lock.mdb", path);
  unlink(data);
  rmdir(tmp);
  return rg_fail_mdb(e, rc, "compact");
}
/* }===================================================================== */
