-- The full-text index in the store: a container whose indexing names a
-- full-text path keeps an index of its texts in the write's transaction
-- (every write path), answers FullTextScore's statistics from it with the
-- scan's exact figures, is built and dropped by a container replace, and
-- is checked by db:verify().  Each query runs on an indexed container and
-- on one without the index holding the same items: results, order and
-- scores must be the same.
local regolith = require "regolith"
local H = require "helper"

describe("the full-text index", function()
  -- (on a cluster too: one instance per bucket, docs/cluster.md; but the
  -- cases that rewrite the local file)
  local db, path, ix, scan

  local words = { "bell", "lamp", "saddle", "rope", "lantern", "kettle",
                  "anchor", "compass", "ladder", "barrel" }

  -- a seeded text of 3 to 14 words
  local seed = 7
  local function rnd(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
  local function text()
    local t = {}
    for i = 1, rnd(12) + 2 do t[i] = words[rnd(rnd(#words))] end
    return table.concat(t, " ")
  end

  local function opts(indexed)
    return { partition_key = "/pk", default_ttl = -1,
             full_text = { paths = { { path = "/text" }, { path = "/note" } } },
             indexing = indexed and { full_text = { "/text" } } or nil }
  end

  local function rows_of(k, sql, params, qopts)
    local rows, info, status = k:query(sql, params, qopts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  local queries = {
    "SELECT c.id, FullTextScore(c.text, 'bell', 'lamp') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')",
    "SELECT TOP 5 c.id, FullTextScore(c.text, 'rope') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'rope')",
    "SELECT c.id, FullTextScore(c.text, 'anchors', 'kettle', 'nothing') AS s FROM c WHERE FullTextContainsAny(c.text, 'anchor', 'kettle') ORDER BY RANK FullTextScore(c.text, 'anchors', 'kettle', 'nothing')",
    "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'saddle rope')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'ladder', 'barrel')",
    "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, {term: 'lantrn', distance: 1})",
    "SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'compass'), FullTextScore(c.text, 'bell', 'barrel'))",
    "SELECT c.id, FullTextScore(c.text, 'bell') AS s FROM c WHERE c.pk = 'p1' ORDER BY RANK FullTextScore(c.text, 'bell')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'Bells', {term: 'compas', distance: 1})",
    "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'the of')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'the', 'kettles') AND FullTextContains(c.note, 'bell')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, {term: 'ropes', distance: 0}, 'anchor lantern')",
    "SELECT VALUE c.id FROM c WHERE c.pk = 'p2' AND FullTextContainsAll(c.text, 'lamp', 'bell')",
    "SELECT TOP 3 c.id, FullTextScore(c.text, 'bell', 'lamp') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')",
    "SELECT TOP 4 c.id, FullTextScore(c.text, 'saddle') AS s FROM c WHERE c.pk != 'p0' ORDER BY RANK FullTextScore(c.text, 'saddle')",
    "SELECT TOP 50 c.id, FullTextScore(c.text, 'compass') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'compass')",
    "SELECT c.id, FullTextScore(c.text, 'kettle') AS s FROM c ORDER BY RANK FullTextScore(c.text, 'kettle') OFFSET 2 LIMIT 3",
    "SELECT TOP 5 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, ['ladder', 'nothing', 'barrels'])",
    "SELECT TOP 2 c.id, FullTextScore(c.text, 'bell') AS s FROM c WHERE FullTextContains(c.text, 'lamp') ORDER BY RANK FullTextScore(c.text, 'bell')",
  }

  -- every query gives the same rows on both containers; the indexed one's
  -- statistics come from the index (nothing loaded for them)
  local function same(what, scanned)
    for _, sql in ipairs(queries) do
      local a, ai = rows_of(ix, sql)
      local b = rows_of(scan, sql)
      assert.are.same(b, a, what .. ": " .. sql)
      if sql:find("FullTextScore") and not sql:find("'p1'") and not scanned then
        assert.is_nil(ai.full_text_loaded, sql)
      end
    end
    -- a ranking with TOP reads the index's best items alone
    local r1, ri = rows_of(ix, queries[14])
    local _, rs = rows_of(scan, queries[14])
    assert.is_true(scanned or ri.loaded < rs.loaded, what)
    assert.is_true(ri.loaded >= #r1)
    local p1 = rows_of(ix, "SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, @t)",
                       { t = { "rope", "anchor" } })
    local p2 = rows_of(scan, "SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, @t)",
                       { t = { "rope", "anchor" } })
    assert.are.same(p2, p1, what .. ": terms as a parameter")
    -- a WHERE's full-text condition reads the items the index names alone
    local a1, ai = rows_of(ix, queries[5])
    local _, bi = rows_of(scan, queries[5])
    assert.is_true(ai.loaded < bi.loaded and ai.full_text_read > 0, what)
    assert.is_true(ai.loaded >= #a1)
    -- pages: the same rows and tokens that a scan's pages give
    for _, sql in ipairs({ queries[4], queries[5], queries[3], queries[17], queries[16],
      "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'rope', 'bell') AND c.pk != 'p0'" }) do
      local pages = {}
      for _, k in ipairs({ ix, scan }) do
        local all, token = {}, nil
        repeat
          local rows, info = rows_of(k, sql, nil, { max_items = 3, continuation = token })
          for _, r in ipairs(rows) do all[#all + 1] = r end
          token = info.continuation
        until not token
        pages[#pages + 1] = all
      end
      assert.are.same(pages[2], pages[1], what .. ", in pages: " .. sql)
    end
    local a = rows_of(ix, queries[8], nil, { full_text_score_scope = "local" })
    local b = rows_of(scan, queries[8], nil, { full_text_score_scope = "local" })
    assert.are.same(b, a, what .. ": the local scope")
  end

  local function both(f)
    f(ix)
    f(scan)
  end

  before_each(function()
    db, path = H.open()
    ix = assert(db:create_container("ix", opts(true)))
    scan = assert(db:create_container("scan", opts(false)))
    seed = 7
    local batch = {}
    for i = 1, 60 do
      batch[i] = { id = "d" .. i, pk = "p" .. (i % 4), text = text(), note = "bell" }
    end
    batch[61] = { id = "empty", pk = "p1", text = "the of and" }
    batch[62] = { id = "notext", pk = "p1", text = 42 }
    batch[63] = { id = "none", pk = "p2" }
    both(function(k) assert(k:bulk_load(batch)) end)
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("gives the statistics and scores a scan gives, from the index", function()
    same("after a bulk load")
    local _, info = rows_of(ix, queries[1])
    assert.is_true(info.full_text_read > 0)
    local _, sinfo = rows_of(scan, queries[1])
    assert.is_true(sinfo.full_text_loaded >= 63)
    assert.is_true(info.charge < sinfo.charge)
    assert.is_true(db:verify())
  end)

  it("follows every kind of write in the write's transaction", function()
    both(function(k)
      assert(k:create({ id = "new", pk = "p1", text = "bell bell bell lamp" }))
      assert(k:replace({ id = "d1", pk = "p1", text = "rope rope saddle" }))
      assert(k:upsert({ id = "d2", pk = "p2", text = "compass" }))
      assert(k:upsert({ id = "up", pk = "p2", text = "lantern kettle" }))
      assert(k:patch("d3", "p3", { { op = "set", path = "/text", value = "ladder barrel bell" } }))
      assert(k:patch("d5", "p1", { { op = "remove", path = "/text" } }))
      assert(k:patch("notext", "p1", { { op = "set", path = "/text", value = "anchor" } }))
      assert(k:delete("d6", "p2"))
      assert(k:batch("p3", { { op = "create", doc = { id = "b", pk = "p3", text = "bell rope" } },
                             { op = "delete", id = "d7" } }))
    end)
    same("after single writes and a batch")
    both(function(k)
      assert(k:create_procedure("put", [[return function(ctx, doc)
        assert(ctx:create(doc))
        return ctx:query("SELECT VALUE FullTextScore(c.text, 'kettle') FROM c "
          .. "WHERE c.id = @id ORDER BY RANK FullTextScore(c.text, 'kettle')", { id = doc.id })[1] end]]))
      assert(k:create_trigger("louder", { type = "pre", source = [[
        return function(ctx)
          local doc = ctx:body()
          doc.text = doc.text .. " kettle"
          ctx:set_body(doc)
        end]] }))
    end)
    local a = ix:execute("put", "p1", { id = "proc", pk = "p1", text = "kettle lamp" })
    local b = scan:execute("put", "p1", { id = "proc", pk = "p1", text = "kettle lamp" })
    assert.are.equal(b, a)
    both(function(k)
      assert(k:upsert({ id = "proc", pk = "p1", text = "saddle" }, { pre_trigger = "louder" }))
    end)
    same("after a procedure and a trigger")
    -- what a transaction undoes, the index never saw
    local ok = pcall(db.group, db, function()
      assert(ix:create({ id = "gone", pk = "p1", text = "bell bell bell bell" }))
      error("undo")
    end)
    assert.is_false(ok)
    same("after a rollback")
    assert.is_true(db:verify())
  end)

  it("leaves out an expired item at once, and drops it when purged", function()
    -- (compared only once it has expired in both: on a loaded machine the
    -- second passes between two queries)
    both(function(k)
      assert(k:create({ id = "brief", pk = "p1", ttl = 1, text = "bell bell bell" }))
    end)
    os.execute("sleep 2.1")
    same("expired, not purged (the scan's statistics)", true)
    assert(db:purge_expired())
    same("purged")
    local _, info = rows_of(ix, queries[1])
    assert.is_nil(info.full_text_loaded)
    assert.is_true(db:verify())
  end)

  it("is built by the first write of a container whose items others follow", function()
    local k = assert(db:create_container("first", opts(true)))
    local later = assert(db:create_container("later", opts(false)))
    assert(later:create({ id = "x", pk = "p", text = "bell" }))
    assert(k:create({ id = "a", pk = "p", text = "bell lamp" }))
    assert.are.same({ "a" }, assert(k:query("SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'lamp')")))
    assert.is_true(db:verify())
  end)

  it("is built by a replace that adds it and dropped by one that removes it", function()
    assert(db:replace_container("scan", opts(true)))
    scan = db:container("scan")
    local _, info = rows_of(scan, queries[1])
    assert.is_nil(info.full_text_loaded)
    assert.is_true(db:verify())
    assert(db:replace_container("ix", opts(false)))
    ix, scan = scan, db:container("ix")
    same("after a replace built one index and dropped the other")
    assert.is_true(db:verify())
    -- another language is another index
    local o = opts(true)
    o.full_text.paths[1].language = "fr-FR"
    assert(db:replace_container("scan", o))
    local fr = rows_of(db:container("scan"), queries[1])
    assert.is_true(#fr > 0)
    assert.is_true(db:verify())
  end)

  it("ranks with TOP through the index, then the WHERE's candidates, as a scan does", function()
    local batch = {}
    for i = 1, 900 do                -- more than a ranking's TOP reads whole
      batch[i] = { id = ("m%03d"):format(i), pk = "q" .. (i % 5),
                   text = i == 77 and "common rare" or i % 3 == 0 and "lamp common"
                          or i % 3 == 1 and "common lamp" or "common" }
    end
    both(function(k) assert(k:bulk_load(batch)) end)
    for _, sql in ipairs({
      "SELECT TOP 3 c.id, FullTextScore(c.text, 'rare') AS s FROM c WHERE FullTextContains(c.text, 'common') ORDER BY RANK FullTextScore(c.text, 'rare')",
      "SELECT TOP 5 c.id, FullTextScore(c.text, 'rare', 'lamp') AS s FROM c WHERE FullTextContainsAny(c.text, 'common', 'bell') ORDER BY RANK FullTextScore(c.text, 'rare', 'lamp')",
      "SELECT c.id, FullTextScore(c.text, 'rare') AS s FROM c WHERE FullTextContains(c.text, 'common') ORDER BY RANK FullTextScore(c.text, 'rare') OFFSET 140 LIMIT 4",
      -- the WHERE requires every term of the score: the ranking reads the
      -- items holding them all, and the phrase is tested on each
      "SELECT TOP 3 c.id, FullTextScore(c.text, 'lamp', 'common') AS s FROM c WHERE FullTextContains(c.text, 'common lamp') ORDER BY RANK FullTextScore(c.text, 'lamp', 'common')",
      "SELECT TOP 4 c.id, FullTextScore(c.text, 'common') AS s FROM c WHERE FullTextContainsAll(c.text, 'common', 'lamp') ORDER BY RANK FullTextScore(c.text, 'common')",
    }) do
      local a, ai = rows_of(ix, sql)
      local b, bi = rows_of(scan, sql)
      assert.are.same(b, a, sql)
      assert.is_true(ai.full_text_read > 0 and ai.loaded <= bi.loaded, sql)
    end
    assert.is_true(db:verify())
  end)

  it("leaves a computed property's text to the query, which evaluates it", function()
    local k = assert(db:create_container("cp", { partition_key = "/pk",
      computed_properties = { { name = "cp_t", query = "SELECT VALUE LOWER(c.text) FROM c" } },
      full_text = { paths = { { path = "/cp_t" } } }, indexing = { full_text = { "/cp_t" } } }))
    assert(k:create({ id = "1", pk = "a", text = "Two Bicycles" }))
    assert(k:create({ id = "2", pk = "a", text = "a kayak" }))
    assert.are.same({ "1" }, assert(k:query("SELECT VALUE c.id FROM c WHERE FullTextContains(c.cp_t, 'bicycle')")))
    assert.are.same({ "1", "2" }, assert(k:query("SELECT TOP 2 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.cp_t, 'bicycle')")))
    assert.is_true(db:verify())
  end)

  H.local_it("lets verify find a damaged full-text table", "it rewrites the local file", function()
    assert(H.execute("env -u LD_PRELOAD make -s build/tools/lmdb_poke"))
    db:close()
    assert(H.execute(("build/tools/lmdb_poke '%s' fulltext del-first"):format(path)))
    db = assert(regolith.open(path))
    local ok, report = db:verify()
    assert.is_nil(ok)
    assert.truthy(report:find("full-text index", 1, true), report)
  end)

  H.local_it("opens read-only a database made before full-text indexes", "it rewrites the local file", function()
    assert(H.execute("env -u LD_PRELOAD make -s build/tools/lmdb_poke"))
    db:close()
    assert(H.execute(("build/tools/lmdb_poke '%s' fulltext drop"):format(path)))
    db = assert(regolith.open(path, { readonly = true }))
    assert(db:container("scan"):query(queries[4]))
    db:close()
    db = assert(regolith.open(path))
    assert(db:container("scan"):query(queries[4]))
  end)
end)
