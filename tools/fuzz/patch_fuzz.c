/*
** patch_fuzz.c: a libFuzzer target for the patch engine (patch.c).
**
** The input is a document and a list of patch operations, both JSON text:
**
**     {"a":[1,2],"b":{"c":"x"}}                 <- first line: the document
**     [{"op":"move","from":"/a/0","path":"/b/d"},{"op":"incr","path":"/n","value":2}]
**
** (without a newline, the whole input is the op list and a fixed document
** is patched).  Ops are built as the Lua binding builds them: op names
** from add, set, replace, remove, incr and move, paths and `from` as
** MUTF-8 strings, values borrowed from the parsed list.  A path or `from`
** may also be an array of byte values, which reaches the engine as those
** raw bytes (NUL as C0 80, as the binding makes it): the binding passes
** Lua strings on without checking their UTF-8, so the engine must.
**
** The contract (base/patch.c, store/write.c): rg_patch_apply changes the tree it is
** given, in place; the write path hands it a copy, so that a failure
** part-way leaves the stored item alone.  The target therefore patches a
** copy and checks that
**   - the status is 0 or 400 (with a message), never anything else;
**   - the original document and the op values it borrowed are untouched,
**     success or failure (no value is moved out of an op or shared with
**     the result);
**   - the patched copy, whether the patch succeeded or stopped part-way,
**     is a well-formed tree: finite numbers (an incr past the largest
**     double must fail, not store infinity), names only on object members,
**     consistent sibling links; it prints as valid JSON that parses back to
**     the same tree; and after a success it nests at most 128 levels;
**   - applying the same ops to another copy gives the same result.
**
** It links the base archive alone (no Lua, no LMDB):
**   make fuzz FUZZ_SECONDS=60
*/

#include "fuzz_util.h"

#include "base/patch.h"

static const char default_doc[] =
  "{\"id\":\"a\",\"pk\":\"p\",\"n\":1,\"f\":2.5,\"s\":\"x\",\"z\":null,"
  "\"arr\":[1,[2,3],{\"k\":4}],\"obj\":{\"a\":{\"b\":[]},\"~\":1,\"/\":2,"
  "\"\":3},\"big\":9223372036854775807,\"huge\":1.7976931348623157e308}";

static const char *const names[] = {
  "add", "set", "replace", "remove", "incr", "move", NULL
};

/* Raw paths made from byte arrays, freed after each input. */
static char *raw[2 * (RG_MAX_PATCH_OPS + 1)];
static int nraw;

/* A path: a string, or an array of byte values; NULL if neither. */
static const char *path_of (const cJSON *v) {
  const cJSON *b;
  size_t n = 0;
  char *s;
  if (cJSON_IsString(v)) return v->valuestring;
  if (!cJSON_IsArray(v) || nraw == (int)(sizeof(raw) / sizeof(raw[0])))
    return NULL;
  for (b = v->child; b; b = b->next) n++;
  if ((s = (char *)malloc(2 * n + 1)) == NULL) return NULL;
  raw[nraw++] = s;
  for (b = v->child; b; b = b->next) {
    double d = cJSON_IsNumber(b) ? b->valuedouble : -1;
    int c = d >= 0 && d < 256 ? (int)d : '?';
    if (c == 0) { *s++ = (char)0xC0; *s++ = (char)0x80; }
    else *s++ = (char)c;
  }
  *s = '\0';
  return raw[nraw - 1];
}

/* Builds ops from a parsed list; 0 when the list is not one the binding
** would pass to the engine. */
static int build_ops (const cJSON *list, rg_patch_op *ops, int *n) {
  const cJSON *it;
  int i = 0;
  if (!cJSON_IsArray(list)) return 0;
  for (it = list->child; it; it = it->next) {
    const cJSON *op, *path, *from, *value;
    const char *p;
    int k;
    if (i == RG_MAX_PATCH_OPS + 1) break;      /* the engine refuses more */
    if (!cJSON_IsObject(it)) return 0;
    op = cJSON_GetObjectItemCaseSensitive(it, "op");
    path = cJSON_GetObjectItemCaseSensitive(it, "path");
    from = cJSON_GetObjectItemCaseSensitive(it, "from");
    value = cJSON_GetObjectItemCaseSensitive(it, "value");
    if (!cJSON_IsString(op) || (p = path_of(path)) == NULL) return 0;
    for (k = 0; names[k]; k++)
      if (strcmp(names[k], op->valuestring) == 0) break;
    if (names[k] == NULL) return 0;
    memset(&ops[i], 0, sizeof(ops[i]));
    ops[i].op = k + 1;
    ops[i].path = p;
    if (ops[i].op == RG_PATCH_MOVE) {
      if ((ops[i].from = path_of(from)) == NULL) return 0;
    }
    else if (ops[i].op != RG_PATCH_REMOVE) {
      if (value == NULL) return 0;
      ops[i].value = value;
    }
    i++;
  }
  *n = i;
  return 1;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  const char *s = (const char *)data, *nl = memchr(s, '\n', size);
  const char *dtext = default_doc, *otext = s;
  size_t dlen = sizeof(default_doc) - 1, olen = size;
  cJSON *doc = NULL, *list = NULL, *copy, *copy2;
  rg_patch_op ops[RG_MAX_PATCH_OPS + 1];
  rg_buf doc_before, ops_before, after, out1, out2;
  rg_err e;
  int n = 0, rc, rc2;
  if (nl) {
    dtext = s;
    dlen = (size_t)(nl - s);
    otext = nl + 1;
    olen = size - dlen - 1;
  }
  if (rg_json_parse(dtext, dlen, &doc, &e) != 0) return 0;
  while (nraw > 0) free(raw[--nraw]);
  if (rg_json_parse(otext, olen, &list, &e) != 0 ||
      !build_ops(list, ops, &n)) {
    cJSON_Delete(doc);
    cJSON_Delete(list);
    return 0;
  }
  rg_buf_init(&doc_before);
  rg_buf_init(&ops_before);
  rg_buf_init(&after);
  rg_buf_init(&out1);
  rg_buf_init(&out2);
  rg_json_print(doc, &doc_before);
  rg_json_print(list, &ops_before);

  copy = cJSON_Duplicate(doc, 1);
  copy2 = cJSON_Duplicate(doc, 1);
  FZ_CHECK(copy && copy2, "out of memory");
  memset(&e, 0, sizeof(e));
  rc = rg_patch_apply(copy, ops, n, &e);
  FZ_CHECK(rc == 0 || rc == 400, "patch status is neither 0 nor 400");
  if (rc) FZ_CHECK(e.msg[0] != '\0', "a refusal without a message");

  /* what the patch borrowed is untouched */
  rg_json_print(doc, &after);
  FZ_CHECK(after.n == doc_before.n &&
           memcmp(after.p, doc_before.p, after.n) == 0,
           "the original document changed");
  after.n = 0;
  rg_json_print(list, &after);
  FZ_CHECK(after.n == ops_before.n &&
           memcmp(after.p, ops_before.p, after.n) == 0,
           "the op values changed");

  /* the result is a well-formed tree, part-way or not */
  fz_check_tree(copy, 0);
  fz_print_checked(copy, &out1);
  if (rc == 0) FZ_CHECK(fz_depth(copy) <= RG_MAX_DEPTH, "nested too deep");

  /* deterministic */
  rc2 = rg_patch_apply(copy2, ops, n, &e);
  FZ_CHECK(rc2 == rc, "the same patch gave another status");
  rg_json_print(copy2, &out2);
  FZ_CHECK(out1.n == out2.n && memcmp(out1.p, out2.p, out1.n) == 0,
           "the same patch gave another result");

  cJSON_Delete(copy);
  cJSON_Delete(copy2);
  cJSON_Delete(doc);
  cJSON_Delete(list);
  rg_buf_free(&doc_before);
  rg_buf_free(&ops_before);
  rg_buf_free(&after);
  rg_buf_free(&out1);
  rg_buf_free(&out2);
  return 0;
}
