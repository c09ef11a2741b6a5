--[[
Durable writers (sync "full"): one writer alone, and 16 writers at once,
each creating blog comments (the blog's C3: every property indexed) in a
container that already holds 20,000 items.

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/writers.lua [--n 2000] [--writers 16] [--json FILE]
                                      [--disk build/bench/disk]

Rows:
  lone, direct          one writer, c:create, one transaction per create
  lone, group_commit    the same through db:group_commit in a coroutine
                        (its leader yields once to a scheduler with no one
                        else to run): what group commit costs a lone writer
  N coroutines          N writers taking turns in one process, each create
                        its own transaction (what they get without it)
  N coroutines, group   the same through db:group_commit
  N processes           N processes writing at once (LMDB serialises them)
  N processes, queue    the same through the write queue (db:write_queue):
                        one transaction and one flush for the requests of
                        several processes
  1 process, queue      one process alone through the write queue: what
                        the queue costs a writer that finds no one else

For each: creates per second, and the median and 99th percentile of a
create's latency (from the call to its return, waiting included), in µs,
with the machine's load average.  The processes are started, and open
the database, before any of them creates: their rows are timed from the
first create to the last.  Where the build counts what its log did
(db:stats().log): the bytes of log a create wrote, and for the processes
the commits and flushes per create; and the lone writer's creates run in
four turns, each followed by this disk's own write and flush of as many
bytes as a commit's record (build/bench/disk, examples/bench/disk.c), so
that the create's median is set beside the disk's in the same minutes.
]]

local regolith = require "regolith"
local system = require "system"

local args = { n = 2000, writers = 16, json = nil, child = nil, dir = nil, queue = "0",
               disk = "build/bench/disk" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or arg[i + 1] == nil then
      error("usage: writers.lua [--n N] [--writers W] [--json FILE] [--disk PROGRAM]")
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

-- The machine's load average over the last minute (a shared machine).
local function load_average()
  local f = io.open("/proc/loadavg")
  if not f then return nil end
  local l = tonumber(f:read("*l"):match("^(%S+)"))
  f:close()
  return l
end

-- What the log did since the machine started (db:stats().log), or nil.
local function log_stats(db)
  local st = db:stats()
  return st and st.log
end

local function summary(name, lat, seconds, extra)
  local r = { name = name, per_second = #lat / seconds,
              p50 = quantile(lat, 0.5) * 1e6, p99 = quantile(lat, 0.99) * 1e6,
              load = load_average() }
  print(("%-28s %9.0f/s  p50 %8.0f µs  p99 %8.0f µs  (load %.1f)%s"):format(name,
    r.per_second, r.p50, r.p99, r.load or 0, extra or ""))
  return r
end

-- Log records and bytes per create between two log_stats.
local function per_create(before, after, creates)
  if not (before and after) then return nil end
  local records = after.records - before.records
  return { records = records / creates, bytes = (after.bytes - before.bytes) / creates,
           per_record = records > 0 and (after.bytes - before.bytes) / records or 0,
           flushes = (after.flushes - before.flushes) / creates }
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
  -- one of N processes: "ready" once open, then, once the file go is
  -- there, count creates; then the latencies on stdout, and when the
  -- creates began and ended (so that starting the processes is not timed)
  local db = assert(regolith.open(args.dir, { sync = "full" }))
  local c = assert(db:container("posts"))
  local q = args.queue == "1" and db:write_queue()
  local lat = {}
  io.write("ready\n")
  io.stdout:flush()
  while not io.open(args.dir .. "/go") do system.sleep(0.001) end
  local began = now()
  for i = 1, args.n do
    local t0 = now()
    local doc = comment((q and "procq" or "proc") .. args.writers .. "-" .. args.child, i)
    if q then assert(q:create(c, doc)) else assert(c:create(doc)) end
    lat[#lat + 1] = now() - t0
  end
  io.write(table.concat(lat, "\n"), "\n", ("span %.6f %.6f\n"):format(began, now()))
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
  -- in four turns, each followed by this disk's own write and flush of as
  -- many bytes as a commit's log record (build/bench/disk), so that both
  -- meet the disk in the same state
  local lat, disk, seconds, done = {}, {}, 0, 0
  local before = log_stats(db)
  local have_disk = io.open(args.disk) ~= nil
  for turn = 1, 4 do
    local count = turn < 4 and n // 4 or n - done
    local t0 = now()
    for i = done + 1, done + count do
      local s = now()
      assert(c:create(comment("lone", i)))
      lat[#lat + 1] = now() - s
    end
    seconds = seconds + now() - t0
    done = done + count
    local pc = per_create(before, log_stats(db), done)
    if have_disk and pc and pc.per_record > 0 then
      local p = io.popen(("%s %s %d %d"):format(args.disk, dir, math.floor(pc.per_record),
        math.max(20, count // 2)))
      local line = p:read("*a")
      p:close()
      for v in line:gmatch("p50=([%d.]+)") do disk[#disk + 1] = tonumber(v) end
    end
  end
  local pc = per_create(before, log_stats(db), n)
  local extra = pc and ("  %.0f B of log a create"):format(pc.bytes) or ""
  local r = summary("lone, direct", lat, seconds, extra)
  if #disk > 0 then
    table.sort(disk)
    r.disk_p50 = disk[(#disk + 1) // 2]
    r.record_bytes = pc.per_record
    print(("%28s this disk's write+flush of %.0f B: p50 %.0f µs (median of %d turns); "
      .. "the create %.2fx that"):format("", pc.per_record, r.disk_p50, #disk,
      r.p50 / r.disk_p50))
  end
  rows[#rows + 1] = r
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
-- N processes writing at once, each its own transactions or (queued)
-- through the write queue
local function processes(queued, nw)
  local interp = arg[-1] or "lua5.4"
  local per = math.max(1, n // nw)
  local pipes, lat = {}, {}
  local before = log_stats(db)
  local first, last = math.huge, 0
  for w = 1, nw do
    pipes[w] = io.popen(("%s %s --child %d --writers %d --dir '%s' --n %d --queue %d"):format(
      interp, arg[0], w, nw, dir, per, queued and 1 or 0))
  end
  -- the creates begin once every process is ready; the time is from the
  -- first create to the last (the processes' clock is the machine's)
  for w = 1, nw do assert(pipes[w]:read("l") == "ready", "a writer did not start") end
  assert(io.open(dir .. "/go", "w")):close()
  for w = 1, nw do
    for line in pipes[w]:lines() do
      local b, e = line:match("^span (%S+) (%S+)$")
      if b then
        first, last = math.min(first, tonumber(b)), math.max(last, tonumber(e))
      else
        lat[#lat + 1] = tonumber(line)
      end
    end
    pipes[w]:close()
  end
  os.remove(dir .. "/go")
  local seconds = last - first
  local pc = per_create(before, log_stats(db), #lat)
  local r = summary(("%d process%s%s"):format(nw, nw > 1 and "es" or "",
    queued and ", queue" or ""), lat,
    seconds, pc and ("  %.2f commits and %.2f flushes a create, %.0f B of log a create"):format(
      pc.records, pc.flushes, pc.bytes) or "")
  r.log = pc
  rows[#rows + 1] = r
  return r
end
local alone = processes(false, nw)
if db.write_queue then
  local r = processes(true, nw)
  print(("%28s %.1fx the throughput of %d processes writing alone"):format("",
    r.per_second / alone.per_second, nw))
  -- what the queue costs a writer that finds no one else queued
  local lone = processes(true, 1)
  print(("%28s a lone process's create through the queue: %.2fx the latency of "
    .. "a lone direct create"):format("", lone.p50 / rows[1].p50))
end
db:close()
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
