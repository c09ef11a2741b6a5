-- LuaRocks for LuaJIT 2.1 as Debian packages it (luajit2,
-- libluajit2-5.1-dev): LuaRocks takes LuaJIT for Lua 5.1, and would pick
-- the lua5.1 interpreter and headers when they are installed too.  Use it
-- as the configuration of a LuaJIT install:
--
--   LUAROCKS_CONFIG=rockspec/luarocks-luajit.lua luarocks --lua-version=5.1 install regolith
--
-- (the bin/regolith wrapper then runs luajit, and the module is compiled
-- against LuaJIT's headers).  OpenResty's own LuaRocks needs none of this.
lua_interpreter = "luajit"
variables = {
  LUA_BINDIR = "/usr/bin",
  LUA_INCDIR = "/usr/include/luajit-2.1",
}
