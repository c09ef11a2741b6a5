/*
** sandbox.c: the Lua state in which procedures and triggers run.
**
** A sandbox is a lua_State of its own (lua_newstate), never the host's:
** scripts cannot reach the host's globals, registry, string metatable or
** loaded modules, because nothing of the host exists in it.  Values cross
** between the two states only as JSON (luax/luajson.c's bridge), never as
** Lua values.  runner.c keeps one sandbox per database environment.
**
** What a script sees (docs/scripts.md, The sandbox) is an environment table made afresh for
** every execution, filled on first use from a template kept in the
** sandbox's registry (a protected __index copies a global the first time
** the execution names it, so an execution pays only for what it uses): the
** base
** functions pairs ipairs next select type tostring tonumber error assert
** pcall xpcall setmetatable getmetatable rawget rawset rawequal rawlen;
** the string, table, math and utf8 libraries; os.time, os.clock, os.date;
** and regolith.null, array, object and json.  Each execution gets its own
** copies of those library tables, so that what one script assigns to
** `string.upper` or `math` (even with rawset) is gone when it returns and
** never seen by another.  Left out on purpose: io, os.execute and the rest
** of os, require and package, debug, collectgarbage, string.dump, print,
** dofile, coroutine, and load: a procedure is compiled once, when it is
** stored, and has no need to compile code at run time; leaving load out
** removes a whole class of questions (bytecode, environments, compile time
** that no hook can see).
**
** Shared objects are protected.  The string metatable (shared by every
** string in the state) has a __metatable field, so getmetatable("") gives
** false and the string functions' table behind __index is out of reach;
** __index points to a template copy no script holds.  The marker metatables
** of regolith.array/object are protected the same way.
**
** Limits.  An execution is armed with an instruction budget and a memory
** budget (rg_sandbox_arm):
**   - memory: the state's allocator counts the bytes the state holds and,
**     while armed, refuses to grow beyond the level at arming plus the
**     budget.  Lua answers a refusal with an emergency collection and one
**     more try; a second refusal without a successful growth in between
**     means the memory is really held, and the execution stops (413).
**     LuaJIT has no emergency collection (a refusal raises "not enough
**     memory" at once, and garbage the incremental collector has not
**     reached yet would count as held), so under LuaJIT the allocator lets
**     a growth overdraw the limit by up to the budget and makes the hook
**     run before the next instruction: the hook collects fully and stops
**     the execution if the state still holds more than the limit; a growth
**     beyond the overdraft stops it at once;
**   - instructions: a count hook adds HOOK_PERIOD to the work spent every
**     HOOK_PERIOD VM instructions.  Work done in C, where no hook runs, is
**     charged explicitly: every allocation costs 12 instructions and every
**     byte allocated 1/16 more (building a string or a table costs in
**     proportion to its size; the constants make a loop that allocates
**     spend its budget in about the time a tight loop does); the pattern
**     functions charge their matcher's steps (pattern.c); and the library
**     functions whose time is not bounded by what they allocate
**     (string.rep of an empty string, table.move, table.concat, table.sort,
**     utf8.len, tonumber, ...) are wrapped to charge their work before
**     they do it; converting a value to JSON costs 32 a value (runner.c
**     charges ctx's storage operations by their request charge).  The
**     weights were measured (examples/bench/runaway.lua) so that each
**     spends its budget in about the time a tight loop does.  Spending the
**     budget stops the execution (408);
**   - time: for single instructions that do work in proportion to their
**     operands without allocating (comparing two huge strings) and for
**     what the weights still undercount, the hook and every charge also
**     stop an execution (408) that has taken more CPU time than its budget
**     would at TIME_RATE instructions a second (5 s for the default
**     budget), and at least MIN_TIME (base/deadline.h: CPU time, so that a
**     busy machine does not stop a script its budget lets run).  The hook
**     runs every HOOK_PERIOD = 100 instructions, so the stop comes at most
**     a hundred instructions late: 0.1 s for comparisons of two strings of
**     the whole memory budget.
** A stop cannot be caught: the hook is set to run before every instruction
** and raises again each time, and the allocator refuses every growth after
** a memory stop, so a script's pcall handler fails at once and the error
** unwinds to the top; xpcall's message handler, which Lua would call with
** hooks still off, is skipped once stopped.  The caller checks
** rg_sandbox_disarm's answer, not only the result.  __gc metamethods are
** refused by setmetatable, because Lua runs finalizers with hooks off (an
** error object with a __gc looping forever would escape every limit);
** to-be-closed variables run with hooks on and are stopped like any code.
** Deep recursion ends with Lua's own "stack overflow" (or the memory
** budget); coroutines are not offered.
**
** LuaJIT.  The state needs a custom allocator, which LuaJIT supports in its
** GC64 mode (the default on x64 since LuaJIT 2.1 of December 2019, so in
** Debian's luajit2 and OpenResty's builds).  A LuaJIT built without GC64
** (LUAJIT_DISABLE_GC64, or an older one) on x64 refuses
** lua_newstate; the sandbox then falls back to luaL_newstate and measures
** memory with the collector's count instead of refusing allocations: the
** hook and every charge compare the count with the limit, collect fully
** when it is over, and stop the execution if it still is, so an execution
** can overshoot by what one instruction or one C call allocates (the
** charged string.rep refuses a result larger than the room left).  The
** JIT compiler is off in the sandbox, since count hooks run only in the
** interpreter.  The libraries offer the same names as under Lua 5.4: the
** 5.1 leftovers LuaJIT keeps (table.getn, math.pow...) are removed, and
** rawlen and a utf8 library (utf8lib.c) are added.  What cannot be made
** the same is the number type: LuaJIT's numbers are doubles (integers are
** exact to 2^53, there is no math.type) and its parser knows no 5.4
** syntax (`//`, the bitwise operators, <close>).
*/

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/deadline.h"
#include "base/json.h"
#include "luax/luajson.h"
#include "luax/luax.h"
#include "script/sandbox.h"
#include "lualib.h"
#if RG_LUAJIT
#include "luajit.h"
#endif

#define CALL_COST     24             /* a charged library call, at least */
#define TEMPLATE      "regolith.sandbox.template"
#define ENV_MT        "regolith.sandbox.env"

#if RG_LUAJIT
#define sb_len(L, i)  ((lua_Integer)lua_objlen(L, i))
#else
#define sb_len(L, i)  luaL_len(L, i)
#endif





/*
** {=====================================================================
** Charged library functions
** ======================================================================
** Each wrapper charges the work its call will do, then calls the library
** function (upvalue 1).  Ranges the function would take from the length
** operator are computed once here and passed explicitly, so that a __len
** metamethod cannot answer differently to the charge and to the work.
*/
enum { W_REP, W_LEN1, W_SORT, W_MOVE, W_CONCAT, W_UNPACK, W_ARITH,
       W_SIZE1 };

static uint64_t clamp (double d) {
  if (!(d > 0)) return 0;
  if (d > 1e18) return (uint64_t)1e18;
  return (uint64_t)d;
}

static size_t strlen_at (lua_State *L, int i) {
  size_t n = 0;
  if (lua_type(L, i) == LUA_TSTRING) lua_tolstring(L, i, &n);
  return n;
}

/* Makes arguments `a` and `b` (1-based) an explicit range i..j, with j
** taken from the length of argument 1 when absent; returns its size. */
static double explicit_range (lua_State *L, int a, int b) {
  lua_Integer i, j;
  luaL_checktype(L, 1, LUA_TTABLE);
  i = luaL_optinteger(L, a, 1);
  j = lua_isnoneornil(L, b) ? sb_len(L, 1) : luaL_checkinteger(L, b);
  if (lua_gettop(L) < b) lua_settop(L, b);
  lua_pushinteger(L, i);
  lua_replace(L, a);
  lua_pushinteger(L, j);
  lua_replace(L, b);
  return j >= i ? (double)j - (double)i + 1 : 0;
}

/* A result known to be larger than the room left (after a full
** collection) stops the execution before it is built, and before its work
** is charged: it is the memory that it lacks (and without our allocator
** nothing would refuse the growth). */
static void need (lua_State *L, double bytes) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  if (!sb->armed || bytes <= (double)rg_sandbox_room(sb)) return;
  lua_gc(L, LUA_GCCOLLECT, 0);
  if (bytes > (double)rg_sandbox_room(sb)) rgl_sandbox_stop(L, RG_STOP_MEMORY);
}

/* The mean length of the strings among the first n values of the table
** at 1 (a comparison of two strings reads up to their length), looked at
** in at most 64 places. */
static double mean_len (lua_State *L, double n) {
  double sum = 0;
  lua_Integer i, k = 0, stride = n > 64 ? (lua_Integer)(n / 64) : 1;
  for (i = 1; i <= (lua_Integer)n && k < 64; i += stride, k++) {
    lua_rawgeti(L, 1, i);
    sum += (double)strlen_at(L, -1);
    lua_pop(L, 1);
  }
  return k ? sum / (double)k : 0;
}

static int charged (lua_State *L) {
  int kind = (int)lua_tointeger(L, lua_upvalueindex(2));
  double cost = 0;
  switch (kind) {
    case W_REP: {
      double n = (double)luaL_checkinteger(L, 2);
      size_t l = strlen_at(L, 1), lsep = strlen_at(L, 3);
      if (n > 0) {
        cost = 4 * CALL_COST + n / 2 + n * ((double)l + (double)lsep) / 6;
        need(L, n * ((double)l + (double)lsep));
      }
      break;
    }
    case W_LEN1: cost = (double)strlen_at(L, 1) / 16; break;
    case W_SORT:
      if (lua_type(L, 1) == LUA_TTABLE) {
        double n = (double)rg_rawlen(L, 1);
        cost = n * (log(n + 1) / log(2.0) + 1) * (4 + mean_len(L, n) / 32);
      }
      break;
    case W_MOVE: {
      lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
      if (e >= f) cost = (double)e - (double)f + 1;
      break;
    }
    case W_CONCAT: cost = 3 * explicit_range(L, 3, 4); break;
    case W_UNPACK: cost = explicit_range(L, 2, 3); break;
    case W_ARITH:
      cost = (double)(strlen_at(L, 1) + strlen_at(L, 2)) / 16;
      break;
    case W_SIZE1:
      if (lua_type(L, 1) == LUA_TTABLE) cost = 2 * (double)rg_rawlen(L, 1);
      break;
  }
  rgl_sandbox_charge(L, clamp(cost) + 1);
  rgl_sandbox_cstack(L);              /* sort's comparator, __index, ... */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* Replaces t[name] (t on top) with a charged wrapper of itself. */
static void wrap (lua_State *L, const char *name, int kind) {
  lua_getfield(L, -1, name);
  if (lua_isnil(L, -1)) { lua_pop(L, 1); return; }
  lua_pushinteger(L, kind);
  lua_pushcclosure(L, charged, 2);
  lua_setfield(L, -2, name);
}

#if !RG_LUAJIT
/*
** table.insert and table.remove, which shift elements in a loop sized by
** the length operator: the length is taken once and the shift charged.
*/
static int t_insert (lua_State *L) {
  lua_Integer e, pos, i;
  luaL_checktype(L, 1, LUA_TTABLE);
  e = luaL_len(L, 1) + 1;            /* the first empty slot */
  switch (lua_gettop(L)) {
    case 2: pos = e; break;
    case 3:
      pos = luaL_checkinteger(L, 2);
      luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2,
                    "position out of bounds");
      rgl_sandbox_charge(L, 2 * (uint64_t)(e - pos) + 1);
      for (i = e; i > pos; i--) {
        lua_geti(L, 1, i - 1);
        lua_seti(L, 1, i);
      }
      break;
    default:
      return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

static int t_remove (lua_State *L) {
  lua_Integer size, pos;
  luaL_checktype(L, 1, LUA_TTABLE);
  size = luaL_len(L, 1);
  pos = luaL_optinteger(L, 2, size);
  if (pos != size)
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 2,
                  "position out of bounds");
  if (size > pos) rgl_sandbox_charge(L, 2 * (uint64_t)(size - pos) + 1);
  lua_geti(L, 1, pos);
  for (; pos < size; pos++) {
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos);
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  return 1;
}
#endif

#if RG_LUAJIT
/* rawlen, which LuaJIT offers only in its 5.2 compatibility mode. */
static int sb_rawlen (lua_State *L) {
  int t = lua_type(L, 1);
  luaL_argcheck(L, t == LUA_TTABLE || t == LUA_TSTRING, 1,
                "table or string expected");
  lua_pushinteger(L, (lua_Integer)lua_objlen(L, 1));
  return 1;
}
#endif

/* setmetatable without __gc (finalizers run with hooks off). */
static int sb_setmetatable (lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2,
                "nil or table expected");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    lua_rawget(L, 2);
    if (!lua_isnil(L, -1))
      return luaL_error(L, "setmetatable: __gc metamethods are not allowed "
                        "in scripts");
    lua_pop(L, 1);
  }
  if (luaL_getmetafield(L, 1, "__metatable"))
    return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

/*
** xpcall whose message handler is skipped once the execution is stopped.
** The stop is raised from the count hook, and Lua calls a message handler
** before it unwinds, while hooks are still off (they are off during a
** hook): a handler looping forever would run unchecked.
*/
static int sb_handler (lua_State *L) {
  if (rgl_sandbox_stopped(L)) return 1;      /* the message as it is */
  rgl_sandbox_cstack(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int sb_xpcall (lua_State *L) {
  luaL_checktype(L, 2, LUA_TFUNCTION);
  rgl_sandbox_cstack(L);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, sb_handler, 1);
  lua_replace(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));    /* the library's xpcall */
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* regolith.json.encode / decode for scripts: their C memory lives in a
** box, so that a memory error while pushing the result cannot leak it. */
typedef struct jbox {
  cJSON *tree;
  rg_buf text;
} jbox;

static void jbox_free (void *p) {
  jbox *j = (jbox *)p;
  cJSON_Delete(j->tree);
  j->tree = NULL;
  rg_buf_free(&j->text);
}

static int sb_encode (lua_State *L) {
  jbox *j;
  rg_err e;
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  j = (jbox *)rgl_newbox(L, sizeof(jbox), jbox_free);
  if (rgl_sandbox_from_lua(L, 1, &j->tree, &e)) return rgl_push_fail(L, &e);
  rg_json_print(j->tree, &j->text);
  if (j->text.oom) {
    rg_box_done(j);
    rg_fail(&e, 500, "out of memory");
    return rgl_push_fail(L, &e);
  }
  rgl_sandbox_charge(L, j->text.n / 8);
  lua_pushlstring(L, j->text.p ? j->text.p : "", j->text.n);
  rg_box_done(j);
  return 1;
}

/* Decodes straight into the state, whose allocator counts what it takes:
** a tree first would be host memory many times the text ("[0,0,...]"). */
static int sb_decode (lua_State *L) {
  size_t n;
  const char *s;
  rg_err e;
  if (lua_type(L, 1) != LUA_TSTRING) {
    rg_fail(&e, 400, "json.decode expects a string, got %s",
            luaL_typename(L, 1));
    return rgl_push_fail(L, &e);
  }
  s = lua_tolstring(L, 1, &n);
  rgl_sandbox_charge(L, n / 8);
  lua_settop(L, 1);
  if (rgl_json_push_text(L, s, n, &e)) return rgl_push_fail(L, &e);
  return 1;
}
/* }===================================================================== */


/*
** {=====================================================================
** The template environment
** ======================================================================
*/
/* Copies the library table t[name] (t at `from`) into the table on top,
** keeping only `keep` (NULL: everything but `drop`). */
static void copy_lib (lua_State *L, int from, const char *name,
                      const char *const *keep, const char *const *drop) {
  int src;
  lua_getfield(L, from, name);
  src = lua_gettop(L);
  lua_newtable(L);
  if (keep) {
    for (; *keep; keep++) {
      lua_getfield(L, src, *keep);
      lua_setfield(L, -2, *keep);
    }
  }
  else {
    lua_pushnil(L);
    while (lua_next(L, src) != 0) {
      const char *const *d;
      int skip = 0;
      if (lua_type(L, -2) == LUA_TSTRING)
        for (d = drop; d && *d; d++)
          if (strcmp(*d, lua_tostring(L, -2)) == 0) skip = 1;
      if (skip) lua_pop(L, 1);
      else {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
      }
    }
  }
  lua_remove(L, src);
}

static void open_lib (lua_State *L, const char *name, lua_CFunction f) {
#if RG_LUAJIT
  lua_pushcfunction(L, f);
  lua_pushstring(L, name);
  lua_call(L, 1, 0);
#else
  luaL_requiref(L, name, f, 1);
  lua_pop(L, 1);
#endif
}

static void protect_metatable (lua_State *L, const char *regname) {
  luaL_getmetatable(L, regname);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);
}

/* Builds the template (registry[TEMPLATE]) and protects shared objects. */
static int setup (lua_State *L) {
  static const char *const base[] = {
    "pairs", "ipairs", "next", "select", "type", "tostring", "error",
    "assert", "pcall", "getmetatable", "rawget", "rawset",
    "rawequal", "rawlen", NULL
  };
  static const char *const no_string[] = { "dump", NULL };
#if RG_LUAJIT
  /* LuaJIT's 5.1 leftovers, absent from Lua 5.4: a script that used them
  ** would run in some processes and not in others */
  static const char *const no_table[] = {
    "foreach", "foreachi", "getn", "maxn", "setn", NULL
  };
  static const char *const no_math[] = {
    "atan2", "cosh", "frexp", "ldexp", "log10", "mod", "pow", "sinh", "tanh",
    NULL
  };
#else
  static const char *const no_table[] = { NULL };
  static const char *const no_math[] = { NULL };
#endif
  static const char *const os_keep[] = { "time", "clock", "date", NULL };
  const char *const *b;
  int g, t;
  open_lib(L, "_G", luaopen_base);
  open_lib(L, LUA_STRLIBNAME, luaopen_string);
  open_lib(L, LUA_TABLIBNAME, luaopen_table);
  open_lib(L, LUA_MATHLIBNAME, luaopen_math);
  open_lib(L, LUA_OSLIBNAME, luaopen_os);
#if !RG_LUAJIT
  open_lib(L, LUA_UTF8LIBNAME, luaopen_utf8);
#endif
#if LUA_VERSION_NUM >= 502
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
#else
  lua_pushvalue(L, LUA_GLOBALSINDEX);
#endif
  g = lua_gettop(L);
  lua_newtable(L);                   /* the template */
  t = lua_gettop(L);
  for (b = base; *b; b++) {
    lua_getfield(L, g, *b);
    lua_setfield(L, t, *b);
  }
#if RG_LUAJIT
  lua_pushcfunction(L, sb_rawlen);
  lua_setfield(L, t, "rawlen");
#endif
  lua_getfield(L, g, "tonumber");
  lua_pushinteger(L, W_LEN1);
  lua_pushcclosure(L, charged, 2);
  lua_setfield(L, t, "tonumber");
  lua_pushcfunction(L, sb_setmetatable);
  lua_setfield(L, t, "setmetatable");
  lua_getfield(L, g, "xpcall");
  lua_pushcclosure(L, sb_xpcall, 1);
  lua_setfield(L, t, "xpcall");

  copy_lib(L, g, "string", NULL, no_string);
  rgl_pattern_open(L, -1);
  wrap(L, "rep", W_REP);
  lua_setfield(L, t, "string");

  copy_lib(L, g, "table", NULL, no_table);
#if RG_LUAJIT
  lua_getfield(L, g, "unpack");
  lua_setfield(L, -2, "unpack");
  wrap(L, "insert", W_SIZE1);
  wrap(L, "remove", W_SIZE1);
#else
  lua_pushcfunction(L, t_insert);
  lua_setfield(L, -2, "insert");
  lua_pushcfunction(L, t_remove);
  lua_setfield(L, -2, "remove");
#endif
  wrap(L, "concat", W_CONCAT);
  wrap(L, "unpack", W_UNPACK);
  wrap(L, "move", W_MOVE);
  wrap(L, "sort", W_SORT);
  lua_setfield(L, t, "table");

  copy_lib(L, g, "math", NULL, no_math);
  lua_setfield(L, t, "math");
#if RG_LUAJIT
  rgl_utf8lib_open(L);
#else
  copy_lib(L, g, "utf8", NULL, NULL);
#endif
  wrap(L, "len", W_LEN1);
  wrap(L, "codepoint", W_LEN1);
  wrap(L, "offset", W_LEN1);
  lua_setfield(L, t, "utf8");
  copy_lib(L, g, "os", os_keep, NULL);
  lua_setfield(L, t, "os");

  lua_newtable(L);                   /* regolith: null, array, object, json */
  rgl_json_open(L);
  lua_getfield(L, -1, "json");
  lua_pushcfunction(L, sb_encode);
  lua_setfield(L, -2, "encode");
  lua_pushcfunction(L, sb_decode);
  lua_setfield(L, -2, "decode");
  lua_pop(L, 1);
  lua_setfield(L, t, "regolith");
  protect_metatable(L, "regolith.array");
  protect_metatable(L, "regolith.object");

  /* the string metatable: __index to the template's string table, which
  ** no script holds; arithmetic coercions charged; protected */
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    static const char *const arith[] = {
      "__add", "__sub", "__mul", "__mod", "__pow", "__div", "__idiv",
      "__unm", NULL
    };
    for (b = arith; *b; b++) wrap(L, *b, W_ARITH);
    lua_getfield(L, t, "string");
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_pushvalue(L, t);
  lua_setfield(L, LUA_REGISTRYINDEX, TEMPLATE);
  return 0;
}

#if RG_LUAJIT
/*
** LuaJIT without GC64 on x64 has no lua_newstate (it prints a line saying
** so and returns NULL): found out once per process, then the sandbox uses
** luaL_newstate and finds itself through the registry.
*/
static int no_newstate = 0;

static lua_State *new_state (rg_sandbox *sb) {
  lua_State *S = NULL;
  if (!no_newstate && (S = lua_newstate(rg_sandbox_alloc, sb)) != NULL)
    return S;
  no_newstate = 1;
  if ((S = luaL_newstate()) == NULL) return NULL;
  rgl_sandbox_adopt(S, sb);
  return S;
}
#else
static lua_State *new_state (rg_sandbox *sb) {
  return lua_newstate(rg_sandbox_alloc, sb);
}
#endif

rg_sandbox *rg_sandbox_new (void) {
  rg_sandbox *sb = (rg_sandbox *)calloc(1, sizeof(rg_sandbox));
  if (sb == NULL) return NULL;
  sb->budget = (uint64_t)-1;
  sb->S = new_state(sb);
  if (sb->S == NULL) { free(sb); return NULL; }
#if RG_LUAJIT
  luaJIT_setmode(sb->S, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);  /* hooks */
#endif
  lua_pushcfunction(sb->S, setup);
  if (lua_pcall(sb->S, 0, 0, 0) != LUA_OK) {
    lua_close(sb->S);
    free(sb);
    return NULL;
  }
  return sb;
}

void rg_sandbox_free (rg_sandbox *sb) {
  if (sb == NULL) return;
  lua_close(sb->S);
  free(sb);
}

lua_State *rgl_sandbox_state (rg_sandbox *sb) {
  return sb->S;
}
/* }===================================================================== */


/*
** {=====================================================================
** Environments, chunks, conversions
** ======================================================================
*/
/* Pushes a copy of the table at idx, copying nested tables `depth` more
** levels down. */
static void copy_table (lua_State *L, int idx, int depth) {
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  luaL_checkstack(L, 4, NULL);
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pushvalue(L, -2);              /* key, value, key */
    if (depth > 0 && lua_type(L, -2) == LUA_TTABLE) {
      copy_table(L, -2, depth - 1);
      lua_rawset(L, -5);
      lua_pop(L, 1);
    }
    else {
      lua_insert(L, -2);               /* key, key, value */
      lua_rawset(L, -4);
    }
  }
}

/* Gives the math library of an execution a fresh random stream, so that
** no script sees what another seeded. */
static void reseed (lua_State *L, int math) {
  rg_sandbox *sb = rgl_sandbox_of(L);
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)(size_t)sb << 16) ^
                  (++sb->seeds * 0x9E3779B97F4A7C15ull);
  lua_getfield(L, math, "randomseed");
  lua_pushnumber(L, (lua_Number)(seed & 0xFFFFFFFFu));
  lua_call(L, 1, 0);
}

/*
** The __index of an execution's environment: the first use of a global
** copies it from the template into the environment (a library table as a
** table of its own), so an execution pays only for what it uses.
*/
static int env_index (lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, TEMPLATE);
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  if (lua_isnil(L, -1)) return 1;
  if (lua_type(L, -1) == LUA_TTABLE) {
    copy_table(L, -1, 1);
    if (lua_type(L, 2) == LUA_TSTRING &&
        strcmp(lua_tostring(L, 2), "math") == 0)
      reseed(L, lua_gettop(L));
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

/* pairs(_ENV) lists every global: the remaining ones are copied first. */
static int env_pairs (lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, TEMPLATE);
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawget(L, 1);
    if (lua_isnil(L, -1)) {
      lua_pushcfunction(L, env_index);
      lua_pushvalue(L, 1);
      lua_pushvalue(L, -4);
      lua_call(L, 2, 0);
    }
    lua_pop(L, 1);
  }
  lua_getglobal(L, "next");
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

void rgl_sandbox_env (lua_State *L) {
  lua_newtable(L);
  if (luaL_newmetatable(L, ENV_MT)) {
    lua_pushcfunction(L, env_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, env_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
  }
  lua_setmetatable(L, -2);
}

int rgl_sandbox_load (lua_State *L, const char *src, size_t n,
                     const char *name, size_t namelen) {
  char chunk[RG_MAX_NAME + 2];
  if (namelen > RG_MAX_NAME) namelen = RG_MAX_NAME;
  chunk[0] = '=';
  memcpy(chunk + 1, name, namelen);
  chunk[namelen + 1] = '\0';
  /* both Lua's and LuaJIT's bytecode begin with ESC: one message for both
  ** (LuaJIT's own is "attempt to load chunk with wrong mode") */
  if (n > 0 && src[0] == '\033') {
    lua_pushliteral(L, "attempt to load a binary chunk: a source is Lua "
                    "text");
    return LUA_ERRSYNTAX;
  }
  return luaL_loadbufferx(L, src, n, chunk, "t");
}

void rgl_sandbox_setenv (lua_State *L, int fidx) {
  fidx = fidx < 0 ? lua_gettop(L) + fidx + 1 : fidx;
#if LUA_VERSION_NUM >= 502
  if (lua_setupvalue(L, fidx, 1) == NULL) lua_pop(L, 1);
#else
  lua_setfenv(L, fidx);
#endif
}

/* The work of converting a tree, and of what is done with it next
** (writing it, printing it): 32 a value and 1/16 a string byte. */
static uint64_t tree_cost (const cJSON *v) {
  uint64_t n = 0;
  for (; v; v = v->next) {
    n += 32;
    if (v->string) n += strlen(v->string) / 16;
    if (v->valuestring) n += strlen(v->valuestring) / 16;
    if (v->child) n += tree_cost(v->child);
  }
  return n;
}

int rgl_sandbox_from_lua (lua_State *L, int idx, cJSON **out, rg_err *e) {
  uint64_t left;
  size_t room;
  int rc;
  /* room for the deepest document, so that the conversion never needs to
  ** grow the stack (an allocation error there would leak its tree) */
  *out = NULL;
  if (!lua_checkstack(L, RG_MAX_DEPTH * 8 + 32))
    return rg_fail(e, 413, "out of script memory");
  /* the tree is memory the execution holds, outside the state: it may
  ** take what the memory budget has left (a table shared at every level,
  ** or one long string listed many times, is small in Lua and huge as a
  ** tree) */
  rgl_sandbox_left(L, &left, &room);
  rc = rgl_json_from_lua_max(L, idx, room, out, e);
  if (rc == 413) rgl_sandbox_stop(L, RG_STOP_MEMORY);
  if (rc == 0) rgl_sandbox_charge(L, tree_cost(*out));
  return rc;
}
/* }===================================================================== */
