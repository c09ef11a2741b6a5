-- Bad input through the Lua API (docs/api.md, Conventions;
-- docs/guarantees.md, Bad input): misuse (a wrong argument type, anything
-- wrong in an options table) raises; data (documents, ids, partition keys,
-- SQL, parameters, tokens, op lists, script sources and arguments) gets
-- nil, message, status.  Every refusal leaves the database as it was: the
-- same items, scripts, feed and statistics, and verify() passes.
-- json_spec, limits_spec, patch_spec and batch_spec hold the foundation's
-- cases; these are the rest.
local regolith = require "regolith"
local H = require "helper"

local NUL, BADUTF8 = "a\0b", "a\255b"

-- Flips an unused low bit of a base64url token's last character, when its
-- length leaves some (the decoded bytes stay the same); nil otherwise.
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
local function same_bytes_variant(tok)
  if #tok % 4 == 0 then return nil end
  local i = B64:find(tok:sub(-1), 1, true) - 1
  local j = i % 2 == 0 and i + 1 or i - 1
  return tok:sub(1, -2) .. B64:sub(j + 1, j + 1)
end

-- A value as text with object keys in order (Lua tables keep none).
local function canon(v)
  if type(v) ~= "table" then return regolith.json.encode(v) end
  local keys, out = {}, {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. "=" .. canon(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end

local function deep(n)
  local t = {}
  local d = t
  for _ = 2, n do d.x = {} d = d.x end
  return t
end

describe("bad input", function()
  local db, path, c, h

  before_each(function()
    db, path = H.open()
    c = assert(db:create_container("c", { partition_key = "/pk",
      change_feed = { all_versions = true } }))
    h = assert(db:create_container("h", { partition_key = { "/a", "/b" },
      change_feed = { all_versions = true } }))
    assert(c:create({ id = "a", pk = "p", n = 1, tags = { "x" } }))
    assert(c:create({ id = "b", pk = "p", n = 2 }))
    assert(c:create({ id = "z", pk = "q\0nul", n = 3 }))
    assert(h:create({ id = "a", a = "x", b = 1 }))
    assert(c:create_procedure("echo", "return function(ctx, ...) return { ... } end"))
    assert(c:create_trigger("t", { type = "pre", operation = "all",
                                   source = "return function(ctx) end" }))
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  -- What a refusal must leave alone: items, scripts, the feed, statistics.
  local function snapshot()
    local out = {}
    for _, cont in ipairs({ c, h }) do
      local rows = assert(cont:query("SELECT * FROM c ORDER BY c.id"))
      out[#out + 1] = canon(rows)
      local ch = assert(cont:changes{ mode = "all_versions", max_items = 1000 })
      out[#out + 1] = #ch
      out[#out + 1] = regolith.json.encode(cont:procedures())
      out[#out + 1] = regolith.json.encode(cont:triggers())
    end
    local s = db:stats()
    out[#out + 1] = canon({ s.items, s.lsn, s.bytes })
    local names = db:containers()
    table.sort(names)
    out[#out + 1] = table.concat(names, ",")
    return table.concat(out, "\n")
  end

  -- Runs f, then checks that nothing changed and every invariant holds.
  local function unchanged(f)
    local before = snapshot()
    f()
    assert.are.equal(before, snapshot())
    assert.is_true((db:verify()))
  end

  local function raises(pattern, f, ...)
    local ok, msg = pcall(f, ...)
    assert.is_false(ok, "expected an error")
    if pattern then assert.matches(pattern, tostring(msg), 1, true) end
  end

  describe("wrong argument types", function()
    it("raise for names, options tables, paths and handles (misuse)", function()
      unchanged(function()
        for _, v in ipairs({ 1, true, {}, print }) do
          raises("must be a string", db.create_container, db, v, { partition_key = "/pk" })
          raises("must be a string", db.container, db, v)
          raises("must be a string", db.delete_container, db, v)
          raises("must be a string", c.create_procedure, c, v, "return function() end")
          raises("must be a string", c.replace_procedure, c, v, "return function() end")
          raises("must be a string", c.delete_procedure, c, v)
          raises("must be a string", c.execute, c, v, "p")
          raises("must be a string", c.create_trigger, c, v, { type = "pre", source = "" })
          raises("must be a string", c.delete_trigger, c, v)
        end
        for _, v in ipairs({ 1, true, "x", print }) do
          raises("options must be a table", c.create, c, { id = "n", pk = "p" }, v)
          raises("options must be a table", c.read, c, "a", "p", v)
          raises("options must be a table", c.delete, c, "a", "p", v)
          raises("options must be a table", c.patch, c, "a", "p", { { op = "set", path = "/x", value = 1 } }, v)
          raises("options must be a table", c.query, c, "SELECT * FROM c", nil, v)
          raises("options must be a table", c.query_rows, c, "SELECT * FROM c", nil, v)
          raises("options must be a table", c.changes, c, v)
          raises("options must be a table", db.processor, db, v)
          raises("options must be a table", db.run_processors, db, v)
          raises(nil, c.create_trigger, c, "t2", v)
          raises(nil, db.create_container, db, "d", v)
          raises(nil, regolith.open, path, v)
        end
        raises("regolith.container expected", c.read, db, "a", "p")
        raises("regolith.db expected", db.stats, c)
        raises("string expected", regolith.open, {})
        raises("string expected", db.backup, db, {})
      end)
    end)

    it("give nil, message, 400 for documents, ids, keys, SQL, op lists and arguments (data)", function()
      unchanged(function()
        for _, v in ipairs({ "doc", 42, true, print }) do
          H.fails(400, c:create(v))
          H.fails(400, c:replace(v))
          H.fails(400, c:upsert(v))
          H.fails(400, c:patch("a", "p", v))
          H.fails(400, c:batch("p", v))
          H.fails(400, c:read_many(v))
          H.fails(400, c:query("SELECT * FROM c", v))
        end
        for _, v in ipairs({ 1, true, {}, print }) do
          H.fails(400, c:read(v, "p"))
          H.fails(400, c:delete(v, "p"))
          H.fails(400, c:patch(v, "p", { { op = "set", path = "/x", value = 1 } }))
          H.fails(400, c:query(v))
          H.fails(400, c:create_procedure("s", v))
          H.fails(400, regolith.json.decode(v))
        end
        -- ({} is the none partition key: none_pk_spec)
        for _, v in ipairs({ regolith.array(), print, { 1, 2 } }) do
          H.fails(400, c:read("a", v))
          H.fails(400, c:delete("a", v))
          H.fails(400, c:batch(v, { { op = "read", id = "a" } }))
          H.fails(400, c:execute("echo", v))
        end
        H.fails(400, c:patch("a", "p", { "set" }))
        H.fails(400, c:patch("a", "p", { { op = "set", path = 1, value = 1 } }))
        H.fails(400, c:batch("p", { "read" }))
        H.fails(400, c:read_many({ "a" }))
        H.fails(400, c:read_many({ { 1, "p" } }))
        H.fails(400, c:execute("echo", "p", print))
        H.fails(400, c:execute("echo", "p", 1, coroutine.create(print)))
        H.fails(400, c:create_trigger("s", { type = "pre", source = {} }))
        H.fails(400, regolith.json.encode(print))
      end)
    end)
  end)

  describe("oversize and overdeep values", function()
    it("refuses ids over 1023 bytes and names over 255 bytes with 400", function()
      unchanged(function()
        local id = ("i"):rep(1024)
        H.fails(400, c:create({ id = id, pk = "p" }))
        H.fails(400, c:upsert({ id = id, pk = "p" }))
        H.fails(400, c:read(id, "p"))
        H.fails(400, c:delete(id, "p"))
        H.fails(400, c:patch(id, "p", { { op = "set", path = "/x", value = 1 } }))
        H.fails(400, c:batch("p", { { op = "read", id = id } }))
        local name = ("n"):rep(256)
        H.fails(400, db:create_container(name, { partition_key = "/pk" }))
        H.fails(400, c:create_procedure(name, "return function() end"))
        H.fails(400, c:create_trigger(name, { type = "pre", source = "return function() end" }))
        H.fails(400, c:upsert({ id = "a", pk = "p" }, { pre_trigger = name }))
      end)
    end)

    it("refuses items over 2 MiB with 413 on every write path, the partition key included", function()
      unchanged(function()
        local big = ("x"):rep(2 * 2^20)
        H.fails(413, c:create({ id = "big", pk = "p", s = big }))
        H.fails(413, c:create({ id = "big", pk = big }))
        H.fails(413, c:replace({ id = "a", pk = "p", s = big }))
        H.fails(413, c:upsert({ id = "a", pk = "p", s = big }))
        H.fails(413, c:patch("a", "p", { { op = "set", path = "/s", value = big } }))
        H.fails(413, c:batch("p", { { op = "upsert", doc = { id = "big", pk = "p", s = big } } }))
        H.fails(413, c:create_procedure("huge", "return function() end --" .. big))
      end)
    end)

    it("refuses values nested deeper than 128 levels with 400 wherever JSON goes in", function()
      unchanged(function()
        local d = deep(129)
        H.fails(400, c:create({ id = "d", pk = "p", d = d }))
        H.fails(400, c:patch("a", "p", { { op = "set", path = "/d", value = d } }))
        H.fails(400, c:batch("p", { { op = "create", doc = { id = "d", pk = "p", d = d } } }))
        H.fails(400, c:execute("echo", "p", d))
        H.fails(400, c:query("SELECT * FROM c WHERE c.n = @d", { d = d }))
        H.fails(400, regolith.json.encode(d))
        H.fails(400, regolith.json.decode(("["):rep(129) .. ("]"):rep(129)))
      end)
      -- a patch may not deepen an item past the limit either
      assert(c:upsert({ id = "deep", pk = "p", d = deep(100) }))
      unchanged(function()
        H.fails(400, c:patch("deep", "p", { { op = "set", path = "/d" .. ("/x"):rep(80), value = deep(60) } }))
      end)
    end)

    it("refuses SQL over 512 KiB and a results page beyond what a number can say", function()
      unchanged(function()
        H.fails(400, c:query("SELECT * FROM c WHERE c.s = '" .. ("x"):rep(512 * 1024) .. "'"))
        H.fails(400, c:query("SELECT TOP 99999999999999999999 * FROM c"))
        H.fails(400, c:query("SELECT * FROM c OFFSET -1 LIMIT 1"))
        raises("max_items", c.query, c, "SELECT * FROM c", nil, { max_items = 0 })
        raises("max_items", c.query, c, "SELECT * FROM c", nil, { max_items = 2^40 })
      end)
    end)

    it("refuses an incr past the largest number with 400, keeping the item", function()
      assert(c:upsert({ id = "m", pk = "p", n = 1.7976931348623157e308 }))
      unchanged(function()
        local msg = H.fails(400, c:patch("m", "p", { { op = "incr", path = "/n", value = 1.7976931348623157e308 } }))
        assert.matches("out of the range", msg, 1, true)
        H.fails(400, c:patch("m", "p", { { op = "incr", path = "/n", value = -math.huge } }))
      end)
      assert.are.equal(1.7976931348623157e308, c:read("m", "p").n)
    end)
  end)

  describe("invalid ids and partition keys", function()
    it("refuses every id the rules forbid with 400", function()
      unchanged(function()
        for _, id in ipairs({ "", "a/b", "a\\b", "a?b", "a#b", NUL, BADUTF8, "\192\128" }) do
          H.fails(400, c:create({ id = id, pk = "p" }))
          H.fails(400, c:read(id, "p"))
          H.fails(400, c:delete(id, "p"))
          H.fails(400, c:batch("p", { { op = "delete", id = id } }))
        end
        H.fails(400, c:create({ pk = "p" }))
        H.fails(400, c:create({ id = 7, pk = "p" }))
      end)
    end)

    it("refuses partition key values JSON or the key rules cannot carry with 400", function()
      unchanged(function()
        for _, pk in ipairs({ 0 / 0, math.huge, -math.huge, BADUTF8, { 1 }, print }) do
          H.fails(400, c:create({ id = "k", pk = pk }))
          H.fails(400, c:read("a", pk))
          H.fails(400, c:execute("echo", pk))
          H.fails(400, c:batch(pk, { { op = "read", id = "a" } }))
        end
        H.fails(400, c:create({ id = "k" }))
        H.fails(400, c:create({ id = "k", pk = {} }))   -- a document's {} is no key
        H.fails(400, c:read("a"))
      end)
    end)

    it("refuses hierarchical keys of the wrong shape with 400", function()
      unchanged(function()
        for _, pk in ipairs({ "x", { "x" }, { "x", 1, 2 }, { "x", {} }, { a = "x", b = 1 },
                              regolith.array() }) do
          H.fails(400, h:read("a", pk))
          H.fails(400, h:delete("a", pk))
          H.fails(400, h:batch(pk, { { op = "read", id = "a" } }))
        end
        H.fails(400, h:create({ id = "k", a = "x" }))
        H.fails(400, h:create({ id = "k", a = "x", b = {} }))
      end)
      assert(h:read("a", { "x", 1 }))
    end)

    it("keeps NUL in partition key values (valid UTF-8), and apart from the key without it", function()
      assert.are.equal(3, c:read("z", "q\0nul").n)
      H.fails(404, c:read("z", "q"))
      H.fails(404, c:read("z", "q\0nux"))
    end)
  end)

  describe("strings with NUL or invalid UTF-8", function()
    it("refuses them in container, procedure and trigger names with 400", function()
      unchanged(function()
        for _, name in ipairs({ NUL, BADUTF8 }) do
          H.fails(400, db:create_container(name, { partition_key = "/pk" }))
          H.fails(400, db:container(name))
          H.fails(400, db:delete_container(name))
          H.fails(400, c:create_procedure(name, "return function() end"))
          H.fails(400, c:replace_procedure(name, "return function() end"))
          H.fails(400, c:execute(name, "p"))
          H.fails(400, c:delete_procedure(name))
          H.fails(400, c:create_trigger(name, { type = "pre", source = "return function() end" }))
          H.fails(400, c:delete_trigger(name))
        end
        -- "t\0x" names no trigger, even though "t" exists
        H.fails(400, c:upsert({ id = "a", pk = "p" }, { pre_trigger = "t\0x" }))
        H.fails(400, c:upsert({ id = "a", pk = "p" }, { post_trigger = "t\0x" }))
        H.fails(400, c:upsert({ id = "a", pk = "p" }, { pre_trigger = "t\255" }))
      end)
    end)

    it("refuses them in processor names and instances (options: raise)", function()
      unchanged(function()
        local function nop() end
        raises("processor name", db.processor, db, { name = NUL, source = "c", handler = nop })
        raises("processor name", db.processor, db, { name = BADUTF8, source = "c", handler = nop })
        raises("instance", db.processor, db, { name = "pr", source = "c", instance = NUL, handler = nop })
        raises("instance", db.processor, db, { name = "pr", source = "c", instance = BADUTF8, handler = nop })
        H.fails(400, db:processor{ name = "pr", source = NUL, handler = nop })
      end)
    end)

    it("refuses invalid UTF-8 in documents, keys, parameters, arguments and SQL with 400", function()
      unchanged(function()
        H.fails(400, c:create({ id = "u", pk = "p", s = BADUTF8 }))
        H.fails(400, c:create({ id = "u", pk = "p", [BADUTF8] = 1 }))
        H.fails(400, c:patch("a", "p", { { op = "set", path = "/s", value = BADUTF8 } }))
        H.fails(400, c:query("SELECT * FROM c WHERE c.s = @s", { s = BADUTF8 }))
        H.fails(400, c:query("SELECT * FROM c WHERE c.s = '" .. BADUTF8 .. "'"))
        H.fails(400, c:execute("echo", "p", BADUTF8))
        H.fails(400, c:execute("echo", "p", { [BADUTF8] = 1 }))
        H.fails(400, regolith.json.decode('"' .. BADUTF8 .. '"'))
      end)
    end)

    it("refuses patch paths that are not valid UTF-8 with 400 (they would have written an unreadable item)", function()
      unchanged(function()
        for _, op in ipairs({ "add", "set", "incr" }) do
          H.fails(400, c:patch("a", "p", { { op = op, path = "/x" .. BADUTF8, value = 1 } }))
        end
        H.fails(400, c:patch("a", "p", { { op = "move", from = "/n", path = "/\255" } }))
        H.fails(400, c:patch("a", "p", { { op = "move", from = "/\255", path = "/m" } }))
        H.fails(400, c:batch("p", { { op = "patch", id = "a", ops = { { op = "add", path = "/\192", value = 1 } } } }))
      end)
      -- paths holding NUL are valid: they name members holding NUL
      local d = assert(c:patch("a", "p", { { op = "set", path = "/k\0ey", value = 1 } }))
      assert.are.equal(1, d["k\0ey"])
      assert.is_nil(d.k)
      assert.is_true((db:verify()))
    end)

    it("refuses them in SQL text and keeps NUL in parameters exact", function()
      unchanged(function()
        H.fails(400, c:query("SELECT * FROM c\0 WHERE false"))
        H.fails(400, c:query("SELECT VALUE 1\0"))
      end)
      local rows = assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = @k", { k = "q\0nul" }))
      assert.are.same({ "z" }, rows)
      assert.are.same({}, (assert(c:query("SELECT VALUE c.id FROM c WHERE c.pk = @k", { k = "q" }))))
    end)

    it("refuses them in procedure and trigger sources with 400, and carries NUL in arguments", function()
      unchanged(function()
        H.fails(400, c:create_procedure("s1", "return function() return 1 end\0junk"))
        H.fails(400, c:create_procedure("s2", "return function() return '\255' end\255"))
        H.fails(400, c:replace_procedure("echo", "\0"))
        H.fails(400, c:create_trigger("s3", { type = "pre", source = "return function() end\0" }))
        raises("NUL", c.create_trigger, c, "s4", { type = "pre\0", source = "return function() end" })
        raises("NUL", c.create_trigger, c, "s4", { type = "pre", operation = "all\0x",
                                                       source = "return function() end" })
      end)
      assert.are.same({ "a\0b", { ["k\0"] = "v\0" } }, (c:execute("echo", "p", "a\0b", { ["k\0"] = "v\0" })))
      -- what a procedure returns must be valid UTF-8 too
      assert(c:create_procedure("bad", "return function() return ('\\255') end"))
      unchanged(function() H.fails(400, c:execute("bad", "p")) end)
    end)

    it("gives 400 for data options holding NUL: etags, filters, trigger names", function()
      local etag = c:read("a", "p")._etag
      unchanged(function()
        H.fails(400, c:replace({ id = "a", pk = "p", n = 9 }, { if_match = etag .. "\0junk" }))
        H.fails(400, c:delete("a", "p", { if_match = etag .. "\0" }))
        H.fails(400, c:read("a", "p", { if_none_match = etag .. "\0" }))
        H.fails(400, c:patch("a", "p", { { op = "set", path = "/n", value = 9 } },
                             { filter = "FROM c WHERE true\0 AND false" }))
        H.fails(400, c:batch("p", { { op = "replace", doc = { id = "a", pk = "p" }, if_match = etag .. "\0" } }))
        H.fails(400, c:batch("p", { { op = "patch", id = "a", ops = { { op = "set", path = "/n", value = 9 } },
                                      filter = "FROM c WHERE true\0 AND false" } }))
      end)
      assert(c:replace({ id = "a", pk = "p", n = 9 }, { if_match = etag }))
    end)

    it("raises for option names and enum values holding NUL (a typo must not pass)", function()
      unchanged(function()
        raises("unknown option", c.read, c, "a", "p", { ["if_none_match\0x"] = "y" })
        raises("unknown option", c.create, c, { id = "o", pk = "p" }, { ["if_match\0"] = "y" })
        raises("unknown option", c.query, c, "SELECT * FROM c", nil, { ["max_items\0"] = 1 })
        raises("unknown option", regolith.open, path, { ["sync\0x"] = "full" })
        raises("must not contain NUL", regolith.open, path, { sync = "full\0x" })
        raises("must", c.changes, c, { mode = "latest\0" })
      end)
    end)

    it("refuses field names holding NUL in patch and batch operations with 400", function()
      unchanged(function()
        H.fails(400, c:patch("a", "p", { { op = "set", path = "/n", value = 5, ["op\0x"] = "remove" } }))
        H.fails(400, c:batch("p", { { op = "read", id = "a", ["if_match\0"] = "x" } }))
      end)
    end)

    it("raises for file system paths holding NUL", function()
      raises("must not contain NUL", regolith.open, path .. "\0x")
      raises("must not contain NUL", db.backup, db, H.tmpdir() .. "\0x")
    end)
  end)

  describe("huge batch and patch lists", function()
    it("refuses them before doing any work", function()
      unchanged(function()
        local ops = {}
        for i = 1, 100000 do ops[i] = { op = "upsert", doc = { id = "x" .. i, pk = "p" } } end
        H.fails(400, c:batch("p", ops))
        ops[102] = nil
        for i = 102, 100000 do ops[i] = nil end
        H.fails(400, c:batch("p", ops))        -- 101
        H.fails(400, c:batch("p", {}))
        local pops = {}
        for i = 1, 100000 do pops[i] = { op = "set", path = "/x" .. i, value = i } end
        H.fails(400, c:patch("a", "p", pops))
        for i = 12, 100000 do pops[i] = nil end
        H.fails(400, c:patch("a", "p", pops))  -- 11
        H.fails(400, c:patch("a", "p", {}))
      end)
    end)

    it("fails a batch as a whole at its first bad op, however late, leaving nothing", function()
      unchanged(function()
        local ops = {}
        for i = 1, 99 do ops[i] = { op = "upsert", doc = { id = "y" .. i, pk = "p" } } end
        ops[100] = { op = "upsert", doc = { id = "bad/id", pk = "p" } }
        local _, _, status, results = c:batch("p", ops)
        assert.are.equal(400, status)
        assert.are.equal(424, results[1].status)
        assert.are.equal(400, results[100].status)
      end)
    end)
  end)

  describe("unknown options in every options table", function()
    it("raise, naming the option", function()
      unchanged(function()
        local bogus = { bogus = 1 }
        local function nop() end
        raises("unknown option 'bogus'", regolith.open, path, bogus)
        raises("unknown option 'bogus'", db.create_container, db, "d", { partition_key = "/pk", bogus = 1 })
        raises("unknown option 'bogus'", db.create_container, db, "d", { partition_key = "/pk", indexing = bogus })
        raises("unknown option 'bogus'", db.create_container, db, "d", { partition_key = "/pk", change_feed = bogus })
        raises(nil, db.create_container, db, "d", { partition_key = "/pk",
          indexing = { composite = { { { path = "/a", order = "ascending", bogus = 1 },
                                       { path = "/b" } } } } })
        raises("unknown option 'bogus'", c.create, c, { id = "o", pk = "p" }, bogus)
        raises("unknown option 'bogus'", c.replace, c, { id = "a", pk = "p" }, bogus)
        raises("unknown option 'bogus'", c.upsert, c, { id = "a", pk = "p" }, bogus)
        raises("unknown option 'bogus'", c.read, c, "a", "p", bogus)
        raises("unknown option 'bogus'", c.delete, c, "a", "p", bogus)
        raises("unknown option 'bogus'", c.patch, c, "a", "p", { { op = "set", path = "/n", value = 1 } }, bogus)
        raises("unknown option 'filter'", c.upsert, c, { id = "a", pk = "p" }, { filter = "FROM c WHERE true" })
        raises("unknown option 'bogus'", c.query, c, "SELECT * FROM c", nil, bogus)
        raises("unknown option 'bogus'", c.query_rows, c, "SELECT * FROM c", nil, bogus)
        raises("unknown option 'bogus'", c.changes, c, bogus)
        raises("unknown option 'bogus'", c.create_trigger, c, "t9", { type = "pre", source = "", bogus = 1 })
        raises("unknown option 'bogus'", c.replace_trigger, c, "t", { type = "pre", source = "", bogus = 1 })
        raises("unknown option 'bogus'", db.processor, db, { name = "pr", source = "c", handler = nop, bogus = 1 })
        raises("unknown option 'bogus'", db.run_processors, db, bogus)
        local p = assert(db:processor{ name = "pr", source = "c", handler = nop })
        raises("unknown option 'bogus'", p.run, p, bogus)
        p:close()
      end)
    end)

    it("raise inside scripts too, failing the call with 400 and writing nothing", function()
      local cases = {
        "ctx:read('a', { bogus = 1 })",
        "ctx:create({ id = 'n', pk = 'p' }, { bogus = 1 })",
        "ctx:replace({ id = 'a', pk = 'p' }, { bogus = 1 })",
        "ctx:upsert({ id = 'a', pk = 'p' }, { filter = 'FROM c WHERE true' })",
        "ctx:delete('a', { bogus = 1 })",
        "ctx:patch('a', { { op = 'set', path = '/n', value = 1 } }, { bogus = 1 })",
        "ctx:query('SELECT * FROM c', nil, { bogus = 1 })",
        "ctx:query('SELECT * FROM c', nil, { ['max_items\\0'] = 1 })",
      }
      for i, call in ipairs(cases) do
        assert(c:create_procedure("o" .. i, "return function(ctx) assert(ctx:upsert({ id = 'w', pk = 'p' })) " ..
                                            call .. " end"))
      end
      unchanged(function()
        for i = 1, #cases do
          local msg = H.fails(400, c:execute("o" .. i, "p"))
          assert.matches("unknown option", msg, 1, true)
        end
      end)
    end)
  end)

  describe("continuation tokens", function()
    local function tokens()
      for i = 1, 6 do assert(c:upsert({ id = "t" .. i, pk = "p", n = i })) end
      local _, qi = assert(c:query("SELECT * FROM c ORDER BY c.n", nil, { max_items = 2 }))
      local _, fi = assert(c:changes{ max_items = 2 })
      return qi.continuation, fi.continuation
    end

    it("refuses altered, cut, extended, foreign and malformed tokens with 400", function()
      local qt, ft = tokens()
      local other = H.open()
      local oc = assert(other:create_container("c", { partition_key = "/pk" }))
      for i = 1, 6 do assert(oc:upsert({ id = "t" .. i, pk = "p", n = i })) end
      local _, oqi = assert(oc:query("SELECT * FROM c ORDER BY c.n", nil, { max_items = 2 }))
      local _, ofi = assert(oc:changes{ max_items = 2 })
      unchanged(function()
        local q = function(t) return c:query("SELECT * FROM c ORDER BY c.n", nil, { max_items = 2, continuation = t }) end
        local f = function(t) return c:changes{ max_items = 2, continuation = t } end
        for _, bad in ipairs({ "", "x", NUL, BADUTF8, ("A"):rep(5000), "====", "AQ==" }) do
          H.fails(400, q(bad))
          H.fails(400, f(bad))
        end
        for _, pair in ipairs({ { q, qt, oqi.continuation }, { f, ft, ofi.continuation } }) do
          local read, tok, foreign = pair[1], pair[2], pair[3]
          H.fails(400, read(tok:sub(1, -2)))
          H.fails(400, read(tok .. "A"))
          H.fails(400, read(tok .. "\0junk"))
          H.fails(400, read("B" .. tok:sub(2)))
          H.fails(400, read(foreign))             -- same data, another database
        end
        H.fails(400, q(ft))                       -- a feed token for a query
        H.fails(400, f(qt))
        H.fails(400, c:query("SELECT * FROM c ORDER BY c.n DESC", nil, { continuation = qt }))
        H.fails(400, c:changes{ mode = "all_versions", continuation = ft })
        H.fails(400, c:changes{ partition_key = "p", continuation = ft })
      end)
      other:close()
    end)

    it("accepts only the text it made: a token decoding to the same bytes is refused", function()
      -- tokens of several lengths (positions at ids, and partition keys,
      -- of several lengths): at least one of each kind has unused bits
      for i = 1, 6 do assert(c:upsert({ id = ("u"):rep(i), pk = ("k"):rep(i), n = i })) end
      local query = function(t) return c:query("SELECT * FROM c", nil, { max_items = 2, continuation = t }) end
      local feed = function(t) return c:changes{ max_items = 2, continuation = t } end
      local found = { 0, 0 }
      for i = 1, 6 do
        local _, qi = assert(c:query("SELECT * FROM c", nil, { max_items = i }))
        local _, fi = assert(c:changes{ max_items = 1, partition_key = ("k"):rep(i) })
        for k, pair in ipairs({ { qi.continuation, query }, { fi.continuation, feed } }) do
          local variant = pair[1] and same_bytes_variant(pair[1])
          if variant then
            found[k] = found[k] + 1
            assert(pair[2](pair[1]))
            H.fails(400, pair[2](variant))
          end
        end
      end
      assert.is_true(found[1] > 0, "no query token with unused bits to alter")
      assert.is_true(found[2] > 0, "no feed token with unused bits to alter")
    end)
  end)
end)
