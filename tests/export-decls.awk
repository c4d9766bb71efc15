# export-decls.awk (for check-exports.sh, Meson test `exports`): prints the name of every
# function and variable that the C headers given as input declare at file scope, one a line:
# what a library implementing them must export. Left out: comments, preprocessor lines
# (macros), typedefs, static declarations and function definitions (static inline), whatever
# lies inside braces (struct and enum bodies); an extern "C" block counts as file scope.
# Conditionals are not evaluated: a declaration counts whatever #if it is under.
function flush(s, name, rest) {
  gsub(/[ \t]+/, " ", s)
  # macros used without a semicolon: G_BEGIN_DECLS, G_DEFINE_AUTOPTR_CLEANUP_FUNC (T, f), ...
  gsub(/(^|[^A-Za-z0-9_])[A-Z][A-Z0-9_]* ?\([^()]*\)/, " ", s)
  gsub(/(^|[^A-Za-z0-9_])[A-Z][A-Z0-9_]*[A-Z0-9]([^A-Za-z0-9_]|$)/, " ", s)
  if (s ~ /^ *$/ || s ~ /(^|[^A-Za-z0-9_])(typedef|static)([^A-Za-z0-9_]|$)/)
    return
  # a struct, union or enum defined on its own: struct _T { ... };
  if (s ~ /^ ?(struct|union|enum) [A-Za-z_][A-Za-z0-9_]* ?$/)
    return
  if (match(s, /\(/)) {
    rest = substr(s, RSTART + 1)
    s = substr(s, 1, RSTART - 1)
    # a pointer to a function: T (*name) (args)
    if (s ~ /[A-Za-z0-9_*] ?$/ && rest ~ /^ ?\* ?[A-Za-z_][A-Za-z0-9_]* ?\)/) {
      s = rest
      sub(/ ?\).*/, "", s)
    }
  } else {
    sub(/=.*/, "", s)
    gsub(/\[[^]]*\]/, "", s)
  }
  sub(/ +$/, "", s)
  if (match(s, /[A-Za-z_][A-Za-z0-9_]*$/))
    print substr(s, RSTART)
}

FNR == 1 { incomment = 0; cont = 0 }
{
  line = $0
  # a preprocessor line and its continuations
  if (cont || (!incomment && line ~ /^[ \t]*#/)) {
    cont = (line ~ /\\$/)
    next
  }
  out = ""
  while (line != "") {
    if (incomment) {
      if (match(line, /\*\//)) {
        line = substr(line, RSTART + 2)
        incomment = 0
      } else
        line = ""
    } else if (match(line, /\/\*|\/\/|"/)) {
      tok = substr(line, RSTART, RLENGTH)
      out = out substr(line, 1, RSTART - 1)
      line = substr(line, RSTART + RLENGTH)
      if (tok == "/*")
        incomment = 1
      else if (tok == "//")
        line = ""
      else {
        # a string literal: kept as "" (extern "C")
        out = out "\"\""
        sub(/^([^"\\]|\\.)*"/, "", line)
      }
    } else {
      out = out line
      line = ""
    }
  }
  n = length(out)
  for (i = 1; i <= n; i++) {
    c = substr(out, i, 1)
    if (c == "{") {
      if (depth == 0 && stmt ~ /extern ?"" *$/) {
        stack[++sp] = "extern"
        stmt = ""
        continue
      }
      if (depth == 0 && stmt ~ /\) *$/)
        definition = 1
      stack[++sp] = "brace"
      depth++
    } else if (c == "}") {
      if (sp > 0 && stack[sp--] == "extern")
        continue
      depth--
      if (depth == 0 && definition) {
        definition = 0
        stmt = ""
      }
    } else if (depth > 0)
      continue
    else if (c == ";") {
      flush(stmt)
      stmt = ""
    } else
      stmt = stmt c
  }
  stmt = stmt " "
}
