/*
** arena.h: arenas, memory taken in chunks that never move and freed all
** at once (the query engine's allocator).
**
** Invariants: a pointer an arena returned stays valid until the arena is
** reset or freed; allocation failure sets `oom` and returns NULL (never
** raises, never aborts); every allocation is 8-aligned.
*/

#ifndef rg_arena_h
#define rg_arena_h

#include <stddef.h>

typedef struct rg_chunk rg_chunk;
typedef struct rg_arena {
  rg_chunk *head;
  int oom;
} rg_arena;

void  rg_arena_init (rg_arena *a);
void *rg_arena_alloc (rg_arena *a, size_t n);          /* 8-aligned */
char *rg_arena_dup (rg_arena *a, const char *s, size_t n);
void  rg_arena_reset (rg_arena *a);   /* frees all but the largest chunk */
void  rg_arena_free (rg_arena *a);

#endif
