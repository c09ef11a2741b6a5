-- Shared by the specs: fresh temporary databases, removed afterwards.
local regolith = require "regolith"

local H = {}

local dirs = {}

-- A new empty directory path under /tmp (not created: open creates it).
function H.tmpdir()
  local name = os.tmpname()
  os.remove(name)
  dirs[#dirs + 1] = name
  return name
end

-- Opens a fresh database; returns db and its path.
function H.open(opts)
  local path = H.tmpdir()
  local db = assert(regolith.open(path, opts))
  return db, path
end

-- Removes every directory handed out so far.
function H.cleanup()
  for i = #dirs, 1, -1 do
    os.execute("rm -rf '" .. dirs[i] .. "'")
    dirs[i] = nil
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

-- Asserts the nil, message, status shape of an expected failure and
-- returns the message.
function H.fails(status, ok, msg, st, ...)
  assert(ok == nil, "expected a failure, got " .. tostring(ok))
  assert(type(msg) == "string", "expected a message, got " .. tostring(msg))
  assert(st == status, ("expected status %d, got %s (%s)"):format(status,
    tostring(st), msg))
  return msg, ...
end

return H
