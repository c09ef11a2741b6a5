-- The Functions library (redis/regolith.lua): storage primitives only.
-- rg_get reads points and ranges of a place's tables; rg_apply applies a
-- write set's part when every condition in it holds (and writes nothing
-- when one does not: the slot's keys are DUMPed before and after), moves
-- each written table's version, and stamps the place's lsn over the
-- stand-in.  The parts are made up here, in the format csrc/store/remote.c
-- writes (the engine's own parts are exercised by every cluster spec).
local C = require "cluster.support"
local layout = C.layout

-- A part: "RGW1", the stand-in in its three encodings, the conditions
-- {kind, t, key, want}, the writes {op, t, stamp, key, value}.
-- (big-endian integers by hand: LuaJIT has no string packing)
local function be(n, bytes)
  local out, neg = {}, n < 0
  if neg then n = -n - 1 end            -- two's complement: ~(-n - 1)
  for i = bytes, 1, -1 do
    local b = n % 256
    out[i] = string.char(neg and 255 - b or b)
    n = math.floor(n / 256)
  end
  return table.concat(out)
end
local function u32(n) return be(n, 4) end
local function u64(n) return be(n, 8) end
local function str(s) return u32(#s) .. s end
local function part(stand, conds, writes)
  local out = { "RGW1", str(stand and stand[1] or ""), str(stand and stand[2] or ""),
                str(stand and stand[3] or ""), u32(#conds) }
  for _, c in ipairs(conds) do
    out[#out + 1] = string.char(c[1], c[2]) .. str(c[3]) .. str(c[4] or "")
  end
  out[#out + 1] = u32(#writes)
  for _, w in ipairs(writes) do
    out[#out + 1] = string.char(w[1], w[2], w[3] or 0) .. str(w[4]) .. str(w[5] or "")
  end
  return table.concat(out)
end
local ABSENT, EQUAL, VERSION = 1, 2, 4
local PUT, DEL, ADD = 1, 2, 5
local function counter(items, bytes, bound, drop0)
  return u64(items) .. u64(bytes) .. u64(bound or 0) .. string.char(drop0 and 1 or 0)
end

describe("cluster functions", function()
  if not C.ready(pending) then return end
  local c, keys, slot

  before_each(function()
    c = C.client()
    keys = layout.place_keys(C.fresh_db(), 7, 1, 4)
    slot = C.redis.slot(keys[1])
  end)
  after_each(function() c:close() end)

  local function apply(p) return assert(c:fcall("rg_apply", keys, { "1", p })) end
  local function get(...) return assert(c:fcall_ro("rg_get", keys, { "1", ... })) end
  local function writes_nothing(f)
    local before = C.snapshot(c, slot)
    local r = f()
    assert.same(before, C.snapshot(c, slot))
    return r
  end

  it("reads points and ranges, forwards and backwards, with the table's version", function()
    assert.equal("OK", apply(part(nil, {}, { { PUT, 1, 0, "a", "1" }, { PUT, 1, 0, "b", "2" },
                                             { PUT, 1, 0, "c", "3" } }))[1])
    local r = get("p", 1, "b", "p", 1, "x", "r", 1, "", "0", "0", 2, "r", 1, "c", "1", "1", 5)
    assert.equal("2", r[1])
    assert.equal(C.redis.null, r[2])                      -- absent
    assert.same({ { "a", "b" }, { "1", "2" }, 0, "1" }, r[3])   -- more left
    assert.same({ { "b", "a" }, { "2", "1" }, 1, "1" }, r[4])   -- back from c, exclusive
  end)

  it("applies a part only when its conditions hold, and then moves the versions", function()
    assert.equal("OK", apply(part(nil, { { ABSENT, 1, "a" } }, { { PUT, 1, 0, "a", "v1" } }))[1])
    -- absent, equal, version: each refused with what the place holds now
    local r = writes_nothing(function()
      return apply(part(nil, { { ABSENT, 1, "a" } }, { { PUT, 1, 0, "a", "v2" } }))
    end)
    assert.equal("REFUSED", r[1])
    assert.same({ ABSENT, 1, "a", "v1" }, r[2][1])
    r = writes_nothing(function()
      return apply(part(nil, { { EQUAL, 1, "a", "v0" } }, { { DEL, 1, 0, "a" } }))
    end)
    assert.same({ EQUAL, 1, "a", "v1" }, r[2][1])
    r = writes_nothing(function()
      return apply(part(nil, { { VERSION, 1, "", u64(0) } }, { { PUT, 1, 0, "b", "x" } }))
    end)
    assert.same({ VERSION, 1, "", "1" }, r[2][1])
    assert.equal("OK", apply(part(nil, { { EQUAL, 1, "a", "v1" }, { VERSION, 1, "", u64(1) } },
                                  { { DEL, 1, 0, "a" } }))[1])
    r = get("p", 1, "a", "r", 1, "", "0", "0", 10)
    assert.equal(C.redis.null, r[1])
    assert.same({ {}, {}, 1, "2" }, r[2])
  end)

  it("stamps the place's lsn over the stand-in in the keys and values that hold it", function()
    local b8 = u64(123456789)
    local stand = { b8, "123456789", "\8" .. b8 }
    local before = c:call("TIME")
    local r = apply(part(stand, {}, { { PUT, 5, 1, "k" .. b8, "x" }, { PUT, 1, 2, "d", '{"_lsn":123456789}' } }))
    local lsn = r[2]
    assert.is_true(lsn >= tonumber(before[1]) * 1e6)
    local zs = assert(c:call("ZRANGE", keys[layout.TABLES + 5 + 1], 0, -1))
    assert.same({ "k" .. u64(lsn) }, zs)
    assert.equal(('{"_lsn":%d}'):format(lsn), get("p", 1, "d")[1])
    assert.equal(u64(lsn), get("p", 0, "\1lsn")[1])
    -- the next lsn of the place is larger, whatever the clock says
    local r2 = apply(part(stand, {}, { { PUT, 1, 2, "e", "123456789" } }))
    assert.is_true(r2[2] > lsn)
  end)

  it("adds to counters, refuses a growth past its bound and drops a zero", function()
    assert.equal("OK", apply(part(nil, {}, { { ADD, 0, 0, "s", counter(2, 100, 150) } }))[1])
    local r = writes_nothing(function()
      return apply(part(nil, {}, { { ADD, 0, 0, "s", counter(1, 60, 150) } }))
    end)
    assert.equal("REFUSED", r[1])
    assert.same({ 5, 0, "s", u64(2) .. u64(100) }, r[2][1])
    assert.equal("OK", apply(part(nil, {}, { { ADD, 0, 0, "s", counter(-2, -100, 0, true) } }))[1])
    assert.equal(C.redis.null, get("p", 0, "s")[1])
  end)

  it("adds exactly to a counter below zero (a bucket's share of a container's statistics)", function()
    assert.equal("OK", apply(part(nil, {}, { { ADD, 0, 0, "k", counter(-1, -61) } }))[1])
    assert.same(u64(-1) .. u64(-61), get("p", 0, "k")[1])
    assert.equal("OK", apply(part(nil, {}, { { ADD, 0, 0, "k", counter(3, 2160) } }))[1])
    assert.same(u64(2) .. u64(2099), get("p", 0, "k")[1])
    assert.equal("OK", apply(part(nil, {}, { { ADD, 0, 0, "k", counter(-2, -2100) } }))[1])
    assert.same(u64(0) .. u64(-1), get("p", 0, "k")[1])
  end)

  it("refuses malformed arguments without writing", function()
    for _, args in ipairs({ { "2", part(nil, {}, {}) }, { "1", "XXXX" },
                            { "1", part(nil, {}, { { PUT, 11, 0, "a", "b" } }) },
                            { "1", part(nil, {}, { { PUT, 1, 0, "a", "b" } }):sub(1, -3) } }) do
      writes_nothing(function()
        local v, msg = c:fcall("rg_apply", keys, args)
        assert.is_nil(v)
        assert.matches("regolith", msg)
      end)
    end
    local _, msg = c:fcall("rg_apply", { keys[1] }, { "1", part(nil, {}, {}) })
    assert.matches("23 keys", msg)
  end)
end)
