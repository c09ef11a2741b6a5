-- regolith 0.1.0, from the release tarball of tag v0.1.0 (made by
-- `make dist`: the sources and the Data Explorer's page with its
-- vendored libraries).
--
--   luarocks --lua-version=5.4 install regolith                 # Lua 5.4
--   luarocks --lua-version=5.1 install regolith \
--     LUA=/usr/bin/luajit LUA_INCDIR=/usr/include/luajit-2.1     # LuaJIT, OpenResty
--
-- Offline, from a checkout: `make rock` packs build/rock/regolith-0.1.0-1.src.rock
-- from this file and `make dist`'s tarball; `luarocks install` it
-- (README.md, Install).  The build runs the Makefile (with the variables
-- LuaRocks passes), which compiles into build/lua5.4 or build/luajit and
-- leaves nothing else in the source tree.
rockspec_format = "3.0"
package = "regolith"
version = "0.1.0-1"
source = {
  url = "https://github.com/regolith-db/regolith/releases/download/v0.1.0/regolith-0.1.0.tar.gz",
  dir = "regolith-0.1.0",
  tag = "v0.1.0",
}
description = {
  summary = "An embedded document database for Lua on LMDB",
  detailed = [[
    regolith brings the programming model of a partitioned document store
    (containers, logical partitions, stored procedures and triggers in Lua,
    a change feed with processors, a SQL dialect, request charges) into a
    Lua process, with a C core on LMDB and cJSON.  Lua 5.4, and LuaJIT 2.1
    (OpenResty) inside nginx workers.
  ]],
  homepage = "https://github.com/regolith-db/regolith",
  license = "MIT",
  labels = { "database", "openresty", "lmdb", "json" },
}
-- Lua 5.4, or LuaJIT 2.1 (which LuaRocks sees as 5.1); Lua 5.2 and 5.3
-- are not supported.  argparse is the command's (Debian: lua-argparse).
dependencies = {
  "lua >= 5.1, < 5.5",
  "argparse >= 0.7",
}
external_dependencies = {
  LMDB = { header = "lmdb.h", library = "lmdb" },
  CJSON = { header = "cjson/cJSON.h", library = "cjson" },
  PCRE2 = { header = "pcre2.h", library = "pcre2-8" },
  STEMMER = { header = "libstemmer.h", library = "stemmer" },
}
build = {
  type = "make",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    LMDB_INCDIR = "$(LMDB_INCDIR)",
    LMDB_LIBDIR = "$(LMDB_LIBDIR)",
    CJSON_INCDIR = "$(CJSON_INCDIR)",
    CJSON_LIBDIR = "$(CJSON_LIBDIR)",
    PCRE2_INCDIR = "$(PCRE2_INCDIR)",
    PCRE2_LIBDIR = "$(PCRE2_LIBDIR)",
  },
  install_variables = {
    LUA_INCDIR = "$(LUA_INCDIR)",
    LUADIR = "$(LUADIR)",
    LIBDIR = "$(LIBDIR)",
    BINDIR = "$(BINDIR)",
  },
}
test = {
  type = "command",
  command = "make test",
}
