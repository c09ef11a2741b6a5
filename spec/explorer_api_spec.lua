-- The Data Explorer's JSON API (regolith.explorer.api), driven as nginx
-- drives it, without nginx: every route, and every malformed request
-- answered with a 4xx and a message.
local H = require "helper"
local regolith = require "regolith"
local API = require "regolith.explorer.api"

local decode = regolith.json.decode

describe("the explorer's API", function()
  local db, api, c

  before_each(function()
    db = H.open()
    c = assert(db:create_container("posts", { partition_key = "/postId",
      physical_partitions = 2, change_feed = { all_versions = true } }))
    for i = 1, 5 do assert(c:create({ id = "i" .. i, postId = "p" .. (i % 2), n = i })) end
    api = API.new(db, { hosts = { ["127.0.0.1:8078"] = true } })
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  -- req(method, path, {args, body, headers}) -> status, body (decoded
  -- from the text the answer would carry), headers
  local function req(method, path, t)
    t = t or {}
    local headers = t.headers or { ["x-regolith-explorer"] = "1", host = "127.0.0.1:8078" }
    local status, body, hdrs = api:handle{ method = method, path = path,
      args = t.args, body = t.body, headers = headers }
    return status, assert(decode(API.encode(body))), hdrs
  end

  it("lists the containers and tells one's settings", function()
    local status, list = req("GET", "/api/containers")
    assert.equal(200, status)
    assert.same({ { name = "posts", items = 5, bytes = list[1].bytes,
      spec = { name = "posts", partition_key = "/postId", physical_partitions = 2,
               change_feed = { all_versions = true } } } }, list)
    local _, one = req("GET", "/api/containers/posts")
    assert.same({ 1, 2 }, one.feed_ranges)
    assert.same({}, one.procedures)
    local _, d = req("GET", "/api/database")
    assert.equal(5, d.stats.items)
  end)

  it("tells a container's throughput counters when it has a budget", function()
    local _, plain = req("GET", "/api/containers/posts")
    assert.is_nil(plain.throughput)
    assert(c:set_throughput(50))
    assert(c:read("i1", "p1"))
    local _, one = req("GET", "/api/containers/posts")
    assert.equal("manual", one.throughput.mode)
    assert.equal(50, one.throughput.ru_per_second)
    assert.equal(1, one.throughput.requests)
    assert.equal(2, #one.throughput.hot_partitions)
  end)

  it("creates and deletes a container", function()
    local status, r = req("POST", "/api/containers",
      { body = '{"name": "x", "spec": {"partition_key": "/k"}}' })
    assert.equal(201, status)
    assert.equal("/k", r.spec.partition_key)
    assert.equal(409, (req("POST", "/api/containers",
      { body = '{"name": "x", "spec": {"partition_key": "/k"}}' })))
    assert.equal(200, (req("DELETE", "/api/containers/x")))
    assert.equal(404, (req("DELETE", "/api/containers/x")))
  end)

  it("lists items by partition key with paging", function()
    local status, r, headers = req("GET", "/api/containers/posts/items",
      { args = { pk = '"p1"', max_items = "2" } })
    assert.equal(200, status)
    assert.equal(2, #r.items)
    assert.equal(1, r.info.partitions)
    assert.equal(tostring(r.info.charge), headers["X-Request-Charge"])
    local _, more = req("GET", "/api/containers/posts/items",
      { args = { pk = '"p1"', max_items = "2", continuation = r.info.continuation } })
    assert.equal(1, #more.items)
    assert.is_nil(more.info.continuation)
    local _, all = req("GET", "/api/containers/posts/items")
    assert.equal(5, #all.items)
  end)

  it("reads, creates, replaces with the etag and deletes an item", function()
    local status, r = req("GET", "/api/containers/posts/items/i3", { args = { pk = '"p1"' } })
    assert.equal(200, status)
    assert.equal(3, r.doc.n)
    local _, found = req("GET", "/api/containers/posts/items/i3")
    assert.equal(r.doc._etag, found.doc._etag)
    local doc = r.doc
    doc.n = 30
    local put = { args = { pk = '"p1"' }, body = assert(regolith.json.encode(doc)),
      headers = { ["x-regolith-explorer"] = "1", host = "127.0.0.1:8078",
                  ["if-match"] = doc._etag } }
    local s2, r2 = req("PUT", "/api/containers/posts/items/i3", put)
    assert.equal(200, s2)
    assert.equal(30, r2.doc.n)
    local s3, r3 = req("PUT", "/api/containers/posts/items/i3", put)    -- stale etag
    assert.equal(412, s3)
    assert.is_string(r3.error)
    assert.equal(201, (req("POST", "/api/containers/posts/items",
      { body = '{"id": "new", "postId": "p9"}' })))
    assert.equal(409, (req("POST", "/api/containers/posts/items",
      { body = '{"id": "new", "postId": "p9"}' })))
    assert.equal(200, (req("DELETE", "/api/containers/posts/items/new", { args = { pk = '"p9"' } })))
    assert.equal(404, (req("GET", "/api/containers/posts/items/new", { args = { pk = '"p9"' } })))
  end)

  it("runs a query with parameters and paging, and reports its counters", function()
    local status, r = req("POST", "/api/containers/posts/query", { body =
      '{"sql": "SELECT VALUE c.n FROM c WHERE c.n > @min ORDER BY c.n", ' ..
      '"params": {"min": 1}, "max_items": 3}' })
    assert.equal(200, status)
    assert.same({ 2, 3, 4 }, r.rows)
    assert.equal(2, r.info.partitions)
    assert.is_true(r.info.cross_partition)
    local _, r2 = req("POST", "/api/containers/posts/query", { body = assert(regolith.json.encode({
      sql = "SELECT VALUE c.n FROM c WHERE c.n > @min ORDER BY c.n",
      params = { min = 1 }, max_items = 3, continuation = r.info.continuation })) })
    assert.same({ 5 }, r2.rows)
  end)

  it("stores, runs and deletes procedures and triggers", function()
    local status = req("POST", "/api/containers/posts/procedures", { body = assert(
      regolith.json.encode({ name = "double", source =
        "return function(ctx, n) ctx:log('n', n) return n * 2 end" })) })
    assert.equal(201, status)
    local _, names = req("GET", "/api/containers/posts/procedures")
    assert.same({ "double" }, names)
    local s2, r = req("POST", "/api/containers/posts/procedures/double/execute",
      { body = '{"partition_key": "p1", "args": [21]}' })
    assert.equal(200, s2)
    assert.equal(42, r.result)
    assert.same({ "n 21" }, r.info.log)
    assert.equal(400, (req("POST", "/api/containers/posts/procedures",
      { body = '{"name": "bad", "source": "return function("}' })))
    assert.equal(201, (req("POST", "/api/containers/posts/triggers", { body =
      '{"name": "t", "type": "pre", "source": "return function(ctx) end"}' })))
    local _, triggers = req("GET", "/api/containers/posts/triggers")
    assert.same({ "t" }, triggers)
    local s4, r4 = req("GET", "/api/containers/posts/procedures/double")
    assert.equal(200, s4)
    assert.equal("return function(ctx, n) ctx:log('n', n) return n * 2 end", r4.definition)
    local s5, r5 = req("GET", "/api/containers/posts/triggers/t")
    assert.equal(200, s5)
    assert.same({ type = "pre", operation = "all", automatic = false,
                  source = "return function(ctx) end" }, r5.definition)
    assert.equal(200, (req("DELETE", "/api/containers/posts/triggers/t")))
    assert.equal(200, (req("DELETE", "/api/containers/posts/procedures/double")))
    local s3, r3 = req("GET", "/api/containers/posts/procedures/double")
    assert.equal(404, s3)
    assert.matches("procedure 'double' not found", r3.error)
  end)

  it("reads the change feed and looks at a processor", function()
    local status, r = req("GET", "/api/containers/posts/feed",
      { args = { mode = "all_versions", max_items = "2" } })
    assert.equal(200, status)
    assert.equal(2, #r.changes)
    assert.equal("create", r.changes[1].metadata.operation)
    local _, r2 = req("GET", "/api/containers/posts/feed",
      { args = { continuation = r.info.continuation, mode = "all_versions" } })
    assert.equal(3, #r2.changes)
    local _, empty = req("GET", "/api/containers/posts/feed", { args = { start = "now" } })
    assert.same({}, empty.changes)
    local p = assert(db:processor{ name = "broken", source = "posts", max_attempts = 1,
      handler = function() error("no") end })
    p:run_once()
    p:close()
    local s3, st = req("GET", "/api/containers/posts/processors/broken")
    assert.equal(200, s3)
    assert.equal("latest", st.mode)
    assert.equal(2, #st.ranges)
    assert.equal(2, #st.dead)
    local s4, rd = req("POST", "/api/containers/posts/processors/broken/redrive",
      { body = '{"letter": "all"}' })
    assert.equal(200, s4)
    assert.equal(5, rd.written)
    local _, dropped = req("POST", "/api/containers/posts/processors/broken/drop", { body = "{}" })
    assert.equal(2, dropped.dropped)
    assert.equal(404, (req("GET", "/api/containers/posts/processors/nobody")))
  end)

  it("replaces a container's settings: indexing policy, TTL, throughput (what may change)", function()
    local spec = { partition_key = "/postId", physical_partitions = 2,
      change_feed = { all_versions = true }, default_ttl = 3600, throughput = 400,
      indexing = { excluded = { "/n/?" } } }
    local status, r = req("PUT", "/api/containers/posts",
      { body = regolith.json.encode({ spec = spec }) })
    assert.equal(200, status, r.error)
    assert.equal(3600, r.spec.default_ttl)
    assert.equal(400, r.spec.throughput)
    assert.same({ "/n/?" }, r.spec.indexing.excluded)
    assert.equal(3600, c:spec().default_ttl)
    -- a query the policy no longer serves from the index still answers
    local _, q = req("POST", "/api/containers/posts/query",
      { body = '{"sql": "SELECT VALUE c.id FROM c WHERE c.n = 3"}' })
    assert.same({ "i3" }, q.rows)
    -- throughput null removes the budget; a spec without it keeps it
    spec.throughput = nil
    assert.equal(200, (req("PUT", "/api/containers/posts", { body = regolith.json.encode({ spec = spec }) })))
    assert.equal(400, c:spec().throughput)
    status, r = req("PUT", "/api/containers/posts", { body = '{"spec": ' .. (regolith.json.encode(spec):gsub("}$", ',"throughput":null}')) .. "}" })
    assert.equal(200, status, r.error)
    assert.is_nil(c:spec().throughput)
    assert.is_nil(r.spec.throughput)
    -- what cannot change is refused, and nothing changes
    spec.partition_key = "/other"
    status, r = req("PUT", "/api/containers/posts", { body = regolith.json.encode({ spec = spec }) })
    assert.equal(400, status)
    assert.is_string(r.error)
    assert.equal("/postId", c:spec().partition_key)
    assert.equal(404, (req("PUT", "/api/containers/nope", { body = '{"spec": {"partition_key": "/k"}}' })))
  end)

  it("uploads a batch of documents, writing the good ones and naming the rejected by place", function()
    local status, r = req("POST", "/api/containers/posts/upload", { body =
      '[{"id": "u1", "postId": "p9"}, {"id": "u2"}, 7, {"id": "i1", "postId": "p1", "n": 100}]' })
    assert.equal(200, status)
    assert.equal(2, r.written)
    assert.equal(2, #r.rejected)
    assert.same({ 2, 3 }, { r.rejected[1].index, r.rejected[2].index })
    assert.equal(400, r.rejected[1].status)
    assert.equal("not a JSON object", r.rejected[2].error)
    assert.is_true(r.info.charge > 0)
    assert.equal(100, (c:read("i1", "p1")).n)             -- an upsert
    assert(c:read("u1", "p9"))
    assert.equal(400, (req("POST", "/api/containers/posts/upload", { body = '{"id": "x"}' })))
    local many = {}
    for i = 1, 1001 do many[i] = '{"id": "m' .. i .. '", "postId": "p"}' end
    assert.equal(413, (req("POST", "/api/containers/posts/upload", { body = "[" .. table.concat(many, ",") .. "]" })))
    -- over the budget, the batch stops at the throttled document
    assert(c:set_throughput(10))
    local docs = {}
    for i = 1, 20 do docs[i] = '{"id": "t' .. i .. '", "postId": "p"}' end
    status, r = req("POST", "/api/containers/posts/upload", { body = "[" .. table.concat(docs, ",") .. "]" })
    assert.equal(200, status)
    assert.is_table(r.throttled)
    assert.equal(r.written + 1, r.throttled.index)
    assert.is_true(r.throttled.retry_after_ms > 0)
    assert.equal(0, #r.rejected)
    api = API.new(db, { readonly = true })
    assert.equal(403, (req("POST", "/api/containers/posts/upload", { body = "[]" })))
  end)

  it("answers every malformed request with a 4xx and a message", function()
    assert(db:processor{ name = "p", source = "posts", handler = function() end }):close()
    local cases = {
      { 404, "GET", "/api/nothing" },
      { 404, "GET", "/" },
      { 405, "PATCH", "/api/containers" },
      { 405, "GET", "/api/containers/posts/query" },
      { 404, "GET", "/api/containers/nope" },
      { 404, "GET", "/api/containers/nope/items" },
      { 400, "POST", "/api/containers", {} },
      { 400, "POST", "/api/containers", { body = "[1]" } },
      { 400, "POST", "/api/containers", { body = '{"name": 1, "spec": {}}' } },
      { 400, "POST", "/api/containers", { body = '{"name": "x", "spec": {"colour": 1}}' } },
      { 400, "POST", "/api/containers", { body = '{"name": "a/b", "spec": {"partition_key": "/k"}}' } },
      { 400, "GET", "/api/containers/posts/items", { args = { pk = "{not json" } } },
      { 400, "GET", "/api/containers/posts/items", { args = { pk = '{"a": 1}' } } },
      { 400, "GET", "/api/containers/posts/items", { args = { max_items = "0" } } },
      { 400, "GET", "/api/containers/posts/items", { args = { max_items = "lots" } } },
      { 400, "GET", "/api/containers/posts/items", { args = { continuation = "forged" } } },
      { 400, "GET", "/api/containers/posts/items/i1", { args = { pk = "[[1]]" } } },
      { 400, "PUT", "/api/containers/posts/items/i1", { args = { pk = '"p1"' },
        body = '{"id": "other", "postId": "p1"}' } },
      { 400, "PUT", "/api/containers/posts/items/i1", { args = { pk = '"p1"' }, body = "{" } },
      { 400, "POST", "/api/containers/posts/items", { body = '{"id": "x"}' } },
      { 400, "POST", "/api/containers/posts/query", { body = "{}" } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": 1}' } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": "SELECT * FORM c"}' } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": "SELECT 1", "max_items": "3"}' } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": "SELECT 1", "max_items": 1.5}' } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": "SELECT 1", "params": [1]}' } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": "SELECT 1", "partition_key": {}}' } },
      { 400, "POST", "/api/containers/posts/query", { body = '{"sql": "SELECT 1", "continuation": 5}' } },
      { 400, "POST", "/api/containers/posts/procedures", { body = '{"name": "x"}' } },
      { 400, "POST", "/api/containers/posts/triggers", { body = '{"name": "t", "type": "middle", "source": ""}' } },
      { 400, "POST", "/api/containers/posts/triggers", { body = '{"name": "t", "type": "pre", "operation": 3, "source": ""}' } },
      { 404, "POST", "/api/containers/posts/procedures/none/execute", { body = '{"partition_key": "p"}' } },
      { 400, "POST", "/api/containers/posts/procedures/none/execute", { body = '{"args": []}' } },
      { 400, "POST", "/api/containers/posts/procedures/none/execute", { body = '{"partition_key": "p", "args": {"a": 1}}' } },
      { 400, "GET", "/api/containers/posts/feed", { args = { mode = "sideways" } } },
      { 400, "GET", "/api/containers/posts/feed", { args = { start = "yesterday" } } },
      { 400, "GET", "/api/containers/posts/feed", { args = { continuation = "x" } } },
      { 400, "GET", "/api/containers/posts/processors/p", { args = { mode = "x" } } },
      { 400, "POST", "/api/containers/posts/processors/p/redrive", { body = '{"letter": "some"}' } },
      { 400, "PUT", "/api/containers/posts", { body = '{"spec": 1}' } },
      { 400, "PUT", "/api/containers/posts", { body = '{"spec": {"partition_key": "/postId", "colour": 1}}' } },
      { 400, "POST", "/api/containers/posts/upload", {} },
      { 405, "GET", "/api/containers/posts/upload" },
    }
    for _, case in ipairs(cases) do
      local status, body = req(case[2], case[3], case[4])
      local what = ("%s %s %s"):format(case[2], case[3], regolith.json.encode(case[4] or {}))
      assert.equal(case[1], status, what)
      assert.is_string(body.error, what)
      assert.equal(status, body.status, what)
    end
  end)

  it("refuses requests without its header or for another host (403)", function()
    local status, body = req("GET", "/api/containers", { headers = { host = "127.0.0.1:8078" } })
    assert.equal(403, status)
    assert.matches("X%-Regolith%-Explorer", body.error)
    status = req("GET", "/api/containers", { headers = {
      ["x-regolith-explorer"] = "1", host = "evil.example:8078" } })
    assert.equal(403, status)
  end)

  it("refuses writes when read-only (403), and still reads", function()
    api = API.new(db, { readonly = true })
    assert.equal(200, (req("GET", "/api/containers/posts/items")))
    assert.equal(403, (req("POST", "/api/containers/posts/items", { body = '{"id": "x", "postId": "p"}' })))
    assert.equal(403, (req("DELETE", "/api/containers/posts")))
    assert.equal(403, (req("POST", "/api/containers/posts/procedures/x/execute",
      { body = '{"partition_key": "p"}' })))
  end)
end)
