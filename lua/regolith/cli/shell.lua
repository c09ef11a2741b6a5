--[[
regolith.cli.shell: an interactive SQL prompt.

    regolith shell DIR [CONTAINER]

A statement ends with ";" and may span lines; its rows print as JSON lines,
then a line with the charge and counters.  Dot commands (alone on a line):
.help .containers .use NAME .pk VALUE|off .max N|off .more .history .quit.
Without .use, a query runs on the container its FROM names when one has
that name (FROM posts p).

On a terminal it reads with GNU readline (Debian's lua-readline) when it
is installed, with the history kept in ~/.regolith_history
(REGOLITH_HISTORY to choose another file); otherwise it reads plain lines
and keeps the history in memory.  With input that is not a terminal (a
file, a pipe) no prompt is shown, and the exit code is 1 if a statement
failed.
]]

local common = require "regolith.cli.common"

local M = {}

local HELP = [[
  SELECT ... ;          run a query (it may span lines; ';' ends it)
  .containers           list the containers
  .use NAME             run the queries on container NAME
  .pk VALUE | .pk off   run them in one logical partition (JSON, or a string)
  .max N | .max off     pages of N rows (.more shows the next page)
  .more                 the next page of the last query
  .history              the statements of this session
  .quit                 leave (or Ctrl-D)]]

-- A line reader: readline on a terminal when it is there, else io.read.
local function reader(interactive)
  local history = {}
  local rl
  if interactive then
    local ok, lib = pcall(require, "readline")
    if ok then
      rl = lib
      local file = os.getenv("REGOLITH_HISTORY") or
        ((os.getenv("HOME") or ".") .. "/.regolith_history")
      rl.set_options({ histfile = file, keeplines = 1000, completion = false,
                       auto_add = false })
    end
  end
  local self = { history = history }
  function self.read(prompt)
    local line
    if rl then line = rl.readline(prompt)
    else
      if interactive then
        io.stdout:write(prompt)
        io.stdout:flush()
      end
      line = io.read("*l")
    end
    return line
  end
  function self.remember(statement)
    history[#history + 1] = statement
    if rl then rl.add_history(statement) end
  end
  function self.close()
    if rl then rl.save_history() end
  end
  return self
end

function M.shell(args)
  local db = common.open(args.dir, { readonly = true })
  local interactive = common.is_tty(0)
  local state = { pk = nil, max = nil, last = nil }
  if args.container then
    state.container = common.container(db, args.container)
  end
  local failed = false
  local function say(fmt, ...) io.stdout:write(fmt:format(...), "\n") end
  local function problem(msg, status)
    failed = true
    say("error: %s%s", msg, status and (" (status " .. status .. ")") or "")
  end

  local function show(q)
    local rows, info, status = q.c:query(q.sql, nil, {
      partition_key = q.pk, max_items = q.max,
      continuation = q.continuation })
    if not rows then return problem(info, status) end
    for _, row in ipairs(rows) do say("%s", common.encode(row)) end
    local line = ("-- %d row(s); charge %s RU; partitions %d; loaded %d; " ..
      "index lookups %d"):format(#rows, common.num(info.charge),
      info.partitions, info.loaded, info.index_lookups)
    if info.continuation then line = line .. "; more: .more" end
    say("%s", line)
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

  local commands = {}
  function commands.help() say("%s", HELP) end
  function commands.containers()
    for _, name in ipairs(db:containers()) do say("%s", name) end
  end
  function commands.use(arg)
    local c, msg, status = db:container(arg or "")
    if not c then return problem(msg, status) end
    state.container = c
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
  local input = reader(interactive)
  function commands.history()
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
    if #buffer == 0 and line:match("^%s*%.") then
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
