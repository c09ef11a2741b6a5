-- Build and install offline from a checkout:
--   luarocks --lua-version=5.4 make rockspec/regolith-scm-1.rockspec
rockspec_format = "3.0"
package = "regolith"
version = "scm-1"
source = {
  url = "git+https://example.invalid/regolith.git",
}
description = {
  summary = "An embedded document database for Lua on LMDB",
  detailed = [[
    regolith brings the programming model of a partitioned document store
    (containers, logical partitions, stored procedures and triggers in Lua,
    a change feed with processors, a SQL dialect, request charges) into a
    Lua process, with a C core on LMDB and cJSON.
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1",
}
external_dependencies = {
  LMDB = { header = "lmdb.h", library = "lmdb" },
  CJSON = { header = "cjson/cJSON.h", library = "cjson" },
}
build = {
  type = "builtin",
  modules = {
    regolith = "lua/regolith/init.lua",
    ["regolith.processor"] = "lua/regolith/processor.lua",
    ["regolith.keys"] = "lua/regolith/keys.lua",
    ["regolith.cli"] = "lua/regolith/cli/init.lua",
    ["regolith.cli.common"] = "lua/regolith/cli/common.lua",
    ["regolith.cli.data"] = "lua/regolith/cli/data.lua",
    ["regolith.cli.explore"] = "lua/regolith/cli/explore.lua",
    ["regolith.cli.feed"] = "lua/regolith/cli/feed.lua",
    ["regolith.cli.json"] = "lua/regolith/cli/json.lua",
    ["regolith.cli.scripts"] = "lua/regolith/cli/scripts.lua",
    ["regolith.cli.shell"] = "lua/regolith/cli/shell.lua",
    ["regolith.cli.transfer"] = "lua/regolith/cli/transfer.lua",
    ["regolith.explorer.api"] = "lua/regolith/explorer/api.lua",
    ["regolith.explorer.nginx"] = "lua/regolith/explorer/nginx.lua",
    ["regolith.core"] = {
      sources = {
        "csrc/charge.c",
        "csrc/container.c",
        "csrc/env.c",
        "csrc/feed.c",
        "csrc/index.c",
        "csrc/json.c",
        "csrc/layout.c",
        "csrc/lua_container.c",
        "csrc/lua_db.c",
        "csrc/lua_script.c",
        "csrc/patch.c",
        "csrc/pattern.c",
        "csrc/processor.c",
        "csrc/query.c",
        "csrc/lua_query.c",
        "csrc/query_plan.c",
        "csrc/query_exec.c",
        "csrc/query_eval.c",
        "csrc/query_parse.c",
        "csrc/sandbox.c",
        "csrc/script.c",
        "csrc/support.c",
        "csrc/token.c",
        "csrc/utf8lib.c",
        "csrc/verify.c",
        "csrc/write.c",
      },
      defines = { "_GNU_SOURCE" },
      incdirs = { "$(LMDB_INCDIR)", "$(CJSON_INCDIR)" },
      libdirs = { "$(LMDB_LIBDIR)", "$(CJSON_LIBDIR)" },
      libraries = { "lmdb", "cjson" },
    },
  },
}
-- The command (docs/cli.md); it needs Debian's lua-argparse (LuaRocks:
-- argparse), which is not declared as a rock dependency so that the build
-- stays offline.
build.install = { bin = { regolith = "bin/regolith" } }
test = {
  type = "command",
  command = "make test",
}
