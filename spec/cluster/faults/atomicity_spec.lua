-- All or nothing on a cluster: procedures and triggers that raise, abort
-- or exceed their budgets after writing leave every key of their slot as
-- it was (the writes are buffered in the client and committed by one
-- Function, which checks everything before its first write); so does a
-- batch with a failing op; and two processes incrementing one partition
-- through a procedure end exact (optimistic commits re-run on conflict,
-- then the fenced lock).  (docs/cluster.md, Fault tests.)
local C = require "cluster.support"
local regolith = require "regolith"

describe("cluster atomicity", function()
  if not C.ready(pending) then return end
  local db, c, admin, slot, url

  before_each(function()
    url = "redis://" .. C.seeds .. "/" .. C.fresh_db()
    db = assert(regolith.open(url,
      { script_budget = 2000000, script_memory = 4 * 1024 * 1024 }))
    c = assert(db:create_container("a", { partition_key = "/pk",
      unique_keys = { { "/u" } } }))
    assert(c:create({ id = "x", pk = "p", n = 1, u = "taken" }))
    slot = C.slot_of(url, c, "p")
    admin = C.client()
  end)
  after_each(function()
    admin:close()
    db:close()
  end)

  local function unchanged(f)
    local before = C.snapshot(admin, slot)
    f()
    assert.are.same(before, C.snapshot(admin, slot))
  end

  it("leaves nothing of a procedure that raises, aborts or runs out of budget after writing", function()
    local bodies = {
      raise = [[assert(ctx:create({ id = "n1", pk = "p" })); assert(ctx:replace({ id = "x", pk = "p", n = 2 })); error("boom")]],
      abort = [[assert(ctx:upsert({ id = "n2", pk = "p" })); assert(ctx:delete("x")); ctx:abort("no", 409)]],
      budget = [[assert(ctx:create({ id = "n3", pk = "p" })); while true do end]],
      -- doubling a string: memory grows faster than the work it is charged
      -- (string.rep is charged for the bytes it makes: 408 before 413)
      memory = [[assert(ctx:create({ id = "n4", pk = "p" })); local s, t = ("x"):rep(1024), {} while true do s = s .. s; t[#t + 1] = s end]],
      unique = [[assert(ctx:create({ id = "n5", pk = "p" })); assert(ctx:create({ id = "n6", pk = "p", u = "taken" }))]],
      result = [[assert(ctx:create({ id = "n7", pk = "p" })); return tostring]],
    }
    -- (unique: the script is told 409 at its create, as locally, and its
    -- assert raises)
    local want = { raise = 400, abort = 409, budget = 408, memory = 413, unique = 400,
      result = 400 }
    for name, body in pairs(bodies) do
      assert(c:create_procedure(name, "return function(ctx) " .. body .. " end"))
      unchanged(function()
        local ok, msg, status = c:execute(name, "p")
        assert.is_nil(ok, name)
        assert.are.equal(want[name], status, name .. ": " .. tostring(msg))
      end)
    end
  end)

  it("leaves nothing of a write whose pre- or post-trigger fails after writing", function()
    assert(c:create_trigger("pre", { type = "pre", source = [[
      return function(ctx) assert(ctx:create({ id = "t1", pk = "p" })); error("pre") end]] }))
    assert(c:create_trigger("post", { type = "post", source = [[
      return function(ctx) assert(ctx:replace({ id = "x", pk = "p", n = 9 })); ctx:abort("post", 412) end]] }))
    unchanged(function()
      local _, _, st = c:create({ id = "y", pk = "p" }, { pre_trigger = "pre" })
      assert.are.equal(400, st)
      -- the post-trigger's replace leaves x without /u, as y is: a unique
      -- key violation raised in the trigger, as locally
      _, _, st = c:upsert({ id = "y", pk = "p" }, { post_trigger = "post" })
      assert.are.equal(400, st)
      _, _, st = c:delete("x", "p", { post_trigger = "post" })
      assert.are.equal(400, st)        -- a post trigger on "all": replace runs
    end)
  end)

  it("leaves nothing of a batch with a failing op", function()
    unchanged(function()
      local ok, _, st, res = c:batch("p", {
        { op = "create", doc = { id = "b1", pk = "p" } },
        { op = "replace", doc = { id = "x", pk = "p", n = 5, u = "taken" } },
        { op = "create", doc = { id = "b2", pk = "p", u = "taken" } },
      })
      assert.is_nil(ok)
      assert.are.equal(409, st)
      assert.are.same({ 424, 424, 409 }, { res[1].status, res[2].status, res[3].status })
    end)
  end)

  it("counts exactly when two processes increment one partition", function()
    c = assert(db:create_container("b", { partition_key = "/pk" }))
    C.counter(c)
    local writers = C.start_writers(url, "b", 3, "none")
    local t = C.finish_writers(writers)
    assert.are.equal(0, t.inc_doubt)
    assert.is_true(t.inc_ok > 20)
    assert.are.equal(t.inc_ok, assert(c:read("counter", "counter")).n)
    assert(db:verify())
  end)
end)
