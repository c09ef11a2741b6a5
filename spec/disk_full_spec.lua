-- A full disk and a map that cannot grow (docs/guarantees.md, A full disk,
-- and a map that cannot grow): writes fail with 507 "insufficient storage",
-- nothing is corrupted, every acknowledged write stays, and writes work
-- again once there is room.  The disk is a small tmpfs mounted here (root
-- only: skipped, saying so, when mounting is not possible); the address
-- space is limited with ulimit -v in a child.
local regolith = require "regolith"
local H = require "helper"

local mounted = {}

-- System tools run without the sanitizer runtime that make check preloads.
local SYS = "env -u LD_PRELOAD "

-- Mounts a tmpfs of `size` (e.g. "4m") on a new directory; nil and the
-- reason when that is not possible.
local function mount(size)
  local dir = H.tmpdir()
  assert(os.execute(SYS .. "mkdir -p '" .. dir .. "'"))
  local ok = os.execute((SYS .. "mount -t tmpfs -o size=%s none '%s' 2>/dev/null"):format(size, dir))
  if not ok then return nil, "cannot mount a tmpfs (root is needed)" end
  mounted[#mounted + 1] = dir
  return dir
end

local function resize(dir, size)
  assert(os.execute((SYS .. "mount -o remount,size=%s '%s'"):format(size, dir)))
end

local function free_kb(dir)
  local p = io.popen(SYS .. "df -k '" .. dir .. "'")
  local last
  for line in p:lines() do last = line end
  p:close()
  return tonumber(last:match("^%S+%s+%d+%s+%d+%s+(%d+)"))
end

-- Writes items of `size` bytes until a write fails; returns the ids
-- written and the failure (msg, status).
local function fill(c, size, prefix)
  local written = {}
  local blob = ("x"):rep(size)
  for i = 1, 100000 do
    local id = (prefix or "i") .. i
    local ok, msg, status = c:create({ id = id, pk = "p" .. (i % 5), s = blob, n = i })
    if not ok then return written, msg, status end
    written[#written + 1] = id
  end
  error("the disk never filled")
end

local function check_all(c, written)
  for i, id in ipairs(written) do
    local d = assert(c:read(id, "p" .. (i % 5)))
    assert.are.equal(i, d.n)
  end
  local count = assert(c:query("SELECT VALUE COUNT(1) FROM c"))[1]
  assert.are.equal(#written, count)
end

describe("a full disk", function()
  local skip
  before_each(function()
    local probe, why = mount("1m")
    skip = not probe and why or nil
  end)
  after_each(function()
    collectgarbage()                 -- a failed test may leave a handle open
    collectgarbage()
    for i = #mounted, 1, -1 do
      if not os.execute(SYS .. "umount '" .. mounted[i] .. "' 2>/dev/null") then
        os.execute(SYS .. "umount -l '" .. mounted[i] .. "' 2>/dev/null")
      end
      mounted[i] = nil
    end
    H.cleanup()
  end)

  for _, sync in ipairs({ "full", "lazy", "none" }) do
    it("fails writes with 507 and loses or corrupts nothing (sync " .. sync .. ")", function()
      if skip then pending(skip) return end
      local dir = assert(mount("3m"))
      local db = assert(regolith.open(dir .. "/db", { sync = sync, map_size = 2^20 }))
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      for _, size in ipairs({ 100, 5000, 150000 }) do
        local written, msg, status = fill(c, size, "s" .. size .. "-")
        assert.are.equal(507, status, msg)
        assert.matches("insufficient storage", msg, 1, true)
        local ok, report = db:verify()
        assert(ok, report)
        for i, id in ipairs(written) do
          assert.are.equal(i, assert(c:read(id, "p" .. (i % 5))).n)
        end
      end
      db:close()
      -- and after reopening
      db = assert(regolith.open(dir .. "/db"))
      assert(db:verify())
      db:close()
    end)
  end

  it("fails every kind of write with 507, leaving the database as it was", function()
    if skip then pending(skip) return end
    local dir = assert(mount("4m"))
    local db = assert(regolith.open(dir .. "/db", { map_size = 2^20 }))
    local c = assert(db:create_container("c", { partition_key = "/pk",
      change_feed = { all_versions = true } }))
    assert(c:create_procedure("put", [[
      return function(ctx, doc) assert(ctx:upsert(doc)) return true end]]))
    local written = fill(c, 200000)
    local big = ("y"):rep(400000)
    local before = assert(c:query("SELECT c.id, c.n, c._etag FROM c ORDER BY c.id"))
    local _, feed = assert(c:changes{ mode = "all_versions", max_items = 100000 })
    H.fails(507, c:create({ id = "new", pk = "p1", s = big }))
    H.fails(507, c:upsert({ id = written[1], pk = "p1", s = big }))
    H.fails(507, c:replace({ id = written[1], pk = "p1", s = big }))
    H.fails(507, c:patch(written[1], "p1", { { op = "set", path = "/s", value = big } }))
    H.fails(507, c:batch("p1", { { op = "upsert", doc = { id = "b1", pk = "p1", s = big } } }))
    H.fails(507, c:execute("put", "p1", { id = "x1", pk = "p1", s = big }))
    H.fails(507, c:create_procedure("huge", "return function() end --" .. big))
    assert.are.same(before, (assert(c:query("SELECT c.id, c.n, c._etag FROM c ORDER BY c.id"))))
    local later = assert(c:changes{ mode = "all_versions", continuation = feed.continuation })
    assert.are.same({}, later)
    check_all(c, written)
    assert(db:verify())
    db:close()
  end)

  it("fails a whole group commit with 507 when its transaction meets a full disk, keeping nothing of it", function()
    if skip then pending(skip) return end
    local dir = assert(mount("3m"))
    local db = assert(regolith.open(dir .. "/db", { map_size = 2^20 }))
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    local written = fill(c, 50000)
    local big = ("g"):rep(150000)
    local before = assert(c:query("SELECT c.id, c._etag FROM c ORDER BY c.id"))
    -- db:group: a small write, a raising member, a big write
    H.fails(507, db:group({
      function() return c:create({ id = "g-small", pk = "p1", n = 1 }) end,
      function() error("a member that raises") end,
      function() return c:create({ id = "g-big", pk = "p2", s = big }) end,
    }))
    -- and writers sharing a transaction through group_commit: every one
    -- gets the 507 as its own write's result
    local g = db:group_commit()
    local results, cos = {}, {}
    for i = 1, 4 do
      cos[i] = coroutine.create(function()
        results[i] = { g:run(function()
          return c:create({ id = "w" .. i, pk = "p" .. i, s = big })
        end) }
      end)
    end
    for _ = 1, 8 do
      for i = 1, 4 do
        if coroutine.status(cos[i]) == "suspended" then assert(coroutine.resume(cos[i])) end
      end
    end
    for i = 1, 4 do
      assert.is_nil(results[i][1])
      assert.are.equal(507, results[i][3], results[i][2])
    end
    assert.are.equal(1, g:stats().groups)
    assert.are.same(before, (assert(c:query("SELECT c.id, c._etag FROM c ORDER BY c.id"))))
    check_all(c, written)
    assert(db:verify())
    resize(dir, "16m")
    local res = assert(db:group({
      function() return c:create({ id = "g-small", pk = "p1", n = 1 }) end,
      function() return c:create({ id = "g-big", pk = "p2", s = big }) end,
    }))
    assert.is_true(res[1][1] and res[1][2] ~= nil and res[2][2] ~= nil)
    assert(db:verify())
    db:close()
  end)

  it("fails every request of a write queue's batch with 507 when its transaction meets a full disk", function()
    if skip then pending(skip) return end
    local dir = assert(mount("8m"))
    local path = dir .. "/db"
    local db = assert(regolith.open(path, { map_size = 2^20 }))
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    local q = db:write_queue()       -- its file is made while there is room
    assert(q:create(c, { id = "first", pk = "p0" }))
    local before = assert(c:query("SELECT c.id, c._etag FROM c ORDER BY c.id"))
    -- four processes whose requests wait for one leader: this process
    -- holds the writer lock while they queue, and fills the disk
    local kids = {}
    for i = 1, 4 do
      kids[i] = H.spawn(([[
local regolith = require "regolith"
io.stdout:setvbuf("line")
local db = assert(regolith.open(%q))
local c = assert(db:container("c"))
local q = db:write_queue()
print("ready")
for _ = 1, 3000 do if io.open(%q) then break end os.execute("sleep 0.01") end
print("calling")
local ok, msg, status = q:create(c, { id = "q%d", pk = "p%d", s = (%q):rep(15000) })
print(ok and "ok" or ("fail " .. tostring(status) .. " " .. tostring(msg)))
]]):format(path, dir .. "/go", i, i, "q"))
      H.expect(kids[i], "^ready")
    end
    assert(db:group({ function()
      assert(io.open(dir .. "/go", "w")):close()
      H.queue_waiting(db, 4)
      os.execute((SYS .. "dd if=/dev/zero of='%s/fill' bs=4k 2>/dev/null"):format(dir))
    end }))
    for i = 1, 4 do
      local out = H.finish(kids[i])
      assert.is_truthy(out:find("fail 507 insufficient storage", 1, true), out)
    end
    assert.are.same(before, (assert(c:query("SELECT c.id, c._etag FROM c ORDER BY c.id"))))
    assert(db:verify())
    -- and once there is room, the queue writes again
    os.remove(dir .. "/fill")
    assert(q:create(c, { id = "q9", pk = "p1", s = ("q"):rep(15000) }))
    assert.is_truthy(db:stats().queue.batches >= 2)
    assert(db:verify())
    db:close()
  end)

  it("works again once there is room, keeping every acknowledged write", function()
    if skip then pending(skip) return end
    local dir = assert(mount("3m"))
    local db = assert(regolith.open(dir .. "/db", { map_size = 2^20 }))
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    local written = fill(c, 50000)
    H.fails(507, c:create({ id = "later", pk = "p1", s = ("z"):rep(200000) }))
    resize(dir, "16m")
    assert(c:create({ id = "later", pk = "p1", s = ("z"):rep(200000) }))
    local more, msg, status = fill(c, 50000, "m")
    assert.are.equal(507, status, msg)
    assert.is_true(#more > #written)     -- the larger disk held more
    for _, ids in ipairs({ written, more }) do
      for i, id in ipairs(ids) do assert.are.equal(i, assert(c:read(id, "p" .. (i % 5))).n) end
    end
    assert.are.equal(#written + 1 + #more, assert(c:query("SELECT VALUE COUNT(1) FROM c"))[1])
    assert(db:verify())
    db:close()
    db = assert(regolith.open(dir .. "/db"))
    assert(db:verify())
    db:close()
  end)

  it("lets a transactional processor wait out a full disk: no dead letters, an exact copy once there is room", function()
    if skip then pending(skip) return end
    local dir = assert(mount("3m"))
    local db = assert(regolith.open(dir .. "/db", { map_size = 2^20 }))
    local src = assert(db:create_container("src", { partition_key = "/pk" }))
    local dst = assert(db:create_container("dst", { partition_key = "/pk" }))
    local failures = 0
    local p = assert(db:processor{ name = "copy", source = "src", max_attempts = 2,
      on_error = function() failures = failures + 1 end,
      handler = function(changes)
        for _, d in ipairs(changes) do assert(dst:upsert({ id = d.id, pk = d.pk, s = d.s })) end
      end })
    local written = fill(src, 20000)
    for _ = 1, 5 do H.fails(507, p:run_once()) end
    assert.are.same({}, p:dead_letters())
    resize(dir, "64m")
    assert.are.equal(#written, assert(p:run{ until_idle = true }))
    assert.are.same({}, p:dead_letters())
    assert.are.equal(0, failures)
    assert.are.equal(#written, db:stats().containers.dst.items)
    assert(db:verify())
    p:close()
    db:close()
  end)

  it("fails a backup onto a full disk with 507 and leaves no partial copy", function()
    if skip then pending(skip) return end
    local src = H.tmpdir()
    local db = assert(regolith.open(src))
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    for i = 1, 40 do assert(c:create({ id = "i" .. i, pk = "p", s = ("x"):rep(100000) })) end
    local dir = assert(mount("1m"))
    H.fails(507, db:backup(dir .. "/copy"))
    local f = io.open(dir .. "/copy/data.mdb")
    assert.is_nil(f)
    resize(dir, "32m")
    assert(db:backup(dir .. "/copy"))
    local copy = assert(regolith.open(dir .. "/copy"))
    assert(copy:verify())
    assert.are.equal(40, copy:stats().items)
    copy:close()
    db:close()
  end)

  it("fails opening a new database on a full disk with 507", function()
    if skip then pending(skip) return end
    local dir = assert(mount("1m"))
    os.execute((SYS .. "dd if=/dev/zero of='%s/fill' bs=4k 2>/dev/null"):format(dir))
    assert.is_true(free_kb(dir) < 64)
    local db, msg, status = regolith.open(dir .. "/db")
    assert.is_nil(db)
    assert.are.equal(507, status, msg)
  end)
end)

describe("a map that cannot grow", function()
  after_each(function() H.cleanup() end)

  -- AddressSanitizer reserves terabytes of address space: under make check
  -- a child limited with ulimit -v cannot even start.
  local asan = (os.getenv("LD_PRELOAD") or ""):find("asan", 1, true)
  local ASAN = "address-space limits cannot be tested under AddressSanitizer"

  -- Runs `source` in a child whose address space is limited to `kb`.
  local function limited(kb, source)
    local file = H.script(source)
    local p = assert(io.popen(("ulimit -v %d; %s 2>&1; echo \"exit $?\""):format(kb,
      H.lua_cmd(file)), "r"))
    local out = p:read("a")
    p:close()
    return out
  end

  it("fails a write with 507 when there is no address space for a larger map, and keeps working", function()
    if asan then pending(ASAN) return end
    local path = H.tmpdir()
    local out = limited(90000, ([[
      local regolith = require "regolith"
      local db = assert(regolith.open(%q, { map_size = 2^20, sync = "none" }))
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      local blob, n = ("x"):rep(100000), 0
      for i = 1, 100000 do
        local ok, msg, status = c:create({ id = "i" .. i, pk = "p", s = blob })
        if not ok then
          assert(status == 507, msg)
          assert(msg:find("the map cannot grow", 1, true), msg)
          break
        end
        n = i
      end
      assert(n > 0)
      for i = 1, n do assert(c:read("i" .. i, "p")) end
      assert(c:create({ id = "small", pk = "p" }))
      assert(db:verify())
      db:close()
      print("written", n)
    ]]):format(path))
    assert.matches("exit 0", out, 1, true)
    local n = tonumber(out:match("written%s+(%d+)"))
    assert(n, out)
    -- without the limit, the database opens and grows on
    local db = assert(regolith.open(path))
    local c = assert(db:container("c"))
    assert(c:create({ id = "more", pk = "p", s = ("x"):rep(10^6) }))
    assert.are.equal(n + 2, db:stats().items)
    assert(db:verify())
    db:close()
  end)

  it("fails every call with 507 in a process that cannot take a map another process grew, instead of crashing", function()
    if asan then pending(ASAN) return end
    local path = H.tmpdir()
    local db = assert(regolith.open(path, { map_size = 2^20 }))
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    assert(c:create({ id = "a", pk = "p" }))
    local go = H.tmpdir()
    local file = H.script(([[
      local regolith = require "regolith"
      io.stdout:setvbuf("line")
      local db = assert(regolith.open(%q, { map_size = 2^20 }))
      local c = assert(db:container("c"))
      assert(c:read("a", "p"))
      print("ready")
      for _ = 1, 1200 do                 -- at most a minute
        if io.open(%q) then break end
        os.execute("sleep 0.05")
      end
      local _, msg, status = c:read("a", "p")
      print("read", status, msg)
      print("write", select(3, c:create({ id = "b", pk = "p" })))
      print("stats", select(3, db:stats()))
      print("verify", select(3, pcall(db.verify, db)))
      db:close()
      local again, msg2, status2 = regolith.open(%q)
      print("reopen", again, status2, msg2)
    ]]):format(path, go, path))
    local p = assert(io.popen(("ulimit -v 60000; %s 2>&1; echo \"exit $?\""):format(H.lua_cmd(file)), "r"))
    local line = p:read("l")
    -- grow the map far past what the child may map
    local grown = pcall(function()
      local blob = ("x"):rep(2^20)
      for i = 1, 50 do assert(c:create({ id = "big" .. i, pk = "p", s = blob })) end
    end)
    local f = assert(io.open(go, "w")) f:close()
    local out = p:read("a")
    p:close()
    assert.are.equal("ready", line, out)
    assert.is_true(grown)
    assert.is_true(db:stats().map_size > 60 * 2^20)
    assert.matches("exit 0", out, 1, true)
    assert.matches("read\t507\t", out, 1, true)
    assert.matches("close every handle", out, 1, true)
    assert.matches("write\t507", out, 1, true)
    assert.matches("stats\t507", out, 1, true)
    assert.matches("reopen\tnil", out, 1, true)
    assert(db:verify())
    db:close()
  end)
end)
