#!/bin/sh
# Installs the Debian packages the build needs, when they are missing.
# As root it uses apt-get (sudo when available); otherwise it prints the
# exact package list and stops.  Usage: tools/deps.sh package...
set -e
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  run=""
elif command -v sudo >/dev/null 2>&1; then
  run="sudo"
else
  echo "regolith needs these Debian packages:$missing" >&2
  echo "install them as root:  apt-get install$missing" >&2
  exit 1
fi
echo "installing:$missing"
$run apt-get update -qq
DEBIAN_FRONTEND=noninteractive $run apt-get install -y -qq $missing
