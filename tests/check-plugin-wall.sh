#!/bin/sh
# check-plugin-wall.sh SOURCE_ROOT: checks the wall between libmemres's core and plugins/, as a
# TAP stream (Meson test `plugin-wall`, suite core): no file under plugins/ (the plugins, the
# kinds embedded in libmemres and the code they share) includes a private header of the core,
# that is any header under core/ (memres-private.h and the headers it gathers: hot-path.h,
# counting.h, resources.h, buffers.h, fork.h, loader.h, spec.h, ipc/ipc.h; ipc/ipc-private.h) or
# any path through core/. They are written against the installed headers
# (<memres/memres-plugin.h>) and the SDK (sdk/) alone. The build enforces it too: memres-private.h
# and the core's headers behind it stop with #error unless MEMRES_CORE_COMPILATION is defined,
# which only the core's own objects get; this test names the file and line instead.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
root=$1

# shellcheck source=tests/tap.sh
. "$here/tap.sh"

if [ ! -d "$root/core" ] || [ ! -d "$root/plugins" ]; then
  not_ok "the source tree is there" "no core/ or plugins/ under $root"
  echo "1..$n"
  exit 1
fi

# the core's private headers, by file name
private=$(cd "$root/core" && find . -name '*.h' | sed 's|.*/||' | sort -u)
if [ -z "$private" ]; then
  not_ok "the core has private headers to look for" "no header under $root/core"
else
  ok "the core's private headers: $(echo $private)"
fi

files=$(cd "$root" && find plugins -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' \) | sort)
count=$(echo "$files" | grep -c .)
# FILE:LINE: TARGET for every #include of a path through core/, or of a file named as a private
# header of the core that is not beside the including file (a plugin's own header of that name)
# shellcheck disable=SC2086
bad=$(cd "$root" && grep -n -H '^[[:space:]]*#[[:space:]]*include' $files /dev/null | awk -v private="$(echo $private)" '
BEGIN {
  n = split(private, list, " ")
  for (i = 1; i <= n; i++)
    is_private[list[i]] = 1
}
{
  if (!match($0, /include[[:space:]]*[<"][^>"]*[>"]/))
    next
  target = substr($0, RSTART, RLENGTH)
  sub(/^include[[:space:]]*[<"]/, "", target)
  sub(/[>"]$/, "", target)
  split($0, where, ":")
  base = target
  sub(/.*\//, "", base)
  dir = where[1]
  sub(/\/[^\/]*$/, "", dir)
  if (("/" target) ~ /\/core\// || ((base in is_private) && system("test -f \"" dir "/" target "\"") != 0))
    print where[1] ":" where[2] ": " target
}')
if [ "$count" -eq 0 ]; then
  not_ok "the files under plugins/ include no private header of the core" "no file under plugins/"
elif [ -n "$bad" ]; then
  old_ifs=$IFS
  IFS='
'
  # shellcheck disable=SC2086
  set -- $(echo "$bad" | sed '/^$/d')
  IFS=$old_ifs
  not_ok "the $count files under plugins/ include no private header of the core" "$@"
else
  ok "the $count files under plugins/ include no private header of the core"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
