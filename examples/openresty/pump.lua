--[[
pump: the example's processors in a process of their own, beside nginx's
workers on the same database (serve.sh starts and stops it; docs/openresty.md).

    luajit examples/openresty/pump.lua DB STOPFILE

A regolith call never yields, so a processor's batch run in an nginx
worker holds that worker's event loop for its transaction and, with
`sync = "full"`, its flush: every request the worker holds waits (in
`make openresty` this was most of the slowest 1 % of the requests'
time).  Here the batches run in a process that serves no request; the
workers only read and queue their writes.  It pumps while the processors
find work (one batch per pass: each transaction holds the writer lock
briefly), sleeps PUMP_IDLE when they find none, says a failed pass on
stderr and goes on (as a worker's tick does), and stops once STOPFILE
exists, closing the database, which gives its leases back at once.  A
pump that dies leaves its ranges to the next one once its leases expire
(lease_seconds); run it under a supervisor in production.

The environment: REGOLITH_SYNC, the database's sync mode (as the workers').
]]

local regolith = require "regolith"
local model_of = require "model"
local ffi = require "ffi"

ffi.cdef [[ int poll(void *fds, unsigned long nfds, int timeout); ]]
local function sleep(seconds) ffi.C.poll(nil, 0, math.floor(seconds * 1000)) end

local PUMP_IDLE = 0.05         -- seconds between two passes that found nothing

local path, stopfile = arg[1], arg[2]
if not (path and stopfile) then
  io.stderr:write("usage: pump.lua DB STOPFILE\n")
  os.exit(2)
end

local function stopping()
  local f = io.open(stopfile)
  if f then f:close() end
  return f ~= nil
end

local db = assert(regolith.open(path, { sync = os.getenv("REGOLITH_SYNC") }))
model_of.open(db)              -- its processors: an instance of this process
while not stopping() do
  local ok, n, msg, code = pcall(db.run_processors, db, { max_ms = 0 })
  if not ok or n == nil then
    -- as a worker's tick: said, and tried again (a failing batch is
    -- retried, then dead-lettered, by the processor itself)
    io.stderr:write(("pump: processors: %s%s\n"):format(tostring(n or msg),
                    ok and (" (" .. tostring(code) .. ")") or ""))
    sleep(PUMP_IDLE * 10)
  elseif n == 0 then
    sleep(PUMP_IDLE)
  end
end
db:close()
