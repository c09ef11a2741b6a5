/*
** shm.c: the boot's identity, robust shared mutexes, file locks (shm.h).
*/

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "store/shm.h"

int rg_boot_id (char out[40]) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  ssize_t n;
  memset(out, 0, 40);
  if (fd < 0) return -1;
  n = read(fd, out, 39);
  close(fd);
  return n >= 16 ? 0 : -1;
}

static void make (pthread_mutex_t *m, uint32_t *state) {
  uint32_t zero = 0;
  if (__atomic_load_n(state, __ATOMIC_ACQUIRE) == 2) return;
  if (__atomic_compare_exchange_n(state, &zero, 1, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &ma);
    pthread_mutexattr_destroy(&ma);
    __atomic_store_n(state, 2, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(state, __ATOMIC_ACQUIRE) != 2) sched_yield();
}

int rg_shm_lock (pthread_mutex_t *m, uint32_t *state) {
  make(m, state);
  if (pthread_mutex_lock(m) == EOWNERDEAD) {
    pthread_mutex_consistent(m);
    return 1;
  }
  return 0;
}

int rg_shm_trylock (pthread_mutex_t *m, uint32_t *state) {
  int rc;
  make(m, state);
  rc = pthread_mutex_trylock(m);
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(m);
    return 1;
  }
  return rc == 0 ? 0 : -1;
}

int rg_file_lock (int fd, int type) {
  struct flock l;
  memset(&l, 0, sizeof(l));
  l.l_type = (short)type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 1;
  while (fcntl(fd, F_SETLKW, &l) != 0)
    if (errno != EINTR) return -1;
  return 0;
}
