-- The grammar of the dialect beyond the basics of query_spec.lua: the
-- forms of FROM, queries without FROM, subqueries (scalar, EXISTS, ARRAY,
-- in JOIN), LIKE, the ternary and coalesce operators, literals, and what
-- is refused.
local regolith = require "regolith"
local H = require "helper"

local json = regolith.json

describe("query grammar", function()
  local db, c

  local function q(sql, params, opts)
    local rows, info, status = c:query(sql, params, opts)
    assert(rows, ("%s -> %s (%s)"):format(sql, tostring(info), tostring(status)))
    return rows, info
  end

  local function sorted(list)
    local out = {}
    for i, v in ipairs(list) do out[i] = type(v) == "table" and json.encode(v) or tostring(v) end
    table.sort(out)
    return out
  end

  before_each(function()
    db = H.open()
    c = assert(db:create_container("shop", { partition_key = "/cat", physical_partitions = 2 }))
    assert(c:create({ id = "tent", cat = "camp", name = "Ridge tent", price = 180,
      stock = { { site = "Lyon, FR", qty = 4 }, { site = "Bern, CH", qty = 12 }, { site = "Nice, FR", qty = 9 } },
      tags = { { name = "outdoor" }, { name = "sleep" } }, maker = { name = "Alto", country = "FR" } }))
    assert(c:create({ id = "stove", cat = "camp", name = "Pocket stove", price = 35,
      stock = { { site = "Bern, CH", qty = 2 } }, tags = { { name = "outdoor" }, { name = "cook" } },
      maker = { name = "Brisa" } }))
    assert(c:create({ id = "mug", cat = "kitchen", name = "Enamel mug 20% off", price = 8,
      stock = regolith.array({}), tags = { { name = "cook" } } }))
  end)

  after_each(function()
    db:close()
    H.cleanup()
  end)

  describe("FROM", function()
    it("names the item by any alias, the container's name included", function()
      assert.are.same({ "mug", "stove", "tent" }, sorted(q("SELECT VALUE p.id FROM shop p")))
      assert.are.same({ "mug", "stove", "tent" }, sorted(q("SELECT VALUE root.id FROM root")))
      assert.are.same({ "mug", "stove", "tent" }, sorted(q("SELECT VALUE x.id FROM whatever AS x")))
    end)

    it("takes a part of each item as the source, leaving out items without it", function()
      local rows = q("SELECT * FROM c.maker m WHERE m.country = 'FR'")
      assert.are.same({ { name = "Alto", country = "FR" } }, rows)
      assert.are.same({ "Alto", "Brisa" }, sorted(q("SELECT VALUE maker.name FROM c.maker")))
      assert.are.same({ 4 }, q("SELECT VALUE s.qty FROM c.stock[0] s WHERE s.site = 'Lyon, FR'"))
    end)

    it("iterates an array of each item with IN", function()
      assert.are.same({ 2, 4, 9, 12 }, (function()
        local r = q("SELECT VALUE s.qty FROM s IN c.stock")
        table.sort(r)
        return r
      end)())
      assert.are.same({ { site = "Bern, CH", qty = 12 } },
                      q("SELECT * FROM s IN c.stock WHERE s.qty > 10"))
    end)

    it("needs no FROM: one row, evaluated once", function()
      assert.are.same({ { ["$1"] = "Adventure", ["$2"] = "Works" } }, q("SELECT 'Adventure', 'Works'"))
      assert.are.same({ "x" }, q("SELECT VALUE 'x'"))
      assert.are.same({ { ["$1"] = { a = 1 } } }, q("SELECT {a: 1}"))
      assert.are.same({ { a = 1 } }, q("SELECT VALUE {a: 1}"))
      local rows, info = q("SELECT VALUE 1 + 1")
      assert.are.same({ 2 }, rows)
      assert.are.equal(0, info.loaded)
      assert.are.equal(0, info.partitions)
      local msg = H.fails(400, c:query("SELECT *"))
      assert.matches("SELECT %* needs a FROM clause", msg)
    end)

    it("refuses aliases used twice, and subqueries as the query's FROM", function()
      H.fails(400, c:query("SELECT * FROM c JOIN c IN c.tags"))
      local msg = H.fails(400, c:query("SELECT * FROM (SELECT VALUE 1) x"))
      assert.matches("not supported", msg)
    end)
  end)

  describe("subqueries", function()
    it("gives a scalar subquery's first value, or undefined", function()
      assert.are.same({ { a = 1, b = 2 } }, q("SELECT (SELECT VALUE 1) AS a, (SELECT VALUE 2) AS b"))
      assert.are.same({ "ID-tent" }, q("SELECT VALUE (SELECT VALUE CONCAT('ID-', c.id)) FROM c WHERE c.id = 'tent'"))
      -- a filter inside leaves the projection undefined for other items
      local rows = q("SELECT c.id, (SELECT c.name WHERE CONTAINS(c.name, 'tent')).name FROM c")
      table.sort(rows, function(a, b) return a.id < b.id end)
      assert.are.same({ { id = "mug" }, { id = "stove" }, { id = "tent", name = "Ridge tent" } }, rows)
    end)

    it("aggregates in a subquery over an item's array", function()
      local rows = q([[SELECT c.id,
          (SELECT VALUE COUNT(1) FROM s IN c.stock) AS sites,
          (SELECT VALUE COUNT(1) FROM s IN c.stock WHERE ENDSWITH(s.site, 'FR')) AS fr,
          (SELECT COUNT(1) AS n, SUM(s.qty) AS total FROM s IN c.stock) AS summary
        FROM c WHERE c.cat = 'camp']])
      table.sort(rows, function(a, b) return a.id < b.id end)
      assert.are.same({
        { id = "stove", sites = 1, fr = 0, summary = { n = 1, total = 2 } },
        { id = "tent", sites = 3, fr = 2, summary = { n = 3, total = 25 } },
      }, rows)
      -- in the WHERE too
      assert.are.same({ "tent" }, q([[SELECT VALUE c.id FROM c
        WHERE (SELECT VALUE COUNT(1) FROM s IN c.stock WHERE s.qty > 3) >= 2]]))
      assert.are.same({ { id = "tent", avg = 10.5 } }, q([[SELECT c.id,
        (SELECT VALUE AVG(s.qty) FROM s IN c.stock WHERE s.qty > 5) AS avg
        FROM c WHERE (SELECT VALUE COUNT(1) FROM s IN c.stock WHERE s.qty > 5) >= 1]]))
    end)

    it("EXISTS is true when the subquery gives a defined value", function()
      assert.are.same({ { e1 = false, e2 = true } },
                      q("SELECT EXISTS (SELECT VALUE undefined) AS e1, EXISTS (SELECT undefined) AS e2"))
      assert.are.same({ "stove", "tent" }, sorted(q(
        "SELECT VALUE c.id FROM c WHERE EXISTS (SELECT VALUE t FROM t IN c.tags WHERE t.name = 'outdoor')")))
      assert.are.same({ "tent" }, q([[SELECT VALUE c.id FROM c WHERE EXISTS
        (SELECT VALUE s FROM s IN c.stock WHERE s.site = 'Bern, CH' AND s.qty >= 10)]]))
      local rows = q([[SELECT c.id, EXISTS (SELECT VALUE s FROM s IN c.stock
        WHERE s.qty >= 10) AS plenty FROM c]])
      table.sort(rows, function(a, b) return a.id < b.id end)
      assert.are.same({ { id = "mug", plenty = false }, { id = "stove", plenty = false },
                        { id = "tent", plenty = true } }, rows)
    end)

    it("ARRAY collects a subquery's values", function()
      local rows = q([[SELECT c.id, ARRAY(SELECT VALUE t.name FROM t IN c.tags) AS names,
        ARRAY(SELECT VALUE s.site FROM s IN c.stock WHERE s.qty > 5 ORDER BY s.site DESC) AS big
        FROM c WHERE c.id = 'tent']])
      assert.are.same({ { id = "tent", names = { "outdoor", "sleep" }, big = { "Nice, FR", "Bern, CH" } } }, rows)
      assert.are.same({ regolith.array({}) }, q("SELECT VALUE ARRAY(SELECT VALUE t FROM t IN c.stock) FROM c WHERE c.id = 'mug'"))
    end)

    it("subqueries support DISTINCT, TOP, OFFSET LIMIT and GROUP BY", function()
      assert.are.same({ { "FR", "CH" } }, q([[SELECT VALUE ARRAY(SELECT DISTINCT VALUE
        RIGHT(s.site, 2) FROM s IN c.stock ORDER BY RIGHT(s.site, 2) DESC) FROM c WHERE c.id = 'tent']]))
      assert.are.same({ { 12 } }, q([[SELECT VALUE ARRAY(SELECT TOP 1 VALUE s.qty FROM s IN c.stock
        ORDER BY s.qty DESC) FROM c WHERE c.id = 'tent']]))
      assert.are.same({ { 9 } }, q([[SELECT VALUE ARRAY(SELECT VALUE s.qty FROM s IN c.stock
        ORDER BY s.qty OFFSET 1 LIMIT 1) FROM c WHERE c.id = 'tent']]))
      local rows = q([[SELECT VALUE ARRAY(SELECT RIGHT(s.site, 2) AS country, SUM(s.qty) AS qty
        FROM s IN c.stock GROUP BY RIGHT(s.site, 2)) FROM c WHERE c.id = 'tent']])
      table.sort(rows[1], function(a, b) return a.country < b.country end)
      assert.are.same({ { country = "CH", qty = 12 }, { country = "FR", qty = 13 } }, rows[1])
    end)

    it("JOINs a subquery: filtered arrays, values computed once, and reference data", function()
      assert.are.same({ "stove", "tent" }, sorted(q([[SELECT VALUE c.id FROM c
        JOIN (SELECT VALUE t FROM t IN c.tags WHERE t.name = 'outdoor')]])))
      local rows = q([[SELECT VALUE {id: c.id, total: t} FROM c
        JOIN (SELECT VALUE c.price * 1.2) t WHERE t < 100]])
      table.sort(rows, function(a, b) return a.id < b.id end)
      assert.are.same({ { id = "mug", total = 9.6 }, { id = "stove", total = 42 } }, rows)
      rows = q([[SELECT c.id, inv.total FROM c
        JOIN (SELECT COUNT(1) AS n, SUM(s.qty) AS total FROM s IN c.stock WHERE s.qty > 3) AS inv
        WHERE inv.n >= 1]])
      assert.are.same({ { id = "tent", total = 25 } }, rows)
      rows = q([[SELECT c.id, u.label FROM c JOIN u IN (SELECT VALUE [
          {cat: 'camp', label: 'Camping'}, {cat: 'kitchen', label: 'Kitchen'}])
        WHERE c.cat = u.cat AND c.id != 'stove']])
      table.sort(rows, function(a, b) return a.id < b.id end)
      assert.are.same({ { id = "mug", label = "Kitchen" }, { id = "tent", label = "Camping" } }, rows)
      rows = q([[SELECT c.id, n.t.name AS tag FROM c
        JOIN n IN (SELECT VALUE ARRAY(SELECT t FROM t IN c.tags WHERE t.name NOT LIKE '%door%'))
        WHERE c.id = 'tent']])
      assert.are.same({ { id = "tent", tag = "sleep" } }, rows)
    end)
  end)

  describe("operators and literals", function()
    it("filters with LIKE, ESCAPE and NOT LIKE", function()
      assert.are.same({ "Ridge tent" }, q("SELECT VALUE c.name FROM c WHERE c.name LIKE '%ten%'"))
      assert.are.same({ "Pocket stove" }, q("SELECT VALUE c.name FROM c WHERE c.name LIKE 'Pocket%'"))
      assert.are.same({ "Enamel mug 20% off" }, q("SELECT VALUE c.name FROM c WHERE c.name LIKE '%20^%%' ESCAPE '^'"))
      assert.are.same({ "Enamel mug 20% off", "Pocket stove" },
                      sorted(q("SELECT VALUE c.name FROM c WHERE c.name NOT LIKE 'R%'")))
      assert.are.same({ "Ridge tent" }, q("SELECT VALUE c.name FROM c WHERE c.name LIKE '[P-S]%e_t'"))
    end)

    it("chooses with ? : and falls back with ??", function()
      local rows = q([[SELECT c.id, c.price > 100 ? 'big' : c.price > 10 ? 'mid' : 'small' AS size,
        c.maker.country ?? 'unknown' AS country FROM c]])
      table.sort(rows, function(a, b) return a.id < b.id end)
      assert.are.same({ { id = "mug", size = "small", country = "unknown" },
                        { id = "stove", size = "mid", country = "unknown" },
                        { id = "tent", size = "big", country = "FR" } }, rows)
    end)

    it("reads hexadecimal numbers, NaN and Infinity", function()
      assert.are.same({ 255 }, q("SELECT VALUE 0xFF"))
      assert.are.same({ 31 }, q("SELECT VALUE 0x1f"))
      assert.are.same({ { a = "NaN", b = "Infinity", c = false } },
                      q("SELECT ToString(NaN) AS a, ToString(Infinity) AS b, IS_FINITE_NUMBER(Infinity) AS c"))
      H.fails(400, c:query("SELECT VALUE 0x"))
    end)

    it("compares only values of one type, and three-valued logic keeps what is true", function()
      assert.are.same({}, q("SELECT VALUE c.id FROM c WHERE 0 = 'true'"))
      assert.are.same({ { a = true, o = true, n = false } },
                      q("SELECT (true AND true) AS a, (undefined OR true) AS o, (NOT true) AS n, (undefined AND true) AS u"))
      assert.are.same({ { price = 35 } }, q("SELECT c.price FROM c WHERE c.price BETWEEN 10 AND 100"))
      assert.are.same({ { low = false, price = 180 } },
                      q("SELECT (c.price BETWEEN 0 AND 10) AS low, c.price FROM c WHERE c.id = 'tent'"))
    end)
  end)

  describe("errors", function()
    it("names what it refuses", function()
      local cases = {
        { "SELECT * FROM c ORDER BY RANK c.name", "ORDER BY RANK takes FullTextScore, VectorDistance or RRF" },
        { "SELECT VALUE * FROM c", "SELECT VALUE %* is not valid" },
        { "SELECT *, c.id FROM c", "'%*' must be the only item selected" },
        { "SELECT VALUE EXISTS(1)", "expected SELECT after EXISTS%(" },
        { "SELECT VALUE (SELECT VALUE 1", "expected '%)' after the subquery" },
        { "SELECT VALUE udf.f(1) FROM c", "user%-defined function 'f' not found" },
        { "SELECT * FROM c JOIN (SELECT VALUE t FROM t IN c.tags) x JOIN x IN c.stock",
          "the alias 'x' is already in use" },
      }
      for _, case in ipairs(cases) do
        local rows, msg = c:query(case[1])
        assert.is_nil(rows, case[1])
        assert.matches(case[2], msg)
      end
    end)
  end)
end)
