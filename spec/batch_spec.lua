-- Transactional batch (docs/api.md, Items): every op kind, statuses as the
-- single calls give them, all or nothing with 424 for the siblings, limits.
local regolith = require "regolith"
local H = require "helper"

describe("batch", function()
  local db, c
  before_each(function()
    db = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  -- asserts the nil, msg, status, results shape and returns results
  local function failed(status, ok, msg, st, results)
    H.fails(status, ok, msg, st)
    assert.is_table(results)
    return results
  end

  it("runs every op kind and gives each the status of the single call", function()
    local existing = assert(c:create({ id = "old", pk = "p", v = 1 }))
    assert(c:create({ id = "doomed", pk = "p" }))
    assert(c:create({ id = "counter", pk = "p", n = 1 }))
    local results, info = c:batch("p", {
      { op = "create", doc = { id = "new", pk = "p", v = 1 } },
      { op = "upsert", doc = { id = "up1", pk = "p", v = 1 } },
      { op = "upsert", doc = { id = "old", pk = "p", v = 2 } },
      { op = "replace", doc = { id = "old", pk = "p", v = 3 } },
      { op = "read", id = "old" },
      { op = "delete", id = "doomed" },
      { op = "patch", id = "counter", ops = { { op = "incr", path = "/n", value = 1 } } },
    })
    assert(results, info)
    assert.are.equal(200, info.status)
    assert.is_number(info.charge)
    assert.are.equal(7, #results)
    local expected = { 201, 201, 200, 200, 200, 204, 200 }
    for i, st in ipairs(expected) do
      assert.are.equal(st, results[i].status, "op " .. i)
    end
    assert.are.equal("new", results[1].doc.id)
    assert.is_string(results[1].doc._etag)
    assert.are.equal(3, results[4].doc.v)
    assert.are.equal(3, results[5].doc.v)
    assert.are_not.equal(existing._etag, results[5].doc._etag)
    assert.are.equal(2, results[7].doc.n)
    assert.are.equal(1, assert(c:read("new", "p")).v)
    assert.are.equal(1, assert(c:read("up1", "p")).v)
    assert.are.equal(3, assert(c:read("old", "p")).v)
    H.fails(404, c:read("doomed", "p"))
    assert.are.equal(2, assert(c:read("counter", "p")).n)
  end)

  it("returns documents as read afterwards", function()
    local results = assert(c:batch("p", {
      { op = "create", doc = { id = "a", pk = "p", list = { 1, 2 } } },
    }))
    assert.are.same(assert(c:read("a", "p")), results[1].doc)
  end)

  it("lets ops see the earlier ops' writes", function()
    local results = assert(c:batch("p", {
      { op = "create", doc = { id = "a", pk = "p", n = 1 } },
      { op = "read", id = "a" },
      { op = "patch", id = "a", ops = { { op = "incr", path = "/n", value = 10 } } },
      { op = "read", id = "a" },
      { op = "delete", id = "a" },
      { op = "create", doc = { id = "a", pk = "p", n = 100 } },
      { op = "replace", doc = { id = "a", pk = "p", n = 200 } },
    }))
    assert.are.equal(1, results[2].doc.n)
    assert.are.equal(11, results[4].doc.n)
    assert.are.equal(201, results[6].status)
    assert.are.equal(200, results[7].status)
    assert.are.equal(200, assert(c:read("a", "p")).n)
  end)

  it("writes every op under one _lsn", function()
    local results = assert(c:batch("p", {
      { op = "create", doc = { id = "a", pk = "p" } },
      { op = "create", doc = { id = "b", pk = "p" } },
      { op = "upsert", doc = { id = "c", pk = "p" } },
    }))
    assert.are.equal(results[1].doc._lsn, results[2].doc._lsn)
    assert.are.equal(results[1].doc._lsn, results[3].doc._lsn)
    assert.are_not.equal(results[1].doc._etag, results[2].doc._etag)
    assert.are_not.equal(results[2].doc._etag, results[3].doc._etag)
  end)

  describe("all or nothing", function()
    it("leaves nothing when an op fails: the failing op has its status, the others 424", function()
      assert(c:create({ id = "taken", pk = "p", v = 1 }))
      local before = assert(c:read("taken", "p"))
      local results = failed(409, c:batch("p", {
        { op = "create", doc = { id = "a", pk = "p" } },
        { op = "replace", doc = { id = "taken", pk = "p", v = 2 } },
        { op = "create", doc = { id = "taken", pk = "p", v = 3 } },
        { op = "create", doc = { id = "b", pk = "p" } },
      }))
      assert.are.equal(4, #results)
      assert.are.equal(424, results[1].status)
      assert.are.equal(424, results[2].status)
      assert.are.equal(409, results[3].status)
      assert.are.equal(424, results[4].status)
      H.fails(404, c:read("a", "p"))
      H.fails(404, c:read("b", "p"))
      local after = assert(c:read("taken", "p"))
      assert.are.equal(1, after.v)
      assert.are.equal(before._etag, after._etag)
      assert.are.equal(1, db:stats().items)
    end)

    it("fails with 404 when an op reads, replaces, patches or deletes a missing item", function()
      for _, op in ipairs({
        { op = "read", id = "missing" },
        { op = "replace", doc = { id = "missing", pk = "p" } },
        { op = "patch", id = "missing", ops = { { op = "set", path = "/x", value = 1 } } },
        { op = "delete", id = "missing" },
      }) do
        local results = failed(404, c:batch("p", {
          { op = "create", doc = { id = "a", pk = "p" } },
          op,
        }))
        assert.are.equal(424, results[1].status)
        assert.are.equal(404, results[2].status)
        H.fails(404, c:read("a", "p"))
      end
    end)

    it("fails with 412 on a stale if_match", function()
      local v1 = assert(c:create({ id = "a", pk = "p", v = 1 }))
      assert(c:replace({ id = "a", pk = "p", v = 2 }))
      for _, op in ipairs({
        { op = "replace", doc = { id = "a", pk = "p", v = 3 }, if_match = v1._etag },
        { op = "upsert", doc = { id = "a", pk = "p", v = 3 }, if_match = v1._etag },
        { op = "delete", id = "a", if_match = v1._etag },
        { op = "patch", id = "a", ops = { { op = "set", path = "/v", value = 3 } },
          if_match = v1._etag },
      }) do
        local results = failed(412, c:batch("p", {
          { op = "create", doc = { id = "b", pk = "p" } }, op,
        }))
        assert.are.equal(412, results[2].status)
        assert.are.equal(2, assert(c:read("a", "p")).v)
        H.fails(404, c:read("b", "p"))
      end
      local current = assert(c:read("a", "p"))
      local results = assert(c:batch("p", {
        { op = "replace", doc = { id = "a", pk = "p", v = 4 }, if_match = current._etag },
      }))
      assert.are.equal(200, results[1].status)
    end)

    it("fails with 400 on a bad document, and 413 on one too large", function()
      local results = failed(400, c:batch("p", {
        { op = "create", doc = { id = "a", pk = "p" } },
        { op = "create", doc = { id = "b", pk = "p", bad = 0 / 0 } },
      }))
      assert.are.equal(400, results[2].status)
      results = failed(413, c:batch("p", {
        { op = "create", doc = { id = "a", pk = "p" } },
        { op = "create", doc = { id = "b", pk = "p", s = ("x"):rep(3 * 1024 * 1024) } },
      }))
      assert.are.equal(413, results[2].status)
      assert.are.equal(0, db:stats().items)
    end)

    it("fails with 400 on a failing patch and undoes the ops before it", function()
      assert(c:create({ id = "a", pk = "p", n = 1 }))
      local results = failed(400, c:batch("p", {
        { op = "patch", id = "a", ops = { { op = "incr", path = "/n", value = 1 } } },
        { op = "patch", id = "a", ops = { { op = "remove", path = "/missing" } } },
      }))
      assert.are.equal(424, results[1].status)
      assert.are.equal(400, results[2].status)
      assert.are.equal(1, assert(c:read("a", "p")).n)
    end)
  end)

  describe("partition keys", function()
    it("refuses an op whose document names another partition key with 400", function()
      local results = failed(400, c:batch("p", {
        { op = "create", doc = { id = "a", pk = "p" } },
        { op = "create", doc = { id = "b", pk = "q" } },
      }))
      assert.are.equal(424, results[1].status)
      assert.are.equal(400, results[2].status)
      failed(400, c:batch("p", { { op = "upsert", doc = { id = "b", pk = 1 } } }))
      failed(400, c:batch("p", { { op = "create", doc = { id = "b" } } }))
      H.fails(404, c:read("a", "p"))
      H.fails(404, c:read("b", "q"))
      assert.are.equal(0, db:stats().items)
    end)

    it("reads, patches and deletes under the batch's partition key only", function()
      assert(c:create({ id = "a", pk = "q" }))
      failed(404, c:batch("p", { { op = "read", id = "a" } }))
      failed(404, c:batch("p", { { op = "delete", id = "a" } }))
      assert(c:read("a", "q"))
      assert(c:batch("q", { { op = "delete", id = "a" } }))
      H.fails(404, c:read("a", "q"))
    end)

    it("refuses a partition key argument that is not a value with 400", function()
      H.fails(400, c:batch(nil, { { op = "create", doc = { id = "a", pk = "p" } } }))
      H.fails(400, c:batch({ "p" }, { { op = "create", doc = { id = "a", pk = "p" } } }))
      assert.are.equal(0, db:stats().items)
    end)

    it("runs every op kind under a partition key holding NUL", function()
      local pk = "a\0b"
      assert(c:create({ id = "r", pk = pk, n = 1 }))
      assert(c:create({ id = "d", pk = pk }))
      local results, msg = c:batch(pk, {
        { op = "create", doc = { id = "c", pk = pk } },
        { op = "read", id = "r" },
        { op = "patch", id = "r", ops = { { op = "incr", path = "/n", value = 1 } } },
        { op = "replace", doc = { id = "c", pk = pk, v = 1 } },
        { op = "delete", id = "d" },
      })
      assert(results, msg)
      assert.are.equal(2, assert(c:read("r", pk)).n)
      H.fails(404, c:read("d", pk))
      assert.are.equal(1, assert(c:read("c", pk)).v)
    end)

    it("works on hierarchical partition keys", function()
      local h = assert(db:create_container("h", { partition_key = { "/t", "/u" } }))
      local results = assert(h:batch({ "x", "y" }, {
        { op = "create", doc = { id = "a", t = "x", u = "y" } },
        { op = "read", id = "a" },
      }))
      assert.are.equal(201, results[1].status)
      assert.are.equal(200, results[2].status)
      failed(400, h:batch({ "x", "y" }, { { op = "create", doc = { id = "b", t = "x", u = "z" } } }))
      H.fails(400, h:batch("x", { { op = "read", id = "a" } }))
      H.fails(404, h:read("b", { "x", "z" }))
    end)
  end)

  describe("limits and malformed batches", function()
    local function creates(n)
      local ops = {}
      for i = 1, n do ops[i] = { op = "create", doc = { id = "i" .. i, pk = "p" } } end
      return ops
    end

    it("accepts 100 ops", function()
      local results = assert(c:batch("p", creates(100)))
      assert.are.equal(100, #results)
      assert.are.equal(100, db:stats().items)
    end)

    it("refuses 101 ops with 400, writing nothing", function()
      H.fails(400, c:batch("p", creates(101)))
      assert.are.equal(0, db:stats().items)
    end)

    it("refuses a batch whose items come to more than 2 MiB with 413, writing nothing", function()
      local KiB = 1024
      local function big(id, n) return { id = id, pk = "p", s = ("x"):rep(n) } end
      local function statuses(results)
        local t = {}
        for i, r in ipairs(results) do t[i] = r.status end
        return t
      end
      -- three items of 600 KiB: under the bound
      assert(c:batch("p", { { op = "create", doc = big("a", 600 * KiB) },
                            { op = "create", doc = big("b", 600 * KiB) },
                            { op = "create", doc = big("c", 600 * KiB) } }))
      -- four: the fourth takes the batch over it, and nothing is written
      local ops = {}
      for i = 1, 4 do ops[i] = { op = "create", doc = big("n" .. i, 600 * KiB) } end
      local msg = H.fails(413, c:batch("p", ops))
      assert.matches("batch operation 4 failed", msg, 1, true)
      assert.matches("a batch writes at most 2 MiB", msg, 1, true)
      local _, _, _, results = c:batch("p", ops)
      assert.are.same({ 424, 424, 424, 413 }, statuses(results))
      H.fails(404, c:read("n1", "p"))
      -- a patch counts the item it writes; a delete writes none
      local results2 = failed(413, c:batch("p", {
        { op = "upsert", doc = big("d", 600 * KiB) },
        { op = "patch", id = "a", ops = { { op = "set", path = "/t", value = 1 } } },
        { op = "patch", id = "b", ops = { { op = "set", path = "/t", value = 1 } } },
        { op = "patch", id = "c", ops = { { op = "set", path = "/t", value = 1 } } },
      }))
      assert.are.same({ 424, 424, 424, 413 }, statuses(results2))
      H.fails(404, c:read("d", "p"))
      assert.is_nil(assert(c:read("a", "p")).t)
      assert(c:batch("p", { { op = "delete", id = "a" }, { op = "delete", id = "b" },
                            { op = "delete", id = "c" },
                            { op = "create", doc = big("e", 600 * KiB) } }))
      assert.are.same({ 1 }, assert(c:query("SELECT VALUE COUNT(1) FROM c")))
    end)

    it("refuses an empty batch with 400", function()
      H.fails(400, c:batch("p", {}))
    end)

    it("refuses an op list that is not a table with 400", function()
      H.fails(400, c:batch("p", nil))
      H.fails(400, c:batch("p", "create a"))
    end)

    it("refuses ops with unknown fields with 400, writing nothing", function()
      for _, op in ipairs({
        { op = "create", docs = { id = "a", pk = "p" } },
        { op = "create", doc = { id = "a", pk = "p" }, partition_key = "p" },
        { op = "create", doc = { id = "a", pk = "p" }, pre_trigger = "t" },
        { op = "read", id = "a", if_none_match = "x" },
        { op = "create", doc = { id = "a", pk = "p" }, [1] = "extra" },
      }) do
        local results = failed(400, c:batch("p", {
          { op = "create", doc = { id = "z", pk = "p" } }, op,
        }))
        assert.are.equal(400, results[2].status)
      end
      assert.are.equal(0, db:stats().items)
    end)

    it("refuses malformed ops with 400, writing nothing", function()
      for _, op in ipairs({
        "create",
        { op = "insert", doc = { id = "a", pk = "p" } },
        { doc = { id = "a", pk = "p" } },
        { op = "create" },
        { op = "create", doc = "text" },
        { op = "delete" },
        { op = "read", id = 42 },
        { op = "patch", id = "z" },
        { op = "patch", id = "z", ops = {} },
        { op = "replace", doc = { id = "z", pk = "p" }, if_match = 42 },
      }) do
        failed(400, c:batch("p", { { op = "create", doc = { id = "z", pk = "p" } }, op }))
      end
      assert.are.equal(0, db:stats().items)
    end)
  end)
end)
