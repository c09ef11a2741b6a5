-- db:replace_container: a new indexing policy, TTL, retention or size
-- limit for a container that holds items; the indexes and expiries are
-- rebuilt in the replace's transaction, every handle (of this process and
-- of others) works with the new spec at its next call, and the partition
-- key, the physical partitions and the unique keys cannot change.
local regolith = require "regolith"
local H = require "helper"

local BASE = { partition_key = "/pk", physical_partitions = 4,
               unique_keys = { { "/u" } } }

local function with(over)
  local o = {}
  for k, v in pairs(BASE) do o[k] = v end
  for k, v in pairs(over or {}) do o[k] = v end
  return o
end

describe("replace_container", function()
  local db, path, c
  before_each(function()
    db, path = H.open()
    c = assert(db:create_container("c", with()))
    for i = 1, 150 do
      assert(c:create({ id = "i" .. i, pk = "p" .. (i % 7), u = i, n = i % 10,
                        secret = i }))
    end
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("rebuilds the indexes for a new policy, and queries use it at once", function()
    local q = "SELECT VALUE COUNT(1) FROM c WHERE c.secret > 100"
    local rows, info = assert(c:query(q))
    assert.are.same({ 50 }, rows)
    assert.are.equal(50, info.loaded)              -- an index seek
    local c2, rinfo = assert(db:replace_container("c",
      with({ indexing = { excluded = { "/secret/?" } } })))
    assert.are.equal(200, rinfo.status)
    assert.are.same({ excluded = { "/secret/?" } }, c2:spec().indexing)
    -- the old handle adopts the new spec at its next call
    rows, info = assert(c:query(q))
    assert.are.same({ 50 }, rows)
    assert.are.equal(150, info.loaded)             -- a scan now
    assert.are.same({ excluded = { "/secret/?" } }, c:spec().indexing)
    assert(db:verify())
    -- writes through the old handle keep the new policy's entries
    assert(c:create({ id = "new", pk = "p1", u = 1000, secret = 500 }))
    assert(c:replace({ id = "i1", pk = "p1", u = 1, secret = 1 }))
    assert(db:verify())
    -- and back: every path indexed again
    assert(db:replace_container("c", with()))
    rows, info = assert(c:query(q))
    assert.are.same({ 51 }, rows)
    assert.are.equal(51, info.loaded)
    assert(db:verify())
  end)

  it("adds and removes composite indexes and automatic indexing", function()
    local order = "SELECT VALUE c.id FROM c ORDER BY c.n, c.u DESC"
    local plain = assert(c:query(order))           -- sorted in memory
    assert(db:replace_container("c", with({ indexing = { composite = {
      { { path = "/n" }, { path = "/u", order = "descending" } } } } })))
    local rows = assert(c:query(order))
    assert.are.equal(150, #rows)
    assert.are.equal("i150", rows[1])
    assert.are.same(plain, rows)
    assert(db:verify())
    assert(db:replace_container("c", with({ indexing = { automatic = false } })))
    local _, info = assert(c:query("SELECT * FROM c WHERE c.u = 3"))
    assert.are.equal(150, info.loaded)
    assert(db:verify())
  end)

  it("refuses a continuation made under the replaced spec", function()
    local sql = "SELECT VALUE c.id FROM c WHERE c.n = 3"
    local _, info = assert(c:query(sql, nil, { max_items = 5 }))
    assert(db:replace_container("c", with({ indexing = { excluded = { "/n/?" } } })))
    H.fails(400, c:query(sql, nil, { max_items = 5, continuation = info.continuation }))
  end)

  it("turns TTL on, changes it and turns it off, counting from each item's last write", function()
    assert(c:upsert({ id = "own", pk = "p0", u = 9999, ttl = 1000 }))
    assert(c:upsert({ id = "bad", pk = "p0", u = 9998, ttl = "soon" }))
    assert(db:replace_container("c", with({ default_ttl = 2 })))
    assert.are.equal(1, assert(c:read("i1", "p1")).n)
    os.execute("sleep 3")
    H.fails(404, c:read("i1", "p1"))               -- expired with the default
    H.fails(404, c:read("bad", "p0"))              -- a bad ttl takes the default
    assert(c:read("own", "p0"))                    -- its own ttl
    assert.are.equal(1, db:purge_expired() > 0 and 1 or 0)
    assert(db:verify())
    local page = assert(c:changes({ mode = "all_versions", max_items = 1000 }))
    local expired = 0
    for _, ch in ipairs(page) do
      if ch.metadata.ttl_expired then expired = expired + 1 end
    end
    assert.are.equal(151, expired)
    assert(db:replace_container("c", with({ default_ttl = -1 })))
    assert(c:read("own", "p0"))
    assert(db:replace_container("c", with()))        -- off: ttl is plain data
    assert(c:create({ id = "later", pk = "p0", u = 1, ttl = "whenever" }))
    assert(db:verify())
  end)

  it("keeps items, etags, the feed and the procedures as they were", function()
    local before = assert(c:read("i5", "p5"))
    local _, finfo = assert(c:changes({ start = "now" }))
    assert(c:create_procedure("p", "return function() return 1 end"))
    assert(db:replace_container("c", with({ indexing = { excluded = { "/*" },
      included = { "/u/?" } }, change_feed = { retention = 3600 },
      max_partition_bytes = 2 ^ 30 })))
    local after = assert(c:read("i5", "p5"))
    assert.are.same(before, after)
    assert.are.same({}, (assert(c:changes({ continuation = finfo.continuation }))))
    assert.are.equal(1, (c:execute("p", "p1")))
    H.fails(409, c:create({ id = "x", pk = "p3", u = 3 }))   -- unique keys hold
    assert(db:verify())
  end)

  it("refuses to change the partition key, the partitions or the unique keys", function()
    local msg = H.fails(400, db:replace_container("c", with({ partition_key = "/other" })))
    assert.matches("partition key cannot change", msg)
    H.fails(400, db:replace_container("c", with({ partition_key = { "/pk", "/u" } })))
    H.fails(400, db:replace_container("c", with({ physical_partitions = 2 })))
    H.fails(400, db:replace_container("c", with({ unique_keys = { { "/n" } } })))
    H.fails(400, db:replace_container("c", with({ unique_keys = regolith.array() })))
    H.fails(404, db:replace_container("nope", with()))
    H.fails(400, db:replace_container("a/b", with()))
    assert.has_error(function() db:replace_container("c", with({ oops = 1 })) end)
    assert.has_error(function() db:replace_container("c", with({ default_ttl = 0 })) end)
    assert.are.same(BASE.unique_keys, c:spec().unique_keys)
    assert(db:verify())
  end)

  it("is seen by another process's handles at their next call", function()
    local child = H.script(([[
      local regolith = require "regolith"
      local db = assert(regolith.open(%q))
      assert(db:replace_container("c", { partition_key = "/pk",
        physical_partitions = 4, unique_keys = { { "/u" } },
        indexing = { excluded = { "/n/?" } } }))
      db:close()
    ]]):format(path))
    assert.is_true(H.execute(H.lua_cmd(child)))
    -- this handle's next write follows the new policy
    assert(c:create({ id = "after", pk = "p2", u = 2000, n = 4 }))
    assert(db:verify())
    local _, info = assert(c:query("SELECT * FROM c WHERE c.n = 4"))
    assert.are.equal(151, info.loaded)
  end)
end)
