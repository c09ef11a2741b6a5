-- Several processes hammering one database for a bounded time
-- (docs/guarantees.md, Several processes; docs/feed.md, Processors):
-- writers of every kind, readers, and one processor running in two
-- processes with leases; then verify() and exact counts.  The work and the
-- checks are tools/hammer.lua's (which runs longer by hand); here with
-- small numbers.
local H = require "helper"

describe("concurrency under load", function()
  after_each(function() H.cleanup() end)

  local function hammer(args)
    local cmd = H.lua_cmd("tools/hammer.lua " .. args) .. " 2>&1"
    local p = assert(io.popen(cmd, "r"))
    local out = p:read("a")
    local ok = p:close()
    assert(ok, out)
    return out
  end

  it("keeps exact counts: writers' logs, counters, a mirror and a tally kept by two processor processes", function()
    local out = hammer("--seconds 3 --writers 3 --readers 2 --processors 2 --sync lazy")
    assert.matches("hammer: ok", out, 1, true)
    -- both processor processes and every writer did work
    local a, b = out:match("2 processors %((%d+)%+(%d+) changes")
    assert.is_truthy(a, out)
    assert.is_true(tonumber(a) + tonumber(b) > 0, out)
  end)

  it("keeps them with durable commits too", function()
    local out = hammer("--seconds 2 --writers 2 --readers 1 --processors 2 --sync full")
    assert.matches("hammer: ok", out, 1, true)
  end)
end)
