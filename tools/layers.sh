#!/bin/sh
# Checks the layering of the C core (csrc/README.md): every #include of a
# project header names its own folder or a folder below it, no folder below
# luax/ includes a Lua header, only script/ and host/ include lualib.h,
# only the files behind the store's seam (store/kv.h: store/local.c,
# store/wal.c and the guarded calls of store/guarded.h) include lmdb.h or
# call LMDB, private headers stay in their
# folder, and, given the folder of the built objects, no two files of a
# folder call each other, directly or through others (a call cycle).
# Usage: tools/layers.sh [csrc [OBJDIR]]; exits 1 and names each violation.
set -u

# --self-test: a made-up tree with a cycle and an LMDB call out of place
# must be refused (a check that cannot fail checks nothing).
if [ "${1:-}" = "--self-test" ]; then
  t=$(mktemp -d)
  mkdir -p "$t/src/base" "$t/src/store" "$t/obj/store"
  printf 'int b (int);\nint a (int x) { return x ? b(x - 1) : 0; }\n' > "$t/src/store/a.c"
  printf 'int a (int);\nint b (int x) { return x ? a(x - 1) : 1; }\n' > "$t/src/store/b.c"
  printf 'int mdb_get (void);\nint c (void) { return mdb_get(); }\n' > "$t/src/store/c.c"
  for f in a b c; do
    ${CC:-cc} -c -o "$t/obj/store/$f.o" "$t/src/store/$f.c" || { rm -rf "$t"; exit 1; }
  done
  mkdir -p build
  sh "$0" "$t/src" "$t/obj" > "$t/out" 2>&1 && { echo "layers: the self-test passed a bad tree" >&2; rm -rf "$t"; exit 1; }
  ok=1
  grep -q 'call cycle among the files of store/' "$t/out" || ok=0
  grep -q 'c.c:2:.*only .* call LMDB' "$t/out" || ok=0
  rm -rf "$t"
  [ $ok = 1 ] || { echo "layers: the self-test did not find what it planted" >&2; exit 1; }
  echo "layers: the self-test finds a planted cycle and an LMDB call"
  exit 0
fi

root=${1:-csrc}
objs=${2:-}
seam="store/local.c store/wal.c store/wal.h store/guarded.h"

behind_seam () {
  for s in $seam; do [ "$1" = "$root/$s" ] && return 0; done
  return 1
}
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
            store/env_int.h|sql/sql_int.h|script/sandbox.h|script/runtime.h|script/js.h|script/jsint.h|script/jsconf.h|host/binding.h)
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
          behind_seam "$f" ||
            echo "$f:$n: includes lmdb.h (only $seam may: the rest of the store reaches storage through store/kv.h)"
          ;;
      esac
    done
  done
done > build/layers.out 2>&1 || true
if [ -s build/layers.out ]; then
  cat build/layers.out >&2
  status=1
fi

# Only the files behind the seam call LMDB.
for f in "$root"/*/*.c "$root"/*/*.h; do
  behind_seam "$f" && continue
  if grep -n '\bmdb_[a-z_]*[[:space:]]*(' "$f" >/dev/null; then
    grep -n '\bmdb_[a-z_]*[[:space:]]*(' "$f" | sed "s|^|$f:|; s|\$| (only $seam call LMDB)|" >&2
    status=1
  fi
done

# No call cycle among the files of a folder: an edge a -> b when a.o uses
# a symbol b.o defines; tsort finds a loop.
if [ -n "$objs" ]; then
  tmp=$(mktemp -d)
  for dir in "$objs"/*/; do
    layer=$(basename "$dir")
    ls "$dir"*.o >/dev/null 2>&1 || continue
    for o in "$dir"*.o; do
      nm --defined-only -g "$o" | awk -v f="$(basename "$o" .o)" \
        '$2 ~ /^[TDBRC]$/ { print $3, f }'
    done | sort > "$tmp/defs"
    for o in "$dir"*.o; do
      f=$(basename "$o" .o)
      nm -u "$o" | awk '{ print $2 }' | sort | join - "$tmp/defs" |
        awk -v f="$f" '$2 != f { print f, $2, $1 }'
    done | sort > "$tmp/calls"
    awk '{ print $1, $2 }' "$tmp/calls" | sort -u > "$tmp/edges"
    if ! tsort "$tmp/edges" > /dev/null 2> "$tmp/loop"; then
      echo "layers: a call cycle among the files of $layer/:" >&2
      sed -n 's/^tsort: \([^:]*\)$/\1/p' "$tmp/loop" | sort -u > "$tmp/members"
      # the calls between the files of the loop, with a function each
      awk 'NR == FNR { m[$1] = 1; next } ($1 in m) && ($2 in m) && !seen[$1 " " $2]++ {
             printf "  %s.c calls %s (%s.c)\n", $1, $3, $2 }' \
        "$tmp/members" "$tmp/calls" >&2
      status=1
    fi
  done
  rm -rf "$tmp"
fi
[ $status = 0 ] && echo "layers: $order: every include points down${objs:+, no folder has a call cycle}"
exit $status
