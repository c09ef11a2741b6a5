/*
** charge.h: the request-charge cost model.
**
** A charge is computed from the work counters of a scope or a read
** (rg_work) by one function, so the same operation on the same data always
** costs the same, whatever the machine or its load (charge.c has the
** formulas; docs/charges.md explains them).  The counters are kept by the
** store as it works; internal reads of the write path are not counted.
*/

#ifndef rg_charge_h
#define rg_charge_h

#include <stddef.h>
#include <stdint.h>

typedef struct rg_work {
  uint64_t read_units;      /* point reads: KB units, at least 1 a read */
  uint64_t written;         /* items written or deleted */
  uint64_t write_bytes;
  uint64_t write_extra_kb;  /* KB of written items beyond their first */
  uint64_t terms;           /* index and unique entries put or deleted */
  uint64_t lookups;         /* index seeks */
  uint64_t partitions;      /* physical partitions contacted by queries */
  uint64_t loaded;          /* items loaded by queries */
  uint64_t loaded_bytes;
  uint64_t scanned;         /* index entries a query answered from alone */
  uint64_t steps;           /* LIKE and RegexMatch work beyond a linear pass */
  uint64_t scripts;         /* procedure and trigger runs */
  uint64_t vector_read;     /* bytes of exact vectors a search read */
  uint64_t codes;           /* codes a vector search read */
  uint64_t nodes;           /* graph neighbour lists read */
  uint64_t vector_written;  /* bytes of vectors a write indexed or removed */
  uint64_t nodes_written;   /* graph neighbour lists written */
  uint64_t text_loaded;     /* items read for full-text statistics (also
                               counted in loaded: they cost the same) */
  uint64_t text_read;       /* full-text index records (posting blocks,
                               lengths, statistics) a query read */
  uint64_t text_written;    /* full-text index records a write rewrote */
} rg_work;

/* The charge of the work, in request units, rounded to hundredths. */
double   rg_charge (const rg_work *w);
/* The read units of one item of `bytes` bytes (at least 1). */
uint64_t rg_read_units (size_t bytes);
/* out += w, counter by counter. */
void     rg_work_add (rg_work *out, const rg_work *w);
/* out = after - before, counter by counter. */
void     rg_work_diff (rg_work *out, const rg_work *after,
                       const rg_work *before);

#endif
