-- tools/nginx_stop.sh, which stops nginx and the OpenResty example's pump
-- by their pid files (examples/openresty/serve.sh, tools/gateway): a pid
-- file that outlived its process names a pid the system may have given to
-- another process since, which the script must leave alone.
local H = require "helper"

local sq = H.sh_quote

local started = {}

-- the script and the processes it is shown are system tools, run without
-- the sanitizers `make check` preloads (which abort some of them and hang
-- ps): what is checked here is the script's shell
local PLAIN = "env -u LD_PRELOAD "

-- starts `cmd` in the background, detached from the spec; returns its pid
-- (ended after each test)
local function spawn(cmd)
  local out, ok = H.run(PLAIN .. cmd .. " </dev/null >/dev/null 2>&1 & echo $!")
  assert(ok, out)
  local pid = assert(tonumber(out:match("(%d+)")))
  started[#started + 1] = pid
  return pid
end

-- running: a process that ended and that no one reaped yet is a zombie
-- (its state read from /proc, not by ps: ps hangs at its start with the
-- sanitizers preloaded, as `make check` runs the specs)
local function alive(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then return false end
  local stat = f:read("*a")
  f:close()
  local state = stat:match(".*%) (%a)")
  return state ~= nil and state ~= "Z"
end

local function exists(path) return H.execute("test -e " .. sq(path)) end

describe("tools/nginx_stop.sh", function()
  local dir

  before_each(function()
    dir = H.tmpdir()
    assert(H.execute("mkdir -p " .. sq(dir)))
  end)

  after_each(function()
    for i = #started, 1, -1 do
      os.execute(("kill %d 2>/dev/null"):format(started[i]))
      started[i] = nil
    end
    H.cleanup()
  end)

  local function stop(pidfile, stopfile)
    local out, ok = H.run((PLAIN .. "sh tools/nginx_stop.sh %s %s 2>&1")
      :format(sq(pidfile), stopfile and sq(stopfile) or ""))
    assert(ok, out)
    return out
  end

  -- a pid file that names a process which is not the one it was made for
  -- (one that died, its pid since given to this sleep): the process is
  -- left alone, the pid file removed
  local function leaves_alone(name, stopfile)
    local other = spawn("sleep 60")
    local pidfile = dir .. "/" .. name
    H.write_file(pidfile, other .. "\n")
    assert.are.equal("", stop(pidfile, stopfile))
    assert.is_true(alive(other))
    assert.is_false(exists(pidfile))
  end

  it("never signals a process the pump's pid file names that is not the pump, and removes the files", function()
    local stopfile = dir .. "/pump.stop"
    leaves_alone("pump.pid", stopfile)
    assert.is_false(exists(stopfile))
  end)

  it("never sends nginx's QUIT to a process its pid file names that is not nginx", function()
    leaves_alone("nginx.pid")
  end)

  it("stops the process its pid file names that was given the stop file, then removes both files", function()
    local stopfile = dir .. "/pump.stop"
    -- stops by itself once the stop file exists, as pump.lua does
    local pump = spawn(("sh -c 'while [ ! -e \"$0\" ]; do sleep 0.05; done' %s"):format(sq(stopfile)))
    local pidfile = dir .. "/pump.pid"
    H.write_file(pidfile, pump .. "\n")
    assert.is_true(alive(pump))
    stop(pidfile, stopfile)
    assert.is_false(alive(pump))
    assert.is_false(exists(pidfile))
    assert.is_false(exists(stopfile))
  end)

  it("removes a pid file whose process is gone, or that names no pid", function()
    local gone = spawn("true")
    os.execute("sleep 0.2")
    local pidfile, stopfile = dir .. "/pump.pid", dir .. "/pump.stop"
    H.write_file(pidfile, gone .. "\n")
    stop(pidfile, stopfile)
    assert.is_false(exists(pidfile))
    H.write_file(pidfile, "not a pid\n")
    stop(pidfile)
    assert.is_false(exists(pidfile))
  end)
end)
