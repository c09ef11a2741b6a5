-- The command's output modes and the shell on a terminal (docs/cli.md):
-- --format table, .mode, .schema, .timer, Tab completion and Ctrl-C in a
-- real pseudo-terminal (util-linux's script), the messages of empty
-- lists, and errors on a line of their own beside the progress bar.
local H = require "helper"
local regolith = require "regolith"

local sh_quote, slurp, run = H.sh_quote, H.slurp, H.regolith

local function lines(text)
  local t = {}
  for line in text:gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

-- On a terminal: `command` runs in a pseudo-terminal (script -qfec) fed
-- from a FIFO; each step writes its text once the screen so far matches
-- its `after` pattern (a grep -E expression), so that the keys reach the
-- program when a person's would.  Returns the screen (all that was
-- printed) with the terminal's \r removed, and the command's exit code.
-- Under `make check`, `script` runs without the sanitizer's preloaded
-- runtime (its own leaks are not ours to find), and the shell inside it
-- without the leak check: lua-readline does not free the lines and
-- completions readline gives it.
local function outside_check(command)
  local preload = os.getenv("LD_PRELOAD") or ""
  if not preload:find("asan", 1, true) then return command end
  return ("LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 %s")
    :format(sh_quote(preload), command)
end

local function on_terminal(command, steps)
  local dir = H.tmpdir()
  assert(H.execute("mkdir -p " .. dir .. " && mkfifo " .. dir .. "/in"))
  local parts = {
    "cd " .. sh_quote((assert(io.popen("pwd")):read("*l"))),
    ("(env -u LD_PRELOAD script -qfec %s /dev/null <%s/in >%s/out 2>&1; echo $? >%s/code) &")
      :format(sh_quote(outside_check(command) .. "; echo EXIT=$?"), dir, dir, dir),
    "exec 3>" .. dir .. "/in",
    "wait_for() { n=0; until grep -qE \"$1\" " .. dir .. "/out 2>/dev/null; " ..
      "do n=$((n+1)); [ $n -gt 300 ] && { echo TIMEOUT \"$1\" >&2; return 1; }; " ..
      "sleep 0.1; done; }",
  }
  for _, s in ipairs(steps) do
    if s.after then parts[#parts + 1] = "wait_for " .. sh_quote(s.after) .. " || exit 1" end
    parts[#parts + 1] = "printf " .. sh_quote(s.keys) .. " >&3"
  end
  parts[#parts + 1] = "wait_for 'EXIT=' || exit 1"
  parts[#parts + 1] = "exec 3>&-; wait"
  local ok = H.execute(table.concat(parts, "\n"))
  local raw = slurp(dir .. "/out")
  local screen = raw:gsub("\r", ""):gsub("\27%[%?2004[hl]", "")
  assert(ok, "the terminal session did not finish; screen:\n" .. screen)
  return screen, tonumber(screen:match("EXIT=(%d+)")), raw
end

local have_script = H.execute("command -v script >/dev/null && command -v mkfifo >/dev/null")
local have_readline = pcall(require, "readline")
local tty_it = (have_script and have_readline) and it or pending

local function sample()
  local db, path = H.open()
  local c = assert(db:create_container("posts", { partition_key = "/postId",
    physical_partitions = 2, unique_keys = { { "/slug" } }, default_ttl = -1,
    indexing = { composite = { { { path = "/postId" },
      { path = "/n", order = "descending" } } } } }))
  for i = 1, 3 do
    assert(c:create({ id = "i" .. i, postId = "p" .. (i % 2), n = i,
                      slug = "s" .. i, tags = { "a", "b" } }))
  end
  assert(c:create_procedure("bump", "return function(ctx) return 1 end"))
  assert(db:create_container("users", { partition_key = "/id" }))
  db:close()
  return path
end

describe("regolith command output", function()
  after_each(H.cleanup)

  it("prints query rows as an aligned table with --format table", function()
    local path = sample()
    local r = run("query", path, "posts",
      "SELECT c.id, c.n, c.tags FROM c ORDER BY c.n", "--format", "table")
    assert.equal(0, r.code, r.err)
    assert.same({ "id | n | tags",
                  "---+---+----------",
                  'i1 | 1 | ["a","b"]',
                  'i2 | 2 | ["a","b"]',
                  'i3 | 3 | ["a","b"]' }, lines(r.out))
    r = run("query", path, "posts", "SELECT VALUE c.n FROM c ORDER BY c.n",
      "--format", "table")
    assert.same({ "value", "-----", "1", "2", "3" }, lines(r.out))
    -- --json is --format json, the query's default
    local a = run("query", path, "posts", "SELECT * FROM c ORDER BY c.n", "--json")
    local b = run("query", path, "posts", "SELECT * FROM c ORDER BY c.n")
    assert.equal(b.out, a.out)
    assert.equal("i1", regolith.json.decode(lines(a.out)[1]).id)
    assert.equal(2, run("query", path, "posts", "SELECT 1", "--format", "csv").code)
  end)

  it("takes --format json and --json alike in containers, stats and processors", function()
    local path = sample()
    local a = run("containers", path, "--format", "json")
    assert.equal(0, a.code, a.err)
    assert.equal(a.out, run("containers", path, "--json").out)
    assert.equal("posts", regolith.json.decode(lines(a.out)[1]).name)
    assert.matches("^container", run("containers", path, "--format", "table").out)
    assert.equal(run("stats", path, "--json").out, run("stats", path, "--format", "json").out)
  end)

  it("creates a container with --spec, as import does, or with the spec alone", function()
    local path = H.tmpdir()
    local r = run("create-container", path, "a", "--spec", '{"partition_key": "/k"}')
    assert.equal(0, r.code, r.err)
    assert.equal(0, run("create-container", path, "b", '{"partition_key": "/k"}').code)
    r = run("create-container", path, "c")
    assert.equal(2, r.code)
    assert.matches("needs the spec: %-%-spec", r.err)
    r = run("create-container", path, "c", '{"partition_key": "/k"}', "--spec", '{"partition_key": "/k"}')
    assert.equal(2, r.code)
    assert.matches("give the spec once", r.err)
    assert.same({ "a", "b" }, lines(run("shell", path, { input = ".containers\n" }).out))
  end)

  it("says so when a list is empty", function()
    local path = sample()
    local r = run("processors", path, "posts")
    assert.equal(0, r.code)
    assert.equal("", r.out)
    assert.equal("no processors on 'posts'\n", r.err)
    r = run("triggers", "list", path, "posts")
    assert.equal("no triggers on 'posts'\n", r.err)
    assert.equal("bump\n", run("procedures", "list", path, "posts").out)
    assert.equal("no procedures on 'users'\n", run("procedures", "list", path, "users").err)
    -- -q keeps stderr quiet
    assert.equal("", run("-q", "processors", path, "posts").err)
    local empty = H.tmpdir()
    run("create-container", empty, "x", "--spec", '{"partition_key": "/k"}')
    run("delete-container", empty, "x")
    assert.equal("no containers\n", run("containers", empty).err)
    assert.equal("(no containers)\n", run("shell", empty, { input = ".containers\n" }).out)
  end)
end)

describe("regolith shell", function()
  after_each(H.cleanup)

  it("switches between a table and JSON lines with .mode", function()
    local path = sample()
    local r = run("shell", path, "posts", { input = table.concat({
      "SELECT c.id, c.n FROM c WHERE c.n < 3 ORDER BY c.n;",
      ".mode table",
      "SELECT c.id, c.n FROM c WHERE c.n < 3 ORDER BY c.n;",
      ".mode", ".mode csv", ".mode json",
      "SELECT VALUE c.n FROM c WHERE c.n = 3;", "" }, "\n") })
    assert.equal(1, r.code)               -- .mode csv failed
    local out = lines(r.out)
    assert.same({ '{"id":"i1","n":1}', '{"id":"i2","n":2}' }, { out[1], out[2] })
    assert.matches("^%-%- 2 row%(s%)", out[3])
    assert.same({ "id | n", "---+--", "i1 | 1", "i2 | 2" },
      { out[4], out[5], out[6], out[7] })
    assert.equal("table", out[9])
    assert.equal("error: .mode takes table or json", out[10])
    assert.equal("3", out[11])
    -- --format chooses the first mode
    r = run("shell", path, "posts", "--format", "table",
      { input = "SELECT VALUE c.n FROM c WHERE c.n = 3;\n" })
    assert.same({ "value", "-----", "3" }, { lines(r.out)[1], lines(r.out)[2], lines(r.out)[3] })
  end)

  it("describes a container with .schema: key, policy, unique keys, TTL, throughput, scripts", function()
    local path = sample()
    local r = run("shell", path, { input = ".schema posts\n.schema\n.use users\n.schema\n.schema nope\n" })
    local out = lines(r.out)
    assert.equal("container posts", out[1])
    local text = r.out
    assert.matches("partition key%s+/postId\n", text)
    assert.matches("physical partitions%s+2\n", text)
    assert.matches("items%s+3 %(", text)
    assert.matches("indexing%s+included /%* %(everything%); excluded nothing\n", text)
    assert.matches("composite index%s+%(/postId ASC, /n DESC%)\n", text)
    assert.matches("unique keys%s+%(/slug%)\n", text)
    assert.matches("default TTL%s+on %(items expire by their own ttl%)\n", text)
    assert.matches("throughput%s+none", text)
    assert.matches("procedures%s+bump\n", text)
    assert.matches("error: no container chosen: %.schema NAME", text)
    assert.matches("container users\n%s+partition key%s+/id\n", text)
    assert.matches("default TTL%s+off\n", text)
    assert.matches("error: .*%(status 404%)", text)
  end)

  it("prints each statement's time with .timer on, and not after .timer off", function()
    local path = sample()
    local r = run("shell", path, "posts", { input = table.concat({
      ".timer on", "SELECT VALUE 1 FROM c WHERE c.n = 1;", ".timer",
      ".timer off", "SELECT VALUE 2 FROM c WHERE c.n = 1;", ".timer maybe", "" }, "\n") })
    local out = lines(r.out)
    assert.equal("1", out[1])
    assert.matches("^%-%- 1 row", out[2])
    assert.matches("^%-%- time: real %d+ ms, cpu [%d.]+ ms$", out[3])
    assert.equal("on", out[4])
    assert.equal("2", out[5])
    assert.matches("^%-%- 1 row", out[6])
    assert.equal("error: .timer takes on or off", out[7])
    assert.equal(1, r.code)
  end)

  tty_it("cancels the statement being typed on Ctrl-C and goes on, as sqlite3 and psql do", function()
    local path = sample()
    local screen, code = on_terminal(("REGOLITH_HISTORY=%s bin/regolith shell %s posts")
      :format(H.tmpdir(), path), {
      { after = "posts> ", keys = "SELECT VALUE c.n FROM c\n" },
      { after = "\\.\\.\\.> ", keys = "\3" },
      { after = "\\^C", keys = "SELECT VALUE 41 + 1 FROM c WHERE c.n = 1;\n" },
      { after = "row\\(s\\)", keys = ".history\n" },
      { after = "2  \\.history", keys = "\4" },
    })
    assert.equal(0, code, screen)
    assert.matches("%.%.%.> %^C\n", screen)
    -- the cancelled statement neither ran nor went into the history
    assert.matches("\n42%s*\n", screen)
    assert.matches("   1  SELECT VALUE 41 %+ 1 FROM c WHERE c%.n = 1;\n   2  %.history", screen)
    assert.not_matches("SELECT VALUE c%.n FROM c;", screen)
  end)

  tty_it("completes dot commands and container names with Tab", function()
    local path = sample()
    local screen, code = on_terminal(("REGOLITH_HISTORY=%s bin/regolith shell %s")
      :format(H.tmpdir(), path), {
      { after = ":> ", keys = ".sch\tpo\t\n" },
      { after = "triggers ", keys = "SELECT VALUE COUNT(1) FROM us\t;\n" },
      { after = "row\\(s\\)", keys = ".quit\n" },
    })
    assert.equal(0, code, screen)
    assert.matches("container posts\n", screen)
    assert.matches("FROM users ;", screen)
  end)
end)

describe("regolith import on a terminal", function()
  after_each(H.cleanup)

  tty_it("prints each rejected line on a line of its own, not onto the progress bar", function()
    local path = H.tmpdir()
    local file = H.tmpdir()
    local f = assert(io.open(file, "wb"))
    for i = 1, 30000 do f:write(('{"id":"i%d","k":%d}\n'):format(i, i % 7)) end
    f:write("not json\n")
    for i = 1, 30000 do f:write(('{"id":"j%d","k":%d}\n'):format(i, i % 7)) end
    f:close()
    local screen, code, raw = on_terminal(("bin/regolith import %s c %s --spec '{\"partition_key\": \"/k\"}'")
      :format(path, file), {})
    assert.equal(3, code, screen)
    -- the bar was drawn, and cleared back to the line's start before the
    -- rejected line was written
    assert.matches("%d+ items, 0 rejected", raw)
    assert.matches("[\r\n]line 30001: invalid JSON", raw)
    assert.not_matches("items/s +line 30001", raw)
    assert.matches("imported 60000 items", screen)
  end)
end)
