/*
** patch.c: the patch engine, partial updates of a document.
**
** Paths are JSON pointers ("/a/b/0", "~0" for '~', "~1" for '/', "-" for
** the end of an array).  The operations follow Cosmos DB's patch:
**
**   add      objects: set the member; arrays: insert at the index (or "-")
**   set      objects: set the member; arrays: overwrite the element at the
**            index (at the end, or "-", append)
**   replace  overwrite what is there; 400 when nothing is
**   remove   remove what is there; 400 when nothing is
**   incr     add a number; creates a missing member; 400 on a non-number
**   move     remove `from` and add it at `path`; 400 when `from` is missing
**
** An index past the end of an array, a path through a missing member or
** through a scalar is 400.  Operations apply in order, each seeing the
** ones before; the caller works on a copy, so a failure part-way leaves
** the stored item alone.  Integers stay integers under incr.
*/

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/patch.h"

static const char *const opnames[] = {
  "", "add", "set", "replace", "remove", "incr", "move"
};

/* Is a path valid modified UTF-8 (NUL as C0 80)?  A name that is not would
** be written into the document, which no reader could then take. */
static int path_valid (const char *p) {
  const unsigned char *s = (const unsigned char *)p;
  size_t n = strlen(p);
  while (*s) {
    int k;
    if (*s < 0x80) { s++; n--; continue; }
    if (s[0] == 0xC0 && s[1] == 0x80) { s += 2; n -= 2; continue; }
    if ((k = rg_utf8_seq(s, n)) == 0) return 0;
    s += k;
    n -= (size_t)k;
  }
  return 1;
}

/* Reads the next reference token of `p` into `tok` (decoded); returns the
** position after it, or NULL on a bad escape. */
static const char *next_token (const char *p, rg_buf *tok) {
  tok->n = 0;
  rg_buf_reserve(tok, 1);
  if (tok->p) tok->p[0] = '\0';
  for (p++; *p && *p != '/'; p++) {
    if (*p == '~') {
      if (p[1] == '0') rg_buf_addc(tok, '~');
      else if (p[1] == '1') rg_buf_addc(tok, '/');
      else return NULL;
      p++;
    }
    else rg_buf_addc(tok, *p);
  }
  return p;
}

/* An array index token: digits without leading zeros. */
static int array_index (const char *t, long *out) {
  long v = 0;
  const char *s = t;
  if (*s == '\0' || (s[0] == '0' && s[1] != '\0')) return 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > 100000000) return 0;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return 1;
}

typedef struct target {
  cJSON *parent;            /* object or array holding the target */
  rg_buf last;              /* the final token */
  cJSON *node;              /* the target itself, NULL when absent */
  long index;               /* arrays: the index; -1 for "-" */
} target;

/* Finds the parent of `path` and the final token. */
static int locate (cJSON *doc, const char *path, target *t, const char *opn,
                   rg_err *e) {
  const char *p = path;
  cJSON *cur = doc;
  rg_buf tok;
  rg_buf_init(&tok);
  t->node = NULL;
  t->index = -1;
  if (!path_valid(path))
    return rg_fail(e, 400, "patch %s: a path is not valid UTF-8", opn);
  if (path[0] != '/')
    return rg_fail(e, 400, "patch %s: path '%s' must start with '/'", opn, path);
  for (;;) {
    const char *next = next_token(p, &tok);
    const char *name = tok.p ? tok.p : "";
    if (next == NULL) {
      rg_buf_free(&tok);
      return rg_fail(e, 400, "patch %s: bad escape in path '%s'", opn, path);
    }
    if (*next == '\0') {             /* the final token */
      t->parent = cur;
      t->last = tok;
      if (cJSON_IsObject(cur))
        t->node = cJSON_GetObjectItemCaseSensitive(cur, name);
      else if (cJSON_IsArray(cur)) {
        long i;
        if (strcmp(name, "-") == 0) t->index = -1;
        else if (array_index(name, &i)) {
          t->index = i;
          t->node = cJSON_GetArrayItem(cur, (int)i);
        }
        else return rg_fail(e, 400, "patch %s: '%s' is not an array index "
                            "in path '%s'", opn, name, path);
      }
      else return rg_fail(e, 400, "patch %s: path '%s' goes through a scalar",
                          opn, path);
      return 0;
    }
    if (cJSON_IsObject(cur)) cur = cJSON_GetObjectItemCaseSensitive(cur, name);
    else if (cJSON_IsArray(cur)) {
      long i;
      cur = array_index(name, &i) ? cJSON_GetArrayItem(cur, (int)i) : NULL;
    }
    else {
      rg_buf_free(&tok);
      return rg_fail(e, 400, "patch %s: path '%s' goes through a scalar", opn,
                     path);
    }
    if (cur == NULL) {
      rg_buf_free(&tok);
      return rg_fail(e, 400, "patch %s: path '%s' does not exist", opn, path);
    }
    p = next;
  }
}

/* Inserts `v` before the element `at` of `array`.  (cJSON's own
** cJSON_InsertItemInArray refuses valid inserts in the 1.7.15 release.)
** A cJSON array's first child points back to the last one. */
static void insert_before (cJSON *array, cJSON *at, cJSON *v) {
  v->next = at;
  v->prev = at->prev;
  if (at == array->child) array->child = v;
  else v->prev->next = v;
  at->prev = v;
}

/* Nesting depth of a value (a scalar is 0). */
static int depth_of (const cJSON *v) {
  const cJSON *c;
  int d = 0;
  if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return 0;
  for (c = v->child; c; c = c->next) {
    int k = depth_of(c);
    if (k > d) d = k;
  }
  return d + 1;
}

/* Overwrites `old` with `v` (owned) in its parent, keeping the name. */
static int overwrite (cJSON *parent, cJSON *old, cJSON *v, rg_err *e) {
  if (v->string && !(v->type & cJSON_StringIsConst)) cJSON_free(v->string);
  v->string = NULL;
  v->type &= ~cJSON_StringIsConst;
  if (old->string) {
    size_t n = strlen(old->string) + 1;
    if ((v->string = (char *)cJSON_malloc(n)) == NULL) {
      cJSON_Delete(v);
      return rg_fail(e, 500, "out of memory");
    }
    memcpy(v->string, old->string, n);
  }
  cJSON_ReplaceItemViaPointer(parent, old, v);
  return 0;
}

/* Puts `v` (owned) at the target: insert (add) or overwrite (set). */
static int place (target *t, cJSON *v, int insert, const char *opn,
                  const char *path, rg_err *e) {
  const char *name = t->last.p ? t->last.p : "";
  if (cJSON_IsObject(t->parent)) {
    if (t->node) return overwrite(t->parent, t->node, v, e);
    cJSON_AddItemToObject(t->parent, name, v);
    return 0;
  }
  if (v->string && !(v->type & cJSON_StringIsConst)) cJSON_free(v->string);
  v->string = NULL;                 /* array elements have no names */
  v->type &= ~cJSON_StringIsConst;
  {
    long len = cJSON_GetArraySize(t->parent);
    long i = t->index < 0 ? len : t->index;
    if (i > len) {
      cJSON_Delete(v);
      return rg_fail(e, 400, "patch %s: index %ld is past the end of the "
                     "array at '%s' (length %ld)", opn, i, path, len);
    }
    if (i == len) cJSON_AddItemToArray(t->parent, v);
    else if (insert)
      insert_before(t->parent, cJSON_GetArrayItem(t->parent, (int)i), v);
    else return overwrite(t->parent, cJSON_GetArrayItem(t->parent, (int)i),
                          v, e);
  }
  return 0;
}

static int incr (target *t, const cJSON *by, const char *path, rg_err *e) {
  int64_t a, b;
  cJSON *n;
  if (!cJSON_IsNumber(by))
    return rg_fail(e, 400, "patch incr: the value must be a number");
  if (t->node == NULL) {
    if ((n = cJSON_Duplicate(by, 0)) == NULL)
      return rg_fail(e, 500, "out of memory");
    return place(t, n, 0, "incr", path, e);
  }
  if (!cJSON_IsNumber(t->node))
    return rg_fail(e, 400, "patch incr: '%s' is not a number", path);
  if (rg_num_int(t->node, &a) && rg_num_int(by, &b) &&
      !((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)))
    n = rg_num_new_int(a + b);
  else {
    double sum = t->node->valuedouble + by->valuedouble;
    /* JSON has no infinity: a sum past the largest double would be
    ** stored as something else (and index what was never stored) */
    if (!isfinite(sum))
      return rg_fail(e, 400, "patch incr: the result at '%s' is out of the "
                     "range of numbers", path);
    n = cJSON_CreateNumber(sum);
  }
  if (n == NULL) return rg_fail(e, 500, "out of memory");
  return place(t, n, 0, "incr", path, e);
}

static int apply_one (cJSON *doc, const rg_patch_op *op, rg_err *e) {
  const char *opn = opnames[op->op];
  target t;
  cJSON *v;
  int rc;
  rg_buf_init(&t.last);
  if (op->op == RG_PATCH_MOVE) {
    target f;
    cJSON *moved;
    size_t fl = strlen(op->from);
    rg_buf_init(&f.last);
    if (strncmp(op->path, op->from, fl) == 0 && op->path[fl] == '/')
      return rg_fail(e, 400, "patch move: cannot move '%s' into itself",
                     op->from);
    if ((rc = locate(doc, op->from, &f, opn, e))) goto done_f;
    if (f.node == NULL) {
      rc = rg_fail(e, 400, "patch move: 'from' path '%s' does not exist",
                   op->from);
      goto done_f;
    }
    moved = cJSON_DetachItemViaPointer(f.parent, f.node);
    if ((rc = locate(doc, op->path, &t, opn, e))) {
      cJSON_Delete(moved);
      goto done_f;
    }
    rc = place(&t, moved, 1, opn, op->path, e);
  done_f:
    rg_buf_free(&f.last);
    rg_buf_free(&t.last);
    return rc;
  }
  if ((rc = locate(doc, op->path, &t, opn, e))) goto done;
  switch (op->op) {
    case RG_PATCH_ADD:
    case RG_PATCH_SET:
      if ((v = cJSON_Duplicate(op->value, 1)) == NULL) {
        rc = rg_fail(e, 500, "out of memory");
        break;
      }
      rc = place(&t, v, op->op == RG_PATCH_ADD, opn, op->path, e);
      break;
    case RG_PATCH_REPLACE:
      if (t.node == NULL) {
        rc = rg_fail(e, 400, "patch replace: path '%s' does not exist",
                     op->path);
        break;
      }
      if ((v = cJSON_Duplicate(op->value, 1)) == NULL) {
        rc = rg_fail(e, 500, "out of memory");
        break;
      }
      rc = overwrite(t.parent, t.node, v, e);
      break;
    case RG_PATCH_REMOVE:
      if (t.node == NULL) {
        rc = rg_fail(e, 400, "patch remove: path '%s' does not exist",
                     op->path);
        break;
      }
      cJSON_Delete(cJSON_DetachItemViaPointer(t.parent, t.node));
      break;
    case RG_PATCH_INCR:
      rc = incr(&t, op->value, op->path, e);
      break;
    default:
      rc = rg_fail(e, 400, "unknown patch operation");
  }
done:
  rg_buf_free(&t.last);
  return rc;
}

int rg_patch_apply (cJSON *doc, const rg_patch_op *ops, int n, rg_err *e) {
  int i, rc;
  if (n < 1) return rg_fail(e, 400, "a patch needs at least one operation");
  if (n > RG_MAX_PATCH_OPS)
    return rg_fail(e, 400, "a patch takes at most %d operations, not %d",
                   RG_MAX_PATCH_OPS, n);
  for (i = 0; i < n; i++) {
    if ((rc = apply_one(doc, &ops[i], e)) != 0) {
      char msg[sizeof(e->msg)];
      memcpy(msg, e->msg, sizeof(msg));
      return rg_fail(e, rc, "operation %d: %s", i + 1, msg);
    }
  }
  if (depth_of(doc) > RG_MAX_DEPTH)
    return rg_fail(e, 400, "the patched document would nest deeper than %d "
                   "levels", RG_MAX_DEPTH);
  return 0;
}

int rg_patch_ops_parse (const cJSON *list, rg_patch_op **ops, int *nops,
                        rg_err *e) {
  static const char *const names[] = {
    "add", "set", "replace", "remove", "incr", "move", NULL
  };
  const cJSON *it;
  int n = 0, i = 0;
  *ops = NULL;
  *nops = 0;
  if (!cJSON_IsArray(list))
    return rg_fail(e, 400, "patch operations must be a list of tables");
  for (it = list->child; it; it = it->next) n++;
  if (n < 1) return rg_fail(e, 400, "a patch needs at least one operation");
  if (n > RG_MAX_PATCH_OPS)
    return rg_fail(e, 400, "a patch takes at most %d operations, not %d",
                   RG_MAX_PATCH_OPS, n);
  if ((*ops = (rg_patch_op *)calloc((size_t)n, sizeof(rg_patch_op))) == NULL)
    return rg_fail(e, 500, "out of memory");
  for (it = list->child; it; it = it->next, i++) {
    rg_patch_op *op = &(*ops)[i];
    const cJSON *f, *name = NULL, *path = NULL, *from = NULL, *value = NULL;
    int k;
    if (!cJSON_IsObject(it))
      return rg_fail(e, 400, "patch operation %d is not a table", i + 1);
    for (f = it->child; f; f = f->next) {
      if (strcmp(f->string, "op") == 0) name = f;
      else if (strcmp(f->string, "path") == 0) path = f;
      else if (strcmp(f->string, "from") == 0) from = f;
      else if (strcmp(f->string, "value") == 0) value = f;
      else return rg_fail(e, 400, "patch operation %d: unknown field '%s'",
                          i + 1, f->string);
    }
    for (k = 0; names[k]; k++)
      if (cJSON_IsString(name) && strcmp(names[k], name->valuestring) == 0)
        break;
    if (names[k] == NULL)
      return rg_fail(e, 400, "patch operation %d: op must be add, set, "
                     "replace, remove, incr or move", i + 1);
    op->op = k + 1;
    if (!cJSON_IsString(path))
      return rg_fail(e, 400, "patch operation %d: path must be a string",
                     i + 1);
    op->path = path->valuestring;
    if (op->op == RG_PATCH_MOVE) {
      if (!cJSON_IsString(from))
        return rg_fail(e, 400, "patch operation %d: move needs a 'from' "
                       "path", i + 1);
      op->from = from->valuestring;
    }
    if (op->op != RG_PATCH_REMOVE && op->op != RG_PATCH_MOVE) {
      if (value == NULL)
        return rg_fail(e, 400, "patch operation %d: %s needs a value", i + 1,
                       names[k]);
      op->value = value;
    }
  }
  *nops = n;
  return 0;
}
