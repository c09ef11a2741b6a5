--[[
blog.sqlite_json: SQLite holding the same JSON documents as a regolith
model, with expression indexes on the same paths, for comparing sizes and
load rates (the normalized schema of blog.sqlite answers the requests;
this one measures storage).

Each container of the model is one table

    CREATE TABLE posts (id INTEGER PRIMARY KEY, pk TEXT NOT NULL,
                        item TEXT NOT NULL, doc TEXT NOT NULL,
                        UNIQUE (pk, item))

holding the document's JSON text as the model stores it, system properties
included (_etag, _ts and _lsn, written as regolith writes them), and one
partial expression index per path regolith indexes there (json_extract,
on the rows holding the path): every scalar path of the documents but
_etag and _lsn, long text cut at 200 characters as regolith cuts its
terms, and the model's composite indexes.  The indexes
exist before the load, as regolith keeps its own during a load: the load
is SQLite's JSON-with-indexes load.  It runs in transactions of the same
number of documents as regolith's bulk-load batches, with synchronous OFF
and WAL, multi-row INSERTs (luasql has no prepared statements).

    local sj = require "blog.sqlite_json"
    local st = sj.load(path, model, gen, { batch = 20000 })
    -- st = {items, seconds, bytes, tables = {name = bytes}}
]]

local driver = require "luasql.sqlite3"
local regolith = require "regolith"
local system = require "system"

local M = {}

local encode = regolith.json.encode
local CUT = 200                 -- regolith's term limit, in characters

-- blog.sqlite's statement helpers, on this connection.
local sqlite = require "blog.sqlite"
local function exec(conn, sql) return sqlite.exec({ conn = conn }, sql) end
local function rows(conn, sql) return sqlite.rows({ conn = conn }, sql) end

-- The SQL of a path's value: json_extract; long text (the paths in
-- `long`) cut as regolith cuts its terms.
local long = {}
local function value_sql(path)
  if long[path] then
    return ("substr(json_extract(doc, '$.%s'), 1, %d)"):format(path, CUT)
  end
  return ("json_extract(doc, '$.%s')"):format(path)
end

-- Creates a container's table and the indexes on `paths` and composites.
local function create(conn, name, paths, composites)
  exec(conn, ("CREATE TABLE %s (id INTEGER PRIMARY KEY, pk TEXT NOT NULL, " ..
    "item TEXT NOT NULL, doc TEXT NOT NULL, UNIQUE (pk, item))"):format(name))
  for _, p in ipairs(paths) do
    exec(conn, ("CREATE INDEX %s_%s ON %s (%s) WHERE json_extract(doc, " ..
      "'$.%s') IS NOT NULL"):format(name, p, name, value_sql(p), p))
  end
  for i, comp in ipairs(composites or {}) do
    local cols, conds = {}, {}
    for j, c in ipairs(comp) do
      local p = c.path:sub(2)
      cols[j] = value_sql(p) .. (c.order == "descending" and " DESC" or "")
      conds[j] = ("json_extract(doc, '$.%s') IS NOT NULL"):format(p)
    end
    exec(conn, ("CREATE INDEX %s_composite%d ON %s (%s) WHERE %s"):format(name,
      i, name, table.concat(cols, ", "), table.concat(conds, " AND ")))
  end
end

-- The scalar paths (top-level: the blog's documents are flat) of a
-- sample of documents, as regolith indexes them (not _etag, _lsn).
local function paths_of(sample)
  local seen, out = {}, {}
  for _, doc in ipairs(sample) do
    for k, v in pairs(doc) do
      if not seen[k] and k ~= "_etag" and k ~= "_lsn" and type(v) ~= "table" then
        seen[k] = true
        out[#out + 1] = k
      end
      if type(v) == "string" and #v > CUT then long[k] = true end
    end
  end
  table.sort(out)
  return out
end

-- Loads the documents model:bulk_sources(gen) gives into a new SQLite
-- database at path; returns {items, seconds, bytes, tables}.
function M.load(path, model, gen, opts)
  opts = opts or {}
  local batch = opts.batch or 20000
  os.remove(path)
  os.remove(path .. "-wal")
  os.remove(path .. "-shm")
  local env = assert(driver.sqlite3())
  local conn = assert(env:connect(path))
  exec(conn, "PRAGMA journal_mode = WAL")
  exec(conn, "PRAGMA synchronous = OFF")
  local items, lsn = 0, 0
  local t0 = system.monotime()       -- the generator's time counts, as in
                                     -- regolith's load
  for _, src in ipairs(model:bulk_sources(gen)) do
    local spec = src.container:spec()
    local name = spec.name
    local pkpath = type(spec.partition_key) == "table" and
      spec.partition_key[1] or spec.partition_key
    local pkfield = pkpath:sub(2)
    local docs, pending, created = src.docs, {}, false
    local function flush()
      if #pending == 0 then return end
      if not created then
        local paths = paths_of(pending)
        paths[#paths + 1] = "_ts"        -- set below, indexed as regolith does
        create(conn, name, paths, spec.indexing and spec.indexing.composite)
        created = true
      end
      conn:setautocommit(false)
      lsn = lsn + 1
      local ts = os.time()
      local values = {}
      local function insert()
        exec(conn, ("INSERT INTO %s (pk, item, doc) VALUES %s"):format(name,
          table.concat(values, ",")))
        values = {}
      end
      for i, doc in ipairs(pending) do
        doc._etag = ('"%x-%x"'):format(lsn, i - 1)
        doc._ts, doc._lsn = ts, lsn
        values[#values + 1] = ("('%s','%s','%s')"):format(
          conn:escape(tostring(doc[pkfield])), conn:escape(doc.id),
          conn:escape(encode(doc)))
        if #values == 200 then insert() end
      end
      if #values > 0 then insert() end
      conn:commit()
      conn:setautocommit(true)
      items = items + #pending
      if opts.progress then opts.progress(items) end
      pending = {}
    end
    for doc in docs do
      pending[#pending + 1] = doc
      if #pending == batch then flush() end
    end
    flush()
  end
  exec(conn, "PRAGMA wal_checkpoint(TRUNCATE)")
  local seconds = system.monotime() - t0
  local tables, total = {}, 0
  for _, r in ipairs(rows(conn, "SELECT name, SUM(pgsize) AS bytes FROM dbstat " ..
      "GROUP BY name")) do
    tables[r.name] = tonumber(r.bytes)
    total = total + tonumber(r.bytes)
  end
  local size = rows(conn, "SELECT page_count * page_size AS b FROM " ..
    "pragma_page_count(), pragma_page_size()")[1]
  conn:close()
  env:close()
  return { items = items, seconds = seconds, bytes = tonumber(size.b),
           tables = tables }
end

return M
