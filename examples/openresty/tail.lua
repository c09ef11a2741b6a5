--[[
tail: where the slowest requests' time went, from the traces the workers
write with REGOLITH_APP_TRACE (load.sh's TRACE=1 runs it after each round):

    lua5.4 examples/openresty/tail.lua TRACE-FILES...

Each worker's file has a line per request (R) and per pass of its
processors' pump (P): when the loop iteration that took it began, when
its handler began and when it ended (ms; app.lua, trace_line).  wrk keeps
each connection busy, sending its next request as soon as an answer comes,
so the time between two answers on one connection is what the client saw
(its latency and its own turnaround).  Printed: those gaps' percentiles;
each kind of request's own handler time; the pump's passes; and, for the
slowest 1 % of the gaps, how much was the request's own work and what
held its worker's loop before its handler began (the other requests and
passes that ran in between, mean ms per slow request).  Connections with
100 requests or fewer (load.sh's checks) are left out.
]]

local function kind(m, uri)
  if uri:match("^/users/[^/]+/posts$") then return m .. " Q3 user's posts"
  elseif uri:match("^/users/") then return m .. " user"
  elseif uri == "/posts" then return m .. " C2 post"
  elseif uri:match("/comments$") then return m .. " comments"
  elseif uri:match("/likes$") then return m .. " likes"
  elseif uri:match("^/posts/") then return m .. " Q2 post"
  elseif uri == "/feed" then return m .. " Q6 feed" end
  return m .. " " .. uri
end

local segs, conns = {}, {}       -- per worker: its R and P lines; per connection
for _, file in ipairs(arg) do
  local w = file:match("%.(%d+)$") or file
  segs[w] = {}
  for line in io.lines(file) do
    local k, loop, t0, t1, rest = line:match("^(%a) (%S+) (%S+) (%S+) (.*)$")
    if k then
      local s = { k = k, w = w, loop = tonumber(loop) * 1000,
                  t0 = tonumber(t0) * 1000, t1 = tonumber(t1) * 1000 }
      if k == "R" then
        local c, m, uri = rest:match("^(%d+) (%S+) (%S+)")
        s.c, s.what = w .. ":" .. c, kind(m, uri)
        conns[s.c] = conns[s.c] or {}
        table.insert(conns[s.c], s)
      else
        s.what = "processors' pump"
      end
      table.insert(segs[w], s)
    end
  end
end

local function pct(a, p)
  table.sort(a)
  return a[math.max(1, math.ceil(#a * p / 100))] or 0
end

local reqs, gaps = {}, {}
for _, list in pairs(conns) do
  if #list > 100 then
    for i = 2, #list do
      local r = list[i]
      r.gap, r.prev = r.t1 - list[i - 1].t1, list[i - 1].t1
      reqs[#reqs + 1] = r
      gaps[#gaps + 1] = r.gap
    end
  end
end
if #reqs == 0 then
  print("tail: no connection with more than 100 requests in the traces")
  return
end
local p99 = pct(gaps, 99)
print(("between two answers on a connection (ms): n %d, p50 %.1f, p90 %.1f, " ..
  "p99 %.1f, max %.1f"):format(#gaps, pct(gaps, 50), pct(gaps, 90), p99,
  pct(gaps, 100)))

local own, names = {}, {}
for _, r in ipairs(reqs) do
  if not own[r.what] then own[r.what] = {}; names[#names + 1] = r.what end
  table.insert(own[r.what], r.t1 - r.t0)
end
table.sort(names)
print("each kind's own handler time (ms):")
for _, k in ipairs(names) do
  local a, sum = own[k], 0
  for _, v in ipairs(a) do sum = sum + v end
  print(("  %-22s n %6d  p50 %5.1f  p99 %5.1f  max %6.1f  total %7.0f"):format(
    k, #a, pct(a, 50), pct(a, 99), pct(a, 100), sum))
end
for w, list in pairs(segs) do
  local p, sum = {}, 0
  for _, s in ipairs(list) do
    if s.k == "P" then p[#p + 1] = s.t1 - s.t0; sum = sum + s.t1 - s.t0 end
  end
  if #p > 0 then
    print(("worker %s: the pump's passes %d, p50 %.1f, p99 %.1f, max %.1f ms, " ..
      "total %.0f ms"):format(w, #p, pct(p, 50), pct(p, 99), pct(p, 100), sum))
  end
end

local n, mine, held = 0, 0, {}
for _, r in ipairs(reqs) do
  if r.gap >= p99 then
    n = n + 1
    mine = mine + (r.t1 - r.t0)
    for _, s in ipairs(segs[r.w]) do
      if s ~= r and s.t1 > r.prev and s.t0 < r.t0 then
        held[s.what] = (held[s.what] or 0) +
          math.min(s.t1, r.t0) - math.max(s.t0, r.prev)
      end
    end
  end
end
print(("the slowest 1 %% (%d, %.1f ms or more): their own work %.1f ms, " ..
  "what held their worker before (mean ms each):"):format(n, p99, mine / n))
local list = {}
for k, v in pairs(held) do list[#list + 1] = { k, v } end
table.sort(list, function(a, b) return a[2] > b[2] end)
local sum = 0
for _, b in ipairs(list) do
  print(("  %-22s %6.2f"):format(b[1], b[2] / n))
  sum = sum + b[2]
end
print(("  %-22s %6.2f"):format("together", sum / n))
