--[[
Group commit for concurrent writers of one process: db:group_commit(opts).

  local g = db:group_commit()          -- in an nginx worker, or a scheduler
  local doc, info = g:run(function() return c:create(doc) end)

Writers running at the same time in one Lua state (OpenResty requests on
their cosockets, coroutines of a scheduler) call g:run(fn) instead of
writing directly.  The first of them leads: it yields once (opts.yield),
so that every writer ready to run gets to queue its function, then runs
the whole queue with db:group, one write transaction and one flush for all,
each function in a savepoint of its own, and hands every writer its own
result.  So each call keeps its own atomicity (a function that raises has
its writes undone alone, and the error is raised again in its writer; a
write that fails returns nil, message, status to its own writer only) and
its own result; only a failure of the transaction itself (a full disk: 507)
fails every member, with nothing of any member kept.

g:run(fn) returns what fn returned.  fn must not yield (the transaction is
open while it runs); a g:run made inside a member runs directly, in the
member's transaction.

Options:
  yield  a function that lets the other writers run once: under nginx
         (the default there) a wait on an ngx.semaphore posted by a
         zero-delay timer, which lets every ready request run first, as
         ngx.sleep(0) does with OpenResty's patch; coroutine.yield for a
         scheduler that resumes its coroutines in turn (the default
         elsewhere, inside a coroutine; outside one, writes are not held)
  max    the most members in one transaction (default 64): a longer queue
         is committed in several transactions, without yielding between
  wait   how many times a leader yields before committing (default 1)
]]

local unpack = table.unpack or unpack

local M = {}
local G = {}
G.__index = G

-- Under nginx: wait on a semaphore (lua-resty-core's ngx.semaphore) that
-- a zero-delay timer posts.  nginx runs the timer after the events that
-- are ready now, so every request ready to run queues its write first:
-- what ngx.sleep(0) does in OpenResty's nginx, which has the delayed
-- events patch, without the warning nginx builds lacking the patch
-- (Debian's) log for every ngx.sleep(0), "ngx.sleep(0) called without
-- delayed events patch, this will hurt performance".  Without the
-- semaphore, or when no timer can be had (lua_max_pending_timers), it
-- sleeps a millisecond.
local function ngx_yield()
  local ok, semaphore = pcall(require, "ngx.semaphore")
  if not ok then return function() ngx.sleep(0.001) end end
  return function()
    local sema = semaphore.new()
    if not ngx.timer.at(0, function() sema:post(1) end) then
      return ngx.sleep(0.001)
    end
    sema:wait(1)
  end
end

local function default_yield()
  if ngx and ngx.sleep then return ngx_yield() end
  return function()
    local co, main = coroutine.running()     -- LuaJIT: nil on the main thread
    if co and not main then coroutine.yield() end
  end
end

function M.new(db, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("group_commit: options must be a table", 2) end
  for k in pairs(opts) do
    if k ~= "yield" and k ~= "max" and k ~= "wait" then
      error(("group_commit: unknown option '%s'"):format(tostring(k)), 2)
    end
  end
  if opts.yield ~= nil and type(opts.yield) ~= "function" then
    error("group_commit: option 'yield' must be a function", 2)
  end
  local max, wait = opts.max or 64, opts.wait or 1
  if type(max) ~= "number" or max < 1 or max ~= math.floor(max) then
    error("group_commit: option 'max' must be a positive integer", 2)
  end
  if type(wait) ~= "number" or wait < 0 or wait ~= math.floor(wait) then
    error("group_commit: option 'wait' must be an integer >= 0", 2)
  end
  return setmetatable({ db = db, yield = opts.yield or default_yield(),
    max = max, wait = wait, queue = {}, leading = false, running = false,
    groups = 0, members = 0 }, G)
end

-- Commits the queue, max members at a time, and marks each member done.
function G:drain()
  local q = self.queue
  while #q > 0 do
    local batch, fns, rest = {}, {}, {}
    for i, m in ipairs(q) do
      if i <= self.max then batch[#batch + 1] = m; fns[#fns + 1] = m.fn
      else rest[#rest + 1] = m end
    end
    self.queue, q = rest, rest
    self.running = true
    local ok, res, msg, status = pcall(self.db.group, self.db, fns)
    self.running = false
    self.groups, self.members = self.groups + 1, self.members + #batch
    for i, m in ipairs(batch) do
      if not ok then m.result = { false, res, n = 2 }
      elseif not res then m.result = { true, nil, msg, status, n = 4 }
      else m.result = res[i] end
      m.done = true
    end
  end
end

function G:run(fn)
  if type(fn) ~= "function" then error("run: expects a function", 2) end
  if self.running then return fn() end   -- inside a member's transaction
  local m = { fn = fn }
  self.queue[#self.queue + 1] = m
  if self.leading then
    repeat self.yield() until m.done
  else
    self.leading = true
    for _ = 1, self.wait do self.yield() end
    local ok, err = pcall(self.drain, self)
    self.leading = false
    if not ok then error(err, 0) end
  end
  local r = m.result
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

-- How many transactions were committed, and how many calls they held.
function G:stats()
  return { groups = self.groups, members = self.members }
end

return M
