-- The write-ahead log (docs/guarantees.md, Power loss and OS crashes): a
-- database directory as a restart would find it (the data file as of the
-- last checkpoint, the log as written, no shared file) opens holding every
-- logged commit, and a record cut short ends the replay cleanly.  The
-- power-loss harness (make powerloss) tries thousands of such directories;
-- this spec keeps the mechanism under every make test.
local regolith = require "regolith"
local H = require "helper"

local function copy(from, to, name)
  assert(H.execute(("cp '%s/%s' '%s/%s'"):format(from, name, to, name)))
end

local function u32(s, at)        -- little-endian, 1-based (LuaJIT too)
  local a, b, c, d = s:byte(at, at + 3)
  return a + b * 256 + c * 65536 + d * 16777216
end

-- The offsets of the log's records, in order: they start at 8 KiB, each
-- with "RGRC" (or "RGRD", one with page deltas) and its length; the first
-- that is not one ends the list.
local function records(path)
  local f = assert(io.open(path, "rb"))
  local all = f:read("*a")
  f:close()
  local list, at = {}, 8192
  while all:sub(at + 1, at + 4) == "RGRC" or all:sub(at + 1, at + 4) == "RGRD" do
    list[#list + 1] = at
    at = at + u32(all, at + 5)
  end
  return list
end

local function u64(s, at)        -- little-endian, 1-based (below 2^53)
  local v = 0
  for k = at + 7, at, -1 do v = v * 256 + s:byte(k) end
  return v
end

-- The log's live records as written (read straight from the file), from
-- the first at 8 KiB on while each is the next transaction of the same
-- epoch: by transaction id, each with the pages it writes (pages[n] =
-- true) and its page deltas ({ page, source } each: the head of a delta
-- segment is the page's offset, length, kind 1 and the source's number);
-- and the first and last ids.  The page size is the data file's.
local function log_pages(path)
  local all = H.slurp(path .. "/regolith.wal")
  local psize = u32(H.slurp(path .. "/data.mdb"):sub(1, 64), 41)   -- FREE's pad
  local recs, at, first, last, epoch = {}, 8192
  while all:sub(at + 1, at + 4) == "RGRC" or all:sub(at + 1, at + 4) == "RGRD" do
    local len, txnid = u32(all, at + 5), u64(all, at + 17)
    if last and (txnid ~= last + 1 or u64(all, at + 9) ~= epoch) then break end
    epoch = u64(all, at + 9)
    local r = { pages = {}, deltas = {} }
    local seg, nseg = at + 40, u32(all, at + 25)
    for _ = 1, nseg do
      if seg + 16 > at + len then break end
      local off, slen, kind = u64(all, seg + 1), u32(all, seg + 9), u32(all, seg + 13)
      local page = math.floor(off / psize)
      if kind == 1 then
        r.deltas[#r.deltas + 1] = { page = page, source = u64(all, seg + 17) }
        r.pages[page] = true
      elseif off >= 2 * psize then
        for pg = page, math.floor((off + slen - 1) / psize) do r.pages[pg] = true end
      end
      seg = seg + 16 + math.floor((slen + 7) / 8) * 8
    end
    recs[txnid] = r
    first, last = first or txnid, txnid
    at = at + len
  end
  return recs, first, last
end

-- The rule of page deltas' sources (wal.h), checked on a log whose
-- records from `from` on were written by writer[txnid]: a record right
-- after another writer's carries no delta, and each delta's source page
-- was written by an earlier record of the same writer, from `from` on,
-- with no other writer's record between.  The number of deltas.
local function sources_hold(recs, writer, from, last)
  local n = 0
  for t = from, last do
    local r = assert(recs[t], "record " .. t)
    if t > from and writer[t - 1] ~= writer[t] then
      assert.are.equal(0, #r.deltas, "the record of transaction " .. t ..
        " right after another writer's carries deltas")
    end
    for _, d in ipairs(r.deltas) do
      local j = t - 1
      while j >= from and writer[j] == writer[t] and not recs[j].pages[d.source] do
        j = j - 1
      end
      assert.is_true(j >= from and writer[j] == writer[t], ("page %d of " ..
        "transaction %d is a delta from page %d, which no earlier record " ..
        "of its writer since %d wrote"):format(d.page, t, d.source, from))
      n = n + 1
    end
  end
  return n
end

-- For the writers of a tiny ring (REGOLITH_WAL_RING): pace(db) after each
-- write lets the checkpoints keep up with the writes, as on a quiet
-- machine: on a loaded one a flush of the data file can take as long as a
-- hundred commits, the live log then passes 16 rings and is restarted
-- under the writer lock, and the ring would seldom go round.  Every fourth
-- write (about 48 KiB of records, three claims' worth), or every `every`th
-- for a ring whose claims are further apart, waits until a checkpoint was
-- made since the last wait (1 s at most).
local PACE = [[
  local system = require "system"
  local pace_n, pace_last = 0, -1
  local function made(db)
    local l = db:stats().log
    return l.checkpoints + l.checkpoints_locked
  end
  local function pace(db, every)
    pace_n = pace_n + 1
    if pace_n % (every or 4) ~= 0 then return end
    local t0 = system.monotime()
    while made(db) == pace_last and system.monotime() - t0 < 1 do
      system.sleep(0.001)
    end
    pace_last = made(db)
  end
]]

describe("the write-ahead log", function()
  after_each(H.cleanup)
  -- a file beside the local data file; a cluster's durability is its
  -- replicas' and each node's AOF (docs/cluster.md, Durability)
  local function it(name, fn)
    return H.local_it(name, "the log is a local file", fn)
  end

  it("lives beside the data file", function()
    local db, path = H.open()
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    assert(c:create({ id = "a", pk = "p" }))
    db:close()
    for _, name in ipairs({ "data.mdb", "regolith.wal", "regolith.shm" }) do
      assert(io.open(path .. "/" .. name), name .. " is missing"):close()
    end
  end)

  it("is taken over from a build keeping another shared layout once its processes are gone (an upgrade without a reboot)", function()
    local db, path = H.open({ sync = "full" })
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    for i = 1, 20 do assert(c:create({ id = "i" .. i, pk = "p" })) end
    db:close()
    -- regolith.shm as a build before the ring leaves it: stamped with this
    -- boot, zeros from its layout word on (byte 164)
    local f = assert(io.open(path .. "/regolith.shm", "r+b"))
    f:seek("set", 164)
    f:write(("\0"):rep(64))
    f:close()
    db = assert(regolith.open(path, { sync = "full" }))
    c = assert(db:container("c"))
    assert(c:create({ id = "after", pk = "p" }))
    assert.are.equal(21, db:stats().items)
    assert.is_true(db:stats().log.records >= 1)
    db:close()
  end)

  it("counts its records, bytes and flushes in db:stats().log", function()
    local db = H.open({ sync = "full" })
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    local before = assert(db:stats().log)
    for i = 1, 10 do assert(c:create({ id = "i" .. i, pk = "p", s = ("x"):rep(500) })) end
    local after = db:stats().log
    assert.are.equal(10, after.records - before.records)
    -- a record holds the pages the create wrote: more than 10 items' worth
    assert.is_true(after.bytes - before.bytes > 10 * 500)
    assert.is_true(after.flushes - before.flushes >= 1)
    assert.is_true(after.checkpoints_locked >= 1)     -- the open's
    assert.are.equal(0, after.checkpoints)
    db:close()
  end)

  for _, case in ipairs({ { "full", false }, { "lazy", false }, { "full", true },
                          { "lazy", true } }) do
    local sync, with = case[1], case[2]
    it("is replayed after a restart, up to its last whole record (sync " .. sync ..
       (with and ", page deltas" or "") .. ")", function()
      local db, path = H.open({ sync = sync })
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      assert(c:create({ id = "before", pk = "p" }))
      db:close()
      -- reopened: the open checkpoints, so this data file is durable
      db = assert(regolith.open(path, { sync = sync, log_deltas = with }))
      c = assert(db:container("c"))
      local base = H.tmpdir()
      assert(H.execute("mkdir -p '" .. base .. "'"))
      copy(path, base, "data.mdb")
      local deltas = db:stats().log.deltas
      for i = 1, 20 do
        assert(c:upsert({ id = "i" .. i, pk = "p" .. (i % 3), n = i,
                          s = ("x"):rep(i * 50) }))
      end
      assert(c:delete("before", "p"))
      -- most of those commits' pages are copies of the one before with a
      -- few changes: asked for, the records carry them as page deltas,
      -- which the replays below make into pages again; else none
      if with then
        assert.is_true(db:stats().log.deltas - deltas >= 20)
      else
        assert.are.equal(deltas, db:stats().log.deltas)
      end
      local recs = records(path .. "/regolith.wal")
      local thirteenth = recs[#recs - 21 + 13]   -- 20 upserts, 1 delete last
      -- the restart: the data file as it was, the log as it is now, and no
      -- shared file (it is never flushed)
      local all = H.tmpdir()
      assert(H.execute("mkdir -p '" .. all .. "'"))
      copy(base, all, "data.mdb")
      copy(path, all, "regolith.wal")
      -- and one whose log was cut inside the record of the 13th write
      local cut = H.tmpdir()
      assert(H.execute("mkdir -p '" .. cut .. "'"))
      copy(base, cut, "data.mdb")
      copy(path, cut, "regolith.wal")
      db:close()
      assert(H.execute(("truncate -s %d '%s/regolith.wal'"):format(
        thirteenth + 100, cut)))

      local r = assert(regolith.open(all, { sync = sync }))
      assert(r:verify())
      local rc = assert(r:container("c"))
      for i = 1, 20 do assert.are.equal(i, assert(rc:read("i" .. i, "p" .. (i % 3))).n) end
      H.fails(404, rc:read("before", "p"))
      r:close()

      r = assert(regolith.open(cut, { sync = sync }))
      assert(r:verify())
      rc = assert(r:container("c"))
      for i = 1, 12 do assert.are.equal(i, assert(rc:read("i" .. i, "p" .. (i % 3))).n) end
      for i = 13, 20 do H.fails(404, rc:read("i" .. i, "p" .. (i % 3))) end
      assert(rc:read("before", "p"))
      -- and it goes on from there
      assert(rc:create({ id = "after", pk = "p" }))
      assert(r:verify())
      r:close()
    end)
  end

  -- the rule that makes a delta's source right, on the log itself: two
  -- processes take turns of three commits each; deltas come only within a
  -- turn, from pages the same turn wrote
  it("takes a page delta's source only from its own process's commits since the last other writer's", function()
    local db, path = H.open({ sync = "full", log_deltas = true })
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    assert(c:create({ id = "first", pk = "p" }))
    local turns = H.tmpdir()
    assert(H.execute("mkdir -p '" .. turns .. "'"))
    local child = H.spawn(([[
      local regolith = require "regolith"
      local system = require "system"
      local db = assert(regolith.open(%q, { sync = "full", log_deltas = true }))
      local c = assert(db:container("c"))
      print("ready")
      io.stdout:flush()
      for turn = 1, math.huge do
        local f, t0 = nil, system.monotime()
        repeat                 -- (a parent that failed gives no more turns)
          f = io.open(%q .. "/" .. turn)
          if not f then system.sleep(0.002) end
        until f or system.monotime() - t0 > 60
        if not f then break end
        local what = f:read("a")
        f:close()
        if what == "stop" then break end
        assert(what == "go", what)
        for i = 1, 3 do
          assert(c:upsert({ id = "c" .. turn .. "-" .. i, pk = "p" .. (i %% 3),
                            s = ("y"):rep(200) }))
        end
        print("done " .. turn)
        io.stdout:flush()
      end
      db:close()
    ]]):format(path, turns))
    H.expect(child, "^ready$")
    -- who wrote each record, by transaction id (so far, this process)
    local writer, _, from, seen = {}, log_pages(path)
    for t = from, seen do writer[t] = "parent" end
    local start = seen
    local function note(who)
      local _, _, last = log_pages(path)
      for t = seen + 1, last do writer[t] = who end
      seen = last
    end
    local turn = 0
    -- a turn's file appears whole (renamed into place): a child that
    -- opened it between its creation and its write would read nothing
    local function give(what)
      turn = turn + 1
      local name = turns .. "/" .. turn
      H.write_file(name .. ".part", what)
      assert(os.rename(name .. ".part", name))
    end
    for round = 1, 4 do
      for i = 1, 3 do
        assert(c:upsert({ id = "p" .. round .. "-" .. i, pk = "p" .. (i % 3),
                          s = ("x"):rep(200) }))
        note("parent")
      end
      give("go")
      H.expect(child, "^done " .. turn .. "$")
      note("child")
    end
    give("stop")
    H.finish(child)
    local recs, _, last = log_pages(path)
    -- 4 rounds of 3 commits by each process, one record each
    assert.are.equal(24, last - start)
    local n = sources_hold(recs, writer, from, last)
    -- and within a turn the deltas are there (the rule is not met by
    -- making none)
    assert.is_true(n >= 8, n .. " deltas")
    assert(db:verify())
    db:close()
  end)

  -- a commit that claims a checkpoint empties its process's cache: the
  -- record after it carries no delta.  With a ring whose every record
  -- passes the claim's bound (4 KiB), and each checkpoint waited for,
  -- every commit claims, and no record carries one; the same commits with
  -- the default ring do
  it("makes no page delta in the record right after a checkpoint claim", function()
    -- one process's commits; with `ring`, after each it waits (5 s at
    -- most) for the header's base to move, and notes each base it saw: the
    -- transactions that claimed a checkpoint (a claim is at its commit)
    local function run(ring)
      local dir, out = H.tmpdir(), H.tmpdir()
      local child = H.script(([[
        local regolith = require "regolith"
        local system = require "system"
        local function u64(s, at)
          local v = 0
          for k = at + 7, at, -1 do v = v * 256 + s:byte(k) end
          return v
        end
        local function base(dir)              -- the newest header's
          local f = assert(io.open(dir .. "/regolith.wal", "rb"))
          local head = f:read(8192)
          f:close()
          local best, seq
          for _, slot in ipairs({ 0, 4096 }) do
            if head:sub(slot + 1, slot + 8) == "RGWAL002" and
               (not seq or u64(head, slot + 209) > seq) then
              seq, best = u64(head, slot + 209), u64(head, slot + 17)
            end
          end
          return best
        end
        local db = assert(regolith.open(%q, { sync = "full", log_deltas = true }))
        local c = assert(db:create_container("c", { partition_key = "/pk" }))
        local f = assert(io.open(%q, "w"))
        local last = base(%q)
        for i = 1, 16 do
          assert(c:upsert({ id = "k" .. i, pk = "p" .. (i %% 3), s = ("z"):rep(5000) }))
          if %s then
            local t0, b = system.monotime(), base(%q)
            while b == last and system.monotime() - t0 < 5 do
              system.sleep(0.001)
              b = base(%q)
            end
            if b ~= last then f:write(b, "\n") end
            last = b
          end
        end
        f:close()
        os.exit(0, false)
      ]]):format(dir, out, dir, tostring(ring ~= nil), dir, dir))
      assert.is_true(H.execute((ring and "REGOLITH_WAL_RING='" .. ring .. "' " or "") ..
                               H.lua_cmd(child)))
      local recs, first, last = log_pages(dir)
      local writer, claimed, after = {}, {}, 0
      for t = first, last do writer[t] = "one" end
      for b in H.slurp(out):gmatch("%d+") do claimed[tonumber(b)] = true end
      for t = last - 14, last do
        if claimed[t - 1] then
          after = after + 1
          assert.are.equal(0, #recs[t].deltas, "the record right after the claim of transaction " .. (t - 1))
        end
      end
      return sources_hold(recs, writer, first, last), after
    end
    -- a ring whose every record passes the claim's bound (4 KiB): a commit
    -- claims whenever no claim is pending
    local n, after = run("4096 67108864")
    assert.is_true(after >= 8, after .. " records right after a claim")
    -- the same commits with the default ring (no claim) make deltas
    n = run(nil)
    assert.is_true(n >= 8, n .. " deltas")
  end)

  -- sync "full" holds a commit's data pages (those over blocks the file
  -- has) until its record is appended and its flush begun; a commit that
  -- writes more than 8 MiB of pages has them written at once and holds no
  -- more.  Both, on pages the file has (a deleted container's, reused):
  -- read back through the map at once, and from the file after a close.
  it("writes the pages it held for a durable commit, a small one and one of more than 8 MiB, before its meta page", function()
    local db, path = H.open({ sync = "full" })
    local function docs(tag, n)
      local t = {}
      for i = 1, n do
        t[i] = { id = tag .. i, pk = "p" .. (i % 50), s = ("x"):rep(700) .. i }
      end
      return t
    end
    local function check(d)
      assert(d:verify())
      local c = assert(d:container("c"))
      assert.are.equal(1, assert(c:read("small", "p1")).n)
      assert.are.equal(2, assert(c:read("after", "p2")).n)
      for _, i in ipairs({ 1, 777, 6000, 12000 }) do
        assert.are.equal(("x"):rep(700) .. i, assert(c:read("n" .. i, "p" .. (i % 50))).s)
      end
      H.fails(404, d:container("old"))
    end
    local c = assert(db:create_container("old", { partition_key = "/pk" }))
    assert(c:bulk_load(docs("o", 12000)))
    assert(db:delete_container("old"))
    db:close()
    db = assert(regolith.open(path, { sync = "full" }))
    c = assert(db:create_container("c", { partition_key = "/pk" }))
    assert(c:create({ id = "small", pk = "p1", n = 1 }))
    local r = assert(c:bulk_load(docs("n", 12000)))
    assert.are.equal(12000, r.written)
    assert(c:create({ id = "after", pk = "p2", n = 2 }))
    check(db)
    db:close()
    db = assert(regolith.open(path, { sync = "full" }))
    check(db)
    db:close()
  end)

  for _, how in ipairs({ "compact", "backup" }) do
    it("is never replayed over a copy made by db:" .. how .. " where another database's log was left", function()
      -- a directory whose database was removed but not its log: the log of
      -- a process that died with it open, records not marked closed
      local gone = H.tmpdir()
      local child = H.script(([[
        local regolith = require "regolith"
        local db = assert(regolith.open(%q, { sync = "full" }))
        local c = assert(db:create_container("old", { partition_key = "/pk" }))
        for i = 1, 30 do assert(c:upsert({ id = "o" .. i, pk = "p", s = ("y"):rep(900) })) end
        os.exit(0)
      ]]):format(gone))
      assert.is_true(H.execute(H.lua_cmd(child)))
      assert.is_true(#records(gone .. "/regolith.wal") > 0)
      assert(H.execute(("rm -f '%s/data.mdb' '%s/lock.mdb'"):format(gone, gone)))
      -- the copy goes there
      local db = H.open({ sync = "full" })
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      for i = 1, 200 do assert(c:create({ id = "i" .. i, pk = "p" .. (i % 5), n = i })) end
      assert(db[how](db, gone))
      db:close()
      -- a restart on another boot: the first open replays what a log holds
      os.remove(gone .. "/regolith.shm")
      local copy_db = assert(regolith.open(gone))
      assert.is_true(copy_db:verify())
      assert.are.same({ "c" }, copy_db:containers())
      assert.are.equal(200, copy_db:stats().items)
      copy_db:close()
    end)
  end

  it("checkpoints without the writer lock and goes round as a ring; a restart replays from the last checkpoint's base", function()
    -- a small ring (REGOLITH_WAL_RING: a checkpoint claimed past 16 KiB of
    -- live log, records back to the start past 64 KiB), so that 600
    -- writes of a kilobyte (about 9 MiB of records) make many checkpoints
    -- and laps; the writer is
    -- killed (no closing checkpoint) after logging what it was told
    local dir, acks = H.tmpdir(), H.tmpdir()
    local child = H.script(PACE .. ([[
      local regolith = require "regolith"
      local db = assert(regolith.open(%q, { sync = "full" }))
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      local log = assert(io.open(%q, "w"))
      for i = 1, 600 do
        assert(c:upsert({ id = "k" .. (i %% 40), pk = "p" .. (i %% 3), n = i,
                          s = ("z"):rep(600 + i %% 500) }))
        if i %% 7 == 0 then assert(c:delete("k" .. (i %% 40), "p" .. (i %% 3))) end
        pace(db)
        log:write(i, "\n")
        log:flush()
      end
      log:write("bytes ", db:stats().log.bytes, "\n")
      log:flush()
      os.exit(0, false)
    ]]):format(dir, acks))
    assert.is_true(H.execute("REGOLITH_WAL_RING='16384 65536' " .. H.lua_cmd(child)))
    local wal = H.slurp(dir .. "/regolith.wal")
    -- the header on the disk: its sequence went far past its epoch (the
    -- checkpoints that do not restart the log keep the epoch), and the
    -- records went back to the start (a jump) more than once
    local best
    for _, slot in ipairs({ 0, 4096 }) do
      if wal:sub(slot + 1, slot + 8) == "RGWAL002" then
        local h = { epoch = u64(wal, slot + 9), seq = u64(wal, slot + 209),
                    base_off = u64(wal, slot + 217) }
        if not best or h.seq > best.seq then best = h end
      end
    end
    assert.is_truthy(best)
    assert.is_true(best.seq > best.epoch + 10, "checkpoints without the writer lock")
    -- the records logged were many times the file's size: the ring went
    -- round (how many jump records its last laps left in the file depends
    -- on where each lap ended, and so on the checkpoints' speed)
    local logged = tonumber(H.slurp(acks):match("bytes (%d+)"))
    assert.is_true(logged > 4 * #wal, "the ring went round: " .. logged .. " bytes logged, " .. #wal .. " in the file")
    -- about 9 MiB of records went through a file that stays near the ring:
    -- when the checkpoints fall behind (a slow flush of the data file), the
    -- records run on past the ring's end up to 16 rings of live log (then a
    -- checkpoint under the writer lock), and the file is grown a ring ahead
    assert.is_true(#wal <= 8192 + 20 * 65536, "the log stays small: " .. #wal)
    -- a restart on another boot replays the log from the checkpoint's base
    assert(os.remove(dir .. "/regolith.shm"))
    local db = assert(regolith.open(dir))
    assert.is_true(db:verify())
    local c = assert(db:container("c"))
    local want = {}
    for i = 1, 600 do
      local key = "k" .. (i % 40) .. "/p" .. (i % 3)
      want[key] = i % 7 ~= 0 and i or nil
    end
    for key, n in pairs(want) do
      local id, pk = key:match("^(.-)/(.*)$")
      assert.are.equal(n, assert(c:read(id, pk)).n)
    end
    local count = 0
    for _ in pairs(want) do count = count + 1 end
    assert.are.equal(count, db:stats().items)
    db:close()
  end)

  it("checks every record of the ring from the checkpoint's base on: damage before a jump is refused, a torn last record is the end", function()
    -- The replay reads from the header's base_off, follows a jump (RJMP)
    -- back to 8 KiB, and stops at the first record that is not whole.  A
    -- record damaged just before the jump leaves every later one below it
    -- in the file: the check must still find them and refuse the log.
    -- A writer in a small ring runs until the records a replay reads go
    -- through a jump with two after it, and is killed there (no closing
    -- checkpoint).  Its checkpoints are claimed every 64 KiB of live log
    -- (about six records) and the ring is 256 KiB: each time the ring goes
    -- round, a claim falls early enough before the jump for the replay's
    -- records to hold it with two after it about half the time, whatever
    -- the checkpoints' speed (with claims at every record, as in the tiny
    -- ring, only a checkpoint slower than two commits leaves such a window,
    -- which a quiet machine seldom has).
    local walk_src = [[
      local function u32(s, at)
        local a, b, c, d = s:byte(at, at + 3)
        return a + b * 256 + c * 65536 + d * 16777216
      end
      local function u64(s, at)
        local v = 0
        for k = at + 7, at, -1 do v = v * 256 + s:byte(k) end
        return v
      end
      -- the records a replay reads: { off =, jump = }, from the header's base
      local function walk(wal)
        local best
        for _, slot in ipairs({ 0, 4096 }) do
          if wal:sub(slot + 1, slot + 8) == "RGWAL002" then
            local h = { epoch = u64(wal, slot + 9), base = u64(wal, slot + 17),
                        seq = u64(wal, slot + 209), off = u64(wal, slot + 217) }
            if not best or h.seq > best.seq then best = h end
          end
        end
        local list, off, expect = {}, best.off, best.base + 1
        while off + 40 <= #wal do
          local tag = wal:sub(off + 1, off + 4)
          if (tag ~= "RGRC" and tag ~= "RGRD" and tag ~= "RJMP") or u64(wal, off + 9) ~= best.epoch
             or u64(wal, off + 17) ~= expect then break end
          list[#list + 1] = { off = off, jump = tag == "RJMP" }
          if tag == "RJMP" then off = 8192
          else off = off + u32(wal, off + 5); expect = expect + 1 end
        end
        return list
      end
    ]]
    local walk = assert(load(walk_src .. " return walk"))()
    local function jump_at(list)
      for k = 2, #list do if list[k].jump then return k end end
    end
    local dir, list, j
    for _ = 1, 6 do
      dir = H.tmpdir()
      local child = H.script(walk_src .. PACE .. ([[
        local regolith = require "regolith"
        local db = assert(regolith.open(%q, { sync = "full" }))
        local c = assert(db:create_container("c", { partition_key = "/pk" }))
        for i = 1, 3000 do
          assert(c:upsert({ id = "k" .. (i %% 40), pk = "p", n = i,
                            s = ("z"):rep(600 + i %% 500) }))
          pace(db, 8)
          if i > 300 then
            local f = assert(io.open(%q .. "/regolith.wal", "rb"))
            local list = walk(f:read("*a"))
            f:close()
            for k = 2, #list - 2 do
              if list[k].jump then os.exit(0, false) end
            end
          end
        end
        os.exit(0, false)
      ]]):format(dir, dir))
      assert.is_true(H.execute("REGOLITH_WAL_RING='65536 262144' " .. H.lua_cmd(child)))
      list = walk(H.slurp(dir .. "/regolith.wal"))
      j = jump_at(list)
      if j and j + 2 <= #list then break end
    end
    -- (two records after it: the one after the damaged one may be lost by
    -- a power cut, not the one after that)
    assert.is_truthy(j and j + 2 <= #list, "a replay's records go through a jump")
    assert(os.remove(dir .. "/regolith.shm"))           -- as after a restart
    local torn = H.tmpdir()
    assert(H.execute(("mkdir '%s'"):format(torn)))
    for _, name in ipairs({ "data.mdb", "regolith.wal" }) do copy(dir, torn, name) end
    -- a byte of the record before the jump changed: refused, nothing replayed
    local before = list[j - 1].off
    local f = assert(io.open(dir .. "/regolith.wal", "r+b"))
    f:seek("set", before + 48)
    local b = f:read(1)
    f:seek("set", before + 48)
    f:write(string.char((b:byte() + 1) % 256))
    f:close()
    local db, err, status = regolith.open(dir)
    assert.is_nil(db)
    assert.are.equal(500, status)
    assert.matches("does not check out at byte " .. before .. " ", err, 1, true)
    -- the last record torn (its second half zeroed, as a power cut leaves
    -- it): the replay ends before it, and the database opens sound
    local last = list[#list].off
    f = assert(io.open(torn .. "/regolith.wal", "r+b"))
    local len = f:seek("set", last + 4) and f:read(4)
    local n = len:byte(1) + len:byte(2) * 256 + len:byte(3) * 65536
    local half = math.floor(n / 2)
    f:seek("set", last + half)
    f:write(("\0"):rep(n - half))
    f:close()
    db = assert(regolith.open(torn))
    assert.is_true(db:verify())
    local c = assert(db:container("c"))
    assert.is_true(db:stats().items == 40 and c:read("k1", "p") ~= nil)
    db:close()
  end)

  it("trusts the data file after a clean close: another LMDB program's writes survive a restart", function()
    local poke = "build/tools/lmdb_poke"
    assert(H.execute("env -u LD_PRELOAD make -s " .. poke))
    local db, path = H.open()
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    for i = 1, 10 do assert(c:create({ id = "i" .. i, pk = "p" })) end
    db:close()
    -- another program deletes an item's entry, LMDB's own way
    assert(H.execute(("env -u LD_PRELOAD %s '%s' items del-first"):format(poke, path)))
    -- the restart: the shared file is gone
    assert(os.remove(path .. "/regolith.shm"))
    db = assert(regolith.open(path))
    local ok, report = db:verify()
    assert.is_nil(ok)                    -- the deletion is still there
    assert.matches("item", report)
    db:close()
  end)
end)
