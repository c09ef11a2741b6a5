/*
** json.c: the JSON bridge between Lua values, cJSON trees and JSON text.
**
** Three representations meet here:
**   - Lua values, as users write documents.  JSON null is regolith.null
**     (a NULL light userdata, as lua-cjson's null); regolith.array(t) and
**     regolith.object(t) mark a table's shape with a marker metatable; an
**     unmarked table is an array when it is a non-empty sequence and an
**     object otherwise.
**   - cJSON trees, which the core works on (index terms, patches, queries,
**     triggers).  Two conventions make cJSON carry everything Lua can:
**       * strings are modified UTF-8: NUL is stored as the bytes C0 80,
**         which never occur in valid UTF-8, so the mapping is exact;
**       * an integer beyond 2^53 keeps its exact decimal text in the number
**         node's `valuestring` (cJSON frees and copies that field for any
**         node type); `valuedouble` holds the nearest double.
**   - JSON text, as stored in LMDB: compact, standard JSON (NUL as \u0000),
**     integers printed exactly, other numbers in the shortest form that
**     reads back to the same double.
**
** Every conversion validates: NaN, infinities, cycles, nesting deeper than
** RG_MAX_DEPTH, non-string object keys, tables that mix a sequence with
** other keys or have holes, invalid UTF-8 and values JSON cannot carry
** (functions, userdata, threads) give 400, and nothing is half-built: a
** failed conversion frees what it made (or restores the Lua stack).
**
** The text reader is one recursive-descent parser with two builders: it
** makes a cJSON tree or pushes Lua values straight onto the stack (the
** read path, which then never builds a tree).
*/

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regolith.h"

#define ARRAY_MT  "regolith.array"
#define OBJECT_MT "regolith.object"

#define TWO53 9007199254740992.0          /* 2^53 */
#define TWO63 9223372036854775808.0       /* 2^63 */


/*
** {=====================================================================
** Small helpers shared by the three directions
** ======================================================================
*/
int rg_json_isnull (lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TLIGHTUSERDATA &&
         lua_touserdata(L, idx) == NULL;
}

void rg_json_pushnull (lua_State *L) {
  lua_pushlightuserdata(L, NULL);
}

/* Is `d` integral and representable as an int64? */
static int dbl_is_int (double d, int64_t *out) {
  if (!(d >= -TWO63 && d < TWO63) || floor(d) != d) return 0;
  *out = (int64_t)d;
  return 1;
}

int rg_num_int (const cJSON *v, int64_t *out) {
  if (v->valuestring != NULL) {            /* exact big integer */
    *out = strtoll(v->valuestring, NULL, 10);
    return 1;
  }
  return dbl_is_int(v->valuedouble, out);
}

cJSON *rg_num_new_int (int64_t i) {
  cJSON *n = cJSON_CreateNumber((double)i);
  if (n != NULL && (i > (int64_t)TWO53 || i < -(int64_t)TWO53)) {
    char tmp[32];
    size_t len = (size_t)snprintf(tmp, sizeof(tmp), "%lld", (long long)i);
    n->valuestring = (char *)cJSON_malloc(len + 1);
    if (n->valuestring == NULL) { cJSON_Delete(n); return NULL; }
    memcpy(n->valuestring, tmp, len + 1);
  }
  return n;
}

/* Copies raw bytes into a new modified-UTF-8 C string (NUL -> C0 80). */
static char *mutf8_dup (const char *s, size_t n) {
  size_t nul = 0, i;
  char *d, *w;
  for (i = 0; i < n; i++) nul += (s[i] == '\0');
  d = (char *)cJSON_malloc(n + nul + 1);
  if (d == NULL) return NULL;
  if (nul == 0) memcpy(d, s, n);
  else {
    for (i = 0, w = d; i < n; i++) {
      if (s[i] == '\0') { *w++ = (char)0xC0; *w++ = (char)0x80; }
      else *w++ = s[i];
    }
  }
  d[n + nul] = '\0';
  return d;
}

/* A string node taking ownership of a cJSON_malloc'd MUTF-8 string. */
static cJSON *str_node (char *owned) {
  cJSON *n;
  if (owned == NULL) return NULL;
  n = cJSON_CreateNull();
  if (n == NULL) { cJSON_free(owned); return NULL; }
  n->type = cJSON_String;
  n->valuestring = owned;
  return n;
}

cJSON *rg_str_new (const char *s, size_t n) {
  return str_node(mutf8_dup(s, n));
}

void rg_str_bytes (const cJSON *v, rg_buf *b) {
  const char *s = v->valuestring, *p;
  while ((p = strchr(s, (char)0xC0)) != NULL) {
    if ((unsigned char)p[1] == 0x80) {
      rg_buf_add(b, s, (size_t)(p - s));
      rg_buf_addc(b, '\0');
    }
    else rg_buf_add(b, s, (size_t)(p - s) + 1);
    s = (unsigned char)p[1] == 0x80 ? p + 2 : p + 1;
  }
  rg_buf_adds(b, s);
}

size_t rg_str_rawlen (const char *s) {
  size_t n = 0;
  for (; *s; s++) {
    if ((unsigned char)s[0] == 0xC0 && (unsigned char)s[1] == 0x80) s++;
    n++;
  }
  return n;
}

int rg_str_cmp (const char *a, const char *b) {
  const unsigned char *p = (const unsigned char *)a;
  const unsigned char *q = (const unsigned char *)b;
  for (;;) {
    unsigned x = *p, y = *q;
    if (x == 0xC0 && p[1] == 0x80) { x = 0; p++; }
    if (y == 0xC0 && q[1] == 0x80) { y = 0; q++; }
    if (*p == 0 && *q == 0) return 0;
    if (*p == 0) return -1;                /* a is a prefix of b */
    if (*q == 0) return 1;
    if (x != y) return x < y ? -1 : 1;
    p++; q++;
  }
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
  if (dbl_is_int(d, &i)) *out = rg_num_new_int(i);
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
      if (!dbl_is_int(k, &ki) || ki < 1) {
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
      item->string = mutf8_dup(key, kn);
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

int rg_json_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e) {
  return rg_json_from_lua_max(L, idx, 0, out, e);
}

int rg_json_from_lua_max (lua_State *L, int idx, size_t max, cJSON **out,
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
** cJSON tree -> JSON text
** ======================================================================
*/
static char locale_point (void) {
  const char *p = localeconv()->decimal_point;
  return p && p[0] ? p[0] : '.';
}

/* Shortest of %.15g, %.16g, %.17g that reads back as the same double. */
static void print_double (rg_buf *b, double d) {
  char tmp[40], dp = locale_point();
  int prec, n = 0, i;
  if (d != d || d == HUGE_VAL || d == -HUGE_VAL) {
    rg_buf_adds(b, "null");           /* unreachable from validated trees */
    return;
  }
  for (prec = 15; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  for (i = 0; i < n; i++)
    if (tmp[i] == dp) tmp[i] = '.';
  rg_buf_add(b, tmp, (size_t)n);
}

static void print_number (rg_buf *b, const cJSON *v) {
  int64_t i;
  if (v->valuestring != NULL) rg_buf_adds(b, v->valuestring);
  else if (dbl_is_int(v->valuedouble, &i)) rg_buf_addf(b, "%lld", (long long)i);
  else print_double(b, v->valuedouble);
}

void rg_json_print (const cJSON *v, rg_buf *b) {
  const cJSON *c;
  switch (v->type & 0xFF) {
    case cJSON_NULL: rg_buf_add(b, "null", 4); break;
    case cJSON_False: rg_buf_add(b, "false", 5); break;
    case cJSON_True: rg_buf_add(b, "true", 4); break;
    case cJSON_Number: print_number(b, v); break;
    case cJSON_String:
      rg_json_quote(b, v->valuestring, strlen(v->valuestring));
      break;
    case cJSON_Raw: rg_buf_adds(b, v->valuestring); break;
    case cJSON_Array:
      rg_buf_addc(b, '[');
      for (c = v->child; c != NULL; c = c->next) {
        rg_json_print(c, b);
        if (c->next) rg_buf_addc(b, ',');
      }
      rg_buf_addc(b, ']');
      break;
    case cJSON_Object:
      rg_buf_addc(b, '{');
      for (c = v->child; c != NULL; c = c->next) {
        if (c->string == NULL) rg_buf_add(b, "\"\"", 2);
        else rg_json_quote(b, c->string, strlen(c->string));
        rg_buf_addc(b, ':');
        rg_json_print(c, b);
        if (c->next) rg_buf_addc(b, ',');
      }
      rg_buf_addc(b, '}');
      break;
    default: rg_buf_add(b, "null", 4); break;
  }
}
/* }===================================================================== */


/*
** {=====================================================================
** JSON text -> cJSON tree, or -> Lua values
** ======================================================================
*/
typedef struct parser {
  const char *s, *p, *end;
  int depth;
  lua_State *L;                 /* non-NULL: push Lua values, no tree */
  int trusted;                  /* text written by us: skip UTF-8 checks */
  int arr_mt, obj_mt;
  rg_buf *tmp;                  /* decoded strings with escapes */
  rg_err *e;
} parser;

static int perr (parser *P, const char *what) {
  return rg_fail(P->e, 400, "invalid JSON at byte %lu: %s",
                 (unsigned long)(P->p - P->s) + 1, what);
}

static void skip_ws (parser *P) {
  while (P->p < P->end &&
         (*P->p == ' ' || *P->p == '\n' || *P->p == '\r' || *P->p == '\t'))
    P->p++;
}

static void add_utf8 (rg_buf *b, unsigned cp, int mutf8) {
  char u[4];
  if (cp == 0 && mutf8) rg_buf_add(b, "\xC0\x80", 2);
  else rg_buf_add(b, u, rg_utf8_put(u, cp));
}

/*
** Scans a string (P->p at the opening quote).  Without escapes the result
** is a slice of the text; with them it is decoded into P->tmp (NUL as C0 80
** when building a tree, as a real NUL when pushing to Lua).
*/
static int scan_string (parser *P, const char **out, size_t *len) {
  const char *p = P->p + 1, *run = p;
  int escaped = 0;
  if (P->trusted) {
    /* Stored text (written by rg_json_print) holds valid UTF-8 and no raw
    ** control characters: a string without a backslash before its closing
    ** quote is the bytes up to that quote, found at memchr's speed. */
    const char *q = (const char *)memchr(p, '"', (size_t)(P->end - p));
    if (q != NULL && memchr(p, '\\', (size_t)(q - p)) == NULL) {
      *out = p;
      *len = (size_t)(q - p);
      P->p = q + 1;
      return 0;
    }
  }
  for (;;) {
    unsigned char c;
    if (p >= P->end) { P->p = p; return perr(P, "unterminated string"); }
    c = (unsigned char)*p;
    if (c == '"') break;
    if (c < 0x20) { P->p = p; return perr(P, "control character in string"); }
    if (c >= 0x80) {
      int k = P->trusted ? 1 : rg_utf8_seq((const unsigned char *)p,
                                           (size_t)(P->end - p));
      if (k == 0) { P->p = p; return perr(P, "string is not valid UTF-8"); }
      p += k;
      continue;
    }
    if (c != '\\') { p++; continue; }
    if (!escaped) { P->tmp->n = 0; P->tmp->oom = 0; escaped = 1; }
    rg_buf_add(P->tmp, run, (size_t)(p - run));
    if (p + 1 >= P->end) { P->p = p; return perr(P, "unterminated string"); }
    {
      unsigned cp;
      const char *why;
      size_t k = rg_unescape(p, P->end, &cp, &why);
      if (k == 0) { P->p = p; return perr(P, why); }
      add_utf8(P->tmp, cp, P->L == NULL);
      p += k;
    }
    run = p;
  }
  if (escaped) {
    rg_buf_add(P->tmp, run, (size_t)(p - run));
    if (P->tmp->oom) return rg_fail(P->e, 500, "out of memory");
    *out = P->tmp->p ? P->tmp->p : "";
    *len = P->tmp->n;
  }
  else {
    *out = run;
    *len = (size_t)(p - run);
  }
  P->p = p + 1;
  return 0;
}

/* Scans a number: an exact integer (isint 1) or a double. */
static int scan_number (parser *P, int *isint, int64_t *iv, double *dv) {
  const char *p = P->p, *start = p;
  uint64_t acc = 0;
  int neg = 0, overflow = 0, frac = 0;
  if (*p == '-') { neg = 1; p++; }
  if (p >= P->end || *p < '0' || *p > '9') return perr(P, "bad number");
  if (*p == '0') p++;
  else {
    while (p < P->end && *p >= '0' && *p <= '9') {
      unsigned dgt = (unsigned)(*p - '0');
      if (acc > (UINT64_MAX - dgt) / 10) overflow = 1;
      else acc = acc * 10 + dgt;
      p++;
    }
  }
  if (p < P->end && *p == '.') {
    frac = 1; p++;
    if (p >= P->end || *p < '0' || *p > '9') { P->p = p; return perr(P, "bad number"); }
    while (p < P->end && *p >= '0' && *p <= '9') p++;
  }
  if (p < P->end && (*p == 'e' || *p == 'E')) {
    frac = 1; p++;
    if (p < P->end && (*p == '+' || *p == '-')) p++;
    if (p >= P->end || *p < '0' || *p > '9') { P->p = p; return perr(P, "bad number"); }
    while (p < P->end && *p >= '0' && *p <= '9') p++;
  }
  if (!frac && !overflow &&
      (neg ? acc <= (uint64_t)1 << 63 : acc < (uint64_t)1 << 63)) {
    *isint = 1;
    *iv = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  }
  else {
    char small[64], *num = small, dp = locale_point();
    size_t n = (size_t)(p - start), i;
    if (n >= sizeof(small)) {
      num = (char *)malloc(n + 1);
      if (num == NULL) return rg_fail(P->e, 500, "out of memory");
    }
    memcpy(num, start, n);
    num[n] = '\0';
    if (dp != '.')
      for (i = 0; i < n; i++) if (num[i] == '.') num[i] = dp;
    *dv = strtod(num, NULL);
    if (num != small) free(num);
    if (*dv == HUGE_VAL || *dv == -HUGE_VAL)
      return perr(P, "number out of range");
    *isint = dbl_is_int(*dv, iv);
  }
  P->p = p;
  return 0;
}

static int parse_value (parser *P, cJSON **out);

static int parse_literal (parser *P, const char *word, size_t n) {
  if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0)
    return perr(P, "unexpected character");
  P->p += n;
  return 0;
}

/* Builds (tree) or pushes (Lua) an empty container's marker. */
static void push_marked (parser *P, int mt) {
  lua_createtable(P->L, 0, 0);
  lua_pushvalue(P->L, mt);
  lua_setmetatable(P->L, -2);
}

static int parse_array (parser *P, cJSON **out) {
  cJSON *node = NULL;
  int rc, n = 0;
  if (++P->depth > RG_MAX_DEPTH) return perr(P, "nesting deeper than 128");
  P->p++;                                   /* '[' */
  if (P->L) {
    luaL_checkstack(P->L, 4, "JSON too deep");
    lua_createtable(P->L, 0, 0);
  }
  else if ((node = cJSON_CreateArray()) == NULL)
    return rg_fail(P->e, 500, "out of memory");
  skip_ws(P);
  if (P->p < P->end && *P->p == ']') {
    P->p++;
    if (P->L) {                             /* an empty array stays one */
      lua_pop(P->L, 1);
      push_marked(P, P->arr_mt);
    }
    goto done;
  }
  for (;;) {
    cJSON *item = NULL;
    skip_ws(P);
    if ((rc = parse_value(P, &item)) != 0) goto fail;
    if (P->L) lua_rawseti(P->L, -2, ++n);
    else cJSON_AddItemToArray(node, item);
    skip_ws(P);
    if (P->p < P->end && *P->p == ',') { P->p++; continue; }
    if (P->p < P->end && *P->p == ']') { P->p++; break; }
    rc = perr(P, "expected ',' or ']'");
    goto fail;
  }
done:
  P->depth--;
  *out = node;
  return 0;
fail:
  cJSON_Delete(node);
  return rc;
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

static int parse_object (parser *P, cJSON **out) {
  cJSON *node = NULL;
  int rc, n = 0, base = 0, made = 0;
  if (++P->depth > RG_MAX_DEPTH) return perr(P, "nesting deeper than 128");
  P->p++;                                   /* '{' */
  if (P->L) {
    luaL_checkstack(P->L, 2 * STACKED + 4, "JSON too deep");
    base = lua_gettop(P->L);
  }
  else if ((node = cJSON_CreateObject()) == NULL)
    return rg_fail(P->e, 500, "out of memory");
  skip_ws(P);
  if (P->p < P->end && *P->p == '}') {
    P->p++;
    if (P->L) push_marked(P, P->obj_mt);
    goto done;
  }
  for (;;) {
    cJSON *item = NULL;
    const char *key;
    size_t klen;
    char *kcopy = NULL;
    skip_ws(P);
    if (P->p >= P->end || *P->p != '"') { rc = perr(P, "expected a key"); goto fail; }
    if ((rc = scan_string(P, &key, &klen)) != 0) goto fail;
    if (P->L) lua_pushlstring(P->L, key, klen);
    else if ((kcopy = mutf8_dup(key, klen)) == NULL) {
      rc = rg_fail(P->e, 500, "out of memory");
      goto fail;
    }
    skip_ws(P);
    if (P->p >= P->end || *P->p != ':') {
      cJSON_free(kcopy);
      rc = perr(P, "expected ':'");
      goto fail;
    }
    P->p++;
    skip_ws(P);
    if ((rc = parse_value(P, &item)) != 0) { cJSON_free(kcopy); goto fail; }
    n++;
    if (P->L) {
      if (made) lua_rawset(P->L, -3);
      else if (n == STACKED) {          /* a large object: grow from here */
        make_table(P->L, base, n, 2 * STACKED);
        made = 1;
      }
    }
    else {
      item->string = kcopy;
      cJSON_AddItemToArray(node, item);
    }
    skip_ws(P);
    if (P->p < P->end && *P->p == ',') { P->p++; continue; }
    if (P->p < P->end && *P->p == '}') { P->p++; break; }
    rc = perr(P, "expected ',' or '}'");
    goto fail;
  }
  if (P->L && !made) make_table(P->L, base, n, n);
done:
  P->depth--;
  *out = node;
  return 0;
fail:
  cJSON_Delete(node);
  return rc;
}

static int parse_value (parser *P, cJSON **out) {
  int rc;
  *out = NULL;
  if (P->p >= P->end) return perr(P, "unexpected end of text");
  switch (*P->p) {
    case '{': return parse_object(P, out);
    case '[': return parse_array(P, out);
    case '"': {
      const char *s;
      size_t n;
      if ((rc = scan_string(P, &s, &n)) != 0) return rc;
      if (P->L) { lua_pushlstring(P->L, s, n); return 0; }
      /* the decoded form is already MUTF-8; a slice never holds NUL */
      *out = str_node(mutf8_dup(s, n));
      break;
    }
    case 't':
      if ((rc = parse_literal(P, "true", 4)) != 0) return rc;
      if (P->L) { lua_pushboolean(P->L, 1); return 0; }
      *out = cJSON_CreateTrue();
      break;
    case 'f':
      if ((rc = parse_literal(P, "false", 5)) != 0) return rc;
      if (P->L) { lua_pushboolean(P->L, 0); return 0; }
      *out = cJSON_CreateFalse();
      break;
    case 'n':
      if ((rc = parse_literal(P, "null", 4)) != 0) return rc;
      if (P->L) { rg_json_pushnull(P->L); return 0; }
      *out = cJSON_CreateNull();
      break;
    default: {
      int isint = 0;
      int64_t iv = 0;
      double dv = 0;
      if (*P->p != '-' && (*P->p < '0' || *P->p > '9'))
        return perr(P, "unexpected character");
      if ((rc = scan_number(P, &isint, &iv, &dv)) != 0) return rc;
      if (P->L) {
        if (isint) lua_pushinteger(P->L, (lua_Integer)iv);
        else lua_pushnumber(P->L, dv);
        return 0;
      }
      *out = isint ? rg_num_new_int(iv) : cJSON_CreateNumber(dv);
      break;
    }
  }
  return *out ? 0 : rg_fail(P->e, 500, "out of memory");
}

static int parse_text (parser *P, const char *s, size_t n, cJSON **out,
                       rg_err *e) {
  int rc;
  P->s = P->p = s;
  P->end = s + n;
  P->depth = 0;
  P->e = e;
  skip_ws(P);
  rc = parse_value(P, out);
  if (rc == 0) {
    skip_ws(P);
    if (P->p != P->end) {
      rc = perr(P, "unexpected text after the value");
      if (out) { cJSON_Delete(*out); *out = NULL; }
    }
  }
  return rc;
}

int rg_json_parse (const char *s, size_t n, cJSON **out, rg_err *e) {
  parser P;
  rg_buf tmp;
  int rc;
  rg_buf_init(&tmp);
  P.L = NULL;
  P.trusted = 0;
  P.tmp = &tmp;
  rc = parse_text(&P, s, n, out, e);
  rg_buf_free(&tmp);
  return rc;
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

/* The text of stored items was written by rg_json_print: trusted. */
static int push_text (lua_State *L, const char *s, size_t n, int trusted,
                      rg_err *e) {
  parser P;
  cJSON *none = NULL;
  int top = lua_gettop(L), rc;
  luaL_checkstack(L, 5, NULL);
  P.tmp = state_tmp(L);
  luaL_getmetatable(L, ARRAY_MT);
  luaL_getmetatable(L, OBJECT_MT);
  P.L = L;
  P.trusted = trusted;
  P.arr_mt = top + 1;
  P.obj_mt = top + 2;
  rc = parse_text(&P, s, n, &none, e);
  if (P.tmp->cap > (64u << 10)) rg_buf_free(P.tmp);
  if (rc != 0) { lua_settop(L, top); return rc; }
  lua_replace(L, top + 1);                  /* the value over the markers */
  lua_settop(L, top + 1);
  return 0;
}

int rg_json_push_text (lua_State *L, const char *s, size_t n, rg_err *e) {
  return push_text(L, s, n, 0, e);
}

int rg_json_push_stored (lua_State *L, const char *s, size_t n, rg_err *e) {
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
    case cJSON_NULL: rg_json_pushnull(L); break;
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
    default: rg_json_pushnull(L); break;
  }
}

void rg_json_push (lua_State *L, const cJSON *v) {
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
  rc = rg_json_from_lua(L, 1, &tree, &e);
  if (rc) return rg_push_fail(L, &e);
  rg_buf_init(&b);
  rg_json_print(tree, &b);
  cJSON_Delete(tree);
  if (b.oom) {
    rg_buf_free(&b);
    rg_fail(&e, 500, "out of memory");
    return rg_push_fail(L, &e);
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
    return rg_push_fail(L, &e);
  }
  s = lua_tolstring(L, 1, &n);
  if (rg_json_push_text(L, s, n, &e) != 0) return rg_push_fail(L, &e);
  return 1;
}

void rg_json_open (lua_State *L) {
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
  rg_json_pushnull(L);
  lua_setfield(L, -2, "null");
  lua_pushcfunction(L, l_array);
  lua_setfield(L, -2, "array");
  lua_pushcfunction(L, l_object);
  lua_setfield(L, -2, "object");
  lua_newtable(L);
  luaL_setfuncs(L, json_funcs, 0);
  rg_json_pushnull(L);
  lua_setfield(L, -2, "null");
  lua_setfield(L, -2, "json");
}
/* }===================================================================== */
