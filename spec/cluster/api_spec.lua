-- What only a database on Redis Cluster has, or lacks (docs/cluster.md):
-- the URL and its options, what it refuses with 501, sync = "full"
-- answered by a replica (500 when none answers), the indexes a write must
-- declare learned on the way, the all-versions stream turned off,
-- verification of what is in Redis, tokens bound to their database.  (The
-- API itself is specified by the API specs, which make cluster-test runs
-- against the cluster too.)
local C = require "cluster.support"
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

  it("says what it cannot do with 501", function()
    for _, r in ipairs({ { db:backup("/tmp/x") }, { db:replace_container("c", {}) },
                         { db:set_throughput(1000) }, { db:group({ function() end }) },
                         { db:group_commit() }, { db:compact("/tmp/x") },
                         { assert(db:container("c")):bulk_load({ { id = "b", pk = "p" } }) },
                         { db:create_container("t", { partition_key = "/pk", throughput = 400 }) } }) do
      assert.is_nil(r[1])
      assert.are.equal(501, r[3])
      assert.matches("not available on a Redis Cluster", r[2])
    end
    assert.is_true((db:set_throughput(nil)))
  end)

  it("acknowledges a sync = full write only when a replica has it", function()
    local full = assert(regolith.open(url, { sync = "full", wait_timeout = 200 }))
    local fc = assert(full:container("c"))
    assert(fc:create({ id = "a", pk = "p" }))
    -- the replica of the partition's primary stops answering for a second
    local _, r = fc.S:pk("p")
    local slot = fc:bucket(r).slot
    full.redis:refresh()
    local primary = full.redis:node_for_slot(slot)
    local pid
    for _, nd in ipairs(C.nodes(full.redis)) do
      if nd.primary and nd.addr == primary then pid = nd.id end
    end
    local replica
    for _, nd in ipairs(C.nodes(full.redis)) do
      if nd.of == pid then replica = nd.addr end
    end
    assert.is_string(replica)
    local admin = assert(C.redis.connect(C.seeds))
    local sock = assert(admin:conn(replica))
    sock:send(C.redis.encode({ "DEBUG", "SLEEP", "1" }))
    local _, msg, st = fc:create({ id = "b", pk = "p" })
    assert.are.equal(500, st)
    assert.matches("not replicated", msg)
    sock:receive("*l")
    admin:close()
    -- its outcome was unknown: here, it was written
    assert(fc:read("b", "p"))
    full:close()
  end)

  it("learns the indexes a write must declare from the Function", function()
    assert(c:create({ id = "a", pk = "p", deep = { x = 1, y = { 2, 3 } }, s = "v" }))
    -- a fresh handle has seen none of them: its delete is told, and done
    local other = assert(regolith.open(url))
    local oc = assert(other:container("c"))
    assert(oc:delete("a", "p"))
    assert.is_true(#oc.known.list >= 4)
    assert(other:verify())
    other:close()
  end)

  it("does not record the all-versions feed when opened with all_versions = false", function()
    local lean = assert(regolith.open(url, { all_versions = false }))
    local lc = assert(lean:container("c"))
    assert(lc:create({ id = "a", pk = "p" }))
    local _, msg, st = lc:changes({ mode = "all_versions" })
    assert.are.equal(400, st)
    assert.matches("all_versions", msg)
    assert.are.equal(1, #assert(lc:changes()))
    lean:close()
  end)

  it("finds what is damaged in Redis with verify", function()
    assert(c:create({ id = "a", pk = "p", n = 1 }))
    assert(c:create({ id = "b", pk = "p", n = 2 }))
    assert.is_true((db:verify()))
    local admin = C.client()
    local _, r = c.S:pk("p")
    local b = c:bucket(r)
    -- an index entry gone
    local keys = admin:call_node(admin:node_for_slot(b.slot), "CLUSTER", "GETKEYSINSLOT", b.slot, 1000)
    local index
    for _, k in ipairs(keys) do if k:find(":x:", 1, true) then index = k end end
    local member = admin:call("ZRANGE", index, 0, 0)[1]
    assert(admin:call("ZREM", index, member))
    local ok, report = db:verify()
    assert.is_nil(ok)
    assert.matches("index entry", report)
    assert(admin:call("ZADD", index, 0, member))
    assert.is_true((db:verify()))
    -- a counter off
    assert(admin:call("HINCRBY", b.K, "n", 1))
    ok, report = db:verify()
    assert.is_nil(ok)
    assert.matches("bucket counters", report)
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
