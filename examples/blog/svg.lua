--[[
blog.svg: the benchmark's table as a picture (bench.lua --svg FILE).

    require("blog.svg").write(path, {
      requests = common.REQUESTS,          -- {{id, fn, description}, ...}
      models = {"V1", "V2", "V3"},
      results = results,                   -- [id][model] = {p50_us, ru}
      article = article.requests,          -- [id][model] = {ms, ru}
      sqlite = sqlite_results,             -- [id] = {p50_us} or {}
      title = "...",
    })

Two panels, one above the other: the median latency per request (µs)
and the request charge per request (RU), both on log scales, since the
values span five orders of magnitude.  Each request has one pair of bars
per model, in the model's colour: the article's (outlined, from the
hosted service) beside regolith's (filled, on this machine); SQLite's
median latency is a grey bar.  Hovering a bar shows its value.
]]

local M = {}

local WIDTH, PANEL_H, TOP, LEFT, RIGHT = 1100, 260, 70, 76, 20
local COLORS = { V1 = "#c8553d", V2 = "#2a7f9e", V3 = "#3f8f4f" }
local SQLITE = "#8a8f98"

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")
    :gsub('"', "&quot;"))
end

local function fmt(v)
  if v >= 100 then return ("%.0f"):format(v) end
  if v >= 10 then return ("%.1f"):format(v) end
  return ("%.2f"):format(v)
end

-- One panel: values[i] = {{value, color, filled, label}, ...} for request
-- i; a log axis from the decade below the least value to the one above
-- the greatest.
local function panel(out, y0, title, unit, requests, values)
  local lo, hi = math.huge, -math.huge
  for _, bars in ipairs(values) do
    for _, b in ipairs(bars) do
      if b[1] and b[1] > 0 then
        lo, hi = math.min(lo, b[1]), math.max(hi, b[1])
      end
    end
  end
  if lo == math.huge then lo, hi = 1, 10 end
  -- (a value on a decade, such as 1 RU, gets a bar: the axis starts below)
  lo = math.floor(math.log(lo * 0.99, 10))
  hi = math.ceil(math.log(hi, 10))
  if hi == lo then hi = lo + 1 end
  local plot_w = WIDTH - LEFT - RIGHT
  local function y(v)
    return y0 + PANEL_H - (math.log(v, 10) - lo) / (hi - lo) * PANEL_H
  end
  out[#out + 1] = ('<text x="%d" y="%d" class="panel">%s</text>'):format(LEFT,
    y0 - 10, esc(title))
  for d = lo, hi do
    local yy = y(10 ^ d)
    out[#out + 1] = ('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>')
      :format(LEFT, WIDTH - RIGHT, yy, yy)
    local v, u = 10 ^ d, unit
    if unit == "µs" and v >= 1e6 then v, u = v / 1e6, "s"
    elseif unit == "µs" and v >= 1e3 then v, u = v / 1e3, "ms" end
    out[#out + 1] = ('<text x="%d" y="%.1f" class="tick">%g %s</text>')
      :format(LEFT - 6, yy + 4, v, u)
  end
  local group = plot_w / #requests
  for i, r in ipairs(requests) do
    local bars = values[i]
    local gx = LEFT + (i - 1) * group
    local bw = (group - 14) / math.max(#bars, 1)
    for k, b in ipairs(bars) do
      local v, color, filled, label = b[1], b[2], b[3], b[4]
      if v and v > 0 then
        local x = gx + 7 + (k - 1) * bw
        local top = y(v)
        out[#out + 1] = ('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" ' ..
          'fill="%s" stroke="%s" stroke-width="1.5"><title>%s %s: %s %s</title></rect>')
          :format(x + 1, top, bw - 2, y0 + PANEL_H - top,
            filled and color or "white", color, esc(r[1]), esc(label), fmt(v), unit)
      end
    end
    out[#out + 1] = ('<text x="%.1f" y="%d" class="req">%s</text>'):format(
      gx + group / 2, y0 + PANEL_H + 16, esc(r[1]))
    out[#out + 1] = ('<text x="%.1f" y="%d" class="desc">%s</text>'):format(
      gx + group / 2, y0 + PANEL_H + 29, esc(r[3]:gsub(" in short form", "")
        :gsub("list the 100 most recent posts %(feed%)", "the feed")))
  end
end

function M.render(t)
  local out = {}
  local height = TOP + 2 * (PANEL_H + 80) + 34
  out[#out + 1] = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" ' ..
    'height="%d" viewBox="0 0 %d %d" font-family="sans-serif">'):format(
    WIDTH, height, WIDTH, height)
  out[#out + 1] = [[<style>
  .title { font-size: 17px; font-weight: bold; }
  .panel { font-size: 14px; font-weight: bold; }
  .tick { font-size: 11px; text-anchor: end; fill: #555; }
  .req { font-size: 12px; text-anchor: middle; font-weight: bold; }
  .desc { font-size: 9px; text-anchor: middle; fill: #555; }
  .grid { stroke: #ddd; }
  .legend { font-size: 12px; }
</style>]]
  out[#out + 1] = '<rect width="100%" height="100%" fill="white"/>'
  out[#out + 1] = ('<text x="%d" y="24" class="title">%s</text>'):format(LEFT,
    esc(t.title or "The blog's requests: the article beside regolith"))
  -- the legend
  local lx = LEFT
  for _, m in ipairs(t.models) do
    out[#out + 1] = ('<rect x="%d" y="36" width="14" height="12" fill="white" ' ..
      'stroke="%s" stroke-width="1.5"/><rect x="%d" y="36" width="14" height="12" ' ..
      'fill="%s"/><text x="%d" y="47" class="legend">%s: article (outlined), ' ..
      'regolith (filled)</text>'):format(lx, COLORS[m], lx + 16, COLORS[m], lx + 36, m)
    lx = lx + 260
  end
  if t.sqlite and next(t.sqlite) then
    out[#out + 1] = ('<rect x="%d" y="36" width="14" height="12" fill="%s"/>' ..
      '<text x="%d" y="47" class="legend">SQLite</text>'):format(lx, SQLITE, lx + 20)
  end
  local latency, charge = {}, {}
  for i, r in ipairs(t.requests) do
    local id = r[1]
    latency[i], charge[i] = {}, {}
    for _, m in ipairs(t.models) do
      local a, mine = t.article[id][m], t.results[id][m]
      latency[i][#latency[i] + 1] = { a[1] * 1000, COLORS[m], false, m .. " article" }
      latency[i][#latency[i] + 1] = { mine and mine.p50_us, COLORS[m], true, m .. " regolith" }
      charge[i][#charge[i] + 1] = { a[2], COLORS[m], false, m .. " article" }
      charge[i][#charge[i] + 1] = { mine and mine.ru, COLORS[m], true, m .. " regolith" }
    end
    local s = t.sqlite and t.sqlite[id]
    if s then latency[i][#latency[i] + 1] = { s.p50_us, SQLITE, true, "SQLite" } end
  end
  panel(out, TOP + 20, "Median latency per request (log scale; the article's " ..
    "over the network to the hosted service, regolith's in process)", "µs",
    t.requests, latency)
  panel(out, TOP + PANEL_H + 100, "Request charge per request (log scale)",
    "RU", t.requests, charge)
  -- which article: its title and where it is, under the panels
  if t.source then
    out[#out + 1] = ('<text x="%d" y="%d" class="legend">The article: "%s" ' ..
      '(Azure Cosmos DB documentation), measured on the hosted service.</text>')
      :format(LEFT, height - 12, esc(t.source))
  end
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

function M.write(path, t)
  local f, err = io.open(path, "w")
  if not f then return nil, err end
  f:write(M.render(t))
  f:close()
  return true
end

return M
