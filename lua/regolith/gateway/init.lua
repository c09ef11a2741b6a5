--[[
regolith.gateway: the Cosmos DB for NoSQL REST API, served by nginx workers
over regolith databases, so that Microsoft's SDKs talk to regolith
unchanged (docs/gateway.md).

In nginx (tools/gateway/nginx.conf):

    init_by_lua_block        { require "resty.core"; require "regolith.gateway" }
    init_worker_by_lua_block { require("regolith.gateway").init_worker() }
    exit_worker_by_lua_block { require("regolith.gateway").exit_worker() }
    location / { content_by_lua_block { require("regolith.gateway").handle() } }

Settings (environment, named by `env` in nginx.conf):

    REGOLITH_GATEWAY_ROOT   the directory of the databases (required)
    REGOLITH_GATEWAY_KEY    the master key, base64 (required)
    REGOLITH_GATEWAY_URL    the endpoint the account document names
                            (default: the scheme and Host of each request)
    REGOLITH_GATEWAY_SYNC   the databases' sync mode (full, lazy, none;
                            default full)

Every request is checked against the master key (regolith.gateway.auth);
then the path decides: the account (GET /), databases, containers, their
partition key ranges, documents (regolith.gateway.items), scripts
(regolith.gateway.scripts), offers (regolith.gateway.offers).  A path
addressed by resource ids (the _self links: dbs/{rid}/colls/{rid}/...) is
served as the path of the names those ids resolve to (M.resolve).  Users
and permissions answer 501.
]]

local regolith = require "regolith"
local wire = require "regolith.gateway.wire"
local auth = require "regolith.gateway.auth"
local catalog = require "regolith.gateway.catalog"
local items = require "regolith.gateway.items"
local scripts = require "regolith.gateway.scripts"
local offers = require "regolith.gateway.offers"

local fail, check, header = wire.fail, wire.check, wire.header

local M = {}

local config = {}
local SKEW = 15 * 60            -- seconds a request's date may be off

-- {=====================================================================
-- Worker lifecycle
-- ======================================================================
function M.init_worker()
  math.randomseed(ngx.worker.pid() * 1000003 + math.floor(ngx.now() * 1000))
  config.root = os.getenv("REGOLITH_GATEWAY_ROOT")
  local key = os.getenv("REGOLITH_GATEWAY_KEY")
  config.url = os.getenv("REGOLITH_GATEWAY_URL")
  config.sync = os.getenv("REGOLITH_GATEWAY_SYNC") or "full"
  if not config.root or config.root == "" then
    ngx.log(ngx.EMERG, "REGOLITH_GATEWAY_ROOT is not set")
    return
  end
  config.key = key and ngx.decode_base64(key)
  if not config.key or config.key == "" then
    ngx.log(ngx.EMERG, "REGOLITH_GATEWAY_KEY is not set, or not base64")
    return
  end
  local ok, err = pcall(catalog.open, config.root, { sync = config.sync })
  if not ok then
    ngx.log(ngx.EMERG, "cannot open the gateway's catalog: ", err)
    return
  end
  config.ready = true
end

function M.exit_worker()
  catalog.close()
end
-- }=====================================================================


-- {=====================================================================
-- The account, databases, containers, partition key ranges
-- ======================================================================
local function endpoint()
  if config.url and config.url ~= "" then return config.url end
  return ngx.var.scheme .. "://" .. (ngx.var.http_host or ngx.var.server_addr) .. "/"
end

-- The account document.  Its id is not "localhost", for which the JS SDK
-- ignores the locations and reads the account again before every request.
local function account(r)
  local here = { { name = "regolith", databaseAccountEndpoint = endpoint() } }
  return wire.send(r, 200, {
    id = "regolith", _rid = "", _self = "", media = "//media/",
    addresses = "//addresses/", _dbs = "//dbs/",
    writableLocations = here, readableLocations = here,
    enableMultipleWriteLocations = false,
    userReplicationPolicy = { asyncReplication = false, minReplicaSetSize = 1,
                              maxReplicasetSize = 1 },
    userConsistencyPolicy = { defaultConsistencyLevel = "Session" },
    systemReplicationPolicy = { minReplicaSetSize = 1, maxReplicasetSize = 1 },
    readPolicy = { primaryReadCoefficient = 1, secondaryReadCoefficient = 1 },
    queryEngineConfiguration = '{"maxSqlQueryInputLength":524288,'
      .. '"maxJoinsPerSqlQuery":8,"maxLogicalAndPerSqlQuery":500,'
      .. '"maxLogicalOrPerSqlQuery":500,"maxUdfRefPerSqlQuery":0,'
      .. '"maxInExpressionItemsCount":16000,"queryMaxInMemorySortDocumentCount":500,'
      .. '"maxQueryRequestTimeoutFraction":0.9,"sqlAllowNonFiniteNumbers":false,'
      .. '"sqlAllowAggregateFunctions":true,"sqlAllowSubQuery":false,'
      .. '"sqlAllowScalarSubQuery":false,"allowNewKeywords":true,'
      .. '"sqlAllowLike":false,"sqlAllowGroupByClause":false,'
      .. '"maxSpatialQueryCells":12,"spatialMaxGeometryPointCount":256,'
      .. '"sqlDisableOptimizationFlags":0,"sqlAllowTop":true,'
      .. '"enableSpatialIndexing":false}',
  })
end

local function is_query(r)
  return wire.flag(r, "x-ms-documentdb-isquery") or
    (header(r, "content-type") or ""):lower():find("query+json", 1, true) ~= nil
end

local function public_rows(rows)
  for _, d in ipairs(rows) do if type(d) == "table" then catalog.public(d) end end
  return rows
end

local function databases(r, id)
  local method = r.method
  if id == nil then
    if method == "GET" then
      return wire.send(r, 200, wire.feed(r, "Databases", public_rows(catalog.databases())))
    end
    if method == "POST" then
      if is_query(r) then
        local rows = catalog.query_databases(items.query_spec(r))
        return wire.send(r, 200, wire.feed(r, "Databases", public_rows(rows)))
      end
      local body = wire.body_object(r)
      local budget = offers.requested(r)
      local doc = catalog.create_database(body.id)
      if budget ~= nil then check(catalog.handle(body.id):set_throughput(budget)) end
      return wire.send(r, 201, catalog.public(doc))
    end
  else
    if method == "GET" then return wire.send(r, 200, catalog.public(catalog.database(id))) end
    if method == "DELETE" then
      catalog.delete_database(id)
      return wire.send(r, 204)
    end
  end
  fail(405, method .. " is not allowed here")
end

-- The one partition key range of every container.
local function pkranges(r, e)
  local etag = '"pkranges-' .. e.rid .. '"'
  r.out["etag"] = etag
  if header(r, "if-none-match") == etag then return wire.send(r, 304) end
  local range = {
    id = "0", _rid = e.rid, minInclusive = "", maxExclusive = "FF",
    ridPrefix = 0, throughputFraction = 1, status = "online",
    parents = wire.array(), _self = "dbs/" .. e.dbrid .. "/colls/" .. e.rid
      .. "/pkranges/0/", _etag = etag, _ts = 0, _lsn = 0,
  }
  return wire.send(r, 200, wire.feed(r, "PartitionKeyRanges", { range }, e.rid))
end

-- Runs `fn(e)` on the container; when its cached handle finds the
-- container gone (another worker deleted or replaced it), once more on a
-- fresh one.
local function with_container(r, dbid, coll, fn)
  for attempt = 1, 2 do
    local e = catalog.container(dbid, coll)
    r.out["x-ms-alt-content-path"] = "dbs/" .. dbid .. "/colls/" .. coll
    r.out["x-ms-content-path"] = e.rid
    local ok, err = pcall(fn, e)
    if ok then return end
    if attempt == 2 or not (wire.is_error(err) and err.status == 404 and
                            items.gone(err.message)) then
      error(err, 0)
    end
    catalog.forget(dbid, coll)
  end
end

local NOT_SUPPORTED = {
  users = "users and permissions are not supported by regolith: the master "
    .. "key is the only credential",
}

local function containers(r, dbid, id, sub, subid, extra)
  local method = r.method
  if id == nil then
    if method == "GET" then
      return wire.send(r, 200, wire.feed(r, "DocumentCollections",
                                         catalog.containers(dbid)))
    end
    if method == "POST" then
      if is_query(r) then
        local rows = catalog.query_containers(dbid, items.query_spec(r))
        return wire.send(r, 200, wire.feed(r, "DocumentCollections", public_rows(rows)))
      end
      return wire.send(r, 201, catalog.create_container(dbid, wire.body_object(r),
                                                        offers.requested(r)))
    end
    fail(405, method .. " is not allowed here")
  end
  if sub == nil then
    if method == "DELETE" then
      catalog.delete_container(dbid, id)
      return wire.send(r, 204)
    end
    return with_container(r, dbid, id, function(e)
      if method == "GET" then return wire.send(r, 200, catalog.container_doc(e)) end
      if method == "PUT" then
        return wire.send(r, 200, catalog.replace_container(e, wire.body_object(r)))
      end
      fail(405, method .. " is not allowed here")
    end)
  end
  if extra then fail(501, "attachments are not supported by regolith") end
  return with_container(r, dbid, id, function(e)
    if sub == "docs" then return items.serve(r, e, subid) end
    if sub == "sprocs" or sub == "triggers" or sub == "udfs" then
      return scripts.serve(r, e, sub, subid)
    end
    if sub == "pkranges" and subid == nil and method == "GET" then
      return pkranges(r, e)
    end
    if sub == "conflicts" and method == "GET" then
      if subid then fail(404, "Resource Not Found: conflict '" .. subid .. "'") end
      return wire.send(r, 200, wire.feed(r, "Conflicts", {}, e.rid))
    end
    fail(404, "Resource Not Found: " .. sub)
  end)
end
-- }=====================================================================


-- {=====================================================================
-- Resource ids
-- ======================================================================
local function missing(what, rid)
  fail(404, "Resource Not Found: no " .. what .. " has the resource id '"
    .. rid .. "'")
end

-- The segments of a RID-addressed path with the names its ids stand for
-- (404 for an id nothing has); an item's partition key, which its id
-- holds, goes to r.rid_pk.
function M.resolve(r, segs)
  if segs[1] ~= "dbs" or segs[2] == nil then return segs end
  local out = { "dbs" }
  out[2] = catalog.database_by_rid(segs[2]) or missing("database", segs[2])
  if segs[3] == nil then return out end
  out[3] = segs[3]
  if segs[3] ~= "colls" or segs[4] == nil then
    for i = 4, #segs do out[i] = segs[i] end
    return out
  end
  out[4] = catalog.container_by_rid(out[2], segs[4]) or missing("container", segs[4])
  out[5] = segs[5]
  if segs[6] == nil then return out end
  local e = catalog.container(out[2], out[4])
  if segs[5] == "docs" then
    local id, pk = items.rid_item(e, segs[6])
    if id == nil then missing("item of container '" .. out[4] .. "'", segs[6]) end
    out[6], r.rid_pk = id, pk
  elseif segs[5] == "sprocs" or segs[5] == "triggers" or segs[5] == "udfs" then
    out[6] = scripts.by_rid(e, segs[5], segs[6]) or missing(segs[5]:sub(1, -2), segs[6])
  else
    out[6] = segs[6]
  end
  for i = 7, #segs do out[i] = segs[i] end
  return out
end
-- }=====================================================================


local function route(r)
  if not config.ready then fail(500, "the gateway is not configured (see nginx's error log)") end
  local segs = r.segs
  local err, how = auth.verify(config.key, r.method, segs, header(r, "authorization"),
                               header(r, "x-ms-date") or header(r, "date"), SKEW)
  if err then fail(401, err) end
  if segs[1] == "offers" then
    if #segs > 2 then fail(404, "Resource Not Found: " .. table.concat(segs, "/")) end
    return offers.serve(r, segs[2], items.query_spec, is_query(r))
  end
  if how == "rid" then segs = M.resolve(r, segs) end
  local n = #segs
  if n == 0 then
    if r.method ~= "GET" then fail(405, r.method .. " is not allowed here") end
    return account(r)
  end
  if NOT_SUPPORTED[segs[1]] then fail(501, NOT_SUPPORTED[segs[1]]) end
  if segs[1] ~= "dbs" then fail(404, "Resource Not Found: " .. segs[1]) end
  if n <= 2 then return databases(r, segs[2]) end
  if segs[3] == "users" then fail(501, NOT_SUPPORTED.users) end
  if segs[3] ~= "colls" then fail(404, "Resource Not Found: " .. segs[3]) end
  return containers(r, segs[2], segs[4], segs[5], segs[6], segs[7])
end

-- The content handler.
function M.handle()
  local r = wire.request()
  local ok, err = pcall(route, r)
  if not ok then
    if wire.is_error(err) then
      wire.send_error(r, err.status, err.message, err.substatus,
                      err.retry_after_ms)
    else
      ngx.log(ngx.ERR, "gateway: ", tostring(err))
      wire.send_error(r, 500, "internal error: " .. tostring(err))
    end
  end
  return wire.respond(r)
end

return M
