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

  local function contents(name)
    local f = assert(io.open(dir .. "/" .. name, "rb"))
    local all = f:read("a")
    f:close()
    return all
  end

  local function size(name) return #contents(name) end

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
      for i = 1, c and %d or 0 do       -- every item read: each answers
        local doc, msg, status = c:read("i" .. i, "p" .. (i %% 50))
        assert(doc or type(msg) == "string" and type(status) == "number")
      end
      local ok, report = db:verify()
      print("opened", rows and rows[1], ok, report)]]):format(dir, tostring(readonly), ITEMS))
    local p = io.popen(H.lua_cmd(child) .. " 2>&1; echo \"exit=$?\"")
    local out = p:read("a")
    p:close()
    return out, out:match("exit=(%d+)") == "0"
  end

  -- Both kinds of open refuse with 500 and `what` in the message, and the
  -- command line's verify reports it and exits 1.
  local function refused(what, modes)
    for _, ro in ipairs(modes or { true, false }) do
      local out, clean = probe(ro)
      assert(clean, "the process died: " .. out)
      assert.matches("^refused\t500\t", out)
      assert.matches("the database '" .. dir .. "' is damaged: ", out, 1, true)
      assert.matches(what, out, 1, true)
    end
    if modes then return end            -- the command opens read-only
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

  it("never takes a sound file for one cut short: the file reaches its meta page's last page", function()
    -- LMDB counts in the last page the pages a transaction took and gave
    -- back (never written): such a file ended short of it, and was refused
    -- when opened again
    local function u64(s, at)           -- little-endian (LuaJIT: no unpack)
      local n = 0
      for i = at + 7, at, -1 do n = n * 256 + s:byte(i) end
      return n
    end
    local function short()
      local f = assert(io.open(dir .. "/data.mdb", "rb"))
      local best, last = -1, 0
      for m = 0, 1 do
        f:seek("set", m * 4096 + 16 + 120)   -- the meta's last page, txnid
        local b = f:read(16)
        local l, t = u64(b, 1), u64(b, 9)
        if t > best then best, last = t, l end
      end
      local size = f:seek("end")
      f:close()
      return size < (last + 1) * 4096
    end
    for round = 1, 3 do
      local db = assert(regolith.open(dir))
      local c = assert(db:container("t"))
      local ops = {}
      for i = 1, 50 do ops[i] = { op = "create", doc = { id = "x" .. i, pk = "p", s = ("y"):rep(3000) } } end
      for i = 1, 50 do ops[50 + i] = { op = "delete", id = "x" .. i } end
      assert(c:batch("p", ops))
      assert(c:create({ id = "k" .. round, pk = "q" }))
      assert.is_false(short(), "round " .. round)
      db:close()
      db = assert(regolith.open(dir))
      assert.is_true(db:verify())
      db:close()
    end
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

  it("refuses a data file emptied together with its log: regolith.id remembers the database", function()
    truncate("data.mdb", 0)
    assert(os.remove(dir .. "/regolith.wal"))
    assert(os.remove(dir .. "/regolith.shm"))
    refused("data.mdb is empty, while regolith.id says the directory holds a database")
    assert.are.equal(0, size("data.mdb"))
  end)

  it("refuses the data file of another database put in this one's place", function()
    local other = H.tmpdir()
    local db = assert(regolith.open(other))
    assert(db:create_container("t", { partition_key = "/pk" }))
    db:close()
    assert(os.execute(("cp '%s/data.mdb' '%s/data.mdb'"):format(other, dir)))
    assert(os.remove(dir .. "/regolith.wal"))
    refused("data.mdb is another database than the one regolith.id says the directory holds")
  end)

  it("refuses a damaged regolith.id rather than take it for none", function()
    local f = assert(io.open(dir .. "/regolith.id", "r+b"))
    f:seek("set", 9)                   -- a byte of the secret's hash: a
    local b = f:read(1):byte()         -- byte it holds 1 time in 256
    f:seek("set", 9)
    f:write(string.char((b + 1) % 256))
    f:close()
    refused("regolith.id, which names the database the directory holds, does not check out")
  end)

  describe("after a crash, its log", function()
    -- The files as a crash leaves them: copied while the database is open
    -- after its last commit, so that the next open replays the log
    local function crashed()
      os.execute("rm -rf '" .. dir .. "'")
      local live = H.tmpdir()
      local db = assert(regolith.open(live))
      local c = assert(db:create_container("t", { partition_key = "/pk" }))
      for i = 1, 300 do assert(c:create({ id = "i" .. i, pk = "p" .. (i % 5), v = i })) end
      assert(os.execute(("cp -r '%s' '%s'"):format(live, dir)))
      db:close()
      assert(os.remove(dir .. "/regolith.shm"))    -- as after a restart
    end

    it("is replayed whole", function()
      crashed()
      local out, clean = probe(true)
      assert(clean, out)
      assert.matches("^opened\t300\ttrue", out)
    end)

    it("refuses a record damaged in its middle rather than roll the database back", function()
      crashed()
      local f = assert(io.open(dir .. "/regolith.wal", "r+b"))
      f:seek("set", 8192 + 48)
      local b = f:read(1)
      f:seek("set", 8192 + 48)
      f:write(string.char((b:byte() + 1) % 256))
      f:close()
      -- (a read-only open without regolith.shm replays nothing: it reads the
      -- data file as it is)
      refused("its log (regolith.wal) does not check out at byte 8192", { false })
    end)

    it("refuses a log cut short rather than roll the database back", function()
      crashed()
      truncate("regolith.wal", 8192 + 20000)
      refused("the log was cut short or damaged", { false })
    end)
  end)

  it("answers every call over 256 random bit flips, and never calls the file sound", function()
    -- once: SIGSEGV or SIGBUS in 5 of these 10 seeds, and verify itself
    -- crashed on two
    local full = size("data.mdb")
    for seed = 1, 10 do
      os.execute("rm -rf '" .. dir .. "'")
      assert(os.execute(("cp -r '%s' '%s'"):format(base, dir)))
      math.randomseed(seed)
      local f = assert(io.open(dir .. "/data.mdb", "r+b"))
      for _ = 1, 256 do
        local at = math.random(8192, full - 1)
        f:seek("set", at)
        local b = f:read(1):byte()
        f:seek("set", at)
        local bit = 2 ^ math.random(0, 7)
        f:write(string.char(b % (2 * bit) >= bit and b - bit or b + bit))
      end
      f:close()
      for _, ro in ipairs({ true, false }) do
        local out, clean = probe(ro)
        assert(clean, ("seed %d: the process died: %s"):format(seed, out))
        local n, sound = out:match("^opened\t(%S+)\t(%S+)")
        if n then
          assert(sound ~= "true" or tonumber(n) == ITEMS,
                 ("seed %d: verify calls sound a file missing items: %s"):format(seed, out))
        else
          assert.matches("^refused\t500\t", out)
        end
      end
    end
  end)

  -- Where a table's leaf lies: the live meta page's main tree, and in it
  -- the table `name` (both single leaves in this database).  Returns the
  -- file's bytes, a function finding a node's key in a leaf (its offset in
  -- the file, 0-based, and the offset of its value), the table's leaf and
  -- the main tree's.
  local function leaf_of(name)
    local all = contents("data.mdb")
    local function u(at, n)            -- little-endian at 0-based `at`
      local v = 0
      for i = at + n, at + 1, -1 do v = v * 256 + all:byte(i) end
      return v
    end
    local live = u(16 + 128, 8) > u(4096 + 16 + 128, 8) and 0 or 1
    local main = live * 4096 + 16 + 24 + 48      -- the main tree's record
    assert(u(main + 6, 2) == 1, "the main tree is one leaf")
    local function node(pg, key)
      local base = pg * 4096
      for i = 0, (u(base + 12, 2) - 16) / 2 - 1 do
        local at = base + u(base + 16 + 2 * i, 2)
        local ks = u(at + 6, 2)
        if all:sub(at + 9, at + 8 + ks) == key then return at + 8, at + 8 + ks end
      end
      error("no key " .. key .. " in page " .. pg)
    end
    local _, rec = node(u(main + 40, 8), name)
    assert(u(rec + 6, 2) == 1, "the table is one leaf")
    return all, node, u(rec + 40, 8), u(main + 40, 8)
  end

  local function flip(at, bit)
    local f = assert(io.open(dir .. "/data.mdb", "r+b"))
    f:seek("set", at)
    local b = f:read(1):byte()
    f:seek("set", at)
    f:write(string.char(b % (2 * bit) >= bit and b - bit or b + bit))
    f:close()
  end

  -- A flip in the key of the format version once made the table 'meta'
  -- lack it: a read-only open said "not a regolith database" (404), and a
  -- read-write one set the database up again in the damaged file, with a
  -- new secret.  The open read the tables of names before it knew whether
  -- to trust the pages' checksums.  Here the page's checksum flag is
  -- cleared too (a second flip could do it): the open's own rule, not the
  -- checksum, must refuse it.
  local function unsummed(pg) flip(pg * 4096 + 11, 1) end

  -- The bit at `at` flipped, both kinds of open refuse with `what` and
  -- leave the file as it was.
  local function refused_untouched(at, bit, what)
    flip(at, bit)
    local before = contents("data.mdb")
    refused(what)
    assert(contents("data.mdb") == before, "the damaged file was written into")
  end

  it("refuses a table 'meta' without its format version, and writes nothing into it", function()
    local _, node, meta = leaf_of("meta")
    unsummed(meta)
    refused_untouched(node(meta, "\1version") + 1, 1,   -- "\1wersion"
                      "its table 'meta' holds no format version")
  end)

  it("refuses a main tree without the table 'meta', and writes nothing into it", function()
    local _, node, _, main = leaf_of("meta")
    unsummed(main)
    refused_untouched(node(main, "meta"), 4,            -- "ieta"
                      "its table 'meta' is missing")
  end)

  it("checks the checksums of the tables of names as the open reads them", function()
    local cases = {
      -- a byte of the container's record in 'meta': taken as it came
      function(node, meta) return select(2, node(meta, "c\0\0\0\1")) + 10, 4, meta end,
      -- the flags of the table 'items' in the main tree, "sorted
      -- duplicates" added: LMDB followed them (SIGSEGV)
      function(node, _, main) return node(main, "items") - 4, 4, main end,
      -- a bit of the secret: read again without the checksums (as for a
      -- data file of another database, below), it would pass for another
      -- database's
      function(node, meta) return select(2, node(meta, "\1secret")), 1, meta end,
    }
    for _, case in ipairs(cases) do
      os.execute("rm -rf '" .. dir .. "'")
      assert(os.execute(("cp -r '%s' '%s'"):format(base, dir)))
      local _, node, meta, main = leaf_of("meta")
      local at, bit, pg = case(node, meta, main)
      flip(at, bit)
      for _, ro in ipairs({ true, false }) do
        local out, clean = probe(ro)
        assert(clean, "the process died: " .. out)
        assert.matches("^refused\t500\t", out)
        assert.matches(("is damaged: .*page %d of data.mdb does not check out "
                        .. "%%(its checksum does not hold%%)"):format(pg), out)
      end
    end
  end)

  -- regolith.id says every page carries its checksum at the file's
  -- transaction, so the tables of names are read with them from the open's
  -- start: the data file of another database whose transaction matched,
  -- with a stale checksum there (another LMDB program rewrote the page),
  -- was refused as damaged ("restore it from a backup") where it is
  -- another database ("remove regolith.id")
  it("refuses the data file of another database, its transaction the one regolith.id names and a checksum stale, as another database", function()
    local function txnid(at)
      local f = assert(io.open(at .. "/data.mdb", "rb"))
      local best = 0
      for m = 0, 1 do
        f:seek("set", m * 4096 + 16 + 128)   -- the meta page's txnid
        local b, n = f:read(8), 0
        for i = 8, 1, -1 do n = n * 256 + b:byte(i) end
        if n > best then best = n end
      end
      f:close()
      return best
    end
    os.execute("rm -rf '" .. dir .. "'")
    local db = assert(regolith.open(dir))
    local c = assert(db:create_container("t", { partition_key = "/pk" }))
    for i = 1, 3 do assert(c:create({ id = "i" .. i, pk = "p" })) end
    db:close()
    local other = H.tmpdir()
    db = assert(regolith.open(other))
    c = assert(db:create_container("t", { partition_key = "/pk" }))
    while txnid(other) < txnid(dir) do assert(c:upsert({ id = "o", pk = "p" })) end
    db:close()
    assert.are.equal(txnid(dir), txnid(other))
    assert(os.execute(("cp '%s/data.mdb' '%s/data.mdb'"):format(other, dir)))
    assert(os.remove(dir .. "/regolith.wal"))
    local _, _, _, main = leaf_of("meta")
    flip(main * 4096 + 8, 1)             -- the main tree's checksum
    refused("data.mdb is another database than the one regolith.id says the directory holds")
  end)

  it("refuses a data file whose meta page does not check out", function()
    local f = assert(io.open(dir .. "/data.mdb", "r+b"))
    f:seek("set", 4096 + 16)
    f:write(("\0"):rep(8))
    f:close()
    refused("meta page 1 of data.mdb does not check out")
  end)
end)
