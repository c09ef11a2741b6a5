-- Patch (docs/api.md, Items): the six operations with Cosmos semantics,
-- JSON-Pointer paths, the limits and failures, and nothing written when a
-- patch fails.  (Patch filters, being queries, are specified in
-- query_spec.lua.)
local regolith = require "regolith"
local H = require "helper"

local null = regolith.null
local ARRAY_MT = getmetatable(regolith.array())

describe("patch", function()
  local db, c, base
  before_each(function()
    db = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk" }))
    base = assert(c:create({
      id = "a", pk = "p", n = 1, f = 1.5, s = "text", list = { "x", "y", "z" },
      obj = { k = "v", inner = { deep = 1 } }, flag = true,
    }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  local function patch(ops, opts)
    return c:patch("a", "p", ops, opts)
  end

  -- asserts the patch fails with `status` and the item is unchanged
  local function refused(status, ops, opts)
    local msg = H.fails(status, patch(ops, opts))
    local now = assert(c:read("a", "p"))
    assert.are.equal(base._etag, now._etag)
    assert.are.same(base, now)
    return msg
  end

  it("returns the new document with status 200 and a new etag", function()
    local doc, info = patch({ { op = "set", path = "/n", value = 2 } })
    assert.are.equal(200, info.status)
    assert.is_number(info.charge)
    assert.are.equal(2, doc.n)
    assert.are_not.equal(base._etag, doc._etag)
    assert.are.equal(doc._etag, info.etag)
    assert.are.same(doc, assert(c:read("a", "p")))
  end)

  it("returns 404 for a missing item", function()
    H.fails(404, c:patch("nope", "p", { { op = "set", path = "/n", value = 2 } }))
    H.fails(404, c:patch("a", "q", { { op = "set", path = "/n", value = 2 } }))
    H.fails(404, c:read("nope", "p"))
  end)

  it("keeps what it does not touch exactly: NUL strings, big integers, floats, empty shapes", function()
    local doc = {
      id = "exact", pk = "p", ["k\0ey"] = "v\0al",
      -- the largest integers the host has: 64-bit ones under Lua 5.4, the
      -- exact doubles under LuaJIT
      big = H.lua54 and math.maxinteger or 2^53, neg = H.lua54 and math.mininteger or -2^53,
      odd = 9007199254740993, f = 0.1, tiny = 5e-324, huge = 1e300,
      ea = regolith.array(), eo = regolith.object(), u = "日本😀", n = 0,
    }
    assert(c:create(doc))
    assert(c:patch("exact", "p", { { op = "incr", path = "/n", value = 1 } }))
    local got = assert(c:read("exact", "p"))
    assert.are.equal("v\0al", got["k\0ey"])
    assert.are.equal(doc.big, got.big)
    assert.are.equal(doc.neg, got.neg)
    assert.are.equal(9007199254740993, got.odd)
    assert.are.equal(0.1, got.f)
    assert.are.equal(5e-324, got.tiny)
    assert.are.equal(1e300, got.huge)
    assert.are.equal("[]", regolith.json.encode(got.ea))
    assert.are.equal("{}", regolith.json.encode(got.eo))
    assert.are.equal("日本😀", got.u)
    assert.are.equal(1, got.n)
  end)

  describe("add", function()
    it("creates an object member, or overwrites one that exists", function()
      local doc = assert(patch({
        { op = "add", path = "/new", value = { 1, 2 } },
        { op = "add", path = "/s", value = "changed" },
        { op = "add", path = "/obj/inner/more", value = null },
      }))
      assert.are.same({ 1, 2 }, doc.new)
      assert.are.equal("changed", doc.s)
      assert.are.equal(null, doc.obj.inner.more)
      assert.are.equal(1, doc.obj.inner.deep)
    end)

    it("inserts into arrays at the front, at the end and with '-'", function()
      local doc = assert(patch({
        { op = "add", path = "/list/0", value = "first" },
        { op = "add", path = "/list/-", value = "last" },
        { op = "add", path = "/list/5", value = "after last" },
      }))
      assert.are.same({ "first", "x", "y", "z", "last", "after last" }, doc.list)
      assert.are.same(doc.list, assert(c:read("a", "p")).list)
    end)

    it("inserts into the middle of an array, shifting what follows", function()
      local doc = assert(patch({ { op = "add", path = "/list/1", value = "middle" } }))
      assert.are.same({ "x", "middle", "y", "z" }, doc.list)
      assert.are.same({ "x", "middle", "y", "z" }, assert(c:read("a", "p")).list)
    end)

    it("refuses an index past the end of an array with 400", function()
      refused(400, { { op = "add", path = "/list/4", value = "gap" } })
      refused(400, { { op = "add", path = "/list/99", value = "gap" } })
    end)

    it("refuses a path through a missing member or a scalar with 400", function()
      refused(400, { { op = "add", path = "/missing/x", value = 1 } })
      refused(400, { { op = "add", path = "/n/x", value = 1 } })
      refused(400, { { op = "add", path = "/s/0", value = 1 } })
      refused(400, { { op = "add", path = "/list/9/x", value = 1 } })
    end)

    it("refuses an array token that is not an index with 400", function()
      refused(400, { { op = "add", path = "/list/x", value = 1 } })
      refused(400, { { op = "add", path = "/list/01", value = 1 } })
      refused(400, { { op = "add", path = "/list/-1", value = 1 } })
    end)

    it("stores an empty array or object value with its shape", function()
      assert(patch({ { op = "add", path = "/ea", value = regolith.array() },
                     { op = "add", path = "/eo", value = regolith.object() } }))
      local doc = assert(c:read("a", "p"))
      assert.are.equal(ARRAY_MT, getmetatable(doc.ea))
      assert.are.equal("[]", regolith.json.encode(doc.ea))
      assert.are.equal("{}", regolith.json.encode(doc.eo))
    end)
  end)

  describe("set", function()
    it("sets object members, new or existing", function()
      local doc = assert(patch({
        { op = "set", path = "/n", value = 10 },
        { op = "set", path = "/fresh", value = { a = 1 } },
        { op = "set", path = "/obj/k", value = null },
      }))
      assert.are.equal(10, doc.n)
      assert.are.same({ a = 1 }, doc.fresh)
      assert.are.equal(null, doc.obj.k)
    end)

    it("overwrites an array element instead of inserting", function()
      local doc = assert(patch({ { op = "set", path = "/list/1", value = "Y" } }))
      assert.are.same({ "x", "Y", "z" }, doc.list)
    end)

    it("refuses an index past the end of an array with 400", function()
      refused(400, { { op = "set", path = "/list/5", value = "far" } })
    end)
  end)

  describe("replace", function()
    it("overwrites what is there, in objects and arrays", function()
      local doc = assert(patch({
        { op = "replace", path = "/s", value = 5 },
        { op = "replace", path = "/list/0", value = "X" },
        { op = "replace", path = "/obj/inner", value = "flat" },
      }))
      assert.are.equal(5, doc.s)
      assert.are.same({ "X", "y", "z" }, doc.list)
      assert.are.equal("flat", doc.obj.inner)
    end)

    it("refuses a missing path with 400", function()
      refused(400, { { op = "replace", path = "/missing", value = 1 } })
      refused(400, { { op = "replace", path = "/obj/missing", value = 1 } })
      refused(400, { { op = "replace", path = "/list/3", value = 1 } })
      refused(400, { { op = "replace", path = "/list/-", value = 1 } })
    end)
  end)

  describe("remove", function()
    it("removes object members and array elements", function()
      local doc = assert(patch({
        { op = "remove", path = "/s" },
        { op = "remove", path = "/list/0" },
        { op = "remove", path = "/obj/inner/deep" },
      }))
      assert.is_nil(doc.s)
      assert.are.same({ "y", "z" }, doc.list)
      local got = assert(c:read("a", "p"))
      assert.is_nil(got.s)
      assert.are.same({ "y", "z" }, got.list)
      assert.is_nil(got.obj.inner.deep)
    end)

    it("refuses a missing path with 400", function()
      refused(400, { { op = "remove", path = "/missing" } })
      refused(400, { { op = "remove", path = "/list/3" } })
      refused(400, { { op = "remove", path = "/list/-" } })
      refused(400, { { op = "remove", path = "/n/x" } })
    end)
  end)

  describe("incr", function()
    it("adds to integers keeping them integers, and to floats", function()
      local doc = assert(patch({
        { op = "incr", path = "/n", value = 41 },
        { op = "incr", path = "/f", value = 1 },
        { op = "incr", path = "/obj/inner/deep", value = -3 },
      }))
      assert.are.equal(42, doc.n)
      assert.is_true(H.integer(doc.n))
      assert.are.equal(2.5, doc.f)
      assert.are.equal(-2, doc.obj.inner.deep)
      local got = assert(c:read("a", "p"))
      assert.is_true(H.integer(got.n))
      assert.are.equal(42, got.n)
    end)

    it("adds a float to an integer", function()
      local doc = assert(patch({ { op = "incr", path = "/n", value = 0.25 } }))
      assert.are.equal(1.25, doc.n)
    end)

    it("keeps big integers exact", function()
      if not H.lua54 then pending("Lua 5.4 only: LuaJIT's numbers are doubles, exact to 2^53") end
      assert(patch({ { op = "set", path = "/big", value = math.maxinteger - 5 } }))
      local doc = assert(patch({ { op = "incr", path = "/big", value = 5 } }))
      assert.are.equal(math.maxinteger, doc.big)
      assert.are.equal(math.maxinteger, assert(c:read("a", "p")).big)
      assert(patch({ { op = "set", path = "/small", value = math.mininteger + 1 } }))
      assert.are.equal(math.mininteger,
        assert(patch({ { op = "incr", path = "/small", value = -1 } })).small)
    end)

    it("creates a missing member with the value", function()
      local doc = assert(patch({
        { op = "incr", path = "/count", value = 5 },
        { op = "incr", path = "/obj/hits", value = 1.5 },
      }))
      assert.are.equal(5, doc.count)
      assert.is_true(H.integer(doc.count))
      assert.are.equal(1.5, doc.obj.hits)
    end)

    it("refuses a non-number target or value with 400", function()
      refused(400, { { op = "incr", path = "/s", value = 1 } })
      refused(400, { { op = "incr", path = "/flag", value = 1 } })
      refused(400, { { op = "incr", path = "/list", value = 1 } })
      refused(400, { { op = "incr", path = "/obj", value = 1 } })
      refused(400, { { op = "incr", path = "/n", value = "1" } })
      refused(400, { { op = "incr", path = "/n", value = true } })
      refused(400, { { op = "incr", path = "/n", value = null } })
    end)

    it("refuses a path through a missing member with 400", function()
      refused(400, { { op = "incr", path = "/missing/count", value = 1 } })
    end)
  end)

  describe("move", function()
    it("moves a value to a new member, or over an existing one", function()
      local doc = assert(patch({
        { op = "move", from = "/s", path = "/moved" },
        { op = "move", from = "/obj/inner", path = "/n" },
      }))
      assert.is_nil(doc.s)
      assert.are.equal("text", doc.moved)
      assert.are.same({ deep = 1 }, doc.n)
      assert.is_nil(doc.obj.inner)
    end)

    it("moves into and within arrays", function()
      local doc = assert(patch({
        { op = "move", from = "/list/0", path = "/list/-" },
        { op = "move", from = "/s", path = "/list/0" },
      }))
      assert.are.same({ "text", "y", "z", "x" }, doc.list)
    end)

    it("moves a value into the middle of an array", function()
      local doc = assert(patch({ { op = "move", from = "/s", path = "/list/2" } }))
      assert.are.same({ "x", "y", "text", "z" }, doc.list)
      assert.is_nil(doc.s)
    end)

    it("refuses a missing from path with 400", function()
      refused(400, { { op = "move", from = "/missing", path = "/x" } })
      refused(400, { { op = "move", from = "/list/7", path = "/x" } })
    end)

    it("refuses a move into its own child with 400", function()
      refused(400, { { op = "move", from = "/obj", path = "/obj/inner/obj" } })
    end)

    it("refuses a move without from with 400", function()
      refused(400, { { op = "move", path = "/x" } })
    end)
  end)

  describe("paths", function()
    it("unescapes ~1 as '/' and ~0 as '~'", function()
      assert(patch({ { op = "set", path = "/a~1b", value = 1 },
                     { op = "set", path = "/m~0n", value = 2 },
                     { op = "set", path = "/~01", value = 3 } }))
      local doc = assert(c:read("a", "p"))
      assert.are.equal(1, doc["a/b"])
      assert.are.equal(2, doc["m~n"])
      assert.are.equal(3, doc["~1"])
      doc = assert(patch({ { op = "incr", path = "/a~1b", value = 1 },
                           { op = "remove", path = "/m~0n" } }))
      assert.are.equal(2, doc["a/b"])
      assert.is_nil(doc["m~n"])
    end)

    it("refuses bad escapes and paths not starting with '/' with 400", function()
      refused(400, { { op = "set", path = "/a~2", value = 1 } })
      refused(400, { { op = "set", path = "/a~", value = 1 } })
      refused(400, { { op = "set", path = "n", value = 1 } })
      refused(400, { { op = "set", path = "", value = 1 } })
    end)

    it("reaches keys holding NUL and any UTF-8", function()
      assert(patch({ { op = "set", path = "/k\0ey", value = 1 },
                     { op = "set", path = "/日本", value = 2 } }))
      local doc = assert(c:read("a", "p"))
      assert.are.equal(1, doc["k\0ey"])
      assert.are.equal(2, doc["日本"])
    end)
  end)

  describe("op lists", function()
    it("applies operations in order, each seeing the ones before", function()
      local doc = assert(patch({
        { op = "add", path = "/x", value = 1 },
        { op = "incr", path = "/x", value = 1 },
        { op = "remove", path = "/s" },
        { op = "add", path = "/s", value = "again" },
        { op = "move", from = "/x", path = "/y" },
      }))
      assert.is_nil(doc.x)
      assert.are.equal(2, doc.y)
      assert.are.equal("again", doc.s)
    end)

    it("accepts 10 operations and refuses 11 with 400", function()
      local ten, eleven = {}, {}
      for i = 1, 10 do ten[i] = { op = "incr", path = "/n", value = 1 } end
      for i = 1, 11 do eleven[i] = { op = "incr", path = "/n", value = 1 } end
      refused(400, eleven)
      assert.are.equal(11, assert(patch(ten)).n)
    end)

    it("refuses malformed op lists with 400", function()
      refused(400, {})
      refused(400, "set /n 1")
      refused(400, nil)
      refused(400, { "set" })
      refused(400, { { op = "append", path = "/n", value = 1 } })
      refused(400, { { op = "SET", path = "/n", value = 1 } })
      refused(400, { { path = "/n", value = 1 } })
      refused(400, { { op = "set", value = 1 } })
      refused(400, { { op = "set", path = 5, value = 1 } })
      refused(400, { { op = "set", path = "/n" } })
      refused(400, { { op = "add", path = "/n" } })
      refused(400, { { op = "replace", path = "/n" } })
      refused(400, { { op = "incr", path = "/n" } })
      refused(400, { { op = "set", path = "/n", valeu = 1 } })
      refused(400, { { op = "set", path = "/n", value = 1, filter = "x" } })
    end)

    it("refuses values JSON cannot carry with 400", function()
      refused(400, { { op = "set", path = "/x", value = 0 / 0 } })
      refused(400, { { op = "set", path = "/x", value = math.huge } })
      refused(400, { { op = "set", path = "/x", value = print } })
      refused(400, { { op = "set", path = "/x", value = "\xff" } })
      refused(400, { { op = "set", path = "/x", value = { 1, nil, 3 } } })
    end)

    it("writes nothing when a later operation fails", function()
      refused(400, {
        { op = "set", path = "/n", value = 100 },
        { op = "add", path = "/list/-", value = "w" },
        { op = "remove", path = "/s" },
        { op = "remove", path = "/does/not/exist" },
      })
    end)
  end)

  describe("identity", function()
    it("refuses to change or remove the id with 400", function()
      refused(400, { { op = "set", path = "/id", value = "b" } })
      refused(400, { { op = "replace", path = "/id", value = "b" } })
      refused(400, { { op = "remove", path = "/id" } })
      refused(400, { { op = "move", from = "/id", path = "/old" } })
      refused(400, { { op = "move", from = "/s", path = "/id" } })
      H.fails(404, c:read("b", "p"))
    end)

    it("refuses to change or remove the partition key with 400", function()
      refused(400, { { op = "set", path = "/pk", value = "q" } })
      refused(400, { { op = "remove", path = "/pk" } })
      refused(400, { { op = "move", from = "/pk", path = "/old" } })
      refused(400, { { op = "set", path = "/pk", value = { "p" } } })
      H.fails(404, c:read("a", "q"))
    end)

    it("refuses to change any level of a hierarchical partition key with 400", function()
      local h = assert(db:create_container("h", { partition_key = { "/t", "/u/id" } }))
      local orig = assert(h:create({ id = "a", t = "x", u = { id = "y", name = "n" } }))
      H.fails(400, h:patch("a", { "x", "y" }, { { op = "set", path = "/t", value = "z" } }))
      H.fails(400, h:patch("a", { "x", "y" }, { { op = "set", path = "/u/id", value = "z" } }))
      H.fails(400, h:patch("a", { "x", "y" }, { { op = "remove", path = "/u" } }))
      assert.are.equal(orig._etag, assert(h:read("a", { "x", "y" }))._etag)
      local doc = assert(h:patch("a", { "x", "y" }, { { op = "set", path = "/u/name", value = "m" } }))
      assert.are.equal("m", doc.u.name)
    end)
  end)

  describe("if_match", function()
    it("applies with the current etag and refuses a stale one with 412", function()
      local doc = assert(patch({ { op = "incr", path = "/n", value = 1 } }, { if_match = base._etag }))
      assert.are.equal(2, doc.n)
      H.fails(412, patch({ { op = "incr", path = "/n", value = 1 } }, { if_match = base._etag }))
      local got = assert(c:read("a", "p"))
      assert.are.equal(2, got.n)
      assert.are.equal(doc._etag, got._etag)
    end)
  end)

  describe("limits", function()
    it("refuses a patch that would nest the document deeper than 128 levels with 400", function()
      local chain = {}
      local cur = chain
      for _ = 1, 125 do cur.a = {}; cur = cur.a end
      assert(c:replace({ id = "a", pk = "p", a = chain }))
      local before = assert(c:read("a", "p"))
      local path = "/" .. ("a/"):rep(126) .. "b"
      H.fails(400, patch({ { op = "add", path = path, value = { z = { 1 } } } }))
      local after, msg = c:read("a", "p")
      assert(after, msg)
      assert.are.equal(before._etag, after._etag)
    end)
  end)
end)
