-- Full-text search: the text pipeline, FullTextContains, FullTextContainsAll,
-- FullTextContainsAny, FullTextScore in ORDER BY RANK (and, beyond Cosmos DB,
-- projected and filtered), RRF, the full-text policy and its languages.
-- The Cosmos reference's examples appear with other words and data.
local regolith = require "regolith"
local H = require "helper"

describe("full-text search", function()
  local db, c

  local function ids(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    local out = {}
    for i, r in ipairs(rows) do out[i] = type(r) == "table" and r.id or r end
    return out, info
  end

  local function v(expr, params)
    local rows, info, status = c:query("SELECT VALUE " .. expr, params)
    assert(rows, ("%s -> %s (%s)"):format(expr, tostring(info), tostring(status)))
    return rows[1]
  end

  -- BM25 as docs/search.md states it (k1 = 1.2, b = 0.75).
  local function bm25(tf, dl, avgdl, n, df)
    local idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))
  end

  local function near(a, b)
    return math.abs(a - b) <= 1e-9 * math.max(1, math.abs(b))
  end

  before_each(function()
    db = H.open()
    c = assert(db:create_container("shop", { partition_key = "/pk" }))
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("the text pipeline", function()
    it("matches words whatever their case and punctuation", function()
      assert.is_true(v("FullTextContains('Rust-proof CHAIN, for road bikes!', 'chain')"))
      assert.is_true(v("FullTextContains('Rust-proof CHAIN, for road bikes!', 'RUST')"))
      assert.is_false(v("FullTextContains('Rust-proof CHAIN', 'rusty-proof')"))
    end)

    it("stems English words to one term (Snowball)", function()
      assert.is_true(v("FullTextContains('three folding bicycles', 'bicycle')"))
      assert.is_true(v("FullTextContains('she was cycling home', 'cycles')"))
      assert.is_true(v("FullTextContains('generously padded', 'generous')"))
      assert.is_false(v("FullTextContains('a tandem', 'tangent')"))
    end)

    it("drops Cosmos DB's English stopwords, in documents and searches", function()
      assert.is_false(v("FullTextContains('the helmet and the gloves', 'the')"))
      assert.is_false(v("FullTextContains('what is this', 'this')"))
      assert.is_true(v("FullTextContains('the helmet and the gloves', 'the gloves')"))
      -- contractions are stopwords whole, with either apostrophe
      assert.is_false(v([[FullTextContains("it doesn't fit", "doesn't")]]))
      assert.is_true(v("FullTextContains('it doesn’t fit', 'fit')"))
    end)

    it("matches a phrase only with its words in place, stopwords counted", function()
      local t = "'a lock for the rear wheel and a light'"
      assert.is_true(v("FullTextContains(" .. t .. ", 'rear wheel')"))
      assert.is_false(v("FullTextContains(" .. t .. ", 'wheel rear')"))
      assert.is_true(v("FullTextContains(" .. t .. ", 'lock for the rear')"))
      -- "lock rear" skips two words the phrase does not have
      assert.is_false(v("FullTextContains(" .. t .. ", 'lock rear')"))
      assert.is_false(v("FullTextContains(" .. t .. ", 'lock wheel light')"))
    end)

    it("keeps letters beyond ASCII and folds their case", function()
      assert.is_true(v("FullTextContains('ÉCLAIR au café', 'éclair')"))
      assert.is_true(v("FullTextContains('Москва', 'москва')"))
      assert.is_false(v("FullTextContains('naïve', 'naive')"))
    end)

    it("gives false for what is not text, undefined never", function()
      assert.is_false(v("FullTextContains(42, 'x')"))
      assert.is_false(v("FullTextContainsAny(null, 'x')"))
      assert.is_false(v("FullTextContains('', 'x')"))
      assert.is_false(v("FullTextContains('bell', '')"))
    end)
  end)

  describe("FullTextContains, All and Any", function()
    before_each(function()
      assert(c:create({ id = "1", pk = "a", text = "A red bicycle with a basket" }))
      assert(c:create({ id = "2", pk = "a", text = "Red skateboard wheels" }))
      assert(c:create({ id = "3", pk = "b", text = "Blue bicycles for mountain trails" }))
      assert(c:create({ id = "4", pk = "b", text = "A kayak paddle", other = "bicycle" }))
      assert(c:create({ id = "5", pk = "b", note = "no text here" }))
    end)

    it("finds the items holding a word (the reference's first example)", function()
      local got = ids("SELECT TOP 10 * FROM c WHERE FullTextContains(c.text, 'bicycle')")
      table.sort(got)
      assert.are.same({ "1", "3" }, got)
    end)

    it("needs every term with FullTextContainsAll", function()
      assert.are.same({ "1" },
        ids("SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'red', 'bicycle')"))
    end)

    it("needs one term with FullTextContainsAny, combined with AND", function()
      local got = ids([[SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'red')
                        AND FullTextContainsAny(c.text, 'bicycle', 'skateboard')]])
      table.sort(got)
      assert.are.same({ "1", "2" }, got)
      got = ids("SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'kayak', 'mountain')")
      table.sort(got)
      assert.are.same({ "3", "4" }, got)
    end)

    it("filters with FullTextContains and ranks with FullTextScore (the reference's example)", function()
      assert(c:create({ id = "6", pk = "b", text = "A red bicycle bell and a red bicycle lamp" }))
      assert.are.same({ "6", "1", "2" }, ids([[SELECT TOP 10 VALUE c.id FROM c
        WHERE FullTextContains(c.text, "red")
        ORDER BY RANK FullTextScore(c.text, "red", "bicycle")]]))
    end)

    it("takes full_text_score_scope = container or local as a query option, nothing else", function()
      assert(c:query("SELECT VALUE c.id FROM c", nil, { full_text_score_scope = "local" }))
      assert(c:query("SELECT VALUE c.id FROM c", nil, { full_text_score_scope = "container" }))
      assert.has_error(function()
        c:query("SELECT VALUE c.id FROM c", nil, { full_text_score_scope = "galaxy" })
      end)
    end)

    it("serves computed properties, as a deterministic function", function()
      local cp = assert(db:create_container("cp", { partition_key = "/pk",
        computed_properties = { { name = "cp_bike",
          query = "SELECT VALUE FullTextContains(c.text, 'bicycle') FROM c" } } }))
      assert(cp:create({ id = "1", pk = "a", text = "two bicycles" }))
      assert(cp:create({ id = "2", pk = "a", text = "a kayak" }))
      assert.are.same({ "1" }, assert(cp:query("SELECT VALUE c.id FROM c WHERE c.cp_bike = true")))
      assert.matches("nondeterministic", select(2, pcall(db.create_container, db, "cp2",
        { partition_key = "/pk", computed_properties = { { name = "cp_s",
          query = "SELECT VALUE FullTextScore(c.text, 'x') FROM c" } } })))
    end)

    it("takes search terms from parameters", function()
      assert.are.same({ "2" }, ids(
        "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, @w)", { w = "skateboards" }))
    end)

    it("matches terms within an edit distance with {term, distance}", function()
      local q = "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, %s) ORDER BY c.id"
      assert.are.same({}, ids(q:format("{term: 'bycicle', distance: 0}")))
      assert.are.same({}, ids(q:format("{term: 'bycicle', distance: 1}")))
      assert.are.same({ "1", "3" }, ids(q:format("{term: 'bycicle', distance: 2}")))
      assert.are.same({ "2" }, ids(q:format("{term: 'skatebaord', distance: 1}")))
      assert.are.same({ "1", "3" }, ids(
        "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, {term: 'bicycel', distance: 1}, 'kayakk') ORDER BY c.id"))
    end)

    it("refuses a fuzzy distance outside 0 to 2, and terms that are not constants", function()
      local msg = H.fails(400, c:query(
        "SELECT * FROM c WHERE FullTextContains(c.text, {term: 'red', distance: 3})"))
      assert.matches("distance is 0, 1 or 2", msg)
      msg = H.fails(400, c:query("SELECT * FROM c WHERE FullTextContains(c.text, c.other)"))
      assert.matches("literals or parameters", msg)
      msg = H.fails(400, c:query("SELECT * FROM c WHERE FullTextContains(c.text, 7)"))
      assert.matches("strings", msg)
    end)
  end)

  describe("FullTextScore and ORDER BY RANK", function()
    -- documents of known terms: "bell" and "lamp" are their own stems
    local docs = {
      { id = "d1", pk = "a", text = "bell bell bell lamp" },
      { id = "d2", pk = "a", text = "bell lamp" },
      { id = "d3", pk = "b", text = "lamp lamp lamp lamp lamp lamp" },
      { id = "d4", pk = "b", text = "saddle" },
      { id = "d5", pk = "b", text = "bell" },
    }
    before_each(function()
      for _, d in ipairs(docs) do assert(c:create(d)) end
      assert(c:create({ id = "d6", pk = "b", title = "no text" }))
    end)

    it("ranks by BM25 over the container's statistics", function()
      -- N = 5 texts, 14 terms: avgdl 2.8; df(bell) = 3, df(lamp) = 3
      local rows = assert(c:query([[SELECT c.id, FullTextScore(c.text, 'bell', 'lamp') AS s
                                    FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')]]))
      local want = {
        d1 = bm25(3, 4, 2.8, 5, 3) + bm25(1, 4, 2.8, 5, 3),
        d2 = bm25(1, 2, 2.8, 5, 3) + bm25(1, 2, 2.8, 5, 3),
        d3 = bm25(6, 6, 2.8, 5, 3),
        d5 = bm25(1, 1, 2.8, 5, 3),
        d4 = 0,
      }
      local order = {}
      for i, r in ipairs(rows) do
        order[i] = r.id
        if want[r.id] then assert(near(r.s, want[r.id]), r.id .. ": " .. tostring(r.s)) end
      end
      assert.are.same({ "d1", "d2", "d3", "d5", "d4", "d6" }, order)
    end)

    it("counts each term once, and takes the older array form", function()
      local a = assert(c:query("SELECT VALUE FullTextScore(c.text, 'bell', 'bells', 'bell') FROM c WHERE c.id = 'd1'"))[1]
      local b = assert(c:query("SELECT VALUE FullTextScore(c.text, ['bell']) FROM c WHERE c.id = 'd1'"))[1]
      assert(near(a, bm25(3, 4, 2.8, 5, 3)))
      assert(near(b, a))
    end)

    it("keeps TOP, WHERE and paging with the ranking", function()
      assert.are.same({ "d1", "d2" }, ids(
        "SELECT TOP 2 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')"))
      assert.are.same({ "d3" }, ids(
        "SELECT TOP 1 VALUE c.id FROM c WHERE c.pk = 'b' ORDER BY RANK FullTextScore(c.text, 'lamp')"))
      local seen, token = {}, nil
      repeat
        local rows, info = assert(c:query(
          "SELECT VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'bell', 'lamp')",
          nil, { max_items = 2, continuation = token }))
        for _, id in ipairs(rows) do seen[#seen + 1] = id end
        token = info.continuation
      until not token
      assert.are.same({ "d1", "d2", "d3", "d5", "d4", "d6" }, seen)
    end)

    it("filters on a score threshold (beyond Cosmos DB)", function()
      local got = ids([[SELECT VALUE c.id FROM c WHERE FullTextScore(c.text, 'bell') > 0.5
                        ORDER BY RANK FullTextScore(c.text, 'bell')]])
      assert.are.same({ "d1", "d5", "d2" }, got)
    end)

    it("scores over the queried partition with full_text_score_scope = local", function()
      -- partition b: d3, d4, d5 have text: N = 3, 8 terms, df(bell) = 1
      local s = assert(c:query("SELECT VALUE FullTextScore(c.text, 'bell') FROM c WHERE c.id = 'd5'",
                               nil, { partition_key = "b", full_text_score_scope = "local" }))[1]
      assert(near(s, bm25(1, 1, 8 / 3, 3, 1)))
      s = assert(c:query("SELECT VALUE FullTextScore(c.text, 'bell') FROM c WHERE c.id = 'd5'",
                         nil, { partition_key = "b" }))[1]
      assert(near(s, bm25(1, 1, 2.8, 5, 3)))
      assert.has_error(function()
        c:query("SELECT * FROM c", nil, { full_text_score_scope = "galaxy" })
      end)
    end)

    it("charges the pass that reads the statistics, and shows it in info", function()
      local _, plain = assert(c:query("SELECT * FROM c"))
      local _, ranked = assert(c:query("SELECT * FROM c ORDER BY RANK FullTextScore(c.text, 'bell')"))
      assert.are.equal(2 * plain.loaded, ranked.loaded)
      assert.are.equal(plain.loaded, ranked.full_text_loaded)
      assert.is_nil(plain.full_text_loaded)
      assert.is_true(ranked.charge > plain.charge)
    end)

    it("stops the statistics' pass at the query's time limit, not after it", function()
      local path = H.tmpdir()
      local tdb = assert(regolith.open(path))
      local tc = assert(tdb:create_container("f", { partition_key = "/pk" }))
      local words = {}
      for i = 1, 4000 do words[i] = "w" .. i end
      local text = table.concat(words, " ")
      for i = 1, 150 do assert(tc:create({ id = "i" .. i, pk = "big", text = text })) end
      assert(tc:create({ id = "s", pk = "small", text = "w1 w2" }))
      -- the query reads one item, its statistics the 151 of the container
      local sql = "SELECT TOP 1 c.id FROM c WHERE c.pk = 'small' " ..
                  "ORDER BY RANK FullTextScore(c.text, 'w1')"
      local t0 = os.clock()
      assert.are.same({ { id = "s" } }, (assert(tc:query(sql))))
      local pass = os.clock() - t0
      tdb:close()
      tdb = assert(regolith.open(path, { query_time = pass / 20 }))
      tc = assert(tdb:container("f"))
      t0 = os.clock()
      assert.matches("the query exceeded its time limit", H.fails(408, tc:query(sql)))
      -- once the pass ran to its end, and the query stopped after it
      assert.is_true(os.clock() - t0 < pass / 2, "the pass ran on")
      tdb:close()
    end)

    it("refuses what ORDER BY RANK and FullTextScore cannot take", function()
      assert.matches("ORDER BY RANK takes", H.fails(400, c:query("SELECT * FROM c ORDER BY RANK c.text")))
      assert.matches("property path of the FROM item", H.fails(400, c:query(
        "SELECT * FROM c ORDER BY RANK FullTextScore(LOWER(c.text), 'bell')")))
      assert.matches("strings", H.fails(400, c:query(
        "SELECT * FROM c ORDER BY RANK FullTextScore(c.text, 12)")))
      assert.matches("property path", H.fails(400, c:query("SELECT VALUE FullTextScore('bell', 'bell')")))
    end)
  end)

  describe("RRF", function()
    before_each(function()
      assert(c:create({ id = "x", pk = "a", text = "bell bell", title = "lamp" }))
      assert(c:create({ id = "y", pk = "a", text = "bell", title = "lamp lamp lamp" }))
      assert(c:create({ id = "z", pk = "a", text = "saddle", title = "lamp lamp" }))
    end)

    it("fuses the ranks of its scoring functions: sum of 1 / (60 + rank)", function()
      -- text 'bell': x 1st, y 2nd (z none); title 'lamp': y, z, x
      -- x: 1/61 + 1/63, y: 1/62 + 1/61, z: 1/62
      assert.are.same({ "y", "x", "z" }, ids([[SELECT VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'), FullTextScore(c.title, 'lamp'))]]))
    end)

    it("weighs each function's ranks", function()
      -- weights [3, 1]: x 3/61 + 1/63, y 3/62 + 1/61, z 1/62
      assert.are.same({ "x", "y", "z" }, ids([[SELECT VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'), FullTextScore(c.title, 'lamp'), [3, 1])]]))
      assert.are.same({ "x", "y", "z" }, ids([[SELECT VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'), FullTextScore(c.title, 'lamp'), [@w, 1])]], { w = 3 }))
      assert.are.same({ "x" }, ids([[SELECT TOP 1 VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'), FullTextScore(c.title, 'lamp'), [3, 1])]]))
    end)

    it("pages through a fused ranking", function()
      local seen, token = {}, nil
      repeat
        local rows, info = assert(c:query([[SELECT VALUE c.id FROM c ORDER BY RANK
          RRF(FullTextScore(c.text, 'bell'), FullTextScore(c.title, 'lamp'))]],
          nil, { max_items = 1, continuation = token }))
        for _, id in ipairs(rows) do seen[#seen + 1] = id end
        token = info.continuation
      until not token
      assert.are.same({ "y", "x", "z" }, seen)
    end)

    it("fuses FullTextScore with VectorDistance, each in its own direction", function()
      local h = assert(db:create_container("hy", { partition_key = "/pk" }))
      assert(h:create({ id = "x", pk = "a", text = "bell bell", v = { 1, 0 } }))
      assert(h:create({ id = "y", pk = "a", text = "bell", v = { 0, 1 } }))
      assert(h:create({ id = "z", pk = "a", text = "saddle", v = { 0.9, 0.1 } }))
      local function order(sql)
        return assert(h:query(sql, { q = { 0, 1 } }))
      end
      -- cosine to (0, 1): y, z, x; text: x, y.  x 1/61 + 1/63, y 1/62 + 1/61
      assert.are.same({ "y", "x", "z" }, order([[SELECT VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'), VectorDistance(c.v, @q))]]))
      -- euclidean: the nearest (lowest) first, so y still ranks first
      assert.are.same({ "y", "x", "z" }, order([[SELECT VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'),
            VectorDistance(c.v, @q, false, {distanceFunction: 'euclidean'}))]]))
      -- weights: the text's ranking three times the vector's
      assert.are.same({ "x", "y", "z" }, order([[SELECT VALUE c.id FROM c ORDER BY RANK
        RRF(FullTextScore(c.text, 'bell'), VectorDistance(c.v, @q), [3, 1])]]))
    end)

    it("is refused outside ORDER BY RANK and with bad arguments", function()
      assert.matches("only be the key of ORDER BY RANK", H.fails(400, c:query(
        "SELECT VALUE RRF(FullTextScore(c.text, 'a'), FullTextScore(c.text, 'b')) FROM c")))
      assert.matches("at least 2", H.fails(400, c:query(
        "SELECT * FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'a'))")))
      assert.matches("one weight per", H.fails(400, c:query(
        "SELECT * FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'a'), FullTextScore(c.title, 'b'), [1])")))
      assert.matches("FullTextScore and VectorDistance", H.fails(400, c:query(
        "SELECT * FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'a'), c.n)")))
      assert.matches("weights are finite", H.fails(400, c:query(
        "SELECT * FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'a'), FullTextScore(c.title, 'b'), [@w, 1])",
        { w = "heavy" })))
    end)
  end)

  describe("on a Redis Cluster", function()
    it("ranks by FullTextScore as locally: the engine reads the statistics there", function()
      if not H.cluster then return end
      assert(c:create({ id = "1", pk = "a", text = "bell" }))
      assert(c:create({ id = "2", pk = "b", text = "bell bell bell tower" }))
      assert(c:create({ id = "3", pk = "c", text = "tower" }))
      local rows = assert(c:query("SELECT VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'bell')"))
      assert.are.same({ "2", "1", "3" }, rows)          -- the most 'bell' first
    end)
  end)

  describe("the full-text policy", function()
    it("takes Lua-style options and Cosmos DB's names, and keeps them in the spec", function()
      local a = assert(db:create_container("a", { partition_key = "/pk",
        full_text = { default_language = "en-US", paths = { { path = "/text", language = "en-US" } } },
        indexing = { full_text = { "/text" } } }))
      assert.are.same({ "/text" }, a:spec().indexing.full_text)
      local b = assert(db:create_container("b", { partition_key = "/pk",
        fullTextPolicy = { defaultLanguage = "en-US",
                           fullTextPaths = { { path = "/text", language = "en-US" } } },
        indexing = { fullTextIndexes = { { path = "/text" } } } }))
      assert.are.equal("en-US", b:spec().fullTextPolicy.defaultLanguage)
    end)

    it("analyzes each path in its language", function()
      local d = assert(db:create_container("de", { partition_key = "/pk",
        full_text = { default_language = "en-US",
                      paths = { { path = "/text", language = "de-DE" } } } }))
      assert(d:create({ id = "1", pk = "a", text = "Die Häuser der Stadt", en = "the houses" }))
      local rows = assert(d:query("SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'Haus')"))
      assert.are.same({ "1" }, rows)
      -- German keeps "die" (only en-US removes stopwords)
      rows = assert(d:query("SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'die')"))
      assert.are.same({ "1" }, rows)
      -- another path takes the default language
      rows = assert(d:query("SELECT VALUE c.id FROM c WHERE FullTextContains(c.en, 'house')"))
      assert.are.same({ "1" }, rows)
    end)

    it("knows Cosmos DB's languages, in any case", function()
      for i, lang in ipairs({ "en-US", "de-DE", "es-ES", "fr-FR", "it-IT", "pt-PT", "pt-BR", "EN-us" }) do
        assert(db:create_container("l" .. i, { partition_key = "/pk",
          full_text = { default_language = lang } }))
      end
    end)

    it("refuses what Cosmos DB refuses", function()
      local function bad(opts, pattern)
        opts.partition_key = "/pk"
        local ok, err = pcall(db.create_container, db, "bad", opts)
        assert.is_false(ok)
        assert.matches(pattern, tostring(err))
      end
      bad({ full_text = { default_language = "xx-XX" } }, "one of en%-US")
      bad({ full_text = { paths = { { path = "/tags/[]", language = "en-US" } } } }, "path")
      bad({ full_text = { paths = { { path = "/*" } } } }, "path")
      bad({ full_text = { paths = { { path = "/t" }, { path = "/t" } } } }, "given twice")
      bad({ indexing = { full_text = { "/text" } } }, "needs the path in the full%-text policy")
      bad({ full_text = { language = "en-US" } }, "has no field 'language'")
      bad({ full_text = {}, fullTextPolicy = {} }, "either")
      assert.are.same({ "shop" }, db:containers())
    end)
  end)
end)
