#!/bin/sh
# Checks the layering of the C core (csrc/README.md): every #include of a
# project header names its own folder or a folder below it, no folder below
# luax/ includes a Lua header, only script/ and host/ include lualib.h,
# only store/ calls LMDB, and private headers stay in their folder.
# Usage: tools/layers.sh [csrc]; exits 1 and names each violation.
set -u
root=${1:-csrc}
order="base sql store luax script host"
status=0

rank () {
  i=0
  for l in $order; do
    [ "$l" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo 99
}

fail () {
  echo "layers: $1" >&2
  status=1
}

for dir in "$root"/*/; do
  layer=$(basename "$dir")
  r=$(rank "$layer")
  [ "$r" = 99 ] && { fail "$root/$layer is not a layer (known: $order)"; continue; }
  for f in "$dir"*.c "$dir"*.h; do
    [ -e "$f" ] || continue
    grep -n '^[[:space:]]*#[[:space:]]*include' "$f" | while IFS= read -r line; do
      n=${line%%:*}
      inc=$(echo "$line" | sed -n 's/.*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p')
      case "$inc" in
        */*)
          to=${inc%%/*}
          tr=$(rank "$to")
          [ "$tr" = 99 ] && continue          # a system header (cjson/...)
          if [ "$tr" -gt "$r" ]; then
            echo "$f:$n: $layer/ includes $inc, a layer above it"
          fi
          case "$inc" in
            store/env_int.h|sql/sql_int.h|script/sandbox.h|script/runtime.h|script/js.h|script/jsconf.h|host/binding.h)
              [ "$to" != "$layer" ] &&
                echo "$f:$n: $inc is private to $to/"
              ;;
          esac
          ;;
        lua.h|lauxlib.h|luajit.h)
          [ "$r" -lt 3 ] && echo "$f:$n: $layer/ includes $inc (no Lua below luax/)"
          ;;
        lualib.h)
          [ "$r" -lt 4 ] && echo "$f:$n: $layer/ includes lualib.h (only script/ and host/ may)"
          ;;
        lmdb.h)
          [ "$r" -lt 2 ] && echo "$f:$n: $layer/ includes lmdb.h (base/ and sql/ may not)"
          ;;
      esac
    done
  done
done > build/layers.out 2>&1 || true
if [ -s build/layers.out ]; then
  cat build/layers.out >&2
  status=1
fi

# Only the store calls LMDB.
for f in "$root"/*/*.c; do
  case "$f" in "$root"/store/*) continue ;; esac
  if grep -n '\bmdb_[a-z_]*[[:space:]]*(' "$f" >/dev/null; then
    grep -n '\bmdb_[a-z_]*[[:space:]]*(' "$f" | sed "s|^|$f:|; s|\$| (only store/ calls LMDB)|" >&2
    status=1
  fi
done

[ $status = 0 ] && echo "layers: $order: every include points down"
exit $status
