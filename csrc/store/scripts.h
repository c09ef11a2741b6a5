/*
** scripts.h: stored procedures and triggers as the database keeps them.
**
** One record per script in the meta table (scripts.c writes the format
** down), and "\1scripts": the database's script version, which every
** create, replace and delete moves forward; a record carries the version
** that wrote it, so that a process caching compiled scripts (script/)
** knows when its copy is stale.  Invariant: a version is never handed out
** twice for different sources, even across rolled-back transactions.
*/

#ifndef rg_scripts_h
#define rg_scripts_h

#include "store/container.h"
#include "store/env.h"

enum { RG_TRIG_PRE = 1, RG_TRIG_POST = 2 };                 /* types */
enum { RG_TOP_ALL = 0, RG_TOP_CREATE, RG_TOP_REPLACE, RG_TOP_DELETE };
enum { RG_PUT_CREATE = 1, RG_PUT_REPLACE };

#define RG_MAX_SOURCE RG_MAX_ITEM          /* bytes of source: 413 */

/* A stored record, read in a transaction (src points into it). */
typedef struct rg_srec {
  uint64_t version;
  int type, op, automatic;           /* triggers */
  const char *src;
  size_t len;
} rg_srec;

/* Reads the record of procedure (tag RG_MK_PROC), user-defined function
** (RG_MK_UDF) or trigger (RG_MK_TRIG)
** `name`: 0, 404 (absent) or 500.  `key` (5 + RG_MAX_NAME bytes) receives
** its meta key, which names it in caches. */
int rg_srec_get (rg_txn *txn, rg_env *env, int tag, uint32_t cid,
                 const char *name, size_t n, rg_srec *r, uint8_t *key,
                 size_t *klen, rg_err *e);
/* The database's script version (0: no script was ever stored). */
int rg_scripts_version (rg_txn *txn, rg_env *env, uint64_t *version,
                        rg_err *e);
/* Calls fn for every record of a container's procedures or triggers, in
** name order (r NULL for a record that does not decode); a nonzero return
** stops the walk and is returned. */
typedef int (*rg_srec_fn) (void *ud, const char *name, size_t n,
                           const rg_srec *r);
int rg_srec_each (rg_txn *txn, rg_env *env, uint32_t cid, int tag,
                  rg_srec_fn fn, void *ud, rg_err *e);

/* Stores a procedure (tag RG_MK_PROC) or trigger (RG_MK_TRIG, with `trig`
** = {type, operation, automatic}); mode RG_PUT_CREATE (409 when it exists)
** or RG_PUT_REPLACE (404 when it does not).  The source is checked by the
** caller (the script runtime compiles it first). */
int rg_script_put (rg_scope *s, const rg_cont *c, int tag, const char *name,
                   size_t n, int mode, const int trig[3], const char *src,
                   size_t len, rg_err *e);
int rg_script_delete (rg_scope *s, const rg_cont *c, int tag,
                      const char *name, size_t n, rg_err *e);
/* Reads a procedure's or trigger's source into `src` (copied), and for a
** trigger its {type, operation, automatic} into `trig`: 0 or 404. */
int rg_script_get (const rg_cont *c, int tag, const char *name, size_t n,
                   rg_buf *src, int trig[3], rg_err *e);
/* The names of a container's procedures or triggers (sorted), appended to
** `out` as (u32 length, bytes) pairs; *count says how many. */
int rg_script_names (const rg_cont *c, int tag, rg_buf *out, int *count,
                     rg_err *e);

#endif
