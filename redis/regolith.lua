#!lua name=regolith
--[[
regolith's Redis Functions library: storage primitives for regolith on
Redis Cluster (docs/cluster.md).  Loaded on every primary at open
(FUNCTION LOAD REPLACE when the version `rg_version` reports differs from
VERSION below).

It knows no rule of regolith: the engine (regolith's C core, run by each
client) decides what a write does and whether it may; this library keeps
the tables the engine's seam names (csrc/store/kv.h), answers reads, and
applies a write set's part when the reads it was made from still hold.

KEY LAYOUT.  A database's tables are kept per place: the global place
(hash tag {meta}) and each bucket of each container (one physical
partition; its hash tag is the place's slot, lua/regolith/cluster/
layout.lua).  In a place P, with prefix `pfx` = rg:<db>:{T}: and table
number t (0 meta, 1 items, 2 index, 3 unique, 4 ttl, 5 feed, 6 latest,
7 parts, 8 refs, 9 vector, 10 fulltext: csrc/store/layout.h):
  pfx h<t>   hash: key -> value (tables of plain values)
  pfx z<t>   zset (lex, score 0): the table's keys in byte order; for the
             tables of sorted duplicates (2, 6) each member is key | dup
  pfx v      hash: t<t> -> the table's version in the place (moved by
             every write), lsn -> the place's last lsn (also the meta
             table's "\1lsn" in the place, as the engine reads it)
Every function declares the keys of one place (`place_keys` below: the
23 keys in the order h0..h10, z0..z10, v), so one call is one slot.  The
global place's two halves (csrc/store/remote.h) share its h and z keys,
each with its own v (v, v1).

rg_get  (no-writes)  KEYS: a place's 23   ARGV: "1", request...
  request: "p", t, key                  -> the value, or false
           "r", t, key, after ("1"/"0"), back ("1"/"0"), limit
             -> {keys, values, done (1/0), version}: the entries from key
                (exclusive when after) onwards, or backwards from it, at
                most limit; done when none is left past them
  reply: one answer per request, in order

rg_apply  KEYS: a place's 23   ARGV: "1", part
  part (csrc/store/remote.c writes it down): the stand-in for the lsn in
  three encodings, conditions, writes.  Every condition is checked before
  the first write: a value as it was read (equal; or length and last
  bytes, for items), an absence, a table's version; and every counter's
  bound.  Then the writes, each table's version moved, and, when the part
  holds the stand-in, the place's lsn = max(last + 1, TIME in us) put over
  it in the keys and values that hold it.
  reply: {"OK", lsn}   or   {"REFUSED", {kind, t, key, now}...}: what
  each failed condition finds now (false: absent; a version: its number)

rg_tp  KEYS: the database's budgets hash (rg:<db>:{meta}:tp)
       ARGV: field, us, ...
  the words of throughput budgets (csrc/store/throughput.c keeps the
  rule): each field's word = max(word, TIME in us) + us when us > 0
  (read only when 0); us written "=n": the word = n (a setting changed).
  reply: {TIME in us, word...} (a word never set: 0)

rg_version  (no-writes)  -> VERSION
]]

local VERSION = "3.6"
local FORMAT = "1"
local NT = 11
local DUPS = { [2] = 8, [6] = 12 }
local TAIL = 48

-- {==================================================================
-- Bytes
-- ===================================================================

local function bad(msg)
  return error({ err = "ERR regolith: malformed arguments: " .. msg })
end

local function u32(s, i)
  local a, b, c, d = s:byte(i, i + 3)
  if not d then bad("truncated part") end
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- A big-endian u64 as a number (exact below 2^53).
local function u64(s, i)
  return u32(s, i) * 4294967296 + u32(s, i + 4)
end

-- A big-endian two's complement i64 (exact within 2^53 either side).
local function i64(s, i)
  local hi, lo = u32(s, i), u32(s, i + 4)
  if hi >= 2147483648 then hi = hi - 4294967296 end
  return hi * 4294967296 + lo
end

local function be64(n)
  local out = {}
  for k = 8, 1, -1 do
    out[k] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(out)
end

local function fmt(n)
  return string.format("%.0f", n)
end

-- The index term of a whole number from 1 to 2^53 (layout.c: 0x08, then
-- the IEEE double big-endian with the sign bit flipped for positives).
local function number_term(x)
  local d = struct.pack(">d", x)
  return "\8" .. string.char(d:byte(1) + 128) .. d:sub(2)
end

-- Every occurrence of `from` in s replaced with `to` (plain bytes).
local function replace(s, from, to)
  if from == "" then return s end
  local out, i = {}, 1
  while true do
    local a, b = s:find(from, i, true)
    if not a then break end
    out[#out + 1] = s:sub(i, a - 1)
    out[#out + 1] = to
    i = b + 1
  end
  if i == 1 then return s end
  out[#out + 1] = s:sub(i)
  return table.concat(out)
end

-- }==================================================================

-- {==================================================================
-- Places
-- ===================================================================

local function place_keys(keys)
  if #keys ~= 2 * NT + 1 then bad("a place is " .. (2 * NT + 1) .. " keys, not " .. #keys) end
  local P = { h = {}, z = {}, v = keys[2 * NT + 1] }
  for t = 0, NT - 1 do
    P.h[t] = keys[t + 1]
    P.z[t] = keys[NT + t + 1]
  end
  return P
end

local function table_no(s)
  local t = tonumber(s)
  if t == nil or t < 0 or t >= NT or t ~= math.floor(t) then
    bad("table " .. tostring(s))
  end
  return t
end

local function version(P, t)
  return tonumber(redis.call("HGET", P.v, "t" .. t) or "0") or 0
end

local function check_format(argv)
  if argv[1] ~= FORMAT then
    return error({ err = "ERR regolith: argument format " .. tostring(argv[1]) ..
      ", this library speaks " .. FORMAT .. " (library version " .. VERSION .. ")" })
  end
end

-- }==================================================================

-- {==================================================================
-- Reads
-- ===================================================================

-- The lex bound of a key: inclusive or exclusive.
local function bound(key, open)
  if key == "" then return open and "(" or "-" end
  return (open and "(" or "[") .. key
end

local function range(P, t, key, after, back, limit)
  local z = P.z[t]
  local members
  if not back then
    local lo = key == "" and not after and "-" or bound(key, after)
    members = redis.call("ZRANGEBYLEX", z, lo, "+", "LIMIT", 0, limit + 1)
  else
    local hi = key == "" and "+" or bound(key, after)
    members = redis.call("ZREVRANGEBYLEX", z, hi, "-", "LIMIT", 0, limit + 1)
  end
  local done = #members <= limit and 1 or 0
  if #members > limit then members[#members] = nil end
  local values = {}
  if #members > 0 then
    if DUPS[t] then
      for i = 1, #members do values[i] = "" end
    else
      values = redis.call("HMGET", P.h[t], unpack(members))
      for i = 1, #values do values[i] = values[i] or "" end
    end
  end
  return { members, values, done, fmt(version(P, t)) }
end

local function rg_get(keys, argv)
  check_format(argv)
  local P = place_keys(keys)
  local out, i = {}, 2
  while argv[i] do
    local kind, t, key = argv[i], table_no(argv[i + 1]), argv[i + 2]
    if key == nil then bad("request " .. #out + 1) end
    if kind == "p" then
      out[#out + 1] = redis.call("HGET", P.h[t], key) or false
      i = i + 3
    elseif kind == "r" then
      local limit = tonumber(argv[i + 5])
      if not limit or limit < 1 then bad("range limit") end
      out[#out + 1] = range(P, t, key, argv[i + 3] == "1", argv[i + 4] == "1",
        limit)
      i = i + 6
    else
      bad("request kind " .. tostring(kind))
    end
  end
  return out
end

-- }==================================================================

-- {==================================================================
-- Applying a part
-- ===================================================================

-- A reader over a part's bytes.
local function reader(s)
  local r = { i = 1 }
  function r.byte()
    local b = s:byte(r.i)
    if not b then bad("truncated part") end
    r.i = r.i + 1
    return b
  end
  function r.u32()
    local v = u32(s, r.i)
    r.i = r.i + 4
    return v
  end
  function r.str()
    local n = r.u32()
    local v = s:sub(r.i, r.i + n - 1)
    if #v ~= n then bad("truncated part") end
    r.i = r.i + n
    return v
  end
  return r
end

local C_ABSENT, C_EQUAL, C_TAIL, C_VERSION = 1, 2, 3, 4
local W_PUT, W_DEL, W_DPUT, W_DDEL, W_ADD = 1, 2, 3, 4, 5

-- A counter (items, bytes) as stored: two's complement, as the engine
-- adds them (a bucket's share of a container's statistics goes below
-- zero when its writes shrank what other buckets counted; read unsigned,
-- -1 would be 2^64 - 1, which a double cannot add 1 to exactly).
local function counter_of(v)
  if not v or #v ~= 16 then return 0, 0 end
  return i64(v, 1), i64(v, 9)
end

local function rg_apply(keys, argv)
  check_format(argv)
  local P = place_keys(keys)
  local part = argv[2] or bad("no part")
  if part:sub(1, 4) ~= "RGW1" then bad("not a part") end
  local r = reader(part)
  r.i = 5
  local s_be, s_dec, s_term = r.str(), r.str(), r.str()
  -- conditions
  local failed = {}
  for _ = 1, r.u32() do
    local kind, t = r.byte(), table_no(r.byte())
    local key, want = r.str(), r.str()
    if kind == C_ABSENT then
      local v = redis.call("HGET", P.h[t], key)
      if v then failed[#failed + 1] = { kind, t, key, v } end
    elseif kind == C_EQUAL then
      local v = redis.call("HGET", P.h[t], key)
      if v ~= want then failed[#failed + 1] = { kind, t, key, v or false } end
    elseif kind == C_TAIL then
      local v = redis.call("HGET", P.h[t], key)
      if not v or #v ~= u32(want, 1) or v:sub(-TAIL) ~= want:sub(5) then
        failed[#failed + 1] = { kind, t, key, v or false }
      end
    elseif kind == C_VERSION then
      local now = version(P, t)
      if now ~= u64(want, 1) then failed[#failed + 1] = { kind, t, "", fmt(now) } end
    else
      bad("condition kind " .. kind)
    end
  end
  -- writes, read first: the counters' bounds are conditions too
  local writes = {}
  for n = 1, r.u32() do
    local w = { op = r.byte(), t = table_no(r.byte()), stamp = r.byte(), key = r.str() }
    local v = r.str()
    if w.op == W_ADD then
      if #v ~= 25 then bad("counter") end
      w.items, w.bytes, w.bound = i64(v, 1), i64(v, 9), u64(v, 17)
      w.drop0 = v:byte(25) == 1
      local items, bytes = counter_of(redis.call("HGET", P.h[w.t], w.key))
      w.new_items, w.new_bytes = items + w.items, bytes + w.bytes
      if w.bytes > 0 and w.bound > 0 and w.new_bytes > w.bound then
        failed[#failed + 1] = { 5, w.t, w.key, be64(items) .. be64(bytes) }
      end
    else
      w.value = v
    end
    writes[n] = w
  end
  if #failed > 0 then return { "REFUSED", failed } end
  -- the lsn of the place, over the stand-in
  local lsn, l_be, l_dec, l_term = 0
  if s_be ~= "" then
    local t = redis.call("TIME")
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local last = tonumber(redis.call("HGET", P.v, "lsn") or "0") or 0
    lsn = now > last and now or last + 1
    redis.call("HSET", P.v, "lsn", fmt(lsn))
    l_be, l_dec, l_term = be64(lsn), fmt(lsn), number_term(lsn)
    redis.call("HSET", P.h[0], "\1lsn", l_be)     -- the place's last lsn
    redis.call("ZADD", P.z[0], 0, "\1lsn")
  end
  local function stamped(s)
    s = replace(s, s_be, l_be)
    s = replace(s, s_dec, l_dec)
    return replace(s, s_term, l_term)
  end
  local moved = {}
  for _, w in ipairs(writes) do
    local key, value = w.key, w.value
    if lsn > 0 and w.stamp % 2 == 1 then key = stamped(key) end
    if lsn > 0 and math.floor(w.stamp / 2) % 2 == 1 then value = stamped(value) end
    local h, z = P.h[w.t], P.z[w.t]
    if w.op == W_PUT then
      redis.call("HSET", h, key, value)
      redis.call("ZADD", z, 0, key)
    elseif w.op == W_DEL then
      redis.call("HDEL", h, key)
      redis.call("ZREM", z, key)
    elseif w.op == W_DPUT then
      redis.call("ZADD", z, 0, key)
    elseif w.op == W_DDEL then
      redis.call("ZREM", z, key)
    elseif w.op == W_ADD then
      if w.new_items == 0 and w.drop0 then
        redis.call("HDEL", h, key)
        redis.call("ZREM", z, key)
      else
        redis.call("HSET", h, key, be64(w.new_items) .. be64(w.new_bytes))
        redis.call("ZADD", z, 0, key)
      end
    else
      bad("write op " .. w.op)
    end
    moved[w.t] = true
  end
  for t in pairs(moved) do redis.call("HINCRBY", P.v, "t" .. t, 1) end
  return { "OK", lsn }
end

-- }==================================================================

-- {==================================================================
-- Budgets
-- ===================================================================

local function rg_tp(keys, argv)
  local t = redis.call("TIME")
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local out = { now }
  for i = 1, #argv - 1, 2 do
    local w = tonumber(redis.call("HGET", keys[1], argv[i])) or 0
    local a = argv[i + 1]
    local d = tonumber(a) or 0
    if a:sub(1, 1) == "=" then
      w = tonumber(a:sub(2)) or 0
      redis.call("HSET", keys[1], argv[i], string.format("%.0f", w))
    elseif d > 0 then
      w = (w > now and w or now) + d
      redis.call("HSET", keys[1], argv[i], string.format("%.0f", w))
    end
    out[#out + 1] = w
  end
  return out
end

-- }==================================================================

local function wrap(f)
  return function(keys, argv)
    local ok, res = pcall(f, keys, argv)
    if ok then return res end
    if type(res) == "table" and res.err then return redis.error_reply(res.err) end
    return redis.error_reply("ERR regolith: " .. tostring(res))
  end
end

redis.register_function{ function_name = "rg_get", callback = wrap(rg_get),
  flags = { "no-writes" } }
redis.register_function{ function_name = "rg_apply", callback = wrap(rg_apply) }
redis.register_function{ function_name = "rg_tp", callback = wrap(rg_tp) }
redis.register_function{ function_name = "rg_version", flags = { "no-writes" },
  description = VERSION, callback = function() return VERSION end }
