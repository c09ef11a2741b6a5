/*
** arena.c: memory taken in chunks that never move, freed all at once.
**
** The query engine allocates the pieces of a parsed query, the strings a
** row's evaluation builds and the values of a page from arenas: an
** allocation is a pointer bump, and a row, a page or a query is released
** with one call.  Allocation failure sets `oom` and returns NULL, so a
** builder checks once.
*/

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

struct rg_chunk {
  rg_chunk *next;
  size_t size, used;
  union { double d; void *p; long long l; } data[1];
};

#define CHUNK_HEAD offsetof(rg_chunk, data)
#define CHUNK_MIN  4096

void rg_arena_init (rg_arena *a) {
  a->head = NULL;
  a->oom = 0;
}

void *rg_arena_alloc (rg_arena *a, size_t n) {
  rg_chunk *c = a->head;
  void *p;
  n = (n + 7) & ~(size_t)7;
  if (n == 0) n = 8;
  if (c == NULL || c->size - c->used < n) {
    size_t size = c ? c->size * 2 : CHUNK_MIN;
    if (size > (1u << 20)) size = 1u << 20;
    if (size < n) size = n;
    c = (rg_chunk *)malloc(CHUNK_HEAD + size);
    if (c == NULL) { a->oom = 1; return NULL; }
    c->size = size;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  p = (char *)c->data + c->used;
  c->used += n;
  return p;
}

char *rg_arena_dup (rg_arena *a, const char *s, size_t n) {
  char *p = (char *)rg_arena_alloc(a, n + 1);
  if (p == NULL) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void rg_arena_reset (rg_arena *a) {
  rg_chunk *c, *keep = NULL, *next;
  for (c = a->head; c; c = next) {
    next = c->next;
    if (keep == NULL || c->size > keep->size) {
      if (keep) free(keep);
      keep = c;
    }
    else free(c);
  }
  if (keep) { keep->used = 0; keep->next = NULL; }
  a->head = keep;
  a->oom = 0;
}

void rg_arena_free (rg_arena *a) {
  rg_chunk *c, *next;
  for (c = a->head; c; c = next) {
    next = c->next;
    free(c);
  }
  a->head = NULL;
}
