--[[
The Lua side of blog.test.mjs: the blog's data set, its scripts, and the
answers of its V3 model (examples/blog/v3.lua) to a scenario of requests,
as JSON on stdout, for the JavaScript SDK's run of the same model through
the gateway to be compared with.

    lua5.4 tests/sdk/blog_model.lua scripts             the Lua sources
    lua5.4 tests/sdk/blog_model.lua data SCALE          users, posts
    lua5.4 tests/sdk/blog_model.lua answers SCALE DIR   loads V3 into a new
                                                       database in DIR, runs
                                                       the scenario
(from the repository root, with LUA_PATH naming lua/ and examples/).

The scenario: after the load, rename a user (C1), write a post newer than
every other (C2), comment on it and like it (C3, C4), then every read
(Q1-Q6) on a few keys.  The processors run after each write, as the
application's loop would.
]]

local regolith = require "regolith"
local data = require "blog.data"
local load = require "blog.load"
local scripts = require "blog.scripts"

local json = regolith.json

local function out(v)
  io.write(assert(json.encode(v)), "\n")
end

-- The scenario's steps: {req, arg} with the key or the document.
local function scenario(gen)
  local newest = data.iso(2 * 365 * 86400 * data.TICKS + 3 * 86400 * data.TICKS)
  local steps = {
    { "C1", { id = gen:user_id(1), username = "renamed-1" } },
    { "C2", { id = "p-new", userId = gen:user_id(2), username = gen:username(2),
              title = "The newest post", content = ("x"):rep(150),
              creationDate = newest } },
    { "C3", { id = "c-new", postId = "p-new", userId = gen:user_id(1),
              username = "renamed-1", content = "first",
              creationDate = newest } },
    { "C4", { id = "l-new", postId = "p-new", userId = gen:user_id(3),
              username = gen:username(3), creationDate = newest } },
  }
  for u = 1, math.min(3, gen.users) do steps[#steps + 1] = { "Q1", gen:user_id(u) } end
  for _, pid in ipairs({ gen:post_id(1, 1), gen:post_id(2, 1), "p-new" }) do
    steps[#steps + 1] = { "Q2", pid }
    steps[#steps + 1] = { "Q4", pid }
    steps[#steps + 1] = { "Q5", pid }
  end
  for u = 1, math.min(3, gen.users) do steps[#steps + 1] = { "Q3", gen:user_id(u) } end
  steps[#steps + 1] = { "Q6" }
  return steps
end

local CALLS = {
  C1 = "create_user", C2 = "create_post", C3 = "create_comment",
  C4 = "like_post", Q1 = "get_user", Q2 = "get_post", Q3 = "list_user_posts",
  Q4 = "list_comments", Q5 = "list_likes", Q6 = "list_recent_posts",
}

local cmd = arg[1]
if cmd == "scripts" then
  out({ createComment = scripts.createComment, createLike = scripts.createLike,
        updateUsernames = scripts.updateUsernames,
        truncateFeed = scripts.truncateFeed })
elseif cmd == "data" then
  local gen = data.new(tonumber(arg[2]))
  local users, posts = {}, {}
  for u = 1, gen.users do
    users[u] = gen:user(u)
    for k = 1, gen:posts_of(u) do posts[#posts + 1] = gen:post(u, k) end
  end
  out({ users = users, posts = posts, scenario = scenario(gen) })
elseif cmd == "answers" then
  local gen = data.new(tonumber(arg[2]))
  local db = assert(regolith.open(arg[3], { sync = "none" }))
  local v3 = require("blog.v3").open(db)
  -- through the model's requests, as the SDK side loads (a bulk load gives
  -- a batch one _lsn, so its items' sizes, and the charges of the queries
  -- loading them, would differ)
  load.run(v3, gen, { quiet = true, requests = true })
  local answers = {}
  for i, step in ipairs(scenario(gen)) do
    local fn = v3[CALLS[step[1]]]
    local result, charge = assert(fn(v3, step[2]))
    v3:pump()
    answers[i] = { req = step[1], result = result, charge = charge }
  end
  db:close()
  out(answers)
else
  io.stderr:write("usage: blog_model.lua scripts | data SCALE | answers SCALE DIR\n")
  os.exit(2)
end
