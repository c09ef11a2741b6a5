--[[
blog.sqlite: the same ten requests on SQLite (lua-sql-sqlite3), for
comparison.

A normalized relational schema, as a good SQL user would write it: one
table per entity, primary keys, foreign keys, and the indexes the
requests need (a user's posts by date, the newest posts, a post's comments
and likes).  Usernames and counts are never copied: the reads join and
count, which is what a relational database is built to do.  The answers
have the models' field names, so that they can be compared with them.

luasql has no prepared statements: values are escaped with conn:escape
and every request is parsed anew, as every luasql application does.

    local sqlite = require "blog.sqlite"
    local s = sqlite.open(path)          -- creates the schema if missing
    sqlite.load(s, gen)                  -- the generated data set
    local post = s:get_post("p1-1")      -- Q2
]]

local driver = require "luasql.sqlite3"
local common = require "blog.common"

local M = { name = "SQLite" }
M.__index = M

local SCHEMA = {
  [[CREATE TABLE IF NOT EXISTS users (
      id TEXT PRIMARY KEY,
      username TEXT NOT NULL)]],
  [[CREATE TABLE IF NOT EXISTS posts (
      id TEXT PRIMARY KEY,
      user_id TEXT NOT NULL REFERENCES users (id),
      title TEXT NOT NULL,
      content TEXT NOT NULL,
      creation_date TEXT NOT NULL)]],
  [[CREATE INDEX IF NOT EXISTS posts_by_user
      ON posts (user_id, creation_date)]],
  [[CREATE INDEX IF NOT EXISTS posts_by_date ON posts (creation_date)]],
  [[CREATE TABLE IF NOT EXISTS comments (
      id TEXT PRIMARY KEY,
      post_id TEXT NOT NULL REFERENCES posts (id),
      user_id TEXT NOT NULL REFERENCES users (id),
      content TEXT NOT NULL,
      creation_date TEXT NOT NULL)]],
  [[CREATE INDEX IF NOT EXISTS comments_by_post ON comments (post_id)]],
  [[CREATE TABLE IF NOT EXISTS likes (
      id TEXT PRIMARY KEY,
      post_id TEXT NOT NULL REFERENCES posts (id),
      user_id TEXT NOT NULL REFERENCES users (id),
      creation_date TEXT NOT NULL)]],
  [[CREATE INDEX IF NOT EXISTS likes_by_post ON likes (post_id)]],
}

-- Opens (creating it if missing) the database at path.  opts.sync:
-- "full" (the default: every commit is flushed, as regolith's default
-- is), or "none" (for loading).
function M.open(path, opts)
  opts = opts or {}
  local env = assert(driver.sqlite3())
  local conn = assert(env:connect(path))
  local self = setmetatable({ env = env, conn = conn }, M)
  self:exec("PRAGMA journal_mode = WAL")
  self:sync(opts.sync or "full")
  for _, sql in ipairs(SCHEMA) do self:exec(sql) end
  return self
end

function M:sync(mode)
  self:exec(mode == "none" and "PRAGMA synchronous = OFF"
                           or "PRAGMA synchronous = FULL")
end

function M:close()
  self.conn:close()
  self.env:close()
end

-- Runs a statement; a query's cursor is read to the end and closed.
function M:exec(sql)
  local res, err = self.conn:execute(sql)
  if not res then error(err .. "\n" .. sql, 2) end
  if type(res) ~= "number" then res:close() end
  return res
end

-- The rows of a query, as tables keyed by column name.
function M:rows(sql)
  local cur, err = self.conn:execute(sql)
  if not cur then error(err .. "\n" .. sql, 2) end
  local out = {}
  local row = cur:fetch({}, "a")
  while row do
    out[#out + 1] = row
    row = cur:fetch({}, "a")
  end
  cur:close()
  return out
end

function M:quote(s)
  return "'" .. self.conn:escape(s) .. "'"
end

-- {=====================================================================
-- The ten requests
-- ======================================================================
local POST_COLUMNS = [[
  p.id AS id, 'post' AS type, p.id AS postId, p.user_id AS userId,
  u.username AS userUsername, p.title AS title, %s AS content,
  (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id) AS commentCount,
  (SELECT COUNT(*) FROM likes l WHERE l.post_id = p.id) AS likeCount,
  p.creation_date AS creationDate]]
local FULL = POST_COLUMNS:format("p.content")
local SHORT = POST_COLUMNS:format(("substr(p.content, 1, %d)"):format(
  common.SHORT))

local Q2 = "SELECT " .. FULL .. [[
  FROM posts p JOIN users u ON u.id = p.user_id WHERE p.id = %s]]
local Q3 = "SELECT " .. SHORT .. [[
  FROM posts p JOIN users u ON u.id = p.user_id WHERE p.user_id = %s
  ORDER BY p.creation_date DESC]]
local Q4 = [[
  SELECT c.id AS id, c.post_id AS postId, c.user_id AS userId,
    u.username AS userUsername, c.content AS content,
    c.creation_date AS creationDate
  FROM comments c JOIN users u ON u.id = c.user_id WHERE c.post_id = %s]]
local Q5 = [[
  SELECT l.id AS id, l.post_id AS postId, l.user_id AS userId,
    u.username AS userUsername, l.creation_date AS creationDate
  FROM likes l JOIN users u ON u.id = l.user_id WHERE l.post_id = %s]]
local Q6 = "SELECT " .. SHORT .. [[
  FROM posts p JOIN users u ON u.id = p.user_id
  ORDER BY p.creation_date DESC LIMIT 100]]

-- [C1]
function M:create_user(u)
  return self:exec(("INSERT INTO users (id, username) VALUES (%s, %s) " ..
    "ON CONFLICT (id) DO UPDATE SET username = excluded.username"):format(
    self:quote(u.id), self:quote(u.username)))
end

-- [Q1]
function M:get_user(id)
  return self:rows(("SELECT id, username FROM users WHERE id = %s"):format(
    self:quote(id)))[1]
end

-- [C2]
function M:create_post(p)
  return self:exec(("INSERT INTO posts (id, user_id, title, content, " ..
    "creation_date) VALUES (%s, %s, %s, %s, %s)"):format(self:quote(p.id),
    self:quote(p.userId), self:quote(p.title), self:quote(p.content),
    self:quote(p.creationDate)))
end

-- [Q2]
function M:get_post(id)
  return self:rows(Q2:format(self:quote(id)))[1]
end

-- [Q3]
function M:list_user_posts(userId)
  return self:rows(Q3:format(self:quote(userId)))
end

-- [C3]
function M:create_comment(c)
  return self:exec(("INSERT INTO comments (id, post_id, user_id, content, " ..
    "creation_date) VALUES (%s, %s, %s, %s, %s)"):format(self:quote(c.id),
    self:quote(c.postId), self:quote(c.userId), self:quote(c.content),
    self:quote(c.creationDate)))
end

-- [Q4]
function M:list_comments(postId)
  return self:rows(Q4:format(self:quote(postId)))
end

-- [C4]
function M:like_post(l)
  return self:exec(("INSERT INTO likes (id, post_id, user_id, " ..
    "creation_date) VALUES (%s, %s, %s, %s)"):format(self:quote(l.id),
    self:quote(l.postId), self:quote(l.userId), self:quote(l.creationDate)))
end

-- [Q5]
function M:list_likes(postId)
  return self:rows(Q5:format(self:quote(postId)))
end

-- [Q6]
function M:list_recent_posts()
  return self:rows(Q6)
end
-- }=====================================================================

-- Loads gen's data set in one transaction, with multi-row INSERTs; returns
-- {items, seconds}.  `progress` (optional) is told the items written.
function M.load(s, gen, progress)
  local system = require "system"
  local t0 = system.monotime()
  s:sync("none")
  s.conn:setautocommit(false)
  local pending = {}
  local function flush(tbl, cols)
    local rows = pending[tbl]
    if rows and #rows > 0 then
      s:exec(("INSERT INTO %s (%s) VALUES %s"):format(tbl, cols,
        table.concat(rows, ",")))
      pending[tbl] = {}
    end
  end
  local COLS = {
    users = "id, username",
    posts = "id, user_id, title, content, creation_date",
    comments = "id, post_id, user_id, content, creation_date",
    likes = "id, post_id, user_id, creation_date",
  }
  local function add(tbl, ...)
    local vals = { ... }
    for i = 1, #vals do vals[i] = s:quote(vals[i]) end
    local rows = pending[tbl]
    if not rows then rows = {}; pending[tbl] = rows end
    rows[#rows + 1] = "(" .. table.concat(vals, ",") .. ")"
    if #rows >= 200 then flush(tbl, COLS[tbl]) end
  end
  local items = 0
  for u = 1, gen.users do
    local user = gen:user(u)
    add("users", user.id, user.username)
    items = items + 1
  end
  flush("users", COLS.users)
  for u = 1, gen.users do
    for k = 1, gen:posts_of(u) do
      local g = gen:post(u, k)
      local p = g.post
      add("posts", p.id, p.userId, p.title, p.content, p.creationDate)
      for _, c in ipairs(g.comments) do
        add("comments", c.id, c.postId, c.userId, c.content, c.creationDate)
      end
      for _, l in ipairs(g.likes) do
        add("likes", l.id, l.postId, l.userId, l.creationDate)
      end
      items = items + 1 + #g.comments + #g.likes
      if progress then progress(items) end
    end
  end
  for tbl, cols in pairs(COLS) do flush(tbl, cols) end
  s.conn:commit()
  s.conn:setautocommit(true)
  s:exec("ANALYZE")
  return { items = items, seconds = system.monotime() - t0 }
end

return M
