--[[
regolith.processor: the change-feed processors (the dispatcher).

    local p = db:processor{ name = ..., source = ..., handler = ..., ... }
    p:run_once()  p:run{until_idle, timeout}  p:lag()  p:status()
    p:dead_letters()  p:clear_dead_letters()  p:close()  p:delete()
    db:run_processors{until_idle, timeout}

This module is the loop; the C core (regolith.core._processor, see
csrc/host/processor.c and csrc/store/procs.c) reads the feed, keeps the
leases and checkpoints in the database, and runs a transactional batch (the
lease, the batch, the handler and the new checkpoint in one write
transaction).  lua/regolith/init.lua makes M.open and M.run_all the
methods db:processor and db:run_processors.

A pass (run_once) renews the leases when a third of lease_seconds has gone
by (taking free or expired ranges up to this instance's share, giving back
the excess), then hands one batch of each held range to the handler.  A
handler error leaves the checkpoint where it was, so the next pass delivers
the same batch again; on_error sees every failure; after max_attempts the
batch goes to the dead letters and the range moves on.
]]

local core = require "regolith.core"
local keys = require "regolith.keys"

local C = core._processor
local clock, sleep = C.clock, C.sleep

-- A processor's state is the C core's; a database on Redis Cluster gives
-- it through its proxies (regolith.cluster), which drive its calls.
local LOCAL = { new = C.new, in_transaction = C.in_transaction,
  is_container = core.is_container }

local function backend_of(db)
  return type(db) == "table" and db.processor_backend or LOCAL
end

local M = {}

local Processor = {}
Processor.__index = Processor

local MODES = { latest = 1, all_versions = 2 }
local IDLE_SLEEP = 0.05        -- seconds between idle passes of run()
local RENEW_MAX = 5000         -- ms: the longest time between lease renewals

-- Processors opened on each database handle (weak: a handle that is gone
-- takes its processors along).
local opened = setmetatable({}, { __mode = "k" })

local OPTIONS = {
  name = "string", source = true, mode = "string", start = true,
  max_items = "number", lease_seconds = "number", instance = "string",
  transactional = "boolean", max_attempts = "number",
  on_error = "function", handler = "function",
}

-- The checks of a method's options raise at the line that called the
-- method: `level` is that line's level as the function calling the check
-- sees it (2 when that function is the method the user called).
local function check_options(opts, allowed, what, level)
  if type(opts) ~= "table" then
    error(what .. ": options must be a table, not " .. type(opts), level + 1)
  end
  for k, v in pairs(opts) do
    local want = allowed[k]
    if type(k) ~= "string" or want == nil then
      error(what .. ": unknown option '" .. tostring(k) .. "'", level + 1)
    end
    if want ~= true and type(v) ~= want then
      error(what .. ": option '" .. k .. "' must be a " .. want, level + 1)
    end
  end
end

local function integer_option(opts, name, default, lo, hi, what, level)
  local v = opts[name]
  if v == nil then return default end
  if v ~= math.floor(v) or v < lo or v > hi then
    error(("%s: option '%s' must be an integer from %d to %d"):format(
      what, name, lo, hi), level + 1)
  end
  return v
end

local function message_of(err)
  if type(err) == "string" then return err end
  return tostring(err)
end

-- Lua's own coroutine functions.  OpenResty replaces coroutine.* in
-- request and timer contexts with versions that work through nginx (its
-- resume first yields the caller to nginx), which cannot run inside the C
-- call a transactional handler runs in; it keeps Lua's own as
-- coroutine._create, _resume and _status.
local co_create = coroutine._create or coroutine.create
local co_resume = coroutine._resume or coroutine.resume
local co_status = coroutine._status or coroutine.status

-- Calls a transactional handler: it runs inside the write transaction, so
-- it must not yield; a coroutine tells a yield apart from a return.
local function runner_of(handler)
  return function(changes, info)
    local co = co_create(handler)
    local ok, err = co_resume(co, changes, info)
    if not ok then return false, err end
    if co_status(co) ~= "dead" then
      return false, "a transactional processor's handler cannot yield (it " ..
        "runs inside the write transaction that moves the checkpoint); " ..
        "use transactional = false for a handler that yields"
    end
    return true
  end
end

-- db:processor(opts) -> processor | nil, message, status
function M.open(db, opts)
  check_options(opts, OPTIONS, "processor", 2)
  local what = "processor"
  if opts.name == nil then error("processor: option 'name' is required", 2) end
  if opts.handler == nil then
    error("processor: option 'handler' is required", 2)
  end
  local mode = MODES[opts.mode or "latest"]
  if not mode then
    error("processor: option 'mode' must be \"latest\" or \"all_versions\"", 2)
  end
  local start = opts.start
  if start ~= nil and start ~= "beginning" and start ~= "now" and
      type(start) ~= "number" then
    error("processor: option 'start' must be \"beginning\", \"now\" or a " ..
      "time in seconds since the epoch", 2)
  end
  local max_items = integer_option(opts, "max_items", 100, 1, 100000, what,
    2)
  local lease_seconds = integer_option(opts, "lease_seconds", 60, 1, 86400,
    what, 2)
  local max_attempts = integer_option(opts, "max_attempts", 5, 1, 1000000,
    what, 2)
  local source = opts.source
  local backend = backend_of(db)
  local container, msg, status
  if type(source) == "string" then
    container, msg, status = db:container(source)
    if not container then return nil, msg, status end
  elseif backend.is_container(source) then
    container = source
  else
    error("processor: option 'source' must be a container name", 2)
  end
  local instance = opts.instance or C.instance_id()
  local state = backend.new(container, opts.name, instance, mode, max_items,
    lease_seconds, max_attempts)
  local ok
  ok, msg, status = state:init(opts)
  if not ok then
    state:close()
    return nil, msg, status
  end
  local self = setmetatable({
    db = db,
    name = opts.name,
    instance = instance,
    state = state,
    transactional = opts.transactional ~= false,
    handler = opts.handler,
    runner = runner_of(opts.handler),
    backend = backend,
    on_error = opts.on_error,
    interval = math.min(lease_seconds * 1000 / 3, RENEW_MAX),
    next_renew = 0,
    held = {},
    cursor = 1,                -- the held range the next pass starts at
    running = false,
    closed = false,
  }, Processor)
  local list = opened[db]
  if not list then
    list = {}
    opened[db] = list
  end
  list[#list + 1] = self
  return self
end

function Processor:_check()
  if self.closed then error("attempt to use a closed processor", 3) end
end

-- Renews the leases (and learns which ranges this instance holds).
function Processor:_renew()
  local held, msg, status = self.state:maintain()
  if not held then
    self.held = {}
    return nil, msg, status
  end
  self.held = held
  self.next_renew = clock() + self.interval
  return true
end

-- A failed delivery: count it (maybe dead-letter the batch), tell on_error.
function Processor:_failed(range, err, changes, info)
  local attempts, dead, status = self.state:fail(range, message_of(err))
  if not attempts then return nil, dead, status end
  info.attempt = attempts
  info.dead_lettered = dead
  if self.on_error then self.on_error(err, changes, info) end
  return true
end

-- One batch of one range: the number of changes delivered, or nil, msg,
-- status (409: the lease is no longer this instance's).
function Processor:_batch(range)
  local state = self.state
  if self.transactional then
    local n, ok, err, changes, info = state:run_tx(range, self.runner)
    if n == nil or n == 0 or ok then return n, ok, err end
    local done, msg, status = self:_failed(range, err, changes, info)
    if not done then return nil, msg, status end
    return n
  end
  local n, changes, info = state:read(range)
  if n == nil or n == 0 then return n, changes, info end
  local ok, err = pcall(self.handler, changes, info)
  local done, msg, status
  if ok then done, msg, status = state:commit(range)
  else done, msg, status = self:_failed(range, err, changes, info) end
  if not done then return nil, msg, status end
  return n
end

-- A pass: a batch of each held range, starting at the range after the one
-- the last pass stopped at (self.cursor).  With a deadline (clock ms), it
-- stops once a batch that delivered changes ends past it, and the next
-- pass goes on from the range after; so a pass that delivers nothing has
-- looked at every held range.
function Processor:_pass(deadline)
  if clock() >= self.next_renew then
    local ok, msg, status = self:_renew()
    if not ok then return nil, msg, status end
  end
  local total = 0
  local held = self.held
  local count = #held
  local start = self.cursor
  for step = 1, count do
    if self.closed then break end
    if clock() >= self.next_renew then
      local ok, msg, status = self:_renew()
      if not ok then return nil, msg, status end
      break                    -- the next pass works on what is held now
    end
    local i = (start + step - 2) % count + 1
    self.cursor = i % count + 1
    local n, msg, status = self:_batch(held[i])
    if n == nil then
      if status ~= 409 then return nil, msg, status end
      self.next_renew = 0      -- the lease went: look again next pass
    else
      total = total + n
      if deadline and n > 0 and clock() >= deadline then break end
    end
  end
  return total
end

local ONCE_OPTIONS = { max_ms = "number" }
local RUN_OPTIONS = { until_idle = "boolean", timeout = "number",
  max_ms = "number" }

-- opts.max_ms (options already checked for their types), or nil; raises
-- on a negative one (at `level`, as check_options).
local function max_ms_of(opts, what, level)
  local max_ms = opts and opts.max_ms
  if max_ms ~= nil and not (max_ms >= 0) then
    error(what .. ": option 'max_ms' must be a number of milliseconds >= 0",
      level + 1)
  end
  return max_ms
end

-- Checks the options of run and db:run_processors (nil: none), as
-- check_options.
local function check_run_options(opts, what, level)
  if opts == nil then return end
  check_options(opts, RUN_OPTIONS, what, level + 1)
  if opts.timeout ~= nil and not (opts.timeout >= 0) then
    error(what .. ": option 'timeout' must be a number of seconds >= 0",
      level + 1)
  end
  max_ms_of(opts, what, level + 1)
end

-- Gives the leases back, then closes the state.  Two calls: on a Redis
-- Cluster a call may run again (a conflict at its apply), and only the
-- release must then be done again, whole.
local function give_back(state)
  local ok, msg, status = state:release()
  state:close()
  return ok, msg, status
end

-- p:run_once{max_ms = ms} -> number of changes delivered in this pass
function Processor:run_once(opts)
  self:_check()
  local max_ms
  if opts ~= nil then
    check_options(opts, ONCE_OPTIONS, "run_once", 2)
    max_ms = max_ms_of(opts, "run_once", 2)
  end
  local deadline = max_ms and clock() + max_ms
  if self.running then
    error("processor '" .. self.name .. "' is already running", 2)
  end
  if self.backend.in_transaction(self.db) then
    error("processor '" .. self.name .. "' cannot run inside a transaction",
      2)
  end
  self.running = true
  local ok, n, msg, status = pcall(self._pass, self, deadline)
  self.running = false
  if self.closing then              -- closed by the handler or on_error
    self.closing = false
    give_back(self.state)
  end
  if not ok then error(n, 0) end
  return n, msg, status
end

-- The loop of run and db:run_processors (opts checked by
-- check_run_options): `pass` returns the changes delivered (or nil, msg,
-- status).
local function loop(opts, pass, stopped)
  opts = opts or {}
  local deadline = opts.timeout and clock() + opts.timeout * 1000
  local total = 0
  while not stopped() do
    local n, msg, status = pass()
    if n == nil then return nil, msg, status end
    total = total + n
    if deadline and clock() >= deadline then break end
    if n == 0 then
      if opts.until_idle then break end
      local wait = IDLE_SLEEP
      if deadline then wait = math.min(wait, (deadline - clock()) / 1000) end
      if ngx and ngx.sleep then ngx.sleep(wait) else sleep(wait) end
    end
  end
  return total
end

-- p:run{until_idle = bool, timeout = seconds, max_ms = ms} -> changes
-- delivered, its passes bounded by max_ms (run_once).
-- Without either option it runs until the processor is closed.
function Processor:run(opts)
  self:_check()
  check_run_options(opts, "run", 2)
  local max_ms = opts and opts.max_ms
  return loop(opts, function()
    return self:run_once(max_ms and { max_ms = max_ms })
  end,
    function() return self.closed end)
end

-- p:lag() -> total, {[range] = n}: changes not yet delivered.
function Processor:lag()
  self:_check()
  return self.state:lag()
end

-- p:status() -> {name, instance, ranges = {{range, owner, continuation,
-- lag, failures, attempts, delivered, expires}, ...}}
function Processor:status()
  self:_check()
  local ranges, msg, status = self.state:ranges()
  if not ranges then return nil, msg, status end
  return { name = self.name, instance = self.instance, ranges = ranges }
end

-- p:dead_letters() -> {{seq, range, changes, error, attempts, ts}, ...}
function Processor:dead_letters()
  self:_check()
  return self.state:dead_letters()
end

-- p:drop_dead_letter(seq) -> true | nil, msg, 404
function Processor:drop_dead_letter(seq)
  self:_check()
  return self.state:drop_dead_letter(seq)
end

-- p:clear_dead_letters() -> number removed
function Processor:clear_dead_letters()
  self:_check()
  return self.state:clear_dead_letters()
end

local function unlist(self)
  local list = opened[self.db]
  if list then
    for i = #list, 1, -1 do
      if list[i] == self then table.remove(list, i) end
    end
  end
end

-- p:close(): gives the leases back (idempotent).  Called by a handler or
-- on_error, it takes effect when the pass ends.
function Processor:close()
  if self.closed then return true end
  self.closed = true
  unlist(self)
  if self.running then
    self.closing = true
    return true
  end
  return give_back(self.state)
end

-- p:delete(): forgets the processor in the database (its checkpoints,
-- leases and dead letters: the next processor of this name on this
-- container starts afresh) and closes it.  An all_versions processor that
-- is no longer run holds back the container's retention until deleted.
function Processor:delete()
  self:_check()
  if self.running then
    error("processor '" .. self.name .. "' cannot be deleted while it runs",
      2)
  end
  local ok, msg, status = self.state:delete()
  if not ok then return nil, msg, status end
  self.state:close()
  self.closed = true
  unlist(self)
  return true
end

function Processor:__tostring()
  return "regolith.processor (" .. self.name ..
    (self.closed and ", closed)" or ")")
end

-- {=====================================================================
-- Looking at a processor from outside (the command, the explorer)
-- ======================================================================
local View = {}
View.__index = View

-- regolith.processor.inspect(db, source, name, mode) -> view | nil, msg,
-- status: a processor's state as stored (leases, checkpoints, lag, dead
-- letters), without running it: no lease is taken and no instance
-- counted.  `mode` ("latest" or "all_versions") is the one its state was
-- created in when nil (c:processors() tells it).  404 when no processor of
-- that name has state on the container.
function M.inspect(db, source, name, mode)
  local container, msg, status = db:container(source)
  if not container then return nil, msg, status end
  if mode == nil then               -- the mode its state was created in
    local list
    list, msg, status = container:processors()
    if not list then return nil, msg, status end
    for _, p in ipairs(list) do
      if p.name == name then mode = p.mode end
    end
    if mode == nil then
      return nil, ("no processor '%s' on '%s'"):format(name, source), 404
    end
  end
  local state = backend_of(db).new(container, name, C.instance_id(),
    MODES[mode], 100, 60, 1)
  local ranges
  ranges, msg, status = state:ranges()
  if not ranges then
    state:close()
    if status == 404 then
      msg = ("no processor '%s' on '%s'"):format(name, source)
    end
    return nil, msg, status
  end
  return setmetatable({ db = db, container = container, name = name,
    mode = mode, state = state }, View)
end

-- view:status() -> {name, mode, ranges = {{range, owner, expires,
-- continuation, lag, failures, attempts, delivered}, ...}, lag,
-- dead_letters} | nil, msg, status
function View:status()
  local ranges, msg, status = self.state:ranges()
  if not ranges then return nil, msg, status end
  local lag = 0
  for _, r in ipairs(ranges) do lag = lag + r.lag end
  local dead
  dead, msg, status = self.state:dead_letters()
  if not dead then return nil, msg, status end
  return { name = self.name, source = self.container:name(),
           mode = self.mode, ranges = ranges, lag = lag,
           dead_letters = #dead }
end

function View:dead_letters() return self.state:dead_letters() end

function View:clear_dead_letters() return self.state:clear_dead_letters() end

function View:drop_dead_letter(seq) return self.state:drop_dead_letter(seq) end

-- view:redrive(letter) -> {written, skipped, charge} | nil, msg, status:
-- writes the items of a dead letter again, unchanged (a replace with
-- if_match on the version read), so that their current versions come
-- through the container's feed again and the processor handles them as
-- any change.  Every processor on the container sees them again, and
-- automatic replace triggers fire.  An item that no longer exists, and a
-- delete in an all_versions letter, cannot come back this way: skipped.
-- An item written meanwhile (412) is already on its way: counted written.
function View:redrive(letter)
  local c = self.container
  local paths = keys.paths(c:spec())
  local out = { written = 0, skipped = 0, charge = 0 }
  local seen = {}
  for _, change in ipairs(letter.changes or {}) do
    local id, pk
    if self.mode == "all_versions" then
      if change.current then
        id, pk = change.metadata.id, change.metadata.partition_key
      end
    else
      id, pk = change.id, keys.of(change, paths)
    end
    local key = id and pk ~= nil and id .. "\0" .. core.json.encode(pk)
    if not id or pk == nil then
      out.skipped = out.skipped + 1
    elseif not seen[key] then
      seen[key] = true
      local doc, info, status = c:read(id, pk)
      if not doc then
        if status ~= 404 then return nil, info, status end
        out.skipped = out.skipped + 1
      else
        out.charge = out.charge + info.charge
        local ok, winfo, wstatus = c:replace(doc, { if_match = doc._etag })
        if ok then
          out.charge = out.charge + winfo.charge
          out.written = out.written + 1
        elseif wstatus == 412 then
          out.written = out.written + 1
        elseif wstatus == 404 then
          out.skipped = out.skipped + 1
        else
          return nil, winfo, wstatus
        end
      end
    end
  end
  return out
end

function View:close() return self.state:close() end
-- }=====================================================================

-- The processor of each handle a bounded run_processors pass did not come
-- to: the next pass starts there (weak, as `opened`).
local resume = setmetatable({}, { __mode = "k" })

-- db:run_processors{until_idle, timeout, max_ms} -> changes delivered: one
-- pass of every processor opened on this handle (without until_idle and
-- timeout), or passes until none delivers anything (until_idle) or the
-- time is up.  max_ms bounds each pass as run_once's does: the processors
-- after the one it stopped in wait for the next pass, which starts with
-- them (and the one it stopped in goes on from its own cursor in turn).
function M.run_all(db, opts)
  local max_ms
  local function pass()
    local list, total = opened[db] or {}, 0
    local copy = {}
    for i = 1, #list do copy[i] = list[i] end
    local first = 1
    for i = 1, #copy do
      if copy[i] == resume[db] then first = i end
    end
    resume[db] = nil
    local deadline = max_ms and clock() + max_ms
    for step = 1, #copy do
      local at = (first + step - 2) % #copy + 1
      local p = copy[at]
      if not p.closed then
        local once = deadline and { max_ms = math.max(0, deadline - clock()) }
        local n, msg, status = p:run_once(once)
        if n == nil then return nil, msg, status end
        total = total + n
        if deadline and n > 0 and clock() >= deadline then
          resume[db] = copy[at % #copy + 1]   -- p goes on from its
          break                                -- cursor when its turn comes
        end
      end
    end
    return total
  end
  check_run_options(opts, "run_processors", 2)
  max_ms = opts and opts.max_ms
  if opts == nil or (opts.until_idle == nil and opts.timeout == nil) then
    return pass()
  end
  local loop_opts = { until_idle = opts.until_idle, timeout = opts.timeout }
  return loop(loop_opts, pass, function() return false end)
end

-- Closes every processor opened on a handle (before the handle closes).
function M.close_all(db)
  local list = opened[db]
  if not list then return end
  for i = #list, 1, -1 do
    local p = list[i]
    if p then p:close() end
  end
  opened[db] = nil
end

M.Processor = Processor
return M
