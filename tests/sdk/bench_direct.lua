--[[
The gateway benchmark's baseline (tests/sdk/bench.sh): the same calls as
the SDK's, made in Lua inside the gateway's own nginx workers, on the same
container, answered as JSON, without the Cosmos protocol (no signature, no
headers to read or write, no Cosmos wrapping).

    GET  /read/{id}/{pk}    c:read(id, pk)
    POST /create            c:create(doc)
    GET  /query/{pk}        c:query("SELECT * FROM c WHERE c.pk = @pk")

Run by content_by_lua_file from the server block bench.sh adds to the
gateway's configuration (GATEWAY_EXTRA_CONF).
]]

local regolith = require "regolith"

local json = regolith.json

local QUERY = "SELECT * FROM c WHERE c.pk = @pk"

local c = package.loaded.bench_direct_container
if not c then
  local db = assert(regolith.open(os.getenv("REGOLITH_GATEWAY_ROOT") .. "/bench",
    { sync = os.getenv("REGOLITH_GATEWAY_SYNC") }))
  c = assert(db:container("items"))
  package.loaded.bench_direct_container = c
  package.loaded.bench_direct_db = db
end

local function answer(status, v, msg, st)
  if v == nil then
    ngx.status = st or 500
    ngx.say(json.encode({ message = msg }))
    return
  end
  local text = json.encode(v)
  ngx.status = status
  ngx.header["content-type"] = "application/json"
  ngx.print(text)
end

local uri = ngx.var.uri
local id, pk = uri:match("^/read/([^/]+)/([^/]+)$")
if id then return answer(200, c:read(id, pk)) end
if uri == "/create" then
  ngx.req.read_body()
  local doc = json.decode(ngx.req.get_body_data())
  return answer(201, c:create(doc))
end
pk = uri:match("^/query/([^/]+)$")
if pk then
  local rows, info, status = c:query(QUERY, { pk = pk })
  if rows == nil then return answer(nil, nil, info, status) end
  return answer(200, { Documents = rows, _count = #rows })
end
ngx.status = 404
