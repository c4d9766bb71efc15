#!/bin/sh
# check-allocator-exports.sh NM LIBRARY MAP HEADER: libmemres-allocator's exports as a TAP
# stream (Meson test `allocator-exports`, suite core): the library exports exactly what its
# version script MAP names (no wildcard under global:), each in the script's one node, and
# exactly the functions HEADER (interop/memres-allocator.h) declares.
set -u
LC_ALL=C
export LC_ALL
nm_prog=$1 lib=$2 map=$3 header=$4
tmp=$(mktemp -d) || exit 1
n=0 failed=0

# check DESCRIPTION FILE: ok when FILE is empty, else not ok with its lines as diagnostics.
check() {
  n=$((n + 1))
  if [ -s "$2" ]; then
    failed=$((failed + 1))
    echo "not ok $n $1"
    sed 's/^/# /' "$2"
  else
    echo "ok $n $1"
  fi
}

"$nm_prog" -D --defined-only --format=posix "$lib" \
  | awk '$2 != "A" { print $1 }' | sort -u > "$tmp/exports"
sed 's/@.*//' "$tmp/exports" | sort -u > "$tmp/exported"
node=$(sed -n 's/^\([A-Z][A-Z0-9_.]*\) *{.*/\1/p' "$map")
sed -e '/^\/\*/,/\*\//d' "$map" | awk '/global:/ { g = 1; next } /local:/ { g = 0 }
  g && /;/ { gsub(/[ \t;]/, ""); print }' | sort -u > "$tmp/listed"
sed -n 's/^[A-Za-z][A-Za-z0-9_ *]* \**\(memres_[a-z0-9_]*\) (.*/\1/p' "$header" | sort -u > "$tmp/declared"

grep '[*?[]' "$tmp/listed" > "$tmp/bad"
check "$(basename "$map") names every symbol (no wildcard)" "$tmp/bad"
[ -s "$tmp/listed" ] || echo "the map lists nothing" > "$tmp/bad"
comm -3 "$tmp/exported" "$tmp/listed" > "$tmp/bad"
check "$(basename "$lib") exports exactly what $(basename "$map") lists" "$tmp/bad"
grep -v "@@\?$node\$" "$tmp/exports" > "$tmp/bad"
check "every export is in node $node" "$tmp/bad"
comm -3 "$tmp/exported" "$tmp/declared" > "$tmp/bad"
check "$(basename "$lib") exports exactly what $(basename "$header") declares" "$tmp/bad"
rm -rf "$tmp"
echo "1..$n"
[ "$failed" -eq 0 ]
