#!/bin/sh
# Stops the nginx whose master's pid is in PIDFILE, gracefully (QUIT: the
# workers finish their requests and close their databases), then with TERM
# after 10 s; returns once it is gone.  Usage: tools/nginx_stop.sh PIDFILE
# With STOPFILE, the process of PIDFILE is one that stops by itself once
# that file exists (examples/openresty/pump.lua): the file is made instead
# of the QUIT, and both files are removed once it is gone.
# Usage: tools/nginx_stop.sh PIDFILE [STOPFILE]
#
# A pid file can outlive its process (a pump that died, an nginx killed),
# and the system can give that pid to another process since.  So the
# process is signalled and waited for only while it is ours: while its
# command line names STOPFILE (the pump is given it there) or, without
# STOPFILE, nginx (its master's title, "nginx: master process ...").
# Else it is gone: the pid file (and STOPFILE) are removed and nothing is
# signalled.
[ -f "$1" ] || exit 0
pid=$(cat "$1")
case "$pid" in
  ''|*[!0-9]*) rm -f "$1" ${2:+"$2"}; exit 0 ;;
esac
mark=${2:-nginx}

# ours: the process of pid is alive and its command line names $mark
ours() {
  if [ -d /proc/self ]; then
    # a zombie's cmdline is empty: gone too
    args=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline") || return 1
  else
    args=$(ps -o args= -p "$pid" 2>/dev/null) || return 1
  fi
  case "$args" in *"$mark"*) return 0 ;; esac
  return 1
}

if ! ours; then rm -f "$1" ${2:+"$2"}; exit 0; fi
if [ -n "${2:-}" ]; then
  : > "$2"
else
  kill -QUIT "$pid" 2>/dev/null || exit 0
fi
i=0
while ours; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  sleep 0.1
done
if [ -n "${2:-}" ]; then rm -f "$1" "$2"; fi
