-- c:bulk_load: documents written in batches as creates would write them,
-- errors per document, no trigger run, the feed and the processors see
-- every item (docs/api.md, "Bulk load").
local regolith = require "regolith"
local H = require "helper"

local function sorted(rows)
  table.sort(rows, function(a, b) return a.id < b.id end)
  return rows
end

-- The same queries answer the same on a container written by creates and
-- on one bulk-loaded, through the same plan (its index lookups, and what
-- it loads when `loaded`).
local function same_answers(ref, c, sqls, loaded)
  local key = function(x) return type(x) == "table" and x.kind or x end
  for _, sql in ipairs(sqls) do
    local a, ai = assert(ref:query(sql))
    local b, bi = assert(c:query(sql))
    if not sql:find("ORDER BY") then
      table.sort(a, function(x, y) return key(x) < key(y) end)
      table.sort(b, function(x, y) return key(x) < key(y) end)
    end
    assert.are.same(a, b, sql)
    assert.are.equal(ai.index_lookups, bi.index_lookups, sql)
    if loaded then assert.are.equal(ai.loaded, bi.loaded, sql) end
  end
end

-- ref and c hold the same documents (but for their system properties)
-- and answer the queries on SPEC's paths alike.
local function same_contents(ref, c, loaded)
  local strip = function(rows)
    for _, r in ipairs(rows) do r._etag, r._ts, r._lsn = nil, nil, nil end
    return sorted(rows)
  end
  assert.are.same(strip(assert(ref:query("SELECT * FROM c"))),
                  strip(assert(c:query("SELECT * FROM c"))))
  same_answers(ref, c, {
    "SELECT VALUE c.id FROM c WHERE c.g = 2 ORDER BY c.n DESC",
    "SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, 't1')",
    "SELECT VALUE c.id FROM c WHERE c.nested.a.b > 1100",
    "SELECT VALUE COUNT(1) FROM c WHERE c.u = 'u77'",
  }, loaded)
end

local SPEC = {
  partition_key = "/pk", physical_partitions = 4, default_ttl = -1,
  unique_keys = { { "/u" } }, change_feed = { all_versions = true },
  indexing = { excluded = { "/secret/?" },
               composite = { { { path = "/g" }, { path = "/n", order = "descending" } } } },
}

local function doc(i)
  return { id = "i" .. i, pk = "p" .. (i % 9), u = "u" .. i, g = i % 4,
           n = (i * 37) % 101, tags = { "all", "t" .. (i % 3) },
           nested = { a = { b = i } }, secret = i,
           ttl = i % 50 == 0 and 100000 or nil }
end

describe("bulk load", function()
  local db, c, dbpath
  before_each(function()
    db, dbpath = H.open()
    c = assert(db:create_container("c", SPEC))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("writes what creates write: items, indexes, unique keys, TTL, the feed, statistics", function()
    local docs = {}
    for i = 1, 1200 do docs[i] = doc(i) end
    local res, info = assert(c:bulk_load(docs, { batch = 250 }))
    assert.are.equal(1200, res.written)
    assert.are.equal(0, res.failed)
    assert.are.same({}, res.errors)
    assert.is_true(info.charge > 0)
    assert.is_true(db:verify())
    -- the same container written by creates holds the same documents
    local ref = assert(db:create_container("ref", SPEC))
    for i = 1, 1200 do assert(ref:create(doc(i))) end
    same_contents(ref, c)
    -- unique keys hold against what was loaded
    H.fails(409, c:create({ id = "new", pk = "p5", u = "u5" }))
    assert(c:create({ id = "new", pk = "p5", u = "u4" }))   -- another partition's
    -- statistics, the latest and all-versions feeds
    assert.are.equal(1201, db:stats().containers.c.items)
    assert.are.equal(1201, #assert(c:changes{ max_items = 5000 }))
    local all = assert(c:changes{ mode = "all_versions", max_items = 5000 })
    assert.are.equal(1201, #all)
    assert.are.equal("create", all[1].metadata.operation)
    -- system properties: one lsn per batch (per place of a batch on a
    -- cluster, where each place stamps its own: docs/cluster.md, "Commit
    -- order"), an etag per item
    local a, b = assert(c:read("i1", "p1")), assert(c:read("i10", "p1"))
    assert.are.equal(a._lsn, b._lsn)
    assert.are_not.equal(a._etag, b._etag)
    if not H.cluster then
      assert.are.equal(a._lsn, assert(c:read("i2", "p2"))._lsn)
    end
    assert.are_not.equal(a._lsn, assert(c:read("i253", "p1"))._lsn)
    assert.are_not.equal(a._lsn, assert(c:read("i300", "p3"))._lsn)
  end)

  it("writes shape entries, computed properties and composites that the planner reads as a create's", function()
    local spec = {
      partition_key = "/pk", physical_partitions = 4,
      computed_properties = { { name = "cp_low",
                                query = "SELECT VALUE LOWER(c.name) FROM c" } },
      indexing = { composite = { { { path = "/pk" }, { path = "/kind" } } } },
    }
    local function d(i)
      return { id = "s" .. i, pk = "p" .. (i % 3), kind = "k" .. (i % 5),
               name = i % 4 == 0 and nil or ("Name" .. i),
               n = i % 7 == 0 and nil or i }
    end
    local bl = assert(db:create_container("bl", spec))
    local cr = assert(db:create_container("cr", spec))
    local docs = {}
    for i = 1, 300 do docs[i] = d(i) assert(cr:create(d(i))) end
    local res = assert(bl:bulk_load(docs, { batch = 64 }))
    assert.are.equal(300, res.written)
    -- a document lacking its partition key is refused, as a create is
    local r2 = assert(bl:bulk_load({ { id = "nokey" } }))
    assert.are.equal(1, r2.failed)
    assert.are.equal(400, r2.errors[1].status)
    assert.is_true(db:verify())
    same_answers(cr, bl, {
      "SELECT VALUE c.id FROM c ORDER BY c.n",              -- shapes: n lacking
      "SELECT VALUE c.id FROM c ORDER BY c.n DESC",
      "SELECT VALUE c.id FROM c WHERE c.cp_low = 'name10'",
      "SELECT VALUE c.id FROM c WHERE c.pk = 'p1' ORDER BY c.cp_low",
      "SELECT c.kind, COUNT(1) AS n FROM c WHERE c.pk = 'p2' GROUP BY c.kind",
      "SELECT DISTINCT VALUE c.kind FROM c",
    }, true)
  end)

  it("refuses documents one by one, with their index, status and message, and writes the rest", function()
    local res = assert(c:bulk_load({
      doc(1),                                   -- 1 fine
      "not a table",                            -- 2 400
      { pk = "p" },                             -- 3 no id: 400
      { id = "x/y", pk = "p" },                 -- 4 bad id: 400
      { id = "a" },                             -- 5 no partition key: 400
      doc(1),                                   -- 6 the same item again: 409
      { id = "other", pk = "p1", u = "u1" },    -- 7 unique key taken in the batch: 409
      { id = "big", pk = "p", s = ("x"):rep(3 * 2^20) },   -- 8 too large: 413
      { id = "t", pk = "p", ttl = "soon" },     -- 9 bad ttl: 400
      doc(2),                                   -- 10 fine
    }, { batch = 4 }))
    assert.are.equal(2, res.written)
    assert.are.equal(8, res.failed)
    local got = {}
    for _, e in ipairs(res.errors) do
      got[#got + 1] = { e.index, e.status }
      assert.is_string(e.message)
      assert.is_true(#e.message > 0)
    end
    assert.are.same({ { 2, 400 }, { 3, 400 }, { 4, 400 }, { 5, 400 }, { 6, 409 },
                      { 7, 409 }, { 8, 413 }, { 9, 400 } }, got)
    assert.matches("already exists", res.errors[5].message)
    -- an item that exists is a 409 of its own in a later load
    res = assert(c:bulk_load({ doc(2), doc(3) }))
    assert.are.equal(1, res.written)
    assert.are.same({ { index = 1, status = 409,
      message = "conflict: an item with id 'i2' already exists in this partition" } },
      res.errors)
    assert.are.equal(3, db:stats().containers.c.items)
    assert.is_true(db:verify())
  end)

  it("replaces existing items in upsert mode", function()
    assert(c:bulk_load({ doc(1), doc(2) }))
    local d1 = doc(1)
    d1.n = 999
    local res = assert(c:bulk_load({ d1, doc(3), doc(3) }, { mode = "upsert" }))
    assert.are.equal(3, res.written)
    assert.are.equal(0, res.failed)
    assert.are.equal(999, assert(c:read("i1", "p1")).n)
    assert.are.equal(3, db:stats().containers.c.items)
    assert.is_true(db:verify())
  end)

  it("takes an iterator, reports progress after each batch, and runs no trigger", function()
    assert(c:create_trigger("mark", { type = "pre", operation = "all", automatic = true,
      source = [[return function(ctx) local d = ctx:body(); d.marked = true; ctx:set_body(d) end]] }))
    local i, calls = 0, {}
    local res = assert(c:bulk_load(function()
      i = i + 1
      if i <= 25 then return doc(i) end
    end, { batch = 10, progress = function(done, written, failed)
      calls[#calls + 1] = { done, written, failed }
    end }))
    assert.are.equal(25, res.written)
    assert.are.same({ { 10, 10, 0 }, { 20, 20, 0 }, { 25, 25, 0 } }, calls)
    assert.is_nil(assert(c:read("i1", "p1")).marked)     -- no trigger ran
    assert.is_true(assert(c:create(doc(26))).marked)   -- a create runs it
  end)

  it("feeds processors every bulk-loaded item", function()
    local dst = assert(db:create_container("dst", { partition_key = "/pk" }))
    local p = assert(db:processor{ name = "copy", source = "c", handler = function(changes)
      for _, d in ipairs(changes) do assert(dst:upsert({ id = d.id, pk = d.pk })) end
    end })
    local docs = {}
    for i = 1, 300 do docs[i] = doc(i) end
    assert(c:bulk_load(docs, { batch = 100 }))
    p:run({ until_idle = true })
    assert.are.equal(300, db:stats().containers.dst.items)
    p:close()
    assert.is_true(db:verify())
  end)

  it("joins a running transaction as a savepoint, all or nothing", function()
    local dst = assert(db:create_container("dst", { partition_key = "/pk",
      change_feed = { all_versions = true } }))
    local p = assert(db:processor{ name = "tx", source = "c", handler = function(changes)
      local docs = {}
      for i, d in ipairs(changes) do docs[i] = { id = d.id, pk = d.pk } end
      local res = assert(dst:bulk_load(docs))
      assert(res.failed == 0)
    end })
    assert(c:bulk_load({ doc(1), doc(2), doc(3) }))
    p:run({ until_idle = true })
    p:close()
    assert.are.equal(3, db:stats().containers.dst.items)
    assert.is_true(db:verify())
  end)

  it("takes 10,000 documents a batch by default, 1,000 on a cluster (one apply each)", function()
    local docs = {}
    for i = 1, 2500 do docs[i] = doc(i) end
    local calls = 0
    local res = assert(c:bulk_load(docs, { progress = function() calls = calls + 1 end }))
    assert.are.equal(2500, res.written)
    assert.are.equal(H.cluster and 3 or 1, calls)
  end)

  it("loads in one transaction (transaction = \"load\"), with what batches write", function()
    local docs = {}
    for i = 1, 1200 do docs[i] = doc(i) end
    docs[1201] = doc(7)                                   -- given twice: 409
    local calls = 0
    local res, info = assert(c:bulk_load(docs, { batch = 250,
      transaction = "load", progress = function() calls = calls + 1 end }))
    assert.are.equal(1200, res.written)
    assert.are.equal(1, res.failed)
    assert.are.same({ index = 1201, status = 409 },
      { index = res.errors[1].index, status = res.errors[1].status })
    assert.are.equal(5, calls)
    assert.is_true(info.charge > 0)
    assert.is_true(db:verify())
    local ref = assert(db:create_container("ref", SPEC))
    local rres, rinfo = assert(ref:bulk_load(docs, { batch = 250 }))
    assert.are.same(rres, res)
    assert.are.equal(rinfo.charge, info.charge)           -- the same charges
    same_contents(ref, c, true)
    assert.are.equal(1200, #assert(c:changes{ mode = "all_versions", max_items = 5000 }))
    if not H.cluster then        -- locally one lsn for the load; on a cluster,
                                 -- each batch is its own transaction
      assert.are.equal(assert(c:read("i1", "p1"))._lsn,
                       assert(c:read("i1100", "p2"))._lsn)
    end
  end)

  it("sorts keys of long common prefixes, keys prefixes of others and equal terms as creates order them", function()
    -- strings of up to 89 'a's then a digit: index keys that split one
    -- byte after another, deeper than the sort's radix passes go (in an
    -- order that is not theirs); ids that are prefixes of others; a term
    -- most items share
    local docs, spec = {}, { partition_key = "/pk" }
    for i = 1, 3000 do
      docs[i] = { id = ("k"):rep(1 + i % 40) .. (i % 40 == 0 and "" or tostring(i)),
                  pk = "p" .. (i % 3), s = ("a"):rep(i % 90) .. tostring((3000 - i) % 5),
                  g = i % 2, n = (i * 7919) % 1000 }
    end
    local ref = assert(db:create_container("ref", spec))
    local seen = {}
    for _, d in ipairs(docs) do
      local key = d.pk .. "/" .. d.id
      if not seen[key] then seen[key] = true; assert(ref:create(d)) end
    end
    local lc = assert(db:create_container("l", spec))
    local res = assert(lc:bulk_load(docs, { batch = 3000, transaction = "load" }))
    assert.are.equal(ref:query("SELECT VALUE COUNT(1) FROM c")[1], res.written)
    same_answers(ref, lc, {
      "SELECT VALUE c.id FROM c ORDER BY c.s, c.id",
      "SELECT VALUE c.id FROM c WHERE c.g = 1 ORDER BY c.n DESC",
      "SELECT VALUE c.id FROM c WHERE c.s > 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2' ORDER BY c.s DESC",
      "SELECT VALUE c.id FROM c ORDER BY c.id",
    }, true)
    assert.is_true(db:verify())
  end)

  it("holds a load's entries across its batches and merges them alike, whatever its memory", function()
    local docs = {}
    for i = 1, 1200 do docs[i] = doc(i) end
    docs[1201] = { id = "y", pk = "p5", u = "u1203" }
    docs[1202] = { id = "z", pk = "p5", u = "u1203" }  -- one of the same batch
    docs[1203] = doc(1150)                             -- an id of the same batch
    local ref = assert(db:create_container("ref", SPEC))
    local rres, rinfo = assert(ref:bulk_load(docs, { batch = 250 }))
    assert.are.equal(1201, rres.written)
    assert.are.equal(2, rres.failed)
    -- 1: every batch spilled; 40000 and 300000: some; false: none
    for k, memory in ipairs({ 1, 40000, 300000, false }) do
      local lc = assert(db:create_container("l" .. k, SPEC))
      local res, info = assert(lc:bulk_load(docs, { batch = 250,
        transaction = "load", memory = memory or nil }))
      assert.are.same(rres, res)
      assert.are.equal(rinfo.charge, info.charge)
      same_contents(ref, lc, true)
      assert.are.equal(1201, db:stats().containers["l" .. k].items)
      assert.are.equal(1201, #assert(lc:changes{ mode = "all_versions", max_items = 5000 }))
      H.fails(409, lc:create({ id = "new", pk = "p6", u = "u6" }))
    end
    assert.is_true(db:verify())
  end)

  H.local_it("spills a load of many partitions a bounded number of times, its statistics and partition limits as without spilling",
    "on a cluster a load is a transaction per batch (docs/cluster.md)", function()
    -- one logical partition per item: past each spill the load's memory
    -- holds only the batches since, not every partition it has touched
    local docs = {}
    for i = 1, 10000 do docs[i] = { id = "d" .. i, n = i } end
    local ref = assert(db:create_container("ref", { partition_key = "/id" }))
    local rres, rinfo = assert(ref:bulk_load(docs, { batch = 100,
      transaction = "load" }))
    assert.are.equal(0, rinfo.spilled)             -- a gigabyte holds it
    local lc = assert(db:create_container("l", { partition_key = "/id" }))
    local res, info = assert(lc:bulk_load(docs, { batch = 100,
      transaction = "load", memory = 400000 }))
    assert.are.same(rres, res)
    assert.are.equal(rinfo.charge, info.charge)
    -- 100 batches, about 5 held at a time: a spill per 5 or so (19), not
    -- one per batch once the partitions alone fill the bound (86)
    assert.is_true(info.spilled >= 3 and info.spilled <= 30, info.spilled)
    local rs, ls = db:stats().containers.ref, db:stats().containers.l
    assert.are.equal(10000, ls.items)
    assert.are.same({ rs.items, rs.bytes }, { ls.items, ls.bytes })
    assert.is_true(db:verify())                    -- each partition's too

    -- a partition's limit holds across spills: a few partitions filled
    -- batch after batch, some documents refused (403) as without spilling
    -- (each load one _lsn, of as many digits: the items' sizes alike)
    local full, pspec = {}, { partition_key = "/pk", max_partition_bytes = 30000 }
    for i = 1, 3000 do
      full[i] = { id = "f" .. i, pk = "p" .. (i % 7), pad = ("x"):rep(40 + i % 13) }
    end
    local fres
    for k, memory in ipairs({ false, 1, 50000 }) do
      local fc = assert(db:create_container("f" .. k, pspec))
      local r, fi = assert(fc:bulk_load(full, { batch = 100,
        transaction = "load", memory = memory or nil }))
      fres = fres or r
      assert.are.same(fres, r)
      assert.is_true(r.written > 1000 and r.failed > 1000)
      assert.are.equal(403, r.errors[1].status)
      if memory then assert.is_true(fi.spilled >= 2, fi.spilled)
      else assert.are.equal(0, fi.spilled) end
      local a, b = db:stats().containers.f1, db:stats().containers["f" .. k]
      assert.are.same({ a.items, a.bytes }, { b.items, b.bytes })
      H.fails(403, fc:create({ id = "more", pk = "p3", pad = ("x"):rep(200) }))
    end
    assert.is_true(db:verify())
  end)

  it("refuses per document an id or unique key of an earlier batch held in memory", function()
    local docs = {}
    for i = 1, 1200 do docs[i] = doc(i) end
    docs[1201] = doc(7)                                -- an id of an earlier batch
    docs[1202] = { id = "x", pk = "p5", u = "u5" }     -- its unique key too
    local ref = assert(db:create_container("ref", SPEC))
    local rres = assert(ref:bulk_load(docs, { batch = 250 }))
    local res = assert(c:bulk_load(docs, { batch = 250, transaction = "load" }))
    assert.are.same(rres, res)
    assert.are.equal(2, res.failed)
    assert.are.equal(409, res.errors[1].status)
    same_contents(ref, c, true)
  end)

  -- The files without a name in `dir` this process holds open (a load's
  -- spilled runs): Linux's /proc, or nil.
  local function open_in(dir)
    local f = io.open("/proc/self/stat")
    if not f then return nil end
    local pid = f:read("*l"):match("^(%d+)")
    f:close()
    local ls = assert(io.popen("ls -l /proc/" .. pid .. "/fd 2>/dev/null"))
    local n = 0
    for line in ls:lines() do
      if line:find(dir .. "/", 1, true) and line:find("(deleted)", 1, true)
      then n = n + 1 end
    end
    ls:close()
    return n
  end

  -- A load in one transaction that spills every batch of 250.
  local function load_spilled(docs, progress)
    return c:bulk_load(docs, { batch = 250, transaction = "load", memory = 1,
                               progress = progress })
  end

  local function listing(dir)
    local ls = assert(io.popen("ls -a " .. dir))
    local t = ls:read("*a")
    ls:close()
    return t
  end

  H.local_it("fails a load whose spilled runs repeat an id or a unique key, naming it, leaving nothing",
    "on a cluster a load is a transaction per batch (docs/cluster.md)", function()
    local dir = dbpath
    local before, seen = listing(dir), nil
    for _, case in ipairs({
      { doc = doc(7), msg = "id 'i7'" },
      { doc = { id = "x", pk = "p5", u = "u5" }, msg = "/u" },
    }) do
      local docs = {}
      for i = 1, 1000 do docs[i] = doc(i) end
      docs[1001] = case.doc
      local _, msg, status = load_spilled(docs, function()
        seen = seen or open_in(dir)
      end)
      assert.are.equal(409, status, msg)
      assert.matches(case.msg, msg, 1, true)
      assert.are.equal(0, db:stats().containers.c.items)
      assert.are.same({}, assert(c:changes{ max_items = 10 }))
      assert.are.equal(before, listing(dir))        -- no file left behind
      if seen then
        assert.is_true(seen >= 1)                   -- a run was spilled
        assert.are.equal(0, open_in(dir))           -- and its file closed
      end
    end
    local docs = {}                                 -- and without repeats:
    for i = 1, 1000 do docs[i] = doc(i) end         -- loaded, nothing left
    assert.are.equal(1000, assert(load_spilled(docs)).written)
    assert.are.equal(before, listing(dir))
    if seen then assert.are.equal(0, open_in(dir)) end
    assert.is_true(db:verify())
  end)

  H.local_it("leaves nothing of a spilled load whose merge fails part way",
    "on a cluster a load is a transaction per batch (docs/cluster.md)", function()
    local docs, first = {}, true
    for i = 1, 1000 do docs[i] = doc(i) end
    -- a write in the load's transaction takes a unique key of a spilled
    -- run: the merge writes the items, refs, index and latest-version
    -- entries, then fails on the unique keys
    local _, msg, status = load_spilled(docs, function()
      if first then
        first = false
        assert(c:create({ id = "w", pk = "p3", u = "u3" }))
      end
    end)
    assert.are.equal(409, status, msg)
    assert.matches("/u", msg, 1, true)
    assert.are.equal(0, db:stats().containers.c.items)
    H.fails(404, c:read("w", "p3"))
    H.fails(404, c:read("i1", "p1"))
    assert.are.same({}, assert(c:changes{ max_items = 10 }))
    assert.is_true(db:verify())
    assert.are.equal(1000, assert(load_spilled(docs)).written)
    assert.is_true(db:verify())
  end)

  it("upserts in a load in one transaction items an earlier batch of it holds", function()
    assert(c:bulk_load({ doc(1), doc(2) }))                -- there before
    local docs = {}
    for i = 1, 600 do docs[i] = doc(i) end
    local d5, d2 = doc(5), doc(2)
    d5.n, d2.n = 555, 222
    docs[601], docs[602] = d5, d2                          -- held; existing
    local res = assert(c:bulk_load(docs, { batch = 100, mode = "upsert",
      transaction = "load", memory = 100000 }))
    assert.are.equal(602, res.written)
    assert.are.equal(0, res.failed)
    assert.are.equal(555, assert(c:read("i5", "p5")).n)
    assert.are.equal(222, assert(c:read("i2", "p2")).n)
    assert.are.equal(600, db:stats().containers.c.items)
    assert.are.equal(600, #assert(c:changes{ max_items = 5000 }))
    assert.is_true(db:verify())
  end)

  H.local_it("fails a load in one transaction whose held id a write in it took meanwhile",
    "on a cluster a load is a transaction per batch (docs/cluster.md)", function()
    local docs, first = {}, true
    for i = 1, 30 do docs[i] = doc(i) end
    local _, msg, status = c:bulk_load(docs, { batch = 10, transaction = "load",
      progress = function()
        if first then                 -- held, not yet in the tables
          first = false
          H.fails(404, c:read("i3", "p3"))
          assert(c:create({ id = "i3", pk = "p3", u = "other" }))
        end
      end })
    assert.are.equal(409, status, msg)
    assert.are.equal(0, db:stats().containers.c.items)
    assert.is_true(db:verify())
  end)

  H.local_it("fails a load in one transaction whose container is replaced meanwhile",
    "on a cluster a load is a transaction per batch (docs/cluster.md)", function()
    local docs = {}
    for i = 1, 30 do docs[i] = doc(i) end
    local function load(change)
      local first = true
      return c:bulk_load(docs, { batch = 10, transaction = "load",
        progress = function()
          if first then first = false; change() end
        end })
    end
    -- a replace changing what is indexed: entries made under the old spec
    -- would leave the index wrong
    local spec = {}
    for k, v in pairs(SPEC) do spec[k] = v end
    spec.indexing = { excluded = { "/secret/?", "/n/?" } }
    local _, msg, status = load(function() assert(db:replace_container("c", spec)) end)
    assert.are.equal(409, status, msg)
    assert.matches("replaced", msg, 1, true)
    assert.are.equal(0, db:stats().containers.c.items)
    assert.is_true(db:verify())
  end)

  H.local_it("leaves nothing of a load in one transaction that fails part way",
    "on a cluster a load is a transaction per batch (docs/cluster.md)", function()
    local i = 0
    local function docs()
      i = i + 1
      if i == 95 then error("the source broke") end
      return doc(i)
    end
    assert.has_error(function()
      c:bulk_load(docs, { batch = 10, transaction = "load" })
    end, "the source broke")
    assert.are.equal(0, db:stats().containers.c.items)
    assert.are.same({}, assert(c:changes{ max_items = 10 }))
    i = 0                                         -- batches: those before stay
    assert.has_error(function() c:bulk_load(docs, { batch = 10 }) end,
      "the source broke")
    assert.are.equal(90, db:stats().containers.c.items)
    assert.is_true(db:verify())
  end)

  H.local_it("runs a load in one transaction again when the map grows, from a list only",
    "a cluster has no map", function()
    local path = H.tmpdir()
    local small = assert(regolith.open(path, { map_size = 1048576 }))
    local sc = assert(small:create_container("c", SPEC))
    local big = {}
    for k = 1, 3000 do big[k] = doc(k) end
    local res = assert(sc:bulk_load(big, { batch = 500, transaction = "load" }))
    assert.are.equal(3000, res.written)
    local sc2 = assert(small:create_container("c2", SPEC))
    local k, more = 0, {}
    for m = 1, 6000 do more[m] = doc(m) end
    local _, msg, status, partial = sc2:bulk_load(function()
      k = k + 1
      return more[k]
    end, { batch = 500, transaction = "load" })
    assert.are.equal(507, status, msg)
    assert.are.same({ written = 0, failed = 0, errors = {} }, partial)
    assert.are.equal(0, small:stats().containers.c2.items)
    assert.is_true(small:verify())
    small:close()
  end)

  -- c:_bulk_whole is the core's method behind transaction = "load"; its
  -- load handle follows the style of every handle (tostring, close).
  H.local_it("shows its load handle's state in tostring: open while the load runs, closed after it",
      "transaction = \"load\" is a local database's", function()
    local seen
    assert(c:_bulk_whole(function(load)
      seen = load
      assert.matches("^regolith%.bulkload %(.+%)$", tostring(load))
      assert.is_nil(tostring(load):find("closed", 1, true))
      assert(c:_bulk_batch({ doc(1) }, "create", load))
      return true
    end))
    assert.are.equal("regolith.bulkload (closed)", tostring(seen))
    local ok, err = pcall(c._bulk_batch, c, { doc(2) }, "create", seen)
    assert.is_false(ok)
    assert.matches("the load is over", err, 1, true)
    assert(c:read("i1", "p1"))
    H.fails(404, c:read("i2", "p2"))
    -- a function that raises: the load abandoned, its handle closed
    ok, err = pcall(c._bulk_whole, c, function(load)
      seen = load
      assert(c:_bulk_batch({ doc(3) }, "create", load))
      error("stop here")
    end)
    assert.is_false(ok)
    assert.matches("stop here", err, 1, true)
    assert.are.equal("regolith.bulkload (closed)", tostring(seen))
    H.fails(404, c:read("i3", "p3"))
  end)

  H.local_it("ends a load's input when its handle is closed, the load itself committed or abandoned as its function says",
      "transaction = \"load\" is a local database's", function()
    if not H.lua54 then                  -- __close is Lua 5.4's
      assert(c:_bulk_whole(function(load)
        assert.is_nil(getmetatable(load).__close)
        return true
      end))
      return
    end
    -- a to-be-closed variable: closed as the function returns true, and
    -- the load is merged and committed
    local run = assert(load([[
      local c, batch = ...
      return c:_bulk_whole(function(load)
        local l <close> = load
        assert(c:_bulk_batch(batch, "create", l))
        return true
      end)
    ]]))
    assert(run(c, { doc(1), doc(2) }))
    assert(c:read("i1", "p1"))
    assert(c:read("i2", "p2"))
    -- closed, then given a batch: that raises, and nothing of the load is
    -- written
    local ok, err = pcall(c._bulk_whole, c, function(l)
      assert(c:_bulk_batch({ doc(3) }, "create", l))
      getmetatable(l).__close(l)
      getmetatable(l).__close(l)           -- idempotent
      assert.are.equal("regolith.bulkload (closed)", tostring(l))
      return c:_bulk_batch({ doc(4) }, "create", l)
    end)
    assert.is_false(ok)
    assert.matches("the load is over", err, 1, true)
    H.fails(404, c:read("i3", "p3"))
    H.fails(404, c:read("i4", "p4"))
    -- closed, then returning true: what its batches gave is committed
    assert(c:_bulk_whole(function(l)
      assert(c:_bulk_batch({ doc(5) }, "create", l))
      getmetatable(l).__close(l)
      return true
    end))
    assert(c:read("i5", "p5"))
  end)

  it("raises on misuse", function()
    assert.has_error(function() c:bulk_load("docs") end)
    assert.has_error(function() c:bulk_load({}, { batch = 0 }) end)
    assert.has_error(function() c:bulk_load({}, { mode = "replace" }) end)
    assert.has_error(function() c:bulk_load({}, { nope = 1 }) end)
    assert.has_error(function() c:bulk_load({}, { transaction = "one" }) end)
    assert.has_error(function() c:bulk_load({}, { memory = 0 }) end)
    local res = assert(c:bulk_load({}))
    assert.are.equal(0, res.written)
  end)

  it("is refused by a database open read-only", function()
    local path = H.tmpdir()
    local w = assert(regolith.open(path))
    assert(w:create_container("c", { partition_key = "/pk" }))
    w:close()
    local ro = assert(regolith.open(path, { readonly = true }))
    H.fails(403, ro:container("c"):bulk_load({ { id = "a", pk = "p" } }))
    ro:close()
  end)
end)
