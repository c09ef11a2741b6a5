--[[
regolith.cli: the `regolith` command (bin/regolith; docs/cli.md).

    local code = require("regolith.cli").main(arg)   -- the exit code

The arguments are parsed with argparse (Debian's lua-argparse); each
subcommand is a function of the parsed arguments in one of the modules
beside this one.  main never lets a Lua error out: a failure the command
expects (common.fail) prints its one line and gives its exit code; any
other error is an internal error (70), printed as one line, with the
traceback only when REGOLITH_DEBUG is set.
]]

local argparse = require "argparse"
local common = require "regolith.cli.common"

local EXIT = common.EXIT

local M = {}

local DESCRIPTION = [[
regolith: look at and work with a regolith database (a directory) without
writing Lua.  Every subcommand takes the database's directory first; data
goes to stdout as JSON lines, request charges and counters to stderr.]]

local EPILOG = [[
Exit codes: 0 success; 1 the database refused the operation (or verify
found a problem); 2 usage; 3 import rejected some items; 4 no database at
DIR or it cannot be opened; 5 a file cannot be read or written; 70 an
internal error; 130 interrupted.  See docs/cli.md.]]

-- {=====================================================================
-- The parser
-- ======================================================================
local function add_dir(cmd)
  cmd:argument("dir", "The database's directory.")
end

local function add_container(cmd)
  add_dir(cmd)
  cmd:argument("container", "The container's name.")
end

local function add_pk(cmd, what)
  cmd:option("-k --partition-key",
    what or "The partition key value: JSON (42, true, [\"a\", 1]) or, " ..
    "when it is not JSON, the text itself as a string."):argname("PK")
end

-- --format table|json, and --json for --format json: every command that
-- prints a listing or rows takes both.
local function add_format(cmd, default, what)
  cmd:option("--format", what, default):choices({ "table", "json" })
  cmd:flag("--json", "Short for --format json.")
end

local function build()
  local p = argparse("regolith", DESCRIPTION, EPILOG)
    :command_target("command")
    :help_max_width(79)
  p:flag("-q --quiet", "No notes on stderr (charges, counters, progress).")

  -- containers -------------------------------------------------------
  local c = p:command("containers", "List the containers, their item " ..
    "counts, sizes and settings.")
  add_dir(c)
  add_format(c, "table", "table, or json: one JSON line per container, " ..
    "{name, items, bytes, spec}.")

  c = p:command("create-container", "Create a container from a spec.")
  add_dir(c)
  c:argument("name", "The new container's name.")
  c:option("--spec", "The spec as JSON, e.g. '{\"partition_key\": " ..
    "\"/postId\"}', or @FILE to read it from a file (as for import).")
  c:argument("spec_text", "The spec given without --spec (the same " ..
    "value)."):args("?"):argname("SPEC")

  c = p:command("delete-container", "Delete a container and everything " ..
    "in it.")
  add_container(c)

  -- items ----------------------------------------------------------------
  c = p:command("get", "Read one item (JSON on stdout).")
  add_container(c)
  c:argument("id", "The item's id.")
  add_pk(c, "Its partition key value (JSON, or else a string). Without " ..
    "it the item is looked up by id in every partition.")

  c = p:command("put", "Write one item read from FILE or stdin (an upsert " ..
    "unless --create or --replace).")
  add_container(c)
  c:argument("file", "A file holding one JSON document; - or none for " ..
    "stdin."):args("?")
  c:mutex(c:flag("--create", "Fail (409) if the item exists."),
          c:flag("--replace", "Fail (404) if the item does not exist."))
  c:option("--if-match", "Only if the item's _etag is still this (412).")
  c:option("--pre-trigger", "Name a pre-trigger to run with the write.")
  c:option("--post-trigger", "Name a post-trigger to run with the write.")

  c = p:command("delete", "Delete one item.")
  add_container(c)
  c:argument("id", "The item's id.")
  add_pk(c)
  c:option("--if-match", "Only if the item's _etag is still this (412).")

  -- queries --------------------------------------------------------------
  c = p:command("query", "Run a SQL query: rows as JSON lines on stdout, " ..
    "the charge and counters on stderr.")
  add_container(c)
  c:argument("sql", "The query, e.g. \"SELECT * FROM c WHERE c.userId = " ..
    "@u\"; - reads it from stdin.")
  c:option("-p --param", "A parameter, name=value (value: JSON, or else " ..
    "a string). Repeatable."):argname("NAME=VALUE"):count("*")
  add_pk(c, "Run in this logical partition.")
  c:option("-n --max-items", "A page of at most N rows; the continuation " ..
    "token goes to stderr.", nil, tonumber):argname("N")
  c:option("-c --continuation", "Continue from this token (same query " ..
    "and parameters)."):argname("TOKEN")
  c:option("--score-scope", "FullTextScore's statistics: container (the " ..
    "default) or local (the logical partition of --partition-key)."):choices(
    { "container", "local" })
  add_format(c, "json", "json (one JSON line per row), or table (an " ..
    "aligned table of the rows' members).")

  -- import and export -----------------------------------------------------
  c = p:command("import", "Load items from JSON lines or a JSON array. " ..
    "Rejected items are reported with their line number; the rest go on.")
  add_container(c)
  c:argument("file", "The input; - or none for stdin."):args("?")
  c:flag("--stop-on-error", "Stop at the first rejected item.")
  c:flag("--create", "Create items (409 for one that exists) instead " ..
    "of upserting them.")
  c:option("--spec", "Create the container with this spec (JSON or @FILE) " ..
    "when it does not exist.")
  c:option("--sync", "Durability of the import's commits: full, lazy or " ..
    "none (then the end of the import is not durable until the next " ..
    "flush).", "lazy"):choices({ "full", "lazy", "none" })

  c = p:command("export", "Write every item as JSON lines (members in " ..
    "sorted order), streaming in pages.")
  add_container(c)
  c:argument("file", "The output; - or none for stdout."):args("?")
  add_pk(c, "Only this logical partition.")
  c:flag("--system", "Keep the system properties _etag, _ts and _lsn.")
  c:option("--page-size", "Items read per page.", "1000", tonumber)

  -- the change feed and processors ---------------------------------------
  c = p:command("feed", "Print a container's changes as JSON lines; the " ..
    "continuation token goes to stderr at the end.")
  add_container(c)
  c:option("--start", "Where to start: beginning, now, seconds since the " ..
    "epoch, or a UTC time (2024-05-01T12:00:00Z).", "beginning")
  c:option("-c --continuation", "Continue from this token instead.")
    :argname("TOKEN")
  c:option("--mode", "latest (documents) or all_versions (change " ..
    "records).", "latest"):choices({ "latest", "all_versions" })
  add_pk(c, "Only this logical partition.")
  c:option("-n --max-items", "At most N changes (without --follow).", nil,
    tonumber):argname("N")
  c:flag("-f --follow", "Keep printing new changes as they are written " ..
    "(until Ctrl-C).")
  c:option("--interval", "With --follow, seconds between two reads when " ..
    "nothing is new.", "0.5", tonumber)

  c = p:command("processors", "A processor's leases, owners, lag, " ..
    "failures and dead letters; re-drive or drop dead letters.")
  add_container(c)
  c:argument("name", "The processor's name (none: list the container's " ..
    "processors).")
    :args("?")
  c:option("--mode", "The processor's mode (found out when not given).")
    :choices({ "latest", "all_versions" })
  add_format(c, "table", "table, or json: the status as one JSON line " ..
    "(the list: one line per processor).")
  c:flag("--dead-letters", "Print the dead letters as JSON lines.")
  c:option("--redrive", "Write the items of dead letter SEQ (or all) " ..
    "again, unchanged, so that they come through the feed again; the " ..
    "letter is then removed.")
  c:option("--drop", "Remove dead letter SEQ (or all).")

  -- procedures and triggers -----------------------------------------------
  for _, kind in ipairs({ "procedures", "triggers" }) do
    local one = kind == "procedures" and "procedure" or "trigger"
    local k = p:command(kind, ("List, show, create, replace, delete%s %s.")
      :format(kind == "procedures" and " and execute" or "", kind))
      :command_target("action")
    local s = k:command("list", ("List the %s of a container."):format(kind))
    add_container(s)
    s = k:command("show", ("Print a %s's source."):format(one))
    add_container(s)
    s:argument("name", ("The %s's name."):format(one))
    for _, verb in ipairs({ "create", "replace" }) do
      s = k:command(verb, ("%s a %s from a Lua file."):format(
        verb == "create" and "Create" or "Replace", one))
      add_container(s)
      s:argument("name", ("The %s's name."):format(one))
      s:argument("file", "The Lua source (its chunk returns the function).")
      if kind == "triggers" then
        s:option("--type", "pre or post."):choices({ "pre", "post" })
          :args(1):count(1)
        s:option("--operation", "The writes it runs on.", "all")
          :choices({ "all", "create", "replace", "delete" })
        s:flag("--automatic", "Fire on every matching write without " ..
          "being named (an extension of Cosmos DB's triggers).")
      end
    end
    s = k:command("delete", ("Delete a %s."):format(one))
    add_container(s)
    s:argument("name", ("The %s's name."):format(one))
    if kind == "procedures" then
      s = k:command("execute", "Run a procedure in one logical partition " ..
        "with JSON arguments; its result on stdout, its log and charge on " ..
        "stderr.")
      add_container(s)
      s:argument("name", "The procedure's name.")
      s:argument("args", "Its arguments, each a JSON value."):args("*")
      add_pk(s, "The logical partition it runs in (required).")
    end
  end

  -- the database -----------------------------------------------------------
  c = p:command("stats", "Sizes and counts of the database and its " ..
    "containers.")
  add_dir(c)
  add_format(c, "table", "table, or json: one JSON line.")

  c = p:command("verify", "Check every invariant of the database (exit 1 " ..
    "on a problem, with a report).")
  add_dir(c)

  c = p:command("backup", "A consistent copy of the database, taken " ..
    "while it is in use.")
  add_dir(c)
  c:argument("dest", "The new directory for the copy.")

  c = p:command("compact", "A repacked copy of the database (every page " ..
    "full), taken while it is in use.")
  add_dir(c)
  c:argument("dest", "The new directory for the copy.")

  c = p:command("upgrade", "Upgrade a database of an older storage format " ..
    "to this one (no process may have it open).")
  add_dir(c)
  c:flag("--drop-history", "Leave the all-versions change feed behind " ..
    "(containers then keep none).")
  c:flag("--remove-old", "Delete the old data file (data.mdb.format1) " ..
    "once the new one is in place.")

  c = p:command("shell", "An interactive SQL prompt with history: rows " ..
    "and charges (.help inside).")
  add_dir(c)
  c:argument("container", "The container to start in."):args("?")
  add_format(c, nil, "How rows print at first: table (the default on " ..
    "a terminal) or json (otherwise); .mode changes it.")

  c = p:command("explore", "The Data Explorer in the browser, served by " ..
    "nginx with the Lua module on 127.0.0.1.")
  add_dir(c)
  c:option("--port", "The port.", "8078", tonumber)
  c:option("--host", "The address to listen on (only 127.0.0.1 unless " ..
    "you say otherwise).", "127.0.0.1")
  c:flag("--readonly", "Refuse every write.")
  return p
end
-- }=====================================================================

-- {=====================================================================
-- Dispatch
-- ======================================================================
local HANDLERS = {
  containers = "data", ["create-container"] = "data",
  ["delete-container"] = "data", get = "data", put = "data",
  delete = "data", query = "data", stats = "data", verify = "data",
  backup = "data", compact = "data", upgrade = "data",
  import = "transfer", export = "transfer",
  feed = "feed", processors = "feed", procedures = "scripts",
  triggers = "scripts", shell = "shell", explore = "explore",
}

local function traceback(err)
  if common.is_failure(err) then return err end
  return { internal = tostring(err), trace = debug.traceback("", 2) }
end

-- main(argv) -> exit code
function M.main(argv)
  local parser = build()
  local ok, args = parser:pparse(argv)
  if not ok then
    io.stderr:write("regolith: ", args, "\n",
      "(regolith --help, or regolith COMMAND --help)\n")
    return EXIT.usage
  end
  common.quiet = args.quiet
  if args.json then args.format = "json" end
  args.json = args.format == "json"
  local run = require("regolith.cli." .. HANDLERS[args.command])
  local fn = run[(args.command:gsub("%-", "_"))]
  local done, err = xpcall(fn, traceback, args)
  if done then return type(err) == "number" and err or EXIT.ok end
  io.stdout:flush()
  if common.is_failure(err) then
    io.stderr:write("regolith: ", err.message, "\n")
    return err.code
  end
  local msg = err.internal
  if msg:find("interrupted!", 1, true) then
    io.stderr:write("regolith: interrupted\n")
    return EXIT.interrupted
  end
  io.stderr:write("regolith: internal error: ", (msg:gsub("\n.*", "")), "\n")
  if os.getenv("REGOLITH_DEBUG") then io.stderr:write(err.trace, "\n") end
  return EXIT.internal
end
-- }=====================================================================

return M
