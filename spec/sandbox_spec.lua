local regolith = require "regolith"
local H = require "helper"

-- Small limits keep the runaway cases short.
local BUDGET = 20000000
local MEMORY = 8 * 2^20

describe("the script sandbox", function()
  local db, path, c, run
  before_each(function()
    db, path = H.open({ script_budget = BUDGET, script_memory = MEMORY })
    c = assert(db:create_container("things", { partition_key = "/pk" }))
    run = H.snippets(c)      -- run(body, ...): body as a procedure, in "p"
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  -- The database still works: a procedure runs and a write commits.
  local function usable()
    assert.are.equal(3, (run("return 1 + 2")))
    assert(c:upsert({ id = "after", pk = "p" }))
    assert(c:read("after", "p"))
  end

  describe("globals", function()
    it("offers only what docs/scripts.md, The sandbox, lists", function()
      local listed = { "assert", "error", "getmetatable", "ipairs", "math",
        "next", "os", "pairs", "pcall", "rawequal", "rawget", "rawlen",
        "rawset", "regolith", "select", "setmetatable", "string", "table",
        "tonumber", "tostring", "type", "utf8", "xpcall" }
      if H.lua54 then
        local names = assert(run([[
          local t = {}
          for k in pairs(_ENV) do t[#t + 1] = k end
          table.sort(t)
          return t]]))
        assert.are.same(listed, names)
      else
        -- no _ENV to list under LuaJIT: each listed name is there, and the
        -- next spec checks that the others are not
        local types = assert(run("return { type(" ..
          table.concat(listed, "), type(") .. ") }"))
        for i, name in ipairs(listed) do
          assert.are_not.equal("nil", types[i], name)
        end
      end
      assert.are.same({ "clock", "date", "time" },
        (run("local t = {} for k in pairs(os) do t[#t+1] = k end table.sort(t) return t")))
      assert.are.same({ "array", "json", "null", "object" },
        (run("local t = {} for k in pairs(regolith) do t[#t+1] = k end table.sort(t) return t")))
    end)

    it("refuses each forbidden global", function()
      local forbidden = { "io", "require", "load", "loadstring", "dofile",
        "loadfile", "debug", "collectgarbage", "package", "coroutine", "print",
        "_G", "module", "setfenv", "getfenv", "newproxy", "unpack" }
      for _, name in ipairs(forbidden) do
        assert.are.equal("nil", (run("return type(" .. name .. ")")), name)
      end
      for _, name in ipairs({ "execute", "exit", "getenv", "remove", "rename",
                              "tmpname", "setlocale" }) do
        assert.are.equal("nil", (run("return type(os." .. name .. ")")), name)
      end
      assert.are.equal("nil", (run("return type(string.dump)")))
      assert.are.equal("nil", (run("return type(('').dump)")))
      local msg = H.fails(400, run("return require('io')"))
      assert.matches("attempt to call", msg, 1, true)
      assert.matches("a nil value", msg, 1, true)
    end)

    it("compiles text only: bytecode is refused as source", function()
      local bytecode = string.dump(function() return function() return 1 end end)
      local msg = H.fails(400, c:create_procedure("bin", bytecode))
      assert.matches("procedure 'bin' does not compile", msg, 1, true)
      assert.matches("binary", msg, 1, true)
    end)

    it("has working string methods, json and markers", function()
      local r = assert(run([[
        local s = "Hello"
        return { s:upper(), ("%d-%s"):format(7, "x"), #s:rep(3, ","),
                 regolith.json.encode({ a = regolith.array() }),
                 regolith.json.decode("[1,null]")[2] == regolith.null,
                 utf8.char(233) }]]))
      assert.are.same({ "HELLO", "7-x", 17, '{"a":[]}', true, "é" }, r)
      assert.are.same({ 400, 400 }, (run([[
        local _, _, a = regolith.json.decode("[1,")
        local _, _, b = regolith.json.encode({ f = print or function() end })
        return { a, b }]])))
    end)
  end)

  describe("escape routes", function()
    it("hides the string metatable and its __index", function()
      assert.are.equal(false, (run("return getmetatable('')")))
      local msg = H.fails(400, run("return getmetatable('').__index"))
      assert.matches("attempt to index a boolean value", msg, 1, true)
      H.fails(400, run("setmetatable('', {})"))
    end)

    it("keeps one script's changes to libraries and globals from every other", function()
      assert(run([[
        string.upper = function() return "pwned" end
        rawset(string, "lower", nil)
        math.floor = nil
        table.insert = error
        tostring = nil
        regolith.null = "not null"
        leaked = true
        return ("x"):upper()]]))
      local r = assert(run([[
        return { ("x"):upper(), string.upper("y"), type(string.lower),
                 math.floor(1.5), type(tostring), regolith.null == regolith.json.null,
                 leaked == nil }]]))
      assert.are.same({ "X", "Y", "function", 1, "function", true, true }, r)
    end)

    it("calls the library's own string functions for methods, whatever a script assigns", function()
      assert.are.equal("X", (run("string.upper = function() return 'no' end return ('x'):upper()")))
    end)

    it("protects the marker metatables of regolith.array and object", function()
      assert.are.equal(false, (run("return getmetatable(regolith.array())")))
      local msg = H.fails(400, run("setmetatable(regolith.object(), {})"))
      assert.matches("protected metatable", msg, 1, true)
      assert.are.equal("[]", regolith.json.encode((run("return regolith.array()"))))
    end)

    it("refuses __gc metamethods (finalizers would run without a budget)", function()
      local msg = H.fails(400, run([[
        error(setmetatable({}, { __gc = function() while true do end end }))]]))
      assert.matches("__gc metamethods are not allowed", msg, 1, true)
      usable()
    end)

    it("hides ctx's metatable", function()
      assert.are.equal(false, (run("return getmetatable(ctx)")))
    end)

    it("gives each ctx method only to its own run", function()
      assert(c:create_procedure("keep", [[
        local kept
        return function(ctx) kept = ctx return true end]]))
      assert(c:execute("keep", "p"))
      assert(c:execute("keep", "p"))
    end)
  end)

  describe("the instruction budget", function()
    it("stops an infinite loop with 408, writes nothing, and leaves the database usable", function()
      local msg = H.fails(408, run([[
        assert(ctx:create({ id = "x", pk = "p" }))
        while true do end]]))
      assert.matches("exceeded its instruction budget", msg, 1, true)
      H.fails(404, c:read("x", "p"))
      usable()
    end)

    it("cannot be caught by pcall or by an xpcall handler", function()
      H.fails(408, run([[
        assert(ctx:create({ id = "x", pk = "p" }))
        for i = 1, 100 do pcall(function() while true do end end) end
        return "escaped"]]))
      H.fails(408, run([[
        return xpcall(function() while true do end end,
                      function(m) while true do end end)]]))
      H.fails(408, run([[
        local ok = pcall(function() while true do end end)
        while true do end]]))
      H.fails(404, c:read("x", "p"))
      usable()
    end)

    it("stops to-be-closed variables that loop", function()
      if not H.lua54 then pending("Lua 5.4 only: <close> is 5.4 syntax") end
      H.fails(408, run([[
        do local x <close> = setmetatable({}, { __close = function() while true do end end }) end]]))
      usable()
    end)

    it("stops pattern-matching bombs", function()
      H.fails(408, run([[
        local s = string.rep("a", 3000)
        return s:find(".-.-.-.-.-.-b")]]))
      H.fails(408, run([[
        local s = string.rep("a", 1e6)
        return s:find(string.rep("a", 5e5) .. "b", 1, true)]]))
      H.fails(408, run([[return (string.rep("a", 5000)):gsub("(a*)*b", "")]]))
      usable()
    end)

    it("charges C work: string.rep of nothing, table.move, lying lengths", function()
      H.fails(408, run("return #string.rep('', 1e15)"))
      H.fails(408, run("table.move({}, 1, 1e15, 2)"))
      if H.lua54 then
        -- LuaJIT's table library takes the raw length (as Lua 5.1 does),
        -- so a lying __len makes no loop there
        H.fails(408, run([[
          local t = setmetatable({}, { __len = function() return 1e15 end })
          table.insert(t, 1, "x")]]))
        H.fails(408, run([[
          local t = setmetatable({}, { __len = function() return 1e15 end,
                                       __index = function() return "" end })
          return #table.concat(t)]]))
      end
      usable()
    end)

    it("charges storage operations and JSON conversions: loops of them are stopped", function()
      -- stopped by the budget, or by what the transaction may write
      local ok, _, status = run([[
        local i = 0
        while true do i = i + 1 assert(ctx:upsert({ id = "w" .. i, pk = "p" })) end]])
      assert.is_nil(ok)
      assert.is_true(status == 408 or status == 413, tostring(status))
      H.fails(404, c:read("w1", "p"))
      H.fails(408, run([[
        local t = {} for i = 1, 50000 do t[i] = i end
        while true do ctx:create({ id = "big", pk = "p", t = t }) end]]))
      H.fails(408, run([[
        local t = {} for i = 1, 50000 do t[i] = i end
        while true do regolith.json.encode(t) end]]))
      usable()
    end)

    it("applies when a procedure is stored: its chunk runs under the budget", function()
      local msg = H.fails(408, c:create_procedure("loop", "while true do end"))
      assert.matches("procedure 'loop' exceeded its instruction budget", msg, 1, true)
      assert.are.same({}, c:procedures())
    end)

    it("lets a script use most of its budget", function()
      assert.are.equal(100000, (run("local n = 0 for i = 1, 100000 do n = n + 1 end return n")))
    end)
  end)

  describe("the memory budget", function()
    it("stops a memory bomb with 413, writes nothing, and leaves the database usable", function()
      local msg = H.fails(413, run([[
        assert(ctx:create({ id = "x", pk = "p" }))
        local t = {}
        while true do t[#t + 1] = { #t } end]]))
      assert.matches("exceeded its memory budget", msg, 1, true)
      H.fails(404, c:read("x", "p"))
      usable()
    end)

    it("cannot be caught by pcall", function()
      H.fails(413, run([[
        assert(ctx:create({ id = "x", pk = "p" }))
        local ok = pcall(function()
          local t = {} while true do t[#t + 1] = ("x"):rep(1000) .. #t end
        end)
        return "caught"]]))
      H.fails(404, c:read("x", "p"))
      usable()
    end)

    it("stops string.rep bombs and huge strings", function()
      H.fails(413, run("return #string.rep('x', 2^24)"))
      H.fails(413, run("local s = ('x'):rep(2^20) for i = 1, 5 do s = s .. s end return #s"))
      usable()
    end)

    it("lets garbage be collected: allocating much over time is not a bomb", function()
      -- 150 strings of 64 KiB each: far more than the 8 MiB it may hold
      assert.are.equal(150, (run([[
        local n = 0
        for i = 1, 150 do local s = ("x"):rep(65536) .. i n = n + 1 end
        return n]])))
    end)

    it("lets a large allocation through when garbage, not held memory, fills the budget", function()
      -- 12 MiB of garbage, then 3 MiB held: only what is held counts (LuaJIT
      -- has no emergency collection: the sandbox collects before refusing)
      assert.are.equal(3 * 2^20, (run([[
        for i = 1, 6 do local s = ("x"):rep(2^20) .. i end
        local big = ("y"):rep(3 * 2^20)
        return #big]])))
      usable()
    end)

    it("ends deep recursion with an error and leaves the database usable", function()
      local _, _, status = run("local function f(n) return f(n + 1) + 1 end return f(1)")
      assert.is_true(status == 400 or status == 413)
      usable()
    end)
  end)

  describe("the time limit", function()
    -- A budget of 4e8 instructions gives 2 s of CPU (budget / 2e8 a
    -- second).  Each case below does work no instruction count sees, or
    -- that its charges once undercounted several times over: each ran on
    -- until the wall-clock backstop (8 s for this budget) or past it.
    local LIMIT = 2
    local tdb, tc
    before_each(function()
      tdb = assert(regolith.open(H.tmpdir(), { script_budget = 4e8 }))
      tc = assert(tdb:create_container("t", { partition_key = "/pk" }))
    end)
    after_each(function() tdb:close() end)

    local cases = {
      ["comparisons of long strings"] = [[
        local a, b = ("x"):rep(2^23) .. "a", ("x"):rep(2^23) .. "b"
        local n = 0
        while true do if a < b and a ~= b then n = n + 1 end end]],
      ["catastrophic backtracking"] = [[
        return (("a"):rep(30) .. "b"):match(("a*"):rep(30) .. "c")]],
      ["a gmatch loop"] = [[
        local s = ("ab"):rep(1e6)
        while true do for w in s:gmatch("a") do end end]],
      ["inserts at the front of a long table"] = [[
        local t = {} for i = 1, 1e6 do t[i] = i end
        while true do table.insert(t, 1, 0) end]],
      ["sorting long strings"] = [[
        local t = {} for i = 1, 300 do t[i] = ("x"):rep(1e5) .. (i % 7) end
        while true do table.sort(t) end]],
      -- (10 MB a call: the limit is noticed between calls, and one call
      -- takes 0.05 s, 0.13 s under the sanitizers)
      ["string.rep"] = [[
        while true do local s = ("x"):rep(1e7) end]],
    }
    for what, body in pairs(cases) do
      it("stops " .. what .. " within the limit, with 408", function()
        assert(tc:create_procedure("p", "return function(ctx) " .. body .. " end"))
        local t0 = os.clock()
        local msg = H.fails(408, tc:execute("p", "p"))
        local spent = os.clock() - t0
        assert.matches("exceeded its ", msg, 1, true)
        assert.is_true(spent < LIMIT * 1.1, ("%s: %.2f s of CPU"):format(what, spent))
        -- and the next execution has a limit of its own
        assert(tc:create_procedure("q", "return function(ctx) return 1 + 2 end"))
        assert.are.equal(3, (tc:execute("q", "p")))
      end)
    end

    it("names the time limit when it is what stopped the script", function()
      assert(tc:create_procedure("p", [[return function(ctx)
        local a, b = ("x"):rep(2^23) .. "a", ("x"):rep(2^23) .. "b"
        while true do local _ = a < b end end]]))
      local msg = H.fails(408, tc:execute("p", "p"))
      assert.matches("procedure 'p' exceeded its time limit (2.00 s of CPU)", msg, 1, true)
    end)
  end)

  describe("the utf8 library", function()
    -- Every utf8 function on valid and invalid strings, as one list of
    -- lines; strings as hex, errors by kind only.
    local UTF8_OUTCOMES = [[
      local function show(ok, ...)
        if not ok then return "error" end
        local out = {}
        for i = 1, select("#", ...) do
          local v = select(i, ...)
          if type(v) == "string" then
            v = v:gsub(".", function(ch) return ("%02x"):format(ch:byte()) end)
          end
          out[i] = tostring(v)
        end
        return table.concat(out, ",")
      end
      local function codes(s, lax)
        local out = {}
        for p, c in utf8.codes(s, lax) do out[#out + 1] = p .. ":" .. c end
        return table.concat(out, " ")
      end
      local function utf8_outcomes(strings)
        local lines = {}
        local function add(name, ...) lines[#lines + 1] = name .. " " .. show(pcall(...)) end
        add("charpattern", function() return utf8.charpattern end)
        add("char", utf8.char, 0, 0x7F, 0x80, 0x7FF, 0x800, 0xD800, 0xFFFF,
            0x10000, 0x10FFFF, 0x110000, 0x1FFFFF, 0x200000, 0x3FFFFFF,
            0x4000000, 0x7FFFFFFF)
        add("char", utf8.char)
        add("char", utf8.char, 0x80000000)
        add("char", utf8.char, -1)
        for _, s in ipairs(strings) do
          local n = #s
          for _, args in ipairs({ {}, { 2 }, { -1 }, { 1, -2 }, { 0 },
              { n + 1 }, { n + 2 }, { 1, n + 1 }, { 3, 2 }, { 1, -1, true },
              { -100 }, { 1, -100 } }) do
            add("len", utf8.len, s, table.unpack(args))
          end
          for _, args in ipairs({ {}, { 1, -1 }, { 1, -1, true }, { 2, 3 },
              { -1 }, { 0 }, { n + 1 }, { 2, 1 }, { 1, n + 1 } }) do
            add("codepoint", utf8.codepoint, s, table.unpack(args))
          end
          for k = -4, 4 do
            add("offset", utf8.offset, s, k)
            add("offset", utf8.offset, s, k, 2)
            add("offset", utf8.offset, s, k, -1)
            add("offset", utf8.offset, s, k, n + 1)
          end
          add("offset", utf8.offset, s, 1, n + 2)
          add("offset", utf8.offset, s, 1, 0)
          add("codes", codes, s)
          add("codes", codes, s, true)
          lines[#lines + 1] = "match " .. show(pcall(function()
            local out = {}
            for ch in s:gmatch(utf8.charpattern) do out[#out + 1] = ch end
            return table.concat(out, "|")
          end))
        end
        return lines
      end
    ]]
    local STRINGS = { "", "abc", "h\195\169llo", "\230\151\165\230\156\172",
      "\240\159\152\128x", "\0a\0", "\255", "\128abc", "a\195", "\192\128",
      "\237\160\128", "\244\144\128\128", "\248\136\128\128\128",
      "\252\132\128\128\128\128", "\254", "\195\169\128", "\225\128",
      "\224\128\128", "\240\128\128\128" }

    it("matches Lua 5.4's own on valid and invalid strings, strict and lax", function()
      local list = table.concat(STRINGS, '", "')
      assert(c:create_procedure("u", UTF8_OUTCOMES .. [[
        return function(ctx)
          return utf8_outcomes({ "]] .. list .. [[" })
        end]]))
      local want = H.lua54_eval(UTF8_OUTCOMES .. [[
        return utf8_outcomes({ "]] .. list .. [[" })]])
      local got = assert(c:execute("u", "p"))
      local differ = {}
      for i = 1, math.max(#want, #got) do
        if want[i] ~= got[i] then
          differ[#differ + 1] = ("%s\n  but got %s"):format(tostring(want[i]), tostring(got[i]))
        end
      end
      assert.are.equal("", table.concat(differ, "\n"))
    end)
  end)

  describe("the pattern functions", function()
    -- the sandbox's matcher against Lua's own, on the same cases
    local cases = {
      { "hello world", "o w" }, { "hello world", "(%w+) (%w+)" },
      { "  trim  ", "^%s*(.-)%s*$" }, { "key=val; k2=v2", "(%w+)=(%w+)" },
      { "THE (quick) fox", "%((%a+)%)" }, { "f(a(b)c)d", "%b()" },
      { "THE (quick) fox", "%f[%a]%a+" }, { "aaa", "a-b" }, { "aaab", "a-b" },
      { "abc", "()b()" }, { "hello", "l+" }, { "hello", "l*" }, { "x", "x?y?" },
      { "2024-01-31", "(%d+)-(%d+)-(%d+)" }, { "a.b", "%." }, { "a+b", "a+b" },
      { "[x]", "[%[]" }, { "abc", "[^a]+" }, { "a]b", "[]]" }, { "a-z", "[a%-z]+" },
      { "abcabc", "(abc)%1" }, { "éa", "[é]+" }, { "end", "d$" },
      { "a)", "a)" }, { "x = 1", "%s*=%s*" }, { "CamelCase", "%u%l+" },
      { "a,b,,c", "([^,]*)" }, { "abc", "%w-" }, { "12ab", "%x+" },
      { "a\0b", "%z" }, { "a\0b", "\0" }, { "hello", "" }, { "", "" },
      { "hello", "^h" }, { "hello", "^e" }, { "x^y", "^x^" }, { "aaa", ".-$" },
    }

    -- What each pattern function gives on a case; errors compare by kind
    -- only (messages carry positions).
    local OUTCOMES = [[
      local function outcomes(s, p)
        local out = {}
        out.find = { pcall(string.find, s, p) }
        out.find3 = { pcall(string.find, s, p, -3) }
        out.match = { pcall(string.match, s, p) }
        out.gsub = { pcall(string.gsub, s, p, "<%0>") }
        out.gsub1 = { pcall(string.gsub, s, p, "[%1]", 2) }
        local ok, it = pcall(string.gmatch, s, p)
        out.gmatch = {}
        if ok then
          for _ = 1, 10 do
            local r = { pcall(it) }
            if r[2] == nil then break end
            out.gmatch[#out.gmatch + 1] = table.concat(r, ",", 2)
          end
        end
        for _, k in ipairs({ "find", "find3", "match", "gsub", "gsub1" }) do
          if out[k][1] == false then out[k] = { false } end
        end
        return out
      end
    ]]

    -- The sandbox follows Lua 5.4 on every host, so the reference is Lua
    -- 5.4's own string library (under LuaJIT, whose 5.1 library differs
    -- on empty matches, a lua5.4 child's).
    it("match Lua's own on a table of cases", function()
      assert(c:create_procedure("pat", OUTCOMES .. [[
        return function(ctx, s, p)
          local out = outcomes(s, p)
          for k, v in pairs(out) do out[k] = regolith.array(v) end
          return out
        end]]))
      local list = {}
      for i, case in ipairs(cases) do
        list[i] = ("{%q, %q}"):format(case[1], case[2])
      end
      local wants = H.lua54_eval(OUTCOMES .. " local cases = { " ..
        table.concat(list, ", ") .. [[ }
        local all = {}
        for i, case in ipairs(cases) do all[i] = outcomes(case[1], case[2]) end
        return all]])
      for i, case in ipairs(cases) do
        local want = wants[i]
        local got = assert(c:execute("pat", "p", case[1], case[2]))
        for k, v in pairs(want) do
          assert.are.same(v, got[k], ("%s on %q / %q"):format(k, case[1], case[2]))
        end
      end
    end)

    it("raise Lua's errors for malformed patterns", function()
      for _, p in ipairs({ "%", "[a", "(a", "%b", "%f", "%1", "(()", "%b)" }) do
        local msg = H.fails(400, run("return ('abc'):find(...)", p))
        assert.matches("failed", msg, 1, true)
      end
    end)
  end)
end)
