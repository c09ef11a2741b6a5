-- Charges a modeller can trust (docs/charges.md): a query's charge is the
-- work of its plan under the container's indexing policy, whatever the
-- executor does to carry the plan out.  A small partition's entries are
-- built in memory from its items (info.executor says so), and cost what
-- the stored index would: the same documents, the same order, the same
-- tokens, the same charge.
local H = require "helper"

-- The items of partition "p": numbers, strings, items lacking n, strings
-- cut in the index (a run of equal terms), one item of more than 64 paths
-- (a wide shape).
local function item(i)
  local d = { id = ("i%03d"):format(i), pk = "p", g = i % 4,
              u = (i * 7919) % 100003,
              t = ("2024-01-%02d"):format(i % 28 + 1),
              s = (i % 7 == 0) and (("x"):rep(210) .. (i % 5)) or ("v" .. (i % 13)) }
  if i % 17 ~= 0 then d.n = (i % 23 == 0) and ("s" .. i) or i end
  if i % 11 == 0 then d.extra = { deep = i } end
  if i == 100 then
    for f = 1, 70 do d["f" .. f] = f end
  end
  return d
end

-- The item that takes the partition past 256 items: every queried path
-- holds a value no query below reaches.
local NEUTRAL = { id = "zz", pk = "p", n = 1e6, g = 9, t = "2099-01-01",
                  s = "zzzz", u = 1e6 }

-- Queries whose results and charges the neutral item cannot change.
local QUERIES = {
  { "SELECT VALUE c.id FROM c WHERE c.pk = 'p' AND c.n > 200 AND c.n < 1000" },
  { "SELECT VALUE c.id FROM c WHERE c.pk = 'p' AND c.n >= 10 AND c.n <= 20 ORDER BY c.n DESC" },
  { "SELECT TOP 20 c.id, c.n FROM c WHERE c.pk = 'p' ORDER BY c.n" },
  { "SELECT c.id FROM c WHERE c.pk = 'p' AND c.n < 1000 ORDER BY c.n DESC OFFSET 3 LIMIT 15" },
  { "SELECT TOP 40 VALUE c.id FROM c WHERE c.pk = 'p' ORDER BY c.s" },
  { "SELECT c.g, COUNT(1) AS n FROM c WHERE c.pk = 'p' AND c.g < 5 GROUP BY c.g" },
  { "SELECT DISTINCT VALUE c.t FROM c WHERE c.pk = 'p' AND c.t < '2050'" },
  { "SELECT VALUE c.id FROM c WHERE c.pk = 'p' AND STARTSWITH(c.s, 'v1')" },
  { "SELECT TOP 25 VALUE c.id FROM c WHERE c.pk = 'p' AND c.g < 5 ORDER BY c.g, c.n DESC" },
  { "SELECT TOP 12 VALUE c.id FROM c WHERE c.pk = 'p' AND c.t < '2050' ORDER BY c.t DESC" },
  -- a path whose every value is an item's own: the stored index steps
  -- over every other partition's entries
  { "SELECT TOP 15 c.id, c.u FROM c WHERE c.pk = 'p' ORDER BY c.u" },
  { "SELECT VALUE c.id FROM c WHERE c.pk = 'p' AND c.u > 20000 AND c.u < 90000 ORDER BY c.u DESC" },
  { "SELECT DISTINCT VALUE c.u FROM c WHERE c.pk = 'p' AND c.u < 100003" },
}

describe("charges", function()
  local db, dbpath, c, tiny

  before_each(function()
    db, dbpath = H.open()
    c = assert(db:create_container("c", { partition_key = "/pk",
      physical_partitions = 4,
      indexing = { composite = { { { path = "/g" }, { path = "/n", order = "descending" } } } } }))
    local ops = {}
    for i = 1, 256 do
      ops[#ops + 1] = { op = "create", doc = item(i) }
      if #ops == 100 or i == 256 then assert(c:batch("p", ops)) ops = {} end
    end
    -- other partitions' entries among p's in every term, many more of
    -- them than p has
    for q = 1, 60 do
      ops = {}
      for i = 1, 20 do
        local d = item((q * 20 + i) * 31 % 256 + 1)
        d.pk, d.id, d.u = "q" .. q, "o" .. i, ((q * 20 + i) * 6007) % 100003
        ops[i] = { op = "create", doc = d }
      end
      assert(c:batch("q" .. q, ops))
    end
    tiny = assert(db:create_container("tiny", { partition_key = "/pk" }))
  end)

  after_each(function() H.cleanup() end)

  -- Every page of a query: the rows in order, each page's info.
  local function pages(sql, size, first_token)
    local rows, infos, token = {}, {}, first_token
    repeat
      local page, info = c:query(sql, nil, { max_items = size, continuation = token })
      assert(page, info)
      for _, r in ipairs(page) do rows[#rows + 1] = r end
      infos[#infos + 1] = info
      token = info.continuation
    until token == nil
    return rows, infos
  end

  local function work(info)
    return { charge = info.charge, loaded = info.loaded,
             index_lookups = info.index_lookups, scanned = info.scanned }
  end

  it("costs a partition of 256 items what it costs at 257: the plan's work", function()
    local before, inmem = {}, 0
    for i, q in ipairs(QUERIES) do
      local rows, info = assert(c:query(q[1]))
      if not H.cluster and info.executor.partition_in_memory then
        -- the stored index was read a while, then the partition's items
        assert.is_true(info.executor.items_read >= 256, q[1])
        inmem = inmem + 1
      end
      before[i] = { rows = rows, work = work(info) }
    end
    if not H.cluster then assert.is_true(inmem >= 2, inmem .. " in memory") end
    assert(c:create(NEUTRAL))
    for i, q in ipairs(QUERIES) do
      local rows, info = assert(c:query(q[1]))
      if not H.cluster then assert.is_false(info.executor.partition_in_memory, q[1]) end
      assert.are.same(before[i].rows, rows, q[1])
      assert.are.same(before[i].work, work(info), q[1])
    end
  end)

  it("gives the stored index's positions: a token made at 256 items resumes at 257", function()
    for _, sql in ipairs({
      "SELECT c.id FROM c WHERE c.pk = 'p' ORDER BY c.n",   -- the items lacking n first
      "SELECT VALUE c.id FROM c WHERE c.pk = 'p' AND c.n < 1000 ORDER BY c.n DESC",
      "SELECT VALUE c.id FROM c WHERE c.pk = 'p' ORDER BY c.s",
      "SELECT c.g, COUNT(1) AS n FROM c WHERE c.pk = 'p' AND c.g < 5 GROUP BY c.g",
    }) do
      local whole = assert(c:query(sql))
      local first, info = assert(c:query(sql, nil, { max_items = 3 }))
      assert.is_string(info.continuation)
      assert(c:create(NEUTRAL))
      local rest = pages(sql, 7, info.continuation)
      for _, r in ipairs(rest) do first[#first + 1] = r end
      local expect = assert(c:query(sql))
      assert.is_true(#expect >= #whole)
      assert.are.same(expect, first, sql)
      assert(c:delete(NEUTRAL.id, "p"))
    end
  end)

  it("gives, from the entries built in memory, what the stored index gives", function()
    if H.cluster then return end
    local regolith = require "regolith"
    -- a second handle on the same database, whose queries never build a
    -- partition's entries in memory
    local stored = assert(assert(regolith.open(dbpath, { query_memory_items = 0 })):container("c"))
    local shapes = {
      "SELECT %s FROM c WHERE c.pk = 'p' AND c.n > %d AND c.n < %d",
      "SELECT %s FROM c WHERE c.pk = 'p' AND c.n >= %d ORDER BY c.n DESC OFFSET %d LIMIT 40",
      "SELECT TOP %d %s FROM c WHERE c.pk = 'p' ORDER BY c.n",
      "SELECT TOP %d %s FROM c WHERE c.pk = 'p' ORDER BY c.n DESC",
      "SELECT TOP %d %s FROM c WHERE c.pk = 'p' ORDER BY c.s DESC",
      "SELECT TOP %d %s FROM c WHERE c.pk = 'p' ORDER BY c.s",
      "SELECT %s FROM c WHERE c.pk = 'p' AND c.g = %d ORDER BY c.n DESC",
      "SELECT %s FROM c WHERE c.pk = 'p' AND c.g >= %d ORDER BY c.g, c.n DESC",
      "SELECT c.g, COUNT(1) AS k, MAX(c.g) AS m FROM c WHERE c.pk = 'p' AND c.g > %d GROUP BY c.g",
      "SELECT DISTINCT VALUE c.s FROM c WHERE c.pk = 'p' AND c.s > 'v%d'",
      "SELECT DISTINCT VALUE c.n FROM c WHERE c.pk = 'p'",
      "SELECT %s FROM c WHERE c.pk = 'p' AND STARTSWITH(c.t, '2024-01-%d')",
      "SELECT %s FROM c WHERE c.pk = 'p' AND c.t BETWEEN '2024-01-%02d' AND '2024-01-2%d'",
      "SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'p' AND c.n < %d",
      "SELECT TOP %d %s FROM c WHERE c.pk = 'p' ORDER BY c.u DESC",
      "SELECT %s FROM c WHERE c.pk = 'p' AND c.u > %d000 ORDER BY c.u",
      "SELECT DISTINCT VALUE c.u FROM c WHERE c.pk = 'p' AND c.u > %d",
    }
    local projections = { "*", "VALUE c.id", "c.id, c.n", "VALUE c.extra.deep" }
    local seed = 7
    local function rand(n) seed = (seed * 16807) % 2147483647 return seed % n + 1 end
    local compared = 0
    for round = 1, 60 do
      local shape = shapes[(round - 1) % #shapes + 1]
      local a, b = rand(250), rand(60)
      local proj = projections[rand(#projections)]
      local sql = shape:gsub("%%s", proj, 1)
      sql = sql:format(a, b, b + 200)
      for _, size in ipairs({ 0, rand(9) }) do
        local t1, t2
        repeat
          local opts1 = { max_items = size > 0 and size or nil, continuation = t1 }
          local opts2 = { max_items = size > 0 and size or nil, continuation = t2 }
          local r1, i1 = assert(c:query(sql, nil, opts1))
          local r2, i2 = assert(stored:query(sql, nil, opts2))
          assert.are.same(r2, r1, sql)
          assert.are.same(work(i2), work(i1), sql)
          assert.are.equal(i2.continuation, i1.continuation, sql)
          assert.is_false(i2.executor.partition_in_memory)
          if i1.executor.partition_in_memory then compared = compared + 1 end
          t1, t2 = i1.continuation, i2.continuation
        until t1 == nil
      end
    end
    assert.is_true(compared > 10, compared .. " pages from entries in memory")
  end)

  it("charges a range the same below and above 256 items, and less with an index", function()
    local plain = assert(db:create_container("plain", { partition_key = "/pk",
      indexing = { excluded = { "/n/?" } } }))
    local function fill(n)
      local have = #assert(tiny:query("SELECT VALUE c.id FROM c"))
      for i = have + 1, n do
        assert(tiny:create({ id = "t" .. i, pk = "k", n = i }))
        assert(plain:create({ id = "t" .. i, pk = "k", n = i }))
      end
    end
    local sql = "SELECT * FROM c WHERE c.pk = 'k' AND c.n > 100 AND c.n <= 106"
    fill(256)
    local rows, at256 = assert(tiny:query(sql))
    assert.are.equal(6, #rows)
    local _, scan256 = assert(plain:query(sql))
    fill(257)
    local _, at257 = assert(tiny:query(sql))
    local _, scan257 = assert(plain:query(sql))
    assert.are.same(work(at256), work(at257))
    assert.are.equal(6, at256.loaded)
    assert.is_true(at256.charge < 4, "the range of 6 costs " .. at256.charge)
    -- without an index on n the partition is read whole, and charged so
    assert.are.equal(256, scan256.loaded)
    assert.are.equal(257, scan257.loaded)
    assert.is_true(scan256.charge > 5 * at256.charge)
  end)

  it("serves a paged ORDER BY in a small partition from the index, page by page", function()
    for i = 1, 11 do
      assert(tiny:create({ id = "e" .. i, pk = "x", at = ("2024-05-%02d"):format(i) }))
    end
    local sql = "SELECT VALUE c.id FROM c WHERE c.pk = 'x' ORDER BY c.at DESC"
    local _, whole = assert(tiny:query(sql))
    local rows, token, total, n = {}, nil, 0, 0
    repeat
      local page, info = assert(tiny:query(sql, nil, { max_items = 3, continuation = token }))
      for _, r in ipairs(page) do rows[#rows + 1] = r end
      -- a page loads its rows and the one that tells more remain
      assert.is_true(info.loaded <= #page + 1, ("page %d loaded %d"):format(n + 1, info.loaded))
      total = total + info.charge
      token, n = info.continuation, n + 1
    until token == nil
    assert.are.equal(11, #rows)
    assert.are.equal("e11", rows[1])
    assert.are.equal(4, n)
    -- the pages together cost what one query does, and a partition per page
    assert.is_true(total < whole.charge + n * 3.1,
      ("%.2f RU in %d pages, %.2f RU at once"):format(total, n, whole.charge))
  end)

  it("seeks the equality whose terms hold fewest entries, by the index's counts", function()
    local s = assert(db:create_container("sel", { partition_key = "/pk", physical_partitions = 4 }))
    for p = 1, 20 do
      local ops = {}
      for i = 1, 30 do
        local n = p * 30 + i
        ops[i] = { op = "create", doc = { id = "s" .. i, pk = "p" .. p, g = i % 3,
          name = "nm" .. n, kind = (n % 50 == 0) and "rare" or "common" } }
      end
      assert(s:batch("p" .. p, ops))
    end
    -- g = 1 holds 200 entries, the three names 3: the names are sought and
    -- g = 1 probed, whatever kind of conjunct comes first
    local rows, info = assert(s:query(
      "SELECT * FROM c WHERE c.g = 1 AND c.name IN ('nm31', 'nm32', 'nm40')"))
    assert.are.equal(2, #rows)
    assert.are.equal(2, info.loaded)
    rows, info = assert(s:query("SELECT * FROM c WHERE c.kind = 'common' AND c.g = 2"))
    assert.are.equal(196, #rows)
    assert.is_true(info.loaded <= 200, "loaded " .. info.loaded)
    rows, info = assert(s:query("SELECT * FROM c WHERE c.g = 2 AND c.kind = 'rare'"))
    assert.are.equal(4, #rows)
    assert.are.equal(4, info.loaded)
    -- a query's pages keep the seek they started with, though the counts
    -- change between them
    local sql = "SELECT VALUE c.id FROM c WHERE c.kind = 'rare' AND c.g = 0"
    local all = assert(s:query(sql))
    local first, i1 = assert(s:query(sql, nil, { max_items = 2 }))
    assert.is_string(i1.continuation)
    for i = 1, 300 do               -- 'rare' outgrows g = 0
      assert(s:create({ id = "r" .. i, pk = "p" .. (i % 20 + 1), g = 1, kind = "rare" }))
    end
    local rest = assert(s:query(sql, nil, { max_items = 100, continuation = i1.continuation }))
    for _, r in ipairs(rest) do first[#first + 1] = r end
    table.sort(first)
    table.sort(all)
    assert.are.same(all, first)
  end)

  it("reads a composite index in order across partitions: TOP 20 loads 20", function()
    local f = assert(db:create_container("fan", { partition_key = "/pk", physical_partitions = 8,
      indexing = { composite = { { { path = "/tag" }, { path = "/n", order = "descending" } } } } }))
    for p = 1, 40 do
      local ops = {}
      for i = 1, 50 do
        ops[i] = { op = "create", doc = { id = "x" .. i, pk = "p" .. p, tag = "t" .. (i % 2),
          n = (p * 7919 + i * 104729) % 100003 } }
      end
      assert(f:batch("p" .. p, ops))
    end
    local sql = "SELECT TOP 20 c.id, c.n FROM c WHERE c.tag = @t ORDER BY c.tag, c.n DESC"
    local rows, info = assert(f:query(sql, { t = "t1" }))
    assert.are.equal(20, #rows)
    for i = 2, #rows do assert.is_true(rows[i - 1].n >= rows[i].n) end
    assert.are.equal(20, info.loaded)
    assert.are.equal(1, info.index_lookups)
    assert.are.equal(8, info.partitions)
    -- the same with the ORDER BY on n alone, and page by page
    rows, info = assert(f:query("SELECT TOP 20 c.id FROM c WHERE c.tag = 't1' ORDER BY c.n DESC"))
    assert.are.equal(20, info.loaded)
    local seen, token, pages = 0, nil, 0
    repeat
      local page
      page, info = assert(f:query(sql, { t = "t1" }, { max_items = 7, continuation = token }))
      assert.is_true(info.loaded <= #page + 1)
      seen, token, pages = seen + #page, info.continuation, pages + 1
    until token == nil
    assert.are.equal(20, seen)
    assert.are.equal(3, pages)
  end)

  it("counts a whole logical partition from its key's index; a filtered count loads", function()
    for i = 1, 101 do
      assert(tiny:create({ id = "f" .. i, pk = "feed", at = i, kind = i % 2 == 0 and "a" or "b" }))
    end
    assert(tiny:create({ id = "other", pk = "elsewhere", at = 0 }))
    local n, info = assert(tiny:query("SELECT VALUE COUNT(1) FROM c", nil, { partition_key = "feed" }))
    assert.are.same({ 101 }, n)
    assert.are.equal(0, info.loaded)
    assert.are.equal(101, info.scanned)
    assert.are.equal(4.01, info.charge)      -- 2.5 + 0.5 + 101 x 0.01
    n, info = assert(tiny:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'feed'"))
    assert.are.same({ 101 }, n)
    assert.are.equal(4.01, info.charge)
    -- a filter to test: its candidates are loaded, as the service does
    n, info = assert(tiny:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'feed' AND c.kind = 'a'"))
    assert.are.same({ 50 }, n)
    assert.are.equal(50, info.loaded)
    -- the none partition's items hold no key: they are read
    local none = assert(db:create_container("nokey", { partition_key = "/pk" }))
    local NONE = require("regolith").object()
    for i = 1, 3 do assert(none:create({ id = "n" .. i }, { partition_key = NONE })) end
    n, info = assert(none:query("SELECT VALUE COUNT(1) FROM c", nil, { partition_key = NONE }))
    assert.are.same({ 3 }, n)
    assert.are.equal(3, info.loaded)
  end)

  -- Both ways a routed query reads: a partition's entries built in memory
  -- from its items (db), and the stored index alone (a second handle).
  local function both_handles(name)
    local regolith = require "regolith"
    local stored = assert(regolith.open(dbpath, { query_memory_items = 0 }))
    return { assert(db:container(name)), assert(stored:container(name)) }
  end

  it("counts a GROUP BY's entries in its route only, by their items' keys where a route needs them", function()
    -- with two levels, every user of a tenant shares the top 32 bits of
    -- the hash, all an index entry's reference holds: u2's entries are
    -- among u1's in each term, and only their item keys tell them apart,
    -- unless the index's fixed columns are the whole key (the last one)
    for n, comp in ipairs({ {}, { { { path = "/tenant" }, { path = "/g" } } },
                            { { { path = "/tenant" }, { path = "/user" }, { path = "/g" } } } }) do
      local h = assert(db:create_container("h" .. n,
        { partition_key = { "/tenant", "/user" }, physical_partitions = 2,
          indexing = comp[1] and { composite = comp } or nil }))
      for user, count in pairs({ u1 = 5, u2 = 7 }) do
        for i = 1, count do
          assert(h:create({ id = user .. i, tenant = "t", user = user, g = i % 2 }))
        end
      end
      for i = 1, 3 do assert(h:create({ id = "s" .. i, tenant = "s", user = "u1", g = 0 })) end
      for _, hh in ipairs(both_handles("h" .. n)) do
        local function groups(sql)
          local rows, info = assert(hh:query(sql))
          local out = {}
          for _, r in ipairs(rows) do out[r.g] = r.n end
          return out, info
        end
        local got, info = groups("SELECT c.g, COUNT(1) AS n FROM c WHERE c.tenant = 't' AND c.user = 'u1' GROUP BY c.g")
        assert.are.same({ [0] = 2, [1] = 3 }, got)
        assert.are.equal(0, info.loaded)
        assert.are.equal(5, info.scanned)
        assert.are.same({ [0] = 3, [1] = 4 },
          (groups("SELECT c.g, COUNT(1) AS n FROM c WHERE c.tenant = 't' AND c.user = 'u2' GROUP BY c.g")))
        assert.are.same({ [0] = 5, [1] = 7 },
          (groups("SELECT c.g, COUNT(1) AS n FROM c WHERE c.tenant = 't' GROUP BY c.g")))
        -- no route: every entry counts, its item key unread, the same work
        got, info = groups("SELECT c.g, COUNT(1) AS n FROM c GROUP BY c.g")
        assert.are.same({ [0] = 8, [1] = 7 }, got)
        assert.are.equal(0, info.loaded)
        assert.are.equal(15, info.scanned)
        assert.are.same({ 15 }, assert(hh:query("SELECT VALUE COUNT(1) FROM c")))
      end
    end
    -- strings cut in the index: their items are loaded, by their keys
    local want = {}
    for _, v in ipairs(assert(c:query("SELECT VALUE c.s FROM c"))) do
      want[v] = (want[v] or 0) + 1
    end
    local rows, info = assert(c:query("SELECT c.s, COUNT(1) AS n FROM c GROUP BY c.s"))
    local got, cut = {}, 0
    for _, r in ipairs(rows) do
      got[r.s] = r.n
      if #r.s > 200 then cut = cut + r.n end
    end
    assert.are.same(want, got)
    assert.is_true(cut > 0)
    -- (and the items of the wide shape, which may lack s, in a phase of
    -- their own)
    local wide = #assert(c:query("SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.f1)"))
    assert.are.equal(cut + wide, info.loaded)
    -- (expired items the index still holds: spec/ttl_spec.lua, where the
    -- key of every entry is read to leave them out)
  end)

  it("counts by item keys a route by an integer from 2^53 on, whose items' keys keep it exact", function()
    if not H.lua54 then pending("Lua 5.4 only: LuaJIT's numbers are doubles, exact to 2^53") end
    local big = assert(db:create_container("big", { partition_key = { "/tenant", "/user" },
      indexing = { composite = { { { path = "/tenant" }, { path = "/user" }, { path = "/k" } } } } }))
    -- one double, one term, two logical partitions (the integers written)
    -- of one tenant: their entries' references are alike
    for i = 1, 3 do assert(big:create({ id = "a" .. i, tenant = "t", user = 9007199254740993, k = 1 })) end
    for i = 1, 2 do assert(big:create({ id = "b" .. i, tenant = "t", user = 9007199254740992, k = 1 })) end
    for _, b in ipairs(both_handles("big")) do
      local rows, info = assert(b:query(
        "SELECT c.k, COUNT(1) AS n FROM c WHERE c.tenant = 't' AND c.user = 9007199254740992 GROUP BY c.k"))
      assert.are.same({ { k = 1, n = 2 } }, rows)
      assert.are.equal(0, info.loaded)
    end
  end)

  it("never lowers a query's charge when items are added, beyond the rows it lost", function()
    local sql = "SELECT TOP 5 VALUE c.id FROM c WHERE c.pk = 'k' AND c.n >= 50 ORDER BY c.n"
    local last
    for n = 240, 270, 3 do
      for i = 1, n do
        if not tiny:read("m" .. i, "k") then
          assert(tiny:create({ id = "m" .. i, pk = "k", n = (i * 37) % 300 }))
        end
      end
      local rows, info = assert(tiny:query(sql))
      assert.are.equal(5, #rows)
      if last then
        assert.is_true(info.charge >= last, ("%d items: %.2f RU, before %.2f"):format(n, info.charge, last))
      end
      last = info.charge
    end
  end)
end)
