-- The query language on both backends: the same containers (composite
-- indexes, computed properties, user-defined functions, a hierarchical
-- key) fed the same items in a local database and in one on the cluster
-- answer every query alike: system functions, GROUP BY, DISTINCT,
-- subqueries, JOINs, ORDER BY in both directions with TOP and OFFSET,
-- queries without FROM, VectorDistance (each option, brute force, the
-- container's vector policy, ORDER BY it with TOP, in a partition and
-- fanned out, its score projected and filtered on), vector and full-text
-- indexes, each whole and page by page, with the same plan, work and
-- charge.  Ordered queries must give the
-- same sequence; the others the same rows.
local C = require "cluster.support"
local H = require "helper"
local layout = require "regolith.cluster.layout"
local regolith = require "regolith"

local json = regolith.json

-- A row as JSON text, its keys sorted, without the system properties
-- (whose values are a clock on the cluster).
local function text(v)
  if type(v) ~= "table" or v == regolith.null then return json.encode(v) end
  local keys, parts, array = {}, {}, #v > 0 or next(v) == nil
  if array then
    for i = 1, #v do parts[i] = text(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  for k in pairs(v) do
    if k ~= "_etag" and k ~= "_ts" and k ~= "_lsn" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do parts[#parts + 1] = json.encode(k) .. ":" .. text(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end


local CATS = { "Shoes, Trail", "Shoes, Road", "Jackets, Rain", "Hats, Winter", "Bags" }
local WORDS = { "alpine", "Bold", "calm", "Dune", "echo", "fjord", "Glacier", "harbor" }

local function item(rand, i)
  local d = {
    id = ("i%04d"):format(i), pk = "p" .. rand(12), n = rand(50) - 1,
    price = (i * 7919 % 40000) / 100, cat = CATS[rand(#CATS)],   -- unique
    name = WORDS[rand(#WORDS)] .. " " .. WORDS[rand(#WORDS)],
    tags = { "t" .. rand(6), "t" .. rand(6) },
    day = ("2024-%02d-%02dT%02d:00:00.0000000Z"):format(rand(12), rand(28), rand(24) - 1),
    dims = { w = rand(10), h = rand(10) },
    long = ("x"):rep(rand(3) * 150) .. rand(4),     -- cut in the index
  }
  local r = rand(100)
  if r <= 6 then d.n = nil
  elseif r <= 9 then d.n = "n" .. i
  elseif r <= 11 then d.n = regolith.null
  elseif r <= 13 then d.n = { i } end
  if rand(10) == 1 then d.tags = nil end
  return d
end

local QUERIES = {
  -- system functions
  "SELECT c.id, UPPER(c.name) AS u, LOWER(c.cat) AS l, LENGTH(c.name) AS n FROM c",
  "SELECT VALUE CONCAT(c.id, '-', SUBSTRING(c.cat, 0, INDEX_OF(c.cat, ','))) FROM c",
  "SELECT c.id, REPLACE(c.name, 'a', 'A') AS r, LEFT(c.name, 3) AS l, TRIM(' x ') AS t FROM c",
  "SELECT c.id, ROUND(c.price) AS r, FLOOR(c.price) AS f, ABS(c.price - 200) AS a, POWER(c.dims.w, 2) AS p FROM c",
  "SELECT c.id, ARRAY_LENGTH(c.tags) AS n, ARRAY_SLICE(c.tags, 1) AS s, ARRAY_CONTAINS(c.tags, 't3') AS has FROM c",
  "SELECT c.id, IS_NUMBER(c.n) AS num, IS_STRING(c.n) AS str, IS_DEFINED(c.n) AS def, IS_NULL(c.n) AS nul FROM c",
  "SELECT c.id, DateTimeAdd('dd', 3, c.day) AS later, DateTimePart('mm', c.day) AS month, DateTimeToTimestamp(c.day) AS ts FROM c",
  "SELECT c.id, StringToNumber('12.5') AS s, ToString(c.dims.w) AS t, IIF(c.price > 200, 'dear', 'cheap') AS p FROM c",
  "SELECT c.id, c.n ?? 'none' AS n, (c.price > 100 ? 'big' : 'small') AS size, c.dims.w & 3 AS b FROM c",
  "SELECT VALUE c.id FROM c WHERE STARTSWITH(c.name, 'Bold', true) OR ENDSWITH(c.name, 'echo')",
  "SELECT VALUE c.id FROM c WHERE c.name LIKE '%al%' AND c.cat NOT LIKE 'Shoes%'",
  "SELECT VALUE c.id FROM c WHERE c.price BETWEEN 100 AND 150 AND c.n IN (1, 2, 3, 'n40')",
  "SELECT VALUE c.id FROM c WHERE RegexMatch(c.name, '^[a-c]')",
  -- GROUP BY, aggregates, DISTINCT
  "SELECT COUNT(1) AS n, SUM(c.price) AS s, AVG(c.dims.w) AS a, MIN(c.n) AS lo, MAX(c.n) AS hi FROM c",
  "SELECT c.cat, COUNT(1) AS n, SUM(c.dims.w) AS w FROM c GROUP BY c.cat",
  "SELECT c.n, COUNT(1) AS k FROM c GROUP BY c.n",
  "SELECT LOWER(c.cat) AS l, c.dims.w AS w, COUNT(1) AS k FROM c WHERE c.price > 50 GROUP BY LOWER(c.cat), c.dims.w",
  "SELECT c.pk, MAX(c.price) AS top FROM c WHERE c.pk = 'p3' GROUP BY c.pk",
  "SELECT DISTINCT VALUE c.cat FROM c",
  "SELECT DISTINCT c.dims.w, c.dims.h FROM c WHERE c.dims.w < 4",
  "SELECT DISTINCT VALUE t FROM c JOIN t IN c.tags",
  "SELECT DISTINCT VALUE c.long FROM c",
  "SELECT VALUE COUNT(1) FROM c WHERE c.cp_family = 'Shoes'",
  -- subqueries and JOINs
  "SELECT VALUE c.id FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = 't2')",
  "SELECT c.id, ARRAY(SELECT VALUE UPPER(t) FROM t IN c.tags) AS up FROM c",
  "SELECT c.id, (SELECT VALUE COUNT(1) FROM t IN c.tags) AS k FROM c",
  "SELECT c.id, t AS tag FROM c JOIN t IN c.tags WHERE t IN ('t1', 't5')",
  "SELECT VALUE c.id FROM c WHERE c.pk IN ('p1', 'p2') AND NOT ARRAY_CONTAINS(c.tags, 't1')",
  -- computed properties and user-defined functions
  "SELECT c.id, c.cp_lower, c.cp_family FROM c WHERE c.cp_lower > 'echo'",
  "SELECT VALUE c.id FROM c WHERE c.cp_family = 'Jackets'",
  "SELECT c.id, udf.net(c.price) AS net FROM c WHERE udf.net(c.price) < 60",
  "SELECT VALUE udf.net(100)",
  -- ORDER BY, TOP, OFFSET LIMIT: the same sequences
  "SELECT c.id, c.n FROM c ORDER BY c.n",
  "SELECT c.id, c.n FROM c ORDER BY c.n DESC",
  "SELECT TOP 15 c.id, c.price FROM c WHERE c.price > 100 ORDER BY c.price",
  "SELECT TOP 15 c.id, c.price FROM c ORDER BY c.price DESC",
  "SELECT c.id, c.name FROM c WHERE c.pk = 'p4' ORDER BY c.name DESC",
  "SELECT c.id, c.cat, c.price FROM c WHERE c.cat = 'Bags' ORDER BY c.price DESC",
  "SELECT c.id, c.cat, c.price FROM c ORDER BY c.cat, c.price",
  "SELECT c.id, c.long FROM c ORDER BY c.long DESC",
  "SELECT c.id, c.long FROM c WHERE c.long > 'x' ORDER BY c.long",
  "SELECT c.id, c.day FROM c ORDER BY c.day DESC OFFSET 20 LIMIT 30",
  "SELECT c.id, c.cp_lower FROM c ORDER BY c.cp_lower DESC",
  "SELECT c.id, c.price, t FROM c JOIN t IN c.tags WHERE c.price < 150 ORDER BY c.price DESC",
  -- queries without FROM, and parameters
  "SELECT VALUE [1, 2, 3]",
  "SELECT UPPER('abc') AS u, 1 + 2 AS three",
}

local PARAMS = {
  { "SELECT VALUE c.id FROM c WHERE c.pk = @pk AND c.price >= @lo", { ["@pk"] = "p7", ["@lo"] = 120 } },
  { "SELECT c.id, c.price FROM c WHERE c.price > @lo ORDER BY c.price DESC", { ["@lo"] = 300 } },
}

local HIER = {
  "SELECT VALUE c.id FROM c WHERE c.tenant = 't2'",
  "SELECT c.id, c.v FROM c WHERE c.tenant = 't3' ORDER BY c.v DESC",
  "SELECT c.user, COUNT(1) AS k FROM c WHERE c.tenant = 't1' GROUP BY c.user",
  "SELECT VALUE c.id FROM c WHERE c.tenant = 't4' AND c.user = 2",
}

-- A container whose items carry vectors: /v (8 float32, cosine by its
-- policy), /e (4 int8, euclidean), some missing, of another length or no
-- vector at all.
local function vitem(rand, i)
  local d = { id = ("v%03d"):format(i), pk = "p" .. rand(6), n = rand(20), v = {}, e = {} }
  for j = 1, 8 do d.v[j] = (rand(2001) - 1001) / 1000 end
  for j = 1, 4 do d.e[j] = rand(255) - 128 end
  local r = rand(20)
  if r == 1 then d.v = nil
  elseif r == 2 then d.v = "not a vector"
  elseif r == 3 then d.v = { 1, 2, 3 }
  elseif r == 4 then d.e = { 300, 1, 1, 1 } end
  return d
end

local VQ = "[0.3, -0.2, 0.9, 0.1, -0.5, 0.4, 0.05, -0.7]"
local VECTORS = {
  "SELECT c.id, VectorDistance(c.v, " .. VQ .. ") AS s FROM c",
  "SELECT c.id, VectorDistance(c.v, " .. VQ .. ", true, {'distanceFunction': 'dotproduct'}) AS s FROM c",
  "SELECT c.id, VectorDistance(c.v, " .. VQ .. ", false, {'distanceFunction': 'euclidean', 'dataType': 'float16'}) AS s FROM c",
  "SELECT c.id, VectorDistance(c.e, [1, -2, 3, 40]) AS s, VectorDistance(c.e, [1, -2, 3, 40], false, {'dataType': 'uint8'}) AS u FROM c",
  "SELECT c.id, VectorDistance(c.v, " .. VQ .. ") AS s FROM c ORDER BY VectorDistance(c.v, " .. VQ .. ")",
  "SELECT TOP 10 c.id, VectorDistance(c.v, " .. VQ .. ") AS s FROM c ORDER BY VectorDistance(c.v, " .. VQ .. ")",
  "SELECT TOP 10 c.id, VectorDistance(c.v, " .. VQ .. ", true) AS s FROM c ORDER BY VectorDistance(c.v, " .. VQ .. ", true)",
  "SELECT TOP 12 c.id, VectorDistance(c.e, [5, 5, -5, 0]) AS s FROM c ORDER BY VectorDistance(c.e, [5, 5, -5, 0])",
  "SELECT TOP 8 c.id, c.n, VectorDistance(c.v, " .. VQ .. ") AS s FROM c WHERE c.n > 10 ORDER BY VectorDistance(c.v, " .. VQ .. ")",
  "SELECT TOP 5 c.id, VectorDistance(c.v, " .. VQ .. ") AS s FROM c WHERE c.pk = 'p3' ORDER BY VectorDistance(c.v, " .. VQ .. ")",
  "SELECT c.id, VectorDistance(c.v, " .. VQ .. ") AS s FROM c WHERE VectorDistance(c.v, " .. VQ .. ") > 0.3 ORDER BY VectorDistance(c.v, " .. VQ .. ")",
  "SELECT TOP 10 c.id, VectorDistance(c.v, " .. VQ .. ", false, {'distanceFunction': 'euclidean', 'searchListSizeMultiplier': 2, "
    .. "'quantizedVectorListMultiplier': 3, 'filterPriority': 0}) AS s FROM c ORDER BY VectorDistance(c.v, " .. VQ
    .. ", false, {'distanceFunction': 'euclidean', 'searchListSizeMultiplier': 2, 'quantizedVectorListMultiplier': 3, 'filterPriority': 0})",
}

local VPARAMS = {
  { "SELECT TOP 7 c.id, VectorDistance(c.v, @q, @bf, @o) AS s FROM c WHERE c.pk IN ('p1', 'p2') ORDER BY VectorDistance(c.v, @q, @bf, @o)",
    { ["@q"] = { 1, 0, 0, 0, 0, 0, 0, 1 }, ["@bf"] = false, ["@o"] = { distanceFunction = "dotproduct" } } },
}

describe("the query language on a cluster", function()
  if not C.ready(pending) then return end

  local sides = {}

  setup(function()
    for _, path in ipairs({ H.tmpdir(), "redis://" .. C.seeds .. "/" .. C.fresh_db() }) do
      local db = assert(regolith.open(path, { sync = "none" }))
      local c = assert(db:create_container("items", { partition_key = "/pk",
        physical_partitions = 8,
        indexing = { composite = { { { path = "/cat" }, { path = "/price", order = "descending" } },
                                   { { path = "/cat" }, { path = "/price" } } } },
        computed_properties = {
          { name = "cp_lower", query = "SELECT VALUE LOWER(c.name) FROM c" },
          { name = "cp_family", query = "SELECT VALUE SUBSTRING(c.cat, 0, INDEX_OF(c.cat, ',')) FROM c" },
        } }))
      assert(c:create_udf("net", "return function(p) return p and p * 0.8 end"))
      assert(c:create_udf("boom", "return function(p) error('no price ' .. p) end"))
      local rand = C.rng(4242)
      for i = 1, 600 do assert(c:upsert(item(rand, i))) end
      local h = assert(db:create_container("h", { partition_key = { "/tenant", "/user" },
        physical_partitions = 4 }))
      for i = 1, 120 do
        assert(h:create({ id = "h" .. i, tenant = "t" .. (i % 5), user = i % 3, v = (i * 37) % 101 }))
      end
      local v = assert(db:create_container("vec", { partition_key = "/pk",
        physical_partitions = 8, vector_embeddings = {
          { path = "/v", dimensions = 8 },
          { path = "/e", data_type = "int8", dimensions = 4, distance_function = "euclidean" } } }))
      rand = C.rng(777)
      for i = 1, 300 do assert(v:create(vitem(rand, i))) end
      sides[#sides + 1] = { db = db, c = c, h = h, vec = v, url = path }
    end
  end)

  teardown(function()
    for _, s in ipairs(sides) do s.db:close() end
    H.cleanup()
  end)

  -- Every row of a query, page by page (max_items `size`, nil: whole):
  -- its text, and its sort key, made of its values of the ORDER BY fields
  -- `by` (a value that ranks as undefined, missing, an array or an
  -- object, as one).
  local function all(c, sql, params, size, by)
    local out, cont, pages = { infos = {} }, nil, 0
    repeat
      local rows, info, st = c:query(sql, params, { max_items = size, continuation = cont })
      assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(st)))
      out.infos[#out.infos + 1] = info
      for _, r in ipairs(rows) do
        local key = {}
        for i, f in ipairs(by) do
          local v = type(r) == "table" and r[f]
          key[i] = (v == nil or (type(v) == "table" and v ~= regolith.null)) and "U" or text(v)
        end
        out[#out + 1] = { text = text(r), key = table.concat(key, "|") }
      end
      cont = info.continuation
      pages = pages + 1
      assert(pages < 2000, "paging does not end: " .. sql)
    until not cont
    return out
  end

  -- The rows' texts in order, but for the order within each run of equal
  -- sort keys: ties are broken by partition and identity, in a direction
  -- that depends on the plan (a composite index's column order, or the
  -- source of the items whose value ranks as undefined), so such a run is
  -- compared as a set.  Without ORDER BY, the rows as a set.
  local function sequence(rows, ordered)
    local out, i = {}, 1
    while i <= #rows do
      local j = i
      while ordered and j < #rows and rows[j + 1].key == rows[i].key do j = j + 1 end
      local run = {}
      for k = i, j do run[#run + 1] = rows[k].text end
      table.sort(run)
      for _, t in ipairs(run) do out[#out + 1] = t end
      i = j + 1
    end
    if not ordered then table.sort(out) end
    return out
  end

  local function same(which, sql, params)
    local order = sql:match("ORDER BY (.-) OFFSET") or sql:match("ORDER BY (.*)$")
    local by = {}
    if order and order:find("VectorDistance", 1, true) then by = { "s" }    -- its projected score
    else for f in (order or ""):gmatch("c%.([%w_]+)") do by[#by + 1] = f end end
    for _, size in ipairs({ false, 7 }) do
      local ra = all(sides[1][which], sql, params, size or nil, by)
      local rb = all(sides[2][which], sql, params, size or nil, by)
      local a = sequence(ra, order ~= nil)
      local b = sequence(rb, order ~= nil)
      assert.are.equal(#a, #b, sql)
      assert.are.same(a, b, sql .. (size and " (pages of 7)" or ""))
      -- the same plan and work, page by page, so the same charge but for
      -- the bytes of _lsn and _etag, which are a clock on a cluster (at
      -- most 40 bytes more an item, at 0.1 RU a KB loaded: docs/cluster.md,
      -- Weaker than local mode)
      assert.are.equal(#ra.infos, #rb.infos, sql)
      for i, ia in ipairs(ra.infos) do
        local ib = rb.infos[i]
        for _, k in ipairs({ "count", "loaded", "index_lookups", "partitions", "scanned" }) do
          assert.are.equal(ia[k], ib[k], ("%s: page %d's %s"):format(sql, i, k))
        end
        local extra = ib.charge - ia.charge
        assert.is_true(extra >= -0.05 and extra <= 0.05 + 0.1 * (ia.loaded or 0) * 40 / 1024,
          ("%s: page %d charged %.2f locally, %.2f on the cluster"):format(sql, i, ia.charge, ib.charge))
      end
    end
  end

  it("answers every query alike, whole and page by page", function()
    for _, sql in ipairs(QUERIES) do same("c", sql) end
    for _, p in ipairs(PARAMS) do same("c", p[1], p[2]) end
  end)

  it("routes a hierarchical key's prefix alike", function()
    for _, sql in ipairs(HIER) do same("h", sql) end
  end)

  it("scores and ranks vectors alike: every option, in a partition and fanned out", function()
    for _, sql in ipairs(VECTORS) do same("vec", sql) end
    for _, p in ipairs(VPARAMS) do same("vec", p[1], p[2]) end
  end)

  -- Vector indexes: a cluster keeps one instance per bucket, beside the
  -- bucket's items, and merges each bucket's best k.  At this size (no
  -- bucket reaches the 1,000 vectors codes wait for) every kind reads the
  -- exact vectors, so every kind answers as a local one: rows, order,
  -- scores, work and charge; a quantizedFlat or diskANN index larger than
  -- that ranks each bucket's candidates on their codes or graph, then
  -- re-ranks on the exact vectors (docs/cluster.md: recall per bucket).
  local VINDEXED = { VECTORS[5], VECTORS[6], VECTORS[7], VECTORS[8], VECTORS[9],
    VECTORS[10], VECTORS[11], VECTORS[12] }

  -- 300 items of vitem's, from a seed
  local function vitems(seed)
    local rand, items = C.rng(seed), {}
    for i = 1, 300 do items[i] = vitem(rand, i) end
    return items
  end

  local function vspec(kind)
    return { partition_key = "/pk", physical_partitions = 8, vector_embeddings = {
        { path = "/v", dimensions = 8 },
        { path = "/e", data_type = "int8", dimensions = 4, distance_function = "euclidean" } },
      indexing = { vector_indexes = { { path = "/v", type = kind }, { path = "/e", type = kind } } } }
  end

  for _, kind in ipairs({ "flat", "quantizedFlat", "diskANN" }) do
    it(("keeps a %s index per bucket and ranks alike, kept by every write"):format(kind), function()
      local name = "vix_" .. kind
      local items = vitems(777)
      for _, side in ipairs(sides) do
        local k = assert(side.db:create_container(name, vspec(kind)))
        for i = 1, 300 do assert(k:create(items[i])) end
        -- replace, upsert, patch, delete, a batch: the index follows each
        assert(k:replace({ id = "v001", pk = items[1].pk, v = { 0.3, -0.2, 0.9, 0.1, -0.5, 0.4, 0.05, -0.7 } }))
        assert(k:upsert({ id = "v002", pk = items[2].pk, v = { -0.3, 0.2, -0.9, 0, 0, 0, 0, 0.7 } }))
        assert(k:patch("v003", items[3].pk, { { op = "set", path = "/v", value = { 0.3, -0.2, 0.8, 0.1, -0.5, 0.4, 0.05, -0.7 } } }))
        assert(k:patch("v004", items[4].pk, { { op = "remove", path = "/e" } }))
        assert(k:delete("v005", items[5].pk))
        assert(k:batch(items[6].pk, { { op = "delete", id = "v006" },
          { op = "create", doc = { id = "w006", pk = items[6].pk, v = { 0.3, -0.2, 0.9, 0.1, -0.5, 0.4, 0.06, -0.7 } } } }))
        side[name] = k
      end
      for _, sql in ipairs(VINDEXED) do same(name, sql) end
      for _, p in ipairs(VPARAMS) do same(name, p[1], p[2]) end
      -- the same ranking as a scan of the same items
      for _, sql in ipairs({ VECTORS[6], VECTORS[9], VECTORS[10] }) do
        assert.are.same(assert(sides[1][name]:query(sql)), assert(sides[2][name]:query(sql)), sql)
      end
      assert.is_true(sides[2].db:verify())
      assert(sides[2].db:delete_container(name))
      assert(sides[1].db:delete_container(name))
    end)
  end

  -- A search naming one shard key value reads that value's instance in
  -- each bucket (RG_VSHARD_AT(shard, bucket)), not every instance.
  it("searches one shard key value's instances alike", function()
    local items = vitems(31)
    for _, side in ipairs(sides) do
      local spec = vspec("quantizedFlat")
      spec.indexing.vector_indexes = { { path = "/v", type = "quantizedFlat", shard_key = { "/n" } } }
      local k = assert(side.db:create_container("vsh", spec))
      for i = 1, 300 do assert(k:create(items[i])) end
      side.vsh = k
    end
    for _, n in ipairs({ 7, 13 }) do
      same("vsh", ("SELECT TOP 6 c.id, VectorDistance(c.v, %s) AS s FROM c WHERE c.n = %d ORDER BY VectorDistance(c.v, %s)"):format(VQ, n, VQ))
    end
    local sql = "SELECT TOP 6 c.id, c.n FROM c WHERE c.n = 7 ORDER BY VectorDistance(c.v, " .. VQ .. ")"
    local a, ai = assert(sides[1].vsh:query(sql))
    local b, bi = assert(sides[2].vsh:query(sql))
    assert.are.same(a, b)
    for _, r in ipairs(b) do assert.are.equal(7, r.n) end
    -- that value's instances alone: a fraction of what every value's read
    -- (each bucket's instance reads its own vectors: not a local one's count)
    local _, all_i = assert(sides[2].vsh:query(
      "SELECT TOP 6 c.id FROM c ORDER BY VectorDistance(c.v, " .. VQ .. ")"))
    assert.is_true(ai.vector_bytes > 0 and bi.vector_bytes > 0)
    assert.is_true(bi.vector_bytes < all_i.vector_bytes / 4, ("%d of %d"):format(bi.vector_bytes, all_i.vector_bytes))
    assert.is_true(sides[2].db:verify())
    for _, side in ipairs(sides) do assert(side.db:delete_container("vsh")) end
  end)

  -- An entry written into a bucket's table behind the engine's back (the
  -- table's hash h and zset z): verify reports it (`what`), and once it is
  -- gone verify passes again.  Closes the client c.
  local function stray_found(c, h, z, stray, what)
    assert(c:call("HSET", h, stray, "x"))
    assert(c:call("ZADD", z, 0, stray))
    local ok, report = sides[2].db:verify()
    assert.is_nil(ok)
    assert.matches(what, report, 1, true)
    assert(c:call("HDEL", h, stray))
    assert(c:call("ZREM", z, stray))
    c:close()
    assert.is_true(sides[2].db:verify())
  end

  it("fills a vector index a replace adds on the cluster and empties one it removes", function()
    local items = vitems(777)
    for _, side in ipairs(sides) do
      local spec = vspec("flat")
      spec.indexing = nil
      local k = assert(side.db:create_container("vr", spec))
      for i = 1, 300 do assert(k:create(items[i])) end
      assert(side.db:replace_container("vr", vspec("diskANN")))
      side.vr = side.db:container("vr")
    end
    for _, sql in ipairs({ VECTORS[6], VECTORS[8], VECTORS[10] }) do same("vr", sql) end
    assert.is_true(sides[2].db:verify())
    -- a bucket's instance: its header's lsn is the one the bucket stamped
    -- (not the engine's stand-in), and verify finds an entry no index needs
    local c = C.client()
    local cid, bucket, buckets = sides[2].vr:_remote_bucket(items[1].pk)
    local keys = layout.place_keys(sides[2].url:match("/([^/]+)$"), cid, bucket, buckets)
    local h, z, v = keys[10], keys[layout.TABLES + 10], keys[2 * layout.TABLES + 1]
    local all, header = assert(c:call("HGETALL", h)), nil
    for i = 1, #all, 2 do if #all[i] == 17 then header = all[i + 1] end end
    assert.is_string(header)
    local gen = 0
    for j = 25, 32 do gen = gen * 256 + header:byte(j) end
    assert.are.equal(tonumber(assert(c:call("HGET", v, "lsn"))), gen)
    stray_found(c, h, z, all[1]:sub(1, 16) .. "q", "entries no vector index needs")
    local spec = vspec("flat")
    spec.indexing = nil
    assert(sides[2].db:replace_container("vr", spec))
    assert.is_true(sides[2].db:verify())     -- no entry of the index is left
    assert(sides[2].db:delete_container("vr"))
  end)

  -- Full-text indexes: a cluster keeps one instance per bucket, beside the
  -- bucket's items; FullTextContains* read the union of the buckets'
  -- candidates, FullTextScore (the container's scope) scores with the
  -- buckets' statistics summed, ORDER BY RANK merges each bucket's best k
  -- so scored.  Rows, order, scores and the plan's work are a local
  -- index's; the charge is too but for the index records read, which a
  -- cluster reads per bucket (each bucket's statistics and blocks: 0.01 RU
  -- a record, docs/cluster.md), compared exactly.
  local FWORDS = { "bell", "lamp", "saddle", "rope", "lantern", "kettle", "anchor", "compass" }
  local function ftitem(rand, i)
    local t = {}
    for j = 1, rand(9) + 2 do t[j] = FWORDS[rand(rand(#FWORDS))] end
    return { id = ("f%03d"):format(i), pk = "p" .. rand(12), text = table.concat(t, " ") }
  end
  local FTQ = {
    "SELECT c.id, FullTextScore(c.text, 'bell', 'lamp') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')",
    "SELECT TOP 10 c.id, FullTextScore(c.text, 'rope', 'anchor') AS s FROM c WHERE FullTextContainsAll(c.text, 'rope', 'anchor') ORDER BY RANK FullTextScore(c.text, 'rope', 'anchor')",
    "SELECT TOP 10 c.id, FullTextScore(c.text, 'kettle', 'compass') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'kettle', 'compass')",
    "SELECT c.id, FullTextScore(c.text, 'saddle') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'saddle') OFFSET 3 LIMIT 9",
    "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'lantern')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'bell', 'rope')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'compass', 'kettles') AND c.pk != 'p3'",
    "SELECT c.id, FullTextScore(c.text, 'bell') AS s FROM c WHERE c.pk = 'p5' ORDER BY RANK FullTextScore(c.text, 'bell')",
  }

  local function ftsame(name, label)
    for _, sql in ipairs(FTQ) do
      local order = sql:find("ORDER BY RANK", 1, true) ~= nil
      for _, size in ipairs({ false, 4 }) do
        local ra = all(sides[1][name], sql, nil, size or nil, order and { "s" } or {})
        local rb = all(sides[2][name], sql, nil, size or nil, order and { "s" } or {})
        assert.are.same(sequence(ra, order), sequence(rb, order),
          label .. ": " .. sql .. (size and " (pages of 4)" or ""))
        assert.are.equal(#ra.infos, #rb.infos, sql)
        for i, ia in ipairs(ra.infos) do
          local ib = rb.infos[i]
          for _, k in ipairs({ "count", "loaded", "index_lookups", "partitions", "scanned", "full_text_loaded" }) do
            assert.are.equal(ia[k], ib[k], ("%s: %s: page %d's %s"):format(label, sql, i, k))
          end
          if not sql:find("'p5'", 1, true) then
            assert.is_true((ib.full_text_read or 0) > 0, sql)
          end
          local extra = ib.charge - ia.charge - 0.01 * ((ib.full_text_read or 0) - (ia.full_text_read or 0))
          assert.is_true(extra >= -0.05 and extra <= 0.05 + 0.1 * (ia.loaded or 0) * 40 / 1024,
            ("%s: %s: page %d charged %.2f locally, %.2f on the cluster (full-text records %s, %s)"):format(
              label, sql, i, ia.charge, ib.charge, tostring(ia.full_text_read), tostring(ib.full_text_read)))
        end
      end
    end
    -- the per-partition scope: that partition's statistics (a scan of it)
    local sql = "SELECT c.id, FullTextScore(c.text, 'lamp') AS s FROM c WHERE c.pk = 'p2' ORDER BY RANK FullTextScore(c.text, 'lamp')"
    local a = assert(sides[1][name]:query(sql, nil, { full_text_score_scope = "local" }))
    local b = assert(sides[2][name]:query(sql, nil, { full_text_score_scope = "local" }))
    assert.are.same(a, b, label .. ": the local scope")
  end

  local function ftspec(indexed)
    return { partition_key = "/pk", physical_partitions = 8,
      full_text = { paths = { { path = "/text" } } },
      indexing = indexed and { full_text = { "/text" } } or nil }
  end

  it("keeps a full-text index per bucket and searches and ranks alike, kept by every write", function()
    local rand = C.rng(99)
    local items = {}
    for i = 1, 240 do items[i] = ftitem(rand, i) end
    for _, side in ipairs(sides) do
      local k = assert(side.db:create_container("ft", ftspec(true)))
      local bulk = {}
      for i = 1, 120 do bulk[i] = items[i] end
      assert(k:bulk_load(bulk))
      for i = 121, 240 do assert(k:create(items[i])) end
      side.ft = k
    end
    ftsame("ft", "after a bulk load and creates")
    for _, side in ipairs(sides) do
      local k = side.ft
      assert(k:replace({ id = "f001", pk = items[1].pk, text = "bell bell lamp lamp lamp" }))
      assert(k:upsert({ id = "f002", pk = items[2].pk, text = "rope anchor rope" }))
      assert(k:upsert({ id = "new", pk = "p4", text = "kettle compass kettle" }))
      assert(k:patch("f003", items[3].pk, { { op = "set", path = "/text", value = "saddle lantern" } }))
      assert(k:patch("f004", items[4].pk, { { op = "remove", path = "/text" } }))
      assert(k:delete("f005", items[5].pk))
      assert(k:batch(items[6].pk, { { op = "delete", id = "f006" },
        { op = "create", doc = { id = "g006", pk = items[6].pk, text = "bell rope anchor" } } }))
      assert(k:create_procedure("put", [[return function(ctx, doc) assert(ctx:create(doc)) return true end]]))
      assert(k:execute("put", "p7", { id = "proc", pk = "p7", text = "lantern lantern bell" }))
      assert(k:create_trigger("louder", { type = "pre", source = [[
        return function(ctx)
          local doc = ctx:body()
          doc.text = doc.text .. " saddle"
          ctx:set_body(doc)
        end]] }))
      assert(k:upsert({ id = "trig", pk = "p8", text = "compass" }, { pre_trigger = "louder" }))
    end
    ftsame("ft", "after every kind of write")
    assert.is_true(sides[2].db:verify())
    -- a stray record in a bucket's table: an index the container lacks
    local c = C.client()
    local cid, bucket, buckets = sides[2].ft:_remote_bucket(items[1].pk)
    local keys = layout.place_keys(sides[2].url:match("/([^/]+)$"), cid, bucket, buckets)
    local h, z = keys[11], keys[layout.TABLES + 11]
    local some = assert(c:call("HKEYS", h))[1]
    assert.is_string(some)
    stray_found(c, h, z, some:sub(1, 4) .. "\0\0\0\1" .. some:sub(9, 10) .. "S",
      "records of an index it does not have")
    for _, side in ipairs(sides) do assert(side.db:delete_container("ft")) end
    -- nothing of the dropped container is left in its buckets' tables
    c = C.client()
    assert.are.equal(0, assert(c:call("HLEN", h)))
    c:close()
  end)

  it("builds a full-text index a replace adds on the cluster and drops one it removes", function()
    local rand = C.rng(5)
    local items = {}
    for i = 1, 150 do items[i] = ftitem(rand, i) end
    for _, side in ipairs(sides) do
      local k = assert(side.db:create_container("ftr", ftspec(false)))
      for i = 1, 150 do assert(k:create(items[i])) end
      assert(side.db:replace_container("ftr", ftspec(true)))
      side.ftr = side.db:container("ftr")
    end
    ftsame("ftr", "after a replace added the index")
    assert.is_true(sides[2].db:verify())
    for _, side in ipairs(sides) do
      assert(side.db:replace_container("ftr", ftspec(false)))
      side.ftr = side.db:container("ftr")
    end
    local c = C.client()
    local cid, bucket, buckets = sides[2].ftr:_remote_bucket(items[1].pk)
    local keys = layout.place_keys(sides[2].url:match("/([^/]+)$"), cid, bucket, buckets)
    assert.are.equal(0, assert(c:call("HLEN", keys[11])))   -- no entry is left
    c:close()
    assert.is_true(sides[2].db:verify())
    local sql = "SELECT c.id, FullTextScore(c.text, 'bell') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'bell')"
    assert.are.same(assert(sides[1].ftr:query(sql)), assert(sides[2].ftr:query(sql)))
    for _, side in ipairs(sides) do assert(side.db:delete_container("ftr")) end
  end)

  it("fails alike: the same status and message", function()
    for _, sql in ipairs({
      "SELECT VALUE udf.absent(1)",
      "SELECT c.id FROM c GROUP BY c.cat",
      "SELECT VALUE udf.boom(c.price) FROM c",
      "SELECT * FROM c ORDER BY",
      "SELECT VALUE StringToNumber(c.id) FROM c OFFSET -1 LIMIT 2",
    }) do
      local r1, m1, s1 = sides[1].c:query(sql)
      local r2, m2, s2 = sides[2].c:query(sql)
      assert.is_nil(r1, sql)
      assert.is_nil(r2, sql)
      assert.are.equal(s1, s2, sql)
      assert.are.equal(m1, m2, sql)
    end
  end)

  it("reads an index in ORDER BY order: a TOP loads what it returns, in either direction", function()
    local _, info = assert(sides[2].c:query("SELECT TOP 5 c.id FROM c ORDER BY c.price DESC"))
    assert.are.equal(5, info.loaded)
    _, info = assert(sides[2].c:query("SELECT TOP 5 c.id FROM c WHERE c.price > 10 ORDER BY c.price"))
    assert.are.equal(5, info.loaded)
    -- ascending without a WHERE proving a value: the shapes say no item
    -- lacks price, on a cluster as locally (the same engine keeps them)
    _, info = assert(sides[2].c:query("SELECT TOP 5 c.id FROM c ORDER BY c.price"))
    assert.are.equal(5, info.loaded)
  end)
end)
