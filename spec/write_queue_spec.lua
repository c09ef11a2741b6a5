-- The write queue (docs/api.md, The write queue): requests of several
-- processes run in one transaction, each in a savepoint of its own, and
-- each process gets what it would have got alone; a failing member, a
-- procedure that raises, a waiting process killed and a leader killed in
-- the middle of its batch lose nothing acknowledged and block no one, and
-- the request of a process that died is not run after it.
local regolith = require "regolith"
local H = require "helper"

-- The Lua source every child starts with: it opens the database at
-- `path` and makes its queue, prints "ready", and waits for the file
-- path .. "/go" (opening takes the writer lock, which the specs hold while
-- the children queue), then prints "calling".
local function prelude(path, opts)
  return string.format([[
local regolith = require "regolith"
io.stdout:setvbuf("line")
local db = assert(regolith.open(%q, %s))
local c = assert(db:container("c"))
local q = db:write_queue()
local function show(v, msg, status)
  if v then print("ok " .. (type(v) == "table" and tostring(v.id) or tostring(v)))
  else print("fail " .. tostring(status) .. " " .. tostring(msg)) end
end
print("ready")
for _ = 1, 3000 do if io.open(%q) then break end os.execute("sleep 0.01") end
print("calling")
]], path, opts or "nil", path .. "/go")
end

local function go(path)
  assert(io.open(path .. "/go", "w")):close()
end

local spawn, expect, finish, waiting = H.spawn, H.expect, H.finish, H.queue_waiting

local function sleep(s) os.execute("sleep " .. s) end

-- Returns once process pid has ended (a zombie or gone), after kill -9.
local function ended(pid)
  for _ = 1, 6000 do
    local f = io.open("/proc/" .. pid .. "/stat")
    if not f then return end
    local st = f:read("a"):match("%) (%a)")
    f:close()
    if st == "Z" or st == "X" then return end
    sleep(0.01)
  end
  error("process " .. pid .. " did not end")
end

describe("write queue", function()
local db, c, q, path
before_each(function()
  db, path = H.open()
  c = assert(db:create_container("c", { partition_key = "/pk" }))
  q = db:write_queue()
end)
after_each(function()
  db:close()
  H.cleanup()
end)

it("returns what each container method returns alone", function()
  local d, info = assert(q:create(c, { id = "a", pk = "p", n = 1 }))
  assert.are.equal("a", d.id)
  assert.are.equal(201, info.status)
  assert.is_true(info.charge > 0)
  assert.are.equal(d._etag, info.etag)
  H.fails(409, q:create(c, { id = "a", pk = "p" }))
  d = assert(q:upsert("c", { id = "b", pk = "p", list = {}, none = regolith.null }))
  assert.are.same({}, d.list)
  assert.are.equal(regolith.null, d.none)
  d = assert(q:patch(c, "a", "p", { { op = "incr", path = "/n", value = 5 } }))
  assert.are.equal(6, d.n)
  H.fails(412, q:replace(c, { id = "a", pk = "p" }, { if_match = "\"no\"" }))
  assert(q:replace(c, { id = "a", pk = "p", n = 7 }, { if_match = d._etag }))
  assert.is_true(q:delete(c, "b", "p"))
  H.fails(404, q:delete(c, "b", "p"))
  local res = assert(q:batch(c, "p", { { op = "create", doc = { id = "x", pk = "p" } },
                                       { op = "read", id = "a" } }))
  assert.are.equal(2, #res)
  assert.are.equal(7, res[2].doc.n)
  assert(c:create_procedure("add", [[
return function(ctx, id, n)
  assert(ctx:create({ id = id, pk = ctx.partition_key, n = n }))
  return { made = id, n = n }
end]]))
  local r, xinfo = assert(q:execute(c, "add", "p", "y", 3))
  assert.are.same({ made = "y", n = 3 }, r)
  assert.are.equal(200, xinfo.status)
  H.fails(404, q:create("nosuch", { id = "z", pk = "p" }))
  assert.has_error(function() q:create(c, { id = "o", pk = "p" }, { nope = 1 }) end,
                   "create: unknown option 'nope'")
  assert.has_error(function() q:create(42, {}) end)
  assert.are.equal(7, c:read("a", "p").n)
  assert(c:read("y", "p"))
  local st = db:stats().queue
  assert.is_true(st.batches >= 10 and st.members >= st.batches)
  assert(db:verify())
end)

-- Two values alike to the last byte: strings, numbers and their kind
-- (integer or float), booleans, null, and tables with their shape marker.
local function alike(a, b, at)
  at = at or ""
  assert(type(a) == type(b), "type differs at " .. at)
  if type(a) == "number" then
    assert(a == b and H.integer(a) == H.integer(b) and
           (a ~= 0 or 1 / a == 1 / b), "number differs at " .. at)
  elseif type(a) ~= "table" then
    assert(a == b, "value differs at " .. at)
  else
    assert(getmetatable(a) == getmetatable(b), "shape differs at " .. at)
    for k, v in pairs(a) do alike(v, b[k], at .. "/" .. tostring(k)) end
    for k in pairs(b) do assert(a[k] ~= nil, "extra key at " .. at .. "/" .. k) end
  end
end

it("gives back the document and information a call gets alone, value for value", function()
  local c2 = assert(db:create_container("c2", { partition_key = "/pk" }))
  local t = assert(db:create_container("t", { partition_key = "/pk", throughput = 400 }))
  local function doc(id)
    return { id = id, pk = "p", int = 42, big = 9007199254740993, neg = -7,
      float = 0.1, tiny = 5e-324, huge = 1.5e300, whole = 3.0, zero = -0.0,
      nul = "a\0b", uni = H.utf8_char(0xE9, 0x1F600), esc = "\"q\"\n\t\\/",
      list = {}, obj = regolith.object(), null = regolith.null,
      nested = { { 1, 2.5, "x" }, { k = { true, false } } } }
  end
  local function strip(d)
    local o = {}
    for k, v in pairs(d) do if not k:match("^_") then o[k] = v end end
    return o
  end
  for i, cont in ipairs({ c, t }) do
    local id = "d" .. i
    local qd, qinfo = assert(q:create(cont, doc(id)))
    local dd, dinfo = assert(c2:create(doc(id)))
    alike(strip(dd), strip(qd))
    alike(assert(cont:read(id, "p")), qd)
    assert.are.equal(dinfo.status, qinfo.status)
    assert.are.equal(dinfo.charge, qinfo.charge)
    assert.are.equal(qd._etag, qinfo.etag)
    local up = doc(id)
    up.n = 1
    qd, qinfo = assert(q:upsert(cont, up))
    alike(assert(cont:read(id, "p")), qd)
    assert.are.equal(200, qinfo.status)
    qd = assert(q:replace(cont, doc(id), { if_match = qd._etag }))
    alike(assert(cont:read(id, "p")), qd)
    qd = assert(q:patch(cont, id, "p", { { op = "set", path = "/s", value = "a\0" } }))
    alike(assert(cont:read(id, "p")), qd)
    -- what fails alone fails alike, message and status
    local _, qmsg, qst = q:create(cont, doc(id))
    local _, dmsg, dst = c2:create(doc(id))
    assert.are.equal(409, qst)
    assert.are.equal(dst, qst)
    assert.are.equal(dmsg, qmsg)
    _, qmsg, qst = q:create(cont, { id = 5, pk = "p" })
    _, dmsg, dst = c2:create({ id = 5, pk = "p" })
    assert.are.equal(400, qst)
    assert.are.equal(dmsg, qmsg)
    _, qmsg, qst = q:create(cont, { id = "w", pk = "q" }, { partition_key = "p" })
    _, dmsg, dst = c2:create({ id = "w", pk = "q" }, { partition_key = "p" })
    assert.are.equal(400, qst)
    assert.are.equal(dmsg, qmsg)
    _, qmsg, qst = q:create(cont, "not a table")
    _, dmsg, dst = c2:create("not a table")
    assert.are.equal(400, qst)
    assert.are.equal(dmsg, qmsg)
  end
  assert.is_true(db:stats().queue.members >= 12)
  assert(db:verify())
end)

it("takes requests and hands over results in an earlier build's form", function()
  -- a request without `t` (an earlier build's process) gets its result as
  -- JSON of the values ("R"), the form that build reads
  local json = regolith.json
  local res = assert(db:_queue(assert(json.encode({ c = "c", m = "create", n = 1,
    a = { ["1"] = { id = "old", pk = "p", n = 1.5 } } })), q.exec))
  assert.are.equal("R", res:sub(1, 1))
  local r = json.decode(res:sub(2))
  assert.are.equal(2, r.n)
  assert.are.equal("old", r.v["1"].id)
  assert.are.equal(1.5, r.v["1"].n)
  assert.are.equal(201, r.v["2"].status)
  -- a leader of an earlier build answers a request of this one ("R"):
  -- its process reads it
  local fake = setmetatable({ db = setmetatable({ _queue = function(_, text)
    local t = json.decode(text)
    assert.is_true(t.t)
    local d, info = c:create(t.a["1"])
    return "R" .. json.encode({ n = 2, v = { ["1"] = d, ["2"] = info } })
  end }, { __index = db }) }, getmetatable(q))
  local d, info = assert(fake:create(c, { id = "new", pk = "p" }))
  assert.are.equal("new", d.id)
  assert.are.equal(201, info.status)
  alike(assert(c:read("new", "p")), d)
end)

it("writes directly what the queue cannot carry", function()
  -- arguments JSON cannot hold: the direct call gives its own 400
  H.fails(400, q:create(c, { id = "f", pk = "p", f = 0 / 0 }))
  -- a document larger than a slot: written directly, in full
  local big = string.rep("x", 40000)
  local d = assert(q:create(c, { id = "big", pk = "p", s = big, n = 0 }))
  assert.are.equal(big, d.s)
  -- a small request whose result would not fit its slot: the leader
  -- undoes it, and it runs directly, once
  local before = db:stats().queue.batches
  d = assert(q:patch(c, "big", "p", { { op = "incr", path = "/n", value = 1 } }))
  assert.are.equal(1, d.n)
  assert.are.equal(1, c:read("big", "p").n)
  assert.are.equal(before + 1, db:stats().queue.batches)
  -- inside a transaction the call joins it
  local res = assert(db:group({ function() return q:create(c, { id = "in", pk = "p" }) end }))
  assert.is_true(res[1][1])
  assert.are.equal("in", res[1][2].id)
  assert(c:read("in", "p"))
end)

it("runs the requests of several processes in one transaction, each alone", function()
  assert(c:create({ id = "taken", pk = "p", v = "first" }))
  assert(c:create_procedure("raises", [[
return function(ctx, id)
  assert(ctx:create({ id = id, pk = ctx.partition_key }))
  error("raised after writing " .. id)
end]]))
  local kids = {}
  local requests = {
    'show(q:create(c, { id = "k1", pk = "p" }))',
    'show(q:create(c, { id = "k2", pk = "q" }))',
    'show(q:create(c, { id = "taken", pk = "p", v = "second" }))',
    'show(q:execute(c, "raises", "p", "undone"))',
    'show(q:upsert(c, { id = "k3", pk = "p" }))',
  }
  for i, r in ipairs(requests) do
    kids[i] = spawn(prelude(path) .. r .. "\n")
    expect(kids[i], "^ready")
  end
  -- this process holds the writer lock while the children queue, so that
  -- their requests wait for the same leader
  assert(db:group({ function()
    go(path)
    waiting(db, #kids)
  end }))
  local outs = {}
  for i, k in ipairs(kids) do outs[i] = finish(k) end
  assert.is_truthy(outs[1]:find("ok k1", 1, true), outs[1])
  assert.is_truthy(outs[2]:find("ok k2", 1, true), outs[2])
  assert.is_truthy(outs[3]:find("fail 409", 1, true), outs[3])
  assert.is_truthy(outs[4]:find("fail 400 .*raised after writing undone"), outs[4])
  assert.is_truthy(outs[5]:find("ok k3", 1, true), outs[5])
  assert.are.equal("first", c:read("taken", "p").v)
  H.fails(404, c:read("undone", "p"))
  -- the writers that succeeded were one transaction
  local lsn = c:read("k1", "p")._lsn
  assert.are.equal(lsn, c:read("k2", "q")._lsn)
  assert.are.equal(lsn, c:read("k3", "p")._lsn)
  assert(db:verify())
end)

it("traces where a request's time goes when REGOLITH_QUEUE_TRACE names a file", function()
  local trace = path .. "/trace"
  local kids = {}
  for i = 1, 3 do
    kids[i] = spawn(prelude(path) .. ('show(q:create(c, { id = "t%d", pk = "p" }))\n'):format(i),
                    "REGOLITH_QUEUE_TRACE=" .. trace)
    expect(kids[i], "^ready")
  end
  -- the three queue behind the writer lock this process holds, so that
  -- one of them leads a batch of all three
  assert(db:group({ function()
    go(path)
    waiting(db, 3)
  end }))
  for i = 1, 3 do
    assert.is_truthy(finish(kids[i]):find("ok t" .. i, 1, true))
  end
  local requests, led, members = 0, 0, 0
  for line in io.lines(trace) do
    local v = {}
    for x in line:gmatch("%d+") do v[#v + 1] = tonumber(x) end
    if line:match("^r ") then
      -- queued -> claimed -> committed -> durable -> seen: the whole
      assert.are.equal(6, #v, line)
      assert.are.equal(v[5], v[1] + v[2] + v[3] + v[4], line)
      requests, led = requests + 1, led + v[6]
    else
      assert.is_truthy(line:match("^b %d+ %d+ %d+ %d+$"), line)
      members = members + v[1]
    end
  end
  assert.are.equal(3, requests)
  assert.are.equal(1, led)
  assert.are.equal(3, members)
  -- this process, without the variable, traced nothing
  assert(q:create(c, { id = "untraced", pk = "p" }))
  local n = 0
  for _ in io.lines(trace) do n = n + 1 end
  assert.are.equal(4, n)
end)

it("keeps every traced line whole while several processes append to the file", function()
  -- more than a buffer's worth (64 KiB) of lines from each process, at
  -- once: a line cut between two writes of its process, with another's
  -- between them, would come out broken
  local trace, kids, n = path .. "/trace", {}, 2500
  for i = 1, 3 do
    kids[i] = spawn(prelude(path, '{ sync = "none" }') ..
      ('for j = 1, %d do assert(q:create(c, { id = "t%d-" .. j, pk = "p" })) end\nprint("wrote")\n')
        :format(n, i), "REGOLITH_QUEUE_TRACE=" .. trace)
    expect(kids[i], "^ready")
  end
  go(path)
  for i = 1, 3 do assert.is_truthy(finish(kids[i]):find("wrote", 1, true)) end
  local requests, members = 0, 0
  for line in io.lines(trace) do
    if line:match("^r ") then
      assert.is_truthy(line:match("^r %d+ %d+ %d+ %d+ %d+ [01]$"), line)
      requests = requests + 1
    else
      assert.is_truthy(line:match("^b %d+ %d+ %d+ %d+$"), line)
      members = members + tonumber(line:match("^b (%d+)"))
    end
  end
  assert.are.equal(3 * n, requests)
  assert.are.equal(3 * n, members)
end)

it("keeps its own file when another layout's is left by a build still running", function()
  -- regolith.queue as the build before this layout leaves it while its
  -- processes still run (an upgrade without a reboot): stamped with this
  -- boot, layout 1
  db:close()
  local f = assert(io.open("/proc/sys/kernel/random/boot_id", "rb"))
  local boot = f:read(39)
  f:close()
  -- magic (u64 0x3155455551475247, little-endian), layout 1, 64 slots
  local head = "GRGQUEU1" .. "\1\0\0\0" .. "\64\0\0\0" .. boot ..
               ("\0"):rep(40 - #boot)
  local old = head .. ("\0"):rep(4 * 2 ^ 20 - #head)
  f = assert(io.open(path .. "/regolith.queue", "wb"))
  f:write(old)
  f:close()
  db = assert(regolith.open(path))
  c = assert(db:container("c"))
  q = db:write_queue()
  -- this build's queue serves this process and another
  local before = db:stats().queue.batches
  assert(q:create(c, { id = "new", pk = "p" }))
  assert.are.equal(before + 1, db:stats().queue.batches)
  local k = spawn(prelude(path) .. 'show(q:create(c, { id = "other", pk = "p" }))\n')
  expect(k, "^ready")
  go(path)
  assert.is_truthy(finish(k):find("ok other", 1, true))
  assert.are.equal(before + 2, db:stats().queue.batches)
  -- and the other build's file is left as it was, for its processes
  f = assert(io.open(path .. "/regolith.queue", "rb"))
  assert.is_true(f:read("a") == old)
  f:close()
  assert(db:verify())
end)

it("goes on when a waiting process is killed", function()
  local kids = {}
  for i = 1, 3 do
    kids[i] = spawn(prelude(path) .. ('show(q:create(c, { id = "w%d", pk = "p" }))\n'):format(i))
    expect(kids[i], "^ready")
  end
  assert(db:group({ function()
    go(path)
    waiting(db, 3)
    os.execute("kill -9 " .. kids[2].pid)
    ended(kids[2].pid)
  end }))
  finish(kids[2])
  assert.is_truthy(finish(kids[1]):find("ok w1", 1, true))
  assert.is_truthy(finish(kids[3]):find("ok w3", 1, true))
  assert(c:read("w1", "p"))
  assert(c:read("w3", "p"))
  -- no one waited for the killed process's request any more: not run
  H.fails(404, c:read("w2", "p"))
  -- the queue serves this process, and another, afterwards
  assert(q:create(c, { id = "after", pk = "p" }))
  local k = spawn(prelude(path) .. 'show(q:create(c, { id = "later", pk = "p" }))\n')
  expect(k, "^ready")
  assert.is_truthy(finish(k):find("ok later", 1, true))
  assert(db:verify())
end)

it("goes on when the leader is killed in the middle of its batch", function()
  assert(c:create_procedure("spin", [[
return function(ctx, id)
  assert(ctx:create({ id = id, pk = ctx.partition_key }))
  while true do end
end]]))
  -- the leader: its own request spins (until its budget ends it) with the
  -- transaction open; the others queue behind it; it is killed
  local leader = spawn(prelude(path, "{ script_budget = 100000000 }") ..
    'show(q:execute(c, "spin", "p", "spun"))\nprint("finished")\n')
  local kids = {}
  for i = 1, 3 do
    kids[i] = spawn(prelude(path, "{ script_budget = 10000000 }") ..
      ('for _ = 1, 3000 do if io.open(%q) then break end os.execute("sleep 0.01") end\n'):format(path .. "/go2") ..
      ('show(q:create(c, { id = "v%d", pk = "p" }))\n'):format(i))
    expect(kids[i], "^ready")
  end
  expect(leader, "^ready")
  go(path)
  waiting(db, 1)                     -- the leader's own, first
  assert(io.open(path .. "/go2", "w")):close()
  waiting(db, 4)
  os.execute("kill -9 " .. leader.pid)
  local out = finish(leader)
  assert.is_falsy(out:find("finished", 1, true), "the leader ended before it was killed: " .. out)
  for i = 1, 3 do
    local o = finish(kids[i])
    assert.is_truthy(o:find("ok v" .. i, 1, true), o)
    assert(c:read("v" .. i, "p"))
  end
  -- the dead leader's own request was not committed, and is not run again
  H.fails(404, c:read("spun", "p"))
  assert(q:create(c, { id = "after", pk = "p" }))
  assert(db:verify())
end)
end)
