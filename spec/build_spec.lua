-- The build files agree with the sources.
describe("the rockspec", function()
  it("lists every C source of the core", function()
    local f = assert(io.open("rockspec/regolith-scm-1.rockspec"))
    local spec = f:read("a")
    f:close()
    local listed = {}
    for name in spec:gmatch('"csrc/([%w_]+%.c)"') do listed[name] = true end
    local p = assert(io.popen("ls csrc"))
    local missing = {}
    for name in p:lines() do
      if name:match("%.c$") and not listed[name] then missing[#missing + 1] = name end
    end
    p:close()
    assert.are.same({}, missing)
  end)
end)
