--[[
regolith.gateway.policy: a Cosmos DB container definition and a regolith
container spec, each made from the other (docs/gateway.md, "What maps to
what").

    partitionKey {paths, kind Hash|MultiHash}    partition_key
    indexingPolicy {indexingMode, automatic,     indexing {automatic, included,
      includedPaths, excludedPaths,                excluded, composite}
      compositeIndexes}
    uniqueKeyPolicy {uniqueKeys [{paths}]}       unique_keys
    defaultTtl                                   default_ttl
    changeFeedPolicy {retentionDuration}         change_feed {retention}
      (minutes)                                    (seconds)
    fullTextPolicy {defaultLanguage,             full_text {default_language,
      fullTextPaths [{path, language}]}            paths [{path, language}]}
    indexingPolicy.fullTextIndexes [{path}]      indexing.full_text [paths]
    vectorEmbeddingPolicy                        vector_embeddings
      {vectorEmbeddings [{path, dataType,          [{path, data_type, dimensions,
      dimensions, distanceFunction}]}               distance_function}]
    indexingPolicy.vectorIndexes [{path, type,   indexing.vector_indexes [{path,
      quantizationByteSize,                        type, quantization_byte_size,
      indexingSearchListSize,                      indexing_search_list_size,
      vectorIndexShardKey}]                        shard_key}]

A gateway container has one physical partition (the one partition key range
the gateway shows).  What regolith has no use for (conflictResolutionPolicy,
geospatialConfig) is kept as given; what it cannot do (spatial indexes)
is refused.  The vector parts are handed over in Cosmos DB's spelling: the
core takes it as the Lua API does (docs/search.md).
]]

local regolith = require "regolith"
local wire = require "regolith.gateway.wire"

local fail = wire.fail
local null = regolith.null

local M = {}

-- The JS SDK gives containers created without a partition key this one.
M.DEFAULT_PK = "/_partitionKey"

local ETAG_PATH = '/"_etag"/?'

local function present(v)
  return v ~= nil and v ~= null
end

local function list(v, what)
  if not present(v) then return {} end
  if type(v) ~= "table" or (next(v) ~= nil and v[1] == nil) then
    fail(400, what .. " must be an array")
  end
  return v
end

-- A Cosmos index path in regolith's pattern syntax: quoted names
-- (/"a b"/?) lose their quotes (and escape ~ and / as JSON pointers).
local function pattern(path, what)
  if type(path) ~= "string" then fail(400, what .. ": a path must be a string") end
  return (path:gsub('/"([^"]*)"', function(name)
    return "/" .. name:gsub("~", "~0"):gsub("/", "~1")
  end))
end

-- Cosmos's etag exclusion, which regolith applies by itself.
local function is_etag(path)
  return path == ETAG_PATH or path == "/_etag/?"
end

-- {{ Full text (docs/search.md): Cosmos's fullTextPolicy and
-- fullTextIndexes, and back.  The store checks what they hold.
function M.full_text_policy(ft)
  if not present(ft) then return nil end
  if type(ft) ~= "table" then fail(400, "fullTextPolicy must be an object") end
  local paths = {}
  for i, p in ipairs(list(ft.fullTextPaths, "fullTextPolicy.fullTextPaths")) do
    if type(p) ~= "table" then fail(400, "a full-text path is {path, language}") end
    paths[i] = { path = p.path, language = present(p.language) and p.language or nil }
  end
  return { default_language = present(ft.defaultLanguage) and ft.defaultLanguage or nil,
           paths = #paths > 0 and paths or nil }
end

function M.full_text_indexes(list_)
  local out = {}
  for i, p in ipairs(list(list_, "indexingPolicy.fullTextIndexes")) do
    if type(p) ~= "table" then fail(400, "a full-text index is {path}") end
    out[i] = p.path
  end
  return #out > 0 and out or nil
end

function M.full_text_definition(def, spec)
  local ft = spec.full_text or spec.fullTextPolicy
  if ft then
    local paths = {}
    for i, p in ipairs(ft.paths or ft.fullTextPaths or {}) do
      paths[i] = { path = p.path, language = p.language or
        ft.default_language or ft.defaultLanguage or "en-US" }
    end
    def.fullTextPolicy = { defaultLanguage = ft.default_language or
      ft.defaultLanguage or "en-US", fullTextPaths = regolith.array(paths) }
  end
  local ix = spec.indexing or {}
  local idx = ix.full_text or ix.fullTextIndexes
  if idx then
    local out = {}
    for i, p in ipairs(idx) do out[i] = { path = type(p) == "table" and p.path or p } end
    def.indexingPolicy.fullTextIndexes = out
  end
end
-- }}

local function indexing(ip)
  if not present(ip) then return nil end
  if type(ip) ~= "table" then fail(400, "indexingPolicy must be an object") end
  for _, k in ipairs({ "spatialIndexes" }) do
    if #list(ip[k], "indexingPolicy." .. k) > 0 then
      fail(400, "indexingPolicy." .. k .. " is not supported by regolith")
    end
  end
  local mode = ip.indexingMode
  if present(mode) and type(mode) ~= "string" then
    fail(400, "indexingPolicy.indexingMode must be a string")
  end
  mode = present(mode) and mode:lower() or "consistent"
  if mode ~= "consistent" and mode ~= "lazy" and mode ~= "none" then
    fail(400, "indexingPolicy.indexingMode must be consistent, lazy or none")
  end
  local out = { automatic = mode ~= "none" and ip.automatic ~= false }
  out.included, out.excluded = {}, {}
  for _, p in ipairs(list(ip.includedPaths, "indexingPolicy.includedPaths")) do
    out.included[#out.included + 1] = pattern(p.path, "includedPaths")
  end
  for _, p in ipairs(list(ip.excludedPaths, "indexingPolicy.excludedPaths")) do
    if not is_etag(p.path) then
      out.excluded[#out.excluded + 1] = pattern(p.path, "excludedPaths")
    end
  end
  local composite = {}
  for _, set in ipairs(list(ip.compositeIndexes, "indexingPolicy.compositeIndexes")) do
    local cols = {}
    for _, col in ipairs(list(set, "a composite index")) do
      local order = present(col.order) and tostring(col.order):lower() or "ascending"
      cols[#cols + 1] = { path = pattern(col.path, "compositeIndexes"),
                          order = order }
    end
    composite[#composite + 1] = cols
  end
  if #composite > 0 then out.composite = composite end
  out.full_text = M.full_text_indexes(ip.fullTextIndexes)
  -- vector indexes: as given (the core reads Cosmos DB's spelling)
  if #list(ip.vectorIndexes, "indexingPolicy.vectorIndexes") > 0 then
    out.vectorIndexes = ip.vectorIndexes
  end
  if #out.included == 0 then out.included = nil end
  if #out.excluded == 0 then out.excluded = nil end
  return out
end

-- The regolith spec of a Cosmos container definition; 400 for what
-- regolith cannot do.
function M.spec(def)
  local spec = { physical_partitions = 1 }
  local pk = def.partitionKey
  local paths = { M.DEFAULT_PK }
  if present(pk) then
    if type(pk) ~= "table" then fail(400, "partitionKey must be an object") end
    paths = list(pk.paths, "partitionKey.paths")
    local kind = present(pk.kind) and pk.kind or (#paths > 1 and "MultiHash" or "Hash")
    if kind ~= "Hash" and kind ~= "MultiHash" then
      fail(400, "partitionKey.kind must be Hash or MultiHash")
    end
    if #paths < 1 or #paths > 3 or (kind == "Hash" and #paths ~= 1) then
      fail(400, "partitionKey.paths holds one path (Hash) or two or three "
        .. "(MultiHash)")
    end
  end
  spec.partition_key = #paths == 1 and paths[1] or paths
  spec.indexing = indexing(def.indexingPolicy)
  local ukp = def.uniqueKeyPolicy
  if present(ukp) then
    local keys = {}
    for _, k in ipairs(list(ukp.uniqueKeys, "uniqueKeyPolicy.uniqueKeys")) do
      keys[#keys + 1] = list(k.paths, "uniqueKeys.paths")
    end
    if #keys > 0 then spec.unique_keys = keys end
  end
  if present(def.defaultTtl) then
    if type(def.defaultTtl) ~= "number" then fail(400, "defaultTtl must be a number") end
    spec.default_ttl = def.defaultTtl
  end
  local cfp = def.changeFeedPolicy
  if present(cfp) and present(cfp.retentionDuration) then
    local minutes = cfp.retentionDuration
    if type(minutes) ~= "number" or minutes < 0 then
      fail(400, "changeFeedPolicy.retentionDuration must be minutes")
    end
    if minutes > 0 then spec.change_feed = { retention = minutes * 60 } end
  end
  spec.full_text = M.full_text_policy(def.fullTextPolicy)
  -- the vector embedding policy: as given (the core reads this spelling)
  if present(def.vectorEmbeddingPolicy) then
    spec.vectorEmbeddingPolicy = def.vectorEmbeddingPolicy
  end
  return spec
end

local function path_list(paths)
  local out = {}
  for i, p in ipairs(paths or {}) do out[i] = { path = p } end
  return out
end

-- The Cosmos definition of a regolith spec (c:spec()), on top of `base`
-- (the definition as last given, for what regolith does not keep).
function M.definition(id, spec, base)
  local def = {}
  for k, v in pairs(base or {}) do def[k] = v end
  def.id = id
  local paths = spec.partition_key
  if type(paths) == "string" then paths = { paths } end
  local pk = type(def.partitionKey) == "table" and def.partitionKey or {}
  def.partitionKey = { paths = paths, kind = #paths > 1 and "MultiHash" or "Hash",
                       version = pk.version or 2 }
  local ix = spec.indexing or {}
  local automatic = ix.automatic ~= false
  local excluded = path_list(ix.excluded)
  excluded[#excluded + 1] = { path = ETAG_PATH }
  local included = path_list(ix.included)
  if #included == 0 then included = { { path = "/*" } } end
  def.indexingPolicy = {
    indexingMode = automatic and "consistent" or "none",
    automatic = automatic,
    includedPaths = included,
    excludedPaths = excluded,
  }
  if ix.composite then
    local comp = {}
    for i, set in ipairs(ix.composite) do
      comp[i] = {}
      for j, col in ipairs(set) do
        comp[i][j] = { path = col.path, order = col.order or "ascending" }
      end
    end
    def.indexingPolicy.compositeIndexes = comp
  end
  M.full_text_definition(def, spec)
  -- vector search, in Cosmos DB's spelling
  if ix.vector_indexes then
    local vix = {}
    for i, x in ipairs(ix.vector_indexes) do
      vix[i] = { path = x.path, type = x.type,
                 quantizationByteSize = x.quantization_byte_size,
                 indexingSearchListSize = x.indexing_search_list_size,
                 vectorIndexShardKey = x.shard_key }
    end
    def.indexingPolicy.vectorIndexes = vix
  end
  if spec.vector_embeddings then
    local emb = {}
    for i, m in ipairs(spec.vector_embeddings) do
      emb[i] = { path = m.path, dataType = m.data_type or "float32",
                 dimensions = m.dimensions or 1536,
                 distanceFunction = m.distance_function or "cosine" }
    end
    def.vectorEmbeddingPolicy = { vectorEmbeddings = emb }
  end
  local keys = {}
  for i, k in ipairs(spec.unique_keys or {}) do keys[i] = { paths = k } end
  def.uniqueKeyPolicy = { uniqueKeys = regolith.array(keys) }
  def.defaultTtl = spec.default_ttl
  if spec.change_feed and spec.change_feed.retention then
    def.changeFeedPolicy = {
      retentionDuration = math.floor(spec.change_feed.retention / 60) }
  else
    def.changeFeedPolicy = nil
  end
  if def.conflictResolutionPolicy == nil then
    def.conflictResolutionPolicy = { mode = "LastWriterWins",
      conflictResolutionPath = "/_ts", conflictResolutionProcedure = "" }
  end
  if def.geospatialConfig == nil then
    def.geospatialConfig = { type = "Geography" }
  end
  return def
end

return M
