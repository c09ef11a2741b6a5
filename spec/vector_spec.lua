-- Vector search: VectorDistance and ORDER BY VectorDistance as the Cosmos
-- DB reference documents them (its examples, with data of our own), the
-- container's vector policy in regolith's and Cosmos DB's spelling, and
-- what regolith adds (scores projected and filtered on).
local regolith = require "regolith"
local H = require "helper"

-- The value a float32 score has once printed and read back: the double
-- nearest to it is what the engine returns.
local function f32(x)
  if x == 0 then return 0 end
  local m, e = math.frexp(x)
  m = math.floor(m * 2 ^ 24 + 0.5) / 2 ^ 24
  return m * 2 ^ e
end

local function close(a, b)
  return type(a) == "number" and math.abs(a - b) <= 1e-6 * math.max(1, math.abs(b))
end

describe("vector search", function()
  local db, c

  local function query(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  local function value(expr, params)
    local rows = query("SELECT VALUE " .. expr, params)
    return rows[1]
  end

  local function ids(rows)
    local out = {}
    for i, r in ipairs(rows) do out[i] = r.id end
    return out
  end

  before_each(function()
    db = H.open()
    c = assert(db:create_container("v", { partition_key = "/pk" }))
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("VectorDistance", function()
    it("gives the cosine similarity by default, from -1 to 1", function()
      assert.are.equal(1, value("VectorDistance([1, 2, 3], [2, 4, 6])"))
      assert.are.equal(-1, value("VectorDistance([1, 0], [-3, 0])"))
      assert.are.equal(0, value("VectorDistance([1, 0], [0, 5])"))
      local s = value("VectorDistance([1, 2, 3], [4, 5, 6])")
      assert.are.equal(f32(32 / math.sqrt(14 * 77)), s)
    end)

    it("gives the dot product and the euclidean distance when asked", function()
      assert.are.equal(32, value("VectorDistance([1, 2, 3], [4, 5, 6], false, "
        .. "{'distanceFunction': 'dotproduct'})"))
      assert.are.equal(f32(math.sqrt(27)), value("VectorDistance([1, 2, 3], "
        .. "[4, 5, 6], false, {'distanceFunction': 'euclidean'})"))
      assert.are.equal(-7.5, value("VectorDistance([1.5], [-5], true, "
        .. "{'distanceFunction': 'DotProduct'})"))
    end)

    it("rounds scores to float32, as Cosmos DB's are", function()
      local s = value("VectorDistance([0.1, 0.2], [0.3, 0.4], false, "
        .. "{'distanceFunction': 'dotproduct'})")
      assert.are.equal(f32(s), s)
      assert.is_true(close(s, 0.11))
    end)

    it("gives the same bits on every platform, compiler and SIMD width", function()
      -- 100 elements, whose float32 sums depend on the order they are made
      -- in: the kernels' order is fixed (16 lanes, then a fixed tree, no
      -- fused multiply-add), so these are the values everywhere
      local a, b = {}, {}
      for i = 1, 100 do
        a[i] = ((i * 37) % 101 - 50) / 7
        b[i] = ((i * 53) % 89 - 44) / 13
      end
      local want = { cosine = 0.0039115878753364086, dotproduct = 3.1758155822753906,
                     euclidean = 45.631015777587891 }
      for d, score in pairs(want) do
        assert.are.equal(score, value("VectorDistance(@a, @b, false, @o)",
          { a = a, b = b, o = { distanceFunction = d } }))
      end
    end)

    it("reads the elements as the data type holds them", function()
      -- int8 and uint8 compute exactly; values outside the type give none
      assert.are.equal(-13, value("VectorDistance([1, -2], [-3, 5], false, "
        .. "{'dataType': 'int8', 'distanceFunction': 'dotproduct'})"))
      assert.is_nil(value("VectorDistance([1, -2], [-3, 500], false, "
        .. "{'dataType': 'int8'})"))
      assert.is_nil(value("VectorDistance([1, -2], [3, 5], false, "
        .. "{'dataType': 'uint8'})"))
      assert.is_nil(value("VectorDistance([1.5, 2], [3, 5], false, "
        .. "{'dataType': 'uint8'})"))
      -- float16 rounds each element to half precision (2049 -> 2048)
      assert.are.equal(2048, value("VectorDistance([2049], [1], false, "
        .. "{'dataType': 'float16', 'distanceFunction': 'dotproduct'})"))
      assert.are.equal(2049, value("VectorDistance([2049], [1], false, "
        .. "{'dataType': 'float32', 'distanceFunction': 'dotproduct'})"))
      assert.is_nil(value("VectorDistance([70000], [1], false, "
        .. "{'dataType': 'float16'})"))
    end)

    it("gives undefined, never an error, for what is no pair of vectors", function()
      for _, args in ipairs({ "[1, 2], [1]", "[], []", "[1, 'a'], [1, 2]",
                              "'12', [1, 2]", "[1, 2], {'a': 1}",
                              "[1, null], [1, 2]", "[[1], [2]], [[1], [2]]",
                              "[0, 0], [1, 2]" }) do
        assert.is_nil(value("VectorDistance(" .. args .. ")"), args)
      end
    end)

    it("takes its query vector and options as parameters", function()
      assert.are.equal(11, value("VectorDistance(@a, @b, @bf, @o)", {
        a = { 1, 2 }, b = { 3, 4 }, bf = true,
        o = { distanceFunction = "dotproduct" } }))
      local rows, msg, status = c:query("SELECT VALUE VectorDistance([1], [1], "
        .. "false, @o)", { o = { distanceFunction = "manhattan" } })
      assert.is_nil(rows)
      assert.are.equal(400, status)
      assert.matches("distanceFunction", msg)
      rows, msg, status = c:query("SELECT VALUE VectorDistance([1], [1], @b)",
        { b = "yes" })
      assert.is_nil(rows)
      assert.are.equal(400, status)
      assert.matches("true or false", msg)
    end)

    it("refuses bad options with 400 naming the place", function()
      local bad = {
        { "{'bogus': 1}", "unknown option 'bogus'" },
        { "{'distanceFunction': 'manhattan'}", "distanceFunction" },
        { "{'dataType': 'float64'}", "dataType" },
        { "{'searchListSizeMultiplier': 0}", "from 1 to 100" },
        { "{'quantizedVectorListMultiplier': 101}", "from 1 to 100" },
        { "{'quantizedVectorListMultiplier': 2.5}", "from 1 to 100" },
        { "{'filterPriority': 1.5}", "from 0 to 1" },
        { "{'filterPriority': c.p}", "must be a literal" },
        { "'cosine'", "object of options" },
      }
      for _, case in ipairs(bad) do
        local rows, msg, status = c:query("SELECT VALUE VectorDistance([1], [1], "
          .. "false, " .. case[1] .. ")")
        assert.is_nil(rows, case[1])
        assert.are.equal(400, status)
        assert.matches(case[2], msg, 1, true)
        assert.matches("1:", msg, 1, true)
      end
      local rows, msg, status = c:query("SELECT VALUE VectorDistance([1], [1], 1)")
      assert.is_nil(rows)
      assert.are.equal(400, status)
      assert.matches("third argument", msg)
      rows, msg, status = c:query("SELECT VALUE VectorDistance([1])")
      assert.is_nil(rows)
      assert.are.equal(400, status)
      assert.matches("VECTORDISTANCE takes 2 to 4 arguments", msg)
      -- the documented options are all accepted together
      assert.are.equal(1, value("VectorDistance([1], [1], false, {"
        .. "'distanceFunction': 'cosine', 'dataType': 'float32', "
        .. "'searchListSizeMultiplier': 10, 'quantizedVectorListMultiplier': 5, "
        .. "'filterPriority': 0.5})"))
    end)
  end)

  describe("ORDER BY VectorDistance", function()
    before_each(function()
      assert(c:create({ id = "east", pk = "a", v = { 1, 0 }, n = 1 }))
      assert(c:create({ id = "northeast", pk = "b", v = { 0.6, 0.8 }, n = 2 }))
      assert(c:create({ id = "north", pk = "a", v = { 0, 1 }, n = 3 }))
      assert(c:create({ id = "west", pk = "c", v = { -2, 0 }, n = 4 }))
      assert(c:create({ id = "none", pk = "b", v = "not a vector", n = 5 }))
      assert(c:create({ id = "bare", pk = "c", n = 6 }))
    end)

    it("orders the most similar first, whatever the similarity", function()
      local rows = query("SELECT c.id, VectorDistance(c.v, [1, 0]) AS score FROM c "
        .. "ORDER BY VectorDistance(c.v, [1, 0])")
      assert.are.same({ "east", "northeast", "north", "west" }, ids(rows))
      assert.are.same({ 1, f32(0.6), 0, -1 },
        { rows[1].score, rows[2].score, rows[3].score, rows[4].score })
      local e = "VectorDistance(c.v, [1, 0], false, {'distanceFunction': 'euclidean'})"
      rows = query("SELECT c.id, " .. e .. " AS d FROM c ORDER BY " .. e)
      assert.are.same({ "east", "northeast", "north", "west" }, ids(rows))
      assert.are.equal(0, rows[1].d)
      assert.are.equal(3, rows[4].d)
      local d = "VectorDistance(c.v, [1, 0], false, {'distanceFunction': 'dotproduct'})"
      rows = query("SELECT VALUE c.id FROM c ORDER BY " .. d)
      assert.are.same({ "east", "northeast", "north", "west" }, rows)
    end)

    it("returns only the items it scores, and TOP N of them", function()
      local rows = query("SELECT TOP 2 VALUE c.id FROM c ORDER BY VectorDistance(c.v, [0, 1])")
      assert.are.same({ "north", "northeast" }, rows)
      rows = query("SELECT VALUE c.id FROM c ORDER BY VectorDistance(c.v, [0, 1])")
      assert.are.equal(4, #rows)
    end)

    it("combines with any filter, in one partition or across all", function()
      local rows = query("SELECT TOP 3 VALUE c.id FROM c WHERE c.n > 1 "
        .. "ORDER BY VectorDistance(c.v, [1, 0])")
      assert.are.same({ "northeast", "north", "west" }, rows)
      rows = query("SELECT VALUE c.id FROM c ORDER BY VectorDistance(c.v, [1, 0])",
        nil, { partition_key = "a" })
      assert.are.same({ "east", "north" }, rows)
    end)

    it("pages through the ranking with continuation tokens", function()
      local sql = "SELECT TOP 3 VALUE c.id FROM c ORDER BY VectorDistance(c.v, [1, 0])"
      local all, token = {}, nil
      repeat
        local rows, info = query(sql, nil, { max_items = 1, continuation = token })
        for _, id in ipairs(rows) do all[#all + 1] = id end
        token = info.continuation
      until token == nil
      assert.are.same({ "east", "northeast", "north" }, all)
    end)

    it("filters on a projected score (a distance threshold)", function()
      local rows = query("SELECT VALUE c.id FROM c WHERE VectorDistance(c.v, [1, 0]) > 0.5 "
        .. "ORDER BY VectorDistance(c.v, [1, 0])")
      assert.are.same({ "east", "northeast" }, rows)
    end)

    H.local_it("runs from the command, which prints the scores",
      "the command opens a directory", function()
      local dir
      db:close()
      db, dir = H.open()
      c = assert(db:create_container("v", { partition_key = "/pk" }))
      assert(c:create({ id = "east", pk = "a", v = { 1, 0 } }))
      assert(c:create({ id = "north", pk = "a", v = { 0, 1 } }))
      local out, ok = H.run(("bin/regolith query '%s' v %q -p 'q=[1,0]' 2>/dev/null"):format(dir,
        "SELECT c.id, VectorDistance(c.v, @q) AS score FROM c ORDER BY VectorDistance(c.v, @q)"))
      assert.is_true(ok, out)
      local first, second = out:match("^(%b{})\n(%b{})")
      assert.are.same({ id = "east", score = 1 }, regolith.json.decode(first))
      assert.are.same({ id = "north", score = 0 }, regolith.json.decode(second))
    end)

    it("takes no ASC or DESC and no other key", function()
      for _, sql in ipairs({
        "SELECT * FROM c ORDER BY VectorDistance(c.v, [1, 0]) DESC",
        "SELECT * FROM c ORDER BY VectorDistance(c.v, [1, 0]) ASC",
        "SELECT * FROM c ORDER BY VectorDistance(c.v, [1, 0]), c.n",
        "SELECT * FROM c ORDER BY c.n, VectorDistance(c.v, [1, 0])" }) do
        local rows, msg, status = c:query(sql)
        assert.is_nil(rows, sql)
        assert.are.equal(400, status)
        assert.matches("VectorDistance", msg)
      end
    end)
  end)

  -- A spec that needs a vector index: it runs on both backends (a cluster
  -- keeps one instance per bucket: spec/cluster/query_parity_spec.lua).
  local function indexed(name, fn)
    return it(name, fn)
  end
  -- One that damages or rewrites the database's file.
  local function on_file(name, fn)
    return H.local_it(name, "it rewrites the local file", fn)
  end

  describe("vector indexes", function()
    local N, DIMS = 1200, 8          -- past the 1,000 that codes wait for

    -- A seeded vector of DIMS numbers in [-1, 1].
    local function vec(i)
      local v, x = {}, i * 7919 % 65521
      for j = 1, DIMS do
        x = (x * 75 + 74) % 65537
        v[j] = math.floor((x / 65537 * 2 - 1) * 1000 + 0.5) / 1000
      end
      return v
    end

    local function fill(k, n)
      local batch = {}
      for i = 1, n do
        batch[#batch + 1] = { id = "i" .. i, pk = "p" .. (i % 5), n = i, v = vec(i) }
        if #batch == 400 or i == n then assert(k:bulk_load(batch)); batch = {} end
      end
    end

    local function make(name, kind, dist)
      return assert(db:create_container(name, { partition_key = "/pk",
        vector_embeddings = { { path = "/v", dimensions = DIMS, distance_function = dist } },
        indexing = { vector_indexes = { { path = "/v", type = kind } } } }))
    end

    local function top(k, q, extra, where)
      local sql = ("SELECT TOP 10 c.id, VectorDistance(c.v, @q%s) AS s FROM c %s "
        .. "ORDER BY VectorDistance(c.v, @q%s)"):format(extra or "", where or "", extra or "")
      local rows, info = assert(k:query(sql, { q = q }))
      return rows, info
    end

    for _, kind in ipairs({ "flat", "quantizedFlat", "diskANN" }) do
      for _, dist in ipairs({ "cosine", "dotproduct", "euclidean" }) do
        indexed(("ranks with a %s index (%s) as an exact scan does"):format(kind, dist), function()
          local k = make("k", kind, dist)
          fill(k, N)
          local plain = assert(db:create_container("plain", { partition_key = "/pk" }))
          fill(plain, N)
          local opts = (", false, {'distanceFunction': '%s'}"):format(dist)
          local found, total = 0, 0
          for q = 1, 12 do
            local qv = vec(N + q)
            local a, ia = top(k, qv)
            local b = top(k, qv, ", true")           -- brute force
            local c2, ic = top(plain, qv, opts)      -- no policy, no index
            assert.are.same(b, c2)                   -- the same scores, bit for bit
            local exact = {}
            for _, r in ipairs(b) do exact[r.id] = r.s end
            for _, r in ipairs(a) do
              if exact[r.id] then
                found = found + 1
                assert.are.equal(exact[r.id], r.s)   -- a score is a score
              end
            end
            total = total + #b
            assert.is_true(ia.charge < ic.charge)
          end
          assert.is_true(found / total >= (kind == "flat" and 1 or 0.95), found / total)
          assert.is_true(db:verify())
        end)
      end
    end

    indexed("filters, in one partition or across all, as an exact scan does", function()
      local k = make("k", "diskANN", "euclidean")
      fill(k, N)
      for q = 1, 5 do
        local qv = vec(2000 + q)
        local a = top(k, qv, nil, "WHERE c.n % 10 = 3")
        local b = top(k, qv, ", true", "WHERE c.n % 10 = 3")
        assert.are.same(b, a)
        for _, r in ipairs(a) do assert.are.equal(3, tonumber(r.id:sub(2)) % 10) end
        local rows = assert(k:query("SELECT TOP 3 VALUE c.id FROM c ORDER BY "
          .. "VectorDistance(c.v, @q)", { q = qv }, { partition_key = "p2" }))
        local want = assert(k:query("SELECT TOP 3 VALUE c.id FROM c WHERE c.pk = 'p2' "
          .. "ORDER BY VectorDistance(c.v, @q, true)", { q = qv }))
        assert.are.same(want, rows)
      end
    end)

    indexed("tests the whole WHERE when the graph replaces an index seek (filterPriority 0) or no seek serves it, widening from where it stopped", function()
      -- the seek on c.n would find only items that pass; the graph's do
      -- not.  The index is asked for 10, 20, 40 ... until 10 pass, each
      -- round going on from the last (before, each searched again from
      -- the start and read about 3.4 times the graph at 1 %)
      local k = make("k", "diskANN", "euclidean")
      fill(k, N)
      local fp = ", false, {'filterPriority': 0}"
      for q = 1, 3 do
        local qv = vec(3000 + q)
        for _, case in ipairs({ { "WHERE c.n < 25", 10 }, { "WHERE c.n = 7", 1 },
                                { "WHERE c.n > 600 AND c.pk = 'p1'", 10 },
                                { "WHERE c.n % 100 = 7", 10, "" },   -- 1 %: every round
                                { "WHERE c.n % 20 = 3", 10, "" },    -- 5 %: several
                                { "WHERE c.n % 3 = 1", 10, "" },     -- one or two
                                { "WHERE c.n < 0", 0, "" } }) do     -- none pass
          for _, opts in ipairs({ fp, case[3] }) do
            local a, ia = top(k, qv, opts, case[1])
            local b = top(k, qv, ", true", case[1])
            assert.are.same(b, a)
            assert.are.equal(case[2], #a)
            -- each neighbour list and exact vector read at most once
            assert.is_true((ia.vector_nodes or 0) <= N, ia.vector_nodes)
            assert.is_true((ia.vector_bytes or 0) <= N * DIMS * 4, ia.vector_bytes)
            assert.is_true(ia.charge < 300, ia.charge)
          end
        end
      end
    end)

    indexed("searches the graph among the items an index seek finds, scoring few of them exactly", function()
      local k = make("k", "diskANN", "euclidean")
      fill(k, N)
      for q = 1, 3 do
        local qv = vec(4000 + q)
        -- 900 items: the graph, kept to them; 150 (under 40 a row): each scored
        for _, case in ipairs({ { "WHERE c.n > 300", true, 1 }, { "WHERE c.n <= 150", false, 1 },
                                { "WHERE c.n > 300 AND c.n % 7 = 2", true, 1 },
                                { "WHERE c.pk IN ('p1', 'p3')", true, 2 } }) do
          local a, ia = top(k, qv, nil, case[1])
          local b = top(k, qv, ", true", case[1])
          assert.are.same(b, a)
          assert.are.equal(#b, #a)
          assert.are.equal(case[2], (ia.vector_nodes or 0) > 0, case[1])
          -- the seek runs once, its items scored or searched among
          assert.are.equal(case[3], ia.index_lookups, case[1])
        end
      end
      -- a seek past 1,000 items a row wanted: the graph alone, the WHERE after
      local one = "SELECT TOP 1 VALUE c.id FROM c WHERE c.n > 100 ORDER BY VectorDistance(c.v, @q%s)"
      for q = 1, 3 do
        local a, ia = assert(k:query(one:format(""), { q = vec(4200 + q) }))
        assert.are.same(assert(k:query(one:format(", true"), { q = vec(4200 + q) })), a)
        assert.is_true(ia.vector_nodes > 0 and ia.scanned > 1000)
      end
      local sql = "SELECT TOP 10 VALUE c.id FROM c WHERE c.n > 300 ORDER BY VectorDistance(c.v, @q)"
      local want = assert(k:query(sql, { q = vec(4100) }))
      local all, token = {}, nil
      repeat                         -- pages: the same ten
        local rows, info = assert(k:query(sql, { q = vec(4100) },
                                          { max_items = 4, continuation = token }))
        for _, id in ipairs(rows) do all[#all + 1] = id end
        token = info.continuation
      until token == nil
      assert.are.same(want, all)
    end)

    indexed("follows every kind of write in the write's transaction", function()
      local k = make("k", "diskANN", "euclidean")
      fill(k, N)
      local q = vec(5000)
      local near = { q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8] + 0.001 }
      local function best()
        return top(k, q)[1].id
      end
      assert(k:create({ id = "new", pk = "p1", n = 0, v = near }))
      assert.are.equal("new", best())
      assert(k:replace({ id = "new", pk = "p1", n = 0, v = vec(3) }))
      assert.are_not.equal("new", best())
      assert(k:upsert({ id = "up", pk = "p2", v = near }))
      assert.are.equal("up", best())
      assert(k:patch("up", "p2", { { op = "set", path = "/v", value = vec(4) } }))
      assert.are_not.equal("up", best())
      assert(k:patch("i7", "p2", { { op = "set", path = "/v", value = near } }))
      assert.are.equal("i7", best())
      assert(k:delete("i7", "p2"))
      assert.are_not.equal("i7", best())
      assert(k:batch("p3", { { op = "create", doc = { id = "b", pk = "p3", v = near } } }))
      assert.are.equal("b", best())
      assert(k:batch("p3", { { op = "delete", id = "b" } }))
      assert(k:upsert({ id = "x", pk = "p4", v = "no longer a vector" }))
      for i = 8, 300 do assert(k:delete("i" .. i, "p" .. (i % 5))) end
      assert.is_true(db:verify())
      -- a procedure's writes and its triggers' go through the same path
      assert(k:create_procedure("put", [[return function(ctx, doc)
        assert(ctx:create(doc)) return ctx:query("SELECT TOP 1 VALUE c.id FROM c "
          .. "ORDER BY VectorDistance(c.v, @q)", { q = doc.v })[1] end]]))
      assert.are.equal("proc", (k:execute("put", "p1",
        { id = "proc", pk = "p1", v = near })))
      assert.are.equal("proc", best())
      assert(k:create_trigger("tweak", { type = "pre", source = [[
        return function(ctx)
          local doc = ctx:body()
          doc.v[1] = doc.v[1] + 5
          ctx:set_body(doc)
        end]] }))
      assert(k:upsert({ id = "proc", pk = "p1", v = near }, { pre_trigger = "tweak" }))
      assert.are_not.equal("proc", best())
      -- what the transaction undoes, the index never saw
      local ok = pcall(db.group, db, function()
        assert(k:create({ id = "gone", pk = "p1", v = near }))
        error("undo")
      end)
      assert.is_false(ok)
      assert.are_not.equal("gone", best())
      assert.is_true(db:verify())
    end)

    indexed("keeps one index per shard key value, and searches one when the WHERE names it", function()
      local k = assert(db:create_container("s", { partition_key = "/pk",
        vector_embeddings = { { path = "/v", dimensions = DIMS } },
        indexing = { vector_indexes = { { path = "/v", type = "quantizedFlat",
                                          shard_key = { "/tenant" } } } } }))
      local batch = {}
      for i = 1, 3 * N do
        batch[#batch + 1] = { id = "i" .. i, pk = "p" .. (i % 5), tenant = "t" .. (i % 3),
                              v = vec(i) }
        if #batch == 500 then assert(k:bulk_load(batch)); batch = {} end
      end
      if #batch > 0 then assert(k:bulk_load(batch)) end
      local sql = "SELECT TOP 5 c.id, c.tenant FROM c %s ORDER BY VectorDistance(c.v, @q%s)"
      local q = vec(9001)
      local one, ione = assert(k:query(sql:format("WHERE c.tenant = 't1'", ""), { q = q },
        nil))
      local exact = assert(k:query(sql:format("WHERE c.tenant = 't1'", ", true"), { q = q }))
      local _, iall = assert(k:query(sql:format("", ""), { q = q }))
      assert.are.same(exact, one)
      for _, r in ipairs(one) do assert.are.equal("t1", r.tenant) end
      assert.is_true(ione.vector_codes < iall.vector_codes / 2)   -- one shard read
      -- an item that changes tenant changes shard
      assert(k:upsert({ id = "i3", pk = "p3", tenant = "t2", v = q }))
      assert.are.equal("i3", (assert(k:query(sql:format("WHERE c.tenant = 't2'", ""),
        { q = q })))[1].id)
      assert.is_true(db:verify())
    end)

    indexed("drops an expired item's slot", function()
      local k = assert(db:create_container("t", { partition_key = "/pk", default_ttl = -1,
        vector_embeddings = { { path = "/v", dimensions = 2 } },
        indexing = { vector_indexes = { { path = "/v", type = "flat" } } } }))
      assert(k:create({ id = "brief", pk = "p", ttl = 3, v = { 1, 0 } }))
      assert(k:create({ id = "stays", pk = "p", v = { 0, 1 } }))
      assert.are.equal("brief", top(k, { 1, 0 })[1].id)   -- (3 s to spare)
      os.execute("sleep 4.2")
      assert.are.equal("stays", top(k, { 1, 0 })[1].id)   -- invisible at once
      assert(db:purge_expired())
      assert.is_true(db:verify())
      assert.are.same({ "stays" }, assert(k:query("SELECT VALUE c.id FROM c "
        .. "ORDER BY VectorDistance(c.v, [1, 0], true)")))
    end)

    for _, case in ipairs({
      { "del-first", "is not in the graph" },
      { "dup-first", "entries no vector index needs" },
      { "del-last", "does not hold item" },
    }) do
      on_file(("lets verify find a damaged vector table (%s)"):format(case[1]), function()
        assert(H.execute("env -u LD_PRELOAD make -s build/tools/lmdb_poke"))
        db:close()
        local path
        db, path = H.open()
        local k = make("k", "diskANN", "euclidean")
        fill(k, N)
        assert.is_true(db:verify())
        db:close()
        assert(H.execute(("build/tools/lmdb_poke '%s' vector %s"):format(path, case[1])))
        db = assert(regolith.open(path))
        local ok, report = db:verify()
        assert.is_nil(ok)
        assert.truthy(report:find(case[2], 1, true), report)
      end)
    end

    on_file("opens read-only a database made before vector indexes", function()
      assert(H.execute("env -u LD_PRELOAD make -s build/tools/lmdb_poke"))
      db:close()
      local path
      db, path = H.open()
      local k = assert(db:create_container("old", { partition_key = "/pk" }))
      assert(k:create({ id = "a", pk = "x", v = { 1, 0 } }))
      db:close()
      -- the release before had no vector table
      assert(H.execute(("build/tools/lmdb_poke '%s' vector drop"):format(path)))
      db = assert(regolith.open(path, { readonly = true }))
      assert.is_true(db:verify())
      assert.are.same({ "a" }, assert(db:container("old"):query(
        "SELECT VALUE c.id FROM c ORDER BY VectorDistance(c.v, [1, 0])")))
      assert(db:stats({ tables = true }))
      db:close()
      db = assert(regolith.open(path))      -- a writer makes the table
      assert.is_true(db:verify())
      assert.are.equal(0, db:stats({ tables = true }).tables.vector.entries)
    end)

    indexed("fills an index a replace adds, and empties one it removes", function()
      local opts = { partition_key = "/pk",
        vector_embeddings = { { path = "/v", dimensions = DIMS } } }
      local k = assert(db:create_container("k", opts))
      fill(k, N)
      opts.indexing = { vector_indexes = { { path = "/v", type = "quantizedFlat" } } }
      assert(db:replace_container("k", opts))
      k = db:container("k")
      local _, info = top(k, vec(1))
      assert.is_true(info.charge < 20, info.charge)
      assert.is_true(db:verify())
      opts.indexing = nil
      assert(db:replace_container("k", opts))
      assert.is_true(db:verify())
      -- verify also finds entries no index needs; a local file counts them
      local st = db:stats({ tables = true })
      if not H.cluster then assert.are.equal(0, st.tables.vector.entries) end
    end)
  end)

  describe("vector policy", function()
    local function create(name, opts)
      opts.partition_key = opts.partition_key or "/pk"
      return db:create_container(name, opts)
    end

    local function fails(name, opts, text)
      local ok, err = pcall(create, name, opts)
      assert.is_false(ok, name)
      assert.matches(text, err, 1, true)
    end

    it("gives VectorDistance the similarity and type of the path", function()
      local e = assert(create("e", { vector_embeddings = {
        { path = "/v", data_type = "int8", dimensions = 2,
          distance_function = "euclidean" } } }))
      assert(e:create({ id = "a", pk = "x", v = { 3, 4 } }))
      assert(e:create({ id = "b", pk = "x", v = { 1, 1 } }))
      local rows = assert(e:query("SELECT c.id, VectorDistance(c.v, [0, 0]) AS d "
        .. "FROM c ORDER BY VectorDistance(c.v, [0, 0])"))
      assert.are.same({ { id = "b", d = f32(math.sqrt(2)) }, { id = "a", d = 5 } }, rows)
      -- the options still win
      rows = assert(e:query("SELECT VALUE VectorDistance(c.v, [1, 1], false, "
        .. "{'distanceFunction': 'dotproduct'}) FROM c WHERE c.id = 'a'"))
      assert.are.same({ 7 }, rows)
      -- a path without an embedding keeps the defaults (cosine)
      rows = assert(e:query("SELECT VALUE VectorDistance(c.w, [1, 0]) FROM c "
        .. "WHERE c.id = 'a'"))
      assert.are.same({}, rows)
      assert(e:upsert({ id = "a", pk = "x", v = { 3, 4 }, w = { 2, 0 } }))
      rows = assert(e:query("SELECT VALUE VectorDistance(c.w, [1, 0]) FROM c "
        .. "WHERE c.id = 'a'"))
      assert.are.same({ 1 }, rows)
    end)

    indexed("takes Cosmos DB's spelling and keeps regolith's", function()
      local k = assert(create("k", {
        vectorEmbeddingPolicy = { vectorEmbeddings = {
          { path = "/vector1", dataType = "float32", dimensions = 8,
            distanceFunction = "cosine" },
          { path = "/vector2", dataType = "Float16", dimensions = 4,
            distanceFunction = "DotProduct" } } },
        indexing = { vectorIndexes = {
          { path = "/vector1", type = "quantizedFlat", quantizationByteSize = 4,
            vectorIndexShardKey = { "/tenant" } },
          { path = "/vector2", type = "DiskANN", indexingSearchListSize = 50 } } } }))
      local spec = k:spec()
      assert.are.same({
        { path = "/vector1", data_type = "float32", dimensions = 8,
          distance_function = "cosine" },
        { path = "/vector2", data_type = "float16", dimensions = 4,
          distance_function = "dotproduct" } }, spec.vector_embeddings)
      assert.are.same({
        { path = "/vector1", type = "quantizedFlat", quantization_byte_size = 4,
          shard_key = { "/tenant" } },
        { path = "/vector2", type = "diskANN", indexing_search_list_size = 50 } },
        spec.indexing.vector_indexes)
      assert.is_nil(spec.vectorEmbeddingPolicy)
    end)

    it("refuses what Cosmos DB refuses, with 400 and the rule", function()
      fails("a", { vector_embeddings = { { path = "/v/[]" } } }, "invalid path")
      fails("b", { vector_embeddings = { { path = "/v/*" } } }, "invalid path")
      fails("c", { vector_embeddings = { { path = "/v" }, { path = "/v" } } },
        "two vector embeddings")
      fails("d", { vector_embeddings = { { path = "/v", data_type = "float64" } } },
        "data_type")
      fails("e", { vector_embeddings = { { path = "/v", distance_function = "l1" } } },
        "distance_function")
      fails("f", { vector_embeddings = { { path = "/v", dimensions = 0 } } },
        "dimensions must be an integer from 1 to 4096")
      fails("g", { vector_embeddings = { { path = "/v", dimensions = 506 } },
                   indexing = { vector_indexes = { { path = "/v", type = "flat" } } } },
        "at most 505 dimensions")
      fails("h", { indexing = { vector_indexes = { { path = "/v", type = "flat" } } } },
        "path of a vector embedding")
      fails("i", { vector_embeddings = { { path = "/v", dimensions = 8 } },
                   indexing = { vector_indexes = { { path = "/v", type = "hnsw" } } } },
        "flat, quantizedFlat or diskANN")
      fails("j", { vector_embeddings = { { path = "/v", dimensions = 8 } },
                   indexing = { vector_indexes = { { path = "/v", type = "diskANN",
                     quantization_byte_size = 9 } } } },
        "quantization_byte_size must be an integer from 1 to 8")
      fails("k", { vector_embeddings = { { path = "/v", dimensions = 8 } },
                   indexing = { vector_indexes = { { path = "/v", type = "diskANN",
                     indexing_search_list_size = 5 } } } },
        "from 10 to 500")
      fails("l", { vector_embeddings = { { path = "/v", dimensions = 8 } },
                   indexing = { vector_indexes = { { path = "/v", type = "flat",
                     indexing_search_list_size = 50 } } } },
        "only a diskANN index")
      fails("m", { vector_embeddings = { { path = "/v", dimensions = 8 } },
                   indexing = { vector_indexes = { { path = "/v", type = "flat" },
                     { path = "/v", type = "diskANN" } } } },
        "two vector indexes")
      fails("n", { vector_embeddings = { { path = "/v" } },
                   vectorEmbeddingPolicy = { vectorEmbeddings = {} } },
        "same option")
      fails("o", { vector_embeddings = { { path = "/_ts" } } }, "system property")
    end)

    indexed("lets a replace add or remove an embedding or index, not change one", function()
      local opts = { partition_key = "/pk", vector_embeddings = {
        { path = "/v", dimensions = 2 } } }
      assert(create("r", opts))
      opts.vector_embeddings[2] = { path = "/w", dimensions = 3 }
      opts.indexing = { vector_indexes = { { path = "/w", type = "flat" } } }
      assert(db:replace_container("r", opts))
      opts.indexing.vector_indexes[1].type = "quantizedFlat"
      local r, msg, status = db:replace_container("r", opts)
      assert.is_nil(r)
      assert.are.equal(400, status)
      assert.matches("vector index of '/w' cannot change", msg)
      opts.indexing = nil
      assert(db:replace_container("r", opts))
      opts.vector_embeddings[1].distance_function = "euclidean"
      r, msg, status = db:replace_container("r", opts)
      assert.is_nil(r)
      assert.are.equal(400, status)
      assert.matches("vector embedding of '/v' cannot change", msg)
      opts.vector_embeddings = { opts.vector_embeddings[2] }
      assert(db:replace_container("r", opts))
      assert.are.same({ { path = "/w", dimensions = 3 } },
        db:container("r"):spec().vector_embeddings)
    end)

    it("keeps vector paths out of the range index, with the same results", function()
      local k = assert(create("x", { vector_embeddings = { { path = "/v", dimensions = 8 } } }))
      local plain = assert(create("y", {}))
      local doc = { id = "a", pk = "x", v = { 1, 2, 3, 4, 5, 6, 7, 8 } }
      local _, with = assert(k:create(doc))
      local _, without = assert(plain:create(doc))
      assert.is_true(with.charge < without.charge)   -- no terms for /v/[]
      local rows = assert(k:query("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.v, 2)"))
      assert.are.same({ "a" }, rows)
    end)
  end)
end)
