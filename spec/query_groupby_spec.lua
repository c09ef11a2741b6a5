-- GROUP BY: its semantics (groups, undefined values, several keys,
-- aggregates per group, what the SELECT may name), over one partition and
-- across, page by page, and answered from the index where it can be.
local regolith = require "regolith"
local H = require "helper"

local json = regolith.json

-- Rows as sorted JSON texts (groups come in no promised order).
local function canon(rows)
  local out = {}
  for i, r in ipairs(rows) do
    local keys, parts = {}, {}
    if type(r) == "table" then
      for k in pairs(r) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. json.encode(r[k]) end
      out[i] = "{" .. table.concat(parts, ",") .. "}"
    else out[i] = json.encode(r) end
  end
  table.sort(out)
  return out
end

describe("GROUP BY", function()
  local db, c

  local function q(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  -- Every row of a query, page by page.
  local function paged(sql, size, params, opts)
    local out, cont, pages = {}, nil, 0
    repeat
      local o = { max_items = size, continuation = cont }
      for k, v in pairs(opts or {}) do o[k] = v end
      local rows, info = q(sql, params, o)
      assert.is_true(#rows <= size)
      for _, r in ipairs(rows) do out[#out + 1] = r end
      cont = info.continuation
      pages = pages + 1
      assert(pages < 1000, "paging does not end")
    until not cont
    return out, pages
  end

  before_each(function()
    db = H.open()
    c = assert(db:create_container("crew", { partition_key = "/team", physical_partitions = 4 }))
    local people = {
      { "r1", "rescue", { skill = "climbing", certified = true } },
      { "r2", "rescue", { skill = "diving", certified = false } },
      { "r3", "rescue", { skill = "first-aid", certified = true } },
      { "r4", "rescue", { skill = "diving", certified = true } },
      { "r5", "rescue", { certified = true } },
      { "r6", "rescue", { skill = "climbing", certified = false } },
      { "r7", "rescue", { skill = "diving", certified = true } },
      { "s1", "supply", { skill = "driving", certified = true } },
      { "s2", "supply", { skill = "diving", certified = false } },
    }
    for i, p in ipairs(people) do
      assert(c:create({ id = p[1], team = p[2], abilities = p[3], years = i }))
    end
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("makes one row per distinct value, an undefined value being a group of its own", function()
    assert.are.same(canon({ {}, { skill = "climbing" }, { skill = "diving" }, { skill = "first-aid" } }),
      canon(q([[SELECT e.abilities.skill AS skill FROM e WHERE e.team = 'rescue'
                GROUP BY e.abilities.skill]])))
  end)

  it("aggregates per group", function()
    assert.are.same(canon({ { n = 1 }, { n = 2, skill = "climbing" }, { n = 3, skill = "diving" },
                            { n = 1, skill = "first-aid" } }),
      canon(q([[SELECT COUNT(1) AS n, e.abilities.skill AS skill FROM e
                WHERE e.team = 'rescue' GROUP BY e.abilities.skill]])))
    assert.are.same(canon({ { team = "rescue", n = 7, total = 28, low = 1, high = 7, mean = 4 },
                            { team = "supply", n = 2, total = 17, low = 8, high = 9, mean = 8.5 } }),
      canon(q([[SELECT e.team, COUNT(1) AS n, SUM(e.years) AS total, MIN(e.years) AS low,
                MAX(e.years) AS high, AVG(e.years) AS mean FROM e GROUP BY e.team]])))
  end)

  it("groups by several expressions", function()
    assert.are.same(canon({
      { n = 1, skill = "climbing", ok = true }, { n = 1, skill = "climbing", ok = false },
      { n = 2, skill = "diving", ok = true }, { n = 1, skill = "diving", ok = false },
      { n = 1, skill = "first-aid", ok = true }, { n = 1, ok = true } }),
      canon(q([[SELECT COUNT(1) AS n, e.abilities.skill AS skill, e.abilities.certified AS ok
                FROM e WHERE e.team = 'rescue'
                GROUP BY e.abilities.skill, e.abilities.certified]])))
  end)

  it("groups by any expression, and a SELECT may build on the grouped values", function()
    assert.are.same(canon({ { initial = "C", n = 2 }, { initial = "D", n = 5 }, { initial = "F", n = 1 } }),
      canon(q([[SELECT UPPER(LEFT(e.abilities.skill, 1)) AS initial, COUNT(1) AS n
                FROM e WHERE IS_DEFINED(e.abilities.skill)
                GROUP BY UPPER(LEFT(e.abilities.skill, 1))]])))
    assert.are.same(canon({ { label = "team rescue", n = 7 }, { label = "team supply", n = 2 } }),
      canon(q("SELECT CONCAT('team ', e.team) AS label, COUNT(1) AS n FROM e GROUP BY e.team")))
    assert.are.same(canon({ "rescue", "supply" }), canon(q("SELECT VALUE e.team FROM e GROUP BY e.team")))
  end)

  it("refuses what Cosmos DB refuses with GROUP BY", function()
    local cases = {
      { "SELECT e.team, e.years FROM e GROUP BY e.team", "must be part of a GROUP BY expression" },
      { "SELECT * FROM e GROUP BY e.team", "SELECT %* cannot be used with GROUP BY" },
      { "SELECT e.team FROM e GROUP BY e.team ORDER BY e.team", "ORDER BY cannot be used with GROUP BY" },
      { "SELECT e.team FROM e GROUP BY COUNT(1)", "aggregate functions are allowed only in the SELECT list" },
      { "SELECT DISTINCT e.team FROM e GROUP BY e.team", "DISTINCT cannot be used with GROUP BY" },
    }
    for _, case in ipairs(cases) do
      local msg = H.fails(400, c:query(case[1]))
      assert.matches(case[2], msg)
    end
  end)

  it("pages groups: every page a part, together every group once", function()
    local all = q("SELECT e.abilities.skill AS skill, COUNT(1) AS n FROM e GROUP BY e.abilities.skill")
    for _, size in ipairs({ 1, 2, 3 }) do
      local rows, pages = paged("SELECT e.abilities.skill AS skill, COUNT(1) AS n FROM e GROUP BY e.abilities.skill", size)
      assert.are.same(canon(all), canon(rows))
      assert.are.equal(math.ceil(#all / size), pages)
    end
    local rows = q([[SELECT e.abilities.skill AS skill, COUNT(1) AS n FROM e
                     GROUP BY e.abilities.skill OFFSET 1 LIMIT 2]])
    assert.are.equal(2, #rows)
  end)

  describe("from the index", function()
    local big

    before_each(function()
      big = assert(db:create_container("orders", { partition_key = "/shop",
                                                    physical_partitions = 4 }))
      for s = 1, 3 do
        local ops = {}
        for i = 1, 400 do
          local o = { id = ("o%d_%d"):format(s, i), shop = "s" .. s, status = ({ "new", "paid", "sent", "paid" })[i % 4 + 1],
                      total = i % 7, lines = { i % 3 } }
          if i % 100 == 0 then o.status = nil end
          if i % 150 == 0 then o.status = { "odd" } end
          ops[#ops + 1] = { op = "create", doc = o }
          if #ops == 100 then assert(big:batch("s" .. s, ops)) ops = {} end
        end
      end
    end)

    local function bq(sql, params, opts)
      local rows, info, status = big:query(sql, params, opts)
      assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
      return rows, info
    end

    it("counts each group's entries without loading the items, across partitions", function()
      local rows, info = bq("SELECT o.total, COUNT(1) AS n, SUM(o.total) AS s FROM o GROUP BY o.total")
      assert.are.equal(7, #rows)
      local by = {}
      for _, r in ipairs(rows) do by[r.total] = r end
      assert.are.same({ total = 3, n = 171, s = 513 }, by[3])
      assert.are.equal(4, info.partitions)
      local _, loading = bq("SELECT o.total, COUNT(1) AS n, SUM(o.total + 0) AS s FROM o GROUP BY o.total")
      assert.are.equal(1200, loading.loaded)      -- an argument the index cannot give
      assert.are.equal(0, info.loaded)
      assert.are.equal(1200, info.scanned)
      assert.is_true(info.charge < loading.charge / 4)
    end)

    it("loads only the items whose value the index cannot give", function()
      -- status is missing from 9 items and an array in 6 others
      local want = {}
      for _, o in ipairs(bq("SELECT o.status FROM o")) do
        local k = o.status and json.encode(o.status) or "undefined"
        want[k] = (want[k] or 0) + 1
      end
      local rows, info = bq("SELECT o.status, COUNT(1) AS n FROM o GROUP BY o.status")
      local by = {}
      for _, r in ipairs(rows) do by[r.status and json.encode(r.status) or "undefined"] = r.n end
      assert.are.same(want, by)
      assert.are.equal(9, want.undefined)
      assert.are.equal(6, want['["odd"]'])
      assert.are.equal(15, info.loaded)
      assert.are.equal(1185, info.scanned)
    end)

    it("narrows the walk to a range on the grouped path", function()
      local rows, info = bq("SELECT o.total, COUNT(1) AS n FROM o WHERE o.total >= 5 GROUP BY o.total")
      assert.are.same(canon({ { total = 5, n = 171 }, { total = 6, n = 171 } }), canon(rows))
      assert.are.equal(0, info.loaded)
      assert.are.equal(342, info.scanned)
    end)

    it("answers SELECT DISTINCT from the index too", function()
      local rows, info = bq("SELECT DISTINCT VALUE o.total FROM o")
      assert.are.same({ 0, 1, 2, 3, 4, 5, 6 }, rows)
      assert.are.equal(0, info.loaded)
      rows, info = bq("SELECT DISTINCT VALUE o.status FROM o WHERE STARTSWITH(o.status, 'p')")
      assert.are.same({ "paid" }, rows)
      assert.are.equal(0, info.loaded)
    end)

    it("groups one partition from the index, a large one or a small one", function()
      local rows, info = bq("SELECT o.total, COUNT(1) AS n FROM o WHERE o.shop = 's2' GROUP BY o.total")
      assert.are.equal(7, #rows)
      assert.are.equal(1, info.partitions)
      assert.are.equal(0, info.loaded)
      assert.are.equal(400, info.scanned)
      local sum = 0
      for _, r in ipairs(rows) do sum = sum + r.n end
      assert.are.equal(400, sum)
      local rows2, info2 = q("SELECT e.abilities.skill AS skill, COUNT(1) AS n FROM e WHERE e.team = 'supply' GROUP BY e.abilities.skill")
      assert.are.equal(2, #rows2)
      assert.are.equal(0, info2.loaded)  -- a small partition's too
      assert.are.equal(2, info2.scanned)
    end)

    it("gives what an unindexed container gives, page by page", function()
      local plain = assert(db:create_container("plain", { partition_key = "/shop",
        physical_partitions = 4, indexing = { automatic = false } }))
      for _, r in ipairs(bq("SELECT * FROM o")) do
        r._etag, r._ts, r._lsn = nil, nil, nil
        assert(plain:create(r))
      end
      for _, sql in ipairs({
        "SELECT o.status, COUNT(1) AS n, MAX(o.total) AS m FROM o GROUP BY o.status",
        "SELECT o.total, SUM(o.total) AS s, AVG(o.total) AS a FROM o WHERE o.total < 3 GROUP BY o.total",
        "SELECT o.total, COUNT(1) AS n FROM o WHERE o.shop = 's1' GROUP BY o.total",
        "SELECT DISTINCT o.status FROM o",
        "SELECT DISTINCT VALUE o.lines FROM o",
      }) do
        for _, size in ipairs({ 1000, 3 }) do
          local a = {}
          local cont
          repeat
            local rows, info = assert(big:query(sql, nil, { max_items = size, continuation = cont }))
            for _, r in ipairs(rows) do a[#a + 1] = r end
            cont = info.continuation
          until not cont
          local b = assert(plain:query(sql))
          assert.are.same(canon(b), canon(a), sql)
        end
      end
    end)
  end)
end)
