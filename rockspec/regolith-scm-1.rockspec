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
-- Lua 5.4 here; the same sources build for LuaJIT 2.1 with `make LUA=luajit`
-- (docs/openresty.md).  Lua 5.1 to 5.3 are not supported.
dependencies = {
  "lua >= 5.4, < 5.5",
}
external_dependencies = {
  LMDB = { header = "lmdb.h", library = "lmdb" },
  CJSON = { header = "cjson/cJSON.h", library = "cjson" },
  PCRE2 = { header = "pcre2.h", library = "pcre2-8" },
}
build = {
  type = "builtin",
  modules = {
    regolith = "lua/regolith/init.lua",
    ["regolith.processor"] = "lua/regolith/processor.lua",
    ["regolith.keys"] = "lua/regolith/keys.lua",
    ["regolith.failure"] = "lua/regolith/failure.lua",
    ["regolith.group"] = "lua/regolith/group.lua",
    ["regolith.cli"] = "lua/regolith/cli/init.lua",
    ["regolith.cli.common"] = "lua/regolith/cli/common.lua",
    ["regolith.cli.data"] = "lua/regolith/cli/data.lua",
    ["regolith.cli.explore"] = "lua/regolith/cli/explore.lua",
    ["regolith.cli.feed"] = "lua/regolith/cli/feed.lua",
    ["regolith.cli.json"] = "lua/regolith/cli/json.lua",
    ["regolith.cli.scripts"] = "lua/regolith/cli/scripts.lua",
    ["regolith.cli.shell"] = "lua/regolith/cli/shell.lua",
    ["regolith.cli.transfer"] = "lua/regolith/cli/transfer.lua",
    ["regolith.cluster"] = "lua/regolith/cluster/init.lua",
    ["regolith.cluster.feed"] = "lua/regolith/cluster/feed.lua",
    ["regolith.cluster.items"] = "lua/regolith/cluster/items.lua",
    ["regolith.cluster.layout"] = "lua/regolith/cluster/layout.lua",
    ["regolith.cluster.query"] = "lua/regolith/cluster/query.lua",
    ["regolith.cluster.redis"] = "lua/regolith/cluster/redis.lua",
    ["regolith.cluster.scripts"] = "lua/regolith/cluster/scripts.lua",
    ["regolith.cluster.util"] = "lua/regolith/cluster/util.lua",
    ["regolith.cluster.verify"] = "lua/regolith/cluster/verify.lua",
    ["regolith.explorer.api"] = "lua/regolith/explorer/api.lua",
    ["regolith.explorer.nginx"] = "lua/regolith/explorer/nginx.lua",
    -- the Cosmos DB gateway (runs in OpenResty; docs/gateway.md)
    ["regolith.gateway"] = "lua/regolith/gateway/init.lua",
    ["regolith.gateway.auth"] = "lua/regolith/gateway/auth.lua",
    ["regolith.gateway.catalog"] = "lua/regolith/gateway/catalog.lua",
    ["regolith.gateway.items"] = "lua/regolith/gateway/items.lua",
    ["regolith.gateway.policy"] = "lua/regolith/gateway/policy.lua",
    ["regolith.gateway.scripts"] = "lua/regolith/gateway/scripts.lua",
    ["regolith.gateway.wire"] = "lua/regolith/gateway/wire.lua",
    ["regolith.core"] = {
      sources = {
        "csrc/base/arena.c",
        "csrc/base/charge.c",
        "csrc/base/json.c",
        "csrc/base/patch.c",
        "csrc/base/support.c",
        "csrc/base/token.c",
        "csrc/sql/eval.c",
        "csrc/sql/exec.c",
        "csrc/sql/filter.c",
        "csrc/sql/func.c",
        "csrc/sql/parse.c",
        "csrc/sql/time.c",
        "csrc/sql/value.c",
        "csrc/store/catalog.c",
        "csrc/store/container.c",
        "csrc/store/env.c",
        "csrc/store/feed.c",
        "csrc/store/index.c",
        "csrc/store/layout.c",
        "csrc/store/lease.c",
        "csrc/store/local.c",
        "csrc/store/plan.c",
        "csrc/store/procs.c",
        "csrc/store/scope.c",
        "csrc/store/scripts.c",
        "csrc/store/throughput.c",
        "csrc/store/upgrade.c",
        "csrc/store/verify.c",
        "csrc/store/write.c",
        "csrc/store/wal.c",
        "csrc/luax/luajson.c",
        "csrc/luax/luax.c",
        "csrc/luax/scope.c",
        "csrc/script/budget.c",
        "csrc/script/pattern.c",
        "csrc/script/runner.c",
        "csrc/script/runtime.c",
        "csrc/script/sandbox.c",
        "csrc/script/udf.c",
        "csrc/script/utf8lib.c",
        "csrc/host/admit.c",
        "csrc/host/cluster.c",
        "csrc/host/container.c",
        "csrc/host/db.c",
        "csrc/host/feed.c",
        "csrc/host/module.c",
        "csrc/host/processor.c",
        "csrc/host/query.c",
        "csrc/host/scripts.c",
        "csrc/host/throughput.c",
      },
      defines = { "_GNU_SOURCE" },
      incdirs = { "csrc", "$(LMDB_INCDIR)", "$(CJSON_INCDIR)",
                  "$(PCRE2_INCDIR)" },
      libdirs = { "$(LMDB_LIBDIR)", "$(CJSON_LIBDIR)", "$(PCRE2_LIBDIR)" },
      libraries = { "lmdb", "cjson", "pcre2-8" },
    },
  },
}
-- The command (docs/cli.md); it needs Debian's lua-argparse (LuaRocks:
-- argparse), which is not declared as a rock dependency so that the build
-- stays offline.
-- The Redis Functions library of cluster mode installs beside its modules,
-- where regolith.cluster.layout looks for it (docs/cluster.md).
build.install = {
  bin = { regolith = "bin/regolith" },
  lua = { ["regolith.cluster.regolith_functions"] = "redis/regolith.lua" },
}
test = {
  type = "command",
  command = "make test",
}
