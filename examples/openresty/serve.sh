#!/bin/sh
# The example in nginx on the port and database of your choice
# (docs/openresty.md, Quick start).
#
#   examples/openresty/serve.sh start [PORT [DB]]    # default 8089, data/blog
#   examples/openresty/serve.sh stop
#
# PORT and DB (the database's directory) may also come from the
# environment (PORT, REGOLITH_DB); WORKERS (2) is worker_processes, SYNC
# the database's sync mode.  RUN is nginx's prefix, where it writes its
# error log and pid file (logs/), request bodies (tmp/) and its
# configuration for this run (conf/serve.conf): by default this
# directory; set it when the checkout is not yours to write (RUN=$HOME/run).
#
# What it does, which you may do by hand: makes those directories, writes
# conf/nginx.conf with the port, the worker count and the checkout's
# absolute paths into RUN/conf/serve.conf, and starts Debian's nginx (or
# OpenResty's, NGINX=...) on it.  As root, nginx would run its workers as
# nobody, who cannot write a database root made: the workers run as the
# invoking user (-g "user ...;").  Then it waits until the example
# answers, and starts the processors' pump (pump.lua, under LuaJIT; its
# pid in logs/pump.pid, what failed in logs/pump.log) unless
# PUMP=workers, which has each worker pump them between its requests.
# The pump runs at nice PUMP_NICE (10): the requests come first, the
# processors catch up between them.
# `stop` stops the pump (it closes the database and gives its leases back)
# and the nginx of RUN, gracefully (its workers close the database too).
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUN=${RUN:-$HERE}
RUN=$(mkdir -p "$RUN" && cd "$RUN" && pwd)
# Debian keeps nginx in /usr/sbin, which is not in an ordinary user's PATH
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
PIDFILE=$RUN/logs/nginx.pid
PUMPPID=$RUN/logs/pump.pid
PUMPSTOP=$RUN/logs/pump.stop

case "${1:-}" in
  start) ;;
  stop)
    # the pump first: it closes the database, giving its leases back
    sh "$ROOT/tools/nginx_stop.sh" "$PUMPPID" "$PUMPSTOP"
    exec sh "$ROOT/tools/nginx_stop.sh" "$PIDFILE" ;;
  *) echo "usage: $0 start [PORT [DB]] | stop" >&2; exit 2 ;;
esac

PORT=${2:-${PORT:-8089}}
DB=${3:-${REGOLITH_DB:-$RUN/data/blog}}
WORKERS=${WORKERS:-2}
PUMP=${PUMP:-process}
case "$PUMP" in
  process|workers) ;;
  *) echo "$0: PUMP is process or workers: $PUMP" >&2; exit 2 ;;
esac
case "$PORT" in
  ''|*[!0-9]*) echo "$0: the port must be a number: $PORT" >&2; exit 2 ;;
esac
if [ ! -f "$ROOT/build/luajit/regolith/core.so" ]; then
  echo "$0: regolith is not built for LuaJIT: run make LUA=luajit first" >&2
  exit 1
fi
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "$0: nginx already runs for $RUN (pid $(cat "$PIDFILE")): stop it first" >&2
  exit 1
fi

mkdir -p "$RUN/logs" "$RUN/tmp" "$RUN/conf" "$(dirname "$DB")"
# the app and its modules by absolute path, wherever the prefix is
sed -e "s|^worker_processes .*|worker_processes $WORKERS;|" \
    -e "s|listen 127\.0\.0\.1:[0-9]*;|listen 127.0.0.1:$PORT;|" \
    -e "s|\$prefix/\.\./\.\./|$ROOT/|g" \
    -e "s|\$prefix/\.\./|$ROOT/examples/|g" \
    -e "s|\$prefix/?\.lua|$HERE/?.lua|g" \
    "$HERE/conf/nginx.conf" > "$RUN/conf/serve.conf"

export REGOLITH_DB="$DB" REGOLITH_PUMP="$PUMP"
if [ -n "${SYNC:-}" ]; then export REGOLITH_SYNC="$SYNC"; fi
GLOBAL=""
if [ "$(id -u)" = 0 ]; then GLOBAL="user $(id -un) $(id -gn);"; fi
if [ -n "$GLOBAL" ]; then
  "$NGINX" -p "$RUN/" -c conf/serve.conf -e logs/error.log -g "$GLOBAL"
else
  "$NGINX" -p "$RUN/" -c conf/serve.conf -e logs/error.log
fi

# nginx is up once it answers (the workers open the database first)
i=0
until curl -s -o /dev/null "http://127.0.0.1:$PORT/admin/processors"; do
  i=$((i + 1))
  if [ $i -ge 100 ]; then
    echo "$0: nginx does not answer on port $PORT; its log says:" >&2
    tail -n 5 "$RUN/logs/error.log" >&2
    sh "$ROOT/tools/nginx_stop.sh" "$PIDFILE"
    exit 1
  fi
  sleep 0.1
done

# the processors' pump, a LuaJIT process on the build the workers load
if [ "$PUMP" = process ]; then
  rm -f "$PUMPSTOP"
  LUA_PATH="$HERE/?.lua;$ROOT/lua/?.lua;$ROOT/lua/?/init.lua;$ROOT/examples/?.lua;;" \
  LUA_CPATH="$ROOT/build/luajit/?.so;;" \
    nice -n "${PUMP_NICE:-10}" "${LUAJIT:-luajit}" "$HERE/pump.lua" "$DB" "$PUMPSTOP" \
    </dev/null >>"$RUN/logs/pump.log" 2>&1 &
  echo $! > "$PUMPPID"
fi
if [ "$PUMP" = process ]; then by="pump.lua"; else by="the workers"; fi
echo "the blog on http://127.0.0.1:$PORT/ ($WORKERS workers, processors run" \
  "by $by, database $DB, logs $RUN/logs/); stop: $0 stop"
