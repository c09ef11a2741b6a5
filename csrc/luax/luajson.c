/*
** luajson.c: Lua values <-> JSON, and regolith.null, array, object, json.
**
** Lua values, as users write documents: JSON null is regolith.null (a NULL
** light userdata, as lua-cjson's null); regolith.array(t) and
** regolith.object(t) mark a table's shape with a marker metatable; an
** unmarked table is an array when it is a non-empty sequence and an object
** otherwise.  They meet the core's forms (base/json.h) here:
**   - Lua -> cJSON tree, validating: NaN, infinities, cycles, nesting
**     deeper than RG_MAX_DEPTH, non-string object keys, tables that mix a
**     sequence with other keys or have holes, invalid UTF-8 and values JSON
**     cannot carry (functions, userdata, threads) give 400, and nothing is
**     half-built;
**   - JSON text -> Lua values, read by base/json_read.h's scanner straight
**     onto the stack (the read path of every document builds no tree);
**   - cJSON tree -> Lua values.
** Empty arrays and objects come back marked, so that writing them again
** keeps their shape.
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_read.h"
#include "luax/luajson.h"
#include "luax/luax.h"

#define ARRAY_MT  "regolith.array"
#define OBJECT_MT "regolith.object"


/*
** {=====================================================================
** null, and strings
** ======================================================================
*/
/*
** {=====================================================================
** Small helpers shared by the three directions
** ======================================================================
*/
int rgl_json_isnull (lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TLIGHTUSERDATA &&
         lua_touserdata(L, idx) == NULL;
}

static void push_null (lua_State *L) {
  lua_pushlightuserdata(L, NULL);
}

/* Pushes a MUTF-8 C string as the raw Lua string it stands for. */
static void push_mutf8 (lua_State *L, const char *s) {
  const char *p = strchr(s, (char)0xC0);
  if (p == NULL) lua_pushstring(L, s);
  else {
    luaL_Buffer B;
    luaL_buffinit(L, &B);
    for (; *s; s++) {
      if ((unsigned char)s[0] == 0xC0 && (unsigned char)s[1] == 0x80) {
        luaL_addchar(&B, '\0');
        s++;
      }
      else luaL_addchar(&B, *s);
    }
    luaL_pushresult(&B);
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** Lua value -> cJSON tree
** ======================================================================
*/
typedef struct enc {
  lua_State *L;
  int arr_mt, obj_mt;           /* stack slots of the marker metatables */
  int depth;
  size_t mem, max;              /* bytes of tree made, and the bound (0: none) */
  rg_err *e;
  struct {                      /* where we are, for error messages */
    const void *table;
    const char *key;            /* object key, or NULL for an array index */
    size_t keylen;
    lua_Integer index;
  } at[RG_MAX_DEPTH + 2];
} enc;

/* Fails with the message and the path at which the fault was met. */
static int enc_fail (enc *x, const char *what) {
  char path[200];
  size_t n = 0;
  int i;
  path[0] = '\0';
  for (i = 0; i < x->depth && n < sizeof(path) - 24; i++) {
    int w;
    if (x->at[i].key != NULL)
      w = snprintf(path + n, sizeof(path) - n, "/%.*s",
                   (int)(x->at[i].keylen > 40 ? 40 : x->at[i].keylen),
                   x->at[i].key);
    else
      w = snprintf(path + n, sizeof(path) - n, "/%lld",
                   (long long)x->at[i].index);
    if (w < 0) break;
    n += (size_t)w;
  }
  if (n >= sizeof(path)) n = sizeof(path) - 1;
  path[n] = '\0';
  if (n == 0) return rg_fail(x->e, 400, "%s", what);
  return rg_fail(x->e, 400, "%s at %s", what, path);
}

static int enc_value (enc *x, int idx, cJSON **out);

/* Counts `n` bytes of tree against the bound.  The bound is checked as the
** tree grows, not once it is made: a table shared at every level is small
** in Lua but doubles the tree at each one. */
static int enc_grow (enc *x, size_t n) {
  x->mem += n;
  if (x->max == 0 || x->mem <= x->max) return 0;
  return rg_fail(x->e, 413, "the value is too large to convert: its tree "
                 "would take over %lu bytes", (unsigned long)x->max);
}

static int enc_string (enc *x, int idx, cJSON **out) {
  size_t n;
  const char *s = lua_tolstring(x->L, idx, &n);
  int rc;
  if ((rc = enc_grow(x, n + 1))) return rc;
  if (!rg_utf8_valid(s, n)) return enc_fail(x, "string is not valid UTF-8");
  *out = rg_str_new(s, n);
  return *out ? 0 : rg_fail(x->e, 500, "out of memory");
}

static int enc_number (enc *x, int idx, cJSON **out) {
  int64_t i;
  double d;
#if !RG_LUAJIT
  if (lua_isinteger(x->L, idx)) {
    *out = rg_num_new_int((int64_t)lua_tointeger(x->L, idx));
    return *out ? 0 : rg_fail(x->e, 500, "out of memory");
  }
#endif
  d = lua_tonumber(x->L, idx);
  if (d != d) return enc_fail(x, "cannot encode NaN");
  if (d == HUGE_VAL || d == -HUGE_VAL)
    return enc_fail(x, "cannot encode an infinite number");
  if (rg_dbl_int(d, &i)) *out = rg_num_new_int(i);
  else *out = cJSON_CreateNumber(d);
  return *out ? 0 : rg_fail(x->e, 500, "out of memory");
}

/*
** Decides a table's shape: 1 array, 2 object.  An unmarked table is an
** array when its keys are exactly 1..n (n > 0), an object when they are
** all strings (or it is empty); anything else is refused.
*/
static int enc_shape (enc *x, int t, lua_Integer *len) {
  lua_State *L = x->L;
  int marked = 0, has_int = 0, has_str = 0;
  lua_Integer count = 0, maxk = 0;
  if (lua_getmetatable(L, t)) {
    if (lua_rawequal(L, -1, x->arr_mt)) marked = 1;
    else if (lua_rawequal(L, -1, x->obj_mt)) marked = 2;
    lua_pop(L, 1);
  }
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {
    int kt = lua_type(L, -2);
    lua_pop(L, 1);
    if (kt == LUA_TSTRING) has_str = 1;
    else if (kt == LUA_TNUMBER) {
      lua_Number k = lua_tonumber(L, -1);
      int64_t ki;
      if (!rg_dbl_int(k, &ki) || ki < 1) {
        lua_pop(L, 1);
        return enc_fail(x, marked == 1 ? "array keys must be 1..n"
                                       : "object keys must be strings");
      }
      has_int = 1;
      if ((lua_Integer)ki > maxk) maxk = (lua_Integer)ki;
    }
    else {
      lua_pop(L, 1);
      return enc_fail(x, "object keys must be strings");
    }
    count++;
  }
  if (marked == 2) {
    if (has_int) return enc_fail(x, "object keys must be strings");
    return 2;
  }
  if (marked == 1) {
    if (has_str) return enc_fail(x, "array keys must be 1..n");
  }
  else {
    if (has_int && has_str)
      return enc_fail(x, "table mixes array items with other keys");
    if (!has_int) return 2;
  }
  if (maxk != count) return enc_fail(x, "table has holes (array keys must be 1..n)");
  *len = count;
  return 1;
}

static int enc_table (enc *x, int t, cJSON **out) {
  lua_State *L = x->L;
  const void *self = lua_topointer(L, t);
  lua_Integer len = 0, i;
  int shape, d = x->depth, k, rc;
  cJSON *node;
  for (k = 0; k < d; k++)
    if (x->at[k].table == self)
      return enc_fail(x, "cannot encode a cycle (a table contains itself)");
  if (d >= RG_MAX_DEPTH)
    return enc_fail(x, "nesting is deeper than 128 levels");
  luaL_checkstack(L, 6, "document too deep");
  shape = enc_shape(x, t, &len);
  if (shape > 2) return shape;       /* a status: the shape was refused */
  node = shape == 1 ? cJSON_CreateArray() : cJSON_CreateObject();
  if (node == NULL) return rg_fail(x->e, 500, "out of memory");
  x->at[d].table = self;
  x->depth = d + 1;
  if (shape == 1) {
    for (i = 1; i <= len; i++) {
      cJSON *item;
      x->at[d].key = NULL;
      x->at[d].index = i - 1;
      lua_rawgeti(L, t, (int)i);
      rc = enc_value(x, lua_gettop(L), &item);
      lua_pop(L, 1);
      if (rc) goto fail;
      cJSON_AddItemToArray(node, item);
    }
  }
  else {
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
      cJSON *item;
      size_t kn;
      const char *key = lua_tolstring(L, -2, &kn);  /* a string: checked */
      x->at[d].key = key;
      x->at[d].keylen = kn;
      if ((rc = enc_grow(x, kn + 1))) {
        lua_pop(L, 2);
        goto fail;
      }
      if (!rg_utf8_valid(key, kn)) {
        lua_pop(L, 2);
        rc = enc_fail(x, "object key is not valid UTF-8");
        goto fail;
      }
      rc = enc_value(x, lua_gettop(L), &item);
      lua_pop(L, 1);
      if (rc) { lua_pop(L, 1); goto fail; }
      item->string = rg_str_mutf8(key, kn);
      if (item->string == NULL) {
        cJSON_Delete(item);
        lua_pop(L, 1);
        rc = rg_fail(x->e, 500, "out of memory");
        goto fail;
      }
      cJSON_AddItemToArray(node, item);   /* an object is a named list */
    }
  }
  x->depth = d;
  *out = node;
  return 0;
fail:
  x->depth = d;
  cJSON_Delete(node);
  return rc;
}

static int enc_value (enc *x, int idx, cJSON **out) {
  lua_State *L = x->L;
  int rc;
  *out = NULL;
  if ((rc = enc_grow(x, sizeof(cJSON)))) return rc;
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: return enc_string(x, idx, out);
    case LUA_TNUMBER: return enc_number(x, idx, out);
    case LUA_TBOOLEAN:
      *out = cJSON_CreateBool(lua_toboolean(L, idx));
      return *out ? 0 : rg_fail(x->e, 500, "out of memory");
    case LUA_TTABLE: return enc_table(x, idx, out);
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == NULL) {
        *out = cJSON_CreateNull();
        return *out ? 0 : rg_fail(x->e, 500, "out of memory");
      }
      return enc_fail(x, "cannot encode a light userdata");
    case LUA_TNIL: return enc_fail(x, "cannot encode nil");
    default: {
      char msg[64];
      snprintf(msg, sizeof(msg), "cannot encode a %s",
               lua_typename(L, lua_type(L, idx)));
      return enc_fail(x, msg);
    }
  }
}

int rgl_json_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e) {
  return rgl_json_from_lua_max(L, idx, 0, out, e);
}

int rgl_json_from_lua_max (lua_State *L, int idx, size_t max, cJSON **out,
                          rg_err *e) {
  enc x;
  int top = lua_gettop(L), rc;
  idx = idx < 0 && idx > LUA_REGISTRYINDEX ? top + idx + 1 : idx;
  luaL_checkstack(L, 4, NULL);
  x.L = L;
  x.e = e;
  x.depth = 0;
  x.mem = 0;
  x.max = max;
  luaL_getmetatable(L, ARRAY_MT);
  x.arr_mt = lua_gettop(L);
  luaL_getmetatable(L, OBJECT_MT);
  x.obj_mt = lua_gettop(L);
  rc = enc_value(&x, idx, out);
  lua_settop(L, top);
  return rc;
}
/* }===================================================================== */


/*
** {=====================================================================
** JSON text -> Lua values
** ======================================================================
*/
/* Many texts pushed in a row (a page of results) mostly repeat the same
** member names: the reader keeps the strings of the last KEYS names it
** met, in a table on the stack (so they stay alive) and by their bytes,
** and pushes a name it meets again from there instead of interning it
** again. */
#define KEYS 64

typedef struct lreader {
  rg_jscan P;                   /* first: the scanner's state */
  lua_State *L;
  int arr_mt, obj_mt;           /* stack slots of the marker metatables */
  int keys;                     /* stack slot of the names' table (0: none) */
  struct { const char *s; size_t n; } key[KEYS];   /* s: the string's bytes */
} lreader;

/* Pushes a member name. */
static void push_key (lreader *R, const char *k, size_t n) {
  lua_State *L = R->L;
  unsigned h;
  if (R->keys == 0 || n == 0 || n > 40) { lua_pushlstring(L, k, n); return; }
  h = ((unsigned)n * 31u + (unsigned char)k[0] * 7u +
       (unsigned char)k[n - 1]) % KEYS;
  if (R->key[h].n == n && memcmp(R->key[h].s, k, n) == 0) {
    lua_rawgeti(L, R->keys, (lua_Integer)h + 1);
    return;
  }
  lua_pushlstring(L, k, n);
  R->key[h].s = lua_tostring(L, -1);        /* (LuaJIT's push gives none) */
  R->key[h].n = n;
  lua_pushvalue(L, -1);
  lua_rawseti(L, R->keys, (lua_Integer)h + 1);
}

static int parse_value (lreader *R);

/* An empty container's table, marked so that it stays what it was. */
static void push_marked (lreader *R, int mt) {
  lua_createtable(R->L, 0, 0);
  lua_pushvalue(R->L, mt);
  lua_setmetatable(R->L, -2);
}

static int parse_array (lreader *R) {
  rg_jscan *P = &R->P;
  lua_State *L = R->L;
  int rc, n = 0;
  if (++P->depth > RG_MAX_DEPTH) return rg_js_fail(P, "nesting deeper than 128");
  P->p++;                                   /* '[' */
  luaL_checkstack(L, 4, "JSON too deep");
  rg_js_ws(P);
  if (P->p < P->end && *P->p == ']') {      /* an empty array stays one */
    P->p++;
    push_marked(R, R->arr_mt);
    P->depth--;
    return 0;
  }
  lua_createtable(L, 0, 0);
  for (;;) {
    rg_js_ws(P);
    if ((rc = parse_value(R)) != 0) return rc;
    lua_rawseti(L, -2, ++n);
    rg_js_ws(P);
    if (P->p < P->end && *P->p == ',') { P->p++; continue; }
    if (P->p < P->end && *P->p == ']') { P->p++; break; }
    return rg_js_fail(P, "expected ',' or ']'");
  }
  P->depth--;
  return 0;
}

/* An object's members are gathered on the Lua stack (up to STACKED of
** them) before its table is made, so that the table is made at its size
** instead of growing (and rehashing) member by member. */
#define STACKED 32

/* Makes the table of the `n` key-value pairs above stack index `base`,
** with room for `size` members, and leaves it alone above `base`. */
static void make_table (lua_State *L, int base, int n, int size) {
  int i;
  lua_createtable(L, 0, size);
  for (i = 0; i < n; i++) {
    lua_pushvalue(L, base + 1 + 2 * i);
    lua_pushvalue(L, base + 2 + 2 * i);
    lua_rawset(L, -3);
  }
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
}

static int parse_object (lreader *R) {
  rg_jscan *P = &R->P;
  lua_State *L = R->L;
  int rc, n = 0, base, made = 0;
  if (++P->depth > RG_MAX_DEPTH) return rg_js_fail(P, "nesting deeper than 128");
  P->p++;                                   /* '{' */
  luaL_checkstack(L, 2 * STACKED + 4, "JSON too deep");
  base = lua_gettop(L);
  rg_js_ws(P);
  if (P->p < P->end && *P->p == '}') {
    P->p++;
    push_marked(R, R->obj_mt);
    P->depth--;
    return 0;
  }
  for (;;) {
    const char *key;
    size_t klen;
    rg_js_ws(P);
    if (P->p >= P->end || *P->p != '"') return rg_js_fail(P, "expected a key");
    if ((rc = rg_js_string(P, &key, &klen)) != 0) return rc;
    push_key(R, key, klen);
    rg_js_ws(P);
    if (P->p >= P->end || *P->p != ':') return rg_js_fail(P, "expected ':'");
    P->p++;
    rg_js_ws(P);
    if ((rc = parse_value(R)) != 0) return rc;
    n++;
    if (made) lua_rawset(L, -3);
    else if (n == STACKED) {                /* a large object: grow from here */
      make_table(L, base, n, 2 * STACKED);
      made = 1;
    }
    rg_js_ws(P);
    if (P->p < P->end && *P->p == ',') { P->p++; continue; }
    if (P->p < P->end && *P->p == '}') { P->p++; break; }
    return rg_js_fail(P, "expected ',' or '}'");
  }
  if (!made) make_table(L, base, n, n);
  P->depth--;
  return 0;
}

static int parse_value (lreader *R) {
  rg_jscan *P = &R->P;
  lua_State *L = R->L;
  int rc;
  if (P->p >= P->end) return rg_js_fail(P, "unexpected end of text");
  switch (*P->p) {
    case '{': return parse_object(R);
    case '[': return parse_array(R);
    case '"': {
      const char *s;
      size_t n;
      if ((rc = rg_js_string(P, &s, &n)) != 0) return rc;
      lua_pushlstring(L, s, n);
      return 0;
    }
    case 't':
      if ((rc = rg_js_literal(P, "true", 4)) != 0) return rc;
      lua_pushboolean(L, 1);
      return 0;
    case 'f':
      if ((rc = rg_js_literal(P, "false", 5)) != 0) return rc;
      lua_pushboolean(L, 0);
      return 0;
    case 'n':
      if ((rc = rg_js_literal(P, "null", 4)) != 0) return rc;
      push_null(L);
      return 0;
    default: {
      int isint = 0;
      int64_t iv = 0;
      double dv = 0;
      if (*P->p != '-' && (*P->p < '0' || *P->p > '9'))
        return rg_js_fail(P, "unexpected character");
      if ((rc = rg_js_number(P, &isint, &iv, &dv)) != 0) return rc;
      if (isint) lua_pushinteger(L, (lua_Integer)iv);
      else lua_pushnumber(L, dv);
      return 0;
    }
  }
}

/*
** The buffer of decoded strings when pushing to Lua: any lua_* call may
** raise a memory error (the script sandbox's budget makes that routine),
** which would leak a buffer the parser holds in C.  So the buffer belongs
** to the Lua state: a userdata in the registry, reused by every push and
** freed by its __gc; a large one is given back after each push.
*/
#define TMP_KEY "regolith.json.tmp"

static int tmp_gc (lua_State *L) {
  rg_buf_free((rg_buf *)lua_touserdata(L, 1));
  return 0;
}

static rg_buf *state_tmp (lua_State *L) {
  rg_buf *b;
  lua_getfield(L, LUA_REGISTRYINDEX, TMP_KEY);
  b = (rg_buf *)lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (b) return b;
  b = (rg_buf *)rg_newuserdata(L, sizeof(rg_buf));
  rg_buf_init(b);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, tmp_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, TMP_KEY);
  return b;
}

/* Readies R over the stack's top: the two marker metatables, and the
** names' table when `keys`. */
static void reader_open (lua_State *L, lreader *R, int trusted, int keys,
                         rg_err *e) {
  int top = lua_gettop(L);
  luaL_checkstack(L, 6, NULL);
  R->P.tmp = state_tmp(L);
  luaL_getmetatable(L, ARRAY_MT);
  luaL_getmetatable(L, OBJECT_MT);
  R->L = L;
  R->arr_mt = top + 1;
  R->obj_mt = top + 2;
  R->keys = 0;
  if (keys) {
    lua_createtable(L, KEYS, 0);
    R->keys = top + 3;
    memset(R->key, 0, sizeof(R->key));
  }
  R->P.trusted = trusted;
  R->P.mutf8 = 0;
  R->P.e = e;
}

/* Pushes the value of text s (n bytes) with R. */
static int reader_push (lreader *R, const char *s, size_t n) {
  int rc;
  R->P.s = R->P.p = s;
  R->P.end = s + n;
  R->P.depth = 0;
  rg_js_ws(&R->P);
  rc = parse_value(R);
  if (rc == 0) {
    rg_js_ws(&R->P);
    if (R->P.p != R->P.end)
      rc = rg_js_fail(&R->P, "unexpected text after the value");
  }
  return rc;
}

static void reader_close (lreader *R) {
  if (R->P.tmp->cap > (64u << 10)) rg_buf_free(R->P.tmp);
}

/* The text of stored items was written by rg_json_print: trusted. */
static int push_text (lua_State *L, const char *s, size_t n, int trusted,
                      rg_err *e) {
  lreader R;
  int top = lua_gettop(L), rc;
  reader_open(L, &R, trusted, 0, e);
  rc = reader_push(&R, s, n);
  reader_close(&R);
  if (rc != 0) { lua_settop(L, top); return rc; }
  lua_replace(L, top + 1);                  /* the value over the markers */
  lua_settop(L, top + 1);
  return 0;
}

int rgl_json_push_stored_list (lua_State *L, const char *text,
                               const size_t *off, size_t count, rg_err *e) {
  lreader R;
  int top = lua_gettop(L), rc = 0;
  size_t i;
  reader_open(L, &R, 1, count > 1, e);
  for (i = 0; i < count && rc == 0; i++)
    if ((rc = reader_push(&R, text + off[2 * i], off[2 * i + 1])) == 0)
      lua_rawseti(L, top, (lua_Integer)i + 1);
  reader_close(&R);
  lua_settop(L, top);
  return rc;
}

int rgl_json_push_text (lua_State *L, const char *s, size_t n, rg_err *e) {
  return push_text(L, s, n, 0, e);
}

int rgl_json_push_stored (lua_State *L, const char *s, size_t n, rg_err *e) {
  return push_text(L, s, n, 1, e);
}
/* }===================================================================== */


/*
** {=====================================================================
** cJSON tree -> Lua value
** ======================================================================
*/
static void push_tree (lua_State *L, const cJSON *v, int arr_mt, int obj_mt) {
  const cJSON *c;
  int n;
  switch (v->type & 0xFF) {
    case cJSON_NULL: push_null(L); break;
    case cJSON_False: lua_pushboolean(L, 0); break;
    case cJSON_True: lua_pushboolean(L, 1); break;
    case cJSON_Number: {
      int64_t i;
      if (rg_num_int(v, &i)) lua_pushinteger(L, (lua_Integer)i);
      else lua_pushnumber(L, v->valuedouble);
      break;
    }
    case cJSON_String: push_mutf8(L, v->valuestring); break;
    case cJSON_Array:
      luaL_checkstack(L, 4, "document too deep");
      for (n = 0, c = v->child; c; c = c->next) n++;
      lua_createtable(L, n, 0);
      if (n == 0) { lua_pushvalue(L, arr_mt); lua_setmetatable(L, -2); }
      for (n = 0, c = v->child; c; c = c->next) {
        push_tree(L, c, arr_mt, obj_mt);
        lua_rawseti(L, -2, ++n);
      }
      break;
    case cJSON_Object:
      luaL_checkstack(L, 4, "document too deep");
      for (n = 0, c = v->child; c; c = c->next) n++;
      lua_createtable(L, 0, n);
      if (n == 0) { lua_pushvalue(L, obj_mt); lua_setmetatable(L, -2); }
      for (c = v->child; c; c = c->next) {
        push_mutf8(L, c->string ? c->string : "");
        push_tree(L, c, arr_mt, obj_mt);
        lua_rawset(L, -3);
      }
      break;
    default: push_null(L); break;
  }
}

void rgl_json_push (lua_State *L, const cJSON *v) {
  int top = lua_gettop(L);
  luaL_checkstack(L, 4, NULL);
  luaL_getmetatable(L, ARRAY_MT);
  luaL_getmetatable(L, OBJECT_MT);
  push_tree(L, v, top + 1, top + 2);
  lua_replace(L, top + 1);
  lua_settop(L, top + 1);
}
/* }===================================================================== */


/*
** {=====================================================================
** The Lua face: regolith.null, array, object, json.encode, json.decode
** ======================================================================
*/
static int mark (lua_State *L, const char *mt) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  luaL_getmetatable(L, mt);
  lua_setmetatable(L, 1);
  return 1;
}

static int l_array (lua_State *L) { return mark(L, ARRAY_MT); }
static int l_object (lua_State *L) { return mark(L, OBJECT_MT); }

static int l_encode (lua_State *L) {
  cJSON *tree = NULL;
  rg_err e;
  rg_buf b;
  int rc;
  luaL_checkany(L, 1);
  rc = rgl_json_from_lua(L, 1, &tree, &e);
  if (rc) return rgl_push_fail(L, &e);
  rg_buf_init(&b);
  rg_json_print(tree, &b);
  cJSON_Delete(tree);
  if (b.oom) {
    rg_buf_free(&b);
    rg_fail(&e, 500, "out of memory");
    return rgl_push_fail(L, &e);
  }
  lua_pushlstring(L, b.p, b.n);
  rg_buf_free(&b);
  return 1;
}

static int l_decode (lua_State *L) {
  size_t n;
  const char *s;
  rg_err e;
  if (lua_type(L, 1) != LUA_TSTRING) {
    rg_fail(&e, 400, "json.decode expects a string, got %s",
            luaL_typename(L, 1));
    return rgl_push_fail(L, &e);
  }
  s = lua_tolstring(L, 1, &n);
  if (rgl_json_push_text(L, s, n, &e) != 0) return rgl_push_fail(L, &e);
  return 1;
}

void rgl_json_open (lua_State *L) {
  static const luaL_Reg json_funcs[] = {
    {"encode", l_encode}, {"decode", l_decode}, {NULL, NULL}
  };
  luaL_newmetatable(L, ARRAY_MT);
  lua_pushliteral(L, "array");
  lua_setfield(L, -2, "__jsontype");
  lua_pop(L, 1);
  luaL_newmetatable(L, OBJECT_MT);
  lua_pushliteral(L, "object");
  lua_setfield(L, -2, "__jsontype");
  lua_pop(L, 1);
  push_null(L);
  lua_setfield(L, -2, "null");
  lua_pushcfunction(L, l_array);
  lua_setfield(L, -2, "array");
  lua_pushcfunction(L, l_object);
  lua_setfield(L, -2, "object");
  lua_newtable(L);
  luaL_setfuncs(L, json_funcs, 0);
  push_null(L);
  lua_setfield(L, -2, "null");
  lua_setfield(L, -2, "json");
}
/* }===================================================================== */
