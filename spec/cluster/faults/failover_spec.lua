-- A primary killed (kill -9) while two processes write with sync = "full":
-- its replica takes over, no acknowledged write is lost, the counter the
-- writers increment through a procedure ends within [acknowledged,
-- acknowledged + in doubt], every invariant holds; the old primary comes
-- back as a replica, and a manual failover (retried) gives it its role
-- back.  (docs/cluster.md, Fault tests.)
local C = require "cluster.support"
local H = require "helper"
local regolith = require "regolith"
local socket = require "socket"

describe("cluster failover", function()
  if not C.ready(pending) then return end
  if not os.getenv("RG_CLUSTER_DIR") and not C.dir then
    pending("needs the cluster's directory to kill nodes by pid")
    return
  end

  it("loses no acknowledged write when a primary dies under sync = full writes", function()
    local url = "redis://" .. C.seeds .. "/" .. C.fresh_db()
    local db = assert(regolith.open(url, { retry_seconds = 30 }))
    local c = assert(db:create_container("w", { partition_key = "/pk",
      physical_partitions = 8 }))
    C.counter(c)
    local writers = C.start_writers(url, "w", 9)
    socket.sleep(2)
    -- the primary of the counter's slot
    local slot = C.slot_of(url, c, "counter")
    local probe = C.client()
    local victim = probe:node_for_slot(slot)
    probe:close()
    local pid = assert(C.pid_of(victim))
    local t0 = socket.gettime()
    assert.is_true(select(2, C.sh("kill -9 " .. pid)))
    local admin = assert(C.redis.connect(C.seeds, { retry_seconds = 1 }))
    assert.is_true(C.wait_until(20, function()
      admin:refresh()
      local now = admin:node_for_slot(slot)
      return now ~= nil and now ~= victim
    end), "the replica was not promoted")
    local promoted = socket.gettime() - t0
    local out, ok = C.restart_node(victim)
    assert.is_true(ok, out)
    local t = C.finish_writers(writers)
    assert.are.equal(2, t.done)
    -- every acknowledged create is there; the counter is within bounds
    for _, id in ipairs(t.ok) do
      local w, i = id:match("^(w%d)%-(%d+)$")
      assert(c:read(id, "k" .. (tonumber(i) % 16)), id .. " was acknowledged and is lost")
      assert(w)
    end
    local counter = assert(c:read("counter", "counter"))
    assert.is_true(counter.n >= t.inc_ok and counter.n <= t.inc_ok + t.inc_doubt,
      ("counter %d, acknowledged %d, in doubt %d"):format(counter.n, t.inc_ok, t.inc_doubt))
    assert(db:verify())
    -- the old primary is a replica; a manual failover gives it its role back
    local role
    for _, nd in ipairs(C.nodes(admin)) do
      if nd.addr == victim then role = nd.primary and "primary" or "replica" end
    end
    assert.are.equal("replica", role)
    assert.is_true(C.wait_until(30, function()
      admin:call_node(victim, "CLUSTER", "FAILOVER")
      socket.sleep(0.5)
      admin:refresh()
      return admin:node_for_slot(slot) == victim
    end), "the manual failover did not take")
    local rout, ready = C.sh("tools/redis-cluster.sh wait " .. C.dir)
    assert.is_true(ready, rout)
    io.stderr:write(("\n  failover: %d writes (%d acknowledged creates, %d in doubt; " ..
      "%d increments, %d in doubt), replica promoted %.1f s after the kill\n"):format(
      t.writes, #t.ok, #t.doubt, t.inc_ok, t.inc_doubt, promoted))
    admin:close()
    db:close()
  end)
end)
