-- The blog example on both backends: each model loaded through its own
-- commands (procedures, the trigger, the processors) into a local
-- database and into one on the cluster gives the same answer to every
-- request on every key, and (but for the width of _lsn) the same charges
-- for loading.  (docs/cluster.md, Fault tests: parity.)
package.path = "examples/?.lua;" .. package.path

local C = require "cluster.support"
local H = require "helper"
local regolith = require "regolith"
local data = require "blog.data"
local load = require "blog.load"
local checks = require "blog.checks"

describe("cluster parity with a local database", function()
  if not C.ready(pending) then return end
  local gen = data.new(0.00004, 5)

  local function all_keys()
    local keys = { users = {}, posts = {} }
    for u = 1, gen.users do
      keys.users[#keys.users + 1] = gen:user_id(u)
      for k = 1, gen:posts_of(u) do keys.posts[#keys.posts + 1] = gen:post_id(u, k) end
    end
    return keys
  end

  for _, name in ipairs({ "V1", "V3" }) do
    it("answers every blog request alike in " .. name, function()
      local loaded = {}
      for _, path in ipairs({ H.tmpdir(), "redis://" .. C.seeds .. "/" .. C.fresh_db() }) do
        local db = assert(regolith.open(path, { sync = "none" }))
        local m = require("blog." .. name:lower()).open(db)
        local st = load.run(m, gen, { quiet = true, requests = true })
        loaded[#loaded + 1] = { m = m, charge = st.charge, db = db }
      end
      local keys = all_keys()
      local a = checks.answers(loaded[1].m, keys)
      local b = checks.answers(loaded[2].m, keys)
      assert(checks.same(a, b, "local", "cluster"))
      -- the same work; a cluster's _lsn and _etag are a clock (16 digits,
      -- 13 hex) where a local one counts commits, so its documents are a
      -- few bytes longer and queries load a little more (0.1 RU a KB)
      local diff = math.abs(loaded[1].charge - loaded[2].charge)
      assert.is_true(diff <= loaded[1].charge * 0.005,
        ("load charges %.2f and %.2f"):format(loaded[1].charge, loaded[2].charge))
      for _, l in ipairs(loaded) do l.db:close() end
      H.cleanup()
    end)
  end
end)
