--[[
regolith.gateway.offers: throughput offers (docs/gateway.md, Offers).

    GET  /offers            every offer: one per database and container
                            that has a budget (regolith's throughput)
    POST /offers            a query of them, by resource, offerResourceId
                            or id
    GET  /offers/{id}       one offer
    PUT  /offers/{id}       replace: the new budget, at once

An offer is not stored: it is made from the budget of the resource it
names (c:spec().throughput, db:throughput(); docs/throughput.md), and its id
is that resource's RID (a database's 4 bytes, a container's 8, whose first 4
are its database's), so that it always says the budget in force.  Manual
throughput is `content.offerThroughput`; autoscale is
`content.offerAutopilotSettings.maxThroughput`, with offerThroughput the
tenth of it the budget scales down to.  The headers of a create
(x-ms-offer-throughput, x-ms-cosmos-offer-autopilot-settings) give the
budget a new database or container starts with (M.requested).
]]

local regolith = require "regolith"
local wire = require "regolith.gateway.wire"
local catalog = require "regolith.gateway.catalog"

local json = regolith.json
local fail, check, header = wire.fail, wire.check, wire.header

local M = {}

-- The budget a create asks for (its headers), as regolith takes it, or nil.
function M.requested(r)
  local auto = header(r, "x-ms-cosmos-offer-autopilot-settings")
  if auto then
    local d = json.decode(auto)
    local max = type(d) == "table" and tonumber(d.maxThroughput)
    if not max or max < 1 or max ~= math.floor(max) then
      fail(400, "x-ms-cosmos-offer-autopilot-settings must be "
        .. "{\"maxThroughput\": a whole number}")
    end
    return { autoscale_max = max }
  end
  local n = header(r, "x-ms-offer-throughput")
  if n then
    local v = tonumber(n)
    if not v or v < 1 or v ~= math.floor(v) then
      fail(400, "x-ms-offer-throughput must be a whole number of RU/s")
    end
    return v
  end
  return nil
end

-- The offer of a resource (its catalog document) with budget `setting`.
local function offer(res, setting)
  local content
  if type(setting) == "table" and setting.autoscale_max then
    local max = setting.autoscale_max
    content = { offerThroughput = math.max(1, math.floor(max / 10)),
                offerAutopilotSettings = { maxThroughput = max } }
  else
    local n = type(setting) == "table" and setting.manual or setting
    content = { offerThroughput = n, offerIsRUPerMinuteThroughputEnabled = false }
  end
  local text = json.encode(content)
  return {
    id = res._rid, _rid = res._rid, _self = "offers/" .. res._rid .. "/",
    offerVersion = "V2", offerType = "Invalid", resource = res._self,
    offerResourceId = res._rid, content = content,
    _etag = '"' .. ngx.md5(res._rid .. text) .. '"', _ts = res._ts or 0,
  }
end

-- Every offer: {doc, set = function(setting)}.
local function all()
  local out = {}
  for _, d in ipairs(catalog.databases()) do
    local db = catalog.handle(d.id)
    local s = db:throughput()
    if s ~= nil then
      out[#out + 1] = { doc = offer(d, s), set = function(x) return db:set_throughput(x) end }
    end
    for _, cdoc in ipairs(catalog.containers(d.id)) do
      local e = catalog.container(d.id, cdoc.id)
      local cs = e.c:spec().throughput
      if cs ~= nil then
        out[#out + 1] = { doc = offer(cdoc, cs),
                          set = function(x) return e.c:set_throughput(x) end }
      end
    end
  end
  return out
end

-- The offer whose id is `id`: {doc, set}, or a 404.
local function find(id)
  local bytes = ngx.decode_base64((id:gsub("%-", "/")))
  local dbid, coll
  if bytes and (#bytes == 4 or #bytes == 8) then
    dbid = catalog.database_by_rid((ngx.encode_base64(bytes:sub(1, 4)):gsub("/", "-")))
    if dbid and #bytes == 8 then coll = catalog.container_by_rid(dbid, id) end
  end
  if dbid and #bytes == 4 then
    local db = catalog.handle(dbid)
    local s = db:throughput()
    if s ~= nil then
      return { doc = offer(catalog.database(dbid), s),
               set = function(x) return db:set_throughput(x) end }
    end
  elseif coll then
    local e = catalog.container(dbid, coll)
    local s = e.c:spec().throughput
    if s ~= nil then
      return { doc = offer(catalog.container_doc(e), s),
               set = function(x) return e.c:set_throughput(x) end }
    end
  end
  fail(404, "Resource Not Found: no offer has the id '" .. id .. "' (a database "
    .. "or container has an offer when it has a throughput budget)")
end

-- The condition of an offers query the SDKs send: the offers whose
-- `field` is `value` (resource, offerResourceId or id), or every offer.
local function condition(sql, params)
  local field, rest = sql:match("[Ww][Hh][Ee][Rr][Ee]%s+[%w_]+%.([%w_]+)%s*=%s*(.-)%s*$")
  if not field then
    if sql:find("[Ww][Hh][Ee][Rr][Ee]") then
      fail(400, "offers can be queried by resource, offerResourceId or id "
        .. "(WHERE r.resource = ...)")
    end
    return nil
  end
  local value = rest:match('^"(.*)"$') or rest:match("^'(.*)'$")
  if not value and rest:match("^@[%w_]+$") then
    value = params and (params[rest] or params[rest:sub(2)])
  end
  if (field ~= "resource" and field ~= "offerResourceId" and field ~= "id") or
     type(value) ~= "string" then
    fail(400, "offers can be queried by resource, offerResourceId or id "
      .. "(WHERE r.resource = ...)")
  end
  return field, value
end

-- A replacement's budget, from its content.
local function setting_of(body)
  local content = type(body) == "table" and body.content
  if type(content) ~= "table" then fail(400, "an offer needs its content") end
  local auto = content.offerAutopilotSettings
  if type(auto) == "table" and auto.maxThroughput ~= nil then
    local max = tonumber(auto.maxThroughput)
    if not max or max < 1 or max ~= math.floor(max) then
      fail(400, "offerAutopilotSettings.maxThroughput must be a whole number")
    end
    return { autoscale_max = max }
  end
  local n = tonumber(content.offerThroughput)
  if not n or n < 1 or n ~= math.floor(n) then
    fail(400, "content.offerThroughput must be a whole number of RU/s")
  end
  return n
end

-- Serves /offers (id nil) and /offers/{id}; `query_spec` reads a query.
function M.serve(r, id, query_spec, is_query)
  local method = r.method
  if id == nil then
    if method == "GET" then
      local docs = {}
      for _, o in ipairs(all()) do docs[#docs + 1] = o.doc end
      return wire.send(r, 200, wire.feed(r, "Offers", docs))
    end
    if method == "POST" and is_query then
      local field, value = condition(query_spec(r))
      local docs = {}
      for _, o in ipairs(all()) do
        if field == nil or o.doc[field] == value or
           (field == "resource" and (o.doc.resource:gsub("/$", "")) == (value:gsub("/$", ""))) then
          docs[#docs + 1] = o.doc
        end
      end
      return wire.send(r, 200, wire.feed(r, "Offers", docs))
    end
  else
    local o = find(id)
    if method == "GET" then return wire.send(r, 200, o.doc) end
    if method == "PUT" then
      check(o.set(setting_of(wire.body_object(r))))
      return wire.send(r, 200, find(id).doc)
    end
  end
  fail(405, method .. " is not allowed here")
end

return M
