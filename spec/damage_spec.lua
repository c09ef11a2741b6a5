-- A damaged file (docs/guarantees.md, A damaged file): a database whose
-- data file was cut short, emptied, removed or replaced by an older copy
-- while its other files remain is refused when it is opened, with 500 and
-- a message saying what is wrong, never with a signal and never as an
-- empty database; `regolith verify` says the same and exits 1.  Each
-- attempt runs in a child process, so that a crash shows as a failure.
local regolith = require "regolith"
local H = require "helper"

local ITEMS = 2700

describe("a damaged database", function()
  local base, dir

  -- A database of ITEMS items, closed: its files are copied for each case.
  setup(function()
    base = H.tmpdir()
    local db = assert(regolith.open(base))
    local c = assert(db:create_container("t", { partition_key = "/pk" }))
    local docs = {}
    for i = 1, ITEMS do
      docs[#docs + 1] = { id = "i" .. i, pk = "p" .. (i % 50), v = i, s = ("x"):rep(200) }
    end
    for _, d in ipairs(docs) do assert(c:create(d)) end
    db:close()
  end)

  before_each(function()
    dir = H.tmpdir()
    assert(os.execute(("cp -r '%s' '%s'"):format(base, dir)))
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  teardown(function() H.cleanup() end)

  local function size(name)
    local f = assert(io.open(dir .. "/" .. name, "rb"))
    local n = f:seek("end")
    f:close()
    return n
  end

  local function truncate(name, n)
    assert(os.execute(("truncate -s %d '%s/%s'"):format(n, dir, name)))
  end

  -- Opens dir in a child (read-only or not), counts its items and runs
  -- verify; returns what it printed and whether it exited normally.
  local function probe(readonly)
    local child = H.script(([[
      local regolith = require "regolith"
      local db, msg, status = regolith.open(%q, { readonly = %s })
      if not db then print("refused", status, msg) return end
      local c = db:container("t")
      local rows = c and c:query("SELECT VALUE COUNT(1) FROM c")
      local ok, report = db:verify()
      print("opened", rows and rows[1], ok, report)]]):format(dir, tostring(readonly)))
    local p = io.popen(H.lua_cmd(child) .. " 2>&1; echo \"exit=$?\"")
    local out = p:read("a")
    p:close()
    return out, out:match("exit=(%d+)") == "0"
  end

  -- Both kinds of open refuse with 500 and `what` in the message, and the
  -- command line's verify reports it and exits 1.
  local function refused(what)
    for _, ro in ipairs({ true, false }) do
      local out, clean = probe(ro)
      assert(clean, "the process died: " .. out)
      assert.matches("^refused\t500\t", out)
      assert.matches("the database '" .. dir .. "' is damaged: ", out, 1, true)
      assert.matches(what, out, 1, true)
    end
    local cmd = ("%s bin/regolith verify '%s' 2>&1; echo \"exit=$?\""):format(H.interpreter(), dir)
    local p = io.popen(cmd)
    local out = p:read("a")
    p:close()
    assert.matches("is damaged: ", out, 1, true)
    assert.matches(what, out, 1, true)
    assert.matches("exit=1", out, 1, true)
  end

  it("opens whole: every item, verify clean", function()
    local out, clean = probe(true)
    assert(clean, out)
    assert.matches("^opened\t" .. ITEMS .. "\ttrue", out)
  end)

  it("refuses a data file cut short by 4 KiB, 8 KiB or half, in either mode", function()
    local full = size("data.mdb")
    for _, cut in ipairs({ 4096, 8192, math.floor(full / 2) }) do
      os.execute("rm -rf '" .. dir .. "'")
      assert(os.execute(("cp -r '%s' '%s'"):format(base, dir)))
      truncate("data.mdb", full - cut)
      refused("data.mdb is " .. (full - cut) .. " bytes, shorter than")
    end
  end)

  it("refuses a data file emptied while its log remains, and does not start an empty database", function()
    truncate("data.mdb", 0)
    refused("data.mdb is empty, while its log (regolith.wal) names transaction")
    assert.are.equal(0, size("data.mdb"))
  end)

  it("refuses a data file removed while its log remains, and makes none", function()
    assert(os.remove(dir .. "/data.mdb"))
    refused("data.mdb is missing, while its log (regolith.wal) names transaction")
    assert.is_nil(io.open(dir .. "/data.mdb", "rb"))
  end)

  it("refuses a data file replaced by an older copy of itself", function()
    local old = H.tmpdir()
    assert(os.execute(("cp -r '%s' '%s'"):format(dir, old)))
    local db = assert(regolith.open(dir))
    local c = assert(db:container("t"))
    assert(c:create({ id = "later", pk = "p" }))
    db:close()
    assert(os.execute(("cp '%s/data.mdb' '%s/data.mdb'"):format(old, dir)))
    refused(", where its log (regolith.wal) says it was flushed; the data file was replaced by an older copy")
    -- as the message says: without the log, the copy is the database
    assert(os.remove(dir .. "/regolith.wal"))
    assert(os.remove(dir .. "/regolith.shm"))
    local out, clean = probe(true)
    assert(clean, out)
    assert.matches("^opened\t" .. ITEMS .. "\ttrue", out)
  end)

  it("refuses a data file whose meta page does not check out", function()
    local f = assert(io.open(dir .. "/data.mdb", "r+b"))
    f:seek("set", 4096 + 16)
    f:write(("\0"):rep(8))
    f:close()
    refused("meta page 1 of data.mdb does not check out")
  end)
end)
