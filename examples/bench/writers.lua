--[[
Durable writers (sync "full"): one writer alone, and 16 writers at once,
each creating blog comments (the blog's C3: every property indexed) in a
container that already holds 20,000 items.

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/writers.lua [--n 2000] [--writers 16] [--json FILE]

Rows:
  lone, direct          one writer, c:create, one transaction per create
  lone, group_commit    the same through db:group_commit in a coroutine
                        (its leader yields once to a scheduler with no one
                        else to run): what group commit costs a lone writer
  N coroutines          N writers taking turns in one process, each create
                        its own transaction (what they get without it)
  N coroutines, group   the same through db:group_commit
  N processes           N processes writing at once (LMDB serialises them)

For each: creates per second, and the median and 99th percentile of a
create's latency (from the call to its return, waiting included), in µs.
]]

local regolith = require "regolith"
local system = require "system"

local args = { n = 2000, writers = 16, json = nil, child = nil, dir = nil }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or arg[i + 1] == nil then
      error("usage: writers.lua [--n N] [--writers W] [--json FILE]")
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
  args.n, args.writers = tonumber(args.n), tonumber(args.writers)
end

local now = system.monotime
local PRELOAD = 20000

local function comment(tag, i)
  return { id = ("%s-%d"):format(tag, i), postId = "p" .. (i % 500),
    userId = "u" .. (i % 97), username = "user" .. (i % 97), type = "comment",
    content = "A comment written by the writers benchmark, about this post.",
    creationDate = ("2024-01-01T00:%02d:%02d.%07dZ"):format(i // 60 % 60, i % 60, i) }
end

local function quantile(t, q)
  table.sort(t)
  return t[math.max(1, math.ceil(#t * q))]
end

local function summary(name, lat, seconds)
  local r = { name = name, per_second = #lat / seconds,
              p50 = quantile(lat, 0.5) * 1e6, p99 = quantile(lat, 0.99) * 1e6 }
  print(("%-28s %9.0f/s  p50 %8.0f µs  p99 %8.0f µs"):format(name, r.per_second,
    r.p50, r.p99))
  return r
end

-- N writers as coroutines taking turns; write(w, i) makes one create.
local function coroutines(nw, count, write)
  local lat, cos, done = {}, {}, 0
  for w = 1, nw do
    cos[w] = coroutine.create(function()
      for i = w, count, nw do
        local t0 = now()
        assert(write(w, i))
        lat[#lat + 1] = now() - t0
        coroutine.yield()
      end
    end)
  end
  local t0 = now()
  while done < nw do
    done = 0
    for w = 1, nw do
      if coroutine.status(cos[w]) == "suspended" then assert(coroutine.resume(cos[w]))
      else done = done + 1 end
    end
  end
  return lat, now() - t0
end

if args.child then
  -- one of N processes: count creates, then the latencies on stdout
  local db = assert(regolith.open(args.dir, { sync = "full" }))
  local c = assert(db:container("posts"))
  local lat = {}
  for i = 1, args.n do
    local t0 = now()
    assert(c:create(comment("proc" .. args.child, i)))
    lat[#lat + 1] = now() - t0
  end
  io.write(table.concat(lat, "\n"), "\n")
  db:close()
  return
end

local dir = os.tmpname()
os.remove(dir)
do
  local db = assert(regolith.open(dir, { sync = "none" }))
  local c = assert(db:create_container("posts", { partition_key = "/postId" }))
  for i = 1, PRELOAD, 100 do
    local ops = {}
    for k = i, i + 99 do
      local d = comment("pre", k)
      d.postId = "p0"
      ops[#ops + 1] = { op = "create", doc = d }
    end
    assert(c:batch("p0", ops))
  end
  db:close()
  os.execute("sync")
end

local db = assert(regolith.open(dir, { sync = "full" }))
local c = assert(db:container("posts"))
local n, nw = args.n, args.writers
local rows = {}
for i = 1, 1000 do assert(c:create(comment("warm", i))) end   -- a warm cache
print(("writers benchmark: sync full, %d creates per row, %d items before"):format(n, PRELOAD))

do
  local lat = {}
  local t0 = now()
  for i = 1, n do
    local s = now()
    assert(c:create(comment("lone", i)))
    lat[#lat + 1] = now() - s
  end
  rows[#rows + 1] = summary("lone, direct", lat, now() - t0)
end
local grouped = db.group_commit ~= nil     -- an older build has none
if grouped then
  local g = db:group_commit()
  local lat, seconds = coroutines(1, n, function(_, i)
    return g:run(function() return c:create(comment("lonegc", i)) end)
  end)
  rows[#rows + 1] = summary("lone, group_commit", lat, seconds)
end
do
  local lat, seconds = coroutines(nw, n, function(_, i)
    return c:create(comment("co", i))
  end)
  rows[#rows + 1] = summary(("%d coroutines"):format(nw), lat, seconds)
end
if grouped then
  local g = db:group_commit()
  local lat, seconds = coroutines(nw, n, function(_, i)
    return g:run(function() return c:create(comment("gc", i)) end)
  end)
  local r = summary(("%d coroutines, group"):format(nw), lat, seconds)
  local st = g:stats()
  r.per_transaction = st.members / st.groups
  print(("%28s %.1f creates per transaction"):format("", r.per_transaction))
  rows[#rows + 1] = r
end
db:close()
do
  local interp = arg[-1] or "lua5.4"
  local per = math.max(1, n // nw)
  local pipes, lat = {}, {}
  local t0 = now()
  for w = 1, nw do
    pipes[w] = io.popen(("%s %s --child %d --dir '%s' --n %d"):format(interp, arg[0], w,
      dir, per))
  end
  for w = 1, nw do
    for line in pipes[w]:lines() do lat[#lat + 1] = tonumber(line) end
    pipes[w]:close()
  end
  rows[#rows + 1] = summary(("%d processes"):format(nw), lat, now() - t0)
end
if grouped then
  print(("group commit: %.1fx the throughput of %d coroutines writing alone, "
    .. "%.1fx that of %d processes; a lone writer %.2fx its latency"):format(
    rows[4].per_second / rows[3].per_second, nw, rows[4].per_second / rows[5].per_second,
    nw, rows[2].p50 / rows[1].p50))
end
if args.json then
  local f = assert(io.open(args.json, "w"))
  f:write(assert(regolith.json.encode(rows)), "\n")
  f:close()
end
os.execute("rm -rf '" .. dir .. "'")
