--[[
A bench's own Redis Cluster: tools/redis-cluster.sh (3 primaries, 3
replicas, 127.0.0.1) started in a directory, owned by the process that
runs the bench (if it dies, the script's watchdog stops the nodes), and
stopped by it.  The benches run from the repository's root:

    local own = dofile("examples/bench/own_cluster.lua")
    local base = own.start(dir)      -- the port of its first node
    ...
    own.stop(dir)

own.sh(cmd) is a shell command's output, for the benches' other commands.
]]

local M = {}

function M.sh(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("*a")
  p:close()
  return out
end

function M.start(dir)
  local base = M.sh("RG_CLUSTER_OWNER=$PPID tools/redis-cluster.sh start " ..
    dir):match("(%d+)%s*$")
  assert(base, "the cluster did not start")
  return base
end

function M.stop(dir)
  M.sh("tools/redis-cluster.sh stop " .. dir)
end

return M
