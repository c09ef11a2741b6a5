-- A fourth primary added and drained while two processes write: it gets
-- the library by itself (add-node copies Functions), takes a share of the
-- slots (rebalance --cluster-use-empty-masters), gives them all back
-- (rebalance with weight 0), is forgotten (del-node) and stopped by pid.
-- Nothing acknowledged is lost; every invariant holds.
-- (docs/cluster.md, Fault tests.)
local C = require "cluster.support"
local regolith = require "regolith"

describe("cluster growth", function()
  if not C.ready(pending) then return end

  it("adds a primary and drains it under load, losing nothing", function()
    local url = "redis://" .. C.seeds .. "/" .. C.fresh_db()
    local db = assert(regolith.open(url, { retry_seconds = 30 }))
    local c = assert(db:create_container("w", { partition_key = "/pk",
      physical_partitions = 16 }))
    C.counter(c)
    local admin = assert(C.redis.connect(C.seeds))
    local seed = admin:primaries()[1]
    local added
    finally(function()
      if added then
        C.sh("redis-cli --cluster fix " .. seed .. " --cluster-yes")
        C.sh("redis-cli --cluster rebalance " .. seed .. " --cluster-weight " ..
          added.id .. "=0 --cluster-yes")
        C.sh("tools/redis-cluster.sh remove " .. C.dir .. " " .. added.port)
      end
    end)
    -- the writers do not wait for replicas: the new primary has none
    local writers = C.start_writers(url, "w", 10, "lazy")
    local out, ok = C.sh("tools/redis-cluster.sh add " .. C.dir)
    assert.is_true(ok, out)
    added = { port = out:match("(%d+)%s*$") }
    local addr = "127.0.0.1:" .. added.port
    added.id = assert(admin:call_node(addr, "CLUSTER", "MYID"))
    -- ready before slots move (moving earlier can leave a slot half-moved)
    assert.is_true(C.wait_until(20, function()
      local info = admin:call_node(addr, "CLUSTER", "INFO")
      return type(info) == "string" and info:find("cluster_state:ok", 1, true) ~= nil
    end))
    assert.is_true(C.wait_agreement(seed), "the nodes never agreed")
    admin.library = { name = "regolith", version_function = "rg_version" }
    local _, version = C.layout.library()
    assert.are.equal(version, admin:library_version(addr))
    out, ok = C.sh("redis-cli --cluster rebalance " .. seed ..
      " --cluster-use-empty-masters --cluster-yes")
    assert.is_true(ok, out)
    admin:refresh()
    local owned = 0
    for s = 0, 16383 do if admin:node_for_slot(s) == addr then owned = owned + 1 end end
    assert.is_true(owned > 1000, "the new primary took " .. owned ..
      " slots; the rebalance said:\n" .. tostring(out))
    assert.is_true(C.wait_agreement(seed), "the nodes never agreed")
    out, ok = C.sh("redis-cli --cluster rebalance " .. seed .. " --cluster-weight " ..
      added.id .. "=0 --cluster-yes")
    assert.is_true(ok, out)
    assert.is_true(C.wait_agreement(seed), "the nodes never agreed")
    out, ok = C.sh("tools/redis-cluster.sh remove " .. C.dir .. " " .. added.port)
    assert.is_true(ok, out)
    added = nil
    local t = C.finish_writers(writers)
    for _, id in ipairs(t.ok) do
      assert(c:read(id, "k" .. (tonumber(id:match("%-(%d+)$")) % 16)), id .. " is lost")
    end
    local counter = assert(c:read("counter", "counter"))
    assert.is_true(counter.n >= t.inc_ok and counter.n <= t.inc_ok + t.inc_doubt)
    assert(db:verify())
    io.stderr:write(("\n  grow: %d writes (%d in doubt) while a primary took %d slots " ..
      "and gave them back\n"):format(t.writes, #t.doubt + t.inc_doubt, owned))
    admin:close()
    db:close()
  end)
end)
