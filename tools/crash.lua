--[[
The crash harness: kill a writer with SIGKILL at random moments, many times,
and check after each kill that nothing acknowledged was lost and nothing was
half-applied.

  lua5.4 tools/crash.lua [--kills N] [--sync full|lazy] [--queue] [--dir DIR]
                        [--seed S]

The child (this file with --child) runs a mixed load on one database:
creates, upserts, patches, deletes and batches over a small key space, each
document carrying the sequence number of the operation that wrote it. It logs
each call's intent before making it and its outcome after (to a side log,
line by line, which a SIGKILL does not lose).

With --queue the calls go through the write queue (db:write_queue): each
child leads its own batches, and is killed while leading or waiting; the
next child takes the queue over from the dead leader.

It also bulk-loads new documents into a second container ("bulk"), in
several batches per call, logging each batch the load reports done; one
load in three is one transaction (transaction = "load"), and one in three
is one transaction into a container without vector or full-text indexes
("plain"), whose batches' entries are held and, past a small, random
memory bound, spilled to a temporary file as sorted runs, all merged into
the tables at the end.

After each kill the parent opens the database and checks:
  - db:verify() passes (indexes, unique keys, feed, statistics, the refs
    table: no half item, no dangling index entry);
  - every bulk load holds whole batches only: the first k batches of its
    documents, with k at least the batches it logged as done and at most
    one more (the one in flight), or all of them once acknowledged; a load
    in one transaction holds all of its documents or none;
  - replaying the acknowledged calls of the log gives exactly the stored
    state: every key holds the sequence number of the last acknowledged write
    on it, or is gone after an acknowledged delete; only the one call in
    flight at the kill may or may not have happened;
  - that call, if a batch, happened for all its members or for none.
]]

local regolith = require "regolith"

local opts = { kills = 50, sync = "full", dir = nil, seed = os.time(), child = false,
  log = nil }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if k == "child" then opts.child = true; i = i + 1
    elseif k == "queue" then opts.queue = true; i = i + 1
    else
      opts[k] = arg[i + 1]
      i = i + 2
    end
  end
  opts.kills = tonumber(opts.kills)
  opts.seed = tonumber(opts.seed)
end

local KEYS = 60            -- small key space: many overwrites and conflicts
local PARTS = 6

local function key_of(n) return "k" .. n, "p" .. (n % PARTS) end

package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local scripts = require "shadow"      -- the procedure and the trigger
local PAIR, SHADOW = scripts.PAIR, scripts.SHADOW

-- The container, its procedure and trigger, and the copy the processor
-- keeps: "crash" mirrored into "copy", with a count of the changes applied
-- per id (exactly once each, or the count drifts from the feed).
-- Texts for the full-text indexes: three words a number picks.
local WORDS = { "bell", "lamp", "rope", "saddle", "anchor", "kettle", "ladder" }
local function words(n) return WORDS[n % 7 + 1] .. " " .. WORDS[(n // 7) % 7 + 1] .. " " .. WORDS[(n // 49) % 7 + 1] end

local function bulk_container(db)
  -- its documents carry vectors into a diskANN index, which trains its
  -- codes and builds its graph in some load's transaction (past 1,000)
  return db:container("bulk") or assert(db:create_container("bulk", {
    partition_key = "/pk", physical_partitions = 3, unique_keys = { { "/u" } },
    change_feed = { all_versions = true },
    vector_embeddings = { { path = "/v", dimensions = 4, distance_function = "euclidean" } },
    full_text = { paths = { { path = "/text" } } },
    indexing = { vector_indexes = { { path = "/v", type = "diskANN" } },
                 full_text = { "/text" } } }))
end

local function plain_container(db)
  return db:container("plain") or assert(db:create_container("plain", {
    partition_key = "/pk", physical_partitions = 3, unique_keys = { { "/u" } },
    change_feed = { all_versions = true } }))
end

local function spec(db)
  local c = db:container("crash")
  if c then return c, db:container("copy") end
  c = assert(db:create_container("crash", {
    partition_key = "/pk", physical_partitions = 4,
    unique_keys = { { "/u" } }, change_feed = { all_versions = true },
    vector_embeddings = { { path = "/v", dimensions = 3 } },
    full_text = { paths = { { path = "/text" } } },
    indexing = { vector_indexes = { { path = "/v", type = "flat" } },
                 full_text = { "/text" } },
  }))
  assert(c:create_procedure("pair", PAIR))
  assert(c:create_trigger("shadow", { type = "post", operation = "all",
    automatic = true, source = SHADOW }))
  return c, assert(db:create_container("copy", { partition_key = "/pk" }))
end

local function processor(db, copy)
  return assert(db:processor{
    name = "mirror", source = "crash", mode = "all_versions",
    instance = "crash-worker", lease_seconds = 5, max_items = 7,
    handler = function(changes)
      for _, ch in ipairs(changes) do
        local m = ch.metadata
        if ch.current then assert(copy:upsert(ch.current))
        else
          local ok, msg, st = copy:delete(m.id, m.partition_key)
          assert(ok or st == 404, msg)
        end
        local cnt = copy:read("cnt-" .. m.id, m.partition_key)
        assert(copy:upsert({ id = "cnt-" .. m.id, pk = m.partition_key,
                             n = (cnt and cnt.n or 0) + 1 }))
      end
    end,
  })
end

--[[ The child: writes until killed.  Before each call it logs its intent
("I seq op id pk [id pk ...]"), after it the outcome ("A seq" when
acknowledged, "F seq" when refused): so the parent knows every
acknowledged change and the one call that was in flight at the kill. ]]
local function child()
  local db = assert(regolith.open(opts.dir, { sync = opts.sync }))
  local c, copy = spec(db)
  local bulk = bulk_container(db)
  local plain = plain_container(db)
  local p = processor(db, copy)
  local log = assert(io.open(opts.log, "a"))
  log:setvbuf("line")
  math.randomseed(opts.seed)
  local seq = tonumber(os.getenv("CRASH_SEQ")) or 0
  local blob = ("x"):rep(200)
  local function outcome(s, ok) log:write((ok and "A %d\n" or "F %d\n"):format(s)) end
  -- c:m(...), through the write queue with --queue
  local q = opts.queue and db:write_queue()
  local function send(m, ...)
    if q then return q[m](q, c, ...) end
    return c[m](c, ...)
  end
  while true do
    seq = seq + 1
    local r = math.random(100)
    local n = math.random(KEYS)
    local id, pk = key_of(n)
    if seq % 10 == 0 then p:run_once() end
    if seq % 17 == 0 then
      -- a bulk load of new documents, in batches: "L seq n batch" first,
      -- "P seq done" after each batch, "A seq" at the end
      local n, batch = math.random(50, 400), math.random(10, 120)
      local kind = math.random(3) - 1   -- 0 batches, 1 one transaction,
                                        -- 2 one transaction into "plain"
      local whole = kind > 0
      log:write(("L %d %d %d %d\n"):format(seq, n, batch, kind))
      local j = 0
      local res = assert((kind == 2 and plain or bulk):bulk_load(function()
        j = j + 1
        if j <= n then
          return { id = ("b%d-%d"):format(seq, j), pk = "q" .. (j % 5),
                   u = ("u%d-%d"):format(seq, j), n = j, tags = { j % 3, "t" },
                   v = { j % 7, j % 11, seq % 13, (j * seq) % 17 },
                   text = words(j * seq) }
        end
      end, { batch = batch, transaction = whole and "load" or "batch",
             memory = kind == 2 and math.random(2000, 200000) or nil,
             progress = function(done)
        log:write(("P %d %d\n"):format(seq, done))
      end }))
      assert(res.failed == 0)
      outcome(seq, true)
    elseif r <= 10 then
      -- the procedure: n and the next key of the same partition
      local id2 = key_of(n + PARTS > KEYS and n + PARTS - KEYS or n + PARTS)
      log:write(("I %d W %s %s %s %s\n"):format(seq, id, pk, id2, pk))
      outcome(seq, send("execute", "pair", pk, id, id2, seq))
    elseif r <= 30 then
      log:write(("I %d W %s %s\n"):format(seq, id, pk))
      outcome(seq, send("upsert", { id = id, pk = pk, seq = seq, u = "u" .. seq,
        blob = blob:sub(1, math.random(200)), v = { seq % 5, seq % 3, 1 },
        text = words(seq) }))
    elseif r <= 45 then
      log:write(("I %d W %s %s\n"):format(seq, id, pk))
      outcome(seq, send("create", { id = id, pk = pk, seq = seq, u = "u" .. seq,
        v = { seq % 7, 1, seq % 2 }, text = words(seq + 3) }))
    elseif r <= 60 then
      log:write(("I %d W %s %s\n"):format(seq, id, pk))
      outcome(seq, send("patch", id, pk, { { op = "set", path = "/seq", value = seq },
                                     { op = "incr", path = "/n", value = 1 } }))
    elseif r <= 75 then
      log:write(("I %d D %s %s\n"):format(seq, id, pk))
      outcome(seq, send("delete", id, pk))
    else
      -- a batch over several keys of one logical partition
      local p = math.random(PARTS) - 1
      local ops, ids, line = {}, {}, { ("I %d B"):format(seq) }
      for _ = 1, math.random(2, 6) do
        local m = (math.random(KEYS // PARTS) - 1) * PARTS + p
        if m == 0 then m = PARTS end
        local bid = key_of(m)
        if not ids[bid] then
          ids[bid] = true
          ops[#ops + 1] = { op = "upsert", doc = { id = bid, pk = "p" .. p,
            seq = seq, u = "u" .. seq .. "." .. #ops, batch = seq } }
          line[#line + 1] = bid .. " p" .. p
        end
      end
      log:write(table.concat(line, " ") .. "\n")
      outcome(seq, send("batch", "p" .. p, ops))
    end
  end
end

--[[ The parent: run, kill, check, repeat. ]]
-- Replays the log: the state every acknowledged change leads to, and the
-- keys the call in flight at the kill may or may not have changed.
local function replay(logfile)
  local state, intents, open, loads = {}, {}, nil, {}
  for line in io.lines(logfile) do
    local kind, seq, rest = line:match("^(%a) (%d+)%s*(.*)$")
    seq = tonumber(seq)
    if kind == "L" then                 -- a bulk load
      local n, batch, how = rest:match("^(%d+) (%d+) ([012])$")
      loads[seq] = { n = tonumber(n), batch = tonumber(batch), done = 0,
                     whole = how ~= "0", plain = how == "2" }
    elseif kind == "P" then
      loads[seq].done = tonumber(rest)
    elseif (kind == "A" or kind == "F") and loads[seq] then
      loads[seq].acked = kind == "A"
    elseif kind == "I" then
      local op, keys = rest:match("^(%a) (.*)$")
      local list = {}
      for id, pk in keys:gmatch("(%S+) (%S+)") do list[#list + 1] = { id, pk } end
      intents[seq] = { op = op, keys = list }
      open = seq
    elseif kind == "A" and intents[seq] then
      local it = intents[seq]
      for _, k in ipairs(it.keys) do
        state[k[1] .. " " .. k[2]] = it.op == "D" and "gone" or seq
      end
      intents[seq], open = nil, nil
    elseif kind == "F" then
      intents[seq], open = nil, nil
    end
  end
  return state, open and intents[open], open, loads
end

-- Each bulk load holds whole batches: the first k of its documents, k a
-- multiple of its batch size (or all of them), at least what it logged as
-- done and at most one batch more; all once acknowledged.  A load in one
-- transaction (whose progress comes before its commit) holds all or none.
local function check_loads(db, loads)
  local bulk, plain = bulk_container(db), plain_container(db)
  for seq, l in pairs(loads) do
    local ids = assert((l.plain and plain or bulk):query(
      "SELECT VALUE c.n FROM c WHERE STARTSWITH(c.id, @p)", { p = ("b%d-"):format(seq) }))
    local k = #ids
    table.sort(ids)
    for i = 1, k do
      if ids[i] ~= i then
        return false, ("bulk load %d holds document %d but not %d"):format(seq, ids[i], i)
      end
    end
    local whole = k % l.batch == 0 or k == l.n
    local lo, hi = l.done, math.min(l.n, l.done + l.batch)
    if l.whole then
      whole, lo, hi = k == 0 or k == l.n, 0, l.n
    end
    if l.acked then lo, hi = l.n, l.n end
    if not whole or k < lo or k > hi then
      return false, ("bulk load %d (%d documents, batches of %d%s, %d logged done%s) " ..
        "holds %d"):format(seq, l.n, l.batch, l.whole and " in one transaction" or "",
        l.done, l.acked and ", acknowledged" or "", k)
    end
  end
  return true
end

local function check(dir, logfile)
  local db = assert(regolith.open(dir, { sync = opts.sync }))
  local ok, report = db:verify()
  if not ok then return false, "verify failed:\n" .. report end
  local c, copy = spec(db)
  local state, inflight, inseq, loads = replay(logfile)
  local lok, lwhy = check_loads(db, loads)
  if not lok then return false, lwhy end
  local maybe = {}
  if inflight then
    for _, k in ipairs(inflight.keys) do maybe[k[1] .. " " .. k[2]] = true end
  end
  local applied, gone = 0, 0            -- in-flight members applied
  for n = 1, KEYS do
    local id, pk = key_of(n)
    local doc = c:read(id, pk)
    local key = id .. " " .. pk
    local want = state[key]
    local got = doc and doc.seq or "gone"
    if want == nil and got == "gone" then want = "gone" end
    if maybe[key] and got == inseq then applied = applied + 1
    elseif maybe[key] and inflight.op == "D" and got == "gone" then
      gone = 1                          -- the delete in flight committed
    elseif want ~= got and not (want == nil and maybe[key]) then
      return false, ("%s holds %s, but the acknowledged changes leave %s"):format(
        key, tostring(got), tostring(want))
    end
  end
  if inflight and inflight.op ~= "D" and applied ~= 0 and applied ~= #inflight.keys then
    return false, ("call %d is partly applied: %d of %d writes"):format(inseq,
      applied, #inflight.keys)
  end
  -- every key and its shadow agree (the trigger and the procedure write
  -- both in one transaction)
  for n = 1, KEYS do
    local id, pk = key_of(n)
    local doc, shadow = c:read(id, pk), c:read("s-" .. id, pk)
    if (doc and doc.seq) ~= (shadow and shadow.seq) then
      return false, ("%s holds %s but its shadow %s"):format(id,
        tostring(doc and doc.seq), tostring(shadow and shadow.seq))
    end
  end
  -- the processor catches up, then the copy is exact and every change was
  -- applied exactly once
  local p = processor(db, copy)
  p:run{ until_idle = true }
  p:close()
  local counts = {}
  local changes, info = c:changes{ mode = "all_versions", max_items = 100000 }
  while changes and #changes > 0 do
    for _, ch in ipairs(changes) do
      local k = ch.metadata.id .. " " .. ch.metadata.partition_key
      counts[k] = (counts[k] or 0) + 1
    end
    changes, info = c:changes{ mode = "all_versions", max_items = 100000,
      continuation = info.continuation }
  end
  for n = 1, KEYS do
    local id, pk = key_of(n)
    for _, k in ipairs({ id, "s-" .. id }) do
      local a, b = c:read(k, pk), copy:read(k, pk)
      if (a and a.seq) ~= (b and b.seq) then
        return false, ("the copy of %s holds %s, the source %s"):format(k,
          tostring(b and b.seq), tostring(a and a.seq))
      end
      local cnt = copy:read("cnt-" .. k, pk)
      if (cnt and cnt.n or 0) ~= (counts[k .. " " .. pk] or 0) then
        return false, ("%d changes of %s were applied to the copy, but the "
          .. "feed holds %d"):format(cnt and cnt.n or 0, k, counts[k .. " " .. pk] or 0)
      end
    end
  end
  db:close()
  -- the call in flight is resolved now: record how, for later replays
  if inflight then
    local happened = applied > 0 or gone > 0
    local log = assert(io.open(logfile, "a"))
    log:write((happened and "A %d\n" or "F %d\n"):format(inseq))
    log:close()
  end
  return true
end

local function parent()
  local dir = opts.dir or (os.tmpname() .. ".crash")
  os.execute("rm -rf '" .. dir .. "'")
  local logfile = dir .. ".log"
  assert(io.open(logfile, "w")):close()   -- a child killed before it logs
  do  -- the containers and scripts, made here: a kill cannot split them
    local db = assert(regolith.open(dir, { sync = opts.sync }))
    spec(db)
    db:close()
  end
  local self = arg[0]
  local interp = arg[-1] or "lua5.4"
  math.randomseed(opts.seed)
  local seq = 0
  local t0 = os.time()
  for kill = 1, opts.kills do
    -- run it for 20 to 250 ms, then kill it mid-flight.  --foreground
    -- makes timeout wait until the child is gone: without it, timeout
    -- kills its whole process group, itself included, and returns while a
    -- child in the middle of a disk write (which SIGKILL cannot interrupt)
    -- still lives, and may commit after the check has begun
    local cmd = ("CRASH_SEQ=%d timeout --foreground -s KILL %.3f %s %s --child --dir '%s' "
      .. "--log '%s' --sync %s --seed %d%s > /dev/null 2>&1"):format(seq + 1000000,
      math.random(20, 250) / 1000, interp, self, dir, logfile, opts.sync,
      opts.seed + kill, opts.queue and " --queue" or "")
    seq = seq + 1000000
    os.execute(cmd)
    local ok, why = check(dir, logfile)
    if not ok then
      io.stderr:write(("crash harness: after kill %d (sync %s, seed %d): %s\n"):format(
        kill, opts.sync, opts.seed, why))
      os.exit(1)
    end
  end
  local acked = 0
  for line in io.lines(logfile) do
    if line:sub(1, 1) == "A" then acked = acked + 1 end
  end
  local _, _, _, loads = replay(logfile)
  local nl, cut = 0, 0
  for _, l in pairs(loads) do
    nl = nl + 1
    if not l.acked then cut = cut + 1 end
  end
  print(("crash harness: %d kills with sync=%s%s, %d acknowledged calls replayed "
    .. "(%d bulk loads, %d of them killed part way), nothing lost or "
    .. "half-applied (%ds)"):format(opts.kills, opts.sync,
    opts.queue and " (write queue)" or "", acked, nl, cut,
    os.time() - t0))
  os.execute("rm -rf '" .. dir .. "' '" .. logfile .. "'")
end

if opts.child then child() else parent() end
