#!/bin/bash
# .ci/plugin-template.sh: checks that an installed memres is enough to write a plugin.
#
#   bash .ci/plugin-template.sh [WORKDIR]
#
# 1. builds memres from this tree and `meson install`s it into WORKDIR/prefix (--prefix, not
#    DESTDIR: the library keeps the absolute plugin directory of its prefix);
# 2. checks the install: library, headers, memres-2.pc with its plugindir variable, the
#    plugins this tree builds, the `memres` command where the tree builds one, the guides
#    (share/doc/memres), the man page and the Python recipe (share/memres-2/python); then that
#    libmemres-allocator.so, each plugin and the command load by path with no LD_LIBRARY_PATH
#    (their $ORIGIN rpaths), from the prefix and from a copy of it moved elsewhere;
# 3. builds examples/plugin-template out of tree against that install, through pkg-config only
#    (PKG_CONFIG_PATH), and runs its test (the plugin loaded by name from its build directory);
#    (the template has two plugins: the `counting` kind and the `tally` adaptor)
# 4. compiles the template's test program once more with plain `cc $(pkg-config ...)`, copies
#    the plugin alone into a directory of its own and runs the program with MEMRES_PLUGIN_PATH
#    naming that directory: the `counting` kind is loaded by name, allocated from, and its
#    counts checked;
#    Where the tree builds the `memres` command, the installed one must list the kind
#    (`memres kinds`);
# 5. installs the template (into the plugindir of memres-2.pc) and runs the program again with
#    no MEMRES_PLUGIN_PATH: memres finds the plugin in its own plugin directory.
# Between 3 and 4, the template is also built as a project of its own with memres as a Meson
# subproject (subprojects/memres a link to this tree): dependency('memres-2') falls back to it,
# get_variable('plugindir') answers, and the template's test passes.
#
# WORKDIR defaults to a new temporary directory, removed at the end unless MEMRES_CI_KEEP=1.
# Needs meson, ninja, pkg-config, a C compiler, GLib and the CUDA headers, nothing else (no GPU,
# no driver). Exits non-zero on the first failure; the last line says how many steps passed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
template="$root/examples/plugin-template"
own_work=0
if [ $# -ge 1 ]; then
  work=$1
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/memres-plugin-template.XXXXXX")
  own_work=1
fi
work=$(cd "$work" && pwd)
prefix="$work/prefix"
jobs=2

passed=0
step() {
  echo
  echo "=== plugin-template: $*"
}
pass() {
  passed=$((passed + 1))
  echo "ok: $*"
}
fail() {
  echo "FAILED: $*" >&2
  echo "plugin-template: $passed passed, 1 failed"
  exit 1
}
cleanup() {
  if [ "$own_work" = 1 ] && [ "${MEMRES_CI_KEEP:-0}" != 1 ]; then
    rm -rf "$work"
  fi
}
trap cleanup EXIT

step "install memres into $prefix"
rm -rf "$work/memres-build" "$prefix"
meson setup "$work/memres-build" "$root" --prefix="$prefix" --libdir=lib -Dtests=false \
  >"$work/memres-setup.log" || { cat "$work/memres-setup.log"; fail "meson setup of memres"; }
meson compile -C "$work/memres-build" -j "$jobs" >"$work/memres-compile.log" \
  || { cat "$work/memres-compile.log"; fail "meson compile of memres"; }
meson install -C "$work/memres-build" >"$work/memres-install.log" \
  || { cat "$work/memres-install.log"; fail "meson install of memres"; }
pass "meson install"

step "check the install"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pkg-config --exists memres-2 || fail "pkg-config finds no memres-2 in $PKG_CONFIG_PATH"
# the installed memres-2.pc's paths are relative to it (${pcfiledir}/../..): resolved here
plugindir=$(realpath -m "$(pkg-config --variable=plugindir memres-2)")
[ "$plugindir" = "$(realpath -m "$prefix/lib/memres-2/plugins")" ] \
  || fail "plugindir is '$plugindir', expected $prefix/lib/memres-2/plugins"
[ -e "$prefix/lib/libmemres.so" ] || fail "no $prefix/lib/libmemres.so"
[ -e "$prefix/lib/libmemres.so.2" ] || fail "no $prefix/lib/libmemres.so.2 (the SONAME)"
for h in memres.h memres-plugin.h memres-plugin-ops.h memres-plugin-ipc.h memres-cuda.h memres-managed.h \
  memres-version.h; do
  [ -f "$prefix/include/memres-2/memres/$h" ] || fail "header $h not installed"
done
for p in dmr ipc vmm pinned graph managed limit log; do
  if [ -f "$root/plugins/$p/$p.c" ]; then
    [ -f "$plugindir/libmemres-$p.so" ] || fail "plugin $p is built but not installed"
  fi
done
if [ -f "$root/tools/memres.c" ]; then
  [ -x "$prefix/bin/memres" ] || fail "the memres command is built but not installed"
fi
for doc in "$root"/docs/*.md "$root"/README.md; do
  [ -f "$prefix/share/doc/memres/$(basename "$doc")" ] || fail "$(basename "$doc") not installed"
done
[ -f "$prefix/share/man/man1/memres.1" ] || fail "the man page memres.1 not installed"
[ -f "$prefix/share/memres-2/python/memres_interop.py" ] || fail "memres_interop.py not installed"
pass "library, headers, memres-2.pc (plugindir $plugindir), plugins, command, docs, man page, recipe"

step "installed binaries load by path without LD_LIBRARY_PATH, also from a moved prefix"
# $ORIGIN-relative rpaths: libmemres-allocator.so dlopen()ed by path as torch and CuPy do, each
# plugin alone, and the command, with no LD_LIBRARY_PATH; then the same from a copy of the
# prefix elsewhere (the original hidden), where only an $ORIGIN rpath can find libmemres.
load_all() { # PREFIX
  env -u LD_LIBRARY_PATH python3 - "$1" <<'PY' || return 1
import ctypes, glob, sys
prefix = sys.argv[1]
libs = [prefix + "/lib/libmemres-allocator.so"] + sorted(glob.glob(prefix + "/lib/memres-2/plugins/*.so"))
for lib in libs:
    ctypes.CDLL(lib)  # raises OSError naming what is missing
print("loaded %d libraries from %s" % (len(libs), prefix))
PY
  if [ -x "$1/bin/memres" ]; then
    env -u LD_LIBRARY_PATH MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$1/bin/memres" \
      --help >/dev/null || return 1
  fi
}
load_all "$prefix" || fail "loading the installed binaries by path from $prefix"
rm -rf "$work/moved"
cp -a "$prefix" "$work/moved"
mv "$prefix" "$prefix.hidden"
load_all "$work/moved" || { mv "$prefix.hidden" "$prefix"; fail "loading from a moved prefix"; }
mv "$prefix.hidden" "$prefix"
rm -rf "$work/moved"
pass "allocator, plugins and command load by path with no LD_LIBRARY_PATH, prefix moved or not"

step "build the template out of tree against the install"
rm -rf "$work/template-build"
# -Dwerror=true: a plugin written as the guide says builds at warning_level=2 without
# -Wno-unused-parameter or any other warning switched off.
meson setup "$work/template-build" "$template" --prefix="$prefix" -Dwerror=true \
  --wrap-mode=nofallback >"$work/template-setup.log" \
  || { cat "$work/template-setup.log"; fail "meson setup of the template"; }
meson compile -C "$work/template-build" -j "$jobs" >"$work/template-compile.log" \
  || { cat "$work/template-compile.log"; fail "meson compile of the template"; }
plugin="$work/template-build/libmemres-counting.so"
[ -f "$plugin" ] || fail "the template built no libmemres-counting.so"
exports=$(nm -D --defined-only --format=posix "$plugin" | awk '{ print $1 }')
[ "$exports" = "memres_plugin_counting_get_desc" ] \
  || fail "libmemres-counting.so exports: $exports"
tally="$work/template-build/libmemres-tally.so"
[ -f "$tally" ] || fail "the template built no libmemres-tally.so (the adaptor example)"
exports=$(nm -D --defined-only --format=posix "$tally" | awk '{ print $1 }')
[ "$exports" = "memres_plugin_tally_get_desc" ] || fail "libmemres-tally.so exports: $exports"
pass "template built; counting and the tally adaptor each export only their descriptor"

step "the template's own test (meson test)"
meson test -C "$work/template-build" --print-errorlogs || fail "meson test of the template"
pass "meson test of the template"

step "the template with memres as a Meson subproject (no install, no pkg-config)"
rm -rf "$work/subproject"
mkdir -p "$work/subproject/subprojects"
cp "$template"/*.c "$template"/meson.build "$template"/meson_options.txt "$work/subproject/"
ln -s "$root" "$work/subproject/subprojects/memres"
env -u PKG_CONFIG_PATH meson setup "$work/subproject-build" "$work/subproject" \
  --prefix="$work/subproject-prefix" --wrap-mode=forcefallback -Dwerror=true \
  -Dmemres:werror=false -Dmemres:tests=false >"$work/subproject-setup.log" \
  || { cat "$work/subproject-setup.log"; fail "meson setup with memres as a subproject"; }
grep -q "plugin directory *: $work/subproject-prefix/" "$work/subproject-setup.log" \
  || { cat "$work/subproject-setup.log"; fail "the subproject's plugindir variable"; }
meson compile -C "$work/subproject-build" -j "$jobs" >"$work/subproject-compile.log" \
  || { cat "$work/subproject-compile.log"; fail "meson compile with memres as a subproject"; }
meson test -C "$work/subproject-build" --print-errorlogs counting \
  || fail "meson test of the template with memres as a subproject"
pass "the template builds and its test passes with memres as a subproject"

step "load counting by name through MEMRES_PLUGIN_PATH"
mkdir -p "$work/plugins"
cp "$plugin" "$tally" "$work/plugins/"
# shellcheck disable=SC2046 # pkg-config output is meant to split into arguments
cc -o "$work/test-counting" "$template/test-counting.c" \
  $(pkg-config --cflags --libs memres-2) -pthread || fail "cc with pkg-config memres-2 flags"
MEMRES_PLUGIN_PATH="$work/plugins" MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
  "$work/test-counting" || fail "counting through MEMRES_PLUGIN_PATH"
pass "counting loaded by name from MEMRES_PLUGIN_PATH, counts checked"

if [ -x "$prefix/bin/memres" ]; then
  step "the installed memres command lists the kind"
  # Without LD_LIBRARY_PATH: the installed command must find its own library.
  kinds=$(env -u LD_LIBRARY_PATH MEMRES_PLUGIN_PATH="$work/plugins" \
    MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$prefix/bin/memres" kinds) \
    || fail "memres kinds"
  printf '%s\n' "$kinds"
  printf '%s\n' "$kinds" | grep -q counting || fail "memres kinds does not list counting"
  printf '%s\n' "$kinds" | grep -q '^tally$' || fail "memres kinds does not list tally"
  env -u LD_LIBRARY_PATH MEMRES_PLUGIN_PATH="$work/plugins" \
    MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$prefix/bin/memres" alloc 'tally>stats>host' 1MiB \
    || fail "memres alloc through the tally adaptor"
  pass "memres kinds lists counting and tally; memres alloc 'tally>stats>host' works"
fi

step "install the template and load it from memres's plugin directory"
meson install -C "$work/template-build" >"$work/template-install.log" \
  || { cat "$work/template-install.log"; fail "meson install of the template"; }
[ -f "$plugindir/libmemres-counting.so" ] || fail "libmemres-counting.so not in $plugindir"
env -u MEMRES_PLUGIN_PATH MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
  "$work/test-counting" || fail "counting from the installed plugin directory"
pass "counting loaded from $plugindir"

echo
echo "plugin-template: $passed passed, 0 failed"
