-- A fetch in the middle of a transaction: a transactional processor's
-- handler runs its calls inside the batch's transaction, and a call that
-- reads what is not fetched yet fetches it between the handler's calls.
-- What that fetch brings never changes what the transaction wrote before
-- it: an entry it deleted stays deleted, an item it replaced keeps its new
-- version, the statistics it changed stay as changed (a deleted index
-- entry that came back would leave the index with an entry no item needs;
-- the blog's truncateFeed did that after a rename).
local C = require "cluster.support"
local regolith = require "regolith"

describe("cluster: a fetch inside a transaction", function()
  if not C.ready(pending) then return end

  -- A database with container c (80 items in partition "a", /z after /pk
  -- in path order) and a source for a transactional processor.
  local function setup()
    local db = assert(regolith.open("redis://" .. C.seeds .. "/" .. C.fresh_db(),
      { sync = "none" }))
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    local src = assert(db:create_container("src", { partition_key = "/pk" }))
    for i = 1, 80 do
      assert(c:create({ id = tostring(i), pk = "a", z = ("%04d"):format(i) }))
    end
    return db, c, src
  end

  local function process(db, src, handler)
    local p = assert(db:processor({ name = "nested", source = "src",
      handler = handler }))
    assert(src:create({ id = "go", pk = "s" }))
    p:run({ until_idle = true })
    p:close()
  end

  it("keeps a delete made before a query that fetches its index range",
    function()
      local db, c, src = setup()
      local counted
      process(db, src, function()
        assert(c:delete("1", "a"))
        local n = assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE c.z >= '0000'",
          nil, { partition_key = "a" }))
        counted = n[1]
      end)
      assert.are.equal(79, counted)
      assert(db:verify())
      assert.is_nil(c:read("1", "a"))
      local n = assert(c:query("SELECT VALUE COUNT(1) FROM c WHERE c.z >= '0000'",
        nil, { partition_key = "a" }))
      assert.are.equal(79, n[1])
      db:close()
    end)

  it("keeps a replace made before a scan that fetches the partition's items",
    function()
      local db, c, src = setup()
      local seen
      process(db, src, function()
        assert(c:upsert({ id = "2", pk = "a", z = "0002 and longer" }))
        local all = assert(c:query("SELECT c.id, c.z FROM c", nil,
          { partition_key = "a" }))
        seen = #all
      end)
      assert.are.equal(80, seen)
      assert(db:verify())
      assert.are.equal("0002 and longer", assert(c:read("2", "a")).z)
      assert.are.equal(81, db:stats().items)   -- c's 80 and src's one
      db:close()
    end)
end)
