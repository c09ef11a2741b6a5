/*
** remote.h: the remote backend: the seam (kv.h) over tables a host keeps
** elsewhere (Redis Cluster, docs/cluster.md), read and written by the host
** in round trips the engine cannot make itself.
**
** The engine runs an operation as it runs it locally, over an overlay: the
** entries the host fetched so far, and the transaction's own writes.  A
** read of what the overlay lacks answers as if it were absent (a range:
** as if it ended there) and is recorded as a need; the host fetches the
** needs and runs the operation again.  An operation that wrote ends with
** a write set, one part per place it wrote to, each with the conditions
** the engine's reads in that place set (what it read must be unchanged);
** the host applies each part atomically in its place, and the engine's
** answer holds only once every part applied (a part refused: the host
** runs the operation again, its overlay updated with what the place holds
** now).  A point read the host did not fetch, in a place the write set
** writes to, is left as a condition (it was absent) instead of being
** fetched first: the commit checks it, and a create costs one round trip.
**
** Places.  Every entry lives in one place: the global one (the meta
** table: the catalog, scripts, processors' leases), or bucket r of
** container cid (its physical partition r: the items, index, unique, TTL,
** feed, latest, parts and refs entries of its logical partitions hashed
** there, and the partition's share of the container's statistics).  The
** global place has two halves, applied apart: the first holds what is
** written once and read by the rest (path ids, shapes: layout.h), and a
** write set's part there is applied before the others.  Keys say their place (layout.c); those that do not (a
** refs entry by its seq, a TTL entry, an index entry without the partition
** hash of its duplicate) are placed by the transaction's context: the
** item it last read or wrote, the container whose spec it last read.
** A cursor over the index walks every bucket of its container, or only
** the buckets of the partition hashes its caller reads (rg_cur_route).
** The vector table's instances are one per bucket (the shard's top 16
** bits, layout.h's RG_VSHARD_AT): a record's key says its place, a key
** shorter than a record's spans every bucket of its container.  So are
** the full-text table's (ftindex.h's seam: the bucket after the index's
** prefix); a container's statistics for BM25 are the sum of its buckets'
** (search.c).
**
** Invariants:
**   - Nothing the engine answers from an overlay with needs is trusted:
**     the host runs the operation again until it has none (or, writing,
**     until only conditions remain), then applies the write set.
**   - A write set's part is applied whole or not at all, in its place, and
**     only if every condition in it still holds; the lsn of its changes is
**     the place's, stamped over the stand-in the engine used (kv.h).
**   - The overlay of a call starts empty but for the global place's
**     entries: younger than the refresh time the host set (trusted by
**     reads), written once and present (path ids, shapes: trusted), a
**     container's catalog (trusted while the epoch fetched with it is the
**     one a bucket of the container holds: checked by a fetch or by the
**     commit, remote.c; so are the database's entries every call reads,
**     the scripts' version and the throughput setting, whose change moves
**     every container's epoch), or else asked for again.  A range fetched
**     replaces what the overlay held in the span it answers for.
**   - A write set that changes a container's catalog gives it a new
**     epoch in the global place and in every one of its buckets.
*/

#ifndef rg_remote_h
#define rg_remote_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"
#include "store/kv.h"

typedef struct rg_remote rg_remote;

/* A place: RG_PLACE_GLOBAL, or a container's bucket. */
#define RG_PLACE_GLOBAL 0xFFFFFFFFu
typedef struct rg_place {
  uint32_t cid;              /* RG_PLACE_GLOBAL: the global place */
  uint32_t bucket;
  uint32_t buckets;          /* the container's physical partitions */
} rg_place;

rg_remote *rg_remote_new (void);
void rg_remote_free (rg_remote *r);

/* Transactions (the scope's and rg_read_begin's, as local.h's). */
int  rg_remote_read (rg_remote *r, rg_txn **t, rg_err *e);
void rg_remote_read_end (rg_remote *r);
int  rg_remote_begin (rg_remote *r, rg_txn **t, rg_err *e);
/* Ends a write transaction: its writes join the run's write set (which
** the host takes after the call), or are undone. */
int  rg_remote_commit (rg_remote *r, rg_err *e);
void rg_remote_abort (rg_remote *r);

/*
** The host's side.  A call: rg_remote_reset (a new call: the overlay
** empties but for the global entries fetched less than `keep_ms` ago),
** then the operation, then rg_remote_state: RG_REMOTE_DONE (the answer
** holds), RG_REMOTE_FETCH (fetch the needs, rg_remote_feed_*, run again)
** or RG_REMOTE_APPLY (apply the write set's parts; each outcome given
** back with rg_remote_applied or rg_remote_refused; then DONE or run
** again).
*/
enum { RG_REMOTE_DONE, RG_REMOTE_FETCH, RG_REMOTE_APPLY };
void rg_remote_reset (rg_remote *r, int64_t now_ms, int64_t keep_ms);
/* A run again, in the same call: what it fetched is kept, what it wrote
** and guessed is not. */
void rg_remote_rerun (rg_remote *r);
int  rg_remote_state (rg_remote *r);

/* A need: a point (its key), or a range from `lo` (exclusive when
** `after`) onwards, or backwards from `lo` (`back`), at most `limit`
** entries; of table `tb` in place `pl`. */
typedef struct rg_need {
  rg_place pl;
  int tb;
  int range, after, back;
  uint32_t limit;
  const uint8_t *k;          /* the key, or the range's start */
  size_t kn;
} rg_need;
size_t rg_remote_needs (rg_remote *r, const rg_need **out);
/* Has the run read nothing it lacks (so far), and has no fetch since
** contradicted what it read?  (A fetch in the middle of a run never changes
** what the run wrote; one that changes what it read, or finds a key its
** conditional write took as absent, makes it run again whole:
** rg_remote_state says RG_REMOTE_FETCH, with no needs.) */
int rg_remote_complete (const rg_remote *r);
/* Seqs: a block is needed (RG_REMOTE_FETCH with rg_remote_want_seqs > 0);
** the host gives it with rg_remote_feed_seqs. */
uint32_t rg_remote_want_seqs (rg_remote *r);

/*
** Throughput budgets (store/throughput.c keeps the rule; the host keeps
** the words, one per budget partition, named by `field`).  A run reads a
** word with rg_remote_tp_word: 1 and the word (ns on the host's clock,
** what the run spent of it added as the host will add it),
** or 0 and the need recorded (RG_REMOTE_FETCH; the host reads each field
** rg_remote_tp_want names and gives it with rg_remote_tp_feed, with its
** clock then).  What the run spends adds up per field (rg_remote_tp_spent:
** the i-th field and its ns); the host adds it to the words when the call
** is done, as word = max(word, its clock) + ns.  rg_remote_tp_clock is
** the host's clock as last given, moved on by this process's monotonic
** clock since.  A run again forgets what it spent; a new call what it
** read.
*/
#define RG_TP_FIELD 64
int rg_remote_tp_word (rg_remote *r, const char *field, uint64_t *word);
void rg_remote_tp_spend (rg_remote *r, const char *field, uint64_t ns);
uint64_t rg_remote_tp_clock (const rg_remote *r);
const char *rg_remote_tp_want (const rg_remote *r, size_t i);
void rg_remote_tp_feed (rg_remote *r, const char *field, uint64_t word_ns,
                        uint64_t server_ns);
/* A setting changed: the word `field` is `word` from now on (`set`, as
** rg_remote_tp_spent gives it back), whatever it was. */
void rg_remote_tp_set (rg_remote *r, const char *field, uint64_t word);
const char *rg_remote_tp_spent (const rg_remote *r, size_t i, uint64_t *ns,
                                int *set);

/* What a run leaves to the end of its call (counters that must count
** once, whatever runs the call took): fn(ud, a, b) for each, in order,
** when the host says the call is done (rg_remote_done); a run again
** forgets them. */
typedef void rg_remote_later (void *ud, uint64_t a, uint64_t b);
void rg_remote_later_add (rg_remote *r, rg_remote_later *fn, void *ud,
                          uint64_t a, uint64_t b);
void rg_remote_done (rg_remote *r);
/* A call made inside a running one goes back to its mark (scope.h) and
** runs again alone: what it spent and left for later since the mark is
** forgotten with it (`back`), or kept. */
void rg_remote_tp_mark (rg_remote *r);
void rg_remote_tp_unmark (rg_remote *r, int back);

/* The needs were fetched and fed, and the run goes on (a call made inside
** a scope, run again alone over its mark, scope.h): they are cleared. */
void rg_remote_fetched (rg_remote *r);
void rg_remote_feed_seqs (rg_remote *r, uint32_t first, uint32_t n);

/* What the host fetched.  A point: its value (NULL: absent).  A range:
** its entries (key, value) in order, and how far the place's entries
** are known now: to the end (`done`), else through the last one given
** (none given and not done: only the version is news, what a refusal
** says).  `version` is the place's version of the table then (conditions
** on ranges; a new one forgets what was known of the table there).  0, or 500 out of memory. */
int rg_remote_feed_point (rg_remote *r, const rg_place *pl, int tb,
                          const void *k, size_t kn, const void *v,
                          size_t vn, int64_t now_ms);
int rg_remote_feed_range (rg_remote *r, const rg_place *pl, int tb,
                          const void *lo, size_t lon, int after, int back,
                          size_t n, const void *const *ks,
                          const size_t *kns, const void *const *vs,
                          const size_t *vns, int done, uint64_t version,
                          int64_t now_ms);

/*
** The write set: its parts, one per place, each serialized for the host
** (the format is the Functions library's; redis/regolith.lua writes it
** down): conditions, then writes, then where the lsn's stand-in is.
*/
typedef struct rg_part {
  rg_place pl;
  const char *data;
  size_t n;
} rg_part;
size_t rg_remote_parts (rg_remote *r, const rg_part **out);
/* The stand-in for the lsn in this write set (0: none). */
uint64_t rg_remote_stand_in (rg_remote *r);
/* Part i applied with lsn `lsn`; or refused, with what its conditions
** found (as rg_remote_feed_point gives them, for the run again). */
void rg_remote_applied (rg_remote *r, size_t i, uint64_t lsn);
void rg_remote_refused (rg_remote *r, size_t i);

#endif
