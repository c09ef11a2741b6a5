-- The build files agree with the sources.
describe("the rockspec", function()
  it("lists every C source of the core", function()
    local f = assert(io.open("rockspec/regolith-scm-1.rockspec"))
    local spec = f:read("*a")
    f:close()
    local listed = {}
    for name in spec:gmatch('"(csrc/[%w_]+/[%w_]+%.c)"') do listed[name] = true end
    local p = assert(io.popen("ls csrc/*/*.c"))
    local missing, n = {}, 0
    for name in p:lines() do
      n = n + 1
      if not listed[name] then missing[#missing + 1] = name end
    end
    assert.is_true(n > 20)
    p:close()
    assert.are.same({}, missing)
  end)

  it("lists every Lua module, in lua/regolith and below", function()
    local f = assert(io.open("rockspec/regolith-scm-1.rockspec"))
    local spec = f:read("*a")
    f:close()
    local p = assert(io.popen("cd lua && find regolith -name '*.lua' | sort"))
    local missing = {}
    for file in p:lines() do
      local mod = file:sub(1, -5):gsub("/init$", ""):gsub("/", ".")
      local key = mod == "regolith" and 'regolith = "lua/regolith/init.lua"' or
        ('["%s"] = "lua/%s"'):format(mod, file)
      if not spec:find(key, 1, true) then missing[#missing + 1] = file end
    end
    p:close()
    assert.are.same({}, missing)
  end)

  it("installs the command", function()
    local f = assert(io.open("rockspec/regolith-scm-1.rockspec"))
    local spec = f:read("*a")
    f:close()
    assert.truthy(spec:find('bin = { regolith = "bin/regolith" }', 1, true))
  end)
end)
