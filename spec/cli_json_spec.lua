-- The command's JSON writer (members sorted, the codec's rules) and
-- regolith.keys (a document's partition key value).
local H = require "helper"
local regolith = require "regolith"
local cjson = require "regolith.cli.json"
local keys = require "regolith.keys"

describe("regolith.cli.json", function()
  it("writes members in sorted order at every level, the codec's scalars", function()
    local doc = { zeta = 1, alpha = { b = true, a = regolith.null }, id = "x\0y",
                  list = { 3, 2.5, "é" }, empty_a = regolith.array(),
                  empty_o = regolith.object(), ["é"] = 1, B = 2 }
    assert.equal('{"B":2,"alpha":{"a":null,"b":true},"empty_a":[],"empty_o":{},' ..
      '"id":"x\\u0000y","list":[3,2.5,"é"],"zeta":1,"é":1}', cjson.encode(doc))
  end)

  it("gives the same text for a document read back from the store", function()
    local db = H.open()
    local c = assert(db:create_container("c", { partition_key = "/pk" }))
    local doc = { id = "a", pk = "p", nested = { z = { 1, { y = 2, x = 1 } }, a = regolith.array() } }
    assert(c:create(doc))
    local back = assert(c:read("a", "p"))
    back._etag, back._ts, back._lsn = nil, nil, nil
    assert.equal(cjson.encode(doc), cjson.encode(back))
    assert.equal('{"id":"a","nested":{"a":[],"z":[1,{"x":1,"y":2}]},"pk":"p"}', cjson.encode(back))
    db:close()
    H.cleanup()
  end)

  it("refuses what JSON cannot carry with nil, message, 400", function()
    local t = {}
    for _ = 1, 200 do t = { t } end
    for _, bad in ipairs({ { n = 0 / 0 }, { [true] = 1 }, t, { f = print } }) do
      local ok, msg, status = cjson.encode(bad)
      assert.is_nil(ok)
      assert.is_string(msg)
      assert.equal(400, status)
    end
  end)
end)

describe("regolith.keys", function()
  it("finds a document's partition key value, simple or hierarchical", function()
    assert.equal("p1", keys.of({ postId = "p1" }, keys.paths({ partition_key = "/postId" })))
    local paths = keys.paths({ partition_key = { "/t", "/a~1b/c" } })
    assert.same({ "x", 7 }, keys.of({ t = "x", ["a/b"] = { c = 7 } }, paths))
    assert.is_nil(keys.of({ t = "x" }, paths))
    assert.is_nil(keys.of({ postId = { 1 } }, keys.paths({ partition_key = "/postId" })))
    assert.equal(false, keys.of({ k = false }, keys.paths({ partition_key = "/k" })))
  end)
end)
