-- User-defined functions (udf.name(...) in queries) and computed
-- properties (a container option): how they are stored, called, budgeted,
-- indexed, and what is refused.
local regolith = require "regolith"
local H = require "helper"

describe("user-defined functions", function()
  local db, c

  local function q(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  before_each(function()
    db = H.open({ script_budget = 5000000 })
    c = assert(db:create_container("items", { partition_key = "/pk" }))
    for i = 1, 6 do assert(c:create({ id = "i" .. i, pk = "p" .. (i % 2), price = i * 4 })) end
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("are stored, listed, read back, replaced and deleted like procedures", function()
    local ok, info = c:create_udf("withTax", "return function(x) return x * 1.25 end")
    assert.is_true(ok)
    assert.are.equal(201, info.status)
    H.fails(409, c:create_udf("withTax", "return function(x) return x end"))
    assert(c:create_udf("label", "return function(s) return '<' .. s .. '>' end"))
    assert.are.same({ "label", "withTax" }, c:udfs())
    assert.are.equal("return function(x) return x * 1.25 end", c:udf("withTax"))
    assert(c:replace_udf("withTax", "return function(x) return x * 2 end"))
    assert.are.same({ 8 }, q("SELECT VALUE udf.withTax(c.price) FROM c WHERE c.id = 'i1'"))
    H.fails(404, c:replace_udf("nope", "return function() end"))
    local _, dinfo = assert(c:delete_udf("label"))
    assert.are.equal(204, dinfo.status)
    H.fails(404, c:delete_udf("label"))
    assert.are.same({ "withTax" }, c:udfs())
  end)

  it("refuses a source that does not compile or does not return a function", function()
    local msg = H.fails(400, c:create_udf("bad", "return function( end"))
    assert.matches("user%-defined function 'bad' does not compile", msg)
    msg = H.fails(400, c:create_udf("five", "return 5"))
    assert.matches("must return a function", msg)
    assert.has_error(function() c:create_udf(5, "return function() end") end)
  end)

  it("run in SELECT, WHERE and JOIN, with any JSON arguments and results", function()
    assert(c:create_udf("tax", "return function(x) return x * 1.25 end"))
    assert(c:create_udf("shape", [[return function(a, b, c)
      return { sum = a + #b, first = b[1], flag = c == nil } end]]))
    assert.are.same({ 5, 10, 15, 20, 25, 30 }, (function()
      local r = q("SELECT VALUE udf.tax(c.price) FROM c")
      table.sort(r)
      return r
    end)())
    assert.are.same({ "i1", "i2" }, (function()
      local r = q("SELECT VALUE c.id FROM c WHERE udf.tax(c.price) < 12")
      table.sort(r)
      return r
    end)())
    local rows = q([[SELECT VALUE {subtotal: c.price, total: t} FROM c
      JOIN (SELECT VALUE udf.tax(c.price)) t WHERE t < 11]])
    table.sort(rows, function(a, b) return a.subtotal < b.subtotal end)
    assert.are.same({ { subtotal = 4, total = 5 }, { subtotal = 8, total = 10 } }, rows)
    assert.are.same({ { sum = 3, first = "x", flag = true } },
                    q("SELECT VALUE udf.shape(1, ['x', 'y'], undefined)"))
  end)

  it("give undefined when they return nil", function()
    assert(c:create_udf("nothing", "return function() return nil end"))
    assert.are.same({}, q("SELECT VALUE udf.nothing()"))
    assert.are.same({ {} }, q("SELECT udf.nothing() AS x"))
  end)

  it("fail the query with their error, their budget or an unknown name", function()
    assert(c:create_udf("boom", "return function(x) error('no price ' .. x) end"))
    assert(c:create_udf("spin", "return function() while true do end end"))
    assert(c:create_udf("fn", "return function() return function() end end"))
    local msg = H.fails(400, c:query("SELECT VALUE udf.boom(c.price) FROM c"))
    assert.matches("user%-defined function 'boom' failed: .*no price", msg)
    msg = H.fails(408, c:query("SELECT VALUE udf.spin() FROM c"))
    assert.matches("exceeded the instruction budget", msg)
    msg = H.fails(400, c:query("SELECT VALUE udf.fn()"))
    assert.matches("returned a value JSON cannot carry", msg)
    msg = H.fails(404, c:query("SELECT VALUE udf.absent(1)"))
    assert.matches("user%-defined function 'absent' not found", msg)
    -- the next query has its own budget
    assert(c:create_udf("id", "return function(x) return x end"))
    assert.are.same({ 7 }, q("SELECT VALUE udf.id(7)"))
  end)

  it("share one budget over a query's calls", function()
    assert(c:create_udf("busy", [[return function(x)
      local n = 0
      for i = 1, 1000000 do n = n + i end
      return x end]]))
    assert.are.same({ 1 }, q("SELECT VALUE udf.busy(1)"))
    H.fails(408, c:query("SELECT VALUE udf.busy(c.price) FROM c"))
  end)

  it("see the sandbox, not the host", function()
    assert(c:create_udf("peek", [[return function()
      return { io = type(io), os_exec = type(os and os.execute), req = type(require),
               up = string.upper('a') } end]]))
    assert.are.same({ { io = "nil", os_exec = "nil", req = "nil", up = "A" } }, q("SELECT VALUE udf.peek()"))
  end)

  it("run inside procedures' queries, on the procedure's budget", function()
    assert(c:create_udf("tax", "return function(x) return x * 1.25 end"))
    assert(c:create_procedure("totals", [[return function(ctx)
      return assert(ctx:query("SELECT VALUE udf.tax(c.price) FROM c")) end]]))
    local r = assert(c:execute("totals", "p1"))
    table.sort(r)
    assert.are.same({ 5, 15, 25 }, r)
  end)

  it("are per container", function()
    assert(c:create_udf("tax", "return function(x) return x end"))
    local other = assert(db:create_container("other", { partition_key = "/pk" }))
    H.fails(404, other:query("SELECT VALUE udf.tax(1)"))
  end)
end)

describe("computed properties", function()
  local db, c

  local function q(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  before_each(function()
    db = H.open()
    c = assert(db:create_container("products", { partition_key = "/pk", physical_partitions = 2,
      computed_properties = {
        { name = "cp_lowerName", query = "SELECT VALUE LOWER(c.name) FROM c" },
        { name = "cp_discount", query = "SELECT VALUE c.price * 0.2 FROM c" },
        { name = "cp_family", query = "SELECT VALUE SUBSTRING(c.category, 0, INDEX_OF(c.category, ',')) FROM c" },
        { name = "cp_tags", query = "SELECT VALUE [c.color, LOWER(c.name)] FROM c" },
      } }))
    local list = {
      { "a", "Trail Shoe", 120, "Shoes, Trail", "red" },
      { "b", "ROAD SHOE", 90, "Shoes, Road", "blue" },
      { "c", "Rain Jacket", 200, "Jackets, Rain", "red" },
      { "d", "Wool Hat", 25, "Hats, Winter" },
    }
    for i, p in ipairs(list) do
      assert(c:create({ id = p[1], pk = "k" .. (i % 2), name = p[2], price = p[3], category = p[4],
                        color = p[5], cp_discount = "stored, shadowed" }))
    end
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  it("are queryable like stored properties, but not returned by SELECT *", function()
    local rows = q("SELECT c.id, c.cp_lowerName, c.price - c.cp_discount AS net FROM c WHERE c.cp_discount < 30")
    table.sort(rows, function(a, b) return a.id < b.id end)
    assert.are.same({ { id = "a", cp_lowerName = "trail shoe", net = 96 },
                      { id = "b", cp_lowerName = "road shoe", net = 72 },
                      { id = "d", cp_lowerName = "wool hat", net = 20 } }, rows)
    local star = q("SELECT * FROM c WHERE c.id = 'a'")[1]
    assert.is_nil(star.cp_lowerName)
    assert.are.equal("stored, shadowed", star.cp_discount)   -- SELECT * shows what is stored
    assert.are.same({ 24 }, q("SELECT VALUE c.cp_discount FROM c WHERE c.id = 'a'"))
    assert.are.same({ { "red", "trail shoe" } }, q("SELECT VALUE c.cp_tags FROM c WHERE c.id = 'a'"))
    assert.are.same({ "trail shoe" }, q("SELECT VALUE c['cp_lowerName'] FROM c WHERE c.id = 'a'"))
  end)

  it("are indexed: equality, ranges, ORDER BY and GROUP BY use the index", function()
    local rows, info = q("SELECT VALUE c.id FROM c WHERE c.cp_lowerName = 'rain jacket'")
    assert.are.same({ "c" }, rows)
    assert.are.equal(1, info.loaded)
    assert.are.equal(1, info.index_lookups)
    rows, info = q("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.cp_lowerName, 'r')")
    table.sort(rows)
    assert.are.same({ "b", "c" }, rows)
    assert.are.equal(2, info.loaded)
    rows, info = q("SELECT TOP 2 VALUE c.cp_discount FROM c ORDER BY c.cp_discount DESC")
    assert.are.same({ 40, 24 }, rows)
    assert.are.equal(2, info.loaded)
    rows, info = q("SELECT c.cp_family AS family, COUNT(1) AS n FROM c GROUP BY c.cp_family")
    table.sort(rows, function(a, b) return a.family < b.family end)
    assert.are.same({ { family = "Hats", n = 1 }, { family = "Jackets", n = 1 }, { family = "Shoes", n = 2 } }, rows)
    assert.are.equal(0, info.loaded)
    rows, info = q("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.cp_tags, 'red')")
    table.sort(rows)
    assert.are.same({ "a", "c" }, rows)
    assert.are.equal(2, info.loaded)
    -- a stored property shadowed by a computed one is not indexed
    rows = q("SELECT VALUE c.id FROM c WHERE c.cp_discount = 'stored, shadowed'")
    assert.are.same({}, rows)
  end)

  it("follow writes: the index holds each item's current values", function()
    assert(c:replace({ id = "a", pk = "k1", name = "Summit Boot", price = 300, category = "Boots, Alpine" }))
    local rows = q("SELECT VALUE c.id FROM c WHERE c.cp_lowerName = 'summit boot'")
    assert.are.same({ "a" }, rows)
    assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.cp_lowerName = 'trail shoe'"))
    assert(c:delete("c", "k1"))
    assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.cp_lowerName = 'rain jacket'"))
    assert(db:verify())
  end)

  it("refuse definitions the reference refuses", function()
    local function bad(def, pattern)
      local ok, err = pcall(db.create_container, db, "bad", { partition_key = "/pk",
                                                               computed_properties = def })
      assert.is_false(ok)
      assert.matches(pattern, err)
    end
    bad({ { name = "x", query = "SELECT VALUE c.a FROM c WHERE c.a > 1" } }, "cannot use WHERE")
    bad({ { name = "x", query = "SELECT c.a FROM c" } }, "is SELECT VALUE expr FROM c")
    bad({ { name = "x", query = "SELECT VALUE t FROM c JOIN t IN c.tags" } }, "is SELECT VALUE expr FROM c")
    bad({ { name = "x", query = "SELECT VALUE GetCurrentDateTime() FROM c" } }, "nondeterministic")
    bad({ { name = "x", query = "SELECT VALUE udf.f(c.a) FROM c" } }, "user%-defined")
    bad({ { name = "x", query = "SELECT VALUE (SELECT VALUE 1) FROM c" } }, "subqueries")
    bad({ { name = "x", query = "SELECT VALUE COUNT(1) FROM c" } }, "aggregates")
    bad({ { name = "id", query = "SELECT VALUE 1 FROM c" } }, "system property")
    bad({ { name = "x", query = "SELECT VALUE 1 FROM c" }, { name = "x", query = "SELECT VALUE 2 FROM c" } }, "defined twice")
    bad({ { name = "x", query = "SELECT VALUE FROM c" } }, "computed property 'x'")
    bad({ { name = "x" } }, "a computed property is")
    local many = {}
    for i = 1, 21 do many[i] = { name = "cp" .. i, query = "SELECT VALUE 1 FROM c" } end
    bad(many, "at most 20")
  end)

  it("show in the container's spec", function()
    local spec = c:spec()
    assert.are.equal("cp_lowerName", spec.computed_properties[1].name)
    assert.is_nil(spec.revision)
  end)

  it("change with replace_container, which reindexes the items", function()
    local c2 = assert(db:replace_container("products", { partition_key = "/pk", physical_partitions = 2,
      computed_properties = {
        { name = "cp_upperName", query = "SELECT VALUE UPPER(c.name) FROM c" },
      } }))
    c = c2
    local rows, info = q("SELECT VALUE c.id FROM c WHERE c.cp_upperName = 'WOOL HAT'")
    assert.are.same({ "d" }, rows)
    assert.are.equal(1, info.loaded)
    -- the dropped property is stored data again, indexed as such
    rows, info = q("SELECT VALUE c.id FROM c WHERE c.cp_discount = 'stored, shadowed'")
    assert.are.equal(4, #rows)
    assert.are.equal(4, info.loaded)
    assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.cp_lowerName = 'wool hat'"))
    rows, info = q("SELECT c.cp_upperName AS n, COUNT(1) AS k FROM c GROUP BY c.cp_upperName")
    assert.are.equal(4, #rows)
    assert.are.equal(0, info.loaded)
    assert.is_nil(c:spec().revision)
    assert(db:verify())
  end)
end)

describe("a replaced container with a hierarchical key", function()
  it("keeps routing its prefixes to the partitions holding them", function()
    local db = H.open()
    local opts = { partition_key = { "/tenant", "/user" }, physical_partitions = 4 }
    local c = assert(db:create_container("h", opts))
    for t = 1, 4 do
      for u = 1, 3 do assert(c:create({ id = ("i%d%d"):format(t, u), tenant = "t" .. t, user = u })) end
    end
    opts.default_ttl = -1
    c = assert(db:replace_container("h", opts))
    local rows, info = assert(c:query("SELECT VALUE c.id FROM c WHERE c.tenant = 't2'"))
    table.sort(rows)
    assert.are.same({ "i21", "i22", "i23" }, rows)
    assert.are.equal(1, info.partitions)
    assert(c:read("i23", { "t2", 3 }))
    assert(db:verify())
    db:close()
    H.cleanup()
  end)
end)
