--[[
regolith.cli.explore: `regolith explore DIR [--port N] [--host H]`.

Writes an nginx configuration into a new temporary directory, starts
Debian's nginx with the Lua module on it (two workers, listening on
127.0.0.1 unless --host says otherwise), prints the address, and waits:
SIGINT (Ctrl-C), SIGTERM (kill, a service manager's stop) and SIGHUP (a
closed terminal) alike stop nginx, remove the directory and end the
command.  nginx never outlives it: its worker checks every half second
that the command still runs (the owner's pid and start time, written in
the settings) and, when it is gone however it went (SIGKILL, a crash),
removes the directory and stops its master.  nginx serves the page
(build/explorer, made by `make explorer`) and the JSON API
(regolith.explorer.api, run by LuaJIT in the worker with regolith built
for LuaJIT).  docs/explorer.md.
]]

local common = require "regolith.cli.common"
local signals = require("regolith.core")._signals

local EXIT = common.EXIT
local fail, note = common.fail, common.note

local M = {}

local MODULES = "/usr/lib/nginx/modules"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function run(cmd)
  local ok, how, code = os.execute(cmd)
  if type(ok) == "number" then return ok == 0 end       -- LuaJIT
  return ok == true and how == "exit" and code == 0
end

local function capture(cmd)
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  return (out:gsub("%s+$", ""))
end

local function dir_of(path) return path:match("^(.*)/[^/]*$") or "." end

local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  return capture("pwd") .. "/" .. path
end

-- Where the Lua modules are: the directory holding regolith/.
local function lua_dir()
  local init = package.searchpath("regolith.cli", package.path)
  return absolute(dir_of(dir_of(dir_of(init))))
end

-- The first of `candidates` (paths) that exists.
local function first(candidates)
  for _, p in ipairs(candidates) do
    if p and common.exists(p) then return p end
  end
end

-- regolith built for LuaJIT: $REGOLITH_LUAJIT_CPATH/regolith/core.so, the
-- checkout's build/luajit, the module this command loaded when it runs
-- under LuaJIT (the LuaJIT rock's own), or a LuaJIT (5.1) module path
-- beside a Lua 5.4 one (both rocks in one tree, or make install-explorer).
local function luajit_module(root)
  local candidates = {}
  local env = os.getenv("REGOLITH_LUAJIT_CPATH")
  if env then candidates[#candidates + 1] = env .. "/regolith/core.so" end
  candidates[#candidates + 1] = root .. "/build/luajit/regolith/core.so"
  if jit then
    candidates[#candidates + 1] = package.searchpath("regolith.core",
      package.cpath)
  end
  for pattern in package.cpath:gmatch("[^;]+") do
    if pattern:find("5%.4") then
      candidates[#candidates + 1] = (pattern:gsub("5%.4", "5.1")
        :gsub("%?", "regolith/core"))
    end
  end
  local found = first(candidates)
  return found and dir_of(dir_of(found))
end

-- The page: $REGOLITH_EXPLORER_UI, the checkout's build/explorer, the
-- installed one beside the modules (LUADIR/regolith/explorer/www: make
-- install, the rock), or PREFIX/share/regolith/explorer beside
-- PREFIX/share/lua/5.x.
local function ui_dir(root, luadir)
  local candidates = {}
  local env = os.getenv("REGOLITH_EXPLORER_UI")
  if env then candidates[#candidates + 1] = env .. "/index.html" end
  candidates[#candidates + 1] = root .. "/build/explorer/index.html"
  candidates[#candidates + 1] = luadir .. "/regolith/explorer/www/index.html"
  local share = luadir:match("^(.*)/lua/5%.%d$")
  if share then
    candidates[#candidates + 1] = share .. "/regolith/explorer/index.html"
  end
  local found = first(candidates)
  return found and dir_of(found)
end

local function alive(pid)
  return pid and common.exists("/proc/" .. pid .. "/stat")
end

-- This process's pid (the parent of the shell io.popen starts) and its
-- start time (field 22 of /proc/PID/stat, after the command's name,
-- which may hold spaces), so that a reused pid is not taken for it.
local function owner()
  local pid = capture("echo $PPID")
  local f = io.open("/proc/" .. pid .. "/stat")
  local stat = f and f:read("*l") or ""
  if f then f:close() end
  local rest = stat:match("%) (.*)$") or ""
  local fields = {}
  for w in rest:gmatch("%S+") do fields[#fields + 1] = w end
  return tonumber(pid), fields[20]            -- field 22 of the whole line
end

local function config(t)
  local user = ""
  if capture("id -u") == "0" then
    -- as root nginx runs its workers as nobody, who cannot write the
    -- database: keep them as the invoking user
    user = ("user %s %s;\n"):format(capture("id -un"), capture("id -gn"))
  end
  return ([[
# Written by `regolith explore`; removed when it stops.
load_module %s/ndk_http_module.so;
load_module %s/ngx_http_lua_module.so;
%sworker_processes 2;
worker_rlimit_nofile 8192;
error_log "%s/error.log" warn;
pid "%s/nginx.pid";
events { worker_connections 4096; }
http {
  access_log off;
  # what slow or stalled clients may hold (docs/explorer.md, Limits): a
  # header must arrive whole within 10 s, a body and an answer may pause
  # 10 s at most, an idle connection stays 30 s
  client_header_timeout 10s;
  client_body_timeout 10s;
  send_timeout 10s;
  keepalive_timeout 30s;
  reset_timedout_connection on;
  large_client_header_buffers 4 16k;
  # what nginx itself refuses, in the API's JSON shape
  map $status $regolith_error {
    400 "bad request: malformed request line, header or body";
    404 "not found";
    405 "method not allowed";
    408 "the request took too long to arrive";
    411 "a body needs its length";
    413 "the request body is too large (at most 3 MiB)";
    414 "the request line is too long";
    494 "a request header is too large";
    500 "internal error";
    501 "not implemented";
    502 "bad gateway";
    503 "unavailable";
    504 "timed out";
    505 "HTTP version not supported";
    default "refused";
  }
  error_page 400 404 405 408 411 413 414 494 500 501 502 503 504 505 /.error;
  types {
    text/html html; text/css css; application/javascript js;
    image/svg+xml svg; text/plain txt;
  }
  default_type application/octet-stream;
  client_max_body_size 3m;
  client_body_buffer_size 3m;
  client_body_temp_path "%s/body";
  proxy_temp_path "%s/proxy";
  fastcgi_temp_path "%s/fastcgi";
  uwsgi_temp_path "%s/uwsgi";
  scgi_temp_path "%s/scgi";
  lua_package_path "%s/?.lua;%s/?.lua;%s/?/init.lua;;";
  lua_package_cpath "%s/?.so;;";
  init_by_lua_block {
    require "resty.core"
    require "regolith"
  }
  init_worker_by_lua_block { require("regolith.explorer.nginx").init_worker() }
  exit_worker_by_lua_block { require("regolith.explorer.nginx").exit_worker() }
  server {
    listen %s:%d;
    add_header Content-Security-Policy "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:" always;
    add_header X-Content-Type-Options nosniff always;
    location = /.error {
      internal;
      default_type application/json;
      add_header Cache-Control no-store always;
      return 200 '{"error":"$regolith_error","status":$status}\n';
    }
    location /api/ {
      content_by_lua_block { require("regolith.explorer.nginx").handle() }
    }
    location / {
      root "%s";
      index index.html;
      add_header Cache-Control no-store;
      add_header Content-Security-Policy "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:" always;
      add_header X-Content-Type-Options nosniff always;
    }
  }
}
]]):format(MODULES, MODULES, user, t.tmp, t.tmp, t.tmp, t.tmp, t.tmp, t.tmp,
    t.tmp, t.tmp, t.luadir, t.luadir, t.jit, t.listen, t.port, t.ui)
end

function M.explore(args)
  local port = args.port
  if not port or port ~= math.floor(port) or port < 1 or port > 65535 then
    common.usage("--port must be a port number (1 to 65535)")
  end
  local host = args.host
  if not host:match("^[%w%.:%-%[%]]+$") then
    common.usage("--host must be an address, such as 127.0.0.1")
  end
  -- the database must be there (the check opens it and closes it again)
  local dbdir = common.is_url(args.dir) and args.dir or absolute(args.dir)
  common.open(dbdir, { readonly = args.readonly }):close()

  local luadir = lua_dir()
  local root = dir_of(luadir)
  local nginx = first({ "/usr/sbin/nginx", "/usr/bin/nginx" })
  if not nginx or not common.exists(MODULES .. "/ngx_http_lua_module.so") then
    fail(EXIT.failed, "the explorer needs nginx with the Lua module " ..
      "(Debian: nginx libnginx-mod-http-lua lua-resty-core; `make explorer` " ..
      "installs them)")
  end
  local jit = luajit_module(root)
  if not jit then
    fail(EXIT.failed, "the explorer needs regolith built for LuaJIT " ..
      "(`make LUA=luajit`, or `make explorer`; installed: the LuaJIT rock, " ..
      "`luarocks --lua-version=5.1 install regolith LUA=/usr/bin/luajit " ..
      "LUA_INCDIR=/usr/include/luajit-2.1`)")
  end
  local ui = ui_dir(root, luadir)
  if not ui then
    fail(EXIT.failed, "the explorer's page is not built (`make explorer`)")
  end
  for _, p in ipairs({ dbdir, luadir, jit, ui }) do
    if p:find('["\\;{}$]') then
      fail(EXIT.failed, "cannot serve from a path with quotes, ';', '{', " ..
        "'}' or '$' in it: %s", p)
    end
  end

  local tmp = capture("mktemp -d -t regolith-explore.XXXXXX")
  if tmp == "" then fail(EXIT.io, "cannot make a temporary directory") end
  local listen = host:find(":") and not host:find("^%[") and
    ("[" .. host .. "]") or host
  local hosts
  if host == "127.0.0.1" or host == "localhost" or host == "::1" then
    hosts = { ["127.0.0.1:" .. port] = true, ["localhost:" .. port] = true,
              ["[::1]:" .. port] = true }
  end
  local owner_pid, owner_start = owner()
  local lines = { "return {", ("  db = %q,"):format(dbdir),
    ("  readonly = %s,"):format(tostring(args.readonly or false)),
    ("  owner = %s,"):format(tostring(owner_pid)),
    ("  owner_start = %q,"):format(owner_start or ""),
    ("  prefix = %q,"):format(tmp) }
  if hosts then
    lines[#lines + 1] = "  hosts = {"
    for h in pairs(hosts) do lines[#lines + 1] = ("    [%q] = true,"):format(h) end
    lines[#lines + 1] = "  },"
  end
  lines[#lines + 1] = "}\n"
  local f = assert(io.open(tmp .. "/explorer_settings.lua", "w"))
  f:write(table.concat(lines, "\n"))
  f:close()
  f = assert(io.open(tmp .. "/nginx.conf", "w"))
  f:write(config{ tmp = tmp, luadir = luadir, jit = jit, listen = listen,
                  port = port, ui = ui })
  f:close()

  local function cleanup() run("rm -rf " .. quote(tmp)) end
  -- from here on a signal is recorded, not fatal: it stops the wait below
  signals.catch("INT", "TERM", "HUP")
  if not run(("%s -p %s -c nginx.conf -e error.log 2>%s"):format(nginx,
      quote(tmp .. "/"), quote(tmp .. "/start.log"))) then
    local why = capture("cat " .. quote(tmp .. "/start.log") .. " " ..
      quote(tmp .. "/error.log") .. " 2>/dev/null | grep -v '^$' | tail -n 1")
    cleanup()
    signals.release()
    fail(EXIT.failed, "nginx did not start: %s", why)
  end
  local pidf = io.open(tmp .. "/nginx.pid")
  local pid = pidf and pidf:read("*l")
  if pidf then pidf:close() end
  io.stdout:write(("Data Explorer on http://%s:%d/ for %s%s (Ctrl-C stops it)\n")
    :format(listen, port, dbdir, args.readonly and ", read-only" or ""))
  io.stdout:flush()
  note("nginx %s runs with %s/nginx.conf", pid or "?", tmp)
  -- a signal ends the sleep early (its handler has no SA_RESTART)
  local caught
  local ok, err = pcall(function()
    while alive(pid) do
      caught = signals.caught()
      if caught then break end
      common.sleep(0.25)
    end
  end)
  local stopped_by_us = caught ~= nil or not ok
  if alive(pid) then
    run("kill -QUIT " .. pid .. " 2>/dev/null")
    for _ = 1, 40 do
      if not alive(pid) then break end
      common.sleep(0.1)
    end
    if alive(pid) then run("kill -TERM " .. pid .. " 2>/dev/null") end
  end
  local log = capture("grep -E '\\[(error|alert|crit|emerg)\\]' " ..
    quote(tmp .. "/error.log") .. " 2>/dev/null | tail -n 3")
  cleanup()
  signals.release()
  if not ok and not tostring(err):find("interrupted!", 1, true) then
    error(err, 0)
  end
  if not stopped_by_us then
    fail(EXIT.failed, "nginx stopped%s", log ~= "" and (": " .. log) or "")
  end
  note("stopped (SIG%s)", caught or "INT")
end

return M
