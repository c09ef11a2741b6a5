/*
** spill.c: sorted runs of table entries kept in a temporary file (see
** spill.h for the file's layout and lifetime).
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/spill.h"

#define SPILL_BUF (1u << 20)     /* written a MiB at a time, read by at most */
#define SREAD_MIN (1u << 16)     /* and at least this much (rg_sread_buf) */

struct rg_spill {
  int fd;
  uint64_t at;                   /* written to the file */
  uint8_t *buf;                  /* not yet written */
  size_t n;
};

static int io_fail (rg_err *e, const char *what) {
  int err = errno;
  return rg_fail(e, rg_room_status(err),
                 "storage failure: the load's spilled runs: %s: %s", what,
                 strerror(err));
}

int rg_spill_open (rg_spill **out, const char *dir, rg_err *e) {
  rg_spill *sp = (rg_spill *)calloc(1, sizeof(rg_spill));
  *out = NULL;
  if (sp == NULL || (sp->buf = (uint8_t *)malloc(SPILL_BUF)) == NULL) {
    free(sp);
    return rg_fail(e, 500, "out of memory");
  }
  sp->fd = -1;
#ifdef O_TMPFILE
  sp->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (sp->fd < 0) {              /* no O_TMPFILE here: a name, unlinked */
    rg_buf name;
    rg_buf_init(&name);
    rg_buf_addf(&name, "%s/load-XXXXXX", dir);
    rg_buf_addc(&name, 0);
    if (!name.oom && (sp->fd = mkostemp(name.p, O_CLOEXEC)) >= 0)
      unlink(name.p);
    rg_buf_free(&name);
  }
  if (sp->fd < 0) {
    int rc = io_fail(e, "open");
    free(sp->buf);
    free(sp);
    return rc;
  }
  *out = sp;
  return 0;
}

void rg_spill_close (rg_spill *sp) {
  if (sp == NULL) return;
  close(sp->fd);                 /* its blocks go back to the disk now */
  free(sp->buf);
  free(sp);
}

uint64_t rg_spill_at (const rg_spill *sp) {
  return sp->at + sp->n;
}

int rg_spill_flush (rg_spill *sp, rg_err *e) {
  size_t done = 0;
  while (done < sp->n) {
    ssize_t w = pwrite(sp->fd, sp->buf + done, sp->n - done,
                       (off_t)(sp->at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      return io_fail(e, "write");
    }
    done += (size_t)w;
  }
  sp->at += sp->n;
  sp->n = 0;
  return 0;
}

static int spill_bytes (rg_spill *sp, const void *p, size_t n, rg_err *e) {
  const uint8_t *s = (const uint8_t *)p;
  while (n) {
    size_t m = SPILL_BUF - sp->n;
    int rc;
    if (m > n) m = n;
    memcpy(sp->buf + sp->n, s, m);
    sp->n += m;
    s += m;
    n -= m;
    if (sp->n == SPILL_BUF && (rc = rg_spill_flush(sp, e))) return rc;
  }
  return 0;
}

int rg_spill_put (rg_spill *sp, const void *k, uint32_t kn, const void *v,
                  uint32_t vn, rg_err *e) {
  uint32_t len[2];
  int rc;
  len[0] = kn;
  len[1] = vn;
  if ((rc = spill_bytes(sp, len, sizeof(len), e)) ||
      (rc = spill_bytes(sp, k, kn, e)) || (rc = spill_bytes(sp, v, vn, e)))
    return rc;
  return 0;
}

void rg_sread_init (rg_sread *r, const rg_spill *sp, uint64_t from,
                    uint64_t to, size_t buf) {
  memset(r, 0, sizeof(*r));
  r->sp = sp;
  r->at = from;
  r->end = to;
  r->size = buf ? buf : 1;
}

size_t rg_sread_buf (size_t bound, size_t runs) {
  size_t n = bound / (runs + 1);
  if (n < SREAD_MIN) n = SREAD_MIN;
  return n > SPILL_BUF ? SPILL_BUF : n;
}

/* At least `need` bytes in buf[bi..bn), or a status (a short file). */
static int sread_fill (rg_sread *r, size_t need, rg_err *e) {
  size_t have = r->bn - r->bi;
  if (have >= need) return 0;
  if (r->bi) {                   /* what is left to the front */
    memmove(r->buf, r->buf + r->bi, have);
    r->bi = 0;
    r->bn = have;
  }
  if (r->cap < need || r->cap < r->size) {
    size_t cap = need > r->size ? need : r->size;
    uint8_t *a = (uint8_t *)realloc(r->buf, cap);
    if (a == NULL) return rg_fail(e, 500, "out of memory");
    r->buf = a;
    r->cap = cap;
  }
  while (r->bn < need) {
    size_t want = r->cap - r->bn;
    ssize_t got;
    if (want > r->end - r->at) want = (size_t)(r->end - r->at);
    if (want == 0) {
      errno = EIO;
      return io_fail(e, "a record cut short");
    }
    got = pread(r->sp->fd, r->buf + r->bn, want, (off_t)r->at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = EIO;
      return io_fail(e, "read");
    }
    r->bn += (size_t)got;
    r->at += (uint64_t)got;
  }
  return 0;
}

int rg_sread_next (rg_sread *r, rg_err *e) {
  uint32_t len[2];
  int rc;
  if (r->bi == r->bn && r->at == r->end) return 0;
  if ((rc = sread_fill(r, sizeof(len), e))) return rc;
  memcpy(len, r->buf + r->bi, sizeof(len));
  if ((rc = sread_fill(r, sizeof(len) + (size_t)len[0] + len[1], e)))
    return rc;
  r->k = r->buf + r->bi + sizeof(len);
  r->kn = len[0];
  r->v = r->k + len[0];
  r->vn = len[1];
  r->bi += sizeof(len) + (size_t)len[0] + len[1];
  return 1;
}

void rg_sread_free (rg_sread *r) {
  free(r->buf);
  r->buf = NULL;
}
