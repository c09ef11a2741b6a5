local regolith = require "regolith"
local H = require "helper"

local function sleep(s) os.execute("sleep " .. s) end

describe("processors", function()
  local db, path, src, dst
  before_each(function()
    db, path = H.open()
    src = assert(db:create_container("src", {
      partition_key = "/pk", physical_partitions = 4,
      change_feed = { all_versions = true } }))
    dst = assert(db:create_container("dst", { partition_key = "/pk",
      change_feed = { all_versions = true } }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("delivers every change once, in write order per logical partition",
    function()
      for round = 1, 4 do
        for p = 1, 5 do
          assert(src:upsert({ id = "i" .. round, pk = "p" .. p, n = round }))
        end
      end
      local seen = {}
      local p = assert(db:processor({ name = "order", source = "src",
        mode = "all_versions", max_items = 3,
        handler = function(changes, info)
          assert.is_true(#changes <= 3)
          assert.is_number(info.feed_range)
          assert.are.equal(1, info.attempt)
          for _, ch in ipairs(changes) do
            local pk = ch.metadata.partition_key
            seen[pk] = seen[pk] or {}
            table.insert(seen[pk], ch.current.n)
          end
        end }))
      assert.are.equal(20, p:run({ until_idle = true }))
      for i = 1, 5 do assert.are.same({ 1, 2, 3, 4 }, seen["p" .. i]) end
      assert.are.equal(0, p:run_once())
      assert.are.equal(0, (p:lag()))
      p:close()
    end)

  it("copies new items into another container, the copy in the handler's "
    .. "transaction", function()
      local p = assert(db:processor({ name = "copy", source = "src",
        handler = function(changes)
          for _, doc in ipairs(changes) do
            assert(dst:upsert({ id = doc.id, pk = "all", n = doc.n }))
          end
        end }))
      for i = 1, 30 do assert(src:create({ id = "i" .. i, pk = "p" .. i, n = i })) end
      p:run({ until_idle = true })
      for i = 1, 30 do
        local doc = assert(dst:read("i" .. i, "all"))
        assert.are.equal(i, doc.n)
      end
      assert(src:replace({ id = "i3", pk = "p3", n = 333 }))
      p:run({ until_idle = true })
      assert.are.equal(333, assert(dst:read("i3", "all")).n)
    end)

  it("redelivers a batch after a handler error: 0,1,2,2,3,...", function()
    for _, transactional in ipairs({ true, false }) do
      local c = assert(db:create_container("seq" .. tostring(transactional),
        { partition_key = "/pk" }))
      for i = 0, 5 do assert(c:create({ id = "i" .. i, pk = "x", n = i })) end
      local seen, failed, errors = {}, false, {}
      local p = assert(db:processor({ name = "redeliver", source = c:name(),
        max_items = 1, transactional = transactional,
        on_error = function(err, changes, info)
          errors[#errors + 1] = { err = err, n = changes[1].n,
            attempt = info.attempt }
        end,
        handler = function(changes, info)
          seen[#seen + 1] = changes[1].n
          if changes[1].n == 2 and not failed then
            failed = true
            error("fails once at 2")
          end
          if changes[1].n == 2 then assert.are.equal(2, info.attempt) end
        end }))
      p:run({ until_idle = true })
      assert.are.same({ 0, 1, 2, 2, 3, 4, 5 }, seen)
      assert.are.equal(1, #errors)
      assert.matches("fails once at 2", errors[1].err)
      assert.are.equal(2, errors[1].n)
      assert.are.equal(1, errors[1].attempt)
      assert.are.equal(0, #p:dead_letters())
      local st = p:status()
      assert.are.equal(1, st.ranges[1].failures)
      assert.are.equal(0, st.ranges[1].attempts)
      p:close()
    end
  end)

  it("sends a batch to the dead letters after max_attempts and moves on",
    function()
      for i = 1, 6 do assert(src:create({ id = "i" .. i, pk = "x", n = i })) end
      local attempts, calls, done, range = {}, 0, {}, nil
      local p = assert(db:processor({ name = "poison", source = "src",
        max_items = 2, max_attempts = 3,
        on_error = function(err, changes, info)
          attempts[#attempts + 1] = info.attempt
          range = info.feed_range
          if info.attempt == 3 then assert.is_true(info.dead_lettered) end
        end,
        handler = function(changes)
          calls = calls + 1
          for _, doc in ipairs(changes) do
            if doc.n == 3 then error({ code = "poison" }) end
          end
          for _, doc in ipairs(changes) do done[#done + 1] = doc.n end
        end }))
      p:run({ until_idle = true })
      assert.are.same({ 1, 2, 3 }, attempts)
      assert.are.same({ 1, 2, 5, 6 }, done)
      assert.are.equal(5, calls)
      local dead = p:dead_letters()
      assert.are.equal(1, #dead)
      assert.are.equal(3, dead[1].attempts)
      assert.are.equal(range, dead[1].range)
      assert.is_string(dead[1].error)
      assert.are.equal(2, #dead[1].changes)
      assert.are.same({ 3, 4 }, { dead[1].changes[1].n, dead[1].changes[2].n })
      assert.are.equal(0, (p:lag()))
      assert.are.equal(1, p:clear_dead_letters())
      assert.are.equal(0, #p:dead_letters())
    end)

  it("drops one dead letter by its sequence number, and lists processors with their modes", function()
    for i = 1, 4 do assert(src:create({ id = "i" .. i, pk = "x", n = i })) end
    local p = assert(db:processor({ name = "bad", source = "src", max_items = 1,
      max_attempts = 1, on_error = function() end,
      handler = function(changes)
        if changes[1].n % 2 == 0 then error("even") end
      end }))
    p:run({ until_idle = true })
    local dead = p:dead_letters()
    assert.are.equal(2, #dead)
    assert.is_true(dead[1].seq < dead[2].seq)
    assert.are.same({ 2, 4 }, { dead[1].changes[1].n, dead[2].changes[1].n })
    assert.is_true(p:drop_dead_letter(dead[1].seq))
    H.fails(404, p:drop_dead_letter(dead[1].seq))
    dead = p:dead_letters()
    assert.are.equal(1, #dead)
    assert.are.equal(4, dead[1].changes[1].n)
    local q = assert(db:processor({ name = "all", source = "src", mode = "all_versions",
      handler = function() end }))
    assert.are.same({ { name = "all", mode = "all_versions" },
                      { name = "bad", mode = "latest" } }, src:processors())
    assert.are.equal("latest", p:status().ranges[1].mode)
    assert.are.equal("all_versions", q:status().ranges[1].mode)
    assert(q:delete())
    assert.are.same({ { name = "bad", mode = "latest" } }, src:processors())
    assert.are.same({}, (assert(db:create_container("empty", { partition_key = "/pk" }))):processors())
  end)

  it("keeps all_versions dead letters in the shape the handler saw", function()
    assert(src:create({ id = "a", pk = "x", n = 1 }))
    assert(src:delete("a", "x"))
    local got
    local p = assert(db:processor({ name = "avdead", source = "src",
      mode = "all_versions", max_attempts = 1,
      handler = function(changes)
        got = changes
        error("no")
      end }))
    p:run({ until_idle = true })
    local dead = p:dead_letters()
    assert.are.equal(1, #dead)
    assert.are.same(got, dead[1].changes)
    assert.are.equal("delete", dead[1].changes[2].metadata.operation)
    assert.are.equal(1, dead[1].changes[2].previous.n)
  end)

  it("makes a transactional handler's writes exactly once when it fails "
    .. "halfway", function()
      for i = 1, 10 do assert(src:create({ id = "i" .. i, pk = "x", n = i })) end
      assert(dst:create({ id = "count", pk = "all", n = 0 }))
      local attempts = 0
      local p = assert(db:processor({ name = "once", source = "src",
        max_items = 10,
        handler = function(changes)
          attempts = attempts + 1
          for k, doc in ipairs(changes) do
            assert(dst:create({ id = doc.id, pk = "all", n = doc.n }))
            assert(dst:patch("count", "all",
              { { op = "incr", path = "/n", value = 1 } }))
            if attempts == 1 and k == 5 then error("halfway") end
          end
        end }))
      p:run({ until_idle = true })
      assert.are.equal(2, attempts)
      assert.are.equal(10, assert(dst:read("count", "all")).n)
      for i = 1, 10 do assert(dst:read("i" .. i, "all")) end
      local all = assert(dst:changes({ mode = "all_versions" }))
      assert.are.equal(21, #all)              -- count, 10 copies, 10 patches
    end)

  it("does not let a transactional handler yield", function()
    assert(src:create({ id = "a", pk = "x" }))
    local err
    local p = assert(db:processor({ name = "yielder", source = "src",
      max_attempts = 1,
      on_error = function(e) err = e end,
      handler = function()
        assert(dst:create({ id = "leak", pk = "all" }))
        coroutine.yield()
      end }))
    p:run({ until_idle = true })
    assert.matches("cannot yield", err)
    H.fails(404, dst:read("leak", "all"))
    assert.are.equal(1, #p:dead_letters())
  end)

  it("lets a handler outside a transaction yield, and checkpoints after it",
    function()
      assert(src:create({ id = "a", pk = "x" }))
      local got = {}
      local p = assert(db:processor({ name = "yields", source = "src",
        transactional = false,
        handler = function(changes)
          local more = coroutine.yield("waiting")
          got[#got + 1] = changes[1].id .. more
        end }))
      local co = coroutine.create(function() return p:run_once() end)
      local ok, what = coroutine.resume(co)
      assert.is_true(ok)
      assert.are.equal("waiting", what)
      assert.are.equal(1, (p:lag()))
      local ok2, n = coroutine.resume(co, "!")
      assert.is_true(ok2)
      assert.are.equal(1, n)
      assert.are.same({ "a!" }, got)
      assert.are.equal(0, (p:lag()))
    end)

  it("honours start only the first time the name is seen", function()
    assert(src:create({ id = "before", pk = "x" }))
    local seen = {}
    local function open(start)
      return assert(db:processor({ name = "late", source = "src",
        start = start, instance = "one",
        handler = function(changes)
          for _, d in ipairs(changes) do seen[#seen + 1] = d.id end
        end }))
    end
    local p = open("now")
    p:run({ until_idle = true })
    assert.are.same({}, seen)
    assert(src:create({ id = "during", pk = "x" }))
    p:run({ until_idle = true })
    p:close()
    assert(src:create({ id = "after", pk = "x" }))
    p = open("beginning")
    p:run({ until_idle = true })
    assert.are.same({ "during", "after" }, seen)
    local q = assert(db:processor({ name = "fresh", source = "src",
      handler = function(changes)
        for _, d in ipairs(changes) do seen[#seen + 1] = d.id end
      end }))
    seen = {}
    q:run({ until_idle = true })
    table.sort(seen)
    assert.are.same({ "after", "before", "during" }, seen)
  end)

  it("starts from a time", function()
    local old = assert(src:create({ id = "old", pk = "x" }))
    local seen = {}
    local p = assert(db:processor({ name = "timed", source = "src",
      start = old._ts + 3600,
      handler = function(changes)
        for _, d in ipairs(changes) do seen[#seen + 1] = d.id end
      end }))
    assert(src:create({ id = "new", pk = "x" }))
    p:run({ until_idle = true })
    assert.are.same({ "new" }, seen)
  end)

  it("reports lag and status per feed range", function()
    for i = 1, 20 do assert(src:create({ id = "i" .. i, pk = "p" .. i })) end
    local p = assert(db:processor({ name = "watch", source = "src",
      instance = "me", handler = function() end }))
    local total, per = p:lag()
    assert.are.equal(20, total)
    local sum = 0
    for r = 1, 4 do sum = sum + per[r] end
    assert.are.equal(20, sum)
    local st = p:status()
    assert.are.equal("watch", st.name)
    assert.are.equal("me", st.instance)
    assert.are.equal(4, #st.ranges)
    p:run_once()
    st = p:status()
    for r, range in ipairs(st.ranges) do
      assert.are.equal(r, range.range)
      assert.are.equal("me", range.owner)
      assert.are.equal(0, range.lag)
      assert.are.equal(0, range.failures)
      assert.is_true(range.expires > 0)
      -- the checkpoint is a continuation of that feed range
      local page = assert(src:changes({ continuation = range.continuation,
        feed_range = r }))
      assert.are.equal(0, #page)
    end
    assert(src:create({ id = "late", pk = "p1" }))
    assert.are.equal(1, (p:lag()))
  end)

  it("gives its leases back on close, for another instance to take at once",
    function()
      for i = 1, 8 do assert(src:create({ id = "i" .. i, pk = "p" .. i })) end
      local by = {}
      local function open(inst)
        return assert(db:processor({ name = "shared", source = "src",
          instance = inst, max_items = 1,
          handler = function(changes)
            by[changes[1].id] = inst
          end }))
      end
      local a = open("a")
      assert.are.equal(4, a:run_once())
      a:close()
      local b = open("b")
      b:run({ until_idle = true })
      local count = { a = 0, b = 0 }
      for _, inst in pairs(by) do count[inst] = count[inst] + 1 end
      assert.are.same({ a = 4, b = 4 }, count)
      for _, range in ipairs(b:status().ranges) do
        assert.are.equal("b", range.owner)
      end
    end)

  it("shares the feed ranges between live instances", function()
    local function open(inst)
      return assert(db:processor({ name = "split", source = "src",
        instance = inst, lease_seconds = 1, handler = function() end }))
    end
    local a, b = open("a"), open("b")
    a:run_once()
    b:run_once()
    local deadline = os.time() + 10
    local owners
    repeat
      sleep(0.2)
      a:run_once()
      b:run_once()
      owners = { a = 0, b = 0 }
      for _, r in ipairs(a:status().ranges) do
        if r.owner then owners[r.owner] = owners[r.owner] + 1 end
      end
    until (owners.a == 2 and owners.b == 2) or os.time() > deadline
    assert.are.same({ a = 2, b = 2 }, owners)
  end)

  it("takes every range at its next renewal once the other instance, on "
    .. "another handle, closed", function()
      -- leases far longer than the spec: only the closed instance's
      -- heartbeat, deleted by its close, can say it is gone
      local other = assert(regolith.open(path))
      local function open(handle, inst)
        return assert(handle:processor({ name = "pair", source = "src",
          instance = inst, lease_seconds = 600, handler = function() end }))
      end
      local a, b = open(db, "a"), open(other, "b")
      assert.are.equal(4, #assert(a.state:maintain()))
      assert.are.equal(0, #assert(b.state:maintain()))
      assert.are.equal(2, #assert(a.state:maintain()))   -- gives two back
      assert.are.equal(2, #assert(b.state:maintain()))
      assert(a:close())
      assert.are.equal(4, #assert(b.state:maintain()))
      for _, range in ipairs(assert(b:status()).ranges) do
        assert.are.equal("b", range.owner)
      end
      b:close()
      other:close()
    end)

  it("pumps every processor of the handle with db:run_processors", function()
    local counts = { one = 0, two = 0 }
    for _, name in ipairs({ "one", "two" }) do
      assert(db:processor({ name = name, source = "src", max_items = 1,
        handler = function(changes) counts[name] = counts[name] + #changes end }))
    end
    for i = 1, 6 do assert(src:create({ id = "i" .. i, pk = "x" })) end
    assert.are.equal(2, db:run_processors())
    assert.are.equal(10, db:run_processors({ until_idle = true }))
    assert.are.same({ one = 6, two = 6 }, counts)
    assert.has_error(function() db:run_processors({ forever = true }) end)
  end)

  it("bounds a pass with max_ms: one batch, the next pass on the next range",
    function()
      for i = 1, 40 do assert(src:create({ id = "i" .. i, pk = "p" .. i })) end
      local ranges, seen = {}, {}
      local p = assert(db:processor({ name = "bounded", source = "src",
        max_items = 2, handler = function(changes, info)
          ranges[#ranges + 1] = info.feed_range
          for _, ch in ipairs(changes) do
            assert.is_nil(seen[ch.id])            -- once
            seen[ch.id] = true
          end
        end }))
      local function per_range()
        local _, lag = p:lag()
        local batches, first = 0, 0
        for _, n in pairs(lag) do
          batches = batches + math.ceil(n / 2)
          first = first + math.min(n, 2)
        end
        return batches, first
      end
      local batches = per_range()
      -- max_ms = 0: each pass stops after its first batch that delivered
      local passes, total = 0, 0
      repeat
        local n = p:run_once({ max_ms = 0 })
        assert.is_true(n <= 2)
        passes, total = passes + 1, total + n
      until n == 0
      assert.are.equal(40, total)
      assert.are.equal(batches, #ranges)
      assert.are.equal(batches + 1, passes)      -- one batch a pass
      for i = 1, 40 do assert.is_true(seen["i" .. i]) end
      -- the ranges take turns: no range gives two batches in a row while
      -- another still has changes (4 ranges, each with some)
      local left = {}
      for _, r in ipairs(ranges) do left[r] = (left[r] or 0) + 1 end
      for i = 2, #ranges do
        left[ranges[i - 1]] = left[ranges[i - 1]] - 1
        if ranges[i] == ranges[i - 1] then
          for r, n in pairs(left) do
            if r ~= ranges[i] then assert.are.equal(0, n) end
          end
        end
      end
      -- without max_ms a pass is one batch of every range
      for i = 41, 48 do assert(src:create({ id = "i" .. i, pk = "p" .. i })) end
      local _, first = per_range()
      assert.are.equal(first, p:run_once())
      assert.are.equal(8 - first, p:run({ until_idle = true, max_ms = 0 }))
      assert.has_error(function() p:run_once({ max_ms = -1 }) end)
      assert.has_error(function() p:run_once({ max_ms = "1" }) end)
      assert.has_error(function() p:run_once({ until_idle = true }) end)
      p:close()
    end)

  it("lets every processor in with run_processors{max_ms}", function()
    local order = {}
    for _, name in ipairs({ "one", "two", "three" }) do
      assert(db:processor({ name = name, source = "src", max_items = 1,
        handler = function(changes)
          order[#order + 1] = name .. #changes
        end }))
    end
    for i = 1, 3 do assert(src:create({ id = "i" .. i, pk = "x" })) end
    local total = 0
    for _ = 1, 9 do
      total = total + db:run_processors({ max_ms = 0 })
    end
    assert.are.equal(9, total)
    assert.are.same({ "one1", "two1", "three1", "one1", "two1", "three1",
      "one1", "two1", "three1" }, order)
    assert.are.equal(0, db:run_processors({ max_ms = 0, until_idle = true }))
    assert.has_error(function() db:run_processors({ max_ms = -1 }) end)
  end)

  it("is closed when its database is closed", function()
    local other = H.open()
    assert(other:create_container("c", { partition_key = "/pk" }))
    local p = assert(other:processor({ name = "p", source = "c",
      handler = function() end }))
    other:close()
    assert.has_error(function() p:run_once() end, "attempt to use a closed processor")
    assert.has_error(function() p:lag() end)
    assert.is_true(p:close())
  end)

  it("refuses a source that does not exist, and a mode that changed", function()
    H.fails(404, db:processor({ name = "x", source = "nowhere",
      handler = function() end }))
    local p = assert(db:processor({ name = "m", source = "src",
      handler = function() end }))
    p:close()
    H.fails(409, db:processor({ name = "m", source = "src",
      mode = "all_versions", handler = function() end }))
  end)

  it("raises on misuse of its options", function()
    local ok = function() end
    local function bad(opts)
      assert.has_error(function() db:processor(opts) end)
    end
    bad({ name = "x", source = "src" })
    bad({ source = "src", handler = ok })
    bad({ name = "x", source = "src", handler = ok, bogus = 1 })
    bad({ name = "x", source = "src", handler = ok, mode = "sometimes" })
    bad({ name = "x", source = "src", handler = ok, start = "later" })
    bad({ name = "x", source = "src", handler = ok, max_items = 0 })
    bad({ name = "x", source = "src", handler = ok, lease_seconds = 0.5 })
    bad({ name = "x", source = "src", handler = ok, transactional = "yes" })
    bad({ name = "x", source = "src", handler = ok, max_attempts = -1 })
    bad({ name = "x", source = "src", handler = ok, on_error = "log" })
    bad({ name = "x", source = 42, handler = ok })
    bad({ name = "a/b", source = "src", handler = ok })
    bad({ name = "x", source = "src", handler = ok, instance = "" })
    local p = assert(db:processor({ name = "x", source = "src", handler = ok }))
    assert.has_error(function() p:run({ ["until"] = 3 }) end)
    assert.has_error(function() p:run({ timeout = -1 }) end)
  end)

  it("raises a misuse of its options at the caller's line, naming the method",
    function()
      local p = assert(db:processor({ name = "x", source = "src",
        handler = function() end }))
      local function raises(what, f)
        local line = debug.getinfo(f, "S").linedefined
        local ok, err = pcall(f)
        assert.is_false(ok)
        assert.matches("processor_spec%.lua:" .. line .. ": " .. what, err)
      end
      raises("run_once: option 'max_ms' must be a number of milliseconds",
        function() p:run_once({ max_ms = -1 }) end)
      raises("run_once: unknown option 'wait'",
        function() p:run_once({ wait = 1 }) end)
      raises("run: option 'max_ms' must be a number of milliseconds",
        function() p:run({ max_ms = -1, until_idle = true }) end)
      raises("run: option 'timeout' must be a number of seconds",
        function() p:run({ timeout = -1 }) end)
      raises("run_processors: option 'max_ms' must be a number of milliseconds",
        function() db:run_processors({ max_ms = -1 }) end)
      raises("run_processors: option 'timeout' must be a number of seconds",
        function() db:run_processors({ timeout = -1 }) end)
      raises("processor: option 'max_items' must be an integer",
        function() db:processor({ name = "y", source = "src", max_items = 0,
          handler = function() end }) end)
    end)

  it("cannot run inside a transaction", function()
    assert(src:create({ id = "a", pk = "x" }))
    local inner = assert(db:processor({ name = "inner", source = "dst",
      handler = function() end }))
    local err
    local p = assert(db:processor({ name = "outer", source = "src",
      max_attempts = 1,
      on_error = function(e) err = e end,
      handler = function() inner:run_once() end }))
    p:run({ until_idle = true })
    assert.matches("cannot run inside a transaction", err)
  end)

  it("closes at the end of the pass when its handler closes it", function()
    for _, transactional in ipairs({ true, false }) do
      local c = assert(db:create_container("c" .. tostring(transactional),
        { partition_key = "/pk" }))
      for i = 1, 5 do assert(c:create({ id = "i" .. i, pk = "x" })) end
      local p
      p = assert(db:processor({ name = "stopper", source = c:name(),
        max_items = 2, transactional = transactional,
        handler = function() p:close() end }))
      assert.are.equal(2, p:run())
      assert.has_error(function() p:run_once() end,
        "attempt to use a closed processor")
      local again = assert(db:processor({ name = "stopper",
        source = c:name(), handler = function() end }))
      assert.are.equal(3, (again:lag()))
      again:close()
    end
  end)

  it("forgets its checkpoints and dead letters when deleted", function()
    for i = 1, 3 do assert(src:create({ id = "i" .. i, pk = "x", n = i })) end
    local seen = 0
    local function open()
      return assert(db:processor({ name = "gone", source = "src",
        max_attempts = 1, max_items = 1,
        handler = function(changes)
          seen = seen + 1
          if changes[1].n == 2 then error("no") end
        end }))
    end
    local p = open()
    p:run({ until_idle = true })
    assert.are.equal(3, seen)
    assert.are.equal(1, #p:dead_letters())
    assert.is_true(p:delete())
    assert.has_error(function() p:run_once() end)
    local q = open()
    assert.are.equal(0, #q:dead_letters())
    assert.are.equal(3, (q:lag()))
    q:run({ until_idle = true })
    assert.are.equal(6, seen)
    assert.is_true(q:delete())
    local r, t = open(), open()
    assert.is_true(t:delete())
    H.fails(404, r:delete())
    H.fails(404, r:run_once())
  end)

  it("charges its feed reads to the handler's info", function()
    assert(src:create({ id = "a", pk = "x" }))
    local charge
    local p = assert(db:processor({ name = "charged", source = "src",
      handler = function(_, info) charge = info.charge end }))
    p:run_once()
    assert.is_true(charge > 0)
  end)

  it("runs transactional handlers with Lua's own coroutines, which OpenResty "
    .. "keeps as coroutine._create, _resume and _status", function()
    -- OpenResty's coroutine.resume yields the caller to nginx first, which
    -- cannot cross the C call a transactional handler runs in: stand-ins
    -- that fail the same way, while the module is loaded and while it runs
    local co, loaded = coroutine, package.loaded["regolith.processor"]
    local own = { create = co.create, resume = co.resume, status = co.status }
    local function refuse() error("attempt to yield across C-call boundary") end
    co._create, co._resume, co._status = own.create, own.resume, own.status
    co.create, co.resume, co.status = refuse, refuse, refuse
    package.loaded["regolith.processor"] = nil
    local ok, err = pcall(function()
      local fresh = require "regolith.processor"
      local seen = 0
      local p = assert(fresh.open(db, { name = "ngx", source = "src",
        handler = function(changes) seen = seen + #changes end }))
      for i = 1, 3 do assert(src:create({ id = "i" .. i, pk = "p" })) end
      assert.are.equal(3, p:run_once())
      assert.are.equal(3, seen)
      assert.are.equal(0, (p:lag()))
      p:close()
    end)
    co.create, co.resume, co.status = own.create, own.resume, own.status
    co._create, co._resume, co._status = nil, nil, nil
    package.loaded["regolith.processor"] = loaded
    assert(ok, err)
  end)
end)
