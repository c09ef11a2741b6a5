--[[
regolith.cluster.feed: the change feed and the processors' state on a
cluster container.

    c:changes{start, continuation, mode, max_items, partition_key, feed_range}
    c:feed_ranges()   c:processors()
    db:processor{...} and db:run_processors{...} (regolith.processor's loop
    over the state below)

Feed range r + 1 is bucket r.  Latest mode reads the bucket's latest-feed
zset L with rg_changes (whole lsn groups: the changes one commit made),
all_versions mode its stream F (ids <lsn>-<ordinal>).  A position is, per
range, the lsn read up to (latest) or the stream id (all_versions).  A read
over several ranges reads each (pipelined) and merges them by lsn: lsns
are per slot (a hybrid clock, microseconds), so the merge is by time,
approximately, not by commit order (docs/cluster.md).

Processors.  One lease per (processor, bucket) in the bucket's slot
(rg_lease: owner, expiry, epoch, checkpoint, attempts, failures,
delivered); live instances heartbeat in rg:<db>:{meta}:proc:<cid>:<name>
(a zset scored by expiry), and each takes at most ceil(P / instances)
leases, renewed every third of lease_seconds.  The checkpoint moves with
rg_ack, which is fenced: a lease lost (expired, taken over: a new epoch) or
a checkpoint moved by someone else refuses it (409, the batch is delivered
again).  Failures count in the lease; after max_attempts the batch goes to
the bucket's dead letters (rg_ack dead) and the range moves on.

transactional = true cannot be one Redis transaction with the handler
running here: instead every write the handler makes through this database
handle carries an idempotency token (the processor, source container and
range, the batch's first position and the write's ordinal in the batch),
and rg_commit skips a write its target slot has already recorded (DUP).
A handler that makes the same writes for the same batch (deterministic)
therefore has its effects exactly once, even when its batch is delivered
again after a crash; a failed handler's writes stay (no rollback).
]]

local core = require "regolith.core"
local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local util = require "regolith.cluster.util"
local keys = require "regolith.keys"

local F = {}

local floor = math.floor

local PAGE_DEFAULT, PAGE_MAX = 100, 100000

-- {==================================================================
-- Reading one range
-- ===================================================================

-- lsn of a position.
local function lsn_of(pos)
  return tonumber((tostring(pos):match("^(%d+)"))) or 0
end

-- The position just before the changes of time t (seconds) or of now, in
-- bucket r: a time after the last change is now, so that later writes
-- are seen.
local function start_pos(C, r, mode, start)
  local lsn
  if start == nil or start == "beginning" then lsn = 0
  else
    local b = C:bucket(r)
    local v, err, st = C.db:call("GET", b.N)
    if v == nil then return nil, err, st end
    lsn = v == redis.null and 0 or tonumber(v)
    if start ~= "now" then lsn = math.min(lsn, math.max(0, floor(start * 1000000) - 1)) end
  end
  if mode == "all_versions" then
    return string.format("%.0f-%s", lsn, lsn == 0 and "0" or "18446744073709551615")
  end
  return string.format("%.0f", lsn)
end

-- The command reading bucket r after pos.
local function read_cmd(C, r, mode, pos, max)
  local b = C:bucket(r)
  if mode == "all_versions" then
    return { "XRANGE", b.F, "(" .. pos, "+", "COUNT", max }
  end
  local k, argv = layout.changes_args(b, pos, max)
  return redis.fcall_cmd("FCALL_RO", "rg_changes", k, argv)
end

-- The entries of a read's reply: {lsn, ord, pk, text, op, ts, ttl_expired,
-- pos}, and the position after them.
local function entries_of(mode, reply, pos)
  local out = {}
  if mode == "all_versions" then
    for _, e in ipairs(reply) do
      local f = {}
      for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
      local lsn, ord = e[1]:match("^(%d+)%-(%d+)$")
      out[#out + 1] = { lsn = tonumber(lsn), ord = tonumber(ord), pk = f.pk,
        id = f.id, text = f.doc, op = f.op, ts = tonumber(f.ts),
        ttl_expired = f.ttl_expired == "1", pos = e[1] }
    end
    return out, #out > 0 and out[#out].pos or pos
  end
  local list = reply[2]
  for i = 1, #list, 3 do
    local pk, id = layout.unref(list[i + 1])
    out[#out + 1] = { lsn = list[i], ord = 0, pk = pk, id = id, text = list[i + 2],
      pos = string.format("%.0f", list[i]) }
  end
  return out, string.format("%.0f", reply[1])
end

-- rg_changes' answer read with plain commands, which follow ASK one key at
-- a time (while a slot is half-moved the Function cannot read the
-- partitions its feed names): whole lsn groups, expiry by this host's
-- clock.
local function plain_changes(C, r, after, max)
  local db, b = C.db, C:bucket(r)
  local got, err, st = db:call("ZRANGEBYSCORE", b.L, "(" .. after, "+inf",
    "WITHSCORES", "LIMIT", 0, max)
  if not got then return nil, err, st end
  if #got == 0 then return { tonumber(after), {}, {} } end
  local last = got[#got]
  if #got == 2 * max then              -- the last lsn group, whole
    local keep = {}
    for i = 1, #got, 2 do
      if got[i + 1] ~= last then keep[#keep + 1] = got[i]; keep[#keep + 1] = got[i + 1] end
    end
    local group
    group, err, st = db:call("ZRANGEBYSCORE", b.L, last, last)
    if not group then return nil, err, st end
    for _, m in ipairs(group) do keep[#keep + 1] = m; keep[#keep + 1] = last end
    got = keep
  end
  local cmds = {}
  for i = 1, #got, 2 do
    local pk, id = layout.unref(got[i])
    cmds[#cmds + 1] = { "HMGET", b.p_prefix .. pk, "d:" .. id, "e:" .. id }
  end
  local res
  res, err, st = db:pipeline(cmds)
  if not res then return nil, err, st end
  local out, now = {}, util.now()
  for k, v in ipairs(res) do
    if v[1] ~= redis.null and not (v[2] ~= redis.null and tonumber(v[2]) <= now) then
      out[#out + 1] = tonumber(got[2 * k])
      out[#out + 1] = got[2 * k - 1]
      out[#out + 1] = v[1]
    end
  end
  return { tonumber(last), out, {} }
end

-- Reads ranges (0-based buckets) from their positions, pipelined, retrying
-- replies that name documents in motion.  Returns {entries, next}, ... .
local function read_ranges(C, mode, buckets, positions, max)
  local cmds = {}
  for i, r in ipairs(buckets) do cmds[i] = read_cmd(C, r, mode, positions[i], max) end
  for attempt = 1, 100 do
    local res = util.checkdb(C.db).redis:pipeline(cmds)
    for i = 1, #buckets do
      local v = res[i]
      if (redis.is_error(v) and v.message:find("non local key", 1, true)) or
         (attempt > 2 and mode ~= "all_versions" and not redis.is_error(v) and #v[3] > 0) then
        local err, st
        res[i], err, st = plain_changes(C, buckets[i], positions[i], max)
        if not res[i] then return nil, err, st end
      elseif redis.is_error(v) then
        return F.redis_fail(v.message, v.kind)
      end
    end
    local moving = false
    if mode ~= "all_versions" then
      for i = 1, #buckets do if #res[i][3] > 0 then moving = true end end
    end
    if not moving then
      local out = {}
      for i = 1, #buckets do
        local list, nxt = entries_of(mode, res[i], positions[i])
        out[i] = { entries = list, next = nxt }
      end
      return out
    end
    C.db.redis.t.sleep(math.min(0.2, 0.005 * attempt))
  end
  return nil, "cluster: changes stayed out of reach while their slot moved", 503
end

-- A change as a Lua value: the document (latest), or {current | previous,
-- metadata} (all_versions).
local function change_of(C, mode, e)
  local doc, err, st = util.decode(e.text)
  if doc == nil then return nil, err, st end
  if mode ~= "all_versions" then return doc end
  C.pk_paths = C.pk_paths or keys.paths(util.decode(C.text))
  local pk = keys.of(doc, C.pk_paths)
  if pk == nil then pk = core.object({}) end     -- the none partition key
  local meta = { operation = e.op, lsn = e.lsn, ts = e.ts, id = doc.id,
    partition_key = pk, ttl_expired = e.ttl_expired }
  if e.op == "delete" then return { previous = doc, metadata = meta } end
  return { current = doc, metadata = meta }
end
F.change_of = change_of

-- }==================================================================

-- {==================================================================
-- c:changes
-- ===================================================================

local CHANGES_OPTS = { start = true, continuation = "text", mode = "string",
  max_items = "number", partition_key = true, feed_range = "number" }

local function check_mode(mode, what, level)
  mode = mode or "latest"
  if mode ~= "latest" and mode ~= "all_versions" then
    error(what .. ": option 'mode' must be \"latest\" or \"all_versions\"", level + 1)
  end
  return mode
end

local function check_start(start, what, level)
  if start == nil or start == "beginning" or start == "now" then return start end
  if type(start) == "number" then
    if start ~= start or start == math.huge or start == -math.huge then
      error(what .. ": option 'start' must be a finite number of seconds", level + 1)
    end
    return start
  end
  error(what .. ": option 'start' must be \"beginning\", \"now\" or a time in " ..
    "seconds since the epoch", level + 1)
end

-- A feed token carries its read: mode, feed range (0: every one), the
-- partition key filtered on (hex, empty for none) and the position in
-- each bucket read; it is sealed for its container.
local function token_seal(C, mode, range, pk, positions)
  local hex = (pk or ""):gsub(".", function(ch) return ("%02x"):format(ch:byte()) end)
  return core.token_seal(C.db.secret, "feed", "feed/" .. C.cid,
    table.concat({ mode, range, hex, table.concat(positions, ",") }, "/"))
end

-- The read a token continues: {mode, range, pk, positions} | nil, msg, 400.
local function token_open(C, tok)
  local payload, err, st = core.token_open(C.db.secret, "feed", "feed/" .. C.cid, tok)
  if not payload then return nil, err, st end
  local mode, range, hex, list = payload:match("^(%a+_?%a*)/(%d+)/(%x*)/([%d,%-]*)$")
  if not mode or #hex % 2 == 1 then
    return nil, "invalid continuation token (altered, truncated, or made " ..
      "for another read or database)", 400
  end
  local t = { mode = mode, range = tonumber(range), positions = {},
    pk = #hex > 0 and hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end) or nil }
  for p in list:gmatch("[^,]+") do t.positions[#t.positions + 1] = p end
  return t
end

-- The token's read against the options given with it: the token's mode,
-- range and partition key apply; an option naming others is 400 (as
-- locally).
local function from_token(t, opts, range, pkstr)
  local function bad(msg)
    return nil, "the continuation token continues a read " .. msg .. ", or start a new read", 400
  end
  if opts.mode ~= nil and opts.mode ~= t.mode then
    return bad(('in mode "%s", not "%s": leave mode out'):format(t.mode, opts.mode))
  end
  if range ~= 0 and range ~= t.range then
    if t.range ~= 0 then
      return bad(("of feed range %d, not %d: leave feed_range out"):format(t.range, range))
    end
    return bad(("of %s, not of feed range %d: leave feed_range out"):format(
      t.pk and "one partition key" or "every feed range", range))
  end
  if pkstr and pkstr ~= t.pk then
    return bad(("%s, not of this partition key: leave partition_key out"):format(
      t.pk and "of another partition key" or t.range ~= 0 and "of one feed range"
      or "of every feed range"))
  end
  return true
end

local function feed_unavailable(C, mode)
  if mode == "all_versions" and not C.info.all_versions then
    return ("container '%s' keeps no all-versions history: create it with " ..
      "change_feed = {all_versions = true} to read all_versions"):format(C.cname), 400
  end
  if mode == "all_versions" and not C.db.stream then
    return "the all_versions feed is off for this database handle (opened " ..
      "with all_versions = false): it was not recorded", 400
  end
end

local function changes(C, opts)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  opts = util.check_options(opts, CHANGES_OPTS, "changes", 2)
  local mode = check_mode(opts.mode, "changes", 2)
  local max = util.integer_option(opts, "max_items", PAGE_DEFAULT, 1, PAGE_MAX, "changes", 2)
  local range = util.integer_option(opts, "feed_range", 0, 1, C.P, "changes", 2)
  local start = check_start(opts.start, "changes", 2)
  err, st = feed_unavailable(C, mode)
  if err then return nil, err, st end
  local buckets, pkstr = {}, nil
  if opts.partition_key ~= nil then
    if range ~= 0 then error("changes: give partition_key or feed_range, not both", 2) end
    local r
    pkstr, r, st = C.S:pk(opts.partition_key)
    if not pkstr then return nil, r, st end
  end
  local positions = {}
  if opts.continuation then         -- the token's read
    local t
    t, err, st = token_open(C, opts.continuation)
    if not t then return nil, err, st end
    ok, err, st = from_token(t, opts, range, pkstr)
    if not ok then return nil, err, st end
    mode, range, pkstr, positions = t.mode, t.range, t.pk, t.positions
    err, st = feed_unavailable(C, mode)
    if err then return nil, err, st end
  end
  if pkstr then                      -- its hash's top 32 bits name it
    local b1, b2, b3, b4 = pkstr:byte(1, 4)
    buckets[1] = layout.bucket(((b1 * 256 + b2) * 256 + b3) * 256 + b4, C.P)
  elseif range ~= 0 then buckets[1] = range - 1
  else for r = 0, C.P - 1 do buckets[#buckets + 1] = r end end
  if opts.continuation then
    if #positions ~= #buckets or range > C.P then
      return nil, "invalid continuation token (altered, truncated, or made " ..
        "for another read or database)", 400
    end
  else
    for i, r in ipairs(buckets) do
      positions[i], err, st = start_pos(C, r, mode, start)
      if not positions[i] then return nil, err, st end
    end
  end
  local got
  got, err, st = read_ranges(C, mode, buckets, positions, max)
  if not got then return nil, err, st end
  -- merge by (lsn, range, ordinal); cut at max without splitting a range's
  -- lsn group in latest mode
  local all = {}
  for i = 1, #buckets do
    for _, e in ipairs(got[i].entries) do e.i = i; all[#all + 1] = e end
  end
  table.sort(all, function(a, b)
    if a.lsn ~= b.lsn then return a.lsn < b.lsn end
    if a.i ~= b.i then return a.i < b.i end
    return a.ord < b.ord
  end)
  local take = #all
  if take > max then
    take = max
    if mode ~= "all_versions" then
      local last = all[take]
      while take < #all and all[take + 1].lsn == last.lsn and all[take + 1].i == last.i do
        take = take + 1
      end
    end
  end
  local out, work, taken = {}, { lookups = #buckets, loaded = 0, loaded_bytes = 0 }, {}
  for k = 1, take do
    local e = all[k]
    taken[e.i] = e.pos
    work.loaded = work.loaded + 1
    if not pkstr or e.pk == pkstr then
      local ch
      ch, err, st = change_of(C, mode, e)
      if ch == nil then return nil, err, st end
      out[#out + 1] = ch
      work.loaded_bytes = work.loaded_bytes + #e.text
    end
  end
  for i = 1, #buckets do
    if taken[i] then positions[i] = taken[i]
    elseif #got[i].entries == 0 then positions[i] = got[i].next end
  end
  local info = util.info(work, 200)
  info.continuation = token_seal(C, mode, range, pkstr, positions)
  info.count = #out
  return out, info
end

local function feed_ranges(C)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  local out = {}
  for r = 1, C.P do out[r] = r end
  return out
end

-- Retention (change_feed.retention): the all_versions entries of bucket
-- r older than the retention that every all_versions processor of the
-- container has checkpointed past go (XTRIM MINID).  Run by those
-- processors' checkpoints and, at most once a second per bucket and
-- handle, by writes.
function F.trim(C, r)
  local keep = C.info.retention
  if not keep or keep < 0 or not C.stream then return true end
  local db = C.db
  local cut = math.max(0, floor((util.now() - keep) * 1000000))
  local all, err, st = db:call("HGETALL", layout.meta_key(db.name, "procs:" .. C.cid))
  if not all then return nil, err, st end
  local cmds = {}
  for i = 1, #all, 2 do
    if all[i + 1] == "all_versions" then
      cmds[#cmds + 1] = { "HGET", layout.lease_key(db.name, C:bucket(r).slot, C.cid,
        all[i]), "ckpt" }
    end
  end
  local minid = string.format("%.0f-0", cut)
  if #cmds > 0 then
    local res
    res, err, st = db:pipeline(cmds)
    if not res then return nil, err, st end
    for _, ck in ipairs(res) do
      if ck == redis.null then return true end    -- one has read nothing yet
      local lsn, ord = ck:match("^(%d+)%-(%d+)$")
      if lsn and tonumber(lsn) < cut then
        minid = lsn .. "-" .. string.format("%.0f", tonumber(ord) + 1)
        cut = tonumber(lsn)
      elseif not lsn then return true end
    end
  end
  return db:call("XTRIM", C:bucket(r).F, "MINID", minid)
end

-- }==================================================================

-- {==================================================================
-- The processors' state (regolith.processor drives it)
-- ===================================================================

local State = {}
State.__index = State

local function procs_key(C)
  return layout.meta_key(C.db.name, "procs:" .. C.cid)
end

local function instances_key(C, name)
  return layout.meta_key(C.db.name, "proc:" .. C.cid .. ":" .. name)
end

local function lease_key(C, name, r)
  return layout.lease_key(C.db.name, C:bucket(r).slot, C.cid, name)
end

local function dead_key(C, name, r)
  return layout.dead_key(C.db.name, C:bucket(r).slot, C.cid, name)
end

local function now_ms(db) return floor(db.redis.t.now() * 1000) end

function F.new_state(C, name, instance, mode, max_items, lease_seconds, max_attempts)
  local ok, msg = core.check_name(name, "a processor name")
  if not ok then error("processor: " .. msg, 3) end
  if type(instance) ~= "string" or #instance < 1 or #instance > 200 or
     instance:find("\0", 1, true) or core.json.encode(instance) == nil then
    error("processor: option 'instance' must be 1 to 200 bytes of UTF-8 " ..
      "without NUL", 3)
  end
  return setmetatable({ C = C, db = C.db, name = name, instance = instance,
    mode = mode == 2 and "all_versions" or "latest", max_items = max_items,
    lease_ms = lease_seconds * 1000, max_attempts = max_attempts,
    leases = {}, batch = {} }, State)
end

-- state:init(opts): the processor is registered with its mode (409 when
-- it exists in the other one); opts.start is kept for ranges never read.
function State:init(opts)
  local C = self.C
  local err, st = feed_unavailable(C, self.mode)
  if err then return nil, err, st end
  local set, have
  set, err, st = self.db:call("HSETNX", procs_key(C), self.name, self.mode)
  if set == nil then return nil, err, st end
  if set == 0 then
    have, err, st = self.db:call("HGET", procs_key(C), self.name)
    if have == nil then return nil, err, st end
    if have ~= self.mode then
      return nil, ("processor '%s' exists on '%s' in %s mode"):format(self.name,
        C.cname, tostring(have)), 409
    end
  end
  -- where each range starts if this name has never read it: now
  self.starts = {}
  for r = 0, C.P - 1 do
    self.starts[r], err, st = start_pos(C, r, self.mode, opts.start)
    if not self.starts[r] then return nil, err, st end
  end
  return true
end

local function lost(r)
  return nil, ("the lease on feed range %d was lost; the batch will be " ..
    "delivered again"):format(r), 409
end

-- Tries to take (or keeps) the lease of bucket r: true when held.
function State:acquire(r)
  local C = self.C
  local k, argv = layout.lease_args(lease_key(C, self.name, r), "acquire",
    self.instance, self.lease_ms, self.starts[r])
  local res, err, st = self.db:fcall_write("rg_lease", k, argv)
  if not res then return nil, err, st end
  if res[1] == "OK" then
    self.leases[r] = { epoch = res[2], ckpt = res[3], attempts = tonumber(res[4]) }
    return true
  end
  self.leases[r] = nil
  return false
end

function State:release(r)
  local l = self.leases[r]
  self.leases[r] = nil
  if not l then return true end
  local k, argv = layout.lease_args(lease_key(self.C, self.name, r), "release",
    self.instance, 0, "", l.epoch)
  return self.db:fcall_write("rg_lease", k, argv)
end

-- state:maintain() -> {range, ...}: heartbeat, renew what is held, take
-- free or expired ranges up to this instance's share, give the excess back.
function State:maintain()
  local C, db = self.C, self.db
  local now = now_ms(db)
  local ik = instances_key(C, self.name)
  local res, err, st = db:pipeline({
    { "HEXISTS", procs_key(C), self.name },
    { "ZADD", ik, now + self.lease_ms, self.instance },
    { "ZREMRANGEBYSCORE", ik, "-inf", now },
    { "ZCARD", ik } })
  if not res then return nil, err, st end
  if res[1] == 0 then return self:gone() end
  table.remove(res, 1)
  local share = math.ceil(C.P / math.max(1, res[3]))
  -- the ranges held first (renewed), then new ones from a place of this
  -- instance's own, so that instances spread out
  local order, first = {}, redis.crc16(self.instance) % C.P
  for r = 0, C.P - 1 do if self.leases[r] then order[#order + 1] = r end end
  for k = 0, C.P - 1 do
    local r = (first + k) % C.P
    if not self.leases[r] then order[#order + 1] = r end
  end
  local held = {}
  for _, r in ipairs(order) do
    if not self.leases[r] and #held >= share then break end
    local ok
    ok, err, st = self:acquire(r)
    if ok == nil then return nil, err, st end
    if ok then held[#held + 1] = r end
  end
  while #held > share do
    self:release(table.remove(held))
  end
  table.sort(held)
  local out = {}
  for i, r in ipairs(held) do out[i] = r + 1 end
  return out
end

-- The next batch of range r (1-based) after its checkpoint.
function State:next_batch(range)
  local C, r = self.C, range - 1
  local l = self.leases[r]
  if not l then return lost(range) end
  local got, err, st = read_ranges(C, self.mode, { r }, { l.ckpt }, self.max_items)
  if not got then return nil, err, st end
  local list, nxt = got[1].entries, got[1].next
  local changes, bytes = {}, 0
  for i, e in ipairs(list) do
    local ch
    ch, err, st = change_of(C, self.mode, e)
    if ch == nil then return nil, err, st end
    changes[i] = ch
    bytes = bytes + #e.text
  end
  if #list > 0 then nxt = list[#list].pos end
  local info = util.info({ lookups = 1, loaded = #list, loaded_bytes = bytes }, 200)
  info.feed_range = range
  info.attempt = (l.attempts or 0) + 1
  self.batch[range] = { from = l.ckpt, to = nxt, n = #list, changes = changes }
  return #list, changes, info
end

function State:ack(range, action, payload)
  local C, r = self.C, range - 1
  local l, b = self.leases[r], self.batch[range]
  if not l or not b then return lost(range) end
  local k, argv = layout.ack_args(lease_key(C, self.name, r), dead_key(C, self.name, r),
    action, self.instance, l.epoch, b.from, b.to, payload)
  local res, err, st = self.db:fcall_write("rg_ack", k, argv)
  if not res then return nil, err, st end
  if res[1] ~= "OK" then
    self.leases[r] = nil
    return lost(range)
  end
  if action ~= "fail" then
    l.ckpt, l.attempts = b.to, 0
    self.batch[range] = nil
    if self.mode == "all_versions" then F.trim(C, r) end
  else
    l.attempts = res[2]
  end
  return res
end

-- state:read(range) -> n, changes, info | 0 | nil, msg, status
function State:read(range)
  local n, changes, info = self:next_batch(range)
  if n == 0 then
    local b = self.batch[range]
    if b and b.to ~= b.from then           -- only expired items: move on
      local ok, err, st = self:ack(range, "ckpt", "0")
      if not ok then return nil, err, st end
    end
  end
  return n, changes, info
end

function State:commit(range)
  local b = self.batch[range]
  local ok, err, st = self:ack(range, "ckpt", tostring(b and b.n or 0))
  if not ok then return nil, err, st end
  return true
end

-- state:fail(range, message) -> attempts, dead_lettered
function State:fail(range, message)
  local res, err, st = self:ack(range, "fail")
  if not res then return nil, err, st end
  local attempts = res[2]
  if attempts < self.max_attempts then return attempts, false end
  local b = self.batch[range]
  local letter = core.json.encode({ seq = now_ms(self.db) * 1000 + math.random(0, 999),
    range = range, changes = b.changes, error = message, attempts = attempts,
    ts = util.now() })
  res, err, st = self:ack(range, "dead", letter)
  if not res then return nil, err, st end
  return attempts, true
end

-- The idempotency token field and base of a batch (dedup: see the top).
local function token_base(pos)
  local lsn, ord = tostring(pos):match("^(%d+)%-?(%d*)$")
  ord = ord ~= "" and ord or "0"
  return string.format("%020.0f.", tonumber(lsn) or 0) .. ("0"):rep(20 - #ord) .. ord
end

-- state:run_tx(range, runner) -> n, true | n, false, err, changes, info
-- | 0 | nil, msg, status: the handler's writes carry idempotency tokens.
function State:run_tx(range, runner)
  local n, changes, info = self:read(range)
  if n == nil or n == 0 then return n, changes, info end
  local b = self.batch[range]
  self.db.dedup = { field = table.concat({ self.name, self.C.cid, range }, "/"),
    base = token_base(b.from), n = 0 }
  local ok, ran, err = pcall(runner, changes, info)
  self.db.dedup = nil
  if not ok then ran, err = false, ran end
  if not ran then return n, false, err, changes, info end
  local done, msg, st = self:commit(range)
  if not done then return nil, msg, st end
  return n, true
end

-- Leases and what waits after each checkpoint.
function State:snapshot()
  local C, db = self.C, self.db
  local cmds = {}
  for r = 0, C.P - 1 do
    cmds[r + 1] = { "HMGET", lease_key(C, self.name, r), "owner", "expires", "ckpt",
      "attempts", "failures", "delivered" }
  end
  local res, err, st = db:pipeline(cmds)
  if not res then return nil, err, st end
  local ls, counts = {}, {}
  for r = 0, C.P - 1 do
    local v = res[r + 1]
    local function val(i) return v[i] ~= redis.null and v[i] or nil end
    local ckpt = val(3) or self.starts[r]
    ls[r] = { owner = val(1), expires = tonumber(val(2) or "0"), ckpt = ckpt,
      attempts = tonumber(val(4) or "0"), failures = tonumber(val(5) or "0"),
      delivered = tonumber(val(6) or "0") }
    local b = C:bucket(r)
    if self.mode == "all_versions" then
      counts[r + 1] = { "XRANGE", b.F, "(" .. ckpt, "+" }
    else
      counts[r + 1] = { "ZCOUNT", b.L, "(" .. string.format("%.0f", lsn_of(ckpt)), "+inf" }
    end
  end
  res, err, st = db:pipeline(counts)
  if not res then return nil, err, st end
  for r = 0, C.P - 1 do
    local v = res[r + 1]
    ls[r].lag = type(v) == "table" and #v or v
  end
  return ls
end

function State:lag()
  local ls, err, st = self:snapshot()
  if not ls then return nil, err, st end
  local total, per = 0, {}
  for r = 0, self.C.P - 1 do
    per[r + 1] = ls[r].lag
    total = total + ls[r].lag
  end
  return total, per
end

function State:ranges()
  local ls, err, st = self:snapshot()
  if not ls then return nil, err, st end
  local now, out = now_ms(self.db), {}
  for r = 0, self.C.P - 1 do
    local l = ls[r]
    local t = { range = r + 1, mode = self.mode, lag = l.lag, failures = l.failures,
      attempts = l.attempts, delivered = l.delivered,
      continuation = token_seal(self.C, self.mode, r + 1, nil, { l.ckpt }) }
    if l.owner and l.owner ~= "" and l.expires > now then
      t.owner, t.expires = l.owner, (l.expires - now) / 1000
    end
    out[r + 1] = t
  end
  return out
end

function State:dead_letters()
  local C = self.C
  local cmds = {}
  for r = 0, C.P - 1 do cmds[r + 1] = { "LRANGE", dead_key(C, self.name, r), 0, -1 } end
  local res, err, st = self.db:pipeline(cmds)
  if not res then return nil, err, st end
  local out = {}
  for r = 0, C.P - 1 do
    for _, text in ipairs(res[r + 1]) do
      local letter = core.json.decode(text)
      if type(letter) ~= "table" then return nil, "corrupt dead letter", 500 end
      letter.text = nil
      out[#out + 1] = letter
    end
  end
  table.sort(out, function(a, b) return a.seq < b.seq end)
  return out
end

function State:drop_dead_letter(seq)
  local C = self.C
  for r = 0, C.P - 1 do
    local k = dead_key(C, self.name, r)
    local list, err, st = self.db:call("LRANGE", k, 0, -1)
    if not list then return nil, err, st end
    for _, text in ipairs(list) do
      local letter = core.json.decode(text)
      if type(letter) == "table" and letter.seq == seq then
        local n
        n, err, st = self.db:call("LREM", k, 1, text)
        if not n then return nil, err, st end
        return true
      end
    end
  end
  return nil, "dead letter " .. tostring(seq) .. " not found", 404
end

function State:clear_dead_letters()
  local C = self.C
  local cmds = {}
  for r = 0, C.P - 1 do cmds[r + 1] = { "LLEN", dead_key(C, self.name, r) } end
  local res, err, st = self.db:pipeline(cmds)
  if not res then return nil, err, st end
  local n = 0
  for r = 0, C.P - 1 do
    n = n + res[r + 1]
    cmds[r + 1] = { "DEL", dead_key(C, self.name, r) }
  end
  res, err, st = self.db:pipeline(cmds)
  if not res then return nil, err, st end
  return n
end

function State:close()
  if self.closed or not self.db.redis then return true end
  self.closed = true
  for r in pairs(self.leases) do self:release(r) end
  self.db:call("ZREM", instances_key(self.C, self.name), self.instance)
  return true
end

function State:gone()
  self.leases = {}
  return nil, ("processor '%s' on '%s' was deleted"):format(self.name, self.C.cname), 404
end

function State:delete()
  local C = self.C
  local cmds = { { "HDEL", procs_key(C), self.name }, { "DEL", instances_key(C, self.name) } }
  for r = 0, C.P - 1 do
    cmds[#cmds + 1] = { "DEL", lease_key(C, self.name, r) }
    cmds[#cmds + 1] = { "DEL", dead_key(C, self.name, r) }
  end
  local res, err, st = self.db:pipeline(cmds)
  if not res then return nil, err, st end
  if res[1] == 0 then return self:gone() end
  self.leases, self.closed = {}, true
  return true
end

-- c:processors() -> {{name, mode}, ...}
local function processors(C)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  local all
  all, err, st = C.db:call("HGETALL", procs_key(C))
  if not all then return nil, err, st end
  local out = {}
  for i = 1, #all, 2 do out[#out + 1] = { name = all[i], mode = all[i + 1] } end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

-- }==================================================================

function F.install(M)
  F.redis_fail = M.redis_fail
  local C = M.Container
  C.changes = changes
  C.feed_ranges = feed_ranges
  C.processors = processors
  M.Db.processor_backend = {
    new = F.new_state,
    in_transaction = function(db) return db.dedup ~= nil end,
    is_container = function(v) return getmetatable(v) == C end,
    handler_may_yield = true,
  }
end

return F
