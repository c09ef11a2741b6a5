--[[
regolith.gateway.scripts: stored procedures, triggers and user-defined
functions of a container (docs/gateway.md).

    POST/GET  .../sprocs           create / list
    GET/PUT/DELETE .../sprocs/{id} read / replace / delete
    POST      .../sprocs/{id}      execute: the body is the argument array,
                                   x-ms-documentdb-partitionkey the partition
    POST/GET  .../triggers         the same for triggers {id, body,
    GET/PUT/DELETE .../triggers/{id}  triggerType, triggerOperation}
    POST/GET  .../udfs             the same for user-defined functions
    GET/PUT/DELETE .../udfs/{id}   (called by queries as udf.name(...))

The script's body is what regolith stores and runs: JavaScript, as the
SDKs send it (`function name(...) { ... }`, run by regolith's JavaScript
runtime with Cosmos DB's server-side API), or Lua (`return function(ctx,
...) ... end`); regolith tells them apart by the source (docs/scripts.md).
regolith holds the source and the trigger's definition; the catalog adds
the Cosmos resource fields (RID, _self) and the trigger's operation as it
was named.
]]

local regolith = require "regolith"
local wire = require "regolith.gateway.wire"
local catalog = require "regolith.gateway.catalog"
local items = require "regolith.gateway.items"

local json = regolith.json
local fail, check, header = wire.fail, wire.check, wire.header
local unpack = table.unpack or unpack

local M = {}

-- Trigger names both ways.
local TYPES = { Pre = "pre", Post = "post" }
local OPERATIONS = { All = "all", Create = "create", Replace = "replace",
                     Update = "replace", Delete = "delete" }
local TYPE_NAME = { pre = "Pre", post = "Post" }
local OPERATION_NAME = { all = "All", create = "Create", replace = "Replace",
                         delete = "Delete" }

-- What a Cosmos enum name maps to, compared case-insensitively (the JS SDK
-- sends "pre", the .NET one "Pre").
local function lookup(map, v)
  if type(v) ~= "string" then return nil end
  for k, x in pairs(map) do if k:lower() == v:lower() then return x end end
end

local function enum(map, v, what)
  local x = lookup(map, v)
  if x then return x end
  local names = {}
  for k in pairs(map) do names[#names + 1] = k end
  table.sort(names)
  fail(400, what .. " must be one of " .. table.concat(names, ", "))
end

-- What each kind of script is, in regolith and in the catalog.
local KINDS = {
  sprocs = {
    feed = "StoredProcedures",
    names = function(c) return c:procedures() end,
    get = function(c, id) return c:procedure(id) end,
    put = function(c, id, def, replace)
      if replace then return c:replace_procedure(id, def) end
      return c:create_procedure(id, def)
    end,
    delete = function(c, id) return c:delete_procedure(id) end,
    -- the regolith definition of a request body
    def = function(body) return body.body end,
    -- the Cosmos fields of a regolith definition, given the catalog's
    doc = function(def) return { body = def } end,
  },
  udfs = {
    feed = "UserDefinedFunctions",
    names = function(c) return c:udfs() end,
    get = function(c, id) return c:udf(id) end,
    put = function(c, id, def, replace)
      if replace then return c:replace_udf(id, def) end
      return c:create_udf(id, def)
    end,
    delete = function(c, id) return c:delete_udf(id) end,
    def = function(body) return body.body end,
    doc = function(def) return { body = def } end,
  },
  triggers = {
    feed = "Triggers",
    names = function(c) return c:triggers() end,
    get = function(c, id) return c:trigger(id) end,
    put = function(c, id, def, replace)
      if replace then return c:replace_trigger(id, def) end
      return c:create_trigger(id, def)
    end,
    delete = function(c, id) return c:delete_trigger(id) end,
    def = function(body)
      return { type = enum(TYPES, body.triggerType, "triggerType"),
               operation = enum(OPERATIONS, body.triggerOperation or "All",
                                "triggerOperation"),
               source = body.body }
    end,
    doc = function(def, named)
      -- the names as given while they still say the same ("Update" and
      -- "Replace" both name regolith's replace)
      local ty, op = TYPE_NAME[def.type], OPERATION_NAME[def.operation]
      if named and lookup(TYPES, named.triggerType) == def.type then
        ty = named.triggerType
      end
      if named and lookup(OPERATIONS, named.triggerOperation) == def.operation then
        op = named.triggerOperation
      end
      return { body = def.source, triggerType = ty, triggerOperation = op }
    end,
  },
}

-- The catalog document of a script from its regolith definition, on top
-- of the catalog's (kept when it still says the same); `named` gives the
-- names of the trigger's enums (the request's, else the catalog's).
local function script_doc(e, kind, id, def, base, named)
  local k = KINDS[kind]
  local fields = k.doc(def, named or base)
  if base then
    local same = true
    for f, v in pairs(fields) do same = same and base[f] == v end
    if same then return base end
  end
  local r = base and base._rid or catalog.script_rid(e)
  local doc = { id = id, _rid = r, _coll = catalog.script_key(e),
    _self = "dbs/" .. e.dbrid .. "/colls/" .. e.rid .. "/" .. kind .. "/" .. r .. "/" }
  for f, v in pairs(fields) do doc[f] = v end
  return check(catalog.scripts(kind):upsert(doc, { partition_key = doc._coll }))
end

local function not_found(msg, status)
  if status == 404 and not items.gone(msg) then
    fail(404, "Resource Not Found: " .. msg)
  end
  fail(status, msg)
end

-- A script's Cosmos resource.
local function read_doc(e, kind, id)
  local def, msg, status = KINDS[kind].get(e.c, id)
  if def == nil then not_found(msg, status) end
  local base = catalog.scripts(kind):read(id, catalog.script_key(e))
  return catalog.public(script_doc(e, kind, id, def, base))
end

-- Every script of a kind, the catalog brought in line with regolith.
local function list(e, kind)
  local key = catalog.script_key(e)
  local store = catalog.scripts(kind)
  local docs = {}
  for _, d in ipairs(check(store:query("SELECT * FROM c", nil,
                                       { partition_key = key }))) do
    docs[d.id] = d
  end
  local out = {}
  for _, id in ipairs(check(KINDS[kind].names(e.c))) do
    local def = KINDS[kind].get(e.c, id)
    if def ~= nil then
      out[#out + 1] = catalog.public(script_doc(e, kind, id, def, docs[id]))
    end
    docs[id] = nil
  end
  for id in pairs(docs) do store:delete(id, key) end
  return out
end

-- Creates or replaces a script from a request body.
local function put(r, e, kind, id, replace)
  local body = wire.body_object(r)
  if replace then
    if body.id ~= id then fail(400, "the body's id differs from the one in the path") end
  else
    if type(body.id) ~= "string" then fail(400, "a script needs an id") end
    catalog.check_id(body.id, "a script")
    id = body.id
  end
  if type(body.body) ~= "string" then
    fail(400, "a script needs a body (its JavaScript or Lua source)")
  end
  local k = KINDS[kind]
  local def = k.def(body)
  local ok, msg, status = k.put(e.c, id, def, replace)
  if not ok then
    if status == 409 then
      fail(409, "Entity with the specified id already exists in the system.")
    end
    not_found(msg, status)
  end
  local base = catalog.scripts(kind):read(id, catalog.script_key(e))
  local done, doc = pcall(script_doc, e, kind, id, def, replace and base or nil,
                          body)
  if not done then
    if not replace then k.delete(e.c, id) end    -- nothing half-made
    error(doc, 0)
  end
  return wire.send(r, replace and 200 or 201, catalog.public(doc))
end

local function delete(r, e, kind, id)
  local ok, msg, status = KINDS[kind].delete(e.c, id)
  if not ok then not_found(msg, status) end
  catalog.scripts(kind):delete(id, catalog.script_key(e))
  return wire.send(r, 204)
end

-- Runs a stored procedure.
local function execute(r, e, id)
  local pk = items.partition_key(r, e, true)
  local text = wire.body_text(r)
  local args = {}
  if text ~= "" then
    args = wire.body(r)
    if type(args) ~= "table" or (next(args) ~= nil and args[1] == nil) then
      args = { args }                  -- one argument, not in an array
    end
  end
  local result, info, status = e.c:execute(id, pk, unpack(args, 1, #args))
  if result == nil then not_found(info, status) end
  wire.charged(r, info)
  if wire.flag(r, "x-ms-documentdb-script-enable-logging") then
    r.out["x-ms-documentdb-script-log-results"] =
      ngx.escape_uri(table.concat(info.log, "\n"))
  end
  return wire.send(r, 200, json.encode(result), true)
end

local function queries(r, e, kind)
  local sql, params = items.query_spec(r)
  list(e, kind)
  local rows, info = check(catalog.scripts(kind):query(sql, params,
    { partition_key = catalog.script_key(e) }))
  for _, d in ipairs(rows) do if type(d) == "table" then catalog.public(d) end end
  wire.charged(r, info)
  return wire.send(r, 200, wire.feed(r, KINDS[kind].feed, rows, e.rid))
end

-- The id of the script of a kind whose RID is `rid`, or nil.
function M.by_rid(e, kind, rid)
  local key = catalog.script_key(e)
  local id = catalog.script_by_rid(kind, key, rid)
  if id == nil then
    list(e, kind)
    id = catalog.script_by_rid(kind, key, rid)
  end
  return id
end

-- Serves `.../<kind>` (id nil) and `.../<kind>/{id}`.
function M.serve(r, e, kind, id)
  local method = r.method
  if id == nil then
    if method == "GET" then
      return wire.send(r, 200, wire.feed(r, KINDS[kind].feed, list(e, kind), e.rid))
    end
    if method == "POST" then
      if wire.flag(r, "x-ms-documentdb-isquery") or
         (header(r, "content-type") or ""):lower():find("query+json", 1, true) then
        return queries(r, e, kind)
      end
      return put(r, e, kind, nil, false)
    end
  else
    if method == "GET" then return wire.send(r, 200, read_doc(e, kind, id)) end
    if method == "PUT" then return put(r, e, kind, id, true) end
    if method == "DELETE" then return delete(r, e, kind, id) end
    if method == "POST" and kind == "sprocs" then return execute(r, e, id) end
  end
  fail(405, method .. " is not allowed here")
end

return M
