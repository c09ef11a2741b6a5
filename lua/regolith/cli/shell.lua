--[[
regolith.cli.shell: an interactive SQL prompt.

    regolith shell DIR [CONTAINER]

A statement ends with ";" and may span lines; its rows print as a table
(.mode table, the default on a terminal) or as JSON lines (.mode json, the
default otherwise), then a line with the charge and counters.  Dot
commands (alone on a line): .help .containers .use NAME .schema [NAME]
.pk VALUE|off .max N|off .more .mode table|json .timer on|off .history
.quit.  Without .use, a query runs on the container its FROM names when
one has that name (FROM posts p).

On a terminal it reads with GNU readline (Debian's lua-readline) when it
is installed, with the history kept in ~/.regolith_history
(REGOLITH_HISTORY to choose another file) and Tab completing dot commands
and container names; Ctrl-C cancels the statement being typed (as in
sqlite3 and psql) and Ctrl-D leaves.  Without readline it reads plain
lines and keeps the history in memory.  With input that is not a terminal
(a file, a pipe) no prompt is shown, and the exit code is 1 if a
statement failed.
]]

local common = require "regolith.cli.common"
local grid = require "regolith.cli.grid"

local signals = require("regolith.core")._signals

local M = {}

local HELP = [[
  SELECT ... ;          run a query (it may span lines; ';' ends it)
  .containers           list the containers
  .use NAME             run the queries on container NAME
  .schema [NAME]        a container's partition key, indexing policy,
                        unique keys, TTL, change feed, throughput, scripts
  .pk VALUE | .pk off   run them in one logical partition (JSON, or a string)
  .max N | .max off     pages of N rows (.more shows the next page)
  .more                 the next page of the last query
  .mode table | json    rows as an aligned table or as JSON lines
  .timer on | off       print each statement's time (wall, in ms, and CPU)
  .history              the statements of this session
  .quit                 leave (or Ctrl-D); Ctrl-C cancels a statement]]

local COMMANDS = { "containers", "use", "schema", "pk", "max", "more", "mode",
                   "timer", "history", "help", "quit" }

-- Returned by read() when Ctrl-C cancelled the line being typed.
local CANCELLED = {}

-- The words Tab completes: dot commands first on a line, container names
-- after .use, .schema, FROM and JOIN.
local function completer(names)
  return function(text, from, to)
    local word = text:sub(from, to)
    local before = text:sub(1, from - 1)
    local out = {}
    local function offer(list, prefix)
      for _, v in ipairs(list) do
        local w = (prefix or "") .. v
        if w:sub(1, #word) == word then out[#out + 1] = w end
      end
    end
    if before:match("^%s*$") and word:sub(1, 1) == "." then
      offer(COMMANDS, ".")
    elseif before:match("^%s*%.use%s+$") or before:match("^%s*%.schema%s+$")
        or before:lower():match("[%s%(]from%s+$")
        or before:lower():match("^from%s+$")
        or before:lower():match("%sjoin%s+$") then
      offer(names())
    end
    return out
  end
end

-- A line reader: readline on a terminal when it is there, else io.read.
-- read(prompt) -> the line, nil at the end of the input, or CANCELLED.
local function reader(interactive, names)
  local history = {}
  local rl
  if interactive then
    local ok, lib = pcall(require, "readline")
    if ok then
      rl = lib
      local file = os.getenv("REGOLITH_HISTORY") or
        ((os.getenv("HOME") or ".") .. "/.regolith_history")
      rl.set_options({ histfile = file, keeplines = 1000, completion = true,
                       auto_add = false })
      rl.set_complete_function(completer(names))
    end
    -- Ctrl-C is recorded, not fatal: the line being typed is cancelled
    signals.catch("INT")
  end
  local self = { history = history }

  local function cancelled(echoed)
    if not echoed then io.stdout:write("^C") end
    io.stdout:write("\n")
    io.stdout:flush()
    return CANCELLED
  end

  -- readline's callback interface, fed one character at a time when the
  -- terminal has one, so that a Ctrl-C between two keys is seen at once.
  -- The handler is removed only from inside itself, once readline has
  -- let the terminal go: lua-readline's handler_remove closes its
  -- terminal stream before readline writes its last bytes there, which
  -- crashes when the line is still open.  A cancelled line's handler
  -- stays installed until the next read installs its own over it (the
  -- stream it opened stays open: one per Ctrl-C).
  local function read_rl(prompt)
    local done, line = false, nil
    rl.handler_install(prompt, function(l)
      done, line = true, l
      rl.handler_remove()
    end)
    while not done do
      local ready = signals.wait_input(0.2)
      if ready then rl.read_char() end
      if signals.caught() == "INT" and not done then
        if rl.sigcleanup then rl.sigcleanup() end
        -- readline echoes ^C itself when the signal came during its read
        return cancelled(ready)
      end
    end
    return line
  end

  function self.read(prompt)
    if rl then return read_rl(prompt) end
    if interactive then
      io.stdout:write(prompt)
      io.stdout:flush()
    end
    local line = io.read("*l")
    if interactive and signals.caught() == "INT" then return cancelled() end
    return line
  end
  function self.remember(statement)
    history[#history + 1] = statement
    if rl then rl.add_history(statement) end
  end
  function self.close()
    if rl then rl.save_history() end
    if interactive then signals.release() end
  end
  return self
end

-- {=====================================================================
-- .schema
-- ======================================================================
local function paths_of(list)
  local out = {}
  for i, p in ipairs(list or {}) do out[i] = p end
  return #out > 0 and table.concat(out, ", ") or nil
end

local function throughput_text(t)
  if t == nil then return "none (unlimited)" end
  if type(t) == "number" then return ("manual %g RU/s"):format(t) end
  if t.autoscale_max then
    return ("autoscale up to %g RU/s"):format(t.autoscale_max)
  end
  return ("manual %g RU/s%s"):format(t.manual or 0, t.burst and ", burst" or "")
end

-- The lines of .schema for container c (the spec as stored, its size,
-- its scripts).
function M.schema_lines(db, c)
  local spec = c:spec()
  local st = (db:stats().containers or {})[c:name()] or {}
  local out = {}
  local function row(k, v) out[#out + 1] = ("  %-20s %s"):format(k, v) end
  out[1] = ("container %s"):format(c:name())
  local pk = spec.partition_key
  row("partition key", type(pk) == "table" and
    (table.concat(pk, ", ") .. " (hierarchical)") or pk)
  row("physical partitions", tostring(spec.physical_partitions or 1))
  row("items", ("%d (%d bytes of JSON)"):format(st.items or 0, st.bytes or 0))
  local ix = spec.indexing or {}
  if ix.automatic == false then
    row("indexing", "none (automatic = false)")
  else
    row("indexing", "included " .. (paths_of(ix.included) or "/* (everything)")
      .. "; excluded " .. (paths_of(ix.excluded) or "nothing"))
  end
  for _, comp in ipairs(ix.composite or {}) do
    local parts = {}
    for i, p in ipairs(comp) do
      parts[i] = p.path .. " " .. ((p.order == "descending") and "DESC" or "ASC")
    end
    row("composite index", "(" .. table.concat(parts, ", ") .. ")")
  end
  local uks = {}
  for i, uk in ipairs(spec.unique_keys or {}) do
    uks[i] = "(" .. table.concat(uk, ", ") .. ")"
  end
  row("unique keys", #uks > 0 and table.concat(uks, " ") or "none")
  local ttl = spec.default_ttl
  row("default TTL", ttl == nil and "off" or ttl == -1 and
    "on (items expire by their own ttl)" or ("%d s"):format(ttl))
  local cf = spec.change_feed or {}
  row("change feed", cf.all_versions and ("latest and all versions" ..
    (cf.retention and (" (kept %d s)"):format(cf.retention) or "")) or
    "latest version")
  for _, cp in ipairs(spec.computed_properties or {}) do
    row("computed property", ("%s = %s"):format(cp.name, cp.query))
  end
  if spec.max_partition_bytes then
    row("max partition bytes", tostring(spec.max_partition_bytes))
  end
  row("throughput", throughput_text(spec.throughput))
  local procs, trigs = c:procedures(), c:triggers()
  row("procedures", #procs > 0 and table.concat(procs, ", ") or "none")
  local tl = {}
  for i, name in ipairs(trigs) do
    local def = c:trigger(name)
    tl[i] = type(def) == "table" and ("%s (%s, %s%s)"):format(name, def.type,
      def.operation, def.automatic and ", automatic" or "") or name
  end
  row("triggers", #tl > 0 and table.concat(tl, ", ") or "none")
  return out
end
-- }=====================================================================

function M.shell(args)
  local db = common.open(args.dir, { readonly = true })
  local interactive = common.is_tty(0)
  local state = { pk = nil, max = nil, last = nil,
                  mode = interactive and "table" or "json", timer = false }
  if args.format then state.mode = args.format end
  if args.container then
    state.container = common.container(db, args.container)
  end
  local failed = false
  local function say(fmt, ...) io.stdout:write(fmt:format(...), "\n") end
  local function problem(msg, status)
    failed = true
    io.stdout:flush()
    say("error: %s%s", msg, status and (" (status " .. status .. ")") or "")
  end

  local function show(q)
    local t0, c0 = common.now(), os.clock()
    local rows, info, status = q.c:query(q.sql, nil, {
      partition_key = q.pk, max_items = q.max,
      continuation = q.continuation })
    local seconds, cpu = common.now() - t0, os.clock() - c0
    if not rows then return problem(info, status) end
    if state.mode == "table" then
      for _, line in ipairs(grid.lines(rows)) do say("%s", line) end
    else
      for _, row in ipairs(rows) do say("%s", common.encode(row)) end
    end
    local line = ("-- %d row(s); charge %s RU; partitions %d; loaded %d; " ..
      "index lookups %d"):format(#rows, common.num(info.charge),
      info.partitions, info.loaded, info.index_lookups)
    if info.continuation then line = line .. "; more: .more" end
    say("%s", line)
    if state.timer then
      say("-- time: real %.0f ms, cpu %.2f ms", seconds * 1000, cpu * 1000)
    end
    q.continuation = info.continuation
    state.last = q.continuation and q or nil
  end

  local function query(sql)
    local c = state.container
    if not c then
      local name = sql:match("[Ff][Rr][Oo][Mm]%s+([%w_%-%.]+)")
      c = name and db:container(name)
      if not c then
        return problem("no container chosen: .use NAME, or name it in FROM")
      end
    end
    show({ c = c, sql = sql, pk = state.pk, max = state.max })
  end

  local function on_off(arg, what)
    if arg == "on" then return true elseif arg == "off" then return false end
    problem(("%s takes on or off"):format(what))
  end

  local commands = {}
  function commands.help() say("%s", HELP) end
  function commands.containers()
    local names = db:containers()
    if #names == 0 then say("(no containers)") end
    for _, name in ipairs(names) do say("%s", name) end
  end
  function commands.use(arg)
    local c, msg, status = db:container(arg or "")
    if not c then return problem(msg, status) end
    state.container = c
  end
  function commands.schema(arg)
    local c = state.container
    if arg then
      local msg, status
      c, msg, status = db:container(arg)
      if not c then return problem(msg, status) end
    elseif not c then
      return problem("no container chosen: .schema NAME, or .use NAME first")
    end
    for _, line in ipairs(M.schema_lines(db, c)) do say("%s", line) end
  end
  function commands.pk(arg)
    if arg == nil or arg == "off" then state.pk = nil
    else state.pk = common.value_arg(arg) end
  end
  function commands.max(arg)
    local n = tonumber(arg)
    if arg == "off" or arg == nil then state.max = nil
    elseif n and n >= 1 and n == math.floor(n) then state.max = n
    else problem(".max takes a whole number from 1, or off") end
  end
  function commands.more()
    if not state.last then return problem("no more rows") end
    show(state.last)
  end
  function commands.mode(arg)
    if arg == nil then return say("%s", state.mode) end
    if arg ~= "table" and arg ~= "json" then
      return problem(".mode takes table or json")
    end
    state.mode = arg
  end
  function commands.timer(arg)
    if arg == nil then return say("%s", state.timer and "on" or "off") end
    local v = on_off(arg, ".timer")
    if v ~= nil then state.timer = v end
  end
  local input = reader(interactive, function() return db:containers() end)
  function commands.history()
    if #input.history == 0 then say("(no statements yet)") end
    for i, s in ipairs(input.history) do say("%4d  %s", i, s) end
  end

  if interactive then
    say("regolith shell on %s: end a query with ';', .help for help", args.dir)
  end
  local buffer = {}
  while true do
    local name = state.container and state.container:name() or ""
    local line = input.read(#buffer == 0 and ("regolith:%s> "):format(name)
      or "      ...> ")
    if line == nil then break end
    if line == CANCELLED then
      buffer = {}
    elseif #buffer == 0 and line:match("^%s*%.") then
      if interactive then input.remember(line:match("^%s*(.-)%s*$")) end
      local cmd, arg = line:match("^%s*%.(%a+)%s*(.-)%s*$")
      if cmd == "quit" or cmd == "exit" then break end
      local fn = cmd and commands[cmd]
      if fn then fn(arg ~= "" and arg or nil)
      else problem(("unknown command %s (.help)"):format(line:match("%S+"))) end
    elseif line:find("%S") then
      buffer[#buffer + 1] = line
      if line:match(";%s*$") then
        local sql = table.concat(buffer, "\n"):gsub(";%s*$", "")
        buffer = {}
        input.remember(sql .. ";")
        query(sql)
      end
    end
  end
  if #buffer > 0 then
    local sql = table.concat(buffer, "\n")
    input.remember(sql .. ";")
    query(sql)
  end
  input.close()
  if interactive then io.stdout:write("\n") end
  if failed and not interactive then return common.EXIT.failed end
end

return M
