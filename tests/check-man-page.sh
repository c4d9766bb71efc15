#!/bin/sh
# check-man-page.sh MEMRES MANPAGE: checks docs/memres.1 against the command, as a TAP stream
# (Meson test `man-page`, suite core):
#  - groff (or man -l) renders it with every warning on (-ww) and prints no warning;
#  - every command `MEMRES --help` lists has its entry, and every long option each command's
#    --help lists is in the page.
# Skipped where neither groff nor man is installed.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
tool=$1
page=$2

# shellcheck source=tests/tap.sh
. "$here/tap.sh"

if command -v groff >/dev/null 2>&1; then
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
elif command -v man >/dev/null 2>&1; then
  warnings=$(MANWIDTH=80 man --warnings=w -l "$page" 2>&1 >/dev/null)
else
  echo "1..0 # SKIP neither groff nor man is installed"
  exit 0
fi
if [ -z "$warnings" ]; then
  ok "$(basename "$page") renders without warnings"
else
  not_ok "$(basename "$page") renders without warnings" "$warnings"
fi

# The page's text with its escapes of '-' undone: what the checks below look for.
text=$(sed 's/\\-/-/g' "$page")
commands=$(MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$tool" --help \
  | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
if [ -z "$commands" ]; then
  not_ok "memres --help lists commands" "none found in: $tool --help"
fi
for cmd in $commands; do
  # its entry under COMMANDS: a .TP paragraph whose tag starts with the command
  if printf '%s\n' "$text" | awk -v c="$cmd" 'tp && $0 ~ ("^\\.B[IR]? " c "( |$)") { f = 1 }
      { tp = ($0 == ".TP") } END { exit !f }'; then
    ok "memres $cmd has its entry"
  else
    not_ok "memres $cmd has its entry" "no .TP entry for $cmd in $page"
  fi
  missing=
  for opt in $(MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$tool" "$cmd" --help \
    | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    [ "$opt" = --help ] && continue
    printf '%s\n' "$text" | grep -q -- "$opt" || missing="$missing $opt"
  done
  if [ -z "$missing" ]; then
    ok "every option of memres $cmd --help is in the page"
  else
    not_ok "every option of memres $cmd --help is in the page" "missing:$missing"
  fi
done

echo "1..$n"
[ "$failed" -eq 0 ]
