#!/bin/sh
# regolith in nginx under load (make openresty; docs/openresty.md).
#
#   examples/openresty/load.sh [WORKERS...]      (default: 1 2 4)
#
# For each number of workers: starts nginx on 127.0.0.1 with this
# directory as its prefix and a fresh database, loads a small data set
# through the model from another process while the workers' processors
# run, drives the read-heavy mix (mix.lua) with wrk for DURATION seconds,
# waits for the processors, checks the database (db:verify(), the model's
# checks, HTTP answers against the model's own), stops nginx by its pid,
# and prints requests/second and latency percentiles.  A failed check, an
# HTTP error or a wrk error fails the script.
#
# Settings (environment): PORT (8089), DURATION (10 s), CONNECTIONS (16),
# THREADS (2), SCALE (0.0002: 20 users), SYNC ("full"), MIX ("" for the
# mix, "reads" for its reads alone), QUEUE (1: the write requests of
# every worker share transactions through db:write_queue; 0: not), GROUP
# (with QUEUE=0, 1: the write requests of a worker share transactions
# through db:group_commit; 0: each its own), PUMP ("process": the
# processors are pumped by a process of their own, pump.lua; "workers": by
# each worker's timer, between its requests), TRACE (1: the workers trace
# their requests and passes, and tail.lua says after each round where the
# slowest 1 % of the requests' time went), ANCHOR (1: after the mix, once
# the processors caught up, wrk as long on /static, which nginx answers
# without Lua: the client's and nginx's own cost on the same cores).
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PREFIX=$ROOT/examples/openresty
PORT=${PORT:-8089}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-2}
SCALE=${SCALE:-0.0002}
SYNC=${SYNC:-full}
MIX=${MIX:-}
QUEUE=${QUEUE:-1}
GROUP=${GROUP:-1}
PUMP=${PUMP:-process}
TRACE=${TRACE:-0}
ANCHOR=${ANCHOR:-0}
WORKERS=${*:-1 2 4}
URL=http://127.0.0.1:$PORT
DB=$PREFIX/data/blog
KEYS=$PREFIX/data/keys

# What it needs, installed when missing: the build for Lua 5.4 (the loader
# and the checks) and for LuaJIT (the workers), nginx with the Lua module
# and lua-resty-core, wrk and curl.
sh tools/deps.sh gcc make liblua5.4-dev liblmdb-dev libcjson-dev duktape-dev lua5.4 \
  lua-system libluajit2-5.1-dev nginx libnginx-mod-http-lua lua-resty-core \
  wrk curl
make -s all
make -s all LUA=luajit

export LUA_PATH="$PREFIX/?.lua;$ROOT/examples/?.lua;$ROOT/lua/?.lua;$ROOT/lua/?/init.lua;;"
export LUA_CPATH="$ROOT/build/lua5.4/?.so;;"
export REGOLITH_DB=$DB REGOLITH_SYNC=$SYNC REGOLITH_QUEUE=$QUEUE REGOLITH_GROUP=$GROUP
export PUMP
if [ "$TRACE" = 1 ]; then export REGOLITH_APP_TRACE=$PREFIX/logs/trace; fi

# nginx is started and stopped by serve.sh (the quick start's script:
# the port, the workers, the user as root), with this directory as RUN.
stop_nginx() { RUN=$PREFIX sh "$PREFIX/serve.sh" stop; }

fail() {
  echo "FAILED: $*" >&2
  echo "--- last lines of $PREFIX/logs/error.log:" >&2
  tail -n 20 "$PREFIX/logs/error.log" >&2 2>/dev/null || true
  stop_nginx
  exit 1
}

# res: the RESULT line of wrk's output $1 (mix.lua prints it), which must
# count no error; $2 says which run it was
wrk_result() {
  res=$(echo "$1" | grep '^RESULT') || fail "$2 printed no result"
  errors=$(echo "$res" | sed 's/.* errors=\([0-9]*\).*/\1/')
  [ "$errors" = 0 ] || fail "$errors HTTP or socket errors ($2): $res"
}

trap stop_nginx EXIT
stop_nginx

SUMMARY=""
for n in $WORKERS; do
  echo "== $n worker(s), $CONNECTIONS connections, ${DURATION} s"
  rm -rf "$PREFIX/data" "$PREFIX/logs" "$PREFIX/tmp"
  mkdir -p "$PREFIX/data" "$PREFIX/logs" "$PREFIX/tmp"
  RUN=$PREFIX WORKERS=$n sh "$PREFIX/serve.sh" start "$PORT" "$DB" >/dev/null ||
    fail "nginx did not start"
  lua5.4 "$PREFIX/tool.lua" load "$DB" "$KEYS" "$SCALE" || fail "load"
  lua5.4 "$PREFIX/tool.lua" wait "$URL" 120 || fail "processors after the load"
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s \
        -s "$PREFIX/mix.lua" "$URL" -- "$KEYS" $MIX) || fail "wrk"
  echo "$out" | grep -v '^RESULT'
  wrk_result "$out" "wrk"
  result=$res
  lua5.4 "$PREFIX/tool.lua" wait "$URL" 120 || fail "processors after the run"
  # the anchor once the processors caught up with the mix: nothing but wrk
  # and nginx then runs on these cores
  if [ "$ANCHOR" = 1 ]; then
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s \
          -s "$PREFIX/mix.lua" "$URL" -- "$KEYS" static) || fail "wrk on /static"
    wrk_result "$out" "wrk on /static"
    anchor=$(echo "$res" | sed 's/^RESULT //')
  fi
  echo "checks:"
  lua5.4 "$PREFIX/tool.lua" check "$DB" "$URL" "$KEYS" || fail "checks"
  if grep -q '\[error\]\|\[alert\]\|\[crit\]\|\[emerg\]' "$PREFIX/logs/error.log"; then
    fail "errors in the error log"
  fi
  # group commit yields without ngx.sleep(0), which Debian's nginx (no
  # delayed events patch) would warn about at every write
  if grep -q 'ngx.sleep(0) called' "$PREFIX/logs/error.log"; then
    fail "ngx.sleep(0) warnings in the error log"
  fi
  # the pump says on stderr only what failed
  if [ -s "$PREFIX/logs/pump.log" ]; then
    echo "--- $PREFIX/logs/pump.log:" >&2
    tail -n 20 "$PREFIX/logs/pump.log" >&2
    fail "the processors' pump failed"
  fi
  stop_nginx
  if [ "$TRACE" = 1 ]; then
    echo "where the time went (tail.lua):"
    lua5.4 "$PREFIX/tail.lua" "$PREFIX"/logs/trace.*
  fi
  line=$(echo "$result" | sed 's/^RESULT //')
  SUMMARY="$SUMMARY
$(printf '%-8s %s' "$n" "$line")"
  if [ "$ANCHOR" = 1 ]; then
    SUMMARY="$SUMMARY
$(printf '%-8s %s' "$n" "/static $anchor")"
  fi
done

echo
echo "== summary ($(nproc) cores; latencies in ms; sync = $SYNC; queue = $QUEUE; group = $GROUP;" \
  "processors: PUMP=$PUMP;" \
  "${MIX:-mix} of ${DURATION} s, $CONNECTIONS connections)"
printf '%-8s %s\n' "workers" "results"
echo "$SUMMARY" | sed '/^$/d'
