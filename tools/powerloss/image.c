/*
** image.c: disk images a power loss could leave, from a journal recorded
** by shim.c (tools/powerloss.lua runs both).
**
**   image --journal J --base DIR --out DIR --images N --seed S [--page P]
**
** The base directory holds the watched files as they were, durably, when
** the journal began.  The journal is replayed in order, keeping for each
** file what the page cache holds and what the disk holds for certain:
** a flush of a file makes its whole page-cache content durable; a write
** through an O_DSYNC descriptor makes the pages it touched durable, as
** they are in the page cache (the kernel writes whole pages); any other
** write leaves its pages pending, each write of a page one more version
** of it.  At N moments chosen at random (after any record), the image is
** what is durable plus, for each page with pending versions, either none
** of them or any one of them, chosen independently page by page: so any
** subset of what was written since the last flush, in any order, may be
** there, at page granularity.  The way the pages are chosen varies from
** image to image: none land, all the latest land (as after a process
** crash), each page a uniform choice, or each page lands with a
** probability of its own.
**
** Each image is DIR/img-NNNN/ with the files, and `marks`: the writer's
** marks made before the moment, in order, with a line "~S name" for each
** flush and "~D name" for each durable write between them.  `info` says
** the moment and the way the pages were chosen.  Exit 1 with a message
** when the journal holds something the model cannot follow.
*/

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct version { uint64_t pgno, seq; uint8_t *data; } version;

typedef struct file {
  char name[64];
  uint8_t *cur, *dur;       /* page cache; disk, for certain */
  uint64_t cur_size, dur_size, cap;
  version *pend;            /* pending page versions, oldest first */
  size_t npend, cappend;
} file;

static file files[16];
static int nfiles;
static uint64_t psize = 4096;
static uint64_t rng;
static uint64_t written;          /* versions made so far: their order */

static void die (const char *fmt, const char *arg) {
  fprintf(stderr, "image: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  exit(1);
}

static uint64_t next_random (void) {      /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

static double uniform (void) { return (next_random() >> 11) * (1.0 / 9007199254740992.0); }

static void *xrealloc (void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) die("%s", "out of memory");
  return p;
}

static void grow (file *f, uint64_t size) {
  if (size > f->cap) {
    uint64_t cap = f->cap ? f->cap : 1 << 16;
    while (cap < size) cap *= 2;
    f->cur = (uint8_t *)xrealloc(f->cur, cap);
    f->dur = (uint8_t *)xrealloc(f->dur, cap);
    memset(f->cur + f->cap, 0, cap - f->cap);
    memset(f->dur + f->cap, 0, cap - f->cap);
    f->cap = cap;
  }
}

static file *find (const char *name, size_t n, const char *base) {
  int i;
  file *f;
  char path[4096];
  for (i = 0; i < nfiles; i++)
    if (strlen(files[i].name) == n && memcmp(files[i].name, name, n) == 0)
      return &files[i];
  if (nfiles == 16 || n >= sizeof(f->name)) die("%s", "too many files");
  f = &files[nfiles++];
  memcpy(f->name, name, n);
  f->name[n] = 0;
  snprintf(path, sizeof(path), "%s/%s", base, f->name);
  {
    FILE *in = fopen(path, "rb");
    if (in) {
      struct stat st;
      if (fstat(fileno(in), &st) == 0 && st.st_size > 0) {
        grow(f, (uint64_t)st.st_size);
        if (fread(f->dur, 1, (size_t)st.st_size, in) != (size_t)st.st_size)
          die("cannot read %s", path);
        memcpy(f->cur, f->dur, (size_t)st.st_size);
        f->cur_size = f->dur_size = (uint64_t)st.st_size;
      }
      fclose(in);
    }
  }
  return f;
}

static void flush_all (file *f) {
  size_t i;
  grow(f, f->cur_size);
  memcpy(f->dur, f->cur, f->cur_size);
  f->dur_size = f->cur_size;
  for (i = 0; i < f->npend; i++) free(f->pend[i].data);
  f->npend = 0;
}

/* A write of `n` bytes at `off`: into the page cache, then each page it
** touched is one more pending version, or durable at once (dsync). */
static void apply (file *f, uint64_t off, const uint8_t *data, uint64_t n,
                   int dsync) {
  uint64_t p, first = off / psize, last = (off + n - 1) / psize;
  if (n == 0) return;
  grow(f, (last + 1) * psize);
  memcpy(f->cur + off, data, n);
  if (off + n > f->cur_size) f->cur_size = off + n;
  for (p = first; p <= last; p++) {
    if (dsync) {
      size_t i, j = 0;
      memcpy(f->dur + p * psize, f->cur + p * psize, psize);
      if ((p + 1) * psize > f->dur_size)
        f->dur_size = off + n > (p + 1) * psize ? (p + 1) * psize : off + n;
      for (i = 0; i < f->npend; i++) {       /* this page is on disk now */
        if (f->pend[i].pgno == p) free(f->pend[i].data);
        else f->pend[j++] = f->pend[i];
      }
      f->npend = j;
    }
    else {
      if (f->npend == f->cappend) {
        f->cappend = f->cappend ? f->cappend * 2 : 256;
        f->pend = (version *)xrealloc(f->pend, f->cappend * sizeof(version));
      }
      f->pend[f->npend].pgno = p;
      f->pend[f->npend].seq = written++;
      f->pend[f->npend].data = (uint8_t *)xrealloc(NULL, psize);
      memcpy(f->pend[f->npend].data, f->cur + p * psize, psize);
      f->npend++;
    }
  }
}

/* Pending versions by page, each page's oldest first. */
static int cmp_pend (const void *a, const void *b) {
  const version *x = *(const version *const *)a, *y = *(const version *const *)b;
  if (x->pgno != y->pgno) return x->pgno < y->pgno ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const char *const ways[] = { "none", "all", "uniform", "each" };

/* Writes one image of every file; way: 0 none land, 1 all the latest, 2 a
** uniform choice per page, 3 each page lands with probability q. */
static void emit (const char *out, int way, double q) {
  int i;
  for (i = 0; i < nfiles; i++) {
    file *f = &files[i];
    char path[4096];
    uint64_t size = f->dur_size;
    size_t a, b;
    int fd;
    /* each page's versions together, oldest first */
    version **idx = (version **)xrealloc(NULL, (f->npend + 1) * sizeof(version *));
    for (a = 0; a < f->npend; a++) idx[a] = &f->pend[a];
    qsort(idx, f->npend, sizeof(version *), cmp_pend);
    snprintf(path, sizeof(path), "%s/%s", out, f->name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("cannot create %s", path);
    if (f->dur_size && pwrite(fd, f->dur, f->dur_size, 0) != (ssize_t)f->dur_size)
      die("cannot write %s", path);
    for (a = 0; a < f->npend; a = b) {
      size_t m, pick;
      for (b = a; b < f->npend && idx[b]->pgno == idx[a]->pgno; b++) {}
      m = b - a;                                /* versions of this page */
      if (way == 0) continue;
      if (way == 1) pick = m;
      else if (way == 2) pick = (size_t)(next_random() % (m + 1));
      else pick = uniform() < q ? 1 + (size_t)(next_random() % m) : 0;
      if (pick == 0) continue;
      {
        const version *v = idx[a + pick - 1];
        uint64_t end = (v->pgno + 1) * psize;
        if (end > f->cur_size) end = f->cur_size > v->pgno * psize ? f->cur_size : end;
        if (pwrite(fd, v->data, end - v->pgno * psize, (off_t)(v->pgno * psize)) < 0)
          die("cannot write %s", path);
        if (end > size) size = end;
      }
    }
    if (ftruncate(fd, (off_t)size) != 0) die("cannot size %s", path);
    close(fd);
    free(idx);
  }
  {
    char path[4096];
    FILE *inf;
    snprintf(path, sizeof(path), "%s/info", out);
    inf = fopen(path, "w");
    if (!inf) die("cannot create %s", path);
    fprintf(inf, "way %s %.2f\n", ways[way], q);
    fclose(inf);
  }
}

static int cmp_u64 (const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main (int argc, char **argv) {
  const char *journal = NULL, *base = NULL, *out = NULL;
  long images = 10;
  uint64_t seed = 1, nrec = 0, *moments;
  const uint8_t *j;
  struct stat st;
  size_t at;
  int fd, i, unfollowable = 0;
  FILE *marks;
  char *mtext = NULL;
  size_t mlen = 0, mcap = 0;
  long made = 0;
  for (i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--journal")) journal = argv[i + 1];
    else if (!strcmp(argv[i], "--base")) base = argv[i + 1];
    else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else if (!strcmp(argv[i], "--images")) images = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--page")) psize = strtoull(argv[i + 1], NULL, 10);
    else die("unknown option %s", argv[i]);
  }
  if (!journal || !base || !out || images < 1 || psize < 512)
    die("%s", "usage: image --journal J --base DIR --out DIR --images N --seed S [--page P]");
  rng = seed * 0x9E3779B97F4A7C15ull + 1;
  {                      /* every file of the base is in every image */
    DIR *d = opendir(base);
    struct dirent *e;
    if (!d) die("cannot open %s", base);
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.') find(e->d_name, strlen(e->d_name), base);
    closedir(d);
  }
  fd = open(journal, O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) die("cannot open %s", journal);
  if (st.st_size == 0) die("%s is empty", journal);
  j = (const uint8_t *)mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (j == MAP_FAILED) die("cannot map %s", journal);
  for (at = 0; at + 14 <= (size_t)st.st_size; nrec++) {
    uint32_t len;
    memcpy(&len, j + at + 2, 4);
    at += 14 + j[at + 1] + len;
  }
  if (at != (size_t)st.st_size) die("%s is truncated", journal);
  /* the moments: after record k, k in 1..nrec */
  moments = (uint64_t *)xrealloc(NULL, (size_t)images * sizeof(uint64_t));
  for (i = 0; i < images; i++) moments[i] = 1 + next_random() % nrec;
  qsort(moments, (size_t)images, sizeof(uint64_t), cmp_u64);
  {
    uint64_t k = 0;
    for (at = 0; at < (size_t)st.st_size && made < images; ) {
      uint8_t kind = j[at], nl = j[at + 1];
      uint32_t len;
      uint64_t off;
      const char *name = (const char *)j + at + 14;
      const uint8_t *data = j + at + 14 + nl;
      memcpy(&len, j + at + 2, 4);
      memcpy(&off, j + at + 6, 8);
      at += 14 + nl + len;
      k++;
      switch (kind) {
        case 'W': apply(find(name, nl, base), off, data, len, 0); break;
        case 'D': {
          file *f = find(name, nl, base);
          apply(f, off, data, len, 1);
          goto flushed;
        }
        case 'S':
          flush_all(find(name, nl, base));
        flushed:
          {
            char line[96];
            int n = snprintf(line, sizeof(line), "~%c %.*s\n", kind, nl, name);
            if (mlen + (size_t)n > mcap) {
              mcap = (mlen + n) * 2;
              mtext = (char *)xrealloc(mtext, mcap);
            }
            memcpy(mtext + mlen, line, (size_t)n);
            mlen += (size_t)n;
          }
          break;
        case 'T': {
          file *f = find(name, nl, base);
          grow(f, off);
          if (off > f->cur_size) memset(f->cur + f->cur_size, 0, off - f->cur_size);
          f->cur_size = off;
          break;
        }
        case 'M':
          if (mlen + len > mcap) {
            mcap = (mlen + len) * 2;
            mtext = (char *)xrealloc(mtext, mcap);
          }
          memcpy(mtext + mlen, data, len);
          mlen += len;
          break;
        case 'X': unfollowable = 1; break;
        default: die("%s", "unknown record in the journal");
      }
      while (made < images && moments[made] == k) {
        char dir[4096];
        int way;
        double q = 0;
        if (unfollowable)
          die("%s", "a watched file is mapped shared and writable: its "
              "writes are not in the journal (MDB_WRITEMAP?)");
        snprintf(dir, sizeof(dir), "%s/img-%04ld", out, made);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) die("cannot create %s", dir);
        {
          double u = uniform();
          way = u < 0.1 ? 0 : u < 0.2 ? 1 : u < 0.6 ? 2 : 3;
          if (way == 3) q = 0.1 + 0.8 * uniform();
        }
        emit(dir, way, q);
        snprintf(dir, sizeof(dir), "%s/img-%04ld/marks", out, made);
        marks = fopen(dir, "w");
        if (!marks || fwrite(mtext, 1, mlen, marks) != mlen) die("cannot write %s", dir);
        fclose(marks);
        snprintf(dir, sizeof(dir), "%s/img-%04ld/info", out, made);
        marks = fopen(dir, "a");
        if (marks) {
          fprintf(marks, "moment %llu of %llu\n", (unsigned long long)k,
                  (unsigned long long)nrec);
          fclose(marks);
        }
        made++;
      }
    }
  }
  printf("%ld images from %llu records\n", made, (unsigned long long)nrec);
  return 0;
}
