-- Shared by the specs: fresh temporary databases, removed afterwards.
local regolith = require "regolith"

local H = {}

-- The host the specs run on.  The suite runs under Lua 5.4 and under
-- LuaJIT (`busted --lua=luajit`); what only Lua 5.4 has (64-bit integers
-- and math.type, utf8, the 5.4 syntax, __len honoured by the table
-- library) is checked only there, each such spec saying why.
H.lua54 = _VERSION == "Lua 5.4"
H.luajit = jit ~= nil

-- Whether a number is an integer as the host tells them: math.type under
-- Lua 5.4; under LuaJIT, whose numbers are all doubles, an integral value
-- (and not -0, which the JSON bridge never gives back).
function H.integer(v)
  if math.type then return math.type(v) == "integer" end
  return type(v) == "number" and v == math.floor(v) and
    (v ~= 0 or 1 / v > 0)
end

-- utf8.char, also on hosts without utf8 (surrogates included, as 5.4).
function H.utf8_char(...)
  if utf8 then return utf8.char(...) end
  local out = {}
  for i, cp in ipairs({ ... }) do
    if cp < 0x80 then out[i] = string.char(cp)
    elseif cp < 0x800 then
      out[i] = string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40)
    elseif cp < 0x10000 then
      out[i] = string.char(0xE0 + math.floor(cp / 0x1000),
        0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
    else
      out[i] = string.char(0xF0 + math.floor(cp / 0x40000),
        0x80 + math.floor(cp / 0x1000) % 0x40,
        0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
    end
  end
  return table.concat(out)
end

-- Runs a shell command; true when it exits with 0 (os.execute answers
-- true under Lua 5.4 and 0 under LuaJIT).
function H.execute(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

-- Runs a shell command; returns its output (stdout) and whether it exited
-- with 0, which io.popen's close does not tell under LuaJIT.
function H.run(cmd)
  local p = assert(io.popen("(" .. cmd .. '); echo "exit=$?"', "r"))
  local all = p:read("*a")
  p:close()
  local out, code = all:match("^(.*)exit=(%d+)\n$")
  return out or all, code == "0"
end

-- Evaluates `source`, a chunk returning a value made of tables, strings,
-- numbers and booleans, under Lua 5.4 itself: in this process when it is
-- Lua 5.4, in a lua5.4 child otherwise.  For specs that hold the sandbox
-- (which follows Lua 5.4 on every host) to Lua 5.4's own behaviour.
function H.lua54_eval(source)
  if H.lua54 then return assert(load(source))() end
  local dump = [[
    local function dump(v)
      local t = type(v)
      if t == "string" then return string.format("%q", v) end
      if t == "number" then
        if math.type(v) == "integer" then return string.format("%d", v) end
        return string.format("%.17g", v)
      end
      if t ~= "table" then return tostring(v) end
      local out = {}
      for k, x in pairs(v) do out[#out + 1] = "[" .. dump(k) .. "]=" .. dump(x) end
      return "{" .. table.concat(out, ",") .. "}"
    end
    io.write("return ", dump((function() ]] .. source .. [[ end)()))]]
  local file = H.script(dump)
  local p = assert(io.popen("lua5.4 " .. file, "r"))
  local out = p:read("*a")
  p:close()
  return assert(loadstring(out))()
end

-- The backend the API specs run against: "local" (a directory, LMDB), or
-- "cluster" (REGOLITH_BACKEND=cluster: a Redis Cluster, REGOLITH_URL
-- naming it, else one started for the run by spec/cluster/support.lua).
-- The specs that describe the API run against both from one source (make
-- cluster-test); a spec of what only a local database has says so with
-- H.local_it (pending on the cluster, with why).
H.backend = os.getenv("REGOLITH_BACKEND") or "local"
H.cluster = H.backend == "cluster"

local cluster_dbs = {}
local fresh = 0

-- The URL of a fresh database on the cluster; the first one of a spec
-- file waits until the cluster is whole (whatever ran before left it).
local whole
function H.cluster_url()
  local C = require "cluster.support"
  local seeds = assert(C.ensure())
  if not whole then
    C.whole()
    whole = true
  end
  fresh = fresh + 1
  return ("redis://%s/h%d_%d_%d"):format(seeds, os.time(), math.random(1e6), fresh)
end

-- it(), or on the cluster backend a pending spec saying why it does not
-- apply there.
function H.local_it(name, why, fn)
  local api = require "busted"
  if H.cluster then
    return api.pending(name .. " [local only: " .. why .. "]")
  end
  return api.it(name, fn)
end

-- it() on the cluster backend, or locally a pending spec saying why it
-- is the cluster's alone (what a cluster refuses that a directory does).
function H.cluster_it(name, why, fn)
  local api = require "busted"
  if not H.cluster then
    return api.pending(name .. " [cluster only: " .. why .. "]")
  end
  return api.it(name, fn)
end

local dirs = {}

-- A new empty directory path under /tmp (not created: open creates it).
function H.tmpdir()
  local name = os.tmpname()
  os.remove(name)
  dirs[#dirs + 1] = name
  return name
end

-- Opens a fresh database; returns db and its path (its URL on the
-- cluster backend).
function H.open(opts)
  local path = H.cluster and H.cluster_url() or H.tmpdir()
  local db = assert(regolith.open(path, opts))
  if H.cluster then cluster_dbs[#cluster_dbs + 1] = path end
  return db, path
end

-- Removes every directory handed out so far (on the cluster backend: every
-- key of the databases opened).
function H.cleanup()
  for i = #dirs, 1, -1 do
    os.execute("rm -rf '" .. dirs[i] .. "'")
    dirs[i] = nil
  end
  if #cluster_dbs > 0 then
    local redis = require "regolith.cluster.redis"
    local C = require "cluster.support"
    local c = assert(redis.connect(C.seeds))
    for _, addr in ipairs(c:primaries()) do c:call_node(addr, "FLUSHALL") end
    c:close()
    cluster_dbs = {}
  end
end

-- The shell command that runs a Lua snippet in a child process with the
-- same module paths (for multi-process specs).
function H.lua_cmd(file)
  return string.format("LUA_PATH='%s' LUA_CPATH='%s' %s %s", package.path,
    package.cpath, H.interpreter(), file)
end

function H.interpreter()
  if jit then return "luajit" end
  return "lua5.4"
end

-- Writes `source` to a temporary file and returns its path.
function H.script(source)
  local path = H.tmpdir() .. ".lua"
  dirs[#dirs + 1] = path
  local f = assert(io.open(path, "w"))
  f:write(source)
  f:close()
  return path
end

-- Starts a child process running `source` (its output and errors on one
-- pipe), with `env` ("NAME=value ...") added to its environment if given:
-- { p = the pipe, pid = its pid } (the shell prints its pid and becomes
-- the child).
function H.spawn(source, env)
  local file = H.script(source)
  local p = assert(io.popen("echo $$; exec env " .. (env and env .. " " or "") ..
                            H.lua_cmd(file) .. " 2>&1", "r"))
  return { p = p, pid = assert(tonumber(p:read("l"))) }
end

-- Reads a child's lines until one matches `pattern`; returns it.
function H.expect(child, pattern)
  while true do
    local line = child.p:read("l")
    assert(line, "the child ended before printing " .. pattern)
    if line:match(pattern) then return line end
  end
end

-- The rest of a child's output, once it has ended.
function H.finish(child)
  local out = child.p:read("a")
  child.p:close()
  return out
end

-- Returns once n requests wait in the write queue of db (queued, their
-- outcome not yet decided): what a spec sets up before it lets a leader
-- go on.
function H.queue_waiting(db, n)
  for _ = 1, 6000 do
    if db:stats().queue.waiting == n then return end
    os.execute("sleep 0.01")
  end
  error(("%d requests never waited in the queue (%d do)"):format(n,
    db:stats().queue.waiting), 2)
end

-- Asserts the nil, message, status shape of an expected failure and
-- returns the message.
function H.fails(status, ok, msg, st, ...)
  assert(ok == nil, "expected a failure, got " .. tostring(ok))
  assert(type(msg) == "string", "expected a message, got " .. tostring(msg))
  assert(st == status, ("expected status %d, got %s (%s)"):format(status,
    tostring(st), msg))
  return msg, ...
end


-- A function that stores `body` as the body of a new procedure of
-- container `c` (`function(ctx, ...) body end`) and runs it in partition
-- "p": what the sandbox specs try, one snippet at a time.
function H.snippets(c)
  local n = 0
  return function(body, ...)
    n = n + 1
    local name = "s" .. n
    assert(c:create_procedure(name, "return function(ctx, ...) " .. body .. " end"))
    return c:execute(name, "p", ...)
  end
end

-- n small documents {id = "i<k>", pk = pk or "p", n = k}, k = 1 .. n.
function H.items(n, pk)
  local t = {}
  for i = 1, n do t[i] = { id = "i" .. i, pk = pk or "p", n = i } end
  return t
end

-- Imports `list` through procedure `name` of container `cont`, a bulk
-- import that returns how many of the documents it was given it wrote
-- (it stops when its operations are no longer accepted: isAccepted,
-- ctx:is_accepted), as Cosmos DB's client calls the sample: again with
-- the rest while a call returns fewer than it was given.  Returns the
-- counts each call returned.
function H.import_all(cont, name, pk, list)
  local counts, left = {}, list
  while #left > 0 do
    local k = assert(cont:execute(name, pk, left))
    assert(k > 0, "a call imported nothing")
    assert(#counts < 1000, "an import that does not end")
    counts[#counts + 1] = k
    local rest = {}
    for i = k + 1, #left do rest[#rest + 1] = left[i] end
    left = rest
  end
  return counts
end

-- {=====================================================================
-- The command (bin/regolith), run as a user runs it
-- ======================================================================
function H.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

function H.slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local text = f:read("*a")
  f:close()
  return text
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
H.sh_quote = sh_quote

-- H.regolith("query", db, "posts", sql, {input = text, lua = "luajit"})
-- -> {code, out, err}: bin/regolith in a child process (under Lua 5.4,
-- its #! line, unless opts.lua names an interpreter), with its stdin
-- from opts.input (else /dev/null) and its stdout and stderr captured.
function H.regolith(...)
  local args, opts = { ... }, {}
  if type(args[#args]) == "table" then opts = table.remove(args) end
  local words = {}
  for i, a in ipairs(args) do words[i] = sh_quote(tostring(a)) end
  local out, err = H.tmpdir(), H.tmpdir()
  local input = opts.input and H.write_file(H.tmpdir(), opts.input) or "/dev/null"
  local cmd = ("%s bin/regolith %s <%s >%s 2>%s; echo $?"):format(
    opts.lua or "", table.concat(words, " "), input, out, err)
  local p = assert(io.popen(cmd))
  local code = tonumber(p:read("*a"):match("(%d+)%s*$"))
  p:close()
  return { code = code, out = H.slurp(out), err = H.slurp(err) }
end
-- }=====================================================================

return H
