-- The Functions library (redis/regolith.lua): each function's conditions,
-- and that a call whose condition fails writes nothing (the slot's keys
-- are DUMPed before and after).  Index terms and unique digests are opaque
-- bytes to the library; these specs make up their own.
local C = require "cluster.support"
local layout = C.layout

describe("cluster functions", function()
  if not C.ready(pending) then return end
  local c, b, db
  local PK, PK2 = "\9p\0\255\0\1", "\9q\0\1"
  local PATHS = { "1", "2" }

  before_each(function()
    c = C.client()
    db = C.fresh_db()
    b = layout.bucket_keys(db, 7, 1, 4)
  end)
  after_each(function() c:close() end)

  -- An op as the client will build it from core.doc_prepare's results.
  local function doc(id, fields, extra)
    local op = { kind = "create", id = id,
      text = ('{"id":"%s"%s}'):format(id, fields or ""), terms = {}, uniques = {} }
    for k, v in pairs(extra or {}) do op[k] = v end
    return op
  end

  local function call(name, ops, ctl, pk)
    local keys, argv = layout.commit_args(b, pk or PK, PATHS, ops, ctl)
    return assert(c:fcall(name, keys, argv))
  end
  local function write(op, pk) return call("rg_write", { op }, nil, pk) end
  local function commit(ops, ctl) ctl = ctl or {}; ctl.header = true; return call("rg_commit", ops, ctl) end

  local function read(ids, pk)
    local keys, argv = layout.read_args(b, pk or PK, ids)
    return assert(c:fcall_ro("rg_read", keys, argv))
  end

  local function index(path)
    return assert(c:call("ZRANGE", layout.index_key(b, path), 0, -1))
  end

  -- Asserts that f() leaves every key of the bucket's slot as it was, and
  -- returns what f returned.
  local function writes_nothing(f)
    local before = C.snapshot(c, b.slot)
    local r = f()
    assert.same(before, C.snapshot(c, b.slot))
    return r
  end

  it("stores the client's exact text and splices the system properties in", function()
    local text = '{"id":"a","big":9007199254740993,"f":0.30000000000000004,"e":[],"o":{}}'
    local r = write({ kind = "create", id = "a", text = text })
    assert.equal("OK", r[1])
    local lsn, ts, etag = r[2], r[3], r[5][1]
    assert.equal(('"%x-0"'):format(lsn), etag)
    local stored = c:call("HGET", layout.partition_key(b, PK), "d:a")
    assert.equal(text:sub(1, -2) .. (',"_etag":"\\"%x-0\\"","_ts":%d,"_lsn":%d}'):format(lsn, ts, lsn),
      stored)
    local rr = read({ "a", "none" })
    assert.equal(("%d"):format(lsn), rr[1])                  -- pv: the last lsn
    assert.same({ stored }, { rr[2][1] })
    assert.equal(C.redis.null, rr[2][2])
    assert.equal(etag, rr[3][1])
    assert.is_true(math.abs(ts - os.time()) < 5)
  end)

  it("refuses create over an existing item (409) and writes nothing", function()
    assert.equal("OK", write(doc("a"))[1])
    local r = writes_nothing(function() return write(doc("a", ',"n":2')) end)
    assert.same({ "FAILED", 1, 409 }, { r[1], r[2], r[3] })
    assert.matches("already exists", r[4])
  end)

  it("refuses replace and delete of a missing item (404) and a wrong etag (412)", function()
    local r = writes_nothing(function() return write(doc("a", "", { kind = "replace" })) end)
    assert.same({ "FAILED", 404 }, { r[1], r[3] })
    r = writes_nothing(function() return write({ kind = "delete", id = "a" }) end)
    assert.same({ "FAILED", 404 }, { r[1], r[3] })
    local etag = write(doc("a"))[5][1]
    r = writes_nothing(function()
      return write(doc("a", ',"n":2', { kind = "replace", if_match = '"1-0"' }))
    end)
    assert.same({ "FAILED", 412 }, { r[1], r[3] })
    assert.matches("etag is " .. etag:gsub("%p", "%%%0"), r[4])
    r = writes_nothing(function()
      return write(doc("b", "", { kind = "upsert", if_match = etag }))
    end)
    assert.same({ "FAILED", 412 }, { r[1], r[3] })
    r = write(doc("a", ',"n":2', { kind = "replace", if_match = etag }))
    assert.equal("OK", r[1])
    assert.are_not.equal(etag, r[5][1])
    assert.equal("OK", write({ kind = "delete", id = "a", if_match = r[5][1] })[1])
    -- the partition's last item gone: its hash and its place in S go too
    assert.equal(0, c:call("EXISTS", layout.partition_key(b, PK)))
    assert.equal(0, c:call("ZCARD", b.S))
  end)

  it("keeps index entries equal to the stored terms across replace and delete", function()
    write(doc("a", "", { terms = { { 1, "\8AAAA" }, { 2, "\9x\0\1" } } }))
    write(doc("b", "", { terms = { { 1, "\8BBBB" } } }))
    assert.same({ "\8AAAA" .. layout.ref(PK, "a"), "\8BBBB" .. layout.ref(PK, "b") }, index("1"))
    assert.same({ "\9x\0\1" .. layout.ref(PK, "a") }, index("2"))
    local r = write(doc("a", "", { kind = "upsert", terms = { { 1, "\8AAAA" }, { 2, "\9y\0\1" } } }))
    -- written 1, index entries added 1 and removed 1; the bytes stored
    assert.same({ 1, 1, 1 }, { r[6][1], r[6][3], r[6][4] })
    assert.is_true(r[6][2] > 0)
    assert.same({ "\9y\0\1" .. layout.ref(PK, "a") }, index("2"))
    write({ kind = "delete", id = "a" })
    assert.same({ "\8BBBB" .. layout.ref(PK, "b") }, index("1"))
    assert.same({}, index("2"))
    local pk, id = layout.unref(index("1")[1])
    assert.equal(PK, pk)
    assert.equal("b", id)
  end)

  it("refuses a unique key another item holds (409), until that item lets it go", function()
    local u = { { "1", "\1\2\3digest" } }
    assert.equal("OK", write(doc("a", "", { uniques = u }))[1])
    local r = writes_nothing(function() return write(doc("b", "", { uniques = u })) end)
    assert.same({ "FAILED", 409 }, { r[1], r[3] })
    assert.matches("unique key violation", r[4])
    -- the same item keeps its own value; another partition is another scope
    assert.equal("OK", write(doc("a", ',"v":1', { kind = "replace", uniques = u }))[1])
    assert.equal("OK", write(doc("b", "", { uniques = u }), PK2)[1])
    -- once a drops it, b may take it, in one commit too
    r = commit({ doc("a", ',"v":2', { kind = "replace" }), doc("b", "", { uniques = u }) })
    assert.equal("OK", r[1])
  end)

  it("commits several ops under one lsn, each seeing the ones before", function()
    local r = commit({ doc("a"), doc("b"), doc("a", ',"n":2', { kind = "replace" }),
      { kind = "delete", id = "b" } })
    assert.equal("OK", r[1])
    assert.equal(4, #r[5])
    assert.equal("", r[5][4])
    local rr = read({ "a", "b" })
    assert.matches('"n":2', rr[2][1])
    assert.matches(('"_lsn":%d}$'):format(r[2]), rr[2][1])
    assert.equal(C.redis.null, rr[2][2])
    -- a failing op leaves nothing of the ops before it
    r = writes_nothing(function()
      return commit({ doc("c"), doc("d"), doc("a") })
    end)
    assert.same({ "FAILED", 3, 409 }, { r[1], r[2], r[3] })
    r = commit({ doc("e"), doc("e") })
    assert.same({ "FAILED", 2, 409 }, { r[1], r[2], r[3] })
  end)

  it("reports CONFLICT when the partition version or a read etag moved", function()
    local first = write(doc("a"))
    local pv, etag = read({ "a" })[1], first[5][1]
    write(doc("z"))                                   -- someone else writes
    local r = writes_nothing(function()
      return commit({ doc("b") }, { pv = pv })
    end)
    assert.equal("CONFLICT", r[1])
    -- a read set is finer: a is unchanged, so this commits
    assert.equal("OK", commit({ doc("b") }, { reads = { { "a", etag }, { "q", "" } } })[1])
    write(doc("a", ',"n":1', { kind = "replace" }))
    r = writes_nothing(function()
      return commit({ doc("c") }, { reads = { { "a", etag } } })
    end)
    assert.equal("CONFLICT", r[1])
    -- an item read as absent that now exists
    r = writes_nothing(function() return commit({ doc("c") }, { reads = { { "z", "" } } }) end)
    assert.equal("CONFLICT", r[1])
    assert.equal("OK", commit({ doc("c") }, { pv = read({})[1] })[1])
    -- an absent partition reads as version "0"
    local keys, argv = layout.commit_args(b, PK2, PATHS, { doc("x") }, { header = true, pv = "0" })
    assert.equal("OK", c:fcall("rg_commit", keys, argv)[1])
  end)

  it("applies a token once (DUP), and refuses a partition locked by another owner", function()
    local ctl = function(tok) return { dedup = { "proc/3", tok } } end
    assert.equal("OK", commit({ doc("a") }, ctl("00000010:0001"))[1])
    local r = writes_nothing(function() return commit({ doc("b") }, ctl("00000010:0001")) end)
    assert.same({ "DUP", "00000010:0001" }, r)
    assert.equal("DUP", commit({ doc("b") }, ctl("00000010:0000"))[1])
    assert.equal("OK", commit({ doc("b") }, ctl("00000010:0002"))[1])
    -- the lock
    assert(c:call("SET", layout.lock_key(b, PK), "owner-1", "PX", 5000))
    r = writes_nothing(function() return commit({ doc("c") }, { owner = "owner-2" }) end)
    assert.equal("CONFLICT", r[1])
    assert.matches("locked", r[2])
    r = writes_nothing(function() return write(doc("c")) end)
    assert.equal("CONFLICT", r[1])
    assert.equal("OK", commit({ doc("c") }, { owner = "owner-1" })[1])
    assert.equal(0, c:call("EXISTS", layout.lock_key(b, PK)))   -- released
  end)

  it("scans an index range and reports a member without its document as retry", function()
    for i = 1, 5 do
      write(doc("i" .. i, "", { terms = { { 1, "\8" .. string.char(64 + i) } } }))
    end
    local lo, hi = layout.prefix_range("\8")
    local keys, argv = layout.scan_args(b, { path = "1", min = lo, max = hi, limit = 3 })
    local r = assert(c:fcall_ro("rg_scan", keys, argv))
    assert.equal(6, #r[2])
    assert.equal(r[2][5], r[1])
    assert.matches('"id":"i3"', r[2][6])
    keys, argv = layout.scan_args(b, { path = "1", min = "(" .. r[1], max = hi, limit = 3 })
    r = assert(c:fcall_ro("rg_scan", keys, argv))
    assert.equal(4, #r[2])
    -- reversed, members only
    keys, argv = layout.scan_args(b, { path = "1", reverse = true, members_only = true, limit = 1 })
    r = assert(c:fcall_ro("rg_scan", keys, argv))
    assert.equal("\8E" .. layout.ref(PK, "i5"), r[2][1])
    -- a document missing under its index entry (a slot being moved)
    assert(c:call("HDEL", layout.partition_key(b, PK), "d:i2"))
    keys, argv = layout.scan_args(b, { path = "1" })
    r = assert(c:fcall_ro("rg_scan", keys, argv))
    assert.equal(8, #r[2])
    assert.same({ "\8B" .. layout.ref(PK, "i2") }, r[3])
    -- a scan of the bucket's partitions
    write(doc("o", ""), PK2)
    keys, argv = layout.scan_args(b, {})
    r = assert(c:fcall_ro("rg_scan", keys, argv))
    assert.equal(2, r[4])
    assert.equal(2 * 5, #r[2])
  end)

  it("gives the latest feed in whole lsn groups after a position", function()
    commit({ doc("a"), doc("b"), doc("c") })
    write(doc("d"))
    write(doc("a", ',"n":1', { kind = "replace" }))
    local keys, argv = layout.changes_args(b, 0, 2)
    local r = assert(c:fcall_ro("rg_changes", keys, argv))
    assert.equal(6, #r[2])                      -- b, c: the group of three, less a (moved on)
    keys, argv = layout.changes_args(b, r[1], 1)
    local r2 = assert(c:fcall_ro("rg_changes", keys, argv))
    assert.equal(3, #r2[2])
    assert.matches('"id":"d"', r2[2][3])
    keys, argv = layout.changes_args(b, r2[1], 10)
    local r3 = assert(c:fcall_ro("rg_changes", keys, argv))
    assert.matches('"n":1', r3[2][3])
    keys, argv = layout.changes_args(b, r3[1], 10)
    local r4 = assert(c:fcall_ro("rg_changes", keys, argv))
    assert.same({ r3[1], {}, {} }, r4)
  end)

  it("hides expired items at once and purges them as deletes marked ttl_expired", function()
    write(doc("short", "", { ttl = 1, terms = { { 1, "\8T" } } }), PK2)
    write(doc("long", "", { ttl = 3600 }))
    write(doc("never"))
    local keys, argv = layout.purge_args(b, PATHS, 10, true)
    assert.same({ 0, 0 }, c:fcall("rg_purge", keys, argv))
    C.sh("sleep 2")
    assert.equal(C.redis.null, read({ "short" }, PK2)[2][1])
    local sk, sa = layout.scan_args(b, { path = "1" })
    local s = assert(c:fcall_ro("rg_scan", sk, sa))
    assert.equal(0, #s[2])
    assert.equal(1, s[4])                               -- examined, not shown
    local r = assert(c:fcall("rg_purge", keys, argv))
    assert.equal(1, r[1])
    assert.same({}, index("1"))
    assert.equal(0, c:call("EXISTS", layout.partition_key(b, PK2)))
    assert.equal(1, c:call("ZCARD", b.T))               -- "long" is left
    local entries = assert(c:call("XRANGE", b.F, "-", "+"))
    local last = entries[#entries][2]
    local f = {}
    for i = 1, #last, 2 do f[last[i]] = last[i + 1] end
    -- a delete's entry carries the version it deleted
    assert.same({ "delete", "short", "1" }, { f.op, f.id, f.ttl_expired })
    assert.matches('^{"id":"short",', f.doc)
    -- a create over an expired, not yet purged item is a create
    write(doc("gone", "", { ttl = 1 }))
    C.sh("sleep 2")
    assert.equal("OK", write(doc("gone"))[1])
  end)

  it("fences leases: a checkpoint after a takeover is refused", function()
    local lease = layout.lease_key(db, b.slot, 7, "proc")
    local dead = layout.dead_key(db, b.slot, 7, "proc")
    local function lease_call(...) return assert(c:fcall("rg_lease", layout.lease_args(lease, ...))) end
    local function ack(...) return assert(c:fcall("rg_ack", layout.ack_args(lease, dead, ...))) end
    local a = lease_call("acquire", "A", 300, "0")
    assert.same({ "OK", 1, "0", 0 }, { a[1], a[2], a[3], a[4] })
    assert.equal("HELD", lease_call("acquire", "B", 300, "0")[1])
    assert.equal("OK", ack("ckpt", "A", 1, "0", "100")[1])
    assert.same({ "MOVED", "100" }, ack("ckpt", "A", 1, "0", "200"))
    C.sh("sleep 0.4")
    -- A's lease expired; B takes it over with a new epoch
    local bl = lease_call("acquire", "B", 5000, "0")
    assert.same({ "OK", 2, "100" }, { bl[1], bl[2], bl[3] })
    local late = writes_nothing(function() return ack("ckpt", "A", 1, "100", "150") end)
    assert.equal("LOST", late[1])
    assert.equal("LOST", lease_call("renew", "A", 300, "", 1)[1])
    assert.equal("LOST", ack("ckpt", "B", 1, "100", "150")[1])   -- B with A's epoch
    assert.same({ "OK", 1 }, ack("fail", "B", 2, "100", "100"))
    assert.same({ "OK", 2 }, ack("fail", "B", 2, "100", "100"))
    local d = ack("dead", "B", 2, "100", "180", '{"error":"boom","attempts":2}')
    assert.same({ "OK", "180", 1 }, d)
    assert.same({ '{"error":"boom","attempts":2}' }, c:call("LRANGE", dead, 0, -1))
    assert.equal("0", c:call("HGET", lease, "attempts"))
    assert.equal("OK", lease_call("renew", "B", 5000, "", 2)[1])
    assert.equal("OK", lease_call("release", "B", 0, "", 2)[1])
    assert.equal("OK", lease_call("acquire", "A", 300, "0")[1])
  end)

  it("rejects arguments of another format or malformed with a Redis error", function()
    local keys, argv = layout.commit_args(b, PK, PATHS, { doc("a") })
    argv[1] = "1"
    local v, msg, kind = c:fcall("rg_write", keys, argv)
    assert.is_nil(v)
    assert.matches("argument format 1", msg)
    assert.equal("redis", kind)
    keys, argv = layout.commit_args(b, PK, PATHS, { doc("a", "", { text = "[1]" }) })
    v, msg = c:fcall("rg_write", keys, argv)
    assert.is_nil(v)
    assert.matches("not a JSON object", msg)
    keys, argv = layout.commit_args(b, PK, PATHS, { doc("a", "", { terms = { { 9, "t" } } }) })
    v, msg = c:fcall("rg_write", keys, argv)
    assert.is_nil(v)
    assert.matches("path #9", msg)
  end)
end)
