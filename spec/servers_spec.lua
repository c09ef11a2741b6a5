-- The Data Explorer and the gateway under hostile clients (docs/explorer.md
-- and docs/gateway.md, Limits): what nginx itself refuses comes in each
-- server's JSON error shape, a few hundred (the explorer) or a few
-- thousand (the gateway) slow connections do not starve them, and a slow
-- query does not stop the explorer from answering.  Each server is started
-- on its own port (EXPLORER_PORT + 7, PYTHON_PORT + 7), as `regolith
-- explore` and `make gateway` start them.
local regolith = require "regolith"
local H = require "helper"
local socket_ok, socket = pcall(require, "socket")

local function have(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Run by `make explorer-test` (SERVERS_SPEC=1), which has what it needs
-- and whose ports the caller chose; left pending by a plain busted run.
local ready = os.getenv("SERVERS_SPEC") and socket_ok and have("/usr/sbin/nginx") and
  have("/usr/lib/nginx/modules/ngx_http_lua_module.so") and
  have("build/explorer/index.html") and have("build/luajit/regolith/core.so")
local EXPLORER = tonumber(os.getenv("EXPLORER_PORT") or "8079") + 7
local GATEWAY = tonumber(os.getenv("PYTHON_PORT") or "18091") + 7

-- Sends raw bytes, reads the answer until the server closes: status line,
-- headers (lower-cased names), body.
local function raw(port, bytes)
  local c = assert(socket.tcp())
  c:settimeout(10)
  assert(c:connect("127.0.0.1", port))
  c:send(bytes)
  local all = {}
  while true do
    local chunk, err, part = c:receive(65536)
    all[#all + 1] = chunk or part
    if not chunk then break end
  end
  c:close()
  local text = table.concat(all)
  local head, body = text:match("^(.-)\r\n\r\n(.*)$")
  local status = tonumber((head or ""):match("^HTTP/1%.%d (%d+)"))
  local headers = {}
  for k, v in (head or ""):gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
    headers[k:lower()] = v
  end
  return status, headers, body or ""
end

-- The requests nginx answers itself, and their statuses.
local function hostile(port, path, extra)
  local host = ("Host: 127.0.0.1:%d\r\n%s"):format(port, extra or "")
  return {
    { 413, "POST " .. path .. " HTTP/1.1\r\n" .. host ..
      "Content-Length: 40000000\r\nConnection: close\r\n\r\n" .. ("x"):rep(1000) },
    { 400, "GET " .. path .. "?a=\0b HTTP/1.1\r\n" .. host .. "Connection: close\r\n\r\n" },
    { 414, "GET " .. path .. "?" .. ("a"):rep(100000) .. " HTTP/1.1\r\n" .. host ..
      "Connection: close\r\n\r\n" },
    { 400, "GET " .. path .. " HTTP/1.1\r\n" .. host .. "X-Big: " .. ("b"):rep(100000) ..
      "\r\nConnection: close\r\n\r\n" },
    { 400, "GET " .. path .. " HTTP/1.1\r\n" .. host .. "X-Nul: a\0b\r\nConnection: close\r\n\r\n" },
    { 400, "G\0T " .. path .. " HTTP/1.1\r\n" .. host .. "Connection: close\r\n\r\n" },
    { 505, "GET " .. path .. " HTTP/9.9\r\n" .. host .. "Connection: close\r\n\r\n" },
    { 400, "POST " .. path .. " HTTP/1.1\r\n" .. host ..
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n" },
  }
end

-- Runs `n` connections that send a header line every second and never
-- finish, in a child process (with the file limit raised), for `seconds`;
-- meanwhile GETs `path` every 0.2 s.  Returns how many GETs failed, the
-- slowest, and how many slow connections the server still held at the
-- first tick.
local function slowloris(port, n, seconds, path, header)
  local child = H.script(([[
    local socket = require "socket"
    local port, n, seconds, path, header = %d, %d, %g, %q, %q
    local slow = {}
    for i = 1, n do
      local c = socket.tcp()
      c:settimeout(2)
      if c:connect("127.0.0.1", port) then
        c:send(("GET %%s HTTP/1.1\r\nHost: 127.0.0.1:%%d\r\n"):format(path, port))
        c:settimeout(0)
        slow[#slow + 1] = c
      end
    end
    local held, failed, worst, t0, tick = nil, 0, 0, socket.gettime(), 0
    while socket.gettime() - t0 < seconds do
      local a = socket.gettime()
      local c = socket.tcp()
      c:settimeout(5)
      local ok = c:connect("127.0.0.1", port) and
        c:send(("GET %%s HTTP/1.1\r\nHost: 127.0.0.1:%%d\r\n%%sConnection: close\r\n\r\n")
               :format(path, port, header)) and c:receive("*l")
      c:close()
      if not (ok and ok:match("^HTTP/1%%.1 %%d+")) then failed = failed + 1 end
      worst = math.max(worst, socket.gettime() - a)
      if socket.gettime() - tick >= 1 then
        tick = socket.gettime()
        local live = 0
        for _, s in ipairs(slow) do
          if s:send("X-a: b\r\n") then live = live + 1 end
        end
        held = held or live
      end
      socket.sleep(0.2)
    end
    print(failed, worst, held)]]):format(port, n, seconds, path, header or ""))
  local p = io.popen("ulimit -n 20000 2>/dev/null; " .. H.lua_cmd(child))
  local out = p:read("a")
  p:close()
  local failed, worst, held = out:match("^(%d+)%s+(%S+)%s+(%d+)")
  assert(failed, out)
  return tonumber(failed), tonumber(worst), tonumber(held)
end

local describe_servers = ready and describe or function(name)
  pending(name .. ": `make explorer-test` runs it (nginx, its Lua module, " ..
    "LuaSocket and the page)")
end

describe_servers("the explorer and the gateway under hostile clients", function()
  local dir, gwdir, explore_pid

  setup(function()
    dir = H.tmpdir()
    local db = assert(regolith.open(dir, { sync = "none" }))
    local c = assert(db:create_container("t", { partition_key = "/pk" }))
    for i = 1, 200 do
      assert(c:create({ id = "i" .. i, pk = "p" .. i, s = ("a"):rep(20000) }))
    end
    db:close()
    local p = io.popen(("setsid %s bin/regolith explore '%s' --port %d >/dev/null 2>&1 & echo $!")
      :format(H.interpreter(), dir, EXPLORER))
    explore_pid = p:read("l")
    p:close()
    gwdir = H.tmpdir()
    assert(H.execute(("GATEWAY_PREFIX='%s' GATEWAY_PORT=%d QUIET=1 sh tools/gateway/gateway.sh start >/dev/null")
      :format(gwdir, GATEWAY)))
    for _ = 1, 100 do
      local c = socket.tcp()
      c:settimeout(1)
      if c:connect("127.0.0.1", EXPLORER) then c:close() break end
      socket.sleep(0.1)
    end
  end)

  teardown(function()
    if explore_pid then os.execute("kill -INT " .. explore_pid) end
    if gwdir then
      os.execute(("GATEWAY_PREFIX='%s' QUIET=1 sh tools/gateway/gateway.sh stop >/dev/null 2>&1"):format(gwdir))
    end
    socket.sleep(1)
    H.cleanup()
  end)

  it("answers what nginx refuses in the explorer's JSON shape, never an HTML page", function()
    for _, case in ipairs(hostile(EXPLORER, "/api/containers", "X-Regolith-Explorer: 1\r\n")) do
      local status, headers, body = raw(EXPLORER, case[2])
      assert.are.equal(case[1], status, case[2]:sub(1, 40))
      assert.are.equal("application/json", headers["content-type"])
      assert.matches('^{"error":"[^"]+","status":' .. case[1] .. '}', body)
    end
    local status, headers, body = raw(EXPLORER, ("GET /no-such-file HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" ..
      "Connection: close\r\n\r\n"):format(EXPLORER))
    assert.are.equal(404, status)
    assert.are.equal("application/json", headers["content-type"])
    assert.matches('^{"error":"not found","status":404}', body)
  end)

  it("answers what nginx refuses in the gateway's Cosmos error shape", function()
    for _, case in ipairs(hostile(GATEWAY, "/dbs")) do
      local status, headers, body = raw(GATEWAY, case[2])
      assert.are.equal(case[1], status, case[2]:sub(1, 40))
      assert.are.equal("application/json", headers["content-type"])
      assert.matches('^{"code":"%a+","message":"[^"]+"}', body)
    end
  end)

  it("keeps answering the explorer's page beside 600 slow connections, and drops them", function()
    local failed, worst, held = slowloris(EXPLORER, 600, 4, "/index.html")
    assert.are.equal(0, failed)
    assert.is_true(worst < 2, "a GET took " .. worst .. " s")
    assert.is_true(held > 500, "the server held " .. held)
  end)

  it("keeps answering the gateway beside 2,500 slow connections", function()
    local failed, worst, held = slowloris(GATEWAY, 2500, 4, "/")
    assert.are.equal(0, failed)
    assert.is_true(worst < 2, "a GET took " .. worst .. " s")
    assert.is_true(held > 2400, "the server held " .. held)
  end)

  it("answers the issue's LIKE at once, and other requests while a query is slow", function()
    local function request(method, path, body)
      return ("%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Regolith-Explorer: 1\r\n" ..
        "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s")
        :format(method, path, EXPLORER, #(body or ""), body or "")
    end
    local tail = regolith.json.encode({ sql = "SELECT VALUE c.id FROM c WHERE c.s LIKE @p",
      params = { p = "%" .. ("a"):rep(19000) .. "b" } })
    local t0 = socket.gettime()
    local status, _, body = raw(EXPLORER, request("POST", "/api/containers/t/query", tail))
    assert.are.equal(200, status, body)
    assert.is_true(socket.gettime() - t0 < 5)
    -- a query that searches runs to its 5 s limit in one worker; the
    -- other answers meanwhile
    local search = regolith.json.encode({ sql = "SELECT VALUE c.id FROM c WHERE c.s LIKE @p",
      params = { p = "%" .. ("a_"):rep(5000) .. "b%" } })
    local slow = assert(socket.tcp())
    slow:settimeout(60)
    assert(slow:connect("127.0.0.1", EXPLORER))
    slow:send(request("POST", "/api/containers/t/query", search))
    socket.sleep(0.3)
    t0 = socket.gettime()
    status = raw(EXPLORER, request("GET", "/api/containers"))
    assert.are.equal(200, status)
    assert.is_true(socket.gettime() - t0 < 2, "the GET waited")
    local line = slow:receive("*l")
    slow:close()
    assert.are.equal("HTTP/1.1 408 Request Time-out", line)
  end)
end)
