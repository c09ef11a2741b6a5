#!/bin/bash
# A local Redis Cluster for the cluster specs and benchmarks: 3 primaries and
# 3 replicas on 127.0.0.1, one directory per node under DIR.
#
#   tools/redis-cluster.sh start DIR [BASE_PORT]   start, create, wait until ready
#   tools/redis-cluster.sh stop DIR                stop every server it started
#   tools/redis-cluster.sh restart DIR [PORT]      restart one node (or all six)
#   tools/redis-cluster.sh wait DIR [SECONDS]      wait until whole again
#   tools/redis-cluster.sh status DIR              each node's view and log end
#   tools/redis-cluster.sh ports DIR               print the six ports
#   tools/redis-cluster.sh add DIR                 start one more primary (no
#                                                  slots yet) and add it; prints
#                                                  its port
#   tools/redis-cluster.sh remove DIR PORT         forget an added primary (it
#                                                  must hold no slot) and stop it
#   tools/redis-cluster.sh settle DIR [SECONDS]    wait until every node, added
#                                                  ones too, sees every other
#                                                  one reachable (see settled)
#
# DIR and BASE_PORT may also come from RG_CLUSTER_DIR and RG_CLUSTER_PORTS.
# With RG_CLUSTER_OWNER=<pid>, start also leaves a watcher that stops the
# cluster once that process has ended, however it ended.
# Without a base port, a random free one in 20000-54999 is chosen (cluster
# bus ports are port + 10000).  The nodes use ports BASE..BASE+5.
#
# Every server is started by this script, and its pid is written to
# DIR/<port>/pid; stop and every failure path end exactly those pids (after
# checking that each still is the redis-server of that port), nothing else.
# Servers stop on SIGTERM without saving (shutdown-on-sigterm "nosave now"):
# the data of a test cluster is thrown away.  "start" returns when every
# node reports cluster_state:ok and every primary has its replica online.
set -u

NODES=6
WAIT_SECONDS=${RG_CLUSTER_WAIT:-30}

die () {
  echo "redis-cluster: $*" >&2
  exit 1
}

abs_dir () {
  mkdir -p "$1" && (cd "$1" && pwd)
}

ports_of () {
  base=$(cat "$1/base_port" 2>/dev/null) || die "no cluster in $1"
  seq "$base" $((base + NODES - 1))
}

# True when something listens on 127.0.0.1:$1.
port_busy () {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pick_base () {
  tries=0
  while [ $tries -lt 50 ]; do
    tries=$((tries + 1))
    base=$(( (($(od -An -N2 -tu2 /dev/urandom) % 3500) * 10) + 20000 ))
    free=yes
    for p in $(seq "$base" $((base + NODES - 1))); do
      if port_busy "$p" || port_busy $((p + 10000)); then free=no; break; fi
    done
    [ $free = yes ] && { echo "$base"; return 0; }
  done
  die "no free base port found"
}

# True while process $1 runs (an exited server whose parent has not reaped
# it yet is a zombie: it holds no port and counts as stopped).
alive () {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# The pid in DIR/<port>/pid when that process still is our redis-server.
live_pid () {
  pidf="$1/$2/pid"
  [ -f "$pidf" ] || return 1
  pid=$(cat "$pidf")
  [ -n "$pid" ] && alive "$pid" || return 1
  # before redis-server sets its title, its command line still names the port
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null |
    grep -q -E "redis-server.*(:$2|--port $2 )" ||
    return 1
  echo "$pid"
}

start_node () {
  dir=$1 port=$2
  mkdir -p "$dir/$port"
  # wait_ping reads the new log: the last run's is kept beside it
  [ -f "$dir/$port/redis.log" ] && mv "$dir/$port/redis.log" "$dir/$port/redis.log.prev"
  # LD_PRELOAD is dropped: the sanitizer runs preload ASan into the specs,
  # and must not preload it into the servers they start.
  env -u LD_PRELOAD redis-server --port "$port" --bind 127.0.0.1 \
    --dir "$dir/$port" --logfile "$dir/$port/redis.log" --daemonize no \
    --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout 2000 --appendonly yes --appendfsync everysec \
    --save '' --shutdown-on-sigterm "nosave now" --repl-diskless-sync-delay 0 \
    --enable-debug-command local \
    </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/$port/pid"
}

# Waits until the servers of DIR ($1) on every port given say in their own
# logs that they accept connections (a PING could be answered by another
# server on a port taken meanwhile); fails at once when one has exited.
wait_ping () {
  d=$1
  shift
  for p in "$@"; do
    n=0
    until grep -q 'Ready to accept connections' "$d/$p/redis.log" 2>/dev/null; do
      live_pid "$d" "$p" >/dev/null || return 1
      n=$((n + 1))
      [ $n -gt $((WAIT_SECONDS * 20)) ] && return 1
      sleep 0.05
    done
  done
}

# Who serves which slots in one node's view ($1: CLUSTER NODES), one line
# per primary with slots, sorted: equal on every node once they agree.
slot_map () {
  echo "$1" | awk '$3 ~ /master/ && $9 != "" {
    line = $1; for (i = 9; i <= NF; i++) line = line " " $i; print line }' | sort
}

# Waits until every node says cluster_state:ok, every node has the same
# view of who serves which slot (a replica promoted while its view of its
# primary's slots lagged would leave a slot nobody serves: the cluster
# would stay down), and every primary has exactly one replica online (a
# node started again counts as it rejoins),
# for at most WAIT_SECONDS of wall time (one round asks every node three
# questions: on a loaded machine a round takes far longer than its pause).
wait_ready () {
  deadline=$((SECONDS + WAIT_SECONDS))
  while :; do
    ready=yes
    first_map=""
    for p in "$@"; do
      redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' ||
        { ready=no; break; }
      # every node sees three primaries with slots, three replicas, no
      # failure (right after a create or a failover, views lag behind)
      view=$(redis-cli -p "$p" cluster nodes 2>/dev/null)
      [ "$(echo "$view" | awk '$3 ~ /master/ && $9 != "" { n++ } END { print n + 0 }')" = 3 ] &&
        [ "$(echo "$view" | grep -c slave)" = 3 ] && ! echo "$view" | grep -q fail ||
        { ready=no; break; }
      map=$(slot_map "$view")
      [ -n "$first_map" ] || first_map=$map
      [ "$map" = "$first_map" ] || { ready=no; break; }
      info=$(redis-cli -p "$p" info replication 2>/dev/null | tr -d '\r')
      if echo "$info" | grep -q '^role:master'; then
        echo "$info" | grep -q '^slave0:.*state=online' || { ready=no; break; }
      else
        echo "$info" | grep -q '^master_link_status:up' || { ready=no; break; }
      fi
    done
    [ $ready = yes ] && return 0
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}

# True when the nodes on the ports given ($2...) are settled, as redis-cli
# --cluster needs them before it moves slots: each says cluster_state:ok,
# lists exactly that many nodes, every one of them without a failure or
# handshake flag (fail, fail?, handshake, noaddr) and with its link
# connected, and no slot half-moved; and all give one slot map.  redis-cli
# reads every other node's flags from its seed's view and silently leaves
# out one that view marks fail (or disconnected): a rebalance would then
# spread the slots over the others, give a new primary none, and exit 0.
# Else what is not settled yet is written to the file $1.
settled () {
  why=$1
  shift
  first_map=""
  for p in "$@"; do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' ||
      { echo "node $p: cluster_state is not ok" > "$why"; return 1; }
    view=$(redis-cli -p "$p" cluster nodes 2>/dev/null)
    bad=$(echo "$view" | awk -v want=$# '
      { n++ }
      $3 ~ /(^|,)(fail\??|handshake|noaddr)(,|$)/ || $8 != "connected" {
        print "sees " $2 " " $3 " " $8; bad = 1; exit }
      /\[/ { print "has a slot half-moved: " $0; bad = 1; exit }
      END { if (!bad && n != want) print "knows " n " nodes, not " want }')
    [ -z "$bad" ] || { echo "node $p $bad" > "$why"; return 1; }
    map=$(slot_map "$view")
    [ -n "$first_map" ] || first_map=$map
    [ "$map" = "$first_map" ] ||
      { echo "node $p gives the slots to other nodes than node $1 does" > "$why"; return 1; }
  done
}

# Waits until the nodes on the ports given are settled, for at most
# WAIT_SECONDS; says on stderr what it waited for (or, failing, what is
# still not settled).
wait_settled () {
  deadline=$((SECONDS + WAIT_SECONDS))
  why=$(mktemp)
  waited=""
  until settled "$why" "$@"; do
    [ -n "$waited" ] || waited=$(cat "$why")
    if [ $SECONDS -ge $deadline ]; then
      echo "redis-cluster: not settled after ${WAIT_SECONDS}s: $(cat "$why")" >&2
      rm -f "$why"
      return 1
    fi
    sleep 0.1
  done
  rm -f "$why"
  [ -z "$waited" ] || echo "redis-cluster: settled after waiting ($waited)" >&2
  return 0
}

# What each node of DIR ($1) sees and the end of its log, on stderr: printed
# when the cluster does not become whole, so that a failed run says why.
describe () {
  for p in $(ports_of "$1"); do
    echo "--- node $p: $(live_pid "$1" "$p" >/dev/null && echo running || echo 'not running')" >&2
    redis-cli -p "$p" cluster info 2>&1 | grep -E 'cluster_state|cluster_slots_(ok|pfail|fail)' >&2
    redis-cli -p "$p" cluster nodes 2>&1 | sed 's/^/  /' >&2
    tail -n 15 "$1/$p/redis.log" 2>/dev/null | sed 's/^/  log: /' >&2
  done
}

# Sends SIGTERM to the pids given and waits until they are gone.  A server
# busy writing its first AOF file ignores SIGTERM ("can't exit"): the signal
# is sent again every half second, and after ten seconds SIGKILL ends it.
stop_pids () {
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  n=0
  for pid in "$@"; do
    while alive "$pid"; do
      n=$((n + 1))
      if [ $n -gt 200 ]; then kill -KILL "$pid" 2>/dev/null
      elif [ $((n % 10)) = 0 ]; then kill -TERM "$pid" 2>/dev/null; fi
      sleep 0.05
    done
  done
}

# The ports of the primaries added to the cluster after it was made.
extra_ports () {
  cat "$1/extra_ports" 2>/dev/null
}

stop_all () {
  pids=""
  for p in $(ports_of "$1") $(extra_ports "$1"); do
    pid=$(live_pid "$1" "$p") && pids="$pids $pid"
  done
  # shellcheck disable=SC2086
  stop_pids $pids
  for p in $(ports_of "$1") $(extra_ports "$1"); do rm -f "$1/$p/pid"; done
  rm -f "$1/extra_ports"
}

cmd=${1:-}
dir=${2:-${RG_CLUSTER_DIR:-}}
[ -n "$cmd" ] && [ -n "$dir" ] ||
  die "usage: $0 start|stop|restart|wait|status|ports|add|remove|settle DIR [PORT|SECONDS]"
command -v redis-server >/dev/null 2>&1 ||
  die "redis-server is not installed (apt-get install redis-server redis-tools)"

case "$cmd" in
start)
  dir=$(abs_dir "$dir") || die "cannot create $dir"
  [ -f "$dir/base_port" ] && live_pid "$dir" "$(cat "$dir/base_port")" >/dev/null &&
    die "a cluster already runs in $dir"
  fail () {
    echo "redis-cluster: $*; the logs are in $dir/<port>/redis.log" >&2
    stop_all "$dir"
    exit 1
  }
  given=${3:-${RG_CLUSTER_PORTS:-}}
  # A random base port can be taken between the check and the bind: then
  # the servers started are stopped and another base is tried.
  for attempt in 1 2 3; do
    base=$given
    [ -n "$base" ] || base=$(pick_base) || exit 1
    echo "$base" > "$dir/base_port"
    ports=$(ports_of "$dir")
    for p in $ports; do
      rm -rf "${dir:?}/$p"
      start_node "$dir" "$p"
    done
    # shellcheck disable=SC2086
    wait_ping "$dir" $ports && break
    [ -n "$given" ] || [ $attempt = 3 ] && fail "a server did not start"
    stop_all "$dir"
  done
  addrs=""
  for p in $ports; do addrs="$addrs 127.0.0.1:$p"; done
  # shellcheck disable=SC2086
  redis-cli --cluster create $addrs --cluster-replicas 1 --cluster-yes \
    > "$dir/create.log" 2>&1 || fail "cluster create failed (see $dir/create.log)"
  # shellcheck disable=SC2086
  wait_ready $ports ||
    { describe "$dir"; fail "the cluster did not become ready in ${WAIT_SECONDS}s"; }
  if [ -n "${RG_CLUSTER_OWNER:-}" ]; then
    owner=$RG_CLUSTER_OWNER
    (
      while kill -0 "$owner" 2>/dev/null; do sleep 1; done
      [ -f "$dir/base_port" ] && "$0" stop "$dir"
    ) </dev/null >/dev/null 2>&1 &
  fi
  echo "$base"
  ;;
stop)
  dir=$(abs_dir "$dir") || exit 1
  stop_all "$dir"
  ;;
restart)
  dir=$(abs_dir "$dir") || exit 1
  ports=${3:-$(ports_of "$dir")}
  for p in $ports; do
    pid=$(live_pid "$dir" "$p") && stop_pids "$pid"
    start_node "$dir" "$p"
  done
  # shellcheck disable=SC2086
  wait_ping "$dir" $ports || die "a server did not start again"
  # shellcheck disable=SC2086
  wait_ready $(ports_of "$dir") ||
    { describe "$dir"; die "the cluster did not become ready again in ${WAIT_SECONDS}s"; }
  ;;
wait)
  dir=$(abs_dir "$dir") || exit 1
  WAIT_SECONDS=${3:-$WAIT_SECONDS}
  # shellcheck disable=SC2046
  wait_ready $(ports_of "$dir") ||
    { describe "$dir"; die "the cluster is not whole after ${WAIT_SECONDS}s"; }
  ;;
status)
  dir=$(abs_dir "$dir") || exit 1
  describe "$dir" 2>&1
  ;;
ports)
  ports_of "$dir"
  ;;
add)
  dir=$(abs_dir "$dir") || exit 1
  base=$(cat "$dir/base_port") || die "no cluster in $dir"
  port=$((base + NODES))
  # a port can be taken between the check and the bind (an outgoing
  # connection's): then the next one is tried
  for attempt in 1 2 3 4 5; do
    while [ -d "$dir/$port" ] || port_busy "$port" || port_busy $((port + 10000)); do
      port=$((port + 1))
    done
    start_node "$dir" "$port"
    wait_ping "$dir" "$port" && break
    [ $attempt = 5 ] && die "the new server did not start (see $dir/$port/redis.log)"
  done
  echo "$port" >> "$dir/extra_ports"
  redis-cli --cluster add-node "127.0.0.1:$port" "127.0.0.1:$base" \
    > "$dir/$port/add.log" 2>&1 || die "add-node failed (see $dir/$port/add.log)"
  # it is added once every node knows it, and it every node, as reachable
  # shellcheck disable=SC2046
  wait_settled $(ports_of "$dir") $(extra_ports "$dir") ||
    die "the nodes did not all come to know $port"
  echo "$port"
  ;;
remove)
  dir=$(abs_dir "$dir") || exit 1
  port=${3:-}
  # shellcheck disable=SC2015
  [ -n "$port" ] && grep -qx "$port" "$dir/extra_ports" 2>/dev/null ||
    die "$port is not a primary added to the cluster in $dir"
  base=$(cat "$dir/base_port")
  deadline=$((SECONDS + WAIT_SECONDS))
  # a primary emptied by a rebalance turns replica and loads its new
  # primary's data: until then it answers LOADING, not its id
  until id=$(redis-cli -p "$port" cluster myid 2>&1) &&
        echo "$id" | grep -qx '[0-9a-f]\{40\}'; do
    [ $SECONDS -ge $deadline ] && die "no node id from $port: $id"
    sleep 0.1
  done
  others=$( (ports_of "$dir"; extra_ports "$dir") | grep -vx "$port")
  # it must hold no slot in any node's view (views settle by gossip)
  for p in $others; do
    until [ -z "$(redis-cli -p "$p" cluster nodes 2>/dev/null |
                  awk -v id="$id" '$1 == id && $9 != ""')" ]; do
      [ $SECONDS -ge $deadline ] && die "node $p still gives slots to $port"
      sleep 0.1
    done
  done
  if ! redis-cli --cluster del-node "127.0.0.1:$base" "$id" \
         > "$dir/$port/del.log" 2>&1; then
    # del-node stops at the first node that answers an error: then each
    # other node is told to forget it until it says so (or knows it no
    # more), within WAIT_SECONDS
    echo "redis-cluster: del-node failed ($(tail -n 1 "$dir/$port/del.log")):" \
      "the nodes are told one by one" >&2
    for p in $others; do
      until out=$(redis-cli -p "$p" cluster forget "$id" 2>&1) &&
            echo "$out" | grep -q -E '^OK|Unknown node'; do
        [ $SECONDS -ge $deadline ] &&
          die "node $p does not forget $port: $out (see $dir/$port/del.log)"
        sleep 0.2
      done
    done
  fi
  # del-node does not always stop the server: it is stopped by its pid
  pid=$(live_pid "$dir" "$port") && stop_pids "$pid"
  rm -f "$dir/$port/pid"
  grep -vx "$port" "$dir/extra_ports" > "$dir/extra_ports.new"
  mv "$dir/extra_ports.new" "$dir/extra_ports"
  ;;
settle)
  dir=$(abs_dir "$dir") || exit 1
  WAIT_SECONDS=${3:-$WAIT_SECONDS}
  # shellcheck disable=SC2046
  wait_settled $(ports_of "$dir") $(extra_ports "$dir") ||
    { describe "$dir"; die "the nodes did not settle in ${WAIT_SECONDS}s"; }
  ;;
*)
  die "unknown command '$cmd' (start, stop, restart, wait, status, ports, add, remove, settle)"
  ;;
esac
