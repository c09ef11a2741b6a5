--[[
regolith.cluster.items: the item API of a cluster container.

    c:create(doc, opts)  c:read(id, pk, opts)  c:replace(doc, opts)
    c:upsert(doc, opts)  c:delete(id, pk, opts)  c:read_many(list)
    (c:patch and c:batch are in scripts.lua: they run as transactions)

A write without triggers is one call of rg_write (plus WAIT 1 with
sync = "full", and on a container with a TTL an rg_purge of its bucket's
expired items before it, in the same round trip): the document is checked and turned into its stored text,
index terms and unique-key digests by the local core's own code
(S:prepare), and the Function checks existence, etag, unique keys and the
partition's size before its first write.  A write that names a trigger, or
meets an automatic one, runs as a transaction with its triggers
(scripts.lua).  A read is one HGET (FCALL_RO rg_read for containers with a
TTL, so that an expired item is invisible by the servers' clock).

Commit (below) is the one place ops reach Redis: the indexes a call
declares are those of the new versions plus every index this handle has
seen the container's items use; a stored version with terms in another
index makes the Function answer PATHS, and the call is made again
declaring them.  A partition held by the fenced lock of a contended
procedure (scripts.lua) answers CONFLICT; a write then waits and retries.
]]

local core = require "regolith.core"
local redis = require "regolith.cluster.redis"
local layout = require "regolith.cluster.layout"
local util = require "regolith.cluster.util"

local I = {}

local unpack = table.unpack or unpack

-- {==================================================================
-- Commits
-- ===================================================================

-- ops: {kind, id, text, ttl (seconds or nil), terms = {hex, term, ...},
-- uniques = {k#, digest, ...}}.  ctl: nil for rg_write (one op), or the
-- rg_commit header {pv, reads = {{id, etag}}, dedup = {field, token},
-- owner}.  Returns the Function's reply (OK, FAILED, CONFLICT, DUP) or
-- nil, message, 500.
-- A transactional processor's handler is running (feed.lua): the
-- idempotency token of its next logical write, taken once per write
-- (whatever retries it needs), or nil.
function I.dedup_token(db)
  local dd = db.dedup
  if not dd then return nil end
  dd.n = dd.n + 1
  return { dd.field, dd.base .. ":" .. string.format("%08d", dd.n) }
end

function I.commit(C, r, pk, ops, ctl)
  local b = C:bucket(r)
  for _ = 1, 20 do
    local paths, pos = {}, {}
    local function add(id)
      if not pos[id] then paths[#paths + 1] = id; pos[id] = #paths end
    end
    for _, op in ipairs(ops) do
      local t = op.terms or {}
      for i = 1, #t, 2 do add(t[i]) end
    end
    if C.info.ts_index then add(C.info.ts_index) end
    if C.info.lsn_index then add(C.info.lsn_index) end
    for _, id in ipairs(C.known.list) do add(id) end
    local cops = {}
    for i, op in ipairs(ops) do
      local terms, uniq, t, u = {}, {}, op.terms or {}, op.uniques or {}
      for j = 1, #t, 2 do terms[#terms + 1] = { pos[t[j]], t[j + 1] } end
      for j = 1, #u, 2 do uniq[#uniq + 1] = { u[j], u[j + 1] } end
      cops[i] = { kind = op.kind, id = op.id, text = op.text, ttl = op.ttl,
        if_match = op.if_match, terms = terms, uniques = uniq }
    end
    local c = { stream = C.stream, max_bytes = string.format("%.0f",
      C.info.max_partition_bytes), ts_path = pos[C.info.ts_index],
      lsn_path = pos[C.info.lsn_index] }
    if ctl then
      c.header = true
      c.pv, c.reads, c.dedup, c.owner = ctl.pv, ctl.reads, ctl.dedup, ctl.owner
    end
    local keys, argv = layout.commit_args(b, pk, paths, cops, c)
    local purge                      -- a TTL: the bucket's expired items go
    if C.info.ttl then
      local pk_, pa = layout.purge_args(b, C.known.list, 100, C.stream)
      purge = redis.fcall_cmd("FCALL", "rg_purge", pk_, pa)
    end
    local res, err, st = C.db:fcall_write(ctl and "rg_commit" or "rg_write", keys, argv, purge)
    if res == nil then return nil, err, st end
    C:trim(r)
    if type(err) == "table" and err[1] == "PATHS" then C:learn_paths(err[2]) end
    if res[1] ~= "PATHS" then
      -- the paths of what it stored are paths of the container now
      local t = {}
      for _, op in ipairs(ops) do
        local terms = op.terms or {}
        for i = 1, #terms, 2 do t[#t + 1] = terms[i] end
      end
      C:learn_paths(t)
      return res
    end
    C:learn_paths(res[2])
  end
  return nil, "cluster: the indexes a write must declare kept changing", 500
end

-- Waits a little before retrying a contended partition: random, growing
-- with the attempt, at most 20 ms (docs/cluster.md, Procedures).
function I.backoff(C, attempt)
  local cap = math.min(0.02, 0.0001 * 2 ^ attempt)
  C.db.redis.t.sleep(cap / 2 + math.random() * cap / 2)
end

-- The document the caller of a write gets: the stored text, decoded.
function I.stored_doc(text, etag, ts, lsn)
  return util.decode(util.stored_text(text, etag, ts, lsn))
end

-- }==================================================================

-- {==================================================================
-- Writes
-- ===================================================================

local WRITE_OPTS = { if_match = "text", pre_trigger = "text",
  post_trigger = "text", partition_key = true }
local PATCH_OPTS = { if_match = "text", pre_trigger = "text",
  post_trigger = "text", filter = "text" }
I.WRITE_OPTS, I.PATCH_OPTS = WRITE_OPTS, PATCH_OPTS

local STATUS = { create = 201, replace = 200, delete = 204 }

-- Checks a write's options (misuse raises); returns them, or nil, message,
-- 400 for data that cannot be (NUL).
function I.write_options(opts, allowed, what)
  opts = util.check_options(opts, allowed, what, 3)
  if opts.partition_key ~= nil and (what == "delete" or what == "patch") then
    error(what .. ": unknown option 'partition_key' (the partition key is an " ..
      "argument)", 3)
  end
  for name, t in pairs(allowed) do
    if t == "text" then
      local _, err = util.text_option(opts, name, what, 3)
      if err then return nil, err, 400 end
    end
  end
  return opts
end

-- The partition a write's document goes to, checked as rg_write checks
-- it: the document's own key, or, for one lacking it (the none partition
-- key), the partition the write names (opts.partition_key, a batch's, a
-- procedure's).  `bound` is that named partition's pk, or nil; `msg` the
-- 400 message for a document of another partition.
function I.check_partition(prep, bound, msg)
  if bound and prep.pk ~= bound then return nil, msg, 400 end
  if prep.missing and not bound then return nil, prep.missing, 400 end
  return true
end

I.BIND_MSG = "the document's partition key differs from the partition_key option"

-- One write without triggers: rg_write.  kind: create | replace | upsert |
-- delete; arg: the document, or the id of a delete.
local function write_one(C, kind, arg, pk, opts)
  local op, r, pkstr, err, st
  if kind == "delete" then
    pkstr, r, st = C.S:key(arg, pk)
    if not pkstr then return nil, r, st end
    op = { kind = "delete", id = arg, text = "", if_match = opts.if_match }
  else
    local text, id, terms, uniq, ttl, missing
    text, id, pkstr, r, terms, uniq, ttl, missing = C.S:prepare(arg)
    if not text then return nil, id, pkstr end
    local bound
    if opts.partition_key ~= nil then
      bound, err, st = C.S:pk(opts.partition_key)
      if not bound then return nil, err, st end
    end
    local ok
    ok, err, st = I.check_partition({ pk = pkstr, missing = missing }, bound, I.BIND_MSG)
    if not ok then return nil, err, st end
    op = { kind = kind, id = id, text = text, if_match = opts.if_match,
      terms = terms, uniques = uniq, ttl = ttl > 0 and ttl or nil }
  end
  local res
  local token = I.dedup_token(C.db)
  local ctl = token and { dedup = token }
  for attempt = 1, 200 do
    res, err, st = I.commit(C, r, pkstr, { op }, ctl)
    if res == nil then return nil, err, st end
    if res[1] ~= "CONFLICT" then break end
    I.backoff(C, attempt)            -- a procedure holds the partition
  end
  if res[1] == "FAILED" then return nil, res[4], res[3] end
  if res[1] == "DUP" then                -- applied by an earlier delivery
    if kind == "delete" then return true, util.info(nil, 204) end
    return util.decode(op.text), util.info(nil, kind == "create" and 201 or 200)
  end
  if res[1] ~= "OK" then
    return nil, "cluster: the partition stayed locked by another writer", 503
  end
  local done = res[7][1]
  local work = { written = 1, terms = res[6][3] + res[6][4] }
  local doc = true
  if done ~= "delete" then
    local stored = util.stored_text(op.text, res[5][1], res[3], res[4])
    work.write_extra_kb = util.extra_kb(#stored)
    doc, err, st = util.decode(stored)
    if doc == nil then return nil, err, st end
  end
  local info = util.info(work, STATUS[done])
  if res[5][1] ~= "" then info.etag = res[5][1] end
  return doc, info
end

-- The write methods: the fast path, or a transaction with triggers.
local function writer(kind)
  return function(C, arg, a2, a3)
    local ok, err, st = util.check(C)
    if not ok then return nil, err, st end
    local pk, opts
    if kind == "delete" then pk, opts = a2, a3 else opts = a2 end
    opts, err, st = I.write_options(opts, WRITE_OPTS, kind)
    if not opts then return nil, err, st end
    err, st = C.db:readonly()
    if err then return nil, err, st end
    if kind ~= "delete" and type(arg) ~= "table" then
      return nil, "a document must be a table, not " .. type(arg), 400
    end
    if kind == "delete" and type(arg) ~= "string" then
      return nil, "id must be a string, not " .. type(arg), 400
    end
    local wt
    wt, err, st = C:needs_triggers(kind, opts)
    if wt == nil then return nil, err, st end
    if wt then return C:write_tx(kind, arg, pk, opts) end
    return write_one(C, kind, arg, pk, opts)
  end
end

-- }==================================================================

-- {==================================================================
-- Reads
-- ===================================================================

-- The stored texts of ids in partition pk of bucket r (false: absent);
-- one round trip.  With a TTL, by rg_read (expiry by the servers' clock).
function I.read_texts(C, r, pk, ids)
  local b = C:bucket(r)
  local P = layout.partition_key(b, pk)
  local res, err, st
  if C.info.ttl then
    local keys, argv = layout.read_args(b, pk, ids)
    res, err, st = C.db:call(unpack(redis.fcall_cmd("FCALL_RO", "rg_read", keys, argv)))
    if not res then return nil, err, st end
    for i = 1, #ids do if res[2][i] == redis.null then res[2][i] = false end end
    return res[2], res[3], res[1]
  end
  local cmd = { "HMGET", P }
  for _, id in ipairs(ids) do cmd[#cmd + 1] = "d:" .. id end
  res, err, st = C.db:call(unpack(cmd))
  if not res then return nil, err, st end
  for i = 1, #ids do if res[i] == redis.null then res[i] = false end end
  return res
end

local function read(C, id, pk, opts)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  opts = util.check_options(opts, { if_none_match = "text" }, "read", 2)
  local inm
  inm, err = util.text_option(opts, "if_none_match", "read", 2)
  if err then return nil, err, 400 end
  local pkstr, r
  pkstr, r, st = C.S:key(id, pk)
  if not pkstr then return nil, r, st end
  local texts
  texts, err, st = I.read_texts(C, r, pkstr, { id })
  if not texts then return nil, err, st end
  local text = texts[1]
  if not text then return nil, "item not found", 404 end
  local doc
  doc, err, st = util.decode(text)
  if doc == nil then return nil, err, st end
  if inm and doc._etag == inm then return nil, "not modified", 304 end
  return doc, util.info({ read_units = core.read_units(#text) }, 200)
end

local function read_many(C, list)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  if type(list) ~= "table" then
    return nil, "read_many takes a list of {id, partition key} pairs", 400
  end
  local groups, order, keys = {}, {}, {}
  for i = 1, #list do
    local pair = list[i]
    if type(pair) ~= "table" then
      return nil, ("read_many: entry %d is not an {id, pk} pair"):format(i), 400
    end
    local pkstr, r, kst = C.S:key(pair[1], pair[2])
    if not pkstr then return nil, ("read_many: entry %d: %s"):format(i, r), kst end
    local g = r .. "\0" .. pkstr
    if not groups[g] then groups[g] = { r = r, pk = pkstr, ids = {}, at = {} }; order[#order + 1] = g end
    local grp = groups[g]
    grp.ids[#grp.ids + 1] = pair[1]
    grp.at[#grp.at + 1] = i
    keys[i] = true
  end
  -- one command per partition, pipelined
  local cmds = {}
  for j, g in ipairs(order) do
    local grp = groups[g]
    local b = C:bucket(grp.r)
    if C.info.ttl then
      local k, argv = layout.read_args(b, grp.pk, grp.ids)
      cmds[j] = redis.fcall_cmd("FCALL_RO", "rg_read", k, argv)
    else
      local cmd = { "HMGET", layout.partition_key(b, grp.pk) }
      for _, id in ipairs(grp.ids) do cmd[#cmd + 1] = "d:" .. id end
      cmds[j] = cmd
    end
  end
  local res
  res, err, st = C.db:pipeline(cmds)
  if not res then return nil, err, st end
  local texts, units = {}, 0
  for j, g in ipairs(order) do
    local grp = groups[g]
    local got = C.info.ttl and res[j][2] or res[j]
    for k, i in ipairs(grp.at) do
      local t = got[k]
      if t and t ~= redis.null then texts[i] = t; units = units + core.read_units(#t)
      else units = units + 1 end
    end
  end
  local docs = {}
  for i = 1, #list do
    if texts[i] then
      local doc
      doc, err, st = util.decode(texts[i])
      if doc == nil then return nil, err, st end
      docs[#docs + 1] = doc
    end
  end
  return docs, util.info({ read_units = units }, 200)
end

-- }==================================================================

function I.install(M)
  local C = M.Container
  C.create = writer("create")
  C.replace = writer("replace")
  C.upsert = writer("upsert")
  C.delete = writer("delete")
  C.read = read
  C.read_many = read_many
end

return I
