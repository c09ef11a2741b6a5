-- Query routing, index use, paging, tokens, charges, and indexes kept
-- right by every kind of write.
local regolith = require "regolith"
local H = require "helper"

local json = regolith.json
local null = regolith.null

-- All rows of a query read page by page.
local function paged(c, sql, params, size, pk)
  local out, cont, pages = {}, nil, 0
  repeat
    local rows, info = c:query(sql, params, { max_items = size, continuation = cont,
                                              partition_key = pk })
    assert(rows, info)
    assert(#rows <= size, "a page holds more than max_items")
    for _, r in ipairs(rows) do out[#out + 1] = r end
    cont = info.continuation
    pages = pages + 1
    assert(pages <= 10000, "paging does not end")
  until not cont
  return out, pages
end

local function count_where(docs, pred)
  local n = 0
  for _, d in ipairs(docs) do if pred(d) then n = n + 1 end end
  return n
end

describe("query planning", function()
  local db, c, docs

  before_each(function()
    db = H.open()
    c = assert(db:create_container("items", {
      partition_key = "/pk", physical_partitions = 8,
      indexing = { excluded = { "/secret/?" },
                   composite = { { { path = "/g" }, { path = "/n", order = "descending" } } } },
    }))
    docs = {}
    for i = 1, 120 do
      local d = { id = ("i%03d"):format(i), pk = "p" .. (i % 12), g = i % 4,
                  n = (i * 37) % 101, secret = i % 5, name = "name" .. i,
                  tags = { "all", "t" .. (i % 3) } }
      if i % 10 == 0 then d.n = nil end
      if i % 15 == 0 then d.n = "s" .. (i % 7) end
      if i % 16 == 0 then d.n = null end
      if i % 21 == 0 then d.n = (i % 2 == 0) end
      docs[#docs + 1] = d
      assert(c:create(d))
    end
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("routing", function()
    it("keeps a query with an equality on the partition key in one partition", function()
      local rows, info = assert(c:query("SELECT * FROM c WHERE c.pk = 'p3'"))
      assert.are.equal(10, #rows)
      assert.are.equal(1, info.partitions)
      assert.is_false(info.cross_partition)
      assert.are.equal(10, info.loaded)
      rows, info = assert(c:query("SELECT * FROM c WHERE @p = c.pk AND c.g = 3", { p = "p3" }))
      assert.are.equal(10, #rows)
      assert.are.equal(1, info.partitions)
    end)

    it("routes by opts.partition_key", function()
      local rows, info = assert(c:query("SELECT VALUE c.id FROM c", nil, { partition_key = "p5" }))
      assert.are.equal(10, #rows)
      assert.are.equal(1, info.partitions)
      assert.is_false(info.cross_partition)
      -- a WHERE naming another partition finds nothing there
      rows = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = 'p4'", nil, { partition_key = "p5" }))
      assert.are.same({}, rows)
    end)

    it("fans out over every physical partition otherwise, and costs more", function()
      local rows, info = assert(c:query("SELECT * FROM c WHERE c.pk = 'p3' OR c.pk = 'p3'"))
      assert.are.equal(10, #rows)
      assert.are.equal(8, info.partitions)
      assert.is_true(info.cross_partition)
      local _, single = assert(c:query("SELECT * FROM c WHERE c.pk = 'p3'"))
      assert.is_true(info.charge > single.charge)
      -- a fan-out served by an index still contacts every partition
      local _, ix = assert(c:query("SELECT * FROM c WHERE c.name = 'name7'"))
      assert.are.equal(8, ix.partitions)
      assert.is_true(ix.cross_partition)
    end)

    it("routes hierarchical keys to a logical partition with every level, to the partitions of a prefix with fewer", function()
      local h = assert(db:create_container("h", { partition_key = { "/t", "/u" },
                                                  physical_partitions = 4 }))
      for i = 1, 30 do assert(h:create({ id = "x" .. i, t = "t" .. (i % 2), u = i % 3 })) end
      local rows, info = assert(h:query("SELECT VALUE c.id FROM c WHERE c.t = 't1' AND c.u = 2"))
      assert.are.equal(count_where({ table.unpack((function()
        local l = {}
        for i = 1, 30 do l[i] = { t = "t" .. (i % 2), u = i % 3 } end
        return l end)()) }, function(d) return d.t == "t1" and d.u == 2 end), #rows)
      assert.are.equal(1, info.partitions)
      -- a prefix of the key routes to the one physical partition holding it
      rows, info = assert(h:query("SELECT VALUE c.id FROM c WHERE c.t = 't1'"))
      assert.are.equal(15, #rows)
      assert.are.equal(1, info.partitions)
      assert.is_true(info.cross_partition)
      assert.are.equal(15, info.loaded)
      rows, info = assert(h:query("SELECT VALUE c.id FROM c", nil, { partition_key = { "t0", 0 } }))
      assert.are.equal(5, #rows)
      assert.are.equal(1, info.partitions)
    end)
  end)

  describe("indexes", function()
    it("loads only the matching items for an equality on an indexed path", function()
      local rows, info = assert(c:query("SELECT * FROM c WHERE c.name = 'name17'"))
      assert.are.equal(1, #rows)
      assert.are.equal(1, info.loaded)
      assert.are.equal(1, info.index_lookups)
      rows, info = assert(c:query("SELECT * FROM c WHERE c.g = 2"))
      assert.are.equal(30, #rows)
      assert.are.equal(30, info.loaded)
    end)

    it("loads every item when the path is excluded from indexing", function()
      local rows, info = assert(c:query("SELECT * FROM c WHERE c.secret = 2"))
      assert.are.equal(24, #rows)
      assert.are.equal(120, info.loaded)
      assert.are.equal(0, info.index_lookups)
    end)

    it("indexes _ts but not _lsn, unless an included pattern names _lsn", function()
      local lsn = assert(c:read("i017", "p5"))._lsn
      local rows, info = assert(c:query("SELECT * FROM c WHERE c._lsn = @l", { l = lsn }))
      assert.are.equal(1, #rows)
      assert.are.equal(0, info.index_lookups)
      assert.are.equal(120, info.loaded)
      local ts = rows[1]._ts
      rows, info = assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE c._ts = @t", { t = ts }))
      assert.are.equal(1, info.index_lookups)
      local named = assert(db:create_container("named", { partition_key = "/pk",
        indexing = { included = { "/*", "/_lsn/?" } } }))
      local d = assert(named:create({ id = "a", pk = "x" }))
      assert(named:create({ id = "b", pk = "x" }))
      rows, info = assert(named:query("SELECT * FROM c WHERE c._lsn = @l", { l = d._lsn }))
      assert.are.equal(1, #rows)
      assert.are.equal(1, info.index_lookups)
      assert.are.equal(1, info.loaded)
    end)

    it("finds nothing, by the index, on a path no item ever held", function()
      local rows, info = assert(c:query("SELECT * FROM c WHERE c.nowhere = 1"))
      assert.are.same({}, rows)
      assert.are.equal(1, info.index_lookups)
      assert.are.equal(0, info.loaded)
      rows = assert(c:query("SELECT VALUE c.id FROM c WHERE c.nowhere > 1 ORDER BY c.nowhere"))
      assert.are.same({}, rows)
    end)

    it("loads every item when indexing is off", function()
      local off = assert(db:create_container("off", { partition_key = "/pk",
        indexing = { automatic = false } }))
      for i = 1, 20 do assert(off:create({ id = "o" .. i, pk = "x", v = i % 2 })) end
      local rows, info = assert(off:query("SELECT * FROM c WHERE c.v = 1"))
      assert.are.equal(10, #rows)
      assert.are.equal(20, info.loaded)
    end)

    it("serves ranges, IN, ARRAY_CONTAINS and STARTSWITH from the index", function()
      local function numeric(pred)
        return count_where(docs, function(d) return type(d.n) == "number" and pred(d.n) end)
      end
      local cases = {
        { "c.n > 90", numeric(function(n) return n > 90 end) },
        { "c.n >= 5 AND c.n < 9", numeric(function(n) return n >= 5 and n < 9 end) },
        { "c.n BETWEEN 10 AND 20", numeric(function(n) return n >= 10 and n <= 20 end) },
        { "c.n IN (1, 2, 3, 'zz')", numeric(function(n) return n >= 1 and n <= 3 end) },
        { "ARRAY_CONTAINS(c.tags, 't1')", 40 },
        { "STARTSWITH(c.name, 'name2')", count_where(docs, function(d) return d.name:sub(1, 5) == "name2" end) },
        { "c.n < 'z'", count_where(docs, function(d) return type(d.n) == "string" end) },
      }
      for _, case in ipairs(cases) do
        local rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE " .. case[1]))
        assert.are.equal(case[2], #rows, case[1])
        assert.are.equal(#rows, info.loaded, case[1])
        assert.is_true(info.index_lookups >= 1, case[1])
      end
      local _, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.n IN (1, 2, 3)"))
      assert.are.equal(3, info.index_lookups)
    end)

    it("narrows an index lookup to the routed partition", function()
      local rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = 'p2' AND c.g = 2"))
      assert.are.equal(10, #rows)
      assert.are.equal(10, info.loaded)
      rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = 'p2' AND ARRAY_CONTAINS(c.tags, 't2')"))
      assert.are.equal(count_where(docs, function(d) return d.pk == "p2" and d.tags[2] == "t2" end), #rows)
      assert.are.equal(#rows, info.loaded)
      assert.are.equal(1, info.partitions)
    end)

    it("reads only what the merge needs for a cross-partition TOP with ORDER BY", function()
      local rows, info = assert(c:query("SELECT TOP 10 VALUE c.id FROM c ORDER BY c.name DESC"))
      assert.are.equal(10, #rows)
      assert.are.equal(10, info.loaded)
      assert.are.equal(8, info.partitions)
      rows, info = assert(c:query("SELECT TOP 10 VALUE c.n FROM c WHERE c.n > 50 ORDER BY c.n"))
      local want = {}
      for _, d in ipairs(docs) do
        if type(d.n) == "number" and d.n > 50 then want[#want + 1] = d.n end
      end
      table.sort(want)
      assert.are.same({ table.unpack(want, 1, 10) }, rows)
      assert.are.equal(10, info.loaded)
    end)

    it("uses a composite index for ORDER BY after an equality on its first column", function()
      local rows, info = assert(c:query(
        "SELECT c.id, c.n FROM c WHERE c.g = 1 AND IS_NUMBER(c.n) ORDER BY c.n DESC"))
      local want = {}
      for _, d in ipairs(docs) do
        if d.g == 1 and type(d.n) == "number" then want[#want + 1] = d end
      end
      table.sort(want, function(a, b) return a.n > b.n or (a.n == b.n and a.id < b.id) end)
      assert.are.equal(#want, #rows)
      for i = 1, #want do assert.are.equal(want[i].n, rows[i].n) end
      assert.are.equal(count_where(docs, function(d) return d.g == 1 and d.n ~= nil and type(d.n) ~= "table" end),
        info.loaded)
    end)

    it("seeks an equality the composite index leaves out rather than read the composite in order", function()
      -- (g, n DESC) read in order would load every item of g = 1 to test
      -- its name; the name's index holds the one item (the name comes
      -- first: of two equalities a cluster, which has no probes, seeks the
      -- first, docs/cluster.md)
      local sql = "SELECT c.id, c.n FROM c WHERE c.name = @name AND c.g = 1 AND IS_NUMBER(c.n) ORDER BY c.n DESC"
      local rows, info = assert(c:query(sql, { name = "name5" }))
      assert.are.same({ { id = "i005", n = (5 * 37) % 101 } }, rows)
      assert.are.equal(1, info.loaded)
    end)

    it("orders by several keys through a composite index or by sorting, alike", function()
      local sql = "SELECT c.id, c.g, c.n FROM c WHERE IS_NUMBER(c.n) AND IS_NUMBER(c.g) ORDER BY c.g, c.n DESC"
      local rows = assert(c:query(sql))
      local back = assert(c:query((sql:gsub("c.g, c.n DESC", "c.g DESC, c.n"))))
      local want = {}
      for _, d in ipairs(docs) do if type(d.n) == "number" then want[#want + 1] = d end end
      table.sort(want, function(a, b) return a.g < b.g or (a.g == b.g and a.n > b.n) end)
      assert.are.equal(#want, #rows)
      for i = 1, #want do
        assert.are.equal(want[i].g, rows[i].g)
        assert.are.equal(want[i].n, rows[i].n)
        assert.are.equal(want[#want + 1 - i].n, back[i].n)
        assert.are.equal(want[#want + 1 - i].g, back[i].g)
      end
      local sorted = assert(c:query(
        "SELECT c.id, c.g, c.n FROM c WHERE IS_NUMBER(c.n) AND c.pk = c.pk ORDER BY c.g, c.n DESC"))
      for i = 1, #want do
        assert.are.equal(want[i].g, sorted[i].g)
        assert.are.equal(want[i].n, sorted[i].n)
      end
    end)
  end)

  describe("paging", function()
    local queries = {
      "SELECT * FROM c",
      "SELECT VALUE c.id FROM c WHERE c.pk = 'p1'",
      "SELECT c.id, c.n FROM c ORDER BY c.n",
      "SELECT c.id, c.n FROM c ORDER BY c.n DESC",
      "SELECT c.id, c.n FROM c WHERE c.pk = 'p2' ORDER BY c.n DESC",
      "SELECT c.id, c.n FROM c WHERE c.n > 20 ORDER BY c.n",
      "SELECT c.id, t FROM c JOIN t IN c.tags ORDER BY c.n DESC",
      "SELECT c.id, t FROM c JOIN t IN c.tags",
      "SELECT c.id, t FROM c JOIN t IN c.tags WHERE c.g = 1 AND t != 'all'",
      "SELECT TOP 37 c.id FROM c ORDER BY c.name DESC",
      "SELECT c.id FROM c ORDER BY c.n OFFSET 5 LIMIT 50",
      "SELECT c.id FROM c OFFSET 5 LIMIT 50",
      "SELECT DISTINCT VALUE c.n FROM c",
      "SELECT DISTINCT VALUE c.g FROM c ORDER BY c.g DESC",
      "SELECT VALUE c.id FROM c WHERE c.n IN (3, 5, 7, 11, 13)",
      "SELECT c.id, c.n FROM c WHERE c.g = 2 AND IS_NUMBER(c.n) ORDER BY c.n DESC",
      "SELECT c.id, c.n FROM c ORDER BY c.g, c.n DESC",
      "SELECT VALUE COUNT(1) FROM c",
      "SELECT c.g, COUNT(1) AS n FROM c JOIN t IN c.tags WHERE c.g = 1",
    }
    for _, sql in ipairs(queries) do
      it(("gives the rows of one unpaged query with pages of 1, 7 and 100: %s"):format(sql), function()
        local sql2 = sql:gsub("SELECT c.g, COUNT", "SELECT COUNT")
        local all, info = assert(c:query(sql2))
        assert.is_nil(info.continuation)
        local want = json.encode(all)
        for _, size in ipairs({ 1, 7, 100 }) do
          assert.are.equal(want, json.encode((paged(c, sql2, nil, size))))
        end
      end)
    end

    it("pages a routed query by opts.partition_key", function()
      local sql = "SELECT c.id, c.n FROM c ORDER BY c.n"
      local all = assert(c:query(sql, nil, { partition_key = "p3" }))
      for _, size in ipairs({ 1, 7, 100 }) do
        assert.are.equal(json.encode(all), json.encode((paged(c, sql, nil, size, "p3"))))
      end
    end)

    it("returns a continuation only while results remain", function()
      local rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = 'p1'", nil, { max_items = 10 }))
      assert.are.equal(10, #rows)
      assert.is_nil(info.continuation)
      rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = 'p1'", nil, { max_items = 9 }))
      assert.are.equal(9, #rows)
      assert.is_string(info.continuation)
      rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = 'p1'", nil,
        { max_items = 9, continuation = info.continuation }))
      assert.are.equal(1, #rows)
      assert.is_nil(info.continuation)
    end)

    it("iterates over every page with query_rows", function()
      local got = {}
      for id in c:query_rows("SELECT VALUE c.id FROM c ORDER BY c.id", nil, { max_items = 7 }) do
        got[#got + 1] = id
      end
      assert.are.equal(120, #got)
      assert.are.equal("i001", got[1])
      assert.are.equal("i120", got[120])
      local n = 0
      for _ in c:query_rows("SELECT * FROM c WHERE c.g = 3") do n = n + 1 end
      assert.are.equal(30, n)
      H.fails(400, c:query_rows("SELECT * FROM"))
    end)

    it("refuses altered, truncated and foreign tokens with 400", function()
      local sql = "SELECT VALUE c.id FROM c ORDER BY c.n"
      local _, info = assert(c:query(sql, nil, { max_items = 5 }))
      local tok = info.continuation
      local flipped = tok:sub(1, 10) .. (tok:sub(11, 11) == "A" and "B" or "A") .. tok:sub(12)
      H.fails(400, c:query(sql, nil, { max_items = 5, continuation = flipped }))
      H.fails(400, c:query(sql, nil, { max_items = 5, continuation = tok:sub(1, -3) }))
      H.fails(400, c:query(sql, nil, { max_items = 5, continuation = "garbage!" }))
      H.fails(400, c:query(sql, nil, { max_items = 5, continuation = "" }))
      -- another query, other parameters, another container, another database
      H.fails(400, c:query(sql .. " DESC", nil, { max_items = 5, continuation = tok }))
      local psql = "SELECT VALUE c.id FROM c WHERE c.g = @g"
      local _, pinfo = assert(c:query(psql, { g = 1 }, { max_items = 5 }))
      H.fails(400, c:query(psql, { g = 2 }, { max_items = 5, continuation = pinfo.continuation }))
      local other = assert(db:create_container("other", { partition_key = "/pk", physical_partitions = 8 }))
      for _, d in ipairs(docs) do assert(other:create(d)) end
      H.fails(400, other:query(sql, nil, { max_items = 5, continuation = tok }))
      local db2 = H.open()
      local c2 = assert(db2:create_container("items", { partition_key = "/pk", physical_partitions = 8 }))
      H.fails(400, c2:query(sql, nil, { max_items = 5, continuation = tok }))
      db2:close()
      -- the same query goes on, whatever the page size
      local rows = assert(c:query(sql, nil, { max_items = 50, continuation = tok }))
      assert.are.equal(50, #rows)
    end)
  end)

  describe("charges", function()
    it("charges the same for the same query on the same data", function()
      local _, a = assert(c:query("SELECT * FROM c WHERE c.g = 1"))
      local _, b = assert(c:query("SELECT * FROM c WHERE c.g = 1"))
      assert.are.equal(a.charge, b.charge)
    end)

    it("charges more for more work", function()
      local _, indexed = assert(c:query("SELECT * FROM c WHERE c.name = 'name3'"))
      local _, scanned = assert(c:query("SELECT * FROM c WHERE c.secret = 3 AND c.name = 'name3' OR false"))
      assert.is_true(scanned.loaded > indexed.loaded)
      assert.is_true(scanned.charge > indexed.charge)
      local _, one = assert(c:query("SELECT * FROM c WHERE c.pk = 'p1' AND c.name = 'name13'"))
      local _, all = assert(c:query("SELECT * FROM c WHERE c.pk = 'p1'"))
      assert.are.equal(1, one.loaded)
      assert.are.equal(10, all.loaded)
      assert.is_true(all.charge > one.charge)
    end)
  end)

  describe("indexes after writes", function()
    -- the indexed answer and an answer no index can serve must agree
    local function agree(cont, cond, params)
      local a, ia = assert(cont:query("SELECT VALUE c.id FROM c WHERE " .. cond .. " ORDER BY c.id", params))
      local b = assert(cont:query("SELECT VALUE c.id FROM c WHERE (" .. cond .. ") = true ORDER BY c.id", params))
      assert.are.same(b, a)
      return a, ia
    end

    it("stay right through create, replace, upsert, patch, delete and batch", function()
      local w = assert(db:create_container("w", { partition_key = "/pk", physical_partitions = 4 }))
      for i = 1, 12 do assert(w:create({ id = "d" .. i, pk = "p" .. (i % 3), v = i % 4, tags = { "x" } })) end
      local rows, info = agree(w, "c.v = 1")
      assert.are.same({ "d1", "d5", "d9" }, rows)
      assert.are.equal(3, info.loaded)
      assert(w:replace({ id = "d5", pk = "p2", v = 2, tags = { "y" } }))
      assert(w:upsert({ id = "d13", pk = "p1", v = 1 }))
      assert(w:upsert({ id = "d9", pk = "p0", v = 3 }))
      assert(w:patch("d2", "p2", { { op = "set", path = "/v", value = 1 },
                                   { op = "add", path = "/tags/-", value = "z" } }))
      assert(w:patch("d3", "p0", { { op = "remove", path = "/v" } }))
      assert(w:delete("d1", "p1"))
      assert(w:batch("p1", { { op = "create", doc = { id = "d14", pk = "p1", v = 1 } },
                             { op = "delete", id = "d4" },
                             { op = "patch", id = "d7", ops = { { op = "set", path = "/v", value = 1 } } } }))
      rows, info = agree(w, "c.v = 1")
      assert.are.same({ "d13", "d14", "d2", "d7" }, rows)
      assert.are.equal(4, info.loaded)
      rows = agree(w, "ARRAY_CONTAINS(c.tags, 'z')")
      assert.are.same({ "d2" }, rows)
      rows = agree(w, "ARRAY_CONTAINS(c.tags, 'x')")
      assert.are.same({ "d10", "d11", "d12", "d2", "d3", "d6", "d7", "d8" }, rows)
      rows = agree(w, "IS_DEFINED(c.v) = false")
      assert.are.same({ "d3" }, rows)
      agree(w, "c.v >= 2")
      rows = assert(w:query("SELECT VALUE c.id FROM c ORDER BY c.v DESC"))
      assert.are.equal(12, #rows)
      assert.are.equal("d3", rows[12])
    end)

    it("index the system properties _ts and (when a pattern names it) _lsn, which every write sets", function()
      local w = assert(db:create_container("sys", { partition_key = "/pk", physical_partitions = 3,
        indexing = { included = { "/*", "/_lsn/?" } } }))
      local first = assert(w:create({ id = "a", pk = "p1" }))
      local second = assert(w:create({ id = "b", pk = "p2" }))
      local rows, info = agree(w, "c._lsn = @l", { l = first._lsn })
      assert.are.same({ "a" }, rows)
      assert.are.equal(1, info.loaded)
      assert.are.same({ "b" }, (agree(w, "c._lsn = @l", { l = second._lsn })))
      local moved = assert(w:replace({ id = "a", pk = "p1", v = 1 }))
      assert.are.same({}, (agree(w, "c._lsn = @l", { l = first._lsn })))
      assert.are.same({ "a" }, (agree(w, "c._lsn = @l", { l = moved._lsn })))
      assert.are.same({ "a", "b" }, (agree(w, "c._ts >= @t", { t = first._ts })))
      assert.are.same({ "a", "b" }, (agree(w, "c._lsn > 0")))
      assert(w:delete("b", "p2"))
      assert.are.same({ "a" }, (agree(w, "c._lsn > 0")))
      assert(db:verify())
    end)

    it("stay right when expired items are removed, and never show expired items", function()
      local t = assert(db:create_container("ttl", { partition_key = "/pk", default_ttl = -1 }))
      assert(t:create({ id = "keep", pk = "a", v = 1 }))
      assert(t:create({ id = "gone", pk = "a", v = 1, ttl = 1 }))
      local rows = agree(t, "c.v = 1")
      assert.are.same({ "gone", "keep" }, rows)
      local deadline = os.time() + 3
      repeat rows = assert(t:query("SELECT VALUE c.id FROM c WHERE c.v = 1"))
      until #rows == 1 or os.time() > deadline
      assert.are.same({ "keep" }, rows)
      assert.are.same({ "keep" }, assert(t:query("SELECT VALUE c.id FROM c")))
      assert.are.same({ 1 }, assert(t:query("SELECT VALUE COUNT(1) FROM c")))
      assert(t:create({ id = "other", pk = "b", v = 2 }))   -- purges
      local info
      rows, info = agree(t, "c.v = 1")
      assert.are.same({ "keep" }, rows)
      assert.are.equal(1, info.loaded)
    end)
  end)

  describe("strings", function()
    it("finds strings holding NUL and long strings through the index", function()
      local s = assert(db:create_container("s", { partition_key = "/pk", physical_partitions = 2 }))
      local long = string.rep("é", 150)
      assert(s:create({ id = "nul", pk = 1, v = "a\0b" }))
      assert(s:create({ id = "a", pk = 2, v = "a" }))
      assert(s:create({ id = "l1", pk = 3, v = long .. "1" }))
      assert(s:create({ id = "l2", pk = 4, v = long .. "2" }))
      local rows, info = assert(s:query("SELECT VALUE c.id FROM c WHERE c.v = @v", { v = "a\0b" }))
      assert.are.same({ "nul" }, rows)
      assert.are.equal(1, info.loaded)
      rows = assert(s:query("SELECT VALUE c.id FROM c WHERE c.v = @v", { v = long .. "2" }))
      assert.are.same({ "l2" }, rows)
      rows = assert(s:query("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.v, @p) ORDER BY c.v DESC", { p = long }))
      assert.are.same({ "l2", "l1" }, rows)
      rows = assert(s:query("SELECT VALUE c.v FROM c WHERE c.id = 'nul'"))
      assert.are.equal("a\0b", rows[1])
    end)
  end)
end)

describe("query plans", function()
  it("give the same answers with indexes as without, page by page", function()
    local db = H.open({ sync = "none" })
    local A = assert(db:create_container("a", { partition_key = "/pk", physical_partitions = 5,
      indexing = { composite = { { { path = "/x" }, { path = "/y", order = "descending" } } } } }))
    local B = assert(db:create_container("b", { partition_key = "/pk", physical_partitions = 3,
      indexing = { automatic = false } }))
    -- a small deterministic generator (the same sequence on every Lua)
    local state = 12345
    local function rand(n)
      state = (state * 1103515245 + 12345) % 2147483648
      return state % n + 1
    end
    local strs = { "a", "b", "ab", "B", "", "a\0", string.rep("z", 210) .. "1",
                   string.rep("z", 210) .. "2" }
    local function value()
      local r = rand(10)
      if r == 1 then return nil elseif r == 2 then return null
      elseif r == 3 then return rand(2) == 1
      elseif r <= 6 then return rand(10) - 4 + (rand(4) == 1 and 0.5 or 0)
      elseif r <= 9 then return strs[rand(#strs)]
      else return { rand(3), "a" } end
    end
    for i = 1, 80 do
      local d = { id = "d" .. i, pk = "p" .. rand(6), x = value(), y = value(),
                  tags = { value() or 1, value() or 2 } }
      assert(A:create(d))
      assert(B:create(d))
    end
    local ops = { "=", "<", ">", "<=", ">=", "!=" }
    local paths = { "c.x", "c.y", "c.pk" }
    local orders = { "", " ORDER BY c.x", " ORDER BY c.y DESC", " ORDER BY c.x, c.y DESC" }
    -- a sort value as compared: arrays and objects rank as undefined
    local function sv(v) return (v == nil or type(v) == "table") and "U" or json.encode(v) end
    for _ = 1, 150 do
      local params, conds, np = {}, {}, 0
      local function p()
        local v = value()
        if v == nil or type(v) == "table" then v = 1 end
        np = np + 1
        params["v" .. np] = v
        return "@v" .. np
      end
      for i = 1, rand(4) - 1 do
        local r, path = rand(5), paths[rand(#paths)]
        if r <= 3 then conds[i] = path .. " " .. ops[rand(#ops)] .. " " .. p()
        elseif r == 4 then conds[i] = path .. " IN (" .. p() .. ", " .. p() .. ")"
        else conds[i] = "ARRAY_CONTAINS(c.tags, " .. p() .. ")" end
      end
      local order = orders[rand(#orders)]
      local sql = "SELECT c.id, c.x, c.y FROM c" ..
        (#conds > 0 and (" WHERE " .. table.concat(conds, " AND ")) or "") .. order
      local ra = assert(A:query(sql, params))
      local rb = assert(B:query(sql, params))
      local function keys(rows)
        local t = {}
        for i, r in ipairs(rows) do
          if order == "" then t[i] = r.id
          elseif order == " ORDER BY c.x" then t[i] = sv(r.x)
          elseif order == " ORDER BY c.y DESC" then t[i] = sv(r.y)
          else t[i] = sv(r.x) .. "," .. sv(r.y) end
        end
        if order == "" then table.sort(t) end
        return table.concat(t, "|")
      end
      assert.are.equal(keys(rb), keys(ra), sql)
      local ids_a, ids_b = {}, {}
      for i, r in ipairs(ra) do ids_a[i] = r.id end
      for i, r in ipairs(rb) do ids_b[i] = r.id end
      table.sort(ids_a)
      table.sort(ids_b)
      assert.are.same(ids_b, ids_a, sql)
      local got, cont = {}, nil
      repeat
        local rows, info = assert(A:query(sql, params, { max_items = 3, continuation = cont }))
        for _, r in ipairs(rows) do got[#got + 1] = r end
        cont = info.continuation
      until not cont
      assert.are.equal(json.encode(ra), json.encode(regolith.array(got)), sql)
    end
    db:close()
    H.cleanup()
  end)
end)

describe("query plans inside large partitions", function()
  local db, c

  -- A partition of 100,000 items and a few smaller ones, loaded once.
  setup(function()
    db = H.open({ sync = "none" })
    c = assert(db:create_container("big", { partition_key = "/pk", physical_partitions = 4,
      indexing = { composite = { { { path = "/pk" }, { path = "/g" }, { path = "/n" } },
                                 { { path = "/g" }, { path = "/s" } } } } }))
    local ops = {}
    local function flush(pk)
      if #ops > 0 then assert(c:batch(pk, ops)) ops = {} end
    end
    for i = 1, 100000 do
      local d = { id = "b" .. i, pk = "big", n = (i * 7919) % 100003, g = i % 10,
                  s = ("s%03d"):format(i % 997) }
      if i % 20000 == 0 then d.n = nil end          -- 5 items lack n
      ops[#ops + 1] = { op = "create", doc = d }
      if #ops == 100 then flush("big") end
    end
    flush("big")
    for p = 1, 3 do
      for i = 1, 400 do
        ops[#ops + 1] = { op = "create", doc = { id = "m" .. i, pk = "mid" .. p, n = i, g = i % 10,
                                                 s = ("s%03d"):format(i) } }
        if #ops == 100 then flush("mid" .. p) end
      end
    end
    for i = 1, 20 do
      ops[#ops + 1] = { op = "create", doc = { id = "t" .. i, pk = "tiny", n = i, g = 1 } }
    end
    flush("tiny")
  end)

  teardown(function()
    db:close()
    H.cleanup()
  end)

  local function q(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  it("loads only the results of a range inside a partition of 100,000 items", function()
    local rows, info = q("SELECT VALUE c.n FROM c WHERE c.pk = 'big' AND c.n >= 99990")
    assert.are.equal(#rows, info.loaded)
    assert.is_true(#rows > 0 and #rows < 20)
    for _, n in ipairs(rows) do assert.is_true(n >= 99990) end
    rows, info = q("SELECT VALUE c.id FROM c WHERE c.pk = 'big' AND c.n BETWEEN 500 AND 520")
    assert.are.equal(21, #rows)
    assert.are.equal(21, info.loaded)
    assert.are.equal(1, info.partitions)
    rows, info = q("SELECT VALUE c.id FROM c WHERE c.pk = 'big' AND STARTSWITH(c.s, 's99')",
                   nil, { max_items = 10 })
    assert.are.equal(10, #rows)
    assert.is_true(info.loaded <= 11)
  end)

  it("loads only the results of an ascending or descending ORDER BY with TOP there", function()
    local rows, info = q("SELECT TOP 10 c.id, c.n FROM c WHERE c.pk = 'big' ORDER BY c.n")
    assert.are.equal(10, #rows)
    -- the 5 items without n sort first, then the smallest values
    local ns = {}
    for i = 1, 100000 do
      if i % 20000 ~= 0 then ns[#ns + 1] = (i * 7919) % 100003 end
    end
    table.sort(ns)
    for i = 1, 5 do assert.is_nil(rows[i].n) end
    for i = 6, 10 do assert.are.equal(ns[i - 5], rows[i].n) end
    assert.are.equal(10, info.loaded)
    rows, info = q("SELECT TOP 10 VALUE c.n FROM c WHERE c.pk = 'big' ORDER BY c.n DESC")
    for i = 1, 10 do assert.are.equal(ns[#ns + 1 - i], rows[i]) end
    assert.are.equal(10, info.loaded)
    -- page by page, each page reads what it returns
    local sql = "SELECT c.id FROM c WHERE c.pk = 'big' ORDER BY c.n"
    local _, i1 = q(sql, nil, { max_items = 25 })
    assert.is_true(i1.loaded <= 26, "page 1 loaded " .. i1.loaded)
    local _, i2 = q(sql, nil, { max_items = 25, continuation = i1.continuation })
    assert.is_true(i2.loaded <= 27, "page 2 loaded " .. i2.loaded)
  end)

  it("reads a smaller partition's other partitions' entries without loading them", function()
    local rows, info = q("SELECT TOP 3 VALUE c.n FROM c WHERE c.pk = 'mid2' ORDER BY c.n DESC")
    assert.are.same({ 400, 399, 398 }, rows)
    assert.are.equal(3, info.loaded)
    rows, info = q("SELECT VALUE c.n FROM c WHERE c.pk = 'mid3' AND c.n > 395")
    table.sort(rows)
    assert.are.same({ 396, 397, 398, 399, 400 }, rows)
    assert.are.equal(5, info.loaded)
  end)

  it("charges a small partition's range as the index range, read from its items", function()
    local rows, info = q("SELECT VALUE c.n FROM c WHERE c.pk = 'tiny' AND c.n > 15 ORDER BY c.n")
    assert.are.same({ 16, 17, 18, 19, 20 }, rows)
    assert.are.equal(5, info.loaded)
    assert.are.equal(1, info.index_lookups)
    if not H.cluster then            -- the other partitions' entries in the
      -- range are many: the stored index was left for the 20 items' own
      assert.is_true(info.executor.partition_in_memory)
      assert.is_true(info.executor.items_read >= 20)
    end
  end)

  it("uses a composite index for equalities and a range, fixing its leading columns", function()
    local rows, info = q("SELECT VALUE c.n FROM c WHERE c.pk = 'big' AND c.g = 3 AND c.n < 40")
    assert.are.equal(#rows, info.loaded)
    for _, n in ipairs(rows) do assert.is_true(n < 40) end
    rows, info = q("SELECT VALUE c.id FROM c WHERE c.g = 7 AND c.s = 's100'")
    assert.are.equal(#rows, info.loaded)
    assert.is_true(#rows > 0)
    rows, info = q("SELECT VALUE c.id FROM c WHERE c.g = 7 AND STARTSWITH(c.s, 's10')")
    assert.are.equal(#rows, info.loaded)
  end)

  it("intersects two equalities without a composite index through exact probes", function()
    local rows, info = q("SELECT VALUE c.id FROM c WHERE c.s = 's005' AND c.n = 40039")
    assert.are.equal(#rows, info.loaded)
    assert.is_true(info.index_lookups >= 2)
    local plain = q("SELECT VALUE c.id FROM c WHERE c.s = 's005' AND c.n + 0 = 40039")
    assert.are.same(plain, rows)
  end)

  it("answers GROUP BY inside the large partition from the index", function()
    local rows, info = q("SELECT c.g, COUNT(1) AS n FROM c WHERE c.pk = 'big' GROUP BY c.g")
    assert.are.equal(10, #rows)
    for _, r in ipairs(rows) do assert.are.equal(10000, r.n) end
    assert.are.equal(0, info.loaded)
    assert.are.equal(100000, info.scanned)
  end)
end)

describe("query plans over hierarchical keys", function()
  it("route a prefix of the key to one physical partition and read only its items", function()
    local db = H.open({ sync = "none" })
    local h = assert(db:create_container("h", { partition_key = { "/tenant", "/user", "/day" },
                                                physical_partitions = 8 }))
    for t = 1, 6 do
      for u = 1, 5 do
        for d = 1, 4 do
          assert(h:create({ id = ("e%d_%d_%d"):format(t, u, d), tenant = "t" .. t, user = u, day = d }))
        end
      end
    end
    local rows, info = assert(h:query("SELECT VALUE c.id FROM c WHERE c.tenant = 't3'"))
    assert.are.equal(20, #rows)
    assert.are.equal(1, info.partitions)
    assert.are.equal(20, info.loaded)
    assert.is_true(info.cross_partition)
    rows, info = assert(h:query("SELECT VALUE c.id FROM c WHERE c.tenant = 't3' AND c.user = 2"))
    assert.are.equal(4, #rows)
    assert.are.equal(1, info.partitions)
    assert.are.equal(4, info.loaded)
    rows, info = assert(h:query("SELECT VALUE c.id FROM c WHERE c.tenant = 't3' AND c.user = 2 AND c.day = 4"))
    assert.are.same({ "e3_2_4" }, rows)
    assert.is_false(info.cross_partition)
    -- one physical partition holds a tenant, whichever its users
    local _, fan = assert(h:query("SELECT VALUE c.id FROM c WHERE c.user = 2"))
    assert.are.equal(8, fan.partitions)
    -- the prefix's items and their feed are in the feed range of that partition
    local ranges = {}
    for r = 1, 8 do
      local changes = assert(h:changes({ feed_range = r, max_items = 1000 }))
      for _, ch in ipairs(changes) do
        if ch.tenant == "t3" then ranges[r] = true end
      end
    end
    local n = 0
    for _ in pairs(ranges) do n = n + 1 end
    assert.are.equal(1, n)
    assert(db:verify())
    db:close()
    H.cleanup()
  end)
end)

describe("query plans and shapes", function()
  it("find the items lacking an ORDER BY path without reading the others, through every kind of write", function()
    local db = H.open({ sync = "none" })
    local c = assert(db:create_container("s", { partition_key = "/pk", physical_partitions = 2 }))
    for i = 1, 300 do assert(c:create({ id = "i" .. i, pk = "p" .. (i % 3), n = i })) end
    local all
    local rows, info = assert(c:query("SELECT TOP 2 VALUE c.id FROM c ORDER BY c.n"))
    assert.are.same({ "i1", "i2" }, rows)
    assert.are.equal(all or 2, info.loaded)
    -- an item loses n, another gets n as an object: both sort first now
    assert(c:replace({ id = "i200", pk = "p2" }))
    assert(c:patch("i150", "p0", { { op = "set", path = "/n", value = { deep = 1 } } }))
    rows, info = assert(c:query("SELECT TOP 3 VALUE c.id FROM c ORDER BY c.n"))
    table.sort(rows)
    assert.are.same({ "i1", "i150", "i200" }, rows)
    assert.are.equal(all or 3, info.loaded)
    -- descending, they come last
    rows = assert(c:query("SELECT VALUE c.id FROM c ORDER BY c.n DESC"))
    assert.are.equal(300, #rows)
    local tail = { rows[299], rows[300] }
    table.sort(tail)
    assert.are.same({ "i150", "i200" }, tail)
    -- once they have n again, nothing is read for them
    assert(c:upsert({ id = "i200", pk = "p2", n = 200 }))
    assert(c:patch("i150", "p0", { { op = "set", path = "/n", value = 150 } }))
    rows, info = assert(c:query("SELECT TOP 2 VALUE c.id FROM c ORDER BY c.n"))
    assert.are.same({ "i1", "i2" }, rows)
    assert.are.equal(all or 2, info.loaded)
    assert(c:delete("i1", "p1"))
    rows = assert(c:query("SELECT TOP 1 VALUE c.id FROM c ORDER BY c.n"))
    assert.are.same({ "i2" }, rows)
    assert(db:verify())
    db:close()
    H.cleanup()
  end)
end)

describe("query plans inside large partitions", function()
  it("give the same answers with indexes as without, page by page", function()
    local db = H.open({ sync = "none" })
    local A = assert(db:create_container("a", { partition_key = "/pk", physical_partitions = 4,
      indexing = { composite = { { { path = "/g" }, { path = "/n" } },
                                 { { path = "/pk" }, { path = "/n", order = "descending" } } } } }))
    local B = assert(db:create_container("b", { partition_key = "/pk", physical_partitions = 4,
      indexing = { automatic = false } }))
    local state = 777
    local function rand(n)
      state = (state * 1103515245 + 12345) % 2147483648
      return state % n + 1
    end
    for p = 1, 3 do
      local ops = {}
      for i = 1, 400 do
        local d = { id = ("i%d_%d"):format(p, i), pk = "p" .. p, n = rand(60) - 1, g = rand(4) - 1,
                    s = ("s%02d"):format(rand(30)), tags = { "t" .. rand(5), "t" .. rand(5) } }
        local r = rand(100)
        if r <= 5 then d.n = nil elseif r <= 8 then d.n = "str" .. i elseif r <= 10 then d.n = { 1 }
        elseif r <= 12 then d.n = null end
        ops[#ops + 1] = { op = "create", doc = d }
        if #ops == 100 then
          assert(A:batch("p" .. p, ops))
          assert(B:batch("p" .. p, ops))
          ops = {}
        end
      end
    end
    local function all(cont, sql, size)
      local out, tok = {}, nil
      repeat
        local rows, info = assert(cont:query(sql, nil, { max_items = size, continuation = tok }))
        for _, r in ipairs(rows) do
          if type(r) == "table" then r._etag, r._ts, r._lsn = nil, nil, nil end
          out[#out + 1] = r
        end
        tok = info.continuation
      until not tok
      return out
    end
    local function key(v)
      if v == nil or (type(v) == "table" and v ~= null) then return "U" end
      return json.encode(v)
    end
    local queries = {
      "SELECT * FROM c WHERE c.pk = 'p2' AND c.n > 30",
      "SELECT * FROM c WHERE c.pk = 'p2' AND c.n BETWEEN 10 AND 20 ORDER BY c.n",
      "SELECT * FROM c WHERE c.pk = 'p2' ORDER BY c.n",
      "SELECT * FROM c WHERE c.pk = 'p1' ORDER BY c.n DESC",
      "SELECT * FROM c WHERE c.pk = 'p3' AND c.n > 30 ORDER BY c.n DESC",
      "SELECT * FROM c WHERE c.pk = 'p3' AND c.s > 's20' ORDER BY c.s",
      "SELECT * FROM c WHERE c.pk = 'p1' AND STARTSWITH(c.s, 's1')",
      "SELECT * FROM c WHERE c.pk = 'p1' AND c.s LIKE 's2%'",
      "SELECT * FROM c WHERE c.g = 1 AND c.n < 20",
      "SELECT * FROM c WHERE c.g = 2 AND c.n > 5 ORDER BY c.n",
      "SELECT * FROM c WHERE c.g = 1 AND c.s = 's05'",
      "SELECT * FROM c WHERE c.g = 1 AND ARRAY_CONTAINS(c.tags, 't3')",
      "SELECT * FROM c WHERE c.n IN (1, 2, 3, 'str40')",
      "SELECT * FROM c WHERE c.pk = 'p2' AND c.n IN (1, 2, 3)",
      "SELECT * FROM c ORDER BY c.n",
      "SELECT c.g, COUNT(1) AS n, SUM(c.g) AS s FROM c GROUP BY c.g",
      "SELECT c.n, COUNT(1) AS k FROM c WHERE c.pk = 'p3' GROUP BY c.n",
      "SELECT DISTINCT VALUE c.s FROM c WHERE c.pk = 'p1' AND c.s >= 's10'",
    }
    for _, sql in ipairs(queries) do
      local by = sql:match("ORDER BY c%.(%a+)")
      for _, size in ipairs({ 100000, 7 }) do
        local a, b = all(A, sql, size), all(B, sql, size)
        assert.are.equal(#b, #a, sql)
        if by then                     -- the same order of keys
          for i = 1, #a do assert.are.equal(key(b[i][by]), key(a[i][by]), sql) end
        end
        local ea, eb = {}, {}
        for i = 1, #a do ea[i] = json.encode(a[i]) end
        for i = 1, #b do eb[i] = json.encode(b[i]) end
        table.sort(ea)
        table.sort(eb)
        assert.are.same(eb, ea, sql)
      end
    end
    db:close()
    H.cleanup()
  end)
end)
