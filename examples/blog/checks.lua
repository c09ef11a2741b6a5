--[[
blog.checks: the correctness checks of the blog example.

Each check returns ok (a boolean) and, when it fails, a message naming the
first difference.

- C.counts(m): every post's commentCount and likeCount equal the numbers
  of its comments and likes (V2, V3: the counts the procedures keep).
- C.copies(m): every post has its short-form copy in its author's
  partition of `users`, equal to the post's short form, and no copy is
  left without its post (V3).
- C.feed(m): `feed` holds exactly the 100 newest posts, each equal to its
  short form (V3).
- C.newest(m): the model's Q6 returns the 100 newest posts of `posts`,
  newest first (every model).
- C.rename(m, userId): a new username reaches Q1, the user's posts (Q2,
  Q3, Q6), comments (Q4) and likes (Q5), and, in the models that copy it,
  every item of `posts` and the copies in `users` and `feed`; the old name
  is then put back, and must reach them all again.
- C.answers(m, samples) gives every request's answer on the sampled keys
  in a canonical form (the short form where lists use it, comments and
  likes sorted by id); C.same(a, b) compares two models' answers.
]]

local common = require "blog.common"

local M = {}

-- {=====================================================================
-- Canonical forms
-- ======================================================================
local function canon(v)
  local t = type(v)
  if t == "table" then
    if next(v) == nil then return "[]" end   -- empty: no shape to tell
    if v[1] ~= nil then
      local out = {}
      for i = 1, #v do out[i] = canon(v[i]) end
      return "[" .. table.concat(out, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    local out = {}
    for i, k in ipairs(keys) do out[i] = ("%q:%s"):format(k, canon(v[k])) end
    return "{" .. table.concat(out, ",") .. "}"
  elseif t == "number" then
    if v == math.floor(v) and v > -2^53 and v < 2^53 then
      return ("%d"):format(v)
    end
    return ("%.17g"):format(v)
  elseif t == "string" then
    return ("%q"):format(v)
  end
  return tostring(v)
end
M.canon = canon

local function pick(doc, fields)
  if doc == nil then return nil end
  local out = {}
  for _, f in ipairs(fields) do out[f] = doc[f] end
  return out
end

M.USER_FIELDS = { "id", "username" }
M.POST_FIELDS = { "id", "postId", "userId", "userUsername", "title", "content",
  "commentCount", "likeCount", "creationDate" }
M.COMMENT_FIELDS = { "id", "postId", "userId", "userUsername", "content",
  "creationDate" }
M.LIKE_FIELDS = { "id", "postId", "userId", "userUsername", "creationDate" }

local function list(rows, fields, sort)
  local out = {}
  for i, r in ipairs(rows or {}) do out[i] = pick(r, fields) end
  if sort then table.sort(out, function(a, b) return a.id < b.id end) end
  return out
end

-- The canonical answers of model m on the sampled keys:
-- samples = {users = {id, ...}, posts = {id, ...}}.
function M.answers(m, samples)
  local out = {}
  for _, id in ipairs(samples.users) do
    out["Q1 " .. id] = canon(pick(m:get_user(id), M.USER_FIELDS))
    out["Q3 " .. id] = canon(list(m:list_user_posts(id), common.SHORT_FIELDS))
  end
  for _, id in ipairs(samples.posts) do
    out["Q2 " .. id] = canon(pick(m:get_post(id), M.POST_FIELDS))
    out["Q4 " .. id] = canon(list(m:list_comments(id), M.COMMENT_FIELDS, true))
    out["Q5 " .. id] = canon(list(m:list_likes(id), M.LIKE_FIELDS, true))
  end
  out.Q6 = canon(list(m:list_recent_posts(), common.SHORT_FIELDS))
  return out
end

-- Do two sets of answers agree?  ok, or false and the first difference.
function M.same(a, b, an, bn)
  local keys = {}
  for k in pairs(a) do keys[#keys + 1] = k end
  for k in pairs(b) do if a[k] == nil then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if a[k] ~= b[k] then
      return false, ("%s: %s and %s differ:\n  %s\n  %s"):format(k,
        an or "a", bn or "b", tostring(a[k]):sub(1, 300),
        tostring(b[k]):sub(1, 300))
    end
  end
  return true
end
-- }=====================================================================

-- {=====================================================================
-- Scans of `posts`
-- ======================================================================
local PAGE = { max_items = 5000 }

-- Every post of `posts`: {[postId] = post}, and the number of posts.
local function all_posts(m)
  local posts, n = {}, 0
  for row in assert(m.posts:query_rows(
      "SELECT * FROM p WHERE p.type = 'post'", nil, PAGE)) do
    posts[row.postId] = row
    n = n + 1
  end
  return posts, n
end

-- The number of items of `type` per post.
local function tally(m, type)
  local counts = {}
  for pid in assert(m.posts:query_rows(
      "SELECT VALUE p.postId FROM p WHERE p.type = @type", { type = type },
      PAGE)) do
    counts[pid] = (counts[pid] or 0) + 1
  end
  return counts
end

-- The ids of the `n` newest posts, newest first.
local function newest_ids(posts, n)
  local all = {}
  for pid, p in pairs(posts) do all[#all + 1] = { p.creationDate, pid } end
  table.sort(all, function(a, b) return a[1] > b[1] end)
  local ids = {}
  for i = 1, math.min(n, #all) do ids[i] = all[i][2] end
  return ids
end

local function short_canon(doc)
  return canon(pick(doc, common.SHORT_FIELDS))
end
-- }=====================================================================

function M.counts(m)
  local posts = all_posts(m)
  for _, kind in ipairs({ { "comment", "commentCount" },
                          { "like", "likeCount" } }) do
    local counts = tally(m, kind[1])
    for pid, n in pairs(counts) do
      if posts[pid] == nil then
        return false, ("%d %ss of post %s, which does not exist"):format(n,
          kind[1], pid)
      end
    end
    for pid, p in pairs(posts) do
      if p[kind[2]] ~= (counts[pid] or 0) then
        return false, ("post %s: %s %s, but %d %ss"):format(pid, kind[2],
          tostring(p[kind[2]]), counts[pid] or 0, kind[1])
      end
    end
  end
  return true
end

function M.copies(m)
  local posts, n = all_posts(m)
  local seen = 0
  for copy in assert(m.users:query_rows(
      "SELECT * FROM u WHERE u.type = 'post'", nil, PAGE)) do
    local post = posts[copy.postId]
    if post == nil then
      return false, "a copy of post " .. tostring(copy.postId) ..
        ", which does not exist"
    end
    local want = short_canon(common.short_post(post))
    if short_canon(copy) ~= want then
      return false, ("the copy of post %s differs from the post:\n  %s\n  %s"):
        format(copy.postId, short_canon(copy):sub(1, 300), want:sub(1, 300))
    end
    seen = seen + 1
  end
  if seen ~= n then
    return false, ("%d posts, %d copies in users"):format(n, seen)
  end
  return true
end

function M.feed(m)
  local posts = all_posts(m)
  local want = newest_ids(posts, 100)
  local rows = assert(m.feed:query("SELECT * FROM f"))
  if #rows ~= #want then
    return false, ("feed holds %d posts, not %d"):format(#rows, #want)
  end
  local inside = {}
  for _, r in ipairs(rows) do inside[r.postId] = r end
  for _, pid in ipairs(want) do
    local copy = inside[pid]
    if copy == nil then
      return false, "feed lacks post " .. pid .. ", one of the 100 newest"
    end
    if short_canon(copy) ~= short_canon(common.short_post(posts[pid])) then
      return false, "the feed's copy of post " .. pid .. " differs from it"
    end
  end
  return true
end

function M.newest(m)
  local posts = all_posts(m)
  local want = newest_ids(posts, 100)
  local rows = assert(m:list_recent_posts())
  if #rows ~= #want then
    return false, ("Q6 gave %d posts, not %d"):format(#rows, #want)
  end
  for i, pid in ipairs(want) do
    if rows[i].postId ~= pid then
      return false, ("Q6's post %d is %s, not %s"):format(i,
        tostring(rows[i].postId), pid)
    end
  end
  return true
end

-- {=====================================================================
-- Usernames
-- ======================================================================

-- Does every place that shows user `id`'s username show `name`?
local function shows(m, id, name)
  local function bad(what, got)
    return false, ("%s shows username %s, not %s"):format(what,
      tostring(got), name)
  end
  local user = m:get_user(id)
  if not user or user.username ~= name then
    return bad("Q1", user and user.username)
  end
  local mine = assert(m:list_user_posts(id))
  for _, p in ipairs(mine) do
    if p.userUsername ~= name then return bad("Q3", p.userUsername) end
    local full = assert(m:get_post(p.postId))
    if full.userUsername ~= name then return bad("Q2", full.userUsername) end
  end
  for _, p in ipairs(assert(m:list_recent_posts())) do
    if p.userId == id and p.userUsername ~= name then
      return bad("Q6", p.userUsername)
    end
  end
  for _, kind in ipairs({ { "comment", "list_comments", "Q4" },
                          { "like", "list_likes", "Q5" } }) do
    local pids = assert(m.posts:query(
      "SELECT DISTINCT VALUE p.postId FROM p WHERE p.userId = @u AND " ..
      "p.type = @type", { u = id, type = kind[1] }))
    for i = 1, math.min(#pids, 5) do
      for _, item in ipairs(assert(m[kind[2]](m, pids[i]))) do
        if item.userId == id and item.userUsername ~= name then
          return bad(kind[3], item.userUsername)
        end
      end
    end
  end
  if m.name == "V1" then return true end   -- V1 stores no username copy
  for item in assert(m.posts:query_rows(
      "SELECT * FROM p WHERE p.userId = @u", { u = id }, PAGE)) do
    if item.userUsername ~= name then
      return bad(item.type .. " " .. item.id .. " in posts", item.userUsername)
    end
  end
  if m.name == "V3" then
    for copy in assert(m.users:query_rows(
        "SELECT * FROM u WHERE u.userId = @u AND u.type = 'post'", { u = id },
        PAGE)) do
      if copy.userUsername ~= name then
        return bad("the copy of post " .. copy.id .. " in users",
          copy.userUsername)
      end
    end
    for _, copy in ipairs(assert(m.feed:query(
        "SELECT * FROM f WHERE f.userId = @u", { u = id }))) do
      if copy.userUsername ~= name then
        return bad("the copy of post " .. copy.id .. " in feed",
          copy.userUsername)
      end
    end
  end
  return true
end

function M.rename(m, id)
  local user = assert(m:get_user(id))
  local old = user.username
  local new = "renamed-" .. old
  assert(m:create_user({ id = id, username = new }))
  m:pump()
  local ok, msg = shows(m, id, new)
  assert(m:create_user({ id = id, username = old }))
  m:pump()
  if not ok then return false, msg end
  ok, msg = shows(m, id, old)
  if not ok then return false, "after the old name came back: " .. msg end
  return true
end
-- }=====================================================================

return M
