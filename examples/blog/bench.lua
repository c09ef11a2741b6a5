--[[
The blog benchmark: the article's exercise, end to end, on this machine.

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/blog/bench.lua [--scale S] [--models V1,V2,V3]
      [--json FILE] [--dir DIR] [--seed N] [--time SECONDS]
      [--sync full|lazy|none] [--no-sqlite] [--no-sqlite-json] [--svg FILE]
      [--throughput RUS] [--rate PER_SECOND] [--duration SECONDS]
      [--url redis://HOST:PORT[,HOST:PORT...]/NAME]

It generates the article's data set at scale S (1 = 100,000 users; default
0.001), loads it into each model through the model's own commands (the
procedures, the trigger and the processors make every denormalized copy),
loads the same data into SQLite, then runs each of the ten requests many
times on sampled keys (for about --time seconds each, default 1) and prints
one table: per request and model, the median and 99th percentile latency
and the mean request charge, beside the article's figures and SQLite's
latencies.  Then the correctness checks, and the goals.

--dir keeps the databases (DIR/V1, DIR/V2, DIR/V3, DIR/sqlite.db) and
reuses those already loaded at the same scale and seed; without it they
live in a temporary directory removed at the end.  The benchmark's own
writes (C1-C4) create new users, posts, comments and likes with ids of
their own, dated before the data set, so that they change no answer the
checks compare.  --sync is the durability of the benchmark's writes
(loading always runs with sync "none"); SQLite gets the same (FULL or OFF).
--url runs the models on Redis Cluster (docs/cluster.md): model V1's
database is NAME_V1 there, and so on; the markers that let a later run
reuse a loaded data set stay in --dir (a database of that name is emptied
before it is loaded).  The same checks run, and SQLite stays local.
--json FILE writes everything as JSON.  --svg FILE draws the table as a
picture (examples/blog/svg.lua): each request's median latency and charge,
the article's beside regolith's for each model, on log scales.

Storage.  After loading a model (by bulk load, blog.load), the benchmark
reports its bytes per item table by table (db:stats{tables = true}), the
file as loaded, and the size of a repacked copy (db:compact, made in a
temporary directory and removed); then it loads the same documents into
SQLite with expression indexes on the same paths (blog.sqlite_json: the
load rate and the bytes to compare with; --no-sqlite-json skips it), and
notes the process's memory high-water mark (VmHWM) after each load.

--throughput RUS then gives each model's database a shared budget of RUS
request units per second (docs/throughput.md) and sends it the traffic
below for --duration seconds (default 30), open loop at --rate requests
per second (default 1,000 times the scale: 10 at scale 0.01), without
retries.  It reports, per model, the fraction of requests throttled
(429), the RU/s the traffic asks for on average, the RU/s the budget
spent (requests refused part-way, after some of their calls ran,
included), and the smallest budget under which this very sequence of
requests (at the charges they had, or their request's mean for those
refused) would never have been refused, by the same rule the budgets
follow.  So "V1 needs N RU/s for this
traffic, V3 needs M" is one command.  The traffic (the article gives no
rate, only that reads outnumber writes by orders of magnitude and the
feed is the most frequent request; docs/throughput.md says why): per
2,000 requests, Q6 700, Q2 600, Q4 240, Q3 160, Q1 160, Q5 120, C4 10,
C3 6, C2 3, C1 1.  The processors that V2 and V3 feed are not run while
it lasts (their writes would draw on the same budget: the post
creations are 0.15 % of the requests).
]]

local here = (arg and arg[0] or ""):match("^(.*)/blog/bench%.lua$") or
  "examples"
package.path = here .. "/?.lua;" .. package.path

local regolith = require "regolith"
local system = require "system"
local data = require "blog.data"
local common = require "blog.common"
local load = require "blog.load"
local checks = require "blog.checks"
local article = require "blog.article"

local now = system.monotime

local FORMAT = 2     -- of the markers that say a directory holds a data set

local MODELS = {
  V1 = require "blog.v1", V2 = require "blog.v2", V3 = require "blog.v3",
}

-- {=====================================================================
-- Arguments
-- ======================================================================
local USAGE = "usage: bench.lua [--scale S] [--models V1,V2,V3] " ..
  "[--json FILE] [--dir DIR] [--seed N] [--time SECONDS] " ..
  "[--sync full|lazy|none] [--no-sqlite] [--no-sqlite-json] [--svg FILE] " ..
  "[--throughput RUS [--rate PER_SECOND] [--duration SECONDS]] " ..
  "[--url redis://HOST:PORT[,...]/NAME]"

local args = { scale = 0.001, models = "V1,V2,V3", seed = 1, time = 1,
               sync = "full", sqlite = true, sqlite_json = true }
do
  local i = 1
  local known = { scale = "number", models = "string", json = "string",
                  dir = "string", seed = "number", time = "number",
                  sync = "string", svg = "string", throughput = "number",
                  rate = "number", duration = "number", url = "string" }
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if k == "no-sqlite" then
      args.sqlite = false
      i = i + 1
    elseif k == "no-sqlite-json" then
      args.sqlite_json = false
      i = i + 1
    elseif k and known[k] and arg[i + 1] then
      local v = arg[i + 1]
      if known[k] == "number" then
        v = tonumber(v)
        if not v then io.stderr:write(USAGE, "\n"); os.exit(2) end
      end
      args[k] = v
      i = i + 2
    else
      io.stderr:write(USAGE, "\n")
      os.exit(2)
    end
  end
  args.rate = args.rate or 1000 * args.scale
  args.duration = args.duration or 30
  if not (args.scale > 0) or not (args.time > 0) or
      (args.sync ~= "full" and args.sync ~= "lazy" and args.sync ~= "none") or
      (args.throughput and not (args.throughput >= 1 and
        args.throughput == math.floor(args.throughput))) or
      not (args.rate > 0) or not (args.duration > 0) or
      (args.url and not args.url:match("^redis://[^/]+/[%w_%-%.]+$")) or
      (args.url and args.throughput) then
    io.stderr:write(USAGE, "\n")
    os.exit(2)
  end
end

local model_names = {}
for name in args.models:gmatch("[^,%s]+") do
  if not MODELS[name] then
    io.stderr:write("unknown model ", name, " (V1, V2 or V3)\n")
    os.exit(2)
  end
  model_names[#model_names + 1] = name
end
if #model_names == 0 then io.stderr:write(USAGE, "\n"); os.exit(2) end
-- }=====================================================================

-- {=====================================================================
-- Files
-- ======================================================================
local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function rm_rf(path)
  if path:sub(1, 8) == "redis://" then     -- a database on the cluster
    local db = assert(regolith.open(path))
    for _, name in ipairs(assert(db:containers())) do
      assert(db:delete_container(name))
    end
    db:close()
    return
  end
  os.execute("rm -rf " .. shell_quote(path))
end

local function read_json(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return regolith.json.decode(text)
end

local function write_json(path, value)
  local f = assert(io.open(path, "w"))
  f:write(assert(regolith.json.encode(value)), "\n")
  f:close()
end

-- Bytes a file or directory takes.
local function disk_bytes(path)
  local p = io.popen("du -sb " .. shell_quote(path) .. " 2>/dev/null")
  local out = p:read("*a")
  p:close()
  return tonumber(out:match("^(%d+)")) or 0
end

local dir = args.dir
local temporary = dir == nil
if temporary then
  dir = os.tmpname()
  os.remove(dir)
end
os.execute("mkdir -p " .. shell_quote(dir))

-- A model's database: a directory, or with --url a database on the
-- cluster (the markers stay in the directory).
local function db_path(name)
  if args.url then return args.url .. "_" .. name end
  return dir .. "/" .. name
end

local function marker_path(name)
  return dir .. "/" .. name .. ".json"
end

-- }=====================================================================

local gen = data.new(args.scale, args.seed)
local size = gen:size()
local total_items = size.users + size.posts + size.comments + size.likes

local function commas(n)
  local s = ("%d"):format(n)
  while true do
    local t, k = s:gsub("^(%-?%d+)(%d%d%d)", "%1,%2")
    s = t
    if k == 0 then return s end
  end
end

print(("regolith blog benchmark: scale %g, seed %d: %s users, %s posts, " ..
  "%s comments, %s likes"):format(args.scale, args.seed, commas(size.users),
  commas(size.posts), commas(size.comments), commas(size.likes)))

-- {=====================================================================
-- Loading (or reusing) each model's database
-- ======================================================================
local function marker_ok(marker)
  return marker and marker.format == FORMAT and marker.scale == args.scale
    and marker.seed == args.seed and marker.items == total_items
end

-- The process's memory high-water mark, in bytes (Linux: VmHWM).
local function memory_hwm()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  local kb = s:match("VmHWM:%s*(%d+)")
  return kb and tonumber(kb) * 1024
end

-- A model's storage: bytes per table, the file, a repacked copy's size.
local function storage_of(path)
  local db = assert(regolith.open(path, { readonly = true }))
  local st = assert(db:stats({ tables = true }))
  local copy = path .. ".compact"
  rm_rf(copy)
  local _, info = assert(db:compact(copy))
  db:close()
  rm_rf(copy)
  local tables = {}
  for name, t in pairs(st.tables) do tables[name] = t.bytes end
  return { items = st.items, file = disk_bytes(path .. "/data.mdb"),
           used = st.used_bytes, free = st.free_bytes, tables = tables,
           compacted = info.bytes }
end

local runs = {}
local run = 1
for _, name in ipairs(model_names) do
  local path = db_path(name)
  local marker = read_json(marker_path(name))
  local entry = { name = name, path = path }
  if marker_ok(marker) then               -- and the database is still there
    local db = regolith.open(path, { readonly = true })
    local st = db and db:stats()
    if db then db:close() end
    if not st or st.items < total_items then marker = nil end
  end
  if marker_ok(marker) then
    entry.load = marker.load
    entry.reused = true
  else
    rm_rf(path)
    os.remove(marker_path(name))
    local db = assert(regolith.open(path, { sync = "none",
      map_size = not args.url and math.max(2 ^ 26, total_items * 2048) or nil }))
    local m = MODELS[name].open(db)
    entry.load = load.run(m, gen, { label = "loading " .. name })
    entry.load.memory_hwm = memory_hwm()
    if m.denorm then entry.load.denorm = m.denorm end
    db:close()
    if not args.url then entry.load.storage = storage_of(path) end
    if args.sqlite_json and not args.url then
      local sj = require "blog.sqlite_json"
      local jdb = assert(regolith.open(path, { readonly = true }))
      local progress = load.progress("loading SQLite (JSON) for " .. name,
        total_items)
      -- the model's containers as loaded: bulk_sources needs their specs
      local shape = setmetatable({ users = jdb:container("users"),
        posts = jdb:container("posts"), feed = jdb:container("feed") },
        MODELS[name])
      entry.load.sqlite_json = sj.load(path .. ".sqlite-json.db", shape, gen,
        { progress = progress.update })
      progress.done()
      jdb:close()
      os.remove(path .. ".sqlite-json.db")
    end
    marker = { format = FORMAT, scale = args.scale, seed = args.seed,
               items = total_items, load = entry.load, runs = 0 }
    write_json(marker_path(name), marker)
  end
  entry.marker = marker
  if (marker.runs or 0) + 1 > run then run = (marker.runs or 0) + 1 end
  runs[#runs + 1] = entry
  local l = entry.load
  print(("%s: %s %s items in %.1f s (%s items/s)%s"):format(name,
    entry.reused and "reused" or "loaded", commas(l.items), l.seconds,
    commas(math.floor(l.items / l.seconds)),
    entry.reused and " when it was loaded" or ""))
end

local sq
if args.sqlite then
  local sqlite = require "blog.sqlite"
  local path = dir .. "/sqlite.db"
  local marker = read_json(path .. ".json")
  local entry = { name = "SQLite", path = path }
  if marker_ok(marker) then
    entry.load, entry.reused = marker.load, true
  else
    os.remove(path)
    os.remove(path .. "-wal")
    os.remove(path .. "-shm")
    local s = sqlite.open(path, { sync = "none" })
    local progress = load.progress("loading SQLite", total_items)
    entry.load = sqlite.load(s, gen, progress.update)
    progress.done()
    s:close()
    marker = { format = FORMAT, scale = args.scale, seed = args.seed,
               items = total_items, load = entry.load, runs = 0 }
    write_json(path .. ".json", marker)
  end
  entry.marker = marker
  if (marker.runs or 0) + 1 > run then run = (marker.runs or 0) + 1 end
  entry.s = sqlite.open(path, { sync = args.sync == "full" and "full" or
    "none" })
  sq = entry
  print(("SQLite: %s %s items in %.1f s (%s items/s)%s"):format(
    entry.reused and "reused" or "loaded", commas(entry.load.items),
    entry.load.seconds,
    commas(math.floor(entry.load.items / entry.load.seconds)),
    entry.reused and " when it was loaded" or ""))
end

-- The loads ran without flushing: flush now, so that the first timed
-- durable write does not pay for them.
os.execute("sync")

for _, entry in ipairs(runs) do
  entry.db = assert(regolith.open(entry.path, { sync = args.sync }))
  -- the timed requests run without a budget, whatever an interrupted
  -- --throughput run left in a reused database
  assert(entry.db:set_throughput(nil))
  entry.m = MODELS[entry.name].open(entry.db)
  entry.m:pump()
end
-- }=====================================================================

-- {=====================================================================
-- The requests
-- ======================================================================
local samples = { users = {}, posts = {} }
do
  local r = data.rng(args.seed, 0, 99991)
  for i = 1, 500 do
    local u = r:int(1, gen.users)
    samples.users[i] = gen:user_id(u)
    samples.posts[i] = gen:post_id(u, r:int(1, gen:posts_of(u)))
  end
end

-- The benchmark's own writes: users, posts by them (dated before the data
-- set, so never among the newest), comments and likes on those posts.
local prefix = "b" .. run
local BENCH_EPOCH = -10 ^ 12        -- ticks: a day before the data set
local writes = {}
local bench_user_count = 0
local bench_post_count = 0

local function bench_user(i)
  return { id = ("%s-u%d"):format(prefix, i),
           username = ("bench%d_%d"):format(run, i) }
end

local function bench_post(i)
  local author = bench_user((i - 1) % bench_user_count + 1)
  return {
    id = ("%s-p%d"):format(prefix, i), userId = author.id,
    username = author.username,
    title = "A post written by the benchmark",
    content = ("The benchmark writes this post to time C2. "):rep(8),
    creationDate = data.iso(BENCH_EPOCH + i),
  }
end

local function bench_target(i)
  local post = bench_post((i - 1) % bench_post_count + 1)
  local author = bench_user((i * 7) % bench_user_count + 1)
  return post, author
end

writes.C1 = function(m, i)
  bench_user_count = math.max(bench_user_count, i)
  return m:create_user(bench_user(i))
end
writes.C2 = function(m, i)
  bench_post_count = math.max(bench_post_count, i)
  return m:create_post(bench_post(i))
end
writes.C3 = function(m, i)
  local post, author = bench_target(i)
  return m:create_comment({
    id = ("%s-c%d"):format(prefix, i), postId = post.id, userId = author.id,
    username = author.username, content = "A comment timed by C3.",
    creationDate = data.iso(BENCH_EPOCH + 10 ^ 8 + i),
  })
end
writes.C4 = function(m, i)
  local post, author = bench_target(i)
  return m:like_post({
    id = ("%s-l%d"):format(prefix, i), postId = post.id, userId = author.id,
    username = author.username,
    creationDate = data.iso(BENCH_EPOCH + 10 ^ 8 + i),
  })
end

local function sample_of(list) return function(i) return list[(i - 1) % #list + 1] end end
local user_at, post_at = sample_of(samples.users), sample_of(samples.posts)

local reads = {
  Q1 = function(m, i) return m:get_user(user_at(i)) end,
  Q2 = function(m, i) return m:get_post(post_at(i)) end,
  Q3 = function(m, i) return m:list_user_posts(user_at(i)) end,
  Q4 = function(m, i) return m:list_comments(post_at(i)) end,
  Q5 = function(m, i) return m:list_likes(post_at(i)) end,
  Q6 = function(m) return m:list_recent_posts() end,
}

local MAX_CALLS, MIN_CALLS, WARM = 20000, 20, 5
local CHARGE_KEYS = 100      -- a read's RU: the mean over these first keys

-- Times fn(i) for about args.time seconds: median and p99 in µs, the mean
-- charge, the number of calls.  Writes are counted on from `first`, and
-- their charge is the mean over the timed calls; a read's charge is the
-- mean over the first CHARGE_KEYS sampled keys, whatever the number of
-- timed calls, so that it is the same in every run.
local function measure(fn, is_write, counter)
  local times, charge = {}, 0
  local first = counter and counter.n or 0
  local read_charge
  if not is_write then
    read_charge = 0
    for i = 1, CHARGE_KEYS do
      local res, c, status = fn(i)
      if res == nil then
        error(("request failed: %s (%s)"):format(tostring(c),
          tostring(status)))
      end
      read_charge = read_charge + (type(c) == "number" and c or 0)
    end
    read_charge = read_charge / CHARGE_KEYS
  end
  local start = now()
  local n = 0
  while n < MAX_CALLS and (n < MIN_CALLS or now() - start < args.time) do
    n = n + 1
    local t0 = now()
    local res, c, status = fn(first + n)
    local t = now() - t0
    if res == nil then
      error(("request failed: %s (%s)"):format(tostring(c), tostring(status)))
    end
    times[n] = t
    charge = charge + (type(c) == "number" and c or 0)
  end
  if counter then counter.n = first + n end
  table.sort(times)
  return {
    p50_us = times[math.floor(n / 2) + 1] * 1e6,
    p99_us = times[math.max(1, math.ceil(n * 0.99))] * 1e6,
    ru = math.floor((read_charge or charge / n) * 100 + 0.5) / 100,
    n = n,
  }
end

local results, sqlite_results = {}, {}
local copy_cost = {}
for _, r in ipairs(common.REQUESTS) do results[r[1]] = {} end

local function bench(target, name)
  local out = {}
  local counters = { C1 = { n = 0 }, C2 = { n = 0 }, C3 = { n = 0 },
                     C4 = { n = 0 } }
  for _, r in ipairs(common.REQUESTS) do
    local id = r[1]
    if load.is_tty() then
      io.stderr:write(("\rtiming %s %s   "):format(name, id))
    end
    if writes[id] then
      if target.denorm then
        for k in pairs(target.denorm) do target.denorm[k] = 0 end
      end
      out[id] = measure(function(i) return writes[id](target, i) end, true,
        counters[id])
      if target.pump then target:pump() end
      if id == "C2" and target.denorm and target.denorm.copies > 0 then
        copy_cost[name] = { post = target.denorm.charge / target.denorm.copies,
                            item = target.denorm.charge / target.denorm.items }
      end
    else
      out[id] = measure(function(i) return reads[id](target, i) end, false)
    end
  end
  if load.is_tty() then io.stderr:write("\r", (" "):rep(30), "\r") end
  return out, counters
end

-- Reads a file through, so that its pages are in the page cache: the
-- timings measure the database, not the disk (the later loads may have
-- pushed an earlier database out of memory).
local function warm(path)
  local f = io.open(path, "rb")
  if not f then return end
  while f:read(2 ^ 20) do end
  f:close()
end

-- Every target gets the same benchmark writes: each starts its write
-- counters at 1.
for _, entry in ipairs(runs) do
  bench_user_count, bench_post_count = 0, 0
  warm(entry.path .. "/data.mdb")
  local out, counters = bench(entry.m, entry.name)
  for id, v in pairs(out) do results[id][entry.name] = v end
  entry.counters = counters
  entry.made = { users = bench_user_count, posts = bench_post_count }
end
if sq then
  bench_user_count, bench_post_count = 0, 0
  warm(sq.path)
  sqlite_results = bench(sq.s, "SQLite")
  for _, v in pairs(sqlite_results) do v.ru = nil end
end
-- }=====================================================================

-- {=====================================================================
-- Checks
-- ======================================================================
local check_results, check_notes, check_order = {}, {}, {}
local function record(name, ok, msg)
  check_results[name] = ok and true or false
  check_order[#check_order + 1] = name
  if not ok then check_notes[name] = msg or "failed" end
end

local check_samples = { users = {}, posts = {} }
for i = 1, 40 do
  check_samples.users[i] = samples.users[i]
  check_samples.posts[i] = samples.posts[i]
end

if load.is_tty() then io.stderr:write("checking...") end
local answers = {}
for _, entry in ipairs(runs) do
  local m = entry.m
  local name = entry.name
  if name ~= "V1" then
    record("counts_" .. name, checks.counts(m))
  end
  if name == "V3" then
    record("copies_V3", checks.copies(m))
    record("feed_V3", checks.feed(m))
  end
  record("newest_" .. name, checks.newest(m))
  answers[name] = checks.answers(m, check_samples)
end
if #runs > 1 then
  local ok, msg = true, nil
  for i = 2, #runs do
    local a, b = runs[1].name, runs[i].name
    local same, diff = checks.same(answers[a], answers[b], a, b)
    if not same then ok, msg = false, diff break end
  end
  record("same_answers", ok, msg)
end
if sq then
  local a = runs[1].name
  record("sqlite_same_answers", checks.same(answers[a],
    checks.answers(sq.s, check_samples), a, "SQLite"))
end
do
  local newest = assert(runs[1].m:list_recent_posts())[1]
  for _, entry in ipairs(runs) do
    record("rename_" .. entry.name, checks.rename(entry.m, newest.userId))
  end
end
for _, entry in ipairs(runs) do
  local m = entry.m
  if m.lag then
    local lag, dead = m:lag(), m:dead_letters()
    record("processors_" .. entry.name, lag == 0 and dead == 0,
      ("%d changes not processed, %d dead letters"):format(lag, dead))
  end
  local t0 = now()
  local ok, report = entry.db:verify()
  entry.verify_seconds = now() - t0
  record("verify_" .. entry.name, ok, report)
end
if load.is_tty() then io.stderr:write("\r", (" "):rep(20), "\r") end
-- }=====================================================================

-- {=====================================================================
-- Throughput: the traffic against a budget (--throughput)
-- ======================================================================
-- The traffic: request and weight, per MIX_TOTAL requests.
local MIX = { { "Q6", 700 }, { "Q2", 600 }, { "Q4", 240 }, { "Q3", 160 },
  { "Q1", 160 }, { "Q5", 120 }, { "C4", 10 }, { "C3", 6 }, { "C2", 3 },
  { "C1", 1 } }
local MIX_TOTAL = 2000

-- The requests of the traffic, in order (the same for every model).
local function mix_sequence(n)
  local r = data.rng(args.seed, 7, 2000)
  local seq = {}
  for i = 1, n do
    local x, upto = r:int(1, MIX_TOTAL), 0
    for _, m in ipairs(MIX) do
      upto = upto + m[2]
      if x <= upto then seq[i] = m[1] break end
    end
  end
  return seq
end

-- Would a budget of `ru` RU/s have refused any of these {seconds, charge}
-- events?  The budgets' rule: a bucket of one second, refilled
-- continuously, admitting while its balance is positive, debts allowed.
local function refuses(events, ru)
  local balance, last = ru, 0
  for _, ev in ipairs(events) do
    balance = math.min(ru, balance + (ev[1] - last) * ru)
    last = ev[1]
    if balance <= 0 then return true end
    balance = balance - ev[2]
  end
  return false
end

-- The smallest whole number of RU/s under which none is refused.
local function needs(events)
  local lo, hi = 0, 1
  while refuses(events, hi) do lo, hi = hi, hi * 2 end
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if refuses(events, mid) then lo = mid else hi = mid end
  end
  return hi
end

-- Is this the outcome of a request refused with 429: returned, or raised
-- by a model whose request makes several calls (its message is the
-- core's, which says so)?
local function throttled_outcome(ok, res, _, status)
  if ok then return res == nil and status == 429 end
  return tostring(res):find("request rate is large", 1, true) ~= nil
end

local throughput
if args.throughput then
  local n = math.max(1, math.floor(args.rate * args.duration + 0.5))
  local seq = mix_sequence(n)
  throughput = { budget = args.throughput, rate = args.rate, requests = n,
                 duration = n / args.rate, models = {} }
  for _, entry in ipairs(runs) do
    local m, db, name = entry.m, entry.db, entry.name
    local counters = entry.counters
    bench_user_count, bench_post_count = entry.made.users, entry.made.posts
    assert(db:set_throughput(args.throughput))
    local events, per, refused, admitted_ru = {}, {}, 0, 0
    if load.is_tty() then
      io.stderr:write(("\rtraffic on %s for %g s   "):format(name,
        throughput.duration))
    end
    local t0 = now()
    local sent_ok, sent_err = pcall(function()
    for i = 1, n do
      local id = seq[i]
      local wait = t0 + (i - 1) / args.rate - now()
      if wait > 0 then system.sleep(wait) end
      local k
      if writes[id] then
        counters[id].n = counters[id].n + 1
        k = counters[id].n
      end
      local sent = now() - t0
      local ok, res, charge, status = pcall(function()
        if k then return writes[id](m, k) end
        return reads[id](m, i)
      end)
      per[id] = per[id] or { sent = 0, throttled = 0 }
      per[id].sent = per[id].sent + 1
      if throttled_outcome(ok, res, charge, status) then
        refused = refused + 1
        per[id].throttled = per[id].throttled + 1
        events[i] = { sent, results[id][name].ru }
      elseif not ok or res == nil then
        error(("%s %s failed: %s"):format(name, id,
          tostring(ok and charge or res)))
      else
        admitted_ru = admitted_ru + charge
        events[i] = { sent, charge }
      end
    end
    end)
    local st = db:stats().throughput
    assert(db:set_throughput(nil))
    if not sent_ok then error(sent_err, 0) end
    m:pump()
    local demand = 0
    for _, ev in ipairs(events) do demand = demand + ev[2] end
    throughput.models[name] = {
      throttled = refused, throttled_fraction = refused / n,
      mean_demand = demand / throughput.duration,
      admitted_ru = admitted_ru, consumed_ru = st and st.consumed_ru,
      needs = needs(events), per_request = per,
    }
  end
  if load.is_tty() then io.stderr:write("\r", (" "):rep(40), "\r") end
end
-- }=====================================================================

-- {=====================================================================
-- Sizes, and the runs counted in the markers
-- ======================================================================
local databases = {}
for _, entry in ipairs(runs) do
  local st = entry.db:stats()
  databases[entry.name] = { bytes = args.url and st.bytes or disk_bytes(entry.path),
                            used_bytes = st.used_bytes, items = st.items }
  entry.marker.runs = run
  write_json(marker_path(entry.name), entry.marker)
  entry.db:close()
end
if sq then
  sq.s:close()
  databases.SQLite = { bytes = disk_bytes(sq.path) +
    disk_bytes(sq.path .. "-wal") }
  sq.marker.runs = run
  write_json(sq.path .. ".json", sq.marker)
end
-- }=====================================================================

-- {=====================================================================
-- The table
-- ======================================================================
local function us(v)
  if v == nil then return "-" end
  if v >= 1e5 then return ("%.0f"):format(v) end
  if v >= 100 then return ("%.0f"):format(v) end
  return ("%.1f"):format(v)
end

local function ru(v)
  if v == nil then return "-" end
  if v >= 1000 then return ("%.0f"):format(v) end
  return ("%.2f"):format(v)
end

print()
print(("%-8s %30s   %16s   %17s"):format("",
  "------------ regolith ------------", "---- article ----",
  sq and "---- SQLite -----" or ""))
print(("%-8s %10s %10s %10s   %6s %9s   %8s %8s"):format("request",
  "median µs", "p99 µs", "RU", "ms", "RU", sq and "median" or "",
  sq and "p99 µs" or ""))
for _, r in ipairs(common.REQUESTS) do
  local id = r[1]
  for i, entry in ipairs(runs) do
    local v = results[id][entry.name]
    local a = article.requests[id][entry.name]
    local s = i == 1 and sqlite_results[id]
    print(("%-3s %-4s %10s %10s %10s   %6s %9s   %8s %8s"):format(
      i == 1 and id or "", entry.name, us(v.p50_us), us(v.p99_us), ru(v.ru),
      ("%g"):format(a[1]), ru(a[2]), s and us(s.p50_us) or "",
      s and us(s.p99_us) or ""))
  end
end
print()
do
  local legend = {}
  for i, r in ipairs(common.REQUESTS) do
    legend[#legend + 1] = ("%s %s"):format(r[1], r[3])
    if i % 3 == 0 or i == #common.REQUESTS then
      print(table.concat(legend, "; "))
      legend = {}
    end
  end
end
print(("Latencies are per call on this machine (writes with sync %q); " ..
  "RU is the mean charge over the calls."):format(args.sync))
for _, name in ipairs({ "V2", "V3" }) do
  if copy_cost[name] then
    print(("%s: a new post's denormalization (the processor's read, its " ..
      "two copies, the feed's trigger) costs %.1f RU, %.1f RU per item " ..
      "copied (the article: about %d RU per item)"):format(name,
      copy_cost[name].post, copy_cost[name].item, article.copy_ru))
  end
end
-- }=====================================================================

-- {=====================================================================
-- Load, sizes, checks, goals
-- ======================================================================
print()
local load_seconds, load_items = 0, 0
for _, entry in ipairs(runs) do
  local l = entry.load
  load_seconds, load_items = load_seconds + l.seconds, load_items + l.items
  local d = databases[entry.name]
  if args.url then
    print(("%s: load %.1f s, %s items/s; %.1f MB of documents in the " ..
      "cluster; verify %.1f s"):format(entry.name, l.seconds,
      commas(math.floor(l.items / l.seconds)), d.bytes / 2 ^ 20,
      entry.verify_seconds))
  else
    print(("%s: load %.1f s, %s items/s; database %.1f MB on disk " ..
      "(%.1f MB of pages in use); verify %.1f s"):format(entry.name, l.seconds,
      commas(math.floor(l.items / l.seconds)), d.bytes / 2 ^ 20,
      d.used_bytes / 2 ^ 20, entry.verify_seconds))
  end
end
if sq then
  print(("SQLite: load %.1f s, %s items/s; database %.1f MB on disk"):format(
    sq.load.seconds, commas(math.floor(sq.load.items / sq.load.seconds)),
    databases.SQLite.bytes / 2 ^ 20))
end

-- Storage, table by table (bytes per item), beside SQLite holding the same
-- JSON documents with expression indexes on the same paths.
local TABLES = { "items", "index", "refs", "latest", "feed", "unique", "ttl",
                 "parts", "meta" }
print()
print(("%-4s %9s %9s %9s %9s  %s"):format("", "file", "tables", "free",
  "compact", table.concat(TABLES, "  ")))
for _, entry in ipairs(runs) do
  local st = entry.load.storage
  if st then
    local n, sum, cols = st.items, 0, {}
    for _, t in ipairs(TABLES) do
      sum = sum + (st.tables[t] or 0)
      cols[#cols + 1] = ("%.0f"):format((st.tables[t] or 0) / n)
    end
    print(("%-4s %9.0f %9.0f %9.0f %9.0f  %s   (bytes per item)"):format(
      entry.name, st.file / n, sum / n, st.free / n, st.compacted / n,
      table.concat(cols, "  ")))
    local sj = entry.load.sqlite_json
    if sj then
      local tbl, idx = 0, 0
      for name, b in pairs(sj.tables) do
        if name == "users" or name == "posts" or name == "feed" then
          tbl = tbl + b
        else idx = idx + b end
      end
      print(("%-4s %9.0f  SQLite JSON: tables %.0f, indexes %.0f; load %s " ..
        "items/s (regolith %s: x%.2f); regolith's file x%.2f, compacted x%.2f"):format(
        "", sj.bytes / n, tbl / n, idx / n,
        commas(math.floor(sj.items / sj.seconds)),
        commas(math.floor(entry.load.items / entry.load.seconds)),
        (entry.load.items / entry.load.seconds) / (sj.items / sj.seconds),
        st.file / sj.bytes, st.compacted / sj.bytes))
    end
    if entry.load.memory_hwm then
      print(("%-4s memory high-water mark after the load: %.0f MB"):format("",
        entry.load.memory_hwm / 2 ^ 20))
    end
  end
end

print()
local failed = 0
local line = {}
for _, name in ipairs(check_order) do
  line[#line + 1] = name .. (check_results[name] and " ok" or " FAILED")
  if not check_results[name] then failed = failed + 1 end
end
print("checks: " .. table.concat(line, ", "))
for _, name in ipairs(check_order) do
  if check_notes[name] then print("  " .. name .. ": " .. check_notes[name]) end
end

-- The goals: charges near the article's, the same improvements, V3 faster
-- than SQLite, and small latencies for the point reads and the feed.
local goals, goal_order = {}, {}
local function goal(name, ok, detail)
  goals[name] = { ok = ok and true or false, detail = detail }
  goal_order[#goal_order + 1] = name
end
if results.Q1.V3 then
  local far = {}
  for _, r in ipairs(common.REQUESTS) do
    local mine, theirs = results[r[1]].V3.ru, article.requests[r[1]].V3[2]
    if mine > 2 * theirs or mine < theirs / 2 then
      far[#far + 1] = ("%s %.2f vs %.2f"):format(r[1], mine, theirs)
    end
  end
  if copy_cost.V3 then              -- the denormalization, per item copied
    local mine, theirs = copy_cost.V3.item, article.copy_ru
    if mine > 2 * theirs or mine < theirs / 2 then
      far[#far + 1] = ("denormalization %.2f vs %.2f per item"):format(mine,
        theirs)
    end
  end
  goal("v3_charges_within_2x", #far == 0,
    #far == 0 and "every V3 charge within a factor of 2 of the article's, " ..
    "the denormalization's too" or "outside: " .. table.concat(far, ", "))
end
if results.Q1.V1 and results.Q1.V3 then
  local parts, ok = {}, true
  for _, id in ipairs({ "Q2", "Q3", "Q4", "Q5", "Q6" }) do
    local f = results[id].V1.ru / results[id].V3.ru
    local a = article.requests[id]
    parts[#parts + 1] = ("%s x%.1f (article x%.1f)"):format(id, f,
      a.V1[2] / a.V3[2])
    if f <= 1 then ok = false end
  end
  goal("v1_to_v3_improves", ok, table.concat(parts, ", "))
  local f = results.Q6.V1.ru / results.Q6.V3.ru
  local a = article.requests.Q6.V1[2] / article.requests.Q6.V3[2]
  goal("q6_same_order_of_magnitude",
    math.abs(math.log(f, 10) - math.log(a, 10)) <= 0.5,
    ("V1/V3 for Q6: x%.0f here, x%.0f in the article"):format(f, a))
end
if results.Q1.V3 and sq then
  local slower = {}
  for _, id in ipairs({ "Q1", "Q2", "Q3", "Q4", "Q5", "Q6" }) do
    if results[id].V3.p50_us >= sqlite_results[id].p50_us then
      slower[#slower + 1] = ("%s %s vs %s µs"):format(id,
        us(results[id].V3.p50_us), us(sqlite_results[id].p50_us))
    end
  end
  goal("v3_reads_faster_than_sqlite", #slower == 0,
    #slower == 0 and "every V3 read's median below SQLite's"
    or "not faster: " .. table.concat(slower, ", "))
end
if results.Q1.V3 then
  local q1, q2, q6 = results.Q1.V3.p50_us, results.Q2.V3.p50_us,
    results.Q6.V3.p50_us
  goal("v3_q1_q2_few_us", q1 < 10 and q2 < 10,
    ("Q1 %s µs, Q2 %s µs"):format(us(q1), us(q2)))
  goal("v3_q6_under_200_us", q6 < 200, ("Q6 %s µs"):format(us(q6)))
end
do                            -- storage and load against SQLite's JSON
  local bytes, rate = {}, {}
  local bytes_ok, rate_ok, any = true, true, false
  for _, entry in ipairs(runs) do
    local st, sj = entry.load.storage, entry.load.sqlite_json
    if st and sj then
      any = true
      local f = st.file / sj.bytes
      local r = (entry.load.items / entry.load.seconds) / (sj.items / sj.seconds)
      bytes[#bytes + 1] = ("%s x%.2f (compacted x%.2f)"):format(entry.name, f,
        st.compacted / sj.bytes)
      rate[#rate + 1] = ("%s x%.2f"):format(entry.name, r)
      if f > 2 then bytes_ok = false end
      if r < 1 then rate_ok = false end
    end
  end
  if any then
    goal("bytes_within_2x_sqlite_json", bytes_ok, "file / SQLite's: " ..
      table.concat(bytes, ", "))
    goal("load_at_least_sqlite_json", rate_ok, "items/s / SQLite's: " ..
      table.concat(rate, ", "))
  end
end
print()
for _, name in ipairs(goal_order) do
  print(("goal %-28s %-4s %s"):format(name, goals[name].ok and "met" or "MISSED",
    goals[name].detail))
end

if throughput then
  print()
  print(("throughput: %s requests at %g/s for %g s against a shared budget " ..
    "of %s RU/s per model, no retries"):format(commas(throughput.requests),
    args.rate, throughput.duration, commas(args.throughput)))
  print(("%-6s %11s %18s %20s %24s"):format("model", "throttled",
    "mean demand", "consumed", "never refused from"))
  for _, entry in ipairs(runs) do
    local t = throughput.models[entry.name]
    print(("%-6s %9.1f %% %13s RU/s %15s RU/s %19s RU/s"):format(entry.name,
      100 * t.throttled_fraction, commas(math.floor(t.mean_demand + 0.5)),
      commas(math.floor((t.consumed_ru or 0) / throughput.duration + 0.5)),
      commas(t.needs)))
  end
  print("(consumed: what the budget spent, requests that failed part-way " ..
    "included)")
  print("(the traffic per 2,000 requests: Q6 700, Q2 600, Q4 240, Q3 160, " ..
    "Q1 160, Q5 120, C4 10, C3 6, C2 3, C1 1)")
end
-- }=====================================================================

if args.json then
  local requests = {}
  for id, per in pairs(results) do
    requests[id] = {}
    for name, v in pairs(per) do
      requests[id][name] = { p50_us = v.p50_us, p99_us = v.p99_us, ru = v.ru,
                             calls = v.n }
    end
  end
  local models_load = {}
  for _, entry in ipairs(runs) do
    models_load[entry.name] = { seconds = entry.load.seconds,
      items = entry.load.items, reused = entry.reused or false,
      items_per_second = entry.load.items / entry.load.seconds,
      storage = entry.load.storage, sqlite_json = entry.load.sqlite_json,
      memory_hwm = entry.load.memory_hwm }
  end
  if sq then
    models_load.SQLite = { seconds = sq.load.seconds, items = sq.load.items,
      reused = sq.reused or false,
      items_per_second = sq.load.items / sq.load.seconds }
  end
  local sqlite_out = regolith.object()
  for id, v in pairs(sqlite_results) do
    sqlite_out[id] = { p50_us = v.p50_us, p99_us = v.p99_us, calls = v.n }
  end
  write_json(args.json, {
    scale = args.scale, seed = args.seed, sync = args.sync,
    dataset = size,
    load = { seconds = load_seconds,
             items_per_second = load_items / math.max(load_seconds, 1e-9),
             models = models_load },
    requests = requests,
    sqlite = sqlite_out,
    checks = check_results,
    goals = goals,
    databases = databases,
    denormalization_ru = next(copy_cost) and copy_cost or nil,
    throughput = throughput,
  })
  print("\nwrote " .. args.json)
end

if args.svg then
  local names = {}
  for _, entry in ipairs(runs) do names[#names + 1] = entry.name end
  local ok, err = require("blog.svg").write(args.svg, {
    requests = common.REQUESTS, models = names, results = results,
    article = article.requests, sqlite = sqlite_results,
    source = article.source,
    title = ("The blog's requests: Azure Cosmos DB's modelling article " ..
      "beside regolith (scale %g, sync %s)"):format(args.scale, args.sync) })
  if ok then print("wrote the picture of the table to " .. args.svg)
  else print("could not write " .. args.svg .. ": " .. tostring(err)) end
end

if temporary then rm_rf(dir) end
-- Checks and goals apart: a check is correctness (the run fails when one
-- does), a goal a measured target on this machine (reported, never
-- hidden behind "every check passed", but not a failure: timings on a
-- shared machine vary).
local missed = {}
for _, name in ipairs(goal_order) do
  if not goals[name].ok then missed[#missed + 1] = name end
end
print()
print(("checks: %d passed, %d failed"):format(#check_order - failed, failed))
if #missed > 0 then
  print(("goals: %d met, %d MISSED (%s)"):format(#goal_order - #missed,
    #missed, table.concat(missed, ", ")))
else
  print(("goals: all %d met"):format(#goal_order))
end
if failed > 0 then
  print(("%d check(s) FAILED"):format(failed))
  os.exit(1)
end
if #missed > 0 then
  print(("every check passed; %d goal(s) missed (measured targets, not " ..
    "failures: docs/tutorial-blog.md)"):format(#missed))
else
  print("every check passed and every goal was met")
end
