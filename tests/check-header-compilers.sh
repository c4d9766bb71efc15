#!/bin/sh
# check-header-compilers.sh SRCROOT BUILDROOT: memres-lookup-inline.h, the installed header with
# code in it, compiled (-fsyntax-only, -Wall -Wextra -Werror) by each compiler found of gcc,
# g++, clang and clang++, as C and as C++, with a call of memres_lookup_inline(); a TAP stream
# (Meson test `header-compilers`, suite build). A compiler that is not installed is a skip; no
# pkg-config or GLib to compile against skips the whole test.
set -u
src=$1
build=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/tap.sh" # ok, not_ok

if ! glib=$(pkg-config --cflags glib-2.0 2>/dev/null); then
  echo "1..0 # SKIP no pkg-config glib-2.0"
  exit 0
fi
tmp=$(mktemp -d) || exit 1
cat > "$tmp/use.c" <<'CODE'
#include <memres/memres-lookup-inline.h>

gboolean lookup_use (gconstpointer ptr, guint64 *offset);

gboolean
lookup_use (gconstpointer ptr, guint64 *offset)
{
  MemresLookupInfo info;

  if (!memres_lookup_inline (ptr, &info))
    return FALSE;
  *offset = info.offset;
  return TRUE;
}
CODE
for compiler in gcc:c:c11 clang:c:c11 g++:c++:c++11 clang++:c++:c++17; do
  cc=${compiler%%:*}
  rest=${compiler#*:}
  lang=${rest%%:*}
  std=${rest#*:}
  if ! command -v "$cc" > /dev/null 2>&1; then
    ok "$cc -x $lang # SKIP $cc is not installed"
    continue
  fi
  # shellcheck disable=SC2086 # the flags of pkg-config
  if out=$("$cc" -x "$lang" -std="$std" -fsyntax-only -Wall -Wextra -Werror -I"$src/include" \
    -I"$build/include" $glib "$tmp/use.c" 2>&1); then
    ok "$cc -x $lang -std=$std compiles memres-lookup-inline.h"
  else
    not_ok "$cc -x $lang -std=$std compiles memres-lookup-inline.h"
    echo "$out" | sed 's/^/# /'
  fi
done
rm -rf "$tmp"
echo "1..$n"
[ "$failed" -eq 0 ]
