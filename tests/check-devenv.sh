#!/bin/sh
# check-devenv.sh MESON BUILD_ROOT: what `meson devenv -C BUILD_ROOT` gives a command, as a TAP
# stream (Meson test `devenv`, suite build): the build tree's plugin directories on
# MEMRES_PLUGIN_PATH, in front of the user's own directories (an out-of-tree plugin's build
# directory, README's "Without installing"), which stay on it; with none of the user's, the
# build's alone (no empty element).
set -u

meson=$1
root=$2
extra=/nonexistent-memres-devenv-extra

echo "1..2"
got=$(MEMRES_PLUGIN_PATH=$extra "$meson" devenv -C "$root" sh -c 'printf %s "$MEMRES_PLUGIN_PATH"')
case "$got" in
  "$root"/plugins/*:"$extra") echo "ok 1 - the user's MEMRES_PLUGIN_PATH is kept after the build's" ;;
  *) echo "not ok 1 - MEMRES_PLUGIN_PATH=$extra became \"$got\" under meson devenv" ;;
esac
got=$(env -u MEMRES_PLUGIN_PATH "$meson" devenv -C "$root" sh -c 'printf %s "$MEMRES_PLUGIN_PATH"')
case "$got" in
  *:) echo "not ok 2 - an unset MEMRES_PLUGIN_PATH became \"$got\"" ;;
  "$root"/plugins/*) echo "ok 2 - an unset MEMRES_PLUGIN_PATH is the build's plugin directories" ;;
  *) echo "not ok 2 - an unset MEMRES_PLUGIN_PATH became \"$got\"" ;;
esac
