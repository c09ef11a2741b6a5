--[[
blog.load: loads the generated data set into a model through the model's
own commands: C1 for every user, then for every post C2, C3 and C4 (each
model's load_post groups them as its semantics allow: V1 in transactional
batches, V2 and V3 through the createComment and createLike procedures
given all of a post's comments or likes at once).  The processors run as
an application would run them, every few thousand writes, and until idle
at the end, so that they make every denormalized copy.

    local load = require "blog.load"
    local stats = load.run(model, gen, { label = "V2" })
    -- stats = {items, seconds, charge, users, posts, comments, likes}
]]

local system = require "system"

local M = {}

local now = system.monotime

-- Is stderr a terminal?  (Then progress rewrites one line.)
local tty
local function is_tty()
  if tty == nil then
    local ok = os.execute("test -t 2")       -- true (5.4) or 0 (LuaJIT)
    tty = ok == true or ok == 0
  end
  return tty
end

M.is_tty = is_tty

-- A progress reporter: rewrites one line on a terminal (at most every
-- 0.25 s), prints a line every 10 s otherwise.
function M.progress(label, total)
  local t0 = now()
  local last = t0
  local every = is_tty() and 0.25 or 10
  local shown = false
  local self = {}
  function self.update(done)
    local t = now()
    if t - last < every then return end
    last = t
    local rate = done / math.max(t - t0, 1e-9)
    local line = ("%s: %5.1f%%  %d of %d items  %.0f items/s"):format(label,
      100 * done / math.max(total, 1), done, total, rate)
    if is_tty() then io.stderr:write("\r", line, "   ")
    else io.stderr:write(line, "\n") end
    shown = true
  end
  function self.done()
    if shown and is_tty() then io.stderr:write("\r", (" "):rep(72), "\r") end
  end
  return self
end

local PUMP_EVERY = 5000     -- writes between two runs of the processors

-- Loads gen's data set into model m.  opts.label names it in the progress
-- line; opts.quiet turns progress off.
function M.run(m, gen, opts)
  opts = opts or {}
  local size = gen:size()
  local total = size.users + size.posts + size.comments + size.likes
  local progress = M.progress(opts.label or m.name, total)
  local t0 = now()
  local items, charge, since_pump = 0, 0, 0
  for u = 1, gen.users do
    local _, c = assert(m:create_user(gen:user(u)))
    items, charge = items + 1, charge + c
    if not opts.quiet then progress.update(items) end
  end
  for u = 1, gen.users do
    for k = 1, gen:posts_of(u) do
      local p = gen:post(u, k)
      local n, c = assert(m:load_post(p.post, p.comments, p.likes))
      items, charge = items + n, charge + c
      since_pump = since_pump + n
      if since_pump >= PUMP_EVERY then
        m:pump()
        since_pump = 0
      end
      if not opts.quiet then progress.update(items) end
    end
  end
  m:pump()
  progress.done()
  assert(items == total, "the load wrote another number of items")
  return { items = items, seconds = now() - t0, charge = charge,
           users = size.users, posts = size.posts, comments = size.comments,
           likes = size.likes }
end

return M
