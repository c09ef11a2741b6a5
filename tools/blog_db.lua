--[[
tools/blog_db.lua: a database holding the blog's data set, for the
explorer's browser test and the command's specs.

    lua5.4 tools/blog_db.lua DIR [SCALE] [MODEL]

Loads the article's data set at SCALE (default 0.0001: 10 users, about
260 posts) into DIR through MODEL (V1, V2 or V3; default V3, whose
procedures, trigger and processors fill users, posts and feed), with
examples/blog/load.lua.  DIR must not hold a database yet.
]]

package.path = "examples/?.lua;" .. package.path

local regolith = require "regolith"
local data = require "blog.data"
local load = require "blog.load"

local dir, scale, model = arg[1], tonumber(arg[2] or "0.0001"), arg[3] or "V3"
if not dir or not scale or not ({ V1 = 1, V2 = 1, V3 = 1 })[model] then
  io.stderr:write("usage: lua5.4 tools/blog_db.lua DIR [SCALE] [V1|V2|V3]\n")
  os.exit(2)
end
local f = io.open(dir .. "/data.mdb")
if f then
  f:close()
  io.stderr:write(dir, " already holds a database\n")
  os.exit(1)
end
local db = assert(regolith.open(dir, { sync = "none" }))
local m = require("blog." .. model:lower()).open(db)
local stats = load.run(m, data.new(scale, 1), { quiet = true })
db:close()
print(("%s: %d items (%d users, %d posts, %d comments, %d likes) in %.1f s")
  :format(dir, stats.items, stats.users, stats.posts, stats.comments,
    stats.likes, stats.seconds))
