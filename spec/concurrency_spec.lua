-- Several processes on one database (docs/api.md, Database;
-- docs/guarantees.md, Several processes): writes from two processes at once
-- are serialised and all kept, readers see the other process's commits, a
-- small map grows under two writers, and a process killed while writing
-- leaves every acknowledged write and no partial batch.
local regolith = require "regolith"
local H = require "helper"

-- The Lua source that every child starts with: it opens the database at
-- `path`, then waits for the file `go` so that the children start their
-- work together (opening while another process writes has its own spec).
local function prelude(path, go, opts)
  return string.format([[
local regolith = require "regolith"
io.stdout:setvbuf("line")
local db = assert(regolith.open(%q, %s))
local go = %q
if go ~= "" then
  print("ready")
  while not io.open(go) do os.execute("sleep 0.01") end
end
]], path, opts or "nil", go or "")
end

-- Starts a child running `source`; returns a handle to wait on.
local function spawn(source)
  local file = H.script(source)
  -- the exit status comes last in the output: io.popen's close does not
  -- give it under LuaJIT
  return assert(io.popen("(" .. H.lua_cmd(file) .. ') 2>&1; echo "exit=$?"', "r"))
end

-- Waits for a child; asserts it ended well and returns its output.
local function wait(p)
  local all = p:read("*a")
  p:close()
  local out, code = all:match("^(.*)exit=(%d+)\n$")
  assert(code == "0", ("child failed (exit %s): %s"):format(tostring(code), out or all))
  return out
end

local function touch(path)
  local f = assert(io.open(path, "w"))
  f:close()
end

-- Lets children spawned with a `go` file start once all have opened.
local function start(children, go)
  for _, p in ipairs(children) do
    local line = p:read("l")
    if line ~= "ready" then
      error("a child failed to open: " .. tostring(line) .. "\n" .. tostring(p:read("a")))
    end
  end
  touch(go)
end

describe("concurrency", function()
  local db, path, c
  before_each(function()
    db, path = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("keeps every item two processes create at once", function()
    local go = H.tmpdir()
    local children = {}
    for _, name in ipairs({ "a", "b" }) do
      children[#children + 1] = spawn(prelude(path, go) .. string.format([[
local c = assert(db:container("things"))
for i = 1, 300 do
  assert(c:create({ id = %q .. i, pk = "p" .. (i %% 7), n = i }))
end
print("done")
]], name))
    end
    start(children, go)
    for _, p in ipairs(children) do assert.is_truthy(wait(p):find("done")) end
    assert.are.equal(600, db:stats().items)
    for _, name in ipairs({ "a", "b" }) do
      for i = 1, 300 do
        assert.are.equal(i, assert(c:read(name .. i, "p" .. (i % 7))).n)
      end
    end
  end)

  it("adds up patch increments from two processes exactly", function()
    assert(c:create({ id = "counter", pk = "p", n = 0 }))
    local go = H.tmpdir()
    local children = {}
    for _ = 1, 2 do
      children[#children + 1] = spawn(prelude(path, go) .. [[
local c = assert(db:container("things"))
for _ = 1, 200 do
  assert(c:patch("counter", "p", { { op = "incr", path = "/n", value = 1 } }))
end
print("done")
]])
    end
    start(children, go)
    for _, p in ipairs(children) do wait(p) end
    assert.are.equal(400, assert(c:read("counter", "p")).n)
  end)

  it("adds up read-modify-write updates from two processes exactly with if_match", function()
    assert(c:create({ id = "counter", pk = "p", n = 0 }))
    local go = H.tmpdir()
    local children = {}
    for _ = 1, 2 do
      children[#children + 1] = spawn(prelude(path, go) .. [[
local c = assert(db:container("things"))
local conflicts = 0
for _ = 1, 100 do
  while true do
    local doc = assert(c:read("counter", "p"))
    doc.n = doc.n + 1
    local ok, msg, status = c:replace(doc, { if_match = doc._etag })
    if ok then break end
    assert(status == 412, msg)
    conflicts = conflicts + 1
  end
end
print("done", conflicts)
]])
    end
    start(children, go)
    for _, p in ipairs(children) do wait(p) end
    assert.are.equal(200, assert(c:read("counter", "p")).n)
  end)

  it("serves reads and writes from coroutines interleaved with each other", function()
    local workers = {}
    for w = 1, 3 do
      workers[w] = coroutine.create(function()
        for i = 1, 20 do
          assert(c:create({ id = w .. "-" .. i, pk = "p", n = i }))
          coroutine.yield(assert(c:read(w .. "-" .. i, "p")).n)
        end
      end)
    end
    local seen = 0
    for _ = 1, 20 do
      for w = 1, 3 do
        local ok, n = coroutine.resume(workers[w])
        assert(ok, n)
        seen = seen + n
      end
    end
    assert.are.equal(3 * 210, seen)
    assert.are.equal(60, db:stats().items)
  end)

  it("gives each container name to exactly one of two processes creating them at once", function()
    local go = H.tmpdir()
    local children = {}
    for _ = 1, 2 do
      children[#children + 1] = spawn(prelude(path, go) .. [[
local won = 0
for i = 1, 20 do
  local c, msg, status = db:create_container("c" .. i, { partition_key = "/pk" })
  if c then
    won = won + 1
    assert(c:create({ id = "owner", pk = "p" }))
  else
    assert(status == 409, msg)
  end
end
print("won", won)
]])
    end
    start(children, go)
    local total = 0
    for _, p in ipairs(children) do
      total = total + assert(tonumber(wait(p):match("won\t(%d+)")))
    end
    assert.are.equal(20, total)
    assert.are.equal(21, #db:containers())
    for i = 1, 20 do assert(assert(db:container("c" .. i)):read("owner", "p")) end
  end)

  it("lets a reader in one process see the other process's commits", function()
    assert(c:create({ id = "before", pk = "p" }))
    assert(c:read("before", "p"))          -- this process has read already
    wait(spawn(prelude(path) .. [[
local c = assert(db:container("things"))
assert(c:create({ id = "from-child", pk = "p", v = 1 }))
assert(c:replace({ id = "before", pk = "p", v = 2 }))
local n = assert(db:create_container("new", { partition_key = "/pk" }))
assert(n:create({ id = "x", pk = "p" }))
]]))
    assert.are.equal(1, assert(c:read("from-child", "p")).v)
    assert.are.equal(2, assert(c:read("before", "p")).v)
    local n = assert(db:container("new"))
    assert(n:read("x", "p"))
    assert(c:create({ id = "from-parent", pk = "p", v = 3 }))
    local out = wait(spawn(prelude(path) .. [[
local c = assert(db:container("things"))
print("saw", assert(c:read("from-parent", "p")).v)
]]))
    assert.is_truthy(out:find("saw\t3", 1, true))
  end)

  H.local_it("grows a small map under two writing processes and loses nothing",
    "map_size is the size of a local file's memory map", function()
    db:close()
    db = assert(regolith.open(path, { map_size = 1048576 }))
    c = assert(db:container("things"))
    assert(c:create({ id = "first", pk = "p" }))
    local go = H.tmpdir()
    local children = {}
    for _, name in ipairs({ "a", "b" }) do
      children[#children + 1] = spawn(prelude(path, go, "{ map_size = 1048576, sync = 'none' }")
        .. string.format([[
local c = assert(db:container("things"))
for i = 1, 60 do
  local ok, msg = c:create({ id = %q .. i, pk = "p" .. (i %% 3), s = ("z"):rep(100000) })
  assert(ok, msg)
end
print("done")
]], name))
    end
    start(children, go)
    for _, p in ipairs(children) do assert.is_truthy(wait(p):find("done")) end
    assert(c:read("first", "p"))
    for _, name in ipairs({ "a", "b" }) do
      for i = 1, 60 do
        local d = assert(c:read(name .. i, "p" .. (i % 3)))
        assert.are.equal(100000, #d.s)
      end
    end
    assert(c:create({ id = "last", pk = "p", s = ("y"):rep(500000) }))
    assert.are.equal(122, db:stats().items)
  end)

  H.local_it("opens a database, with any map_size, while another process writes to it",
    "map_size is the size of a local file's memory map", function()
    db:close()
    local stop = H.tmpdir()
    local writer = spawn(prelude(path, nil, "{ sync = 'none' }") .. string.format([[
local c = assert(db:container("things"))
local i = 0
local give_up = os.time() + 120   -- the parent failed: end, not hang it
while not io.open(%q) and os.time() < give_up do
  i = i + 1
  assert(c:upsert({ id = "w" .. (i %% 200), pk = "p", s = ("w"):rep(20000 + i) }))
end
print("wrote", i)
]], stop))
    local failures = {}
    for round = 1, 400 do
      local d, msg = regolith.open(path, round % 2 == 0 and { map_size = 1048576 } or nil)
      if d then
        assert(assert(d:container("things")):read_many({ { "w1", "p" } }))
        d:close()
      else
        failures[#failures + 1] = (round % 2 == 0 and "map_size 1 MiB: " or "default: ") .. msg
      end
    end
    touch(stop)
    wait(writer)
    db = assert(regolith.open(path))
    assert(#failures == 0, #failures .. " of 400 opens failed, first: " .. tostring(failures[1]))
  end)

  it("leaves every acknowledged write and no partial batch when a writer is killed", function()
    local file = H.script(prelude(path) .. [[
local c = assert(db:container("things"))
for b = 1, 100000 do
  local ops = {}
  for i = 1, 10 do
    ops[i] = { op = "create", doc = { id = b .. "-" .. i, pk = "p", b = b } }
  end
  assert(c:batch("p", ops))
  print(b)
end
]])
    -- the shell prints its pid, then becomes the writer (exec keeps the pid)
    local p = assert(io.popen("echo $$; exec env " .. H.lua_cmd(file), "r"))
    local pid = assert(tonumber(p:read("l")))
    local acked = 0
    while acked < 20 do
      local line = p:read("l")
      assert(line, "the writer stopped early")
      acked = assert(tonumber(line), line)
    end
    os.execute("kill -9 " .. pid)
    p:read("a")
    p:close()
    local b = 1
    while true do
      local found = 0
      for i = 1, 10 do
        if c:read(b .. "-" .. i, "p") then found = found + 1 end
      end
      if b <= acked then assert.are.equal(10, found, "batch " .. b .. " lost writes") end
      assert(found == 0 or found == 10, "batch " .. b .. " is partial: " .. found)
      if found == 0 and b > acked then break end
      b = b + 1
    end
    assert.is_true(db:stats().items >= acked * 10)
    -- the database is still usable by a new process after the kill
    local out = wait(spawn(prelude(path) .. [[
local c = assert(db:container("things"))
assert(c:create({ id = "after", pk = "p" }))
print("ok")
]]))
    assert.is_truthy(out:find("ok"))
    assert(c:read("after", "p"))
  end)
end)
