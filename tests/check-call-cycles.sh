#!/bin/sh
# check-call-cycles.sh NM ARCHIVE SOURCE...: checks that no circle of calls runs among the core's
# files, as a TAP stream (Meson test `call-cycles`, suite core). ARCHIVE is the core's static
# archive (libmemres-internal.a), SOURCE the library's source files in it (core/meson.build's
# core_sources, core/ipc/ included, and the top-level meson.build's public_api_sources, which live
# beside what they serve): the member of ARCHIVE that Meson names after SOURCE's path (relative
# to core/, each `/` a `_`: ipc_ipc-ops.c.o, .._interop_dlpack.c.o) is that file, named by that
# path in the report (ipc/ipc-ops.c, interop/dlpack.c). File A depends on file B when A
# uses a global symbol (a function or a variable) that B defines; the dependencies must form no
# circle, so that each file can be read, tested and changed on top of the files it uses alone.
# A circle fails the test, named file by file with the symbols of each step.
set -u

# Calls left out of the check, "FROM.c>TO.c" each, one a line: none. The renovation removed
# the circles it listed (the core's calls into the IPC layer, now hooks; the stream context,
# now in core/cuda-helpers.c). An entry that names no call any more fails the test.
ignored_calls='
'

if [ $# -lt 3 ]; then
  echo "usage: $0 NM ARCHIVE SOURCE..." >&2
  exit 99
fi
nm_prog=$1
archive=$2
shift 2

echo "1..2"
if [ ! -f "$archive" ]; then
  echo "not ok 1 no circle of calls among the core's files"
  echo "# $archive does not exist"
  echo "not ok 2 every ignored call is still made"
  exit 1
fi

ignored_calls=$(echo $ignored_calls)
files=
for source in "$@"; do
  files="$files $source"
done

# One line per global symbol: ARCHIVE[MEMBER]: NAME TYPE [VALUE SIZE]
"$nm_prog" -A -g --format=posix "$archive" | awk -v files="$files" -v ignored="$ignored_calls" '
function fail_report(cycle) {
  failures = failures "# circle: " cycle "\n"
}

# Tarjan: the strongly connected components of the file graph.
function connect(v,    list, n, i, w, members, count) {
  index_of[v] = next_index
  low[v] = next_index
  next_index++
  stack[++depth] = v
  on_stack[v] = 1
  n = split(adj[v], list, " ")
  for (i = 1; i <= n; i++) {
    w = list[i]
    if (!(w in index_of)) {
      connect(w)
      if (low[w] < low[v])
        low[v] = low[w]
    } else if (on_stack[w] && index_of[w] < low[v])
      low[v] = index_of[w]
  }
  if (low[v] != index_of[v])
    return
  count = 0
  members = ""
  do {
    w = stack[depth--]
    on_stack[w] = 0
    component[w] = v
    members = members " " w
    count++
  } while (w != v)
  if (count > 1)
    report(v, members)
}

# One circle through the component of @root: the shortest path from @root back to it.
function report(root, members,    queue, head, tail, seen, parent, u, list, n, i, w, path, at) {
  split("", seen)
  split("", parent)
  head = 1
  tail = 0
  queue[++tail] = root
  while (head <= tail) {
    u = queue[head++]
    n = split(adj[u], list, " ")
    for (i = 1; i <= n; i++) {
      w = list[i]
      if (!((w in component) && component[w] == root))
        continue
      if (w == root) {
        path = root
        at = u
        while (at != root) {
          path = at " -> " path
          at = parent[at]
        }
        path = root " -> " path
        describe(path, members)
        return
      }
      if (!(w in seen)) {
        seen[w] = 1
        parent[w] = u
        queue[++tail] = w
      }
    }
  }
}

function describe(path, members,    steps, n, i, text) {
  n = split(path, steps, " -> ")
  text = steps[1]
  for (i = 2; i <= n; i++)
    text = text " -> " steps[i] " (" symbols[steps[i - 1] SUBSEP steps[i]] ")"
  fail_report(text)
  failures = failures "#   the files of that circle:" members "\n"
}

# The source a member object is of (its path from the source directory of the archive, as Meson
# names objects: ipc/ipc-ops.c for ipc_ipc-ops.c, interop/dlpack.c for .._interop_dlpack.c), or
# "" for an object of no SOURCE; a member two sources could be is reported and fails the test.
function source_of(member,    i, found, flat) {
  if (member in source_memo)
    return source_memo[member]
  while (sub(/^\.\._/, "", member))
    ;
  found = ""
  for (i = 1; i <= n_sources; i++) {
    flat = "_" flat_source[i]
    if (length(flat) > length(member) && substr(flat, length(flat) - length(member)) == "_" member) {
      if (found != "")
        ambiguous = ambiguous " " member
      found = substr(source_path[i], length(source_path[i]) - length(member) + 1)
    }
  }
  return source_memo[member] = found
}

BEGIN {
  n_sources = split(files, source_path, " ")
  for (i = 1; i <= n_sources; i++) {
    flat_source[i] = source_path[i]
    gsub(/\//, "_", flat_source[i])
  }
  n = split(ignored, list, " ")
  for (i = 1; i <= n; i++)
    if (list[i] != "")
      ignore[list[i]] = 0
}

{
  if (!match($0, /\[[^]]*\]: /))
    next
  member = substr($0, RSTART + 1, RLENGTH - 4)
  sub(/.*\//, "", member)
  sub(/\.o(bj)?$/, "", member)
  member = source_of(member)
  if (member == "")
    next
  rest = substr($0, RSTART + RLENGTH)
  split(rest, field, " ")
  name = field[1]
  type = field[2]
  seen_member[member] = 1
  if (type == "U" || type == "w" || type == "v")
    uses[member SUBSEP name] = 1
  else
    defined_in[name] = member
}

END {
  n_files = 0
  for (m in seen_member)
    n_files++
  for (key in uses) {
    split(key, pair, SUBSEP)
    from = pair[1]
    if (!(pair[2] in defined_in))
      continue
    to = defined_in[pair[2]]
    if (to == from)
      continue
    edge = from ">" to
    if (edge in ignore) {
      ignore[edge] = 1
      continue
    }
    if (!((from SUBSEP to) in symbols)) {
      adj[from] = adj[from] " " to
      n_calls++
      symbols[from SUBSEP to] = pair[2]
    } else if (length(symbols[from SUBSEP to]) < 60)
      symbols[from SUBSEP to] = symbols[from SUBSEP to] ", " pair[2]
  }

  next_index = 0
  depth = 0
  failures = ""
  for (m in seen_member)
    if (!(m in index_of))
      connect(m)

  if (n_files == 0) {
    print "not ok 1 no circle of calls among the core'"'"'s files"
    print "# no object of a core source file in the archive (an LTO build has none to read)"
  } else if (failures != "" || ambiguous != "") {
    print "not ok 1 no circle of calls among the core'"'"'s " n_files " files"
    printf "%s", failures
    if (ambiguous != "")
      print "# objects more than one SOURCE could be (rename one):" ambiguous
  } else
    print "ok 1 no circle of calls among the core'"'"'s " n_files " files (" n_calls " dependencies)"

  gone = ""
  for (edge in ignore)
    if (!ignore[edge])
      gone = gone " " edge
  if (gone != "") {
    print "not ok 2 every ignored call is still made"
    print "# no such call any more: drop from ignored_calls in tests/check-call-cycles.sh:" gone
  } else
    print "ok 2 every ignored call is still made"
  exit (n_files == 0 || failures != "" || ambiguous != "" || gone != "")
}
'
