-- The JavaScript sandbox (docs/scripts.md, JavaScript): the budgets and the
-- hostile cases of sandbox_spec.lua and sandbox_escape_spec.lua, written in
-- JavaScript.  Every attempt must be stopped with a status, write nothing,
-- and leave the database and the next run as they were.
local regolith = require "regolith"
local H = require "helper"

-- Small limits keep the runaway cases short.
local BUDGET = 20000000
local MEMORY = 8 * 2^20

local json = regolith.json

describe("the JavaScript sandbox", function()
  local db, c, n
  before_each(function()
    db = H.open({ script_budget = BUDGET, script_memory = MEMORY })
    c = assert(db:create_container("things", { partition_key = "/pk" }))
    n = 0
  end)
  after_each(function()
    db:close()
    H.cleanup()
  end)

  -- Runs `body` as the body of a JavaScript procedure in partition "p";
  -- the procedure's response body is what `result(v)` sets.
  local function run(body, ...)
    n = n + 1
    local name = "js" .. n
    assert(c:create_procedure(name, "function " .. name .. "() {\n" ..
      "var coll = getContext().getCollection(), self = coll.getSelfLink();\n" ..
      "function result(v) { getContext().getResponse().setBody(v); }\n" ..
      body .. "\n}"))
    return c:execute(name, "p", ...)
  end

  -- The database still works and a fresh run sees clean globals.
  local function usable()
    assert.are.same({ 3, "X", "undefined", "undefined", "function" }, (run([[
      result([1 + 2, "x".toUpperCase(), typeof leaked, typeof Array.prototype.evil,
              typeof JSON.parse]);]])))
    assert(c:upsert({ id = "after", pk = "p" }))
    assert(c:read("after", "p"))
    assert(db:verify())
  end

  -- Runs `body` after a write; the call must fail with one of `statuses`
  -- and the write must be gone.  Returns the message.
  local function stopped(statuses, body)
    local set = {}
    for _, s in ipairs(statuses) do set[s] = true end
    local ok, msg, status = run([[
      coll.createDocument(self, { id: "x", pk: "p" });
      leaked = true;
      Array.prototype.evil = 1;
    ]] .. body)
    assert(ok == nil, "escaped: returned " .. tostring(ok))
    assert(set[status], ("status %s: %s"):format(tostring(status), tostring(msg)))
    H.fails(404, c:read("x", "p"))
    return msg
  end

  describe("globals", function()
    it("offers ECMAScript's built-ins and Cosmos DB's API, and not eval, Function or Duktape", function()
      local r = assert(run([[
        var out = {};
        var names = ["Object", "Array", "String", "Number", "Boolean", "Math", "JSON",
                     "Date", "RegExp", "Error", "parseInt", "isNaN", "encodeURIComponent",
                     "getContext", "__", "ErrorCodes", "console",
                     "Duktape", "require", "print", "alert", "setTimeout", "process"];
        for (var i = 0; i < names.length; i++) { var nm = names[i]; out[nm] = typeof this[nm]; }
        result(out);]]))
      for _, name in ipairs({ "Object", "Array", "String", "Math", "JSON", "Date",
                              "RegExp", "Error", "parseInt", "getContext" }) do
        assert.are.equal("function", r[name] == "object" and "function" or r[name], name)
      end
      assert.are.equal("object", r.__)
      assert.are.equal("object", r.ErrorCodes)
      for _, name in ipairs({ "Duktape", "require", "print", "alert", "setTimeout", "process" }) do
        assert.are.equal("undefined", r[name], name)
      end
    end)

    it("refuses eval and the Function constructor, however they are reached", function()
      for _, expr in ipairs({ "eval('1 + 1')", "(0, eval)('1')", "new Function('return 1')()",
                              "Function('return 1')()",
                              "(function () {}).constructor('return 1')()",
                              "Object.getPrototypeOf(function () {}).constructor('return 1')()" }) do
        local ok, msg, status = run("result(" .. expr .. ");")
        assert.is_nil(ok, expr)
        assert.are.equal(400, status, expr)
        assert.matches("not available to regolith's scripts", msg, 1, true)
      end
      usable()
    end)

    it("keeps what one run does to globals and built-ins from every other run", function()
      assert(run([[
        leaked = 1;
        Array.prototype.evil = 1;
        String.prototype.toUpperCase = function () { return "pwned"; };
        JSON.parse = null;
        Object.prototype.polluted = true;
        Math.random = function () { return 4; };
        getContext = null;
        result(1);]]))
      local r = assert(run([[
        result([typeof leaked, [].evil, "a".toUpperCase(), typeof JSON.parse,
                ({}).polluted, Math.random() < 1, typeof getContext]);]]))
      assert.are.same({ "undefined", regolith.null, "A", "function", regolith.null, true,
                        "function" }, r)
    end)

    it("names the ECMAScript 2015 syntax it does not run, when the script is stored", function()
      local cases = {
        { "var f = (a) => a + 1;", "an arrow function" },
        { "let x = 1;", "a let declaration" },
        { "class A {}", "a class declaration" },
        { "var s = `x${1}`;", "a template literal" },
        { "var a = [...[1, 2]];", "spread or rest syntax" },
        { "for (var x of [1]) {}", "a for...of loop" },
        { "var {a, b} = {a: 1};", "a destructuring declaration" },
        { "function g(a = 1) { return a; }", "a default parameter value" },
        { "async function g() {}", "an async function" },
        { "function* g() { yield 1; }", "a generator function" },
      }
      for i, case in ipairs(cases) do
        local ok, msg, status = c:create_procedure("es" .. i,
          "function es" .. i .. "() {\n  var y = 1;\n  " .. case[1] .. "\n}")
        assert.is_nil(ok, case[1])
        assert.are.equal(400, status)
        assert.matches("line 3 uses " .. case[2], msg, 1, true)
        assert.matches("ECMAScript 5", msg, 1, true)
      end
      -- plain syntax errors keep the engine's message
      local ok, msg, status = c:create_procedure("bad", "function bad() { var = ; }")
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("does not compile: SyntaxError", msg, 1, true)
      assert.are.same({}, c:procedures())
    end)
  end)

  describe("the instruction budget", function()
    it("stops an infinite loop with 408, writes nothing, and leaves the database usable", function()
      assert.matches("exceeded its instruction budget", stopped({ 408 }, "while (true) {}"), 1, true)
      usable()
    end)

    it("cannot be caught: not by catch, finally, or a catch that loops", function()
      stopped({ 408 }, [[
        try { while (true) {} } catch (e) { coll.createDocument(self, { id: "caught", pk: "p" }); }]])
      stopped({ 408 }, [[
        try { while (true) {} } finally { for (;;) { coll.createDocument(self, { id: "f", pk: "p" }); } }]])
      stopped({ 408 }, [[
        for (;;) { try { while (true) {} } catch (e) {} }]])
      H.fails(404, c:read("caught", "p"))
      H.fails(404, c:read("f", "p"))
      usable()
    end)

    it("stops regular-expression bombs", function()
      local t = os.time()
      stopped({ 408 }, [[
        var s = new Array(40).join("a");
        /^(a+)+$/.test(s + "b");]])
      stopped({ 408 }, [[
        var s = new Array(30).join("x");
        for (;;) /(x+x+)+y/.exec(s);]])
      assert.is_true(os.time() - t < 60)
      usable()
    end)

    it("charges the Array methods that walk a length before they walk it", function()
      local t = os.time()
      for _, body in ipairs({
        "Array.prototype.indexOf.call({ length: 4294967295 }, 1);",
        "var a = []; a.length = 4294967295; a.lastIndexOf(1);",
        "var a = []; a.length = 4294967295; a.join(',');",
        "var a = []; a.length = 4294967295; a.reverse();",
        "var a = []; a.length = 4294967294; a.unshift(1);",
        "Array.prototype.forEach.call({ length: 4294967295 }, function () {});",
        "var a = []; a.length = 4294967295; a.sort();",
        "''.repeat(1073741824);",
        "var a = []; a.length = 4294967295; [].concat(a);",
      }) do
        assert.matches("exceeded its instruction budget", stopped({ 408 }, body), 1, true)
      end
      assert.is_true(os.time() - t < 30)
      usable()
    end)

    it("stops a loop of single slow instructions by the deadline (comparing huge strings)", function()
      local t = os.clock()
      stopped({ 408 }, [[
        var a = new Array(1 << 20).join("x"), b = a + "b"; a = a + "a";
        var n = 0;
        for (;;) { if (a < b) n++; }]])
      assert.is_true(os.clock() - t < 30)
      usable()
    end)

    it("charges storage operations: a loop of them is stopped", function()
      stopped({ 408 }, [[
        for (var i = 0; ; i++) coll.upsertDocument(self, { id: "u", pk: "p", n: i });]])
      usable()
    end)

    it("applies to a Proxy's traps and to getters", function()
      stopped({ 408 }, [[
        var p = new Proxy({}, { get: function () { for (;;) {} } });
        result(p.x);]])
      stopped({ 408 }, [[
        var o = {}; Object.defineProperty(o, "x", { enumerable: true, get: function () { for (;;) {} } });
        JSON.stringify(o);]])
      usable()
    end)

    it("runs an error's toString and getters under the budget", function()
      stopped({ 408 }, [[
        throw { toString: function () { for (;;) {} } };]])
      stopped({ 408 }, [[
        var e = new Error("x");
        Object.defineProperty(e, "number", { get: function () { for (;;) {} } });
        throw e;]])
      usable()
    end)

    it("leaves the next run its whole budget after a stopped one", function()
      stopped({ 408 }, "while (true) {}")
      assert.are.equal(1000000, (run([[
        var s = 0; for (var i = 0; i < 1000000; i++) s++; result(s);]])))
    end)

    it("lets a script use most of its budget", function()
      assert.are.equal(200000, (run([[
        var s = 0; for (var i = 0; i < 200000; i++) s += Math.abs(1); result(s);]])))
    end)
  end)

  describe("the memory budget", function()
    it("stops a memory bomb with 413, writes nothing, and leaves the database usable", function()
      assert.matches("exceeded its memory budget", stopped({ 413 }, [[
        var a = []; for (;;) a.push({ x: "y" + a.length });]]), 1, true)
      usable()
    end)

    it("cannot be caught", function()
      stopped({ 413 }, [[
        var keep = [];
        for (;;) { try { var s = "x"; for (;;) { s = s + s; keep.push(s); } } catch (e) { keep.push(e); } }]])
      usable()
    end)

    it("stops huge strings, arrays and buffers", function()
      for _, body in ipairs({
        "var s = 'x'.repeat(100000000);",
        "var s = new Array(100000000).join('x');",
        "var b = new ArrayBuffer(100000000);",
        "var a = new Array(50000000); for (var i = 0; i < a.length; i++) a[i] = i;",
      }) do
        stopped({ 413, 408 }, body)
      end
      usable()
    end)

    it("stops JSON of a value shared at every level (2^40 nodes) before the host's memory", function()
      -- (by whichever budget runs out first: the conversion is charged too)
      for _, body in ipairs({
        "var t = [1]; for (var i = 0; i < 40; i++) t = [t, t]; JSON.stringify(t);",
        "var t = [1]; for (var i = 0; i < 40; i++) t = [t, t]; result(t);",
        "var t = ['x']; for (var i = 0; i < 40; i++) t = [t, t]; coll.createDocument(self, { id: 'big', pk: 'p', t: t });",
      }) do
        stopped({ 413, 408 }, body)
      end
      usable()
    end)

    it("lets garbage be collected: allocating much over time is not a bomb", function()
      assert.are.equal(50000, (run([[
        var n = 0; for (var i = 0; i < 50000; i++) { var o = { a: [i, i], s: "v" + i }; n++; }
        result(n);]])))
    end)

    it("ends deep recursion with an error and leaves the database usable", function()
      local ok, msg, status = run("function f(n) { return f(n + 1) + 1; } f(0);")
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("RangeError", msg, 1, true)
      ok, msg, status = run([[
        var d = []; for (var i = 0; i < 2000; i++) d = [d];
        coll.createDocument(self, { id: "deep", pk: "p", d: d });]])
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("recursion limit", msg, 1, true)
      usable()
    end)
  end)

  describe("reaching the host, another partition or another run", function()
    it("writes only to the bound partition", function()
      local ok, msg, status = run([[
        coll.createDocument(self, { id: "o", pk: "other" }, function (err) { if (err) throw err; });]])
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("scripts cannot reference partition keys other than the one", msg, 1, true)
      ok, msg, status = run([[
        coll.queryDocuments("dbs/x/colls/other", "SELECT * FROM c");]])
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("outside current collection", msg, 1, true)
      H.fails(404, c:read("o", "other"))
    end)

    it("rolls back everything when an operation's error is thrown, with that error's status", function()
      assert(c:create({ id = "dup", pk = "p" }))
      local ok, msg, status = run([[
        coll.createDocument(self, { id: "first", pk: "p" });
        coll.createDocument(self, { id: "dup", pk: "p" }, function (err) { if (err) throw err; });]])
      assert.is_nil(ok)
      assert.are.equal(409, status)
      H.fails(404, c:read("first", "p"))
    end)

    it("makes getContext().abort end the run, whatever catches it", function()
      local ok, msg, status = run([[
        coll.createDocument(self, { id: "a", pk: "p" });
        try { getContext().abort(new Error("stop here")); }
        catch (e) { coll.createDocument(self, { id: "b", pk: "p" }); result("caught"); }]])
      assert.is_nil(ok)
      assert.are.equal(400, status)
      assert.matches("aborted: stop here", msg, 1, true)
      H.fails(404, c:read("a", "p"))
      H.fails(404, c:read("b", "p"))
      usable()
    end)

    it("cuts console.log at 256 KiB a run", function()
      local _, info = assert(run([[
        var line = new Array(1025).join("x");
        for (var i = 0; i < 1000; i++) console.log(line);
        result(1);]]))
      local total = 0
      for _, l in ipairs(info.log) do total = total + #l end
      assert.is_true(total <= 256 * 1024 and total > 200 * 1024)
    end)
  end)

  describe("the heap", function()
    -- In a process of its own, which no other heap shares: the watchdog
    -- thread runs while a heap exists, and closing the database frees its
    -- heap, which ends the thread (joined: it never outlives the module).
    it("goes with the database, and the watchdog thread with the last heap", function()
      local file = H.script(([[
        local regolith = require "regolith"
        local function threads()
          local f = assert(io.open("/proc/self/stat"))
          local pid = f:read("*l"):match("^(%%d+)")
          f:close()
          local n = 0
          local p = assert(io.popen("ls /proc/" .. pid .. "/task"))
          for _ in p:lines() do n = n + 1 end
          p:close()
          return n
        end
        local before = threads()
        local db = assert(regolith.open(%q))
        local c = assert(db:create_container("c", { partition_key = "/pk" }))
        assert(c:create_procedure("p", "function p() { getContext()" ..
          ".getResponse().setBody(1 + 2); }"))
        assert(assert(c:execute("p", "x")) == 3)
        local during = threads()
        db:close()
        io.write(before, " ", during, " ", threads())
      ]]):format(H.tmpdir()))
      local out = H.run(H.lua_cmd(file) .. " 2>&1")
      local before, during, after = out:match("^(%d+) (%d+) (%d+)$")
      assert(before, out)
      assert.are.equal(tonumber(before) + 1, tonumber(during))
      assert.are.equal(tonumber(before), tonumber(after))
    end)
  end)

  describe("random scripts", function()
    -- Token soup from the language's pieces, with a fixed seed: whatever a
    -- source is, storing and running it answers a value or a status, and
    -- the database stays usable.
    it("answer a value or 400, 408, 409, 413 for each of 400 random sources, never a crash", function()
      local pieces = { "var x = ", "x", "y", "(", ")", "{", "}", "[", "]", ";", ",", "+", "*",
        "=", "==", "<", "for (;;) ", "while (x) ", "if (y) ", "else ", "function (a) ",
        "return ", "try ", "catch (e) ", "finally ", "throw ", "new ", "Array", "Object",
        "String", "JSON.stringify", "JSON.parse", "'s'", "1", "0", "-1", "1e308", "null",
        "undefined", "this", ".length", ".push", ".join", ".repeat", ".concat", ".sort",
        "/a+/g", ".replace", "getContext()", ".getCollection()", ".getResponse()",
        ".setBody", "__", ".createDocument", ".queryDocuments", "__.getSelfLink()",
        "{id: 'r', pk: 'p'}", "'SELECT * FROM c'", "Proxy", "Reflect", "Symbol()",
        "arguments", "delete ", "typeof ", "in ", "instanceof ", "?", ":", "!", "&&", "||" }
      -- and whole statements, which mostly compile and run
      local statements = { "var a = [1, 2, 3];", "x = x + 1;", "y = String(y) + x;",
        "var o = { k: x, s: y };", "o = JSON.parse(JSON.stringify(o || {}));",
        "for (var i = 0; i < 100; i++) x += i;", "while (x > 0) x = x - 7;",
        "try { null.f(); } catch (e) { y = e.message; }", "a = (a || []).concat([x]);",
        "__.createDocument(__.getSelfLink(), { id: 'k' + x, pk: 'p' }, function (e) {});",
        "__.queryDocuments(__.getSelfLink(), 'SELECT * FROM c', function (e, d) { x = d ? d.length : 0; });",
        "getContext().getResponse().setBody({ x: x, y: y });", "y = y.repeat(3);",
        "x = Math.floor(Math.random() * 10);", "throw new Error('thrown ' + x);",
        "for (;;) { x++; }", "var s = 'q'; while (true) s += s;", "a.sort(function (p, q) { return q - p; });",
        "y = /(a|b)+c/.test(y);", "getContext().abort({ number: 409, message: 'no' });" }
      math.randomseed(30)
      local seen = { ok = 0, [400] = 0, [408] = 0, [409] = 0, [413] = 0 }
      for i = 1, 400 do
        local parts = {}
        if i % 2 == 0 then
          for k = 1, math.random(3, 40) do parts[k] = pieces[math.random(#pieces)] end
        else
          for k = 1, math.random(1, 6) do parts[k] = statements[math.random(#statements)] end
        end
        local src = "function r" .. i .. "(x, y) {\n" .. table.concat(parts, " ") .. "\n}"
        local ok, msg, status = c:create_procedure("r" .. i, src)
        if ok then ok, msg, status = c:execute("r" .. i, "p", 1, "two") end
        if ok ~= nil then seen.ok = seen.ok + 1
        else
          assert(seen[status], ("status %s for %s: %s"):format(tostring(status), src, tostring(msg)))
          seen[status] = seen[status] + 1
        end
      end
      assert.is_true(seen.ok > 0 and seen[400] > 0 and seen[408] > 0)
      usable()
    end)
  end)

  describe("user-defined functions", function()
    it("stop a query whose function loops (408) or hoards memory (413), and keep nothing between queries", function()
      assert(c:create({ id = "a", pk = "p", n = 1 }))
      assert(c:create_udf("spin", "function spin(x) { for (;;) {} }"))
      assert(c:create_udf("hoard", "function hoard(x) { var a = []; for (;;) a.push('xxxxxxxx' + a.length); }"))
      assert(c:create_udf("dirty", "function dirty(x) { var before = typeof Array.prototype.evil; Array.prototype.evil = 1; return before; }"))
      H.fails(408, c:query("SELECT udf.spin(c.n) FROM c"))
      H.fails(413, c:query("SELECT udf.hoard(c.n) FROM c"))
      assert.are.same({ "undefined" }, assert(c:query("SELECT VALUE udf.dirty(c.n) FROM c")))
      assert.are.same({ "undefined" }, assert(c:query("SELECT VALUE udf.dirty(c.n) FROM c")))
    end)
  end)
end)
