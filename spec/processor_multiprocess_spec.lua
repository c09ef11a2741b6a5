local regolith = require "regolith"
local H = require "helper"

local function sleep(s) os.execute("sleep " .. s) end

-- Starts a Lua script in the background; returns its pid and output file.
local function spawn(script, ...)
  local out = H.tmpdir()
  local args = table.concat({ ... }, " ")
  local f = assert(io.popen(H.lua_cmd(script) .. " " .. args .. " > " .. out ..
    " 2>&1 & echo $!"))
  local pid = assert(tonumber(f:read("*l")))
  f:close()
  return pid, out
end

local function slurp(file)
  local f = io.open(file)
  if not f then return "" end
  local s = f:read("*a")
  f:close()
  return s
end

local function count(db, name)
  return db:stats().containers[name].items
end

-- Waits until check() is true or `seconds` pass; returns check()'s last value.
local function wait_for(seconds, check)
  local deadline = os.time() + seconds
  local v = check()
  while not v and os.time() <= deadline do
    sleep(0.1)
    v = check()
  end
  return v
end

describe("processors across processes", function()
  after_each(function() H.cleanup() end)

  H.local_it("hand a killed process's ranges to another once its leases expire",
    "a transactional handler's writes and its checkpoint commit together " ..
    "only locally; on a cluster they are parts in different places, and a " ..
    "process killed between them leaves the writes (docs/cluster.md, " ..
    "Atomicity across places)", function()
      local db, path = H.open()
      local src = assert(db:create_container("src", {
        partition_key = "/pk", physical_partitions = 4 }))
      local log = assert(db:create_container("log", { partition_key = "/pk" }))
      for i = 1, 200 do assert(src:create({ id = "i" .. i, pk = "p" .. i })) end
      local child = H.script([[
        local regolith = require "regolith"
        local db = assert(regolith.open(arg[1]))
        local log = assert(db:container("log"))
        local p = assert(db:processor({ name = "copy", source = "src",
          instance = "A", lease_seconds = 2, max_items = 5,
          handler = function(changes)
            for _, d in ipairs(changes) do
              assert(log:create({ id = d.id, pk = "all", by = "A" }))
            end
            local t = os.clock() + 0.05
            while os.clock() < t do end
          end }))
        p:run()
      ]])
      local pid, out = spawn(child, path)
      local started = wait_for(30, function() return count(db, "log") >= 20 end)
      os.execute("kill -9 " .. pid)
      assert.is_true(started, slurp(out))
      local by_a = count(db, "log")
      assert.is_true(by_a < 200)
      local failures = {}
      local p = assert(db:processor({ name = "copy", source = "src",
        instance = "B", lease_seconds = 2, max_items = 5,
        on_error = function(err) failures[#failures + 1] = err end,
        handler = function(changes)
          for _, d in ipairs(changes) do
            assert(log:create({ id = d.id, pk = "all", by = "B" }))
          end
        end }))
      wait_for(30, function()
        p:run({ timeout = 0.3 })
        return count(db, "log") == 200
      end)
      assert.are.same({}, failures)
      assert.are.equal(200, count(db, "log"))
      local who = { A = 0, B = 0 }
      for i = 1, 200 do
        local doc = assert(log:read("i" .. i, "all"))
        who[doc.by] = who[doc.by] + 1
      end
      assert.is_true(who.A >= 20)
      assert.is_true(who.B > 0)
      assert.are.equal(200, who.A + who.B)
      for _, range in ipairs(p:status().ranges) do
        assert.are.equal("B", range.owner)
        assert.are.equal(0, range.lag)
      end
      assert.are.equal(0, #p:dead_letters())
      db:close()
    end)

  it("never lets two processes work on one range at the same time", function()
    local db, path = H.open()
    local src = assert(db:create_container("src", {
      partition_key = "/pk", physical_partitions = 4 }))
    assert(db:create_container("log", { partition_key = "/pk" }))
    assert(db:create_container("busy", { partition_key = "/pk" }))
    local child = H.script([[
      local regolith = require "regolith"
      local db = assert(regolith.open(arg[1]))
      local me, seconds = arg[2], tonumber(arg[3])
      local log = assert(db:container("log"))
      local busy = assert(db:container("busy"))
      local p = assert(db:processor({ name = "pair", source = "src",
        instance = me, lease_seconds = 1, max_items = 3,
        transactional = false,
        handler = function(changes, info)
          local marker = "range" .. info.feed_range
          -- the marker exists while some process works on the range
          if not busy:create({ id = marker, pk = "x", by = me }) then
            assert(log:upsert({ id = "overlap-" .. me .. "-" .. os.time(),
              pk = "overlap", range = info.feed_range }))
          end
          for _, d in ipairs(changes) do
            assert(log:upsert({ id = d.id .. "@" .. me, pk = "all",
              item = d.id, by = me, range = info.feed_range }))
          end
          local t = os.clock() + 0.01
          while os.clock() < t do end
          busy:delete(marker, "x")
        end }))
      local n = assert(p:run({ timeout = seconds }))
      assert(p:close())                -- its leases back: the third takes them
      print("done", me, n)
    ]])
    local _, out_a = spawn(child, path, "A", 5)
    local _, out_b = spawn(child, path, "B", 5)
    for burst = 1, 12 do
      for i = 1, 25 do
        local id = "b" .. burst .. "-" .. i
        assert(src:create({ id = id, pk = "p" .. (burst * 25 + i) % 37 }))
      end
      sleep(0.25)
    end
    assert.is_truthy(wait_for(30, function()
      return slurp(out_a):find("done") and slurp(out_b):find("done")
    end), slurp(out_a) .. slurp(out_b))
    -- whatever the children left, a third instance finishes from the
    -- checkpoints
    local log = assert(db:container("log"))
    local p = assert(db:processor({ name = "pair", source = "src",
      instance = "P", handler = function(changes)
        for _, d in ipairs(changes) do
          assert(log:upsert({ id = d.id .. "@P", pk = "all", item = d.id,
            by = "P" }))
        end
      end }))
    p:run({ until_idle = true })
    local overlaps = assert(log:changes({ partition_key = "overlap" }))
    assert.are.equal(0, #overlaps)
    local seen, by = {}, { A = 0, B = 0, P = 0 }
    local rows = {}
    local tok
    repeat
      local page, info = assert(log:changes({ partition_key = "all",
        continuation = tok, max_items = 1000 }))
      for _, d in ipairs(page) do rows[#rows + 1] = d end
      tok = info.continuation
    until #page == 0
    for _, d in ipairs(rows) do
      seen[d.item] = true
      by[d.by] = by[d.by] + 1
    end
    for burst = 1, 12 do
      for i = 1, 25 do assert.is_true(seen["b" .. burst .. "-" .. i]) end
    end
    assert.is_true(by.A > 0, slurp(out_a))
    assert.is_true(by.B > 0, slurp(out_b))
    db:close()
  end)
end)
