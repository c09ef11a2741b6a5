-- What only a database on Redis Cluster has, or lacks (docs/cluster.md):
-- the URL and its options, what it refuses with 501, sync = "full"
-- answered by a replica (500 when none answers),
-- what the engine runs there that a second implementation could not
-- (bulk_load, replace_container), another handle's writes seen,
-- verification of what is in Redis, tokens bound to their database.  (The
-- API itself is specified by the API specs, which make cluster-test runs
-- against the cluster too.)
local C = require "cluster.support"
local layout = require "regolith.cluster.layout"
local regolith = require "regolith"

describe("cluster database", function()
  if not C.ready(pending) then return end
  local url, db, c

  before_each(function()
    url = "redis://" .. C.seeds .. "/" .. C.fresh_db()
    db = assert(regolith.open(url))
    c = assert(db:create_container("c", { partition_key = "/pk" }))
  end)
  after_each(function() db:close() end)

  it("opens from a URL, and refuses bad ones and local-only options", function()
    local _, msg, st = regolith.open("redis://" .. C.seeds)
    assert.are.equal(400, st)
    assert.matches("redis://host:port", msg)
    _, msg, st = regolith.open("redis://" .. C.seeds .. "/bad name")
    assert.are.equal(400, st)
    assert.has_error(function() regolith.open(url, { map_size = 2 ^ 20 }) end,
      "open: option 'map_size' does not apply to a Redis Cluster")
    assert.has_error(function() regolith.open(url, { sync = "sometimes" }) end)
    _, msg, st = regolith.open("redis://127.0.0.1:1/x", { retry_seconds = 0.2 })
    assert.are.equal(500, st)
    assert.matches("cannot reach", msg)
    -- the same database from another handle
    local other = assert(regolith.open(url))
    assert.are.same({ "c" }, other:containers())
    other:close()
    assert.matches("^regolith.db %(redis://", tostring(db))
  end)

  it("says what it cannot do with 501, and runs what the engine runs", function()
    for _, r in ipairs({ { "keeps no files", db:backup("/tmp/x") },
                         { "keeps no files", db:compact("/tmp/x") },
                         { "write_queue is not available", db:write_queue() } }) do
      assert.is_nil(r[2])
      assert.are.equal(501, r[4])
      assert.matches(r[1], r[3])
    end
    -- throughput budgets run, shared through Redis (throughput_spec)
    assert(db:set_throughput(1000))
    assert(db:create_container("t", { partition_key = "/pk", throughput = 400 }))
    assert(db:set_throughput(nil))
    -- a vector index is kept (one instance per bucket: query_parity_spec)
    local v = assert(db:create_container("v", { partition_key = "/pk",
      vector_embeddings = { { path = "/e", data_type = "float32", dimensions = 3, distance_function = "cosine" } },
      indexing = { vector_indexes = { { path = "/e", type = "flat" } } } }))
    assert(v:create({ id = "a", pk = "p", e = { 1, 0, 0 } }))
    assert.are.same({ "a" }, assert(v:query(
      "SELECT TOP 1 VALUE c.id FROM c ORDER BY VectorDistance(c.e, [1, 0, 0])")))
    -- a full-text index is kept (one instance per bucket: query_parity_spec),
    -- whether created with the container or added by a replace
    local ftp = { paths = { { path = "/text" } } }
    local g = assert(db:create_container("g", { partition_key = "/pk", full_text = ftp,
      indexing = { full_text = { "/text" } } }))
    assert(g:create({ id = "a", pk = "p", text = "bells ring" }))
    local f = assert(db:create_container("f", { partition_key = "/pk", full_text = ftp }))
    assert(f:create({ id = "a", pk = "p", text = "bells ring" }))
    assert(db:replace_container("f", { partition_key = "/pk", full_text = ftp,
      indexing = { fullTextIndexes = { { path = "/text" } } } }))
    for _, k in ipairs({ g, db:container("f") }) do
      local rows, info = k:query("SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'bell')")
      assert.are.same({ "a" }, rows)
      assert.is_true(info.full_text_read > 0)
    end
    assert.is_true((db:set_throughput(nil)))
    -- the engine's queue is a local database's only: a request handed to
    -- it here is the caller's to run (false), and nothing ran or counted
    local ran = false
    assert.is_false(db:_queue('{"c":"c","m":"create","n":1,"a":{"1":{"id":"q","pk":"p"}}}',
      function() ran = true; return true, "R{}" end))
    assert.is_false(ran)
    assert.are.same({ batches = 0, members = 0, waiting = 0 }, db:stats().queue)
    assert.are.equal(404, select(3, c:read("q", "p")))
    -- what a second implementation could not do: the engine does it here too
    local r = assert(c:bulk_load({ { id = "b", pk = "p" }, { id = "d", pk = "q" } }))
    assert.are.equal(2, r.written)
    assert(db:replace_container("c", { partition_key = "/pk", default_ttl = 3600 }))
    assert.are.equal(3600, c:spec().default_ttl)
    assert.are.same({ "b", "d" }, assert(c:query("SELECT VALUE c.id FROM c ORDER BY c.id")))
  end)

  it("acknowledges a sync = full write only when a replica has it", function()
    if not C.dir then pending("needs RG_CLUSTER_DIR to stop a replica by pid"); return end
    local full = assert(regolith.open(url, { sync = "full", wait_timeout = 200 }))
    local fc = assert(full:container("c"))
    assert(fc:create({ id = "a", pk = "p" }))
    -- the replica of the primary of the container's one bucket is
    -- stopped (not merely asked to sleep: a busy machine could let it take
    -- the write before the request to sleep) while the write waits for it
    local admin = C.client()
    local slot = layout.slot(url:match("/([^/]+)$"), 1, 0, 1)
    admin:refresh()
    local primary = admin:node_for_slot(slot)
    local pid
    for _, nd in ipairs(C.nodes(admin)) do
      if nd.primary and nd.addr == primary then pid = nd.id end
    end
    local replica
    for _, nd in ipairs(C.nodes(admin)) do
      if nd.of == pid then replica = nd.addr end
    end
    assert.is_string(replica)
    admin:close()
    C.pause_node(replica)
    finally(function() C.resume_node(replica) end)
    local _, msg, st = fc:create({ id = "b", pk = "p" })
    C.resume_node(replica)
    assert.are.equal(500, st)
    assert.matches("not replicated", msg)
    -- its outcome was unknown: here, it was written
    assert(fc:read("b", "p"))
    full:close()
  end)

  it("waits for a replica while it acknowledges more, and no longer once it stops", function()
    -- a scripted primary: ROLE answers its replica's acknowledged offset
    -- (one list per call), WAIT 1 how many replicas have the write
    local function node(offsets, waits)
      local seen = {}
      return { redis = {
        node_for = function() return "127.0.0.1:1" end,
        call_node = function(_, _, cmd)
          seen[#seen + 1] = cmd
          if cmd == "ROLE" then
            local o = table.remove(offsets, 1)
            return { "master", "100", o and { { "127.0.0.1", "2", tostring(o) } } or {} }
          end
          return table.remove(waits, 1)
        end }, wait_ms = 1, seen = seen }
    end
    local cluster = require "regolith.cluster"
    -- catching up: its offset moves from each WAIT to the next, then it has the write
    local D = node({ 10, 20, 30 }, { 0, 0, 1 })
    assert.is_true(cluster._replicated(D, "k"))
    assert.are.same({ "ROLE", "WAIT", "ROLE", "WAIT", "ROLE", "WAIT" }, D.seen)
    -- stopped: the same offset twice
    D = node({ 10, 20, 20 }, { 0, 0, 1 })
    assert.is_false(cluster._replicated(D, "k"))
    assert.are.same({ "ROLE", "WAIT", "ROLE", "WAIT", "ROLE" }, D.seen)
    -- no replica at all
    D = node({}, { 1 })
    assert.is_false(cluster._replicated(D, "k"))
  end)

  it("sees another handle's writes: the engine fetches what it lacks", function()
    assert(c:create({ id = "a", pk = "p", deep = { x = 1, y = { 2, 3 } }, s = "v" }))
    local other = assert(regolith.open(url))
    local oc = assert(other:container("c"))
    assert.are.equal("v", assert(oc:read("a", "p")).s)
    assert(oc:delete("a", "p"))
    assert.are.same({}, assert(c:query("SELECT * FROM c WHERE c.s = 'v'")))
    assert(other:verify())
    other:close()
  end)

  it("drops what another handle deleted from the global entries it keeps, once it fetches their range again", function()
    -- the catalog is kept from call to call (a container's entries trusted
    -- while its epoch holds); a listing fetches the catalog's range afresh,
    -- and the answer replaces what was kept in its span
    assert(db:create_container("d", { partition_key = "/pk" }))
    local other = assert(regolith.open(url))
    local function names()
      local out = {}
      for i, name in ipairs(assert(other:containers())) do out[i] = name end
      table.sort(out)
      return out
    end
    assert.are.same({ "c", "d" }, names())
    assert(db:delete_container("d"))
    assert.are.same({ "c" }, names())
    other:close()
  end)

  it("reads an item with one HGET while it keeps the catalog (meta_refresh)", function()
    local kept = assert(regolith.open(url, { meta_refresh = 60 }))
    local kc = assert(kept:container("c"))
    assert(kc:create({ id = "a", pk = "p", s = "v" }))   -- a write: checked
    assert(kc:read("a", "p"))
    local rc = C.client()
    local READS = { hget = true, hmget = true, fcall = true, fcall_ro = true,
      zrangebylex = true, zrevrangebylex = true }
    local function calls()              -- reads the primaries ran
      local n = {}
      for _, addr in ipairs(rc:primaries()) do
        local text = assert(rc:call_node(addr, "INFO", "commandstats"))
        for name, k in text:gmatch("cmdstat_([%w_|]+):calls=(%d+)") do
          if READS[name] then n[name] = (n[name] or 0) + tonumber(k) end
        end
      end
      return n
    end
    assert(c:upsert({ id = "a", pk = "p", s = "w" }))   -- another handle's
    local before = calls()
    assert.are.equal("w", assert(kc:read("a", "p")).s)
    local _, _, st = kc:read("b", "p")
    assert.are.equal(404, st)
    local after = calls()
    for name, k in pairs(after) do after[name] = k - (before[name] or 0) end
    for name, k in pairs(after) do if k == 0 then after[name] = nil end end
    assert.are.same({ hget = 2 }, after)
    rc:close()
    kept:close()
  end)

  it("reads a routed query's index entries from its partition's bucket alone", function()
    -- the items of 40 partitions in 8 buckets share the term; the query
    -- names one partition and seeks the index: every node but the one
    -- holding that partition's bucket stays out of it (meta_refresh: the
    -- catalog kept)
    assert(db:create_container("r", { partition_key = "/pk",
                                      physical_partitions = 8 }))
    local kept = assert(regolith.open(url, { meta_refresh = 60 }))
    local kc = assert(kept:container("r"))
    for p = 1, 40 do
      for i = 1, 3 do
        assert(kc:create({ id = ("i%d"):format(i), pk = ("p%d"):format(p),
                           t = "post", n = i }))
      end
    end
    local q = "SELECT c.id, c.n FROM c WHERE c.pk = 'p7' AND c.t = 'post' ORDER BY c.n"
    local function ids(rows)
      local out = {}
      for i, r in ipairs(rows) do out[i] = r.id .. "/" .. r.n end
      return out
    end
    local want = { "i1/1", "i2/2", "i3/3" }
    assert.are.same(want, ids(assert(kc:query(q))))
    local rc = C.client()
    local home = rc:node_for_slot(C.slot_of(url, kc, "p7"))
    local function reads()              -- Function calls, by primary
      local n = {}
      for _, addr in ipairs(rc:primaries()) do
        local text = assert(rc:call_node(addr, "INFO", "commandstats"))
        for name, k in text:gmatch("cmdstat_([%w_|]+):calls=(%d+)") do
          if name == "fcall" or name == "fcall_ro" then
            n[addr] = (n[addr] or 0) + tonumber(k)
          end
        end
      end
      return n
    end
    local before = reads()
    assert.are.same(want, ids(assert(kc:query(q))))
    local touched = {}
    for addr, k in pairs(reads()) do
      if k > (before[addr] or 0) then touched[#touched + 1] = addr end
    end
    assert.are.same({ home }, touched)
    rc:close()
    kept:close()
  end)

  it("follows another handle's changes of the catalog it keeps from call to call", function()
    local other = assert(regolith.open(url))
    local oc = assert(other:container("c"))
    assert(oc:create({ id = "a", pk = "p", n = 1 }))     -- its catalog kept
    assert(oc:read("a", "p"))
    assert(c:create_trigger("stamp", { type = "pre", automatic = true, source = [[
      return function(ctx) local d = ctx:body(); d.stamped = true; ctx:set_body(d) end]] }))
    assert(oc:create({ id = "b", pk = "p" }))            -- the new trigger runs
    assert.is_true(assert(c:read("b", "p")).stamped)
    assert(db:replace_container("c", { partition_key = "/pk",
      indexing = { excluded = { "/n/?" } } }))
    assert(oc:create({ id = "t", pk = "p", n = 2 }))     -- by the new policy
    assert(db:verify())
    assert(db:delete_container("c"))
    local _, _, st = oc:read("a", "p")                  -- gone for both
    assert.are.equal(404, st)
    _, _, st = oc:create({ id = "z", pk = "p" })
    assert.are.equal(404, st)
    other:close()
  end)

  it("writes one item in one round trip once it knows the catalog", function()
    local stats = require("regolith.cluster").stats
    assert(c:create({ id = "a", pk = "p", n = 1 }))     -- the catalog fetched
    local function rounds(f)
      local f0, a0 = stats.fetches, stats.applies
      assert(f())
      return { fetches = stats.fetches - f0, applies = stats.applies - a0 }
    end
    -- no fetch of the global place: the database's entries are trusted
    -- while the container's epoch holds, which the commit checks
    assert.are.same({ fetches = 0, applies = 1 },
      rounds(function() return c:create({ id = "b", pk = "p", n = 2 }) end))
    assert.are.same({ fetches = 0, applies = 1 },
      rounds(function() return c:upsert({ id = "c", pk = "q", n = 3 }) end))
    -- a replace and a delete read the item first: its bucket alone
    assert.are.same({ fetches = 1, applies = 1 },
      rounds(function() return c:replace({ id = "b", pk = "p", n = 4 }) end))
    assert.are.same({ fetches = 1, applies = 1 },
      rounds(function() return c:delete("c", "q") end))
    assert.are.equal(4, assert(c:read("b", "p")).n)
    assert(db:verify())
  end)

  it("follows another handle's change of the database's throughput", function()
    local other = assert(regolith.open(url))
    local oc = assert(other:container("c"))
    assert(oc:create({ id = "a", pk = "p" }))     -- the setting (none) kept
    assert(oc:read("a", "p"))
    assert(db:set_throughput(5))
    assert(db:create_container("later", { partition_key = "/pk" }))
    local ops = {}
    for i = 1, 10 do ops[i] = { op = "create", doc = { id = "x" .. i, pk = "p" } } end
    assert(c:batch("p", ops))                     -- 60 RU of 5: a debt
    local _, _, st = oc:create({ id = "b", pk = "p" })
    assert.are.equal(429, st)
    _, _, st = oc:read("a", "p")
    assert.are.equal(429, st)
    -- a container made after the change, opened by the handle that kept
    -- the setting from before it
    local lc = assert(other:container("later"))
    _, _, st = lc:read("a", "p")
    assert.are.equal(429, st)
    assert(db:set_throughput(nil))
    assert(oc:create({ id = "b", pk = "p" }))
    other:close()
  end)

  it("writes by the catalog as it is, even where a handle trusts what it fetched (meta_refresh)", function()
    local trusting = assert(regolith.open(url, { meta_refresh = 60 }))
    local tc = assert(trusting:container("c"))
    assert(tc:create({ id = "a", pk = "p" }))      -- the catalog fetched, kept
    assert(c:create_trigger("stamp", { type = "pre", automatic = true, source = [[
      return function(ctx) local d = ctx:body(); d.stamped = true; ctx:set_body(d) end]] }))
    assert(tc:create({ id = "b", pk = "p" }))      -- the new trigger runs
    assert.is_true(assert(c:read("b", "p")).stamped)
    assert.is_true(tc:read("b", "p").stamped)     -- reads may trust it
    trusting:close()
  end)

  it("finds what is damaged in Redis with verify", function()
    assert(c:create({ id = "a", pk = "p", n = 1 }))
    assert(c:create({ id = "b", pk = "p", n = 2 }))
    assert.is_true((db:verify()))
    local admin = C.client()
    local keys = layout.place_keys(url:match("/([^/]+)$"), 1, 0, 1)
    -- an index entry gone (z2: the index table's keys in the bucket)
    local index = keys[layout.TABLES + 2 + 1]
    local member = admin:call("ZRANGE", index, 0, 0)[1]
    assert(admin:call("ZREM", index, member))
    local ok, report = db:verify()
    assert.is_nil(ok)
    assert.matches("index", report)
    assert(admin:call("ZADD", index, 0, member))
    assert.is_true((db:verify()))
    -- an item gone (h1, z1: the items table)
    local items_z = keys[layout.TABLES + 1 + 1]
    local ikey = admin:call("ZRANGE", items_z, 0, 0)[1]
    local doc = admin:call("HGET", keys[1 + 1], ikey)
    assert(admin:call("HDEL", keys[1 + 1], ikey))
    assert(admin:call("ZREM", items_z, ikey))
    ok, report = db:verify()
    assert.is_nil(ok)
    assert.is_string(report)
    assert(admin:call("HSET", keys[1 + 1], ikey, doc))
    assert(admin:call("ZADD", items_z, 0, ikey))
    assert.is_true((db:verify()))
    admin:close()
  end)

  it("refuses a database of the earlier key layout with 426, and changes nothing", function()
    local name = C.fresh_db()
    local admin = C.client()
    local catalog = layout.old_catalog(name)
    assert(admin:call("HSET", catalog, "n:c", "1"))
    local _, msg, st = regolith.open("redis://" .. C.seeds .. "/" .. name)
    assert.are.equal(426, st)
    assert.matches("layout before this release", msg)
    assert.matches("Moving a database of the earlier layout", msg)
    assert.are.equal(1, admin:call("EXISTS", catalog))
    assert.are.equal(0, admin:call("EXISTS", layout.place_keys(name, layout.GLOBAL, 0, 1)[1]))
    admin:close()
  end)

  it("refuses tokens from another database or container, and altered ones", function()
    for i = 1, 5 do assert(c:create({ id = "i" .. i, pk = "p" .. i })) end
    local _, info = assert(c:query("SELECT * FROM c", nil, { max_items = 2 }))
    local tok = info.continuation
    local other = assert(regolith.open("redis://" .. C.seeds .. "/" .. C.fresh_db()))
    local oc = assert(other:create_container("c", { partition_key = "/pk" }))
    local _, _, st = oc:query("SELECT * FROM c", nil, { continuation = tok })
    assert.are.equal(400, st)
    _, _, st = c:query("SELECT * FROM c", nil, { continuation = tok:sub(1, -2) .. "x" })
    assert.are.equal(400, st)
    local _, finfo = assert(c:changes({ max_items = 1 }))
    _, _, st = oc:changes({ continuation = finfo.continuation })
    assert.are.equal(400, st)
    other:close()
  end)
end)
