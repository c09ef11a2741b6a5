#!lua name=regolith
--[[
regolith's Redis Functions library: the server side of regolith on Redis
Cluster.  Loaded on every primary at open (FUNCTION LOAD REPLACE when the
version that `rg_version` reports differs from VERSION below).

Rules every function keeps:
- it declares the keys it is given by slot: all of one bucket's hash tag, so
  one slot; keys it derives itself (a partition hash named by a member of a
  declared index) share that tag, so they are local too, and a half-moved
  slot answers with an error the client retries instead of a wrong answer;
- a write function checks every condition before its first write (Redis
  never rolls a function back);
- a document is never decoded or encoded here (the embedded cjson rounds
  numbers and turns [] into {}): the client sends the exact JSON text, and
  the system properties are spliced in as text.

KEY LAYOUT (one bucket = one slot, tag T; `pfx` = rg:<db>:{T}:<cid>:)
  pfx p:<pk>     hash, one logical partition:
                   d:<id>  stored JSON text (ends with _etag, _ts, _lsn)
                   m:<id>  cmsgpack {etag, lsn, terms, uniques}: terms a flat
                           list path-id, term, ...; uniques a list of fields
                   e:<id>  expiry in epoch seconds (expiring items only)
                   u:<k>:<digest>  id holding unique key k's values digest
                   \0v     partition version: the lsn of its last write
                   \0n     live and expired-unpurged items, \0b their bytes
                 the hash is deleted with its last item
  pfx s          zset (lex): the partition keys of the bucket
  pfx x:<path>   zset (lex): index entries, member = term .. ref
  pfx l          zset: latest feed, score lsn, member ref
  pfx t          zset: TTL, score expiry seconds, member ref
  pfx f          stream: all-versions feed, id <lsn>-<ordinal>, fields
                   op, pk, id, lsn, ts, doc [, ttl_expired]; doc is the
                   new version, or for a delete the deleted one
  pfx lock:<pk>  string: owner of the partition lock (fairness only)
  pfx k          hash: the bucket's live and expired-unpurged items (n) and
                   their bytes (b)
  rg:<db>:{T}:lsn   string: the slot's last lsn, max(prev + 1, TIME in us)
  rg:<db>:{T}:dedup hash: token field -> last applied token (bytes order)
  rg:<db>:{T}:lease:<cid>:<proc>  hash: owner, expires (ms), ckpt, epoch,
                                        attempts, failures, delivered
  rg:<db>:{T}:dead:<cid>:<proc>   list: dead letters (client's JSON text)

  ref(pk, id) = pk .. id .. u16be(#pk) .. u16be(#id): parsed from the end,
  so an index member (term .. ref) needs no term parser.  pk is the
  partition key's tuple of terms and terms are prefix-free (layout.c).

ARGUMENT FORMAT (version 2).  Every ARGV starts with the format "2".
Counts are decimal; a list is its count followed by its elements.

rg_write / rg_commit  KEYS: 1 P, 2 S, 3 L, 4 N, 5 T, 6 F, 7 D, 8 LOCK, 9 K,
                            10.. X, one per path id listed in ARGV
  ARGV: "2", pk, flags, max-bytes, ts-path#, lsn-path#, npaths, path-id...,
        [commit header], nops, op...
    flags: "f" appends every change to the all-versions stream F
    max-bytes: "" or the logical partition's size limit (403 beyond it)
    ts-path#, lsn-path#: "" or the positions in the path list of the
      indexes of _ts and _lsn, whose terms this function adds (the client
      cannot know the values)
    path ids: every index the new versions have terms in, and every one
      the stored versions have (the client learns those from a PATHS
      answer: a function may only touch keys it declares)
    commit header (rg_commit only):
      pv            "" no check; else the partition version read ("0": absent)
      nreads, (id, etag)...   etag "" means "was absent"; checked as read
      dedup-field, token      "" "" for none; DUP when D[field] >= token
      lock-owner    "" for none; CONFLICT when LOCK holds another owner;
                    the lock is released by a commit of its owner
    op: kind, id, if-match, ttl, text, nterms, (path#, term)...,
        nuniques, (k#, digest)...
      kind    "create" | "replace" | "upsert" | "delete"
      if-match  "" or the etag the item must have (412 otherwise)
      ttl     "" (never expires) or seconds from the commit's _ts
      text    the compact JSON object without _etag/_ts/_lsn ("" to delete)
      path#   1-based position in the path-id list; term: layout.c's bytes
      k#      the unique key's number; digest: its values' digest bytes
  reply:
    {"OK", lsn, ts, pv, {etag or "" per op}, {written, bytes, added,
     removed}, {kind per op: "create" | "replace" | "delete"}}
     (added, removed: index and unique-key entries)
    {"FAILED", op#, status, message}       nothing was written
    {"CONFLICT", message}                  pv, read set or lock: re-run
    {"DUP", token}                         already applied: nothing written
    {"PATHS", {path-id...}}                stored versions have terms in
                                           these undeclared indexes: call
                                           again declaring them
  rg_write is rg_commit without the commit header and with one op.

rg_read  (no-writes)  KEYS: P   ARGV: "1", id...
  reply: {pv, {text or false...}, {etag or false...}}  (expired: false)

rg_scan  (no-writes)  KEYS: X (mode "x") or S (mode "s")
  ARGV: "1", mode, p-prefix (pfx .. "p:"), min, max, limit, reverse ("1"),
        docs ("1": documents, "0": members only)
    x: ZRANGEBYLEX min max (ZREVRANGEBYLEX max min when reversed) over
       index members; s: the same over partition keys, each partition's
       live items in field order
  reply: {last, {member, text...}, {retry...}, examined}
    last: the last member read ("" if none), the next call's exclusive
    bound; retry: members whose document is missing (a slot in motion):
    the caller retries, never takes them as absent.  s members are refs.

rg_changes  (no-writes)  KEYS: L   ARGV: "1", p-prefix, after-lsn, max
  reply: {last-lsn, {lsn, ref, text...}, {retry...}}  whole lsn groups only;
  expired items are skipped; last-lsn = after-lsn when nothing is newer

rg_lease  KEYS: LEASE  ARGV: "1", action, owner, lease-ms, start-ckpt, epoch
  acquire: free, expired or already ours -> {"OK", epoch, ckpt, attempts,
           expires}; a new owner gets epoch + 1; else {"HELD", owner, expires}
  renew:   ours, same epoch, not expired -> {"OK", ...}; else {"LOST", owner, epoch}
  release: ours, same epoch -> {"OK"}; else {"LOST", owner, epoch}

rg_ack  KEYS: LEASE, DEAD  ARGV: "1", action, owner, epoch, from, to, payload
  fenced: ours, same epoch, not expired (else {"LOST", owner, epoch}) and
  the checkpoint still `from` (else {"MOVED", ckpt}); then
  ckpt: ckpt = to, attempts = 0, delivered + payload -> {"OK", to}
  fail: attempts + 1, failures + 1 -> {"OK", attempts}
  dead: RPUSH DEAD payload, ckpt = to, attempts = 0 -> {"OK", to, dead count}

rg_purge  KEYS: 1 T, 2 S, 3 L, 4 N, 5 F, 6 K, 7.. X
  ARGV: "2", p-prefix, flags, limit, npaths, path-id...
  removes up to `limit` expired items as deletes (stream entries marked
  ttl_expired), under one lsn.  reply: {purged, lsn}, or {"PATHS", {...}}
  as rg_commit

rg_meta  KEYS: 1 CATALOG (rg:<db>:{meta}:catalog), 2 SCRIPTS
               (rg:<db>:{meta}:scripts:<cid>, or the catalog again)
  ARGV: "2", action, ...
  create name spec max  -> {"OK", cid} | {"FAILED", 409 | 403, message}
                          catalog: n:<name> -> cid, c:<cid> -> spec text,
                          \0cid the last cid (never reused)
  drop name cid          -> {"OK"} | {"FAILED", 404, message}; deletes the
                          container's scripts
  put cid name mode record -> {"OK", version} | {"FAILED", status, message}
                          mode "create" (409 when it exists) or "replace"
                          (404 when not); record: "<type>\0<op>\0<auto>\0
                          <source>", stored as "<version>\0" .. record;
                          catalog v:<cid>, the container's scripts'
                          version, is raised by every put and del
  del cid name           -> {"OK"} | {"FAILED", 404, message}

rg_unlock  KEYS: LOCK  ARGV: "2", owner
  deletes the partition lock if `owner` holds it -> 1, else 0

rg_version  (no-writes)  -> VERSION (also the description FUNCTION LIST shows)
]]

local VERSION = "2.6"
local FORMAT = "2"

-- {==================================================================
-- Arguments
-- ===================================================================

local function bad(msg)
  return error({ err = "ERR regolith: malformed arguments: " .. msg })
end

-- A cursor over ARGV.
local function reader(argv)
  local r = { i = 1 }
  function r.str()
    local v = argv[r.i]
    if v == nil then bad("argument " .. r.i .. " is missing") end
    r.i = r.i + 1
    return v
  end
  function r.num()
    local s = r.str()
    local n = tonumber(s)
    if n == nil or n < 0 or n ~= math.floor(n) then
      bad("argument " .. (r.i - 1) .. " is not a count: " .. s)
    end
    return n
  end
  return r
end

local function check_format(argv)
  if argv[1] ~= FORMAT then
    return error({ err = "ERR regolith: argument format " .. tostring(argv[1]) ..
      ", this library speaks " .. FORMAT .. " (library version " .. VERSION .. ")" })
  end
end

-- The cursor over a call's ARGV, past its checked format.
local function args_of(argv)
  check_format(argv)
  local r = reader(argv)
  r.str()
  return r
end

local function u16(n)
  return string.char(math.floor(n / 256), n % 256)
end

-- (layout.lua has the client's copy of ref and unref: this file runs inside
-- Redis and cannot share code with the client.)
local function ref(pk, id)
  return pk .. id .. u16(#pk) .. u16(#id)
end

local function unref(member)
  local n = #member
  local pklen = member:byte(n - 3) * 256 + member:byte(n - 2)
  local idlen = member:byte(n - 1) * 256 + member:byte(n)
  local id_end = n - 4
  local pk_start = id_end - idlen - pklen + 1
  return member:sub(pk_start, pk_start + pklen - 1),
         member:sub(id_end - idlen + 1, id_end)
end

local function now_us()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
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

-- The next lsn of the slot: max(prev + 1, now); next_lsn stores it.
local function peek_lsn(nkey, now)
  local prev = tonumber(redis.call("GET", nkey) or "0") or 0
  if now <= prev then return prev + 1 end
  return now
end

local function next_lsn(nkey, now)
  local lsn = peek_lsn(nkey, now)
  redis.call("SET", nkey, fmt(lsn))
  return lsn
end

-- }==================================================================

-- {==================================================================
-- Items: the stored state, and the one function that changes it
-- ===================================================================

-- The stored state of item id in partition hash P: meta (or nil when not
-- stored), its text's length, and whether it is visible (stored and not
-- expired at `now_s`).
local function load_item(P, id, now_s)
  local v = redis.call("HMGET", P, "m:" .. id, "e:" .. id)
  if not v[1] then return { stored = false, visible = false } end
  local m = cmsgpack.unpack(v[1])
  local expiry = tonumber(v[2] or "")
  return { stored = true, meta = m, etag = m[1], expiry = expiry,
    bytes = redis.call("HSTRLEN", P, "d:" .. id),
    visible = expiry == nil or expiry > now_s }
end

-- The stored text: the client's text with the system properties appended.
local function stored_text(text, etag, ts, lsn)
  local sys = '"_etag":"\\"' .. etag:sub(2, -2) .. '\\"","_ts":' .. fmt(ts) ..
    ',"_lsn":' .. fmt(lsn) .. "}"
  if text == "{}" then return "{" .. sys end
  return text:sub(1, -2) .. "," .. sys
end

-- Applies one change to the stored state.  ctx: keys (P, S, L, T, F, X by
-- path id), pk, flags, lsn, ts, now_s, work counters.  old: load_item's
-- result; new: nil (delete) or {id, text, etag, terms, uniques, expiry}.
-- `op` names the change in the stream.
local function apply(ctx, id, old, new, op, ttl_expired)
  local P, w = ctx.P, ctx.work
  local r = ref(ctx.pk, id)
  local old_terms, old_uniq = {}, {}
  if old.stored then
    local t = old.meta[3]
    for i = 1, #t, 2 do old_terms[t[i] .. "\0" .. t[i + 1]] = { t[i], t[i + 1] } end
    for _, f in ipairs(old.meta[4]) do old_uniq[f] = true end
  end
  local new_terms, new_uniq = {}, {}
  if new then
    for i = 1, #new.terms, 2 do
      new_terms[new.terms[i] .. "\0" .. new.terms[i + 1]] = { new.terms[i], new.terms[i + 1] }
    end
    for _, f in ipairs(new.uniques) do new_uniq[f] = true end
  end
  for k, pt in pairs(old_terms) do
    if not new_terms[k] then
      redis.call("ZREM", ctx.X[pt[1]], pt[2] .. r)
      w.removed = w.removed + 1
    end
  end
  for k, pt in pairs(new_terms) do
    if not old_terms[k] then
      redis.call("ZADD", ctx.X[pt[1]], 0, pt[2] .. r)
      w.added = w.added + 1
    end
  end
  for f in pairs(old_uniq) do
    if not new_uniq[f] then
      redis.call("HDEL", P, f)
      w.removed = w.removed + 1
    end
  end
  for f in pairs(new_uniq) do
    if not old_uniq[f] then w.added = w.added + 1 end
    redis.call("HSET", P, f, id)
  end
  local text = ""
  if new then
    text = stored_text(new.text, new.etag, ctx.ts, ctx.lsn)
    local meta = cmsgpack.pack({ new.etag, ctx.lsn, new.terms, new.uniques })
    redis.call("HSET", P, "d:" .. id, text, "m:" .. id, meta)
    if new.expiry then
      redis.call("HSET", P, "e:" .. id, fmt(new.expiry))
      redis.call("ZADD", ctx.T, new.expiry, r)
    elseif old.expiry then
      redis.call("HDEL", P, "e:" .. id)
      redis.call("ZREM", ctx.T, r)
    end
    redis.call("ZADD", ctx.L, ctx.lsn, r)
    if not old.stored then
      redis.call("HINCRBY", P, "\0n", 1)
      redis.call("HINCRBY", ctx.K, "n", 1)
    end
    redis.call("HINCRBY", P, "\0b", #text - (old.bytes or 0))
    redis.call("HINCRBY", ctx.K, "b", #text - (old.bytes or 0))
    w.written = w.written + 1
    w.bytes = w.bytes + #text
  else
    if ctx.stream then text = redis.call("HGET", P, "d:" .. id) or "" end
    redis.call("HDEL", P, "d:" .. id, "m:" .. id, "e:" .. id)
    if old.expiry then redis.call("ZREM", ctx.T, r) end
    redis.call("ZREM", ctx.L, r)
    redis.call("HINCRBY", P, "\0n", -1)
    redis.call("HINCRBY", P, "\0b", -(old.bytes or 0))
    redis.call("HINCRBY", ctx.K, "n", -1)
    redis.call("HINCRBY", ctx.K, "b", -(old.bytes or 0))
    w.written = w.written + 1
  end
  if ctx.stream then
    local fields = { "XADD", ctx.F, fmt(ctx.lsn) .. "-" .. ctx.ord, "op", op,
      "pk", ctx.pk, "id", id, "lsn", fmt(ctx.lsn), "ts", fmt(ctx.ts), "doc", text }
    if ttl_expired then fields[#fields + 1] = "ttl_expired"; fields[#fields + 1] = "1" end
    redis.call(unpack(fields))
  end
  ctx.ord = ctx.ord + 1
end

-- After the changes of one partition: its version and its place in S, or
-- its removal with its last item.
local function settle_partition(ctx)
  local n = tonumber(redis.call("HGET", ctx.P, "\0n") or "0")
  if n <= 0 then
    redis.call("DEL", ctx.P)
    redis.call("ZREM", ctx.S, ctx.pk)
  else
    redis.call("HSET", ctx.P, "\0v", fmt(ctx.lsn))
    redis.call("ZADD", ctx.S, 0, ctx.pk)
  end
end

-- The X keys by path id: KEYS[first..] named by the path list of ARGV.
local function read_paths(r, keys, first)
  local n = r.num()
  local X, ids = {}, {}
  for i = 1, n do
    local pid = r.str()
    if keys[first + i - 1] == nil then bad("index path " .. pid .. " has no key") end
    X[pid] = keys[first + i - 1]
    ids[i] = pid
  end
  return X, ids
end

-- }==================================================================

-- {==================================================================
-- rg_write and rg_commit
-- ===================================================================

local function parse_op(r, path_ids)
  local op = { kind = r.str(), id = r.str(), if_match = r.str(), ttl = r.str(),
    text = r.str(), terms = {}, uniques = {} }
  if op.kind ~= "create" and op.kind ~= "replace" and op.kind ~= "upsert" and
     op.kind ~= "delete" then bad("unknown op kind '" .. op.kind .. "'") end
  if op.id == "" then bad("an op without id") end
  if op.kind ~= "delete" and (op.text:sub(1, 1) ~= "{" or op.text:sub(-1) ~= "}") then
    bad("the text of '" .. op.id .. "' is not a JSON object")
  end
  if op.ttl ~= "" and tonumber(op.ttl) == nil then bad("ttl '" .. op.ttl .. "'") end
  for _ = 1, r.num() do
    local pos = r.num()
    local pid = path_ids[pos]
    if pid == nil then bad("term of path #" .. pos .. ", which the call does not list") end
    op.terms[#op.terms + 1] = pid
    op.terms[#op.terms + 1] = r.str()
  end
  for _ = 1, r.num() do
    local k = r.str()
    op.uniques[#op.uniques + 1] = "u:" .. k .. ":" .. r.str()
  end
  return op
end

-- The path ids of stored items' terms that X does not declare.
local function undeclared(X, metas)
  local missing, seen = {}, {}
  for _, m in ipairs(metas) do
    local t = m[3]
    for i = 1, #t, 2 do
      if X[t[i]] == nil and not seen[t[i]] then
        seen[t[i]] = true
        missing[#missing + 1] = t[i]
      end
    end
  end
  return missing
end

local function commit(keys, argv, with_header)
  local r = args_of(argv)
  local ctx = { P = keys[1], S = keys[2], L = keys[3], N = keys[4], T = keys[5],
    F = keys[6], D = keys[7], LOCK = keys[8], K = keys[9], pk = r.str(), ord = 0,
    work = { written = 0, bytes = 0, added = 0, removed = 0 } }
  ctx.stream = r.str():find("f", 1, true) ~= nil
  local max_bytes = tonumber(r.str())
  local ts_pos, lsn_pos = tonumber(r.str()), tonumber(r.str())
  local path_ids
  ctx.X, path_ids = read_paths(r, keys, 10)
  local ts_path, lsn_path = path_ids[ts_pos or 0], path_ids[lsn_pos or 0]
  local pv, reads, dedup_field, token, owner = "", {}, "", "", ""
  if with_header then
    pv = r.str()
    for _ = 1, r.num() do reads[#reads + 1] = { r.str(), r.str() } end
    dedup_field, token, owner = r.str(), r.str(), r.str()
  end
  local ops = {}
  for _ = 1, r.num() do ops[#ops + 1] = parse_op(r, path_ids) end
  if not with_header and #ops ~= 1 then bad("rg_write takes exactly one op") end
  if #ops == 0 then bad("a commit without ops") end

  -- conditions, in this order: dedup, lock, partition version, read set,
  -- then every op against the state the earlier ops leave
  local now = now_us()
  local now_s = math.floor(now / 1000000)
  if dedup_field ~= "" then
    local seen = redis.call("HGET", ctx.D, dedup_field)
    if seen and seen >= token then return { "DUP", seen } end
  end
  if owner ~= "" or redis.call("EXISTS", ctx.LOCK) == 1 then
    local holder = redis.call("GET", ctx.LOCK)
    if holder and holder ~= owner then
      return { "CONFLICT", "the partition is locked by another writer" }
    end
  end
  if pv ~= "" then
    local cur = redis.call("HGET", ctx.P, "\0v") or "0"
    if cur ~= pv then
      return { "CONFLICT", "the partition changed (version " .. cur .. ", read " .. pv .. ")" }
    end
  end
  local items = {}
  local function item(id)
    local it = items[id]
    if not it then it = load_item(ctx.P, id, now_s); items[id] = it end
    return it
  end
  for _, rd in ipairs(reads) do
    local it = item(rd[1])
    local etag = it.visible and it.etag or ""
    if etag ~= rd[2] then
      return { "CONFLICT", "item '" .. rd[1] .. "' changed since it was read" }
    end
  end
  local plan, state = {}, {}  -- state[id]: what the earlier ops left
  local uniq = {}             -- field -> id holding it, as the ops go
  local function unique_holder(f)
    local h = uniq[f]
    if h == nil then h = redis.call("HGET", ctx.P, f) or false; uniq[f] = h end
    if h and not (state[h] or item(h)).visible then return false end
    return h
  end
  local lsn = peek_lsn(ctx.N, now)
  local pbytes = tonumber(redis.call("HGET", ctx.P, "\0b") or "0")
  for i, op in ipairs(ops) do
    local cur = state[op.id] or item(op.id)
    local visible = cur.visible
    if op.kind == "create" and visible then
      return { "FAILED", i, 409, "conflict: an item with id '" .. op.id ..
        "' already exists in this partition" }
    end
    if (op.kind == "replace" or op.kind == "delete") and not visible then
      return { "FAILED", i, 404, "item not found" }
    end
    if op.if_match ~= "" then
      if not visible then
        return { "FAILED", i, 412, "precondition failed: the item does not exist" }
      end
      if cur.etag ~= op.if_match then
        return { "FAILED", i, 412, "precondition failed: the item's etag is " ..
          cur.etag .. ", not " .. op.if_match }
      end
    end
    local kind = op.kind
    if kind == "upsert" then kind = visible and "replace" or "create" end
    local new
    if kind ~= "delete" then
      local old_uniq = {}
      if cur.stored then for _, f in ipairs(cur.meta[4]) do old_uniq[f] = true end end
      for _, f in ipairs(op.uniques) do
        local h = unique_holder(f)
        if h and h ~= op.id then
          return { "FAILED", i, 409, "unique key violation: another item in this " ..
            "logical partition has the same value (unique key " ..
            f:match("^u:([^:]*):") .. ")" }
        end
      end
      for f in pairs(old_uniq) do uniq[f] = false end
      for _, f in ipairs(op.uniques) do uniq[f] = op.id end
      new = { text = op.text, terms = op.terms, uniques = op.uniques,
        ttl = op.ttl ~= "" and tonumber(op.ttl) or nil }
    elseif cur.stored then
      for _, f in ipairs(cur.meta[4]) do uniq[f] = false end
    end
    local old_bytes = cur.stored and cur.bytes or 0
    local new_bytes = new and #stored_text(new.text, string.format('"%x-%x"', lsn, i - 1),
      now_s, lsn) or 0
    if max_bytes and new_bytes > old_bytes and
       pbytes - old_bytes + new_bytes > max_bytes then
      return { "FAILED", i, 403, string.format("the logical partition is full " ..
        "(%.0f bytes; the limit is %.0f)", pbytes, max_bytes) }
    end
    pbytes = pbytes - old_bytes + new_bytes
    plan[i] = { op = op, kind = kind, new = new }
    if new then
      state[op.id] = { stored = true, visible = true, etag = "(pending)",
        meta = { "", 0, new.terms, new.uniques }, bytes = new_bytes }
    else
      state[op.id] = { stored = false, visible = false }
    end
  end

  local metas = {}
  for _, it in pairs(items) do if it.stored then metas[#metas + 1] = it.meta end end
  local missing = undeclared(ctx.X, metas)
  if #missing > 0 then return { "PATHS", missing } end

  -- every condition holds: write
  ctx.lsn = next_lsn(ctx.N, now)
  ctx.ts = now_s
  local etags, kinds = {}, {}
  local touched = {}
  for i, p in ipairs(plan) do
    kinds[i] = p.kind
    -- the stored state the checks loaded, unless an earlier op changed it
    local old = not touched[p.op.id] and items[p.op.id] or load_item(ctx.P, p.op.id, now_s)
    touched[p.op.id] = true
    if p.new then
      -- the terms of the system properties set now
      if ts_path then
        p.new.terms[#p.new.terms + 1] = ts_path
        p.new.terms[#p.new.terms + 1] = number_term(ctx.ts)
      end
      if lsn_path then
        p.new.terms[#p.new.terms + 1] = lsn_path
        p.new.terms[#p.new.terms + 1] = number_term(ctx.lsn)
      end
      p.new.etag = string.format('"%x-%x"', ctx.lsn, ctx.ord)
      if p.new.ttl and p.new.ttl > 0 then p.new.expiry = ctx.ts + p.new.ttl end
      etags[i] = p.new.etag
    else
      etags[i] = ""
    end
    apply(ctx, p.op.id, old, p.new, p.kind)
  end
  settle_partition(ctx)
  if dedup_field ~= "" then redis.call("HSET", ctx.D, dedup_field, token) end
  if owner ~= "" and redis.call("GET", ctx.LOCK) == owner then redis.call("DEL", ctx.LOCK) end
  local w = ctx.work
  return { "OK", ctx.lsn, ctx.ts, fmt(ctx.lsn), etags,
    { w.written, w.bytes, w.added, w.removed }, kinds }
end

-- }==================================================================

-- {==================================================================
-- Reads
-- ===================================================================

local function now_seconds()
  return math.floor(now_us() / 1000000)
end

-- The text of a visible item: text, or false when expired, or nil when
-- not stored.
local function visible_text(P, id, now_s)
  local v = redis.call("HMGET", P, "d:" .. id, "e:" .. id)
  if not v[1] then return nil end
  local expiry = tonumber(v[2] or "")
  if expiry and expiry <= now_s then return false end
  return v[1]
end

local function rg_read(keys, argv)
  check_format(argv)
  local P = keys[1]
  local now_s = now_seconds()
  local pv = redis.call("HGET", P, "\0v") or "0"
  local texts, etags = {}, {}
  for i = 2, #argv do
    local id = argv[i]
    local v = redis.call("HMGET", P, "d:" .. id, "e:" .. id, "m:" .. id)
    local expiry = tonumber(v[2] or "")
    if v[1] and not (expiry and expiry <= now_s) then
      texts[i - 1] = v[1]
      etags[i - 1] = cmsgpack.unpack(v[3])[1]
    else
      texts[i - 1], etags[i - 1] = false, false
    end
  end
  return { pv, texts, etags }
end

local function rg_scan(keys, argv)
  local r = args_of(argv)
  local mode, prefix, lo, hi = r.str(), r.str(), r.str(), r.str()
  local limit, reverse, docs = r.num(), r.str() == "1", r.str() == "1"
  if mode ~= "x" and mode ~= "s" then bad("scan mode '" .. mode .. "'") end
  local members
  if reverse then
    members = redis.call("ZREVRANGEBYLEX", keys[1], hi, lo, "LIMIT", 0, limit)
  else
    members = redis.call("ZRANGEBYLEX", keys[1], lo, hi, "LIMIT", 0, limit)
  end
  local now_s = now_seconds()
  local out, retry = {}, {}
  for _, m in ipairs(members) do
    if mode == "x" then
      if docs then
        local pk, id = unref(m)
        local text = visible_text(prefix .. pk, id, now_s)
        if text == nil then retry[#retry + 1] = m
        elseif text then out[#out + 1] = m; out[#out + 1] = text end
      else
        out[#out + 1] = m; out[#out + 1] = ""
      end
    else
      local P = prefix .. m
      local all = redis.call("HGETALL", P)
      if #all == 0 then retry[#retry + 1] = m end
      local exp = {}
      for i = 1, #all, 2 do
        if all[i]:sub(1, 2) == "e:" then exp[all[i]:sub(3)] = tonumber(all[i + 1]) end
      end
      for i = 1, #all, 2 do
        if all[i]:sub(1, 2) == "d:" then
          local id = all[i]:sub(3)
          if not (exp[id] and exp[id] <= now_s) then
            out[#out + 1] = ref(m, id); out[#out + 1] = all[i + 1]
          end
        end
      end
    end
  end
  return { members[#members] or "", out, retry, #members }
end

local function rg_changes(keys, argv)
  local r = args_of(argv)
  local prefix, after, max = r.str(), r.str(), r.num()
  if tonumber(after) == nil then bad("after-lsn '" .. after .. "'") end
  if max < 1 then bad("max must be at least 1") end
  local L = keys[1]
  local got = redis.call("ZRANGEBYSCORE", L, "(" .. after, "+inf", "WITHSCORES",
    "LIMIT", 0, max)
  if #got == 0 then return { tonumber(after), {}, {} } end
  local last = got[#got]
  if #got == 2 * max then
    -- the page may cut the last lsn group: take that group whole
    local keep = {}
    for i = 1, #got, 2 do
      if got[i + 1] ~= last then keep[#keep + 1] = got[i]; keep[#keep + 1] = got[i + 1] end
    end
    local group = redis.call("ZRANGEBYSCORE", L, last, last)
    for _, m in ipairs(group) do keep[#keep + 1] = m; keep[#keep + 1] = last end
    got = keep
  end
  local now_s = now_seconds()
  local out, retry = {}, {}
  for i = 1, #got, 2 do
    local pk, id = unref(got[i])
    local text = visible_text(prefix .. pk, id, now_s)
    if text == nil then retry[#retry + 1] = got[i]
    elseif text then
      out[#out + 1] = tonumber(got[i + 1]); out[#out + 1] = got[i]; out[#out + 1] = text
    end
  end
  return { tonumber(last), out, retry }
end

-- }==================================================================

-- {==================================================================
-- Leases, fenced checkpoints, dead letters
-- ===================================================================

-- The time in ms and the lease's fields.
local function lease_state(key)
  local now = math.floor(now_us() / 1000)
  local v = redis.call("HMGET", key, "owner", "expires", "ckpt", "epoch", "attempts")
  return now, { owner = v[1] or "", expires = tonumber(v[2] or "0"), ckpt = v[3] or nil,
    epoch = tonumber(v[4] or "0"), attempts = tonumber(v[5] or "0") }
end

local function rg_lease(keys, argv)
  local r = args_of(argv)
  local action, owner, lease_ms = r.str(), r.str(), r.num()
  local start, epoch = r.str(), tonumber(r.str()) or -1
  if owner == "" then bad("an empty owner") end
  local key, now, s = keys[1], lease_state(keys[1])
  local ours = s.owner == owner and s.expires > now
  if action == "acquire" then
    if s.owner ~= "" and s.expires > now and s.owner ~= owner then
      return { "HELD", s.owner, s.expires }
    end
    if not ours then s.epoch = s.epoch + 1 end
    if s.ckpt == nil then s.ckpt = start end
    s.expires = now + lease_ms
    redis.call("HSET", key, "owner", owner, "expires", fmt(s.expires), "ckpt", s.ckpt,
      "epoch", s.epoch, "attempts", s.attempts)
    return { "OK", s.epoch, s.ckpt, s.attempts, s.expires }
  elseif action == "renew" then
    if not ours or s.epoch ~= epoch then return { "LOST", s.owner, s.epoch } end
    s.expires = now + lease_ms
    redis.call("HSET", key, "expires", fmt(s.expires))
    return { "OK", s.epoch, s.ckpt, s.attempts, s.expires }
  elseif action == "release" then
    if s.owner ~= owner or s.epoch ~= epoch then return { "LOST", s.owner, s.epoch } end
    redis.call("HSET", key, "owner", "", "expires", "0")
    return { "OK" }
  end
  bad("lease action '" .. action .. "'")
end

local function rg_ack(keys, argv)
  local r = args_of(argv)
  local action, owner, epoch = r.str(), r.str(), tonumber(r.str()) or -1
  local from, to, payload = r.str(), r.str(), argv[r.i] or ""
  local key, now, s = keys[1], lease_state(keys[1])
  if s.owner ~= owner or s.epoch ~= epoch or s.expires <= now then
    return { "LOST", s.owner, s.epoch }
  end
  if s.ckpt ~= from then return { "MOVED", s.ckpt or "" } end
  if action == "ckpt" then
    redis.call("HSET", key, "ckpt", to, "attempts", 0)
    redis.call("HINCRBY", key, "delivered", tonumber(payload) or 0)
    return { "OK", to }
  elseif action == "fail" then
    redis.call("HINCRBY", key, "failures", 1)
    return { "OK", redis.call("HINCRBY", key, "attempts", 1) }
  elseif action == "dead" then
    local n = redis.call("RPUSH", keys[2], payload)
    redis.call("HSET", key, "ckpt", to, "attempts", 0)
    return { "OK", to, n }
  end
  bad("ack action '" .. action .. "'")
end

-- }==================================================================

-- {==================================================================
-- TTL purge
-- ===================================================================

local function rg_purge(keys, argv)
  local r = args_of(argv)
  local prefix, flags, limit = r.str(), r.str(), r.num()
  local X = read_paths(r, keys, 7)
  local now = now_us()
  local now_s = math.floor(now / 1000000)
  local due = redis.call("ZRANGEBYSCORE", keys[1], "-inf", now_s, "LIMIT", 0, limit)
  if #due == 0 then return { 0, 0 } end
  local metas = {}
  for _, m in ipairs(due) do
    local pk, id = unref(m)
    local it = load_item(prefix .. pk, id, now_s)
    if it.stored then metas[#metas + 1] = it.meta end
  end
  local missing = undeclared(X, metas)
  if #missing > 0 then return { "PATHS", missing } end
  local lsn = next_lsn(keys[4], now)
  local work = { written = 0, bytes = 0, added = 0, removed = 0 }
  local parts, order = {}, {}
  local purged, ord = 0, 0
  for _, m in ipairs(due) do
    local pk, id = unref(m)
    local ctx = parts[pk]
    if not ctx then
      ctx = { P = prefix .. pk, S = keys[2], L = keys[3], T = keys[1], F = keys[5],
        K = keys[6], X = X, pk = pk, lsn = lsn, ts = now_s, ord = 0, work = work,
        stream = flags:find("f", 1, true) ~= nil }
      parts[pk] = ctx
      order[#order + 1] = ctx
    end
    local old = load_item(ctx.P, id, now_s)
    if old.stored and old.expiry and old.expiry <= now_s then
      ctx.ord = ord                       -- one ordinal sequence per lsn
      apply(ctx, id, old, nil, "delete", true)
      ord = ctx.ord
      purged = purged + 1
    else
      redis.call("ZREM", keys[1], m)       -- a stale entry
    end
  end
  for _, ctx in ipairs(order) do settle_partition(ctx) end
  return { purged, lsn }
end

-- }==================================================================

local function rg_unlock(keys, argv)
  local r = args_of(argv)
  local owner = r.str()
  if redis.call("GET", keys[1]) == owner then
    redis.call("DEL", keys[1])
    return 1
  end
  return 0
end

-- {==================================================================
-- The catalog: containers and their scripts
-- ===================================================================

local function rg_meta(keys, argv)
  local r = args_of(argv)
  local action = r.str()
  local C, SC = keys[1], keys[2]
  if action == "create" then
    local name, spec, max = r.str(), r.str(), tonumber(r.str())
    if redis.call("HEXISTS", C, "n:" .. name) == 1 then
      return { "FAILED", 409, "a container named '" .. name .. "' exists" }
    end
    if max then
      local n = 0
      for _, f in ipairs(redis.call("HKEYS", C)) do
        if f:sub(1, 2) == "n:" then n = n + 1 end
      end
      if n >= max then
        return { "FAILED", 403, "the database holds its maximum of " ..
          fmt(max) .. " containers" }
      end
    end
    local cid = redis.call("HINCRBY", C, "\0cid", 1)
    redis.call("HSET", C, "n:" .. name, cid, "c:" .. cid, spec)
    return { "OK", cid }
  elseif action == "drop" then
    local name, cid = r.str(), r.str()
    if redis.call("HGET", C, "n:" .. name) ~= cid then
      return { "FAILED", 404, "container '" .. name .. "' not found" }
    end
    redis.call("HDEL", C, "n:" .. name, "c:" .. cid, "v:" .. cid)
    if SC ~= C then redis.call("DEL", SC) end
    return { "OK" }
  elseif action == "put" or action == "del" then
    local cid, name = r.str(), r.str()
    if redis.call("HEXISTS", C, "c:" .. cid) == 0 then
      return { "FAILED", 404, "the container was deleted" }
    end
    local exists = redis.call("HEXISTS", SC, name) == 1
    if action == "del" then
      if not exists then return { "FAILED", 404, "'" .. name .. "' not found" } end
      redis.call("HDEL", SC, name)
      redis.call("HINCRBY", C, "v:" .. cid, 1)
      return { "OK" }
    end
    local mode, record = r.str(), r.str()
    if mode == "create" and exists then
      return { "FAILED", 409, "'" .. name .. "' already exists" }
    elseif mode == "replace" and not exists then
      return { "FAILED", 404, "'" .. name .. "' not found" }
    end
    local v = redis.call("HINCRBY", C, "v:" .. cid, 1)
    redis.call("HSET", SC, name, fmt(v) .. "\0" .. record)
    return { "OK", v }
  end
  bad("meta action '" .. action .. "'")
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

redis.register_function{ function_name = "rg_write", callback = wrap(function(k, a)
  return commit(k, a, false) end) }
redis.register_function{ function_name = "rg_commit", callback = wrap(function(k, a)
  return commit(k, a, true) end) }
redis.register_function{ function_name = "rg_read", callback = wrap(rg_read),
  flags = { "no-writes" } }
redis.register_function{ function_name = "rg_scan", callback = wrap(rg_scan),
  flags = { "no-writes" } }
redis.register_function{ function_name = "rg_changes", callback = wrap(rg_changes),
  flags = { "no-writes" } }
redis.register_function{ function_name = "rg_lease", callback = wrap(rg_lease) }
redis.register_function{ function_name = "rg_ack", callback = wrap(rg_ack) }
redis.register_function{ function_name = "rg_purge", callback = wrap(rg_purge) }
redis.register_function{ function_name = "rg_meta", callback = wrap(rg_meta) }
redis.register_function{ function_name = "rg_unlock", callback = wrap(rg_unlock) }
redis.register_function{ function_name = "rg_version", flags = { "no-writes" },
  description = VERSION, callback = function() return VERSION end }
