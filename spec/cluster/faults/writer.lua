-- A writer for the fault specs, run as a child process:
--   writer.lua URL CONTAINER WORKER SECONDS LOG [SYNC]
-- For SECONDS it creates items WORKER-1, WORKER-2, ... (partition keys k0
-- to k15) and, every other write, runs procedure "inc" on partition
-- "counter".  Each outcome goes to LOG as one line, written at once:
--   c <id> ok | c <id> doubt | i ok | i doubt | x <message>
-- "ok" is acknowledged; "doubt" is a 500 whose outcome is unknown (a
-- connection lost after the write was sent, or no replica acknowledged it
-- in time); anything else is an error the spec reports.
local regolith = require "regolith"
local socket = require "socket"

local url, cname, worker, seconds, logpath, sync = arg[1], arg[2], arg[3],
  tonumber(arg[4]), arg[5], arg[6] or "full"
local log = assert(io.open(logpath, "w"))
log:setvbuf("line")
local db = assert(regolith.open(url, { sync = sync, retry_seconds = 30 }))
local c = assert(db:container(cname))
local deadline = socket.gettime() + seconds
local i = 0
local function outcome(tag, ok, msg, status)
  if ok then log:write(tag, " ok\n")
  elseif status == 500 then log:write(tag, " doubt\n")
  else log:write("x ", tag, " ", tostring(status), " ", tostring(msg), "\n") end
end
while socket.gettime() < deadline do
  i = i + 1
  local id = worker .. "-" .. i
  outcome("c " .. id, c:create({ id = id, pk = "k" .. (i % 16), n = i }))
  if i % 2 == 0 then outcome("i", c:execute("inc", "counter")) end
end
db:close()
log:write("done\n")
log:close()
