--[[
Compares the charges of the queries the specs ran, as recorded by
examples/bench/charge_log.lua: two builds (before, after), two backends
(local, cluster), or all four.

  lua5.4 examples/bench/charges.lua local-before=a.jsonl local-after=b.jsonl \
    [cluster-after=c.jsonl ...] [--top 40]

A query is the spec line that ran it, its text, parameters, options and
page, and the nth time that same call was made.  For every pair of logs:
how many queries both ran, how many cost the same, more, less; then the
queries whose charges differ, with each log's charge (loaded/lookups).
]]

local regolith = require "regolith"
local json = regolith.json

local argparse = require "argparse"

local p = argparse("charges.lua", "Compares the charges of two or more logs")
p:argument("logs", "label=file.jsonl, one per log."):args("+")
p:option("--top", "Differing queries shown.", "40", tonumber)
local args = p:parse()
local logs, top = {}, args.top
for _, a in ipairs(args.logs) do
  local label, file = a:match("^([^=]+)=(.+)$")
  if not label then p:error("a log is label=file.jsonl, not " .. a) end
  logs[#logs + 1] = { label = label, file = file }
end
assert(#logs >= 2, "give at least two logs")

for _, l in ipairs(logs) do
  l.by = {}
  for line in io.lines(l.file) do
    local r = json.decode(line)
    l.by[r.key .. "\t#" .. r.n] = r
  end
end

local function cell(r)
  if r == nil then return "-" end
  if r.status then return "status " .. tostring(r.status) end
  return ("%.2f (%d/%d)"):format(r.charge, r.loaded, r.lookups)
end

print(("%-16s %-16s %8s %8s %8s %8s   %s"):format("log", "log", "both", "same",
  "more", "less", "sum of charges"))
for i = 1, #logs do
  for j = i + 1, #logs do
    local a, b = logs[i], logs[j]
    local both, same, more, less, sa, sb = 0, 0, 0, 0, 0, 0
    for k, ra in pairs(a.by) do
      local rb = b.by[k]
      if rb and ra.charge and rb.charge then
        both = both + 1
        sa, sb = sa + ra.charge, sb + rb.charge
        if math.abs(ra.charge - rb.charge) < 0.005 then same = same + 1
        elseif rb.charge > ra.charge then more = more + 1
        else less = less + 1 end
      end
    end
    print(("%-16s %-16s %8d %8d %8d %8d   %.2f -> %.2f RU"):format(a.label,
      b.label, both, same, more, less, sa, sb))
  end
end

-- the queries whose charges differ somewhere, largest difference first
local keys = {}
for k in pairs(logs[1].by) do
  local lo, hi, all = math.huge, -math.huge, true
  for _, l in ipairs(logs) do
    local r = l.by[k]
    if r == nil or r.charge == nil then all = false break end
    lo, hi = math.min(lo, r.charge), math.max(hi, r.charge)
  end
  if all and hi - lo >= 0.005 then keys[#keys + 1] = { k = k, d = hi - lo } end
end
table.sort(keys, function(a, b)
  if a.d ~= b.d then return a.d > b.d end
  return a.k < b.k
end)
print()
print(("%d queries cost differently in these logs; the %d largest " ..
  "differences (charge (loaded/lookups)):"):format(#keys, math.min(top, #keys)))
for i = 1, math.min(top, #keys) do
  local k = keys[i].k
  local where, sql, params = k:match("^([^\t]*)\t([^\t]*)\t([^\t]*)")
  local cells = {}
  for _, l in ipairs(logs) do
    cells[#cells + 1] = ("%s %s"):format(l.label, cell(l.by[k]))
  end
  print(("%s  %s%s"):format(where, sql:sub(1, 110),
    params ~= "{}" and ("  " .. params:sub(1, 60)) or ""))
  print("    " .. table.concat(cells, "   "))
end
