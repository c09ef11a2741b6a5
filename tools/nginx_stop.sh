#!/bin/sh
# Stops the nginx whose master's pid is in PIDFILE, gracefully (QUIT: the
# workers finish their requests and close their databases), then with TERM
# after 10 s; returns once it is gone.  Usage: tools/nginx_stop.sh PIDFILE
# With STOPFILE, the process of PIDFILE is one that stops by itself once
# that file exists (examples/openresty/pump.lua): the file is made instead
# of the QUIT, and both files are removed once it is gone.
# Usage: tools/nginx_stop.sh PIDFILE [STOPFILE]
[ -f "$1" ] || exit 0
pid=$(cat "$1")
if [ -n "${2:-}" ]; then
  : > "$2"
else
  kill -QUIT "$pid" 2>/dev/null || exit 0
fi
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  sleep 0.1
done
if [ -n "${2:-}" ]; then rm -f "$1" "$2"; fi
