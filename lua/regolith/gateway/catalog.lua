--[[
regolith.gateway.catalog: where the gateway's databases, containers and
scripts live, and the handles each nginx worker keeps on them.

Layout under the root directory (REGOLITH_GATEWAY_ROOT):

    <root>/<dir(db)>/    one regolith database per gateway database; its
                         containers are the gateway database's containers,
                         under their own ids, with their procedures and
                         triggers
    <root>/_gateway/     the catalog: a regolith database with containers
                         databases (/id), collections (/_db), sprocs,
                         triggers and udfs (/_coll): the Cosmos resources as the
                         SDKs see them (RIDs, _self, the definition as
                         given), which regolith has no place for

dir(db) is the id with every byte outside [A-Za-z0-9._~-], and a leading
"." or "_", written %XX: it never names the catalog, "." or "..".

What exists is regolith's to say: a container is there when the regolith
database holds it, a script when the container holds it.  The catalog adds
to them; an entry missing (a container created from Lua, a crash between
the two writes) is made again from regolith's own definition, an entry left
over (a container deleted from Lua) is dropped, when it is met.  A
database, which regolith has no list of, exists when the catalog says so;
creating one over a directory that holds a regolith database adopts its
containers.

Handles.  Each worker opens the catalog and, lazily, each database it
serves; container handles are cached.  A container deleted (or deleted and
created again) by another worker or process makes its cached handle answer
404 "has been deleted": the caller drops it (M.forget) and looks again.
]]

local regolith = require "regolith"
local wire = require "regolith.gateway.wire"
local policy = require "regolith.gateway.policy"

local json = regolith.json
local fail, check = wire.fail, wire.check

local M = {}

local root, opts
local cat = {}        -- the catalog's db handle and containers
local dbs = {}        -- [id] = regolith db handle (this worker's)
local conts = {}      -- [db .. "/" .. coll] = container entry

-- {=====================================================================
-- Names, RIDs, resources
-- ======================================================================

-- The directory of a database id (the module comment).
function M.dirname(id)
  local dir = id:gsub("[^%w%._~%-]", function(c)
    return ("%%%02X"):format(c:byte())
  end):gsub("^[%._]", function(c) return ("%%%02X"):format(c:byte()) end)
  return dir
end

-- Cosmos's id rules (and what a directory name can hold): 400 otherwise.
function M.check_id(id, what)
  if type(id) ~= "string" or id == "" then
    fail(400, what .. " id must be a non-empty string")
  end
  if id:find("[/\\?#%z]") then
    fail(400, what .. " id must not contain '/', '\\', '?', '#' or NUL")
  end
  if #id > 255 then fail(400, what .. " id is longer than 255 bytes") end
  if id:sub(-1) == " " then fail(400, what .. " id must not end with a space") end
end

-- A RID: `n` random bytes in base64 with "/" written "-"; `prefix` (a
-- RID) comes first, and `high` sets the top bit of the first new byte (as
-- a collection RID has it).
local function rid(prefix, n, high)
  local bytes = prefix and ngx.decode_base64((prefix:gsub("%-", "/"))) or ""
  for i = 1, n do
    local b = math.random(0, 255)
    if i == 1 and high then b = 128 + b % 128 end
    bytes = bytes .. string.char(b)
  end
  return (ngx.encode_base64(bytes):gsub("/", "-"))
end

local PRIVATE = { "_lsn", "_db", "_coll", "_spec" }

-- A catalog document as the SDKs see it (private fields removed).
function M.public(doc)
  for _, k in ipairs(PRIVATE) do doc[k] = nil end
  return doc
end

-- JSON text with object members in name order: the same value always
-- gives the same text (a spec, compared with the one last seen).
local function jsontext(v)
  if type(v) ~= "table" or v == regolith.null then return (assert(json.encode(v))) end
  local out = {}
  if v[1] ~= nil then
    for i, x in ipairs(v) do out[i] = jsontext(x) end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do out[i] = jsontext(k) .. ":" .. jsontext(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end
-- }=====================================================================


-- {=====================================================================
-- Opening
-- ======================================================================
local function catalog_container(name, pk)
  local c = cat.db:container(name)
  if c then return c end
  local made, msg, status = cat.db:create_container(name, { partition_key = pk })
  if made then return made end
  if status == 409 then return assert(cat.db:container(name)) end
  error(msg)
end

-- Opens the catalog (creating it) under `dir`; `o.sync` for every database.
function M.open(dir, o)
  root, opts = dir, o or {}
  cat.db = assert(regolith.open(root .. "/_gateway", { sync = opts.sync }))
  cat.databases = catalog_container("databases", "/id")
  cat.collections = catalog_container("collections", "/_db")
  cat.sprocs = catalog_container("sprocs", "/_coll")
  cat.triggers = catalog_container("triggers", "/_coll")
  cat.udfs = catalog_container("udfs", "/_coll")
end

function M.close()
  for id, db in pairs(dbs) do db:close(); dbs[id] = nil end
  for k in pairs(conts) do conts[k] = nil end
  if cat.db then cat.db:close() end
  cat = {}
end
-- }=====================================================================


-- {=====================================================================
-- Databases
-- ======================================================================
local function db_doc(id)
  local doc, msg, status = cat.databases:read(id, id)
  if doc then return doc end
  if status == 404 then
    fail(404, "Entity with the specified id does not exist in the system.")
  end
  fail(status, msg)
end

-- A database's catalog resource (404 when there is none).
function M.database(id)
  return db_doc(id)
end

-- This worker's handle on a database (which must exist).
function M.handle(id)
  local db = dbs[id]
  if db then return db end
  db = check(regolith.open(root .. "/" .. M.dirname(id), { sync = opts.sync }))
  dbs[id] = db
  return db
end

function M.create_database(id)
  M.check_id(id, "a database")
  local dir = M.dirname(id)
  if #dir > 255 then
    fail(400, "a database id takes at most 255 bytes once escaped for its "
      .. "directory name (" .. dir .. ")")
  end
  local r = rid(nil, 4)
  local doc, msg, status = cat.databases:create({
    id = id, _rid = r, _self = "dbs/" .. r .. "/", _colls = "colls/",
    _users = "users/" })
  if not doc then
    if status == 409 then
      fail(409, "Entity with the specified id already exists in the system.")
    end
    fail(status, msg)
  end
  local ok, err = pcall(M.handle, id)
  if not ok then                         -- no directory: no database
    cat.databases:delete(id, id)
    error(err, 0)
  end
  return doc
end

-- Deletes a database's containers, then its catalog entry (so that a
-- failure part-way leaves a database a second delete finishes).
function M.delete_database(id)
  db_doc(id)
  local db = M.handle(id)
  for _, name in ipairs(db:containers()) do M.delete_container(id, name) end
  check(cat.databases:delete(id, id))
end

function M.databases()
  return check(cat.databases:query("SELECT * FROM c"))
end

function M.query_databases(sql, params)
  return check(cat.databases:query(sql, params))
end
-- }=====================================================================


-- {=====================================================================
-- Containers
-- ======================================================================
local function ckey(dbid, coll)
  return dbid .. "/" .. coll
end

-- The catalog document of a container from its regolith spec, on top of
-- what the catalog held (the definition as last given, its RID).
local function coll_doc(dbid, dbrid, coll, spec, base)
  local doc = policy.definition(coll, spec, base)
  local r = base and base._rid or rid(dbrid, 4, true)
  doc._rid = r
  doc._self = "dbs/" .. dbrid .. "/colls/" .. r .. "/"
  doc._docs, doc._sprocs, doc._triggers = "docs/", "sprocs/", "triggers/"
  doc._udfs, doc._conflicts = "udfs/", "conflicts/"
  doc._db = dbid
  doc._spec = jsontext(spec)
  if base then return check(cat.collections:upsert(doc, { partition_key = dbid })) end
  -- a first entry: created, so that two workers meeting the container at
  -- once agree on one RID (the second takes the first's)
  local made, msg, status = cat.collections:create(doc, { partition_key = dbid })
  if made then return made end
  if status ~= 409 then fail(status, msg) end
  return coll_doc(dbid, dbrid, coll, spec, check(cat.collections:read(coll, dbid)))
end

-- The catalog document of a live container, made again when regolith's
-- spec moved away from it (or it is missing).
local function current_doc(dbid, dbrid, c, doc)
  local spec = c:spec()
  spec.name = nil
  if doc and doc._spec == jsontext(spec) then return doc end
  return coll_doc(dbid, dbrid, c:name(), spec, doc)
end

-- A container: {c = handle, rid, dbrid, db, id, paths (of the partition
-- key), ridbytes (the RID decoded)} (404 when missing).
function M.container(dbid, coll)
  local key = ckey(dbid, coll)
  local e = conts[key]
  if e then return e end
  local dbdoc = db_doc(dbid)
  local db = M.handle(dbid)
  local c, msg, status = db:container(coll)
  if not c then
    if status == 404 then fail(404, "Resource Not Found: container '" .. coll .. "'") end
    fail(status, msg)
  end
  local doc = current_doc(dbid, dbdoc._rid, c, cat.collections:read(coll, dbid))
  local pk = c:spec().partition_key
  e = { c = c, rid = doc._rid, dbrid = dbdoc._rid, db = dbid, id = coll,
        paths = type(pk) == "string" and { pk } or pk,
        ridbytes = ngx.decode_base64((doc._rid:gsub("%-", "/"))) }
  conts[key] = e
  return e
end

-- Drops a cached container handle (its container was deleted).
function M.forget(dbid, coll)
  conts[ckey(dbid, coll)] = nil
end

-- The Cosmos resource of a container.
function M.container_doc(e)
  local dbdoc = db_doc(e.db)
  return M.public(current_doc(e.db, dbdoc._rid, e.c,
                              cat.collections:read(e.id, e.db)))
end

-- Creates a container from its Cosmos definition; `throughput` is the
-- budget its create asked for (regolith's setting), or nil.
function M.create_container(dbid, def, throughput)
  local dbdoc = db_doc(dbid)
  if type(def.id) ~= "string" then fail(400, "a container needs an id") end
  M.check_id(def.id, "a container")
  local spec = policy.spec(def)
  spec.throughput = throughput
  local base = {}
  for k, v in pairs(def) do if k:sub(1, 1) ~= "_" then base[k] = v end end
  local db = M.handle(dbid)
  -- the core checks what policy.spec hands over as given (the vector
  -- policy): a spec it refuses raises, which the client gets as 400
  local made, c, msg, status = pcall(db.create_container, db, def.id, spec)
  if not made then
    fail(400, (tostring(c):gsub("^.-create_container: ", "")))
  end
  if not c then
    if status == 409 then
      fail(409, "Entity with the specified id already exists in the system.")
    end
    fail(status, msg)
  end
  local ok, doc = pcall(coll_doc, dbid, dbdoc._rid, def.id, spec, base)
  if not ok then
    db:delete_container(def.id)
    error(doc, 0)
  end
  M.forget(dbid, def.id)
  return M.public(doc)
end

function M.replace_container(e, def)
  if def.id ~= e.id then fail(400, "the body's id differs from the container's") end
  local spec = policy.spec(def)
  spec.throughput = e.c:spec().throughput      -- offers change it, not PUT
  local db = M.handle(e.db)
  local made, c, msg, status = pcall(db.replace_container, db, e.id, spec)
  if not made then
    fail(400, (tostring(c):gsub("^.-replace_container: ", "")))
  end
  check(c, msg, status)
  local base = cat.collections:read(e.id, e.db) or {}
  for k, v in pairs(def) do if k:sub(1, 1) ~= "_" then base[k] = v end end
  return M.public(coll_doc(e.db, e.dbrid, e.id, spec, base))
end

-- Removes a container's catalog entries (itself, its scripts).
local function drop_entries(dbid, coll)
  local key = ckey(dbid, coll)
  cat.collections:delete(coll, dbid)
  for _, kind in ipairs({ cat.sprocs, cat.triggers, cat.udfs }) do
    for _, id in ipairs(check(kind:query("SELECT VALUE c.id FROM c", nil,
                                         { partition_key = key }))) do
      kind:delete(id, key)
    end
  end
end

function M.delete_container(dbid, coll)
  db_doc(dbid)
  local db = M.handle(dbid)
  local ok, msg, status = db:delete_container(coll)
  if not ok and status ~= 404 then fail(status, msg) end
  drop_entries(dbid, coll)
  M.forget(dbid, coll)
  if not ok then fail(404, "Resource Not Found: container '" .. coll .. "'") end
end

-- Brings the catalog in line with the database's containers; returns the
-- Cosmos resources in name order.
function M.containers(dbid)
  local dbdoc = db_doc(dbid)
  local db = M.handle(dbid)
  local docs = {}
  for _, d in ipairs(check(cat.collections:query("SELECT * FROM c", nil,
                                                 { partition_key = dbid }))) do
    docs[d.id] = d
  end
  local out = {}
  for _, name in ipairs(db:containers()) do
    local c = db:container(name)
    if c then
      out[#out + 1] = M.public(current_doc(dbid, dbdoc._rid, c, docs[name]))
      docs[name] = nil
    end
  end
  for name in pairs(docs) do drop_entries(dbid, name) end
  return out
end

function M.query_containers(dbid, sql, params, query_opts)
  M.containers(dbid)
  query_opts = query_opts or {}
  query_opts.partition_key = dbid
  return check(cat.collections:query(sql, params, query_opts))
end
-- }=====================================================================


-- {=====================================================================
-- Resource ids
-- ======================================================================

-- The id of the database whose RID is `rid`, or nil.
function M.database_by_rid(rid)
  local ids = check(cat.databases:query("SELECT VALUE c.id FROM c WHERE c._rid = @r",
                                        { r = rid }))
  return ids[1]
end

-- The id of the container of database `dbid` whose RID is `rid`, or nil
-- (the catalog brought in line with the database first when it has none).
function M.container_by_rid(dbid, rid)
  local function find()
    return check(cat.collections:query("SELECT VALUE c.id FROM c WHERE c._rid = @r",
                                       { r = rid }, { partition_key = dbid }))[1]
  end
  local id = find()
  if id == nil then
    M.containers(dbid)
    id = find()
  end
  return id
end

-- The id of the script of a kind whose RID is `rid` in the catalog's
-- partition `key`, or nil.
function M.script_by_rid(kind, key, rid)
  return check(cat[kind]:query("SELECT VALUE c.id FROM c WHERE c._rid = @r",
                               { r = rid }, { partition_key = key }))[1]
end
-- }=====================================================================


-- {=====================================================================
-- Scripts: the catalog side (regolith.gateway.scripts has the rest)
-- ======================================================================

-- The catalog container of a script kind ("sprocs", "triggers", "udfs").
function M.scripts(kind)
  return cat[kind]
end

-- The partition key of a container's scripts in the catalog.
function M.script_key(e)
  return ckey(e.db, e.id)
end

-- A script's RID (under its container's).
function M.script_rid(e)
  return rid(e.rid, 4)
end

return M
