-- A processor instance for the fault specs, run as a child process and
-- killed mid-batch:
--   processor.lua URL NAME INSTANCE TRANSACTIONAL MARKER
-- Processor NAME on container "src" (lease 2 s, batches of 5) runs procedure
-- "inc" on dst's partition "counter" once per change.  In the middle of its
-- first batch (after the first increment) it writes its pid to MARKER and
-- sleeps, waiting to be killed.
local regolith = require "regolith"
local socket = require "socket"

local url, name, instance, tx, marker = arg[1], arg[2], arg[3], arg[4] == "true", arg[5]
local db = assert(regolith.open(url, { sync = "none" }))
local dst = assert(db:container("dst"))
local first = true
local p = assert(db:processor({ name = name, source = "src", instance = instance,
  lease_seconds = 2, max_items = 5, transactional = tx,
  handler = function(changes)
    for _, _ in ipairs(changes) do
      assert(dst:execute("inc", "counter"))
      if first then
        first = false
        local stat = assert(io.open("/proc/self/stat")):read("*l")
        local f = assert(io.open(marker, "w"))
        f:write(stat:match("^(%d+)"), "\n")
        f:close()
        socket.sleep(60)
      end
    end
  end }))
p:run({ timeout = 60 })
