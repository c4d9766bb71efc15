#!/bin/sh
# check-exports.sh NM LIBMEMRES MAP --headers HEADER... --sources SOURCE... [--plugins DIR...]:
# checks libmemres's public surface and the plugins' exports, as a TAP stream (Meson test
# `exports`, suite core).
#  - LIBMEMRES (libmemres.so) exports functions and data named memres_* and nothing else, each
#    in a MEMRES_X.Y version node;
#  - the version script MAP (core/libmemres.map) names every exported symbol, and each name it
#    lists is exported (no wildcard but `local: *;`);
#  - every exported symbol is declared in one of the installed headers HEADER..., and every
#    function or variable those headers declare is exported (see export-decls.awk for what
#    counts as a declaration: macros, static inline functions and typedefs do not);
#  - each exported symbol sits in the version node of the `Since: X.Y` of its gtk-doc comment,
#    looked up in the SOURCE files (the library's sources) and the headers;
#  - every libmemres-<name>.so in each plugin DIR exports exactly one symbol,
#    memres_plugin_<name>_get_desc (plugins are built with hidden visibility).
# A mismatch is `not ok`, naming the symbols. Fails when LIBMEMRES is missing or exports no
# memres_* symbol at all.
set -u
LC_ALL=C # one collation for sort and comm
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
nm_prog=$1
lib=$2
map=$3
shift 3

headers=
sources=
plugin_dirs=
list=
for arg in "$@"; do
  case $arg in
  --headers | --sources | --plugins) list=$arg ;;
  *)
    case $list in
    --headers) headers="$headers $arg" ;;
    --sources) sources="$sources $arg" ;;
    --plugins) plugin_dirs="$plugin_dirs $arg" ;;
    *)
      echo "check-exports.sh: $arg: not after --headers, --sources or --plugins" >&2
      exit 2
      ;;
    esac
    ;;
  esac
done

if [ -z "$headers" ] || [ -z "$sources" ]; then
  echo "check-exports.sh: no --headers or no --sources" >&2
  exit 2
fi

n=0
failed=0
# (no EXIT trap: under `meson test --setup valgrind` the shell is what memcheck checks, and
# dash's trap leaks a string)
tmp=$(mktemp -d) || exit 1

# finish: the plan line, the temporary directory removed, the status.
finish() {
  rm -rf "$tmp"
  echo "1..$n"
  [ "$failed" -eq 0 ]
  exit
}

# shellcheck source=tests/tap.sh
. "$here/tap.sh" # ok, not_ok

# check DESCRIPTION FILE: ok when FILE is empty, else not ok naming the first word of each of
# its lines (a symbol), with the whole lines as diagnostics.
check() {
  if [ -s "$2" ]; then
    n=$((n + 1))
    failed=$((failed + 1))
    echo "not ok $n $1: $(cut -d' ' -f1 "$2" | tr '\n' ' ' | sed 's/ $//')"
    sed 's/^/# /' "$2"
  else
    ok "$1"
  fi
}

# The defined dynamic symbols of $1 as "NAME NODE" lines (NODE "-" for an unversioned one),
# sorted; version definitions (absolute symbols named after their node) left out.
exports() {
  "$nm_prog" -D --defined-only --format=posix "$1" | awk '
    $2 == "A" && $1 ~ /^[A-Z][A-Z0-9_]*_[0-9.]+$/ { next }
    { name = $1; node = "-"
      if (split($1, part, "@") > 1) { name = part[1]; node = part[split($1, part, "@")] }
      print name, node }' | sort -u
}

if [ ! -f "$lib" ]; then
  not_ok "libmemres exports only memres_*" "$lib does not exist"
  finish
fi
libname=$(basename "$lib")
exports "$lib" > "$tmp/exports"
cut -d' ' -f1 "$tmp/exports" | sort -u > "$tmp/exported"

grep -v '^memres_' "$tmp/exported" > "$tmp/bad"
count=$(grep -c '^memres_' "$tmp/exported")
if [ -s "$tmp/bad" ]; then
  check "$libname exports only memres_*" "$tmp/bad"
elif [ "$count" -eq 0 ]; then
  not_ok "$libname exports only memres_*" "it exports no memres_ symbol at all"
else
  ok "$libname exports only memres_* ($count symbols)"
fi
awk '$2 !~ /^MEMRES_[0-9]+\.[0-9]+$/ { print $1 " (" $2 ")" }' "$tmp/exports" > "$tmp/bad"
check "every export of $libname is in a MEMRES_X.Y version node" "$tmp/bad"

# The version script: "NODE NAME" for each name listed under global:, "* PATTERN" for a
# wildcard there.
awk '
  { text = text " " $0 }
  END {
    gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", text)
    gsub(/[{};]/, " & ", text)
    n = split(text, tok, /[ \t]+/)
    node = ""; scope = ""
    for (i = 1; i <= n; i++) {
      t = tok[i]
      if (t == "") continue
      if (t == "{") { node = prev; scope = ""; continue }
      if (t == "}") { node = ""; continue }
      if (t == "global:" || t == "local:") { scope = t; continue }
      if (t != ";" && node != "" && scope == "global:")
        print (t ~ /[*?\[]/ ? "*" : node), t
      prev = t
    }
  }' "$map" > "$tmp/map"
awk '$1 == "*" { print $2 }' "$tmp/map" > "$tmp/bad"
check "$(basename "$map") names every symbol (no wildcard under global:)" "$tmp/bad"
awk '{ print $2 }' "$tmp/map" | sort | uniq -d > "$tmp/bad"
check "$(basename "$map") lists each symbol once" "$tmp/bad"
awk '$1 != "*" { print $2 }' "$tmp/map" | sort -u > "$tmp/listed"
comm -23 "$tmp/exported" "$tmp/listed" > "$tmp/bad"
check "every export of $libname is listed in $(basename "$map")" "$tmp/bad"
comm -13 "$tmp/exported" "$tmp/listed" > "$tmp/bad"
check "every symbol $(basename "$map") lists is exported" "$tmp/bad"

# The installed headers' declarations.
# shellcheck disable=SC2086 # a list of files
if ! awk -f "$here/export-decls.awk" $headers > "$tmp/decls.all"; then
  not_ok "the installed headers can be read" $headers
  finish
fi
sort -u "$tmp/decls.all" > "$tmp/declared"
comm -23 "$tmp/exported" "$tmp/declared" > "$tmp/bad"
check "every export of $libname is declared in an installed header" "$tmp/bad"
comm -13 "$tmp/exported" "$tmp/declared" > "$tmp/bad"
check "every function and variable the installed headers declare is exported" "$tmp/bad"
for name in $(sort "$tmp/decls.all" | uniq -d); do
  echo "# note: $name is declared in more than one place"
done

# Since: of each symbol's gtk-doc comment ("NAME X.Y"), against its version node.
# shellcheck disable=SC2086 # lists of files
awk '
  /^\/\*\*/ { block = 1; name = ""; next }
  block && name == "" && /^ \* [A-Za-z_][A-Za-z0-9_]*:/ { name = $2; sub(/:.*/, "", name); next }
  block && name != "" && /^ \* Since: [0-9]+\.[0-9]+ *$/ { print name, $3 }
  /\*\// { block = 0 }' $sources $headers | sort -u > "$tmp/since"
awk 'NR == FNR { since[$1] = since[$1] " " $2; next }
  !($1 in since) { print $1 " (no Since: in its gtk-doc comment)"; next }
  since[$1] != " " substr($2, 8) { print $1 " (" $2 ", Since:" since[$1] ")" }' \
  "$tmp/since" "$tmp/exports" > "$tmp/bad"
check "every export of $libname is in the version node its gtk-doc Since names" "$tmp/bad"

for dir in $plugin_dirs; do
  for plugin in "$dir"/libmemres-*.so; do
    [ -f "$plugin" ] || continue
    file=$(basename "$plugin")
    name=${file#libmemres-}
    name=${name%.so}
    expected="memres_plugin_${name}_get_desc"
    got=$(exports "$plugin" | cut -d' ' -f1)
    if [ "$got" = "$expected" ]; then
      ok "$file exports only $expected"
    else
      # shellcheck disable=SC2086 # one word per symbol
      not_ok "$file exports only $expected" "it exports:" $got
    fi
  done
done

finish
