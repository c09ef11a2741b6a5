/*
** shim.c: fails chosen writes to a file with EIO, loaded with LD_PRELOAD
** into a process that writes a database (spec/held_fail_spec.lua), so
** that the paths a failing disk takes are run for real: the library is
** the one users get, nothing in it knows of the shim.
**
** Environment:
**   FAULT_NAME   the base name of the files whose writes fail (data.mdb);
**                without it every call goes through
**   FAULT_CALLS  which calls fail, comma-separated among write, pwrite,
**                writev, pwritev and fdatasync (default: the four writes)
**   FAULT_ON     a path: calls fail only while a file exists there, so
**                that the process itself switches the fault on and off
**                (default: always on)
**   FAULT_NTH    the Nth matching call (counted while on) fails first
**                (default 1)
**   FAULT_TIMES  how many fail from it on, 0 for every one (default 1)
**   FAULT_LOG    a file to which each failed call appends a line:
**                "<call> <name> <offset> <length>" (offset -1: write,
**                writev, fdatasync), so that a spec knows the fault was
**                met
**   FAULT_THEN_NAME, FAULT_THEN_CALLS
**                a second fault, armed once the first failed a call: every
**                call named (as in FAULT_CALLS) to a file of that name
**                fails from then on, while switched on (the log's write
**                that follows a failed data page, say)
**
** A failed call writes (or flushes) nothing and returns -1 with errno EIO.
*/

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ready;
static char name[256], calls[64], on[1024], logpath[1024];
static char then_name[256], then_calls[64];
static long nth = 1, times = 1, seen;
static int armed;                      /* the first fault failed a call */

#define REAL(ret, fn, args) \
  static ret (*real_##fn) args; \
  if (!real_##fn) real_##fn = (ret (*) args)dlsym(RTLD_NEXT, #fn)

static void setup (void) {
  const char *s;
  if (ready) return;
  ready = 1;
  snprintf(name, sizeof(name), "%s", (s = getenv("FAULT_NAME")) ? s : "");
  snprintf(calls, sizeof(calls), ",%s,",
           (s = getenv("FAULT_CALLS")) ? s : "write,pwrite,writev,pwritev");
  snprintf(on, sizeof(on), "%s", (s = getenv("FAULT_ON")) ? s : "");
  snprintf(logpath, sizeof(logpath), "%s", (s = getenv("FAULT_LOG")) ? s : "");
  snprintf(then_name, sizeof(then_name), "%s",
           (s = getenv("FAULT_THEN_NAME")) ? s : "");
  snprintf(then_calls, sizeof(then_calls), ",%s,",
           (s = getenv("FAULT_THEN_CALLS")) ? s : "");
  if ((s = getenv("FAULT_NTH")) != NULL && atol(s) > 0) nth = atol(s);
  if ((s = getenv("FAULT_TIMES")) != NULL && atol(s) >= 0) times = atol(s);
}

/* Whether fd is a file of that name (its base name). */
static int named (int fd, const char *want) {
  char link[64], path[4096];
  const char *base;
  ssize_t n;
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  base = strrchr(path, '/');
  return strcmp(base ? base + 1 : path, want) == 0;
}

/* Whether this call fails (logged when it does): a call of a kind named,
** while switched on, to a file of that name, counted among those; or,
** once one did, a call the second fault names. */
static int fails (const char *call, int fd, long long off, size_t len) {
  char key[16];
  const char *which = name;
  int fail = 0;
  pthread_mutex_lock(&lock);
  setup();
  snprintf(key, sizeof(key), ",%s,", call);
  if (!name[0] || (on[0] && access(on, F_OK) != 0)) goto done;
  if (armed && then_name[0] && strstr(then_calls, key) &&
      named(fd, then_name)) {
    fail = 1;
    which = then_name;
  }
  else if (strstr(calls, key) && named(fd, name)) {
    seen++;
    fail = seen >= nth && (times == 0 || seen < nth + times);
    armed |= fail;
  }
  if (fail && logpath[0]) {
    REAL(int, open, (const char *, int, ...));
    REAL(ssize_t, write, (int, const void *, size_t));
    char line[512];
    int lfd = real_open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (lfd >= 0) {
      int k = snprintf(line, sizeof(line), "%s %s %lld %zu\n", call, which, off,
                       len);
      if (real_write(lfd, line, (size_t)k) != k) fail = 1;
      close(lfd);
    }
  }
done:
  pthread_mutex_unlock(&lock);
  if (fail) errno = EIO;
  return fail;
}

static size_t total (const struct iovec *iov, int n) {
  size_t t = 0;
  int k;
  for (k = 0; k < n; k++) t += iov[k].iov_len;
  return t;
}

ssize_t write (int fd, const void *buf, size_t n) {
  REAL(ssize_t, write, (int, const void *, size_t));
  if (fails("write", fd, -1, n)) return -1;
  return real_write(fd, buf, n);
}

ssize_t pwrite (int fd, const void *buf, size_t n, off_t off) {
  REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
  if (fails("pwrite", fd, (long long)off, n)) return -1;
  return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64 (int fd, const void *buf, size_t n, off_t off) {
  return pwrite(fd, buf, n, off);
}

ssize_t writev (int fd, const struct iovec *iov, int n) {
  REAL(ssize_t, writev, (int, const struct iovec *, int));
  if (fails("writev", fd, -1, total(iov, n))) return -1;
  return real_writev(fd, iov, n);
}

ssize_t pwritev (int fd, const struct iovec *iov, int n, off_t off) {
  REAL(ssize_t, pwritev, (int, const struct iovec *, int, off_t));
  if (fails("pwritev", fd, (long long)off, total(iov, n))) return -1;
  return real_pwritev(fd, iov, n, off);
}

ssize_t pwritev64 (int fd, const struct iovec *iov, int n, off_t off) {
  return pwritev(fd, iov, n, off);
}

int fdatasync (int fd) {
  REAL(int, fdatasync, (int));
  if (fails("fdatasync", fd, -1, 0)) return -1;
  return real_fdatasync(fd);
}
