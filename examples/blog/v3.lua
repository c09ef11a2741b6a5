--[[
blog.v3: the article's third model: every request in one partition.

V2 still fans out for Q3 (a user's posts: `posts` is not partitioned by
user) and Q6 (the newest posts: no partition holds them).  V3 adds copies
partitioned for those two reads:
- `users` is partitioned by /userId and holds, beside each user
  {id, type = "user", userId, username}, a short-form copy of each of the
  user's posts {id, type = "post", postId, userId, userUsername, title,
  content (cut to 100 characters), commentCount, likeCount, creationDate}.
  Q3 becomes one query in the user's partition.
- `feed`, partitioned by /type (always "post": one logical partition),
  holds the same short form of the 100 most recent posts; every write
  into it names the post-trigger truncateFeed, which deletes the oldest
  beyond 100.  Q6 becomes one query in that partition.
A processor on the change feed of `posts` keeps both copies: every new or
changed post (a new comment or like changes its counts, a new username
its userUsername) is upserted into its author's partition of `users` and
into `feed`.  Usernames and counts reach `posts` as in V2.

    local v3 = require("blog.v3").open(db)
    local newest, charge = v3:list_recent_posts()           -- Q6
]]

local common = require "blog.common"
local charged = common.charged
local scripts = require "blog.scripts"
local v2 = require "blog.v2"

local M = setmetatable({ name = "V3" }, { __index = v2 })
M.__index = M

local P = common.PARTITIONS

local USER_POSTS = "SELECT * FROM u WHERE u.userId = @userId AND " ..
  "u.type = 'post' ORDER BY u.creationDate DESC"
local NEWEST = "SELECT TOP 100 * FROM f WHERE f.type = 'post' AND " ..
  "IS_STRING(f.creationDate) ORDER BY f.creationDate DESC"

-- The feed's composite index lets the newest (and the oldest) posts be
-- read in order, without sorting the partition.
M.FEED_SPEC = {
  partition_key = "/type",
  indexing = { composite = {
    { { path = "/type", order = "ascending" },
      { path = "/creationDate", order = "descending" } },
  } },
}

-- The handler of the processor on `posts`: copies each post it sees (the
-- feed also holds comments and likes) into `users` and `feed`.
function M:copies_handler()
  local users, feed = self.users, self.feed
  local opts = { post_trigger = "truncateFeed" }
  return function(changes, info)
    local d = self.denorm
    d.changes = d.changes + #changes
    d.charge = d.charge + info.charge
    for _, post in ipairs(changes) do
      if post.type == "post" then
        local copy = common.short_post(post)
        local _, i1 = assert(users:upsert(copy))
        local _, i2 = assert(feed:upsert(copy, opts))
        d.copies = d.copies + 1         -- a post copied
        d.items = d.items + 2           -- into two items
        d.charge = d.charge + i1.charge + i2.charge
      end
    end
  end
end

local function is_user(item) return item.type == "user" end

-- Opens the model on db, creating its containers, procedures, trigger and
-- processors when missing.
function M.open(db)
  local self = setmetatable({ db = db, denorm = v2.new_denorm() }, M)
  self.users = common.container(db, "users",
    { partition_key = "/userId", physical_partitions = P })
  self.posts = common.container(db, "posts",
    { partition_key = "/postId", physical_partitions = P })
  self.feed = common.container(db, "feed", M.FEED_SPEC)
  scripts.install_procedures(self.posts,
    { "createComment", "createLike", "updateUsernames" })
  scripts.install_truncate_feed(self.feed)
  self.processors = {
    assert(db:processor(v2.processor_opts("usernames", "users",
      self:usernames_handler(is_user)))),
    assert(db:processor(v2.processor_opts("copies", "posts",
      self:copies_handler()))),
  }
  return self
end

-- A user as V3 stores it (in its own partition of users).
function M.user_doc(u)
  return { id = u.id, type = "user", userId = u.id, username = u.username }
end

-- [C1] Create or edit a user.
function M:create_user(u)
  return charged(self.users:upsert(M.user_doc(u)))
end

-- [Q1] Retrieve a user: a point read (the partition key is the id too).
function M:get_user(id)
  return charged(self.users:read(id, id))
end

local function query(c, sql, params)
  return charged(c:query(sql, params))
end

-- [Q3] List a user's posts in short form: one query in the user's
-- partition of `users`.
function M:list_user_posts(userId)
  return query(self.users, USER_POSTS, { userId = userId })
end

-- [Q6] The 100 most recent posts in short form: one query in `feed`.
function M:list_recent_posts()
  return query(self.feed, NEWEST)
end

return M
