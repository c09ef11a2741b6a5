/*
** json_fuzz.c: a libFuzzer target for the JSON bridge (base/json.c and
** luax/luajson.c).
**
** The input is any bytes, taken as JSON text.  The bridge has one parser
** with two builders (a cJSON tree, or Lua values pushed straight onto a
** stack), a printer, and the Lua -> tree converter; the target checks that
** they agree:
**   - the tree parser and the Lua parser accept exactly the same texts,
**     with the same status (400), and a refused text leaves no tree;
**   - an accepted text prints as valid JSON (checked by a validator written
**     apart from base/json.c), which parses back to the same tree and prints the
**     same text again (print . parse is stable);
**   - the Lua value of the text, converted back to a tree, is the tree the
**     tree parser made (members compared as sets: Lua tables keep no order,
**     and the last of duplicate names wins), and so is the Lua value pushed
**     from the tree (rgl_json_push) and from the printed text read as stored
**     text (rgl_json_push_stored, which trusts its UTF-8).
**
** It links the base and luax archives with the Lua library (no LMDB):
**   make fuzz FUZZ_SECONDS=60
*/

#include "fuzz_util.h"

#include "luax/luajson.h"
#include "lualib.h"

static lua_State *L;

static void setup (void) {
  L = luaL_newstate();
  FZ_CHECK(L != NULL, "no Lua state");
  lua_newtable(L);
  rgl_json_open(L);                   /* the marker metatables */
  lua_pop(L, 1);
}

/* Converts the Lua value on top back into a tree and compares it. */
static void check_lua_value (const cJSON *ref, const char *what) {
  cJSON *t = NULL;
  rg_err e;
  int top = lua_gettop(L);
  FZ_CHECK(rgl_json_from_lua(L, -1, &t, &e) == 0, what);
  FZ_CHECK(lua_gettop(L) == top, "rgl_json_from_lua moved the stack");
  FZ_CHECK(fz_tree_same(ref, t), what);
  cJSON_Delete(t);
  lua_pop(L, 1);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  cJSON *tree = (cJSON *)&tree;      /* must be reset by the parser */
  rg_buf text;
  rg_err e1, e2;
  int rc1, rc2, top;
  if (L == NULL) setup();
  top = lua_gettop(L);

  rc1 = rg_json_parse(s, size, &tree, &e1);
  rc2 = rgl_json_push_text(L, s, size, &e2);
  FZ_CHECK(rc1 == 0 || rc1 == 400, "parse status");
  FZ_CHECK(rc1 == rc2, "the tree and Lua parsers disagree on a text");
  if (rc1) {
    FZ_CHECK(tree == NULL, "a refused text left a tree");
    FZ_CHECK(lua_gettop(L) == top, "a refused text left Lua values");
    FZ_CHECK(strlen(e1.msg) > 0 && strcmp(e1.msg, e2.msg) == 0,
             "the two parsers explain a refusal differently");
    return 0;
  }
  FZ_CHECK(lua_gettop(L) == top + 1, "push_text pushed one value");
  FZ_CHECK(fz_valid_json(s, size), "accepted text the validator refuses");
  fz_check_tree(tree, 0);
  FZ_CHECK(fz_depth(tree) <= RG_MAX_DEPTH, "accepted a text nested too deep");

  check_lua_value(tree, "Lua value of the text differs from its tree");

  rgl_json_push(L, tree);
  check_lua_value(tree, "Lua value of the tree differs from the tree");

  rg_buf_init(&text);
  fz_print_checked(tree, &text);
  FZ_CHECK(rgl_json_push_stored(L, text.p, text.n, &e2) == 0,
           "printed text refused as stored text");
  check_lua_value(tree, "Lua value of the stored text differs");
  rg_buf_free(&text);

  cJSON_Delete(tree);
  lua_settop(L, top);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
