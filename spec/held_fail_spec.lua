-- A durable commit whose held data pages cannot be written (docs/
-- guarantees.md, The log): with sync "full" the log's hooks hold a
-- commit's pages over blocks the data file has, append its record, and
-- write them while the log flushes; when that write fails the commit fails
-- with 500 and its record is zeroed, so that no replay makes it, and the
-- next commit's record takes its place.  The failure is real: a child runs
-- with tools/fault/shim.c preloaded, which fails its pwritev calls to
-- data.mdb with EIO while a switch file exists (the held pages are the
-- only pages written with pwritev).  Then the child is killed and the
-- directory opened as after a restart, from the data file as it was before
-- any of these commits: every acknowledged write is replayed, the failed
-- one is not.  When the zeroing itself cannot be written or flushed, the
-- commit fails saying that its outcome is unknown: a restart may replay it.
local regolith = require "regolith"
local H = require "helper"

local function sh(cmd) assert(H.execute("env -u LD_PRELOAD " .. cmd), cmd) end

-- The child: acknowledged writes, the write that meets the fault, then
-- (go_on) on a handle opened again more acknowledged writes; each outcome
-- a line; then it waits to be killed, its database open.
local CHILD = [[
local regolith = require "regolith"
local system = require "system"
io.stdout:setvbuf("line")
local path, on, go_on = %q, %q, %s
local db = assert(regolith.open(path, { sync = "full" }))
local c = assert(db:container("c"))
local function put(id, n)
  assert(c:upsert({ id = id, pk = "p", n = n, s = ("x"):rep(300) }))
  print("ack " .. id .. " " .. n)
end
-- rewrites of a few items: LMDB reuses the pages earlier commits freed,
-- blocks the data file has, and those are held
for i = 1, 24 do put("k" .. (i %% 6), i) end
assert(io.open(on, "w")):close()
local ok, msg, status = c:upsert({ id = "failed", pk = "p", n = -1 })
os.remove(on)
print("fault " .. tostring(ok) .. " " .. tostring(status) .. " " .. tostring(msg))
if go_on then
  -- whatever the handle answers now, it answers (500 at worst); closed
  -- and opened again it writes
  local r, rmsg, rstatus = c:read("k1", "p")
  print("after " .. tostring(r ~= nil or rstatus) .. " " .. tostring(rmsg))
  db:close()
  db = assert(regolith.open(path, { sync = "full" }))
  c = assert(db:container("c"))
  local gone, _, gstatus = c:read("failed", "p")
  print("reopened " .. tostring(gone) .. " " .. tostring(gstatus))
  for i = 25, 40 do put("k" .. (i %% 6), i) end
  put("new", 41)
  local vok, report = db:verify()
  print("verify " .. tostring(vok) .. " " .. tostring(report))
end
print("done")
while true do system.sleep(1) end    -- killed while it waits, the log open
]]

-- Runs the child against a database this process holds open (so that no
-- close restarts the log meanwhile), copies the directory as a restart
-- after a power cut then would find it, runs `meanwhile(db)` while the
-- child lives on, kills it, and returns the handle, the child's output,
-- what it acknowledged ({ id = n }) and the copy.  `then_fail`: the
-- log's call (pwrite, fdatasync) that fails too once the held pages'
-- write did, so that the failed commit's record cannot be zeroed.
local function run(go_on, meanwhile, then_fail)
  sh("make -s build/fault/shim.so")
  local shim = H.run("pwd"):gsub("\n$", "") .. "/build/fault/shim.so"
  local db, path = H.open({ sync = "full" })
  local c = assert(db:create_container("c", { partition_key = "/pk" }))
  assert(c:create({ id = "first", pk = "p", n = 0 }))
  db:close()
  -- reopened: the open checkpoints, so this data file is what a restart
  -- finds; everything after is in the log alone
  db = assert(regolith.open(path, { sync = "full" }))
  local base = H.tmpdir()
  sh(("mkdir -p '%s' && cp '%s/data.mdb' '%s/'"):format(base, path, base))
  local on, log = H.tmpdir(), H.tmpdir()
  local pre = os.getenv("LD_PRELOAD")   -- make check's sanitizer runtime, first
  local child = H.spawn(CHILD:format(path, on, tostring(go_on)), table.concat({
    "LD_PRELOAD=" .. H.sh_quote((pre and pre ~= "" and pre .. " " or "") .. shim),
    "FAULT_NAME=data.mdb", "FAULT_CALLS=pwritev", "FAULT_TIMES=0",
    "FAULT_ON=" .. H.sh_quote(on), "FAULT_LOG=" .. H.sh_quote(log),
    then_fail and "FAULT_THEN_NAME=regolith.wal FAULT_THEN_CALLS=" .. then_fail
    or "" }, " "))
  local acked, lines = {}, {}
  while true do
    local line = child.p:read("l")
    assert(line, "the child ended early:\n" .. table.concat(lines, "\n"))
    lines[#lines + 1] = line
    local id, n = line:match("^ack (%S+) (%d+)$")
    if id then acked[id] = tonumber(n) end
    if line == "done" then break end
  end
  -- the data file as it was before the child, the log as it is now, no
  -- shared file (a checkpoint later would flush the data file too)
  local restart = H.tmpdir()
  sh(("mkdir -p '%s' && cp '%s/data.mdb' '%s/' && cp '%s/regolith.wal' '%s/'")
     :format(restart, base, restart, path, restart))
  if meanwhile then meanwhile(db) end
  assert(H.execute("kill -9 " .. child.pid))
  H.finish(child)                       -- its pipe ends once it is gone
  local out = table.concat(lines, "\n") .. "\n"
  -- the fault was met where the held pages are written, and the write
  -- failed with 500 and a message
  assert.matches("^pwritev data%.mdb %d+ %d+\n", H.slurp(log))
  assert.matches("\nfault nil 500 storage failure: [^\n]*Input/output error\n", out)
  -- the record zeroed, or not: the message says which
  local unknown = out:find("whether a power cut would make it is unknown",
                           1, true) ~= nil
  assert.are.equal(then_fail ~= nil, unknown, out)
  if then_fail == "pwrite" then       -- the zeroing's write: 8 bytes
    assert.matches("\npwrite regolith%.wal %d+ 8\n", H.slurp(log))
  elseif then_fail then
    assert.matches("\nfdatasync regolith%.wal %-1 0\n", H.slurp(log))
  end
  return db, out, acked, restart
end

-- The database holds every acknowledged write and nothing of the failed
-- one (`items`: how many it holds in all; `made`: the failed one is there,
-- whole), and verifies.
local function holds(db, acked, items, made)
  local c = assert(db:container("c"))
  if made then
    assert.are.equal(-1, assert(c:read("failed", "p")).n)
  else
    assert.is_nil((c:read("failed", "p")))
  end
  assert.are.equal(0, assert(c:read("first", "p")).n)
  for id, n in pairs(acked) do assert.are.equal(n, assert(c:read(id, "p")).n, id) end
  assert.are.equal(items, db:stats().items)
  assert(db:verify())
end

-- Pages are held only on a file system that overwrites in place (wal.c's
-- in_place: ext2 to ext4, tmpfs); elsewhere there is nothing to fail.
local function in_place()
  local dir = H.tmpdir()
  assert(H.execute("mkdir -p '" .. dir .. "'"))
  local p = io.popen("stat -f -c %t '" .. dir .. "'")
  local t = p:read("*l")
  p:close()
  return t == "ef53" or t == "1021994"
end

describe("held data pages whose write fails", function()
  after_each(H.cleanup)
  local held = H.cluster or in_place()
  local function it(name, fn)
    if not held then
      return require("busted").pending(name .. " [pages are held only on "
        .. "a file system that overwrites in place: ext2 to ext4, tmpfs]")
    end
    return H.local_it(name, "the log and its held pages are the local store's", fn)
  end

  it("fail the commit with 500; a restart right after does not replay it", function()
    local seen
    local db, _, acked, restart = run(false, function(db)
      -- another process writes next, in the failed record's place, while
      -- the child's handle is still open
      local c = assert(db:container("c"))
      seen = c:read("failed", "p")
      assert(c:upsert({ id = "next", pk = "p", n = 99 }))
    end)
    assert.is_nil(seen)
    assert.are.equal(24, acked.k0)
    acked.next = 99
    holds(db, acked, 8)                 -- first, k0..k5, next
    db:close()
    acked.next = nil
    db = assert(regolith.open(restart, { sync = "full" }))
    holds(db, acked, 7)
    db:close()
  end)

  it("fail the commit with 500; the process writes on once it opens the database again, and a restart replays every commit after the failed one", function()
    local db, out, acked, restart = run(true)
    local after = out:match("\nafter (%S+)")
    assert.is_truthy(after == "true" or after == "500", out)
    assert.matches("\nreopened nil 404\n", out)
    assert.matches("\nverify true nil\n", out)
    assert.are.equal(41, acked.new)
    holds(db, acked, 8)                 -- first, k0..k5, new
    db:close()
    db = assert(regolith.open(restart, { sync = "full" }))
    holds(db, acked, 8)
    db:close()
  end)

  -- The failed commit's record zeroed in the log is what keeps a replay
  -- from making it.  When that cannot be done, the commit's outcome is
  -- unknown, and the call says so: 500, "whether a power cut would make
  -- it is unknown".  A restart replays every acknowledged write, and the
  -- failed one as its record stands: here (the process killed, its writes
  -- in the page cache) its write of zeros failed, so the record is whole
  -- and the restart makes the commit; its write went through and only its
  -- flush failed, so the record reads zeroed and the restart does not (a
  -- power cut instead could leave either on the disk).
  it("fail the commit with 500 and an unknown outcome when the record cannot be zeroed; a restart replays every acknowledged write, and the failed one as its record stands", function()
    for _, then_fail in ipairs({ "pwrite", "fdatasync" }) do
      local db, _, acked, restart = run(false, nil, then_fail)
      assert.are.equal(24, acked.k0)
      holds(db, acked, 7)               -- this handle: the commit never reached the data file
      db:close()
      db = assert(regolith.open(restart, { sync = "full" }))
      local made = then_fail == "pwrite"
      holds(db, acked, made and 8 or 7, made)
      db:close()
    end
  end)
end)
