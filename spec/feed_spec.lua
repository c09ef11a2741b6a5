local regolith = require "regolith"
local H = require "helper"

-- Reads a whole feed page by page; returns the changes and the last token.
local function read_all(c, opts)
  local out, token = {}, opts and opts.continuation
  for _ = 1, 10000 do
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.continuation = token
    local page, info = assert(c:changes(o))
    assert.is_string(info.continuation)
    token = info.continuation
    if #page == 0 then return out, token end
    for _, ch in ipairs(page) do out[#out + 1] = ch end
  end
  error("the feed never ended")
end

-- A short description of an all_versions change.
local function describe_change(ch)
  local m = ch.metadata
  local doc = ch.current or ch.previous
  return ("%s %s/%s n=%s lsn=%d"):format(m.operation, tostring(m.partition_key),
    m.id, tostring(doc.n), m.lsn)
end

local function sleep(s) os.execute("sleep " .. s) end

describe("change feed", function()
  local db, c
  before_each(function()
    db = H.open()
    c = assert(db:create_container("posts", {
      partition_key = "/pk", physical_partitions = 4,
      change_feed = { all_versions = true } }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("gives the changes of each logical partition in write order", function()
    for round = 1, 5 do
      for p = 1, 6 do
        assert(c:upsert({ id = "a", pk = "p" .. p, n = round }))
        assert(c:upsert({ id = "b" .. round, pk = "p" .. p, n = round }))
      end
    end
    local all = read_all(c, { mode = "all_versions", max_items = 7 })
    assert.are.equal(60, #all)
    local seen, last = {}, {}
    for _, ch in ipairs(all) do
      local pk = ch.metadata.partition_key
      seen[pk] = seen[pk] or {}
      table.insert(seen[pk], ch.metadata.id .. "=" .. ch.current.n)
      assert.is_true(ch.metadata.lsn > (last[pk] or 0))
      last[pk] = ch.metadata.lsn
    end
    for p = 1, 6 do
      local want = {}
      for round = 1, 5 do
        want[#want + 1] = "a=" .. round
        want[#want + 1] = "b" .. round .. "=" .. round
      end
      assert.are.same(want, seen["p" .. p])
    end
  end)

  it("merges the feed ranges in commit order", function()
    for i = 1, 40 do assert(c:create({ id = "i" .. i, pk = "p" .. i })) end
    local all = read_all(c, { mode = "all_versions", max_items = 3 })
    assert.are.equal(40, #all)
    for i = 2, #all do
      assert.is_true(all[i].metadata.lsn > all[i - 1].metadata.lsn)
    end
  end)

  it("yields the same sequence with pages of 1 and of 100", function()
    for i = 1, 30 do
      assert(c:upsert({ id = "i" .. (i % 11), pk = "p" .. (i % 5), n = i }))
      if i % 7 == 0 then assert(c:delete("i" .. (i % 11), "p" .. (i % 5))) end
    end
    for _, mode in ipairs({ "latest", "all_versions" }) do
      local small = read_all(c, { mode = mode, max_items = 1 })
      local big = read_all(c, { mode = mode, max_items = 100 })
      assert.is_true(#small > 0)
      assert.are.same(big, small)
    end
    local ones = read_all(c, { mode = "all_versions", max_items = 1 })
    local seq = {}
    for _, ch in ipairs(ones) do seq[#seq + 1] = describe_change(ch) end
    local hundred = {}
    for _, ch in ipairs(read_all(c, { mode = "all_versions" })) do
      hundred[#hundred + 1] = describe_change(ch)
    end
    assert.are.same(hundred, seq)
  end)

  it("keeps a usable continuation after an empty page", function()
    assert(c:create({ id = "a", pk = "x" }))
    local _, token = read_all(c)
    local page, info = assert(c:changes({ continuation = token }))
    assert.are.equal(0, #page)
    assert.is_string(info.continuation)
    local again, info2 = assert(c:changes({ continuation = info.continuation }))
    assert.are.equal(0, #again)
    assert(c:create({ id = "b", pk = "y" }))
    assert(c:replace({ id = "a", pk = "x", v = 2 }))
    local later = assert(c:changes({ continuation = info2.continuation }))
    assert.are.equal(2, #later)
    assert.are.equal("b", later[1].id)
    assert.are.equal("a", later[2].id)
    assert.are.equal(2, later[2].v)
  end)

  it("keeps a continuation per feed range", function()
    local _, token = read_all(c, { mode = "all_versions" })
    for i = 1, 12 do assert(c:create({ id = "i" .. i, pk = "p" .. i })) end
    local page, info = assert(c:changes({ continuation = token,
      mode = "all_versions", max_items = 5 }))
    assert.are.equal(5, #page)
    local rest = read_all(c, { mode = "all_versions" })
    assert.are.equal(12, #rest)
    local tail = {}
    local t = info.continuation
    while true do
      local p, i = assert(c:changes({ continuation = t, mode = "all_versions",
        max_items = 2 }))
      if #p == 0 then break end
      for _, ch in ipairs(p) do tail[#tail + 1] = ch.metadata.id end
      t = i.continuation
    end
    local want = {}
    for i = 6, 12 do want[#want + 1] = rest[i].metadata.id end
    assert.are.same(want, tail)
  end)

  it("starts from the beginning by default, from now, or from a time",
    function()
      assert(c:create({ id = "old", pk = "x" }))
      local from_now = assert(c:changes({ start = "now" }))
      assert.are.equal(0, #from_now)
      local _, info = assert(c:changes({ start = "now" }))
      assert.are.equal(1, #assert(c:changes()))
      assert.are.equal(1, #assert(c:changes({ start = "beginning" })))
      sleep(1.1)
      local new = assert(c:create({ id = "new", pk = "y" }))
      local later = assert(c:changes({ continuation = info.continuation }))
      assert.are.equal(1, #later)
      assert.are.equal("new", later[1].id)
      for _, mode in ipairs({ "latest", "all_versions" }) do
        local at = read_all(c, { start = new._ts, mode = mode })
        assert.are.equal(1, #at)
        assert.are.equal("new", (at[1].current or at[1]).id)
        assert.are.equal(2, #read_all(c, { start = new._ts - 100, mode = mode }))
        assert.are.equal(0, #read_all(c, { start = new._ts + 100, mode = mode }))
      end
      -- a time start followed by a write still sees the write
      local _, t = read_all(c, { start = new._ts + 100 })
      assert(c:create({ id = "newer", pk = "z" }))
      local after = read_all(c, { continuation = t })
      assert.are.equal(1, #after)
      assert.are.equal("newer", after[1].id)
    end)

  it("gives each item once at its latest version in latest mode", function()
    assert(c:create({ id = "a", pk = "x", n = 1 }))
    assert(c:create({ id = "b", pk = "x", n = 1 }))
    assert(c:replace({ id = "a", pk = "x", n = 2 }))
    assert(c:patch("a", "x", { { op = "incr", path = "/n", value = 1 } }))
    local all, token = read_all(c)
    assert.are.equal(2, #all)
    assert.are.equal("b", all[1].id)
    assert.are.equal("a", all[2].id)
    assert.are.equal(3, all[2].n)
    assert(c:replace({ id = "b", pk = "x", n = 9 }))
    assert(c:replace({ id = "b", pk = "x", n = 10 }))
    local more = read_all(c, { continuation = token })
    assert.are.equal(1, #more)
    assert.are.equal(10, more[1].n)
  end)

  it("leaves deleted items out of latest mode", function()
    assert(c:create({ id = "a", pk = "x" }))
    assert(c:create({ id = "b", pk = "x" }))
    assert(c:delete("a", "x"))
    local all = read_all(c)
    assert.are.equal(1, #all)
    assert.are.equal("b", all[1].id)
  end)

  it("shows every create, replace and delete in all_versions mode", function()
    assert(c:create({ id = "a", pk = "x", n = 1 }))
    assert(c:replace({ id = "a", pk = "x", n = 2 }))
    assert(c:delete("a", "x"))
    local all = read_all(c, { mode = "all_versions" })
    assert.are.equal(3, #all)
    assert.are.same({ "create", "replace", "delete" }, {
      all[1].metadata.operation, all[2].metadata.operation,
      all[3].metadata.operation })
    assert.are.equal(1, all[1].current.n)
    assert.are.equal(2, all[2].current.n)
    assert.is_nil(all[3].current)
    assert.are.equal(2, all[3].previous.n)
    for _, ch in ipairs(all) do
      assert.are.equal("a", ch.metadata.id)
      assert.are.equal("x", ch.metadata.partition_key)
      assert.is_false(ch.metadata.ttl_expired)
      assert.is_number(ch.metadata.ts)
    end
    if H.cluster then    -- lsns are a clock there (docs/cluster.md)
      assert.is_true(all[3].previous._lsn < all[3].metadata.lsn)
    else
      assert.are.equal(all[3].previous._lsn + 1, all[3].metadata.lsn)
    end
  end)

  it("gives a batch's changes one lsn", function()
    assert(c:batch("x", {
      { op = "create", doc = { id = "a", pk = "x" } },
      { op = "create", doc = { id = "b", pk = "x" } },
    }))
    local all = read_all(c, { mode = "all_versions" })
    assert.are.equal(2, #all)
    assert.are.equal(all[1].metadata.lsn, all[2].metadata.lsn)
    assert.are.same({ "a", "b" }, { all[1].metadata.id, all[2].metadata.id })
    local latest = read_all(c, { max_items = 1 })
    assert.are.equal(2, #latest)
  end)

  it("shows TTL expiry as a delete and hides expired items at once",
    function()
      local t = assert(db:create_container("sessions", {
        partition_key = "/pk", default_ttl = -1,
        change_feed = { all_versions = true } }))
      assert(t:create({ id = "short", pk = "x", ttl = 1 }))
      assert(t:create({ id = "long", pk = "x" }))
      sleep(2)
      local latest = read_all(t)
      assert.are.equal(1, #latest)
      assert.are.equal("long", latest[1].id)
      assert(t:create({ id = "trigger", pk = "y" }))    -- purges
      local all = read_all(t, { mode = "all_versions" })
      local last = all[#all]
      assert.are.equal(4, #all)
      local expiry
      for _, ch in ipairs(all) do
        if ch.metadata.ttl_expired then expiry = ch end
      end
      assert.is_table(expiry)
      assert.are.equal("delete", expiry.metadata.operation)
      assert.are.equal("short", expiry.metadata.id)
      assert.are.equal("short", expiry.previous.id)
      assert.is_nil(expiry.current)
      assert.are.equal("trigger", last.metadata.id)
    end)

  it("filters by partition key, hierarchical keys included", function()
    for i = 1, 20 do
      assert(c:create({ id = "i" .. i, pk = "p" .. (i % 4), n = i }))
    end
    local only = read_all(c, { partition_key = "p1", max_items = 2 })
    assert.are.equal(5, #only)
    for _, d in ipairs(only) do assert.are.equal("p1", d.pk) end
    local h = assert(db:create_container("h", {
      partition_key = { "/t", "/u" }, physical_partitions = 3,
      change_feed = { all_versions = true } }))
    for i = 1, 12 do
      assert(h:create({ id = "i" .. i, t = "t" .. (i % 2), u = i % 3 }))
    end
    local sub = read_all(h, { partition_key = { "t1", 1 },
      mode = "all_versions" })
    assert.are.equal(2, #sub)
    for _, ch in ipairs(sub) do
      assert.are.same({ "t1", 1 }, ch.metadata.partition_key)
    end
    H.fails(400, h:changes({ partition_key = "t1" }))
    H.fails(400, c:changes({ partition_key = { "p1" } }))
  end)

  it("reads one feed range at a time, the ranges covering the feed", function()
    assert.are.same({ 1, 2, 3, 4 }, c:feed_ranges())
    for i = 1, 40 do assert(c:create({ id = "i" .. i, pk = "p" .. i })) end
    local seen, count = {}, 0
    for _, r in ipairs(c:feed_ranges()) do
      local part = read_all(c, { feed_range = r, max_items = 3 })
      for _, d in ipairs(part) do
        assert.is_nil(seen[d.id])
        seen[d.id] = r
        count = count + 1
        local one = read_all(c, { partition_key = d.pk })
        assert.are.equal(1, #one)
      end
    end
    assert.are.equal(40, count)
    local single = assert(db:create_container("single", { partition_key = "/pk" }))
    assert.are.same({ 1 }, single:feed_ranges())
  end)

  it("reads on from a token alone: it carries its feed range, mode and partition key", function()
    for i = 1, 40 do assert(c:create({ id = "k" .. i, pk = "p" .. (i % 7) })) end
    for r = 1, 4 do
      local want = read_all(c, { feed_range = r })
      local page, info = assert(c:changes({ feed_range = r, max_items = 2 }))
      local got = {}
      for _, d in ipairs(page) do got[#got + 1] = d end
      local cont = info.continuation
      repeat                           -- feed_range is not repeated
        local more, i2 = assert(c:changes({ continuation = cont, max_items = 3 }))
        for _, d in ipairs(more) do got[#got + 1] = d end
        cont = i2.continuation
      until #more == 0
      assert.are.equal(#want, #got)
      for i = 1, #want do assert.are.equal(want[i].id, got[i].id) end
    end
    local _, info = assert(c:changes({ mode = "all_versions", max_items = 5 }))
    local more = assert(c:changes({ continuation = info.continuation }))
    assert.is_table(more[1].metadata)  -- still all_versions
    _, info = assert(c:changes({ partition_key = "p3", max_items = 1 }))
    more = assert(c:changes({ continuation = info.continuation }))
    for _, d in ipairs(more) do assert.are.equal("p3", d.pk) end
    -- repeating the token's own options is fine
    assert(c:changes({ continuation = info.continuation, partition_key = "p3" }))
  end)

  it("refuses a token altered or made for another read", function()
    assert(c:create({ id = "a", pk = "x" }))
    local _, info = assert(c:changes({ max_items = 1 }))
    local tok = info.continuation
    local msg = H.fails(400, c:changes({ continuation = tok, mode = "all_versions" }))
    assert.matches('continues a read in mode "latest", not "all_versions"', msg, 1, true)
    msg = H.fails(400, c:changes({ continuation = tok, feed_range = 1 }))
    assert.matches("continues a read of every feed range, not of feed range 1", msg, 1, true)
    msg = H.fails(400, c:changes({ continuation = tok, partition_key = "x" }))
    assert.matches("not of this partition key", msg, 1, true)
    local _, r2 = assert(c:changes({ feed_range = 2 }))
    msg = H.fails(400, c:changes({ continuation = r2.continuation, feed_range = 3 }))
    assert.matches("continues a read of feed range 2, not 3", msg, 1, true)
    local other = assert(db:create_container("other", {
      partition_key = "/pk", physical_partitions = 4 }))
    H.fails(400, other:changes({ continuation = tok }))
    local flipped = tok:sub(1, 5) .. (tok:sub(6, 6) == "A" and "B" or "A") ..
      tok:sub(7)
    H.fails(400, c:changes({ continuation = flipped }))
    H.fails(400, c:changes({ continuation = tok:sub(1, -3) }))
    H.fails(400, c:changes({ continuation = "" }))
  end)

  it("raises on misuse of its options", function()
    assert.has_error(function() c:changes({ bogus = 1 }) end)
    assert.has_error(function() c:changes({ mode = "everything" }) end)
    assert.has_error(function() c:changes({ start = "yesterday" }) end)
    assert.has_error(function() c:changes({ start = 0 / 0 }) end)
    assert.has_error(function() c:changes({ max_items = 0 }) end)
    assert.has_error(function() c:changes({ max_items = 1.5 }) end)
    assert.has_error(function() c:changes({ feed_range = 5 }) end)
    assert.has_error(function() c:changes({ continuation = 12 }) end)
    assert.has_error(function()
      c:changes({ feed_range = 1, partition_key = "x" })
    end)
    assert.has_error(function() c:changes("latest") end)
  end)

  it("charges the same for the same read, more for more changes", function()
    local _, empty = assert(c:changes())
    assert.is_true(empty.charge > 0)
    for i = 1, 10 do
      assert(c:create({ id = "i" .. i, pk = "p" .. i, text = ("x"):rep(2000) }))
    end
    local _, a = assert(c:changes())
    local _, b = assert(c:changes())
    assert.are.equal(a.charge, b.charge)
    assert.is_true(a.charge > empty.charge)
    local _, one = assert(c:changes({ max_items = 1 }))
    assert.is_true(one.charge < a.charge)
    assert.are.equal(10, a.count)
  end)

  it("returns 404 once the container is deleted", function()
    assert(db:delete_container("posts"))
    H.fails(404, c:changes())
  end)

  it("keeps the all-versions history only where the container asks for it", function()
    local plain = assert(db:create_container("plain", { partition_key = "/pk" }))
    assert(plain:create({ id = "a", pk = "x" }))
    assert(plain:replace({ id = "a", pk = "x", n = 1 }))
    assert.are.equal(1, #read_all(plain))                 -- latest mode: always
    local msg = H.fails(400, plain:changes{ mode = "all_versions" })
    assert.matches("all_versions = true", msg, 1, true)
    H.fails(400, db:processor{ name = "h", source = "plain", mode = "all_versions",
      handler = function() end })
    -- a retention keeps the history it bounds; all_versions = false with one is refused
    local kept = assert(db:create_container("kept2", { partition_key = "/pk",
      change_feed = { retention = 3600 } }))
    assert.is_true(kept:spec().change_feed.retention == 3600)
    assert(kept:create({ id = "a", pk = "x" }))
    assert.are.equal(1, #read_all(kept, { mode = "all_versions" }))
    assert.has_error(function() db:create_container("bad", { partition_key = "/pk",
      change_feed = { all_versions = false, retention = 10 } }) end)
    assert.has_error(function() db:create_container("bad", { partition_key = "/pk",
      change_feed = { all_versions = "yes" } }) end)
    assert.is_true(db:verify())
  end)

  it("trims all_versions entries past retention once processors passed them",
    function()
      local r = assert(db:create_container("kept", {
        partition_key = "/pk", change_feed = { retention = 1 } }))
      assert(r:create({ id = "a", pk = "x" }))
      assert(r:create({ id = "b", pk = "x" }))
      local seen = {}
      local p = assert(db:processor({ name = "audit", source = "kept",
        mode = "all_versions",
        handler = function(changes)
          for _, ch in ipairs(changes) do seen[#seen + 1] = ch.metadata.id end
        end }))
      sleep(2)
      assert(r:create({ id = "c", pk = "x" }))
      -- old enough, but the processor has not passed them yet
      assert.are.equal(3, #read_all(r, { mode = "all_versions" }))
      p:run({ until_idle = true })
      assert.are.same({ "a", "b", "c" }, seen)
      local left = read_all(r, { mode = "all_versions" })
      assert.are.equal(1, #left)
      assert.are.equal("c", left[1].metadata.id)
      assert.are.equal(3, #read_all(r))       -- latest mode keeps everything
      p:close()
    end)
end)
