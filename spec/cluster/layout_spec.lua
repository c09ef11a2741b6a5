-- The cluster key layout (lua/regolith/cluster/layout.lua): places, slot
-- pinning through hash tags.
local C = require "cluster.support"
local layout, redis = C.layout, C.redis

describe("cluster layout", function()
  it("has a shortest decimal tag for every slot", function()
    local tags = layout.tags()
    local largest = 0
    for s = 0, 16383 do
      local t = tags[s]
      assert.equal(s, redis.slot("{" .. t .. "}"), "slot " .. s)
      assert.equal(t, tostring(tonumber(t)))
      largest = math.max(largest, tonumber(t))
    end
    -- shortest: no number below the largest tag has fewer digits than the
    -- tag of its slot
    for n = 0, largest do
      local str = tostring(n)
      local tag = tags[redis.crc16(str) % 16384]
      assert.is_true(#tag <= #str, str)
    end
    assert.is_true(largest < 1e6)
  end)

  it("pins a place's keys to one slot, and spreads a container's buckets over the slots", function()
    for r = 0, 15 do
      local slot = layout.slot("db", 42, r, 16)
      local keys = layout.place_keys("db", 42, r, 16)
      assert.equal(2 * layout.TABLES + 1, #keys)
      for _, key in ipairs(keys) do assert.equal(slot, redis.slot(key), key) end
      if r > 0 then
        assert.equal(1024, (slot - layout.slot("db", 42, r - 1, 16)) % 16384)
      end
    end
    assert.are_not.equal(layout.seed("db", 42), layout.seed("db", 43))
  end)

  it("keeps the global place's two halves in one slot, each with its own version", function()
    local g0 = layout.place_keys("db", layout.GLOBAL, 0, 1)
    local g1 = layout.place_keys("db", layout.GLOBAL, 1, 1)
    local slot = redis.slot(g0[1])
    for i, key in ipairs(g0) do
      assert.equal(slot, redis.slot(key))
      assert.equal(slot, redis.slot(g1[i]))
      if i <= 2 * layout.TABLES then assert.equal(key, g1[i]) end
    end
    assert.are_not.equal(g0[2 * layout.TABLES + 1], g1[2 * layout.TABLES + 1])
    assert.equal(slot, redis.slot(layout.seq_key("db")))
  end)

  it("finds the Functions library and its version", function()
    local code, version, path = layout.library()
    assert.matches("^#!lua name=regolith\n", code)
    assert.matches("redis/regolith.lua$", path)
    assert.is_string(version)
  end)
end)
