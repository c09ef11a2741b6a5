--[[
blog.data: a deterministic generator of the article's data set.

    local data = require "blog.data"
    local gen = data.new(scale, seed)
    gen.users                      -- number of users (100,000 at scale 1)
    gen:user(u)                    -- {id, username} of user u (1..gen.users)
    gen:posts_of(u)                -- how many posts user u wrote (5 to 50)
    gen:post(u, k)                 -- post k of user u, its comments and likes
    gen:counts(u, k)               -- comments, likes of that post (cheaply)

At scale 1 the data set is the article's: 100,000 users, each with 5 to 50
posts, each post with up to 25 comments and up to 100 likes, written by
users chosen at random.  Every value comes from a small pseudo-random
generator written here, seeded per user and per post, so that:

- the same scale and seed always give the same data, on Lua 5.4 and on
  LuaJIT alike (the arithmetic below stays exact in doubles: every product
  is below 2^53, and no integer division or bitwise operator is used);
- any post can be generated alone, without generating those before it
  (the loaders, the benchmark's samples and the checks rely on it).

Inputs are what an application would send: a post names its author and
the author's username as the session knows them; the models decide what
to store.  Creation dates are ISO 8601 with 7 decimal places (as Azure
Cosmos DB writes them), within the two years from 2023-01-01, and the
posts' dates are all distinct (the feed's "100 newest" is well defined):
a post's date in ticks of 100 ns is a random slot times the number of
(user, post) pairs plus the pair's own number.
]]

local floor = math.floor

local M = {}

M.USERS_AT_SCALE_1 = 100000
M.MAX_POSTS, M.MIN_POSTS = 50, 5
M.MAX_COMMENTS, M.MAX_LIKES = 25, 100

-- {=====================================================================
-- The generator: L'Ecuyer's combined multiplicative congruential generator
-- (1988), period about 2.3e18.  Each product is below 2^47, exact in a
-- double as in a Lua 5.4 integer.
-- ======================================================================
local M1, A1 = 2147483563, 40014
local M2, A2 = 2147483399, 40692

local Rng = {}
Rng.__index = Rng

-- A generator seeded from a list of non-negative integers (each below
-- 2^31): the values are mixed in one by one, so (seed, u, k) streams are
-- independent of one another.
local function rng(a, b, c)
  local s1, s2 = 12345, 67890
  local vals = { a or 0, b or 0, c or 0 }
  for i = 1, 3 do
    local v = vals[i] % 2147483000
    s1 = (s1 * A1 + v) % M1
    s2 = (s2 * A2 + v + i) % M2
    s1 = (s1 * A1) % M1
    s2 = (s2 * A2) % M2
  end
  if s1 == 0 then s1 = 1 end
  if s2 == 0 then s2 = 1 end
  local r = setmetatable({ s1 = s1, s2 = s2 }, Rng)
  for _ = 1, 4 do r:next() end       -- move away from the seeding's traces
  return r
end

-- The next value in [0, 1).
function Rng:next()
  local s1 = (self.s1 * A1) % M1
  local s2 = (self.s2 * A2) % M2
  self.s1, self.s2 = s1, s2
  local z = (s1 - s2) % (M1 - 1)
  return z / (M1 - 1)
end

-- An integer in [lo, hi].
function Rng:int(lo, hi)
  return lo + floor(self:next() * (hi - lo + 1))
end

M.rng = rng
-- }=====================================================================

-- {=====================================================================
-- Text
-- ======================================================================
local WORDS = {
  "time", "year", "people", "way", "day", "thing", "world", "life", "hand",
  "part", "place", "case", "week", "system", "program", "question", "work",
  "number", "night", "point", "home", "water", "room", "mother", "area",
  "money", "story", "fact", "month", "lot", "right", "study", "book", "eye",
  "job", "word", "business", "issue", "side", "kind", "head", "house",
  "service", "friend", "father", "power", "hour", "game", "line", "end",
  "member", "law", "car", "city", "name", "team", "minute", "idea", "kid",
  "body", "information", "back", "parent", "face", "others", "level",
  "office", "door", "health", "person", "art", "war", "history", "party",
  "result", "change", "morning", "reason", "research", "girl", "guy",
  "moment", "air", "teacher", "force", "education", "foot", "boy", "age",
  "policy", "music", "market", "sense", "nation", "plan", "college",
  "interest", "death", "experience", "effect", "class", "control", "care",
  "field", "development", "role", "effort", "rate", "heart", "drug", "show",
  "leader", "light", "voice", "wife", "police", "mind", "price", "report",
  "decision", "son", "view", "relationship", "town", "road", "arm",
  "difference", "value", "building", "action", "model", "season", "society",
  "tax", "director", "position", "player", "record", "paper", "space",
  "ground", "form", "event", "official", "matter", "center", "couple",
  "site", "project", "activity", "star", "table", "need", "court", "oil",
  "situation", "cost", "industry", "figure", "street", "image", "phone",
  "data", "picture", "practice", "piece", "land", "product", "doctor",
  "wall", "patient", "worker", "news", "test", "movie", "north", "love",
  "support", "technology", "step", "baby", "computer", "type", "attention",
  "film", "tree", "source", "organization", "hair", "window", "evidence",
  "population", "site", "bank", "chance", "memory", "partition", "query",
  "index", "feed", "trigger", "procedure", "container", "document", "lua",
}
local NWORDS = #WORDS

local SYLLABLES = {
  "ka", "lo", "mi", "ra", "te", "vo", "sa", "ne", "ri", "to", "ma", "li",
  "da", "ve", "zo", "pa", "ni", "ko", "ru", "se", "bi", "fa", "go", "hu",
  "je", "ly", "no", "qui", "xa", "ze",
}
local NSYL = #SYLLABLES

-- Words up to at least `len` characters, separated by spaces.
local function text(r, len)
  local out, n = {}, 0
  repeat
    local w = WORDS[r:int(1, NWORDS)]
    out[#out + 1] = w
    n = n + #w + 1
  until n > len
  return table.concat(out, " ")
end

local function title(r)
  local t = text(r, r:int(12, 50))
  return t:sub(1, 1):upper() .. t:sub(2)
end
-- }=====================================================================

-- {=====================================================================
-- Dates: ticks of 100 ns since 2023-01-01T00:00:00Z
-- ======================================================================
local TICKS = 10000000                  -- per second
local WINDOW = 2 * 365 * 86400 * TICKS  -- two years of ticks
local EPOCH_DAYS = 19358                -- 2023-01-01 in days since 1970

-- Year, month, day of a day number since 1970-01-01 (H. Hinnant's
-- civil_from_days).
local function civil (z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) -
                     floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then y = y + 1 end
  return y, m, d
end

-- The ISO 8601 text of a tick count.
local function iso(t)
  local secs = floor(t / TICKS)
  local frac = t - secs * TICKS
  local days = floor(secs / 86400)
  local s = secs - days * 86400
  local y, m, d = civil(EPOCH_DAYS + days)
  return ("%04d-%02d-%02dT%02d:%02d:%02d.%07dZ"):format(y, m, d,
    floor(s / 3600), floor(s / 60) % 60, s % 60, frac)
end
M.iso = iso
M.TICKS = TICKS
-- }=====================================================================

local Gen = {}
Gen.__index = Gen

-- The generator of the data set at `scale` (scale 1: 100,000 users; at
-- least one user) from `seed` (an integer, default 1).
function M.new(scale, seed)
  assert(type(scale) == "number" and scale > 0, "scale must be a number > 0")
  seed = seed or 1
  local users = floor(M.USERS_AT_SCALE_1 * scale + 0.5)
  if users < 1 then users = 1 end
  local slots = users * M.MAX_POSTS
  return setmetatable({
    scale = scale, seed = seed, users = users,
    slots = slots, date_slots = floor(WINDOW / slots),
    names = {},
  }, Gen)
end

function Gen:user_id(u) return "u" .. u end
function Gen:post_id(u, k) return ("p%d-%d"):format(u, k) end

-- The username of user u (memoized: comments and likes name their authors).
function Gen:username(u)
  local name = self.names[u]
  if name then return name end
  local r = rng(self.seed, u, 0)
  local parts = {}
  for i = 1, r:int(2, 4) do parts[i] = SYLLABLES[r:int(1, NSYL)] end
  name = table.concat(parts) .. r:int(1, 99)
  self.names[u] = name
  return name
end

function Gen:user(u)
  return { id = self:user_id(u), username = self:username(u) }
end

function Gen:posts_of(u)
  return rng(self.seed, u, 1000):int(M.MIN_POSTS, M.MAX_POSTS)
end

-- The comments and likes of post k of user u.
function Gen:counts(u, k)
  local r = rng(self.seed, u, k)
  return r:int(0, M.MAX_COMMENTS), r:int(0, M.MAX_LIKES)
end

-- Post k of user u, as {post = ..., comments = {...}, likes = {...}}.
-- The post's date is unique (see the top); comments and likes follow it
-- within 30 days.
function Gen:post(u, k)
  local r = rng(self.seed, u, k)
  local ncomments, nlikes = r:int(0, M.MAX_COMMENTS), r:int(0, M.MAX_LIKES)
  local pid = self:post_id(u, k)
  local slot = (u - 1) * M.MAX_POSTS + (k - 1)
  local t = r:int(0, self.date_slots - 1) * self.slots + slot
  local post = {
    id = pid, userId = self:user_id(u), username = self:username(u),
    title = title(r), content = text(r, r:int(150, 600)),
    creationDate = iso(t),
  }
  local users, month = self.users, 30 * 86400 * TICKS
  local comments, likes = {}, {}
  for j = 1, ncomments do
    local v = r:int(1, users)
    comments[j] = {
      id = ("c%d-%d-%d"):format(u, k, j), postId = pid,
      userId = self:user_id(v), username = self:username(v),
      content = text(r, r:int(20, 200)),
      creationDate = iso(t + r:int(1, month)),
    }
  end
  for j = 1, nlikes do
    local v = r:int(1, users)
    likes[j] = {
      id = ("l%d-%d-%d"):format(u, k, j), postId = pid,
      userId = self:user_id(v), username = self:username(v),
      creationDate = iso(t + r:int(1, month)),
    }
  end
  return { post = post, comments = comments, likes = likes }
end

-- The sizes of the data set: users, posts, comments, likes.
function Gen:size()
  local posts, comments, likes = 0, 0, 0
  for u = 1, self.users do
    local n = self:posts_of(u)
    posts = posts + n
    for k = 1, n do
      local c, l = self:counts(u, k)
      comments, likes = comments + c, likes + l
    end
  end
  return { users = self.users, posts = posts, comments = comments,
           likes = likes }
end

-- A digest of everything generated (same on Lua 5.4 and LuaJIT).
function Gen:digest()
  local h = 0
  local function add(s)
    for i = 1, #s do h = (h * 31 + s:byte(i)) % 2147483647 end
  end
  local function doc(t, keys)
    for _, key in ipairs(keys) do add(tostring(t[key])); add("|") end
  end
  for u = 1, self.users do
    doc(self:user(u), { "id", "username" })
    for k = 1, self:posts_of(u) do
      local p = self:post(u, k)
      doc(p.post, { "id", "userId", "username", "title", "content",
                    "creationDate" })
      for _, c in ipairs(p.comments) do
        doc(c, { "id", "postId", "userId", "username", "content",
                 "creationDate" })
      end
      for _, l in ipairs(p.likes) do
        doc(l, { "id", "postId", "userId", "username", "creationDate" })
      end
    end
  end
  return h
end

return M
