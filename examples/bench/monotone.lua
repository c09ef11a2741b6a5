--[[
Charges monotone in the data: the same queries, run as a container grows,
never cost less after items are added, but for what their result lost
(a TOP that now finds its rows sooner, a page that fills with other rows).

  lua5.4 examples/bench/monotone.lua [--steps 12] [--step 40]

One logical partition grows past 256 items (where a small partition was
read whole, and charged so) among others that grow too; the queries are
the shapes the planner serves (equalities, IN, ranges, prefixes, ORDER BY
in both directions with TOP and pages, a composite, GROUP BY, DISTINCT,
COUNT), routed and fanned out.  A step adds `step` items to the partition
and as many elsewhere.  A query whose result is what it was (the same
rows) must not cost less; one whose result shrank may cost less by what
the rows it lost cost (0.1 RU and their KB each); a TOP or a page whose
rows changed (new items took places in it) may stop sooner.  Anything else
is a violation, printed.
]]

local regolith = require "regolith"

local argparse = require "argparse"

local p = argparse("monotone.lua", "Charges monotone in the data")
p:option("--steps", "Steps of growth.", "12", tonumber)
p:option("--step", "Items added at each step.", "40", tonumber)
local args = p:parse()
local STEPS, STEP = args.steps, args.step

local QUERIES = {
  "SELECT * FROM c WHERE c.pk = 'main' AND c.a = 3",
  "SELECT * FROM c WHERE c.pk = 'main' AND c.a IN (1, 2)",
  "SELECT * FROM c WHERE c.pk = 'main' AND c.b > 900000",
  "SELECT * FROM c WHERE c.pk = 'main' AND c.b BETWEEN 100000 AND 300000",
  "SELECT * FROM c WHERE c.pk = 'main' AND STARTSWITH(c.s, 'w1')",
  "SELECT TOP 5 * FROM c WHERE c.pk = 'main' ORDER BY c.b",
  "SELECT TOP 5 * FROM c WHERE c.pk = 'main' ORDER BY c.b DESC",
  "SELECT * FROM c WHERE c.pk = 'main' ORDER BY c.t DESC",
  "SELECT TOP 8 * FROM c WHERE c.pk = 'main' AND c.a = 4 ORDER BY c.a, c.b DESC",
  "SELECT c.a, COUNT(1) AS n FROM c WHERE c.pk = 'main' GROUP BY c.a",
  "SELECT DISTINCT VALUE c.s FROM c WHERE c.pk = 'main'",
  "SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'main'",
  "SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'main' AND c.a = 5",
  "SELECT * FROM c WHERE c.a = 3 AND c.s = 'w7'",
  "SELECT * FROM c WHERE c.a = 7 AND c.b < 50000",
  "SELECT TOP 10 * FROM c ORDER BY c.b DESC",
  "SELECT TOP 10 * FROM c WHERE c.a = 2 ORDER BY c.a, c.b DESC",
  "SELECT c.a, COUNT(1) AS n FROM c GROUP BY c.a",
}
local PAGED = {                   -- the first page of 10
  "SELECT * FROM c WHERE c.pk = 'main' ORDER BY c.b",
  "SELECT * FROM c WHERE c.pk = 'main' AND c.b > 200000",
}

local dir = os.tmpname()
os.remove(dir)
local db = assert(regolith.open(dir, { sync = "none" }))
local c = assert(db:create_container("c", { partition_key = "/pk",
  physical_partitions = 4,
  indexing = { composite = { { { path = "/a" }, { path = "/b", order = "descending" } } } } }))

local n = 0
local function add(pk)
  n = n + 1
  local d = { id = "i" .. n, pk = pk, a = (n * 7) % 10, s = "w" .. (n % 13),
              t = ("2024-%02d-%02d"):format(n % 12 + 1, n % 28 + 1) }
  if n % 9 ~= 0 then d.b = (n * 7919) % 1000003 end
  assert(c:create(d))
end

local last, violations, runs = {}, 0, 0
for step = 1, STEPS do
  for i = 1, STEP do
    add("main")
    add("o" .. (i % 30))
  end
  local main = STEP * step
  local function check(key, sql, opts)
    local rows, info = assert(c:query(sql, nil, opts))
    local ids = {}
    for i, r in ipairs(rows) do ids[i] = type(r) == "table" and (r.id or r.a) or r end
    ids = regolith.json.encode(ids)
    runs = runs + 1
    local prev = last[key]
    if prev then
      local lost = math.max(0, prev.rows - #rows)
      local allowed = lost * (0.1 + 0.1 * prev.kb_per_row) + 0.005
      local moved = ids ~= prev.ids and lost == 0 and
                    (sql:find("TOP", 1, true) or opts ~= nil)
      if info.charge < prev.charge - allowed and not moved then
        violations = violations + 1
        print(("violation at %d items: %s%s: %.2f RU (%d rows), before %.2f RU (%d rows)")
          :format(main, sql, opts and " (first page)" or "", info.charge, #rows,
                  prev.charge, prev.rows))
      end
    end
    last[key] = { charge = info.charge, rows = #rows, ids = ids,
                  kb_per_row = info.loaded > 0 and 0.25 or 0 }
  end
  for i, sql in ipairs(QUERIES) do check(i, sql) end
  for i, sql in ipairs(PAGED) do check("p" .. i, sql, { max_items = 10 }) end
end
print(("%d queries run %d times each as one partition grew to %d items " ..
  "(and the container to %d): %d violations"):format(#QUERIES + #PAGED, STEPS,
  STEP * STEPS, n, violations))
db:close()
os.execute("rm -rf '" .. dir .. "'")
