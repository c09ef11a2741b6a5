-- A fourth primary added and drained while two processes write: it gets
-- the library by itself (add-node copies Functions), takes a share of the
-- slots (rebalance --cluster-use-empty-masters), gives them all back
-- (rebalance with weight 0), is forgotten (del-node) and stopped by pid.
-- Nothing acknowledged is lost; every invariant holds.
-- (docs/cluster.md, Fault tests.)
--
-- Each rebalance starts from settled nodes (tools/redis-cluster.sh settle:
-- every node sees every other reachable, one slot map) and its outcome is
-- checked: redis-cli leaves out, without a word, a node its seed marks
-- failing, and a node marked so by quorum for a moment (a loaded machine)
-- would make it balance the three old primaries and exit 0.  A rebalance
-- that moved nothing (that outcome, or a refusal before moving) is run
-- again, at most four times, saying why.
local C = require "cluster.support"
local regolith = require "regolith"

local ATTEMPTS = 4

-- Settles the nodes, or raises with what each node sees.
local function settle()
  local out, ok = C.sh("tools/redis-cluster.sh settle " .. C.dir .. " 60")
  assert(ok, out)
  return out
end

-- Runs `redis-cli --cluster rebalance seed <args>` until `reached()` holds
-- on settled nodes; returns redis-cli's last output.  A run that exits 0
-- without reaching it, or that refuses before moving a slot, is retried;
-- any other failure raises at once.
local function rebalance(seed, args, reached, goal)
  local said = {}
  for attempt = 1, ATTEMPTS do
    local before = settle()
    local out, ok = C.sh("redis-cli --cluster rebalance " .. seed .. " " .. args ..
      " --cluster-yes")
    out = out:gsub("\27%[[%d;]*m", "")
    assert(ok or out:find("Please fix your cluster problems", 1, true) or
      out:find("No such master node", 1, true), "the rebalance failed:\n" .. out)
    local after = settle()
    local done = reached()
    if ok and done then return out end
    said[#said + 1] = ("attempt %d (exit %s): %s\n%s%sredis-cli said:\n%s")
      :format(attempt, ok and "0" or "not 0", goal(), before, after, out)
    io.stderr:write("\n  grow: rebalance " .. said[#said])
  end
  error("the rebalance never reached its goal:\n" .. table.concat(said, "\n"))
end

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
    -- add returns once every node knows the new one (tools/redis-cluster.sh)
    admin.library = { name = "regolith", version_function = "rg_version" }
    local _, version = C.layout.library()
    assert.are.equal(version, admin:library_version(addr))
    local owned
    local function count()
      admin:refresh()
      owned = 0
      for s = 0, 16383 do if admin:node_for_slot(s) == addr then owned = owned + 1 end end
      return owned
    end
    rebalance(seed, "--cluster-use-empty-masters", function() return count() > 1000 end,
      function()
        return "the new primary took " .. owned .. " slots" .. (owned == 0 and
          " (redis-cli left it out: its seed saw it failing or disconnected then)" or "")
      end)
    assert.is_true(owned > 1000, "the new primary took " .. owned .. " slots")
    local took = owned
    rebalance(seed, "--cluster-weight " .. added.id .. "=0",
      function() return count() == 0 end,
      function() return "the new primary kept " .. owned .. " slots" end)
    assert.are.equal(0, owned)
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
      "and gave them back\n"):format(t.writes, #t.doubt + t.inc_doubt, took))
    admin:close()
    db:close()
  end)
end)
