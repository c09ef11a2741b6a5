#!/bin/sh
# The gateway's tests (make gateway-test; docs/gateway.md):
#
#   1. tests/sdk/*.test.mjs: node:test files driving @azure/cosmos (the
#      version package-lock.json pins, installed here into
#      tests/sdk/node_modules), each starting and stopping a gateway of its
#      own;
#   2. tests/sdk/python_smoke.py: Debian's python3-azure-cosmos (the 3.x
#      SDK) against a gateway started for it.
#
# Installs what is missing first: the Debian packages of the gateway and
# of the blog's Lua model, and Node.js with npm when there is no node.
set -eu

cd "$(dirname "$0")/../.."
sh tools/deps.sh gcc make liblua5.4-dev liblmdb-dev libcjson-dev duktape-dev lua5.4 \
  lua-system luajit2 libluajit2-5.1-dev nginx libnginx-mod-http-lua \
  lua-resty-core openssl curl python3-azure-cosmos
command -v node >/dev/null 2>&1 || sh tools/deps.sh nodejs npm
make -s all
make -s all LUA=luajit

cd tests/sdk
npm ci --no-audit --no-fund --loglevel=error
node --test
cd ../..

PREFIX=$(mktemp -d /tmp/regolith-gateway-py.XXXXXX)
PORT=${PYTHON_PORT:-18091}
out=$(GATEWAY_PREFIX=$PREFIX GATEWAY_PORT=$PORT QUIET=1 GATEWAY_SYNC=lazy \
      sh tools/gateway/gateway.sh start)
stop() {
  GATEWAY_PREFIX=$PREFIX QUIET=1 sh tools/gateway/gateway.sh stop
  rm -rf "$PREFIX"
}
trap stop EXIT
/usr/bin/python3 tests/sdk/python_smoke.py $(echo "$out" | head -1) $(echo "$out" | tail -1)
if grep -q '\[error\]\|\[crit\]\|\[alert\]\|\[emerg\]' "$PREFIX/logs/error.log"; then
  echo "errors in the gateway's log:" >&2
  cat "$PREFIX/logs/error.log" >&2
  exit 1
fi
