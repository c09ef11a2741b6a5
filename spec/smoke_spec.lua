local regolith = require "regolith"
local H = require "helper"

describe("items", function()
  local db, c
  before_each(function()
    db = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("reads back what it created, with system properties", function()
    local doc, info = c:create({ id = "a", pk = "p", n = 1 })
    assert.are.equal(201, info.status)
    assert.is_string(doc._etag)
    local got = assert(c:read("a", "p"))
    assert.are.equal(1, got.n)
    assert.are.equal(doc._etag, got._etag)
  end)
end)
