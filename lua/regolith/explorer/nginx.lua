--[[
regolith.explorer.nginx: the Data Explorer's API in an nginx worker (the
configuration `regolith explore` writes; docs/explorer.md).

    init_worker_by_lua_block { require("regolith.explorer.nginx").init_worker() }
    exit_worker_by_lua_block { require("regolith.explorer.nginx").exit_worker() }
    location /api/ { content_by_lua_block { require("regolith.explorer.nginx").handle() } }

The settings come from the module explorer_settings (a file the command
writes beside the configuration): {db = path, readonly = bool, hosts =
{[host] = true} or nil, owner = pid, owner_start = its start time, prefix =
the configuration's directory}.  A local database is opened in
init_worker, never before the fork (an LMDB environment must not cross
one).  A cluster database (db = redis://...) is opened by each request and
closed at its end: its client runs on cosockets, which belong to one
request and which init_worker cannot use (docs/cluster.md, Opening).

The worker watches its owner, the `regolith explore` process: every half
second it checks that /proc/OWNER/stat still names a process started at
owner_start, and when the command is gone (SIGKILL, a crash: the signals
it can catch it handles itself) removes the prefix and asks the master to
stop (SIGQUIT), so that no server outlives its command.
]]

local regolith = require "regolith"
local API = require "regolith.explorer.api"

local M = {}

local db, api, settings

-- Field 22 of /proc/PID/stat (the start time), or nil when no such process.
local function start_time(pid)
  local f = io.open("/proc/" .. tostring(pid) .. "/stat")
  if not f then return nil end
  local stat = f:read("*l") or ""
  f:close()
  local rest = stat:match("%) (.*)$") or ""
  local n = 0
  for w in rest:gmatch("%S+") do
    n = n + 1
    if n == 20 then return w end
  end
end

local function watch_owner(settings)
  if not settings.owner then return end
  local ffi = require "ffi"
  pcall(ffi.cdef, "int kill(int pid, int sig); int getppid(void);")
  local function check(premature)
    if premature then return end
    if start_time(settings.owner) == settings.owner_start then return end
    ngx.log(ngx.WARN, "explorer: its command (pid ", settings.owner,
      ") is gone: stopping")
    if settings.prefix and settings.prefix:match("/regolith%-explore%.[%w]+$") then
      os.execute("rm -rf '" .. settings.prefix .. "'")
    end
    ffi.C.kill(ffi.C.getppid(), 3)               -- SIGQUIT: a graceful stop
  end
  ngx.timer.every(0.5, check)
end

local function is_url(path) return path:sub(1, 8) == "redis://" end

-- The database and its API, or nil after logging why not.
local function open()
  local d, err, status = regolith.open(settings.db,
    { readonly = settings.readonly or nil })
  if not d then
    ngx.log(ngx.ERR, "cannot open ", settings.db, ": ", err, " (", status, ")")
    return nil
  end
  return d, API.new(d, { readonly = settings.readonly, hosts = settings.hosts,
                         path = settings.db })
end

function M.init_worker()
  settings = require "explorer_settings"
  watch_owner(settings)
  if not is_url(settings.db) then db, api = open() end
end

function M.exit_worker()
  if db then db:close() end
end

local function send(status, body, headers)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  ngx.header["Cache-Control"] = "no-store"
  for k, v in pairs(headers or {}) do ngx.header[k] = v end
  ngx.say(API.encode(body))
end

function M.handle()
  if is_url(settings.db) then
    local d, a = open()
    local ok, err = pcall(M.serve, a)
    if d then d:close() end
    if not ok then error(err, 0) end
    return
  end
  return M.serve(api)
end

-- Answers one request with `explorer`, an explorer API (nil: the
-- database could not be opened).
function M.serve(explorer)
  if not explorer then
    return send(503, { error = "the database could not be opened (see the " ..
      "error log)", status = 503 })
  end
  ngx.req.read_body()
  local body = ngx.req.get_body_data()
  if body == nil and ngx.req.get_body_file() then
    return send(413, { error = "the request body is too large", status = 413 })
  end
  local args, err = ngx.req.get_uri_args(100)
  if err == "truncated" then
    return send(400, { error = "too many query arguments", status = 400 })
  end
  local headers = ngx.req.get_headers(50)
  -- nginx itself would answer 412 to a request with If-Match whose answer
  -- has no ETag: the API checks it against the item's _etag instead
  ngx.req.clear_header("If-Match")
  local h = {}
  for k, v in pairs(headers) do
    h[k:lower()] = type(v) == "table" and v[1] or v
  end
  local a = {}
  for k, v in pairs(args) do
    if type(v) == "table" then
      return send(400, { error = ("query argument '%s' is given more than " ..
        "once"):format(k), status = 400 })
    end
    a[k] = v == true and "" or v
  end
  local status, out, extra, trace = explorer:handle{ method = ngx.req.get_method(),
    path = ngx.var.request_uri:match("^[^?]*"), args = a, body = body, headers = h }
  if trace then ngx.log(ngx.ERR, "explorer: ", trace) end
  send(status, out, extra)
end

return M
