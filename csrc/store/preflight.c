/*
** preflight.c: what opening a database checks before LMDB maps its data
** file (preflight.h says what and why; pages.h the format it reads).
*/

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/env.h"
#include "store/pages.h"
#include "store/pagewalk.h"
#include "store/preflight.h"
#include "store/wal.h"

#define MIN_PSIZE 512
#define MAX_PSIZE 65536
#define ID_MAGIC  0x3130444947524752ull  /* "RGRGID01" */

/*
** regolith.id: magic u64 | hash of the secret u64 | the transaction up to
** which every page carries its checksum u64 | hash of the three u64 (the
** machine's byte order, as the data file).  Returns 0 (and *h, *through),
** 1 when there is none, -1 when it is there but does not check out.
*/
static int id_read (const char *path, uint64_t *h, uint64_t *through) {
  char name[4096];
  uint64_t w[4];
  ssize_t got;
  int fd;
  snprintf(name, sizeof(name), "%s/regolith.id", path);
  if ((fd = open(name, O_RDONLY | O_CLOEXEC)) < 0) return errno == ENOENT;
  got = read(fd, w, sizeof(w));
  close(fd);
  if (got != (ssize_t)sizeof(w) || w[0] != ID_MAGIC ||
      w[3] != rg_hash(w, 24))
    return -1;
  *h = w[1];
  *through = w[2];
  return 0;
}

/* Writes regolith.id whole (a rename); flushed when `flush`. */
static int id_write (const char *path, uint64_t h, uint64_t through,
                     int flush, rg_err *e) {
  char name[4096], tmp[4112];
  uint64_t w[4];
  int fd, ok;
  w[0] = ID_MAGIC;
  w[1] = h;
  w[2] = through;
  w[3] = rg_hash(w, 24);
  snprintf(name, sizeof(name), "%s/regolith.id", path);
  snprintf(tmp, sizeof(tmp), "%s.%d", name, (int)getpid());
  if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
    return rg_fail(e, 500, "cannot write '%s': %s", tmp, strerror(errno));
  ok = write(fd, w, sizeof(w)) == (ssize_t)sizeof(w) && (!flush || fsync(fd) == 0);
  close(fd);
  if (!ok || rename(tmp, name) != 0) {
    int err = errno;
    unlink(tmp);
    return rg_fail(e, rg_room_status(err),
                   "cannot write '%s': %s", name, strerror(err));
  }
  return flush ? rg_sync_dir(path, e) : 0;
}

/* One meta page at `off` (psize bytes are read; its page size is what its
** FREE tree's pad says). */
static void meta_at (int fd, uint64_t off, rg_meta *m) {
  uint8_t b[RG_PG_HDR + RG_META_LEN];
  const uint8_t *mm = b + RG_PG_HDR;
  int i;
  memset(m, 0, sizeof(*m));
  if (pread(fd, b, sizeof(b), (off_t)off) != (ssize_t)sizeof(b)) return;
  if (!(rg_le16(b + RG_PG_FLAGS) & RG_PG_META) ||
      rg_le32(mm + RG_META_MAGIC) != RG_MDB_MAGIC ||
      rg_le32(mm + RG_META_VERSION) != RG_MDB_VERSION)
    return;
  m->psize = rg_le32(mm + RG_META_DBS + RG_DB_PAD);
  m->txnid = rg_le64(mm + RG_META_TXNID);
  m->last_pg = rg_le64(mm + RG_META_LASTPG);
  for (i = 0; i < 2; i++) {
    const uint8_t *db = mm + RG_META_DBS + i * RG_META_DB;
    m->root[i] = rg_le64(db + RG_DB_ROOT);
    m->depth[i] = rg_le16(db + RG_DB_DEPTH);
    m->entries[i] = rg_le64(db + RG_DB_ENTRIES);
  }
  m->ok = m->psize >= MIN_PSIZE && m->psize <= MAX_PSIZE &&
          (m->psize & (m->psize - 1)) == 0;
}

int rg_meta_read (int fd, uint64_t size, rg_meta m[2]) {
  (void)size;
  meta_at(fd, 0, &m[0]);
  if (!m[0].ok) { memset(&m[1], 0, sizeof(m[1])); return -1; }
  meta_at(fd, m[0].psize, &m[1]);    /* LMDB takes the first one's size */
  if (!m[1].ok) return -1;
  return m[1].txnid > m[0].txnid ? 1 : 0;
}

static int damaged (rg_err *e, const char *path, const char *what,
                    const char *advice) {
  return rg_fail(e, 500, "the database '%s' is damaged: %s; %s", path, what,
                 advice);
}

#define RESTORE "restore it from a backup (`regolith verify` says the same)"

/* Opens data.mdb read-only: its descriptor and size, or -1 (errno). */
static int open_data (const char *path, uint64_t *size) {
  char name[4096];
  struct stat st;
  int fd;
  snprintf(name, sizeof(name), "%s/data.mdb", path);
  if ((fd = open(name, O_RDONLY | O_CLOEXEC)) < 0) return -1;
  if (fstat(fd, &st) != 0) { close(fd); return -1; }
  *size = (uint64_t)st.st_size;
  return fd;
}

/* What says that the directory held a database: its log's checkpoint,
** or regolith.id (0: nothing does; -1: regolith.id is damaged). */
static int held (const char *path, uint64_t base, char *what, size_t n,
                 const char *file) {
  uint64_t h, through;
  int id = id_read(path, &h, &through);
  if (id < 0) return -1;
  if (base)
    snprintf(what, n, "%s, while its log (regolith.wal) names transaction "
             "%llu", file, (unsigned long long)base);
  else if (id == 0)
    snprintf(what, n, "%s, while regolith.id says the directory holds a "
             "database", file);
  return base || id == 0;
}

static int id_damaged (rg_err *e, const char *path) {
  return damaged(e, path, "regolith.id, which names the database the "
                 "directory holds, does not check out", "if the data file "
                 "is the database, remove regolith.id (it is written again), "
                 "else " RESTORE);
}

/* Neither meta page of data.mdb checks out. */
static int bad_meta (rg_err *e, const char *path, const rg_meta m[2]) {
  char what[160];
  snprintf(what, sizeof(what), "meta page %d of data.mdb does not check "
           "out (not an LMDB 0.9 meta page: its flags, magic, version or "
           "page size)", m[0].ok ? 1 : 0);
  return damaged(e, path, what, RESTORE);
}

int rg_preflight_log (const char *path, int readonly, rg_err *e) {
  char what[256];
  uint64_t base = rg_wal_base(path, NULL), size = 0;
  rg_meta m[2];
  int fd, best, h;
  (void)readonly;
  if ((fd = open_data(path, &size)) < 0) {
    if (errno != ENOENT) return 0;             /* LMDB says what */
    if ((h = held(path, base, what, sizeof(what), "data.mdb is missing")) < 0)
      return id_damaged(e, path);
    if (h == 0) return 0;                      /* a new database */
    return damaged(e, path, what, "the data file was removed: " RESTORE
                   "; opening it would start an empty database in its place");
  }
  if (size == 0) {
    close(fd);
    if ((h = held(path, base, what, sizeof(what), "data.mdb is empty")) < 0)
      return id_damaged(e, path);
    if (h == 0) return 0;            /* made, never written: LMDB will */
    return damaged(e, path, what, "the data file was emptied: " RESTORE
                   "; opening it would start an empty database in its place");
  }
  best = rg_meta_read(fd, size, m);
  close(fd);
  if (best < 0) return bad_meta(e, path, m);
  if (m[best].txnid < base) {
    snprintf(what, sizeof(what), "data.mdb holds transaction %llu, older "
             "than %llu, where its log (regolith.wal) says it was flushed",
             (unsigned long long)m[best].txnid, (unsigned long long)base);
    return damaged(e, path, what, "the data file was replaced by an older "
                   "copy; if that copy is meant to be the database (a "
                   "restored backup), remove regolith.wal and regolith.shm "
                   "first, else " RESTORE);
  }
  return 0;
}

int rg_preflight_map (const char *path, rg_err *e) {
  char what[320];
  struct stat st;
  uint64_t size = 0, need;
  rg_meta m[2];
  int fd, best, i;
  if ((fd = open_data(path, &size)) < 0 || size == 0) {
    if (fd >= 0) close(fd);
    return 0;                        /* a new database: LMDB makes it */
  }
  best = rg_meta_read(fd, size, m);
  /* The size is taken again after the metas: another process may have
  ** committed between the two reads, and a writer extends the file
  ** before it writes the meta that names the new pages (the file only
  ** grows), so the size read now covers every page the metas name. */
  if (best >= 0 && fstat(fd, &st) == 0) size = (uint64_t)st.st_size;
  close(fd);
  if (best < 0) return bad_meta(e, path, m);
  need = (m[best].last_pg + 1) * m[best].psize;
  if (m[best].last_pg < 1 || m[best].last_pg > (UINT64_MAX >> 17)) {
    snprintf(what, sizeof(what), "the newest meta page of data.mdb "
             "(transaction %llu) names an impossible last page, %llu",
             (unsigned long long)m[best].txnid,
             (unsigned long long)m[best].last_pg);
    return damaged(e, path, what, RESTORE);
  }
  if (size < need) {
    snprintf(what, sizeof(what), "data.mdb is %llu bytes, shorter than the "
             "%llu its last transaction (%llu) uses: it was cut short",
             (unsigned long long)size, (unsigned long long)need,
             (unsigned long long)m[best].txnid);
    return damaged(e, path, what, RESTORE);
  }
  for (i = 0; i < 2; i++) {
    uint64_t r = m[best].root[i];
    if (r == RG_PG_INVALID ? m[best].entries[i] != 0
                           : r < 2 || r > m[best].last_pg ||
                             m[best].depth[i] == 0 || m[best].depth[i] > 64) {
      snprintf(what, sizeof(what), "the newest meta page of data.mdb "
               "(transaction %llu) names an impossible %s tree (root page "
               "%llu, depth %u, %llu entries)",
               (unsigned long long)m[best].txnid, i ? "main" : "free-page",
               (unsigned long long)r, m[best].depth[i],
               (unsigned long long)m[best].entries[i]);
      return damaged(e, path, what, RESTORE);
    }
  }
  return 0;
}

int rg_preflight_summed (const char *path, uint64_t txnid) {
  uint64_t h, through;
  return id_read(path, &h, &through) == 0 && through == txnid;
}

int rg_preflight_identity (const char *path, const uint8_t secret[16],
                           uint64_t txnid, int readonly, int *sums,
                           rg_err *e) {
  uint64_t h, through, mine = rg_hash(secret, 16);
  int id = id_read(path, &h, &through);
  *sums = 0;
  if (id < 0) return id_damaged(e, path);
  if (id == 0 && h != mine)
    return damaged(e, path, "data.mdb is another database than the one "
                   "regolith.id says the directory holds: it was replaced",
                   "if that file is meant to be the database (a restored "
                   "backup of another), remove regolith.id, regolith.wal and "
                   "regolith.shm first, else " RESTORE);
  *sums = id == 0 && through == txnid;
  if (id == 1 && !readonly) {
    /* what cannot be written (a full disk) is written by a later open */
    rg_err ignored;
    id_write(path, mine, 0, 1, &ignored);
  }
  return 0;
}

int rg_preflight_stamped (const char *path, const uint8_t secret[16],
                          uint64_t txnid, rg_err *e) {
  return id_write(path, rg_hash(secret, 16), txnid, 0, e);
}
