--[[
regolith.explorer.api: the Data Explorer's JSON API, as a plain function
of a request, so that it runs in nginx (regolith.explorer.nginx) and in
the specs alike.

    local api = require("regolith.explorer.api").new(db, { readonly = false })
    local status, body, headers = api:handle{ method = "GET",
      path = "/api/containers", args = {}, body = nil, headers = {} }

`body` is a Lua value to send as JSON.  Every answer is JSON: a success
with its data (and `info`, with the request charge, where there is one);
a failure as {"error": message, "status": n} with that HTTP status.  What
a request gets wrong (an unknown path or method, a body that is not JSON,
a parameter of the wrong type) is a 4xx with a message: the request is
checked before regolith sees it, since regolith raises on misuse.  The
routes (docs/explorer.md):

    GET    /api/database
    GET    /api/containers                  POST {name, spec}
    GET    /api/containers/C                DELETE
    PUT    /api/containers/C                {spec}: db:replace_container
                                            (indexing, TTL, throughput...)
    POST   /api/containers/C/upload         [documents]: upserted one by
                                            one; {written, rejected, info}
    GET    /api/containers/C/items?pk=&max_items=&continuation=
    POST   /api/containers/C/items          a document (create)
    GET    /api/containers/C/items/ID?pk=   PUT (If-Match)   DELETE (If-Match)
    POST   /api/containers/C/query          {sql, params, partition_key,
                                             max_items, continuation,
                                             full_text_score_scope}
    GET    /api/containers/C/procedures     POST {name, source}
    GET    /api/containers/C/procedures/N   PUT {source}     DELETE
    POST   /api/containers/C/procedures/N/execute  {partition_key, args}
    GET    /api/containers/C/triggers       POST {name, type, operation,
                                                  automatic, source}
    GET    /api/containers/C/triggers/N     PUT {...}        DELETE
    GET    /api/containers/C/feed?mode=&start=&continuation=&max_items=&pk=
    GET    /api/containers/C/processors/N?mode=
    POST   /api/containers/C/processors/N/redrive  {letter: n | "all"}
    POST   /api/containers/C/processors/N/drop

Requests must carry the header X-Regolith-Explorer (the page's fetch sets
it): a page of another site cannot add it without the browser asking
first, which this API never allows, so no other site can drive the
database through the user's browser.  When `hosts` is given, the Host
header must be one of them (against DNS rebinding).
]]

local regolith = require "regolith"
local cjson = require "regolith.cli.json"
local failure = require "regolith.failure"
local keys = require "regolith.keys"
local processor = require "regolith.processor"

local decode = regolith.json.decode
local null = regolith.null

local M = {}

local Api = {}
Api.__index = Api

local MAX_ITEMS = 10000         -- the largest page the page may ask for

function M.new(db, opts)
  opts = opts or {}
  return setmetatable({ db = db, readonly = opts.readonly or false,
    hosts = opts.hosts, path = opts.path }, Api)
end

-- {=====================================================================
-- Answers and request values
-- ======================================================================
-- A failure (regolith.failure) raised through the handlers:
-- bad(status, message).
local function bad(status, message, ...)
  if select("#", ...) > 0 then message = message:format(...) end
  failure.raise{ status = status, message = message }
end

-- ok(v, msg, status): v, or the failure regolith returned.
local ok = failure.check

-- A JSON value from a query argument (pk=...): 400 when it is not JSON.
local function json_arg(text, name)
  if text == nil or text == "" then return nil end
  if type(text) ~= "string" then bad(400, "'%s' is given more than once", name) end
  local v, msg = decode(text)
  if v == nil then bad(400, "'%s' is not JSON: %s", name, msg) end
  return v
end

local function body_of(req, want)
  if req.body == nil or req.body == "" then bad(400, "the request has no body") end
  local v, msg = decode(req.body)
  if v == nil then bad(400, "the body is not JSON: %s", msg) end
  if want == "object" and (type(v) ~= "table" or v[1] ~= nil or
      getmetatable(v) == getmetatable(regolith.array())) then
    bad(400, "the body must be a JSON object")
  end
  if want == "array" and (type(v) ~= "table" or (v[1] == nil and
      getmetatable(v) ~= getmetatable(regolith.array()))) then
    bad(400, "the body must be a JSON array")
  end
  return v
end

local function field(t, name, kind, required)
  local v = t[name]
  if v == nil or v == null then
    if required then bad(400, "'%s' is required", name) end
    return nil
  end
  if kind == "integer" then
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v > MAX_ITEMS then
      bad(400, "'%s' must be a whole number from 1 to %d", name, MAX_ITEMS)
    end
  elseif kind == "pk" then
    if type(v) == "table" then
      if v[1] == nil then bad(400, "'%s' must be a value or an array of values", name) end
      for _, x in ipairs(v) do
        if type(x) == "table" then bad(400, "'%s' must be a value or an array of values", name) end
      end
    end
  elseif kind == "object" then
    if type(v) ~= "table" or v[1] ~= nil then
      bad(400, "'%s' must be a JSON object", name)
    end
  elseif type(v) ~= kind then
    bad(400, "'%s' must be a %s", name, kind)
  end
  return v
end

local function int_arg(text, name)
  if text == nil or text == "" then return nil end
  local n = tonumber(text)
  return field({ [name] = n or text }, name, "integer")
end

local function writable(self)
  if self.readonly then bad(403, "the explorer was started with --readonly") end
end

local function info_of(info)
  if type(info) ~= "table" then return nil end
  return info
end
-- }=====================================================================

-- {=====================================================================
-- Handlers
-- ======================================================================
local H = {}

function H.database(self)
  return 200, { path = self.path, stats = self.db:stats(),
                version = regolith._VERSION }
end

function H.containers(self, req)
  local db = self.db
  if req.method == "POST" then
    writable(self)
    local b = body_of(req, "object")
    local name = field(b, "name", "string", true)
    local spec = field(b, "spec", "object", true)
    spec.name = nil
    local done, c, msg, status = pcall(db.create_container, db, name, spec)
    if not done then bad(400, "bad container spec: %s", (tostring(c):gsub("^[^:]*:%d+: ", ""))) end
    local _, info = ok(c, msg, status)
    return 201, { name = name, spec = c:spec(), info = info }
  end
  local stats = db:stats()
  local out = {}
  for i, name in ipairs(db:containers()) do
    local c = db:container(name)
    local st = stats.containers[name] or {}
    out[i] = { name = name, items = st.items or 0, bytes = st.bytes or 0,
               spec = c and c:spec() }
  end
  return 200, regolith.array(out)
end

local function container(self, name)
  local c, msg, status = self.db:container(name)
  if not c then bad(status or 404, msg) end
  return c
end

function H.container(self, req, name)
  if req.method == "DELETE" then
    writable(self)
    local _, info = ok(self.db:delete_container(name))
    return 200, { deleted = name, info = info }
  elseif req.method == "PUT" then
    -- what the settings' editors change: the spec as a whole, what cannot
    -- change (the partition key, unique keys...) refused with 400 by the
    -- core; a spec without `throughput` keeps the container's budget
    writable(self)
    container(self, name)
    local b = body_of(req, "object")
    local spec = field(b, "spec", "object", true)
    spec.name = nil
    -- "throughput": null removes the budget (a spec without it keeps it)
    local unlimited = spec.throughput == null
    if unlimited then spec.throughput = nil end
    local done, c, msg, status = pcall(self.db.replace_container, self.db,
      name, spec)
    if not done then bad(400, "bad container spec: %s", (tostring(c):gsub("^[^:]*:%d+: ", ""))) end
    local _, info = ok(c, msg, status)
    if unlimited and c:spec().throughput ~= nil then ok(c:set_throughput(nil)) end
    return 200, { name = name, spec = c:spec(), info = info }
  end
  local c = container(self, name)
  local st = self.db:stats().containers[name] or {}
  return 200, { name = name, spec = c:spec(), items = st.items or 0,
    bytes = st.bytes or 0, throughput = st.throughput,
    procedures = regolith.array(c:procedures()),
    triggers = regolith.array(c:triggers()),
    feed_ranges = regolith.array(c:feed_ranges()) }
end

function H.items(self, req, name)
  local c = container(self, name)
  if req.method == "POST" then
    writable(self)
    local doc, info = ok(c:create(body_of(req, "object")))
    return 201, { doc = doc, info = info }
  end
  local pk = json_arg(req.args.pk, "pk")
  if pk ~= nil then field({ pk = pk }, "pk", "pk") end
  local rows, info = ok(c:query("SELECT * FROM c", nil, {
    partition_key = pk, max_items = int_arg(req.args.max_items, "max_items") or 100,
    continuation = req.args.continuation ~= "" and req.args.continuation or nil }))
  return 200, { items = rows, info = info }
end

-- The partition key of an item request: ?pk=JSON, else found with the id
-- (then the document names it).
local function item_pk(c, req, id)
  local pk = json_arg(req.args.pk, "pk")
  if pk ~= nil then return field({ pk = pk }, "pk", "pk") end
  local rows = ok(c:query("SELECT * FROM c WHERE c.id = @id", { id = id }))
  if #rows == 0 then bad(404, "item not found") end
  if #rows > 1 then
    bad(400, "%d items have the id '%s': give the partition key (?pk=)", #rows, id)
  end
  return keys.of(rows[1], keys.paths(c:spec()))
end

function H.item(self, req, name, id)
  local c = container(self, name)
  local pk = item_pk(c, req, id)
  local if_match = req.headers["if-match"]
  if req.method == "GET" then
    local doc, info = ok(c:read(id, pk))
    return 200, { doc = doc, info = info }
  elseif req.method == "PUT" then
    writable(self)
    local doc = body_of(req, "object")
    if doc.id ~= id then bad(400, "the document's id must be '%s'", id) end
    local stored, info = ok(c:replace(doc, { if_match = if_match }))
    return 200, { doc = stored, info = info }
  else
    writable(self)
    local _, info = ok(c:delete(id, pk, { if_match = if_match }))
    return 200, { deleted = id, info = info }
  end
end

-- Upload: a batch of documents (the page sends a file's JSON lines in
-- batches, for its progress bar), each upserted on its own so that a bad
-- one is reported with its place in the batch and the others are written.
-- A write over the container's throughput budget (429) stops the batch
-- there: {throttled = {index, retry_after_ms}} tells the page which
-- document to send again, and when (the wait is the page's, never the
-- worker's).
local UPLOAD_MAX = 1000

function H.upload(self, req, name)
  writable(self)
  local c = container(self, name)
  local docs = body_of(req, "array")
  if #docs > UPLOAD_MAX then
    bad(413, "at most %d documents per upload request", UPLOAD_MAX)
  end
  local written, charge, rejected, throttled = 0, 0, {}, nil
  for i, doc in ipairs(docs) do
    local stored, info, status, extra
    if type(doc) ~= "table" or getmetatable(doc) == getmetatable(regolith.array())
        or doc[1] ~= nil then
      stored, info, status = nil, "not a JSON object", 400
    else
      local done
      done, stored, info, status, extra = pcall(c.upsert, c, doc)
      if not done then stored, info, status = nil, tostring(stored), 400 end
    end
    if stored then
      written = written + 1
      charge = charge + (info and info.charge or 0)
    elseif status == 429 then
      throttled = { index = i, retry_after_ms =
        type(extra) == "table" and extra.retry_after_ms or 100 }
      break
    else
      rejected[#rejected + 1] = { index = i, error = info, status = status }
    end
  end
  return 200, { written = written, rejected = regolith.array(rejected),
                throttled = throttled, info = { charge = charge } }
end

function H.query(self, req, name)
  local c = container(self, name)
  local b = body_of(req, "object")
  local sql = field(b, "sql", "string", true)
  local params = field(b, "params", "object")
  local scope = field(b, "full_text_score_scope", "string")
  if scope and scope ~= "container" and scope ~= "local" then
    bad(400, "'full_text_score_scope' must be \"container\" or \"local\"")
  end
  local rows, info = ok(c:query(sql, params, {
    partition_key = field(b, "partition_key", "pk"),
    max_items = field(b, "max_items", "integer"),
    continuation = field(b, "continuation", "string"),
    full_text_score_scope = scope }))
  return 200, { rows = rows, info = info }
end

local KINDS = { procedures = "procedure", triggers = "trigger" }

-- A trigger's definition from a request body.
local function trigger_def(b)
  local kind = field(b, "type", "string", true)
  if kind ~= "pre" and kind ~= "post" then bad(400, "'type' must be pre or post") end
  local op = field(b, "operation", "string") or "all"
  if op ~= "all" and op ~= "create" and op ~= "replace" and op ~= "delete" then
    bad(400, "'operation' must be all, create, replace or delete")
  end
  return { type = kind, operation = op,
           automatic = field(b, "automatic", "boolean") or false,
           source = field(b, "source", "string", true) }
end

function H.scripts(self, req, name, kind)
  local c = container(self, name)
  if req.method == "POST" then
    writable(self)
    local b = body_of(req, "object")
    local n = field(b, "name", "string", true)
    local _, info
    if kind == "procedures" then
      _, info = ok(c:create_procedure(n, field(b, "source", "string", true)))
    else
      _, info = ok(c:create_trigger(n, trigger_def(b)))
    end
    return 201, { name = n, info = info }
  end
  return 200, regolith.array(kind == "procedures" and c:procedures() or c:triggers())
end

function H.script(self, req, name, kind, sname)
  local c = container(self, name)
  local one = KINDS[kind]
  if req.method == "GET" then
    local def, info = ok(c[one](c, sname))
    return 200, { name = sname, definition = def, info = info_of(info) }
  elseif req.method == "PUT" then
    writable(self)
    local b = body_of(req, "object")
    local _, info
    if kind == "procedures" then
      _, info = ok(c:replace_procedure(sname, field(b, "source", "string", true)))
    else
      _, info = ok(c:replace_trigger(sname, trigger_def(b)))
    end
    return 200, { name = sname, info = info }
  end
  writable(self)
  local del = kind == "procedures" and c.delete_procedure or c.delete_trigger
  local _, info = ok(del(c, sname))
  return 200, { deleted = sname, info = info }
end

function H.execute(self, req, name, sname)
  writable(self)
  local c = container(self, name)
  local b = body_of(req, "object")
  local pk = field(b, "partition_key", "pk", true)
  local args = b.args or regolith.array()
  if type(args) ~= "table" or (next(args) ~= nil and args[1] == nil) then
    bad(400, "'args' must be an array")
  end
  local result, info = ok(c:execute(sname, pk, (table.unpack or unpack)(args, 1, #args)))
  return 200, { result = result, info = info }
end

function H.feed(self, req, name)
  local c = container(self, name)
  local a = req.args
  local opts = { mode = a.mode ~= "" and a.mode or nil,
    max_items = int_arg(a.max_items, "max_items") or 100 }
  if opts.mode and opts.mode ~= "latest" and opts.mode ~= "all_versions" then
    bad(400, "'mode' must be latest or all_versions")
  end
  if a.continuation and a.continuation ~= "" then
    opts.continuation = a.continuation
  elseif a.start and a.start ~= "" then
    opts.start = (a.start == "beginning" or a.start == "now") and a.start
      or tonumber(a.start)
    if not opts.start then bad(400, "'start' must be beginning, now or seconds") end
  end
  local pk = json_arg(a.pk, "pk")
  if pk ~= nil then opts.partition_key = field({ pk = pk }, "pk", "pk") end
  local changes, info = ok(c:changes(opts))
  return 200, { changes = regolith.array(changes), info = info }
end

local function view_of(self, req, name, pname)
  container(self, name)
  local mode = req.args.mode
  if mode == "" then mode = nil end
  if mode and mode ~= "latest" and mode ~= "all_versions" then
    bad(400, "'mode' must be latest or all_versions")
  end
  return ok(processor.inspect(self.db, name, pname, mode))
end

function H.processor(self, req, name, pname, action)
  if action then writable(self) end
  local view = view_of(self, req, name, pname)
  local function done(...)
    view:close()
    return ...
  end
  if action == "drop" then
    return done(200, { dropped = ok(view:clear_dead_letters()) })
  elseif action == "redrive" then
    local b = body_of(req, "object")
    local dead = ok(view:dead_letters())
    local which = b.letter
    local list = {}
    if which == "all" then
      for i = 1, #dead do list[i] = i end
    elseif type(which) == "number" and which == math.floor(which) then
      if which < 1 or which > #dead then bad(404, "no dead letter %d", which) end
      list[1] = which
    else
      bad(400, "'letter' must be a dead letter's number or \"all\"")
    end
    local total = { written = 0, skipped = 0, charge = 0 }
    for _, i in ipairs(list) do
      local r = ok(view:redrive(dead[i]))
      for k, v in pairs(r) do total[k] = total[k] + v end
    end
    return done(200, total)
  end
  local st = ok(view:status())
  st.dead = regolith.array(ok(view:dead_letters()))
  return done(200, st)
end
-- }=====================================================================

-- {=====================================================================
-- Routing
-- ======================================================================
local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- {pattern, {method = handler}, ...}: a pattern's captures are the
-- handler's arguments after (self, req).
local ROUTES = {
  { "^/api/database$", { GET = H.database } },
  { "^/api/containers$", { GET = H.containers, POST = H.containers } },
  { "^/api/containers/([^/]+)$",
    { GET = H.container, PUT = H.container, DELETE = H.container } },
  { "^/api/containers/([^/]+)/upload$", { POST = H.upload } },
  { "^/api/containers/([^/]+)/items$", { GET = H.items, POST = H.items } },
  { "^/api/containers/([^/]+)/items/([^/]+)$",
    { GET = H.item, PUT = H.item, DELETE = H.item } },
  { "^/api/containers/([^/]+)/query$", { POST = H.query } },
  { "^/api/containers/([^/]+)/(procedures)$", { GET = H.scripts, POST = H.scripts } },
  { "^/api/containers/([^/]+)/(triggers)$", { GET = H.scripts, POST = H.scripts } },
  { "^/api/containers/([^/]+)/(procedures)/([^/]+)$",
    { GET = H.script, PUT = H.script, DELETE = H.script } },
  { "^/api/containers/([^/]+)/(triggers)/([^/]+)$",
    { GET = H.script, PUT = H.script, DELETE = H.script } },
  { "^/api/containers/([^/]+)/procedures/([^/]+)/execute$", { POST = H.execute } },
  { "^/api/containers/([^/]+)/feed$", { GET = H.feed } },
  { "^/api/containers/([^/]+)/processors/([^/]+)$", { GET = H.processor } },
  { "^/api/containers/([^/]+)/processors/([^/]+)/(redrive)$", { POST = H.processor } },
  { "^/api/containers/([^/]+)/processors/([^/]+)/(drop)$", { POST = H.processor } },
}

local function route(self, req)
  for _, r in ipairs(ROUTES) do
    local caps = { req.path:match(r[1]) }
    if caps[1] ~= nil then
      local fn = r[2][req.method]
      if not fn then
        local allowed = {}
        for m in pairs(r[2]) do allowed[#allowed + 1] = m end
        table.sort(allowed)
        bad(405, "%s is not allowed here (allowed: %s)", req.method,
          table.concat(allowed, ", "))
      end
      for i, v in ipairs(caps) do caps[i] = unescape(v) end
      return fn(self, req, (table.unpack or unpack)(caps))
    end
  end
  bad(404, "no such API path: %s", req.path)
end

-- api:handle(req) -> status, body (a Lua value), headers.  req: {method,
-- path (without the query string), args = {name = value}, body (text or
-- nil), headers = {lower-case name = value}}.
function Api:handle(req)
  req.args = req.args or {}
  req.headers = req.headers or {}
  if not req.headers["x-regolith-explorer"] then
    return 403, { error = "the API answers the explorer's page only (it " ..
      "sends the header X-Regolith-Explorer)", status = 403 }
  end
  if self.hosts and not self.hosts[req.headers.host or ""] then
    return 403, { error = "unexpected Host header", status = 403 }
  end
  local done, status, body = pcall(route, self, req)
  if not done then
    local err = status
    if failure.is(err) then
      return err.status, { error = err.message, status = err.status }
    end
    return 500, { error = "internal error (see the error log)", status = 500 },
      nil, tostring(err)
  end
  local headers = {}
  if type(body) == "table" and type(body.info) == "table" and body.info.charge then
    headers["X-Request-Charge"] = tostring(body.info.charge)
  end
  return status, body, headers
end

-- The answer's text (object members sorted, as the command prints them).
function M.encode(body)
  local text, msg = cjson.encode(body)
  if not text then
    return cjson.encode({ error = "the answer cannot be written as JSON: " .. msg,
                          status = 500 })
  end
  return text
end
-- }=====================================================================

return M
