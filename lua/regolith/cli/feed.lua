--[[
regolith.cli.feed: the change feed (feed) and the processors (processors).
]]

local common = require "regolith.cli.common"
local processor = require "regolith.processor"

local EXIT = common.EXIT
local fail, check, note = common.fail, common.check, common.note

local M = {}

local PAGE = 1000               -- changes read per call

local function is_interrupt(err)
  return type(err) == "string" and err:find("interrupted!", 1, true)
end

function M.feed(args)
  local opts = { mode = args.mode }
  if args.continuation then
    opts.continuation = args.continuation
  elseif args.start == "beginning" or args.start == "now" then
    opts.start = args.start
  else
    opts.start = common.time_arg(args.start)
    if not opts.start then
      common.usage("--start must be beginning, now, seconds since the " ..
        "epoch or a UTC time such as 2024-05-01T12:00:00Z")
    end
  end
  local limit = args.max_items
  if limit and (limit < 1 or limit ~= math.floor(limit)) then
    common.usage("--max-items must be a whole number from 1")
  end
  if args.follow and limit then
    common.usage("--follow and --max-items do not go together")
  end
  if not (args.interval and args.interval > 0) then
    common.usage("--interval must be a number of seconds above 0")
  end
  local db = common.open(args.dir, { readonly = true })
  local c = common.container(db, args.container)
  if args.partition_key then
    opts.partition_key = common.value_arg(args.partition_key)
  end
  local n, charge, token = 0, 0, nil

  local function read()
    opts.max_items = limit and math.min(PAGE, limit - n) or PAGE
    local changes, info, status = c:changes(opts)
    check(changes, info, status)
    for _, change in ipairs(changes) do common.write_json(change) end
    n, charge = n + #changes, charge + info.charge
    token = info.continuation
    opts.continuation, opts.start = token, nil
    return #changes
  end

  local ok, err = pcall(function()
    while true do
      local got = read()
      if args.follow then
        io.stdout:flush()
        if got == 0 then common.sleep(args.interval) end
      elseif got == 0 or (limit and n >= limit) then
        break
      end
    end
  end)
  io.stdout:flush()
  if not ok and not is_interrupt(err) then error(err, 0) end
  note("%d changes, %s RU", n, common.num(charge))
  if token then note("continuation: %s", token) end
  if not ok then return EXIT.interrupted end
end

-- {=====================================================================
-- Processors
-- ======================================================================
local function show_status(st)
  print(("processor '%s' on '%s' (%s): lag %d, %d dead letter(s)"):format(
    st.name, st.source, st.mode, st.lag, st.dead_letters))
  print(("  %-5s %-32s %8s %8s %9s %9s %10s"):format("range", "owner",
    "expires", "lag", "failures", "attempts", "delivered"))
  for _, r in ipairs(st.ranges) do
    print(("  %-5d %-32s %8s %8d %9d %9d %10d"):format(r.range,
      r.owner or "(free)", r.expires and ("%.0fs"):format(r.expires) or "-",
      r.lag, r.failures, r.attempts, r.delivered))
  end
end

local function letter_summary(d)
  return ("dead letter %d: range %d, %d change(s), %d attempt(s), at %s: %s")
    :format(d.seq, d.range, #d.changes, d.attempts,
      os.date("!%Y-%m-%dT%H:%M:%SZ", d.ts), d.error)
end

-- The dead letters named by an option's value: a sequence number or all.
local function letters(view, value, option)
  local dead = check(view:dead_letters())
  if value == "all" then return dead end
  local seq = tonumber(value)
  if not seq or seq ~= math.floor(seq) then
    common.usage("%s takes a dead letter's sequence number or all", option)
  end
  for _, d in ipairs(dead) do
    if d.seq == seq then return { d } end
  end
  fail(EXIT.failed, "no dead letter %d (status 404)", seq)
end

function M.processors(args)
  local db = common.open(args.dir)
  local c = common.container(db, args.container)
  if args.name == nil then          -- the container's processors
    local list = check(c:processors())
    if #list == 0 and not args.json then
      note("no processors on '%s'", args.container)
    end
    for _, p in ipairs(list) do
      if args.json then common.write_json(p)
      else print(("%s (%s)"):format(p.name, p.mode)) end
    end
    return
  end
  local view = check(processor.inspect(db, args.container, args.name,
    args.mode))
  if args.redrive then
    for _, d in ipairs(letters(view, args.redrive, "--redrive")) do
      local r = check(view:redrive(d))
      check(view:drop_dead_letter(d.seq))
      note("dead letter %d: %d item(s) written again, %d skipped, %s RU; " ..
        "removed", d.seq, r.written, r.skipped, common.num(r.charge))
    end
  end
  if args.drop then
    local n = 0
    for _, d in ipairs(letters(view, args.drop, "--drop")) do
      check(view:drop_dead_letter(d.seq))
      n = n + 1
    end
    note("dropped %d dead letter(s)", n)
  end
  if args.dead_letters then
    for _, d in ipairs(check(view:dead_letters())) do common.write_json(d) end
  elseif args.json then
    common.write_json(check(view:status()))
  elseif not (args.redrive or args.drop) then
    show_status(check(view:status()))
    for _, d in ipairs(check(view:dead_letters())) do
      print(letter_summary(d))
    end
  end
  view:close()
end
-- }=====================================================================

return M
