--[[
app: the blog's ten requests as a JSON HTTP API, run by nginx workers
(conf/nginx.conf; docs/openresty.md).

    PUT  /users/{id}            C1  {"username": ...}           -> the user
    GET  /users/{id}            Q1                              -> the user
    POST /posts                 C2  {id, userId, username, title, content,
                                     creationDate}              -> the post
    GET  /posts/{id}            Q2                              -> the post
    GET  /users/{id}/posts      Q3  the user's posts, short form
    POST /posts/{id}/comments   C3  {id, userId, username, content,
                                     creationDate}   -> the comment count
    GET  /posts/{id}/comments   Q4
    POST /posts/{id}/likes      C4  {id, userId, username, creationDate}
                                                     -> the like count
    GET  /posts/{id}/likes      Q5
    GET  /feed                  Q6  the 100 newest posts, short form
    GET  /admin/processors      the processors' lag and dead letters

A success answers 200 (201 for a POST) with the result as JSON and its
request charge in the X-Request-Charge header.  A failure, `nil, message,
status` from the model, answers that status with {"error": message,
"status": status}; a body that is not a JSON object is 400, an unknown
path 404, a known path with another method 405, a Lua error 500.

Worker lifecycle.  Each worker opens the database in init_worker (never in
init_by_lua: an LMDB environment must not cross a fork), so the workers
are separate processes on one database, each with its own environment.
The processors are pumped by a process of their own (pump.lua, which
serve.sh starts, with REGOLITH_PUMP=process in nginx's environment), so
that no processor's batch holds a worker's loop.  Otherwise each worker's
processors are pumped by an ngx.timer.every; their leases spread the feed
ranges over the workers (each worker is an instance of its own, named
after its pid), so every range is worked on by one worker at a time and a
worker that dies leaves its ranges to the others when its leases expire.
exit_worker closes the database, which gives the leases back at once (a
reload or a stop hands them to the workers that remain).
]]

local regolith = require "regolith"
local model_of = require "model"

local json = regolith.json

local M = {}

local PUMP_EVERY = 0.05        -- seconds between two timer ticks
local PUMP_SLICE = 0.05        -- at most this long pumping in one tick
local PASS_MS = 0              -- a pass stops after its first batch that
                               -- delivered changes (run_processors'
                               -- max_ms): requests get in between batches

local db, model                -- this worker's
local writer                   -- the model whose writes go through the
                               -- write queue, or nil
local group                    -- its writers' shared transactions, or nil
local busy = false             -- a tick is pumping (ticks do not overlap)
local trace                    -- REGOLITH_APP_TRACE's file of this worker

-- With REGOLITH_APP_TRACE=<prefix> (load.sh's TRACE=1), each worker
-- writes a line per request and per pump tick to <prefix>.<pid>: what it
-- was, when its loop iteration began (ngx.req.start_time), when its
-- handler began and when it ended, in ms, so that a slow request's wait
-- can be told from its own work and from the other requests and ticks
-- that held the worker's loop meanwhile (tools: examples/openresty/tail.lua).
local function stamp()
  ngx.update_time()
  return ngx.now()
end

local function trace_line(kind, what, loop, t0, t1)
  trace:write(("%s %.3f %.3f %.3f %s\n"):format(kind, loop, t0, t1, what))
end

-- {=====================================================================
-- Worker lifecycle
-- ======================================================================

-- The processors of this worker are an instance of their own.
local function instance_name()
  return ("nginx-%d"):format(ngx.worker.pid())
end

-- One timer tick: passes of the processors of this worker, while they
-- find work and for at most PUMP_SLICE seconds, letting requests in
-- between two passes.  Each pass is bounded (PASS_MS): one batch of one
-- range, the next pass going on with the next range and processor, so
-- the worker's requests wait for one batch's transaction, not for one of
-- every held range of every processor.  A transactional handler runs
-- inside a write transaction and cannot yield; that is why the handlers
-- stay short and the tick yields only between passes.
local function pump(premature)
  if premature or busy or not db then return end
  busy = true
  local start = ngx.now()
  local t0 = trace and stamp()
  while true do
    local ok, n, msg, status = pcall(db.run_processors, db,
                                     { max_ms = PASS_MS })
    if not ok then
      ngx.log(ngx.ERR, "processors: ", n)
      break
    end
    if n == nil then
      ngx.log(ngx.ERR, "processors: ", msg, " (", status, ")")
      break
    end
    if trace then
      local t1 = stamp()
      trace_line("P", n, start, t0, t1)
    end
    if n == 0 then break end
    ngx.update_time()
    if ngx.now() - start >= PUMP_SLICE then break end
    ngx.sleep(0.001)          -- lets requests in (Debian's nginx lacks the
                              -- patch that makes ngx.sleep(0) cheap)
    if trace then t0 = stamp() end
  end
  busy = false
end

-- A container handle whose writes go through the write queue q (q:create
-- instead of c:create) and whose reads go to c itself.
local function queued(q, c)
  local writes = {}
  for _, m in ipairs { "create", "upsert", "replace", "delete", "patch",
                       "batch", "execute" } do
    writes[m] = function(_, ...) return q[m](q, c, ...) end
  end
  return setmetatable(writes, { __index = function(t, k)
    local f = function(_, ...) return c[k](c, ...) end
    t[k] = f
    return f
  end })
end

-- The model m seen by the requests: the same model, its containers'
-- writes made through the database's write queue, so that the writes of
-- every worker share transactions.  The processors keep m and its own
-- handles: their handlers run inside a transaction already.
local function queued_model(m, db)
  local q, err, status = db:write_queue()
  if not q then
    ngx.log(ngx.ERR, "no write queue: ", err, " (", status, ")")
    return nil
  end
  return setmetatable({ users = queued(q, m.users), posts = queued(q, m.posts),
                        feed = queued(q, m.feed) }, { __index = m })
end

function M.init_worker()
  local path = os.getenv("REGOLITH_DB") or (ngx.config.prefix() .. "data/blog")
  local err, status
  db, err, status = regolith.open(path, { sync = os.getenv("REGOLITH_SYNC") })
  if not db then
    ngx.log(ngx.ERR, "cannot open ", path, ": ", err, " (", status, ")")
    return
  end
  local ok, m = pcall(model_of.open, db, instance_name())
  if not ok then
    ngx.log(ngx.ERR, "cannot open the model on ", path, ": ", m)
    db:close()
    db = nil
    return
  end
  model = m
  local tp = os.getenv("REGOLITH_APP_TRACE")
  if tp and tp ~= "" then
    trace = io.open(("%s.%d"):format(tp, ngx.worker.pid()), "w")
  end
  -- REGOLITH_PUMP=process: a process of its own pumps the processors
  -- (pump.lua; serve.sh starts it), so that no batch holds this loop
  if os.getenv("REGOLITH_PUMP") ~= "process" then
    local timer_ok, terr = ngx.timer.every(PUMP_EVERY, pump)
    if not timer_ok then ngx.log(ngx.ERR, "cannot start the pump: ", terr) end
  end
  if os.getenv("REGOLITH_QUEUE") ~= "0" then
    writer = queued_model(m, db)
  elseif os.getenv("REGOLITH_GROUP") ~= "0" then
    group = db:group_commit()
  end
end

function M.exit_worker()
  if db then db:close() end
  if trace then trace:close() end
  trace = nil
  db, model, writer, group = nil, nil, nil, nil
end
-- }=====================================================================


-- {=====================================================================
-- Requests
-- ======================================================================

-- The JSON object of the request's body, or nil, message, 400.
local function body_object()
  ngx.req.read_body()
  local text = ngx.req.get_body_data()
  if not text then return nil, "the request needs a JSON body", 400 end
  local v, msg, status = json.decode(text)
  if v == nil then return nil, msg, status end
  if type(v) ~= "table" or v[1] ~= nil then
    return nil, "the body must be a JSON object", 400
  end
  return v
end

-- A handler taking the body, with `field` of it set from the path.  The
-- write requests of every worker share transactions through the write
-- queue: the worker holding its leader lock commits the requests every
-- worker queued meanwhile, one commit, one flush.  With REGOLITH_QUEUE=0,
-- the write requests in flight in this worker share transactions (group
-- commit, unless REGOLITH_GROUP=0): the first to come yields once, so
-- that the others ready to run join it.
local function with_body(method, field)
  return function(id)
    local body, msg, status = body_object()
    if not body then return nil, msg, status end
    if field then body[field] = id end
    if writer then return writer[method](writer, body) end
    if not group then return model[method](model, body) end
    return group:run(function() return model[method](model, body) end)
  end
end

local function by_id(method)
  return function(id) return model[method](model, id) end
end

local function processors()
  return { lag = model:lag(), dead_letters = model:dead_letters() }, 0
end

-- Routes: a path pattern, then the handler of each method.
local ROUTES = {
  { "^/users/([^/]+)$", GET = by_id("get_user"),
    PUT = with_body("create_user", "id") },
  { "^/users/([^/]+)/posts$", GET = by_id("list_user_posts") },
  { "^/posts$", POST = with_body("create_post") },
  { "^/feed$", GET = function() return model:list_recent_posts() end },
  { "^/posts/([^/]+)$", GET = by_id("get_post") },
  { "^/posts/([^/]+)/comments$", GET = by_id("list_comments"),
    POST = with_body("create_comment", "postId") },
  { "^/posts/([^/]+)/likes$", GET = by_id("list_likes"),
    POST = with_body("like_post", "postId") },
  { "^/admin/processors$", GET = processors },
}

local function send(status, body, charge)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  if charge then
    ngx.header["X-Request-Charge"] = ("%.2f"):format(charge)
  end
  ngx.print(body)
end

local function fail(status, msg)
  send(status, json.encode({ error = msg, status = status }))
end

-- Runs the handler; maps its `nil, message, status` to that status.
local function answer(handler, method, id)
  local result, charge, status = handler(id)
  if result == nil then
    if type(status) ~= "number" then status = 500 end
    return fail(status, tostring(charge))
  end
  local text, msg = json.encode(result)
  if text == nil then return fail(500, msg) end
  send(method == "POST" and 201 or 200, text, charge)
end

local function handle()
  if not model then
    return fail(503, "the database is not open in this worker (see the " ..
      "error log)")
  end
  local uri, method = ngx.var.uri, ngx.req.get_method()
  for _, route in ipairs(ROUTES) do
    local id = uri:match(route[1])
    if id then
      local handler = route[method]
      if not handler then return fail(405, method .. " is not allowed here") end
      local ok, err = xpcall(answer, debug.traceback, handler, method, id)
      if not ok then
        ngx.log(ngx.ERR, err)
        return fail(500, "internal error (see the error log)")
      end
      return
    end
  end
  return fail(404, "no such resource: " .. uri)
end

function M.handle()
  if not trace then return handle() end
  local t0 = stamp()
  handle()
  local t1 = stamp()
  trace_line("R", ngx.var.connection .. " " .. ngx.req.get_method() .. " " ..
             ngx.var.uri, ngx.req.start_time(), t0, t1)
end
-- }=====================================================================

return M
