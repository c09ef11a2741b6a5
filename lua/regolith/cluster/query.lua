--[[
regolith.cluster.query: c:query on a cluster container.

The query is parsed, routed and planned by the local core (S:query,
csrc/host/cluster.c): one logical partition (one bucket) when the options
or the WHERE name it (or a hierarchical key's leading levels: the
partitions with that prefix, in one bucket), else every bucket.  Its
source is
  scan   the bucket's partitions, in order (rg_scan over the partition
         list S, whole partitions at a time), bucket after bucket;
  terms  one index seek per term: rg_scan over the index zset x:<index>
         of every bucket (pipelined), members term .. ref;
  range  one range of an index, the same way.
The documents come back with their members and go to the row pipeline
(Q:add, Q:flush), which orders them by source position, tests the WHERE,
and merges, sorts, aggregates and pages exactly as locally: an index
changes the work, never the answer.  The page stops the reading as soon as
it is complete (a fan-out reads the buckets in order, a window of them per
round trip).  A member whose document is missing (a slot half-moved)
makes the call wait and read again, never counts as absent.
]]

local layout = require "regolith.cluster.layout"
local redis = require "regolith.cluster.redis"
local util = require "regolith.cluster.util"

local Qm = {}

local unpack = table.unpack or unpack

local WINDOW = 16            -- buckets read per round trip in a fan-out
local PAGE = 500             -- members (or partitions) per rg_scan call
local FIRST = 32             -- an index phase's first members per bucket,
                             -- when the page may be complete early

local function scan_cmd(b, spec)
  local keys, argv = layout.scan_args(b, spec)
  return redis.fcall_cmd("FCALL_RO", "rg_scan", keys, argv)
end

-- Is this error reply the one a Function gets for a key it derives (a
-- partition named by an index member) while its slot is half-moved?
local function in_motion(v)
  return redis.is_error(v) and v.message:find("non local key", 1, true) ~= nil
end

-- rg_scan's answer for one bucket read with plain commands, which follow
-- ASK one key at a time: the members (or partition keys), then the
-- partitions' documents.  Expiry is judged by this host's clock.
local function plain_scan(C, b, spec)
  local db = C.db
  local members, err, st
  if spec.path then
    members, err, st = db:call(unpack(scan_cmd(b, { path = spec.path, min = spec.min,
      max = spec.max, limit = spec.limit, reverse = spec.reverse, members_only = true })))
    if not members then return nil, err, st end
    local list, cmds = {}, {}
    for i = 1, #members[2], 2 do
      local m = members[2][i]
      local pk, id = layout.unref(m)
      list[#list + 1] = m
      cmds[#cmds + 1] = { "HMGET", b.p_prefix .. pk, "d:" .. id, "e:" .. id }
    end
    local res = #cmds > 0 and db:pipeline(cmds) or {}
    local pairs_, now = {}, util.now()
    for j, m in ipairs(list) do
      local v = res[j]
      if v and v[1] ~= redis.null and not (v[2] ~= redis.null and tonumber(v[2]) <= now) then
        pairs_[#pairs_ + 1] = m
        pairs_[#pairs_ + 1] = v[1]
      end
    end
    return { members[1], pairs_, {}, members[4] }
  end
  local pks
  pks, err, st = db:call("ZRANGEBYLEX", b.S, spec.min, spec.max, "LIMIT", 0, spec.limit)
  if not pks then return nil, err, st end
  local cmds = {}
  for j, pk in ipairs(pks) do cmds[j] = { "HGETALL", b.p_prefix .. pk } end
  local res = #cmds > 0 and db:pipeline(cmds) or {}
  local pairs_, now = {}, util.now()
  for j, pk in ipairs(pks) do
    local h, f = res[j] or {}, {}
    for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
    for name, text in pairs(f) do
      if name:sub(1, 2) == "d:" then
        local id = name:sub(3)
        local e = tonumber(f["e:" .. id] or "")
        if not (e and e <= now) then
          pairs_[#pairs_ + 1] = layout.ref(pk, id)
          pairs_[#pairs_ + 1] = text
        end
      end
    end
  end
  return { pks[#pks] or "", pairs_, {}, #pks }
end

-- Runs rg_scan for reqs[i] = {b = bucket keys, spec = scan spec},
-- pipelined; a reply naming missing documents (their slot half-moved) is
-- read again after a pause, and then, like one the Function cannot give
-- while its slot moves, with plain commands.
local function scan_all(C, reqs)
  local db = C.db
  local out, pending = {}, {}
  for i = 1, #reqs do pending[#pending + 1] = i end
  for attempt = 1, 100 do
    local batch = {}
    for j, i in ipairs(pending) do batch[j] = scan_cmd(reqs[i].b, reqs[i].spec) end
    local res = util.checkdb(db).redis:pipeline(batch)
    local again = {}
    for j, i in ipairs(pending) do
      local v = res[j]
      if in_motion(v) or (attempt > 2 and not redis.is_error(v) and #v[3] > 0) then
        local err, st
        v, err, st = plain_scan(C, reqs[i].b, reqs[i].spec)
        if not v then return nil, err, st end
      elseif redis.is_error(v) then
        return Qm.redis_fail(v.message, v.kind)
      end
      if #v[3] > 0 then again[#again + 1] = i else out[i] = v end
    end
    if #again == 0 then return out end
    pending = again
    db.redis.t.sleep(math.min(0.2, 0.005 * attempt))
  end
  return nil, "cluster: documents stayed out of reach while their slot moved", 503
end
Qm.scan_all = scan_all

-- Adds the pairs of an rg_scan reply to q.  s-mode replies hold refs;
-- x-mode replies hold index members (term .. ref).
local function add_pairs(q, pairs_, index)
  for i = 1, #pairs_, 2 do
    local m, text = pairs_[i], pairs_[i + 1]
    if index then
      local pk, id = layout.unref(m)
      q:add(layout.ref(pk, id), text, m)
    else
      q:add(m, text)
    end
  end
end

-- The spec of the next rg_scan call after a reply: past its last member.
local function next_spec(spec, reply)
  local s = {}
  for k, v in pairs(spec) do s[k] = v end
  if spec.reverse then s.max = "(" .. reply[1] else s.min = "(" .. reply[1] end
  return s
end

-- Feeds a scan phase: the route's partitions, bucket by bucket (a window
-- per round trip), each page of whole partitions flushed as it comes (a
-- bucket's partitions come in the local scan's order).
local function run_scan(C, q, plan, ph)
  local buckets = {}
  if plan.routed then buckets[1] = plan.bucket
  else for r = ph.resume_bucket or 0, C.P - 1 do buckets[#buckets + 1] = r end end
  local i = 1
  while i <= #buckets do
    local reqs = {}
    for j = i, math.min(#buckets, i + WINDOW - 1) do
      local r = buckets[j]
      local min = ph.min
      if r == ph.resume_bucket and ph.resume_min then min = ph.resume_min end
      reqs[#reqs + 1] = { b = C:bucket(r), spec = { min = min, max = ph.max, limit = PAGE } }
    end
    local got, err, st = scan_all(C, reqs)
    if not got then return nil, err, st end
    for k, req in ipairs(reqs) do
      local reply, spec = got[k], req.spec
      while true do
        add_pairs(q, reply[2], false)
        local done, ferr, fst, made = q:flush(ph.phase)
        if done == nil then return nil, ferr, fst, made end
        if done then return true, nil, nil, nil, true end
        if reply[4] < spec.limit then break end
        spec = next_spec(spec, reply)
        local more
        more, err, st = scan_all(C, { { b = req.b, spec = spec } })
        if not more then return nil, err, st end
        reply = more[1]
      end
    end
    i = i + WINDOW
  end
  return true
end

-- Feeds an index phase (a term, or a range): every bucket of the route
-- at once, a page of members of each per round trip (small at first when
-- the page may be complete early), merged: the pipeline is fed what no
-- later read can precede, up to the frontier of the bucket furthest
-- behind (Q:flush).
local function run_merge(C, q, plan, ph)
  local live = {}
  if plan.routed then live[1] = { b = C:bucket(plan.bucket) }
  else for r = 0, C.P - 1 do live[#live + 1] = { b = C:bucket(r) } end end
  local limit = plan.stream and FIRST or PAGE
  for _, s in ipairs(live) do
    s.spec = { path = plan.index, min = ph.min, max = ph.max, reverse = ph.reverse }
  end
  while #live > 0 do
    local reqs = {}
    for j, s in ipairs(live) do
      s.spec.limit = limit
      reqs[j] = s
    end
    local got, err, st = scan_all(C, reqs)
    if not got then return nil, err, st end
    local still, frontier = {}, {}
    for j, s in ipairs(live) do
      local reply = got[j]
      add_pairs(q, reply[2], true)
      if reply[4] >= limit then      -- more to read: it bounds the frontier
        s.spec = next_spec(s.spec, reply)
        still[#still + 1] = s
        frontier[#frontier + 1] = reply[1]
      end
    end
    live = still
    local done, ferr, fst, made = q:flush(ph.phase, frontier)
    if done == nil then return nil, ferr, fst, made end
    if done then return true, nil, nil, nil, true end
    limit = math.min(PAGE, limit * 4)
  end
  return true
end

-- Feeds the plan's phases in order until the page is complete.
local function run_plan(C, q, plan)
  for _, ph in ipairs(plan.phases) do
    local run = ph.kind == "scan" and run_scan or run_merge
    local ok, err, st, made, done = run(C, q, plan, ph)
    if not ok then return nil, err, st, made end
    if done then return true end
  end
  return true
end

-- One page: rows (or their JSON text when as_text), info.  `feed`, when
-- given, supplies the candidates itself (a transaction's partition).
function Qm.page(C, sql, params, opts, internal, as_text, feed)
  local q, err, st = C.S:query(sql, params, opts, C.db.secret, internal)
  if not q then return nil, err, st end
  local names = q:udf_names()
  if #names > 0 then                 -- their records, run in the stepper
    local recs
    recs, err, st = C:udf_records(names)
    if not recs then return nil, err, st end
    q:use_udfs(C.db.stepper, recs)
  end
  local ok, made
  if feed then
    ok, err, st = feed(q)
    if ok then
      local done
      done, err, st, made = q:flush(0)
      ok = done ~= nil
    end
  else
    ok, err, st, made = run_plan(C, q, q:plan())   -- no FROM: no phase
  end
  if not ok then return nil, err, st, made end
  return q:finish(as_text)
end

local QUERY_OPTS = { partition_key = true, max_items = "number", continuation = "string",
                     full_text_score_scope = "string" }

local function query(C, sql, params, opts)
  local ok, err, st = util.check(C)
  if not ok then return nil, err, st end
  if opts ~= nil and type(opts) ~= "table" then
    error("query: options must be a table, not " .. type(opts), 2)
  end
  for k, v in pairs(opts or {}) do
    if QUERY_OPTS[k] == nil then error("query: unknown option '" .. tostring(k) .. "'", 2) end
    if QUERY_OPTS[k] ~= true and type(v) ~= QUERY_OPTS[k] then
      error("query: option '" .. k .. "' must be a " .. QUERY_OPTS[k], 2)
    end
  end
  local scope = opts and opts.full_text_score_scope
  if scope ~= nil and scope ~= "container" and scope ~= "local" then
    error('query: option \'full_text_score_scope\' is "container" or "local"', 2)
  end
  local rows, info
  rows, info, st = Qm.page(C, sql, params, opts)
  if rows == nil then return nil, info, st end
  info.made, info.work = nil, nil
  return rows, info
end

function Qm.install(M)
  M.Container.query = query
  Qm.redis_fail = M.redis_fail
end

return Qm
