-- The JSON bridge (docs/api.md, JSON values): Lua values to JSON and back,
-- through regolith.json.encode/decode and through documents stored and
-- read.
local regolith = require "regolith"
local H = require "helper"

local json = regolith.json
local null = regolith.null

local ARRAY_MT = getmetatable(regolith.array())
local OBJECT_MT = getmetatable(regolith.object())

-- n nested tables: {a = {a = ... {}}} (the outermost is level 1)
local function nest(n)
  local t = {}
  local cur = t
  for _ = 2, n do
    cur.a = {}
    cur = cur.a
  end
  return t
end

-- A sample of code points of every UTF-8 length, boundaries included.
local CODEPOINTS = {
  0x00, 0x01, 0x1F, 0x20, 0x22, 0x2F, 0x5C, 0x7F,            -- 1 byte
  0x80, 0xE9, 0x7FF,                                         -- 2 bytes
  0x800, 0x20AC, 0x2028, 0x2029, 0xD7FF, 0xE000, 0xFEFF,     -- 3 bytes
  0xFFFD, 0xFFFF,
  0x10000, 0x1D11E, 0x1F600, 0x10FFFF,                       -- 4 bytes
}

local function sample_strings()
  local all = {}
  for _, cp in ipairs(CODEPOINTS) do all[#all + 1] = H.utf8_char(cp) end
  local wide = {}
  for cp = 0, 0x10FFFF, 4099 do
    if cp < 0xD800 or cp > 0xDFFF then wide[#wide + 1] = H.utf8_char(cp) end
  end
  return {
    "", "plain", "a\0b", "\0", "\0\0\0", "trailing\0",
    "quote \" backslash \\ slash / tab \t newline \n cr \r",
    "\1\2\3\31\127",
    "café", "日本語", "𝄞 music", "emoji 😀",
    table.concat(all), table.concat(wide),
    ("x"):rep(100000),
  }
end

local INVALID_UTF8 = {
  "\xff", "\xfe", "\x80", "abc\xc3", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80",
  "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x80\x80\x80", "\xf4\x90\x80\x80",
  "\xf5\x80\x80\x80", "ok\xe2\x82", H.utf8_char(0xD800),
}

describe("json bridge", function()
  describe("encode and decode", function()
    it("carries null as regolith.null", function()
      assert.are.equal("null", json.encode(null))
      assert.are.equal(null, json.decode("null"))
      assert.are.equal(null, json.null)
      local t = json.decode('{"a":null,"b":[1,null,3]}')
      assert.are.equal(null, t.a)
      assert.are.equal(null, t.b[2])
      assert.are.equal(3, t.b[3])
      assert.are.equal('[1,null,3]', json.encode({ 1, null, 3 }))
    end)

    it("writes booleans, integers and strings as standard JSON text", function()
      assert.are.equal("true", json.encode(true))
      assert.are.equal("false", json.encode(false))
      assert.are.equal("42", json.encode(42))
      assert.are.equal("-7", json.encode(-7))
      assert.are.equal('"a\\u0000b"', json.encode("a\0b"))
      assert.are.equal('"\\"\\\\"', json.encode('"\\'))
      assert.are.equal('"\\u0001"', json.encode("\1"))
      assert.are.equal('[1,2,3]', json.encode({ 1, 2, 3 }))
      assert.are.equal('{"k":"v"}', json.encode({ k = "v" }))
    end)

    it("marks shapes: an unmarked empty table is an object, marked ones keep their shape", function()
      assert.are.equal("{}", json.encode({}))
      assert.are.equal("[]", json.encode(regolith.array()))
      assert.are.equal("{}", json.encode(regolith.object()))
      assert.are.equal("[]", json.encode(regolith.array({})))
      assert.are.equal("[1,2]", json.encode(regolith.array({ 1, 2 })))
      local text = json.encode({ a = regolith.array(), b = regolith.object() })
      assert.is_truthy(text == '{"a":[],"b":{}}' or text == '{"b":{},"a":[]}')
      assert.are.equal("[[],{}]",
        json.encode({ regolith.array(), regolith.object() }))
    end)

    it("returns the table it marks", function()
      local t = { 1, 2 }
      assert.are.equal(t, regolith.array(t))
      local o = { a = 1 }
      assert.are.equal(o, regolith.object(o))
    end)

    it("decodes empty arrays and objects marked, so they encode to the same shape", function()
      local a = json.decode("[]")
      local o = json.decode("{}")
      assert.are.equal(ARRAY_MT, getmetatable(a))
      assert.are.equal(OBJECT_MT, getmetatable(o))
      assert.are.equal("[]", json.encode(a))
      assert.are.equal("{}", json.encode(o))
      local t = json.decode('{"x":[],"y":{},"z":[[],{}]}')
      assert.are.equal("[]", json.encode(t.x))
      assert.are.equal("{}", json.encode(t.y))
      assert.are.equal("[[],{}]", json.encode(t.z))
    end)

    it("refuses a marked array with string keys and a marked object with integer keys", function()
      H.fails(400, json.encode(regolith.array({ 1, x = 2 })))
      H.fails(400, json.encode(regolith.array({ x = 2 })))
      H.fails(400, json.encode(regolith.object({ 1, 2 })))
    end)

    it("keeps integers exact: math.maxinteger, math.mininteger, 2^53+1", function()
      if not H.lua54 then pending("Lua 5.4 only: LuaJIT's numbers are doubles, exact to 2^53") end
      local ints = { math.maxinteger, math.mininteger, 9007199254740993,
                     -9007199254740993, 9007199254740992, 0, -1,
                     4611686018427387905 }
      for _, i in ipairs(ints) do
        local text = json.encode(i)
        assert.are.equal(string.format("%d", i), text)
        local back = json.decode(text)
        assert.are.equal("integer", math.type(back))
        assert.are.equal(i, back)
      end
      local arr = json.decode(json.encode(ints))
      for k, i in ipairs(ints) do
        assert.are.equal("integer", math.type(arr[k]))
        assert.are.equal(i, arr[k])
      end
    end)

    it("decodes integer text beyond 64 bits as the nearest float", function()
      local v = json.decode("18446744073709551617")
      assert.are.equal(2.0^64, v)
      assert.are.equal(2.0^63, json.decode("9223372036854775808"))
      if H.lua54 then          -- where 64-bit integers end
        assert.are.equal("float", math.type(v))
        assert.are.equal(math.mininteger, json.decode("-9223372036854775808"))
        assert.are.equal(math.maxinteger, json.decode("9223372036854775807"))
        assert.are.equal("float", math.type(json.decode("9223372036854775808")))
      end
    end)

    it("turns negative zero into the integer 0", function()
      local back = json.decode(json.encode(-0.0))
      assert.is_true(H.integer(back))
      assert.are.equal(0, back)
      assert.is_true(H.integer(json.decode("-0")))
      assert.are.equal(0, json.decode("-0.0"))
    end)

    it("round-trips floats exactly", function()
      local floats = { 0.1, 0.2, 1 / 3, math.pi, -1.5, 1e300, -1e300, 5e-324,
                       2.2250738585072014e-308, 1.7976931348623157e308,
                       123456.789, 1e-7, 2.0^63, 0.1 + 0.2 }
      for _, f in ipairs(floats) do
        local back = json.decode(json.encode(f))
        assert.are.equal(f, back)
      end
      assert.is_false(H.integer(json.decode(json.encode(0.1))))
      assert.is_false(H.integer(json.decode(json.encode(5e-324))))
    end)

    it("brings integral floats back as integers", function()
      for _, f in ipairs({ 2.0, -3.0, 1e15, 0.0, 2.0^53 }) do
        local back = json.decode(json.encode(f))
        assert.is_true(H.integer(back))
        assert.are.equal(f, back)
      end
      assert.is_true(H.integer(json.decode("2.0")))
      assert.are.equal(2, json.decode("2.0"))
      assert.are.equal(100, json.decode("1e2"))
      assert.is_true(H.integer(json.decode("1e2")))
    end)

    it("round-trips every kind of valid UTF-8, NUL included, in values and keys", function()
      for _, s in ipairs(sample_strings()) do
        assert.are.equal(s, json.decode(json.encode(s)))
        local t = json.decode(json.encode({ [s] = s }))
        assert.are.equal(s, t[s])
      end
    end)

    it("keeps keys that differ only after a NUL apart", function()
      local t = json.decode(json.encode({ ["a\0b"] = 1, ["a"] = 2, ["a\0"] = 3 }))
      assert.are.equal(1, t["a\0b"])
      assert.are.equal(2, t["a"])
      assert.are.equal(3, t["a\0"])
    end)

    it("decodes escapes, surrogate pairs and \\u0000", function()
      assert.are.equal("é𝄞\0/\b\f\n\r\t\"\\",
        json.decode('"\\u00e9\\ud834\\udd1e\\u0000\\/\\b\\f\\n\\r\\t\\"\\\\"'))
      assert.are.equal("😀", json.decode('"\\uD83D\\uDE00"'))
    end)

    it("accepts whitespace around values and nested structures", function()
      local t = json.decode(' \n\t{ "a" : [ 1 , { "b" : true } ] , "c" : "d" } \r\n')
      assert.are.equal(1, t.a[1])
      assert.are.equal(true, t.a[2].b)
      assert.are.equal("d", t.c)
    end)

    it("accepts 128 levels of nesting and refuses 129 with 400", function()
      assert.is_string(json.encode(nest(128)))
      H.fails(400, json.encode(nest(129)))
      assert.is_table(json.decode(("["):rep(128) .. ("]"):rep(128)))
      H.fails(400, json.decode(("["):rep(129) .. ("]"):rep(129)))
      H.fails(400, json.decode(('{"a":'):rep(129) .. "1" .. ("}"):rep(129)))
    end)

    it("refuses NaN and infinities with 400", function()
      H.fails(400, json.encode(0 / 0))
      H.fails(400, json.encode(math.huge))
      H.fails(400, json.encode(-math.huge))
      H.fails(400, json.encode({ x = 0 / 0 }))
      H.fails(400, json.encode({ 1, math.huge }))
    end)

    it("refuses cycles with 400 but accepts a table shared without a cycle", function()
      local t = { a = 1 }
      t.self = t
      H.fails(400, json.encode(t))
      local a, b = {}, {}
      a.b = b
      b.list = { a }
      H.fails(400, json.encode(a))
      local shared = { 1, 2 }
      local text = assert(json.encode({ x = shared, y = shared }))
      local back = json.decode(text)
      assert.are.same({ 1, 2 }, back.x)
      assert.are.same({ 1, 2 }, back.y)
    end)

    it("refuses non-string keys with 400", function()
      H.fails(400, json.encode({ x = 1, [2.5] = 3 }))
      H.fails(400, json.encode({ [0] = "zero" }))
      H.fails(400, json.encode({ [-1] = "minus" }))
      H.fails(400, json.encode({ [true] = 1 }))
      H.fails(400, json.encode({ [false] = 1 }))
      H.fails(400, json.encode({ [{}] = 1 }))
      H.fails(400, json.encode({ nested = { [true] = 1 } }))
    end)

    it("refuses tables mixing a sequence with other keys, and holes, with 400", function()
      H.fails(400, json.encode({ 1, 2, x = 3 }))
      H.fails(400, json.encode({ 1, nil, 3 }))
      H.fails(400, json.encode({ [2] = "b" }))
      H.fails(400, json.encode({ [1] = 1, [3] = 3 }))
      H.fails(400, json.encode({ list = { 1, 2, [4] = 4 } }))
    end)

    it("refuses invalid UTF-8 in values and keys with 400", function()
      for _, s in ipairs(INVALID_UTF8) do
        H.fails(400, json.encode(s))
        H.fails(400, json.encode({ v = s }))
        H.fails(400, json.encode({ [s] = 1 }))
      end
    end)

    it("refuses functions, userdata, threads and nil with 400", function()
      H.fails(400, json.encode(print))
      H.fails(400, json.encode({ f = function() end }))
      H.fails(400, json.encode(io.stdout))
      H.fails(400, json.encode({ u = io.stdout }))
      H.fails(400, json.encode(coroutine.create(function() end)))
      H.fails(400, json.encode({ 1, coroutine.create(function() end) }))
      H.fails(400, json.encode(nil))
    end)

    it("refuses bad JSON text with nil, message, 400", function()
      local bad = {
        "", "   ", "1 2", "{} x", "[1]]", "nul", "tru", "NaN", "Infinity",
        "-Infinity", "+1", ".5", "1.", "1e", "1e+", "-", "01", "-01", "[00]",
        "0x10", "'a'", '"abc', "[1,2", '{"a":1', "[1,]", '{"a":1,}', "{,}",
        '{"a" 1}', "{a:1}", '{"a":}', "[,1]",
        '"\\ud800"', '"\\udc00"', '"\\ud800\\u0041"', '"\\ud800x"',
        '"\\x"', '"\\u12"', '"\\uZZZZ"', '"\\"', '"\\a"',
        '"a\nb"', '"\t"', '"\0"', '"\31"',
        '"\xff"', '"\xc0\x80"', '"\xed\xa0\x80"',
        "1e400", "-1e400",
      }
      for _, text in ipairs(bad) do
        local v, msg, status = json.decode(text)
        assert(v == nil and type(msg) == "string" and status == 400,
          ("decode(%q) gave %s, %s, %s"):format(text, tostring(v),
            tostring(msg), tostring(status)))
      end
    end)
  end)

  describe("documents through the store", function()
    local db, c
    before_each(function()
      db = H.open()
      c = assert(db:create_container("docs", { partition_key = "/pk" }))
    end)
    after_each(function()
      db:close()
      H.cleanup()
    end)

    local function roundtrip(doc)
      doc.id = doc.id or "d"
      doc.pk = doc.pk or "p"
      local created = assert(c:create(doc))
      local read = assert(c:read(doc.id, doc.pk))
      return read, created
    end

    local function nothing_written()
      H.fails(404, c:read("d", "p"))
      assert.are.equal(0, db:stats().items)
    end

    it("stores null and reads it back as regolith.null", function()
      local d, created = roundtrip({ a = null, arr = { 1, null, 3 } })
      assert.are.equal(null, d.a)
      assert.are.equal(null, d.arr[2])
      assert.are.equal(3, d.arr[3])
      assert.are.equal(null, created.a)
    end)

    it("reads empty arrays and objects back marked, and keeps their shape when written again", function()
      local d, created = roundtrip({
        a = regolith.array(), o = regolith.object(),
        nested = { regolith.array(), regolith.object() },
      })
      for _, doc in ipairs({ d, created }) do
        assert.are.equal(ARRAY_MT, getmetatable(doc.a))
        assert.are.equal(OBJECT_MT, getmetatable(doc.o))
        assert.are.equal("[]", json.encode(doc.nested[1]))
        assert.are.equal("{}", json.encode(doc.nested[2]))
      end
      assert(c:replace(d))
      local again = assert(c:read("d", "p"))
      assert.are.equal("[]", json.encode(again.a))
      assert.are.equal("{}", json.encode(again.o))
      assert.are.equal("[[],{}]", json.encode(again.nested))
    end)

    it("keeps integers exact in stored documents", function()
      if not H.lua54 then pending("Lua 5.4 only: LuaJIT's numbers are doubles, exact to 2^53") end
      local ints = { math.maxinteger, math.mininteger, 9007199254740993,
                     -9007199254740993, 0 }
      local d, created = roundtrip({ ints = ints, max = math.maxinteger,
                                     min = math.mininteger })
      for _, doc in ipairs({ d, created }) do
        for k, i in ipairs(ints) do
          assert.are.equal("integer", math.type(doc.ints[k]))
          assert.are.equal(i, doc.ints[k])
        end
        assert.are.equal(math.maxinteger, doc.max)
        assert.are.equal(math.mininteger, doc.min)
      end
    end)

    it("stores negative zero as the integer 0", function()
      local d = roundtrip({ z = -0.0 })
      assert.is_true(H.integer(d.z))
      assert.are.equal(0, d.z)
    end)

    it("round-trips floats exactly and brings integral floats back as integers", function()
      local d, created = roundtrip({ a = 0.1, b = 1e300, c = 5e-324,
                                     d = -2.5, e = 2.0, f = 1e15 })
      for _, doc in ipairs({ d, created }) do
        assert.are.equal(0.1, doc.a)
        assert.is_false(H.integer(doc.a))
        assert.are.equal(1e300, doc.b)
        assert.are.equal(5e-324, doc.c)
        assert.are.equal(-2.5, doc.d)
        assert.is_true(H.integer(doc.e))
        assert.are.equal(2, doc.e)
        assert.is_true(H.integer(doc.f))
      end
    end)

    it("stores strings with NUL and every kind of valid UTF-8 exactly, in values and keys", function()
      local doc = { values = {}, keyed = {} }
      local strings = sample_strings()
      for i, s in ipairs(strings) do
        doc.values[i] = s
        doc.keyed[s] = i
      end
      local d, created = roundtrip(doc)
      for _, got in ipairs({ d, created }) do
        for i, s in ipairs(strings) do
          assert.are.equal(s, got.values[i])
          assert.are.equal(i, got.keyed[s])
        end
      end
    end)

    it("keeps keys that differ only after a NUL apart in stored documents", function()
      local d = roundtrip({ ["k\0a"] = 1, ["k\0b"] = 2, k = 3 })
      assert.are.equal(1, d["k\0a"])
      assert.are.equal(2, d["k\0b"])
      assert.are.equal(3, d.k)
    end)

    it("accepts a document 128 levels deep and refuses 129 with 400, writing nothing", function()
      local ok = { id = "d", pk = "p", a = nest(127) }
      assert(c:create(ok))
      local back = assert(c:read("d", "p"))
      local depth, cur = 1, back
      while cur.a do depth = depth + 1; cur = cur.a end
      assert.are.equal(128, depth)
      assert(c:delete("d", "p"))
      H.fails(400, c:create({ id = "d", pk = "p", a = nest(128) }))
      nothing_written()
    end)

    it("refuses NaN and infinities in documents with 400, writing nothing", function()
      H.fails(400, c:create({ id = "d", pk = "p", x = 0 / 0 }))
      H.fails(400, c:create({ id = "d", pk = "p", x = math.huge }))
      H.fails(400, c:create({ id = "d", pk = "p", x = { -math.huge } }))
      nothing_written()
    end)

    it("refuses cycles, non-string keys, mixed tables and holes with 400, writing nothing", function()
      local cyc = { id = "d", pk = "p" }
      cyc.me = cyc
      H.fails(400, c:create(cyc))
      H.fails(400, c:create({ id = "d", pk = "p", m = { [1.5] = 1 } }))
      H.fails(400, c:create({ id = "d", pk = "p", m = { [true] = 1 } }))
      H.fails(400, c:create({ id = "d", pk = "p", [7] = "seven" }))
      H.fails(400, c:create({ id = "d", pk = "p", m = { 1, 2, x = 3 } }))
      H.fails(400, c:create({ id = "d", pk = "p", m = { 1, nil, 3 } }))
      nothing_written()
    end)

    it("refuses invalid UTF-8 in values and keys with 400, writing nothing", function()
      for _, s in ipairs(INVALID_UTF8) do
        H.fails(400, c:create({ id = "d", pk = "p", v = s }))
        H.fails(400, c:create({ id = "d", pk = "p", nested = { [s] = 1 } }))
        H.fails(400, c:upsert({ id = "d", pk = "p", list = { "ok", s } }))
      end
      nothing_written()
    end)

    it("refuses functions, userdata and threads in documents with 400, writing nothing", function()
      H.fails(400, c:create({ id = "d", pk = "p", f = print }))
      H.fails(400, c:create({ id = "d", pk = "p", u = io.stdout }))
      H.fails(400, c:create({ id = "d", pk = "p", t = coroutine.create(print) }))
      nothing_written()
    end)

    it("reads back objects of every size, small, at and past the members gathered before a table is made", function()
      for _, n in ipairs({ 1, 2, 31, 32, 33, 64, 65, 1000 }) do
        local doc = { id = "d" .. n, pk = "p", nested = {} }
        for i = 1, n do
          doc["k" .. i] = i
          doc.nested["n" .. i] = { v = "x" .. i, deeper = { i, { w = i } } }
        end
        local d = assert(c:create(doc))
        local r = assert(c:read("d" .. n, "p"))
        for _, got in ipairs({ d, r }) do
          for i = 1, n do
            assert.are.equal(i, got["k" .. i])
            assert.are.equal("x" .. i, got.nested["n" .. i].v)
            assert.are.equal(i, got.nested["n" .. i].deeper[2].w)
          end
          local count = 0
          for _ in pairs(got.nested) do count = count + 1 end
          assert.are.equal(n, count)
        end
      end
    end)

    it("reads back strings with escapes anywhere, quotes and backslashes before the closing quote included", function()
      local values = { 'a"', 'a\\', '"', '\\', '\\"', 'x\n"y', 'tab\t', '\0end',
                       'caf\xc3\xa9 "quoted"', ('long '):rep(100) .. '\\' }
      local doc = { id = "e", pk = "p", list = values }
      for i, v in ipairs(values) do doc["k" .. v] = i end
      assert(c:create(doc))
      local r = assert(c:read("e", "p"))
      for i, v in ipairs(values) do
        assert.are.equal(v, r.list[i])
        assert.are.equal(i, r["k" .. v])
      end
      local rows = assert(c:query("SELECT * FROM c WHERE c.id = 'e'"))
      assert.are.same(values, rows[1].list)
    end)

    it("refuses the same faults in replace and upsert, leaving the stored version", function()
      local created = assert(c:create({ id = "d", pk = "p", v = 1 }))
      H.fails(400, c:replace({ id = "d", pk = "p", v = 0 / 0 }))
      H.fails(400, c:upsert({ id = "d", pk = "p", v = { [true] = 1 } }))
      H.fails(400, c:replace({ id = "d", pk = "p", v = "\xff" }))
      local d = assert(c:read("d", "p"))
      assert.are.equal(1, d.v)
      assert.are.equal(created._etag, d._etag)
    end)
  end)
end)
