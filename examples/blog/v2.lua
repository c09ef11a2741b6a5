--[[
blog.v2: the article's second model, denormalized for the reads.

The containers are V1's, but the items carry what the reads used to fetch:
- posts carry userUsername, commentCount and likeCount;
- comments and likes carry userUsername.

So Q2 is one point read, and Q4 and Q5 one query in the post's partition.
The copies are kept right by the database itself:
- The counts by the stored procedures createComment and createLike (the
  post, its comments and its likes share the post's partition, so the
  procedure reads the post, counts the new item, replaces the post and
  creates the item in one atomic step).  C3 and C4 call them.
- The usernames by a processor on the change feed of `users`: when a user
  changes, it asks `posts` which partitions hold items of that user that
  carry another username (one fan-out query), and runs the stored
  procedure updateUsernames in each of them.  The processor is
  transactional: its writes and its checkpoint commit together, so each
  change is carried exactly once.
A new post (C2) takes its author's username from the application, which
knows who is writing; a comment or a like likewise.

Q3 and Q6 still fan out over every physical partition of `posts`.

    local v2 = require("blog.v2").open(db)
    v2:create_comment{ id = "c9", postId = "p1-1", userId = "u7",
                       username = "kalo12", content = "Nice",
                       creationDate = "2024-06-01T10:00:00.0000000Z" }
    v2:pump()          -- runs the processors (an application's loop does)
]]

local common = require "blog.common"
local charged = common.charged
local scripts = require "blog.scripts"
local v1 = require "blog.v1"

local M = { name = "V2" }
M.__index = M

local P = common.PARTITIONS

local USER_POSTS = "SELECT " .. common.SHORT_SELECT .. " FROM p " ..
  "WHERE p.userId = @userId AND p.type = 'post' ORDER BY p.creationDate DESC"
local NEWEST = "SELECT TOP 100 " .. common.SHORT_SELECT .. " FROM p " ..
  "WHERE p.type = 'post' AND IS_STRING(p.creationDate) " ..
  "ORDER BY p.creationDate DESC"
local COMMENTS = "SELECT * FROM p WHERE p.postId = @postId AND " ..
  "p.type = 'comment'"
local LIKES = "SELECT * FROM p WHERE p.postId = @postId AND p.type = 'like'"
local STALE = "SELECT DISTINCT VALUE p.postId FROM p " ..
  "WHERE p.userId = @userId AND p.userUsername != @username"

-- The work the processors did: changes seen, and the charge of their feed
-- reads and of the writes they made.
function M.new_denorm()
  return { changes = 0, charge = 0, users = 0, partitions = 0, copies = 0,
           items = 0 }
end

-- Carries a user's username into every item of `posts` that carries
-- another one: finds the partitions, then runs updateUsernames in each,
-- again while a call rewrites as many as one call may.  Returns the charge.
function M:carry_username(user)
  local pids, info = assert(self.posts:query(STALE,
    { userId = user.id, username = user.username }))
  local charge = info.charge
  for _, pid in ipairs(pids) do
    local n
    repeat
      local pinfo
      n, pinfo = assert(self.posts:execute("updateUsernames", pid,
        user.id, user.username))
      charge = charge + pinfo.charge
    until n < scripts.RENAME_BATCH
  end
  self.denorm.partitions = self.denorm.partitions + #pids
  return charge
end

-- The handler of the processor on `users`.  `is_user` tells users from
-- the other items of the container (V3 keeps post copies there).
function M:usernames_handler(is_user)
  return function(changes, info)
    local d = self.denorm
    d.changes = d.changes + #changes
    d.charge = d.charge + info.charge
    for _, user in ipairs(changes) do
      if is_user(user) then
        d.users = d.users + 1
        d.charge = d.charge + self:carry_username(user)
      end
    end
  end
end

-- The processor options shared by the models.
function M.processor_opts(name, source, handler)
  return {
    name = name, source = source, handler = handler,
    instance = common.INSTANCE, max_items = 1000,
    on_error = function(err, _, info)
      io.stderr:write(("processor %s: attempt %d failed: %s\n"):format(
        name, info.attempt, tostring(err)))
    end,
  }
end

-- Opens the model on db, creating its containers, procedures and
-- processor when missing.
function M.open(db)
  local self = setmetatable({ db = db, denorm = M.new_denorm() }, M)
  self.users = common.container(db, "users",
    { partition_key = "/id", physical_partitions = P })
  self.posts = common.container(db, "posts", v1.POSTS_SPEC)
  scripts.install_procedures(self.posts,
    { "createComment", "createLike", "updateUsernames" })
  self.processors = {
    assert(db:processor(M.processor_opts("usernames", "users",
      self:usernames_handler(function() return true end)))),
  }
  return self
end

-- Runs the model's processors until they have no work left.
function M:pump()
  return common.pump(self.db)
end

-- Changes the processors have not handled yet.
function M:lag()
  local total = 0
  for _, p in ipairs(self.processors) do total = total + p:lag() end
  return total
end

-- Batches a processor gave up on (none, when all is well).
function M:dead_letters()
  local n = 0
  for _, p in ipairs(self.processors) do n = n + #p:dead_letters() end
  return n
end

-- [C1] Create or edit a user (the processor carries a new username).
M.create_user = v1.create_user

-- [Q1] Retrieve a user.
M.get_user = v1.get_user

function M.post_item(p)
  return { id = p.id, type = "post", postId = p.id, userId = p.userId,
           userUsername = p.username, title = p.title, content = p.content,
           commentCount = 0, likeCount = 0, creationDate = p.creationDate }
end

local function comment_item(c)
  return { id = c.id, type = "comment", postId = c.postId, userId = c.userId,
           userUsername = c.username, content = c.content,
           creationDate = c.creationDate }
end

local function like_item(l)
  return { id = l.id, type = "like", postId = l.postId, userId = l.userId,
           userUsername = l.username, creationDate = l.creationDate }
end

-- [C2] Create a post (no comment, no like yet).
function M:create_post(p)
  return charged(self.posts:create(M.post_item(p)))
end

-- [Q2] Retrieve a post: one point read.
function M:get_post(postId)
  return charged(self.posts:read(postId, postId))
end

local function query(c, sql, params)
  return charged(c:query(sql, params))
end

-- [Q3] List a user's posts in short form: one query, still a fan-out.
function M:list_user_posts(userId)
  return query(self.posts, USER_POSTS, { userId = userId })
end

-- [C3] Create a comment: the createComment procedure in the post's
-- partition.  Returns the post's new comment count.
function M:create_comment(c)
  return charged(self.posts:execute("createComment", c.postId,
    c.postId, comment_item(c)))
end

-- [Q4] List a post's comments: one query in the post's partition.
function M:list_comments(postId)
  return query(self.posts, COMMENTS, { postId = postId })
end

-- [C4] Like a post: the createLike procedure.
function M:like_post(l)
  return charged(self.posts:execute("createLike", l.postId,
    l.postId, like_item(l)))
end

-- [Q5] List a post's likes: one query in the post's partition.
function M:list_likes(postId)
  return query(self.posts, LIKES, { postId = postId })
end

-- [Q6] The 100 most recent posts in short form: one query, a fan-out.
function M:list_recent_posts()
  return query(self.posts, NEWEST)
end

-- The initial data set, as bulk load takes it (blog.load): what C1-C4
-- store, with the counts createComment and createLike would have made and
-- the usernames the application gives.
function M:bulk_sources(gen)
  local load = require "blog.load"
  local make_user = self.user_doc or function(u)
    return { id = u.id, username = u.username }
  end
  return {
    { container = self.users, docs = load.users(gen, make_user) },
    { container = self.posts, docs = load.posts(gen, function(g, kind, i)
        if kind == "post" then
          local doc = M.post_item(g.post)
          doc.commentCount, doc.likeCount = #g.comments, #g.likes
          return doc
        end
        if kind == "comment" then return comment_item(g.comments[i]) end
        return like_item(g.likes[i])
      end) },
  }
end

-- Loads a post with its comments and likes: C2, then C3 and C4 with each
-- procedure given all the post's comments (likes) at once, which it
-- counts and creates in one atomic step.  Returns the items written and
-- their charge.
function M:load_post(p, comments, likes)
  local doc, info, status = self.posts:create(M.post_item(p))
  if not doc then return nil, info, status end
  local charge = info.charge
  for _, set in ipairs({ { "createComment", comments, comment_item },
                         { "createLike", likes, like_item } }) do
    local list, make = set[2], set[3]
    if #list > 0 then
      local items = {}
      for i = 1, #list do items[i] = make(list[i]) end
      local n
      n, info, status = self.posts:execute(set[1], p.id, p.id, items)
      if not n then return nil, info, status end
      charge = charge + info.charge
    end
  end
  return 1 + #comments + #likes, charge
end

return M
