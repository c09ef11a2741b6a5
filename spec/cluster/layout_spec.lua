-- The cluster key layout (lua/regolith/cluster/layout.lua): buckets, slot
-- pinning through hash tags, member encoding.
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

  it("places a partition key hash in the bucket of its feed range", function()
    assert.equal(0, layout.bucket(0, 4))
    assert.equal(0, layout.bucket(2 ^ 30 - 1, 4))
    assert.equal(1, layout.bucket(2 ^ 30, 4))
    assert.equal(3, layout.bucket(2 ^ 32 - 1, 4))
    assert.equal(0, layout.bucket(2 ^ 32 - 1, 1))
    assert.equal(63, layout.bucket(2 ^ 32 - 1, 64))
  end)

  it("pins a bucket's keys to one slot, and spreads buckets over the slots", function()
    local seen = {}
    for r = 0, 15 do
      local b = layout.bucket_keys("db", 42, r, 16)
      assert.equal(layout.slot("db", 42, r, 16), b.slot)
      for _, key in ipairs({ b.S, b.L, b.T, b.F, b.N, b.D, layout.partition_key(b, "\9a\0\1"),
          layout.index_key(b, "3"), layout.lock_key(b, "\9a\0\1"),
          layout.lease_key("db", b.slot, 42, "p"), layout.dead_key("db", b.slot, 42, "p") }) do
        assert.equal(b.slot, redis.slot(key), key)
      end
      seen[b.slot] = true
      if r > 0 then
        local step = (b.slot - layout.slot("db", 42, r - 1, 16)) % 16384
        assert.equal(1024, step)
      end
    end
    assert.are_not.equal(layout.seed("db", 42), layout.seed("db", 43))
  end)

  it("encodes members so that pk and id come back from the end", function()
    local pk, id = "\9a\0\255b\0\1\8\0\0\0\0\0\0\0\0\128\0", "item/with:odd\255chars"
    local m = "\9term\0\1" .. layout.ref(pk, id)
    local p2, i2 = layout.unref(m)
    assert.equal(pk, p2)
    assert.equal(id, i2)
    local long = string.rep("x", 1023)
    assert.same({ pk, long }, { layout.unref(layout.ref(pk, long)) })
  end)

  it("bounds a prefix's members in a lexical range", function()
    assert.same({ "[ab", "(ac" }, { layout.prefix_range("ab") })
    assert.same({ "[a\255", "(b" }, { layout.prefix_range("a\255") })
    assert.same({ "[\255\255", "+" }, { layout.prefix_range("\255\255") })
    assert.same({ "-", "+" }, { layout.prefix_range("") })
  end)

  it("finds the Functions library and its version", function()
    local code, version, path = layout.library()
    assert.matches("^#!lua name=regolith\n", code)
    assert.matches("redis/regolith.lua$", path)
    assert.is_string(version)
  end)
end)
