/*
** pages.h: LMDB 0.9's file format, as far as the store reads it itself.
**
** The store reads data.mdb without LMDB in three places: opening checks
** its meta pages before LMDB maps it (preflight.c), the guard checks a page
** the first time LMDB touches it (guard.c, pagecheck.c), and db:verify
** walks the trees from the meta pages down.  Both need the layout of liblmdb 0.9 (its
** MDB_DATA_VERSION 1), which the store was built for: a file of pages of
** `psize` bytes; pages 0 and 1 are the two meta pages, LMDB using the one
** with the larger transaction id; every page begins with a 16-byte header.
**
**   page header  pgno u64 | pad u16 | flags u16 | lower u16 | upper u16
**                (an overflow page's lower/upper hold its page count, u32;
**                a page of fixed-size keys has their size in its pad;
**                LMDB uses no flag bit between 0x40 and 0x4000, and tests
**                each of its own alone: the store's RG_PG_SUMMED says that
**                the pad holds a checksum, pagecheck.h)
**   meta         magic u32 | version u32 | address u64 | mapsize u64 |
**                dbs[2] (FREE, MAIN) | last_pg u64 | txnid u64
**   db           pad u32 (FREE's holds psize) | flags u16 | depth u16 |
**                branch, leaf, overflow pages u64 | entries u64 | root u64
**
** All little-endian (the machine's: LMDB files are not portable).
*/

#ifndef rg_pages_h
#define rg_pages_h

#include <stdint.h>
#include <string.h>

#define RG_PG_HDR        16           /* the page header */
#define RG_PG_FLAGS      10           /* u16 within it */
#define RG_PG_BRANCH     0x01
#define RG_PG_LEAF       0x02
#define RG_PG_OVERFLOW   0x04
#define RG_PG_META       0x08
#define RG_PG_LEAF2      0x20
#define RG_PG_SUMMED     0x0100       /* ours: the pad holds a checksum */
#define RG_PG_INVALID    (~(uint64_t)0)   /* no page (an empty tree) */

#define RG_MDB_MAGIC     0xBEEFC0DEu
#define RG_MDB_VERSION   1
/* offsets within the meta, which starts at RG_PG_HDR */
#define RG_META_MAGIC    0
#define RG_META_VERSION  4
#define RG_META_DBS      24
#define RG_META_DB       48           /* the size of one db */
#define RG_META_LASTPG   120
#define RG_META_TXNID    128
#define RG_META_LEN      136
/* offsets within a db */
#define RG_DB_PAD        0
#define RG_DB_DEPTH      6
#define RG_DB_ENTRIES    32
#define RG_DB_ROOT       40

static inline uint16_t rg_le16 (const uint8_t *p) {
  uint16_t v; memcpy(&v, p, 2); return v;
}
static inline uint32_t rg_le32 (const uint8_t *p) {
  uint32_t v; memcpy(&v, p, 4); return v;
}
static inline uint64_t rg_le64 (const uint8_t *p) {
  uint64_t v; memcpy(&v, p, 8); return v;
}

/* The nodes of a branch or leaf page p (its lower bound checked; a node
** is lo u16 | hi u16 | flags u16 | ksize u16 | key | value, pagecheck.h):
** how many, the i-th, a branch node's child, a leaf node's value size. */
static inline unsigned rg_node_count (const uint8_t *p) {
  return (unsigned)(rg_le16(p + 12) - RG_PG_HDR) >> 1;
}
static inline const uint8_t *rg_node_at (const uint8_t *p, unsigned i) {
  return p + rg_le16(p + RG_PG_HDR + 2 * i);
}
static inline uint64_t rg_node_child (const uint8_t *nd) {
  return (uint64_t)rg_le16(nd) | (uint64_t)rg_le16(nd + 2) << 16 |
         (uint64_t)rg_le16(nd + 4) << 32;
}
static inline uint64_t rg_node_dsize (const uint8_t *nd) {
  return (uint64_t)rg_le16(nd) | (uint64_t)rg_le16(nd + 2) << 16;
}

#endif
