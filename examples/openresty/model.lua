--[[
model: the model the HTTP app serves, and how the load script fills and
checks it.  One place to change when the model changes.

    local model = require "model"
    local m = model.open(db, instance)   -- retries a lost creation race
    model.generator(scale)               -- the data set
    model.load(m, gen)                   -- C1-C4 through the model
    model.checks(m, wait)                -- {{name, ok, message}, ...};
                                         -- wait(): the processors caught up
]]

local mini = require "mini"

local M = { name = "mini (a stand-in for the blog's V3)" }

-- Opens the model on db, its processors an instance named `instance`.
-- Processes that start together on a new database may race to create its
-- containers and procedures: the loser of such a race gets a conflict and
-- finds everything there on its next try.
function M.open(db, instance)
  mini.INSTANCE = instance
  local last
  for _ = 1, 10 do
    local ok, m = pcall(mini.open, db)
    if ok then return m end
    last = m
  end
  error(last, 0)
end

-- scale 1: 100,000 users, as the blog's data set.
function M.generator(scale)
  return mini.generator(math.max(1, math.floor(100000 * scale + 0.5)))
end

M.load = mini.load
M.checks = mini.checks

return M
