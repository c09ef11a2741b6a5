-- The search benchmark, vector part: the note's data (search_data: a
-- seeded mixture of Gaussians, 100,000 x 128-d and 1,000 queries, k = 10)
-- searched at the C level (search_c: flat, quantizedFlat, the diskANN
-- graph), by hnswlib and FAISS on the same files in the same run
-- (search_anchor.py under /usr/bin/python3, Debian's python3-hnswlib and
-- python3-faiss), and through the SQL API from Lua (what a user gets).
-- One query at a time, one thread, timed in CPU time (os.clock).
--
--   lua5.4 examples/bench/search.lua [--n N] [--queries Q] [--sql-queries S]
--                                    [--dir DIR] [--filtered-only]
--
-- Prints each measurement as it comes (a SQL row: the mean charge, the
-- median and p99 of a query's time), then a table.  --filtered-only: the
-- data made before in DIR, through the SQL API alone, diskANN with
-- filters (to compare two builds in one run).

local regolith = require "regolith"

local N, Q, SQLQ, DIR = 100000, 1000, 200, "build/bench/search"
local FILTERED_ONLY = false
do
  local i = 1
  while arg[i] do
    local a, v = arg[i], arg[i + 1]
    i = i + 2
    if a == "--filtered-only" then FILTERED_ONLY = true; i = i - 1
    elseif a == "--n" then N = tonumber(v)
    elseif a == "--queries" then Q = tonumber(v)
    elseif a == "--sql-queries" then SQLQ = tonumber(v)
    elseif a == "--dir" then DIR = v
    else error("unknown argument " .. a) end
  end
end
local K, D = 10, 128

local function sh(cmd)
  local ok = os.execute(cmd)
  if ok ~= true and ok ~= 0 then error("failed: " .. cmd) end
end

local function lines(cmd)
  local out = {}
  local p = assert(io.popen(cmd, "r"))
  for line in p:lines() do
    local row = line:match("^{.*}$") and regolith.json.decode(line)
    if row then out[#out + 1] = row; print(line) end
  end
  p:close()
  return out
end

local results = {}
if not FILTERED_ONLY then
  sh("mkdir -p " .. DIR)
  sh(("build/bench/search_data %s %d %d %d 42"):format(DIR, N, Q, D))
  for _, r in ipairs(lines("build/bench/search_c " .. DIR .. " " .. K)) do
    results[#results + 1] = r
  end
  for _, r in ipairs(lines("/usr/bin/python3 examples/bench/search_anchor.py "
                           .. DIR .. " " .. K)) do
    results[#results + 1] = r
  end
end

-- The SQL API: the same vectors as items, the same queries
local function floats(path, count)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  local out, pos = {}, 1
  for i = 1, count do
    local v = {}
    for j = 1, D do
      v[j], pos = string.unpack("<f", data, pos)
    end
    out[i] = v
  end
  return out
end
local function truth(path, count, width)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  local out = {}
  for i = 1, count do
    local t = {}
    for j = 1, K do
      t[j] = string.unpack("<I4", data, ((i - 1) * (width or 100) + j - 1) * 4 + 1)
    end
    out[i] = t
  end
  return out
end

local base = floats(DIR .. "/base.f32", N)
local queries = floats(DIR .. "/query.f32", SQLQ)
local exact = truth(DIR .. "/truth.u32", SQLQ)
local results_sql_start = #results

local dbdir = DIR .. "/db"
sh("rm -rf " .. dbdir)
local db = assert(regolith.open(dbdir, { sync = "none" }))

local function sql_run(c, name, sql, nq, params, truth_of)
  local hits, t, charge, ms = 0, os.clock(), 0, {}
  for i = 1, nq do
    local p = { q = queries[i] }
    for k, v in pairs(params or {}) do p[k] = v end
    local t1 = os.clock()
    local rows, info = assert(c:query(sql, p))
    ms[i] = (os.clock() - t1) * 1000
    charge = charge + info.charge
    local want = {}
    for _, id in ipairs((truth_of or exact)[i]) do want[tostring(id)] = true end
    for _, id in ipairs(rows) do if want[id] then hits = hits + 1 end end
  end
  t = os.clock() - t
  table.sort(ms)
  local r = { test = name, recall = hits / (nq * K), qps = nq / t,
              queries = nq, charge = math.floor(charge / nq * 100 + 0.5) / 100,
              p50_ms = math.floor(ms[math.max(1, math.ceil(nq * 0.5))] * 100 + 0.5) / 100,
              p99_ms = math.floor(ms[math.max(1, math.ceil(nq * 0.99))] * 100 + 0.5) / 100 }
  print(regolith.json.encode(r))
  results[#results + 1] = r
end

local function load(kind)
  local spec = { partition_key = "/pk", physical_partitions = 1,
    vector_embeddings = { { path = "/v", data_type = "float32", dimensions = D,
                            distance_function = "euclidean" } } }
  if kind then spec.indexing = { vector_indexes = { { path = "/v", type = kind } } } end
  local c = assert(db:create_container(kind or "none", spec))
  local t0 = os.clock()
  local batch = {}
  for i = 1, N do
    batch[#batch + 1] = { id = tostring(i - 1), pk = "p" .. (i % 16), v = base[i],
                          tag = (i - 1) % 100 }
    if #batch == 1000 or i == N then
      assert(c:bulk_load(batch))
      batch = {}
    end
  end
  local t = os.clock() - t0
  local r = { test = "sql load " .. (kind or "no index"), vectors = N,
              seconds = t, per_second = N / t }
  print(regolith.json.encode(r))
  results[#results + 1] = r
  return c
end

local TOP = "SELECT TOP 10 VALUE c.id FROM c ORDER BY VectorDistance(c.v, @q%s)"
local c
if not FILTERED_ONLY then
  c = load(nil)
  sql_run(c, "sql no index (scan)", TOP:format(""), math.min(SQLQ, 5))
  c = load("flat")
  sql_run(c, "sql flat", TOP:format(""), SQLQ)
  c = load("quantizedFlat")
  sql_run(c, "sql quantizedFlat", TOP:format(""), SQLQ)
end
c = load("diskANN")
for _, m in ipairs(FILTERED_ONLY and {} or { 1, 2, 4, 10 }) do
  sql_run(c, "sql diskANN x" .. m, TOP:format(", false, @o"), SQLQ,
          { o = { searchListSizeMultiplier = m } })
end
-- filtered: the items whose number modulo 100 is below keep % (as search_c
-- filters them; its exact top 10s), c.tag range-indexed as every path is
for _, keep in ipairs({ 1, 10, 50 }) do
  local ft = truth(("%s/truth_keep%d.u32"):format(DIR, keep), SQLQ, K)
  local sql = "SELECT TOP 10 VALUE c.id FROM c WHERE c.tag < @keep "
    .. "ORDER BY VectorDistance(c.v, @q%s)"
  sql_run(c, ("sql diskANN, filter keeping %d %%"):format(keep), sql:format(""),
          SQLQ, { keep = keep }, ft)
  sql_run(c, ("sql diskANN, filter keeping %d %%, filterPriority 0"):format(keep),
          sql:format(", false, {'filterPriority': 0}"), SQLQ, { keep = keep }, ft)
end
assert(db:verify())
db:close()
sh("rm -rf " .. dbdir)

print()
print(("%-28s %8s %10s %s"):format("test", "recall", "queries/s", "other"))
for _, r in ipairs(results) do
  local other = {}
  for k, v in pairs(r) do
    if k ~= "test" and k ~= "recall" and k ~= "qps" then
      other[#other + 1] = k .. "=" .. tostring(v)
    end
  end
  table.sort(other)
  print(("%-28s %8s %10s %s"):format(r.test, r.recall and ("%.4f"):format(r.recall) or "",
    r.qps and ("%.0f"):format(r.qps) or "", table.concat(other, " ")))
end
