--[[
blog.common: what the three models share.

- PARTITIONS: the physical partitions of every container but `feed`.  It
  decides what a fan-out query costs (2.5 RU per physical partition), as
  the number of physical partitions does on the hosted service.
- SHORT: the length, in characters, of a post's content in short form (the
  lists of Q3 and Q6).
- short_post(post): a post's short form.
- Charges: a model's request adds up the charges of all the calls it makes
  (`acc`), and returns its result and that sum.
]]

local M = {}

M.PARTITIONS = 8
M.SHORT = 100

-- A call's result and its charge, or its failure as it came:
-- `return charged(c:read(id, pk))`.
function M.charged(result, info, status)
  if result == nil then return nil, info, status end
  return result, info.charge
end

-- The container `name` of db, created with `spec` when missing.
function M.container(db, name, spec)
  local c = db:container(name)
  if c then return c end
  return assert(db:create_container(name, spec))
end

-- The first n characters (code points) of UTF-8 text s, as the query
-- dialect's LEFT(s, n) gives them.
function M.left(s, n)
  if #s <= n then return s end
  local count, i = 0, 1
  local len = #s
  while i <= len do
    if count == n then return s:sub(1, i - 1) end
    local b = s:byte(i)
    if b < 0x80 then i = i + 1
    elseif b < 0xE0 then i = i + 2
    elseif b < 0xF0 then i = i + 3
    else i = i + 4 end
    count = count + 1
  end
  return s
end

-- The fields of a post in short form, in the order the copies keep them.
M.SHORT_FIELDS = { "id", "type", "postId", "userId", "userUsername", "title",
  "content", "commentCount", "likeCount", "creationDate" }

-- A post's short form: its content cut to SHORT characters.
function M.short_post(post)
  return {
    id = post.postId, type = "post", postId = post.postId,
    userId = post.userId, userUsername = post.userUsername,
    title = post.title, content = M.left(post.content, M.SHORT),
    commentCount = post.commentCount, likeCount = post.likeCount,
    creationDate = post.creationDate,
  }
end

-- The SELECT list that makes the short form in a query over `posts`
-- (V1 lacks userUsername and the counts; it adds them afterwards).
M.SHORT_SELECT = ("p.id, p.type, p.postId, p.userId, p.userUsername, " ..
  "p.title, LEFT(p.content, %d) AS content, p.commentCount, p.likeCount, " ..
  "p.creationDate"):format(M.SHORT)

-- A charge accumulator: acc(doc, info) adds info.charge and returns doc;
-- a failure (nil, msg, status) raises, since the models' requests are
-- expected to succeed on the data they are given.
function M.charger()
  local total = 0
  local function acc(res, info, status, ...)
    if res == nil then
      error(("%s (status %s)"):format(tostring(info), tostring(status)), 2)
    end
    total = total + info.charge
    return res, info
  end
  local function sum()
    return math.floor(total * 100 + 0.5) / 100
  end
  return acc, sum
end

-- The article's ten requests, in its order, and the model methods that
-- serve them.
M.REQUESTS = {
  { "C1", "create_user", "create/edit a user" },
  { "Q1", "get_user", "retrieve a user" },
  { "C2", "create_post", "create/edit a post" },
  { "Q2", "get_post", "retrieve a post" },
  { "Q3", "list_user_posts", "list a user's posts in short form" },
  { "C3", "create_comment", "create a comment" },
  { "Q4", "list_comments", "list a post's comments" },
  { "C4", "like_post", "like a post" },
  { "Q5", "list_likes", "list a post's likes" },
  { "Q6", "list_recent_posts", "list the 100 most recent posts (feed)" },
}

-- The models' processors share this: a fixed instance name, so that a
-- restarted benchmark takes its own leases back at once.
M.INSTANCE = "blog"

-- Runs the processors opened on `db` until none has work; returns the
-- changes delivered.
function M.pump(db)
  return assert(db:run_processors{ until_idle = true })
end

return M
