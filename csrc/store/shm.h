/*
** shm.h: what the processes of one database share, the pieces every
** mapped file of the store uses (store/shm.c): the boot's identity, robust
** process-shared mutexes, and a lock on a file's first byte.
**
** A mapped file (regolith.shm of the log, regolith.queue.2 of the write
** queue) is never flushed: it describes processes, not data, and is
** stamped with the boot's identity, so that a process finding another
** boot's stamp knows that no process of it is left.
**
** Invariants:
**   - A shared mutex is made by the first process that needs it, whatever
**     the file held there before (a file from a build before holds zeros,
**     and its processes never use it): *state is 0 not made, 1 being made,
**     2 made; the mutex is process-shared and robust, so a process dying
**     while it holds it leaves it usable, and the next holder is told.
*/

#ifndef rg_shm_h
#define rg_shm_h

#include <pthread.h>
#include <stdint.h>

/* The identity of this boot of the machine (40 bytes, NUL-padded): 0, or
** -1 where there is none to be had. */
int  rg_boot_id (char out[40]);
/* Locks a shared mutex; 1 when its last holder died holding it (it is
** usable again, and what it guarded may be half-changed), else 0. */
int  rg_shm_lock (pthread_mutex_t *m, uint32_t *state);
/* The same without waiting: 0 or 1 as rg_shm_lock, -1 when another holds
** it. */
int  rg_shm_trylock (pthread_mutex_t *m, uint32_t *state);
/* Takes (F_WRLCK, F_RDLCK) or lets go (F_UNLCK) of a lock on the first
** byte of the file, waiting for it: 0, or -1 (errno). */
int  rg_file_lock (int fd, int type);

#endif
