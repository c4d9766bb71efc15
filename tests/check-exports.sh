#!/bin/sh
# check-exports.sh NM LIBMEMRES [PLUGIN_DIR...]: checks the dynamic symbols that memres exports,
# as a TAP stream (Meson test `exports`, suite core).
#  - LIBMEMRES (libmemres.so) exports functions and data named memres_* and nothing else: the
#    version script core/libmemres.map keeps the _memres_* internals out.
#  - every libmemres-<name>.so in each PLUGIN_DIR exports exactly one symbol,
#    memres_plugin_<name>_get_desc (plugins are built with hidden visibility).
# Fails when LIBMEMRES is missing or exports no memres_* symbol at all.
set -u

nm_prog=$1
lib=$2
shift 2

n=0
failed=0

ok() {
  n=$((n + 1))
  echo "ok $n $1"
}

not_ok() {
  n=$((n + 1))
  failed=$((failed + 1))
  echo "not ok $n $1"
  shift
  for line in "$@"; do
    echo "# $line"
  done
}

# The names of the defined dynamic symbols of $1, one a line, sorted.
exports() {
  "$nm_prog" -D --defined-only --format=posix "$1" | awk '{ print $1 }' | sed 's/@.*//' | sort -u
}

if [ ! -f "$lib" ]; then
  not_ok "libmemres exports only memres_*" "$lib does not exist"
else
  all=$(exports "$lib")
  bad=$(printf '%s\n' "$all" | grep -v '^memres_' | grep -v '^$')
  count=$(printf '%s\n' "$all" | grep -c '^memres_')
  if [ -n "$bad" ]; then
    not_ok "$(basename "$lib") exports only memres_*" "unexpected exports:" $bad
  elif [ "$count" -eq 0 ]; then
    not_ok "$(basename "$lib") exports only memres_*" "it exports no memres_ symbol at all"
  else
    ok "$(basename "$lib") exports only memres_* ($count symbols)"
  fi
fi

for dir in "$@"; do
  for plugin in "$dir"/libmemres-*.so; do
    [ -f "$plugin" ] || continue
    file=$(basename "$plugin")
    name=${file#libmemres-}
    name=${name%.so}
    expected="memres_plugin_${name}_get_desc"
    got=$(exports "$plugin")
    if [ "$got" = "$expected" ]; then
      ok "$file exports only $expected"
    else
      not_ok "$file exports only $expected" "it exports:" $got
    fi
  done
done

echo "1..$n"
[ "$failed" -eq 0 ]
