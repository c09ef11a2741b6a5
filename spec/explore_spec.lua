-- `regolith explore` and its nginx (docs/explorer.md): whatever ends the
-- command, SIGINT, SIGTERM, SIGHUP or even SIGKILL, its nginx stops and
-- its temporary directory goes; no server is left running without it.
-- Needs nginx with the Lua module and the LuaJIT build (make explorer);
-- pending otherwise.  The page is a stand-in: only the process matters.
local H = require "helper"
local regolith = require "regolith"

-- ports above the explorer's own (EXPLORER_PORT, as make explorer-test
-- takes it; 8079 by default)
local PORT_BASE = (tonumber(os.getenv("EXPLORER_PORT") or "") or 8079) + 10

local have = H.execute("test -x /usr/sbin/nginx && " ..
  "test -f /usr/lib/nginx/modules/ngx_http_lua_module.so && " ..
  "test -f build/luajit/regolith/core.so && command -v curl >/dev/null")
local nginx_it = have and it or function(name)
  pending(name .. " [needs nginx, its Lua module, curl and build/luajit: make explorer]")
end

local slurp = H.slurp

local function wait_until(fn, seconds)
  for _ = 1, seconds * 10 do
    if fn() then return true end
    H.execute("sleep 0.1")
  end
  return fn()
end

-- curl without the sanitizer's runtime that `make check` preloads: with it,
-- curl hangs at its start (a lock of setlocale), and the spec with it
local function http_code(port)
  local out = H.run(("env -u LD_PRELOAD curl -s -o /dev/null -w '%%{http_code}' --max-time 2 " ..
    "http://127.0.0.1:%d/ 2>/dev/null"):format(port))
  return out
end

local function alive(pid) return H.execute("kill -0 " .. pid .. " 2>/dev/null") end

-- Starts the command in the background (in a shell of its own, where
-- SIGINT is not ignored); returns {pid, port, out, err, nginx, prefix}.
local port_n = 0
local function start(db)
  port_n = port_n + 1
  local port = PORT_BASE + port_n
  local ui = H.tmpdir()
  assert(H.execute("mkdir -p " .. ui .. " && echo '<!doctype html><title>x</title>' > " ..
    ui .. "/index.html"))
  local out, err, pidf, codef = H.tmpdir(), H.tmpdir(), H.tmpdir(), H.tmpdir()
  -- a background job of a script, as a service or a CI step starts it:
  -- SIGINT arrives ignored, and the command must still stop on it
  local inner = ("REGOLITH_EXPLORER_UI=%s bin/regolith explore %s --port %d " ..
    ">%s 2>%s & echo $! >%s; wait $!; echo $? >%s"):format(ui, db, port, out,
    err, pidf, codef)
  assert(H.execute(("sh -c '%s' </dev/null >/dev/null 2>&1 &"):format(inner)))
  assert(wait_until(function() return slurp(pidf):match("%d+") end, 10))
  local pid = slurp(pidf):match("%d+")
  -- its own nginx first (the line naming its prefix), then the port: a
  -- server of another program on that port must not pass for it
  assert(wait_until(function()
    return slurp(err):match("runs with (%S+)/nginx%.conf") ~= nil
  end, 20), "the explorer did not start: " .. slurp(err))
  assert(wait_until(function() return http_code(port) == "200" end, 20),
    "the explorer did not answer: " .. slurp(err))
  -- the command says where nginx runs once it answers: wait for the line
  assert(wait_until(function()
    return slurp(err):match("runs with (%S+)/nginx%.conf")
  end, 10), "the command did not say where nginx runs: " .. slurp(err))
  local prefix = slurp(err):match("runs with (%S+)/nginx%.conf")
  local nginx = slurp(prefix .. "/nginx.pid"):match("%d+")
  assert(nginx and alive(nginx))
  return { pid = pid, port = port, out = out, err = err, nginx = nginx,
           prefix = prefix, code = codef }
end

local function assert_all_gone(e, how)
  assert(wait_until(function()
    return not alive(e.nginx) and not alive(e.pid)
  end, 10), how .. ": nginx or the command still runs")
  assert.equal("000", http_code(e.port))
  assert.is_false(H.execute("test -e " .. e.prefix), how .. ": " .. e.prefix .. " is left")
end

describe("regolith explore", function()
  local db
  before_each(function()
    local d
    d, db = H.open()
    assert(d:create_container("c", { partition_key = "/id" }))
    d:close()
  end)
  after_each(H.cleanup)

  for _, sig in ipairs({ "INT", "TERM", "HUP" }) do
    nginx_it(("stops its nginx and removes its directory on SIG%s, then exits 0"):format(sig), function()
      local e = start(db)
      assert(H.execute(("kill -%s %s"):format(sig, e.pid)))
      assert_all_gone(e, "SIG" .. sig)
      assert.matches("stopped %(SIG" .. sig .. "%)", slurp(e.err))
      assert(wait_until(function() return slurp(e.code) ~= "" end, 5))
      assert.equal("0", slurp(e.code):match("%d+"))
    end)
  end

  -- a local database is opened once by the worker; a cluster's by each
  -- request (its client's cosockets belong to one request)
  nginx_it("serves the database's API: a write, then the containers and a read", function()
    local e = start(db)
    finally(function() H.execute("kill -TERM " .. e.pid .. " 2>/dev/null") end)
    local function api(method, path, body)
      local out = H.run(("env -u LD_PRELOAD curl -s --max-time 10 -X %s " ..
        "-H 'Content-Type: application/json' -H 'X-Regolith-Explorer: 1' %s http://127.0.0.1:%d%s"):format(
        method, body and ("--data '" .. body .. "'") or "", e.port, path))
      return assert(regolith.json.decode(out), out)
    end
    local r = api("POST", "/api/containers/c/items", '{"id": "a", "n": 1}')
    assert.equal("a", r.doc.id, regolith.json.encode(r))
    r = api("GET", "/api/containers")
    assert.equal("c", r[1].name)
    assert.equal(1, r[1].items)
    r = api("GET", "/api/containers/c/items/a?pk=%22a%22")
    assert.equal(1, r.doc.n)
    assert(H.execute("kill -TERM " .. e.pid))
    assert_all_gone(e, "SIGTERM")
  end)

  nginx_it("leaves no server behind when the command is killed outright (SIGKILL)", function()
    local e = start(db)
    assert(H.execute("kill -KILL " .. e.pid))
    -- the worker notices within half a second that its owner is gone
    assert_all_gone(e, "SIGKILL")
  end)
end)
