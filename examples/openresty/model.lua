--[[
model: the model the HTTP app serves, and how the load script fills and
checks it: the blog example's V3 (examples/blog: the model, its data set,
its loader and its checks).

    local model = require "model"
    local m = model.open(db, instance)   -- retries a lost creation race
    model.generator(scale)               -- the data set
    model.load(m, gen)                   -- C1-C4 through the model
    model.checks(m, wait)                -- {{name, ok, message}, ...};
                                         -- wait(): the processors caught up
]]

local common = require "blog.common"
local v2 = require "blog.v2"
local v3 = require "blog.v3"
local data = require "blog.data"
local loader = require "blog.load"
local C = require "blog.checks"

local M = { name = "the blog's V3" }

-- In nginx a transactional batch holds LMDB's one writer lock, which every
-- write of every worker waits for while its event loop stands still:
-- batches of 100 changes instead of the example's 1000 keep that short.
local processor_opts = v2.processor_opts
function v2.processor_opts(...)
  local opts = processor_opts(...)
  opts.max_items = 100
  return opts
end

-- Opens the model on db, its processors an instance named `instance`
-- (nil: one unique to this process).  Processes that start together on a
-- new database may race to create its containers, procedures and
-- trigger: the loser of such a race gets a conflict and finds everything
-- there on its next try.
function M.open(db, instance)
  common.INSTANCE = instance
  local last
  for _ = 1, 10 do
    local ok, m = pcall(v3.open, db)
    if ok then return m end
    last = m
  end
  error(last, 0)
end

function M.generator(scale) return data.new(scale) end

function M.load(m, gen) return loader.run(m, gen, { quiet = true }) end

-- The blog's checks.  Its processors run in the server's workers, not
-- here, so the model's pump becomes `wait`.
function M.checks(m, wait)
  m.pump = function() wait() end
  local out = {}
  local function add(name, ok, msg) out[#out + 1] = { name, ok, msg } end
  add("counts: commentCount and likeCount are right", C.counts(m))
  add("copies: users holds every post's short form", C.copies(m))
  add("feed: exactly the 100 newest posts", C.feed(m))
  add("newest: Q6 gives the 100 newest posts", C.newest(m))
  add("rename: a username reaches every copy", C.rename(m, "u1"))
  return out
end

return M
