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

    it("runs from the command, which prints the scores", function()
      if H.cluster then return end             -- the command opens a directory
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

    it("takes Cosmos DB's spelling and keeps regolith's", function()
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

    it("lets a replace add or remove an embedding or index, not change one", function()
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
