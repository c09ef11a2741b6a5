/*
** compat.h: one source for Lua 5.4 and LuaJIT 2.1 (the Lua 5.1 API).
**
** Every file that includes a Lua header includes this one after it.  Lua
** 5.2 and 5.3 are not supported, nor PUC Lua 5.1 (LuaJIT's own header is
** required for the 5.1 API).
*/

#ifndef rg_compat_h
#define rg_compat_h

#include "lua.h"
#include "lauxlib.h"

#if LUA_VERSION_NUM < 502
#include "luajit.h"               /* PUC Lua 5.1 is not supported */
#define RG_LUAJIT 1
#define rg_rawlen(L, i)          lua_objlen(L, i)
#define rg_newuserdata(L, sz)    lua_newuserdata(L, sz)
/* LuaJIT has no uservalues; a userdata's environment table serves */
#define rg_setuservalue(L, i)    lua_setfenv(L, i)
#define rg_getuservalue(L, i)    lua_getfenv(L, i)
#define rg_isinteger(L, i)       0
#define LUA_OK 0
#elif LUA_VERSION_NUM < 504
#error "regolith builds for Lua 5.4 or LuaJIT 2.1, not Lua 5.2 or 5.3"
#else
#define RG_LUAJIT 0
#define rg_rawlen(L, i)          lua_rawlen(L, i)
#define rg_newuserdata(L, sz)    lua_newuserdatauv(L, sz, 1)
#define rg_setuservalue(L, i)    lua_setiuservalue(L, i, 1)
#define rg_getuservalue(L, i)    lua_getiuservalue(L, i, 1)
#define rg_isinteger(L, i)       lua_isinteger(L, i)
#endif

#endif
