-- Group commit (docs/api.md, Group commit): db:group runs several
-- functions in one write transaction, each in a savepoint of its own, and
-- db:group_commit lets concurrent writers of one process share such
-- transactions.  Each member keeps its own atomicity and its own result.
-- A full disk in the middle of a group is in spec/disk_full_spec.lua.
local regolith = require "regolith"
local H = require "helper"

-- Runs the functions as coroutines taking turns (a round-robin scheduler)
-- until all are done.
local function run_all(fns)
  local cos = {}
  for i, f in ipairs(fns) do cos[i] = coroutine.create(f) end
  local live = #cos
  while live > 0 do
    live = 0
    for _, co in ipairs(cos) do
      if coroutine.status(co) == "suspended" then
        assert(coroutine.resume(co))
        if coroutine.status(co) ~= "dead" then live = live + 1 end
      end
    end
  end
end

describe("group commit", function()
local db, c, path
before_each(function()
  db, path = H.open()
  c = assert(db:create_container("c", { partition_key = "/pk",
                                        change_feed = { all_versions = true } }))
end)
after_each(function()
  db:close()
  H.cleanup()
end)

describe("db:group", function()
  it("commits every member in one transaction, each with its own result", function()
    local res, info = assert(db:group({
      function() return c:create({ id = "a", pk = "p" }) end,
      function() return c:upsert({ id = "b", pk = "q", n = 2 }) end,
      function() return 42, "two" end,
    }))
    assert.are.equal(200, info.status)
    assert.are.equal(3, #res)
    assert.is_true(res[1][1])
    assert.are.equal("a", res[1][2].id)
    assert.are.equal(2, res[2][2].n)
    assert.are.same({ true, 42, "two", n = 3 }, res[3])
    local a, b = assert(c:read("a", "p")), assert(c:read("b", "q"))
    assert.are.equal(a._lsn, b._lsn)             -- one transaction
    assert(db:verify())
  end)

  it("lets a failing write fail alone", function()
    assert(c:create({ id = "x", pk = "p" }))
    local res = assert(db:group({
      function() return c:create({ id = "1", pk = "p" }) end,
      function() return c:create({ id = "x", pk = "p", again = true }) end,
      function() return c:create({ id = "2", pk = "p" }) end,
    }))
    assert.is_true(res[2][1])
    H.fails(409, res[2][2], res[2][3], res[2][4])
    assert(c:read("1", "p"))
    assert(c:read("2", "p"))
    assert.is_nil(assert(c:read("x", "p")).again)
    assert(db:verify())
  end)

  it("undoes every write of a member that raises, and only those", function()
    local res = assert(db:group({
      function() return c:create({ id = "1", pk = "p" }) end,
      function()
        assert(c:create({ id = "r1", pk = "p" }))
        assert(c:upsert({ id = "1", pk = "p", by = "the raising member" }))
        error({ code = "boom" })
      end,
      function() return c:create({ id = "2", pk = "p" }) end,
    }))
    assert.is_false(res[2][1])
    assert.are.same({ code = "boom" }, res[2][2])
    H.fails(404, c:read("r1", "p"))
    assert.is_nil(assert(c:read("1", "p")).by)
    assert(c:read("2", "p"))
    -- the feed holds the two kept creates and nothing of the raising member
    local changes = assert(c:changes{ mode = "all_versions" })
    assert.are.equal(2, #changes)
    assert(db:verify())
  end)

  it("never reuses a path id a raising member gave and lost", function()
    -- The member that raises gives /x a path id; its rollback takes the id
    -- back, so the next new path (/y) is given the same number.  A later
    -- /x must be given an id of its own, not the one remembered from the
    -- member rolled back (its entries would then sit under /y's).
    assert(c:create({ id = "first", pk = "p" }))
    local res = assert(db:group({
      function()
        assert(c:create({ id = "a", pk = "p", x = 1 }))
        error("undo it")
      end,
      function() return c:create({ id = "b", pk = "p", y = 2 }) end,
      function() return c:create({ id = "c", pk = "p", x = 2 }) end,
    }))
    assert.is_false(res[1][1])
    assert.is_true(res[2][1] and res[3][1])
    local function ids(sql)
      local got = {}
      for _, d in ipairs(assert(c:query(sql))) do got[#got + 1] = d end
      table.sort(got)
      return got
    end
    assert.are.same({ "b" }, ids("SELECT VALUE c.id FROM c WHERE c.y = 2"))
    assert.are.same({ "c" }, ids("SELECT VALUE c.id FROM c WHERE c.x = 2"))
    assert.are.same({}, ids("SELECT VALUE c.id FROM c WHERE c.y = 1"))
    -- and in the transactions after it, from the dictionary
    assert(c:create({ id = "d", pk = "p", x = 2, y = 3 }))
    assert.are.same({ "c", "d" }, ids("SELECT VALUE c.id FROM c WHERE c.x = 2"))
    assert.are.same({ "d" }, ids("SELECT VALUE c.id FROM c WHERE c.y = 3"))
    assert(db:verify())
  end)

  it("never reuses a path id a failed transaction gave", function()
    -- the whole batch fails (its second create is a conflict) after giving
    -- /x an id; the next transactions give /y and then /x ids of their own
    assert(c:create({ id = "first", pk = "p" }))
    local ok, _, status = c:batch("p", {
      { op = "create", doc = { id = "a", pk = "p", x = 1 } },
      { op = "create", doc = { id = "first", pk = "p" } },
    })
    assert.is_nil(ok)
    assert.are.equal(409, status)
    assert(c:create({ id = "b", pk = "p", y = 2 }))
    assert(c:create({ id = "c", pk = "p", x = 2 }))
    assert.are.same({ "b" }, assert(c:query("SELECT VALUE c.id FROM c WHERE c.y = 2")))
    assert.are.same({ "c" }, assert(c:query("SELECT VALUE c.id FROM c WHERE c.x = 2")))
    assert(db:verify())
  end)

  it("joins a transaction already running (a nested group)", function()
    local res = assert(db:group({
      function()
        local inner = assert(db:group({
          function() return c:create({ id = "in", pk = "p" }) end,
          function() error("inner member") end,
        }))
        assert.is_false(inner[2][1])
        return c:create({ id = "out", pk = "p" })
      end,
    }))
    assert.is_true(res[1][1])
    assert.are.equal(assert(c:read("in", "p"))._lsn, assert(c:read("out", "p"))._lsn)
  end)

  it("raises on misuse", function()
    assert.has_error(function() db:group() end)
    assert.has_error(function() db:group({ 1 }) end, "group: member 1 is not a function")
    local ro = assert(regolith.open(path, { readonly = true }))
    H.fails(403, ro:group({ function() end }))
    ro:close()
  end)
end)

describe("db:group_commit", function()
  it("lets concurrent writers share transactions, each getting its own result", function()
    local g = db:group_commit()
    local got, fns = {}, {}
    for w = 1, 8 do
      fns[w] = function()
        for k = 1, 5 do
          local doc, info = g:run(function()
            return c:create({ id = ("w%d-%d"):format(w, k), pk = "p" .. w, w = w })
          end)
          assert(doc, info)
          assert.are.equal(("w%d-%d"):format(w, k), doc.id)
          assert.are.equal(201, info.status)
          got[#got + 1] = doc
        end
      end
    end
    run_all(fns)
    assert.are.equal(40, #got)
    local st = g:stats()
    assert.are.equal(40, st.members)
    assert.is_true(st.groups <= 10, "groups: " .. st.groups)
    local lsns = {}
    for _, d in ipairs(got) do lsns[d._lsn] = (lsns[d._lsn] or 0) + 1 end
    for _, n in pairs(lsns) do assert.are.equal(8, n) end   -- 8 per transaction
    assert.are.equal(40, db:stats().items)
    assert(db:verify())
  end)

  it("raises a member's error in its own writer only, its writes undone", function()
    local g = db:group_commit()
    local errors, ok = {}, {}
    local fns = {}
    for w = 1, 4 do
      fns[w] = function()
        local done, err = pcall(g.run, g, function()
          assert(c:create({ id = "w" .. w, pk = "p" }))
          if w == 3 then error("writer 3 fails", 0) end
          return true
        end)
        if done then ok[#ok + 1] = w else errors[w] = err end
      end
    end
    run_all(fns)
    assert.are.same({ [3] = "writer 3 fails" }, errors)
    assert.are.equal(3, #ok)
    H.fails(404, c:read("w3", "p"))
    for _, w in ipairs({ 1, 2, 4 }) do assert(c:read("w" .. w, "p")) end
    assert.are.equal(1, g:stats().groups)
    assert(db:verify())
  end)

  it("returns a refused write's failure to its own writer only", function()
    assert(c:create({ id = "taken", pk = "p" }))
    local g = db:group_commit()
    local res = {}
    run_all({
      function() res[1] = { g:run(function() return c:create({ id = "taken", pk = "p" }) end) } end,
      function() res[2] = { g:run(function() return c:create({ id = "free", pk = "p" }) end) } end,
    })
    H.fails(409, res[1][1], res[1][2], res[1][3])
    assert.are.equal("free", res[2][1].id)
  end)

  it("runs a lone writer at once, outside a coroutine too", function()
    local g = db:group_commit()
    for i = 1, 3 do assert(g:run(function() return c:create({ id = "l" .. i, pk = "p" }) end)) end
    assert.are.same({ groups = 3, members = 3 }, g:stats())
    -- a g:run inside a member runs in the member's transaction
    local inner = g:run(function()
      return g:run(function() return c:create({ id = "nested", pk = "p" }) end)
    end)
    assert.are.equal("nested", inner.id)
  end)

  it("commits a long queue in transactions of at most max members", function()
    local g = db:group_commit{ max = 3 }
    local fns = {}
    for w = 1, 7 do
      fns[w] = function() assert(g:run(function() return c:create({ id = "m" .. w, pk = "p" }) end)) end
    end
    run_all(fns)
    assert.are.same({ groups = 3, members = 7 }, g:stats())
  end)

  it("raises on bad options", function()
    assert.has_error(function() db:group_commit{ nope = 1 } end,
      "group_commit: unknown option 'nope'")
    assert.has_error(function() db:group_commit{ max = 0 } end)
    assert.has_error(function() db:group_commit{ yield = 1 } end)
    assert.has_error(function() db:group_commit():run(1) end)
  end)
end)
end)
