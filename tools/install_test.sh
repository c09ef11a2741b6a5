#!/bin/sh
# make install-test: what a Lua or OpenResty developer does in their first
# hour, offline, from this checkout (README.md, Install; docs/openresty.md):
#
# 1. make rock: the release tarball and the source rock;
# 2. the source rock built and installed by luarocks for Lua 5.4 and for
#    LuaJIT (rockspec/luarocks-luajit.lua), each packed into a binary rock
#    with `luarocks pack`, and the checkout left as it was;
# 3. the packed rocks installed into fresh trees, as on another machine:
#    both in one tree (LuaJIT's first, then 5.4's), and LuaJIT's alone;
#    from each, `regolith --help`, the README's synopsis (under Lua 5.4
#    and LuaJIT), and `regolith explore` answering, then stopped by a
#    signal with nothing left running;
# 4. the quick start of docs/openresty.md, its commands exactly as written,
#    as the user running this and, as root, as an ordinary user in a
#    checkout of their own.
#
# PORT_BASE (22400) chooses the explorer's ports; QUICKSTART_PORT replaces
# the quick start's port (8089) when that one is taken on a shared machine.
# Prints each step's time.  Needs luarocks, zip, nginx with the Lua module
# and curl, which it installs when missing (tools/deps.sh).
set -eu

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VERSION=$(sed -n 's/^VERSION *= *//p' Makefile)
PORT_BASE=${PORT_BASE:-22400}
W=$ROOT/build/install-test
T0=$(date +%s)

step() { echo "== $* ($(( $(date +%s) - T0 )) s)"; }
fail() { echo "install-test FAILED: $*" >&2; exit 1; }

sh tools/deps.sh luarocks zip unzip nginx libnginx-mod-http-lua lua-resty-core \
  curl lua-argparse luajit2 libluajit2-5.1-dev liblmdb-dev libcjson-dev libpcre2-dev

rm -rf "$W" && mkdir -p "$W"
# files that are not git's, ignored ones included, outside build/: a rock
# build must add none
leftovers() {
  git status --porcelain --ignored --untracked-files=all 2>/dev/null |
    grep -E '^(\?\?|!!) ' | grep -v -E '^.. (build|examples/openresty/(logs|tmp|data|conf/serve.conf))/?' || true
}
before=$(leftovers)

step "make rock"
make -s rock >/dev/null
SRC_ROCK=$ROOT/build/rock/regolith-$VERSION-1.src.rock
[ -f "$SRC_ROCK" ] || fail "no $SRC_ROCK"

# luarocks for Lua 5.4, and for LuaJIT (the interpreter and headers of
# Debian's luajit2, which LuaRocks takes for Lua 5.1)
lr54() { luarocks --lua-version=5.4 "$@"; }
lrjit() { LUAROCKS_CONFIG=$ROOT/rockspec/luarocks-luajit.lua luarocks --lua-version=5.1 "$@"; }

# argparse, the command's one dependency, is Debian's lua-argparse here
# (no rock server offline): --deps-mode=none
for v in 54 jit; do
  step "luarocks install the source rock ($v), then luarocks pack"
  tree=$W/build-$v
  lr=lr$v
  (cd "$W" && $lr --tree="$tree" install --deps-mode=none "$SRC_ROCK" >"$W/build-$v.log" 2>&1) ||
    { tail -n 30 "$W/build-$v.log"; fail "the source rock did not install ($v)"; }
  mkdir -p "$W/rocks-$v"
  (cd "$W/rocks-$v" && $lr --tree="$tree" pack regolith "$VERSION-1" >/dev/null) ||
    fail "luarocks pack ($v)"
done
ROCK54=$(ls "$W"/rocks-54/regolith-"$VERSION"-1.*.rock)
ROCKJIT=$(ls "$W"/rocks-jit/regolith-"$VERSION"-1.*.rock)
after=$(leftovers)
[ "$before" = "$after" ] || fail "the rock build left files in the checkout: $after"
[ ! -e "$ROOT/regolith/core.so" ] || fail "a rock build left regolith/core.so in the checkout"

# The synopsis, as README.md writes it
awk '/^```lua$/ { on = 1; next } /^```$/ { if (on) exit } on' README.md > "$W/hello.lua"
[ -s "$W/hello.lua" ] || fail "no synopsis in README.md"

# run_from TREE INTERPRETER-FLAG CMD...: a command with the tree's paths
# (luarocks path), from a directory outside the checkout
in_tree() {
  tree=$1; lr=$2; shift 2
  (cd "$W" && eval "$($lr --tree="$tree" path)" && PATH=$tree/bin:$PATH && "$@")
}

explore_check() {
  tree=$1; lr=$2; port=$3; sig=$4
  db=$W/db-$port
  rm -rf "$db"
  in_tree "$tree" "$lr" regolith create-container "$db" posts --spec '{"partition_key": "/id"}' 2>/dev/null
  (cd "$W" && eval "$($lr --tree="$tree" path)" &&
    exec "$tree/bin/regolith" explore "$db" --port "$port" >"$W/explore-$port.out" 2>&1) &
  pid=$!
  i=0
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do
    i=$((i + 1))
    [ $i -lt 150 ] || { cat "$W/explore-$port.out"; kill $pid; fail "explore did not answer on $port"; }
    sleep 0.1
  done
  page=$(curl -s "http://127.0.0.1:$port/")
  echo "$page" | grep -q "regolith Data Explorer" || fail "explore served no page"
  api=$(curl -s -H 'X-Regolith-Explorer: 1' "http://127.0.0.1:$port/api/containers")
  echo "$api" | grep -q '"name":"posts"' || fail "explore's API: $api"
  kill "-$sig" $pid
  wait $pid || fail "explore exited with $? on SIG$sig"
  ! curl -s -o /dev/null "http://127.0.0.1:$port/" || fail "nginx still answers after SIG$sig"
  grep -q "stopped (SIG$sig)" "$W/explore-$port.out" || fail "explore did not say it stopped"
}

step "the packed rocks in a fresh tree: LuaJIT's, then Lua 5.4's"
both=$W/both
lrjit --tree="$both" install --deps-mode=none "$ROCKJIT" >/dev/null
lr54 --tree="$both" install --deps-mode=none "$ROCK54" >/dev/null
in_tree "$both" lr54 regolith --help | grep -q "^Usage: regolith" || fail "regolith --help"
grep -q "lua5.4" "$both/bin/regolith" || fail "the command does not run under Lua 5.4"
out=$(in_tree "$both" lr54 lua5.4 hello.lua) || fail "the synopsis under Lua 5.4"
echo "$out" | grep -q "^201" || fail "the synopsis printed: $out"
out=$(in_tree "$both" lrjit luajit hello.lua) || fail "the synopsis under LuaJIT"
echo "$out" | grep -q "^201" || fail "the synopsis under LuaJIT printed: $out"
explore_check "$both" lr54 $((PORT_BASE + 1)) TERM

step "the packed LuaJIT rock alone (an OpenResty machine)"
jit=$W/jit
lrjit --tree="$jit" install --deps-mode=none "$ROCKJIT" >/dev/null
grep -q "luajit" "$jit/bin/regolith" || fail "the LuaJIT rock's command does not run under LuaJIT"
in_tree "$jit" lrjit regolith --help | grep -q "^Usage: regolith" || fail "regolith --help (LuaJIT)"
explore_check "$jit" lrjit $((PORT_BASE + 2)) INT

# The quick start of docs/openresty.md: the indented lines of its first
# code block, run by sh -e in the checkout's root.
awk '/^## Quick start/ { on = 1; next } on && /^## / { exit }
     on && /^    / { sub(/^    /, ""); print; n++ }
     on && n && /^$/ { exit }' docs/openresty.md > "$W/quickstart.sh"
[ -s "$W/quickstart.sh" ] || fail "no quick start in docs/openresty.md"
if [ -n "${QUICKSTART_PORT:-}" ]; then
  sed -i "s/8089/$QUICKSTART_PORT/g" "$W/quickstart.sh"
fi

quickstart() {   # DIR: runs the quick start there; checks its answers
  (cd "$1" && sh -e "$W/quickstart.sh") >"$W/quickstart-$(id -un).out" 2>&1 ||
    { cat "$W/quickstart-$(id -un).out"; return 1; }
}

step "the OpenResty quick start as $(id -un)"
rm -rf "$HOME/blog" examples/openresty/logs/error.log
quickstart "$ROOT" || fail "the quick start as $(id -un)"
grep -q '"username":"ada"' "$W/quickstart-$(id -un).out" || fail "the quick start's answers"
! grep -q 'ngx.sleep(0)' examples/openresty/logs/error.log || fail "ngx.sleep(0) warnings"

if [ "$(id -u)" = 0 ]; then
  step "the OpenResty quick start as an ordinary user, in a checkout of their own"
  user=regolith-qs
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
  home=$(getent passwd "$user" | cut -d: -f6)
  rm -rf "$home/regolith" "$home/blog" && mkdir -p "$home/regolith"
  git ls-files -z | tar --null -T - -cf - build/luajit/regolith/core.so build/luajit/obj |
    tar -xf - -C "$home/regolith"
  cp "$W/quickstart.sh" "$home/quickstart.sh"
  chown -R "$user:" "$home/regolith" "$home/quickstart.sh"
  su "$user" -c "cd ~/regolith && sh -e ~/quickstart.sh" >"$W/quickstart-user.out" 2>&1 ||
    { cat "$W/quickstart-user.out"; fail "the quick start as $user"; }
  grep -q '"username":"ada"' "$W/quickstart-user.out" || fail "the quick start's answers as $user"
  ! grep -q 'ngx.sleep(0)' "$home/regolith/examples/openresty/logs/error.log" ||
    fail "ngx.sleep(0) warnings ($user)"
fi

step "install-test passed"
