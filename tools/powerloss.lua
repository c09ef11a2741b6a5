--[[
The power-loss harness: what an OS crash or a power cut can leave of a
database, checked on many disk images.

  lua5.4 tools/powerloss.lua [--images N] [--per-run M] [--sync full|lazy|none]
    [--writers K] [--procs P] [--group] [--queue] [--seed S] [--dir DIR]
    [--expect-loss]

Each run copies a durable database (a container with a procedure and an
automatic post-trigger; every second run without its write-ahead log, so
that the writer's session makes one from nothing, as a new database's
first session does) and lets a writer process make a few hundred calls
on it (creates, upserts, patches, deletes, batches, bulk loads of one
batch in upsert mode, the procedure) with
LD_PRELOAD=build/powerloss/shim.so, which records every write and flush of
the database's files, and the writer's marks (each call's intent before it,
"acknowledged" or "refused" after it), in one ordered journal.  With
--writers K the calls come from K coroutines sharing the database handle,
each on keys of its own (with --procs P, in each of P processes writing
at once); with --group too, they write through
db:group_commit, sharing transactions; with --queue, through the write
queue (db:write_queue), where one process's transaction carries the calls
of several processes.  build/powerloss/image then makes M disk images
from the journal, each at a random moment: what was flushed, plus any
subset of the pages written since the last flush (tools/powerloss/image.c).
A checker process opens every image (as the first process after a reboot
would), and checks:
  - it opens, db:verify() is clean, and every item agrees with its shadow
    (the trigger writes both in one transaction);
  - for each writer, the items are exactly what its calls up to some point
    made, the call in flight at that point applied wholly or not at all;
  - how far that point may be, by sync mode: "full", at least up to the
    last acknowledged call (nothing acknowledged is lost); "lazy", at least
    up to the last call acknowledged before the log's last flush;
    "none", anywhere (what was written last may be lost, never a damaged
    database).
It stops at the first image that breaks these, printing why and keeping the
image; with --expect-loss (the self-test, run with PL_DROP_SYNC=1 so that
no flush reaches the disk) it succeeds only if some image breaks them.
]]

local regolith = require "regolith"

local opts = { images = 200, ["per-run"] = 25, sync = "full", writers = 1, procs = 1, proc = 0,
  seed = os.time(), dir = nil, ops = nil, db = nil, marks = nil }
local mode = "drive"
local rest = {}
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if k == "child" or k == "check" then mode = k; i = i + 1
    elseif k == "expect-loss" then opts.expect_loss = true; i = i + 1
    elseif k == "group" then opts.group = true; i = i + 1
    elseif k == "queue" then opts.queue = true; i = i + 1
    elseif k then opts[k] = arg[i + 1]; i = i + 2
    else rest[#rest + 1] = arg[i]; i = i + 1 end
  end
  for _, k in ipairs({ "images", "per-run", "writers", "procs", "proc", "seed", "ops" }) do
    opts[k] = tonumber(opts[k])
  end
end

local KEYS, PARTS = 48, 4
local IGNORED = { "lock.mdb", "regolith.shm", "throughput.shm", "regolith.queue",
                  "regolith.queue.2" }

local function key_of(n) return "k" .. n, "p" .. (n % PARTS) end

package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local scripts = require "shadow"      -- the procedure and the trigger
local PAIR, SHADOW = scripts.PAIR, scripts.SHADOW

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

--[[ The writer: --ops calls from --writers coroutines, marks through the
shim; process --proc of --procs writing at once.  Writer w (numbered
across the processes) owns the keys n with n % (writers * procs) == w;
call numbers are unique across the processes. ]]
local function child()
  local db = assert(regolith.open(opts.db, { sync = opts.sync }))
  local c = assert(db:container("pl"))
  local vec = assert(db:container("vec"))
  local marks = assert(io.open(opts.marks, "a"))
  marks:setvbuf("line")
  math.randomseed(opts.seed + 7919 * opts.proc)
  local K, P = opts.writers, opts.procs
  local W = K * P
  local seq = 0
  local function mark(line) marks:write(line, "\n") end
  local g = opts.group and db:group_commit{ yield = coroutine.yield }
  local q = opts.queue and db:write_queue()
  local function write(fn)               -- through the group, or alone
    if g then return g:run(fn) end
    return fn()
  end
  -- cont:m(...) through the write queue (--queue), else as write does
  local function send(cont, m, ...)
    if q then return q[m](q, cont, ...) end
    local args = table.pack and table.pack(...) or { n = select("#", ...), ... }
    return write(function() return cont[m](cont, (table.unpack or unpack)(args, 1, args.n)) end)
  end
  local function call(w)
    seq = seq + 1
    local s = seq * P + opts.proc
    w = opts.proc * K + w
    local mine = {}
    for n = 1, KEYS do if n % W == w then mine[#mine + 1] = n end end
    local n = mine[math.random(#mine)]
    local id, pk = key_of(n)
    local r = math.random(100)
    local ok
    if seq % 3 == 0 then                 -- a vector moved, or gone
      local i = math.random(1100)
      local vid, vpk = "v" .. i, "p" .. (i % 3)
      if math.random(4) == 1 then send(vec, "delete", vid, vpk)
      else
        send(vec, "upsert", { id = vid, pk = vpk,
                              v = { s % 7 + 1, i % 5, s % 3, w },
                              text = ("bell rope lamp kettle"):sub(1 + s % 5) })
      end
    end
    if r <= 10 then
      local m = n + PARTS * W
      if m > KEYS then m = n - PARTS * W end
      if m < 1 then m = n end
      local id2 = key_of(m)
      mark(("I %d %d W %s %s %s %s"):format(s, w, id, pk, id2, pk))
      ok = send(c, "execute", "pair", pk, id, id2, s)
    elseif r <= 35 then
      mark(("I %d %d W %s %s"):format(s, w, id, pk))
      local pad = ("x"):rep(math.random(300))
      ok = send(c, "upsert", { id = id, pk = pk, seq = s, pad = pad })
    elseif r <= 50 then
      mark(("I %d %d W %s %s"):format(s, w, id, pk))
      ok = send(c, "create", { id = id, pk = pk, seq = s })
    elseif r <= 65 then
      mark(("I %d %d W %s %s"):format(s, w, id, pk))
      ok = send(c, "patch", id, pk, { { op = "set", path = "/seq", value = s },
                                      { op = "incr", path = "/n", value = 1 } })
    elseif r <= 74 then
      mark(("I %d %d D %s %s"):format(s, w, id, pk))
      ok = send(c, "delete", id, pk)
    elseif r <= 82 then
      -- a bulk load in upsert mode, one batch (one transaction), each
      -- document with its shadow: a bulk load runs no trigger
      local docs, seen, line = {}, {}, { ("I %d %d W"):format(s, w) }
      for _ = 1, math.random(1, 6) do
        local m = mine[math.random(#mine)]
        local bid, bpk = key_of(m)
        if not seen[bid] then
          seen[bid] = true
          docs[#docs + 1] = { id = bid, pk = bpk, seq = s, bulk = true }
          docs[#docs + 1] = { id = "s-" .. bid, pk = bpk, seq = s, shadow = true }
          line[#line + 1] = bid .. " " .. bpk
        end
      end
      mark(table.concat(line, " "))
      ok = write(function()
        local res = c:bulk_load(docs, { mode = "upsert", batch = #docs })
        return res and res.written == #docs
      end)
    else
      local p = n % PARTS
      local ops, seen, line = {}, {}, { ("I %d %d W"):format(s, w) }
      for _ = 1, math.random(2, 5) do
        local m = mine[math.random(#mine)]
        local bid, bpk = key_of(m)
        if bpk == pk and not seen[bid] then
          seen[bid] = true
          ops[#ops + 1] = { op = "upsert", doc = { id = bid, pk = pk, seq = s } }
          line[#line + 1] = bid .. " " .. pk
        end
      end
      if #ops == 0 then
        ops[1] = { op = "upsert", doc = { id = id, pk = pk, seq = s } }
        line[#line + 1] = id .. " " .. pk
      end
      mark(table.concat(line, " "))
      ok = send(c, "batch", pk, ops)
      assert(p == n % PARTS)
    end
    mark((ok and "A %d" or "F %d"):format(s))
  end
  if K == 1 then
    for _ = 1, opts.ops do call(0) end
  else
    -- K coroutines taking turns (each also yields inside g:run)
    local cos = {}
    for w = 0, K - 1 do
      cos[w] = coroutine.create(function()
        while seq < opts.ops do call(w); coroutine.yield() end
      end)
    end
    local live = K
    while live > 0 do
      live = 0
      for w = 0, K - 1 do
        if coroutine.status(cos[w]) == "suspended" then
          assert(coroutine.resume(cos[w]))
          live = live + 1
        end
      end
    end
  end
  marks:close()
  db:close()
end

--[[ The checker: every image named on the command line. ]]
-- The writer's calls, per writer, in order, from an image's marks; and for
-- each writer the number of its calls acknowledged before the log's last
-- flush.
local function parse_marks(path)
  local calls, by_seq, flushed = {}, {}, {}
  local acked_since = {}            -- per writer: acknowledged since a flush
  for line in io.lines(path) do
    local kind, rest = line:match("^(%S+)%s*(.*)$")
    if kind == "I" then
      local s, w, op, keys = rest:match("^(%d+) (%d+) (%a) (.*)$")
      s, w = tonumber(s), tonumber(w)
      local list = {}
      for id, pk in keys:gmatch("(%S+) (%S+)") do list[#list + 1] = id .. " " .. pk end
      local call = { seq = s, w = w, op = op, keys = list }
      calls[w] = calls[w] or {}
      calls[w][#calls[w] + 1] = call
      call.index = #calls[w]
      by_seq[s] = call
    elseif kind == "A" or kind == "F" then
      local call = by_seq[tonumber(rest)]
      call.outcome = kind
      if kind == "A" then acked_since[call.w] = call.index end
    elseif (kind == "~S" or kind == "~D") and rest == "regolith.wal" then
      -- "lazy" promises what was acknowledged before the log's last flush
      -- (a checkpoint flushes the data file without the writer lock, while
      -- other commits go on: it vouches for none of them)
      for w, idx in pairs(acked_since) do flushed[w] = idx end
    end
  end
  return calls, flushed
end

local function check_image(dir, c, db)
  local ok, report = db:verify()
  if not ok then return false, "verify failed:\n" .. tostring(report) end
  local state = {}
  for n = 1, KEYS do
    local id, pk = key_of(n)
    local doc, msg, st = c:read(id, pk)
    if not doc and st ~= 404 then return false, ("reading %s: %s"):format(id, msg) end
    local shadow, msg2, st2 = c:read("s-" .. id, pk)
    if not shadow and st2 ~= 404 then return false, ("reading s-%s: %s"):format(id, msg2) end
    if (doc and doc.seq) ~= (shadow and shadow.seq) then
      return false, ("%s holds %s but its shadow %s"):format(id,
        tostring(doc and doc.seq), tostring(shadow and shadow.seq))
    end
    state[id .. " " .. pk] = doc and doc.seq or "gone"
  end
  local calls, flushed = parse_marks(dir .. "/marks")
  for w, list in pairs(calls) do
    -- the keys of this writer, and how many hold what the calls so far make
    local expect, keys, wrong = {}, {}, 0
    for _, call in ipairs(list) do
      for _, k in ipairs(call.keys) do keys[k] = true end
    end
    for k in pairs(keys) do
      expect[k] = "gone"
      if state[k] ~= "gone" then wrong = wrong + 1 end
    end
    local function set(k, v)
      local before = expect[k] == state[k]
      expect[k] = v
      local after = v == state[k]
      if before and not after then wrong = wrong + 1
      elseif after and not before then wrong = wrong - 1 end
    end
    local function apply(call)
      local undo = {}
      for _, k in ipairs(call.keys) do
        undo[#undo + 1] = { k, expect[k] }
        set(k, call.op == "D" and "gone" or call.seq)
      end
      return undo
    end
    local last_acked = 0
    for i, call in ipairs(list) do if call.outcome == "A" then last_acked = i end end
    local least = opts.sync == "full" and last_acked or
      opts.sync == "lazy" and (flushed[w] or 0) or 0
    local found = wrong == 0 and least == 0
    for i, call in ipairs(list) do
      if found then break end
      if call.outcome == "A" then apply(call)
      elseif call.outcome == nil then
        -- in flight: it may have happened, wholly
        local undo = apply(call)
        if wrong == 0 and i >= least then found = true; break end
        for j = #undo, 1, -1 do set(undo[j][1], undo[j][2]) end
      end
      if wrong == 0 and i >= least then found = true end
    end
    if not found then
      local lines = {}
      for k in pairs(keys) do
        if expect[k] ~= state[k] then
          lines[#lines + 1] = ("%s holds %s"):format(k, tostring(state[k]))
        end
      end
      table.sort(lines)
      return false, ("writer %d: the items match no point at or after its call "
        .. "%d of %d (%d acknowledged) with sync %s; after all its calls: %s"):format(
        w, least, #list, last_acked, opts.sync, table.concat(lines, ", "))
    end
  end
  return true
end

local function check()
  local checked = 0
  for _, dir in ipairs(rest) do
    local db, msg = regolith.open(dir, { sync = opts.sync })
    local ok, why
    if not db then ok, why = false, "cannot open: " .. tostring(msg)
    else
      local c = db:container("pl")
      if not c then ok, why = false, "the container is gone"
      else ok, why = check_image(dir, c, db) end
      db:close()
    end
    if not ok then
      local f = io.open(dir .. "/info")
      local info = f and f:read("*a") or ""
      if f then f:close() end
      io.stdout:write(("FAIL %s\n%s%s\n"):format(dir, info, why))
      os.exit(1)
    end
    checked = checked + 1
    io.stdout:write(("ok %s\n"):format(dir))
    io.stdout:flush()
  end
  os.exit(0)
end

--[[ The driver. ]]
local function drive()
  local here = arg[0]:match("^(.*)/tools/powerloss%.lua$") or "."
  local build = os.getenv("PL_BUILD") or (here .. "/build/powerloss")
  local shim, image = build .. "/shim.so", build .. "/image"
  local dir = opts.dir
  if not dir then                  -- a fresh name; the empty file goes again
    local name = os.tmpname()
    os.remove(name)
    dir = name .. ".powerloss"
  end
  local keep = opts.dir ~= nil
  sh("rm -rf " .. shell_quote(dir) .. " && mkdir -p " .. shell_quote(dir))
  local absdir = io.popen("cd " .. shell_quote(dir) .. " && pwd"):read("*l")
  local interp = arg[-1] or "lua5.4"
  local self = arg[0]
  -- the durable starting point
  local base, db_dir = absdir .. "/base", absdir .. "/db"
  do
    local db = assert(regolith.open(base, { sync = "full" }))
    local c = assert(db:create_container("pl", { partition_key = "/pk",
      physical_partitions = 2 }))
    -- a diskANN index past the 1,000 vectors it trains at, which the
    -- writers change as they go (verify checks it in every image)
    local vec = assert(db:create_container("vec", { partition_key = "/pk",
      vector_embeddings = { { path = "/v", dimensions = 4 } },
      full_text = { paths = { { path = "/text" } } },
      indexing = { vector_indexes = { { path = "/v", type = "diskANN" } },
                   full_text = { "/text" } } }))
    local docs = {}
    for i = 1, 1100 do
      docs[i] = { id = "v" .. i, pk = "p" .. (i % 3),
                  v = { i % 7 + 1, i % 11, i % 13, 1 },
                  text = (i % 2 == 0 and "bell lamp " or "rope ") .. i }
    end
    assert(vec:bulk_load(docs))
    assert(c:create_procedure("pair", PAIR))
    assert(c:create_trigger("shadow", { type = "post", operation = "all",
      automatic = true, source = SHADOW }))
    db:close()
    -- what need not survive a restart: LMDB's lock file, the log's and the
    -- throughput accounting's shared state (rebuilt by the first process to
    -- open the database)
    for _, name in ipairs(IGNORED) do os.remove(base .. "/" .. name) end
  end
  -- the same without its log: the writer's session then makes the log
  -- from nothing, as the first session of a new database does
  local fresh = absdir .. "/fresh"
  sh(("cp -r %s %s && rm -f %s/regolith.wal"):format(shell_quote(base),
    shell_quote(fresh), shell_quote(fresh)))
  math.randomseed(opts.seed)
  local t0 = os.time()
  local total, runs, calls = 0, 0, 0
  local drop = os.getenv("PL_DROP_SYNC") == "1"
  while total < opts.images do
    runs = runs + 1
    local ops = opts.ops or math.random(60, 300)
    local seed = opts.seed + runs
    local from = runs % 2 == 0 and fresh or base
    sh(("rm -rf %s %s/images %s/journal %s/marks && cp -r %s %s && mkdir %s/images"):format(
      shell_quote(db_dir), shell_quote(absdir), shell_quote(absdir),
      shell_quote(absdir), shell_quote(from), shell_quote(db_dir),
      shell_quote(absdir)))
    local env = ("PL_JOURNAL=%s PL_DIR=%s PL_IGNORE=%s PL_MARKS=%s LD_PRELOAD=%s")
      :format(shell_quote(absdir .. "/journal"), shell_quote(db_dir),
        table.concat(IGNORED, ","),
        shell_quote(absdir .. "/marks"), shell_quote(shim))
    -- the writer processes, at once; each one's exit status is waited for
    local script = {}
    for proc = 0, opts.procs - 1 do
      script[#script + 1] = ("%s %s %s --child --db %s --marks %s --sync %s --ops %d "
        .. "--writers %d --procs %d --proc %d --seed %d%s & p%d=$!"):format(env, interp,
        self, shell_quote(db_dir), shell_quote(absdir .. "/marks"), opts.sync, ops,
        opts.writers, opts.procs, proc, seed,
        (opts.group and " --group" or "") .. (opts.queue and " --queue" or ""), proc)
    end
    local waits = {}
    for proc = 0, opts.procs - 1 do waits[#waits + 1] = ("wait $p%d"):format(proc) end
    if not sh(table.concat(script, "; ") .. "; rc=0; " .. table.concat(waits, " || rc=1; ")
        .. " || rc=1; exit $rc") then
      io.stderr:write("powerloss: the writer failed\n")
      os.exit(1)
    end
    calls = calls + ops * opts.procs
    local n = math.min(opts["per-run"], opts.images - total)
    local p = io.popen(("%s --journal %s --base %s --out %s/images --images %d --seed %d"):format(
      shell_quote(image), shell_quote(absdir .. "/journal"), shell_quote(from),
      shell_quote(absdir), n, seed))
    local out = p:read("*a")
    local ok = p:close()
    if not ok or not out:match("^%d+ images") then
      io.stderr:write("powerloss: building images failed: ", out, "\n")
      os.exit(1)
    end
    local list = {}
    for i = 0, n - 1 do list[#list + 1] = shell_quote(("%s/images/img-%04d"):format(absdir, i)) end
    local cp = io.popen(("%s %s --check --sync %s %s 2>&1"):format(interp, self,
      opts.sync, table.concat(list, " ")))
    local report = cp:read("*a")
    cp:close()
    local good = 0
    for line in report:gmatch("[^\n]+") do
      if line:sub(1, 3) == "ok " then good = good + 1 end
    end
    total = total + good
    if good < n then
      -- a failure, or the checker died on an image (LMDB on a damaged file)
      local why = report:match("FAIL .*$") or ("the checker stopped after %d of %d images:\n%s")
        :format(good, n, report:sub(-2000))
      if opts.expect_loss then
        print(("powerloss self-test: with every flush dropped, image %d of run %d "
          .. "broke the promise of sync %s, as it must:\n%s"):format(good + 1, runs,
          opts.sync, why))
        if not keep then sh("rm -rf " .. shell_quote(dir)) end
        os.exit(0)
      end
      local kept = absdir .. "/failed"
      sh(("rm -rf %s && cp -r %s/images/img-%04d %s && cp %s/journal %s/"):format(
        shell_quote(kept), shell_quote(absdir), good, shell_quote(kept),
        shell_quote(absdir), shell_quote(kept)))
      io.stderr:write(("powerloss: sync %s, run %d (seed %d), image %d: %s\n(kept in %s)\n")
        :format(opts.sync, runs, seed, good, why, kept))
      os.exit(1)
    end
  end
  if opts.expect_loss then
    io.stderr:write(("powerloss self-test: %d images with every flush dropped%s, and "
      .. "none broke the promise of sync %s: the harness cannot see a lost flush\n")
      :format(total, drop and "" or " (PL_DROP_SYNC is not set)", opts.sync))
    os.exit(1)
  end
  print(("powerloss: sync %s, %d writer%s%s%s: %d images from %d runs (%d calls), "
    .. "every one clean (%ds)"):format(opts.sync, opts.writers,
    opts.writers == 1 and "" or "s",
    opts.procs > 1 and (" in each of %d processes"):format(opts.procs) or "", (opts.group and " (group commit)" or "") ..
    (opts.queue and " (write queue)" or ""), total,
    runs, calls, os.time() - t0))
  if not keep then sh("rm -rf " .. shell_quote(dir)) end
end

if mode == "child" then child()
elseif mode == "check" then check()
else drive() end
