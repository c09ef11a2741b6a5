-- Time to live (docs/api.md, Items): default_ttl off, -1 or seconds; the
-- item field ttl; expired items invisible at once, purged by the next write
-- on their container or by db:purge_expired().  Expiry is by whole seconds,
-- so the specs that wait sleep a little over two seconds, and few do.
local regolith = require "regolith"
local H = require "helper"

local function sleep(seconds)
  os.execute("sleep " .. seconds)
end

describe("ttl", function()
  local db, path
  before_each(function()
    db, path = H.open()
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("expires items by the container's default or their own ttl, never with ttl -1, and not at all when off", function()
    local off = assert(db:create_container("off", { partition_key = "/pk" }))
    local neg = assert(db:create_container("neg", { partition_key = "/pk", default_ttl = -1 }))
    local pos = assert(db:create_container("pos", { partition_key = "/pk", default_ttl = 1 }))

    assert(off:create({ id = "t1", pk = "p", ttl = 1 }))
    assert(off:create({ id = "plain", pk = "p" }))

    assert(neg:create({ id = "none", pk = "p" }))
    assert(neg:create({ id = "own", pk = "p", ttl = 1 }))
    assert(neg:create({ id = "forever", pk = "p", ttl = -1 }))
    assert(neg:create({ id = "long", pk = "p", ttl = 1000 }))
    assert(neg:create({ id = "dropped", pk = "p", ttl = 1 }))
    assert(neg:replace({ id = "dropped", pk = "p" }))
    assert(neg:create({ id = "patched_in", pk = "p" }))
    assert(neg:patch("patched_in", "p", { { op = "set", path = "/ttl", value = 1 } }))
    assert(neg:batch("p", { { op = "create", doc = { id = "batched", pk = "p", ttl = 1 } } }))

    assert(pos:create({ id = "dflt", pk = "p" }))
    assert(pos:create({ id = "forever", pk = "p", ttl = -1 }))
    assert(pos:create({ id = "long", pk = "p", ttl = 1000 }))
    assert(pos:create({ id = "renewed", pk = "p" }))
    assert(pos:replace({ id = "renewed", pk = "p", ttl = 1000 }))
    assert(pos:create({ id = "patched", pk = "p", ttl = 1 }))
    assert(pos:patch("patched", "p", { { op = "set", path = "/ttl", value = -1 } }))

    -- long-lived items are there before the wait
    assert.are.equal(1000, assert(neg:read("long", "p")).ttl)
    assert(pos:read("long", "p"))

    sleep(2.2)

    -- off: ttl is plain data
    assert.are.equal(1, assert(off:read("t1", "p")).ttl)
    assert(off:read("plain", "p"))
    -- -1: only items with their own positive ttl expire
    assert(neg:read("none", "p"))
    H.fails(404, neg:read("own", "p"))
    assert(neg:read("forever", "p"))
    assert(neg:read("long", "p"))
    assert(neg:read("dropped", "p"))
    H.fails(404, neg:read("patched_in", "p"))
    H.fails(404, neg:read("batched", "p"))
    -- n: items without their own ttl expire after n seconds
    H.fails(404, pos:read("dflt", "p"))
    assert(pos:read("forever", "p"))
    assert(pos:read("long", "p"))
    assert(pos:read("renewed", "p"))
    assert(pos:read("patched", "p"))
    -- read_many leaves expired items out
    local docs = assert(pos:read_many({ { "dflt", "p" }, { "forever", "p" }, { "long", "p" } }))
    assert.are.equal(2, #docs)
    assert.are.equal("forever", docs[1].id)
    assert.are.equal("long", docs[2].id)
    docs = assert(neg:read_many({ { "own", "p" }, { "batched", "p" } }))
    assert.are.same({}, docs)
  end)

  it("purges expired items with the next write on their container or with purge_expired, which counts them", function()
    local a = assert(db:create_container("a", { partition_key = "/pk", default_ttl = 1 }))
    local b = assert(db:create_container("b", { partition_key = "/pk", default_ttl = -1 }))
    for i = 1, 3 do assert(a:create({ id = "a" .. i, pk = "p" .. i })) end
    assert(a:create({ id = "stay", pk = "p", ttl = -1 }))
    assert(b:create({ id = "stay", pk = "p" }))
    -- one batch: the 70 share one write time, so none expires (and is
    -- purged by a later write) before the others, however slow the build
    local ops = {}
    for i = 1, 70 do ops[i] = { op = "create", doc = { id = "b" .. i, pk = "p0", ttl = 1 } } end
    assert(b:batch("p0", ops))

    sleep(2.2)

    for i = 1, 3 do H.fails(404, a:read("a" .. i, "p" .. i)) end
    -- a write on `a` purges a's expired items (and only those); the new
    -- item outlives a slow machine's next steps
    assert(a:create({ id = "new", pk = "q", ttl = 1000 }))
    local count, info = db:purge_expired()
    assert.are.equal(70, count)
    assert.is_table(info)
    assert.is_number(info.charge)
    assert.are.equal(0, (db:purge_expired()))
    local stats = db:stats()
    assert.are.equal(2, stats.containers.a.items)
    assert.are.equal(1, stats.containers.b.items)
    assert(a:read("stay", "p"))
    assert(b:read("stay", "p"))

    -- the ids of expired items are free again, and the old versions are gone
    H.fails(404, a:replace({ id = "a1", pk = "p1" }))
    H.fails(404, a:patch("a2", "p2", { { op = "set", path = "/x", value = 1 } }))
    H.fails(404, b:delete("b1", "p1"))
    local _, cinfo = a:create({ id = "a1", pk = "p1", ttl = 1000 })
    assert.are.equal(201, cinfo.status)
    local _, uinfo = b:upsert({ id = "b2", pk = "p2" })
    assert.are.equal(201, uinfo.status)
  end)

  it("leaves expired items out of GROUP BY, DISTINCT and COUNT before anything purges them", function()
    local c = assert(db:create_container("g", { partition_key = "/pk", default_ttl = -1 }))
    for i = 1, 10 do
      assert(c:create({ id = "i" .. i, pk = "p", k = i % 2, ttl = (i <= 4) and 1 or nil }))
    end
    sleep(2.2)
    local function counts(sql)
      local rows = assert(c:query(sql))
      local out = {}
      for _, r in ipairs(rows) do out[r.k] = r.n end
      return out
    end
    -- the index holds every item's entries until a purge; expired items
    -- count in none of these
    assert.are.same({ [0] = 3, [1] = 3 },
      counts("SELECT c.k, COUNT(1) AS n FROM c WHERE c.pk = 'p' GROUP BY c.k"))
    assert.are.same({ [0] = 3, [1] = 3 },
      counts("SELECT c.k, COUNT(1) AS n FROM c GROUP BY c.k"))
    assert.are.same({ 6 }, assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'p'")))
    assert.are.same({ 6 }, assert(c:query("SELECT VALUE COUNT(1) FROM c", nil, { partition_key = "p" })))
    local ids = assert(c:query("SELECT DISTINCT VALUE c.id FROM c"))
    assert.are.equal(6, #ids)
  end)

  it("treats an expired item as missing in writes before anything purges it, unique values included", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", default_ttl = 1,
                                                unique_keys = { { "/u" } } }))
    -- one batch: a slow second write cannot purge the first early
    assert(c:batch("p", { { op = "create", doc = { id = "gone", pk = "p", v = 1, u = "taken" } },
                          { op = "create", doc = { id = "gone2", pk = "p", v = 1, u = "second" } } }))
    sleep(2.2)
    local results, msg, status = c:batch("p", { { op = "read", id = "gone" } })
    assert.is_nil(results, msg)
    assert.are.equal(404, status)
    local doc, info = c:create({ id = "gone", pk = "p", v = 2, u = "new" })
    assert(doc, info)
    assert.are.equal(201, info.status)
    assert.are.equal(2, assert(c:read("gone", "p")).v)
    local _, uinfo = c:upsert({ id = "gone2", pk = "p", v = 2, u = "second" })
    assert.are.equal(201, uinfo.status)
    assert(c:create({ id = "other", pk = "p", u = "taken", ttl = 1000 }))
  end)

  it("purges nothing through a read-only handle: purge_expired refuses with 403", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", default_ttl = 1 }))
    -- one batch: a slow second write cannot purge the first before the check
    assert(c:batch("p", { { op = "create", doc = { id = "a", pk = "p" } },
                          { op = "create", doc = { id = "b", pk = "p", ttl = -1 } } }))
    sleep(2.2)
    local ro = assert(regolith.open(path, { readonly = true }))
    H.fails(403, ro:purge_expired())
    ro:close()
    assert.are.equal(2, db:stats().containers.c.items)
    assert.are.equal(1, (db:purge_expired()))
  end)

  it("keeps the ttl field in the document as written", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", default_ttl = 3600 }))
    assert(c:create({ id = "a", pk = "p", ttl = 100 }))
    assert(c:create({ id = "b", pk = "p" }))
    assert.are.equal(100, assert(c:read("a", "p")).ttl)
    assert.is_nil(assert(c:read("b", "p")).ttl)
  end)

  it("refuses bad ttl values with 400 when TTL is on, writing nothing", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", default_ttl = -1 }))
    assert(c:create({ id = "x", pk = "p" }))
    local before = assert(c:read("x", "p"))
    for _, bad in ipairs({ 0, -2, -100, 1.5, "10", true, { 10 }, regolith.object() }) do
      H.fails(400, c:create({ id = "a", pk = "p", ttl = bad }))
      H.fails(400, c:upsert({ id = "a", pk = "p", ttl = bad }))
      H.fails(400, c:replace({ id = "x", pk = "p", ttl = bad }))
      H.fails(400, c:patch("x", "p", { { op = "set", path = "/ttl", value = bad } }))
      local results, _, status = c:batch("p", { { op = "create", doc = { id = "a", pk = "p", ttl = bad } } })
      assert.is_nil(results)
      assert.are.equal(400, status)
    end
    H.fails(404, c:read("a", "p"))
    assert.are.equal(before._etag, assert(c:read("x", "p"))._etag)
    assert.are.equal(1, db:stats().items)
  end)

  it("never loses an item to a huge ttl: it is kept or refused with 400", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", default_ttl = -1 }))
    local huge = { 2^62, 2^63, 1e300 }
    if H.lua54 then          -- 64-bit integers
      huge[#huge + 1] = math.maxinteger
      huge[#huge + 1] = math.maxinteger - 1000
    end
    for i, ttl in ipairs(huge) do
      local doc, msg, status = c:create({ id = "i" .. i, pk = "p", ttl = ttl })
      if doc then
        assert(c:read("i" .. i, "p"), "item with ttl " .. ttl .. " vanished at once")
      else
        assert.are.equal(400, status, msg)
      end
    end
    local ok, d = pcall(db.create_container, db, "d", { partition_key = "/pk",
                                                        default_ttl = math.maxinteger or 2^63 })
    if ok and d then
      assert(d:create({ id = "a", pk = "p" }))
      assert(d:read("a", "p"), "item under default_ttl = math.maxinteger vanished at once")
    end
  end)

  it("accepts any ttl value as plain data when TTL is off", function()
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    for i, v in ipairs({ 0, -2, 1.5, "10", true, { 10 } }) do
      assert(c:create({ id = "i" .. i, pk = "p", ttl = v }))
      assert.are.same(v, assert(c:read("i" .. i, "p")).ttl)
    end
  end)

  it("purges nothing when no item has expired", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", default_ttl = 1000 }))
    assert(c:create({ id = "a", pk = "p" }))
    assert.are.equal(0, (db:purge_expired()))
    assert(c:read("a", "p"))
  end)
end)
