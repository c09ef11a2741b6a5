--[[
regolith.cluster.scripts: transactions, procedures and triggers on a
cluster container.

    c:execute(name, pk, ...)   c:batch(pk, ops)   c:patch(id, pk, ops, opts)
    writes naming triggers, or meeting automatic ones
    c:create_procedure / replace_procedure / delete_procedure / procedures /
    procedure, and the same for triggers and user-defined functions (udf:
    run by queries, regolith.cluster.query)

A transaction (Tx) works on one logical partition with optimistic
concurrency: what it reads comes from Redis once (rg_read: texts, etags)
into an overlay that its own writes update, so it reads its own writes (a
create of an id it has not read assumes the id free, without a round trip:
when the commit finds it taken, the transaction runs again, reading);
its writes are buffered as ops; every condition (exists 409/404, if_match
412, the patch filter, the partition key binding) is checked against the
overlay as the local write path checks it; and at the end one rg_commit
writes them all, after checking, before its first write, that every item
read still has the etag it had (the read set), that the partition has not
changed since a query read it (its version), and the unique keys and the
partition's size.  Nothing reaches Redis before that call, so a failure,
an abort or a spent budget leaves nothing.  A CONFLICT answer re-runs the
whole transaction (a script runs again from its start: scripts have no
outside effects) after a short random wait; after two conflicts the run
takes the partition's fenced lock (SET NX with a token, released by its
commit), which turns every other writer of the partition away until then.

Procedures and triggers run in regolith's own sandbox, in this process, as
resumable runs (core.stepper): each ctx read, write or query yields its
request here, and serve() answers it from the transaction, with the same
results, messages and budget charges as locally.  Writes through ctx fire
no triggers.  A write's triggers run in its transaction: the pre-triggers
on the incoming document before it is buffered, the post-triggers after,
seeing it (a query in a post-trigger counts the new item).

Script records live in rg:<db>:{meta}:scripts:<cid> ("p:" or "t:" and the
name -> "<version>\0<type>\0<operation>\0<automatic>\0<source>"), changed
by rg_meta.  Named scripts are read at every use; a container's automatic
triggers are cached, and checked against its scripts' version before
every write (or every `script_refresh` seconds, an open option trading
that round trip for a delay before another process's new trigger fires).
]]

local core = require "regolith.core"
local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local util = require "regolith.cluster.util"
local items = require "regolith.cluster.items"
local Qm = require "regolith.cluster.query"

local Sc = {}

local unpack = table.unpack or unpack
local json = core.json

local BOUND = "scripts cannot reference partition keys other than the one " ..
  "for which the request was submitted"
local BATCH_BOUND = "the operation's partition key differs from the batch's"
local MAX_SOURCE = 2 * 1024 * 1024
local LOCK_MS = 2000
local ATTEMPTS = 60

local function pack(...) return { n = select("#", ...), ... } end

-- {==================================================================
-- Script records
-- ===================================================================

local function split_record(v)
  local parts, at = {}, 1
  for _ = 1, 4 do
    local z = v:find("\0", at, true)
    if not z then return nil end
    parts[#parts + 1] = v:sub(at, z - 1)
    at = z + 1
  end
  return { version = tonumber(parts[1]), type = parts[2], op = parts[3],
    automatic = parts[4] == "1", source = v:sub(at) }
end

local function scripts_key(C)
  return layout.meta_key(C.db.name, "scripts:" .. C.cid)
end

-- What a record's tag names: procedures ("p"), triggers ("t") and
-- user-defined functions ("u"), and their names' description.
local WHAT = { p = "procedure", t = "trigger", u = "user-defined function" }
local NAME = { p = "a procedure name", t = "a trigger name", u = "a function name" }

-- The record of procedure ("p"), trigger ("t") or user-defined function
-- ("u") `name`, or nil, msg, 404.
local function record(C, tag, name)
  local v, err, st = C.db:call("HGET", scripts_key(C), tag .. ":" .. name)
  if v == nil then return nil, err, st end
  if v == redis.null then return nil, WHAT[tag] .. " '" .. name .. "' not found", 404 end
  local rec = split_record(v)
  if not rec then return nil, "corrupt script record '" .. name .. "'", 500 end
  return rec
end

-- The records of the user-defined functions `names` (a query's), as
-- Q:use_udfs takes them: name -> {source, version}; absent ones are left
-- out (the call says 404).
local function udf_records(C, names)
  local fields = {}
  for i, n in ipairs(names) do fields[i] = "u:" .. n end
  local vals, err, st = C.db:call("HMGET", scripts_key(C), unpack(fields))
  if vals == nil then return nil, err, st end
  local out = {}
  for i, n in ipairs(names) do
    local rec = vals[i] ~= redis.null and split_record(vals[i])
    if rec then out[n] = { source = rec.source, version = rec.version } end
  end
  return out
end

-- The container's automatic triggers, {name, type, op, rec} in name order.
-- They are read again when the container's scripts' version (catalog
-- v:<cid>, raised by every change) moves: one HGET per write, or none
-- within `script_refresh` seconds of the last check (open option).
local function autos(C)
  local db = C.db
  local cache = db.scripts[C.cid]
  local now = db.redis.t.now()
  if cache and now - cache.at < db.script_refresh then return cache.list end
  local catalog = layout.meta_key(db.name, "catalog")
  local v, err, st = db:call("HGET", catalog, "v:" .. C.cid)
  if v == nil then return nil, err, st end
  if cache and cache.v == v then cache.at = now; return cache.list end
  local all
  all, err, st = db:call("HGETALL", scripts_key(C))
  if all == nil then return nil, err, st end
  local list = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if f:sub(1, 2) == "t:" then
      local rec = split_record(all[i + 1])
      if rec and rec.automatic then
        list[#list + 1] = { name = f:sub(3), type = rec.type, op = rec.op, rec = rec }
      end
    end
  end
  table.sort(list, function(a, b) return a.name < b.name end)
  db.scripts[C.cid] = { at = now, v = v, list = list }
  return list
end

local function runs_on(trig_op, op)
  return trig_op == "all" or trig_op == op
end

-- Does a write of `kind` (create, replace, upsert, delete, patch) with
-- these options run triggers?
function Sc.needs_triggers(C, kind, opts)
  if opts.pre_trigger or opts.post_trigger then return true end
  local list, err, st = autos(C)
  if list == nil then return nil, err, st end
  for _, t in ipairs(list) do
    if kind == "upsert" or runs_on(t.op, kind == "patch" and "replace" or kind) then
      return true
    end
  end
  return false
end

-- }==================================================================

-- {==================================================================
-- Transactions
-- ===================================================================

local Tx = {}
Tx.__index = Tx

local function new_tx(C, r, pk, pkvalue)
  return setmetatable({ C = C, db = C.db, r = r, pk = pk, pkvalue = pkvalue,
    bound = pkvalue ~= nil,
    state = {}, reads = {}, ops = {}, srcs = {}, results = {}, work = {},
    ord = 0, now = util.now() }, Tx)
end

-- Loads items not yet in the overlay (one rg_read).
function Tx:load(ids)
  local need, seen = {}, {}
  for _, id in ipairs(ids) do
    if not self.state[id] and not seen[id] then seen[id] = true; need[#need + 1] = id end
  end
  if #need == 0 then return true end
  local keys, argv = layout.read_args(self.C:bucket(self.r), self.pk, need)
  local res, err, st = self.db:call(unpack(redis.fcall_cmd("FCALL_RO", "rg_read", keys, argv)))
  if not res then return nil, err, st end
  for i, id in ipairs(need) do
    local text, etag = res[2][i], res[3][i]
    if text and text ~= redis.null then
      self.state[id] = { exists = true, text = text, etag = etag }
      self.reads[#self.reads + 1] = { id, etag }
    else
      self.state[id] = { exists = false }
      self.reads[#self.reads + 1] = { id, "" }
    end
  end
  return true
end

function Tx:get(id)
  local ok, err, st = self:load({ id })
  if not ok then return nil, err, st end
  return self.state[id]
end

local function etag_of(doc_text)
  local doc = json.decode(doc_text)
  return doc and doc._etag
end

local function check_if_match(cur, if_match)
  if if_match == nil then return true end
  if not cur.exists then
    return nil, "precondition failed: the item does not exist", 412
  end
  if cur.etag ~= if_match then
    return nil, "precondition failed: the item's etag is " .. tostring(cur.etag) ..
      ", not " .. if_match, 412
  end
  return true
end

-- prepare() as S:prepare, as a table.
local function prepare(C, doc)
  local text, id, pk, r, terms, uniques, ttl, missing = C.S:prepare(doc)
  if not text then return nil, id, pk end
  return { text = text, id = id, pk = pk, r = r, terms = terms, uniques = uniques,
    ttl = ttl > 0 and ttl or nil, missing = missing }
end

-- The index and unique-key entries a write changes, from the stored
-- version `old` (text or nil) to the prepared `new` (or nil): what the
-- local write path counts (charge.c).
local function terms_changed(C, old, new, now)
  local function set_of(p)
    local out = {}
    if not p then return out end
    for i = 1, #p.terms, 2 do out[p.terms[i] .. "\0" .. p.terms[i + 1]] = true end
    for i = 1, #p.uniques, 2 do out["u" .. p.uniques[i] .. "\0" .. p.uniques[i + 1]] = true end
    return out
  end
  local a = set_of(old and prepare(C, old))
  local b = set_of(new)
  local n = 0
  for k in pairs(a) do if not b[k] then n = n + 1 end end
  for k in pairs(b) do if not a[k] then n = n + 1 end end
  -- the entries of _lsn (always new) and _ts (new unless the same second)
  local moves = (old and 1 or 0) + (new and 1 or 0)
  if C.info.lsn_index then n = n + moves end
  if C.info.ts_index and not (old and new and
      tonumber(old:match('"_ts":(%d+)')) == now) then
    n = n + moves
  end
  return n
end

-- Checks that trigger `name` can be named as a `type` trigger on `op`.
local function named_trigger(C, name, type_, op)
  local ok, err, st = core.check_name(name, "a trigger name")
  if not ok then return nil, err, st end
  local rec
  rec, err, st = record(C, "t", name)
  if not rec then return nil, err, st end
  if rec.type ~= type_ then
    return nil, ("trigger '%s' is a %s-trigger; it cannot be named as %s_trigger"):format(
      name, rec.type, type_), 400
  end
  if not runs_on(rec.op, op) then
    return nil, ("trigger '%s' runs on %s; this write is a %s"):format(name, rec.op, op), 400
  end
  return rec
end

local drive

-- Runs the triggers of `type_` ("pre" | "post") on a write `op`: the
-- named one, then the automatic ones in name order.  Returns the last
-- outcome that replaced the body (pre) or replied (post).
function Tx:fire(type_, op, named, body, id)
  local C = self.C
  local list, err, st = autos(C)
  if not list then return nil, err, st end
  local runs = {}
  if named then runs[1] = { name = named, rec = self.named[type_] } end
  for _, t in ipairs(list) do
    if t.type == type_ and runs_on(t.op, op) and t.name ~= named then
      runs[#runs + 1] = t
    end
  end
  local changed
  for _, t in ipairs(runs) do
    local R
    R, err, st = C.db.stepper:start(C.S, { kind = type_, name = t.name,
      source = t.rec.source, version = t.rec.version, pk = self.pkvalue,
      op = op, body = body, id = id })
    if not R then return nil, err, st end
    local out
    out, err, st = drive(self, R)
    if not out then return nil, err, st end
    if out.status ~= 0 then return nil, out.error, out.status end
    if type_ == "pre" and out.body then body = out.body; changed = body end
    if type_ == "post" and out.replied then changed = out; body = out.reply or "null" end
  end
  return true, changed
end

-- Applies one operation to the transaction (o: kind, doc, id, ops,
-- if_match, filter, bound_msg, triggers, pre_trigger, post_trigger): checks
-- it as rg_write does and buffers it.  Returns {status, text, etag} or
-- nil, message, status.
function Tx:apply(o)
  local C = self.C
  local kind, prep, id, err, st = o.kind
  if kind == "create" or kind == "replace" or kind == "upsert" then
    prep, err, st = prepare(C, o.doc)
    if not prep then return nil, err, st end
    local ok
    ok, err, st = items.check_partition(prep, self.bound and self.pk, o.bound_msg)
    if not ok then return nil, err, st end
    if prep.pk ~= self.pk then return nil, o.bound_msg, 400 end
    id = prep.id
  else
    local ok
    ok, err, st = C.S:id(o.id)
    if not ok then return nil, err, st end
    id = o.id
    if kind == "patch" then
      ok, err, st = C.S:patch(nil, o.ops)
      if not ok then return nil, err, st end
    end
  end
  local cur
  if kind == "create" and not self.strict and not self.state[id] then
    -- blind: assumed absent without a read; the commit checks it, and a
    -- refusal runs the transaction again reading first (Tx:commit)
    cur = { exists = false, blind = true }
  else
    cur, err, st = self:get(id)
    if not cur then return nil, err, st end
  end
  if kind == "read" then
    if not cur.exists then
      util.add_work(self.work, { read_units = 1 })
      return nil, "item not found", 404
    end
    util.add_work(self.work, { read_units = core.read_units(#cur.text) })
    return { status = 200, text = cur.text, read = true }
  end
  if kind == "create" then
    if cur.exists then
      return nil, "conflict: an item with id '" .. id .. "' already exists in this partition", 409
    end
  elseif kind == "upsert" then
    local ok
    ok, err, st = check_if_match(cur, o.if_match)
    if not ok then return nil, err, st end
    kind = cur.exists and "replace" or "create"
  else
    if not cur.exists then return nil, "item not found", 404 end
    local ok
    ok, err, st = check_if_match(cur, o.if_match)
    if not ok then return nil, err, st end
  end
  if kind == "patch" then
    local text
    text, err, st = C.S:patch(cur.text, o.ops, o.filter)
    if not text then return nil, err, st end
    prep, err, st = prepare(C, text)
    if not prep then return nil, err, st end
    kind = "replace"
  end
  if o.triggers then
    self.named = {}
    if o.pre_trigger then
      self.named.pre, err, st = named_trigger(C, o.pre_trigger, "pre", kind)
      if not self.named.pre then return nil, err, st end
    end
    if o.post_trigger then
      self.named.post, err, st = named_trigger(C, o.post_trigger, "post", kind)
      if not self.named.post then return nil, err, st end
    end
    local ok, body
    ok, body, st = self:fire("pre", kind, o.pre_trigger, prep and prep.text, id)
    if not ok then return nil, body, st end
    if body then
      prep, err, st = prepare(C, body)
      if not prep then return nil, err, st end
    end
  end
  self.ord = self.ord + 1
  local etag = ('"0-%x"'):format(self.ord)
  local res = { status = kind == "create" and 201 or kind == "delete" and 204 or 200 }
  local op
  if kind == "delete" then
    op = { kind = "delete", id = id, text = "" }
    res.old = cur.text
    self.state[id] = { exists = false, pending = true }
    util.add_work(self.work, { written = 1, terms = terms_changed(C, cur.text, nil, self.now) })
  else
    op = { kind = kind, id = id, text = prep.text, ttl = prep.ttl, terms = prep.terms,
      uniques = prep.uniques }
    res.text = util.pending_text(prep.text, etag, self.now)
    res.etag = etag
    res.prep = prep
    self.state[id] = { exists = true, pending = true, text = res.text, etag = etag }
    util.add_work(self.work, { written = 1,
      write_extra_kb = util.extra_kb(#res.text + 25),
      terms = terms_changed(C, cur.exists and cur.text, prep, self.now) })
  end
  op.blind = cur.blind
  self.ops[#self.ops + 1] = op
  self.srcs[#self.ops] = o.index
  res.op = #self.ops
  if o.triggers then
    local ok, out
    ok, out, st = self:fire("post", kind, o.post_trigger, res.text or res.old, id)
    if not ok then return nil, out, st end
    if out then res.reply = out.reply or "null" end
  end
  return res
end

-- The partition's stored items for a query, read once per transaction,
-- with the partition version that validates them at the commit (read
-- first, in the same round trip).
function Tx:partition()
  if self.items then return self.items end
  local b = self.C:bucket(self.r)
  local rk, ra = layout.read_args(b, self.pk, {})
  local min = "[" .. self.pk
  local pv, err, st = self.db:call(unpack(redis.fcall_cmd("FCALL_RO", "rg_read", rk, ra)))
  if not pv then return nil, err, st end
  local got
  got, err, st = Qm.scan_all(self.C, { { b = b, spec = { min = min, max = min, limit = 1 } } })
  if not got then return nil, err, st end
  if self.qpv == nil then self.qpv = pv[1] end
  self.items = got[1][2]
  return self.items
end

-- A query in the transaction's partition, over its stored items and its
-- own writes: rows (JSON text), info | nil, msg, status, made.
function Tx:query(sql, params, opts, internal)
  local list, err, st = self:partition()
  if not list then return nil, err, st end
  internal.scan = true
  local pk, state = self.pk, self.state
  return Qm.page(self.C, sql, params, opts, internal, true, function(q)
    for i = 1, #list, 2 do
      local _, id = layout.unref(list[i])
      local s = state[id]
      if not (s and s.pending) then q:add(list[i], list[i + 1]) end
    end
    for id, s in pairs(state) do
      if s.pending and s.exists then q:add(layout.ref(pk, id), s.text) end
    end
    return true
  end)
end

-- Writes the buffered ops with one rg_commit.  Returns true; or false
-- (CONFLICT: run again); or nil, message, status, source index.
function Tx:commit(owner, dedup)
  if #self.ops == 0 then
    if owner then self:unlock(owner) end
    return true
  end
  local ctl = { pv = self.qpv or "", reads = self.reads, owner = owner, dedup = dedup }
  local res, err, st = items.commit(self.C, self.r, self.pk, self.ops, ctl)
  if not res then return nil, err, st end
  if res[1] == "CONFLICT" then return false, res[2] end
  if res[1] == "FAILED" then
    if self.ops[res[2]].blind then return false, "blind" end
    return nil, res[4], res[3], self.srcs[res[2]]
  end
  if res[1] == "DUP" then self.dup = true; return true end
  self.lsn, self.ts, self.etags = res[4], res[3], res[5]
  return true
end

function Tx:unlock(owner)
  local b = self.C:bucket(self.r)
  self.db:fcall_write("rg_unlock", { layout.lock_key(b, self.pk) }, { layout.FORMAT, owner })
end

-- The document an applied op gives its caller after the commit.
function Tx:final(res)
  if res.reply then return util.decode(res.reply) end
  if res.read then return util.decode(res.text) end
  if not res.prep then return true end
  if self.dup or not self.etags then return util.decode(res.text) end
  return util.decode(util.stored_text(res.prep.text, self.etags[res.op], self.ts, self.lsn))
end

function Tx:final_etag(res)
  if self.etags and res.op and self.etags[res.op] ~= "" then return self.etags[res.op] end
  return res.etag
end

-- Runs body(tx) in a transaction on partition pk of bucket r until its
-- commit goes through: returns tx and body's results, or nil, message,
-- status (and what body returned after them).
function Sc.transact(C, r, pk, pkvalue, body)
  local owner, strict
  local dedup = items.dedup_token(C.db)
  for attempt = 1, ATTEMPTS do
    local tx = new_tx(C, r, pk, pkvalue)
    tx.strict = strict
    local out = pack(body(tx))
    if out[1] == nil then
      if owner then tx:unlock(owner) end
      return unpack(out, 1, out.n)
    end
    local ok, err, st, idx = tx:commit(owner, dedup)
    if ok then return tx, unpack(out, 1, out.n) end
    if ok == nil then
      if owner then tx:unlock(owner) end
      return nil, err, st, idx
    end
    if err == "blind" then       -- a create assumed absent was not: read
      strict = true
    end
    -- a conflict: wait, and after two of them hold the partition
    if attempt >= 2 and not owner then
      local token = util.random_bytes(8):gsub(".", function(c)
        return ("%02x"):format(c:byte()) end)
      local got = C.db:call("SET", layout.lock_key(C:bucket(r), pk), token, "NX", "PX", LOCK_MS)
      if got == "OK" then owner = token end
    end
    items.backoff(C, attempt)
  end
  return nil, "the partition stayed contended: the transaction was tried " ..
    ATTEMPTS .. " times", 503
end

-- }==================================================================

-- {==================================================================
-- Serving a run's requests
-- ===================================================================

local function serve(tx, req)
  local op = req.op
  if op == "read" then
    local cur, err, st = tx:get(req.id)
    if not cur then return nil, err, st end
    local work = { read_units = cur.exists and core.read_units(#cur.text) or 1 }
    util.add_work(tx.work, work)
    if not cur.exists then
      return { status = 404, message = "item not found", work = work }
    end
    if req.if_none_match and etag_of(cur.text) == req.if_none_match then
      return { status = 304, message = "not modified", work = work }
    end
    return { doc = cur.text, work = work }
  elseif op == "query" then
    local params
    if req.params then params = json.decode(req.params) end
    local rows, info, st, made = tx:query(req.sql, params,
      { max_items = req.max_items, continuation = req.continuation },
      { bound = true, max_rows = req.max_rows, max_bytes = req.max_bytes })
    if not rows then
      if st == 500 or st == 503 then return nil, info, st end
      local stop
      if st == 408 and made and made > req.max_rows then stop = "budget" end
      if st == 413 then stop = "memory" end
      return { status = st, message = info, made = made or 0, stop = stop, work = {} }
    end
    util.add_work(tx.work, info.work)
    return { rows = rows, work = info.work, continuation = info.continuation,
      made = info.made, cross_partition = false }
  end
  local before = {}
  for k, v in pairs(tx.work) do before[k] = v end
  local res, err, st = tx:apply({ kind = op, doc = req.doc, id = req.id, ops = req.ops,
    if_match = req.if_match, filter = req.filter, bound_msg = BOUND })
  local work = {}
  for k, v in pairs(tx.work) do work[k] = v - (before[k] or 0) end
  if not res then
    if st == 500 or st == 503 then return nil, err, st end
    return { status = st, message = err, work = work }
  end
  return { status = res.status, doc = res.text, etag = res.etag, work = work }
end

-- Runs R to its end, answering its requests from tx: the outcome, or nil,
-- message, status when the cluster failed under it.
function drive(tx, R)
  local req = R:resume()
  while not req.done do
    local reply, err, st = serve(tx, req)
    if not reply then R:close(); return nil, err, st end
    req = R:resume(reply)
  end
  util.add_work(tx.work, { scripts = 1 })
  return req
end

-- }==================================================================

-- {==================================================================
-- Procedures, batches, patches, writes with triggers
-- ===================================================================

local function name_arg(name, what, level)
  if type(name) ~= "string" then
    error("bad argument #1: " .. what .. " must be a string, not " .. type(name), level + 1)
  end
  return core.check_name(name, what)
end

-- The checks a call about a named script starts with: the handle, the
-- name (not a string raises), the read-only handle for writes.
local function begin(C, name, what, writes)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  ok, err, st = name_arg(name, what, 3)
  if not ok then return nil, err, st end
  if writes then
    err, st = C.db:readonly()
    if err then return nil, err, st end
  end
  return true
end

local function execute(C, name, pk, ...)
  local ok, err, st = begin(C, name, NAME.p, true)
  if not ok then return nil, err, st end
  local args = pack(...)
  if pk == nil then return nil, "the partition key value is missing", 400 end
  local pkstr, r
  pkstr, r, st = C.S:pk(pk)
  if not pkstr then return nil, r, st end
  local rec
  rec, err, st = record(C, "p", name)
  if not rec then return nil, err, st end
  local tx, out
  tx, out, st = Sc.transact(C, r, pkstr, pk, function(t)
    local R, rerr, rst = C.db.stepper:start(C.S, { kind = "procedure", name = name,
      source = rec.source, version = rec.version, pk = pk, args = args })
    if not R then return nil, rerr, rst end
    local o
    o, rerr, rst = drive(t, R)
    if not o then return nil, rerr, rst end
    if o.status ~= 0 then return nil, o.error, o.status end
    return o
  end)
  if not tx then return nil, out, st end
  local result
  result, err, st = util.decode(out.result or "null")
  if result == nil then return nil, err, st end
  local info = util.info(tx.work, 200)
  info.log = out.log
  return result, info
end

-- A single write that runs triggers, as a transaction.
function Sc.write_tx(C, kind, arg, pk, opts)
  local r, pkstr, st
  if kind == "delete" or kind == "patch" then
    pkstr, r, st = C.S:key(arg, pk)
    if not pkstr then return nil, r, st end
  else
    local prep, err
    prep, err, st = prepare(C, arg)
    if not prep then return nil, err, st end
    pkstr, r = prep.pk, prep.r
    if opts.partition_key ~= nil then
      local bound
      bound, err, st = C.S:pk(opts.partition_key)
      if not bound then return nil, err, st end
      local ok
      ok, err, st = items.check_partition(prep, bound, items.BIND_MSG)
      if not ok then return nil, err, st end
      pk = opts.partition_key
    end
  end
  local tx, res, err
  tx, res, st = Sc.transact(C, r, pkstr, pk, function(t)
    return t:apply({ kind = kind, doc = arg, id = arg, ops = opts.ops,
      if_match = opts.if_match, filter = opts.filter, bound_msg = BOUND,
      triggers = opts.triggers ~= false, pre_trigger = opts.pre_trigger,
      post_trigger = opts.post_trigger })
  end)
  if not tx then return nil, res, st end
  local doc
  doc, err, st = tx:final(res)
  if doc == nil then return nil, err, st end
  local info = util.info(tx.work, res.status)
  local etag = tx:final_etag(res)
  if etag and kind ~= "delete" then info.etag = etag end
  return doc, info
end

local function patch(C, id, pk, ops, opts)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  opts, err, st = items.write_options(opts, items.PATCH_OPTS, "patch")
  if not opts then return nil, err, st end
  err, st = C.db:readonly()
  if err then return nil, err, st end
  if type(id) ~= "string" then return nil, "id must be a string, not " .. type(id), 400 end
  if type(ops) ~= "table" then return nil, "patch operations must be a list of tables", 400 end
  ok, err, st = C.S:patch(nil, ops)
  if not ok then return nil, err, st end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.ops = ops
  local wt
  wt, err, st = Sc.needs_triggers(C, "patch", opts)
  if wt == nil then return nil, err, st end
  o.triggers = wt
  return Sc.write_tx(C, "patch", id, pk, o)
end

local BATCH_FIELDS = { op = true, doc = true, id = true, ops = true, if_match = true,
  filter = true }
local BATCH_OPS = { create = true, replace = true, upsert = true, delete = true,
  patch = true, read = true }

-- Checks one batch op as the local batch does.
local function batch_op(op)
  if type(op) ~= "table" then return nil, "batch operation is not a table", 400 end
  for k in pairs(op) do
    if type(k) ~= "string" or not BATCH_FIELDS[k] then
      return nil, "unknown field '" .. (type(k) == "string" and k or "") .. "'", 400
    end
  end
  if type(op.op) ~= "string" or not BATCH_OPS[op.op] then
    return nil, "op must be create, upsert, replace, read, delete or patch", 400
  end
  if (op.if_match ~= nil and type(op.if_match) ~= "string") or
     (op.filter ~= nil and type(op.filter) ~= "string") then
    return nil, "if_match and filter must be strings", 400
  end
  if op.if_match and op.if_match:find("\0", 1, true) then
    return nil, "option 'if_match' must not contain NUL", 400
  end
  if op.filter and op.filter:find("\0", 1, true) then
    return nil, "option 'filter' must not contain NUL", 400
  end
  local k = op.op
  if k == "read" and type(op.id) ~= "string" then return nil, "read needs an id", 400 end
  if (k == "delete" or k == "patch") and type(op.id) ~= "string" then
    return nil, k .. " needs an id", 400
  end
  if (k == "create" or k == "replace" or k == "upsert") and type(op.doc) ~= "table" then
    return nil, "a document must be a table, not " .. type(op.doc), 400
  end
  if k == "patch" and type(op.ops) ~= "table" then
    return nil, "patch operations must be a list of tables", 400
  end
  return true
end

local function batch(C, pk, ops)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  err, st = C.db:readonly()
  if err then return nil, err, st end
  if type(ops) ~= "table" then return nil, "a batch takes a list of operations", 400 end
  local n = #ops
  if n == 0 then return nil, "a batch needs at least one operation", 400 end
  if n > 100 then return nil, ("a batch takes at most 100 operations, not %d"):format(n), 400 end
  local function failed(msg, status, at)
    local results = {}
    for i = 1, n do results[i] = { status = i == at and status or 424 } end
    return nil, msg, status, results
  end
  local pkstr, r
  pkstr, r, st = C.S:pk(pk)
  if not pkstr then return failed(r, st, 0) end
  local trig
  trig, err, st = Sc.needs_triggers(C, "upsert", {})
  if trig == nil then return nil, err, st end
  local tx, res, at
  tx, res, st, at = Sc.transact(C, r, pkstr, pk, function(t)
    local out = {}
    for i = 1, n do
      local op = ops[i]
      local good, berr, bst = batch_op(op)
      if good and op.op == "patch" then good, berr, bst = C.S:patch(nil, op.ops) end
      local a
      if good then
        a, berr, bst = t:apply({ kind = op.op, doc = op.doc, id = op.id, ops = op.ops,
          if_match = op.if_match, filter = op.filter, bound_msg = BATCH_BOUND,
          triggers = trig, index = i })
      end
      if not a then
        if bst == 500 or bst == 503 then return nil, berr, bst end
        return nil, ("batch operation %d failed: %s"):format(i, berr), bst, i
      end
      out[i] = a
    end
    return out
  end)
  if not tx then
    if st == 500 or st == 503 then return nil, res, st end
    if at and not res:find("^batch operation") then
      res = ("batch operation %d failed: %s"):format(at, res)
    end
    return failed(res, st, at or 0)
  end
  local results = {}
  for i = 1, n do
    local a = res[i]
    local doc
    if a.status ~= 204 then
      doc, err, st = tx:final(a)
      if doc == nil then return nil, err, st end
    end
    results[i] = { status = a.status, doc = doc }
  end
  return results, util.info(tx.work, 200)
end

-- }==================================================================

-- {==================================================================
-- Storing scripts
-- ===================================================================

local function put(C, tag, name, mode, rec_text)
  local keys, argv = layout.meta_args(C.db.name, C.cid, mode and "put" or "del",
    tostring(C.cid), tag .. ":" .. name, mode, rec_text)
  local res, err, st = C.db:call(unpack(redis.fcall_cmd("FCALL", "rg_meta", keys, argv)))
  if res == nil then return nil, err, st end
  C.db.scripts[C.cid] = nil
  local what = WHAT[tag]
  if res[1] ~= "OK" then
    if res[2] == 409 then return nil, what .. " '" .. name .. "' already exists", 409 end
    if res[2] == 404 and res[3]:find("deleted", 1, true) then
      return nil, "container '" .. C.cname .. "' has been deleted", 404
    end
    return nil, what .. " '" .. name .. "' not found", res[2]
  end
  return true, util.info(nil, mode == "create" and 201 or mode and 200 or 204)
end

local function check_source(C, tag, name, src)
  local what = WHAT[tag]
  if type(src) ~= "string" then
    return nil, "the " .. what .. " source must be a string, not " .. type(src), 400
  end
  if #src > MAX_SOURCE then
    return nil, ("the source is %d bytes; the limit is %d"):format(#src, MAX_SOURCE), 413
  end
  return C.db.stepper:check(what, name, src)
end

-- c:create_procedure / replace_procedure and the same for user-defined
-- functions: tag "p" or "u".
local function source_put(tag, mode)
  return function(C, name, src)
    local ok, err, st = begin(C, name, NAME[tag], true)
    if not ok then return nil, err, st end
    if mode then
      ok, err, st = check_source(C, tag, name, src)
      if not ok then return nil, err, st end
    end
    return put(C, tag, name, mode, mode and ("\0\0\0" .. src))
  end
end

local TRIG_OPTS = { type = "string", operation = "string", automatic = "boolean",
  source = true }

local function trig_put(mode)
  local what = mode == "create" and "create_trigger" or "replace_trigger"
  return function(C, name, def)
    local ok, err, st = util.check(C)
    if not ok then return nil, err, st end
    local bad_name
    bad_name, err, st = name_arg(name, "a trigger name", 2)
    if type(def) ~= "table" then
      error("bad argument #2 to '" .. what .. "' (table expected, got " .. type(def) .. ")", 2)
    end
    util.check_options(def, TRIG_OPTS, what, 2)
    if def.type == nil then
      error(what .. ": option 'type' is required (\"pre\" or \"post\")", 2)
    end
    if def.type ~= "pre" and def.type ~= "post" then
      error(what .. ": option 'type' must be \"pre\" or \"post\"", 2)
    end
    local op = def.operation or "all"
    if op ~= "all" and op ~= "create" and op ~= "replace" and op ~= "delete" then
      error(what .. ": option 'operation' must be \"create\", \"replace\", \"delete\" or \"all\"", 2)
    end
    if not bad_name then return nil, err, st end
    err, st = C.db:readonly()
    if err then return nil, err, st end
    ok, err, st = check_source(C, "t", name, def.source)
    if not ok then return nil, err, st end
    return put(C, "t", name, mode, def.type .. "\0" .. op .. "\0" ..
      (def.automatic and "1" or "0") .. "\0" .. def.source)
  end
end

local function deleter(tag, what)
  return function(C, name)
    local ok, err, st = begin(C, name, what, true)
    if not ok then return nil, err, st end
    return put(C, tag, name, nil)
  end
end

local function names(tag)
  return function(C)
    local ok, err, st = util.check(C)
    if not ok then return nil, err, st end
    local all
    all, err, st = C.db:call("HKEYS", scripts_key(C))
    if not all then return nil, err, st end
    local out = {}
    for _, f in ipairs(all) do
      if f:sub(1, 2) == tag .. ":" then out[#out + 1] = f:sub(3) end
    end
    table.sort(out)
    return out
  end
end

local function getter(tag, what)
  return function(C, name)
    local ok, err, st = begin(C, name, what, false)
    if not ok then return nil, err, st end
    local rec
    rec, err, st = record(C, tag, name)
    if not rec then return nil, err, st end
    if tag ~= "t" then return rec.source, util.info(nil, 200) end
    return { type = rec.type, operation = rec.op, automatic = rec.automatic,
      source = rec.source }, util.info(nil, 200)
  end
end

-- }==================================================================

function Sc.install(M)
  local C = M.Container
  C.execute = execute
  C.batch = batch
  C.patch = patch
  C.write_tx = Sc.write_tx
  C.needs_triggers = Sc.needs_triggers
  C.create_procedure = source_put("p", "create")
  C.replace_procedure = source_put("p", "replace")
  C.delete_procedure = deleter("p", NAME.p)
  C.procedures = names("p")
  C.procedure = getter("p", NAME.p)
  C.create_udf = source_put("u", "create")
  C.replace_udf = source_put("u", "replace")
  C.delete_udf = deleter("u", NAME.u)
  C.udfs = names("u")
  C.udf = getter("u", NAME.u)
  C.udf_records = udf_records
  C.create_trigger = trig_put("create")
  C.replace_trigger = trig_put("replace")
  C.delete_trigger = deleter("t", NAME.t)
  C.triggers = names("t")
  C.trigger = getter("t", NAME.t)
end

return Sc
