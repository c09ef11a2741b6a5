-- A full-text build cut off between buckets: on a cluster a container's
-- full-text index has one instance per bucket, each with its own build
-- record, and a build's parts apply one bucket at a time (docs/cluster.md,
-- *Atomicity across places*), so a client dying mid-build leaves some
-- buckets without their part.  Made here by removing one non-zero
-- bucket's part after a build (its table 10, records and build record):
-- queries must give a local database's rows and scores (they scan while a
-- bucket lacks its part), a write into that bucket must succeed and build
-- the bucket's part from its items in the same commit, and verify must be
-- clean after it (docs/search.md, *On a Redis Cluster*).
local C = require "cluster.support"
local H = require "helper"
local layout = require "regolith.cluster.layout"
local regolith = require "regolith"

local WORDS = { "bell", "lamp", "saddle", "rope", "lantern", "kettle", "anchor", "compass" }


local function items(n)
  local rand, out = C.rng(2026), {}
  for i = 1, n do
    local t = {}
    for j = 1, rand(9) + 2 do t[j] = WORDS[rand(rand(#WORDS))] end
    out[i] = { id = ("f%03d"):format(i), pk = "p" .. rand(24), text = table.concat(t, " ") }
  end
  return out
end

local SPEC = { partition_key = "/pk", physical_partitions = 8,
  full_text = { paths = { { path = "/text" } } },
  indexing = { full_text = { "/text" } } }

-- (ranked queries without TOP: ties at a cut could take other rows)
local QUERIES = {
  "SELECT c.id, FullTextScore(c.text, 'bell', 'lamp') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')",
  "SELECT c.id, FullTextScore(c.text, 'rope', 'anchor') AS s FROM c WHERE FullTextContainsAll(c.text, 'rope', 'anchor') ORDER BY RANK FullTextScore(c.text, 'rope', 'anchor')",
  "SELECT c.id, FullTextScore(c.text, 'saddle') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'saddle')",
  "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'lantern')",
  "SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'bell', 'rope')",
  "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'compass', 'kettles')",
}

-- A query's rows as sorted texts (an id, or id=score with the score's
-- every digit), each ranked query's scores checked to fall.
local function rows(c, sql)
  local rs, info, st = c:query(sql)
  assert(rs, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(st)))
  local out, last = {}, math.huge
  for _, r in ipairs(rs) do
    if type(r) == "table" then
      assert.is_true(r.s <= last, sql)
      last = r.s
      out[#out + 1] = r.id .. "=" .. ("%.17g"):format(r.s)
    else
      out[#out + 1] = r
    end
  end
  table.sort(out)
  return out, info
end

describe("cluster full-text index with a bucket's part lost", function()
  if not C.ready(pending) then return end
  local dir, name, ldb, rdb, lk, rk

  before_each(function()
    dir = H.tmpdir()
    name = C.fresh_db()
    ldb = assert(regolith.open(dir, { sync = "none" }))
    rdb = assert(regolith.open("redis://" .. C.seeds .. "/" .. name))
    local its = items(200)
    for _, db in ipairs({ ldb, rdb }) do
      local k = assert(db:create_container("ft", SPEC))
      local bulk = {}
      for i = 1, 100 do bulk[i] = its[i] end
      assert(k:bulk_load(bulk))
      for i = 101, 200 do assert(k:create(its[i])) end
    end
    lk, rk = ldb:container("ft"), rdb:container("ft")
  end)

  after_each(function()
    ldb:close()
    rdb:close()
    H.run("rm -rf '" .. dir .. "'")
  end)

  local function same(label)
    for _, sql in ipairs(QUERIES) do
      local a = rows(lk, sql)
      local b = rows(rk, sql)
      assert.is_true(#a > 0, sql)
      assert.are.same(a, b, label .. ": " .. sql)
    end
  end

  -- Removes the part of a non-zero bucket holding some partition: its
  -- table 10 (the hash and the sorted keys).  Returns the partition key.
  local function lose_part()
    for i = 1, 24 do
      local cid, bucket, buckets = rk:_remote_bucket("p" .. i)
      if bucket > 0 then
        local keys = layout.place_keys(name, cid, bucket, buckets)
        local c = C.client()
        assert.is_true(assert(c:call("HLEN", keys[11])) > 0)
        assert(c:call("DEL", keys[11], keys[layout.TABLES + 11]))
        c:close()
        return "p" .. i, keys[11]
      end
    end
    error("no partition in a non-zero bucket")
  end

  it("answers as a local database, builds the bucket's part at its next write, and verifies clean", function()
    same("after the build")
    assert.is_true(rdb:verify())
    local pk, h = lose_part()
    local ok, report = rdb:verify()
    assert.is_nil(ok)
    assert.matches("build record", report, 1, true)
    -- queries scan while a bucket lacks its part: the same rows and scores
    same("with a bucket's part lost")
    local _, info = rk:query(QUERIES[1])
    assert.are.equal(0, info.full_text_read or 0)
    -- reads and writes elsewhere go on; a write into the bucket builds its
    -- part with the item in it
    for _, k in ipairs({ lk, rk }) do
      assert(k:upsert({ id = "g001", pk = "p1", text = "bell lamp lamp" }))
      assert(k:create({ id = "new", pk = pk, text = "bell lantern rope anchor rope" }))
    end
    local c = C.client()
    assert.is_true(assert(c:call("HLEN", h)) > 0)
    c:close()
    assert.is_true(rdb:verify())
    same("after a write into the bucket")
    _, info = rk:query(QUERIES[1])
    assert.is_true(info.full_text_read > 0, "the index is used again")
    -- and kept by the writes after it
    for _, k in ipairs({ lk, rk }) do
      assert(k:replace({ id = "new", pk = pk, text = "kettle compass saddle" }))
      assert(k:delete("new", pk))
    end
    same("after more writes into the bucket")
    assert.is_true(rdb:verify())
  end)

  it("builds the part of every bucket a batch writes into, and a replace adding the index builds them all", function()
    local pk = lose_part()
    local ops = {}
    for i = 1, 5 do
      ops[i] = { op = "create", doc = { id = "b" .. i, pk = pk, text = "saddle rope lamp " .. WORDS[i] } }
    end
    for _, k in ipairs({ lk, rk }) do assert(k:batch(pk, ops)) end
    assert.is_true(rdb:verify())
    same("after a batch into the bucket")
    -- the index removed and added again: every bucket built by the replace
    lose_part()
    for _, db in ipairs({ ldb, rdb }) do
      local spec = {}
      for k, v in pairs(SPEC) do spec[k] = v end
      spec.indexing = nil
      assert(db:replace_container("ft", spec))
      assert(db:replace_container("ft", SPEC))
    end
    lk, rk = ldb:container("ft"), rdb:container("ft")
    assert.is_true(rdb:verify())
    same("after a replace added the index again")
    local _, info = rk:query(QUERIES[1])
    assert.is_true(info.full_text_read > 0, "the index is used")
  end)
end)
