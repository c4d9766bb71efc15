#!/bin/sh
# check-doc-links.sh SOURCE_ROOT: every file under docs/ that the sources, the tests and the guides
# name (a .md, .json, .png or .1 page) exists, as a TAP stream (Meson test `doc-links`, suite
# core): a comment or a guide that sends a reader to a page that is not there fails, naming
# FILE:LINE and the page.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
root=$1

# shellcheck source=tests/tap.sh
. "$here/tap.sh"

cd "$root" || exit 1
dirs=""
for d in core include plugins sdk tools interop python tests docs examples bench scripts fuzz \
  .ci README.md HACKING.md; do
  [ -e "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086 # one word per directory
named=$(grep -rnoE --exclude-dir=build --exclude-dir='build-*' --exclude-dir=__pycache__ \
  'docs/[A-Za-z0-9_.-]+[.](md|json|png|1)' $dirs)
count=0
bad=""
for hit in $named; do
  count=$((count + 1))
  page=${hit#*:*:}
  [ -e "$page" ] || bad="$bad $hit"
done
if [ "$count" -eq 0 ]; then
  not_ok "every docs/ page named exists" "no docs/ page named under $root"
elif [ -n "$bad" ]; then
  # shellcheck disable=SC2086 # one word per missing page
  not_ok "every docs/ page named exists ($count named)" $bad
else
  ok "every docs/ page named exists ($count named)"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
