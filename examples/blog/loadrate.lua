--[[
The blog's bulk load alone, watched along the way (docs/performance.md,
"Bulk load").

  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lua5.4/?.so;;' \
    lua5.4 examples/blog/loadrate.lua [--scale S] [--models V1,V3]
      [--batch N] [--transaction batch|load] [--memory BYTES] [--dir DIR]
      [--no-sqlite]

For each model it loads the article's data set at scale S (default 0.01)
as blog.load does (c:bulk_load, the processors caught up after each
container and at the end, all timed) into a new database DIR/<model>
(sync "none"), and prints: items per second over the whole load and over
each tenth of its items (does the rate fall as the tables grow?), the
process's CPU time per item (user and system: what a busy machine's share
of the processor changes least), the
file's bytes per item (used and free), and the bytes the process wrote
per item, in 4 KiB pages (Linux's /proc/self/io "wchar": with sync
"none" nothing is logged, so these are the pages LMDB wrote at its
commits, the copies a load's transactions made).  Then it loads the same
documents into SQLite, JSON with its expression indexes (blog.sqlite_json,
batches of the same size), the anchor of the same run, with its rate per
tenth too.  --batch sets the bulk load's batch (default blog.load's),
--transaction its transactions ("batch", the default: one per batch;
"load": one per container's load), --memory what a load in one
transaction holds in memory before it spills a sorted run to a temporary
file (an upserting load: merges into the tables) (bulk_load's memory);
DIR defaults to a temporary directory, removed at the end with the
databases in it.
]]

package.path = ((arg and arg[0] or ""):match("^(.*)/blog/loadrate%.lua$") or
  "examples") .. "/?.lua;" .. package.path

local regolith = require "regolith"
local data = require "blog.data"
local load = require "blog.load"
local now = require("system").monotime

local USAGE = "usage: loadrate.lua [--scale S] [--models V1,V2,V3] " ..
  "[--batch N] [--transaction batch|load] [--memory BYTES] [--dir DIR] " ..
  "[--no-sqlite]"

local MODELS = {
  V1 = require "blog.v1", V2 = require "blog.v2", V3 = require "blog.v3",
}

local args = { scale = 0.01, models = "V1,V3", sqlite = true,
               transaction = "batch" }
do
  local i, known = 1, { scale = "number", models = "string",
                        batch = "number", dir = "string", memory = "number",
                        transaction = "string" }
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if k == "no-sqlite" then
      args.sqlite, i = false, i + 1
    elseif k and known[k] and arg[i + 1] then
      local v = arg[i + 1]
      if known[k] == "number" then v = tonumber(v) end
      if v == nil then io.stderr:write(USAGE, "\n"); os.exit(2) end
      args[k], i = v, i + 2
    else
      io.stderr:write(USAGE, "\n")
      os.exit(2)
    end
  end
  if not (args.scale > 0) or (args.batch and not (args.batch >= 1)) or
      (args.transaction ~= "batch" and args.transaction ~= "load") then
    io.stderr:write(USAGE, "\n")
    os.exit(2)
  end
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local dir, temporary = args.dir, args.dir == nil
if temporary then
  dir = os.tmpname()
  os.remove(dir)
end
os.execute("mkdir -p " .. shell_quote(dir))

-- Bytes this process has written through write calls so far (nil where
-- /proc/self/io is missing).
local function written()
  local f = io.open("/proc/self/io")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("wchar:%s*(%d+)"))
end

local function file_bytes(path)
  local f = io.open(path, "rb")
  if not f then return 0 end
  local n = f:seek("end")
  f:close()
  return n
end

-- A watch of a load of `total` items: the time each tenth was done.
local function tenths(total)
  local t0, marks, next = now(), {}, 1
  local self = {}
  function self.update(done)
    local t = now() - t0
    while next <= 10 and done >= total * next / 10 do
      marks[next], next = t, next + 1
    end
  end
  function self.rates()
    local out, prev = {}, 0
    for i = 1, 10 do
      local t = marks[i] or prev
      out[i] = ("%.0f"):format(total / 10 / math.max(t - prev, 1e-9))
      prev = t
    end
    return table.concat(out, " ")
  end
  -- when the last tenth's batch was done (what follows, until the load
  -- returns, is a load in one transaction's last merge and commit, and
  -- the processors' catching up)
  function self.last() return marks[10] or 0 end
  return self
end

local gen = data.new(args.scale, 1)
local size = gen:size()
local total = size.users + size.posts + size.comments + size.likes
print(("blog bulk load: scale %g, %d items, batch %s, a transaction per %s")
  :format(args.scale, total, args.batch and tostring(args.batch) or
    tostring(load.BULK_BATCH), args.transaction))

for name in args.models:gmatch("[^,%s]+") do
  local model = MODELS[name]
  if not model then io.stderr:write("unknown model ", name, "\n"); os.exit(2) end
  local path = dir .. "/" .. name
  os.execute("rm -rf " .. shell_quote(path))
  local db = assert(regolith.open(path, { sync = "none",
    map_size = math.max(2 ^ 26, total * 2048) }))
  local m = model.open(db)
  local watch = tenths(total)
  local w0, c0 = written(), os.clock()
  local l = load.run(m, gen, { label = "loading " .. name, quiet = true,
    batch = args.batch, transaction = args.transaction, memory = args.memory,
    watch = watch.update })
  local w1, c1 = written(), os.clock()
  local st = assert(db:stats({ tables = true }))
  db:close()
  print(("%s: %d items in %.1f s, %.0f items/s (%.1f us of CPU per item); " ..
    "per tenth: %s; after the last batch %.1f s"):format(name, l.items,
    l.seconds, l.items / l.seconds, (c1 - c0) * 1e6 / l.items, watch.rates(),
    l.seconds - watch.last()))
  print(("%s: file %.0f B/item (used %.0f, free %.0f), written %.2f pages " ..
    "of 4 KiB per item"):format(name, file_bytes(path .. "/data.mdb") / total,
    st.used_bytes / total, st.free_bytes / total,
    w0 and (w1 - w0) / 4096 / total or 0 / 0))
  if args.sqlite then
    local sj = require "blog.sqlite_json"
    local jdb = assert(regolith.open(path, { readonly = true }))
    local shape = setmetatable({ users = jdb:container("users"),
      posts = jdb:container("posts"), feed = jdb:container("feed") }, model)
    local sw = tenths(total)
    local s = sj.load(path .. ".sqlite-json.db", shape, gen,
      { batch = args.batch or load.BULK_BATCH, progress = sw.update })
    jdb:close()
    print(("%s SQLite (JSON + indexes): %d items in %.1f s, %.0f items/s; " ..
      "per tenth: %s; %.0f B/item"):format(name, s.items, s.seconds,
      s.items / s.seconds, sw.rates(), s.bytes / s.items))
    os.remove(path .. ".sqlite-json.db")
    os.remove(path .. ".sqlite-json.db-wal")
    os.remove(path .. ".sqlite-json.db-shm")
  end
  if temporary then os.execute("rm -rf " .. shell_quote(path)) end
end
if temporary then os.execute("rm -rf " .. shell_quote(dir)) end
