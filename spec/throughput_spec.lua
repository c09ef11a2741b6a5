-- Provisioned throughput (docs/throughput.md): budgets of request units per
-- second, per physical partition, shared by every process.
--
-- Timing: a budget is put into a debt of many seconds by one admitted
-- request (a request is admitted while the balance is positive and may
-- leave a debt), so that what follows is throttled however slow the
-- machine; where a budget must come back, the spec waits for the hint the
-- 429 gave; where a balance is compared between two reads, the window
-- allows for the refill over the time measured around them.  No duration
-- is asserted.
local regolith = require "regolith"
local system = require "system"
local H = require "helper"

local function sleep(s) os.execute("sleep " .. s) end

-- A container of `n` physical partitions with a budget.
local function container(db, name, throughput, n)
  return assert(db:create_container(name, { partition_key = "/pk",
    physical_partitions = n or 1, throughput = throughput }))
end

-- A batch of n creates in partition pk: one admitted request of about
-- 6 RU per item (14 with `big`), which leaves a debt of that much less the
-- balance.
local function spend(c, pk, n, prefix, big)
  local ops = {}
  for i = 1, n do
    ops[i] = { op = "create", doc = { id = (prefix or "x") .. i, pk = pk,
      text = big and ("x"):rep(10000) or "spent" } }
  end
  return c:batch(pk, ops)
end

-- Asserts a 429 of the right shape; returns its info.
local function throttled(ok, msg, status, info)
  assert(ok == nil, "expected a 429, got " .. tostring(ok))
  assert.are.equal(429, status, msg)
  assert.matches("request rate is large", msg, 1, true)
  assert.is_table(info)
  assert.are.equal(429, info.status)
  assert.are.equal(0, info.charge)
  assert.is_true(H.integer(info.retry_after_ms) and info.retry_after_ms >= 1)
  return info
end

local function tp(db, name)
  local st = db:stats()
  if name == nil then return st.throughput end
  return st.containers[name].throughput
end

describe("provisioned throughput", function()
  after_each(function() H.cleanup() end)

  describe("settings", function()
    it("changes nothing without a throughput option", function()
      local db = H.open()
      local c = container(db, "c")
      for i = 1, 300 do assert(c:create({ id = "i" .. i, pk = "p" })) end
      local _, info = assert(c:read("i1", "p"))
      assert.is_nil(info.retries)
      assert.is_nil(tp(db, "c"))
      assert.is_nil(tp(db))
      assert.is_nil(c:spec().throughput)
      assert.is_nil(db:throughput())
    end)

    it("takes a manual budget, autoscale, burst, and shows it in c:spec()",
      function()
        local db = H.open()
        assert.are.equal(400, container(db, "a", 400):spec().throughput)
        assert.are.same({ autoscale_max = 4000 },
          container(db, "b", { autoscale_max = 4000 }):spec().throughput)
        assert.are.same({ manual = 100, burst = true },
          container(db, "c", { manual = 100, burst = true }):spec().throughput)
        assert.are.equal("manual", tp(db, "a").mode)
        assert.are.equal(400, tp(db, "a").ru_per_second)
        assert.are.equal("autoscale", tp(db, "b").mode)
        assert.are.equal(4000, tp(db, "b").autoscale_max)
        assert.is_true(tp(db, "c").burst)
      end)

    it("raises on a wrong setting, as on any option", function()
      local db = H.open()
      local c = container(db, "c")
      for _, bad in ipairs({ 0, -5, 1.5, 2e9, "400", true,
          { autoscale_max = 0 }, { manual = 10, autoscale_max = 100 }, {},
          { manual = 10, burst = "yes" }, { ru = 400 } }) do
        assert.has_error(function() c:set_throughput(bad) end)
        assert.has_error(function() db:set_throughput(bad) end)
        assert.has_error(function()
          db:create_container("x", { partition_key = "/pk", throughput = bad })
        end)
      end
      assert.has_error(function() regolith.open(H.tmpdir(),
        { retry_throttled = -1 }) end)
      assert.is_nil(c:spec().throughput)
    end)

    it("changes at run time, for every handle and process, and persists",
      function()
        local db, path = H.open()
        local c = container(db, "c", 1)
        assert(spend(c, "p", 5))
        throttled(c:read("x1", "p"))
        local other = assert(assert(regolith.open(path)):container("c"))
        throttled(other:read("x1", "p"))
        local ok, info = c:set_throughput(100000)
        assert.is_true(ok)
        assert.are.equal(200, info.status)
        assert.are.equal(100000, other:spec().throughput)
        assert(other:read("x1", "p"))    -- at once: the raise paid the debt
        assert(c:set_throughput(nil))
        assert.is_nil(c:spec().throughput)
        assert.is_nil(tp(db, "c"))
        for i = 1, 50 do assert(c:read("x1", "p")) end
        assert(c:set_throughput({ autoscale_max = 1000 }))
        db:close()
        local again = assert(regolith.open(path))
        assert.are.same({ autoscale_max = 1000 },
          assert(again:container("c")):spec().throughput)
        assert.are.equal("autoscale", tp(again, "c").mode)
      end)

    it("takes a raise at once, debt included; a cut keeps the debt", function()
      -- A balance refills at the rate while it is read: what two reads of
      -- it may differ by beyond the change checked is bounded by the rate
      -- times the time from before the first read to after the second, on
      -- this machine's clock (which runs at the budget's clock's pace,
      -- this host's or the Redis server's).
      local db = H.open()
      local c = container(db, "c", 10)
      assert(spend(c, "p", 20, "x", true))      -- about 280 RU at 10 RU/s
      throttled(c:query("SELECT * FROM c WHERE c.pk = 'p'"))
      local t0 = system.monotime()
      local before = tp(db, "c").hot_partitions[1].balance
      assert.is_true(before < -90)
      -- a raise of 30 RU/s pays 30 RU of the debt, no more
      assert(c:set_throughput(40))
      local after = tp(db, "c").hot_partitions[1].balance
      local refill = 40 * (system.monotime() - t0)
      assert.is_true(after > before + 29 and after < before + 31 + refill,
        ("balance %.2f, before the raise %.2f, refill at most %.2f"):format(
          after, before, refill))
      throttled(c:query("SELECT * FROM c WHERE c.pk = 'p'"))
      -- a raise that covers it: the next query runs, and so does the next
      assert(c:set_throughput(100000))
      local rows = assert(c:query("SELECT * FROM c WHERE c.pk = 'p'"))
      assert.are.equal(20, #rows)
      assert(c:query("SELECT * FROM c WHERE c.pk = 'p'"))
      assert(c:read("x1", "p"))
      -- a cut keeps what the partition holds up to its new bucket, and a
      -- debt what it was
      assert(c:set_throughput(10))
      assert.is_true(tp(db, "c").hot_partitions[1].balance <= 10.01)
      assert(spend(c, "p", 20, "y", true))
      t0 = system.monotime()
      local debt = tp(db, "c").hot_partitions[1].balance
      assert.is_true(debt < -90)
      assert(c:set_throughput(5))
      local kept = tp(db, "c").hot_partitions[1].balance
      refill = 10 * (system.monotime() - t0)
      assert.is_true(kept > debt - 1 and kept < debt + 1 + refill,
        ("balance %.2f after the cut, %.2f before, refill at most %.2f"):format(
          kept, debt, refill))
      throttled(c:read("x1", "p"))
    end)

    it("keeps the budget through a replace that does not name it", function()
      local db = H.open()
      local c = container(db, "c", 1)
      assert(spend(c, "p", 5))
      assert(db:replace_container("c", { partition_key = "/pk",
        physical_partitions = 1, default_ttl = -1 }))
      assert.are.equal(1, c:spec().throughput)
      assert.are.equal(-1, c:spec().default_ttl)
      throttled(c:read("x1", "p"))
      assert(db:replace_container("c", { partition_key = "/pk",
        physical_partitions = 1, throughput = { autoscale_max = 100000 } }))
      assert.are.equal(100000, tp(db, "c").autoscale_max)
      sleep(0.1)                       -- the debt is paid at the new rate
      assert(c:read("x1", "p"))
    end)

    H.local_it("rebuilds the budgets from the database when their file is lost",
      "a cluster's budgets are kept in Redis, no file", function()
        local db, path = H.open()
        local c = container(db, "c", 1)
        db:close()
        os.remove(path .. "/throughput.shm")
        db = assert(regolith.open(path))
        c = assert(db:container("c"))
        assert(spend(c, "p", 5))
        throttled(c:read("x1", "p"))
        db:close()
        local f = assert(io.open(path .. "/throughput.shm", "w"))
        f:write(("garbage"):rep(10000))
        f:close()
        db = assert(regolith.open(path))
        assert.are.equal(1, tp(db, "c").ru_per_second)
      end)
  end)

  describe("the budget", function()
    it("refuses a request over budget with nil, message, 429, info", function()
      local db = H.open()
      local c = container(db, "c", 1)
      assert(c:create({ id = "a", pk = "p" }))   -- the bucket's 1 RU, and more
      local info = throttled(c:read("a", "p"))
      assert.is_true(info.retry_after_ms > 1000)
      assert.matches("retry after %d+ ms", (select(2, c:read("a", "p"))))
      assert.are.equal(1, tp(db, "c").requests)
      assert.is_true(tp(db, "c").throttled >= 2)
    end)

    it("admits while the balance is positive, and a larger request leaves a debt",
      function()
        local db = H.open()
        local c = container(db, "c", 10)
        local results, info = spend(c, "p", 20)      -- about 120 RU at 10 RU/s
        assert.are.equal(20, #results)
        assert.is_true(info.charge > 100)
        local st = tp(db, "c").hot_partitions[1]
        assert.is_true(st.balance < -90)
        local t = throttled(c:read("x1", "p"))
        assert.is_true(t.retry_after_ms > 5000)
      end)

    it("refills over time: the hint is enough to wait", function()
      local db = H.open()
      local c = container(db, "c", 20)
      assert(spend(c, "p", 5))                        -- about 10 RU of debt
      local info = throttled(c:read("x1", "p"))
      assert.is_true(info.retry_after_ms <= 1000)
      sleep(info.retry_after_ms / 1000 + 0.05)
      assert(c:read("x1", "p"))
    end)

    it("lets a burst through until the bucket is empty, then throttles it",
      function()
        local db = H.open()
        local c = container(db, "c", 10)
        local ok, refused = 0, 0
        for i = 1, 100 do                            -- about 600 RU at once
          local doc, _, status = c:create({ id = "i" .. i, pk = "p" })
          if doc then ok = ok + 1 else
            assert.are.equal(429, status)
            refused = refused + 1
          end
        end
        assert.is_true(ok >= 2)                      -- 10 RU, then a debt
        assert.is_true(refused >= 1)
        assert.are.equal(ok, db:stats().items)
        assert.are.equal(refused, tp(db, "c").throttled)
      end)

    it("holds one second of budget, or with burst what idle time saved",
      function()
        local db = H.open()
        local plain = container(db, "plain", 2)
        local burst = container(db, "burst", { manual = 2, burst = true })
        sleep(3)
        -- without burst the bucket never holds more than its RU/s
        assert.is_true(tp(db, "plain").hot_partitions[1].balance <= 2)
        -- with it, three idle seconds add six units to the first second's two
        assert.is_true(tp(db, "burst").hot_partitions[1].balance >= 7.9)
        for _ = 1, 7 do                   -- a miss costs 1 RU
          assert.are.equal(404, select(3, burst:read("none", "p")))
        end
        assert.are.equal(404, select(3, plain:read("none", "p")))
      end)

    it("splits among physical partitions: a hot one throttles, the others do not",
      function()
        local db = H.open()
        local c = container(db, "c", 400, 4)         -- 100 RU/s each
        assert(spend(c, "hot", 100, "x", true))      -- 1,400 RU into one
        throttled(c:read("x1", "hot"))
        local served = 0
        for i = 1, 40 do
          local _, _, status = c:read("x1", "cold" .. i)
          assert.is_true(status == 404 or status == 429)
          if status == 404 then served = served + 1 end
        end
        assert.is_true(served >= 10)                 -- about 30 of 40 elsewhere
        local st = tp(db, "c")
        assert.are.equal(4, st.physical_partitions)
        local hottest = st.hot_partitions[1]
        assert.is_true(hottest.throttled >= 1)
        assert.is_true(hottest.balance < 0)
        assert.is_true(hottest.utilization > 1)
        assert.are.equal(3, #st.hot_partitions)
        for i = 2, 3 do
          assert.is_true(st.hot_partitions[i].consumed_per_second <
            hottest.consumed_per_second)
        end
        -- queries routed by their WHERE, and feed ranges, split the same way
        local cold
        for i = 1, 40 do
          if select(3, c:read("x1", "cold" .. i)) == 404 then
            cold = "cold" .. i
            break
          end
        end
        local sql = "SELECT * FROM c WHERE c.pk = @pk"
        throttled(c:query(sql, { pk = "hot" }))
        assert(c:query(sql, { pk = cold }))
        throttled(c:query("SELECT * FROM c"))            -- a fan-out needs all
        throttled(c:changes({ feed_range = hottest.partition }))
        local other = hottest.partition % 4 + 1
        assert(c:changes({ feed_range = other }))
      end)

    it("autoscales between 10 % and 100 % of its maximum, and throttles only beyond it",
      function()
        local db = H.open()
        local auto = container(db, "auto", { autoscale_max = 100 })
        local manual = container(db, "manual", 10)
        assert.are.equal(10, tp(db, "auto").scaled_to)  -- idle: the floor
        for _ = 1, 60 do             -- 60 RU at once: six times the floor
          assert.are.equal(404, select(3, auto:read("none", "p")))
        end
        assert(spend(manual, "p", 3))          -- what the floor would do
        throttled(manual:read("x1", "p"))
        local st = tp(db, "auto")
        assert.is_true(st.scaled_to >= 10 and st.scaled_to <= 100)
        assert.is_true(st.consumed_per_second > 0)
        assert(spend(auto, "p", 100, "x", true))   -- 1,400 RU: beyond it
        assert.are.equal(100, tp(db, "auto").scaled_to)
        throttled(auto:read("x1", "p"))
      end)
  end)

  describe("a 429", function()
    local db, c, path

    -- A container whose budget (1 RU/s) is a minute in debt, set up by one
    -- admitted batch; its procedure and trigger would write if they ran.
    before_each(function()
      db, path = H.open()
      c = container(db, "c", 1)
      assert(c:create_procedure("put", [[
        return function(ctx, id) return ctx:create({ id = id, pk = "p" }) end
      ]]))
      assert(c:create_trigger("stamp", { type = "pre", operation = "all",
        source = [[return function(ctx)
          local d = ctx:body() d.stamped = true ctx:set_body(d) end]] }))
      local ops = { { op = "create", doc = { id = "kept", pk = "p", n = 1 } } }
      for i = 2, 10 do
        ops[i] = { op = "create", doc = { id = "s" .. i, pk = "p" } }
      end
      assert(c:batch("p", ops))
    end)

    it("changes nothing: writes, batches, procedures, triggers, reads",
      function()
        local before = db:stats()
        throttled(c:create({ id = "new", pk = "p" }))
        throttled(c:upsert({ id = "kept", pk = "p", n = 2 }))
        throttled(c:replace({ id = "kept", pk = "p", n = 3 }))
        throttled(c:patch("kept", "p", { { op = "incr", path = "/n", value = 1 } }))
        throttled(c:delete("kept", "p"))
        throttled(c:create({ id = "trig", pk = "p" }, { pre_trigger = "stamp" }))
        throttled(c:execute("put", "p", "by-procedure"))
        throttled(c:batch("p", { { op = "create", doc = { id = "b1", pk = "p" } },
                                 { op = "delete", id = "kept" } }))
        throttled(c:read_many({ { "kept", "p" } }))
        throttled(c:changes({ start = "beginning" }))
        throttled(c:query("SELECT * FROM c"))
        local after = db:stats()
        assert.are.equal(before.lsn, after.lsn)
        assert.are.equal(before.items, after.items)
        assert.are.equal(before.containers.c.bytes, after.containers.c.bytes)
        assert.are.equal(11, after.containers.c.throughput.throttled -
          before.containers.c.throughput.throttled)
        assert(c:set_throughput(nil))
        local kept = assert(c:read("kept", "p"))
        assert.are.equal(1, kept.n)
        for _, id in ipairs({ "new", "trig", "by-procedure", "b1" }) do
          assert.are.equal(404, select(3, c:read(id, "p")))
        end
        assert.are.equal(10, #assert(c:changes({ start = "beginning" })))
        assert(db:verify())
      end)

    it("admits a bulk load batch by batch, as a fan-out request, and stops it at a 429",
      function()
        local bl = container(db, "bl", 50)
        local docs = {}
        for i = 1, 400 do docs[i] = { id = "d" .. i, pk = "p" .. (i % 7) } end
        local res, msg, st, partial = bl:bulk_load(docs, { batch = 50 })
        assert.is_nil(res)
        assert.are.equal(429, st)
        assert.matches("batches before it are written", msg)
        -- the first batch went in (a positive balance admits it), whole
        -- batches only, and the budget was charged for them
        assert.is_true(partial.written >= 50 and partial.written < 400)
        assert.are.equal(0, partial.written % 50)
        assert.are.equal(partial.written, db:stats().containers.bl.items)
        assert.is_true(tp(db, "bl").hot_partitions[1].balance < 0)
        assert(db:verify())
      end)

    it("is a document's without its partition key too (the none partition)",
      function()
        local none = container(db, "none", 1)
        local NONE = { partition_key = regolith.object() }
        assert(none:create({ id = "first" }, NONE))    -- 1 RU left, then a debt
        throttled(none:create({ id = "second" }, NONE))
        throttled(none:upsert({ id = "first", n = 2 }, NONE))
        throttled(none:read("first", regolith.object()))
        assert.are.equal(1, db:stats().containers.none.items)
      end)

    it("leaves a query's pages where they were", function()
      assert(c:set_throughput(nil))
      local rows, info = assert(c:query("SELECT * FROM c ORDER BY c.id",
        nil, { max_items = 5 }))
      assert.are.equal(5, #rows)
      assert(c:set_throughput(1))               -- a fresh budget of 1 RU/s
      assert(spend(c, "q", 10, "q"))            -- and a minute of debt
      throttled(c:query("SELECT * FROM c ORDER BY c.id", nil,
        { max_items = 5, continuation = info.continuation }))
      throttled(c:query("SELECT * FROM c WHERE c.pk = 'p'"))
      assert(c:set_throughput(nil))
      local rest = assert(c:query("SELECT * FROM c ORDER BY c.id", nil,
        { max_items = 5, continuation = info.continuation }))
      assert.is_true(rows[5].id < rest[1].id)
    end)

    it("is retried with its hint when the database asks for it", function()
      assert(c:set_throughput(nil))
      assert(c:set_throughput(1000))            -- a fresh bucket of 1,000 RU
      -- batches of about 600 RU, admitted while the balance lasts, until a
      -- read is refused: the debt comes whatever the machine's speed (two
      -- batches leave some 200 RU, which a slow run can refill in time)
      local t
      for k = 1, 10 do
        spend(c, "r", 100, "r" .. k .. "-")
        local ok, msg, status, info = c:read("r1-1", "r")
        if ok == nil then t = throttled(ok, msg, status, info); break end
      end
      assert.is_table(t, "the bucket never went into debt")
      assert.are.equal(0, t.retries)
      local patient = assert(regolith.open(path, { retry_throttled = 3 }))
      local pc = assert(patient:container("c"))
      local doc, info = pc:read("r1-1", "r")
      assert.is_table(doc, info)
      assert.are.equal(1, info.retries)
      sleep(0.2)
      local _, plain = assert(c:read("r1-1", "r"))
      assert.is_nil(plain.retries)              -- not asked for: not counted
    end)
  end)

  describe("a call inside a transaction", function()
    it("never waits: a transactional handler's write gets the 429", function()
      local db = H.open({ retry_throttled = 5 })
      local src = container(db, "src")
      local dst = container(db, "dst", 1)
      assert(spend(dst, "p", 10))              -- a minute of debt
      assert(src:create({ id = "a", pk = "p" }))
      local seen = {}
      local p = assert(db:processor({ name = "copy", source = "src",
        max_attempts = 1, on_error = function() end,
        handler = function()
          local ok, msg, status, info = dst:create({ id = "copy", pk = "p" })
          seen[#seen + 1] = { status = status, retries = info and info.retries }
          if not ok then error(msg) end
        end }))
      p:run_once()
      -- (on a cluster the handler may also run in runs of the call that
      -- lacked something, whose answers are not used: docs/cluster.md)
      if not H.cluster then assert.are.equal(1, #seen) end
      assert.are.equal(429, seen[#seen].status)
      assert.are.equal(0, seen[#seen].retries)
      assert.are.equal(1, #p:dead_letters())
      assert.are.equal(10, db:stats().containers.dst.items)  -- no copy
      p:close()
    end)
  end)

  describe("a database budget", function()
    it("is shared by the containers without one of their own", function()
      local db = H.open()
      local a = container(db, "a")
      local b = container(db, "b")
      local own = container(db, "own", 100000)
      local ok, info = db:set_throughput(5)
      assert.is_true(ok)
      assert.are.equal(200, info.status)
      assert.are.equal(5, db:throughput())
      assert(spend(a, "p", 10))                     -- 60 RU of 5
      throttled(b:read("x", "q"))
      throttled(a:read("x", "p"))
      assert.matches("the database's shared budget",
        (select(2, b:read("x", "q"))), 1, true)
      assert.are.equal(404, select(3, own:read("x", "q")))
      local st = db:stats()
      assert.are.equal("manual", st.throughput.mode)
      assert.are.equal(5, st.throughput.ru_per_second)
      assert.are.equal("shared", st.containers.a.throughput.mode)
      assert.is_true(st.containers.a.throughput.consumed_ru > 50)
      assert.is_true(st.containers.b.throughput.throttled >= 1)
      assert.are.equal("manual", st.containers.own.throughput.mode)
      local c = container(db, "later")              -- shares it from the start
      throttled(c:read("x", "q"))
      assert(db:set_throughput(nil))
      assert.is_nil(db:throughput())
      assert.is_nil(db:stats().throughput)
      assert.is_nil(db:stats().containers.a.throughput)
      assert.are.equal(404, select(3, c:read("x", "q")))
    end)

    it("is split into one partition per 10,000 RU/s", function()
      local db = H.open()
      container(db, "a")
      assert(db:set_throughput({ autoscale_max = 45000 }))
      assert.are.equal(5, tp(db).physical_partitions)
      assert.are.equal(4500, tp(db).scaled_to)
    end)
  end)

  describe("across processes", function()
    -- Runs `source` in a child process on the database at `path`.
    local function child(path, source)
      local file = H.script(([[
        local regolith = require "regolith"
        local db = assert(regolith.open(%q))
        %s
      ]]):format(path, source))
      local out, ok = H.run(H.lua_cmd(file) .. " 2>&1")
      assert(ok, out)
      return out
    end

    it("share one budget: one process's debt throttles the other", function()
      local db, path = H.open()
      local c = container(db, "c", 5)
      child(path, [[
        local c = assert(db:container("c"))
        local ops = {}
        for i = 1, 20 do ops[i] = { op = "create", doc = { id = "i" .. i, pk = "p" } } end
        assert(c:batch("p", ops))
      ]])
      throttled(c:read("i1", "p"))
      if H.cluster then     -- the counters are each process's (docs/cluster.md)
        assert.are.equal(0, tp(db, "c").consumed_ru)
        assert.are.equal(1, tp(db, "c").throttled)
      else
        assert.is_true(tp(db, "c").consumed_ru > 100)
      end
    end)

    it("and two handles: one's debt throttles the other, with one hint",
      function()
        local db, path = H.open()
        local a = container(db, "c", 5)
        local other = assert(regolith.open(path))
        local b = assert(other:container("c"))
        assert(spend(b, "p", 20))                 -- about 120 RU at 5 RU/s
        local ha = throttled(a:read("x1", "p")).retry_after_ms
        local hb = throttled(b:read("x1", "p")).retry_after_ms
        assert.is_true(ha > 10000 and hb > 10000, ha .. " " .. hb)
        -- the same debt, asked a moment later
        assert.is_true(hb <= ha + 20 and hb > ha - 5000, ha .. " " .. hb)
        assert(a:set_throughput(100000))          -- a raise that pays it
        assert(b:read("x1", "p"))
        other:close()
      end)

    it("never admit more together than one budget allows", function()
      local db, path = H.open()
      container(db, "c", 20)
      local script = H.script(([[
        local regolith = require "regolith"
        local db = assert(regolith.open(%q))
        local c = assert(db:container("c"))
        local ok, refused, ru = 0, 0, 0
        local stop = os.time() + 2
        local i = 0
        while os.time() <= stop do
          i = i + 1
          local d, info, status = c:create({ id = arg[1] .. i, pk = "p" .. i %% 7 })
          if d then ok, ru = ok + 1, ru + info.charge
          elseif status == 429 then refused = refused + 1
          else error(info) end
        end
        print(ok, refused, ru)
      ]]):format(path))
      local t0 = os.time()
      local p1 = io.popen(H.lua_cmd(script) .. " a 2>&1")
      local p2 = io.popen(H.lua_cmd(script) .. " b 2>&1")
      local out1, out2 = p1:read("*a"), p2:read("*a")
      p1:close() p2:close()
      local elapsed = os.time() - t0 + 1            -- an upper bound
      local total, refused, seen = 0, 0, 0
      for _, out in ipairs({ out1, out2 }) do
        local ok, no, ru = out:match("^(%d+)%s+(%d+)%s+([%d.]+)")
        assert(ok, out)
        total, refused = total + tonumber(ru), refused + tonumber(no)
        seen = seen + tonumber(ok)
      end
      assert.is_true(seen > 0 and refused > 0)
      -- the bucket's 20 RU, the refill, and one request's debt per process
      assert.is_true(total <= 20 + 20 * elapsed + 2 * 10,
        ("%g RU admitted in %d s"):format(total, elapsed))
      if H.cluster then     -- the counters are each process's (docs/cluster.md)
        assert.are.equal(0, tp(db, "c").consumed_ru)
      else
        assert.is_true(math.abs(tp(db, "c").consumed_ru - total) < 1)
        assert.are.equal(refused, tp(db, "c").throttled)
      end
      assert.are.equal(seen, db:stats().items)
    end)
  end)
end)
