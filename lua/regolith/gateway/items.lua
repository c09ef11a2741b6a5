--[[
regolith.gateway.items: the `docs` of a container (docs/gateway.md).

    POST   .../docs                create; upsert (x-ms-documentdb-is-upsert);
                                   a query (x-ms-documentdb-isquery or
                                   application/query+json) or its query plan;
                                   a transactional batch or a bulk request
                                   (x-ms-cosmos-is-batch-request)
    GET    .../docs                the change feed (A-IM), or every item
    GET    .../docs/{id}           read (If-None-Match)
    PUT    .../docs/{id}           replace (If-Match)
    PATCH  .../docs/{id}           patch {operations, condition}
    DELETE .../docs/{id}           delete (If-Match)

Each maps to one regolith call on the container (a bulk request to one
call per operation), so each commits whole or not at all.
]]

local regolith = require "regolith"
local wire = require "regolith.gateway.wire"

local json = regolith.json
local fail, check, header = wire.fail, wire.check, wire.header

local M = {}

local PAGE = 100           -- items in a page when the client names none
local PAGE_MAX = 10000     -- the most a client may ask for

-- {=====================================================================
-- Partition keys, options, answers
-- ======================================================================

local function none(v)
  return type(v) == "table" and next(v) == nil and v ~= regolith.null
end

-- A partition key in its wire form (a JSON array, or its decoded value) as
-- regolith takes it: the value for a single path, an array of values for
-- a hierarchical key, the none value {} for [{}] (or []).
function M.pk_value(e, v, what, prefix)
  if type(v) == "string" then
    local d, msg = json.decode(v)
    if d == nil then fail(400, what .. " is not JSON: " .. tostring(msg)) end
    v = d
  end
  if type(v) ~= "table" or v == regolith.null then
    fail(400, what .. " must be a JSON array")
  end
  if #v == 0 or (#v == 1 and none(v[1])) then return regolith.object() end
  local n = #e.paths
  if n == 1 then
    if #v ~= 1 then fail(400, what .. " holds one value for this container") end
    return v[1]
  end
  if #v ~= n and not (prefix and #v < n) then
    fail(400, what .. " must hold a value for each of the " .. n .. " levels"
      .. (prefix and "" or " (a prefix of the levels is taken by queries)"))
  end
  return v
end

-- The request's partition key (x-ms-documentdb-partitionkey; that of a
-- RID-addressed item when it has none), or nil.
function M.partition_key(r, e, required, prefix)
  local h = header(r, "x-ms-documentdb-partitionkey")
  if h == nil and r.rid_pk ~= nil then return r.rid_pk end
  if h == nil then
    if required then
      fail(400, "the request needs a partition key (x-ms-documentdb-partitionkey)")
    end
    return nil
  end
  return M.pk_value(e, h, "x-ms-documentdb-partitionkey", prefix)
end

-- The trigger named by an include header (regolith runs one of each kind).
local function trigger(r, name)
  local v = header(r, name)
  if v == nil or v == "" then return nil end
  if v:find(",") then
    fail(400, "regolith runs one pre-trigger and one post-trigger per write, "
      .. "not " .. v)
  end
  return v
end

-- The options of a write: conditions, triggers, partition key.
local function write_opts(r, e, with_pk)
  local o = {
    if_match = header(r, "if-match"),
    pre_trigger = trigger(r, "x-ms-documentdb-pre-trigger-include"),
    post_trigger = trigger(r, "x-ms-documentdb-post-trigger-include"),
  }
  if with_pk then o.partition_key = M.partition_key(r, e) end
  return o
end

-- The Cosmos texts of the point operations' failures.
local ITEM_TEXT = {
  [404] = "Entity with the specified id does not exist in the system.",
  [409] = "Entity with the specified id already exists in the system.",
  [412] = "One of the specified pre-condition is not met.",
}

-- Is a failure message the one of a container that went away?
local function gone(msg)
  return type(msg) == "string" and msg:find("has been deleted", 1, true) ~= nil
end
M.gone = gone

-- A point operation's result through: regolith's failures with the
-- service's texts (a container that went away keeps its own message: the
-- caller retries on a fresh handle).
local function item(ok, msg, status, ...)
  if ok ~= nil then return ok, msg, status, ... end
  if ITEM_TEXT[status] and not gone(msg) then
    fail(status, ITEM_TEXT[status] .. " (" .. msg .. ")")
  end
  fail(status or 500, msg, nil, wire.retry_hint(status, ...))
end

-- The value at a partition key path of a document (nil when it lacks it).
local function path_value(doc, path)
  local v = doc
  for name in path:gmatch("[^/]+") do
    if type(v) ~= "table" then return nil end
    v = v[name:gsub("~1", "/"):gsub("~0", "~")]
  end
  return v
end

-- An item's RID: the container's RID and the JSON text of [id, the
-- partition key's values] ({} for an undefined level), in base64 with "/"
-- written "-".  It is made from what names the item, so that a RID-addressed
-- path names the item again (M.rid_item); an item deleted and created
-- again has the same RID.
local function item_rid(e, doc)
  local key = { doc.id }
  for i, path in ipairs(e.paths) do
    local v = path_value(doc, path)
    key[i + 1] = v == nil and regolith.object() or v
  end
  return (ngx.encode_base64(e.ridbytes .. assert(json.encode(key))):gsub("/", "-"))
end

-- The id and partition key (as pk_value gives it) an item RID of the
-- container names, or nil.
function M.rid_item(e, rid)
  local bytes = ngx.decode_base64((rid:gsub("%-", "/")))
  if not bytes or #bytes <= #e.ridbytes or bytes:sub(1, #e.ridbytes) ~= e.ridbytes then
    return nil
  end
  local key = json.decode(bytes:sub(#e.ridbytes + 1))
  if type(key) ~= "table" or type(key[1]) ~= "string" or #key ~= #e.paths + 1 then
    return nil
  end
  local pk = { (table.unpack or unpack)(key, 2) }
  local allnone = true
  for _, v in ipairs(pk) do allnone = allnone and none(v) end
  if allnone then return key[1], regolith.object() end
  if #e.paths == 1 then return key[1], pk[1] end
  return key[1], pk
end

-- Gives an item the resource fields the service's items have: _rid,
-- _self and _attachments; Python's SDK reads _self to keep session tokens
-- and addresses items by it.
function M.decorate(e, doc)
  if type(doc) ~= "table" or type(doc.id) ~= "string" or not doc._etag then
    return doc
  end
  local rid = item_rid(e, doc)
  doc._rid = rid
  doc._self = "dbs/" .. e.dbrid .. "/colls/" .. e.rid .. "/docs/" .. rid .. "/"
  doc._attachments = "attachments/"
  return doc
end
local decorate = M.decorate

-- Headers of an answer carrying an item.
local function item_headers(r, doc)
  if type(doc) == "table" and doc._etag then
    r.out["etag"] = doc._etag
    if doc._lsn then
      r.out["x-ms-session-token"] = "0:-1#" .. doc._lsn
      r.out["lsn"] = tostring(doc._lsn)
    end
  end
end

local function answer_item(r, e, doc, info)
  wire.charged(r, info)
  item_headers(r, doc)
  return wire.send(r, info.status, decorate(e, doc))
end

-- An incoming document without the resource fields decorate gives (the
-- service ignores them on writes, as regolith does _etag, _ts and _lsn).
local function incoming(doc)
  if type(doc) == "table" then doc._rid, doc._self, doc._attachments = nil, nil, nil end
  return doc
end

-- A document body: a JSON object with a string id.
local function document(r)
  local doc = incoming(wire.body_object(r))
  if type(doc.id) ~= "string" then fail(400, "the document has no string id") end
  return doc
end

-- Cosmos patch operations as regolith takes them.
local function patch_ops(ops)
  if type(ops) ~= "table" or ops[1] == nil then
    fail(400, "a patch needs a list of operations")
  end
  local out = {}
  for i, op in ipairs(ops) do
    if type(op) ~= "table" then fail(400, "patch operation " .. i .. " is not an object") end
    out[i] = { op = op.op, path = op.path, value = op.value, from = op.from }
  end
  return out
end
-- }=====================================================================


-- {=====================================================================
-- Point operations
-- ======================================================================
local function create(r, e)
  local doc = document(r)
  local o = write_opts(r, e, true)
  if wire.flag(r, "x-ms-documentdb-is-upsert") then
    return answer_item(r, e, item(e.c:upsert(doc, o)))
  end
  o.if_match = nil
  return answer_item(r, e, item(e.c:create(doc, o)))
end

local function read(r, e, id)
  local pk = M.partition_key(r, e, true)
  local inm = header(r, "if-none-match")
  local doc, info, status = e.c:read(id, pk, { if_none_match = inm })
  if doc == nil and status == 304 then
    r.out["etag"] = inm
    r.charge = r.charge + 1
    return wire.send(r, 304)
  end
  return answer_item(r, e, item(doc, info, status))
end

local function replace(r, e, id)
  local doc = document(r)
  if doc.id ~= id then fail(400, "the document's id differs from the one in the path") end
  return answer_item(r, e, item(e.c:replace(doc, write_opts(r, e, true))))
end

local function delete(r, e, id)
  local pk = M.partition_key(r, e, true)
  local _, info = item(e.c:delete(id, pk, write_opts(r, e, false)))
  wire.charged(r, info)
  return wire.send(r, 204)
end

local function patch(r, e, id)
  local pk = M.partition_key(r, e, true)
  local body = wire.body(r)
  if type(body) == "table" and body[1] ~= nil then        -- the ops alone
    body = { operations = body }
  elseif type(body) ~= "table" then
    fail(400, "a patch body is {operations, condition} or a list of operations")
  end
  local o = write_opts(r, e, false)
  if body.condition ~= nil and body.condition ~= regolith.null then
    if type(body.condition) ~= "string" then fail(400, "condition must be a string") end
    o.filter = body.condition
  end
  return answer_item(r, e, item(e.c:patch(id, pk, patch_ops(body.operations), o)))
end
-- }=====================================================================


-- {=====================================================================
-- Transactional batch and bulk
-- ======================================================================
local OPS = {
  Create = "create", Upsert = "upsert", Replace = "replace", Read = "read",
  Delete = "delete", Patch = "patch",
}

local function op_name(op, i)
  local name = type(op) == "table" and OPS[op.operationType]
  if not name then
    fail(400, "operation " .. i .. ": operationType must be Create, Upsert, "
      .. "Replace, Read, Delete or Patch")
  end
  return name
end

-- A Cosmos batch operation as a regolith batch op.
local function batch_op(op, i)
  local name = op_name(op, i)
  local out = { op = name, if_match = op.ifMatch }
  if name == "create" or name == "upsert" or name == "replace" then
    if type(op.resourceBody) ~= "table" then
      fail(400, "operation " .. i .. " needs a resourceBody")
    end
    out.doc = incoming(op.resourceBody)
    if name == "create" then out.if_match = nil end
  else
    out.id = op.id
  end
  if name == "patch" then
    local body = type(op.resourceBody) == "table" and op.resourceBody or {}
    out.ops = patch_ops(body.operations)
    if type(body.condition) == "string" then out.filter = body.condition end
  end
  return out
end

-- One result of a batch or bulk answer.
local function result(e, status, charge, doc)
  local out = { statusCode = status, requestCharge = charge }
  if type(doc) == "table" then
    out.eTag = doc._etag
    out.resourceBody = decorate(e, doc)
  end
  return out
end

-- A read with ifNoneMatch whose item still has that etag is 304.
local function not_modified(op, status, doc)
  return op.operationType == "Read" and op.ifNoneMatch ~= nil and status == 200
    and type(doc) == "table" and doc._etag == op.ifNoneMatch
end

local function atomic_batch(r, e, ops)
  local pk = M.partition_key(r, e, true)
  local rops = {}
  for i, op in ipairs(ops) do rops[i] = batch_op(op, i) end
  local res, info, status, results = e.c:batch(pk, rops)
  local out = {}
  if res then
    wire.charged(r, info)
    local share = info.charge / #ops
    for i, x in ipairs(res) do
      if not_modified(ops[i], x.status, x.doc) then
        out[i] = result(e, 304, share)
      else
        out[i] = result(e, x.status, share, x.doc)
      end
    end
    return wire.send(r, 200, regolith.array(out))
  end
  local failed = false
  for i, x in ipairs(results or {}) do
    out[i] = result(e, x.status, 0)
    failed = failed or x.status ~= 424
  end
  -- a batch that failed before any op ran (its key, its shape) is an error
  if not failed then
    fail(status or 500, info, nil, wire.retry_hint(status, results))
  end
  return wire.send(r, 207, regolith.array(out))
end

-- Runs one bulk operation: status, charge, document.
local function bulk_op(e, op, i)
  local name = op_name(op, i)
  if op.partitionKey == nil then
    fail(400, "operation " .. i .. " has no partitionKey")
  end
  local pk = M.pk_value(e, op.partitionKey, "partitionKey")
  local c = e.c
  local doc, info, status
  if name == "create" or name == "upsert" or name == "replace" then
    if type(op.resourceBody) ~= "table" then
      fail(400, "operation " .. i .. " needs a resourceBody")
    end
    doc, info, status = c[name](c, incoming(op.resourceBody), {
      partition_key = pk, if_match = name ~= "create" and op.ifMatch or nil })
  elseif name == "read" then
    doc, info, status = c:read(op.id, pk, { if_none_match = op.ifNoneMatch })
  elseif name == "delete" then
    doc, info, status = c:delete(op.id, pk, { if_match = op.ifMatch })
  else
    local body = type(op.resourceBody) == "table" and op.resourceBody or {}
    doc, info, status = c:patch(op.id, pk, patch_ops(body.operations), {
      if_match = op.ifMatch,
      filter = type(body.condition) == "string" and body.condition or nil })
  end
  if doc == nil then
    if gone(info) then fail(404, info) end
    return status, 0
  end
  return info.status, info.charge, doc
end

local function bulk(r, e, ops)
  local out, all_ok = {}, true
  for i, op in ipairs(ops) do
    local ok, status, charge, doc = pcall(bulk_op, e, op, i)
    if not ok then
      if not wire.is_error(status) or gone(status.message) then error(status, 0) end
      status, charge = status.status, 0
    end
    r.charge = r.charge + charge
    if status >= 400 then all_ok = false end
    out[i] = result(e, status, charge, doc)
  end
  return wire.send(r, all_ok and 200 or 207, regolith.array(out))
end

local function batch(r, e)
  local ops = wire.body(r)
  if type(ops) ~= "table" or (next(ops) ~= nil and ops[1] == nil) then
    fail(400, "a batch is a JSON array of operations")
  end
  if wire.flag(r, "x-ms-cosmos-batch-atomic") then return atomic_batch(r, e, ops) end
  return bulk(r, e, ops)
end
-- }=====================================================================


-- {=====================================================================
-- Queries
-- ======================================================================

-- The plan the SDKs ask for: nothing for the client to do, one range.  The
-- gateway answers every query whole (ordering, aggregates, paging) over the
-- one partition key range it shows.
local PLAN = [[{"partitionedQueryExecutionInfoVersion":2,"queryInfo":{"distinctType":"None","top":null,"offset":null,"limit":null,"orderBy":[],"orderByExpressions":[],"groupByExpressions":[],"groupByAliases":[],"aggregates":[],"groupByAliasToAggregateType":{},"rewrittenQuery":"","hasSelectValue":false,"dCountInfo":null,"hasNonStreamingOrderBy":false},"queryRanges":[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]}]]

-- {query, parameters} of a query body: the text and regolith's params.
function M.query_spec(r)
  local body = wire.body(r)
  if type(body) == "string" then body = { query = body } end
  if type(body) ~= "table" or type(body.query) ~= "string" then
    fail(400, "a query body is {query, parameters}")
  end
  local params
  if type(body.parameters) == "table" then
    for _, p in ipairs(body.parameters) do
      if type(p) ~= "table" or type(p.name) ~= "string" then
        fail(400, "a query parameter is {name, value}")
      end
      params = params or {}
      params[p.name] = p.value == nil and regolith.null or p.value
    end
  end
  return body.query, params
end

-- The query metrics header (requested with populateQueryMetrics).
local function metrics(info, ms)
  return ("totalExecutionTimeInMs=%.2f;queryCompileTimeInMs=0.00;"
    .. "queryLogicalPlanBuildTimeInMs=0.00;queryPhysicalPlanBuildTimeInMs=0.00;"
    .. "queryOptimizationTimeInMs=0.00;VMExecutionTimeInMs=%.2f;"
    .. "indexLookupTimeInMs=0.00;documentLoadTimeInMs=0.00;systemFunctionExecuteTimeInMs=0.00;"
    .. "userFunctionExecuteTimeInMs=0.00;retrievedDocumentCount=%d;"
    .. "retrievedDocumentSize=0;outputDocumentCount=%d;outputDocumentSize=0;"
    .. "writeOutputTimeInMs=0.00;indexUtilizationRatio=1.00"):format(
      ms, ms, info.loaded or 0, info.count or 0)
end

-- {---------------------------------------------------------------------
-- A prefix of a hierarchical key.  regolith routes a query to the
-- partitions of a prefix when its WHERE fixes the first levels (docs/
-- query.md, Routing); a request naming a prefix in its partition key
-- header gets those equalities added to its WHERE, on parameters, so that
-- it is routed and filtered as the same query written in Lua would be.

local KEYWORDS = { WHERE = true, ORDER = true, GROUP = true, OFFSET = true,
                   LIMIT = true, JOIN = true }

-- The top-level words of a query with their positions (strings and
-- parenthesized parts skipped).
local function words(sql)
  local out, i, depth, n = {}, 1, 0, #sql
  while i <= n do
    local c = sql:sub(i, i)
    if c == "'" or c == '"' then
      local j = i + 1
      while j <= n and sql:sub(j, j) ~= c do
        if sql:sub(j, j) == "\\" then j = j + 1 end
        j = j + 1
      end
      i = j + 1
    elseif c == "(" or c == "[" then depth = depth + 1; i = i + 1
    elseif c == ")" or c == "]" then depth = depth - 1; i = i + 1
    elseif c:match("[%a_]") then
      local w = sql:match("^[%w_]+", i)
      if depth == 0 then out[#out + 1] = { w = w, at = i } end
      i = i + #w
    else i = i + 1 end
  end
  return out
end

-- The query with the prefix's equalities added, and its parameters.
local function with_prefix(e, sql, params, prefix)
  local ws, alias, from = words(sql), nil, nil
  for k, t in ipairs(ws) do
    if t.w:upper() == "FROM" then
      from = k
      local a, b, c = ws[k + 1], ws[k + 2], ws[k + 3]
      if b and b.w:upper() == "AS" then alias = c and c.w
      elseif b and not KEYWORDS[b.w:upper()] and b.w:upper() ~= "IN" then alias = b.w
      elseif b and b.w:upper() == "IN" then alias = nil
      else alias = a and a.w end
      break
    end
  end
  if not alias then
    fail(400, "a query on a prefix of the partition key needs FROM <alias> "
      .. "(not FROM x IN ...)")
  end
  params = params or {}
  local conds = {}
  for i, v in ipairs(prefix) do
    local name = "__pk" .. i
    local ref = alias
    for seg in e.paths[i]:gmatch("[^/]+") do
      seg = seg:gsub("~1", "/"):gsub("~0", "~")
      ref = ref .. "[" .. json.encode(seg) .. "]"
    end
    conds[#conds + 1] = ref .. " = @" .. name
    params[name] = v
  end
  local cond = table.concat(conds, " AND ")
  local where, tail
  for k = from + 1, #ws do
    local u = ws[k].w:upper()
    if u == "WHERE" and not where then where = ws[k]
    elseif (u == "ORDER" or u == "GROUP" or u == "OFFSET") and not tail then tail = ws[k] end
  end
  local stop = tail and tail.at - 1 or #sql
  if where then
    local body = sql:sub(where.at + 5, stop)
    sql = sql:sub(1, where.at - 1) .. "WHERE " .. cond .. " AND (" .. body .. ") "
      .. sql:sub(stop + 1)
  else
    sql = sql:sub(1, stop) .. " WHERE " .. cond .. " " .. sql:sub(stop + 1)
  end
  return sql, params
end
-- }---------------------------------------------------------------------

-- Runs a query on a container; `sql`, `params` from the body, or SELECT *.
local function run_query(r, e, sql, params)
  local pk = M.partition_key(r, e, false, true)
  if type(pk) == "table" and pk ~= regolith.null and not none(pk) and #pk < #e.paths then
    sql, params = with_prefix(e, sql, params, pk)
    pk = nil
  end
  local o = {
    partition_key = pk,
    max_items = wire.max_items(r, PAGE, PAGE_MAX),
    continuation = header(r, "x-ms-continuation"),
  }
  ngx.update_time()
  local start = ngx.now()
  local rows, info = check(e.c:query(sql, params, o))
  for _, row in ipairs(rows) do decorate(e, row) end
  wire.charged(r, info)
  r.out["x-ms-continuation"] = info.continuation
  if wire.flag(r, "x-ms-documentdb-populatequerymetrics") then
    ngx.update_time()
    r.out["x-ms-documentdb-query-metrics"] = metrics(info, (ngx.now() - start) * 1000)
  end
  return wire.send(r, 200, wire.feed(r, "Documents", rows, e.rid))
end

local function query(r, e)
  if wire.flag(r, "x-ms-cosmos-is-query-plan-request") then
    return wire.send(r, 200, PLAN, true)
  end
  return run_query(r, e, M.query_spec(r))
end
-- }=====================================================================


-- {=====================================================================
-- The change feed
-- ======================================================================

-- The name a partition key path has in change metadata (its last field).
local function path_name(path)
  return path:match("([^/]+)$") or path
end

-- metadata.partitionKey: {name = value} per level ({} for none).
local function pk_dict(e, pk)
  local out = regolith.object()
  if none(pk) then return out end
  if #e.paths == 1 then pk = { pk } end
  for i, path in ipairs(e.paths) do out[path_name(path)] = pk[i] end
  return out
end

-- A regolith all_versions record in the service's wire shape.
local function change(e, ch)
  local m = ch.metadata
  local md = { operationType = m.operation, lsn = m.lsn, crts = m.ts,
               timeToLiveExpired = m.ttl_expired }
  local out = { metadata = md }
  if m.operation == "delete" then
    md.id = m.id
    md.partitionKey = pk_dict(e, m.partition_key)
    md.previousImageLSN = ch.previous and ch.previous._lsn
    out.previous = ch.previous
  else
    out.current = ch.current
  end
  return out
end

local function unquote(s)
  return (s:gsub('^"(.*)"$', "%1"))
end

local function changes(r, e, aim)
  local mode = ({ ["incremental feed"] = "latest",
                  ["full-fidelity feed"] = "all_versions" })[aim:lower()]
  if not mode then fail(400, "A-IM must be Incremental Feed or Full-Fidelity Feed") end
  local lo, hi = header(r, "x-ms-start-epk"), header(r, "x-ms-end-epk")
  if (lo and lo ~= "") or (hi and hi ~= "FF") then
    fail(400, "regolith reads the change feed of a whole container or of one "
      .. "partition key, not of a part of the key range")
  end
  local o = { mode = mode, max_items = wire.max_items(r, PAGE, PAGE_MAX),
              partition_key = M.partition_key(r, e) }
  local inm, ims = header(r, "if-none-match"), header(r, "if-modified-since")
  if inm == "*" then o.start = "now"
  elseif inm then o.continuation = unquote(inm)
  elseif ims then
    o.start = ngx.parse_http_time(ims)
    if not o.start then fail(400, "If-Modified-Since is not an HTTP date") end
  end
  local page, info = check(e.c:changes(o))
  wire.charged(r, info)
  r.out["etag"] = '"' .. info.continuation .. '"'
  if #page == 0 then return wire.send(r, 304) end
  for i, ch in ipairs(page) do
    if mode == "all_versions" then
      decorate(e, ch.current)
      decorate(e, ch.previous)
      page[i] = change(e, ch)
    else
      decorate(e, ch)
    end
  end
  local last = page[#page]
  local lsn = mode == "latest" and last._lsn or last.metadata.lsn
  r.out["lsn"] = tostring(lsn)
  return wire.send(r, 200, wire.feed(r, "Documents", page, e.rid))
end
-- }=====================================================================


-- Serves a request on `.../docs` (id nil) or `.../docs/{id}`.
function M.serve(r, e, id)
  local method = r.method
  if id == nil then
    if method == "POST" then
      local ctype = (header(r, "content-type") or ""):lower()
      if wire.flag(r, "x-ms-documentdb-isquery") or wire.flag(r, "x-ms-documentdb-query")
         or ctype:find("application/query+json", 1, true)
         or wire.flag(r, "x-ms-cosmos-is-query-plan-request") then
        return query(r, e)
      end
      if wire.flag(r, "x-ms-cosmos-is-batch-request") then return batch(r, e) end
      return create(r, e)
    end
    if method == "GET" then
      local aim = header(r, "a-im")
      if aim then return changes(r, e, aim) end
      return run_query(r, e, "SELECT * FROM c")
    end
    fail(405, method .. " is not allowed on a feed of documents")
  end
  if method == "GET" then return read(r, e, id) end
  if method == "PUT" then return replace(r, e, id) end
  if method == "PATCH" then return patch(r, e, id) end
  if method == "DELETE" then return delete(r, e, id) end
  fail(405, method .. " is not allowed on a document")
end

M.item = item

return M
