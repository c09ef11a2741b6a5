--[[
Change-feed benchmarks.

  1. Pull reads: changes per second read with c:changes (pages of 100), in
     latest and in all_versions mode.
  2. Processors with an empty handler: changes delivered per second, with
     and without a transaction around each batch.
  3. End to end: a writer process creates items in one container, one write
     transaction per item, as fast as it can, while this process runs a
     transactional processor copying every new item into another
     container.  Reported: the writer's rate, the copies' rate over the same
     run, the largest lag seen, and how long the copies trail the writer's
     last item.

Run from the repository root (make bench does):
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/bench/feed.lua [--n 20000] [--writes 20000] [--sync full]

--sync applies to part 3 (parts 1 and 2 run with sync "none": they measure
the work, not the disk).
]]

local regolith = require "regolith"
local system = require "system"

local args = { n = 20000, writes = 20000, sync = "full", json = nil }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or arg[i + 1] == nil or args[k] == nil and k ~= "json" then
      error("usage: feed.lua [--n N] [--writes N] [--sync full|lazy|none] " ..
        "[--json FILE]")
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
  args.n = tonumber(args.n)
  args.writes = tonumber(args.writes)
end

local now = system.monotime

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function rm(p) os.execute("rm -rf '" .. p .. "'") end

local text = ("The quick brown fox jumps over the lazy dog. "):rep(4)
local function doc(i)
  return { id = "item" .. i, pk = "user" .. (i % 997), n = i, text = text }
end

local results = {}
local function report(name, value, unit, note)
  results[#results + 1] = { name = name, value = value, unit = unit }
  print(("  %-52s %10.0f %s%s"):format(name, value, unit,
    note and ("  (" .. note .. ")") or ""))
end

-- A database with n items in a container of 4 physical partitions.
local function filled(n)
  local path = tmpdir()
  local db = assert(regolith.open(path, { sync = "none" }))
  local c = assert(db:create_container("src", {
    partition_key = "/pk", physical_partitions = 4 }))
  for i = 1, n do assert(c:create(doc(i))) end
  return db, c, path
end

print(("regolith change feed benchmarks (%s)"):format(_VERSION))
print(("  %d items of about %d bytes; pages and batches of 100"):format(
  args.n, #regolith.json.encode(doc(1))))

do
  local db, c, path = filled(args.n)
  print("pull reads (c:changes)")
  for _, mode in ipairs({ "latest", "all_versions" }) do
    local t0, count, tok = now(), 0, nil
    repeat
      local page, info = assert(c:changes({ mode = mode, max_items = 100,
        continuation = tok }))
      count = count + #page
      tok = info.continuation
    until #page == 0
    assert(count == args.n)
    report("changes/s, " .. mode, count / (now() - t0), "changes/s")
  end

  print("processors, empty handler (changes delivered per second)")
  for _, transactional in ipairs({ false, true }) do
    for _, mode in ipairs({ "latest", "all_versions" }) do
      local got = 0
      local p = assert(db:processor({
        name = ("empty-%s-%s"):format(tostring(transactional), mode),
        source = "src", mode = mode, transactional = transactional,
        handler = function(changes) got = got + #changes end }))
      local t0 = now()
      p:run({ until_idle = true })
      local dt = now() - t0
      assert(got == args.n)
      report(("%s, %s"):format(transactional and "transactional" or
        "outside a transaction", mode), got / dt, "changes/s")
      p:close()
    end
  end
  db:close()
  rm(path)
end

-- The writer: a separate process creating n items in "src" of the
-- database at `path`, one write transaction each; returns the command and
-- the file where it prints its start and end times.
local function writer(path, n)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(([[
    local regolith = require "regolith"
    local system = require "system"
    local db = assert(regolith.open(%q, { sync = %q }))
    local c = assert(db:container("src"))
    local text = %q
    local t0 = system.gettime()
    for i = 1, %d do
      assert(c:create({ id = "item" .. i, pk = "user" .. (i %% 997), n = i,
        text = text }))
    end
    print(t0, system.gettime())
  ]]):format(path, args.sync, text, n))
  f:close()
  local out = os.tmpname()
  return ("LUA_PATH=%q LUA_CPATH=%q lua5.4 %s > %s 2>&1"):format(
    package.path, package.cpath, script, out), out, script
end

-- The writer's start and end times, once it has printed them.
local function writer_times(out)
  for _ = 1, 600 do
    local h = io.open(out)
    local w = h and h:read("*a") or ""
    if h then h:close() end
    local t0, t1 = w:match("^(%S+)%s+(%S+)")
    if t1 then return tonumber(t0), tonumber(t1) end
    if w:match("%a") then error("writer failed: " .. w) end
    system.sleep(0.1)
  end
  error("the writer did not finish")
end

local function new_db()
  local path = tmpdir()
  local db = assert(regolith.open(path, { sync = args.sync }))
  assert(db:create_container("src", {
    partition_key = "/pk", physical_partitions = 4 }))
  assert(db:create_container("dst", { partition_key = "/pk" }))
  return db, path
end

do
  local n = args.writes
  print(("end to end: a writer process (%d creates, sync %q) and a "
    .. "transactional copying processor"):format(n, args.sync))
  do                                            -- the writer alone
    local db, path = new_db()
    local cmd, out, script = writer(path, n)
    os.execute(cmd)
    local t0, t1 = writer_times(out)
    report("writer alone: creates/s", n / (t1 - t0), "items/s")
    db:close()
    os.remove(script)
    os.remove(out)
    rm(path)
  end
  local db, path = new_db()
  local dst = assert(db:container("dst"))
  local copied = 0
  local p = assert(db:processor({ name = "copy", source = "src",
    handler = function(changes)
      for _, d in ipairs(changes) do
        assert(dst:upsert({ id = d.id, pk = d.pk, n = d.n, text = d.text }))
      end
      copied = copied + #changes
    end }))
  p:run_once()                                  -- takes the leases
  local cmd, out, script = writer(path, n)
  os.execute(cmd .. " &")
  local max_lag, last_sample = 0, 0
  local deadline = now() + 600
  while copied < n and now() < deadline do
    local delivered = p:run_once()
    if now() - last_sample > 0.2 then
      last_sample = now()
      local lag = p:lag()
      if lag > max_lag then max_lag = lag end
    end
    if delivered == 0 then system.sleep(0.002) end
  end
  local t_done = system.gettime()
  local t0, t1 = writer_times(out)
  assert(copied == n, "the processor did not copy everything")
  report("writer beside the processor: creates/s", n / (t1 - t0), "items/s")
  report("processor: copies/s over the same run", n / (t_done - t0),
    "items/s")
  report("largest lag seen", max_lag, "changes")
  report("copies done after the writer's last item", (t_done - t1) * 1000,
    "ms")
  p:close()
  db:close()
  os.remove(script)
  os.remove(out)
  rm(path)
end

if args.json then
  local h = assert(io.open(args.json, "w"))
  h:write(regolith.json.encode(results))
  h:close()
end
