#!/usr/bin/env python3
"""check-doc-names.py SOURCE_ROOT MEMRES: what the guides name exists, as a TAP stream (Meson
test `doc-names`, suite core).

1. Every `memres_*()` function a guide (README.md, docs/*.md) names (with parentheses, or alone in
   backquotes: `memres_buffer_prefetch`) is declared by an installed header (include/memres/,
   interop/memres-allocator.h), or is a function of libmemres-allocator
   (interop/libmemres-allocator.map), or a plugin's entry point (memres_plugin_NAME_get_desc).
   Every `MEMRES_*` name (a macro, an enum value, an environment variable) is in a header, a
   source, a script or a test.
2. Every option of a spec a guide writes (`KIND:KEY=VALUE,...` for a kind `memres kinds` lists)
   is an option of that kind, and an enum's or a bool's value is one it takes.
3. Every default of an option table of a guide (a table whose header has `option` and
   `default`) is the kind's default (`memres kinds --json`), where the cell is a literal value
   and the kind has one (an option left unset takes what its other options say).
4. Every path of the tree a guide names (`tests/testutil-fake.c`, `core/`, ...) exists.

A failure names FILE:LINE and what is wrong."""

import glob
import json
import os
import re
import subprocess
import sys

root, memres = sys.argv[1], os.path.abspath(sys.argv[2])
os.chdir(root)
guides = ["README.md"] + sorted(glob.glob("docs/*.md"))
n = 0
failed = 0


def result(ok, what, problems=()):
    global n, failed
    n += 1
    if not ok:
        failed += 1
    print(("ok" if ok else "not ok") + " %d %s" % (n, what))
    for p in problems:
        print("# " + p)


def lines_of(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


# 1. functions
declared = set()
for path in glob.glob("include/memres/*.h") + glob.glob("include/memres/*.h.in") + [
    "interop/memres-allocator.h",
    "interop/libmemres-allocator.map",
]:
    declared.update(re.findall(r"\bmemres_[a-z0-9_]+", open(path, encoding="utf-8").read()))
# named in backquotes, not C: a Meson dependency, the first member of a snapshot document
NOT_C = {"memres_dep", "memres_internal_dep", "memres_snapshot", "memres_allocator_snapshot"}
bad = []
count = 0
for path in guides:
    for i, line in enumerate(lines_of(path), 1):
        names = re.findall(r"\b(memres_[a-z0-9_]*[a-z0-9])\s?\(", line)
        names += [n for n in re.findall(r"`(memres_[a-z0-9_]*[a-z0-9])`", line) if n not in NOT_C]
        for name in names:
            count += 1
            if name not in declared and not re.fullmatch(r"memres_plugin_[a-z0-9_]+_get_desc", name):
                bad.append("%s:%d: %s() is declared by no installed header" % (path, i, name))
result(not bad and count > 0, "every memres_* function the guides name is declared (%d named)"
       % count, bad)

# 1b. macros, enum values and environment variables: MEMRES_* in capitals, declared by a header
# or read by a source, a script or a test
known = set()
for top in ("core", "include", "interop", "python", "tools", "fuzz", "plugins", "sdk", "scripts",
            "tests", ".ci", "bench", "examples"):
    for base, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith((".md", ".png", ".json")):
                continue
            try:
                with open(os.path.join(base, f), encoding="utf-8") as fh:
                    known.update(re.findall(r"\bMEMRES_[A-Z0-9_]*[A-Z0-9]", fh.read()))
            except (UnicodeDecodeError, OSError):
                pass
bad = []
count = 0
for path in guides:
    for i, line in enumerate(lines_of(path), 1):
        for name in re.findall(r"\bMEMRES_[A-Z0-9_]*[A-Z0-9]\b", line):
            count += 1
            if name not in known and not re.fullmatch(r"MEMRES_ALLOCATOR_RESOURCE_\d+", name):
                bad.append("%s:%d: %s is in no header, source or script" % (path, i, name))
result(not bad and count > 0, "every MEMRES_* name the guides write exists (%d written)" % count,
       bad)

# 2. and 3. the kinds' options, from memres kinds --json
out = subprocess.run([memres, "kinds", "--json"], stdout=subprocess.PIPE, check=False).stdout
kinds = {k["name"]: {o["name"]: o for o in k["options"]} for k in json.loads(out)["kinds"]}
BOOLS = {"true", "false", "yes", "no", "on", "off", "1", "0"}
layer_re = re.compile(r"(?<![\w=;/.@-])(%s):((?:[a-z_]+=[^,>`\s'\")]*,?)+)"
                      % "|".join(sorted(kinds, key=len, reverse=True)))
bad = []
count = 0
for path in guides:
    for i, line in enumerate(lines_of(path), 1):
        for m in layer_re.finditer(line):
            kind = m.group(1)
            for pair in m.group(2).rstrip(",").split(","):
                if "=" not in pair:
                    continue
                key, value = pair.split("=", 1)
                count += 1
                opt = kinds[kind].get(key)
                if opt is None:
                    bad.append("%s:%d: %s has no option %s (%s)" % (path, i, kind, key, m.group(0)))
                elif value in ("", "...", "…") or re.search(r"[A-Z]{2}|\.\.\.|…", value):
                    continue  # a placeholder: N, SIZE, PATH, ...
                elif opt["type"] == "enum" and value not in opt["choices"]:
                    bad.append("%s:%d: %s:%s=%s is none of %s"
                               % (path, i, kind, key, value, "|".join(opt["choices"])))
                elif opt["type"] == "bool" and value not in BOOLS:
                    bad.append("%s:%d: %s:%s=%s is not a bool" % (path, i, kind, key, value))
result(not bad and count > 0, "every option of a spec the guides write exists (%d written)" % count,
       bad)

bad = []
count = 0
for path in guides:
    kind = os.path.basename(path)[:-3]
    if kind not in kinds:
        continue
    column = None
    for i, line in enumerate(lines_of(path), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            column = None
        elif "option" in cells and "default" in cells:
            column = cells.index("default")
        elif column is not None and re.fullmatch(r"`[a-z_]+`", cells[0]) and column < len(cells):
            name, said = cells[0].strip("`"), cells[column]
            opt = kinds[kind].get(name)
            if opt is None:
                bad.append("%s:%d: %s has no option %s" % (path, i, kind, name))
                continue
            literal = re.fullmatch(r"`?(-?[\w.]+)`?", said)
            if literal is None or opt["default"] is None:
                continue  # prose ("driver limit"), or a default that depends on other options
            count += 1
            if literal.group(1) != opt["default"]:
                bad.append("%s:%d: %s's default of %s is %s, not %s"
                           % (path, i, kind, name, opt["default"], said))
result(not bad and count > 0, "every default of an option table is the kind's (%d stated)" % count,
       bad)

# 4. paths of the tree
path_re = re.compile(r"(?<![\w/.$-])((?:core|tests|include/memres|plugins|sdk|tools|interop|python|"
                     r"bench|scripts|fuzz|examples|docs|\.ci)/[\w./-]*\w)")
bad = []
count = 0
for path in guides:
    for i, line in enumerate(lines_of(path), 1):
        for m in path_re.finditer(line):
            named = m.group(1)
            if re.search(r"/[A-Z]+(/|$)", named):
                continue  # a placeholder: fuzz/corpus/TARGET
            count += 1
            # a file or directory of the tree, one beside the guide, or a build target (fuzz/fuzz-spec)
            if not any(os.path.exists(p) for p in (named, os.path.join(os.path.dirname(path), named),
                                                   named + ".c")):
                bad.append("%s:%d: %s does not exist" % (path, i, named))
result(not bad and count > 0, "every path of the tree the guides name exists (%d named)" % count,
       bad)

print("1..%d" % n)
sys.exit(1 if failed else 0)
