-- A processor instance killed (kill -9) in the middle of a batch: another
-- instance takes its leases only once they have expired, the dead one's
-- late checkpoint would be refused, every change is delivered at least
-- once, and a transactional processor's effects (made through the
-- idempotency tokens its writes carry) happen exactly once.
-- (docs/cluster.md, Fault tests.)
local C = require "cluster.support"
local regolith = require "regolith"
local socket = require "socket"

describe("cluster processors", function()
  if not C.ready(pending) then return end
  local N = 40

  local function setup()
    local url = "redis://" .. C.seeds .. "/" .. C.fresh_db()
    local db = assert(regolith.open(url, { sync = "none" }))
    local src = assert(db:create_container("src", { partition_key = "/pk",
      physical_partitions = 4 }))
    local dst = assert(db:create_container("dst", { partition_key = "/pk" }))
    C.counter(dst)
    for i = 1, N do assert(src:create({ id = "i" .. i, pk = "k" .. i })) end
    return db, url, src, dst
  end

  -- Runs a child instance until it is mid-batch, kills it; then this
  -- process's instance runs until nothing is left.  Returns the counter,
  -- the killed instance's ranges, and when each was first delivered here.
  local function kill_mid_batch(transactional)
    local db, url, _, dst = setup()
    local name = transactional and "tx" or "plain"
    local marker = os.tmpname()
    os.remove(marker)
    local kid = C.spawn("processor.lua", url, name, "doomed", tostring(transactional), marker)
    local pid
    assert.is_true(C.wait_until(30, function()
      local f = io.open(marker)
      if f then pid = f:read("*l"); f:close() end
      return pid ~= nil and pid ~= ""
    end), "the child never reached its batch")
    local seen = {}
    local p = assert(db:processor({ name = name, source = "src", instance = "survivor",
      lease_seconds = 2, max_items = 5, transactional = transactional,
      handler = function(changes, info)
        seen[info.feed_range] = seen[info.feed_range] or socket.gettime()
        for _ = 1, #changes do assert(dst:execute("inc", "counter")) end
      end }))
    local held = {}
    for _, r in ipairs(assert(p:status()).ranges) do
      if r.owner == "doomed" then held[r.range] = r.expires end
    end
    assert.is_true(select(2, C.sh("kill -9 " .. pid)))
    local killed = socket.gettime()
    kid:wait(10)
    os.remove(marker)
    assert.is_true(C.wait_until(30, function()
      p:run({ until_idle = true })
      return (p:lag()) == 0
    end), "the survivor did not catch up")
    p:close()
    local counter = assert(dst:read("counter", "counter")).n
    db:close()
    return counter, held, seen, killed
  end

  it("takes a dead instance's leases only once they expired, and delivers every change", function()
    local counter, held, seen, killed = kill_mid_batch(false)
    assert.is_true(next(held) ~= nil, "the child held no lease")
    for range, expires in pairs(held) do
      assert.is_truthy(seen[range])
      assert.is_true(seen[range] >= killed + expires - 0.25,
        ("range %d taken %.2f s after the kill, its lease had %.2f s"):format(
          range, seen[range] - killed, expires))
    end
    assert.is_true(counter >= N, "at least once: " .. counter)
  end)

  it("makes a transactional processor's effects exactly once", function()
    local counter = kill_mid_batch(true)
    assert.are.equal(N, counter)
  end)

  it("refuses the checkpoint of an instance whose lease was taken over", function()
    local db = setup()
    local a = assert(db:processor({ name = "late", source = "src", instance = "a",
      lease_seconds = 1, max_items = 5, transactional = false,
      handler = function() end }))
    local state = a.state
    local ranges = assert(state:maintain())
    assert.is_true(#ranges >= 1)
    local n = state:read(ranges[1])
    assert.is_true(n >= 1)
    socket.sleep(1.2)                    -- the lease expires
    local b = assert(db:processor({ name = "late", source = "src", instance = "b",
      lease_seconds = 5, handler = function() end }))
    assert(b.state:maintain())
    local ok, msg, status = state:commit(ranges[1])
    assert.is_nil(ok)
    assert.are.equal(409, status)
    assert.matches("lost", msg)
    b:close()
    a:close()
    db:close()
  end)

  -- A close whose write is refused (another client changed a lease record
  -- between its read and its apply) runs again; that run too must give
  -- the leases back.
  it("gives the leases back on close when its first write is refused", function()
    local db, url = setup()
    local other = assert(regolith.open(url, { sync = "none" }))
    local a = assert(db:processor({ name = "shut", source = "src", instance = "a",
      lease_seconds = 30, handler = function() end }))
    assert.are.equal(4, #assert(a.state:maintain()))
    local b = assert(other:processor({ name = "shut", source = "src", instance = "b",
      lease_seconds = 30, handler = function() end }))
    assert.are.equal(0, #assert(b.state:maintain()))
    assert.are.equal(2, #assert(a.state:maintain()))   -- gives two back
    -- just before a's next apply, b takes the two free ranges
    local D = rawget(a.state, "__D")
    local pipeline = D.redis.pipeline
    local refused = false
    D.redis.pipeline = function(self, cmds)
      local fcall = cmds[1] and tostring(cmds[1][2]) == "rg_apply"
      if fcall and not refused then
        refused = true
        assert.are.equal(2, #assert(b.state:maintain()))
      end
      return pipeline(self, cmds)
    end
    local conflicts = require("regolith.cluster").stats.conflicts
    local ok, msg = a:close()
    D.redis.pipeline = nil
    assert.is_true(ok, msg)
    assert.is_true(refused)
    assert.is_true(require("regolith.cluster").stats.conflicts > conflicts,
      "the close's first apply was not refused")
    -- every range is b's now, or free: none is left to a
    local view = assert(require("regolith.processor").inspect(other, "src", "shut"))
    local free = 0
    for _, r in ipairs(assert(view:status()).ranges) do
      assert.are_not.equal("a", r.owner)
      if r.owner == nil then free = free + 1 end
    end
    view:close()
    assert.are.equal(2, free)
    assert.are.equal(4, #assert(b.state:maintain()))   -- a is gone: all b's
    b:close()
    other:close()
    db:close()
  end)
end)
