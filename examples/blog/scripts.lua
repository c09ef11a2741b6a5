--[[
blog.scripts: the article's stored procedures and post-trigger, in Lua.

They are stored in the database (posts:create_procedure, feed:create_trigger)
and run there, atomically, in one logical partition.  The article writes
them in JavaScript; these do the same steps.

createComment(postId, comment) and createLike(postId, like) read the post,
count the new item, replace the post and create the item: the post and its
comments and likes share the post's partition, so the count and the real
number of comments can never disagree.  As an extension for loading, the
second argument may also be an array of comments (or likes): they are
counted and created in the same one step.

updateUsernames(userId, username) rewrites the username carried by the
user's items in one partition of `posts` (only those that differ), at most
M.RENAME_BATCH of them a call, and returns how many: the caller calls it
again while it returns that many (a call's write set is bounded on a
Redis Cluster: docs/cluster.md).

truncateFeed runs after every write into `feed` and keeps the 100 most
recent posts: it counts the items (the count includes the one just
written: a post-trigger sees its write) and deletes the oldest beyond 100.
]]

local M = {}

-- createComment and createLike differ only in the counter they keep.
local CREATE = [[
return function(ctx, postId, item)
  local post, msg, status = ctx:read(postId)
  if not post then ctx:abort(msg, status) end
  if post.type ~= "post" then ctx:abort("not a post: " .. postId, 400) end
  local items = item
  if item[1] == nil then items = { item } end
  post.%s = post.%s + #items
  local ok
  ok, msg, status = ctx:replace(post)
  if not ok then ctx:abort(msg, status) end
  for i = 1, #items do
    local it = items[i]
    it.postId = postId
    ok, msg, status = ctx:create(it)
    if not ok then ctx:abort(msg, status) end
  end
  return post.%s
end]]

M.createComment = CREATE:format("commentCount", "commentCount",
  "commentCount")
M.createLike = CREATE:format("likeCount", "likeCount", "likeCount")

M.RENAME_BATCH = 500

M.updateUsernames = ([[
return function(ctx, userId, username)
  local items = assert(ctx:query(
    "SELECT TOP %d * FROM p " ..
    "WHERE p.userId = @userId AND p.userUsername != @username",
    { userId = userId, username = username }))
  for _, doc in ipairs(items) do
    doc.userUsername = username
    local ok, msg, status = ctx:upsert(doc)
    if not ok then ctx:abort(msg, status) end
  end
  return #items
end]]):format(M.RENAME_BATCH)

M.MAX_FEED = 100

M.truncateFeed = ([[
return function(ctx)
  local maxDocs = %d
  local count = assert(ctx:query("SELECT VALUE COUNT(1) FROM f"))[1]
  if count <= maxDocs then return end
  local oldest = assert(ctx:query(
    "SELECT TOP @n VALUE f.id FROM f WHERE f.type = 'post' AND " ..
    "IS_STRING(f.creationDate) ORDER BY f.creationDate",
    { n = count - maxDocs }))
  for _, id in ipairs(oldest) do
    local ok, msg, status = ctx:delete(id)
    if not ok then ctx:abort(msg, status) end
  end
end]]):format(M.MAX_FEED)

-- Creates (or, when the stored text differs, replaces) the procedures
-- named in `names` on container `c`.
function M.install_procedures(c, names)
  local have = {}
  for _, n in ipairs(c:procedures()) do have[n] = true end
  for _, name in ipairs(names) do
    if not have[name] then
      assert(c:create_procedure(name, M[name]))
    else
      assert(c:replace_procedure(name, M[name]))
    end
  end
end

-- Creates or replaces the truncateFeed post-trigger on container `c`.
function M.install_truncate_feed(c)
  local def = { type = "post", operation = "all", source = M.truncateFeed }
  for _, n in ipairs(c:triggers()) do
    if n == "truncateFeed" then
      assert(c:replace_trigger("truncateFeed", def))
      return
    end
  end
  assert(c:create_trigger("truncateFeed", def))
end

return M
