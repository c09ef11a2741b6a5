/*
** disk.c: this disk's own durable write, the anchor of a durable commit.
**
**   build/bench/disk DIR BYTES COUNT
**
** Appends COUNT writes of BYTES contiguous bytes to a file in DIR (grown
** by zeros and flushed beforehand, as regolith grows its log), each write
** followed by fdatasync, and prints one line:
**   bytes=B count=C p50=MICROSECONDS p99=MICROSECONDS mean=MICROSECONDS
** What a commit of B bytes of log record cannot go below on this disk:
** examples/bench/writers.lua runs it beside regolith's lone durable writes,
** in turns, with B the bytes of log they wrote per commit.
*/

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now (void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp (const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main (int argc, char **argv) {
  char path[4096];
  size_t n, total, at;
  int count, fd, i;
  char *buf, *zeros;
  double *lat, sum = 0;
  if (argc != 4 || (n = strtoul(argv[2], NULL, 10)) == 0 ||
      (count = atoi(argv[3])) <= 0) {
    fprintf(stderr, "usage: disk DIR BYTES COUNT\n");
    return 2;
  }
  snprintf(path, sizeof(path), "%s/disk-anchor.%d", argv[1], (int)getpid());
  if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
    perror(path);
    return 1;
  }
  total = n * (size_t)count + (1u << 20);
  zeros = calloc(1, 1u << 20);
  buf = malloc(n);
  lat = malloc(sizeof(double) * (size_t)count);
  if (zeros == NULL || buf == NULL || lat == NULL) return 1;
  for (at = 0; at < total; at += 1u << 20)
    if (pwrite(fd, zeros, 1u << 20, (off_t)at) != 1 << 20) { perror("grow"); return 1; }
  if (fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
  memset(buf, 0x5a, n);
  for (i = 0; i < count; i++) {
    double t0 = now();
    if (pwrite(fd, buf, n, (off_t)(n * (size_t)i)) != (ssize_t)n ||
        fdatasync(fd) != 0) {
      perror("write");
      return 1;
    }
    lat[i] = now() - t0;
    sum += lat[i];
  }
  close(fd);
  unlink(path);
  qsort(lat, (size_t)count, sizeof(double), cmp);
  printf("bytes=%zu count=%d p50=%.1f p99=%.1f mean=%.1f\n", n, count,
         lat[count / 2] * 1e6, lat[(count * 99) / 100] * 1e6,
         sum / count * 1e6);
  return 0;
}
