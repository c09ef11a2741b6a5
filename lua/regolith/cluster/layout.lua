--[[
regolith.cluster.layout: where a container's data lives in Redis Cluster.

Buckets.  A container with P = physical_partitions has buckets 0..P-1.  A
partition key hashes (regolith's SipHash, layout.c) to 64 bits whose top 32
are h32; its bucket is floor(h32 * P / 2^32), the same rule as a local feed
range, so feed range r + 1 means the same thing in both modes.

Slots.  Bucket r of container cid lives in slot
    (seed(db, cid) + floor(r * 16384 / P)) mod 16384
and its keys carry the hash tag T[slot]: the shortest decimal string whose
CRC16 mod 16384 is that slot (the table of 16384 tags is computed at first
use).  One bucket is one slot, so a resharding moves whole buckets; the seed
spreads the containers' buckets over the slot space.

Keys (the Functions library, redis/regolith.lua, documents each one):
    rg:<db>:{meta}:catalog | :scripts:<cid> | :secret | :proc:<name>
    rg:<db>:{T}:lsn | :dedup | :lease:<cid>:<proc> | :dead:<cid>:<proc>
    rg:<db>:{T}:<cid>:p:<pk> | :s | :x:<path> | :l | :t | :f | :k
                           | :lock:<pk>

The argument builders at the end produce the Functions' KEYS and ARGV
(format 1) from what the client computes (document text, terms, unique
digests), so that the format lives in two places only: here and at the top
of redis/regolith.lua.
]]

local redis = require "regolith.cluster.redis"

local M = {}

M.FORMAT = "2"
local floor = math.floor

-- {==================================================================
-- Buckets, slots, tags
-- ===================================================================

-- The bucket of a partition key hash's top 32 bits.
function M.bucket(h32, P)
  return floor(h32 * P / 4294967296)
end

-- A container's first slot: spread by the CRC of its database and id.
function M.seed(db, cid)
  return redis.crc16("rg:" .. db .. ":" .. tostring(cid)) % 16384
end

function M.slot(db, cid, r, P)
  return (M.seed(db, cid) + floor(r * 16384 / P)) % 16384
end

local tags, tag_seconds

-- The table of tags: slot -> the shortest decimal string hashing to it.
-- Returns the table and the seconds its computation took (once).
function M.tags()
  if not tags then
    local t0 = os.clock()
    local t, left, n = {}, 16384, 0
    local crc16 = redis.crc16
    while left > 0 do
      local s = tostring(n)
      local slot = crc16(s) % 16384
      if not t[slot] then t[slot] = s; left = left - 1 end
      n = n + 1
    end
    tags, tag_seconds = t, os.clock() - t0
  end
  return tags, tag_seconds
end

function M.tag(slot)
  return (tags or M.tags())[slot]
end

-- }==================================================================

-- {==================================================================
-- Key names
-- ===================================================================

function M.meta_key(db, name)
  return "rg:" .. db .. ":{meta}:" .. name
end

-- The keys of one slot that are not a container's.
function M.slot_prefix(db, slot)
  return "rg:" .. db .. ":{" .. M.tag(slot) .. "}:"
end

-- The keys of bucket r of container cid (of P buckets): a table with the
-- key prefix `pfx`, the slot, and the bucket's own keys.
function M.bucket_keys(db, cid, r, P)
  local slot = M.slot(db, cid, r, P)
  local sp = M.slot_prefix(db, slot)
  local pfx = sp .. tostring(cid) .. ":"
  return {
    slot = slot, pfx = pfx, p_prefix = pfx .. "p:",
    S = pfx .. "s", L = pfx .. "l", T = pfx .. "t", F = pfx .. "f",
    K = pfx .. "k",
    N = sp .. "lsn", D = sp .. "dedup",
  }
end

function M.partition_key(b, pk) return b.p_prefix .. pk end
function M.index_key(b, path) return b.pfx .. "x:" .. path end
function M.lock_key(b, pk) return b.pfx .. "lock:" .. pk end

function M.lease_key(db, slot, cid, proc)
  return M.slot_prefix(db, slot) .. "lease:" .. tostring(cid) .. ":" .. proc
end

function M.dead_key(db, slot, cid, proc)
  return M.slot_prefix(db, slot) .. "dead:" .. tostring(cid) .. ":" .. proc
end

-- }==================================================================

-- {==================================================================
-- Members: ref(pk, id) = pk .. id .. u16(#pk) .. u16(#id)
-- ===================================================================

local function u16(n)
  return string.char(floor(n / 256), n % 256)
end

function M.ref(pk, id)
  return pk .. id .. u16(#pk) .. u16(#id)
end

-- pk, id of a ref or of an index member (term .. ref).
function M.unref(member)
  local n = #member
  local pklen = member:byte(n - 3) * 256 + member:byte(n - 2)
  local idlen = member:byte(n - 1) * 256 + member:byte(n)
  local id_end = n - 4
  local pk_start = id_end - idlen - pklen + 1
  return member:sub(pk_start, pk_start + pklen - 1),
         member:sub(id_end - idlen + 1, id_end)
end

-- The ZRANGEBYLEX bounds of every member starting with prefix.
function M.prefix_range(prefix)
  if prefix == "" then return "-", "+" end
  local i = #prefix
  while i > 0 and prefix:byte(i) == 255 do i = i - 1 end
  if i == 0 then return "[" .. prefix, "+" end
  return "[" .. prefix, "(" .. prefix:sub(1, i - 1) .. string.char(prefix:byte(i) + 1)
end

-- }==================================================================

-- {==================================================================
-- Function arguments (format 1)
-- ===================================================================

local function push(t, ...)
  for i = 1, select("#", ...) do t[#t + 1] = select(i, ...) end
end

-- KEYS and ARGV of rg_write (c.header == nil) or rg_commit, for bucket
-- keys b, partition key tuple pk, the indexed path ids `paths` (every
-- path of the container's index policy), and ops: each
--   {kind = "create"|"replace"|"upsert"|"delete", id = ..., text = json,
--    if_match = etag, ttl = seconds, terms = {{path#, term}...},
--    uniques = {{k#, digest}...}}
-- c: {stream = true, max_bytes = n, ts_path = path#, lsn_path = path#,
-- pv = "...", reads = {{id, etag}...}, dedup = {field, token}, owner =
-- "..."} (each optional; c.header selects rg_commit).
function M.commit_args(b, pk, paths, ops, c)
  c = c or {}
  local keys = { M.partition_key(b, pk), b.S, b.L, b.N, b.T, b.F, b.D,
    M.lock_key(b, pk), b.K }
  for _, p in ipairs(paths) do keys[#keys + 1] = M.index_key(b, p) end
  local argv = { M.FORMAT, pk, c.stream and "f" or "", c.max_bytes or "",
    c.ts_path or "", c.lsn_path or "", #paths }
  for _, p in ipairs(paths) do argv[#argv + 1] = p end
  if c.header then
    push(argv, c.pv or "", #(c.reads or {}))
    for _, rd in ipairs(c.reads or {}) do push(argv, rd[1], rd[2] or "") end
    local d = c.dedup or {}
    push(argv, d[1] or "", d[2] or "", c.owner or "")
  end
  argv[#argv + 1] = #ops
  for _, op in ipairs(ops) do
    push(argv, op.kind, op.id, op.if_match or "", op.ttl or "",
      op.text or "", #(op.terms or {}))
    for _, t in ipairs(op.terms or {}) do push(argv, t[1], t[2]) end
    argv[#argv + 1] = #(op.uniques or {})
    for _, u in ipairs(op.uniques or {}) do push(argv, u[1], u[2]) end
  end
  return keys, argv
end

function M.read_args(b, pk, ids)
  local argv = { M.FORMAT }
  for _, id in ipairs(ids or {}) do argv[#argv + 1] = id end
  return { M.partition_key(b, pk) }, argv
end

-- rg_scan over index path `path` (s.path) or the bucket's partitions:
-- s = {path = id | nil, min = "-", max = "+", limit = n, reverse, members_only}
function M.scan_args(b, s)
  local key = s.path and M.index_key(b, s.path) or b.S
  return { key }, { M.FORMAT, s.path and "x" or "s", b.p_prefix, s.min or "-",
    s.max or "+", s.limit or 100, s.reverse and "1" or "0",
    s.members_only and "0" or "1" }
end

function M.changes_args(b, after, max)
  return { b.L }, { M.FORMAT, b.p_prefix, after or 0, max or 100 }
end

function M.lease_args(lease_key, action, owner, lease_ms, start, epoch)
  return { lease_key }, { M.FORMAT, action, owner, lease_ms, start or "",
    epoch or "" }
end

function M.ack_args(lease_key, dead_key, action, owner, epoch, from, to, payload)
  return { lease_key, dead_key }, { M.FORMAT, action, owner, epoch,
    from or "", to or "", payload or "" }
end

function M.purge_args(b, paths, limit, stream)
  local keys = { b.T, b.S, b.L, b.N, b.F, b.K }
  for _, p in ipairs(paths) do keys[#keys + 1] = M.index_key(b, p) end
  local argv = { M.FORMAT, b.p_prefix, stream and "f" or "", limit or 100, #paths }
  for _, p in ipairs(paths) do argv[#argv + 1] = p end
  return keys, argv
end

-- rg_meta on the catalog (and a container's scripts hash).
function M.meta_args(db, cid, action, ...)
  local catalog = M.meta_key(db, "catalog")
  local scripts = cid and M.meta_key(db, "scripts:" .. tostring(cid)) or catalog
  local argv = { M.FORMAT, action }
  for i = 1, select("#", ...) do argv[#argv + 1] = select(i, ...) end
  return { catalog, scripts }, argv
end

-- }==================================================================

-- {==================================================================
-- The Functions library's source
-- ===================================================================

-- The library's code and version: REGOLITH_FUNCTIONS names the file, else
-- redis/regolith.lua beside this checkout's lua/ folder, else
-- regolith_functions.lua installed beside this module.
function M.library()
  local here = debug.getinfo(1, "S").source:match("^@(.*)layout%.lua$") or "./"
  local candidates = { here .. "../../../redis/regolith.lua",
    here .. "regolith_functions.lua" }
  if os.getenv("REGOLITH_FUNCTIONS") then
    table.insert(candidates, 1, os.getenv("REGOLITH_FUNCTIONS"))
  end
  for _, path in ipairs(candidates) do
    local f = io.open(path, "r")
    if f then
      local code = f:read("*a")
      f:close()
      local version = code:match('\nlocal VERSION = "([^"]+)"')
      if not version then return nil, path .. " has no VERSION line" end
      return code, version, path
    end
  end
  return nil, "the regolith Functions library (redis/regolith.lua) was not found"
end

-- Declares the library to client c and loads it where it is missing or
-- of another version.  Returns the number of primaries loaded.
function M.ensure_library(c)
  local code, version = M.library()
  if not code then return nil, version end
  c:use_library("regolith", code, version, "rg_version")
  return c:ensure_library()
end

-- }==================================================================

return M
