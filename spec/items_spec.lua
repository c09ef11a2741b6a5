-- Items (docs/api.md, Items; docs/charges.md): create, read, replace,
-- upsert, delete, read_many; statuses, etags, system properties, ids,
-- partition keys and charges.
local regolith = require "regolith"
local H = require "helper"

local null = regolith.null

local function raises(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error to be raised")
  return err
end

describe("items", function()
  local db, c
  before_each(function()
    db = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("create and read", function()
    it("creates with status 201 and returns the stored document with its etag", function()
      local doc, info = c:create({ id = "a", pk = "p", n = 1, tags = { "x", "y" } })
      assert.are.equal(201, info.status)
      assert.is_number(info.charge)
      assert.are.equal("a", doc.id)
      assert.are.equal(1, doc.n)
      assert.are.same({ "x", "y" }, doc.tags)
      assert.is_string(doc._etag)
      assert.are.equal(doc._etag, info.etag)
      local got, rinfo = c:read("a", "p")
      assert.are.equal(200, rinfo.status)
      assert.are.same(doc, got)
    end)

    it("refuses to create an existing item with 409 and keeps the first version", function()
      local first = assert(c:create({ id = "a", pk = "p", v = 1 }))
      H.fails(409, c:create({ id = "a", pk = "p", v = 2 }))
      local got = assert(c:read("a", "p"))
      assert.are.equal(1, got.v)
      assert.are.equal(first._etag, got._etag)
    end)

    it("returns 404 for a missing item, and for an item read under another partition key", function()
      H.fails(404, c:read("nope", "p"))
      assert(c:create({ id = "a", pk = "p" }))
      H.fails(404, c:read("a", "q"))
      H.fails(404, c:read("A", "p"))
    end)

    it("answers 304 to if_none_match with the current etag, and the document otherwise", function()
      local doc = assert(c:create({ id = "a", pk = "p", v = 1 }))
      local msg = H.fails(304, c:read("a", "p", { if_none_match = doc._etag }))
      assert.is_string(msg)
      local newer = assert(c:replace({ id = "a", pk = "p", v = 2 }))
      local got, info = c:read("a", "p", { if_none_match = doc._etag })
      assert.are.equal(200, info.status)
      assert.are.equal(2, got.v)
      H.fails(304, c:read("a", "p", { if_none_match = newer._etag }))
    end)

    it("refuses documents that are not objects with 400", function()
      H.fails(400, c:create("text"))
      H.fails(400, c:create(42))
      H.fails(400, c:create(nil))
      H.fails(400, c:create(regolith.array({ 1, 2 })))
      H.fails(400, c:create({ "id", "pk" }))
      H.fails(400, c:upsert(true))
      H.fails(400, c:replace("x"))
      assert.are.equal(0, db:stats().items)
    end)

    it("raises on unknown or mistyped options", function()
      raises(c.create, c, { id = "a", pk = "p" }, { if_mach = "x" })
      raises(c.create, c, { id = "a", pk = "p" }, { if_match = 42 })
      raises(c.create, c, { id = "a", pk = "p" }, { filter = "FROM c" })
      raises(c.upsert, c, { id = "a", pk = "p" }, { filter = "FROM c" })
      raises(c.replace, c, { id = "a", pk = "p" }, { bogus = true })
      raises(c.delete, c, "a", "p", { if_none_match = "x" })
      raises(c.read, c, "a", "p", { if_match = "x" })
      raises(c.read, c, "a", "p", { if_none_match = 7 })
      raises(c.create, c, { id = "a", pk = "p" }, "opts")
      assert.are.equal(0, db:stats().items)
    end)
  end)

  describe("replace, upsert and delete", function()
    it("replaces the whole document with status 200, and 404 when it is missing", function()
      assert(c:create({ id = "a", pk = "p", keep = 1, drop = 2 }))
      local doc, info = c:replace({ id = "a", pk = "p", keep = 10 })
      assert.are.equal(200, info.status)
      assert.are.equal(10, doc.keep)
      local got = assert(c:read("a", "p"))
      assert.are.equal(10, got.keep)
      assert.is_nil(got.drop)
      H.fails(404, c:replace({ id = "missing", pk = "p" }))
      H.fails(404, c:read("missing", "p"))
    end)

    it("cannot move an item to another partition key by replace: that item is 404", function()
      assert(c:create({ id = "a", pk = "p" }))
      H.fails(404, c:replace({ id = "a", pk = "q" }))
      assert(c:read("a", "p"))
      H.fails(404, c:read("a", "q"))
    end)

    it("upserts with 201 when it creates and 200 when it replaces", function()
      local d1, i1 = c:upsert({ id = "a", pk = "p", v = 1 })
      assert.are.equal(201, i1.status)
      assert.are.equal(1, d1.v)
      local d2, i2 = c:upsert({ id = "a", pk = "p", v = 2 })
      assert.are.equal(200, i2.status)
      assert.are.equal(2, d2.v)
      assert.are.equal(2, assert(c:read("a", "p")).v)
      assert.are.equal(1, db:stats().items)
    end)

    it("deletes with true and status 204, then the item is 404", function()
      assert(c:create({ id = "a", pk = "p" }))
      local ok, info = c:delete("a", "p")
      assert.is_true(ok)
      assert.are.equal(204, info.status)
      assert.is_number(info.charge)
      H.fails(404, c:read("a", "p"))
      H.fails(404, c:delete("a", "p"))
      assert.are.equal(0, db:stats().items)
      assert(c:create({ id = "a", pk = "p" }))
    end)
  end)

  describe("optimistic concurrency", function()
    it("honours if_match on replace, and refuses a stale etag with 412 changing nothing", function()
      local v1 = assert(c:create({ id = "a", pk = "p", v = 1 }))
      local v2 = assert(c:replace({ id = "a", pk = "p", v = 2 }, { if_match = v1._etag }))
      H.fails(412, c:replace({ id = "a", pk = "p", v = 3 }, { if_match = v1._etag }))
      local got = assert(c:read("a", "p"))
      assert.are.equal(2, got.v)
      assert.are.equal(v2._etag, got._etag)
    end)

    it("honours if_match on delete, upsert and patch", function()
      local v1 = assert(c:create({ id = "a", pk = "p", v = 1 }))
      local v2 = assert(c:upsert({ id = "a", pk = "p", v = 2 }, { if_match = v1._etag }))
      H.fails(412, c:upsert({ id = "a", pk = "p", v = 9 }, { if_match = v1._etag }))
      H.fails(412, c:patch("a", "p", { { op = "set", path = "/v", value = 9 } },
                           { if_match = v1._etag }))
      H.fails(412, c:delete("a", "p", { if_match = v1._etag }))
      local got = assert(c:read("a", "p"))
      assert.are.equal(2, got.v)
      assert.are.equal(v2._etag, got._etag)
      local v3 = assert(c:patch("a", "p", { { op = "set", path = "/v", value = 3 } },
                                { if_match = v2._etag }))
      assert.are.equal(3, v3.v)
      assert(c:delete("a", "p", { if_match = v3._etag }))
      H.fails(404, c:read("a", "p"))
    end)

    it("lets only the first of two writers holding the same version replace it", function()
      assert(c:create({ id = "counter", pk = "p", n = 0 }))
      local seen_by_a = assert(c:read("counter", "p"))
      local seen_by_b = assert(c:read("counter", "p"))
      assert.are.equal(seen_by_a._etag, seen_by_b._etag)
      seen_by_a.n = seen_by_a.n + 1
      assert(c:replace(seen_by_a, { if_match = seen_by_a._etag }))
      seen_by_b.n = seen_by_b.n + 100
      H.fails(412, c:replace(seen_by_b, { if_match = seen_by_b._etag }))
      local fresh = assert(c:read("counter", "p"))
      assert.are.equal(1, fresh.n)
      fresh.n = fresh.n + 100
      assert(c:replace(fresh, { if_match = fresh._etag }))
      assert.are.equal(101, assert(c:read("counter", "p")).n)
    end)
  end)

  describe("system properties", function()
    it("changes _etag on every write", function()
      local seen = {}
      local function note(doc, info)
        assert.is_string(doc._etag)
        assert.is_nil(seen[doc._etag], "etag reused")
        assert.are.equal(doc._etag, info.etag)
        seen[doc._etag] = true
      end
      note(c:create({ id = "a", pk = "p", v = 1 }))
      note(c:replace({ id = "a", pk = "p", v = 1 }))
      note(c:upsert({ id = "a", pk = "p", v = 1 }))
      note(c:patch("a", "p", { { op = "set", path = "/v", value = 1 } }))
      note(c:create({ id = "b", pk = "p", v = 1 }))
      note(c:upsert({ id = "c", pk = "q", v = 1 }))
    end)

    it("stamps _ts in seconds and _lsn increasing with every write", function()
      local before = os.time()
      local a = assert(c:create({ id = "a", pk = "p" }))
      local b = assert(c:create({ id = "b", pk = "q" }))
      local a2 = assert(c:replace({ id = "a", pk = "p", v = 2 }))
      local a3 = assert(c:patch("a", "p", { { op = "incr", path = "/v", value = 1 } }))
      -- os.time() reads the coarse clock, which may lag the one a stamp
      -- comes from (a cluster's: the server's TIME) by a tick: a second
      -- may have begun for one and not yet for the other
      local after = os.time() + 1
      for _, d in ipairs({ a, b, a2, a3 }) do
        assert.is_true(H.integer(d._ts))
        assert.is_true(d._ts >= before and d._ts <= after,
          ("_ts %s outside %d..%d"):format(tostring(d._ts), before, after))
        assert.is_true(H.integer(d._lsn))
      end
      assert.is_true(a._lsn < b._lsn)
      assert.is_true(b._lsn < a2._lsn)
      assert.is_true(a2._lsn < a3._lsn)
      assert.are.equal(a3._lsn, assert(c:read("a", "p"))._lsn)
    end)

    it("ignores incoming _etag, _ts and _lsn", function()
      local d = assert(c:create({ id = "a", pk = "p", _etag = "mine", _ts = 1, _lsn = 999999 }))
      assert.are_not.equal("mine", d._etag)
      assert.are_not.equal(1, d._ts)
      assert.are_not.equal(999999, d._lsn)
      local got = assert(c:read("a", "p"))
      assert.are.equal(d._etag, got._etag)
      assert.are.equal(d._ts, got._ts)
      assert.are.equal(d._lsn, got._lsn)
      local r = assert(c:replace({ id = "a", pk = "p", _etag = d._etag, _ts = 5, _lsn = 5 }))
      assert.are_not.equal(d._etag, r._etag)
      assert.are_not.equal(5, r._lsn)
      assert.is_true(r._ts > 5)
    end)

    it("keeps fields named like system properties below the top level", function()
      assert(c:create({ id = "a", pk = "p", meta = { _etag = "e", _ts = 1, _lsn = 2 } }))
      assert.are.same({ _etag = "e", _ts = 1, _lsn = 2 }, assert(c:read("a", "p")).meta)
    end)

    it("ignores patches of the system properties", function()
      local d = assert(c:create({ id = "a", pk = "p" }))
      local p = assert(c:patch("a", "p", { { op = "set", path = "/_etag", value = "mine" },
                                           { op = "set", path = "/_lsn", value = 1 },
                                           { op = "remove", path = "/_ts" } }))
      assert.are_not.equal("mine", p._etag)
      assert.are_not.equal(d._etag, p._etag)
      assert.is_true(p._lsn > d._lsn)
      assert.is_number(p._ts)
      assert.are.same(p, assert(c:read("a", "p")))
    end)
  end)

  describe("ids", function()
    it("refuses empty, too long and forbidden-character ids with 400 and writes nothing", function()
      local bad = { "", ("i"):rep(1024), "a/b", "a\\b", "a?b", "a#b", "a\0b", "\0",
                    "\xff", "bad\xe2\x82" }
      for _, id in ipairs(bad) do
        H.fails(400, c:create({ id = id, pk = "p" }))
        H.fails(400, c:upsert({ id = id, pk = "p" }))
        H.fails(400, c:replace({ id = id, pk = "p" }))
        H.fails(400, c:read(id, "p"))
        H.fails(400, c:delete(id, "p"))
        H.fails(400, c:patch(id, "p", { { op = "set", path = "/x", value = 1 } }))
      end
      assert.are.equal(0, db:stats().items)
    end)

    it("refuses a missing or non-string id with 400", function()
      H.fails(400, c:create({ pk = "p" }))
      H.fails(400, c:create({ id = 42, pk = "p" }))
      H.fails(400, c:create({ id = true, pk = "p" }))
      H.fails(400, c:create({ id = { "a" }, pk = "p" }))
      H.fails(400, c:create({ id = null, pk = "p" }))
      H.fails(400, c:read(42, "p"))
      H.fails(400, c:read(nil, "p"))
      H.fails(400, c:delete({}, "p"))
      H.fails(400, c:patch(7, "p", { { op = "set", path = "/x", value = 1 } }))
      assert.are.equal(0, db:stats().items)
    end)

    it("works with ids of 300 and 1023 bytes through every call", function()
      for _, id in ipairs({ ("m"):rep(300), ("L"):rep(1023), ("é"):rep(511) .. "x" }) do
        assert.is_true(#id >= 300 and #id <= 1023)
        local created, info = c:create({ id = id, pk = "p", v = 1 })
        assert(created, info)
        assert.are.equal(id, created.id)
        assert.are.equal(id, assert(c:read(id, "p")).id)
        assert(c:replace({ id = id, pk = "p", v = 2 }))
        assert.are.equal(2, assert(c:read(id, "p")).v)
        assert(c:upsert({ id = id, pk = "p", v = 3 }))
        assert(c:patch(id, "p", { { op = "incr", path = "/v", value = 1 } }))
        local docs = assert(c:read_many({ { id, "p" } }))
        assert.are.equal(1, #docs)
        assert.are.equal(4, docs[1].v)
        H.fails(409, c:create({ id = id, pk = "p" }))
        local ok, dinfo = c:delete(id, "p")
        assert.is_true(ok)
        assert.are.equal(204, dinfo.status)
        H.fails(404, c:read(id, "p"))
      end
      assert.are.equal(0, db:stats().items)
    end)

    it("keeps long ids that share a long beginning apart", function()
      local base = ("s"):rep(600)
      local ids = { base .. "1", base .. "2", base, base .. "11" }
      for i, id in ipairs(ids) do assert(c:create({ id = id, pk = "p", i = i })) end
      for i, id in ipairs(ids) do
        local d = assert(c:read(id, "p"))
        assert.are.equal(i, d.i)
        assert.are.equal(id, d.id)
      end
      assert(c:delete(ids[1], "p"))
      H.fails(404, c:read(ids[1], "p"))
      for i = 2, 4 do assert.are.equal(i, assert(c:read(ids[i], "p")).i) end
      H.fails(404, c:read(base .. "3", "p"))
    end)

    it("keeps ids around the length where keys switch to a digest apart", function()
      local ids = {}
      for _, n in ipairs({ 179, 180, 181, 199, 200, 201, 202, 260 }) do
        ids[#ids + 1] = ("d"):rep(n)
        ids[#ids + 1] = ("d"):rep(n - 1) .. "e"
      end
      for i, id in ipairs(ids) do assert(c:create({ id = id, pk = "p", i = i })) end
      for i, id in ipairs(ids) do assert.are.equal(i, assert(c:read(id, "p")).i) end
      assert.are.equal(#ids, db:stats().items)
    end)

    it("accepts ids in any valid UTF-8", function()
      for _, id in ipairs({ "café", "日本", "😀", "a b", "x.y-z_1", "'\"" }) do
        assert(c:create({ id = id, pk = "p" }))
        assert.are.equal(id, assert(c:read(id, "p")).id)
      end
    end)
  end)

  describe("partition keys", function()
    it("takes string, number, boolean and null values", function()
      local values = { "s", "", 42, -1.5, 0, true, false, null }
      for i, v in ipairs(values) do
        assert(c:create({ id = "item", pk = v, i = i }))
      end
      for i, v in ipairs(values) do
        assert.are.equal(i, assert(c:read("item", v)).i)
      end
      assert.are.equal(#values, db:stats().items)
    end)

    it("tells values of different types apart and equal numbers alike", function()
      assert(c:create({ id = "a", pk = 1 }))
      H.fails(404, c:read("a", "1"))
      H.fails(404, c:read("a", true))
      assert(c:read("a", 1.0))
      assert(c:create({ id = "b", pk = false }))
      H.fails(404, c:read("b", null))
      H.fails(404, c:read("b", 0))
    end)

    it("keeps integer partition key values beyond 2^53 apart", function()
      if not H.lua54 then pending("Lua 5.4 only: LuaJIT's numbers are doubles, exact to 2^53") end
      local a, b = 1234567890123456789, 1234567890123456788
      assert(c:create({ id = "x", pk = a, who = "a" }))
      local doc, msg = c:create({ id = "x", pk = b, who = "b" })
      assert(doc, msg)
      assert.are.equal("a", assert(c:read("x", a)).who)
      local got = assert(c:read("x", b))
      assert.are.equal("b", got.who)
      assert.are.equal(b, got.pk)
      H.fails(404, c:read("x", 9007199254740993))
    end)

    it("treats the same id in two partitions as two items", function()
      assert(c:create({ id = "x", pk = "one", v = 1 }))
      assert(c:create({ id = "x", pk = "two", v = 2 }))
      assert.are.equal(1, assert(c:read("x", "one")).v)
      assert.are.equal(2, assert(c:read("x", "two")).v)
      assert(c:delete("x", "one"))
      H.fails(404, c:read("x", "one"))
      assert.are.equal(2, assert(c:read("x", "two")).v)
    end)

    it("refuses a document without its partition key, or with one that is not a scalar, with 400", function()
      H.fails(400, c:create({ id = "a" }))
      H.fails(400, c:upsert({ id = "a" }))
      H.fails(400, c:replace({ id = "a" }))
      H.fails(400, c:create({ id = "a", pk = { "x" } }))
      H.fails(400, c:create({ id = "a", pk = { k = "x" } }))
      H.fails(400, c:create({ id = "a", pk = regolith.object() }))
      assert.are.equal(0, db:stats().items)
    end)

    it("refuses partition key arguments that are not scalar values with 400", function()
      assert(c:create({ id = "a", pk = "p" }))
      H.fails(400, c:read("a", nil))
      H.fails(400, c:read("a", { "p" }))
      H.fails(400, c:read("a", print))
      H.fails(400, c:read("a", 0 / 0))
      H.fails(400, c:read("a", math.huge))
      H.fails(400, c:read("a", "\xff"))
      H.fails(400, c:delete("a", { "p" }))
      H.fails(400, c:patch("a", nil, { { op = "set", path = "/x", value = 1 } }))
      assert(c:read("a", "p"))
    end)

    it("reads a partition key at a nested path", function()
      local n = assert(db:create_container("nested", { partition_key = "/owner/id" }))
      assert(n:create({ id = "a", owner = { id = "u1" } }))
      assert(n:read("a", "u1"))
      H.fails(400, n:create({ id = "b", owner = "u1" }))
      H.fails(400, n:create({ id = "b", owner = {} }))
    end)

    it("works with long partition key strings, and keeps long ones sharing a beginning apart", function()
      local long = ("k"):rep(2000)
      local other = ("k"):rep(1999) .. "j"
      assert(c:create({ id = "a", pk = long, v = 1 }))
      assert(c:create({ id = "a", pk = other, v = 2 }))
      assert(c:create({ id = "a", pk = long .. "k", v = 3 }))
      assert.are.equal(1, assert(c:read("a", long)).v)
      assert.are.equal(2, assert(c:read("a", other)).v)
      assert.are.equal(3, assert(c:read("a", long .. "k")).v)
      assert(c:replace({ id = "a", pk = long, v = 10 }))
      assert.are.equal(10, assert(c:read("a", long)).v)
      assert(c:delete("a", long))
      H.fails(404, c:read("a", long))
      assert.are.equal(2, assert(c:read("a", other)).v)
    end)

    it("carries NUL and any valid UTF-8 in partition key values", function()
      local values = { "a\0b", "a", "a\0", "\0", "日本", ("\0x"):rep(100) }
      for i, v in ipairs(values) do assert(c:create({ id = "i", pk = v, i = i })) end
      for i, v in ipairs(values) do
        local d = assert(c:read("i", v))
        assert.are.equal(i, d.i)
        assert.are.equal(v, d.pk)
      end
    end)

    describe("hierarchical", function()
      local h
      before_each(function()
        h = assert(db:create_container("h", { partition_key = { "/tenant", "/user", "/day" } }))
      end)

      it("reads, writes and deletes with an array of values", function()
        assert(h:create({ id = "a", tenant = "t1", user = 7, day = true, v = 1 }))
        assert.are.equal(1, assert(h:read("a", { "t1", 7, true })).v)
        assert(h:replace({ id = "a", tenant = "t1", user = 7, day = true, v = 2 }))
        assert(h:patch("a", { "t1", 7, true }, { { op = "incr", path = "/v", value = 1 } }))
        assert.are.equal(3, assert(h:read("a", { "t1", 7, true })).v)
        local docs = assert(h:read_many({ { "a", { "t1", 7, true } } }))
        assert.are.equal(1, #docs)
        assert(h:delete("a", { "t1", 7, true }))
        H.fails(404, h:read("a", { "t1", 7, true }))
      end)

      it("keeps items differing at any level apart", function()
        assert(h:create({ id = "a", tenant = "t", user = "u", day = 1, v = 1 }))
        assert(h:create({ id = "a", tenant = "t", user = "u", day = 2, v = 2 }))
        assert(h:create({ id = "a", tenant = "t", user = "v", day = 1, v = 3 }))
        assert(h:create({ id = "a", tenant = "s", user = "u", day = 1, v = 4 }))
        assert.are.equal(1, assert(h:read("a", { "t", "u", 1 })).v)
        assert.are.equal(2, assert(h:read("a", { "t", "u", 2 })).v)
        assert.are.equal(3, assert(h:read("a", { "t", "v", 1 })).v)
        assert.are.equal(4, assert(h:read("a", { "s", "u", 1 })).v)
      end)

      it("refuses a document missing a level with 400", function()
        H.fails(400, h:create({ id = "a", tenant = "t", user = "u" }))
        H.fails(400, h:create({ id = "a", tenant = "t", day = 1 }))
        H.fails(400, h:upsert({ id = "a", user = "u", day = 1 }))
        assert.are.equal(0, db:stats().items)
      end)

      it("refuses a key argument that is not an array of every level with 400", function()
        assert(h:create({ id = "a", tenant = "t", user = "u", day = 1 }))
        H.fails(400, h:read("a", "t"))
        H.fails(400, h:read("a", { "t", "u" }))
        H.fails(400, h:read("a", { "t", "u", 1, "extra" }))
        H.fails(400, h:read("a", { "t", { "u" }, 1 }))
        H.fails(400, h:delete("a", { "t" }))
        assert(h:read("a", { "t", "u", 1 }))
      end)

      it("takes long strings at every level with a long id", function()
        local t, u, d = ("t"):rep(2000), ("u"):rep(2000), ("d"):rep(2000)
        local id = ("i"):rep(1023)
        assert(h:create({ id = id, tenant = t, user = u, day = d, v = 1 }))
        assert(h:create({ id = id, tenant = t, user = u, day = d .. "x", v = 2 }))
        assert.are.equal(1, assert(h:read(id, { t, u, d })).v)
        assert.are.equal(2, assert(h:read(id, { t, u, d .. "x" })).v)
        assert(h:delete(id, { t, u, d }))
        H.fails(404, h:read(id, { t, u, d }))
      end)
    end)
  end)

  describe("read_many", function()
    it("returns the items found in the order asked, leaving missing ones out", function()
      for i = 1, 5 do assert(c:create({ id = "i" .. i, pk = "p" .. i, n = i })) end
      local docs, info = c:read_many({
        { "i3", "p3" }, { "missing", "p1" }, { "i1", "p1" }, { "i5", "wrong" }, { "i5", "p5" },
      })
      assert.are.equal(200, info.status)
      assert.is_number(info.charge)
      assert.are.equal(3, #docs)
      assert.are.equal(3, docs[1].n)
      assert.are.equal(1, docs[2].n)
      assert.are.equal(5, docs[3].n)
    end)

    it("returns an empty list for an empty request", function()
      local docs, info = c:read_many({})
      assert.are.same({}, docs)
      assert.is_number(info.charge)
    end)

    it("refuses a malformed request with 400", function()
      H.fails(400, c:read_many("i1"))
      H.fails(400, c:read_many({ "i1" }))
      H.fails(400, c:read_many({ { 1, "p" } }))
      H.fails(400, c:read_many({ { "", "p" } }))
      H.fails(400, c:read_many({ { "a" } }))
    end)
  end)

  describe("charges", function()
    local function small() return { id = "s", pk = "p", n = 1 } end

    it("reports info.charge on every call", function()
      local calls = {
        { c:create(small()) },
        { c:read("s", "p") },
        { c:replace(small()) },
        { c:upsert(small()) },
        { c:patch("s", "p", { { op = "incr", path = "/n", value = 1 } }) },
        { c:read_many({ { "s", "p" } }) },
        { c:batch("p", { { op = "read", id = "s" } }) },
        { c:delete("s", "p") },
      }
      for i, r in ipairs(calls) do
        assert(r[1], "call " .. i .. " failed: " .. tostring(r[2]))
        assert.is_number(r[2].charge)
        assert.is_true(r[2].charge > 0, "call " .. i .. " is free")
      end
    end)

    it("charges 1 RU for a point read of an item of 1 KB or less", function()
      assert(c:create(small()))
      local _, info = c:read("s", "p")
      assert.are.equal(1, info.charge)
      assert(c:create({ id = "k", pk = "p", s = ("x"):rep(850) }))
      _, info = c:read("k", "p")
      assert.are.equal(1, info.charge)
    end)

    it("charges about 5 to 6 RU for a small write", function()
      local _, info = c:create(small())
      assert.is_true(info.charge >= 5 and info.charge <= 6, "create cost " .. info.charge)
      _, info = c:replace(small())
      assert.is_true(info.charge >= 5 and info.charge <= 6, "replace cost " .. info.charge)
      _, info = c:upsert(small())
      assert.is_true(info.charge >= 5 and info.charge <= 6, "upsert cost " .. info.charge)
    end)

    it("charges more for bigger documents, to read and to write", function()
      local _, small_w = c:create(small())
      local _, big_w = c:create({ id = "b", pk = "p", s = ("x"):rep(20000) })
      assert.is_true(big_w.charge > small_w.charge)
      local _, small_r = c:read("s", "p")
      local _, big_r = c:read("b", "p")
      assert.is_true(big_r.charge > small_r.charge)
      assert.is_true(big_r.charge >= 19)
    end)

    it("charges more for a write with more indexed terms", function()
      local _, few = c:create({ id = "f", pk = "p", a = 1 })
      local many = { id = "m", pk = "p" }
      for i = 1, 50 do many["f" .. i] = i end
      local _, lots = c:create(many)
      assert.is_true(lots.charge > few.charge)
    end)

    it("charges the same for the same operation on the same data", function()
      local _, a = c:create({ id = "x1", pk = "p", v = "same", n = { 1, 2, 3 } })
      local _, b = c:create({ id = "x2", pk = "p", v = "same", n = { 1, 2, 3 } })
      assert.are.equal(a.charge, b.charge)
      local _, r1 = c:read("x1", "p")
      local _, r2 = c:read("x1", "p")
      assert.are.equal(r1.charge, r2.charge)
    end)

    it("charges read_many by the items it reads", function()
      for i = 1, 4 do assert(c:create({ id = "i" .. i, pk = "p" })) end
      local _, one = c:read_many({ { "i1", "p" } })
      local _, four = c:read_many({ { "i1", "p" }, { "i2", "p" }, { "i3", "p" }, { "i4", "p" } })
      assert.are.equal(1, one.charge)
      assert.are.equal(4, four.charge)
    end)
  end)
end)
