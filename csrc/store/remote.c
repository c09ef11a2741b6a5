/*
** remote.c: the remote backend (remote.h): the seam over an overlay of
** what the host fetched, and the write set the engine's writes make.
**
** The overlay.  Each table is one array of entries in byte order, the
** entries of every place together (a key names one place, so two places
** never hold the same bytes; a table of sorted duplicates has one entry
** per key | duplicate).  An entry knows its place, what the host fetched
** for it (`base`: present with a value, or absent), what the transaction
** made of it (`cur`), whether the transaction read it (a condition of the
** commit) and whether it guessed it (read before the host fetched it:
** absent until known).  Beside the entries, each (table, place) has the
** key ranges the host fetched whole (its coverage): a key in a covered
** range with no entry is absent, and a cursor may step over a covered
** range without asking for more.
**
** Reads.  A point read of a key with no entry and no coverage guesses it
** absent, records the need, and answers RG_NOTFOUND; a cursor that would
** step over an uncovered range records the ranges it needs (from where
** each place's coverage ends) and answers RG_NOTFOUND as if the table
** ended.  The operation goes on with these answers, and the host, seeing
** the needs, fetches them all at once and runs it again: the answer of a
** run with needs is never used (remote.h).  A range's answer is all its
** place holds in the span it answers for: an entry the overlay has there
** and the answer lacks (kept from an earlier call, guessed, or deleted
** since it was fetched) is absent from then on (absent_unanswered).
**
** Writes change `cur` and mark the entry dirty, keeping in the undo log
** what they overwrote (savepoints, kv.h).  Counters (rg_kv_add) are kept
** as deltas: the commit adds them in the place, bounded (kv.h), so two
** writers adding to one counter never conflict.  A fetch can come in the
** middle of a transaction (a call made inside a scope fetches what it
** lacks and runs again alone over its mark): it sets `base` and never
** changes what the transaction wrote; `cur` of an entry it did not put or
** delete is always `base` plus its deltas (view), after a fetch as after
** an undo.  The lsn is a stand-in, a random number from 8e15 to 9e15,
** which the place replaces at the commit in the three encodings the
** layout writes it in: 8 bytes big-endian (feed keys, latest entries),
** decimal text (the documents' _lsn) and an index term (an index on
** _lsn).  A place's lsn is the time in microseconds (or one more than its
** last), 16 digits until the year 2286 and below 8e15 until 2223, as the
** stand-in is: a document keeps its size when its lsn is put in, and the
** sizes the write counted hold.
**
** The write set: one part per place written (the global place's first:
** what it holds, path ids and shapes, is written once and harmless when
** the rest fails), each with the conditions of the reads made in its
** place (the value read, or its absence; for a range, the table's version
** in the place when it was fetched), then the writes, then the stand-in's
** encodings.  A read in a place the write set does not write cannot be
** checked by its commit: the host fetches those first (rg_remote_state).
*/

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/deadline.h"
#include "base/json.h"
#include "base/limits.h"
#include "store/layout.h"
#include "store/remote.h"

#define NONE      0xFFFFFFFFu     /* no place */
#define FIRST_RANGE 64            /* entries asked of a place at first */
#define MAX_RANGE 4096
#define TAIL      48              /* bytes an item condition compares */
#define STAND_IN_LO 8000000000000000ull


typedef struct side {
  uint8_t *v;                     /* NULL with n 0: empty */
  uint32_t n;
  uint8_t have;
} side;

typedef struct ent {
  uint8_t *k;                     /* key, or key | duplicate */
  uint32_t kn;
  uint32_t place;
  side base, cur;                 /* as fetched; as the transaction made it */
  uint8_t known;                  /* base came from the host */
  uint8_t stale;                  /* from an earlier call: asked again (1),
                                     and meanwhile a guess (2: asked); or
                                     trusted if its epoch holds (3) */
  uint8_t guessed;                /* read before known: absent for now */
  uint8_t assumed;                /* known as the commit will check it */
  uint8_t read, dirty;
  uint8_t adding;                 /* counter deltas pending (add below) */
  uint8_t held;                   /* named by the undo log (forget) */
  int64_t add_items, add_bytes;
  uint64_t add_bound;
  unsigned add_flags;
  int64_t at_ms;                  /* when fetched */
} ent;

typedef struct table {
  ent **v;
  size_t n, cap;
} table;

/* Coverage: the entries with lo (<, or <= when closed) key <= hi (or to
** the end) are all known in place `place`. */
typedef struct span {
  uint32_t place;
  uint8_t *lo, *hi;
  uint32_t lon, hin;
  uint8_t lo_open, hi_end;
} span;

typedef struct spans {
  span *v;
  size_t n, cap;
} spans;

/* A budget's word (store/throughput.c) as this call read it (`word`, ns,
** when `known`), or one spending of the run (`word`: the ns it adds). */
typedef struct bword {
  char field[RG_TP_FIELD];
  uint64_t word;
  int known;
} bword;

typedef struct blater {
  rg_remote_later *fn;
  void *ud;
  uint64_t a, b;
} blater;

typedef struct bsave {
  bword *bs;
  size_t nbs, nbl;
} bsave;

/* A (table, place): its version when fetched, and what the transaction
** did with its ranges. */
typedef struct tplace {
  uint32_t place;
  int tb;
  uint64_t version;
  int has_version;
  int ranged;                     /* the transaction read one of its ranges */
  uint32_t fetches;               /* ranges asked of it in this call */
} tplace;

typedef struct spec {
  uint32_t cid;
  int nparts;
} spec;

typedef struct undo {
  ent *e;
  side cur;
  uint8_t dirty, adding;
  int64_t add_items, add_bytes;
} undo;

typedef struct rtxn {
  rg_txn base;
  rg_remote *r;
} rtxn;

typedef struct rcur {
  rg_cur base;
  rg_remote *r;
  int tb;
  uint32_t *places;
  int nplaces, capplaces;
  int placed;                     /* places known (from the first key) */
  uint8_t *pos;                   /* where it is: an entry's bytes */
  uint32_t posn;
  int at;                         /* on an entry */
  int past;                       /* a seek found none at or after pos:
                                     RG_PREV steps back from pos (LMDB's
                                     cursor past the end gives the last) */
  int stopped;                    /* ran into what is not fetched */
  /* rg_cur_bound: entries start with lo (lon bytes, 0: no bound) and are
     before hi (hin bytes; none when the prefix is all 0xFF) */
  uint8_t lo[RG_MAX_KEY], hi[RG_MAX_KEY];
  size_t lon, hin;
  /* rg_cur_route: the partition hashes read (rmask 0: all) */
  uint64_t rhash, rmask;
} rcur;

struct rg_remote {
  table t[RG_NDB];
  spans cov[RG_NDB];
  rg_place *places;
  size_t nplaces, capplaces;
  tplace *tp;
  size_t ntp, captp;
  spec *specs;
  size_t nspecs, capspecs;
  /* the needs of the last run */
  rg_need *needs;
  size_t nneeds, capneeds;
  uint32_t want_seqs;        /* the seqs the run took past the block */
  /* the block of item seqs the host gave: seq_first .. seq_end - 1, of
     which the run took seq_taken (taken again by a run after a fetch;
     spent once a write set went out) */
  uint32_t seq_first, seq_end, seq_taken;
  /* the transaction */
  rtxn tx;
  int active, writing;
  int savepoints;
  undo *undo;
  size_t nundo, capundo;
  uint64_t stand_in;
  size_t txmark;                  /* the write transaction's savepoint */
  uint64_t wbytes;                /* rg_kv_pending: bytes its writes gave */
  int lsn_taken;
  int sealed;                     /* the parts are built */
  int moved;                      /* a fetch in the middle of the run
                                     contradicts what it read: it goes
                                     again whole (known, forget) */
  uint32_t cur_place, cur_cid;
  int nomem;
  /* the write set */
  rg_part *parts;
  size_t nparts;
  rg_buf *bufs;
  int applied_all, refused;
  size_t pending;
  int64_t now_ms;
  int64_t global_since;           /* the first global fetch still kept */
  int kept;                       /* this call trusts them unchecked */
  /* throughput budgets (rg_remote_tp_word): the words this call read,
     how many it lacks, what its run spent; the host's clock */
  bword *bw;
  size_t nbw, capbw, bwanted;
  bword *bs;
  size_t nbs, capbs;
  blater *bl;                     /* to run when the call is done */
  size_t nbl, capbl;
  bsave *bsv;                     /* rg_remote_tp_mark's */
  size_t nbsv, capbsv;
  uint64_t server_ns, server_at;  /* the host's clock, and when it came */
};

static const rg_kv_ops remote_ops;

/* The tables a host keeps (redis/regolith.lua's NT): all of them; a table
** past these would read as empty and fail a write (RG_NOPLACE). */
#define KEPT (RG_DB_FTEXT + 1)

#define R(t) (((rtxn *)(t))->r)
#define RC(c) ((rcur *)(c))


/*
** {=====================================================================
** Bytes, entries, tables
** ======================================================================
*/
static int bcmp2 (const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c) return c;
  return an < bn ? -1 : an > bn;
}

static uint8_t *dupb (const void *p, size_t n) {
  uint8_t *d = (uint8_t *)malloc(n ? n : 1);
  if (d && n) memcpy(d, p, n);
  return d;
}

static unsigned dupsize (int tb) { return rg_tables[tb].dupsize; }

/* The first entry >= (k, kn). */
static size_t lower (const table *t, const uint8_t *k, size_t kn) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (bcmp2(t->v[mid]->k, t->v[mid]->kn, k, kn) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static ent *find (rg_remote *r, int tb, const uint8_t *k, size_t kn) {
  table *t = &r->t[tb];
  size_t i = lower(t, k, kn);
  if (i < t->n && t->v[i]->kn == kn && memcmp(t->v[i]->k, k, kn) == 0)
    return t->v[i];
  return NULL;
}

static void side_free (side *s) {
  free(s->v);
  s->v = NULL;
  s->n = 0;
}

static int side_set (side *s, int have, const void *v, size_t n) {
  uint8_t *c = NULL;
  if (have && (c = dupb(v, n)) == NULL) return -1;
  free(s->v);
  s->v = c;
  s->n = have ? (uint32_t)n : 0;
  s->have = (uint8_t)(have != 0);
  return 0;
}

static int side_copy (side *d, const side *s) {
  return side_set(d, s->have, s->v, s->n);
}

static void ent_free (ent *e) {
  if (e->cur.v != e->base.v) side_free(&e->cur);
  side_free(&e->base);
  free(e->k);
  free(e);
}

/* The entry of (k, kn), made (absent, unknown) when missing. */
static ent *get_ent (rg_remote *r, int tb, const uint8_t *k, size_t kn,
                     uint32_t place) {
  table *t = &r->t[tb];
  size_t i = lower(t, k, kn);
  ent *e;
  if (i < t->n && t->v[i]->kn == kn && memcmp(t->v[i]->k, k, kn) == 0)
    return t->v[i];
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    ent **v = (ent **)realloc(t->v, cap * sizeof(ent *));
    if (v == NULL) { r->nomem = 1; return NULL; }
    t->v = v;
    t->cap = cap;
  }
  if ((e = (ent *)calloc(1, sizeof(ent))) == NULL ||
      (e->k = dupb(k, kn)) == NULL) {
    free(e);
    r->nomem = 1;
    return NULL;
  }
  e->kn = (uint32_t)kn;
  e->place = place;
  memmove(t->v + i + 1, t->v + i, (t->n - i) * sizeof(ent *));
  t->v[i] = e;
  t->n++;
  return e;
}

/* The entry's value as the transaction sees it. */
static const side *now_of (const ent *e) { return &e->cur; }

/* Sets `cur` of an entry the transaction did not put or delete (not
** dirty): `base`, plus the counter deltas it added (r_add).  The one rule
** for what such an entry reads, whatever was fetched since (known) or
** undone (r_rollback). */
static int view (ent *e) {
  uint8_t buf[16];
  uint64_t n = 0, b = 0;
  rg_assert(!e->dirty);
  if (!e->adding) return side_copy(&e->cur, &e->base);
  if (e->base.have && e->base.n == 16) {
    n = rg_get_u64(e->base.v);
    b = rg_get_u64(e->base.v + 8);
  }
  n += (uint64_t)e->add_items;
  b += (uint64_t)e->add_bytes;
  if (n == 0 && (e->add_flags & RG_KV_DROP0))
    return side_set(&e->cur, 0, NULL, 0);
  rg_put_u64(buf, n);
  rg_put_u64(buf + 8, b);
  return side_set(&e->cur, 1, buf, 16);
}
/* }===================================================================== */


/*
** {=====================================================================
** Places, specs, coverage
** ======================================================================
*/
static uint32_t place_index (rg_remote *r, uint32_t cid, uint32_t bucket,
                             uint32_t buckets) {
  size_t i;
  for (i = 0; i < r->nplaces; i++)
    if (r->places[i].cid == cid && r->places[i].bucket == bucket)
      return (uint32_t)i;
  if (r->nplaces == r->capplaces) {
    size_t cap = r->capplaces ? r->capplaces * 2 : 32;
    rg_place *v = (rg_place *)realloc(r->places, cap * sizeof(rg_place));
    if (v == NULL) { r->nomem = 1; return NONE; }
    r->places = v;
    r->capplaces = cap;
  }
  r->places[r->nplaces].cid = cid;
  r->places[r->nplaces].bucket = bucket;
  r->places[r->nplaces].buckets = buckets;
  return (uint32_t)r->nplaces++;
}

/* The global place: bucket 0 for most of it, bucket 1 for what is
** written once and read by the rest (path ids, shapes), applied first
** (layout.h, RG_KP_GLOBAL); both are the same keys in the store. */
static uint32_t global_place (rg_remote *r) {
  return place_index(r, RG_PLACE_GLOBAL, 0, 1);
}

static uint32_t first_place (rg_remote *r) {
  return place_index(r, RG_PLACE_GLOBAL, 1, 1);
}

/* Meta keys each place keeps its own of (a container's statistics, the
** last lsn): in the overlay, key | FF | u32 cid | u16 bucket of the place. */
static size_t own_key (rg_remote *r, uint32_t p, const uint8_t *k, size_t kn,
                       uint8_t *out) {
  memcpy(out, k, kn);
  out[kn] = 0xFF;
  rg_put_u32(out + kn + 1, r->places[p].cid);
  rg_put_u16(out + kn + 5, r->places[p].bucket);
  return kn + 7;
}

static int is_own_key (int tb, const uint8_t *k, size_t kn) {
  return tb == RG_DB_META &&
         ((kn == 5 && k[0] == RG_MK_STATS) ||
          (kn == sizeof(RG_META_LSN) - 1 && memcmp(k, RG_META_LSN, kn) == 0) ||
          (kn == sizeof(RG_META_EPOCH) - 1 &&
           memcmp(k, RG_META_EPOCH, kn) == 0));
}

/* An overlay key's length on the wire: an own key without its place. */
static size_t wire_kn (int tb, const ent *e) {
  size_t kn = e->kn;
  if (tb == RG_DB_META && kn > 7 && e->k[kn - 7] == 0xFF &&
      is_own_key(tb, e->k, kn - 7))
    kn -= 7;
  return kn;
}

static int nparts_of (rg_remote *r, uint32_t cid) {
  size_t i;
  for (i = 0; i < r->nspecs; i++)
    if (r->specs[i].cid == cid) return r->specs[i].nparts;
  return 0;
}

/* Learns a container's partitions from its stored spec's text: the one
** field of it that places keys.  container.c checked the spec before it
** was stored (rg_cspec_build); a spec without the field has one. */
static void learn_spec (rg_remote *r, const uint8_t *k, size_t kn,
                        const uint8_t *v, size_t vn) {
  cJSON *j = NULL;
  const cJSON *p;
  uint32_t cid;
  int nparts = 1;
  size_t i;
  rg_err e;
  if (kn != 5 || k[0] != RG_MK_SPEC || v == NULL) return;
  cid = rg_get_u32(k + 1);
  if (rg_json_parse((const char *)v, vn, &j, &e)) return;
  p = cJSON_GetObjectItemCaseSensitive(j, "physical_partitions");
  if (cJSON_IsNumber(p)) nparts = (int)p->valuedouble;
  cJSON_Delete(j);
  if (nparts < 1 || nparts > RG_MAX_PARTITIONS) return;
  for (i = 0; i < r->nspecs; i++)
    if (r->specs[i].cid == cid) { r->specs[i].nparts = nparts; return; }
  if (r->nspecs == r->capspecs) {
    size_t cap = r->capspecs ? r->capspecs * 2 : 16;
    spec *a = (spec *)realloc(r->specs, cap * sizeof(spec));
    if (a == NULL) { r->nomem = 1; return; }
    r->specs = a;
    r->capspecs = cap;
  }
  r->specs[r->nspecs].cid = cid;
  r->specs[r->nspecs].nparts = nparts;
  r->nspecs++;
}

static tplace *tplace_of (rg_remote *r, int tb, uint32_t place) {
  size_t i;
  for (i = 0; i < r->ntp; i++)
    if (r->tp[i].tb == tb && r->tp[i].place == place) return &r->tp[i];
  if (r->ntp == r->captp) {
    size_t cap = r->captp ? r->captp * 2 : 32;
    tplace *v = (tplace *)realloc(r->tp, cap * sizeof(tplace));
    if (v == NULL) { r->nomem = 1; return NULL; }
    r->tp = v;
    r->captp = cap;
  }
  memset(&r->tp[r->ntp], 0, sizeof(tplace));
  r->tp[r->ntp].tb = tb;
  r->tp[r->ntp].place = place;
  return &r->tp[r->ntp++];
}

static void need_add (rg_remote *r, const rg_need *n);

/* Asks for key k of table tb in place p. */
static void need_point (rg_remote *r, uint32_t p, int tb, const uint8_t *k,
                        size_t kn) {
  rg_need n;
  memset(&n, 0, sizeof(n));
  n.pl = r->places[p];
  n.tb = tb;
  n.k = k;
  n.kn = kn;
  need_add(r, &n);
}

/* Asks for a container's spec (its place depends on it). */
static void need_spec (rg_remote *r, uint32_t cid) {
  uint8_t k[5];
  ent *e;
  size_t kn = rg_meta_key(k, RG_MK_SPEC, cid, NULL, 0);
  if ((e = find(r, RG_DB_META, k, kn)) != NULL && e->known) return;
  need_point(r, global_place(r), RG_DB_META, k, kn);
}

/*
** Catalog epochs.  A container's catalog entries (its spec, procedures,
** triggers, functions, drop mark; and the scripts' version, which any
** container's change moves) are kept from call to call and trusted while
** the container's epoch holds: the global place keeps it beside them
** (RG_MK_EPOCH | cid, fetched with the first of them a call asks for),
** and each of its buckets a copy (RG_META_EPOCH).  A write set that
** changes a container's catalog gives it a new epoch, written in every
** bucket and in the global place (whose part applies last).  A call that
** trusted them checks, in one bucket of the container it reads, that the
** bucket's epoch is the one fetched with them: fetched with the run's
** other needs, or, in a bucket the write set writes, a condition of its
** commit.  Otherwise they are asked for again.  What is written once
** (path ids, shapes) is trusted once present.  The database's entries
** every container's calls read (the scripts' version, the throughput
** setting) are trusted while the epoch of a container the call uses
** holds: a change of the database's setting moves every container's
** epoch (its call reads every spec: throughput.c), and they are fetched
** again with a container's epoch whenever that is asked for, so that a
** container's epoch is never younger than what is trusted with it.
*/
/* The database's entries every call reads that its containers' epochs
** vouch for (a change to one moves every container's epoch). */
static const struct { const char *k; size_t n; } WIDE[] = {
  { RG_META_SCRIPTS, sizeof(RG_META_SCRIPTS) - 1 },
  { RG_META_THROUGHPUT, sizeof(RG_META_THROUGHPUT) - 1 } };

/* 1 and *cid for a catalog entry of container cid; 2 for the database's
** entries of WIDE; 0 for any other entry. */
static int catalog_of (int tb, const uint8_t *k, size_t kn, uint32_t *cid) {
  size_t i;
  if (tb != RG_DB_META) return 0;
  if (kn >= 5 && (k[0] == RG_MK_SPEC || k[0] == RG_MK_PROC ||
                  k[0] == RG_MK_TRIG || k[0] == RG_MK_UDF ||
                  k[0] == RG_MK_DROP)) {
    *cid = rg_get_u32(k + 1);
    return 1;
  }
  for (i = 0; i < sizeof(WIDE) / sizeof(WIDE[0]); i++)
    if (kn == WIDE[i].n && memcmp(k, WIDE[i].k, kn) == 0) return 2;
  return 0;
}

/* The database's entries trusted by their epochs (catalog_of 2) are
** asked for again, with a container's epoch. */
static void need_wide (rg_remote *r) {
  size_t i;
  for (i = 0; i < sizeof(WIDE) / sizeof(WIDE[0]); i++) {
    ent *e = find(r, RG_DB_META, (const uint8_t *)WIDE[i].k, WIDE[i].n);
    if (e == NULL || !e->known || e->stale != 3 || e->dirty) continue;
    e->stale = 2;
    need_point(r, e->place, RG_DB_META, e->k, e->kn);
  }
}

static int is_epoch_g (int tb, const uint8_t *k, size_t kn) {
  return tb == RG_DB_META && kn == 5 && k[0] == RG_MK_EPOCH;
}

/* Asks for container cid's epoch in the global place, unless known from
** this call's fetches (or asked already). */
static void need_epoch_g (rg_remote *r, uint32_t cid) {
  uint8_t k[5];
  size_t kn = rg_meta_key(k, RG_MK_EPOCH, cid, NULL, 0);
  ent *e = find(r, RG_DB_META, k, kn);
  if (e && ((e->known && e->stale == 0) || e->stale == 2 || e->guessed))
    return;
  if (e == NULL && (e = get_ent(r, RG_DB_META, k, kn,
                                global_place(r))) == NULL)
    return;
  if (e->known) e->stale = 2;
  else e->guessed = 1;
  need_point(r, global_place(r), RG_DB_META, k, kn);
  need_wide(r);
}

/* The place of bucket `range` of container cid (NONE: its spec is not
** known yet, and is now asked for). */
static uint32_t bucket_place (rg_remote *r, uint32_t cid, int range) {
  int np = nparts_of(r, cid);
  if (np == 0) { need_spec(r, cid); return NONE; }
  if (range < 0 || range >= np) return NONE;
  return place_index(r, cid, (uint32_t)range, (uint32_t)np);
}

static uint32_t hash_place (rg_remote *r, uint32_t cid, uint64_t hash) {
  int np = nparts_of(r, cid);
  if (np == 0) { need_spec(r, cid); return NONE; }
  return place_index(r, cid, (uint32_t)rg_range_of(hash, np), (uint32_t)np);
}

/*
** The place of an entry: what its key says (layout.c), else what its
** value or duplicate says, else the transaction's context (remote.h).
** `val` (an entry's value) may be NULL.
*/
static uint32_t place_of (rg_remote *r, int tb, const uint8_t *k, size_t kn,
                          const uint8_t *val, size_t vn) {
  rg_keyplace kp;
  unsigned ds = dupsize(tb);
  const uint8_t *dup = NULL;
  size_t dn = 0;
  if (ds && kn >= ds) { dup = k + kn - ds; dn = ds; kn -= ds; }
  if (rg_key_place(tb, k, kn, dup, dn, &kp)) return NONE;
  switch (kp.kind) {
    case RG_KP_GLOBAL: return kp.first ? first_place(r) : global_place(r);
    case RG_KP_HASH: return hash_place(r, kp.cid, kp.hash);
    case RG_KP_RANGE: return bucket_place(r, kp.cid, kp.range);
    case RG_KP_CID:
      if (val && vn >= 12 && rg_get_u32(val) == kp.cid)   /* TTL: its item */
        return hash_place(r, kp.cid, rg_get_u64(val + 4));
      if (r->cur_place != NONE && r->places[r->cur_place].cid == kp.cid)
        return r->cur_place;
      return NONE;
    default:                                            /* RG_KP_NONE */
      if (tb == RG_DB_META)                             /* the last lsn */
        return r->cur_place != NONE ? r->cur_place : global_place(r);
      if (tb == RG_DB_REFS && val && vn >= 12)          /* its item's */
        return hash_place(r, rg_get_u32(val), rg_get_u64(val + 4));
      if (kp.has_hash && r->cur_cid != 0)
        return hash_place(r, r->cur_cid, kp.hash);
      return r->cur_place;
  }
}

/* Is [lo .. hi] (hi NULL: to the end; lo_open: lo itself excluded) known
** in place p of table tb? */
static int covered (rg_remote *r, int tb, uint32_t p, const uint8_t *lo,
                    size_t lon, int lo_open, const uint8_t *hi, size_t hin) {
  spans *s = &r->cov[tb];
  size_t i;
  for (i = 0; i < s->n; i++) {
    span *x = &s->v[i];
    int c;
    if (x->place != p) continue;
    c = bcmp2(x->lo, x->lon, lo, lon);       /* starts at or before lo */
    if (c > 0 || (c == 0 && x->lo_open && !lo_open)) continue;
    if (x->hi_end) return 1;
    if (hi == NULL) continue;
    if (bcmp2(x->hi, x->hin, hi, hin) >= 0) return 1;
  }
  return 0;
}

/* Where the coverage of place p around key (k, kn) ends (*end, *endn;
** *to_end when it reaches the end): 1, or 0 when k is not covered. */
static int cover_end (rg_remote *r, int tb, uint32_t p, const uint8_t *k,
                      size_t kn, const uint8_t **end, size_t *endn,
                      int *to_end) {
  spans *s = &r->cov[tb];
  size_t i;
  int found = 0;
  for (i = 0; i < s->n; i++) {
    span *x = &s->v[i];
    int c;
    if (x->place != p) continue;
    c = bcmp2(x->lo, x->lon, k, kn);
    if (c > 0 || (c == 0 && x->lo_open)) continue;
    if (!x->hi_end && bcmp2(x->hi, x->hin, k, kn) < 0) continue;
    if (x->hi_end) { *to_end = 1; return 1; }
    if (!found || bcmp2(x->hi, x->hin, *end, *endn) > 0) {
      *end = x->hi;
      *endn = x->hin;
    }
    found = 1;
  }
  *to_end = 0;
  return found;
}

/* Adds a covered span, merged with those it overlaps or touches. */
static void cover (rg_remote *r, int tb, uint32_t p, const uint8_t *lo,
                   size_t lon, int lo_open, const uint8_t *hi, size_t hin,
                   int hi_end) {
  spans *s = &r->cov[tb];
  span nw;
  size_t i;
  memset(&nw, 0, sizeof(nw));
  nw.place = p;
  nw.lo = dupb(lo, lon);
  nw.lon = (uint32_t)lon;
  nw.lo_open = (uint8_t)lo_open;
  nw.hi_end = (uint8_t)hi_end;
  if (!hi_end) { nw.hi = dupb(hi, hin); nw.hin = (uint32_t)hin; }
  if (nw.lo == NULL || (!hi_end && nw.hi == NULL)) {
    free(nw.lo); free(nw.hi);
    r->nomem = 1;
    return;
  }
  for (i = 0; i < s->n;) {                /* absorb what it meets */
    span *x = &s->v[i];
    int meets;
    if (x->place != p) { i++; continue; }
    /* x ends at or after nw's start, and starts at or before its end */
    meets = (x->hi_end || bcmp2(x->hi, x->hin, nw.lo, nw.lon) >= 0) &&
            (nw.hi_end || bcmp2(x->lo, x->lon, nw.hi, nw.hin) <= 0);
    if (!meets) { i++; continue; }
    if (bcmp2(x->lo, x->lon, nw.lo, nw.lon) < 0 ||
        (bcmp2(x->lo, x->lon, nw.lo, nw.lon) == 0 && !x->lo_open)) {
      free(nw.lo);
      nw.lo = x->lo; nw.lon = x->lon; nw.lo_open = x->lo_open;
      x->lo = NULL;
    }
    if (x->hi_end) nw.hi_end = 1;
    if (nw.hi_end) { free(nw.hi); nw.hi = NULL; nw.hin = 0; }
    else if (bcmp2(x->hi, x->hin, nw.hi, nw.hin) > 0) {
      free(nw.hi);
      nw.hi = x->hi; nw.hin = x->hin;
      x->hi = NULL;
    }
    free(x->lo);
    free(x->hi);
    s->v[i] = s->v[--s->n];
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    span *v = (span *)realloc(s->v, cap * sizeof(span));
    if (v == NULL) { free(nw.lo); free(nw.hi); r->nomem = 1; return; }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = nw;
}

/* Forgets what is known of table tb in place p (a version changed).
** What the run wrote there stays, unknown now (the undo log names those
** entries); and if the run read or wrote there, what it read may be
** stale: it goes again whole (`moved`). */
static void forget (rg_remote *r, int tb, uint32_t p) {
  spans *s = &r->cov[tb];
  table *t = &r->t[tb];
  tplace *tp = tplace_of(r, tb, p);
  size_t i, j;
  int touched = tp != NULL && tp->ranged;
  for (i = 0; i < s->n;) {
    if (s->v[i].place == p) {
      free(s->v[i].lo);
      free(s->v[i].hi);
      s->v[i] = s->v[--s->n];
    }
    else i++;
  }
  for (i = 0; i < r->nundo; i++) r->undo[i].e->held = 1;
  for (i = j = 0; i < t->n; i++) {
    ent *e = t->v[i];
    if (e->place != p) { t->v[j++] = e; continue; }
    if (e->read || e->dirty || e->adding || e->held) touched = 1;
    if (!(e->dirty || e->adding || e->held)) { ent_free(e); continue; }
    side_set(&e->base, 0, NULL, 0);
    e->known = 0;
    e->stale = 0;
    if (!e->dirty && view(e)) r->nomem = 1;
    t->v[j++] = e;
  }
  t->n = j;
  for (i = 0; i < r->nundo; i++) r->undo[i].e->held = 0;
  if (touched) r->moved = 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** Needs
** ======================================================================
*/
static void need_add (rg_remote *r, const rg_need *n) {
  size_t i;
  uint8_t *k;
  for (i = 0; i < r->nneeds; i++) {
    const rg_need *x = &r->needs[i];
    if (x->tb == n->tb && x->range == n->range && x->back == n->back &&
        x->after == n->after && x->pl.cid == n->pl.cid &&
        x->pl.bucket == n->pl.bucket && x->kn == n->kn &&
        memcmp(x->k, n->k, n->kn) == 0)
      return;
  }
  if (r->nneeds == r->capneeds) {
    size_t cap = r->capneeds ? r->capneeds * 2 : 32;
    rg_need *v = (rg_need *)realloc(r->needs, cap * sizeof(rg_need));
    if (v == NULL) { r->nomem = 1; return; }
    r->needs = v;
    r->capneeds = cap;
  }
  if ((k = dupb(n->k, n->kn)) == NULL) { r->nomem = 1; return; }
  r->needs[r->nneeds] = *n;
  r->needs[r->nneeds].k = k;
  r->nneeds++;
}

static void needs_clear (rg_remote *r) {
  size_t i;
  for (i = 0; i < r->nneeds; i++) free((void *)r->needs[i].k);
  r->nneeds = 0;
  r->want_seqs = 0;
}

/* Asks for a range of table tb in place p: from (k, kn), or from where
** its coverage around k ends. */
static void need_range (rg_remote *r, int tb, uint32_t p, const uint8_t *k,
                        size_t kn, int after, int back) {
  rg_need n;
  tplace *tp = tplace_of(r, tb, p);
  uint32_t limit = FIRST_RANGE;
  const uint8_t *end = NULL;
  size_t endn = 0;
  int to_end, walk = 0;
  memset(&n, 0, sizeof(n));
  n.pl = r->places[p];
  n.tb = tb;
  n.range = 1;
  n.back = back;
  n.limit = limit;
  n.k = k;
  n.kn = kn;
  n.after = after;
  if (!back && cover_end(r, tb, p, k, kn, &end, &endn, &to_end) && !to_end) {
    n.k = end;                         /* what is known already is not asked */
    n.kn = endn;
    n.after = 1;
    walk = 1;
  }
  if ((walk || back) && tp) {          /* a walk going on: more each time */
    uint32_t i;                        /* (a seek elsewhere: FIRST_RANGE) */
    for (i = 0; i < tp->fetches && n.limit < MAX_RANGE; i++) n.limit *= 4;
  }
  need_add(r, &n);
}
/* }===================================================================== */


/*
** {=====================================================================
** The seam: reads
** ======================================================================
*/
/* The transaction's context (remote.h): the bucket of the entry it last
** read or wrote, the container whose spec it last read. */
static void ctx_item (rg_remote *r, int tb, uint32_t place, const uint8_t *k,
                      size_t kn) {
  if (place == NONE) return;
  if (r->places[place].cid != RG_PLACE_GLOBAL && tb != RG_DB_REFS &&
      tb != RG_DB_TTL && tb != RG_DB_META) {
    r->cur_place = place;
    r->cur_cid = r->places[place].cid;
  }
  else if (tb == RG_DB_META && kn == 5 && k[0] == RG_MK_SPEC)
    r->cur_cid = rg_get_u32(k + 1);
}

/* A container's statistics: the sum of its partitions' (the places that
** keep them, RG_KP_CID with `stats`), or needs for those not fetched. */
static int stats_get (rg_remote *r, const uint8_t *k, size_t kn, rg_val *v) {
  static uint8_t sum[16];
  uint32_t cid = rg_get_u32(k + 1);
  int np = nparts_of(r, cid), b, missing = 0;
  uint64_t items = 0, bytes = 0;
  if (np == 0) { need_spec(r, cid); return RG_NOTFOUND; }
  for (b = 0; b < np; b++) {
    uint32_t p = place_index(r, cid, (uint32_t)b, (uint32_t)np);
    uint8_t pk[16];
    ent *x = find(r, RG_DB_META, pk, own_key(r, p, k, kn, pk));
    if (x == NULL || (!x->known && !x->dirty)) {
      need_point(r, p, RG_DB_META, k, kn);
      missing = 1;
      continue;
    }
    if (x->cur.have && x->cur.n == 16) {
      items += rg_get_u64(x->cur.v);
      bytes += rg_get_u64(x->cur.v + 8);
    }
  }
  if (missing) return RG_NOTFOUND;
  rg_put_u64(sum, items);
  rg_put_u64(sum + 8, bytes);
  v->p = sum;
  v->n = 16;
  return 0;
}

static int is_stats_key (int tb, const uint8_t *k, size_t kn) {
  return tb == RG_DB_META && kn == 5 && k[0] == RG_MK_STATS;
}

/* A point read of a plain table: 0 and *v, or RG_NOTFOUND (also while
** unknown: then guessed, and needed). */
static int point (rg_remote *r, int tb, const uint8_t *k, size_t kn,
                  rg_val *v) {
  ent *e = find(r, tb, k, kn);
  uint32_t p, cid;
  if (e == NULL) {
    if ((p = place_of(r, tb, k, kn, NULL, 0)) == NONE)
      return RG_NOTFOUND;               /* its spec is asked for */
    if (covered(r, tb, p, k, kn, 0, k, kn)) {
      tplace *tp = tplace_of(r, tb, p);  /* absent, as a range says */
      if (tp) tp->ranged = 1;
      ctx_item(r, tb, p, k, kn);
      return RG_NOTFOUND;
    }
    if ((e = get_ent(r, tb, k, kn, p)) == NULL) return ENOMEM;
  }
  if (tb == RG_DB_PARTS && r->writing && !e->known && !e->dirty) {
    /* a partition's size, read to check its limit: the commit checks the
       bound of what it adds (r_add), so a write need not fetch it first */
    ctx_item(r, tb, e->place, k, kn);
    return RG_NOTFOUND;
  }
  if (e->known && e->stale == 1 && !e->dirty) {
    need_point(r, e->place, tb, k, kn); /* what an earlier call read: again */
    e->stale = 2;
    if (catalog_of(tb, k, kn, &cid) == 1) need_epoch_g(r, cid);
  }
  if (!e->dirty) {                      /* not its own write: a condition */
    if (!e->known && !e->guessed) {
      need_point(r, e->place, tb, k, kn);
      e->guessed = 1;
      if (catalog_of(tb, k, kn, &cid) == 1) need_epoch_g(r, cid);
    }
    e->read = 1;
  }
  ctx_item(r, tb, e->place, k, kn);
  if (!now_of(e)->have) return RG_NOTFOUND;
  v->p = now_of(e)->v;
  v->n = now_of(e)->n;
  return 0;
}

static int r_get (rg_txn *tx, int tb, const void *kv, size_t kn, rg_val *v) {
  rg_remote *r = R(tx);
  const uint8_t *k = (const uint8_t *)kv;
  rg_assert(r->active);
  if (tb >= KEPT) return RG_NOTFOUND;
  if (is_stats_key(tb, k, kn)) return stats_get(r, k, kn, v);
  if (dupsize(tb)) {                    /* the key's first duplicate */
    rg_cur *c;
    rg_val kk, vv;
    int rc;
    if ((rc = remote_ops.cur_open(tx, tb, &c))) return rc;
    kk.p = k;
    kk.n = kn;
    rc = remote_ops.cur_get(c, &kk, &vv, RG_SET);
    remote_ops.cur_close(c);
    if (rc == 0) *v = vv;
    return rc;
  }
  return point(r, tb, k, kn, v);
}
/* }===================================================================== */


/*
** {=====================================================================
** The seam: writes and savepoints
** ======================================================================
*/
static int log_undo (rg_remote *r, ent *e) {
  undo *u;
  if (r->savepoints == 0) return 0;
  if (r->nundo == r->capundo) {
    size_t cap = r->capundo ? r->capundo * 2 : 64;
    undo *v = (undo *)realloc(r->undo, cap * sizeof(undo));
    if (v == NULL) return ENOMEM;
    r->undo = v;
    r->capundo = cap;
  }
  u = &r->undo[r->nundo];
  memset(u, 0, sizeof(*u));
  u->e = e;
  if (side_copy(&u->cur, &e->cur)) return ENOMEM;
  u->dirty = e->dirty;
  u->adding = e->adding;
  u->add_items = e->add_items;
  u->add_bytes = e->add_bytes;
  r->nundo++;
  return 0;
}

/* The entry a write goes to, its undo logged. */
static ent *write_ent (rg_remote *r, int tb, const uint8_t *k, size_t kn,
                       const uint8_t *val, size_t vn, int *rc) {
  ent *e = find(r, tb, k, kn);
  uint32_t p;
  *rc = 0;
  rg_assert(r->active && r->writing);
  if (e == NULL) {
    if ((p = place_of(r, tb, k, kn, val, vn)) == NONE) {
      *rc = RG_NOPLACE;
      return NULL;
    }
    if ((e = get_ent(r, tb, k, kn, p)) == NULL) { *rc = ENOMEM; return NULL; }
  }
  if ((*rc = log_undo(r, e))) return NULL;
  ctx_item(r, tb, e->place, k, kn);
  r->wbytes += kn + vn + 16;           /* (a reserve adds its value's own) */
  return e;
}

static int r_put (rg_txn *tx, int tb, const void *k, size_t kn,
                  const void *v, size_t vn, unsigned flags) {
  rg_remote *r = R(tx);
  int rc;
  ent *e;
  rg_assert(dupsize(tb) == 0);
  if ((e = write_ent(r, tb, (const uint8_t *)k, kn, (const uint8_t *)v, vn,
                     &rc)) == NULL)
    return rc;
  if (flags & RG_KV_NOOVERWRITE) {
    e->read = 1;                       /* it decides: a condition */
    if (!e->known && !e->guessed && !e->dirty) e->guessed = 1;
    if (now_of(e)->have) return RG_KEYEXIST;
  }
  if (side_set(&e->cur, 1, v, vn)) return ENOMEM;
  e->dirty = 1;
  e->adding = 0;
  if (tb == RG_DB_META) learn_spec(r, (const uint8_t *)k, kn,
                                   (const uint8_t *)v, vn);
  return 0;
}

static void *r_reserve (rg_txn *tx, int tb, const void *k, size_t kn,
                        size_t vn, int *rc) {
  rg_remote *r = R(tx);
  ent *e;
  if ((e = write_ent(r, tb, (const uint8_t *)k, kn, NULL, 0, rc)) == NULL)
    return NULL;
  side_free(&e->cur);
  r->wbytes += vn;
  if ((e->cur.v = (uint8_t *)malloc(vn ? vn : 1)) == NULL) {
    *rc = ENOMEM;
    return NULL;
  }
  e->cur.n = (uint32_t)vn;
  e->cur.have = 1;
  e->dirty = 1;
  e->adding = 0;
  return e->cur.v;
}

static int r_del (rg_txn *tx, int tb, const void *k, size_t kn) {
  rg_remote *r = R(tx);
  int rc, had;
  ent *e;
  rg_assert(dupsize(tb) == 0);          /* (no caller deletes all duplicates) */
  if ((e = write_ent(r, tb, (const uint8_t *)k, kn, NULL, 0, &rc)) == NULL)
    return rc;
  had = now_of(e)->have;
  side_set(&e->cur, 0, NULL, 0);
  e->dirty = 1;
  e->adding = 0;
  return had ? 0 : RG_NOTFOUND;
}

static int r_dput (rg_txn *tx, int tb, const void *k, size_t kn,
                   const void *d, size_t dn, unsigned flags) {
  rg_remote *r = R(tx);
  uint8_t buf[RG_MAX_KEY + 16];
  int rc;
  ent *e;
  (void)flags;
  rg_assert(dupsize(tb) == dn && kn + dn <= sizeof(buf));
  memcpy(buf, k, kn);
  memcpy(buf + kn, d, dn);
  if ((e = write_ent(r, tb, buf, kn + dn, NULL, 0, &rc)) == NULL) return rc;
  if (now_of(e)->have) return RG_KEYEXIST;
  if (side_set(&e->cur, 1, NULL, 0)) return ENOMEM;
  e->dirty = 1;
  return 0;
}

static int r_ddel (rg_txn *tx, int tb, const void *k, size_t kn,
                   const void *d, size_t dn) {
  rg_remote *r = R(tx);
  uint8_t buf[RG_MAX_KEY + 16];
  int rc, had;
  ent *e;
  rg_assert(dupsize(tb) == dn && kn + dn <= sizeof(buf));
  memcpy(buf, k, kn);
  memcpy(buf + kn, d, dn);
  if ((e = write_ent(r, tb, buf, kn + dn, NULL, 0, &rc)) == NULL) return rc;
  had = now_of(e)->have || !e->known;   /* unknown: the place may have it */
  side_set(&e->cur, 0, NULL, 0);
  e->dirty = 1;
  return had ? 0 : RG_NOTFOUND;
}

static size_t r_savepoint (rg_txn *tx) {
  rg_remote *r = R(tx);
  r->savepoints++;
  return r->nundo;
}

static void r_release (rg_txn *tx, size_t mark) {
  rg_remote *r = R(tx);
  rg_assert(r->savepoints > 0 && mark <= r->nundo);
  (void)mark;
  if (--r->savepoints == 0) {
    size_t i;
    for (i = 0; i < r->nundo; i++) side_free(&r->undo[i].cur);
    r->nundo = 0;
  }
}

static int r_rollback (rg_txn *tx, size_t mark) {
  rg_remote *r = R(tx);
  rg_assert(r->savepoints > 0 && mark <= r->nundo);
  while (r->nundo > mark) {
    undo *u = &r->undo[--r->nundo];
    ent *e = u->e;
    e->dirty = u->dirty;
    e->adding = u->adding;
    e->add_items = u->add_items;
    e->add_bytes = u->add_bytes;
    if (e->dirty) {                     /* its own write before the mark */
      side_free(&e->cur);
      e->cur = u->cur;                  /* (moved, not copied) */
    }
    else {                              /* base may be newer than u->cur */
      side_free(&u->cur);
      if (view(e)) r->nomem = 1;
    }
  }
  r->savepoints--;
  return 0;
}

static int r_lsn (rg_txn *tx, const void *k, size_t kn, uint64_t *lsn) {
  rg_remote *r = R(tx);
  (void)k; (void)kn;
  r->lsn_taken = 1;
  *lsn = r->stand_in;
  return 0;
}

static int r_last (rg_txn *tx, uint32_t cid, int range, uint64_t *lsn) {
  rg_remote *r = R(tx);
  uint32_t p = cid ? bucket_place(r, cid, range) : global_place(r);
  uint8_t pk[32];
  size_t kn = sizeof(RG_META_LSN) - 1;
  ent *e;
  *lsn = 0;
  if (p == NONE) return 0;              /* its spec is asked for */
  e = find(r, RG_DB_META, pk, own_key(r, p, (const uint8_t *)RG_META_LSN, kn,
                                      pk));
  if (e == NULL || !e->known) {
    need_point(r, p, RG_DB_META, (const uint8_t *)RG_META_LSN, kn);
    return 0;
  }
  if (e->cur.have && e->cur.n == 8) *lsn = rg_get_u64(e->cur.v);
  return 0;
}

static int r_seqs (rg_txn *tx, uint32_t n, uint32_t *first) {
  rg_remote *r = R(tx);
  uint32_t left = r->seq_end - r->seq_first;
  if (r->seq_first == 0 || left - r->seq_taken < n || r->want_seqs) {
    /* a block from the host for all the run takes; meanwhile stand-ins
       that no item keeps */
    uint32_t all = r->seq_taken + n;
    if (r->want_seqs < all) r->want_seqs = all < 256 ? 256 : all;
    r->seq_taken = all;
    *first = 0xFFFFFF00u - n;
    return 0;
  }
  *first = r->seq_first + r->seq_taken;
  r->seq_taken += n;
  return 0;
}

/* The seqs the run took are spent: a write set made with them went out. */
static void seqs_spent (rg_remote *r) {
  if (r->want_seqs == 0 && r->seq_first != 0) r->seq_first += r->seq_taken;
  r->seq_taken = 0;
}

static int r_add (rg_txn *tx, int tb, const void *k, size_t kn, int64_t dn,
                  int64_t db, uint64_t bound, unsigned flags) {
  rg_remote *r = R(tx);
  uint8_t pk[RG_MAX_KEY + 8], buf[16];
  const uint8_t *key = (const uint8_t *)k;
  uint64_t n = 0, b = 0;
  int rc;
  ent *e;
  if (is_stats_key(tb, key, kn)) {      /* the place's own copy (stats_get) */
    uint32_t p = r->cur_place;
    if (p == NONE || r->places[p].cid != rg_get_u32(key + 1))
      return RG_NOPLACE;
    kn = own_key(r, p, key, kn, pk);
    key = pk;
    if ((e = find(r, tb, key, kn)) == NULL &&
        (e = get_ent(r, tb, key, kn, p)) == NULL)
      return ENOMEM;
    if ((rc = log_undo(r, e))) return rc;
  }
  else if ((e = write_ent(r, tb, key, kn, NULL, 0, &rc)) == NULL) return rc;
  if (now_of(e)->have && now_of(e)->n == 16) {
    n = rg_get_u64(now_of(e)->v);
    b = rg_get_u64(now_of(e)->v + 8);
  }
  n += (uint64_t)dn;
  b += (uint64_t)db;
  rg_put_u64(buf, n);
  rg_put_u64(buf + 8, b);
  if (n == 0 && (flags & RG_KV_DROP0)) side_set(&e->cur, 0, NULL, 0);
  else if (side_set(&e->cur, 1, buf, 16)) return ENOMEM;
  if (!e->dirty) {
    e->adding = 1;
    e->add_items += dn;
    e->add_bytes += db;
    e->add_bound = bound;
    e->add_flags = flags;
  }
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** The seam: cursors
** ======================================================================
*/
static int r_cur_open (rg_txn *tx, int tb, rg_cur **out) {
  rcur *c = (rcur *)calloc(1, sizeof(rcur));
  *out = NULL;
  if (c == NULL) return ENOMEM;
  c->base.ops = &remote_ops;
  c->r = R(tx);
  c->tb = tb;
  *out = &c->base;
  return 0;
}

static void r_cur_close (rg_cur *cu) {
  rcur *c = RC(cu);
  free(c->pos);
  free(c->places);
  free(c);
}

static void cur_add (rcur *c, uint32_t p) {
  if (p == NONE) return;
  if (c->nplaces == c->capplaces) {
    int cap = c->capplaces ? c->capplaces * 2 : 16;
    uint32_t *v = (uint32_t *)realloc(c->places, (size_t)cap * sizeof(uint32_t));
    if (v == NULL) { c->r->nomem = 1; return; }
    c->places = v;
    c->capplaces = cap;
  }
  c->places[c->nplaces++] = p;
}

/* The places a cursor of table tb walks, from its first key. */
static void cur_places (rcur *c, const uint8_t *k, size_t kn) {
  rg_remote *r = c->r;
  rg_keyplace kp;
  int np, b, last;
  int routable = 0;               /* placed by the partition hash */
  uint32_t cid = 0;
  c->nplaces = 0;
  if (c->tb >= KEPT) return;                 /* none: an empty table */
  if (rg_key_place(c->tb, k, kn, NULL, 0, &kp) == 0) {
    switch (kp.kind) {
      case RG_KP_GLOBAL:
        cur_add(c, kp.first ? first_place(r) : global_place(r));
        c->placed = 1;
        return;
      case RG_KP_RANGE:
        if (kn >= 6) {
          uint32_t p = bucket_place(r, kp.cid, kp.range);
          if (p != NONE) { cur_add(c, p); c->placed = 1; }
          return;
        }
        cid = kp.cid;
        break;
      case RG_KP_HASH:                  /* from an item on, as locally: */
        cid = kp.cid;                   /* every bucket (step skips those */
        routable = 1;                   /* whose keys lie elsewhere) */
        break;
      case RG_KP_CID:
        cid = kp.cid;
        break;
      default:
        if (c->tb == RG_DB_REFS && kn > 0 && r->cur_place != NONE) {
          cur_add(c, r->cur_place);
          c->placed = 1;
          return;
        }
        if (c->tb == RG_DB_REFS) {      /* the whole table: every container */
          size_t i;
          for (i = 0; i < r->nspecs; i++)
            for (b = 0; b < r->specs[i].nparts; b++)
              cur_add(c, place_index(r, r->specs[i].cid, (uint32_t)b,
                                     (uint32_t)r->specs[i].nparts));
          c->placed = 1;
          return;
        }
        cid = r->cur_cid;
        routable = c->tb == RG_DB_INDEX;  /* by its entries' references */
    }
  }
  else if (kn >= 4) cid = rg_get_u32(k);     /* a prefix of a cid's keys */
  if (cid == 0) return;
  if ((np = nparts_of(r, cid)) == 0) { need_spec(r, cid); return; }
  b = 0;
  last = np - 1;
  if (routable && c->rmask) {           /* the route's buckets: one run */
    b = rg_range_of(c->rhash & c->rmask, np);
    last = rg_range_of(c->rhash | ~c->rmask, np);
  }
  for (; b <= last; b++)
    cur_add(c, place_index(r, cid, (uint32_t)b, (uint32_t)np));
  c->placed = 1;
}

static int in_places (const rcur *c, uint32_t p) {
  int i;
  for (i = 0; i < c->nplaces; i++) if (c->places[i] == p) return 1;
  return 0;
}

/* The keys place p holds in a table placed by the partition hash (items,
** unique, parts: cid | u64 hash ...): from lo (cid | the bucket's first
** hash) to before hi; 0 for another table or the global place.  A bucket's
** hashes are one run (rg_range_of). */
static int hash_span (rg_remote *r, int tb, uint32_t p, uint8_t lo[12],
                      uint8_t hi[12]) {
  const rg_place *pl = &r->places[p];
  uint64_t np = pl->buckets, b = pl->bucket;
  if ((tb != RG_DB_ITEMS && tb != RG_DB_UNIQUE && tb != RG_DB_PARTS) ||
      pl->cid == RG_PLACE_GLOBAL || np == 0)
    return 0;
  rg_put_u32(lo, pl->cid);
  rg_put_u64(lo + 4, rg_range_start((int)b, (int)np));
  if (b + 1 == np) {                    /* to the end of the container's */
    rg_put_u32(hi, pl->cid + 1);
    rg_put_u64(hi + 4, 0);
  }
  else {
    rg_put_u32(hi, pl->cid);
    rg_put_u64(hi + 4, rg_range_start((int)b + 1, (int)np));
  }
  return 1;
}

/* Can place p hold an entry of table tb between a and b (a NULL: from the
** start; b NULL: to the end)? */
static int may_hold (rg_remote *r, int tb, uint32_t p, const uint8_t *a,
                     size_t an, const uint8_t *b, size_t bn) {
  uint8_t lo[12], hi[12];
  if (!hash_span(r, tb, p, lo, hi)) return 1;
  if (a && bcmp2(a, an, hi, 12) >= 0) return 0;
  if (b && bcmp2(b, bn, lo, 12) < 0) return 0;
  return 1;
}

/* The next entry of the cursor's places strictly after (or at, `incl`)
** (k, kn), forwards or backwards, that the transaction sees present:
** its index, or -1.  Stops where a place is not known up to it, asking
** for what it lacks (then -2). */
static long step (rcur *c, const uint8_t *k, size_t kn, int incl, int back) {
  rg_remote *r = c->r;
  table *t = &r->t[c->tb];
  long i, found = -1;
  int j, jj, missing = 0;
  int by_hash = c->tb == RG_DB_ITEMS || c->tb == RG_DB_UNIQUE ||
                c->tb == RG_DB_PARTS;
  if (!back) {
    i = (long)lower(t, k, kn);
    if (!incl && i < (long)t->n && bcmp2(t->v[i]->k, t->v[i]->kn, k, kn) == 0)
      i++;
    for (; i < (long)t->n; i++) {
      ent *e = t->v[i];
      if (!in_places(c, e->place) || !now_of(e)->have) continue;
      found = i;
      break;
    }
  }
  else {
    i = (long)lower(t, k, kn) - 1;
    if (incl && (size_t)(i + 1) < t->n &&
        bcmp2(t->v[i + 1]->k, t->v[i + 1]->kn, k, kn) == 0)
      i++;
    for (; i >= 0; i--) {
      ent *e = t->v[i];
      if (!in_places(c, e->place) || !now_of(e)->have) continue;
      found = i;
      break;
    }
  }
  for (jj = 0; jj < c->nplaces; jj++) {  /* every place known that far? */
    uint32_t p;
    tplace *tp;
    int ok;
    const uint8_t *fk = found >= 0 ? t->v[found]->k : NULL;
    size_t fn = found >= 0 ? t->v[found]->kn : 0;
    if (c->lon && !back && c->hin &&    /* nothing past the bound is read */
        (fk == NULL || bcmp2(fk, fn, c->hi, c->hin) > 0)) {
      fk = c->hi;
      fn = c->hin;
    }
    if (c->lon && back && (fk == NULL || bcmp2(fk, fn, c->lo, c->lon) < 0)) {
      fk = c->lo;
      fn = c->lon;
    }
    /* (the buckets of a table placed by hash come in key order: walked in
       the cursor's direction, the first one not known is the one to ask) */
    j = back ? c->nplaces - 1 - jj : jj;
    p = c->places[j];
    tp = tplace_of(r, c->tb, p);
    if (!back ? !may_hold(r, c->tb, p, k, kn, fk, fn)
              : !may_hold(r, c->tb, p, fk, fn, k, kn))
      continue;                         /* nothing of its there */
    if (tp) tp->ranged = 1;
    if (!back)
      ok = fk ? covered(r, c->tb, p, k, kn, !incl, fk, fn)
              : covered(r, c->tb, p, k, kn, !incl, NULL, 0);
    else
      ok = fk ? covered(r, c->tb, p, fk, fn, 0, k, kn)
              : covered(r, c->tb, p, (const uint8_t *)"", 0, 0, k, kn);
    if (!ok) {
      need_range(r, c->tb, p, k, kn, !incl, back);
      missing = 1;
      if (by_hash) break;               /* the later ones wait for it */
    }
  }
  if (missing) return -2;
  return found;
}

static int land (rcur *c, long i, rg_val *k, rg_val *v) {
  rg_remote *r = c->r;
  ent *e;
  unsigned ds = dupsize(c->tb);
  if (i < 0) {
    if (i == -2) c->stopped = 1;
    c->at = 0;
    return RG_NOTFOUND;
  }
  e = r->t[c->tb].v[i];
  free(c->pos);
  if ((c->pos = dupb(e->k, e->kn)) == NULL) return ENOMEM;
  c->posn = e->kn;
  c->at = 1;
  ctx_item(r, c->tb, e->place, e->k, e->kn);
  if (ds) {
    k->p = e->k;
    k->n = e->kn - ds;
    v->p = e->k + e->kn - ds;
    v->n = ds;
  }
  else {
    k->p = e->k;
    k->n = e->kn;
    v->p = now_of(e)->v;
    v->n = now_of(e)->n;
  }
  return 0;
}

static int r_cur_get (rg_cur *cu, rg_val *k, rg_val *v, int op) {
  rcur *c = RC(cu);
  rg_remote *r = c->r;
  unsigned ds = dupsize(c->tb);
  uint8_t key[RG_MAX_KEY + 16], hi[RG_MAX_KEY + 16];
  size_t kn = 0;
  long i;
  int rc;
  /* a move from where it is stops where it ran into what is not fetched;
     a cursor put at a key starts again */
  if (op == RG_SEEK || op == RG_SET || op == RG_BOTH ||
      op == RG_BOTH_RANGE || op == RG_FIRST || op == RG_LAST ||
      op == RG_SEEK_FLAT)
    c->stopped = 0;
  else if (c->stopped) return RG_NOTFOUND;
  switch (op) {
    case RG_SEEK: case RG_SET: case RG_BOTH: case RG_BOTH_RANGE:
    case RG_SEEK_FLAT:
      if (k->n > (op == RG_SEEK_FLAT ? RG_MAX_KEY + 16 : RG_MAX_KEY))
        return RG_NOTFOUND;
      memcpy(key, k->p, k->n);
      kn = k->n;
      if (op == RG_BOTH || op == RG_BOTH_RANGE) {
        memcpy(key + kn, v->p, v->n);
        kn += v->n;
      }
      /* a cursor is where the key it is put at says (or the context
         then: a refs cursor looks up seqs of many partitions) */
      c->placed = 0;
      cur_places(c, key, kn);
      if (!c->placed) { c->stopped = 1; return RG_NOTFOUND; }
      break;
    case RG_FIRST: case RG_LAST:
      c->placed = 0;
      cur_places(c, (const uint8_t *)"", 0);
      if (!c->placed) { c->stopped = 1; return RG_NOTFOUND; }
      break;
    default:
      if (!c->at && !(op == RG_PREV && c->past)) return RG_NOTFOUND;
  }
  c->past = 0;
  switch (op) {
    case RG_FIRST:
      return land(c, step(c, (const uint8_t *)"", 0, 1, 0), k, v);
    case RG_LAST:
      memset(hi, 0xFF, sizeof(hi));
      return land(c, step(c, hi, RG_MAX_KEY + 16, 1, 1), k, v);
    case RG_NEXT:
      return land(c, step(c, c->pos, c->posn, 0, 0), k, v);
    case RG_PREV:
      return land(c, step(c, c->pos, c->posn, 0, 1), k, v);
    case RG_SEEK_FLAT:                  /* the pairs are kept flat here */
      return land(c, step(c, key, kn, 1, 0), k, v);
    case RG_SEEK:
      i = step(c, key, kn, 1, 0);
      if (i == -1 && !ds) {             /* past the end: keep where */
        free(c->pos);
        if ((c->pos = dupb(key, kn)) == NULL) return ENOMEM;
        c->posn = (uint32_t)kn;
        c->at = 0;
        c->past = 1;
        return RG_NOTFOUND;
      }
      if (ds && i >= 0) {               /* LMDB compares the keys alone: */
        ent *e = r->t[c->tb].v[i];      /* a key that is a proper prefix */
        size_t en = e->kn - ds;         /* of k is before k, dups and all */
        if (en < kn && memcmp(e->k, key, en) == 0) {
          memcpy(hi, e->k, en);
          memset(hi + en, 0xFF, ds);
          i = step(c, hi, en + ds, 0, 0);
        }
      }
      return land(c, i, k, v);
    case RG_CURRENT:
      i = (long)lower(&r->t[c->tb], c->pos, c->posn);
      return land(c, i, k, v);
    case RG_SET:                        /* exactly key k (its first dup) */
      if (!ds) {                        /* a point read */
        rg_val pv;
        if ((rc = point(r, c->tb, key, kn, &pv))) { c->at = 0; return rc; }
        i = (long)lower(&r->t[c->tb], key, kn);
        return land(c, i, k, v);
      }
      i = step(c, key, kn, 1, 0);
      if (i >= 0) {
        ent *e = r->t[c->tb].v[i];
        if (e->kn != kn + ds || memcmp(e->k, key, kn) != 0) i = -1;
      }
      return land(c, i, k, v);
    case RG_BOTH:
      i = step(c, key, kn, 1, 0);
      if (i >= 0) {
        ent *e = r->t[c->tb].v[i];
        if (e->kn != kn || memcmp(e->k, key, kn) != 0) i = -1;
      }
      return land(c, i, k, v);
    case RG_BOTH_RANGE:
      i = step(c, key, kn, 1, 0);
      if (i >= 0) {
        ent *e = r->t[c->tb].v[i];
        if (e->kn != kn || memcmp(e->k, key, kn - ds) != 0) i = -1;
      }
      return land(c, i, k, v);
    case RG_NEXT_DUP: case RG_NEXT_NODUP: case RG_PREV_NODUP:
    case RG_LAST_DUP: {
      size_t keyn = c->posn - ds;
      memcpy(key, c->pos, keyn);
      if (op == RG_NEXT_DUP) {
        i = step(c, c->pos, c->posn, 0, 0);
        if (i >= 0) {
          ent *e = r->t[c->tb].v[i];
          if (e->kn != c->posn || memcmp(e->k, key, keyn) != 0) {
            i = -1;
            c->at = 1;                  /* stays where it was */
            return RG_NOTFOUND;
          }
        }
        return land(c, i, k, v);
      }
      if (op == RG_NEXT_NODUP) {        /* past every dup of this key */
        memcpy(hi, key, keyn);
        memset(hi + keyn, 0xFF, ds);
        return land(c, step(c, hi, keyn + ds, 0, 0), k, v);
      }
      if (op == RG_PREV_NODUP)          /* before every dup of this key */
        return land(c, step(c, key, keyn, 0, 1), k, v);
      memcpy(hi, key, keyn);            /* RG_LAST_DUP */
      memset(hi + keyn, 0xFF, ds);
      return land(c, step(c, hi, keyn + ds, 1, 1), k, v);
    }
    default:
      return RG_NOTFOUND;
  }
}

static int r_cur_count (rg_cur *cu, size_t *n) {
  rcur *c = RC(cu);
  rg_remote *r = c->r;
  unsigned ds = dupsize(c->tb);
  table *t = &r->t[c->tb];
  size_t i, keyn;
  *n = 0;
  if (!c->at || ds == 0) { *n = c->at; return 0; }
  keyn = c->posn - ds;
  {                                     /* known whole? */
    uint8_t lo[RG_MAX_KEY + 16], hi[RG_MAX_KEY + 16];
    int j, missing = 0;
    memcpy(lo, c->pos, keyn);
    memcpy(hi, c->pos, keyn);
    memset(hi + keyn, 0xFF, ds);
    for (j = 0; j < c->nplaces; j++)
      if (!covered(r, c->tb, c->places[j], lo, keyn, 0, hi, keyn + ds)) {
        need_range(r, c->tb, c->places[j], lo, keyn, 0, 0);
        missing = 1;
      }
    if (missing) return 0;
  }
  for (i = lower(t, c->pos, keyn); i < t->n; i++) {
    ent *e = t->v[i];
    if (e->kn != keyn + ds || memcmp(e->k, c->pos, keyn) != 0) break;
    if (in_places(c, e->place) && now_of(e)->have) (*n)++;
  }
  return 0;
}

static int r_cur_put (rg_cur *cu, const void *k, size_t kn, const void *v,
                      size_t vn, unsigned flags) {
  rcur *c = RC(cu);
  rg_txn *tx = &c->r->tx.base;
  int rc = dupsize(c->tb) ? r_dput(tx, c->tb, k, kn, v, vn, flags)
                          : r_put(tx, c->tb, k, kn, v, vn, flags);
  if (rc == 0) {
    free(c->pos);
    c->posn = (uint32_t)(kn + (dupsize(c->tb) ? vn : 0));
    if ((c->pos = (uint8_t *)malloc(c->posn)) == NULL) return ENOMEM;
    memcpy(c->pos, k, kn);
    if (dupsize(c->tb)) memcpy(c->pos + kn, v, vn);
    c->at = 1;
  }
  return rc;
}

static int r_cur_del (rg_cur *cu) {
  rcur *c = RC(cu);
  rg_txn *tx = &c->r->tx.base;
  unsigned ds = dupsize(c->tb);
  if (!c->at) return RG_NOTFOUND;
  if (ds) return r_ddel(tx, c->tb, c->pos, c->posn - ds, c->pos + c->posn - ds,
                        ds);
  return r_del(tx, c->tb, c->pos, c->posn);
}

/* The bytes the transaction's writes gave (keys and values, with a
** little for each entry's bookkeeping): what the write set will hold at
** most, the bound of a script's transaction as locally. */
static uint64_t r_pending (rg_txn *tx) {
  return R(tx)->wbytes;
}

static void r_cur_bound (rg_cur *cu, const void *prefix, size_t n) {
  rcur *c = RC(cu);
  size_t i;
  c->lon = c->hin = 0;
  if (n == 0 || n > RG_MAX_KEY) return;
  memcpy(c->lo, prefix, n);
  c->lon = n;
  memcpy(c->hi, prefix, n);
  for (i = n; i > 0; i--)               /* the first key past the prefix */
    if (c->hi[i - 1] != 0xFF) {
      c->hi[i - 1]++;
      c->hin = i;
      return;
    }
}

static void r_cur_route (rg_cur *cu, uint64_t hash, uint64_t mask) {
  rcur *c = RC(cu);
  c->rhash = hash & mask;
  c->rmask = mask;
}

static const rg_kv_ops remote_ops = {
  r_get, r_put, r_reserve, r_del, r_dput, r_ddel,
  r_cur_open, r_cur_close, r_cur_get, r_cur_count, r_cur_put, r_cur_del,
  r_savepoint, r_rollback, r_release, r_lsn, r_seqs, r_add, r_last,
  r_pending, r_cur_bound, r_cur_route
};
/* }===================================================================== */


/*
** {=====================================================================
** Transactions
** ======================================================================
*/
rg_remote *rg_remote_new (void) {
  rg_remote *r = (rg_remote *)calloc(1, sizeof(rg_remote));
  if (r == NULL) return NULL;
  r->tx.base.ops = &remote_ops;
  r->tx.r = r;
  r->cur_place = NONE;
  return r;
}

static void parts_clear (rg_remote *r) {
  size_t i;
  for (i = 0; i < r->nparts; i++) rg_buf_free(&r->bufs[i]);
  free(r->parts);
  free(r->bufs);
  r->parts = NULL;
  r->bufs = NULL;
  r->nparts = 0;
  r->pending = 0;
  r->refused = 0;
}

/* A run again forgets what it lacked and spent (it asks and spends
** anew); a new call (`all`) also what it read. */
static void budgets_clear (rg_remote *r, int all) {
  size_t i, j;
  for (i = j = 0; i < r->nbw; i++)
    if (r->bw[i].known && !all) r->bw[j++] = r->bw[i];
  r->nbw = j;
  r->bwanted = 0;
  r->nbs = 0;
  r->nbl = 0;
  while (r->nbsv > 0) free(r->bsv[--r->nbsv].bs);
}

/* Undoes what the last run did to the overlay: its writes and guesses. */
static void run_clear (rg_remote *r) {
  int tb;
  size_t i, j;
  for (tb = 0; tb < RG_NDB; tb++) {
    table *t = &r->t[tb];
    for (i = j = 0; i < t->n; i++) {
      ent *e = t->v[i];
      if (!e->known) { ent_free(e); continue; }
      if (e->dirty || e->adding) side_copy(&e->cur, &e->base);
      e->dirty = e->adding = e->read = e->guessed = 0;
      e->add_items = e->add_bytes = 0;
      t->v[j++] = e;
    }
    t->n = j;
  }
  for (i = 0; i < r->ntp; i++) r->tp[i].ranged = 0;
  for (i = 0; i < r->nundo; i++) side_free(&r->undo[i].cur);
  r->nundo = 0;
  r->savepoints = 0;
  r->lsn_taken = 0;
  r->cur_place = NONE;
  r->cur_cid = 0;
  r->seq_taken = 0;                     /* nothing went out: taken again */
  r->moved = 0;
  needs_clear(r);
  budgets_clear(r, 0);
}

void rg_remote_free (rg_remote *r) {
  int tb;
  size_t i;
  if (r == NULL) return;
  run_clear(r);
  for (tb = 0; tb < RG_NDB; tb++) {
    for (i = 0; i < r->t[tb].n; i++) ent_free(r->t[tb].v[i]);
    free(r->t[tb].v);
    for (i = 0; i < r->cov[tb].n; i++) {
      free(r->cov[tb].v[i].lo);
      free(r->cov[tb].v[i].hi);
    }
    free(r->cov[tb].v);
  }
  parts_clear(r);
  free(r->needs);
  free(r->undo);
  free(r->places);
  free(r->tp);
  free(r->specs);
  free(r->bw);
  free(r->bs);
  free(r->bl);
  free(r->bsv);
  free(r);
}

static uint64_t random_stand_in (void) {
  uint64_t x = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) { if (fread(&x, 8, 1, f) != 1) x = 0; fclose(f); }
  if (x == 0) x = (uint64_t)rg_now() * 2654435761u;
  return STAND_IN_LO + x % 1000000000000000ull;
}

static int begin (rg_remote *r, int writing, rg_txn **t) {
  r->active = 1;
  r->writing = writing;
  if (writing) {                        /* an abort undoes it all */
    if (r->stand_in == 0) r->stand_in = random_stand_in();
    r->wbytes = 0;
    r->txmark = r_savepoint(&r->tx.base);
  }
  *t = &r->tx.base;
  return 0;
}

int rg_remote_read (rg_remote *r, rg_txn **t, rg_err *e) {
  (void)e;
  if (r->active) { *t = &r->tx.base; return 0; }
  return begin(r, 0, t);
}

void rg_remote_read_end (rg_remote *r) {
  if (!r->writing) r->active = 0;
}

int rg_remote_begin (rg_remote *r, rg_txn **t, rg_err *e) {
  (void)e;
  rg_assert(!r->active);
  return begin(r, 1, t);
}

void rg_remote_abort (rg_remote *r) {
  rg_assert(r->active && r->writing);
  r_rollback(&r->tx.base, r->txmark);
  r->active = r->writing = 0;
}

int rg_remote_commit (rg_remote *r, rg_err *e) {
  rg_assert(r->active && r->writing && r->savepoints == 1);
  r_release(&r->tx.base, r->txmark);
  r->active = r->writing = 0;
  if (r->nomem) return rg_fail(e, 500, "out of memory");
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** The write set
** ======================================================================
**
** A part (the format redis/regolith.lua reads; every length a u32, every
** string its length then its bytes):
**   "RGW1" | stand-in: string BE8, string decimal, string term (empty:
**   none) | conditions: count, then each u8 kind | u8 table | string key |
**   string expected (kind 1 absent: empty; 2 equal: the value; 3 tail:
**   u32 length, then the value's last TAIL bytes; 4 version: u64) |
**   writes: count, then each u8 op | u8 table | u8 stamp | string key |
**   string value (1 put, 3 dup add: the entry's bytes are key | dup; 2
**   delete, 4 dup delete: empty) or, 5 add: i64 items | i64 bytes | u64
**   bound | u8 drop-at-zero.
** stamp: bit 0 the key holds the stand-in, bit 1 the value does.
*/
enum { C_ABSENT = 1, C_EQUAL, C_TAIL, C_VERSION };
enum { W_PUT = 1, W_DEL, W_DPUT, W_DDEL, W_ADD };

static void put_str (rg_buf *b, const void *p, size_t n) {
  uint8_t l[4];
  rg_put_u32(l, (uint32_t)n);
  rg_buf_add(b, l, 4);
  if (n) rg_buf_add(b, p, n);
}

static void put_u32 (rg_buf *b, uint32_t v) {
  uint8_t l[4];
  rg_put_u32(l, v);
  rg_buf_add(b, l, 4);
}

static void put_u64 (rg_buf *b, uint64_t v) {
  uint8_t l[8];
  rg_put_u64(l, v);
  rg_buf_add(b, l, 8);
}

static int has_bytes (const uint8_t *h, size_t hn, const uint8_t *n,
                      size_t nn) {
  size_t i;
  if (nn == 0 || hn < nn) return 0;
  for (i = 0; i + nn <= hn; i++)
    if (h[i] == n[0] && memcmp(h + i, n, nn) == 0) return 1;
  return 0;
}

/* The stand-in's encodings: BE8, decimal, index term. */
typedef struct stands {
  uint8_t be[8], term[16];
  char dec[24];
  size_t termn, decn;
} stands;

static void stands_of (uint64_t s, stands *out) {
  cJSON *num = cJSON_CreateNumber((double)s);
  rg_buf t;
  rg_put_u64(out->be, s);
  out->decn = (size_t)snprintf(out->dec, sizeof(out->dec), "%llu",
                               (unsigned long long)s);
  rg_buf_init(&t);
  if (num) rg_term(&t, num, 0);
  out->termn = t.n <= sizeof(out->term) && !t.oom ? t.n : 0;
  if (out->termn) memcpy(out->term, t.p, out->termn);
  rg_buf_free(&t);
  cJSON_Delete(num);
}

static int stamp_of (const stands *s, const uint8_t *p, size_t n) {
  return has_bytes(p, n, s->be, 8) || has_bytes(p, n, (const uint8_t *)s->dec,
                                                s->decn) ||
         has_bytes(p, n, s->term, s->termn);
}

/* Does the write set have a part in place p? */
static int writes_in (rg_remote *r, uint32_t p) {
  int tb;
  size_t i;
  for (tb = 0; tb < RG_NDB; tb++)
    for (i = 0; i < r->t[tb].n; i++) {
      ent *e = r->t[tb].v[i];
      if (e->place == p && (e->dirty || e->adding)) return 1;
    }
  return 0;
}

static void part_build (rg_remote *r, uint32_t p, const stands *st,
                        rg_buf *b) {
  int tb;
  size_t i, count_at, n = 0;
  rg_buf_add(b, "RGW1", 4);
  if (r->lsn_taken) {
    put_str(b, st->be, 8);
    put_str(b, st->dec, st->decn);
    put_str(b, st->term, st->termn);
  }
  else { put_str(b, "", 0); put_str(b, "", 0); put_str(b, "", 0); }
  count_at = b->n;                      /* conditions */
  put_u32(b, 0);
  for (tb = 0; tb < RG_NDB; tb++) {
    tplace *tp;
    for (i = 0; i < r->t[tb].n; i++) {
      ent *e = r->t[tb].v[i];
      size_t kn = wire_kn(tb, e);
      if (e->place != p || !e->read || e->adding) continue;
      if (e->known && !e->base.have) {
        rg_buf_addc(b, C_ABSENT); rg_buf_addc(b, tb);
        put_str(b, e->k, kn); put_str(b, "", 0);
      }
      else if (!e->known) {             /* guessed absent */
        rg_buf_addc(b, C_ABSENT); rg_buf_addc(b, tb);
        put_str(b, e->k, kn); put_str(b, "", 0);
      }
      else if ((tb == RG_DB_ITEMS || tb == RG_DB_FEED) && e->base.n > TAIL) {
        uint8_t l[4];
        rg_buf_addc(b, C_TAIL); rg_buf_addc(b, tb);
        put_str(b, e->k, kn);
        rg_put_u32(l, e->base.n);
        put_u32(b, 4 + TAIL);
        rg_buf_add(b, l, 4);
        rg_buf_add(b, e->base.v + e->base.n - TAIL, TAIL);
      }
      else {
        rg_buf_addc(b, C_EQUAL); rg_buf_addc(b, tb);
        put_str(b, e->k, kn); put_str(b, e->base.v, e->base.n);
      }
      n++;
    }
    if ((tp = tplace_of(r, tb, p)) != NULL && tp->ranged && tp->has_version) {
      rg_buf_addc(b, C_VERSION); rg_buf_addc(b, tb);
      put_str(b, "", 0);
      put_u32(b, 8);
      put_u64(b, tp->version);
      n++;
    }
  }
  rg_put_u32((uint8_t *)b->p + count_at, (uint32_t)n);
  count_at = b->n;                      /* writes */
  put_u32(b, 0);
  n = 0;
  for (tb = 0; tb < RG_NDB; tb++) {
    unsigned ds = dupsize(tb);
    for (i = 0; i < r->t[tb].n; i++) {
      ent *e = r->t[tb].v[i];
      int stamp = 0;
      if (e->place != p || !(e->dirty || e->adding)) continue;
      if (r->lsn_taken) {
        stamp |= stamp_of(st, e->k, e->kn) ? 1 : 0;
        if (e->cur.have && e->cur.n)
          stamp |= stamp_of(st, e->cur.v, e->cur.n) ? 2 : 0;
      }
      size_t kn = wire_kn(tb, e);       /* a place's own meta key: bare */
      if (e->adding && !e->dirty) {
        rg_buf_addc(b, W_ADD); rg_buf_addc(b, tb); rg_buf_addc(b, 0);
        put_str(b, e->k, kn);
        put_u32(b, 25);
        put_u64(b, (uint64_t)e->add_items);
        put_u64(b, (uint64_t)e->add_bytes);
        put_u64(b, e->add_bound);
        rg_buf_addc(b, (e->add_flags & RG_KV_DROP0) ? 1 : 0);
      }
      else if (ds) {
        if (e->known && e->cur.have == e->base.have) continue;
        rg_buf_addc(b, e->cur.have ? W_DPUT : W_DDEL); rg_buf_addc(b, tb);
        rg_buf_addc(b, (uint8_t)stamp);
        put_str(b, e->k, kn); put_str(b, "", 0);
      }
      else {
        rg_buf_addc(b, e->cur.have ? W_PUT : W_DEL); rg_buf_addc(b, tb);
        rg_buf_addc(b, (uint8_t)stamp);
        put_str(b, e->k, kn);
        put_str(b, e->cur.have ? e->cur.v : NULL, e->cur.have ? e->cur.n : 0);
      }
      n++;
    }
  }
  rg_put_u32((uint8_t *)b->p + count_at, (uint32_t)n);
}

/* Writes `v` (8 bytes) at own or global key k of place p. */
static int put_epoch (rg_remote *r, uint32_t p, const uint8_t *k, size_t kn,
                      const uint8_t *v) {
  ent *e = get_ent(r, RG_DB_META, k, kn, p);
  if (e == NULL) return -1;
  if (e->cur.v != e->base.v) side_free(&e->cur);
  e->cur.v = NULL;
  if (side_set(&e->cur, 1, v, 8)) return -1;
  e->dirty = 1;
  return 0;
}

/* Gives container cid a new epoch, in the global place and in each of its
** buckets, unless this write set gave it one already: 0, or -1 out of
** memory. */
static int new_epoch (rg_remote *r, uint32_t cid) {
  uint8_t v[8], k[5], ok[sizeof(RG_META_EPOCH) + 7];
  uint32_t g = global_place(r);
  size_t kn = rg_meta_key(k, RG_MK_EPOCH, cid, NULL, 0);
  const ent *have = find(r, RG_DB_META, k, kn);
  int b, np;
  if ((have && have->dirty) || (np = nparts_of(r, cid)) == 0)
    return 0;                           /* done, or a new one */
  rg_put_u64(v, random_stand_in());
  if (put_epoch(r, g, k, kn, v)) return -1;
  for (b = 0; b < np; b++) {
    uint32_t p = place_index(r, cid, (uint32_t)b, (uint32_t)np);
    if (p == NONE ||
        put_epoch(r, p, ok, own_key(r, p, (const uint8_t *)RG_META_EPOCH,
                                    sizeof(RG_META_EPOCH) - 1, ok), v))
      return -1;
  }
  return 0;
}

/* Does the write set change the database's throughput setting (the
** text after the version; a container's change bumps the version only)? */
static int setting_changed (rg_remote *r) {
  const ent *e = find(r, RG_DB_META, (const uint8_t *)RG_META_THROUGHPUT,
                      sizeof(RG_META_THROUGHPUT) - 1);
  const side *a, *c;
  if (e == NULL || !e->dirty) return 0;
  a = &e->base;
  c = &e->cur;
  if (!a->have || a->n < 8) return c->have && c->n > 8;
  if (!c->have || c->n < 8) return a->n > 8;
  return a->n != c->n || memcmp(a->v + 8, c->v + 8, a->n - 8) != 0;
}

/* A write set that changes a container's catalog gives it a new epoch,
** in the global place and in each of its buckets (catalog epochs above);
** one that changes the database's throughput setting gives every
** container one (its call read every spec): 0, or -1 out of memory. */
static int new_epochs (rg_remote *r) {
  table *t = &r->t[RG_DB_META];
  uint32_t g = global_place(r), *cids;
  int all = setting_changed(r);
  size_t j, n = 0;
  if ((cids = (uint32_t *)malloc((t->n ? t->n : 1) * sizeof(uint32_t))) ==
      NULL)
    return -1;
  for (j = 0; j < t->n; j++) {          /* (new_epoch adds entries) */
    const ent *e = t->v[j];
    uint32_t cid;
    if (e->place != g) continue;
    if (e->dirty && catalog_of(RG_DB_META, e->k, e->kn, &cid) == 1)
      cids[n++] = cid;
    else if (all && e->kn == 5 && e->k[0] == RG_MK_SPEC && e->cur.have)
      cids[n++] = rg_get_u32(e->k + 1);
  }
  for (j = 0; j < n; j++)
    if (new_epoch(r, cids[j])) { free(cids); return -1; }
  free(cids);
  return 0;
}

/* Builds the write set's parts from what the run's transactions wrote:
** 0, or -1 out of memory. */
static int seal (rg_remote *r) {
  uint32_t order[RG_MAX_PARTITIONS * 4];
  size_t np = 0, i;
  stands st;
  r->sealed = 1;
  if (new_epochs(r)) return -1;
  stands_of(r->stand_in, &st);
  /* what is written once first, what depends on the rest last */
  if (writes_in(r, first_place(r))) order[np++] = first_place(r);
  for (i = 0; i < r->nplaces && np + 1 < sizeof(order) / sizeof(order[0]); i++)
    if (r->places[i].cid != RG_PLACE_GLOBAL && writes_in(r, (uint32_t)i))
      order[np++] = (uint32_t)i;
  if (writes_in(r, global_place(r))) order[np++] = global_place(r);
  if (np == 0) return 0;
  r->parts = (rg_part *)calloc(np, sizeof(rg_part));
  r->bufs = (rg_buf *)calloc(np, sizeof(rg_buf));
  if (r->parts == NULL || r->bufs == NULL) {
    parts_clear(r);
    return -1;
  }
  r->nparts = np;
  for (i = 0; i < np; i++) {
    rg_buf_init(&r->bufs[i]);
    part_build(r, order[i], &st, &r->bufs[i]);
    if (r->bufs[i].oom) { parts_clear(r); return -1; }
    r->parts[i].pl = r->places[order[i]];
    r->parts[i].data = r->bufs[i].p;
    r->parts[i].n = r->bufs[i].n;
  }
  r->pending = np;
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** The host's side
** ======================================================================
*/
void rg_remote_rerun (rg_remote *r) {
  run_clear(r);
  parts_clear(r);
  r->active = r->writing = 0;
  r->sealed = 0;
}

/* How a call may use an entry of the global place fetched by an earlier
** one: trusted (0: written once, and present), trusted while its epoch
** holds (3), or asked for again (1). */
static int trust_of (rg_remote *r, int tb, const ent *e) {
  uint32_t cid;
  uint8_t k[5];
  const ent *g;
  if (tb == RG_DB_META && e->kn >= 1 && e->base.have &&
      (e->k[0] == RG_MK_PATH || e->k[0] == RG_MK_SHAPE))
    return 0;
  if (is_epoch_g(tb, e->k, e->kn)) return 3;
  switch (catalog_of(tb, e->k, e->kn, &cid)) {
    case 1:
      g = find(r, RG_DB_META, k, rg_meta_key(k, RG_MK_EPOCH, cid, NULL, 0));
      return g && g->known ? 3 : 1;
    case 2: return 3;
    default: return 1;
  }
}

/* What is known of the global place is kept from call to call (`keep`),
** or, once the oldest of it is keep_ms old, its entries are kept as
** guesses the call asks for again (what is known of its ranges goes).
** `call`: a new call, which starts knowing nothing of the other places. */
static void keep_global (rg_remote *r, int keep, int call) {
  int tb;
  size_t i, j;
  uint32_t g = global_place(r), f = first_place(r);
  if (!keep) r->global_since = 0;
  r->kept = keep;
  for (tb = 0; tb < RG_NDB; tb++) {
    table *t = &r->t[tb];
    spans *s = &r->cov[tb];
    for (i = j = 0; i < t->n; i++) {
      ent *e = t->v[i];
      int global = e->place == g || e->place == f;
      if (global && e->known) t->v[j++] = e;
      else if (!global && !call) t->v[j++] = e;
      else ent_free(e);
    }
    t->n = j;
    for (i = 0; !keep && i < t->n; i++)
      if (t->v[i]->place == g || t->v[i]->place == f)
        t->v[i]->stale = (uint8_t)trust_of(r, tb, t->v[i]);
    for (i = j = 0; i < s->n; i++) {
      int global = s->v[i].place == g || s->v[i].place == f;
      if (global ? keep : !call) s->v[j++] = s->v[i];
      else { free(s->v[i].lo); free(s->v[i].hi); }
    }
    s->n = j;
  }
  for (i = j = 0; i < r->ntp; i++) {
    int global = r->tp[i].place == g || r->tp[i].place == f;
    if (global ? keep : !call) {
      r->tp[j] = r->tp[i];
      if (call) r->tp[j].fetches = 0;
      j++;
    }
  }
  r->ntp = j;
}

void rg_remote_reset (rg_remote *r, int64_t now_ms, int64_t keep_ms) {
  int tb;
  size_t i;
  rg_remote_rerun(r);
  r->stand_in = 0;
  r->now_ms = now_ms;
  budgets_clear(r, 1);
  keep_global(r, r->global_since != 0 && now_ms - r->global_since < keep_ms,
              1);
  /* kept, a catalog entry fetched less than keep_ms ago is trusted as the
     rest (unchecked: a call that writes asks again, rg_remote_state), not
     checked by its epoch still because a write asked for it again */
  for (tb = 0; r->kept && tb < RG_NDB; tb++)
    for (i = 0; i < r->t[tb].n; i++) {
      ent *e = r->t[tb].v[i];
      if (e->stale == 3 && e->known && now_ms - e->at_ms < keep_ms)
        e->stale = 0;
    }
}

/* A bucket of container cid the call reads or writes (one the run
** writes first), or NONE.  (What the overlay holds of a bucket is this
** call's: rg_remote_reset.) */
static uint32_t touched (rg_remote *r, uint32_t cid) {
  uint32_t any = NONE;
  size_t i;
  int tb;
  for (tb = 0; tb < RG_NDB; tb++)
    for (i = 0; i < r->t[tb].n; i++) {
      const ent *e = r->t[tb].v[i];
      if (r->places[e->place].cid != cid) continue;
      if (e->dirty || e->adding) return e->place;
      if (any == NONE) any = e->place;
    }
  for (i = 0; any == NONE && i < r->nneeds; i++)
    if (r->needs[i].pl.cid == cid)
      any = place_index(r, cid, r->needs[i].pl.bucket,
                        r->needs[i].pl.buckets);
  return any;
}

/* Container cid's trusted entries (and the scripts' version) are asked
** for again. */
static void distrust (rg_remote *r, uint32_t cid) {
  table *t = &r->t[RG_DB_META];
  size_t i;
  uint32_t c;
  for (i = 0; i < t->n; i++) {
    ent *e = t->v[i];
    int cat = catalog_of(RG_DB_META, e->k, e->kn, &c);
    if (e->stale == 3 &&
        (cat == 2 || (cat == 1 && c == cid) ||
         (is_epoch_g(RG_DB_META, e->k, e->kn) && rg_get_u32(e->k + 1) == cid)))
      e->stale = 1;
  }
}

/* Checks the epochs of the catalog entries the run trusted (above): 0
** when they hold, 1 when the run must go again after a fetch (an epoch
** asked for, or entries distrusted). */
static int check_epochs (rg_remote *r) {
  table *t = &r->t[RG_DB_META];
  uint32_t cids[16];
  int n = 0, scripts = 0, valid = 0, again = 0, i;
  size_t j;
  for (j = 0; j < t->n; j++) {
    const ent *e = t->v[j];
    uint32_t cid;
    int cat;
    if (e->stale != 3 || !e->read || e->dirty) continue;
    cat = catalog_of(RG_DB_META, e->k, e->kn, &cid);
    if (cat == 2) { scripts = 1; continue; }
    if (cat != 1) continue;
    for (i = 0; i < n && cids[i] != cid; i++) {}
    if (i == n) {
      if (n == 16) { distrust(r, cid); again = 1; continue; }
      cids[n++] = cid;
    }
  }
  for (i = 0; i < n; i++) {
    uint32_t p = touched(r, cids[i]);
    uint8_t gk[5], bk[sizeof(RG_META_EPOCH) + 7];
    ent *g, *b;
    g = find(r, RG_DB_META, gk, rg_meta_key(gk, RG_MK_EPOCH, cids[i], NULL,
                                             0));
    if (p == NONE || g == NULL || !g->known) {
      distrust(r, cids[i]);
      again = 1;
      continue;
    }
    b = get_ent(r, RG_DB_META, bk,
                own_key(r, p, (const uint8_t *)RG_META_EPOCH,
                        sizeof(RG_META_EPOCH) - 1, bk), p);
    if (b == NULL) return 1;
    if (b->assumed && !writes_in(r, p)) b->known = b->assumed = 0;
    if (!b->known && writes_in(r, p)) {
      /* the commit checks it: the epoch fetched with the entries */
      if (side_set(&b->base, g->base.have, g->base.v, g->base.n) ||
          side_copy(&b->cur, &b->base)) {
        r->nomem = 1;
        return 1;
      }
      b->known = b->assumed = 1;
    }
    if (!b->known) {
      need_point(r, p, RG_DB_META, (const uint8_t *)RG_META_EPOCH,
                 sizeof(RG_META_EPOCH) - 1);
      b->guessed = 1;
      again = 1;
      continue;
    }
    if (b->base.have != g->base.have || b->base.n != g->base.n ||
        (b->base.n && memcmp(b->base.v, g->base.v, b->base.n) != 0)) {
      distrust(r, cids[i]);
      again = 1;
      continue;
    }
    b->read = 1;                        /* a condition of a commit there */
    valid = 1;
  }
  if (scripts && !valid && !again) { distrust(r, 0); again = 1; }
  return again;
}

int rg_remote_state (rg_remote *r) {
  size_t i;
  if (r->moved) return RG_REMOTE_FETCH;  /* (no needs: run again whole) */
  if (!r->sealed && check_epochs(r)) return RG_REMOTE_FETCH;
  if (!r->sealed && seal(r)) r->nomem = 1;
  if (r->nparts && r->kept) {
    /* a write set made from global entries trusted unchecked (kept from
       an earlier call): its commit could not check them in the places it
       writes; the run goes again, asking for what it reads of them */
    rg_remote_rerun(r);
    keep_global(r, 0, 0);
    return RG_REMOTE_FETCH;
  }
  if (r->nparts && r->pending && !r->refused) {
    /* reads the commit cannot check are fetched first; and all of them
       when it writes to several places (besides the first half), applied
       one by one: a refusal there would leave the others' writes */
    size_t places = 0;
    for (i = 0; i < r->nparts; i++)
      if (!(r->parts[i].pl.cid == RG_PLACE_GLOBAL && r->parts[i].pl.bucket == 1))
        places++;
    if (places > 1 && r->nneeds) return RG_REMOTE_FETCH;
    for (i = 0; i < r->nneeds; i++) {
      const rg_need *n = &r->needs[i];
      size_t j;
      int mine = 0;
      if (n->range) return RG_REMOTE_FETCH;
      for (j = 0; j < r->nparts; j++)
        if (r->parts[j].pl.cid == n->pl.cid &&
            r->parts[j].pl.bucket == n->pl.bucket)
          mine = 1;
      if (!mine) return RG_REMOTE_FETCH;
    }
    if (r->want_seqs || r->bwanted) return RG_REMOTE_FETCH;
    return RG_REMOTE_APPLY;
  }
  if (r->nneeds || r->want_seqs || r->bwanted) return RG_REMOTE_FETCH;
  return RG_REMOTE_DONE;
}

void rg_remote_fetched (rg_remote *r) { needs_clear(r); }

int rg_remote_complete (const rg_remote *r) {
  return r->nneeds == 0 && r->want_seqs == 0 && r->bwanted == 0 &&
         !r->moved;
}

size_t rg_remote_needs (rg_remote *r, const rg_need **out) {
  *out = r->needs;
  return r->nneeds;
}

uint32_t rg_remote_want_seqs (rg_remote *r) { return r->want_seqs; }

void rg_remote_feed_seqs (rg_remote *r, uint32_t first, uint32_t n) {
  r->seq_first = first;
  r->seq_end = first + n;
}

static uint32_t place_from (rg_remote *r, const rg_place *pl) {
  if (pl->cid == RG_PLACE_GLOBAL)
    return pl->bucket == 1 ? first_place(r) : global_place(r);
  return place_index(r, pl->cid, pl->bucket, pl->buckets);
}

static int same_side (const side *s, int have, const void *v, size_t vn) {
  if (!s->have || !have) return !s->have == !have;
  return s->n == vn && (vn == 0 || memcmp(s->v, v, vn) == 0);
}

/* Sets what the host fetched for an entry.  A fetch never changes what
** the transaction wrote: `cur` of an entry it put or deleted stays, and
** one it added to reads the new base plus its deltas (view).  And when
** the fetch comes in the middle of a run (a call made inside a scope,
** rg_remote_fetched) and contradicts what the run decided on (a value it
** read changed; a key a conditional write took as absent is there), the
** run goes again whole (`moved`). */
static int known (rg_remote *r, int tb, uint32_t p, const uint8_t *k,
                  size_t kn, const void *v, size_t vn, int have,
                  int64_t now_ms) {
  ent *e = find(r, tb, k, kn);
  if (e == NULL && (e = get_ent(r, tb, k, kn, p)) == NULL) return 500;
  if (e->known && same_side(&e->base, have, v, vn)) {
    /* nothing new: the memory the run's answers point into stays */
  }
  else {
    if (r->active && ((e->read && e->known) ||
                      (e->guessed && !e->known && e->dirty && have)))
      r->moved = 1;
    if (side_set(&e->base, have, v, vn)) return 500;
    if (!e->dirty && view(e)) return 500;
  }
  e->known = 1;
  e->guessed = e->assumed = 0;
  e->stale = 0;
  e->place = p;
  e->at_ms = now_ms;
  if (r->places[p].cid == RG_PLACE_GLOBAL && r->global_since == 0)
    r->global_since = now_ms ? now_ms : 1;
  if (tb == RG_DB_META && have) learn_spec(r, k, kn, (const uint8_t *)v, vn);
  return 0;
}

int rg_remote_feed_point (rg_remote *r, const rg_place *pl, int tb,
                          const void *k, size_t kn, const void *v,
                          size_t vn, int64_t now_ms) {
  uint32_t p = place_from(r, pl);
  const uint8_t *key = (const uint8_t *)k;
  uint8_t pk[RG_MAX_KEY + 8];
  if (is_own_key(tb, key, kn)) {        /* the place's own copy */
    kn = own_key(r, p, key, kn, pk);
    key = pk;
  }
  return known(r, tb, p, key, kn, v, vn, v != NULL, now_ms);
}

/* Is (k, kn) one of the n keys of a range's answer (ascending; descending
** when `back`)? */
static int answered (const void *const *ks, const size_t *kns, size_t n,
                     int back, const uint8_t *k, size_t kn) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = bcmp2((const uint8_t *)ks[mid], kns[mid], k, kn);
    if (back) c = -c;
    if (c == 0) return 1;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

/* A range's answer is every entry place p holds in the span it answers
** for (as redis/regolith.lua's range reads it: from lo, or after it,
** onwards to the end when `done`, else through the last key given; or
** backwards from lo, the end when lo is empty, to the start when `done`).
** So an entry of p the overlay has in that span and the answer lacks is
** absent now, whatever put it there: kept from an earlier call (a guess
** until asked again, keep_global), guessed by this run, or fetched
** earlier and deleted since.  It becomes known absent (known: what the
** run read of it, if it changed, sends the run again).  A place's own
** meta keys are fetched by point, never by a range: left alone. */
static int absent_unanswered (rg_remote *r, int tb, uint32_t p,
                              const uint8_t *lo, size_t lon, int after,
                              int back, size_t n, const void *const *ks,
                              const size_t *kns, int done, int64_t now_ms) {
  table *t = &r->t[tb];
  const uint8_t *a = lo, *b = NULL;     /* the span, a .. b (NULL: end) */
  size_t an = lon, bn = 0, i;
  int a_open = after, b_open = 0, rc;
  if (back) {
    b = lon ? lo : NULL;
    bn = lon;
    b_open = after;
    a = done ? (const uint8_t *)"" : (const uint8_t *)ks[n - 1];
    an = done ? 0 : kns[n - 1];
    a_open = 0;
  }
  else if (!done) {
    b = (const uint8_t *)ks[n - 1];
    bn = kns[n - 1];
  }
  for (i = lower(t, a, an); i < t->n; i++) {
    ent *e = t->v[i];
    if (b != NULL) {
      int c = bcmp2(e->k, e->kn, b, bn);
      if (c > 0 || (c == 0 && b_open)) break;
    }
    if (a_open && e->kn == an && memcmp(e->k, a, an) == 0) continue;
    if (e->place != p || wire_kn(tb, e) != e->kn) continue;
    if (e->known && !e->base.have) continue;
    if (answered(ks, kns, n, back, e->k, e->kn)) continue;
    if ((rc = known(r, tb, p, e->k, e->kn, NULL, 0, 0, now_ms))) return rc;
  }
  return 0;
}

int rg_remote_feed_range (rg_remote *r, const rg_place *pl, int tb,
                          const void *lo, size_t lon, int after, int back,
                          size_t n, const void *const *ks,
                          const size_t *kns, const void *const *vs,
                          const size_t *vns, int done, uint64_t version,
                          int64_t now_ms) {
  uint32_t p = place_from(r, pl), both[2];
  size_t i;
  int rc, j, nb = 1;
  /* the global place's two halves are one set of keys in the store: what
     a range of it holds belongs to each by its key (layout.h) */
  both[0] = p;
  if (pl->cid == RG_PLACE_GLOBAL) {
    both[0] = global_place(r);
    both[1] = first_place(r);
    nb = 2;
  }
  {                           /* the version is the asked half's own */
    tplace *tp = tplace_of(r, tb, p);
    if (tp == NULL) return 500;
    if (tp->has_version && tp->version != version) forget(r, tb, p);
    tp->version = version;
    tp->has_version = 1;
    tp->fetches++;
  }
  for (i = 0; i < n; i++) {
    uint32_t pe = p;
    if (nb == 2) {
      rg_keyplace kp;
      pe = rg_key_place(tb, (const uint8_t *)ks[i], kns[i], NULL, 0, &kp) == 0
           && kp.first ? both[1] : both[0];
    }
    if ((rc = known(r, tb, pe, (const uint8_t *)ks[i], kns[i],
                    dupsize(tb) ? NULL : vs[i], dupsize(tb) ? 0 : vns[i], 1,
                    now_ms)))
      return rc;
  }
  for (j = 0; j < nb && (done || n > 0); j++) {   /* else: a version only */
    if ((rc = absent_unanswered(r, tb, both[j], (const uint8_t *)lo, lon,
                                after, back, n, ks, kns, done, now_ms)))
      return rc;
    if (!back) {
      if (done) cover(r, tb, both[j], (const uint8_t *)lo, lon, after, NULL,
                      0, 1);
      else cover(r, tb, both[j], (const uint8_t *)lo, lon, after,
                 (const uint8_t *)ks[n - 1], kns[n - 1], 0);
    }
    else {
      if (done) cover(r, tb, both[j], (const uint8_t *)"", 0, 0,
                      (const uint8_t *)lo, lon, 0);
      else cover(r, tb, both[j], (const uint8_t *)ks[n - 1], kns[n - 1], 0,
                 (const uint8_t *)lo, lon, 0);
    }
  }
  return r->nomem ? 500 : 0;
}

size_t rg_remote_parts (rg_remote *r, const rg_part **out) {
  *out = r->parts;
  return r->pending ? r->nparts : 0;
}

uint64_t rg_remote_stand_in (rg_remote *r) {
  return r->lsn_taken ? r->stand_in : 0;
}

void rg_remote_applied (rg_remote *r, size_t i, uint64_t lsn) {
  int tb;
  size_t j;
  uint32_t p;
  rg_assert(i < r->nparts && r->pending > 0);
  p = place_from(r, &r->parts[i].pl);
  if (r->parts[i].pl.cid == RG_PLACE_GLOBAL) {
    /* the global place holds what the part wrote: known now (kept for
       the calls that follow, as fetched entries are), but what the lsn
       was stamped over */
    stands st;
    stands_of(r->stand_in, &st);
    for (tb = 0; tb < RG_NDB; tb++)
      for (j = 0; j < r->t[tb].n; j++) {
        ent *e = r->t[tb].v[j];
        if (e->place != p || !e->dirty || e->adding) continue;
        if (r->lsn_taken && (stamp_of(&st, e->k, e->kn) ||
                             (e->cur.have && stamp_of(&st, e->cur.v, e->cur.n))))
          continue;
        if (side_copy(&e->base, &e->cur)) { r->nomem = 1; continue; }
        e->known = 1;
        e->dirty = 0;
        e->at_ms = r->now_ms;
      }
  }
  (void)lsn;
  seqs_spent(r);
  if (--r->pending == 0 && !r->refused) parts_clear(r);
}

void rg_remote_refused (rg_remote *r, size_t i) {
  rg_assert(i < r->nparts);
  seqs_spent(r);
  r->refused = 1;
  if (r->pending) r->pending--;
}
/* }===================================================================== */


/*
** {=====================================================================
** Throughput budgets: the words a call reads, what it spends
** ======================================================================
*/

/* Room in array *v (n used of *cap, of `size` bytes each) for one more:
** 0, or -1 out of memory. */
static int room (void *v, size_t n, size_t *cap, size_t size) {
  void **p = (void **)v;
  if (n == *cap) {
    size_t c = *cap ? *cap * 2 : 8;
    void *x = realloc(*p, c * size);
    if (x == NULL) return -1;
    *p = x;
    *cap = c;
  }
  return 0;
}

static bword *bword_of (bword **v, size_t *n, size_t *cap, const char *f) {
  size_t i;
  for (i = 0; i < *n; i++)
    if (strcmp((*v)[i].field, f) == 0) return &(*v)[i];
  if (room(v, *n, cap, sizeof(bword))) return NULL;
  memset(&(*v)[*n], 0, sizeof(bword));
  snprintf((*v)[*n].field, RG_TP_FIELD, "%s", f);
  return &(*v)[(*n)++];
}

int rg_remote_tp_word (rg_remote *r, const char *field, uint64_t *word) {
  bword *b = bword_of(&r->bw, &r->nbw, &r->capbw, field);
  size_t i;
  if (b == NULL) { r->nomem = 1; return 0; }
  if (b->known) {                       /* with what this run spent */
    *word = b->word;
    for (i = 0; i < r->nbs; i++)
      if (strcmp(r->bs[i].field, field) == 0) {
        uint64_t now = rg_remote_tp_clock(r);
        if (r->bs[i].known) *word = r->bs[i].word;      /* set */
        else *word = (*word > now ? *word : now) + r->bs[i].word;
      }
    return 1;
  }
  if (b->word == 0) { b->word = 1; r->bwanted++; }   /* asked once */
  return 0;
}

void rg_remote_tp_spend (rg_remote *r, const char *field, uint64_t ns) {
  bword *b = bword_of(&r->bs, &r->nbs, &r->capbs, field);
  if (b == NULL) { r->nomem = 1; return; }
  b->word += ns;
}

void rg_remote_tp_set (rg_remote *r, const char *field, uint64_t word) {
  bword *b = bword_of(&r->bs, &r->nbs, &r->capbs, field);
  if (b == NULL) { r->nomem = 1; return; }
  b->known = 1;
  b->word = word;
}

uint64_t rg_remote_tp_clock (const rg_remote *r) {
  struct timespec ts;
  if (r->server_at != 0) return r->server_ns + ((uint64_t)rg_mono_ns() - r->server_at);
  clock_gettime(CLOCK_REALTIME, &ts);   /* (before the host's first) */
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *rg_remote_tp_want (const rg_remote *r, size_t i) {
  size_t j;
  for (j = 0; j < r->nbw; j++)
    if (!r->bw[j].known && i-- == 0) return r->bw[j].field;
  return NULL;
}

void rg_remote_tp_feed (rg_remote *r, const char *field, uint64_t word_ns,
                        uint64_t server_ns) {
  bword *b = bword_of(&r->bw, &r->nbw, &r->capbw, field);
  if (b == NULL) { r->nomem = 1; return; }
  if (!b->known && b->word != 0 && r->bwanted > 0) r->bwanted--;
  b->known = 1;
  b->word = word_ns;
  r->server_ns = server_ns;
  r->server_at = (uint64_t)rg_mono_ns();
}

void rg_remote_later_add (rg_remote *r, rg_remote_later *fn, void *ud,
                          uint64_t a, uint64_t b) {
  if (room(&r->bl, r->nbl, &r->capbl, sizeof(blater))) {
    r->nomem = 1;
    return;
  }
  r->bl[r->nbl].fn = fn;
  r->bl[r->nbl].ud = ud;
  r->bl[r->nbl].a = a;
  r->bl[r->nbl].b = b;
  r->nbl++;
}

void rg_remote_tp_mark (rg_remote *r) {
  bsave *v;
  if (room(&r->bsv, r->nbsv, &r->capbsv, sizeof(bsave))) {
    r->nomem = 1;
    return;
  }
  v = &r->bsv[r->nbsv];
  v->bs = r->nbs ? (bword *)malloc(r->nbs * sizeof(bword)) : NULL;
  if (r->nbs && v->bs == NULL) { r->nomem = 1; return; }
  if (r->nbs) memcpy(v->bs, r->bs, r->nbs * sizeof(bword));
  v->nbs = r->nbs;
  v->nbl = r->nbl;
  r->nbsv++;
}

void rg_remote_tp_unmark (rg_remote *r, int back) {
  bsave *v;
  if (r->nbsv == 0) return;
  v = &r->bsv[--r->nbsv];
  if (back) {
    if (v->nbs) memcpy(r->bs, v->bs, v->nbs * sizeof(bword));
    r->nbs = v->nbs;
    if (v->nbl < r->nbl) r->nbl = v->nbl;
  }
  free(v->bs);
}

void rg_remote_done (rg_remote *r) {
  size_t i, n = r->nbl;
  r->nbl = 0;
  for (i = 0; i < n; i++) r->bl[i].fn(r->bl[i].ud, r->bl[i].a, r->bl[i].b);
}

const char *rg_remote_tp_spent (const rg_remote *r, size_t i, uint64_t *ns,
                                int *set) {
  if (i >= r->nbs) return NULL;
  *ns = r->bs[i].word;
  *set = r->bs[i].known;
  return r->bs[i].field;
}
/* }===================================================================== */
