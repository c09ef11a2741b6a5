-- Containers (docs/api.md, Containers): create, find, list, delete, names,
-- options and hierarchical partition keys.
local regolith = require "regolith"
local H = require "helper"

local function raises(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error to be raised")
  return err
end

local function sorted(t)
  local copy = {}
  for i, v in ipairs(t) do copy[i] = v end
  table.sort(copy)
  return copy
end

local BAD_NAMES = {
  "", ("n"):rep(256), "a/b", "a\\b", "a?b", "a#b", "a\0b", "/", "\xff",
  "bad\xc3",
}

describe("containers", function()
  local db
  before_each(function()
    db = H.open()
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("creates a container and returns its handle with status 201", function()
    local c, info = db:create_container("posts", { partition_key = "/postId" })
    assert.are.equal(H.cluster and "table" or "userdata", type(c))
    assert.are.equal(201, info.status)
    assert.is_number(info.charge)
    assert.are.equal("posts", c:name())
    assert.is_truthy(tostring(c):find("posts", 1, true))
    assert(c:create({ id = "1", postId = "p1" }))
  end)

  it("refuses a second container of the same name with 409 and keeps the first", function()
    local c = assert(db:create_container("posts", { partition_key = "/postId" }))
    assert(c:create({ id = "1", postId = "p" }))
    H.fails(409, db:create_container("posts", { partition_key = "/other" }))
    local again = assert(db:container("posts"))
    assert(again:read("1", "p"))
    assert.are.equal("/postId", again:spec().partition_key)
  end)

  it("finds a container by name, and returns 404 for a missing one", function()
    local c = assert(db:create_container("users", { partition_key = "/userId" }))
    assert(c:create({ id = "u1", userId = "u1", name = "Ann" }))
    local found = assert(db:container("users"))
    assert.are.equal("users", found:name())
    assert.are.equal("Ann", assert(found:read("u1", "u1")).name)
    H.fails(404, db:container("nobody"))
  end)

  it("lists every container by name", function()
    assert.are.same({}, db:containers())
    for _, name in ipairs({ "users", "posts", "feed", "café" }) do
      assert(db:create_container(name, { partition_key = "/pk" }))
    end
    assert.are.same({ "café", "feed", "posts", "users" }, sorted(db:containers()))
  end)

  it("deletes a container with status 204, then it is 404", function()
    assert(db:create_container("gone", { partition_key = "/pk" }))
    assert(db:create_container("kept", { partition_key = "/pk" }))
    local ok, info = db:delete_container("gone")
    assert.is_true(ok)
    assert.are.equal(204, info.status)
    assert.is_number(info.charge)
    H.fails(404, db:container("gone"))
    H.fails(404, db:delete_container("gone"))
    assert.are.same({ "kept" }, db:containers())
  end)

  it("returns 404 from a handle whose container was deleted", function()
    local c = assert(db:create_container("gone", { partition_key = "/pk" }))
    assert(c:create({ id = "a", pk = "p" }))
    assert(db:delete_container("gone"))
    H.fails(404, c:read("a", "p"))
    H.fails(404, c:create({ id = "b", pk = "p" }))
    H.fails(404, c:upsert({ id = "a", pk = "p" }))
    H.fails(404, c:delete("a", "p"))
    H.fails(404, c:read_many({ { "a", "p" } }))
    H.fails(404, c:batch("p", { { op = "create", doc = { id = "c", pk = "p" } } }))
  end)

  it("starts empty when created again under a deleted name, and old handles stay dead", function()
    local old = assert(db:create_container("c", { partition_key = "/pk" }))
    for i = 1, 10 do assert(old:create({ id = "i" .. i, pk = "p" })) end
    assert(db:delete_container("c"))
    local new = assert(db:create_container("c", { partition_key = "/other" }))
    for i = 1, 10 do H.fails(404, new:read("i" .. i, "p")) end
    assert.are.equal(0, db:stats().items)
    H.fails(404, old:read("i1", "p"))
    H.fails(404, old:create({ id = "x", pk = "p" }))
    assert(new:create({ id = "i1", other = "p" }))
    assert.are.equal(1, db:stats().items)
    assert.are.equal("/other", assert(db:container("c")):spec().partition_key)
  end)

  it("deletes a container holding thousands of items and leaves its neighbours alone", function()
    local before = assert(db:create_container("before", { partition_key = "/pk",
                                                          unique_keys = { { "/u" } } }))
    local big = assert(db:create_container("big", { partition_key = "/pk",
                                                    unique_keys = { { "/u" } }, default_ttl = 3600 }))
    local after = assert(db:create_container("after", { partition_key = "/pk",
                                                        unique_keys = { { "/u" } } }))
    for _, c in ipairs({ before, after }) do
      for i = 1, 5 do assert(c:create({ id = "i" .. i, pk = "p", u = i, v = "kept" })) end
    end
    for b = 0, 29 do
      local ops = {}
      for i = 1, 100 do
        local n = b * 100 + i
        ops[i] = { op = "create", doc = { id = "i" .. n, pk = "p", u = n, tags = { "a", "b" } } }
      end
      assert(big:batch("p", ops))
    end
    assert.are.equal(3010, db:stats().items)
    assert(db:delete_container("big"))
    assert.are.equal(10, db:stats().items)
    for _, c in ipairs({ before, after }) do
      for i = 1, 5 do assert.are.equal("kept", assert(c:read("i" .. i, "p")).v) end
      H.fails(409, c:create({ id = "x", pk = "p", u = 1 }))
    end
    local again = assert(db:create_container("big", { partition_key = "/pk",
                                                      unique_keys = { { "/u" } } }))
    H.fails(404, again:read("i1", "p"))
    assert(again:create({ id = "i1", pk = "p", u = 1 }))
    assert.are.equal(0, (db:purge_expired()))
  end)

  it("accepts names of 1 to 255 bytes of UTF-8", function()
    for _, name in ipairs({ "a", ("n"):rep(255), "日本語", "with space", "dots.and-dashes_" }) do
      local c, info = db:create_container(name, { partition_key = "/pk" })
      assert(c, info)
      assert.are.equal(name, c:name())
      assert(db:container(name))
    end
  end)

  it("refuses bad names with 400 in create_container, container and delete_container", function()
    for _, name in ipairs(BAD_NAMES) do
      H.fails(400, db:create_container(name, { partition_key = "/pk" }))
      H.fails(400, db:container(name))
      H.fails(400, db:delete_container(name))
    end
    assert.are.same({}, db:containers())
  end)

  it("raises when a name is not a string", function()
    raises(db.create_container, db, 42, { partition_key = "/pk" })
    raises(db.create_container, db, nil, { partition_key = "/pk" })
    raises(db.container, db, {})
    raises(db.container, db)
    raises(db.delete_container, db, true)
    assert.are.same({}, db:containers())
  end)

  it("raises on bad options and creates nothing", function()
    local bad = {
      { partition_key = "/pk", partiton_count = 2 },
      {},
      { partition_key = "pk" },
      { partition_key = "" },
      { partition_key = "/a//b" },
      { partition_key = "/a/" },
      { partition_key = "/a/?" },
      { partition_key = 42 },
      { partition_key = {} },
      { partition_key = { "/a", "/b", "/c", "/d" } },
      { partition_key = { "/a", 2 } },
      { partition_key = "/pk", physical_partitions = 0 },
      { partition_key = "/pk", physical_partitions = 257 },
      { partition_key = "/pk", physical_partitions = 1.5 },
      { partition_key = "/pk", physical_partitions = "8" },
      { partition_key = "/pk", indexing = "all" },
      { partition_key = "/pk", indexing = { excluded = { "/content" } } },
      { partition_key = "/pk", indexing = { excluded = { "content/?" } } },
      { partition_key = "/pk", indexing = { included = "/a/?" } },
      { partition_key = "/pk", indexing = { included = { "/a/?/b/?" } } },
      { partition_key = "/pk", indexing = { automatic = "yes" } },
      { partition_key = "/pk", indexing = { exclude = { "/a/?" } } },
      { partition_key = "/pk", indexing = { composite = { { { path = "/a" } } } } },
      { partition_key = "/pk", indexing = { composite = { { { path = "/a", order = "up" },
                                                            { path = "/b" } } } } },
      { partition_key = "/pk", indexing = { composite = { { { path = "/a", sort = "asc" },
                                                            { path = "/b" } } } } },
      { partition_key = "/pk", unique_keys = { "/name" } },
      { partition_key = "/pk", unique_keys = { { "name" } } },
      { partition_key = "/pk", unique_keys = "/name" },
      { partition_key = "/pk", default_ttl = 0 },
      { partition_key = "/pk", default_ttl = -2 },
      { partition_key = "/pk", default_ttl = 1.5 },
      { partition_key = "/pk", default_ttl = "1h" },
      { partition_key = "/pk", max_partition_bytes = 0 },
      { partition_key = "/pk", max_partition_bytes = "big" },
      { partition_key = "/pk", change_feed = { retention = 0 } },
      { partition_key = "/pk", change_feed = { keep = 10 } },
      { partition_key = "/pk", change_feed = "forever" },
    }
    for i, opts in ipairs(bad) do
      local ok = pcall(db.create_container, db, "c" .. i, opts)
      assert(not ok, "options #" .. i .. " were accepted")
    end
    raises(db.create_container, db, "c")
    raises(db.create_container, db, "c", "/pk")
    assert.are.same({}, db:containers())
  end)

  it("accepts 1 and 256 physical partitions and keeps items on every one readable", function()
    assert(db:create_container("one", { partition_key = "/pk", physical_partitions = 1 }))
    local c = assert(db:create_container("many", { partition_key = "/pk",
                                                   physical_partitions = 256 }))
    for i = 1, 200 do assert(c:create({ id = "i", pk = "p" .. i, n = i })) end
    for i = 1, 200 do assert.are.equal(i, assert(c:read("i", "p" .. i)).n) end
  end)

  it("accepts hierarchical partition keys of up to 3 paths", function()
    local two = assert(db:create_container("two", { partition_key = { "/tenant", "/user" } }))
    local three = assert(db:create_container("three",
      { partition_key = { "/tenant", "/user", "/session" } }))
    assert(two:create({ id = "a", tenant = "t", user = "u" }))
    assert(three:create({ id = "a", tenant = "t", user = "u", session = 7 }))
    assert(two:read("a", { "t", "u" }))
    assert(three:read("a", { "t", "u", 7 }))
    raises(db.create_container, db, "four",
      { partition_key = { "/tenant", "/user", "/session", "/x" } })
    H.fails(404, db:container("four"))
  end)

  it("returns the spec it was given", function()
    local opts = {
      partition_key = { "/tenant", "/userId" },
      physical_partitions = 8,
      indexing = {
        automatic = true,
        included = { "/*" },
        excluded = { "/content/?", "/blob/*" },
        composite = { { { path = "/userId", order = "ascending" },
                        { path = "/creationDate", order = "descending" } } },
      },
      unique_keys = { { "/username" }, { "/first", "/last" } },
      default_ttl = 3600,
      max_partition_bytes = 1000000,
      change_feed = { retention = 86400 },
    }
    local c = assert(db:create_container("posts", opts))
    local spec = c:spec()
    for k, v in pairs(opts) do
      assert.are.same(v, spec[k])
    end
    assert.are.same(spec, assert(db:container("posts")):spec())
    local simple = assert(db:create_container("simple", { partition_key = "/pk" }))
    assert.are.equal("/pk", simple:spec().partition_key)
  end)

  describe("indexing policy, as write charges show it", function()
    local made = 0
    local function cost(opts, doc)
      made = made + 1
      local name = "ix" .. made
      opts.partition_key = "/pk"
      local c = assert(db:create_container(name, opts))
      doc.id, doc.pk = "a", "p"
      local _, info = assert(c:create(doc))
      return info.charge
    end
    local function sample()
      local big = {}
      for i = 1, 50 do big[i] = i end
      return { keep = 1, big = big, nested = { x = 1, y = 2 } }
    end

    it("charges less for a write when paths are excluded from the index", function()
      local all = cost({}, sample())
      local excluded = cost({ indexing = { excluded = { "/big/*" } } }, sample())
      local scalars = cost({ indexing = { excluded = { "/big/[]/?" } } }, sample())
      local none = cost({ indexing = { automatic = false } }, sample())
      assert.is_true(excluded < all, ("%s !< %s"):format(excluded, all))
      assert.are.equal(excluded, scalars)
      assert.is_true(none < excluded, ("%s !< %s"):format(none, excluded))
    end)

    it("lets the more specific of an included and an excluded pattern win", function()
      local all = cost({}, sample())
      local only_keep = cost({ indexing = { included = { "/keep/?" }, excluded = { "/*" } } }, sample())
      local but_big = cost({ indexing = { included = { "/*", "/big/[]/?" },
                                          excluded = { "/big/*" } } }, sample())
      assert.is_true(only_keep < all)
      assert.are.equal(all, but_big)
    end)

    it("charges for composite index entries", function()
      local plain = cost({}, { a = 1, b = 2 })
      local composite = cost({ indexing = { composite = { { { path = "/a" },
                                                            { path = "/b", order = "descending" } } } } },
                             { a = 1, b = 2 })
      assert.is_true(composite > plain)
    end)
  end)

  it("keeps a spec across reopening", function()
    local path = H.tmpdir()
    local d1 = assert(regolith.open(path))
    local opts = { partition_key = "/pk", physical_partitions = 4,
                   unique_keys = { { "/u" } }, default_ttl = -1 }
    assert(d1:create_container("c", opts))
    d1:close()
    local d2 = assert(regolith.open(path))
    local spec = assert(d2:container("c")):spec()
    for k, v in pairs(opts) do assert.are.same(v, spec[k]) end
    d2:close()
  end)

  it("keeps its database open while a container handle is referenced", function()
    local path = H.tmpdir()
    local c
    do
      local d = assert(regolith.open(path))
      c = assert(d:create_container("c", { partition_key = "/pk" }))
    end
    collectgarbage()
    collectgarbage()
    assert(c:create({ id = "a", pk = "p" }))
    assert(c:read("a", "p"))
  end)

  it("refuses containers beyond max_containers with 403", function()
    local path = H.tmpdir()
    local d = assert(regolith.open(path, { max_containers = 2 }))
    assert(d:create_container("a", { partition_key = "/pk" }))
    assert(d:create_container("b", { partition_key = "/pk" }))
    H.fails(403, d:create_container("c", { partition_key = "/pk" }))
    assert.are.same({ "a", "b" }, sorted(d:containers()))
    assert(d:delete_container("a"))
    assert(d:create_container("c", { partition_key = "/pk" }))
    d:close()
  end)
end)

describe("containers keyed on system properties", function()
  after_each(H.cleanup)
  it("refuses _ts, _etag and _lsn as partition or unique key paths (they move on every write)", function()
    local db = H.open()
    for _, path in ipairs({ "/_ts", "/_etag", "/_lsn" }) do
      assert.has_error(function()
        db:create_container("a", { partition_key = path })
      end)
      assert.has_error(function()
        db:create_container("b", { partition_key = "/pk", unique_keys = { { path } } })
      end)
    end
    assert.are.same({}, db:containers())
    db:close()
  end)
end)
