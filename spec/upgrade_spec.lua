-- Storage formats: a format 1 database (spec/fixtures/format1, written by
-- the release before format 2, and spec/fixtures/format1_rev2, by the last
-- release of format 1; make_format1.sh) is refused with the error
-- naming the upgrade, and regolith.upgrade / `regolith upgrade DIR` make it
-- format 2 losing nothing (docs/api.md, "Storage format").
local regolith = require "regolith"
local H = require "helper"

local json = regolith.json

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local EXPECTED = json.decode(read_file("spec/fixtures/format1.json"))

-- A copy of the fixture in a new directory; its path.
local function fixture()
  local dir = H.tmpdir()
  assert(H.execute(("cp -r spec/fixtures/format1 '%s'"):format(dir)))
  return dir
end

-- Rows in one order, and those the fixture wrote with a 1-second TTL
-- (expired by now) left out.
local function canon(rows)
  local out = {}
  for _, r in ipairs(rows) do
    if r.ttl ~= 1 then out[#out + 1] = r end
  end
  table.sort(out, function(a, b) return a.id < b.id end)   -- ids are unique
  return out
end

describe("storage format 1", function()
  after_each(H.cleanup)

  it("is refused with an error naming the upgrade, and left as it was", function()
    local dir = fixture()
    local before = read_file(dir .. "/data.mdb")
    local msg = H.fails(426, regolith.open(dir))
    assert.matches("format 1", msg)
    assert.matches("regolith.upgrade", msg, 1, true)
    assert.matches("regolith upgrade DIR", msg, 1, true)
    H.fails(426, regolith.open(dir, { readonly = true }))
    assert.are.equal(before, read_file(dir .. "/data.mdb"))
  end)

  it("upgrades to format 2 losing nothing: items, indexes, unique keys, TTL, scripts, the feed, processors", function()
    local dir = fixture()
    local ok, info = regolith.upgrade(dir)
    assert.is_true(ok, info)
    assert.are.equal(1, info.from)
    assert.are.equal(2, info.to)
    assert.is_true(info.upgraded)
    assert.are.equal(EXPECTED.stats, info.items)
    assert.are.equal(dir .. "/data.mdb.format1", info.old_file)
    assert.is_true(H.execute(("test -f '%s/data.mdb.format1'"):format(dir)))
    local db = assert(regolith.open(dir))
    assert.is_true(db:verify())
    assert.are.same({ "h", "posts" }, db:containers())   -- not the deleted one
    assert.are.equal(EXPECTED.lsn, db:stats().lsn)
    for name, rows in pairs(EXPECTED.containers) do
      local c = assert(db:container(name))
      assert.are.same(canon(rows), canon(assert(c:query("SELECT * FROM c"))))
      -- the history was kept: every record, in the container's own spec
      assert.is_true(c:spec().change_feed.all_versions)
      local all = assert(c:changes{ mode = "all_versions", max_items = 100000 })
      assert.are.equal(EXPECTED.feed[name], #all)
    end
    local posts = db:container("posts")
    -- indexes answer as before, through the new entries
    local rows, qi = assert(posts:query(
      "SELECT c.id, c.date FROM c WHERE c.type = 'post' ORDER BY c.date DESC"))
    assert.is_true(qi.index_lookups > 0)
    local want, ids = {}, {}
    for _, r in ipairs(EXPECTED.containers.posts) do
      if r.type == "post" and r.ttl ~= 1 then want[r.id] = true end
    end
    for i, r in ipairs(rows) do
      ids[r.id] = true
      if i > 1 then assert.is_true(rows[i - 1].date >= r.date) end
    end
    assert.are.same(want, ids)
    assert.are.equal(1, #assert(posts:query(
      "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 't3') AND c.n = 19")))
    -- unique keys, etags and TTLs hold
    H.fails(409, posts:create({ id = "dup", postId = "p6", slug = "s20" }))
    local i20 = assert(posts:read("i20", "p6"))
    H.fails(412, posts:replace({ id = "i20", postId = "p6" }, { if_match = '"stale"' }))
    assert(posts:replace({ id = "i20", postId = "p6", slug = "s20" },
      { if_match = i20._etag }))
    H.fails(404, posts:read("i17", "p3"))                 -- its TTL ran out
    assert(posts:read("i10", "p3"))                       -- a long TTL: still there
    -- a hierarchical key with digests in its keys
    local h = db:container("h")
    local long = ("long-id-3-") .. ("z"):rep(300)
    assert.are.equal(3, assert(h:read(long, { ("T"):rep(100), 1 })).v)
    -- the scripts
    assert.are.same({ "count" }, posts:procedures())
    assert.is_true(assert(posts:create({ id = "s", postId = "p1", slug = "zz" },
      { pre_trigger = "stamp" })).stamped)
    -- the processors go on from their checkpoints: the latest one gets the
    -- changes since (those of the transaction it stopped in again at most)
    local got = {}
    local p = assert(db:processor{ name = "latest-copy", source = "posts",
      instance = "fixture", max_items = 1000, handler = function(ch)
        for _, d in ipairs(ch) do got[#got + 1] = d.id end end })
    p:run({ until_idle = true })
    p:close()
    assert.is_true(#got >= 3 and #got < EXPECTED.latest.posts, #got)
    local seen, ops = 0, {}
    local p2 = assert(db:processor{ name = "history", source = "posts",
      mode = "all_versions", instance = "fixture", max_items = 1000,
      handler = function(ch)
        seen = seen + #ch
        for _, x in ipairs(ch) do
          ops[#ops + 1] = x.metadata.operation .. " " .. x.metadata.id
        end
      end })
    p2:run({ until_idle = true })
    p2:close()
    -- every record but those delivered before the upgrade, and the new ones
    local total = #assert(posts:changes{ mode = "all_versions", max_items = 100000 })
    assert.are.equal(total - EXPECTED.history_delivered, seen)
    assert.are.equal(EXPECTED.feed.posts + 3, total)   -- + replace, purge, create
    local all_ops = "," .. table.concat(ops, ",") .. ","
    assert.matches(",delete i17,", all_ops, 1, true)
    assert.matches(",replace i20,", all_ops, 1, true)
    assert.matches(",create s,", all_ops, 1, true)
    assert.is_true(db:verify())
    db:close()
    -- a second upgrade has nothing to do
    ok, info = regolith.upgrade(dir)
    assert.is_true(ok)
    assert.is_false(info.upgraded)
    assert.are.equal(2, info.from)
  end)

  it("drops the history when asked, and removes the old file", function()
    local dir = fixture()
    local ok, info = regolith.upgrade(dir, { history = "drop", keep_old = false })
    assert.is_true(ok, info)
    assert.are.equal(0, info.feed_records)
    assert.is_nil(info.old_file)
    assert.is_false(H.execute(("test -e '%s/data.mdb.format1'"):format(dir)))
    local db = assert(regolith.open(dir))
    assert.is_true(db:verify())
    local posts = db:container("posts")
    assert.is_nil(posts:spec().change_feed)
    H.fails(400, posts:changes{ mode = "all_versions" })
    assert.are.equal(EXPECTED.stats, db:stats().items)
    db:close()
  end)

  it("finishes an upgrade interrupted between its two renames", function()
    local dir = fixture()
    local done = fixture()
    assert(regolith.upgrade(done))
    -- the state the first rename leaves: the old file moved aside, the new
    -- one not yet in place
    assert(H.execute(("mv '%s/data.mdb' '%s/data.mdb.format1' && mkdir '%s/.upgrade' " ..
      "&& cp '%s/data.mdb' '%s/.upgrade/data.mdb'"):format(dir, dir, dir, done, dir)))
    local msg = H.fails(409, regolith.open(dir))
    assert.matches("interrupted", msg)
    local ok, info = regolith.upgrade(dir)
    assert.is_true(ok, info)
    local db = assert(regolith.open(dir))
    assert.is_true(db:verify())
    assert.are.equal(EXPECTED.stats, db:stats().items)
    db:close()
  end)

  it("is refused while another process has the database open", function()
    assert(H.execute("env -u LD_PRELOAD make -s build/tools/lmdb_poke"))
    local dir = fixture()
    local ready = dir .. ".ready"
    -- another process holds a read transaction on the old database
    assert(H.execute(("build/tools/lmdb_poke '%s' meta hold 3 > '%s' &")
      :format(dir, ready)))
    for _ = 1, 100 do
      local f = io.open(ready)
      local s = f and f:read("*a")
      if f then f:close() end
      if s == "ready\n" then break end
      os.execute("sleep 0.02")
    end
    local msg = H.fails(409, regolith.upgrade(dir))
    assert.matches("has the database open", msg)
    H.fails(426, regolith.open(dir))                      -- left as it was
    os.remove(ready)
  end)

  it("upgrades what the last release of format 1 wrote: shapes, computed properties, the none key, UDFs, key prefixes, its log", function()
    -- spec/fixtures/format1_rev2: revision 2 containers, and the log of a
    -- process that died with the database open (its records not replayed
    -- by anyone yet: this copy has no shared file, as after a reboot)
    local expect = json.decode(read_file("spec/fixtures/format1_rev2.json"))
    local dir = H.tmpdir()
    assert(H.execute(("cp -r spec/fixtures/format1_rev2 '%s'"):format(dir)))
    local ok, info = regolith.upgrade(dir)
    assert.is_true(ok, info)
    -- the old file's log went with it: replayed over the new file after
    -- a restart, it would write format 1 pages into it
    assert.is_false(H.execute(("test -e '%s/regolith.wal'"):format(dir)))
    for round = 1, 2 do
      local db = assert(regolith.open(dir))
      assert.is_true(db:verify())
      for _, t in ipairs(round == 1 and expect.queries or {}) do
        local rows = assert(db:container(t.container):query(t.sql))
        if not t.sql:find("ORDER BY") then
          local key = function(x) return type(x) == "table" and json.encode(x) or tostring(x) end
          table.sort(rows, function(a, b) return key(a) < key(b) end)
          table.sort(t.rows, function(a, b) return key(a) < key(b) end)
        end
        assert.are.same(t.rows, rows, t.sql)
      end
      for name, n in pairs(expect.counts) do
        local added = name == "q" and round - 1 or 0
        assert.are.equal(n + added,
                         #assert(db:container(name):query("SELECT VALUE c.id FROM c")))
      end
      assert(db:container("q"):create({ id = "new" .. round, pk = "p1", n = round }))
      db:close()
      -- a restart on another boot: the first open replays what the log
      -- holds (this database's own log now)
      os.remove(dir .. "/regolith.shm")
    end
  end)

  it("has a command: regolith upgrade DIR", function()
    local dir = fixture()
    local out, ok = H.run(("LUA_PATH='%s' LUA_CPATH='%s' %s bin/regolith upgrade '%s' 2>&1")
      :format(package.path, package.cpath, H.interpreter(), dir))
    assert.is_true(ok, out)
    assert.matches("upgraded .* from format 1 to 2: 2 containers, 66 items", out)
    out, ok = H.run(("LUA_PATH='%s' LUA_CPATH='%s' %s bin/regolith upgrade '%s' 2>&1")
      :format(package.path, package.cpath, H.interpreter(), dir))
    assert.is_true(ok, out)
    assert.matches("format 2 already", out)
    out, ok = H.run(("LUA_PATH='%s' LUA_CPATH='%s' %s bin/regolith upgrade '%s' 2>&1")
      :format(package.path, package.cpath, H.interpreter(), H.tmpdir()))
    assert.is_false(ok)
  end)
end)
