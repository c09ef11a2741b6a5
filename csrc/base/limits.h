/*
** limits.h: the limits of regolith, in one place.
**
** Every bound a user can meet (and the error it gives) is named here, so
** that the code, the specs and docs/api.md ("Limits") agree.  Nothing here
** depends on any library.
*/

#ifndef rg_limits_h
#define rg_limits_h

#define RG_MAX_DEPTH       128            /* JSON nesting: 400 */
#define RG_MAX_ITEM        (2u << 20)     /* stored item text, bytes: 413 */
#define RG_MAX_ID          1023           /* id bytes: 400 */
#define RG_MAX_NAME        255            /* container/procedure/trigger names */
#define RG_MAX_PATCH_OPS   10
#define RG_MAX_BATCH_OPS   100
/* the items a batch's creates, replaces, upserts and patches write, as
** stored (JSON text), in all: Cosmos DB's 2 MB request payload: 413.  It
** does not bound a cluster's apply: a batch's also writes the items'
** index, latest and unique entries, and with an all-versions change feed
** a copy of each item, so it can pass RG_MAX_APPLY_BYTES (a script's
** bound, not a batch's) */
#define RG_MAX_BATCH_BYTES (2u << 20)
#define RG_MAX_PK_PATHS    3
#define RG_MAX_PARTITIONS  256
#define RG_MAX_PATH_SEGS   16             /* segments in a declared path */
#define RG_MAX_FT_PATHS    64             /* paths of a full-text policy */
#define RG_MAX_KEY         511            /* LMDB's compiled-in key limit */
#define RG_MAX_SQL         (512u << 10)
#define RG_MAX_TTL         2147483647     /* seconds (about 68 years) */
#define RG_MAX_INSTANCE    200            /* bytes of a processor instance name */
#define RG_DEFAULT_PARTITION_BYTES (20ull << 30)
/* what the transaction of a procedure or a trigger may write, as the
** memory it holds until the commit (store/kv.h, rg_kv_pending): 413 */
#define RG_MAX_TXN_DIRTY   (64ull << 20)
/* what the write set of one call of a procedure (its triggers' writes
** included) may hold on a Redis Cluster, where a place's part applies in
** one Function call during which its primary answers nothing else: items
** written and bytes (store/kv.h, rg_kv_pending), so that an apply stays far
** under cluster-node-timeout (docs/cluster.md).  A script's operations
** report not accepted with less than a tenth left; past it: 413 */
#define RG_MAX_APPLY_ITEMS 1000
#define RG_MAX_APPLY_BYTES (4ull << 20)
/* seconds of CPU a query page may take by default (open's query_time):
** 408 */
#define RG_QUERY_TIME      5.0

#endif
