--[[
blog.v1: the article's first model.

Two containers:
- `users`, partitioned by /id: one user per logical partition,
  {id, username}.
- `posts`, partitioned by /postId: a post, its comments and its likes in
  the post's logical partition, told apart by `type`:
  {id, type = "post", postId, userId, title, content, creationDate},
  {id, type = "comment", postId, userId, content, creationDate},
  {id, type = "like", postId, userId, creationDate}.

Items reference one another and nothing is copied, so the reads assemble
what they return: the author's username with a point read in `users`, the
counts of comments and likes with a COUNT query each.  Listing a user's
posts and the newest posts fan out over every physical partition of
`posts`, then assemble every post of the list.  That is why Q2-Q6 cost
what they cost.

    local v1 = require("blog.v1").open(db)
    local post, charge = v1:get_post("p1-1")       -- Q2

Every request returns its result and the sum of the charges of all the
calls it made, or nil, message, status.  The container `posts` has a
composite index (type, creationDate DESC), which a user of the hosted
service adds for Q6's ORDER BY: with it the query reads the 100 newest
posts instead of sorting them all.
]]

local common = require "blog.common"
local charged = common.charged

local M = { name = "V1" }
M.__index = M

local P = common.PARTITIONS

M.POSTS_SPEC = {
  partition_key = "/postId",
  physical_partitions = P,
  indexing = { composite = {
    { { path = "/type", order = "ascending" },
      { path = "/creationDate", order = "descending" } },
  } },
}

-- Opens the model on db, creating its containers when missing.
function M.open(db)
  local self = setmetatable({ db = db }, M)
  self.users = common.container(db, "users",
    { partition_key = "/id", physical_partitions = P })
  self.posts = common.container(db, "posts", M.POSTS_SPEC)
  return self
end

-- Nothing is denormalized: no processor to run.
function M:pump() return 0 end

local COUNT_COMMENTS = "SELECT VALUE COUNT(1) FROM p " ..
  "WHERE p.postId = @postId AND p.type = 'comment'"
local COUNT_LIKES = "SELECT VALUE COUNT(1) FROM p " ..
  "WHERE p.postId = @postId AND p.type = 'like'"
local USER_POSTS = "SELECT " .. common.SHORT_SELECT .. " FROM p " ..
  "WHERE p.userId = @userId AND p.type = 'post' ORDER BY p.creationDate DESC"
local NEWEST = "SELECT TOP 100 " .. common.SHORT_SELECT .. " FROM p " ..
  "WHERE p.type = 'post' AND IS_STRING(p.creationDate) " ..
  "ORDER BY p.creationDate DESC"
local COMMENTS = "SELECT * FROM p WHERE p.postId = @postId AND " ..
  "p.type = 'comment'"
local LIKES = "SELECT * FROM p WHERE p.postId = @postId AND p.type = 'like'"

-- [C1] Create or edit a user.
function M:create_user(u)
  return charged(self.users:upsert({ id = u.id,
    username = u.username }))
end

-- [Q1] Retrieve a user.
function M:get_user(id)
  return charged(self.users:read(id, id))
end

local function post_item(p)
  return { id = p.id, type = "post", postId = p.id, userId = p.userId,
           title = p.title, content = p.content,
           creationDate = p.creationDate }
end

local function comment_item(c)
  return { id = c.id, type = "comment", postId = c.postId, userId = c.userId,
           content = c.content, creationDate = c.creationDate }
end

M.comment_item = comment_item   -- the item a comment is (durable.lua too)

local function like_item(l)
  return { id = l.id, type = "like", postId = l.postId, userId = l.userId,
           creationDate = l.creationDate }
end

-- [C2] Create a post.
function M:create_post(p)
  return charged(self.posts:create(post_item(p)))
end

-- The username of user id (nil if the user is gone) and its charge.
local function username(self, id)
  local user, info = self.users:read(id, id)
  return user and user.username, info and info.charge or 0
end

-- Adds the author's username and the counts to a post or a short post;
-- returns the charge of the three requests.
local function assemble(self, post, name)
  local charge = 0
  if name == nil then
    name, charge = username(self, post.userId)
  end
  post.userUsername = name
  local params = { postId = post.postId }
  local n, info, status = self.posts:query(COUNT_COMMENTS, params)
  if not n then error(info .. " " .. status) end
  post.commentCount = n[1]
  charge = charge + info.charge
  n, info, status = self.posts:query(COUNT_LIKES, params)
  if not n then error(info .. " " .. status) end
  post.likeCount = n[1]
  return charge + info.charge
end

-- [Q2] Retrieve a post: the post, its author's username, its counts.
function M:get_post(postId)
  local post, info, status = self.posts:read(postId, postId)
  if not post then return nil, info, status end
  return post, info.charge + assemble(self, post)
end

-- [Q3] List a user's posts in short form, newest first.  The query fans
-- out (posts are not partitioned by user); then the author's username
-- once, and the counts of each post.
function M:list_user_posts(userId)
  local rows, info, status = self.posts:query(USER_POSTS, { userId = userId })
  if not rows then return nil, info, status end
  local charge = info.charge
  if #rows > 0 then
    local name, c = username(self, userId)
    charge = charge + c
    for i = 1, #rows do charge = charge + assemble(self, rows[i], name) end
  end
  return rows, charge
end

-- [C3] Create a comment.
function M:create_comment(c)
  return charged(self.posts:create(comment_item(c)))
end

-- The items of one post found by `sql`, each with its author's username.
local function with_usernames(self, sql, postId)
  local rows, info, status = self.posts:query(sql, { postId = postId })
  if not rows then return nil, info, status end
  local charge = info.charge
  for i = 1, #rows do
    local name, c = username(self, rows[i].userId)
    rows[i].userUsername = name
    charge = charge + c
  end
  return rows, charge
end

-- [Q4] List a post's comments, each with its author's username.
function M:list_comments(postId)
  return with_usernames(self, COMMENTS, postId)
end

-- [C4] Like a post.
function M:like_post(l)
  return charged(self.posts:create(like_item(l)))
end

-- [Q5] List a post's likes, each with its author's username.
function M:list_likes(postId)
  return with_usernames(self, LIKES, postId)
end

-- [Q6] The 100 most recent posts in short form, newest first, each with
-- its author's username and its counts.
function M:list_recent_posts()
  local rows, info, status = self.posts:query(NEWEST)
  if not rows then return nil, info, status end
  local charge = info.charge
  for i = 1, #rows do charge = charge + assemble(self, rows[i]) end
  return rows, charge
end

-- The initial data set, as bulk load takes it (blog.load): the users, and
-- every post followed by its comments and likes, as C1-C4 store them.
function M:bulk_sources(gen)
  local load = require "blog.load"
  return {
    { container = self.users, docs = load.users(gen, function(u)
        return { id = u.id, username = u.username } end) },
    { container = self.posts, docs = load.posts(gen, function(g, kind, i)
        if kind == "post" then return post_item(g.post) end
        if kind == "comment" then return comment_item(g.comments[i]) end
        return like_item(g.likes[i])
      end) },
  }
end

-- Loads a post with its comments and likes: C2, C3 and C4, grouped into
-- transactional batches of up to 100 creates in the post's partition
-- (nothing in V1 ties them together, so batching changes no semantics).
-- Returns the items written and their charge.
function M:load_post(p, comments, likes)
  local ops = { { op = "create", doc = post_item(p) } }
  for i = 1, #comments do
    ops[#ops + 1] = { op = "create", doc = comment_item(comments[i]) }
  end
  for i = 1, #likes do
    ops[#ops + 1] = { op = "create", doc = like_item(likes[i]) }
  end
  local charge, i = 0, 1
  while i <= #ops do
    local chunk = {}
    for j = i, math.min(i + 99, #ops) do chunk[#chunk + 1] = ops[j] end
    local res, info, status = self.posts:batch(p.id, chunk)
    if not res then return nil, info, status end
    charge = charge + info.charge
    i = i + 100
  end
  return #ops, charge
end

return M
