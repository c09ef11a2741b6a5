-- The client over ngx.socket.tcp inside nginx (Debian's nginx with
-- libnginx-mod-http-lua): the transport is chosen at run time, the same
-- calls work, a regolith database on the cluster works inside a request
-- (a procedure, a query, the feed, a processor), and a slow Redis call
-- does not block the worker.  Pending when nginx or its Lua module is
-- missing.
local C = require "cluster.support"
local socket = require "socket"
local http = require "socket.http"

local NGINX = "/usr/sbin/nginx"
local MODULES = "/usr/lib/nginx/modules/"

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local CONF = [[
load_module %sndk_http_module.so;
load_module %sngx_http_lua_module.so;
user root;
worker_processes 1;
daemon on;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;
  uwsgi_temp_path tmp; scgi_temp_path tmp;
  lua_package_path "%s/lua/?.lua;%s/lua/?/init.lua;;";
  lua_package_cpath "%s/build/luajit/?.so;;";
  server {
    listen 127.0.0.1:%d;
    location /calls {
      content_by_lua_block {
        local redis = require "regolith.cluster.redis"
        local layout = require "regolith.cluster.layout"
        local c = assert(redis.connect(ngx.var.arg_seeds))
        assert(layout.ensure_library(c))
        local key = ngx.var.arg_key
        local out = { c.t.name, c:call("SET", key, "v"), c:call("GET", key) }
        local cmds = {}
        for i = 1, 30 do cmds[i] = { "INCR", key .. ":" .. i } end
        local res = c:pipeline(cmds)
        out[#out + 1] = tostring(#res)
        out[#out + 1] = c:fcall_ro("rg_version", { key }, {})
        c:close()
        ngx.say(table.concat(out, " "))
      }
    }
    location /slow {
      content_by_lua_block {
        local redis = require "regolith.cluster.redis"
        local c = assert(redis.connect(ngx.var.arg_seeds))
        local v = c:call("BLPOP", ngx.var.arg_key, 1)
        c:close()
        ngx.say("slow ", tostring(v))
      }
    }
    location /api {
      content_by_lua_block {
        local regolith = require "regolith"
        local db = assert(regolith.open(ngx.var.arg_url))
        local transport = db:cluster().t.name
        local c = assert(db:create_container("c", { partition_key = "/pk" }))
        assert(c:create({ id = "a", pk = "p", n = 1 }))
        assert(c:create_procedure("inc", "return function(ctx) " ..
          "local d = assert(ctx:read('a')) d.n = d.n + 1 assert(ctx:replace(d)) " ..
          "return d.n end"))
        local n = assert(c:execute("inc", "p"))
        local rows = assert(c:query("SELECT VALUE c.n FROM c"))
        local changes = assert(c:changes())
        local seen = 0
        local p = assert(db:processor({ name = "p", source = "c",
          handler = function(list) seen = seen + #list end }))
        p:run({ until_idle = true })
        local ok = db:verify()
        db:close()
        ngx.say(table.concat({ transport, n, rows[1], #changes, seen, tostring(ok) }, " "))
      }
    }
    location /ping { content_by_lua_block { ngx.say("pong") } }
  }
}
]]

describe("cluster client under nginx (cosockets)", function()
  if not C.ready(pending) then return end
  if not (exists(NGINX) and exists(MODULES .. "ngx_http_lua_module.so")) then
    pending("nginx with the Lua module is not installed (nginx, libnginx-mod-http-lua)")
    return
  end
  local prefix, port

  setup(function()
    prefix = os.tmpname()
    os.remove(prefix)
    assert(C.sh("mkdir -p " .. prefix .. "/logs " .. prefix .. "/tmp " .. prefix .. "/conf"))
    local root = assert(C.sh("pwd")):gsub("%s+$", "")
    for _ = 1, 5 do
      port = 20000 + math.random(30000)
      local f = assert(io.open(prefix .. "/conf/nginx.conf", "w"))
      f:write(CONF:format(MODULES, MODULES, root, root, root, port))
      f:close()
      local out, ok = C.sh(NGINX .. " -p " .. prefix .. "/ -c conf/nginx.conf -e logs/error.log")
      if ok then return end
      assert(out:find("Address already in use", 1, true), out)
    end
  end)

  teardown(function()
    local f = io.open(prefix .. "/logs/nginx.pid")
    if f then
      local pid = f:read("*l")
      f:close()
      C.sh("kill -QUIT " .. pid .. "; while kill -0 " .. pid ..
        " 2>/dev/null && ! grep -q '^Z' /proc/" .. pid .. "/stat 2>/dev/null; do sleep 0.05; done")
    end
    C.sh("rm -rf " .. prefix)
  end)

  -- A request's answer; a failure says what nginx's log says.
  local function get(path)
    local body, code = http.request(("http://127.0.0.1:%d%s"):format(port, path))
    if code ~= 200 then
      local f = io.open(prefix .. "/logs/error.log")
      local log = f and f:read("*a") or ""
      if f then f:close() end
      body = tostring(body) .. "\n" .. log:sub(-3000)
    end
    assert.equal(200, code, body)
    return body
  end

  it("uses cosockets in a request, with the same calls as LuaSocket", function()
    local key = C.fresh_db()
    local body = get("/calls?seeds=" .. C.seeds .. "&key=" .. key)
    local version = select(2, C.layout.library())
    assert.equal(("cosocket OK v 30 %s\n"):format(version), body)
  end)

  it("runs a regolith database on the cluster inside a request", function()
    if not exists("build/luajit/regolith/core.so") then
      pending("needs the LuaJIT build (make LUA=luajit)")
      return
    end
    local url = "redis://" .. C.seeds .. "/" .. C.fresh_db()
    assert.equal("cosocket 2 2 1 1 true\n", get("/api?url=" .. url))
  end)

  it("does not block the worker while a Redis call waits", function()
    local slow = socket.tcp()
    assert(slow:connect("127.0.0.1", port))
    local t0 = socket.gettime()
    assert(slow:send("GET /slow?seeds=" .. C.seeds .. "&key=" .. C.fresh_db() ..
      " HTTP/1.0\r\n\r\n"))
    socket.sleep(0.1)                         -- the BLPOP waits in Redis, 1 s
    assert.equal("pong\n", get("/ping"))      -- one worker, answered meanwhile
    local ping_at = socket.gettime() - t0
    slow:settimeout(5)
    local answer = slow:receive("*a")
    slow:close()
    assert.matches("slow null", answer)
    assert.is_true(ping_at < 0.8, ("the ping waited %.2f s"):format(ping_at))
    assert.is_true(socket.gettime() - t0 >= 0.9)
  end)
end)
