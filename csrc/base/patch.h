/*
** patch.h: the patch engine, partial updates of a cJSON document.
**
** Paths are JSON pointers with Cosmos DB's patch semantics (patch.c says
** each operation's rule).  Invariants: operations apply in order, each
** seeing the ones before; a fault gives 400 with a message naming the op,
** and the caller works on a copy, so a failure part-way leaves nothing
** behind; integers stay integers under incr.
*/

#ifndef rg_patch_h
#define rg_patch_h

#include <cjson/cJSON.h>

#include "base/support.h"

enum { RG_PATCH_ADD = 1, RG_PATCH_SET, RG_PATCH_REPLACE, RG_PATCH_REMOVE,
       RG_PATCH_INCR, RG_PATCH_MOVE };

typedef struct rg_patch_op {
  int op;
  const char *path;          /* JSON pointer, MUTF-8 */
  const char *from;          /* move */
  const cJSON *value;        /* add/set/replace/incr: borrowed */
} rg_patch_op;

/* Applies the ops in order to `doc` (modified in place); 400 with a
** message naming the op on any fault. */
int rg_patch_apply (cJSON *doc, const rg_patch_op *ops, int n, rg_err *e);
/* Reads a list of patch operations given as a JSON array of objects
** {op, path, value, from}: *ops (malloc'd, the caller frees it even on
** failure) borrows the strings and values of `list`, which must outlive
** it; 400 naming the operation for anything wrong. */
int rg_patch_ops_parse (const cJSON *list, rg_patch_op **ops, int *nops,
                        rg_err *e);

#endif
