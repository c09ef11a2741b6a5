--[[
mini: a small stand-in for the blog's V3 model (examples/blog/v3.lua), with
the same methods, so that the HTTP app can run before the blog example is
there.  users (/userId) holds users and short copies of their posts,
posts (/postId) holds posts, comments and likes, feed (/type) the short
copies of every post; a processor on posts makes the copies; the
procedures createComment and createLike add an item and count it on the
post in one step.

    local m = require("mini").open(db, { instance = "..." })
    m:create_user{id, username}         m:get_user(id)
    m:create_post{id, userId, username, title, content, creationDate}
    m:get_post(id)  m:list_user_posts(userId)  m:list_recent_posts()
    m:create_comment{id, postId, userId, username, content, creationDate}
    m:like_post{id, postId, userId, username, creationDate}
    m:list_comments(postId)  m:list_likes(postId)
    m:pump()  m:lag()  m:dead_letters()

Each request returns its result and its charge, or nil, message, status.
]]

local M = {}
M.__index = M

M.INSTANCE = nil          -- the processors' instance name (nil: per process)

local COUNT = [[
return function(ctx, item, field)
  local post = assert(ctx:read(item.postId))
  assert(ctx:create(item))
  post[field] = post[field] + 1
  assert(ctx:replace(post))
  return post[field]
end]]

local function container(db, name, spec)
  local c = db:container(name)
  if c then return c end
  return assert(db:create_container(name, spec))
end

local function short(post)
  return { id = post.postId, type = "post", postId = post.postId,
           userId = post.userId, userUsername = post.userUsername,
           title = post.title, content = post.content:sub(1, 100),
           commentCount = post.commentCount, likeCount = post.likeCount,
           creationDate = post.creationDate }
end

function M.open(db)
  local self = setmetatable({ db = db }, M)
  self.users = container(db, "users", { partition_key = "/userId",
    physical_partitions = 8 })
  self.posts = container(db, "posts", { partition_key = "/postId",
    physical_partitions = 8 })
  self.feed = container(db, "feed", { partition_key = "/type" })
  local have = {}
  for _, name in ipairs(self.posts:procedures()) do have[name] = true end
  if not have.count then assert(self.posts:create_procedure("count", COUNT)) end
  local users, feed = self.users, self.feed
  self.processors = { assert(db:processor{
    name = "copies", source = "posts", instance = M.INSTANCE,
    max_items = 100,
    handler = function(changes)
      for _, d in ipairs(changes) do
        if d.type == "post" then
          assert(users:upsert(short(d)))
          assert(feed:upsert(short(d)))
        end
      end
    end,
  }) }
  return self
end

local function one(doc, info, status)
  if doc == nil then return nil, info, status end
  return doc, info.charge
end

function M:create_user(u)
  return one(self.users:upsert({ id = u.id, type = "user", userId = u.id,
                                 username = u.username }))
end

function M:get_user(id) return one(self.users:read(id, id)) end

function M:create_post(p)
  return one(self.posts:create({ id = p.id, type = "post", postId = p.id,
    userId = p.userId, userUsername = p.username, title = p.title,
    content = p.content, commentCount = 0, likeCount = 0,
    creationDate = p.creationDate }))
end

function M:get_post(id) return one(self.posts:read(id, id)) end

function M:list_user_posts(userId)
  return one(self.users:query("SELECT * FROM u WHERE u.userId = @u AND " ..
    "u.type = 'post' ORDER BY u.creationDate DESC", { u = userId }))
end

function M:list_recent_posts()
  return one(self.feed:query("SELECT TOP 100 * FROM f WHERE " ..
    "f.type = 'post' ORDER BY f.creationDate DESC"))
end

function M:create_comment(c)
  return one(self.posts:execute("count", c.postId, { id = c.id,
    type = "comment", postId = c.postId, userId = c.userId,
    userUsername = c.username, content = c.content,
    creationDate = c.creationDate }, "commentCount"))
end

function M:like_post(l)
  return one(self.posts:execute("count", l.postId, { id = l.id,
    type = "like", postId = l.postId, userId = l.userId,
    userUsername = l.username, creationDate = l.creationDate }, "likeCount"))
end

function M:list_comments(postId)
  return one(self.posts:query("SELECT * FROM c WHERE c.postId = @p AND " ..
    "c.type = 'comment'", { p = postId }))
end

function M:list_likes(postId)
  return one(self.posts:query("SELECT * FROM c WHERE c.postId = @p AND " ..
    "c.type = 'like'", { p = postId }))
end

function M:pump() return assert(self.db:run_processors{ until_idle = true }) end

function M:lag()
  local n = 0
  for _, p in ipairs(self.processors) do n = n + p:lag() end
  return n
end

function M:dead_letters()
  local n = 0
  for _, p in ipairs(self.processors) do n = n + #p:dead_letters() end
  return n
end

-- A small deterministic data set: n users, each with 1 to 5 posts, each
-- post with up to 5 comments and 10 likes.  gen.users, gen:user(u),
-- gen:posts_of(u), gen:post(u, k) -> {post, comments, likes}.
function M.generator(n)
  local gen = { users = n }
  local function stamp(x) return ("2024-%02d-%02dT00:00:%02d.0000000Z"):format(
    1 + x % 12, 1 + x % 28, x % 60) end
  function gen:user(u) return { id = "u" .. u, username = "user" .. u } end
  function gen:posts_of(u) return 1 + u % 5 end
  function gen:post(u, k)
    local id = ("p%d-%d"):format(u, k)
    local post = { id = id, userId = "u" .. u, username = "user" .. u,
      title = "post " .. id, content = ("text of " .. id .. " "):rep(20),
      creationDate = stamp(u * 7 + k) }
    local comments, likes = {}, {}
    for j = 1, (u + k) % 6 do
      local v = 1 + (u * j) % n
      comments[j] = { id = ("c%d-%d-%d"):format(u, k, j), postId = id,
        userId = "u" .. v, username = "user" .. v, content = "comment " .. j,
        creationDate = stamp(u + k + j) }
    end
    for j = 1, (u * k) % 11 do
      local v = 1 + (u + j) % n
      likes[j] = { id = ("l%d-%d-%d"):format(u, k, j), postId = id,
        userId = "u" .. v, username = "user" .. v,
        creationDate = stamp(u + k + j) }
    end
    return { post = post, comments = comments, likes = likes }
  end
  return gen
end

-- Loads gen into m: C1 for every user, then C2, C3 and C4.
function M.load(m, gen)
  for u = 1, gen.users do assert(m:create_user(gen:user(u))) end
  for u = 1, gen.users do
    for k = 1, gen:posts_of(u) do
      local p = gen:post(u, k)
      assert(m:create_post(p.post))
      for _, c in ipairs(p.comments) do assert(m:create_comment(c)) end
      for _, l in ipairs(p.likes) do assert(m:like_post(l)) end
    end
  end
  m:pump()
end

-- The checks: every post's counts equal its comments and likes, and its
-- copies in users and feed equal its short form.
function M.checks(m)
  local posts = assert(m.posts:query(
    "SELECT * FROM p WHERE p.type = 'post'"))
  local bad
  for _, p in ipairs(posts) do
    local c = assert(m:list_comments(p.postId))
    local l = assert(m:list_likes(p.postId))
    if #c ~= p.commentCount or #l ~= p.likeCount then
      bad = bad or ("post %s counts %d comments and %d likes, has %d and %d")
        :format(p.postId, p.commentCount, p.likeCount, #c, #l)
    end
    local want = short(p)
    for _, copy in ipairs({ m.users:read(p.postId, p.userId) or false,
                            m.feed:read(p.postId, "post") or false }) do
      for k, v in pairs(want) do
        if not copy or copy[k] ~= v then
          bad = bad or ("post %s: its copy differs at %s"):format(p.postId, k)
        end
      end
    end
  end
  return { { "counts and copies (" .. #posts .. " posts)", bad == nil, bad } }
end

return M
