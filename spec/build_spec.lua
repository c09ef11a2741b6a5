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

  it("lists every Lua module", function()
    local f = assert(io.open("rockspec/regolith-scm-1.rockspec"))
    local spec = f:read("*a")
    f:close()
    local p = assert(io.popen("ls lua/regolith"))
    local missing = {}
    for name in p:lines() do
      local mod = name:match("^(.*)%.lua$")
      local key = mod == "init" and 'regolith = "lua/regolith/init.lua"' or
        ('["regolith.%s"] = "lua/regolith/%s.lua"'):format(mod, name:sub(1, -5))
      if mod and not spec:find(key, 1, true) then missing[#missing + 1] = name end
    end
    p:close()
    assert.are.same({}, missing)
  end)
end)
