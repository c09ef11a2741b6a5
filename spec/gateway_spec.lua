-- The gateway's parts that need no nginx: a Cosmos container definition
-- and a regolith spec made from each other, database directory names.
-- (The gateway itself is tested through Microsoft's SDKs: tests/sdk/.)
local regolith = require "regolith"
local H = require "helper"
local policy = require "regolith.gateway.policy"
local catalog = require "regolith.gateway.catalog"
local wire = require "regolith.gateway.wire"

-- The status a function fails with (wire.fail), or nil.
local function status_of(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then return nil end
  assert(wire.is_error(err), tostring(err))
  return err.status, err.message
end

describe("the gateway's errors", function()
  after_each(function() H.cleanup() end)

  it("carries a 429's retry hint, for x-ms-retry-after-ms", function()
    local db = H.open()
    local c = assert(db:create_container("c", { partition_key = "/pk",
      throughput = 1 }))
    assert(c:create({ id = "a", pk = "p" }))       -- a debt of seconds
    local ok, err = pcall(wire.check, c:read("a", "p"))
    assert.is_false(ok)
    assert.is_true(wire.is_error(err))
    assert.are.equal(429, err.status)
    assert.is_true(err.retry_after_ms >= 1)
    local r = { out = {} }
    wire.send_error(r, err.status, err.message, err.substatus,
                    err.retry_after_ms)
    assert.are.equal(tostring(err.retry_after_ms), r.out["x-ms-retry-after-ms"])
    assert.are.equal("TooManyRequests", r.reply.body.code)
    ok, err = pcall(wire.check, nil, "gone", 404)
    assert.is_nil(err.retry_after_ms)
  end)
end)

describe("the gateway's container definitions", function()
  it("makes a regolith spec of a Cosmos definition", function()
    local spec = policy.spec({
      id = "posts",
      partitionKey = { paths = { "/postId" }, kind = "Hash", version = 2 },
      indexingPolicy = {
        indexingMode = "consistent", automatic = true,
        includedPaths = { { path = "/*" } },
        excludedPaths = { { path = '/"_etag"/?' }, { path = '/"my key"/?' },
                          { path = "/content/*" } },
        compositeIndexes = { { { path = "/userId", order = "ascending" },
                               { path = "/date", order = "descending" } } },
      },
      uniqueKeyPolicy = { uniqueKeys = { { paths = { "/slug" } } } },
      defaultTtl = -1,
      changeFeedPolicy = { retentionDuration = 10 },
      conflictResolutionPolicy = { mode = "LastWriterWins" },
    })
    assert.are.same({
      physical_partitions = 1, partition_key = "/postId",
      indexing = { automatic = true, included = { "/*" },
                   excluded = { "/my key/?", "/content/*" },
                   composite = { { { path = "/userId", order = "ascending" },
                                   { path = "/date", order = "descending" } } } },
      unique_keys = { { "/slug" } }, default_ttl = -1,
      change_feed = { retention = 600 },
    }, spec)
    -- regolith takes it as it is
    local db = H.open()
    assert(db:create_container("posts", spec))
    db:close()
    H.cleanup()
  end)

  it("gives containers without a key the SDKs' /_partitionKey, and refuses what regolith cannot do", function()
    assert.are.equal("/_partitionKey", policy.spec({ id = "x" }).partition_key)
    assert.are.same({ "/a", "/b" }, policy.spec({ partitionKey = { paths = { "/a", "/b" },
      kind = "MultiHash" } }).partition_key)
    assert.are.equal(false, policy.spec({ indexingPolicy = { indexingMode = "none",
      automatic = false } }).indexing.automatic)
    for _, def in ipairs({
      { partitionKey = { paths = { "/a", "/b" }, kind = "Hash" } },
      { partitionKey = { paths = { "/a", "/b", "/c", "/d" }, kind = "MultiHash" } },
      { partitionKey = { paths = { "/a" }, kind = "Range" } },
      { indexingPolicy = { spatialIndexes = { { path = "/loc/*" } } } },
      { indexingPolicy = { indexingMode = "sometimes" } },
      { defaultTtl = "soon" },
      { changeFeedPolicy = { retentionDuration = -1 } },
    }) do
      assert.are.equal(400, (status_of(policy.spec, def)))
    end
  end)

  it("takes a Cosmos vector policy as it is, and gives it back", function()
    local def = { id = "v", partitionKey = { paths = { "/pk" } },
      indexingPolicy = { includedPaths = { { path = "/*" } },
        vectorIndexes = { { path = "/emb", type = "diskANN",
                            quantizationByteSize = 8, indexingSearchListSize = 50 } } },
      vectorEmbeddingPolicy = { vectorEmbeddings = { { path = "/emb",
        dataType = "float32", dimensions = 16, distanceFunction = "euclidean" } } } }
    local db = H.open()
    local c = assert(db:create_container("v", policy.spec(def)))
    local back = policy.definition("v", c:spec())
    assert.are.same(def.vectorEmbeddingPolicy, back.vectorEmbeddingPolicy)
    assert.are.same(def.indexingPolicy.vectorIndexes, back.indexingPolicy.vectorIndexes)
    db:close()
    H.cleanup()
    -- what the core refuses reaches the client as 400 with the rule
    def.vectorEmbeddingPolicy.vectorEmbeddings[1].dimensions = 5000
    db = H.open()
    local ok, err = pcall(db.create_container, db, "w", policy.spec(def))
    assert.is_false(ok)
    assert.matches("dimensions", err)
    db:close()
    H.cleanup()
  end)

  it("makes the Cosmos definition of a regolith spec, which gives the spec back", function()
    local spec = { partition_key = { "/t", "/u" }, physical_partitions = 1,
      indexing = { excluded = { "/secret/?" },
                   composite = { { { path = "/a" }, { path = "/b", order = "descending" } } } },
      default_ttl = 3600, change_feed = { retention = 7200 } }
    local def = policy.definition("c", spec, { conflictResolutionPolicy = { mode = "Custom" } })
    assert.are.same({ paths = { "/t", "/u" }, kind = "MultiHash", version = 2 }, def.partitionKey)
    assert.are.same({ { path = "/*" } }, def.indexingPolicy.includedPaths)
    assert.are.same({ { path = "/secret/?" }, { path = '/"_etag"/?' } },
      def.indexingPolicy.excludedPaths)
    assert.are.equal("descending", def.indexingPolicy.compositeIndexes[1][2].order)
    assert.are.equal(3600, def.defaultTtl)
    assert.are.same({ retentionDuration = 120 }, def.changeFeedPolicy)
    assert.are.same({ mode = "Custom" }, def.conflictResolutionPolicy)
    local again = policy.spec(def)
    assert.are.same(spec.partition_key, again.partition_key)
    assert.are.same({ "/secret/?" }, again.indexing.excluded)
    assert.are.same(spec.change_feed, again.change_feed)
    assert.are.equal("[]", regolith.json.encode(def.uniqueKeyPolicy.uniqueKeys))
  end)

  it("maps Cosmos's full-text policy and indexes both ways", function()
    local spec = policy.spec({ id = "docs",
      fullTextPolicy = { defaultLanguage = "en-US",
        fullTextPaths = { { path = "/text", language = "de-DE" }, { path = "/title" } } },
      indexingPolicy = { fullTextIndexes = { { path = "/text" } } } })
    assert.are.same({ default_language = "en-US", paths = {
      { path = "/text", language = "de-DE" }, { path = "/title" } } }, spec.full_text)
    assert.are.same({ "/text" }, spec.indexing.full_text)
    local db = H.open()
    spec.partition_key = "/pk"
    local c = assert(db:create_container("docs", spec))
    local def = policy.definition("docs", c:spec())
    assert.are.same({ defaultLanguage = "en-US", fullTextPaths = {
      { path = "/text", language = "de-DE" }, { path = "/title", language = "en-US" } } },
      def.fullTextPolicy)
    assert.are.same({ { path = "/text" } }, def.indexingPolicy.fullTextIndexes)
    db:close()
    H.cleanup()
  end)
end)

describe("the gateway's database directories", function()
  it("escape what a file name cannot hold, and never name the catalog", function()
    assert.are.equal("blog", catalog.dirname("blog"))
    assert.are.equal("my%20db", catalog.dirname("my db"))
    assert.are.equal("%5Fgateway", catalog.dirname("_gateway"))
    assert.are.equal("%2E.", catalog.dirname(".."))
    assert.are.equal("a%2Fb", catalog.dirname("a/b"))
    assert.are.equal("%C3%A9t%C3%A9", catalog.dirname("été"))
    assert.are.equal("v1.2_x-y~z", catalog.dirname("v1.2_x-y~z"))
  end)
end)
