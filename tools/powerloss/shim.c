/*
** shim.c: the power-loss harness's recorder (tools/powerloss.lua), loaded
** with LD_PRELOAD into a process that writes a database.
**
** It lets every file operation through and records, in order, what a disk
** would need to know to decide what a power loss can leave behind: each
** write to a file of the watched directory with its bytes, each flush
** (fsync, fdatasync, msync, and writes through a descriptor opened with
** O_DSYNC or O_SYNC, which are durable when they return), each change of
** size, and the marks the writer makes (what it meant to do, and what was
** acknowledged) in the same stream, so that an acknowledgement is ordered
** exactly against the flushes before it.  tools/powerloss/image.c builds
** disk images from the journal.
**
** Environment:
**   PL_JOURNAL  the journal to append to (required; nothing is recorded
**               without it)
**   PL_DIR      the directory whose files are watched (absolute)
**   PL_IGNORE   file names in it that need not survive, comma-separated
**               (LMDB's lock.mdb: rebuilt by the first process to open)
**   PL_MARKS    a path: a stream the writer opens with fopen/io.open on it
**               writes marks into the journal instead of a file
**   PL_DROP_SYNC=1  the self-test: every flush is skipped (the call says it
**               succeeded) and O_DSYNC is dropped, as a build that forgot
**               to flush would; the harness must then find losses.
**
** Journal records: u8 kind | u8 name length | u32 length | u64 offset |
** name | data.  Kinds: 'W' write (data), 'S' flush of a file, 'D' write
** durable on return (data), 'T' size set to offset, 'M' mark (data; no
** name), 'X' something the model cannot follow (a shared writable map of
** a watched file): images after it are refused.  Each record is appended
** under an exclusive flock of the journal, held across the operation it
** describes, so that several processes give one true order.
*/

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXFD 4096

typedef struct watched {
  char name[64];         /* "" when the descriptor is not watched */
  int dsync;
} watched;

static watched fds[MAXFD];
static int jfd = -1;                 /* the journal */
static int ready, drop_sync;
static char dir[1024], ignore[1024], marks[1024];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The mode argument of open and openat, present with O_CREAT or O_TMPFILE. */
#define MODE_ARG(flags, mode) do { \
    if ((flags) & (O_CREAT | O_TMPFILE)) { \
      va_list ap; \
      va_start(ap, flags); \
      mode = va_arg(ap, mode_t); \
      va_end(ap); \
    } \
  } while (0)

#define REAL(ret, name, args) \
  static ret (*real_##name) args; \
  if (!real_##name) real_##name = (ret (*) args)dlsym(RTLD_NEXT, #name)

static void setup (void) {
  const char *j, *d, *i, *m, *s;
  int (*ropen) (const char *, int, ...);
  if (ready) return;
  ready = 1;
  j = getenv("PL_JOURNAL");
  d = getenv("PL_DIR");
  i = getenv("PL_IGNORE");
  m = getenv("PL_MARKS");
  s = getenv("PL_DROP_SYNC");
  drop_sync = s && strcmp(s, "1") == 0;
  if (!j || !d) return;
  snprintf(dir, sizeof(dir), "%s/", d);
  snprintf(ignore, sizeof(ignore), ",%s,", i ? i : "");
  snprintf(marks, sizeof(marks), "%s", m ? m : "");
  ropen = (int (*) (const char *, int, ...))dlsym(RTLD_NEXT, "open");
  jfd = ropen(j, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void jlock (void) {
  pthread_mutex_lock(&lock);
  flock(jfd, LOCK_EX);
}

static void junlock (void) {
  flock(jfd, LOCK_UN);
  pthread_mutex_unlock(&lock);
}

/* Appends one record (the caller holds the lock). */
static void record (int kind, const char *name, uint64_t off,
                    const struct iovec *iov, int n) {
  struct iovec out[66];
  uint8_t head[14];
  uint32_t len = 0;
  uint8_t nl = (uint8_t)(name ? strlen(name) : 0);
  int k, c = 0;
  ssize_t w;
  for (k = 0; k < n; k++) len += (uint32_t)iov[k].iov_len;
  head[0] = (uint8_t)kind;
  head[1] = nl;
  memcpy(head + 2, &len, 4);
  memcpy(head + 6, &off, 8);
  out[c].iov_base = head; out[c++].iov_len = 14;
  if (nl) { out[c].iov_base = (void *)name; out[c++].iov_len = nl; }
  for (k = 0; k < n && c < 66; k++) out[c++] = iov[k];
  if (k < n) abort();                /* more pieces than the shim expects */
  {
    static ssize_t (*rwritev) (int, const struct iovec *, int);
    size_t total = 0;
    if (!rwritev)
      rwritev = (ssize_t (*) (int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    for (k = 0; k < c; k++) total += out[k].iov_len;
    w = rwritev(jfd, out, c);
    if (w != (ssize_t)total) {     /* a journal that lies is worse than none */
      static const char msg[] = "powerloss shim: cannot write the journal\n";
      ssize_t ignored = write(2, msg, sizeof(msg) - 1);
      (void)ignored;
      abort();
    }
  }
}

/* Marks descriptor fd watched when it names a file of the directory. */
static void watch (int fd, int flags) {
  char link[64], path[4096];
  const char *base;
  ssize_t n;
  setup();
  if (fd < 0 || fd >= MAXFD) return;
  fds[fd].name[0] = 0;
  if (jfd < 0) return;
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = 0;
  if (strncmp(path, dir, strlen(dir)) != 0) return;
  base = path + strlen(dir);
  if (strchr(base, '/') || strlen(base) >= sizeof(fds[fd].name)) return;
  {
    char key[80];
    snprintf(key, sizeof(key), ",%s,", base);
    if (strstr(ignore, key)) return;
  }
  snprintf(fds[fd].name, sizeof(fds[fd].name), "%s", base);
  fds[fd].dsync = (flags & (O_DSYNC | O_SYNC)) != 0;
}

static const char *name_of (int fd) {
  return fd >= 0 && fd < MAXFD && fds[fd].name[0] && jfd >= 0 ? fds[fd].name
                                                               : NULL;
}

/* ------------------------------------------------------------------ opening */

static int flags_in (int flags) {
  setup();
  if (drop_sync) flags &= ~(O_DSYNC | O_SYNC);
  return flags;
}

int open (const char *path, int flags, ...) {
  mode_t mode = 0;
  int fd;
  REAL(int, open, (const char *, int, ...));
  MODE_ARG(flags, mode);
  fd = real_open(path, flags_in(flags), mode);
  watch(fd, flags);
  return fd;
}

int open64 (const char *path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, mode);
  return open(path, flags, mode);
}

int openat (int at, const char *path, int flags, ...) {
  mode_t mode = 0;
  int fd;
  REAL(int, openat, (int, const char *, int, ...));
  MODE_ARG(flags, mode);
  fd = real_openat(at, path, flags_in(flags), mode);
  watch(fd, flags);
  return fd;
}

int openat64 (int at, const char *path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, mode);
  return openat(at, path, flags, mode);
}

int creat (const char *path, mode_t mode) {
  return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

int close (int fd) {
  REAL(int, close, (int));
  if (fd >= 0 && fd < MAXFD) fds[fd].name[0] = 0;
  return real_close(fd);
}

static int dup_of (int from, int to) {
  if (to >= 0 && to < MAXFD) {
    if (from >= 0 && from < MAXFD) fds[to] = fds[from];
    else fds[to].name[0] = 0;
  }
  return to;
}

int dup (int fd) {
  REAL(int, dup, (int));
  return dup_of(fd, real_dup(fd));
}

int dup2 (int fd, int to) {
  REAL(int, dup2, (int, int));
  int r = real_dup2(fd, to);
  return r < 0 ? r : dup_of(fd, r);
}

int dup3 (int fd, int to, int flags) {
  REAL(int, dup3, (int, int, int));
  int r = real_dup3(fd, to, flags);
  return r < 0 ? r : dup_of(fd, r);
}

int fcntl (int fd, int cmd, ...) {
  va_list ap;
  void *arg;
  int r;
  REAL(int, fcntl, (int, int, ...));
  va_start(ap, cmd);
  arg = va_arg(ap, void *);
  va_end(ap);
  r = real_fcntl(fd, cmd, arg);
  if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && r >= 0) dup_of(fd, r);
  if (cmd == F_SETFL && r == 0 && name_of(fd)) {
    /* O_DSYNC cannot be set this way on Linux; nothing to follow */
  }
  return r;
}

/* ----------------------------------------------------------------- writing */

/* A write at `off` (or at the file's position) of the pieces iov. */
static ssize_t wrote (int fd, const struct iovec *iov, int n, off_t off,
                      int positioned) {
  static ssize_t (*rpwritev) (int, const struct iovec *, int, off_t);
  static ssize_t (*rwritev) (int, const struct iovec *, int);
  static off_t (*rlseek) (int, off_t, int);
  const char *name = name_of(fd);
  ssize_t r;
  if (!rpwritev) {
    rpwritev = (ssize_t (*) (int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    rwritev = (ssize_t (*) (int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    rlseek = (off_t (*) (int, off_t, int))dlsym(RTLD_NEXT, "lseek");
  }
  if (!name) return positioned ? rpwritev(fd, iov, n, off) : rwritev(fd, iov, n);
  jlock();
  if (!positioned) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_APPEND)) {
      struct stat st;
      off = fstat(fd, &st) == 0 ? st.st_size : 0;
    }
    else off = rlseek(fd, 0, SEEK_CUR);
  }
  r = positioned ? rpwritev(fd, iov, n, off) : rwritev(fd, iov, n);
  if (r > 0) {
    struct iovec part[64];
    size_t left = (size_t)r;
    int k, c = 0;
    for (k = 0; k < n && left > 0 && c < 64; k++) {
      part[c].iov_base = iov[k].iov_base;
      part[c].iov_len = iov[k].iov_len < left ? iov[k].iov_len : left;
      left -= part[c++].iov_len;
    }
    record(fds[fd].dsync ? 'D' : 'W', name, (uint64_t)off, part, c);
  }
  junlock();
  return r;
}

ssize_t write (int fd, const void *buf, size_t n) {
  struct iovec v;
  v.iov_base = (void *)buf;
  v.iov_len = n;
  return wrote(fd, &v, 1, 0, 0);
}

ssize_t pwrite (int fd, const void *buf, size_t n, off_t off) {
  struct iovec v;
  v.iov_base = (void *)buf;
  v.iov_len = n;
  return wrote(fd, &v, 1, off, 1);
}

ssize_t pwrite64 (int fd, const void *buf, size_t n, off_t off) {
  return pwrite(fd, buf, n, off);
}

ssize_t writev (int fd, const struct iovec *iov, int n) {
  return wrote(fd, iov, n, 0, 0);
}

ssize_t pwritev (int fd, const struct iovec *iov, int n, off_t off) {
  return wrote(fd, iov, n, off, 1);
}

ssize_t pwritev64 (int fd, const struct iovec *iov, int n, off_t off) {
  return wrote(fd, iov, n, off, 1);
}

/* ---------------------------------------------------------------- flushing */

static int flushed (int fd, int (*real) (int)) {
  const char *name = name_of(fd);
  int r;
  if (!name) return real(fd);
  if (drop_sync) return 0;
  jlock();
  r = real(fd);
  if (r == 0) record('S', name, 0, NULL, 0);
  junlock();
  return r;
}

int fsync (int fd) {
  REAL(int, fsync, (int));
  return flushed(fd, real_fsync);
}

int fdatasync (int fd) {
  REAL(int, fdatasync, (int));
  return flushed(fd, real_fdatasync);
}

/* Shared writable maps of watched files: msync would flush writes the shim
** never saw, so the journal is marked as one the model cannot follow. */
static struct { void *addr; size_t len; char name[64]; } maps[16];

void *mmap (void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  REAL(void *, mmap, (void *, size_t, int, int, int, off_t));
  void *p = real_mmap(addr, len, prot, flags, fd, off);
  const char *name = name_of(fd);
  if (p != MAP_FAILED && name && (prot & PROT_WRITE) && (flags & MAP_SHARED)) {
    int k;
    jlock();
    record('X', name, 0, NULL, 0);
    junlock();
    for (k = 0; k < 16; k++)
      if (!maps[k].addr) {
        maps[k].addr = p;
        maps[k].len = len;
        snprintf(maps[k].name, sizeof(maps[k].name), "%s", name);
        break;
      }
  }
  return p;
}

void *mmap64 (void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

int msync (void *addr, size_t len, int flags) {
  REAL(int, msync, (void *, size_t, int));
  int k;
  for (k = 0; k < 16; k++)
    if (maps[k].addr && (char *)addr >= (char *)maps[k].addr &&
        (char *)addr < (char *)maps[k].addr + maps[k].len) {
      int r;
      if (drop_sync) return 0;
      jlock();
      r = real_msync(addr, len, flags);
      if (r == 0 && (flags & MS_SYNC)) record('S', maps[k].name, 0, NULL, 0);
      junlock();
      return r;
    }
  return real_msync(addr, len, flags);
}

/* ------------------------------------------------------------------- sizes */

static int sized (int fd, off_t size, int r) {
  const char *name = name_of(fd);
  if (r == 0 && name) record('T', name, (uint64_t)size, NULL, 0);
  return r;
}

int ftruncate (int fd, off_t size) {
  REAL(int, ftruncate, (int, off_t));
  int r;
  if (!name_of(fd)) return real_ftruncate(fd, size);
  jlock();
  r = sized(fd, size, real_ftruncate(fd, size));
  junlock();
  return r;
}

int ftruncate64 (int fd, off_t size) { return ftruncate(fd, size); }

/* Space reserved past the end makes the file longer (zeros), unless
** FALLOC_FL_KEEP_SIZE; reserving inside it changes nothing. */
static int reserved (int fd, int mode, off_t off, off_t len, int r) {
  struct stat st;
  if (r == 0 && name_of(fd) && !(mode & FALLOC_FL_KEEP_SIZE) &&
      fstat(fd, &st) == 0 && off + len >= st.st_size)
    sized(fd, st.st_size, 0);
  return r;
}

int fallocate (int fd, int mode, off_t off, off_t len) {
  REAL(int, fallocate, (int, int, off_t, off_t));
  int r;
  if (!name_of(fd)) return real_fallocate(fd, mode, off, len);
  jlock();
  r = reserved(fd, mode, off, len, real_fallocate(fd, mode, off, len));
  junlock();
  return r;
}

int fallocate64 (int fd, int mode, off_t off, off_t len) {
  return fallocate(fd, mode, off, len);
}

int posix_fallocate (int fd, off_t off, off_t len) {
  REAL(int, posix_fallocate, (int, off_t, off_t));
  int r;
  if (!name_of(fd)) return real_posix_fallocate(fd, off, len);
  jlock();
  r = real_posix_fallocate(fd, off, len);
  reserved(fd, 0, off, len, r);
  junlock();
  return r;
}

int posix_fallocate64 (int fd, off_t off, off_t len) {
  return posix_fallocate(fd, off, len);
}

/* ------------------------------------------------------------------- marks */

static ssize_t mark_write (void *cookie, const char *buf, size_t n) {
  struct iovec v;
  (void)cookie;
  v.iov_base = (void *)buf;
  v.iov_len = n;
  jlock();
  record('M', NULL, 0, &v, 1);
  junlock();
  return (ssize_t)n;
}

static FILE *mark_stream (const char *path) {
  cookie_io_functions_t io;
  setup();
  if (jfd < 0 || !marks[0] || strcmp(path, marks) != 0) return NULL;
  memset(&io, 0, sizeof(io));
  io.write = mark_write;
  return fopencookie(NULL, "w", io);
}

FILE *fopen (const char *path, const char *mode) {
  REAL(FILE *, fopen, (const char *, const char *));
  FILE *f = mark_stream(path);
  return f ? f : real_fopen(path, mode);
}

FILE *fopen64 (const char *path, const char *mode) {
  REAL(FILE *, fopen64, (const char *, const char *));
  FILE *f = mark_stream(path);
  return f ? f : real_fopen64(path, mode);
}
