-- Unique keys (docs/api.md, Containers): unique per logical partition, 409
-- on violation with nothing written, freed by delete and by replace.
local regolith = require "regolith"
local H = require "helper"

describe("unique keys", function()
  local db, users
  before_each(function()
    db = H.open()
    users = assert(db:create_container("users", {
      partition_key = "/tenant",
      unique_keys = { { "/username" } },
    }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("refuses a second item with the same value in a logical partition with 409, writing nothing", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann" }))
    H.fails(409, users:create({ id = "2", tenant = "t", username = "ann" }))
    H.fails(409, users:upsert({ id = "2", tenant = "t", username = "ann" }))
    H.fails(404, users:read("2", "t"))
    assert.are.equal(1, db:stats().items)
  end)

  it("allows the same value in another logical partition", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann" }))
    assert(users:create({ id = "1", tenant = "u", username = "ann" }))
    assert(users:create({ id = "2", tenant = "v", username = "ann" }))
    assert.are.equal(3, db:stats().items)
  end)

  it("refuses a replace, upsert or patch that takes another item's value with 409, changing nothing", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann" }))
    local bob = assert(users:create({ id = "2", tenant = "t", username = "bob" }))
    H.fails(409, users:replace({ id = "2", tenant = "t", username = "ann" }))
    H.fails(409, users:upsert({ id = "2", tenant = "t", username = "ann" }))
    H.fails(409, users:patch("2", "t", { { op = "set", path = "/username", value = "ann" } }))
    local got = assert(users:read("2", "t"))
    assert.are.equal("bob", got.username)
    assert.are.equal(bob._etag, got._etag)
  end)

  it("lets an item keep its own value when it is replaced", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann", v = 1 }))
    assert(users:replace({ id = "1", tenant = "t", username = "ann", v = 2 }))
    assert(users:upsert({ id = "1", tenant = "t", username = "ann", v = 3 }))
    assert(users:patch("1", "t", { { op = "incr", path = "/v", value = 1 } }))
    assert.are.equal(4, assert(users:read("1", "t")).v)
  end)

  it("frees a value when its item is deleted", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann" }))
    assert(users:delete("1", "t"))
    assert(users:create({ id = "2", tenant = "t", username = "ann" }))
  end)

  it("frees a value when its item is replaced with another value", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann" }))
    assert(users:replace({ id = "1", tenant = "t", username = "anna" }))
    assert(users:create({ id = "2", tenant = "t", username = "ann" }))
    H.fails(409, users:create({ id = "3", tenant = "t", username = "anna" }))
    assert(users:patch("1", "t", { { op = "set", path = "/username", value = "annie" } }))
    assert(users:create({ id = "3", tenant = "t", username = "anna" }))
  end)

  local function people()
    return assert(db:create_container("people", {
      partition_key = "/tenant",
      unique_keys = { { "/username" }, { "/first", "/last" } },
    }))
  end

  it("checks composite unique keys on the combination of their paths", function()
    local users = people()
    assert(users:create({ id = "1", tenant = "t", username = "a", first = "Ann", last = "Lee" }))
    assert(users:create({ id = "2", tenant = "t", username = "b", first = "Ann", last = "Kim" }))
    assert(users:create({ id = "3", tenant = "t", username = "c", first = "Bo", last = "Lee" }))
    H.fails(409, users:create({ id = "4", tenant = "t", username = "d", first = "Ann", last = "Lee" }))
    H.fails(404, users:read("4", "t"))
    assert(users:create({ id = "4", tenant = "u", username = "d", first = "Ann", last = "Lee" }))
  end)

  it("enforces each unique key on its own", function()
    local users = people()
    assert(users:create({ id = "1", tenant = "t", username = "a", first = "Ann", last = "Lee" }))
    H.fails(409, users:create({ id = "2", tenant = "t", username = "a", first = "X", last = "Y" }))
    H.fails(409, users:create({ id = "2", tenant = "t", username = "b", first = "Ann", last = "Lee" }))
    assert(users:create({ id = "2", tenant = "t", username = "b", first = "X", last = "Y" }))
  end)

  it("tells values of different types apart", function()
    assert(users:create({ id = "1", tenant = "t", username = "1" }))
    assert(users:create({ id = "2", tenant = "t", username = 1 }))
    assert(users:create({ id = "3", tenant = "t", username = true }))
    assert(users:create({ id = "4", tenant = "t", username = { "x" } }))
    H.fails(409, users:create({ id = "5", tenant = "t", username = 1.0 }))
    H.fails(409, users:create({ id = "6", tenant = "t", username = { "x" } }))
  end)

  it("tells integers beyond 2^53 apart", function()
    if not H.lua54 then pending("Lua 5.4 only: LuaJIT's numbers are doubles, exact to 2^53") end
    assert(users:create({ id = "1", tenant = "t", username = 1234567890123456789 }))
    local doc, msg = users:create({ id = "2", tenant = "t", username = 1234567890123456788 })
    assert(doc, msg)
    H.fails(409, users:create({ id = "3", tenant = "t", username = 1234567890123456789 }))
  end)

  it("tells long values that share a long beginning apart", function()
    local long = ("u"):rep(3000)
    assert(users:create({ id = "1", tenant = "t", username = long .. "1" }))
    assert(users:create({ id = "2", tenant = "t", username = long .. "2" }))
    H.fails(409, users:create({ id = "3", tenant = "t", username = long .. "1" }))
  end)

  it("treats a missing value as null, so only one item may lack it", function()
    local c = assert(db:create_container("c", { partition_key = "/pk", unique_keys = { { "/email" } } }))
    assert(c:create({ id = "1", pk = "p" }))
    H.fails(409, c:create({ id = "2", pk = "p" }))
    H.fails(409, c:create({ id = "2", pk = "p", email = regolith.null }))
    assert(c:create({ id = "2", pk = "p", email = "x@y" }))
  end)

  it("checks unique keys at nested paths", function()
    local c = assert(db:create_container("c", { partition_key = "/pk",
                                                unique_keys = { { "/contact/email" } } }))
    assert(c:create({ id = "1", pk = "p", contact = { email = "a@b" } }))
    H.fails(409, c:create({ id = "2", pk = "p", contact = { email = "a@b", phone = "1" } }))
    assert(c:create({ id = "2", pk = "p", contact = { email = "c@d" } }))
  end)

  it("fails a batch that violates a unique key with 409, writing nothing", function()
    assert(users:create({ id = "1", tenant = "t", username = "ann" }))
    local results, msg, status, res = users:batch("t", {
      { op = "create", doc = { id = "2", tenant = "t", username = "bob" } },
      { op = "create", doc = { id = "3", tenant = "t", username = "ann" } },
    })
    assert.is_nil(results, msg)
    assert.are.equal(409, status)
    assert.are.equal(424, res[1].status)
    assert.are.equal(409, res[2].status)
    H.fails(404, users:read("2", "t"))
    results, msg, status = users:batch("t", {
      { op = "create", doc = { id = "4", tenant = "t", username = "cy" } },
      { op = "create", doc = { id = "5", tenant = "t", username = "cy" } },
    })
    assert.is_nil(results, msg)
    assert.are.equal(409, status)
    H.fails(404, users:read("4", "t"))
    assert(users:batch("t", {
      { op = "delete", id = "1" },
      { op = "create", doc = { id = "6", tenant = "t", username = "ann" } },
    }))
    assert.are.equal("ann", assert(users:read("6", "t")).username)
  end)

  it("keeps its entries consistent after many changes", function()
    for i = 1, 20 do assert(users:create({ id = "i" .. i, tenant = "t", username = "u" .. i })) end
    for i = 1, 20, 2 do assert(users:delete("i" .. i, "t")) end
    for i = 2, 20, 2 do assert(users:replace({ id = "i" .. i, tenant = "t", username = "v" .. i })) end
    for i = 1, 20 do
      assert(users:create({ id = "n" .. i, tenant = "t", username = "u" .. i }))
    end
    for i = 2, 20, 2 do
      H.fails(409, users:create({ id = "m" .. i, tenant = "t", username = "v" .. i }))
    end
  end)
end)
