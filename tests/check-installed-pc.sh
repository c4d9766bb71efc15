#!/bin/sh
# check-installed-pc.sh MESON BUILD_ROOT PREFIX LIBDIR CC: the installed memres-2.pc moves with
# the install, as a TAP stream (Meson test `installed-pc`, suite build): `meson install
# --destdir` of the build tree (tags devel and runtime), the staged prefix moved elsewhere, then
# with plain pkg-config and with pkg-config --define-prefix, libdir, includedir and plugindir
# are the moved directories, and a program compiles and links with --cflags --libs and runs.
# (--define-prefix took the prefix two directories above the file, PREFIX/lib for a multiarch
# LIBDIR, and every path of the file rested on ${prefix}: core/pc-relocatable.py.)
set -u

meson=$1
build=$2
prefix=$3
libdir=$4
cc=$5
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

echo "1..3"
if "$meson" install -C "$build" --no-rebuild --quiet --tags devel,runtime \
     --destdir "$tmp/stage" > "$tmp/install.log" 2>&1 \
   && mv "$tmp/stage$prefix" "$tmp/moved"; then
  echo "ok 1 meson install --destdir, the staged prefix moved"
else
  sed 's/^/# /' "$tmp/install.log"
  echo "not ok 1 meson install --destdir, the staged prefix moved"
  exit 0
fi
moved=$tmp/moved
case $libdir in
  /*) libdir_moved=$libdir ;;
  *) libdir_moved=$moved/$libdir ;;
esac
cat > "$tmp/app.c" <<'C'
#include <memres/memres.h>
int
main (void)
{
  GError *error = NULL;
  MemresResource *mr = memres_resource_new ("host", &error);
  int ok = mr != NULL;

  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_error (&error);
  return ok ? 0 : 1;
}
C
# the words of pkg-config's answer that name directories, each resolved
resolved() {
  for word in "$@"; do
    case $word in
      -I*) echo "-I$(realpath -m "${word#-I}")" ;;
      -L*) echo "-L$(realpath -m "${word#-L}")" ;;
    esac
  done
}
n=1
for flag in --dont-define-prefix --define-prefix; do
  n=$((n + 1))
  got=""
  for var in libdir includedir plugindir; do
    value=$(PKG_CONFIG_PATH=$libdir_moved/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} pkg-config "$flag" --variable=$var memres-2)
    got="$got $var=$(realpath -m "$value")"
  done
  want=" libdir=$(realpath -m "$libdir_moved") includedir=$(realpath -m "$moved/include")"
  want="$want plugindir=$(realpath -m "$libdir_moved/memres-2/plugins")"
  # shellcheck disable=SC2046 # the flags are words
  words=$(resolved $(PKG_CONFIG_PATH=$libdir_moved/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} pkg-config "$flag" --cflags --libs \
                       memres-2))
  if [ "$flag" = --define-prefix ]; then
    # GLib's own .pc (Requires) is taken elsewhere by --define-prefix on a multiarch system:
    # memres's words alone are checked here, the program is built with the plain answer
    run_app=true
  else
    run_app='"$cc" "$tmp/app.c" -o "$tmp/app" $(PKG_CONFIG_PATH=$libdir_moved/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} pkg-config --cflags --libs memres-2) 2> "$tmp/err" && LD_LIBRARY_PATH=$libdir_moved${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/app"'
  fi
  if [ "$got" = "$want" ] \
     && echo "$words" | grep -qx -- "-I$(realpath -m "$moved/include/memres-2")" \
     && echo "$words" | grep -qx -- "-L$(realpath -m "$libdir_moved")" \
     && eval "$run_app"; then
    echo "ok $n pkg-config $flag: the moved install's directories"
  else
    echo "# got: $got"
    echo "# want:$want"
    echo "$words" | sed 's/^/# /'
    sed 's/^/# /' "$tmp/err" 2> /dev/null
    echo "not ok $n pkg-config $flag: the moved install's directories"
  fi
done
