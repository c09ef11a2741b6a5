-- The build files agree with the sources: `make install` (which the rock
-- runs, with the directories LuaRocks passes) installs every Lua module,
-- the C module and the command, and the rockspec is the release's of the
-- Makefile's version, built by the Makefile.
local H = require "helper"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

describe("the build", function()
  after_each(H.cleanup)

  it("installs every Lua module, the C module, the command (and the page when built)", function()
    local dest = H.tmpdir()
    local luadir, libdir = "/usr/local/share/lua/5.4", "/usr/local/lib/lua/5.4"
    -- (without the sanitizer build's preloaded runtime, which would end
    -- cp and the other tools make runs on their first leak)
    assert(H.execute(("env -u LD_PRELOAD make -s install DESTDIR=%s LUADIR=%s LIBDIR=%s " ..
      "BINDIR=/usr/local/bin >/dev/null"):format(dest, luadir, libdir)))
    local p = assert(io.popen("cd lua && find regolith -name '*.lua' | sort"))
    local missing, n = {}, 0
    for file in p:lines() do
      n = n + 1
      if not H.execute(("test -f %s%s/%s"):format(dest, luadir, file)) then
        missing[#missing + 1] = file
      end
    end
    p:close()
    assert.is_true(n > 20)             -- (the find found the modules)
    assert.are.same({}, missing)
    assert.is_true(H.execute(("test -f %s%s/regolith/core.so"):format(dest, libdir)))
    assert.is_true(H.execute(("test -x %s/usr/local/bin/regolith"):format(dest)))
    assert.is_true(H.execute(("test -f %s%s/regolith/cluster/regolith_functions.lua")
      :format(dest, luadir)))
    if H.execute("test -f build/explorer/index.html") then
      assert.is_true(H.execute(("test -f %s%s/regolith/explorer/www/index.html")
        :format(dest, luadir)))
    end
  end)

  it("has the rockspec of the Makefile's version, built by the Makefile from the release tarball", function()
    local version = read("Makefile"):match("\nVERSION%s*=%s*([%d.]+)")
    assert.is_string(version)
    local spec = read(("rockspec/regolith-%s-1.rockspec"):format(version))
    assert.truthy(spec:find(('version = "%s-1"'):format(version), 1, true))
    assert.truthy(spec:find(('/v%s/regolith-%s.tar.gz"'):format(version, version), 1, true))
    assert.truthy(spec:find(('tag = "v%s"'):format(version), 1, true))
    assert.truthy(spec:find('type = "make"', 1, true))
  end)
end)
