-- The Redis Cluster client (lua/regolith/cluster/redis.lua): routing,
-- redirections, retries, reconnection, pipelining, errors, transports, and
-- the Functions library's loading.  The transport choice is checked here
-- with an emulated ngx; cosocket_spec.lua runs the client inside nginx.
local C = require "cluster.support"
local redis, layout = C.redis, C.layout

describe("cluster client", function()
  if not C.ready(pending) then return end
  local c

  before_each(function() c = C.client() end)
  after_each(function() c:close() end)

  it("hashes keys to the slots Redis computes, hash tags included", function()
    assert.equal(12739, redis.slot("123456789"))
    assert.equal(redis.slot("{user1000}.following"), redis.slot("{user1000}.followers"))
    assert.equal(redis.slot("foo{}{bar}"), redis.crc16("foo{}{bar}") % 16384)
    assert.equal(redis.slot("foo{{bar}}zap"), redis.slot("{bar"))
    assert.equal(redis.slot("foo{bar}{zap}"), redis.slot("bar"))
    local addr = c:primaries()[1]
    for i = 1, 200 do
      local key = ("k%d\0\255{%s}x"):format(i, i % 3 == 0 and "" or tostring(i * 7))
      assert.equal(c:call_node(addr, "CLUSTER", "KEYSLOT", key), redis.slot(key))
    end
  end)

  it("sends each command to the primary that serves its slot", function()
    local db = C.fresh_db()
    for i = 1, 60 do
      local key = db .. ":" .. i
      assert.equal("OK", c:call("SET", key, i))
      -- asked directly, with no redirection, the node has it
      assert.equal(tostring(i), c:call_node(c:node_for(key), "GET", key))
    end
    assert.equal(0, c.stats.moved + c.stats.ask)
    assert.equal(3, #c:primaries())
  end)

  it("answers nil, message, kind: redis errors, and unreachable nodes", function()
    local db = C.fresh_db()
    assert(c:call("SET", db, "x"))
    local v, msg, kind = c:call("HGET", db, "f")
    assert.is_nil(v)
    assert.matches("^WRONGTYPE", msg)
    assert.equal("redis", kind)
    assert.equal(redis.null, c:call("GET", db .. ":missing"))
    local d, derr, dkind = redis.connect("127.0.0.1:1", { retry_seconds = 0.1 })
    assert.is_nil(d)
    assert.matches("slot map", derr)
    assert.equal("connection", dkind)
  end)

  it("pipelines commands across nodes in one round trip per node", function()
    local db = C.fresh_db()
    local cmds, nodes = {}, {}
    for i = 1, 300 do
      local key = db .. ":" .. i
      nodes[c:node_for(key)] = true
      cmds[#cmds + 1] = { "SET", key, "v" .. i }
      cmds[#cmds + 1] = { "GET", key }
    end
    cmds[#cmds + 1] = { "HGET", db .. ":1", "f" }           -- an error in the middle
    cmds[#cmds + 1] = { "INCR", db .. ":counter" }
    local count = 0
    for _ in pairs(nodes) do count = count + 1 end
    assert.equal(3, count)
    local before = c.stats.round_trips
    local res = c:pipeline(cmds)
    assert.equal(count, c.stats.round_trips - before)
    for i = 1, 300 do
      assert.equal("OK", res[2 * i - 1])
      assert.equal("v" .. i, res[2 * i])
    end
    assert.is_true(redis.is_error(res[601]))
    assert.matches("^WRONGTYPE", res[601].message)
    assert.equal(1, res[602])
  end)

  it("speaks RESP3 when asked: maps, nulls and doubles", function()
    local c3 = C.client({ protocol = 3 })
    local db = C.fresh_db()
    assert.equal(2, c3:call("HSET", db, "a", "1", "b", "2"))
    local m = c3:call("HGETALL", db)
    assert.same({ a = "1", b = "2" }, m)
    assert.equal(redis.null, c3:call("GET", db .. ":none"))
    assert.equal(1.5, c3:call("ZINCRBY", db .. ":z", 1.5, "m"))
    c3:close()
  end)

  it("follows MOVED after a slot is migrated, and refreshes its map", function()
    local db = C.fresh_db()
    local key = db .. ":moved"
    assert(c:call("SET", key, "here"))
    local slot = redis.slot(key)
    local other = assert(C.client())
    local from = c:node_for(key)
    local to = C.other_primary(c, from)
    C.migrate_slot(other, slot, to)
    -- c still believes `from` serves the slot
    assert.equal(from, c:node_for_slot(slot))
    assert.equal("here", c:call("GET", key))
    assert.is_true(c.stats.moved >= 1)
    assert.equal(to, c:node_for_slot(slot))
    -- and back, so that the cluster keeps its shape
    C.migrate_slot(other, slot, from)
    other:close()
  end)

  -- Two keys of one slot, "1" and "2", and the slot half-moved to another
  -- primary with only the first key moved.
  local function half_moved_slot()
    local db = C.fresh_db()
    local a, b = "{" .. db .. "}:a", "{" .. db .. "}:b"
    assert(c:call("SET", a, "1"))
    assert(c:call("SET", b, "2"))
    local slot = redis.slot(a)
    local admin = C.client()
    local from = c:node_for(a)
    local to = C.other_primary(c, from)
    C.begin_migration(admin, slot, to, { a })
    return a, b, slot, admin, from, to
  end

  it("follows ASK while a slot is half-migrated, without changing its map", function()
    local moved, stays, slot, admin, from, to = half_moved_slot()
    finally(function()
      C.finish_migration(admin, slot, from, to)
      C.migrate_slot(admin, slot, from)
      admin:close()
    end)
    assert.equal("1", c:call("GET", moved))
    assert.equal("2", c:call("GET", stays))
    assert.is_true(c.stats.ask >= 1)
    assert.equal(from, c:node_for_slot(slot))
  end)

  it("retries TRYAGAIN with backoff until the keys are together, within a budget", function()
    local a, b, slot, admin, from, to = half_moved_slot()
    -- keys split across two nodes: TRYAGAIN until the budget is spent
    local short = C.client({ retry_seconds = 0.3 })
    local t0 = os.time()
    local v, msg, kind = short:call("MGET", a, b)
    assert.is_nil(v)
    assert.matches("^TRYAGAIN", msg)
    assert.equal("cluster", kind)
    assert.is_true(short.stats.tryagain >= 2)
    assert.is_true(os.time() - t0 <= 2)
    short:close()
    -- the migration completes while the client backs off: it gets both
    local sleeps = 0
    local patient = C.client({ sleep = function(s)
      sleeps = sleeps + 1
      if sleeps == 1 then C.finish_migration(admin, slot, from, to) end
    end })
    assert.same({ "1", "2" }, patient:call("MGET", a, b))
    assert.is_true(patient.stats.tryagain >= 1)
    C.migrate_slot(admin, slot, from)
    patient:close()
    admin:close()
  end)

  it("reconnects after a primary is killed and its replica promoted", function()
    if not C.dir then pending("needs RG_CLUSTER_DIR to kill nodes by pid"); return end
    local db = C.fresh_db()
    local key = db .. ":survivor"
    assert(c:call("SET", key, "kept"))
    local victim = c:node_for(key)
    assert.equal(1, c:call_node(victim, "WAIT", 1, 2000))
    local pid = assert(C.pid_of(victim))
    local patient = C.client({ retry_seconds = 20 })
    local _, killed = C.sh("kill -9 " .. pid)
    assert.is_true(killed)
    assert.equal("kept", patient:call("GET", key))
    assert.is_true(patient.stats.reconnects >= 1)
    assert.are_not.equal(victim, patient:node_for(key))
    assert.equal("OK", patient:call("SET", key, "written after"))
    -- the old primary comes back as a replica of the new one
    local out, ok = C.restart_node(victim)
    assert.is_true(ok, out)
    local role
    for _, nd in ipairs(C.nodes(patient)) do
      if nd.addr == victim then role = nd.primary and "primary" or "replica" end
    end
    assert.equal("replica", role)
    patient:close()
  end)

  it("loads the library where it is missing, and only where its version differs", function()
    local code, version = layout.library()
    assert.matches("^#!lua name=regolith", code)
    local nodes = c:primaries()
    assert.equal(0, c:ensure_library())
    -- another version on one node: only that node is loaded again
    local other = code:gsub('\nlocal VERSION = "[^"]+"', '\nlocal VERSION = "0.0-old"')
    assert(c:call_node(nodes[2], "FUNCTION", "LOAD", "REPLACE", other))
    assert.equal("0.0-old", c:library_version(nodes[2]))
    assert.equal(1, c:ensure_library())
    assert.equal(version, c:library_version(nodes[2]))
    -- gone from a node (a new or wiped primary): the FCALL loads it, retries
    assert(c:call_node(nodes[3], "FUNCTION", "DELETE", "regolith"))
    assert.is_false(c:library_version(nodes[3]))
    local key
    for i = 1, 1000 do
      key = "lib" .. i
      if c:node_for(key) == nodes[3] then break end
    end
    local loads = c.stats.library_loads
    assert.equal(version, c:fcall_ro("rg_version", { key }, {}))
    assert.equal(loads + 1, c.stats.library_loads)
  end)

  it("never replaces a newer library: refuses, and the newer one stays", function()
    local code, version = layout.library()
    local nodes = c:primaries()
    assert.equal(0, c:ensure_library())
    local newer = code:gsub('\nlocal VERSION = "[^"]+"', '\nlocal VERSION = "99.0"')
    assert(c:call_node(nodes[2], "FUNCTION", "LOAD", "REPLACE", newer))
    local ok, err, kind = c:ensure_library()
    assert.is_nil(ok)
    assert.equal("version", kind)
    assert.matches("version 99%.0, newer than this client's " .. version:gsub("%.", "%%."), err)
    assert.equal("99.0", c:library_version(nodes[2]))
    -- opening a database refuses with 426, and leaves it there
    local regolith = require "regolith"
    local _, msg, st = regolith.open("redis://" .. C.seeds .. "/" .. C.fresh_db())
    assert.equal(426, st)
    assert.matches("newer than this client's", msg)
    assert.equal("99.0", c:library_version(nodes[2]))
    -- an older one is replaced, as one that differs
    assert.is_true(redis.newer("3.10", "3.9"))
    assert.is_false(redis.newer("3.5", "3.5"))
    assert.is_false(redis.newer("0.0-old", version))
    assert(c:call_node(nodes[2], "FUNCTION", "LOAD", "REPLACE", code))
    assert.equal(0, c:ensure_library())
  end)

  it("chooses cosockets inside OpenResty and LuaSocket elsewhere", function()
    assert.equal("luasocket", redis.transport().name)
    -- an emulated ngx whose cosockets are LuaSocket's (timeouts in ms)
    local socket = require "socket"
    local made = 0
    local fake = {
      get_phase = function() return "content" end,
      sleep = socket.sleep, now = socket.gettime, update_time = function() end,
      socket = { tcp = function()
        made = made + 1
        local s = socket.tcp()
        return setmetatable({}, { __index = {
          settimeout = function(_, ms) s:settimeout(ms / 1000) end,
          connect = function(_, h, p) return s:connect(h, p) end,
          send = function(_, d) return s:send(d) end,
          receive = function(_, p) return s:receive(p) end,
          setkeepalive = function() s:close(); return true end,
          close = function() s:close() end,
        } })
      end },
    }
    rawset(_G, "ngx", fake)
    local ok, err = pcall(function()
      assert.equal("cosocket", redis.transport().name)
      local cc = assert(redis.connect(C.seeds))
      assert.equal("cosocket", cc.t.name)
      local db = C.fresh_db()
      assert.equal("OK", cc:call("SET", db, "via cosocket"))
      assert.equal("via cosocket", cc:call("GET", db))
      cc:close()
      fake.get_phase = function() return "init" end
      assert.equal("luasocket", redis.transport().name)
    end)
    rawset(_G, "ngx", nil)
    assert(ok, err)
    assert.is_true(made >= 1)
  end)
end)
