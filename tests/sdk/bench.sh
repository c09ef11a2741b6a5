#!/bin/sh
# The gateway's numbers (make gateway-bench; docs/gateway.md, "Numbers").
#
#   tests/sdk/bench.sh [WORKERS...]        (default: 1 2 4)
#
# For each number of nginx workers: starts a gateway with a fresh database
# and, in the same workers, a server running the same calls in Lua
# (bench_direct.lua); loads 1000 items of about 300 bytes in 100 logical
# partitions; then for point reads, creates and single-partition queries
# (10 items each) measures, for DURATION seconds each:
#   lua  - the calls in Lua inside nginx, driven by wrk;
#   rest - the Cosmos REST API, signed requests replayed by wrk (the
#          protocol's cost without an SDK's);
#   sdk  - @azure/cosmos in Node.js with CONCURRENCY calls in flight (a
#          query is two HTTP requests: the SDK asks for a query plan too).
# Prints requests/second and p50/p99 latency (ms); any error fails.
#
# Settings: DURATION (10 s), CONNECTIONS (16, wrk and the SDK alike),
# THREADS (wrk's, 2), SYNC (the databases' sync mode, full), PORT (18181).
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-2}
SYNC=${SYNC:-full}
PORT=${PORT:-18181}
DIRECT_PORT=$((PORT + 1))
WORKERS=${*:-1 2 4}

sh tools/deps.sh wrk curl
command -v node >/dev/null 2>&1 || sh tools/deps.sh nodejs npm
(cd tests/sdk && npm ci --no-audit --no-fund --loglevel=error)

PREFIX=$(mktemp -d /tmp/regolith-gateway-bench.XXXXXX)
EXTRA=$PREFIX/direct.conf
cat > "$EXTRA" <<EOF
server {
  listen 127.0.0.1:$DIRECT_PORT;
  location / { content_by_lua_file $ROOT/tests/sdk/bench_direct.lua; }
}
EOF
stop() { GATEWAY_PREFIX=$PREFIX QUIET=1 sh tools/gateway/gateway.sh stop || true; }
trap 'stop; rm -rf "$PREFIX"' EXIT

fail() {
  echo "FAILED: $*" >&2
  tail -n 20 "$PREFIX/logs/error.log" >&2 2>/dev/null || true
  exit 1
}

# Fails unless the output holds a RESULT line without errors.
check() {
  line=$(echo "$1" | grep '^RESULT') || fail "no result: $1"
  errors=$(echo "$line" | sed 's/.* errors=\([0-9]*\).*/\1/')
  [ "$errors" = 0 ] || fail "$errors errors: $line"
}

# "rps (p50 / p99)" of a RESULT line.
cell() {
  echo "$1" | grep '^RESULT' |
    sed 's/.* rps=\([0-9.]*\) p50=\([0-9.]*\) p99=\([0-9.]*\).*/\1 (\2 \/ \3)/'
}

TABLE=""
for n in $WORKERS; do
  stop
  rm -rf "$PREFIX/data"
  out=$(GATEWAY_PREFIX=$PREFIX GATEWAY_PORT=$PORT GATEWAY_WORKERS=$n QUIET=1 \
        GATEWAY_SYNC=$SYNC GATEWAY_EXTRA_CONF=$EXTRA sh tools/gateway/gateway.sh start) ||
    fail "the gateway did not start"
  URL=$(echo "$out" | head -1)
  KEY=$(echo "$out" | tail -1)
  node tests/sdk/bench.mjs prepare "$URL" "$KEY" "$PREFIX/sigs" || fail "prepare"
  for op in read query create; do
    echo "== $n worker(s): $op" >&2
    lua=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" -s tests/sdk/bench_wrk.lua \
          "http://127.0.0.1:$DIRECT_PORT" -- direct "$op" "$PREFIX/sigs") || fail "wrk"
    rest=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" -s tests/sdk/bench_wrk.lua \
           "$URL" -- rest "$op" "$PREFIX/sigs") || fail "wrk"
    sdk=$(node tests/sdk/bench.mjs run "$URL" "$KEY" "$op" "$DURATION" "$CONNECTIONS") ||
      fail "the SDK run"
    check "$lua"; check "$rest"; check "$sdk"
    TABLE="$TABLE
$(printf '| %s | %s | %s | %s | %s |' "$n" "$op" "$(cell "$lua")" "$(cell "$rest")" "$(cell "$sdk")")"
  done
  if grep -q '\[error\]\|\[crit\]\|\[alert\]\|\[emerg\]' "$PREFIX/logs/error.log"; then
    fail "errors in nginx's log"
  fi
done

echo
echo "== requests/s (p50 / p99 ms); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);"
echo "   sync = $SYNC, $CONNECTIONS connections, ${DURATION} s each"
echo "| workers | call | Lua in nginx (wrk) | REST API (wrk) | JS SDK (node) |"
echo "|--:|---|--:|--:|--:|"
echo "$TABLE" | sed '/^$/d'
