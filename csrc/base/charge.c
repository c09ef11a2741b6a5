/*
** charge.c: the request-charge cost model.
**
** A charge is computed from the work counters of a scope or a read
** (rg_work, charge.h) by one function, so the same operation on the same
** data always costs the same, whatever the machine or its load.  The
** constants are chosen so that the anchors of the model hold: a point read
** of an item of 1 KB or less costs 1 RU, a write of a small item about 5-6
** RU, growing with its size and with the index terms it writes.
**
**   point reads   1 RU per KB read, at least 1 RU per read
**   writes        5 RU per item written or deleted
**                 + 1 RU per KB of the item beyond its first
**                 + 0.2 RU per index or unique-key entry put or deleted
**   queries       2.5 RU per physical partition contacted
**                 + 0.5 RU per index lookup (one seek of an index range)
**                 + 0.1 RU per item loaded, + 0.1 RU per KB loaded
**                 A routed query contacts 1 partition, a fan-out all P of
**                 the container (even when one pass over a global index
**                 does the work); an equality or range on an indexed path
**                 is one lookup (IN: one per value); every item read counts
**                 as loaded, whether or not it passes the filter, so an
**                 index that narrows the candidates, or a TOP that stops
**                 the reading early, lowers the charge.
**                 + 0.01 RU per index entry counted without loading its
**                 item, where a GROUP BY or DISTINCT is answered from the
**                 index alone (one document stands for a run of entries)
**                 + 0.1 RU per 1,000 steps of LIKE and RegexMatch beyond
**                 a pass over their input and pattern (which loading the
**                 item pays for): a pattern that backtracks costs what it
**                 does, about as much per step as a loaded byte
**   vectors       (vector indexes; docs/search.md) a write: 4 RU per KB of
**                 vectors it indexes or removes, + 1 RU per graph
**                 neighbour list it writes (diskANN); a query: 0.01 RU per
**                 KB of exact vectors read, 0.001 RU per code read, 0.1 RU
**                 per neighbour list read.  So a 1,536-dimension float32
**                 vector costs about 25 RU more to write with quantizedFlat
**                 and 55 with diskANN (Cosmos DB: about 35 and 65 in all),
**                 and a TOP 10 diskANN search about 15 RU (Cosmos DB: up to
**                 45 in one partition)
**   full text     (full-text indexes; docs/search.md) a write: 0.2 RU per
**                 index record it rewrites (a term's last posting block,
**                 a block of lengths, the statistics); a query: 0.01 RU per
**                 index record read (posting blocks, lengths, statistics),
**                 as an index entry counted without its item
**   scripts       1 RU per procedure or trigger run, plus what it does
**   change feed   a read (c:changes, or a processor's batch: the handler's
**                 info.charge) costs 0.5 RU per feed range it reads (one
**                 seek, counted as an index lookup), 0.1 RU per feed entry
**                 it goes through (counted as loaded; entries a partition
**                 filter skips and expired items count too), and 0.1 RU
**                 per KB of the changes it returns.  Leases, checkpoints
**                 and retention trimming are bookkeeping, not charged; a
**                 handler's writes are charged as the writes they are.
**
** The total is rounded to hundredths.
*/

#include <math.h>

#include "base/charge.h"

double rg_charge (const rg_work *w) {
  double ru =
    1.0 * (double)w->read_units +
    5.0 * (double)w->written + 1.0 * (double)w->write_extra_kb +
    0.2 * (double)w->terms +
    2.5 * (double)w->partitions + 0.5 * (double)w->lookups +
    0.1 * (double)w->loaded + 0.1 * ((double)w->loaded_bytes / 1024.0) +
    0.01 * (double)w->scanned + 0.0001 * (double)w->steps +
    4.0 * ((double)w->vector_written / 1024.0) + 1.0 * (double)w->nodes_written +
    0.01 * ((double)w->vector_read / 1024.0) + 0.001 * (double)w->codes +
    0.1 * (double)w->nodes +
    0.01 * (double)w->text_read + 0.2 * (double)w->text_written +
    1.0 * (double)w->scripts;
  return floor(ru * 100.0 + 0.5) / 100.0;
}

void rg_work_add (rg_work *out, const rg_work *w) {
  out->read_units += w->read_units;
  out->written += w->written;
  out->write_bytes += w->write_bytes;
  out->write_extra_kb += w->write_extra_kb;
  out->terms += w->terms;
  out->lookups += w->lookups;
  out->partitions += w->partitions;
  out->loaded += w->loaded;
  out->loaded_bytes += w->loaded_bytes;
  out->scanned += w->scanned;
  out->steps += w->steps;
  out->scripts += w->scripts;
  out->vector_read += w->vector_read;
  out->codes += w->codes;
  out->nodes += w->nodes;
  out->vector_written += w->vector_written;
  out->nodes_written += w->nodes_written;
  out->text_loaded += w->text_loaded;
  out->text_read += w->text_read;
  out->text_written += w->text_written;
}

void rg_work_diff (rg_work *out, const rg_work *after, const rg_work *before) {
  out->read_units = after->read_units - before->read_units;
  out->written = after->written - before->written;
  out->write_bytes = after->write_bytes - before->write_bytes;
  out->write_extra_kb = after->write_extra_kb - before->write_extra_kb;
  out->terms = after->terms - before->terms;
  out->lookups = after->lookups - before->lookups;
  out->partitions = after->partitions - before->partitions;
  out->loaded = after->loaded - before->loaded;
  out->loaded_bytes = after->loaded_bytes - before->loaded_bytes;
  out->scanned = after->scanned - before->scanned;
  out->steps = after->steps - before->steps;
  out->scripts = after->scripts - before->scripts;
  out->vector_read = after->vector_read - before->vector_read;
  out->codes = after->codes - before->codes;
  out->nodes = after->nodes - before->nodes;
  out->vector_written = after->vector_written - before->vector_written;
  out->nodes_written = after->nodes_written - before->nodes_written;
  out->text_loaded = after->text_loaded - before->text_loaded;
  out->text_read = after->text_read - before->text_read;
  out->text_written = after->text_written - before->text_written;
}

/* The read units of one item of `bytes` bytes. */
uint64_t rg_read_units (size_t bytes) {
  return bytes <= 1024 ? 1 : (uint64_t)((bytes + 1023) / 1024);
}
