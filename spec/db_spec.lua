-- The database handle (docs/api.md, Database): open, options, close,
-- sharing a path, read-only opens, stats, backup and automatic map growth.
local regolith = require "regolith"
local H = require "helper"

local function exists(path)
  return os.rename(path, path) ~= nil
end

local function raises(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error to be raised")
  return err
end

describe("database", function()
  after_each(function()
    collectgarbage()
    H.cleanup()
  end)

  describe("open, close and reopen", function()
    it("creates the directory and names the path in tostring", function()
      local path = H.tmpdir()
      assert.is_false(exists(path))
      local db = assert(regolith.open(path))
      assert.is_true(exists(path))
      assert.is_truthy(tostring(db):find(path, 1, true))
      db:close()
    end)

    it("keeps containers and items across close and reopen", function()
      local db, path = H.open()
      local c = assert(db:create_container("things", { partition_key = "/pk" }))
      for i = 1, 20 do assert(c:create({ id = "i" .. i, pk = "p" .. (i % 3), n = i })) end
      assert(c:delete("i7", "p1"))
      db:close()
      local again = assert(regolith.open(path))
      local c2 = assert(again:container("things"))
      for i = 1, 20 do
        if i == 7 then H.fails(404, c2:read("i7", "p1"))
        else assert.are.equal(i, assert(c2:read("i" .. i, "p" .. (i % 3))).n) end
      end
      assert.are.same({ "things" }, again:containers())
      assert.are.equal(19, again:stats().items)
      again:close()
    end)

    it("accepts the sync modes full, lazy and none", function()
      for _, mode in ipairs({ "full", "lazy", "none" }) do
        local db, path = H.open({ sync = mode })
        local c = assert(db:create_container("c", { partition_key = "/pk" }))
        assert(c:create({ id = "a", pk = "p", mode = mode }))
        db:close()
        local again = assert(regolith.open(path, { sync = mode }))
        assert.are.equal(mode, assert(assert(again:container("c")):read("a", "p")).mode)
        again:close()
      end
    end)

    it("raises on a sync mode outside full, lazy and none", function()
      raises(regolith.open, H.tmpdir(), { sync = "fast" })
      raises(regolith.open, H.tmpdir(), { sync = "FULL" })
      raises(regolith.open, H.tmpdir(), { sync = 1 })
      raises(regolith.open, H.tmpdir(), { sync = true })
    end)

    it("raises on an unknown option, creating nothing", function()
      local path = H.tmpdir()
      local err = raises(regolith.open, path, { map_sise = 1048576 })
      assert.is_truthy(tostring(err):find("map_sise", 1, true))
      raises(regolith.open, path, { [1] = "full" })
      assert.is_false(exists(path))
    end)

    it("raises on options of the wrong type or range", function()
      local path = H.tmpdir()
      raises(regolith.open, path, "full")
      raises(regolith.open, path, 42)
      raises(regolith.open, path, { map_size = "1MB" })
      raises(regolith.open, path, { map_size = 1.5 })
      raises(regolith.open, path, { map_size = -1 })
      raises(regolith.open, path, { readonly = "yes" })
      raises(regolith.open, path, { readonly = 1 })
      raises(regolith.open, path, { script_budget = "lots" })
      raises(regolith.open, path, { script_budget = 0 })
      raises(regolith.open, path, { script_memory = -5 })
      -- beyond any integer, and not a number at all
      raises(regolith.open, path, { map_size = 1e300 })
      raises(regolith.open, path, { map_size = -1e300 })
      raises(regolith.open, path, { script_budget = 0 / 0 })
      raises(regolith.open, path, { max_containers = math.huge })
      raises(regolith.open, path, { max_containers = 0 })
      raises(regolith.open, path, { max_containers = "2" })
      raises(regolith.open, path, { query_time = -1 })
      raises(regolith.open, path, { query_time = "5" })
      raises(regolith.open, path, { query_time = 0 / 0 })
      assert.is_false(exists(path))
    end)

    it("accepts every documented option", function()
      local db = assert(regolith.open(H.tmpdir(), {
        sync = "lazy", map_size = 4 * 1048576, readonly = false,
        script_budget = 1000000, script_memory = 8 * 1048576, max_containers = 10,
        query_time = 2.5,
      }))
      assert(db:create_container("c", { partition_key = "/pk" }))
      db:close()
    end)

    it("raises when a method is called on something that is not a database", function()
      local db = H.open()
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      raises(db.stats, c)
      raises(db.stats, {})
      raises(db.container, nil, "c")
      raises(c.read, db, "a", "p")
      raises(c.create, {}, { id = "a", pk = "p" })
      db:close()
    end)

    it("raises when the path is not a string", function()
      raises(regolith.open)
      raises(regolith.open, nil)
      raises(regolith.open, {})
    end)

    -- the refusal once left an empty regolith.wal and a regolith.shm
    -- beside the other program's file: the log was opened before the file
    -- was found not to be regolith's
    H.local_it("refuses another program's LMDB file with 404, read-only or not, and leaves its directory as it found it",
      "a local directory's files", function()
      local dir = H.tmpdir()
      assert(H.execute("mkdir -p '" .. dir .. "'"))
      assert(H.execute("env -u LD_PRELOAD make -s build/tools/lmdb_poke"))
      assert(H.execute(("build/tools/lmdb_poke '%s' theirs put-main"):format(dir)))
      local function listing() return (H.run("ls -A '" .. dir .. "'")) end
      local files, data = listing(), H.slurp(dir .. "/data.mdb")
      assert.are.equal("data.mdb\nlock.mdb\n", files)
      for _, opts in ipairs({ {}, { readonly = true }, {} }) do
        local msg = H.fails(404, regolith.open(dir, opts))
        assert.are.equal("not a regolith database (table 'meta' missing)", msg)
        assert.are.equal(files, listing())
        assert.are.equal(data, H.slurp(dir .. "/data.mdb"))
      end
    end)

    it("fails with nil, message, status when the path is a file", function()
      local path = H.tmpdir()
      local f = assert(io.open(path, "w"))
      f:write("not a database")
      f:close()
      local db, msg, status = regolith.open(path)
      assert.is_nil(db)
      assert.is_string(msg)
      assert.is_number(status)
    end)
  end)

  describe("a closed handle", function()
    it("raises on every method and says closed in tostring", function()
      local db = H.open()
      assert(db:create_container("c", { partition_key = "/pk" }))
      db:close()
      assert.is_truthy(tostring(db):find("closed", 1, true))
      raises(db.container, db, "c")
      raises(db.containers, db)
      raises(db.create_container, db, "d", { partition_key = "/pk" })
      raises(db.delete_container, db, "c")
      raises(db.stats, db)
      raises(db.backup, db, H.tmpdir())
      raises(db.purge_expired, db)
    end)

    it("can be closed again without harm", function()
      local db = H.open()
      db:close()
      db:close()
      assert.is_truthy(tostring(db):find("closed", 1, true))
    end)

    it("closes its containers", function()
      local db = H.open()
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      assert(c:create({ id = "a", pk = "p" }))
      db:close()
      assert.is_truthy(tostring(c):find("closed", 1, true))
      raises(c.read, c, "a", "p")
      raises(c.create, c, { id = "b", pk = "p" })
      raises(c.upsert, c, { id = "b", pk = "p" })
      raises(c.replace, c, { id = "a", pk = "p" })
      raises(c.delete, c, "a", "p")
      raises(c.patch, c, "a", "p", { { op = "set", path = "/x", value = 1 } })
      raises(c.read_many, c, { { "a", "p" } })
      raises(c.batch, c, "p", { { op = "read", id = "a" } })
      raises(c.name, c)
      raises(c.spec, c)
    end)
  end)

  describe("one path opened twice in a process", function()
    it("shares the database: writes through one handle are visible in the other", function()
      local db1, path = H.open()
      local db2 = assert(regolith.open(path))
      local c1 = assert(db1:create_container("c", { partition_key = "/pk" }))
      local c2 = assert(db2:container("c"))
      assert(c1:create({ id = "a", pk = "p", v = 1 }))
      assert.are.equal(1, assert(c2:read("a", "p")).v)
      assert(c2:replace({ id = "a", pk = "p", v = 2 }))
      assert.are.equal(2, assert(c1:read("a", "p")).v)
      db1:close()
      db2:close()
    end)

    H.local_it("finds the same database under another spelling of the path",
      "a path's spellings are the file system's; a URL names a database one way", function()
      local db1, path = H.open()
      local db2 = assert(regolith.open(path .. "/."))
      local c1 = assert(db1:create_container("c", { partition_key = "/pk" }))
      assert(c1:create({ id = "a", pk = "p" }))
      assert(assert(db2:container("c")):read("a", "p"))
      db2:close()
      db1:close()
    end)

    it("keeps one handle working after the other is closed", function()
      local db1, path = H.open()
      local db2 = assert(regolith.open(path))
      local c2 = assert(db2:create_container("c", { partition_key = "/pk" }))
      local c1 = assert(db1:container("c"))
      db1:close()
      raises(c1.read, c1, "a", "p")
      assert(c2:create({ id = "a", pk = "p" }))
      assert(c2:read("a", "p"))
      db2:close()
      local again = assert(regolith.open(path))
      assert(assert(again:container("c")):read("a", "p"))
      again:close()
    end)
  end)

  describe("read-only opens", function()
    local path
    before_each(function()
      local db
      db, path = H.open()
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      assert(c:create({ id = "a", pk = "p", v = 1 }))
      db:close()
    end)

    it("read what is there", function()
      local ro = assert(regolith.open(path, { readonly = true }))
      local c = assert(ro:container("c"))
      assert.are.equal(1, assert(c:read("a", "p")).v)
      assert.are.same({ "c" }, ro:containers())
      assert.are.equal(1, ro:stats().items)
      ro:close()
    end)

    it("refuse every write with an expected failure and change nothing", function()
      local ro = assert(regolith.open(path, { readonly = true }))
      local c = assert(ro:container("c"))
      H.fails(403, c:create({ id = "b", pk = "p" }))
      H.fails(403, c:upsert({ id = "a", pk = "p", v = 2 }))
      H.fails(403, c:replace({ id = "a", pk = "p", v = 2 }))
      H.fails(403, c:patch("a", "p", { { op = "set", path = "/v", value = 2 } }))
      H.fails(403, c:delete("a", "p"))
      H.fails(403, c:batch("p", { { op = "create", doc = { id = "b", pk = "p" } } }))
      H.fails(403, ro:create_container("d", { partition_key = "/pk" }))
      H.fails(403, ro:delete_container("c"))
      ro:close()
      local db = assert(regolith.open(path))
      local c2 = assert(db:container("c"))
      assert.are.equal(1, assert(c2:read("a", "p")).v)
      H.fails(404, c2:read("b", "p"))
      assert.are.same({ "c" }, db:containers())
      db:close()
    end)

    it("fail with nil, message, status on a path that holds no database, creating nothing", function()
      local missing = H.tmpdir()
      local db, msg, status = regolith.open(missing, { readonly = true })
      assert.is_nil(db)
      assert.is_string(msg)
      assert.is_number(status)
      assert.is_false(exists(missing))
    end)

    H.local_it("fail with nil, message, status when the path is then opened for writing in the same process",
      "a process opens a local path's LMDB environment once, read-only or not; cluster handles are connections of their own", function()
      local ro = assert(regolith.open(path, { readonly = true }))
      local db, msg, status = regolith.open(path)
      assert.is_nil(db)
      assert.is_string(msg)
      assert.is_number(status)
      ro:close()
      local rw = assert(regolith.open(path))
      assert(assert(rw:container("c")):create({ id = "b", pk = "p" }))
      rw:close()
    end)

    it("through a second handle on a path open for writing, refuse writes on that handle only", function()
      local rw = assert(regolith.open(path))
      local ro = assert(regolith.open(path, { readonly = true }))
      H.fails(403, assert(ro:container("c")):create({ id = "b", pk = "p" }))
      assert(assert(rw:container("c")):create({ id = "b", pk = "p" }))
      assert(assert(ro:container("c")):read("b", "p"))
      ro:close()
      rw:close()
    end)
  end)

  describe("stats", function()
    it("counts items and bytes as writes come and go", function()
      local db = H.open()
      local s0 = db:stats()
      assert.are.equal(0, s0.items)
      assert.are.equal(0, s0.bytes)
      local a = assert(db:create_container("a", { partition_key = "/pk" }))
      local b = assert(db:create_container("b", { partition_key = "/pk" }))
      for i = 1, 5 do assert(a:create({ id = "i" .. i, pk = "p", s = ("x"):rep(100) })) end
      assert(b:create({ id = "only", pk = "p" }))
      local s1 = db:stats()
      assert.are.equal(6, s1.items)
      assert.is_true(s1.bytes > 500)
      assert.are.equal(5, s1.containers.a.items)
      assert.are.equal(1, s1.containers.b.items)
      assert.are.equal(s1.bytes, s1.containers.a.bytes + s1.containers.b.bytes)
      assert(a:replace({ id = "i1", pk = "p", s = ("x"):rep(5000) }))
      local s2 = db:stats()
      assert.are.equal(6, s2.items)
      assert.is_true(s2.bytes >= s1.bytes + 4900)
      assert(a:delete("i1", "p"))
      assert(a:delete("i2", "p"))
      local s3 = db:stats()
      assert.are.equal(4, s3.items)
      assert.are.equal(3, s3.containers.a.items)
      assert.is_true(s3.bytes < s1.bytes)
      db:close()
    end)

    it("drops a deleted container's items from the counts", function()
      local db = H.open()
      local a = assert(db:create_container("a", { partition_key = "/pk" }))
      for i = 1, 3 do assert(a:create({ id = "i" .. i, pk = "p" })) end
      assert.are.equal(3, db:stats().items)
      assert(db:delete_container("a"))
      local s = db:stats()
      assert.are.equal(0, s.items)
      assert.are.equal(0, s.bytes)
      assert.is_nil(s.containers.a)
      db:close()
    end)
  end)

  describe("backup", function()
    H.local_it("makes a consistent copy that opens and holds the data",
      "a backup is a copy of the database's file", function()
      local db = H.open()
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      for i = 1, 50 do assert(c:create({ id = "i" .. i, pk = "p" .. (i % 5), n = i })) end
      local dest = H.tmpdir()
      local ok, info = db:backup(dest)
      assert.is_true(ok)
      assert.is_table(info)
      assert.is_number(info.charge)
      assert.are.equal(200, info.status)
      assert(c:create({ id = "after", pk = "p0" }))
      assert(c:delete("i1", "p1"))
      local copy = assert(regolith.open(dest))
      local cc = assert(copy:container("c"))
      for i = 1, 50 do
        assert.are.equal(i, assert(cc:read("i" .. i, "p" .. (i % 5))).n)
      end
      H.fails(404, cc:read("after", "p0"))
      assert.are.equal(50, copy:stats().items)
      assert(cc:create({ id = "new", pk = "p" }))
      H.fails(404, c:read("new", "p"))
      copy:close()
      db:close()
    end)

    H.local_it("compacts: a copy with every page full, the same items, a smaller file",
      "a backup is a copy of the database's file", function()
      local db, path = H.open()
      local c = assert(db:create_container("c", { partition_key = "/pk",
        indexing = { composite = { { { path = "/a" }, { path = "/n", order = "descending" } } } } }))
      for i = 1, 3000 do
        assert(c:upsert({ id = "i" .. (i % 2000), pk = "p" .. (i % 37), n = i, a = i % 7,
          s = ("x"):rep(i % 300) }))
      end
      for i = 1, 500 do assert(c:delete("i" .. i, "p" .. (i % 37))) end
      local before = db:stats({ tables = true })
      local dest = H.tmpdir()
      local ok, info = db:compact(dest)
      assert.is_true(ok)
      assert.is_number(info.bytes)
      assert.is_true(info.bytes < before.used_bytes)
      local copy = assert(regolith.open(dest))
      assert.is_true(copy:verify())
      local cc = assert(copy:container("c"))
      local q = "SELECT c.id, c.n FROM c WHERE c.a = 3 ORDER BY c.n DESC"
      assert.are.same(assert(c:query(q)), assert(cc:query(q)))
      local after = copy:stats({ tables = true })
      assert.are.equal(before.items, after.items)
      for name, t in pairs(before.tables) do
        assert.are.equal(t.entries, after.tables[name].entries, name)
        assert.is_true(after.tables[name].bytes <= t.bytes, name)
      end
      assert.is_true(after.tables.items.bytes < before.tables.items.bytes)
      assert(cc:create({ id = "new", pk = "p" }))         -- a database of its own
      assert.is_true(copy:verify())
      copy:close()
      H.fails(409, db:compact(dest))
      H.fails(409, db:compact(path))
      db:close()
    end)

    H.local_it("refuses a directory that already holds a database with 409",
      "a backup is a copy of the database's file", function()
      local db = H.open()
      local other, opath = H.open()
      local oc = assert(other:create_container("keep", { partition_key = "/pk" }))
      assert(oc:create({ id = "x", pk = "p" }))
      other:close()
      H.fails(409, db:backup(opath))
      local again = assert(regolith.open(opath))
      assert(assert(again:container("keep")):read("x", "p"))
      again:close()
      db:close()
    end)
  end)

  describe("map growth", function()
    local function big(i)
      return { id = "big" .. i, pk = "p" .. (i % 7), i = i,
               s = ("%06d"):format(i):rep(math.floor(100000 / 6)) }
    end

    H.local_it("grows a small map while tens of megabytes are written, and reads it all back after reopening",
      "map_size is the size of a local file's memory map", function()
      local db, path = H.open({ map_size = 1048576, sync = "none" })
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      for i = 1, 300 do
        local doc, msg = c:create(big(i))
        assert(doc, msg)
      end
      assert.is_true(db:stats().map_size >= 30 * 2^20)
      db:close()
      local again = assert(regolith.open(path, { map_size = 1048576 }))
      local c2 = assert(again:container("c"))
      for i = 1, 300 do
        local d = assert(c2:read("big" .. i, "p" .. (i % 7)))
        assert.are.equal(big(i).s, d.s)
      end
      assert.are.equal(300, again:stats().items)
      for i = 301, 320 do assert(c2:create(big(i))) end
      assert.are.equal(320, again:stats().items)
      again:close()
    end)

    H.local_it("takes a single item bigger than the whole initial map",
      "map_size is the size of a local file's memory map", function()
      local db = H.open({ map_size = 1048576 })
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      local s = ("y"):rep(1900000)
      assert(c:create({ id = "huge", pk = "p", s = s }))
      assert.are.equal(s, assert(c:read("huge", "p")).s)
      db:close()
    end)

    H.local_it("grows the map under a batch and keeps it all or nothing",
      "map_size is the size of a local file's memory map", function()
      local db = H.open({ map_size = 1048576 })
      local c = assert(db:create_container("c", { partition_key = "/pk" }))
      -- 20 items of 100 kB: twice the initial map, under a batch's 2 MiB
      local ops = {}
      for i = 1, 20 do
        ops[i] = { op = "create", doc = { id = "b" .. i, pk = "p", s = ("z"):rep(100000) } }
      end
      local results = assert(c:batch("p", ops))
      assert.are.equal(20, #results)
      for i = 1, 20 do assert(c:read("b" .. i, "p")) end
      assert.are.equal(20, db:stats().items)
      db:close()
    end)
  end)
end)
