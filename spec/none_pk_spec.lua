-- The none partition key: items lacking their partition key form a logical
-- partition of their own, distinct from null, named by an empty object
-- (regolith.object(), the Cosmos SDKs' [{}]).
local regolith = require "regolith"
local H = require "helper"

local NONE = regolith.object()

describe("the none partition key", function()
  local db, c
  before_each(function()
    db = H.open()
    c = assert(db:create_container("c", {
      partition_key = "/pk", physical_partitions = 4,
      unique_keys = { { "/u" } } }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("refuses a document without its key unless the write names the none partition", function()
    local msg = H.fails(400, c:create({ id = "a" }))
    assert.matches("partition key value is missing", msg)
    H.fails(400, c:upsert({ id = "a" }))
    local doc, info = assert(c:create({ id = "a", n = 1 },
      { partition_key = NONE }))
    assert.are.equal(201, info.status)
    assert.is_nil(doc.pk)
    -- a document with a key does not belong to the none partition, nor the reverse
    assert.matches("differs from the partition_key option",
      H.fails(400, c:create({ id = "b", pk = "x" }, { partition_key = NONE })))
    H.fails(400, c:create({ id = "b" }, { partition_key = "x" }))
    assert(c:create({ id = "b", pk = "x" }, { partition_key = "x" }))
    -- an object is not a partition key value, even an empty one
    H.fails(400, c:create({ id = "c", pk = {} }, { partition_key = NONE }))
    H.fails(400, c:create({ id = "c", pk = { 1 } }))
    assert.has_error(function() c:delete("a", NONE, { partition_key = NONE }) end)
  end)

  it("keeps none apart from null for every item call", function()
    assert(c:create({ id = "a", n = 1 }, { partition_key = NONE }))
    assert(c:create({ id = "a", pk = regolith.null, n = 2 }))
    assert.are.equal(1, assert(c:read("a", NONE)).n)
    assert.are.equal(1, assert(c:read("a", {})).n)
    assert.are.equal(2, assert(c:read("a", regolith.null)).n)
    H.fails(409, c:create({ id = "a" }, { partition_key = NONE }))
    H.fails(400, c:read("a", regolith.array()))
    local got = assert(c:replace({ id = "a", n = 3 }, { partition_key = NONE }))
    assert.are.equal(3, got.n)
    got = assert(c:upsert({ id = "a", n = 4 }, { partition_key = NONE,
      if_match = got._etag }))
    assert.are.equal(4, got.n)
    got = assert(c:patch("a", NONE, { { op = "incr", path = "/n", value = 1 } },
      { filter = "FROM c WHERE c.n = 4" }))
    assert.are.equal(5, got.n)
    -- a patch cannot move an item into or out of the none partition
    H.fails(400, c:patch("a", NONE, { { op = "add", path = "/pk", value = "x" } }))
    H.fails(400, c:patch("a", regolith.null, { { op = "remove", path = "/pk" } }))
    local docs = assert(c:read_many({ { "a", NONE }, { "a", regolith.null } }))
    assert.are.equal(2, #docs)
    assert(c:delete("a", NONE))
    H.fails(404, c:read("a", NONE))
    assert.are.equal(2, assert(c:read("a", regolith.null)).n)
    assert(db:verify())
  end)

  it("runs batches, queries and unique keys in the none partition", function()
    local res = assert(c:batch(NONE, {
      { op = "create", doc = { id = "x", u = 1 } },
      { op = "create", doc = { id = "y", u = 2 } },
      { op = "patch", id = "x", ops = { { op = "set", path = "/v", value = true } } },
      { op = "read", id = "y" },
    }))
    assert.are.equal(4, #res)
    assert.are.equal("y", res[4].doc.id)
    -- a batch op with a key does not belong to a none batch
    H.fails(400, c:batch(NONE, { { op = "create", doc = { id = "z", pk = "p" } } }))
    -- unique keys hold within the none partition, not across partitions
    H.fails(409, c:create({ id = "z", u = 1 }, { partition_key = NONE }))
    assert(c:create({ id = "z", pk = "p", u = 1 }))
    local rows = assert(c:query("SELECT VALUE c.id FROM c ORDER BY c.id", nil,
      { partition_key = NONE }))
    assert.are.same({ "x", "y" }, rows)
    rows = assert(c:query("SELECT VALUE c.id FROM c WHERE NOT IS_DEFINED(c.pk) ORDER BY c.id"))
    assert.are.same({ "x", "y" }, rows)
    rows = assert(c:query("SELECT VALUE COUNT(1) FROM c"))
    assert.are.same({ 3 }, rows)
    assert(db:verify())
  end)

  it("gives the none partition to the change feed and to procedures", function()
    assert(c:create_procedure("add", [[
return function(ctx, id)
  assert(ctx:create({ id = id }))
  local n = ctx:query("SELECT VALUE COUNT(1) FROM c")[1]
  local other = { ctx:create({ id = id .. "-other", pk = "p" }) }
  return { n = n, none = next(ctx.partition_key) == nil and
           getmetatable(ctx.partition_key) ~= nil, other = other[3] }
end]]))
    local r = assert(c:execute("add", NONE, "a"))
    assert.are.same({ n = 1, none = true, other = 400 }, r)
    H.fails(400, c:execute("add", "p", "b"))     -- a document lacking the key
    assert(c:create({ id = "k", pk = "p" }))
    local page = assert(c:changes({ partition_key = NONE, mode = "all_versions" }))
    assert.are.equal(1, #page)
    local pk = page[1].metadata.partition_key
    assert.are.equal("table", type(pk))
    assert.is_nil(next(pk))
    assert.are.equal('{}', regolith.json.encode(pk))
    page = assert(c:changes({ partition_key = NONE }))
    assert.are.equal(1, #page)
    assert.are.equal("a", page[1].id)
    assert(c:delete("a", NONE))
    page = assert(c:changes({ partition_key = NONE, mode = "all_versions" }))
    assert.are.equal("delete", page[2].metadata.operation)
    assert.is_nil(next(page[2].metadata.partition_key))
  end)

  it("is none at every level of a hierarchical key, or refused", function()
    local h = assert(db:create_container("h", { partition_key = { "/t", "/u" } }))
    assert(h:create({ id = "a" }, { partition_key = NONE }))
    H.fails(400, h:create({ id = "b", t = "x" }, { partition_key = NONE }))
    H.fails(400, h:create({ id = "b", t = "x" }))
    assert(h:create({ id = "a", t = "x", u = 1 }))
    assert.is_nil(assert(h:read("a", NONE)).t)
    assert.are.equal("x", assert(h:read("a", { "x", 1 })).t)
    H.fails(400, h:read("a", { "x" }))
    local rows = assert(h:query("SELECT VALUE c.id FROM c", nil, { partition_key = {} }))
    assert.are.same({ "a" }, rows)
    assert(h:create_procedure("count", [[
return function(ctx) return ctx:query("SELECT VALUE COUNT(1) FROM c",
  nil, { partition_key = {} })[1] end]]))
    assert.are.equal(1, assert(h:execute("count", NONE)))
    local page = assert(h:changes({ partition_key = NONE }))
    assert.are.equal(1, #page)
    assert(db:verify())
  end)
end)
