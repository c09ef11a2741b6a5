--[[
Runaway requests (docs/guarantees.md, Runaway requests): each case of
issue 26, run in a child process with the default limits, and what it
took until it was stopped: the status, the CPU and wall time of the call,
and the child's peak resident memory (VmHWM), beside the budget the docs
state for it (5 s of CPU for a script or a query page; 64 MiB a script may
allocate and 64 MiB its transaction may write).

Run from the repository root:
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/runaway.lua [case ...]
(each case takes up to about 6 s; `luajit` runs it under LuaJIT, after
`make LUA=luajit` and with build/luajit in LUA_CPATH).
]]

local CASES = {
  { "loop", "a tight loop (the budget's measure)",
    "local i = 0 while true do i = i + 1 end" },
  { "pattern", "catastrophic backtracking",
    [[return (("a"):rep(30) .. "b"):match(("a*"):rep(30) .. "c")]] },
  { "gmatch", "a gmatch loop over 2 MB",
    [[local s = ("ab"):rep(1e6) while true do for w in s:gmatch("a") do end end]] },
  { "insert", "inserts at the front of a 1e6-entry table",
    [[local t = {} for i = 1, 1e6 do t[i] = i end while true do table.insert(t, 1, 0) end]] },
  { "compare", "comparisons of 20 MB strings",
    [[local a, b = ("x"):rep(2e7) .. "a", ("x"):rep(2e7) .. "b"
      local n = 0 while true do if a < b then n = n + 1 end end]] },
  { "sort", "sorting 300 strings of 100 KB",
    [[local t = {} for i = 1, 300 do t[i] = ("x"):rep(1e5) .. (i % 7) end
      while true do table.sort(t) end]] },
  { "rep", "string.rep of 30 MB in a loop",
    [[while true do local s = ("x"):rep(3e7) end]] },
  { "write", "a procedure writing items of 1.9 MB in a loop",
    [[local big = ("x"):rep(1900000) local i = 0
      while true do i = i + 1 ctx:create({ id = "i" .. i, pk = "p", v = big }) end]] },
  { "like", "LIKE '%' + 19,000 x \"a\" + 'b' over 200 items of 20,000 \"a\"s (a query)" },
  { "search", "LIKE '%' + 5,000 x \"a_\" + 'b%' over the same (a query)" },
}

local child = [[
local regolith = require "regolith"
local system_ok, system = pcall(require, "system")
local which, body, dir = arg[1], arg[2], arg[3]
local db = assert(regolith.open(dir, { sync = "none" }))
local c = assert(db:create_container("t", { partition_key = "/pk" }))
local ok, msg, status
local function clock() return system_ok and system.gettime() or os.time() end
local t0, w0
if which == "like" or which == "search" then
  local s = ("a"):rep(20000)
  for i = 1, 200 do assert(c:create({ id = "i" .. i, pk = "p" .. i, s = s })) end
  local p = which == "like" and "%" .. ("a"):rep(19000) .. "b" or "%" .. ("a_"):rep(5000) .. "b%"
  t0, w0 = os.clock(), clock()
  ok, msg, status = c:query("SELECT VALUE c.id FROM c WHERE c.s LIKE @p", { p = p })
  if ok then msg = ("%d rows, %.2f RU"):format(#ok, msg.charge) status = 200 end
else
  assert(c:create_procedure("p", "return function(ctx) " .. body .. " end"))
  t0, w0 = os.clock(), clock()
  ok, msg, status = c:execute("p", "p")
end
local cpu, wall = os.clock() - t0, clock() - w0
local peak
for line in io.lines("/proc/self/status") do
  peak = peak or tonumber(line:match("^VmHWM:%s*(%d+)"))
end
print(("%s\t%.2f\t%.2f\t%d\t%s"):format(tostring(status), cpu, wall, peak // 1024,
  tostring(msg):gsub("\n", " "):sub(1, 90)))
db:close()
]]

local interp = jit and "luajit" or "lua5.4"
local want = {}
for _, a in ipairs(arg) do want[a] = true end
local script = os.tmpname()
do
  local f = assert(io.open(script, "w"))
  f:write(jit and child:gsub("peak // 1024", "math.floor(peak / 1024)") or child)
  f:close()
end
print(("%-8s %-6s %8s %8s %9s  %s"):format("case", "status", "CPU s", "wall s",
  "peak MB", "what"))
for _, case in ipairs(CASES) do
  local name, what, body = case[1], case[2], case[3]
  if next(want) == nil or want[name] then
    local dir = os.tmpname()
    os.remove(dir)
    local cmd = ("LUA_PATH=%q LUA_CPATH=%q %s %s %s %q %s"):format(package.path,
      package.cpath, interp, script, name, body or "", dir)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("*a")
    p:close()
    os.execute("rm -rf '" .. dir .. "'")
    local status, cpu, wall, peak, msg = out:match("^(%S+)\t(%S+)\t(%S+)\t(%S+)\t([^\n]*)")
    if status then
      print(("%-8s %-6s %8s %8s %9s  %s: %s"):format(name, status, cpu, wall, peak,
        what, msg))
    else
      print(("%-8s failed: %s"):format(name, out))
    end
  end
end
os.remove(script)
