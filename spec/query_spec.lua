-- The query dialect: grammar, functions, operators, undefined and type
-- rules, ORDER BY over mixed types, errors.
local regolith = require "regolith"
local H = require "helper"

local null = regolith.null
local json = regolith.json

describe("queries", function()
  local db, c

  -- Rows of a query that must succeed.
  local function q(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  -- The single value of a SELECT VALUE query over the document "one".
  local function v(expr, params)
    local rows = q("SELECT VALUE " .. expr .. " FROM c WHERE c.id = 'one'", params)
    assert(#rows <= 1)
    return rows[1]
  end

  local function ids(rows)
    local out = {}
    for i, r in ipairs(rows) do out[i] = type(r) == "table" and r.id or r end
    return out
  end

  before_each(function()
    db = H.open()
    c = assert(db:create_container("things", { partition_key = "/pk",
                                                physical_partitions = 4 }))
    assert(c:create({ id = "one", pk = "a", n = 1, s = "Hello", b = true,
                      z = null, arr = { 1, 2, 3 }, obj = { x = 1, y = "two" },
                      tags = { "red", "blue" },
                      kids = { { name = "k1", age = 3 }, { name = "k2", age = 7 } } }))
    assert(c:create({ id = "two", pk = "b", n = 2, s = "world", b = false,
                      tags = { "green" }, kids = { { name = "k3", age = 5 } } }))
    assert(c:create({ id = "three", pk = "a", n = 3, s = "hello world",
                      tags = regolith.array{}, kids = regolith.array{} }))
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("SELECT", function()
    it("returns whole items with SELECT *, system properties included", function()
      local rows = q("SELECT * FROM c WHERE c.id = 'one'")
      assert.are.equal(1, #rows)
      assert.are.equal("Hello", rows[1].s)
      assert.are.same({ 1, 2, 3 }, rows[1].arr)
      assert.is_string(rows[1]._etag)
      assert.are.equal(null, rows[1].z)
    end)

    it("returns bare values with SELECT VALUE", function()
      local rows = q("SELECT VALUE c.n FROM c ORDER BY c.n")
      assert.are.same({ 1, 2, 3 }, rows)
      assert.is_true(H.integer(rows[1]))
    end)

    it("names projected properties by their last name, by AS, or $1, $2", function()
      local rows = q("SELECT c.id, c.obj.y, c.n + 1, c['s'] AS greeting, c.tags[0], c.n n2 FROM c WHERE c.id = 'one'")
      assert.are.same({ id = "one", y = "two", ["$1"] = 2, greeting = "Hello",
                        ["$2"] = "red", n2 = 1 }, rows[1])
    end)

    it("leaves undefined properties out of a projection and rows out of SELECT VALUE", function()
      assert.are.same({ { id = "one", b = true }, { id = "three" }, { id = "two", b = false } },
        q("SELECT c.id, c.b FROM c ORDER BY c.id"))
      assert.are.same({ false, true }, q("SELECT VALUE c.b FROM c ORDER BY c.b"))
      assert.are.same({ {}, {}, {} }, q("SELECT c.missing FROM c"))
    end)

    it("projects the alias itself as a whole item", function()
      local rows = q("SELECT c FROM c WHERE c.id = 'two'")
      assert.are.equal("two", rows[1].c.id)
    end)

    it("refuses duplicate output names", function()
      local msg = H.fails(400, c:query("SELECT c.n, c.obj.n FROM c"))
      assert.matches("duplicate output name 'n'", msg)
    end)

    it("keeps DISTINCT values once", function()
      assert.are.same({ "a", "b" }, q("SELECT DISTINCT VALUE c.pk FROM c ORDER BY c.pk"))
      local rows = q("SELECT DISTINCT c.pk FROM c")
      assert.are.equal(2, #rows)
      -- objects are equal whatever the order of their members
      assert.are.equal(1, #q("SELECT DISTINCT VALUE {a: 1, b: c.pk = c.pk} FROM c"))
    end)

    it("returns at most TOP n rows", function()
      assert.are.same({ 1, 2 }, q("SELECT TOP 2 VALUE c.n FROM c ORDER BY c.n"))
      assert.are.same({ 3 }, q("SELECT TOP @k VALUE c.n FROM c ORDER BY c.n DESC", { k = 1 }))
      assert.are.same({}, q("SELECT TOP 0 VALUE c.n FROM c"))
    end)

    it("skips and limits with OFFSET and LIMIT", function()
      assert.are.same({ 2 }, q("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 1 LIMIT 1"))
      assert.are.same({ 2, 3 }, q("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 1 LIMIT 5"))
      assert.are.same({}, q("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 5 LIMIT 5"))
      assert.are.same({ 3 }, q("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET @o LIMIT @l", { o = 2, l = 1 }))
    end)

    it("refuses a TOP, OFFSET or LIMIT that is not a non-negative integer", function()
      H.fails(400, c:query("SELECT TOP @k * FROM c", { k = -1 }))
      H.fails(400, c:query("SELECT TOP @k * FROM c", { k = 1.5 }))
      H.fails(400, c:query("SELECT TOP @k * FROM c", { k = "3" }))
      H.fails(400, c:query("SELECT TOP 1.5 * FROM c"))
    end)

    it("treats keywords case-insensitively and takes either quote", function()
      assert.are.same({ "one" }, q([[select value c.id from c where c.s = "Hello" Order By c.id asc]]))
      assert.are.same({ "one" }, q("SeLeCt VALUE c.id FROM c WHERE c.s = 'Hello'"))
    end)

    it("reads any word after a dot as a property, keywords included", function()
      assert(c:upsert({ id = "kw", pk = "k", value = 1, ["order"] = 2, select = 3 }))
      assert.are.same({ { value = 1, order = 2, select = 3 } },
        q("SELECT c.value, c.order, c.select FROM c WHERE c.id = 'kw'"))
    end)

    it("takes FROM <container> <alias> and FROM x AS y", function()
      assert.are.same({ "one" }, q("SELECT VALUE t.id FROM things t WHERE t.n = 1"))
      assert.are.same({ "one" }, q("SELECT VALUE t.id FROM root AS t WHERE t.n = 1"))
    end)

    it("ignores -- comments", function()
      assert.are.same({ 1 }, q("SELECT VALUE c.n -- the number\nFROM c WHERE c.id = 'one'"))
    end)
  end)

  describe("JOIN", function()
    it("makes one row per element of an array inside the item", function()
      local rows = q("SELECT c.id, t AS tag FROM c JOIN t IN c.tags ORDER BY c.id, t")
      assert.are.same({ { id = "one", tag = "blue" }, { id = "one", tag = "red" },
                        { id = "two", tag = "green" } }, rows)
    end)

    it("filters on the joined values and chains joins", function()
      assert.are.same({ "k2" }, q("SELECT VALUE k.name FROM c JOIN k IN c.kids WHERE k.age > 5"))
      assert.are.same({ 3, 7 },
        q("SELECT VALUE k.age FROM c JOIN t IN c.tags JOIN k IN c.kids WHERE t = 'red' ORDER BY k.age"))
    end)

    it("makes no row for an empty or missing array", function()
      assert.are.same({}, q("SELECT VALUE t FROM c JOIN t IN c.tags WHERE c.id = 'three'"))
      assert.are.same({}, q("SELECT VALUE t FROM c JOIN t IN c.nothing"))
    end)

    it("refuses SELECT * with a JOIN and unknown aliases", function()
      H.fails(400, c:query("SELECT * FROM c JOIN t IN c.tags"))
      local msg = H.fails(400, c:query("SELECT VALUE u FROM c JOIN t IN c.tags"))
      assert.matches("unknown name 'u'", msg)
      H.fails(400, c:query("SELECT VALUE t FROM c JOIN t IN u.tags JOIN u IN c.kids"))
    end)
  end)

  describe("operators", function()
    it("compares with = != <> < <= > >=", function()
      assert.is_true(v("c.n = 1"))
      assert.is_false(v("c.n != 1"))
      assert.is_false(v("c.n <> 1"))
      assert.is_true(v("c.n < 2"))
      assert.is_true(v("c.n <= 1"))
      assert.is_false(v("c.n > 1"))
      assert.is_true(v("c.n >= 1"))
      assert.is_true(v("c.s < 'Z'"))
      assert.is_true(v("false < true"))
      assert.is_true(v("null = null"))
      assert.is_true(v("c.arr = [1, 2, 3]"))
      assert.is_true(v("c.obj = {y: 'two', x: 1}"))
      assert.is_false(v("c.arr = [1, 2]"))
    end)

    it("computes + - * / % and ||", function()
      assert.are.equal(7, v("c.n + 2 * 3"))
      assert.are.equal(-1, v("c.n - 2"))
      assert.are.equal(2.5, v("5 / 2"))
      assert.are.equal(1, v("7 % 3"))
      assert.are.equal(-3, v("-(c.n + 2)"))
      assert.are.equal(9, v("(1 + 2) * 3"))
      assert.are.equal("Hello!", v("c.s || '!'"))
    end)

    it("gives undefined for arithmetic on other types and division by zero", function()
      assert.is_nil(v("c.s + 1"))
      assert.is_nil(v("c.n / 0"))
      assert.is_nil(v("c.n % 0"))
      assert.is_nil(v("c.n || 'x'"))
      assert.is_nil(v("-c.s"))
    end)

    it("evaluates AND, OR and NOT in three-valued logic", function()
      assert.is_false(v("false AND c.missing"))
      assert.is_nil(v("true AND c.missing"))
      assert.is_true(v("true OR c.missing"))
      assert.is_nil(v("false OR c.missing"))
      assert.is_nil(v("NOT c.missing"))
      assert.is_nil(v("NOT 1"))
      assert.is_false(v("NOT true"))
      assert.is_nil(v("1 AND true"))
    end)

    it("chooses with ?: and ??", function()
      assert.are.equal("y", v("c.b ? 'y' : 'n'"))
      assert.are.equal("n", v("c.n = 2 ? 'y' : 'n'"))
      assert.are.equal("n", v("c.missing ? 'y' : 'n'"))
      assert.are.equal(5, v("c.missing ?? 5"))
      assert.are.equal(null, v("c.z ?? 5"))
      assert.are.equal(1, v("c.n ?? 5"))
      assert.are.equal("b", v("c.missing ?? false ? 'a' : 'b'"))
    end)

    it("tests membership with IN and NOT IN", function()
      assert.is_true(v("c.n IN (3, 2, 1)"))
      assert.is_false(v("c.n IN (2, '1')"))
      assert.is_true(v("c.n NOT IN (2, 3)"))
      assert.is_nil(v("c.missing IN (1)"))
      assert.is_true(v("c.s IN (@a, @b)", { a = "x", b = "Hello" }))
    end)

    it("tests ranges with BETWEEN and NOT BETWEEN", function()
      assert.is_true(v("c.n BETWEEN 1 AND 2"))
      assert.is_false(v("c.n BETWEEN 2 AND 3"))
      assert.is_true(v("c.n NOT BETWEEN 2 AND 3"))
      assert.is_nil(v("c.n BETWEEN 'a' AND 'z'"))
      assert.is_true(v("c.s BETWEEN 'A' AND 'Z'"))
    end)

    it("reads properties with dots, brackets and array positions", function()
      assert.are.equal("two", v("c.obj.y"))
      assert.are.equal("two", v("c['obj'][\"y\"]"))
      assert.are.equal(2, v("c.arr[1]"))
      assert.are.equal(7, v("c.kids[1].age"))
      assert.is_nil(v("c.arr[3]"))
      assert.is_nil(v("c.arr[-1]"))
      assert.is_nil(v("c.s.length"))
      assert.are.equal(3, v("c.arr[c.n + 1]"))
      assert.are.equal("two", v("c.obj[@k]", { k = "y" }))
    end)

    it("builds objects and arrays", function()
      assert.are.same({ a = 1, b = { "Hello", true }, c = { d = "two" } },
        v("{a: c.n, b: [c.s, c.b], 'c': {d: c.obj.y}}"))
      -- undefined members and elements are left out
      assert.are.same({ a = 1 }, v("{a: c.n, m: c.missing}"))
      assert.are.same({ 1 }, v("[c.n, c.missing]"))
      local empty = v("{}")
      assert.are.equal("{}", json.encode(empty))
      assert.are.equal("[]", json.encode(v("[]")))
    end)

    it("reads string escapes and unicode in literals", function()
      assert.are.equal("it's \"q\"\n\t\\/", v([['it\'s \"q\"\n\t\\\/']]))
      assert.are.equal("é€😀", v([['\u00e9\u20ac\ud83d\ude00']]))
      assert.are.equal("a\0b", v([['a\u0000b']]))
      assert.are.equal("ü", v("'ü'"))
    end)

    it("reads numbers in every form", function()
      assert.are.equal(1500, v("1.5e3"))
      assert.are.equal(0.25, v("0.25"))
      assert.are.equal(-2, v("-2"))
      assert.are.equal(0.1 + 0.2, v("0.1 + 0.2"))
    end)
  end)

  describe("functions", function()
    it("tests types with IS_DEFINED, IS_NULL, IS_STRING, IS_NUMBER, IS_BOOL, IS_ARRAY, IS_OBJECT", function()
      assert.is_true(v("IS_DEFINED(c.n)"))
      assert.is_false(v("IS_DEFINED(c.missing)"))
      assert.is_true(v("IS_NULL(c.z)"))
      assert.is_false(v("IS_NULL(c.missing)"))
      assert.is_true(v("IS_STRING(c.s)"))
      assert.is_false(v("IS_STRING(c.n)"))
      assert.is_true(v("IS_NUMBER(c.n)"))
      assert.is_true(v("IS_BOOL(c.b)"))
      assert.is_false(v("IS_BOOL(c.z)"))
      assert.is_true(v("IS_ARRAY(c.arr)"))
      assert.is_false(v("IS_ARRAY(c.obj)"))
      assert.is_true(v("IS_OBJECT(c.obj)"))
      assert.is_false(v("IS_OBJECT(c.arr)"))
    end)

    it("searches arrays with ARRAY_CONTAINS and measures them with ARRAY_LENGTH", function()
      assert.is_true(v("ARRAY_CONTAINS(c.tags, 'red')"))
      assert.is_false(v("ARRAY_CONTAINS(c.tags, 'RED')"))
      assert.is_true(v("ARRAY_CONTAINS(c.kids, {name: 'k1', age: 3})"))
      assert.is_false(v("ARRAY_CONTAINS(c.kids, {name: 'k1'})"))
      assert.is_true(v("ARRAY_CONTAINS(c.kids, {name: 'k1'}, true)"))
      assert.is_nil(v("ARRAY_CONTAINS(c.s, 'H')"))
      assert.are.equal(3, v("ARRAY_LENGTH(c.arr)"))
      assert.are.equal(0, q("SELECT VALUE ARRAY_LENGTH(c.tags) FROM c WHERE c.id = 'three'")[1])
      assert.is_nil(v("ARRAY_LENGTH(c.obj)"))
    end)

    it("matches strings with STARTSWITH, ENDSWITH and CONTAINS, optionally ignoring case", function()
      assert.is_true(v("STARTSWITH(c.s, 'He')"))
      assert.is_false(v("STARTSWITH(c.s, 'he')"))
      assert.is_true(v("STARTSWITH(c.s, 'he', true)"))
      assert.is_true(v("ENDSWITH(c.s, 'llo')"))
      assert.is_true(v("ENDSWITH(c.s, 'LLO', true)"))
      assert.is_false(v("ENDSWITH(c.s, 'xHello')"))
      assert.is_true(v("CONTAINS(c.s, 'ell')"))
      assert.is_false(v("CONTAINS(c.s, 'ELL')"))
      assert.is_true(v("CONTAINS(c.s, 'ELL', true)"))
      assert.is_true(v("CONTAINS(c.s, '')"))
      assert.is_nil(v("CONTAINS(c.n, '1')"))
    end)

    it("transforms strings with LOWER, UPPER, CONCAT, SUBSTRING and LEFT", function()
      assert.are.equal("hello", v("LOWER(c.s)"))
      assert.are.equal("HELLO", v("UPPER(c.s)"))
      assert.are.equal("Hello-1-x", v("CONCAT(c.s, '-', '1', '-x')"))
      assert.is_nil(v("CONCAT(c.s, c.n)"))
      assert.are.equal("ell", v("SUBSTRING(c.s, 1, 3)"))
      assert.are.equal("lo", v("SUBSTRING(c.s, 3, 100)"))
      assert.are.equal("", v("SUBSTRING(c.s, 10, 2)"))
      assert.are.equal("He", v("LEFT(c.s, 2)"))
      assert.are.equal("Hello", v("LEFT(c.s, 50)"))
      assert.are.equal("é€", v("LEFT('é€😀', 2)"))
      assert.are.equal("€😀", v("SUBSTRING('é€😀x', 1, 2)"))
    end)

    it("measures strings in characters with LENGTH", function()
      assert.are.equal(5, v("LENGTH(c.s)"))
      assert.are.equal(3, v("LENGTH('é€😀')"))
      assert.is_nil(v("LENGTH(c.n)"))
    end)

    it("takes function names in any case and checks the number of arguments", function()
      assert.are.equal("HELLO", v("upper(c.s)"))
      local msg = H.fails(400, c:query("SELECT VALUE LOWER(c.s, 1) FROM c"))
      assert.matches("LOWER takes 1 argument, not 2", msg)
      msg = H.fails(400, c:query("SELECT VALUE NOPE(c.s) FROM c"))
      assert.matches("unknown function 'NOPE'", msg)
    end)
  end)

  describe("aggregates", function()
    it("computes COUNT, SUM, MIN, MAX and AVG with and without VALUE", function()
      assert.are.same({ 3 }, q("SELECT VALUE COUNT(1) FROM c"))
      assert.are.same({ { total = 6, lo = 1, hi = 3, mean = 2, n = 3 } },
        q("SELECT SUM(c.n) AS total, MIN(c.n) AS lo, MAX(c.n) AS hi, AVG(c.n) AS mean, COUNT(c.n) AS n FROM c"))
      assert.are.same({ { ["$1"] = 2 } }, q("SELECT COUNT(c.b) FROM c"))
      assert.are.same({ 2 }, q("SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'a'"))
    end)

    it("counts and sums over the rows of a JOIN", function()
      assert.are.same({ 3 }, q("SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags"))
      assert.are.same({ 15 }, q("SELECT VALUE SUM(k.age) FROM c JOIN k IN c.kids"))
    end)

    it("orders MIN and MAX over mixed scalars and gives undefined for arrays", function()
      assert.are.same({ "world" }, q("SELECT VALUE MAX(c.s) FROM c"))
      assert.are.same({ false }, q("SELECT VALUE MIN(c.b) FROM c"))
      assert.are.same({ "Hello" }, q("SELECT VALUE MAX(c.n = 1 ? c.s : c.n) FROM c"))
      assert.are.same({}, q("SELECT VALUE MAX(c.arr) FROM c"))
    end)

    it("gives undefined for SUM and AVG over other types, 0 and nothing for no rows", function()
      assert.are.same({}, q("SELECT VALUE SUM(c.s) FROM c"))
      assert.are.same({}, q("SELECT VALUE AVG(c.s) FROM c"))
      assert.are.same({ 0 }, q("SELECT VALUE COUNT(1) FROM c WHERE c.n > 10"))
      assert.are.same({ 0 }, q("SELECT VALUE SUM(c.n) FROM c WHERE c.n > 10"))
      assert.are.same({}, q("SELECT VALUE AVG(c.n) FROM c WHERE c.n > 10"))
      assert.are.same({ {} }, q("SELECT MAX(c.n) AS m FROM c WHERE c.n > 10"))
    end)

    it("combines aggregates in expressions", function()
      assert.are.same({ 4 }, q("SELECT VALUE MAX(c.n) + COUNT(1) - 2 FROM c"))
      assert.are.same({ { r = { 1, 3 } } }, q("SELECT [MIN(c.n), MAX(c.n)] AS r FROM c"))
    end)

    it("refuses aggregates outside SELECT, nested, or beside bare references", function()
      H.fails(400, c:query("SELECT * FROM c WHERE COUNT(1) > 1"))
      H.fails(400, c:query("SELECT VALUE SUM(COUNT(1)) FROM c"))
      local msg = H.fails(400, c:query("SELECT c.id, COUNT(1) FROM c"))
      assert.matches("inside an aggregate", msg)
      H.fails(400, c:query("SELECT VALUE COUNT(1) FROM c ORDER BY c.n"))
    end)
  end)

  describe("undefined and types", function()
    it("filters out rows whose condition is undefined or not a boolean", function()
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.missing = 1"))
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.n"))
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE 'true'"))
      assert.are.equal(3, #q("SELECT VALUE c.id FROM c WHERE true"))
    end)

    it("never compares across types", function()
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.n = '1'"))
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.n > 'a'"))
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.n != 'a'"))
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.z < 1"))
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.b > 0"))
      assert.are.same({ "one" }, q("SELECT VALUE c.id FROM c WHERE c.z = null"))
      assert.is_nil(v("c.n = c.missing"))
      assert.is_nil(v("c.missing = c.missing"))
      assert.is_nil(v("c.arr < [2]"))
    end)

    it("makes a missing property undefined at any depth", function()
      assert.is_nil(v("c.missing.deeper[3].x"))
      assert.is_nil(v("c.n.x"))
      assert.is_nil(v("c.arr.x"))
      assert.is_nil(v("c.obj[0]"))
    end)
  end)

  describe("ORDER BY", function()
    -- one item per kind of value, in the order ORDER BY must give
    local kinds = {
      { id = "u1" },                      -- undefined
      { id = "n1", k = null },
      { id = "f1", k = false },
      { id = "t1", k = true },
      { id = "m1", k = -2.5 },
      { id = "m2", k = 0 },
      { id = "m3", k = 10 },
      { id = "s1", k = "" },
      { id = "s2", k = "A" },
      { id = "s3", k = "a" },
      { id = "s4", k = "a\0" },
      { id = "s5", k = "ab" },
    }

    local function load(cont)
      for i, d in ipairs(kinds) do
        d.pk = "p" .. (i % 3)
        assert(cont:create(d))
      end
    end

    local function check(cont, extra)
      local asc = {}
      for i, d in ipairs(kinds) do asc[i] = d.id end
      local desc = {}
      for i = #asc, 1, -1 do desc[#desc + 1] = asc[i] end
      local rows = assert(cont:query("SELECT VALUE c.id FROM c " .. (extra or "") .. " ORDER BY c.k"))
      assert.are.same(asc, rows)
      rows = assert(cont:query("SELECT VALUE c.id FROM c " .. (extra or "") .. " ORDER BY c.k DESC"))
      assert.are.same(desc, rows)
    end

    it("orders undefined < null < false < true < numbers < strings, reading the index", function()
      local k = assert(db:create_container("kinds", { partition_key = "/pk", physical_partitions = 3 }))
      load(k)
      check(k)
    end)

    it("gives the same order when the path is not indexed (a sort)", function()
      local k = assert(db:create_container("kinds2", { partition_key = "/pk",
        physical_partitions = 3, indexing = { excluded = { "/k/?" } } }))
      load(k)
      check(k)
    end)

    it("gives the same order within one logical partition", function()
      local k = assert(db:create_container("kinds3", { partition_key = "/pk" }))
      for _, d in ipairs(kinds) do d.pk = "same" end
      for _, d in ipairs(kinds) do assert(k:create(d)) end
      check(k, "WHERE c.pk = 'same'")
    end)

    it("orders arrays and objects with undefined", function()
      local k = assert(db:create_container("kinds4", { partition_key = "/pk" }))
      assert(k:create({ id = "a", pk = 1, k = 1 }))
      assert(k:create({ id = "b", pk = 1, k = { 1 } }))
      assert(k:create({ id = "c", pk = 1, k = { x = 1 } }))
      local rows = assert(k:query("SELECT VALUE c.id FROM c ORDER BY c.k"))
      assert.are.equal("a", rows[3])
      rows = assert(k:query("SELECT VALUE c.id FROM c ORDER BY c.k DESC"))
      assert.are.equal("a", rows[1])
    end)

    it("orders by several keys in mixed directions", function()
      assert(c:create({ id = "four", pk = "b", n = 1, s = "Hello" }))
      local rows = q("SELECT VALUE c.id FROM c ORDER BY c.n DESC, c.id ASC")
      assert.are.same({ "three", "two", "four", "one" }, rows)
      rows = q("SELECT VALUE c.id FROM c ORDER BY c.s, c.n DESC")
      assert.are.same({ "four", "one", "three", "two" }, rows)
    end)

    it("orders by computed values and joined values", function()
      assert.are.same({ "three", "two", "one" }, q("SELECT VALUE c.id FROM c ORDER BY -c.n"))
      assert.are.same({ "blue", "green", "red" }, q("SELECT VALUE t FROM c JOIN t IN c.tags ORDER BY t"))
    end)

    it("orders long strings on their full value", function()
      local k = assert(db:create_container("long", { partition_key = "/pk", physical_partitions = 2 }))
      local base = string.rep("x", 250)
      local want = {}
      for i, suffix in ipairs({ "d", "a", "c", "b", "e" }) do
        assert(k:create({ id = "l" .. i, pk = "p" .. i, s = base .. suffix }))
      end
      assert(k:create({ id = "short", pk = "p", s = "y" }))
      assert.are.same({ "l2", "l4", "l3", "l1", "l5", "short" },
        assert(k:query("SELECT VALUE c.id FROM c ORDER BY c.s")))
      assert.are.same({ "short", "l5", "l1", "l3", "l4", "l2" },
        assert(k:query("SELECT VALUE c.id FROM c ORDER BY c.s DESC")))
      assert.are.same({ "l3" }, assert(k:query("SELECT VALUE c.id FROM c WHERE c.s = @s", { s = base .. "c" })))
      assert.are.same({ "l4", "l3", "l1" },
        assert(k:query("SELECT VALUE c.id FROM c WHERE c.s > @a AND c.s < @b ORDER BY c.s",
          { a = base .. "a", b = base .. "e" })))
      for _, size in ipairs({ 1, 2 }) do
        local got, cont = {}, nil
        repeat
          local rows, info = assert(k:query("SELECT VALUE c.id FROM c ORDER BY c.s DESC", nil,
            { max_items = size, continuation = cont }))
          for _, r in ipairs(rows) do got[#got + 1] = r end
          cont = info.continuation
        until not cont
        assert.are.same({ "short", "l5", "l1", "l3", "l4", "l2" }, got)
      end
    end)
  end)

  describe("parameters", function()
    it("binds values of every type from a table, with or without '@'", function()
      assert.are.same({ "one" }, q("SELECT VALUE c.id FROM c WHERE c.n = @n AND c.s = @s AND c.b = @b", { n = 1, s = "Hello", ["@b"] = true }))
      assert.are.same({ "one" }, q("SELECT VALUE c.id FROM c WHERE c.z = @z", { z = null }))
      assert.are.same({ "one" }, q("SELECT VALUE c.id FROM c WHERE c.arr = @a", { a = { 1, 2, 3 } }))
      assert.are.same({ "one" }, q("SELECT VALUE c.id FROM c WHERE c.obj = @o", { o = { y = "two", x = 1 } }))
      assert.are.same({ "one" }, q("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(@list, c.n)", { list = { 1, 9 } }))
    end)

    it("never splices values into the text", function()
      local evil = "x' OR c.n = 1 OR c.s = '"
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE c.s = @s", { s = evil }))
    end)

    it("refuses an unbound parameter, naming it and its position", function()
      local msg = H.fails(400, c:query("SELECT VALUE c.id FROM c WHERE c.n = @n", { m = 1 }))
      assert.matches("@n %(at 1:38%) is not bound", msg)
      H.fails(400, c:query("SELECT VALUE c.id FROM c WHERE c.n = @n"))
    end)

    it("refuses params that are not a table of values", function()
      H.fails(400, c:query("SELECT * FROM c", "n=1"))
      H.fails(400, c:query("SELECT * FROM c", { 1, 2 }))
      H.fails(400, c:query("SELECT * FROM c WHERE c.n = @n", { n = 0 / 0 }))
      H.fails(400, c:query("SELECT * FROM c", { n = 1, ["@n"] = 2 }))
    end)
  end)

  describe("errors", function()
    local cases = {
      { "SELECT * FORM c", "1:10", "expected FROM, found 'FORM'" },
      { "SELECT c.id, c.n WHERE c.n = 1", "1:24", "unknown name 'c' %(the query has no FROM%)" },
      { "SELECT * FROM c WHERE", "1:22", "expected an expression, found the end of the text" },
      { "SELECT * FROM c WHERE c.n = ", "1:29", "expected an expression" },
      { "SELECT * FROM c ORDER c.n", "1:23", "expected BY" },
      { "SELECT * FROM c WHERE (c.n = 1", "1:31", "expected '%)'" },
      { "SELECT * FROM c WHERE c.s = 'abc", "1:29", "unterminated string" },
      { "SELECT * FROM c WHERE c.n = 1 c.x", "1:31", "expected the end of the query" },
      { "SELECT * FROM c\n  WHERE c.n # 1", "2:13", "unexpected character '#'" },
      { "SELECT TOP x * FROM c", "1:12", "expected a number after TOP" },
      { "SELECT * FROM c OFFSET 1", "1:25", "expected LIMIT" },
      { "SELECT * FROM c WHERE c.n IN ()", "1:27", "IN needs at least one value" },
      { "SELECT * FROM c WHERE c.s = 'a\\q'", "1:31", "unknown escape" },
      { "SELECT * FROM c WHERE c.s = 'a\\u12'", "1:31", "bad \\u escape" },
      { "SELECT * FROM c WHERE c.s = 'a\\ud800'", "1:31", "lone surrogate" },
      { "SELECT * FROM c WHERE c.s = 'a\\ud800\\u0041'", "1:31", "lone surrogate" },
      { "SELECT * FROM c WHERE c.s = 'a\\udc00'", "1:31", "lone surrogate" },
      { "SELECT * FROM c JOIN t c.tags", "1:24", "expected IN" },
      { "SELECT", "1:7", "expected an expression" },
      { "", "1:1", "expected SELECT" },
      { "DELETE FROM c", "1:1", "expected SELECT, found 'DELETE'" },
      { "SELECT * FROM c WHERE c.n = 1.2.3", "1:33", "expected a property name, found '3'" },
      { "SELECT {a: 1, a: 2} FROM c", "1:15", "duplicate property 'a'" },
      { "SELECT * FROM select", "1:15", "expected a name after FROM" },
    }
    for _, case in ipairs(cases) do
      it(("names the position and what was expected: %q"):format(case[1]), function()
        local msg = H.fails(400, c:query(case[1]))
        assert.matches("syntax error at " .. case[2] .. ": " .. case[3], msg)
      end)
    end

    it("bounds nesting instead of exhausting the stack", function()
      local deep = string.rep("(", 5000) .. "1" .. string.rep(")", 5000)
      local msg = H.fails(400, c:query("SELECT VALUE " .. deep .. " FROM c"))
      assert.matches("nests too deeply", msg)
      local long = "1" .. string.rep(" + 1", 5000)
      msg = H.fails(400, c:query("SELECT VALUE " .. long .. " FROM c"))
      assert.matches("nests too deeply", msg)
    end)

    it("refuses SQL over 512 KiB and SQL that is not UTF-8", function()
      local big = "SELECT * FROM c WHERE c.s = '" .. string.rep("x", 512 * 1024) .. "'"
      local msg = H.fails(400, c:query(big))
      assert.matches("limit", msg)
      H.fails(400, c:query("SELECT * FROM c WHERE c.s = '\255'"))
    end)

    it("treats data errors as 400 and misuse as raised errors", function()
      H.fails(400, c:query(42))
      H.fails(400, c:query(nil))
      assert.has_error(function() c:query("SELECT * FROM c", nil, { nope = 1 }) end)
      assert.has_error(function() c:query("SELECT * FROM c", nil, { max_items = "3" }) end)
      assert.has_error(function() c:query("SELECT * FROM c", nil, { max_items = 0 }) end)
      assert.has_error(function() c:query("SELECT * FROM c", nil, { continuation = 5 }) end)
      assert.has_error(function() c:query("SELECT * FROM c", nil, "opts") end)
    end)

    it("refuses a partition key of the wrong shape with 400", function()
      H.fails(400, c:query("SELECT * FROM c", nil, { partition_key = { 1, 2 } }))
      H.fails(400, c:query("SELECT * FROM c", nil, { partition_key = { a = 1 } }))
    end)
  end)

  describe("patch filters", function()
    it("applies a patch when the filter holds and fails with 412 when it does not", function()
      local doc = assert(c:patch("one", "a", { { op = "set", path = "/n", value = 10 } },
        { filter = "FROM c WHERE c.n = 1" }))
      assert.are.equal(10, doc.n)
      local msg = H.fails(412, c:patch("one", "a", { { op = "set", path = "/n", value = 11 } },
        { filter = "FROM c WHERE c.n = 1" }))
      assert.matches("filter", msg)
      assert.are.equal(10, assert(c:read("one", "a")).n)
    end)

    it("takes JOINs and functions in a filter", function()
      assert(c:patch("one", "a", { { op = "set", path = "/hit", value = true } },
        { filter = "FROM c JOIN k IN c.kids WHERE k.age > 5 AND STARTSWITH(c.s, 'He')" }))
      H.fails(412, c:patch("two", "b", { { op = "set", path = "/hit", value = true } },
        { filter = "FROM c JOIN k IN c.kids WHERE k.age > 5" }))
    end)

    it("refuses a bad filter with 400, naming the position", function()
      local msg = H.fails(400, c:patch("one", "a", { { op = "set", path = "/n", value = 2 } },
        { filter = "FROM c WHERE c.n = " }))
      assert.matches("syntax error at 1:20", msg)
      H.fails(400, c:patch("one", "a", { { op = "set", path = "/n", value = 2 } },
        { filter = "FROM c WHERE c.n = @n" }))
      assert.are.equal(1, assert(c:read("one", "a")).n)
    end)

    it("checks filters in a batch too", function()
      local res, msg, status, results = c:batch("a", {
        { op = "patch", id = "one", ops = { { op = "incr", path = "/n", value = 1 } },
          filter = "FROM c WHERE c.n = 1" },
        { op = "patch", id = "three", ops = { { op = "incr", path = "/n", value = 1 } },
          filter = "FROM c WHERE c.n = 1" },
      })
      assert.is_nil(res)
      assert.are.equal(412, status)
      assert.are.equal(424, results[1].status)
      assert.are.equal(412, results[2].status)
      assert.are.equal(1, assert(c:read("one", "a")).n)
    end)
  end)
end)
