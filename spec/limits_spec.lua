-- Limits (docs/api.md, Items): items of 2 MiB (413), logical partition size
-- max_partition_bytes (403), nesting deeper than 128 (400); nothing is
-- written when a limit is hit.  The id, patch and batch limits are in
-- items_spec, patch_spec and batch_spec.
local regolith = require "regolith"
local H = require "helper"

local MiB = 1024 * 1024

describe("limits", function()
  local db, c
  before_each(function()
    db = H.open({ sync = "none" })
    c = assert(db:create_container("things", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("item size", function()
    it("accepts an item just under 2 MiB and reads it back exactly", function()
      local s = ("a"):rep(2 * MiB - 1024)
      local doc, info = c:create({ id = "big", pk = "p", s = s })
      assert(doc, info)
      assert.are.equal(s, assert(c:read("big", "p")).s)
    end)

    it("refuses an item over 2 MiB with 413, writing nothing", function()
      H.fails(413, c:create({ id = "big", pk = "p", s = ("a"):rep(2 * MiB + 1) }))
      H.fails(413, c:upsert({ id = "big", pk = "p", s = ("a"):rep(2 * MiB + 1) }))
      local parts = {}
      for i = 1, 300 do parts[i] = ("b"):rep(7000) end
      H.fails(413, c:create({ id = "big", pk = "p", parts = parts }))
      H.fails(404, c:read("big", "p"))
      assert.are.equal(0, db:stats().items)
    end)

    it("refuses a replace, upsert or patch growing an item over 2 MiB with 413, keeping it", function()
      local orig = assert(c:create({ id = "a", pk = "p", s = ("a"):rep(MiB) }))
      H.fails(413, c:replace({ id = "a", pk = "p", s = ("b"):rep(3 * MiB) }))
      H.fails(413, c:upsert({ id = "a", pk = "p", s = ("b"):rep(3 * MiB) }))
      H.fails(413, c:patch("a", "p", { { op = "set", path = "/t", value = ("c"):rep(MiB + 1024) } }))
      local got = assert(c:read("a", "p"))
      assert.are.equal(orig._etag, got._etag)
      assert.is_nil(got.t)
    end)

    it("refuses a batch holding an item over 2 MiB with 413, writing nothing", function()
      local results, msg, status = c:batch("p", {
        { op = "create", doc = { id = "small", pk = "p" } },
        { op = "create", doc = { id = "big", pk = "p", s = ("a"):rep(2 * MiB + 1) } },
      })
      assert.is_nil(results, msg)
      assert.are.equal(413, status)
      assert.are.equal(0, db:stats().items)
    end)
  end)

  describe("logical partition size", function()
    local small
    before_each(function()
      small = assert(db:create_container("small", { partition_key = "/pk",
                                                    max_partition_bytes = 10000 }))
    end)

    local function doc(id, n, pk)
      return { id = id, pk = pk or "p", s = ("x"):rep(n) }
    end

    it("refuses a write past max_partition_bytes with 403, writing nothing", function()
      for i = 1, 3 do assert(small:create(doc("i" .. i, 3000))) end
      H.fails(403, small:create(doc("i4", 3000)))
      H.fails(403, small:upsert(doc("i4", 3000)))
      H.fails(404, small:read("i4", "p"))
      assert.are.equal(3, db:stats().containers.small.items)
      local results, msg, status = small:batch("p", { { op = "create", doc = doc("i5", 10) },
                                                      { op = "create", doc = doc("i6", 3000) } })
      assert.is_nil(results, msg)
      assert.are.equal(403, status)
      H.fails(404, small:read("i5", "p"))
    end)

    it("counts each logical partition on its own", function()
      for i = 1, 3 do assert(small:create(doc("i" .. i, 3000))) end
      for i = 1, 3 do assert(small:create(doc("i" .. i, 3000, "q"))) end
      H.fails(403, small:create(doc("i4", 3000, "q")))
      assert(small:create(doc("i4", 3000, "r")))
    end)

    it("refuses a replace or patch growing the partition past the limit with 403, keeping the item", function()
      for i = 1, 3 do assert(small:create(doc("i" .. i, 3000))) end
      local before = assert(small:read("i1", "p"))
      H.fails(403, small:replace(doc("i1", 4000)))
      H.fails(403, small:patch("i1", "p", { { op = "set", path = "/t", value = ("y"):rep(1000) } }))
      assert.are.equal(before._etag, assert(small:read("i1", "p"))._etag)
    end)

    it("makes room again when items shrink or go", function()
      for i = 1, 3 do assert(small:create(doc("i" .. i, 3000))) end
      H.fails(403, small:create(doc("i4", 3000)))
      assert(small:replace(doc("i1", 10)))
      assert(small:create(doc("i4", 3000)))
      H.fails(403, small:create(doc("i5", 3000)))
      assert(small:delete("i2", "p"))
      assert(small:create(doc("i5", 3000)))
    end)
  end)

  describe("what a script's transaction writes", function()
    -- A loop writing items of 1.9 MB once held every page it wrote in the
    -- host's memory until the transaction ended: 2.1 GB, 47 s holding the
    -- writer lock, before the instruction budget stopped it.  Now the
    -- transaction may hold 64 MiB (docs/scripts.md, Limits).
    local LOOP = [[return function(ctx, pk)
      local big = ("x"):rep(1900000)
      local i = 0
      while true do
        i = i + 1
        assert(ctx:create({ id = "i" .. i, pk = pk, v = big }))
      end
    end]]
    -- the default budget (5 s of CPU): the loop runs well past the limit
    -- before it (once it ran to 500 MB), also under the sanitizers
    local db, c
    before_each(function()
      db = assert(regolith.open(H.tmpdir(), { sync = "none", script_budget = 1e9 }))
      c = assert(db:create_container("things", { partition_key = "/pk" }))
    end)
    after_each(function() db:close() end)

    it("stops a procedure past 64 MiB with 413, keeping nothing it wrote", function()
      assert(c:create_procedure("loop", LOOP))
      assert(c:create({ id = "before", pk = "p" }))
      local msg = H.fails(413, c:execute("loop", "p", "p"))
      assert.matches("procedure 'loop' exceeded the write limit of its transaction (67108864 bytes)",
                     msg, 1, true)
      H.fails(404, c:read("i1", "p"))
      assert(c:read("before", "p"))
      assert.are.equal(1, db:stats().items)
      assert(c:create({ id = "after", pk = "p" }))
      assert(db:verify())
    end)

    it("stops a trigger the same way, and the write it belongs to fails", function()
      assert(c:create_trigger("spill", { type = "pre",
        source = LOOP:gsub("function%(ctx, pk%)", "function(ctx)"):gsub("pk = pk", 'pk = "p"') }))
      local msg = H.fails(413, c:create({ id = "a", pk = "p" }, { pre_trigger = "spill" }))
      assert.matches("exceeded the write limit of its transaction", msg, 1, true)
      H.fails(404, c:read("a", "p"))
      H.fails(404, c:read("i1", "p"))
      assert.are.equal(0, db:stats().items)
    end)

    it("lets a procedure write up to the limit", function()
      assert(c:create_procedure("some", [[return function(ctx, n)
        local big = ("x"):rep(1900000)
        for i = 1, n do assert(ctx:create({ id = "i" .. i, pk = "p", v = big })) end
        return n
      end]]))
      assert.are.equal(25, (c:execute("some", "p", 25)))
      assert.are.equal(25, db:stats().items)
    end)
  end)

  describe("nesting", function()
    local function nest(n)
      local t = {}
      local cur = t
      for _ = 2, n do cur.a = {}; cur = cur.a end
      return t
    end

    it("refuses documents deeper than 128 levels with 400 in every write, writing nothing", function()
      H.fails(400, c:create({ id = "a", pk = "p", a = nest(128) }))
      H.fails(400, c:upsert({ id = "a", pk = "p", a = nest(128) }))
      assert(c:create({ id = "b", pk = "p" }))
      H.fails(400, c:replace({ id = "b", pk = "p", a = nest(128) }))
      local results, msg, status = c:batch("p", { { op = "create", doc = { id = "a", pk = "p", a = nest(128) } } })
      assert.is_nil(results, msg)
      assert.are.equal(400, status)
      H.fails(404, c:read("a", "p"))
      assert.is_nil(assert(c:read("b", "p")).a)
      assert(c:create({ id = "a", pk = "p", a = nest(127) }))
    end)

    it("refuses arrays nested deeper than 128 levels with 400", function()
      local function arrays(n)
        local t = {}
        local cur = t
        for _ = 2, n do local inner = {}; cur[1] = inner; cur = inner end
        cur[1] = 1
        return t
      end
      H.fails(400, c:create({ id = "a", pk = "p", a = arrays(128) }))
      H.fails(404, c:read("a", "p"))
      assert(c:create({ id = "a", pk = "p", a = arrays(127) }))
    end)
  end)
end)
