/*
** pagecheck.h: whether a page of an LMDB 0.9 data file may be followed
** (store/pagecheck.c says what passes).
**
** Checksums.  A page may carry a 16-bit checksum (CRC-32C folded) of its
** bytes (its number included; for a branch or leaf page, not the free
** space between its pointers and its nodes, which holds whatever was
** there and which the log does not keep) in the header's pad field, which
** LMDB leaves unused on every page but those of fixed-size keys (it holds
** their size there) and the meta pages, and a flag (RG_PG_SUMMED, pages.h)
** that says so.  rg_page_stamp writes both into a page as it goes to the
** file (wal.c's hooks); rg_page_check checks the sum where the flag is.
*/

#ifndef rg_pagecheck_h
#define rg_pagecheck_h

#include <stddef.h>
#include <stdint.h>

/* LMDB 0.9's node: lo u16 | hi u16 | flags u16 | ksize u16 | key | data;
** a branch node's child is lo | hi << 16 | flags << 32. */
#define RG_NODE_HDR     8
#define RG_NODE_BIG     0x01        /* the value is an overflow run */
#define RG_NODE_SUBDB   0x02        /* the value is a sub-database record */
#define RG_NODE_DUP     0x04        /* the value holds sorted duplicates */
#define RG_NODE_MAXKEY  511
#define RG_PG_SUBP      0x40        /* a sub-page inside a node */

/* NULL when the page `pgno` at p (psize bytes; the file has `pages`
** pages) may be followed, else what is wrong with it.  *run is how many
** pages it spans (an overflow run: their checksum is the caller's to
** check, with rg_page_sum over them all). */
const char *rg_page_check (const uint8_t *p, uint64_t pgno, unsigned psize,
                           uint64_t pages, uint64_t *run);
/* The same, its checksum left aside; and what rg_page_check answers when
** it is only the checksum that does not hold. */
const char *rg_page_check_nosum (const uint8_t *p, uint64_t pgno,
                                 unsigned psize, uint64_t pages,
                                 uint64_t *run);
extern const char rg_page_badsum[];
/* The checksum of a page (or an overflow run) of n bytes; never 0. */
uint16_t rg_page_sum (const uint8_t *p, size_t n);
/* Does the page carry a checksum? */
int      rg_page_has_sum (const uint8_t *p);
/* Writes the checksum of the page (or run) of n bytes into it. */
void     rg_page_stamp (uint8_t *p, size_t n);

#endif
