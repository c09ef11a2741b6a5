/*
** utf8lib.c: the utf8 library of Lua 5.4, for sandboxes on LuaJIT.
**
** Scripts get the utf8 library (docs/scripts.md, The sandbox).  Lua 5.4 has one; LuaJIT has
** none, and a procedure stored by one process may run in any other (an
** nginx worker on LuaJIT, a script on Lua 5.4), so the sandbox on LuaJIT
** gets this one, which follows Lua 5.4's manual:
**
**   utf8.char(...)                       code points -> a string
**   utf8.charpattern                     "[\0-\x7F\xC2-\xFD][\x80-\xBF]*"
**   utf8.codes(s [, lax])                for p, c in utf8.codes(s)
**   utf8.codepoint(s [, i [, j [, lax]]])  the code points starting in i..j
**   utf8.len(s [, i [, j [, lax]]])      characters starting in i..j, or
**                                        nil and the first bad position
**   utf8.offset(s, n [, i])              where the n-th character from i
**                                        starts (n = 0: the one holding i)
**
** Decoding.  A lead byte 0xxxxxxx is a character by itself; 11xxxxxx
** announces one continuation byte (10xxxxxx) for each 1 bit after its
** first, up to five, and the value is the payload bits in order.  A
** sequence is refused when a continuation byte is missing, when it is
** longer than it needs to be (an overlong form), or when its value is
** beyond 0x7FFFFFFF.  Strict decoding (the default) also refuses values
** beyond 0x10FFFF and the surrogates 0xD800-0xDFFF; `lax` accepts them.
** A string may hold NUL bytes; every read is bounded by its length.
**
** Positions are 1-based and negative ones count from the end, as in the
** string library.  Errors are raised as Lua errors, as Lua 5.4 does.
** Where Lua 5.4's releases differ, this follows 5.4.4 (Debian bookworm's,
** the Lua 5.4 the sandbox also runs on): utf8.codes skips continuation
** bytes that no lead byte claims instead of raising.  The specs compare
** every function with Lua 5.4's own on valid and invalid strings.
*/

#include <limits.h>
#include <string.h>

#include "script/sandbox.h"

#define MAXUNICODE  0x10FFFFu
#define MAXUTF      0x7FFFFFFFu
#define INVALID     "invalid UTF-8 code"

#define iscont(c)   (((unsigned char)(c) & 0xC0) == 0x80)

/* A relative position (negative: from the end) as an absolute one; 0 for
** one before the start. */
static lua_Integer absolute (lua_Integer pos, size_t len) {
  if (pos >= 0) return pos;
  if ((size_t)0 - (size_t)pos > len) return 0;
  return (lua_Integer)len + pos + 1;
}

/*
** Decodes the character starting at s[i] (i < len).  Returns the index
** just past it and sets *code, or returns 0 for an invalid sequence.
*/
static size_t decode (const char *s, size_t len, size_t i, int strict,
                      unsigned long *code) {
  static const unsigned long least[6] = {
    0, 0x80, 0x800, 0x10000, 0x200000, 0x4000000
  };
  unsigned int c = (unsigned char)s[i];
  unsigned long v;
  int more = 0, k;
  if (c < 0x80) { *code = c; return i + 1; }
  if ((c & 0x40) == 0) return 0;            /* a stray continuation byte */
  while (more < 6 && (c & (0x40u >> more))) more++;
  if (more > 5) return 0;                   /* 0xFE, 0xFF */
  v = c & (0x3Fu >> more);
  for (k = 1; k <= more; k++) {
    if (i + (size_t)k >= len || !iscont(s[i + (size_t)k])) return 0;
    v = (v << 6) | ((unsigned char)s[i + (size_t)k] & 0x3F);
  }
  if (v < least[more] || v > MAXUTF) return 0;
  if (strict && (v > MAXUNICODE || (v >= 0xD800 && v <= 0xDFFF))) return 0;
  *code = v;
  return i + (size_t)more + 1;
}

/* Appends the encoding of `code` (at most MAXUTF) to the buffer. */
static void encode (luaL_Buffer *b, unsigned long code) {
  char out[6];
  int n, k;
  if (code < 0x80) { luaL_addchar(b, (char)code); return; }
  n = code < 0x800 ? 2 : code < 0x10000 ? 3 : code < 0x200000 ? 4 :
      code < 0x4000000 ? 5 : 6;
  for (k = n - 1; k > 0; k--) {
    out[k] = (char)(0x80 | (code & 0x3F));
    code >>= 6;
  }
  out[0] = (char)(((0xFF00u >> n) & 0xFF) | code);
  luaL_addlstring(b, out, (size_t)n);
}

static int utf_char (lua_State *L) {
  int n = lua_gettop(L), i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; i++) {
    lua_Integer code = luaL_checkinteger(L, i);
    luaL_argcheck(L, code >= 0 && (unsigned long)code <= MAXUTF, i,
                  "value out of range");
    encode(&b, (unsigned long)code);
  }
  luaL_pushresult(&b);
  return 1;
}

static int utf_codepoint (lua_State *L) {
  size_t len, at, end;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_Integer i = absolute(luaL_optinteger(L, 2, 1), len);
  lua_Integer j = absolute(luaL_optinteger(L, 3, i), len);
  int strict = !lua_toboolean(L, 4), n = 0;
  luaL_argcheck(L, i >= 1, 2, "out of bounds");
  luaL_argcheck(L, (size_t)j <= len, 3, "out of bounds");
  if (i > j) return 0;
  if (j - i >= INT_MAX)
    return luaL_error(L, "string slice too long");
  luaL_checkstack(L, (int)(j - i + 1), "string slice too long");
  at = (size_t)i - 1;
  end = (size_t)j;
  while (at < end) {
    unsigned long code;
    size_t next = decode(s, len, at, strict, &code);
    if (next == 0) return luaL_error(L, INVALID);
    lua_pushinteger(L, (lua_Integer)code);
    n++;
    at = next;
  }
  return n;
}

static int utf_len (lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_Integer i = absolute(luaL_optinteger(L, 2, 1), len);
  lua_Integer j = absolute(luaL_optinteger(L, 3, -1), len);
  int strict = !lua_toboolean(L, 4);
  lua_Integer n = 0;
  size_t at;
  luaL_argcheck(L, i >= 1 && (size_t)(i - 1) <= len, 2,
                "initial position out of bounds");
  luaL_argcheck(L, (size_t)j <= len, 3, "final position out of bounds");
  at = (size_t)i - 1;
  while ((lua_Integer)at < j) {
    unsigned long code;
    size_t next = decode(s, len, at, strict, &code);
    if (next == 0) {
      lua_pushnil(L);
      lua_pushinteger(L, (lua_Integer)at + 1);
      return 2;
    }
    at = next;
    n++;
  }
  lua_pushinteger(L, n);
  return 1;
}

/* s[i] is a continuation byte (the byte past the end is not). */
static int cont_at (const char *s, size_t len, size_t i) {
  return i < len && iscont(s[i]);
}

static int utf_offset (lua_State *L) {
  size_t len, at;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  lua_Integer i = absolute(luaL_optinteger(L, 3, n >= 0 ? 1 :
                                           (lua_Integer)len + 1), len);
  luaL_argcheck(L, i >= 1 && (size_t)(i - 1) <= len, 3,
                "position out of bounds");
  at = (size_t)i - 1;
  if (n == 0) {
    while (at > 0 && cont_at(s, len, at)) at--;
  }
  else {
    if (cont_at(s, len, at))
      return luaL_error(L, "initial position is a continuation byte");
    if (n < 0) {
      for (; n < 0 && at > 0; n++) {
        do at--; while (at > 0 && cont_at(s, len, at));
      }
    }
    else {
      for (n--; n > 0 && at < len; n--) {
        do at++; while (cont_at(s, len, at));
      }
    }
  }
  if (n == 0) lua_pushinteger(L, (lua_Integer)at + 1);
  else lua_pushnil(L);
  return 1;
}

/* The iterator of codes: from the character at control value p (a
** position, 0 before the first), the next one's position and code. */
static int codes_next (lua_State *L, int strict) {
  size_t len, at;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_Integer p = lua_tointeger(L, 2);
  unsigned long code;
  size_t next;
  if (p < 0 || (size_t)p >= len) return 0;
  at = (size_t)p;
  while (at < len && iscont(s[at])) at++;   /* past the current one */
  if (at >= len) return 0;
  next = decode(s, len, at, strict, &code);
  if (next == 0) return luaL_error(L, INVALID);
  lua_pushinteger(L, (lua_Integer)at + 1);
  lua_pushinteger(L, (lua_Integer)code);
  return 2;
}

static int codes_strict (lua_State *L) { return codes_next(L, 1); }
static int codes_lax (lua_State *L) { return codes_next(L, 0); }

static int utf_codes (lua_State *L) {
  luaL_checkstring(L, 1);
  lua_pushcfunction(L, lua_toboolean(L, 2) ? codes_lax : codes_strict);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

void rgl_utf8lib_open (lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"char", utf_char}, {"codepoint", utf_codepoint}, {"len", utf_len},
    {"offset", utf_offset}, {"codes", utf_codes}, {NULL, NULL}
  };
  static const char pattern[] = "[\0-\x7F\xC2-\xFD][\x80-\xBF]*";
  const luaL_Reg *f;
  lua_newtable(L);
  for (f = funcs; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, -2, f->name);
  }
  lua_pushlstring(L, pattern, sizeof(pattern) - 1);
  lua_setfield(L, -2, "charpattern");
}
