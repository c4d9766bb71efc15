#!/bin/sh
# check-reference.sh DOCDIR HEADER...: checks the API reference gtk-doc built in DOCDIR
# (build/docs/reference, target memres-doc) against the public headers HEADER..., as a TAP
# stream (Meson test `reference`, suite core):
#  - each header but memres.h (which only includes the others) has its page,
#    html/memres-NAME.html, linked from html/index.html;
#  - every function the header declares (export-decls.awk: what libmemres exports) has its entry
#    (its anchor) on that page, and so does every structure (`typedef struct _T T;`; an
#    unnamed `typedef struct` fails: gtk-doc's scanner cannot see it);
#  - no internal symbol: nothing named _memres_* on any page, and the sections (the pages
#    gtk-doc made) are only the public headers'.
#  - the annotations' glossary is there, linked from index.html.
#  - everything is documented: gtk-doc's memres-undocumented.txt lists no symbol (without a
#    description, or with a value, member or parameter undocumented) and no section part
#    (SECTION comment, short or long description), except the names of
#    tests/reference-undocumented.allow, which must all still be listed there (the list only
#    shrinks).
# DOCDIR "none": the reference is not built (no gtk-doc-tools, or -Ddocs=disabled): skipped.
set -u
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
docdir=$1
shift
if [ "$docdir" = none ]; then
  echo "1..0 # SKIP the API reference is not built (no gtk-doc-tools, or -Ddocs=disabled)"
  exit 0
fi
html=$docdir/html

# shellcheck source=tests/tap.sh
. "$here/tap.sh"

if [ ! -f "$html/index.html" ]; then
  not_ok "the reference is built" "no $html/index.html"
  echo "1..$n"
  exit 1
fi

pages=
for header in "$@"; do
  name=$(basename "$header" .h)
  [ "$name" = memres ] && continue
  pages="$pages $name"
  page=$html/memres-$name.html
  if [ ! -f "$page" ]; then
    not_ok "$name.h has its page" "no $page: add xml/$name.xml to docs/reference/memres-docs.xml"
    continue
  fi
  if grep -q "href=\"memres-$name.html\"" "$html/index.html"; then
    ok "$name.h has its page, linked from index.html"
  else
    not_ok "$name.h has its page, linked from index.html" \
      "index.html has no link to memres-$name.html: add it to docs/reference/memres-docs.xml"
  fi
  missing=
  count=0
  for fn in $(awk -f "$here/export-decls.awk" "$header"); do
    count=$((count + 1))
    anchor=$(echo "$fn" | tr _ -)
    grep -q "name=\"$anchor\"" "$page" || missing="$missing $fn"
  done
  if [ -z "$missing" ]; then
    ok "each of the $count functions $name.h declares has its entry"
  else
    # shellcheck disable=SC2086 # one diagnostic per function
    not_ok "each of the $count functions $name.h declares has its entry" "missing:" $missing
  fi
  # Structures: gtk-doc's scanner only sees `typedef struct _T T;` + `struct _T {...};` (it
  # skips `typedef struct` with the brace on the next line, as clang-format writes it).
  missing=
  count=0
  for type in $(sed -n 's/^typedef struct _[A-Za-z0-9_]* \(Memres[A-Za-z0-9_]*\);$/\1/p' "$header"); do
    count=$((count + 1))
    grep -q "name=\"$type\"\|id=\"$type\"" "$page" || missing="$missing $type"
  done
  unnamed=$(grep -c '^typedef struct$' "$header")
  if [ -z "$missing" ] && [ "$unnamed" -eq 0 ]; then
    ok "each of the $count structures $name.h declares has its entry"
  else
    # shellcheck disable=SC2086 # one diagnostic per structure
    not_ok "each of the $count structures $name.h declares has its entry" "missing:" $missing \
      "($unnamed unnamed 'typedef struct' the scanner cannot see)"
  fi
done

# the annotations ((nullable), (transfer full), ...) link to their glossary (without it, each
# use was a warning at every build: "For acronym (nullable) no value found!")
if [ -f "$html/annotation-glossary.html" ] && grep -q 'href="annotation-glossary.html' "$html/index.html"; then
  ok "the annotations have their glossary"
else
  not_ok "the annotations have their glossary" \
    "no annotation-glossary.html linked from index.html: include xml/annotation-glossary.xml in docs/reference/memres-docs.xml"
fi

bad=$(grep -l '_memres_' "$html"/*.html "$docdir/memres-sections.txt" 2>/dev/null)
if [ -z "$bad" ]; then
  ok "no _memres_ symbol in the reference"
else
  # shellcheck disable=SC2086 # one diagnostic per file
  not_ok "no _memres_ symbol in the reference" $bad
fi

extra=
for file in $(sed -n 's|^<FILE>\(.*\)</FILE>$|\1|p' "$docdir/memres-sections.txt"); do
  case " $pages " in
  *" $file "*) ;;
  *) extra="$extra $file" ;;
  esac
done
if [ -z "$extra" ]; then
  ok "every section of the reference is a public header's"
else
  # shellcheck disable=SC2086 # one diagnostic per section
  not_ok "every section of the reference is a public header's" "not public:" $extra
fi

# Undocumented: memres-undocumented.txt has a summary (coverage, counts), then one entry a line:
# a symbol (`NAME`, or `NAME (<items>)` / `NAME (<parameters>)` for one documented in part) or a
# section part (`memres-NAME:long_description`).
undoc=$docdir/memres-undocumented.txt
allow=$here/reference-undocumented.allow
if [ ! -f "$undoc" ]; then
  not_ok "every symbol and section is documented" "no $undoc"
else
  entries=$(sed -n -e '/^[0-9]*% symbol docs coverage\.$/d' -e '/^[0-9]* symbols\{0,1\} documented\.$/d' \
    -e '/^[0-9]* symbols\{0,1\} incomplete\.$/d' -e '/^[0-9]* not documented\.$/d' \
    -e 's/^\([^ ][^ ]*\).*/\1/p' "$undoc" | sort -u)
  allowed=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$allow" 2>/dev/null | sort -u)
  entries_words=" $(echo "$entries" | tr '\n' ' ') "
  allowed_words=" $(echo "$allowed" | tr '\n' ' ') "
  extra=
  for entry in $entries; do
    case "$allowed_words" in
    *" $entry "*) ;;
    *) extra="$extra $entry" ;;
    esac
  done
  stale=
  for entry in $allowed; do
    case "$entries_words" in
    *" $entry "*) ;;
    *) stale="$stale $entry" ;;
    esac
  done
  if [ -z "$extra" ]; then
    ok "every symbol and section is documented ($(echo "$allowed" | grep -c .) allowed in $(basename "$allow"))"
  else
    # shellcheck disable=SC2086 # one diagnostic per entry
    not_ok "every symbol and section is documented" \
      "gtk-doc lists as not documented or incomplete ($undoc):" $extra
  fi
  if [ -z "$stale" ]; then
    ok "every name of $(basename "$allow") is still undocumented"
  else
    # shellcheck disable=SC2086 # one diagnostic per entry
    not_ok "every name of $(basename "$allow") is still undocumented" \
      "documented now: remove from $allow:" $stale
  fi
fi

echo "1..$n"
[ "$failed" -eq 0 ]
