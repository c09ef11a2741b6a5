#!/bin/sh
# Stops the nginx whose master's pid is in PIDFILE, gracefully (QUIT: the
# workers finish their requests and close their databases), then with TERM
# after 10 s; returns once it is gone.  Usage: tools/nginx_stop.sh PIDFILE
[ -f "$1" ] || exit 0
pid=$(cat "$1")
kill -QUIT "$pid" 2>/dev/null || exit 0
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  sleep 0.1
done
