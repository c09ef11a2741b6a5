--[[
The hammer: several processes on one database at once, for a bounded time,
then exact counts.

  lua5.4 tools/hammer.lua [--seconds S] [--writers W] [--readers R]
                          [--processors P] [--sync full|lazy|none]
                          [--dir DIR] [--seed N]

Roles (each a child process running this file with --role):
  writer     creates, upserts, patches (incr of a shared counter), deletes,
             batches (three creates and an incr, atomically) and a procedure
             (an incr and a create in one transaction), over 8 logical
             partitions of the container `src`; each acknowledged call is
             logged to the writer's own side log.  A writer touches only its
             own items and the shared counters, so its log alone decides
             what its items must hold.
  reader     reads counters (which must never go down, as seen by one
             reader), random items, counts per partition, and the
             all_versions feed through continuations (whose lsns must never
             go down); every call must succeed (or be 404 for an item).
  processor  a transactional all_versions processor "mirror", the same name
             in every such process (every other one running passes bounded
             to one batch, max_ms = 0): leases split the feed ranges between
             them; its handler mirrors `src` into `copy` and counts every
             change once per partition in `tally`.

When the children are done, the parent catches the processor up (a last
instance takes the ranges the others gave back) and checks:
  - db:verify() passes;
  - every writer's items are exactly what its log says (present with the
    last value written, or gone), and nothing else is in `src`;
  - each counter holds exactly the increments the writers logged;
  - `copy` is `src`, item for item and value for value;
  - `tally` counted each change of the all_versions feed exactly once;
  - no reader saw a counter or a feed go backwards, or a call fail.
It prints what was done and "hammer: ok", or raises.
]]

local regolith = require "regolith"

local opts = { seconds = 5, writers = 3, readers = 2, processors = 2,
  sync = "lazy", dir = nil, seed = os.time(), role = nil, id = nil, log = nil, deadline = nil }
do
  local i = 1
  while i <= #arg do
    local k = assert(arg[i]:match("^%-%-(.+)$"), "bad argument " .. arg[i])
    opts[k] = arg[i + 1]
    i = i + 2
  end
  for _, k in ipairs({ "seconds", "writers", "readers", "processors", "seed",
                       "id", "deadline" }) do
    opts[k] = tonumber(opts[k])
  end
end

local PARTS = 8
local function pk_of(k) return "p" .. k end

local BUMP = [[
return function(ctx, id)
  assert(ctx:patch("counter", { { op = "incr", path = "/hits", value = 1 } }))
  assert(ctx:create({ id = id, pk = ctx.partition_key, v = 0 }))
  return true
end
]]

-- The mirror's handler: what a processor does with a batch, in the write
-- transaction that moves its checkpoint.
local function mirror(db)
  local copy = assert(db:container("copy"))
  local tally = assert(db:container("tally"))
  return function(changes)
    for _, ch in ipairs(changes) do
      local m = ch.metadata
      if m.operation == "delete" then
        local ok, msg, status = copy:delete(m.id, m.partition_key)
        assert(ok or status == 404, msg)
      else
        local d = ch.current
        assert(copy:upsert({ id = d.id, pk = d.pk, v = d.v, hits = d.hits }))
      end
      assert(tally:patch("events", m.partition_key,
                         { { op = "incr", path = "/n", value = 1 } }))
    end
  end
end

local function wait_start()
  while os.time() < opts.deadline - opts.seconds do
    os.execute("sleep 0.05")
  end
end

-- {{{ roles
local function writer(db)
  local src = assert(db:container("src"))
  local log = assert(io.open(opts.log, "w"))
  local live, order = {}, {}         -- id -> pk, and the ids in order
  local n, ops = 0, 0
  local function new_id() n = n + 1 return "w" .. opts.id .. "-" .. n end
  local function forget(id)
    live[id] = nil
    for i = #order, 1, -1 do
      if order[i] == id then table.remove(order, i) break end
    end
  end
  local function remember(id, pk) live[id] = pk order[#order + 1] = id end
  math.randomseed(opts.seed + opts.id)
  wait_start()
  while os.time() < opts.deadline do
    local pk = pk_of(math.random(PARTS))
    local r = math.random(100)
    if r <= 30 or #order == 0 then
      local id = new_id()
      assert(src:create({ id = id, pk = pk, v = 0 }))
      remember(id, pk)
      log:write("C ", id, " ", pk, "\n")
    elseif r <= 50 then
      local id = order[math.random(#order)]
      n = n + 1
      assert(src:upsert({ id = id, pk = live[id], v = n }))
      log:write("U ", id, " ", n, "\n")
    elseif r <= 70 then
      assert(src:patch("counter", pk, { { op = "incr", path = "/hits", value = 1 } }))
      log:write("I ", pk, "\n")
    elseif r <= 80 then
      local id = order[math.random(#order)]
      assert(src:delete(id, live[id]))
      forget(id)
      log:write("D ", id, "\n")
    elseif r <= 90 then
      local a, b, c = new_id(), new_id(), new_id()
      assert(src:batch(pk, {
        { op = "create", doc = { id = a, pk = pk, v = 0 } },
        { op = "create", doc = { id = b, pk = pk, v = 0 } },
        { op = "patch", id = "counter", ops = { { op = "incr", path = "/hits", value = 1 } } },
        { op = "create", doc = { id = c, pk = pk, v = 0 } },
      }))
      remember(a, pk) remember(b, pk) remember(c, pk)
      log:write("B ", pk, " ", a, " ", b, " ", c, "\n")
    else
      local id = new_id()
      assert(src:execute("bump", pk, id))
      remember(id, pk)
      log:write("P ", pk, " ", id, "\n")
    end
    ops = ops + 1
  end
  log:close()
  print("writer ops " .. ops)
end

local function reader(db)
  local src = assert(db:container("src"))
  local seen, reads, lsn = {}, 0, 0
  local token
  math.randomseed(opts.seed + 1000 + opts.id)
  wait_start()
  while os.time() < opts.deadline do
    local k = math.random(PARTS)
    local counter = assert(src:read("counter", pk_of(k)))
    assert(counter.hits >= (seen[k] or 0), "a counter went down")
    seen[k] = counter.hits
    local id = "w" .. math.random(opts.writers) .. "-" .. math.random(200)
    local doc, msg, status = src:read(id, pk_of(k))
    assert(doc or status == 404, msg)
    assert(src:query("SELECT VALUE COUNT(1) FROM c WHERE c.pk = @pk", { pk = pk_of(k) }))
    assert(src:query("SELECT TOP 5 c.id, c.v FROM c WHERE c.v > 3 ORDER BY c.v DESC"))
    local page, info = assert(src:changes{ mode = "all_versions", max_items = 50,
                                           continuation = token })
    for _, ch in ipairs(page) do
      assert(ch.metadata.lsn >= lsn, "the feed went backwards")
      lsn = ch.metadata.lsn
    end
    token = info.continuation
    reads = reads + 5
  end
  print("reader reads " .. reads)
end

local function processor(db)
  local p = assert(db:processor{ name = "mirror", source = "src",
    mode = "all_versions", lease_seconds = 2, max_items = 50,
    instance = "proc-" .. opts.id, handler = mirror(db) })
  local delivered = 0
  -- every other instance runs passes bounded to one batch (max_ms = 0),
  -- as an nginx worker's pump does, beside whole passes
  local once = opts.id % 2 == 0 and { max_ms = 0 } or nil
  wait_start()
  while os.time() < opts.deadline + 1 do
    local n = assert(p:run_once(once))
    delivered = delivered + n
    if n == 0 then os.execute("sleep 0.02") end
  end
  p:close()
  print("processor delivered " .. delivered)
end
-- }}}

if opts.role then
  local db = assert(regolith.open(opts.dir, { sync = opts.sync }))
  local roles = { writer = writer, reader = reader, processor = processor }
  assert(roles[opts.role], "unknown role")(db)
  db:close()
  os.exit(0)
end

-- {{{ the parent
local dir = opts.dir or os.tmpname()
os.remove(dir)
os.execute("rm -rf '" .. dir .. "'")
local db = assert(regolith.open(dir))
local src = assert(db:create_container("src", { partition_key = "/pk",
  physical_partitions = 4, change_feed = { all_versions = true } }))
local copy = assert(db:create_container("copy", { partition_key = "/pk" }))
local tally = assert(db:create_container("tally", { partition_key = "/pk" }))
for k = 1, PARTS do
  assert(src:create({ id = "counter", pk = pk_of(k), hits = 0 }))
  assert(tally:create({ id = "events", pk = pk_of(k), n = 0 }))
end
assert(src:create_procedure("bump", BUMP))

local self, interp = arg[0], arg[-1] or "lua5.4"
local env = ("LUA_PATH=%q LUA_CPATH=%q "):format(package.path, package.cpath)
-- children start together, two seconds from now, and stop together
local deadline = os.time() + 2 + opts.seconds
local children = {}
local function spawn(role, id)
  local cmd = ("%s%s %s --role %s --id %d --dir %q --seed %d --seconds %d " ..
               "--deadline %d --writers %d --sync %s --log %q 2>&1"):format(
    env, interp, self, role, id, dir, opts.seed, opts.seconds, deadline,
    opts.writers, opts.sync, dir .. "/" .. role .. id .. ".log")
  children[#children + 1] = { role = role, p = assert(io.popen(cmd, "r")) }
end
for i = 1, opts.writers do spawn("writer", i) end
for i = 1, opts.readers do spawn("reader", i) end
for i = 1, opts.processors do spawn("processor", i) end

local totals, each = {}, {}
for _, ch in ipairs(children) do
  local out = ch.p:read("a")
  local ok = ch.p:close()
  assert(ok, ch.role .. " failed: " .. out)
  local what, n = out:match("(%a+ %a+) (%d+)")
  assert(what, ch.role .. " said: " .. out)
  totals[what] = (totals[what] or 0) + tonumber(n)
  each[what] = (each[what] and each[what] .. "+" or "") .. n
end

-- catch the mirror up: the others gave their leases back when they closed
local p = assert(db:processor{ name = "mirror", source = "src",
  mode = "all_versions", lease_seconds = 2, max_items = 500,
  instance = "final", handler = mirror(db) })
local caught = assert(p:run{ until_idle = true })
p:close()

-- the writers' logs: what each item and counter must hold
local want, hits = {}, {}
for k = 1, PARTS do hits[pk_of(k)] = 0 end
local logged = 0
for w = 1, opts.writers do
  for line in io.lines(dir .. "/writer" .. w .. ".log") do
    local op, a, b, c, d = line:match("^(%a) (%S+) ?(%S*) ?(%S*) ?(%S*)$")
    logged = logged + 1
    if op == "C" then want[a] = { pk = b, v = 0 }
    elseif op == "U" then want[a].v = tonumber(b)
    elseif op == "I" then hits[a] = hits[a] + 1
    elseif op == "D" then want[a] = nil
    elseif op == "B" then
      hits[a] = hits[a] + 1
      for _, id in ipairs({ b, c, d }) do want[id] = { pk = a, v = 0 } end
    elseif op == "P" then
      hits[a] = hits[a] + 1
      want[b] = { pk = a, v = 0 }
    else error("bad log line " .. line) end
  end
end

local ok, report = db:verify()
assert(ok, report)

local items = 0
for row in src:query_rows("SELECT * FROM c") do
  if row.id == "counter" then
    assert(row.hits == hits[row.pk], ("counter %s holds %d, the writers " ..
      "logged %d increments"):format(row.pk, row.hits, hits[row.pk]))
  else
    local w = want[row.id]
    assert(w, "item " .. row.id .. " should not exist")
    assert(w.pk == row.pk and w.v == row.v, "item " .. row.id .. " holds v = " ..
      tostring(row.v) .. ", its writer last wrote " .. tostring(w.v))
    items = items + 1
  end
end
local expected = 0
for _ in pairs(want) do expected = expected + 1 end
assert(items == expected, ("src holds %d items, the logs say %d"):format(items,
  expected))

local copied = 0
for row in copy:query_rows("SELECT * FROM c") do
  local s = assert(src:read(row.id, row.pk), "copy holds " .. row.id ..
    ", which src does not")
  assert(s.v == row.v and s.hits == row.hits, "copy of " .. row.id .. " differs")
  copied = copied + 1
end
assert(copied == items + PARTS, ("copy holds %d items, src %d"):format(copied,
  items + PARTS))

local changes, token = 0, nil
repeat
  local page, info = assert(src:changes{ mode = "all_versions",
    max_items = 1000, continuation = token })
  changes = changes + #page
  token = info.continuation
until #page == 0
local counted = 0
for row in tally:query_rows("SELECT VALUE c.n FROM c") do counted = counted + row end
assert(counted == changes, ("the mirror counted %d changes, the feed holds %d")
  :format(counted, changes))

db:close()
print(("hammer: %d s, sync %s, %d writers (%s calls), %d readers (%s " ..
       "reads), %d processors (%s changes, %d more caught up at the end)")
  :format(opts.seconds, opts.sync, opts.writers, each["writer ops"] or "0",
  opts.readers, each["reader reads"] or "0", opts.processors,
  each["processor delivered"] or "0", caught))
print(("hammer: %d items, %d counter increments, %d feed changes mirrored " ..
       "exactly once"):format(items, (function()
  local t = 0 for _, v in pairs(hits) do t = t + v end return t end)(), changes))
if not opts.dir then os.execute("rm -rf '" .. dir .. "'") end
print("hammer: ok")
-- }}}
