#!/bin/sh
# The Cosmos DB gateway (docs/gateway.md): start it, stop it.
#
#   tools/gateway/gateway.sh start     (make gateway)
#   tools/gateway/gateway.sh stop      (make gateway-stop)
#
# start installs what is missing (Debian's nginx, libnginx-mod-http-lua,
# lua-resty-core, luajit2, libluajit2-5.1-dev, openssl), builds the LuaJIT
# module, makes a master key (kept in the prefix, so a restart keeps it),
# with TLS=1 a self-signed certificate, starts nginx on 127.0.0.1 and
# prints the endpoint and the key.  Settings (environment):
#
#   GATEWAY_PREFIX   nginx's prefix: conf, logs, key, certificate (build/gateway)
#   GATEWAY_ROOT     the databases' directory ($GATEWAY_PREFIX/data)
#   GATEWAY_PORT     8081
#   GATEWAY_WORKERS  nginx worker processes (2)
#   GATEWAY_SYNC     the databases' sync mode: full, lazy, none (full)
#   GATEWAY_KEY      the master key, base64 (default: made once, kept)
#   TLS              1: https with a self-signed certificate (default http)
#   GATEWAY_EXTRA_CONF  a file of nginx directives included in the http
#                    block (more servers and locations in the same workers)
#   QUIET            1: print only the endpoint and the key, one per line
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PREFIX=${GATEWAY_PREFIX:-$ROOT/build/gateway}
case $PREFIX in /*) ;; *) PREFIX=$ROOT/$PREFIX ;; esac
DATA=${GATEWAY_ROOT:-$PREFIX/data}
PORT=${GATEWAY_PORT:-8081}
WORKERS=${GATEWAY_WORKERS:-2}
SYNC=${GATEWAY_SYNC:-full}
TLS=${TLS:-0}
QUIET=${QUIET:-0}
PIDFILE=$PREFIX/logs/nginx.pid

say() { [ "$QUIET" = 1 ] || echo "$@"; }

stop() {
  sh tools/nginx_stop.sh "$PIDFILE"
  rm -f "$PIDFILE"
}

start() {
  if [ "$QUIET" = 1 ]; then
    sh tools/deps.sh gcc make liblmdb-dev libcjson-dev duktape-dev luajit2 \
      libluajit2-5.1-dev nginx libnginx-mod-http-lua lua-resty-core openssl \
      curl >/dev/null
    make -s all LUA=luajit >/dev/null
  else
    sh tools/deps.sh gcc make liblmdb-dev libcjson-dev duktape-dev luajit2 \
      libluajit2-5.1-dev nginx libnginx-mod-http-lua lua-resty-core openssl curl
    make -s all LUA=luajit
  fi
  stop
  mkdir -p "$PREFIX/conf" "$PREFIX/logs" "$PREFIX/tmp" "$DATA"
  if [ -n "${GATEWAY_KEY:-}" ]; then
    KEY=$GATEWAY_KEY
  else
    [ -s "$PREFIX/key" ] || openssl rand -base64 64 | tr -d '\n' > "$PREFIX/key"
    KEY=$(cat "$PREFIX/key")
  fi
  SSL="" TLSCONF="" SCHEME=http
  if [ "$TLS" = 1 ]; then
    mkdir -p "$PREFIX/tls"
    if [ ! -s "$PREFIX/tls/cert.pem" ]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 3650 \
        -keyout "$PREFIX/tls/key.pem" -out "$PREFIX/tls/cert.pem" \
        -subj "/CN=localhost" \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
    fi
    SSL=" ssl"
    TLSCONF="ssl_certificate $PREFIX/tls/cert.pem; ssl_certificate_key $PREFIX/tls/key.pem;"
    SCHEME=https
  fi
  EXTRA=""
  if [ -n "${GATEWAY_EXTRA_CONF:-}" ]; then EXTRA="include $GATEWAY_EXTRA_CONF;"; fi
  sed -e "s|@WORKERS@|$WORKERS|" -e "s|@PORT@|$PORT|" -e "s|@SSL@|$SSL|" \
      -e "s|@TLS@|$TLSCONF|" -e "s|@ROOT@|$ROOT|g" -e "s|@EXTRA@|$EXTRA|" \
      tools/gateway/nginx.conf > "$PREFIX/conf/nginx.conf"
  # As root, nginx would run its workers as nobody, who could not write the
  # databases: keep them as the invoking user.
  GLOBAL=""
  if [ "$(id -u)" = 0 ]; then GLOBAL="user $(id -un) $(id -gn);"; fi
  : > "$PREFIX/logs/error.log"
  REGOLITH_GATEWAY_ROOT=$DATA REGOLITH_GATEWAY_KEY=$KEY \
  REGOLITH_GATEWAY_SYNC=$SYNC REGOLITH_GATEWAY_URL=${GATEWAY_URL:-} \
    nginx -p "$PREFIX/" -c conf/nginx.conf -e logs/error.log ${GLOBAL:+-g "$GLOBAL"}
  i=0
  until curl -sk -o /dev/null "$SCHEME://127.0.0.1:$PORT/"; do
    i=$((i + 1))
    if [ $i -gt 100 ]; then
      echo "the gateway does not answer on $SCHEME://127.0.0.1:$PORT/" >&2
      tail -n 20 "$PREFIX/logs/error.log" >&2
      stop
      exit 1
    fi
    sleep 0.1
  done
  if grep -q '\[emerg\]' "$PREFIX/logs/error.log"; then
    echo "the gateway failed to start:" >&2
    grep '\[emerg\]' "$PREFIX/logs/error.log" >&2
    stop
    exit 1
  fi
  if [ "$QUIET" = 1 ]; then
    echo "$SCHEME://127.0.0.1:$PORT/"
    echo "$KEY"
    return
  fi
  echo
  echo "regolith's Cosmos DB gateway: $WORKERS worker(s), databases in $DATA"
  echo "  endpoint: $SCHEME://127.0.0.1:$PORT/"
  echo "  key:      $KEY"
  if [ "$TLS" = 1 ]; then
    echo "  certificate: $PREFIX/tls/cert.pem (Node: NODE_EXTRA_CA_CERTS=$PREFIX/tls/cert.pem)"
  fi
  echo "  log:      $PREFIX/logs/error.log"
  echo "  stop:     make gateway-stop  (or tools/gateway/gateway.sh stop)"
}

case "${1:-start}" in
  start) start ;;
  stop) stop; say "stopped" ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
